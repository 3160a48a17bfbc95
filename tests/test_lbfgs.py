"""LBFGS against torch.optim.LBFGS 2.13, for every option set torch's own suite uses.

LBFGS has one param group and needs a closure. Both optimizers minimize the same objective,
computed by the same NumPy code on the current parameter values (shapes (5,), (3, 4),
(2, 3, 4), (1,)): a coupled quadratic-plus-quartic whose target drifts with the outer step
(so every step has work to do) and a Rosenbrock function. Each case runs 20 steps (each up to
``max_iter`` iterations), with a state_dict round trip after step 10 on both sides.

float64 must agree to 1e-12 of the parameters' scale, and the state (history lists, scalars,
counters) must agree too. L-BFGS feeds every rounding difference back into its history, so
runs that differ in the last bit drift apart within a few steps; npoptim therefore does
torch's float64 dot, sum and add-with-alpha in torch's CPU order, and the float64 runs are
bit-exact, with one exception: torch's sqrt of a float64 0-d tensor (used by the line
search's cubic interpolation) is MKL's, not correctly rounded for about 1% of arguments
(which ones depends on the kernel MKL picks for the CPU), NumPy's is. Each torch run watches
its square roots (:func:`lbfgs_problems.watching_torch_sqrt`); a run that meets such a root
is held bit for bit until that step, and after it to torch's order sensitivity (below).

That order is the one torch's MKL ``ddot`` and ATen ``cascade_sum`` use on some CPUs only
(see :mod:`cpu_probe`): where the probe finds torch summing in another order, the float64
runs are held instead, step by step, to torch's own sensitivity to its order (torch run with
its parameters listed in other orders), times 16, while that sensitivity stays in the rounding
regime; :mod:`test_cpu_orders` checks both comparisons on every machine against torch's runs
as recorded on each kind of CPU, and that a wrong LBFGS fails both.

torch's LBFGS has no foreach variant. In float32 npoptim's dot products are NumPy's (MKL's
float32 order is not reproduced), so float32 is held, step by step over the first 3 steps, to
torch's own sensitivity to summation order (torch run with the parameters listed in the three
other orders, which reorders every dot product and sum), times 4, plus a few float32 ulps.
"""
import numpy as np
import pytest

import cpu_probe
import npoptim
import optax_contrib
from npoptim import flavors
from lbfgs_problems import (OBJECTIVES, REORDERINGS, drifting_quartic, flat,
                            order_sensitivity_failures, rosenbrock, scaled_errors,
                            start_params, torch_trajectory, trajectory, watching_torch_sqrt,
                            wavy)
from torch_compare import needs_torch, rel_error, torch, torch_state_dict

STEPS = 20
ROUND_TRIP_AT = 10
F32_ULPS = 4 * np.finfo(np.float32).eps

# optim_inputs_func_lbfgs (the tensor-lr variant is a device feature), and a few that make
# the history fill and shift and the evaluation budget bind.
CASES = [
    {},
    {"lr": 0.01},
    {"tolerance_grad": 1e-6},
    {"line_search_fn": "strong_wolfe"},
    {"max_iter": 4, "history_size": 3},
    {"line_search_fn": "strong_wolfe", "max_iter": 6, "history_size": 2, "max_eval": 9},
    {"lr": 0.5, "max_iter": 3, "tolerance_change": 1e-5},
]
# and one whose line search meets a square root torch rounds otherwise (measured with MKL's
# AVX2 and older kernels: at step 1, where the runs part; torch's spread then stays in the
# rounding regime for 4 steps)
F64_CASES = ([(c, o) for c in CASES for o in OBJECTIVES]
             + [({"line_search_fn": "strong_wolfe", "lr": 1.5, "history_size": 3}, "rosenbrock")])
F32_STEPS = 3


# ------------------------------------------------------------------------------ runners
def run_ours(options, objective, dtype, steps=STEPS, round_trip=True):
    params = start_params(dtype)
    opt = npoptim.LBFGS(params, **options)
    losses, mid = [], None
    for k in range(steps):
        losses.append(opt.step(lambda: objective(params, k)))
        if round_trip and k + 1 == ROUND_TRIP_AT:
            mid = opt.state_dict()
            fresh = npoptim.LBFGS(params, lr=123.0)
            fresh.load_state_dict(mid)
            opt = fresh
    return params, opt, losses, mid


def torch_closure(tparams, objective):
    """torch's closure for ``objective(list of NumPy params) -> (loss, grads)``."""
    def closure():
        loss, grads = objective([t.numpy() for t in tparams])
        for t, g in zip(tparams, grads):
            t.grad = None if g is None else torch.tensor(g)
        return loss
    return closure


