"""Rprop against torch.optim.Rprop 2.13, for every CPU option set torch's own suite uses.

Each case runs 24 steps on params of shapes (5,), (3, 4), (2, 3, 4), (1,) split over two
param groups with different hyperparameters, some gradients None, with a state_dict round
trip after step 12. Gradients are random each step, so the signs of successive gradients
agree and disagree (and some are exactly 0), exercising all three branches; some step sizes
hit the clamps. float64 must agree to 1e-12 of the parameters' scale; float32 no worse than
torch's own foreach-vs-single spread plus 4 float32 ulps.
"""
import numpy as np
import pytest

import npoptim

torch = pytest.importorskip("torch")

SHAPES = [(5,), (3, 4), (2, 3, 4), (1,)]
STEPS = 24
ROUND_TRIP_AT = 12
F32_ULPS = 4 * np.finfo(np.float32).eps

# optim_inputs_func_rprop (CPU; capturable and tensor-lr variants are device features), with
# the second group overriding something so the groups differ.
CASES = [
    ({}, {"lr": 0.05}),
    ({"lr": 2e-4}, {"etas": (0.3, 1.1)}),
    ({"etas": (0.5, 1.5)}, {"step_sizes": (1e-3, 0.02)}),  # clamped above and below
    ({"step_sizes": (2e-6, 100)}, {"lr": 0.1, "etas": (0.9, 3.0)}),
    ({"maximize": True}, {"step_sizes": (0.005, 0.05)}),
]
IDS = [f"{o}-{g}" for o, g in CASES]


def to_numpy(value):
    if isinstance(value, torch.Tensor):
        return value.detach().numpy().copy()
    if isinstance(value, list):
        return [to_numpy(v) for v in value]
    return value


def torch_state_dict(opt):
    sd = opt.state_dict()
    return {"state": {k: {n: to_numpy(v) for n, v in s.items()} for k, s in sd["state"].items()},
            "param_groups": sd["param_groups"]}


def scaled_error(a_list, b_list):
    scale = max(1.0, max(float(np.max(np.abs(b))) for b in b_list))
    return max(float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))
               for a, b in zip(a_list, b_list)) / scale


def make(params, options, overrides, lib, **extra):
    groups = [{"params": params[:2]}, {"params": params[2:], **overrides}]
    return lib.Rprop(groups, **options, **extra)


def gradient(rng, shape, dtype):
    g = rng.standard_normal(shape)
    g[rng.random(shape) < 0.1] = 0.0  # exact zeros: the "product is 0" branch, sign 0
    return g.astype(dtype)


def run_pair(options, overrides, dtype, seed=0, foreach=False, round_trip=True):
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    start = [p.copy() for p in params]
    tparams = [torch.tensor(p.copy()) for p in params]
    ours = make(params, options, overrides, npoptim)
    theirs = make(tparams, options, overrides, torch.optim, foreach=foreach)
    mid_state = None
    for step in range(STEPS):
        grads = [None if (step + k) % 7 == 3 else gradient(rng, p.shape, dtype)
                 for k, p in enumerate(params)]
        ours.step(grads)
        for t, g in zip(tparams, grads):
            t.grad = None if g is None else torch.tensor(g)
        theirs.step()
        if round_trip and step + 1 == ROUND_TRIP_AT:
            mid_state = (ours.state_dict(), torch_state_dict(theirs))
            fresh = make(params, {**options, "lr": 0.5}, {}, npoptim)
            fresh.load_state_dict(ours.state_dict())
            ours = fresh
            theirs.load_state_dict(theirs.state_dict())
    moved = max(float(np.max(np.abs(p.astype(np.float64) - s))) for p, s in zip(params, start))
    assert moved > 1e-3, "the optimizer did not move the parameters: the comparison is vacuous"
    return params, [t.numpy() for t in tparams], ours, theirs, mid_state


def assert_states_match(ours_sd, torch_sd, rtol):
    assert set(ours_sd["state"]) == set(torch_sd["state"])
    for index, entry in ours_sd["state"].items():
        tentry = torch_sd["state"][index]
        assert list(entry) == list(tentry), (entry.keys(), tentry.keys())
        for name, value in entry.items():
            tvalue = tentry[name]
            assert np.shape(value) == np.shape(tvalue), name
            assert np.asarray(value).dtype == tvalue.dtype, (name, value, tvalue)
            np.testing.assert_allclose(np.asarray(value, np.float64),
                                       np.asarray(tvalue, np.float64), rtol=rtol, atol=rtol,
                                       err_msg=f"state[{index}][{name!r}]")


