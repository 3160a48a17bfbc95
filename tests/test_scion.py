"""Scion: pytorch_optimizer 4.1.0's SCION and SCIONLight in float64 (every norm, a wide and a
tall matrix, a vector, a 0-d value, a 3-D and a 4-D conv-like tensor, 24 steps under an lr
schedule with gradients of a random scale per step; weight decay decoupled and coupled, the
constrained form, radii per group, both of its paths), once with its Newton–Schulz in float64
(npoptim's ``ns_dtype="param"``, pytorch_optimizer's function called with ``dtype=float64``)
and once in bfloat16 as it runs by default; the authors' form (LIONS-EPFL/scion,
``variant="lions_epfl"``) against their step written out in torch around their Newton–Schulz
(Keller Jordan's, from muon-optimizer) and in hand-derived steps; the switches, bad input."""
import functools
import math

import numpy as np
import pytest
from hand_derived import assert_unchanged, close, snapshot
from scheduled_runs import npoptim_trajectory, random_problem, worst_error

from npoptim.optim import scion as scion_module
from npoptim.optim.orthogonalize import zeropower_via_newtonschulz
from npoptim.optim.scion import Scion

try:
    import torch
except ImportError:  # the tests of npoptim alone still run
    torch = None

STEPS = 24
LRS = [2e-2 * min(1.0, (t + 1) / 5) * (0.5 + 0.5 * math.cos(math.pi * t / STEPS))
       for t in range(STEPS)]
#: the worst float64 error allowed, relative to each tensor's scale (measured: see the tests)
RTOL64 = 1e-12

#: (shape, group options): each group one norm, as one gives each layer its own.
GROUPS = [
    ((4, 6), dict(norm="spectral", scale=2.0)),
    ((7, 3), dict(norm="auto")),
    ((5, 4), dict(norm="spectral", normalized=False, max_scale=True, scale=0.5)),
    ((5,), dict(norm="auto", scale=3.0)),
    ((), dict(norm="bias")),
    ((3, 2, 3), dict(norm="auto")),
    ((4, 2, 3, 3), dict(norm="spectral_conv", scale=1.5)),
    ((4, 6), dict(norm="sign", scale=60.0)),
    ((6, 5), dict(norm="sign", normalized=False)),
    ((6, 4), dict(norm="col")),
    ((4, 6), dict(norm="col", normalized=True, transpose=True, scale=2.0)),
    ((3, 5), dict(norm="row")),
    ((6, 3), dict(norm="row", normalized=False, transpose=True)),
    ((4, 3), dict(norm="bias")),
    ((3, 4), dict(norm="none", scale=0.1)),
]
PT_NORM = {"auto": "AUTO", "spectral": "SPECTRAL", "spectral_conv": "SPECTRALCONV",
           "sign": "SIGN", "bias": "BIAS", "col": "COL", "row": "ROW", "none": "NONE"}


def pt_norm_kwargs(options):
    """pytorch_optimizer's ``norm_kwargs`` of npoptim's norm options (its Spectral and Sign
    say ``normalize``, its Col and Row ``normalized``)."""
    kw = {}
    norm = options["norm"]
    if "normalized" in options:
        kw["normalize" if norm in ("spectral", "sign") else "normalized"] = options["normalized"]
    if "max_scale" in options:
        kw["max_scale"] = options["max_scale"]
    if "transpose" in options:
        kw["transpose"] = options["transpose"]
    return kw


def problem(seed, groups=GROUPS):
    return random_problem(seed, [s for s, _ in groups], STEPS)


def run_npoptim(params, grads, groups=GROUPS, **kw):
    ps = [p.copy() for p in params]
    opt = Scion([dict(params=[p], **o) for p, (_, o) in zip(ps, groups)], lr=LRS[0], **kw)
    return npoptim_trajectory(opt, ps, grads, LRS), opt


