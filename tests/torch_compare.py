"""Side-by-side comparison of an npoptim optimizer with its torch.optim twin (a plain module
imported by the tests; pytest puts tests/ on sys.path).

The standard problem: two param groups (the second with a test's ``group1`` overrides), params
of SHAPES, STEPS steps with some gradients None. float64 must agree to 1e-12 relative to
max(1, max|param|); float32 must be no further from torch(foreach=False) than
torch(foreach=True) is, plus 2 ulps. The fraction of bit-exact elements is printed
(``pytest -s``) and can be asserted.

:class:`TorchSuite` holds the tests every such optimizer gets (trajectories and state against
torch, state_dict round trips, loading torch's state_dict, error messages, defaults); a test
module subclasses it with the optimizer's NAME, CONFIGS, GROUP1 and ERRORS.
"""
import copy

import numpy as np
import pytest
import scipy.sparse

import npoptim

torch = pytest.importorskip("torch")

SHAPES = [(5,), (3, 4), (2, 3, 4), (1,)]
STEPS = 24
SPLIT = 11  # the step after which state_dict round trips happen
F32_EPS = float(np.finfo(np.float32).eps)
DTYPES = [np.float64, np.float32]


def standard_gradient(rng, t, i, shape, dtype):
    """The gradient of param ``i`` of SHAPES at step ``t``: None now and then (and for the
    last param in the first 3 steps, so that its state starts late)."""
    missing = (t + i) % 5 == 3 or (i == len(SHAPES) - 1 and t < 3)
    return None if missing else rng.standard_normal(shape).astype(dtype)


def make_problem(dtype, seed=0, shapes=SHAPES, gradient=standard_gradient):
    """Initial params of ``shapes`` and, per step, one gradient (or None) per param, drawn by
    ``gradient(rng, step, param index, shape, dtype)`` after the params."""
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal(s).astype(dtype) for s in shapes]
    grads = [[gradient(rng, t, i, shape, dtype) for i, shape in enumerate(shapes)]
             for t in range(STEPS)]
    return params, grads


def np_kwargs(kwargs):
    """The npoptim spelling of torch kwargs (a tensor lr becomes its float value)."""
    return {k: float(v) if torch.is_tensor(v) else v for k, v in kwargs.items()}


def groups(params, group1):
    return [{"params": params[:2]}, {"params": params[2:], **group1}]


def to_torch_grad(grad, shape):
    """A NumPy gradient as torch's: dense, or a coalesced sparse COO tensor for a CSR one
    (rows of the CSR are the first axis of ``shape``, columns the others flattened)."""
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
    """torch trajectory (params after each step) and the optimizer. ``foreach=None`` passes
    no ``foreach`` (for optimizers without one, such as SparseAdam)."""
    ps = [torch.tensor(p, requires_grad=True) for p in params]
    options = dict(kwargs) if foreach is None else dict(kwargs, foreach=foreach)
    opt = getattr(torch.optim, name)(groups(ps, group1), **options)
    if state_dict is not None:
        opt.load_state_dict(state_dict)
    trajectory = []
    for step in grads:
        for p, g in zip(ps, step):
            p.grad = to_torch_grad(g, tuple(p.shape))
        opt.step()
        trajectory.append([p.detach().numpy().copy() for p in ps])
    return trajectory, opt


def run_np(name, kwargs, group1, params, grads, foreach=False, state_dict=None):
    """npoptim trajectory (params after each step) and the optimizer. CSR gradients are
    given as they are (rows = the param's first axis). ``foreach`` as in :func:`run_torch`
    (npoptim only records it, in the param groups)."""
    ps = [p.copy() for p in params]
    options = np_kwargs(kwargs) if foreach is None else dict(np_kwargs(kwargs), foreach=foreach)
    opt = getattr(npoptim, name)(groups(ps, group1), **options)
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


def exact_fraction(a, b):
    """The fraction of elements of trajectory ``a`` equal to ``b``'s bit for bit (all steps)."""
    same = [np.asarray(x).view(np.uint8).reshape(x.size, -1) == np.asarray(y).view(
        np.uint8).reshape(y.size, -1) for xs, ys in zip(a, b) for x, y in zip(xs, ys)]
    return float(np.mean(np.concatenate([s.all(axis=1) for s in same])))


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
    """Check names (in torch's order), steps, shapes and dtypes; return the worst relative
    error of the arrays."""
    assert np_sd.keys() == torch_sd.keys()
    worst = 0.0
    for i in torch_sd:
        assert list(np_sd[i]) == list(torch_sd[i]), i
        for name, expected in torch_sd[i].items():
            value = np_sd[i][name]
            if name == "step":
                assert np.asarray(value).dtype == np.asarray(expected).dtype
                assert float(value) == float(expected)
                continue
            assert value.shape == expected.shape and value.dtype == expected.dtype, name
            worst = max(worst, rel_error([value], [expected]))
    return worst


