"""CSR row gradients: the sparse-gradient semantics of npoptim, stated once.

A sparse gradient is a ``scipy.sparse`` CSR matrix or array whose rows are the first axis of
the parameter; a parameter of shape ``(n, *rest)`` is viewed as ``(n, prod(rest))`` (a 1-D
parameter as ``(n, 1)``). It is read the way torch reads a sparse COO gradient:

* the stored entries *are* the gradient: an explicitly stored zero counts (SparseAdam decays the
  moments of that entry and moves it), an entry that is not stored is absent;
* duplicate ``(row, column)`` entries are summed first, as torch's ``coalesce()`` does, in the
  order they are stored;
* the CSR arrays are checked before any kernel reads them: ``indptr`` starts at 0, never
  decreases and stays within ``indices`` and ``data``; every column index is in range. A bad
  gradient raises :class:`ValueError` and changes nothing.

:func:`embedding_row_grad` builds the gradient an embedding lookup produces from repeated row
ids, summing the rows of repeated ids and storing every column (explicit zeros included), in
O(lookups + rows) without a sort. Its index arrays are read-only and recorded, so that a step
can skip re-validating them and find the touched rows in O(touched) (see
:func:`as_row_gradient`).
"""
import sys
import weakref
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import prefetch, prefetch_span
from npoptim.kernels.jit import driver, kernel
from npoptim.sparse.csrscan import scan_canonical


class RowGradient(NamedTuple):
    """A validated, canonical CSR gradient: sorted, unique, in-range column indices per row.

    Besides the CSR arrays it lists its touched rows, which is how the kernels walk it in
    O(touched rows) whatever the number of rows: ``rows`` are the rows with stored entries,
    increasing, and the entries of ``rows[j]`` are ``row_ptr[j]:row_ptr[j + 1]`` of
    ``indices`` and ``data`` (``row_ptr[0] == 0``).

    Parameters
    ----------
    indptr : numpy.ndarray
        the CSR row pointers (None for a row-sparse gradient, which has no O(rows)
        array).
    indices : numpy.ndarray
        the column index of each stored entry, sorted and unique within a row.
    data : numpy.ndarray
        the stored values.
    shape : tuple
        ``(rows, columns)`` of the parameter the gradient is for.
    rows : numpy.ndarray
        the rows with stored entries, increasing.
    row_ptr : numpy.ndarray
        where each of ``rows`` starts in ``indices`` and ``data``, and one past the end.
    """

    indptr: np.ndarray  # None for a row-sparse gradient (npoptim.sparse.rowsparse)
    indices: np.ndarray
    data: np.ndarray
    shape: tuple
    rows: np.ndarray
    row_ptr: np.ndarray

    @property
    def nnz(self):
        return int(self.row_ptr[-1])


def row_shape(param_shape):
    """The 2-D ``(rows, columns)`` shape under which a parameter takes a CSR gradient."""
    if len(param_shape) == 0:
        raise ValueError("a 0-d parameter has no rows and cannot take a CSR gradient")
    return (int(param_shape[0]), int(np.prod(param_shape[1:], dtype=np.int64)))


# Codes returned by _csr_check: >= 0 is valid, < 0 names the defect.
_CANONICAL, _UNSORTED = 0, 1
_BAD_START, _DECREASING, _PAST_END, _BAD_COLUMN = -1, -2, -3, -4


@kernel
def _csr_check(indptr, indices, ncols, stored):
    """Validate CSR index arrays without reading outside them; return ``(code, where)``.

    ``stored`` is the number of entries that ``indices`` and ``data`` both hold.
    """
    if indptr[0] != 0:
        return _BAD_START, 0
    code = _CANONICAL
    for row in range(indptr.size - 1):
        start = indptr[row]
        stop = indptr[row + 1]
        if stop < start:
            return _DECREASING, row
        if stop > stored:
            return _PAST_END, row
        previous = -1
        for k in range(start, stop):
            column = indices[k]
            if column < 0 or column >= ncols:
                return _BAD_COLUMN, k
            if column <= previous:
                code = _UNSORTED
            previous = column
    return code, 0


