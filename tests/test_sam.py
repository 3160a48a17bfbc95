"""SAM: optax.contrib.sam 0.2.8 (opaque mode, normalize + sgd(rho) adversary) in float64 around
SGD with momentum and Adam, on a non-quadratic objective (two shapes, 24 steps, one and two
adversarial steps, an lr schedule); the ascent hand-derived; restoring and atomicity; bad
input. ASAM (adaptive=True): the authors' ascent (davda54/sam, SamsungLabs/ASAM) transcribed in
torch around torch's SGD in float64, and pytorch_optimizer's SAM(adaptive=True) in float32 (its
norm is float32)."""
import numpy as np
import pytest
from hand_derived import close
from optax_contrib import (SHAPES, STEPS, assert_trajectories_close, lr_schedule, needs_optax,
                           optax, x64)
from torch_compare import needs_torch, torch

from npoptim.optim.adam import Adam
from npoptim.optim.lbfgs import LBFGS
from npoptim.optim.sam import SAM
from npoptim.optim.sgd import SGD


def objective(seed=0, shapes=SHAPES):
    """Initial params and ``f(t, params) -> (loss, grads)``: a quartic around per-parameter
    centres, plus a fixed per-step linear term (so the gradient changes with the step)."""
    rng = np.random.default_rng(seed)
    params = [rng.uniform(-1, 1, s) for s in shapes]
    centres = [rng.standard_normal(s) for s in shapes]
    linear = [[rng.standard_normal(s) * 0.3 for s in shapes] for _ in range(STEPS)]

    def f(t, ps):
        loss = sum(float(np.sum(0.5 * (p - c) ** 2 + 0.125 * (p - c) ** 4 + n * p))
                   for p, c, n in zip(ps, centres, linear[t]))
        return loss, [(p - c) + 0.5 * (p - c) ** 3 + n for p, c, n in zip(ps, centres, linear[t])]
    return params, f


def run_optax_sam(make_inner, params, f, rho, adversarial_steps, lrs=None):
    with x64():
        import jax.numpy as jnp
        inner = make_inner(lrs is not None)
        tx = optax.contrib.sam(inner, optax.chain(optax.contrib.normalize(), optax.sgd(rho)),
                               sync_period=adversarial_steps + 1, opaque_mode=True)
        ps = [jnp.asarray(p) for p in params]
        state = tx.init(ps)
        out = []
        for t in range(STEPS):
            if lrs is not None:
                state.opt_state.hyperparams["learning_rate"] = jnp.asarray(lrs[t])

            def grad_fn(qs, i, t=t):
                return [jnp.asarray(g) for g in f(t, [np.asarray(q) for q in qs])[1]]
            g = grad_fn(ps, 0)
            updates, state = tx.update(g, state, ps, grad_fn=grad_fn)
            ps = optax.apply_updates(ps, updates)
            out.append([np.asarray(p) for p in ps])
    return out


def run_sam(make_inner, params, f, rho, adversarial_steps, lrs=None, **kw):
    ps = [p.copy() for p in params]
    opt = SAM(make_inner(ps), rho, adversarial_steps=adversarial_steps, **kw)
    out = []
    for t in range(STEPS):
        if lrs is not None:
            opt.param_groups[0]["lr"] = lrs[t]
        opt.step(lambda t=t: f(t, ps))
        out.append([p.copy() for p in ps])
    return out, opt


@needs_optax
@pytest.mark.parametrize("inner, rho, adversarial_steps", [("sgd", 0.05, 1), ("adam", 0.2, 1),
                                                           ("sgd", 0.1, 2)])
def test_matches_optax_sam(inner, rho, adversarial_steps):
    params, f = objective(0)
    if inner == "sgd":
        ours = lambda ps: SGD(ps, lr=0.05, momentum=0.9)   # noqa: E731
        theirs = lambda _: optax.sgd(0.05, momentum=0.9)   # noqa: E731
    else:
        ours = lambda ps: Adam(ps, lr=0.02)                # noqa: E731
        theirs = lambda _: optax.adam(0.02)                # noqa: E731
    expected = run_optax_sam(theirs, params, f, rho, adversarial_steps)
    actual, _ = run_sam(ours, params, f, rho, adversarial_steps)
    assert_trajectories_close(actual, expected)


@needs_optax
def test_matches_optax_sam_under_an_lr_schedule():
    params, f = objective(1)
    lrs = lr_schedule(lr=0.05)
    expected = run_optax_sam(lambda _: optax.inject_hyperparams(optax.adam)(learning_rate=lrs[0]),
                             params, f, 0.1, 1, lrs=lrs)
    actual, _ = run_sam(lambda ps: Adam(ps, lr=lrs[0]), params, f, 0.1, 1, lrs=lrs)
    assert_trajectories_close(actual, expected)


try:
    import pytorch_optimizer
except ImportError:  # pragma: no cover
    pytorch_optimizer = None
