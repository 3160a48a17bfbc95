"""Matrix decompositions in a fixed order: the same bits on every CPU.

LAPACK (``numpy.linalg``, ``scipy.linalg``, torch's ``linalg``) picks its kernels by CPU, and
OpenBLAS's Haswell and SkylakeX kernels round differently: a GaLore trajectory whose SVD came
from LAPACK was 3.5e-16 of the scale apart between the two in float64 (measured). The
preconditioned optimizers (GaLore's projector, Shampoo's roots, SOAP's and SPlus's eigenbases)
take their decompositions from here instead, for matrices up to :data:`JACOBI_MAX_SIDE` on a
side (every golden case's); larger ones go to LAPACK, faster there, whose bits depend on the
CPU and the LAPACK build.

Both routines are Jacobi methods: cyclic sweeps of plane rotations, the pairs (p, q), p < q,
visited in row order, every sum running over its index in order, every operation a correctly
rounded ``+ - * / sqrt``. The input is first scaled by a power of two (exact) so that its
largest entry is in [0.5, 1), and the results scaled back.

- :func:`jacobi_singular_vectors`: the one-sided method (Hestenes 1958) for right singular
  vectors: columns rotated pairwise until orthogonal.
- :func:`jacobi_eigh`: the two-sided method (Jacobi 1846; Golub & Van Loan, *Matrix
  Computations*, 4th ed., section 8.5, ``sym.schur2``) for a symmetric matrix: each rotation
  zeroes one off-diagonal pair. Eigenvalues ascending as LAPACK's ``syevd`` returns them, ties
  in index order. :func:`eigh` is it up to :data:`JACOBI_MAX_SIDE` and LAPACK beyond.

Accuracy: both stop when every pair is orthogonal (one-sided) or every off-diagonal entry is
below the dtype's epsilon times the geometric mean of its two diagonal entries (two-sided);
the eigenvalues are then within a few epsilons of LAPACK's, relative to the matrix's norm,
and an eigenvector within about ``eps * ||A|| / gap`` of LAPACK's (up to sign), ``gap`` the
distance to the nearest other eigenvalue. Vectors are defined up to sign:
:func:`fixed_signs` makes each one's entry of largest magnitude positive (scikit-learn's
``svd_flip``), so that the result does not depend on the routine.
"""
import math

import numpy as np

from npoptim.kernels.jit import kernel
from npoptim.kernels.reduction import matmul_of

#: The largest side of a matrix decomposed here; larger ones take LAPACK.
JACOBI_MAX_SIDE = 128
#: Sweeps after which an iteration stops even if some pair has not converged (a float64
#: matrix converges in about 6 to 10).
JACOBI_MAX_SWEEPS = 60


@kernel
def _jacobi_sweeps(b, w, tolerance, max_sweeps):
    """Rotate the columns of ``b`` (L x k) in place until each pair is orthogonal to
    ``tolerance`` (relative), applying the same rotations to the columns of ``w`` (k x k, the
    identity on entry). Returns the number of sweeps."""
    rows, k = b.shape
    zero = tolerance - tolerance
    one = np.float64(1.0)  # (float64: what Numba makes of float32 + 1; the same in Python)
    two = one + one
    for sweep in range(max_sweeps):
        rotated = False
        for p in range(k - 1):
            for q in range(p + 1, k):
                alpha = zero
                beta = zero
                gamma = zero
                for i in range(rows):
                    alpha += b[i, p] * b[i, p]
                    beta += b[i, q] * b[i, q]
                    gamma += b[i, p] * b[i, q]
                if gamma == zero or abs(gamma) <= tolerance * np.sqrt(alpha * beta):
                    continue
                rotated = True
                zeta = (beta - alpha) / (two * gamma)
                t = one / (abs(zeta) + np.sqrt(one + zeta * zeta))
                if zeta < zero:
                    t = -t
                c = one / np.sqrt(one + t * t)
                s = c * t
                for i in range(rows):
                    bp = b[i, p]
                    bq = b[i, q]
                    b[i, p] = c * bp - s * bq
                    b[i, q] = s * bp + c * bq
                for i in range(k):
                    wp = w[i, p]
                    wq = w[i, q]
                    w[i, p] = c * wp - s * wq
                    w[i, q] = s * wp + c * wq
        if not rotated:
            return sweep + 1
    return max_sweeps


