"""signSGD and Signum: optax.sign_sgd / optax.signum 0.2.8 in float64 (beta, maximize, a
schedule; two shapes, 24 steps), the authors' weight decay hand-derived, bad input."""
import numpy as np
import pytest
from hand_derived import assert_unchanged, close, snapshot
from optax_compare import (assert_same_trajectory, npoptim_trajectory, optax_trajectory,
                           problem, schedule)

from npoptim.optim.sign import Signum, SignSGD


@pytest.mark.needs("optax", "jax")
def test_sign_sgd_matches_optax_under_a_schedule():
    optax = pytest.importorskip("optax")
    params, grads = problem(0)
    lrs, optax_lrs = schedule(1e-2)
    expected = optax_trajectory(lambda: optax.sign_sgd(optax_lrs), params, grads)
    opt = SignSGD(params, lr=lrs[0])
    assert_same_trajectory(npoptim_trajectory(opt, params, grads, lrs), expected)
    assert opt.state[0] == {}


@pytest.mark.needs("optax", "jax")
@pytest.mark.parametrize("beta", [0.9, 0.5])
def test_signum_matches_optax(beta):
    optax = pytest.importorskip("optax")
    params, grads = problem(1)
    lrs, optax_lrs = schedule(1e-2)
    expected = optax_trajectory(lambda: optax.signum(optax_lrs, beta=beta), params,
                                [[-g for g in gs] for gs in grads])
    opt = Signum(params, lr=lrs[0], momentum=beta, maximize=True)
    assert_same_trajectory(npoptim_trajectory(opt, params, grads, lrs), expected)


def test_weight_decay_is_added_to_the_gradient_hand_derived():
    lr, lam, beta = 0.1, 0.5, 0.9
    w0 = np.array([1.0, -1.0, 2.0])
    g1, g2 = np.array([-0.2, 0.3, 0.0]), np.array([-2.0, 0.0, -1.0])
    w, v = w0.copy(), w0.copy()
    signum, sign_sgd = Signum([w], lr=lr, weight_decay=lam), SignSGD([v], lr=lr, weight_decay=lam)
    for g in (g1, g2):
        signum.step([g])
        sign_sgd.step([g])
    m1 = (1 - beta) * (g1 + lam * w0)
    w1 = w0 - lr * np.sign(m1)
    m2 = beta * m1 + (1 - beta) * (g2 + lam * w1)
    close(w, w1 - lr * np.sign(m2))
    close(signum.state[0]["momentum_buffer"], m2)
    v1 = w0 - lr * np.sign(g1 + lam * w0)
    close(v, v1 - lr * np.sign(g2 + lam * v1))


@pytest.mark.parametrize("cls, kw, match", [
    (SignSGD, dict(lr=-1e-3), "learning rate"), (SignSGD, dict(weight_decay=-1), "weight_decay"),
    (Signum, dict(momentum=1.0), "momentum"), (Signum, dict(momentum=-0.1), "momentum"),
    (Signum, dict(maximize="yes"), "maximize")])
def test_bad_hyperparameters_raise(cls, kw, match):
    with pytest.raises(ValueError, match=match):
        cls([np.zeros(3)], **kw)


def test_bad_input_changes_nothing():
    w = np.array([1.0, 2.0, 3.0])
    opt = Signum([w])
    opt.step([np.ones(3)])
    snap = snapshot(opt)
    opt.param_groups[0]["momentum"] = 2.0
    with pytest.raises(ValueError, match="momentum"):
        opt.step([np.ones(3)])
    opt.param_groups[0]["momentum"] = 0.9
    with pytest.raises(TypeError, match="sparse"):
        import scipy.sparse
        opt.step([scipy.sparse.csr_matrix(np.ones((1, 3)))])
    assert_unchanged(opt, snap)
