"""MADGRAD: trajectories against the authors' madgrad 1.3 (float64, each option that changes
the math, an lr schedule, missing gradients) and optax.contrib.madgrad (float64), and bad
input."""
import numpy as np
import pytest
from optax_contrib import (assert_trajectories_close, authors_code, lr_schedule, needs_optax,
                           optax, problem, run_npoptim, run_torch)

from npoptim.optim.madgrad import MADGRAD

madgrad, needs_madgrad = authors_code("madgrad")
STEPS = 24


def _authors_run(params, grad, steps=STEPS, lrs=None, skip=None, **kw):
    return run_torch(lambda ts: madgrad.MADGRAD(ts, **kw), params, grad, steps, lrs, skip)[0]


AUTHORS_CASES = {
    "defaults": dict(),
    "l2-momentum": dict(weight_decay=0.1, momentum=0.5, eps=1e-4),
    "decoupled": dict(weight_decay=0.1, decouple_decay=True),
    "no-momentum": dict(momentum=0.0, weight_decay=0.05),
}


@needs_madgrad
@pytest.mark.parametrize("case", sorted(AUTHORS_CASES))
def test_trajectories_equal_the_authors_code(case):
    kw = AUTHORS_CASES[case]
    params, grad = problem(scale=2.0)
    expected = _authors_run(params, grad, **kw)
    actual, _ = run_npoptim(MADGRAD, params, grad, **kw)
    assert_trajectories_close(actual, expected)


@needs_madgrad
def test_schedule_and_missing_gradients_equal_the_authors_code():
    params, grad = problem(seed=1)
    lrs = lr_schedule(lr=0.05)

    def skip(t, i):
        return i == 1 and t % 3 == 2

    def grad_with_none(t, ps):
        return [None if skip(t, i) else g for i, g in enumerate(grad(t, ps))]
    expected = _authors_run(params, grad, lrs=lrs, skip=skip)
    actual, opt = run_npoptim(MADGRAD, params, grad_with_none, lrs=lrs)
    assert_trajectories_close(actual, expected)
    assert opt.param_groups[0]["k"] == STEPS


def _optax_run(params, grad, lrs, **kw):
    """optax.contrib.madgrad with its step counter in float64: optax computes sqrt(count + 1)
    on its int32 counter, which jax evaluates in float32 (measured 1.8e-10 of the scale from
    the float64 trajectory after two steps)."""
    import jax.numpy as jnp
    from optax_contrib import x64
    with x64():
        table = jnp.asarray(lrs)
        tx = optax.contrib.madgrad(lambda count: table[count.astype(jnp.int32)], **kw)
        ps = [jnp.asarray(p) for p in params]
        state = tuple(s._replace(count=jnp.asarray(0.0)) if hasattr(s, "grad_sum_sq") else s
                      for s in tx.init(ps))
        out = []
        for t in range(STEPS):
            g = [jnp.asarray(x) for x in grad(t, [np.asarray(p) for p in ps])]
            updates, state = tx.update(g, state, ps)
            ps = optax.apply_updates(ps, updates)
            out.append([np.asarray(p) for p in ps])
    return out


@needs_optax
@pytest.mark.parametrize("kw", [dict(), dict(weight_decay=0.1, momentum=0.5, eps=1e-4)])
def test_trajectories_equal_optax(kw):
    params, grad = problem(scale=2.0)
    lrs = lr_schedule(lr=0.05)
    expected = _optax_run(params, grad, lrs, **kw)
    actual, _ = run_npoptim(MADGRAD, params, grad, lrs=lrs, **kw)
    assert_trajectories_close(actual, expected)


@pytest.mark.parametrize("bad", [dict(lr=-1.0), dict(eps=-1.0), dict(momentum=1.0),
                                 dict(momentum=-0.1), dict(weight_decay=-1.0),
                                 dict(decouple_decay="yes")])
def test_bad_hyperparameters_raise(bad):
    with pytest.raises(ValueError):
        MADGRAD([np.zeros(3)], **bad)


def test_bad_step_changes_nothing():
    p = np.array([1.0, 2.0])
    opt = MADGRAD([p], momentum=0.0)
    opt.step([np.array([1.0, 1.0])])
    before, state = p.copy(), {k: v.copy() for k, v in opt.state[0].items()}
    with pytest.raises(ValueError):
        opt.step([np.array([1.0, 1.0, 1.0])])
    opt.param_groups[0]["momentum"] = 0.9   # x0 is missing: refused
    with pytest.raises(ValueError):
        opt.step([np.array([1.0, 1.0])])
    np.testing.assert_array_equal(p, before)
    assert opt.param_groups[0]["k"] == 1
    for k, v in state.items():
        np.testing.assert_array_equal(opt.state[0][k], v)