@kernel
def _symmetric_sweeps(a, v, tolerance, floor, max_sweeps):
    """Rotate the symmetric ``a`` (n x n) in place, ``a <- J^T a J``, until every
    off-diagonal entry ``a[p, q]`` is at most ``tolerance * sqrt(|a[p, p] a[q, q]|)`` or at
    most ``floor``, accumulating ``v <- v J`` (the identity on entry). Each rotation sets
    ``a[p, q]`` to zero and moves the diagonal by ``-+ t a[p, q]`` (Golub & Van Loan's
    ``sym.schur2``). Returns the number of sweeps."""
    n = a.shape[0]
    zero = tolerance - tolerance
    one = np.float64(1.0)  # (float64: what Numba makes of float32 + 1; the same in Python)
    two = one + one
    for sweep in range(max_sweeps):
        rotated = False
        for p in range(n - 1):
            for q in range(p + 1, n):
                apq = a[p, q]
                if apq == zero or abs(apq) <= floor:
                    continue
                app = a[p, p]
                aqq = a[q, q]
                if abs(apq) <= tolerance * np.sqrt(abs(app) * abs(aqq)):
                    continue
                rotated = True
                tau = (aqq - app) / (two * apq)
                t = one / (abs(tau) + np.sqrt(one + tau * tau))
                if tau < zero:
                    t = -t
                c = one / np.sqrt(one + t * t)
                s = c * t
                for k in range(n):
                    if k != p and k != q:
                        akp = a[k, p]
                        akq = a[k, q]
                        a[k, p] = c * akp - s * akq
                        a[k, q] = s * akp + c * akq
                        a[p, k] = a[k, p]
                        a[q, k] = a[k, q]
                a[p, p] = app - t * apq
                a[q, q] = aqq + t * apq
                a[p, q] = zero
                a[q, p] = zero
                for k in range(n):
                    vp = v[k, p]
                    vq = v[k, q]
                    v[k, p] = c * vp - s * vq
                    v[k, q] = s * vp + c * vq
        if not rotated:
            return sweep + 1
    return max_sweeps


def _scaled_copy(a):
    """``(a * 2**-e, e)``: a C-ordered copy with its largest entry in [0.5, 1) (exact)."""
    b = np.array(a, order="C", copy=True)
    peak = np.max(np.abs(b)) if b.size else 0.0
    if not peak > 0:
        return b, 0
    exponent = int(np.frexp(peak)[1])
    return np.ldexp(b, -exponent), exponent


def fixed_signs(vectors):
    """``vectors`` (columns) each multiplied by -1 or 1 so that its entry of largest magnitude
    (the first such) is positive."""
    if vectors.size == 0:
        return vectors
    peaks = vectors[np.argmax(np.abs(vectors), axis=0), np.arange(vectors.shape[1])]
    return vectors * np.where(peaks < 0, -1.0, 1.0).astype(vectors.dtype)


def jacobi_singular_vectors(a, count):
    """The first ``count`` right singular vectors of ``a`` (columns of an ``n x count`` array,
    singular values descending, ties in column order), by the one-sided Jacobi method in
    ``a``'s dtype (:func:`_jacobi_sweeps`, tolerance the dtype's epsilon); the accumulated
    rotations are the vectors, the final column norms (summed in order) the singular values.
    Left singular vectors of ``a`` are the right ones of ``a.T``. Signs as the rotations leave
    them (:func:`fixed_signs` fixes them)."""
    b, _ = _scaled_copy(a)
    k = b.shape[1]
    w = np.eye(k, dtype=b.dtype)
    _jacobi_sweeps(b, w, np.finfo(b.dtype).eps, JACOBI_MAX_SWEEPS)
    norms = np.sqrt(np.sum(b * b, axis=0))
    order = np.argsort(-norms, kind="stable")
    return w[:, order[:count]]