def run_pytorch_optimizer(params, grads, groups=GROUPS, light=False, **kw):
    """pytorch_optimizer's SCION (or SCIONLight: its gradients are not zeroed, each step's
    gradient is added to what the last step left in ``p.grad``, as a backward pass does)."""
    from pytorch_optimizer.optimizer.scion import SCION, SCIONLight, LMONorm
    tensors = [torch.tensor(p.copy()) for p in params]
    pt_groups = [dict(params=[t], norm_type=getattr(LMONorm, PT_NORM[o["norm"]]),
                      norm_kwargs=pt_norm_kwargs(o), scale=o.get("scale", 1.0))
                 for t, (_, o) in zip(tensors, groups)]
    opt = (SCIONLight if light else SCION)(pt_groups, lr=LRS[0], **kw)
    out = []
    for lr, step_grads in zip(LRS, grads):
        for group in opt.param_groups:
            group["lr"] = lr
        for t, g in zip(tensors, step_grads):
            # at momentum 1 SCIONLight leaves p.grad unscaled: zeroed, as one does then
            if light and t.grad is not None and kw.get("momentum", 0.1) != 1.0:
                t.grad.add_(torch.tensor(g))
            else:
                t.grad = torch.tensor(g.copy())
        opt.step()
        out.append([t.numpy().copy() for t in tensors])
    return out, opt, tensors


@pytest.fixture
def float64_newton_schulz(monkeypatch):
    """pytorch_optimizer's Newton–Schulz in float64 (its ``dtype`` argument) in SCION's module."""
    from pytorch_optimizer.optimizer import scion as pt_scion
    monkeypatch.setattr(pt_scion, "zero_power_via_newton_schulz_5",
                        functools.partial(pt_scion.zero_power_via_newton_schulz_5,
                                          dtype=torch.float64))


CASES64 = {
    "defaults": dict(),
    "decoupled-decay": dict(momentum=0.3, weight_decay=0.5),
    "coupled-decay": dict(momentum=0.2, weight_decay=0.3, weight_decouple=False),
    "constraint": dict(momentum=0.5, constraint=True),
    "no-average": dict(momentum=1.0, weight_decay=0.1),
}


@pytest.mark.needs("torch", "pytorch_optimizer")
@pytest.mark.parametrize("foreach", [False, None])
@pytest.mark.parametrize("light", [False, True])
@pytest.mark.parametrize("case", sorted(CASES64))
def test_matches_pytorch_optimizer_in_float64(float64_newton_schulz, case, light, foreach):
    """24 steps, every norm and shape: the float64 trajectories agree to ~1e-15 of the scale
    (measured worst: 4.9e-16 over all cases), both of pytorch_optimizer's paths (foreach
    batches the Newton–Schulz of same-shape matrices, foreach=False runs one at a time)."""
    kw = CASES64[case]
    params, grads = problem(1)
    expected, _, _ = run_pytorch_optimizer(params, grads, light=light, foreach=foreach, **kw)
    actual, _ = run_npoptim(params, grads, ns_dtype="param",
                            momentum_form="sum" if light else "lerp", **kw)
    err = worst_error(actual, expected)
    assert err < RTOL64, err
    print(f"{case} light={light} foreach={foreach}: worst relative error {err:.2e}")


@pytest.mark.needs("torch", "pytorch_optimizer")
def test_momentum_state_is_pytorch_optimizers_d(float64_newton_schulz):
    params, grads = problem(2)
    _, theirs, tensors = run_pytorch_optimizer(params, grads, foreach=False, momentum=0.3)
    _, opt = run_npoptim(params, grads, ns_dtype="param", momentum=0.3)
    for i, t in enumerate(tensors):
        close(opt.state[i]["momentum_buffer"], theirs.state[t]["d"].numpy(), rtol=1e-13)


@pytest.mark.needs("torch", "pytorch_optimizer")
@pytest.mark.parametrize("light", [False, True])
def test_matches_pytorch_optimizer_in_bfloat16(light):
    """pytorch_optimizer as it runs (its Newton–Schulz in bfloat16, the per-parameter path),
    npoptim's default ``ns_dtype="bfloat16"``: its bfloat16 products and roundings are
    reproduced, so the float64 parameters agree to float64 rounding (measured worst 2.2e-16:
    the same bfloat16 updates every step) unless a float32 sum lands on a bfloat16 tie in
    another order (npoptim.optim.muon's "Precision"), which would show as ~1e-4 here."""
    params, grads = problem(3)
    kw = dict(momentum=0.2, weight_decay=0.1)
    expected, _, _ = run_pytorch_optimizer(params, grads, light=light, foreach=False, **kw)
    actual, _ = run_npoptim(params, grads, momentum_form="sum" if light else "lerp", **kw)
    err = worst_error(actual, expected)
    print(f"bfloat16 light={light}: worst relative error {err:.2e}")
    assert err < RTOL64, err


