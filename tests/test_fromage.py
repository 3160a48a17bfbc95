"""Fromage: optax.fromage 0.2.8 in float64 (variant="optax"; a schedule, maximize; two shapes,
24 steps), the authors' jxbz/fromage step written out below (the default, with its zero-norm
guard), bad input."""
import math

import numpy as np
import pytest
from hand_derived import close
from optax_compare import (assert_same_trajectory, npoptim_trajectory, optax_trajectory,
                           problem, schedule)

from npoptim.optim.fromage import Fromage


@pytest.mark.needs("optax", "jax")
def test_optax_variant_matches_optax_fromage():
    optax = pytest.importorskip("optax")
    params, grads = problem(0)
    expected = optax_trajectory(lambda: optax.fromage(0.05), params, grads)
    opt = Fromage(params, lr=0.05, variant="optax")
    assert_same_trajectory(npoptim_trajectory(opt, params, grads), expected)


@pytest.mark.needs("optax", "jax")
def test_optax_variant_matches_under_a_schedule_and_maximize():
    optax = pytest.importorskip("optax")
    params, grads = problem(1)
    lrs, optax_lrs = schedule(0.1)
    expected = optax_trajectory(lambda: optax.fromage(optax_lrs), params,
                                [[-g for g in gs] for gs in grads])
    opt = Fromage(params, lr=lrs[0], variant="optax", maximize=True)
    assert_same_trajectory(npoptim_trajectory(opt, params, grads, lrs), expected)


def authors_fromage(params, grads, lr):
    """jxbz/fromage fromage.py ``step`` (p_bound=None), in NumPy."""
    params = [p.copy() for p in params]
    out = []
    for step_grads in grads:
        for p, d_p in zip(params, step_grads):
            d_p_norm, p_norm = np.linalg.norm(d_p), np.linalg.norm(p)
            if p_norm > 0.0 and d_p_norm > 0.0:
                p += -lr * d_p * (p_norm / d_p_norm)
            else:
                p += -lr * d_p
            p /= math.sqrt(1 + lr ** 2)
        out.append([p.copy() for p in params])
    return out


def test_default_is_the_authors_step_with_its_zero_norm_guard():
    params, grads = problem(2)
    params[1][...] = 0.0                    # ||w|| = 0 in the first step: ratio 1
    for g in grads[3]:
        g[...] = 0.0                        # ||g|| = 0: ratio 1 (and no move but the shrink)
    expected = authors_fromage(params, grads, 0.05)
    opt = Fromage(params, lr=0.05)
    assert_same_trajectory(npoptim_trajectory(opt, params, grads), expected)


def test_one_step_keeps_the_norm_ratio_of_the_paper():
    # g orthogonal to w: ||w - lr ||w||/||g|| g|| = ||w|| sqrt(1 + lr^2), so the norm is kept
    w = np.array([3.0, 0.0, 4.0])
    Fromage([w], lr=0.5).step([np.array([0.0, 2.0, 0.0])])
    close(w, np.array([3.0, -2.5, 4.0]) / math.sqrt(1.25))
    close(np.linalg.norm(w), 5.0)


@pytest.mark.parametrize("kw, match", [
    (dict(lr=-1e-3), "learning rate"), (dict(min_norm=-1.0), "min_norm"),
    (dict(variant="lars"), "unknown variant"), (dict(maximize=None), "maximize")])
def test_bad_hyperparameters_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        Fromage([np.zeros(3)], **kw)


def test_bad_input_changes_nothing():
    w = np.array([1.0, 2.0, 3.0])
    opt = Fromage([w])
    opt.param_groups[0]["lr"] = float("nan")
    with pytest.raises(ValueError, match="learning rate"):
        opt.step([np.ones(3)])
    opt.param_groups[0]["lr"] = 0.1
    with pytest.raises(ValueError, match="dtype"):
        opt.step([np.ones(3, np.float32)])
    np.testing.assert_array_equal(w, [1.0, 2.0, 3.0])
