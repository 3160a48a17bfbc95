r"""RAdam: Adam with variance rectification (Liu et al., 2020), as ``torch.optim.RAdam`` 2.13.

With step count :math:`t` (per parameter), :math:`b_1 = 1-\beta_1^t`, :math:`b_2 = 1-\beta_2^t`,
the length of the approximated simple moving average

.. math::

    \rho_\infty &= \frac{2}{1-\beta_2} - 1, \qquad
    \rho_t = \rho_\infty - \frac{2t\beta_2^t}{b_2},\\
    r_t &= \sqrt{\frac{(\rho_t-4)(\rho_t-2)\,\rho_\infty}{(\rho_\infty-4)(\rho_\infty-2)\,\rho_t}},

and for each element, with gradient :math:`g` (negated when ``maximize``):

.. math::

    \theta &\leftarrow \theta\,(1 - \gamma\lambda)   &&\text{decoupled weight decay}\\
    g &\leftarrow g + \lambda\theta                  &&\text{else (L2 weight decay)}\\
    m &\leftarrow m + (1-\beta_1)(g - m)\\
    v &\leftarrow \beta_2 v + (1-\beta_2)\,g^2\\
    \theta &\leftarrow \theta - \frac{m}{b_1}\,\gamma\,
        \frac{\sqrt{b_2}}{\sqrt{v} + \epsilon}\, r_t  &&\text{if } \rho_t > 5\\
    \theta &\leftarrow \theta - \frac{m}{b_1}\,\gamma &&\text{otherwise (SGD with momentum)}

Note where :math:`\epsilon` sits: added to :math:`\sqrt{v}`, before the bias correction. The
products are evaluated left to right as torch does, and :math:`\sqrt{b_2}/(\sqrt v+\epsilon)`
as torch's ``scalar / tensor``, a reciprocal then a product. L2 weight decay and the :math:`v`
update are fused multiply-adds and :math:`m` a ``lerp``, as in torch's CPU kernels (see
:mod:`npoptim.kernels.scalar`). Dense gradients only, as in torch.

Convention switches (see :mod:`npoptim.flavors`; the ``optax`` flavor sets both, as
``optax.scale_by_radam`` 0.2.8 computes):

* ``eps_mode`` in the words of Adam's switch: ``"eps_hat"`` (torch's, the default) adds
  :math:`\epsilon` to :math:`\sqrt{v}` before the bias correction, as above. ``"torch"``, this
  switch's word for ``"eps_hat"`` before 2026-12 (in Adam it named ``"bias_corrected"``), is
  read as an alias.
* ``eps_mode="bias_corrected"``: :math:`\epsilon` added to :math:`\sqrt{\hat v}`, the
  bias-corrected :math:`v`: the rectified step is
  :math:`\theta \leftarrow \theta - \gamma\, r_t\,\tfrac{m}{b_1} / (\sqrt{v / b_2} + \epsilon)`,
  which is torch's rule with :math:`\epsilon\sqrt{b_2}` in place of :math:`\epsilon`: the
  one rule runs with that eps (optax's own order of operations differs by rounding only).
* ``rectify_threshold_inclusive=True``: rectify where :math:`\rho_t \ge 5` (optax's
  ``ro >= threshold``) instead of torch's :math:`\rho_t > 5`; the two differ only at a step
  whose :math:`\rho_t` is exactly 5.0 (``betas=(0.9, 0.8397685748659791)`` at step 6).
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import constant
from npoptim.optim.adam import adam_moments, moment_hyper
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import (check_betas, check_choice, check_flag, check_nonnegative,
                                   flavored)


class RAdamHyper(NamedTuple):
    """One step's hyperparameters of the RAdam rules (built by ``RAdam._update``)."""

    # read by Adam's adam_moments (see npoptim.optim.adam.moment_hyper)
    decay_factor: float
    l2: float
    l2_decays: float
    one_minus_beta1: float
    beta2: float
    one_minus_beta2: float
    maximize: float
    # RAdam's own
    bias_correction1: float       # b1
    lr: float
    bias_correction2_sqrt: float  # sqrt(b2)
    eps: float
    rect: float                   # r_t (the rectified rule only)


