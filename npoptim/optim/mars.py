r"""MARS, "Make vAriance Reduction Shine" (Yuan et al., "MARS: Unleashing the Power of Variance
Reduction for Training Large Models", arXiv 2411.10438): the AdamW-type ("MARS-AdamW") and
Lion-type ("MARS-Lion") updates in their approximate form, as the authors' code and
pytorch_optimizer 4.1.0 run them by default.

For a parameter tensor :math:`\theta` that MARS updates (see below which), with gradient
:math:`g_t` (negated when ``maximize``), the previous step's gradient :math:`g_{t-1}`
(:math:`g_0 = 0`, state ``last_grad``), step count :math:`t` (per parameter),
:math:`b_1 = 1-\beta_1^t`, :math:`b_2 = 1-\beta_2^t`, learning rate :math:`\eta` and weight
decay :math:`\lambda`:

.. math::

    c &= g_t + \gamma\,\frac{\beta_1}{1-\beta_1}\,(g_t - g_{t-1})
        &&\text{the corrected gradient}\\
    c &\leftarrow c / \max(1, \|c\|/C)          &&\text{(1)}\\
    m &\leftarrow \beta_1 m + (1-\beta_1)\,c\\
    v &\leftarrow \beta_2 v + (1-\beta_2)\,c^2  &&\text{(AdamW type only)}\\
    u &= \frac{m}{\left(\sqrt{\hat v}/\sqrt{b_2} + \epsilon\right) b_1}
        &&\text{(AdamW type, (2))}\\
    u &= \operatorname{sign}(m)                 &&\text{(Lion type)}\\
    \theta &\leftarrow \theta - \eta\,(u + \lambda\theta) &&\text{(3)}

1. :math:`\|c\|` is the Frobenius norm of the whole tensor, :math:`C` is ``clip_norm`` (1 in
   both sources, which have no such keyword; ``None`` turns the clipping off). The norm is a
   sum of squares in the parameter's dtype in an order fixed by the tensor's size alone
   (:func:`~npoptim.kernels.reduction.sumsq_pair`, as LAMB and LARS): bit-identical on every
   CPU and thread count. A step makes two passes over such a tensor: the first computes
   :math:`c` and sums :math:`c^2` without storing it, the second computes :math:`c` again and
   updates the state and the parameter.
2. :math:`\hat v = v`, or with ``amsgrad`` the running maximum :math:`\hat v \leftarrow
   \max(\hat v, v)` (state ``max_exp_avg_sq``). ``eps_mode="eps_hat"`` adds :math:`\epsilon`
   to :math:`\sqrt{\hat v + \epsilon_r}` before the bias correction,
   :math:`u = m\sqrt{b_2}/\big(b_1(\sqrt{\hat v + \epsilon_r} + \epsilon)\big)`, with
   :math:`\epsilon_r` = ``eps_root`` (pytorch_optimizer: 1e-15).
3. ``weight_decay_form="in_update"`` (the authors'); ``"decoupled"`` decays first,
   :math:`\theta \leftarrow \theta(1-\eta\lambda) - \eta u` (pytorch_optimizer): the same
   algebra, rounded differently.

The Lion type has one beta: :math:`m` is both the EMA and what the sign is taken of (unlike
Lion's interpolation), and :math:`v` is not touched. :math:`g_t` is stored as ``last_grad``
after every step (negated under ``maximize``, as pytorch_optimizer stores it).

**Which tensors.** With ``optimize_1d=False`` (the default of both sources) only matrices get
MARS: ``mars_ndim="exactly_2"`` (the authors: ``len(grad.shape) == 2``) or ``"at_least_2"``
(pytorch_optimizer: ``p.ndim >= 2``, so convolution kernels too). Every other tensor gets plain
AdamW: the same rule with :math:`c = g_t` (no correction, no clipping), ``betas_1d``,
``weight_decay_1d`` and the learning rate :math:`\eta\cdot` ``lr_1d`` / ``lr``, where ``lr`` is
the constructor's: both sources store the factor ``lr_1d / lr`` at construction, so the 1-D
learning rate follows a schedule of the group's ``lr`` (npoptim divides the group's ``lr_1d``
by the constructor's ``lr``). The eps placement and the weight decay form are the variant's
for these tensors too. With ``optimize_1d=True`` every tensor gets MARS.

**The approximate form only.** The paper's exact MARS takes the gradient at the previous
weights on the current batch, :math:`\nabla f(x_{t-1}, \xi_t)`, in place of :math:`g_{t-1}`:
a second gradient per step (the authors' ``is_approx=False`` with ``update_previous_grad``
and ``update_last_grad`` called around ``step``). A plain ``step(grads)`` has one gradient,
so npoptim implements the approximate form :math:`g_{t-1} = \nabla f(x_{t-1}, \xi_{t-1})`,
the default of the authors' code (``is_approx=True``) and the only form of
pytorch_optimizer. (A caller who has the exact gradient can write it into
``state[i]["last_grad"]`` before the step, negated under ``maximize``: that is what the
authors' ``update_last_grad`` does.)

Sources and where they differ:

* the authors' code, AGI-Arena/MARS ``MARS/optimizers/mars.py`` (``MARS``, ``update_fn``):
  ``variant="authors"``, the default. :math:`\epsilon` added to :math:`\sqrt{v}/\sqrt{b_2}`
  (``eps_mode="bias_corrected"``), the decay inside the update (``"in_update"``), MARS on
  exactly 2-D tensors, no ``eps_root``.
* kozistr/pytorch_optimizer ``pytorch_optimizer/optimizer/mars.py`` (``MARS``, 4.1.0):
  ``variant="pytorch_optimizer"`` (alias ``"kozistr"``). Its denominator is
  :math:`(\sqrt{v + 10^{-15}} + \epsilon)/\sqrt{b_2}\cdot b_1` (``eps_mode="eps_hat"``,
  ``eps_root=1e-15``): early on, where :math:`\sqrt{b_2}` is small, its :math:`\epsilon` weighs
  :math:`1/\sqrt{b_2}` times more (10x at the first step with :math:`\beta_2 = 0.99`), a
  relative difference of about :math:`\epsilon/\sqrt{v}` in the step. It decays first
  (``"decoupled"``), treats every tensor of 2 or more dimensions as a matrix, and counts steps
  per param group (npoptim per parameter: they differ only for a parameter without a
  gradient in some step). Its ``weight_decouple=False`` adds :math:`\lambda\theta` to
  ``p.grad`` *after* the update, so the decay reaches only the next step's ``last_grad``;
  npoptim does not offer that form, nor ``fixed_decay`` or ``cautious``. Its ``ams_bound``
  is ``amsgrad`` here.
* both sources also have a Shampoo type (``mars_type="shampoo"``: the momentum orthogonalised
  by a Newton–Schulz iteration in bfloat16, the authors' compiled with ``torch.compile``);
  npoptim does not implement it and refuses the word.
* the authors' code keeps ``state['last_grad'] = grad``, a reference to ``p.grad``, not a
  copy: with ``zero_grad(set_to_none=False)`` the backward pass writes into that same tensor,
  so :math:`g_{t-1} = g_t` and the correction vanishes (MARS becomes clipped AdamW). npoptim
  copies the gradient, as pytorch_optimizer does; the diagnose catalogue names the lost
  correction.
* defaults are the two sources' (they agree): ``lr=3e-3``, ``betas=(0.95, 0.99)``,
  ``gamma=0.025``, ``eps=1e-8``, ``weight_decay=0``, ``lr_1d=3e-3``, ``betas_1d=(0.9,
  0.95)``, ``weight_decay_1d=0.1``.

Rounding: :math:`m` is updated as torch's ``lerp`` (pytorch_optimizer's form; the authors'
``mul_(β1).add_(c, alpha=1-β1)`` differs by an ulp), :math:`v` as a fused multiply-add, as
npoptim's Adam. Dense gradients only: a zero gradient still moves every tensor.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.reduction import sumsq_pair
from npoptim.kernels.scalar import constant, fma, lerp, maximum
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import (VARIANT_DEFAULT, check_betas, check_choice, check_flag,
                                   check_no_variant, check_nonnegative, check_positive,
                                   is_real, resolve_variant)


# -------------------------------------------------------------------------------- the rules
class MARSHyper(NamedTuple):
    """One step's hyperparameters of the MARS rules (built by ``MARS._hyper``)."""

    maximize: float        # 1 or 0
    correction: float      # γ β1/(1-β1), the weight of g_t - g_{t-1}; 0: c = g (1-D AdamW)
    clip_divisor: float    # max(1, ‖c‖/C): c is divided by it (1 in the first pass)
    one_minus_beta1: float
    beta2: float
    one_minus_beta2: float
    sign_direction: float  # 1: u = sign(m), v untouched (Lion type); 0: the AdamW type
    eps_root: float        # added to v under the root (pytorch_optimizer: 1e-15), else 0
    sqrt_v_scale: float    # 1/sqrt(b2) (eps_mode="bias_corrected"), 1 ("eps_hat")
    eps: float
    denom_scale: float     # b1 ("bias_corrected"), b1/sqrt(b2) ("eps_hat")
    update_decay: float    # λ added to u (weight_decay_form="in_update"), else 0
    decay_factor: float    # 1 - ηλ applied first (weight_decay_form="decoupled"), else 1
    neg_lr: float          # -η (the 1-D AdamW: -η lr_1d/lr)


