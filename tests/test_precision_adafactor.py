"""16-bit Adafactor (npoptim.precision.Adafactor) against torch 2.13's CPU single-tensor
Adafactor, bit for bit.

bfloat16 and float16 params, grads and state over 20 steps, two param groups, factored (2-D
and 3-D) and unfactored (1-D) params, shapes with torch's scalar remainder loop (45, 7x45).
torch's norms of 16-bit tensors accumulate in float32 in a CPU-specific order (see
npoptim.precision.adafactor); a probe (:func:`norm_order_is_torchs`) compares npoptim's
emulated orders with torch's norms on inputs where the orders disagree: where it differs (a CPU
npoptim has not met) the runs are held to a few units in the last place instead of bit for bit.
"""
import numpy as np
import pytest

import npoptim.precision as precision
from npoptim.precision.adafactor import Adafactor, norm_lanes, norm_sequential
from npoptim.precision.formats import from_float32_array, to_float32_array
from test_precision_torch import (as_torch, bits, np_run, numpy_dtype, torch_lanes,
                                  torch_run)
from test_precision_variants import assert_same_run
from torch_compare import needs_torch, to_numpy, torch

pytest.importorskip("ml_dtypes")

FORMATS = ["bfloat16", "float16"]
SHAPES = [(32, 64), (64,), (7, 45), (45,), (2, 5, 13), (40, 1)]  # 2 in group 0
STEPS = 20
CASES = [
    dict(),  # torch's defaults: lr 1e-2, beta2_decay -0.8, eps (None, 1e-3), d 1
    dict(weight_decay=0.1, maximize=True),
    dict(lr=0.1, beta2_decay=-0.5, eps=(1e-3, 1e-2), d=2.0, weight_decay=0.01),
]
GROUP1 = dict(lr=3e-2, weight_decay=0.05)
#: torch capabilities whose norm orders were measured (AVX-512: torch runs its AVX2 reduction
#: kernels there; AVX2: measured on an Intel Xeon with ATEN_CPU_CAPABILITY=avx2)
MEASURED_CAPABILITIES = ("AVX512", "AVX2")


