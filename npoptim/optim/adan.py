r"""Adan, the ADAptive Nesterov momentum algorithm (Xie et al., "Adan: Adaptive Nesterov Momentum
Algorithm for Faster Optimizing Deep Models", arXiv 2208.06677, Algorithm 1), as the authors'
code computes it, with ``optax.adan`` 0.2.8 as ``variant="optax"``.

The betas are decay rates, as in the authors' code and optax (the paper's :math:`\beta_k` are
``1 - betas[k]``; defaults (0.98, 0.92, 0.99)). For each element, with gradient :math:`g`
(negated when ``maximize``), the previous step's gradient :math:`g'` (:math:`d = 0` in a
parameter's first step), step count :math:`t` (per parameter), :math:`b_k = 1-\beta_k^t`:

.. math::

    d &= g - g'\\
    m &\leftarrow \beta_1 m + (1-\beta_1)\,g\\
    v &\leftarrow \beta_2 v + (1-\beta_2)\,d\\
    n &\leftarrow \beta_3 n + (1-\beta_3)\,(g + c\,d)^2        &&\quad\text{(1)}\\
    u &= \Big(\frac{m}{b_1} + c\,\frac{v}{b_2}\Big) \Big/ \Big(\sqrt{n/b_3 + \bar\epsilon}
         + \epsilon\Big)\\
    \theta &\leftarrow (\theta - \gamma u)/(1 + \gamma\lambda)   &&\quad\text{(2)}\\
    \theta &\leftarrow \theta(1 - \gamma\lambda) - \gamma u      &&\quad\text{(3)}\\
    \theta &\leftarrow \theta - \gamma(u + \lambda\theta)        &&\quad\text{(4)}

1. :math:`c = \beta_2` (paper, authors); :math:`1-\beta_2` (optax).
2. ``weight_decay_form="proximal"`` (paper, authors' default).
3. ``weight_decay_form="decoupled"`` (authors' ``no_prox=True``).
4. ``weight_decay_form="in_update"`` (optax).

:math:`\bar\epsilon` is ``eps_root`` (0; optax's default 1e-8); with it 0 the denominator is
computed as the authors do, :math:`\sqrt{n}/\sqrt{b_3} + \epsilon`. The state keeps the
authors' names: ``exp_avg`` (:math:`m`), ``exp_avg_sq`` (:math:`n`), ``exp_avg_diff``
(:math:`v`) and ``neg_pre_grad`` (:math:`-g`, for the next step's :math:`d`).

Sources and where they differ:

* sail-sg/Adan ``adan.py`` (``_single_tensor_adan``; not on PyPI): the default. It counts
  steps per param group and starts :math:`d = 0` at the group's first step; npoptim counts per
  parameter (they differ only when a parameter has no gradient in some step). Its
  ``max_grad_norm`` global clipping is not implemented (clip the gradients before the step).
* google-deepmind/optax ``optax/_src/transform.py`` ``scale_by_adan`` (``optax/_src/alias.py``
  ``adan``): its docstring writes the paper's update, but the code weights :math:`d` by
  ``1 - b2`` (0.08) where the paper and the authors weight it by ``b2`` (0.92), in both
  :math:`n` and :math:`u` (optax pull request #1715, open); its weight decay is
  ``add_decayed_weights`` before the learning rate, and ``eps_root=1e-8``.
  ``variant="optax"`` sets ``diff_weight="one_minus_beta2"``, ``weight_decay_form="in_update"``
  and ``eps_root=1e-8``: optax 0.2.8 to rounding.
* lucidrains ``adan-pytorch`` 0.1.0 (PyPI) takes the paper's betas (0.02, 0.08, 0.01) and skips
  the moment update in the first step (which then moves only by the decay) while still
  bias-correcting for it: not offered.

Dense gradients only: a zero gradient still changes every state.
"""
import math
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import constant, fma
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import (VARIANT_DEFAULT, check_choice, check_flag, check_no_variant,
                                   check_nonnegative, check_three_betas, flavored, resolve_variant)


class AdanHyper(NamedTuple):
    """One step's hyperparameters of :func:`adan_rule` (built by ``Adan._update``)."""

    maximize: float               # 1 or 0
    first_step: float             # 1: d = 0
    beta1: float
    one_minus_beta1: float
    beta2: float
    one_minus_beta2: float
    beta3: float
    one_minus_beta3: float
    diff_weight: float            # c
    m_coef: float                 # 1 / b1
    v_coef: float                 # c / b2
    bias_correction3: float       # b3
    bias_correction3_sqrt: float  # sqrt(b3)
    eps_root: float
    eps: float
    decay_factor: float           # 1 - γλ ("decoupled"), else 1
    update_decay: float           # λ ("in_update"), else 0
    prox_divisor: float           # 1 + γλ ("proximal"), else 1
    neg_lr: float                 # -γ


