r"""L-BFGS on bfloat16/float16 params and grads, rounded as torch 2.13's CPU
``torch.optim.LBFGS`` computes with 16-bit tensors (``rounding="per-op"``; torch has one
implementation).

The algorithm is :mod:`npoptim.optim.lbfgs`'s with torch's conventions only (no optax
switches, no ``"zoom"`` line search). What the 16-bit format (:math:`R`, round to nearest
even) changes is where each value lives, as in torch's code:

* **Vectors** (the flat gradient, ``d``, ``y``, ``s``, the two-loop's ``q``/``r``, the
  history) are 16-bit tensors: every tensor op computes in float32 and rounds once,
  :math:`y = R(g - g')`, :math:`s = R(d\,t)`, :math:`d = R(q\,H_0)`; ``add`` with ``alpha``
  (``q.add_(y, alpha=-al)``, the parameter step ``p.add_(d, alpha=t)``) is
  ``fma(R(alpha), b, a)`` rounded once in torch's vector loop, :math:`R(a + R(\alpha b))` in
  its scalar tail (``torch_cpu_lanes``, see :mod:`npoptim.precision.optimizer`; the step's
  tail is per parameter, the two-loop's over the flat vector).
* **Reductions** accumulate in float32, then round: ``dot`` in the order of ATen's
  ``dot_with_fp32_arith`` (its AVX2 kernel, which torch 2.13 runs on AVX2 and AVX-512 CPUs:
  eight float32 accumulators of 8 lanes over blocks of 64 products, folded by halving, the
  lanes added as a tree; then 16-element vectors into one accumulator, two products per
  lane; then the rest one by one), ``abs().sum()`` in ATen's cascade order
  (:func:`npoptim.kernels.torch_order.torch_sum`, 16-element vectors loaded as the sum of their two
  halves), ``abs().max()`` exactly. Products of 16-bit values are exact in float32.
* **Scalars** are either 0-d 16-bit tensors (:class:`Scalar16`: ``ys``, ``ro``, ``al``,
  ``H_diag``, ``gtd``, the line search's slopes and the steps interpolated from them, and the
  first step ``t = R(R(1/R(|g|_1)) lr)``) or Python floats (``loss``, ``lr``, a ``t`` made of
  Python floats only). Mixing them follows torch's rules: a Python float added to or compared
  with a 0-d tensor is first rounded to the format (via float32); multiplied or divided, it is
  a float32 operand; ``x / tensor`` is ``reciprocal`` then a product.

Bit for bit with torch on the CPU whose ``dot`` order this is (``tests/cpu_probe.py`` checks
it), with or without ``line_search_fn="strong_wolfe"``, for flat vectors up to 32768 elements
(torch splits longer sums between threads). Params may be bfloat16, float16 or ``uint16``
bits (``format``), all of one format; the closure returns ``(loss, grads)`` with grads of the
params' dtype. State vectors are float32 arrays holding the 16-bit values exactly (the
:meth:`LBFGS.state_dict` arrays have the params' dtype, 0-d tensors as 0-d arrays, as
torch's).
"""
import numbers

import numpy as np

from npoptim.kernels import torch_order
from npoptim.kernels.jit import kernel
from npoptim.optim import lbfgs
from npoptim.precision.formats import (BFLOAT16, FLOAT16, FORMATS, MAX_FINITE, bits_of,
                                       format_of, from_float32_array, round_to,
                                       to_float32_array)
from npoptim.precision.optimizer import LowPrecision, add_alpha_array, rounded_scalar


# ------------------------------------------------------------------ 0-d 16-bit tensors
@kernel
def _add16(a, b, code):
    return round_to(a + b, code)


@kernel
def _sub16(a, b, code):
    return round_to(a - b, code)


@kernel
def _mul16(a, b, code):
    return round_to(a * b, code)


@kernel
def _div16(a, b, code):
    return round_to(a / b, code)


@kernel
def _sqrt16(a, code):
    return round_to(np.sqrt(a), code)


