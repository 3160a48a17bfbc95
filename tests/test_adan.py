"""Adan: optax.adan 0.2.8 in float64 (variant="optax": defaults, decay, betas, maximize, a
schedule; two shapes, 24 steps), the authors' sail-sg/Adan ``_single_tensor_adan`` written out
in NumPy below (the default: proximal and no_prox decay), hand-derived steps, bad input."""
import math

import numpy as np
import pytest
from hand_derived import assert_typed_float32, assert_unchanged, close, snapshot
from optax_compare import (assert_same_trajectory, npoptim_trajectory, optax_trajectory,
                           problem, schedule)

from npoptim.optim.adan import Adan, AdanHyper, adan_rule


@pytest.mark.needs("optax", "jax")
def test_optax_variant_matches_optax_adan_defaults():
    optax = pytest.importorskip("optax")
    params, grads = problem(0)
    expected = optax_trajectory(lambda: optax.adan(1e-2), params, grads)
    opt = Adan(params, lr=1e-2, variant="optax")
    assert_same_trajectory(npoptim_trajectory(opt, params, grads), expected)


@pytest.mark.needs("optax", "jax")
def test_optax_variant_matches_decay_betas_schedule_maximize():
    optax = pytest.importorskip("optax")
    params, grads = problem(1)
    lrs, optax_lrs = schedule(2e-2)
    expected = optax_trajectory(
        lambda: optax.adan(optax_lrs, b1=0.9, b2=0.8, b3=0.95, eps=1e-6, eps_root=1e-10,
                           weight_decay=0.1), params, [[-g for g in gs] for gs in grads])
    opt = Adan(params, lr=lrs[0], betas=(0.9, 0.8, 0.95), eps=1e-6, eps_root=1e-10,
               weight_decay=0.1, variant="optax", maximize=True)
    assert_same_trajectory(npoptim_trajectory(opt, params, grads, lrs), expected)


def authors_adan(params, grads, lr, betas=(0.98, 0.92, 0.99), eps=1e-8, weight_decay=0.0,
                 no_prox=False, lrs=None):
    """sail-sg/Adan adan.py ``_single_tensor_adan`` (max_grad_norm=0), line by line."""
    beta1, beta2, beta3 = betas
    params = [p.copy() for p in params]
    state = [dict(exp_avg=np.zeros_like(p), exp_avg_sq=np.zeros_like(p),
                  exp_avg_diff=np.zeros_like(p)) for p in params]
    out = []
    for t, step_grads in enumerate(grads):
        step = t + 1
        lr = lrs[t] if lrs is not None else lr
        bias_correction1 = 1.0 - beta1 ** step
        bias_correction2 = 1.0 - beta2 ** step
        bias_correction3_sqrt = math.sqrt(1.0 - beta3 ** step)
        for k, (param, grad) in enumerate(zip(params, step_grads)):
            s = state[k]
            if step == 1:
                s["neg_pre_grad"] = -grad
            neg_grad_or_diff = s["neg_pre_grad"] + grad
            s["exp_avg"] = s["exp_avg"] * beta1 + (1 - beta1) * grad
            s["exp_avg_diff"] = s["exp_avg_diff"] * beta2 + (1 - beta2) * neg_grad_or_diff
            neg_grad_or_diff = neg_grad_or_diff * beta2 + grad
            s["exp_avg_sq"] = s["exp_avg_sq"] * beta3 + (1 - beta3) * neg_grad_or_diff ** 2
            denom = np.sqrt(s["exp_avg_sq"]) / bias_correction3_sqrt + eps
            step_size_diff = lr * beta2 / bias_correction2
            step_size = lr / bias_correction1
            if no_prox:
                param *= 1 - lr * weight_decay
            param -= step_size * s["exp_avg"] / denom
            param -= step_size_diff * s["exp_avg_diff"] / denom
            if not no_prox:
                param /= 1 + lr * weight_decay
            s["neg_pre_grad"] = -grad
        out.append([p.copy() for p in params])
    return out, state


@pytest.mark.parametrize("kw", [dict(), dict(weight_decay=0.1), dict(weight_decay=0.1,
                                                                      no_prox=True)],
                         ids=["defaults", "proximal-decay", "no-prox"])
