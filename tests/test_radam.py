"""npoptim.RAdam against torch.optim.RAdam: trajectories, state, state_dict."""
import copy

import numpy as np
import pytest
import scipy.sparse

import npoptim

torch = pytest.importorskip("torch")

# ------------------------------------------------------------------------------------------
# Side-by-side harness (the same in every test_<optimizer>.py that compares with torch).
# Two param groups (the second with GROUP1's overrides), params of SHAPES, STEPS steps with
# some gradients None. float64 must agree to 1e-12 relative to max(1, max|param|); float32
# must be no further from torch(foreach=False) than torch(foreach=True) is, plus 2 ulps.
# ------------------------------------------------------------------------------------------
SHAPES = [(5,), (3, 4), (2, 3, 4), (1,)]
STEPS = 24
SPLIT = 11  # the step after which state_dict round trips happen
F32_EPS = float(np.finfo(np.float32).eps)
DTYPES = [np.float64, np.float32]


def make_problem(dtype, seed=0):
    """Initial params and, per step, one gradient (or None) per param."""
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    grads = []
    for t in range(STEPS):
        step = []
        for i, shape in enumerate(SHAPES):
            missing = (t + i) % 5 == 3 or (i == len(SHAPES) - 1 and t < 3)
            step.append(None if missing else rng.standard_normal(shape).astype(dtype))
        grads.append(step)
    return params, grads


def np_kwargs(kwargs):
    """The npoptim spelling of torch kwargs (a tensor lr becomes its float value)."""
    return {k: float(v) if torch.is_tensor(v) else v for k, v in kwargs.items()}


def groups(params, group1):
    return [{"params": params[:2]}, {"params": params[2:], **group1}]


def to_torch_grad(grad, shape):
    if grad is None:
        return None
    if scipy.sparse.issparse(grad):
        coo = grad.tocoo()
        flat = coo.row.astype(np.int64) * grad.shape[1] + coo.col
        index = np.stack(np.unravel_index(flat, shape)) if flat.size else np.zeros(
            (len(shape), 0), np.int64)
        return torch.sparse_coo_tensor(torch.from_numpy(index), torch.from_numpy(coo.data),
                                       shape, check_invariants=True).coalesce()
    return torch.from_numpy(grad.copy())


def run_torch(name, kwargs, group1, params, grads, foreach=False, state_dict=None):
    """torch trajectory (params after each step) and the optimizer."""
    ps = [torch.tensor(p, requires_grad=True) for p in params]
    opt = getattr(torch.optim, name)(groups(ps, group1), foreach=foreach, **kwargs)
    if state_dict is not None:
        opt.load_state_dict(state_dict)
    trajectory = []
    for step in grads:
        for p, g in zip(ps, step):
            p.grad = to_torch_grad(g, tuple(p.shape))
        opt.step()
        trajectory.append([p.detach().numpy().copy() for p in ps])
    return trajectory, opt


def run_np(name, kwargs, group1, params, grads, state_dict=None):
    """npoptim trajectory (params after each step) and the optimizer."""
    ps = [p.copy() for p in params]
    opt = getattr(npoptim, name)(groups(ps, group1), foreach=False, **np_kwargs(kwargs))
    if state_dict is not None:
        opt.load_state_dict(state_dict)
    trajectory = []
    for step in grads:
        opt.step(step)
        trajectory.append([p.copy() for p in ps])
    return trajectory, opt


def rel_error(a, b):
    """max |a - b| / max(1, max |b|) over a list of arrays (NaN where both are NaN is 0)."""
    a = [np.asarray(x, np.float64).reshape(-1) for x in a]
    b = [np.asarray(y, np.float64).reshape(-1) for y in b]
    diff = [np.abs(x - y) for x, y in zip(a, b)]
    scale = max([1.0] + [float(np.nanmax(np.abs(y))) for y in b if y.size])
    for d, x, y in zip(diff, a, b):
        both_nan = np.isnan(x) & np.isnan(y)
        d[both_nan] = 0.0
        d[np.isnan(x) != np.isnan(y)] = np.inf
    return max(float(d.max()) for d in diff) / scale


def trajectory_error(a, b):
    return max(rel_error(x, y) for x, y in zip(a, b))


def torch_state_dict(opt):
    """torch's state_dict with tensors as NumPy arrays (sparse ones densified)."""
    sd = opt.state_dict()
    state = {i: {k: (v.to_dense() if v.is_sparse else v).detach().numpy().copy()
                 if torch.is_tensor(v) else v for k, v in entry.items()}
             for i, entry in sd["state"].items()}
    param_groups = [{k: float(v) if torch.is_tensor(v) else v for k, v in g.items()}
                    for g in sd["param_groups"]]
    return {"state": state, "param_groups": param_groups}


def state_error(np_sd, torch_sd):
    """Check names, steps, shapes and dtypes; return the worst relative error of the arrays."""
    assert np_sd.keys() == torch_sd.keys()
    worst = 0.0
    for i in torch_sd:
        assert list(np_sd[i]) == list(torch_sd[i]), i
        for name, expected in torch_sd[i].items():
            value = np_sd[i][name]
            if name == "step":
                assert np.asarray(value).dtype == expected.dtype
                assert float(value) == float(expected)
                continue
            assert value.shape == expected.shape and value.dtype == expected.dtype, name
            worst = max(worst, rel_error([value], [expected]))
    return worst


def tolerance(dtype, spread):
    return 1e-12 if dtype == np.float64 else spread + 2 * F32_EPS


