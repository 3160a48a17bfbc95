"""The cautious mask (npoptim.optim.cautious) on AdamW/Adam and Lion: hand-derived steps of
each scale and decay form, float64 trajectories against pytorch_optimizer's cautious Lion,
timm's cautious AdamW and Lion, and C-Optim's files (loaded alone from a checkout named by
NPOPTIM_COPTIM_DIR), the switch's checks, and the 16-bit Adam's refusal."""
import importlib
import os
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from hand_derived import assert_typed_float32, assert_unchanged, close, snapshot
from optax_contrib import assert_trajectories_close, problem, run_npoptim, run_torch
from torch_compare import timm_optim

import npoptim
from npoptim.optim.adam import AdamHyper, adam_rule
from npoptim.optim.cautious import cautious_scale
from npoptim.optim.lion import LionHyper, lion_rule

STEPS = 24


# ------------------------------------------------------------------------ hand-derived
def _adam_direction(g, m, v, t, lr=0.1, b1=0.9, b2=0.999, eps=1e-8):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    return m, v, lr / (1 - b1 ** t) * m / (np.sqrt(v / (1 - b2 ** t)) + eps)


def test_adamw_two_steps_hand_derived():
    lr, lam, n = 0.1, 0.2, 5
    w0 = np.array([1.0, -2.0, 0.5, 0.3, -0.4])
    g1 = np.array([0.4, -1.0, 0.0, 2.0, 1.0])
    g2 = np.array([-0.1, -0.5, 0.3, 1.0, -0.05])   # elements 0 and 4 turn against m
    w = w0.copy()
    opt = npoptim.AdamW([w], lr=lr, weight_decay=lam, cautious=True)
    opt.step([g1])
    m, v, u = _adam_direction(g1, 0.0, 0.0, 1)
    kept = (m * g1 > 0).astype(float)
    assert kept.tolist() == [1, 1, 0, 1, 1]          # a zero gradient is masked
    w1 = w0 * (1 - lr * lam) - u * kept * n / (4 + 1)   # n / (k + 1)
    close(w, w1)
    opt.step([g2])
    m, v, u = _adam_direction(g2, m, v, 2)
    kept = (m * g2 > 0).astype(float)
    assert kept.tolist() == [0, 1, 1, 1, 0]          # m0 = 0.9·0.04 - 0.01 > 0 > g0
    close(w, w1 * (1 - lr * lam) - u * kept * n / (3 + 1))
    close(opt.state[0]["exp_avg"], m)


def test_adam_l2_the_mask_sees_the_decayed_gradient_and_floored_mean():
    lr, lam = 0.1, 0.1
    w0 = np.array([1.0, 1.0, -1.0])
    g1 = np.array([0.5, 0.5, 0.3])
    g2 = np.array([-0.05, -0.5, 0.3])   # element 0: g < 0 < g + λθ
    w = w0.copy()
    opt = npoptim.Adam([w], lr=lr, weight_decay=lam, cautious=True,
                       cautious_scale="floored_mean")
    opt.step([g1])
    gd = g1 + lam * w0
    m, v, u = _adam_direction(gd, 0.0, 0.0, 1)
    w1 = w0 - u / max(3 / 3, 1e-3)                     # all agree on a first step
    close(w, w1)
    opt.step([g2])
    gd = g2 + lam * w1
    m, v, u = _adam_direction(gd, m, v, 2)
    kept = (m * gd > 0).astype(float)
    assert kept.tolist() == [1, 0, 1] and g2[0] * m[0] < 0
    close(w, w1 - u * kept / max(2 / 3, 1e-3))


