r"""Adamax on bfloat16/float16 params, grads and state, rounded as torch 2.13's CPU
single-tensor code (``rounding="per-op"``; torch has no fused Adamax): every tensor op computes
in float32 and rounds to the 16-bit format (:math:`R`), ``add``'s ``alpha`` and a scalar added
to a tensor (``eps``) rounded to the format first, other scalars float32 (:math:`\epsilon`
below is :math:`R(\epsilon)`). The math is :mod:`npoptim.optim.adamax`'s (torch's conventions
only), with :math:`c_t = \gamma / (1 - \beta_1^t)`:

.. math::

    g &\leftarrow R(\mathrm{fma}(R(\lambda), \theta, g)),\qquad
    m \leftarrow R(\mathrm{lerp}(m, g, 1-\beta_1))\\
    u &\leftarrow \max(R(\beta_2 u),\; R(|g| + \epsilon)),\qquad
    \theta \leftarrow R(\theta + (-c_t m) / u)

In torch's scalar tail (see :mod:`npoptim.precision.adam`) the L2 decay's ``add(.., alpha)``
rounds the product first.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.jit import inlined, kernel
from npoptim.kernels.switches import Switch
from npoptim.kernels.scalar import lerp, maximum
from npoptim.optim import adamax
from npoptim.precision.drivers import apply_dense16, new_states
from npoptim.precision.formats import round_to
from npoptim.precision.optimizer import (LowPrecision, per_op_decayed_grad, record16,
                                        rounded_scalar)


class Adamax16Hyper(NamedTuple):
    code: int
    tail_start: int
    weight_decay: float      # R(weight_decay)
    one_minus_beta1: float
    beta2: float
    eps: float               # R(eps): tensor.add(scalar) rounds the scalar to the format
    neg_clr: float           # -lr / (1 - beta1**t), float32 (addcdiv's value)
    maximize: Switch         # torch's maximize
    decays: Switch           # torch's weight_decay != 0


@inlined
def adamax_per_op_rule(p, g, s, h, i, tail):
    """``s = (exp_avg, exp_inf)``."""
    m, u = s
    g = per_op_decayed_grad(p, g, h, tail)
    m = round_to(lerp(m, g, h.one_minus_beta1), h.code)
    u = maximum(round_to(u * h.beta2, h.code), round_to(abs(g) + h.eps, h.code))
    return round_to(p + h.neg_clr * m / u, h.code), new_states(m, u)


@kernel
def _adamax_dense(param, grad, states, hyper):
    apply_dense16(adamax_per_op_rule, param, grad, states, hyper)


class Adamax(LowPrecision, adamax.Adamax):
    """``torch.optim.Adamax`` on bfloat16/float16 arrays, ``rounding="per-op"`` (module
    docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The bfloat16, float16 or uint16 (raw bits) arrays to optimize (updated in place),
        or param groups (dicts with ``"params"``).
    lr : float, default: 0.002
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.999)
        Decay rates (β1, β2) of the first moment and of the infinity norm.
    eps : float, default: 1e-08
        Term ε, inside the maximum (or added after it with ``eps_mode="added"``).
    weight_decay : float, default: 0
        Weight decay λ: λθ added to the gradient (L2).
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
        The other options of :class:`npoptim.optim.adamax.Adamax` (torch's
        ``foreach``, ``differentiable``, ``fused``, ...); its convention switches only at
        torch's values.
    """

    roundings = ("per-op",)

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, *,
                 rounding="per-op", format=None, torch_cpu_lanes=None, maximize=False,
                 **torch_options):
        self._low_precision_defaults = dict(rounding=rounding, format=format,
                                            torch_cpu_lanes=torch_cpu_lanes)
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         maximize=maximize, **torch_options)

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        beta1, beta2 = group["betas"]
        hyper = record16(Adamax16Hyper, param, group,
                         weight_decay=rounded_scalar(group["weight_decay"],
                                                     self._code(param, group)),
                         one_minus_beta1=1 - beta1, beta2=beta2,
                         eps=rounded_scalar(group["eps"], self._code(param, group)),
                         neg_clr=-(group["lr"] / (1 - beta1 ** state["step"])),
                         maximize=bool(group["maximize"]),
                         decays=group["weight_decay"] != 0)
        _adamax_dense(param.view(np.uint16), grad.view(np.uint16),
                      self._flat_bits(state, group), hyper)
