r"""ADOPT (Taniguchi et al., "ADOPT: Modified Adam Can Converge with Any β2 with the Optimal
Rate", NeurIPS 2024, arXiv 2411.02853), as ``optax.contrib.adopt`` 0.2.8 and the authors' code.

ADOPT normalises the gradient by the second moment of the *previous* steps (so the current
gradient is not in its own denominator), then takes the momentum of the normalised gradient.
For each element, with gradient :math:`g_t` (negated when ``maximize``), step count :math:`t`
(per parameter, from 1):

.. math::

    \theta &\leftarrow \theta\,(1 - \gamma\lambda)       &&\quad\text{(1)}\\
    g &\leftarrow g + \lambda\theta                      &&\quad\text{(2)}\\
    v &\leftarrow g^2, \text{ and nothing else}          &&t = 1\\
    n &= \operatorname{clip}\!\left(\frac{g}{\max(\sqrt{v}, \epsilon)}, -c_t, c_t\right),
        \quad c_t = k_t^{\,e}                            &&t > 1\\
    m &\leftarrow m + (1-\beta_1)(n - m)\\
    u &= m                                               &&\quad\text{(3)}\\
    \theta &\leftarrow \theta - \gamma u\\
    v &\leftarrow \beta_2 v + (1-\beta_2)\,g^2

1. Decoupled weight decay.
2. L2 weight decay.
3. Or :math:`u = \beta_1 m + (1-\beta_1) n` with ``nesterov``.

``clip_exponent`` is :math:`e` (0.25; ``None`` turns clipping off) and :math:`k_t` counts the
updates: the paper's Algorithm 2 indexes the gradients from :math:`g_0` (used only for
:math:`v_0`), so its clip :math:`t^{1/4}` is :math:`c = (t-1)^{1/4}` in npoptim's step count,
1 at the first update. ``clip_count="updates"`` is that form (the default, = optax);
``"steps"`` is the authors' code, which evaluates ``step ** 0.25`` with the step counter that
has already counted the first gradient (:math:`c = t^{1/4}`, :math:`2^{1/4}` at the first
update).

==========================  ===================================================================
``variant``                 reproduces (repository, file)
==========================  ===================================================================
``"paper"`` (default)       paper Algorithm 2; alias ``"optax"`` (google-deepmind/optax
                            ``optax/contrib/_adopt.py`` ``adopt``): ``clip_count="updates"``.
``"authors"``               iShohei220/adopt ``adopt.py`` ``ADOPT`` (alias
                            ``"pytorch_optimizer"``: kozistr/pytorch_optimizer
                            ``pytorch_optimizer/optimizer/adopt.py``, a copy):
                            ``clip_count="steps"``.
==========================  ===================================================================

Weight decay is the authors' (``weight_decay``, ``decoupled_weight_decay`` = their
``decouple``), applied from the first step on, also in the step that only sets :math:`v`;
optax's ``adopt`` has none. ``nesterov`` is optax's option (the authors' code has none). State:
``exp_avg`` (:math:`m`, optax ``mu``) and ``exp_avg_sq`` (:math:`v`, optax ``nu``), the authors'
names. The momentum is torch's ``lerp`` (authors); optax's ``(1-β1) n + β1 m`` differs by an
ulp. Dense gradients only.

``cautious=True`` (:mod:`npoptim.optim.cautious`): :math:`u` is masked where it disagrees in
sign with :math:`g` (after ``maximize`` and the L2 decay) and the kept elements are scaled by
``cautious_scale``'s :math:`s`; the decoupled decay stays outside the mask, and the first step
(no update) has none. pytorch_optimizer 4.1.0's ``ADOPT(cautious=True)``
(``pytorch_optimizer/optimizer/adopt.py``) tests the update against the normalised gradient
:math:`n`, whose sign is :math:`g`'s: ``variant="authors", cautious=True``. timm 1.0's
``Adopt(caution=True)`` (``timm/optim/adopt.py``: the clip :math:`(t-1)^e`, the paper's count,
with its own default :math:`e = 1/3`) is ``cautious=True, cautious_scale="floored_mean"``
with ``clip_exponent`` its ``clip_exp`` (its decoupled decay skips the first step). A cautious step
makes two passes over each parameter (the first counts the agreeing elements:
:func:`adopt_agreement`).
"""
import math
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.reduction import sum_pair
from npoptim.kernels.scalar import constant, fma, lerp, maximum
from npoptim.optim.cautious import NOT_CAUTIOUS, agrees, caution_scale, check_cautious, masked
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import (VARIANT_DEFAULT, check_betas, check_choice, check_flag,
                                   check_no_variant, check_nonnegative, flavored, is_real,
                                   resolve_variant)