class Scalar16:
    """A 0-d bfloat16/float16 tensor as torch computes with it (module docstring): ``value``
    a float32 the format holds, ``code`` the format (:data:`npoptim.precision.formats.FORMATS`).
    Arithmetic with another one rounds once; with a Python number, the number is rounded to
    the format first for ``+``, ``-`` and comparisons, a float32 for ``*`` and ``/``."""

    __slots__ = ("value", "code")

    def __init__(self, value, code):
        self.value = np.float32(value)
        self.code = code

    @classmethod
    def rounded(cls, value, code):
        """The float32 ``value`` rounded to the format (a reduction's result)."""
        return cls(round_to(np.float32(value), code), code)

    def _wrapped(self, other):
        """A Python number as torch casts it into the tensor's dtype (add, sub, compare)."""
        if isinstance(other, Scalar16):
            return other.value
        if isinstance(other, numbers.Real):
            return np.float32(rounded_scalar(other, self.code))
        return None

    def _operand(self, other):
        """A Python number as torch's mul/div kernels take it (a float32)."""
        if isinstance(other, Scalar16):
            return other.value
        if isinstance(other, numbers.Real):
            return np.float32(other)
        return None

    def _make(self, value):
        return Scalar16(value, self.code)

    def __add__(self, other):
        b = self._wrapped(other)
        return NotImplemented if b is None else self._make(_add16(self.value, b, self.code))

    __radd__ = __add__

    def __sub__(self, other):
        b = self._wrapped(other)
        return NotImplemented if b is None else self._make(_sub16(self.value, b, self.code))

    def __rsub__(self, other):
        b = self._wrapped(other)
        return NotImplemented if b is None else self._make(_sub16(b, self.value, self.code))

    def __mul__(self, other):
        b = self._operand(other)
        return NotImplemented if b is None else self._make(_mul16(self.value, b, self.code))

    __rmul__ = __mul__

    def __truediv__(self, other):
        b = self._operand(other)
        return NotImplemented if b is None else self._make(_div16(self.value, b, self.code))

    def __rtruediv__(self, other):
        # torch's Tensor.__rdiv__: self.reciprocal() * other
        b = self._operand(other)
        if b is None:
            return NotImplemented
        reciprocal = _div16(np.float32(1.0), self.value, self.code)
        return self._make(_mul16(reciprocal, b, self.code))

    def __neg__(self):
        return self._make(-self.value)

    def __abs__(self):
        return self._make(abs(self.value))

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # np.sqrt (cubic interpolation's) as torch's tensor.sqrt(); nothing else
        if ufunc is np.sqrt and method == "__call__" and len(inputs) == 1 and not kwargs:
            return self._make(_sqrt16(self.value, self.code))
        return NotImplemented

    def _compare(self, other, op):
        b = self._wrapped(other)
        return NotImplemented if b is None else bool(op(self.value, b))

    def __lt__(self, other):
        return self._compare(other, np.less)

    def __le__(self, other):
        return self._compare(other, np.less_equal)

    def __gt__(self, other):
        return self._compare(other, np.greater)

    def __ge__(self, other):
        return self._compare(other, np.greater_equal)

    def __float__(self):
        return float(self.value)

    def __repr__(self):
        return f"Scalar16({float(self.value)!r}, {('bfloat16', 'float16')[self.code]})"


# -------------------------------------------------------------------- vector operations
#: ATen's dot_with_fp32_arith (AVX2): float32 lanes per register, registers per block
_DOT_LANES = 8
_DOT_REGISTERS = 8


@kernel
def _fold_lanes(acc, width):
    """``vec_reduce_all`` of the first ``width`` lanes of ``acc`` (a power of two): halving,
    lane ``k`` takes lane ``k + w`` for ``w = width/2, ..., 1``."""
    while width > 1:
        width //= 2
        for k in range(width):
            acc[k] += acc[k + width]
    return acc[0]


@kernel
def dot16(x, y):
    """The float32 ``x . y`` of two float32 arrays of 16-bit values, in the order of ATen's
    ``dot_with_fp32_arith`` (module docstring); unrounded."""
    n = x.size
    lanes, registers = _DOT_LANES, _DOT_REGISTERS
    block = lanes * registers
    acc = np.zeros((registers, lanes), np.float32)
    aligned = n - n % block
    for j in range(0, aligned, block):
        for r in range(registers):
            for k in range(lanes):
                acc[r, k] += x[j + r * lanes + k] * y[j + r * lanes + k]
    width = registers
    while width > 1:
        width //= 2
        for r in range(width):
            for k in range(lanes):
                acc[r, k] += acc[r + width, k]
    total = _fold_lanes(acc[0], lanes)
    tail = np.zeros(lanes, np.float32)
    vector = 2 * lanes  # a 16-bit vector: two float32 registers
    aligned_vec = n - n % vector
    for j in range(aligned, aligned_vec, vector):
        for half in range(2):
            for k in range(lanes):
                tail[k] += x[j + half * lanes + k] * y[j + half * lanes + k]
    total += _fold_lanes(tail, lanes)
    for j in range(aligned_vec, n):
        total += x[j] * y[j]
    return total


