r"""Adagrad on bfloat16/float16 params, grads and state, rounded as torch 2.13's CPU code.

The math is :mod:`npoptim.optim.adagrad`'s (dense gradients only), with the learning rate
:math:`\gamma_t = \gamma / (1 + (t-1)\,\eta)` (``lr_decay`` :math:`\eta`) computed in double:

``rounding="per-op"``: torch's single-tensor path (its CPU default), every tensor op rounded
to the 16-bit format (:math:`R`), ``add``'s ``alpha`` and the scalar ``eps`` added to a tensor
rounded to the format first (:math:`\epsilon` below is :math:`R(\epsilon)`):

.. math::

    g &\leftarrow R(\mathrm{fma}(R(\lambda), \theta, g))        &&\text{weight decay}\\
    s &\leftarrow R(\mathrm{fma}(g, g, s))                      &&\text{``sum``, addcmul}\\
    \theta &\leftarrow R(\theta + (-\gamma_t g) / R(R(\sqrt s) + \epsilon))

``rounding="fused"``: torch's ``fused=True`` CPU kernel (``FusedAdagradKernel.cpp``):
float32 from the stored values, with its three scalars rounded to the 16-bit format in the
vector loop (``scalar_t(weight_decay)``, ``scalar_t(eps)``, ``scalar_t(clr)``; float32 in its
scalar tail):

.. math::

    g \leftarrow \mathrm{fma}(\theta, R(\lambda), g),\quad
    s \leftarrow \mathrm{fma}(g, g, s),\quad
    \theta \leftarrow \theta - (R(\gamma_t)\, g)/(\sqrt s + R(\epsilon))

the parameter and ``sum`` rounded once when stored. (So float16's default ``eps=1e-10``
is 0 there, as in torch.)

``sum`` starts as ``initial_accumulator_value`` rounded to the format (torch's
``full_like``). In torch's scalar tail (see :mod:`npoptim.precision.adam`) the per-op weight
decay rounds the product first, and the fused kernel uses float32 scalars. torch's fused
kernel splits a tensor between its threads in units of 32 elements, each part with its own
scalar tail; ``torch_cpu_lanes`` models one part (the tensor's last ``n % lanes`` elements),
which is torch with ``torch.set_num_threads(1)``, or any tensor whose parts are multiples of
the vector width. That kernel's vector loop is 16 16-bit lanes even on an AVX-512 CPU
(measured with torch 2.13: its scalar tail is the last ``n % 16`` elements where the per-op
kernels' is ``n % 32``), so the fused rule's tail uses ``min(torch_cpu_lanes, 16)``.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.jit import inlined, kernel
from npoptim.kernels.switches import Switch
from npoptim.kernels.scalar import fma
from npoptim.optim import adagrad
from npoptim.precision.drivers import apply_dense16
from npoptim.precision.formats import bits_of, format_of, from_float32_array, round_to
from npoptim.precision.optimizer import (LowPrecision, per_op_decayed_grad, record16,
                                        rounded_scalar)

#: 16-bit lanes of torch 2.13's fused CPU Adagrad kernel at most (AVX2 width; see above)
FUSED_LANES = 16


class Adagrad16Hyper(NamedTuple):
    """One step's hyperparameters of the 16-bit Adagrad rules."""

    code: int
    tail_start: int
    weight_decay: float      # R(weight_decay)
    eps: float               # R(eps) (per-op: tensor.add(scalar) rounds it too)
    neg_clr: float           # -lr / (1 + (step - 1) lr_decay) (fused: R(.))
    maximize: Switch         # torch's maximize
    decays: Switch           # torch's weight_decay != 0
    tail_weight_decay: float  # fused, torch's scalar tail: float32 scalars
    tail_eps: float
    tail_neg_clr: float


@inlined
def adagrad_per_op_rule(p, g, s, h, i, tail):
    """``s = (sum,)``, every op rounded."""
    (total,) = s
    g = per_op_decayed_grad(p, g, h, tail)
    total = round_to(fma(g, g, total), h.code)
    std = round_to(round_to(np.sqrt(total), h.code) + h.eps, h.code)
    return round_to(p + h.neg_clr * g / std, h.code), (total,)


