"""Muon's ``variant="keller_jordan"`` against Keller Jordan's package, muon-optimizer 0.1.0
(``SingleDeviceMuon``, ``SingleDeviceMuonWithAuxAdam``; its ``Muon`` needs torch.distributed).

The trajectory runs 24 steps of one optimizer over a Muon group (a wide 3x5, a tall 6x3 whose
scale sqrt(2) multiplies the bfloat16 update, a 4-D (4, 2, 3, 1) orthogonalized as 4x6 and
scaled by sqrt(3/1) from its last two sizes, a tall 4-D (12, 1, 2, 2) orthogonalized as 12x4
through its transpose and scaled by 1) and a ``use_muon=False`` group (a vector, a 0-d
scalar and a 2x3 matrix) stepped by the package's AdamW, gradients spanning three orders of
magnitude. 0.1.0's own step cannot take a 4-D parameter (its ``p.add_`` of the 2-D update
to the 4-D parameter fails: pinned below); the package's GitHub version reshapes the update
(KellerJordan/Muon c33a468), and the 4-D parameters are stepped here with 0.1.0's own
``muon_update`` and that reshape.

**Tolerance.** The Newton–Schulz iteration runs in bfloat16 on both sides; npoptim sums its
bfloat16 products in torch's CPU order (``npoptim.optim.muon``: torch's own loop up to
16*16*16 multiply-adds, oneDNN's AVX512-BF16 kernel above), which ``tests/cpu_probe.py``
finds on this CPU or not. Where it does, the orthogonalized update is equal bit for bit
(checked below over twelve orders of magnitude) and the float64 parameters agree to 1e-12 of
their scale (measured: 6e-17), float32 to 4 ulps of it (measured: under one), the momentum
and the AdamW moments to 1e-15. Where it does not (another oneDNN kernel: AMX, no native
bfloat16, ARM), an element of the orthogonalized update may be one bfloat16 unit off, a
relative 2**-8 of that element: the parameter moves by lr * s * O per step (|O| <= 2: the
iteration's singular values stay below 1.3, and an element is at most the largest of them
times s), so the bound on a parameter after T steps is T * lr * s_max * 2 * 2**-8 absolute
(the gradients do not depend on the parameters here, so nothing compounds; the momentum does
not pass through the iteration and stays to 1e-15): with T = 24, lr = 0.02 and s_max =
sqrt(3), 24 * 0.02 * sqrt(3) * 2 / 256 = 6.5e-3.
"""
import math

import numpy as np
import pytest

import cpu_probe
import npoptim
from hand_derived import assert_unchanged, close, snapshot
from npoptim.optim import muon as muon_module
from torch_compare import torch

try:
    import muon as kj
except ImportError:  # the needs marker skips (or, with NPOPTIM_REQUIRE_MUON_OPTIMIZER, fails)
    kj = None

needs_kj = pytest.mark.needs("torch", "muon")
COEFFICIENTS = (3.4445, -4.7750, 2.0315)
ORDER_HERE = torch is not None and cpu_probe.probe()["bf16_matmul"]
MUON_SHAPES = ((3, 5), (6, 3), (4, 2, 3, 1), (12, 1, 2, 2))
AUX_SHAPES = ((5,), (), (2, 3))
STEPS, LR = 24, 0.02
#: see the module docstring: T lr s_max |O|max 2**-8
BFLOAT16_BOUND = STEPS * LR * math.sqrt(3) * 2 * 2.0 ** -8


def _gradient(rng, shape, dtype):
    return np.array(rng.standard_normal(shape) * 10.0 ** rng.uniform(-2, 1), dtype)


