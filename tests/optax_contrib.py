"""Trajectories of optax.contrib optimizers, and of their authors' PyTorch code, against
npoptim's, in float64 (``jax_enable_x64`` for optax).

A plain module imported by the tests (pytest puts tests/ on sys.path). :func:`needs_optax`
skips a test without optax/jax, :func:`authors_code` one without the authors' package
(``NPOPTIM_REQUIRE_<LIB>=1`` in CI turns either into a failure, see conftest.py). The problem
is small and fixed: a few shapes, ``STEPS`` steps of gradients of a quadratic plus noise, and
an lr schedule, so that optax jits once per shape.
"""
import contextlib
import importlib

import numpy as np
import pytest

try:
    import jax
    import optax
except ImportError:  # pragma: no cover - the tests that need them skip
    jax = optax = None

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

needs_optax = pytest.mark.needs("optax", "jax")


def authors_code(module):
    """``(module or None, needs mark)``: the authors' PyTorch package, if it and torch import."""
    try:
        found = importlib.import_module(module) if torch is not None else None
    except ImportError:
        found = None
    return found, pytest.mark.needs("torch", module)

STEPS = 24
SHAPES = ((3, 5), (7,))
#: Scale-relative tolerance of the float64 comparison.
RTOL = 1e-12


def lr_schedule(steps=STEPS, lr=1e-2):
    """Linear warmup over 4 steps, then cosine decay to a tenth: one lr per step."""
    out = []
    for t in range(steps):
        if t < 4:
            out.append(lr * (t + 1) / 4)
        else:
            frac = (t - 4) / max(steps - 5, 1)
            out.append(lr * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * frac))))
    return out


def problem(seed=0, shapes=SHAPES, steps=STEPS, scale=1.0):
    """Initial params and a gradient function ``grad(t, params)`` (a quadratic's gradient plus
    fixed noise, so trajectories depend on the params as in training)."""
    rng = np.random.default_rng(seed)
    params = [rng.uniform(-1, 1, s) for s in shapes]
    centres = [rng.standard_normal(s) for s in shapes]
    noise = [[rng.standard_normal(s) * 0.3 for s in shapes] for _ in range(steps)]

    def grad(t, ps):
        return [scale * ((p - c) + n) for p, c, n in zip(ps, centres, noise[t])]
    return params, grad


@contextlib.contextmanager
def x64():
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", previous)


def run_optax(make_tx, params, grad, steps=STEPS, lrs=None, jit=False):
    """Params after each step of the optax transformation ``make_tx(lr)``, as NumPy arrays.

    With ``lrs`` (one lr per step) the lr is ``optax.inject_hyperparams``'s ``learning_rate``,
    set before each step, as npoptim's schedules set ``group["lr"]``. ``jit=True`` compiles
    ``tx.update`` once (for transformations with many small ops, e.g. Muon's Newton-Schulz
    iterations, whose eager run takes a minute).
    """
    with x64():
        import jax.numpy as jnp
        ps = [jnp.asarray(p) for p in params]
        if lrs is None:
            tx = make_tx(None)
        else:
            tx = optax.inject_hyperparams(lambda learning_rate: make_tx(learning_rate))(
                learning_rate=lrs[0])
        state = tx.init(ps)
        update = jax.jit(tx.update) if jit else tx.update
        out = []
        for t in range(steps):
            if lrs is not None:
                state.hyperparams["learning_rate"] = jnp.asarray(lrs[t])
            g = [jnp.asarray(x) for x in grad(t, [np.asarray(p) for p in ps])]
            updates, state = update(g, state, ps)
            ps = optax.apply_updates(ps, updates)
            out.append([np.asarray(p) for p in ps])
    return out


def run_torch(make_opt, params, grad, steps=STEPS, lrs=None, skip=None):
    """Params after each step of a torch optimizer ``make_opt(tensors)`` (float64 tensors),
    and the optimizer. ``skip(t, i)``: no gradient for parameter ``i`` at step ``t``."""
    ts = [torch.tensor(p, requires_grad=True) for p in params]
    opt = make_opt(ts)
    out = []
    for t in range(steps):
        if lrs is not None:
            for group in opt.param_groups:
                group["lr"] = lrs[t]
        for i, (tp, g) in enumerate(zip(ts, grad(t, [x.detach().numpy() for x in ts]))):
            tp.grad = None if skip and skip(t, i) else torch.tensor(g)
        opt.step()
        out.append([x.detach().numpy().copy() for x in ts])
    return out, opt


def run_npoptim(opt_cls, params, grad, steps=STEPS, lrs=None, **kw):
    """Params after each step of the npoptim optimizer, and the optimizer."""
    ps = [p.copy() for p in params]
    opt = opt_cls(ps, **kw)
    out = []
    for t in range(steps):
        if lrs is not None:
            for group in opt.param_groups:
                group["lr"] = lrs[t]
        opt.step(grad(t, ps))
        out.append([p.copy() for p in ps])
    return out, opt


def assert_trajectories_close(actual, expected, rtol=RTOL):
    """Every step's params within ``rtol`` of the params' scale (max |expected| per array)."""
    for t, (a_step, e_step) in enumerate(zip(actual, expected)):
        for i, (a, e) in enumerate(zip(a_step, e_step)):
            scale = float(np.max(np.abs(e))) or 1.0
            err = float(np.max(np.abs(a - e))) / scale
            assert err <= rtol, f"step {t + 1}, param {i}: {err:.3g} of the scale > {rtol}"
    assert len(actual) == len(expected)
