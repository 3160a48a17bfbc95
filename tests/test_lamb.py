"""LAMB: hand-derived values of each variant, the variants' signature behaviours, the
deterministic norm reduction, validation, and cross-checks against published implementations
where they install (optax, pytorch_optimizer, timm) and against torch's Adam/AdamW for the
non-adapted path.

Hand derivations are float64 on 2- or 3-element arrays; each writes the algorithm's arithmetic
out with NumPy, one line per formula of the module docstring.
"""
import math

import numpy as np
import pytest
import scipy.sparse
from hand_derived import assert_typed_float32, close

from npoptim.kernels.parallel import parallel_threshold_set
from npoptim.kernels.reduction import BLOCK, LANES, _TASK_BLOCKS, grad_sumsq
from npoptim.optim import lamb as lamb_module
from npoptim.optim.lamb import LAMB, VARIANTS
from torch_compare import needs_torch, timm_optim, torch

B1, B2 = 0.9, 0.999


def run(params, grads_per_step, **kw):
    opt = LAMB(params, **kw)
    for grads in grads_per_step:
        opt.step(grads)
    return opt


# ------------------------------------------------------------------------ paper v5 (default)
def test_paper_v5_two_steps_hand_derived():
    lr, lam, eps = 0.1, 0.01, 1e-6
    w0 = np.array([3.0, -4.0, 0.5])
    g1 = np.array([1.0, 2.0, -2.0])
    g2 = np.array([-0.5, 1.0, 4.0])
    w = w0.copy()
    opt = run([w], [[g1], [g2]], lr=lr, weight_decay=lam, eps=eps)

    # step 1
    m = 0.1 * g1                           # (1 - b1) g
    v = 0.001 * g1 ** 2                    # (1 - b2) g^2
    m_hat = m / (1 - B1)                   # = g1
    v_hat = v / (1 - B2)                   # = g1^2
    r = m_hat / (np.sqrt(v_hat) + eps)     # = g1 / (|g1| + eps)
    u = r + lam * w0
    ratio = np.sqrt(np.sum(w0 ** 2)) / np.sqrt(np.sum(u ** 2))
    w1 = w0 - lr * ratio * u
    # step 2
    m = B1 * m + 0.1 * g2
    v = B2 * v + 0.001 * g2 ** 2
    m_hat = m / (1 - B1 ** 2)
    v_hat = v / (1 - B2 ** 2)
    r = m_hat / (np.sqrt(v_hat) + eps)
    u = r + lam * w1
    ratio = np.sqrt(np.sum(w1 ** 2)) / np.sqrt(np.sum(u ** 2))
    w2 = w1 - lr * ratio * u

    close(w, w2)
    close(opt.state[0]["exp_avg"], m)
    close(opt.state[0]["exp_avg_sq"], v)
    assert opt.state[0]["step"] == 2


def test_first_step_closed_form_moves_the_layer_by_lr_times_its_norm():
    # eps = 0, lambda = 0: r = g/|g| = sign(g), ||r|| = sqrt(n), ratio = ||w|| / sqrt(n), so the
    # layer moves by exactly lr * ||w|| in norm, along -sign(g).
    w = np.array([[3.0, 0.0], [0.0, -4.0]])   # ||w|| = 5
    g = np.array([[0.2, -7.0], [1.0, 3.0]])
    run([w], [[g]], lr=0.1, eps=0.0)
    close(w, np.array([[3.0, 0.0], [0.0, -4.0]]) - 0.1 * 5.0 * np.sign(g) / 2.0)


@pytest.mark.parametrize("alias", ["optax", "tfa", "paper", "paper_v5"])
def test_paper_aliases_are_the_default_bit_for_bit(alias):
    rng = np.random.default_rng(0)
    w0, grads = rng.standard_normal((3, 4)), [rng.standard_normal((3, 4)) for _ in range(3)]
    a, b = w0.copy(), w0.copy()
    run([a], [[g] for g in grads], lr=0.01, weight_decay=0.01)
    opt = run([b], [[g] for g in grads], lr=0.01, weight_decay=0.01, variant=alias)
    assert opt.variant == "paper_v5"
    np.testing.assert_array_equal(a, b)


