"""Deterministic sums and products: the reduction drivers behind the trust ratios (LAMB, LARS,
Fromage, NovoGrad), the step-size estimates (Prodigy, D-Adaptation, DoG, Momo, Mechanic, Polyak
SGD), the gradient norms (DP-SGD's clipping, SAM), and a matrix product in a fixed order
(GaLore's projections, Muon's Newton–Schulz iteration in the parameter's dtype).

:func:`sumsq_pair` applies a rule to every element (as
:func:`~npoptim.kernels.drivers.apply_dense` does) and returns two sums of squares of values
the rule returns, in an order fixed by the array's size alone: bit-identical whatever the
thread count and the parallel threshold (see :mod:`npoptim.kernels.parallel`).
:func:`sum_pair` is the same with plain sums (the values themselves, not their squares).
:func:`grad_sumsq` is the plain ``‖g‖²`` built on it, and :func:`mean_of_squares` the same
order on one thread, divided by the size (a block rule's mean of g², Adam-mini).
:func:`matmul` is ``a @ b`` with each entry summed over the inner index in order, not by BLAS
(whose kernels, and so whose roundings, OpenBLAS picks by CPU).
"""
import numpy as np
from numba import prange

from npoptim.kernels.drivers import load_state, slice_states, store_state
from npoptim.kernels.jit import driver, kernel
from npoptim.kernels.parallel import parallel_threshold
from npoptim.kernels.scalar import constant

#: Elements per block. Blocks are summed independently (on several threads above the parallel
#: threshold), then their sums are combined pairwise.
BLOCK = 1024
#: Partial sums ("lanes") per block: element ``i`` of a block adds into lane ``i % LANES``.
#: Independent lanes let LLVM vectorize the loop without reassociating anything (a single
#: running sum is a chain of dependent adds: latency-bound, and not vectorizable without
#: fastmath). ``BLOCK`` is a multiple of ``LANES``. 16 was the fastest of 16 to 256 measured
#: (AVX-512 machine, 10M elements; 64 lanes ran float64 sums at half the speed).
LANES = 16
#: Blocks per parallel task (each task reuses one lanes array).
_TASK_BLOCKS = 64
_DEPTH = 64  # levels of the pairwise tree: enough for 2**64 blocks


@kernel
def _fold_lanes(lanes):
    """Fold ``lanes`` (shape ``(2, LANES)``) into column 0 by halving: lane ``k`` takes lane
    ``k + w`` for ``w = LANES/2, LANES/4, ..., 1`` (a fixed tree)."""
    width = LANES // 2
    while width > 0:
        for k in range(width):
            lanes[0, k] += lanes[0, k + width]
            lanes[1, k] += lanes[1, k + width]
        width //= 2


@kernel
def _combine_blocks(sums):
    """``(sum of sums[:, 0], sum of sums[:, 1])``, the block sums combined pairwise.

    The blocks are combined as a binary counter combines carries: a tree fixed by the number
    of blocks alone, then the remaining partial sums from the last to the first.
    """
    partial = np.zeros((_DEPTH, 2), sums.dtype)
    level = np.zeros(_DEPTH, np.int64)
    top = 0
    for block in range(sums.shape[0]):
        partial[top, 0] = sums[block, 0]
        partial[top, 1] = sums[block, 1]
        level[top] = 0
        top += 1
        while top > 1 and level[top - 1] == level[top - 2]:
            partial[top - 2, 0] += partial[top - 1, 0]
            partial[top - 2, 1] += partial[top - 1, 1]
            level[top - 2] += 1
            top -= 1
    last = max(top - 1, 0)  # no block gives the zeros of row 0
    sum_a = partial[last, 0]
    sum_b = partial[last, 1]
    for k in range(top - 2, -1, -1):
        sum_a = partial[k, 0] + sum_a
        sum_b = partial[k, 1] + sum_b
    return sum_a, sum_b


@kernel
def _square(x):
    return x * x


@kernel
def _identity(x):
    return x


@driver
def _sum_blocks(rule, term, param, grad, states, hyper, sums, first, last):
    """``sums[block] = (sum term(a), sum term(b))`` over the blocks ``first .. last - 1``.

    In a row of up to LANES elements, element k goes to lane k: the inner loop has no
    dependency between iterations, so it vectorizes (through the 1-d views lanes_a and
    lanes_b: indexing lanes[0, k] there was not vectorized; a row count that is not a
    compile-time constant keeps LLVM from unrolling the loop fully instead of vectorizing it).
    """
    n = param.size
    lanes = np.empty((2, LANES), param.dtype)
    lanes_a, lanes_b = lanes[0], lanes[1]
    for block in range(first, last):
        for k in range(LANES):
            lanes_a[k] = 0
            lanes_b[k] = 0
        stop = min(n, (block + 1) * BLOCK)
        for row in range(block * BLOCK, stop, LANES):
            count = min(LANES, stop - row)
            p = param[row:row + count]
            g = grad[row:row + count]
            s = slice_states(states, row, row + count)
            for k in range(count):
                values, a, b = rule(p[k], g[k], load_state(s, k), hyper)
                store_state(s, k, values)
                lanes_a[k] += term(a)
                lanes_b[k] += term(b)
        _fold_lanes(lanes)
        sums[block, 0] = lanes[0, 0]
        sums[block, 1] = lanes[1, 0]


