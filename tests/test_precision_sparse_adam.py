"""16-bit SparseAdam (npoptim.precision) against torch 2.13's CPU SparseAdam, bit for bit.

bfloat16 and float16 embedding tables stepped by torch with the sparse COO gradients of a
``nn.Embedding(sparse=True)`` (repeated ids: torch's ``coalesce()`` sums them) and by npoptim
with the equivalent CSR gradients (one copy of a looked-up row's columns per lookup, in lookup
order), 24 steps, rows touched and untouched, maximize; and a 2-D sparse COO gradient with
single entries (partial rows) and duplicates.
"""
import numpy as np
import pytest
import scipy.sparse

import npoptim.precision as precision
from npoptim.sparse.rowsparse import RowSparseGrad
from test_precision_torch import FORMATS, as_torch, bits, numpy_dtype
from torch_compare import needs_torch, torch

pytest.importorskip("ml_dtypes")

STEPS = 24
ROWS, DIM = 11, 5
#: (options, gradient scale, parameter scale)
CASES = [(dict(lr=1e-2), 1.0, 1.0),
         (dict(lr=3e-2, betas=(0.8, 0.99), eps=1e-6, maximize=True), 1.0, 1.0),
         # eps comparable to sqrt(v) and steps to the params' ulp: a float32 eps instead of
         # R(eps) changes 14 (bfloat16) and 7 (float16) params' bits (measured)
         (dict(lr=1e-2, eps=1e-3, betas=(0.5, 0.5)), 1e-3, 1e-2)]
#: significant bits of each format
PRECISION = {"bfloat16": 8, "float16": 11}


def lookups(format, scale=1.0, seed=0):
    """Per step: looked-up ids (repeats; rows 9 and 10 never) and one gradient row each,
    values of the format. Every 7th step looks up rows 2 and 5 three times each, the second
    and third lookups below half an ulp of the first, so that the sum depends on its order
    (in stored order each addition rounds back to the first value; two small ones added
    first need not)."""
    rng = np.random.default_rng(seed)
    dtype = numpy_dtype(format)
    steps = []
    for t in range(STEPS):
        step_scale = scale * (1e-4 if t % 5 == 2 else 1.0)  # float16: subnormal squares
        if t % 7 == 4:
            ids = np.array([2, 5, 2, 5, 2, 5])
            first = rng.standard_normal((2, DIM)) * step_scale
            small = first * 2.0 ** -(PRECISION[format] + 1) * rng.uniform(1.0, 1.9, (2, DIM))
            values = np.concatenate([first, small, small])
        else:
            ids = rng.integers(0, 9, size=8)
            values = rng.standard_normal((ids.size, DIM)) * step_scale
        steps.append((ids, values.astype(np.float32).astype(dtype)))
    return steps


def embedding_csr(ids, rows):
    """The CSR gradient of these lookups as torch's uncoalesced COO one: a row's lookups in
    lookup order, every column stored, duplicates left for the optimizer to sum."""
    order = np.argsort(ids, kind="stable")
    counts = np.bincount(ids, minlength=ROWS) * DIM
    indptr = np.concatenate([[0], np.cumsum(counts)])
    indices = np.tile(np.arange(DIM), ids.size)
    return scipy.sparse.csr_array((rows[order].reshape(-1), indices, indptr),
                                  shape=(ROWS, DIM))


def table(format, seed=1, scale=1.0):
    rng = np.random.default_rng(seed)
    values = rng.standard_normal((ROWS, DIM)) * scale
    return values.astype(np.float32).astype(numpy_dtype(format))


def assert_state_matches(opt, topt, tparam):
    for key, value in topt.state[tparam].items():
        mine = opt.state[0][key]
        if key == "step":
            assert mine == int(value)
        else:
            assert np.array_equal(bits(mine), bits(value)), key


@needs_torch
@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("kwargs, grad_scale, param_scale", CASES)
def test_embedding_gradients_bit_exact_against_torch(kwargs, grad_scale, param_scale, format):
    start, steps = table(format, scale=param_scale), lookups(format, grad_scale)
    emb = torch.nn.Embedding(ROWS, DIM, sparse=True, dtype=getattr(torch, format))
    with torch.no_grad():
        emb.weight.copy_(as_torch(start, format))
    topt = torch.optim.SparseAdam(emb.parameters(), **kwargs)
    param = start.copy()
    opt = precision.SparseAdam([param], **kwargs)
    for t, (ids, rows) in enumerate(steps):
        topt.zero_grad()
        upstream = as_torch(rows, format)
        (emb(torch.from_numpy(ids)) * upstream).sum().backward()
        assert emb.weight.grad.is_sparse and not emb.weight.grad.is_coalesced()
        topt.step()
        opt.step(grads=[embedding_csr(ids, rows)])
        assert np.array_equal(bits(param), bits(emb.weight)), (t, int(
            (bits(param) != bits(emb.weight)).sum()))
        assert_state_matches(opt, topt, emb.weight)
    assert np.array_equal(bits(param[9:]), bits(start[9:]))  # untouched rows


