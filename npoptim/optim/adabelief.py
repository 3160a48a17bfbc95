r"""AdaBelief (Zhuang et al., "AdaBelief Optimizer: Adapting Stepsizes by the Belief in Observed
Gradients", NeurIPS 2020, arXiv 2010.07468, Algorithm 2), as ``optax.adabelief`` 0.2.8, with
the options of the authors' ``adabelief-pytorch`` 0.2.1.

For each element, with gradient :math:`g` (negated when ``maximize``), step count :math:`t`
(per parameter), :math:`b_1 = 1-\beta_1^t`, :math:`b_2 = 1-\beta_2^t`:

.. math::

    \theta &\leftarrow \theta\,(1 - \gamma\lambda)    &&\quad\text{(1)}\\
    g &\leftarrow g + \lambda\theta                   &&\quad\text{(2)}\\
    m &\leftarrow \beta_1 m + (1-\beta_1)\,g\\
    s &\leftarrow \beta_2 s + (1-\beta_2)\,(g - m)^2 + \epsilon_r   &&\quad\text{(3)}\\
    \hat s &\leftarrow \max(\hat s, s)                &&\quad\text{(4)}\\
    \hat m &= m / b_1                                 &&\quad\text{(5)}\\
    \theta &\leftarrow \theta - \gamma\,\frac{\hat m}{\sqrt{\hat s}/\sqrt{b_2} + \epsilon}

1. With ``decoupled_weight_decay`` (:math:`1-\lambda` with ``fixed_decay``).
2. Else (L2 decay).
3. :math:`\epsilon_r` is ``eps_root`` (= ``eps`` unless given).
4. With ``amsgrad``; else :math:`\hat s = s`.
5. With ``nesterov``: :math:`\hat m = \beta_1 m/(1-\beta_1^{t+1}) + (1-\beta_1)\,g/b_1`.

The :math:`\epsilon_r` added to :math:`s` is stored with it (it accumulates), as in the paper,
optax (``eps_root``) and the authors' code (``exp_avg_var.add_(eps)``).

``rectify=True`` (the authors' default in adabelief-pytorch 0.2.1) replaces the last line by
RAdam's rectification, as the authors' file computes it: with
:math:`\rho_\infty = 2/(1-\beta_2) - 1`, :math:`\rho_t = \rho_\infty - 2t\beta_2^t/b_2`,

.. math::

    r_t &= \sqrt{b_2\,\frac{(\rho_t-4)(\rho_t-2)\rho_\infty}{(\rho_\infty-4)(\rho_\infty-2)\rho_t}}\\
    \theta &\leftarrow \theta - \gamma\,\frac{r_t}{b_1}\,\frac{m}{\sqrt{s} + \epsilon}
        &&\text{if } \rho_t \ge 5\\
    \theta &\leftarrow \theta - \frac{\gamma}{b_1}\,m   &&\text{else}

The second form only with ``degenerated_to_sgd``; without it there is no step while
:math:`\rho_t < 5`.

(the rectified step uses :math:`s`, not :math:`\hat s`, even with ``amsgrad``: so does the
authors' file).

Sources and where they differ:

* the paper's Algorithm 2 and google-deepmind/optax ``optax/_src/transform.py``
  ``scale_by_belief`` (``optax/_src/alias.py`` ``adabelief``): no weight decay, no
  rectification; ``variant="paper"`` (alias ``"optax"``), the default. optax's ``nesterov``
  is the switch of the same name.
* juntang-zhuang/Adabelief-Optimizer ``pypi_packages/adabelief_pytorch0.2.1/adabelief_pytorch/
  AdaBelief.py`` (PyPI ``adabelief-pytorch`` 0.2.1): ``rectify=True`` and
  ``weight_decouple=True`` by default; ``variant="adabelief_pytorch"`` sets both
  (``rectify``, ``decoupled_weight_decay``; its ``degenerated_to_sgd`` and ``fixed_decay`` are
  the switches of those names). Its step counts are per parameter as here; its rectification
  buffer is a cache of the same values.
* defaults: eps = 1e-16 in both; optax has no default learning rate (npoptim: 1e-3, the
  authors').

Dense gradients only: a zero gradient still changes :math:`m`, :math:`s` and :math:`\theta`.
"""
import math
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import fma, maximum
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import (VARIANT_DEFAULT, check_betas, check_flag, check_no_variant,
                                   check_nonnegative, flavored, resolve_variant)


