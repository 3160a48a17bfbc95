"""D-Adaptation AdamW: trajectories against the authors' dadaptation 3.2 DAdaptAdam (float64,
each option that changes the math, an lr schedule) and optax.contrib.dadapt_adamw (float64),
the all-zero-gradient rule, and bad input."""
import math

import numpy as np
import pytest
from optax_contrib import (assert_trajectories_close, authors_code, lr_schedule, needs_optax,
                           optax, problem, run_npoptim, run_optax, run_torch)

from npoptim.optim.dadapt import DAdaptAdamW

dadaptation, needs_dadaptation = authors_code("dadaptation")
STEPS = 24


def _authors_run(params, grad, steps=STEPS, lrs=None, decouple=True, **kw):
    return run_torch(lambda ts: dadaptation.DAdaptAdam(ts, decouple=decouple, **kw), params,
                     grad, steps, lrs)


AUTHORS_CASES = {
    "defaults": dict(),
    "bias-correction-decay": dict(use_bias_correction=True, weight_decay=0.1),
    "l2": dict(decouple=False, weight_decay=0.1),
    "betas-eps-d0-growth": dict(betas=(0.8, 0.99), eps=1e-6, d0=1e-3, growth_rate=1.1),
}


@needs_dadaptation
@pytest.mark.parametrize("case", sorted(AUTHORS_CASES))
def test_trajectories_equal_the_authors_code(case, capsys):
    kw = AUTHORS_CASES[case]
    params, grad = problem(scale=2.0)
    expected, theirs = _authors_run(params, grad, **kw)
    actual, ours = run_npoptim(DAdaptAdamW, params, grad, **kw)
    assert_trajectories_close(actual, expected)
    for name in ("d", "numerator_weighted", "k"):
        assert ours.param_groups[0][name] == pytest.approx(theirs.param_groups[0][name],
                                                           rel=1e-12), name
    assert ours.param_groups[0]["d"] > 2 * ours.param_groups[0]["d0"]  # d did adapt


@needs_dadaptation
def test_lr_schedule_equals_the_authors_code(capsys):
    params, grad = problem(seed=1)
    lrs = lr_schedule(lr=1.0)
    expected, _ = _authors_run(params, grad, lrs=lrs)
    actual, _ = run_npoptim(DAdaptAdamW, params, grad, lrs=lrs)
    assert_trajectories_close(actual, expected)


@needs_optax
@pytest.mark.parametrize("kw", [dict(), dict(weight_decay=0.1, betas=(0.8, 0.99), eps=1e-6)])
def test_optax_variant_equals_optax(kw):
    params, grad = problem(scale=2.0)
    theirs = dict(weight_decay=kw.get("weight_decay", 0.0), betas=kw.get("betas", (0.9, 0.999)),
                  eps=kw.get("eps", 1e-8))
    lrs = lr_schedule(lr=1.0)
    expected = run_optax(lambda lr: optax.contrib.dadapt_adamw(1.0 if lr is None else lr,
                                                               **theirs), params, grad, lrs=lrs)
    actual, _ = run_npoptim(DAdaptAdamW, params, grad, lrs=lrs, variant="optax", **kw)
    assert_trajectories_close(actual, expected)


def test_all_zero_gradients_move_nothing():
    p = np.array([1.0, -2.0])
    opt = DAdaptAdamW([p])
    opt.step([np.zeros(2)])
    np.testing.assert_array_equal(p, [1.0, -2.0])
    assert opt.param_groups[0]["k"] == 0


@pytest.mark.parametrize("bad", [dict(lr=-1.0), dict(eps=0.0), dict(d0=0.0),
                                 dict(betas=(1.0, 0.9)), dict(weight_decay=-1.0),
                                 dict(growth_rate=0.0), dict(layer_scale=math.nan),
                                 dict(decouple=1), dict(variant="prodigy")])
def test_bad_hyperparameters_raise(bad):
    with pytest.raises(ValueError):
        DAdaptAdamW([np.zeros(3)], **bad)


def test_different_group_lrs_raise_before_anything_changes():
    a, b = np.array([1.0, 2.0]), np.array([3.0])
    opt = DAdaptAdamW([{"params": [a]}, {"params": [b], "lr": 0.5}])
    with pytest.raises(ValueError, match="one lr"):
        opt.step([np.ones(2), np.ones(1)])
    np.testing.assert_array_equal(a, [1.0, 2.0])
    assert opt.state == {}
