"""Drivers: apply one per-element update rule to a dense array or to the stored entries of CSR rows.

An update rule is a small scalar function compiled by Numba::

    rule(p, g, s, h) -> (new_p, new_s)

``p`` and ``g`` are one element of the parameter and of its gradient, ``s`` is a tuple with the
same element of each state array (``exp_avg``, ``exp_avg_sq``, ...), which the rule unpacks by
name on its first line, and ``h`` is the family's hyperparameter record (a
``typing.NamedTuple``, read by field name: ``h.eps``), every field already cast to the
parameter's dtype (so float32 parameters are updated in float32 arithmetic, as torch does).
The rule returns the new parameter value and the new state tuple; the driver writes both back.

Each optimizer module binds its rule to a driver in a two-line ``@kernel`` function, e.g.::

    @kernel
    def adam_dense(param, grad, states, hyper):
        apply_dense(adam_rule, param, grad, states, AdamHyper(*hyper))

so that Numba caches one compiled loop per (rule, dtype) on disk: a dispatcher passed as an
argument of a cached function would otherwise be recompiled in every process. ``hyper``
arrives as a plain tuple of the record's fields (see
:func:`npoptim.optim.optimizer.typed_record`) and the kernel rebuilds the record.

The drivers are element-wise: every element's result depends only on that element, so the
output is bit-identical whatever the order or the thread count. Rules with a per-row reduction
(row-wise Adagrad) are *row rules*, applied a whole row at a time by
:func:`apply_row_rule_dense` and :func:`apply_row_rule_rows` (see "row rules" below); rules
with one reduction per block of consecutive elements and element states besides (Adam-mini)
are *block rules*, applied a block at a time by :func:`apply_block_rule_dense` (see "block
rules" below). Large updates run on several threads (see :mod:`npoptim.kernels.parallel` for
the threshold and how to set it).
"""
import numpy as np
from llvmlite import ir
from numba import prange
from numba.core import cgutils, types
from numba.extending import intrinsic, overload

from npoptim.kernels.jit import JIT_OPTIONS, driver, kernel
from npoptim.kernels.parallel import parallel_threshold


def load_state(states, i):
    """The tuple ``(states[0][i], states[1][i], ...)``."""
    return tuple([s[i] for s in states])


def store_state(states, i, values):
    """``states[k][i] = values[k]`` for every k."""
    for k in range(len(states)):
        states[k][i] = values[k]


# Numba cannot build a tuple of run-time length, so the compiled versions of the two helpers
# are written out for each number of state arrays an optimizer has (0 to 5; COCOB has 5).
@overload(load_state, jit_options=JIT_OPTIONS)
def _load_state_jit(states, i):
    n = len(states)
    if n == 0:
        return lambda states, i: ()
    if n == 1:
        return lambda states, i: (states[0][i],)
    if n == 2:
        return lambda states, i: (states[0][i], states[1][i])
    if n == 3:
        return lambda states, i: (states[0][i], states[1][i], states[2][i])
    if n == 4:
        return lambda states, i: (states[0][i], states[1][i], states[2][i], states[3][i])
    if n == 5:
        return lambda states, i: (states[0][i], states[1][i], states[2][i], states[3][i],
                                  states[4][i])


@overload(store_state, jit_options=JIT_OPTIONS)
def _store_state_jit(states, i, values):
    n = len(states)
    if n == 0:
        return lambda states, i, values: None
    if n == 1:
        def store1(states, i, values):
            states[0][i] = values[0]
        return store1
    if n == 2:
        def store2(states, i, values):
            states[0][i] = values[0]
            states[1][i] = values[1]
        return store2
    if n == 3:
        def store3(states, i, values):
            states[0][i] = values[0]
            states[1][i] = values[1]
            states[2][i] = values[2]
        return store3
    if n == 4:
        def store4(states, i, values):
            states[0][i] = values[0]
            states[1][i] = values[1]
            states[2][i] = values[2]
            states[3][i] = values[3]
        return store4
    if n == 5:
        def store5(states, i, values):
            states[0][i] = values[0]
            states[1][i] = values[1]
            states[2][i] = values[2]
            states[3][i] = values[3]
            states[4][i] = values[4]
        return store5


