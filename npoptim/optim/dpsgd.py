r"""DP-SGD: differentially private SGD (Abadi et al., "Deep Learning with Differential Privacy",
CCS 2016, arXiv 1607.00133), as ``optax.contrib.dpsgd`` 0.2.8.

The step takes *per-example* gradients: for each parameter an array of shape
``(B, *param.shape)``, example ``b`` of the batch in row ``b`` (what ``jax.vmap`` of a
gradient, or torch's ``func.vmap(grad)``, returns). With :math:`G_{b}` the gradients of example
:math:`b` over every parameter, clipping norm :math:`C` (``l2_norm_clip``), noise multiplier
:math:`\nu`, momentum :math:`\mu` and a standard normal :math:`z` per element:

.. math::

    m_b &= \min\big(C / \|G_b\|,\ 1\big)   \quad(1 \text{ where } C/\|G_b\| \text{ is NaN})\\
    g &= \Big(\textstyle\sum_b m_b G_b + C\nu\, z\Big) / B\\
    b &\leftarrow g + \mu b  \qquad d = g + \mu b \;\text{(nesterov)}\quad\text{else}\quad
    d = b\\
    \theta &\leftarrow \theta - \gamma\, d

:math:`\|G_b\|` is the global norm of example :math:`b`'s gradients over every parameter of
every group (a parameter whose gradient is ``None`` takes no part), so ``l2_norm_clip``,
``noise_multiplier`` and ``seed`` are one value for the whole optimizer. This is
google-deepmind/optax ``optax/contrib/_privacy.py`` ``dpsgd``: ``differentially_private_aggregate``
(``per_example_global_norm_clip`` of ``optax/transforms/_clipping.py``, then
``(g + noise_std * normal) / bsize``), ``trace(decay=momentum, nesterov)``, then
``scale_by_learning_rate``. optax's ``momentum=None`` (no trace) is npoptim's ``momentum=0``;
the buffer starts at zero (so its first step is the gradient, as torch's first step) and is
kept as ``momentum_buffer`` (torch's and Opacus's name; optax's ``TraceState.trace``) only
when ``momentum`` is not 0. optax's ``learning_rate`` and ``seed`` have no defaults (npoptim:
1e-2 and 0).

Where :math:`z` comes from, as for :class:`~npoptim.optim.noisy_sgd.NoisySGD`:

* ``step(per_example_grads, noise=[...])``: the caller's standard normal samples, one array
  per parameter of the parameter's shape and dtype (``None`` where the gradient is ``None``);
  this is how the cross-check feeds optax's own ``jax.random`` samples;
* otherwise, with ``noise_stream="counter"`` (the default), the counter-based stream of
  :mod:`npoptim.kernels.counter_stream`, keyed by ``(seed, parameter index, t)`` with ``t``
  the parameter's step count (from 1), rounded to the parameter's dtype;
* with ``noise_stream="jax"``, the samples ``optax.contrib.dpsgd(..., seed)`` draws from
  ``jax.random``'s threefry stream (:mod:`npoptim.kernels.jax_random`, no jax needed):
  ``k_0 = key(seed)``, and at step ``t`` ``(k_t, r_0, .., r_{n-1}) = split(k_{t-1}, n + 1)``
  over the ``n`` parameters, parameter ``k`` taking ``normal(r_k, shape, dtype)``
  (``differentially_private_aggregate``). Every step must give every parameter a gradient
  (optax's update takes one per leaf), ``seed`` in [0, 2**63). The current key ``k_t`` is
  state, as optax's ``rng_key``: ``state[0]["rng_key"]``, two uint32 words (see
  :class:`~npoptim.optim.noise.OptaxKeyState`), so a resumed run splits once a step.

Dense gradients only (the noise is dense).
"""
import math
from typing import NamedTuple

import numpy as np

from npoptim.kernels import jax_random
from npoptim.kernels.counter_stream import standard_normal
from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.reduction import grad_sumsq
from npoptim.optim.noise import (OptaxKeyState, check_noise, check_noise_stream, check_seed,
                                 jax_stream_step)
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import check_flag, check_nonnegative, flavored, is_real