class AdaBeliefHyper(NamedTuple):
    """One step's hyperparameters of the AdaBelief rules (built by ``AdaBelief._update``)."""

    maximize: float               # 1 or 0
    decay_factor: float           # 1 - γλ (or 1 - λ) for decoupled decay, else 1
    l2: float                     # λ for L2 decay, else 0
    beta1: float
    one_minus_beta1: float
    beta2: float
    one_minus_beta2: float
    eps_root: float
    momentum_coef: float          # m̂ = momentum_coef * m + grad_coef * g
    grad_coef: float
    adaptive: float               # 1: divide by the denominator; 0: the SGD step
    use_max: float                # 1: the denominator reads ŝ (amsgrad, not rectified)
    bias_correction2_sqrt: float  # sqrt(b2) (1 in the rectified step)
    eps: float
    neg_lr: float                 # -γ


@kernel
def belief_moments(p, g, m, s, h):
    """Weight decay and the two moments; returns the decayed ``p``, ``g``, ``m`` and ``s``."""
    if h.maximize != 0:
        g = -g
    p = p * h.decay_factor
    if h.l2 != 0:
        g = fma(h.l2, p, g)
    m = fma(h.one_minus_beta1, g, m * h.beta1)
    residual = g - m
    s = fma(h.one_minus_beta2 * residual, residual, s * h.beta2) + h.eps_root
    return p, g, m, s


@kernel
def _belief_param(p, g, m, s_hat, h):
    """The last line of the math (the adaptive, rectified or SGD step)."""
    m_hat = h.momentum_coef * m + h.grad_coef * g
    if h.adaptive == 0:
        return p + h.neg_lr * m_hat
    denom = np.sqrt(s_hat) / h.bias_correction2_sqrt + h.eps
    return p + h.neg_lr * m_hat / denom


@kernel
def adabelief_rule(p, g, s, h):
    """One element of AdaBelief; ``s = (exp_avg, exp_avg_var)``."""
    exp_avg, exp_avg_var = s
    p, g, m, v = belief_moments(p, g, exp_avg, exp_avg_var, h)
    return _belief_param(p, g, m, v, h), (m, v)


@kernel
def adabelief_amsgrad_rule(p, g, s, h):
    """AdaBelief with amsgrad; ``s = (exp_avg, exp_avg_var, max_exp_avg_var)``."""
    exp_avg, exp_avg_var, max_exp_avg_var = s
    p, g, m, v = belief_moments(p, g, exp_avg, exp_avg_var, h)
    v_max = maximum(max_exp_avg_var, v)
    v_hat = v_max if h.use_max != 0 else v
    return _belief_param(p, g, m, v_hat, h), (m, v, v_max)


@kernel
def _adabelief_dense(param, grad, states, hyper):
    apply_dense(adabelief_rule, param, grad, states, AdaBeliefHyper(*hyper))


@kernel
def _adabelief_amsgrad_dense(param, grad, states, hyper):
    apply_dense(adabelief_amsgrad_rule, param, grad, states, AdaBeliefHyper(*hyper))


#: The published forms (see the module docstring).
VARIANTS = {
    "paper": dict(rectify=False, decoupled_weight_decay=False),
    "adabelief_pytorch": dict(rectify=True, decoupled_weight_decay=True),
}
ALIASES = {"optax": "paper"}


