"""Noisy SGD: optax.noisy_sgd 0.2.8 in float64, fed optax's own samples (two shapes, 24 steps,
eta, gamma, a schedule, maximize); the counter-based stream (values pinned, independent of
the call pattern); bad input; the jax stream's key in the state (NoisySGD and DPSGD: resumed
runs, optax's rng_key, checks on load)."""
import math

import numpy as np
import pytest
from hand_derived import close
from optax_compare import assert_same_trajectory, optax_trajectory, problem, schedule

from npoptim.kernels import counter_stream, jax_random
from npoptim.kernels.counter_stream import standard_normal
from npoptim.optim.dpsgd import DPSGD
from npoptim.optim.noisy_sgd import NoisySGD

# 0.37649691093446686, -1.5884905489711552, -0.8273625753891728, 1.1628913952618802
PINNED = ['0x1.818867fe08c3fp-2', '-0x1.96a7510dd6111p+0', '-0x1.a79c1146762f9p-1',
          '0x1.29b3401f73180p+0']


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


@pytest.mark.needs("optax", "jax")
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
    """The module docstring's algorithm with Python integers and floats, one IEEE operation at
    a time (as another language would): ln and cos_turns as its fixed formulas."""
    mask = 2 ** 64 - 1

    def mix(x):
        z = (x + 0x9E3779B97F4A7C15) & mask
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        return z ^ (z >> 31)

    def horner(coefficients, w):
        p = coefficients[-1]
        for c in coefficients[-2::-1]:
            p = p * w + c          # Python floats: a rounded multiply, then a rounded add
        return p

    def ln(x):
        m, e = math.frexp(x)
        if m < float.fromhex("0x1.6a09e667f3bcdp-1"):
            m, e = 2 * m, e - 1
        f = m - 1
        s = f / (2 + f)
        z = s * s
        r = z * horner([2 / (2 * k + 1) for k in range(1, 11)], z)
        hfsq = 0.5 * f * f
        return (e * float.fromhex("0x1.62e42fefa4000p-1")
                - ((hfsq - (s * (hfsq + r) + e * float.fromhex("-0x1.8432a1b0e2634p-43"))) - f))

    def cos_turns(u):
        v = 4 * u
        n = round(v)               # ties to even, as rint
        f = v - n
        w = f * f
        c = horner(counter_stream.COS_COEFFICIENTS, w)
        s = f * horner(counter_stream.SIN_COEFFICIENTS, w)
        return (c, -s, -c, s)[n % 4]

    key = mix(mix(mix(seed) ^ stream) ^ step)
    out = []
    for i in range(size):
        u1 = ((mix(key ^ (2 * i)) >> 11) + 1) * 2.0 ** -53
        u2 = (mix(key ^ (2 * i + 1)) >> 11) * 2.0 ** -53
        out.append(math.sqrt(-2.0 * ln(u1)) * cos_turns(u2))
    return out


def test_counter_stream_is_the_documented_algorithm():
    for key in ((0, 0, 1), (7, 3, 12), (2 ** 64 - 1, 2 ** 63, 2 ** 40)):
        np.testing.assert_array_equal(standard_normal(*key, 200), _reference_stream(*key, 200))
    # the first values (seed 0, parameter 0, step 1), pinned bit for bit
    assert [float(z).hex() for z in standard_normal(0, 0, 1, 4)] == PINNED
    np.testing.assert_array_equal(standard_normal(0, 0, 1, 2), standard_normal(0, 0, 1, 4)[:2])


