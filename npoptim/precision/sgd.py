r"""SGD on bfloat16/float16 params, grads and momentum buffer, rounded as torch 2.13's CPU code.

The math is :mod:`npoptim.optim.sgd`'s, with ``rounding="per-op"`` (torch's single-tensor path,
its CPU default): every tensor op computes in float32 and rounds to the 16-bit format
(:math:`R`); ``add``'s ``alpha`` is rounded to the format first, ``mul``'s scalar is float32:

.. math::

    g &\leftarrow R(\mathrm{fma}(R(\lambda), \theta, g))             &&\text{weight decay}\\
    b &\leftarrow g \;\text{(first step)}, \quad
        b \leftarrow R(\mathrm{fma}(R(1-\tau), g, R(\mu b)))          &&\text{later}\\
    d &\leftarrow R(\mathrm{fma}(R(\mu), b, g)) \;\text{(nesterov)}, \quad d \leftarrow b\\
    \theta &\leftarrow R(\mathrm{fma}(R(-\gamma), d, \theta))

In torch's scalar tail (see :mod:`npoptim.precision.adam`) each ``add(.., alpha)`` rounds the
product first. (``R(-lr)``: a learning rate of 0.01 moves a bfloat16 parameter by ``0.010009765625 * d``, as in
torch.) There is no ``"fused"`` mode: torch 2.13's fused CPU SGD on bfloat16/float16 params
leaves the parameters unchanged in its vectorized loop (``sgd_math`` never stores them), which
is not a rounding to reproduce.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.jit import inlined, kernel
from npoptim.kernels.switches import Switch
from npoptim.optim import sgd
from npoptim.precision.drivers import apply_dense16
from npoptim.precision.formats import round_to
from npoptim.precision.optimizer import (LowPrecision, add_alpha, per_op_decayed_grad,
                                        record16, rounded_scalar)


class SGD16Hyper(NamedTuple):
    """One step's hyperparameters of the 16-bit SGD rules (each ``alpha`` in the format)."""

    code: int
    tail_start: int              # first element of torch's scalar remainder loop
    weight_decay: float          # R(weight_decay)
    neg_lr: float                # R(-lr)
    maximize: Switch             # torch's maximize
    decays: Switch               # torch's weight_decay != 0
    momentum: float              # float32 (buf.mul_(momentum))
    momentum_alpha: float        # R(momentum) (nesterov's grad.add(buf, alpha=momentum))
    one_minus_dampening: float   # R(1 - dampening)
    nesterov: Switch


@inlined
def _momentum_step(p, g, buf, h, tail):
    direction = add_alpha(g, h.momentum_alpha, buf, h.code, tail) if h.nesterov != 0 else buf
    return add_alpha(p, h.neg_lr, direction, h.code, tail)


@inlined
def sgd_per_op_rule(p, g, s, h, i, tail):
    """SGD without momentum; ``s = ()``."""
    g = per_op_decayed_grad(p, g, h, tail)
    return add_alpha(p, h.neg_lr, g, h.code, tail), s


@inlined
def momentum_first_per_op_rule(p, g, s, h, i, tail):
    """The first momentum step: the buffer is a copy of the decayed gradient."""
    g = per_op_decayed_grad(p, g, h, tail)
    return _momentum_step(p, g, g, h, tail), (g,)


@inlined
def momentum_per_op_rule(p, g, s, h, i, tail):
    (buf,) = s
    g = per_op_decayed_grad(p, g, h, tail)
    buf = round_to(buf * h.momentum, h.code)
    buf = add_alpha(buf, h.one_minus_dampening, g, h.code, tail)
    return _momentum_step(p, g, buf, h, tail), (buf,)


@kernel
def _sgd_per_op_dense(param, grad, states, hyper):
    apply_dense16(sgd_per_op_rule, param, grad, states, hyper)


@kernel
def _momentum_first_per_op_dense(param, grad, states, hyper):
    apply_dense16(momentum_first_per_op_rule, param, grad, states, hyper)


@kernel
def _momentum_per_op_dense(param, grad, states, hyper):
    apply_dense16(momentum_per_op_rule, param, grad, states, hyper)


class SGD(LowPrecision, sgd.SGD):
    """``torch.optim.SGD`` on bfloat16/float16 arrays, ``rounding="per-op"`` (see the module
    docstring); dense gradients only.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The bfloat16, float16 or uint16 (raw bits) arrays to optimize (updated in place),
        or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    momentum : float, default: 0
        Momentum factor μ (0: no momentum buffer).
    dampening : float, default: 0
        Dampening τ of the momentum: b ← μb + (1 - τ)g.
    weight_decay : float, default: 0
        Weight decay λ: λθ added to the gradient (L2).
    nesterov : bool, default: False
        Nesterov momentum: step along g + μb.
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
        The other options of :class:`npoptim.optim.sgd.SGD` (torch's
        ``foreach``, ``differentiable``, ``fused``, ...); its convention switches only at
        torch's values.
    """

    roundings = ("per-op",)

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, rounding="per-op", format=None, torch_cpu_lanes=None,
                 maximize=False, **torch_options):
        self._low_precision_defaults = dict(rounding=rounding, format=format,
                                            torch_cpu_lanes=torch_cpu_lanes)
        super().__init__(params, lr=lr, momentum=momentum, dampening=dampening,
                         weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                         **torch_options)

    def _update(self, param, grad, state, group, index, shape, first=False):
        code = self._code(param, group)
        momentum = group["momentum"]
        hyper = record16(SGD16Hyper, param, group,
                         weight_decay=rounded_scalar(group["weight_decay"], code),
                         neg_lr=rounded_scalar(-group["lr"], code),
                         maximize=bool(group["maximize"]),
                         decays=group["weight_decay"] != 0, momentum=momentum,
                         momentum_alpha=rounded_scalar(momentum, code),
                         one_minus_dampening=rounded_scalar(1 - group["dampening"], code),
                         nesterov=bool(group["nesterov"]))
        if momentum == 0:
            kernel_ = _sgd_per_op_dense
        else:
            kernel_ = _momentum_first_per_op_dense if first else _momentum_per_op_dense
        kernel_(param.view(np.uint16), grad.view(np.uint16), self._flat_bits(state, group),
                hyper)
