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
import numbers
from typing import NamedTuple

import numpy as np

from npoptim.flavors import flavored
from npoptim.kernels import jax_random
from npoptim.kernels.counter_stream import standard_normal
from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.optim.optimizer import Optimizer, check_nonnegative, typed_record
from npoptim.optim.variants import check_flag


def check_seed(seed):
    """Raise unless ``seed`` is an integer key of the counter stream, in [0, 2**64)."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) \
            or not 0 <= seed < 2 ** 64:
        raise ValueError(f"seed must be an integer in [0, 2**64), got {seed!r}")


def check_noise(params, noise, name="noise"):
    """The caller's per-parameter arrays ``name`` (noise samples, or another step input) as a
    list, checked: one array (or None) per parameter, of its shape and dtype."""
    if isinstance(noise, np.ndarray) or not hasattr(noise, "__iter__"):
        raise ValueError(f"{name} must be a list with one array (or None) per parameter")
    noise = list(noise)
    if len(noise) != len(params):
        raise ValueError(f"{name} has {len(noise)} arrays for {len(params)} parameters")
    for k, (z, p) in enumerate(zip(noise, params)):
        if z is None:
            continue
        if not isinstance(z, np.ndarray) or z.shape != p.shape or z.dtype != p.dtype:
            raise ValueError(f"{name}[{k}] must be an array of shape {p.shape} and dtype "
                             f"{p.dtype}")
    return noise


NOISE_STREAMS = ("counter", "jax")


def check_noise_stream(optimizer, group, global_names=("noise_stream",)):
    """Raise unless ``group["noise_stream"]`` is one of :data:`NOISE_STREAMS`, with
    ``global_names`` (and, for the jax stream, ``seed``) as in the constructor."""
    if group["noise_stream"] not in NOISE_STREAMS:
        raise ValueError(f"noise_stream must be one of {', '.join(map(repr, NOISE_STREAMS))}, "
                         f"got {group['noise_stream']!r}")
    if group["noise_stream"] == "jax":
        jax_random.check_jax_seed(group["seed"])
        global_names = tuple(global_names) + ("seed",)
    for name in global_names:
        if group[name] != optimizer.defaults[name]:
            raise ValueError(f"{name} is one value for the whole optimizer (one clipping norm "
                             "or noise stream over every parameter): set it in the constructor, "
                             "not per group")


#: The state entry holding the jax stream's current key, optax's name (``AddNoiseState`` and
#: ``DifferentiallyPrivateAggregateState`` keep ``rng_key``); in the first parameter's state.
RNG_KEY = "rng_key"


def check_rng_key(value, where):
    """``value`` as a jax.random key (``jax.random.key_data``: two uint32 words, shape
    ``(2,)``); raises unless it is two integers in [0, 2**32)."""
    key = np.asarray(value)
    if key.shape != (2,) or key.dtype.kind not in "iu" or not np.all(
            (key >= 0) & (key <= 0xFFFFFFFF)):
        raise ValueError(f"{where} must be a jax.random key, two uint32 words of shape (2,) "
                         f"(jax.random.key_data), got {key.dtype} of shape {key.shape}: "
                         f"{value!r}")
    return key.astype(np.uint32)


def replayed_key(seed, steps):
    """``k_steps`` of the chain ``k_0 = key(seed)``, ``k_t = split(k_{t-1})[0]``: the
    key that optax's noisy transforms keep after ``steps`` steps (``add_noise`` and
    ``differentially_private_aggregate`` both keep the first key of a split of the previous
    key, whatever the split's size, and draw the step's noise from the others)."""
    key = jax_random.key(seed)
    for _ in range(steps):
        key = jax_random.split(key, 1)[0]
    return key


class OptaxKeyState:
    """The jax stream's key as optax keeps it (a mixin before :class:`Optimizer`): after step
    ``t``, ``state[0]["rng_key"] = k_t`` (:data:`RNG_KEY`), saved and loaded with the state
    (checked on load: two uint32 words), so that every step, resumed ones included, splits
    once. A state without it (a state dict written before npoptim kept the key) continues
    from :func:`replayed_key` (``t - 1`` splits, once)."""

    _next_key = None

    def _stream_keys(self, t, num):
        """``split(k_{t-1}, num)`` for step ``t`` (from 1); its first key, ``k_t``, becomes
        the state's key once the step is applied."""
        entry = self.state.get(0, {})
        if RNG_KEY in entry:
            key = check_rng_key(entry[RNG_KEY], f"state[0]['{RNG_KEY}']")
        else:
            key = replayed_key(self.defaults["seed"], t - 1)
        keys = jax_random.split(key, num)
        self._next_key = keys[0]
        return keys

    def _apply(self, prepared):
        super()._apply(prepared)
        if self._next_key is not None and 0 in self.state:
            self.state[0][RNG_KEY] = self._next_key
        self._next_key = None

    def _load_param_state(self, entry, param, group, where):
        key = None
        if (isinstance(entry, dict) and RNG_KEY in entry and group["noise_stream"] == "jax"
                and param is self.params[0]):
            key = check_rng_key(entry[RNG_KEY], f"{where}['{RNG_KEY}']")
            entry = {name: value for name, value in entry.items() if name != RNG_KEY}
        out = super()._load_param_state(entry, param, group, where)
        if key is not None:
            out[RNG_KEY] = key
        return out


def jax_stream_step(optimizer, prepared):
    """The step count ``t`` (from 1) of a jax-stream step of ``optimizer``; raises unless
    every parameter has a gradient and the same step count (optax's one ``count``)."""
    params = optimizer.params
    if len(prepared) != len(params):
        missing = sorted(set(range(len(params))) - {index for _, index, _, _ in prepared})
        raise ValueError(f"noise_stream='jax' needs a gradient for every parameter (optax's "
                         f"update takes one per leaf); grads{missing} are None")
    steps = {int(optimizer.state[i]["step"]) if i in optimizer.state else 0
             for i in range(len(params))}
    if len(steps) > 1:
        raise ValueError(f"noise_stream='jax' needs one step count for every parameter (optax's "
                         f"count), got {sorted(steps)} (a group added after stepping?)")
    return steps.pop() + 1


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
    """Noisy SGD (see the module docstring): ``lr``, ``eta``, ``gamma``, ``seed``,
    ``noise_stream``, ``maximize``; ``step(grads, noise=None)``."""

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
