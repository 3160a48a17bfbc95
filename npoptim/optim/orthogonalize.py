r"""Newton–Schulz orthogonalization: the matrix pushed towards the nearest semi-orthogonal one
(every singular value towards 1, roughly :math:`U \mapsto U(U^\top U)^{-1/2}`), as Muon
(:mod:`npoptim.optim.muon`) and Scion (:mod:`npoptim.optim.scion`) use it.

With :math:`X` the wide orientation of :math:`U` (transposed when it has more rows than
columns), scaled to Frobenius norm 1, each of the :math:`k` iterations with coefficients
:math:`(a, b, c)` is

.. math::

    S = X X^\top,\qquad X \leftarrow a X + (b S + c S^2) X .

In bfloat16 (``ns_dtype="bfloat16"``) it reproduces torch's CPU arithmetic: every product and
sum as torch's backend computes and rounds it (see :mod:`npoptim.optim.muon`'s "Precision" for
the orders and their limits); in a float dtype (``ns_dtype="param"``) every matrix product is
summed in a fixed order (:func:`npoptim.kernels.reduction.matmul`), so the same bits on every
CPU. Two forms of the iteration (``ns_form``): ``"addmm"``, torch's and pytorch_optimizer's,
:math:`bS + cS^2` and :math:`aX + (\cdot)X` each one fused ``addmm`` rounded once;
``"separate"``, Keller Jordan's and the Scion authors', every product, multiple and sum
rounded on its own. Two placements of the norm's floor (``ns_eps_mode``): ``"max"``,
:math:`X/\max(\|X\|_F, \epsilon)`, and ``"added"``, :math:`X/(\|X\|_F + \epsilon)`.
"""
import numpy as np

from npoptim.kernels.bfloat16 import round_to_bfloat16, to_bfloat16
from npoptim.kernels.jit import kernel
from npoptim.kernels.reduction import matmul_of
from npoptim.optim.options import FLOOR_ALIASES

#: The floor ε of the norm, and the coefficients (a, b, c) and number of iterations that
#: torch, Keller Jordan and pytorch_optimizer use by default.
EPS = 1e-7
DEFAULT_A = 3.4445
DEFAULT_B = -4.7750
DEFAULT_C = 2.0315
DEFAULT_NS_STEPS = 5
#: The forms of the iteration (see the module docstring).
NS_FORMS = ("addmm", "separate")


# ------------------------------------------------------------------------------- bfloat16
def sum_rounded_to_float32(x, y):
    """``x + y`` (float64 arrays whose sum is exact in two parts) rounded once to float32.

    Rounding the float64 sum to float32 rounds twice; that differs from rounding the exact sum
    only when the float64 sum is a float32 tie and the float64 rounding error is not zero.
    """
    s = x + y
    back = s - x
    err = (x - (s - back)) + (y - back)  # s + err == x + y exactly (TwoSum)
    r = s.astype(np.float32)
    diff = s - r.astype(np.float64)
    toward = np.nextafter(r, np.where(diff > 0, np.inf, -np.inf).astype(np.float32))
    tie = (diff != 0) & (np.abs(diff) * 2 == np.abs(toward.astype(np.float64) - r))
    fix = tie & (err != 0) & ((err > 0) == (diff > 0))
    return np.where(fix, toward, r)


# torch's CPU bfloat16 matmul: its own loop up to this many multiply-adds (m*n*k), oneDNN above
NATIVE_GEMM_MAX_SIZE = 16 * 16 * 16
FLOAT32_TINY = np.float32(np.finfo(np.float32).tiny)


@kernel
def _dot_native(a, b, out):
    """``out = a @ b`` as torch's own loop sums it (``at::native::cpublas`` ``sum``): float32
    products (exact for bfloat16 inputs) added into four interleaved partial sums, the
    remaining tail into the first, then the four added in order."""
    m, k = a.shape
    n = b.shape[1]
    for i in range(m):
        for j in range(n):
            p0 = p1 = p2 = p3 = np.float32(0.0)
            l = 0
            while l + 4 <= k:
                p0 += a[i, l] * b[l, j]
                p1 += a[i, l + 1] * b[l + 1, j]
                p2 += a[i, l + 2] * b[l + 2, j]
                p3 += a[i, l + 3] * b[l + 3, j]
                l += 4
            while l < k:
                p0 += a[i, l] * b[l, j]
                l += 1
            out[i, j] = ((p0 + p1) + p2) + p3


@kernel
def _dot_onednn(a, b, out, tiny):
    """``out = a @ b`` as oneDNN sums it with the AVX512-BF16 dot-product instruction
    (``vdpbf16ps``): one float32 accumulator, fed by pairs of products, the odd-indexed one
    first, each addition rounded; subnormal inputs and results flushed to zero."""
    m, k = a.shape
    n = b.shape[1]
    zero = np.float32(0.0)
    for i in range(m):
        for j in range(n):
            acc = zero
            for l in range(0, k, 2):
                for t in (l + 1, l):
                    if t < k:
                        x, y = a[i, t], b[t, j]
                        if abs(x) < tiny:
                            x = zero
                        if abs(y) < tiny:
                            y = zero
                        acc += x * y
                        if abs(acc) < tiny:
                            acc = zero
            out[i, j] = acc