@kernel
def coalesce_order(indptr, indices):
    """The canonical ``(indptr, indices)`` of a valid CSR gradient and where its entries go:
    stored entry ``order[t]`` is summed into canonical entry ``slot[t]`` (row by row, columns
    sorted stably: a slot's entries in their stored order; ``slot`` never decreases)."""
    nrows = indptr.size - 1
    nnz = indptr[nrows]
    out_indptr = np.zeros(nrows + 1, np.int64)
    out_indices = np.empty(nnz, np.int64)
    order = np.empty(nnz, np.int64)
    slot = np.empty(nnz, np.int64)
    n = 0
    t = 0
    for row in range(nrows):
        start = indptr[row]
        previous = -1
        for offset in np.argsort(indices[start:indptr[row + 1]], kind="mergesort"):
            k = start + offset
            if indices[k] != previous:
                previous = indices[k]
                out_indices[n] = previous
                n += 1
            order[t] = k
            slot[t] = n - 1
            t += 1
        out_indptr[row + 1] = n
    return out_indptr, out_indices[:n], order, slot


@driver
def sum_by_slot(add, data, order, slot, out, code):
    """``out[slot[t]]``: the first of its entries ``data[order[t]]``, then
    ``add(out[slot[t]], data[order[t]], code)`` of each other in turn (see
    :func:`coalesce_order`)."""
    for t in range(order.size):
        if t == 0 or slot[t] != slot[t - 1]:
            out[slot[t]] = data[order[t]]
        else:
            out[slot[t]] = add(out[slot[t]], data[order[t]], code)


@kernel
def _add(a, b, code):
    return a + b


@kernel
def _coalesce_rows(indptr, indices, data):
    """Sort each row's columns and sum duplicate entries in their stored order."""
    out_indptr, out_indices, order, slot = coalesce_order(indptr, indices)
    out_data = np.empty(out_indices.size, data.dtype)
    sum_by_slot(_add, data, order, slot, out_data, 0)
    return out_indptr, out_indices, out_data


@kernel
def _touched_rows(indptr):
    """``(rows, row_ptr)`` of a valid CSR ``indptr``: its non-empty rows and where their
    entries start, then the number of entries (see :class:`RowGradient`)."""
    count = 0
    for row in range(indptr.size - 1):
        if indptr[row + 1] > indptr[row]:
            count += 1
    rows = np.empty(count, np.int64)
    row_ptr = np.empty(count + 1, np.int64)
    j = 0
    for row in range(indptr.size - 1):
        if indptr[row + 1] > indptr[row]:
            rows[j] = row
            row_ptr[j] = indptr[row]
            j += 1
    row_ptr[count] = indptr[indptr.size - 1]
    return rows, row_ptr


def is_sparse(grad):
    """True for any ``scipy.sparse`` matrix or array.

    scipy.sparse is imported on first use only (it is a fifth of ``import npoptim``): an
    object can only be a scipy sparse array once scipy.sparse has been imported.
    """
    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and sparse.issparse(grad)


def is_csr(grad):
    """True for a ``scipy.sparse`` CSR matrix or array (see :func:`is_sparse`)."""
    return is_sparse(grad) and grad.format == "csr"


