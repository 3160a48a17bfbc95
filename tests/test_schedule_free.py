"""Schedule-Free SGD and AdamW: trajectories against the authors' schedulefree 1.4.1 (float64,
each option that changes the math, an lr schedule, eval()/train()) and optax.contrib (float64,
both variants), evaluation parameters, checkpoints of the group counters, and bad input."""
import numpy as np
import pytest
from optax_contrib import (assert_trajectories_close, authors_code, lr_schedule, needs_optax,
                           optax, problem, run_npoptim, run_optax, run_torch)

from npoptim.optim.schedule_free import ScheduleFreeAdamW, ScheduleFreeSGD

schedulefree, needs_schedulefree = authors_code("schedulefree")
STEPS = 24
LRS = lr_schedule(lr=0.05)
CLASSES = {"sgd": (ScheduleFreeSGD, "SGDScheduleFree"),
           "adamw": (ScheduleFreeAdamW, "AdamWScheduleFree")}


def _authors_run(name, params, grad, steps=STEPS, lrs=None, **kw):
    """The authors' optimizer (foreach=False): y after each step, and x at the end."""
    def make(ts):
        opt = getattr(schedulefree, name)(ts, foreach=False, **kw)
        opt.train()
        return opt
    out, opt = run_torch(make, params, grad, steps, lrs)
    opt.eval()
    return out, [p.detach().numpy().copy() for group in opt.param_groups
                 for p in group["params"]]


AUTHORS_CASES = {
    "sgd-defaults": ("sgd", dict(lr=0.1)),
    "sgd-momentum-decay-warmup": ("sgd", dict(lr=0.1, momentum=0.8, weight_decay=0.1,
                                              warmup_steps=5)),
    "sgd-r-power": ("sgd", dict(lr=0.1, r=1.0, weight_lr_power=1.0)),
    "adamw-defaults": ("adamw", dict()),
    "adamw-betas-eps-decay-warmup": ("adamw", dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6,
                                                   weight_decay=0.1, warmup_steps=6)),
    "adamw-r": ("adamw", dict(lr=0.01, r=0.5, weight_lr_power=3.0)),
}


@needs_schedulefree
@pytest.mark.parametrize("case", sorted(AUTHORS_CASES))
def test_trajectories_equal_the_authors_code(case):
    kind, kw = AUTHORS_CASES[case]
    cls, name = CLASSES[kind]
    params, grad = problem(scale=2.0)
    expected, expected_x = _authors_run(name, params, grad, **kw)
    actual, opt = run_npoptim(cls, params, grad, **kw)
    assert_trajectories_close(actual, expected)
    assert_trajectories_close([opt.eval_params()], [expected_x])
    opt.eval()
    assert_trajectories_close([opt.params], [expected_x])
    assert opt.param_groups[0]["k"] == STEPS


@needs_schedulefree
@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_lr_schedule_equals_the_authors_code(kind):
    cls, name = CLASSES[kind]
    params, grad = problem(seed=1)
    lrs = LRS if kind == "sgd" else [lr / 5 for lr in LRS]
    expected, _ = _authors_run(name, params, grad, lrs=lrs, warmup_steps=3)
    actual, _ = run_npoptim(cls, params, grad, lrs=lrs, warmup_steps=3)
    assert_trajectories_close(actual, expected)


def _optax_sf(kind, lr, warmup_steps=None, weight_decay=None, b1=0.9, **kw):
    """optax's schedule_free_sgd / schedule_free_adamw; with warmup_steps, their chain written
    out (optax/contrib/_schedule_free.py) with the warmup evaluated on a float64 count: optax's
    own evaluates it on its int32 counter, which rounds the lr to float32."""
    def make(_):
        if warmup_steps is None:
            if kind == "sgd":
                return optax.contrib.schedule_free_sgd(lr, b1=b1, weight_decay=weight_decay)
            return optax.contrib.schedule_free_adamw(lr, b1=b1,
                                                     weight_decay=weight_decay or 0.0, **kw)
        import jax.numpy as jnp
        warmup = optax.warmup_constant_schedule(0.0, lr, warmup_steps)

        def schedule(count):
            return warmup(jnp.asarray(count, jnp.float64))
        if kind == "sgd":
            base = optax.sgd(schedule)
        else:
            base = optax.chain(optax.scale_by_rms(decay=kw.get("b2", 0.999),
                                                  eps=kw.get("eps", 1e-8), eps_in_sqrt=False,
                                                  bias_correction=True),
                               optax.scale_by_learning_rate(schedule))
        return optax.contrib.schedule_free(base, schedule, b1=b1)
    return make


OPTAX_CASES = {
    "sgd": ("sgd", dict(lr=0.1, weight_decay=0.05), {}),
    "sgd-warmup": ("sgd", dict(lr=0.1, warmup_steps=5), dict(variant="optax")),
    "adamw": ("adamw", dict(lr=0.01, weight_decay=0.1, b2=0.99, eps=1e-6),
              dict(betas=(0.9, 0.99), eps=1e-6)),
    "adamw-warmup": ("adamw", dict(lr=0.01, warmup_steps=5, b1=0.8),
                     dict(variant="optax", betas=(0.8, 0.999))),
}


