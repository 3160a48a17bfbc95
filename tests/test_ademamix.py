"""AdEMAMix and Simplified AdEMAMix: trajectories against optax.contrib (float64, each option
that changes the math, the paper's warmups, an lr schedule), the warmups against the paper's
closed form, and bad input."""
import math

import numpy as np
import pytest
from hand_derived import close
from optax_contrib import (assert_trajectories_close, lr_schedule, needs_optax, optax,
                           problem, run_npoptim, run_optax)

from npoptim.optim.ademamix import AdEMAMix, SimplifiedAdEMAMix, alpha_at, beta3_at

LRS = lr_schedule()


def _optax_ademamix(lr=1e-2, b1=0.9, b2=0.999, b3=0.9999, alpha=5.0, eps=1e-8,
                    weight_decay=0.0, alpha_warmup=None, beta3_warmup=None):
    # npoptim's schedules at step t are optax's at count t - 1
    if alpha_warmup is not None:
        alpha_final = alpha
        alpha = lambda count: np.float64(alpha_at(int(count) + 1, alpha_final, alpha_warmup))
    if beta3_warmup is not None:
        b3_final = b3
        b3 = lambda count: np.float64(beta3_at(int(count) + 1, b1, b3_final, beta3_warmup))

    def make(learning_rate):
        return optax.contrib.ademamix(lr if learning_rate is None else learning_rate, b1=b1,
                                      b2=b2, b3=b3, alpha=alpha, eps=eps,
                                      weight_decay=weight_decay)
    return make


def _optax_simplified(lr=1e-2, b1=0.99, b2=0.95, alpha=0.0, eps=1e-8, weight_decay=0.0):
    def make(learning_rate):
        return optax.contrib.simplified_ademamix(
            lr if learning_rate is None else learning_rate, b1=b1, b2=b2, alpha=alpha, eps=eps,
            weight_decay=weight_decay)
    return make


ADEMAMIX_CASES = {
    "defaults": ({}, {}),
    "betas-alpha-eps": (dict(betas=(0.8, 0.99, 0.999), alpha=8.0, eps=1e-6),
                        dict(b1=0.8, b2=0.99, b3=0.999, alpha=8.0, eps=1e-6)),
    "weight-decay": (dict(weight_decay=0.1), dict(weight_decay=0.1)),
    "beta1-zero": (dict(betas=(0.0, 0.999, 0.99)), dict(b1=0.0, b3=0.99)),
}
SIMPLIFIED_CASES = {
    "defaults": ({}, {}),
    "alpha-betas": (dict(alpha=2.0, betas=(0.9, 0.99), eps=1e-6),
                    dict(alpha=2.0, b1=0.9, b2=0.99, eps=1e-6)),
    "weight-decay": (dict(weight_decay=0.1, alpha=1.0), dict(weight_decay=0.1, alpha=1.0)),
}


@needs_optax
@pytest.mark.parametrize("case", sorted(ADEMAMIX_CASES))
def test_ademamix_equals_optax(case):
    ours, theirs = ADEMAMIX_CASES[case]
    params, grad = problem()
    expected = run_optax(_optax_ademamix(**theirs), params, grad)
    actual, _ = run_npoptim(AdEMAMix, params, grad, lr=1e-2, **ours)
    assert_trajectories_close(actual, expected)


@needs_optax
def test_ademamix_warmups_and_schedule_equal_optax():
    # b3 is a schedule in optax: jax re-traces it per step, so one case only
    params, grad = problem(seed=1)
    expected = run_optax(_optax_ademamix(alpha_warmup=10, beta3_warmup=16, weight_decay=0.01),
                         params, grad, lrs=LRS)
    actual, _ = run_npoptim(AdEMAMix, params, grad, lrs=LRS, alpha_warmup=10, beta3_warmup=16,
                            weight_decay=0.01)
    assert_trajectories_close(actual, expected)


@needs_optax
@pytest.mark.parametrize("case", sorted(SIMPLIFIED_CASES))
def test_simplified_equals_optax(case):
    ours, theirs = SIMPLIFIED_CASES[case]
    params, grad = problem()
    expected = run_optax(_optax_simplified(lr=1e-3, **theirs), params, grad)
    actual, _ = run_npoptim(SimplifiedAdEMAMix, params, grad, lr=1e-3, **ours)
    assert_trajectories_close(actual, expected)