def run_both(dtype, muon_group, aux_group, steps=STEPS, seed=0):
    """Params and states of npoptim's keller_jordan Muon and of the package after each step."""
    rng = np.random.default_rng(seed)
    ours = [np.array(rng.standard_normal(s), dtype) for s in MUON_SHAPES + AUX_SHAPES]
    theirs = [torch.nn.Parameter(torch.tensor(p.copy())) for p in ours]
    n = len(MUON_SHAPES)
    matrices = [p for p in theirs[:n] if p.ndim == 2]
    convs = [p for p in theirs[:n] if p.ndim == 4]
    package = kj.SingleDeviceMuonWithAuxAdam([dict(params=matrices, use_muon=True, **muon_group),
                                              dict(params=theirs[n:], use_muon=False,
                                                   **aux_group)])
    conv_buffers = [torch.zeros_like(p) for p in convs]
    opt = npoptim.Muon([dict(params=ours[:n], **muon_group),
                        dict(params=ours[n:], use_muon=False, **aux_group)],
                       variant="keller_jordan")
    out = []
    for _ in range(steps):
        grads = [_gradient(rng, p.shape, dtype) for p in ours]
        for p, g in zip(theirs, grads):
            p.grad = torch.tensor(g.copy())
        package.step()
        with torch.no_grad():  # 0.1.0's muon_update, the step with GitHub's reshape
            for p, buf in zip(convs, conv_buffers):
                update = kj.muon_update(p.grad, buf, beta=muon_group["momentum"])
                p.mul_(1 - muon_group["lr"] * muon_group["weight_decay"])
                p.add_(update.reshape(p.shape), alpha=-muon_group["lr"])
        opt.step(grads)
        out.append(([p.copy() for p in ours], [p.detach().numpy().copy() for p in theirs]))
    momenta = [package.state[p]["momentum_buffer"].numpy() for p in matrices] + [
        b.numpy() for b in conv_buffers]
    ours_momenta = [opt.state[i]["momentum_buffer"] for i, p in enumerate(theirs[:n])
                    if p.ndim == 2] + [opt.state[i]["momentum_buffer"]
                                       for i, p in enumerate(theirs[:n]) if p.ndim == 4]
    aux_states = [(opt.state[n + k], package.state[p]) for k, p in enumerate(theirs[n:])]
    return out, list(zip(ours_momenta, momenta)), aux_states


CONFIGS = {
    "defaults": (dict(lr=LR, momentum=0.95, weight_decay=0.0), dict()),
    "decay-betas": (dict(lr=LR, momentum=0.9, weight_decay=0.1),
                    dict(lr=3e-3, betas=(0.8, 0.99), eps=1e-8, weight_decay=0.01)),
}


@needs_kj
@pytest.mark.parametrize("config, dtype", [("defaults", np.float64),
                                           ("decay-betas", np.float64),
                                           ("decay-betas", np.float32)])
def test_trajectory_matches_single_device_muon_with_aux_adam(config, dtype):
    out, momenta, aux_states = run_both(dtype, *CONFIGS[config])
    for ours, theirs in out:
        for k, (a, b) in enumerate(zip(ours, theirs)):
            scale = np.max(np.abs(b))
            if k >= len(MUON_SHAPES) or ORDER_HERE:
                atol = 1e-12 * scale if dtype == np.float64 else 4 * np.spacing(np.float32(scale))
            else:   # another summation order of the bfloat16 products (module docstring)
                atol = BFLOAT16_BOUND
            np.testing.assert_allclose(a, b, rtol=0, atol=atol)
    for a, b in momenta:
        np.testing.assert_allclose(a, b, rtol=1e-15 if dtype == np.float64 else 1e-6, atol=0)
    for ours, theirs in aux_states:
        assert ours["step"] == theirs["step"] == STEPS
        for name in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_allclose(ours[name], theirs[name].numpy(),
                                       rtol=1e-14 if dtype == np.float64 else 1e-5, atol=0)


SMALL = [(3, 4), (4, 3), (1, 5), (5, 1), (8, 5), (16, 16), (4, 27), (27, 4)]
LARGE = [(17, 17), (20, 30), (64, 64), (40, 300)]


@needs_kj
@pytest.mark.parametrize("shape", SMALL + [
    pytest.param(s, marks=pytest.mark.skipif(
        not ORDER_HERE, reason="oneDNN's bfloat16 products add in another order on this CPU; "
        "the emulated order is checked against recorded outputs in test_cpu_orders"))
    for s in LARGE])
