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


# ------------------------------------------- optax-shampoo's distributed_shampoo (optax)
@pytest.fixture
def optax_shampoo(monkeypatch):
    """optax-shampoo 0.0.6's ``distributed_shampoo`` module on jax 0.10.2, in float64, through
    a test-side shim (undone after each test) of the names it needs that jax and its own
    dependencies no longer give, none of which changes its arithmetic:

    * ``jax.tree_map`` / ``tree_flatten`` / ``tree_unflatten``: ``jax.tree_util``'s (removed
      from the top level in jax 0.6);
    * ``jax.experimental.pjit.PartitionSpec`` / ``with_sharding_constraint``:
      ``jax.sharding.PartitionSpec`` / ``jax.lax.with_sharding_constraint`` (the module is
      empty now; only its sharded mode, not run here, calls them);
    * ``flax.struct``: ``dataclass`` (a frozen dataclass registered as a pytree, its fields
      with ``pytree_node=False`` static, with ``.replace``) and ``field``, what flax.struct is,
      rather than flax itself (flax's ``__init__`` imports its whole library, orbax,
      msgpack, tensorstore, pinned to other jax releases; the module uses these two names only);
      chex is installed (``chex.Array`` annotations only);
    * ``jax.lax.while_loop``: a Python bool in the initial carry is cast to the dtype the body
      returns for it (``matrix_inverse_pth_root`` starts its error ratio at ``True`` and
      carries a float; the jax it was written for promoted it, True -> 1.0; jax 0.10.2
      refuses the mismatch).

    And :func:`optax_shampoo_state` makes the statistics and preconditioners its init builds
    in float32 whatever the parameters' dtype (``matrix_epsilon * jnp.eye(n, dtype=float32)``
    and ``jnp.eye(n, dtype=float32)``) again in float64, as an init in the parameters' dtype
    would: with float64 parameters its ``lax.cond`` between the old float32 identity and the
    new float64 root raises otherwise. So its statistics start at ε I in float64, not at
    float32(ε) I (1e-4 in float32 is 2.5e-8 off, which moved the roots by 1e-8)."""
    import sys
    import types
    import dataclasses
    jax = pytest.importorskip("jax")
    import jax.experimental.pjit as pjit
    monkeypatch.setattr(jax, "tree_map", jax.tree_util.tree_map, raising=False)
    monkeypatch.setattr(jax, "tree_flatten", jax.tree_util.tree_flatten, raising=False)
    monkeypatch.setattr(jax, "tree_unflatten", jax.tree_util.tree_unflatten, raising=False)
    monkeypatch.setattr(pjit, "PartitionSpec", jax.sharding.PartitionSpec, raising=False)
    monkeypatch.setattr(pjit, "with_sharding_constraint", jax.lax.with_sharding_constraint,
                        raising=False)
    while_loop = jax.lax.while_loop

    def promoting_while_loop(cond_fun, body_fun, init_val):
        out = jax.eval_shape(body_fun, init_val)
        init_val = jax.tree_util.tree_map(
            lambda x, o: jax.numpy.asarray(x, o.dtype)
            if isinstance(x, bool) and o.dtype != bool else x, init_val, out)
        return while_loop(cond_fun, body_fun, init_val)

    monkeypatch.setattr(jax.lax, "while_loop", promoting_while_loop)
    struct = types.ModuleType("flax.struct")

    def field(pytree_node=True, **kwargs):
        return dataclasses.field(metadata={"pytree_node": pytree_node}, **kwargs)

    def dataclass(cls):
        cls = dataclasses.dataclass(frozen=True)(cls)
        fields = dataclasses.fields(cls)
        jax.tree_util.register_dataclass(
            cls, data_fields=[f.name for f in fields if f.metadata.get("pytree_node", True)],
            meta_fields=[f.name for f in fields if not f.metadata.get("pytree_node", True)])
        cls.replace = lambda self, **changes: dataclasses.replace(self, **changes)
        return cls

    struct.field, struct.dataclass = field, dataclass
    flax = types.ModuleType("flax")
    flax.struct = struct
    if "optax_shampoo.distributed_shampoo" not in sys.modules:
        monkeypatch.setitem(sys.modules, "flax", flax)
        monkeypatch.setitem(sys.modules, "flax.struct", struct)
    from optax_shampoo import distributed_shampoo
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield distributed_shampoo
    jax.config.update("jax_enable_x64", previous)


