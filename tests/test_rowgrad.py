"""The sparse-gradient semantics, stated in npoptim.sparse.rowgrad, each checked."""
import numpy as np
import pytest
import scipy.sparse

import npoptim
from npoptim.sparse.rowgrad import as_row_gradient


def csr(data, rows, cols, shape, dtype=np.float64):
    """A CSR built directly from arrays, keeping duplicates and explicit zeros as given."""
    order = np.argsort(rows, kind="stable")
    indptr = np.searchsorted(np.asarray(rows)[order], np.arange(shape[0] + 1))
    return scipy.sparse.csr_array(
        (np.asarray(data, dtype)[order], np.asarray(cols)[order], indptr), shape=shape)


def test_duplicates_are_summed_and_columns_sorted():
    g = csr([1.0, 2.0, 5.0, 0.5], [1, 1, 1, 3], [2, 0, 2, 1], (4, 3))
    assert g.nnz == 4  # scipy kept the duplicate
    rg = as_row_gradient(g, (4, 3), np.dtype(np.float64))
    np.testing.assert_array_equal(rg.indptr, [0, 0, 2, 2, 3])
    np.testing.assert_array_equal(rg.indices, [0, 2, 1])
    np.testing.assert_array_equal(rg.data, [2.0, 6.0, 0.5])


def test_duplicate_entries_update_like_their_sum():
    a, b = np.ones((4, 3)), np.ones((4, 3))
    opt_a, opt_b = npoptim.SparseAdam([a], lr=0.1), npoptim.SparseAdam([b], lr=0.1)
    opt_a.step([csr([1.0, 2.0, 5.0], [1, 1, 1], [2, 0, 2], (4, 3))])
    opt_b.step([csr([2.0, 6.0], [1, 1], [0, 2], (4, 3))])
    np.testing.assert_array_equal(a, b)


def test_explicit_zero_entries_are_updated_by_sparse_adam():
    p = np.ones((3, 2))
    opt = npoptim.SparseAdam([p], lr=0.1)
    opt.step([csr([1.0, 1.0], [0, 0], [0, 1], (3, 2))])
    moved = p.copy()
    # row 0 again, with explicitly stored zeros: its moments decay and it moves again
    opt.step([csr([0.0, 0.0], [0, 0], [0, 1], (3, 2))])
    assert np.all(p[0] < moved[0])
    np.testing.assert_allclose(opt.state[0]["exp_avg"][0], 0.1 - 0.1 * 0.1, rtol=1e-15)
    # a row that is not stored is untouched, bit for bit
    np.testing.assert_array_equal(p[1:], 1.0)
    np.testing.assert_array_equal(opt.state[0]["exp_avg_sq"][1:], 0.0)


def test_empty_gradient_advances_step_and_changes_nothing():
    p = np.ones((3, 2))
    opt = npoptim.SparseAdam([p], lr=0.1)
    opt.step([csr([1.0], [2], [1], (3, 2))])
    before = p.copy()
    opt.step([scipy.sparse.csr_array((3, 2))])
    assert opt.state[0]["step"] == 2
    np.testing.assert_array_equal(p, before)


def test_masked_dense_mode_equals_csr_of_the_nonzeros():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 4))
    b = a.copy()
    opt_a, opt_b = npoptim.SparseAdam([a]), npoptim.SparseAdam([b])
    for _ in range(5):
        g = rng.standard_normal((5, 4)) * (rng.random((5, 4)) < 0.3)
        opt_a.step([g])
        opt_b.step([scipy.sparse.csr_array(g)])
    np.testing.assert_array_equal(a, b)


def test_adagrad_is_exact_csr_equals_dense_with_zeros():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((6, 3)).astype(np.float32)
    b = a.copy()
    opt_a = npoptim.Adagrad([a], lr=0.1, lr_decay=0.01)
    opt_b = npoptim.Adagrad([b], lr=0.1, lr_decay=0.01)
    for _ in range(6):
        g = (rng.standard_normal((6, 3)) * (rng.random((6, 1)) < 0.5)).astype(np.float32)
        opt_a.step([scipy.sparse.csr_array(g)])
        opt_b.step([g])
    np.testing.assert_array_equal(a, b)


def test_rank3_param_takes_rows_by_first_axis_and_1d_as_column():
    p3 = np.zeros((4, 2, 3))
    p1 = np.zeros(5)
    opt = npoptim.SparseAdam([p3, p1], lr=0.1)
    opt.step([csr([1.0], [2], [5], (4, 6)), csr([1.0], [3], [0], (5, 1))])
    assert p3[2, 1, 2] < 0 and np.count_nonzero(p3) == 1
    assert p1[3] < 0 and np.count_nonzero(p1) == 1
    with pytest.raises(ValueError, match="expected \\(4, 6\\)"):
        opt.step([scipy.sparse.csr_array(np.ones((4, 3))), None])


