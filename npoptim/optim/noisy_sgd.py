r"""Noisy SGD: gradient descent with annealed Gaussian gradient noise (Neelakantan et al.,
"Adding Gradient Noise Improves Learning for Very Deep Networks", arXiv 1511.06807), as
``optax.noisy_sgd`` 0.2.8.

For each element, with gradient :math:`g` (negated when ``maximize``), step count :math:`t`
(per parameter, from 1) and a standard normal :math:`z`:

.. math::

    \sigma_t &= \sqrt{\eta / t^{\gamma}}\\
    \theta &\leftarrow \theta - \lr\,(g + \sigma_t z)

(the paper's :math:`\sigma_t^2 = \eta/(1+t)^\gamma` with its :math:`t` counted from 0, as
optax's ``add_noise`` counts; defaults ``eta=0.01``, ``gamma=0.55``).

Where :math:`z` comes from, so that a run is reproducible in any language:

* ``step(grads, noise=[...])``: the caller's samples, one array per parameter (``None`` where
  the gradient is ``None``), of the parameter's shape and dtype; this is how the cross-check
  feeds optax's own ``jax.random`` samples.
* otherwise, with ``noise_stream="counter"`` (the default), the counter-based stream of
  :mod:`npoptim.kernels.counter_stream`, keyed by ``(seed, parameter index, t)``: parameter
  ``k`` (its position in param-group order) at its step ``t`` takes values ``0 .. n-1`` of
  that stream, rounded to its dtype. ``seed`` is a hyperparameter (0), so golden files
  record it.
* with ``noise_stream="jax"``, the samples ``optax.noisy_sgd(..., key=seed)`` draws, from
  ``jax.random``'s threefry stream (:mod:`npoptim.kernels.jax_random`, no jax needed): keys
  ``k_0 = key(seed)``, and at step ``t`` ``(k_t, s) = split(k_{t-1})``, one key per
  parameter ``split(s, n_params)[k]``, and ``z = normal(that key, shape, dtype)`` (optax's
  ``add_noise`` and ``tree_utils.tree_random_like``). As optax's update takes one gradient
  per leaf, every step must give every parameter a gradient, and ``seed`` (in [0, 2**63))
  and ``noise_stream`` are one value for the whole optimizer; the step count is then the
  same for all (optax's ``count``). Matches optax in float64 to the last bits (the normals
  are within 4e-15 relative of jax's, from XLA's ``log1p``; see the kernel's docstring).
  The current key ``k_t`` is state, as in optax (``AddNoiseState.rng_key``): two uint32
  words in ``state[0]["rng_key"]``, the first parameter's state (where torch's LBFGS keeps
  its global state), so a run resumed from its ``state_dict`` splits once a step; a state
  dict without it (written before npoptim kept it) continues by replaying the chain from
  ``key(seed)`` once (:class:`OptaxKeyState`).

optax's learning rate has no default (npoptim: 1e-2). Dense gradients only (the noise is
dense).
"""
import math
from typing import NamedTuple

import numpy as np

from npoptim.kernels import jax_random
from npoptim.kernels.counter_stream import standard_normal
from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.optim.noise import (OptaxKeyState, check_noise, check_noise_stream, check_seed,
                                 jax_stream_step)
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import check_flag, check_nonnegative, flavored


class NoisySGDHyper(NamedTuple):
    """One step's hyperparameters of :func:`noisy_sgd_rule` (built by ``NoisySGD._update``)."""

    sign: float      # -1 with maximize, else 1
    sigma: float     # σ_t
    neg_lr: float    # -γ


@kernel
def noisy_sgd_rule(p, g, s, h):
    """One element of noisy SGD; ``s = (z,)``, the standard normal sample (read only)."""
    (z,) = s
    return p + h.neg_lr * (h.sign * g + h.sigma * z), s


@kernel
def _noisy_sgd_dense(param, grad, states, hyper):
    apply_dense(noisy_sgd_rule, param, grad, states, NoisySGDHyper(*hyper))


class NoisySGD(OptaxKeyState, Optimizer):
    """Noisy SGD (see the module docstring); ``step(grads, noise=None)``.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.01
        Learning rate γ.
    eta : float, default: 0.01
        Noise scale η: σ_t² = η/t^γ.
    gamma : float, default: 0.55
        Annealing exponent γ of the noise.
    seed : int, default: 0
        Seed of the noise stream (a hyperparameter: golden files record it).
    noise_stream : str, default: 'counter'
        ``"counter"`` (npoptim's counter-based stream) or ``"jax"`` (the samples of optax's
        ``jax.random`` key).
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"

    @flavored
    def __init__(self, params, lr=1e-2, eta=0.01, gamma=0.55, *, seed=0, noise_stream="counter",
                 maximize=False):
        self._noise = None
        super().__init__(params, dict(lr=lr, eta=eta, gamma=gamma, seed=seed,
                                      noise_stream=noise_stream, maximize=maximize))

    def _check_group(self, group):
        check_nonnegative(group, "lr", "eta", "gamma")
        check_noise_stream(self, group)   # first: the jax stream's seed range is its own
        check_seed(group["seed"])
        check_flag(group, "maximize")

    def step(self, grads=None, closure=None, *, noise=None):
        """As :meth:`Optimizer.step`; ``noise`` gives the standard normal samples (see the
        module docstring), checked with everything else before anything changes."""
        self._noise = None if noise is None else check_noise(self.params, noise)
        try:
            return super().step(grads, closure)
        finally:
            self._noise = self._next_key = None

    def _prepare(self, grads):
        prepared = super()._prepare(grads)
        if self.defaults["noise_stream"] == "jax":   # the key advances with given noise too
            _, sample = self._stream_keys(jax_stream_step(self, prepared), 2)
            if self._noise is None:
                self._noise = self._jax_noise(sample)
        if self._noise is not None:
            for _, index, _, _ in prepared:
                if self._noise[index] is None:
                    raise ValueError(f"noise[{index}] is None but grads[{index}] is not")
        return prepared

    def _jax_noise(self, sample):
        """optax's samples from a step's ``sample`` key (see the module docstring)."""
        keys = jax_random.split(sample, len(self.params))
        return [jax_random.normal(k, p.shape, p.dtype) for k, p in zip(keys, self.params)]

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        step = state["step"]
        if self._noise is not None:
            z = np.ascontiguousarray(self._noise[index]).reshape(-1).copy()
        else:
            z = standard_normal(group["seed"], index, step, param.size).astype(param.dtype)
        hyper = typed_record(NoisySGDHyper, param, sign=-1.0 if group["maximize"] else 1.0,
                             sigma=math.sqrt(group["eta"] / step ** group["gamma"]),
                             neg_lr=-group["lr"])
        _noisy_sgd_dense(param, grad, (z,), hyper)
