"""Running an optax transformation and an npoptim optimizer side by side in float64 (a plain
module imported by the tests; pytest puts tests/ on sys.path).

:func:`optax_trajectory` skips the calling test when optax/jax are missing (in CI,
``NPOPTIM_REQUIRE_OPTAX=1`` turns that into a failure, see conftest.py). optax compiles per
shape, so the problems here are few and small: two parameters, :data:`SHAPES`.
"""
import numpy as np
import pytest

SHAPES = ((3, 5), (7,))
STEPS = 24
#: the lr schedule of the schedule tests: warmup then decay, one value per step
LR_FACTORS = tuple(min(1.0, (t + 1) / 5) * (0.5 + 0.5 * np.cos(np.pi * t / STEPS))
                   for t in range(STEPS))


def problem(seed=0, shapes=SHAPES, steps=STEPS, scale=1.0):
    """Initial parameters and per-step gradients (standard normal, float64)."""
    rng = np.random.default_rng(seed)
    params = [rng.uniform(-1, 1, s) for s in shapes]
    grads = [[scale * rng.standard_normal(s) for s in shapes] for _ in range(steps)]
    return params, grads


def optax_trajectory(make_tx, params, grads):
    """The parameters after each step of ``make_tx()`` (an optax GradientTransformation),
    applied to ``grads`` from ``params``, in float64 (``jax_enable_x64``)."""
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        import jax.numpy as jnp
        tx = make_tx()
        current = [jnp.asarray(p) for p in params]
        state = tx.init(current)
        out = []
        for step_grads in grads:
            updates, state = tx.update([jnp.asarray(g) for g in step_grads], state, current)
            current = optax.apply_updates(current, updates)
            out.append([np.asarray(p, dtype=np.float64) for p in current])
        return out
    finally:
        jax.config.update("jax_enable_x64", previous)


def npoptim_trajectory(opt, params, grads, lrs=None):
    """The parameters after each ``opt.step`` (``opt`` built over ``params``); ``lrs`` sets
    every group's lr before each step."""
    out = []
    for t, step_grads in enumerate(grads):
        if lrs is not None:
            for group in opt.param_groups:
                group["lr"] = lrs[t]
        opt.step(step_grads)
        out.append([p.copy() for p in params])
    return out


def schedule(lr):
    """The lrs of :data:`LR_FACTORS` times ``lr``, and the same as an optax schedule."""
    lrs = [lr * f for f in LR_FACTORS]

    def optax_schedule(count):
        import jax.numpy as jnp
        return jnp.asarray(lrs)[count]
    return lrs, optax_schedule


def assert_same_trajectory(actual, expected, rtol=1e-12):
    """Every step's parameters within ``rtol`` of the expected parameters' scale (max |x|)."""
    assert len(actual) == len(expected)
    for t, (a_step, e_step) in enumerate(zip(actual, expected)):
        for k, (a, e) in enumerate(zip(a_step, e_step)):
            scale = max(float(np.max(np.abs(e))), 1e-300)
            err = float(np.max(np.abs(a - e))) / scale
            assert err <= rtol, f"step {t + 1}, param {k}: {err:.3g} of the scale > {rtol}"


def quartic_objective(seed=0, shapes=SHAPES):
    """``(params0, f)`` for the optimizers whose step needs the loss (PolyakSGD, MoMo):
    ``f(params, sign=1.0)`` returns ``(loss, grads)`` of a separable quartic with minimum 0
    (times ``sign``)."""
    rng = np.random.default_rng(seed)
    centers = [rng.uniform(-1, 1, s) for s in shapes]
    h = [rng.uniform(0.5, 4.0, s) for s in shapes]

    def f(params, sign=1.0):
        loss = sum(float(np.sum(0.5 * hk * (p - c) ** 2 + 0.25 * (p - c) ** 4))
                   for p, c, hk in zip(params, centers, h))
        grads = [hk * (p - c) + (p - c) ** 3 for p, c, hk in zip(params, centers, h)]
        return sign * loss, [sign * g for g in grads]
    return [rng.uniform(-2, 2, s) for s in shapes], f


def optax_value_trajectory(params0, f, make_tx, steps=STEPS, sign=1.0):
    """The parameters after each step of ``make_tx(optax)``, an optax transformation that takes
    the loss (``update(..., value=loss)``), on ``f`` times ``sign``, in float64."""
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        import jax.numpy as jnp
        tx = make_tx(optax)
        params = [jnp.asarray(p) for p in params0]
        state = tx.init(params)
        out = []
        for _ in range(steps):
            loss, grads = f([np.asarray(p) for p in params])
            updates, state = tx.update([jnp.asarray(sign * g) for g in grads], state, params,
                                       value=sign * loss)
            params = optax.apply_updates(params, updates)
            out.append([np.asarray(p) for p in params])
        return out
    finally:
        jax.config.update("jax_enable_x64", previous)
