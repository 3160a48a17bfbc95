r"""NAdam on bfloat16/float16 params, grads and state, rounded as torch 2.13's CPU single-tensor
code (``rounding="per-op"``; torch 2.13 has no fused NAdam, and its foreach path is not its CPU
default).

The math is :mod:`npoptim.optim.nadam`'s, rounded as :mod:`npoptim.precision.adam`'s per-op
rule (:math:`R`; :math:`\epsilon` is :math:`R(\epsilon)`; the other scalars are computed in
double, as torch does, then float32), whose weight decay and moments :math:`m`, :math:`v` it
shares (:func:`~npoptim.precision.adam.per_op_moments`). Then, with ``mu_product``
:math:`\Pi_t` a float32 0-d state multiplied in float32 by each :math:`\mu_t` (as torch keeps
it), :math:`c_g = -\gamma(1-\mu_t)/(1-\Pi_t)` and :math:`c_m = -\gamma\mu_{t+1}/(1-\Pi_t\mu_{t+1})`:

.. math::

    d &\leftarrow R(R(\sqrt{R(v / b_2)}) + \epsilon)\\
    \theta &\leftarrow R(\theta + (c_g\, g) / d),\qquad \theta \leftarrow R(\theta + (c_m\, m) / d)

In torch's scalar tail (see :mod:`npoptim.precision.adam`) the L2 decay's ``add(.., alpha)``
rounds the product first. ``load_state_dict`` casts ``mu_product`` to the parameter's dtype, as
torch's does; later steps then round it to that dtype (:mod:`npoptim.precision.optimizer`).
The convention switches of the float class (``state_dtype``, ``momentum_schedule``) are
torch's values only here.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.jit import inlined, kernel
from npoptim.kernels.switches import Switch
from npoptim.optim import nadam
from npoptim.precision.adam import per_op_moment_hyper, per_op_moments
from npoptim.precision.drivers import apply_dense16, new_states
from npoptim.precision.formats import format_of, round_to
from npoptim.precision.optimizer import (LowPrecision, record16, rounded_scalar, scalar_state,
                                        set_scalar_state)


class NAdam16Hyper(NamedTuple):
    """One step's hyperparameters of the 16-bit NAdam rule."""

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
    # NAdam's own
    bias_correction2: float  # 1 - beta2^t
    eps: float               # R(eps)
    grad_coef: float         # -lr (1 - mu_t) / (1 - Pi_t)
    avg_coef: float          # -lr mu_{t+1} / (1 - Pi_t mu_{t+1})


@inlined
def nadam_per_op_rule(p, g, s, h, i, tail):
    """``s = (exp_avg, exp_avg_sq)``."""
    exp_avg, exp_avg_sq = s
    p, g, m, v = per_op_moments(p, g, exp_avg, exp_avg_sq, h, tail)
    denom = round_to(np.sqrt(round_to(v / h.bias_correction2, h.code)), h.code)
    denom = round_to(denom + h.eps, h.code)
    p = round_to(p + h.grad_coef * g / denom, h.code)
    return round_to(p + h.avg_coef * m / denom, h.code), new_states(m, v)


@kernel
def _nadam_dense(param, grad, states, hyper):
    apply_dense16(nadam_per_op_rule, param, grad, states, hyper)


class NAdam(LowPrecision, nadam.NAdam):
    """``torch.optim.NAdam`` on bfloat16/float16 arrays, ``rounding="per-op"`` (module
    docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The bfloat16, float16 or uint16 (raw bits) arrays to optimize (updated in place),
        or param groups (dicts with ``"params"``).
    lr : float, default: 0.002
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.999)
        Decay rates (β1, β2) of the first and second moments.
    eps : float, default: 1e-08
        Term ε added to the denominator for numerical stability.
    weight_decay : float, default: 0
        Weight decay λ: L2, or decoupled with ``decoupled_weight_decay``.
    momentum_decay : float, default: 0.004
        Momentum decay ψ of the schedule μ_t = β1(1 - 0.96^(tψ)/2).
    decoupled_weight_decay : bool, default: False
        Decoupled decay θ(1 - γλ) (NAdamW).
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
        The other options of :class:`npoptim.optim.nadam.NAdam` (torch's
        ``foreach``, ``differentiable``, ``fused``, ...); its convention switches only at
        torch's values.
    """

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
        hyper = record16(NAdam16Hyper, param, group, **per_op_moment_hyper(group, code),
                         bias_correction2=1 - beta2 ** step,
                         eps=rounded_scalar(group["eps"], code),
                         grad_coef=-lr * (1.0 - mu) / (1.0 - mu_product),
                         avg_coef=(-lr * mu_next) / (1.0 - mu_product * mu_next))
        _nadam_dense(param.view(np.uint16), grad.view(np.uint16),
                     self._flat_bits(state, group), hyper)
