"""16-bit Muon (npoptim.precision.Muon, ``rounding="per-op"``) against torch 2.13's CPU
``torch.optim.Muon`` on bfloat16 and float16 params, bit for bit.

20 steps, two param groups: a wide (32, 64) matrix, whose bfloat16 products torch computes with
oneDNN (above 16*16*16 multiply-adds), a tall (12, 8) one (orthogonalized through its
transpose, products in torch's own loop, inner dimensions below 16: see below) and a (5, 13)
one whose 65 elements reach torch's scalar remainder loop. torch's own loop adds in an order
fixed by its source; oneDNN's order depends on the CPU, so the wide matrix is compared bit for
bit where tests/cpu_probe.py finds the order npoptim emulates, and elsewhere held to
:func:`assert_within_order_bound` (the momentum buffers, which no product touches, bit for bit
everywhere).

The bound was measured here by running npoptim with other summation orders (torch's own loop,
or float64 sums, at every size) against torch over 20 steps on (32, 64), (64, 32) and (48, 48)
matrices at lr 0.02 and 0.2: at most 1.5 units of the 16-bit type's last place at the largest
parameter's magnitude (the orthogonalized update differs in a few elements by a bfloat16 unit,
lr times that moves a parameter across a rounding boundary now and then); 43% to 100% of the
elements bit-equal (float16, with three more bits, shows the differences more often than
bfloat16: 99% to 100%). :func:`test_another_summation_order_stays_within_the_bound` keeps that
measurement honest on every machine whose order is emulated.

Not emulated (found here, a limit of :mod:`npoptim.optim.muon`'s product emulation, float
params' too): in torch's own loop (up to 16*16*16 multiply-adds) the order depends on the
operands' layout (see npoptim.optim.muon); ``X @ X.T`` sums in float32 vector lanes, not in
npoptim's four interleaved partial sums, once its inner dimension reaches 16, and a float32 sum
near a bfloat16 midpoint rounds the other way now and then (a tall (24, 8) float16 matrix: 2
gram entries in one of 100 iterations, 5 of its 192 elements one float16 unit off at step 19).
The shapes here keep torch's own loop to inner dimensions below 16 (there ``X @ X.T`` is one
running sum against npoptim's four partial sums, no difference seen in these runs).
"""
import numpy as np
import pytest

import cpu_probe
import npoptim.precision as precision
from npoptim.optim import orthogonalize
from test_precision_torch import FORMATS, as_torch, bits, numpy_dtype, torch_lanes
from test_precision_torch import problem as torch_problem
from torch_compare import needs_torch, to_numpy, torch

pytest.importorskip("ml_dtypes")


@pytest.fixture(autouse=True)
def one_torch_thread():
    """torch on one thread: the same bits here (every tensor is below torch's 32768-element
    grain, and oneDNN's order per element does not follow the thread count), and no OpenMP
    threads spinning at a barrier on a busy machine (measured: 0.01 s against up to 3 s for
    one 20-step run on 2 loaded cores)."""
    if torch is None:
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)

SHAPES = [(32, 64), (12, 8), (5, 13)]
ONEDNN_SHAPE = 0  # the index of the one whose products torch leaves to oneDNN
STEPS = 20
CASES = [
    (dict(lr=0.02), dict(lr=0.05)),
    (dict(lr=0.02, nesterov=False, adjust_lr_fn="match_rms_adamw", weight_decay=0.0),
     dict(momentum=0.8)),
    (dict(lr=0.05, momentum=0.8, weight_decay=0.2, ns_steps=3, adjust_lr_fn="original"),
     dict(ns_coefficients=(3.4, -4.7, 2.0), eps=1e-3)),
]
#: the bound off the emulated order: units of the 16-bit last place at the largest |param|
ORDER_BOUND_ULPS = 4


def problem(format, seed=0):
    return torch_problem(format, seed, SHAPES, STEPS)


def torch_run(kwargs, group1, params, grads, format, lrs=None):
    ps = [as_torch(p, format).requires_grad_() for p in params]
    opt = torch.optim.Muon([{"params": ps[:2]}, {"params": ps[2:], **group1}], **kwargs)
    trajectory = []
    for t, step in enumerate(grads):
        if lrs is not None:
            opt.param_groups[0]["lr"] = lrs[t]
        for p, g in zip(ps, step):
            p.grad = None if g is None else as_torch(g, format)
        opt.step()
        trajectory.append([bits(p).copy() for p in ps])
    return trajectory, opt


