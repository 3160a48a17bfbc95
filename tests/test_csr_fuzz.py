"""Malformed CSR gradients: every bad one raises before any kernel runs, and nothing changes.

Random corruptions of ``indptr``, ``indices`` and ``data`` (out-of-range, huge and negative
values, decreasing or past-the-end pointers, wrong sizes, dtypes, byte orders and dimensions,
wrong shapes, other sparse formats) are fed to every optimizer that takes CSR gradients. An
independent pure-Python oracle says whether each gradient is valid under the rules of
:mod:`npoptim.sparse.rowgrad`. The optimizer's ``_apply`` (the only code that writes) is
guarded: for a gradient the oracle calls invalid it must never be reached (it does not run
the kernels then, so a bad index can never touch memory); the step must raise
``ValueError``/``TypeError``, and the parameters, the state and the gradient's own arrays stay
bit-identical. A valid mutant must be accepted and applied.
"""
import numpy as np
import pytest
import scipy.sparse

from npoptim import embedding_row_grad, registry
from npoptim.sparse.rowgrad import as_row_gradient

SPARSE_OPTIMIZERS = [
    ("SparseAdam", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01)),
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
]
# any other optimizer that takes CSR gradients, with its defaults
SPARSE_OPTIMIZERS += [(name, {}) for name in registry.OPTIMIZERS
                      if name not in {n for n, _ in SPARSE_OPTIMIZERS}
                      and registry.get(name).sparse_kind != "dense-only"]

PARAM_SHAPES = [(6, 4), (7,), (5, 2, 3), (1, 1), (3, 0), (0, 3)]
INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
              np.uint64, ">i4", ">i8", "<i4"]
# Index dtypes that reach the optimizers' kernels as they are (valid int8/int16 index arrays
# would each compile another kernel signature, seconds apiece); the others are covered by
# test_validation_agrees_with_the_oracle, which runs no optimizer kernel.
STEP_INT_DTYPES = [np.int32, np.int64, np.uint8, np.uint32, np.uint64, ">i4", ">i8"]
HUGE = [2 ** 31 - 1, 2 ** 31, -2 ** 31, 2 ** 32 + 1, 2 ** 62, 2 ** 63 - 1, -2 ** 63, -1, -2]


# ------------------------------------------------------------------------------- the oracle
def _as_signed_ints(arr):
    """The values the rules check: unsigned 64-bit values past int64 wrap to negative."""
    values = [int(v) for v in arr.tolist()]
    if arr.dtype.kind == "u" and arr.dtype.itemsize == 8:
        values = [v - 2 ** 64 if v >= 2 ** 63 else v for v in values]
    return values


def oracle_valid(grad, param_shape, dtype):
    """Whether ``grad`` is a valid CSR gradient for the parameter, by the documented rules."""
    if not (scipy.sparse.issparse(grad) and grad.format == "csr") or len(param_shape) == 0:
        return False
    rows, cols = param_shape[0], int(np.prod(param_shape[1:], dtype=np.int64))
    if tuple(grad.shape) != (rows, cols):
        return False
    indptr, indices, data = grad.indptr, grad.indices, grad.data
    for arr in (indptr, indices):
        if not isinstance(arr, np.ndarray) or arr.ndim != 1 or arr.dtype.kind not in "iu":
            return False
    if not isinstance(data, np.ndarray) or data.ndim != 1 or data.dtype != dtype:
        return False
    if indptr.size != rows + 1:
        return False
    ptr = _as_signed_ints(indptr)
    stored = min(indices.size, data.size)
    if ptr[0] != 0 or any(b < a for a, b in zip(ptr, ptr[1:])) or ptr[-1] > stored:
        return False
    return all(0 <= c < cols for c in _as_signed_ints(indices[:ptr[-1]]))


# ------------------------------------------------------------------------------ mutations
def valid_grad(rng, shape, dtype):
    rows, cols = shape[0], int(np.prod(shape[1:], dtype=np.int64))
    dense = rng.standard_normal((rows, cols)).astype(dtype)
    dense[rng.random(rows) < 0.4] = 0
    if rows and cols and rng.random() < 0.5:
        dense[rng.random((rows, cols)) < 0.3] = 0
    grad = scipy.sparse.csr_array(dense)
    if grad.nnz and rng.random() < 0.3:  # unsorted columns within rows: still valid
        for r in range(rows):
            a, b = grad.indptr[r], grad.indptr[r + 1]
            order = rng.permutation(b - a)
            grad.indices[a:b] = grad.indices[a:b][order]
            grad.data[a:b] = grad.data[a:b][order]
    return grad


def _set(arr, rng, value):
    out = arr.astype(np.int64)
    if out.size:
        out[rng.integers(out.size)] = value
    return out


