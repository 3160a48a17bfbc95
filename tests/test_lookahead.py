"""Lookahead: optax.lookahead 0.2.8 in float64 around SGD with momentum and around Adam (with
and without reset_state; two shapes, 24 steps, a sync period that does not divide them), the
sync hand-derived, state_dict round trip, bad input."""
import numpy as np
import pytest
from hand_derived import close
from optax_compare import assert_same_trajectory, problem

from npoptim.optim.adam import Adam
from npoptim.optim.lookahead import Lookahead
from npoptim.optim.sgd import SGD


def _optax_lookahead(make_fast, params0, grads, k, alpha, reset_state):
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        import jax.numpy as jnp
        tx = optax.lookahead(make_fast(optax), sync_period=k, slow_step_size=alpha,
                             reset_state=reset_state)
        params = optax.LookaheadParams.init_synced([jnp.asarray(p) for p in params0])
        state = tx.init(params)
        fast, slow = [], []
        for step_grads in grads:
            updates, state = tx.update([jnp.asarray(g) for g in step_grads], state, params)
            params = optax.apply_updates(params, updates)
            fast.append([np.asarray(p) for p in params.fast])
            slow.append([np.asarray(p) for p in params.slow])
        return fast, slow
    finally:
        jax.config.update("jax_enable_x64", previous)


@pytest.mark.needs("optax", "jax")
@pytest.mark.parametrize("inner, reset_state", [("sgd", False), ("adam", False), ("adam", True)])
def test_matches_optax_lookahead(inner, reset_state):
    params, grads = problem(0)
    if inner == "sgd":
        make_fast = lambda optax: optax.sgd(0.05, momentum=0.9)   # noqa: E731
        opt = SGD(params, lr=0.05, momentum=0.9)
    else:
        make_fast = lambda optax: optax.adam(0.05)   # noqa: E731
        opt = Adam(params, lr=0.05)
    expected_fast, expected_slow = _optax_lookahead(make_fast, params, grads, 5, 0.3, reset_state)
    look = Lookahead(opt, k=5, alpha=0.3, reset_state=reset_state)
    fast, slow = [], []
    for step_grads in grads:
        look.step(step_grads)
        fast.append([p.copy() for p in params])
        slow.append([p.copy() for p in look.slow_params])
    assert_same_trajectory(fast, expected_fast)
    assert_same_trajectory(slow, expected_slow)


def test_sync_hand_derived():
    w = np.array([1.0, -1.0])
    look = Lookahead(SGD([w], lr=0.1), k=2, alpha=0.5)
    g = np.array([1.0, 2.0])
    look.step([g])
    close(w, [0.9, -1.2])                       # a fast step, no sync
    close(look.slow_params[0], [1.0, -1.0])
    look.step([g])                              # fast [0.8, -1.4], then sync halfway
    close(w, [0.9, -1.2])
    close(look.slow_params[0], [0.9, -1.2])
    assert look.steps_since_sync == 0


def test_state_dict_round_trip_continues_identically():
    params, grads = problem(1)
    a = [p.copy() for p in params]
    b = [np.zeros_like(p) for p in params]
    look_a = Lookahead(Adam(a, lr=0.05), k=3, alpha=0.5)
    for step_grads in grads[:4]:
        look_a.step(step_grads)
    look_b = Lookahead(Adam(b, lr=0.05), k=3, alpha=0.5)
    for x, y in zip(b, a):
        x[...] = y
    look_b.load_state_dict(look_a.state_dict())
    for step_grads in grads[4:]:
        look_a.step(step_grads)
        look_b.step(step_grads)
    for x, y in zip(a + look_a.slow_params, b + look_b.slow_params):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("kw, match", [
    (dict(k=0), "k "), (dict(k=2.5), "k "), (dict(alpha=1.5), "alpha"), (dict(alpha=None), "alpha"),
    (dict(reset_state="yes"), "reset_state")])
def test_bad_hyperparameters_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        Lookahead(SGD([np.zeros(2)], lr=0.1), **kw)


def test_bad_input_changes_nothing():
    with pytest.raises(TypeError, match="npoptim optimizer"):
        Lookahead([np.zeros(2)])
    w = np.array([1.0, 2.0])
    look = Lookahead(SGD([w], lr=0.1), k=1)
    with pytest.raises(ValueError, match="shape"):
        look.step([np.ones(3)])
    assert look.steps_since_sync == 0
    sd = look.state_dict()
    sd["slow_params"] = [np.zeros(3)]
    with pytest.raises(ValueError, match="slow_params"):
        look.load_state_dict(sd)
    np.testing.assert_array_equal(w, [1.0, 2.0])
    np.testing.assert_array_equal(look.slow_params[0], [1.0, 2.0])
