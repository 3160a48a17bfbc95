"""CAME: the authors' came-pytorch 0.1.3 and pytorch_optimizer 4.1.0's CAME in float64 (a wide
and a tall matrix, a vector, a 3-D tensor factored over its last two dimensions and a 0-d
parameter; 24 steps under an lr schedule, gradients of a random scale per step; weight decay,
and pytorch_optimizer's maximize, L2 decay, fixed_decay and ams_bound through both of its
paths), float32 to float32's precision, hand-derived steps, and bad input."""
import math

import numpy as np
import pytest
from hand_derived import assert_unchanged, close, snapshot
from scheduled_runs import npoptim_trajectory, random_problem, torch_trajectory, worst_error

from npoptim.optim.came import CAME

try:
    import torch
except ImportError:  # the tests of npoptim alone still run
    torch = None

SHAPES = ((4, 6), (7, 3), (5,), (2, 3, 4), ())
STEPS = 24
LRS = [1e-2 * min(1.0, (t + 1) / 5) * (0.5 + 0.5 * math.cos(math.pi * t / STEPS))
       for t in range(STEPS)]
#: the worst float64 error allowed, relative to each tensor's scale (measured: 7.2e-16 at most)
RTOL64 = 1e-12


def problem(seed, dtype=np.float64):
    return random_problem(seed, SHAPES, STEPS, dtype)


def run_torch(make, params, grads):
    return torch_trajectory(make, params, grads, LRS)


def run_npoptim(params, grads, **kw):
    ps = [p.copy() for p in params]
    opt = CAME(ps, lr=LRS[0], **kw)
    return npoptim_trajectory(opt, ps, grads, LRS), opt


def assert_states_close(opt, theirs, tensors, names, rtol):
    for i, t in enumerate(tensors):
        for name in names:
            if name in opt.state[i]:
                close(opt.state[i][name], theirs.state[t][name].numpy(), rtol=rtol)


STATE_NAMES = ("exp_avg", "exp_avg_sq", "exp_avg_sq_row", "exp_avg_sq_col", "exp_avg_res_row",
               "exp_avg_res_col", "exp_avg_sq_hat")


@pytest.mark.needs("torch", "came_pytorch")
@pytest.mark.parametrize("kw", [dict(), dict(weight_decay=0.1, clip_threshold=1.5,
                                             betas=(0.8, 0.99, 0.999), eps=(1e-3, 1e-4))],
                         ids=["defaults", "decay-clip-betas-eps"])
def test_matches_came_pytorch(kw):
    import came_pytorch
    params, grads = problem(0)
    expected, theirs, tensors = run_torch(lambda ts: came_pytorch.CAME(ts, lr=LRS[0], **kw),
                                          params, grads)
    got, opt = run_npoptim(params, grads, **kw)
    assert worst_error(got, expected) < RTOL64
    assert_states_close(opt, theirs, tensors, STATE_NAMES, 1e-11)
    assert opt.state[3]["exp_avg_sq_row"].shape == (2, 3)
    assert opt.state[3]["exp_avg_res_col"].shape == (2, 4)


#: npoptim's keywords; pytorch_optimizer's are the same but weight_decouple
PYTORCH_OPTIMIZER_OPTIONS = [dict(weight_decay=0.1),
                             dict(maximize=True, ams_bound=True, weight_decay=0.05),
                             dict(weight_decay=0.1, decoupled_weight_decay=False),
                             dict(weight_decay=0.1, fixed_decay=True, clip_threshold=2.0)]


@pytest.mark.needs("torch", "pytorch_optimizer")
@pytest.mark.parametrize("foreach", [False, True], ids=["per-param", "foreach"])
@pytest.mark.parametrize("kw", PYTORCH_OPTIMIZER_OPTIONS,
                         ids=["decay", "maximize-ams-bound", "l2", "fixed-decay-clip"])
def test_matches_pytorch_optimizer(kw, foreach):
    import pytorch_optimizer
    params, grads = problem(1)
    theirs_kw = dict(kw)
    if "decoupled_weight_decay" in theirs_kw:
        theirs_kw["weight_decouple"] = theirs_kw.pop("decoupled_weight_decay")
    expected, theirs, tensors = run_torch(
        lambda ts: pytorch_optimizer.CAME(ts, lr=LRS[0], foreach=foreach, **theirs_kw),
        params, grads)
    got, opt = run_npoptim(params, grads, **kw)
    assert worst_error(got, expected) < RTOL64
    assert_states_close(opt, theirs, tensors, STATE_NAMES, 1e-11)


