"""PSGD Kron's optax flavor against distributed-kron 2.0.0 (Evan Walters' optax form,
``distributed_kron.kron``) in float64 (``jax_enable_x64``) over 24 steps: a vector, two
matrices and a 3-D tensor, weight decay (on the vector too, as optax's add_decayed_weights),
an lr schedule, an update-probability schedule that thins the updates, and two forced
balancings; with its merge around a small target (sides kept apart, one diagonal) and around
its default 4096 (every parameter one side). Its probes and balancing draws are jax.random's
from key 42 folded with the step count: npoptim reproduces them (``probe_stream="jax"``,
:func:`npoptim.optim.kron.jax_stream_keys` on :mod:`npoptim.kernels.jax_random`), no hook
needed; the forced balancings replace its ``jax.random.uniform`` draw and are given to
``step(balance=...)``.

distributed-kron is loaded from its kron.py alone, its module compiled with ``from
__future__ import annotations`` (a compiler flag, its text unchanged): the package's
``__init__`` imports its pro.py, which needs flax, and kron.py's annotation
``PartitionSpec[str, str]`` is evaluated at import, which jax 0.10.2's PartitionSpec refuses
(TypeError: type 'P' is not subscriptable). ``precond_dtype=float64`` (npoptim keeps the
factors in the parameter's dtype), ``partition_grads_into_blocks=False`` (its default True pads
every side to a multiple of 256: not implemented, see the flavor's table).
"""
import __future__
import importlib.util
import math
import os
import types

import numpy as np
import pytest
from scheduled_runs import random_problem, set_lr, worst_error

from npoptim.optim.kron import Kron, jax_stream_keys

SHAPES = ((5,), (4, 3), (2, 3, 4), (8, 3))
STEPS = 24
SCHEDULE = (1.0, 0.25, 0.3, 4)
BALANCE_AT = (3, 11)        # steps (1-based) whose balancing draw is forced
LRS = [0.05 * (0.5 + 0.5 * math.cos(math.pi * t / STEPS)) + 0.005 for t in range(STEPS)]
BASE = dict(b1=0.9, weight_decay=0.02, max_size_triangular=6, preconditioner_lr=0.2,
            preconditioner_init_scale=0.7)
#: target 8: (4, 3) and (8, 3) stay matrices ((8, 3)'s side of 8 diagonal), (2, 3, 4) is
#: (6, 4); target 4096 (the default): every parameter one side (a 24 x 24 factor for (8, 3),
#: past max_size_triangular: distributed-kron decides diagonal sides before merging)
TARGETS = {"small": 8, "default": 4096}
#: the worst float64 error allowed, relative to each tensor's scale (measured over the 24
#: steps: "small" 3.9e-16, "default" 2.1e-16; the factors 1.9e-16 and 1.4e-16; with the
#: damping's sqrt(eps_f32) in float64 instead, damping_dtype="param", 1.4e-12)
RTOL64 = 1e-12


def dk_module():
    spec = importlib.util.find_spec("distributed_kron")
    path = os.path.join(os.path.dirname(spec.origin), "kron.py")
    module = types.ModuleType("distributed_kron_kron")
    module.__file__ = path
    with open(path) as f:
        code = compile(f.read(), path, "exec", flags=__future__.annotations.compiler_flag,
                       dont_inherit=True)
    exec(code, module.__dict__)
    return module


def _balance_key(count):
    """distributed-kron's key of the balancing draw at step count ``count``."""
    from npoptim.kernels import jax_random
    k = jax_random.split(jax_random.fold_in(jax_random.key(42), count))[1]
    return jax_random.split(k)[1]


def run_dk(target, params, grads, monkeypatch):
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import optax
    source = dk_module()
    real = jax.random.uniform
    # the balancing draws' keys at the steps of BALANCE_AT (count = step - 1)
    forced_keys = jnp.asarray(np.stack([_balance_key(t - 1) for t in BALANCE_AT]))

    def forced(key, *args, **kw):     # 0 (balance) at those steps' keys, else the draw
        hit = jnp.any(jnp.all(jnp.asarray(key) == forced_keys, axis=1))
        return jnp.where(hit, 0.0, real(key, *args, **kw))
    monkeypatch.setattr(jax.random, "uniform", forced)
    tx = source.kron(
        learning_rate=lambda count: jnp.asarray(LRS)[count],
        preconditioner_update_probability=source.precond_update_prob_schedule(*SCHEDULE),
        precond_dtype=jnp.float64, partition_grads_into_blocks=False,
        target_merged_dim_size=TARGETS[target], **BASE)
    xs = [jnp.asarray(p) for p in params]
    state = tx.init(xs)
    # traced once (eagerly, its lax.cond compiles at every step), compiled without XLA's
    # slower optimizations (the same arithmetic, measured below; a third of the time)
    jax.config.update("jax_disable_most_optimizations", True)
    update = jax.jit(tx.update)
    out, counters = [], []
    for step_grads in grads:
        updates, state = update([jnp.asarray(g) for g in step_grads], state, xs)
        xs = optax.apply_updates(xs, updates)
        out.append([np.asarray(x) for x in xs])
        counters.append(int(state[0]["update_counter"]))
    jax.config.update("jax_disable_most_optimizations", False)
    monkeypatch.undo()
    factors = [[np.asarray(q) for q in qs] for qs in state[0]["Qs_preconditioners"]]
    return out, counters, factors


