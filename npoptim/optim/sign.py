r"""signSGD and Signum (Bernstein et al., "signSGD: Compressed Optimisation for Non-Convex
Problems", ICML 2018, arXiv 1802.04434, Algorithms 1 and 3), as ``optax.sign_sgd`` and
``optax.signum`` 0.2.8 and the authors' MXNet optimizer.

For each element, with gradient :math:`g` (negated when ``maximize``):

.. math::

    g &\leftarrow g + \lambda\theta                       &&\text{weight decay (L2, as MXNet's)}\\
    m &\leftarrow \beta m + (1-\beta)\,g                  &&\text{Signum only (``momentum\_buffer'')}\\
    \theta &\leftarrow \theta - \gamma\operatorname{sign}(m)
        &&\text{(signSGD: } \operatorname{sign}(g)\text{)}

``sign(0) = 0``. Sources: google-deepmind/optax ``optax/_src/alias.py`` ``sign_sgd``
(``scale_by_sign``, then the learning rate) and ``signum`` (``ema(beta, debias=False)``, then
the sign: the buffer starts at 0 and is not bias-corrected, which the sign would not notice
anyway). The authors' code (jxbz/signSGD, README: Signum is MXNet's official optimizer,
``mxnet.optimizer.Signum``) adds the weight decay ``wd`` to the gradient inside the momentum,
as here (it stores the negated buffer); its extra decoupled ``wd_lh`` is not implemented.
optax has no weight decay here and no default learning rate (npoptim: 1e-2 and ``beta=0.9``);
the buffer is named ``momentum_buffer`` as torch's SGD names its own.

Dense gradients only: a zero gradient still moves Signum's buffer and parameter (and, with
weight decay, signSGD's).
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import decayed_grad
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import check_flag, check_nonnegative, flavored


class SignHyper(NamedTuple):
    """One step's hyperparameters of the sign rules (built by ``Signum._hyper``)."""

    maximize: float         # 1 or 0
    weight_decay: float
    beta: float             # Signum's momentum (unused by signSGD)
    one_minus_beta: float
    neg_lr: float           # -γ


@kernel
def sign_sgd_rule(p, g, s, h):
    """One element of signSGD (no state)."""
    return p + h.neg_lr * np.sign(decayed_grad(p, g, h)), s


@kernel
def signum_rule(p, g, s, h):
    """One element of Signum; ``s = (momentum_buffer,)``."""
    (momentum_buffer,) = s
    g = decayed_grad(p, g, h)
    m = h.beta * momentum_buffer + h.one_minus_beta * g
    return p + h.neg_lr * np.sign(m), (m,)


@kernel
def _sign_sgd_dense(param, grad, states, hyper):
    apply_dense(sign_sgd_rule, param, grad, states, SignHyper(*hyper))


@kernel
def _signum_dense(param, grad, states, hyper):
    apply_dense(signum_rule, param, grad, states, SignHyper(*hyper))


class Signum(Optimizer):
    """Signum (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.01
        Learning rate γ.
    momentum : float, default: 0.9
        Momentum β of the buffer the sign is taken of.
    weight_decay : float, default: 0.0
        L2 weight decay λ: λθ is added to the gradient.
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"
    step_in_state_dict = None

    @flavored
    def __init__(self, params, lr=1e-2, momentum=0.9, weight_decay=0.0, *, maximize=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay,
                                      maximize=maximize))

    def _check_group(self, group):
        check_nonnegative(group, "lr", "weight_decay")
        momentum = group.get("momentum", 0.0)
        if isinstance(momentum, bool) or not isinstance(momentum, (int, float)) \
                or not 0.0 <= momentum < 1.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        check_flag(group, "maximize")

    def _state_names(self, group):
        return ("momentum_buffer",)

    def _hyper(self, param, group):
        beta = group.get("momentum", 0.0)
        return typed_record(SignHyper, param, maximize=bool(group["maximize"]),
                            weight_decay=group["weight_decay"], beta=beta,
                            one_minus_beta=1 - beta, neg_lr=-group["lr"])

    def _update(self, param, grad, state, group, index, shape):
        _signum_dense(param, grad, self._flat_states(state, group), self._hyper(param, group))


class SignSGD(Signum):
    """signSGD (see the module docstring); no state.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.01
        Learning rate γ.
    weight_decay : float, default: 0.0
        L2 weight decay λ: λθ is added to the gradient.
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    @flavored
    def __init__(self, params, lr=1e-2, weight_decay=0.0, *, maximize=False):
        Optimizer.__init__(self, params, dict(lr=lr, weight_decay=weight_decay,
                                              maximize=maximize))

    def _state_names(self, group):
        return ()

    def _update(self, param, grad, state, group, index, shape):
        _sign_sgd_dense(param, grad, (), self._hyper(param, group))