def sum16(x):
    """The float32 ``x.sum()`` of a float32 array of 16-bit values, in ATen's cascade order
    (AVX2): a 16-element vector is loaded as the float32 sum of its halves; shorter arrays
    are read element by element; unrounded."""
    n = x.size
    vector = 16
    if n < vector:
        return torch_order.cascade_sum(x, 1, n)
    count = n // vector
    halves = x[:count * vector].reshape(count, 2, vector // 2)
    loaded = np.concatenate([(halves[:, 0] + halves[:, 1]).reshape(-1), x[count * vector:]])
    return torch_order.cascade_sum(loaded, vector // 2, count)


# (each loop written out for each format, the format a constant: see add_alpha_array)
@kernel
def _difference16(x, y, code, out):
    if code == BFLOAT16:
        for i in range(x.size):
            out[i] = round_to(x[i] - y[i], BFLOAT16)
    else:
        for i in range(x.size):
            out[i] = round_to(x[i] - y[i], FLOAT16)


@kernel
def _scaled16(x, scale, code, out):
    if code == BFLOAT16:
        for i in range(x.size):
            out[i] = round_to(x[i] * scale, BFLOAT16)
    else:
        for i in range(x.size):
            out[i] = round_to(x[i] * scale, FLOAT16)


class LBFGS(LowPrecision, lbfgs.LBFGS):
    """``torch.optim.LBFGS`` on bfloat16/float16 arrays, ``rounding="per-op"`` (the module
    docstring); ``format`` names the format of raw ``uint16`` arrays, ``torch_cpu_lanes``
    torch's 16-bit vector width (its scalar tail rounds ``add``'s product first).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The bfloat16, float16 or uint16 (raw bits) arrays to optimize (updated in place),
        or param groups (dicts with ``"params"``).
    lr : float, default: 1
        Step length of an iteration (the line search's first trial).
    max_iter : int, default: 20
        Iterations per ``step``.
    max_eval : int or None, default: None
        Closure evaluations per ``step`` (None: max_iter * 5 // 4).
    tolerance_grad : float, default: 1e-07
        Stop when the gradient's largest entry is within this.
    tolerance_change : float, default: 1e-09
        Stop when the step or the change of loss is within this.
    history_size : int, default: 100
        Number of (s, y) pairs kept.
    line_search_fn : str or None, default: None
        None (fixed step) or ``"strong_wolfe"`` (torch's); ``"zoom"`` is refused here.
    rounding : {'per-op'}, default: 'per-op'
        Where results are rounded to the 16-bit format (see the module docstring): ``"per-op"``.
    format : {'bfloat16', 'float16'} or None, default: None
        ``"bfloat16"`` or ``"float16"``: the format of raw ``uint16`` arrays (the bits);
        ``ml_dtypes.bfloat16`` and NumPy ``float16`` arrays carry their own.
    torch_cpu_lanes : int or None, default: None
        None: no scalar remainder loop (as on a GPU); or the number of 16-bit lanes of
        torch's CPU vectors (32 with AVX-512 and with AVX2), to round the last
        ``n % lanes`` elements of each tensor as torch's scalar loop does.
    **torch_options
        The other options of :class:`npoptim.optim.lbfgs.LBFGS` (torch's
        ``foreach``, ``differentiable``, ``fused``, ...); its convention switches only at
        torch's values.
    """

    roundings = ("per-op",)

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None, *,
                 rounding="per-op", format=None, torch_cpu_lanes=None, **torch_options):
        # (torch_options: the float class's other options, e.g. flavor=, which the
        # conventions check refuses unless they are torch's)
        self._low_precision_defaults = dict(rounding=rounding, format=format,
                                            torch_cpu_lanes=torch_cpu_lanes)
        super().__init__(params, lr=lr, max_iter=max_iter, max_eval=max_eval,
                         tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                         history_size=history_size, line_search_fn=line_search_fn,
                         **torch_options)

    def add_param_group(self, param_group):
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        formats = {format_of(p, group["format"]) for p in group["params"]}
        if len(formats) > 1 or len({p.dtype for p in group["params"]}) > 1:
            del self.param_groups[-1]
            raise TypeError("npoptim.precision.LBFGS treats the parameters as one flat vector: "
                            "they must all have one dtype (got "
                            f"{sorted({str(p.dtype) for p in group['params']})})")

    def _check_group(self, group):
        super()._check_group(group)
        if group["line_search_fn"] == "zoom":
            raise ValueError("line_search_fn='zoom' (optax's zoom line search) is not "
                             "implemented for 16-bit parameters: npoptim.precision.LBFGS has "
                             "torch's line searches only (None, 'strong_wolfe')")

    # ---------------------------------------------------------------- the 16-bit vectors
    @property
    def _format(self):
        group = self.param_groups[0]
        return format_of(group["params"][0], group["format"])

    @property
    def _code16(self):
        return FORMATS[self._format]

    def _tail_start(self, size):
        lanes = self.param_groups[0]["torch_cpu_lanes"]
        return size if lanes is None else size - size % lanes

    def _alpha(self, alpha):
        """``add``'s ``alpha`` converted to the format (torch raises beyond its range)."""
        value = float(alpha)
        if np.isfinite(value) and abs(value) > MAX_FINITE[self._format]:
            raise ValueError(f"LBFGS step size {value!r} cannot be converted to "
                             f"{self._format} without overflow")
        return np.float32(rounded_scalar(value, self._code16))

    def _gather_flat_grad(self, grads):
        return to_float32_array(super()._gather_flat_grad(grads), self._format)

    def _dot(self, x, y):
        return Scalar16.rounded(dot16(x, y), self._code16)

    def _abs_sum(self, x):
        return Scalar16.rounded(sum16(np.abs(x)), self._code16)

    def _max_abs(self, x):
        return Scalar16(np.max(np.abs(x)), self._code16)

    def _difference(self, x, y):
        out = np.empty_like(x)
        _difference16(x, y, self._code16, out)
        return out

    def _scaled(self, x, scale):
        out = np.empty_like(x)
        _scaled16(x, np.float32(scale), self._code16, out)
        return out

    def _axpy(self, x, alpha, y):
        out = np.empty_like(x)
        add_alpha_array(x, self._alpha(alpha), y, self._code16, self._tail_start(x.size), out)
        return out

    def _add_grad(self, step_size, update):
        """``p.add_(update, alpha=step_size)``, parameter by parameter (each its own tail)."""
        alpha, offset, fmt = self._alpha(step_size), 0, self._format
        for p in self.param_groups[0]["params"]:
            bits = bits_of(p).reshape(-1)
            out = np.empty(p.size, np.float32)
            add_alpha_array(to_float32_array(bits, fmt), alpha, update[offset:offset + p.size],
                            self._code16, self._tail_start(p.size), out)
            bits[...] = from_float32_array(out, fmt)
            offset += p.size

    # ----------------------------------------------------------------------- state_dict
    def _array16(self, values):
        """float32 ``values`` (exact in the format) as an array of the params' dtype."""
        bits = from_float32_array(values, self._format)
        dtype = self.param_groups[0]["params"][0].dtype
        return bits if dtype == np.uint16 else bits.view(dtype)

    def _export16(self, value):
        if isinstance(value, Scalar16):
            return self._array16(np.array(value.value))
        if isinstance(value, np.ndarray):
            return self._array16(value)
        if isinstance(value, list):
            return [self._export16(v) for v in value]
        return value

    def state_dict(self):
        """torch's layout: vectors of the params' dtype, 0-d tensors as 0-d arrays."""
        out = super().state_dict()
        out["state"] = {i: {k: self._export16(v) for k, v in entry.items()}
                        for i, entry in out["state"].items()}
        return out

    def _load_param_state(self, entry, param, group, where):
        fmt = format_of(param, group["format"])
        code = FORMATS[fmt]

        def widened(value, name):
            if isinstance(value, (list, tuple)):
                return [widened(v, f"{name}[{k}]") for k, v in enumerate(value)]
            if value is None or isinstance(value, numbers.Real) and not isinstance(
                    value, np.generic):
                return value
            arr = np.asarray(value)
            if arr.dtype == param.dtype:
                return to_float32_array(arr, fmt)
            if arr.dtype.kind in "biu" and arr.shape == ():  # a count
                return value
            if arr.dtype.kind != "f":
                raise ValueError(f"{name} must be {param.dtype} or float values, got "
                                 f"{arr.dtype}")
            wide = arr.astype(np.float32)
            if not (np.array_equal(to_float32_array(from_float32_array(wide, fmt), fmt), wide,
                                   equal_nan=True) and np.array_equal(wide, arr, equal_nan=True)):
                raise ValueError(f"{name} has values that {fmt} does not hold exactly")
            return wide

        if not isinstance(entry, dict):
            raise ValueError(f"{where} must be a dict")
        wide = {k: widened(v, f"{where}['{k}']") for k, v in entry.items()}
        out = lbfgs.LBFGS._load_param_state(self, wide, np.empty(param.shape, np.float32),
                                            group, where)

        def scalar(value):
            return Scalar16(value, code) if isinstance(value, np.float32) else value

        for key in ("t", "H_diag"):
            if key in out:
                out[key] = scalar(out[key])
        for key in ("ro", "al"):
            if out.get(key) is not None:
                out[key] = [scalar(v) for v in out[key]]
        return out
