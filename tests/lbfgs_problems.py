"""The problems LBFGS is cross-checked on, and npoptim's side of a run (no torch needed).

Both optimizers minimize the same objective, computed by the same NumPy code on the current
parameter values (params of SHAPES, the flat vector has 42 entries): a coupled
quadratic-plus-quartic whose target drifts with the outer step (so every step has work to
do), and a Rosenbrock function. :mod:`test_lbfgs` compares with torch live;
:mod:`test_cpu_orders` with torch's runs as recorded on each kind of CPU.
"""
import numpy as np

import npoptim

SHAPES = [(5,), (3, 4), (2, 3, 4), (1,)]
OBJECTIVES = ["drifting_quartic", "rosenbrock"]
# other orders to list the params to torch in (see torch_trajectory)
REORDERINGS = ([3, 2, 1, 0], [1, 2, 3, 0], [2, 0, 3, 1])
# how far torch's own reorderings may spread before the runs are chaos, not rounding
CHAOS = 1e-6


def drifting_quartic(params, k):
    """0.5 sum w (x - c_k)^2 + 0.1 sum x^4 + 0.2 sum x_i x_{i+1}, on the flat vector."""
    x = np.concatenate([p.reshape(-1) for p in params])
    dtype = x.dtype.type
    i = np.arange(x.size)
    w = (0.5 + (i % 5) * 0.6).astype(x.dtype)
    c = (0.8 * np.sin(0.7 * i + 0.9 * k)).astype(x.dtype)
    r = x - c
    loss = (dtype(0.5) * np.sum(w * r * r) + dtype(0.1) * np.sum(x ** 4)
            + dtype(0.2) * np.sum(x[:-1] * x[1:]))
    g = w * r + dtype(0.4) * x ** 3
    g[:-1] += dtype(0.2) * x[1:]
    g[1:] += dtype(0.2) * x[:-1]
    return float(loss), split(g, params)


def rosenbrock(params, k):
    """sum 100 (x_{i+1} - x_i^2)^2 + (1 - x_i)^2, scaled by 1/100, on the flat vector."""
    x = np.concatenate([p.reshape(-1) for p in params])
    dtype = x.dtype.type
    a = x[1:] - x[:-1] ** 2
    b = dtype(1) - x[:-1]
    loss = np.sum(a * a) + dtype(0.01) * np.sum(b * b)
    g = np.zeros_like(x)
    g[1:] += dtype(2) * a
    g[:-1] += dtype(-4) * x[:-1] * a - dtype(0.02) * b
    return float(loss), split(g, params)


def wavy(params, k):
    """0.05 |x|^2 + 0.3 sum sin(2 x_i + i): nonconvex, so fixed steps meet pairs with
    y.s < 0, which optax keeps and torch drops (the optax flavor's tests)."""
    x = flat(params)
    i = np.arange(x.size)
    loss = 0.05 * np.sum(x * x) + 0.3 * np.sum(np.sin(2 * x + i))
    return float(loss), split(0.1 * x + 0.6 * np.cos(2 * x + i), params)


def split(flat_grad, params):
    out, offset = [], 0
    for p in params:
        out.append(flat_grad[offset:offset + p.size].reshape(p.shape).copy())
        offset += p.size
    return out


def start_params(dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [(0.5 * rng.standard_normal(s)).astype(dtype) for s in SHAPES]


def objective(name):
    return {"drifting_quartic": drifting_quartic, "rosenbrock": rosenbrock}[name]


def flat(params):
    return np.concatenate([np.asarray(p).reshape(-1) for p in params])


def trajectory(options, name, dtype, steps, lbfgs=npoptim.LBFGS):
    """npoptim's flat params after each of ``steps`` steps (a ``(steps, 42)`` array) and the
    losses the steps returned."""
    fn, params = objective(name), start_params(dtype)
    opt = lbfgs(params, **options)
    out, losses = [], []
    for k in range(steps):
        losses.append(opt.step(lambda: fn(params, k)))
        out.append(flat(params))
    return np.array(out), losses


def torch_trajectory(options, name, dtype, steps, order=None):
    """torch.optim.LBFGS's flat params after each step, and its losses; ``order`` lists the
    params to torch in another order (a permutation of range(4)), which reorders every dot
    product and sum torch takes: the spread this causes is torch's own sensitivity to its
    summation order."""
    import torch
    fn = objective(name)
    tparams = [torch.tensor(p) for p in start_params(dtype)]
    listed = tparams if order is None else [tparams[i] for i in order]
    opt = torch.optim.LBFGS(listed, **options)
    out, losses = [], []
    for k in range(steps):
        def closure():
            loss, grads = fn([t.numpy() for t in tparams], k)
            for t, g in zip(tparams, grads):
                t.grad = None if g is None else torch.tensor(g)
            return loss
        losses.append(opt.step(closure))
        out.append(flat([t.detach().numpy() for t in tparams]))
    return np.array(out), losses


def scaled_errors(ours, theirs):
    """Per step, max |ours - theirs| / max(1, max |theirs|) (rows are steps)."""
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    scale = np.maximum(1.0, np.max(np.abs(theirs), axis=1))
    return np.max(np.abs(ours - theirs), axis=1) / scale


def order_sensitivity_failures(ours, theirs, reordered, factor=16.0, floor=1e-14):
    """The steps at which npoptim's run ``ours`` is further from torch's ``theirs`` than torch
    is from itself with its params listed in other orders (``reordered``), times ``factor``,
    plus ``floor`` (about 64 float64 ulps of the scale). Where torch's summation order is not
    the one npoptim emulates, this is as close as the two can be asked to be: L-BFGS feeds
    last-bit differences back into its history and amplifies them, and it does so for torch's
    own reorderings at the same rate. Steps are checked while torch's spread (running maximum)
    stays within :data:`CHAOS`; past that the runs are chaos, not rounding. Returns
    ``(failures, horizon)``: a list of ``(step, error, bound)`` and the number of steps checked.
    """
    errors = scaled_errors(ours, theirs)
    spread = np.maximum.accumulate(np.max([scaled_errors(r, theirs) for r in reordered], axis=0))
    horizon = int(np.searchsorted(spread > CHAOS, True))
    failures = [(k, float(errors[k]), float(factor * spread[k] + floor)) for k in range(horizon)
                if not errors[k] <= factor * spread[k] + floor]
    return failures, horizon
