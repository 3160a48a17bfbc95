"""Drivers: apply one per-element update rule to a dense array or to the stored entries of CSR rows.

An update rule is a small scalar function compiled by Numba::

    rule(p, g, s, h) -> (new_p, new_s)

``p`` and ``g`` are one element of the parameter and of its gradient, ``s`` is a tuple with the
same element of each state array (``exp_avg``, ``exp_avg_sq``, ...), and ``h`` is a tuple of
hyperparameters already cast to the parameter's dtype (so float32 parameters are updated in
float32 arithmetic, as torch does). The rule returns the new parameter value and the new state
tuple; the driver writes both back.

Each optimizer module binds its rule to a driver in a two-line ``@kernel`` function, e.g.::

    @kernel
    def adam_dense(param, grad, states, hyper):
        apply_dense(adam_rule, param, grad, states, hyper)

so that Numba caches one compiled loop per (rule, dtype) on disk: a dispatcher passed as an
argument of a cached function would otherwise be recompiled in every process.

The drivers are element-wise: every element's result depends only on that element, so the
output is bit-identical whatever the order or the thread count. Large updates run on several
threads (see :mod:`npoptim.kernels.parallel` for the threshold and how to set it).
"""
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
# are written out for each number of state arrays an optimizer has (0 to 3).
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
#: How many touched rows ahead a serial CSR update prefetches the parameter and state rows:
#: the rows are scattered, so without it each row waits for memory.
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
def _upper_bound(indptr, value, low):
    """The first ``j > low`` with ``indptr[j] > value``, given ``indptr[low] <= value <
    indptr[-1]`` and ``indptr`` non-decreasing: a galloping search from ``low``, so finding
    the next non-empty row costs O(log gap) however many empty rows lie in between."""
    high = low + 1
    step = 1
    last = indptr.size - 1
    while high < last and indptr[high] <= value:
        low = high
        high += step
        step += step
    if high > last:
        high = last
    while high - low > 1:  # indptr[low] <= value < indptr[high]
        middle = (low + high) // 2
        if indptr[middle] <= value:
            low = middle
        else:
            high = middle
    return high


@kernel
def _lower_bound(indptr, value):
    """The first ``j`` with ``indptr[j] >= value`` (``indptr.size - 1`` if none)."""
    low = 0
    high = indptr.size - 1
    while low < high:
        middle = (low + high) // 2
        if indptr[middle] < value:
            low = middle + 1
        else:
            high = middle
    return low


@driver
def _update_rows(rule, param, ncols, indptr, indices, data, states, hyper, start, stop_at):
    """Apply ``rule`` to the rows that start at entries ``start`` .. ``stop_at - 1``.

    ``start`` is the first entry of a row. The rows are found by galloping through ``indptr``
    from one non-empty row to the next (O(log gap) each). A second cursor runs
    ``PREFETCH_ROWS`` touched rows ahead and prefetches their parameter and state rows: they
    are scattered, so without it each row waits for memory (30% faster at 10% of rows touched,
    measured).
    """
    row = _lower_bound(indptr, start)
    ahead = start
    ahead_row = row
    for _ in range(PREFETCH_ROWS):
        if ahead < stop_at:
            ahead_row = _upper_bound(indptr, ahead, ahead_row) - 1
            prefetch_span(param, ahead_row * ncols, ncols)
            prefetch_states(states, ahead_row * ncols, ncols)
            ahead = indptr[ahead_row + 1]
    while start < stop_at:
        if ahead < stop_at:
            ahead_row = _upper_bound(indptr, ahead, ahead_row) - 1
            prefetch_span(param, ahead_row * ncols, ncols)
            prefetch_states(states, ahead_row * ncols, ncols)
            ahead = indptr[ahead_row + 1]
        row = _upper_bound(indptr, start, row) - 1
        stop = indptr[row + 1]
        base = row * ncols
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
        start = stop


@driver(parallel=True)
def apply_rows(rule, param, ncols, indptr, indices, data, states, hyper):
    """Apply ``rule`` to the stored entries of a canonical CSR gradient.

    ``param`` and ``states`` are flat views of ``(nrows, ncols)`` arrays; the CSR arrays must
    already be validated and canonical (sorted, unique, in-range column indices), see
    :func:`npoptim.sparse.rowgrad.as_row_gradient`. A row with every column stored is
    streamed as a dense block, without reading its column indices. The cost is
    O(touched rows + entries), whatever the number of rows (see :func:`_update_rows`).

    Above the parallel threshold the stored entries are cut into blocks of ``ROWS_BLOCK``; a
    block updates the rows that start in it.
    """
    nnz = indptr[indptr.size - 1]
    if nnz <= 0:
        return
    if nnz >= parallel_threshold() and nnz > ROWS_BLOCK:
        for block in prange((nnz + ROWS_BLOCK - 1) // ROWS_BLOCK):
            # the first row that starts in this block
            start = indptr[_lower_bound(indptr, block * ROWS_BLOCK)]
            _update_rows(rule, param, ncols, indptr, indices, data, states, hyper, start,
                         min(nnz, (block + 1) * ROWS_BLOCK))
    else:
        _update_rows(rule, param, ncols, indptr, indices, data, states, hyper, indptr[0], nnz)
