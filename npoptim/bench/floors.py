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

These kernels belong to the benchmark, not to npoptim (generated below: one per state count,
serial and parallel; cached by Numba like any other).
"""
import numba
import numpy as np
from numba import prange

_OPTIONS = dict(cache=True, error_model="numpy")


@numba.njit(parallel=False, **_OPTIONS)
def _dense0_ser(z, p, g):
    for i in range(p.size):
        x = g[i] * z
        p[i] += x


@numba.njit(parallel=False, **_OPTIONS)
def _dense1_ser(z, p, g, s0):
    for i in range(p.size):
        x = g[i] * z
        p[i] += x
        s0[i] += x


@numba.njit(parallel=False, **_OPTIONS)
def _dense2_ser(z, p, g, s0, s1):
    for i in range(p.size):
        x = g[i] * z
        p[i] += x
        s0[i] += x
        s1[i] += x


@numba.njit(parallel=False, **_OPTIONS)
def _dense3_ser(z, p, g, s0, s1, s2):
    for i in range(p.size):
        x = g[i] * z
        p[i] += x
        s0[i] += x
        s1[i] += x
        s2[i] += x


@numba.njit(parallel=False, **_OPTIONS)
def _rows1_ser(z, p, s0, rows, data, width):
    for j in range(rows.size):
        base = rows[j] * width
        for c in range(width):
            x = data[j * width + c] * z
            p[base + c] += x
            s0[base + c] += x


@numba.njit(parallel=False, **_OPTIONS)
def _rows2_ser(z, p, s0, s1, rows, data, width):
    for j in range(rows.size):
        base = rows[j] * width
        for c in range(width):
            x = data[j * width + c] * z
            p[base + c] += x
            s0[base + c] += x
            s1[base + c] += x


@numba.njit(parallel=True, **_OPTIONS)
def _dense0_par(z, p, g):
    for i in prange(p.size):
        x = g[i] * z
        p[i] += x


@numba.njit(parallel=True, **_OPTIONS)
def _dense1_par(z, p, g, s0):
    for i in prange(p.size):
        x = g[i] * z
        p[i] += x
        s0[i] += x


@numba.njit(parallel=True, **_OPTIONS)
def _dense2_par(z, p, g, s0, s1):
    for i in prange(p.size):
        x = g[i] * z
        p[i] += x
        s0[i] += x
        s1[i] += x


@numba.njit(parallel=True, **_OPTIONS)
def _dense3_par(z, p, g, s0, s1, s2):
    for i in prange(p.size):
        x = g[i] * z
        p[i] += x
        s0[i] += x
        s1[i] += x
        s2[i] += x


@numba.njit(parallel=True, **_OPTIONS)
def _rows1_par(z, p, s0, rows, data, width):
    for j in prange(rows.size):
        base = rows[j] * width
        for c in range(width):
            x = data[j * width + c] * z
            p[base + c] += x
            s0[base + c] += x


@numba.njit(parallel=True, **_OPTIONS)
def _rows2_par(z, p, s0, s1, rows, data, width):
    for j in prange(rows.size):
        base = rows[j] * width
        for c in range(width):
            x = data[j * width + c] * z
            p[base + c] += x
            s0[base + c] += x
            s1[base + c] += x


DENSE = {False: (_dense0_ser, _dense1_ser, _dense2_ser, _dense3_ser),
         True: (_dense0_par, _dense1_par, _dense2_par, _dense3_par)}
ROWS = {False: (None, _rows1_ser, _rows2_ser), True: (None, _rows1_par, _rows2_par)}


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
