"""Sophia: optax.contrib.sophia 0.2.8 in float64 over 24 steps on two shapes: with the caller's
Hessian-diagonal estimates (optax given the same through a custom hessian_diagonal_fn), and
with Hutchinson's estimate from a Hessian-vector product fed optax's own Rademacher probes
(optax differentiating the objective with jax); clipping on and off, weight decay, update
intervals, an lr schedule; the counter-stream probes and the first steps hand-derived; bad
input."""
import numpy as np
import pytest
from hand_derived import close
from optax_contrib import (SHAPES, STEPS, assert_trajectories_close, authors_code, lr_schedule,
                           needs_optax, optax, x64)

from npoptim.kernels.counter_stream import standard_normal
from npoptim.optim.sophia import Sophia

KAPPA = 0.3
sophia_opt, needs_sophia_opt = authors_code("sophia_opt")


def objective(seed=0, shapes=SHAPES):
    """Initial params and the pieces of f(t, p) = sum(a (p-c)^2/2 + (p-c)^4/8 + n_t p)
    + KAPPA (sum of every element)^2 / 2, a non-separable objective (its Hessian
    diag(a + 1.5 (p-c)^2) + KAPPA 1 1^T makes Hutchinson's estimate depend on the probe)."""
    rng = np.random.default_rng(seed)
    params = [rng.uniform(-1, 1, s) for s in shapes]
    a = [rng.uniform(0.5, 3.0, s) for s in shapes]
    c = [rng.standard_normal(s) for s in shapes]
    n = [[rng.standard_normal(s) * 0.3 for s in shapes] for _ in range(STEPS)]
    return params, a, c, n


def grads_of(ps, a, c, n, t):
    total = sum(float(np.sum(p)) for p in ps)
    return [ai * (p - ci) + 0.5 * (p - ci) ** 3 + KAPPA * total + ni
            for p, ai, ci, ni in zip(ps, a, c, n[t])]


def hvp_of(ps, a, c, r):
    total = sum(float(np.sum(x)) for x in r)
    return [(ai + 1.5 * (p - ci) ** 2) * ri + KAPPA * total
            for p, ai, ci, ri in zip(ps, a, c, r)]


def given_hessians(seed, shapes=SHAPES):
    """The caller's estimates of each step (positive and negative values)."""
    rng = np.random.default_rng(seed + 100)
    return [[rng.uniform(-0.5, 4.0, s) for s in shapes] for _ in range(STEPS)]


def run_optax_sophia(params, a, c, n, kw, lrs, hessians=None, probe_seed=0, squared=False):
    import jax
    with x64():
        import jax.numpy as jnp
        if squared:
            def init(_):
                return optax.EmptyState()

            def update(updates, state, params=None, **extra):
                return [u * u for u in updates], state
            kw = dict(kw, hessian_diagonal_fn=optax.GradientTransformationExtraArgs(init, update))
        elif hessians is not None:
            def init(_):
                return optax.EmptyState()

            def update(updates, state, params=None, hess=None, **extra):
                return hess, state
            kw = dict(kw, hessian_diagonal_fn=optax.GradientTransformationExtraArgs(init, update))
        else:
            kw = dict(kw, hessian_diagonal_fn=optax.contrib.hutchinson_estimator_diag_hessian(
                jax.random.PRNGKey(probe_seed)))
        tx = optax.inject_hyperparams(optax.contrib.sophia, static_args=(
            "hessian_diagonal_fn", "clip_threshold", "update_interval"))(
            learning_rate=lrs[0], **kw)
        ps = [jnp.asarray(p) for p in params]
        state = tx.init(ps)
        out = []
        for t in range(STEPS):
            state.hyperparams["learning_rate"] = jnp.asarray(lrs[t])
            g = [jnp.asarray(x) for x in grads_of([np.asarray(p) for p in ps], a, c, n, t)]
            extra = {}
            if squared:
                pass
            elif hessians is not None:
                extra["hess"] = [jnp.asarray(h) for h in hessians[t]]
            else:
                def obj_fn(qs, t=t):
                    total = sum(jnp.sum(q) for q in qs)
                    return sum(jnp.sum(ai * (q - ci) ** 2 / 2 + (q - ci) ** 4 / 8 + ni * q)
                               for q, ai, ci, ni in zip(qs, a, c, n[t])) \
                        + KAPPA * total ** 2 / 2
                extra["obj_fn"] = obj_fn
            updates, state = tx.update(g, state, ps, **extra)
            ps = optax.apply_updates(ps, updates)
            out.append([np.asarray(p) for p in ps])
    return out


