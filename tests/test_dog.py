"""DoG and DoWG: trajectories against optax.contrib.dog / dowg 0.2.8 (float64, every init_step
kind, eps, weight decay, an lr schedule, maximize, two shapes, 24 steps) and DoG against the
authors' dog-optimizer 1.0.3 (one param group: reps_rel, init_eta, weight decay, eps, an lr
schedule), the step sizes hand-derived, two param groups sharing one step size, checkpoints
and bad input."""
import math

import numpy as np
import pytest
from hand_derived import close
from optax_contrib import (assert_trajectories_close, authors_code, lr_schedule, needs_optax,
                           optax, problem, run_npoptim, run_optax, run_torch)

from npoptim.optim.dog import DoG, DoWG

dog, needs_dog = authors_code("dog")

DOG_CASES = {
    "defaults": {},
    "distance-eps": dict(init_step=("distance", 0.1), eps=1e-6),
    "learning-rate": dict(init_step=("learning_rate", 0.05)),
    "heuristic-weight-decay": dict(init_step=("heuristic", 1e-3), weight_decay=0.1),
}
DOWG_CASES = {
    "defaults": {},
    "init-estim-eps": dict(init_estim_sq_dist=0.01, eps=1e-6),
    "weight-decay": dict(weight_decay=0.1),
}


def _optax(make, lr=1.0, **kw):
    if kw.get("weight_decay") == 0.0:
        kw.pop("weight_decay")
    return lambda learning_rate: make(lr if learning_rate is None else learning_rate, **kw)


@needs_optax
@pytest.mark.parametrize("case", sorted(DOG_CASES))
def test_dog_equals_optax(case):
    kw = DOG_CASES[case]
    params, grad = problem(scale=2.0)
    expected = run_optax(_optax(optax.contrib.dog, **kw), params, grad)
    actual, ours = run_npoptim(DoG, params, grad, **kw)
    assert_trajectories_close(actual, expected)
    assert ours.param_groups[0]["max_dist"] > 1e-3   # the distance did grow


@needs_optax
@pytest.mark.parametrize("case", sorted(DOWG_CASES))
def test_dowg_equals_optax(case):
    kw = DOWG_CASES[case]
    params, grad = problem(scale=2.0)
    expected = run_optax(_optax(optax.contrib.dowg, **kw), params, grad)
    actual, ours = run_npoptim(DoWG, params, grad, **kw)
    assert_trajectories_close(actual, expected)
    assert ours.param_groups[0]["estim_sq_dist"] > 1e-3


@needs_optax
@pytest.mark.parametrize("cls, make", [(DoG, "dog"), (DoWG, "dowg")])
def test_lr_schedule_and_maximize_equal_optax(cls, make):
    params, grad = problem(seed=1)
    lrs = lr_schedule(lr=1.0)
    expected = run_optax(_optax(getattr(optax.contrib, make), weight_decay=0.05), params, grad,
                         lrs=lrs)

    def negated(t, ps):
        return [-g for g in grad(t, ps)]
    actual, _ = run_npoptim(cls, params, negated, lrs=lrs, weight_decay=0.05, maximize=True)
    assert_trajectories_close(actual, expected)


AUTHORS_CASES = {
    "defaults": ({}, {}),
    "reps-rel-weight-decay-eps": (dict(reps_rel=1e-3, weight_decay=0.1, eps=1e-6),
                                  dict(init_step=("heuristic", 1e-3), weight_decay=0.1,
                                       eps=1e-6)),
    "init-eta": (dict(init_eta=0.05), dict(init_step=("learning_rate", 0.05))),
}


@pytest.mark.filterwarnings("ignore")
@needs_dog
@pytest.mark.parametrize("case", sorted(AUTHORS_CASES))
def test_dog_equals_the_authors_code(case):
    theirs, ours = AUTHORS_CASES[case]
    params, grad = problem(scale=2.0)
    expected, _ = run_torch(lambda ts: dog.DoG(ts, **theirs), params, grad)
    actual, _ = run_npoptim(DoG, params, grad, **ours)
    assert_trajectories_close(actual, expected)


@needs_dog
def test_dog_lr_schedule_equals_the_authors_code():
    params, grad = problem(seed=1)
    lrs = lr_schedule(lr=1.0)
    expected, _ = run_torch(lambda ts: dog.DoG(ts, weight_decay=0.05), params, grad, lrs=lrs)
    actual, _ = run_npoptim(DoG, params, grad, lrs=lrs, weight_decay=0.05)
    assert_trajectories_close(actual, expected)


