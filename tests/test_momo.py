"""MoMo and MoMo-Adam: optax.contrib.momo / momo_adam 0.2.8 (variant="optax") and the authors'
momo-opt 0.1.0 (the default) in float64 on a quartic objective (each option that changes the
math: beta(s), eps, lower_bound, each weight decay form, the adaptive lower bound, the authors'
bias correction; an lr schedule; maximize; two shapes, 24 steps), the first step hand-derived,
two param groups sharing one step size, checkpoints and bad input."""
import numpy as np
import pytest
from hand_derived import close
from optax_compare import (assert_same_trajectory, optax_value_trajectory, quartic_objective,
                           schedule)

from npoptim.optim.momo import Momo, MomoAdam

try:
    import torch
    import momo as momo_opt
except ImportError:  # pragma: no cover - the tests that need them skip
    torch = momo_opt = None
needs_momo_opt = pytest.mark.needs("torch", "momo")

STEPS = 24


def _npoptim_run(cls, params0, f, lrs=None, steps=STEPS, **kw):
    params = [p.copy() for p in params0]
    opt = cls(params, **kw)
    out = []
    for t in range(steps):
        if lrs is not None:
            opt.param_groups[0]["lr"] = lrs[t]
        opt.step(lambda: f(params))
        out.append([p.copy() for p in params])
    return out, opt


MOMO_CASES = {
    "defaults": ({}, {}),
    "beta-lower-bound": (dict(beta=0.5, lower_bound=-0.5, lr=0.5),
                         dict(beta=0.5, lower_bound=-0.5, learning_rate=0.5)),
    "weight-decay": (dict(weight_decay=0.1), dict(weight_decay=0.1)),
    "adapt-lower-bound": (dict(adapt_lower_bound=True, lower_bound=-1.0, weight_decay=0.05),
                          dict(adapt_lower_bound=True, lower_bound=-1.0, weight_decay=0.05)),
}
MOMO_ADAM_CASES = {
    "defaults": ({}, {}),
    "betas-eps": (dict(betas=(0.8, 0.99), eps=1e-6, lr=0.1),
                  dict(b1=0.8, b2=0.99, eps=1e-6, learning_rate=0.1)),
    "lower-bound-weight-decay": (dict(lower_bound=0.05, weight_decay=0.1, lr=0.1),
                                 dict(lower_bound=0.05, weight_decay=0.1, learning_rate=0.1)),
    "adapt-lower-bound": (dict(adapt_lower_bound=True, lower_bound=-1.0, lr=0.1),
                          dict(adapt_lower_bound=True, lower_bound=-1.0, learning_rate=0.1)),
}


@pytest.mark.needs("optax", "jax")
@pytest.mark.parametrize("case", sorted(MOMO_CASES))
def test_momo_equals_optax(case):
    ours, theirs = MOMO_CASES[case]
    params0, f = quartic_objective(0)
    expected = optax_value_trajectory(params0, f, lambda optax: optax.contrib.momo(**theirs))
    actual, _ = _npoptim_run(Momo, params0, f, variant="optax", **ours)
    assert_same_trajectory(actual, expected)


@pytest.mark.needs("optax", "jax")
@pytest.mark.parametrize("case", sorted(MOMO_ADAM_CASES))
def test_momo_adam_equals_optax(case):
    ours, theirs = MOMO_ADAM_CASES[case]
    params0, f = quartic_objective(0)
    expected = optax_value_trajectory(params0, f, lambda optax: optax.contrib.momo_adam(**theirs))
    actual, _ = _npoptim_run(MomoAdam, params0, f, variant="optax", **ours)
    assert_same_trajectory(actual, expected)


