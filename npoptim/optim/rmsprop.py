r"""RMSprop (Hinton, Lecture 6e; Graves, 2013 for the centered form), as ``torch.optim.RMSprop``
2.13.

For each element, with gradient :math:`g` (negated when ``maximize``), smoothing constant
:math:`\alpha`:

.. math::

    g &\leftarrow g + \lambda\theta                              &&\quad\text{(1)}\\
    v &\leftarrow \alpha v + (1-\alpha)\,g^2                      &&\quad\text{(2)}\\
    \bar g &\leftarrow \bar g + (1-\alpha)(g - \bar g)            &&\quad\text{(3)}\\
    d &\leftarrow \sqrt{v - \bar g^2} + \epsilon \;\text{(centered)}\quad
        \text{else}\quad d \leftarrow \sqrt{v} + \epsilon\\
    b &\leftarrow \mu b + g / d                                   &&\quad\text{(4)}\\
    \theta &\leftarrow \theta - \gamma b \;(\mu > 0)\quad
        \text{else}\quad \theta \leftarrow \theta - \gamma\, g / d

1. Weight decay.
2. The state ``square_avg``.
3. The state ``grad_avg`` (centered only).
4. The state ``momentum_buffer`` (only with :math:`\mu > 0`).

Note that :math:`\epsilon` is added outside the square root. States are created as torch
creates them, at a parameter's first step: ``step``, ``square_avg``, then ``momentum_buffer``
if ``momentum > 0`` and ``grad_avg`` if ``centered``. (If a group turns momentum or centering on
later, torch fails with ``KeyError``; npoptim creates the missing state as zeros.) Dense
gradients only, as in torch.

Rounding follows torch's CPU kernels (see :mod:`npoptim.kernels.scalar`): weight decay, the
``square_avg`` update, ``square_avg - grad_avg^2`` and the momentum step into the parameter
are fused multiply-adds, ``grad_avg`` a ``lerp``, and the division steps are torch's
``addcdiv``: ``p + (-lr * g) / d``.

Convention switches (see :mod:`npoptim.flavors`), one line each of the rule:

* ``eps_in_sqrt=True`` (Keras, TF, tfjs, optax's default): :math:`d = \sqrt{v + \epsilon}`
  (centered: :math:`\sqrt{v - \bar g^2 + \epsilon}`).
* ``lr_in_momentum=True`` (Keras, TF, tfjs, optax): the buffer holds the scaled step,
  :math:`b \leftarrow \mu b + \gamma\, g / d`, :math:`\theta \leftarrow \theta - b`
  (equal to torch at constant lr only). The rule runs with ``lr_in_buffer = lr`` and
  ``neg_lr = -1``.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import fma, lerp
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import check_flag, check_nonnegative, flavored


class RMSpropHyper(NamedTuple):
    """One step's hyperparameters of the RMSprop rules (built by ``RMSprop._update``)."""

    weight_decay: float
    alpha: float
    one_minus_alpha: float
    eps: float
    momentum: float
    neg_lr: float    # -lr (lr_in_momentum: -1)
    maximize: float  # 1 or 0
    eps_in_sqrt: float   # 1 or 0
    lr_in_buffer: float  # lr with lr_in_momentum, else 1


@kernel
def _grad_and_square_avg(p, g, square_avg, h):
    """The gradient after ``maximize`` and weight decay, and the new ``square_avg``."""
    if h.maximize != 0:
        g = -g
    if h.weight_decay != 0:
        g = fma(h.weight_decay, p, g)
    return g, fma(h.one_minus_alpha * g, g, square_avg * h.alpha)


@kernel
def _centered_denom(v, grad_avg, h):
    """``sqrt(square_avg - grad_avg^2) + eps`` (torch's ``addcmul(.., value=-1)``)."""
    return _denom(fma(-grad_avg, grad_avg, v), h)


@kernel
def _denom(v, h):
    """``sqrt(v) + eps``, or ``sqrt(v + eps)`` with ``eps_in_sqrt``."""
    if h.eps_in_sqrt != 0:
        return np.sqrt(v + h.eps)
    return np.sqrt(v) + h.eps


@kernel
def _momentum_step(p, g, denom, buf, h):
    """The new parameter and ``momentum_buffer`` (``buf.mul_(momentum).addcdiv_(g, denom)``,
    then ``param.add_(buf, alpha=-lr)``)."""
    buf = buf * h.momentum + h.lr_in_buffer * g / denom
    return fma(h.neg_lr, buf, p), buf


@kernel
def rmsprop_rule(p, g, s, h):
    """One element; ``s = (square_avg,)``."""
    (square_avg,) = s
    g, v = _grad_and_square_avg(p, g, square_avg, h)
    denom = _denom(v, h)
    return p + h.neg_lr * g / denom, (v,)


@kernel
def centered_rule(p, g, s, h):
    """Centered; ``s = (square_avg, grad_avg)``."""
    square_avg, grad_avg = s
    g, v = _grad_and_square_avg(p, g, square_avg, h)
    grad_avg = lerp(grad_avg, g, h.one_minus_alpha)
    denom = _centered_denom(v, grad_avg, h)
    return p + h.neg_lr * g / denom, (v, grad_avg)


