"""SOAP: pytorch_optimizer 4.1.0's SOAP in float64 over 24 steps with the bases refreshed
every 3 (a square matrix, a 3-D tensor preconditioned on all three sides, a vector, a matrix
with a side beyond max_precond_dim left alone, a 0-d parameter), weight decay, and its
maximize, normalize_gradient, correct_bias=False, shampoo_beta and merge_dims; once with
torch's float32 QR patched to float64 (to the bit's neighbourhood) and once as it runs (to
the float32 QR's rounding); hand-derived first updates; the variants' switches; bad input.

heavyball 3.2.1's SOAP (``variant="heavyball"``) in float64 (``storage_dtype="float64"``) over
24 steps under a learning-rate schedule, weight decay, refreshes every 3 calls on its
cumulative schedule, the same shapes, and its eps, precondition_1d and merge_dims; its own
float64 LAPACK QR and eigh run unpatched (they are float64 already: heavyball decomposes in
the statistics' dtype). heavyball compiles by default; tests/heavyball_compare.py turns that
off (why: there) and sets torch's default dtype float64 for its float32 scalars (once as it
runs, to their rounding). Each of the variant's switches flipped alone leaves heavyball's
trajectory.

Every side of the cross-checks' statistics has full rank from the first gradient on (a side
no larger than the product of the others), so each eigenbasis is unique up to the signs and
order the module docstring shows SOAP does not depend on."""
import types

import numpy as np
import pytest
from hand_derived import assert_unchanged, close, snapshot
from scheduled_runs import random_problem

from npoptim.optim.dimensions import merge_small_dims as merged_shape
from npoptim.optim.soap import SOAP

try:
    import torch
except ImportError:  # the tests of npoptim alone still run
    torch = None

SHAPES = ((4, 4), (2, 3, 4), (5,), (3, 40), ())
MERGE_SHAPES = ((2, 2, 6), (3, 40), (6, 2, 2))
STEPS = 24
BASE = dict(lr=1e-2, weight_decay=0.1, precondition_frequency=3)
#: the worst float64 error allowed with both QRs in float64, relative to each tensor's scale
#: (measured: 4.4e-16)
RTOL64 = 1e-12
#: ... with both QRs in float32 as the sources run them (measured: 1.9e-8; module docstring)
RTOL_FLOAT32_QR = 1e-6


def problem(seed, shapes=SHAPES):
    return random_problem(seed, shapes, STEPS)


def _float64_qr_torch():
    """torch as pytorch_optimizer's soap.py sees it, with ``torch.float32`` float64: its
    ``power_iter.to(torch.float32)`` before the QR then keeps float64."""
    class Float64QR(types.ModuleType):
        def __getattr__(self, name):
            return getattr(torch, name)
    shim = Float64QR("torch")
    shim.float32 = torch.float64
    return shim


def run_pytorch_optimizer(params, grads, float64_qr, max_dim, **kw):
    import pytorch_optimizer.optimizer.soap as source
    if float64_qr:
        source.torch = _float64_qr_torch()
    try:
        tensors = [torch.tensor(p.copy()) for p in params]
        opt = source.SOAP(tensors, max_precondition_dim=max_dim, **kw)
        out = []
        for step_grads in grads:
            for t, g in zip(tensors, step_grads):
                t.grad = torch.tensor(g.copy())
            opt.step()
            out.append([t.numpy().copy() for t in tensors])
    finally:
        source.torch = torch
    return out


def run_npoptim(params, grads, max_dim, **kw):
    ps = [p.copy() for p in params]
    opt = SOAP(ps, max_precond_dim=max_dim, **kw)
    out = []
    for step_grads in grads:
        opt.step([g.copy() for g in step_grads])
        out.append([p.copy() for p in ps])
    return out, opt


def worst(a, b):
    return max(float(np.max(np.abs(x - y), initial=0.0)) / max(1.0, float(np.max(np.abs(x),
               initial=0.0))) for sa, sb in zip(a, b) for x, y in zip(sa, sb))


OPTIONS = [dict(), dict(maximize=True), dict(normalize_gradient=True),
           dict(correct_bias=False, shampoo_beta=0.8), dict(betas=(0.9, 0.99), eps=1e-3)]