@kernel
def corrected_grad(prev, g, h):
    """``(g, c)``: the gradient after ``maximize`` and the corrected gradient, unclipped."""
    if h.maximize != 0:
        g = -g
    c = g
    if h.correction != 0:
        c = (g - prev) * h.correction + g
    return g, c


@kernel
def correction_term(prev, g, s, h):
    """Pass 1 (a :func:`~npoptim.kernels.reduction.sumsq_pair` rule over ``last_grad`` and the
    gradient): ``c`` to be summed squared, and a zero; no state."""
    _, c = corrected_grad(prev, g, h)
    return (), c, constant(0.0, c)


@kernel
def _moments(g, m, v, prev, h):
    """The clipped corrected gradient into the moments: ``(g, m, v)`` (g after maximize)."""
    g, c = corrected_grad(prev, g, h)
    c = c / h.clip_divisor
    m = lerp(m, c, h.one_minus_beta1)
    if h.sign_direction == 0:
        v = fma(h.one_minus_beta2 * c, c, v * h.beta2)
    return g, m, v


@kernel
def _param(p, m, v_hat, h):
    """The direction and the step: ``p - lr (u + λp)`` or ``p (1 - lr λ) - lr u``."""
    if h.sign_direction != 0:
        u = np.sign(m)
    else:
        u = m / ((np.sqrt(v_hat + h.eps_root) * h.sqrt_v_scale + h.eps) * h.denom_scale)
    if h.update_decay != 0:
        u = u + h.update_decay * p
    p = p * h.decay_factor
    return p + h.neg_lr * u


