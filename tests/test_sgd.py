"""npoptim.SGD against torch.optim.SGD: dense trajectories, state, state_dict, CSR gradients."""
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


# ------------------------------------------------------------------------------------------
NAME = "SGD"
# optim_inputs_func_sgd in torch/testing/_internal/common_optimizers.py, plus nesterov alone
CONFIGS = {
    "default": {},
    "non-default lr": {"lr": 1e-2},
    "tensor lr": {"lr": torch.tensor(0.001)},
    "non-zero weight_decay": {"weight_decay": 0.5},
    "momentum": {"momentum": 0.9},
    "maximize": {"weight_decay": 0.1, "maximize": True},
    "dampening": {"momentum": 0.9, "dampening": 0.5},
    "weight_decay w/ momentum": {"momentum": 0.9, "weight_decay": 0.1},
    "nesterov": {"momentum": 0.9, "nesterov": True, "weight_decay": 0.1},
    "nesterov, maximize": {"momentum": 0.5, "nesterov": True, "maximize": True},
}
GROUP1 = {"lr": 0.03, "momentum": 0.5}
ERRORS = [{"lr": -0.01}, {"momentum": -0.5}, {"weight_decay": -1},
          {"nesterov": True}, {"momentum": 0.9, "dampening": 0.1, "nesterov": True}]


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
    expected = torch.optim.SGD([torch.zeros(2, requires_grad=True)]).state_dict()
    assert npoptim.SGD([np.zeros(2)]).state_dict() == expected


def test_state_only_with_momentum():
    p = np.ones(3)
    opt = npoptim.SGD([p], lr=0.1)
    opt.step([np.ones(3)])
    assert opt.state == {} and opt.state_dict()["state"] == {}
    opt.param_groups[0]["momentum"] = 0.9  # turned on later: the first momentum step clones
    opt.step([np.full(3, 2.0)])
    np.testing.assert_array_equal(opt.state[0]["momentum_buffer"], np.full(3, 2.0))
    np.testing.assert_array_equal(p, 1 - 0.1 - 0.1 * 2.0)


def test_first_step_buffer_is_the_gradient_not_dampened():
    p = np.zeros(2)
    opt = npoptim.SGD([p], lr=1.0, momentum=0.9, dampening=0.5)
    opt.step([np.array([1.0, -2.0])])
    np.testing.assert_array_equal(opt.state[0]["momentum_buffer"], [1.0, -2.0])
    opt.step([np.array([1.0, -2.0])])
    np.testing.assert_array_equal(opt.state[0]["momentum_buffer"], [1.4, -2.8])


# --------------------------------------------------------------------------- CSR gradients
SPARSE_SHAPES = [(6, 3), (5,), (4, 2, 3)]
SPARSE_CONFIGS = {
    "plain": {},
    "maximize": {"maximize": True},
    "momentum": {"momentum": 0.9},
    "dampening": {"momentum": 0.9, "dampening": 0.5},
    "nesterov": {"momentum": 0.9, "nesterov": True},
    "momentum, maximize": {"momentum": 0.9, "maximize": True},
}


def make_sparse_problem(dtype, seed=0):
    """Params of SPARSE_SHAPES and per step CSR gradients: random entries, embedding-style
    full rows with repeated ids (summed), explicit zeros, empty gradients, and None."""
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal(s).astype(dtype) for s in SPARSE_SHAPES]
    grads = []
    for t in range(STEPS):
        step = []
        for i, shape in enumerate(SPARSE_SHAPES):
            rows, cols = shape[0], int(np.prod(shape[1:]))
            if (t + i) % 7 == 5:
                step.append(None)
            elif t % 6 == 4:
                step.append(scipy.sparse.csr_array((rows, cols), dtype=dtype))
            elif i == 0 and t % 3 == 0:
                ids = rng.integers(0, rows, size=4)
                values = rng.standard_normal((4, cols)).astype(dtype)
                step.append(npoptim.embedding_row_grad(ids, values, rows))
            else:
                dense = rng.standard_normal((rows, cols)).astype(dtype)
                dense[rng.random((rows, cols)) < 0.6] = 0
                grad = scipy.sparse.csr_array(dense)
                if grad.nnz:
                    grad.data[0] = 0.0  # an explicitly stored zero
                step.append(grad)
        grads.append(step)
    return params, grads


