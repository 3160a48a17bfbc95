"""The problems LBFGS is cross-checked on, and npoptim's side of a run (no torch needed).

Both optimizers minimize the same objective, computed by the same NumPy code on the current
parameter values (params of SHAPES, the flat vector has 42 entries): a coupled
quadratic-plus-quartic whose target drifts with the outer step (so every step has work to
do), and a Rosenbrock function. :mod:`test_lbfgs` compares with torch live;
:mod:`test_cpu_orders` with torch's runs as recorded on each kind of CPU.

The same bits on every machine: the runs recorded on one CPU are replayed by npoptim on any
other, so the objectives those runs use (``drifting_quartic``, ``rosenbrock``) are made of
correctly rounded operations only: ``+ - *`` and ``/`` elementwise, exact integer arithmetic,
casts, NumPy's pairwise ``np.sum`` (a fixed order of additions whatever the SIMD level), and
a sine computed in decimal arithmetic. No ``np.power`` beyond squares, no ``np.sin``, no BLAS:
NumPy computes float64 ``x ** 3`` and ``x ** 4`` with SVML on AVX-512 CPUs and with libm
elsewhere, and the two differ in the last bit for about 3% of inputs (until this was changed,
``drifting_quartic`` used them, and its float64 runs recorded on an AVX-512 and an AVX2
machine could not be replayed on the other; its 16-bit values are unchanged).
``wavy`` keeps ``np.sin`` and ``np.cos``: it is only used live, npoptim and optax calling
the same function on the same machine (in one process) with the same values.
"""
import contextlib
import decimal
import functools
import math

import numpy as np

import npoptim

SHAPES = [(5,), (3, 4), (2, 3, 4), (1,)]
OBJECTIVES = ["drifting_quartic", "rosenbrock"]
# other orders to list the params to torch in (see torch_trajectory)
REORDERINGS = ([3, 2, 1, 0], [1, 2, 3, 0], [2, 0, 3, 1])
# how far torch's own reorderings may spread before the runs are chaos, not rounding
CHAOS = 1e-6


def drifting_quartic(params, k):
    """0.5 sum w (x - c_k)^2 + 0.1 sum x^4 + 0.2 sum x_i x_{i+1}, on the flat vector, with
    the target c_k(i) = 0.8 sin(0.7 i + 0.9 k) (:func:`drifting_target`). x^3 and x^4 are
    products in float64 rounded once to the params' dtype: for 16-bit params exact products,
    so the bits ``x ** 3`` and ``x ** 4`` gave; for float64 ``(x x)(x x)``."""
    x = np.concatenate([p.reshape(-1) for p in params])
    dtype = x.dtype.type
    i = np.arange(x.size)
    w = (0.5 + (i % 5) * 0.6).astype(x.dtype)
    c = drifting_target(x.size, k).astype(x.dtype)
    r = x - c
    wide = x.astype(np.float64)
    x2 = wide * wide
    x3, x4 = (x2 * wide).astype(x.dtype), (x2 * x2).astype(x.dtype)
    loss = (dtype(0.5) * np.sum(w * r * r) + dtype(0.1) * np.sum(x4)
            + dtype(0.2) * np.sum(x[:-1] * x[1:]))
    g = w * r + dtype(0.4) * x3
    g[:-1] += dtype(0.2) * x[1:]
    g[1:] += dtype(0.2) * x[:-1]
    return float(loss), split(g, params)


# pi to 70 digits, for the correctly rounded sine
_PI = decimal.Decimal("3.141592653589793238462643383279502884197169399375105820974944592307816")


@functools.lru_cache(maxsize=None)
def _drifting_target(n, k):
    with decimal.localcontext() as context:
        context.prec = 60
        out = []
        for a in 0.7 * np.arange(n) + 0.9 * k:  # float64 arguments, as np.sin took them
            y = decimal.Decimal(float(a)) % (2 * _PI)  # exact argument, reduced to [0, 2 pi)
            term, total, j = y, y, 1
            while abs(term) > decimal.Decimal(10) ** -58:
                term = -term * y * y / ((2 * j) * (2 * j + 1))
                total += term
                j += 1
            out.append(0.8 * float(total))  # float(Decimal): correctly rounded
    return np.array(out)


def drifting_target(n, k):
    """0.8 sin(0.7 i + 0.9 k) for i < n in float64, the sine correctly rounded (Taylor series
    in 60-digit decimal arithmetic). It was ``0.8 * np.sin(...)``, which takes glibc's sine
    here (glibc picks its variant by CPU): of the 840 values the runs use (k < 20) one
    differs, by an ulp (k = 13, i = 20: glibc's sine is 0.5006 ulp off there)."""
    return _drifting_target(n, k).copy()


def rosenbrock(params, k):
    """sum 100 (x_{i+1} - x_i^2)^2 + (1 - x_i)^2, scaled by 1/100, on the flat vector."""
    x = np.concatenate([p.reshape(-1) for p in params])
    dtype = x.dtype.type
    a = x[1:] - x[:-1] * x[:-1]
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


def torch_trajectory(options, name, dtype, steps, order=None, sqrt_departures=None):
    """torch.optim.LBFGS's flat params after each step, and its losses; ``order`` lists the
    params to torch in another order (a permutation of range(4)), which reorders every dot
    product and sum torch takes: the spread this causes is torch's own sensitivity to its
    summation order. ``sqrt_departures``, a list: the steps whose line search took a square
    root torch did not round correctly are appended to it (see :func:`watching_torch_sqrt`)."""
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
        with watching_torch_sqrt() as departed:
            losses.append(opt.step(closure))
        if departed and sqrt_departures is not None:
            sqrt_departures.append(k)
        out.append(flat([t.detach().numpy() for t in tparams]))
    return np.array(out), losses


@contextlib.contextmanager
def watching_torch_sqrt():
    """Within it, torch's LBFGS line search notes each square root it takes (in its cubic
    interpolation, of a float64 0-d tensor) that is not the correctly rounded one (Python's
    ``math.sqrt``), in the list it yields.

    torch computes that root with MKL's vector math (not correctly rounded, and with a
    kernel MKL picks by CPU: of 20000 random arguments, about 0.7% rounded otherwise with
    MKL's AVX-512 kernel on an Intel Xeon, about 1.3% with its AVX2 and older ones,
    ``MKL_ENABLE_INSTRUCTIONS=AVX2`` or ``MKL_CBWR=COMPATIBLE``); npoptim's
    ``np.sqrt`` rounds correctly, so a run agrees with torch bit for bit only until such a
    root. The watch recomputes torch's own expression for the root from its arguments (the
    same tensor operations) and leaves the line search's result alone."""
    import torch.optim.lbfgs as torch_lbfgs
    original, departed = torch_lbfgs._cubic_interpolate, []

    def watched(x1, f1, g1, x2, f2, g2, bounds=None):
        d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
        d2_square = d1 ** 2 - g1 * g2
        if (getattr(d2_square, "dtype", None) == torch_lbfgs.torch.float64
                and d2_square >= 0
                and float(d2_square.sqrt()) != math.sqrt(float(d2_square))):
            departed.append(float(d2_square))
        return original(x1, f1, g1, x2, f2, g2, bounds)

    torch_lbfgs._cubic_interpolate = watched
    try:
        yield departed
    finally:
        torch_lbfgs._cubic_interpolate = original


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
