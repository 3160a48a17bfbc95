r"""MADGRAD (Defazio & Jelassi, "Adaptivity without Compromise: A Momentumized, Adaptive, Dual
Averaged Gradient Method for Stochastic Optimization", JMLR 2022, arXiv 2101.11075), as the
authors' ``madgrad`` 1.3 (facebookresearch/madgrad ``madgrad/madgrad.py``) and
``optax.contrib.madgrad`` 0.2.8.

Dual averaging with a cube-root AdaGrad denominator and momentum by averaging. At the
optimizer's step :math:`k` (0, 1, ...; counted for every ``step`` call, as the authors'
``state["k"]``), with :math:`\gamma' = \gamma + \epsilon` (the authors' "for stability"; 0 stays
0), :math:`\lambda_k = \gamma'\sqrt{k+1}`, :math:`c = 1 - \text{momentum}`, and for each element
with gradient :math:`g` (plus :math:`w\theta` for L2 decay):

.. math::

    v &\leftarrow v + \lambda_k g^2,\qquad s \leftarrow s + \lambda_k g\\
    \rho &= v^{1/3} + \epsilon \;(\infty \text{ where } \rho = 0)\\
    z &= x_0 - s/\rho\\
    \theta &\leftarrow (1-c)\,\theta + c\,z

With ``decouple_decay``, after that: :math:`\theta \leftarrow \theta - \gamma' w\,\theta_{old}`.

:math:`x_0` is the parameter at its first step (state ``x0``). With momentum 0 the authors keep
no ``x0`` and recompute it as :math:`\theta + s/\rho` from the previous step's :math:`s`,
:math:`\rho` (the same value up to rounding); npoptim does the same. optax always keeps ``x0``
and uses :math:`\gamma + \epsilon` also when :math:`\gamma = 0`; it has no ``decouple_decay``
(its decay is L2, the authors' default). :math:`v^{1/3}` is ``pow(v, 1/3)`` as the authors';
optax's ``cbrt`` can differ by an ulp, and optax evaluates :math:`\sqrt{k+1}` on its int32
counter, which jax computes in float32 even with ``jax_enable_x64`` (1.8e-10 of the scale after
two steps measured; the cross-check gives optax a float64 counter). State under the authors'
names: ``grad_sum_sq``, ``s``, ``x0`` (with momentum); the step count ``k`` is kept in each
param group (the authors keep one ``k`` for the optimizer, in ``state["k"]``). Dense gradients
only (the authors' sparse path, momentum 0 without decay, is not offered).
"""
import math
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import constant, fma
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import check_flag, check_nonnegative, flavored, is_real


class MADGRADHyper(NamedTuple):
    """One step's hyperparameters of the MADGRAD rules (built by ``MADGRAD._update``)."""

    l2: float              # weight_decay (L2), else 0
    lamb: float            # lambda_k
    eps: float
    one_minus_ck: float    # 1 - (1 - momentum), as the authors compute it
    ck: float              # 1 - momentum
    neg_decoupled: float   # -lr' * weight_decay with decouple_decay, else 0
    third: float           # 1/3


@kernel
def _rho(v, h):
    rho = v ** h.third + h.eps
    if h.eps == 0 and rho == 0:
        rho = constant(np.inf, v)
    return rho


@kernel
def _moments(p, g, v, s, h):
    if h.l2 != 0:
        g = fma(h.l2, p, g)
    v = fma(h.lamb * g, g, v)
    s = fma(h.lamb, g, s)
    return v, s, _rho(v, h)


@kernel
def madgrad_rule(p, g, s, h):
    """One element of MADGRAD with momentum; ``s = (grad_sum_sq, s, x0)``."""
    grad_sum_sq, s_sum, x0 = s
    v, s_new, rho = _moments(p, g, grad_sum_sq, s_sum, h)
    z = x0 - s_new / rho
    p_new = fma(h.ck, z, p * h.one_minus_ck)
    if h.neg_decoupled != 0:
        p_new = fma(h.neg_decoupled, p, p_new)
    return p_new, (v, s_new, x0)


@kernel
def madgrad_no_momentum_rule(p, g, s, h):
    """One element of MADGRAD with momentum 0; ``s = (grad_sum_sq, s)``."""
    grad_sum_sq, s_sum = s
    x0 = p + s_sum / _rho(grad_sum_sq, h)
    v, s_new, rho = _moments(p, g, grad_sum_sq, s_sum, h)
    p_new = x0 - s_new / rho
    if h.neg_decoupled != 0:
        p_new = fma(h.neg_decoupled, p, p_new)
    return p_new, (v, s_new)


@kernel
def _madgrad_dense(param, grad, states, hyper):
    apply_dense(madgrad_rule, param, grad, states, MADGRADHyper(*hyper))


@kernel
def _madgrad_no_momentum_dense(param, grad, states, hyper):
    apply_dense(madgrad_no_momentum_rule, param, grad, states, MADGRADHyper(*hyper))


class MADGRAD(Optimizer):
    """MADGRAD (see the module docstring); the authors' names and defaults.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.01
        Learning rate γ.
    momentum : float, default: 0.9
        Momentum (1 - c) of the averaging.
    weight_decay : float, default: 0.0
        Weight decay: L2, or decoupled with ``decouple_decay``.
    eps : float, default: 1e-06
        Term ε added to the cube root and to the lr.
    decouple_decay : bool, default: False
        Decoupled weight decay, after the step.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"
    step_in_state_dict = None

    @flavored
    def __init__(self, params, lr=1e-2, momentum=0.9, weight_decay=0.0, eps=1e-6,
                 decouple_decay=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay,
                                      eps=eps, decouple_decay=decouple_decay, k=0))

    def _check_group(self, group):
        check_nonnegative(group, "lr", "eps", "weight_decay")
        momentum = group["momentum"]
        if not (is_real(momentum) and 0 <= momentum < 1):
            raise ValueError(f"Momentum {momentum!r} must be in the range [0,1)")
        check_flag(group, "decouple_decay")
        k = group["k"]
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
            raise ValueError(f"k (the step count) must be a non-negative whole number, got {k!r}")

    def _state_names(self, group):
        names = ("grad_sum_sq", "s")
        return names + ("x0",) if group["momentum"] != 0 else names

    def _init_state(self, param, group):
        state = super()._init_state(param, group)
        if "x0" in state:
            state["x0"][...] = param
        return state

    def _apply(self, prepared):
        super()._apply(prepared)
        for group in self.param_groups:  # every step counts, with or without gradients
            group["k"] = group["k"] + 1

    def _update(self, param, grad, state, group, index, shape):
        lr, eps, decay = group["lr"], group["eps"], group["weight_decay"]
        if lr != 0.0:
            lr = lr + eps
        decoupled = group["decouple_decay"]
        hyper = typed_record(MADGRADHyper, param, l2=0.0 if decoupled else decay,
                             lamb=lr * math.sqrt(group["k"] + 1), eps=eps,
                             one_minus_ck=1 - (1 - group["momentum"]),
                             ck=1 - group["momentum"],
                             neg_decoupled=-lr * decay if decoupled else 0.0, third=1 / 3)
        kernel_ = _madgrad_dense if group["momentum"] != 0 else _madgrad_no_momentum_dense
        kernel_(param, grad, self._flat_states(state, group), hyper)
