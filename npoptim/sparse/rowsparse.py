"""Row-sparse gradients: the touched rows of a table and a dense block of their gradients.

A :class:`RowSparseGrad` is ``(rows, values, num_rows)``: ``rows`` are strictly increasing row
ids in ``[0, num_rows)`` and ``values`` has shape ``(len(rows), *row_shape)``, the gradient of
each of those rows (the shape of torch's hybrid COO gradient, TF's ``IndexedSlices``, FBGEMM's
row gradients). Its size is O(touched rows), whatever ``num_rows``: building it, checking it
and stepping with it never read or allocate anything per row of the table.

It means what the CSR gradient with the same rows does (see :mod:`npoptim.sparse.rowgrad`):
*every column of a touched row is a stored entry*, explicit zeros included (SparseAdam decays
the moments of a zero entry and moves it), and rows not listed are absent. Every optimizer that
takes a CSR gradient (SparseAdam, Adagrad, SGD) takes it, with results bit-identical to the
equivalent CSR gradient (both are walked by the same touched-rows kernel).

:func:`row_sparse_grad` builds one from embedding lookups ``(row_ids, row_values, num_rows)``
(repeated ids allowed) by a stable radix sort of the lookups, in O(lookups): rows of a
repeated id are summed in lookup order onto zeros, exactly as :func:`embedding_row_grad` sums
them, so the two are bit-identical.

Conversion: ``grad.tocsr()`` gives the ``scipy.sparse.csr_array`` (O(num_rows): a CSR
``indptr`` has ``num_rows + 1`` entries) and :meth:`RowSparseGrad.from_csr` the row-sparse
form of a CSR gradient whose touched rows are full (O(num_rows) to validate the CSR;
``values`` views the CSR's ``data`` when it is canonical).

A step checks a row-sparse gradient in O(touched rows) before anything is written: ``rows``
must be a 1-D integer array, strictly increasing and in range, ``values`` an array of the
parameter's dtype and shape ``(len(rows), *param.shape[1:])``, ``num_rows`` the parameter's
row count. Anything else raises ``ValueError`` or ``TypeError`` and changes nothing.
"""
import numpy as np

from npoptim.kernels.jit import kernel
from npoptim.sparse.rowgrad import (RowGradient, _columns, _index_dtype, _read_only,
                                    as_row_gradient, check_lookups, row_shape)

__all__ = ["RowSparseGrad", "row_sparse_grad", "as_rows_gradient"]


class RowSparseGrad:
    """A row-sparse gradient ``(rows, values, num_rows)`` (see the module docstring).

    The arrays are kept as given (no copy); a step checks them each time it reads them.

    Parameters
    ----------
    rows : array_like
        the touched rows' ids, unique and increasing.
    values : array_like
        the gradient rows, shape ``(len(rows), *row_shape)``.
    num_rows : int
        the number of rows of the table.
    """

    __slots__ = ("rows", "values", "num_rows")

    def __init__(self, rows, values, num_rows):
        self.rows = np.asarray(rows)
        if self.rows.size == 0 and self.rows.dtype.kind == "f":
            self.rows = self.rows.astype(np.int64)  # np.asarray([]) is float64
        self.values = np.asarray(values)
        self.num_rows = int(num_rows)

    @property
    def shape(self):
        """The shape of the table this gradient is for: ``(num_rows, *row_shape)``."""
        return (self.num_rows, *self.values.shape[1:])

    @property
    def nnz(self):
        """The number of entries: every column of every touched row."""
        return int(self.values.size)

    def __repr__(self):
        return (f"RowSparseGrad({self.rows.size} of {self.num_rows} rows, row shape "
                f"{self.values.shape[1:]}, {self.values.dtype})")

    def tocsr(self):
        """The equivalent ``scipy.sparse.csr_array`` of shape ``(num_rows, prod(row_shape))``;
        O(num_rows) (its ``indptr``). Its ``data`` is a copy of ``values``."""
        import scipy.sparse

        k = self.rows.size
        width = int(np.prod(self.values.shape[1:], dtype=np.int64))
        indptr = np.zeros(self.num_rows + 1, np.int64)
        if width:
            indptr[self.rows + 1] = width
        np.cumsum(indptr, out=indptr)
        indices = np.tile(np.arange(width, dtype=np.int64), k if width else 0)
        data = np.array(self.values, order="C").reshape(-1)
        return scipy.sparse.csr_array((data, indices, indptr), shape=(self.num_rows, width))

    @classmethod
    def from_csr(cls, grad, row_shape=None):
        """The row-sparse form of a CSR gradient whose touched rows are all full (every column
        stored); ``row_shape`` (default ``(ncols,)``) is the shape of one row of ``values``.

        Validates the CSR as a step does (duplicates summed, columns sorted). A CSR with a
        touched row that lacks some column has no row-sparse form: ``ValueError``.

        Parameters
        ----------
        grad : scipy.sparse.csr_array or csr_matrix
            a CSR gradient whose touched rows store every column.
        row_shape : tuple, optional
            the shape of one row of ``values``; None means ``(ncols,)``.
        """
        shape = tuple(grad.shape)
        data = getattr(grad, "data", None)
        dtype = data.dtype if isinstance(data, np.ndarray) else np.float64
        target = (shape[0], *((shape[1],) if row_shape is None else tuple(row_shape)))
        canonical = as_row_gradient(grad, target, dtype, "from_csr")
        ncols = canonical.shape[1]
        if np.any(np.diff(canonical.row_ptr) != ncols):
            raise ValueError("from_csr: a touched row of this CSR gradient lacks some columns; "
                             "a row-sparse gradient stores every column of its rows")
        values = canonical.data.reshape(canonical.rows.size, *target[1:])
        return cls(np.array(canonical.rows), values, shape[0])


