"""MARS: pytorch_optimizer 4.1.0's MARS in float64 (both of its types that npoptim has, its
foreach and per-parameter paths, weight decay, amsgrad, optimize_1d, maximize, an lr
schedule, 1-D, 2-D, 3-D and 0-d tensors, 24 steps, gradients of two scales: clipping on and
eps felt; float32 too, to 1e-6), the authors' mars.py where its file is given, hand-derived steps, and bad input.

The authors' code (AGI-Arena/MARS ``MARS/optimizers/mars.py``) is no package: set
``NPOPTIM_MARS_AUTHORS_FILE`` to that file (it imports torch and numpy only) to run its
cross-check; it is loaded by path, alone.
"""
import importlib.util
import math
import os

import numpy as np
import pytest
from hand_derived import assert_typed_float32, assert_unchanged, close, snapshot
from scheduled_runs import worst_error

from npoptim.optim.mars import MARS, MARSHyper, mars_rule

try:
    import torch
except ImportError:  # the tests of npoptim alone still run
    torch = None

SHAPES = ((4, 5), (7,), (2, 3, 4), ())
STEPS = 24
LRS = [1e-2 * min(1.0, (t + 1) / 5) * (0.5 + 0.5 * math.cos(math.pi * t / STEPS))
       for t in range(STEPS)]
#: (options, ids): the npoptim keywords (pytorch_optimizer calls amsgrad ams_bound)
OPTIONS = [dict(), dict(weight_decay=0.1, amsgrad=True),
           dict(optimize_1d=True, weight_decay=0.05), dict(maximize=True, gamma=0.1)]
IDS = ["defaults", "decay-amsgrad", "optimize-1d", "maximize-gamma"]


def problem(seed, scale):
    rng = np.random.default_rng(seed)
    params = [np.asarray(rng.uniform(-1, 1, s)) for s in SHAPES]
    grads = [[np.asarray(scale * rng.standard_normal(s)) for s in SHAPES] for _ in range(STEPS)]
    return params, grads


def run_torch(make, params, grads, lrs):
    tensors = [torch.tensor(p, requires_grad=True) for p in params]
    opt = make(tensors)
    out = []
    for lr, step_grads in zip(lrs, grads):
        for group in opt.param_groups:
            group["lr"] = lr
        for t, g in zip(tensors, step_grads):
            t.grad = torch.tensor(g)  # a new tensor each step (zero_grad(set_to_none=True))
        opt.step()
        out.append([t.detach().numpy().copy() for t in tensors])
    return out, opt, tensors


def run_npoptim(params, grads, lrs, **kw):
    ps = [p.copy() for p in params]
    opt = MARS(ps, lr=lrs[0], **kw)
    out = []
    for lr, step_grads in zip(lrs, grads):
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step(step_grads)
        out.append([p.copy() for p in ps])
    return out, opt


def _pytorch_optimizer_kw(kw):
    kw = dict(kw)
    if "amsgrad" in kw:
        kw["ams_bound"] = kw.pop("amsgrad")
    return kw


@pytest.mark.needs("torch", "pytorch_optimizer")
@pytest.mark.parametrize("scale", [1.0, 0.05], ids=["clipped", "eps-felt"])
@pytest.mark.parametrize("mars_type", ["adamw", "lion"])
@pytest.mark.parametrize("kw", OPTIONS, ids=IDS)
def test_matches_pytorch_optimizer(kw, mars_type, scale):
    import pytorch_optimizer
    params, grads = problem(0, scale)
    expected, theirs, tensors = run_torch(
        lambda ts: pytorch_optimizer.MARS(ts, lr=LRS[0], mars_type=mars_type,
                                          **_pytorch_optimizer_kw(kw)), params, grads, LRS)
    actual, ours = run_npoptim(params, grads, LRS, mars_type=mars_type,
                               variant="pytorch_optimizer", **kw)
    assert worst_error(actual, expected) <= 1e-12
    for i, t in enumerate(tensors):
        for name in ("exp_avg", "last_grad"):
            close(ours.state[i][name], theirs.state[t][name].numpy(), rtol=1e-12)


