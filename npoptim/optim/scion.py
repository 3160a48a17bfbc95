r"""Scion (Pethick et al., 2025): momentum, then a norm-constrained linear minimization oracle.

For a parameter :math:`\theta` with gradient :math:`G`, momentum weight :math:`\alpha` (the
weight of the *new* gradient, "one minus the usual momentum"), learning rate :math:`\gamma`,
radius (``scale``) :math:`\rho` and the oracle :math:`\mathrm{lmo}` of the chosen norm:

.. math::

    M &\leftarrow (1-\alpha) M + \alpha G\\
    \theta &\leftarrow \theta - \gamma\rho\,\mathrm{lmo}(M)
        &&\text{(unconstrained, uScion), or}\\
    \theta &\leftarrow (1-\gamma)\,\theta - \gamma\rho\,\mathrm{lmo}(M)
        &&\text{(}\texttt{constraint=True}\text{, Scion)}

(:math:`M` is the state ``momentum_buffer``). The constrained form is the conditional gradient
(Frank–Wolfe) step towards the point :math:`-\rho\,\mathrm{lmo}(M)` of the norm ball of radius
:math:`\rho`, so it keeps the parameter inside it: a weight decay of :math:`\gamma` tied to the
step. ``lmo(M)`` is the unit-norm direction :math:`\arg\min_{\|D\|\le 1}\langle M, D\rangle`
up to the sign the update subtracts, per parameter, by ``norm=`` (A rows, B columns of a
matrix, :math:`\epsilon'` = 1e-8, ``LMO_EPS``):

* ``"spectral"`` (2-D): :math:`\mathrm{NS}_k(M)\cdot s` with :math:`s=\sqrt{A/B}`
  (``normalized=True``) or :math:`\sqrt A` (``normalized=False``), :math:`\max(1, s)` with
  ``max_scale=True``; :math:`\mathrm{NS}_k` is Muon's Newton–Schulz iteration
  (:mod:`npoptim.optim.orthogonalize`), in bfloat16 as both implementations run it
  (``ns_dtype="param"``: in the parameter's dtype).
* ``"spectral_conv"`` (3-D and more, a convolution's (out, in, k...)): the Newton–Schulz of the
  (out, in·k...) matrix times :math:`\sqrt{\mathrm{out}/\mathrm{in}}/\prod k`.
* ``"sign"`` (2-D and more): :math:`\mathrm{sign}(M)/B` (``normalized=False``: without
  :math:`1/B`), :math:`B` the second size.
* ``"bias"`` (any): :math:`M/(\mathrm{rms}_0(M) + \epsilon')`, the RMS over the first axis.
* ``"col"`` (2-D): column :math:`j` divided by :math:`r_j + \epsilon'`, with
  :math:`r_j = \|M_{\cdot j}\|_2/\sqrt A` (times :math:`B` with ``normalized=True``);
  ``transpose=True`` (an embedding stored (vocab, dim)) normalizes :math:`M^\top` instead.
* ``"row"`` (1-D and more): row :math:`i` (the last axis) divided by :math:`r_i + \epsilon'`,
  with :math:`r_i = \|M_{i\cdot}\|_2` (times :math:`\sqrt B` with ``normalized=True``, the
  default); ``transpose`` as for col.
* ``"auto"`` (the default): ``"bias"`` for 0-D and 1-D, ``"spectral"`` for 2-D,
  ``"spectral_conv"`` for 3-D and 4-D parameters (with their defaults).
* ``"none"``: :math:`M` itself (pytorch_optimizer's ``LMONorm.NONE``).

The radius :math:`\rho` is a group option, so each layer gets its own (the paper's
``scale``: e.g. the hidden layers spectral with :math:`\rho`, the output layer sign with
:math:`60\rho`). pytorch_optimizer adds a weight decay to the unconstrained form
(``weight_decay`` :math:`\lambda`): decoupled, :math:`\theta(1-\gamma\lambda)` before the step
(``weight_decouple=True``), or :math:`G + \lambda\theta` (False); the constrained form has
its own decay, so npoptim refuses ``weight_decay`` with ``constraint=True`` (pytorch_optimizer
ignores it there).

**ScionLight** (``momentum_form="sum"``): the authors' memory-light form keeps the average in
the gradient buffer ``p.grad``, scaled by :math:`1-\alpha` after each step, so the next
backward pass adds the new gradient to it: :math:`M \leftarrow (1-\alpha)M + G` and
:math:`\mathrm{lmo}(M)`, the average's :math:`1/\alpha` times (the oracles are scale-free but
for their :math:`\epsilon`, :math:`\epsilon'` and ``"none"``). npoptim holds :math:`M` in its
state and takes the new gradient alone, so with ScionLight one does not skip ``zero_grad``;
at :math:`\alpha = 1` the reference codes leave ``p.grad`` unscaled (it accumulates unless
zeroed), npoptim's :math:`M` is the new gradient.

Sources: the paper, arXiv 2502.07529 ("Training Deep Learning Models with Norm-Constrained
LMOs"); the authors' code, LIONS-EPFL/scion ``scion.py`` (classes ``Scion``, ``ScionLight``
and the norms ``ColNorm``, ``RowNorm``, ``BiasRMS``, ``SpectralConv``, ``Spectral``,
``Sign``, ``Auto``); pytorch_optimizer 4.1.0 ``pytorch_optimizer/optimizer/scion.py``
(``SCION``, ``SCIONLight``, ``LMONorm``), whose Newton–Schulz is
``optimizer/utils/matrix.py`` ``zero_power_via_newton_schulz_5``.

**Where the implementations differ** (``variant=``: ``"pytorch_optimizer"``, the default,
or ``"lions_epfl"``, the authors'; each difference a switch the variant sets, a switch given
explicitly overrides it):

* ``ns_eps_mode``: pytorch_optimizer scales by :math:`1/\max(\|X\|_F, 10^{-7})`
  (``"max"``), the authors by :math:`1/(\|X\|_F + 10^{-7})` (``"added"``, Keller Jordan's).
* ``ns_form``: pytorch_optimizer's iteration is two fused ``addmm`` (``"addmm"``, torch's
  Muon's), the authors' ``B = b*A + c*A@A; X = a*X + B@X`` with every product, multiple and
  sum rounded to bfloat16 on its own (``"separate"``). The authors wrap it in
  ``@torch.compile``, whose inductor fuses the elementwise parts in float32 and rounds once
  per fused kernel: their compiled bits differ from their eager ones (and from npoptim's, the
  eager order) by bfloat16 units; with ``TORCHDYNAMO_DISABLE=1`` they are the eager ones.
  Measured against the authors' ``scion.py`` (commit f58a393, torch 2.13 CPU, not part of the
  tests: their code is not committed here): eager, 24 steps of every norm and shape of
  tests/test_scion.py, Scion and ScionLight, constrained or not, momentum 0.1, 0.5 and 1, the
  float64 parameters agree to 2.7e-16 of their scale (the same bfloat16 updates); compiled,
  to 5.6e-3. tests/test_scion.py checks the eager form in CI against the authors' step
  written out in torch around their Newton–Schulz, which is Keller Jordan's
  ``zeropower_via_newtonschulz5`` (muon-optimizer 0.1.0's, the same code).
* ``momentum_form``: pytorch_optimizer's ``d.lerp_(grad, α)`` (``"lerp"``, torch's lerp
  rounding) and the authors' ``buf.mul_(1-α).add_(g, alpha=α)`` (``"mul_add"``), the same
  in real arithmetic (an ulp apart); ``"sum"`` is either's ScionLight.

And some not switched: the authors' constructor defaults are ``momentum=1.0`` (no averaging)
and ``unconstrained=False`` (constrained), pytorch_optimizer's (and npoptim's) ``momentum=0.1``
and ``constraint=False``: pass ``constraint=True`` for the authors' default form. The authors'
``ColNorm`` multiplies by :math:`1/\sqrt A` where pytorch_optimizer (and npoptim) divide by
:math:`\sqrt A` (an ulp apart). The authors' ``SpectralConv`` divides a 4-D parameter by
:math:`k^2` (its third size squared), pytorch_optimizer by :math:`\prod k` (the kernel's
volume): the same for square kernels; npoptim takes the volume. The authors have no weight
decay (beyond the constraint) and no ``"none"`` norm; their ``Sign`` takes 2-D parameters
only, pytorch_optimizer's any with a second size (npoptim takes pytorch_optimizer's shapes).
pytorch_optimizer's ``foreach`` path (its default) stacks parameters of one shape into a
batched Newton–Schulz (``baddbmm``); npoptim orthogonalizes one matrix at a time, as its
``foreach=False`` path does (with the iteration in float64 the two paths agree to 5e-16; in
bfloat16 the batched products may sum in another order).
Neither the ``init()`` methods (the norm-ball initializations) nor pytorch_optimizer's
``maximize`` are reproduced. A zero-size parameter is left alone.
"""
import math
import typing