@pytest.mark.needs("torch", "pytorch_optimizer")
@pytest.mark.parametrize("kw", OPTIONS)
def test_matches_pytorch_optimizer_with_a_float64_qr(kw):
    params, grads = problem(0)
    expected = run_pytorch_optimizer(params, grads, True, 20, **BASE, **kw)
    actual, opt = run_npoptim(params, grads, 20, **BASE, qr_dtype="param", **kw)
    assert worst(expected, actual) < RTOL64
    # the refreshes happened (the bases are no longer the first eigendecomposition's) and
    # the wide matrix's 40-side has no statistic
    assert opt.state[3]["GG1"].shape == (0, 0) and opt.state[3]["GG0"].shape == (3, 3)
    assert opt.state[0]["step"] == STEPS


@pytest.mark.needs("torch", "pytorch_optimizer")
def test_matches_pytorch_optimizer_as_it_runs_to_the_float32_qr_rounding():
    params, grads = problem(1)
    expected = run_pytorch_optimizer(params, grads, False, 20, **BASE)
    actual, _ = run_npoptim(params, grads, 20, **BASE)
    error = worst(expected, actual)
    assert 1e-12 < error < RTOL_FLOAT32_QR   # float32's rounding shows, and no more
    # and with npoptim's QR in float64 the difference is that rounding's
    actual64, _ = run_npoptim(params, grads, 20, **BASE, qr_dtype="param")
    assert worst(expected, actual64) > 1e-12


@pytest.mark.needs("torch", "pytorch_optimizer")
def test_merge_dims_matches_pytorch_optimizer():
    params, grads = problem(2, MERGE_SHAPES)
    expected = run_pytorch_optimizer(params, grads, True, 5, **BASE, merge_dims=True)
    actual, opt = run_npoptim(params, grads, 5, **BASE, merge_dims=True, qr_dtype="param")
    assert worst(expected, actual) < RTOL64
    assert opt.state[0]["GG0"].shape == (4, 4) and opt.state[0]["GG1"].shape == (0, 0)
    # (6, 2, 2) is [1, 6, 4] to pytorch_optimizer: a side of 1, the 6 left alone
    assert [opt.state[2][f"GG{i}"].shape for i in range(3)] == [(1, 1), (0, 0), (4, 4)]


def test_merge_rules():
    assert merged_shape((2, 2, 6), 5, "pytorch_optimizer") == (4, 6)
    assert merged_shape((2, 2, 6), 5, "authors") == (4, 6)
    assert merged_shape((6, 2, 2), 5, "pytorch_optimizer") == (1, 6, 4)
    assert merged_shape((6, 2, 2), 5, "authors") == (6, 4)
    assert merged_shape((4, 4), 20, "pytorch_optimizer") == (1,)
    assert merged_shape((4, 4), 20, "authors") == (16,)
    assert merged_shape((128, 64, 3, 3), 1024, "authors") == (128, 576)
    # heavyball: the first side kept, the rest merged from the last one backwards
    assert merged_shape((6, 2, 2), 5, "heavyball") == (6, 4)
    assert merged_shape((2, 2, 6), 5, "heavyball") == (2, 2, 6)
    assert merged_shape((2, 3, 4), 20, "heavyball") == (2, 12)
    assert merged_shape((128, 64, 3, 3), 1024, "heavyball") == (128, 576)
    assert merged_shape((5, 1), 4, "heavyball") == (5,)


def test_pytorch_optimizer_s_merge_to_one_side_is_refused_before_anything_changes():
    p = np.ones((4, 4))
    opt = SOAP([p], max_precond_dim=20, merge_dims=True)
    snap = snapshot(opt)
    with pytest.raises(ValueError, match=r"merges to \[1\]"):
        opt.step([np.ones((4, 4))])
    assert_unchanged(opt, snap)
    opt = SOAP([p], max_precond_dim=20, merge_dims=True, merge_rule="authors")
    opt.step([np.eye(4)])
    assert opt.state[0]["GG0"].shape == (16, 16)


LR, B1, B2, EPS, WD = 0.01, 0.9, 0.8, 1e-8, 0.1