@pytest.mark.needs("torch", "pytorch_optimizer")
def test_bfloat16_and_float64_newton_schulz_differ_as_bfloat16_does():
    """The precision switch is live: bfloat16 moves the spectral layers by ~1e-3 of the step."""
    params, grads = problem(4, GROUPS[:3])
    a, _ = run_npoptim(params, grads, GROUPS[:3])
    b, _ = run_npoptim(params, grads, GROUPS[:3], ns_dtype="param")
    assert worst_error(a, b) > 1e-6


def run_authors_form(params, grads, groups, light, momentum, constrained):
    """The authors' Scion and ScionLight step (LIONS-EPFL/scion scion.py) written out here in
    torch, eager, around their Newton–Schulz, which they copy from Keller Jordan
    (modded-nanogpt): muon-optimizer's ``zeropower_via_newtonschulz5``, the same function
    (bfloat16, eps added, each op rounded). Norms by the authors' formulas; their average
    ``buf.mul_(1-α).add_(g, alpha=α)``, skipped at α = 1."""
    from muon import zeropower_via_newtonschulz5

    def lmo(g, options):
        norm = options["norm"]
        if norm == "auto":
            norm = "bias" if g.ndim <= 1 else "spectral" if g.ndim == 2 else "spectral_conv"
        normalized = options.get("normalized", norm != "col")
        if norm in ("spectral", "spectral_conv"):
            u = zeropower_via_newtonschulz5(g.reshape(len(g), -1), steps=5).view(g.shape)
            if norm == "spectral":
                s = (g.shape[0] / g.shape[1]) ** 0.5 if normalized else g.shape[0] ** 0.5
                u *= max(1, s) if options.get("max_scale") else s
            else:
                u *= (g.shape[0] / g.shape[1]) ** 0.5 / math.prod(g.shape[2:])
            return u
        if norm == "sign":
            return (1 / g.shape[1]) * torch.sign(g) if normalized else torch.sign(g)
        if norm == "bias":
            return g / (torch.sqrt(torch.mean(g ** 2, dim=0, keepdim=True)) + 1e-8)
        t = g.transpose(0, 1) if options.get("transpose") else g
        if norm == "col":
            rms = 1 / math.sqrt(t.size(0)) * torch.sqrt(torch.sum(t ** 2, dim=0, keepdim=True))
            rms = rms * t.size(1) if normalized else rms
        else:
            rms = torch.sqrt(torch.sum(t ** 2, dim=-1, keepdim=True))
            rms = rms * math.sqrt(t.size(-1)) if normalized else rms
        t = t / (rms + 1e-8)
        return t.transpose(0, 1) if options.get("transpose") else t

    tensors = [torch.tensor(p.copy()) for p in params]
    bufs = [torch.zeros_like(t) for t in tensors]
    out = []
    for lr, step_grads in zip(LRS, grads):
        for i, (t, g, (_, options)) in enumerate(zip(tensors, step_grads, groups)):
            g = torch.tensor(g)
            if light:
                bufs[i] = bufs[i] + g  # the gradient buffer, scaled by 1 - α after the step
                m = bufs[i]
            elif momentum != 1:
                bufs[i].mul_(1 - momentum).add_(g, alpha=momentum)
                m = bufs[i]
            else:
                m = g
            update = options.get("scale", 1.0) * lmo(m, options)
            if constrained:
                t.mul_(1 - lr)
            t.add_(update, alpha=-lr)
            if light and momentum != 1:
                bufs[i].mul_(1 - momentum)
            elif light:
                bufs[i] = torch.zeros_like(t)
        out.append([t.numpy().copy() for t in tensors])
    return out