@pytest.mark.needs("torch", "pytorch_optimizer")
@pytest.mark.parametrize("mars_type", ["adamw", "lion"])
def test_matches_pytorch_optimizer_in_float32(mars_type):
    # measured: 6e-8 of the scale (an ulp) over 24 steps; the norm is summed in float32
    import pytorch_optimizer
    params, grads = problem(2, 1.0)
    params = [p.astype(np.float32) for p in params]
    grads = [[g.astype(np.float32) for g in step_grads] for step_grads in grads]
    kw = dict(weight_decay=0.1, amsgrad=True)
    expected, _, _ = run_torch(lambda ts: pytorch_optimizer.MARS(
        ts, lr=LRS[0], mars_type=mars_type, **_pytorch_optimizer_kw(kw)), params, grads, LRS)
    actual, _ = run_npoptim(params, grads, LRS, mars_type=mars_type,
                            variant="pytorch_optimizer", **kw)
    assert worst_error(actual, expected) <= 1e-6


@pytest.mark.needs("torch", "pytorch_optimizer")
@pytest.mark.parametrize("mars_type", ["adamw", "lion"])
def test_matches_pytorch_optimizer_per_parameter_path(mars_type):
    # foreach=False: its loop over parameters (optimize_mixed, optimize_1d), not _step_foreach
    import pytorch_optimizer
    params, grads = problem(1, 1.0)
    kw = dict(weight_decay=0.1, weight_decay_1d=0.2, lr_1d=5e-3, betas_1d=(0.8, 0.9))
    expected, _, _ = run_torch(lambda ts: pytorch_optimizer.MARS(
        ts, lr=LRS[0], mars_type=mars_type, foreach=False, **kw), params, grads, LRS)
    actual, _ = run_npoptim(params, grads, LRS, mars_type=mars_type,
                            variant="pytorch_optimizer", **kw)
    assert worst_error(actual, expected) <= 1e-12


@pytest.mark.needs("torch", "pytorch_optimizer")
@pytest.mark.parametrize("switch", [dict(variant="authors"), dict(eps_mode="bias_corrected"),
                                    dict(eps_root=0.0), dict(clip_norm=None), dict(gamma=0.0),
                                    dict(mars_ndim="exactly_2")],
                         ids=["authors", "eps-mode", "eps-root", "no-clip", "no-gamma", "ndim"])
def test_each_switch_of_the_variant_is_felt(switch):
    """The cross-check discriminates: each switch away from pytorch_optimizer's form misses it
    by far more than 1e-12 (eps and eps_root at the small gradients, where they matter)."""
    import pytorch_optimizer
    params, grads = problem(0, 0.05 if "eps" in str(switch) else 1.0)
    expected, _, _ = run_torch(lambda ts: pytorch_optimizer.MARS(ts, lr=LRS[0]), params, grads,
                               LRS)
    actual, _ = run_npoptim(params, grads, LRS, **dict(dict(variant="pytorch_optimizer"),
                                                        **switch))
    assert worst_error(actual, expected) > 1e-11