class ADOPTHyper(NamedTuple):
    """One step's hyperparameters of the ADOPT rule (built by ``ADOPT._update``)."""

    maximize: float        # 1 or 0
    decay_factor: float    # 1 - lr * weight_decay (decoupled), else 1
    l2: float              # weight_decay (L2), else 0
    first: float           # 1 at the first step: only v is set
    eps: float
    clip: float            # c_t (inf without clipping)
    one_minus_beta1: float
    beta1: float
    beta2: float
    one_minus_beta2: float
    nesterov: float        # 1 or 0
    neg_lr: float
    caution_scale: float   # cautious (after the first step): the scale s, else 0


@kernel
def _decayed(p, g, h):
    """The parameter and the gradient after ``maximize`` and the weight decay."""
    if h.maximize != 0:
        g = -g
    p = p * h.decay_factor
    if h.l2 != 0:
        g = fma(h.l2, p, g)
    return p, g


@kernel
def _direction(g, exp_avg, exp_avg_sq, h):
    """The new momentum ``m`` and the update ``u`` of a step after the first."""
    n = g / maximum(np.sqrt(exp_avg_sq), h.eps)
    n = min(max(n, -h.clip), h.clip)
    m = lerp(exp_avg, n, h.one_minus_beta1)
    u = m
    if h.nesterov != 0:
        u = h.beta1 * m + h.one_minus_beta1 * n
    return m, u


@kernel
def adopt_rule(p, g, s, h):
    """One element of ADOPT; ``s = (exp_avg, exp_avg_sq)``."""
    exp_avg, exp_avg_sq = s
    p, g = _decayed(p, g, h)
    if h.first != 0:
        return p, (exp_avg, g * g)
    m, u = _direction(g, exp_avg, exp_avg_sq, h)
    if h.caution_scale != 0:
        u = masked(u, u, g, h.caution_scale)
    v = fma(h.one_minus_beta2 * g, g, exp_avg_sq * h.beta2)
    return p + h.neg_lr * u, (m, v)


@kernel
def adopt_agreement(p, g, s, h):
    """The cautious first pass (a step after the first): whether this element's update
    agrees with its gradient, as the value to sum; ``s`` is only read."""
    exp_avg, exp_avg_sq = s
    p, g = _decayed(p, g, h)
    m, u = _direction(g, exp_avg, exp_avg_sq, h)
    return (exp_avg, exp_avg_sq), agrees(u, g), constant(0.0, g)


@kernel
def _adopt_dense(param, grad, states, hyper):
    apply_dense(adopt_rule, param, grad, states, ADOPTHyper(*hyper))


@kernel
def _adopt_agreeing(param, grad, states, hyper):
    return sum_pair(adopt_agreement, param, grad, states, ADOPTHyper(*hyper))[0]


#: The switches each variant sets.
VARIANTS = {"paper": dict(clip_count="updates"), "authors": dict(clip_count="steps")}
#: Other names of the variants.
ALIASES = {"optax": "paper", "pytorch_optimizer": "authors"}
_CLIP_COUNTS = ("updates", "steps")