#: the authors' norms and shapes (their Sign takes 2-D, their SpectralConv square kernels)
AUTHORS_GROUPS = [g for g in GROUPS if g[1]["norm"] != "none"]


@pytest.mark.needs("torch", "muon")
@pytest.mark.parametrize("light", [False, True])
@pytest.mark.parametrize("momentum, constrained", [(0.1, True), (0.5, False), (1.0, True)])
def test_matches_the_authors_form(light, momentum, constrained):
    """variant="lions_epfl" against the authors' step around their (Keller Jordan's)
    Newton–Schulz, 24 steps, every norm and shape: the same bfloat16 updates (measured worst
    2.7e-16 of the scale; the authors' own scion.py, run eager outside the tests, agrees as
    closely, see the module docstring)."""
    params, grads = problem(9, AUTHORS_GROUPS)
    expected = run_authors_form(params, grads, AUTHORS_GROUPS, light, momentum, constrained)
    actual, _ = run_npoptim(params, grads, AUTHORS_GROUPS, variant="lions_epfl",
                            momentum=momentum, constraint=constrained,
                            **({"momentum_form": "sum"} if light else {}))
    err = worst_error(actual, expected)
    print(f"authors light={light} momentum={momentum} constrained={constrained}: {err:.2e}")
    assert err < RTOL64, err
    # and pytorch_optimizer's form is another: its Newton–Schulz rounds otherwise
    other, _ = run_npoptim(params, grads, AUTHORS_GROUPS, momentum=momentum,
                           constraint=constrained, **({"momentum_form": "sum"} if light else {}))
    assert worst_error(other, expected) > 1e-6


# --------------------------------------------------------------------------- hand-derived
def test_first_step_of_the_authors_scion_by_hand():
    """LIONS-EPFL/scion's Scion (constrained by default): buf = (1-α)·0 + α g, then
    θ ← (1-γ)θ - γρ lmo(buf); with sign, bias, col and row worked out by hand, and spectral
    with zero Newton–Schulz iterations (the normalized matrix itself: g/(‖g‖_F + 1e-7)·√(A/B),
    in float64)."""
    g = np.array([[0.5, -2.0, 1.0], [0.0, 3.0, -1.5]])
    w = np.array([[0.1, 0.2, -0.3], [0.4, -0.5, 0.6]])
    lr, alpha, rho = 0.1, 0.25, 2.0
    m = alpha * g
    col = np.sqrt((m ** 2).sum(0)) / math.sqrt(2)
    row = np.sqrt((m ** 2).sum(1, keepdims=True)) * math.sqrt(3)
    bias = np.sqrt((m ** 2).mean(0))
    frob = math.sqrt((m ** 2).sum())
    expected = {
        "sign": np.sign(g) / 3,
        "col": m / (col + 1e-8),
        "row": m / (row + 1e-8),
        "bias": m / (bias + 1e-8),
        "spectral": m / (frob + 1e-7) * math.sqrt(2 / 3),
    }
    for norm, direction in expected.items():
        p = w.copy()
        opt = Scion([p], lr=lr, momentum=alpha, norm=norm, scale=rho, constraint=True,
                    variant="lions_epfl", ns_steps=0, ns_dtype="param")
        opt.step([g.copy()])
        close(p, (1 - lr) * w - lr * rho * direction)
        close(opt.state[0]["momentum_buffer"], m)


def test_second_step_by_hand_lerp_mul_add_and_sum():
    """Two steps, unconstrained: the average (lerp and the authors' mul_add, the same in real
    arithmetic) and ScionLight's sum (1-α)M + G, with the sign oracle (scale-free)."""
    g1, g2 = np.array([[1.0, -2.0], [0.5, 0.25]]), np.array([[-3.0, 1.0], [-0.25, 1.0]])
    lr, alpha = 0.05, 0.3
    for form, buf in (("lerp", (1 - alpha) * alpha * g1 + alpha * g2),
                      ("mul_add", (1 - alpha) * alpha * g1 + alpha * g2),
                      ("sum", (1 - alpha) * g1 + g2)):
        p = np.zeros((2, 2))
        opt = Scion([p], lr=lr, momentum=alpha, norm="sign", momentum_form=form)
        opt.step([g1.copy()])
        first = -lr * np.sign(alpha * g1) / 2
        close(p, first)
        opt.step([g2.copy()])
        close(opt.state[0]["momentum_buffer"], buf)
        close(p, first - lr * np.sign(buf) / 2)