def mutate(grad, rng, shape, int_dtypes=INT_DTYPES):
    """A random corruption; returns (description, mutated gradient)."""
    g = grad.copy()
    nnz, rows, cols = g.nnz, g.shape[0], g.shape[1]
    kind = rng.integers(22)
    if kind == 0:
        value = rng.choice(HUGE + [nnz + 1, nnz, rows, -1, 1])
        g.indptr = _set(g.indptr, rng, value)
        what = f"indptr entry = {value}"
    elif kind == 1:
        value = rng.choice(HUGE + [cols, cols + 1, -1, 0, cols - 1])
        g.indices = _set(g.indices, rng, value)
        what = f"indices entry = {value}"
    elif kind == 2:
        dt = int_dtypes[rng.integers(len(int_dtypes))]
        with np.errstate(all="ignore"):
            g.indices = g.indices.astype(np.int64).astype(dt)
        what = f"indices dtype {dt}"
    elif kind == 3:
        dt = int_dtypes[rng.integers(len(int_dtypes))]
        with np.errstate(all="ignore"):
            g.indptr = g.indptr.astype(np.int64).astype(dt)
        what = f"indptr dtype {dt}"
    elif kind == 4:
        cut = rng.integers(0, max(nnz, 1))
        g.indices = g.indices[:cut]
        what = f"indices truncated to {cut}"
    elif kind == 5:
        cut = rng.integers(0, max(nnz, 1))
        g.data = g.data[:cut]
        what = f"data truncated to {cut}"
    elif kind == 6:
        cut = rng.integers(0, g.indptr.size + 2)
        g.indptr = np.resize(g.indptr, cut) if cut else g.indptr[:0]
        what = f"indptr resized to {cut}"
    elif kind == 7:
        if g.indptr.size >= 2:
            i, j = rng.choice(g.indptr.size, 2, replace=False)
            ptr = g.indptr.copy()
            ptr[i], ptr[j] = ptr[j], ptr[i]
            g.indptr = ptr
        what = "indptr entries swapped"
    elif kind == 8:
        dt = [np.float16, np.float32, np.float64, np.int32, np.complex64, bool, ">f4",
              ">f8", object][rng.integers(9)]
        g.data = g.data.astype(dt)
        what = f"data dtype {dt}"
    elif kind == 9:
        which = ["indptr", "indices", "data"][rng.integers(3)]
        arr = getattr(g, which)
        setattr(g, which, arr.reshape(1, -1) if rng.random() < 0.5 else arr.astype(float))
        what = f"{which} 2-D or float"
    elif kind == 10:
        which = ["indptr", "indices", "data"][rng.integers(3)]
        setattr(g, which, getattr(g, which).tolist())
        what = f"{which} a list"
    elif kind == 11:
        g._shape = (rows + rng.integers(-1, 2), cols + rng.integers(-1, 2))
        what = f"shape {g._shape}"
    elif kind == 12:
        fmt = ["coo", "csc", "bsr", "lil", "dok"][rng.integers(5)]
        return f"format {fmt}", grad.asformat(fmt)
    elif kind == 13:
        return "dense list", grad.toarray().tolist()
    elif kind == 14:
        ptr = g.indptr.astype(np.int64)
        if ptr.size > 2:
            k = rng.integers(1, ptr.size - 1)
            ptr[k] = ptr[k + 1] + rng.integers(1, 5)
        g.indptr = ptr
        what = "indptr step past the next"
    elif kind == 15:
        ptr = g.indptr.astype(np.int64)
        ptr[0] = rng.choice([1, -1, 2 ** 40])
        g.indptr = ptr
        what = f"indptr[0] = {ptr[0]}"
    elif kind == 16:
        ptr = g.indptr.astype(np.int64)
        ptr[-1] = ptr[-1] + rng.integers(1, 1000)
        g.indptr = ptr
        what = "indptr[-1] past nnz"
    elif kind == 17:  # extra entries past indptr[-1] are ignored: valid
        g.indices = np.concatenate([g.indices, rng.integers(-5, 2 ** 40, 3)])
        g.data = np.concatenate([g.data, g.data[:3]]).astype(g.data.dtype)
        what = "garbage past nnz"
    elif kind == 18:  # duplicates: valid, summed
        if nnz:
            k = rng.integers(nnz)
            ind = g.indices.copy()
            row_start = g.indptr[np.searchsorted(g.indptr, k, side="right") - 1]
            ind[k] = ind[row_start]
            g.indices = ind
        what = "duplicate column"
    elif kind == 19:  # non-finite values are values: valid
        if nnz:
            g.data = g.data.copy()
            g.data[rng.integers(nnz)] = [np.nan, np.inf, -np.inf][rng.integers(3)]
        what = "non-finite data"
    elif kind == 20:  # strided (non-contiguous) arrays: valid
        g.indices = np.repeat(g.indices, 2)[::2]
        g.data = np.repeat(g.data, 2)[::2]
        what = "strided arrays"
    else:
        g.indices = rng.integers(-2 ** 62, 2 ** 62, g.indices.size)
        what = "random indices"
    return what, g