def authors_mars():
    """The authors' ``mars`` module, loaded by path from ``$NPOPTIM_MARS_AUTHORS_FILE``."""
    path = os.environ.get("NPOPTIM_MARS_AUTHORS_FILE", "")
    if not os.path.isfile(path):
        pytest.skip("set NPOPTIM_MARS_AUTHORS_FILE to AGI-Arena/MARS's "
                    "MARS/optimizers/mars.py to run this cross-check")
    spec = importlib.util.spec_from_file_location("_mars_authors_alone", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.needs("torch")
@pytest.mark.parametrize("scale", [1.0, 0.05], ids=["clipped", "eps-felt"])
@pytest.mark.parametrize("mars_type", ["adamw", "lion"])
@pytest.mark.parametrize("kw", OPTIONS[:3], ids=IDS[:3])
def test_matches_the_authors_code(kw, mars_type, scale):
    authors = authors_mars()
    params, grads = problem(0, scale)
    expected, _, _ = run_torch(lambda ts: authors.MARS(ts, lr=LRS[0], mars_type="mars-" +
                                                       mars_type, **kw), params, grads, LRS)
    actual, _ = run_npoptim(params, grads, LRS, mars_type=mars_type, **kw)
    assert worst_error(actual, expected) <= 1e-12


# ------------------------------------------------------------------------ by hand
K = 0.025 * 0.95 / 0.05  # γ β1/(1-β1) at the defaults: 0.475
EPS = 1e-8


def test_two_steps_of_a_matrix_hand_derived():
    lr, lam = 0.1, 0.5
    w = np.array([[1.0, -2.0], [0.5, 0.0]])
    w0 = w.copy()
    g1 = np.array([[0.6, 0.8], [0.0, 0.0]])   # ‖c‖ = 1.475 ‖g1‖ = 1.475: clipped to g1
    g2 = np.array([[0.1, -0.2], [0.05, 0.0]])
    opt = MARS([w], lr=lr, weight_decay=lam)
    opt.step([g1])
    # m/b1 = c and sqrt(v)/sqrt(b2) = |c|: u = c / (|c| + eps)
    u1 = np.array([[0.6 / (0.6 + EPS), 0.8 / (0.8 + EPS)], [0.0, 0.0]])
    w1 = w0 - lr * (u1 + lam * w0)
    close(w, w1)
    close(opt.state[0]["last_grad"], g1)
    opt.step([g2])
    c2 = np.array([[-0.1375, -0.675], [0.07375, 0.0]])  # 1.475 g2 - 0.475 g1, norm 0.69
    m2 = 0.95 * 0.05 * g1 + 0.05 * c2
    v2 = 0.99 * 0.01 * g1 ** 2 + 0.01 * c2 ** 2
    u2 = m2 / ((np.sqrt(v2) / math.sqrt(1 - 0.99 ** 2) + EPS) * (1 - 0.95 ** 2))
    close(w, w1 - lr * (u2 + lam * w1))
    close(opt.state[0]["exp_avg"], m2)
    assert opt.state[0]["step"] == 2


def test_first_step_of_a_vector_is_adamw_hand_derived():
    # optimize_1d=False: betas_1d (0.9, 0.95), lr_1d 3e-3, weight_decay_1d 0.1, no correction
    w = np.array([1.0, -1.0])
    g = np.array([0.2, -0.4])
    opt = MARS([w], lr=0.1, gamma=10.0)
    opt.step([g])
    close(w, np.array([1.0, -1.0]) - 3e-3 * (g / (np.abs(g) + EPS) + 0.1 * np.array([1, -1])))
    close(opt.state[0]["exp_avg"], 0.1 * g)
    close(opt.state[0]["exp_avg_sq"], 0.05 * g ** 2)


def test_lion_type_and_the_pytorch_optimizer_form_hand_derived():
    lr, lam = 0.1, 0.5
    w = np.array([[1.0, -2.0, 0.5]])
    g = np.array([[0.1, -0.2, 0.0]])   # ‖c‖ = 1.475 sqrt(0.05) < 1: not clipped
    opt = MARS([w], lr=lr, weight_decay=lam, mars_type="lion", variant="pytorch_optimizer")
    opt.step([g])
    w0 = np.array([[1.0, -2.0, 0.5]])
    close(w, w0 * (1 - lr * lam) - lr * np.array([[1.0, -1.0, 0.0]]))
    close(opt.state[0]["exp_avg"], 0.05 * 1.475 * g)
    assert not opt.state[0]["exp_avg_sq"].any()   # the Lion type leaves v alone


def test_eps_hat_form_hand_derived():
    w = np.zeros((1, 2))
    g = np.array([[0.001, -0.002]])
    opt = MARS([w], lr=0.1, variant="pytorch_optimizer")
    opt.step([g])
    c = 1.475 * g
    # (sqrt(v + 1e-15) + eps) / sqrt(b2) * b1 with m = 0.05 c, v = 0.01 c²
    denom = (np.sqrt(0.01 * c ** 2 + 1e-15) + EPS) / 0.1 * 0.05
    close(w, -0.1 * (0.05 * c) / denom)


def test_an_exact_previous_gradient_can_be_written_into_last_grad():
    # the paper's exact form: the gradient at the previous weights on this batch
    w = np.array([[0.0, 0.0]])
    opt = MARS([w], lr=0.1, mars_type="lion")
    opt.step([np.array([[0.1, 0.1]])])
    opt.state[0]["last_grad"][...] = np.array([[1.0, -1.0]])
    opt.step([np.array([[0.01, 0.01]])])
    c2 = 0.01 + K * (0.01 - np.array([[1.0, -1.0]]))   # [[-0.46025, 0.48975]], not clipped
    m2 = 0.95 * 0.05 * 1.475 * 0.1 + 0.05 * c2
    close(w, -0.1 * np.sign(np.array([[0.1, 0.1]])) - 0.1 * np.sign(m2))


def test_the_norm_is_of_the_whole_tensor_and_none_turns_clipping_off():
    g = np.full((30, 40), 0.1)   # ‖c‖ = 1.475 · 0.1 · sqrt(1200) ≈ 5.1
    a, b = np.zeros((30, 40)), np.zeros((30, 40))
    MARS([a], lr=1.0, clip_norm=None).step([g])
    opt = MARS([b], lr=1.0)
    opt.step([g])
    close(a, -np.ones_like(a) * 0.1475 / (0.1475 + EPS))  # the direction ignores the scale...
    norm = 1.475 * 0.1 * math.sqrt(1200)
    close(opt.state[0]["exp_avg"], 0.05 * 1.475 * g / norm)   # ...the momentum does not


def test_rule_stays_float32():
    h = MARSHyper(*[np.float32(v) for v in (0, 0.475, 1.0, 0.05, 0.99, 0.01, 0, 0, 10.0, 1e-8,
                                            0.05, 0.1, 1.0, -0.1)])
    s = (np.float32(0.2), np.float32(0.1), np.float32(0.3))
    assert_typed_float32(mars_rule, (np.float32(1.0), np.float32(0.5), s, h))


def test_float32_parameters_step():
    w = np.ones((3, 4), np.float32)
    opt = MARS([w], lr=0.1, amsgrad=True)
    opt.step([np.full((3, 4), 0.5, np.float32)])
    assert w.dtype == np.float32 and opt.state[0]["max_exp_avg_sq"].dtype == np.float32
    c = 1 / math.sqrt(12)   # 1.475 · 0.5 in each of 12 entries, clipped to norm 1
    close(w, np.full((3, 4), 1 - 0.1 * c / (c + 1e-8)), rtol=1e-6)


@pytest.mark.parametrize("kw, match", [
    (dict(lr=0.0), "lr"), (dict(lr=-1e-3), "learning rate|lr"), (dict(betas=(1.0, 0.9)), "beta"),
    (dict(betas_1d=(0.9, 1.5)), "beta"), (dict(gamma=-0.1), "gamma"),
    (dict(weight_decay_1d=-1.0), "weight_decay_1d"), (dict(mars_type="shampoo"), "shampoo"),
    (dict(mars_type="adam"), "mars_type"), (dict(variant="adam"), "unknown variant"),
    (dict(eps_mode="in_sqrt"), "eps_mode"), (dict(weight_decay_form="l2"), "weight_decay_form"),
    (dict(mars_ndim="2"), "mars_ndim"), (dict(clip_norm=0.0), "clip_norm"),
    (dict(clip_norm=math.inf), "clip_norm"), (dict(optimize_1d=1), "optimize_1d"),
    (dict(eps_root=-1.0), "eps_root")])
def test_bad_hyperparameters_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        MARS([np.zeros((2, 2))], **kw)


def test_the_authors_spelling_of_the_types_is_read():
    assert MARS([np.zeros((2, 2))], mars_type="mars-lion").defaults["mars_type"] == "lion"


def test_bad_input_changes_nothing():
    w, b = np.ones((2, 3)), np.ones(3)
    opt = MARS([w, b], lr=0.1)
    opt.step([np.ones((2, 3)), np.ones(3)])
    snap = snapshot(opt)
    opt.param_groups[0]["betas"] = (0.9, 1.5)
    with pytest.raises(ValueError, match="beta"):
        opt.step([np.ones((2, 3)), np.ones(3)])
    opt.param_groups[0]["betas"] = (0.95, 0.99)
    with pytest.raises(ValueError, match="shape"):
        opt.step([np.ones((2, 3)), np.ones(4)])
    with pytest.raises(TypeError, match="sparse"):
        import scipy.sparse
        opt.step([scipy.sparse.csr_matrix(np.ones((2, 3))), np.ones(3)])
    with pytest.raises(ValueError, match="variant"):
        opt.add_param_group({"params": [np.zeros(2)], "variant": "authors"})
    assert_unchanged(opt, snap)


def test_state_dict_round_trip_continues_the_trajectory():
    params, grads = problem(3, 1.0)
    straight, _ = run_npoptim(params, grads[:6], [1e-2] * 6, weight_decay=0.1, amsgrad=True)
    ps = [p.copy() for p in params]
    opt = MARS(ps, lr=1e-2, weight_decay=0.1, amsgrad=True)
    for step_grads in grads[:3]:
        opt.step(step_grads)
    qs = [p.copy() for p in ps]
    again = MARS(qs, lr=1e-2, weight_decay=0.1, amsgrad=True)
    again.load_state_dict(opt.state_dict())
    for step_grads in grads[3:6]:
        again.step(step_grads)
    for q, p in zip(qs, straight[-1]):
        np.testing.assert_array_equal(q, p)
