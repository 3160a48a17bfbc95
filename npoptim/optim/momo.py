r"""MoMo and MoMo-Adam (Schaipp, Ohana, Eickenberg, Defazio & Gower, "MoMo: Momentum Models for
Adaptive Learning Rates", ICML 2024, arXiv 2305.07583), as ``optax.contrib.momo`` and
``optax.contrib.momo_adam`` 0.2.8 (google-deepmind/optax ``optax/contrib/_momo.py``). The step
needs the loss: ``step(closure)``, ``closure()`` returning ``(loss, grads)``.

SGD with momentum (or Adam) whose step is the Polyak step of a model built from averages of
the losses, gradients and :math:`\langle g, \theta\rangle`, capped by the lr. With the loss
:math:`f` and gradients :math:`g` (both negated when ``maximize``), step count :math:`t` (from
1, one for the optimizer), :math:`\alpha` the lr, :math:`\lambda` ``weight_decay``,
:math:`\ell` the loss lower bound, inner products and norms summed over every parameter of
every group that has a gradient:

.. math::

    \bar f &\leftarrow \rho \bar f + (1-\rho) f\\
    m &\leftarrow \rho m + (1-\rho) g\\
    \bar\gamma &\leftarrow \rho\bar\gamma + (1-\rho)\langle g, \theta\rangle\\
    \tau &= \min\Big(\frac{\alpha}{b_1},\
        \frac{\big[(1+\alpha\lambda)(\bar f - b_1\ell - \bar\gamma) + \langle m, \theta\rangle
        \big]_+}{\|m\|_D^2}\Big)\\
    \theta &\leftarrow \frac{\theta - \tau\, D^{-1} m}{1+\alpha\lambda}

(:math:`\tau = \alpha/b_1 \wedge 0` if :math:`\|m\|_D^2 \le 2^{-52}`.)

* MoMo: :math:`\rho = \beta` (0.9), except :math:`\rho = 0` at the first step (the averages
  start at the first values); :math:`D = I`, :math:`b_1 = 1`. With ``bias_correction=True``
  (the authors' option, not in optax): :math:`\rho = \beta` from the first step (the averages
  start at 0) and :math:`b_1 = 1-\beta^t`.
* MoMo-Adam: :math:`\rho = \beta_1` at every step, :math:`v \leftarrow \beta_2 v + (1-\beta_2)
  g^2`, :math:`D = \epsilon + \sqrt{v/(1-\beta_2^t)}` (element-wise),
  :math:`b_1 = 1-\beta_1^t`; :math:`\|m\|_D^2 = \langle m, D^{-1}m\rangle`.

``adapt_lower_bound=True`` (the paper's MoMo*, the authors' ``use_fstar``) estimates
:math:`\ell` on the fly: before the step, with :math:`c = (1+\alpha\lambda)(\bar f -
\bar\gamma) + \langle m, \theta\rangle`, :math:`\ell \leftarrow \max(c/(2 b_1(1+\alpha\lambda)),
\ell_0)` if :math:`c < (1+\alpha\lambda) b_1 \ell`; after it, :math:`\ell \leftarrow
\max\big((\bar f + \langle m, \theta\rangle - \bar\gamma - \tfrac12\tau\|m\|_D^2)/b_1,\
\ell_0\big)` (:math:`\theta` before the step), :math:`\ell_0` = ``lower_bound``. The step
sizes are computed in double.

Where the sources differ, the weight decay (the last line's form is ``weight_decay_form``):

==========================  ===================================================================
``variant``                 reproduces (repository, file)
==========================  ===================================================================
``"paper"`` (default)       the paper's proximal step and the authors' code (alias
                            ``"authors"``: fabian-sp/MoMo ``momo/momo.py``, ``momo_adam.py``,
                            PyPI ``momo-opt`` 0.1.0): ``weight_decay_form="divide"``,
                            :math:`\theta \leftarrow (\theta - \tau D^{-1}m)/(1+\alpha\lambda)`.
``"optax"``                 google-deepmind/optax ``optax/contrib/_momo.py``:
                            ``weight_decay_form="optax"``, :math:`\theta \leftarrow \theta -
                            \frac{\alpha\lambda}{1+\alpha\lambda}\theta - \tau D^{-1}m` (the
                            decay is not applied to the step).
==========================  ===================================================================

MoMo-Adam also has ``weight_decay_form="multiply"`` (the authors' ``divide=False``):
:math:`\theta \leftarrow (1-\alpha\lambda)\theta - \tau D^{-1}m`. Without weight decay the
forms agree. The authors' ``lb`` is ``lower_bound``, ``use_fstar`` ``adapt_lower_bound``; with
:math:`\|m\|_D^2 \le 2^{-52}` npoptim and optax take no step where the authors' code divides
by it.

The lr, ``weight_decay`` and the other options enter the one global step size, so they are one
value for the whole optimizer (an lr schedule sets every group's lr alike). State: per
parameter ``exp_avg`` (and ``exp_avg_sq``); in every param group (shared) ``barf``, ``gamma``,
``lb`` and the step count ``k``, under optax's names. Golden cases run it on an objective
(``separable-quartic``, see :mod:`npoptim.golden.inputs`). Dense gradients only.
"""
import math
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_from_states
from npoptim.kernels.jit import kernel
from npoptim.kernels.reduction import sum_pair
from npoptim.kernels.scalar import constant, fma
from npoptim.optim.optimizer import Optimizer, loss_and_grads, typed_record
from npoptim.optim.options import (VARIANT_DEFAULT, check_betas, check_choice, check_counter,
                                   check_flag, check_no_variant, check_nonnegative, flavored,
                                   is_real, resolve_variant)