def test_decay_by_hand():
    """pytorch_optimizer's weight decay of the unconstrained form: θ(1-γλ) before the step,
    or G + λθ into the average."""
    g, w = np.array([2.0, -1.0, 0.5]), np.array([1.0, 2.0, -4.0])
    lr, lam = 0.1, 0.5
    p = w.copy()
    Scion([p], lr=lr, momentum=1.0, norm="none", weight_decay=lam).step([g.copy()])
    close(p, w * (1 - lr * lam) - lr * g)
    p = w.copy()
    Scion([p], lr=lr, momentum=1.0, norm="none", weight_decay=lam,
          weight_decouple=False).step([g.copy()])
    close(p, w - lr * (g + lam * w))


def test_spectral_scales_and_conv_volume():
    """The shape scales: spectral sqrt(A/B), sqrt(A) (normalized=False), max(1, .);
    spectral_conv sqrt(out/in)/prod(kernel) of the (out, in·k...) matrix's Newton–Schulz."""
    lmo = scion_module.ScionLMO
    assert scion_module.shape_scale(lmo("spectral", True, False, False), (2, 8)) == 0.5
    assert scion_module.shape_scale(lmo("spectral", True, True, False), (2, 8)) == 1.0
    assert scion_module.shape_scale(lmo("spectral", False, False, False), (9, 2)) == 3.0
    assert scion_module.shape_scale(lmo("spectral_conv", True, False, False),
                                    (8, 2, 3, 2)) == pytest.approx(2 / 6, rel=1e-15)
    g = np.random.default_rng(0).standard_normal((4, 2, 3))
    p = np.zeros_like(g)
    Scion([p], lr=1.0, momentum=1.0, ns_dtype="param").step([g.copy()])
    ortho = zeropower_via_newtonschulz(g.reshape(4, 6), (3.4445, -4.7750, 2.0315), 5, 1e-7,
                                       "param")
    close(p, -(ortho * (math.sqrt(2) / 3)).reshape(g.shape))


def test_auto_picks_the_norm_by_dimension():
    group = dict(norm="auto", normalized=None, max_scale=False, transpose=False)
    picks = [scion_module.resolve_lmo(group, s).norm for s in [(), (3,), (3, 4), (3, 4, 2),
                                                               (3, 4, 2, 2)]]
    assert picks == ["bias", "bias", "spectral", "spectral_conv", "spectral_conv"]
    with pytest.raises(ValueError, match="norm='auto' takes"):
        Scion([np.zeros((2, 2, 2, 2, 2))])


# ---------------------------------------------------------------------------- the variants
def test_variants_set_their_switches_and_each_switch_is_live():
    opt = Scion([np.zeros((3, 2))], variant="lions_epfl")
    assert opt.variant == "lions_epfl"
    assert (opt.defaults["ns_eps_mode"], opt.defaults["ns_form"],
            opt.defaults["momentum_form"]) == ("added", "separate", "mul_add")
    opt = Scion([np.zeros((3, 2))], variant="authors", ns_form="addmm")
    assert opt.variant == "lions_epfl" and opt.defaults["ns_form"] == "addmm"
    assert Scion([np.zeros((3, 2))]).defaults["ns_eps_mode"] == "max"
    params, grads = problem(5, GROUPS[:2])
    base, _ = run_npoptim(params, grads, GROUPS[:2])
    for switch, value in (("ns_form", "separate"), ("momentum_form", "sum")):
        other, _ = run_npoptim(params, grads, GROUPS[:2], **{switch: value})
        assert worst_error(other, base) > 1e-9, switch
    # the norm's floor shows where the gradients' norm is near it
    tiny = [[g * 1e-7 for g in step] for step in grads]
    base, _ = run_npoptim(params, tiny, GROUPS[:2], ns_dtype="param")
    other, _ = run_npoptim(params, tiny, GROUPS[:2], ns_dtype="param", ns_eps_mode="added")
    assert worst_error(other, base) > 1e-6
    # the authors' mul_add and pytorch_optimizer's lerp: the same in real arithmetic
    mul_add, _ = run_npoptim(params, grads, GROUPS[:2], ns_dtype="param",
                             momentum_form="mul_add")
    lerp, _ = run_npoptim(params, grads, GROUPS[:2], ns_dtype="param")
    assert worst_error(mul_add, lerp) < 1e-13