@pytest.mark.needs("optax", "jax")
@pytest.mark.parametrize("cls, make, lr", [(Momo, "momo", 0.8), (MomoAdam, "momo_adam", 0.2)])
def test_lr_schedule_and_maximize_equal_optax(cls, make, lr):
    params0, f = quartic_objective(1)
    lrs, optax_lrs = schedule(lr)
    # maximize -f with npoptim = minimize f with optax
    expected = optax_value_trajectory(params0, f, lambda optax: getattr(optax.contrib, make)(
        learning_rate=optax_lrs, weight_decay=0.05, adapt_lower_bound=True))
    actual, _ = _npoptim_run(cls, params0, lambda ps: f(ps, sign=-1.0), lrs=lrs,
                             weight_decay=0.05, adapt_lower_bound=True, maximize=True,
                             variant="optax")
    assert_same_trajectory(actual, expected)


def _authors_run(make, params0, f, lrs=None):
    # the authors' code creates <g, theta>'s average (grad_dot_w) in torch's default dtype:
    # float64 here, so that it computes in float64 throughout
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return _authors_steps(make, params0, f, lrs)
    finally:
        torch.set_default_dtype(previous)


def _authors_steps(make, params0, f, lrs):
    ts = [torch.tensor(p, requires_grad=True) for p in params0]
    opt = make(ts)
    out = []
    for t in range(STEPS):
        if lrs is not None:
            opt.param_groups[0]["lr"] = lrs[t]

        def closure():
            loss, grads = f([x.detach().numpy() for x in ts])
            for x, g in zip(ts, grads):
                x.grad = torch.tensor(g)
            return torch.tensor(loss, dtype=torch.float64)
        opt.step(closure)
        out.append([x.detach().numpy().copy() for x in ts])
    return out


AUTHORS_MOMO = {
    "defaults": ({}, {}),
    "fstar-weight-decay": (dict(use_fstar=True, lb=-1.0, weight_decay=0.05, beta=0.5),
                           dict(adapt_lower_bound=True, lower_bound=-1.0, weight_decay=0.05,
                                beta=0.5)),
    "bias-correction": (dict(bias_correction=True, weight_decay=0.05, lr=0.5),
                        dict(bias_correction=True, weight_decay=0.05, lr=0.5)),
}
AUTHORS_MOMO_ADAM = {
    "defaults": ({}, {}),
    "fstar-divide": (dict(use_fstar=True, lb=-1.0, weight_decay=0.05, lr=0.1),
                     dict(adapt_lower_bound=True, lower_bound=-1.0, weight_decay=0.05, lr=0.1)),
    "multiply-betas": (dict(divide=False, weight_decay=0.05, betas=(0.8, 0.99), eps=1e-6,
                            lr=0.1),
                       dict(weight_decay_form="multiply", weight_decay=0.05, betas=(0.8, 0.99),
                            eps=1e-6, lr=0.1)),
}


@pytest.mark.filterwarnings("ignore")
@needs_momo_opt
@pytest.mark.parametrize("cls, case", [(Momo, c) for c in sorted(AUTHORS_MOMO)]
                         + [(MomoAdam, c) for c in sorted(AUTHORS_MOMO_ADAM)])
def test_equals_the_authors_code(cls, case):
    theirs, ours = (AUTHORS_MOMO if cls is Momo else AUTHORS_MOMO_ADAM)[case]
    make = momo_opt.Momo if cls is Momo else momo_opt.MomoAdam
    params0, f = quartic_objective(0)
    expected = _authors_run(lambda ts: make(ts, **theirs), params0, f)
    actual, _ = _npoptim_run(cls, params0, f, **ours)
    assert_same_trajectory(actual, expected)


@pytest.mark.filterwarnings("ignore")
@needs_momo_opt
@pytest.mark.parametrize("cls", [Momo, MomoAdam])
def test_lr_schedule_equals_the_authors_code(cls):
    make = momo_opt.Momo if cls is Momo else momo_opt.MomoAdam
    params0, f = quartic_objective(1)
    lrs, _ = schedule(0.8 if cls is Momo else 0.2)
    expected = _authors_run(lambda ts: make(ts, weight_decay=0.05), params0, f, lrs=lrs)
    actual, _ = _npoptim_run(cls, params0, f, lrs=lrs, weight_decay=0.05)
    assert_same_trajectory(actual, expected)