#: The switches each variant sets (see the module docstring).
VARIANTS = {"paper": dict(weight_decay_form="divide"), "optax": dict(weight_decay_form="optax")}
#: Other names of the variants.
ALIASES = {"authors": "paper", "momo_opt": "paper"}
#: Machine epsilon of a double (optax's ``jnp.finfo(float).eps`` under ``jax_enable_x64``).
_TINY = 2.0 ** -52


class MomoHyper(NamedTuple):
    """One step's hyperparameters of the MoMo and MoMo-Adam rules (built by ``_hyper``)."""

    maximize: float         # 1 or 0
    rho: float              # the averaging weight of this step (beta, beta1; 0 at MoMo's first)
    one_minus_rho: float
    beta2: float            # MoMo-Adam only
    one_minus_beta2: float
    bias_correction2: float  # 1 - beta2^t
    eps: float
    keep: float             # theta's factor before the step (see weight_decay_form)
    neg_tau: float
    divisor: float          # theta's divisor after the step (see weight_decay_form)


@kernel
def momo_moments_rule(p, g, s, h):
    """Pass 1: the momentum; returns ``<g, theta>`` and ``<m, theta>`` terms; ``s = (m,)``."""
    (exp_avg,) = s
    if h.maximize != 0:
        g = -g
    m = fma(h.one_minus_rho, g, exp_avg * h.rho)
    return (m,), g * p, m * p


@kernel
def momo_norm_rule(p, g, s, h):
    """Pass 2: ``|m|^2`` (``s = (m,)``, only read)."""
    (exp_avg,) = s
    return (exp_avg,), exp_avg * exp_avg, constant(0.0, g)


@kernel
def momo_update_rule(p, s, h):
    """Pass 3: the decay and the step ``-tau m``; ``s = (m,)``."""
    (exp_avg,) = s
    return (p * h.keep + h.neg_tau * exp_avg) / h.divisor


@kernel
def _preconditioner(exp_avg_sq, h):
    return h.eps + np.sqrt(exp_avg_sq / h.bias_correction2)


@kernel
def momo_adam_moments_rule(p, g, s, h):
    """Pass 1 of MoMo-Adam: both moments; ``s = (m, v)``."""
    exp_avg, exp_avg_sq = s
    if h.maximize != 0:
        g = -g
    m = fma(h.one_minus_rho, g, exp_avg * h.rho)
    v = fma(h.one_minus_beta2 * g, g, exp_avg_sq * h.beta2)
    return (m, v), g * p, m * p


