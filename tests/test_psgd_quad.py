"""PSGD-QUAD: quad-torch 0.4.5's ``QUAD`` in float64 over 104 steps (a vector, a 1 x 5 matrix
that quad-torch views as a vector, a square matrix with two dense factors, a diagonal-dense
and a dense-diagonal matrix, a 3-D tensor merged into a matrix, a matrix whose two sides are
past max_size_dense and so diagonal), weight decay, an lr schedule, both ``lr_style`` values
(the second with a preconditioner lr that reaches its floor of 0.3 after 7 steps), and a
balancing at step 100; torch's own noise (``torch.randn_like``, recorded) is given to npoptim's
``step(noise=...)``. Hand-derived first steps, the float32 preconditioner lr to the bit, the
counter stream's draws, bad input, resuming from a state_dict.

Two changes to quad-torch's module, both for running it here, neither to its arithmetic:
its ``@torch.compile(fullgraph=True)`` functions replaced by the functions they wrap
(``_torchdynamo_orig_callable``: they run eagerly, the same arithmetic, no compiler on this
CPU-only machine; with dynamo merely disabled, as tests/test_kron.py does for kron-torch,
``fullgraph=True`` raises), and its ``merge_dims``'s ``math.max``,
which Python's ``math`` does not have (0.4.5 raises AttributeError at the first step of any
parameter of two or more sides), given as Python's ``max`` through a stand-in for its
``math`` module. And one to torch for the run: its ``lb``'s ``A.index_select(0, j)`` with a
0-D ``j`` is a 1 x n matrix in torch 2.13, which ``A.mv`` refuses (eagerly and compiled: no
dense factor can step in 0.4.5 as published); ``index_select`` with a 0-D index returns the
row itself, ``A[j]``, as the code means. quad-torch has no LAPACK and no float32 part to
patch: with float64 parameters and ``dtype=torch.float64`` it computes in float64 but for its
float32 preconditioner lr, which npoptim computes the same way
(test_precond_lr_is_quad_torchs_float32).
"""
import math
import types

import numpy as np
import pytest
from hand_derived import assert_unchanged, snapshot
from scheduled_runs import random_problem, set_lr, worst_error

from npoptim.optim.psgd import quad_diagonal_sides, squarest_sides
from npoptim.optim.psgd_quad import PSGDQuad, float32_precond_lr

try:
    import torch
except ImportError:  # the tests of npoptim alone still run
    torch = None

MAX_DENSE = 5
#: the vector; (1, 5) as a vector; (4, 4) dense x dense; (4, 3) diagonal x dense (16 > 12);
#: (3, 4) dense x diagonal; (2, 3, 4) merged to (6, 4): diagonal (6 > 5) x dense; (7, 6) both
#: sides past MAX_DENSE: diagonal x diagonal
SHAPES = ((5,), (1, 5), (4, 4), (4, 3), (3, 4), (2, 3, 4), (7, 6))
STEPS = 104                 # a balancing at step 100
LRS = [0.02 * (0.5 + 0.5 * math.cos(math.pi * t / STEPS)) + 1e-3 for t in range(STEPS)]
CONFIGS = {
    "adam": dict(lr_style="adam", momentum=0.9, weight_decay=0.1, preconditioner_lr=0.7,
                 noise_scale=1e-3, max_size_dense=MAX_DENSE),
    # preconditioner lr 0.3001 / sqrt(1 + t/1e4) < 0.3 from t = 7: the float32 floor
    "none": dict(lr_style=None, momentum=0.5, weight_decay=0.05, preconditioner_lr=0.3001,
                 noise_scale=1e-2, max_size_dense=MAX_DENSE),
}
#: the worst float64 error allowed, relative to each tensor's scale, parameters and factors
#: (measured over the 104 steps: "adam" 4.0e-16, "none" 7.2e-16; the factors 5.1e-16 and
#: 6.3e-16: BLAS's multi_dot orders against npoptim's in-order products)
RTOL64 = 1e-12


