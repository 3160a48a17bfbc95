"""DP-SGD: optax.contrib.dpsgd 0.2.8 in float64 over 24 steps on two shapes, per-example
gradients some of which are clipped: noise_multiplier 0 (exact, no noise), and with noise fed
optax's own jax.random samples (momentum, nesterov, an lr schedule); the clipping and the
counter stream hand-derived; bad input."""
import numpy as np
import pytest
from hand_derived import close
from optax_contrib import (SHAPES, STEPS, assert_trajectories_close, lr_schedule, needs_optax,
                           optax, run_optax)

from npoptim.kernels.counter_stream import standard_normal
from npoptim.optim.dpsgd import DPSGD

BATCH = 5


def per_example_problem(seed=0, shapes=SHAPES, batch=BATCH):
    """Initial params and ``grad(t, params)``: per-example gradients ``(B, *shape)`` of
    quadratics with per-example centres and scales (from 0.2 to 3: some examples' norms are
    above the clipping norms used, some below)."""
    rng = np.random.default_rng(seed)
    params = [rng.uniform(-1, 1, s) for s in shapes]
    centres = [rng.standard_normal((batch,) + s) for s in shapes]
    scales = np.linspace(0.2, 3.0, batch)

    def grad(t, ps):
        return [scales.reshape((-1,) + (1,) * p.ndim) * (p[None] - c) * (1 + 0.1 * t % 3)
                for p, c in zip(ps, centres)]
    return params, grad


def optax_samples(params, seed, steps=STEPS, batch=BATCH):
    """optax's standard normal samples z_t: dpsgd on zero per-example gradients (lr 1, no
    momentum) moves the params by -(C nu z_t) / B."""
    clip, nu = 2.0, 0.5
    zeros = [np.zeros((batch,) + p.shape) for p in params]
    moved = run_optax(lambda lr: optax.contrib.dpsgd(1.0, clip, nu, seed),
                      [np.zeros_like(p) for p in params], lambda t, ps: zeros, steps)
    previous = [np.zeros_like(p) for p in params]
    out = []
    for now in moved:
        out.append([-(a - b) * batch / (clip * nu) for a, b in zip(now, previous)])
        previous = now
    return out


def run_dpsgd(params, grad, noise=None, lrs=None, **kw):
    ps = [p.copy() for p in params]
    opt = DPSGD(ps, **kw)
    out = []
    for t in range(STEPS):
        if lrs is not None:
            opt.param_groups[0]["lr"] = lrs[t]
        opt.step(grad(t, ps), noise=None if noise is None else noise[t])
        out.append([p.copy() for p in ps])
    return out, opt


@needs_optax
@pytest.mark.parametrize("momentum, nesterov", [(None, False), (0.9, False), (0.8, True)])
def test_matches_optax_without_noise(momentum, nesterov):
    params, grad = per_example_problem(0)
    expected = run_optax(lambda lr: optax.contrib.dpsgd(0.05, 1.5, 0.0, 3, momentum=momentum,
                                                        nesterov=nesterov), params, grad)
    actual, _ = run_dpsgd(params, grad, lr=0.05, l2_norm_clip=1.5, noise_multiplier=0.0,
                          momentum=momentum or 0.0, nesterov=nesterov)
    assert_trajectories_close(actual, expected)


@needs_optax
@pytest.mark.parametrize("momentum, nesterov, clip, nu", [(None, False, 1.0, 1.1),
                                                          (0.9, True, 4.0, 0.3)])
def test_matches_optax_given_its_noise_under_a_schedule(momentum, nesterov, clip, nu):
    params, grad = per_example_problem(1)
    noise = optax_samples(params, seed=7)
    lrs = lr_schedule(lr=0.05)
    expected = run_optax(lambda lr: optax.contrib.dpsgd(lr, clip, nu, 7, momentum=momentum,
                                                        nesterov=nesterov),
                         params, grad, lrs=lrs)
    actual, _ = run_dpsgd(params, grad, noise, lrs=lrs, lr=lrs[0], l2_norm_clip=clip,
                          noise_multiplier=nu, momentum=momentum or 0.0, nesterov=nesterov)
    assert_trajectories_close(actual, expected)


def test_clipping_and_stream_hand_derived():
    # two parameters, batch 2: example 0 has global norm 5 (clipped to 2: factor 0.4),
    # example 1 norm 1 (kept)
    w, v = np.zeros(2), np.zeros(1)
    opt = DPSGD([w, v], lr=0.5, l2_norm_clip=2.0, noise_multiplier=0.25, seed=9)
    gw = np.array([[3.0, 0.0], [0.0, 0.6]])
    gv = np.array([[4.0], [0.8]])
    opt.step([gw, gv])
    std = 2.0 * 0.25
    close(w, -0.5 * (np.array([1.2, 0.6]) + std * standard_normal(9, 0, 1, 2)) / 2)
    close(v, -0.5 * (np.array([1.6 + 0.8]) + std * standard_normal(9, 1, 1, 1)) / 2)
    # momentum: the buffer is g, then g + mu b; the state has torch's name
    w = np.zeros(2)
    opt = DPSGD([w], lr=1.0, l2_norm_clip=10.0, noise_multiplier=0.0, momentum=0.5)
    opt.step([np.array([[1.0, 2.0]])])
    opt.step([np.array([[1.0, 2.0]])])
    close(opt.state[0]["momentum_buffer"], [1.5, 3.0])
    close(w, [-2.5, -5.0])


