"""SM3: optax.sm3 0.2.8 in float64 (a matrix, a vector and a 3-D tensor; momentum, maximize and
a schedule through scale_by_sm3; 24 steps), the cover hand-derived, zero-size parameters, bad
input."""
import numpy as np
import pytest
from hand_derived import assert_unchanged, close, snapshot
from optax_compare import (assert_same_trajectory, npoptim_trajectory, optax_trajectory,
                           problem, schedule)

from npoptim.optim.sm3 import SM3

SHAPES = ((3, 5), (7,), (2, 3, 4))


@pytest.mark.needs("optax", "jax")
def test_matches_optax_sm3():
    optax = pytest.importorskip("optax")
    params, grads = problem(0, shapes=SHAPES)
    expected = optax_trajectory(lambda: optax.sm3(0.05), params, grads)
    opt = SM3(params, lr=0.05)
    assert_same_trajectory(npoptim_trajectory(opt, params, grads), expected)


@pytest.mark.needs("optax", "jax")
def test_matches_scale_by_sm3_momentum_schedule_maximize():
    optax = pytest.importorskip("optax")
    params, grads = problem(1, shapes=SHAPES)
    lrs, optax_lrs = schedule(0.05)
    expected = optax_trajectory(
        lambda: optax.chain(optax.scale_by_sm3(b1=0.5), optax.scale_by_learning_rate(optax_lrs)),
        params, [[-g for g in gs] for gs in grads])
    opt = SM3(params, lr=lrs[0], momentum=0.5, maximize=True)
    assert_same_trajectory(npoptim_trajectory(opt, params, grads, lrs), expected)


def test_two_steps_of_the_cover_hand_derived():
    lr, beta, eps = 0.1, 0.0, 1e-8
    w = np.zeros((2, 2))
    g1 = np.array([[1.0, 2.0], [3.0, 0.0]])
    g2 = np.array([[1.0, 1.0], [1.0, 1.0]])
    opt = SM3([w], lr=lr, momentum=beta)
    opt.step([g1])
    close(opt.state[0]["mu_0"], [4.0, 9.0])        # row maxima of g1^2
    close(opt.state[0]["mu_1"], [9.0, 4.0])        # column maxima
    w1 = -lr * g1 / np.sqrt(g1 ** 2 + eps) * (g1 != 0)
    opt.step([g2])
    nu = 1.0 + np.minimum(np.array([[4.0], [9.0]]), np.array([[9.0, 4.0]]))   # [[5, 5], [10, 5]]
    close(w, w1 - lr * g2 / np.sqrt(nu + eps))
    close(opt.state[0]["mu_0"], [5.0, 10.0])
    close(opt.state[0]["mu_1"], [10.0, 5.0])


@pytest.mark.parametrize("shape", [(3, 0), (0,), ()])
def test_zero_size_and_scalar_parameters(shape):
    w = np.ones(shape)
    opt = SM3([w], lr=0.1)
    opt.step([np.ones(shape)])
    opt.step([np.ones(shape)])
    assert set(opt.state[0]) >= {"nu", "mu_0"}


@pytest.mark.parametrize("kw, match", [
    (dict(lr=-1e-3), "learning rate"), (dict(momentum=1.0), "momentum"),
    (dict(eps=-1.0), "epsilon"), (dict(maximize=0), "maximize")])
def test_bad_hyperparameters_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        SM3([np.zeros(3)], **kw)


def test_bad_input_changes_nothing():
    w = np.ones((2, 3))
    opt = SM3([w])
    opt.step([np.ones((2, 3))])
    snap = snapshot(opt)
    state = snap[1][0]
    opt.state[0]["mu_1"] = np.zeros(2)
    with pytest.raises(ValueError, match="mu_1"):
        opt.step([np.ones((2, 3))])
    opt.state[0]["mu_1"] = state["mu_1"].copy()
    opt.param_groups[0]["momentum"] = -0.5
    with pytest.raises(ValueError, match="momentum"):
        opt.step([np.ones((2, 3))])
    assert_unchanged(opt, snap)
