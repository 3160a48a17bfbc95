r"""D-Adaptation Adam(W) (Defazio & Mishchenko, "Learning-Rate-Free Learning by D-Adaptation",
ICML 2023, arXiv 2301.07733), as the authors' ``dadaptation`` 3.2 (facebookresearch/dadaptation
``dadaptation/dadapt_adam.py`` ``DAdaptAdam``) and ``optax.contrib.dadapt_adamw`` 0.2.8.

Adam whose step size :math:`d` is estimated from the gradients, as Prodigy (its successor,
:mod:`npoptim.optim.prodigy`) but with a :math:`\sqrt{\beta_2}` EMA and no :math:`d/d_0`
weighting. One step over all parameters (every group shares :math:`d`), with gradient :math:`g`
(plus :math:`\lambda\theta` when ``decouple=False``), step count :math:`k` of the first group,
:math:`\gamma` the largest group lr, :math:`\sigma = \sqrt{\beta_2}`, :math:`r` the group's
``layer_scale``, :math:`b = \sqrt{1-\beta_2^{k+1}}/(1-\beta_1^{k+1})` with
``use_bias_correction`` (else 1), :math:`\eta = d\gamma b`:

.. math::

    q &\leftarrow \sigma q + (1-\sigma)\textstyle\sum r\,\eta\,
        \langle g, s / (\sqrt{v} + \epsilon)\rangle                 &&\quad\text{(1)}\\
    m &\leftarrow \beta_1 m + r\eta(1-\beta_1) g\\
    v &\leftarrow \beta_2 v + (1-\beta_2) g^2\\
    s &\leftarrow \sigma s + \eta(1-\sigma) g\\
    \hat d &= q / ((1-\sigma) \textstyle\sum r \|s\|_1)\\
    d &\leftarrow \max(d, \min(\hat d, d\cdot\text{growth}))\\
    \theta &\leftarrow \theta - \eta\lambda\theta                   &&\quad\text{(2)}\\
    \theta &\leftarrow \theta - \frac{m}{\sqrt{v} + \epsilon}

1. With the old :math:`s, v`; :math:`q` is the state ``numerator_weighted``.
2. Only with ``decouple``, before the Adam step.

If :math:`\sum\|s\|_1 = 0` the step ends after the moments (no parameter moves; :math:`k` and
:math:`q` stay), as in the authors' code. Sums over all parameters run in param-group order,
each parameter's through :func:`~npoptim.kernels.reduction.sum_pair`.

==========================  ===================================================================
``variant``                 reproduces (repository, file)
==========================  ===================================================================
``"paper"`` (default)       the authors' ``DAdaptAdam(decouple=True)`` defaults (alias
                            ``"authors"``): no bias correction.
``"optax"``                 google-deepmind/optax ``optax/contrib/_dadapt_adamw.py``
                            ``dadapt_adamw``: ``use_bias_correction=True`` (always, in optax).
==========================  ===================================================================

The class is the AdamW form (``decouple=True``, optax's and the issue's name);
``decouple=False`` is the authors' ``DAdaptAdam`` default, L2 decay in the gradient. optax has
no ``growth_rate`` (:math:`\infty`: ``None``, the default, or ``math.inf``), ``layer_scale`` (1)
or L2 form. The authors require every group's lr to be the largest one or 0 (npoptim raises
``ValueError`` otherwise, before any change). State under the authors' names: per parameter
``s``, ``exp_avg``, ``exp_avg_sq``, ``step`` (an int); per group ``d``, ``numerator_weighted``,
``k``. Dense gradients only.
"""
import math
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_from_states
from npoptim.kernels.jit import kernel
from npoptim.kernels.reduction import sum_pair
from npoptim.kernels.scalar import constant, fma
from npoptim.optim.optimizer import Optimizer, flat_view, typed_record
from npoptim.optim.options import (VARIANT_DEFAULT, check_betas, check_counter, check_flag,
                                   check_no_variant, check_one_lr, check_positive, flavored,
                                   growth_bound, is_real, resolve_variant)


