"""LARS: hand-derived values of each variant, the variants' signature behaviours, validation,
and cross-checks against published implementations where they install (optax, timm) and
against torch's SGD for the non-adapted path.

Hand derivations are float64 on 2-element arrays; each writes the algorithm's arithmetic out
with NumPy, one line per formula of the module docstring.
"""
import numpy as np
import pytest
import scipy.sparse
from hand_derived import assert_typed_float32, close

from npoptim.optim import lars as lars_module
from npoptim.optim.lars import LARS, VARIANTS
from torch_compare import needs_torch, timm_optim, torch


def norm(x):
    return np.sqrt(np.sum(x ** 2))


def run(params, grads_per_step, lrs=None, **kw):
    """Steps with the given gradients; ``lrs``: the lr of each step (a schedule)."""
    opt = LARS(params, **kw)
    for k, grads in enumerate(grads_per_step):
        if lrs is not None:
            for group in opt.param_groups:
                group["lr"] = lrs[k]
        opt.step(grads)
    return opt


W0 = np.array([3.0, -4.0])            # ||w|| = 5
G1 = np.array([0.3, 0.4])             # ||g|| = 0.5
G2 = np.array([-0.1, 0.2])


# --------------------------------------------------------------------------- paper (default)
def test_paper_algorithm_1_two_steps_hand_derived():
    lr, mu, lam, eta = 0.1, 0.9, 0.01, 0.001
    w = W0.copy()
    opt = run([w], [[G1], [G2]], lr=lr, momentum=mu, weight_decay=lam)
    # step 1: local lr = eta ||w|| / (||g|| + lambda ||w||); v = mu v + lr * local * (g + lam w)
    rho1 = eta * 5.0 / (0.5 + lam * 5.0)
    v1 = 0.0 * mu + lr * rho1 * (G1 + lam * W0)
    w1 = W0 - v1
    # step 2
    rho2 = eta * norm(w1) / (norm(G2) + lam * norm(w1))
    v2 = mu * v1 + lr * rho2 * (G2 + lam * w1)
    w2 = w1 - v2
    close(w, w2)
    close(opt.state[0]["momentum_buffer"], v2)      # the buffer holds the lr-scaled velocity
    assert opt.state[0]["step"] == 2


def test_lr_schedule_distinguishes_paper_and_torch_momentum_conventions():
    mu, lam, eta = 0.9, 0.01, 0.001
    lr1, lr2 = 0.1, 0.02
    paper, torch_style = W0.copy(), W0.copy()
    run([paper], [[G1], [G2]], lrs=[lr1, lr2], momentum=mu, weight_decay=lam)
    run([torch_style], [[G1], [G2]], lrs=[lr1, lr2], momentum=mu, weight_decay=lam,
        variant="torchlars", eps=0.0)
    rho1 = eta * 5.0 / (0.5 + lam * 5.0)
    d1 = G1 + lam * W0
    # paper: lr inside the buffer, the old velocity keeps lr1
    v1 = lr1 * rho1 * d1
    w1 = W0 - v1
    rho2 = eta * norm(w1) / (norm(G2) + lam * norm(w1))
    expected_paper = w1 - (mu * v1 + lr2 * rho2 * (G2 + lam * w1))
    # torch: lr outside, the whole buffer is rescaled by the new lr2
    b1 = rho1 * d1
    w1t = W0 - lr1 * b1
    rho2t = eta * norm(w1t) / (norm(G2) + lam * norm(w1t))
    expected_torch = w1t - lr2 * (mu * b1 + rho2t * (G2 + lam * w1t))
    close(paper, expected_paper)
    close(torch_style, expected_torch)
    # they differ by about mu (lr1 - lr2) rho1 d1
    np.testing.assert_allclose(torch_style - paper, mu * (lr1 - lr2) * rho1 * d1, rtol=1e-3)
    # with a constant lr the two conventions agree to rounding
    a, b = W0.copy(), W0.copy()
    run([a], [[G1], [G2]], lr=lr1, momentum=mu, weight_decay=lam)
    run([b], [[G1], [G2]], lr=lr1, momentum=mu, weight_decay=lam, momentum_convention="torch")
    close(a, b, rtol=1e-15)


