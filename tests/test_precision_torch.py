"""16-bit Adam, AdamW and SGD (npoptim.precision) against torch 2.13 on CPU, bit for bit.

bfloat16 and float16 params, grads and state over 24 steps, two param groups, with
``rounding="per-op"`` against torch's single-tensor path and ``"fused"`` against
``fused=True``. Shapes are chosen so that torch's scalar remainder loop is exercised (45 and 13
are not multiples of the 16-bit vector width); tensors stay below torch's parallel grain
(32768), where torch splits per-op operations between threads (see npoptim.precision.adam).
"""
import numpy as np
import pytest

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
]
GROUP1 = {"Adam": dict(lr=2e-2), "AdamW": dict(weight_decay=0.3), "SGD": dict(lr=5e-2)}


def numpy_dtype(format):
    return np.dtype(ml_dtypes.bfloat16) if format == "bfloat16" else np.dtype(np.float16)


def torch_lanes():
    """16-bit lanes of torch's CPU vectors here (the width of its scalar remainder)."""
    capability = torch.backends.cpu.get_cpu_capability()
    lanes = {"AVX512": 32, "AVX2": 16}.get(capability)
    if lanes is None:
        pytest.skip(f"torch's vector width on a {capability} CPU is not known to npoptim")
    return lanes


def problem(format, seed=0):
    """float32 params and gradients, rounded to the format (some gradients None)."""
    rng = np.random.default_rng(seed)
    dtype = numpy_dtype(format)
    params = [rng.standard_normal(s).astype(np.float32).astype(dtype) for s in SHAPES]
    grads = [[None if (t + i) % 5 == 3 else
              rng.standard_normal(s).astype(np.float32).astype(dtype)
              for i, s in enumerate(SHAPES)] for t in range(STEPS)]
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
            theirs, topt = torch_run(name, kwargs, group1, params, grads, format, **mode)
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


@needs_torch
@pytest.mark.parametrize("format", FORMATS)
def test_raw_uint16_bits_give_the_same_trajectory(format):
    params, grads = problem(format, seed=3)
    kwargs = dict(lr=1e-2, weight_decay=0.1)
    typed, _ = np_run("AdamW", kwargs, {}, params, grads, "fused")
    raw, _ = np_run("AdamW", kwargs, {}, params, grads, "fused", raw=True, format=format)
    assert all(np.array_equal(a, b) for x, y in zip(typed, raw) for a, b in zip(x, y))
