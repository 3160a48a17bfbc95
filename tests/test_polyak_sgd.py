"""Polyak SGD: optax.polyak_sgd 0.2.8 in float64 on a quartic objective (sps and sps+,
f_min, eps, max_learning_rate, a scaling schedule, maximize; two shapes, 24 steps), the step
size hand-derived, bad input."""
import numpy as np
import pytest
from hand_derived import close
from optax_compare import (assert_same_trajectory, optax_value_trajectory, quartic_objective,
                           schedule)

from npoptim.optim.polyak_sgd import PolyakSGD

STEPS = 24


def _npoptim_run(params0, f, lrs=None, **kw):
    params = [p.copy() for p in params0]
    opt = PolyakSGD(params, **kw)
    out = []
    for t in range(STEPS):
        if lrs is not None:
            opt.param_groups[0]["lr"] = lrs[t]
        opt.step(lambda: f(params))
        out.append([p.copy() for p in params])
    return out


@pytest.mark.needs("optax", "jax")
@pytest.mark.parametrize("kw", [dict(), dict(max_learning_rate=0.05, f_min=-0.5, eps=1e-3),
                                dict(mode="sps+", f_min=2.0, max_learning_rate=0.5)],
                         ids=["defaults", "clipped-fmin-eps", "sps+"])
def test_matches_optax_polyak_sgd(kw):
    params0, f = quartic_objective(0)
    okw = {"variant" if k == "mode" else k: v for k, v in kw.items()}
    expected = optax_value_trajectory(params0, f, lambda optax: optax.polyak_sgd(**okw))
    assert_same_trajectory(_npoptim_run(params0, f, **kw), expected)


@pytest.mark.needs("optax", "jax")
def test_matches_optax_with_a_scaling_schedule_and_maximize():
    params0, f = quartic_objective(1)
    lrs, optax_lrs = schedule(0.8)
    # maximize -f with npoptim = minimize f with optax
    expected = optax_value_trajectory(params0, f, lambda optax: optax.polyak_sgd(
        scaling=optax_lrs, max_learning_rate=0.5))
    actual = _npoptim_run(params0, lambda ps: f(ps, sign=-1.0), lrs=lrs, max_learning_rate=0.5,
                          maximize=True)
    assert_same_trajectory(actual, expected)


def test_step_size_hand_derived_and_global_over_groups():
    a, b = np.array([3.0]), np.array([0.0, 4.0])
    opt = PolyakSGD([{"params": [a]}, {"params": [b], "lr": 0.5}], max_learning_rate=10.0)
    loss = opt.step(lambda: (12.5, [np.array([3.0]), np.array([0.0, 4.0])]))
    assert loss == 12.5
    gamma = 12.5 / (9.0 + 0.25 * 16.0)       # ||u||^2 = sum of lr^2 ||g||^2 over both groups
    close(a, [3.0 - gamma * 3.0])
    close(b, [0.0, 4.0 - 0.5 * gamma * 4.0])
    # a zero gradient takes no step (||g||^2 + eps below 2^-52)
    opt.step(lambda: (1.0, [np.zeros(1), np.zeros(2)]))
    close(a, [3.0 - gamma * 3.0])


@pytest.mark.parametrize("kw, match", [
    (dict(lr=-1.0), "learning rate"), (dict(max_learning_rate=-1.0), "max_learning_rate"),
    (dict(eps=-1.0), "eps"), (dict(f_min=float("inf")), "f_min"), (dict(mode="sps++"), "mode")])
def test_bad_hyperparameters_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        PolyakSGD([np.zeros(3)], **kw)


def test_bad_input_changes_nothing():
    w = np.array([1.0, 2.0])
    opt = PolyakSGD([w])
    with pytest.raises(TypeError, match="needs the loss"):
        opt.step([np.ones(2)])
    with pytest.raises(TypeError, match="real loss"):
        opt.step(lambda: (None, [np.ones(2)]))
    with pytest.raises(ValueError, match="shape"):
        opt.step(lambda: (1.0, [np.ones(3)]))
    with pytest.raises(ValueError, match="whole optimizer"):
        opt.add_param_group({"params": [np.zeros(1)], "f_min": 1.0})
    np.testing.assert_array_equal(w, [1.0, 2.0])
