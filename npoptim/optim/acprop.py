r"""ACProp (Zhuang et al., "Momentum Centering and Asynchronous Update for Adaptive Gradient
Methods", NeurIPS 2021, arXiv 2110.05454), as ``optax.contrib.acprop`` 0.2.8
(google-deepmind/optax ``optax/contrib/_acprop.py``).

AdaBelief's centred second moment, used *asynchronously*: the step at :math:`t` divides by the
second moment of the steps before :math:`t`. For each element, with gradient :math:`g`
(negated when ``maximize``), step count :math:`t` (per parameter, from 1) and the moments
before this step :math:`m, s`:

.. math::

    \hat s &= s / (1-\beta_2^{t-1}) \quad(\hat s = 1 \text{ at } t = 1)\\
    \theta &\leftarrow \theta - \gamma\Big(\frac{g}{\sqrt{\hat s} + \epsilon}
        + \lambda\theta\Big)\\
    s &\leftarrow \beta_2 s + (1-\beta_2)(g - m)^2 + \epsilon_r\\
    m &\leftarrow \beta_1 m + (1-\beta_1)\, g

:math:`\epsilon` is ``eps``, :math:`\epsilon_r` ``eps_root`` (stored with :math:`s`: it
accumulates), :math:`\lambda` ``weight_decay`` (decoupled, added to the direction and scaled by
the lr, as optax's ``add_decayed_weights`` after the scaling). This is optax's code as it
computes it: the prediction error is :math:`g - m` with the momentum *before* this step's update
(its docstring writes :math:`g_t - m_t`) and the numerator is the gradient itself, not the
momentum. The momentum :math:`m` therefore only centres the second moment. Defaults are optax's
(``eps = eps_root = 1e-16``); optax has no default lr (npoptim: 1e-3). State
``exp_avg`` (optax's ``mu``) and ``exp_avg_var`` (``nu``), as AdaBelief's. Dense gradients only.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import fma
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import check_betas, check_flag, check_nonnegative, flavored


class ACPropHyper(NamedTuple):
    """One step's hyperparameters of :func:`acprop_rule` (built by ``ACProp._update``)."""

    maximize: float           # 1 or 0
    beta1: float
    one_minus_beta1: float
    beta2: float
    one_minus_beta2: float
    eps_root: float
    first: float              # 1 at the first step (ŝ = 1), else 0
    bias_correction2: float   # 1 - beta2^(t-1)
    eps: float
    weight_decay: float
    neg_lr: float


@kernel
def acprop_rule(p, g, s, h):
    """One element of ACProp; ``s = (exp_avg, exp_avg_var)``."""
    exp_avg, exp_avg_var = s
    if h.maximize != 0:
        g = -g
    s_hat = exp_avg_var / h.bias_correction2 if h.first == 0 else h.first
    update = fma(h.weight_decay, p, g / (np.sqrt(s_hat) + h.eps))
    residual = g - exp_avg
    v = fma(h.one_minus_beta2 * residual, residual, exp_avg_var * h.beta2) + h.eps_root
    m = fma(h.one_minus_beta1, g, exp_avg * h.beta1)
    return p + h.neg_lr * update, (m, v)


@kernel
def _acprop_dense(param, grad, states, hyper):
    apply_dense(acprop_rule, param, grad, states, ACPropHyper(*hyper))


class ACProp(Optimizer):
    """ACProp (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.999)
        Decay rates (β1, β2) of the momentum and of the centred second moment.
    eps : float, default: 1e-16
        Term ε added to the denominator.
    eps_root : float, default: 1e-16
        ε_r added to s at every step.
    weight_decay : float, default: 0.0
        Decoupled weight decay λ, added to the direction.
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"

    @flavored
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-16, eps_root=1e-16,
                 weight_decay=0.0, *, maximize=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, eps_root=eps_root,
                                      weight_decay=weight_decay, maximize=maximize))

    def _check_group(self, group):
        check_nonnegative(group, "lr", "eps", "weight_decay")
        check_nonnegative(group, "eps_root", label="eps_root value")
        check_betas(group["betas"])
        check_flag(group, "maximize")

    def _state_names(self, group):
        return ("exp_avg", "exp_avg_var")

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        step = state["step"]
        beta1, beta2 = group["betas"]
        hyper = typed_record(
            ACPropHyper, param, maximize=bool(group["maximize"]), beta1=beta1,
            one_minus_beta1=1 - beta1, beta2=beta2, one_minus_beta2=1 - beta2,
            eps_root=group["eps_root"], first=1.0 if step == 1 else 0.0,
            bias_correction2=1 - beta2 ** (step - 1) if step > 1 else 1.0, eps=group["eps"],
            weight_decay=group["weight_decay"], neg_lr=-group["lr"])
        _acprop_dense(param, grad, self._flat_states(state, group), hyper)