def slice_states(states, start, stop):
    """The tuple ``(states[0][start:stop], states[1][start:stop], ...)``."""
    return tuple([s[start:stop] for s in states])


@overload(slice_states, jit_options=JIT_OPTIONS)
def _slice_states_jit(states, start, stop):
    n = len(states)
    if n == 0:
        return lambda states, start, stop: ()
    if n == 1:
        return lambda states, start, stop: (states[0][start:stop],)
    if n == 2:
        return lambda states, start, stop: (states[0][start:stop], states[1][start:stop])
    if n == 3:
        return lambda states, start, stop: (states[0][start:stop], states[1][start:stop],
                                            states[2][start:stop])


def prefetch(array, index):
    """Hint the CPU to fetch ``array[index]``'s cache line for writing (a no-op in Python)."""


@intrinsic
def _prefetch(typingctx, array, index):
    def codegen(context, builder, signature, args):
        arraytype = signature.args[0]
        array_ = context.make_array(arraytype)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(context, builder, arraytype, array_, [args[1]],
                                           wraparound=False)
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [pointer.type, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        # (address, write, high temporal locality, data cache)
        builder.call(fn, [pointer, i32(1), i32(3), i32(1)])
        return context.get_dummy_value()
    return types.void(array, types.intp), codegen


@overload(prefetch, jit_options=JIT_OPTIONS)
def _prefetch_jit(array, index):
    return lambda array, index: _prefetch(array, index)


def prefetch_span(array, start, count):
    """Prefetch the cache lines of ``array[start:start + count]`` (a no-op in Python)."""


@overload(prefetch_span, jit_options=JIT_OPTIONS)
def _prefetch_span_jit(array, start, count):
    step = max(1, 64 * 8 // array.dtype.bitwidth)  # elements per 64-byte cache line

    def impl(array, start, count):
        for k in range(start, start + count, step):
            _prefetch(array, k)
        if count > 0:
            _prefetch(array, start + count - 1)  # the last line, when the span is unaligned
    return impl


def prefetch_states(states, start, count):
    """:func:`prefetch_span` of each state array (a no-op in Python)."""


@overload(prefetch_states, jit_options=JIT_OPTIONS)
def _prefetch_states_jit(states, start, count):
    n = len(states)
    if n == 0:
        return lambda states, start, count: None
    if n == 1:
        def prefetch1(states, start, count):
            prefetch_span(states[0], start, count)
        return prefetch1
    if n == 2:
        def prefetch2(states, start, count):
            prefetch_span(states[0], start, count)
            prefetch_span(states[1], start, count)
        return prefetch2
    if n == 3:
        def prefetch3(states, start, count):
            prefetch_span(states[0], start, count)
            prefetch_span(states[1], start, count)
            prefetch_span(states[2], start, count)
        return prefetch3


# A driver hands ``rule`` on only to another driver: both are inlined into the kernel, so the
# rule is a compile-time constant there. Passed to a jitted function that is not inlined, it
# would be passed by address and Numba would refuse to cache the kernel ("uses dynamic
# globals"). The parallel paths (``prange``, from ``parallel_threshold()`` elements on: see
# npoptim.kernels.parallel) and the serial ones share their loops that way.

#: Stored entries per parallel block of a CSR update.
ROWS_BLOCK = 1 << 14
#: How many touched rows ahead a CSR update prefetches the parameter and state rows: the rows
#: are scattered, so without it each row waits for memory.
PREFETCH_ROWS = 8


@driver(parallel=True)
def apply_dense(rule, param, grad, states, hyper):
    """Apply ``rule`` to every element of the flat arrays ``param``, ``grad`` and ``states``."""
    n = param.size
    if n >= parallel_threshold():
        # a flat prange: Numba gives each thread one contiguous chunk (a nested loop over
        # blocks with a min() bound was not vectorized)
        for i in prange(n):
            param[i], values = rule(param[i], grad[i], load_state(states, i), hyper)
            store_state(states, i, values)
    else:
        for i in range(n):
            param[i], values = rule(param[i], grad[i], load_state(states, i), hyper)
            store_state(states, i, values)


@kernel
def _lower_bound(sorted_values, value):
    """The first ``j`` with ``sorted_values[j] >= value`` (``sorted_values.size - 1`` if none)."""
    low = 0
    high = sorted_values.size - 1
    while low < high:
        middle = (low + high) // 2
        if sorted_values[middle] < value:
            low = middle + 1
        else:
            high = middle
    return low


@kernel
def _block_rows(row_ptr, n, blocks, block):
    """The touched rows ``[first, last)`` that start in parallel block ``block`` of
    ``ROWS_BLOCK`` stored entries (of ``blocks``; ``n`` touched rows in all)."""
    first = _lower_bound(row_ptr, block * ROWS_BLOCK)
    last = _lower_bound(row_ptr, (block + 1) * ROWS_BLOCK) if block + 1 < blocks else n
    return first, last


@driver
def prefetch_first_rows(param, states, rows, ncols, first, last):
    """Prefetch the parameter and state rows of the first ``PREFETCH_ROWS`` touched rows of
    ``rows[first:last]`` (flat arrays, ``ncols`` elements a row)."""
    for j in range(first, min(last, first + PREFETCH_ROWS)):
        prefetch_span(param, rows[j] * ncols, ncols)
        prefetch_states(states, rows[j] * ncols, ncols)


@driver
def prefetch_row_ahead(param, states, rows, ncols, j, last):
    """While touched row ``j`` is updated, prefetch the one ``PREFETCH_ROWS`` ahead (if it is
    before ``last``), so that each row does not wait for memory in turn."""
    if j + PREFETCH_ROWS < last:
        ahead = rows[j + PREFETCH_ROWS] * ncols
        prefetch_span(param, ahead, ncols)
        prefetch_states(states, ahead, ncols)


@driver
def _update_rows(rule, param, ncols, rows, row_ptr, indices, data, states, hyper, first, last):
    """Apply ``rule`` to the touched rows ``rows[first:last]``.

    The parameter and state rows are scattered: the loop prefetches them ``PREFETCH_ROWS``
    touched rows ahead, so that each row does not wait for memory in turn.
    """
    prefetch_first_rows(param, states, rows, ncols, first, last)
    for j in range(first, last):
        prefetch_row_ahead(param, states, rows, ncols, j, last)
        start = row_ptr[j]
        stop = row_ptr[j + 1]
        base = rows[j] * ncols
        if stop - start == ncols:
            # a full row as a dense block, through slices: LLVM vectorizes this loop, not
            # the same loop indexing the whole arrays at base + c (5x slower measured)
            p = param[base:base + ncols]
            g = data[start:stop]
            s = slice_states(states, base, base + ncols)
            for c in range(ncols):
                p[c], values = rule(p[c], g[c], load_state(s, c), hyper)
                store_state(s, c, values)
        else:
            for k in range(start, stop):
                i = base + indices[k]
                param[i], values = rule(param[i], data[k], load_state(states, i), hyper)
                store_state(states, i, values)


@driver(parallel=True)
def apply_rows(rule, param, ncols, rows, row_ptr, indices, data, states, hyper):
    """Apply ``rule`` to the stored entries of a canonical CSR gradient.

    ``param`` and ``states`` are flat views of ``(nrows, ncols)`` arrays. The gradient comes as
    its touched rows (see :class:`npoptim.sparse.rowgrad.RowGradient`): ``rows`` are the rows
    with stored entries, in increasing order, and the entries of ``rows[j]`` are
    ``indices[row_ptr[j]:row_ptr[j + 1]]`` (sorted, unique, in-range columns) and the same
    slice of ``data``; ``row_ptr[0] == 0``. The cost is O(touched rows + entries), whatever
    the number of rows of the table. A row with every column stored is streamed as a dense
    block, without reading its column indices.

    Above the parallel threshold the stored entries are cut into blocks of ``ROWS_BLOCK``; a
    block updates the rows that start in it.
    """
    n = rows.size
    if n == 0:
        return
    nnz = row_ptr[n]
    if nnz >= parallel_threshold() and nnz > ROWS_BLOCK:
        blocks = (nnz + ROWS_BLOCK - 1) // ROWS_BLOCK
        for block in prange(blocks):
            first, last = _block_rows(row_ptr, n, blocks, block)
            _update_rows(rule, param, ncols, rows, row_ptr, indices, data, states, hyper,
                         first, last)
    else:
        _update_rows(rule, param, ncols, rows, row_ptr, indices, data, states, hyper, 0, n)


@driver(parallel=True)
def apply_from_states(rule, param, states, hyper):
    """``param[i] = rule(param[i], s, hyper)`` with ``s = (states[0][i], ...)``, read only.

    (``apply_dense`` would write every state back, unchanged: two more streams to memory.)
    """
    n = param.size
    if n >= parallel_threshold():
        for i in prange(n):
            param[i] = rule(param[i], load_state(states, i), hyper)
    else:
        for i in range(n):
            param[i] = rule(param[i], load_state(states, i), hyper)


# ------------------------------------------------------------------------------ row rules
# A row rule updates one whole row of a table at once, for rules with a per-row reduction
# (FBGEMM's row-wise Adagrad: one accumulator per row, fed by the mean of the row's squared
# gradients)::
#
#     row_rule(p, g, s, h) -> new_s
#
# ``p`` and ``g`` are one row of the parameter (written in place) and of its gradient (read
# only), ``s`` the tuple of the row's scalar states (``row_states[k][row]``), ``h`` the
# hyperparameter record. Each row depends on itself only, so the result is bit-identical
# whatever the order or the thread count.


@driver
def _row_rule_on(row_rule, param, ncols, row, g, row_states, hyper):
    base = row * ncols
    values = row_rule(param[base:base + ncols], g, load_state(row_states, row), hyper)
    store_state(row_states, row, values)


@driver(parallel=True)
def apply_row_rule_dense(row_rule, param, ncols, grad, row_states, hyper):
    """Apply ``row_rule`` to every row of the flat ``(nrows, ncols)`` arrays ``param`` and
    ``grad``; ``row_states`` are flat arrays of ``nrows``."""
    if ncols == 0:
        return
    nrows = param.size // ncols
    if param.size >= parallel_threshold():
        for row in prange(nrows):
            _row_rule_on(row_rule, param, ncols, row, grad[row * ncols:(row + 1) * ncols],
                         row_states, hyper)
    else:
        for row in range(nrows):
            _row_rule_on(row_rule, param, ncols, row, grad[row * ncols:(row + 1) * ncols],
                         row_states, hyper)


@driver
def _row_rule_rows(row_rule, param, ncols, rows, row_ptr, indices, data, row_states, hyper,
                   first, last):
    """``row_rule`` on the touched rows ``rows[first:last]``; a row whose columns are not all
    stored is spread into a zeroed row first (its missing columns are zero gradients)."""
    # np.empty and a loop, not np.zeros: inlined into a parallel kernel, np.zeros becomes a
    # parallel region of its own, which woke the thread pool on every step (8 ms a step
    # with the other core busy, measured)
    scratch = np.empty(ncols, data.dtype)
    for c in range(ncols):
        scratch[c] = 0
    for j in range(first, min(last, first + PREFETCH_ROWS)):
        prefetch_span(param, rows[j] * ncols, ncols)
    for j in range(first, last):
        if j + PREFETCH_ROWS < last:
            prefetch_span(param, rows[j + PREFETCH_ROWS] * ncols, ncols)
            prefetch_states(row_states, rows[j + PREFETCH_ROWS], 1)
        start = row_ptr[j]
        stop = row_ptr[j + 1]
        if stop - start == ncols:
            _row_rule_on(row_rule, param, ncols, rows[j], data[start:stop], row_states, hyper)
        else:
            for k in range(start, stop):
                scratch[indices[k]] = data[k]
            _row_rule_on(row_rule, param, ncols, rows[j], scratch, row_states, hyper)
            for k in range(start, stop):
                scratch[indices[k]] = 0


@driver(parallel=True)
def apply_row_rule_rows(row_rule, param, ncols, rows, row_ptr, indices, data, row_states,
                        hyper):
    """Apply ``row_rule`` to the touched rows of a canonical CSR gradient (the arguments of
    :func:`apply_rows`, with ``row_states`` indexed by row). O(touched rows x ncols)."""
    n = rows.size
    if n == 0 or ncols == 0:
        return
    nnz = row_ptr[n]
    if nnz >= parallel_threshold() and nnz > ROWS_BLOCK:
        blocks = (nnz + ROWS_BLOCK - 1) // ROWS_BLOCK
        for block in prange(blocks):
            first, last = _block_rows(row_ptr, n, blocks, block)
            _row_rule_rows(row_rule, param, ncols, rows, row_ptr, indices, data, row_states,
                           hyper, first, last)
    else:
        _row_rule_rows(row_rule, param, ncols, rows, row_ptr, indices, data, row_states,
                       hyper, 0, n)


# ---------------------------------------------------------------------------- block rules
# A block rule updates one block of ``block_size`` consecutive elements of a flat parameter at
# once, for rules that share one scalar state per block and keep element states as well
# (Adam-mini: one second moment per attention head, per output neuron or per tensor, fed by
# the block's mean of g², and a first moment per element)::
#
#     block_rule(p, g, s, b, h) -> new_b
#
# ``p`` and ``g`` are the block's slices of the parameter (written in place) and of its
# gradient (read only), ``s`` the tuple of the block's slices of the element states (written
# in place), ``b`` the tuple of the block's scalar states (``block_states[k][block]``), ``h``
# the hyperparameter record. The rule computes its reduction itself, in a fixed order (e.g.
# :func:`npoptim.kernels.reduction.mean_of_squares`, which this module cannot import: the
# reductions are built on these drivers). Each block depends on itself only, so the result
# is bit-identical whatever the order or the thread count.


@driver
def _block_rule_on(block_rule, param, grad, block_size, block, states, block_states, hyper):
    start = block * block_size
    stop = start + block_size
    values = block_rule(param[start:stop], grad[start:stop], slice_states(states, start, stop),
                        load_state(block_states, block), hyper)
    store_state(block_states, block, values)


@driver(parallel=True)
def apply_block_rule_dense(block_rule, param, grad, block_size, states, block_states, hyper):
    """Apply ``block_rule`` to every block of ``block_size`` consecutive elements of the flat
    arrays ``param``, ``grad`` and ``states`` (``param.size`` a multiple of ``block_size``);
    ``block_states`` are flat arrays of ``param.size // block_size``. Nothing happens for
    ``block_size == 0`` (an empty parameter). Above the parallel threshold the blocks are
    shared among the threads (one block, a whole tensor, runs on one)."""
    if block_size == 0:
        return
    blocks = param.size // block_size
    if param.size >= parallel_threshold() and blocks > 1:
        for block in prange(blocks):
            _block_rule_on(block_rule, param, grad, block_size, block, states, block_states,
                           hyper)
    else:
        for block in range(blocks):
            _block_rule_on(block_rule, param, grad, block_size, block, states, block_states,
                           hyper)
