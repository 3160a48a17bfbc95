r"""AdamaxW: Adamax (Kingma & Ba, 2015, section 7.1) with decoupled weight decay (Loshchilov &
Hutter, "Decoupled Weight Decay Regularization", ICLR 2019), as ``optax.adamaxw`` 0.2.8.

For each element, with gradient :math:`g` (negated when ``maximize``) and step count :math:`t`
(per parameter):

.. math::

    m &\leftarrow m + (1-\beta_1)(g - m)                   &&\text{``exp\_avg''}\\
    u &\leftarrow \max(\beta_2 u,\; |g| + \epsilon)        &&\text{``exp\_inf''}\\
    \theta &\leftarrow \theta - \gamma\Big(\frac{m}{(1-\beta_1^t)\,u} + \lambda\theta\Big)

The moments are ``torch.optim.Adamax``'s, with its state names and rounding (with
:math:`\lambda = 0` a step equals npoptim's Adamax bit for bit); the decay is applied as
optax applies it, :math:`\lambda\theta` added to the Adamax direction before the learning
rate (google-deepmind/optax ``optax/_src/alias.py`` ``adamaxw``: ``scale_by_adamax``, then
``add_decayed_weights``, then the learning rate). Like torch's AdamW and optax, the decay is
scaled by the learning rate (the paper scales it by the schedule multiplier alone).
Defaults: torch Adamax's lr 2e-3, optax's ``weight_decay=1e-4``.

Dense gradients only: a zero gradient still decays :math:`m`, :math:`u` and :math:`\theta`.
"""
from typing import NamedTuple

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import lerp, maximum
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import check_betas, check_flag, check_nonnegative, flavored


class AdamaxWHyper(NamedTuple):
    """One step's hyperparameters of :func:`adamaxw_rule` (built by ``AdamaxW._update``)."""

    maximize: float           # 1 or 0
    one_minus_beta1: float
    beta2: float
    eps: float
    bias_correction1: float   # 1 - beta1^t
    weight_decay: float
    neg_lr: float             # -γ


@kernel
def adamaxw_rule(p, g, s, h):
    """One element; ``s = (exp_avg, exp_inf)``."""
    exp_avg, exp_inf = s
    if h.maximize != 0:
        g = -g
    m = lerp(exp_avg, g, h.one_minus_beta1)
    u = maximum(exp_inf * h.beta2, abs(g) + h.eps)
    if h.weight_decay == 0:   # Adamax's own last line, so that λ = 0 is Adamax bit for bit
        return p + (h.neg_lr / h.bias_correction1) * m / u, (m, u)
    direction = m / h.bias_correction1 / u + h.weight_decay * p
    return p + h.neg_lr * direction, (m, u)


@kernel
def _adamaxw_dense(param, grad, states, hyper):
    apply_dense(adamaxw_rule, param, grad, states, AdamaxWHyper(*hyper))


class AdamaxW(Optimizer):
    """AdamaxW (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.002
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.999)
        Decay rates (β1, β2) of the first moment and of the infinity norm.
    eps : float, default: 1e-08
        Term ε added to abs(g) inside the maximum.
    weight_decay : float, default: 0.0001
        Decoupled weight decay λ: λθ added to the direction, scaled by the lr.
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"

    @flavored
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-4, *,
                 maximize=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize))

    def _check_group(self, group):
        check_nonnegative(group, "lr", "eps", "weight_decay")
        check_betas(group["betas"])
        check_flag(group, "maximize")

    def _state_names(self, group):
        return ("exp_avg", "exp_inf")

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        beta1, beta2 = group["betas"]
        hyper = typed_record(AdamaxWHyper, param, maximize=bool(group["maximize"]),
                             one_minus_beta1=1 - beta1, beta2=beta2, eps=group["eps"],
                             bias_correction1=1 - beta1 ** state["step"],
                             weight_decay=group["weight_decay"], neg_lr=-group["lr"])
        _adamaxw_dense(param, grad, self._flat_states(state, group), hyper)