def test_lion_steps_keep_the_decay_outside_the_mask_in_both_forms():
    lr, lam, b1, b2, n = 0.1, 0.5, 0.9, 0.99, 6
    w0 = np.array([1.0, -2.0, 0.5, 0.25, -1.0, 0.75])
    g1 = np.array([0.3, 0.0, -1.0, 2.0, 0.4, -2.0])
    g2 = np.array([-0.1, 0.2, -0.5, -0.1, 0.4, 0.1])
    for form in ("in_update", "decoupled"):
        w = w0.copy()
        opt = npoptim.Lion([w], lr=lr, weight_decay=lam, weight_decay_form=form, cautious=True)
        opt.step([g1])
        opt.step([g2])
        m1 = (1 - b2) * g1
        c2 = b1 * m1 + (1 - b1) * g2
        kept = (c2 * g2 > 0).astype(float)
        assert kept.tolist() == [1, 1, 1, 0, 1, 0]   # 3 and 5: the momentum 0.009·g1 wins
        # step 1: sign(c) = sign(g), 5 of 6 kept (not the zero gradient): scale 6/6
        w1 = w0 - lr * (np.sign(g1) * n / (5 + 1) + lam * w0)
        w2 = w1 - lr * (np.sign(c2) * kept * n / (4 + 1) + lam * w1)
        close(w, w2, rtol=1e-15 if form == "in_update" else 1e-13)
        close(opt.state[0]["exp_avg"], b2 * m1 + (1 - b2) * g2)


def test_the_scales_in_the_parameters_dtype():
    assert cautious_scale(3, 4, "plus_one", np.dtype(np.float64)) == 1.0
    assert cautious_scale(0, 10, "floored_mean", np.dtype(np.float64)) == 1000.0
    scale = cautious_scale(2, 3, "floored_mean", np.dtype(np.float32))
    assert type(scale) is np.float32 and scale == np.float32(1) / (np.float32(2) / np.float32(3))
    assert cautious_scale(4, 7, "plus_one", np.dtype(np.float32)) == np.float32(7) / np.float32(5)


def test_all_agreeing_is_the_plain_step_times_n_over_n_plus_one():
    rng = np.random.default_rng(4)
    w0 = rng.uniform(-1, 1, 50)
    g = rng.standard_normal(50)
    a, b = w0.copy(), w0.copy()
    npoptim.AdamW([a], lr=0.01, weight_decay=0.0).step([g])   # first step: m = (1-β1)g
    npoptim.AdamW([b], lr=0.01, weight_decay=0.0, cautious=True).step([g])
    close(b - w0, (a - w0) * 50 / 51)


def test_float32_keeps_float32_and_the_rules_stay_float32():
    rng = np.random.default_rng(5)
    for cls, kw in ((npoptim.AdamW, {}), (npoptim.Lion, dict(weight_decay=0.1))):
        w = rng.uniform(-1, 1, (4, 3)).astype(np.float32)
        opt = cls([w], lr=1e-2, cautious=True, **kw)
        for _ in range(3):
            opt.step([rng.standard_normal((4, 3)).astype(np.float32)])
        assert w.dtype == np.float32 and all(v.dtype == np.float32 for k, v in
                                             opt.state[0].items() if k != "step")
    f = np.float32
    h = AdamHyper(*[f(x) for x in (1, 0, 0, 0.1, 0.999, 0.001, 0, 1, 1e-8, -0.1, 1, 0, 0, 1, 1.5)])
    assert_typed_float32(adam_rule, (f(1.0), f(0.5), (f(0.2), f(0.1)), h))
    h = LionHyper(*[f(x) for x in (0, 0.9, 0.1, 0.99, 0.01, 0.1, 1.0, -0.1, 1.5)])
    assert_typed_float32(lion_rule, (f(1.0), f(0.5), (f(0.2),), h))


def test_state_dict_leaves_the_switch_out_unless_cautious():
    w = np.zeros(3)
    assert "cautious" not in npoptim.AdamW([w]).state_dict()["param_groups"][0]
    opt = npoptim.Lion([w], cautious=True, cautious_scale="floored_mean")
    groups = opt.state_dict()["param_groups"]
    assert groups[0]["cautious"] is True and groups[0]["cautious_scale"] == "floored_mean"
    other = npoptim.Lion([np.zeros(3)])
    other.load_state_dict(opt.state_dict())
    assert other.param_groups[0]["cautious"] is True


