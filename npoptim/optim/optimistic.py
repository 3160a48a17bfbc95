r"""Optimistic gradient descent and optimistic Adam (Daskalakis et al., "Training GANs with
Optimism", ICLR 2018, arXiv 1711.00141), as ``optax.optimistic_gradient_descent`` and
``optax.optimistic_adam_v2`` 0.2.8.

Both extrapolate with the previous direction: with a direction :math:`d_t` (the gradient for
``OptimisticGD``, Adam's update for ``OptimisticAdam``), :math:`d_{t-1} = d_t` in a
parameter's first step (optax's convention, google-deepmind/optax issue #1082), for each
element:

.. math::

    u_t &= (\alpha + \beta)\, d_t - \beta\, d_{t-1}\\
    \theta &\leftarrow \theta - \gamma\, u_t

With :math:`\alpha = \beta = 1` (the defaults) this is the paper's optimistic step
:math:`\theta - 2\gamma d_t + \gamma d_{t-1}` (its Algorithm 1 for Adam; OGD for the
gradient). For ``OptimisticAdam``, with gradient :math:`g` (negated when ``maximize``),
step count :math:`t`, :math:`b_k = 1-\beta_k^t`:

.. math::

    m &\leftarrow \beta_1 m + (1-\beta_1)\,g, \qquad v \leftarrow \beta_2 v + (1-\beta_2)\,g^2\\
    \hat m &= m / b_1 \quad(\text{``nesterov'': } \beta_1 m/(1-\beta_1^{t+1})
              + (1-\beta_1)\,g/b_1)\\
    d_t &= \hat m / (\sqrt{v/b_2 + \bar\epsilon} + \epsilon)

Sources: google-deepmind/optax ``optax/_src/transform.py`` ``scale_by_optimistic_gradient``
(after ``scale_by_adam`` for ``optimistic_adam_v2`` in ``optax/_src/alias.py``). optax's
``optimistic_adam_v2`` defaults to ``nesterov=True``; the paper's Algorithm 1 has plain Adam
moments, npoptim's default (``variant="optax"`` sets ``nesterov=True``). optax's deprecated
``optimistic_adam(lr, optimism)`` is ``alpha=lr, beta=optimism`` with learning rate 1, i.e.
this with ``alpha=beta=1`` when ``optimism == lr``. State under optax's names:
``previous_gradient`` (the previous :math:`d`), and ``mu``, ``nu`` for Adam. optax's learning
rate has no default (npoptim: 1e-2 and 1e-3).

Dense gradients only.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import (VARIANT_DEFAULT, check_betas, check_flag, check_no_variant,
                                   check_nonnegative, flavored, is_real, resolve_variant)


class OptimisticHyper(NamedTuple):
    """One step's hyperparameters of the optimistic rules (built by ``_hyper``)."""

    maximize: float           # 1 or 0
    first_step: float         # 1: d_{t-1} = d_t
    alpha_plus_beta: float
    beta: float               # β of the extrapolation (not Adam's)
    neg_lr: float             # -γ
    # Adam's (unused by OptimisticGD)
    beta1: float
    one_minus_beta1: float
    beta2: float
    one_minus_beta2: float
    m_coef: float             # m̂ = m_coef * m + g_coef * g
    g_coef: float
    bias_correction2: float
    eps_root: float
    eps: float


@kernel
def _optimistic_param(p, d, previous, h):
    if h.first_step != 0:
        previous = d
    return p + h.neg_lr * (h.alpha_plus_beta * d - h.beta * previous)


@kernel
def optimistic_gd_rule(p, g, s, h):
    """One element of optimistic gradient descent; ``s = (previous_gradient,)``."""
    (previous_gradient,) = s
    if h.maximize != 0:
        g = -g
    return _optimistic_param(p, g, previous_gradient, h), (g,)


@kernel
def optimistic_adam_rule(p, g, s, h):
    """One element of optimistic Adam; ``s = (mu, nu, previous_gradient)``."""
    mu, nu, previous_gradient = s
    if h.maximize != 0:
        g = -g
    m = h.one_minus_beta1 * g + h.beta1 * mu
    v = h.one_minus_beta2 * (g * g) + h.beta2 * nu
    d = (h.m_coef * m + h.g_coef * g) / (np.sqrt(v / h.bias_correction2 + h.eps_root) + h.eps)
    return _optimistic_param(p, d, previous_gradient, h), (m, v, d)


