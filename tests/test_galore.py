"""GaLore AdamW against the authors' galore-torch 1.0 (GaLoreAdamW, proj_type "std") in float64:
with its SVD done in float64 (its projector's float32 SVD replaced by the same code in
float64) to 1e-12 of the parameters' scale, and as published (float32 SVD) to 1e-5; both
projection sides (tall and wide matrices), a non-2-D parameter, weight decay, correct_bias,
projector refreshes, an lr schedule, 24 steps; the projection hand-derived; bad input.

The optax flavor (``from_framework("optax", "contrib.galore", ...)``: the larger side
projected, a float32 SVD with LAPACK's signs through scipy, optax's Adam, the decay before the
step) against optax 0.2.8's ``optax.contrib.galore`` itself in float32 (jax x64 on, as the
replay runs it; ``tx.update`` jitted), 24 steps, a tall, a wide and a square matrix and a
vector, rank 2, projector refreshes every 5 steps that carry the moments over, weight decay
and scale, an lr schedule, to 1e-5 of the parameters' scale (the golden float32 tolerance;
measured at most 5.8e-7, 6 float32 ulps of the scale); with npoptim's fixed signs instead
of LAPACK's it fails (by 7e-3 of the scale).

galore-torch's package ``__init__`` imports transformers and bitsandbytes, which CI does not
install (they would move torch): :func:`authors_galore` loads its ``galore_projector.py`` and
``adamw.py`` alone, the latter with its one transformers import (``require_version``, a
version check of torch) replaced by a no-op.
"""
import functools
import importlib.util
import sys
import types

import numpy as np
import pytest
from hand_derived import close
from optax_contrib import (STEPS, assert_trajectories_close, lr_schedule, needs_optax,
                           run_optax, torch)

from npoptim import flavors
from npoptim.optim.galore import GaLoreAdamW

SHAPES = ((8, 5), (4, 9), (6,))


def authors_galore():
    """``(GaLoreAdamW, GaLoreProjector)`` of galore-torch, loaded alone; skips without it."""
    spec = importlib.util.find_spec("galore_torch") if torch is not None else None
    if spec is None:
        pytest.skip("needs galore-torch (pip install --no-deps galore-torch==1.0) and torch")
    package = "_galore_torch_alone"
    if package not in sys.modules:
        root = spec.submodule_search_locations[0]
        module = types.ModuleType(package)
        module.__path__ = [root]
        sys.modules[package] = module
        projector = importlib.import_module(f"{package}.galore_projector")
        source = open(f"{root}/adamw.py", encoding="utf-8").read()
        line = "from transformers.utils.versions import require_version"
        assert line in source
        adamw = types.ModuleType(f"{package}.adamw")
        adamw.__package__ = package
        exec(compile(source.replace(line, "require_version = lambda requirement: None"),
                     f"{root}/adamw.py", "exec"), adamw.__dict__)
        sys.modules[f"{package}.adamw"] = adamw
        module.AdamW, module.GaLoreProjector = adamw.AdamW, projector.GaLoreProjector
    found = sys.modules[package]
    return found.AdamW, found.GaLoreProjector


def float64_svd(self, weights, rank, type):
    """galore-torch's ``get_orthogonal_matrix`` with the SVD in the gradient's own dtype
    (its code casts to float32 first) and npoptim's signs (each singular vector's largest
    entry positive), so that the trajectories do not depend on which LAPACK picked which."""
    U, s, Vh = torch.linalg.svd(weights.data, full_matrices=False)
    vectors = Vh[:rank, :].T if type == "right" else U[:, :rank]
    peaks = vectors[vectors.abs().argmax(dim=0), torch.arange(vectors.shape[1])]
    vectors = vectors * torch.where(peaks < 0, -1.0, 1.0).to(vectors.dtype)
    return vectors.T if type == "right" else vectors


