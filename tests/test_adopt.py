"""ADOPT: trajectories against optax.contrib.adopt (float64, each option that changes the math,
a schedule), the authors' variant against pytorch_optimizer's copy of the authors' code, a
hand-derived first two steps, and bad input."""
import numpy as np
import pytest
from hand_derived import close
from optax_contrib import (assert_trajectories_close, lr_schedule, needs_optax, optax,
                           problem, run_npoptim, run_optax, run_torch)
from torch_compare import needs_torch

from npoptim.optim.adopt import ADOPT

LRS = lr_schedule()


def _optax_adopt(lr=1e-2, b1=0.9, b2=0.9999, eps=1e-6, nesterov=False, exponent=0.25,
                 offset=0):
    def make(learning_rate):
        kw = dict(use_clipping=exponent is not None, nesterov=nesterov)
        if exponent is not None:
            kw["clip_value_fn"] = lambda count: (count + offset) ** exponent
        return optax.contrib.adopt(lr if learning_rate is None else learning_rate, b1=b1,
                                   b2=b2, eps=eps, **kw)
    return make


OPTAX_CASES = {
    "defaults": ({}, {}),
    "betas-eps": (dict(betas=(0.8, 0.9), eps=1e-3), dict(b1=0.8, b2=0.9, eps=1e-3)),
    "nesterov": (dict(nesterov=True), dict(nesterov=True)),
    "no-clipping": (dict(clip_exponent=None), dict(exponent=None)),
    "clip-exponent": (dict(clip_exponent=0.1), dict(exponent=0.1)),
    "authors-clip-count": (dict(variant="authors"), dict(offset=1)),
}


@needs_optax
@pytest.mark.parametrize("case", sorted(OPTAX_CASES))
def test_trajectories_equal_optax(case):
    ours, theirs = OPTAX_CASES[case]
    params, grad = problem(scale=3.0)
    expected = run_optax(_optax_adopt(**theirs), params, grad)
    actual, opt = run_npoptim(ADOPT, params, grad, lr=1e-2, **ours)
    assert_trajectories_close(actual, expected)
    assert opt.state[0]["step"] == len(actual)


@needs_optax
def test_schedule_equals_optax():
    params, grad = problem(seed=1)
    expected = run_optax(_optax_adopt(nesterov=True), params, grad, lrs=LRS)
    actual, _ = run_npoptim(ADOPT, params, grad, lrs=LRS, nesterov=True)
    assert_trajectories_close(actual, expected)


def _kozistr_run(params, grad, steps, **kw):
    pytorch_optimizer = pytest.importorskip("pytorch_optimizer")
    return run_torch(lambda ts: pytorch_optimizer.ADOPT(ts, foreach=False, **kw), params, grad,
                     steps)[0]


@needs_torch
@pytest.mark.parametrize("decoupled", [False, True])
def test_authors_variant_equals_the_authors_code(decoupled):
    params, grad = problem(seed=2, scale=2.0)
    expected = _kozistr_run(params, grad, 20, lr=1e-2, weight_decay=0.1,
                            weight_decouple=decoupled)
    actual, _ = run_npoptim(ADOPT, params, grad, steps=20, lr=1e-2, weight_decay=0.1,
                            decoupled_weight_decay=decoupled, variant="authors")
    assert_trajectories_close(actual, expected)


def test_first_two_steps_hand_derived():
    lr, b1, b2, eps = 0.1, 0.9, 0.9999, 1e-6
    p = np.array([1.0, -2.0, 0.5])
    g1, g2 = np.array([0.5, -4.0, 0.0]), np.array([2.0, 1.0, 3.0])
    opt = ADOPT([p], lr=lr)
    opt.step([g1])
    close(p, [1.0, -2.0, 0.5])                       # step 1 only sets v
    close(opt.state[0]["exp_avg_sq"], g1 ** 2)
    opt.step([g2])
    n = np.clip(g2 / np.maximum(np.abs(g1), eps), -1.0, 1.0)   # clip 1 ** 0.25 = 1
    m = (1 - b1) * n
    close(p, np.array([1.0, -2.0, 0.5]) - lr * m)
    close(opt.state[0]["exp_avg"], m)
    close(opt.state[0]["exp_avg_sq"], b2 * g1 ** 2 + (1 - b2) * g2 ** 2)


def test_maximize_is_minimizing_the_negated_gradient():
    a, b = np.array([1.0, 2.0]), np.array([1.0, 2.0])
    opt_a, opt_b = ADOPT([a], maximize=True), ADOPT([b])
    for g in (np.array([1.0, -3.0]), np.array([0.5, 2.0]), np.array([-1.0, 1.0])):
        opt_a.step([g])
        opt_b.step([-g])
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("bad", [dict(lr=-1.0), dict(eps=-1e-6), dict(betas=(1.0, 0.9)),
                                 dict(betas=(0.9, 1.0)), dict(weight_decay=-0.1),
                                 dict(clip_exponent=-0.25), dict(clip_exponent="0.25"),
                                 dict(clip_count="step"), dict(variant="adopt2"),
                                 dict(nesterov=1)])
def test_bad_hyperparameters_raise(bad):
    with pytest.raises(ValueError):
        ADOPT([np.zeros(3)], **bad)


def test_bad_input_changes_nothing():
    p = np.array([1.0, 2.0])
    opt = ADOPT([p], lr=0.1)
    opt.step([np.array([1.0, 1.0])])
    opt.step([np.array([1.0, 1.0])])
    before, state = p.copy(), {k: np.copy(v) for k, v in opt.state[0].items()}
    opt.param_groups[0]["clip_exponent"] = -1.0
    with pytest.raises(ValueError):
        opt.step([np.array([1.0, 1.0])])
    opt.param_groups[0]["clip_exponent"] = 0.25
    with pytest.raises(ValueError):
        opt.step([np.array([1.0, 1.0, 1.0])])
    np.testing.assert_array_equal(p, before)
    for k, v in state.items():
        np.testing.assert_array_equal(opt.state[0][k], v)
    with pytest.raises(ValueError):
        ADOPT([{"params": [np.zeros(2)], "variant": "authors"}])
