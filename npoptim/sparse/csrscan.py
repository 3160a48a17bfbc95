"""One pass over a CSR gradient's ``indptr`` (and one over its ``indices``) that both checks it
and lists its touched rows: how a ``scipy.sparse`` CSR built by the caller is validated at
memory speed.

:func:`scan_canonical` answers "is this CSR valid and canonical?" with the touched rows (see
:class:`npoptim.sparse.rowgrad.RowGradient`), or says it is not; only then does
:func:`npoptim.sparse.rowgrad.as_row_gradient` run its slower checks, which name the defect or
sort and sum the entries. Nothing outside the arrays is read: ``indptr`` is checked to be
non-decreasing from 0 and to end within the stored entries before any ``indices`` entry is
read.
"""
import numpy as np

from npoptim.kernels.jit import kernel


#: Rows per block of the touched-row search: a block whose ``indptr`` does not grow is skipped
#: with one comparison.
_BLOCK = 16


@kernel
def _scan_indptr(indptr, stored):
    """``(ok, rows, row_ptr)``: is ``indptr`` 0-based, non-decreasing and within ``stored``
    entries, and its touched rows with where their entries start.

    The check is one branch-free (vectorized) pass; the touched rows are then found by
    skipping every block of ``_BLOCK`` rows that holds no entry (``indptr`` is monotonic by
    then), so a table with few touched rows costs little more than the check."""
    nrows = indptr.size - 1
    empty = (False, np.zeros(0, np.int64), np.zeros(1, np.int64))
    if indptr[0] != 0 or indptr[nrows] > stored:
        return empty
    decreasing = 0
    count = 0
    for row in range(nrows):
        # compared, not subtracted: a difference of huge values can wrap around
        decreasing |= indptr[row + 1] < indptr[row]
        count += indptr[row + 1] > indptr[row]
    if decreasing:
        return empty
    # one slot more than the touched rows: every row of a visited block is written to
    # rows[j], which only the touched ones keep (branch-free: touched rows are unpredictable)
    rows = np.empty(count + 1, np.int64)
    row_ptr = np.empty(count + 1, np.int64)
    j = 0
    full = nrows - nrows % _BLOCK
    for first in range(0, full, _BLOCK):
        if indptr[first + _BLOCK] == indptr[first]:
            continue
        for row in range(first, first + _BLOCK):
            rows[j] = row
            row_ptr[j] = indptr[row]
            j += indptr[row + 1] > indptr[row]
    for row in range(full, nrows):
        rows[j] = row
        row_ptr[j] = indptr[row]
        j += indptr[row + 1] > indptr[row]
    row_ptr[count] = indptr[nrows]
    return True, rows[:count], row_ptr


@kernel
def _rows_increasing(indices, row_ptr, ncols):
    """Are the columns of every touched row strictly increasing and within ``[0, ncols)``?

    A full row (``ncols`` entries) must then be exactly ``0, 1, ..., ncols - 1``; another row
    is in range when strictly increasing with its first column >= 0 and its last below
    ``ncols``. Both inner loops are branch-free, so vectorized."""
    for j in range(row_ptr.size - 1):
        start = row_ptr[j]
        stop = row_ptr[j + 1]
        # slices, not indexing the whole array at start + c: LLVM vectorizes this form
        row = indices[start:stop]
        disorder = 0
        if stop - start == ncols:
            for c in range(ncols):
                disorder |= row[c] ^ c
        else:
            if row[0] < 0 or row[row.size - 1] >= ncols:
                return False
            for k in range(1, row.size):
                disorder |= row[k] <= row[k - 1]
        if disorder:
            return False
    return True


def scan_canonical(indptr, indices, ncols, stored):
    """The touched rows ``(rows, row_ptr)`` of a valid canonical CSR, or None when it is not
    (malformed, or with unsorted or duplicate columns). ``stored`` is the number of entries
    ``indices`` and ``data`` both hold."""
    ok, rows, row_ptr = _scan_indptr(indptr, stored)
    if not ok or not _rows_increasing(indices, row_ptr, ncols):
        return None
    return rows, row_ptr