def problem(seed=0, shapes=SHAPES, dtype=np.float64):
    rng = np.random.default_rng(seed)
    params = [rng.uniform(-1, 1, s).astype(dtype) for s in shapes]
    centres = [rng.standard_normal(s).astype(dtype) for s in shapes]
    noise = [[(rng.standard_normal(s) * 0.3).astype(dtype) for s in shapes]
             for _ in range(STEPS)]

    def grad(t, ps):
        return [(p - c) + 0.2 * (p - c) ** 3 + n for p, c, n in zip(ps, centres, noise[t])]
    return params, grad


def run_authors(params, grad, lrs, kw, patch_svd):
    AdamW, Projector = authors_galore()
    ts = [torch.tensor(p, requires_grad=True) for p in params]
    galore = {k: kw[k] for k in ("rank", "update_proj_gap", "scale") if k in kw}
    plain = {k: v for k, v in kw.items() if k not in galore}
    galore.update(proj_type="std")
    opt = AdamW([{"params": [t for t in ts if t.ndim == 2], **galore},
                 {"params": [t for t in ts if t.ndim != 2]}], lr=lrs[0],
                no_deprecation_warning=True, **plain)
    original = Projector.get_orthogonal_matrix
    if patch_svd:
        Projector.get_orthogonal_matrix = float64_svd
    try:
        out = []
        for t in range(STEPS):
            for group in opt.param_groups:
                group["lr"] = lrs[t]
            for tp, g in zip(ts, grad(t, [x.detach().numpy() for x in ts])):
                tp.grad = torch.tensor(g)
            opt.step()
            out.append([x.detach().numpy().copy() for x in ts])
    finally:
        Projector.get_orthogonal_matrix = original
    return out


def run_npoptim(params, grad, lrs, kw):
    ps = [p.copy() for p in params]
    opt = GaLoreAdamW(ps, lr=lrs[0], **kw)
    out = []
    for t in range(STEPS):
        opt.param_groups[0]["lr"] = lrs[t]
        opt.step(grad(t, ps))
        out.append([p.copy() for p in ps])
    return out, opt


OPTIONS = [dict(rank=2, update_proj_gap=5, scale=0.25),
           dict(rank=3, update_proj_gap=7, scale=1.0, weight_decay=0.1, betas=(0.8, 0.9),
                eps=1e-8),
           dict(rank=10, update_proj_gap=10, scale=0.5, correct_bias=False)]
IDS = ["rank2-gap5", "decay-rank3-gap7", "full-rank-no-bias-correction"]


@pytest.mark.needs("torch", "galore_torch")
@pytest.mark.parametrize("kw", OPTIONS, ids=IDS)
def test_matches_galore_torch_with_a_float64_svd(kw):
    params, grad = problem(0)
    lrs = lr_schedule(lr=0.02)
    expected = run_authors(params, grad, lrs, kw, patch_svd=True)
    actual, _ = run_npoptim(params, grad, lrs, kw)
    assert_trajectories_close(actual, expected)


@pytest.mark.needs("torch", "galore_torch")
def test_matches_galore_torch_as_published_to_the_float32_svd():
    # its projector comes from a float32 SVD: ~1e-7 of the projector's scale, carried by the
    # moments; 1e-5 of the parameters' scale bounds that over 24 steps and still fails a
    # wrong side, rank or scale by orders of magnitude. One refresh (the first step, with
    # zero moments), so that the signs its LAPACK picks do not matter.
    params, grad = problem(1)
    lrs = [0.02] * STEPS
    kw = dict(OPTIONS[0], update_proj_gap=STEPS)
    expected = run_authors(params, grad, lrs, kw, patch_svd=False)
    actual, _ = run_npoptim(params, grad, lrs, kw)
    assert_trajectories_close(actual, expected, rtol=1e-5)


