r"""AdEMAMix (Pagliardini, Ablin & Grangier, "The AdEMAMix Optimizer: Better, Faster, Older",
arXiv 2409.03137, 2024) and Simplified AdEMAMix (Morwani et al., "Connections between
Schedule-Free Optimizers, AdEMAMix, and Accelerated SGD Variants", arXiv 2502.02431, 2025), as
``optax.contrib.ademamix`` / ``simplified_ademamix`` 0.2.8 (the cross-checks), written with the
authors' PyTorch code (apple/ml-ademamix ``pytorch/ademamix.py``, not on PyPI: read, not run).

**AdEMAMix** mixes a fast and a slow EMA of the gradients. For each element, with gradient
:math:`g` (negated when ``maximize``), step count :math:`t` (per parameter),
:math:`b_1 = 1-\beta_1^t`, :math:`b_2 = 1-\beta_2^t`:

.. math::

    m_1 &\leftarrow \beta_1 m_1 + (1-\beta_1) g\\
    m_2 &\leftarrow \beta_3(t)\, m_2 + (1-\beta_3(t))\, g     &&\text{no bias correction}\\
    v &\leftarrow \beta_2 v + (1-\beta_2) g^2\\
    \theta &\leftarrow \theta - \gamma\left(\frac{m_1/b_1 + \alpha(t)\, m_2}
        {\sqrt{v}/\sqrt{b_2} + \epsilon} + \lambda\theta\right)

The paper's schedulers (Algorithm 1, and apple/ml-ademamix ``pytorch/ademamix.py``
``linear_warmup_scheduler`` / ``linear_hl_warmup_scheduler``), evaluated at the step count
:math:`t` after it is incremented, as the authors' code does: with ``alpha_warmup``
:math:`T_\alpha`, :math:`\alpha(t) = \alpha\, t/T_\alpha` for :math:`t < T_\alpha`; with
``beta3_warmup`` :math:`T_{\beta_3}`, the half-life of :math:`\beta_3` grows linearly from
:math:`\beta_1`'s, :math:`\beta_3(t) = f^{-1}((1-a) f(\beta_1) + a f(\beta_3))` with
:math:`a = t/T_{\beta_3}`, :math:`f(\beta) = \ln 0.5 / \ln(\beta + 10^{-8}) - 1`,
:math:`f^{-1}(h) = 0.5^{1/(h+1)}`, for :math:`t < T_{\beta_3}`; the final values after.
optax takes ``b3`` and ``alpha`` as schedules of its counter ``count_m2`` (the steps before
this one, :math:`t-1`); the optax form of a schedule ``s`` of npoptim's is ``s(count + 1)``.

Defaults: betas (0.9, 0.999, 0.9999), ``eps`` 1e-8 (both codes, the paper's); ``alpha`` 5.0
(optax; the paper's experiments use 5 to 8, the authors' PyTorch default is 2.0). State under
the authors' PyTorch names: ``exp_avg_fast`` (:math:`m_1`, optax ``m1``), ``exp_avg_slow``
(:math:`m_2`, ``m2``), ``exp_avg_sq`` (:math:`v`, ``nu``); the authors keep no ``exp_avg_fast``
when :math:`\beta_1 = 0` (it is then :math:`g`, as here). Rounding follows the authors' code
(``mul_(β).add_(g, alpha=1-β)``, :math:`\sqrt{v}/\sqrt{b_2}`); optax's
:math:`\sqrt{v/b_2}` differs by an ulp.

**Simplified AdEMAMix** keeps one momentum of *undamped* gradients and mixes in the current one:

.. math::

    m &\leftarrow \beta_1 m + g\\
    v &\leftarrow \beta_2 v + (1-\beta_2) g^2\\
    \theta &\leftarrow \theta - \gamma\left(\frac{m + \alpha g}{\sqrt{v}/\sqrt{b_2} + \epsilon}
        + \lambda\theta\right)

with optax's defaults :math:`\beta_1 = 0.99`, :math:`\beta_2 = 0.95`, :math:`\alpha = 0`,
``eps`` 1e-8 (the paper's Algorithm 1; :math:`\alpha = 0` is Adam with a rescaled lr and
:math:`\beta_1`). State: ``exp_avg`` (:math:`m`, optax ``m``), ``exp_avg_sq`` (:math:`v`, optax
``n``). kozistr/pytorch_optimizer ``optimizer/ademamix.py`` ``SimplifiedAdEMAMix`` is another
form (a :math:`\beta_1` warmup and a running normaliser of the momentum); it is not offered here.

Both: the weight decay :math:`\lambda` is decoupled and scaled by the lr (optax's
``add_decayed_weights`` before the lr, the authors' ``update.add_(p, alpha=λ)``). Dense
gradients only.
"""
import math
from typing import NamedTuple

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import fma
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import (check_betas, check_flag, check_nonnegative, check_three_betas,
                                   flavored)