def test_zero_clip_and_zero_gradient_keep_the_example():
    # C = 0 with a zero example: optax's multiplier 0/0 is NaN, taken as 1 (the sum is 0)
    w = np.ones(2)
    DPSGD([w], lr=1.0, l2_norm_clip=0.0, noise_multiplier=3.0).step(
        [np.array([[0.0, 0.0], [5.0, 5.0]])])
    close(w, [1.0, 1.0])


def test_state_dict_round_trip_continues_identically():
    params, grad = per_example_problem(2)
    a = [p.copy() for p in params]
    opt = DPSGD(a, lr=0.1, momentum=0.9, seed=5)
    opt.step(grad(0, a))
    b = [p.copy() for p in a]
    other = DPSGD(b, lr=0.1, momentum=0.9, seed=5)
    other.load_state_dict(opt.state_dict())
    opt.step(grad(1, a))
    other.step(grad(1, b))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("kw, match", [
    (dict(lr=-1.0), "learning rate"), (dict(l2_norm_clip=-1.0), "l2_norm_clip"),
    (dict(l2_norm_clip=float("inf")), "l2_norm_clip"), (dict(noise_multiplier=-0.1),
                                                        "noise_multiplier"),
    (dict(momentum=-0.5), "momentum"), (dict(nesterov=True), "Nesterov"),
    (dict(seed=-1), "seed"), (dict(seed=1.5), "seed")])
def test_bad_hyperparameters_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        DPSGD([np.zeros(3)], **kw)


def test_bad_input_changes_nothing():
    w, v = np.array([1.0, 2.0]), np.array([3.0])
    opt = DPSGD([w, v], momentum=0.9)
    good_v = np.ones((2, 1))
    for grads, noise, match in (
            ([np.ones(2), good_v], None, "per-example"),          # no batch axis
            ([np.ones((2, 3)), good_v], None, "per-example"),
            ([np.ones((2, 2), np.float32), good_v], None, "dtype"),
            ([np.ones((3, 2)), good_v], None, "batch sizes"),
            ([np.ones((2, 2)), good_v], [np.ones(3), None], "shape"),
            ([np.ones((2, 2)), good_v], [np.ones(2), None], "None")):
        with pytest.raises(ValueError, match=match):
            opt.step(grads, noise=noise)
    with pytest.raises(TypeError, match="per-example"):
        opt.step([[1.0, 2.0], good_v])
    with pytest.raises(ValueError, match="whole optimizer"):
        opt.add_param_group({"params": [np.zeros(1)], "l2_norm_clip": 3.0})
    np.testing.assert_array_equal(w, [1.0, 2.0])
    np.testing.assert_array_equal(v, [3.0])
    assert opt.state == {}


def test_nonfinite_raise_names_the_example():
    w = np.zeros((2, 2))
    opt = DPSGD([w])
    opt.nonfinite = "raise"
    g = np.zeros((3, 2, 2))
    g[2, 1, 0] = np.nan
    with pytest.raises(FloatingPointError, match=r"grads\[0\] has a non-finite value at "
                                                 r"example 2, index \(1, 0\)"):
        opt.step([g])
    assert opt.state == {} and not w.any()


def test_float32_runs_in_float32():
    w = np.zeros(3, np.float32)
    DPSGD([w], lr=1.0, l2_norm_clip=1e6, noise_multiplier=1e-6).step(
        [np.ones((2, 3), np.float32)])
    assert w.dtype == np.float32
    expected = -(np.float32(2.0) + np.float32(1.0) * standard_normal(0, 0, 1, 3).astype(
        np.float32)) / np.float32(2.0)
    np.testing.assert_allclose(w, expected, rtol=1e-6)


def test_golden_per_example_grads_need_their_tag(tmp_path):
    import json
    from pathlib import Path

    from npoptim.golden import schema
    path = Path(__file__).resolve().parent.parent / "reference_results" / "cases" / "DPSGD.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    loaded = schema.load(path)
    assert loaded.cases[0].steps[0].grads[0].shape == (4, 3, 5)   # batch 4 of a 3x5 param
    doc["cases"][0]["tags"].remove("per-example-grads")
    bad = tmp_path / "untagged.json"
    bad.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(schema.GoldenFileError, match=r"grads\[0\]\.shape.*expected \[3, 5\]"):
        schema.load(bad)


@needs_optax
@pytest.mark.parametrize("momentum, nesterov, seed", [(None, False, 0), (0.9, True, 1234)])
def test_jax_stream_matches_optax_itself(momentum, nesterov, seed):
    # noise_stream="jax": npoptim draws optax's own samples (24 steps, two parameters)
    params, grad = per_example_problem(3)
    lrs = lr_schedule(lr=0.05)
    expected = run_optax(lambda lr: optax.contrib.dpsgd(lr, 1.5, 0.8, seed, momentum=momentum,
                                                        nesterov=nesterov),
                         params, grad, lrs=lrs)
    actual, _ = run_dpsgd(params, grad, lrs=lrs, lr=lrs[0], l2_norm_clip=1.5,
                          noise_multiplier=0.8, momentum=momentum or 0.0, nesterov=nesterov,
                          seed=seed, noise_stream="jax")
    assert_trajectories_close(actual, expected)
