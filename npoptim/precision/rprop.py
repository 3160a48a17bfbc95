r"""Rprop on bfloat16/float16 params, grads and state, rounded as torch 2.13's CPU
single-tensor code (``rounding="per-op"``; torch 2.13 has no fused Rprop, and its foreach path
is not its CPU default).

The math is :mod:`npoptim.optim.rprop`'s; what the 16-bit format (:math:`R`) changes: the
product of successive gradients is rounded before its sign is taken (so a float16 product
that underflows to 0 keeps the step size), the factors and bounds are scalars written into or
compared with 16-bit tensors, so they are :math:`R(\eta_\pm)`, :math:`R(\Delta_{min})`,
:math:`R(\Delta_{max})` (``step_size`` starts as :math:`R(\gamma)`, torch's ``full_like``):

.. math::

    f &\leftarrow R(\eta_+),\ R(\eta_-) \text{ or } 1 \quad\text{by the sign of } R(g g'),
        \text{ then } f \leftarrow 1 \text{ where } f = 0\\
    \Delta &\leftarrow \mathrm{clamp}(R(\Delta f),\ R(\Delta_{min}),\ R(\Delta_{max}))\\
    g &\leftarrow 0 \quad\text{where } f = R(\eta_-),\qquad
    \theta \leftarrow R(\theta - \mathrm{sign}(g)\,\Delta),\qquad g' \leftarrow g

(torch's ``sign[sign.lt(0)] = etaminus`` writes :math:`R(\eta_-)`, and ``sign.eq(etaminus)``
compares with :math:`R(\eta_-)`: a float16 :math:`\eta_-` that rounds to 0 makes every such
factor 1, as in torch.) torch raises halfway through a step for an ``lr``, ``etas`` or
``step_sizes`` value beyond the format's largest finite value (it cannot convert it to the
16-bit type); npoptim raises before the step.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.jit import inlined, kernel
from npoptim.kernels.scalar import constant
from npoptim.kernels.switches import Switch
from npoptim.optim import rprop
from npoptim.precision.drivers import apply_dense16, new_states
from npoptim.precision.formats import (MAX_FINITE, bits_of, format_of, from_float32_array,
                                       round_to)
from npoptim.precision.optimizer import LowPrecision, record16, rounded_scalar


class Rprop16Hyper(NamedTuple):
    """One step's hyperparameters of the 16-bit Rprop rule (each in the format)."""

    code: int
    tail_start: int
    etaminus: float
    etaplus: float
    step_size_min: float
    step_size_max: float
    maximize: Switch


@inlined
def _sign(x):
    """torch's ``sign``: 0 for 0 and NaN."""
    if x > 0:
        return constant(1.0, x)
    if x < 0:
        return constant(-1.0, x)
    return constant(0.0, x)


@inlined
def rprop_per_op_rule(p, g, s, h, i, tail):
    """``s = (prev, step_size)``."""
    prev, step_size = s
    if h.maximize != 0:
        g = -g
    factor = _sign(round_to(g * prev, h.code))
    if factor > 0:
        factor = h.etaplus
    if factor < 0:
        factor = h.etaminus
    if factor == 0:
        factor = constant(1.0, p)
    step_size = round_to(step_size * factor, h.code)
    if step_size < h.step_size_min:  # clamp_(min, max); NaN stays NaN
        step_size = h.step_size_min
    if step_size > h.step_size_max:
        step_size = h.step_size_max
    if factor == h.etaminus:
        g = constant(0.0, p)
    return round_to(p - _sign(g) * step_size, h.code), new_states(g, step_size)


@kernel
def _rprop_dense(param, grad, states, hyper):
    apply_dense16(rprop_per_op_rule, param, grad, states, hyper)


class Rprop(LowPrecision, rprop.Rprop):
    """``torch.optim.Rprop`` on bfloat16/float16 arrays, ``rounding="per-op"`` (module
    docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The bfloat16, float16 or uint16 (raw bits) arrays to optimize (updated in place),
        or param groups (dicts with ``"params"``).
    lr : float, default: 0.01
        Initial step size Δ of every element.
    etas : tuple of float, default: (0.5, 1.2)
        Factors (η-, η+) that shrink and grow the step size.
    step_sizes : tuple of float, default: (1e-06, 50)
        Bounds (Δmin, Δmax) of the step size.
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
        The other options of :class:`npoptim.optim.rprop.Rprop` (torch's
        ``foreach``, ``differentiable``, ``fused``, ...); its convention switches only at
        torch's values.
    """

    roundings = ("per-op",)

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 rounding="per-op", format=None, torch_cpu_lanes=None, maximize=False,
                 **torch_options):
        self._low_precision_defaults = dict(rounding=rounding, format=format,
                                            torch_cpu_lanes=torch_cpu_lanes)
        super().__init__(params, lr=lr, etas=etas, step_sizes=step_sizes, maximize=maximize,
                         **torch_options)

    def _prepare_grad(self, grad, param, group, where):
        # torch converts lr, etas and step_sizes to the param's dtype, and raises ("value
        # cannot be converted to type c10::Half without overflow") for a finite value beyond
        # the format's largest; here before anything changes
        fmt = format_of(param, group["format"])
        for name, values in (("lr", (group["lr"],)), ("etas", group["etas"]),
                             ("step_sizes", group["step_sizes"])):
            if any(np.isfinite(v) and abs(v) > MAX_FINITE[fmt] for v in values):
                raise ValueError(f"{where}: {name}={group[name]!r} cannot be converted to "
                                 f"{fmt} without overflow")
        return super()._prepare_grad(grad, param, group, where)

    def _init_state(self, param, group):
        # torch's full_like(param, lr): to float32, then the format
        fmt = format_of(param, group["format"])
        step_size = np.empty(param.shape, param.dtype)
        bits_of(step_size)[...] = from_float32_array(
            np.full(param.shape, group["lr"], np.float32), fmt)
        return {"step": 0, "prev": np.zeros(param.shape, param.dtype), "step_size": step_size}

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        code = self._code(param, group)
        (etaminus, etaplus), (size_min, size_max) = group["etas"], group["step_sizes"]
        hyper = record16(Rprop16Hyper, param, group, etaminus=rounded_scalar(etaminus, code),
                         etaplus=rounded_scalar(etaplus, code),
                         step_size_min=rounded_scalar(size_min, code),
                         step_size_max=rounded_scalar(size_max, code),
                         maximize=bool(group["maximize"]))
        _rprop_dense(param.view(np.uint16), grad.view(np.uint16), self._flat_bits(state, group),
                     hyper)
