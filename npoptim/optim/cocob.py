r"""COCOB-Backprop (Orabona & Tommasi, "Training Deep Networks without Learning Rates Through Coin
Betting", NeurIPS 2017, arXiv 1705.07795, Algorithm 2), as ``optax.contrib.cocob`` 0.2.8
(google-deepmind/optax ``optax/contrib/_cocob.py``).

Each element bets on its own displacement from where it started, with no learning rate. With
gradient :math:`g` (negated when ``maximize``), :math:`c = \gamma\,(g + \lambda\theta)`
(``lr`` :math:`\gamma` only rescales the gradient, so that a schedule can be injected, as in
optax; :math:`\lambda` is ``weight_decay``, an L2 term in the gradient) and :math:`\theta_0` the
parameter at its first step:

.. math::

    L &\leftarrow \max(L, |c|)              &&\text{``scale'', from } \epsilon\\
    G &\leftarrow G + |c|                   &&\text{``subgradients''}\\
    R &\leftarrow \max(R - c\,(\theta - \theta_0),\ 0)  &&\text{``reward''}\\
    C &\leftarrow C - c                     &&\text{``cumulative\_gradients''}\\
    \theta &\leftarrow \theta_0 + \frac{C}{L\,\max(G + L,\ \alpha L)}\,(L + R)

computed as optax does, :math:`\theta + (-\theta + \ldots)`. :math:`\alpha` is ``alpha``
(100) and :math:`\epsilon` ``eps`` (1e-8): the initial :math:`L`, so that the first division
is defined. Five states under optax's names: ``init_particles`` (:math:`\theta_0`),
``cumulative_gradients``, ``scale``, ``subgradients``, ``reward``; no step counter. Dense
gradients only (a zero gradient still moves the parameter to the bet of the current state).
"""
from typing import NamedTuple

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import constant, fma, maximum
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import check_flag, check_nonnegative, check_positive, flavored


class COCOBHyper(NamedTuple):
    """One step's hyperparameters of :func:`cocob_rule` (built by ``COCOB._update``)."""

    maximize: float        # 1 or 0
    weight_decay: float
    lr: float              # multiplies the gradient
    alpha: float


@kernel
def cocob_rule(p, g, s, h):
    """One element of COCOB; ``s = (init_particles, cumulative_gradients, scale,
    subgradients, reward)``."""
    init_particles, cumulative_gradients, scale, subgradients, reward = s
    if h.maximize != 0:
        g = -g
    c = fma(h.weight_decay, p, g) * h.lr
    scale = maximum(scale, abs(c))
    subgradients = subgradients + abs(c)
    reward = maximum(reward - c * (p - init_particles), constant(0.0, c))
    cumulative_gradients = cumulative_gradients - c
    bet = cumulative_gradients / (scale * maximum(subgradients + scale, h.alpha * scale))
    update = -p + (init_particles + bet * (scale + reward))
    return p + update, (init_particles, cumulative_gradients, scale, subgradients, reward)


@kernel
def _cocob_dense(param, grad, states, hyper):
    apply_dense(cocob_rule, param, grad, states, COCOBHyper(*hyper))


class COCOB(Optimizer):
    """COCOB-Backprop (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 1.0
        Multiplier γ of the gradient (a schedule can scale it).
    alpha : float, default: 100.0
        α of the bet's denominator max(G + L, αL).
    eps : float, default: 1e-08
        Initial L.
    weight_decay : float, default: 0.0
        L2 weight decay λ, in the gradient.
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"
    step_in_state_dict = None

    @flavored
    def __init__(self, params, lr=1.0, alpha=100.0, eps=1e-8, weight_decay=0.0, *,
                 maximize=False):
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize))

    def _check_group(self, group):
        check_nonnegative(group, "lr", "weight_decay")
        check_positive(group, "alpha")
        check_positive(group, "eps")
        check_flag(group, "maximize")

    def _state_names(self, group):
        return ("init_particles", "cumulative_gradients", "scale", "subgradients", "reward")

    def _init_state(self, param, group):
        state = super()._init_state(param, group)
        state["init_particles"][...] = param
        state["scale"][...] = group["eps"]
        return state

    def _update(self, param, grad, state, group, index, shape):
        hyper = typed_record(COCOBHyper, param, maximize=bool(group["maximize"]),
                             weight_decay=group["weight_decay"], lr=group["lr"],
                             alpha=group["alpha"])
        _cocob_dense(param, grad, self._flat_states(state, group), hyper)
