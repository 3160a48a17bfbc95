"""
Adam by hand
============

Adam written out in plain NumPy, line by line from Kingma & Ba's Algorithm 1, next to
``npoptim.Adam`` on a small logistic regression. They agree to the last bits: the same
formula, the same order of operations::

    m ← β1 m + (1-β1) g          v ← β2 v + (1-β2) g²
    θ ← θ - (γ / (1-β1^t)) · m / (√v / √(1-β2^t) + ε)
"""

# %%
import math

import numpy as np

import npoptim
from npoptim.teaching.problems import logistic

problem = logistic(n=64, dim=3, l2=1e-2, seed=0)
lr, beta1, beta2, eps = 0.1, 0.9, 0.999, 1e-8


def adam_by_hand(steps):
    theta = np.zeros(problem.dim)
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    history = []
    for t in range(1, steps + 1):
        g = problem.grad(theta)
        m = m + (1 - beta1) * (g - m)            # torch's lerp form of β1 m + (1-β1) g
        v = beta2 * v + (1 - beta2) * g * g
        bias1, bias2 = 1 - beta1 ** t, 1 - beta2 ** t
        denom = np.sqrt(v) / math.sqrt(bias2) + eps
        theta = theta + (-(lr / bias1) * m) / denom
        history.append(theta.copy())
    return np.array(history)


def adam_npoptim(steps):
    theta = np.zeros(problem.dim)
    opt = npoptim.Adam([theta], lr=lr, betas=(beta1, beta2), eps=eps)
    history = []
    for _ in range(steps):
        opt.step([problem.grad(theta)])
        history.append(theta.copy())
    return np.array(history), opt


# %%
steps = 50
by_hand = adam_by_hand(steps)
library, opt = adam_npoptim(steps)
print("step 1 by hand: ", np.array2string(by_hand[0], precision=6))
print("step 1 npoptim: ", np.array2string(library[0], precision=6))
# The first step is lr * sign(g) (m/√v = g/|g| after bias correction), whatever g's size:
first_grad = problem.grad(np.zeros(problem.dim))
print("lr * sign(g0):  ", np.array2string(-lr * np.sign(first_grad), precision=6))
assert np.allclose(by_hand[0], -lr * np.sign(first_grad), rtol=1e-6)

# %%
difference = np.max(np.abs(by_hand - library) / np.maximum(np.abs(library), 1e-300))
print(f"largest relative difference over {steps} steps: {difference:.1e}")
assert difference <= 1e-14
print(f"loss {problem.loss(np.zeros(3)):.6f} -> {problem.loss(library[-1]):.6f}")
assert problem.loss(library[-1]) < 0.65 * problem.loss(np.zeros(3))
assert opt.state[0]["step"] == steps