_GLOBAL = ("l2_norm_clip", "noise_multiplier", "seed")


class DPSGDHyper(NamedTuple):
    """One step's hyperparameters of the DP-SGD rules (built by ``DPSGD._update``)."""

    noise_std: float   # C ν
    batch: float       # B
    momentum: float
    nesterov: float    # 1 or 0
    neg_lr: float      # -γ


@kernel
def _private_mean(clipped_sum, z, h):
    """The noised mean of the clipped per-example gradients (optax's ``(g + std z) / B``)."""
    return (clipped_sum + h.noise_std * z) / h.batch


@kernel
def dpsgd_rule(p, g, s, h):
    """One element of DP-SGD without momentum; ``g`` is the clipped sum, ``s = (z,)``."""
    (z,) = s
    return p + h.neg_lr * _private_mean(g, z, h), s


@kernel
def dpsgd_momentum_rule(p, g, s, h):
    """One element of DP-SGD with momentum; ``s = (z, momentum_buffer)``."""
    z, buf = s
    g = _private_mean(g, z, h)
    buf = g + h.momentum * buf
    direction = g + h.momentum * buf if h.nesterov != 0 else buf
    return p + h.neg_lr * direction, (z, buf)


@kernel
def _dpsgd_dense(param, grad, states, hyper):
    apply_dense(dpsgd_rule, param, grad, states, DPSGDHyper(*hyper))


@kernel
def _dpsgd_momentum_dense(param, grad, states, hyper):
    apply_dense(dpsgd_momentum_rule, param, grad, states, DPSGDHyper(*hyper))


@kernel
def clipped_sum(per_example, multipliers, out):
    """``out[j] = sum_b multipliers[b] * per_example[b, j]``, summed over ``b`` in order."""
    batch, n = per_example.shape
    for j in range(n):
        acc = out[j] - out[j]
        for b in range(batch):
            acc += multipliers[b] * per_example[b, j]
        out[j] = acc


def clip_multipliers(per_example_sumsq, l2_norm_clip):
    """optax's ``per_example_global_norm_clip`` multipliers ``min(C / ‖G_b‖, 1)``, 1 where the
    ratio is NaN (``C = 0`` and a zero gradient), from the per-example ``‖G_b‖²``."""
    norms = np.sqrt(per_example_sumsq)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = l2_norm_clip / norms
    return np.nan_to_num(np.minimum(ratio, 1.0), nan=1.0)