def run_torch(options, objective, dtype, steps=STEPS, round_trip=True, order=None,
              sqrt_departures=None):
    """torch's run; the steps whose line search took a square root torch did not round
    correctly are appended to ``sqrt_departures`` (a list)."""
    tparams = [torch.tensor(p) for p in start_params(dtype)]
    order = tparams if order is None else [tparams[i] for i in order]
    opt = torch.optim.LBFGS(order, **options)
    losses, mid = [], None
    for k in range(steps):
        with watching_torch_sqrt() as departed:
            losses.append(opt.step(torch_closure(tparams, lambda ps: objective(ps, k))))
        if departed and sqrt_departures is not None:
            sqrt_departures.append(k)
        if round_trip and k + 1 == ROUND_TRIP_AT:
            mid = torch_state_dict(opt)
            opt.load_state_dict(opt.state_dict())
    return [t.numpy() for t in tparams], opt, losses, mid


def assert_values_match(ours, theirs, rtol, where):
    if isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_values_match(a, b, rtol, f"{where}[{i}]")
    elif theirs is None:
        assert ours is None, where
    elif isinstance(theirs, np.ndarray):
        assert isinstance(ours, np.ndarray), (where, type(ours))
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, where
        scale = max(1.0, float(np.max(np.abs(theirs))) if theirs.size else 1.0)
        assert float(np.max(np.abs(ours.astype(np.float64) - theirs), initial=0)) <= rtol * scale, \
            (where, ours, theirs)
    else:  # Python numbers: ints exactly, floats closely, and of the same kind
        assert type(ours) is type(theirs), (where, type(ours), type(theirs))
        if isinstance(theirs, int):
            assert ours == theirs, where
        else:
            assert abs(ours - theirs) <= rtol * max(1.0, abs(theirs)), (where, ours, theirs)


def assert_states_match(ours_sd, torch_sd, rtol):
    assert set(ours_sd["state"]) == set(torch_sd["state"]) == {0}
    ours, theirs = ours_sd["state"][0], torch_sd["state"][0]
    assert set(ours) == set(theirs), (sorted(ours), sorted(theirs))
    for name in theirs:
        assert_values_match(ours[name], theirs[name], rtol, name)


# -------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("options,objective", F64_CASES,
                         ids=[f"{c}-{o}" for c, o in F64_CASES])
@needs_torch
def test_float64_matches_torch(options, objective):
    if not cpu_probe.lbfgs_order_is_torchs():
        return check_within_torch_order_sensitivity(options, objective)
    fn = {"drifting_quartic": drifting_quartic, "rosenbrock": rosenbrock}[objective]
    ours, opt, losses, mid = run_ours(options, fn, np.float64)
    departures = []
    theirs, topt, tlosses, tmid = run_torch(options, fn, np.float64, sqrt_departures=departures)
    if departures and not np.array_equal(flat(ours), flat(theirs)):
        return check_until_torch_sqrt_departs(options, objective, departures[0])
    err = rel_error(ours, theirs)
    evals = opt.state[0]["func_evals"]
    print(f"LBFGS {options} {objective}: float64 scaled error {err:.2e}, {evals} evaluations, "
          f"final loss {losses[-1]:.3e}")
    assert err <= 1e-12
    np.testing.assert_allclose(losses, tlosses, rtol=1e-12, atol=1e-300)
    assert_states_match(mid, tmid, 1e-12)
    assert_states_match(opt.state_dict(), torch_state_dict(topt), 1e-11)
    # not vacuous: it moved, and kept evaluating past the first step
    assert rel_error(ours, start_params(np.float64)) > 1e-2
    assert evals > STEPS


def check_until_torch_sqrt_departs(options, objective, step):
    """Where torch's line search took a square root that is not correctly rounded (first at
    ``step``) and the runs came apart: bit for bit before that step, and after it within
    torch's order sensitivity (a last-bit difference of a trial step, which L-BFGS amplifies
    as it does a reordered sum's) while that stays in the rounding regime."""
    ours, _ = trajectory(options, objective, np.float64, STEPS)
    theirs, _ = torch_trajectory(options, objective, np.float64, STEPS)
    reordered = [torch_trajectory(options, objective, np.float64, STEPS, order=order)[0]
                 for order in REORDERINGS]
    np.testing.assert_array_equal(ours[:step], theirs[:step])
    failures, horizon = order_sensitivity_failures(ours, theirs, reordered)
    print(f"LBFGS {options} {objective}: torch's sqrt is not correctly rounded at step {step}; "
          f"bit for bit before it, then checked to step {horizon} against torch's spread")
    assert not failures, failures


