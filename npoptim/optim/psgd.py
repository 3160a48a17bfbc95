r"""The pieces PSGD's two Kronecker-factored optimizers share, :mod:`npoptim.optim.kron` (PSGD
Kron) and :mod:`npoptim.optim.psgd_quad` (PSGD-QUAD): the fixed-order products a factor is
applied and fitted with (sums in index order, :func:`~npoptim.kernels.reduction.matmul_of`: no
BLAS, the same bits on every CPU), the spectral-norm lower bound that normalizes a dense
factor's step, the balancing of two or more factors, the probe (or noise) draw of a step, and
each form's factor shapes: which sides a tensor is viewed as and which sides get a dense or a
diagonal factor.

* Kron (kron_torch, pytorch_optimizer): :func:`merged_shape` (a tensor of > 2 sides as the
  matrix of its first or its last side) and :func:`diagonal_sides`.
* QUAD (quad-torch): :func:`squarest_sides` (the split of the sides whose two products are the
  closest to square) and :func:`quad_diagonal_sides` (a side past ``max_size_dense`` or whose
  square is past ``max_skew_dense`` times the size).

The probe of parameter ``index`` at step ``t`` is
:func:`npoptim.kernels.counter_stream.standard_normal` keyed ``(seed, index, t)`` unless the
caller gives one (:func:`probe_for`): Kron's ``step(probes=...)``, QUAD's ``step(noise=...)``.
"""
import math

import numpy as np

from npoptim.kernels.counter_stream import standard_normal
from npoptim.kernels.jit import kernel
from npoptim.kernels.reduction import matmul_of


# ------------------------------------------------------------------- fixed-order pieces
@kernel
def _ordered_sum(x):
    total = x[0]
    for i in range(1, x.size):
        total += x[i]
    return total


def ordered_sum(x):
    """``((x[0] + x[1]) + x[2]) + ...`` of a flat array, summed in its dtype, returned as a
    Python float (exact: the sum's value), as a compiled kernel returns it, so that what the
    callers compute from it (``np.sqrt``, a division) is the same compiled and under
    ``NUMBA_DISABLE_JIT``, where the kernel would return a NumPy float32."""
    return float(_ordered_sum(x))


def norm2(x):
    """``sqrt(sum x^2)`` in order."""
    flat = np.ascontiguousarray(x).reshape(-1)
    return np.sqrt(ordered_sum(flat * flat))


def along(x, axis, matrix):
    """``matrix`` (r x d_axis) applied along ``axis`` of ``x`` (fixed-order products)."""
    moved = np.moveaxis(x, axis, 0)
    rest = moved.shape[1:]
    out = matmul_of(matrix, np.ascontiguousarray(moved).reshape(moved.shape[0], -1))
    return np.moveaxis(out.reshape((matrix.shape[0],) + rest), 0, axis)


def scaled_along(x, axis, vector):
    """``x`` times ``vector`` broadcast along ``axis``."""
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    return x * vector.reshape(shape)


def gram(x, axis):
    """:math:`X_{(i)} X_{(i)}^\\top` over ``axis``."""
    unfolded = np.ascontiguousarray(np.moveaxis(x, axis, 0)).reshape(x.shape[axis], -1)
    return matmul_of(unfolded, np.ascontiguousarray(unfolded.T))


def sum_of_squares_along(x, axis):
    """The diagonal factor's term: ``sum`` of ``x**2`` over every side but ``axis``."""
    unfolded = np.ascontiguousarray(np.moveaxis(x, axis, 0)).reshape(x.shape[axis], -1)
    return np.array([ordered_sum(row * row) for row in unfolded], x.dtype)