def check_against_torch(name, kwargs, group1, dtype, seed=0):
    params, grads = make_problem(dtype, seed)
    expected, t_opt = run_torch(name, kwargs, group1, params, grads)
    other, t_foreach = run_torch(name, kwargs, group1, params, grads, foreach=True)
    actual, n_opt = run_np(name, kwargs, group1, params, grads)
    spread = trajectory_error(other, expected)
    assert trajectory_error(actual, expected) <= tolerance(dtype, spread)
    t_sd, n_sd = torch_state_dict(t_opt), n_opt.state_dict()
    state_spread = state_error(torch_state_dict(t_foreach)["state"], t_sd["state"])
    assert state_error(n_sd["state"], t_sd["state"]) <= tolerance(dtype, state_spread)
    for n_group, t_group in zip(n_sd["param_groups"], t_sd["param_groups"]):
        assert n_group == t_group


def check_round_trip(name, kwargs, group1, dtype):
    """npoptim state_dict -> fresh npoptim -> continue: the uninterrupted trajectory."""
    params, grads = make_problem(dtype)
    full, _ = run_np(name, kwargs, group1, params, grads)
    first, opt = run_np(name, kwargs, group1, params, grads[:SPLIT])
    sd = opt.state_dict()
    rest, _ = run_np(name, kwargs, group1, first[-1], grads[SPLIT:], state_dict=sd)
    for a, b in zip(rest, full[SPLIT:]):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


def check_load_torch_state(name, kwargs, group1, dtype):
    """torch state_dict (as NumPy) -> npoptim -> continue: torch's own continuation."""
    params, grads = make_problem(dtype)
    first, t_opt = run_torch(name, kwargs, group1, params, grads[:SPLIT])
    loaded = torch_state_dict(t_opt)
    # torch's load_state_dict keeps the given tensors (no copy): give each run its own
    expected, _ = run_torch(name, kwargs, group1, first[-1], grads[SPLIT:],
                            state_dict=copy.deepcopy(t_opt.state_dict()))
    other, _ = run_torch(name, kwargs, group1, first[-1], grads[SPLIT:], foreach=True,
                         state_dict=copy.deepcopy(t_opt.state_dict()))
    actual, _ = run_np(name, kwargs, group1, first[-1], grads[SPLIT:], state_dict=loaded)
    assert trajectory_error(actual, expected) <= tolerance(
        dtype, trajectory_error(other, expected))


def check_error_message(name, kwargs):
    with pytest.raises(ValueError) as expected:
        getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], **kwargs)
    with pytest.raises(ValueError) as actual:
        getattr(npoptim, name)([np.zeros(2)], **np_kwargs(kwargs))
    assert str(actual.value) == str(expected.value)


NAME = "RAdam"
# optim_inputs_func_radam (CPU configs) in torch/testing/_internal/common_optimizers.py, plus
# a beta2 for which the rectification never switches on
CONFIGS = {
    "default": {},
    "non-default lr": {"lr": 2e-3},
    "non-default eps": {"eps": 1e-6},
    "nonzero weight_decay": {"weight_decay": 0.1},
    "decoupled_weight_decay": {"weight_decay": 0.1, "decoupled_weight_decay": True},
    "maximize": {"weight_decay": 0.1, "maximize": True},
    "never rectified": {"betas": (0.9, 0.6)},
}
GROUP1 = {"lr": 0.01, "betas": (0.8, 0.9)}
ERRORS = [{"lr": -0.01}, {"eps": -1e-8}, {"betas": (1.0, 0.0)}, {"betas": (0.0, 1.0)},
          {"weight_decay": -1}]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", CONFIGS)
def test_matches_torch(config, dtype):
    check_against_torch(NAME, CONFIGS[config], GROUP1, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", CONFIGS)
def test_state_dict_round_trip(config, dtype):
    check_round_trip(NAME, CONFIGS[config], GROUP1, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", CONFIGS)
def test_load_torch_state_dict(config, dtype):
    check_load_torch_state(NAME, CONFIGS[config], GROUP1, dtype)


@pytest.mark.parametrize("kwargs", ERRORS)
def test_invalid_hyperparameters(kwargs):
    check_error_message(NAME, kwargs)


def test_defaults_and_group_keys_match_torch():
    expected = torch.optim.RAdam([torch.zeros(2, requires_grad=True)]).state_dict()
    assert npoptim.RAdam([np.zeros(2)]).state_dict() == expected


def test_csr_gradient_refused():
    p = np.ones((3, 2))
    opt = npoptim.RAdam([p])
    with pytest.raises(TypeError, match="sparse"):
        opt.step([scipy.sparse.csr_array(np.eye(3, 2))])
    np.testing.assert_array_equal(p, np.ones((3, 2)))
    assert opt.state == {}


def rho_t(beta2, step):
    rho_inf = 2 / (1 - beta2) - 1
    return rho_inf - 2 * step * beta2 ** step / (1 - beta2 ** step)


@pytest.mark.parametrize("beta2", [0.999, GROUP1["betas"][1]])
def test_trajectories_cover_both_branches(beta2):
    rhos = [rho_t(beta2, step) for step in range(1, STEPS + 1)]
    assert min(rhos) <= 5 < max(rhos)
    assert max(rho_t(0.6, step) for step in range(1, 10 ** 4)) <= 5


def test_unrectified_steps_are_sgd_with_bias_corrected_momentum():
    p = np.array([1.0, -1.0])
    opt = npoptim.RAdam([p], lr=0.1, betas=(0.5, 0.999))
    opt.step([np.array([2.0, 4.0])])
    np.testing.assert_allclose(p, [1.0 - 0.1 * 2.0, -1.0 - 0.1 * 4.0], rtol=0, atol=1e-15)