def np_run(kwargs, group1, params, grads, raw_format=None, lrs=None):
    view = (lambda a: a.view(np.uint16)) if raw_format else (lambda a: a)
    ps = [view(p).copy() for p in params]
    opt = precision.Muon([{"params": ps[:2]}, {"params": ps[2:], **group1}], format=raw_format,
                         torch_cpu_lanes=torch_lanes() if torch is not None else 32, **kwargs)
    trajectory = []
    for t, step in enumerate(grads):
        if lrs is not None:
            opt.param_groups[0]["lr"] = lrs[t]
        opt.step([None if g is None else view(g) for g in step])
        trajectory.append([bits(p).copy() for p in ps])
    return trajectory, opt


def values(b, format):
    return b.view(numpy_dtype(format)).astype(np.float64)


def assert_within_order_bound(ours, theirs, format, label):
    """Off the emulated order: within ORDER_BOUND_ULPS of the format's last place at the
    largest parameter's magnitude, every step."""
    unit = 2.0 ** (-7 if format == "bfloat16" else -10)
    for t, (x, y) in enumerate(zip(ours, theirs)):
        x, y = values(x, format), values(y, format)
        scale = max(1.0, float(np.abs(y).max()))
        assert np.abs(x - y).max() <= ORDER_BOUND_ULPS * unit * scale, (label, t + 1)


def compare(ours, opt, theirs, topt, format, exact_onednn, label):
    for i in range(len(SHAPES)):
        a, b = [s[i] for s in ours], [s[i] for s in theirs]
        if i != ONEDNN_SHAPE or exact_onednn:
            for t, (x, y) in enumerate(zip(a, b)):
                assert np.array_equal(x, y), (label, f"step {t + 1}, param {i}",
                                              int((x != y).sum()))
        else:
            assert_within_order_bound(a, b, format, (label, i))
    tparams = [p for g in topt.param_groups for p in g["params"]]
    for index, tp in enumerate(tparams):
        assert list(opt.state[index]) == list(topt.state[tp]) == ["momentum_buffer"]
        assert np.array_equal(bits(opt.state[index]["momentum_buffer"]),
                              bits(topt.state[tp]["momentum_buffer"])), (label, index)


def onednn_order_here():
    return cpu_probe.probe()["bf16_matmul"]


@needs_torch
@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_bit_exact_against_torch(case, format):
    kwargs, group1 = CASES[case]
    params, grads = problem(format)
    ours, opt = np_run(kwargs, group1, params, grads)
    theirs, topt = torch_run(kwargs, group1, params, grads, format)
    compare(ours, opt, theirs, topt, format, onednn_order_here(), case)


@needs_torch
@pytest.mark.parametrize("format", FORMATS)
def test_schedule_and_torchs_state_dict_continue_bit_for_bit(format):
    """lr changed every step (torch's schedulers write group["lr"]); after 10 steps torch's
    state_dict (momentum widened to float32) and npoptim's own load into fresh optimizers that
    continue as torch does."""
    params, grads = problem(format, seed=3)
    grads = [[g if g is not None else np.zeros_like(params[i]) for i, g in enumerate(step)]
             for step in grads]  # every param has state at the split
    lrs = [0.03 * 0.9 ** t for t in range(STEPS)]
    kwargs = dict(lr=lrs[0], weight_decay=0.1)
    theirs, topt = torch_run(kwargs, {}, params, grads, format, lrs)
    _, opt = np_run(kwargs, {}, params, grads[:10], lrs=lrs)
    _, topt_first = torch_run(kwargs, {}, params, grads[:10], format, lrs)
    exact = onednn_order_here()
    for source in (opt.state_dict(), to_numpy(topt_first.state_dict())):
        # from torch's params after 10 steps (npoptim's equal them where the order is emulated:
        # test_bit_exact_against_torch), so that only the resumed steps can differ elsewhere
        ps = [p.view(numpy_dtype(format)).copy() for p in theirs[9]]
        resumed = precision.Muon([{"params": ps[:2]}, {"params": ps[2:]}],
                                 torch_cpu_lanes=torch_lanes(), **kwargs)
        resumed.load_state_dict(source)
        trajectory = []
        for t, step in enumerate(grads[10:], start=10):
            resumed.param_groups[0]["lr"] = lrs[t]
            resumed.step(step)
            trajectory.append([bits(p).copy() for p in ps])
        compare(trajectory, resumed, theirs[10:], topt, format, exact, "resumed")


def test_raw_uint16_bits_give_the_same_trajectory():
    params, grads = problem("float16", seed=5)
    grads = grads[:4]
    typed, _ = np_run(dict(lr=0.02), {}, params, grads)
    raw, _ = np_run(dict(lr=0.02), {}, params, grads, raw_format="float16")
    assert all(np.array_equal(a, b) for x, y in zip(typed, raw) for a, b in zip(x, y))


