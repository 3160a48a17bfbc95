"""Side-by-side comparison of an npoptim optimizer with its torch.optim twin (a plain module
imported by the tests; pytest puts tests/ on sys.path).

The standard problem: two param groups (the second with a test's ``group1`` overrides), params
of SHAPES, STEPS steps with some gradients None. float64 must agree to 1e-12 relative to
max(1, max|param|); float32 must be no further from torch(foreach=False) than
torch(foreach=True) is, plus 2 ulps. The fraction of bit-exact elements is printed
(``pytest -s``) and can be asserted.

:class:`TorchSuite` holds the tests every such optimizer gets (trajectories and state against
torch, state_dict round trips, loading torch's state_dict, error messages, defaults); a test
module subclasses it with the optimizer's NAME, CONFIGS, GROUP1 and ERRORS, and where the
standard problem does not fit, its SHAPES and gradient (Muon takes 2-D params only; Rprop needs
exact zeros), FOREACH = False for an optimizer torch has no foreach implementation of, F32_ULPS
and STATE_RTOL for its tolerances. :func:`matches_torch_test` and :func:`csr_matches_torch_test`
make the test of a table of cases (Adam, Adagrad, ...).

torch is optional: without it ``torch`` is None and every test that runs torch is marked
:data:`needs_torch` (skipped), so the tests of npoptim alone (round trips, atomic steps, CSR
refusals) still run. :func:`timm_optim` loads timm's optimizer files.
"""
import copy
import importlib
import importlib.util
import sys
import types

import numpy as np
import pytest
import scipy.sparse

import npoptim

try:
    import torch
except ImportError:  # the tests that do not compare with torch still run
    torch = None

#: The mark of a test that runs torch: skipped where torch is not installed (and, with
#: NPOPTIM_REQUIRE_TORCH=1 as in CI, the session fails instead: see conftest.py).
needs_torch = pytest.mark.needs("torch")


def timm_optim(name):
    """timm's optimizer file ``timm/optim/<name>.py`` (``"lamb"``, ``"lars"``), loaded alone.

    timm's own dependencies would upgrade torch, so CI installs it with ``pip install --no-deps``
    and the file is loaded without running timm's package ``__init__`` (which imports its
    model zoo): ``timm/optim`` becomes a bare package whose modules import only torch. Skips
    where torch or timm is not installed.
    """
    if torch is None:
        pytest.skip("torch is not installed")
    spec = importlib.util.find_spec("timm")
    if spec is None:
        pytest.skip("timm is not installed (pip install --no-deps timm)")
    package = "_timm_optim_alone"
    if package not in sys.modules:
        module = types.ModuleType(package)
        module.__path__ = [f"{spec.submodule_search_locations[0]}/optim"]
        sys.modules[package] = module
    return importlib.import_module(f"{package}.{name}")


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


def make_row_sparse_problem(dtype, seed=0):
    """The standard problem with about 40% of the rows of each gradient zero, as CSR gradients
    (rows = the param's first axis) that store the nonzero entries."""
    rng = np.random.default_rng(seed + 100)
    params, grads = make_problem(dtype, seed)
    sparse = []
    for step in grads:
        sparse.append([])
        for g in step:
            if g is not None:
                g = g.copy()
                g[rng.random(g.shape[0]) < 0.4] = 0  # some untouched rows
                g = scipy.sparse.csr_array(g.reshape(g.shape[0], -1))
            sparse[-1].append(g)
    return params, sparse


def np_kwargs(kwargs):
    """The npoptim spelling of torch kwargs (a tensor lr becomes its float value)."""
    return {k: float(v) if torch is not None and torch.is_tensor(v) else v
            for k, v in kwargs.items()}


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
    def as_bytes(x):  # one row of bytes per element (0-d arrays included)
        return np.ascontiguousarray(x).reshape(-1).view(np.uint8).reshape(np.size(x), -1)
    same = [as_bytes(x) == as_bytes(y) for xs, ys in zip(a, b) for x, y in zip(xs, ys)]
    return float(np.mean(np.concatenate([s.all(axis=1) for s in same])))