def check_within_torch_order_sensitivity(options, objective):
    """Where torch sums in another order than npoptim's: every step within 16x torch's own
    spread under reordering (see :func:`lbfgs_problems.order_sensitivity_failures`)."""
    ours, losses = trajectory(options, objective, np.float64, STEPS)
    theirs, tlosses = torch_trajectory(options, objective, np.float64, STEPS)
    reordered = [torch_trajectory(options, objective, np.float64, STEPS, order=order)[0]
                 for order in REORDERINGS]
    failures, horizon = order_sensitivity_failures(ours, theirs, reordered)
    print(f"LBFGS {options} {objective}: torch sums in another order here "
          f"({cpu_probe.describe_probe()}); checked {horizon} steps against its spread")
    assert horizon >= 3 and not failures, failures
    assert np.max(np.abs(ours[-1] - flat(start_params(np.float64)))) > 1e-2  # it moved


@needs_torch
@pytest.mark.parametrize("objective", OBJECTIVES)
@pytest.mark.parametrize("options", CASES, ids=[str(c) for c in CASES])
def test_float32_within_torch_order_sensitivity(options, objective):
    """Each of the first 3 steps within 4 times torch's own spread (the largest of its runs
    with the params listed in the three other orders, as a running maximum over the steps),
    plus a few ulps. Within 3 steps torch's float32 runs can already be chaotic: Rosenbrock
    with fixed steps and MKL's AVX2 ``sdot`` spreads by 4.3e-2, 1.1e-2 and 4.0e-1 at step 3
    for the three orders (measured on an Intel Xeon, MKL_ENABLE_INSTRUCTIONS=AVX2), so no
    one or two orders measure the spread there."""
    fn = {"drifting_quartic": drifting_quartic, "rosenbrock": rosenbrock}[objective]
    _, opt, _, _ = run_ours(options, fn, np.float32, steps=F32_STEPS, round_trip=False)
    _, topt, _, _ = run_torch(options, fn, np.float32, steps=F32_STEPS, round_trip=False)
    ours, _ = trajectory(options, objective, np.float32, F32_STEPS)
    theirs, _ = torch_trajectory(options, objective, np.float32, F32_STEPS)
    spread = np.maximum.accumulate(np.max(
        [scaled_errors(torch_trajectory(options, objective, np.float32, F32_STEPS,
                                        order=order)[0], theirs) for order in REORDERINGS],
        axis=0))
    err = scaled_errors(ours, theirs)
    print(f"LBFGS float32 {options} {objective}: errors {err}, torch order spread {spread}")
    assert np.all(err <= 4 * spread + F32_ULPS), (err, spread)
    # float32 throughout, as in torch: vectors, history, and the 0-d scalars
    ours_sd, torch_sd = opt.state_dict()["state"][0], torch_state_dict(topt)["state"][0]
    for name in ("d", "prev_flat_grad", "H_diag"):
        assert np.asarray(ours_sd[name]).dtype == torch_sd[name].dtype == np.float32
    assert all(np.asarray(v).dtype == np.float32 for v in ours_sd["ro"] + ours_sd["old_dirs"])


@needs_torch
def test_continuing_from_a_torch_state_dict():
    tparams = [torch.tensor(p) for p in start_params(np.float64)]
    topt = torch.optim.LBFGS(tparams, max_iter=3, history_size=4,
                             line_search_fn="strong_wolfe")
    for k in range(4):
        topt.step(torch_closure(tparams, lambda ps: drifting_quartic(ps, k)))
    params = [t.numpy().copy() for t in tparams]
    opt = npoptim.LBFGS(params)
    opt.load_state_dict(torch_state_dict(topt))
    assert opt.param_groups[0]["line_search_fn"] == "strong_wolfe"
    for k in range(4, 9):
        opt.step(lambda: drifting_quartic(params, k))
        topt.step(torch_closure(tparams, lambda ps: drifting_quartic(ps, k)))
    assert rel_error(params, [t.numpy() for t in tparams]) <= 1e-12
    assert_states_match(opt.state_dict(), torch_state_dict(topt), 1e-11)


