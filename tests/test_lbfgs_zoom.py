"""optax's zoom line search (npoptim/optim/zoom_linesearch.py) and LBFGS's optax flavor with it
(``line_search_fn="zoom"``, optax.lbfgs's default), against optax 0.2.8 itself in float64.

optax.lbfgs runs as alias.py's example does (``update(grads, state, params, value=, grad=,
value_fn=)``, jitted), its ``value_fn`` the same NumPy objective as npoptim's closure
(``npoptim.check.optax.numpy_value_fn``), so only the optimizers' arithmetic differs. Steps stop
short of convergence: at the optimum the zoom compares values equal to the last ulp, and both
sides then wander within sqrt(eps) of it by their own roundings.
"""
import inspect

import numpy as np
import pytest

import npoptim
import optax_contrib
from lbfgs_problems import drifting_quartic, flat, rosenbrock, start_params, wavy
from npoptim import flavors
from npoptim.check.optax import numpy_value_fn
from npoptim.optim import lbfgs
from npoptim.optim import zoom_linesearch as zoom_module
from npoptim.optim.zoom_linesearch import zoom_linesearch

STEPS = 20


OBJECTIVES = {"quartic": lambda params, k: drifting_quartic(params, 0),
              "rosenbrock": rosenbrock, "wavy": wavy}
#: (objective, optax.lbfgs keywords, scale_by_zoom_linesearch keywords): each option that
#: changes the math, on an objective where it does
CONFIGS = {
    "defaults-quartic": ("quartic", {}, {}),
    "defaults-rosenbrock": ("rosenbrock", {}, {}),
    "defaults-wavy": ("wavy", {}, {}),
    "memory-3": ("rosenbrock", dict(memory_size=3), {}),
    "no-precond-scaling": ("quartic", dict(scale_init_precond=False), {}),
    "wolfe-constants": ("rosenbrock", {}, dict(slope_rtol=0.3, curv_rtol=0.1)),
    "max-steps-2": ("rosenbrock", dict(learning_rate=3.0), dict(max_linesearch_steps=2)),
    "armijo-only-lr": ("rosenbrock", dict(learning_rate=0.5), dict(approx_dec_rtol=None)),
    "keep-guess": ("wavy", {}, dict(initial_guess_strategy="keep", increase_factor=3.0,
                                    max_learning_rate=2.0, stepsize_precision=1e-3)),
}
#: npoptim's names of optax's zoom keywords (the others are the same)
NPOPTIM_NAMES = {"tol": "linesearch_tol"}


def optax_run(fn, lbfgs_kw, zoom_kw):
    """optax.lbfgs's params after each step and its line searches' evaluation counts."""
    jax, optax = optax_contrib.jax, optax_contrib.optax
    with optax_contrib.x64():
        import jax.numpy as jnp
        search = optax.scale_by_zoom_linesearch(**{
            "max_linesearch_steps": 20, "initial_guess_strategy": "one", **zoom_kw})
        tx = optax.lbfgs(**lbfgs_kw, linesearch=search)
        params = [jnp.asarray(p) for p in start_params(np.float64)]
        state = tx.init(params)
        value_fn = numpy_value_fn(fn, start_params(np.float64))

        @jax.jit
        def update(grads, state, params, value, k):
            return tx.update(grads, state, params, value=value, grad=grads, value_fn=value_fn,
                             k=k)
        out, evaluations = [], []
        for k in range(STEPS):
            loss, grads = fn([np.asarray(p) for p in params], k)
            updates, state = update([jnp.asarray(g) for g in grads], state, params,
                                    jnp.asarray(loss), jnp.asarray(float(k)))
            params = optax.apply_updates(params, updates)
            out.append([np.asarray(p) for p in params])
            evaluations.append(int(state[-1].info.num_linesearch_steps))
    return out, evaluations


def npoptim_run(fn, lbfgs_kw, zoom_kw):
    params = start_params(np.float64)
    opt = flavors.from_framework("optax", "lbfgs", params, **lbfgs_kw, **zoom_kw)
    out, evaluations = [], []
    for k in range(STEPS):
        before = opt.state.get(0, {}).get("func_evals", 0)
        opt.step(lambda: fn(params, k))
        out.append([p.copy() for p in params])
        evaluations.append(opt.state[0]["func_evals"] - before - 1)  # less the closure's own
    return out, evaluations, opt