def test_embedding_row_grad_sums_repeats_and_stores_every_column():
    ids = np.array([7, 2, 7, 7, 0])
    rows = np.arange(15, dtype=np.float32).reshape(5, 3)
    rows[1] = 0.0  # an all-zero lookup row is still stored
    g = npoptim.embedding_row_grad(ids, rows, 10)
    assert g.shape == (10, 3) and g.dtype == np.float32
    dense = np.zeros((10, 3), np.float32)
    np.add.at(dense, ids, rows)
    np.testing.assert_array_equal(g.toarray(), dense)
    np.testing.assert_array_equal(np.diff(g.indptr)[[0, 2, 7]], [3, 3, 3])
    assert g.nnz == 9  # row 2's explicit zeros are kept
    rg = as_row_gradient(g, (10, 3), np.dtype(np.float32))
    np.testing.assert_array_equal(rg.data, g.data)


@pytest.mark.parametrize("ids,values,match", [
    ([0, 10], np.ones((2, 3)), "row ids must lie"),
    ([-1], np.ones((1, 3)), "row ids must lie"),
    ([0.5], np.ones((1, 3)), "integer"),
    ([0, 1], np.ones((3, 3)), "one row per id"),
    ([0], np.ones((1, 3), np.int64), "float32 or float64"),
])
def test_embedding_row_grad_validates(ids, values, match):
    with pytest.raises(ValueError, match=match):
        npoptim.embedding_row_grad(np.asarray(ids), values, 10)


def test_untouched_rows_are_bit_identical_after_many_steps():
    rng = np.random.default_rng(2)
    p = rng.standard_normal((50, 4)).astype(np.float32)
    start = p.copy()
    opt = npoptim.SparseAdam([p], lr=0.05)
    for _ in range(20):
        ids = rng.integers(0, 25, size=8)  # rows 25..49 are never looked up
        opt.step([npoptim.embedding_row_grad(ids, rng.standard_normal((8, 4)).astype(
            np.float32), 50)])
    np.testing.assert_array_equal(p[25:], start[25:])
    assert not np.array_equal(p[:25], start[:25])


def test_built_gradients_stay_trusted_after_a_larger_one():
    """The column indices of built gradients come from one shared cache; a small gradient
    built after a much larger one must still get read-only (trusted) index arrays: scipy
    copies an index array that views a much larger one, and a copy is writeable, so every
    later step would re-validate the gradient in O(rows) (a regression seen in the benchmark)."""
    from npoptim.sparse.rowgrad import _trusted_rows

    for rows in (100, 5_000, 3, 100):
        grad = npoptim.embedding_row_grad(np.arange(rows), np.ones((rows, 16), np.float32),
                                          10_000)
        assert not grad.indices.flags.writeable and not grad.indptr.flags.writeable, rows
        assert _trusted_rows(grad.indptr, grad.indices, 16) is not None, rows


def test_built_gradients_of_empty_rows_and_no_lookups():
    """Rows of width 0, and a batch without lookups: empty gradients a step accepts."""
    from npoptim.sparse.rowgrad import _trusted_rows

    for ids, width in (([1, 2, 1], 0), ([], 4), ([], 0)):
        grad = npoptim.embedding_row_grad(np.asarray(ids, np.int64),
                                          np.ones((len(ids), width), np.float32), 5)
        assert grad.shape == (5, width) and grad.nnz == 0
        rows, row_ptr = _trusted_rows(grad.indptr, grad.indices, width)
        assert rows.size == 0 and row_ptr.tolist() == [0]
        table = np.ones((5, width), np.float32)
        npoptim.SparseAdam([table]).step([grad])
        assert (table == 1).all()


def test_the_touched_rows_a_step_walks_cannot_be_changed():
    """A step walks a gradient's recorded touched rows without checking them again: the
    record of a built gradient must be as read-only as its index arrays (writing a row id
    into it once made the next step write outside the table)."""
    table = np.zeros((10, 4), np.float32)
    grad = npoptim.embedding_row_grad([1, 3], np.ones((2, 4), np.float32), 10)
    for _ in range(2):  # the recorded list, and its second hand-out
        prepared = as_row_gradient(grad, table.shape, table.dtype)
        for arr in (prepared.rows, prepared.row_ptr):
            with pytest.raises(ValueError):
                arr[0] = 7
            with pytest.raises(ValueError):
                arr.flags.writeable = True
    npoptim.SGD([table], lr=1.0).step([grad])
    assert np.flatnonzero(table.any(axis=1)).tolist() == [1, 3]