class AdEMAMixHyper(NamedTuple):
    """One step's hyperparameters of the AdEMAMix rule (built by ``AdEMAMix._update``)."""

    maximize: float               # 1 or 0
    beta1: float
    one_minus_beta1: float
    beta3: float                  # beta3(t)
    one_minus_beta3: float
    beta2: float
    one_minus_beta2: float
    bias_correction1: float       # b1
    bias_correction2_sqrt: float  # sqrt(b2)
    eps: float
    alpha: float                  # alpha(t)
    weight_decay: float
    neg_lr: float


@kernel
def ademamix_rule(p, g, s, h):
    """One element of AdEMAMix; ``s = (exp_avg_fast, exp_avg_slow, exp_avg_sq)``."""
    exp_avg_fast, exp_avg_slow, exp_avg_sq = s
    if h.maximize != 0:
        g = -g
    m1 = fma(h.one_minus_beta1, g, exp_avg_fast * h.beta1)
    m2 = fma(h.one_minus_beta3, g, exp_avg_slow * h.beta3)
    v = fma(h.one_minus_beta2 * g, g, exp_avg_sq * h.beta2)
    denom = math.sqrt(v) / h.bias_correction2_sqrt + h.eps
    update = (m1 / h.bias_correction1 + h.alpha * m2) / denom
    update = fma(h.weight_decay, p, update)
    return p + h.neg_lr * update, (m1, m2, v)


@kernel
def _ademamix_dense(param, grad, states, hyper):
    apply_dense(ademamix_rule, param, grad, states, AdEMAMixHyper(*hyper))


def alpha_at(step, alpha, warmup):
    """:math:`\\alpha(t)`: the authors' ``linear_warmup_scheduler`` from 0."""
    if warmup is not None and step < warmup:
        return step / float(warmup) * alpha
    return alpha


def beta3_at(step, beta1, beta3, warmup):
    """:math:`\\beta_3(t)`: the authors' ``linear_hl_warmup_scheduler`` from ``beta1``."""
    if warmup is None or step >= warmup:
        return beta3

    def half_life(beta):
        return math.log(0.5) / math.log(beta + 1e-8) - 1

    a = step / float(warmup)
    return math.pow(0.5, 1 / ((1.0 - a) * half_life(beta1) + a * half_life(beta3) + 1))


def _check_warmup(group, name):
    warmup = group[name]
    if warmup is not None and (isinstance(warmup, bool) or not isinstance(warmup, int)
                               or warmup < 1):
        raise ValueError(f"{name} must be None (no warmup) or a positive whole number of "
                         f"steps, got {warmup!r}")


