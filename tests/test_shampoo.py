"""Shampoo: pytorch_optimizer 4.1.0's ``Shampoo`` (variant="pytorch_optimizer") and
``ScalableShampoo`` (variant="scalable") in float64 over 24 steps (a vector, a wide and a tall
matrix, a 3-D tensor, a dimension above the block size and one above the "not preconditioned"
threshold; gradients of a random scale per step, weight decay, root refreshes every few steps,
every graft type, both roots, the preconditioning start inside the run), float32 to its
precision, the roots against each other, hand-derived steps and bad input."""
import math

import numpy as np
import pytest
from hand_derived import assert_unchanged, close, snapshot
from scheduled_runs import npoptim_trajectory, random_problem, torch_trajectory, worst_error

from npoptim.kernels.decompositions import coupled_newton_inverse_root, eigh_inverse_root
from npoptim.optim.dimensions import merge_small_dims
from npoptim.optim.shampoo import Shampoo, block_slices

try:
    import torch
except ImportError:  # the tests of npoptim alone still run
    torch = None

#: a vector, a wide and a tall matrix, a 3-D tensor, a matrix with a side above the scalable
#: tests' block size 4 (7 -> blocks 4 + 3) and one above their threshold 9 (not preconditioned)
SHAPES = ((5,), (3, 6), (7, 4), (2, 3, 4), (10, 3))
STEPS = 24
LRS = [2e-2 * min(1.0, (t + 1) / 5) * (0.5 + 0.5 * math.cos(math.pi * t / STEPS))
       for t in range(STEPS)]
#: the worst float64 error allowed, relative to each tensor's scale (measured in the report)
RTOL64 = 1e-12


def problem(seed, dtype=np.float64, shapes=SHAPES):
    return random_problem(seed, shapes, STEPS, dtype)


def run_torch(make, params, grads):
    return torch_trajectory(make, params, grads, LRS)[0]


def run_npoptim(params, grads, **kw):
    ps = [p.copy() for p in params]
    opt = Shampoo(ps, lr=LRS[0], **kw)
    return npoptim_trajectory(opt, ps, grads, LRS), opt


WORST = {}  # worst errors, printed at the end of a -s run (the report's numbers)


def record(name, value):
    WORST[name] = value
    print(f"\n{name}: worst error {value:.3g}")


# --------------------------------------------------- pytorch_optimizer's Shampoo
#: With a refresh interval the stale root meets gradients off the statistics' span, where the
#: eigenvalue is ε: two correct roots differ there by about ε_mach·‖L‖/ε relative (the
#: eigenvalue's absolute rounding over its size), 2.1e-9 measured at the default ε = 1e-6
#: (test_default_eps_with_a_refresh_interval); these cases take ε >= 1e-2 to test to 1e-12.
SIMPLE_OPTIONS = [
    dict(weight_decay=0.1),
    dict(momentum=0.5, weight_decay=0.05, preconditioning_compute_steps=3, matrix_eps=1e-2),
    dict(weight_decay=0.1, decoupled_weight_decay=True, preconditioning_compute_steps=2,
         matrix_eps=3e-2),
    dict(weight_decay=0.2, decoupled_weight_decay=True, fixed_decay=True, maximize=True,
         momentum=0.8, matrix_eps=1e-2),
]
SIMPLE_IDS = ["l2", "momentum-every-3", "decoupled-every-2", "fixed-decay-maximize"]


def simple_theirs(kw):
    theirs = dict(kw)
    if "decoupled_weight_decay" in theirs:
        theirs["weight_decouple"] = theirs.pop("decoupled_weight_decay")
    return theirs


@pytest.mark.needs("torch", "pytorch_optimizer")
@pytest.mark.parametrize("kw", SIMPLE_OPTIONS, ids=SIMPLE_IDS)
def test_matches_pytorch_optimizer_shampoo(kw):
    import pytorch_optimizer
    params, grads = problem(0)
    expected = run_torch(lambda ts: pytorch_optimizer.Shampoo(ts, lr=LRS[0],
                                                              **simple_theirs(kw)),
                         params, grads)
    got, opt = run_npoptim(params, grads, **kw)
    err = worst_error(got, expected)
    record(f"Shampoo pytorch_optimizer {kw}", err)
    assert err < RTOL64
    assert opt.state[3]["inv_pre_cond_2"].shape == (4, 4)