@optax_contrib.needs_optax
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_zoom_matches_optax_lbfgs(config, monkeypatch):
    name, lbfgs_kw, zoom_kw = CONFIGS[config]
    trials = []  # the zoom's interpolated trial points (phase 2)
    trial_point = zoom_module._trial_point
    monkeypatch.setattr(zoom_module, "_trial_point",
                        lambda *a: trials.append(trial_point(*a)) or trials[-1])
    expected, expected_evals = optax_run(OBJECTIVES[name], lbfgs_kw, zoom_kw)
    actual, evals, opt = npoptim_run(OBJECTIVES[name], lbfgs_kw, zoom_kw)
    # L-BFGS's parameters are one flat vector: its scale is theirs (not a 1-element param's)
    optax_contrib.assert_trajectories_close([[flat(a)] for a in actual],
                                            [[flat(e)] for e in expected])
    assert evals == expected_evals  # the same trials, step by step
    assert opt.defaults["line_search_fn"] == "zoom" and opt.state[0]["n_iter"] == STEPS
    max_steps = zoom_kw.get("max_linesearch_steps", 20)
    # the cases the matrix is built to reach (see CONFIGS)
    if config.startswith("defaults"):
        assert 1 in evals  # the initial step accepted
    if config == "wolfe-constants":
        assert trials and max(evals) >= 3  # the zoom interpolates
    if config == "max-steps-2":
        assert max_steps in evals  # searches end on the fallback
    assert max(evals) <= max_steps


@optax_contrib.needs_optax
def test_torch_conventions_leave_optax_with_the_zoom():
    """The switches matter with the zoom too: torch's pairs (s = t d, only y.s > 1e-10) and
    torch's first step leave optax's path on the nonconvex objective."""
    expected, _ = optax_run(wavy, {}, {})
    params = start_params(np.float64)
    opt = npoptim.LBFGS(params, max_iter=1, history_size=10, tolerance_grad=-np.inf,
                        tolerance_change=-np.inf, line_search_fn="zoom")
    gaps = []
    for k in range(STEPS):
        opt.step(lambda: wavy(params, k))
        gaps.append(np.max(np.abs(flat(params) - flat(expected[k]))))
    assert max(gaps) > 1e-3


# ------------------------------------------------------------------- hand-derived searches
def line(f, df):
    return lambda eta: (f(eta), df(eta), ("at", eta))


def test_a_quadratic_is_solved_by_the_quadratic_interpolation():
    # phi = (eta - 0.3)^2: the guess 1 raises phi (0.49 > 0.09), so [0, 1] is the bracket;
    # the first zoom trial (no cubic yet: its reference point is low) is the quadratic's
    # minimizer through (0, 0.09, -0.6) and (1, 0.49): 0.3, where the slope is 0
    phi = line(lambda e: (e - 0.3) ** 2, lambda e: 2 * (e - 0.3))
    eta, value, extra, evaluations = zoom_linesearch(phi, 0.09, -0.6, "x0")
    assert (eta, value, extra, evaluations) == (pytest.approx(0.3, abs=1e-15),
                                                pytest.approx(0.0, abs=1e-30),
                                                ("at", eta), 2)


def test_the_initial_guess_is_accepted_when_it_meets_both_conditions():
    phi = line(lambda e: (e - 1.0) ** 2, lambda e: 2 * (e - 1.0))
    assert zoom_linesearch(phi, 1.0, -2.0, None)[::3] == (1.0, 1)


def test_the_interval_search_doubles_the_step_until_the_slope_is_small():
    # phi = (eta - 5)^2, curv_rtol 0.5: |slope| <= 5 is wanted; at 1 it is 8, at 2 6, at 4 2
    phi = line(lambda e: (e - 5.0) ** 2, lambda e: 2 * (e - 5.0))
    assert zoom_linesearch(phi, 25.0, -10.0, curv_rtol=0.5)[::3] == (4.0, 3)
    # capped at max_learning_rate 1.5 without a bracket: the cap is taken
    assert zoom_linesearch(phi, 25.0, -10.0, curv_rtol=0.5,
                           max_learning_rate=1.5)[::3] == (1.5, 2)
    # optax's curv_rtol 0.9 takes the guess 1 (|slope| 8 <= 9)
    assert zoom_linesearch(phi, 25.0, -10.0)[::3] == (1.0, 1)


