"""Stochastic rounding (npoptim.precision, ``rounding="stochastic"``, and the quantized
optimizers' ``bf16_stochastic_round=True``) against torchao's
``_AdamW(bf16_stochastic_round=True)`` and ``AdamW8bit(bf16_stochastic_round=True)``,
statistically: the draws differ (torchao's come from torch's generator inside its compiled
step, ours from a counter-based stream), so the test compares what they are for.

bfloat16 params in [1, 2) (spacing 2**-7) get 20 AdamW steps of about lr = 1e-4, a 78th of the
spacing, with gradients of one sign: rounding to nearest never moves them, stochastic rounding
follows the float32 trajectory on average. Over 4096 elements, both implementations' errors
from the float32 trajectory have a mean indistinguishable from zero (|z| < 5) and the same
spread (ratio of standard deviations within 20%); rounding to nearest is biased by the whole
movement. torchao compiles its step with ``torch.compile`` (a C++ build on CPU): one small case
per optimizer only. torchao is installed with ``pip install --no-deps torchao``; the tests skip
without it (``NPOPTIM_REQUIRE_TORCHAO=1`` in CI makes that a failure).
"""
import numpy as np
import pytest

import npoptim.precision as precision
from torch_compare import needs_torch, torch
from torchao_compare import torchao_optim

ml_dtypes = pytest.importorskip("ml_dtypes")
N, STEPS, LR, SPACING = 4096, 20, 1e-4, 2.0 ** -7


def _problem(seed):
    bf16 = np.dtype(ml_dtypes.bfloat16)
    rng = np.random.default_rng(seed)
    p0 = rng.uniform(1.0, 1.9, N).astype(np.float32).astype(bf16)
    grads = [(1.0 + 0.1 * rng.standard_normal(N)).astype(np.float32).astype(bf16)
             for _ in range(STEPS)]
    return p0, grads


def _as_torch(a):
    return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)


def _check_unbiased(p0, target, theirs, ours, nearest, what):
    """Errors from the float32 ``target`` in bfloat16 spacings: torchao's and ours unbiased
    with the same spread; rounding to nearest never moved."""
    target = np.asarray(target, np.float64)

    def errors(x):
        return (np.asarray(x, np.float64) - target) / SPACING

    e_ao, e_ours = errors(theirs.float().numpy()), errors(ours.astype(np.float32))
    e_nearest = errors(nearest.astype(np.float32))
    for e in (e_ao, e_ours):
        assert abs(e.mean()) < 5 * e.std() / np.sqrt(N)
    assert 0.8 < e_ours.std() / e_ao.std() < 1.25
    moved = (p0.astype(np.float64) - target) / SPACING
    assert np.array_equal(e_nearest, moved) and moved.mean() > 0.1  # nearest never moved
    print(f"\n{what}, error in spacings: torchao mean {e_ao.mean():+.4f} sd {e_ao.std():.4f}; "
          f"npoptim mean {e_ours.mean():+.4f} sd {e_ours.std():.4f}; nearest mean "
          f"{e_nearest.mean():+.4f}")


@needs_torch
def test_stochastic_rounding_is_unbiased_like_torchaos():
    optim = torchao_optim()
    p0, grads = _problem(0)
    theirs = _as_torch(p0)
    ao = optim._AdamW([theirs], lr=LR, weight_decay=0, bf16_stochastic_round=True)
    reference = torch.from_numpy(p0.astype(np.float32))
    ref_opt = torch.optim.AdamW([reference], lr=LR, weight_decay=0)
    ours, nearest = p0.copy(), p0.copy()
    sr = precision.AdamW([ours], lr=LR, weight_decay=0, rounding="stochastic", seed=3)
    rn = precision.AdamW([nearest], lr=LR, weight_decay=0, rounding="fused")
    torch.manual_seed(0)
    for g in grads:
        theirs.grad = _as_torch(g)
        reference.grad = torch.from_numpy(g.astype(np.float32))
        ao.step()
        ref_opt.step()
        sr.step([g])
        rn.step([g])
    _check_unbiased(p0, reference.detach().numpy(), theirs, ours, nearest, "AdamW")


@needs_torch
def test_quantized_stochastic_rounding_is_unbiased_like_torchaos():
    """8-bit moments: with weight_decay 0 they never read the parameter, so the float32
    trajectory is npoptim's AdamW8bit on float32 params (torchao's bit for bit,
    tests/test_precision_quantized.py)."""
    optim = torchao_optim()
    p0, grads = _problem(1)
    theirs = _as_torch(p0)
    ao = optim.AdamW8bit([theirs], lr=LR, weight_decay=0, bf16_stochastic_round=True)
    reference = p0.astype(np.float32)
    ref_opt = precision.AdamW8bit([reference], lr=LR, weight_decay=0)
    ours, nearest = p0.copy(), p0.copy()
    sr = precision.AdamW8bit([ours], lr=LR, weight_decay=0, bf16_stochastic_round=True, seed=5)
    rn = precision.AdamW8bit([nearest], lr=LR, weight_decay=0)
    torch.manual_seed(0)
    for g in grads:
        theirs.grad = _as_torch(g)
        ao.step()
        ref_opt.step([g.astype(np.float32)])
        sr.step([g])
        rn.step([g])
    assert np.array_equal(sr.state[0]["exp_avg_sq.codes"],
                          ao.state[theirs]["exp_avg_sq"].codes.numpy())
    _check_unbiased(p0, reference, theirs, ours, nearest, "AdamW8bit")
