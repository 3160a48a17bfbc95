r"""Prodigy (Mishchenko & Defazio, "Prodigy: An Expeditiously Adaptive Parameter-Free Learner",
ICML 2024, arXiv 2306.06101), as the authors' ``prodigyopt`` 1.1.2 (konstmish/prodigy
``prodigyopt/prodigy.py``) and ``optax.contrib.prodigy`` 0.2.8.

Adam whose step size :math:`d` is estimated on the fly. One step over all parameters (every
group shares :math:`d`), with gradient :math:`g` (plus :math:`\lambda\theta` when
``decouple=False``), step count :math:`k` (0, 1, ... of the first param group, the authors'
``group["k"]``), :math:`\gamma` the largest group lr, :math:`\beta_3 = \sqrt{\beta_2}` unless
given, :math:`b = \sqrt{1-\beta_2^{k+1}}/(1-\beta_1^{k+1})` with ``use_bias_correction``
(else 1), :math:`\eta = d\gamma b` (``dlr``):

.. math::

    r &\leftarrow \beta_3 r + \frac{d}{d_0}\,\eta\,\langle g, \theta_0 - \theta\rangle
        &&\quad\text{(1)}\\
    m &\leftarrow \beta_1 m + d(1-\beta_1) g\\
    v &\leftarrow \beta_2 v + d^2(1-\beta_2) g^2\\
    s &\leftarrow \beta_3 s + \frac{d}{d_0}\,\eta\, g              &&\quad\text{(2)}\\
    \hat d &= c\, r / \textstyle\sum |s|\\
    d_{max} &\leftarrow \max(d_{max}, \hat d)\\
    d &\leftarrow \min(d_{max}, d\cdot\text{growth})              &&\quad\text{(3)}\\
    \theta &\leftarrow \theta - \eta\lambda\theta                 &&\quad\text{(4)}\\
    \theta &\leftarrow \theta - \eta\,\frac{m}{\sqrt{v} + d\,\epsilon}

1. :math:`r` is ``d_numerator``, summed over the parameters.
2. :math:`s \leftarrow \beta_3 s + \tfrac{d}{d_0} d\, g` with ``safeguard_warmup``.
3. First :math:`d \leftarrow \max(d, \hat d)` while :math:`d = d_0`.
4. Only with ``decouple``, before the Adam step.

with the new :math:`d` in the last line's :math:`d\epsilon` and the old one in :math:`\eta`.
:math:`\theta_0` is the parameter at its first step (``p0``), :math:`c` is ``d_coef``. If
:math:`\sum|s| = 0` (all gradients zero so far) the step ends after the moments: no parameter
moves and :math:`k` and :math:`r` stay, as in the authors' code (optax divides by zero there).
Sums over all parameters run in param-group order; each parameter's sums are deterministic
(:func:`~npoptim.kernels.reduction.sum_pair`).

==========================  ===================================================================
``variant``                 reproduces (repository, file)
==========================  ===================================================================
``"paper"`` (default)       the paper's Algorithm 3 = the authors' ``Prodigy`` defaults (alias
                            ``"authors"``): no bias correction.
``"optax"``                 google-deepmind/optax ``optax/contrib/_prodigy.py`` ``prodigy``:
                            ``use_bias_correction=True`` (always, in optax).
==========================  ===================================================================

optax has no ``growth_rate`` (it is :math:`\infty`: ``None``, the default, or ``math.inf``),
``decouple`` (always decoupled) or ``d_coef`` name (``estim_lr_coef``). Not offered: the
authors' ``slice_p`` (1 here) and ``fsdp_in_use``. With :math:`\beta_1 = 0` the authors keep no
``exp_avg`` and step with :math:`d_{new}\, g`; npoptim keeps :math:`m = d_{old}\,g`, as optax.
The authors require every group's lr to be the largest one or 0 (npoptim raises ``ValueError``
otherwise, before any change). State under the authors' names: per parameter ``s``, ``p0`` (both
flat, as theirs), ``exp_avg``, ``exp_avg_sq``, ``step`` (an int); per group ``d``, ``d_max``,
``d_numerator``, ``d_hat``, ``d_denom``, ``k``. Dense gradients only.
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


class ProdigyHyper(NamedTuple):
    """One step's hyperparameters of the Prodigy rules (built by ``Prodigy._hyper``)."""

    l2: float                # weight_decay when decouple=False, else 0
    beta1: float
    d_one_minus_beta1: float  # d (1 - beta1)
    beta2: float
    d2_one_minus_beta2: float  # d^2 (1 - beta2)
    beta3: float
    s_coef: float            # (d/d0) dlr, or (d/d0) d with safeguard_warmup
    d_eps: float             # d * eps (the new d)
    neg_decay: float         # -weight_decay * dlr when decoupled, else 0
    neg_dlr: float