@driver(parallel=True)
def _reduce_pair(rule, term, param, grad, states, hyper):
    """Apply ``rule`` to every element, store the new states, return
    ``(sum term(a), sum term(b))`` (:func:`sumsq_pair`, :func:`sum_pair`).

    ``rule(p, g, s, h) -> (new_s, a, b)`` follows the signature of an update rule (see
    :mod:`npoptim.kernels.drivers`) but returns the two values to reduce instead of a new
    parameter: ``param`` and ``grad`` are only read (``new_s`` is ``()`` for a pure reduction).

    The summation order depends on the array's size alone, never on the thread count:

    1. the array is cut into blocks of :data:`BLOCK` consecutive elements (the last may be
       shorter);
    2. in a block, element ``i`` (counted from the block's start) adds ``term(a)`` (its
       square, or itself) into lane ``i % LANES``, lanes starting at 0 and taking their
       elements in increasing order;
    3. the lanes are folded by halving (:func:`_fold_lanes`) into the block's sum;
    4. the block sums are combined pairwise (:func:`_combine_blocks`).

    Sums are in the parameter's dtype. Above the parallel threshold, tasks of
    ``_TASK_BLOCKS`` blocks run on several threads; each block's sum is the same either way.
    """
    n = param.size
    # (no array expressions here, such as ``a[:] = 0`` or ``np.zeros``: in a kernel compiled
    # with parallel=True, Numba would turn each into a parallel region of its own)
    sums = np.empty(((n + BLOCK - 1) // BLOCK, 2), param.dtype)
    if n >= parallel_threshold():
        tasks = (sums.shape[0] + _TASK_BLOCKS - 1) // _TASK_BLOCKS
        for task in prange(tasks):
            _sum_blocks(rule, term, param, grad, states, hyper, sums, task * _TASK_BLOCKS,
                        min((task + 1) * _TASK_BLOCKS, sums.shape[0]))
    else:
        _sum_blocks(rule, term, param, grad, states, hyper, sums, 0, sums.shape[0])
    return _combine_blocks(sums)


@driver(parallel=True)
def sumsq_pair(rule, param, grad, states, hyper):
    """Apply ``rule`` to every element, store the new states, return ``(sum a**2, sum b**2)``
    (the order of :func:`_reduce_pair`)."""
    return _reduce_pair(rule, _square, param, grad, states, hyper)


@driver(parallel=True)
def sum_pair(rule, param, grad, states, hyper):
    """As :func:`sumsq_pair`, returning ``(sum a, sum b)``."""
    return _reduce_pair(rule, _identity, param, grad, states, hyper)


@kernel
def grad_term(p, g, s, h):
    """The gradient and a zero: :func:`sumsq_pair` of it is ``(‖g‖², 0)`` (no ``s``, no ``h``)."""
    return (), g, constant(0.0, g)


@kernel
def grad_sumsq(grad):
    """``‖grad‖²`` in the gradient's dtype (deterministic, see :func:`sumsq_pair`)."""
    return sumsq_pair(grad_term, grad, grad, (), ())[0]


@kernel
def mean_of_squares(x):
    """``sum(x**2) / x.size`` of a flat array in its dtype, the sum in :func:`grad_sumsq`'s
    order (bit-identical with it) but on one thread: a helper that a block rule calls on each
    block (Adam-mini's one second moment per block, see
    :func:`npoptim.kernels.drivers.apply_block_rule_dense`), inside a parallel loop over the
    blocks. NaN for an empty array (0/0)."""
    n = x.size
    sums = np.empty(((n + BLOCK - 1) // BLOCK, 2), x.dtype)
    _sum_blocks(grad_term, _square, x, x, (), (), sums, 0, sums.shape[0])
    total = _combine_blocks(sums)[0]
    return total / constant(n, total)


@kernel
def matmul(a, b, out):
    """``out = a @ b`` of C-contiguous matrices of one float dtype, each entry summed over the
    inner index in order, ``((a[i,0] b[0,j] + a[i,1] b[1,j]) + ...)``, every product and sum
    rounded (no fma): the same bits on every CPU. The loop runs over ``j`` innermost, so
    LLVM vectorizes it without reordering any entry's sum."""
    rows, inner = a.shape
    cols = b.shape[1]
    for i in range(rows):
        for j in range(cols):
            out[i, j] = 0
        for k in range(inner):
            aik = a[i, k]
            for j in range(cols):
                out[i, j] += aik * b[k, j]


def matmul_of(a, b):
    """``a @ b`` by :func:`matmul` (a new array in the operands' dtype)."""
    out = np.empty((a.shape[0], b.shape[1]), np.result_type(a, b))
    matmul(np.ascontiguousarray(a, out.dtype), np.ascontiguousarray(b, out.dtype), out)
    return out
