"""Prodigy: trajectories against the authors' prodigyopt 1.1.2 (float64, each option that
changes the math, an lr schedule, two param groups) and optax.contrib.prodigy (float64), the
all-zero-gradient rule, checkpoints of the group's d, and bad input."""
import math

import numpy as np
import pytest
from optax_contrib import (assert_trajectories_close, authors_code, lr_schedule, needs_optax,
                           optax, problem, run_npoptim, run_optax, run_torch)

from npoptim.optim.prodigy import Prodigy

prodigyopt, needs_prodigyopt = authors_code("prodigyopt")
STEPS = 24


def _authors_run(params, grad, steps=STEPS, lrs=None, **kw):
    return run_torch(lambda ts: prodigyopt.Prodigy(ts, **kw), params, grad, steps, lrs)


AUTHORS_CASES = {
    "defaults": dict(),
    "bias-correction-decay": dict(use_bias_correction=True, weight_decay=0.1),
    "l2-safeguard": dict(decouple=False, weight_decay=0.1, safeguard_warmup=True),
    "betas-beta3-eps-d0": dict(betas=(0.8, 0.99), beta3=0.9, eps=1e-6, d0=1e-3),
    "d-coef-growth": dict(d_coef=0.5, growth_rate=1.05),
}


@pytest.mark.filterwarnings("ignore")
@needs_prodigyopt
@pytest.mark.parametrize("case", sorted(AUTHORS_CASES))
def test_trajectories_equal_the_authors_code(case, capsys):
    kw = AUTHORS_CASES[case]
    params, grad = problem(scale=2.0)
    expected, theirs = _authors_run(params, grad, **kw)
    actual, ours = run_npoptim(Prodigy, params, grad, **kw)
    assert_trajectories_close(actual, expected)
    for name in ("d", "d_max", "d_numerator", "k"):
        assert ours.param_groups[0][name] == pytest.approx(theirs.param_groups[0][name],
                                                           rel=1e-12), name
    assert ours.param_groups[0]["d"] > 2 * ours.param_groups[0]["d0"]  # d did adapt


@needs_prodigyopt
def test_lr_schedule_equals_the_authors_code():
    params, grad = problem(seed=1)
    lrs = lr_schedule(lr=1.0)
    expected, _ = _authors_run(params, grad, lrs=lrs)
    actual, _ = run_npoptim(Prodigy, params, grad, lrs=lrs)
    assert_trajectories_close(actual, expected)


@needs_optax
@pytest.mark.parametrize("kw", [dict(), dict(weight_decay=0.1, safeguard_warmup=True,
                                             betas=(0.8, 0.99), eps=1e-6)])
def test_optax_variant_equals_optax(kw):
    params, grad = problem(scale=2.0)
    theirs = dict(weight_decay=kw.get("weight_decay", 0.0),
                  safeguard_warmup=kw.get("safeguard_warmup", False),
                  betas=kw.get("betas", (0.9, 0.999)), eps=kw.get("eps", 1e-8))
    expected = run_optax(lambda lr: optax.contrib.prodigy(1.0 if lr is None else lr, **theirs),
                         params, grad, lrs=lr_schedule(lr=1.0))
    actual, _ = run_npoptim(Prodigy, params, grad, lrs=lr_schedule(lr=1.0), variant="optax",
                            **kw)
    assert_trajectories_close(actual, expected)


def test_all_zero_gradients_move_nothing_until_s_is_nonzero():
    p = np.array([1.0, -2.0])
    opt = Prodigy([p])
    opt.step([np.zeros(2)])
    np.testing.assert_array_equal(p, [1.0, -2.0])
    assert opt.param_groups[0]["k"] == 0 and opt.state[0]["step"] == 0
    opt.step([np.array([1.0, 1.0])])
    assert opt.param_groups[0]["k"] == 1 and not np.array_equal(p, [1.0, -2.0])


def test_state_dict_round_trip_continues_bit_for_bit():
    params, grad = problem()
    _, opt_a = run_npoptim(Prodigy, params, grad, steps=6)
    sd = opt_a.state_dict()
    assert sd["state"][0]["p0"].shape == (params[0].size,)
    b = [p.copy() for p in opt_a.params]
    opt_b = Prodigy(b)
    opt_b.load_state_dict(sd)
    for t in range(6, 9):
        opt_a.step(grad(t, opt_a.params))
        opt_b.step(grad(t, b))
    for p, q in zip(opt_a.params, b):
        np.testing.assert_array_equal(p, q)


@pytest.mark.parametrize("bad", [dict(lr=-1.0), dict(eps=0.0), dict(d0=0.0), dict(beta3=1.0),
                                 dict(betas=(1.0, 0.9)), dict(weight_decay=-1.0),
                                 dict(growth_rate=0.0), dict(d_coef=math.nan),
                                 dict(decouple=1), dict(variant="dadapt")])
def test_bad_hyperparameters_raise(bad):
    with pytest.raises(ValueError):
        Prodigy([np.zeros(3)], **bad)


def test_different_group_lrs_raise_before_anything_changes():
    a, b = np.array([1.0, 2.0]), np.array([3.0])
    opt = Prodigy([{"params": [a]}, {"params": [b], "lr": 0.5}])
    with pytest.raises(ValueError, match="one lr"):
        opt.step([np.ones(2), np.ones(1)])
    np.testing.assert_array_equal(a, [1.0, 2.0])
    assert opt.state == {}
    opt.param_groups[1]["lr"] = 0.0    # 0 is allowed, as in the authors' code
    opt.step([np.ones(2), np.ones(1)])


def test_steps_are_bit_identical_serial_and_parallel():
    # the dot product and the |s| sum go through reduction.sum_pair, whose order is fixed
    from npoptim.kernels.parallel import parallel_threshold_set
    rng = np.random.default_rng(5)
    w0 = rng.standard_normal(70_000)
    grads = [rng.standard_normal(70_000) for _ in range(3)]
    results = []
    for threshold in (None, 0):
        w = w0.copy()
        with parallel_threshold_set(threshold):
            opt = Prodigy([w])
            for g in grads:
                opt.step([g])
        results.append((w, opt.param_groups[0]["d"]))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    assert results[0][1] == results[1][1]