class DPSGD(OptaxKeyState, Optimizer):
    """DP-SGD (see the module docstring); ``step(per_example_grads, noise=None)``.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.01
        Learning rate γ.
    l2_norm_clip : float, default: 1.0
        Clipping norm C of each example's gradients (over every parameter).
    noise_multiplier : float, default: 1.0
        Noise multiplier ν: the noise's standard deviation is Cν.
    momentum : float, default: 0.0
        Momentum μ (0: none).
    nesterov : bool, default: False
        Nesterov momentum.
    seed : int, default: 0
        Seed of the noise stream.
    noise_stream : str, default: 'counter'
        ``"counter"`` (npoptim's counter-based stream) or ``"jax"`` (the samples of optax's
        ``jax.random`` key).
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"
    per_example_grads = True

    @flavored
    def __init__(self, params, lr=1e-2, l2_norm_clip=1.0, noise_multiplier=1.0, momentum=0.0,
                 nesterov=False, *, seed=0, noise_stream="counter"):
        self._noise = None
        self._multipliers = None
        self._batch = 0
        super().__init__(params, dict(lr=lr, l2_norm_clip=l2_norm_clip,
                                      noise_multiplier=noise_multiplier, momentum=momentum,
                                      nesterov=nesterov, seed=seed, noise_stream=noise_stream))

    def _check_group(self, group):
        check_nonnegative(group, "lr", "momentum")
        for name in ("l2_norm_clip", "noise_multiplier"):
            value = group[name]
            if (not is_real(value)
                    or not 0.0 <= value < math.inf):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        check_noise_stream(self, group, _GLOBAL + ("noise_stream",))   # first: the jax seed
        check_seed(group["seed"])
        check_flag(group, "nesterov")
        if group["nesterov"] and group["momentum"] == 0:
            raise ValueError("Nesterov momentum requires a momentum")

    def _state_names(self, group):
        return ("momentum_buffer",) if group["momentum"] != 0 else ()

    def step(self, grads=None, closure=None, *, noise=None):
        """As :meth:`Optimizer.step`, with per-example gradients (shape ``(B, *param.shape)``,
        the same ``B`` for every parameter); ``noise`` gives the standard normal samples (see
        the module docstring). Everything is checked before anything changes."""
        self._noise = None if noise is None else check_noise(self.params, noise)
        try:
            return super().step(grads, closure)
        finally:
            self._noise = self._next_key = None

    def _prepare_grad(self, grad, param, group, where):
        """Per-example gradients as a C-contiguous ``(B, n)`` array, or None."""
        if grad is None:
            return None
        if not isinstance(grad, np.ndarray):
            raise TypeError(f"{where}: DPSGD takes per-example gradients, a NumPy array of "
                            f"shape (batch, *param.shape), or None; got {type(grad).__name__}")
        grad = np.asarray(grad)
        if grad.ndim != param.ndim + 1 or grad.shape[1:] != param.shape or grad.shape[0] < 1:
            raise ValueError(f"{where}: per-example gradients must have shape (batch, "
                             f"*{param.shape}) with batch >= 1, got {grad.shape}")
        if grad.dtype != param.dtype:
            raise ValueError(f"{where}: gradient has dtype {grad.dtype}, the parameter has "
                             f"{param.dtype}")
        return np.array(grad.reshape(grad.shape[0], param.size), order="C")

    def _prepare(self, grads):
        prepared = super()._prepare(grads)
        batches = {grad.shape[0] for _, _, _, grad in prepared}
        if len(batches) > 1:
            raise ValueError(f"per-example gradients have different batch sizes "
                             f"{sorted(batches)}; every parameter's must be the same")
        self._batch = batches.pop() if batches else 0
        if self.defaults["noise_stream"] == "jax":   # the key advances with given noise too
            keys = self._stream_keys(jax_stream_step(self, prepared), len(self.params) + 1)
            if self._noise is None:
                self._noise = [jax_random.normal(k, p.shape, p.dtype)
                               for k, p in zip(keys[1:], self.params)]
        if self._noise is not None:
            for _, index, _, _ in prepared:
                if self._noise[index] is None:
                    raise ValueError(f"noise[{index}] is None but grads[{index}] is not")
        return [(group, index, param, grad.reshape(-1)) for group, index, param, grad
                in prepared]

    def _apply(self, prepared):
        """The clipping multipliers from every parameter's per-example gradients, then each
        parameter."""
        if not prepared:
            return
        batch = self._batch
        sumsq = np.zeros(batch)
        for _, _, param, grad in prepared:   # fixed order: param-group order
            rows = grad.reshape(batch, param.size)
            for b in range(batch):
                sumsq[b] += float(grad_sumsq(rows[b]))
        self._multipliers = clip_multipliers(sumsq, self.defaults["l2_norm_clip"])
        super()._apply(prepared)

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        per_example = grad.reshape(self._batch, param.size)
        summed = np.zeros_like(param)
        clipped_sum(per_example, self._multipliers.astype(param.dtype), summed)
        if self._noise is not None:
            z = np.ascontiguousarray(self._noise[index]).reshape(-1).copy()
        else:
            z = standard_normal(group["seed"], index, state["step"], param.size).astype(
                param.dtype)
        momentum = group["momentum"]
        hyper = typed_record(DPSGDHyper, param,
                             noise_std=group["l2_norm_clip"] * group["noise_multiplier"],
                             batch=per_example.shape[0], momentum=momentum,
                             nesterov=1.0 if group["nesterov"] else 0.0, neg_lr=-group["lr"])
        if momentum != 0:
            _dpsgd_momentum_dense(param, summed, (z, state["momentum_buffer"].reshape(-1)),
                                  hyper)
        else:
            _dpsgd_dense(param, summed, (z,), hyper)