class AdaBelief(Optimizer):
    """AdaBelief (see the module docstring for the math, the switches and the variants).

    ``eps_root=None`` adds ``eps`` to ``s`` (the paper, the authors' code); optax names it
    separately (also 1e-16 by default).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.999)
        Decay rates (β1, β2) of the first and second moments.
    eps : float, default: 1e-16
        Term ε added to the denominator.
    weight_decay : float, default: 0.0
        Weight decay λ: L2, or decoupled with ``decoupled_weight_decay``.
    amsgrad : bool, default: False
        Divide by the running maximum of s.
    variant : str, default: 'paper'
        The published form to reproduce (a name of ``VARIANTS`` or ``ALIASES``, see the module
        docstring); it sets every switch whose default is "the variant's", and a switch given
        explicitly overrides it.
    eps_root : float or None, default: None
        ε_r added to s at every step (None: ``eps``).
    decoupled_weight_decay : bool, default: the variant's
        Decoupled decay θ(1 - γλ) before the moments.
    fixed_decay : bool, default: False
        Decoupled decay not scaled by the lr: θ(1 - λ).
    rectify : bool, default: the variant's
        RAdam's rectification of the step (adabelief-pytorch).
    degenerated_to_sgd : bool, default: True
        While not rectified, take the SGD step (else no step).
    nesterov : bool, default: False
        optax's Nesterov form of the first moment.
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"

    @flavored
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-16, weight_decay=0.0,
                 amsgrad=False, *, variant="paper", eps_root=None,
                 decoupled_weight_decay=VARIANT_DEFAULT, fixed_decay=False,
                 rectify=VARIANT_DEFAULT, degenerated_to_sgd=True, nesterov=False,
                 maximize=False):
        self.variant, switches = resolve_variant(
            VARIANTS, ALIASES, variant,
            dict(rectify=rectify, decoupled_weight_decay=decoupled_weight_decay))
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, eps_root=eps_root,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      fixed_decay=fixed_decay,
                                      degenerated_to_sgd=degenerated_to_sgd, nesterov=nesterov,
                                      maximize=maximize, **switches))

    def _check_group(self, group):
        check_no_variant(group)
        check_nonnegative(group, "lr", "eps", "weight_decay")
        if group["eps_root"] is not None:
            check_nonnegative(group, "eps_root", label="eps_root value")
        check_betas(group["betas"])
        check_flag(group, "amsgrad", "decoupled_weight_decay", "fixed_decay", "rectify",
                   "degenerated_to_sgd", "nesterov", "maximize")
        if group["rectify"] and group["nesterov"]:
            raise ValueError("nesterov (optax's) and rectify (the authors') do not combine: "
                             "the rectified step reads the momentum alone")

    def _state_names(self, group):
        names = ("exp_avg", "exp_avg_var")
        return names + ("max_exp_avg_var",) if group["amsgrad"] else names

    def _step_form(self, step, group):
        """``(adaptive, momentum_coef, grad_coef, sqrt(b2), use_max)`` of this step, or
        None for the rectified rule's "no step" (``degenerated_to_sgd=False``, early steps)."""
        beta1, beta2 = group["betas"]
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        if not group["rectify"]:
            if group["nesterov"]:
                coefs = (beta1 / (1 - beta1 ** (step + 1)), (1 - beta1) / bias_correction1)
            else:
                coefs = (1 / bias_correction1, 0.0)
            return True, coefs[0], coefs[1], math.sqrt(bias_correction2), group["amsgrad"]
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * beta2 ** step / bias_correction2
        if rho_t >= 5:
            rect = math.sqrt(bias_correction2 * (rho_t - 4) / (rho_inf - 4) * (rho_t - 2)
                             / rho_t * rho_inf / (rho_inf - 2))
            return True, rect / bias_correction1, 0.0, 1.0, False
        if group["degenerated_to_sgd"]:
            return False, 1 / bias_correction1, 0.0, 1.0, False
        return None

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        lr, wd = group["lr"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        decoupled = group["decoupled_weight_decay"]
        form = self._step_form(state["step"], group)
        adaptive, momentum_coef, grad_coef, bc2_sqrt, use_max = form or (False, 0, 0, 1, False)
        hyper = typed_record(
            AdaBeliefHyper, param, maximize=bool(group["maximize"]),
            decay_factor=(1 - (wd if group["fixed_decay"] else lr * wd)) if decoupled else 1.0,
            l2=0.0 if decoupled else wd, beta1=beta1, one_minus_beta1=1 - beta1, beta2=beta2,
            one_minus_beta2=1 - beta2,
            eps_root=group["eps"] if group["eps_root"] is None else group["eps_root"],
            momentum_coef=momentum_coef, grad_coef=grad_coef, adaptive=adaptive,
            use_max=use_max, bias_correction2_sqrt=bc2_sqrt, eps=group["eps"],
            neg_lr=-lr if form is not None else 0.0)
        kernel_ = _adabelief_amsgrad_dense if group["amsgrad"] else _adabelief_dense
        kernel_(param, grad, self._flat_states(state, group), hyper)
