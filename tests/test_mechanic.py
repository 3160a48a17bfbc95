"""Mechanic: optax.contrib.mechanize 0.2.8 in float64 around SGD (with momentum) and Adam (two
shapes, 24 steps, option sets, an lr schedule); the first two steps hand-derived; state_dict
round trip; float32; bit-identical whatever the parallel threshold; bad input changes
nothing."""
import math

import numpy as np
import pytest
from hand_derived import close
from optax_contrib import (STEPS, assert_trajectories_close, lr_schedule, needs_optax, optax,
                           problem, run_optax)

import npoptim
from npoptim.kernels.parallel import parallel_threshold_set
from npoptim.optim.adam import Adam
from npoptim.optim.lbfgs import LBFGS
from npoptim.optim.mechanic import Mechanic
from npoptim.optim.sgd import SGD


def run_mechanic(make_inner, params, grad, lrs=None, **kw):
    ps = [p.copy() for p in params]
    opt = Mechanic(make_inner(ps), **kw)
    out = []
    for t in range(STEPS):
        if lrs is not None:
            opt.param_groups[0]["lr"] = lrs[t]
        opt.step(grad(t, ps))
        out.append([p.copy() for p in ps])
    return out, opt


INNER = {"sgd": (lambda ps, lr: SGD(ps, lr=lr, momentum=0.9),
                 lambda lr: optax.sgd(lr, momentum=0.9)),
         "adam": (lambda ps, lr: Adam(ps, lr=lr), lambda lr: optax.adam(lr))}


@needs_optax
@pytest.mark.parametrize("inner, lr, kw", [
    ("sgd", 0.5, {}),
    ("sgd", 0.5, dict(weight_decay=0.3, s_init=1e-2, num_betas=3)),
    ("adam", 0.1, dict(s_init=1e-3)),
    ("adam", 0.1, dict(weight_decay=0.0, eps=1e-4, s_init=0.05, num_betas=2)),
])
def test_matches_optax_mechanize(inner, lr, kw):
    params, grad = problem(0)
    ours, theirs = INNER[inner]
    expected = run_optax(lambda _: optax.contrib.mechanize(theirs(lr), **kw), params, grad)
    actual, opt = run_mechanic(lambda ps: ours(ps, lr), params, grad, **kw)
    assert_trajectories_close(actual, expected)
    # the tuned scale moved away from s_init, and so did the parameters (the test can fail)
    s_init = kw.get("s_init", 1e-6)
    assert abs(np.sum(opt.s) - s_init) > 0.5 * s_init
    moved = max(float(np.max(np.abs(a - p))) for a, p in zip(actual[-1], params))
    assert moved > 1e-3, moved


@needs_optax
def test_matches_optax_mechanize_under_an_lr_schedule():
    params, grad = problem(1)
    lrs = lr_schedule(lr=0.2)
    expected = run_optax(lambda lr: optax.contrib.mechanize(optax.adam(lr), s_init=1e-2),
                         params, grad, lrs=lrs)
    actual, _ = run_mechanic(lambda ps: Adam(ps, lr=lrs[0]), params, grad, lrs=lrs,
                             s_init=1e-2)
    assert_trajectories_close(actual, expected)


def test_first_two_steps_hand_derived():
    # SGD lr 1 (u = -g) on one parameter x = (3, 4), num_betas 1 (beta 0.9), eps 0, wd 0.5
    g1 = np.array([1.0, 2.0])
    eps = 1e-3
    x = np.array([3.0, 4.0])
    opt = Mechanic(SGD([x], lr=1.0), weight_decay=0.5, eps=eps, s_init=0.1, num_betas=1)
    opt.step([g1])
    # m = |0| + eps, v = 0, r = 0, s = s_init (eps) / (0 + eps) = s_init: x1 = x0 + 0.1 u
    close(opt.m, [eps])
    close(opt.s, [0.1])
    close(x, [3.0 - 0.1, 4.0 - 0.2])
    g2 = np.array([-2.0, 0.5])
    x1 = x.copy()
    opt.step([g2])
    x0 = np.array([3.0, 4.0])
    delta = (x0 - x1) / (0.1 + eps)
    decay = 0.5 * 0.1 * math.hypot(*g2) / (math.hypot(*x1) + eps)
    h = float((g2 + decay * x1) @ delta)
    m = max(0.9 * eps, abs(h) + eps)
    v = h * h
    r = 0.9 * 0.0 + max(-eps, min(eps, h)) * 0.1
    s = (0.1 * m + max(0.0, r)) / (math.sqrt(v) + eps)
    close(opt.m, [m])
    close(opt.v, [v])
    close(opt.r, [r])
    close(opt.s, [s])
    close(x, x0 - s * (delta - (-g2)))