@pytest.mark.needs("torch", "pytorch_optimizer")
def test_default_eps_with_a_refresh_interval():
    """ε = 1e-6 and a stale root: agreement to the conditioning bound 64·ε_mach·max‖L‖/ε
    (1.3e-5 here, max‖L‖ about 900 at the end; measured 2.1e-9), not to 1e-12."""
    import pytorch_optimizer
    kw = dict(weight_decay=0.1, preconditioning_compute_steps=2)
    params, grads = problem(0)
    expected = run_torch(lambda ts: pytorch_optimizer.Shampoo(ts, lr=LRS[0], **kw),
                         params, grads)
    got, opt = run_npoptim(params, grads, **kw)
    largest = max(float(np.max(np.abs(v))) for s in opt.state.values()
                  for k, v in s.items() if k.startswith("pre_cond_"))
    bound = 64 * np.finfo(np.float64).eps * largest / 1e-6
    err = worst_error(got, expected)
    record(f"Shampoo pytorch_optimizer default eps every 2 (bound {bound:.2g})", err)
    assert err < bound


@pytest.mark.needs("torch", "pytorch_optimizer")
def test_refresh_interval_leaves_the_first_steps_still():
    """preconditioning_compute_steps=3: the roots start at zero, so steps 1 and 2 move
    nothing (as the source: its inv_pre_cond starts at zeros)."""
    params, grads = problem(1)
    got, _ = run_npoptim(params, grads, preconditioning_compute_steps=3)
    for a, p in zip(got[1], params):
        np.testing.assert_array_equal(a, p)
    assert not np.array_equal(got[2][1], params[1])


@pytest.mark.needs("torch", "pytorch_optimizer")
def test_eigenvalue_eps_agrees_with_the_sum_up_to_rounding():
    """The sum never decays its ε I: eps in the eigenvalues is the same root up to rounding."""
    params, grads = problem(2)
    added, _ = run_npoptim(params, grads, weight_decay=0.1, matrix_eps=1e-2)
    eigen, _ = run_npoptim(params, grads, weight_decay=0.1, matrix_eps=1e-2,
                           matrix_eps_mode="eigenvalues")
    err = worst_error(eigen, added)
    record("Shampoo pytorch_optimizer added vs eigenvalues", err)
    assert 0 < err < 1e-11


# ------------------------------------------------------ pytorch_optimizer's ScalableShampoo
#: block 4 and threshold 9 make the shapes above take every path; shape_interpretation off so
#: that the small matrices are preconditioned at all (see test_merged_small_shapes_are_grafted)
SCALABLE_BASE = dict(block_size=4, no_preconditioning_for_layers_with_dim_gt=9,
                     shape_interpretation=False, preconditioning_compute_steps=3,
                     start_preconditioning_step=5)
#: The Newton cases' ridge is ε·λ_max, λ_max by a power iteration from torch.randn in the
#: source: the tests give the source npoptim's fixed start vector (same_power_start), the
#: only change; test_newton_with_the_sources_random_start measures what the start moves.
SCALABLE_OPTIONS = [
    dict(graft_type="sgd", weight_decay=0.1, matrix_eps=1e-4),
    dict(graft_type="adagrad", weight_decay=0.1, decoupled_weight_decay=True, use_svd=True),
    dict(graft_type="rmsprop", betas=(0.8, 0.95), moving_average_for_momentum=True,
         statistics_compute_steps=2, use_svd=True),
    dict(graft_type="sqrt_n", nesterov=False, decoupled_learning_rate=False,
         weight_decay=0.05, matrix_eps=1e-4),
    dict(graft_type="none", inverse_exponent_override=2, use_svd=True, maximize=True,
         matrix_eps=1e-4),
    dict(graft_type="adagrad", shape_interpretation=True, block_size=6, use_svd=True,
         diagonal_eps=1e-3),
]
SCALABLE_IDS = ["sgd-l2-newton", "adagrad-decoupled-svd", "rmsprop-moving-average-svd",
                "sqrt-n-coupled-lr-newton", "none-override-svd", "merged-shapes-svd"]
