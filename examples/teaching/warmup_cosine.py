"""
Linear warm-up, then cosine decay
=================================

The usual recipe with ``npoptim.lr_scheduler`` (the same classes and numbers as
``torch.optim.lr_scheduler``): ``LinearLR`` from 1% of the rate for ``w`` steps, then
``CosineAnnealingLR`` over the rest, chained by ``SequentialLR``. The rates are checked against
the closed forms::

    warm-up  (t < w):  η0 (0.01 + 0.99 t / w)
    decay    (t ≥ w):  η0 (1 + cos(π (t - w) / (T - w))) / 2
"""

# %%
import math

import numpy as np

import npoptim
from npoptim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR
from npoptim.teaching.problems import least_squares
from npoptim.teaching.trajectory import optimizer_factory, trajectory

base_lr, total, warmup = 0.1, 100, 10


def schedule(opt):
    return SequentialLR(opt, [LinearLR(opt, start_factor=0.01, total_iters=warmup),
                              CosineAnnealingLR(opt, T_max=total - warmup)],
                        milestones=[warmup])


def closed_form(t):
    if t < warmup:
        return base_lr * (0.01 + 0.99 * t / warmup)
    return base_lr * (1 + math.cos(math.pi * (t - warmup) / (total - warmup))) / 2


# %%
problem = least_squares(n=32, dim=2, seed=0)
run = trajectory(optimizer_factory("AdamW", lr=base_lr), problem, steps=total,
                 scheduler_factory=schedule, name="AdamW warm-up + cosine")
flat = trajectory(optimizer_factory("AdamW", lr=base_lr), problem, steps=total,
                  name="AdamW constant")
rates = run.lrs[:, 0]
expected = np.array([closed_form(t) for t in range(total)])
for t in (0, 1, 5, 9, 10, 11, 55, 99):
    print(f"step {t + 1:>3}: lr {rates[t]:.6f}   closed form {expected[t]:.6f}")
gap = np.max(np.abs(rates - expected) / expected)
print(f"largest relative difference from the closed form: {gap:.1e}")
assert gap < 1e-13
assert rates[warmup] == base_lr

# %%
minimum = problem.loss(np.array(problem.minima[0]))
print(f"final loss: warm-up + cosine {run.losses[-1]:.6f}, constant lr {flat.losses[-1]:.6f}, "
      f"minimum {minimum:.6f}")
last_move = {r.name: np.linalg.norm(r.xs[-1] - r.xs[-2]) for r in (run, flat)}
for name, move in last_move.items():
    print(f"{name:>24}: last step moved x by {move:.1e}")
# at the end the decayed rate barely moves x (it froze x near, not at, the minimum); the
# constant rate keeps stepping
assert last_move["AdamW warm-up + cosine"] < 1e-2 * last_move["AdamW constant"]
assert run.losses[-1] - minimum < 0.05 * minimum

# %%
# Both runs' learning rate per step, drawn by ``npoptim.plotting.figures.learning_rates`` (it
# needs matplotlib, the ``plot`` extra; ``npoptim plot least_squares --optimizers AdamW,SGD
# --schedule warmup-cosine --figure lr`` draws the same from the command line).
try:
    from npoptim.plotting import figures
    figures.learning_rates([run, flat])
except ImportError as missing:  # no matplotlib: the numbers above are the example
    print(missing)