# ----------------------------------------------------------------------------- signatures
def test_zero_norm_param_takes_ratio_one():
    # ||w|| = 0: the guard gives ratio 1, so the step is the plain direction -lr * u, u = r
    lr, eps = 0.5, 1e-6
    w = np.zeros(3)
    g = np.array([2.0, -1.0, 0.5])
    run([w], [[g]], lr=lr, weight_decay=0.1, eps=eps)
    close(w, -lr * g / (np.abs(g) + eps))


def test_zero_gradient_step_leaves_param_alone():
    # u = 0 (zero moments, lambda = 0): ratio 1 by the guard, and nothing moves
    w = np.array([1.0, 2.0])
    run([w], [[np.zeros(2)]], lr=0.1)
    np.testing.assert_array_equal(w, [1.0, 2.0])


def test_exclude_from_layer_adaptation_group_takes_ratio_one():
    lr, lam, eps = 0.1, 0.01, 1e-6
    w0 = np.array([3.0, -4.0])
    g = np.array([1.0, -3.0])
    w = w0.copy()
    run([{"params": [w], "exclude_from_layer_adaptation": True}], [[g]], lr=lr,
        weight_decay=lam, eps=eps)
    close(w, w0 - lr * (g / (np.abs(g) + eps) + lam * w0))


def test_trust_clip_caps_the_ratio_at_one():
    # ||w|| = 50 >> ||u|| ~ sqrt(2): the paper ratio is ~35, LAMBC caps it at 1
    lr, eps = 0.1, 1e-6
    w0 = np.array([30.0, 40.0])
    g = np.array([1.0, -1.0])
    plain, clipped = w0.copy(), w0.copy()
    run([plain], [[g]], lr=lr, eps=eps)
    run([clipped], [[g]], lr=lr, eps=eps, trust_clip=True)
    r = g / (np.abs(g) + eps)
    close(plain, w0 - lr * (50.0 / np.sqrt(np.sum(r ** 2))) * r)
    close(clipped, w0 - lr * 1.0 * r)


# --------------------------------------------------------------------------- apex / timm
def test_apex_global_grad_norm_clipping_spans_all_groups():
    # gradients [3, 4] (group 0) and [0, 12] (group 1): global norm sqrt(9+16+144) = 13, so
    # with max_grad_norm 1 every gradient is divided by 13 before the moments
    a, b = np.array([1.0, 2.0]), np.array([0.5, -0.5])
    ga, gb = np.array([3.0, 4.0]), np.array([0.0, 12.0])
    opt = LAMB([{"params": [a]}, {"params": [b], "weight_decay": 0.0}], lr=0.1,
               variant="apex")
    assert opt.defaults["max_grad_norm"] == 1.0 and opt.defaults["weight_decay"] == 0.01
    opt.step([ga, gb])
    close(opt.state[0]["exp_avg"], 0.1 * ga / 13.0)
    close(opt.state[0]["exp_avg_sq"], 0.001 * (ga / 13.0) ** 2)
    close(opt.state[1]["exp_avg"], 0.1 * gb / 13.0)
    # below the threshold nothing is scaled: norm 0.5
    opt2 = LAMB([np.array([1.0, 2.0])], lr=0.1, variant="apex")
    opt2.step([np.array([0.3, 0.4])])
    close(opt2.state[0]["exp_avg"], 0.1 * np.array([0.3, 0.4]))


