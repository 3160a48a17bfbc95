"""Optimistic GD and optimistic Adam: optax.optimistic_gradient_descent and
optax.optimistic_adam_v2 0.2.8 in float64 (alpha, beta, nesterov or not, eps_root, betas,
maximize, a schedule; two shapes, 24 steps), the first steps hand-derived, bad input."""
import numpy as np
import pytest
from hand_derived import assert_unchanged, close, snapshot
from optax_compare import (assert_same_trajectory, npoptim_trajectory, optax_trajectory,
                           problem, schedule)

from npoptim.optim.optimistic import OptimisticAdam, OptimisticGD


@pytest.mark.needs("optax", "jax")
@pytest.mark.parametrize("alpha, beta", [(1.0, 1.0), (0.5, 2.0)])
def test_gd_matches_optax(alpha, beta):
    optax = pytest.importorskip("optax")
    params, grads = problem(0)
    lrs, optax_lrs = schedule(1e-2)
    expected = optax_trajectory(
        lambda: optax.optimistic_gradient_descent(optax_lrs, alpha=alpha, beta=beta), params,
        [[-g for g in gs] for gs in grads])
    opt = OptimisticGD(params, lr=lrs[0], alpha=alpha, beta=beta, maximize=True)
    assert_same_trajectory(npoptim_trajectory(opt, params, grads, lrs), expected)


@pytest.mark.needs("optax", "jax")
@pytest.mark.parametrize("variant, kw", [
    ("optax", dict()), ("paper", dict(alpha=0.5, beta=2.0, betas=(0.8, 0.99), eps_root=1e-10))],
    ids=["optax-defaults", "paper-options"])
def test_adam_matches_optax_v2(variant, kw):
    optax = pytest.importorskip("optax")
    params, grads = problem(1)
    lrs, optax_lrs = schedule(1e-2)
    b1, b2 = kw.get("betas", (0.9, 0.999))
    expected = optax_trajectory(
        lambda: optax.optimistic_adam_v2(optax_lrs, alpha=kw.get("alpha", 1.0),
                                         beta=kw.get("beta", 1.0), b1=b1, b2=b2,
                                         eps_root=kw.get("eps_root", 0.0),
                                         nesterov=variant == "optax"), params, grads)
    opt = OptimisticAdam(params, lr=lrs[0], variant=variant, **kw)
    assert_same_trajectory(npoptim_trajectory(opt, params, grads, lrs), expected)


def test_gd_first_steps_hand_derived():
    w = np.array([1.0, 2.0])
    g1, g2 = np.array([1.0, -1.0]), np.array([0.5, 3.0])
    opt = OptimisticGD([w], lr=0.1)
    opt.step([g1])
    close(w, [1.0, 2.0] - 0.1 * g1)                  # d_0 = d_1: (2 g1 - g1)
    opt.step([g2])
    close(w, [1.0, 2.0] - 0.1 * g1 - 0.1 * (2 * g2 - g1))
    close(opt.state[0]["previous_gradient"], g2)


def test_adam_direction_is_adams_and_extrapolated():
    w = np.array([1.0])
    opt = OptimisticAdam([w], lr=0.1, eps=0.0)
    opt.step([np.array([2.0])])
    close(w, [0.9])                                 # d_1 = sign(g): m/b1 / sqrt(v/b2) = 1
    opt.step([np.array([-2.0])])
    m = 0.9 * 0.2 - 0.2
    v = 0.999 * 0.004 + 0.004
    d2 = (m / (1 - 0.81)) / np.sqrt(v / (1 - 0.999 ** 2))
    close(w, [0.9 - 0.1 * (2 * d2 - 1.0)])


@pytest.mark.parametrize("cls, kw, match", [
    (OptimisticGD, dict(lr=-1.0), "learning rate"), (OptimisticGD, dict(alpha=None), "alpha"),
    (OptimisticGD, dict(beta=float("nan")), "beta"),
    (OptimisticAdam, dict(betas=(0.9, 1.0)), "beta parameter"),
    (OptimisticAdam, dict(eps=-1.0), "epsilon"), (OptimisticAdam, dict(nesterov=1), "nesterov"),
    (OptimisticAdam, dict(variant="v1"), "unknown variant")])
def test_bad_hyperparameters_raise(cls, kw, match):
    with pytest.raises(ValueError, match=match):
        cls([np.zeros(3)], **kw)


def test_bad_input_changes_nothing():
    w = np.array([1.0, 2.0, 3.0])
    opt = OptimisticAdam([w])
    opt.step([np.ones(3)])
    snap = snapshot(opt)
    state = snap[1][0]
    opt.param_groups[0]["alpha"] = "one"
    with pytest.raises(ValueError, match="alpha"):
        opt.step([np.ones(3)])
    opt.param_groups[0]["alpha"] = 1.0
    del opt.state[0]["previous_gradient"]
    with pytest.raises(ValueError, match="previous_gradient"):
        opt.step([np.ones(3)])
    opt.state[0]["previous_gradient"] = state["previous_gradient"].copy()
    assert_unchanged(opt, snap)