GRAFTS = {"none": 0, "sgd": 1, "adagrad": 2, "rmsprop": 3, "sqrt_n": 4}


def scalable_pair(kw):
    ours = {**SCALABLE_BASE, **kw}
    theirs = dict(ours)
    theirs["graft_type"] = GRAFTS[theirs["graft_type"]]
    ours["inverse_root"] = "eigh" if ours.pop("use_svd", False) else "newton"
    return ours, theirs


@pytest.mark.needs("torch", "pytorch_optimizer")
@pytest.mark.parametrize("kw", SCALABLE_OPTIONS, ids=SCALABLE_IDS)
def test_matches_pytorch_optimizer_scalable_shampoo(kw, same_power_start):
    import pytorch_optimizer
    ours, theirs = scalable_pair(kw)
    params, grads = problem(3)
    expected = run_torch(lambda ts: pytorch_optimizer.ScalableShampoo(ts, lr=LRS[0], **theirs),
                         params, grads)
    got, opt = run_npoptim(params, grads, variant="scalable", **ours)
    err = worst_error(got, expected)
    record(f"ScalableShampoo {kw}", err)
    assert err < RTOL64
    if not ours["shape_interpretation"]:
        assert opt.state[2]["statistics_2"].shape == (3, 3)  # (7, 4): block (3, 4)
        assert not any(k.startswith("statistics") for k in opt.state[4])  # 10 > 9


@pytest.fixture
def same_power_start(monkeypatch):
    """pytorch_optimizer's power_iteration with npoptim's start vector instead of
    torch.randn (the body otherwise the source's)."""
    from pytorch_optimizer.optimizer.utils import matrix

    from npoptim.kernels.decompositions import _power_start

    def power_iteration(mat_g, num_iters=100):
        v = torch.tensor(_power_start(mat_g.shape[0], np.float64), dtype=mat_g.dtype)
        mat_v = torch.empty_like(v)
        for _ in range(num_iters):
            torch.mv(mat_g, v, out=mat_v)
            mat_v.div_(torch.linalg.vector_norm(mat_v).clamp_min_(torch.finfo(mat_v.dtype).tiny))
            v, mat_v = mat_v, v
        torch.mv(mat_g, v, out=mat_v)
        return torch.dot(v, mat_v).clamp_min_(1e-16)

    monkeypatch.setattr(matrix, "power_iteration", power_iteration)


@pytest.mark.needs("torch", "pytorch_optimizer")
def test_newton_with_the_sources_random_start():
    """torch.randn's start: λ_max differs in its last digits where the top two eigenvalues are
    close, and the ridge ε·λ_max with it: bounded by ε times the relative error of λ_max
    (<= 1 always: a Rayleigh quotient is at most λ_max); measured."""
    import pytorch_optimizer
    torch.manual_seed(0)
    ours, theirs = scalable_pair(SCALABLE_OPTIONS[0])
    params, grads = problem(3)
    expected = run_torch(lambda ts: pytorch_optimizer.ScalableShampoo(ts, lr=LRS[0], **theirs),
                         params, grads)
    got, _ = run_npoptim(params, grads, variant="scalable", **ours)
    err = worst_error(got, expected)
    record("ScalableShampoo newton, the source's random start", err)
    assert err < 1e-6


def test_merged_small_shapes_are_grafted():
    """merge_small_dims folds a shape of at most block_size entries into [1]: not
    preconditioned, as pytorch_optimizer's."""
    assert merge_small_dims((3, 6), 512) == (1,)
    assert merge_small_dims((1, 2, 512, 1, 2048, 1, 3, 4), 1024) == (1024, 2048, 12)
    assert merge_small_dims((1, 2, 768, 1, 2048), 1024) == (2, 768, 2048)
    assert len(block_slices((7, 4), 4)) == 2
    p = np.ones((3, 6))
    opt = Shampoo([p], variant="scalable")
    assert "statistics_0" not in opt._state_shapes(p, opt.param_groups[0])