@kernel
def prodigy_numerator_rule(p, g, s, h):
    """Pass 1a: ``g (p0 - p)`` for the numerator's dot product; ``s = (p0,)``, only read."""
    (p0,) = s
    if h.l2 != 0:
        g = fma(h.l2, p, g)
    return (p0,), g * (p0 - p), constant(0.0, g)


@kernel
def prodigy_moments_rule(p, g, s, h):
    """Pass 1b: the moments and ``s``, returning ``|s|``; ``s = (s, exp_avg, exp_avg_sq)``."""
    s_sum, exp_avg, exp_avg_sq = s
    if h.l2 != 0:
        g = fma(h.l2, p, g)
    m = fma(h.d_one_minus_beta1, g, exp_avg * h.beta1)
    v = fma(h.d2_one_minus_beta2 * g, g, exp_avg_sq * h.beta2)
    s_new = fma(h.s_coef, g, s_sum * h.beta3)
    return (s_new, m, v), abs(s_new), constant(0.0, g)


@kernel
def prodigy_update_rule(p, s, h):
    """Pass 2: the decoupled decay and the Adam step with the new ``d``; ``s = (m, v)``."""
    exp_avg, exp_avg_sq = s
    denom = np.sqrt(exp_avg_sq) + h.d_eps
    p = fma(h.neg_decay, p, p)
    return fma(h.neg_dlr, exp_avg / denom, p)


@kernel
def _numerator(param, grad, states, hyper):
    return sum_pair(prodigy_numerator_rule, param, grad, states, ProdigyHyper(*hyper))


@kernel
def _moments(param, grad, states, hyper):
    return sum_pair(prodigy_moments_rule, param, grad, states, ProdigyHyper(*hyper))


@kernel
def _update(param, states, hyper):
    apply_from_states(prodigy_update_rule, param, states, ProdigyHyper(*hyper))


#: The switches each variant sets.
VARIANTS = {"paper": dict(use_bias_correction=False), "optax": dict(use_bias_correction=True)}
#: Other names of the variants.
ALIASES = {"authors": "paper", "prodigyopt": "paper"}


