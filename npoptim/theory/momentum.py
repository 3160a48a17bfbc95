r"""Heavy-ball momentum on a quadratic, as a linear iteration (Goh, "Why Momentum Really Works",
Distill 2017; d2l, "Momentum").

On :math:`f(x) = \tfrac12 \lambda x^2` (one eigen-direction of a quadratic) with gradient
:math:`g_k = \lambda x_k`, ``npoptim.SGD(lr=α, momentum=β)`` (and ``torch.optim.SGD``, with
``dampening=0`` and ``nesterov=False``) computes

.. math::

    b_{k+1} = \beta b_k + \lambda x_k, \qquad x_{k+1} = x_k - \alpha b_{k+1},

with the momentum buffer :math:`b_0 = 0` (torch's first step sets :math:`b_1 = g_0`, the same).
So the state :math:`(x_k, b_k)` evolves by a fixed matrix,

.. math::

    \begin{pmatrix} x_{k+1} \\ b_{k+1} \end{pmatrix} = M
    \begin{pmatrix} x_k \\ b_k \end{pmatrix}, \qquad
    M = \begin{pmatrix} 1 - \alpha\lambda & -\alpha\beta \\ \lambda & \beta \end{pmatrix},

    \begin{pmatrix} x_k \\ b_k \end{pmatrix} = M^k \begin{pmatrix} x_0 \\ 0
    \end{pmatrix}.

Its eigenvalues solve :math:`\mu^2 - (1 - \alpha\lambda + \beta)\mu + \beta = 0`; the rate of
convergence is the spectral radius :math:`\rho(M) = \max |\mu|` (the error shrinks like
:math:`\rho^k`). With :math:`0 \le \beta < 1`, the iteration (Goh's phase diagram, in the plane
of :math:`\alpha\lambda` and :math:`\beta`):

* converges monotonically for :math:`\alpha\lambda \le (1-\sqrt\beta)^2` (real positive
  eigenvalues),
* converges with ripples for :math:`(1-\sqrt\beta)^2 < \alpha\lambda < (1+\sqrt\beta)^2`
  (complex eigenvalues, :math:`\rho = \sqrt\beta`),
* converges oscillating in sign for :math:`(1+\sqrt\beta)^2 \le \alpha\lambda < 2 + 2\beta`,
* diverges for :math:`\alpha\lambda > 2 + 2\beta` (at :math:`\alpha\lambda = 2 + 2\beta`,
  :math:`\rho = 1`).

For eigenvalues in :math:`[\mu_{min}, \lambda_{max}]` with condition number
:math:`\kappa = \lambda_{max}/\mu_{min}` the best constant parameters are

.. math::

    \alpha^* = \Bigl(\frac{2}{\sqrt{\lambda_{max}} + \sqrt{\mu_{min}}}\Bigr)^2, \qquad
    \beta^* = \Bigl(\frac{\sqrt\kappa - 1}{\sqrt\kappa + 1}\Bigr)^2,

    \rho = \sqrt{\beta^*} = \frac{\sqrt\kappa - 1}{\sqrt\kappa + 1},

against :math:`(\kappa - 1)/(\kappa + 1)` for gradient descent at its best :math:`\alpha`.
At :math:`(\alpha^*, \beta^*)` the extreme eigenvalues of :math:`M` are double and the inner ones
complex, so :math:`|x_k|` is not a geometric sequence (at a double eigenvalue it goes like
:math:`k\rho^k`): a rate fitted from the iterates is off, by about 6e-3 for :math:`\kappa = 100`
fitted between steps 100 and 200 (and by 0.2 over the first 10 steps). Check the theory by
comparing iterates with :func:`iterates` (:math:`M^k x_0`), not fitted rates.
"""
import math

import numpy as np

__all__ = ["REGIMES", "iteration_matrix", "eigenvalues", "spectral_radius", "rate",
           "divergence_boundary", "regime", "optimal_parameters", "iterates", "fitted_rate",
           "phase_diagram"]

#: Goh's regimes, in order of growing αλ
REGIMES = ("monotonic", "ripple", "oscillating", "divergent")


def iteration_matrix(lr, momentum, eigenvalue):
    """The 2x2 matrix :math:`M` acting on ``(x_k, b_k)`` (see the module docstring).

    Parameters
    ----------
    lr : float
        the step size α.
    momentum : float
        the momentum β.
    eigenvalue : float
        λ, the curvature of the eigen-direction.
    """
    a, b, lam = float(lr), float(momentum), float(eigenvalue)
    return np.array([[1.0 - a * lam, -a * b], [lam, b]])


def eigenvalues(lr, momentum, eigenvalue):
    """The two (possibly complex) eigenvalues of :func:`iteration_matrix`.

    Parameters
    ----------
    lr : float
        the step size α.
    momentum : float
        the momentum β.
    eigenvalue : float
        λ, the curvature of the eigen-direction.
    """
    trace = 1.0 - lr * eigenvalue + momentum
    root = np.sqrt(complex(trace * trace - 4.0 * momentum))
    return np.array([(trace + root) / 2, (trace - root) / 2])


