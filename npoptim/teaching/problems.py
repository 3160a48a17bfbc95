r"""Test problems for watching optimizers: classic 2-D functions and small fitting problems.

Each :class:`Problem` has the objective ``loss(x)`` and its analytic ``grad(x)`` for a float64
vector ``x``, a start ``x0``, a plotting window ``bounds`` and its known minima. The
2-D functions (with their usual constants):

=====================  ====================================================================
``rosenbrock``         :math:`(1-x)^2 + 100\,(y-x^2)^2`, minimum :math:`(1, 1)`
``beale``              :math:`(1.5-x+xy)^2 + (2.25-x+xy^2)^2 + (2.625-x+xy^3)^2`, minimum
                       :math:`(3, 0.5)`
``himmelblau``         :math:`(x^2+y-11)^2 + (x+y^2-7)^2`, four minima
``rastrigin``          :math:`20 + \sum_i x_i^2 - 10\cos(2\pi x_i)`, minimum :math:`0`
``saddle``             :math:`x^2 - y^2` (no minimum: a stationary point at 0)
``d2l_quadratic``      :math:`0.1 x_1^2 + 2 x_2^2` (d2l, "Gradient Descent" and "Momentum"),
                       start :math:`(-5, -2)`
``quadratic``          :math:`\tfrac12 x^\top H x`, :math:`H = Q \operatorname{diag}(\lambda) Q^\top`
                       with chosen eigenvalues (:func:`quadratic`)
``least_squares``      :math:`\tfrac{1}{2n}\|Aw - b\|^2` on a fixed random design
                       (:func:`least_squares`)
``logistic``           :math:`\tfrac1n \sum_i \log(1 + e^{-y_i a_i^\top w}) +
                       \tfrac{\mu}{2}\|w\|^2` (:func:`logistic`)
=====================  ====================================================================

``layers`` splits ``x`` into consecutive parameter arrays (one per "layer") for the layer-wise
optimizers (LAMB, LARS): :func:`npoptim.teaching.trajectory.trajectory` hands the optimizer one
array per entry.
"""
import math
from dataclasses import dataclass, field, replace

import numpy as np


@dataclass(frozen=True)
class Problem:
    """An objective with its analytic gradient and what a plot needs.

    ``loss(x)`` returns a float, ``grad(x)`` an array of ``x``'s shape; ``bounds`` is
    ``((xmin, xmax), (ymin, ymax))`` for 2-D problems (None otherwise); ``minima`` is a tuple
    of known minimizers; ``lr`` and ``steps`` are defaults that show the optimizers moving
    without diverging for most of them; ``layers`` the sizes of the parameter arrays.

    Parameters
    ----------
    name : str
        the problem's name, as :func:`get_problem` takes it.
    loss : callable
        ``loss(x)``, a float.
    grad : callable
        ``grad(x)``, an array of ``x``'s shape.
    x0 : tuple
        the start.
    bounds : tuple, optional
        ``((xmin, xmax), (ymin, ymax))`` for a 2-D problem.
    minima : tuple, default: ()
        known minimizers.
    lr : float, default: 0.01
        a learning rate that shows most optimizers moving without diverging.
    steps : int, default: 200
        a number of steps to run, likewise.
    layers : tuple, optional
        the sizes of the parameter arrays ``x`` is split into; None means one array.
    description : str, default: ''
        one line on what the problem shows.
    hessian : numpy.ndarray, optional
        the constant Hessian of a quadratic.
    """

    name: str
    loss: object
    grad: object
    x0: tuple
    bounds: tuple = None
    minima: tuple = ()
    lr: float = 1e-2
    steps: int = 200
    layers: tuple = None
    description: str = ""
    hessian: np.ndarray = field(default=None, repr=False, compare=False)

    @property
    def dim(self):
        return len(self.x0)

    @property
    def layer_sizes(self):
        """Sizes of the parameter arrays ``x`` is split into (one array if ``layers`` is None)."""
        return tuple(self.layers) if self.layers is not None else (self.dim,)

    def with_layers(self, layers):
        """The same problem with ``x`` split into parameter arrays of these sizes.

        Parameters
        ----------
        layers : tuple of int
            the sizes of the parameter arrays, summing to the dimension.
        """
        layers = tuple(int(n) for n in layers)
        if sum(layers) != self.dim or min(layers) < 1:
            raise ValueError(f"layers {layers} must be positive sizes summing to {self.dim}")
        return replace(self, layers=layers)

    def loss_grid(self, x, y):
        """The loss on a mesh (``x``, ``y`` from ``np.meshgrid``), for contour plots.

        Parameters
        ----------
        x : numpy.ndarray
            the mesh's first coordinates.
        y : numpy.ndarray
            its second coordinates.
        """
        points = np.stack([np.ravel(x), np.ravel(y)], axis=1)
        return np.array([self.loss(p) for p in points]).reshape(np.shape(x))


