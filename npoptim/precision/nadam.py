r"""NAdam and RAdam on bfloat16/float16 params, grads and state, rounded as torch 2.13's CPU
single-tensor code (``rounding="per-op"``; torch 2.13 has no fused NAdam or RAdam, and its
foreach path is not its CPU default).

The math is :mod:`npoptim.optim.nadam`'s and :mod:`npoptim.optim.radam`'s; every tensor op
computes in float32 and rounds to the 16-bit format (:math:`R`), ``add``'s ``alpha`` and a
scalar added to a tensor (``eps``: :math:`\epsilon` below is :math:`R(\epsilon)`) rounded to
the format first, the other scalars (computed in double, as torch does) float32. Weight decay
and the moments are :mod:`npoptim.precision.adam`'s per-op ones:

.. math::

    \theta &\leftarrow R(\theta\,(1-\gamma\lambda))                 &&\text{decoupled}\\
    g &\leftarrow R(\mathrm{fma}(R(\lambda), \theta, g))            &&\text{else (L2)}\\
    m &\leftarrow R(\mathrm{lerp}(m, g, 1-\beta_1)),\qquad
    v \leftarrow R(\mathrm{fma}((1-\beta_2)\,g,\; g,\; R(\beta_2 v)))

NAdam, with ``mu_product`` :math:`\Pi_t` a float32 0-d state multiplied in float32 by each
:math:`\mu_t` (as torch keeps it), :math:`c_g = -\gamma(1-\mu_t)/(1-\Pi_t)` and
:math:`c_m = -\gamma\mu_{t+1}/(1-\Pi_t\mu_{t+1})`:

.. math::

    d &\leftarrow R(R(\sqrt{R(v / b_2)}) + \epsilon)\\
    \theta &\leftarrow R(\theta + (c_g\, g) / d),\qquad \theta \leftarrow R(\theta + (c_m\, m) / d)

RAdam (torch's ``scalar / tensor`` is a reciprocal then a product, ``param.add_(u,
alpha=-1)`` a subtraction):

.. math::

    u &\leftarrow R(R(m / b_1)\,\gamma)\\
    u &\leftarrow R(R(u \cdot R(R(1 / R(R(\sqrt v) + \epsilon))\sqrt{b_2}))\; r_t)
        &&\rho_t > 5\\
    \theta &\leftarrow R(\theta - u)

In torch's scalar tail (see :mod:`npoptim.precision.adam`) the L2 decay's ``add(.., alpha)``
rounds the product first. ``load_state_dict`` casts ``mu_product`` to the parameter's dtype, as
torch's does; later steps then round it to that dtype (:mod:`npoptim.precision.optimizer`).
The convention switches of the float classes (``state_dtype``, ``momentum_schedule``,
``eps_mode``, ``rectify_threshold_inclusive``) are torch's values only here.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import constant
from npoptim.optim import nadam, radam
from npoptim.optim.adam import moment_hyper
from npoptim.precision.adam import per_op_moments
from npoptim.precision.drivers import apply_dense16
from npoptim.precision.formats import format_of, round_to
from npoptim.precision.optimizer import (LowPrecision, record16, rounded_scalar, scalar_state,
                                        set_scalar_state)


class NAdam16Hyper(NamedTuple):
    """One step's hyperparameters of the 16-bit NAdam rule."""

    code: int
    tail_start: int
    # read by per_op_moments (npoptim.optim.adam.moment_hyper; l2 rounded to the format)
    decay_factor: float
    l2: float
    one_minus_beta1: float
    beta2: float
    one_minus_beta2: float
    maximize: float
    # NAdam's own
    bias_correction2: float  # 1 - beta2^t
    eps: float               # R(eps)
    grad_coef: float         # -lr (1 - mu_t) / (1 - Pi_t)
    avg_coef: float          # -lr mu_{t+1} / (1 - Pi_t mu_{t+1})


class RAdam16Hyper(NamedTuple):
    """One step's hyperparameters of the 16-bit RAdam rules."""

    code: int
    tail_start: int
    decay_factor: float
    l2: float
    one_minus_beta1: float
    beta2: float
    one_minus_beta2: float
    maximize: float
    # RAdam's own
    bias_correction1: float
    lr: float
    bias_correction2_sqrt: float
    eps: float               # R(eps)
    rect: float              # r_t (the rectified rule only)


@kernel
def nadam_per_op_rule(p, g, s, h, i):
    """``s = (exp_avg, exp_avg_sq)``."""
    exp_avg, exp_avg_sq = s
    p, g, m, v = per_op_moments(p, g, exp_avg, exp_avg_sq, h, i >= h.tail_start)
    denom = round_to(np.sqrt(round_to(v / h.bias_correction2, h.code)), h.code)
    denom = round_to(denom + h.eps, h.code)
    p = round_to(p + h.grad_coef * g / denom, h.code)
    return round_to(p + h.avg_coef * m / denom, h.code), (m, v)


