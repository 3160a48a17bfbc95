r"""Adadelta on bfloat16/float16 params, grads and state, rounded as torch 2.13's CPU
single-tensor code (``rounding="per-op"``; torch has no fused Adadelta): every tensor op
computes in float32 and rounds to the 16-bit format (:math:`R`), ``add``'s ``alpha`` and a
scalar added to a tensor (``eps``) rounded to the format first, other scalars float32
(:math:`\epsilon` below is :math:`R(\epsilon)`). The math is :mod:`npoptim.optim.adadelta`'s
(torch's conventions only):

.. math::

    g &\leftarrow R(\mathrm{fma}(R(\lambda), \theta, g)),\qquad
    v \leftarrow R(\mathrm{fma}((1-\rho) g,\; g,\; R(\rho v)))\\
    \delta &\leftarrow R(R(R(\sqrt{R(a + \epsilon)}) / R(\sqrt{R(v + \epsilon)})) \cdot g)\\
    a &\leftarrow R(\mathrm{fma}((1-\rho)\delta,\; \delta,\; R(\rho a))),\qquad
    \theta \leftarrow R(\mathrm{fma}(R(-\gamma), \delta, \theta))

In torch's scalar tail (see :mod:`npoptim.precision.adam`) each ``add(.., alpha)`` rounds the
product first.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.jit import inlined, kernel
from npoptim.kernels.switches import Switch
from npoptim.kernels.scalar import fma
from npoptim.optim import adadelta
from npoptim.precision.drivers import apply_dense16, new_states
from npoptim.precision.formats import round_to
from npoptim.precision.optimizer import (LowPrecision, add_alpha, per_op_decayed_grad,
                                        record16, rounded_scalar)


class Adadelta16Hyper(NamedTuple):
    code: int
    tail_start: int
    weight_decay: float      # R(weight_decay)
    rho: float
    one_minus_rho: float
    eps: float               # R(eps)
    neg_lr_alpha: float      # R(-lr)
    maximize: Switch         # torch's maximize
    decays: Switch           # torch's weight_decay != 0


@inlined
def adadelta_per_op_rule(p, g, s, h, i, tail):
    """``s = (square_avg, acc_delta)``."""
    v, acc = s
    g = per_op_decayed_grad(p, g, h, tail)
    v = round_to(fma(h.one_minus_rho * g, g, round_to(v * h.rho, h.code)), h.code)
    std = round_to(np.sqrt(round_to(v + h.eps, h.code)), h.code)
    delta = round_to(np.sqrt(round_to(acc + h.eps, h.code)), h.code)
    delta = round_to(round_to(delta / std, h.code) * g, h.code)
    acc = round_to(fma(h.one_minus_rho * delta, delta, round_to(acc * h.rho, h.code)), h.code)
    return add_alpha(p, h.neg_lr_alpha, delta, h.code, tail), new_states(v, acc)


@kernel
def _adadelta_dense(param, grad, states, hyper):
    apply_dense16(adadelta_per_op_rule, param, grad, states, hyper)


class Adadelta(LowPrecision, adadelta.Adadelta):
    """``torch.optim.Adadelta`` on bfloat16/float16 arrays, ``rounding="per-op"`` (module
    docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The bfloat16, float16 or uint16 (raw bits) arrays to optimize (updated in place),
        or param groups (dicts with ``"params"``).
    lr : float, default: 1.0
        Coefficient γ that scales the step Δ.
    rho : float, default: 0.9
        Decay ρ of the running averages of g² and Δ².
    eps : float, default: 1e-06
        Term ε inside both square roots.
    weight_decay : float, default: 0
        Weight decay λ: λθ added to the gradient (L2).
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
        The other options of :class:`npoptim.optim.adadelta.Adadelta` (torch's
        ``foreach``, ``differentiable``, ``fused``, ...); its convention switches only at
        torch's values.
    """

    roundings = ("per-op",)

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, *,
                 rounding="per-op", format=None, torch_cpu_lanes=None, maximize=False,
                 **torch_options):
        self._low_precision_defaults = dict(rounding=rounding, format=format,
                                            torch_cpu_lanes=torch_cpu_lanes)
        super().__init__(params, lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                         maximize=maximize, **torch_options)

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        code = self._code(param, group)
        rho = group["rho"]
        hyper = record16(Adadelta16Hyper, param, group,
                         weight_decay=rounded_scalar(group["weight_decay"], code), rho=rho,
                         one_minus_rho=1 - rho, eps=rounded_scalar(group["eps"], code),
                         neg_lr_alpha=rounded_scalar(-group["lr"], code),
                         maximize=bool(group["maximize"]),
                         decays=group["weight_decay"] != 0)
        _adadelta_dense(param.view(np.uint16), grad.view(np.uint16),
                        self._flat_bits(state, group), hyper)