def to_numpy(obj):
    """``obj`` with every tensor in it (through dicts, lists and tuples) as a NumPy copy: sparse
    tensors densified, bfloat16 widened to float32."""
    if isinstance(obj, dict):
        return {k: to_numpy(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_numpy(v) for v in obj)
    if not torch.is_tensor(obj):
        return obj
    t = obj.detach().cpu()
    t = t.to_dense() if t.is_sparse else t
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy().copy()


def torch_state_dict(opt):
    """torch's state_dict with tensors as NumPy arrays (sparse ones densified; lists of
    tensors, as in LBFGS's history, converted element by element)."""
    sd = opt.state_dict()
    param_groups = [{k: float(v) if torch.is_tensor(v) else v for k, v in g.items()}
                    for g in sd["param_groups"]]
    return {"state": to_numpy(sd["state"]), "param_groups": param_groups}


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


def assert_state_close(np_sd, torch_sd, rtol=1e-11, atol=1e-13):
    """Every state array elementwise close to torch's (float64: rtol 1e-11, atol 1e-13), which
    :func:`state_error`'s scale does not ensure for small entries."""
    for i, entry in torch_sd.items():
        for name, expected in entry.items():
            np.testing.assert_allclose(np.asarray(np_sd[i][name], np.float64),
                                       np.asarray(expected, np.float64), rtol=rtol,
                                       atol=atol, err_msg=f"state {i} {name}")


def assert_same_state(a, b):
    """Two npoptim state_dicts' states equal bit for bit (NaN included)."""
    assert a.keys() == b.keys()
    for i in a:
        assert list(a[i]) == list(b[i]), i
        for name, value in a[i].items():
            np.testing.assert_array_equal(value, b[i][name], err_msg=f"state {i} {name}")


def tolerance(dtype, spread, ulps=2):
    return 1e-12 if dtype == np.float64 else spread + ulps * F32_EPS


def compare_with_torch(actual, n_opt, expected, t_opt, dtype, other=None, ulps=2,
                       state_rtol=None, min_move=None, start=None, label=""):
    """npoptim's run (trajectory ``actual``, optimizer ``n_opt``) against torch(foreach=False)'s:
    trajectory, state and param_groups. ``other``: torch's foreach run of the same (trajectory,
    optimizer), whose distance from ``expected`` widens the float32 bound (else ``ulps``
    float32 ulps alone). ``state_rtol``: float64 states also elementwise within ``state_rtol``
    (relative and absolute). ``min_move``: the run must have moved some param of ``start`` that
    far (else the comparison proves nothing). Prints and returns the bit-exact fraction."""
    t_sd, n_sd = torch_state_dict(t_opt), n_opt.state_dict()
    spread = state_spread = 0.0
    if other is not None:
        spread = trajectory_error(other[0], expected)
        state_spread = state_error(torch_state_dict(other[1])["state"], t_sd["state"])
    error, exact = trajectory_error(actual, expected), exact_fraction(actual, expected)
    print(f"\n{label} {np.dtype(dtype).name}: error {error:.2e}, bit-exact {exact:.1%}")
    assert error <= tolerance(dtype, spread, ulps)
    assert state_error(n_sd["state"], t_sd["state"]) <= tolerance(dtype, state_spread, ulps)
    if dtype == np.float64:
        assert_state_close(n_sd["state"], t_sd["state"])
        if state_rtol is not None:
            assert_state_close(n_sd["state"], t_sd["state"], rtol=state_rtol, atol=state_rtol)
    for n_group, t_group in zip(n_sd["param_groups"], t_sd["param_groups"]):
        assert n_group == t_group
    if min_move is not None:
        moved = max(float(np.max(np.abs(np.asarray(p, np.float64) - s), initial=0.0))
                    for p, s in zip(actual[-1], start))
        assert moved > min_move, "the optimizer hardly moved the params: a vacuous comparison"
    return exact


def check_against_torch(name, kwargs, group1, dtype, seed=0, foreach=True, min_exact=0.0,
                        problem=None, ulps=2, state_rtol=None, min_move=None):
    """npoptim against torch(foreach=False): trajectory, state and param_groups. ``foreach``:
    whether torch has a foreach implementation to measure the float32 spread with (else the
    float32 bound is ``ulps`` ulps alone). ``problem``: (params, grads) instead of the standard
    one. ``state_rtol``, ``min_move``: see :func:`compare_with_torch`. Prints and returns the
    bit-exact fraction of the trajectory, which must be ``min_exact`` at least."""
    params, grads = make_problem(dtype, seed) if problem is None else problem
    single = False if foreach else None
    expected, t_opt = run_torch(name, kwargs, group1, params, grads, foreach=single)
    actual, n_opt = run_np(name, kwargs, group1, params, grads, foreach=single)
    other = run_torch(name, kwargs, group1, params, grads, foreach=True) if foreach else None
    exact = compare_with_torch(actual, n_opt, expected, t_opt, dtype, other, ulps, state_rtol,
                               min_move, params, f"{name} {kwargs} {group1}")
    assert exact >= min_exact
    return exact


#: torch's vectorized sqrt is not always correctly rounded, so no case of Adam, AdamW, Adagrad
#: or Adadelta is bit-exact throughout (the lowest, Adadelta with maximize, is at 91.6%): a
#: floor with some margin
MIN_EXACT_FLOAT64 = 0.8


def matches_torch_test(cases):
    """A test of each ``(name, options, group 1 overrides)`` of ``cases`` against torch on the
    standard problem, in both dtypes (float64 at least :data:`MIN_EXACT_FLOAT64` bit-exact)."""
    @needs_torch
    @pytest.mark.parametrize("name,options,overrides", cases,
                             ids=[f"{c[0]}-{i}" for i, c in enumerate(cases)])
    @pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
    def test_matches_torch(name, options, overrides, dtype):
        check_against_torch(name, options, overrides, dtype,
                            min_exact=MIN_EXACT_FLOAT64 if dtype == np.float64 else 0.0)
    return test_matches_torch


def csr_matches_torch_test(cases):
    """A test of each case of ``cases`` with CSR gradients (:func:`make_row_sparse_problem`)
    against torch's sparse COO ones, state (SparseAdam's int step counter, None steps
    included) and all. torch has no foreach for them: float32 to 2 ulps."""
    @needs_torch
    @pytest.mark.parametrize("name,options,overrides", cases,
                             ids=[f"{c[0]}-{i}" for i, c in enumerate(cases)])
    @pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
    def test_csr_gradients_match_torch_sparse(name, options, overrides, dtype):
        check_against_torch(name, options, overrides, dtype, foreach=False,
                            problem=make_row_sparse_problem(dtype))
    return test_csr_gradients_match_torch_sparse


def check_round_trip(name, kwargs, group1, dtype, problem=None, foreach=True):
    """npoptim state_dict -> fresh npoptim -> continue: the uninterrupted trajectory."""
    params, grads = make_problem(dtype) if problem is None else problem
    single = False if foreach else None
    full, _ = run_np(name, kwargs, group1, params, grads, foreach=single)
    first, opt = run_np(name, kwargs, group1, params, grads[:SPLIT], foreach=single)
    sd = opt.state_dict()
    rest, _ = run_np(name, kwargs, group1, first[-1], grads[SPLIT:], foreach=single,
                     state_dict=sd)
    for a, b in zip(rest, full[SPLIT:]):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


def check_round_trip_against_torch(name, kwargs, group1, dtype, problem=None, foreach=True,
                                   ulps=2, state_rtol=None):
    """Both libraries interrupted after SPLIT steps, each continuing from its own state_dict:
    the float64 states at the split agree, and npoptim's state, loaded into a fresh optimizer
    built with other hyperparameters (lr 0.5, no group overrides: loading must restore them),
    continues like torch's loaded into torch (torch's load casts some state to the param's
    dtype, e.g. ASGD's eta and mu or NAdam's mu_product, and npoptim's does too)."""
    params, grads = make_problem(dtype) if problem is None else problem
    single = False if foreach else None
    first, n_opt = run_np(name, kwargs, group1, params, grads[:SPLIT], foreach=single)
    runs = [run_torch(name, kwargs, group1, params, grads[:SPLIT], foreach=f)
            for f in ([single, True] if foreach else [single])]
    if dtype == np.float64:
        n_sd, t_sd = n_opt.state_dict(), torch_state_dict(runs[0][1])
        assert state_error(n_sd["state"], t_sd["state"]) <= tolerance(dtype, 0.0)
        assert_state_close(n_sd["state"], t_sd["state"])
        if state_rtol is not None:
            assert_state_close(n_sd["state"], t_sd["state"], rtol=state_rtol, atol=state_rtol)
    rest = run_np(name, dict(np_kwargs(kwargs), lr=0.5), {}, first[-1], grads[SPLIT:],
                  foreach=single, state_dict=n_opt.state_dict())
    # torch's load_state_dict keeps the given tensors (no copy): give each run its own
    expected, *other = [run_torch(name, kwargs, group1, trajectory[-1], grads[SPLIT:],
                                  foreach=f, state_dict=copy.deepcopy(t_opt.state_dict()))
                        for (trajectory, t_opt), f in zip(runs, [single, True])]
    compare_with_torch(*rest, *expected, dtype, other[0] if other else None, ulps, state_rtol,
                       label=f"{name} {kwargs} {group1} after a round trip")


def check_load_torch_state(name, kwargs, group1, dtype, problem=None, foreach=True, ulps=2):
    """torch state_dict (as NumPy) -> npoptim -> continue: torch's own continuation."""
    params, grads = make_problem(dtype) if problem is None else problem
    single = False if foreach else None
    first, t_opt = run_torch(name, kwargs, group1, params, grads[:SPLIT], foreach=single)
    loaded = torch_state_dict(t_opt)
    # torch's load_state_dict keeps the given tensors (no copy): give each run its own
    expected, _ = run_torch(name, kwargs, group1, first[-1], grads[SPLIT:], foreach=single,
                            state_dict=copy.deepcopy(t_opt.state_dict()))
    spread = 0.0
    if foreach:
        other, _ = run_torch(name, kwargs, group1, first[-1], grads[SPLIT:], foreach=True,
                             state_dict=copy.deepcopy(t_opt.state_dict()))
        spread = trajectory_error(other, expected)
    actual, _ = run_np(name, kwargs, group1, first[-1], grads[SPLIT:], foreach=single,
                       state_dict=loaded)
    assert trajectory_error(actual, expected) <= tolerance(dtype, spread, ulps)


def check_error_message(name, kwargs, shape=(2,)):
    with pytest.raises(ValueError) as expected:
        getattr(torch.optim, name)([torch.zeros(shape, requires_grad=True)], **kwargs)
    with pytest.raises(ValueError) as actual:
        getattr(npoptim, name)([np.zeros(shape)], **np_kwargs(kwargs))
    assert str(actual.value) == str(expected.value)


class TorchSuite:
    """The tests of an optimizer against torch.optim.NAME over its option matrix.

    A subclass named ``Test...`` sets NAME, CONFIGS ({id: torch kwargs}, or {id: (torch
    kwargs, group 1 overrides)}), GROUP1 (the second param group's overrides) and ERRORS
    (kwargs torch refuses with ValueError). EXACT lists the configs that must be bit-exact
    with torch in both dtypes: only where no op of the rule rounds differently in torch's
    vectorized kernels (its sqrt is not always correctly rounded). Every other config must
    reach MIN_EXACT_FLOAT64 in float64. A test method overridden without the ``dtype``
    argument runs once (e.g. for float32 only).

    The problem is :func:`make_problem`'s over SHAPES with :meth:`gradient`'s gradients.
    FOREACH = False: torch has no foreach implementation (none is passed to either library,
    and the float32 bound is F32_ULPS ulps alone). STATE_RTOL: float64 states also elementwise
    within it, relative and absolute. Every run must move some param by more than MIN_MOVE.
    """

    NAME = None
    CONFIGS = {}
    GROUP1 = {}
    ERRORS = []
    EXACT = ()
    MIN_EXACT_FLOAT64 = 0.95  # measured: 98% at least in every config of SGD..RAdam
    SHAPES = SHAPES
    FOREACH = True
    F32_ULPS = 2
    STATE_RTOL = None
    MIN_MOVE = 1e-3
    gradient = staticmethod(standard_gradient)

    def case(self, config):
        """(torch kwargs, group 1 overrides) of a config: CONFIGS' value is either the kwargs
        (with GROUP1's overrides) or such a pair of its own."""
        value = self.CONFIGS[config]
        return value if isinstance(value, tuple) else (value, self.GROUP1)

    def pytest_generate_tests(self, metafunc):
        if "config" in metafunc.fixturenames:
            metafunc.parametrize("config", list(self.CONFIGS))
        if "dtype" in metafunc.fixturenames:
            metafunc.parametrize("dtype", DTYPES, ids=["float64", "float32"])
        if "kwargs" in metafunc.fixturenames:
            metafunc.parametrize("kwargs", self.ERRORS, ids=[repr(e) for e in self.ERRORS])

    def problem(self, dtype, seed=0):
        return make_problem(dtype, seed, self.SHAPES, self.gradient)

    def options(self):
        """The tolerance options of the check_* functions."""
        return dict(foreach=self.FOREACH, ulps=self.F32_ULPS)

    @needs_torch
    def test_matches_torch(self, config, dtype):
        if config in self.EXACT:
            min_exact = 1.0
        else:
            min_exact = self.MIN_EXACT_FLOAT64 if dtype == np.float64 else 0.0
        check_against_torch(self.NAME, *self.case(config), dtype, min_exact=min_exact,
                            problem=self.problem(dtype), state_rtol=self.STATE_RTOL,
                            min_move=self.MIN_MOVE, **self.options())

    def test_exact_configs_exist(self):
        assert set(self.EXACT) <= set(self.CONFIGS)

    def test_state_dict_round_trip(self, config, dtype):
        check_round_trip(self.NAME, *self.case(config), dtype, problem=self.problem(dtype),
                         foreach=self.FOREACH)

    @needs_torch
    def test_round_trip_continues_like_torch(self, config, dtype):
        check_round_trip_against_torch(self.NAME, *self.case(config), dtype,
                                       problem=self.problem(dtype),
                                       state_rtol=self.STATE_RTOL, **self.options())

    @needs_torch
    def test_load_torch_state_dict(self, config, dtype):
        check_load_torch_state(self.NAME, *self.case(config), dtype,
                               problem=self.problem(dtype), **self.options())

    @needs_torch
    def test_invalid_hyperparameters(self, kwargs):
        check_error_message(self.NAME, kwargs, self.SHAPES[0])

    @needs_torch
    def test_defaults_and_group_keys_match_torch(self):
        shape = self.SHAPES[0]
        expected = getattr(torch.optim, self.NAME)([torch.zeros(shape, requires_grad=True)])
        actual = getattr(npoptim, self.NAME)([np.zeros(shape)])
        assert actual.state_dict() == expected.state_dict()

    def test_step_is_atomic(self, config):
        """A gradient of the wrong shape for the last param: nothing moves, not the params
        before it, not the state."""
        kwargs, group1 = self.case(config)
        params = [p.copy() for p in self.problem(np.float64)[0]]
        opt = getattr(npoptim, self.NAME)(groups(params, group1), **np_kwargs(kwargs))
        opt.step([np.ones(p.shape) for p in params])
        before = [p.copy() for p in params], copy.deepcopy(opt.state_dict())
        bad = [np.ones(p.shape) for p in params]
        bad[-1] = np.ones((params[-1].shape[0] + 1,) + params[-1].shape[1:])
        with pytest.raises(ValueError):
            opt.step(bad)
        for p, q in zip(params, before[0]):
            np.testing.assert_array_equal(p, q)
        after = opt.state_dict()
        assert_same_state(after["state"], before[1]["state"])
        assert after["param_groups"] == before[1]["param_groups"]


class DenseOnlySuite(TorchSuite):
    """:class:`TorchSuite` for an optimizer that refuses CSR gradients, as torch's does."""

    def test_csr_gradient_refused(self):
        p = np.ones((3, 2))
        opt = getattr(npoptim, self.NAME)([p])
        with pytest.raises(TypeError, match="sparse"):
            opt.step([scipy.sparse.csr_array(np.eye(3, 2))])
        np.testing.assert_array_equal(p, np.ones((3, 2)))
        assert opt.state == {}
