r"""LAMB (You et al., "Large Batch Optimization for Deep Learning", ICLR 2020), with a switch for
every published variant.

There is no single "LAMB": the published implementations differ by up to 1e-1 after three
steps (each is listed below with its source file). The default is the paper's Algorithm 2 (v5), which ``optax.lamb`` and TF-Addons
``LAMB`` implement; ``variant=`` names each other published form, and the switches below can be
set one by one (an explicit keyword overrides the variant's value). A variant also sets
``eps``, ``weight_decay`` and ``max_grad_norm`` to its implementation's defaults; ``lr`` and
``betas`` keep npoptim's defaults unless given.

For each parameter tensor :math:`w` (one "layer") with gradient :math:`g`, step count :math:`t`
(per parameter), :math:`b_1 = 1-\beta_1^t`, :math:`b_2 = 1-\beta_2^t` (both 1 without bias
correction; ``bias_correction="step_size"`` sets both to 1 and divides the step by
:math:`1-\beta_1^t` instead, outside the ratio, where it is not cancelled by the normalisation):

.. math::

    g &\leftarrow g / \max(1, G/G_{max})                  &&\quad\text{(1)}\\
    g &\leftarrow g + \lambda w                           &&\quad\text{(2)}\\
    m &\leftarrow \beta_1 m + \beta_3 g                   &&\quad\text{(3)}\\
    v &\leftarrow \beta_2 v + (1-\beta_2)\,g^2\\
    w &\leftarrow w\,(1 - \gamma\lambda)                  &&\quad\text{(4)}\\
    r &= \frac{m / b_1}{\sqrt{v}/\sqrt{b_2} + \epsilon}\\
    u &= r + \lambda w                                    &&\quad\text{(5)}\\
    \rho &= \frac{\phi(\|w\|)}{\|x\| + \epsilon_t}        &&\quad\text{(6)}\\
    \rho &\leftarrow \min(\max(\rho, \rho_{lo}), \rho_{hi}) &&\quad\text{(7)}\\
    \rho &\leftarrow \min(\rho, 1)                        &&\quad\text{(8)}\\
    w &\leftarrow w - \gamma\,\rho\,u                     &&\quad\text{(9)}

1. Only with ``max_grad_norm`` :math:`G_{max}` (not None); :math:`G` is the norm of all
   gradients of all groups.
2. Only with ``weight_decay_mode="l2"``.
3. :math:`\beta_3 = 1-\beta_1` with ``grad_averaging``, else 1.
4. Only with ``weight_decay_mode="decoupled"``, before the norms.
5. With ``weight_decay_mode="in_update"`` (the default); else :math:`u = r`.
6. :math:`x = u` with ``trust_norm="update"``, :math:`x = g` with ``trust_norm="grad"``;
   :math:`\phi(z) = \min(\max(z, \phi_{lo}), \phi_{hi})` with ``phi_bounds``, else the
   identity; :math:`\rho = 1` if :math:`\|w\| = 0` or :math:`\|x\| = 0`.
7. Only with ``ratio_bounds`` :math:`(\rho_{lo}, \rho_{hi})`.
8. Only with ``trust_clip`` (LAMBC).
9. With ``bias_correction="step_size"`` the step is :math:`\gamma/(1-\beta_1^t)` in place of
   :math:`\gamma`.

:math:`\rho = 1` (no layer adaptation) for a group with ``exclude_from_layer_adaptation``, and,
unless ``always_adapt``, for a group whose ``weight_decay`` is 0 (apex/timm). :math:`\|\cdot\|`
is the Frobenius norm of the whole tensor, :math:`\epsilon_t` is ``trust_eps``. Without the
optional parts (the default) this is Algorithm 2 with :math:`\phi` the identity; the paper
gives neither bounds for :math:`\phi` nor a zero-norm rule (the guard is the convention of
Google's TF code, kept by every implementation below).

========================  =====================================================================
``variant``               reproduces (repository, file)
========================  =====================================================================
``"paper_v5"`` (default)  paper v5 Algorithm 2; aliases ``"optax"`` (google-deepmind/optax
                          ``optax/_src/alias.py`` ``lamb``), ``"tfa"`` (tensorflow/addons
                          ``tensorflow_addons/optimizers/lamb.py``), ``"paper"``. ε=1e-6, λ=0.
``"apex"``                NVIDIA/apex ``apex/optimizers/fused_lamb.py`` ``FusedLAMB`` (NVLAMB) =
                          huggingface/pytorch-image-models ``timm/optim/lamb.py`` ``Lamb``
                          defaults (alias ``"timm"``): ``max_grad_norm=1.0`` global clipping,
                          ``always_adapt=False``, λ=0.01.
``"keras3"``              keras-team/keras ``keras/src/optimizers/lamb.py``: decay applied to
                          :math:`w` first, outside the ratio (``weight_decay_mode="decoupled"``),
                          ε=1e-7.
``"albert_v3"``           google-research/albert ``lamb_optimizer.py`` = paper v3: no bias
                          correction (alias ``"paper_v3"``).
``"kozistr"``             kozistr/pytorch_optimizer ``pytorch_optimizer/optimizer/lamb.py``
                          ``Lamb`` defaults: ``bias_correction="step_size"`` (step
                          γ/(1-β1^t), no correction in r), decoupled decay first, φ bounds
                          (0, 10), ``trust_eps`` = ε.
``"tutorial"``            the simplified form of tutorials: ratio :math:`\|w\|/\|g\|` of the
                          (raw) gradient, clamped to [0, 10] (``trust_norm="grad"``,
                          ``ratio_bounds=(0, 10)``), decoupled decay applied first.
========================  =====================================================================

Differences that remain, all outside the default path: apex and timm count steps per param
group, npoptim per parameter (they differ only when a parameter has no gradient in a step);
Keras decays with :math:`w - w\lambda\gamma` and timm with :math:`w - \gamma\lambda w`, npoptim
with :math:`w(1-\gamma\lambda)` (rounding only); apex ``max_grad_norm=0`` zeroes every gradient,
npoptim refuses 0 (``None`` disables clipping); timm rewrites ``p.grad`` when clipping, npoptim
never writes the gradients. Per-element rounding follows npoptim's Adam
(:math:`\sqrt{v}/\sqrt{b_2}`), within an ulp of optax/TF-Addons' :math:`\sqrt{v/b_2}`.

A step makes two passes over each parameter. The first updates the moments and, in the same
loop, sums :math:`\|w\|^2` and :math:`\|x\|^2` without storing :math:`u` (the decoupled decay
:math:`w(1-\gamma\lambda)` is computed there but not stored). The second recomputes :math:`u`
from the stored moments with the same rule (so the norm is the norm of exactly the vector
applied), then writes :math:`w` only. Norms are sums of squares in the parameter's dtype, in an
order fixed by the array's size alone (see :func:`~npoptim.kernels.reduction.sumsq_pair`):
bit-identical whatever the thread count and the parallel threshold. Dense gradients only.
"""
import math
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_from_states
from npoptim.kernels.jit import kernel
from npoptim.kernels.reduction import grad_sumsq, sumsq_pair
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import (VARIANT_DEFAULT, check_betas, check_bounds, check_choice,
                                   check_flag, check_no_variant, check_nonnegative, flavored,
                                   is_real, resolve_variant)