#: Digit passes of the lookups' radix sort for tables of up to 2**33 rows (more passes, of
#: at most 11 bits, for larger ones): a fixed count, so that the sort costs the same whatever
#: the table's size.
_RADIX_PASSES = 3


@kernel
def _radix_pass(keys, next_keys, order, next_order, shift, mask, counts):
    """One stable counting pass of the digit ``(key >> shift) & mask``: ``keys`` (and, when it
    is not empty, ``order`` with them) into ``next_keys`` (``next_order``)."""
    n = keys.size
    carry = order.size != 0
    counts[:] = 0
    for i in range(n):
        counts[((keys[i] >> shift) & mask) + 1] += 1
    for d in range(mask + 1):
        counts[d + 1] += counts[d]
    for i in range(n):
        d = (keys[i] >> shift) & mask
        at = counts[d]
        next_keys[at] = keys[i]
        if carry:
            next_order[at] = order[i]
        counts[d] = at + 1


@kernel
def _lookup_order(ids, num_rows):
    """The lookups sorted by id, repeats of one id in lookup order: a stable LSD radix sort.
    Returns ``(order, sorted_ids)``.

    Branch-free, unlike a comparison sort, whose mispredicted branches make it 4x slower on
    fresh lookups than on the same lookups again (measured). Ids lie in ``[0, num_rows)``.
    While an id and its lookup's position fit in 63 bits together, they travel packed into
    one int64 (id above, position below), so that a pass moves one array, not two (the sort
    took 0.73 ms for 65,536 lookups with two arrays, 0.43 ms packed, measured)."""
    n = ids.size
    bits = 1
    while bits < 63 and (1 << bits) < num_rows:
        bits += 1
    passes = max(_RADIX_PASSES, (bits + 10) // 11)
    digit = (bits + passes - 1) // passes
    mask = (1 << digit) - 1
    position_bits = 1
    while (1 << position_bits) < n:
        position_bits += 1
    packed = bits + position_bits <= 63
    below = position_bits if packed else 0
    keys = np.empty(n, np.int64)
    for i in range(n):
        keys[i] = (ids[i] << below) | i if packed else ids[i]
    order = np.empty(0 if packed else n, np.int64)
    for i in range(order.size):
        order[i] = i
    next_keys = np.empty(n, np.int64)
    next_order = np.empty(order.size, np.int64)
    counts = np.empty(mask + 2, np.int64)
    for p in range(passes):
        _radix_pass(keys, next_keys, order, next_order, p * digit + below, mask, counts)
        keys, next_keys = next_keys, keys
        order, next_order = next_order, order
    if packed:
        order = np.empty(n, np.int64)
        for i in range(n):
            order[i] = keys[i] & ((1 << below) - 1)
            keys[i] = keys[i] >> below
    return order, keys


@kernel
def _coalesce_sorted(ids, values, width, num_rows):
    """Sum the rows of ``values`` (flat, ``width`` per lookup) by id, in O(n).

    Returns ``(bad, rows, data)``: ``bad`` is the position of the first out-of-range id or
    -1, ``rows`` the distinct ids in increasing order, ``data`` their summed rows (flat). The
    lookups of one id are added onto zeros in lookup order (as
    :func:`npoptim.sparse.rowgrad.embedding_row_grad` adds them).

    The sort gives each lookup the slot of its id among the distinct ids; the values are then
    added in lookup order, read once from start to end (reading them in the sorted order
    instead jumps through memory and took twice as long at 65,536 lookups, measured), into
    ``data``, which holds the distinct rows only and stays in cache.
    """
    n = ids.size
    for k in range(n):
        if ids[k] < 0 or ids[k] >= num_rows:
            return k, np.zeros(0, np.int64), np.zeros(0, values.dtype)
    order, sorted_ids = _lookup_order(ids, num_rows)
    slot = np.empty(n, np.int64)
    distinct = np.empty(n, np.int64)
    count = 0
    previous = -1
    for k in range(n):
        if sorted_ids[k] != previous:
            previous = sorted_ids[k]
            distinct[count] = previous
            count += 1
        slot[order[k]] = count - 1
    rows = distinct[:count].copy()
    data = np.zeros(count * width, values.dtype)
    for k in range(n):
        start = slot[k] * width
        # slices, not 2-D indexing: LLVM vectorizes this form
        target = data[start:start + width]
        source = values[k * width:(k + 1) * width]
        for c in range(width):
            target[c] += source[c]
    return -1, rows, data


def row_sparse_grad(row_ids, row_values, num_rows):
    """The row-sparse gradient of an embedding table from per-lookup gradient rows.

    ``row_ids`` (length n, repeats allowed) are the looked-up rows, ``row_values`` (shape
    ``(n, *row_shape)``) the gradient of each lookup. Rows of repeated ids are summed in
    lookup order, bit-identically to :func:`npoptim.embedding_row_grad`. The cost is O(n),
    independent of ``num_rows`` (a radix sort with a fixed number of passes). Returns a
    :class:`RowSparseGrad`.

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
    flat = np.ascontiguousarray(values).reshape(-1)
    bad, rows, data = _coalesce_sorted(ids.astype(np.int64, copy=False), flat, width, num_rows)
    if bad >= 0:
        raise ValueError(f"row ids must lie in [0, {num_rows}); got range "
                         f"[{ids.min()}, {ids.max()}]")
    return RowSparseGrad(rows, data.reshape(rows.size, *values.shape[1:]), num_rows)


# Codes returned by _check_rows
_ROWS_OK, _ROWS_RANGE, _ROWS_ORDER = 0, 1, 2


@kernel
def _check_rows(rows, num_rows):
    """``(code, where)``: are ``rows`` strictly increasing and within ``[0, num_rows)``?"""
    previous = -1
    for j in range(rows.size):
        row = rows[j]
        if row < 0 or row >= num_rows:
            return _ROWS_RANGE, j
        if row <= previous:
            return _ROWS_ORDER, j
        previous = row
    return _ROWS_OK, 0


def as_rows_gradient(grad, param, where="grad"):
    """Check a :class:`RowSparseGrad` for ``param`` in O(touched rows) and return it as the
    :class:`~npoptim.sparse.rowgrad.RowGradient` the kernels walk (``indptr`` is None: no
    O(rows) array exists). Raises ``TypeError``/``ValueError`` naming ``where``.

    Parameters
    ----------
    grad : RowSparseGrad
        the row-sparse gradient to check.
    param : numpy.ndarray
        the parameter it is the gradient of.
    where : str, default: 'grad'
        how error messages name the gradient.
    """
    expected = row_shape(param.shape)
    rows, values = grad.rows, grad.values
    if not isinstance(rows, np.ndarray) or rows.ndim != 1 or rows.dtype.kind not in "iu":
        raise ValueError(f"{where}: row-sparse rows must be a 1-D integer array")
    if not isinstance(values, np.ndarray):
        raise TypeError(f"{where}: row-sparse values must be a NumPy array")
    if grad.num_rows != expected[0]:
        raise ValueError(f"{where}: row-sparse gradient is for {grad.num_rows} rows, the "
                         f"parameter has {expected[0]}")
    block = (rows.size, *param.shape[1:])
    if values.shape != block:
        raise ValueError(f"{where}: row-sparse values have shape {values.shape}, expected "
                         f"{block} (one row of the parameter per touched row)")
    if values.dtype != param.dtype:
        raise ValueError(f"{where}: row-sparse values have dtype {values.dtype}, the "
                         f"parameter has {param.dtype}")
    # unsigned ids past the int64 range wrap to negative ones, which the range check refuses
    rows = rows.astype(np.int64, copy=False)
    if not rows.dtype.isnative:
        rows = rows.astype(np.dtype(np.int64).newbyteorder("="))
    code, at = _check_rows(rows, expected[0])
    if code == _ROWS_RANGE:
        raise ValueError(f"{where}: row-sparse row id {rows[at]} at position {at} is out of "
                         f"range [0, {expected[0]})")
    if code == _ROWS_ORDER:
        raise ValueError(f"{where}: row-sparse row ids must be strictly increasing; "
                         f"rows[{at}] = {rows[at]} follows {rows[at - 1]} (use "
                         "row_sparse_grad to sum repeated ids)")
    width = expected[1]
    count = rows.size if width else 0  # rows without columns store nothing
    if np.may_share_memory(values, param):
        values = values.copy()
    data = np.ascontiguousarray(values).reshape(-1)
    # read-only index arrays of one type with the builder's CSR: one compiled kernel for both
    rows = _read_only(np.ascontiguousarray(rows[:count]))
    row_ptr = _read_only(np.arange(count + 1, dtype=np.int64) * width)
    indices = _columns(data.size, width, _index_dtype(expected[0], count, width))
    return RowGradient(None, indices, data, expected, rows, row_ptr)