@needs_optax
def test_simplified_schedule_equals_optax():
    params, grad = problem(seed=1)
    lrs = [lr / 10 for lr in LRS]
    expected = run_optax(_optax_simplified(alpha=1.0), params, grad, lrs=lrs)
    actual, _ = run_npoptim(SimplifiedAdEMAMix, params, grad, lrs=lrs, alpha=1.0)
    assert_trajectories_close(actual, expected)


def test_warmups_follow_the_papers_closed_form():
    # paper, Algorithm 1: beta3(t) = exp(ln b1 ln b3 / ((1 - t/T) ln b3 + (t/T) ln b1)),
    # alpha(t) = t alpha / T; the authors' half-life form adds 1e-8 to beta inside the log
    # (1e-8 moves ln(0.9999) by 1e-4 of itself, beta3(t) by ~1e-6)
    b1, b3, T = 0.9, 0.9999, 100

    def closed_form(a, shift):
        l1, l3 = math.log(b1 + shift), math.log(b3 + shift)
        return math.exp(l1 * l3 / ((1 - a) * l3 + a * l1))
    for t in (1, 10, 50, 99):
        assert beta3_at(t, b1, b3, T) == pytest.approx(closed_form(t / T, 1e-8), rel=1e-14)
        assert beta3_at(t, b1, b3, T) == pytest.approx(closed_form(t / T, 0.0), rel=1e-5)
        assert alpha_at(t, 5.0, T) == pytest.approx(5.0 * t / T, rel=1e-15)
    assert beta3_at(T, b1, b3, T) == b3 and alpha_at(T, 5.0, T) == 5.0
    assert beta3_at(1, b1, b3, None) == b3 and alpha_at(1, 5.0, None) == 5.0


def test_first_step_hand_derived():
    lr, alpha, eps = 0.1, 5.0, 1e-8
    p0, g = np.array([1.0, -2.0]), np.array([0.5, -4.0])
    p = p0.copy()
    opt = AdEMAMix([p], lr=lr, weight_decay=0.1)
    opt.step([g])
    m1, m2, v = (1 - 0.9) * g, (1 - 0.9999) * g, (1 - 0.999) * g * g
    expected = p0 - lr * ((m1 / (1 - 0.9) + alpha * m2) / (np.sqrt(v) / math.sqrt(1 - 0.999) + eps)
                          + 0.1 * p0)
    close(p, expected)
    close(opt.state[0]["exp_avg_slow"], m2)


def test_maximize_is_minimizing_the_negated_gradient():
    for cls in (AdEMAMix, SimplifiedAdEMAMix):
        a, b = np.array([1.0, 2.0]), np.array([1.0, 2.0])
        opt_a, opt_b = cls([a], maximize=True), cls([b])
        for g in (np.array([1.0, -3.0]), np.array([0.5, 2.0])):
            opt_a.step([g])
            opt_b.step([-g])
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("bad", [dict(lr=-1.0), dict(eps=-1.0), dict(alpha=-1.0),
                                 dict(betas=(0.9, 0.999)), dict(betas=(0.9, 0.999, 1.0)),
                                 dict(weight_decay=-0.1), dict(alpha_warmup=0),
                                 dict(beta3_warmup=2.5), dict(maximize=None)])
def test_ademamix_bad_hyperparameters_raise(bad):
    with pytest.raises(ValueError):
        AdEMAMix([np.zeros(3)], **bad)


@pytest.mark.parametrize("bad", [dict(lr=-1.0), dict(alpha=-1.0), dict(betas=(1.0, 0.9)),
                                 dict(betas=(0.9, 0.95, 0.9)), dict(weight_decay=-1.0)])
def test_simplified_bad_hyperparameters_raise(bad):
    with pytest.raises(ValueError):
        SimplifiedAdEMAMix([np.zeros(3)], **bad)


def test_bad_step_changes_nothing():
    p = np.array([1.0, 2.0])
    opt = AdEMAMix([p], lr=0.1)
    opt.step([np.array([1.0, 1.0])])
    before, state = p.copy(), {k: np.copy(v) for k, v in opt.state[0].items()}
    opt.param_groups[0]["betas"] = (0.9, 0.999, 1.5)
    with pytest.raises(ValueError):
        opt.step([np.array([1.0, 1.0])])
    opt.param_groups[0]["betas"] = (0.9, 0.999, 0.9999)
    with pytest.raises(ValueError):
        opt.step([np.ones((2, 1))])
    np.testing.assert_array_equal(p, before)
    for k, v in state.items():
        np.testing.assert_array_equal(opt.state[0][k], v)