def as_row_gradient(grad, param_shape, dtype, where="grad", coalesce=None):
    """Validate a CSR gradient for a parameter and return it as a canonical :class:`RowGradient`.

    Raises ``TypeError`` or ``ValueError`` naming ``where`` and the defect. The caller's arrays
    are never modified; a copy is made only when entries must be sorted or summed, by
    ``coalesce(indptr, indices, data) -> (indptr, indices, data)`` of the checked arrays
    (default: sums in ``dtype``'s arithmetic; 16-bit formats pass their own).

    Parameters
    ----------
    grad : scipy.sparse.csr_array or csr_matrix
        the CSR gradient to check.
    param_shape : tuple
        the shape of the parameter (2-D) it is the gradient of.
    dtype : numpy.dtype
        the parameter's dtype, the arithmetic of the sums of duplicates.
    where : str, default: 'grad'
        how error messages name the gradient.
    coalesce : callable, optional
        ``coalesce(indptr, indices, data) -> (indptr, indices, data)``, sorting and
        summing duplicates; None sums in ``dtype``'s arithmetic.
    """
    if not is_csr(grad):
        kind = getattr(grad, "format", type(grad).__name__)
        raise TypeError(f"{where}: expected a scipy.sparse CSR gradient, got {kind!r}; "
                        "convert it with .tocsr()")
    expected = row_shape(param_shape)
    if tuple(grad.shape) != expected:
        raise ValueError(f"{where}: CSR gradient has shape {tuple(grad.shape)}, expected "
                         f"{expected} for a parameter of shape {tuple(param_shape)}")
    indptr, indices, data = grad.indptr, grad.indices, grad.data
    for name, arr in (("indptr", indptr), ("indices", indices)):
        if not isinstance(arr, np.ndarray) or arr.ndim != 1 or arr.dtype.kind not in "iu":
            raise ValueError(f"{where}: CSR {name} must be a 1-D integer array")
    if not isinstance(data, np.ndarray) or data.ndim != 1:
        raise ValueError(f"{where}: CSR data must be a 1-D array")
    if data.dtype != dtype:
        raise ValueError(f"{where}: CSR data has dtype {data.dtype}, the parameter has {dtype}")
    if indptr.size != expected[0] + 1:
        raise ValueError(f"{where}: CSR indptr has {indptr.size} entries, expected "
                         f"{expected[0] + 1}")
    touched = _trusted_rows(indptr, indices, expected[1])
    if touched is not None and indptr[-1] <= min(indices.size, data.size):
        # built by embedding_row_grad and read-only since: canonical, no need to read it
        nnz = int(indptr[-1])
        return RowGradient(indptr, indices[:nnz], data[:nnz], expected, *touched)
    # unsigned index arrays become int64 (so the range checks see huge values), and so do
    # non-native byte orders (which Numba cannot type) and 8/16-bit ones (each would compile
    # kernels of its own)
    if indptr.dtype.kind == "u" or not indptr.dtype.isnative or indptr.dtype.itemsize < 4:
        indptr = indptr.astype(np.int64)
    if indices.dtype.kind == "u" or not indices.dtype.isnative or indices.dtype.itemsize < 4:
        indices = indices.astype(np.int64)
    stored = min(indices.size, data.size)
    touched = scan_canonical(indptr, indices, expected[1], stored)
    if touched is not None:  # valid and canonical, found in one pass over indptr
        nnz = int(indptr[-1])
        return RowGradient(indptr, indices[:nnz], data[:nnz], expected,
                           *(_read_only(a) for a in touched))
    code, at = _csr_check(indptr, indices, expected[1], min(indices.size, data.size))
    if code == _BAD_START:
        raise ValueError(f"{where}: CSR indptr[0] is {indptr[0]}, must be 0")
    if code == _DECREASING:
        raise ValueError(f"{where}: CSR indptr decreases at row {at}")
    if code == _PAST_END:
        raise ValueError(f"{where}: CSR indptr[{at + 1}] = {indptr[at + 1]} points past the "
                         f"{min(indices.size, data.size)} stored entries")
    if code == _BAD_COLUMN:
        raise ValueError(f"{where}: CSR column index {indices[at]} at position {at} is out of "
                         f"range [0, {expected[1]})")
    if code == _UNSORTED:
        indptr, indices, data = (coalesce or _coalesce_rows)(indptr, indices, data)
    else:
        nnz = int(indptr[-1])
        indices, data = indices[:nnz], data[:nnz]
    rows, row_ptr = _touched_rows(indptr)
    # read-only like a built gradient's (one array type, so one compiled kernel, for both)
    return RowGradient(indptr, indices, data, expected, _read_only(rows), _read_only(row_ptr))


#: How many lookups ahead the gradient builder prefetches the row it will add to (and, twice
#: as far ahead, the ``indptr`` entry that locates that row): rows are scattered, so without it
#: each lookup waits for memory twice (2.5x slower at 10% of 1M rows touched, measured).
_PREFETCH_LOOKUPS = 16