def test_default_is_the_authors_code(kw):
    params, grads = problem(2)
    expected, state = authors_adan(params, grads, 1e-2, **kw)
    form = "decoupled" if kw.get("no_prox") else "proximal"
    opt = Adan(params, lr=1e-2, weight_decay=kw.get("weight_decay", 0.0),
               weight_decay_form=form)
    assert_same_trajectory(npoptim_trajectory(opt, params, grads), expected)
    for name in ("exp_avg", "exp_avg_sq", "exp_avg_diff", "neg_pre_grad"):
        close(opt.state[0][name], state[0][name], rtol=1e-12)


def test_default_under_a_schedule_and_other_betas_is_the_authors_code():
    params, grads = problem(3)
    lrs, _ = schedule(2e-2)
    expected, _ = authors_adan(params, grads, None, betas=(0.9, 0.8, 0.95), weight_decay=0.05,
                               lrs=lrs)
    opt = Adan(params, lr=lrs[0], betas=(0.9, 0.8, 0.95), weight_decay=0.05)
    assert_same_trajectory(npoptim_trajectory(opt, params, grads, lrs), expected)


def test_paper_weighs_the_difference_by_beta2_optax_by_one_minus_beta2():
    # step 2 of a 1-element problem, eps = 0: u = (m/b1 + c v/b2) / sqrt(n/b3)
    b1, b2, b3 = 0.98, 0.92, 0.99
    g1, g2 = 1.0, 3.0
    for variant, c in (("paper", b2), ("optax", 1 - b2)):
        w = np.array([0.0])
        opt = Adan([w], lr=1.0, eps=0.0, eps_root=0.0, variant=variant)
        opt.step([np.array([g1])])
        after1 = w[0]
        opt.step([np.array([g2])])
        m = b1 * (1 - b1) * g1 + (1 - b1) * g2
        v = (1 - b2) * (g2 - g1)
        n = b3 * (1 - b3) * g1 ** 2 + (1 - b3) * (g2 + c * (g2 - g1)) ** 2
        u = (m / (1 - b1 ** 2) + c * v / (1 - b2 ** 2)) / math.sqrt(n / (1 - b3 ** 2))
        close(w[0], after1 - u)
        assert after1 == pytest.approx(-1.0)   # step 1: m/b1 / sqrt(n/b3) = g/|g|


def test_rule_stays_float32():
    f = np.float32
    h = AdanHyper(*[f(v) for v in (0, 0, 0.98, 0.02, 0.92, 0.08, 0.99, 0.01, 0.92, 50, 11,
                                   0.01, 0.1, 0, 1e-8, 1, 0, 1.001, -0.1)])
    assert_typed_float32(adan_rule, (f(1.0), f(0.5), (f(0.2), f(0.1), f(0.3), f(-0.4)), h))


@pytest.mark.parametrize("kw, match", [
    (dict(lr=-1e-3), "learning rate"), (dict(betas=(0.9, 0.9)), "three"),
    (dict(betas=(0.9, 0.9, 1.0)), "index 2"), (dict(eps=-1.0), "epsilon"),
    (dict(eps_root=-1.0), "eps_root"), (dict(weight_decay=-0.1), "weight_decay"),
    (dict(variant="adam"), "unknown variant"), (dict(diff_weight="one"), "diff_weight"),
    (dict(weight_decay_form="l2"), "weight_decay_form")])
def test_bad_hyperparameters_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        Adan([np.zeros(3)], **kw)


def test_bad_input_changes_nothing():
    w = np.array([1.0, 2.0, 3.0])
    opt = Adan([w], lr=0.1)
    opt.step([np.ones(3)])
    snap = snapshot(opt)
    state = snap[1][0]
    opt.param_groups[0]["betas"] = (0.9, 0.9, -0.5)
    with pytest.raises(ValueError, match="index 2"):
        opt.step([np.ones(3)])
    opt.param_groups[0]["betas"] = (0.98, 0.92, 0.99)
    opt.state[0]["neg_pre_grad"] = np.zeros(4)
    with pytest.raises(ValueError, match="neg_pre_grad"):
        opt.step([np.ones(3)])
    opt.state[0]["neg_pre_grad"] = state["neg_pre_grad"].copy()
    assert_unchanged(opt, snap)
