"""AdamaxW: optax.adamaxw 0.2.8 in float64 (defaults, decay, betas, maximize, a schedule; two
shapes, 24 steps), npoptim's (= torch's) Adamax bit for bit without decay, bad input."""
import numpy as np
import pytest
from hand_derived import assert_typed_float32, assert_unchanged, snapshot
from optax_compare import (assert_same_trajectory, npoptim_trajectory, optax_trajectory,
                           problem, schedule)

from npoptim.optim.adamax import Adamax
from npoptim.optim.adamaxw import AdamaxW, AdamaxWHyper, adamaxw_rule


@pytest.mark.needs("optax", "jax")
def test_matches_optax_adamaxw_defaults():
    optax = pytest.importorskip("optax")
    params, grads = problem(0)
    expected = optax_trajectory(lambda: optax.adamaxw(2e-2), params, grads)
    opt = AdamaxW(params, lr=2e-2)
    assert_same_trajectory(npoptim_trajectory(opt, params, grads), expected)


@pytest.mark.needs("optax", "jax")
def test_matches_optax_decay_betas_schedule_maximize():
    optax = pytest.importorskip("optax")
    params, grads = problem(1)
    lrs, optax_lrs = schedule(2e-2)
    expected = optax_trajectory(
        lambda: optax.adamaxw(optax_lrs, b1=0.8, b2=0.9, eps=1e-6, weight_decay=0.3),
        params, [[-g for g in gs] for gs in grads])
    opt = AdamaxW(params, lr=lrs[0], betas=(0.8, 0.9), eps=1e-6, weight_decay=0.3,
                  maximize=True)
    assert_same_trajectory(npoptim_trajectory(opt, params, grads, lrs), expected)


def test_without_decay_is_adamax_bit_for_bit():
    params, grads = problem(2)
    a = [p.copy() for p in params]
    b = [p.copy() for p in params]
    npoptim_trajectory(AdamaxW(a, lr=0.01, weight_decay=0.0), a, grads)
    npoptim_trajectory(Adamax(b, lr=0.01), b, grads)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_rule_stays_float32():
    f = np.float32
    h = AdamaxWHyper(*[f(v) for v in (0, 0.1, 0.999, 1e-8, 0.1, 0.01, -0.01)])
    assert_typed_float32(adamaxw_rule, (f(1.0), f(0.5), (f(0.2), f(0.1)), h))


@pytest.mark.parametrize("kw, match", [
    (dict(lr=-1e-3), "learning rate"), (dict(betas=(1.0, 0.9)), "beta"),
    (dict(eps=-1.0), "epsilon"), (dict(weight_decay=-0.1), "weight_decay"),
    (dict(maximize="no"), "maximize")])
def test_bad_hyperparameters_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        AdamaxW([np.zeros(3)], **kw)


def test_bad_input_changes_nothing():
    w = np.array([1.0, 2.0, 3.0])
    opt = AdamaxW([w])
    opt.step([np.ones(3)])
    snap = snapshot(opt)
    opt.param_groups[0]["weight_decay"] = -1.0
    with pytest.raises(ValueError, match="weight_decay"):
        opt.step([np.ones(3)])
    opt.param_groups[0]["weight_decay"] = 1e-4
    with pytest.raises(TypeError, match="NumPy array"):
        opt.step([[1.0, 1.0, 1.0]])
    assert_unchanged(opt, snap)
