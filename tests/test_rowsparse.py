"""The row-sparse gradient form (npoptim.sparse.rowsparse): bit-identical to the equivalent CSR
for every sparse-capable optimizer, and malformed input refused before anything changes."""
import numpy as np
import pytest
import scipy.sparse
from hypothesis import given, settings
from hypothesis import strategies as st

import npoptim
from npoptim import RowSparseGrad, embedding_row_grad, row_sparse_grad

OPTIMIZERS = [
    ("SparseAdam", dict(lr=0.05)),
    ("SparseAdam", dict(lr=0.05, betas=(0.5, 0.9), maximize=True)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1)),
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
]


def bits(a):
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


def _lookups(draw, num_rows, row_shape, dtype, explicit_zeros):
    n = draw(st.integers(0, 12))
    ids = np.array(draw(st.lists(st.integers(0, num_rows - 1), min_size=n, max_size=n)),
                   np.int64)
    seed = draw(st.integers(0, 2**31))
    values = np.random.default_rng(seed).standard_normal((n, *row_shape)).astype(dtype)
    if explicit_zeros and n:
        values[::2] = 0.0
    return ids, values


@st.composite
def runs(draw):
    num_rows = draw(st.integers(1, 9))
    row_shape = draw(st.sampled_from([(), (1,), (3,), (2, 2)]))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    zeros = draw(st.booleans())
    batches = [_lookups(draw, num_rows, row_shape, dtype, zeros)
               for _ in range(draw(st.integers(1, 4)))]
    return num_rows, row_shape, dtype, batches


def _csr_forms(ids, values, num_rows):
    """The CSR gradients equal to row_sparse_grad(ids, values, num_rows): the builder's, and
    one built with scipy (duplicates kept, so the step sums them)."""
    built = embedding_row_grad(ids, values, num_rows)
    width = int(np.prod(values.shape[1:], dtype=np.int64))
    flat = values.reshape(ids.size, width)
    order = np.argsort(ids, kind="stable")
    indptr = np.zeros(num_rows + 1, np.int64)
    np.add.at(indptr, ids + 1, width)
    indptr = np.cumsum(indptr)
    rows_data = flat[order].reshape(-1)
    indices = np.tile(np.arange(width), ids.size)
    scipy_built = scipy.sparse.csr_array((rows_data, indices, indptr), shape=(num_rows, width))
    return built, scipy_built


@settings(max_examples=60, deadline=None)
@given(run=runs(), which=st.integers(0, len(OPTIMIZERS) - 1))
def test_row_sparse_steps_are_bit_identical_to_csr(run, which):
    num_rows, row_shape, dtype, batches = run
    name, kwargs = OPTIMIZERS[which]
    start = np.random.default_rng(1).standard_normal((num_rows, *row_shape)).astype(dtype)
    params = [start.copy() for _ in range(4)]
    opts = [getattr(npoptim, name)([p], **kwargs) for p in params]
    for ids, values in batches:
        rs = row_sparse_grad(ids, values, num_rows)
        built, scipy_built = _csr_forms(ids, values, num_rows)
        # the scipy-built CSR keeps duplicates: the step sums them in stored (lookup) order
        grads = [rs, built, RowSparseGrad.from_csr(built, row_shape), scipy_built]
        for opt, grad in zip(opts, grads):
            opt.step([grad])
    for p in params[1:]:
        np.testing.assert_array_equal(bits(params[0]), bits(p))
    for opt in opts[1:]:
        assert opts[0].state.keys() == opt.state.keys()
        for index, entry in opts[0].state.items():
            for name, value in entry.items():
                np.testing.assert_array_equal(value, opt.state[index][name])


def test_builder_sums_repeats_in_lookup_order_and_keeps_zero_rows():
    ids = np.array([5, 1, 5, 1, 3])
    values = np.array([[1.0], [2.0], [3.0], [0.0], [0.0]], np.float32)
    g = row_sparse_grad(ids, values, 8)
    np.testing.assert_array_equal(g.rows, [1, 3, 5])
    np.testing.assert_array_equal(g.values, [[2.0], [0.0], [4.0]])
    assert g.shape == (8, 1) and g.nnz == 3
    csr = g.tocsr()
    np.testing.assert_array_equal(csr.toarray(), embedding_row_grad(ids, values, 8).toarray())
    assert csr.nnz == 3  # the explicit zero row is stored


def test_builder_cost_does_not_allocate_per_table_row():
    # a table of 10**12 rows: anything O(rows) would fail to allocate
    g = row_sparse_grad([10**12 - 1, 7, 7], np.ones((3, 2), np.float32), 10**12)
    np.testing.assert_array_equal(g.rows, [7, 10**12 - 1])


