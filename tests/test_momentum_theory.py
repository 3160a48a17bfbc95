"""Heavy-ball theory (npoptim.theory.momentum) against the real npoptim.SGD iterates."""
import math

import numpy as np
import pytest

import npoptim
from npoptim.theory import momentum as theory


def _sgd_iterates(lr, beta, lams, x0, steps):
    x = np.array(x0, np.float64)
    opt = npoptim.SGD([x], lr=lr, momentum=beta)
    out = [x.copy()]
    for _ in range(steps):
        opt.step([np.asarray(lams) * x])
        out.append(x.copy())
    return np.array(out)


def _assert_relative(actual, expected, rtol):
    """Relative to each coordinate's largest |x_j| so far: the iterates pass through zero (and
    in the ripple regime come arbitrarily close to it), and rounding made at the peak stays."""
    scale = np.maximum.accumulate(np.abs(expected), axis=0)
    error = np.abs(actual - expected) / scale
    assert np.all(error <= rtol), error.max()


KAPPA = 100.0
ALPHA_STAR, BETA_STAR = theory.optimal_parameters(1.0, KAPPA)


@pytest.mark.parametrize("lr, beta, lams", [
    (0.1, 0.5, [1.0, 3.0, 10.0]),                       # all three regimes of convergence
    (ALPHA_STAR, BETA_STAR, np.geomspace(1.0, KAPPA, 7)),   # optimum: double and complex roots
    (0.1, 0.5, [(2 + 2 * 0.5) / 0.1 * 0.999]),            # just inside the divergence boundary
    (0.1, 0.5, [(2 + 2 * 0.5) / 0.1 * 1.001]),            # just outside it
    (0.1, 0.9, [(2 + 2 * 0.9) / 0.1 * 0.999, (2 + 2 * 0.9) / 0.1 * 1.001]),
    (0.05, 0.0, [1.0, 39.0, 41.0]),                      # plain gradient descent
])
def test_sgd_momentum_iterates_equal_matrix_powers(lr, beta, lams):
    x0 = np.linspace(1.0, -2.0, len(lams) + 1)[:-1] + 0.1
    steps = 100
    expected = theory.iterates(lr, beta, lams, x0, steps)
    _assert_relative(_sgd_iterates(lr, beta, lams, x0, steps), expected, 1e-12)


def test_boundary_cases_really_are_on_both_sides():
    inside = theory.spectral_radius(0.1, 0.5, 30 * 0.999)
    outside = theory.spectral_radius(0.1, 0.5, 30 * 1.001)
    assert inside < 1 < outside
    assert theory.regime(0.1, 0.5, 30 * 0.999) == "oscillating"
    assert theory.regime(0.1, 0.5, 30 * 1.001) == "divergent"
    # with beta = 0.9 the complex (ripple) band reaches almost to the boundary 3.8
    assert theory.regime(0.1, 0.9, 38 * 0.999) == "ripple"
    assert theory.spectral_radius(1.0, 0.9, theory.divergence_boundary(0.9)) == pytest.approx(1)


def test_spectral_radius_matches_numpy_eigenvalues_and_regimes():
    rng = np.random.default_rng(0)
    for _ in range(200):
        lr, beta, lam = rng.uniform(0, 1), rng.uniform(0, 0.99), rng.uniform(0, 5)
        matrix = theory.iteration_matrix(lr, beta, lam)
        rho = np.max(np.abs(np.linalg.eigvals(matrix)))
        assert theory.spectral_radius(lr, beta, lam) == pytest.approx(rho, rel=1e-7)
        kind = theory.regime(lr, beta, lam)
        if kind == "ripple":
            assert rho == pytest.approx(math.sqrt(beta), rel=1e-7)
        assert (kind == "divergent") == (lr * lam > 2 + 2 * beta)


def test_optimal_rate_and_the_misleading_fitted_rate():
    rate = theory.rate(ALPHA_STAR, BETA_STAR, np.geomspace(1.0, KAPPA, 7))
    root = math.sqrt(KAPPA)
    assert rate == pytest.approx((root - 1) / (root + 1), rel=1e-6)
    # no other constant (lr, beta) nearby does better
    for dl in (0.98, 1.02):
        for db in (0.98, 1.02):
            assert theory.rate(ALPHA_STAR * dl, BETA_STAR * db, [1.0, KAPPA]) > rate
    # gradient descent at its best lr is slower: (kappa-1)/(kappa+1)
    assert theory.rate(2 / (1 + KAPPA), 0.0, [1.0, KAPPA]) == pytest.approx(99 / 101)
    # a rate fitted between steps 100 and 200 is off by ~6e-3 (|x_k| ~ k rho^k at the double
    # eigenvalue), over the first 10 steps by 0.2: compare iterates, not fitted rates
    xs = _sgd_iterates(ALPHA_STAR, BETA_STAR, [1.0, KAPPA], [1.0, 1.0], 200)
    assert 4e-3 < theory.fitted_rate(xs, 100, 200) - rate < 8e-3
    assert theory.fitted_rate(xs, 0, 10) - rate > 0.1


def test_phase_diagram_grid():
    steps, betas = np.linspace(0.05, 4.0, 40), np.linspace(0.0, 0.95, 20)
    rho, kinds = theory.phase_diagram(steps, betas)
    assert rho.shape == kinds.shape == (20, 40)
    for r, beta in enumerate(betas):
        for c, step in enumerate(steps):
            assert (rho[r, c] > 1) == (theory.REGIMES[kinds[r, c]] == "divergent") or \
                abs(step - (2 + 2 * beta)) < 1e-12