@inlined
def adagrad_fused_rule(p, g, s, h, i, tail):
    """``s = (sum,)`` in float32 (the driver rounds what it stores)."""
    (total,) = s
    weight_decay = h.tail_weight_decay if tail else h.weight_decay
    eps = h.tail_eps if tail else h.eps
    neg_clr = h.tail_neg_clr if tail else h.neg_clr
    if h.maximize != 0:
        g = -g
    if h.decays:
        g = fma(p, weight_decay, g)
    total = fma(g, g, total)
    return p + neg_clr * g / (np.sqrt(total) + eps), (total,)


@kernel
def _per_op_dense(param, grad, states, hyper):
    apply_dense16(adagrad_per_op_rule, param, grad, states, hyper)


@kernel
def _fused_dense(param, grad, states, hyper):
    apply_dense16(adagrad_fused_rule, param, grad, states, hyper)


KERNELS = {"per-op": _per_op_dense, "fused": _fused_dense}


class Adagrad(LowPrecision, adagrad.Adagrad):
    """``torch.optim.Adagrad`` on bfloat16/float16 arrays, ``rounding="per-op"`` (torch's
    default on CPU) or ``"fused"`` (``fused=True``); see the module docstring. Dense gradients
    only.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The bfloat16, float16 or uint16 (raw bits) arrays to optimize (updated in place),
        or param groups (dicts with ``"params"``).
    lr : float, default: 0.01
        Learning rate γ.
    lr_decay : float, default: 0
        Learning-rate decay η: the step is γ/(1 + (t-1)η).
    weight_decay : float, default: 0
        Weight decay λ: λθ added to the gradient (L2).
    initial_accumulator_value : float, default: 0
        Start value of the accumulator ``sum``.
    eps : float, default: 1e-10
        Term ε added to the denominator for numerical stability.
    rounding : {'per-op', 'fused'}, default: 'per-op'
        Where results are rounded to the 16-bit format (see the module docstring):
        ``"per-op"``, ``"fused"``.
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
        The other options of :class:`npoptim.optim.adagrad.Adagrad` (torch's
        ``foreach``, ``differentiable``, ``fused``, ...); its convention switches only at
        torch's values.
    """

    roundings = ("per-op", "fused")

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, *, rounding="per-op", format=None, torch_cpu_lanes=None,
                 maximize=False, **torch_options):
        self._low_precision_defaults = dict(rounding=rounding, format=format,
                                            torch_cpu_lanes=torch_cpu_lanes)
        super().__init__(params, lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                         initial_accumulator_value=initial_accumulator_value, eps=eps,
                         maximize=maximize, **torch_options)

    def _init_state(self, param, group):
        # torch's full_like(param, initial_accumulator_value): to float32, then the format
        fmt = format_of(param, (group or self.defaults)["format"])
        value = np.full(param.shape, self.defaults["initial_accumulator_value"], np.float32)
        out = np.empty(param.shape, param.dtype)
        bits_of(out)[...] = from_float32_array(value, fmt)
        return {"step": 0, "sum": out}

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        code = self._code(param, group)
        clr = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
        wd, eps = group["weight_decay"], group["eps"]
        fused = group["rounding"] == "fused"
        hyper = record16(Adagrad16Hyper, param, group,
                         weight_decay=rounded_scalar(wd, code),
                         eps=rounded_scalar(eps, code),
                         neg_clr=-rounded_scalar(clr, code) if fused else -clr,
                         maximize=bool(group["maximize"]),
                         decays=group["weight_decay"] != 0, tail_weight_decay=wd,
                         tail_eps=eps, tail_neg_clr=-clr)
        lanes = group["torch_cpu_lanes"]
        if fused and lanes is not None:
            hyper = hyper._replace(tail_start=np.int64(param.size - param.size
                                                       % min(lanes, FUSED_LANES)))
        KERNELS[group["rounding"]](param.view(np.uint16), grad.view(np.uint16),
                                   self._flat_bits(state, group), hyper)
