r"""RMSprop on bfloat16/float16 params, grads and state, rounded as torch 2.13's CPU code.

The math is :mod:`npoptim.optim.rmsprop`'s, with ``rounding="per-op"`` (torch's single-tensor
path, its CPU default; torch has no fused RMSprop): every tensor op computes in float32 and
rounds to the 16-bit format (:math:`R`); ``add``'s ``alpha`` and a scalar added to a tensor
(``eps``: :math:`\epsilon` below is :math:`R(\epsilon)`) are rounded to the format first, the
other scalars are float32:

.. math::

    g &\leftarrow R(\mathrm{fma}(R(\lambda), \theta, g))                 &&\text{weight decay}\\
    v &\leftarrow R(\mathrm{fma}((1-\alpha)\,g,\; g,\; R(\alpha v)))      &&\text{``square_avg``}\\
    \bar g &\leftarrow R(\mathrm{lerp}(\bar g, g, 1-\alpha))             &&\text{centered}\\
    d &\leftarrow R(R(\sqrt{R(\mathrm{fma}(-\bar g, \bar g, v))}) + \epsilon) \;\text{(centered)},
        \quad d \leftarrow R(R(\sqrt v) + \epsilon)\\
    b &\leftarrow R(R(\mu b) + g / d),\quad
        \theta \leftarrow R(\mathrm{fma}(R(-\gamma), b, \theta))          &&\mu > 0\\
    \theta &\leftarrow R(\theta + (-\gamma g) / d)                       &&\text{else}

In torch's scalar tail (see :mod:`npoptim.precision.adam`) each ``add(.., alpha)`` rounds the
product first. The convention switches of the float class (``eps_in_sqrt``,
``lr_in_momentum``) are torch's values only here.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.jit import inlined, kernel
from npoptim.kernels.switches import Switch
from npoptim.kernels.scalar import fma, lerp
from npoptim.optim import rmsprop
from npoptim.precision.drivers import apply_dense16, new_states
from npoptim.precision.formats import round_to
from npoptim.precision.optimizer import (LowPrecision, add_alpha, per_op_decayed_grad,
                                        record16, rounded_scalar)


class RMSprop16Hyper(NamedTuple):
    """One step's hyperparameters of the 16-bit RMSprop rules."""

    code: int
    tail_start: int
    weight_decay: float      # R(weight_decay)
    alpha: float
    one_minus_alpha: float
    eps: float               # R(eps): tensor.add(scalar) rounds the scalar to the format
    momentum: float
    neg_lr: float            # float32 (addcdiv's value)
    neg_lr_alpha: float      # R(-lr) (param.add_(buf, alpha=-lr))
    maximize: Switch         # torch's maximize
    decays: Switch           # torch's weight_decay != 0


@inlined
def _square_avg(p, g, v, h, tail):
    g = per_op_decayed_grad(p, g, h, tail)
    v = round_to(v * h.alpha, h.code)
    return g, round_to(fma(h.one_minus_alpha * g, g, v), h.code)


@inlined
def _plain_denom(v, h):
    return round_to(round_to(np.sqrt(v), h.code) + h.eps, h.code)


@inlined
def _centered_denom(v, grad_avg, h):
    centered = round_to(fma(-grad_avg, grad_avg, v), h.code)
    return round_to(round_to(np.sqrt(centered), h.code) + h.eps, h.code)


@inlined
def _param_step(p, g, d, h):
    return round_to(p + h.neg_lr * g / d, h.code)


@inlined
def _momentum_step(p, g, d, buf, h, tail):
    buf = round_to(round_to(buf * h.momentum, h.code) + g / d, h.code)
    return add_alpha(p, h.neg_lr_alpha, buf, h.code, tail), buf


@inlined
def rmsprop_per_op_rule(p, g, s, h, i, tail):
    """``s = (square_avg,)``."""
    (v,) = s
    g, v = _square_avg(p, g, v, h, tail)
    return _param_step(p, g, _plain_denom(v, h), h), (v,)