@pytest.mark.needs("torch", "pytorch_optimizer")
def test_float32_matches_pytorch_optimizer_to_float32_precision():
    import pytorch_optimizer
    params, grads = problem(4, np.float32)
    expected = run_torch(lambda ts: pytorch_optimizer.Shampoo(ts, lr=LRS[0], weight_decay=0.1,
                                                              matrix_eps=1e-2), params, grads)
    got, opt = run_npoptim(params, grads, weight_decay=0.1, matrix_eps=1e-2)
    assert all(p.dtype == np.float32 for p in got[-1])
    err = worst_error(got, expected)
    record("Shampoo float32", err)
    assert err < 1e-4


# --------------------------------------------------------- eigen root vs Newton root
def test_eigen_and_newton_roots_within_the_derived_bound():
    """The Newton root stops at e = max|M - I| <= 1e-3: within n·e/p of the eigen root of the
    same ridged matrix (module docstring), and measured far below it."""
    rng = np.random.default_rng(5)
    worst = 0.0
    for n, p in [(3, 4), (6, 4), (8, 4), (5, 2), (7, 6)]:
        g = rng.standard_normal((n, n + 2))
        a = g @ g.T + 1e-3 * np.eye(n)
        a = (a + a.T) / 2
        newton = coupled_newton_inverse_root(a, p, ridge_epsilon=0.0)
        eigen = eigh_inverse_root(a, p)
        rel = float(np.max(np.abs(newton - eigen)) / np.max(np.abs(eigen)))
        assert rel <= n * 1e-3 / p
        worst = max(worst, rel)
    record("newton vs eigh root", worst)
    assert worst > 0


def test_scalable_newton_and_eigh_runs_agree_to_the_root_tolerance():
    """The two roots over a whole run: close (the Newton root's 1e-3 tolerance and the ridge
    ε λ_max) but not equal, so inverse_root is a real switch."""
    params, grads = problem(6)
    base = {**SCALABLE_BASE, "graft_type": "sgd", "weight_decay": 0.1}
    newton, _ = run_npoptim(params, grads, variant="scalable", inverse_root="newton", **base)
    eigen, _ = run_npoptim(params, grads, variant="scalable", inverse_root="eigh", **base)
    err = worst_error(newton, eigen)
    record("scalable newton vs eigh run", err)
    assert 1e-12 < err < 2e-3


def test_eigenvalue_eps_differs_from_the_decayed_matrix_eps():
    """β2 < 1 decays the initial ε I (β2^t ε): eps on the eigenvalues is another form."""
    params, grads = problem(7)
    base = {**SCALABLE_BASE, "graft_type": "none", "inverse_root": "eigh", "matrix_eps": 1e-1,
            "start_preconditioning_step": 1}
    added, _ = run_npoptim(params, grads, variant="scalable", **base)
    eigen, _ = run_npoptim(params, grads, variant="scalable", matrix_eps_mode="eigenvalues",
                           **base)
    assert worst_error(eigen, added) > 1e-3


# ------------------------------------------------------------------ hand-derived steps
def test_first_step_of_a_vector_and_a_matrix():
    """pytorch_optimizer's form, eps = 0: a vector's statistic is g gᵀ (rank one, eigenvalue
    ‖g‖²), its root (|λ|^(-1/2) on that eigenvector, infinity... avoided by eps) — with eps ε
    the root is ε^(-1/2) off the vector's direction and (‖g‖²+ε)^(-1/2) along it, so the step
    is γ g/sqrt(‖g‖²+ε). A matrix g = diag-like (orthogonal rows and columns) ‖row‖: L^(-1/4) G
    R^(-1/4) with L = G Gᵀ + ε, R = Gᵀ G + ε."""
    eps = 1e-2
    g = np.array([3.0, -4.0])
    p = np.zeros(2)
    Shampoo([p], lr=0.5, matrix_eps=eps).step([g.copy()])
    close(p, -0.5 * g / math.sqrt(25.0 + eps))
    gm = np.array([[2.0, 0.0, 0.0], [0.0, -3.0, 0.0]])
    pm = np.zeros((2, 3))
    Shampoo([pm], lr=1.0, matrix_eps=eps).step([gm.copy()])
    # L = diag(4, 9) + ε, R = diag(4, 9, 0) + ε: entry (i, i) is s/((s²+ε)^(1/4))²
    expected = np.zeros((2, 3))
    expected[0, 0] = -2.0 / math.sqrt(4.0 + eps)
    expected[1, 1] = 3.0 / math.sqrt(9.0 + eps)
    close(pm, expected, rtol=1e-12)