def test_zero_norm_param_takes_ratio_one():
    lr, mu = 0.1, 0.9
    w = np.zeros(2)
    run([w], [[G1], [G2]], lr=lr, momentum=mu, weight_decay=0.01)
    v1 = lr * 1.0 * G1                       # ratio 1, lambda w = 0
    w1 = -v1
    rho2 = 0.001 * norm(w1) / (norm(G2) + 0.01 * norm(w1))   # ||w1|| > 0 now: adapted
    close(w, w1 - (mu * v1 + lr * rho2 * (G2 + 0.01 * w1)))


def test_zero_gradient_takes_ratio_one_and_applies_only_decay():
    w = W0.copy()
    run([w], [[np.zeros(2)]], lr=0.1, weight_decay=0.01)
    close(w, W0 - 0.1 * 1.0 * (0.01 * W0))


def test_momentum_zero_is_plain_trust_scaled_sgd_and_leaves_the_buffer_alone():
    w = W0.copy()
    opt = run([w], [[G1]], lr=0.1, momentum=0.0, weight_decay=0.01)
    rho = 0.001 * 5.0 / (0.5 + 0.01 * 5.0)
    close(w, W0 - 0.1 * rho * (G1 + 0.01 * W0))
    np.testing.assert_array_equal(opt.state[0]["momentum_buffer"], 0.0)


def test_nesterov_in_the_paper_convention_hand_derived():
    lr, mu, lam = 0.1, 0.9, 0.01
    w = W0.copy()
    run([w], [[G1], [G2]], lr=lr, momentum=mu, weight_decay=lam, nesterov=True)
    x1 = lr * (0.001 * 5.0 / (0.5 + lam * 5.0)) * (G1 + lam * W0)
    b1 = x1
    w1 = W0 - (x1 + mu * b1)
    x2 = lr * (0.001 * norm(w1) / (norm(G2) + lam * norm(w1))) * (G2 + lam * w1)
    b2 = mu * b1 + x2
    close(w, w1 - (x2 + mu * b2))


def test_dampening_first_step_copies_then_damps_torch_rule():
    lr, mu, tau, lam = 0.1, 0.9, 0.25, 0.01
    w = W0.copy()
    run([w], [[G1], [G2]], lr=lr, momentum=mu, dampening=tau, weight_decay=lam,
        variant="torchlars", eps=0.0)
    b1 = (0.001 * 5.0 / (0.5 + lam * 5.0)) * (G1 + lam * W0)       # not scaled by 1 - tau
    w1 = W0 - lr * b1
    x2 = (0.001 * norm(w1) / (norm(G2) + lam * norm(w1))) * (G2 + lam * w1)
    close(w, w1 - lr * (mu * b1 + (1 - tau) * x2))


# ------------------------------------------------------------------------------ variants
def test_optax_denominator_is_the_norm_of_the_decayed_gradient():
    lr, mu, lam = 0.1, 0.9, 0.5
    w = W0.copy()
    run([w], [[G1]], lr=lr, momentum=mu, weight_decay=lam, variant="optax")
    d = G1 + lam * W0
    rho = 0.001 * 5.0 / (norm(d) + 0.0)           # ||g + lambda w||, not ||g|| + lambda ||w||
    close(w, W0 - lr * rho * d)
    other = W0.copy()
    run([other], [[G1]], lr=lr, momentum=mu, weight_decay=lam)
    assert abs(other - w).max() > 1e-6


def test_eps_sits_in_the_denominator():
    w = W0.copy()
    run([w], [[G1]], lr=0.1, weight_decay=0.01, eps=0.25)
    close(w, W0 - 0.1 * (0.001 * 5.0 / (0.5 + 0.01 * 5.0 + 0.25)) * (G1 + 0.01 * W0))


def test_larc_clip_caps_the_local_lr_at_the_global_lr():
    lr = 0.1
    small = np.array([0.003, 0.004])          # ||g|| = 0.005: eta ||w|| / ||g|| = 20 > lr
    large = np.array([30.0, 40.0])            # ||g|| = 50: 0.002 < lr
    w = W0.copy()
    opt = run([w], [[small]], lr=lr, variant="larc")
    assert opt.defaults["trust_coefficient"] == 0.02 and opt.defaults["trust_clip"] is True
    close(w, W0 - lr * (1.0 * small))          # local lr = min(lr * rho, lr) = lr
    unclipped = W0.copy()
    run([unclipped], [[small]], lr=lr, variant="larc", trust_clip=False)
    close(unclipped, W0 - lr * ((0.02 * 5.0 / (0.005 + 1e-8)) * small))
    w = W0.copy()
    run([w], [[large]], lr=lr, variant="larc")
    rho = 0.02 * 5.0 / (50.0 + 1e-8)
    close(w, W0 - lr * ((rho / lr) * large))   # below the cap: local lr = lr * rho / lr