# ---------------------------------------------------------------------- the 2-D functions
def _rosenbrock(x):
    return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2


def _rosenbrock_grad(x):
    inner = x[1] - x[0] ** 2
    return np.array([-2 * (1 - x[0]) - 400 * x[0] * inner, 200 * inner])


def _beale_terms(x):
    a, b = x
    return (1.5 - a + a * b, 2.25 - a + a * b ** 2, 2.625 - a + a * b ** 3)


def _beale(x):
    return sum(t ** 2 for t in _beale_terms(x))


def _beale_grad(x):
    a, b = x
    t1, t2, t3 = _beale_terms(x)
    return np.array([2 * t1 * (b - 1) + 2 * t2 * (b ** 2 - 1) + 2 * t3 * (b ** 3 - 1),
                     2 * t1 * a + 4 * t2 * a * b + 6 * t3 * a * b ** 2])


def _himmelblau(x):
    return (x[0] ** 2 + x[1] - 11) ** 2 + (x[0] + x[1] ** 2 - 7) ** 2


def _himmelblau_grad(x):
    p, q = x[0] ** 2 + x[1] - 11, x[0] + x[1] ** 2 - 7
    return np.array([4 * x[0] * p + 2 * q, 2 * p + 4 * x[1] * q])


RASTRIGIN_A = 10.0


def _rastrigin(x):
    x = np.asarray(x)
    return float(RASTRIGIN_A * x.size + np.sum(x ** 2 - RASTRIGIN_A * np.cos(2 * math.pi * x)))


def _rastrigin_grad(x):
    return 2 * x + 2 * math.pi * RASTRIGIN_A * np.sin(2 * math.pi * x)


def _saddle(x):
    return x[0] ** 2 - x[1] ** 2


def _saddle_grad(x):
    return np.array([2 * x[0], -2 * x[1]])


def _d2l(x):
    return 0.1 * x[0] ** 2 + 2 * x[1] ** 2


def _d2l_grad(x):
    return np.array([0.2 * x[0], 4 * x[1]])


# ------------------------------------------------------------------- parametrized problems
def quadratic(eigenvalues=(1.0, 10.0), angle=0.0, x0=None):
    r""":math:`\tfrac12 x^\top H x` with :math:`H` of the given eigenvalues.

    In 2-D, ``angle`` (radians) rotates the eigenvectors away from the axes; in other
    dimensions :math:`H` is diagonal. The default start is all ones (:math:`(-4, 2)` in 2-D).
    """
    eigenvalues = np.asarray(eigenvalues, np.float64)
    if eigenvalues.ndim != 1 or eigenvalues.size < 1:
        raise ValueError("eigenvalues must be a non-empty 1-D sequence")
    if angle and eigenvalues.size != 2:
        raise ValueError("angle rotates a 2-D quadratic only")
    c, s = math.cos(angle), math.sin(angle)
    rotation = np.array([[c, -s], [s, c]]) if eigenvalues.size == 2 else np.eye(eigenvalues.size)
    hessian = rotation @ np.diag(eigenvalues) @ rotation.T
    if x0 is None:
        x0 = (-4.0, 2.0) if eigenvalues.size == 2 else (1.0,) * eigenvalues.size
    top = float(np.max(np.abs(eigenvalues)))
    return Problem(
        name="quadratic", loss=lambda x: 0.5 * float(x @ hessian @ x),
        grad=lambda x: hessian @ x, x0=tuple(float(v) for v in x0),
        bounds=((-5.0, 5.0), (-5.0, 5.0)) if eigenvalues.size == 2 else None,
        minima=((0.0,) * eigenvalues.size,) if np.all(eigenvalues > 0) else (),
        lr=1.0 / top if top > 0 else 0.1, steps=100,
        description=f"1/2 x^T H x, eigenvalues {tuple(eigenvalues.tolist())}", hessian=hessian)


def _sigmoid(z):
    """1 / (1 + e^-z), without overflow for large |z|."""
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def _design(n, dim, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, dim)), rng


