"""SparseAdam against torch.optim.SparseAdam 2.13 with CSR gradients, and where its eps sits.

The standard problem of :mod:`torch_compare` with about 40% of the rows of each gradient zero,
as CSR gradients; float64 to 1e-12 of the parameters' scale, float32 to 2 float32 ulps (torch
has no foreach SparseAdam). The state agrees too, SparseAdam's int step counter included.
"""
import numpy as np
import pytest

import npoptim
from torch_compare import csr_matches_torch_test

SPARSE_CASES = [
    ("SparseAdam", dict(lr=0.05), dict(lr=0.1)),
    ("SparseAdam", dict(lr=0.05, maximize=True), dict(betas=(0.5, 0.7), eps=1e-3)),
]
test_csr_gradients_match_torch_sparse = csr_matches_torch_test(SPARSE_CASES)


def test_sparse_adam_eps_placement_differs_from_adam():
    """The note's example: constant g=1e-6 for 3 steps, lr=1: SparseAdam -2.42, Adam -2.97."""
    moved = {}
    for name in ("SparseAdam", "Adam"):
        p = np.zeros(1)
        opt = getattr(npoptim, name)([p], lr=1.0)
        for _ in range(3):
            opt.step([np.full(1, 1e-6)])
        moved[name] = p[0]
    assert moved["SparseAdam"] == pytest.approx(-2.42, abs=5e-3)
    assert moved["Adam"] == pytest.approx(-2.97, abs=5e-3)
