"""16-bit NAdam, RAdam, ASGD and Rprop (npoptim.precision) against torch 2.13 on CPU, bit for bit.

As tests/test_precision_torch.py: bfloat16 and float16 params, grads and state over 24 steps,
two param groups, shapes that exercise torch's scalar remainder loop, ``rounding="per-op"``
against torch's single-tensor path (its CPU default: torch 2.13 has no fused kernel for any of
the four, and takes its foreach path on CPU only when asked). Rprop's foreach path rounds as
its single-tensor path (measured, and checked here); NAdam's, RAdam's and ASGD's do not
(measured: 60 to 4700 of the 6,984 element-steps differ), and are not reproduced.
"""
import numpy as np
import pytest

import npoptim.precision as precision
from test_precision_torch import (FORMATS, as_torch, bits, np_run, numpy_dtype, problem,
                                  torch_lanes, torch_run)
from torch_compare import needs_torch, to_numpy, torch

pytest.importorskip("ml_dtypes")

CASES = [
    ("NAdam", dict(lr=1e-2)),
    ("NAdam", dict(lr=1e-2, weight_decay=0.1)),
    ("NAdam", dict(lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True, momentum_decay=0.01,
                   maximize=True)),
    ("NAdam", dict(lr=3e-3, betas=(0.8, 0.99), eps=1e-6)),
    ("RAdam", dict(lr=1e-2)),  # rho_t <= 5 for steps 1-5, rectified from step 6
    ("RAdam", dict(lr=1e-2, weight_decay=0.1)),
    ("RAdam", dict(lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True, betas=(0.8, 0.99),
                   maximize=True)),
    ("ASGD", dict(lr=1e-2)),  # t0=1e6: the average is a copy
    ("ASGD", dict(lr=1e-2, t0=5, lambd=0.01, alpha=0.5, weight_decay=0.1)),
    ("ASGD", dict(lr=3e-2, t0=3, lambd=0.1, alpha=1.0, maximize=True)),
    ("Rprop", dict(lr=1e-2)),
    ("Rprop", dict(lr=1e-2, etas=(0.3, 1.3), step_sizes=(1e-3, 0.05))),  # R(0.3) != 0.3
    ("Rprop", dict(lr=1e-2, maximize=True)),
    ("Rprop", dict(lr=1e-2, etas=(1e-8, 1.2))),  # float16: R(etaminus) = 0, its factor 1
    ("Rprop", dict(lr=2e-2, etas=(0.999, 1.001))),  # both factors round to 1.0
]
GROUP1 = {"NAdam": dict(lr=5e-3, momentum_decay=0.02), "RAdam": dict(lr=2e-2),
          "ASGD": dict(lr=5e-2, t0=2), "Rprop": dict(lr=5e-2, step_sizes=(1e-2, 1.0))}
#: torch's implementations the per-op rounding reproduces
TORCH_MODES = {"Rprop": [dict(foreach=False), dict(foreach=True)]}


def assert_same_run(ours, opt, theirs, topt, label):
    for t, (a, b) in enumerate(zip(ours, theirs)):
        for i, (x, y) in enumerate(zip(a, b)):
            assert np.array_equal(x, y), (label, f"step {t + 1}, param {i}", int((x != y).sum()))
    tparams = [p for g in topt.param_groups for p in g["params"]]
    for index, tp in enumerate(tparams):
        for key, value in topt.state[tp].items():
            mine = opt.state[index][key]
            if value.dim() == 0:  # step, and the float32 scalars mu_product, eta, mu
                assert np.float32(mine) == np.float32(value.item()), (label, index, key)
            else:
                assert np.array_equal(bits(mine), bits(value)), (label, index, key)