@kernel
def _coalesce_lookups(ids, values, indptr, width):
    """Sum the rows of ``values`` by id into CSR arrays with full rows, in O(lookups + rows).

    ``values`` is flat, ``width`` values per lookup; ``indptr`` comes zeroed, with one entry
    per row of the table and one more. A counting sort: ``indptr`` first marks the touched
    rows, then becomes their offsets, and each lookup is added to its row's block in lookup
    order (so duplicates are summed in the order they were looked up, onto zeros). Returns
    ``(bad, data, rows, row_ptr)``: ``bad`` is the position of the first out-of-range id, or
    -1; ``rows`` and ``row_ptr`` list the touched rows (see :class:`RowGradient`).
    """
    num_rows = indptr.size - 1
    for k in range(ids.size):
        row = ids[k]
        if row < 0 or row >= num_rows:
            return k, np.zeros(0, values.dtype), np.zeros(0, np.int64), np.zeros(1, np.int64)
        indptr[row + 1] = 1
    rows = np.empty(min(ids.size, num_rows) + 1, np.int64)
    count = 0
    offset = 0
    for row in range(num_rows):  # the one pass over every row
        if indptr[row + 1] != 0:
            rows[count] = row
            count += 1
            offset += width
        indptr[row + 1] = offset
    data = np.zeros(offset, values.dtype)
    for k in range(ids.size):
        if k + 2 * _PREFETCH_LOOKUPS < ids.size:
            prefetch(indptr, ids[k + 2 * _PREFETCH_LOOKUPS])
        if k + _PREFETCH_LOOKUPS < ids.size:
            prefetch_span(data, indptr[ids[k + _PREFETCH_LOOKUPS]], width)
        start = indptr[ids[k]]
        # slices, not 2-D indexing: LLVM vectorizes this form (7x faster measured)
        target = data[start:start + width]
        source = values[k * width:(k + 1) * width]
        for j in range(width):
            target[j] += source[j]
    if width == 0:  # rows without columns store nothing: no row is touched
        count = 0
    return -1, data, rows[:count], np.arange(count + 1) * width


@kernel
def _fill_row_columns(indices, width):
    """``indices[:] = [0, 1, ..., width-1]`` repeated, ``indices.size`` a multiple of
    ``width``."""
    for k in range(0, indices.size, width):
        for j in range(width):
            indices[k + j] = j


# Column indices of full rows, shared read-only by every gradient embedding_row_grad builds:
# (width, dtype) -> the bytes of the longest [0..width-1, 0..width-1, ...] built so far.
_COLUMNS = {}