def lower_bound(s, rule, scale="max_abs"):
    """A lower bound of the spectral norm of the symmetric ``s`` (the sources' two forms),
    times its max-abs entry as they return it. ``scale="diagonal"`` (QUAD's ``lb``, only with
    ``rule="columns"``): ``s`` is scaled by the largest entry of its diagonal instead, the same
    number for the positive semidefinite ``s`` QUAD gives it."""
    dtype = s.dtype.type
    max_abs = np.max(np.abs(s)) if scale == "max_abs" else np.max(np.diagonal(s))
    if rule == "columns":      # kron_torch's _lb (which it calls only when max_abs > 0)
        if not max_abs > 0:
            return max_abs
        a = s / max_abs
        columns = np.array([ordered_sum(np.ascontiguousarray(a[:, j] * a[:, j]))
                            for j in range(a.shape[1])], s.dtype)
        x = np.ascontiguousarray(a[:, int(np.argmax(columns))])
        x = matmul_of(x.reshape(1, -1), a).reshape(-1)
        x = x / norm2(x)
        x = matmul_of(a, x.reshape(-1, 1)).reshape(-1)
        return norm2(x) * max_abs
    # pytorch_optimizer's norm_lower_bound
    a = s / (max_abs if max_abs > 0 else dtype(1))
    tiny = np.finfo(s.dtype).tiny
    aa = a * a
    columns = np.array([ordered_sum(np.ascontiguousarray(aa[:, j]))
                        for j in range(a.shape[1])], s.dtype)
    rows = np.array([ordered_sum(np.ascontiguousarray(aa[i])) for i in range(a.shape[0])],
                    s.dtype)
    i, j = int(np.argmax(columns)), int(np.argmax(rows))
    if columns[i] > rows[j]:
        x0 = matmul_of(np.ascontiguousarray(a[:, i]).reshape(1, -1), a).reshape(-1)
        x0 = x0 / max(norm2(x0), dtype(tiny))
        bound = norm2(matmul_of(x0.reshape(1, -1), np.ascontiguousarray(a.T)))
    else:
        x1 = matmul_of(a, np.ascontiguousarray(a[j]).reshape(-1, 1)).reshape(-1)
        x1 = x1 / max(norm2(x1), dtype(tiny))
        bound = norm2(matmul_of(np.ascontiguousarray(a.T), x1.reshape(-1, 1)))
    return max_abs * bound


def balance_factors(factors, mean):
    """Rescale the factors (in place) to their geometric mean max-abs norm: ``mean="log"``
    (kron_torch's exp(mean log)) and ``"prod"`` (pytorch_optimizer's prod ** (1/k)) in Python
    floats, ``"log_float32"`` (distributed-kron's exp(mean log) in float32: the norms, their
    logs, the mean, its exp and each factor's multiplier rounded to float32, the logs and exp
    libm's correctly rounded ones where XLA's float32 ``log``/``exp`` may differ by an ulp),
    ``"sqrt"`` (QUAD's two factors, sqrt(n_l n_r)) in the factors' dtype."""
    if mean == "log_float32":
        f32 = np.float32
        norms = [f32(np.max(np.abs(q))) for q in factors]
        total = f32(0)
        for n in norms:
            total = total + f32(math.log(float(n)))
        geometric = f32(math.exp(float(total / f32(len(norms)))))
        for q, n in zip(factors, norms):
            q *= q.dtype.type(geometric / n)
        return
    if mean == "sqrt":
        left, right = factors
        n_left, n_right = np.max(np.abs(left)), np.max(np.abs(right))
        geometric = np.sqrt(n_left * n_right)
        left *= geometric / n_left
        right *= geometric / n_right
        return
    norms = [float(np.max(np.abs(q))) for q in factors]
    if mean == "log":
        geometric = math.exp(sum(math.log(n) for n in norms) / len(norms))
    else:
        geometric = math.prod(norms) ** (1 / len(norms))
    for q, n in zip(factors, norms):
        q *= q.dtype.type(geometric / n)

def probe_for(given, seed, index, step, size, dtype, shape):
    """The probe (or noise) of parameter ``index`` at step ``step``: the caller's array
    ``given`` when not None, else the counter stream's ``standard_normal(seed, index, step,
    size)``; in ``dtype``, viewed as ``shape``."""
    if given is None:
        given = standard_normal(seed, index, step, size)
    return np.asarray(given).astype(dtype).reshape(shape)


# ------------------------------------------------------------------------ shapes: Kron
def merged_shape(shape, merge):
    """kron_torch's view of a tensor of > 2 sides as a matrix (``merge_dims``)."""
    shape = tuple(int(s) for s in shape) or (1,)
    if len(shape) > 2 and merge:
        first = [math.prod(shape[:-1]), shape[-1]]
        second = [shape[0], math.prod(shape[1:])]
        return tuple(first) if first[1] - first[0] <= second[1] - second[0] else tuple(second)
    return shape


