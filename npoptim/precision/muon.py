r"""Muon on bfloat16/float16 params, grads and momentum, rounded as torch 2.13's CPU code
(``rounding="per-op"``; torch's Muon has only its single-tensor path).

The math is :mod:`npoptim.optim.muon`'s, torch's conventions only. Every tensor op computes in
float32 and rounds to the parameter's format (:math:`R`); the lerp weights and the decay
factor are float32 scalars:

.. math::

    M &\leftarrow R(\mathrm{lerp}(M, G, 1-\mu)),\qquad
        U \leftarrow R(\mathrm{lerp}(G, M, \mu)) \;\text{(nesterov) or } M\\
    O &= \mathrm{NS}_k(U) \quad\text{in bfloat16, whatever the parameter's format}\\
    \theta &\leftarrow R(\theta\,(1 - \gamma\lambda)),\qquad
        \theta \leftarrow R(\mathrm{fma}(\alpha, O, \theta)),\quad \alpha = -\gamma'

The orthogonalization is torch's whatever the parameter's dtype: ``update.bfloat16()``, then
bfloat16 arithmetic with its matrix products accumulated in float32 in torch's CPU order
(:func:`npoptim.optim.orthogonalize.zeropower_via_newtonschulz`, and its limits: an inner dimension
above 512, or a CPU whose oneDNN uses other instructions, sums in another order). ``O`` is so
a bfloat16 matrix for a float16 parameter too, and the last op differs by format:

* bfloat16: ``param.add_(O, alpha=-lr')`` rounds :math:`\alpha` to bfloat16 (torch's
  ``add`` alpha, :func:`npoptim.precision.optimizer.add_alpha`), one fused multiply-add in
  torch's vector loop; its scalar loop rounds the product first, :math:`R(\theta +
  R(\alpha O))`. torch runs the scalar loop on the last ``n % lanes`` elements
  (``torch_cpu_lanes``), and on all of them for a tall parameter (:math:`A > B`), whose
  ``O`` is a transposed, non-contiguous view that torch's vector loop does not take (both
  with ``torch_cpu_lanes`` given; without it, as on a GPU, neither).
* float16: a float16 tensor plus a bfloat16 one computes in float32 (torch's type promotion):
  :math:`\alpha` is a float32, the fused multiply-add is rounded to float32 and that to
  float16 (two roundings, as torch's float32 temporary copied into the parameter), in the
  scalar loop too (measured).

Checked bit for bit against torch 2.13 on an AVX-512 CPU (params, momentum, every step) for
wide, tall and odd shapes (``tests/test_precision_muon.py``: 32x64, 12x8, 5x13; the tall one's
inner dimension below 16, where the order below does not show on its data, not because it is
reproduced). Not reproduced: in
torch's own product loop the summation order depends on the operands' layouts (measured with
cancelling inputs as tests/cpu_probe.py builds them, k from 5 to 64): row-major times
row-major, and column-major times column-major, add in four interleaved partial sums (npoptim's
order); column-major times row-major in one running sum; row-major times column-major, ``X @
X.T``, in float32 vector lanes whose width depends on the inner dimension (one running sum
below 16); npoptim uses the four partial sums throughout, so a float32 sum near a bfloat16
midpoint rounds the other way now and then (measured on a tall 24x8 float16 matrix: 5 elements
one float16 unit off at step 19 of 20).

Without nesterov torch orthogonalizes the momentum buffer itself, and a bfloat16 buffer's
``.bfloat16()`` is no copy: the iteration's in-place ``div_`` leaves the buffer divided by its
(bfloat16) Frobenius norm, the next step's momentum starting from that. npoptim does the same
(a float16 buffer is copied by the conversion and keeps its value). As in
:mod:`npoptim.precision.adam`, above 32768 elements torch splits each element-wise op between
its threads, each part with its own scalar tail: npoptim matches torch with
``torch.set_num_threads(1)`` there.

The step is not element-wise (the orthogonalization couples every element), so the two
element-wise halves, momentum and parameter, are loops of their own around the matrix part.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import fma, lerp
from npoptim.kernels.switches import Switch
from npoptim.optim import muon
from npoptim.precision.formats import (BFLOAT16, bits_of, from_float32, from_float32_array,
                                      round_to, to_float32)
from npoptim.precision.optimizer import LowPrecision, add_alpha, record16, rounded_scalar


class Muon16Hyper(NamedTuple):
    """One step's hyperparameters of the 16-bit Muon rules (float32, and the format code)."""

    code: int
    tail_start: int          # first element of torch's scalar loop in the parameter's add
    one_minus_momentum: float
    momentum: float
    nesterov: Switch         # torch's nesterov
    decay_factor: float      # 1 - lr * weight_decay
    alpha: float             # -adjusted lr (bfloat16: rounded to it, torch's add alpha)


@kernel
def muon_momentum_per_op(g, m, h):
    """The new momentum buffer and the matrix to orthogonalize, each op rounded."""
    m = round_to(lerp(m, g, h.one_minus_momentum), h.code)
    if h.nesterov != 0:
        return m, round_to(lerp(g, m, h.momentum), h.code)
    return m, m


