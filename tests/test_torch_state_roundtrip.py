"""State moves between torch.optim and npoptim, and the next step matches the other library's.

For every npoptim optimizer with a torch counterpart: torch runs a few steps, its state_dict
(tensors turned into NumPy arrays, as npoptim.torch_compat's docstring shows) is loaded into a
fresh npoptim optimizer over copies of the same parameters, and one more step of each must
agree; then the other way round with ``to_torch_state_dict``. npoptim never imports torch:
only this test does.
"""
import numpy as np
import pytest

from npoptim import registry
from npoptim.torch_compat import from_torch_state_dict, to_torch_state_dict

import problems
from problems import initial_values, objective
from torch_compare import needs_torch, to_numpy, torch  # to_numpy: the conversion a user does

STEPS = 5
NO_FOREACH = {"SparseAdam", "LBFGS", "Muon"}
CASES = problems.cases(name for name, (_, twin) in registry.OPTIMIZERS.items()
                       if twin is not None)
IDS = [f"{n}-{i}" for n, i, _ in CASES]


def make_torch(name, kwargs, values):
    tparams = [torch.tensor(v.copy(), requires_grad=True) for v in values]
    options = dict(kwargs)
    if name not in NO_FOREACH:
        options["foreach"] = False
    return problems.make(getattr(torch.optim, name), name, options, tparams), tparams


def make_ours(name, kwargs, values):
    params = [v.copy() for v in values]
    return problems.make(registry.get(name), name, kwargs, params), params


def torch_step(opt, tparams, name, step):
    if name == "LBFGS":
        def closure():
            loss, grads = objective([t.detach().numpy() for t in tparams])
            for t, g in zip(tparams, grads):
                t.grad = torch.from_numpy(g)
            return torch.tensor(loss, dtype=torch.float64)
        opt.step(closure)
        return
    grads = problems.step_gradients([t.detach().numpy() for t in tparams], step)
    for t, g in zip(tparams, grads):
        if g is None:
            t.grad = None
        elif name == "SparseAdam":
            t.grad = torch.from_numpy(g).to_sparse()
        else:
            t.grad = torch.from_numpy(g)
    opt.step()


#: float32 ulps (of the scale) that a step may differ by: 4, and 16 for LBFGS, whose float32
#: dot products do not follow torch's (MKL's ``sdot`` order is not reproduced, and depends on
#: the CPU: tests/test_lbfgs.py's docstring): ``ro = 1 / (y . s)`` of the step after loading
#: differed from torch's by 4.2 ulps on an AMD EPYC with AVX-512 (an Intel Xeon stayed within
#: 4), and a dot of n terms summed in another order may move by up to about n/2 ulps
F32_ULPS = {"LBFGS": 16}


def assert_close(ours, theirs, dtype, where, ulps=4):
    """Same values: float64 to 1e-12 of the scale, float32 to ``ulps`` ulps of it."""
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    assert ours.shape == theirs.shape, where
    scale = max(1.0, float(np.max(np.abs(theirs), initial=0.0)))
    tol = 1e-12 if dtype == np.float64 else ulps * np.finfo(np.float32).eps
    err = float(np.max(np.abs(ours - theirs), initial=0.0)) / scale
    assert err <= tol, (where, err)


