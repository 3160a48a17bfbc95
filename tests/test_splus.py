"""SPlus: pytorch_optimizer 4.1.0's SPlus in float64 over 24 steps with the bases recomputed
every 3 (a square matrix, a matrix with a side beyond max_dim left alone and s the
nonstandard constant, a vector, a 3-D tensor and a 0-d parameter: sign descent), weight
decay and its maximize, L2 decay and fixed_decay, and the EMA evaluation parameters through
eval()/train(); once with torch's ``Tensor.float`` kept float64 (to rounding) and once as
it runs (float32 eigendecompositions); hand-derived steps; the variants; bad input.

The square matrix's statistics have full rank from the first gradient on, so its
eigenbases are unique up to the signs and order SPlus's update does not depend on (module
docstring)."""
import contextlib

import numpy as np
import pytest
from hand_derived import assert_unchanged, close, snapshot
from scheduled_runs import random_problem

from npoptim.optim.splus import SPlus

try:
    import torch
except ImportError:  # the tests of npoptim alone still run
    torch = None

SHAPES = ((4, 4), (3, 30), (5,), (2, 3, 4), ())
STEPS = 24
BASE = dict(lr=0.5, weight_decay=0.1, inverse_steps=3, max_dim=20, ema_rate=0.9)
#: the worst float64 error allowed, relative to each tensor's scale (measured: 3.0e-15)
RTOL64 = 1e-12
#: ... with both eigendecompositions in float32 (measured: 2.0e-6; module docstring)
RTOL_FLOAT32_EIGH = 1e-5


def problem(seed):
    return random_problem(seed, SHAPES, STEPS)


@contextlib.contextmanager
def float_keeps_float64():
    """pytorch_optimizer's ``sides[0].float()`` before ``eigh`` then keeps float64."""
    original = torch.Tensor.float
    torch.Tensor.float = lambda self: self
    try:
        yield
    finally:
        torch.Tensor.float = original


def run_pytorch_optimizer(params, grads, float64_eigh, **kw):
    from pytorch_optimizer import SPlus as Source
    with float_keeps_float64() if float64_eigh else contextlib.nullcontext():
        tensors = [torch.tensor(p.copy()) for p in params]
        opt = Source(tensors, **kw)
        out = []
        for step_grads in grads:
            for t, g in zip(tensors, step_grads):
                t.grad = torch.tensor(g.copy())
            opt.step()
            out.append([t.numpy().copy() for t in tensors])
        opt.eval()
        evaluated = [t.numpy().copy() for t in tensors]
        opt.train()
        trained = [t.numpy().copy() for t in tensors]
    return out, evaluated, trained


def run_npoptim(params, grads, **kw):
    ps = [p.copy() for p in params]
    opt = SPlus(ps, **kw)
    out = []
    for step_grads in grads:
        opt.step([g.copy() for g in step_grads])
        out.append([p.copy() for p in ps])
    opt.eval()
    evaluated = [p.copy() for p in ps]
    opt.train()
    trained = [p.copy() for p in ps]
    return out, evaluated, trained


def worst(a, b):
    return max(float(np.max(np.abs(x - y), initial=0.0)) / max(1.0, float(np.max(np.abs(x),
               initial=0.0))) for sa, sb in zip(a, b) for x, y in zip(sa, sb))


@pytest.mark.needs("torch", "pytorch_optimizer")
@pytest.mark.parametrize("ours, theirs", [
    (dict(), dict()), (dict(maximize=True), dict(maximize=True)),
    (dict(decoupled_weight_decay=False), dict(weight_decouple=False)),
    (dict(fixed_decay=True), dict(fixed_decay=True)),
    (dict(betas=(0.8, 0.9), eps=1e-6), dict(betas=(0.8, 0.9), eps=1e-6))])
def test_matches_pytorch_optimizer_with_float64_eigh(ours, theirs):
    params, grads = problem(0)
    expected = run_pytorch_optimizer(params, grads, True, **BASE, **theirs)
    actual = run_npoptim(params, grads, **BASE, eigh_dtype="param", **ours)
    for e, a in zip(expected, actual):
        assert worst(e if isinstance(e[0], list) else [e], a if isinstance(a[0], list)
                     else [a]) < RTOL64


@pytest.mark.needs("torch", "pytorch_optimizer")
def test_matches_pytorch_optimizer_as_it_runs_to_the_float32_rounding():
    params, grads = problem(0)
    expected, _, _ = run_pytorch_optimizer(params, grads, False, **BASE)
    actual, _, _ = run_npoptim(params, grads, **BASE)
    assert 1e-12 < worst(expected, actual) < RTOL_FLOAT32_EIGH


LR, B1 = 0.3, 0.9


def test_first_step_is_the_sign_of_the_momentum_with_the_shape_scale():
    """Step 1: the bases are the identity, U = sign((1-β1)G); s = 2/(m+n) for the matrix,
    the nonstandard constant for the vector; then θ(1 - γsλ); the EMA is (1-r)θ before the
    decay."""
    w, b = np.array([[1.0, -2.0, 0.5], [0.0, 1.0, 3.0]]), np.array([0.5, -0.5])
    w0, b0 = w.copy(), b.copy()
    gw, gb = np.array([[0.3, -1.0, 0.0], [2.0, -0.2, 0.1]]), np.array([-1.0, 2.0])
    opt = SPlus([w, b], lr=LR, betas=(B1, 0.99), weight_decay=0.1, ema_rate=0.9)
    opt.step([gw, gb])
    sw, sb = LR * 2 / 5, LR * 1e-3
    close(opt.state[0]["ema"], 0.1 * (w0 - sw * np.sign(gw)))
    close(w, (w0 - sw * np.sign(gw)) * (1 - sw * 0.1))
    close(b, (b0 - sb * np.sign(gb)) * (1 - sb * 0.1))
    # the bases now diagonalize the statistic (1-β2) G G^T (float32's eigenvectors, by
    # default: to float32's precision)
    q = opt.state[0]["q_sides0"]
    d = q.T @ (0.01 * gw @ gw.T) @ q
    np.testing.assert_allclose(d - np.diag(np.diag(d)), 0, atol=1e-6 * np.abs(d).max())


