"""Muon against torch.optim.Muon 2.13, for every option set torch's own suite uses.

Muon takes 2-D parameters only: each case runs 24 steps on params of shapes (3, 4), (4, 3)
(tall: orthogonalized through its transpose), (1, 5) and (6, 2), split over two param groups
with different hyperparameters, some gradients None, with a state_dict round trip after
step 12. torch orthogonalizes in bfloat16, and npoptim emulates torch's bfloat16 arithmetic
bit for bit at these sizes, so float64 must agree to 1e-12 of the parameters' scale. torch's
Muon has no foreach implementation to measure a spread against; float32 must agree to 4
float32 ulps of scale.
"""
import numpy as np
import pytest

import npoptim
from npoptim.optim import muon as muon_module

torch = pytest.importorskip("torch")
from torch.optim._muon import _zeropower_via_newtonschulz  # noqa: E402

SHAPES = [(3, 4), (4, 3), (1, 5), (6, 2)]
STEPS = 24
ROUND_TRIP_AT = 12
F32_ULPS = 4 * np.finfo(np.float32).eps
DEFAULT_COEFFICIENTS = (3.4445, -4.7750, 2.0315)

# optim_inputs_func_muon (the tensor-lr variant is a device feature), with the second group
# overriding something so the groups differ; nesterov and adjust_lr_fn are covered there.
CASES = [
    ({}, {"lr": 0.05}),
    ({"lr": 0.01}, {"nesterov": False}),
    ({"weight_decay": 0.2}, {"adjust_lr_fn": "match_rms_adamw"}),
    ({"momentum": 0.8}, {"adjust_lr_fn": "original", "momentum": 0.3}),
    ({"ns_steps": 6}, {"ns_steps": 2, "eps": 1e-3}),
    ({"ns_coefficients": (3.4, -4.7, 2.0)}, {"nesterov": False, "weight_decay": 0.0}),
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
    return lib.Muon(groups, **options, **extra)


def gradient(rng, shape, dtype):
    return (rng.standard_normal(shape) * 10.0 ** rng.uniform(-2, 1)).astype(dtype)


def run_pair(options, overrides, dtype, seed=0, round_trip=True):
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    start = [p.copy() for p in params]
    tparams = [torch.tensor(p.copy()) for p in params]
    ours = make(params, options, overrides, npoptim)
    theirs = make(tparams, options, overrides, torch.optim)
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
    print(f"Muon {options} {overrides}: float64 scaled error {err:.2e}, bit-exact {exact:.0%}")
    assert err <= 1e-12
    assert_states_match(mid_ours, mid_torch, 1e-12)
    assert_states_match(opt.state_dict(), torch_state_dict(topt), 1e-12)


@pytest.mark.parametrize("options,overrides", CASES, ids=IDS)
def test_float32_matches_torch(options, overrides):
    ours, theirs, opt, topt, _ = run_pair(options, overrides, np.float32)
    err = scaled_error(ours, theirs)
    print(f"Muon float32 {options}: error {err:.2e}")
    assert err <= F32_ULPS, err
    assert_states_match(opt.state_dict(), torch_state_dict(topt), 1e-5)


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            return set(next(line for line in f if line.startswith("flags")).split())
    except (OSError, StopIteration):
        return set()


# torch computes products above 16*16*16 multiply-adds with oneDNN; npoptim reproduces the
# order of oneDNN's AVX512-BF16 kernel, so those sizes are checked on such CPUs only.
ONEDNN_LIKE_HERE = "avx512_bf16" in _cpu_flags() and "amx_bf16" not in _cpu_flags()
SMALL = [(3, 4), (4, 3), (1, 5), (5, 1), (2, 2), (8, 5), (16, 16)]
LARGE = [(17, 17), (20, 30), (64, 64), (40, 512), (300, 100)]


@pytest.mark.parametrize("shape", SMALL + [
    pytest.param(s, marks=pytest.mark.skipif(not ONEDNN_LIKE_HERE,
                                             reason="needs an AVX512-BF16 CPU without AMX"))
    for s in LARGE])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_newton_schulz_is_bit_exact_against_torch(shape, dtype):
    """The bfloat16 emulation: the orthogonalized matrix equals torch's bit for bit, over
    inputs spanning twelve orders of magnitude (and the eps clamp for the tiny ones)."""
    rng = np.random.default_rng(sum(shape))
    for scale in (1e-9, 1e-3, 1.0, 1e3):
        for _ in range(5 if shape in SMALL else 1):
            g = (rng.standard_normal(shape) * scale).astype(dtype)
            ours = muon_module.zeropower_via_newtonschulz(g, DEFAULT_COEFFICIENTS, 5, 1e-7)
            theirs = _zeropower_via_newtonschulz(torch.tensor(g), DEFAULT_COEFFICIENTS, 5, 1e-7)
            np.testing.assert_array_equal(ours, theirs.float().numpy())


def test_bfloat16_rounding_matches_torch():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(10000) * 10.0 ** rng.integers(-30, 30, 10000),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 3.3895e38, 1e-40, -1e-45]])
    for dtype in (np.float64, np.float32):
        v = x.astype(dtype)
        expected = torch.tensor(v).bfloat16().float().numpy()
        np.testing.assert_array_equal(muon_module.to_bfloat16(v), expected)


def test_rejects_non_2d_params_and_bad_options_with_torch_messages():
    with pytest.raises(ValueError, match="Muon only supports 2D parameters"):
        npoptim.Muon([np.zeros((2, 3, 4))])
    p = np.zeros((2, 3))
    for kwargs, message in [
            (dict(adjust_lr_fn="arbitrary"),
             "Adjust learning rate function arbitrary is not supported"),
            (dict(lr=-1.0), "Learning rate should be >= 0 but is: -1.0"),
            (dict(momentum=-0.5), "momentum should be >= 0 but is: -0.5"),
            (dict(weight_decay=-0.1), "weight decay should be >= 0 but is: -0.1"),
            (dict(ns_steps=100), "Number of steps must be less than 100"),
            (dict(ns_coefficients=(1.0, 2.0)), "Coefficients must be a tuple of exactly 3")]:
        with pytest.raises(ValueError, match=message):
            npoptim.Muon([p], **kwargs)
    opt = npoptim.Muon([p])
    with pytest.raises(ValueError, match="Muon only supports 2D parameters"):
        opt.add_param_group({"params": [np.zeros(3)]})
    assert len(opt.param_groups) == 1


def test_state_layout_matches_torch():
    p = np.zeros((2, 3), np.float32)
    opt = npoptim.Muon([p])
    opt.step([np.ones((2, 3), np.float32)])
    entry = opt.state_dict()["state"][0]
    assert list(entry) == ["momentum_buffer"]
    assert entry["momentum_buffer"].dtype == np.float32


def test_step_is_atomic():
    a, b = np.ones((2, 3)), np.ones((2, 2))
    opt = npoptim.Muon([a, b])
    opt.step([np.ones((2, 3)), np.eye(2)])
    before = (a.copy(), b.copy(), opt.state[0]["momentum_buffer"].copy())
    with pytest.raises(ValueError):
        opt.step([np.ones((2, 3)), np.ones((3, 2))])
    np.testing.assert_array_equal(a, before[0])
    np.testing.assert_array_equal(b, before[1])
    np.testing.assert_array_equal(opt.state[0]["momentum_buffer"], before[2])