def test_constraint_keeps_the_parameter_in_the_ball():
    """The conditional-gradient form: with sign (‖lmo‖_max = 1/B), ‖θ‖_max stays within ρ/B
    from a start inside it, whatever the gradients."""
    rng = np.random.default_rng(6)
    rho = 4.0
    p = rng.uniform(-1, 1, (3, 4)) * rho / 4
    opt = Scion([p], lr=0.3, momentum=0.5, norm="sign", scale=rho, constraint=True)
    for _ in range(30):
        opt.step([rng.standard_normal((3, 4)) * 10])
        assert np.max(np.abs(p)) <= rho / 4 * (1 + 1e-15)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("kw, match", [
    (dict(momentum=0.0), "momentum"), (dict(momentum=1.5), "momentum"),
    (dict(scale=0.0), "scale"), (dict(lr=-1.0), "learning rate"),
    (dict(norm="spectrall"), "norm must be one of"),
    (dict(norm="bias", normalized=True), "normalized is an option"),
    (dict(norm="sign", max_scale=True), "max_scale is an option"),
    (dict(norm="spectral", transpose=True), "transpose is an option"),
    (dict(constraint=True, weight_decay=0.1), "constraint=True decays"),
    (dict(weight_decay=-0.1), "weight_decay"),
    (dict(momentum_form="nesterov"), "momentum_form must be one of"),
    (dict(ns_dtype="float16"), "ns_dtype must be one of"),
    (dict(ns_coefficients=(1.0, 2.0)), "ns_coefficients"),
    (dict(ns_steps=-1), "ns_steps"), (dict(eps=-1.0), "epsilon"),
    (dict(variant="scion"), "unknown variant"),
])
def test_bad_input_is_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        Scion([np.zeros((3, 2))], **kw)


@pytest.mark.parametrize("norm, shape", [("spectral", (3,)), ("spectral", (2, 2, 2)),
                                         ("spectral_conv", (3, 2)), ("sign", (3,)),
                                         ("col", (2, 2, 2)), ("row", ())])
def test_a_norm_refuses_shapes_it_does_not_take(norm, shape):
    with pytest.raises(ValueError, match=f"norm='{norm}' takes"):
        Scion([np.zeros(shape)], norm=norm)


def test_a_step_with_edited_bad_options_changes_nothing():
    rng = np.random.default_rng(7)
    p, q = rng.standard_normal((3, 4)), rng.standard_normal(4)
    opt = Scion([dict(params=[p]), dict(params=[q], norm="bias")], momentum=0.3)
    opt.step([rng.standard_normal((3, 4)), rng.standard_normal(4)])
    snap = snapshot(opt)
    opt.param_groups[1]["norm"] = "spectral"
    with pytest.raises(ValueError, match="norm='spectral' takes"):
        opt.step([rng.standard_normal((3, 4)), rng.standard_normal(4)])
    assert_unchanged(opt, snap)


def test_float32_stays_float32():
    rng = np.random.default_rng(8)
    ps = [rng.standard_normal(s).astype(np.float32) for s in [(4, 3), (3,), (2, 3, 2)]]
    opt = Scion(ps, momentum=0.5, scale=2.0)
    opt.step([rng.standard_normal(p.shape).astype(np.float32) for p in ps])
    assert all(p.dtype == np.float32 for p in ps)
    assert all(s["momentum_buffer"].dtype == np.float32 for s in opt.state.values())


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4), (2, 0, 3)])
def test_a_zero_size_parameter_is_left_alone(shape):
    p = np.ones(shape)
    opt = Scion([p], lr=0.1)
    opt.step([np.ones(shape)])
    assert p.shape == shape and opt.state[0]["momentum_buffer"].shape == shape
