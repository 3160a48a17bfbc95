r"""Adafactor on bfloat16/float16 params, grads and state, rounded as torch 2.13's CPU
single-tensor code (``rounding="per-op"``; torch 2.13 has no fused Adafactor, and takes its
foreach path only when asked).

The math is :mod:`npoptim.optim.adafactor`'s torch form. Every tensor op computes in float32
and rounds to the 16-bit format (:math:`R`); ``add``'s ``alpha`` and ``clamp``'s bound are
rounded to the format first, ``mul``'s scalar is float32, and the scalars torch computes in
Python (:math:`\alpha_t`, the clipping denominator) are doubles built from the 16-bit norms
``.item()`` returns. :math:`\epsilon_1` defaults to the format's machine epsilon
(:math:`2^{-7}` for bfloat16, :math:`2^{-10}` for float16). With :math:`w = t^{\tau}`:

.. math::

    \alpha_t &= \max(\epsilon_2,\ N(\theta) / \sqrt{n})\,\min(\gamma, 1/\sqrt t),\qquad
    \theta \leftarrow R(\theta\,(1-\gamma\lambda))\\
    r &\leftarrow R(\mathrm{lerp}(r,\ R(R(N_{\text{row}}(G)^2) / C),\ w)),\qquad
    c \leftarrow R(\mathrm{lerp}(c,\ R(R(N_{\text{col}}(G)^2) / R_{\text{rows}}),\ w))\\
    \hat V &= R\big(R(r\,c) / \max(R(S(r) / R_{\text{rows}}),\ R(\epsilon_1))\big)
        \qquad(\text{vectors: } \hat V = v \leftarrow R(\mathrm{lerp}(v, R(G^2), w)))\\
    U &= R(R(1 / \sqrt{\max(\hat V,\ R(\epsilon_1^2))})\; G),\qquad
    \theta \leftarrow R(\mathrm{fma}(R(-\alpha_t / \max(1, N(U) / (\sqrt n\, d))),\ U,\ \theta))

(the reciprocal square root is float32's ``1 / sqrt``, its root rounded to the format first
in torch's scalar tail.) The norms :math:`N`
(rounded to the format, as torch returns them) and the sum :math:`S` accumulate in float32 in
torch's CPU order, which is not one order for all (measured on an AVX-512 machine, torch 2.13):

* bfloat16, a norm along the contiguous last dimension (:math:`N_{\text{row}}`, and
  :math:`N(\theta)`, :math:`N(U)` over the whole tensor): torch's vectorized last-dimension
  kernel, compiled for AVX2 also on AVX-512 CPUs: 16 values at a time into 8 float32 lanes (the
  first 8 then the next 8), the lanes added left to right, then the ``n % 16`` remaining
  squares one by one (:func:`norm_lanes`);
* float16, and the column norms :math:`N_{\text{col}}` of a matrix of more than one column:
  one running float32 sum of the squares in index order (torch's generic reduction,
  :func:`norm_sequential`; a single column is contiguous, a last-dimension norm to torch);
* the row mean :math:`S(r)/R_{\text{rows}}` (torch's ``mean`` of a 16-bit tensor: a float32
  ``sum``, divided, rounded): ATen's cascade sum (:func:`npoptim.kernels.torch_order.torch_sum`).

Squares of 16-bit values are exact in float32, so these orders are all that matters; torch
splits a reduction between threads only above 32768 elements (compare with
``torch.set_num_threads(1)`` beyond). ``r c`` (torch's ``row_var @ col_var``) is one float32
product per element, rounded. In torch's scalar tail (``torch_cpu_lanes``, see
:mod:`npoptim.precision.adam`) the final ``add(.., alpha)`` rounds the product first, and
``rsqrt`` rounds the square root before dividing. The update reads the whole parameter, so it
is written in NumPy on float32 values (element-wise pieces through the 16-bit kernels); the
new parameter and state are written once computed.
The float class's convention switches (optax's and Keras's forms) are torch's values only here.
"""
import numpy as np

from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import lerp_arrays
from npoptim.optim import adafactor
from npoptim.kernels.torch_order import torch_sum
from npoptim.precision.formats import (FORMATS, MAX_FINITE, bits_of, format_of,
                                       from_float32_array, round_to_array, to_float32_array)
from npoptim.precision.optimizer import LowPrecision, add_alpha_array, rounded_scalar, tail_start

#: torch.finfo(dtype).eps of each format: eps1's default
MACHINE_EPS = {"bfloat16": 2.0 ** -7, "float16": 2.0 ** -10}
#: torch's vectorized bfloat16 norm (its AVX2 kernel): 16 values a step, 8 float32 lanes
NORM_VECTOR, NORM_LANES = 16, 8