def run_npoptim(target, params, grads, balance_at=BALANCE_AT):
    params = [p.copy() for p in params]
    kw = dict(BASE)
    opt = Kron(params, flavor="optax", precond_lr=kw.pop("preconditioner_lr"),
               precond_init_scale=kw.pop("preconditioner_init_scale"),
               preconditioner_update_probability=SCHEDULE,
               target_merged_dim_size=TARGETS[target], **kw)
    out, counters = [], []
    for t, (lr, step_grads) in enumerate(zip(LRS, grads), start=1):
        set_lr(opt.param_groups, lr)
        opt.step([g.copy() for g in step_grads], balance=True if t in balance_at else None)
        out.append([p.copy() for p in params])
        counters.append(opt.param_groups[0]["update_counter"])
    return out, counters, opt


@pytest.mark.needs("jax", "optax", "chex", "distributed_kron")
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_matches_distributed_kron(target, monkeypatch):
    params, grads = random_problem(11, SHAPES, STEPS)
    expected, their_counters, factors = run_dk(target, params, grads, monkeypatch)
    actual, counters, opt = run_npoptim(target, params, grads)
    assert counters == their_counters               # the same updates, thinned
    assert 8 < counters.count(0) < STEPS
    error = worst_error(actual, expected)
    print(f"{target}: worst error {error:.3g}")
    assert error <= RTOL64, error
    ours = [[opt.state[i][f"Q{k}"] for k in range(len(qs))] for i, qs in enumerate(factors)]
    factor_error = worst_error(ours, factors)
    print(f"  factors: worst error {factor_error:.3g}")
    assert factor_error <= RTOL64, factor_error
    shapes = [tuple(q.shape for q in qs) for qs in ours]
    if target == "small":
        assert shapes == [((5,),), ((4, 4), (3, 3)), ((6, 6), (4, 4)), ((8,), (3, 3))]
    else:
        assert shapes == [((5,),), ((12, 12),), ((24, 24),), ((24, 24),)]
    # the balancings are seen in the factors (of the parameters with two), in the parameters
    # only by float32 rounding (its multipliers are float32: measured 3.1e-8)
    unbalanced, _, other = run_npoptim(target, params, grads, balance_at=())
    assert worst_error(unbalanced, expected) < 1e-6
    if target == "small":
        theirs = [[other.state[i][f"Q{k}"] for k in range(len(qs))]
                  for i, qs in enumerate(factors)]
        assert worst_error(theirs, factors) > 1e-3


@pytest.mark.needs("jax")
def test_jax_stream_is_jax_random():
    """The keys and draws of :func:`jax_stream_keys` are jax.random's, as distributed-kron
    derives them at step count 5 for three parameters."""
    import jax
    jax.config.update("jax_enable_x64", True)
    key = jax.random.fold_in(jax.random.PRNGKey(42), 5)
    _, sub = jax.random.split(key)
    sub, balance = jax.random.split(sub)
    _, probe = jax.random.split(sub)
    leaves = jax.random.split(probe, 3)
    draw, ours = jax_stream_keys(42, 5, 3)
    assert draw == float(jax.random.uniform(balance))
    assert np.array_equal(ours, np.asarray(jax.random.key_data(leaves)))
    from npoptim.kernels import jax_random
    assert np.array_equal(jax_random.normal(ours[1], (7,), np.float64),
                          np.asarray(jax.random.normal(leaves[1], (7,), np.float64)))


def test_small_dims_merge_rule():
    from npoptim.optim.psgd import small_dims_sides
    assert small_dims_sides((4, 3), 4096, [False, False]) == ((12,), [False])
    assert small_dims_sides((8, 3), 8, [True, False]) == ((8, 3), [True, False])
    assert small_dims_sides((2, 3, 4), 8, [False] * 3) == ((6, 4), [False, False])
    assert small_dims_sides((64, 64, 64), 4096, [False] * 3) == ((64, 4096), [False, False])
    assert small_dims_sides((1, 1), 4096, [True, True]) == ((1,), [True])
    assert small_dims_sides((), 4096, [True]) == ((1,), [True])


def test_optax_flavor_switches_and_refusals():
    from npoptim import flavors
    opt = Kron([np.zeros((4, 3))], flavor="optax")
    assert opt.defaults["merge_rule"] == "small_dims" and opt.defaults["seed"] == 42
    opt.step([np.ones((4, 3))])
    assert opt.state[0]["Q0"].shape == (12, 12)
    built = flavors.from_framework("optax", "kron", [np.zeros(3)], learning_rate=0.1,
                                   preconditioner_lr=0.3, merge_small_dims=False)
    assert built.defaults["lr"] == 0.1 and built.defaults["precond_lr"] == 0.3
    assert built.defaults["merge_dims"] is False
    with pytest.raises(ValueError, match="partition_grads_into_blocks"):
        flavors.from_framework("optax", "kron", [np.zeros(3)],
                               partition_grads_into_blocks=True)
    with pytest.raises(ValueError):
        Kron([np.zeros(3)], merge_rule="largest")