def _check_symmetric(a):
    a = np.asarray(a)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"a symmetric matrix must be square, got shape {a.shape}")
    if a.dtype not in (np.float32, np.float64):
        raise TypeError(f"a symmetric matrix must be float32 or float64, got {a.dtype}")
    if not np.all(np.isfinite(a)):
        raise FloatingPointError("a symmetric matrix to decompose has a NaN or infinite entry")
    if not np.array_equal(a, a.T):
        raise ValueError("the matrix is not symmetric (a != a.T)")
    return a


def jacobi_eigh(a):
    """``(values, vectors)`` of the symmetric ``a`` by the two-sided Jacobi method in ``a``'s
    dtype: values ascending (ties in index order), ``vectors[:, i]`` the unit eigenvector of
    ``values[i]``, signs as the rotations leave them (:func:`fixed_signs` fixes them). Refuses
    a matrix that is not square, not float32/float64, not finite or not exactly symmetric
    (symmetrize it first, e.g. ``(a + a.T) / 2``)."""
    a = _check_symmetric(a)
    b, exponent = _scaled_copy(a)
    n = b.shape[0]
    v = np.eye(n, dtype=b.dtype)
    eps = np.finfo(b.dtype).eps
    _symmetric_sweeps(b, v, eps, eps * eps, JACOBI_MAX_SWEEPS)
    values = np.ldexp(np.diagonal(b).copy(), exponent)
    order = np.argsort(values, kind="stable")
    return values[order], v[:, order]


def eigh(a):
    """``(values, vectors)`` of the symmetric ``a``, as :func:`jacobi_eigh` for matrices up to
    :data:`JACOBI_MAX_SIDE` on a side (the same bits on every CPU) and LAPACK's
    (``numpy.linalg.eigh``, bits by CPU) beyond."""
    a = _check_symmetric(a)
    if a.shape[0] <= JACOBI_MAX_SIDE:
        return jacobi_eigh(a)
    return np.linalg.eigh(a)


# ----------------------------------------------------------------- inverse p-th roots
# Shampoo's preconditioners: a symmetric positive semidefinite matrix to the power -1/p, by
# the eigendecomposition above or by a coupled Newton iteration whose products all run in
# the fixed order of npoptim.kernels.reduction.matmul_of.

def eigh_inverse_root(a, root, eps=0.0, mode="added"):
    """``a ** (-1/root)`` of the symmetric ``a`` by :func:`eigh`: ``Q diag(f(λ)) Qᵀ`` with the
    products by :func:`~npoptim.kernels.reduction.matmul_of`. ``mode="added"``:
    ``f(λ) = |λ|^(-1/root)`` (``eps`` is already in the matrix; ``|λ|`` as an SVD's singular
    values, pytorch_optimizer's ``compute_power_svd``); ``mode="eigenvalues"``:
    ``f(λ) = (max(λ, 0) + eps)^(-1/root)`` (Meta's distributed_shampoo adds its epsilon to the
    eigenvalues). Each power is ``math.pow`` of a Python float, as torch's ``pow_``."""
    values, vectors = eigh(a)
    exponent = -1.0 / root
    powered = np.empty_like(values)
    for i, value in enumerate(values.tolist()):
        base = abs(value) if mode == "added" else max(value, 0.0) + eps
        powered[i] = math.pow(base, exponent) if base > 0 else math.inf
    return matmul_of(vectors * powered[None, :], np.ascontiguousarray(vectors.T))