needs_pytorch_optimizer = pytest.mark.needs("pytorch_optimizer", "torch")


def run_torch_asam(params, f, rho, eta, eps, adaptive, lr=0.05, momentum=0.9):
    """ASAM's ascent as the authors write it (SamsungLabs/ASAM asam.py; davda54/sam with
    eta 0): T = |p| + eta on adaptive parameters (1 on the others), the norm of the per-
    parameter norms of T g, p += T (T g) rho / (norm + eps); then restore and torch's SGD."""
    ps = [torch.tensor(p) for p in params]
    opt = torch.optim.SGD(ps, lr=lr, momentum=momentum)
    out = []
    for t in range(STEPS):
        _, grads = f(t, [p.numpy() for p in ps])
        grads = [torch.tensor(g) for g in grads]
        old = [p.clone() for p in ps]
        scale = [p.abs() + eta if a else torch.ones_like(p) for p, a in zip(ps, adaptive)]
        norm = torch.norm(torch.stack([torch.norm(s * g) for s, g in zip(scale, grads)])) + eps
        for p, s, g in zip(ps, scale, grads):
            p.add_(s * (s * g) * (rho / norm))
        _, grads = f(t, [p.numpy() for p in ps])
        for p, p0, g in zip(ps, old, grads):
            p.data.copy_(p0)
            p.grad = torch.tensor(g)
        opt.step()
        out.append([p.numpy().copy() for p in ps])
    return out


@needs_torch
@pytest.mark.parametrize("rho, eta, eps, adaptive", [
    (0.05, 0.0, 1e-12, (True, True)),        # davda54/sam adaptive=True
    (0.5, 0.01, 1e-16, (True, False))],      # SamsungLabs/ASAM: "weight" parameters only
    ids=["davda54", "asam-weights-only"])
def test_asam_matches_the_authors_ascent(rho, eta, eps, adaptive):
    params, f = objective(3)
    expected = run_torch_asam(params, f, rho, eta, eps, adaptive)
    actual, _ = run_sam(lambda ps: SGD(ps, lr=0.05, momentum=0.9), params, f, rho, 1,
                        adaptive=list(adaptive), eta=eta, eps=eps)
    assert_trajectories_close(actual, expected)
    plain, _ = run_sam(lambda ps: SGD(ps, lr=0.05, momentum=0.9), params, f, rho, 1, eps=eps)
    with pytest.raises(AssertionError):
        assert_trajectories_close(plain, expected)


@needs_pytorch_optimizer
def test_asam_matches_pytorch_optimizer_in_float32():
    params, f = objective(4)
    params = [p.astype(np.float32) for p in params]

    def f32(t, ps):
        loss, grads = f(t, [p.astype(np.float64) for p in ps])
        return loss, [g.astype(np.float32) for g in grads]
    ps = [torch.tensor(p) for p in params]
    theirs = pytorch_optimizer.SAM(ps, torch.optim.SGD, rho=0.1, adaptive=True, lr=0.05,
                                   momentum=0.9)
    expected = []
    for t in range(STEPS):
        for p, g in zip(ps, f32(t, [p.detach().numpy() for p in ps])[1]):
            p.grad = torch.tensor(g)

        def closure(t=t):
            for p, g in zip(ps, f32(t, [p.detach().numpy() for p in ps])[1]):
                p.grad = torch.tensor(g)
        theirs.step(closure)
        expected.append([p.detach().numpy().copy() for p in ps])
    actual, _ = run_sam(lambda qs: SGD(qs, lr=0.05, momentum=0.9), params, f32, 0.1, 1,
                        adaptive=True, eps=1e-12)
    assert_trajectories_close(actual, expected, rtol=2e-6)


def test_asam_ascent_hand_derived():
    w, v = np.array([2.0, -0.5]), np.array([4.0])
    seen = []

    def closure():
        seen.append((w.copy(), v.copy()))
        return 0.0, [np.array([1.0, 2.0]), np.array([0.5])]
    SAM(SGD([w, v], lr=0.1), rho=0.3, adaptive=[True, False], eta=0.5).step(closure)
    # T = (2.5, 1.0) on w, 1 on v: T g = (2.5, 2.0), (0.5); norm sqrt(6.25 + 4 + 0.25) = sqrt(10.5)
    norm = np.sqrt(10.5)
    close(seen[1][0], [2.0 + 0.3 * 6.25 / norm, -0.5 + 0.3 * 2.0 / norm])
    close(seen[1][1], [4.0 + 0.3 * 0.5 / norm])