# ---------------------------------------------------------------------------------- checks
def arrays_of(grad):
    out = []
    for name in ("indptr", "indices", "data"):
        arr = getattr(grad, name, None)
        if isinstance(arr, np.ndarray) and arr.dtype != object:
            out.append((name, arr, arr.copy()))
    return out


def snapshot(opt):
    return ([p.copy() for p in opt.params],
            {i: {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in s.items()}
             for i, s in opt.state.items()})


def assert_same_bits(a, b, where):
    assert a.dtype == b.dtype and a.shape == b.shape, where
    assert a.tobytes() == b.tobytes(), where


def assert_unchanged(before, opt, where):
    params, state = before
    for p, q in zip(params, opt.params):
        assert_same_bits(p, q, f"{where}: param")
    assert set(state) == set(opt.state), where
    for i, entry in state.items():
        assert set(entry) == set(opt.state[i]), where
        for k, v in entry.items():
            if isinstance(v, np.ndarray):
                assert_same_bits(v, opt.state[i][k], f"{where}: state {k}")
            else:
                assert v == opt.state[i][k], f"{where}: state {k}"


def guarded(opt):
    """Replace the optimizer's ``_apply`` by one that runs only for gradients the oracle
    accepts, and records whether it was reached."""
    real = opt._apply
    opt.reached = False

    def apply(prepared):
        opt.reached = True
        if opt.expect_valid:
            real(prepared)
    opt._apply = apply
    return opt


def make(name, kwargs, shape, dtype, rng):
    param = rng.standard_normal(shape).astype(dtype)
    other = rng.standard_normal(3).astype(dtype)
    opt = registry.get(name)([param, other], **kwargs)
    # a first valid step, so that there is state to protect
    opt.step([valid_grad(rng, shape, dtype), rng.standard_normal(3).astype(dtype)])
    return guarded(opt)