@needs_torch
@pytest.mark.parametrize("format", FORMATS)
def test_entry_gradients_with_duplicates_bit_exact_against_torch(format):
    """A 2-D sparse COO gradient of single entries (partial rows), duplicates in any order."""
    rng = np.random.default_rng(5)
    dtype = numpy_dtype(format)
    start = table(format, seed=6)
    tparam = as_torch(start, format).requires_grad_()
    topt = torch.optim.SparseAdam([tparam], lr=2e-2)
    param = start.copy()
    opt = precision.SparseAdam([param], lr=2e-2)
    for t in range(STEPS):
        nnz = 12
        r = rng.integers(0, 6, nnz)
        c = rng.integers(0, 3, nnz)
        values = rng.standard_normal(nnz).astype(np.float32).astype(dtype)
        tparam.grad = torch.sparse_coo_tensor(np.stack([r, c]), as_torch(values, format),
                                              start.shape, check_invariants=True)
        topt.step()
        order = np.argsort(r, kind="stable")  # CSR: rows grouped, stored order kept
        indptr = np.concatenate([[0], np.cumsum(np.bincount(r, minlength=ROWS))])
        opt.step(grads=[scipy.sparse.csr_array((values[order], c[order], indptr),
                                               shape=start.shape)])
        assert np.array_equal(bits(param), bits(tparam)), t
        assert_state_matches(opt, topt, tparam)


def test_duplicates_are_summed_in_the_format_in_stored_order():
    """Hand-derived: bfloat16 has 8 significant bits; 256 + 1 + 1 in stored order rounds each
    sum (256 + 1 -> 256, twice), 1 + 1 + 256 does not (2 + 256 = 258)."""
    import ml_dtypes
    dtype = np.dtype(ml_dtypes.bfloat16)
    sums = []
    for values in ([256, 1, 1], [1, 1, 256]):
        param = np.zeros((1, 1), dtype)
        opt = precision.SparseAdam([param], lr=1.0, betas=(0.0, 0.0))
        grad = scipy.sparse.csr_array((np.array(values, dtype), [0, 0, 0], [0, 3]),
                                      shape=(1, 1))
        opt.step(grads=[grad])
        sums.append(float(opt.state[0]["exp_avg"][0, 0]))  # beta1 = 0: m is the summed grad
    assert sums == [256.0, 258.0]


def test_row_sparse_gradients_give_the_same_trajectory():
    import ml_dtypes
    dtype = np.dtype(ml_dtypes.bfloat16)
    start = table("bfloat16")
    a, b = start.copy(), start.copy()
    opt_a, opt_b = precision.SparseAdam([a], lr=1e-2), precision.SparseAdam([b], lr=1e-2)
    rng = np.random.default_rng(3)
    for _ in range(5):
        rows = np.array([1, 4, 7])
        values = rng.standard_normal((3, DIM)).astype(np.float32).astype(dtype)
        opt_a.step(grads=[RowSparseGrad(rows, values, ROWS)])
        opt_b.step(grads=[embedding_csr(rows, values)])
    assert np.array_equal(bits(a), bits(b))


@pytest.mark.parametrize("format", FORMATS)
def test_bad_input_raises_before_anything_changes(format):
    dtype = numpy_dtype(format)
    other = numpy_dtype("float16" if format == "bfloat16" else "bfloat16")
    param = table(format)
    opt = precision.SparseAdam([param], lr=1e-2)
    ids = np.array([0, 3, 3])
    opt.step(grads=[embedding_csr(ids, np.ones((3, DIM), dtype))])
    before = (param.copy(), {k: np.copy(v) for k, v in opt.state[0].items()})
    out_of_range = scipy.sparse.csr_array((np.ones(2, dtype), [0, 1], [0, 2] + [2] * (ROWS - 1)),
                                          shape=(ROWS, DIM))
    out_of_range.indices = np.array([0, DIM], np.int32)  # column out of range
    decreasing = scipy.sparse.csr_array((np.ones(2, dtype), [0, 1], [0, 2] + [2] * (ROWS - 1)),
                                        shape=(ROWS, DIM))
    decreasing.indptr = np.array([0, 2, 1] + [2] * (ROWS - 2), np.int32)
    bad = [embedding_csr(ids, np.ones((3, DIM), other)),  # wrong dtype
           np.ones(param.shape, dtype),  # dense
           out_of_range, decreasing]
    for grad in bad:
        with pytest.raises((TypeError, ValueError)):
            opt.step(grads=[grad])
    opt.param_groups[0]["rounding"] = "fused"
    with pytest.raises(ValueError, match="rounding"):
        opt.step(grads=[embedding_csr(ids, np.ones((3, DIM), dtype))])
    with pytest.raises(ValueError, match="rounding"):
        precision.SparseAdam([param.copy()], rounding="stochastic")
    assert np.array_equal(bits(param), bits(before[0]))
    for key, value in before[1].items():
        assert np.array_equal(np.asarray(opt.state[0][key]), value), key
