"""The teaching problems' gradients, d2l's closed form, and the per-step recorder."""
import math

import numpy as np
import pytest

import npoptim
from npoptim.teaching import PROBLEMS, StepRecorder, get_problem, trajectory
from npoptim.teaching.problems import least_squares, logistic, quadratic
from npoptim.teaching.trajectory import optimizer_factory

ALL = [get_problem(name) for name in PROBLEMS] + [
    quadratic((0.5, 3.0, 7.0)), quadratic((1.0, 20.0), angle=0.7), least_squares(dim=5),
    logistic(dim=3, l2=0.1)]


def _points(problem, count=20, seed=0):
    rng = np.random.default_rng(seed)
    if problem.bounds is not None:
        low, high = np.array(problem.bounds).T
        return low + (high - low) * rng.random((count, problem.dim))
    return 2 * rng.standard_normal((count, problem.dim))


def _central_difference(loss, x):
    grad = np.empty_like(x)
    for i in range(x.size):
        h = 1e-5 * max(1.0, abs(x[i]))
        up, down = x.copy(), x.copy()
        up[i] += h
        down[i] -= h
        grad[i] = (loss(up) - loss(down)) / (up[i] - down[i])
    return grad


@pytest.mark.parametrize("problem", ALL, ids=lambda p: f"{p.name}{p.dim}")
def test_gradient_matches_central_differences_at_20_points(problem):
    for x in _points(problem):
        analytic = problem.grad(x)
        numeric = _central_difference(problem.loss, x)
        assert analytic.shape == x.shape
        assert np.linalg.norm(numeric - analytic) <= 1e-6 * np.linalg.norm(analytic), (x,)


@pytest.mark.parametrize("problem", ALL, ids=lambda p: f"{p.name}{p.dim}")
def test_known_minima_are_stationary_and_lowest_nearby(problem):
    for minimum in problem.minima:
        x = np.array(minimum)
        assert np.linalg.norm(problem.grad(x)) < 1e-4
        rng = np.random.default_rng(1)
        for _ in range(5):
            assert problem.loss(x + 1e-3 * rng.standard_normal(x.size)) >= problem.loss(x)


def test_sgd_on_d2l_quadratic_equals_the_closed_form_iterates():
    # d2l: x1 <- x1 - eta*0.2*x1, x2 <- x2 - eta*4*x2 from (-5, -2), eta = 0.4
    run = trajectory(optimizer_factory("SGD", lr=0.4), get_problem("d2l_quadratic"), steps=20)
    k = np.arange(21)
    closed = np.stack([-5.0 * (1 - 0.4 * 0.2) ** k, -2.0 * (1 - 0.4 * 4) ** k], axis=1)
    np.testing.assert_allclose(run.xs, closed, rtol=1e-14, atol=0)


