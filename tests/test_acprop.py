"""ACProp: trajectories against optax.contrib.acprop 0.2.8 (float64, each option that changes
the math, maximize, an lr schedule, two shapes, 24 steps), the first steps hand-derived,
checkpoints and bad input."""
import numpy as np
import pytest
from hand_derived import close
from optax_contrib import (assert_trajectories_close, lr_schedule, needs_optax, optax,
                           problem, run_npoptim, run_optax)

from npoptim.optim.acprop import ACProp

CASES = {
    "defaults": ({}, {}),
    "betas-eps": (dict(betas=(0.8, 0.99), eps=1e-6, eps_root=1e-10),
                  dict(b1=0.8, b2=0.99, eps=1e-6, eps_root=1e-10)),
    "weight-decay": (dict(weight_decay=0.1), dict(weight_decay=0.1)),
    "beta1-zero": (dict(betas=(0.0, 0.9)), dict(b1=0.0, b2=0.9)),
}


def _optax(lr=1e-2, **kw):
    return lambda learning_rate: optax.contrib.acprop(
        lr if learning_rate is None else learning_rate, **kw)


@needs_optax
@pytest.mark.parametrize("case", sorted(CASES))
def test_equals_optax(case):
    ours, theirs = CASES[case]
    params, grad = problem()
    expected = run_optax(_optax(**theirs), params, grad)
    actual, _ = run_npoptim(ACProp, params, grad, lr=1e-2, **ours)
    assert_trajectories_close(actual, expected)


@needs_optax
def test_lr_schedule_and_maximize_equal_optax():
    params, grad = problem(seed=1)
    lrs = lr_schedule()
    expected = run_optax(_optax(weight_decay=0.05), params, grad, lrs=lrs)

    def negated(t, ps):
        return [-g for g in grad(t, ps)]
    actual, _ = run_npoptim(ACProp, params, negated, lrs=lrs, weight_decay=0.05,
                            maximize=True)
    assert_trajectories_close(actual, expected)


def test_first_two_steps_hand_derived():
    p = np.array([1.0])
    opt = ACProp([p], lr=0.1, betas=(0.5, 0.75), eps=0.0, eps_root=0.0)
    opt.step([np.array([2.0])])          # s_hat = 1: p - lr g
    close(p, [1.0 - 0.1 * 2.0])
    # m = 0.5 * 2 = 1, s = 0.25 * (2 - 0)^2 = 1; step 2: s_hat = 1 / (1 - 0.75) = 4
    close(opt.state[0]["exp_avg"], [1.0])
    close(opt.state[0]["exp_avg_var"], [1.0])
    opt.step([np.array([4.0])])
    close(p, [0.8 - 0.1 * 4.0 / 2.0])
    close(opt.state[0]["exp_avg_var"], [0.75 * 1.0 + 0.25 * (4.0 - 1.0) ** 2])


def test_state_dict_round_trip_continues_bit_for_bit():
    params, grad = problem()
    _, opt_a = run_npoptim(ACProp, params, grad, steps=5, lr=1e-2)
    b = [p.copy() for p in opt_a.params]
    opt_b = ACProp(b, lr=1e-2)
    opt_b.load_state_dict(opt_a.state_dict())
    for t in range(5, 8):
        opt_a.step(grad(t, opt_a.params))
        opt_b.step(grad(t, b))
    for p, q in zip(opt_a.params, b):
        np.testing.assert_array_equal(p, q)


@pytest.mark.parametrize("bad", [dict(lr=-1.0), dict(eps=-1.0), dict(eps_root=-1e-3),
                                 dict(betas=(1.0, 0.9)), dict(betas=(0.9, -0.1)),
                                 dict(weight_decay=-0.1), dict(maximize=1)])
def test_bad_hyperparameters_raise(bad):
    with pytest.raises(ValueError):
        ACProp([np.zeros(3)], **bad)


def test_bad_input_changes_nothing():
    w = np.array([1.0, 2.0])
    opt = ACProp([w])
    with pytest.raises(ValueError, match="shape"):
        opt.step([np.ones(3)])
    with pytest.raises(TypeError, match="sparse"):
        import scipy.sparse
        opt.step([scipy.sparse.csr_matrix(np.ones((1, 2)))])
    np.testing.assert_array_equal(w, [1.0, 2.0])
    assert opt.state == {}