def test_first_step_hand_derived_and_global_over_groups():
    a, b = np.array([3.0]), np.array([0.0, 4.0])
    opt = Momo([{"params": [a]}, {"params": [b]}], lr=10.0)
    loss = opt.step(lambda: (12.5, [np.array([3.0]), np.array([0.0, 4.0])]))
    assert loss == 12.5
    # first step: m = g, barf = f, gamma = <g, theta> = <m, theta>: tau = f / |m|^2
    tau = 12.5 / 25.0
    close(a, [3.0 - tau * 3.0])
    close(b, [0.0, 4.0 - tau * 4.0])
    assert opt.param_groups[1]["barf"] == 12.5 and opt.param_groups[1]["k"] == 1
    # the lr caps the step
    w = np.array([1.0])
    opt = Momo([w], lr=0.1)
    opt.step(lambda: (100.0, [np.array([1.0])]))
    close(w, [0.9])
    # a zero momentum takes no step
    w = np.array([1.0])
    opt = MomoAdam([w])
    opt.step(lambda: (1.0, [np.zeros(1)]))
    close(w, [1.0])


@pytest.mark.parametrize("cls", [Momo, MomoAdam])
def test_state_dict_round_trip_continues_bit_for_bit(cls):
    params0, f = quartic_objective(2)
    _, opt_a = _npoptim_run(cls, params0, f, steps=5, adapt_lower_bound=True)
    sd = opt_a.state_dict()
    b = [p.copy() for p in opt_a.params]
    opt_b = cls(b, adapt_lower_bound=True)
    opt_b.load_state_dict(sd)
    assert opt_b.param_groups[0]["k"] == 5
    for _ in range(3):
        opt_a.step(lambda: f(opt_a.params))
        opt_b.step(lambda: f(b))
    for p, q in zip(opt_a.params, b):
        np.testing.assert_array_equal(p, q)


@pytest.mark.parametrize("cls, kw, match", [
    (Momo, dict(lr=-1.0), "learning rate"), (Momo, dict(beta=1.0), "beta"),
    (Momo, dict(weight_decay=-1.0), "weight_decay"),
    (Momo, dict(lower_bound=float("nan")), "lower_bound"),
    (Momo, dict(adapt_lower_bound=1), "adapt_lower_bound"),
    (MomoAdam, dict(betas=(0.9, 1.0)), "beta"), (MomoAdam, dict(eps=-1.0), "epsilon"),
    (Momo, dict(variant="momo_plus"), "variant"), (Momo, dict(bias_correction=1), "bias_corr"),
    (Momo, dict(weight_decay_form="multiply"), "weight_decay_form")])
def test_bad_hyperparameters_raise(cls, kw, match):
    with pytest.raises(ValueError, match=match):
        cls([np.zeros(3)], **kw)


@pytest.mark.parametrize("cls", [Momo, MomoAdam])
def test_bad_input_changes_nothing(cls):
    w = np.array([1.0, 2.0])
    opt = cls([w, np.zeros(1)])
    with pytest.raises(TypeError, match="needs the loss"):
        opt.step([np.ones(2), np.ones(1)])
    with pytest.raises(TypeError, match="real loss"):
        opt.step(lambda: (None, [np.ones(2), np.ones(1)]))
    with pytest.raises(ValueError, match="shape"):
        opt.step(lambda: (1.0, [np.ones(3), np.ones(1)]))
    with pytest.raises(ValueError, match="whole optimizer"):
        opt.add_param_group({"params": [np.zeros(1)], "lower_bound": 1.0})
    opt.add_param_group({"params": [np.zeros(1)], "lr": 0.5})
    with pytest.raises(ValueError, match="one lr"):
        opt.step(lambda: (1.0, [np.ones(2), np.ones(1), np.ones(1)]))
    np.testing.assert_array_equal(w, [1.0, 2.0])
    assert opt.state == {} and opt.param_groups[0]["k"] == 0