def spectral_radius(lr, momentum, eigenvalue):
    """:math:`\\rho(M)`, the rate of convergence in one eigen-direction (> 1: divergence).

    Parameters
    ----------
    lr : float
        the step size α.
    momentum : float
        the momentum β.
    eigenvalue : float
        λ, the curvature of the eigen-direction.
    """
    return float(np.max(np.abs(eigenvalues(lr, momentum, eigenvalue))))


def rate(lr, momentum, hessian_eigenvalues):
    """The rate on a quadratic: the largest spectral radius over its eigenvalues.

    Parameters
    ----------
    lr : float
        the step size α.
    momentum : float
        the momentum β.
    hessian_eigenvalues : array_like
        the eigenvalues λ_i of the quadratic's Hessian.
    """
    return max(spectral_radius(lr, momentum, lam) for lam in np.ravel(hessian_eigenvalues))


def divergence_boundary(momentum):
    """The :math:`\\alpha\\lambda` above which momentum ``β`` diverges: :math:`2 + 2\\beta`.

    Parameters
    ----------
    momentum : float
        the momentum β.
    """
    return 2.0 + 2.0 * momentum


def regime(lr, momentum, eigenvalue):
    """Goh's regime of ``(αλ, β)``: one of :data:`REGIMES`.

    Parameters
    ----------
    lr : float
        the step size α.
    momentum : float
        the momentum β.
    eigenvalue : float
        λ, the curvature of the eigen-direction.
    """
    step, root = lr * eigenvalue, math.sqrt(momentum)
    if step > divergence_boundary(momentum) or momentum >= 1:
        return "divergent"
    if step <= (1 - root) ** 2:
        return "monotonic"
    if step < (1 + root) ** 2:
        return "ripple"
    return "oscillating"


def optimal_parameters(mu, L):
    """``(α*, β*)`` for eigenvalues in ``[mu, L]`` (see the module docstring).

    Parameters
    ----------
    mu : float
        the smallest eigenvalue μ.
    L : float
        the largest eigenvalue L.
    """
    if not 0 < mu <= L:
        raise ValueError(f"need 0 < mu <= L, got mu={mu!r}, L={L!r}")
    kappa = L / mu
    return ((2.0 / (math.sqrt(L) + math.sqrt(mu))) ** 2,
            ((math.sqrt(kappa) - 1) / (math.sqrt(kappa) + 1)) ** 2)


def iterates(lr, momentum, hessian_eigenvalues, x0, steps):
    """``(steps+1, d)`` array of :math:`x_k` on :math:`\\tfrac12 \\sum_i \\lambda_i x_i^2`
    from ``x0`` (buffer 0): row ``k`` is the first component of :math:`M_i^k (x_{0,i}, 0)` per
    coordinate, each matrix power computed afresh (``np.linalg.matrix_power``).

    Parameters
    ----------
    lr : float
        the step size α.
    momentum : float
        the momentum β.
    hessian_eigenvalues : array_like
        the eigenvalues λ_i of the quadratic's Hessian.
    x0 : array_like
        the start, one coordinate per eigenvalue.
    steps : int
        the number of steps.
    """
    lams = np.ravel(np.asarray(hessian_eigenvalues, np.float64))
    start = np.ravel(np.asarray(x0, np.float64))
    if lams.shape != start.shape:
        raise ValueError("one eigenvalue per coordinate of x0")
    out = np.empty((steps + 1, lams.size))
    for i, (lam, x) in enumerate(zip(lams, start)):
        matrix = iteration_matrix(lr, momentum, lam)
        for k in range(steps + 1):
            out[k, i] = (np.linalg.matrix_power(matrix, k) @ np.array([x, 0.0]))[0]
    return out


def fitted_rate(xs, first=0, last=None):
    """The geometric rate fitted to ``‖x_k‖`` between two steps (what a plot suggests).

    Parameters
    ----------
    xs : numpy.ndarray
        iterates, one row per step (as :func:`iterates` returns).
    first : int, default: 0
        the first step of the fit.
    last : int, optional
        the last step of the fit; None means the last row.
    """
    norms = np.linalg.norm(np.atleast_2d(np.asarray(xs).T).T, axis=-1)
    last = len(norms) - 1 if last is None else last
    return float((norms[last] / norms[first]) ** (1.0 / (last - first)))


def phase_diagram(step_sizes, momenta):
    """Spectral radius and regime on a grid: ``step_sizes`` are values of :math:`\\alpha\\lambda`
    (columns), ``momenta`` values of β (rows). Returns ``(rho, regimes)``, both of shape
    ``(len(momenta), len(step_sizes))``, ``regimes`` holding indices into :data:`REGIMES`.

    Parameters
    ----------
    step_sizes : array_like
        values of αλ (the columns).
    momenta : array_like
        values of β (the rows).
    """
    rho = np.empty((len(momenta), len(step_sizes)))
    kinds = np.empty(rho.shape, np.int64)
    for r, beta in enumerate(momenta):
        for c, step in enumerate(step_sizes):
            rho[r, c] = spectral_radius(step, beta, 1.0)
            kinds[r, c] = REGIMES.index(regime(step, beta, 1.0))
    return rho, kinds