def test_second_step_rotates_into_the_eigenbasis():
    """With G1 diagonal the bases are permutations (signs aside), and step 2's update is the
    entrywise sign of the momentum β1(1-β1)G1 + (1-β1)G2, unrotated."""
    w = np.zeros((2, 2))
    opt = SPlus([w], lr=LR, betas=(B1, 0.99), weight_decay=0.0, ema_rate=0.5)
    g1, g2 = np.diag([1.0, 3.0]), np.array([[0.5, -1.0], [2.0, -3.0]])
    opt.step([g1])
    opt.step([g2])
    m = B1 * (1 - B1) * g1 + (1 - B1) * g2
    s = LR * 2 / 4
    close(w, -s * np.sign((1 - B1) * g1) - s * np.sign(m))
    # eval(): the bias-corrected EMA, train() puts the parameters back
    e1 = 0.5 * (-s * np.sign(g1))
    e2 = 0.5 * e1 + 0.5 * w
    trained = w.copy()
    opt.eval()
    close(w, e2 / (1 - 0.25))
    close(opt.ema_params()[0], e2 / (1 - 0.25))
    opt.eval()    # twice: still the EMA, the training values kept
    with pytest.raises(RuntimeError, match="eval mode"):
        opt.step([g2])
    opt.train()
    np.testing.assert_array_equal(w, trained)


def test_the_authors_scale_and_max_dim_edges():
    w = np.zeros((2, 3))
    g = np.ones((2, 3))
    SPlus([w], lr=1.0, weight_decay=0.0, variant="authors").step([g])
    close(w, -np.ones((2, 3)) / 10)    # 1/(2(m+n))
    # a side equal to max_dim: no statistic, and still 2/(m+n); a side above: the constant
    opt = SPlus([np.zeros((3, 4))], max_dim=4)
    assert opt.param_groups[0]["matrix_scale"] == "two_over_sum"
    opt.step([np.ones((3, 4))])
    assert opt.state[0]["sides1"].shape == (0, 0) and opt.state[0]["sides0"].shape == (3, 3)
    w = np.zeros((3, 5))
    SPlus([w], lr=1.0, weight_decay=0.0, max_dim=4).step([np.ones((3, 5))])
    close(w, -1e-3 * np.ones((3, 5)))
    assert SPlus([np.zeros(2)], variant="authors").param_groups[0]["eigh_dtype"] == "param"


def test_inverse_steps_timing():
    params, grads = problem(3)
    a, _, _ = run_npoptim(params[:1], [g[:1] for g in grads], **dict(BASE, inverse_steps=4))
    b, _, _ = run_npoptim(params[:1], [g[:1] for g in grads], **dict(BASE, inverse_steps=1000))
    for t in range(4):     # step 4 recomputes after its update: steps 1-4 agree
        np.testing.assert_array_equal(a[t][0], b[t][0])
    assert np.max(np.abs(a[4][0] - b[4][0])) > 1e-6


def test_float32_stays_float32():
    params, grads = problem(4)
    ps = [p.astype(np.float32) for p in params]
    opt = SPlus(ps, **BASE)
    for step_grads in grads[:5]:
        opt.step([g.astype(np.float32) for g in step_grads])
    assert all(p.dtype == np.float32 for p in ps)
    assert all(e.dtype == np.float32 for e in opt.ema_params())


@pytest.mark.parametrize("kw, message", [
    (dict(ema_rate=1.0), "ema_rate"), (dict(inverse_steps=0), "inverse_steps"),
    (dict(max_dim=0), "max_dim"), (dict(matrix_scale="one_over_m"), "matrix_scale"),
    (dict(eigh_dtype="float16"), "eigh_dtype"), (dict(betas=(0.9, 1.0)), "beta"),
    (dict(variant="optax"), "variant")])
def test_bad_hyperparameters_raise(kw, message):
    with pytest.raises(ValueError, match=message):
        SPlus([np.zeros((2, 2))], **kw).step([np.ones((2, 2))])


def test_a_gradient_that_overflows_float32_is_refused_before_anything_changes():
    opt = SPlus([np.zeros((2, 2))])
    opt.step([np.eye(2)])
    snap = snapshot(opt)
    with pytest.raises(FloatingPointError, match="float32"):
        opt.step([np.full((2, 2), 1e300)])
    assert_unchanged(opt, snap)


def test_state_dict_round_trip_continues_the_same_trajectory():
    params, grads = problem(5)
    ps_a = [p.copy() for p in params]
    opt_a = SPlus(ps_a, **BASE)
    for step_grads in grads[:7]:
        opt_a.step([g.copy() for g in step_grads])
    ps_b = [p.copy() for p in ps_a]
    opt_b = SPlus(ps_b, **BASE)
    opt_b.load_state_dict(opt_a.state_dict())
    for step_grads in grads[7:]:
        opt_a.step([g.copy() for g in step_grads])
        opt_b.step([g.copy() for g in step_grads])
    for p, q in zip(ps_a, ps_b):
        np.testing.assert_array_equal(p, q)