def test_newton_schulz_is_keller_jordans_bit_for_bit(shape):
    """zeropower_via_newtonschulz5 of the package, with its separate roundings and its eps
    added (eps-dominated at 1e-9), equals npoptim's ns_form="separate", ns_eps_mode="added"
    bit for bit; torch's form differs."""
    rng = np.random.default_rng(sum(shape))
    differs = False
    for scale in (1e-9, 1e-3, 1.0, 1e3):
        g = rng.standard_normal(shape) * scale
        ours = muon_module.zeropower_via_newtonschulz(g, COEFFICIENTS, 5, 1e-7,
                                                      ns_eps_mode="added", ns_form="separate")
        theirs = kj.zeropower_via_newtonschulz5(torch.tensor(g), 5).float().numpy()
        np.testing.assert_array_equal(ours, theirs)
        differs |= not np.array_equal(ours, muon_module.zeropower_via_newtonschulz(
            g, COEFFICIENTS, 5, 1e-7))
    assert differs or min(shape) == 1


@needs_kj
def test_the_packages_own_step_cannot_take_a_4d_parameter():
    """muon-optimizer 0.1.0 adds the (out, in*h*w) update to the 4-D parameter unreshaped
    (fixed on GitHub after the release, c33a468): a fixed release fails this test."""
    p = torch.nn.Parameter(torch.ones(4, 2, 3, 3))
    p.grad = torch.ones_like(p)
    with pytest.raises(RuntimeError, match="must match the size"):
        kj.SingleDeviceMuon([p]).step()


# ------------------------------------------------------------------------ by hand
def _bf16(x):
    """x rounded to 8 significant bits, ties to even (bfloat16), by hand."""
    if x == 0:
        return 0.0
    m, e = math.frexp(x)          # x = m 2**e, 0.5 <= |m| < 1
    scaled = m * 256              # 8 significant bits above the point
    r = round(scaled)             # Python's round: ties to even
    return math.ldexp(r, e - 8)


def test_first_step_by_hand():
    """A 4x4 gradient 0.3 I from a zero buffer, one Newton–Schulz step, eps 0: every value is
    exact in bfloat16 or rounded by hand. U = lerp(G, (1-μ)G, μ) = (1-μ²)G, X = U/‖U‖ = I/2
    exactly; A = I/4; B = bf16(bf16(b/4) + bf16(bf16(c/4)/4)); X₁ = bf16(bf16(a/2) + B/2)
    on the diagonal. A tall 8x4 (the same 4x4 over zeros) is scaled by bf16(√2 X₁)."""
    mu, lr, wd = 0.95, 0.1, 0.5
    a, b, c = COEFFICIENTS
    x1 = _bf16(_bf16(a * 0.5) + _bf16(_bf16(b * 0.25) + _bf16(_bf16(c * 0.25) * 0.25)) * 0.5)
    assert x1 == 1.1875   # a x + b x³ + c x⁵ = 1.1889 at x = 1/2, before rounding
    for rows, scale in ((4, 1.0), (8, _bf16(math.sqrt(2) * x1) / x1)):
        w = np.ones((rows, 4))
        g = np.zeros((rows, 4))
        g[:4] = 0.3 * np.eye(4)
        opt = npoptim.Muon([w], lr=lr, weight_decay=wd, momentum=mu, eps=0.0, ns_steps=1,
                           variant="keller_jordan")
        opt.step([g])
        expected = np.ones((rows, 4)) * (1 - lr * wd)
        expected[:4] -= lr * scale * x1 * np.eye(4)
        close(w, expected)
        close(opt.state[0]["momentum_buffer"], (1 - mu) * g)
    # torch's form of the same step: one fused addmm each, the scale on the lr (exact here)
    w = np.ones((4, 4))
    npoptim.Muon([w], lr=lr, weight_decay=wd, momentum=mu, eps=0.0, ns_steps=1).step(
        [0.3 * np.eye(4)])
    x1_torch = _bf16(a * 0.5 + _bf16(b * 0.25 + c * 0.25 * 0.25) * 0.5)
    close(w, np.ones((4, 4)) * (1 - lr * wd) - lr * x1_torch * np.eye(4))