def test_first_step_hand_derived():
    # rank 1 on a tall 3x2 matrix: P = the first right singular vector (row), R = G P^T
    w = np.zeros((3, 2))
    g = np.array([[3.0, 0.0], [0.0, 1.0], [0.0, 0.0]])     # singular vectors e1 and e2
    opt = GaLoreAdamW([w], lr=0.1, rank=1, scale=1.0, update_proj_gap=2)
    opt.step([g])
    p = opt.state[0]["ortho_matrix"]
    close(np.abs(p), [[1.0, 0.0]])
    # low-rank gradient (3, 0, 0)^T: Adam's first step is r / (|r| + eps / sqrt(1-b2)) ...
    r = np.array([3.0, 0.0, 0.0])
    m, v = 0.1 * r, 0.001 * r * r
    n = m / (np.sqrt(v) + 1e-6)
    step_size = 0.1 * np.sqrt(0.001) / 0.1
    expected = np.zeros((3, 2))
    expected[:, 0] = -step_size * n
    close(w, expected)     # the second column (outside the rank-1 subspace) does not move
    assert opt.state[0]["exp_avg"].shape == (3, 1)


#: optax's form: a tall, a wide and a square matrix (square: from the left, as tall) and a
#: vector (Adam on the full gradient, no scale).
OPTAX_SHAPES = ((7, 4), (3, 6), (5, 5), (6,))
#: (the golden file cases/optax/GaLoreAdamW.json, replayed through optax by
#: tests/test_framework_replay.py, has one case: rank 1 with weight decay 0.1; the rank-2
#: case without decay is its torch-form twin of the same name in cases/GaLoreAdamW.json)
OPTAX_OPTIONS = [dict(rank=2, update_proj_gap=5, weight_decay=0.1, scale=0.5)]


@functools.lru_cache(maxsize=None)
def optax_galore(option):
    """optax.contrib.galore's trajectory on the float32 problem (``OPTAX_OPTIONS[option]``),
    its ``tx.update`` jitted, and the problem."""
    import optax
    kw = OPTAX_OPTIONS[option]
    params, grad = problem(0, OPTAX_SHAPES, np.float32)
    lrs = lr_schedule(lr=0.02)
    return run_optax(lambda lr: optax.contrib.galore(learning_rate=lr, **kw), params, grad,
                     lrs=lrs, jit=True), (params, grad, lrs)


def run_optax_galore(option, **switches):
    """(optax's trajectory, npoptim's optax flavor's); ``switches`` override the flavor's."""
    expected, (params, grad, lrs) = optax_galore(option)
    ps = [p.copy() for p in params]
    opt = flavors.from_framework("optax", "contrib.galore", ps, learning_rate=lrs[0],
                                 **OPTAX_OPTIONS[option])
    for group in opt.param_groups:
        group.update(switches)
    actual = []
    for t in range(STEPS):
        opt.param_groups[0]["lr"] = lrs[t]
        opt.step(grad(t, ps))
        actual.append([p.copy() for p in ps])
    assert all(a.dtype == e.dtype == np.float32 for a, e in zip(actual[-1], expected[-1]))
    return expected, actual


@needs_optax
def test_optax_flavor_matches_optax_contrib_galore_in_float32():
    expected, actual = run_optax_galore(0)
    assert_trajectories_close(actual, expected, rtol=1e-5)


@needs_optax
def test_optax_flavor_needs_lapack_s_signs():
    # the refreshes at steps 6, 11, 16 and 21 read the carried moments in the new basis: a singular
    # vector signed otherwise than jax's LAPACK signs it turns them around
    expected, actual = run_optax_galore(0, svd_signs="fixed")
    with pytest.raises(AssertionError, match="of the scale"):
        assert_trajectories_close(actual, expected, rtol=1e-3)


@needs_optax
def test_scipy_gesdd_gives_jax_s_singular_vectors_bit_for_bit():
    import jax.numpy as jnp
    import scipy.linalg
    rng = np.random.default_rng(3)
    for shape in OPTAX_SHAPES[:3]:
        a = rng.standard_normal(shape).astype(np.float32)
        ours = scipy.linalg.svd(a, full_matrices=False, lapack_driver="gesdd")
        theirs = jnp.linalg.svd(jnp.asarray(a), full_matrices=False)
        for x, y in zip(ours, theirs):
            np.testing.assert_array_equal(x, np.asarray(y))


