"""AdaBelief: optax.adabelief in float64 (defaults, nesterov, eps_root, L2 decay, maximize, a
schedule; two shapes, 24 steps), the authors' adabelief-pytorch 0.2.1 (rectification,
decoupled and fixed decay, amsgrad, degenerated_to_sgd), hand-derived steps, bad input."""
import numpy as np
import pytest
from hand_derived import assert_typed_float32, assert_unchanged, close, snapshot
from optax_compare import (assert_same_trajectory, npoptim_trajectory, optax_trajectory,
                           problem, schedule)

from npoptim.optim.adabelief import AdaBelief, AdaBeliefHyper, adabelief_amsgrad_rule


@pytest.mark.needs("optax", "jax")
def test_matches_optax_adabelief_defaults():
    import_optax = pytest.importorskip("optax")
    params, grads = problem(0)
    expected = optax_trajectory(lambda: import_optax.adabelief(1e-2), params, grads)
    opt = AdaBelief(params, lr=1e-2, variant="optax")
    assert_same_trajectory(npoptim_trajectory(opt, params, grads), expected)


@pytest.mark.needs("optax", "jax")
def test_matches_optax_nesterov_eps_root_schedule_maximize():
    optax = pytest.importorskip("optax")
    params, grads = problem(1)
    lrs, optax_lrs = schedule(2e-2)
    expected = optax_trajectory(
        lambda: optax.adabelief(optax_lrs, b1=0.8, b2=0.99, eps=1e-8, eps_root=1e-12,
                                nesterov=True), params, [[-g for g in gs] for gs in grads])
    opt = AdaBelief(params, lr=lrs[0], betas=(0.8, 0.99), eps=1e-8, eps_root=1e-12,
                    nesterov=True, maximize=True)
    assert_same_trajectory(npoptim_trajectory(opt, params, grads, lrs), expected)


@pytest.mark.needs("optax", "jax")
def test_l2_weight_decay_matches_optax_decayed_weights_first():
    optax = pytest.importorskip("optax")
    params, grads = problem(2)
    expected = optax_trajectory(lambda: optax.chain(optax.add_decayed_weights(0.1),
                                                    optax.scale_by_belief(eps=1e-8),
                                                    optax.scale_by_learning_rate(1e-2)),
                                params, grads)
    opt = AdaBelief(params, lr=1e-2, eps=1e-8, eps_root=1e-16, weight_decay=0.1)
    assert_same_trajectory(npoptim_trajectory(opt, params, grads), expected)


AUTHOR_CONFIGS = {
    "defaults (rectify, decoupled)": (dict(weight_decay=0.1), dict(variant="adabelief_pytorch",
                                                                     weight_decay=0.1)),
    "rectify, no sgd, l2, amsgrad": (
        dict(weight_decouple=False, weight_decay=0.1, degenerated_to_sgd=False, amsgrad=True),
        dict(variant="adabelief_pytorch", decoupled_weight_decay=False, weight_decay=0.1,
             degenerated_to_sgd=False, amsgrad=True)),
    "no rectify, amsgrad, fixed decay": (
        dict(rectify=False, amsgrad=True, fixed_decay=True, weight_decay=0.01, eps=1e-10),
        dict(amsgrad=True, decoupled_weight_decay=True, fixed_decay=True, weight_decay=0.01,
             eps=1e-10)),
}


@pytest.mark.needs("torch", "adabelief_pytorch")
@pytest.mark.parametrize("name", sorted(AUTHOR_CONFIGS))
def test_matches_the_authors_adabelief_pytorch(name):
    torch = pytest.importorskip("torch")
    adabelief_pytorch = pytest.importorskip("adabelief_pytorch")
    theirs, ours = AUTHOR_CONFIGS[name]
    params, grads = problem(3)
    tensors = [torch.tensor(p, requires_grad=True) for p in params]
    t_opt = adabelief_pytorch.AdaBelief(tensors, lr=1e-2, print_change_log=False,
                                        **{"eps": 1e-16, **theirs})
    expected = []
    for step_grads in grads:
        for t, g in zip(tensors, step_grads):
            t.grad = torch.tensor(g)
        t_opt.step()
        expected.append([t.detach().numpy().copy() for t in tensors])
    opt = AdaBelief(params, lr=1e-2, **ours)
    assert_same_trajectory(npoptim_trajectory(opt, params, grads), expected)
    close(opt.state[0]["exp_avg_var"], t_opt.state[tensors[0]]["exp_avg_var"].numpy(),
          rtol=1e-12)


def test_two_steps_hand_derived():
    lr, b1, b2, eps = 0.1, 0.9, 0.999, 1e-3
    w0 = np.array([1.0, -2.0])
    g1, g2 = np.array([0.5, -1.0]), np.array([-0.25, 2.0])
    w = w0.copy()
    opt = AdaBelief([w], lr=lr, eps=eps)
    opt.step([g1])
    opt.step([g2])
    m1 = (1 - b1) * g1
    s1 = (1 - b2) * (g1 - m1) ** 2 + eps
    w1 = w0 - lr * (m1 / (1 - b1)) / (np.sqrt(s1 / (1 - b2)) + eps)
    m2 = b1 * m1 + (1 - b1) * g2
    s2 = b2 * s1 + (1 - b2) * (g2 - m2) ** 2 + eps
    w2 = w1 - lr * (m2 / (1 - b1 ** 2)) / (np.sqrt(s2 / (1 - b2 ** 2)) + eps)
    close(w, w2)
    close(opt.state[0]["exp_avg_var"], s2)
    assert opt.state[0]["step"] == 2


def test_rule_stays_float32():
    h = AdaBeliefHyper(*[np.float32(v) for v in (0, 1, 0, 0.9, 0.1, 0.999, 0.001, 1e-16, 10, 0,
                                                 1, 1, 0.03, 1e-16, -0.1)])
    f = np.float32
    assert_typed_float32(adabelief_amsgrad_rule, (f(1.0), f(0.5), (f(0.2), f(0.1), f(0.3)), h))


@pytest.mark.parametrize("kw, match", [
    (dict(lr=-1e-3), "learning rate"), (dict(betas=(1.0, 0.9)), "beta"),
    (dict(eps=-1.0), "epsilon"), (dict(eps_root=-1.0), "eps_root"),
    (dict(weight_decay=-0.1), "weight_decay"), (dict(variant="adam"), "unknown variant"),
    (dict(amsgrad=1), "amsgrad"), (dict(rectify=True, nesterov=True), "do not combine")])
def test_bad_hyperparameters_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        AdaBelief([np.zeros(3)], **kw)


def test_bad_input_changes_nothing():
    w = np.array([1.0, 2.0, 3.0])
    opt = AdaBelief([w], lr=0.1)
    opt.step([np.ones(3)])
    snap = snapshot(opt)
    opt.param_groups[0]["amsgrad"] = True   # the state has no max_exp_avg_var
    with pytest.raises(ValueError, match="max_exp_avg_var"):
        opt.step([np.ones(3)])
    opt.param_groups[0]["amsgrad"] = False
    with pytest.raises(ValueError, match="dtype"):
        opt.step([np.ones(3, np.float32)])
    assert_unchanged(opt, snap)