def test_apex_gives_ratio_one_to_a_group_without_weight_decay():
    # apex/timm adapt only when weight_decay != 0 (unless always_adapt): the lambda = 0 group
    # takes the plain bias-corrected Adam step lr * r
    lr, eps = 0.1, 1e-6
    w0, b0 = np.array([3.0, -4.0]), np.array([0.25, 0.5])
    gw, gb = np.array([0.3, 0.1]), np.array([-0.2, 0.1])   # global norm < 1: no clipping
    w, b = w0.copy(), b0.copy()
    run([{"params": [w]}, {"params": [b], "weight_decay": 0.0}], [[gw, gb]], lr=lr,
        variant="apex")
    rb = gb / (np.abs(gb) + eps)
    close(b, b0 - lr * rb)                                   # ratio 1
    u = gw / (np.abs(gw) + eps) + 0.01 * w0
    close(w, w0 - lr * (5.0 / np.sqrt(np.sum(u ** 2))) * u)   # adapted (lambda = 0.01)
    # always_adapt restores the ratio ||b|| / ||r|| for the lambda = 0 group
    b_always = b0.copy()
    run([{"params": [w0.copy()]}, {"params": [b_always], "weight_decay": 0.0}], [[gw, gb]],
        lr=lr, variant="apex", always_adapt=True)
    close(b_always, b0 - lr * (np.sqrt(np.sum(b0 ** 2)) / np.sqrt(np.sum(rb ** 2))) * rb)


def test_apex_without_clipping_and_with_always_adapt_is_the_paper_bit_for_bit():
    rng = np.random.default_rng(1)
    w0, grads = rng.standard_normal(7), [10 * rng.standard_normal(7) for _ in range(3)]
    a, b = w0.copy(), w0.copy()
    run([a], [[g] for g in grads], lr=0.01, weight_decay=0.01)
    run([b], [[g] for g in grads], lr=0.01, variant="timm", max_grad_norm=None,
        always_adapt=True)
    np.testing.assert_array_equal(a, b)


def test_no_grad_averaging_and_l2_mode_feed_the_moments():
    # grad_averaging=False: m = b1 m + g; "l2": g + lambda w goes into m and v, not into u
    lam = 0.5
    w0, g = np.array([1.0, -2.0]), np.array([0.25, 0.5])
    opt = run([w0.copy()], [[g]], lr=0.1, weight_decay=lam, grad_averaging=False,
              weight_decay_mode="l2")
    close(opt.state[0]["exp_avg"], g + lam * w0)
    close(opt.state[0]["exp_avg_sq"], 0.001 * (g + lam * w0) ** 2)


def test_no_bias_correction_apex_form_hand_derived():
    lr, eps = 0.1, 1e-6
    w0, g = np.array([3.0, -4.0]), np.array([0.5, 0.25])
    w = w0.copy()
    run([w], [[g]], lr=lr, eps=eps, variant="apex", bias_correction=False,
        grad_averaging=False)
    m = g                                  # b1 * 0 + g
    v = 0.001 * g ** 2
    r = m / (np.sqrt(v) + eps)             # no correction: b1 = b2 = 1
    u = r + 0.01 * w0
    close(w, w0 - lr * (5.0 / np.sqrt(np.sum(u ** 2))) * u)


# ------------------------------------------------------------------- keras3, albert, kozistr
def test_keras3_decays_first_and_outside_the_ratio():
    lr, lam, eps = 0.1, 0.2, 1e-7
    w0, g = np.array([3.0, -4.0, 1.0]), np.array([1.0, 0.5, -2.0])
    w = w0.copy()
    opt = run([w], [[g]], lr=lr, weight_decay=lam, variant="keras3")
    assert opt.defaults["eps"] == 1e-7
    w_decayed = w0 * (1 - lr * lam)        # w - w * lambda * lr, before the update
    r = (0.1 * g / 0.1) / (np.sqrt(0.001 * g ** 2) / np.sqrt(0.001) + eps)
    ratio = np.sqrt(np.sum(w_decayed ** 2)) / np.sqrt(np.sum(r ** 2))   # ||w|| / ||r||
    close(w, w_decayed - lr * ratio * r)