import numpy as np

from npoptim.kernels.bfloat16 import round_to_bfloat16
from npoptim.kernels.scalar import lerp_arrays
from npoptim.optim.optimizer import Optimizer, typed
from npoptim.optim.options import (FLOOR_ALIASES, VARIANT_DEFAULT, check_choice, check_flag,
                                   check_no_variant, check_positive, is_real, resolve_variant)
from npoptim.optim.orthogonalize import (DEFAULT_A, DEFAULT_B, DEFAULT_C, DEFAULT_NS_STEPS, EPS,
                                         NS_FORMS, zeropower_via_newtonschulz)

#: The floor ε' added to the col, row and bias norms (both implementations' 1e-8).
LMO_EPS = 1e-8
#: The norms (``norm=``), each with the fewest and most dimensions (None: no limit) of the
#: parameters it takes (see the docstring).
NORMS = {"auto": (0, 4), "spectral": (2, 2), "spectral_conv": (3, None), "sign": (2, None),
         "bias": (0, None), "col": (2, 2), "row": (1, None), "none": (0, None)}
#: The options of the norms (None: the norm's own default), and the norms that take them.
NORM_OPTIONS = {"normalized": ("spectral", "sign", "col", "row"), "max_scale": ("spectral",),
                "transpose": ("col", "row")}
