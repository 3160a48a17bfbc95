"""Kahan-compensated 16-bit AdamW, SGD and Lion (npoptim.precision.kahan) against torch-optimi's
``kahan_sum=True`` on CPU, bit for bit over 24 steps: params, moments and ``kahan_comp`` (and
optimi's plain 16-bit Lion, ``kahan_sum=False``).

optimi is installed with ``pip install --no-deps torch-optimi`` (so torch stays 2.13); the tests
skip without it, and ``NPOPTIM_REQUIRE_TORCH_OPTIMI=1`` (CI) makes that a failure.
"""
import numpy as np
import pytest

import npoptim.precision as precision
from test_precision_torch import bits, numpy_dtype, torch_lanes
from torch_compare import needs_torch, torch

try:
    import optimi
except ImportError:  # the tests that need it skip
    optimi = None

CASES = [
    ("KahanAdamW", "AdamW", dict(lr=1e-3)),
    ("KahanAdamW", "AdamW", dict(lr=1e-2, betas=(0.8, 0.95), weight_decay=0.1, eps=1e-5)),
    ("KahanSGD", "SGD", dict(lr=1e-3)),
    ("KahanSGD", "SGD", dict(lr=1e-3, momentum=0.9, weight_decay=0.01)),
    ("KahanLion", "Lion", dict(lr=1e-4)),
    ("KahanLion", "Lion", dict(lr=1e-3, betas=(0.95, 0.98), weight_decay=0.1)),
    ("KahanLion", "Lion", dict(lr=1e-3, weight_decay=0.1, kahan_sum=False)),
]
SHAPES = [(64,), (3, 45), (1,)]


@needs_torch
@pytest.mark.needs("optimi")
@pytest.mark.parametrize("format", ["bfloat16", "float16"])
@pytest.mark.parametrize("ours, theirs, kwargs", CASES, ids=[f"{c[0]}-{i}"
                                                             for i, c in enumerate(CASES)])
def test_bit_exact_against_optimi_kahan_sum(ours, theirs, kwargs, format):
    rng = np.random.default_rng(7)
    dtype = numpy_dtype(format)
    params = [rng.standard_normal(s).astype(np.float32).astype(dtype) for s in SHAPES]
    tparams = [torch.from_numpy(p.view(np.int16).copy()).view(getattr(torch, format))
               for p in params]
    topt = getattr(optimi, theirs)(tparams, **{"kahan_sum": True, **kwargs})
    opt = getattr(precision, ours)(params, torch_cpu_lanes=torch_lanes(), **kwargs)
    for step in range(24):
        grads = [rng.standard_normal(s).astype(np.float32).astype(dtype) for s in SHAPES]
        for p, g in zip(tparams, grads):
            p.grad = torch.from_numpy(g.view(np.int16).copy()).view(p.dtype)
        topt.step()
        opt.step(grads)
        for i, (p, tp) in enumerate(zip(params, tparams)):
            assert np.array_equal(bits(p), bits(tp)), (step, i)
    for i, tp in enumerate(tparams):
        for name, value in topt.state[tp].items():
            if torch.is_tensor(value) and value.shape == tp.shape:
                assert np.array_equal(bits(opt.state[i][name]), bits(value)), (i, name)


def test_kahan_keeps_updates_a_plain_bfloat16_sgd_loses():
    """1 + 100 steps of 1e-3 in bfloat16: plain SGD never moves (1e-3 is below half the
    spacing 2**-7 at 1), the compensated one ends within a spacing of 1.1."""
    dtype = numpy_dtype("bfloat16")
    plain, compensated = np.ones(1, dtype), np.ones(1, dtype)
    sgd, kahan = precision.SGD([plain], lr=1e-3), precision.KahanSGD([compensated], lr=1e-3)
    for _ in range(100):
        sgd.step([-np.ones(1, dtype)])
        kahan.step([-np.ones(1, dtype)])
    assert float(plain[0]) == 1.0
    assert abs(float(compensated[0]) - 1.1) <= 2 ** -7