def test_timm_adapts_only_with_weight_decay_unless_always_adapt():
    lr = 0.1
    w = W0.copy()
    run([w], [[G1]], lr=lr, variant="timm")   # lambda = 0: plain SGD
    close(w, W0 - lr * G1)
    w = W0.copy()
    run([w], [[G1]], lr=lr, variant="timm", always_adapt=True)
    close(w, W0 - lr * ((0.001 * 5.0 / (0.5 + 0.0 * 5.0 + 1e-8)) * G1))
    w = W0.copy()
    run([w], [[G1]], lr=lr, variant="torchlars")   # torchlars always adapts
    close(w, W0 - lr * ((0.001 * 5.0 / (0.5 + 0.0 * 5.0 + 1e-8)) * G1))


def test_tutorial_velocity_holds_the_raw_gradient_and_decay_is_only_in_the_ratio():
    lr, mu, lam, eta, eps = 0.1, 0.9, 0.01, 0.001, 1e-8
    w = W0.copy()
    opt = run([w], [[G1], [G2]], lr=lr, momentum=mu, weight_decay=lam, variant="tutorial")
    v1 = G1                                            # raw gradient, no lambda w
    rho1 = eta * 5.0 / (0.5 + lam * 5.0 + eps)
    w1 = W0 - (lr * rho1) * v1
    v2 = mu * v1 + G2
    rho2 = eta * norm(w1) / (norm(G2) + lam * norm(w1) + eps)
    close(w, w1 - (lr * rho2) * v2)
    close(opt.state[0]["momentum_buffer"], v2)


def test_exclude_1d_params_get_plain_momentum_sgd():
    lr, mu, lam = 0.1, 0.9, 0.1
    w0 = np.array([[3.0, 0.0], [0.0, -4.0]])
    b0 = np.array([0.5, -0.5])
    gw1, gw2 = np.array([[0.3, 0.0], [0.1, 0.4]]), np.array([[0.1, 0.2], [0.0, -0.1]])
    gb1, gb2 = np.array([1.0, 2.0]), np.array([-1.0, 0.5])
    w, b = w0.copy(), b0.copy()
    run([w, b], [[gw1, gb1], [gw2, gb2]], lr=lr, momentum=mu, weight_decay=lam,
        exclude_1d=True)
    # the bias: no ratio, no decay -- v = mu v + lr g
    v1 = lr * gb1
    close(b, b0 - v1 - (mu * v1 + lr * gb2))
    # the 2-D weight is adapted and decayed as usual (step 1 checked)
    w_only = w0.copy()
    run([w_only], [[gw1]], lr=lr, momentum=mu, weight_decay=lam, exclude_1d=True)
    rho = 0.001 * 5.0 / (norm(gw1) + lam * 5.0)
    close(w_only, w0 - lr * rho * (gw1 + lam * w0))
    # without exclude_1d the bias is adapted and decayed
    b_adapted = b0.copy()
    run([b_adapted], [[gb1]], lr=lr, momentum=mu, weight_decay=lam)
    rho_b = 0.001 * norm(b0) / (norm(gb1) + lam * norm(b0))
    close(b_adapted, b0 - lr * rho_b * (gb1 + lam * b0))


def test_exclude_from_layer_adaptation_group_keeps_decay():
    w = W0.copy()
    run([{"params": [w], "exclude_from_layer_adaptation": True}], [[G1]], lr=0.1,
        weight_decay=0.01)
    close(w, W0 - 0.1 * 1.0 * (G1 + 0.01 * W0))


def test_every_variant_differs_from_the_paper_under_a_schedule():
    rng = np.random.default_rng(1)
    w0, b0 = rng.standard_normal((4, 3)), 0.1 * rng.standard_normal(3)
    grads = [[rng.standard_normal((4, 3)), rng.standard_normal(3)] for _ in range(4)]
    lrs = [0.1, 0.05, 0.02, 0.01]
    results = {}
    for variant in VARIANTS:
        w, b = w0.copy(), b0.copy()
        run([w, b], grads, lrs=lrs, weight_decay=1e-4, variant=variant)
        results[variant] = np.concatenate([w.ravel(), b])
    for variant, result in results.items():
        if variant != "paper":
            assert np.abs(result - results["paper"]).max() > 1e-9, variant