@kernel
def _optimistic_gd_dense(param, grad, states, hyper):
    apply_dense(optimistic_gd_rule, param, grad, states, OptimisticHyper(*hyper))


@kernel
def _optimistic_adam_dense(param, grad, states, hyper):
    apply_dense(optimistic_adam_rule, param, grad, states, OptimisticHyper(*hyper))


def _check_extrapolation(group):
    for name in ("alpha", "beta"):
        if not is_real(group[name]) or not np.isfinite(group[name]):
            raise ValueError(f"{name} must be a finite number, got {group[name]!r}")
    check_nonnegative(group, "lr")
    check_flag(group, "maximize")


class OptimisticGD(Optimizer):
    """Optimistic gradient descent (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.01
        Learning rate γ.
    alpha : float, default: 1.0
        Weight α of the current direction (u = (α + β) d_t - β d_t-1).
    beta : float, default: 1.0
        Weight β of the extrapolation.
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"

    @flavored
    def __init__(self, params, lr=1e-2, alpha=1.0, beta=1.0, *, maximize=False):
        super().__init__(params, dict(lr=lr, alpha=alpha, beta=beta, maximize=maximize))

    def _check_group(self, group):
        _check_extrapolation(group)

    def _state_names(self, group):
        return ("previous_gradient",)

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        hyper = _hyper(param, state["step"], group)
        _optimistic_gd_dense(param, grad, self._flat_states(state, group), hyper)


def _hyper(param, step, group, adam=None):
    adam = adam or dict(beta1=0.0, one_minus_beta1=0.0, beta2=0.0, one_minus_beta2=0.0,
                        m_coef=0.0, g_coef=0.0, bias_correction2=1.0, eps_root=0.0, eps=0.0)
    return typed_record(OptimisticHyper, param, maximize=bool(group["maximize"]),
                        first_step=step == 1, alpha_plus_beta=group["alpha"] + group["beta"],
                        beta=group["beta"], neg_lr=-group["lr"], **adam)


class OptimisticAdam(Optimizer):
    """Optimistic Adam (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.999)
        Decay rates (β1, β2) of the first and second moments.
    eps : float, default: 1e-08
        Term ε added to the denominator for numerical stability.
    alpha : float, default: 1.0
        Weight α of the current direction (u = (α + β) d_t - β d_t-1).
    beta : float, default: 1.0
        Weight β of the extrapolation (not Adam's β1, β2).
    eps_root : float, default: 0.0
        Term added inside the square root.
    variant : str, default: 'paper'
        The published form to reproduce (a name of ``VARIANTS`` or ``ALIASES``, see the module
        docstring); it sets every switch whose default is "the variant's", and a switch given
        explicitly overrides it.
    nesterov : bool, default: the variant's
        Nesterov form of the first moment (optax's default).
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"
    #: The published forms (on the class: OptimisticGD, in the same module, has none).
    VARIANTS = {"paper": dict(nesterov=False), "optax": dict(nesterov=True)}
    ALIASES = {}

    @flavored
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, *, alpha=1.0, beta=1.0,
                 eps_root=0.0, variant="paper", nesterov=VARIANT_DEFAULT, maximize=False):
        self.variant, switches = resolve_variant(self.VARIANTS, self.ALIASES, variant,
                                                 dict(nesterov=nesterov))
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, eps_root=eps_root,
                                      alpha=alpha, beta=beta, maximize=maximize, **switches))

    def _check_group(self, group):
        check_no_variant(group)
        _check_extrapolation(group)
        check_nonnegative(group, "eps")
        check_nonnegative(group, "eps_root", label="eps_root value")
        check_betas(group["betas"])
        check_flag(group, "nesterov")

    def _state_names(self, group):
        return ("mu", "nu", "previous_gradient")

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        step = state["step"]
        beta1, beta2 = group["betas"]
        if group["nesterov"]:
            m_coef, g_coef = beta1 / (1 - beta1 ** (step + 1)), (1 - beta1) / (1 - beta1 ** step)
        else:
            m_coef, g_coef = 1 / (1 - beta1 ** step), 0.0
        adam = dict(beta1=beta1, one_minus_beta1=1 - beta1, beta2=beta2,
                    one_minus_beta2=1 - beta2, m_coef=m_coef, g_coef=g_coef,
                    bias_correction2=1 - beta2 ** step, eps_root=group["eps_root"],
                    eps=group["eps"])
        _optimistic_adam_dense(param, grad, self._flat_states(state, group),
                               _hyper(param, step, group, adam))