def optax_probes(params, probe_seed, count):
    """optax's Hutchinson probes: its key split once per estimate, then random_like."""
    import jax
    with x64():
        import jax.numpy as jnp
        key = jax.random.PRNGKey(probe_seed)
        out = []
        for _ in range(count):
            key, subkey = jax.random.split(key)
            signs = optax.tree.random_like(subkey, [jnp.asarray(p) for p in params],
                                           jax.random.rademacher, dtype=jnp.float32)
            out.append([np.asarray(s, np.float64) for s in signs])
    return out


def run_sophia(params, a, c, n, kw, lrs, hessians=None, probes=None):
    ps = [p.copy() for p in params]
    opt = Sophia(ps, lr=lrs[0], **kw)
    k = kw.get("update_interval", 10)
    out = []
    for t in range(STEPS):
        opt.param_groups[0]["lr"] = lrs[t]
        g = grads_of(ps, a, c, n, t)
        if kw.get("hessian_estimate") == "squared-gradient":
            opt.step(g)
        elif hessians is not None:
            opt.step(g, hessian=hessians[t])
        else:
            opt.step(g, hvp=lambda r: hvp_of(ps, a, c, r),
                     probes=None if probes is None else probes[t // k])
        out.append([p.copy() for p in ps])
    return out, opt


OPTIONS = [dict(), dict(betas=(0.9, 0.95), gamma=0.5, weight_decay=0.1, update_interval=3),
           # without clipping, eps bounds the step where an estimate is small or negative
           dict(betas=(0.9, 0.5), gamma=1.0, clip_threshold=None, update_interval=4, eps=0.2)]


def optax_kw(kw):
    out = {k: v for k, v in kw.items() if k != "betas"}
    if "betas" in kw:
        out["b1"], out["b2"] = kw["betas"]
    return out


@needs_optax
@pytest.mark.parametrize("kw", OPTIONS, ids=["defaults", "decay-interval3", "no-clip"])
def test_matches_optax_given_hessian_estimates(kw):
    params, a, c, n = objective(0)
    lrs = lr_schedule(lr=0.02)
    hessians = given_hessians(0)
    expected = run_optax_sophia(params, a, c, n, optax_kw(kw), lrs, hessians=hessians)
    actual, _ = run_sophia(params, a, c, n, kw, lrs, hessians=hessians)
    assert_trajectories_close(actual, expected)


@needs_optax
@pytest.mark.parametrize("kw", OPTIONS[1:], ids=["decay-interval3", "no-clip"])
def test_matches_optax_hutchinson_given_its_probes(kw):
    params, a, c, n = objective(1)
    lrs = [0.02] * STEPS
    k = kw["update_interval"]
    probes = optax_probes(params, 5, (STEPS + k - 1) // k)
    expected = run_optax_sophia(params, a, c, n, optax_kw(kw), lrs, probe_seed=5)
    actual, _ = run_sophia(params, a, c, n, kw, lrs, probes=probes)
    assert_trajectories_close(actual, expected)


@needs_optax
def test_matches_optax_with_the_squared_gradient_estimate():
    params, a, c, n = objective(3)
    lrs = lr_schedule(lr=0.02)
    kw = dict(betas=(0.9, 0.8), gamma=0.05, weight_decay=0.01, update_interval=2)
    expected = run_optax_sophia(params, a, c, n, optax_kw(kw), lrs, squared=True)
    actual, _ = run_sophia(params, a, c, n, dict(kw, hessian_estimate="squared-gradient"), lrs)
    assert_trajectories_close(actual, expected)


def sampled_grads(seed, shapes=SHAPES):
    """The gradients of a loss with sampled labels that the authors' update_hessian squares."""
    rng = np.random.default_rng(seed + 200)
    return [[rng.standard_normal(s) for s in shapes] for _ in range(STEPS)]


def run_authors_sophiag(params, a, c, n, kw, lrs, sampled, bs):
    """The authors' SophiaG (sophia-opt) in their training loop's order: ``step(bs=bs)``,
    then, after steps k, 2k, ..., ``update_hessian()`` from the sampled-label gradients."""
    import torch
    ps = [torch.tensor(p) for p in params]
    opt = sophia_opt.SophiaG(ps, lr=lrs[0], betas=kw["betas"], rho=kw["rho"],
                             weight_decay=kw["weight_decay"])
    out = []
    for t in range(STEPS):
        opt.param_groups[0]["lr"] = lrs[t]
        for p, g in zip(ps, grads_of([p.numpy() for p in ps], a, c, n, t)):
            p.grad = torch.tensor(g)
        opt.step(bs=bs)
        if t % kw["update_interval"] == kw["update_interval"] - 1:
            for p, g in zip(ps, sampled[t]):
                p.grad = torch.tensor(g)
            opt.update_hessian()
        out.append([p.numpy().copy() for p in ps])
    return out


@needs_sophia_opt
@pytest.mark.parametrize("kw", [dict(betas=(0.965, 0.99), rho=0.04, weight_decay=0.1,
                                     update_interval=10),
                                dict(betas=(0.9, 0.8), rho=0.5, weight_decay=0.0,
                                     update_interval=3)], ids=["defaults", "interval3"])
def test_sophiag_variant_matches_the_authors_code(kw):
    params, a, c, n = objective(4)
    lrs = lr_schedule(lr=0.02)
    sampled = sampled_grads(4)
    bs = 8
    expected = run_authors_sophiag(params, a, c, n, kw, lrs, sampled, bs)
    ours = dict(betas=kw["betas"], gamma=kw["rho"] * bs, eps=1e-15,
                weight_decay=kw["weight_decay"], update_interval=kw["update_interval"],
                variant="sophiag")
    estimates = [[g * g for g in step] for step in sampled]
    actual, opt = run_sophia(params, a, c, n, ours, lrs, hessians=estimates)
    assert_trajectories_close(actual, expected)
    assert opt.param_groups[0]["bias_correction"] is False


def test_variants_set_their_switches_and_a_switch_overrides_one():
    w = [np.zeros(2)]
    for variant, want in (("optax", (True, "max", "after")), ("paper", (False, "max", "before")),
                          ("authors", (False, "added", "after-kth"))):
        group = Sophia(w, variant=variant).param_groups[0]
        assert (group["bias_correction"], group["eps_mode"], group["hessian_update"]) == want
    group = Sophia(w, variant="sophiag", eps_mode="max").param_groups[0]
    assert (group["eps_mode"], group["hessian_update"]) == ("max", "after-kth")
    assert Sophia(w, variant="sophia_opt").variant == "sophiag"


def test_paper_and_authors_schedules_hand_derived():
    g = np.array([1.0, -2.0, 0.5])
    est = [np.array([4.0, 1.0, 0.25])]
    # the paper: h takes the estimate at the start of step 1, no bias correction
    w = np.array([0.5, -1.0, 2.0])
    opt = Sophia([w], lr=0.1, betas=(0.5, 0.9), weight_decay=0.0, gamma=2.0, update_interval=2,
                 variant="paper")
    opt.step([g], hessian=est)
    h = 0.1 * est[0]
    m = 0.5 * g
    close(w, np.array([0.5, -1.0, 2.0]) - 0.1 * np.clip(m / np.maximum(2.0 * h, 1e-8), -1, 1))
    close(opt.state[0]["hessian"], h)
    opt.step([g])                       # step 2 takes no estimate
    # the authors': steps 1 and 2 run with h = 0 (sign steps through eps added), then the
    # estimate passed at step 2 enters h after it
    w = np.array([0.5, -1.0, 2.0])
    opt = Sophia([w], lr=0.1, betas=(0.5, 0.9), weight_decay=0.2, gamma=2.0, eps=1e-15,
                 update_interval=2, variant="sophiag")
    opt.step([g])
    expected = np.array([0.5, -1.0, 2.0]) * (1 - 0.1 * 0.2) - 0.1 * np.sign(g)
    close(w, expected)
    close(opt.state[0]["hessian"], [0.0, 0.0, 0.0])
    opt.step([g], hessian=est)
    m = 0.5 * (0.5 * g) + 0.5 * g
    expected = expected * (1 - 0.1 * 0.2) - 0.1 * np.sign(m)
    close(w, expected)
    close(opt.state[0]["hessian"], 0.1 * est[0])
    opt.step([g])
    m = 0.5 * m + 0.5 * g
    expected = expected * (1 - 0.1 * 0.2) - 0.1 * np.clip(m / (2.0 * 0.1 * est[0] + 1e-15), -1, 1)
    close(w, expected)
    # eps added to gamma h, or its floor: told apart by a large eps
    for mode, denom in (("added", 2.0 * 0.1 * est[0] + 0.3),
                        ("max", np.maximum(2.0 * 0.1 * est[0], 0.3))):
        w = np.array([0.5, -1.0, 2.0])
        opt = Sophia([w], lr=0.1, betas=(0.5, 0.9), weight_decay=0.0, gamma=2.0, eps=0.3,
                     clip_threshold=None, variant="paper", eps_mode=mode)
        opt.step([g], hessian=est)
        close(w, np.array([0.5, -1.0, 2.0]) - 0.1 * (0.5 * g) / denom)


def test_stream_probes_and_first_steps_hand_derived():
    w = np.array([0.5, -1.0, 2.0])
    opt = Sophia([w], lr=0.1, betas=(0.5, 0.9), weight_decay=0.0, gamma=1.0, update_interval=2,
                 seed=11)
    seen = []

    def hvp(r):
        seen.append(r[0].copy())
        return [2.0 * r[0]]          # H = 2 I: the estimate is 2 whatever the probe
    g = np.array([1.0, -2.0, 0.0])
    opt.step([g], hvp=hvp)
    z = standard_normal(11, 0, 1, 3)
    np.testing.assert_array_equal(seen[0], np.where(z >= 0, 1.0, -1.0))
    # step 1: h = 0, so u = clip(m / (b1 eps)) = sign(g); then h = 0.1 * 2
    close(w, [0.5 - 0.1, -1.0 + 0.1, 2.0])
    close(opt.state[0]["hessian"], [0.2, 0.2, 0.2])
    # step 2 does not update h (and does not call hvp): u = clip((m / b1) / (gamma h))
    opt.step([g], hvp=hvp)
    assert len(seen) == 1
    m = 0.5 * (0.5 * g) + 0.5 * g
    u = np.clip(m / (1 - 0.25) / 0.2, -1, 1)
    close(w, np.array([0.4, -0.9, 2.0]) - 0.1 * u)
    close(opt.state[0]["exp_avg"], m)
    # step 3 updates it again, from the stream at t = 3
    opt.step([g], hessian=[np.array([1.0, 1.0, 1.0])])
    close(opt.state[0]["hessian"], 0.9 * 0.2 + 0.1 * 1.0)


@pytest.mark.parametrize("kw, match", [
    (dict(lr=-1.0), "learning rate"), (dict(betas=(1.0, 0.9)), "beta"),
    (dict(eps=-1.0), "epsilon"), (dict(gamma=-0.1), "gamma"),
    (dict(weight_decay=-0.1), "weight_decay"), (dict(clip_threshold=-1.0), "clip_threshold"),
    (dict(update_interval=0), "update_interval"), (dict(update_interval=2.5), "update_interval"),
    (dict(seed=-1), "seed"), (dict(hessian_estimate="exact"), "hessian_estimate"),
    (dict(variant="sophia"), "unknown variant"), (dict(bias_correction=1), "bias_correction"),
    (dict(eps_mode="inside"), "eps_mode"), (dict(hessian_update="every"), "hessian_update")])
def test_bad_hyperparameters_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        Sophia([np.zeros(3)], **kw)


def test_bad_input_changes_nothing():
    w = np.array([1.0, 2.0])
    opt = Sophia([w])
    g = [np.ones(2)]
    for kwargs, error, match in (
            (dict(), ValueError, "hessian=\\[...\\] or hvp"),
            (dict(hessian=[np.ones(3)]), ValueError, "hessian\\[0\\] must be"),
            (dict(hessian=[None]), ValueError, "None"),
            (dict(hvp=lambda r: [np.ones(3)]), ValueError, "hvp\\(probes\\)\\[0\\]"),
            (dict(hvp=lambda r: [None]), ValueError, "None"),
            (dict(hvp=lambda r: r, probes=[np.ones(2, np.float32)]), ValueError, "probes"),
            (dict(hessian=[np.ones(2)], hvp=lambda r: r), TypeError, "not both"),
            (dict(probes=[np.ones(2)]), TypeError, "hvp too")):
        with pytest.raises(error, match=match):
            opt.step(g, **kwargs)
    with pytest.raises(ValueError, match="shape"):
        opt.step([np.ones(3)], hessian=[np.ones(2)])
    np.testing.assert_array_equal(w, [1.0, 2.0])
    assert opt.state == {}
    own = Sophia([w], hessian_estimate="squared-gradient")
    with pytest.raises(TypeError, match="makes its own estimate"):
        own.step(g, hessian=[np.ones(2)])
    np.testing.assert_array_equal(w, [1.0, 2.0])
    own.step(g)
    close(own.state[0]["hessian"], [0.01, 0.01])     # (1 - b2) g^2


def test_state_dict_round_trip_continues_identically():
    params, a, c, n = objective(2)
    x = [p.copy() for p in params]
    opt = Sophia(x, lr=0.01, update_interval=2, seed=3)
    for t in range(3):
        opt.step(grads_of(x, a, c, n, t), hvp=lambda r: hvp_of(x, a, c, r))
    y = [p.copy() for p in x]
    other = Sophia(y, lr=0.01, update_interval=2, seed=3)
    other.load_state_dict(opt.state_dict())
    opt.step(grads_of(x, a, c, n, 3), hvp=lambda r: hvp_of(x, a, c, r))
    other.step(grads_of(y, a, c, n, 3), hvp=lambda r: hvp_of(y, a, c, r))
    for p, q in zip(x, y):
        np.testing.assert_array_equal(p, q)