def optax_shampoo_state(state, matrix_epsilon):
    """``tx.init``'s state with its statistics (ε I) and preconditioners (I) built in float64
    (see the fixture)."""
    import jax.numpy as jnp
    return state._replace(stats=[s._replace(
        statistics=[matrix_epsilon * jnp.eye(x.shape[0], dtype=jnp.float64)
                    for x in s.statistics],
        preconditioners=[jnp.eye(x.shape[0], dtype=jnp.float64) for x in s.preconditioners])
        for s in state.stats])


def optax_shampoo_trajectory(module, kwargs, params, grads):
    """The params after each update of ``distributed_shampoo(**kwargs)`` with the schedule
    ``LRS[count]`` (optax's count, 0 at the first update), ``update`` compiled once with
    XLA's backend optimisations off (half the compile time; XLA's CPU arithmetic is IEEE
    either way, no fast-math), memoized per keywords (two tests read the same run)."""
    key = repr(sorted(kwargs.items()))
    if key in _OPTAX_RUNS:
        return _OPTAX_RUNS[key]
    import jax
    import jax.numpy as jnp
    import optax
    lrs = jnp.asarray(LRS, jnp.float64)
    tx = module.distributed_shampoo(learning_rate=lambda count: lrs[count], **kwargs)
    ps = [jnp.asarray(p) for p in params]
    state = optax_shampoo_state(tx.init(ps), kwargs.get("matrix_epsilon", 1e-6))
    update = None
    out = []
    for step_grads in grads:
        step_grads = [jnp.asarray(g) for g in step_grads]
        if update is None:
            update = jax.jit(tx.update).lower(step_grads, state, ps).compile(compiler_options={
                "xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True})
        updates, state = update(step_grads, state, ps)
        ps = optax.apply_updates(ps, updates)
        out.append([np.asarray(p) for p in ps])
    _OPTAX_RUNS[key] = out
    return out


_OPTAX_RUNS = {}


#: 1-D (preconditioned: optax-shampoo preconditions vectors; 5 is blocks 4 + 1, a 1 x 1
#: statistic beside larger ones), 2-D with a side above the block size 4 (7: 4 + 3), 3-D, and
#: a vector above skip 10 (a graft only).
#: The shapes are not merged (best_effort_shape_interpretation=False) except in the merge
#: case, so that the small ones have statistics of their own.
OPTAX_SHAPES = ((5,), (7, 4), (2, 3, 4), (12,))
OPTAX_BASE = dict(block_size=4, skip_preconditioning_dim_size_gt=10,
                  best_effort_shape_interpretation=False, preconditioning_compute_steps=3,
                  start_preconditioning_step=4, matrix_epsilon=1e-4)
#: (optax-shampoo keywords, graft name): every graft type it has, both weight decays, Nesterov
#: on and off, the moving average, the coupled lr, the exponent override, the absolute ridge
OPTAX_OPTIONS = [
    dict(graft_type=1, weight_decay=0.1),
    dict(graft_type=2, weight_decay=0.1, decoupled_weight_decay=True, nesterov=False),
    dict(graft_type=3, beta1=0.8, beta2=0.95, moving_average_for_momentum=True,
         statistics_compute_steps=2, clip_by_scaled_gradient_norm=0.5),
    dict(graft_type=4, weight_decay=0.05, decoupled_learning_rate=False,
         decoupled_weight_decay=True),
    dict(graft_type=5, exponent_override=2, weight_decay=0.05, relative_matrix_epsilon=False,
         inverse_failure_threshold=1.5e-8),
    dict(graft_type=6, best_effort_shape_interpretation=True, merge_small_dims_block_size=20,
         diagonal_epsilon=1e-3, weight_decay=0.1),
]
OPTAX_IDS = ["sgd-l2", "adagrad-decoupled-no-nesterov", "rmsprop-moving-average-clip",
             "rmsprop-normalized-coupled-lr", "sqrt-n-override-absolute-ridge-failures",
             "adagrad-normalized-merged"]
#: optax-shampoo's products and sums are XLA's (CPU-dependent order: Eigen's blocked matmuls,
#: tree reductions), npoptim's in a fixed order: each within n u of the exact value (n <= 7
#: terms here, u = 1.1e-16), over 24 statistics updates and at most 10 Newton iterations a
#: root: (24 + 10) 7 u = 2.6e-14 relative in a statistic and its root's iterates. The root
#: amplifies a statistic's relative perturbation by at most κ/p, κ <= 1/matrix_epsilon = 1e4
#: (the ridge ε λ_max; the absolute ridge case's statistics are larger than 1e-4 λ_max too),
#: p >= 2: 1.3e-10 relative in a preconditioned direction, which the graft rescales to its
#: own norm and the lr (<= 0.02) makes a part of the parameters' scale (about 1): the
#: tolerance 2e-10 (it does not cover a Newton stop or a failure check flipping on another
#: CPU, an error within rounding of 1e-6 or the threshold: none of these runs' errors is
#: within 5% of either). Measured (the report, -s): at most 2.2e-15.
OPTAX_RTOL = 2e-10


@pytest.mark.needs("optax_shampoo", "optax", "jax")
@pytest.mark.parametrize("kw", OPTAX_OPTIONS, ids=OPTAX_IDS)
def test_matches_optax_shampoo(kw, optax_shampoo):
    from npoptim import flavors
    theirs = {**OPTAX_BASE, **kw}
    params, grads = random_problem(8, OPTAX_SHAPES, STEPS, np.float64)
    expected = optax_shampoo_trajectory(optax_shampoo, theirs, params, grads)
    ps = [p.copy() for p in params]
    opt = flavors.from_framework("optax", "distributed_shampoo", ps, learning_rate=LRS[0],
                                 **theirs)
    assert opt.variant == "optax"
    got = npoptim_trajectory(opt, ps, grads, LRS)
    err = worst_error(got, expected)
    record(f"optax-shampoo {kw}", err)
    assert err < OPTAX_RTOL
    if not theirs["best_effort_shape_interpretation"]:  # a vector is preconditioned
        assert [opt.state[0][f"statistics_{k}"].shape for k in (0, 1)] == [(4, 4), (1, 1)]
        assert opt.state[1]["statistics_2"].shape == (3, 3)  # (7, 4): block (3, 4)
        assert not any(k.startswith("statistics") for k in opt.state[3])  # 12 > 10


@pytest.mark.needs("optax_shampoo", "optax", "jax")
def test_optax_shampoo_is_not_the_scalable_form(optax_shampoo):
    """Which switches tell optax-shampoo from pytorch_optimizer's ScalableShampoo (its port):
    with every switch of the optax variant but one set back to ScalableShampoo's value, the
    run misses optax-shampoo's by far more than the tolerance."""
    theirs = {**OPTAX_BASE, **OPTAX_OPTIONS[0]}
    params, grads = random_problem(8, OPTAX_SHAPES, STEPS, np.float64)
    expected = optax_shampoo_trajectory(optax_shampoo, theirs, params, grads)
    from npoptim import flavors
    scalable = {"count_from": dict(count_from=1),
                "vectors": dict(skip_preconditioning_rank_lt=2, skip_rank_shape="reshaped"),
                "newton_rule": dict(newton_rule="pytorch_optimizer"),
                "root_tolerance": dict(root_tolerance=1e-3),
                "decoupled_decay_form": dict(decoupled_decay_form="before_step",
                                             decoupled_weight_decay=True)}
    worst = {}
    for name, switches in scalable.items():
        ps = [p.copy() for p in params]
        opt = flavors.from_framework("optax", "distributed_shampoo", ps, learning_rate=LRS[0],
                                     **theirs)
        opt.param_groups[0].update(switches)
        worst[name] = worst_error(npoptim_trajectory(opt, ps, grads, LRS), expected)
    print("\noptax-shampoo with one ScalableShampoo switch:", worst)
    assert all(err > 100 * OPTAX_RTOL for err in worst.values()), worst


def test_optax_flavor_names_and_refusals():
    """flavor="optax" is the optax variant with optax-shampoo's defaults; its options that are
    not conventions of the update (sharding, quantization, LOBPCG, one-sided) are refused by
    name, before any state exists."""
    from npoptim import flavors
    p = np.zeros((3, 4))
    opt = Shampoo([p], flavor="optax")
    assert opt.variant == "optax" and opt.defaults["start_preconditioning_step"] == 5
    assert opt.defaults["no_preconditioning_for_layers_with_dim_gt"] == 4096
    built = flavors.from_framework("optax", "distributed_shampoo", [p], learning_rate=0.1,
                                   block_size=128, graft_type=4, generate_training_metrics=False)
    assert built.defaults["graft_type"] == "rmsprop_normalized"
    assert flavors.framework_names("optax", "Shampoo", built.defaults)["graft_type"] == 4
    for name, value in [("shard_optimizer_states", True), ("batch_axis_name", "batch"),
                        ("best_effort_memory_usage_reduction", True),
                        ("lobpcg_topk_precondition", 2), ("precondtioner_type", 2),
                        ("num_devices_for_pjit", 8)]:
        with pytest.raises(ValueError, match=name):
            flavors.from_framework("optax", "distributed_shampoo", [p], learning_rate=0.1,
                                   block_size=128, **{name: value})
    with pytest.raises(TypeError, match="block_size"):
        flavors.from_framework("optax", "distributed_shampoo", [p], learning_rate=0.1)


def test_optax_counts_from_zero_and_preconditions_vectors():
    """Hand-derived first step of the optax variant on a vector: count 0 updates the
    statistic ((1 - β2) g gᵀ + β2 ε I) and takes its root at once, but before
    start_preconditioning_step (5) the step is the SGD graft's Nesterov momentum,
    (1 + β1) γ g; with the start at 0 it is the Shampoo direction rescaled to ‖g‖."""
    g = np.array([3.0, -4.0, 1.0])
    p = np.zeros(3)
    opt = Shampoo([p], lr=0.1, variant="optax", block_size=8)
    opt.step([g.copy()])
    close(p, -0.1 * 1.9 * g)
    assert opt.state[0]["statistics_0"].shape == (3, 3)
    assert not np.array_equal(opt.state[0]["preconditioner_0"], np.eye(3))
    p = np.zeros(3)
    Shampoo([p], lr=0.1, variant="optax", block_size=8, start_preconditioning_step=0,
            matrix_eps=1e-2).step([g.copy()])
    # the root of (1-β2) g gᵀ + β2 ε I maps g to a multiple of g: the step is -(1+β1) γ g
    close(p, -0.1 * 1.9 * g, rtol=1e-9)


@pytest.mark.needs("optax_shampoo", "optax", "jax")
def test_optax_shampoo_replays_the_golden_optax_rows(optax_shampoo):
    """The golden cases of variant="optax" (reference_results/cases/Shampoo.json), replayed
    through distributed_shampoo called with each case's hyperparameters in its names
    (npoptim.flavors.framework_names; npoptim.check.constructors skips them in optax's own
    replay),
    pass at the cases' tolerance; the failure check drops roots in the second."""
    import json
    from pathlib import Path

    import jax
    import jax.numpy as jnp
    import optax

    from npoptim import flavors
    from npoptim.golden import codec, compare
    from npoptim.golden.replay import replay, results_file
    from npoptim.golden.schema import load_all, parse
    suite = Path(__file__).resolve().parents[1] / "reference_results" / "cases" / "Shampoo.json"
    cases = [c for c in load_all(suite, kind="cases") if "/optax-" in c.id]
    assert len(cases) == 2

    def make_step(case):
        kwargs = flavors.framework_names("optax", "Shampoo",
                                         codec.from_json_hyper(case.hyperparameters))
        kwargs.pop("learning_rate")

        lrs = jnp.asarray([s.lr for s in case.steps], jnp.float64)  # the case's schedule

        def make(params, _hyper):
            tx = optax_shampoo.distributed_shampoo(learning_rate=lambda count: lrs[count],
                                                   **kwargs)
            state = {"params": [jnp.asarray(p) for p in params], "update": None}
            state["opt"] = optax_shampoo_state(tx.init(state["params"]),
                                               kwargs["matrix_epsilon"])

            def step(grads, _lr):
                grads = [jnp.asarray(g) for g in grads]
                if state["update"] is None:  # compiled as optax_shampoo_trajectory's
                    state["update"] = jax.jit(tx.update).lower(
                        grads, state["opt"], state["params"]).compile(compiler_options={
                            "xla_backend_optimization_level": 0,
                            "xla_llvm_disable_expensive_passes": True})
                updates, state["opt"] = state["update"](grads, state["opt"], state["params"])
                state["params"] = optax.apply_updates(state["params"], updates)
                return [np.asarray(p) for p in state["params"]]
            return step
        return make

    entries = [replay(c, make_step(c), grad_format="dense") for c in cases]
    results = parse(json.loads(codec.dumps(results_file(entries, "optax-shampoo"))),
                    "<optax-shampoo>", "results").cases
    reports = [compare.compare_case(c, r, "<optax-shampoo>") for c, r in zip(cases, results)]
    assert all(r.passed for r in reports), compare.format_reports(reports, summary=True)