def problem(format, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    dtype = numpy_dtype(format)
    params = [rng.standard_normal(s).astype(np.float32).astype(dtype) for s in SHAPES]
    grads = [[None if (t + i) % 7 == 5 else
              (rng.standard_normal(s) * scale).astype(np.float32).astype(dtype)
              for i, s in enumerate(SHAPES)] for t in range(STEPS)]
    return params, grads


def groups(params):
    return [{"params": params[:2]}, {"params": params[2:], **GROUP1}]


def run_torch(kwargs, params, grads, format, group1=GROUP1):
    return torch_run("Adafactor", kwargs, group1, params, grads, format, foreach=False)


def run_npoptim(kwargs, params, grads, group1=GROUP1):
    return np_run("Adafactor", kwargs, group1, params, grads, "per-op")


# ------------------------------------------------------------------------ the order probe
_PROBE = {}
#: mantissa bits of each format
_MANTISSA = {"bfloat16": 7, "float16": 10}


def probe_rows(format):
    """Rows whose exact sum of squares is the square of a rounding midpoint, :math:`(1 +
    2^{-k-1})^2` (``k`` mantissa bits), plus tiny squares (:math:`2^{-26}`, below half a
    float32 unit at 1) placed in some positions: an order that adds them into the running sum
    after the 1 loses them (the norm rounds to even, 1), one that sums them apart first keeps
    them (the norm rounds up). Which positions keep them shows the order."""
    k = _MANTISSA[format]
    halves = 2 if k % 2 else 4  # this many squares of 2**-(k + 1) or 2**-(k + 2) make 2**-k
    rows = []
    for n in (64, 45, 2048, 100, 16, 7):
        for layout in range(6):
            x = np.zeros(n)
            tiny = np.zeros(n, bool)
            if layout == 0:
                tiny[1:] = True                          # everywhere after the 1
            elif layout == 1:
                tiny[[i for i in range(n) if i % 8 == 0][1:]] = True  # lane 0 of 8 lanes
            elif layout == 2:
                tiny[[i for i in range(n) if i % 16 >= 8]] = True     # the second halves
            elif layout == 3:
                tiny[n - n % 16:] = True                 # the remainder only
            elif layout == 4:
                tiny[[i for i in range(n) if i % 32 >= 16]] = True
            else:
                tiny[:] = True                            # the 1 last
            x[tiny] = 2.0 ** -13
            one = n - 1 if layout == 5 else 0
            x[one], tiny[one] = 1.0, False
            rest = [i for i in range(n) if not tiny[i] and i != one]
            if len(rest) < halves + 1:
                continue
            # squares summing to 2**-k and 2**-2(k+1): (1 + 2**-(k+1))**2 in all
            x[rest[:halves]] = 2.0 ** (-(k + halves // 2) / 2)
            x[rest[halves]] = 2.0 ** -(k + 1)
            rows.append(x)
    return rows


def _emulated(rows, format):
    norm = norm_lanes if format == "bfloat16" else norm_sequential
    return np.array([norm(np.ascontiguousarray(r, np.float32)) for r in rows], np.float32)


def _rounded(values, format):
    return to_float32_array(from_float32_array(np.asarray(values, np.float32), format), format)


def norm_order_is_torchs(format):
    """True where torch's CPU norms of ``format`` tensors add in npoptim's emulated order:
    the full norm and the last-dim norm of each probe row, and the column norms of the rows
    stacked as columns, bit for bit after rounding."""
    if format not in _PROBE:
        rows = probe_rows(format)
        ours = _rounded(_emulated(rows, format), format)
        same = True
        for row, mine in zip(rows, ours):
            tensor = as_torch(row.astype(np.float32).astype(numpy_dtype(format)), format)
            same &= float(tensor.norm(2)) == mine == float(torch.norm(tensor[None], dim=-1))
            columns = torch.norm(torch.stack([tensor, tensor], dim=1), dim=-2)  # strided
            same &= bool((columns.float() == float(_rounded(norm_sequential(
                row.astype(np.float32)), format))).all())
        _PROBE[format] = bool(same)
    return _PROBE[format]


def assert_agrees(ours, opt, theirs, topt, format, label):
    """Bit for bit where the probe found torch's order; else within 4 units in the last place
    of the format at each parameter's scale (torch's own sensitivity to its order)."""
    if norm_order_is_torchs(format):
        assert_same_run(ours, opt, theirs, topt, label)
        return
    ulp = 2.0 ** (-7 if format == "bfloat16" else -10)
    for t, (a, b) in enumerate(zip(ours, theirs)):
        for i, (x, y) in enumerate(zip(a, b)):
            x = to_float32_array(x, format)
            y = to_float32_array(y, format)
            assert np.max(np.abs(x - y)) <= 4 * ulp * max(1.0, np.max(np.abs(y))), (label, t, i)


# ---------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("format", FORMATS)
def test_the_probe_rows_tell_the_orders_apart(format):
    """Each of the three orders (8 lanes, one running sum, float64) gives a norm on some
    probe row that another does not: the probe can see which one torch uses."""
    rows = [r.astype(np.float32) for r in probe_rows(format)]
    lanes = _rounded([norm_lanes(r) for r in rows], format)
    running = _rounded([norm_sequential(r) for r in rows], format)
    wide = _rounded([np.sqrt(np.sum(r.astype(np.float64) ** 2)) for r in rows], format)
    assert np.any(lanes != running) and np.any(lanes != wide) and np.any(running != wide)


@needs_torch
@pytest.mark.parametrize("format", FORMATS)
def test_the_norm_probe_finds_torchs_order_here(format):
    """On a CPU kind whose orders were measured (:data:`MEASURED_CAPABILITIES`) the probe must
    find npoptim's order; elsewhere it skips, saying so, where torch adds in another."""
    capability = torch.backends.cpu.get_cpu_capability()
    if capability in MEASURED_CAPABILITIES:
        assert norm_order_is_torchs(format)
    elif not norm_order_is_torchs(format):
        pytest.skip(f"torch's {format} norms add in another order on {capability}: runs held "
                    "to 4 ulp")


@needs_torch
@pytest.mark.parametrize("format", FORMATS)
def test_gradients_whose_norms_sit_on_rounding_midpoints_match_torch(format):
    """The probe's rows of 64 as a gradient (random data almost never lands where the order
    shows: a float64 norm agrees with torch on every element of the runs above): at step 1 the
    row factor is R(R(N_row(G))^2 / 64), which takes each order's norm."""
    rows = [r for r in probe_rows(format) if r.size == 64]
    grad = np.stack(rows).astype(np.float32).astype(numpy_dtype(format))
    wide = _rounded(np.sqrt(np.sum(np.stack(rows) ** 2, axis=1)), format)
    assert np.any(wide != _rounded(_emulated(rows, format), format))
    rng = np.random.default_rng(11)
    params = [rng.standard_normal(grad.shape).astype(np.float32).astype(grad.dtype)]
    grads = [[grad]] * 3
    ours, opt = run_npoptim({}, params, grads, group1={})
    theirs, topt = run_torch({}, params, grads, format, group1={})
    assert_agrees(ours, opt, theirs, topt, format, "midpoints")


@needs_torch
@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("kwargs", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_bit_exact_against_torch(kwargs, format):
    params, grads = problem(format)
    ours, opt = run_npoptim(kwargs, params, grads)
    theirs, topt = run_torch(kwargs, params, grads, format)
    assert_agrees(ours, opt, theirs, topt, format, kwargs)


@needs_torch
@pytest.mark.parametrize("format", FORMATS)
def test_tiny_gradients_meet_the_eps_floors_as_torch(format):
    """Gradients of 1e-4: the row mean is clamped to R(eps1) and the variance to R(eps1^2)
    (float16's eps1^2 = 2**-20 is a float16 subnormal), which this checks happens."""
    params, grads = problem(format, seed=3, scale=1e-4)
    g = grads[0][0].astype(np.float32)
    assert np.mean(g * g) < 2.0 ** (-20 if format == "float16" else -14)
    ours, opt = run_npoptim({}, params, grads)
    theirs, topt = run_torch({}, params, grads, format)
    assert_agrees(ours, opt, theirs, topt, format, "tiny")


@needs_torch
def test_eps1_is_set_by_the_groups_first_parameter_as_in_torch():
    """A group holding a bfloat16 and then a float16 parameter: torch's loop takes eps1 from
    the first (2**-7) for both; the float16 variance floor is then R(2**-14)."""
    rng = np.random.default_rng(5)
    params = [rng.standard_normal(8).astype(np.float32).astype(numpy_dtype(f))
              for f in FORMATS]
    grads = [[(rng.standard_normal(8) * 1e-3).astype(np.float32).astype(p.dtype)
              for p in params] for _ in range(12)]
    ps = [p.copy() for p in params]
    opt = precision.Adafactor(ps, torch_cpu_lanes=torch_lanes())
    tps = [as_torch(p, f).requires_grad_() for p, f in zip(params, FORMATS)]
    topt = torch.optim.Adafactor(tps, foreach=False)
    for step in grads:
        opt.step(step)
        for p, g, f in zip(tps, step, FORMATS):
            p.grad = as_torch(g, f)
        topt.step()
        assert all(np.array_equal(bits(p), bits(tp)) for p, tp in zip(ps, tps))


@needs_torch
@pytest.mark.parametrize("format", FORMATS)
def test_loading_torchs_state_dict_continues_as_torch_does(format):
    """torch's state_dict after 10 steps (its row and column factors, R x 1 and 1 x C),
    loaded into npoptim, continues bit for bit with torch's own continuation."""
    params, grads = problem(format, seed=7)
    grads = [[g if g is not None else np.zeros_like(params[i]) for i, g in enumerate(s)]
             for s in grads]
    first, topt = run_torch({}, params, grads[:10], format)
    start = [p.view(numpy_dtype(format)).copy() for p in first[-1]]
    saved = to_numpy(topt.state_dict())
    theirs, _ = run_torch_from(topt, start, grads[10:], format)
    ps = [p.copy() for p in start]
    opt = precision.Adafactor(groups(ps), torch_cpu_lanes=torch_lanes())
    opt.load_state_dict(saved)
    assert opt.state[0]["row_var"].shape == (32, 1) and opt.state[0]["col_var"].shape == (1, 64)
    for t, step in enumerate(grads[10:]):
        opt.step(step)
        assert all(np.array_equal(bits(p), q) for p, q in zip(ps, theirs[t])), t


def run_torch_from(topt, start, grads, format):
    ps = [as_torch(p, format).requires_grad_() for p in start]
    resumed = torch.optim.Adafactor(groups(ps), foreach=False)
    resumed.load_state_dict(topt.state_dict())
    trajectory = []
    for step in grads:
        for p, g in zip(ps, step):
            p.grad = as_torch(g, format)
        resumed.step()
        trajectory.append([bits(p).copy() for p in ps])
    return trajectory, resumed


def _stepped(format="bfloat16"):
    params, grads = problem(format)
    ps = [p.copy() for p in params]
    opt = Adafactor(groups(ps))
    opt.step(grads[0])
    before = ([p.tobytes() for p in ps],
              {i: {n: np.asarray(v).tobytes() for n, v in s.items()} for i, s in opt.state.items()})
    return opt, ps, grads, before


def _unchanged(opt, ps, before):
    assert [p.tobytes() for p in ps] == before[0]
    assert {i: {n: np.asarray(v).tobytes() for n, v in s.items()}
            for i, s in opt.state.items()} == before[1]


def test_a_float16_gradient_for_a_bfloat16_param_is_refused_before_anything_changes():
    opt, ps, grads, before = _stepped()
    wrong = [g.astype(np.float32).astype(np.float16) for g in grads[1] if g is not None]
    wrong = [wrong[0]] + grads[1][1:]
    with pytest.raises(ValueError, match="gradient has dtype float16, the parameter has "
                                         "bfloat16"):
        opt.step(wrong)
    _unchanged(opt, ps, before)


def test_unknown_rounding_modes_are_refused_before_anything_changes():
    param = np.zeros((4, 8), numpy_dtype("bfloat16"))
    for rounding in ("fused", "stochastic", "exact"):
        with pytest.raises(ValueError, match="rounding must be one of 'per-op'"):
            Adafactor([param], rounding=rounding)
    opt, ps, grads, before = _stepped()
    opt.param_groups[1]["rounding"] = "fused"
    with pytest.raises(ValueError, match="rounding must be one of 'per-op'"):
        opt.step(grads[1])
    _unchanged(opt, ps, before)


@pytest.mark.parametrize("options", [dict(eps1_mode="added"), dict(relative_step=False),
                                     dict(parameter_scale=False), dict(decay_offset=2),
                                     dict(min_dim_size_to_factor=128),
                                     dict(factor_dims="largest_two"), dict(momentum=0.9),
                                     dict(weight_decay_mode="added")])
def test_other_frameworks_conventions_are_refused_before_anything_changes(options):
    with pytest.raises(ValueError, match="torch's conventions only"):
        Adafactor([np.zeros(4, numpy_dtype("float16"))], **options)
    opt, ps, grads, before = _stepped()
    opt.param_groups[0].update(options)
    with pytest.raises(ValueError, match=f"{next(iter(options))}=.*torch's conventions only"):
        opt.step(grads[1])
    _unchanged(opt, ps, before)


@needs_torch
def test_an_eps_beyond_float16_raises_before_anything_changes_as_torch_refuses():
    """torch raises mid-step (after its weight decay changed the parameter) converting
    eps1**2 = 1e6 to float16; npoptim raises before the step."""
    params, grads = problem("float16")
    tps = [as_torch(p, "float16").requires_grad_() for p in params[:1]]
    tps[0].grad = as_torch(grads[0][0], "float16")
    with pytest.raises(RuntimeError, match="overflow"):
        torch.optim.Adafactor(tps, eps=(1e3, 1e-3), foreach=False).step()
    opt, ps, grads, before = _stepped("float16")
    opt.param_groups[0]["eps"] = (1e3, 1e-3)
    with pytest.raises(ValueError, match=r"eps\[0\]\*\*2=1000000.0 cannot be converted to "
                                         "float16 without overflow"):
        opt.step(grads[1])
    _unchanged(opt, ps, before)
