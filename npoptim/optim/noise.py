"""The noise of the noisy optimizers (NoisySGD, DPSGD, Sophia): the checks of their seed and
of noise arrays the caller gives, the two noise streams (``"counter"``, npoptim's own, and
``"jax"``, optax's keys split step by step) and the jax stream's key kept in the state as
optax keeps it.
"""
import numbers

import numpy as np

from npoptim.kernels import jax_random


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
