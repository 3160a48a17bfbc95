"""Touch-only floors: loops that move the bytes an update moves and do no math.

A dense element-wise update with ``k`` state arrays reads the parameter, the gradient and
each state and writes the parameter and each state, in one pass; LAMB and LARS make two
passes (their global norms come before any write), each floor pass reading and writing what
the optimizer's pass does (see ``FLOOR_PASSES`` in :mod:`npoptim.bench.workloads`). A sparse
row update touches the touched rows only (here given as a ready list of rows, the cheapest way
to find them). A floor loop adds ``values * zero`` to every value it writes, with ``zero`` a
run-time 0 the compiler cannot fold away, so the values stay as they were (up to the sign of
a zero).

The floor runs on the optimizer's own arrays: the same memory, with the same page backing
(4 KiB or transparent huge pages, which decides the cost of touching scattered rows by a
factor of several on this machine), so that the ratio compares like with like. It is timed
serial and parallel in the same run as the optimizer; the faster is the floor.

These kernels belong to the benchmark, not to npoptim (generated below from one template per
kind, dense pass or rows, for each count of arrays, serial and parallel, when first asked
for; cached by Numba like any other).
"""
import functools

import numba
import numpy as np
from numba import prange

from npoptim.kernels.drivers import PREFETCH_ROWS, prefetch_span

_OPTIONS = dict(cache=True, error_model="numpy")

# The floor loops, generated from one template per kind (Numba takes no variable number of
# arrays). A dense pass reads some arrays and reads and writes others; when it writes nothing
# it counts the (never) nonzero values instead, a sink the compiler cannot drop. The rows
# loop is the fastest touch of scattered rows found: a full row through slices (vectorized),
# the rows PREFETCH_ROWS ahead prefetched, in blocks of 256 rows (the parallel chunks).
_DENSE_TEMPLATE = """
def {name}(z{arrays}):
    hits = 0
    for i in {loop}({first}.size):
        x = ({reads}) * z
{writes}
    return hits"""
_ROWS_TEMPLATE = """
def {name}(z, p{states}, rows, data, width):
    n = rows.size
    for block in {loop}((n + 255) // 256):
        first = block * 256
        last = min(n, first + 256)
        for j in range(first, min(last, first + PREFETCH_ROWS)):
{prefetch_first}
        for j in range(first, last):
            if j + PREFETCH_ROWS < last:
{prefetch_ahead}
            base = rows[j] * width
            g = data[j * width:(j + 1) * width]
{slices}
            for c in range(width):
                x = g[c] * z
{writes}"""


def _compile(name, source, parallel):
    """Compile generated ``source`` under this file's name, so that Numba's cache, keyed by
    the function's name and this file's stamp, keeps one entry per kernel."""
    namespace = {"prange": prange, "prefetch_span": prefetch_span,
                 "PREFETCH_ROWS": PREFETCH_ROWS}
    exec(compile(source, __file__, "exec"), namespace)
    fn = namespace[name]
    fn.__module__, fn.__qualname__ = __name__, name
    return numba.njit(parallel=parallel, **_OPTIONS)(fn)


@functools.lru_cache(maxsize=None)
def _dense_kernel(n_reads, n_writes, parallel):
    """A pass over ``n_reads`` arrays only read and ``n_writes`` arrays read and written: it
    adds ``x`` (their sum times the run-time zero ``z``) to every written array."""
    name = f"_dense_r{n_reads}_w{n_writes}_{'par' if parallel else 'ser'}"
    reads = [f"r{k}" for k in range(n_reads)]
    writes = [f"w{k}" for k in range(n_writes)]
    lines = [f"        {w}[i] += x" for w in writes] or ["        if x > 1:", "            hits += 1"]
    source = _DENSE_TEMPLATE.format(
        name=name, arrays="".join(f", {a}" for a in reads + writes), first=(reads + writes)[0],
        loop="prange" if parallel else "range",
        reads=" + ".join(f"{r}[i]" for r in reads) or "z", writes="\n".join(lines))
    return _compile(name, source, parallel)


@functools.lru_cache(maxsize=None)
def _rows_kernel(n_states, parallel):
    """The touch of given rows of the param and ``n_states`` states, ``x`` added to each."""
    name = f"_rows{n_states}_{'par' if parallel else 'ser'}"
    arrays = ["p"] + [f"s{k}" for k in range(n_states)]
    source = _ROWS_TEMPLATE.format(
        name=name, states="".join(f", {a}" for a in arrays[1:]),
        loop="prange" if parallel else "range",
        slices="\n".join(f"{' ' * 12}{a}_row = {a}[base:base + width]" for a in arrays),
        prefetch_first="\n".join(f"{' ' * 12}prefetch_span({a}, rows[j] * width, width)"
                                  for a in arrays),
        prefetch_ahead="\n".join(f"{' ' * 16}prefetch_span({a}, rows[j + PREFETCH_ROWS] * "
                                  f"width, width)" for a in arrays),
        writes="\n".join(f"{' ' * 16}{a}_row[c] += x" for a in arrays))
    return _compile(name, source, parallel)


def passes_floor(passes, parallel):
    """A callable: one touch per pass, ``passes`` a list of ``(read, written)`` lists of
    same-size arrays (``read`` only read, ``written`` read and written); their values are
    left as they are."""
    calls = []
    for read, written in passes:
        read = [a.reshape(-1) for a in read]
        written = [a.reshape(-1) for a in written]
        fn = _dense_kernel(len(read), len(written), parallel)
        calls.append((fn, (np.zeros((), (read + written)[0].dtype)[()],) + tuple(read)
                      + tuple(written)))
    return lambda: [fn(*args) for fn, args in calls]


def rows_floor(param, states, rows, data, width, parallel):
    """A callable: one touch of the given rows of ``param`` and ``states`` (1 or 2 states);
    their values are left as they are."""
    fn = _rows_kernel(len(states), parallel)
    arrays = (param.reshape(-1),) + tuple(s.reshape(-1) for s in states)
    rows = np.ascontiguousarray(rows, np.int64)
    data = np.ascontiguousarray(data).reshape(-1)
    zero = param.dtype.type(0)
    return lambda: fn(zero, *arrays, rows, data, width)