@pytest.mark.needs("torch", "came_pytorch")
def test_float32_matches_came_pytorch_to_float32_precision():
    import came_pytorch
    params, grads = problem(2, np.float32)
    expected, _, _ = run_torch(lambda ts: came_pytorch.CAME(ts, lr=LRS[0], weight_decay=0.1),
                               params, grads)
    got, opt = run_npoptim(params, grads, weight_decay=0.1)
    assert all(p.dtype == np.float32 for p in got[-1])
    assert all(s.dtype == np.float32 for s in opt.state[0].values() if hasattr(s, "dtype"))
    assert worst_error(got, expected) < 1e-6  # measured 1.5e-7, an ulp of the scale


# ------------------------------------------------------------------ hand-derived steps
def test_first_step_of_a_vector_is_the_clipped_sign():
    """eps1 = 0: V = (1-β2)g², U = sign(g)/sqrt(1-β2), whose RMS 1/sqrt(1-β2) > 1 clips it to
    sign(g); m = (1-β1) sign(g) and a vector takes m as it is; the decay is decoupled."""
    p = np.array([0.5, -1.0, 2.0])
    g = np.array([3.0, -0.25, 1e-3])
    opt = CAME([p], lr=0.1, eps=(0.0, 0.0), weight_decay=0.2)
    opt.step([g.copy()])
    close(p, np.array([0.5, -1.0, 2.0]) * (1 - 0.1 * 0.2) - 0.1 * 0.1 * np.sign(g))
    close(opt.state[0]["exp_avg"], 0.1 * np.sign(g))
    close(opt.state[0]["exp_avg_sq"], 0.001 * g * g)


def test_eps1_is_added_to_the_squared_gradient_and_clipping_at_d():
    """g = 3, eps1 = 7, β2 = 0.75: V = 0.25·16, U = 3/2; d = 2 leaves it, m = 0.1·1.5; with
    d = 1 it is clipped to 1."""
    for d, u in [(2.0, 1.5), (1.0, 1.0)]:
        p = np.array([1.0])
        opt = CAME([p], lr=0.5, eps=(7.0, 0.0), betas=(0.9, 0.75, 0.9), clip_threshold=d)
        opt.step([np.array([3.0])])
        close(p, np.array([1.0 - 0.5 * 0.1 * u]))


def test_first_step_of_a_matrix_is_weighted_by_the_confidence():
    """|g| of rank one: the factored V is exactly (1-β2)g², so Û = sign(g) after clipping;
    m = (1-β1)Û, the instability (Û - m)² + ε2 = β1² + ε2 = 1 (ε2 = 0.19, β1 = 0.9) in every
    entry, so its factored estimate is (1-β3) and the step lr·m/sqrt(1-β3): 1/(β1·sqrt(1-β3))
    times larger, from eps2 = 0, than Adafactor's lr·(1-β1) would be."""
    g = np.array([[1.0, -2.0], [-2.0, 4.0], [0.5, 1.0]])
    p = np.zeros((3, 2))
    opt = CAME([p], lr=0.01, eps=(0.0, 0.19), betas=(0.9, 0.999, 0.9999))
    opt.step([g.copy()])
    res = (1 - 0.9999) * ((1 - 0.1) ** 2 + 0.19)  # 1 - 0.9999 is 1e-4 to 1e-13 only
    close(p, -0.01 * 0.1 / math.sqrt(res) * np.sign(g))
    close(opt.state[0]["exp_avg_res_row"], np.full(3, res))
    close(opt.state[0]["exp_avg_res_col"], np.full(2, res))
    close(opt.state[0]["exp_avg_sq_row"], (1 - 0.999) * np.mean(g * g, axis=1))


def test_without_the_confidence_a_matrix_steps_by_its_momentum():
    """confidence=False: the same g as above steps by lr·(1-β1)·sign(g), Adafactor with
    momentum, and no instability factors are kept."""
    g = np.array([[1.0, -2.0], [-2.0, 4.0], [0.5, 1.0]])
    p = np.zeros((3, 2))
    opt = CAME([p], lr=0.01, eps=(0.0, 0.19), confidence=False)
    opt.step([g.copy()])
    close(p, -0.01 * 0.1 * np.sign(g))
    assert "exp_avg_res_row" not in opt.state[0]