def _power_start(n, dtype):
    """A fixed start vector for :func:`power_iteration`: the fractional parts of
    ``(i + 1)·φ`` minus one half (every entry non-zero, no pattern an eigenvector of a small
    symmetric matrix follows; pytorch_optimizer starts from ``torch.randn``)."""
    golden = 0.6180339887498949
    start = np.empty(n, dtype)
    for i in range(n):
        x = (i + 1) * golden
        start[i] = (x - math.floor(x)) - 0.5
    return start


def power_iteration(a, num_iters=100):
    """The largest eigenvalue of the symmetric positive semidefinite ``a`` as
    pytorch_optimizer's ``power_iteration``: ``num_iters`` products ``v ← Av/‖Av‖`` (the norm
    floored at the dtype's ``tiny``), then ``max(vᵀAv, 1e-16)``; from :func:`_power_start`,
    every product and sum in a fixed order."""
    tiny = np.finfo(a.dtype).tiny
    v = _power_start(a.shape[0], a.dtype)[:, None]
    for _ in range(num_iters):
        av = matmul_of(a, v)
        norm = math.sqrt(float(matmul_of(np.ascontiguousarray(av.T), av)[0, 0]))
        v = av / a.dtype.type(max(norm, tiny))
    quotient = float(matmul_of(np.ascontiguousarray(v.T), matmul_of(a, v))[0, 0])
    return max(quotient, 1e-16)


def optax_power_start(n, dtype):
    """optax-shampoo's start vector for its power iteration: ``n`` draws of
    ``numpy.random.RandomState(1729).uniform(-1, 1)`` (the legacy generator's stream is fixed
    by NumPy's compatibility policy, NEP 19: the same bits on every machine; its first ``n``
    draws are the start of a longer padded one's, as optax-shampoo pads its statistics)."""
    return np.random.RandomState(1729).uniform(-1.0, 1.0, n).astype(dtype)


def optax_power_iteration(a, num_iters=100, error_tolerance=1e-6):
    """The largest eigenvalue of the symmetric positive semidefinite ``a`` as optax-shampoo
    0.0.6's ``power_iteration``: from :func:`optax_power_start`, ``v ← v/‖v‖``, ``s = vᵀAv``,
    ``v ← Av`` until ``|s - s_prev| <= error_tolerance`` (``s_prev`` 0 at first: an absolute
    tolerance) or ``num_iters`` products; returns ``s`` (no floor: the ridge floors it).
    Every product and sum in a fixed order."""
    v = optax_power_start(a.shape[0], a.dtype)[:, None]
    s = 0.0
    for _ in range(num_iters):
        norm = math.sqrt(float(matmul_of(np.ascontiguousarray(v.T), v)[0, 0]))
        v = v / a.dtype.type(norm)
        av = matmul_of(a, v)
        s_new = float(matmul_of(np.ascontiguousarray(v.T), av)[0, 0])
        done = not abs(s_new - s) > error_tolerance
        v, s = av, s_new
        if done:
            break
    return s


def _binary_power(m, p):
    """``m ** p`` by squaring, as optax-shampoo's ``mat_power``: from the lowest bit,
    ``power ← m^(2^k) · power`` where bit k of ``p`` is set (``power`` from the identity)."""
    power = np.eye(m.shape[0], dtype=m.dtype)
    while p > 0:
        if p % 2 == 1:
            power = matmul_of(m, power)
        p //= 2
        if p > 0:
            m = matmul_of(m, m)
    return power


#: The stopping rules of :func:`coupled_newton_inverse_root`.
NEWTON_RULES = ("pytorch_optimizer", "optax")