@pytest.mark.parametrize("cls", [npoptim.Adam, npoptim.AdamW, npoptim.Lion, npoptim.ADOPT])
@pytest.mark.parametrize("kw, match", [(dict(cautious=1), "cautious"),
                                       (dict(cautious=True, cautious_scale="mean"),
                                        "cautious_scale")])
def test_bad_switches_raise(cls, kw, match):
    with pytest.raises(ValueError, match=match):
        cls([np.zeros(3)], **kw)


def test_a_refused_step_changes_nothing():
    w = np.array([1.0, 2.0, 3.0])
    opt = npoptim.AdamW([w], lr=0.1, cautious=True)
    opt.step([np.array([1.0, -1.0, 0.5])])
    snap = snapshot(opt)
    opt.param_groups[0]["cautious_scale"] = "mean"
    with pytest.raises(ValueError, match="cautious_scale"):
        opt.step([np.ones(3)])
    assert_unchanged(opt, snap)


@pytest.mark.needs("ml_dtypes")
def test_the_16_bit_adam_refuses_cautious():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from npoptim.precision import AdamW
    with pytest.raises(ValueError, match="cautious"):
        AdamW([np.zeros(3, ml_dtypes.bfloat16)], cautious=True)


# ----------------------------------------------------------------------- cross-checks
def _kozistr():
    return pytest.importorskip("pytorch_optimizer")


@pytest.mark.needs("torch", "pytorch_optimizer")
@pytest.mark.parametrize("kw", [dict(weight_decay=0.0), dict(weight_decay=0.1),
                                dict(weight_decay=0.1, maximize=True)],
                         ids=["no-decay", "decay", "decay-maximize"])
def test_lion_equals_pytorch_optimizers_cautious_lion(kw):
    po = _kozistr()
    params, grad = problem(seed=0)
    expected, _ = run_torch(lambda ts: po.Lion(ts, lr=1e-2, cautious=True, **kw), params,
                            grad, STEPS)
    actual, _ = run_npoptim(npoptim.Lion, params, grad, STEPS, lr=1e-2, cautious=True,
                            variant="lion_pytorch", **kw)
    assert_trajectories_close(actual, expected)
    # the mask bites: without it the trajectory is elsewhere
    plain, _ = run_npoptim(npoptim.Lion, params, grad, STEPS, lr=1e-2, variant="lion_pytorch",
                           **kw)
    with pytest.raises(AssertionError):
        assert_trajectories_close(plain, expected)


@pytest.mark.needs("torch", "timm")
@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_lion_floored_mean_equals_timms_cautious_lion(wd):
    timm_lion = timm_optim("lion")
    params, grad = problem(seed=1)
    expected, _ = run_torch(lambda ts: timm_lion.Lion(ts, lr=1e-2, weight_decay=wd,
                                                      caution=True, foreach=False),
                            params, grad, STEPS)
    actual, _ = run_npoptim(npoptim.Lion, params, grad, STEPS, lr=1e-2, weight_decay=wd,
                            variant="lion_pytorch", cautious=True, cautious_scale="floored_mean")
    assert_trajectories_close(actual, expected)


@pytest.mark.needs("torch", "timm")
@pytest.mark.parametrize("kw", [dict(weight_decay=0.1), dict(weight_decay=0.0, amsgrad=True),
                                dict(weight_decay=0.05, maximize=True)],
                         ids=["decay", "amsgrad", "maximize"])
def test_adamw_floored_mean_equals_timms_cautious_adamw(kw):
    timm_adamw = timm_optim("adamw")
    params, grad = problem(seed=2)
    expected, _ = run_torch(lambda ts: timm_adamw.AdamWLegacy(ts, lr=1e-2, caution=True,
                                                              foreach=False, **kw),
                            params, grad, STEPS)
    actual, _ = run_npoptim(npoptim.AdamW, params, grad, STEPS, lr=1e-2, cautious=True,
                            cautious_scale="floored_mean", **kw)
    assert_trajectories_close(actual, expected)
    other, _ = run_npoptim(npoptim.AdamW, params, grad, STEPS, lr=1e-2, cautious=True, **kw)
    with pytest.raises(AssertionError):  # n/(k+1) is another step
        assert_trajectories_close(other, expected)