def test_counter_stream_ln_and_cos_are_accurate():
    """The fixed formulas against long double (x87, 64-bit significand) references: ln within
    1 ulp, cos_turns within 2 ulp (exact zeros at 1/4, 3/4), over 10**5 inputs and the edges."""
    u = np.concatenate([np.linspace(2.0 ** -53, 1.0, 100_001), 2.0 ** -np.arange(54.0),
                        [counter_stream.SQRT_HALF, np.nextafter(counter_stream.SQRT_HALF, 0)]])
    wide = u.astype(np.longdouble)
    exact = np.log(wide)
    error = np.abs(counter_stream.ln(u).astype(np.longdouble) - exact)
    assert np.all(error <= np.spacing(np.abs(exact).astype(np.float64)))
    exact = np.cos(2 * np.longdouble("3.14159265358979323846264338327950288") * wide)
    error = np.abs(counter_stream.cos_turns(u).astype(np.longdouble) - exact)
    assert np.all(error <= 2 * np.spacing(np.abs(exact).astype(np.float64)) + 1e-18)
    np.testing.assert_array_equal(counter_stream.cos_turns(np.array([0.0, 0.25, 0.5, 0.75])),
                                  [1.0, 0.0, -1.0, 0.0])


def test_counter_stream_is_standard_normal():
    """10**6 draws: mean, variance, Kolmogorov-Smirnov against the normal CDF, tail counts."""
    scipy_stats = pytest.importorskip("scipy.stats")
    z = np.concatenate([standard_normal(11, s, 3, 250_000) for s in range(4)])
    n = z.size
    assert abs(z.mean()) < 5 / math.sqrt(n)                  # 5 sigma
    assert abs(z.var() - 1.0) < 5 * math.sqrt(2 / n)
    assert scipy_stats.kstest(z, "norm").pvalue > 1e-3
    for k in (2.0, 3.0, 4.0):
        expected = n * 2 * scipy_stats.norm.sf(k)
        assert abs(np.count_nonzero(np.abs(z) > k) - expected) < 5 * math.sqrt(expected)
    assert np.abs(z).max() < 8.6       # sqrt(-2 ln 2**-53): the stream's largest |z|


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


@pytest.mark.needs("optax", "jax")
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


# ------------------------------------------------ the jax stream's key, kept as optax keeps it
def _jax_stream_optimizer(cls, params):
    if cls is NoisySGD:
        return NoisySGD(params, lr=0.1, eta=0.5, seed=9, noise_stream="jax")
    return DPSGD(params, lr=0.1, l2_norm_clip=1.0, noise_multiplier=0.5, momentum=0.9,
                 seed=9, noise_stream="jax")


def _jax_stream_grads(cls, t):
    grads = [np.full(3, 0.1 * t), np.full((2, 1), -0.2)]
    return grads if cls is NoisySGD else [np.stack([g, 2 * g]) for g in grads]


def _counting_splits(monkeypatch):
    calls = []
    split = jax_random.split

    def counted(key, num=2):
        calls.append(num)
        return split(key, num)
    monkeypatch.setattr(jax_random, "split", counted)
    return calls


@pytest.mark.parametrize("cls", [NoisySGD, DPSGD])
@pytest.mark.parametrize("keep_key", [True, False])
def test_jax_stream_resumes_from_its_state_dict_with_one_split_a_step(cls, keep_key,
                                                                      monkeypatch):
    # resumed after 25 steps, three more steps are bit for bit the uninterrupted run's; with
    # the key in the state they split as a step does (NoisySGD: the step's key, then the
    # sample key per parameter; DPSGD: one split), not 25 times more. A state dict without
    # the key (written before npoptim kept it) still resumes, replaying the chain once.
    shapes, k = ((3,), (2, 1)), 25
    run = [np.zeros(s) for s in shapes]
    opt = _jax_stream_optimizer(cls, run)
    for t in range(k):
        opt.step(_jax_stream_grads(cls, t))
    saved = opt.state_dict()
    assert sorted(saved["state"][0]) == sorted(["step", "rng_key"] + (
        ["momentum_buffer"] if cls is DPSGD else []))
    assert saved["state"][0]["rng_key"].dtype == np.uint32
    assert "rng_key" not in saved["state"][1]
    if not keep_key:
        del saved["state"][0]["rng_key"]
    resumed = [p.copy() for p in run]
    other = _jax_stream_optimizer(cls, resumed)
    other.load_state_dict(saved)
    calls = _counting_splits(monkeypatch)
    per_step = 2 if cls is NoisySGD else 1
    for t in range(k, k + 3):
        opt.step(_jax_stream_grads(cls, t))
        before = len(calls)
        other.step(_jax_stream_grads(cls, t))
        replayed = k if t == k and not keep_key else 0   # k_k from key(seed)
        assert len(calls) - before == per_step + replayed
        for a, b in zip(run, resumed):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(other.state[0]["rng_key"], opt.state[0]["rng_key"])


