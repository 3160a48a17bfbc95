"""COCOB: trajectories against optax.contrib.cocob 0.2.8 (float64, each option that changes
the math, maximize, an lr schedule, two shapes, 24 steps), the first step hand-derived,
checkpoints and bad input."""
import numpy as np
import pytest
from hand_derived import close
from optax_contrib import (assert_trajectories_close, lr_schedule, needs_optax, optax,
                           problem, run_npoptim, run_optax)

from npoptim.optim.cocob import COCOB

CASES = {
    "defaults": {},
    "alpha-eps": dict(alpha=10.0, eps=1e-3),
    "weight-decay-lr": dict(weight_decay=0.1, lr=0.5),
    "small-alpha": dict(alpha=0.5),
}


def _optax(lr=1.0, **kw):
    return lambda learning_rate: optax.contrib.cocob(
        lr if learning_rate is None else learning_rate, **kw)


@needs_optax
@pytest.mark.parametrize("case", sorted(CASES))
def test_equals_optax(case):
    kw = CASES[case]
    params, grad = problem()
    expected = run_optax(_optax(**kw), params, grad)
    actual, _ = run_npoptim(COCOB, params, grad, **kw)
    assert_trajectories_close(actual, expected)
    assert not np.allclose(actual[-1][0], params[0])  # it did move


@needs_optax
def test_lr_schedule_and_maximize_equal_optax():
    params, grad = problem(seed=1)
    lrs = lr_schedule(lr=1.0)
    expected = run_optax(_optax(weight_decay=0.05), params, grad, lrs=lrs)

    def negated(t, ps):
        return [-g for g in grad(t, ps)]
    actual, _ = run_npoptim(COCOB, params, negated, lrs=lrs, weight_decay=0.05,
                            maximize=True)
    assert_trajectories_close(actual, expected)


def test_first_step_hand_derived():
    p = np.array([1.0, 2.0])
    opt = COCOB([p], alpha=100.0, eps=1e-8)
    opt.step([np.array([0.5, -2.0])])
    # L = |g|, G = |g|, R = 0, C = -g: theta = theta0 - g / (|g| * 100 |g|) * |g|
    close(p, [1.0 - 0.01, 2.0 + 0.01])
    state = opt.state[0]
    close(state["init_particles"], [1.0, 2.0])
    close(state["scale"], [0.5, 2.0])
    close(state["cumulative_gradients"], [-0.5, 2.0])


def test_state_dict_round_trip_continues_bit_for_bit():
    params, grad = problem()
    _, opt_a = run_npoptim(COCOB, params, grad, steps=5)
    sd = opt_a.state_dict()
    assert sorted(sd["state"][0]) == sorted(["init_particles", "cumulative_gradients", "scale",
                                             "subgradients", "reward"])
    b = [p.copy() for p in opt_a.params]
    opt_b = COCOB(b)
    opt_b.load_state_dict(sd)
    for t in range(5, 8):
        opt_a.step(grad(t, opt_a.params))
        opt_b.step(grad(t, b))
    for p, q in zip(opt_a.params, b):
        np.testing.assert_array_equal(p, q)


@pytest.mark.parametrize("bad", [dict(lr=-1.0), dict(eps=0.0), dict(alpha=0.0),
                                 dict(alpha=float("inf")), dict(weight_decay=-0.1),
                                 dict(maximize="yes")])
def test_bad_hyperparameters_raise(bad):
    with pytest.raises(ValueError):
        COCOB([np.zeros(3)], **bad)


def test_bad_input_changes_nothing():
    w = np.array([1.0, 2.0])
    opt = COCOB([w])
    opt.step([np.ones(2)])
    before = w.copy(), {k: v.copy() for k, v in opt.state[0].items()}
    with pytest.raises(ValueError, match="shape"):
        opt.step([np.ones(3)])
    with pytest.raises(ValueError, match="dtype"):
        opt.step([np.ones(2, np.float32)])
    np.testing.assert_array_equal(w, before[0])
    for k, v in before[1].items():
        np.testing.assert_array_equal(opt.state[0][k], v)
