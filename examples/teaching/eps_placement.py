"""
Where ε goes: Adam, SparseAdam and Keras' "ε-hat"
=================================================

Three placements of ε in the same Adam step:

* ``npoptim.Adam`` (= torch.optim.Adam):  θ -= γ/b1 · m / (√v/√b2 + ε)
* ``npoptim.SparseAdam`` (= torch.optim.SparseAdam):  θ -= γ √b2/b1 · m / (√v + ε)
* Keras (and TF's raw ``ApplyAdam``): the same as SparseAdam's, written as
  ``lr_t = lr √b2/b1; θ -= lr_t m / (√v + ε̂)`` — here in plain NumPy.

with b1 = 1-β1^t, b2 = 1-β2^t. The two forms differ only where ε is not small against √v:
tiny gradients, the first steps (b2 is small, so √v/√b2 ≫ √v).
"""

# %%
import math

import numpy as np

import npoptim

lr, beta1, beta2, eps = 1e-3, 0.9, 0.999, 1e-8
rng = np.random.default_rng(0)
grads = [1e-8 * rng.standard_normal(4) for _ in range(10)]   # gradients of ε's size


def run(make, steps=10):
    theta = np.ones(4)
    opt = make([theta])
    for g in grads[:steps]:
        opt.step([g.copy()])
    return theta


def keras_eps_hat(steps=10, eps_hat=eps, per_step=None):
    theta, m, v = np.ones(4), np.zeros(4), np.zeros(4)
    for t, g in enumerate(grads[:steps], start=1):
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        lr_t = lr * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
        e = per_step(t) if per_step else eps_hat
        theta = theta - lr_t * m / (np.sqrt(v) + e)
    return theta


# %%
adam = run(lambda p: npoptim.Adam(p, lr=lr, betas=(beta1, beta2), eps=eps))
sparse = run(lambda p: npoptim.SparseAdam(p, lr=lr, betas=(beta1, beta2), eps=eps))
keras = keras_eps_hat()
moved = {name: 1 - x for name, x in (("Adam", adam), ("SparseAdam", sparse), ("Keras", keras))}
for name, d in moved.items():
    print(f"{name:>10} moved θ by {np.array2string(d, precision=4)}")
ratio = np.abs(moved["SparseAdam"]).sum() / np.abs(moved["Adam"]).sum()
print(f"SparseAdam / Adam step size after 10 steps: {ratio:.2f}")
# ε added to √v (not to the larger √v/√b2) weighs more: a much smaller step
assert ratio < 0.3
np.testing.assert_allclose(moved["Keras"], moved["SparseAdam"], rtol=1e-9)

# %%
# Keras reproduces torch's Adam only if ε̂ is rescaled every step: ε̂_t = ε √(1-β2^t)
# (no constant ε̂ does it).

# %%
rescaled = keras_eps_hat(per_step=lambda t: eps * math.sqrt(1 - beta2 ** t))
gap = np.max(np.abs((1 - rescaled) - moved["Adam"]) / np.abs(moved["Adam"]))
print(f"Keras with per-step ε̂ vs Adam: relative gap {gap:.1e}")
assert gap < 1e-15

# %%
# With gradients far above ε the three agree (ε no longer matters):

# %%
grads = [rng.standard_normal(4) for _ in range(10)]
adam = run(lambda p: npoptim.Adam(p, lr=lr, eps=eps))
sparse = run(lambda p: npoptim.SparseAdam(p, lr=lr, eps=eps))
print(f"large gradients: |Adam - SparseAdam| = {np.max(np.abs(adam - sparse)):.1e}")
assert np.max(np.abs(adam - sparse)) < 1e-8