@pytest.mark.needs("optax", "jax")
def test_jax_stream_key_is_optax_s_rng_key_and_advances_with_given_noise():
    # after each step the state's key is optax's AddNoiseState.rng_key; a step given its
    # noise still advances the key, so the stream is a function of the step count
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    w = [np.zeros(2)]
    opt = NoisySGD(w, lr=0.1, seed=7, noise_stream="jax")
    tx = optax.noisy_sgd(0.1, key=7)
    state = tx.init([np.zeros(2)])
    for t in range(3):
        opt.step([np.ones(2)], noise=[np.zeros(2)] if t == 1 else None)
        _, state = tx.update([np.ones(2)], state)
        np.testing.assert_array_equal(opt.state[0]["rng_key"],
                                      np.asarray(jax.random.key_data(state[0].rng_key)))


def test_jax_stream_key_is_checked_before_anything_changes():
    w, v = np.zeros(2), np.zeros(1)
    opt = NoisySGD([w, v], seed=3, noise_stream="jax")
    opt.step([np.ones(2), np.ones(1)])
    saved, params = opt.state_dict(), (w.copy(), v.copy())

    def unchanged():
        now = opt.state_dict()["state"]
        np.testing.assert_array_equal(now[0]["rng_key"], saved["state"][0]["rng_key"])
        assert [s["step"] for s in now.values()] == [1, 1]
        np.testing.assert_array_equal(w, params[0])
        np.testing.assert_array_equal(v, params[1])
    for key, match in ((np.zeros(2), "float64 of shape"), (np.zeros(3, np.uint32), r"\(3,\)"),
                       (np.array([0, 2 ** 32]), "int64 of shape"), (np.array([-1, 0]), "int64"),
                       ("ab", "<U2")):
        bad = opt.state_dict()
        bad["state"][0]["rng_key"] = key
        with pytest.raises(ValueError, match=r"state\[0\]\['rng_key'\] must be a jax.random key"
                           ".*" + match):
            opt.load_state_dict(bad)
        unchanged()
        opt.state[0]["rng_key"] = key   # set by hand: the step refuses it
        with pytest.raises(ValueError, match=r"state\[0\]\['rng_key'\].*" + match):
            opt.step([np.ones(2), np.ones(1)])
        opt.state[0]["rng_key"] = saved["state"][0]["rng_key"].copy()
        unchanged()
    misplaced = opt.state_dict()
    misplaced["state"][1]["rng_key"] = misplaced["state"][0]["rng_key"]
    with pytest.raises(ValueError, match=r"state\[1\] has entries"):
        opt.load_state_dict(misplaced)
    unchanged()
    counter = NoisySGD([np.zeros(2), np.zeros(1)], seed=3)
    for group in misplaced["param_groups"]:
        group["noise_stream"] = "counter"
    del misplaced["state"][1]["rng_key"]
    with pytest.raises(ValueError, match=r"state\[0\] has entries"):
        counter.load_state_dict(misplaced)   # the counter stream has no key
    assert counter.state == {}
    # an int64 key (a golden file's, or a hand-written one) is the same key
    loaded = opt.state_dict()
    loaded["state"][0]["rng_key"] = loaded["state"][0]["rng_key"].astype(np.int64)
    opt.load_state_dict(loaded)
    assert opt.state[0]["rng_key"].dtype == np.uint32
    unchanged()