@kernel
def muon_param_per_op(p, o, h, tail):
    """The decayed parameter plus ``alpha`` times the orthogonalized ``o`` (a bfloat16 value)."""
    p = round_to(p * h.decay_factor, h.code)
    if h.code == BFLOAT16:
        return add_alpha(p, h.alpha, o, h.code, tail)
    return round_to(fma(h.alpha, o, p), h.code)  # float32 fma, then float16


@kernel
def _momentum16(grad, buf, update, hyper):
    """``buf`` (bits) stepped in place; ``update`` (float32) the values to orthogonalize."""
    for i in range(grad.size):
        m, u = muon_momentum_per_op(to_float32(grad[i], hyper.code),
                                    to_float32(buf[i], hyper.code), hyper)
        buf[i] = from_float32(m, hyper.code)
        update[i] = u


@kernel
def _param16(param, ortho, hyper):
    """(Torch's vector part, then its scalar tail: two loops, as the 16-bit drivers run them.)"""
    vector = min(param.size, hyper.tail_start)
    for i in range(vector):
        p = muon_param_per_op(to_float32(param[i], hyper.code), ortho[i], hyper, False)
        param[i] = from_float32(p, hyper.code)
    for i in range(vector, param.size):
        p = muon_param_per_op(to_float32(param[i], hyper.code), ortho[i], hyper, True)
        param[i] = from_float32(p, hyper.code)


class Muon(LowPrecision, muon.Muon):
    """``torch.optim.Muon`` on bfloat16/float16 2-D arrays, ``rounding="per-op"`` (module
    docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The bfloat16, float16 or uint16 (raw bits) arrays to optimize (updated in place),
        or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    weight_decay : float, default: 0.1
        Decoupled weight decay λ: θ(1 - γλ).
    momentum : float, default: 0.95
        Momentum μ of the buffer.
    nesterov : bool, default: True
        Orthogonalize the Nesterov direction lerp(G, M, μ) instead of M.
    ns_coefficients : tuple of float, default: (3.4445, -4.775, 2.0315)
        Coefficients (a, b, c) of each Newton–Schulz iteration.
    eps : float, default: 1e-07
        Floor ε of the Frobenius norm the matrix is scaled by.
    ns_steps : int, default: 5
        Number k of Newton–Schulz iterations.
    adjust_lr_fn : str or None, default: None
        None or ``"original"`` (γ sqrt(max(1, A/B))) or ``"match_rms_adamw"`` (rms_rate γ
        sqrt(max(A, B))).
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
        The other options of :class:`npoptim.optim.muon.Muon` (torch's
        ``foreach``, ``differentiable``, ``fused``, ...); its convention switches only at
        torch's values.
    """

    roundings = ("per-op",)

    def __init__(self, params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                 ns_coefficients=(muon.DEFAULT_A, muon.DEFAULT_B, muon.DEFAULT_C),
                 eps=muon.EPS, ns_steps=muon.DEFAULT_NS_STEPS, adjust_lr_fn=None, *,
                 rounding="per-op", format=None, torch_cpu_lanes=None, **torch_options):
        self._low_precision_defaults = dict(rounding=rounding, format=format,
                                            torch_cpu_lanes=torch_cpu_lanes)
        super().__init__(params, lr=lr, weight_decay=weight_decay, momentum=momentum,
                         nesterov=nesterov, ns_coefficients=ns_coefficients, eps=eps,
                         ns_steps=ns_steps, adjust_lr_fn=adjust_lr_fn, **torch_options)

    def _update(self, param, grad, state, group, index, shape):
        code = self._code(param, group)
        lr, momentum = group["lr"], group["momentum"]
        alpha = -muon.adjust_lr(lr, group["adjust_lr_fn"], shape)
        hyper = record16(Muon16Hyper, param, group, one_minus_momentum=1 - momentum,
                         momentum=momentum, nesterov=bool(group["nesterov"]),
                         decay_factor=1 - lr * group["weight_decay"],
                         alpha=rounded_scalar(alpha, code) if code == BFLOAT16 else alpha)
        if shape[0] > shape[1] and group["torch_cpu_lanes"] is not None:
            hyper = hyper._replace(tail_start=np.int64(0))  # torch's scalar loop throughout
        update = np.empty(param.size, np.float32)
        _momentum16(grad.view(np.uint16), state["momentum_buffer"].reshape(-1).view(np.uint16),
                    update, hyper)
        # without nesterov torch orthogonalizes the buffer itself: a bfloat16 one's
        # .bfloat16() is no copy, and the iteration's in-place div_ normalizes the buffer
        aliased = code == BFLOAT16 and not group["nesterov"]
        normalized = np.empty(shape, np.float32) if aliased else None
        ortho = muon.zeropower_via_newtonschulz(update.reshape(shape), group["ns_coefficients"],
                                                group["ns_steps"], group["eps"],
                                                normalized=normalized)
        if aliased:
            bits_of(state["momentum_buffer"])[...] = from_float32_array(normalized, "bfloat16")
        _param16(param.view(np.uint16), np.ascontiguousarray(ortho, np.float32).reshape(-1),
                 hyper)
