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
output is bit-identical whatever the order or the thread count.
"""
from numba.extending import overload

from npoptim.kernels.jit import JIT_OPTIONS, driver


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


# The drivers call ``rule`` directly: passing it on to another jitted function would make Numba
# refuse to cache the kernel that binds the rule ("uses dynamic globals").
@driver
def apply_dense(rule, param, grad, states, hyper):
    """Apply ``rule`` to every element of the flat arrays ``param``, ``grad`` and ``states``."""
    for i in range(param.size):
        param[i], values = rule(param[i], grad[i], load_state(states, i), hyper)
        store_state(states, i, values)


@driver
def apply_rows(rule, param, ncols, indptr, indices, data, states, hyper):
    """Apply ``rule`` to the stored entries of a canonical CSR gradient.

    ``param`` and ``states`` are flat views of ``(nrows, ncols)`` arrays; the CSR arrays must
    already be validated and canonical (sorted, unique, in-range column indices), see
    :func:`npoptim.sparse.rowgrad.as_row_gradient`. A row with every column stored is
    streamed as a dense block, without reading its column indices.
    """
    for row in range(indptr.size - 1):
        start = indptr[row]
        stop = indptr[row + 1]
        full = stop - start == ncols
        for k in range(start, stop):
            i = row * ncols + (k - start if full else indices[k])
            param[i], values = rule(param[i], data[k], load_state(states, i), hyper)
            store_state(states, i, values)
