"""torch's CPU orders of vector arithmetic, for results bit for bit with torch's: ``x.add(y,
alpha=...)`` (:func:`axpy`, one fused multiply-add per element), ``dot`` (:func:`dot`, MKL's
``ddot`` order) and ``sum`` (:func:`torch_sum`, ATen's cascade sum). L-BFGS
(:mod:`npoptim.optim.lbfgs`, whose module docstring tells where they match torch's) and the
16-bit Adafactor and L-BFGS (:mod:`npoptim.precision`) add in these orders.
"""
import numpy as np

from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import fma


@kernel
def _axpy(x, alpha, y, out):
    """``out = x + alpha * y`` as torch's ``x.add(y, alpha=alpha)`` computes it on CPU: one
    fused multiply-add per element."""
    for i in range(x.size):
        out[i] = fma(alpha, y[i], x[i])


def axpy(x, alpha, y):
    """``x + alpha * y`` with one rounding per element (torch's ``add`` with ``alpha``)."""
    out = np.empty_like(x)
    _axpy(x, x.dtype.type(alpha), y, out)
    return out


@kernel
def _dot_mkl(x, y):
    """``x . y`` in the order torch's float64 CPU ``dot`` (MKL's ``ddot``) sums it: eight
    running sums (four registers of two lanes) over blocks of eight products, the remaining
    pairs into the first register, a last odd product into its first lane; the registers
    then added in order and the two lanes last. Products and sums rounded separately."""
    n = x.size
    acc = np.zeros((4, 2), x.dtype)
    i = 0
    while i + 8 <= n:
        for r in range(4):
            for lane in range(2):
                acc[r, lane] += x[i + 2 * r + lane] * y[i + 2 * r + lane]
        i += 8
    while i + 2 <= n:
        for lane in range(2):
            acc[0, lane] += x[i + lane] * y[i + lane]
        i += 2
    if i < n:
        acc[0, 0] += x[i] * y[i]
    for lane in range(2):
        for r in range(1, 4):
            acc[0, lane] += acc[r, lane]
    return acc[0, 0] + acc[0, 1]


def dot(x, y):
    """torch's CPU ``dot``: MKL's order for float64 (checked bit for bit below 4096 elements;
    MKL splits longer vectors differently); the same order in float32 arithmetic for float32,
    where MKL's ``sdot`` sums in another (float32 agrees to rounding only). Not BLAS's, whose
    kernel (and so order) OpenBLAS picks by CPU: the same bits on every machine."""
    return x.dtype.type(_dot_mkl(x, y))  # a NumPy scalar, as torch's is a 0-d tensor


@kernel
def _cascade_sum(x, width):
    """torch's CPU ``sum`` of a contiguous vector (``cascade_sum`` in ATen's SumKernel.cpp).

    The vector is read as ``width``-element SIMD vectors (4 doubles or 8 floats, torch's AVX2
    kernel; a vector shorter than one ``width`` is read element by element, width 1); they
    are summed four at a time into four accumulators, which are folded into four cascade
    levels every 16 (or more, for long vectors) rows so that rounding errors stay
    logarithmic; the scalar tail and then the lanes of the result are added last.
    """
    n = x.size
    if n < width:
        width = 1
    return cascade_sum(x, width, n // width)


@kernel
def cascade_sum(x, width, count):
    """:func:`_cascade_sum` of the ``count`` ``width``-element vectors at the start of ``x``
    (as ATen loads them), then of the elements after them (the scalar tail; none for width
    1)."""
    n = x.size
    nrows = 4
    num_levels = 4
    acc = np.zeros((num_levels, nrows, width), x.dtype)
    size = count // nrows  # rows of four vectors
    if size > 0:
        log2 = 1
        while (1 << log2) < size:
            log2 += 1
        level_power = max(4, log2 // num_levels)
        level_step = 1 << level_power
        level_mask = level_step - 1
        i = 0
        while i + level_step <= size:
            for _ in range(level_step):
                for k in range(nrows):
                    for lane in range(width):
                        acc[0, k, lane] += x[(i * nrows + k) * width + lane]
                i += 1
            for j in range(1, num_levels):
                for k in range(nrows):
                    for lane in range(width):
                        acc[j, k, lane] += acc[j - 1, k, lane]
                        acc[j - 1, k, lane] = 0
                if (i & (level_mask << (j * level_power))) != 0:
                    break
        while i < size:
            for k in range(nrows):
                for lane in range(width):
                    acc[0, k, lane] += x[(i * nrows + k) * width + lane]
            i += 1
        for j in range(1, num_levels):
            for k in range(nrows):
                for lane in range(width):
                    acc[0, k, lane] += acc[j, k, lane]
    for v in range(size * nrows, count):  # vectors left over: into the first accumulator
        for lane in range(width):
            acc[0, 0, lane] += x[v * width + lane]
    for k in range(1, nrows):
        for lane in range(width):
            acc[0, 0, lane] += acc[0, k, lane]
    if width == 1:
        return acc[0, 0, 0]
    total = np.zeros(1, x.dtype)[0]
    for t in range(count * width, n):
        total += x[t]
    for lane in range(width):
        total += acc[0, 0, lane]
    return total


def torch_sum(x):
    """torch's CPU ``sum`` of a contiguous vector, in torch's order (single-threaded: up to
    32768 elements torch does not split the reduction between threads)."""
    width = 4 if x.dtype == np.float64 else 8
    return x.dtype.type(_cascade_sum(np.ascontiguousarray(x), width))