def assert_state_close(ours, theirs, dtype, where="state", ulps=4):
    """Compare two state trees (numbers, arrays, lists, dicts) value by value."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and set(ours) == set(theirs), (where, ours, theirs)
        for k in theirs:
            assert_state_close(ours[k], theirs[k], dtype, f"{where}[{k!r}]", ulps)
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_state_close(a, b, dtype, f"{where}[{i}]", ulps)
    elif theirs is None:
        assert ours is None, where
    else:
        assert_close(ours, theirs, dtype, where, ulps)


def compare_runs(opt, params, topt, tparams, dtype):
    ulps = F32_ULPS.get(type(opt).__name__, 4)
    for k, (p, t) in enumerate(zip(params, tparams)):
        assert_close(p, t.detach().numpy(), dtype, f"param {k}", ulps)
    assert_state_close(opt.state_dict()["state"], to_numpy(topt.state_dict()["state"]), dtype,
                       ulps=ulps)


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,i,kwargs", CASES, ids=IDS)
def test_torch_state_continues_in_npoptim(name, i, kwargs, dtype):
    topt, tparams = make_torch(name, kwargs, initial_values(dtype))
    for step in range(STEPS):
        torch_step(topt, tparams, name, step)

    # npoptim over copies of torch's current values; constructed with default options, which
    # loading replaces by torch's
    values = [t.detach().numpy().copy() for t in tparams]
    opt = problems.make(registry.get(name), name, {}, values)
    converted = to_numpy(topt.state_dict())
    opt.load_state_dict(from_torch_state_dict(converted))
    for ours, theirs in zip(opt.param_groups, topt.param_groups):
        for key, value in theirs.items():
            if key != "params":
                assert ours[key] == value, key
    assert_state_close(opt.state_dict()["state"], converted["state"], dtype)

    # the reference: torch loading the same state (loading casts state to the parameter's
    # dtype, which changes NAdam's float32 mu_product beside float64 params, in both libraries)
    tref, tref_params = make_torch(name, {}, values)
    tref.load_state_dict(topt.state_dict())
    for step in range(STEPS, STEPS + 2):
        torch_step(tref, tref_params, name, step)
        problems.step(opt, values, name, step)
    compare_runs(opt, values, tref, tref_params, dtype)


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,i,kwargs", CASES, ids=IDS)
def test_npoptim_state_continues_in_torch(name, i, kwargs, dtype):
    opt, params = make_ours(name, kwargs, initial_values(dtype))
    for step in range(STEPS):
        problems.step(opt, params, name, step)

    tparams = [torch.tensor(p.copy(), requires_grad=True) for p in params]
    options = {} if name in NO_FOREACH else {"foreach": False}
    topt = problems.make(getattr(torch.optim, name), name, options, tparams)
    sd = to_torch_state_dict(opt.state_dict(), as_tensor=torch.from_numpy)
    # the reference: npoptim loading its own state (see the test above)
    ref, params = make_ours(name, {}, params)
    ref.load_state_dict(opt.state_dict())
    opt = ref
    if "foreach" in options:
        for group in sd["param_groups"]:
            group["foreach"] = False
    topt.load_state_dict(sd)
    conventions = getattr(type(opt), "torch_conventions", {})  # npoptim's, at torch's value
    for ours, theirs in zip(opt.param_groups, topt.param_groups):
        for key, value in ours.items():
            if key in conventions:
                assert value == conventions[key], key
            elif key not in ("params", "foreach"):
                assert theirs[key] == value, key

    for step in range(STEPS, STEPS + 2):
        torch_step(topt, tparams, name, step)
        problems.step(opt, params, name, step)
    compare_runs(opt, params, topt, tparams, dtype)


@needs_torch
def test_round_trip_through_torch_is_exact():
    """npoptim -> torch -> npoptim without a step in between gives the same state_dict back."""
    opt, params = make_ours("Adam", dict(lr=0.01, amsgrad=True), initial_values(np.float32))
    for step in range(3):
        problems.step(opt, params, "Adam", step)
    tparams = [torch.tensor(p.copy(), requires_grad=True) for p in params]
    topt = problems.make(torch.optim.Adam, "Adam", {}, tparams)
    topt.load_state_dict(to_torch_state_dict(opt.state_dict(), as_tensor=torch.from_numpy))
    back, _ = make_ours("Adam", {}, params)
    back.load_state_dict(from_torch_state_dict(topt.state_dict()))  # tensors, duck-typed
    a, b = opt.state_dict(), back.state_dict()
    assert a["param_groups"] == b["param_groups"]
    for i in a["state"]:
        for key, value in a["state"][i].items():
            assert value.dtype == b["state"][i][key].dtype
            assert value.tobytes() == b["state"][i][key].tobytes(), key


def test_from_torch_normalises_and_copies():
    sd = {"state": {"0": {"step": np.array(3.0, np.float32),
                          "exp_avg": np.zeros((2, 2))[:, ::1].T,
                          "exp_avg_sq": np.ones((2, 2))}},
          "param_groups": [{"lr": np.array(0.01), "betas": (np.float64(0.9), 0.999),
                            "eps": 1e-8, "params": ["0"]}]}
    out = from_torch_state_dict(sd)
    assert list(out["state"]) == [0] and out["param_groups"][0]["params"] == [0]
    group = out["param_groups"][0]
    assert type(group["lr"]) is float and group["lr"] == 0.01
    assert type(group["betas"]) is tuple and type(group["betas"][0]) is float
    assert out["state"][0]["exp_avg"].flags.c_contiguous
    assert not np.shares_memory(out["state"][0]["exp_avg_sq"], sd["state"]["0"]["exp_avg_sq"])
    assert isinstance(sd["param_groups"][0]["lr"], np.ndarray)  # the input is left alone


@needs_torch
def test_from_torch_accepts_tensors_directly():
    p = torch.zeros(3, requires_grad=True)
    topt = torch.optim.Adam([p], lr=torch.tensor(0.02))
    p.grad = torch.ones(3)
    topt.step()
    out = from_torch_state_dict(topt.state_dict())
    assert isinstance(out["state"][0]["exp_avg"], np.ndarray)
    assert out["state"][0]["step"].dtype == np.float32
    assert type(out["param_groups"][0]["lr"]) is float
    opt = registry.get("Adam")([np.zeros(3, np.float32)])
    opt.load_state_dict(out)
    assert opt.state[0]["step"] == 1


@needs_torch
def test_to_torch_normalises_without_a_converter():
    sd = {"state": {0: {"step": np.array(2.0, np.float32),
                        "buf": np.arange(6, dtype=">f8").reshape(2, 3)[:, ::2]}},
          "param_groups": [{"lr": np.float32(0.5), "params": [np.int64(0)]}]}
    out = to_torch_state_dict(sd)
    buf = out["state"][0]["buf"]
    assert buf.dtype == np.float64 and buf.dtype.isnative and buf.flags.c_contiguous
    assert buf.flags.writeable and np.array_equal(buf, [[0, 2], [3, 5]])
    assert type(out["param_groups"][0]["lr"]) is float
    ids = out["param_groups"][0]["params"]
    assert ids == [0] and type(ids[0]) is int
    torch.from_numpy(buf)  # accepted as is


@pytest.mark.parametrize("bad", [None, [], {"state": {}}, {"state": [], "param_groups": []},
                                 {"state": {"x": {}}, "param_groups": []}])
def test_malformed_input_is_refused(bad):
    with pytest.raises(ValueError):
        from_torch_state_dict(bad)


@needs_torch
def test_torch_state_with_a_scheduler_continues_in_npoptim():
    """A torch scheduler puts ``initial_lr`` in the param groups; the state still loads, and
    npoptim's scheduler, given torch's scheduler state, carries on."""
    S = pytest.importorskip("npoptim.lr_scheduler")
    values = initial_values(np.float64)
    topt, tparams = make_torch("Adam", dict(lr=0.01), values)
    tsched = torch.optim.lr_scheduler.StepLR(topt, step_size=2, gamma=0.5)
    for step in range(STEPS):
        torch_step(topt, tparams, "Adam", step)
        tsched.step()
    params = [t.detach().numpy().copy() for t in tparams]
    # as in torch: build the optimizer and the scheduler, then load both states
    opt = problems.make(registry.get("Adam"), "Adam", {}, params)
    sched = S.StepLR(opt, step_size=2, gamma=0.5)
    opt.load_state_dict(from_torch_state_dict(to_numpy(topt.state_dict())))
    sched.load_state_dict(to_numpy(tsched.state_dict()))
    for step in range(STEPS, STEPS + 3):
        torch_step(topt, tparams, "Adam", step)
        tsched.step()
        problems.step(opt, params, "Adam", step)
        sched.step()
    assert sched.get_last_lr() == tsched.get_last_lr()
    compare_runs(opt, params, topt, tparams, np.float64)