def test_first_call_moves_nothing_and_the_second_is_adam_in_the_basis():
    """G1 diagonal: the statistic (1-β)G1² is diagonal, its eigenbasis a permutation of the
    axes (descending: diag(1, 3) swaps them), and the first update is Adam's elementwise,
    eps-hat form: θ ← (θ - γ√(1-β2)/(1-β1)·(1-β1)G2/(√((1-β2)G2²) + ε))(1 - γλ)."""
    p0 = np.array([[0.5, -1.0], [2.0, 0.25]])
    p = p0.copy()
    opt = SOAP([p], lr=LR, betas=(B1, B2), eps=EPS, weight_decay=WD)
    opt.step([np.diag([1.0, 3.0])])
    np.testing.assert_array_equal(p, p0)
    close(np.abs(opt.state[0]["Q0"]), [[0.0, 1.0], [1.0, 0.0]])
    g2 = np.array([[0.3, -2.0], [1.5, -0.1]])
    opt.step([g2])
    step = LR * np.sqrt(1 - B2) / (1 - B1)
    expected = (p0 - step * (1 - B1) * g2 / (np.sqrt((1 - B2) * g2 * g2) + EPS)) * (1 - LR * WD)
    close(p, expected, rtol=1e-14)


def test_a_vector_is_adam_unless_precondition_1d():
    g1, g2 = np.array([1.0, -2.0, 0.5]), np.array([0.2, 0.4, -3.0])
    p = np.zeros(3)
    opt = SOAP([p], lr=LR, betas=(B1, B2), eps=EPS, weight_decay=0.0, correct_bias=False)
    opt.step([g1])
    opt.step([g2])
    close(p, -LR * (1 - B1) * g2 / (np.sqrt((1 - B2) * g2 * g2) + EPS), rtol=1e-14)
    assert opt.state[0]["GG0"].shape == (0, 0)
    opt = SOAP([np.zeros(3)], precondition_1d=True)
    opt.step([g1])
    assert opt.state[0]["GG0"].shape == (3, 3)
    close(opt.state[0]["GG0"], 0.05 * np.outer(g1, g1))


def test_normalize_floor_and_variants():
    opt = SOAP([np.zeros((2, 2))], variant="authors")
    group = opt.param_groups[0]
    assert (group["normalize_floor"], group["merge_rule"], group["eigh_dtype"],
            group["qr_dtype"]) == (1e-30, "authors", "float32", "float32")
    assert SOAP([np.zeros(2)]).param_groups[0]["normalize_floor"] == "eps"
    # the floor is what the normalization adds: eps=0.5 against 1e-30; the update's entries
    # all have the magnitude c = (1-β1)/(√(1-β2) + ε) (|g| = 1), so RMS(U) = c
    g = np.array([1.0, -1.0])
    out = []
    for floor in ("eps", 1e-30):
        p = np.zeros(2)
        opt = SOAP([p], lr=1.0, eps=0.5, weight_decay=0.0, correct_bias=False,
                   normalize_gradient=True, normalize_floor=floor)
        opt.step([g])
        opt.step([g])
        out.append(p.copy())
    c = 0.05 / (np.sqrt(0.05) + 0.5)
    close(out[0], -g * c / (c + 0.5))
    close(out[1], -g)


def test_refresh_timing_changes_the_trajectory_only_from_the_refresh_on():
    params, grads = problem(3, ((4, 4),))
    a, _ = run_npoptim(params, grads, 20, **dict(BASE, precondition_frequency=4))
    b, _ = run_npoptim(params, grads, 20, **dict(BASE, precondition_frequency=1000))
    # update t = 4 (call 5) refreshes after its step: calls 1-5 agree, call 6 does not
    for call in range(5):
        np.testing.assert_array_equal(a[call][0], b[call][0])
    assert np.max(np.abs(a[5][0] - b[5][0])) > 1e-6


def test_float32_parameters_stay_float32():
    params, grads = problem(4)
    ps = [p.astype(np.float32) for p in params]
    opt = SOAP(ps, **BASE, max_precond_dim=20)
    for step_grads in grads[:8]:
        opt.step([g.astype(np.float32) for g in step_grads])
    assert all(p.dtype == np.float32 for p in ps)
    assert all(v.dtype == np.float32 for s in opt.state.values() for v in s.values()
               if isinstance(v, np.ndarray))
    ref, _ = run_npoptim(params, grads[:8], 20, **BASE)
    for p, r in zip(ps, ref[-1]):
        np.testing.assert_allclose(p, r, rtol=0, atol=1e-5)