@kernel
def momo_adam_norm_rule(p, g, s, h):
    """Pass 2 of MoMo-Adam: ``<m, m / D>`` (``s = (m, v)``, only read)."""
    exp_avg, exp_avg_sq = s
    return (exp_avg, exp_avg_sq), exp_avg * (exp_avg / _preconditioner(exp_avg_sq, h)), \
        constant(0.0, g)


@kernel
def momo_adam_update_rule(p, s, h):
    """Pass 3 of MoMo-Adam: the decay and the step ``-tau m / D``; ``s = (m, v)``."""
    exp_avg, exp_avg_sq = s
    return (p * h.keep + h.neg_tau * (exp_avg / _preconditioner(exp_avg_sq, h))) / h.divisor


@kernel
def _momo_moments(param, grad, states, hyper):
    return sum_pair(momo_moments_rule, param, grad, states, MomoHyper(*hyper))


@kernel
def _momo_norm(param, grad, states, hyper):
    return sum_pair(momo_norm_rule, param, grad, states, MomoHyper(*hyper))


@kernel
def _momo_update(param, states, hyper):
    apply_from_states(momo_update_rule, param, states, MomoHyper(*hyper))


@kernel
def _momo_adam_moments(param, grad, states, hyper):
    return sum_pair(momo_adam_moments_rule, param, grad, states, MomoHyper(*hyper))


@kernel
def _momo_adam_norm(param, grad, states, hyper):
    return sum_pair(momo_adam_norm_rule, param, grad, states, MomoHyper(*hyper))


@kernel
def _momo_adam_update(param, states, hyper):
    apply_from_states(momo_adam_update_rule, param, states, MomoHyper(*hyper))


def _as_tuple(value):
    return tuple(value) if isinstance(value, list) else value