@kernel
def radam_per_op_rule(p, g, s, h, i):
    """A rectified step (``rho_t > 5``); ``s = (exp_avg, exp_avg_sq)``."""
    exp_avg, exp_avg_sq = s
    p, g, m, v = per_op_moments(p, g, exp_avg, exp_avg_sq, h, i >= h.tail_start)
    update = round_to(round_to(m / h.bias_correction1, h.code) * h.lr, h.code)
    denom = round_to(round_to(np.sqrt(v), h.code) + h.eps, h.code)
    adaptive_lr = round_to(round_to(constant(1.0, denom) / denom, h.code) * h.bias_correction2_sqrt,
                           h.code)
    update = round_to(round_to(update * adaptive_lr, h.code) * h.rect, h.code)
    return round_to(p - update, h.code), (m, v)


@kernel
def unrectified_per_op_rule(p, g, s, h, i):
    """An early step (``rho_t <= 5``): SGD with the bias-corrected momentum."""
    exp_avg, exp_avg_sq = s
    p, g, m, v = per_op_moments(p, g, exp_avg, exp_avg_sq, h, i >= h.tail_start)
    update = round_to(round_to(m / h.bias_correction1, h.code) * h.lr, h.code)
    return round_to(p - update, h.code), (m, v)


@kernel
def _nadam_dense(param, grad, states, hyper):
    apply_dense16(nadam_per_op_rule, param, grad, states, hyper)


@kernel
def _radam_dense(param, grad, states, hyper):
    apply_dense16(radam_per_op_rule, param, grad, states, hyper)


@kernel
def _unrectified_dense(param, grad, states, hyper):
    apply_dense16(unrectified_per_op_rule, param, grad, states, hyper)


def _moments16(group, code):
    """:func:`npoptim.optim.adam.moment_hyper` with the L2 ``alpha`` rounded to the format."""
    moments = moment_hyper(group)
    moments["l2"] = rounded_scalar(moments["l2"], code)
    return moments


class NAdam(LowPrecision, nadam.NAdam):
    """``torch.optim.NAdam`` on bfloat16/float16 arrays, ``rounding="per-op"`` (module
    docstring)."""

    roundings = ("per-op",)
    scalar_states = ("mu_product",)

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, rounding="per-op",
                 format=None, torch_cpu_lanes=None, maximize=False, **torch_options):
        self._low_precision_defaults = dict(rounding=rounding, format=format,
                                            torch_cpu_lanes=torch_cpu_lanes)
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         momentum_decay=momentum_decay,
                         decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                         **torch_options)

    def _init_state(self, param, group):
        return {"step": 0, "mu_product": np.array(1.0, np.float32),
                "exp_avg": np.zeros(param.shape, param.dtype),
                "exp_avg_sq": np.zeros(param.shape, param.dtype)}

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        step = state["step"]
        code = self._code(param, group)
        mu, mu_next = self._mu(group, step), self._mu(group, step + 1)
        # torch: mu_product *= mu, in the 0-d tensor's dtype (the float32 product, rounded)
        product, fmt = state["mu_product"], format_of(param, group["format"])
        set_scalar_state(product, scalar_state(product, fmt) * np.float32(mu), fmt)
        mu_product = float(scalar_state(product, fmt))
        lr, beta2 = group["lr"], group["betas"][1]
        hyper = record16(NAdam16Hyper, param, group, **_moments16(group, code),
                         bias_correction2=1 - beta2 ** step,
                         eps=rounded_scalar(group["eps"], code),
                         grad_coef=-lr * (1.0 - mu) / (1.0 - mu_product),
                         avg_coef=(-lr * mu_next) / (1.0 - mu_product * mu_next))
        _nadam_dense(param.view(np.uint16), grad.view(np.uint16),
                     self._flat_bits(state, group), hyper)


class RAdam(LowPrecision, radam.RAdam):
    """``torch.optim.RAdam`` on bfloat16/float16 arrays, ``rounding="per-op"`` (module
    docstring)."""

    roundings = ("per-op",)

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, rounding="per-op", format=None,
                 torch_cpu_lanes=None, maximize=False, **torch_options):
        self._low_precision_defaults = dict(rounding=rounding, format=format,
                                            torch_cpu_lanes=torch_cpu_lanes)
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                         **torch_options)

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        step = state["step"]
        code = self._code(param, group)
        beta1, beta2 = group["betas"]
        bias_correction2 = 1 - beta2 ** step
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
        rectified = rho_t > 5.0
        rect = (((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                ** 0.5 if rectified else 0.0)
        hyper = record16(RAdam16Hyper, param, group, **_moments16(group, code),
                         bias_correction1=1 - beta1 ** step, lr=group["lr"],
                         bias_correction2_sqrt=bias_correction2 ** 0.5,
                         eps=rounded_scalar(group["eps"], code), rect=rect)
        kernel_ = _radam_dense if rectified else _unrectified_dense
        kernel_(param.view(np.uint16), grad.view(np.uint16), self._flat_bits(state, group),
                hyper)
