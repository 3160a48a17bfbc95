r"""RAdam on bfloat16/float16 params, grads and state, rounded as torch 2.13's CPU single-tensor
code (``rounding="per-op"``; torch 2.13 has no fused RAdam, and its foreach path is not its CPU
default).

The math is :mod:`npoptim.optim.radam`'s, rounded as :mod:`npoptim.precision.adam`'s per-op
rule (:math:`R`; :math:`\epsilon` is :math:`R(\epsilon)`; the other scalars are computed in
double, as torch does, then float32), whose weight decay and moments :math:`m`, :math:`v` it
shares (:func:`~npoptim.precision.adam.per_op_moments`). Then (torch's ``scalar / tensor`` is
a reciprocal then a product, ``param.add_(u, alpha=-1)`` a subtraction):

.. math::

    u &\leftarrow R(R(m / b_1)\,\gamma)\\
    u &\leftarrow R(R(u \cdot R(R(1 / R(R(\sqrt v) + \epsilon))\sqrt{b_2}))\; r_t)
        &&\rho_t > 5\\
    \theta &\leftarrow R(\theta - u)

In torch's scalar tail (see :mod:`npoptim.precision.adam`) the L2 decay's ``add(.., alpha)``
rounds the product first. The convention switches of the float class (``eps_mode``,
``rectify_threshold_inclusive``) are torch's values only here.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.jit import inlined, kernel
from npoptim.kernels.scalar import constant
from npoptim.kernels.switches import Switch
from npoptim.optim import radam
from npoptim.precision.adam import per_op_moment_hyper, per_op_moments
from npoptim.precision.drivers import apply_dense16, new_states
from npoptim.precision.formats import round_to
from npoptim.precision.optimizer import LowPrecision, record16, rounded_scalar


class RAdam16Hyper(NamedTuple):
    """One step's hyperparameters of the 16-bit RAdam rules."""

    code: int
    tail_start: int
    # read by per_op_moments (npoptim.precision.adam.per_op_moment_hyper)
    decay_factor: float
    l2: float
    l2_decays: Switch
    one_minus_beta1: float
    beta2: float
    one_minus_beta2: float
    maximize: Switch
    # RAdam's own
    bias_correction1: float
    lr: float
    bias_correction2_sqrt: float
    eps: float               # R(eps)
    rect: float              # r_t (the rectified rule only)


@inlined
def radam_per_op_rule(p, g, s, h, i, tail):
    """A rectified step (``rho_t > 5``); ``s = (exp_avg, exp_avg_sq)``."""
    exp_avg, exp_avg_sq = s
    p, g, m, v = per_op_moments(p, g, exp_avg, exp_avg_sq, h, tail)
    update = round_to(round_to(m / h.bias_correction1, h.code) * h.lr, h.code)
    denom = round_to(round_to(np.sqrt(v), h.code) + h.eps, h.code)
    adaptive_lr = round_to(round_to(constant(1.0, denom) / denom, h.code) * h.bias_correction2_sqrt,
                           h.code)
    update = round_to(round_to(update * adaptive_lr, h.code) * h.rect, h.code)
    return round_to(p - update, h.code), new_states(m, v)


@inlined
def unrectified_per_op_rule(p, g, s, h, i, tail):
    """An early step (``rho_t <= 5``): SGD with the bias-corrected momentum."""
    exp_avg, exp_avg_sq = s
    p, g, m, v = per_op_moments(p, g, exp_avg, exp_avg_sq, h, tail)
    update = round_to(round_to(m / h.bias_correction1, h.code) * h.lr, h.code)
    return round_to(p - update, h.code), new_states(m, v)


@kernel
def _radam_dense(param, grad, states, hyper):
    apply_dense16(radam_per_op_rule, param, grad, states, hyper)


@kernel
def _unrectified_dense(param, grad, states, hyper):
    apply_dense16(unrectified_per_op_rule, param, grad, states, hyper)


class RAdam(LowPrecision, radam.RAdam):
    """``torch.optim.RAdam`` on bfloat16/float16 arrays, ``rounding="per-op"`` (module
    docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The bfloat16, float16 or uint16 (raw bits) arrays to optimize (updated in place),
        or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.999)
        Decay rates (β1, β2) of the first and second moments.
    eps : float, default: 1e-08
        Term ε added to the denominator for numerical stability.
    weight_decay : float, default: 0
        Weight decay λ: L2, or decoupled with ``decoupled_weight_decay``.
    decoupled_weight_decay : bool, default: False
        Decoupled decay θ(1 - γλ).
    rounding : {'per-op'}, default: 'per-op'
        Where results are rounded to the 16-bit format (see the module docstring): ``"per-op"``.
    format : {'bfloat16', 'float16'} or None, default: None
        ``"bfloat16"`` or ``"float16"``: the format of raw ``uint16`` arrays (the bits);
        ``ml_dtypes.bfloat16`` and NumPy ``float16`` arrays carry their own.
    torch_cpu_lanes : int or None, default: None
        None: no scalar remainder loop (as on a GPU); or the number of 16-bit lanes of
        torch's CPU vectors (32 with AVX-512 and with AVX2), to round the last
        ``n % lanes`` elements of each tensor as torch's scalar loop does.
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    **torch_options
        The other options of :class:`npoptim.optim.radam.RAdam` (torch's
        ``foreach``, ``differentiable``, ``fused``, ...); its convention switches only at
        torch's values.
    """

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
        hyper = record16(RAdam16Hyper, param, group, **per_op_moment_hyper(group, code),
                         bias_correction1=1 - beta1 ** step, lr=group["lr"],
                         bias_correction2_sqrt=bias_correction2 ** 0.5,
                         eps=rounded_scalar(group["eps"], code), rect=rect)
        kernel_ = _radam_dense if rectified else _unrectified_dense
        kernel_(param.view(np.uint16), grad.view(np.uint16), self._flat_bits(state, group),
                hyper)