def test_albert_v3_has_no_bias_correction():
    lr, lam, eps = 0.1, 0.01, 1e-6
    w0, g = np.array([3.0, -4.0]), np.array([1.0, 2.0])
    w = w0.copy()
    run([w], [[g]], lr=lr, weight_decay=lam, variant="albert_v3")
    m, v = 0.1 * g, 0.001 * g ** 2
    r = m / (np.sqrt(v) + eps)             # ~0.316 sign(g), not ~sign(g)
    u = r + lam * w0
    close(w, w0 - lr * (5.0 / np.sqrt(np.sum(u ** 2))) * u)


def test_kozistr_step_size_bias_correction_phi_clamp_and_trust_eps():
    # ||w|| = 25 > 10: phi clamps the numerator at 10; the step is lr / (1 - b1), outside the
    # ratio; eps also sits in the ratio's denominator; decay first (decoupled)
    lr, lam, eps = 0.01, 0.1, 1e-6
    w0, g = np.array([15.0, -20.0]), np.array([0.5, 2.0])
    w = w0.copy()
    opt = run([w], [[g]], lr=lr, weight_decay=lam, variant="kozistr")
    assert opt.defaults["trust_eps"] == opt.defaults["eps"] == eps
    w_decayed = w0 * (1 - lr * lam)
    m, v = 0.1 * g, 0.001 * g ** 2
    r = m / (np.sqrt(v) + eps)
    ratio = min(np.sqrt(np.sum(w_decayed ** 2)), 10.0) / (np.sqrt(np.sum(r ** 2)) + eps)
    close(w, w_decayed - (lr / (1 - B1)) * ratio * r)


def test_tutorial_ratio_uses_the_raw_gradient_norm_clamped_to_ten():
    lr, lam, eps = 0.1, 0.01, 1e-6
    w0 = np.array([3.0, -4.0])
    small, large = np.array([0.03, 0.04]), np.array([3.0, 4.0])   # ||g|| = 0.05 and 5
    for g, expected_ratio in ((small, 10.0), (large, None)):
        w = w0.copy()
        run([w], [[g]], lr=lr, weight_decay=lam, variant="tutorial")
        w_decayed = w0 * (1 - lr * lam)
        r = g / (np.abs(g) + eps)
        ratio = np.sqrt(np.sum(w_decayed ** 2)) / np.sqrt(np.sum(g ** 2))
        if expected_ratio is not None:
            assert ratio > 10
            ratio = expected_ratio          # 99 clamped to 10
        close(w, w_decayed - lr * ratio * r)


def test_variants_differ_from_the_paper_and_from_each_other():
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((4, 3))
    grads = [3 * rng.standard_normal((4, 3)) for _ in range(3)]
    results = {}
    for variant in VARIANTS:
        w = w0.copy()
        run([w], [[g] for g in grads], lr=1e-2, weight_decay=0.01, variant=variant)
        results[variant] = w
    names = sorted(results)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert np.abs(results[a] - results[b]).max() > 1e-6, (a, b)


def test_explicit_keywords_override_the_variant():
    w = np.ones(2)
    opt = LAMB([w], variant="apex", max_grad_norm=None, eps=1e-8)
    assert opt.variant == "apex"
    assert opt.defaults["max_grad_norm"] is None and opt.defaults["eps"] == 1e-8
    assert opt.defaults["weight_decay"] == 0.01 and opt.defaults["always_adapt"] is False
    opt = LAMB([np.ones(2)], variant="kozistr", eps=1e-4)
    assert opt.defaults["trust_eps"] == 1e-4          # follows eps unless given
    opt = LAMB([np.ones(2)], variant="kozistr", eps=1e-4, trust_eps=0.0)
    assert opt.defaults["trust_eps"] == 0.0


