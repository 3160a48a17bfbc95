"""Lion: optax.lion in float64 (every option, a schedule, two shapes, 24 steps), the authors'
form against lucidrains' lion-pytorch, hand-derived steps, and bad input."""
import numpy as np
import pytest
from hand_derived import assert_typed_float32, assert_unchanged, close, snapshot
from optax_compare import (assert_same_trajectory, npoptim_trajectory, optax_trajectory,
                           problem, schedule)

from npoptim.optim.lion import Lion, LionHyper, lion_rule


def _optax_lion(lr, **kw):
    import optax
    return lambda: optax.lion(lr, **kw)


@pytest.mark.needs("optax", "jax")
@pytest.mark.parametrize("kw", [dict(), dict(weight_decay=0.1, betas=(0.95, 0.98))],
                         ids=["no-decay", "decay-betas"])
def test_matches_optax_lion(kw):
    params, grads = problem(0)
    b1, b2 = kw.get("betas", (0.9, 0.99))
    expected = optax_trajectory(_optax_lion(1e-2, b1=b1, b2=b2,
                                            weight_decay=kw.get("weight_decay", 0.0)),
                                params, grads)
    opt = Lion(params, lr=1e-2, variant="optax", **kw)
    assert_same_trajectory(npoptim_trajectory(opt, params, grads), expected)


@pytest.mark.needs("optax", "jax")
def test_matches_optax_lion_under_a_schedule_and_maximize():
    params, grads = problem(1)
    lrs, optax_lrs = schedule(3e-2)
    # maximize: optax descends on the negated gradient
    expected = optax_trajectory(_optax_lion(optax_lrs, weight_decay=0.05), params,
                                [[-g for g in gs] for gs in grads])
    opt = Lion(params, lr=lrs[0], weight_decay=0.05, maximize=True)
    assert_same_trajectory(npoptim_trajectory(opt, params, grads, lrs), expected)


@pytest.mark.needs("torch", "lion_pytorch")
@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_lion_pytorch_variant_matches_lion_pytorch(wd):
    torch = pytest.importorskip("torch")
    lion_pytorch = pytest.importorskip("lion_pytorch")
    params, grads = problem(2)
    tensors = [torch.tensor(p, requires_grad=True) for p in params]
    t_opt = lion_pytorch.Lion(tensors, lr=1e-2, betas=(0.9, 0.99), weight_decay=wd)
    expected = []
    for step_grads in grads:
        for t, g in zip(tensors, step_grads):
            t.grad = torch.tensor(g)
        t_opt.step()
        expected.append([t.detach().numpy().copy() for t in tensors])
    opt = Lion(params, lr=1e-2, weight_decay=wd, variant="lion_pytorch")
    assert_same_trajectory(npoptim_trajectory(opt, params, grads), expected)
    close(opt.state[0]["exp_avg"], t_opt.state[tensors[0]]["exp_avg"].numpy(), rtol=1e-12)


def test_two_steps_hand_derived():
    lr, lam, b1, b2 = 0.1, 0.5, 0.9, 0.99
    w0 = np.array([1.0, -2.0, 0.5])
    g1, g2 = np.array([0.3, 0.0, -1.0]), np.array([-0.1, 0.2, -0.5])
    w = w0.copy()
    opt = Lion([w], lr=lr, weight_decay=lam)
    opt.step([g1])
    opt.step([g2])
    m1 = (1 - b2) * g1
    w1 = w0 - lr * (np.sign((1 - b1) * g1) + lam * w0)   # sign(0) = 0 in element 1
    w2 = w1 - lr * (np.sign(b1 * m1 + (1 - b1) * g2) + lam * w1)
    close(w, w2)
    close(opt.state[0]["exp_avg"], b2 * m1 + (1 - b2) * g2)
    assert "step" not in opt.state[0]


def test_the_two_weight_decay_forms_agree_to_rounding():
    params, grads = problem(3)
    a = [p.copy() for p in params]
    b = [p.copy() for p in params]
    npoptim_trajectory(Lion(a, lr=1e-2, weight_decay=0.3), a, grads)
    npoptim_trajectory(Lion(b, lr=1e-2, weight_decay=0.3, weight_decay_form="decoupled"), b,
                       grads)
    for x, y in zip(a, b):
        close(x, y, rtol=1e-13)


def test_rule_stays_float32():
    h = LionHyper(*[np.float32(v) for v in (0, 0.9, 0.1, 0.99, 0.01, 0.1, 1.0, -0.1, 2.0)])
    assert_typed_float32(lion_rule, (np.float32(1.0), np.float32(0.5), (np.float32(0.2),), h))


@pytest.mark.parametrize("kw, match", [
    (dict(lr=-1e-3), "learning rate"), (dict(betas=(1.0, 0.9)), "beta"),
    (dict(betas=(0.9, -0.1)), "beta"), (dict(weight_decay=-0.1), "weight_decay"),
    (dict(variant="adam"), "unknown variant"), (dict(weight_decay_form="l2"), "weight_decay_form"),
    (dict(maximize=1), "maximize")])
def test_bad_hyperparameters_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        Lion([np.zeros(3)], **kw)


def test_bad_input_changes_nothing():
    w = np.array([1.0, 2.0, 3.0])
    opt = Lion([w], lr=0.1)
    opt.step([np.ones(3)])
    snap = snapshot(opt)
    opt.param_groups[0]["betas"] = (0.9, 1.5)
    with pytest.raises(ValueError, match="beta"):
        opt.step([np.ones(3)])
    opt.param_groups[0]["betas"] = (0.9, 0.99)
    with pytest.raises(ValueError, match="shape"):
        opt.step([np.ones(4)])
    with pytest.raises(TypeError, match="sparse"):
        import scipy.sparse
        opt.step([scipy.sparse.csr_matrix(np.ones((1, 3)))])
    with pytest.raises(ValueError, match="variant"):
        opt.add_param_group({"params": [np.zeros(2)], "variant": "paper"})
    assert_unchanged(opt, snap)
