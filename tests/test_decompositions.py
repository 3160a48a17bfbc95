"""npoptim/kernels/decompositions.py: the fixed-order Jacobi eigendecomposition against
LAPACK (``numpy.linalg.eigh``) on symmetric matrices of the sizes the preconditioned
optimizers' golden cases use, definite, indefinite, diagonal, zero and with repeated
eigenvalues; what it refuses; the signs :func:`fixed_signs` gives. The one-sided Jacobi SVD is
checked through GaLore's projector in tests/test_galore.py."""
import numpy as np
import pytest

from npoptim.kernels import decompositions
from npoptim.kernels.decompositions import eigh, fixed_signs, jacobi_eigh


def _matrices(rng, n):
    g = rng.standard_normal((n, n + 3))
    spd = g @ g.T
    yield "definite", spd
    yield "indefinite", spd - 3.0 * np.eye(n)
    yield "diagonal", np.diag(rng.standard_normal(n))
    yield "zero", np.zeros((n, n))
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    repeated = (q * np.repeat([1.0, 2.0], (n + 1) // 2)[:n]) @ q.T
    yield "repeated", (repeated + repeated.T) / 2
    yield "tiny", spd * 2.0 ** -900


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 16, 33])
def test_eigenvalues_and_vectors_agree_with_lapack(n):
    rng = np.random.default_rng(n)
    for kind, a in _matrices(rng, n):
        values, vectors = jacobi_eigh(a)
        ref_values, ref_vectors = np.linalg.eigh(a)
        scale = max(np.max(np.abs(ref_values)), np.finfo(float).tiny)
        # eigenvalues ascending, within a few epsilons of the norm
        assert np.all(np.diff(values) >= 0), kind
        np.testing.assert_allclose(values, ref_values, rtol=0, atol=8e-16 * n * scale,
                                   err_msg=kind)
        # orthonormal vectors that diagonalize a
        np.testing.assert_allclose(vectors.T @ vectors, np.eye(n), rtol=0, atol=4e-15 * n,
                                   err_msg=kind)
        np.testing.assert_allclose(a @ vectors, vectors * values, rtol=0,
                                   atol=4e-15 * n * scale, err_msg=kind)
        if n > 1 and kind in ("definite", "indefinite"):  # distinct: the same vectors
            gap = np.min(np.diff(ref_values)) / scale
            np.testing.assert_allclose(fixed_signs(vectors), fixed_signs(ref_vectors),
                                       rtol=0, atol=1e-14 * n / gap, err_msg=kind)


def test_float32_stays_float32_and_is_accurate_to_its_epsilon():
    rng = np.random.default_rng(5)
    g = rng.standard_normal((12, 15))
    a = g @ g.T
    values, vectors = jacobi_eigh(a.astype(np.float32))
    assert values.dtype == vectors.dtype == np.float32
    ref = np.linalg.eigh(a)[0]
    np.testing.assert_allclose(values, ref, rtol=0, atol=3e-6 * ref.max())


def test_bits_do_not_depend_on_the_input_s_layout():
    rng = np.random.default_rng(6)
    g = rng.standard_normal((9, 9))
    a = g + g.T
    c = jacobi_eigh(np.ascontiguousarray(a))
    f = jacobi_eigh(np.asfortranarray(a))
    for x, y in zip(c, f):
        np.testing.assert_array_equal(x, y)


def test_refuses_what_it_cannot_decompose():
    with pytest.raises(ValueError, match="not symmetric"):
        jacobi_eigh(np.array([[1.0, 2.0], [3.0, 4.0]]))
    with pytest.raises(ValueError, match="square"):
        jacobi_eigh(np.zeros((2, 3)))
    with pytest.raises(FloatingPointError, match="NaN or infinite"):
        jacobi_eigh(np.array([[1.0, np.nan], [np.nan, 1.0]]))
    with pytest.raises(TypeError, match="float32 or float64"):
        jacobi_eigh(np.eye(2, dtype=np.int64))


def test_eigh_takes_lapack_beyond_the_jacobi_side():
    rng = np.random.default_rng(7)
    side = decompositions.JACOBI_MAX_SIDE + 1
    g = rng.standard_normal((side, side))
    a = g + g.T
    for x, y in zip(eigh(a), np.linalg.eigh(a)):
        np.testing.assert_array_equal(x, y)
    small = a[:4, :4]
    for x, y in zip(eigh(small), jacobi_eigh(small)):
        np.testing.assert_array_equal(x, y)


