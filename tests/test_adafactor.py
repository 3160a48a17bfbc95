"""Adafactor against torch.optim.Adafactor 2.13, for every option set torch's own suite uses.

Each case runs 24 steps on params of shapes (5,), (3, 4), (2, 3, 4), (1,) split over two
param groups with different hyperparameters, some gradients None, with a state_dict round
trip after step 12: vectors keep a full ``variance``, the matrix and the 3-D tensor factored
``row_var``/``col_var`` (over the last two dimensions). float64 must agree to 1e-12 of the
parameters' scale; float32 no worse than torch's own foreach-vs-single spread plus 4 float32
ulps.
"""
import numpy as np
import pytest

import npoptim

torch = pytest.importorskip("torch")

SHAPES = [(5,), (3, 4), (2, 3, 4), (1,)]
STEPS = 24
ROUND_TRIP_AT = 12
F32_ULPS = 4 * np.finfo(np.float32).eps

# optim_inputs_func_adafactor, with the second group overriding something so the groups
# differ (an explicit eps1, a small eps2 so the parameter's RMS sets the step, ...).
CASES = [
    ({}, {"lr": 0.05}),
    ({"weight_decay": 0.1, "lr": 0.01}, {"eps": (1e-20, 1e-4)}),
    ({"weight_decay": 0.1, "maximize": True}, {"d": 1.1, "lr": 0.2}),
    ({"beta2_decay": -1.0}, {"beta2_decay": -0.5, "eps": (None, 2.0)}),  # alpha = eps2 * rho
    ({"d": 1.5}, {"weight_decay": 0.5, "eps": (0.3, 1e-3)}),  # eps1 clamps the estimate
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
    return lib.Adafactor(groups, **options, **extra)


def gradient(rng, shape, dtype):
    return (rng.standard_normal(shape) * rng.uniform(0.1, 3.0)).astype(dtype)


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
    print(f"Adafactor {options} {overrides}: float64 scaled error {err:.2e}, bit-exact {exact:.0%}")
    assert err <= 1e-12
    assert_states_match(mid_ours, mid_torch, 1e-12)
    assert_states_match(opt.state_dict(), torch_state_dict(topt), 1e-12)


@pytest.mark.parametrize("options,overrides", CASES, ids=IDS)
def test_float32_within_torch_spread(options, overrides):
    ours, single, opt, topt, _ = run_pair(options, overrides, np.float32)
    _, multi, _, _, _ = run_pair(options, overrides, np.float32, foreach=True)
    spread = scaled_error(multi, single)
    err = scaled_error(ours, single)
    print(f"Adafactor float32 {options}: error {err:.2e}, torch foreach spread {spread:.2e}")
    assert err <= spread + F32_ULPS, (err, spread)


def test_zero_dim_param_and_state_shapes_match_torch():
    rng = np.random.default_rng(4)
    shapes = [(), (7,), (3, 5), (2, 3, 1, 4)]
    params = [rng.standard_normal(s) for s in shapes]
    tparams = [torch.tensor(p.copy()) for p in params]
    ours = npoptim.Adafactor(params, lr=0.05, weight_decay=0.1)
    theirs = torch.optim.Adafactor(tparams, lr=0.05, weight_decay=0.1, foreach=False)
    for _ in range(10):
        grads = [rng.standard_normal(s) for s in shapes]
        ours.step(grads)
        for t, g in zip(tparams, grads):
            t.grad = torch.tensor(g)
        theirs.step()
    assert scaled_error(params, [t.numpy() for t in tparams]) <= 1e-12
    assert_states_match(ours.state_dict(), torch_state_dict(theirs), 1e-12)
    assert ours.state[3]["row_var"].shape == (2, 3, 1, 1)
    assert ours.state[3]["col_var"].shape == (2, 3, 1, 4)


def test_default_eps1_is_fixed_by_the_first_param_of_the_group_as_in_torch():
    """torch's loop sets eps1 once per group and step, from the first parameter it updates:
    a float64 parameter after a float32 one gets float32's epsilon. With tiny gradients
    (below float32 eps) the clamp eps1**2 decides the update, so the quirk shows."""
    rng = np.random.default_rng(5)
    params = [rng.standard_normal(3).astype(np.float32), rng.standard_normal(4)]
    tparams = [torch.tensor(p.copy()) for p in params]
    ours = npoptim.Adafactor(params)
    theirs = torch.optim.Adafactor(tparams, foreach=False)
    for _ in range(3):
        grads = [np.full(3, 1e-9, np.float32), np.full(4, 1e-9)]
        ours.step(grads)
        for t, g in zip(tparams, grads):
            t.grad = torch.tensor(g)
        theirs.step()
    np.testing.assert_allclose(params[1], tparams[1].numpy(), rtol=1e-14, atol=0)
    np.testing.assert_allclose(params[0], tparams[0].numpy(), rtol=1e-6, atol=0)


def test_invalid_hyperparameters_raise_torch_messages():
    p = np.zeros(2)
    for kwargs, message in [(dict(lr=-0.1), "Learning rate should be >= 0 but is: -0.1"),
                            (dict(eps=(-1e-30, 1e-3)), "epsilon1 should be >= 0"),
                            (dict(eps=(None, -1.0)), "epsilon2 should be >= 0"),
                            (dict(d=0.0), "Clipping threshold d should be >= 1"),
                            (dict(beta2_decay=0.8), "beta2_decay should be <= 0"),
                            (dict(weight_decay=-1.0), "weight_decay should be >= 0")]:
        with pytest.raises(ValueError, match=message):
            npoptim.Adafactor([p], **kwargs)


def test_step_is_atomic():
    a, b = np.ones(3), np.ones((2, 2))
    opt = npoptim.Adafactor([a, b])
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
