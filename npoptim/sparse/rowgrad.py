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
ids, summing the rows of repeated ids and storing every column (explicit zeros included).
"""
from typing import NamedTuple

import numpy as np
import scipy.sparse

from npoptim.kernels.jit import kernel


class RowGradient(NamedTuple):
    """A validated, canonical CSR gradient: sorted, unique, in-range column indices per row."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    shape: tuple

    @property
    def nnz(self):
        return int(self.indptr[-1])


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
def _coalesce_rows(indptr, indices, data):
    """Sort each row's columns and sum duplicate entries in their stored order."""
    nrows = indptr.size - 1
    nnz = indptr[nrows]
    out_indptr = np.zeros(nrows + 1, np.int64)
    out_indices = np.empty(nnz, np.int64)
    out_data = np.empty(nnz, data.dtype)
    n = 0
    for row in range(nrows):
        start = indptr[row]
        order = np.argsort(indices[start:indptr[row + 1]], kind="mergesort")
        previous = -1
        for offset in order:
            k = start + offset
            if indices[k] == previous:
                out_data[n - 1] += data[k]
            else:
                previous = indices[k]
                out_indices[n] = previous
                out_data[n] = data[k]
                n += 1
        out_indptr[row + 1] = n
    return out_indptr, out_indices[:n], out_data[:n]


def is_csr(grad):
    """True for a ``scipy.sparse`` CSR matrix or array."""
    return scipy.sparse.issparse(grad) and grad.format == "csr"


def as_row_gradient(grad, param_shape, dtype, where="grad"):
    """Validate a CSR gradient for a parameter and return it as a canonical :class:`RowGradient`.

    Raises ``TypeError`` or ``ValueError`` naming ``where`` and the defect. The caller's arrays
    are never modified; a copy is made only when entries must be sorted or summed.
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
    # unsigned index arrays are reinterpreted as signed so the range checks see huge values
    indptr = indptr.astype(np.int64, copy=False) if indptr.dtype.kind == "u" else indptr
    indices = indices.astype(np.int64, copy=False) if indices.dtype.kind == "u" else indices
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
        indptr, indices, data = _coalesce_rows(indptr, indices, data)
    else:
        nnz = int(indptr[-1])
        indices, data = indices[:nnz], data[:nnz]
    return RowGradient(indptr, indices, data, expected)


@kernel
def _sum_rows_by_id(row_ids, values, order):
    """CSR arrays of the rows of ``values`` summed by id; ``order`` sorts ``row_ids`` stably."""
    n, width = values.shape
    distinct = 0
    for k in range(n):
        if k == 0 or row_ids[order[k]] != row_ids[order[k - 1]]:
            distinct += 1
    rows = np.empty(distinct, np.int64)
    data = np.zeros((distinct, width), values.dtype)
    r = -1
    for k in range(n):
        i = order[k]
        if k == 0 or row_ids[i] != row_ids[order[k - 1]]:
            r += 1
            rows[r] = row_ids[i]
        for j in range(width):
            data[r, j] += values[i, j]
    return rows, data


def embedding_row_grad(row_ids, row_values, num_rows):
    """The CSR gradient of an embedding table from per-lookup gradient rows.

    ``row_ids`` (length n, repeats allowed) are the looked-up rows, ``row_values`` (shape
    ``(n, *row_shape)``) the gradient of each lookup. Rows of repeated ids are summed (in
    lookup order); every column of a touched row is stored, explicit zeros included, as an
    embedding's backward pass produces. Returns a ``scipy.sparse.csr_array`` of shape
    ``(num_rows, prod(row_shape))`` with sorted row ids.
    """
    ids = np.asarray(row_ids)
    values = np.asarray(row_values)
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise ValueError("row_ids must be a 1-D integer array")
    if values.ndim < 1 or values.shape[0] != ids.size:
        raise ValueError(f"row_values must have one row per id: {ids.size} ids, values of "
                         f"shape {values.shape}")
    if values.dtype not in (np.float32, np.float64):
        raise ValueError(f"row_values must be float32 or float64, got {values.dtype}")
    num_rows = int(num_rows)
    if ids.size and (ids.min() < 0 or ids.max() >= num_rows):
        raise ValueError(f"row ids must lie in [0, {num_rows}); got range "
                         f"[{ids.min()}, {ids.max()}]")
    width = int(np.prod(values.shape[1:], dtype=np.int64))
    values = np.ascontiguousarray(values).reshape(ids.size, width)
    ids = ids.astype(np.int64, copy=False)
    rows, data = _sum_rows_by_id(ids, values, np.argsort(ids, kind="stable"))
    counts = np.zeros(num_rows + 1, np.int64)
    counts[rows + 1] = width
    indptr = np.cumsum(counts)
    indices = np.tile(np.arange(width, dtype=np.int64), rows.size)
    grad = scipy.sparse.csr_array((data.reshape(-1), indices, indptr), shape=(num_rows, width))
    grad.has_canonical_format = True
    return grad