@pytest.mark.parametrize("kw, message", [
    (dict(shampoo_beta=1.0), "shampoo_beta"), (dict(precondition_frequency=0),
                                               "precondition_frequency"),
    (dict(max_precond_dim=1.5), "max_precond_dim"), (dict(normalize_floor="tiny"),
                                                     "normalize_floor"),
    (dict(merge_rule="torch"), "merge_rule"), (dict(qr_dtype="float16"), "qr_dtype"),
    (dict(eigh_dtype="float16"), "eigh_dtype"), (dict(betas=(1.0, 0.9)), "beta"),
    (dict(lr=-1.0), "learning rate"), (dict(variant="kron"), "variant"),
    (dict(eps_mode="floor"), "eps_mode"), (dict(refresh_schedule="often"), "refresh_schedule"),
    (dict(basis_order="random"), "basis_order"), (dict(refresh_lift=-1.0), "refresh_lift"),
    (dict(debiased_betas=1), "debiased_betas")])
def test_bad_hyperparameters_raise(kw, message):
    with pytest.raises(ValueError, match=message):
        SOAP([np.zeros((2, 2))], **kw).step([np.ones((2, 2))])


def test_a_gradient_that_overflows_float32_is_refused_before_anything_changes():
    opt = SOAP([np.zeros((2, 2))])
    opt.step([np.eye(2)])
    snap = snapshot(opt)
    with pytest.raises(FloatingPointError, match="float32"):
        opt.step([np.full((2, 2), 1e300)])
    assert_unchanged(opt, snap)


def test_state_dict_round_trip_continues_the_same_trajectory():
    params, grads = problem(5)
    a, opt_a = run_npoptim(params, grads[:10], 20, **BASE)
    ps = [p.copy() for p in a[-1]]
    opt_b = SOAP(ps, **BASE, max_precond_dim=20)
    opt_b.load_state_dict(opt_a.state_dict())
    for step_grads in grads[10:]:
        opt_a.step([g.copy() for g in step_grads])
        opt_b.step([g.copy() for g in step_grads])
    for p, q in zip(opt_a.params, ps):
        np.testing.assert_array_equal(p, q)


# ----------------------------------------------------------------- heavyball's SOAP
#: heavyball's form: every hyperparameter a few bits (exact in float32; heavyball_compare
#: says why), the refreshes every 3 calls by its cumulative float sum (calls 3, 7, 9, 12, ...:
#: the rounding shows by call 7)
HB_LR = 2.0 ** -6
HB_BASE = dict(weight_decay=0.125, precondition_frequency=3, betas=(0.875, 0.9375),
               shampoo_beta=0.875, eps=1e-8)
HB_SHAPES = ((4, 4), (2, 3, 4), (5,), (3, 40), ())
#: with precondition_1d a vector's statistic is a sum of rank-1 terms: a side of 2 has distinct
#: eigenvalues from the first gradient on (one of 5 would not: its basis is not unique)
HB_SHAPES_1D = ((4, 4), (2, 3, 4), (2,), (3, 40), ())
#: with merge_dims and max_precond_dim 4 (heavyball's dim_merger fails on a 0-d tensor: its
#: shape[0]): (4, 2, 2) is (4, 4) to heavyball, (2, 2, 4) stays (the authors' rule: (4, 4)),
#: every side full rank
HB_MERGE_SHAPES = ((4, 4), (4, 2, 2), (5,), (3, 40), (2, 2, 4))
#: the worst float64 error allowed against heavyball, relative to each tensor's scale, with
#: torch's default dtype float64 (measured over the options below: 4.4e-16)
HB_RTOL64 = 1e-12
#: ... as heavyball runs, its β^step of the statistics' debiasing in float32 (measured 3.9e-9)
HB_RTOL_AS_IT_RUNS = 1e-6
HB_OPTIONS = [dict(), dict(eps=1e-3, betas=(0.75, 0.875)), dict(precondition_1d=True),
              dict(merge_dims=True)]


def run_heavyball_soap(params, grads, max_dim, default_float64=True, **kw):
    from heavyball_compare import dyadic_schedule, import_heavyball, trajectory
    heavyball = import_heavyball()
    kw = dict(HB_BASE, **kw)
    kw.setdefault("merge_dims", False)
    return trajectory(lambda ts: heavyball.SOAP(ts, lr=HB_LR, max_precond_dim=max_dim,
                                                storage_dtype="float64", **kw),
                      params, grads, dyadic_schedule(len(grads), HB_LR), default_float64)


