"""Touch-only floors: loops that move the bytes an update moves and do no math.

A dense update with ``k`` state arrays reads the parameter, the gradient and each state and
writes the parameter and each state; a sparse row update does the same for the touched rows
only (here given as a ready list of rows, the cheapest way to find them). The floor loop does
exactly that: it adds ``gradient * zero`` to every value it writes, with ``zero`` a run-time
0 the compiler cannot fold away, so the values stay as they were (up to the sign of a zero).

The floor runs on the optimizer's own arrays: the same memory, with the same page backing
(4 KiB or transparent huge pages, which decides the cost of touching scattered rows by a
factor of several on this machine), so that the ratio compares like with like. It is timed
serial and parallel in the same run as the optimizer; the faster is the floor.

These kernels belong to the benchmark, not to npoptim (generated below from one template per
kind, dense or rows: one per state count, serial and parallel; cached by Numba like any
other).
"""
import numba
import numpy as np
from numba import prange

from npoptim.kernels.drivers import PREFETCH_ROWS, prefetch_span

_OPTIONS = dict(cache=True, error_model="numpy")

# The floor loops, one template per kind: the loop, and where its writes go (their indent and
# the element they write), one line per array written (the param and each state). The rows
# loop is the fastest touch of scattered rows found: a full row through slices (vectorized),
# the rows PREFETCH_ROWS ahead prefetched, in blocks of 256 rows (the parallel chunks).
_TEMPLATES = {
    "dense": ("""
def {name}(z, p, g{states}):
    for i in {loop}(p.size):
        x = g[i] * z
{writes}""", 8, "i"),
    "rows": ("""
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
{writes}""", 16, "c"),
}


def _floor_kernel(kind, n_states, parallel):
    """The floor loop of ``kind`` over ``n_states`` state arrays: it adds ``x`` (a value times
    the run-time zero ``z``) to the param and to every state. The source is generated (Numba
    takes no variable number of arrays) and compiled under this file's name, so that Numba's
    cache, keyed by the function's name and this file's stamp, keeps one entry per kernel."""
    template, indent, at = _TEMPLATES[kind]
    name = f"_{kind}{n_states}_{'par' if parallel else 'ser'}"
    states = [f"s{k}" for k in range(n_states)]
    arrays = ["p"] + states
    slices = "\n".join(f"{' ' * 12}{a}_row = {a}[base:base + width]" for a in arrays)
    if kind == "rows":
        arrays = [f"{a}_row" for a in arrays]
    source = template.format(
        name=name, states="".join(f", {s}" for s in states),
        loop="prange" if parallel else "range", slices=slices,
        prefetch_first="\n".join(f"{' ' * 12}prefetch_span({a}, rows[j] * width, width)"
                                  for a in ["p"] + states),
        prefetch_ahead="\n".join(f"{' ' * 16}prefetch_span({a}, rows[j + PREFETCH_ROWS] * "
                                  f"width, width)" for a in ["p"] + states),
        writes="\n".join(f"{' ' * indent}{a}[{at}] += x" for a in arrays))
    namespace = {"prange": prange, "prefetch_span": prefetch_span,
                 "PREFETCH_ROWS": PREFETCH_ROWS}
    exec(compile(source, __file__, "exec"), namespace)
    fn = namespace[name]
    fn.__module__, fn.__qualname__ = __name__, name
    return numba.njit(parallel=parallel, **_OPTIONS)(fn)


DENSE = {parallel: tuple(_floor_kernel("dense", k, parallel) for k in range(4))
         for parallel in (False, True)}
ROWS = {parallel: (None,) + tuple(_floor_kernel("rows", k, parallel) for k in (1, 2))
        for parallel in (False, True)}


def dense_floor(param, grad, states, parallel):
    """A callable: one touch of ``param``, ``grad`` and the ``states`` arrays (0 to 3);
    their values are left as they are."""
    fn = DENSE[parallel][len(states)]
    arrays = (param.reshape(-1), grad.reshape(-1)) + tuple(s.reshape(-1) for s in states)
    zero = param.dtype.type(0)
    return lambda: fn(zero, *arrays)


def rows_floor(param, states, rows, data, width, parallel):
    """A callable: one touch of the given rows of ``param`` and ``states`` (1 or 2 states);
    their values are left as they are."""
    fn = ROWS[parallel][len(states)]
    arrays = (param.reshape(-1),) + tuple(s.reshape(-1) for s in states)
    rows = np.ascontiguousarray(rows, np.int64)
    data = np.ascontiguousarray(data).reshape(-1)
    zero = param.dtype.type(0)
    return lambda: fn(zero, *arrays, rows, data, width)
