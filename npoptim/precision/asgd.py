r"""ASGD on bfloat16/float16 params, grads and average, rounded as torch 2.13's CPU
single-tensor code (``rounding="per-op"``; torch 2.13 has no fused ASGD, and its foreach path
is not its CPU default).

The math is :mod:`npoptim.optim.asgd`'s; every tensor op computes in float32 and rounds to the
16-bit format (:math:`R`), ``add``'s ``alpha`` rounded to the format first, ``mul``'s scalar
float32. ``eta`` and ``mu`` are float32 0-d states, as torch keeps them (their new values
computed in double and stored as float32, as in the float class):

.. math::

    g &\leftarrow R(\mathrm{fma}(R(w), \theta, g))                  &&\text{weight decay } w\\
    \theta &\leftarrow R(\theta\,(1 - \lambda\eta_{t-1})),\qquad
        \theta \leftarrow R(\mathrm{fma}(R(-\eta_{t-1}), g, \theta))\\
    \bar\theta &\leftarrow R(\bar\theta + R(R(\theta - \bar\theta)\,\mu_{t-1}))
        &&\mu \ne 1;\ \text{else } \bar\theta = \theta

In torch's scalar tail (see :mod:`npoptim.precision.adam`) each ``add(.., alpha)`` rounds the
product first. ``load_state_dict`` casts ``eta`` and ``mu`` to the parameter's dtype, as
torch's does; later steps then store them rounded to that dtype
(:mod:`npoptim.precision.optimizer`).
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.jit import inlined, kernel
from npoptim.kernels.switches import Switch
from npoptim.optim import asgd
from npoptim.precision.drivers import apply_dense16
from npoptim.precision.formats import format_of, round_to
from npoptim.precision.optimizer import (LowPrecision, add_alpha, per_op_decayed_grad,
                                        record16, rounded_scalar, scalar_state,
                                        set_scalar_state)


class ASGD16Hyper(NamedTuple):
    """One step's hyperparameters of the 16-bit ASGD rule."""

    code: int
    tail_start: int
    weight_decay: float   # R(weight_decay)
    maximize: Switch      # torch's maximize
    decays: Switch        # torch's weight_decay != 0
    decay: float          # 1 - lambd * eta, float32 (param.mul_)
    neg_eta: float        # R(-eta) (param.add_(grad, alpha=-eta))
    mu: float             # float32 (the 0-d tensor mu's value)
    averaging: Switch     # on once mu != 1


@inlined
def asgd_per_op_rule(p, g, s, h, i, tail):
    """``s = (ax,)``."""
    (ax,) = s
    g = per_op_decayed_grad(p, g, h, tail)
    p = round_to(p * h.decay, h.code)
    p = add_alpha(p, h.neg_eta, g, h.code, tail)
    if h.averaging != 0:
        ax = round_to(ax + round_to(round_to(p - ax, h.code) * h.mu, h.code), h.code)
    else:
        ax = p
    return p, (ax,)


@kernel
def _asgd_dense(param, grad, states, hyper):
    apply_dense16(asgd_per_op_rule, param, grad, states, hyper)


class ASGD(LowPrecision, asgd.ASGD):
    """``torch.optim.ASGD`` on bfloat16/float16 arrays, ``rounding="per-op"`` (module
    docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The bfloat16, float16 or uint16 (raw bits) arrays to optimize (updated in place),
        or param groups (dicts with ``"params"``).
    lr : float, default: 0.01
        Learning rate γ.
    lambd : float, default: 0.0001
        Decay term λ of the step size η_t.
    alpha : float, default: 0.75
        Power α of the step size decay η_t = γ/(1 + λγt)^α.
    t0 : float, default: 1000000.0
        Step after which the average of the iterates starts.
    weight_decay : float, default: 0
        L2 weight decay w: w θ added to the gradient.
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
        The other options of :class:`npoptim.optim.asgd.ASGD` (torch's
        ``foreach``, ``differentiable``, ``fused``, ...); its convention switches only at
        torch's values.
    """

    roundings = ("per-op",)
    scalar_states = ("eta", "mu")

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, *,
                 rounding="per-op", format=None, torch_cpu_lanes=None, maximize=False,
                 **torch_options):
        self._low_precision_defaults = dict(rounding=rounding, format=format,
                                            torch_cpu_lanes=torch_cpu_lanes)
        super().__init__(params, lr=lr, lambd=lambd, alpha=alpha, t0=t0,
                         weight_decay=weight_decay, maximize=maximize, **torch_options)

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        step = float(state["step"])
        code = self._code(param, group)
        lr, lambd, fmt = group["lr"], group["lambd"], format_of(param, group["format"])
        eta, mu = float(scalar_state(state["eta"], fmt)), float(scalar_state(state["mu"], fmt))
        hyper = record16(ASGD16Hyper, param, group,
                         weight_decay=rounded_scalar(group["weight_decay"], code),
                         maximize=bool(group["maximize"]),
                         decays=group["weight_decay"] != 0, decay=1 - lambd * eta,
                         neg_eta=rounded_scalar(-eta, code), mu=mu, averaging=mu != 1)
        _asgd_dense(param.view(np.uint16), grad.view(np.uint16), self._flat_bits(state, group),
                    hyper)
        # torch.as_tensor of the Python double (float32), copied into the 0-d state
        set_scalar_state(state["eta"], lr / ((1 + lambd * lr * step) ** group["alpha"]), fmt)
        set_scalar_state(state["mu"], 1 / max(1, step - group["t0"]), fmt)
