"""Grams: float64 trajectories against pytorch_optimizer's Grams (the default) and the authors'
grams-pytorch (eps_mode="eps_hat"), hand-derived first steps, and bad input."""
import numpy as np
import pytest
from hand_derived import assert_typed_float32, assert_unchanged, close, snapshot
from optax_contrib import (assert_trajectories_close, authors_code, lr_schedule, problem,
                           run_npoptim, run_torch)

from npoptim.optim.grams import Grams, GramsHyper, grams_rule

STEPS = 24
grams_pytorch, needs_grams_pytorch = authors_code("grams")


@pytest.mark.needs("torch", "pytorch_optimizer")
@pytest.mark.parametrize("kw", [dict(), dict(weight_decay=0.1, betas=(0.8, 0.99), eps=1e-3),
                                dict(weight_decay=0.05, maximize=True)],
                         ids=["defaults", "decay-betas-eps", "decay-maximize"])
def test_matches_pytorch_optimizers_grams(kw):
    po = pytest.importorskip("pytorch_optimizer")
    params, grad = problem(seed=0, scale=2.0)
    expected, t_opt = run_torch(lambda ts: po.Grams(ts, lr=1e-2, **kw), params, grad, STEPS)
    actual, opt = run_npoptim(Grams, params, grad, STEPS, lr=1e-2, **kw)
    assert_trajectories_close(actual, expected)
    close(opt.state[0]["exp_avg"], next(iter(t_opt.state.values()))["exp_avg"].numpy(),
          rtol=1e-12)


@pytest.mark.needs("torch", "pytorch_optimizer")
def test_matches_pytorch_optimizer_under_a_schedule():
    po = pytest.importorskip("pytorch_optimizer")
    params, grad = problem(seed=1)
    lrs = lr_schedule(STEPS, 3e-2)
    expected, _ = run_torch(lambda ts: po.Grams(ts, lr=lrs[0], weight_decay=0.1), params, grad,
                            STEPS, lrs=lrs)
    actual, _ = run_npoptim(Grams, params, grad, STEPS, lrs=lrs, weight_decay=0.1)
    assert_trajectories_close(actual, expected)


@needs_grams_pytorch
@pytest.mark.parametrize("kw", [dict(), dict(weight_decay=0.1, eps=1e-3),
                                dict(bias_correction=False, betas=(0.8, 0.99))],
                         ids=["defaults", "decay-eps", "no-bias-correction"])
def test_eps_hat_matches_the_authors_grams_pytorch(kw):
    if grams_pytorch is None:
        pytest.skip("grams-pytorch is not installed (pip install --no-deps grams-pytorch)")
    theirs = dict(kw)
    if "bias_correction" in theirs:
        theirs["correct_bias"] = theirs.pop("bias_correction")
    params, grad = problem(seed=2, scale=2.0)
    expected, _ = run_torch(lambda ts: grams_pytorch.Grams(ts, lr=1e-2, **theirs), params,
                            grad, STEPS)
    actual, _ = run_npoptim(Grams, params, grad, STEPS, lr=1e-2, eps_mode="eps_hat", **kw)
    assert_trajectories_close(actual, expected)
    if "eps" in kw:  # the two placements are far apart there: the switch is not a no-op
        other, _ = run_npoptim(Grams, params, grad, STEPS, lr=1e-2, **kw)
        with pytest.raises(AssertionError):
            assert_trajectories_close(other, expected)


def test_two_steps_hand_derived():
    lr, lam, b1, b2, eps = 0.1, 0.2, 0.9, 0.999, 1e-6
    w0 = np.array([1.0, -2.0, 0.5, 0.25])
    g1 = np.array([0.4, -1.0, 0.0, 2.0])
    g2 = np.array([-0.1, -0.5, 0.3, 0.0])   # element 0 against its momentum; 3 a zero
    w = w0.copy()
    opt = Grams([w], lr=lr, weight_decay=lam)
    opt.step([g1])
    # step 1: m/b1 = g, sqrt(v/b2) = |g|, so u = g/(|g| + eps): the step is ~lr·sign(g)
    w1 = w0 * (1 - lr * lam) - lr * np.sign(g1) * np.abs(g1) / (np.abs(g1) + eps)
    close(w, w1)
    opt.step([g2])
    m = b1 * (1 - b1) * g1 + (1 - b1) * g2
    v = b2 * (1 - b2) * g1 ** 2 + (1 - b2) * g2 ** 2
    u = m / (1 - b1 ** 2) / (np.sqrt(v / (1 - b2 ** 2)) + eps)
    assert u[0] > 0 > g2[0]                 # Adam would step down, Grams steps up
    w2 = w1 * (1 - lr * lam) - lr * np.sign(g2) * np.abs(u)
    close(w, w2)
    assert w2[3] == w1[3] * (1 - lr * lam)  # a zero gradient: only the decay
    close(opt.state[0]["exp_avg"], m)
    close(opt.state[0]["exp_avg_sq"], v)
    assert opt.state[0]["step"] == 2
    assert opt.state_dict()["state"][0]["step"] == 2


def test_eps_hat_first_step_hand_derived():
    lr, b2, eps = 0.1, 0.999, 1e-3
    w = np.array([1.0, -2.0])
    g = np.array([0.5, -0.02])
    Grams([w], lr=lr, eps=eps, eps_mode="eps_hat").step([g])
    # lr sqrt(b2)/b1 · |m| / (sqrt(v) + eps), b1 = 0.1, m = 0.1 g, sqrt(v) = sqrt(1-β2)|g|
    step = lr * np.sqrt(1 - b2) / 0.1 * 0.1 * np.abs(g) / (np.sqrt(1 - b2) * np.abs(g) + eps)
    close(w, np.array([1.0, -2.0]) - np.sign(g) * step)


def test_rule_stays_float32():
    f = np.float32
    h = GramsHyper(*[f(x) for x in (0.98, 0, 0, 0.1, 0.999, 0.001, 0, 0.1, 0.03, 1e-6, -0.1)])
    assert_typed_float32(grams_rule, (f(1.0), f(-0.5), (f(0.2), f(0.1)), h))


@pytest.mark.parametrize("kw, match", [
    (dict(lr=-1e-3), "learning rate"), (dict(betas=(1.0, 0.9)), "beta"),
    (dict(eps=-1.0), "epsilon"), (dict(weight_decay=-0.1), "weight_decay"),
    (dict(eps_mode="in_sqrt"), "eps_mode"), (dict(bias_correction=1), "bias_correction"),
    (dict(maximize="yes"), "maximize")])
def test_bad_hyperparameters_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        Grams([np.zeros(3)], **kw)


def test_bad_input_changes_nothing():
    w = np.array([1.0, 2.0, 3.0])
    opt = Grams([w], lr=0.1)
    opt.step([np.ones(3)])
    snap = snapshot(opt)
    opt.param_groups[0]["eps_mode"] = "torch"
    with pytest.raises(ValueError, match="eps_mode"):
        opt.step([np.ones(3)])
    opt.param_groups[0]["eps_mode"] = "bias_corrected"
    with pytest.raises(ValueError, match="shape"):
        opt.step([np.ones(4)])
    with pytest.raises(TypeError, match="sparse"):
        import scipy.sparse
        opt.step([scipy.sparse.csr_matrix(np.ones((1, 3)))])
    assert_unchanged(opt, snap)
