r"""LARS (You, Gitman & Ginsburg, "Large Batch Training of Convolutional Networks", 2017), with a
switch for every published variant.

The published implementations disagree on where the learning rate sits (inside the momentum
buffer in the paper, optax and FBGEMM; outside in timm, torchlars and apex LARC, which agree
with the paper only while the lr is constant), on the trust ratio's denominator, on ε and on
clipping (each is listed below with its source file). The default is
the paper's Algorithm 1; ``variant=`` names each other published form, and the switches can be
set one by one (an explicit keyword overrides the variant's value). A variant also sets
``eps`` and ``trust_coefficient`` to its implementation's defaults; ``lr``, ``momentum`` and
``weight_decay`` keep npoptim's defaults unless given.

For each parameter tensor :math:`w` (one "layer") with gradient :math:`g`, global learning rate
:math:`\gamma` (the current ``lr``), trust coefficient :math:`\eta`, weight decay
:math:`\lambda`, momentum :math:`\mu` and dampening :math:`\tau`:

.. math::

    \rho &= \frac{\eta\,\|w\|}{\|g\| + \lambda\|w\| + \epsilon}   &&\quad\text{(1)}\\
    \rho &= \frac{\eta\,\|w\|}{\|g + \lambda w\| + \epsilon}        &&\quad\text{(2)}\\
    \rho &\leftarrow 1                                              &&\quad\text{(3)}\\
    \rho &\leftarrow \min(\rho/\gamma, 1)                           &&\quad\text{(4)}\\
    d &= g + \lambda w                                              &&\quad\text{(5)}\\
    x &= a\,d\\
    b &\leftarrow x                                                 &&\text{first step}\\
    b &\leftarrow \mu b + (1-\tau)\,x                               &&\text{later}\\
    s &= b                                                          &&\quad\text{(6)}\\
    w &\leftarrow w - c\,s

1. ``trust_denominator="sum"`` (the default).
2. ``trust_denominator="norm_of_sum"`` (optax).
3. If :math:`\|w\| = 0` or the gradient-side norm is 0.
4. Only with ``trust_clip`` (LARC).
5. With ``decay_in_update``; else :math:`d = g`.
6. Or :math:`s = x + \mu b` with ``nesterov``.

where ``momentum_convention`` chooses :math:`(a, c)`: ``"paper"`` :math:`(\gamma\rho, 1)` (the lr
is inside the buffer :math:`b`: Algorithm 1's :math:`v \leftarrow \mu v + \gamma\rho(g +
\lambda w);\ w \leftarrow w - v`), ``"torch"`` :math:`(\rho, \gamma)` (torch-SGD style, lr at
the update), ``"gradient"`` :math:`(1, \gamma\rho)` (the buffer accumulates the raw gradient,
the trust-scaled lr multiplies it at the update). With :math:`\mu = 0` there is no momentum
(:math:`s = x`, the buffer is left alone). The first step stores :math:`x` unscaled by
:math:`1-\tau` (torch's rule; with :math:`\tau = 0` this is the paper's zero-initialised
buffer).

:math:`\rho = 1` (no adaptation) for a group with ``exclude_from_layer_adaptation``; for a
group whose ``weight_decay`` is 0 when ``always_adapt`` is False (timm); and, with
``exclude_1d``, for parameters with at most one dimension (biases, norm scales), which also get
no weight decay: they take a plain momentum-SGD step. :math:`\|\cdot\|` is the Frobenius norm of the whole
tensor. The paper has no ε, no clipping and no zero-norm rule (the guard, ratio 1, is what
every implementation below does).

=======================  ======================================================================
``variant``              reproduces (repository, file)
=======================  ======================================================================
``"paper"`` (default)    arXiv 1708.03888 Algorithm 1: lr inside the buffer, ε=0, η=1e-3.
``"optax"``              google-deepmind/optax ``optax/_src/alias.py`` ``lars``: the paper's
                         convention with ‖g+λw‖ in the denominator.
``"timm"``               huggingface/pytorch-image-models ``timm/optim/lars.py`` ``Lars``: lr
                         outside the buffer, ε=1e-8, adaptation only when λ≠0
                         (``always_adapt=False``).
``"torchlars"``          kakaobrain/torchlars ``torchlars/lars.py`` wrapping ``SGD``: as timm,
                         but always adapts.
``"larc"``               NVIDIA/apex ``apex/parallel/LARC.py`` (clip mode) wrapping ``SGD``;
                         timm ``Lars(trust_clip=True)``: ``trust_clip``, η=0.02, ε=1e-8
                         (alias ``"apex_larc"``).
``"tutorial"``           the simplified form of tutorials: the velocity accumulates the raw
                         gradient (``momentum_convention="gradient"``), decay only inside the
                         ratio (``decay_in_update=False``), ε=1e-8.
=======================  ======================================================================

Differences that remain: apex LARC leaves a zero-norm parameter's gradient untouched *and skips
its weight decay and clip* that step, npoptim (as timm and torchlars) applies ratio 1 to
:math:`g + \lambda w`, then the clip if ``trust_clip`` (as timm); timm/torch-SGD keep no buffer until the first momentum step, npoptim's buffer starts
at zero (identical results). FBGEMM's ``lars_sgd`` (per embedding row, no zero guard) is not a
variant here. Norms are computed by the deterministic reduction
:func:`~npoptim.kernels.reduction.sumsq_pair`; the variant machinery is LAMB's
(:mod:`npoptim.optim.options`). Dense gradients only.
"""
import math
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.reduction import sumsq_pair
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import (VARIANT_DEFAULT, check_choice, check_flag, check_no_variant,
                                   check_nonnegative, flavored, is_real, resolve_variant)


