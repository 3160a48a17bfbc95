"""Learning optimizers by looking: test functions, exact trajectories and a per-step recorder.

* :mod:`npoptim.teaching.problems`: Rosenbrock, Beale, Himmelblau, Rastrigin, the saddle
  :math:`x^2 - y^2`, d2l's ill-conditioned quadratic, a quadratic with chosen eigenvalues, a
  small least-squares and a logistic-regression problem, each with its analytic gradient.
* :mod:`npoptim.teaching.trajectory`: :func:`~npoptim.teaching.trajectory.trajectory` runs a
  real npoptim optimizer on a problem and returns the iterates, losses, learning rates and
  (LAMB/LARS) trust ratios as arrays; :class:`~npoptim.teaching.trajectory.StepRecorder` is the
  per-step recorder it uses.
* :mod:`npoptim.teaching.compare`: :func:`~npoptim.teaching.compare.compare` runs several
  optimizers at the same settings (what ``npoptim plot`` draws).

Everything here needs NumPy only (and npoptim itself); the figures are in
:mod:`npoptim.plotting` (matplotlib, the ``plot`` extra).
"""
from npoptim.teaching.compare import compare
from npoptim.teaching.problems import PROBLEMS, Problem, get_problem
from npoptim.teaching.trajectory import StepRecorder, Trajectory, trajectory

__all__ = ["compare", "PROBLEMS", "Problem", "get_problem", "StepRecorder", "Trajectory", "trajectory"]
