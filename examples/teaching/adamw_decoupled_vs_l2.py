"""
AdamW's decoupled decay vs Adam's L2 decay
==========================================

``npoptim.Adam(weight_decay=λ)`` adds λθ to the gradient (L2 regularization), which then goes
through Adam's normalization m/√v. ``npoptim.AdamW(weight_decay=λ)`` shrinks the weights
directly, θ ← θ(1 - γλ), outside the normalization (Loshchilov & Hutter). With a zero loss
gradient the difference is stark:

* AdamW: m = v = 0, so θ_k = θ0 (1 - γλ)^k exactly: a slow exponential decay.
* Adam + L2: g = λθ, normalized by √v: each weight moves by at most about γ per step,
  whatever λ and θ are (less once θ, and so g, has shrunk below v's memory of it).
"""

# %%
import numpy as np

import npoptim

lr, wd, steps = 0.01, 0.1, 100
theta0 = np.array([2.0, -1.0, 0.5, 1e-3])

adamw_theta, adam_theta = theta0.copy(), theta0.copy()
adamw = npoptim.AdamW([adamw_theta], lr=lr, weight_decay=wd)
adam = npoptim.Adam([adam_theta], lr=lr, weight_decay=wd)
for _ in range(steps):
    adamw.step([np.zeros(4)])
    adam.step([np.zeros(4)])

# %%
expected = theta0 * (1 - lr * wd) ** steps
print(f"AdamW after {steps} steps: {np.array2string(adamw_theta, precision=6)}")
print(f"θ0 (1-γλ)^k:              {np.array2string(expected, precision=6)}")
print(f"Adam + L2 after {steps}:   {np.array2string(adam_theta, precision=6)}")
np.testing.assert_allclose(adamw_theta, expected, rtol=1e-13)
# AdamW shrinks every weight by the same factor; Adam + L2 moves each by at most ~γ per step,
# so the large weights keep most of their size and the small ones are wiped out
shrink_adamw, shrink_adam = adamw_theta / theta0, adam_theta / theta0
print(f"θ/θ0: AdamW {np.array2string(shrink_adamw, precision=3)}, "
      f"Adam + L2 {np.array2string(shrink_adam, precision=3)}")
assert np.ptp(shrink_adamw) < 1e-12
moved = np.abs(theta0 - adam_theta)
assert np.all(moved <= lr * steps * (1 + 1e-6)) and np.all(moved[:3] > 0.4)
assert shrink_adam[0] > 0.5 and abs(shrink_adam[2]) < 0.01

# %%
# A tenfold λ: AdamW's decay is tenfold; Adam + L2 barely changes (the normalization cancels λ).

# %%
def run(cls, weight_decay):
    theta = theta0.copy()
    opt = cls([theta], lr=lr, weight_decay=weight_decay)
    for _ in range(steps):
        opt.step([np.zeros(4)])
    return theta


for name, cls in (("AdamW", npoptim.AdamW), ("Adam+L2", npoptim.Adam)):
    small, large = (np.abs(theta0[0] - run(cls, w)[0]) for w in (wd / 10, wd))
    print(f"{name:>8}: θ[0] moved {small:.4f} with λ={wd / 10:g}, {large:.4f} with λ={wd:g}")
    if cls is npoptim.AdamW:
        assert large > 9 * small
    else:
        assert large < 1.1 * small