def test_out_of_steps_it_falls_back_to_the_best_safe_step_or_none():
    # a step no trial can satisfy (the curvature never small: slope -1 everywhere below 1,
    # NaN beyond): the last decreasing trial is kept
    def phi(eta):
        if eta > 1.0:
            return float("nan"), float("nan"), None
        return -eta, -1.0, eta
    eta, value, extra, evaluations = zoom_linesearch(phi, 0.0, -1.0, max_linesearch_steps=4)
    assert evaluations == 4 and eta == extra and 0 < eta <= 1.0 and value == -eta
    # nothing decreases and the last trial is NaN: no move (the safe step 0)
    nan = line(lambda e: float("nan"), lambda e: float("nan"))
    assert zoom_linesearch(nan, 1.0, -1.0, "x0", max_linesearch_steps=3)[::2] == (0.0, "x0")


# --------------------------------------------------------------------- the optimizer's API
def test_flavor_defaults_names_and_refusals():
    opt = npoptim.LBFGS([np.zeros(3)], flavor="optax")
    assert opt.defaults["line_search_fn"] == "zoom"  # optax.lbfgs's default line search
    assert opt.defaults["max_linesearch_steps"] == 20
    assert opt.defaults["initial_guess_strategy"] == "one"
    built = flavors.from_framework("optax", "lbfgs", [np.zeros(3)], tol=1e-3,
                                   max_linesearch_steps=4)
    assert built.defaults["linesearch_tol"] == 1e-3 and built.defaults["max_linesearch_steps"] == 4
    assert flavors.from_framework("optax", "lbfgs", [np.zeros(3)],
                                  linesearch=None).defaults["line_search_fn"] is None
    with pytest.raises(ValueError, match="'zoom'"):
        flavors.from_framework("optax", "lbfgs", [np.zeros(3)], linesearch="backtracking")
    signature = inspect.signature(npoptim.LBFGS).parameters
    assert {k: signature[k].default for k in lbfgs.ZOOM_DEFAULTS} == lbfgs.ZOOM_DEFAULTS
    # torch's groups keep torch's keys (the zoom's hyperparameters at their defaults left out)
    group = npoptim.LBFGS([np.zeros(3)]).state_dict()["param_groups"][0]
    assert not set(group) & set(lbfgs.ZOOM_DEFAULTS) and "measured_step" not in group
    for bad in (dict(max_linesearch_steps=0), dict(max_linesearch_steps=2.0),
                dict(curv_rtol=-1.0), dict(slope_rtol=float("nan")), dict(max_learning_rate=0.0),
                dict(initial_guess_strategy="last"), dict(approx_dec_rtol="1e-6")):
        with pytest.raises(ValueError):
            npoptim.LBFGS([np.zeros(3)], line_search_fn="zoom", **bad)
    for search in (None, "strong_wolfe"):   # the zoom's options do nothing there: refused
        with pytest.raises(ValueError, match="curv_rtol: the zoom line search's options"):
            npoptim.LBFGS([np.zeros(3)], line_search_fn=search, curv_rtol=0.1)


def test_a_failing_closure_inside_the_zoom_changes_nothing():
    params = start_params(np.float64)
    opt = npoptim.LBFGS(params, flavor="optax")
    opt.step(lambda: wavy(params, 0))
    before, state = [p.copy() for p in params], opt.state_dict()
    calls = []

    def closure():
        calls.append(1)
        if len(calls) == 2:  # the first trial of the line search
            raise RuntimeError("boom")
        return wavy(params, 1)
    with pytest.raises(RuntimeError, match="boom"):
        opt.step(closure)
    for p, b in zip(params, before):
        np.testing.assert_array_equal(p, b)
    ref_params = [b.copy() for b in before]
    ref = npoptim.LBFGS(ref_params, flavor="optax")
    ref.load_state_dict(state)
    ref.step(lambda: wavy(ref_params, 1))
    opt.step(lambda: wavy(params, 1))
    for p, r in zip(params, ref_params):
        np.testing.assert_array_equal(p, r)
    assert opt.state[0]["stepsize"] == ref.state[0]["stepsize"] > 0
