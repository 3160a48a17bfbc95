r"""SM3, "Square-root of Minima of Sums of Maxima of Squared-gradients Method" (Anil et al.,
"Memory-Efficient Adaptive Optimization", NeurIPS 2019, arXiv 1901.11150, SM3-II with the
cover of a tensor's rows, columns, ... (one accumulator per index of each axis)), as
``optax.sm3`` 0.2.8.

For a parameter with :math:`d \ge 2` axes, accumulators :math:`\mu_k` (one vector per axis
:math:`k`, of the axis' length), gradient :math:`g` (negated when ``maximize``), for each
element :math:`i = (i_1, \dots, i_d)`:

.. math::

    \nu_i &= g_i^2 + \min_k \mu_k[i_k]\\
    m_i &\leftarrow \beta\, m_i + (1-\beta)\, g_i / \sqrt{\nu_i + \epsilon}
          &&\text{(} g_i / \sqrt{\cdot} := 0 \text{ where } \nu_i = 0)\\
    \theta_i &\leftarrow \theta_i - \gamma\, m_i\\
    \mu_k[j] &\leftarrow \max_{i:\, i_k = j} \nu_i

A parameter with fewer than two axes has one accumulator of its own shape (``mu_0``, which
is then :math:`\nu` itself: Adagrad). :math:`\beta` is ``momentum`` (0.9), :math:`\epsilon`
1e-8.

Source: google-deepmind/optax ``optax/_src/transform.py`` ``scale_by_sm3`` (``b2=1``, the
paper's plain sums) and ``optax/_src/alias.py`` ``sm3``; the state keeps optax's names,
``mu_0, mu_1, ...`` (the accumulators) and ``nu`` (the momentum). optax's learning rate is a
constant (no schedules); npoptim's follows the param group's ``lr``, as every optimizer's.

The per-element arithmetic is one rule; the minimum and maximum over the cover (exact
operations, no rounding) are NumPy reductions over the axes. Dense gradients only.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import constant
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import check_flag, check_nonnegative, flavored


class SM3Hyper(NamedTuple):
    """One step's hyperparameters of :func:`sm3_rule` (built by ``SM3._update``)."""

    maximize: float           # 1 or 0
    momentum: float
    one_minus_momentum: float
    eps: float
    neg_lr: float             # -γ


@kernel
def sm3_rule(p, g, s, h):
    """One element of SM3; ``s = (nu, cover_min)``: the momentum and min_k mu_k[i_k].

    Returns the new momentum and :math:`\\nu_i` (the accumulators are its maxima)."""
    momentum, cover_min = s
    if h.maximize != 0:
        g = -g
    accumulator = g * g + cover_min
    scaled = constant(0.0, g)
    if accumulator > 0:
        scaled = g / np.sqrt(accumulator + h.eps)
    m = h.momentum * momentum + h.one_minus_momentum * scaled
    return p + h.neg_lr * m, (m, accumulator)


@kernel
def _sm3_dense(param, grad, states, hyper):
    apply_dense(sm3_rule, param, grad, states, SM3Hyper(*hyper))


class SM3(Optimizer):
    """SM3 (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.01
        Learning rate γ.
    momentum : float, default: 0.9
        Momentum β of the normalized gradient.
    eps : float, default: 1e-08
        Term ε added inside the square root.
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"

    @flavored
    def __init__(self, params, lr=1e-2, momentum=0.9, eps=1e-8, *, maximize=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, eps=eps, maximize=maximize))

    def _check_group(self, group):
        check_nonnegative(group, "lr", "eps")
        momentum = group["momentum"]
        if isinstance(momentum, bool) or not isinstance(momentum, (int, float)) \
                or not 0.0 <= momentum < 1.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        check_flag(group, "maximize")

    def _state_names(self, group):
        return ("nu",)

    def _state_shapes(self, param, group):
        shapes = {"nu": param.shape}
        if param.ndim >= 2:
            shapes.update({f"mu_{k}": (n,) for k, n in enumerate(param.shape)})
        else:
            shapes["mu_0"] = param.shape
        return shapes

    def _update(self, param, grad, state, group, index, shape):
        if len(shape) >= 2:
            axes = [state[f"mu_{k}"].reshape([n if j == k else 1 for j in range(len(shape))])
                    for k, n in enumerate(shape)]
            cover_min = np.broadcast_to(np.minimum.reduce(np.broadcast_arrays(*axes)),
                                        shape).reshape(-1).copy()
        else:
            cover_min = state["mu_0"].reshape(-1).copy()
        hyper = typed_record(SM3Hyper, param, maximize=bool(group["maximize"]),
                             momentum=group["momentum"],
                             one_minus_momentum=1 - group["momentum"], eps=group["eps"],
                             neg_lr=-group["lr"])
        accumulator = cover_min   # the rule overwrites it with nu_i
        _sm3_dense(param, grad, (state["nu"].reshape(-1), accumulator), hyper)
        if len(shape) >= 2:
            full = accumulator.reshape(shape)
            for k in range(len(shape)):
                others = tuple(j for j in range(len(shape)) if j != k)
                state[f"mu_{k}"][...] = full.max(axis=others, initial=0.0)  # nu >= 0
        else:
            state["mu_0"].reshape(-1)[...] = accumulator