class LARSNormHyper(NamedTuple):
    """The norm pass's hyperparameter."""

    grad_decay: float  # λ inside the gradient-side norm (trust_denominator="norm_of_sum"), else 0


@kernel
def lars_norm_terms(p, g, s, h):
    """``(w, g)``, or ``(w, g + lambda w)`` for the optax denominator (no state: ``()``)."""
    w = p
    if h.grad_decay != 0:
        return (), w, g + h.grad_decay * w
    return (), w, g


@kernel
def _lars_norms(param, grad, states, hyper):
    return sumsq_pair(lars_norm_terms, param, grad, states, LARSNormHyper(*hyper))


class LARSHyper(NamedTuple):
    """The update's hyperparameters (see the module docstring for ``a`` and ``c``)."""

    decay: float                # λ in d, else 0 (decay_in_update=False)
    scale: float                # a
    momentum: float
    one_minus_dampening: float
    first_step: float           # 1 on the first step: the buffer becomes x
    nesterov: float             # 1 or 0
    neg_step: float             # -c


@kernel
def lars_rule(p, g, s, h):
    """One element; ``s = (momentum_buffer,)``: :math:`b` (``direction`` is :math:`s`)."""
    (buf,) = s
    d = g
    if h.decay != 0:
        d = g + h.decay * p
    x = h.scale * d
    direction = x
    if h.momentum != 0:
        if h.first_step != 0:
            buf = x
        else:
            buf = h.momentum * buf + h.one_minus_dampening * x
        if h.nesterov != 0:
            direction = x + h.momentum * buf
        else:
            direction = buf
    return p + h.neg_step * direction, (buf,)


@kernel
def _lars_dense(param, grad, states, hyper):
    apply_dense(lars_rule, param, grad, states, LARSHyper(*hyper))


_PAPER = dict(momentum_convention="paper", trust_denominator="sum", trust_coefficient=1e-3,
              eps=0.0, trust_clip=False, always_adapt=True, decay_in_update=True)

#: The switches (and trust_coefficient, eps defaults) each variant sets.
VARIANTS = {
    "paper": _PAPER,
    "optax": dict(_PAPER, trust_denominator="norm_of_sum"),
    "timm": dict(_PAPER, momentum_convention="torch", eps=1e-8, always_adapt=False),
    "torchlars": dict(_PAPER, momentum_convention="torch", eps=1e-8),
    "larc": dict(_PAPER, momentum_convention="torch", eps=1e-8, trust_coefficient=0.02,
                 trust_clip=True),
    "tutorial": dict(_PAPER, momentum_convention="gradient", decay_in_update=False, eps=1e-8),
}
#: Other names of the variants.
ALIASES = {"paper_v1": "paper", "you2017": "paper", "apex_larc": "larc"}

_CONVENTIONS = ("paper", "torch", "gradient")
_DENOMINATORS = ("sum", "norm_of_sum")