def test_scalable_grafting_takes_the_graft_norm():
    """variant="scalable", before the start step: the SGD graft's momentum m_D = g, Nesterov
    β1 m_D + D = (1 + β1) g; with the start at 1 the Shampoo direction rescaled to ‖g‖, its
    momentum (1 + β1) of it."""
    g = np.array([[1.0, 2.0], [-3.0, 0.5]])
    p = np.zeros((2, 2))
    Shampoo([p], lr=0.1, variant="scalable", shape_interpretation=False).step([g.copy()])
    close(p, -0.1 * 1.9 * g)
    p = np.zeros((2, 2))
    opt = Shampoo([p], lr=0.1, variant="scalable", shape_interpretation=False,
                  start_preconditioning_step=1, preconditioning_compute_steps=1,
                  inverse_root="eigh")
    opt.step([g.copy()])
    # statistics (1-β2) G Gᵀ + β2 ε I; the direction is rescaled to ‖g‖ whatever its scale
    assert math.isclose(float(np.linalg.norm(p)), 0.1 * 1.9 * float(np.linalg.norm(g)),
                        rel_tol=1e-12)


def test_root_exponent_is_minus_one_over_twice_the_order():
    """A 3-D gradient with one non-zero entry: every statistic diag(s², 0, ...) + ε, so the
    step is s·(s²+ε)^(-3/6) = s/sqrt(s²+ε): the -1/(2k) root with k = 3."""
    eps = 1e-2
    g = np.zeros((2, 3, 2))
    g[1, 2, 0] = 5.0
    p = np.zeros_like(g)
    Shampoo([p], lr=1.0, matrix_eps=eps).step([g.copy()])
    close(p[1, 2, 0], -5.0 / math.sqrt(25.0 + eps), rtol=1e-12)


# ------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("kw, message", [
    (dict(lr=-1.0), "learning rate"),
    (dict(momentum=1.5), "momentum"),
    (dict(betas=(0.9, 1.0)), "beta parameter at index 1"),
    (dict(preconditioning_compute_steps=0), "preconditioning_compute_steps"),
    (dict(block_size=1.5), "block_size"),
    (dict(graft_type="adam"), "graft_type"),
    (dict(graft_type="sgd"), "no grafting"),
    (dict(inverse_root="svd"), "inverse_root"),
    (dict(matrix_eps_mode="max"), "matrix_eps_mode"),
    (dict(matrix_eps_mode="eigenvalues", inverse_root="newton"), "takes inverse_root='eigh'"),
    (dict(variant="distributed"), "unknown variant"),
    (dict(nesterov=1), "nesterov must be True or False"),
])
def test_bad_hyperparameters_raise(kw, message):
    with pytest.raises(ValueError, match=message):
        Shampoo([np.zeros(2)], **kw)


def test_bad_group_change_leaves_everything_unchanged():
    p = np.ones((2, 3))
    opt = Shampoo([p], lr=0.1)
    opt.step([np.ones((2, 3))])
    snap = snapshot(opt)
    opt.param_groups[0]["graft_type"] = "bogus"
    with pytest.raises(ValueError, match="graft_type"):
        opt.step([np.ones((2, 3))])
    assert_unchanged(opt, snap)


@pytest.mark.parametrize("variant", ["pytorch_optimizer", "scalable"])
def test_a_parameter_without_elements_only_counts_steps(variant):
    empty, p = np.ones((3, 0)), np.ones((2, 2))
    opt = Shampoo([empty, p], lr=0.1, variant=variant, shape_interpretation=False,
                  start_preconditioning_step=1)
    opt.step([np.ones((3, 0)), np.ones((2, 2))])
    assert opt.state[0]["step"] == 1 and empty.shape == (3, 0)
    assert np.all(p < 1)


def test_aliases_name_the_classes():
    assert Shampoo([np.zeros(2)], variant="scalable_shampoo").variant == "scalable"
    assert Shampoo([np.zeros(2)], variant="shampoo").variant == "pytorch_optimizer"