@pytest.mark.parametrize("num_rows, lookups", [
    (1_000_003, 5_000),   # id and position packed into one int64 (20 + 13 bits)
    (2**61, 64),          # 61 + 6 bits do not fit in 63: ids and positions sorted apart
])
def test_builder_sorts_like_a_stable_sort_whichever_way_it_packs(num_rows, lookups):
    rng = np.random.default_rng(7)
    hot = rng.integers(0, num_rows, lookups // 4, dtype=np.int64)
    ids = hot[rng.integers(0, hot.size, lookups)]  # repeats in every row
    values = rng.standard_normal((lookups, 3)).astype(np.float32)
    g = row_sparse_grad(ids, values, num_rows)
    order = np.argsort(ids, kind="stable")
    rows, first = np.unique(ids[order], return_index=True)
    expected = np.zeros((rows.size, 3), np.float32)
    for slot, lookup in zip(np.repeat(np.arange(rows.size), np.diff(np.append(first,
                                                                               lookups))),
                            order):
        expected[slot] += values[lookup]  # onto zeros, in lookup order
    np.testing.assert_array_equal(g.rows, rows)
    np.testing.assert_array_equal(g.values, expected)


def test_empty_batch_advances_the_step_and_changes_nothing():
    p = np.ones((4, 2))
    opt = npoptim.SparseAdam([p], lr=0.1)
    opt.step([row_sparse_grad([], np.zeros((0, 2)), 4)])
    assert opt.state[0]["step"] == 1
    np.testing.assert_array_equal(p, 1.0)


def test_from_csr_refuses_partial_rows():
    partial = scipy.sparse.csr_array((np.ones(1), np.array([0]), np.array([0, 1, 1])),
                                     shape=(2, 2))
    with pytest.raises(ValueError, match="lacks some columns"):
        RowSparseGrad.from_csr(partial)


@pytest.mark.parametrize("rows, values, num_rows, match", [
    ([2, 1], np.ones((2, 3)), 4, "strictly increasing"),
    ([1, 1], np.ones((2, 3)), 4, "strictly increasing"),
    ([0, 4], np.ones((2, 3)), 4, "out of range"),
    ([-1, 2], np.ones((2, 3)), 4, "out of range"),
    (np.array([1, 2], np.uint64), np.ones((2, 3)), 4, None),
    (np.array([2**63, 3], np.uint64), np.ones((2, 3)), 4, "out of range"),
    ([0, 1], np.ones((2, 2)), 4, "shape"),
    ([0, 1], np.ones((3, 3)), 4, "shape"),
    ([0, 1], np.ones((2, 3), np.float32), 4, "dtype"),
    ([0, 1], np.ones((2, 3)), 5, "rows"),
    ([0.0, 1.0], np.ones((2, 3)), 4, "integer"),
    ([[0, 1]], np.ones((2, 3)), 4, "1-D"),
])
@pytest.mark.parametrize("name", ["SparseAdam", "Adagrad", "SGD"])
def test_malformed_row_sparse_input_raises_before_any_change(name, rows, values, num_rows,
                                                             match):
    a, b = np.ones((4, 3)), np.full((4, 3), 2.0)
    opt = getattr(npoptim, name)([a, b], lr=0.1, **({"momentum": 0.9} if name == "SGD" else {}))
    good = row_sparse_grad([0], np.ones((1, 3)), 4)
    opt.step([good, good])
    before = (a.copy(), b.copy(), {k: np.copy(v) for k, v in opt.state[0].items()})
    bad = RowSparseGrad(rows, values, num_rows)
    if match is None:  # well-formed
        opt.step([good, bad])
        return
    with pytest.raises(ValueError, match=match):
        opt.step([good, bad])  # the first gradient is good: still nothing may change
    np.testing.assert_array_equal(a, before[0])
    np.testing.assert_array_equal(b, before[1])
    for k, v in before[2].items():
        np.testing.assert_array_equal(opt.state[0][k], v)


def test_dense_only_optimizers_refuse_row_sparse():
    p = np.ones((4, 3))
    with pytest.raises(TypeError, match="does not accept sparse"):
        npoptim.Adam([p]).step([row_sparse_grad([1], np.ones((1, 3)), 4)])


def test_nonfinite_policy_names_the_row_of_a_row_sparse_gradient():
    p = np.ones((6, 2))
    opt = npoptim.SparseAdam([p], lr=0.1)
    opt.nonfinite = "raise"
    values = np.ones((2, 2))
    values[1, 1] = np.nan
    with pytest.raises(FloatingPointError, match="row 4, column 1"):
        opt.step([RowSparseGrad([2, 4], values, 6)])
    np.testing.assert_array_equal(p, 1.0)


def test_values_that_view_the_parameter_are_read_before_any_write():
    p = np.arange(8.0).reshape(4, 2)
    q = p.copy()
    npoptim.SGD([p], lr=1.0).step([RowSparseGrad([0, 1], p[2:], 4)])
    npoptim.SGD([q], lr=1.0).step([RowSparseGrad([0, 1], q[2:].copy(), 4)])
    np.testing.assert_array_equal(p, q)