def run_sparse_np(kwargs, params, grads, dense=False):
    ps = [p.copy() for p in params]
    opt = npoptim.SGD(groups(ps, {"lr": 0.03}), **kwargs)
    trajectory = []
    for step in grads:
        if dense:
            step = [None if g is None else g.toarray().reshape(p.shape)
                    for g, p in zip(step, ps)]
        opt.step(step)
        trajectory.append([p.copy() for p in ps])
    return trajectory, opt


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", SPARSE_CONFIGS)
def test_csr_matches_torch_sparse_coo(config, dtype):
    kwargs = SPARSE_CONFIGS[config]
    params, grads = make_sparse_problem(dtype)
    expected, t_opt = run_torch(NAME, kwargs, {"lr": 0.03}, params, grads)
    actual, n_opt = run_sparse_np(kwargs, params, grads)
    # torch's foreach SGD refuses sparse gradients: the float32 bound is 2 ulps alone
    assert trajectory_error(actual, expected) <= tolerance(dtype, 0.0)
    if kwargs.get("momentum"):
        assert any(t_opt.state[p]["momentum_buffer"].is_sparse
                   for group in t_opt.param_groups for p in group["params"])
    assert state_error(n_opt.state_dict()["state"],
                       torch_state_dict(t_opt)["state"]) <= tolerance(dtype, 0.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", SPARSE_CONFIGS)
def test_csr_is_exact(config, dtype):
    """sparse kind "exact": a CSR gradient gives the dense update, bit for bit."""
    params, grads = make_sparse_problem(dtype, seed=1)
    sparse, _ = run_sparse_np(SPARSE_CONFIGS[config], params, grads)
    dense, _ = run_sparse_np(SPARSE_CONFIGS[config], params, grads, dense=True)
    for a, b in zip(sparse, dense):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


def test_momentum_buffer_keeps_moving_rows_without_gradient():
    """torch's sparse buffer decays and applies rows that the new gradient lacks."""
    p = np.zeros((3, 2))
    t = torch.zeros((3, 2), dtype=torch.float64, requires_grad=True)
    opt = npoptim.SGD([p], lr=0.1, momentum=0.9)
    t_opt = torch.optim.SGD([t], lr=0.1, momentum=0.9, foreach=False)
    for row in (0, 2, 2):
        dense = np.zeros((3, 2))
        dense[row] = [1.0, -3.0]
        grad = scipy.sparse.csr_array(dense)
        opt.step([grad])
        t.grad = to_torch_grad(grad, (3, 2))
        t_opt.step()
    assert np.all(p[0] != 0)
    np.testing.assert_allclose(p, t.detach().numpy(), rtol=0, atol=1e-15)


def test_dense_after_sparse_buffer():
    """torch refuses a dense gradient after a sparse first step; npoptim gives the dense
    update, which is what torch computes from dense gradients throughout."""
    params, grads = make_sparse_problem(np.float64)
    grads = [step[:] for step in grads]
    for t in range(1, STEPS, 2):
        grads[t] = [None if g is None else g.toarray().reshape(s)
                    for g, s in zip(grads[t], SPARSE_SHAPES)]
    kwargs = {"momentum": 0.9, "nesterov": True}
    actual, _ = run_sparse_np(kwargs, params, grads)
    dense = [[None if g is None else (g.toarray().reshape(s) if scipy.sparse.issparse(g) else g)
              for g, s in zip(step, SPARSE_SHAPES)] for step in grads]
    expected, _ = run_torch(NAME, kwargs, {"lr": 0.03}, params, dense)
    assert trajectory_error(actual, expected) <= 1e-12


def test_weight_decay_with_csr_is_refused_atomically():
    p, q = np.ones((3, 2)), np.ones(4)
    opt = npoptim.SGD([q, p], lr=0.1, momentum=0.9, weight_decay=0.1)
    opt.step([np.ones(4), None])
    q_before, state_before = q.copy(), opt.state[0]["momentum_buffer"].copy()
    grad = scipy.sparse.csr_array(np.eye(3, 2))
    with pytest.raises(ValueError, match="weight_decay"):
        opt.step([np.ones(4), grad])
    np.testing.assert_array_equal(q, q_before)
    np.testing.assert_array_equal(p, np.ones((3, 2)))
    np.testing.assert_array_equal(opt.state[0]["momentum_buffer"], state_before)
    assert 1 not in opt.state
    t = torch.ones((3, 2), dtype=torch.float64, requires_grad=True)
    t.grad = to_torch_grad(grad, (3, 2))
    with pytest.raises(RuntimeError):  # torch refuses it too, from add(sparse, dense)
        torch.optim.SGD([t], lr=0.1, weight_decay=0.1, foreach=False).step()