# -------------------------------------------------------------------------------- the rules
class LAMBHyper(NamedTuple):
    """One step's hyperparameters of the LAMB rules (built by ``LAMB._hyper``)."""

    clip_divisor: float           # max(1, G/G_max): the gradient is divided by it
    l2: float                     # λ with weight_decay_mode="l2" (added to g), else 0
    beta1: float
    beta3: float                  # coefficient of g in m: 1 - beta1 with grad_averaging, else 1
    beta2: float
    one_minus_beta2: float
    decay_factor: float           # 1 - γλ with weight_decay_mode="decoupled", else 1
    bias_correction1: float       # b1
    bias_correction2_sqrt: float  # sqrt(b2)
    eps: float
    update_decay: float           # λ with weight_decay_mode="in_update" (added to u), else 0
    trust_norm_is_grad: float     # 1: x is the clipped g (also where the layer does not adapt)
    neg_step: float               # -γρ (the update pass; unused by the first)


@kernel
def lamb_moments_rule(p, g, s, h):
    """Pass 1: clipping, L2 decay, the two moments; ``s = (exp_avg, exp_avg_sq)``.

    Returns the new moments and ``(w, x)``, whose norms make the trust ratio: ``w`` after the
    decoupled decay (not stored: pass 2 applies it again), ``x`` is ``u`` or the clipped ``g``.
    """
    exp_avg, exp_avg_sq = s
    g = g / h.clip_divisor
    clipped_grad = g
    if h.l2 != 0:
        g = g + h.l2 * p
    m = h.beta1 * exp_avg + h.beta3 * g
    v = h.beta2 * exp_avg_sq + h.one_minus_beta2 * g * g
    w = p * h.decay_factor
    if h.trust_norm_is_grad != 0:
        return (m, v), w, clipped_grad
    return (m, v), w, lamb_direction(w, m, v, h)