def test_aux_adamw_first_step_by_hand():
    """A use_muon=False group: the package's AdamW, defaults lr 3e-4, betas (0.9, 0.95), eps
    1e-10; the first step is -lr g/(|g| + eps) after the decay, any shape (0-d too)."""
    v, s = np.array([1.0, -2.0]), np.array(0.5)
    g, h = np.array([0.2, -0.4]), np.array(-3.0)
    opt = npoptim.Muon([dict(params=[np.ones((2, 2))]),
                        dict(params=[v, s], use_muon=False, weight_decay=0.1)],
                       variant="keller_jordan")
    opt.step([None, g, h])
    close(v, np.array([1.0, -2.0]) * (1 - 3e-4 * 0.1) - 3e-4 * g / (np.abs(g) + 1e-10))
    close(s, 0.5 * (1 - 3e-5) + 3e-4)
    group = opt.param_groups[1]
    assert (group["lr"], group["betas"], group["eps"]) == (3e-4, (0.9, 0.95), 1e-10)
    close(opt.state[1]["exp_avg"], 0.1 * g)
    close(opt.state[1]["exp_avg_sq"], 0.05 * g ** 2)
    assert opt.state[2]["step"] == 1 and 0 not in opt.state


# ------------------------------------------------------------------------ switches, input
def test_each_switch_of_the_variant_is_felt_and_overridable():
    rng = np.random.default_rng(2)
    w, g = rng.standard_normal((6, 3)), rng.standard_normal((6, 3))
    runs = {}
    for name, kw in {"kj": {}, "ns_form": dict(ns_form="addmm"),
                     "scale_on": dict(scale_on="lr"), "ns_eps_mode": dict(ns_eps_mode="max")}.items():
        p = w.copy()
        opt = npoptim.Muon([p], lr=0.1, variant="keller_jordan", **kw)
        # tiny gradients make eps felt (added 1e-7 to a norm near it, against a floor)
        scale = 1e-8 if name == "ns_eps_mode" else 1.0
        opt.step([g * scale])
        runs[name] = p
        assert opt.variant == "keller_jordan"
    assert not np.array_equal(runs["kj"], runs["ns_form"])
    assert not np.array_equal(runs["kj"], runs["scale_on"])
    p = w.copy()
    npoptim.Muon([p], lr=0.1, variant="keller_jordan").step([g * 1e-8])
    assert not np.array_equal(p, runs["ns_eps_mode"])
    opt = npoptim.Muon([w.copy()], variant="muon_optimizer")
    assert opt.variant == "keller_jordan"
    assert opt.defaults["ns_form"] == "separate" and opt.defaults["nd_params"] == "flatten_conv"
    assert npoptim.Muon([w.copy()]).defaults["ns_form"] == "addmm"
    # torch-form state_dicts leave every switch out; the variant's are kept
    assert "ns_form" not in npoptim.Muon([w.copy()]).state_dict()["param_groups"][0]
    assert opt.state_dict()["param_groups"][0]["scale_on"] == "update"


def test_shapes_and_bad_input_are_refused_before_anything_changes():
    with pytest.raises(ValueError, match="Muon only supports 2D parameters"):
        npoptim.Muon([np.zeros((2, 3, 4, 5))])
    with pytest.raises(ValueError, match="batches of matrices"):
        npoptim.Muon([np.zeros((2, 3, 4))], variant="keller_jordan")
    with pytest.raises(ValueError, match="Muon only supports 2D parameters"):
        npoptim.Muon([np.zeros(3)], variant="keller_jordan")
    with pytest.raises(ValueError, match="unknown variant 'kj'"):
        npoptim.Muon([np.zeros((2, 2))], variant="kj")
    for kw, message in [(dict(ns_form="fused"), "ns_form must be one of"),
                        (dict(scale_on="grad"), "scale_on must be one of"),
                        (dict(nd_params="flatten"), "nd_params must be one of")]:
        with pytest.raises(ValueError, match=message):
            npoptim.Muon([np.zeros((2, 2))], **kw)
    with pytest.raises(ValueError, match="Invalid beta parameter"):
        npoptim.Muon([dict(params=[np.zeros(2)], use_muon=False, betas=(0.9, 1.0))])
    with pytest.raises(ValueError, match="use_muon must be True or False"):
        npoptim.Muon([dict(params=[np.zeros((2, 2))], use_muon=1)])
    w, v = np.ones((4, 2, 3, 1)), np.ones(3)
    opt = npoptim.Muon([dict(params=[w]), dict(params=[v], use_muon=False)],
                       variant="keller_jordan")
    opt.step([np.ones_like(w), np.ones_like(v)])
    snap = snapshot(opt)
    opt.param_groups[0]["nd_params"] = "refuse"   # an edited group is checked at the step
    with pytest.raises(ValueError, match="Muon only supports 2D parameters"):
        opt.step([np.ones_like(w), np.ones_like(v)])
    opt.param_groups[0]["nd_params"] = "flatten_conv"
    with pytest.raises(ValueError):
        opt.step([np.ones_like(w), np.ones((2,))])
    assert_unchanged(opt, snap)