def test_step_sizes_hand_derived_and_shared_by_groups():
    a, b = np.array([3.0]), np.array([0.0, 4.0])
    opt = DoG([{"params": [a]}, {"params": [b], "lr": 0.5}], init_step=("distance", 0.5),
              eps=0.0)
    opt.step([np.array([3.0]), np.array([0.0, 4.0])])
    eta = 0.5 / 5.0                        # r_eps / ||g||, ||g|| over both groups
    close(a, [3.0 - eta * 3.0])
    close(b, [0.0, 4.0 - 0.5 * eta * 4.0])
    dist = math.sqrt((eta * 3.0) ** 2 + (0.5 * eta * 4.0) ** 2)
    assert opt.param_groups[1]["max_dist"] == pytest.approx(max(0.5, dist))
    assert opt.param_groups[1]["sum_sq_norm_grads"] == 25.0
    # DoWG: v = r^2 ||g||^2, eta = r^2 / (sqrt(v) + eps) = r / ||g||
    w = np.array([3.0, 4.0])
    opt = DoWG([w], init_estim_sq_dist=0.25, eps=0.0)
    opt.step([np.array([3.0, 4.0])])
    close(w, [3.0 - 0.1 * 3.0, 4.0 - 0.1 * 4.0])
    # heuristic: r_eps = value (1 + ||theta_0||)
    w = np.array([3.0, 4.0])
    opt = DoG([w], init_step=("heuristic", 0.01), eps=0.0)
    opt.step([np.array([3.0, 4.0])])
    close(w, [3.0 - 0.06 / 5 * 3.0, 4.0 - 0.06 / 5 * 4.0])


@pytest.mark.parametrize("cls", [DoG, DoWG])
def test_state_dict_round_trip_continues_bit_for_bit(cls):
    params, grad = problem()
    _, opt_a = run_npoptim(cls, params, grad, steps=5)
    sd = opt_a.state_dict()
    b = [p.copy() for p in opt_a.params]
    opt_b = cls(b)
    opt_b.load_state_dict(sd)
    assert opt_b.param_groups[0]["k"] == 5
    for t in range(5, 8):
        opt_a.step(grad(t, opt_a.params))
        opt_b.step(grad(t, b))
    for p, q in zip(opt_a.params, b):
        np.testing.assert_array_equal(p, q)


@pytest.mark.parametrize("cls, bad", [
    (DoG, dict(lr=-1.0)), (DoG, dict(eps=-1.0)), (DoG, dict(weight_decay=-1.0)),
    (DoG, dict(init_step=("distance", 0.0))), (DoG, dict(init_step=("lr", 1.0))),
    (DoG, dict(init_step=0.1)), (DoG, dict(maximize=1)),
    (DoWG, dict(eps=-1.0)), (DoWG, dict(eps=0.0)), (DoWG, dict(init_estim_sq_dist=0.0)),
    (DoWG, dict(lr=math.nan))])
def test_bad_hyperparameters_raise(cls, bad):
    with pytest.raises(ValueError):
        cls([np.zeros(3)], **bad)


@pytest.mark.parametrize("cls", [DoG, DoWG])
def test_bad_input_changes_nothing(cls):
    w = np.array([1.0, 2.0])
    opt = cls([w])
    with pytest.raises(ValueError, match="shape"):
        opt.step([np.ones(3)])
    with pytest.raises(ValueError, match="whole optimizer"):
        opt.add_param_group({"params": [np.zeros(1)], "eps": 1e-3})
    np.testing.assert_array_equal(w, [1.0, 2.0])
    assert opt.state == {} and opt.param_groups[0]["k"] == 0


def test_steps_are_bit_identical_serial_and_parallel():
    from npoptim.kernels.parallel import parallel_threshold_set
    rng = np.random.default_rng(5)
    w0 = rng.standard_normal(70_000)
    grads = [rng.standard_normal(70_000) for _ in range(3)]
    results = []
    for threshold in (None, 0):
        w = w0.copy()
        with parallel_threshold_set(threshold):
            opt = DoG([w])
            for g in grads:
                opt.step([g])
        results.append(w)
    np.testing.assert_array_equal(results[0], results[1])


@pytest.mark.parametrize("cls, kw", [(DoG, dict(eps=0.0)),
                                     (DoWG, dict(eps=0.0, init_estim_sq_dist=1.0))])
def test_all_zero_gradients_with_eps_zero_take_no_step(cls, kw):
    w = np.array([1.0, 2.0])
    opt = cls([w], **kw)
    opt.step([np.zeros(2)])
    np.testing.assert_array_equal(w, [1.0, 2.0])
    opt.step([np.ones(2)])
    assert np.all(np.isfinite(w)) and not np.array_equal(w, [1.0, 2.0])