def bf16_matmul_float32(a, b):
    """``a @ b`` of bfloat16 matrices, accumulated in float32 in the order torch's CPU backend
    uses for that size; the unrounded float32 result."""
    a = np.ascontiguousarray(a, np.float32)
    b = np.ascontiguousarray(b, np.float32)
    out = np.empty((a.shape[0], b.shape[1]), np.float32)
    if a.shape[0] * b.shape[1] * a.shape[1] <= NATIVE_GEMM_MAX_SIZE:
        _dot_native(a, b, out)
    else:
        _dot_onednn(a, b, out, FLOAT32_TINY)
    return out


def bf16_addmm(c, a, b, beta, alpha):
    """``torch.addmm(c, a, b, beta=beta, alpha=alpha)`` in bfloat16 (``c`` ignored if beta=0):
    ``fma(beta, c, alpha * (a @ b))`` in float32, rounded once to bfloat16."""
    scaled = np.float32(alpha) * bf16_matmul_float32(a, b)
    if beta == 0:
        return round_to_bfloat16(scaled)
    total = sum_rounded_to_float32(np.float64(np.float32(beta)) * c.astype(np.float64),
                                    scaled.astype(np.float64))
    return round_to_bfloat16(total)


def float_addmm(c, a, b, beta, alpha):
    """``beta * c + alpha * (a @ b)`` in the arrays' dtype (``c`` ignored if beta=0); the
    product in a fixed order (:func:`npoptim.kernels.reduction.matmul`), not BLAS's, so the
    same bits on every CPU."""
    product = alpha * matmul_of(a, b)
    return product if beta == 0 else beta * c + product


def zeropower_via_newtonschulz(grad, ns_coefficients, ns_steps, eps, ns_dtype="bfloat16",
                               ns_eps_mode="max", normalized=None, ns_form="addmm"):
    """torch's ``_zeropower_via_newtonschulz``: the orthogonalized ``grad``, bfloat16 values
    (``ns_dtype="param"``: computed in ``grad``'s dtype; ``ns_eps_mode="added"``: divided by
    ``norm + eps``, as optax's ``orthogonalize_via_newton_schulz`` and Keller Jordan's
    ``zeropower_via_newtonschulz5``; ``ns_form="separate"``: each product, multiple and sum
    rounded on its own, Keller Jordan's, see the module docstring). ``normalized``, an array
    of ``grad``'s shape, receives ``grad`` divided by its norm, the iteration's start (what
    torch's in-place ``div_`` leaves in a ``grad`` that is already bfloat16, whose
    ``.bfloat16()`` is no copy)."""
    ns_eps_mode = FLOOR_ALIASES.get(ns_eps_mode, ns_eps_mode)
    if ns_eps_mode not in ("max", "added"):
        raise ValueError(f"ns_eps_mode must be 'max' or 'added', got {ns_eps_mode!r}")
    if ns_form not in NS_FORMS:
        raise ValueError(f"ns_form must be one of {', '.join(map(repr, NS_FORMS))}, got "
                         f"{ns_form!r}")
    a, b, c = ns_coefficients
    if ns_dtype == "bfloat16":
        cast, round_, addmm = to_bfloat16, round_to_bfloat16, bf16_addmm
        # torch's bfloat16 tensor op with a Python number computes in float32 (opmath)
        number = np.float32
    else:
        kind = grad.dtype.type
        cast = round_ = lambda v: np.asarray(v, kind)  # noqa: E731
        addmm = float_addmm
        a, b, c = kind(a), kind(b), kind(c)
        number = kind
    x = cast(grad)
    transposed = grad.shape[0] > grad.shape[1]
    if transposed:
        x = x.T
    # x.div_(x.norm().clamp(min=eps)), every result rounded to bfloat16 (torch)
    frob = round_(np.sqrt(np.sum(np.square(x, dtype=np.float64))))
    if ns_eps_mode == "max":
        x = round_(x / np.maximum(frob, cast(eps)))
    else:  # norm + eps: torch casts the Python number to bfloat16 first, as the clamp does
        x = round_(x / round_(frob + cast(eps)))
    if normalized is not None:
        normalized[...] = x.T if transposed else x
    for _ in range(ns_steps):
        gram = addmm(None, x, x.T, 0.0, 1.0)
        if ns_form == "addmm":
            gram_update = addmm(gram, gram, gram, b, c)
            x = addmm(x, gram_update, x, a, 1.0)
        else:  # B = b * A + (c * A) @ A; X = a * X + B @ X, every result rounded
            gram_update = round_(round_(number(b) * gram)
                                 + addmm(None, round_(number(c) * gram), gram, 0.0, 1.0))
            x = round_(round_(number(a) * x) + addmm(None, gram_update, x, 0.0, 1.0))
    return x.T if transposed else x