# ------------------------------------------------------------------ dtype and the reduction
def test_float32_is_computed_in_float32():
    rng = np.random.default_rng(2)
    w64 = rng.standard_normal((5, 3))
    grads = [rng.standard_normal((5, 3)) for _ in range(2)]
    w32 = w64.astype(np.float32)
    opt = run([w32], [[g.astype(np.float32)] for g in grads], lr=0.01, weight_decay=0.01,
              variant="apex")
    run([w64], [[g] for g in grads], lr=0.01, weight_decay=0.01, variant="apex")
    assert w32.dtype == np.float32 and opt.state[0]["exp_avg"].dtype == np.float32
    np.testing.assert_allclose(w32, w64, rtol=2e-6, atol=2e-6)
    # each rule, called with float32 values and a float32 hyper record, is typed float32 only
    f = np.float32
    hyper = lamb_module.LAMBHyper(
        clip_divisor=f(1), l2=f(0.1), beta1=f(0.9), beta3=f(0.1), beta2=f(0.999),
        one_minus_beta2=f(0.001), decay_factor=f(0.999), bias_correction1=f(0.1),
        bias_correction2_sqrt=f(0.03), eps=f(1e-6), update_decay=f(0.01),
        trust_norm_is_grad=f(0), neg_step=f(-0.01))
    for rule, args in ((lamb_module.lamb_moments_rule, (f(1), f(2), (f(3), f(4)), hyper)),
                       (lamb_module.lamb_direction, (f(1), f(2), f(3), hyper)),
                       (lamb_module.lamb_update_rule, (f(1), (f(3), f(4)), hyper))):
        assert_typed_float32(rule, args)


def fixed_order_sumsq(x):
    """The summation order of ``sumsq_pair``, written out in NumPy/Python (see its docstring)."""
    blocks = []
    for start in range(0, x.size, BLOCK):
        block = x[start:start + BLOCK]
        lanes = np.zeros(LANES, x.dtype)
        for row in range(0, block.size, LANES):  # element i to lane i % LANES, in order
            chunk = block[row:row + LANES]
            lanes[:chunk.size] += chunk * chunk
        width = LANES // 2
        while width:  # lane k takes lane k + width
            lanes[:width] += lanes[width:2 * width]
            width //= 2
        blocks.append(lanes[0])
    stack = []  # block sums combined as a binary counter combines carries
    for s in blocks:
        stack.append([s, 0])
        while len(stack) > 1 and stack[-1][1] == stack[-2][1]:
            top = stack.pop()
            stack[-1] = [stack[-1][0] + top[0], stack[-1][1] + 1]
    expected = x.dtype.type(0)
    if stack:
        expected = stack[-1][0]
        for s, _ in reversed(stack[:-1]):
            expected = s + expected
    return expected


@pytest.mark.parametrize("n", [0, 1, 5, LANES - 1, LANES + 1, BLOCK - 1, BLOCK, BLOCK + 1,
                               3 * BLOCK + 7, 100_000])
def test_sumsq_is_the_fixed_block_lane_pairwise_sum(n):
    rng = np.random.default_rng(n)
    g = rng.standard_normal(n)
    got = grad_sumsq(g)
    assert got == fixed_order_sumsq(g)
    assert got == pytest.approx(math.fsum(g * g), rel=1e-13, abs=0)
    g32 = g.astype(np.float32)
    got32 = grad_sumsq(g32)
    assert got32 == fixed_order_sumsq(g32)  # (a float32 value, returned as a Python float)
    assert got32 == pytest.approx(math.fsum(g32.astype(float) ** 2), rel=2e-6, abs=0)


@pytest.mark.parametrize("n", [BLOCK * _TASK_BLOCKS + 5, 300_001])
def test_sumsq_is_the_same_serial_and_parallel(n):
    g = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    with parallel_threshold_set(None):
        serial = grad_sumsq(g)
    with parallel_threshold_set(0):
        parallel = grad_sumsq(g)
    assert serial == parallel == fixed_order_sumsq(g)