def diagonal_sides(shape, group):
    """Per side of the (merged) shape, whether its factor is diagonal."""
    mode = group["memory_save_mode"]
    diag = [False] * len(shape)
    if mode == "all_diag":
        diag = [True] * len(shape)
    elif mode in ("one_diag", "smart_one_diag"):
        largest = int(np.argsort(shape)[::-1][0])
        ordered = sorted(shape)
        if mode == "one_diag" or (len(shape) > 1 and ordered[-1] > ordered[-2]):
            diag[largest] = True
    return [size == 1 or size > group["max_size_triangular"]
            or len(shape) < group["min_ndim_triangular"] or d
            for size, d in zip(shape, diag)]


# ------------------------------------------------------------------------ shapes: QUAD
def squarest_sides(shape):
    """quad-torch's ``merge_dims``: a tensor of < 2 sides as it is (0-D as one element), one
    whose size is its largest side as that vector, a matrix as it is, and a tensor of > 2
    sides as the matrix ``[prod(s[:k]), prod(s[k:])]`` of the first split ``k`` with the
    smallest ratio of the larger product to the smaller."""
    shape = tuple(int(s) for s in shape) or (1,)
    if len(shape) < 2:
        return shape
    if math.prod(shape) == max(shape):
        return (max(shape),)
    if len(shape) == 2:
        return shape
    best_ratio, best_split = math.inf, 1
    for split in range(1, len(shape)):
        left, right = math.prod(shape[:split]), math.prod(shape[split:])
        ratio = max(left, right) / min(left, right)
        if ratio < best_ratio:
            best_ratio, best_split = ratio, split
    return math.prod(shape[:best_split]), math.prod(shape[best_split:])


def quad_diagonal_sides(sides, max_size_dense, max_skew_dense):
    """Per side of QUAD's (merged) sides, whether its factor is diagonal: the one side of a
    vector; a matrix's side larger than ``max_size_dense`` or whose square is larger than
    ``max_skew_dense`` times the matrix's size (by default 1: the longer side of a non-square
    matrix)."""
    if len(sides) < 2:
        return [True] * len(sides)
    size = math.prod(sides)
    return [d > max_size_dense or d * d > max_skew_dense * size for d in sides]


# --------------------------------------------------- shapes: Kron, distributed-kron's merge
def _merge_loss(d, target):
    """distributed-kron's ``dim2loss`` of a merged side ``d`` as the number whose log2 it is
    (an exact rational, powers of Fractions): the loss is 0 at ``target``, ``log2(target/d)`` below it plus
    ``100 log2(target/8/d)`` below ``target/8``, ``10 log2(d/target)`` above it plus
    ``1000 log2(d/(8 target))`` above ``8 target``."""
    from fractions import Fraction
    d = Fraction(d)
    if d < target:
        loss = Fraction(target) / d
        too_small = Fraction(target, 8)
        if d < too_small:
            loss *= Fraction(too_small / d) ** 100
        return loss
    loss = Fraction(d / target) ** 10
    too_large = 8 * Fraction(target)
    if d > too_large:
        loss *= Fraction(d / too_large) ** 1000
    return loss


def _compositions(n):
    """The splits of ``range(n)`` into runs of consecutive sides, in distributed-kron's
    ``_partitions`` order (the first run growing from one side)."""
    if n == 0:
        yield []
        return
    for first in range(1, n + 1):
        for rest in _compositions(n - first):
            yield [first] + rest


def small_dims_sides(shape, target, diagonal):
    """distributed-kron's ``_merge_small_dims``: the sides of ``shape`` (0-D as one element)
    merged into runs of consecutive sides, the runs whose merged sizes have the least total
    ``dim2loss`` (:func:`_merge_loss`; the first such split), each merged side diagonal when
    all its sides are (``diagonal``: per side of ``shape``). distributed-kron sums float
    logarithms; here the sums are compared exactly (as products of rationals), which can
    choose differently only where two splits' float sums tie to rounding."""
    shape = tuple(int(s) for s in shape) or (1,)
    if all(s == 1 for s in shape):
        return (1,), [True]
    best, best_runs = None, None
    for runs in _compositions(len(shape)):
        loss, start = 1, 0
        for length in runs:
            loss *= _merge_loss(math.prod(shape[start:start + length]), target)
            start += length
        if best is None or loss < best:
            best, best_runs = loss, runs
    sides, diag, start = [], [], 0
    for length in best_runs:
        sides.append(math.prod(shape[start:start + length]))
        diag.append(all(diagonal[start:start + length]))
        start += length
    return tuple(sides), diag