class ADOPT(Optimizer):
    """ADOPT (see the module docstring); ``variant`` picks the clip's step count.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.9999)
        Decay rates (β1, β2) of the momentum and of the second moment.
    eps : float, default: 1e-06
        Floor ε of sqrt(v).
    weight_decay : float, default: 0.0
        Weight decay λ: L2, or decoupled with ``decoupled_weight_decay`` (the authors').
    decoupled_weight_decay : bool, default: False
        Decoupled decay θ(1 - γλ) (the authors' ``decouple``).
    clip_exponent : float or None, default: 0.25
        Exponent e of the clip c = k^e, or None (no clip).
    nesterov : bool, default: False
        optax's Nesterov form of the update.
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    variant : str, default: 'paper'
        The published form to reproduce (a name of ``VARIANTS`` or ``ALIASES``, see the module
        docstring); it sets every switch whose default is "the variant's", and a switch given
        explicitly overrides it.
    clip_count : str, default: the variant's
        ``"updates"`` (k = t - 1: paper, optax) or ``"steps"`` (k = t: the authors' code).
    cautious : bool, default: False
        Keep only the elements whose update agrees in sign with the gradient, scaled up as
        ``cautious_scale`` says (see :mod:`npoptim.optim.cautious`).
    cautious_scale : {'plus_one', 'floored_mean'}, default: 'plus_one'
        The scale of the kept elements: n/(k + 1) (the paper, pytorch_optimizer) or
        1/max(k/n, 1e-3) (timm); read only when ``cautious``.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"
    #: The switches at the value of the forms without caution (left out of state dicts and
    #: golden hyperparameters there); the scale matters only when cautious.
    torch_conventions = dict(NOT_CAUTIOUS)
    conventions_apply = {"cautious_scale": "cautious"}

    @flavored
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.9999), eps=1e-6, weight_decay=0.0, *,
                 decoupled_weight_decay=False, clip_exponent=0.25, nesterov=False,
                 maximize=False, variant="paper", clip_count=VARIANT_DEFAULT, cautious=False,
                 cautious_scale="plus_one"):
        self.variant, switches = resolve_variant(VARIANTS, ALIASES, variant,
                                                 dict(clip_count=clip_count))
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      clip_exponent=clip_exponent, nesterov=nesterov,
                                      maximize=maximize, cautious=cautious,
                                      cautious_scale=cautious_scale, **switches))

    def _check_group(self, group):
        check_no_variant(group)
        check_nonnegative(group, "lr", "eps", "weight_decay")
        check_betas(group["betas"])
        check_flag(group, "decoupled_weight_decay", "nesterov", "maximize")
        check_choice(group, "clip_count", _CLIP_COUNTS)
        check_cautious(group)
        exponent = group["clip_exponent"]
        if exponent is not None and not (is_real(exponent) and 0.0 <= exponent < math.inf):
            raise ValueError(f"clip_exponent must be None (no clipping) or a non-negative "
                             f"finite number, got {exponent!r}")

    def _state_names(self, group):
        return ("exp_avg", "exp_avg_sq")

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        step = state["step"]
        lr, wd = group["lr"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        decoupled = group["decoupled_weight_decay"]
        exponent = group["clip_exponent"]
        count = step - 1 if group["clip_count"] == "updates" else step
        clip = math.inf if exponent is None else float(count) ** exponent
        fields = dict(maximize=bool(group["maximize"]),
                      decay_factor=1 - lr * wd if decoupled and wd != 0 else 1.0,
                      l2=0.0 if decoupled else wd, first=step == 1, eps=group["eps"],
                      clip=clip, one_minus_beta1=1 - beta1, beta1=beta1, beta2=beta2,
                      one_minus_beta2=1 - beta2, nesterov=bool(group["nesterov"]), neg_lr=-lr)
        states = self._flat_states(state, group)
        scale = 0.0 if step == 1 else caution_scale(group, param, lambda: _adopt_agreeing(
            param, grad, states, typed_record(ADOPTHyper, param, **fields, caution_scale=0)))
        _adopt_dense(param, grad, states, typed_record(ADOPTHyper, param, **fields,
                                                       caution_scale=scale))