def test_x0_is_taken_at_the_first_step_and_loaded_state_continues_identically():
    params, grad = problem(2)
    a = [p.copy() for p in params]
    opt = Mechanic(Adam(a, lr=0.1), s_init=1e-2, num_betas=3)
    assert opt.x0 is None
    for p in a:
        p += 1.0   # moved after construction: x0 is what the first step sees
    start = [p.copy() for p in a]
    opt.step(grad(0, a))
    for x, p in zip(opt.x0, start):
        np.testing.assert_array_equal(x, p)
    opt.step(grad(1, a))
    b = [p.copy() for p in a]
    other = Mechanic(Adam(b, lr=0.1), num_betas=3)
    other.load_state_dict(opt.state_dict())
    assert other.s_init == 1e-2 and other.count == 2
    for t in (2, 3):
        opt.step(grad(t, a))
        other.step(grad(t, b))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(opt.s, other.s)


def test_closure_and_top_level_name():
    w = np.array([1.0, -2.0])
    opt = npoptim.Mechanic(SGD([w], lr=1.0), s_init=0.5, eps=1e-8)
    assert opt.step(lambda: (7.5, [w])) == 7.5     # the gradient is the parameter (copied)
    close(w, [1.0 - 0.5 * 1.0, -2.0 + 0.5 * 2.0], rtol=1e-7)


@pytest.mark.parametrize("kw, match", [
    (dict(weight_decay=-0.1), "weight_decay"), (dict(weight_decay=math.inf), "weight_decay"),
    (dict(eps=-1.0), "eps"), (dict(eps=math.nan), "eps"), (dict(s_init=0.0), "s_init"),
    (dict(s_init=True), "s_init"), (dict(num_betas=0), "num_betas"),
    (dict(num_betas=2.0), "num_betas"), (dict(betas=()), "betas"),
    (dict(betas=(0.9, 1.0)), "betas"), (dict(betas=(0.9, -0.1)), "betas"),
    (dict(betas="0.9"), "betas"), (dict(betas=(0.9, 0.99), num_betas=3), "num_betas")])
def test_bad_settings_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        Mechanic(SGD([np.zeros(2)]), **kw)


def test_explicit_betas_equal_num_betas():
    a, b = np.ones(3), np.ones(3)
    ma = Mechanic(SGD([a], lr=0.1), s_init=0.1, num_betas=2)
    mb = Mechanic(SGD([b], lr=0.1), s_init=0.1, betas=(1 - 0.1, 1 - 0.01))
    for t in range(3):
        ma.step([a - t])
        mb.step([b - t])
    np.testing.assert_array_equal(a, b)


def test_bad_wrapped_optimizers_raise():
    with pytest.raises(TypeError, match="wraps an npoptim optimizer"):
        Mechanic([np.zeros(2)])
    with pytest.raises(TypeError, match="closure"):
        Mechanic(LBFGS([np.zeros(2)]))


def test_bad_input_changes_nothing():
    w, u = np.array([1.0, 2.0]), np.array([3.0])
    opt = Mechanic(Adam([w, u], lr=0.1), s_init=0.1)
    opt.step([np.ones(2), np.ones(1)])
    saved = opt.state_dict()
    before = w.copy(), u.copy()
    for bad in ([np.ones(2)], [np.ones(2), None], [np.ones(2), np.ones(2)],
                [np.ones(2), np.ones(1, np.float32)]):
        with pytest.raises(ValueError, match="gradient"):
            opt.step(bad)
    with pytest.raises(TypeError, match="needs gradients"):
        opt.step()
    np.testing.assert_array_equal(w, before[0])
    np.testing.assert_array_equal(u, before[1])
    after = opt.state_dict()
    assert after["count"] == saved["count"]
    for name in ("m", "v", "r", "s"):
        np.testing.assert_array_equal(after[name], saved[name])
    bad_state = dict(saved, s=np.ones(3))
    with pytest.raises(ValueError, match="s must be"):
        opt.load_state_dict(bad_state)
    with pytest.raises(ValueError, match="x0"):
        opt.load_state_dict(dict(saved, x0=None))
    with pytest.raises(ValueError, match="keys"):
        opt.load_state_dict({"optimizer": saved["optimizer"]})
    np.testing.assert_array_equal(opt.s, saved["s"])


def test_float32_parameters_keep_float32_state_and_follow_float64():
    params, grad = problem(3)
    runs = {}
    for dtype in (np.float32, np.float64):
        ps = [p.astype(dtype) for p in params]
        opt = Mechanic(Adam(ps, lr=0.1), s_init=1e-2)
        for t in range(8):
            opt.step([g.astype(dtype) for g in grad(t, ps)])
        assert all(p.dtype == dtype for p in ps) and opt.s.dtype == dtype
        runs[dtype] = ps
    for a, b in zip(runs[np.float32], runs[np.float64]):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-4)


def test_bit_identical_whatever_the_parallel_threshold():
    rng = np.random.default_rng(4)
    start = [rng.standard_normal((70, 100)), rng.standard_normal(3000)]
    results = []
    for threshold in (0, None):
        ps = [p.copy() for p in start]
        opt = Mechanic(Adam(ps, lr=0.1), s_init=1e-2)
        with parallel_threshold_set(threshold):
            for t in range(3):
                opt.step([p * 0.5 + np.sin(t + p) for p in ps])
        results.append((ps, opt.s.copy()))
    for a, b in zip(results[0][0], results[1][0]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(results[0][1], results[1][1])