# ------------------------------------------------------------------------------------ tests
@pytest.mark.skipif(not SPARSE_OPTIMIZERS, reason="no optimizer takes CSR gradients")
@pytest.mark.parametrize("name,kwargs", SPARSE_OPTIMIZERS,
                         ids=[f"{n}-{i}" for i, (n, _) in enumerate(SPARSE_OPTIMIZERS)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_random_corruptions(name, kwargs, dtype):
    rng = np.random.default_rng([7, len(name), len(kwargs), np.dtype(dtype).itemsize])
    counts = {"invalid": 0, "valid": 0}
    for trial in range(400):
        shape = PARAM_SHAPES[trial % len(PARAM_SHAPES)]
        opt = make(name, kwargs, shape, dtype, rng)
        what, bad = mutate(valid_grad(rng, shape, dtype), rng, shape, STEP_INT_DTYPES)
        where = f"trial {trial}, {name} {kwargs}, param {shape} {np.dtype(dtype)}: {what}"
        valid = oracle_valid(bad, shape, np.dtype(dtype))
        opt.expect_valid = valid
        before = snapshot(opt)
        kept = arrays_of(bad)
        good_other = rng.standard_normal(3).astype(dtype)
        if valid:
            opt.step([bad, good_other])
            assert opt.reached, where
            counts["valid"] += 1
        else:
            with pytest.raises((ValueError, TypeError)) as info:
                opt.step([bad, good_other])
            assert "grads[0]" in str(info.value), (where, info.value)
            assert not opt.reached, f"{where}: a bad gradient reached _apply"
            assert_unchanged(before, opt, where)
            counts["invalid"] += 1
        for arr_name, arr, copy in kept:  # the caller's arrays are never written
            assert_same_bits(arr, copy, f"{where}: gradient {arr_name}")
    assert counts["invalid"] > 200 and counts["valid"] > 30, counts


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_validation_agrees_with_the_oracle(dtype):
    """as_row_gradient alone, on many more mutants: accepts exactly what the oracle accepts,
    and what it returns is canonical and in range."""
    rng = np.random.default_rng(11 + np.dtype(dtype).itemsize)
    for trial in range(3000):
        shape = PARAM_SHAPES[trial % len(PARAM_SHAPES)]
        what, bad = mutate(valid_grad(rng, shape, dtype), rng, shape)
        where = f"trial {trial}, param {shape}: {what}"
        if oracle_valid(bad, shape, np.dtype(dtype)):
            out = as_row_gradient(bad, shape, np.dtype(dtype), "g")
            rows, cols = out.shape
            assert out.indptr.size == rows + 1 and out.indptr[0] == 0, where
            assert np.all(np.diff(out.indptr) >= 0), where
            assert out.indices.size == out.data.size == out.nnz, where
            for r in range(rows):
                row = out.indices[out.indptr[r]:out.indptr[r + 1]]
                assert np.all(np.diff(row) > 0), where          # sorted, unique
                assert np.all((row >= 0) & (row < cols)), where
        else:
            with pytest.raises((ValueError, TypeError)):
                as_row_gradient(bad, shape, np.dtype(dtype), "g")


@pytest.mark.parametrize("field,value", [
    ("indices", [0, 1, 2, 2 ** 63 - 1]), ("indices", [0, 1, 2, -2 ** 63]),
    ("indices", [0, 1, 2, -1]), ("indices", [0, 1, 2, 4]),
    ("indptr", [0, 1, 2, 3, 2 ** 63 - 1]), ("indptr", [0, 1, 2, 3, -1]),
    ("indptr", [0, 1, 2 ** 62, 3, 4]), ("indptr", [-1, 1, 2, 3, 4]),
])
@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
def test_huge_and_negative_indices(field, value, dtype):
    """The extremes, signed and unsigned (unsigned values past int64 are negative)."""
    grad = scipy.sparse.csr_array(np.eye(4, dtype=np.float32))
    with np.errstate(all="ignore"):
        arr = np.array(value, dtype=object).astype(np.int64).astype(dtype) \
            if dtype == np.uint64 else np.array(value, dtype)
    setattr(grad, field, arr)
    param = np.ones((4, 4), np.float32)
    opt = guarded(registry.get(SPARSE_OPTIMIZERS[0][0])([param]))
    opt.expect_valid = False
    before = snapshot(opt)
    with pytest.raises(ValueError, match="grads\\[0\\]: CSR"):
        opt.step([grad])
    assert not opt.reached
    assert_unchanged(before, opt, f"{field}={value}")


def test_embedding_gradients_cannot_be_corrupted_unnoticed():
    """embedding_row_grad's gradients may skip re-validation when their index arrays are
    read-only: then they cannot be written; if they can be written, the step validates them.
    Either way a corruption in place, or by replacing an array, raises before any write."""
    name = SPARSE_OPTIMIZERS[0][0]
    param = np.zeros((10, 4), np.float32)
    opt = guarded(registry.get(name)([param]))
    # two widths of the shared column cache, before and after it grows
    lookups = [([3, 7, 3], 10), (list(range(10)) * 3, 10), ([3, 7, 3], 10), ([9], 10)]
    for field, value in (("indices", 99), ("indices", -1), ("indptr", 2 ** 40)):
        for ids, rows in lookups:
            grad = embedding_row_grad(ids, np.ones((len(ids), 4), np.float32), rows)
            arr = getattr(grad, field)
            try:
                arr[1] = value
            except ValueError:  # read-only, and cannot be made writeable again
                with pytest.raises(ValueError):
                    arr.flags.writeable = True
                continue
            opt.expect_valid = False
            before = snapshot(opt)
            with pytest.raises(ValueError, match="grads\\[0\\]: CSR"):
                opt.step([grad])
            assert not opt.reached, (field, ids)
            assert_unchanged(before, opt, f"{field} {ids}")
    for field, bad in (("indices", np.array([0, 1, 2, 99, 0, 1, 2, 3])),
                       ("indptr", np.array([0, 0, 0, 0, 4, 4, 4, 4, 9, 9, 9]))):
        corrupted = embedding_row_grad([3, 7, 3], np.ones((3, 4), np.float32), 10)
        setattr(corrupted, field, bad)
        opt.expect_valid = False
        before = snapshot(opt)
        with pytest.raises(ValueError, match="grads\\[0\\]: CSR"):
            opt.step([corrupted])
        assert not opt.reached
        assert_unchanged(before, opt, field)
    opt.expect_valid = True
    opt.step([embedding_row_grad([3, 7, 3], np.ones((3, 4), np.float32), 10)])
    assert opt.reached and np.count_nonzero(param.any(axis=1)) == 2


def test_a_bad_gradient_after_good_ones_changes_no_parameter():
    """Atomic across parameters: the bad gradient is the last one; earlier ones are valid."""
    name, kwargs = SPARSE_OPTIMIZERS[0]
    rng = np.random.default_rng(5)
    params = [rng.standard_normal((6, 3)).astype(np.float32) for _ in range(3)]
    opt = registry.get(name)(params, **kwargs)
    grads = [scipy.sparse.csr_array(rng.standard_normal((6, 3)).astype(np.float32))
             for _ in range(3)]
    opt.step(grads)
    before = snapshot(opt)
    bad = grads[2].copy()
    bad.indices = bad.indices.astype(np.int64)
    bad.indices[-1] = 3
    with pytest.raises(ValueError, match="grads\\[2\\]"):
        opt.step([grads[0], grads[1], bad])
    assert_unchanged(before, opt, "three params")