#: Each norm's ``normalized`` when it is None (both implementations' defaults).
NORMALIZED_DEFAULT = {"spectral": True, "sign": True, "col": False, "row": True}
MOMENTUM_FORMS = ("lerp", "mul_add", "sum")

#: The published forms (:func:`npoptim.optim.options.resolve_variant`): pytorch_optimizer
#: 4.1.0's SCION and the authors' LIONS-EPFL/scion (see the module docstring).
VARIANTS = {
    "pytorch_optimizer": dict(ns_eps_mode="max", ns_form="addmm", momentum_form="lerp"),
    "lions_epfl": dict(ns_eps_mode="added", ns_form="separate", momentum_form="mul_add"),
}
ALIASES = {"authors": "lions_epfl"}


class ScionLMO(typing.NamedTuple):
    """How one parameter's oracle is computed (resolved from its group and shape)."""
    norm: str           # the norm: "auto" resolved by the parameter's dimensions
    normalized: bool    # divide by the fan-in (spectral, sign, col, row; the norm's default)
    max_scale: bool     # spectral: max(1, s) for the shape scale s
    transpose: bool     # col, row: normalize the transpose (embeddings stored (vocab, dim))


def _takes(norm, ndim):
    fewest, most = NORMS[norm]
    return fewest <= ndim and (most is None or ndim <= most)


def _dimensions(norm):
    fewest, most = NORMS[norm]
    return (f"{fewest}" if most == fewest else f"{fewest} or more" if most is None
            else f"{fewest} to {most}")