def test_explicit_keywords_override_the_variant():
    opt = LARS([np.ones(2)], variant="larc", trust_clip=False, trust_coefficient=1e-3)
    assert opt.variant == "larc"
    assert opt.defaults["trust_clip"] is False and opt.defaults["trust_coefficient"] == 1e-3
    assert opt.defaults["momentum_convention"] == "torch" and opt.defaults["eps"] == 1e-8
    assert LARS([np.ones(2)], variant="apex_larc").variant == "larc"


def test_float32_is_computed_in_float32():
    rng = np.random.default_rng(2)
    w64 = rng.standard_normal((5, 3))
    grads = [rng.standard_normal((5, 3)) for _ in range(3)]
    w32 = w64.astype(np.float32)
    opt = run([w32], [[g.astype(np.float32)] for g in grads], lr=0.5, weight_decay=1e-4)
    run([w64], [[g] for g in grads], lr=0.5, weight_decay=1e-4)
    assert w32.dtype == np.float32 and opt.state[0]["momentum_buffer"].dtype == np.float32
    np.testing.assert_allclose(w32, w64, rtol=2e-6, atol=2e-6)
    f = np.float32
    hyper = lars_module.LARSHyper(decay=f(0.01), scale=f(0.1), momentum=f(0.9),
                                  one_minus_dampening=f(1.0), first_step=f(0.0),
                                  nesterov=f(1.0), neg_step=f(-1.0))
    norm_hyper = lars_module.LARSNormHyper(grad_decay=f(0.5))
    for rule, args in ((lars_module.lars_rule, (f(1), f(2), (f(3),), hyper)),
                       (lars_module.lars_norm_terms, (f(1), f(2), (), norm_hyper))):
        assert_typed_float32(rule, args)


# ------------------------------------------------------------------------------ the API
@pytest.mark.parametrize("kw, match", [
    (dict(variant="lamb"), "unknown variant"),
    (dict(lr=-1.0), "learning rate"),
    (dict(momentum=-0.1), "momentum"),
    (dict(weight_decay=-1e-4), "weight_decay"),
    (dict(eps=-1.0), "epsilon"),
    (dict(dampening=1.5), "dampening"),
    (dict(trust_coefficient=0.0), "trust_coefficient"),
    (dict(trust_coefficient=float("nan")), "trust_coefficient"),
    (dict(nesterov=True, momentum=0.0), "Nesterov"),
    (dict(nesterov=True, dampening=0.1), "Nesterov"),
    (dict(momentum_convention="optax"), "momentum_convention"),
    (dict(trust_denominator="norm"), "trust_denominator"),
    (dict(trust_clip=1), "trust_clip"),
    (dict(exclude_1d="yes"), "exclude_1d"),
])
def test_invalid_hyperparameters_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        LARS([np.ones(2)], **kw)


def test_a_group_cannot_choose_a_variant():
    with pytest.raises(ValueError, match="variant is chosen for the whole optimizer"):
        LARS([{"params": [np.ones(2)], "variant": "larc"}])


def test_invalid_group_at_step_time_changes_nothing():
    w = W0.copy()
    opt = LARS([w], lr=0.1, weight_decay=0.01)
    opt.step([G1])
    before_w, before_b = w.copy(), opt.state[0]["momentum_buffer"].copy()
    opt.param_groups[0]["momentum_convention"] = "bogus"
    with pytest.raises(ValueError, match="param group 0: momentum_convention"):
        opt.step([G2])
    np.testing.assert_array_equal(w, before_w)
    np.testing.assert_array_equal(opt.state[0]["momentum_buffer"], before_b)


def test_sparse_gradients_are_refused():
    with pytest.raises(TypeError, match="sparse"):
        LARS([np.ones((3, 2))]).step([scipy.sparse.csr_matrix(np.ones((3, 2)))])


def test_state_dict_round_trip_continues_bit_identically():
    rng = np.random.default_rng(3)
    w0, b0 = rng.standard_normal((3, 2)), rng.standard_normal(2)
    grads = [[rng.standard_normal((3, 2)), rng.standard_normal(2)] for _ in range(4)]
    w, b = w0.copy(), b0.copy()
    opt = LARS([w, b], lr=0.1, weight_decay=1e-4, dampening=0.1, variant="timm")
    for gs in grads[:2]:
        opt.step(gs)
    saved, w_mid, b_mid = opt.state_dict(), w.copy(), b.copy()
    assert set(saved["state"][0]) == {"step", "momentum_buffer"}
    for gs in grads[2:]:
        opt.step(gs)
    w2, b2 = w_mid.copy(), b_mid.copy()
    opt2 = LARS([w2, b2], lr=0.1, weight_decay=1e-4, dampening=0.1, variant="timm")
    opt2.load_state_dict(saved)
    for gs in grads[2:]:
        opt2.step(gs)
    np.testing.assert_array_equal(w, w2)
    np.testing.assert_array_equal(b, b2)