@needs_optax
@pytest.mark.parametrize("case", sorted(OPTAX_CASES))
def test_trajectories_equal_optax(case):
    kind, theirs, ours = OPTAX_CASES[case]
    cls = CLASSES[kind][0]
    params, grad = problem(scale=2.0)
    expected = run_optax(_optax_sf(kind, **theirs), params, grad)
    kw = {k: v for k, v in theirs.items() if k in ("lr", "weight_decay", "warmup_steps")}
    actual, opt = run_npoptim(cls, params, grad, **kw, **ours)
    assert_trajectories_close(actual, expected)


@needs_optax
def test_eval_params_equal_optax():
    params, grad = problem(seed=3)
    tx = optax.contrib.schedule_free_adamw(0.01, b1=0.9)
    import jax.numpy as jnp
    from optax_contrib import x64
    with x64():
        ps = [jnp.asarray(p) for p in params]
        state = tx.init(ps)
        for t in range(10):
            updates, state = tx.update([jnp.asarray(g) for g in grad(t, [np.asarray(p)
                                                                           for p in ps])],
                                       state, ps)
            ps = optax.apply_updates(ps, updates)
        expected = [np.asarray(x) for x in optax.contrib.schedule_free_eval_params(state, ps)]
    _, opt = run_npoptim(ScheduleFreeAdamW, params, grad, steps=10, lr=0.01)
    assert_trajectories_close([opt.eval_params()], [expected])


def test_eval_then_train_restores_y_and_step_refuses_eval_mode():
    params, grad = problem()
    _, opt = run_npoptim(ScheduleFreeSGD, params, grad, steps=5, lr=0.1)
    y = [p.copy() for p in opt.params]
    x = opt.eval_params()
    opt.eval()
    for p, xi in zip(opt.params, x):
        np.testing.assert_array_equal(p, xi)
    with pytest.raises(RuntimeError, match="train"):
        opt.step(grad(5, opt.params))
    np.testing.assert_array_equal(opt.params[0], x[0])
    opt.train()
    for p, yi in zip(opt.params, y):
        np.testing.assert_allclose(p, yi, rtol=0, atol=1e-15)


def test_state_dict_round_trip_continues_bit_for_bit():
    params, grad = problem()
    a, opt_a = run_npoptim(ScheduleFreeAdamW, params, grad, steps=6, lr=0.01, warmup_steps=3)
    sd = opt_a.state_dict()
    assert sd["param_groups"][0]["k"] == 6 and "z" in sd["state"][0]
    b_params = [p.copy() for p in opt_a.params]
    opt_b = ScheduleFreeAdamW(b_params, lr=0.01, warmup_steps=3)
    opt_b.load_state_dict(sd)
    for t in range(6, 9):
        opt_a.step(grad(t, opt_a.params))
        opt_b.step(grad(t, b_params))
    for p, q in zip(opt_a.params, b_params):
        np.testing.assert_array_equal(p, q)


@pytest.mark.parametrize("cls", [ScheduleFreeSGD, ScheduleFreeAdamW])
@pytest.mark.parametrize("bad", [dict(lr=-1.0), dict(weight_decay=-0.1), dict(warmup_steps=-1),
                                 dict(warmup_steps=2.5), dict(r=-1.0),
                                 dict(weight_lr_power=-2.0), dict(variant="sf"),
                                 dict(warmup_lag=1)])
def test_bad_hyperparameters_raise(cls, bad):
    with pytest.raises(ValueError):
        cls([np.zeros(3)], **bad)


@pytest.mark.parametrize("bad", [dict(momentum=0.0), dict(momentum=1.0)])
def test_sgd_momentum_must_be_in_the_open_interval(bad):
    with pytest.raises(ValueError):
        ScheduleFreeSGD([np.zeros(3)], **bad)


@pytest.mark.parametrize("bad", [dict(betas=(0.0, 0.999)), dict(betas=(0.9, 1.0)),
                                 dict(betas=(0.9,)), dict(eps=-1.0)])
def test_adamw_bad_betas_raise(bad):
    with pytest.raises(ValueError):
        ScheduleFreeAdamW([np.zeros(3)], **bad)


def test_bad_step_or_state_changes_nothing():
    p = np.array([1.0, 2.0])
    opt = ScheduleFreeAdamW([p], lr=0.1)
    opt.step([np.array([1.0, 1.0])])
    before, z = p.copy(), opt.state[0]["z"].copy()
    group = dict(opt.param_groups[0])
    with pytest.raises(ValueError):
        opt.step([np.array([1.0, 1.0, 1.0])])
    sd = opt.state_dict()
    sd["param_groups"][0]["k"] = -1
    with pytest.raises(ValueError):
        opt.load_state_dict(sd)
    np.testing.assert_array_equal(p, before)
    np.testing.assert_array_equal(opt.state[0]["z"], z)
    assert {k: v for k, v in opt.param_groups[0].items() if k != "params"} == {
        k: v for k, v in group.items() if k != "params"}