class _MomoBase(Optimizer):
    """The step MoMo and MoMo-Adam share; a subclass gives its kernels and ``_averaging``."""

    sparse_kind = "dense-only"
    needs_closure = True
    step_in_state_dict = None
    #: (moments, norm, update) kernels.
    KERNELS = ()
    #: Options that are one value for the whole optimizer (besides lr and weight_decay).
    GLOBAL = ("lower_bound", "adapt_lower_bound", "maximize", "weight_decay_form")
    #: The weight_decay_form values this optimizer offers.
    DECAY_FORMS = ("divide", "optax")

    def _check_group(self, group):
        check_no_variant(group)
        check_nonnegative(group, "lr", "weight_decay")
        check_choice(group, "weight_decay_form", self.DECAY_FORMS)
        if not is_real(group["lower_bound"]) or not math.isfinite(group["lower_bound"]):
            raise ValueError(f"lower_bound must be a finite number, got "
                             f"{group['lower_bound']!r}")
        check_flag(group, "adapt_lower_bound", "maximize")
        check_counter(group, "k")
        for name in ("barf", "gamma", "lb"):
            if not (is_real(group[name]) and math.isfinite(group[name])):
                raise ValueError(f"{name} must be a finite number, got {group[name]!r}")
        for name in self.GLOBAL:
            if _as_tuple(group[name]) != _as_tuple(self.defaults[name]):
                raise ValueError(f"{name} is one value for the whole optimizer (the step size "
                                 "is global): set it in the constructor, not per group")

    def _prepare(self, grads):
        prepared = super()._prepare(grads)
        for name in ("lr", "weight_decay"):
            values = {group[name] for group in self.param_groups}
            if len(values) > 1:
                raise ValueError(f"{type(self).__name__} takes one {name} for all param groups "
                                 f"(it enters the global step size), got {sorted(values)}")
        return prepared

    def step(self, grads=None, closure=None):
        """One step; needs ``closure`` (``closure()`` returns ``(loss, grads)``); returns the
        loss. Everything, the loss included, is checked before anything changes."""
        loss, grads = loss_and_grads(type(self).__name__, grads, closure)
        self._loss = float(loss)
        super().step(grads)
        return loss

    def _apply(self, prepared):
        """Moments and inner products, the global step size, then each parameter's step."""
        if not prepared:
            return
        first = self.param_groups[0]
        k = first["k"] + 1
        rho, b1 = self._averaging(first, k)
        moments, norm_kernel, _ = self.KERNELS
        grad_dot = m_dot = m_norm = 0.0
        for group, index, param, grad in prepared:
            state = self.state.get(index)
            if state is None:
                state = self.state[index] = self._init_state(param, group)
            states = self._flat_states(state, group)
            hyper = self._hyper(param, first, k, rho)
            flat = param.reshape(-1) if param.flags.c_contiguous else param.ravel()
            a, b = moments(flat, grad, states, hyper)
            grad_dot += float(a)
            m_dot += float(b)
            m_norm += float(norm_kernel(flat, grad, states, hyper)[0])
        alpha, wd = first["lr"], first["weight_decay"]
        decay = 1 + alpha * wd
        loss = -self._loss if first["maximize"] else self._loss
        barf = rho * first["barf"] + (1 - rho) * loss
        gamma = rho * first["gamma"] + (1 - rho) * grad_dot
        lb = first["lb"]
        lower_bound = first["lower_bound"]
        if first["adapt_lower_bound"]:
            cap = decay * (barf - gamma) + m_dot
            if cap < decay * b1 * lb:
                lb = max(cap / (2 * b1 * decay), lower_bound)
        t1 = max(decay * (barf - b1 * lb - gamma) + m_dot, 0.0) / m_norm if m_norm > _TINY \
            else 0.0
        tau = min(alpha / b1, t1)
        if first["adapt_lower_bound"]:
            lb = max(((barf + m_dot - gamma) - 0.5 * tau * m_norm) / b1, lower_bound)
        for group in self.param_groups:
            group.update(barf=barf, gamma=gamma, lb=lb, k=k)
        keep, divisor = {"optax": (1 - alpha * wd / decay, 1.0), "divide": (1.0, decay),
                         "multiply": (1 - alpha * wd, 1.0)}[first["weight_decay_form"]]
        self._step_form = (k, rho, keep, -tau, divisor)
        super()._apply(prepared)

    def _update(self, param, grad, state, group, index, shape):
        """The last pass over one parameter, with the step size of :meth:`_apply`."""
        k, rho, keep, neg_tau, divisor = self._step_form
        hyper = self._hyper(param, self.param_groups[0], k, rho, keep, neg_tau, divisor)
        self.KERNELS[2](param, self._flat_states(state, group), hyper)

    def _averaging(self, group, k):
        """``(rho, b1)`` of step ``k``."""
        raise NotImplementedError

    def _hyper(self, param, group, k, rho, keep=1.0, neg_tau=0.0, divisor=1.0):
        beta2 = group["betas"][1] if "betas" in group else 0.0
        return typed_record(
            MomoHyper, param, maximize=bool(group["maximize"]), rho=rho, one_minus_rho=1 - rho,
            beta2=beta2, one_minus_beta2=1 - beta2, bias_correction2=1 - beta2 ** k,
            eps=group.get("eps", 0.0), keep=keep, neg_tau=neg_tau, divisor=divisor)