def run_npoptim_heavyball(params, grads, max_dim, **kw):
    from heavyball_compare import dyadic_schedule, npoptim_trajectory
    ps = [p.copy() for p in params]
    kw = dict(HB_BASE, **kw)
    kw.setdefault("variant", "heavyball")
    opt = SOAP(ps, lr=HB_LR, max_precond_dim=max_dim, **kw)
    return npoptim_trajectory(opt, ps, grads, dyadic_schedule(len(grads), HB_LR)), opt


def heavyball_state(opt, tensor, name):
    state = opt.state[tensor][0]
    key = next(k for k in state if k.startswith(f"scale_by_soap_{name}_"))
    return state[key]


@pytest.mark.needs("torch", "heavyball")
@pytest.mark.parametrize("kw", HB_OPTIONS)
def test_matches_heavyball(kw):
    """24 steps, a schedule, weight decay; v and the bases too: heavyball keeps v in place at
    a refresh (``basis_order="kept"``) and fixes the signs of Q's columns (R's diagonal
    positive), which npoptim leaves at LAPACK's (the update does not depend on them)."""
    params, grads = problem(6, HB_SHAPES_1D if kw.get("precondition_1d") else
                            HB_MERGE_SHAPES if kw.get("merge_dims") else HB_SHAPES)
    max_dim = 4 if kw.get("merge_dims") else 20
    expected, hb, tensors = run_heavyball_soap(params, grads, max_dim, **kw)
    actual, opt = run_npoptim_heavyball(params, grads, max_dim, **kw)
    error = worst(expected, actual)
    print(f"heavyball {kw}: worst error {error:.3g}")
    assert error < HB_RTOL64, error
    assert worst([params], [expected[-1]]) > 1e-2       # the run moved
    for i, tensor in enumerate(tensors[:4]):
        v = heavyball_state(hb, tensor, "exp_avg_sq").numpy()[0]
        assert worst([[opt.state[i]["exp_avg_sq"]]], [[v.reshape(params[i].shape)]]) < HB_RTOL64
        for k, q in enumerate(heavyball_state(hb, tensor, "Q")):
            if q is None:
                assert opt.state[i][f"Q{k}"].size == 0
                continue
            ours = opt.state[i][f"Q{k}"]
            signs = np.sign(np.sum(ours * q.numpy()[0], axis=0))
            np.testing.assert_allclose(ours * signs, q.numpy()[0], rtol=0, atol=1e-12)
    if kw.get("merge_dims"):
        assert opt.state[1]["GG1"].shape == (4, 4) and "GG2" not in opt.state[1]
        assert opt.state[4]["GG2"].shape == (4, 4)


@pytest.mark.needs("torch", "heavyball")
def test_matches_heavyball_as_it_runs_to_its_float32_scalars():
    params, grads = problem(7, HB_SHAPES)
    expected, _, _ = run_heavyball_soap(params, grads, 20, default_float64=False)
    actual, _ = run_npoptim_heavyball(params, grads, 20)
    error = worst(expected, actual)
    assert 1e-12 < error < HB_RTOL_AS_IT_RUNS, error


@pytest.mark.needs("torch", "heavyball")
def test_each_heavyball_switch_tells_it_apart():
    """Flipping any one of the variant's switches (to pytorch_optimizer's value) moves the
    trajectory away from heavyball's: each is a difference heavyball has (measured: eps_mode
    2.3e-3, debiased_betas 3.9e-3, decay_after_update 3.7e-4, refresh_lift 1.4e-9,
    refresh_schedule 3.5e-2, merge_rule 4.3e-2; basis_order 9.5e-16)."""
    params, grads = problem(6, HB_MERGE_SHAPES)
    expected, _, _ = run_heavyball_soap(params, grads, 4, eps=1e-3, merge_dims=True)
    flips = dict(eps_mode="added", debiased_betas=False, decay_after_update=True,
                 refresh_lift=0.0, refresh_schedule="multiples", merge_rule="authors")
    for name, value in flips.items():
        actual, _ = run_npoptim_heavyball(params, grads, 4, eps=1e-3, merge_dims=True,
                                          **{name: value})
        assert worst(expected, actual) > 1e-10, name
    # the basis order alone does not change the trajectory (only where v and Q keep columns)
    actual, _ = run_npoptim_heavyball(params, grads, 4, eps=1e-3, merge_dims=True,
                                      basis_order="sorted")
    assert worst(expected, actual) < HB_RTOL64