def test_returns_the_first_loss_and_stops_at_once_when_optimal():
    p = np.zeros(3)
    opt = npoptim.LBFGS([p])
    calls = []

    def closure():
        calls.append(1)
        return 7.5, [np.zeros(3)]

    assert opt.step(closure) == 7.5
    assert len(calls) == 1
    assert opt.state_dict()["state"] == {0: {"func_evals": 1, "n_iter": 0}}


def test_one_param_group_only():
    a, b = np.zeros(2), np.zeros(3)
    with pytest.raises(ValueError, match="LBFGS doesn't support per-parameter options"):
        npoptim.LBFGS([{"params": [a]}, {"params": [b]}])
    opt = npoptim.LBFGS([a])
    with pytest.raises(ValueError, match="LBFGS doesn't support per-parameter options"):
        opt.add_param_group({"params": [b]})
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        npoptim.LBFGS([a], lr=-1)


def test_needs_a_closure_and_rejects_unknown_line_searches():
    p = np.zeros(2)
    with pytest.raises(TypeError, match="closure"):
        npoptim.LBFGS([p]).step([np.ones(2)])
    opt = npoptim.LBFGS([p], line_search_fn="armijo")
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        opt.step(lambda: (1.0, [np.ones(2)]))
    assert opt.state == {}


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_a_bad_gradient_mid_step_restores_params_and_state(line_search_fn):
    params = start_params(np.float64)
    opt = npoptim.LBFGS(params, line_search_fn=line_search_fn, max_iter=5)
    opt.step(lambda: drifting_quartic(params, 0))
    before = [p.copy() for p in params]
    state_before = opt.state_dict()
    calls = []

    def closure():
        calls.append(1)
        loss, grads = drifting_quartic(params, 1)
        if len(calls) == 3:  # the third evaluation, in the middle of the step
            grads[2] = grads[2][:1]
        return loss, grads

    with pytest.raises(ValueError, match="grads\\[2\\]"):
        opt.step(closure)
    assert len(calls) == 3
    for p, b in zip(params, before):
        np.testing.assert_array_equal(p, b)
    assert_states_match(opt.state_dict(), state_before, 0.0)
    # and the optimizer goes on as if the failed step never happened
    ref_params = [b.copy() for b in before]
    ref = npoptim.LBFGS(ref_params, line_search_fn=line_search_fn, max_iter=5)
    ref.load_state_dict(state_before)
    ref.step(lambda: drifting_quartic(ref_params, 1))
    opt.step(lambda: drifting_quartic(params, 1))
    for p, r in zip(params, ref_params):
        np.testing.assert_array_equal(p, r)


@needs_torch
def test_none_gradients_count_as_zero_as_in_torch():
    params = start_params(np.float64)
    tparams = [torch.tensor(p.copy()) for p in params]
    opt = npoptim.LBFGS(params, max_iter=5)
    topt = torch.optim.LBFGS(tparams, max_iter=5)

    def with_none(ps):
        loss, grads = drifting_quartic(ps, 0)
        grads[1] = None
        return loss, grads

    for _ in range(3):
        opt.step(lambda: with_none(params))
        topt.step(torch_closure(tparams, with_none))
    assert rel_error(params, [t.numpy() for t in tparams]) <= 1e-12
    np.testing.assert_array_equal(params[1], start_params(np.float64)[1])


# ------------------------------------------------------------------ the optax flavor
OPTAX_CONFIGS = {
    "defaults": dict(learning_rate=0.2),
    "memory-3": dict(learning_rate=0.1, memory_size=3),
    "no-precond-scaling": dict(learning_rate=0.05, scale_init_precond=False),
}


# without a line search L-BFGS on the drifting target is chaotic (its pairs mix different
# objectives; XLA's and MKL's dot orders drift apart to 1e-1 within 20 steps): a fixed one
OPTAX_OBJECTIVES = {"quartic": lambda params, k: drifting_quartic(params, 0),
                    "rosenbrock": rosenbrock, "wavy": wavy}


def optax_flavor_run(fn, kw, lrs=None, **switches):
    ours = start_params(np.float64)
    opt = flavors.from_framework("optax", "lbfgs", ours, **kw)
    opt.param_groups[0].update(switches)
    out = []
    for k in range(optax_contrib.STEPS):
        if lrs is not None:
            opt.param_groups[0]["lr"] = lrs[k]
        opt.step(lambda: fn(ours, k))
        out.append([p.copy() for p in ours])
    return out, opt


