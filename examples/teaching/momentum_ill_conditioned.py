"""
Momentum on an ill-conditioned quadratic
========================================

d2l's f(x) = 0.1 x1² + 2 x2² (eigenvalues 0.2 and 4, condition number 20). Gradient descent
must keep αλ < 2 for the steep direction, so the flat one crawls. Heavy-ball momentum
(``npoptim.SGD(momentum=β)``) is a 2x2 linear iteration per direction
(``npoptim.theory.momentum``); its rate is the spectral radius of that matrix, and the real
optimizer's iterates equal the matrix powers applied to the start.
"""

# %%
import numpy as np

from npoptim.teaching.problems import get_problem
from npoptim.teaching.trajectory import optimizer_factory, trajectory
from npoptim.theory import momentum as theory

problem = get_problem("d2l_quadratic")
eigenvalues = (0.2, 4.0)
steps = 40
alpha_star, beta_star = theory.optimal_parameters(*eigenvalues)
settings = {"GD, lr 0.4": (0.4, 0.0), "GD, best lr 2/(μ+L)": (2 / sum(eigenvalues), 0.0),
            "momentum 0.5, lr 0.4": (0.4, 0.5),
            f"optimal lr {alpha_star:.3f}, β {beta_star:.3f}": (alpha_star, beta_star)}

# %%
results = {}
for label, (lr, beta) in settings.items():
    run = trajectory(optimizer_factory("SGD", lr=lr, momentum=beta), problem, steps=steps,
                     name=label)
    predicted = theory.iterates(lr, beta, eigenvalues, problem.x0, steps)
    scale = np.maximum.accumulate(np.abs(predicted), axis=0)
    error = np.max(np.abs(run.xs - predicted) / scale)
    rate = theory.rate(lr, beta, eigenvalues)
    results[label] = (run, rate)
    print(f"{label:>30}: rate {rate:.4f}  |x_40| {np.linalg.norm(run.xs[-1]):.2e}  "
          f"vs M^k x0: {error:.0e}")
    assert error <= 1e-12

# %%
rates = {label: rate for label, (_, rate) in results.items()}
assert rates["GD, best lr 2/(μ+L)"] == min(r for k, r in rates.items() if k.startswith("GD"))
best = min(rates, key=rates.get)
print(f"fastest: {best}; (√κ-1)/(√κ+1) = {(np.sqrt(20) - 1) / (np.sqrt(20) + 1):.4f}")
assert best.startswith("optimal")
assert abs(rates[best] - (np.sqrt(20) - 1) / (np.sqrt(20) + 1)) < 1e-6
assert np.linalg.norm(results[best][0].xs[-1]) < 1e-4 < np.linalg.norm(
    results["GD, lr 0.4"][0].xs[-1])

# %%
# The four paths on the contours, drawn by ``npoptim.plotting.figures.paths`` (it needs
# matplotlib, the ``plot`` extra; ``npoptim plot d2l_quadratic --optimizers SGD --figure paths``
# draws the same from the command line).
try:
    from npoptim.plotting import figures
    figures.paths(problem, [run for run, _ in results.values()])
except ImportError as missing:  # no matplotlib: the numbers above are the example
    print(missing)