def resolve_lmo(group, shape):
    """The :class:`ScionLMO` of a parameter of ``shape`` in ``group``; ``ValueError`` if the
    norm does not take it."""
    norm, ndim = group["norm"], len(shape)
    if not _takes(norm, ndim):
        raise ValueError(f"Scion's norm={norm!r} takes parameters of {_dimensions(norm)} "
                         f"dimensions, got shape {tuple(shape)}")
    if norm == "auto":
        norm = "bias" if ndim <= 1 else "spectral" if ndim == 2 else "spectral_conv"
        return ScionLMO(norm, NORMALIZED_DEFAULT.get(norm, False), False, False)
    normalized = group["normalized"]
    if normalized is None:
        normalized = NORMALIZED_DEFAULT.get(norm, False)
    if group["transpose"] and ndim != 2:
        raise ValueError(f"Scion's transpose=True takes 2-D parameters, got {tuple(shape)}")
    return ScionLMO(norm, bool(normalized), bool(group["max_scale"]), bool(group["transpose"]))


def shape_scale(lmo, shape):
    """The factor the orthogonalized matrix is multiplied by: spectral's sqrt(A/B) (or
    sqrt(A); max(1, .) with max_scale), spectral_conv's sqrt(out/in)/volume."""
    if lmo.norm == "spectral":
        rows, cols = shape
        s = math.sqrt(rows / cols) if lmo.normalized else math.sqrt(rows)
        return max(1.0, s) if lmo.max_scale else s
    volume = math.prod(shape[2:])
    return math.sqrt(shape[0] / shape[1]) / volume


def lmo_direction(m, lmo, group):
    """The oracle's direction of ``m`` (an array of the parameter's shape), before the radius:
    an array of ``m``'s dtype, or bfloat16 values in float32 for the spectral norms in
    bfloat16 (the update as torch holds it)."""
    eps = m.dtype.type(LMO_EPS)
    if lmo.norm == "none":
        return m.copy()
    if lmo.norm == "sign":
        sign = np.sign(m)
        return sign / m.dtype.type(m.shape[1]) if lmo.normalized else sign
    if lmo.norm == "bias":
        flat = m.reshape(1) if m.ndim == 0 else m
        rms = np.sqrt(np.sum(np.square(flat), axis=0, keepdims=True)
                      / m.dtype.type(flat.shape[0]))
        return (flat / (rms + eps)).reshape(m.shape)
    if lmo.norm in ("col", "row"):
        g = m.T if lmo.transpose else m
        if lmo.norm == "col":  # sqrt(sum over rows) / sqrt(A), times B if normalized
            rms = np.sqrt(np.sum(np.square(g), axis=0, keepdims=True)) / math.sqrt(g.shape[0])
            if lmo.normalized:
                rms = rms * m.dtype.type(g.shape[1])
        else:  # the norm of each row, times sqrt(B) if normalized
            rms = np.sqrt(np.sum(np.square(g), axis=-1, keepdims=True))
            if lmo.normalized:
                rms = rms * m.dtype.type(math.sqrt(g.shape[-1]))
        out = g / (rms + eps)
        return out.T if lmo.transpose else out
    # spectral, spectral_conv: Newton–Schulz of the (out, rest) matrix, times the shape scale
    matrix = m.reshape(m.shape[0], -1)
    ortho = zeropower_via_newtonschulz(matrix, group["ns_coefficients"], group["ns_steps"],
                                       group["eps"], group["ns_dtype"], group["ns_eps_mode"],
                                       ns_form=group["ns_form"])
    return _scaled(ortho, shape_scale(lmo, m.shape), group).reshape(m.shape)


def _scaled(ortho, factor, group):
    """``ortho * factor`` as the implementations compute it: in bfloat16 (``grad *= s`` of the
    bfloat16 update: a float32 product rounded to bfloat16) or in the parameter's dtype."""
    if group["ns_dtype"] == "bfloat16":
        return round_to_bfloat16(np.float32(factor) * ortho)
    return ortho * ortho.dtype.type(factor)