# ------------------------------------------------------------------------------ the API
@pytest.mark.parametrize("kw, match", [
    (dict(variant="nvlamb2"), "unknown variant"),
    (dict(lr=-1.0), "learning rate"),
    (dict(eps=-1e-6), "epsilon"),
    (dict(weight_decay=-0.1), "weight_decay"),
    (dict(betas=(1.0, 0.999)), "beta parameter at index 0"),
    (dict(bias_correction="first"), "bias_correction"),
    (dict(bias_correction=1), "bias_correction"),
    (dict(grad_averaging="yes"), "grad_averaging"),
    (dict(weight_decay_mode="adamw"), "weight_decay_mode"),
    (dict(trust_norm="weights"), "trust_norm"),
    (dict(phi_bounds=(10.0, 1.0)), "phi_bounds"),
    (dict(phi_bounds=5.0), "phi_bounds"),
    (dict(ratio_bounds=(-1.0, 10.0)), "ratio_bounds"),
    (dict(trust_eps=-1.0), "trust_eps"),
    (dict(max_grad_norm=0.0), "max_grad_norm"),
    (dict(max_grad_norm=math.inf), "max_grad_norm"),
    (dict(trust_clip=None), "trust_clip"),
])
def test_invalid_hyperparameters_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        LAMB([np.ones(2)], **kw)


def test_max_grad_norm_cannot_differ_per_group():
    with pytest.raises(ValueError, match="whole optimizer"):
        LAMB([{"params": [np.ones(2)], "max_grad_norm": 5.0}], variant="apex")
    with pytest.raises(ValueError, match="variant is chosen for the whole optimizer"):
        LAMB([{"params": [np.ones(2)], "variant": "apex"}])


def test_invalid_group_at_step_time_changes_nothing():
    w = np.array([1.0, 2.0])
    opt = LAMB([w], lr=0.1, variant="apex")
    opt.step([np.array([0.1, 0.2])])
    before_w, before_m = w.copy(), opt.state[0]["exp_avg"].copy()
    opt.param_groups[0]["weight_decay_mode"] = "bogus"
    with pytest.raises(ValueError, match="param group 0: weight_decay_mode"):
        opt.step([np.array([0.1, 0.2])])
    np.testing.assert_array_equal(w, before_w)
    np.testing.assert_array_equal(opt.state[0]["exp_avg"], before_m)
    assert opt.state[0]["step"] == 1


def test_sparse_gradients_are_refused():
    w = np.ones((3, 2))
    with pytest.raises(TypeError, match="sparse"):
        LAMB([w]).step([scipy.sparse.csr_matrix(np.ones((3, 2)))])


def test_state_dict_round_trip_continues_bit_identically():
    rng = np.random.default_rng(3)
    w0, b0 = rng.standard_normal((3, 2)), rng.standard_normal(2)
    grads = [[rng.standard_normal((3, 2)), rng.standard_normal(2)] for _ in range(4)]
    w, b = w0.copy(), b0.copy()
    opt = LAMB([w, b], lr=0.01, variant="apex")
    for gs in grads[:2]:
        opt.step(gs)
    saved, w_mid, b_mid = opt.state_dict(), w.copy(), b.copy()
    assert set(saved["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}
    for gs in grads[2:]:
        opt.step(gs)
    w2, b2 = w_mid.copy(), b_mid.copy()
    opt2 = LAMB([w2, b2], lr=0.01, variant="apex")
    opt2.load_state_dict(saved)
    for gs in grads[2:]:
        opt2.step(gs)
    np.testing.assert_array_equal(w, w2)
    np.testing.assert_array_equal(b, b2)


# ------------------------------------------------------------- published implementations
def _two_layer_problem():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3))
    b = 0.1 * rng.standard_normal(3)
    grads = [(3 * rng.standard_normal((4, 3)), 3 * rng.standard_normal(3)) for _ in range(3)]
    return w, b, grads


@needs_torch
def test_torch_adam_and_adamw_match_the_non_adapted_path():
    # ratio 1 (excluded group): LAMB is bias-corrected Adam, and with decoupled decay AdamW
    w0, b0, grads = _two_layer_problem()
    for mode, torch_cls in (("in_update", None), ("decoupled", torch.optim.AdamW)):
        lam = 0.0 if torch_cls is None else 0.05
        torch_cls = torch_cls or torch.optim.Adam
        w = w0.copy()
        run([{"params": [w], "exclude_from_layer_adaptation": True}], [[g] for g, _ in grads],
            lr=0.01, eps=1e-8, weight_decay=lam, weight_decay_mode=mode)
        tw = torch.tensor(w0, requires_grad=True)
        opt = torch_cls([tw], lr=0.01, eps=1e-8, weight_decay=lam)
        for g, _ in grads:
            tw.grad = torch.tensor(g)
            opt.step()
        close(w, tw.detach().numpy(), rtol=1e-12)