def quad_module(monkeypatch):
    import quad_torch.quad as source
    for name, fn in vars(source).copy().items():
        eager = getattr(fn, "_torchdynamo_orig_callable", None)   # a @torch.compile function
        if eager is not None:
            monkeypatch.setattr(source, name, eager)
    shim = types.SimpleNamespace(**{k: getattr(math, k) for k in dir(math)
                                    if not k.startswith("_")})
    shim.max = max        # quad-torch 0.4.5's merge_dims calls math.max (see the docstring)
    monkeypatch.setattr(source, "math", shim)
    real = torch.Tensor.index_select

    def index_select(self, dim, index):   # a 0-D index selects the row itself (lb's A[j])
        out = real(self, dim, index)
        return out.squeeze(dim) if index.ndim == 0 else out
    monkeypatch.setattr(torch.Tensor, "index_select", index_select)
    return source


def run_quad(config, params, grads, monkeypatch):
    """quad-torch's trajectory, its factors and the noise it drew (per step, per param)."""
    source = quad_module(monkeypatch)
    draws = []
    real = torch.randn_like

    def recording(t, *args, **kw):
        v = real(t, *args, **kw)
        draws[-1].append(v.detach().numpy().copy())
        return v
    monkeypatch.setattr(torch, "randn_like", recording)
    tensors = [torch.tensor(p.copy()) for p in params]
    opt = source.QUAD(tensors, dtype=torch.float64, **CONFIGS[config])
    torch.manual_seed(0)
    out = []
    for lr, step_grads in zip(LRS, grads):
        draws.append([])
        set_lr(opt.param_groups, lr)
        for t, g in zip(tensors, step_grads):
            t.grad = torch.tensor(g.copy())
        opt.step()
        out.append([t.detach().numpy().copy() for t in tensors])
    monkeypatch.undo()
    factors = [[q.numpy().copy() for q in opt.state[t]["Q"]] for t in tensors]
    return out, draws, factors


def run_npoptim(config, params, grads, draws):
    params = [p.copy() for p in params]
    opt = PSGDQuad(params, **CONFIGS[config])
    out = []
    for lr, step_grads, noise in zip(LRS, grads, draws):
        set_lr(opt.param_groups, lr)
        opt.step([g.copy() for g in step_grads],
                 noise=[None if v is None else v.reshape(p.shape)
                        for v, p in zip(noise, params)])
        out.append([p.copy() for p in params])
    return out, opt


@pytest.mark.needs("torch", "quad_torch")
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_matches_quad_torch(config, monkeypatch):
    params, grads = random_problem(7, SHAPES, STEPS)
    expected, draws, factors = run_quad(config, params, grads, monkeypatch)
    assert all(len(d) == len(SHAPES) for d in draws)    # one draw per parameter and step
    actual, opt = run_npoptim(config, params, grads, draws)
    error = worst_error(actual, expected)
    print(f"{config}: worst error {error:.3g}")
    assert error <= RTOL64, error
    ours = [[opt.state[i][f"Q{k}"] for k in range(len(qs))] for i, qs in enumerate(factors)]
    kinds = [tuple(q.ndim for q in qs) for qs in ours]
    assert kinds == [(1,), (1,), (2, 2), (1, 2), (2, 1), (1, 2), (1, 1)]
    factor_error = worst_error(ours, factors)
    print(f"  factors: worst error {factor_error:.3g}")
    assert factor_error <= RTOL64, factor_error
    # the run moved, and the noise is seen: npoptim's own draws give another run
    assert worst_error([params], [expected[-1]]) > 1e-2
    other, _ = run_npoptim(config, params, grads, [[None] * len(SHAPES)] * STEPS)
    assert worst_error(other, expected) > 1e3 * RTOL64