class DAdaptHyper(NamedTuple):
    """One step's hyperparameters of the D-Adaptation rules (built by ``DAdaptAdamW._hyper``)."""

    l2: float                  # weight_decay when decouple=False, else 0
    eps: float
    beta1: float
    m_coef: float              # r * dlr * (1 - beta1)
    beta2: float
    one_minus_beta2: float
    sqrt_beta2: float
    s_coef: float              # dlr * (1 - sqrt(beta2))
    neg_decay: float           # -weight_decay * dlr when decoupled, else 0


@kernel
def dadapt_numerator_rule(p, g, s, h):
    """Pass 1a: ``g s / (sqrt(v) + eps)`` with the old ``s``, ``v``; ``s = (s, exp_avg_sq)``."""
    s_sum, exp_avg_sq = s
    if h.l2 != 0:
        g = fma(h.l2, p, g)
    return (s_sum, exp_avg_sq), g * (s_sum / (np.sqrt(exp_avg_sq) + h.eps)), constant(0.0, g)


@kernel
def dadapt_moments_rule(p, g, s, h):
    """Pass 1b: the moments and ``s``, returning ``|s|``; ``s = (s, exp_avg, exp_avg_sq)``."""
    s_sum, exp_avg, exp_avg_sq = s
    if h.l2 != 0:
        g = fma(h.l2, p, g)
    m = fma(h.m_coef, g, exp_avg * h.beta1)
    v = fma(h.one_minus_beta2 * g, g, exp_avg_sq * h.beta2)
    s_new = fma(h.s_coef, g, s_sum * h.sqrt_beta2)
    return (s_new, m, v), abs(s_new), constant(0.0, g)


@kernel
def dadapt_update_rule(p, s, h):
    """Pass 2: the decoupled decay, then ``p - m / (sqrt(v) + eps)``; ``s = (m, v)``."""
    exp_avg, exp_avg_sq = s
    p = fma(h.neg_decay, p, p)
    return p - exp_avg / (np.sqrt(exp_avg_sq) + h.eps)


@kernel
def _numerator(param, grad, states, hyper):
    return sum_pair(dadapt_numerator_rule, param, grad, states, DAdaptHyper(*hyper))


@kernel
def _moments(param, grad, states, hyper):
    return sum_pair(dadapt_moments_rule, param, grad, states, DAdaptHyper(*hyper))


@kernel
def _update(param, states, hyper):
    apply_from_states(dadapt_update_rule, param, states, DAdaptHyper(*hyper))


#: The switches each variant sets.
VARIANTS = {"paper": dict(use_bias_correction=False), "optax": dict(use_bias_correction=True)}
#: Other names of the variants.
ALIASES = {"authors": "paper", "dadaptation": "paper"}