@kernel
def radam_rule(p, g, s, h):
    """A rectified step (``rho_t > 5``); ``s = (exp_avg, exp_avg_sq)``."""
    exp_avg, exp_avg_sq = s
    p, g, m, v = adam_moments(p, g, exp_avg, exp_avg_sq, h)
    # torch's ``scalar / tensor``: a reciprocal, then the product
    adaptive_lr = constant(1.0, v) / (np.sqrt(v) + h.eps) * h.bias_correction2_sqrt
    return p - m / h.bias_correction1 * h.lr * adaptive_lr * h.rect, (m, v)


@kernel
def unrectified_rule(p, g, s, h):
    """An early step (``rho_t <= 5``): SGD with the bias-corrected momentum."""
    exp_avg, exp_avg_sq = s
    p, g, m, v = adam_moments(p, g, exp_avg, exp_avg_sq, h)
    return p - m / h.bias_correction1 * h.lr, (m, v)


@kernel
def _radam_dense(param, grad, states, hyper):
    apply_dense(radam_rule, param, grad, states, RAdamHyper(*hyper))


@kernel
def _unrectified_dense(param, grad, states, hyper):
    apply_dense(unrectified_rule, param, grad, states, RAdamHyper(*hyper))


#: Words this switch had before 2026-12, read as today's (old checkpoints, old scripts).
EPS_MODE_ALIASES = {"torch": "eps_hat"}


class RAdam(Optimizer):
    """RAdam, matching ``torch.optim.RAdam`` option for option (see the module docstring).

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
    weight_decay : float, default: 0
        Weight decay λ: L2, or decoupled with ``decoupled_weight_decay``.
    decoupled_weight_decay : bool, default: False
        Decoupled decay θ(1 - γλ).
    foreach, capturable, differentiable : ignored
        Accepted for compatibility with torch only: they choose torch's implementations and change
        nothing here (``differentiable=True`` is refused: npoptim has no autograd).
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    eps_mode : str, default: 'eps_hat'
        ``"eps_hat"`` (torch: ε added to sqrt(v) before the bias correction) or
        ``"bias_corrected"`` (added to sqrt(v/b2), optax).
    rectify_threshold_inclusive : bool, default: False
        Rectify where ρ_t >= 5 (optax) instead of ρ_t > 5 (torch).
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    torch_conventions = {"eps_mode": "eps_hat", "rectify_threshold_inclusive": False}

    @flavored
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False, eps_mode="eps_hat",
                 rectify_threshold_inclusive=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, foreach=foreach,
                                      capturable=capturable,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      differentiable=differentiable, eps_mode=eps_mode,
                                      rectify_threshold_inclusive=rectify_threshold_inclusive))

    def _check_group(self, group):
        check_choice(group, "eps_mode", ("eps_hat", "bias_corrected"), EPS_MODE_ALIASES)
        check_flag(group, "rectify_threshold_inclusive")
        check_nonnegative(group, "lr", "eps")
        check_betas(group["betas"])
        check_nonnegative(group, "weight_decay")

    def _state_names(self, group):
        return ("exp_avg", "exp_avg_sq")

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        step = state["step"]
        beta1, beta2 = group["betas"]
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
        rectified = rho_t >= 5.0 if group["rectify_threshold_inclusive"] else rho_t > 5.0
        rect = (((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                ** 0.5 if rectified else 0.0)
        eps = group["eps"]
        if group["eps_mode"] == "bias_corrected":  # sqrt(v/b2) + eps = (sqrt(v) + eps')/sqrt(b2)
            eps = eps * bias_correction2 ** 0.5
        hyper = typed_record(RAdamHyper, param, **moment_hyper(group),
                             bias_correction1=bias_correction1, lr=group["lr"],
                             bias_correction2_sqrt=bias_correction2 ** 0.5, eps=eps, rect=rect)
        kernel_ = _radam_dense if rectified else _unrectified_dense
        kernel_(param, grad, self._flat_states(state, group), hyper)