def assert_state_close(np_sd, torch_sd):
    """Every state array elementwise close to torch's (float64: rtol 1e-11, atol 1e-13), which
    :func:`state_error`'s scale does not ensure for small entries."""
    for i, entry in torch_sd.items():
        for name, expected in entry.items():
            np.testing.assert_allclose(np.asarray(np_sd[i][name], np.float64),
                                       np.asarray(expected, np.float64), rtol=1e-11,
                                       atol=1e-13, err_msg=f"state {i} {name}")


def tolerance(dtype, spread):
    return 1e-12 if dtype == np.float64 else spread + 2 * F32_EPS


def check_against_torch(name, kwargs, group1, dtype, seed=0, foreach=True, min_exact=0.0,
                        problem=None):
    """npoptim against torch(foreach=False): trajectory, state and param_groups. ``foreach``:
    whether torch has a foreach implementation to measure the float32 spread with (else the
    float32 bound is 2 ulps alone). ``problem``: (params, grads) instead of the standard one.
    Prints and returns the bit-exact fraction of the trajectory, which must be ``min_exact``
    at least."""
    params, grads = make_problem(dtype, seed) if problem is None else problem
    single = False if foreach else None
    expected, t_opt = run_torch(name, kwargs, group1, params, grads, foreach=single)
    actual, n_opt = run_np(name, kwargs, group1, params, grads, foreach=single)
    t_sd, n_sd = torch_state_dict(t_opt), n_opt.state_dict()
    spread = state_spread = 0.0
    if foreach:
        other, t_foreach = run_torch(name, kwargs, group1, params, grads, foreach=True)
        spread = trajectory_error(other, expected)
        state_spread = state_error(torch_state_dict(t_foreach)["state"], t_sd["state"])
    error, exact = trajectory_error(actual, expected), exact_fraction(actual, expected)
    print(f"\n{name} {kwargs} {group1} {np.dtype(dtype).name}: error {error:.2e}, "
          f"bit-exact {exact:.1%}")
    assert error <= tolerance(dtype, spread)
    assert state_error(n_sd["state"], t_sd["state"]) <= tolerance(dtype, state_spread)
    if dtype == np.float64:
        assert_state_close(n_sd["state"], t_sd["state"])
    for n_group, t_group in zip(n_sd["param_groups"], t_sd["param_groups"]):
        assert n_group == t_group
    assert exact >= min_exact
    return exact


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


class TorchSuite:
    """The tests of an optimizer against torch.optim.NAME over its option matrix.

    A subclass named ``Test...`` sets NAME, CONFIGS ({id: torch kwargs}), GROUP1 (the second
    param group's overrides) and ERRORS (kwargs torch refuses with ValueError). EXACT lists
    the configs that must be bit-exact with torch in both dtypes: only where no op of the
    rule rounds differently in torch's vectorized kernels (its sqrt is not always correctly
    rounded). Every other config must reach MIN_EXACT_FLOAT64 in float64. A test method
    overridden without the ``dtype`` argument runs once (e.g. for float32 only).
    """

    NAME = None
    CONFIGS = {}
    GROUP1 = {}
    ERRORS = []
    EXACT = ()
    MIN_EXACT_FLOAT64 = 0.95  # measured: 98% at least in every config of SGD..RAdam

    def pytest_generate_tests(self, metafunc):
        if "config" in metafunc.fixturenames:
            metafunc.parametrize("config", list(self.CONFIGS))
        if "dtype" in metafunc.fixturenames:
            metafunc.parametrize("dtype", DTYPES, ids=["float64", "float32"])
        if "kwargs" in metafunc.fixturenames:
            metafunc.parametrize("kwargs", self.ERRORS, ids=[repr(e) for e in self.ERRORS])

    def test_matches_torch(self, config, dtype):
        if config in self.EXACT:
            min_exact = 1.0
        else:
            min_exact = self.MIN_EXACT_FLOAT64 if dtype == np.float64 else 0.0
        check_against_torch(self.NAME, self.CONFIGS[config], self.GROUP1, dtype,
                            min_exact=min_exact)

    def test_exact_configs_exist(self):
        assert set(self.EXACT) <= set(self.CONFIGS)

    def test_state_dict_round_trip(self, config, dtype):
        check_round_trip(self.NAME, self.CONFIGS[config], self.GROUP1, dtype)

    def test_load_torch_state_dict(self, config, dtype):
        check_load_torch_state(self.NAME, self.CONFIGS[config], self.GROUP1, dtype)

    def test_invalid_hyperparameters(self, kwargs):
        check_error_message(self.NAME, kwargs)

    def test_defaults_and_group_keys_match_torch(self):
        expected = getattr(torch.optim, self.NAME)([torch.zeros(2, requires_grad=True)])
        assert getattr(npoptim, self.NAME)([np.zeros(2)]).state_dict() == expected.state_dict()


class DenseOnlySuite(TorchSuite):
    """:class:`TorchSuite` for an optimizer that refuses CSR gradients, as torch's does."""

    def test_csr_gradient_refused(self):
        p = np.ones((3, 2))
        opt = getattr(npoptim, self.NAME)([p])
        with pytest.raises(TypeError, match="sparse"):
            opt.step([scipy.sparse.csr_array(np.eye(3, 2))])
        np.testing.assert_array_equal(p, np.ones((3, 2)))
        assert opt.state == {}