@kernel
def mars_rule(p, g, s, h):
    """Pass 2, one element; ``s = (exp_avg, exp_avg_sq, last_grad)``."""
    exp_avg, exp_avg_sq, last_grad = s
    g, m, v = _moments(g, exp_avg, exp_avg_sq, last_grad, h)
    return _param(p, m, v, h), (m, v, g)


@kernel
def mars_amsgrad_rule(p, g, s, h):
    """Pass 2 with amsgrad; ``s = (exp_avg, exp_avg_sq, last_grad, max_exp_avg_sq)``."""
    exp_avg, exp_avg_sq, last_grad, max_exp_avg_sq = s
    g, m, v = _moments(g, exp_avg, exp_avg_sq, last_grad, h)
    v_hat = max_exp_avg_sq
    if h.sign_direction == 0:
        v_hat = maximum(max_exp_avg_sq, v)
    return _param(p, m, v_hat, h), (m, v, g, v_hat)


@kernel
def _correction_sumsq(last_grad, grad, hyper):
    return sumsq_pair(correction_term, last_grad, grad, (), MARSHyper(*hyper))[0]


@kernel
def _mars_dense(param, grad, states, hyper):
    apply_dense(mars_rule, param, grad, states, MARSHyper(*hyper))


@kernel
def _mars_amsgrad_dense(param, grad, states, hyper):
    apply_dense(mars_amsgrad_rule, param, grad, states, MARSHyper(*hyper))


# ----------------------------------------------------------------------------- the variants
#: The published forms (see the module docstring): the switches each sets.
VARIANTS = {
    "authors": dict(eps_mode="bias_corrected", eps_root=0.0, weight_decay_form="in_update",
                    mars_ndim="exactly_2"),
    "pytorch_optimizer": dict(eps_mode="eps_hat", eps_root=1e-15,
                              weight_decay_form="decoupled", mars_ndim="at_least_2"),
}
ALIASES = {"agi_arena": "authors", "paper": "authors", "kozistr": "pytorch_optimizer"}

