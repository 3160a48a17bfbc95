"""16-bit Adam, AdamW, SGD, RMSprop, Adagrad, Adamax and Adadelta (npoptim.precision) against
torch 2.13 on CPU, bit for bit.

bfloat16 and float16 params, grads and state over 24 steps, two param groups, with
``rounding="per-op"`` against torch's single-tensor path and ``"fused"`` against
``fused=True``. Shapes are chosen so that torch's scalar remainder loop is exercised (45 and 13
are not multiples of the 16-bit vector width); tensors stay below torch's parallel grain
(32768), where torch splits per-op operations between threads (see npoptim.precision.adam).
"""
import numpy as np
import pytest

import cpu_probe
import npoptim.precision as precision
from torch_compare import needs_torch, torch

ml_dtypes = pytest.importorskip("ml_dtypes")

SHAPES = [(64,), (3, 45), (1,), (7, 13)]
STEPS = 24
FORMATS = ["bfloat16", "float16"]

CASES = [
    ("AdamW", dict(lr=1e-2), ("per-op", "fused")),
    ("AdamW", dict(lr=1e-2, weight_decay=0.1, amsgrad=True), ("per-op", "fused")),
    ("Adam", dict(lr=1e-2, weight_decay=0.1), ("per-op", "fused")),
    ("Adam", dict(lr=3e-3, betas=(0.8, 0.99), maximize=True, eps=1e-6), ("per-op", "fused")),
    ("SGD", dict(lr=1e-2), ("per-op",)),
    ("SGD", dict(lr=1e-2, momentum=0.9, weight_decay=0.01), ("per-op",)),
    ("SGD", dict(lr=3e-2, momentum=0.9, nesterov=True), ("per-op",)),
    ("SGD", dict(lr=1e-2, momentum=0.8, dampening=0.3, maximize=True), ("per-op",)),
    ("RMSprop", dict(lr=1e-2), ("per-op",)),
    ("RMSprop", dict(lr=1e-2, weight_decay=0.1, maximize=True), ("per-op",)),
    ("RMSprop", dict(lr=1e-3, alpha=0.9, momentum=0.9, centered=True, weight_decay=0.01),
     ("per-op",)),
    ("Adagrad", dict(lr=0.1), ("per-op", "fused")),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, initial_accumulator_value=0.1, weight_decay=0.1,
                     eps=1e-6, maximize=True), ("per-op", "fused")),
    ("Adamax", dict(lr=1e-2), ("per-op",)),
    ("Adamax", dict(lr=1e-2, betas=(0.8, 0.99), weight_decay=0.1, maximize=True), ("per-op",)),
    ("Adadelta", dict(lr=1.0), ("per-op",)),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1, maximize=True), ("per-op",)),
]
GROUP1 = {"Adam": dict(lr=2e-2), "AdamW": dict(weight_decay=0.3), "SGD": dict(lr=5e-2),
          "RMSprop": dict(lr=5e-3, centered=True), "Adagrad": dict(lr=0.05),
          "Adamax": dict(lr=5e-3), "Adadelta": dict(rho=0.95)}


def numpy_dtype(format):
    return np.dtype(ml_dtypes.bfloat16) if format == "bfloat16" else np.dtype(np.float16)


def torch_lanes():
    """16-bit lanes of torch's CPU vectors here (the width of its scalar remainder), measured
    on torch by :func:`cpu_probe.half_lanes` (32 with torch's AVX2 and AVX-512 kernels)."""
    lanes = cpu_probe.half_lanes()
    if lanes is None:
        pytest.skip("no vector width explains torch's 16-bit add here (torch capability "
                    f"{torch.backends.cpu.get_cpu_capability()}): see cpu_probe.half_lanes")
    return lanes


def problem(format, seed=0, shapes=SHAPES, steps=STEPS):
    """float32 params and gradients, rounded to the format (some gradients None)."""
    rng = np.random.default_rng(seed)
    dtype = numpy_dtype(format)
    params = [rng.standard_normal(s).astype(np.float32).astype(dtype) for s in shapes]
    grads = [[None if (t + i) % 5 == 3 else
              rng.standard_normal(s).astype(np.float32).astype(dtype)
              for i, s in enumerate(shapes)] for t in range(steps)]
    return params, grads


def as_torch(array, format):
    return torch.from_numpy(array.view(np.int16).copy()).view(getattr(torch, format))


def bits(x):
    """The 16-bit patterns of a torch tensor or a NumPy 16-bit array, as uint16."""
    if torch is not None and torch.is_tensor(x):
        return x.detach().view(torch.int16).numpy().view(np.uint16)
    return x.view(np.uint16)


def torch_run(name, kwargs, group1, params, grads, format, **mode):
    ps = [as_torch(p, format).requires_grad_() for p in params]
    opt = getattr(torch.optim, name)([{"params": ps[:2]}, {"params": ps[2:], **group1}],
                                     **kwargs, **mode)
    trajectory = []
    for step in grads:
        for p, g in zip(ps, step):
            p.grad = None if g is None else as_torch(g, format)
        opt.step()
        trajectory.append([bits(p).copy() for p in ps])
    return trajectory, opt