@kernel
def lamb_direction(w, m, v, h):
    """The update direction ``u = r (+ lambda w)``, ``r = m/b1 / (sqrt(v)/sqrt(b2) + eps)``."""
    r = (m / h.bias_correction1) / (math.sqrt(v) / h.bias_correction2_sqrt + h.eps)
    u = r
    if h.update_decay != 0:
        u = r + h.update_decay * w
    return u


@kernel
def lamb_update_rule(p, s, h):
    """Pass 2: the decoupled decay, then ``w - lr * ratio * u``; the moments are only read."""
    exp_avg, exp_avg_sq = s
    w = p * h.decay_factor
    u = lamb_direction(w, exp_avg, exp_avg_sq, h)
    return w + h.neg_step * u


@kernel
def _lamb_moments_norms(param, grad, states, hyper):
    return sumsq_pair(lamb_moments_rule, param, grad, states, LAMBHyper(*hyper))


@kernel
def _lamb_update(param, states, hyper):
    apply_from_states(lamb_update_rule, param, states, LAMBHyper(*hyper))


# ----------------------------------------------------------------------------- the variants
_SAME_AS_EPS = "same as eps"

_PAPER_V5 = dict(eps=1e-6, weight_decay=0.0, bias_correction=True, grad_averaging=True,
                 weight_decay_mode="in_update", always_adapt=True, trust_norm="update",
                 phi_bounds=None, ratio_bounds=None, trust_clip=False, trust_eps=0.0,
                 max_grad_norm=None)

#: The switches (and eps, weight_decay, max_grad_norm defaults) each variant sets.
VARIANTS = {
    "paper_v5": _PAPER_V5,
    "apex": dict(_PAPER_V5, weight_decay=0.01, always_adapt=False, max_grad_norm=1.0),
    "keras3": dict(_PAPER_V5, eps=1e-7, weight_decay_mode="decoupled"),
    "albert_v3": dict(_PAPER_V5, bias_correction=False),
    "kozistr": dict(_PAPER_V5, bias_correction="step_size", weight_decay_mode="decoupled",
                    phi_bounds=(0.0, 10.0), trust_eps=_SAME_AS_EPS),
    "tutorial": dict(_PAPER_V5, weight_decay_mode="decoupled", trust_norm="grad",
                     ratio_bounds=(0.0, 10.0)),
}
#: Other names of the variants.
ALIASES = {"paper": "paper_v5", "optax": "paper_v5", "tfa": "paper_v5", "timm": "apex",
           "paper_v3": "albert_v3", "albert": "albert_v3"}

_WEIGHT_DECAY_MODES = ("in_update", "decoupled", "l2")
_TRUST_NORMS = ("update", "grad")


def _clamp(value, bounds):
    """``value`` clamped to ``bounds`` (a pair or None), in ``value``'s dtype."""
    if bounds is None:
        return value
    kind = type(value)
    return min(max(value, kind(bounds[0])), kind(bounds[1]))