def _columns(nnz, width, dtype):
    if nnz == 0:
        return np.frombuffer(b"", dtype)
    key = (width, np.dtype(dtype))
    cached = _COLUMNS.get(key)
    if cached is None or len(cached) < nnz * key[1].itemsize:
        size = max(nnz, 0 if cached is None else 2 * len(cached) // key[1].itemsize)
        columns = np.empty(size, dtype)
        _fill_row_columns(columns, width)
        # shared by every later gradient of this width: immutable bytes own the memory
        cached = _COLUMNS[key] = columns.tobytes()
    # a new array over the first nnz values, not a slice of one over them all: scipy copies
    # (so makes writeable, so untrusted) index arrays that view a much larger one
    return np.frombuffer(cached, dtype, count=nnz)


def _index_dtype(num_rows, lookups, width):
    """The dtype of the built gradient's index arrays: int32 when every index and the entry
    count fit (as scipy chooses: half the bytes of the O(rows) ``indptr``), else int64."""
    most = max(num_rows, width, min(lookups, num_rows) * width)
    return np.int32 if most <= np.iinfo(np.int32).max else np.int64


def _read_only(arr):
    """A view of ``arr`` whose ``writeable`` flag cannot be set again (its base is a read-only
    memoryview). The memory's owner stays reachable through ``.base``: code that digs it out
    and writes into it is not guarded against (see :func:`embedding_row_grad`)."""
    return np.frombuffer(memoryview(arr).toreadonly(), dtype=arr.dtype)


# Index arrays of gradients built by embedding_row_grad, keyed by id(indptr): canonical by
# construction and read-only, so as_row_gradient need not read them again (an O(rows) scan).
_TRUSTED = {}


def _trust(grad, rows, row_ptr):
    indptr, indices = grad.indptr, grad.indices
    key = id(indptr)
    _TRUSTED[key] = (weakref.ref(indptr, lambda _ref, key=key: _TRUSTED.pop(key, None)),
                     weakref.ref(indices), grad.shape[1], rows, row_ptr)


def _trusted_rows(indptr, indices, ncols):
    """``(rows, row_ptr)`` recorded for index arrays built by :func:`embedding_row_grad` and
    still read-only, or None."""
    entry = _TRUSTED.get(id(indptr))
    if (entry is not None and entry[0]() is indptr and entry[1]() is indices
            and entry[2] == ncols and not indptr.flags.writeable
            and not indices.flags.writeable):
        return entry[3], entry[4]
    return None


def check_lookups(row_ids, row_values, num_rows):
    """``(ids, values, num_rows, width)`` of embedding lookups, checked: 1-D integer ids, one
    float32/float64 row of values per id, ``num_rows >= 0``; ``ValueError`` otherwise."""
    ids = np.asarray(row_ids)
    if ids.size == 0:
        ids = ids.astype(np.int64)  # np.asarray([]) is float64: a batch with no lookups
    values = np.asarray(row_values)
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise ValueError("row_ids must be a 1-D integer array")
    if values.ndim < 1 or values.shape[0] != ids.size:
        raise ValueError(f"row_values must have one row per id: {ids.size} ids, values of "
                         f"shape {values.shape}")
    if values.dtype not in (np.float32, np.float64):
        raise ValueError(f"row_values must be float32 or float64, got {values.dtype}")
    num_rows = int(num_rows)
    if num_rows < 0:
        raise ValueError(f"num_rows must be >= 0, got {num_rows}")
    return ids, values, num_rows, int(np.prod(values.shape[1:], dtype=np.int64))


def embedding_row_grad(row_ids, row_values, num_rows):
    """The CSR gradient of an embedding table from per-lookup gradient rows.

    ``row_ids`` (length n, repeats allowed) are the looked-up rows, ``row_values`` (shape
    ``(n, *row_shape)``) the gradient of each lookup. Rows of repeated ids are summed (in
    lookup order); every column of a touched row is stored, explicit zeros included, as an
    embedding's backward pass produces. Returns a ``scipy.sparse.csr_array`` of shape
    ``(num_rows, prod(row_shape))`` with sorted row ids.

    The ids are coalesced by a counting sort in O(n + num_rows), not by a comparison sort.
    The returned gradient's ``indptr`` and ``indices`` are read-only (its ``data`` is
    writeable, e.g. to scale it): an optimizer step then trusts them without reading them
    again, so it costs O(touched rows), not O(num_rows). Replacing them (``grad.indptr =
    ...``) makes the step validate the gradient in full again. scipy operations that rewrite
    the index arrays in place are refused (``eliminate_zeros()`` raises scipy's "WRITEBACKIFCOPY
    base is read-only"): apply them to ``grad.copy()``, whose arrays are writeable. The index
    arrays are int32 when every index and the entry count fit, as scipy itself chooses, else
    int64.

    Parameters
    ----------
    row_ids : array_like
        the looked-up rows, length n, repeats allowed.
    row_values : array_like
        the gradient of each lookup, shape ``(n, *row_shape)``.
    num_rows : int
        the number of rows of the table.
    """
    ids, values, num_rows, width = check_lookups(row_ids, row_values, num_rows)
    values = np.ascontiguousarray(values).reshape(-1)
    index_dtype = _index_dtype(num_rows, ids.size, width)
    indptr = np.zeros(num_rows + 1, index_dtype)
    # uint64 ids past the int64 range wrap to negative ids, which are out of range too
    bad, data, rows, row_ptr = _coalesce_lookups(ids.astype(np.int64, copy=False), values,
                                                 indptr, width)
    if bad >= 0:
        raise ValueError(f"row ids must lie in [0, {num_rows}); got range "
                         f"[{ids.min()}, {ids.max()}]")
    indices = _columns(data.size, width, index_dtype)
    import scipy.sparse

    grad = scipy.sparse.csr_array((data, indices, _read_only(indptr)),
                                  shape=(num_rows, width))
    grad.has_canonical_format = True
    if not grad.indptr.flags.writeable and not grad.indices.flags.writeable:
        # steps walk these rows unchecked: read-only, as the index arrays are
        _trust(grad, _read_only(rows), _read_only(row_ptr))
    return grad