def test_fixed_signs_makes_each_largest_entry_positive():
    v = np.array([[0.6, -0.8], [-0.8, -0.6]])
    np.testing.assert_array_equal(fixed_signs(v), [[-0.6, 0.8], [0.8, 0.6]])
    assert fixed_signs(np.zeros((0, 0))).shape == (0, 0)


# ----------------------------------------------------------------- inverse p-th roots
def _spd(rng, n, floor=1e-3):
    g = rng.standard_normal((n, n + 2))
    a = g @ g.T + floor * np.eye(n)
    return (a + a.T) / 2


@pytest.mark.parametrize("n, p", [(1, 4), (2, 2), (5, 4), (8, 6), (12, 2)])
def test_eigh_inverse_root_inverts_the_power(n, p):
    """X^p A = I for X = A^(-1/p) (the products in float64 with LAPACK only in the check)."""
    a = _spd(np.random.default_rng(n), n)
    x = decompositions.eigh_inverse_root(a, p)
    np.testing.assert_allclose(np.linalg.matrix_power(x, p) @ a, np.eye(n), atol=1e-9)
    values, vectors = np.linalg.eigh(a)
    np.testing.assert_allclose(x, (vectors * values ** (-1.0 / p)) @ vectors.T, rtol=0,
                               atol=1e-12 * np.max(np.abs(x)))


def test_eigh_inverse_root_eps_on_the_eigenvalues():
    """mode='eigenvalues' is the root of A + εI (up to rounding); mode='added' ignores ε."""
    a = _spd(np.random.default_rng(1), 5)
    on_values = decompositions.eigh_inverse_root(a, 4, 0.5, "eigenvalues")
    in_matrix = decompositions.eigh_inverse_root(a + 0.5 * np.eye(5), 4)
    np.testing.assert_allclose(on_values, in_matrix, rtol=0, atol=1e-14)
    np.testing.assert_array_equal(decompositions.eigh_inverse_root(a, 4, 0.5, "added"),
                                  decompositions.eigh_inverse_root(a, 4))
    singular = np.zeros((2, 2))
    assert np.all(np.isfinite(decompositions.eigh_inverse_root(singular, 2, 1e-2,
                                                               "eigenvalues")))


def test_power_iteration_finds_the_largest_eigenvalue():
    a = _spd(np.random.default_rng(2), 7)
    assert np.isclose(decompositions.power_iteration(a), np.linalg.eigvalsh(a)[-1],
                      rtol=1e-10)
    assert decompositions.power_iteration(np.zeros((3, 3))) == 1e-16


@pytest.mark.parametrize("n, p", [(2, 2), (5, 4), (8, 4), (7, 6)])
def test_coupled_newton_root_stops_within_its_tolerance(n, p):
    """The ridged root to the iteration's stopping tolerance: max|X^p A_r - I| <= 1e-3, and
    within n·1e-3/p of the eigen root of the same ridged matrix (the bound of
    npoptim/optim/shampoo.py's docstring)."""
    a = _spd(np.random.default_rng(10 + n), n)
    x = decompositions.coupled_newton_inverse_root(a, p, ridge_epsilon=1e-6)
    ridged = a + 1e-6 * decompositions.power_iteration(a) * np.eye(n)
    assert np.max(np.abs(np.linalg.matrix_power(x, p) @ ridged - np.eye(n))) <= 2e-3
    exact = decompositions.eigh_inverse_root((ridged + ridged.T) / 2, p)
    assert np.max(np.abs(x - exact)) <= n * 1e-3 / p * np.max(np.abs(exact))


def test_coupled_newton_root_of_a_scalar_and_tighter_tolerance():
    x = decompositions.coupled_newton_inverse_root(np.array([[16.0]]), 4, ridge_epsilon=0.0)
    np.testing.assert_allclose(x, [[0.5]], rtol=1e-15)
    a = _spd(np.random.default_rng(3), 6)
    tight = decompositions.coupled_newton_inverse_root(a, 4, 0.0, error_tolerance=1e-12)
    np.testing.assert_allclose(tight, decompositions.eigh_inverse_root(a, 4), rtol=0,
                               atol=1e-10 * np.max(np.abs(tight)))


def test_inverse_roots_same_bits_for_any_layout():
    """The roots' products run in a fixed order: a Fortran-ordered copy gives the same bits."""
    a = _spd(np.random.default_rng(4), 6)
    f = np.asfortranarray(a)
    for root in (decompositions.eigh_inverse_root, decompositions.coupled_newton_inverse_root):
        np.testing.assert_array_equal(root(a, 4), root(f, 4))