class LARS(Optimizer):
    """LARS; ``variant`` picks a published form, keywords override its switches.

    See the module docstring for the algorithm and the variants (:data:`VARIANTS`).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    momentum : float, default: 0.9
        Momentum μ (0: none).
    dampening : float, default: 0
        Dampening τ of the momentum.
    weight_decay : float, default: 0
        Weight decay λ (in the ratio, and in the update with ``decay_in_update``).
    nesterov : bool, default: False
        Nesterov momentum.
    variant : str, default: 'paper'
        The published form to reproduce (a name of ``VARIANTS`` or ``ALIASES``, see the module
        docstring); it sets every switch whose default is "the variant's", and a switch given
        explicitly overrides it.
    trust_coefficient : float, default: the variant's
        Trust coefficient η of the ratio.
    eps : float, default: the variant's
        Term ε added to the ratio's denominator.
    momentum_convention : str, default: the variant's
        ``"paper"`` (lr inside the buffer), ``"torch"`` (lr outside) or ``"gradient"`` (the buffer
        holds the raw gradient; lr and ratio applied at the update).
    trust_denominator : str, default: the variant's
        ``"sum"`` (‖g‖ + λ‖w‖) or ``"norm_of_sum"`` (‖g + λw‖, optax).
    trust_clip : bool, default: the variant's
        LARC's clip: the local lr γρ capped at γ.
    always_adapt : bool, default: the variant's
        If False, a group with ``weight_decay == 0`` gets ratio 1.
    decay_in_update : bool, default: the variant's
        λw is added to the update (True) or appears only in the ratio.
    exclude_1d : bool, default: False
        Parameters with ndim <= 1 get neither adaptation nor weight decay.
    exclude_from_layer_adaptation : bool, default: False
        Ratio 1 for the group (optax's ``trust_ratio_mask`` as a param group).
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"

    @flavored
    def __init__(self, params, lr=1e-3, momentum=0.9, dampening=0, weight_decay=0,
                 nesterov=False, *, variant="paper", trust_coefficient=VARIANT_DEFAULT,
                 eps=VARIANT_DEFAULT, momentum_convention=VARIANT_DEFAULT,
                 trust_denominator=VARIANT_DEFAULT, trust_clip=VARIANT_DEFAULT,
                 always_adapt=VARIANT_DEFAULT, decay_in_update=VARIANT_DEFAULT,
                 exclude_1d=False, exclude_from_layer_adaptation=False):
        self.variant, switches = resolve_variant(
            VARIANTS, ALIASES, variant,
            dict(trust_coefficient=trust_coefficient, eps=eps,
                 momentum_convention=momentum_convention, trust_denominator=trust_denominator,
                 trust_clip=trust_clip, always_adapt=always_adapt,
                 decay_in_update=decay_in_update))
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, exclude_1d=exclude_1d,
                        exclude_from_layer_adaptation=exclude_from_layer_adaptation,
                        **switches)
        super().__init__(params, defaults)

    def _check_group(self, group):
        check_no_variant(group)
        check_nonnegative(group, "lr", "momentum", "weight_decay", "eps")
        dampening = group["dampening"]
        if not is_real(dampening) or not 0.0 <= dampening <= 1.0:
            raise ValueError(f"Invalid dampening value: {dampening} (must be in [0, 1])")
        eta = group["trust_coefficient"]
        if not is_real(eta) or not 0.0 < eta < math.inf:
            raise ValueError(f"Invalid trust_coefficient value: {eta} (must be positive and "
                             "finite)")
        check_flag(group, "nesterov", "trust_clip", "always_adapt", "decay_in_update",
                   "exclude_1d", "exclude_from_layer_adaptation")
        if group["nesterov"] and (group["momentum"] <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        check_choice(group, "momentum_convention", _CONVENTIONS)
        check_choice(group, "trust_denominator", _DENOMINATORS)

    def _state_names(self, group):
        return ("momentum_buffer",)

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        # the buffer has the parameter's shape (``param`` here is a flat view)
        excluded = group["exclude_1d"] and state["momentum_buffer"].ndim <= 1
        weight_decay = 0.0 if excluded else group["weight_decay"]
        lr = group["lr"]
        ratio = 1.0
        if not (excluded or group["exclude_from_layer_adaptation"]) and (
                group["always_adapt"] or weight_decay != 0):
            inside = group["trust_denominator"] == "norm_of_sum"
            w_sq, x_sq = _lars_norms(param, grad, (), typed_record(
                LARSNormHyper, param, grad_decay=weight_decay if inside else 0.0))
            ratio = float(trust_ratio(param.dtype, w_sq, x_sq, weight_decay, group))
        scale, neg_step = {"paper": (lr * ratio, -1.0),
                           "torch": (ratio, -lr),
                           "gradient": (1.0, -(lr * ratio))}[group["momentum_convention"]]
        hyper = typed_record(LARSHyper, param,
                             decay=weight_decay if group["decay_in_update"] else 0.0,
                             scale=scale, momentum=group["momentum"],
                             one_minus_dampening=1 - group["dampening"],
                             first_step=state["step"] == 1, nesterov=bool(group["nesterov"]),
                             neg_step=neg_step)
        _lars_dense(param, grad, self._flat_states(state, group), hyper)


def trust_ratio(dtype, w_sq, x_sq, weight_decay, group):
    """The layer's ratio from ``‖w‖²`` and the gradient-side ``‖x‖²``, in ``dtype``."""
    kind = np.dtype(dtype).type
    w_norm, x_norm = np.sqrt(kind(w_sq)), np.sqrt(kind(x_sq))
    if not (w_norm > 0 and x_norm > 0):
        ratio = kind(1)
    else:
        denominator = x_norm + kind(group["eps"])
        if group["trust_denominator"] == "sum":
            denominator = x_norm + kind(weight_decay) * w_norm + kind(group["eps"])
        ratio = kind(group["trust_coefficient"]) * w_norm / denominator
    if group["trust_clip"]:
        lr = kind(group["lr"])
        ratio = min(ratio / lr, kind(1)) if lr > 0 else kind(1)
    return ratio
