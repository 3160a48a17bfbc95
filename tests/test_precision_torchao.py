"""Stochastic rounding (npoptim.precision, ``rounding="stochastic"``) against torchao's
``_AdamW(bf16_stochastic_round=True)``, statistically: the draws differ (torchao's come from
torch's generator, ours from a counter-based stream), so the test compares what they are for.

bfloat16 params in [1, 2) (spacing 2**-7) get 20 AdamW steps of about lr = 1e-4, a 78th of the
spacing, with gradients of one sign: rounding to nearest never moves them, stochastic rounding
follows the float32 trajectory on average. Over 4096 elements, both implementations' errors
from torch's float32 AdamW have a mean indistinguishable from zero (|z| < 5) and the same
spread (ratio of standard deviations within 20%); rounding to nearest is biased by the whole
movement. torchao compiles its step with ``torch.compile`` (a C++ build on CPU): one small case
only. torchao is installed with ``pip install --no-deps torchao``; the test skips without it
(``NPOPTIM_REQUIRE_TORCHAO=1`` in CI makes that a failure).
"""
import importlib
import os

import numpy as np
import pytest

import npoptim.precision as precision
from torch_compare import needs_torch, torch

ml_dtypes = pytest.importorskip("ml_dtypes")


@needs_torch
def test_stochastic_rounding_is_unbiased_like_torchaos():
    if os.environ.get("NPOPTIM_REQUIRE_TORCHAO") == "1":  # CI: a broken install fails
        torchao_optim = importlib.import_module("torchao.optim")
    else:
        torchao_optim = pytest.importorskip("torchao.optim")
    bf16 = np.dtype(ml_dtypes.bfloat16)
    n, steps, lr = 4096, 20, 1e-4
    rng = np.random.default_rng(0)
    p0 = rng.uniform(1.0, 1.9, n).astype(np.float32).astype(bf16)
    grads = [(1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32).astype(bf16)
             for _ in range(steps)]

    def as_torch(a):
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)

    theirs = as_torch(p0)
    ao = torchao_optim._AdamW([theirs], lr=lr, weight_decay=0, bf16_stochastic_round=True)
    reference = torch.from_numpy(p0.astype(np.float32))
    ref_opt = torch.optim.AdamW([reference], lr=lr, weight_decay=0)
    ours, nearest = p0.copy(), p0.copy()
    sr = precision.AdamW([ours], lr=lr, weight_decay=0, rounding="stochastic", seed=3)
    rn = precision.AdamW([nearest], lr=lr, weight_decay=0, rounding="fused")
    torch.manual_seed(0)
    for g in grads:
        theirs.grad = as_torch(g)
        reference.grad = torch.from_numpy(g.astype(np.float32))
        ao.step()
        ref_opt.step()
        sr.step([g])
        rn.step([g])
    spacing = 2.0 ** -7
    target = reference.detach().numpy().astype(np.float64)

    def errors(x):
        return (np.asarray(x, np.float64) - target) / spacing

    e_ao, e_ours = errors(theirs.float().numpy()), errors(ours.astype(np.float32))
    e_nearest = errors(nearest.astype(np.float32))
    for e in (e_ao, e_ours):
        assert abs(e.mean()) < 5 * e.std() / np.sqrt(n)
    assert 0.8 < e_ours.std() / e_ao.std() < 1.25
    moved = (p0.astype(np.float64) - target) / spacing
    assert np.array_equal(e_nearest, moved) and moved.mean() > 0.1  # nearest never moved
    print(f"\nerror in spacings: torchao mean {e_ao.mean():+.4f} sd {e_ao.std():.4f}; "
          f"npoptim mean {e_ours.mean():+.4f} sd {e_ours.std():.4f}; nearest mean "
          f"{e_nearest.mean():+.4f}")