def np_run(name, kwargs, group1, params, grads, rounding, raw=False, format=None):
    ps = [(p.view(np.uint16) if raw else p).copy() for p in params]
    opt = getattr(precision, name)([{"params": ps[:2]}, {"params": ps[2:], **group1}],
                                   rounding=rounding, format=format if raw else None,
                                   torch_cpu_lanes=torch_lanes(), **kwargs)
    trajectory = []
    for step in grads:
        opt.step([None if g is None else (g.view(np.uint16) if raw else g) for g in step])
        trajectory.append([bits(p).copy() for p in ps])
    return trajectory, opt


#: torch's implementations each rounding reproduces. torch's foreach path on CPU rounds its
#: 16-bit tensors differently from its single-tensor path (measured: up to half the elements of
#: a trajectory differ); "per-op" is the single-tensor path, torch's CPU default.
TORCH_MODES = {"per-op": [dict(foreach=False)], "fused": [dict(fused=True)]}


@needs_torch
@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("name, kwargs, roundings", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_bit_exact_against_torch(name, kwargs, roundings, format):
    params, grads = problem(format)
    group1 = GROUP1[name]
    for rounding in roundings:
        ours, opt = np_run(name, kwargs, group1, params, grads, rounding)
        for mode in TORCH_MODES[rounding]:
            threads = torch.get_num_threads()
            if name == "Adagrad":  # its fused kernel's scalar tail follows the thread split
                torch.set_num_threads(1)
            try:
                theirs, topt = torch_run(name, kwargs, group1, params, grads, format, **mode)
            finally:
                torch.set_num_threads(threads)
            for t, (a, b) in enumerate(zip(ours, theirs)):
                for i, (x, y) in enumerate(zip(a, b)):
                    assert np.array_equal(x, y), (rounding, mode, f"step {t + 1}, param {i}",
                                                  int((x != y).sum()))
            tparams = [p for g in topt.param_groups for p in g["params"]]
            for index, tp in enumerate(tparams):
                for key, value in topt.state[tp].items():
                    if key == "step":
                        assert opt.state[index]["step"] == int(value)
                        continue
                    assert np.array_equal(bits(opt.state[index][key]), bits(value)), \
                        (rounding, mode, index, key)


EPS_DOMINATED = [("Adam", dict(lr=1e-2, eps=1e-6), ("per-op", "fused")),
                 ("AdamW", dict(lr=1e-2, eps=1e-6, amsgrad=True), ("per-op", "fused")),
                 ("RMSprop", dict(lr=1e-2, eps=1e-6), ("per-op",)),
                 ("Adagrad", dict(lr=0.1, eps=1e-6), ("per-op", "fused")),
                 ("Adamax", dict(lr=1e-2, eps=1e-6), ("per-op",)),
                 ("Adadelta", dict(lr=1.0, eps=1e-6), ("per-op",))]


@needs_torch
@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("name, kwargs, roundings", EPS_DOMINATED,
                         ids=[c[0] for c in EPS_DOMINATED])
def test_eps_dominated_bit_exact_against_torch(name, kwargs, roundings, format):
    """Gradients of 1e-6: eps is comparable to sqrt(v), and torch's ``tensor.add_(eps)`` rounds
    eps to the 16-bit format first (a float32 eps differs in ~100-900 elements of bfloat16
    trajectories, measured)."""
    params, grads = problem(format, seed=2)
    grads = [[None if g is None else (g.astype(np.float32) * 1e-6).astype(g.dtype) for g in s]
             for s in grads]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # fused Adagrad's tails follow its thread split
    try:
        for rounding in roundings:
            ours, _ = np_run(name, kwargs, {}, params, grads, rounding)
            theirs, _ = torch_run(name, kwargs, {}, params, grads, format,
                                  **TORCH_MODES[rounding][0])
            assert all(np.array_equal(a, b) for x, y in zip(ours, theirs)
                       for a, b in zip(x, y)), rounding
    finally:
        torch.set_num_threads(threads)


@needs_torch
@pytest.mark.parametrize("format", FORMATS)
def test_raw_uint16_bits_give_the_same_trajectory(format):
    params, grads = problem(format, seed=3)
    kwargs = dict(lr=1e-2, weight_decay=0.1)
    typed, _ = np_run("AdamW", kwargs, {}, params, grads, "fused")
    raw, _ = np_run("AdamW", kwargs, {}, params, grads, "fused", raw=True, format=format)
    assert all(np.array_equal(a, b) for x, y in zip(typed, raw) for a, b in zip(x, y))


@needs_torch
@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("name, kwargs", [("AdamW", dict(lr=1e-2, weight_decay=0.1)),
                                          ("SGD", dict(lr=1e-2, momentum=0.9))])
def test_master_weights_match_torchs_float32_master_recipe(name, kwargs, format):
    """torch: float32 masters ``p.float()``, the float32 optimizer on them with the 16-bit
    grads widened, ``model.copy_(master)`` after each step. npoptim's float32 optimizers agree
    with torch's to a few float32 ulps (tests/torch_compare.py), most elements bit for bit; the
    model copies agree bit for bit wherever the masters do, and the copy is exactly the
    master rounded to nearest even."""
    import npoptim

    params, grads = problem(format, seed=5)
    model = [p.copy() for p in params]
    master = precision.MasterWeights(model, lambda ps: getattr(npoptim, name)(ps, **kwargs))
    tmodel = [as_torch(p, format) for p in params]
    exact = []
    tmaster = [p.float().requires_grad_() for p in tmodel]
    topt = getattr(torch.optim, name)(tmaster, **kwargs)
    for step in grads:
        master.step(step)
        for p, g in zip(tmaster, step):
            p.grad = None if g is None else as_torch(g, format).float()
        topt.step()
        with torch.no_grad():
            for m, t in zip(tmaster, tmodel):
                t.copy_(m)
        for ours, theirs, m, tm in zip(model, tmodel, master.params, tmaster):
            tm = tm.detach().numpy()
            scale = max(1.0, float(np.abs(tm).max()))
            assert np.abs(m - tm).max() <= 8 * np.finfo(np.float32).eps * scale
            same = m == tm
            assert np.array_equal(bits(ours)[same], bits(theirs)[same])
            assert np.array_equal(bits(ours), bits(precision.formats.from_float32_array(
                m, format)))
            exact.append(same.mean())
    assert np.mean(exact) > 0.9


@needs_torch
def test_grad_scaler_matches_torch_step_for_step():
    """float32 params (torch's AMP keeps them float32), scaled gradients that overflow now and
    then, growth_interval 3: scale, skipped steps, unscaled gradients and params (SGD with
    momentum, whose float32 steps equal torch's bit for bit) agree with torch.amp.GradScaler."""
    import npoptim

    rng = np.random.default_rng(11)
    p0 = rng.standard_normal((4, 33)).astype(np.float32)
    ours_p = p0.copy()
    opt = npoptim.SGD([ours_p], lr=1e-2, momentum=0.9)
    scaler = precision.GradScaler(init_scale=2.0 ** 10, growth_interval=3)
    tp = torch.tensor(p0, requires_grad=True)
    topt = torch.optim.SGD([tp], lr=1e-2, momentum=0.9)
    tscaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=3)
    for t in range(30):
        loss = np.float32(1.5)
        assert float(scaler.scale(loss)) == float(tscaler.scale(torch.tensor(loss)))
        grad = (rng.standard_normal(p0.shape) * np.float32(scaler.get_scale())).astype(
            np.float32)
        if t % 7 == 4:
            grad[1, 3] = np.inf
        if t % 11 == 6:
            grad[0, 0] = np.nan
        (unscaled,), found_inf = scaler.unscale([grad])
        stepped = scaler.step(opt, [grad])
        scaler.update()
        tp.grad = torch.from_numpy(grad.copy())
        tscaler.unscale_(topt)
        if not found_inf:
            assert np.array_equal(unscaled, tp.grad.numpy())
        tscaler.step(topt)
        tscaler.update()
        assert scaler.get_scale() == tscaler.get_scale(), t
        assert stepped == (not (t % 7 == 4 or t % 11 == 6))
        assert np.array_equal(ours_p, tp.detach().numpy()), t
    assert scaler.state_dict() == tscaler.state_dict()