@pytest.mark.needs("optax", "jax")
def test_optax_lamb_matches_the_default():
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    w0, b0, grads = _two_layer_problem()
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        import jax.numpy as jnp
        params = {"w": jnp.asarray(w0), "b": jnp.asarray(b0)}
        tx = optax.lamb(1e-2, eps=1e-6, weight_decay=0.01)
        state = tx.init(params)
        for gw, gb in grads:
            updates, state = tx.update({"w": jnp.asarray(gw), "b": jnp.asarray(gb)}, state,
                                       params)
            params = optax.apply_updates(params, updates)
        expected_w, expected_b = np.asarray(params["w"]), np.asarray(params["b"])
    finally:
        jax.config.update("jax_enable_x64", previous)
    w, b = w0.copy(), b0.copy()
    run([w, b], [list(gs) for gs in grads], lr=1e-2, weight_decay=0.01, variant="optax")
    close(w, expected_w, rtol=1e-12)
    close(b, expected_b, rtol=1e-12)


def _torch_run(torch, make_opt, w0, b0, grads, wd_b):
    tw = torch.tensor(w0, requires_grad=True)
    tb = torch.tensor(b0, requires_grad=True)
    opt = make_opt([{"params": [tw]}, {"params": [tb], "weight_decay": wd_b}])
    for gw, gb in grads:
        tw.grad, tb.grad = torch.tensor(gw), torch.tensor(gb)
        opt.step()
    return tw.detach().numpy(), tb.detach().numpy()


@pytest.mark.needs("torch", "timm")
@pytest.mark.parametrize("wd_b", [0.01, 0.0])
def test_timm_lamb_matches_the_apex_variant(wd_b):
    timm_lamb = timm_optim("lamb")
    w0, b0, grads = _two_layer_problem()
    cases = [(dict(), dict()),
             (dict(trust_clip=True), dict(trust_clip=True)),
             (dict(bias_correction=False, grad_averaging=False),
              dict(bias_correction=False, grad_averaging=False)),
             (dict(decoupled_decay=True, max_grad_norm=None, always_adapt=True),
              dict(weight_decay_mode="decoupled", max_grad_norm=None, always_adapt=True))]
    for timm_kw, kw in cases:
        expected = _torch_run(torch, lambda g: timm_lamb.Lamb(g, lr=1e-2, **timm_kw), w0, b0,
                              grads, wd_b)
        w, b = w0.copy(), b0.copy()
        run([{"params": [w]}, {"params": [b], "weight_decay": wd_b}],
            [list(gs) for gs in grads], lr=1e-2, variant="timm", **kw)
        close(w, expected[0], rtol=1e-12)
        close(b, expected[1], rtol=1e-12)


@needs_torch
@pytest.mark.parametrize("scale", [1.0, 10.0])
def test_kozistr_lamb_matches_the_kozistr_variant(scale):
    pytorch_optimizer = pytest.importorskip("pytorch_optimizer")
    w0, b0, grads = _two_layer_problem()
    w0 = scale * w0      # scale 10: ||w|| > 10, phi clamps
    expected = _torch_run(torch, lambda g: pytorch_optimizer.Lamb(g, lr=1e-2, weight_decay=0.05),
                          w0, b0, grads, 0.05)
    w, b = w0.copy(), b0.copy()
    run([w, b], [list(gs) for gs in grads], lr=1e-2, weight_decay=0.05, variant="kozistr")
    close(w, expected[0], rtol=1e-12)
    close(b, expected[1], rtol=1e-12)
