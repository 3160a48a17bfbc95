"""ASGD against torch.optim.ASGD 2.13, for every CPU option set torch's own suite uses.

Each case runs 24 steps on params of shapes (5,), (3, 4), (2, 3, 4), (1,) split over two
param groups with different hyperparameters, some gradients None, with a state_dict round
trip after step 12 (on both sides: torch's load_state_dict casts eta and mu to the
parameter's dtype, and so does ours). float64 must agree to 1e-12 of the parameters' scale;
float32 no worse than torch's own foreach-vs-single spread plus 4 float32 ulps.
"""
import numpy as np
import pytest

import npoptim

torch = pytest.importorskip("torch")

SHAPES = [(5,), (3, 4), (2, 3, 4), (1,)]
STEPS = 24
ROUND_TRIP_AT = 12
F32_ULPS = 4 * np.finfo(np.float32).eps

# optim_inputs_func_asgd (CPU; capturable and tensor-lr variants are device features), with
# the second group overriding something so the groups differ.
CASES = [
    ({}, {"lr": 0.05}),
    ({"lambd": 0.1}, {"alpha": 0.5}),
    ({"lr": 0.02}, {"lambd": 0.05}),
    ({"t0": 100}, {"t0": 5}),  # averaging starts (mu != 1) after step 5 in group 2
    ({"maximize": True}, {"lr": 0.03}),
    ({"weight_decay": 0.1}, {"weight_decay": 0.3, "t0": 3}),
    ({"weight_decay": 0.1, "maximize": True}, {"lambd": 0.2, "t0": 8}),
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
    return lib.ASGD(groups, **options, **extra)


def run_pair(options, overrides, dtype, seed=0, foreach=False, round_trip=True):
    """Run npoptim and torch side by side; returns (ours, torch params, opts, checks)."""
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    start = [p.copy() for p in params]
    tparams = [torch.tensor(p.copy()) for p in params]
    ours = make(params, options, overrides, npoptim)
    theirs = make(tparams, options, overrides, torch.optim, foreach=foreach)
    mid_state = None
    for step in range(STEPS):
        grads = [None if (step + k) % 7 == 3 else rng.standard_normal(p.shape).astype(dtype)
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
            if isinstance(tvalue, np.ndarray):
                assert np.asarray(value).dtype == tvalue.dtype, (name, value, tvalue)
            np.testing.assert_allclose(np.asarray(value, np.float64),
                                       np.asarray(tvalue, np.float64), rtol=rtol, atol=rtol,
                                       err_msg=f"state[{index}][{name!r}]")


@pytest.mark.parametrize("options,overrides", CASES, ids=IDS)
def test_float64_matches_torch(options, overrides):
    ours, theirs, opt, topt, (mid_ours, mid_torch) = run_pair(options, overrides, np.float64)
    err = scaled_error(ours, theirs)
    print(f"ASGD {options} {overrides}: float64 scaled error {err:.2e}")
    assert err <= 1e-12
    assert_states_match(mid_ours, mid_torch, 1e-12)
    assert_states_match(opt.state_dict(), torch_state_dict(topt), 1e-11)
    # the group hyperparameters survive the round trip
    assert opt.param_groups[0]["lr"] == topt.param_groups[0]["lr"]


@pytest.mark.parametrize("options,overrides", CASES, ids=IDS)
def test_float32_within_torch_spread(options, overrides):
    ours, single, _, _, _ = run_pair(options, overrides, np.float32)
    _, multi, _, _, _ = run_pair(options, overrides, np.float32, foreach=True)
    spread = scaled_error(multi, single)
    err = scaled_error(ours, single)
    print(f"ASGD float32 {options}: error {err:.2e}, torch foreach spread {spread:.2e}")
    assert err <= spread + F32_ULPS, (err, spread)


def test_eta_and_mu_are_float32_scalars_like_torch():
    p = np.zeros(3)
    opt = npoptim.ASGD([p], lr=0.1, t0=1)
    for _ in range(3):
        opt.step([np.ones(3)])
    entry = opt.state_dict()["state"][0]
    assert list(entry) == ["step", "eta", "mu", "ax"]
    for name in ("step", "eta", "mu"):
        assert entry[name].shape == () and entry[name].dtype == np.float32
    assert entry["mu"] == np.float32(0.5)  # 1 / max(1, 3 - 1)
    assert entry["eta"] == np.float32(0.1 / (1 + 1e-4 * 0.1 * 3) ** 0.75)


def test_continuing_from_a_torch_state_dict():
    rng = np.random.default_rng(7)
    p0 = rng.standard_normal((4, 3))
    t = torch.tensor(p0.copy())
    topt = torch.optim.ASGD([t], lr=0.05, t0=2, weight_decay=0.01, foreach=False)
    for _ in range(6):
        t.grad = torch.tensor(rng.standard_normal((4, 3)))
        topt.step()
    p = t.numpy().copy()
    ours = npoptim.ASGD([p])
    ours.load_state_dict(torch_state_dict(topt))
    topt.load_state_dict(topt.state_dict())  # torch casts eta and mu on load; so do we
    assert ours.param_groups[0]["t0"] == 2
    for _ in range(5):
        g = rng.standard_normal((4, 3))
        ours.step([g])
        t.grad = torch.tensor(g)
        topt.step()
    assert scaled_error([p], [t.numpy()]) <= 1e-13
    assert scaled_error([ours.state[0]["ax"]], [topt.state[t]["ax"].numpy()]) <= 1e-13


def test_invalid_hyperparameters_raise_torch_messages():
    p = np.zeros(2)
    with pytest.raises(ValueError, match="Invalid learning rate: -0.1"):
        npoptim.ASGD([p], lr=-0.1)
    with pytest.raises(ValueError, match="Invalid weight_decay value: -0.5"):
        npoptim.ASGD([p], lr=1e-2, weight_decay=-0.5)


def test_step_is_atomic():
    a, b = np.ones(3), np.ones((2, 2))
    opt = npoptim.ASGD([a, b], t0=0)
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