@pytest.mark.parametrize("dtype, atol", [(np.float64, 1e-13), (np.float32, 2e-6)])
def test_jacobi_singular_vectors_are_lapack_s_up_to_sign(dtype, atol):
    """npoptim's fixed-order SVD (matrices up to JACOBI_MAX_SIDE) against LAPACK gesdd in
    float64, signs fixed the same way, on the golden cases' shapes; and a larger matrix
    takes LAPACK itself."""
    from npoptim.optim import galore
    rng = np.random.default_rng(4)
    for shape in ((8, 5), (4, 9), (6, 4), (2, 7), (1, 3)):
        a = rng.standard_normal(shape).astype(dtype)
        for right in (True, False):
            count = min(2, *shape)
            got = galore.orthogonal_projector(a, (count, shape[1]) if right else
                                              (shape[0], count), right)
            got = got.T if right else got
            u, _, vh = np.linalg.svd(a.astype(np.float64), full_matrices=False)
            ref = vh[:count].T if right else u[:, :count]
            ref = ref * np.where(ref[np.argmax(np.abs(ref), axis=0), np.arange(count)] < 0,
                                 -1, 1)
            assert got.dtype == dtype
            np.testing.assert_allclose(got, ref, rtol=0, atol=atol)
    big = rng.standard_normal((galore.JACOBI_MAX_SIDE + 1, 3))
    u, _, vh = np.linalg.svd(big, full_matrices=False)
    ref = vh[:2].T * np.where(vh[:2].T[np.argmax(np.abs(vh[:2].T), axis=0), [0, 1]] < 0, -1, 1)
    np.testing.assert_array_equal(galore.orthogonal_projector(big, (2, 3), True).T, ref)


def test_optax_form_first_step_hand_derived():
    # rank 1 on a tall 3x2 matrix, the larger side projected: P = the first left singular
    # vector (a column, +-e1), R = P^T G = (+-3, 0); optax's Adam's first step is
    # r_hat / (|r_hat| + eps) with r_hat = r, so only w[0, 0] moves, by -lr 3 / (3 + eps)
    w = np.zeros((3, 2), np.float32)
    g = np.array([[3.0, 0.0], [0.0, 1.0], [0.0, 0.0]], np.float32)
    opt = GaLoreAdamW([w], lr=0.1, rank=1, flavor="optax")
    assert (opt.defaults["eps"], opt.defaults["scale"]) == (1e-8, 1.0)
    opt.step([g])
    assert opt.state[0]["exp_avg"].shape == (1, 2) and opt.state[0]["ortho_matrix"].shape == (3, 1)
    expected = np.zeros((3, 2), np.float32)
    expected[0, 0] = np.float32(-0.1 * 3 / (3 + 1e-8))
    np.testing.assert_allclose(w, expected, rtol=1e-6, atol=0)


def test_state_dict_round_trip_continues_identically():
    params, grad = problem(2)
    a = [p.copy() for p in params]
    opt = GaLoreAdamW(a, lr=0.01, rank=2, update_proj_gap=3)
    for t in range(4):
        opt.step(grad(t, a))
    b = [p.copy() for p in a]
    other = GaLoreAdamW(b, lr=0.01, rank=2, update_proj_gap=3)
    other.load_state_dict(opt.state_dict())
    for t in (4, 5):   # step 4 uses the stored projector, a refresh follows later
        opt.step(grad(t, a))
        other.step(grad(t, b))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("kw, match", [
    (dict(lr=-1.0), "learning rate"), (dict(betas=(0.9, 1.0)), "beta"), (dict(eps=-1.0),
                                                                         "epsilon"),
    (dict(weight_decay=-0.1), "weight_decay"), (dict(scale=-1.0), "scale"),
    (dict(rank=0), "rank"), (dict(rank=2.0), "rank"), (dict(update_proj_gap=0),
                                                       "update_proj_gap"),
    (dict(correct_bias=1), "correct_bias"), (dict(projected_side="left"), "projected_side"),
    (dict(svd_dtype="float16"), "svd_dtype"), (dict(svd_signs=None), "svd_signs"),
    (dict(eps_mode="torch"), "eps_mode"), (dict(decay_after_update=0), "decay_after_update")])