@needs_torch
@pytest.mark.parametrize("format", FORMATS)
def test_state_dict_round_trip_and_torchs_state_dict_continue_bit_for_bit(format):
    """Stop after 11 steps: npoptim's own state_dict, and torch's (its 16-bit tensors widened
    to float32), load into fresh optimizers that continue exactly as torch does."""
    from torch_compare import to_numpy

    params, grads = problem(format, seed=9)
    grads = [[g if g is not None else np.zeros_like(params[i]) for i, g in enumerate(step)]
             for step in grads]  # every param has state at the split
    kwargs = dict(lr=1e-2, weight_decay=0.1)
    theirs, topt = torch_run("AdamW", kwargs, {}, params, grads, format, fused=True)
    first, opt = np_run("AdamW", kwargs, {}, params, grads[:11], "fused")
    _, topt_first = torch_run("AdamW", kwargs, {}, params, grads[:11], format, fused=True)
    for source in (opt.state_dict(), to_numpy(topt_first.state_dict())):
        ps = [p.view(numpy_dtype(format)).copy() for p in first[-1]]
        resumed = precision.AdamW([{"params": ps[:2]}, {"params": ps[2:]}], rounding="fused",
                                  torch_cpu_lanes=torch_lanes(), **kwargs)
        resumed.load_state_dict(source)
        for t, step in enumerate(grads[11:], start=11):
            resumed.step(step)
            assert all(np.array_equal(bits(p), q) for p, q in zip(ps, theirs[t])), t
    with pytest.raises(ValueError, match="does not hold exactly"):
        bad = opt.state_dict()
        bad["state"][0]["exp_avg"] = bad["state"][0]["exp_avg"].astype(np.float32) + 1e-4
        ps = [p.copy() for p in params]
        precision.AdamW([{"params": ps[:2]}, {"params": ps[2:]}],
                        rounding="fused").load_state_dict(bad)