class LAMB(Optimizer):
    """LAMB; ``variant`` picks a published form, keywords override its switches.

    See the module docstring for the algorithm and the variants (:data:`VARIANTS`).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.999)
        Decay rates (β1, β2) of the first and second moments.
    eps : float, default: the variant's
        Term ε added to sqrt(v/b2).
    weight_decay : float, default: the variant's
        Weight decay λ, applied as ``weight_decay_mode`` says.
    variant : str, default: 'paper_v5'
        The published form to reproduce (a name of ``VARIANTS`` or ``ALIASES``, see the module
        docstring); it sets every switch whose default is "the variant's", and a switch given
        explicitly overrides it.
    bias_correction : bool or 'step_size', default: the variant's
        True, False, or ``"step_size"`` (no correction in r, the step divided by 1 - β1^t:
        kozistr's form).
    grad_averaging : bool, default: the variant's
        m takes (1 - β1) g (True) or g.
    weight_decay_mode : str, default: the variant's
        ``"in_update"`` (λw added to u, inside the ratio), ``"decoupled"`` (w scaled by 1 - γλ
        before the norms) or ``"l2"`` (λw added to the gradient).
    always_adapt : bool, default: the variant's
        If False, a group with ``weight_decay == 0`` gets ratio 1.
    exclude_from_layer_adaptation : bool, default: False
        Ratio 1 for the group (TF/ALBERT's exclusion list, as a param group).
    trust_norm : str, default: the variant's
        The ratio's denominator: ‖u‖ (``"update"``) or ‖g‖ (``"grad"``).
    phi_bounds : tuple of float or None, default: the variant's
        None or (lo, hi) clamping ‖w‖ in the numerator (the paper's φ).
    ratio_bounds : tuple of float or None, default: the variant's
        None or (lo, hi) clamping the ratio.
    trust_clip : bool, default: the variant's
        Cap the ratio at 1 (LAMBC).
    trust_eps : float, default: the variant's
        Term added to the denominator norm.
    max_grad_norm : float or None, default: the variant's
        None, or the threshold of the global gradient norm (all groups together: one value for the
        optimizer).
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"

    @flavored
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=VARIANT_DEFAULT,
                 weight_decay=VARIANT_DEFAULT, *, variant="paper_v5",
                 bias_correction=VARIANT_DEFAULT, grad_averaging=VARIANT_DEFAULT,
                 weight_decay_mode=VARIANT_DEFAULT, always_adapt=VARIANT_DEFAULT,
                 exclude_from_layer_adaptation=False, trust_norm=VARIANT_DEFAULT,
                 phi_bounds=VARIANT_DEFAULT, ratio_bounds=VARIANT_DEFAULT,
                 trust_clip=VARIANT_DEFAULT, trust_eps=VARIANT_DEFAULT,
                 max_grad_norm=VARIANT_DEFAULT):
        self.variant, switches = resolve_variant(
            VARIANTS, ALIASES, variant,
            dict(eps=eps, weight_decay=weight_decay, bias_correction=bias_correction,
                 grad_averaging=grad_averaging, weight_decay_mode=weight_decay_mode,
                 always_adapt=always_adapt, trust_norm=trust_norm, phi_bounds=phi_bounds,
                 ratio_bounds=ratio_bounds, trust_clip=trust_clip, trust_eps=trust_eps,
                 max_grad_norm=max_grad_norm))
        if switches["trust_eps"] == _SAME_AS_EPS:
            switches["trust_eps"] = switches["eps"]
        defaults = dict(lr=lr, betas=betas,
                        exclude_from_layer_adaptation=exclude_from_layer_adaptation,
                        **switches)
        self._clip_divisor = 1.0
        super().__init__(params, defaults)

    # ------------------------------------------------------------------------ validation
    def _check_group(self, group):
        check_no_variant(group)
        check_nonnegative(group, "lr", "eps", "weight_decay")
        check_betas(group["betas"])
        correction = group["bias_correction"]
        if not (isinstance(correction, (bool, np.bool_))
                or (isinstance(correction, str) and correction == "step_size")):
            raise ValueError("bias_correction must be True, False or 'step_size', got "
                             f"{group['bias_correction']!r}")
        check_flag(group, "grad_averaging", "always_adapt", "exclude_from_layer_adaptation",
                   "trust_clip")
        check_choice(group, "weight_decay_mode", _WEIGHT_DECAY_MODES)
        check_choice(group, "trust_norm", _TRUST_NORMS)
        check_bounds(group, "phi_bounds")
        check_bounds(group, "ratio_bounds")
        check_nonnegative(group, "trust_eps", label="trust_eps value")
        max_norm = group["max_grad_norm"]
        if max_norm is not None and (not is_real(max_norm) or not 0.0 < max_norm < math.inf):
            raise ValueError(f"max_grad_norm must be None (no clipping) or a positive finite "
                             f"number, got {max_norm!r}")
        if max_norm != self.defaults["max_grad_norm"]:
            raise ValueError("max_grad_norm clips the norm of all gradients together, so it is "
                             "one value for the whole optimizer: set it in the constructor, "
                             f"not per group (got {max_norm!r}, the optimizer has "
                             f"{self.defaults['max_grad_norm']!r})")

    def _state_names(self, group):
        return ("exp_avg", "exp_avg_sq")

    # ----------------------------------------------------------------------------- step
    def _apply(self, prepared):
        """Compute the global gradient-norm clipping divisor, then update every parameter."""
        max_norm = self.defaults["max_grad_norm"]
        self._clip_divisor = 1.0
        if max_norm is not None:
            total = 0.0
            for _, _, param, grad in prepared:  # fixed order: param-group order
                total += float(grad_sumsq(grad))
            self._clip_divisor = max(math.sqrt(total) / max_norm, 1.0)
        super()._apply(prepared)

    def _adapts(self, group):
        return not group["exclude_from_layer_adaptation"] and (
            group["always_adapt"] or group["weight_decay"] != 0)

    def _hyper(self, param, state, group, neg_step=0.0):
        step = state["step"]
        lr, wd = group["lr"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        # True: b1 and b2 inside r; False or "step_size": none inside r
        correct = not isinstance(group["bias_correction"], str) and bool(group["bias_correction"])
        mode = group["weight_decay_mode"]
        return typed_record(
            LAMBHyper, param,
            clip_divisor=self._clip_divisor,
            l2=wd if mode == "l2" else 0.0,
            beta1=beta1,
            beta3=1 - beta1 if group["grad_averaging"] else 1.0,
            beta2=beta2,
            one_minus_beta2=1 - beta2,
            decay_factor=1 - lr * wd if mode == "decoupled" else 1.0,
            bias_correction1=1 - beta1 ** step if correct else 1.0,
            bias_correction2_sqrt=math.sqrt(1 - beta2 ** step) if correct else 1.0,
            eps=group["eps"],
            update_decay=wd if mode == "in_update" else 0.0,
            # a layer that does not adapt asks for the cheap norms (unused)
            trust_norm_is_grad=group["trust_norm"] == "grad" or not self._adapts(group),
            neg_step=neg_step)

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        states = self._flat_states(state, group)
        w_sq, x_sq = _lamb_moments_norms(param, grad, states, self._hyper(param, state, group))
        ratio = 1.0
        if self._adapts(group):
            ratio = float(trust_ratio(param.dtype, w_sq, x_sq, group))
        lr = group["lr"]
        if isinstance(group["bias_correction"], str):  # "step_size"
            lr = lr / (1 - group["betas"][0] ** state["step"])
        _lamb_update(param, states, self._hyper(param, state, group, -(lr * ratio)))


def trust_ratio(dtype, w_sq, x_sq, group):
    """The layer's ratio from ``‖w‖²`` and ``‖x‖²``, in ``dtype`` (see the module docstring)."""
    kind = np.dtype(dtype).type
    w_norm, x_norm = np.sqrt(kind(w_sq)), np.sqrt(kind(x_sq))
    if not (w_norm > 0 and x_norm > 0):
        ratio = kind(1)
    else:
        ratio = _clamp(w_norm, group["phi_bounds"]) / (x_norm + kind(group["trust_eps"]))
    ratio = _clamp(ratio, group["ratio_bounds"])
    if group["trust_clip"]:
        ratio = min(ratio, kind(1))
    return ratio