@pytest.mark.needs("heavyball")
def test_cumulative_refresh_is_heavyballs_schedule():
    from heavyball_compare import import_heavyball

    from npoptim.optim.soap import cumulative_refresh
    utils = import_heavyball().utils
    for frequency in (1, 2, 3, 7, 10):
        group = {}
        theirs = [utils.psgd_should_update(group, 1 / frequency) for _ in range(200)]
        ours = [cumulative_refresh(frequency, n) for n in range(1, 201)]
        assert ours == theirs
    assert [n for n in range(1, 13) if cumulative_refresh(3, n)] == [3, 7, 9, 12]


def test_cumulative_refresh_without_heavyball():
    """The running sum of 1/3 in floats: 0.333..., 0.666..., 1.0, ..., 1.9999999999999998 at
    call 6 (no refresh there), 2.333... at call 7; recomputed from 0 for an earlier call."""
    from npoptim.optim.soap import cumulative_refresh
    total, calls = 0.0, []
    for n in range(1, 31):
        before, total = total, total + 1 / 3
        if int(total) > int(before):
            calls.append(n)
    assert [n for n in range(1, 31) if cumulative_refresh(3, n)] == calls
    assert 6 not in calls and 7 in calls
    assert cumulative_refresh(3, 3) and not cumulative_refresh(3, 6)


def test_heavyball_first_update_by_hand():
    """G1 diagonal (the basis a permutation of the axes), then the second call: the averages
    are the bias-corrected m̂ = g, v̂ = g² (t = 1: β̂ = 0), the step γ ĝ/max(|g|, ε) = γ
    sign(g) where |g| > ε, the decay first: θ(1 - γλ) - γ sign(g)."""
    p0 = np.array([[0.5, -1.0], [2.0, 0.25]])
    p = p0.copy()
    opt = SOAP([p], lr=LR, weight_decay=WD, eps=0.5, variant="heavyball")
    opt.step([np.diag([1.0, 3.0])])
    np.testing.assert_array_equal(p, p0)
    g2 = np.array([[0.3, -2.0], [1.5, -0.1]])
    opt.step([g2])
    close(p, p0 * (1 - LR * WD) - LR * g2 / np.maximum(np.abs(g2), 0.5), rtol=1e-14)
    # the statistic is the debiased average over two calls: (β G1G1ᵀ + G2G2ᵀ)/(1 + β)
    beta = 0.95
    close(opt.state[0]["GG0"], (beta * np.diag([1.0, 9.0]) + g2 @ g2.T) / (1 + beta),
          rtol=1e-14)


def test_heavyball_refresh_keeps_columns_in_place_and_shifts():
    from npoptim.optim.soap import refreshed_basis
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 6))
    statistic = a @ a.T
    basis = np.linalg.qr(rng.standard_normal((4, 4)))[0]
    v = rng.uniform(1, 2, (4, 3))
    sorted_q, sorted_v = refreshed_basis(statistic, basis, v, 0, "param")
    kept_q, kept_v = refreshed_basis(statistic, basis, v, 0, "param", basis_order="kept")
    order = np.argsort(-np.sum(basis * (statistic @ basis), axis=0), kind="stable")
    np.testing.assert_array_equal(kept_q[:, order], sorted_q)
    np.testing.assert_array_equal(kept_v, v)
    np.testing.assert_array_equal(sorted_v, v[order])
    # the shift (L + cI)Q moves the basis by about c / gap
    lifted, _ = refreshed_basis(statistic, basis, v, 0, "param", lift=1e-8)
    assert 1e-12 < np.max(np.abs(np.abs(lifted) - np.abs(sorted_q))) < 1e-6


@pytest.mark.needs("torch", "heavyball")
def test_heavyball_replays_the_golden_case():
    from heavyball_compare import golden_case, import_heavyball, trajectory
    heavyball = import_heavyball()
    case, params, grads, lrs, expected = golden_case("SOAP", "SOAP/heavyball/float64")
    h = case["hyperparameters"]
    actual, _, _ = trajectory(lambda ts: heavyball.SOAP(
        ts, lr=h["lr"], betas=tuple(h["betas"]), shampoo_beta=h["shampoo_beta"], eps=h["eps"],
        weight_decay=h["weight_decay"], precondition_frequency=h["precondition_frequency"],
        max_precond_dim=h["max_precond_dim"], merge_dims=False, storage_dtype="float64"),
        params, grads, lrs)
    error = worst(expected, actual)
    print(f"golden replay: {error:.3g}")
    assert error < case["tolerance"]["rtol"], error   # measured 2.2e-16