class Momo(_MomoBase):
    """MoMo (see the module docstring); ``step(closure)``.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 1.0
        Cap α of the step size.
    beta : float, default: 0.9
        Momentum β of the averages.
    lower_bound : float, default: 0.0
        Lower bound ℓ of the loss.
    weight_decay : float, default: 0.0
        Weight decay λ, in the form ``weight_decay_form`` says.
    adapt_lower_bound : bool, default: False
        Estimate ℓ on the fly (MoMo*).
    bias_correction : bool, default: False
        Averages start at 0 and are bias-corrected (the authors').
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    weight_decay_form : str, default: the variant's
        ``"divide"`` (the paper's proximal step) or ``"optax"``.
    variant : str, default: 'paper'
        The published form to reproduce (a name of ``VARIANTS`` or ``ALIASES``, see the module
        docstring); it sets every switch whose default is "the variant's", and a switch given
        explicitly overrides it.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    KERNELS = (_momo_moments, _momo_norm, _momo_update)
    GLOBAL = _MomoBase.GLOBAL + ("beta", "bias_correction")

    @flavored
    def __init__(self, params, lr=1.0, beta=0.9, lower_bound=0.0, weight_decay=0.0,
                 adapt_lower_bound=False, bias_correction=False, *, maximize=False,
                 weight_decay_form=VARIANT_DEFAULT, variant="paper"):
        self._loss = 0.0
        self.variant, switches = resolve_variant(
            VARIANTS, ALIASES, variant, dict(weight_decay_form=weight_decay_form))
        super().__init__(params, dict(lr=lr, beta=beta, lower_bound=lower_bound,
                                      weight_decay=weight_decay,
                                      adapt_lower_bound=adapt_lower_bound,
                                      bias_correction=bias_correction, maximize=maximize,
                                      **switches, barf=0.0, gamma=0.0, lb=lower_bound, k=0))

    def _check_group(self, group):
        if not (is_real(group["beta"]) and 0.0 <= group["beta"] < 1.0):
            raise ValueError(f"Invalid beta value: {group['beta']!r} (0 <= beta < 1)")
        check_flag(group, "bias_correction")
        super()._check_group(group)

    def _state_names(self, group):
        return ("exp_avg",)

    def _averaging(self, group, k):
        beta = group["beta"]
        if group["bias_correction"]:
            return beta, 1 - beta ** k
        return (0.0 if k == 1 else beta), 1.0


class MomoAdam(_MomoBase):
    """MoMo-Adam (see the module docstring); ``step(closure)``.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.01
        Cap α of the step size.
    betas : tuple of float, default: (0.9, 0.999)
        Decay rates (β1, β2) of the averages and of the second moment.
    eps : float, default: 1e-08
        Term ε added to the denominator for numerical stability.
    lower_bound : float, default: 0.0
        Lower bound ℓ of the loss.
    weight_decay : float, default: 0.0
        Weight decay λ, in the form ``weight_decay_form`` says.
    adapt_lower_bound : bool, default: False
        Estimate ℓ on the fly (MoMo*).
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    weight_decay_form : str, default: the variant's
        ``"divide"`` (paper), ``"optax"`` or ``"multiply"``.
    variant : str, default: 'paper'
        The published form to reproduce (a name of ``VARIANTS`` or ``ALIASES``, see the module
        docstring); it sets every switch whose default is "the variant's", and a switch given
        explicitly overrides it.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    KERNELS = (_momo_adam_moments, _momo_adam_norm, _momo_adam_update)
    GLOBAL = _MomoBase.GLOBAL + ("betas", "eps")
    DECAY_FORMS = ("divide", "multiply", "optax")

    @flavored
    def __init__(self, params, lr=1e-2, betas=(0.9, 0.999), eps=1e-8, lower_bound=0.0,
                 weight_decay=0.0, adapt_lower_bound=False, *, maximize=False,
                 weight_decay_form=VARIANT_DEFAULT, variant="paper"):
        self._loss = 0.0
        self.variant, switches = resolve_variant(
            VARIANTS, ALIASES, variant, dict(weight_decay_form=weight_decay_form))
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, lower_bound=lower_bound,
                                      weight_decay=weight_decay,
                                      adapt_lower_bound=adapt_lower_bound, maximize=maximize,
                                      **switches, barf=0.0, gamma=0.0, lb=lower_bound, k=0))

    def _check_group(self, group):
        check_betas(group["betas"])
        check_nonnegative(group, "eps")
        super()._check_group(group)

    def _state_names(self, group):
        return ("exp_avg", "exp_avg_sq")

    def _averaging(self, group, k):
        beta1 = group["betas"][0]
        return beta1, 1 - beta1 ** k