def coupled_newton_inverse_root(a, root, ridge_epsilon=1e-6, max_iters=100,
                                error_tolerance=1e-3, max_error_ratio=1.2,
                                rule="pytorch_optimizer", relative_ridge=True,
                                return_error=False, padded_side=1):
    """``(a + ridge·I) ** (-1/root)`` by the coupled Newton iteration (Guo & Higham 2006), as
    pytorch_optimizer's ``compute_power_schur_newton`` (``rule="pytorch_optimizer"``) or
    optax-shampoo's ``matrix_inverse_pth_root`` (``rule="optax"``, google-research's): with
    ``z = (1 + p)/(2‖A‖_F)``, ``X₀ = z^(1/p) I``, ``M₀ = zA`` and ``α = -1/p``,

        T = (1 - α) I + α M,   X ← X T,   M ← T^p M

    stopping when ``e = max|M - I|`` is at most ``error_tolerance`` (keeping the new ``X``)
    or grows past ``max_error_ratio`` times the last (keeping the old), or after
    ``max_iters``. The ridge is ``ridge_epsilon·λ_max`` (``relative_ridge``; else
    ``ridge_epsilon``).

    ``rule="pytorch_optimizer"``: λ_max is :func:`power_iteration`'s (floored at 1e-16),
    ``T^p`` by ``p - 1`` products in order, at least one iteration, divergence
    ``e > ratio·e_prev``; a 1 x 1 matrix is ``(a + ridge_epsilon·max(a, 1e-16))^(-1/p)``.
    ``rule="optax"``: λ_max is :func:`optax_power_iteration`'s, floored at 1e-6 in the
    ridge; ``T^p`` by squaring (:func:`_binary_power`); no iteration if ``e₀`` is already
    within the tolerance; divergence ``e/e_prev >= ratio``; a 1 x 1 matrix is
    ``(a + ridge)^(-1/p)`` only if ``padded_side`` is 1: optax-shampoo pads every statistic
    to the largest side among the optimizer's (``[[A, 0], [0, 0]]`` inside its root, the
    same iterates in exact arithmetic), so a 1 x 1 one beside larger ones goes through the
    iteration. With ``return_error``: ``(root, e)``, ``e`` that of the last ``M`` computed
    (0 for the 1 x 1 closed form), as optax-shampoo reports it to its failure check."""
    p = int(root)
    n = a.shape[0]
    dtype = a.dtype.type
    optax = rule == "optax"
    if optax:
        lam = optax_power_iteration(a) if relative_ridge else 1.0
        ridge = ridge_epsilon * max(lam, 1e-6)
    elif n == 1:
        x = float(a[0, 0])
        ridge = ridge_epsilon * max(x, 1e-16) if relative_ridge else ridge_epsilon
    else:
        ridge = ridge_epsilon * (power_iteration(a) if relative_ridge else 1.0)
    if n == 1 and not (optax and padded_side > 1):
        result = np.full((1, 1), math.pow(float(a[0, 0]) + ridge, -1.0 / p), a.dtype)
        return (result, 0.0) if return_error else result
    identity = np.eye(n, dtype=a.dtype)
    g = a + dtype(ridge) * identity
    flat = np.ascontiguousarray(g).reshape(1, -1)
    z = (1 + p) / (2 * math.sqrt(float(matmul_of(flat, np.ascontiguousarray(flat.T))[0, 0])))
    mat_root = identity * dtype(math.pow(z, 1.0 / p))
    mat_m = g * dtype(z)
    alpha = -1.0 / p
    alpha_identity = dtype(1.0 - alpha) * identity
    prev_error = float(np.max(np.abs(mat_m - identity)))
    result, error = mat_root, prev_error
    if not (optax and not prev_error > error_tolerance):
        for _ in range(max_iters):
            mat_m_i = alpha_identity + dtype(alpha) * mat_m
            new_root = matmul_of(mat_root, mat_m_i)
            if optax:
                power = _binary_power(mat_m_i, p)
            else:
                power = mat_m_i
                for _ in range(p - 1):
                    power = matmul_of(power, mat_m_i)
            new_m = matmul_of(power, mat_m)
            error = float(np.max(np.abs(new_m - identity)))
            if optax:
                diverged = not error / prev_error < max_error_ratio
            else:
                diverged = error > prev_error * max_error_ratio
            if diverged or error <= error_tolerance:
                result = mat_root if diverged else new_root
                break
            mat_root, mat_m, prev_error = new_root, new_m, error
            result = mat_root
    return (result, error) if return_error else result