@pytest.mark.parametrize("options,overrides", CASES, ids=IDS)
def test_float64_matches_torch(options, overrides):
    ours, theirs, opt, topt, (mid_ours, mid_torch) = run_pair(options, overrides, np.float64)
    err = scaled_error(ours, theirs)
    exact = np.mean(np.concatenate([(a == b).ravel() for a, b in zip(ours, theirs)]))
    print(f"Rprop {options} {overrides}: float64 scaled error {err:.2e}, bit-exact {exact:.0%}")
    assert err <= 1e-12
    assert_states_match(mid_ours, mid_torch, 1e-12)
    assert_states_match(opt.state_dict(), torch_state_dict(topt), 1e-12)


@pytest.mark.parametrize("options,overrides", CASES, ids=IDS)
def test_float32_within_torch_spread(options, overrides):
    ours, single, opt, topt, _ = run_pair(options, overrides, np.float32)
    _, multi, _, _, _ = run_pair(options, overrides, np.float32, foreach=True)
    spread = scaled_error(multi, single)
    err = scaled_error(ours, single)
    print(f"Rprop float32 {options}: error {err:.2e}, torch foreach spread {spread:.2e}")
    assert err <= spread + F32_ULPS, (err, spread)
    # the sign logic is exact: the step sizes agree bit for bit in float32 too
    ours_sd, torch_sd = opt.state_dict(), torch_state_dict(topt)
    for index, entry in ours_sd["state"].items():
        np.testing.assert_array_equal(entry["step_size"], torch_sd["state"][index]["step_size"])


def test_sign_flip_skips_one_step_and_shrinks_the_step_size():
    p = np.zeros(1)
    opt = npoptim.Rprop([p], lr=0.1, etas=(0.5, 2.0))
    opt.step([np.ones(1)])              # first step: prev is 0, factor 1
    assert p[0] == pytest.approx(-0.1)
    opt.step([np.ones(1)])              # same sign: step size doubles
    assert p[0] == pytest.approx(-0.3)
    opt.step([-np.ones(1)])             # sign flip: step size halves, no move, prev = 0
    assert p[0] == pytest.approx(-0.3)
    assert opt.state[0]["prev"][0] == 0 and opt.state[0]["step_size"][0] == pytest.approx(0.1)
    opt.step([-np.ones(1)])             # prev is 0: factor 1, move up by 0.1
    assert p[0] == pytest.approx(-0.2)


def test_state_layout_matches_torch():
    p = np.zeros((2, 2), np.float32)
    opt = npoptim.Rprop([p], lr=0.25)
    opt.step([np.ones((2, 2), np.float32)])
    entry = opt.state_dict()["state"][0]
    assert list(entry) == ["step", "prev", "step_size"]
    assert entry["step"].dtype == np.float32 and entry["step"] == 1
    assert entry["step_size"].dtype == np.float32


def test_invalid_hyperparameters_raise_torch_messages():
    p = np.zeros(2)
    with pytest.raises(ValueError, match="Invalid learning rate: -0.1"):
        npoptim.Rprop([p], lr=-0.1)
    with pytest.raises(ValueError, match="Invalid eta values: 1.0, 0.5"):
        npoptim.Rprop([p], lr=1e-2, etas=(1.0, 0.5))


def test_step_is_atomic():
    a, b = np.ones(3), np.ones((2, 2))
    opt = npoptim.Rprop([a, b])
    opt.step([np.ones(3), np.ones((2, 2))])
    before = (a.copy(), b.copy(), {k: {n: np.copy(v) for n, v in s.items()}
                                   for k, s in opt.state.items()})
    with pytest.raises(ValueError):
        opt.step([np.ones(3), np.ones((3, 2))])
    np.testing.assert_array_equal(a, before[0])
    np.testing.assert_array_equal(b, before[1])
    for k, s in opt.state.items():
        for n, v in s.items():
            np.testing.assert_array_equal(v, before[2][k][n])