@kernel
def norm_lanes(x):
    """torch's CPU 2-norm of the contiguous float32 values ``x`` of a bfloat16 tensor
    (float32, unrounded): squares into 8 lanes, 16 values a step, lanes added left to right,
    the remainder one by one."""
    lanes = np.zeros(NORM_LANES, np.float32)
    main = x.size - x.size % NORM_VECTOR
    for d in range(0, main, NORM_VECTOR):
        for half in range(0, NORM_VECTOR, NORM_LANES):
            for k in range(NORM_LANES):
                v = x[d + half + k]
                lanes[k] += v * v
    total = lanes[0]
    for k in range(1, NORM_LANES):
        total += lanes[k]
    for d in range(main, x.size):
        total += x[d] * x[d]
    return np.sqrt(total)


@kernel
def norm_sequential(x):
    """torch's CPU generic 2-norm (float16, column norms): one float32 sum in index order."""
    total = np.float32(0.0)
    for d in range(x.size):
        total += x[d] * x[d]
    return np.sqrt(total)


@kernel
def _row_norms(g, lanes, out):
    """``out[i] =`` the norm of row ``i`` of the 2-D float32 ``g``: :func:`norm_lanes`
    (``lanes``) or :func:`norm_sequential`."""
    for i in range(g.shape[0]):
        out[i] = norm_lanes(g[i]) if lanes else norm_sequential(g[i])


@kernel
def _column_norms(g, out):
    """``out[j] =`` :func:`norm_sequential` of column ``j`` of the 2-D float32 ``g``: every
    column's sum in row order, the rows read one after another (along memory) with a running
    sum per column."""
    rows, cols = g.shape
    totals = np.zeros(cols, np.float32)
    for i in range(rows):
        for j in range(cols):
            totals[j] += g[i, j] * g[i, j]
    for j in range(cols):
        out[j] = np.sqrt(totals[j])


