"""Noisy SGD: optax.noisy_sgd 0.2.8 in float64, fed optax's own samples (two shapes, 24 steps,
eta, gamma, a schedule, maximize); the counter-based stream (values pinned, independent of
the call pattern); bad input."""
import math

import numpy as np
import pytest
from hand_derived import close
from optax_compare import assert_same_trajectory, optax_trajectory, problem, schedule

from npoptim.kernels.counter_stream import standard_normal
from npoptim.optim.noisy_sgd import NoisySGD

PINNED = [0.37649691093446686, -1.5884905489711552, -0.8273625753891728, 1.1628913952618802]


def _optax_noise(params, steps, eta, gamma, key):
    """optax's samples z_t: add_noise on zero gradients gives sigma_t z_t."""
    import optax
    zeros = [[np.zeros_like(p) for p in params] for _ in range(steps)]
    moved = optax_trajectory(lambda: optax.chain(optax.add_noise(eta, gamma, key),
                                                 optax.scale_by_learning_rate(-1.0)),
                             [np.zeros_like(p) for p in params], zeros)
    previous = [np.zeros_like(p) for p in params]
    out = []
    for t, now in enumerate(moved):
        sigma = np.sqrt(eta / (t + 1) ** gamma)
        out.append([(a - b) / sigma for a, b in zip(now, previous)])
        previous = now
    return out


@pytest.mark.parametrize("eta, gamma", [(0.01, 0.55), (0.3, 1.0)])
def test_matches_optax_given_its_samples(eta, gamma):
    optax = pytest.importorskip("optax")
    params, grads = problem(0)
    lrs, optax_lrs = schedule(0.05)
    noise = _optax_noise(params, len(grads), eta, gamma, key=3)
    expected = optax_trajectory(lambda: optax.noisy_sgd(optax_lrs, eta=eta, gamma=gamma, key=3),
                                params, [[-g for g in gs] for gs in grads])
    opt = NoisySGD(params, lr=lrs[0], eta=eta, gamma=gamma, maximize=True)
    actual = []
    for t, step_grads in enumerate(grads):
        opt.param_groups[0]["lr"] = lrs[t]
        opt.step(step_grads, noise=noise[t])
        actual.append([p.copy() for p in params])
    assert_same_trajectory(actual, expected)


def _reference_stream(seed, stream, step, size):
    """The module docstring's algorithm with Python integers (as another language would)."""
    mask = 2 ** 64 - 1

    def mix(x):
        z = (x + 0x9E3779B97F4A7C15) & mask
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        return z ^ (z >> 31)
    key = mix(mix(mix(seed) ^ stream) ^ step)
    out = []
    for i in range(size):
        u1 = ((mix(key ^ (2 * i)) >> 11) + 1) * 2.0 ** -53
        u2 = (mix(key ^ (2 * i + 1)) >> 11) * 2.0 ** -53
        out.append(math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2))
    return out


def test_counter_stream_is_the_documented_algorithm():
    for key in ((0, 0, 1), (7, 3, 12), (2 ** 64 - 1, 2 ** 63, 2 ** 40)):
        close(standard_normal(*key, 50), _reference_stream(*key, 50), rtol=1e-15)
    # the first values (seed 0, parameter 0, step 1), pinned
    close(standard_normal(0, 0, 1, 4), PINNED, rtol=1e-15)
    np.testing.assert_array_equal(standard_normal(0, 0, 1, 2), standard_normal(0, 0, 1, 4)[:2])


def test_stream_noise_is_sigma_times_the_stream():
    w0 = np.array([[1.0, 2.0], [3.0, 4.0]])
    v0 = np.array([0.5])
    w, v = w0.copy(), v0.copy()
    opt = NoisySGD([w, v], lr=0.1, eta=0.04, gamma=0.5, seed=7)
    g = np.full((2, 2), 0.5)
    opt.step([g, None])       # v has no gradient: its step count stays 0
    opt.step([g, np.ones(1)])
    z1 = standard_normal(7, 0, 1, 4).reshape(2, 2)
    z2 = standard_normal(7, 0, 2, 4).reshape(2, 2)
    close(w, w0 - 0.1 * (g + 0.2 * z1) - 0.1 * (g + np.sqrt(0.04 / 2 ** 0.5) * z2))
    close(v, v0 - 0.1 * (1.0 + 0.2 * standard_normal(7, 1, 1, 1)))