def _c_optim(name):
    """C-Optim's ``<name>.py`` (kyleliang919/C-Optim, not packaged) loaded alone from the
    checkout ``NPOPTIM_COPTIM_DIR`` names: its directory becomes a bare package, so that
    ``c_adamw.py``'s ``from .opt_utils import ...`` finds its one helper file."""
    pytest.importorskip("torch")
    where = os.environ.get("NPOPTIM_COPTIM_DIR")
    if not where or not (Path(where) / f"{name}.py").is_file():
        pytest.skip("no C-Optim checkout: set NPOPTIM_COPTIM_DIR to one of kyleliang919/C-Optim")
    package = "_c_optim_alone"
    if package not in sys.modules:
        module = types.ModuleType(package)
        module.__path__ = [where]
        sys.modules[package] = module
    return importlib.import_module(f"{package}.{name}")


@pytest.mark.needs("torch")
@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_c_optims_files(wd):
    c_lion, c_adamw = _c_optim("c_lion"), _c_optim("c_adamw")
    params, grad = problem(seed=3)
    expected, _ = run_torch(lambda ts: c_lion.Lion(ts, lr=1e-2, betas=(0.9, 0.99),
                                                   weight_decay=wd), params, grad, STEPS)
    actual, _ = run_npoptim(npoptim.Lion, params, grad, STEPS, lr=1e-2, weight_decay=wd,
                            variant="lion_pytorch", cautious=True)
    assert_trajectories_close(actual, expected)
    expected, _ = run_torch(lambda ts: c_adamw.AdamW(ts, lr=1e-2, weight_decay=wd,
                                                     foreach=False, no_deprecation_warning=True),
                            params, grad, STEPS)
    actual, _ = run_npoptim(npoptim.AdamW, params, grad, STEPS, lr=1e-2, weight_decay=wd,
                            eps=1e-6, eps_mode="eps_hat", cautious=True,
                            cautious_scale="floored_mean")
    assert_trajectories_close(actual, expected)


@pytest.mark.needs("torch", "pytorch_optimizer")
@pytest.mark.parametrize("decoupled", [False, True])
def test_adopt_equals_pytorch_optimizers_cautious_adopt(decoupled):
    po = _kozistr()
    params, grad = problem(seed=4, scale=2.0)
    expected, _ = run_torch(lambda ts: po.ADOPT(ts, lr=1e-2, weight_decay=0.1, foreach=False,
                                                weight_decouple=decoupled, cautious=True),
                            params, grad, STEPS)
    actual, _ = run_npoptim(npoptim.ADOPT, params, grad, STEPS, lr=1e-2, weight_decay=0.1,
                            decoupled_weight_decay=decoupled, variant="authors", cautious=True)
    assert_trajectories_close(actual, expected)
    plain, _ = run_npoptim(npoptim.ADOPT, params, grad, STEPS, lr=1e-2, weight_decay=0.1,
                           decoupled_weight_decay=decoupled, variant="authors")
    with pytest.raises(AssertionError):
        assert_trajectories_close(plain, expected)


@pytest.mark.needs("torch", "timm")
def test_adopt_floored_mean_equals_timms_cautious_adopt():
    timm_adopt = timm_optim("adopt")
    params, grad = problem(seed=5, scale=2.0)
    # timm's clip is (t-1)^e, the paper's count (its default e is 1/3); its L2 decay is ours
    expected, _ = run_torch(lambda ts: timm_adopt.Adopt(ts, lr=1e-2, clip_exp=0.25,
                                                        weight_decay=0.1, caution=True,
                                                        foreach=False), params, grad, STEPS)
    actual, _ = run_npoptim(npoptim.ADOPT, params, grad, STEPS, lr=1e-2, weight_decay=0.1,
                            cautious=True, cautious_scale="floored_mean")
    assert_trajectories_close(actual, expected)