@needs_torch
@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("name, kwargs", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_bit_exact_against_torch(name, kwargs, format):
    params, grads = problem(format)
    ours, opt = np_run(name, kwargs, GROUP1[name], params, grads, "per-op")
    for mode in TORCH_MODES.get(name, [dict(foreach=False)]):
        theirs, topt = torch_run(name, kwargs, GROUP1[name], params, grads, format, **mode)
        assert_same_run(ours, opt, theirs, topt, mode)


def test_radam_cases_cover_both_phases():
    """The RAdam cases run unrectified steps (rho_t <= 5) and rectified ones."""
    for betas in ((0.9, 0.999), (0.8, 0.99)):
        beta2 = betas[1]
        rho_inf = 2 / (1 - beta2) - 1
        rho = [rho_inf - 2 * t * beta2 ** t / (1 - beta2 ** t) for t in range(1, 25)]
        assert min(rho) <= 5 < max(rho)


@needs_torch
@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("name, kwargs", [("NAdam", dict(lr=1e-2, eps=1e-6)),
                                          ("RAdam", dict(lr=1e-2, eps=1e-6)),
                                          ("Rprop", dict(lr=1e-3)),
                                          ("ASGD", dict(lr=1e-2, t0=2, weight_decay=0.1))])
def test_tiny_gradients_bit_exact_against_torch(name, kwargs, format):
    """Gradients of 1e-6: eps comparable to sqrt(v) (torch rounds eps to the format: a
    float32 eps fails NAdam's bfloat16 run; RAdam's R(sqrt(v) + eps) hides the difference, no
    element measured); for Rprop the float16 product of successive gradients underflows to 0
    (the step size is kept; an unrounded product fails), which this checks happens."""
    params, grads = problem(format, seed=2)
    grads = [[None if g is None else (g.astype(np.float32) * 1e-6).astype(g.dtype) for g in s]
             for s in grads]
    if name == "Rprop" and format == "float16":
        g0, g1 = grads[0][0].astype(np.float32), grads[1][0].astype(np.float32)
        product = (g0 * g1).astype(np.float16)
        assert np.any((product == 0) & (g0 * g1 != 0))
    ours, opt = np_run(name, kwargs, {}, params, grads, "per-op")
    theirs, topt = torch_run(name, kwargs, {}, params, grads, format, foreach=False)
    assert_same_run(ours, opt, theirs, topt, "tiny")


@needs_torch
@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("name, kwargs", [("NAdam", dict(lr=1e-2, weight_decay=0.1)),
                                          ("RAdam", dict(lr=1e-2, decoupled_weight_decay=True,
                                                         weight_decay=0.1)),
                                          ("ASGD", dict(lr=1e-2, t0=4)),
                                          ("Rprop", dict(lr=1e-2))])
def test_a_learning_rate_schedule_matches_torch(name, kwargs, format):
    """lr a plain float changed between steps (torch's LR schedulers write group["lr"]);
    Rprop and ASGD read it only when state is created (step size, eta), as torch does."""
    params, grads = problem(format, seed=4)
    ps = [p.copy() for p in params]
    opt = getattr(precision, name)(ps, torch_cpu_lanes=torch_lanes(), **kwargs)
    tps = [as_torch(p, format).requires_grad_() for p in params]
    topt = getattr(torch.optim, name)(tps, foreach=False, **kwargs)
    for t, step in enumerate(grads):
        lr = kwargs["lr"] * (0.9 ** t if t < 12 else 2.0)
        opt.param_groups[0]["lr"] = topt.param_groups[0]["lr"] = lr
        opt.step(step)
        for p, g in zip(tps, step):
            p.grad = None if g is None else as_torch(g, format)
        topt.step()
        for i, (p, tp) in enumerate(zip(ps, tps)):
            assert np.array_equal(bits(p), bits(tp)), (t, i)


@needs_torch
@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("name, kwargs", [("NAdam", dict(lr=1e-2, weight_decay=0.1)),
                                          ("ASGD", dict(lr=1e-2, t0=4)),
                                          ("RAdam", dict(lr=1e-2)), ("Rprop", dict(lr=1e-2))])
def test_loading_torchs_state_dict_continues_as_torch_does(name, kwargs, format):
    """torch's load_state_dict casts NAdam's mu_product and ASGD's eta and mu to the param's
    16-bit dtype, and later steps round them to it: torch's state_dict after 11 steps, loaded
    into npoptim and into a fresh torch optimizer, continues bit for bit; so does npoptim's own
    state_dict loaded into a fresh npoptim optimizer."""
    params, grads = problem(format, seed=9)
    grads = [[g if g is not None else np.zeros_like(params[i]) for i, g in enumerate(step)]
             for step in grads]  # every param has state at the split
    first, opt = np_run(name, kwargs, {}, params, grads[:11], "per-op")
    _, topt = torch_run(name, kwargs, {}, params, grads[:11], format, foreach=False)
    tps = [as_torch(p.view(numpy_dtype(format)), format).requires_grad_() for p in first[-1]]
    tresumed = getattr(torch.optim, name)([{"params": tps[:2]}, {"params": tps[2:]}],
                                          foreach=False, **kwargs)
    saved = to_numpy(topt.state_dict())  # before loading: torch's load shares its tensors
    tresumed.load_state_dict(topt.state_dict())
    theirs = []
    for step in grads[11:]:
        for p, g in zip(tps, step):
            p.grad = as_torch(g, format)
        tresumed.step()
        theirs.append([bits(p).copy() for p in tps])
    for source in (saved, opt.state_dict()):
        ps = [p.view(numpy_dtype(format)).copy() for p in first[-1]]
        resumed = getattr(precision, name)([{"params": ps[:2]}, {"params": ps[2:]}],
                                           torch_cpu_lanes=torch_lanes(), **kwargs)
        resumed.load_state_dict(source)
        for t, step in enumerate(grads[11:]):
            resumed.step(step)
            assert all(np.array_equal(bits(p), q) for p, q in zip(ps, theirs[t])), t
        for name_ in resumed.scalar_states:
            assert resumed.state[0][name_].dtype == numpy_dtype(format)


@pytest.mark.parametrize("name", ["NAdam", "RAdam", "ASGD", "Rprop"])
def test_unknown_rounding_modes_are_refused_before_anything_changes(name):
    param = np.linspace(-1, 1, 20).astype(np.float32).astype(numpy_dtype("bfloat16"))
    for rounding in ("fused", "stochastic", "exact"):
        with pytest.raises(ValueError, match="rounding must be one of 'per-op'"):
            getattr(precision, name)([param], rounding=rounding)
    opt = getattr(precision, name)([param], lr=1e-2)
    opt.step([param.copy()])
    before = param.copy(), {n: np.copy(v) for n, v in opt.state[0].items()}
    opt.param_groups[0]["rounding"] = "fused"
    with pytest.raises(ValueError, match="rounding must be one of"):
        opt.step([param.copy()])
    assert param.tobytes() == before[0].tobytes()
    assert all(np.asarray(v).tobytes() == before[1][n].tobytes() for n, v in opt.state[0].items())


@pytest.mark.parametrize("name, options", [("NAdam", dict(state_dtype="param")),
                                           ("NAdam", dict(momentum_schedule="none")),
                                           ("RAdam", dict(eps_mode="bias_corrected")),
                                           ("RAdam", dict(rectify_threshold_inclusive=True))])
def test_other_frameworks_conventions_are_refused(name, options):
    param = np.zeros(4, numpy_dtype("float16"))
    with pytest.raises(ValueError, match="torch's conventions only"):
        getattr(precision, name)([param], **options)


@needs_torch
def test_rprop_bounds_beyond_float16_raise_before_anything_changes_as_torch_refuses():
    params, grads = problem("float16")
    ps = [p.copy() for p in params]
    opt = precision.Rprop(ps, lr=1e-2, step_sizes=(1e-6, 1e6))
    with pytest.raises(ValueError, match=r"step_sizes=\(1e-06, 1000000.0\) cannot be "
                                         "converted to float16 without overflow"):
        opt.step(grads[0])
    assert all(p.tobytes() == q.tobytes() for p, q in zip(ps, params)) and not opt.state
    tps = [as_torch(p, "float16").requires_grad_() for p in params]
    for p, g in zip(tps, grads[0]):
        p.grad = None if g is None else as_torch(g, "float16")
    with pytest.raises(RuntimeError, match="without overflow"):
        torch.optim.Rprop(tps, lr=1e-2, step_sizes=(1e-6, 1e6), foreach=False).step()
    # bfloat16 holds 1e6 (and float16 holds inf: torch converts it)
    bf = [p.astype(np.float32).astype(numpy_dtype("bfloat16")) for p in params]
    precision.Rprop(bf, step_sizes=(1e-6, 1e6)).step(
        [None if g is None else g.astype(np.float32).astype(bf[0].dtype) for g in grads[0]])
    precision.Rprop(ps, step_sizes=(1e-6, np.inf)).step(grads[0])

