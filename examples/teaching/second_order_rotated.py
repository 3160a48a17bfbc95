"""
Shampoo against Adam on a rotated ill-conditioned problem
=========================================================

Adam divides each element of the gradient by its own running scale: a diagonal
preconditioner, which undoes ill-conditioning only when the curvature's directions are the
coordinate axes. Shampoo keeps, for a matrix parameter, two statistics, :math:`L = \\sum G
G^\\top` and :math:`R = \\sum G^\\top G`, and steps along :math:`L^{-1/4} G R^{-1/4}`: a
Kronecker-factored preconditioner that finds the directions itself.

The loss is a quadratic in a 12 x 8 matrix :math:`W`,

.. math::

    f(W) = \\tfrac12 \\sum_{ij} a_i b_j \\,\\big(U^\\top W V\\big)_{ij}^2,

with :math:`a` and :math:`b` spread evenly in log scale from 1 to 100, so the Hessian
:math:`(V \\operatorname{diag}(b) V^\\top) \\otimes (U \\operatorname{diag}(a) U^\\top)` has
condition number :math:`10^4`. With :math:`U = V = I` the curvature is aligned with the
coordinates; with random rotations :math:`U, V` it is the same problem turned, started from
the turned point :math:`U W_0 V^\\top`.
"""

# %%
import numpy as np

import npoptim

rng = np.random.default_rng(0)
rows, cols, steps = 12, 8, 100
curvature = np.outer(np.geomspace(1.0, 100.0, rows), np.geomspace(1.0, 100.0, cols))
start = rng.standard_normal((rows, cols))


def rotation(n):
    """A random orthogonal matrix (QR of a Gaussian one, signs fixed)."""
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return q * np.sign(np.diag(r))


turned = rotation(rows), rotation(cols)
aligned = np.eye(rows), np.eye(cols)


def run(name, lr, frame):
    """``steps`` steps of optimizer ``name`` in the frame (U, V); the losses and the end."""
    U, V = frame
    W = U @ start @ V.T
    options = dict(start_preconditioning_step=1, preconditioning_compute_steps=1) \
        if name == "Shampoo" else {}
    optimizer = getattr(npoptim, name)([W], lr=lr, **options)
    losses = []
    for _ in range(steps + 1):
        inner = U.T @ W @ V
        losses.append(0.5 * np.sum(curvature * inner ** 2))
        if len(losses) <= steps:
            optimizer.step([U @ (curvature * inner) @ V.T])
    return np.array(losses), W


# %%
# Each optimizer at its best learning rate from one grid, on the turned problem; Shampoo
# computes its roots from step 1 on (``start_preconditioning_step=1``, every step). The two
# learning rates are not on one scale: Shampoo's statistics are sums over all steps, as
# Adagrad's, so its step shrinks as they grow, and its best rate is far larger than Adam's.

# %%
grid = (0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100)
best = {}
for name in ("Adam", "Shampoo"):
    finals = {lr: run(name, lr, turned)[0][-1] for lr in grid}
    best[name] = min(finals, key=finals.get)
    print(f"{name:>8}: best lr {best[name]:g}, loss after {steps} steps {finals[best[name]]:.2e}"
          f" (from {run(name, best[name], turned)[0][0]:.2e})")

results = {(name, where): run(name, best[name], frame) for name in best
           for where, frame in (("aligned", aligned), ("turned", turned))}
for (name, where), (losses, _) in results.items():
    print(f"{name:>8} {where:>8}: loss {losses[-1]:.2e}")

# %%
# Shampoo does not see the turn: its statistics turn with the problem (:math:`L \to U L U^\top`,
# so :math:`L^{-1/4} \to U L^{-1/4} U^\top`), and its iterates are the aligned ones turned, to
# rounding. Adam's are not: on the turned problem it ends far above where it ends on the
# aligned one, and far above Shampoo.

# %%
(U, V) = turned
W_aligned, W_turned = results["Shampoo", "aligned"][1], results["Shampoo", "turned"][1]
gap = np.max(np.abs(U @ W_aligned @ V.T - W_turned)) / np.max(np.abs(start))
adam_aligned, adam_turned = (results["Adam", w][0][-1] for w in ("aligned", "turned"))
shampoo_turned = results["Shampoo", "turned"][0][-1]
print(f"Shampoo: turned run vs the aligned run turned: {gap:.1e} of the start's scale")
print(f"Adam: turned / aligned final loss {adam_turned / adam_aligned:.0f}x; "
      f"Adam / Shampoo on the turned problem {adam_turned / shampoo_turned:.1e}x")
assert gap < 1e-7
assert adam_turned > 10 * adam_aligned
assert shampoo_turned < 1e-3 * adam_turned

# %%
# The four loss curves (matplotlib, the ``plot`` extra).
try:
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for (name, where), (losses, _) in results.items():
        ax.semilogy(losses, label=f"{name}, {where}", linestyle="-" if where == "turned" else ":")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.legend()
    fig.tight_layout()
except ImportError as missing:  # no matplotlib: the numbers above are the example
    print(missing)