@kernel
def momentum_rule(p, g, s, h):
    """With momentum; ``s = (square_avg, momentum_buffer)``."""
    square_avg, buf = s
    g, v = _grad_and_square_avg(p, g, square_avg, h)
    denom = _denom(v, h)
    p, buf = _momentum_step(p, g, denom, buf, h)
    return p, (v, buf)


@kernel
def centered_momentum_rule(p, g, s, h):
    """Centered with momentum; ``s = (square_avg, momentum_buffer, grad_avg)``."""
    square_avg, buf, grad_avg = s
    g, v = _grad_and_square_avg(p, g, square_avg, h)
    grad_avg = lerp(grad_avg, g, h.one_minus_alpha)
    denom = _centered_denom(v, grad_avg, h)
    p, buf = _momentum_step(p, g, denom, buf, h)
    return p, (v, buf, grad_avg)


@kernel
def _rmsprop_dense(param, grad, states, hyper):
    apply_dense(rmsprop_rule, param, grad, states, RMSpropHyper(*hyper))


@kernel
def _centered_dense(param, grad, states, hyper):
    apply_dense(centered_rule, param, grad, states, RMSpropHyper(*hyper))


@kernel
def _momentum_dense(param, grad, states, hyper):
    apply_dense(momentum_rule, param, grad, states, RMSpropHyper(*hyper))


@kernel
def _centered_momentum_dense(param, grad, states, hyper):
    apply_dense(centered_momentum_rule, param, grad, states, RMSpropHyper(*hyper))


# (momentum > 0, centered) -> kernel
_KERNELS = {(False, False): _rmsprop_dense, (False, True): _centered_dense,
            (True, False): _momentum_dense, (True, True): _centered_momentum_dense}


class RMSprop(Optimizer):
    """RMSprop, matching ``torch.optim.RMSprop`` option for option (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.01
        Learning rate γ.
    alpha : float, default: 0.99
        Smoothing constant α of the average of g².
    eps : float, default: 1e-08
        Term ε added outside the square root.
    weight_decay : float, default: 0
        Weight decay λ: λθ added to the gradient (L2), or θ(1 - γλ) with
        ``decoupled_weight_decay``.
    momentum : float, default: 0
        Momentum factor μ (0: none).
    centered : bool, default: False
        Centered RMSprop: divide by the estimated variance, v - ḡ².
    capturable, foreach, differentiable : ignored
        Accepted for compatibility with torch only: they choose torch's implementations and change
        nothing here (``differentiable=True`` is refused: npoptim has no autograd).
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    eps_in_sqrt : bool, default: False
        Put ε inside the square root, sqrt(v + ε) (Keras, TF, tfjs, optax).
    lr_in_momentum : bool, default: False
        The buffer holds the scaled step, b ← μb + γg/d, θ ← θ - b (Keras, TF, tfjs, optax).
    decoupled_weight_decay : bool, default: False
        Decay the parameter, θ(1 - γλ), before the rule instead of adding λθ to the gradient.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    creates_missing_state = True  # momentum or centered switched on after the first step
    #: The convention switches and their torch values (see :mod:`npoptim.flavors`).
    torch_conventions = {"eps_in_sqrt": False, "lr_in_momentum": False,
                         "decoupled_weight_decay": False}
    #: A switch that matters only when this option is non-zero.
    conventions_apply = {"lr_in_momentum": "momentum", "decoupled_weight_decay": "weight_decay"}
    #: the base class applies ``decoupled_weight_decay`` before the rule (Keras's decay)
    decouples_weight_decay = True

    @flavored
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False, *, eps_in_sqrt=False, lr_in_momentum=False,
                 decoupled_weight_decay=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps,
                                      centered=centered, weight_decay=weight_decay,
                                      capturable=capturable, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      eps_in_sqrt=eps_in_sqrt, lr_in_momentum=lr_in_momentum,
                                      decoupled_weight_decay=decoupled_weight_decay))

    def _check_group(self, group):
        check_nonnegative(group, "lr", "eps", "momentum", "weight_decay")
        check_nonnegative(group, "alpha", label="alpha value")
        check_flag(group, "eps_in_sqrt", "lr_in_momentum", "decoupled_weight_decay")

    def _state_names(self, group):
        return (("square_avg",) + (("momentum_buffer",) if group["momentum"] > 0 else ())
                + (("grad_avg",) if group["centered"] else ()))

    def _update(self, param, grad, state, group, index, shape):
        for name in self._state_names(group):
            if name not in state:  # the group turned momentum or centered on after state
                state[name] = np.zeros(state["square_avg"].shape, param.dtype)
        state["step"] += 1
        alpha = group["alpha"]
        lr_in_buffer = group["lr_in_momentum"] and group["momentum"] > 0
        hyper = typed_record(RMSpropHyper, param, weight_decay=group["weight_decay"],
                             alpha=alpha, one_minus_alpha=1 - alpha, eps=group["eps"],
                             momentum=group["momentum"],
                             neg_lr=-1.0 if lr_in_buffer else -group["lr"],
                             maximize=bool(group["maximize"]),
                             eps_in_sqrt=bool(group["eps_in_sqrt"]),
                             lr_in_buffer=group["lr"] if lr_in_buffer else 1.0)
        kernel_ = _KERNELS[group["momentum"] > 0, bool(group["centered"])]
        kernel_(param, grad, self._flat_states(state, group), hyper)