def test_state_dict_round_trip_with_an_aux_group():
    rng = np.random.default_rng(4)
    shapes = [(3, 4), (4,), ()]

    def make(params):
        return npoptim.Muon([dict(params=params[:1]), dict(params=params[1:], use_muon=False,
                                                          lr=1e-2)], variant="keller_jordan")
    a = [np.array(rng.standard_normal(s)) for s in shapes]
    b = [p.copy() for p in a]
    first = make(a)
    grads = [[np.array(rng.standard_normal(s)) for s in shapes] for _ in range(4)]
    for gs in grads[:2]:
        first.step(gs)
    saved = first.state_dict()
    assert saved["state"][1]["step"] == 2 and isinstance(saved["state"][1]["step"], int)
    assert saved["param_groups"][1]["use_muon"] is False
    second = make([p.copy() for p in a])
    for p, q in zip(second.params, a):
        p[...] = q
    second.load_state_dict(saved)
    for gs in grads[2:]:
        first.step(gs)
        second.step(gs)
    for p, q in zip(first.params, second.params):
        np.testing.assert_array_equal(p, q)
    assert b[0].shape == (3, 4)


@needs_kj
def test_golden_cases_are_the_packages_steps():
    """The committed keller_jordan cases (float64) replayed through the package: 0.1.0's
    SingleDeviceMuon for the matrices, its muon_update with GitHub's reshape for the 4-D one;
    bit-level agreement where the bfloat16 order is this CPU's, else the module's bound."""
    from npoptim.golden.schema import load_all
    cases = [c for c in load_all("reference_results/cases/Muon.json", kind="cases")
             if c.variant == "keller_jordan" and c.dtype == "float64"]
    assert len(cases) == 2
    for case in cases:
        h = case.hyperparameters
        ps = [torch.nn.Parameter(torch.tensor(np.array(p))) for p in case.params]
        # (a placeholder matrix where the case has none: the package wants a parameter)
        matrices = [p for p in ps if p.ndim == 2] or [torch.nn.Parameter(torch.zeros(1, 1))]
        matrices[0].grad = torch.zeros_like(matrices[0])
        opt = kj.SingleDeviceMuon(matrices, lr=h["lr"], weight_decay=h["weight_decay"],
                                  momentum=h["momentum"])
        bufs = [torch.zeros_like(p) for p in ps]
        for step in case.steps:
            for p, g in zip(ps, step.grads):
                p.grad = torch.tensor(np.array(g))
            for group in opt.param_groups:
                group["lr"] = step.lr
            opt.step()
            with torch.no_grad():
                for p, buf in zip(ps, bufs):
                    if p.ndim == 4:
                        update = kj.muon_update(p.grad, buf, beta=h["momentum"])
                        p.mul_(1 - step.lr * h["weight_decay"])
                        p.add_(update.reshape(p.shape), alpha=-step.lr)
            for p, expected in zip(ps, step.expected_params):
                expected = np.asarray(expected)
                atol = (1e-12 * np.max(np.abs(expected)) if ORDER_HERE
                        else len(case.steps) * h["lr"] * math.sqrt(3) * 2 * 2.0 ** -8)
                np.testing.assert_allclose(p.detach().numpy(), expected, rtol=0, atol=atol)