@pytest.mark.needs("torch", "quad_torch")
def test_precond_lr_is_quad_torchs_float32(monkeypatch):
    source = quad_module(monkeypatch)
    steps = np.arange(1, 60001, dtype=np.int32)
    for lr in (0.7, 0.3001, 0.1, 1.3):
        theirs = source.get_precond_lr(lr, torch.tensor(steps)).numpy()
        assert theirs.dtype == np.float32
        assert np.array_equal(float32_precond_lr(lr, steps), theirs), lr


@pytest.mark.needs("torch", "quad_torch")
def test_balancing_is_seen(monkeypatch):
    """Without the balancing at step 100 the factors differ from quad-torch's, the
    parameters agree (balancing keeps P)."""
    params, grads = random_problem(7, SHAPES, STEPS)
    expected, draws, factors = run_quad("adam", params, grads, monkeypatch)
    monkeypatch.setattr("npoptim.optim.psgd_quad.BALANCE_EVERY", 10 ** 6)
    actual, opt = run_npoptim("adam", params, grads, draws)
    assert worst_error(actual, expected) < 1e-9
    ours = [[opt.state[i][f"Q{k}"] for k in range(len(qs))] for i, qs in enumerate(factors)]
    assert worst_error(ours, factors) > 1e-3


def test_sides_and_their_factors():
    assert squarest_sides((2, 3, 4)) == (6, 4)
    assert squarest_sides((4, 1, 1)) == (4,) and squarest_sides((1, 5)) == (5,)
    assert squarest_sides((2, 2, 2, 8)) == (8, 8)
    assert squarest_sides(()) == (1,) and squarest_sides((3, 2)) == (3, 2)
    assert quad_diagonal_sides((4, 3), 8192, 1.0) == [True, False]
    assert quad_diagonal_sides((4, 4), 8192, 1.0) == [False, False]
    assert quad_diagonal_sides((4, 3), 3, 2.0) == [True, False]
    assert quad_diagonal_sides((5,), 8192, 1.0) == [True]


def test_first_step_by_hand_vector():
    """A vector: s = (mean g² + σ²)^(-1/4), Pg = s²(g + σv), L = max|Pg|² + 1, q = s(1 -
    η/(2L)(Pg² - 1))², U = q² g clipped to RMS 1.05, θ(1 - γλ) - γ/5 U."""
    g = np.array([0.5, -2.0, 1.0, 3.0])
    v = np.array([1.0, -0.5, 2.0, 0.25])
    theta0 = np.array([0.1, 0.2, -0.3, 0.4])
    theta = theta0.copy()
    lr, wd, sigma, eta = 0.1, 0.5, 0.1, 0.7
    opt = PSGDQuad([theta], lr=lr, weight_decay=wd, noise_scale=sigma, preconditioner_lr=eta)
    opt.step([g], noise=[v])
    s = (np.mean(g * g) + sigma ** 2) ** -0.25
    pg = s * s * (g + sigma * v)
    ell = np.max(pg * pg) + 1.0
    eta1 = float(np.float32(eta) / np.sqrt(np.float32(1.0001)))
    q = s * (1 - eta1 / (2 * ell) * (pg * pg - 1)) ** 2
    u = q * q * g
    u = u * 1.05 / max(np.sqrt(np.mean(u * u)), 1.05)
    np.testing.assert_allclose(theta, theta0 * (1 - lr * wd) - lr / 5 * u, rtol=1e-14)
    np.testing.assert_allclose(opt.state[0]["Q0"], q, rtol=1e-14)
    assert float(opt.state[0]["L0"]) == pytest.approx(ell, rel=1e-15)