# ------------------------------------------------------------------ Householder QR (SOAP)
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (3, 3), (5, 5), (8, 3), (16, 16), (33, 33)])
def test_householder_qr_agrees_with_lapack_signs_included(shape):
    from npoptim.kernels.decompositions import householder_qr
    rng = np.random.default_rng(shape[0] * 100 + shape[1])
    a = rng.standard_normal(shape)
    q, r = householder_qr(a)
    ref_q, ref_r = np.linalg.qr(a)
    n = shape[1]
    assert q.shape == shape and r.shape == (n, n) and q.dtype == a.dtype
    np.testing.assert_array_equal(np.tril(r, -1), 0)
    np.testing.assert_allclose(q.T @ q, np.eye(n), rtol=0, atol=4e-16 * shape[0])
    np.testing.assert_allclose(q @ r, a, rtol=0, atol=4e-16 * shape[0] * np.abs(a).max())
    # the same sign convention as LAPACK's geqrf: the same q and r, not just up to sign
    np.testing.assert_allclose(q, ref_q, rtol=0, atol=1e-13)
    np.testing.assert_allclose(r, ref_r, rtol=0, atol=1e-13)


def test_householder_qr_edge_columns_and_float32():
    from npoptim.kernels.decompositions import householder_qr
    # a column already upper triangular (nothing below the diagonal) takes no reflector,
    # whatever its sign, as LAPACK's dlarfg: q keeps e_0, r keeps the negative entry
    a = np.array([[-2.0, 1.0], [0.0, 3.0]])
    q, r = householder_qr(a)
    ref_q, ref_r = np.linalg.qr(a)
    np.testing.assert_array_equal(q, ref_q)
    np.testing.assert_array_equal(r, ref_r)
    a32 = np.random.default_rng(3).standard_normal((6, 6)).astype(np.float32)
    q32, r32 = householder_qr(a32)
    assert q32.dtype == np.float32 and r32.dtype == np.float32
    np.testing.assert_allclose(q32.astype(float), np.linalg.qr(a32.astype(float))[0],
                               rtol=0, atol=2e-5)
    # layout does not change the bits
    a = np.random.default_rng(4).standard_normal((7, 7))
    np.testing.assert_array_equal(householder_qr(a)[0], householder_qr(np.asfortranarray(a))[0])


def test_householder_qr_refuses_what_it_cannot_factor():
    from npoptim.kernels.decompositions import householder_qr
    with pytest.raises(ValueError, match="m >= n"):
        householder_qr(np.ones((2, 3)))
    with pytest.raises(TypeError, match="float32 or float64"):
        householder_qr(np.ones((2, 2), dtype=np.int64))
    with pytest.raises(FloatingPointError, match="NaN"):
        householder_qr(np.array([[1.0, np.nan], [0.0, 1.0]]))


_MODES = """
import sys
import numpy as np
from npoptim.kernels.decompositions import eigh, householder_qr, jacobi_singular_vectors
rng = np.random.default_rng(3)
out = []
for dtype in (np.float32, np.float64):
    g = rng.standard_normal((2, 5)).astype(dtype)
    low_rank = g.T @ g                  # rank 2: three equal (zero) eigenvalues
    full = rng.standard_normal((5, 5)).astype(dtype)
    for a in (low_rank, (full + full.T) / 2):
        out += list(eigh(a))
    out += list(householder_qr(rng.standard_normal((6, 4)).astype(dtype)))
    out.append(jacobi_singular_vectors(rng.standard_normal((4, 6)).astype(dtype), 3))
sys.stdout.write(b"".join(np.ascontiguousarray(x).tobytes() for x in out).hex())
"""


def test_compiled_and_plain_python_give_the_same_bits_in_float32_and_float64():
    """Under NUMBA_DISABLE_JIT=1 the routines run as plain Python on NumPy scalars, whose
    promotion rules are not Numba's (float32 + 1 is float32 in NumPy, float64 in Numba): the
    rotations' and reflections' constants are float64 in both, so the bits agree, degenerate
    eigenvalues (a rank-deficient statistic, whose eigenvectors any rounding turns) included."""
    import os
    import subprocess
    import sys

    def run(disable):
        env = dict(os.environ, NUMBA_DISABLE_JIT=disable)
        return subprocess.run([sys.executable, "-c", _MODES], env=env, check=True,
                              capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.dirname(__file__))).stdout

    compiled = run("0")
    assert compiled and compiled == run("1")