def least_squares(n=32, dim=2, noise=0.1, seed=0):
    r""":math:`\tfrac{1}{2n}\|Aw - b\|^2`: ``A`` standard normal (``n`` rows), ``b = A w^* +``
    noise with :math:`w^* = (1, -2, 3, \dots)`; the minimum is the least-squares solution."""
    design, rng = _design(n, dim, seed)
    truth = np.array([(-1) ** i * (i + 1) for i in range(dim)], np.float64)
    target = design @ truth + noise * rng.standard_normal(n)
    solution = np.linalg.lstsq(design, target, rcond=None)[0]

    def loss(w):
        residual = design @ w - target
        return 0.5 * float(residual @ residual) / n

    return Problem(
        name="least_squares", loss=loss, grad=lambda w: design.T @ (design @ w - target) / n,
        x0=(0.0,) * dim, bounds=((-1.0, 3.0), (-4.0, 1.0)) if dim == 2 else None,
        minima=(tuple(solution.tolist()),), lr=0.1, steps=100,
        description=f"least squares, {n} rows, {dim} features",
        hessian=design.T @ design / n)


def logistic(n=64, dim=2, l2=1e-2, seed=0):
    r"""Logistic regression with an L2 term: labels :math:`y_i = \pm 1` drawn from the model
    :math:`w^* = (2, -1, \dots)` on a standard-normal design; strongly convex (``l2`` > 0)."""
    design, rng = _design(n, dim, seed)
    truth = np.array([2.0 if i == 0 else -1.0 for i in range(dim)])
    labels = np.where(rng.random(n) < _sigmoid(design @ truth), 1.0, -1.0)

    def loss(w):
        margins = labels * (design @ w)
        return float(np.mean(np.logaddexp(0.0, -margins))) + 0.5 * l2 * float(w @ w)

    def grad(w):
        margins = labels * (design @ w)
        return -design.T @ (labels * _sigmoid(-margins)) / n + l2 * w

    return Problem(
        name="logistic", loss=loss, grad=grad, x0=(0.0,) * dim,
        bounds=((-1.0, 4.0), (-3.0, 2.0)) if dim == 2 else None, lr=0.5, steps=200,
        description=f"logistic regression, {n} rows, {dim} features, l2={l2}")


# --------------------------------------------------------------------------- the registry
def _fixed(name, loss, grad, x0, bounds, minima, lr, steps, description):
    return lambda: Problem(name=name, loss=loss, grad=grad, x0=x0, bounds=bounds,
                           minima=minima, lr=lr, steps=steps, description=description)


#: name -> function returning the :class:`Problem` (parametrized ones with their defaults)
PROBLEMS = {
    "rosenbrock": _fixed("rosenbrock", _rosenbrock, _rosenbrock_grad, (-1.5, 2.0),
                         ((-2.0, 2.0), (-1.0, 3.0)), ((1.0, 1.0),), 2e-3, 1000,
                         "Rosenbrock (1-x)^2 + 100 (y-x^2)^2"),
    "beale": _fixed("beale", _beale, _beale_grad, (1.0, 1.5), ((-4.5, 4.5), (-4.5, 4.5)),
                    ((3.0, 0.5),), 1e-2, 500, "Beale"),
    "himmelblau": _fixed("himmelblau", _himmelblau, _himmelblau_grad, (0.0, 0.0),
                         ((-5.0, 5.0), (-5.0, 5.0)),
                         ((3.0, 2.0), (-2.805118, 3.131312), (-3.779310, -3.283186),
                          (3.584428, -1.848126)), 1e-2, 300, "Himmelblau"),
    "rastrigin": _fixed("rastrigin", _rastrigin, _rastrigin_grad, (-2.0, 3.5),
                        ((-5.12, 5.12), (-5.12, 5.12)), ((0.0, 0.0),), 1e-3, 500,
                        "Rastrigin 20 + sum x^2 - 10 cos(2 pi x)"),
    "saddle": _fixed("saddle", _saddle, _saddle_grad, (-1.0, 1e-3), ((-1.5, 1.5), (-1.5, 1.5)),
                     (), 0.05, 100, "saddle x^2 - y^2"),
    "d2l_quadratic": _fixed("d2l_quadratic", _d2l, _d2l_grad, (-5.0, -2.0),
                            ((-5.5, 1.0), (-3.0, 1.0)), ((0.0, 0.0),), 0.4, 20,
                            "d2l's ill-conditioned 0.1 x1^2 + 2 x2^2"),
    "quadratic": quadratic,
    "least_squares": least_squares,
    "logistic": logistic,
}


def get_problem(name):
    """The problem called ``name`` (parametrized ones with their default parameters).

    Parameters
    ----------
    name : str
        a name of :data:`PROBLEMS`.
    """
    if name not in PROBLEMS:
        raise KeyError(f"unknown problem {name!r}; choose from {', '.join(PROBLEMS)}")
    return PROBLEMS[name]()