# ------------------------------------------------------------------ Householder QR (SOAP)
@kernel
def _householder_qr(a, q):
    """Reduce ``a`` (m x n, m >= n) in place to R by Householder reflections, column by
    column, and write the first n columns of Q = H_0 H_1 ... H_{n-1} into ``q`` (m x n).
    Each reflector is LAPACK's ``dlarfg`` convention: for the column ``x`` below and at the
    diagonal, ``beta = -sign(x_0) ||x||`` (sign(0) = +1), ``v = (1, x_1..)/(x_0 - beta)``,
    ``tau = (beta - x_0)/beta``; none (tau = 0) when ``x_1..`` is zero. Every sum runs over
    its index in order."""
    m, n = a.shape
    zero = a[0, 0] - a[0, 0]
    one = np.float64(1.0)  # (float64: what Numba makes of float32 + 1; the same in Python)
    taus = np.zeros(n, a.dtype)
    for k in range(n):
        tail = zero
        for i in range(k + 1, m):
            tail += a[i, k] * a[i, k]
        if tail == zero:
            taus[k] = zero
            continue
        alpha = a[k, k]
        beta = np.sqrt(alpha * alpha + tail)
        if alpha >= zero:
            beta = -beta
        taus[k] = (beta - alpha) / beta
        scale = one / (alpha - beta)
        for i in range(k + 1, m):
            a[i, k] *= scale
        a[k, k] = beta
        for j in range(k + 1, n):   # a[k:, j] -= tau v (v . a[k:, j])
            dot = a[k, j]
            for i in range(k + 1, m):
                dot += a[i, k] * a[i, j]
            dot *= taus[k]
            a[k, j] -= dot
            for i in range(k + 1, m):
                a[i, j] -= dot * a[i, k]
    for i in range(m):
        for j in range(n):
            q[i, j] = zero
    for j in range(n):
        q[j, j] = one
    for k in range(n - 1, -1, -1):   # q <- H_k q, the reflectors applied last to first
        tau = taus[k]
        if tau == zero:
            continue
        for j in range(k, n):
            dot = q[k, j]
            for i in range(k + 1, m):
                dot += a[i, k] * q[i, j]
            dot *= tau
            q[k, j] -= dot
            for i in range(k + 1, m):
                q[i, j] -= dot * a[i, k]


def householder_qr(a):
    """``(q, r)``, the reduced QR decomposition of ``a`` (m x n, m >= n, float32 or float64)
    by Householder reflections in a fixed order (:func:`_householder_qr`) in ``a``'s dtype:
    ``q`` (m x n) has orthonormal columns, ``r`` (n x n) is upper triangular, ``q @ r == a``
    up to rounding. The signs are LAPACK's ``geqrf``/``orgqr`` convention (``r``'s diagonal
    entry negative where the column's leading entry is non-negative), so ``q`` matches
    ``numpy.linalg.qr``'s and ``torch.linalg.qr``'s up to rounding, not column signs apart;
    the same bits on every CPU. SOAP's eigenbasis refresh (one power iteration) uses it."""
    a = np.asarray(a)
    if a.ndim != 2 or a.shape[0] < a.shape[1]:
        raise ValueError(f"householder_qr takes an m x n matrix with m >= n, got shape "
                         f"{a.shape}")
    if a.dtype not in (np.float32, np.float64):
        raise TypeError(f"householder_qr takes float32 or float64, got {a.dtype}")
    if not np.all(np.isfinite(a)):
        raise FloatingPointError("a matrix to factor has a NaN or infinite entry")
    work = np.array(a, order="C", copy=True)
    m, n = work.shape
    q = np.empty((m, n), work.dtype)
    if n:
        _householder_qr(work, q)
    return q, np.triu(work[:n, :n])