def test_float32_rounds_the_stream_once():
    w = np.zeros(3, np.float32)
    NoisySGD([w], lr=1.0, eta=1.0).step([np.zeros(3, np.float32)])
    np.testing.assert_array_equal(w, -standard_normal(0, 0, 1, 3).astype(np.float32))


@pytest.mark.parametrize("kw, match", [
    (dict(lr=-1e-3), "learning rate"), (dict(eta=-1.0), "eta"), (dict(gamma=-1.0), "gamma"),
    (dict(seed=-1), "seed"), (dict(seed=1.5), "seed"), (dict(seed=True), "seed")])
def test_bad_hyperparameters_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        NoisySGD([np.zeros(3)], **kw)


def test_bad_noise_changes_nothing():
    w = np.array([1.0, 2.0, 3.0])
    opt = NoisySGD([w])
    for noise, match in (([np.ones(4)], "shape"), ([np.ones(3, np.float32)], "dtype"),
                         ([None], "None"), ([np.ones(3), np.ones(3)], "arrays for")):
        with pytest.raises(ValueError, match=match):
            opt.step([np.ones(3)], noise=noise)
    np.testing.assert_array_equal(w, [1.0, 2.0, 3.0])
    assert opt.state == {}


@pytest.mark.parametrize("eta, gamma, key", [(0.01, 0.55, 0), (0.3, 1.0, 42)])
def test_jax_stream_matches_optax_itself(eta, gamma, key):
    # noise_stream="jax": npoptim draws optax's own samples; 24 steps under a schedule
    optax = pytest.importorskip("optax")
    params, grads = problem(2)
    lrs, optax_lrs = schedule(0.05)
    expected = optax_trajectory(lambda: optax.noisy_sgd(optax_lrs, eta=eta, gamma=gamma,
                                                        key=key), params, grads)
    opt = NoisySGD(params, lr=lrs[0], eta=eta, gamma=gamma, seed=key, noise_stream="jax")
    actual = []
    for t, step_grads in enumerate(grads):
        opt.param_groups[0]["lr"] = lrs[t]
        opt.step(step_grads)
        actual.append([p.copy() for p in params])
    assert_same_trajectory(actual, expected)


def test_jax_stream_continues_after_a_state_dict_round_trip():
    a = [np.zeros(3), np.zeros((2, 2))]
    opt = NoisySGD(a, lr=1.0, eta=1.0, seed=5, noise_stream="jax")
    for _ in range(3):
        opt.step([np.zeros(3), np.zeros((2, 2))])
    b = [p.copy() for p in a]
    other = NoisySGD(b, lr=1.0, eta=1.0, seed=5, noise_stream="jax")
    other.load_state_dict(opt.state_dict())
    opt.step([np.zeros(3), np.zeros((2, 2))])
    other.step([np.zeros(3), np.zeros((2, 2))])
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_jax_stream_refuses_what_optax_cannot_do():
    w, v = np.zeros(2), np.zeros(1)
    opt = NoisySGD([w, v], noise_stream="jax")
    with pytest.raises(ValueError, match=r"every parameter.*grads\[1\]"):
        opt.step([np.ones(2), None])
    assert opt.state == {} and not w.any()
    with pytest.raises(ValueError, match="whole optimizer"):
        opt.add_param_group({"params": [np.zeros(1)], "seed": 3})
    opt.step([np.ones(2), np.ones(1)])
    opt.add_param_group({"params": [np.zeros(1)]})
    with pytest.raises(ValueError, match="one step count"):
        opt.step([np.ones(2), np.ones(1), np.ones(1)])
    for kw, match in ((dict(noise_stream="numpy"), "noise_stream"),
                      (dict(noise_stream="jax", seed=2 ** 63), "2\\*\\*63")):
        with pytest.raises(ValueError, match=match):
            NoisySGD([np.zeros(1)], **kw)
