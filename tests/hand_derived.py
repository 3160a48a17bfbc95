"""Helpers for the hand-derived tests: closeness at 1e-13, float32-typing checks of a rule, and
the values worked out by hand that the tests of LAMB, LARS, Lion and about two dozen other
optimizers compare with (a plain module imported by the tests; pytest puts tests/ on
sys.path)."""
import numba
import numpy as np

RTOL = 1e-13


def close(actual, expected, rtol=RTOL):
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=0)


def assert_typed_float32(rule, args):
    """``rule(*args)`` with float32 values is float32 arithmetic throughout (no promotion)."""
    out = rule(*args)
    if numba.config.DISABLE_JIT:   # plain Python: the values themselves are float32 scalars
        flat, todo = [], [out]
        while todo:
            item = todo.pop()
            todo.extend(item) if isinstance(item, tuple) else flat.append(item)
        assert all(isinstance(x, np.float32) for x in flat), (rule, out)
        return
    signature = [s for s in rule.nopython_signatures if "float32" in str(s.args)][0]
    assert "float64" not in str(signature.return_type), (rule, signature)
    assert "float32" in str(signature.return_type), (rule, signature)


def snapshot(opt):
    """Copies of every parameter and state array of ``opt`` (for :func:`assert_unchanged`)."""
    return ([p.copy() for p in opt.params],
            {i: {k: np.copy(v) for k, v in s.items()} for i, s in opt.state.items()})


def assert_unchanged(opt, snap):
    """``opt``'s parameters and state are bit for bit those of ``snap``: a refused step
    changed nothing."""
    params, state = snap
    for p, q in zip(opt.params, params):
        np.testing.assert_array_equal(p, q)
    assert set(opt.state) == set(state)
    for i, s in state.items():
        assert set(opt.state[i]) == set(s)
        for k, v in s.items():
            np.testing.assert_array_equal(opt.state[i][k], v)