@optax_contrib.needs_optax
@pytest.mark.parametrize("schedule", [False, True], ids=["constant-lr", "lr-schedule"])
@pytest.mark.parametrize("name", sorted(OPTAX_OBJECTIVES))
@pytest.mark.parametrize("config", sorted(OPTAX_CONFIGS))
def test_optax_flavor_matches_optax_lbfgs_without_line_search(config, name, schedule):
    # optax.lbfgs(linesearch=None): one gradient per update, as the flavor's steps
    kw = dict(OPTAX_CONFIGS[config], linesearch=None)
    fn = OPTAX_OBJECTIVES[name]
    lrs = optax_contrib.lr_schedule(lr=kw["learning_rate"]) if schedule else None
    expected = optax_contrib.run_optax(
        lambda rate: optax_contrib.optax.lbfgs(**dict(kw, **(
            {} if rate is None else {"learning_rate": rate}))),
        start_params(np.float64), lambda k, ps: fn(ps, k)[1], lrs=lrs, jit=True)
    actual, opt = optax_flavor_run(fn, kw, lrs)
    optax_contrib.assert_trajectories_close(actual, expected)
    assert opt.state[0]["n_iter"] == optax_contrib.STEPS
    if (config, name, schedule) == ("defaults", "wavy", False):
        # torch's curvature condition (drop pairs with y.s <= 1e-10) leaves optax's path
        dropped, _ = optax_flavor_run(fn, kw, curvature_condition=True)
        assert np.max(np.abs(flat(dropped[-1]) - flat(expected[-1]))) > 1e-3


def test_optax_flavor_switches_and_refusals():
    opt = npoptim.LBFGS([np.zeros(3)], flavor="optax")
    assert opt.defaults["max_iter"] == 1 and opt.defaults["history_size"] == 10
    assert opt.defaults["tolerance_grad"] == -np.inf and opt.defaults["lr"] == 1.0
    assert "curvature_condition" not in npoptim.LBFGS([np.zeros(3)]).state_dict()[
        "param_groups"][0]
    # linesearch: optax's zoom (its default) or None; tests/test_lbfgs_zoom.py has the zoom
    with pytest.raises(ValueError, match="'zoom'"):
        flavors.from_framework("optax", "lbfgs", [np.zeros(3)], linesearch="backtracking")
    with pytest.raises(ValueError, match="first_step_norm must be one of"):
        npoptim.LBFGS([np.zeros(3)], first_step_norm="l3")
    # the first step: min(1, 1/|g|_2) lr (torch: |g|_1)
    for norm, expected in (("l1", 1 / 7), ("l2", 1 / 5)):
        x = np.zeros(2)
        npoptim.LBFGS([x], lr=1.0, max_iter=1, first_step_norm=norm).step(
            lambda: (0.0, [np.array([3.0, 4.0])]))
        np.testing.assert_allclose(x, -expected * np.array([3.0, 4.0]), rtol=1e-15)


# Two points (x, f, g each) where one rounding of 3 (f1 - f2) / (x1 - x2) and torch's two,
# reciprocal() * other, give cubic minimizers that differ, inside the interval (found by
# search; about one point pair in four differs in d1).
CUBIC_POINTS = tuple(float.fromhex(h) for h in (
    "-0x1.ae0076c363126p+0", "0x1.d54f1b0619c82p-1", "0x1.d100efa38c4b7p-1",
    "0x1.f3536aecb80eap+0", "-0x1.f2a3fb57c00aap-1", "0x1.57ad3c26d185bp+0"))


def test_cubic_interpolate_divides_by_a_0d_step_as_torch_does():
    """Hand-derived: where the steps are 0-d tensors (NumPy scalars here), torch's
    ``3 * (f1 - f2) / (x1 - x2)`` is ``Tensor.__rdiv__``, ``reciprocal() * other``; with
    Python floats it is one division. The minimizers differ on these points."""
    from npoptim.optim.lbfgs import cubic_interpolate
    x1, f1, g1, x2, f2, g2 = CUBIC_POINTS
    span = np.float64(x1) - np.float64(x2)

    def by_hand(d1):
        d2 = np.sqrt(d1 * d1 - g1 * g2)
        x = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))  # x1 <= x2 here
        return min(max(x, x1), x2)

    two_roundings = by_hand(g1 + g2 - (1 / span) * (3 * (f1 - f2)))
    one_rounding = by_hand(g1 + g2 - 3 * (f1 - f2) / (x1 - x2))
    assert x1 < two_roundings < x2 and two_roundings != one_rounding  # the points show it
    assert cubic_interpolate(np.float64(x1), f1, g1, np.float64(x2), f2, g2) == two_roundings
    assert cubic_interpolate(x1, f1, g1, x2, f2, g2) == one_rounding