# ------------------------------------------------------------- published implementations
def _problem():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((4, 3))
    b = 0.1 * rng.standard_normal(3)
    grads = [(rng.standard_normal((4, 3)), rng.standard_normal(3)) for _ in range(4)]
    return w, b, grads


LRS = [0.1, 0.05, 0.02, 0.01]


def _torch_run(torch, make_opt, w0, b0, grads, lrs):
    tw = torch.tensor(w0, requires_grad=True)
    tb = torch.tensor(b0, requires_grad=True)
    opt = make_opt([tw, tb])
    for lr, (gw, gb) in zip(lrs, grads):
        opt.param_groups[0]["lr"] = lr
        tw.grad, tb.grad = torch.tensor(gw), torch.tensor(gb)
        opt.step()
    return tw.detach().numpy(), tb.detach().numpy()


@needs_torch
@pytest.mark.parametrize("kw", [dict(), dict(nesterov=True), dict(dampening=0.3)])
def test_torch_sgd_matches_the_non_adapted_torch_convention(kw):
    # timm without weight decay does not adapt: it is torch's SGD, lr schedule included
    w0, b0, grads = _problem()
    expected = _torch_run(torch, lambda p: torch.optim.SGD(p, lr=LRS[0], momentum=0.9, **kw),
                          w0, b0, grads, LRS)
    w, b = w0.copy(), b0.copy()
    run([w, b], [list(gs) for gs in grads], lrs=LRS, momentum=0.9, variant="timm", **kw)
    close(w, expected[0], rtol=1e-12)
    close(b, expected[1], rtol=1e-12)


@pytest.mark.needs("optax", "jax")
def test_optax_lars_matches_the_optax_variant():
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    w0, b0, grads = _problem()
    results = {}
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        import jax.numpy as jnp
        for nesterov in (False, True):
            tx = optax.lars(lambda count: jnp.asarray(LRS)[count], weight_decay=1e-4,
                            nesterov=nesterov)
            params = {"w": jnp.asarray(w0), "b": jnp.asarray(b0)}
            state = tx.init(params)
            for gw, gb in grads:
                updates, state = tx.update({"w": jnp.asarray(gw), "b": jnp.asarray(gb)},
                                           state, params)
                params = optax.apply_updates(params, updates)
            results[nesterov] = np.asarray(params["w"]), np.asarray(params["b"])
    finally:
        jax.config.update("jax_enable_x64", previous)
    for nesterov, (expected_w, expected_b) in results.items():
        w, b = w0.copy(), b0.copy()
        run([w, b], [list(gs) for gs in grads], lrs=LRS, weight_decay=1e-4, variant="optax",
            nesterov=nesterov)
        close(w, expected_w, rtol=1e-12)
        close(b, expected_b, rtol=1e-12)


@pytest.mark.parametrize("timm_kw, kw", [
    (dict(), dict(variant="timm")),
    (dict(nesterov=True), dict(variant="timm", nesterov=True)),
    (dict(dampening=0.3), dict(variant="timm", dampening=0.3)),
    (dict(always_adapt=True), dict(variant="torchlars")),
    (dict(trust_clip=True, always_adapt=True, trust_coeff=0.02), dict(variant="larc")),
])
@pytest.mark.needs("torch", "timm")
def test_timm_lars_matches_the_torch_convention_variants(timm_kw, kw):
    timm_lars = timm_optim("lars")
    w0, b0, grads = _problem()
    expected = _torch_run(
        torch, lambda p: timm_lars.Lars(p, lr=LRS[0], momentum=0.9, weight_decay=1e-4,
                                        **timm_kw), w0, b0, grads, LRS)
    w, b = w0.copy(), b0.copy()
    run([w, b], [list(gs) for gs in grads], lrs=LRS, momentum=0.9, weight_decay=1e-4, **kw)
    close(w, expected[0], rtol=1e-12)
    close(b, expected[1], rtol=1e-12)
