r"""Adadelta (Zeiler, 2012), as ``torch.optim.Adadelta`` 2.13.

With gradient :math:`g` (negated when ``maximize``), decay :math:`\rho`:

.. math::

    g &\leftarrow g + \lambda\theta                       &&\text{weight decay}\\
    v &\leftarrow \rho v + (1-\rho)\,g^2                   &&\text{``square\_avg``}\\
    \Delta &\leftarrow \frac{\sqrt{u + \epsilon}}{\sqrt{v + \epsilon}}\,g\\
    u &\leftarrow \rho u + (1-\rho)\,\Delta^2               &&\text{``acc\_delta``}\\
    \theta &\leftarrow \theta - \gamma\Delta

:math:`\epsilon` sits inside both square roots. Dense gradients only, as in torch.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import fma
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import check_flag, check_nonnegative, flavored


class AdadeltaHyper(NamedTuple):
    """One step's hyperparameters of the Adadelta rule (built by ``Adadelta._update``)."""

    rho: float
    one_minus_rho: float
    eps: float
    weight_decay: float
    neg_lr: float    # -lr
    maximize: float  # 1 or 0


@kernel
def adadelta_rule(p, g, s, h):
    """One element; ``s = (square_avg, acc_delta)``."""
    square_avg, acc_delta = s
    if h.maximize != 0:
        g = -g
    if h.weight_decay != 0:
        g = fma(h.weight_decay, p, g)
    square_avg = fma(h.one_minus_rho * g, g, square_avg * h.rho)
    delta = np.sqrt(acc_delta + h.eps) / np.sqrt(square_avg + h.eps) * g
    acc_delta = fma(h.one_minus_rho * delta, delta, acc_delta * h.rho)
    return fma(h.neg_lr, delta, p), (square_avg, acc_delta)


@kernel
def _adadelta_dense(param, grad, states, hyper):
    apply_dense(adadelta_rule, param, grad, states, AdadeltaHyper(*hyper))


class Adadelta(Optimizer):
    """Adadelta, matching ``torch.optim.Adadelta`` (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 1.0
        Coefficient γ that scales the step Δ.
    rho : float, default: 0.9
        Decay ρ of the running averages of g² and Δ².
    eps : float, default: 1e-06
        Term ε inside both square roots.
    weight_decay : float, default: 0
        Weight decay λ: λθ added to the gradient (L2), or θ(1 - γλ) with
        ``decoupled_weight_decay``.
    foreach, capturable, differentiable : ignored
        Accepted for compatibility with torch only: they choose torch's implementations and change
        nothing here (``differentiable=True`` is refused: npoptim has no autograd).
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    decoupled_weight_decay : bool, default: False
        Decay the parameter, θ(1 - γλ), before the rule instead of adding λθ to the gradient
        (Keras).
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    torch_conventions = {"decoupled_weight_decay": False}
    conventions_apply = {"decoupled_weight_decay": "weight_decay"}
    #: the base class applies ``decoupled_weight_decay`` before the rule (Keras's decay)
    decouples_weight_decay = True

    @flavored
    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False,
                 decoupled_weight_decay=False):
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, capturable=capturable, foreach=foreach,
                                      differentiable=differentiable,
                                      decoupled_weight_decay=decoupled_weight_decay))

    def _check_group(self, group):
        check_nonnegative(group, "lr")
        if not 0.0 <= group["rho"] <= 1.0:
            raise ValueError(f"Invalid rho value: {group['rho']}")
        check_nonnegative(group, "eps", "weight_decay")
        check_flag(group, "decoupled_weight_decay")

    def _state_names(self, group):
        return ("square_avg", "acc_delta")

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        rho = group["rho"]
        hyper = typed_record(AdadeltaHyper, param, rho=rho, one_minus_rho=1 - rho,
                             eps=group["eps"], weight_decay=group["weight_decay"],
                             neg_lr=-group["lr"], maximize=bool(group["maximize"]))
        _adadelta_dense(param, grad, self._flat_states(state, group), hyper)