def test_trajectory_records_lr_of_each_step_with_a_scheduler():
    problem = get_problem("rosenbrock")
    run = trajectory(optimizer_factory("Adam", lr=0.01), problem, steps=10,
                     scheduler_factory=lambda opt: npoptim.lr_scheduler.StepLR(opt, 3, 0.5))
    expected = [0.01 * 0.5 ** (k // 3) for k in range(10)]
    np.testing.assert_allclose(run.lrs[:, 0], expected, rtol=1e-15)
    assert run.trust_ratios is None and run.diverged_at is None
    assert run.xs.shape == (11, 2) and run.losses[0] == problem.loss(np.array(problem.x0))


def test_divergence_stops_the_run_and_fills_nan():
    run = trajectory(optimizer_factory("SGD", lr=0.6), get_problem("d2l_quadratic"), steps=2000)
    assert run.diverged_at is not None and run.diverged_at < 2000
    assert np.all(np.isnan(run.xs[run.diverged_at:]))
    assert np.all(np.isfinite(run.xs[:run.diverged_at]))


def test_trajectory_checks_x0_and_layers():
    problem = get_problem("beale")
    with pytest.raises(ValueError, match="2 values"):
        trajectory(optimizer_factory("SGD", lr=0.1), problem, x0=(1.0, 2.0, 3.0))
    with pytest.raises(ValueError, match="summing to 2"):
        problem.with_layers((1, 2))


def _lamb_ratio_from_state(w_before, state, lr, betas=(0.9, 0.999), eps=1e-6):
    """Paper-v5 LAMB without weight decay, from the state after the step."""
    t = state["step"]
    u = (state["exp_avg"] / (1 - betas[0] ** t)) / (
        np.sqrt(state["exp_avg_sq"]) / math.sqrt(1 - betas[1] ** t) + eps)
    return np.linalg.norm(w_before) / np.linalg.norm(u), u


def test_recorder_returns_the_lamb_trust_ratio_each_layer_got():
    problem = quadratic((1.0, 4.0, 9.0, 16.0), x0=(1.0, -2.0, 0.5, 3.0)).with_layers((1, 3))
    run_ratios = []
    params = [np.array([1.0]), np.array([-2.0, 0.5, 3.0])]
    opt = npoptim.LAMB(params, lr=0.05)
    recorder = StepRecorder(opt, callbacks=[lambda r: run_ratios.append(r.trust_ratios)])
    for _ in range(6):
        before = [p.copy() for p in params]
        x = np.concatenate(params)
        g = problem.grad(x)
        recorder.step([g[:1].copy(), g[1:].copy()])
        for i, (w, p) in enumerate(zip(before, params)):
            ratio, u = _lamb_ratio_from_state(w, opt.state[i], 0.05)
            assert recorder.records[-1].trust_ratios[i] == pytest.approx(ratio, rel=1e-12)
            np.testing.assert_allclose(p, w - 0.05 * ratio * u, rtol=1e-12)
    assert recorder.trust_ratios().shape == (6, 2)
    assert run_ratios == [r.trust_ratios for r in recorder.records]
    assert [r.step for r in recorder.records] == list(range(1, 7))
    # nothing of the optimizer is patched: the ratios come from explain's tracer
    assert "_update" not in vars(opt)
    assert npoptim.optim.lamb.trust_ratio.__name__ == "trust_ratio"
    from npoptim.explainer import explain
    x0, g0 = [1.0, -2.0, 0.5, 3.0], problem.grad(np.array([1.0, -2.0, 0.5, 3.0]))
    explained = explain("LAMB", params=x0, grad=g0, steps=1, lr=0.05)
    fresh = StepRecorder(npoptim.LAMB([np.array(x0)], lr=0.05))
    fresh.step([g0])
    assert fresh.records[0].trust_ratios[0] == explained.steps[0].trust_ratios[0]["trust_ratio"]


def test_recorder_marks_non_adapting_layers_1_and_missing_gradients_nan():
    a, b = np.array([1.0, 2.0]), np.array([3.0])
    opt = npoptim.LARS([{"params": [a]}, {"params": [b], "exclude_from_layer_adaptation": True}],
                       lr=0.1, momentum=0.9, weight_decay=0.01)
    recorder = StepRecorder(opt)
    recorder.step([np.array([0.5, -1.0]), np.array([2.0])])
    recorder.step([np.array([0.5, -1.0]), None])
    ratios = recorder.trust_ratios()
    assert ratios[0, 1] == 1.0 and math.isnan(ratios[1, 1])
    # LARS paper ratio eta*||w|| / (||g|| + wd*||w||) at step 1
    w, g = np.array([1.0, 2.0]), np.array([0.5, -1.0])
    eta = opt.param_groups[0]["trust_coefficient"]
    expected = eta * np.linalg.norm(w) / (np.linalg.norm(g) + 0.01 * np.linalg.norm(w))
    assert ratios[0, 0] == pytest.approx(expected, rel=1e-12)


def test_lamb_trajectory_has_per_layer_ratios():
    problem = get_problem("rosenbrock").with_layers((1, 1))
    run = trajectory(optimizer_factory("LAMB", lr=0.01), problem, steps=5)
    assert run.trust_ratios.shape == (5, 2) and np.all(run.trust_ratios > 0)
    # one layer per coordinate: ratio |w| / |u|, and LAMB's first u is g / (|g| + eps)
    g = np.abs(problem.grad(np.array(problem.x0)))
    expected = np.abs(problem.x0) * (g + 1e-6) / g
    np.testing.assert_allclose(run.trust_ratios[0], expected, rtol=1e-13)