@inlined
def centered_per_op_rule(p, g, s, h, i, tail):
    """``s = (square_avg, grad_avg)``."""
    v, grad_avg = s
    g, v = _square_avg(p, g, v, h, tail)
    grad_avg = round_to(lerp(grad_avg, g, h.one_minus_alpha), h.code)
    return _param_step(p, g, _centered_denom(v, grad_avg, h), h), new_states(v, grad_avg)


@inlined
def momentum_per_op_rule(p, g, s, h, i, tail):
    """``s = (square_avg, momentum_buffer)``."""
    v, buf = s
    g, v = _square_avg(p, g, v, h, tail)
    p, buf = _momentum_step(p, g, _plain_denom(v, h), buf, h, tail)
    return p, new_states(v, buf)


@inlined
def centered_momentum_per_op_rule(p, g, s, h, i, tail):
    """``s = (square_avg, momentum_buffer, grad_avg)``."""
    v, buf, grad_avg = s
    g, v = _square_avg(p, g, v, h, tail)
    grad_avg = round_to(lerp(grad_avg, g, h.one_minus_alpha), h.code)
    p, buf = _momentum_step(p, g, _centered_denom(v, grad_avg, h), buf, h, tail)
    return p, new_states(v, buf, grad_avg)


@kernel
def _plain_dense(param, grad, states, hyper):
    apply_dense16(rmsprop_per_op_rule, param, grad, states, hyper)


@kernel
def _centered_dense(param, grad, states, hyper):
    apply_dense16(centered_per_op_rule, param, grad, states, hyper)


@kernel
def _momentum_dense(param, grad, states, hyper):
    apply_dense16(momentum_per_op_rule, param, grad, states, hyper)


@kernel
def _centered_momentum_dense(param, grad, states, hyper):
    apply_dense16(centered_momentum_per_op_rule, param, grad, states, hyper)


#: (momentum > 0, centered) -> kernel; states in the float class's _state_names order
KERNELS = {(False, False): _plain_dense, (False, True): _centered_dense,
           (True, False): _momentum_dense, (True, True): _centered_momentum_dense}


class RMSprop(LowPrecision, rmsprop.RMSprop):
    """``torch.optim.RMSprop`` on bfloat16/float16 arrays, ``rounding="per-op"`` (see the module
    docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The bfloat16, float16 or uint16 (raw bits) arrays to optimize (updated in place),
        or param groups (dicts with ``"params"``).
    lr : float, default: 0.01
        Learning rate γ.
    alpha : float, default: 0.99
        Smoothing constant α of the average of g².
    eps : float, default: 1e-08
        Term ε added outside the square root.
    weight_decay : float, default: 0
        Weight decay λ: λθ added to the gradient (L2).
    momentum : float, default: 0
        Momentum factor μ (0: none).
    centered : bool, default: False
        Centered RMSprop: divide by the estimated variance, v - ḡ².
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
        The other options of :class:`npoptim.optim.rmsprop.RMSprop` (torch's
        ``foreach``, ``differentiable``, ``fused``, ...); its convention switches only at
        torch's values.
    """

    roundings = ("per-op",)

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, *, rounding="per-op", format=None, torch_cpu_lanes=None,
                 maximize=False, **torch_options):
        self._low_precision_defaults = dict(rounding=rounding, format=format,
                                            torch_cpu_lanes=torch_cpu_lanes)
        super().__init__(params, lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                         momentum=momentum, centered=centered, maximize=maximize,
                         **torch_options)

    def _update(self, param, grad, state, group, index, shape):
        for name in self._state_names(group):
            if name not in state:
                state[name] = np.zeros(param.shape, param.dtype)
        state["step"] += 1
        code = self._code(param, group)
        alpha = group["alpha"]
        hyper = record16(RMSprop16Hyper, param, group,
                         weight_decay=rounded_scalar(group["weight_decay"], code), alpha=alpha,
                         one_minus_alpha=1 - alpha, eps=rounded_scalar(group["eps"], code),
                         momentum=group["momentum"], neg_lr=-group["lr"],
                         neg_lr_alpha=rounded_scalar(-group["lr"], code),
                         maximize=bool(group["maximize"]),
                         decays=group["weight_decay"] != 0)
        KERNELS[group["momentum"] > 0, bool(group["centered"])](
            param.view(np.uint16), grad.view(np.uint16), self._flat_bits(state, group), hyper)