class AdEMAMix(Optimizer):
    """AdEMAMix (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.999, 0.9999)
        (β1, β2, β3): the fast EMA, the second moment, the slow EMA.
    alpha : float, default: 5.0
        Weight α of the slow EMA.
    beta3_warmup : int or None, default: None
        None, or the steps of the paper's warmup of β3.
    alpha_warmup : int or None, default: None
        None, or the steps of the paper's warmup of α.
    eps : float, default: 1e-08
        Term ε added to the denominator for numerical stability.
    weight_decay : float, default: 0.0
        Decoupled weight decay λ, scaled by the lr.
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"

    @flavored
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999, 0.9999), alpha=5.0,
                 beta3_warmup=None, alpha_warmup=None, eps=1e-8, weight_decay=0.0, *,
                 maximize=False):
        super().__init__(params, dict(lr=lr, betas=betas, alpha=alpha,
                                      beta3_warmup=beta3_warmup, alpha_warmup=alpha_warmup,
                                      eps=eps, weight_decay=weight_decay, maximize=maximize))

    def _check_group(self, group):
        check_nonnegative(group, "lr", "eps", "weight_decay", "alpha")
        check_three_betas(group["betas"])
        _check_warmup(group, "alpha_warmup")
        _check_warmup(group, "beta3_warmup")
        check_flag(group, "maximize")

    def _state_names(self, group):
        return ("exp_avg_fast", "exp_avg_slow", "exp_avg_sq")

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        step = state["step"]
        beta1, beta2, beta3 = group["betas"]
        beta3_t = beta3_at(step, beta1, beta3, group["beta3_warmup"])
        hyper = typed_record(
            AdEMAMixHyper, param, maximize=bool(group["maximize"]), beta1=beta1,
            one_minus_beta1=1 - beta1, beta3=beta3_t, one_minus_beta3=1 - beta3_t, beta2=beta2,
            one_minus_beta2=1 - beta2, bias_correction1=1 - beta1 ** step,
            bias_correction2_sqrt=math.sqrt(1 - beta2 ** step), eps=group["eps"],
            alpha=alpha_at(step, group["alpha"], group["alpha_warmup"]),
            weight_decay=group["weight_decay"], neg_lr=-group["lr"])
        _ademamix_dense(param, grad, self._flat_states(state, group), hyper)


class SimplifiedAdEMAMixHyper(NamedTuple):
    """One step's hyperparameters of the Simplified AdEMAMix rule."""

    maximize: float               # 1 or 0
    beta1: float
    beta2: float
    one_minus_beta2: float
    bias_correction2_sqrt: float  # sqrt(b2)
    eps: float
    alpha: float
    weight_decay: float
    neg_lr: float


@kernel
def simplified_ademamix_rule(p, g, s, h):
    """One element of Simplified AdEMAMix; ``s = (exp_avg, exp_avg_sq)``."""
    exp_avg, exp_avg_sq = s
    if h.maximize != 0:
        g = -g
    m = fma(h.beta1, exp_avg, g)
    v = fma(h.one_minus_beta2 * g, g, exp_avg_sq * h.beta2)
    denom = math.sqrt(v) / h.bias_correction2_sqrt + h.eps
    update = fma(h.alpha, g, m) / denom
    update = fma(h.weight_decay, p, update)
    return p + h.neg_lr * update, (m, v)


@kernel
def _simplified_ademamix_dense(param, grad, states, hyper):
    apply_dense(simplified_ademamix_rule, param, grad, states, SimplifiedAdEMAMixHyper(*hyper))


class SimplifiedAdEMAMix(Optimizer):
    """Simplified AdEMAMix (see the module docstring); optax's defaults.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    betas : tuple of float, default: (0.99, 0.95)
        (β1, β2): the undamped momentum and the second moment.
    alpha : float, default: 0.0
        Weight α of the current gradient mixed into the momentum.
    eps : float, default: 1e-08
        Term ε added to the denominator for numerical stability.
    weight_decay : float, default: 0.0
        Decoupled weight decay λ, scaled by the lr.
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"

    @flavored
    def __init__(self, params, lr=1e-3, betas=(0.99, 0.95), alpha=0.0, eps=1e-8,
                 weight_decay=0.0, *, maximize=False):
        super().__init__(params, dict(lr=lr, betas=betas, alpha=alpha, eps=eps,
                                      weight_decay=weight_decay, maximize=maximize))

    def _check_group(self, group):
        check_nonnegative(group, "lr", "eps", "weight_decay", "alpha")
        check_betas(group["betas"])
        check_flag(group, "maximize")

    def _state_names(self, group):
        return ("exp_avg", "exp_avg_sq")

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        beta1, beta2 = group["betas"]
        hyper = typed_record(
            SimplifiedAdEMAMixHyper, param, maximize=bool(group["maximize"]), beta1=beta1,
            beta2=beta2, one_minus_beta2=1 - beta2,
            bias_correction2_sqrt=math.sqrt(1 - beta2 ** state["step"]), eps=group["eps"],
            alpha=group["alpha"], weight_decay=group["weight_decay"], neg_lr=-group["lr"])
        _simplified_ademamix_dense(param, grad, self._flat_states(state, group), hyper)