class DAdaptAdamW(Optimizer):
    """D-Adaptation AdamW (see the module docstring); the authors' names and defaults.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 1.0
        Learning rate γ, a multiplier of the estimated step size d.
    betas : tuple of float, default: (0.9, 0.999)
        Decay rates (β1, β2) of the first and second moments.
    eps : float, default: 1e-08
        Term ε added to the denominator for numerical stability.
    weight_decay : float, default: 0.0
        Weight decay λ: decoupled with ``decouple``, else L2.
    decouple : bool, default: True
        Decoupled weight decay (AdamW); False: the authors' DAdaptAdam L2 form.
    use_bias_correction : bool, default: the variant's
        Bias-correct the step (optax: always).
    d0 : float, default: 1e-06
        Initial estimate d0 of d.
    growth_rate : float or None, default: None
        Largest factor d may grow by in a step (None: no bound).
    layer_scale : float, default: 1.0
        The group's scale r of the estimate.
    variant : str, default: 'paper'
        The published form to reproduce (a name of ``VARIANTS`` or ``ALIASES``, see the module
        docstring); it sets every switch whose default is "the variant's", and a switch given
        explicitly overrides it.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"
    step_in_state_dict = "int"

    @flavored
    def __init__(self, params, lr=1.0, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 decouple=True, use_bias_correction=VARIANT_DEFAULT, d0=1e-6,
                 growth_rate=None, layer_scale=1.0, *, variant="paper"):
        self.variant, switches = resolve_variant(
            VARIANTS, ALIASES, variant, dict(use_bias_correction=use_bias_correction))
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      decouple=decouple, d0=d0, growth_rate=growth_rate,
                                      layer_scale=layer_scale, **switches, d=d0,
                                      numerator_weighted=0.0, k=0))

    def _check_group(self, group):
        check_no_variant(group)
        if not (is_real(group["lr"]) and 0 <= group["lr"] < math.inf):
            raise ValueError(f"Invalid learning rate: {group['lr']!r}")
        check_betas(group["betas"])
        for name in ("eps", "d0", "d"):
            check_positive(group, name)
        if group["growth_rate"] is not None:
            check_positive(group, "growth_rate", allow_inf=True)
        for name in ("weight_decay", "layer_scale"):
            if not (is_real(group[name]) and 0 <= group[name] < math.inf):
                raise ValueError(f"Invalid {name} value: {group[name]!r}")
        if not (is_real(group["numerator_weighted"])
                and math.isfinite(group["numerator_weighted"])):
            raise ValueError("numerator_weighted must be a finite number, got "
                             f"{group['numerator_weighted']!r}")
        check_flag(group, "decouple", "use_bias_correction")
        check_counter(group, "k")

    def _state_names(self, group):
        return ("s", "exp_avg", "exp_avg_sq")

    def _prepare(self, grads):
        prepared = super()._prepare(grads)
        check_one_lr(self.param_groups, "DAdaptAdamW")
        return prepared

    def _apply(self, prepared):
        """Both passes over every parameter (see the module docstring); nothing here raises."""
        first = self.param_groups[0]
        beta1, beta2 = first["betas"]
        sqrt_beta2 = beta2 ** 0.5
        k, d = first["k"], first["d"]
        lr = max(group["lr"] for group in self.param_groups)
        bias_correction = 1.0
        if first["use_bias_correction"]:
            bias_correction = (1 - beta2 ** (k + 1)) ** 0.5 / (1 - beta1 ** (k + 1))
        dlr = d * lr * bias_correction
        numerator_acum = 0.0
        sk_l1 = 0.0
        for group, index, param, grad in prepared:
            state = self.state.get(index)
            if state is None:
                state = self.state[index] = self._init_state(param, group)
            if group["lr"] == 0.0:
                continue
            r = group["layer_scale"]
            hyper = self._hyper(param, group, beta1, beta2, r * dlr * (1 - beta1),
                                dlr * (1 - sqrt_beta2), 0.0)
            flat = param.reshape(-1) if param.flags.c_contiguous else param.ravel()
            s, exp_avg, exp_avg_sq = self._flat_states(state, group)
            dot, _ = _numerator(flat, grad, (s, exp_avg_sq), hyper)
            numerator_acum += r * dlr * float(dot)
            abs_sum, _ = _moments(flat, grad, (s, exp_avg, exp_avg_sq), hyper)
            sk_l1 += r * float(abs_sum)
        numerator_weighted = (sqrt_beta2 * first["numerator_weighted"]
                              + (1 - sqrt_beta2) * numerator_acum)
        if sk_l1 == 0:
            return
        if lr > 0.0:
            d_hat = numerator_weighted / ((1 - sqrt_beta2) * sk_l1)
            d = max(d, min(d_hat, d * growth_bound(first)))
        for group in self.param_groups:
            group.update(numerator_weighted=numerator_weighted, d=d)
        for group, index, param, grad in prepared:
            state = self.state[index]
            state["step"] += 1
            decay = group["weight_decay"] if group["decouple"] else 0.0
            hyper = self._hyper(param, group, beta1, beta2, 0.0, 0.0, -decay * dlr)
            with flat_view(param) as flat:
                _update(flat, (state["exp_avg"].reshape(-1), state["exp_avg_sq"].reshape(-1)),
                        hyper)
        for group in self.param_groups:
            group["k"] = group["k"] + 1

    def _hyper(self, param, group, beta1, beta2, m_coef, s_coef, neg_decay):
        return typed_record(
            DAdaptHyper, param, l2=0.0 if group["decouple"] else group["weight_decay"],
            eps=group["eps"], beta1=beta1, m_coef=m_coef, beta2=beta2,
            one_minus_beta2=1 - beta2, sqrt_beta2=beta2 ** 0.5, s_coef=s_coef,
            neg_decay=neg_decay)