def test_second_step_of_a_vector_by_hand():
    """eps = 0, d = inf, β = (0.5, 0.5, ·): v1 = g1²/2, m1 = u1/2 with u1 = g1/sqrt(v1);
    v2 = v1/2 + g2²/2, u2 = g2/sqrt(v2), m2 = m1/2 + u2/2."""
    g1, g2 = 2.0, -1.0
    p = np.array([0.0])
    opt = CAME([p], lr=1.0, eps=(0.0, 0.0), betas=(0.5, 0.5, 0.5), clip_threshold=math.inf)
    opt.step([np.array([g1])])
    v1 = g1 * g1 / 2
    m1 = g1 / math.sqrt(v1) / 2
    close(p, np.array([-m1]))
    opt.step([np.array([g2])])
    v2 = v1 / 2 + g2 * g2 / 2
    m2 = m1 / 2 + g2 / math.sqrt(v2) / 2
    close(p, np.array([-m1 - m2]))


def test_l2_and_fixed_decay_and_maximize():
    """L2: the gradient is g + λθ (here 0 + 0.5·2 = 1), so the first step is the sign of it;
    fixed_decay: θ(1-λ) whatever the lr; maximize: the step follows +g."""
    p = np.array([2.0])
    CAME([p], lr=0.1, eps=(0.0, 0.0), weight_decay=0.5,
         decoupled_weight_decay=False).step([np.array([0.0])])
    close(p, np.array([2.0 - 0.1 * 0.1]))
    p = np.array([2.0])
    CAME([p], lr=0.1, eps=(0.0, 0.0), weight_decay=0.5, fixed_decay=True).step(
        [np.array([-1.0])])
    close(p, np.array([2.0 * 0.5 + 0.1 * 0.1]))
    p = np.array([2.0])
    CAME([p], lr=0.1, eps=(0.0, 0.0), maximize=True).step([np.array([-1.0])])
    close(p, np.array([2.0 - 0.1 * 0.1]))


def test_ams_bound_takes_the_fourth_root():
    """pytorch_optimizer's ams_bound: H = max(H, sqrt(v)), U = g/sqrt(H/β2). First step, eps
    0, d = inf: v = (1-β2)g², H = sqrt(1-β2)|g|, U = g·sqrt(β2)/sqrt(sqrt(1-β2)|g|)."""
    g, b2 = 4.0, 0.75
    p = np.array([0.0])
    opt = CAME([p], lr=1.0, eps=(0.0, 0.0), betas=(0.5, b2, 0.5), clip_threshold=math.inf,
               ams_bound=True)
    opt.step([np.array([g])])
    h = math.sqrt(1 - b2) * g
    close(opt.state[0]["exp_avg_sq_hat"], np.array([h]))
    close(p, np.array([-0.5 * g / math.sqrt(h / b2)]))


# ------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("kw, message", [
    (dict(lr=-1.0), "learning rate"),
    (dict(betas=(0.9, 0.999)), "betas must be three"),
    (dict(betas=(0.9, 1.0, 0.9)), "beta parameter at index 1"),
    (dict(eps=1e-30), "eps must be a pair"),
    (dict(eps=(1e-30, -1.0)), "eps must be a pair"),
    (dict(clip_threshold=0.0), "clip_threshold"),
    (dict(weight_decay=-0.1), "weight_decay"),
    (dict(ams_bound=1), "ams_bound must be True or False"),
    (dict(confidence=None), "confidence must be True or False"),
])
def test_bad_hyperparameters_raise(kw, message):
    with pytest.raises(ValueError, match=message):
        CAME([np.zeros(2)], **kw)


def test_an_empty_parameter_is_refused_before_anything_changes():
    params = [np.ones((2, 2)), np.zeros((0, 3))]
    opt = CAME(params, lr=0.1)
    opt.step([np.ones((2, 2)), np.zeros((0, 3))][:1] + [None])
    snap = snapshot(opt)
    with pytest.raises(ValueError, match="no elements"):
        opt.step([np.ones((2, 2)), np.zeros((0, 3))])
    assert_unchanged(opt, snap)