@kernel
def adan_rule(p, g, s, h):
    """One element of Adan; ``s = (exp_avg, exp_avg_sq, exp_avg_diff, neg_pre_grad)``."""
    exp_avg, exp_avg_sq, exp_avg_diff, neg_pre_grad = s
    if h.maximize != 0:
        g = -g
    d = constant(0.0, g) if h.first_step != 0 else g + neg_pre_grad
    m = fma(h.one_minus_beta1, g, exp_avg * h.beta1)
    v = fma(h.one_minus_beta2, d, exp_avg_diff * h.beta2)
    x = fma(h.diff_weight, d, g)
    n = fma(h.one_minus_beta3 * x, x, exp_avg_sq * h.beta3)
    if h.eps_root != 0:
        denom = np.sqrt(n / h.bias_correction3 + h.eps_root) + h.eps
    else:
        denom = np.sqrt(n) / h.bias_correction3_sqrt + h.eps
    u = (m * h.m_coef + v * h.v_coef) / denom
    if h.update_decay != 0:
        u = u + h.update_decay * p
    p = (p * h.decay_factor + h.neg_lr * u) / h.prox_divisor
    return p, (m, n, v, -g)


@kernel
def _adan_dense(param, grad, states, hyper):
    apply_dense(adan_rule, param, grad, states, AdanHyper(*hyper))


#: The published forms (see the module docstring).
VARIANTS = {
    "paper": dict(diff_weight="beta2", weight_decay_form="proximal", eps_root=0.0),
    "optax": dict(diff_weight="one_minus_beta2", weight_decay_form="in_update", eps_root=1e-8),
}
ALIASES = {"sail_sg": "paper", "authors": "paper"}
_DIFF_WEIGHTS = ("beta2", "one_minus_beta2")
_WEIGHT_DECAY_FORMS = ("proximal", "decoupled", "in_update")


class Adan(Optimizer):
    """Adan (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    betas : tuple of float, default: (0.98, 0.92, 0.99)
        Decay rates (β1, β2, β3) of m, v (the gradient difference) and n.
    eps : float, default: 1e-08
        Term ε added to the denominator.
    weight_decay : float, default: 0.0
        Weight decay λ, in the form ``weight_decay_form`` says.
    variant : str, default: 'paper'
        The published form to reproduce (a name of ``VARIANTS`` or ``ALIASES``, see the module
        docstring); it sets every switch whose default is "the variant's", and a switch given
        explicitly overrides it.
    diff_weight : str, default: the variant's
        Weight c of the gradient difference: ``"beta2"`` (paper, authors) or ``"one_minus_beta2"``
        (optax).
    weight_decay_form : str, default: the variant's
        ``"proximal"`` ((θ - γu)/(1 + γλ)), ``"decoupled"`` or ``"in_update"`` (optax).
    eps_root : float, default: the variant's
        Term added inside the square root.
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"

    @flavored
    def __init__(self, params, lr=1e-3, betas=(0.98, 0.92, 0.99), eps=1e-8, weight_decay=0.0,
                 *, variant="paper", diff_weight=VARIANT_DEFAULT,
                 weight_decay_form=VARIANT_DEFAULT, eps_root=VARIANT_DEFAULT, maximize=False):
        self.variant, switches = resolve_variant(
            VARIANTS, ALIASES, variant, dict(diff_weight=diff_weight,
                                             weight_decay_form=weight_decay_form,
                                             eps_root=eps_root))
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, **switches))

    def _check_group(self, group):
        check_no_variant(group)
        check_nonnegative(group, "lr", "eps", "weight_decay")
        check_nonnegative(group, "eps_root", label="eps_root value")
        check_three_betas(group["betas"])
        check_flag(group, "maximize")
        check_choice(group, "diff_weight", _DIFF_WEIGHTS)
        check_choice(group, "weight_decay_form", _WEIGHT_DECAY_FORMS)

    def _state_names(self, group):
        return ("exp_avg", "exp_avg_sq", "exp_avg_diff", "neg_pre_grad")

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        step = state["step"]
        lr, wd = group["lr"], group["weight_decay"]
        beta1, beta2, beta3 = group["betas"]
        c = beta2 if group["diff_weight"] == "beta2" else 1 - beta2
        form = group["weight_decay_form"]
        bias_correction3 = 1 - beta3 ** step
        hyper = typed_record(
            AdanHyper, param, maximize=bool(group["maximize"]), first_step=step == 1,
            beta1=beta1, one_minus_beta1=1 - beta1, beta2=beta2, one_minus_beta2=1 - beta2,
            beta3=beta3, one_minus_beta3=1 - beta3, diff_weight=c,
            m_coef=1 / (1 - beta1 ** step), v_coef=c / (1 - beta2 ** step),
            bias_correction3=bias_correction3,
            bias_correction3_sqrt=math.sqrt(bias_correction3), eps_root=group["eps_root"],
            eps=group["eps"], decay_factor=1 - lr * wd if form == "decoupled" else 1.0,
            update_decay=wd if form == "in_update" else 0.0,
            prox_divisor=1 + lr * wd if form == "proximal" else 1.0, neg_lr=-lr)
        _adan_dense(param, grad, self._flat_states(state, group), hyper)