_MARS_TYPES = ("adamw", "lion")
#: The sources' spellings: the authors' "mars-adamw", pytorch_optimizer's "adamw".
_MARS_TYPE_ALIASES = {"mars-adamw": "adamw", "mars-lion": "lion"}
_EPS_MODES = ("bias_corrected", "eps_hat")
_WEIGHT_DECAY_FORMS = ("in_update", "decoupled")
_MARS_NDIMS = ("exactly_2", "at_least_2")


class MARS(Optimizer):
    """MARS in its approximate form (see the module docstring); ``variant`` picks a published
    form, keywords override its switches.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.003
        Learning rate η (positive: the 1-D learning rate is ``lr_1d / lr`` times the group's).
    betas : tuple of float, default: (0.95, 0.99)
        (β1, β2) of the MARS tensors: β1 of the momentum and of the correction's weight
        γβ1/(1-β1), β2 of the second moment.
    eps : float, default: 1e-08
        Term ε of the denominator, placed as ``eps_mode`` says.
    weight_decay : float, default: 0.0
        Weight decay λ of the MARS tensors, in the form ``weight_decay_form`` says.
    gamma : float, default: 0.025
        Scale γ of the gradient correction (0: no correction).
    mars_type : {'adamw', 'lion'}, default: 'adamw'
        The update of the MARS tensors: AdamW type (``m / denom``) or Lion type
        (``sign(m)``); the authors' ``"mars-adamw"``/``"mars-lion"`` are read as these.
    optimize_1d : bool, default: False
        MARS for every tensor; False: plain AdamW for the tensors ``mars_ndim`` leaves out.
    lr_1d : float, default: 0.003
        The AdamW tensors' learning rate (at the constructor's ``lr``; it follows the group's
        ``lr`` in proportion).
    betas_1d : tuple of float, default: (0.9, 0.95)
        (β1, β2) of the AdamW tensors.
    weight_decay_1d : float, default: 0.1
        Weight decay of the AdamW tensors.
    amsgrad : bool, default: False
        Divide by the running maximum of the second moment (the authors' ``amsgrad``,
        pytorch_optimizer's ``ams_bound``).
    maximize : bool, default: False
        Maximize the objective: the gradient is negated (and stored negated).
    clip_norm : float or None, default: 1.0
        The corrected gradient is rescaled to a norm of at most this (1 in both sources);
        None: no clipping.
    variant : str, default: 'authors'
        The published form to reproduce (a name of ``VARIANTS`` or ``ALIASES``, see the module
        docstring); it sets every switch whose default is "the variant's", and a switch given
        explicitly overrides it.
    eps_mode : str, default: the variant's
        ``"bias_corrected"`` (ε added to sqrt(v)/sqrt(b2), the authors) or ``"eps_hat"`` (ε
        added to sqrt(v) before the bias correction, pytorch_optimizer).
    eps_root : float, default: the variant's
        Added to v under the square root (pytorch_optimizer: 1e-15; the authors: 0).
    weight_decay_form : str, default: the variant's
        ``"in_update"`` (θ - η(u + λθ), the authors) or ``"decoupled"`` (θ(1 - ηλ) first,
        pytorch_optimizer).
    mars_ndim : str, default: the variant's
        Which tensors are MARS's when ``optimize_1d`` is False: ``"exactly_2"`` (the
        authors) or ``"at_least_2"`` (pytorch_optimizer).
    """

    sparse_kind = "dense-only"
    step_in_state_dict = "int"

    def __init__(self, params, lr=3e-3, betas=(0.95, 0.99), eps=1e-8, weight_decay=0.0, *,
                 gamma=0.025, mars_type="adamw", optimize_1d=False, lr_1d=3e-3,
                 betas_1d=(0.9, 0.95), weight_decay_1d=0.1, amsgrad=False, maximize=False,
                 clip_norm=1.0, variant="authors", eps_mode=VARIANT_DEFAULT,
                 eps_root=VARIANT_DEFAULT, weight_decay_form=VARIANT_DEFAULT,
                 mars_ndim=VARIANT_DEFAULT):
        self.variant, switches = resolve_variant(
            VARIANTS, ALIASES, variant,
            dict(eps_mode=eps_mode, eps_root=eps_root, weight_decay_form=weight_decay_form,
                 mars_ndim=mars_ndim))
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, gamma=gamma,
                        mars_type=mars_type, optimize_1d=optimize_1d, lr_1d=lr_1d,
                        betas_1d=betas_1d, weight_decay_1d=weight_decay_1d, amsgrad=amsgrad,
                        maximize=maximize, clip_norm=clip_norm, **switches)
        check_positive(defaults, "lr")  # the sources store lr_1d / lr
        super().__init__(params, defaults)

    def _check_group(self, group):
        check_no_variant(group)
        check_nonnegative(group, "lr", "eps", "weight_decay", "lr_1d", "weight_decay_1d",
                          "gamma")
        check_nonnegative(group, "eps_root", label="eps_root value")
        check_betas(group["betas"])
        check_betas(group["betas_1d"])
        if group["mars_type"] == "shampoo" or group["mars_type"] == "mars-shampoo":
            raise ValueError("mars_type 'shampoo' (the Newton-Schulz form) is not implemented; "
                             "mars_type must be 'adamw' or 'lion'")
        check_choice(group, "mars_type", _MARS_TYPES, _MARS_TYPE_ALIASES)
        check_flag(group, "optimize_1d", "amsgrad", "maximize")
        check_choice(group, "eps_mode", _EPS_MODES)
        check_choice(group, "weight_decay_form", _WEIGHT_DECAY_FORMS)
        check_choice(group, "mars_ndim", _MARS_NDIMS)
        clip = group["clip_norm"]
        if clip is not None and (not is_real(clip) or not 0.0 < clip < float("inf")):
            raise ValueError(f"clip_norm must be None (no clipping) or a positive finite "
                             f"number, got {clip!r}")

    def _state_names(self, group):
        names = ("exp_avg", "exp_avg_sq", "last_grad")
        return names + ("max_exp_avg_sq",) if group["amsgrad"] else names

    def is_mars_tensor(self, shape, group):
        """Whether a parameter of ``shape`` in ``group`` gets MARS (else plain AdamW)."""
        if group["optimize_1d"]:
            return True
        if group["mars_ndim"] == "exactly_2":
            return len(shape) == 2
        return len(shape) >= 2

    def _hyper(self, param, step, group, mars, clip_divisor):
        if mars:
            (beta1, beta2), lr, wd = group["betas"], group["lr"], group["weight_decay"]
            correction = group["gamma"] * (beta1 / (1.0 - beta1))
        else:  # both sources: lr * (lr_1d / lr at construction)
            (beta1, beta2), wd = group["betas_1d"], group["weight_decay_1d"]
            lr = group["lr"] * (group["lr_1d"] / self.defaults["lr"])
            correction = 0.0
        bias_correction1 = 1.0 - beta1 ** step
        bias_correction2_sqrt = (1.0 - beta2 ** step) ** 0.5
        if group["eps_mode"] == "bias_corrected":
            sqrt_v_scale, denom_scale = 1.0 / bias_correction2_sqrt, bias_correction1
        else:
            sqrt_v_scale, denom_scale = 1.0, bias_correction1 / bias_correction2_sqrt
        decoupled = group["weight_decay_form"] == "decoupled"
        return typed_record(
            MARSHyper, param, maximize=bool(group["maximize"]), correction=correction,
            clip_divisor=clip_divisor, one_minus_beta1=1.0 - beta1, beta2=beta2,
            one_minus_beta2=1.0 - beta2,
            sign_direction=mars and group["mars_type"] == "lion",
            eps_root=group["eps_root"], sqrt_v_scale=sqrt_v_scale, eps=group["eps"],
            denom_scale=denom_scale, update_decay=0.0 if decoupled else wd,
            decay_factor=1.0 - lr * wd if decoupled else 1.0, neg_lr=-lr)

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        states = self._flat_states(state, group)
        mars = self.is_mars_tensor(shape, group)
        divisor = 1.0
        if mars and group["clip_norm"] is not None:
            hyper = self._hyper(param, state["step"], group, mars, 1.0)
            kind = param.dtype.type
            norm = np.sqrt(kind(_correction_sumsq(states[2], grad, hyper)))
            limit = kind(group["clip_norm"])
            if norm > limit:
                divisor = norm / limit
        hyper = self._hyper(param, state["step"], group, mars, divisor)
        kernel_ = _mars_amsgrad_dense if group["amsgrad"] else _mars_dense
        kernel_(param, grad, states, hyper)
