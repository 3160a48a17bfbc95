r"""SGD with the stochastic Polyak step size (Loizou et al., "Stochastic Polyak Step-size for
SGD: An Adaptive Learning Rate for Fast Convergence", AISTATS 2021, arXiv 2002.10542,
SPS\ :sub:`max`), as ``optax.polyak_sgd`` 0.2.8. The step needs the loss: ``step(closure)``,
``closure()`` returning ``(loss, grads)``.

With the loss :math:`f`, the gradients :math:`g` (negated when ``maximize``) and the scaling
:math:`s` (the group's ``lr``), :math:`u = -s\,g` and :math:`\|u\|^2` summed over every
parameter of every group:

.. math::

    \delta &= f - f^\star  \quad(\max(\delta, 0) \text{ with ``mode="sps+"''})\\
    \gamma &= \min\Big(\frac{\delta}{\|u\|^2 + \epsilon},\ \gamma_{\max}\Big), \quad
    \gamma = 0 \text{ if } \|u\|^2 + \epsilon \le 2^{-52}\\
    \theta &\leftarrow \theta + \gamma\, u

:math:`f^\star` is ``f_min`` (0: models that interpolate), :math:`\gamma_{\max}`
``max_learning_rate`` (1), :math:`\epsilon` ``eps`` (0). This is google-deepmind/optax
``optax/_src/alias.py`` ``polyak_sgd`` as its code computes it (``sgd(scaling)``, then
``scale_by_polyak`` of ``optax/_src/transform.py`` on the scaled update; the threshold
:math:`2^{-52}` is its ``jnp.finfo(float).eps``). Its docstring says ``scaling`` multiplies
the step; in the code it divides the Polyak ratio: with :math:`\epsilon = 0` the step is
:math:`\theta - \min(\delta/(s\|g\|^2),\ s\gamma_{\max})\,g`, which is the paper's
:math:`\min(\delta/(c\|g\|^2), \gamma_b)` with :math:`c = s` and :math:`\gamma_b = s\gamma_{\max}`
(the paper's SPS\ :sub:`max` is ``lr=c, max_learning_rate=γ_b/c``). Since :math:`s` is the
group's ``lr``, lr schedules schedule it, as optax's ``scaling`` schedule does.
``f_min``, ``max_learning_rate``, ``eps``, ``mode`` and ``maximize`` are one value for the
whole optimizer (the step size is global). No state.

Golden cases run it on an objective (``separable-quartic``, see :mod:`npoptim.golden.inputs`).
Dense gradients only.
"""
import math
from typing import NamedTuple

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.reduction import grad_sumsq
from npoptim.optim.optimizer import Optimizer, loss_and_grads, typed_record
from npoptim.optim.options import check_choice, check_flag, check_nonnegative, flavored, is_real

_GLOBAL = ("max_learning_rate", "f_min", "eps", "mode", "maximize")
_MODES = ("sps", "sps+")


class PolyakHyper(NamedTuple):
    """One step's hyperparameters of :func:`polyak_rule` (built by ``PolyakSGD._update``)."""

    neg_step: float   # -sγ (+sγ with maximize)


@kernel
def polyak_rule(p, g, s, h):
    """One element of Polyak SGD (no state)."""
    return p + h.neg_step * g, s


@kernel
def _polyak_dense(param, grad, states, hyper):
    apply_dense(polyak_rule, param, grad, states, PolyakHyper(*hyper))


class PolyakSGD(Optimizer):
    """SGD with the Polyak step size (see the module docstring); ``step(closure)``.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 1.0
        Scaling s of the gradient (the group's lr, so schedules scale it).
    max_learning_rate : float or None, default: 1.0
        Cap γmax of the Polyak step size.
    f_min : float, default: 0.0
        Lower bound f* of the loss.
    eps : float, default: 0.0
        Term ε added to ‖u‖².
    mode : str, default: 'sps'
        ``"sps"`` or ``"sps+"`` (δ clipped at 0).
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"
    needs_closure = True
    step_in_state_dict = None

    @flavored
    def __init__(self, params, lr=1.0, max_learning_rate=1.0, f_min=0.0, eps=0.0, *,
                 mode="sps", maximize=False):
        self._loss = 0.0
        self._step_size = 0.0
        super().__init__(params, dict(lr=lr, max_learning_rate=max_learning_rate,
                                      f_min=f_min, eps=eps, mode=mode, maximize=maximize))

    def _check_group(self, group):
        check_nonnegative(group, "lr", "max_learning_rate", "eps")
        if not is_real(group["f_min"]) or not math.isfinite(group["f_min"]):
            raise ValueError(f"f_min must be a finite number, got {group['f_min']!r}")
        check_choice(group, "mode", _MODES)
        check_flag(group, "maximize")
        for name in _GLOBAL:
            if group[name] != self.defaults[name]:
                raise ValueError(f"{name} is one value for the whole optimizer (the Polyak step "
                                 "size is global): set it in the constructor, not per group")

    def step(self, grads=None, closure=None):
        """One step; needs ``closure`` (``closure()`` returns ``(loss, grads)``); returns the
        loss. Everything, the loss included, is checked before anything changes."""
        loss, grads = loss_and_grads("PolyakSGD", grads, closure)
        self._loss = float(loss)
        super().step(grads)
        return loss

    def _apply(self, prepared):
        """The global step size from the loss and every gradient, then each parameter."""
        update_sq = 0.0   # ||u||^2 = sum of s^2 ||g||^2
        for group, _, _, grad in prepared:   # fixed order: param-group order
            update_sq += group["lr"] ** 2 * float(grad_sumsq(grad))
        d = self.defaults
        gap = (-self._loss if d["maximize"] else self._loss) - d["f_min"]
        if d["mode"] == "sps+":
            gap = max(gap, 0.0)
        denom = update_sq + d["eps"]
        self._step_size = 0.0 if denom <= 2.0 ** -52 else min(gap / denom,
                                                              d["max_learning_rate"])
        super()._apply(prepared)

    def _update(self, param, grad, state, group, index, shape):
        sign = 1.0 if group["maximize"] else -1.0
        hyper = typed_record(PolyakHyper, param,
                             neg_step=sign * group["lr"] * self._step_size)
        _polyak_dense(param, grad, (), hyper)