class Prodigy(Optimizer):
    """Prodigy (see the module docstring); the authors' hyperparameter names and defaults.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 1.0
        Learning rate γ, a multiplier of the estimated step size d.
    betas : tuple of float, default: (0.9, 0.999)
        Decay rates (β1, β2) of the first and second moments.
    beta3 : float or None, default: None
        Decay of the numerator and s (None: sqrt(β2)).
    eps : float, default: 1e-08
        Term ε added to the denominator for numerical stability.
    weight_decay : float, default: 0.0
        Weight decay λ: decoupled with ``decouple``, else L2.
    decouple : bool, default: True
        Decoupled weight decay (AdamW-style).
    use_bias_correction : bool, default: the variant's
        Bias-correct the step (optax: always).
    safeguard_warmup : bool, default: False
        Leave the lr out of s (the authors' warmup safeguard).
    d0 : float, default: 1e-06
        Initial estimate d0 of d.
    d_coef : float, default: 1.0
        Coefficient c of the estimate d̂.
    growth_rate : float or None, default: None
        Largest factor d may grow by in a step (None: no bound).
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
    def __init__(self, params, lr=1.0, betas=(0.9, 0.999), beta3=None, eps=1e-8,
                 weight_decay=0.0, decouple=True, use_bias_correction=VARIANT_DEFAULT,
                 safeguard_warmup=False, d0=1e-6, d_coef=1.0, growth_rate=None, *,
                 variant="paper"):
        self.variant, switches = resolve_variant(
            VARIANTS, ALIASES, variant, dict(use_bias_correction=use_bias_correction))
        super().__init__(params, dict(lr=lr, betas=betas, beta3=beta3, eps=eps,
                                      weight_decay=weight_decay, decouple=decouple,
                                      safeguard_warmup=safeguard_warmup, d0=d0, d_coef=d_coef,
                                      growth_rate=growth_rate, **switches, d=d0, d_max=d0,
                                      d_numerator=0.0, d_hat=d0, d_denom=0.0, k=0))

    def _check_group(self, group):
        check_no_variant(group)
        if not (is_real(group["lr"]) and 0 <= group["lr"] < math.inf):
            raise ValueError(f"Invalid learning rate: {group['lr']!r}")
        check_betas(group["betas"])
        beta3 = group["beta3"]
        if beta3 is not None and not (is_real(beta3) and 0.0 <= beta3 < 1.0):
            raise ValueError(f"Invalid beta3 value: {beta3!r} (None or 0 <= beta3 < 1)")
        for name in ("eps", "d0", "d", "d_max"):
            check_positive(group, name)
        if group["growth_rate"] is not None:
            check_positive(group, "growth_rate", allow_inf=True)
        if not (is_real(group["weight_decay"]) and 0 <= group["weight_decay"] < math.inf):
            raise ValueError(f"Invalid weight_decay value: {group['weight_decay']!r}")
        for name in ("d_coef", "d_numerator", "d_hat", "d_denom"):
            if not (is_real(group[name]) and math.isfinite(group[name])):
                raise ValueError(f"{name} must be a finite number, got {group[name]!r}")
        check_flag(group, "decouple", "use_bias_correction", "safeguard_warmup")
        check_counter(group, "k")

    def _state_names(self, group):
        return ("s", "p0", "exp_avg", "exp_avg_sq")

    def _state_shapes(self, param, group):
        return {"s": (param.size,), "p0": (param.size,), "exp_avg": param.shape,
                "exp_avg_sq": param.shape}

    def _init_state(self, param, group):
        state = super()._init_state(param, group)
        state["p0"][...] = param.reshape(-1)
        return state

    def _prepare(self, grads):
        prepared = super()._prepare(grads)
        check_one_lr(self.param_groups, "Prodigy")
        return prepared

    def _apply(self, prepared):
        """Both passes over every parameter (see the module docstring); nothing here raises."""
        first = self.param_groups[0]
        beta1, beta2 = first["betas"]
        beta3 = first["beta3"] if first["beta3"] is not None else math.sqrt(beta2)
        k, d, d_max, d0 = first["k"], first["d"], first["d_max"], first["d0"]
        lr = max(group["lr"] for group in self.param_groups)
        bias_correction = 1.0
        if first["use_bias_correction"]:
            bias_correction = (1 - beta2 ** (k + 1)) ** 0.5 / (1 - beta1 ** (k + 1))
        dlr = d * lr * bias_correction
        d_numerator = first["d_numerator"] * beta3
        delta_numerator = 0.0
        d_denom = 0.0
        for group, index, param, grad in prepared:
            state = self.state.get(index)
            if state is None:
                state = self.state[index] = self._init_state(param, group)
            if group["lr"] == 0.0:
                continue
            s_coef = (d / d0) * (d if group["safeguard_warmup"] else dlr)
            hyper = self._hyper(param, group, beta1, beta2, beta3, d, s_coef, 0.0, 0.0)
            flat = param.reshape(-1) if param.flags.c_contiguous else param.ravel()
            dot, _ = _numerator(flat, grad, (state["p0"],), hyper)
            delta_numerator += (d / d0) * dlr * float(dot)
            abs_sum, _ = _moments(flat, grad, (state["s"], state["exp_avg"].reshape(-1),
                                               state["exp_avg_sq"].reshape(-1)), hyper)
            d_denom += float(abs_sum)
        if d_denom == 0:
            return
        global_numerator = d_numerator + delta_numerator
        d_hat = first["d_coef"] * global_numerator / d_denom
        if d == d0:
            d = max(d, d_hat)
        d_max = max(d_max, d_hat)
        d = min(d_max, d * growth_bound(first))
        for group in self.param_groups:
            group.update(d_numerator=global_numerator, d_denom=d_denom, d=d, d_max=d_max,
                         d_hat=d_hat)
        for group, index, param, grad in prepared:
            state = self.state[index]
            state["step"] += 1
            decay = group["weight_decay"] if group["decouple"] else 0.0
            hyper = self._hyper(param, group, beta1, beta2, beta3, d, 0.0, -decay * dlr, -dlr)
            with flat_view(param) as flat:
                _update(flat, (state["exp_avg"].reshape(-1), state["exp_avg_sq"].reshape(-1)),
                        hyper)
        for group in self.param_groups:
            group["k"] = group["k"] + 1

    def _hyper(self, param, group, beta1, beta2, beta3, d, s_coef, neg_decay, neg_dlr):
        return typed_record(
            ProdigyHyper, param,
            l2=0.0 if group["decouple"] else group["weight_decay"], beta1=beta1,
            d_one_minus_beta1=d * (1 - beta1), beta2=beta2,
            d2_one_minus_beta2=d * d * (1 - beta2), beta3=beta3, s_coef=s_coef,
            d_eps=d * group["eps"], neg_decay=neg_decay, neg_dlr=neg_dlr)