def test_first_step_by_hand_dense_matrix():
    """A 2 x 2 matrix, two dense factors s I with s = (mean g² + σ²)^(-1/8): A = s⁴(G + σV),
    T = A Aᵀ (left) and Aᵀ A (right), c = 2, each side's (6), U = Q_l² G Q_r²."""
    g = np.array([[0.5, -2.0], [1.0, 3.0]])
    v = np.array([[1.0, -0.5], [2.0, 0.25]])
    theta = np.zeros((2, 2))
    sigma, eta = 0.1, 0.7
    opt = PSGDQuad([theta], lr=1.0, lr_style=None, weight_decay=0.0, noise_scale=sigma,
                   preconditioner_lr=eta)
    opt.step([g], noise=[v])
    s = (np.mean(g * g) + sigma ** 2) ** -0.125
    a = s ** 4 * (g + sigma * v)
    eta1 = float(np.float32(eta) / np.sqrt(np.float32(1.0001)))
    qs = []
    for t in (a @ a.T, a.T @ a):
        x = t @ t[np.argmax((t * t).sum(1))]
        ell = np.linalg.norm(t @ (x / np.linalg.norm(x))) + 2.0
        q = s * np.eye(2)
        r = q - eta1 / (2 * ell) * (t @ q - 2 * q)
        r = r - eta1 / (2 * ell) * (r @ t - 2 * r)
        qs.append((r + r.T) / 2)
    u = qs[0] @ qs[0] @ g @ qs[1] @ qs[1]
    u = u * 1.05 / max(np.sqrt(np.mean(u * u)), 1.05)
    np.testing.assert_allclose(theta, -u, rtol=1e-13)
    np.testing.assert_allclose(opt.state[0]["Q1"], qs[1], rtol=1e-13)


def test_counter_stream_noise_is_reproducible_and_seeded():
    params, grads = random_problem(2, SHAPES, 6)

    def run(seed):
        ps = [p.copy() for p in params]
        opt = PSGDQuad(ps, noise_scale=0.1, seed=seed, max_size_dense=MAX_DENSE)
        for step_grads in grads:
            opt.step([g.copy() for g in step_grads])
        return ps
    first, again, other = run(0), run(0), run(1)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert not all(np.array_equal(a, b) for a, b in zip(first, other))


@pytest.mark.parametrize("kw", [dict(lr=-1.0), dict(momentum=1.0), dict(lr_style="sgd"),
                                dict(weight_decay=-0.1), dict(preconditioner_lr=-1.0),
                                dict(noise_scale=-1e-9), dict(max_size_dense=2.5),
                                dict(max_skew_dense=-1.0), dict(seed=-1)])
def test_bad_hyperparameters(kw):
    with pytest.raises(ValueError):
        PSGDQuad([np.zeros(3)], **kw)


def test_bad_step_input_changes_nothing():
    params = [np.ones((3, 2)), np.ones(4)]
    opt = PSGDQuad(params, lr=0.1)
    opt.step([np.ones((3, 2)), np.ones(4)])
    snap = snapshot(opt)
    for kw in (dict(noise=[np.ones(6)]), dict(noise=[np.ones((2, 3)), None]),
               dict(noise=[np.ones((3, 2), np.float32), None])):
        with pytest.raises(ValueError):
            opt.step([np.ones((3, 2)), np.ones(4)], **kw)
        assert_unchanged(opt, snap)
    with pytest.raises(ValueError):
        opt.step([np.ones((3, 2)), np.ones(5)])
    assert_unchanged(opt, snap)
    with pytest.raises(ValueError):
        PSGDQuad([np.zeros((0, 3))]).step([np.zeros((0, 3))])


def test_state_dict_resumes_bit_for_bit():
    params, grads = random_problem(5, ((3, 2), (4,), (2, 2, 2)), 8)
    opt = PSGDQuad(params, lr=0.1, noise_scale=0.01)
    for g in grads[:3]:
        opt.step([x.copy() for x in g])
    copies = [p.copy() for p in params]
    resumed = PSGDQuad(copies, lr=0.1, noise_scale=0.01)
    resumed.load_state_dict(opt.state_dict())
    for g in grads[3:]:
        opt.step([x.copy() for x in g])
        resumed.step([x.copy() for x in g])
    assert all(np.array_equal(a, b) for a, b in zip(params, copies))
    assert resumed.state[0]["step"] == 8