def test_ascent_hand_derived_and_parameters_restored():
    # f = 0.5 (w^2 + v^2): g = (w, v); one SAM step of plain SGD lr 0.1 with rho 0.5
    w, v = np.array([3.0]), np.array([4.0])
    seen = []

    def closure():
        seen.append((w.copy(), v.copy()))
        return 0.5 * float(w @ w + v @ v), [w.copy(), v.copy()]
    opt = SAM(SGD([w, v], lr=0.1), rho=0.5, eps=1.0)
    assert opt.step(closure) == 12.5
    # perturbed by rho g / (|g| + eps) = 0.5 (3, 4) / 6
    close(seen[1][0], [3.0 + 0.25])
    close(seen[1][1], [4.0 + 1.0 / 3.0])
    close(w, [3.0 - 0.1 * 3.25])
    close(v, [4.0 - 0.1 * (4.0 + 1.0 / 3.0)])


def test_zero_gradient_does_not_perturb_and_none_is_left_alone():
    w, v = np.array([1.0, 2.0]), np.array([5.0])
    points = []

    def closure():
        points.append(w.copy())
        return 0.0, [np.zeros(2), None]
    SAM(SGD([w, v], lr=0.1)).step(closure)
    np.testing.assert_array_equal(points[1], [1.0, 2.0])
    np.testing.assert_array_equal(w, [1.0, 2.0])
    np.testing.assert_array_equal(v, [5.0])


def test_a_gradient_that_is_the_parameter_is_read_before_the_ascent():
    w = np.array([3.0, 4.0])
    SAM(SGD([w], lr=1.0), rho=5.0).step(lambda: (0.0, [w]))   # g = w (f = |w|^2 / 2)
    close(w, [3.0 - 6.0, 4.0 - 8.0])     # the gradient at w + 5 w/|w| = 2 w


def test_state_dict_round_trip_continues_identically():
    params, f = objective(2)
    a = [p.copy() for p in params]
    opt = SAM(Adam(a, lr=0.01), rho=0.1, adversarial_steps=2)
    opt.step(lambda: f(0, a))
    b = [p.copy() for p in a]
    other = SAM(Adam(b, lr=0.01))
    other.load_state_dict(opt.state_dict())
    assert other.adversarial_steps == 2 and other.rho == 0.1
    opt.step(lambda: f(1, a))
    other.step(lambda: f(1, b))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_asam_state_dict_round_trip_and_an_older_state_dict():
    params, f = objective(2)
    a = [p.copy() for p in params]
    opt = SAM(Adam(a, lr=0.01), rho=0.2, adaptive=[True, False], eta=0.01)
    opt.step(lambda: f(0, a))
    b = [p.copy() for p in a]
    other = SAM(Adam(b, lr=0.01))
    other.load_state_dict(opt.state_dict())
    assert other.adaptive == [True, False] and other.eta == 0.01
    opt.step(lambda: f(1, a))
    other.step(lambda: f(1, b))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    older = {k: v for k, v in opt.state_dict().items() if k not in ("adaptive", "eta")}
    other.load_state_dict(older)
    assert other.adaptive == [False, False] and other.eta == 0.0
    with pytest.raises(ValueError, match="keys"):
        other.load_state_dict(dict(older, eta=0.1))


@pytest.mark.parametrize("kw, match", [
    (dict(rho=-0.1), "rho"), (dict(rho=float("nan")), "rho"), (dict(eps=-1.0), "eps"),
    (dict(adversarial_steps=0), "adversarial_steps"),
    (dict(adversarial_steps=1.5), "adversarial_steps"), (dict(eta=-0.1), "eta"),
    (dict(adaptive=1), "adaptive"), (dict(adaptive=[True, True]), "adaptive"),
    (dict(eta=0.5), "needs adaptive=True")])
def test_bad_settings_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        SAM(SGD([np.zeros(2)]), **kw)


def test_bad_wrapped_optimizers_raise():
    with pytest.raises(TypeError, match="wraps an npoptim optimizer"):
        SAM([np.zeros(2)])
    with pytest.raises(TypeError, match="closure"):
        SAM(LBFGS([np.zeros(2)]))


def test_bad_input_changes_nothing():
    w = np.array([1.0, 2.0])
    opt = SAM(SGD([w], lr=0.1, momentum=0.9))
    with pytest.raises(TypeError, match="needs a closure"):
        opt.step([np.ones(2)])
    with pytest.raises(ValueError, match="shape"):
        opt.step(lambda: (1.0, [np.ones(3)]))
    calls = []

    def bad_second():   # the gradient at the perturbed point is wrong
        calls.append(w.copy())
        return 1.0, [np.ones(2) if len(calls) == 1 else np.ones(2, np.float32)]
    with pytest.raises(ValueError, match="dtype"):
        opt.step(bad_second)
    assert not np.array_equal(calls[1], [1.0, 2.0])   # it was called at the perturbed point

    def failing_second():
        if calls:
            raise RuntimeError("boom")
        calls.append(1)
        return 1.0, [np.ones(2)]
    calls.clear()
    with pytest.raises(RuntimeError, match="boom"):
        opt.step(failing_second)
    np.testing.assert_array_equal(w, [1.0, 2.0])
    assert opt.optimizer.state == {}
