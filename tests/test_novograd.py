"""NovoGrad: optax.novograd 0.2.8 in float64 (defaults; decay, betas, eps_root, maximize, a
schedule; two shapes, 24 steps), hand-derived steps, bad input."""
import numpy as np
import pytest
from hand_derived import assert_unchanged, close, snapshot
from optax_compare import (assert_same_trajectory, npoptim_trajectory, optax_trajectory,
                           problem, schedule)

from npoptim.optim.novograd import NovoGrad


@pytest.mark.needs("optax", "jax")
def test_matches_optax_novograd_defaults():
    optax = pytest.importorskip("optax")
    params, grads = problem(0)
    expected = optax_trajectory(lambda: optax.novograd(1e-2), params, grads)
    opt = NovoGrad(params, lr=1e-2)
    assert_same_trajectory(npoptim_trajectory(opt, params, grads), expected)


@pytest.mark.needs("optax", "jax")
def test_matches_optax_decay_betas_schedule_maximize():
    optax = pytest.importorskip("optax")
    params, grads = problem(1)
    lrs, optax_lrs = schedule(2e-2)
    expected = optax_trajectory(
        lambda: optax.novograd(optax_lrs, b1=0.8, b2=0.5, eps=1e-4, eps_root=1e-3,
                               weight_decay=0.1), params, [[-g for g in gs] for gs in grads])
    opt = NovoGrad(params, lr=lrs[0], betas=(0.8, 0.5), eps=1e-4, eps_root=1e-3,
                   weight_decay=0.1, maximize=True)
    assert_same_trajectory(npoptim_trajectory(opt, params, grads, lrs), expected)


def test_two_steps_hand_derived():
    lr, b1, b2, eps, lam = 0.1, 0.9, 0.25, 1e-6, 0.01
    w0 = np.array([3.0, -4.0])
    g1, g2 = np.array([0.3, 0.4]), np.array([1.0, -2.0])
    w = w0.copy()
    opt = NovoGrad([w], lr=lr, weight_decay=lam)
    opt.step([g1])
    opt.step([g2])
    v1 = 0.25                                       # ||g1||^2
    m1 = g1 / (np.sqrt(v1) + eps) + lam * w0
    w1 = w0 - lr * m1
    v2 = b2 * v1 + (1 - b2) * 5.0
    m2 = b1 * m1 + g2 / (np.sqrt(v2) + eps) + lam * w1
    close(w, w1 - lr * m2)
    close(opt.state[0]["exp_avg_sq"], v2)
    assert opt.state[0]["exp_avg_sq"].shape == ()


@pytest.mark.parametrize("kw, match", [
    (dict(lr=-1e-3), "learning rate"), (dict(betas=(1.0, 0.9)), "beta"),
    (dict(eps=-1.0), "epsilon"), (dict(eps_root=-1.0), "eps_root"),
    (dict(weight_decay=-0.1), "weight_decay")])
def test_bad_hyperparameters_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        NovoGrad([np.zeros(3)], **kw)


def test_bad_input_changes_nothing():
    w = np.array([1.0, 2.0, 3.0])
    opt = NovoGrad([w])
    opt.step([np.ones(3)])
    snap = snapshot(opt)
    state = snap[1][0]
    opt.state[0]["exp_avg_sq"] = np.zeros(3)
    with pytest.raises(ValueError, match="exp_avg_sq"):
        opt.step([np.ones(3)])
    opt.state[0]["exp_avg_sq"] = state["exp_avg_sq"].copy()
    with pytest.raises(ValueError, match="shape"):
        opt.step([np.ones((3, 1))])
    assert_unchanged(opt, snap)