class Scion(Optimizer):
    """Scion, matching pytorch_optimizer 4.1.0's ``SCION`` (``foreach=False``) or, with
    ``variant="lions_epfl"``, the authors' ``Scion``; ``momentum_form="sum"`` is either's
    ScionLight (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``);
        give each layer's group its own ``norm`` and ``scale``.
    lr : float, default: 0.001
        Learning rate γ.
    momentum : float, default: 0.1
        Weight α of the new gradient in the average (one minus the usual momentum), in (0, 1].
    norm : str, default: 'auto'
        The oracle: ``"auto"``, ``"spectral"``, ``"spectral_conv"``, ``"sign"``, ``"bias"``,
        ``"col"``, ``"row"`` or ``"none"``.
    scale : float, default: 1.0
        Radius ρ of the norm ball (the update's scale), > 0.
    constraint : bool, default: False
        The constrained form (Scion): θ(1 - γ) before the step; False: uScion.
    weight_decay : float, default: 0.0
        pytorch_optimizer's weight decay λ of the unconstrained form.
    weight_decouple : bool, default: True
        θ(1 - γλ) (True) or G + λθ (False).
    normalized : bool or None, default: None
        Divide by the fan-in (spectral, sign, col, row); None: the norm's default (True for
        spectral, sign and row, False for col).
    max_scale : bool, default: False
        spectral: scale by max(1, sqrt(A/B)).
    transpose : bool, default: False
        col, row: normalize the transpose (an embedding stored (vocab, dim)).
    ns_coefficients : tuple of float, default: (3.4445, -4.775, 2.0315)
        Coefficients (a, b, c) of each Newton–Schulz iteration.
    ns_steps : int, default: 5
        Number of Newton–Schulz iterations.
    eps : float, default: 1e-07
        Floor ε of the Frobenius norm the Newton–Schulz input is scaled by.
    ns_dtype : str, default: 'bfloat16'
        ``"bfloat16"`` (both implementations) or ``"param"`` (the parameter's dtype).
    variant : str, default: 'pytorch_optimizer'
        ``"pytorch_optimizer"`` or ``"lions_epfl"`` (alias ``"authors"``); it sets every
        switch whose default is "the variant's".
    ns_eps_mode : str, default: the variant's
        ``"max"`` (X/max(‖X‖, ε), pytorch_optimizer) or ``"added"`` (X/(‖X‖ + ε), authors).
    ns_form : str, default: the variant's
        ``"addmm"`` (pytorch_optimizer) or ``"separate"`` (authors).
    momentum_form : str, default: the variant's
        ``"lerp"`` (pytorch_optimizer), ``"mul_add"`` (authors) or ``"sum"`` (ScionLight).
    """

    def __init__(self, params, lr=1e-3, momentum=0.1, norm="auto", scale=1.0, constraint=False,
                 weight_decay=0.0, weight_decouple=True, *, normalized=None, max_scale=False,
                 transpose=False, ns_coefficients=(DEFAULT_A, DEFAULT_B, DEFAULT_C),
                 ns_steps=DEFAULT_NS_STEPS, eps=EPS, ns_dtype="bfloat16",
                 variant="pytorch_optimizer", ns_eps_mode=VARIANT_DEFAULT,
                 ns_form=VARIANT_DEFAULT, momentum_form=VARIANT_DEFAULT):
        self.variant, switches = resolve_variant(
            VARIANTS, ALIASES, variant,
            dict(ns_eps_mode=ns_eps_mode, ns_form=ns_form, momentum_form=momentum_form))
        super().__init__(params, dict(lr=lr, momentum=momentum, norm=norm, scale=scale,
                                      constraint=constraint, weight_decay=weight_decay,
                                      weight_decouple=weight_decouple, normalized=normalized,
                                      max_scale=max_scale, transpose=transpose,
                                      ns_coefficients=ns_coefficients, ns_steps=ns_steps,
                                      eps=eps, ns_dtype=ns_dtype, **switches))

    def add_param_group(self, param_group):
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        try:
            for p in group["params"]:
                resolve_lmo(group, p.shape)
        except ValueError:
            self.param_groups.pop()
            raise

    def _check_group(self, group):
        check_no_variant(group)
        if not (is_real(group["lr"]) and group["lr"] >= 0.0):
            raise ValueError(f"Invalid learning rate: {group['lr']!r}")
        m = group["momentum"]
        if not (is_real(m) and 0.0 < m <= 1.0):
            raise ValueError(f"momentum (the new gradient's weight α) must be in (0, 1], got "
                             f"{m!r}")
        check_positive(group, "scale")
        if not (is_real(group["weight_decay"]) and group["weight_decay"] >= 0.0):
            raise ValueError(f"Invalid weight_decay value: {group['weight_decay']!r}")
        check_flag(group, "constraint", "weight_decouple", "max_scale", "transpose")
        if group["constraint"] and group["weight_decay"] != 0:
            raise ValueError("constraint=True decays by lr itself (the conditional gradient "
                             "step); weight_decay is the unconstrained form's")
        check_choice(group, "norm", tuple(NORMS))
        if group["normalized"] is not None:
            check_flag(group, "normalized")
        for option, norms in NORM_OPTIONS.items():
            if group[option] not in (None, False) and group["norm"] not in norms:
                raise ValueError(f"{option} is an option of the norms "
                                 f"{', '.join(map(repr, norms))}, not of norm="
                                 f"{group['norm']!r}")
        check_choice(group, "ns_dtype", ("bfloat16", "param"))
        check_choice(group, "ns_eps_mode", ("max", "added"), FLOOR_ALIASES)
        check_choice(group, "ns_form", NS_FORMS)
        check_choice(group, "momentum_form", MOMENTUM_FORMS)
        if len(group["ns_coefficients"]) != 3 or not all(map(is_real, group["ns_coefficients"])):
            raise ValueError("ns_coefficients must be 3 numbers (a, b, c)")
        steps = group["ns_steps"]
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
            raise ValueError(f"ns_steps must be a whole number >= 0, got {steps!r}")
        if not (is_real(group["eps"]) and group["eps"] >= 0.0):
            raise ValueError(f"Invalid epsilon value: {group['eps']!r}")
        for p in group.get("params", ()):
            resolve_lmo(group, p.shape)

    def _state_names(self, group):
        return ("momentum_buffer",)

    def _update(self, param, grad, state, group, index, shape):
        if param.size == 0:  # nothing to move (a norm of no elements would divide by zero)
            return
        lr, alpha = group["lr"], group["momentum"]
        if not group["constraint"] and group["weight_decay"] > 0:
            if group["weight_decouple"]:
                param *= typed(param, 1 - lr * group["weight_decay"])[0]
            else:
                grad = grad + typed(param, group["weight_decay"])[0] * param
        buf = state["momentum_buffer"].reshape(-1)
        form = group["momentum_form"]
        if form == "lerp":
            buf[...] = lerp_arrays(buf, grad, alpha)
        elif form == "mul_add":
            keep, weight = typed(param, 1 - alpha, alpha)
            buf *= keep
            buf += weight * grad
        else:  # ScionLight: the buffer scaled by 1 - α after the step, the new gradient added
            buf *= typed(param, 1 - alpha)[0]
            buf += grad
        lmo = resolve_lmo(group, shape)
        direction = lmo_direction(buf.reshape(shape), lmo, group)
        if group["scale"] != 1.0:  # `update * scale`, in the update's dtype (bfloat16 or not)
            if lmo.norm in ("spectral", "spectral_conv"):
                direction = _scaled(direction, group["scale"], group)
            else:
                direction = direction * param.dtype.type(group["scale"])
        if group["constraint"]:
            param *= typed(param, 1 - lr)[0]
        param += typed(param, -lr)[0] * direction.reshape(-1).astype(param.dtype)