@needs_torch
def test_another_summation_order_stays_within_the_bound(monkeypatch):
    """The bound used off the emulated order, checked here: npoptim with torch's own loop's
    order at every size (not oneDNN's) against torch stays within it, and is not bit-exact
    in both formats (so the bound is what a different order costs, not what no difference
    costs)."""
    if not onednn_order_here():
        pytest.skip(f"torch's oneDNN order is not emulated here ({cpu_probe.describe_probe()})")
    # (the Newton-Schulz products read it in npoptim.optim.orthogonalize, where it lives)
    monkeypatch.setattr(orthogonalize, "NATIVE_GEMM_MAX_SIZE", 10 ** 12)
    kwargs, differs = dict(lr=0.2), []
    for format in FORMATS:
        params, grads = problem(format, seed=7)
        params, grads = params[:1], [step[:1] for step in grads]
        ps = [p.copy() for p in params]
        opt = precision.Muon(ps, torch_cpu_lanes=torch_lanes(), **kwargs)
        tps = [as_torch(p, format).requires_grad_() for p in params]
        topt = torch.optim.Muon(tps, **kwargs)
        ours, theirs = [], []
        for step in grads:
            opt.step(step)
            tps[0].grad = None if step[0] is None else as_torch(step[0], format)
            topt.step()
            ours.append(bits(ps[0]).copy())
            theirs.append(bits(tps[0]).copy())
        assert_within_order_bound(ours, theirs, format, format)
        differs.append(any(not np.array_equal(a, b) for a, b in zip(ours, theirs)))
    assert any(differs)  # (measured: float16's trajectory differs, bfloat16's may not)


# ------------------------------------------------------------------------------ bad input
def _bf16(shape=(4, 6)):
    return np.linspace(-1, 1, int(np.prod(shape))).astype(np.float32).astype(
        numpy_dtype("bfloat16")).reshape(shape)


def _assert_unchanged(param, before, opt, state_before):
    assert param.tobytes() == before
    assert {k: np.asarray(v).tobytes() for k, v in opt.state[0].items()} == state_before


def test_bad_input_raises_before_anything_changes():
    param = _bf16()
    opt = precision.Muon([param], lr=0.02)
    opt.step([param.copy()])
    before = param.tobytes()
    state_before = {k: np.asarray(v).tobytes() for k, v in opt.state[0].items()}
    with pytest.raises(ValueError, match="gradient has dtype float16"):
        opt.step([param.astype(np.float16)])  # a float16 grad for a bfloat16 param
    _assert_unchanged(param, before, opt, state_before)
    for name, value, message in [("rounding", "fused", "rounding must be one of 'per-op'"),
                                 ("rounding", "stochastic", "rounding must be one of"),
                                 ("ns_dtype", "param", "torch's conventions only"),
                                 ("ns_steps", 100, "Number of steps must be less than 100")]:
        saved = opt.param_groups[0][name]
        opt.param_groups[0][name] = value
        with pytest.raises(ValueError, match=message):
            opt.step([param.copy()])
        opt.param_groups[0][name] = saved
        _assert_unchanged(param, before, opt, state_before)
    opt.step([param.copy()])  # and the optimizer still steps
    assert param.tobytes() != before


@pytest.mark.parametrize("options, error, message", [
    (dict(rounding="fused"), ValueError, "rounding must be one of 'per-op'"),
    (dict(rounding="exact"), ValueError, "rounding must be one of 'per-op'"),
    (dict(ns_dtype="param"), ValueError, "torch's conventions only"),
    (dict(ns_eps_mode="added"), ValueError, "torch's conventions only"),
    (dict(momentum_form="sum"), ValueError, "torch's conventions only"),
    (dict(bias_correction=True), ValueError, "torch's conventions only"),
    (dict(weight_layout="in_out"), ValueError, "torch's conventions only"),
    (dict(adaptive=True), ValueError, "torch's conventions only"),
    (dict(flavor="keras"), ValueError, "torch's conventions only"),
    (dict(format="float16"), TypeError, "the array is bfloat16"),
])
def test_refused_options(options, error, message):
    with pytest.raises(error, match=message):
        precision.Muon([_bf16()], **options)


def test_refuses_non_2d_float_and_unnamed_raw_params():
    with pytest.raises(ValueError, match="Muon only supports 2D parameters"):
        precision.Muon([_bf16((24,))])
    with pytest.raises(TypeError, match="takes bfloat16, float16 or uint16"):
        precision.Muon([np.zeros((2, 3), np.float32)])
    with pytest.raises(TypeError, match="name their format"):
        precision.Muon([np.zeros((2, 3), np.uint16)])
    opt = precision.Muon([_bf16()])
    with pytest.raises(ValueError, match="Muon only supports 2D parameters"):
        opt.add_param_group({"params": [_bf16((2, 3, 4))]})
    assert len(opt.param_groups) == 1
