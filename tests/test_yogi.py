"""Yogi: optax.yogi 0.2.8 in float64 (defaults; betas, eps, eps_root, initial accumulator,
maximize and a schedule through scale_by_yogi; two shapes, 24 steps), the uncorrected form
hand-derived, bad input."""
import numpy as np
import pytest
from hand_derived import assert_typed_float32, assert_unchanged, close, snapshot
from optax_compare import (assert_same_trajectory, npoptim_trajectory, optax_trajectory,
                           problem, schedule)

from npoptim.optim.yogi import Yogi, YogiHyper, yogi_rule


@pytest.mark.needs("optax", "jax")
def test_matches_optax_yogi_defaults():
    optax = pytest.importorskip("optax")
    params, grads = problem(0)
    expected = optax_trajectory(lambda: optax.yogi(1e-2), params, grads)
    opt = Yogi(params, lr=1e-2)
    assert_same_trajectory(npoptim_trajectory(opt, params, grads), expected)


@pytest.mark.needs("optax", "jax")
def test_matches_scale_by_yogi_options_schedule_maximize():
    optax = pytest.importorskip("optax")
    params, grads = problem(1, scale=0.01)   # g^2 near v: the sign flips in places
    lrs, optax_lrs = schedule(2e-2)
    expected = optax_trajectory(
        lambda: optax.chain(optax.scale_by_yogi(b1=0.8, b2=0.99, eps=1e-4, eps_root=1e-10,
                                                initial_accumulator_value=1e-4),
                            optax.scale_by_learning_rate(optax_lrs)),
        params, [[-g for g in gs] for gs in grads])
    opt = Yogi(params, lr=lrs[0], betas=(0.8, 0.99), eps=1e-4, eps_root=1e-10,
               initial_accumulator_value=1e-4, maximize=True)
    assert_same_trajectory(npoptim_trajectory(opt, params, grads, lrs), expected)


def test_two_steps_without_bias_correction_hand_derived():
    lr, b1, b2, eps, v0 = 0.1, 0.9, 0.999, 1e-3, 0.5
    w0 = np.array([1.0, -2.0])
    g1, g2 = np.array([0.5, -1.0]), np.array([2.0, 0.1])   # g^2 below and above v
    w = w0.copy()
    opt = Yogi([w], lr=lr, initial_accumulator_value=v0, bias_correction=False)
    opt.step([g1])
    opt.step([g2])
    m1 = b1 * v0 + (1 - b1) * g1
    v1 = v0 - (1 - b2) * np.sign(v0 - g1 ** 2) * g1 ** 2
    w1 = w0 - lr * m1 / (np.sqrt(v1) + eps)
    m2 = b1 * m1 + (1 - b1) * g2
    v2 = v1 - (1 - b2) * np.sign(v1 - g2 ** 2) * g2 ** 2
    close(w, w1 - lr * m2 / (np.sqrt(v2) + eps))
    close(opt.state[0]["nu"], v2)
    # v shrinks towards a smaller g^2 and grows towards a larger one
    assert v1[0] < v0 < v1[1] and v2[0] > v1[0] and v2[1] < v1[1]


def test_rule_stays_float32():
    f = np.float32
    h = YogiHyper(*[f(v) for v in (0, 0.9, 0.1, 0.001, 0.1, 0.001, 0, 1e-3, -0.01)])
    assert_typed_float32(yogi_rule, (f(1.0), f(0.5), (f(0.2), f(0.1)), h))


@pytest.mark.parametrize("kw, match", [
    (dict(lr=-1e-3), "learning rate"), (dict(betas=(1.0, 0.9)), "beta"),
    (dict(eps=-1.0), "epsilon"), (dict(eps_root=-1.0), "eps_root"),
    (dict(initial_accumulator_value=-1.0), "initial_accumulator_value"),
    (dict(bias_correction="yes"), "bias_correction")])
def test_bad_hyperparameters_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        Yogi([np.zeros(3)], **kw)


def test_bad_input_changes_nothing():
    w = np.array([1.0, 2.0, 3.0])
    opt = Yogi([w])
    opt.step([np.ones(3)])
    snap = snapshot(opt)
    opt.param_groups[0]["eps"] = float("nan")
    with pytest.raises(ValueError, match="epsilon"):
        opt.step([np.ones(3)])
    opt.param_groups[0]["eps"] = 1e-3
    with pytest.raises(ValueError, match="gradients for"):
        opt.step([np.ones(3), np.ones(3)])
    assert_unchanged(opt, snap)