class Adafactor(LowPrecision, adafactor.Adafactor):
    """``torch.optim.Adafactor`` on bfloat16/float16 arrays, ``rounding="per-op"`` (module
    docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The bfloat16, float16 or uint16 (raw bits) arrays to optimize (updated in place),
        or param groups (dicts with ``"params"``).
    lr : float, default: 0.01
        Learning rate γ (the cap of the relative step size).
    beta2_decay : float, default: -0.8
        Decay exponent τ: β̂_t = 1 - t^τ.
    eps : tuple (float or None, float), default: (None, 0.001)
        (ε1, ε2): ε1 regularizes the second moment (None: the machine epsilon of the parameter's
        dtype), ε2 is the floor of RMS(θ) in the relative step size.
    d : float, default: 1.0
        Clipping threshold of RMS(U) (inf: no clipping).
    weight_decay : float, default: 0.0
        Decoupled weight decay λ: θ(1 - γλ) (torch's ``weight_decay_mode``).
    rounding : {'per-op'}, default: 'per-op'
        Where results are rounded to the 16-bit format (see the module docstring): ``"per-op"``.
    format : {'bfloat16', 'float16'} or None, default: None
        ``"bfloat16"`` or ``"float16"``: the format of raw ``uint16`` arrays (the bits);
        ``ml_dtypes.bfloat16`` and NumPy ``float16`` arrays carry their own.
    torch_cpu_lanes : int or None, default: None
        None: no scalar remainder loop (as on a GPU); or the number of 16-bit lanes of
        torch's CPU vectors (32 with AVX-512 and with AVX2), to round the last
        ``n % lanes`` elements of each tensor as torch's scalar loop does.
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    **torch_options
        The other options of :class:`npoptim.optim.adafactor.Adafactor` (torch's
        ``foreach``, ``differentiable``, ``fused``, ...); its convention switches only at
        torch's values.
    """

    roundings = ("per-op",)

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                 weight_decay=0.0, *, rounding="per-op", format=None, torch_cpu_lanes=None,
                 maximize=False, **torch_options):
        self._low_precision_defaults = dict(rounding=rounding, format=format,
                                            torch_cpu_lanes=torch_cpu_lanes)
        super().__init__(params, lr=lr, beta2_decay=beta2_decay, eps=eps, d=d,
                         weight_decay=weight_decay, maximize=maximize, **torch_options)

    def _prepare_grad(self, grad, param, group, where):
        # torch converts clamp's bounds to the 16-bit type, raising mid-step for one beyond
        # the format's largest finite value; eps2 that large would overflow alpha's conversion
        fmt = format_of(param, group["format"])
        eps1, eps2 = group["eps"]
        for name, value in (("eps[0]**2", None if eps1 is None else eps1 * eps1),
                            ("eps[1]", eps2)):
            if value is not None and np.isfinite(value) and abs(value) > MAX_FINITE[fmt]:
                raise ValueError(f"{where}: {name}={value!r} cannot be converted to {fmt} "
                                 "without overflow")
        return super()._prepare_grad(grad, param, group, where)

    def _apply(self, prepared):
        # torch's loop sets eps1 from the first parameter of each group it updates (the float
        # class's _apply resets a record of its own, which this class's _update does not read)
        self._group_eps1 = {}
        super()._apply(prepared)

    def _update(self, param, grad, state, group, index, shape):
        fmt = format_of(param, group["format"])
        code = FORMATS[fmt]
        eps1, eps2 = group["eps"]
        if eps1 is None:
            eps1 = self._group_eps1.setdefault(id(group), MACHINE_EPS[fmt])
        lr, d, weight_decay = group["lr"], group["d"], group["weight_decay"]

        def rounded(values):  # R(values), float32
            return round_to_array(values, fmt)

        p = to_float32_array(param, fmt)
        g = to_float32_array(grad, fmt)
        if group["maximize"]:
            g = -g
        state["step"] += 1
        step = float(state["step"])
        weight = np.float32(step ** group["beta2_decay"])
        rho = min(lr, 1 / (step ** 0.5))
        alpha = max(eps2, float(rounded(self._norm(p, fmt))) / (param.size ** 0.5)) * rho
        if weight_decay != 0:
            p = rounded(p * np.float32(1 - lr * weight_decay))

        if "row_var" in state:
            g = g.reshape(shape)
            nrows, ncols = shape[-2], shape[-1]
            row_var = to_float32_array(state["row_var"], fmt)
            col_var = to_float32_array(state["col_var"], fmt)
            row_norms = np.empty(row_var.shape, np.float32)
            _row_norms(np.ascontiguousarray(g.reshape(-1, ncols)), fmt == "bfloat16",
                       row_norms.reshape(-1))
            col_norms = np.empty(col_var.shape, np.float32)
            for matrix, out in zip(g.reshape(-1, nrows, ncols), col_norms.reshape(-1, ncols)):
                if ncols == 1:  # a contiguous column: torch's last-dim kernel
                    out[0] = self._norm(matrix, fmt)
                else:
                    _column_norms(matrix, out)
            row_mean = rounded(rounded(np.square(rounded(row_norms))) / np.float32(ncols))
            row_var = rounded(lerp_arrays(row_var, row_mean, weight))
            col_mean = rounded(rounded(np.square(rounded(col_norms))) / np.float32(nrows))
            col_var = rounded(lerp_arrays(col_var, col_mean, weight))
            row_sums = np.array([torch_sum(np.ascontiguousarray(r))
                                 for r in row_var.reshape(-1, nrows)], np.float32)
            row_var_mean = rounded(row_sums / np.float32(nrows)).reshape(col_var.shape[:-1]
                                                                        + (1,))
            floor = np.float32(rounded_scalar(eps1, code))
            var_estimate = rounded(rounded(row_var * col_var)
                                   / np.maximum(row_var_mean, floor)).reshape(-1)
            new_state = {"row_var": row_var, "col_var": col_var}
        else:
            variance = to_float32_array(state["variance"], fmt).reshape(-1)
            var_estimate = rounded(lerp_arrays(variance, rounded(g * g), weight))
            new_state = {"variance": var_estimate}

        floor = np.float32(rounded_scalar(eps1 * eps1, code))
        root = np.sqrt(np.maximum(var_estimate, floor))
        tail = tail_start(param, group)
        root[tail:] = rounded(root[tail:])  # torch's scalar rsqrt rounds the root first
        update = rounded(rounded(np.float32(1.0) / root) * g.reshape(-1))
        denom = max(1.0, float(rounded(self._norm(update, fmt))) / ((update.size ** 0.5) * d))
        new_param = np.empty(param.size, np.float32)
        add_alpha_array(p, np.float32(rounded_scalar(-alpha / denom, code)), update, code,
                        tail, new_param)

        bits_of(param)[...] = from_float32_array(new_param, fmt)
        for name, values in new_state.items():
            bits_of(state[name]).reshape(-1)[...] = from_float32_array(values, fmt).reshape(-1)

    @staticmethod
    def _norm(values, fmt):
        """torch's CPU 2-norm of contiguous 16-bit values (float32, before its rounding)."""
        values = np.ascontiguousarray(values, np.float32).reshape(-1)
        return norm_lanes(values) if fmt == "bfloat16" else norm_sequential(values)