def test_bad_hyperparameters_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        GaLoreAdamW([np.zeros((3, 2))], **kw)


def test_bad_input_changes_nothing():
    w = np.ones((3, 2))
    opt = GaLoreAdamW([w], rank=1)
    with pytest.raises(ValueError, match="shape"):
        opt.step([np.ones((2, 3))])
    with pytest.raises(ValueError, match="dtype"):
        opt.step([np.ones((3, 2), np.float32)])
    np.testing.assert_array_equal(w, np.ones((3, 2)))
    assert opt.state == {}
    opt.step([np.ones((3, 2))])
    opt.param_groups[0]["rank"] = 2     # the low-rank state no longer fits
    with pytest.raises(ValueError, match="exp_avg"):
        opt.step([np.ones((3, 2))])


def _snapshot(opt, params):
    return ([p.copy() for p in params],
            {i: {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in st.items()}
             for i, st in opt.state.items()})


def _assert_same(snapshot, opt, params):
    before_params, before_state = snapshot
    for x, y in zip(before_params, params):
        np.testing.assert_array_equal(x, y)
    assert opt.state.keys() == before_state.keys()
    for i, st in before_state.items():
        assert opt.state[i].keys() == st.keys()
        for k, v in st.items():
            np.testing.assert_array_equal(opt.state[i][k], v)   # step counts included


@pytest.mark.parametrize("flavor, dtype", [(None, np.float64), ("optax", np.float32)])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_unusable_gradient_at_a_refresh_changes_nothing(flavor, dtype, bad):
    # the 2nd matrix's gradient is bad at a refresh (steps 1 and 3, update_proj_gap=2): the
    # step raises before the 1st matrix or any state changes (a NaN used to raise from the
    # 2nd parameter's SVD, numpy's LinAlgError or scipy's "A has a NaN entry", after the 1st
    # was updated and every step count advanced); the next good step matches a run that
    # never saw the bad one
    params, grad = problem(3, ((5, 3), (3, 4), (4,)), dtype)
    kw = dict(lr=0.01, rank=2, update_proj_gap=2, weight_decay=0.1)
    kw.update(flavor=flavor) if flavor else None
    a, b = [p.copy() for p in params], [p.copy() for p in params]
    opt, untouched = GaLoreAdamW(a, **kw), GaLoreAdamW(b, **kw)
    for t in range(3):
        if t in (0, 2):   # refresh steps: no state yet, then states with step 2
            g = grad(t, a)
            g[1] = g[1].copy()
            g[1][1, 2] = bad
            before = _snapshot(opt, a)
            with pytest.raises(FloatingPointError, match=r"grads\[1\] has a NaN or infinite"):
                opt.step(g)
            _assert_same(before, opt, a)
        opt.step(grad(t, a))
        untouched.step(grad(t, b))
        _assert_same(_snapshot(untouched, b), opt, a)
    assert opt.state[0]["step"] == 3 and opt.state[1]["ortho_matrix"].shape == (
        (2, 4) if flavor else (3, 2))


def test_float32_svd_of_a_float64_gradient_that_overflows_changes_nothing():
    w = [np.ones((3, 2)), np.ones((2, 3))]
    opt = GaLoreAdamW(w, rank=1, svd_dtype="float32")
    with pytest.raises(FloatingPointError, match=r"grads\[1\].*once cast to float32"):
        opt.step([np.ones((3, 2)), np.full((2, 3), 1e300)])
    assert opt.state == {} and all((p == 1).all() for p in w)


def test_nonfinite_skip_leaves_out_a_refresh_step_with_a_nan_gradient():
    w = [np.ones((3, 2)), np.ones((2, 3))]
    opt = GaLoreAdamW(w, rank=1)
    opt.nonfinite = "skip"
    opt.step([np.ones((3, 2)), np.full((2, 3), np.nan)])
    assert opt.skipped_steps == 1 and opt.state == {} and all((p == 1).all() for p in w)
