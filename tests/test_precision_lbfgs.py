"""16-bit LBFGS (npoptim.precision) against torch 2.13's CPU LBFGS on bfloat16/float16
params, bit for bit over 20 steps, with and without the strong Wolfe line search.

The objectives are tests/lbfgs_problems.py's, evaluated in the 16-bit dtype (NumPy with
ml_dtypes, the same code for both optimizers, as a torch user's closure would compute in the
params' dtype). torch's 16-bit ``dot`` and ``sum`` add in a CPU-specific order: the
trajectory tests run where ``cpu_probe.half_reduction_order_is_torchs()`` finds npoptim's
order (on a measured CPU kind, AVX-512, it must), and skip, saying so, elsewhere; the orders themselves are pinned by hand-derived sums.
On these problems a wrong reduction order rarely changes a 16-bit result (measured: a
left-to-right float32 dot leaves every trajectory here bit for bit unchanged), while rounding
``add``'s ``alpha`` to float32 instead of the format, a Python float added to a 0-d tensor
without rounding it first, or the scalar tail's rounding (``torch_cpu_lanes``) change them:
the per-op checks below cover the reductions and the scalar rules directly.
"""
import numpy as np
import pytest

import cpu_probe
import npoptim.precision as precision
from lbfgs_problems import flat, objective, start_params
from npoptim.precision.lbfgs import Scalar16, dot16, sum16
from test_precision_torch import FORMATS, as_torch, bits, numpy_dtype, torch_lanes
from torch_compare import needs_torch, torch

pytest.importorskip("ml_dtypes")

STEPS = 20
#: (objective, options): fixed steps with a wrapping history; an lr the formats do not hold
#: (add's alpha R(0.3)); the strong Wolfe line search (its steps interpolated from 0-d 16-bit
#: slopes), with a tolerance_change the runs reach
CASES = [("rosenbrock", dict(max_iter=4, history_size=5)),
         ("drifting_quartic", dict(lr=0.3, max_iter=3, history_size=3, tolerance_grad=1e-2)),
         ("rosenbrock", dict(lr=0.3, max_iter=4, history_size=5, line_search_fn="strong_wolfe")),
         ("drifting_quartic", dict(lr=0.7, max_iter=5, line_search_fn="strong_wolfe",
                                   tolerance_change=1e-4))]
VECTORS = ("d", "prev_flat_grad")
SCALARS = ("t", "H_diag")


#: torch capabilities whose 16-bit dot/sum orders were measured (AVX-512: torch runs its AVX2
#: float32 kernels there; AVX2: measured on an Intel Xeon with ATEN_CPU_CAPABILITY=avx2); on
#: them the probe must find npoptim's order, so that a regression in dot16/sum16 fails
#: instead of turning the trajectory tests into skips
MEASURED_CAPABILITIES = ("AVX512", "AVX2")


def needs_torch_order():
    if torch.backends.cpu.get_cpu_capability() in MEASURED_CAPABILITIES:
        assert cpu_probe.half_reduction_order_is_torchs(), cpu_probe.describe_probe()
    elif not cpu_probe.half_reduction_order_is_torchs():
        pytest.skip("torch's 16-bit dot/sum add in another order on this CPU "
                    f"({cpu_probe.describe_probe()}): L-BFGS amplifies last-bit differences")


def closure_of(name, params, k, raw=False):
    """The closure of step ``k``; ``raw``: the gradients as their ``uint16`` bits."""
    fn = objective(name)

    def closure():
        loss, grads = fn(params, k)
        return loss, [g.view(np.uint16) if raw else g for g in grads]
    return closure


def np_run(name, options, format, steps=STEPS, raw=False):
    dtype = numpy_dtype(format)
    params = [p.astype(dtype) for p in start_params(np.float32)]
    live = [p.view(np.uint16) for p in params] if raw else params
    opt = precision.LBFGS(live, torch_cpu_lanes=torch_lanes(), format=format if raw else None,
                          **options)
    trajectory = []
    for k in range(steps):
        opt.step(closure_of(name, params, k, raw))
        trajectory.append(np.concatenate([bits(p).reshape(-1) for p in params]))
    return np.array(trajectory), opt


def torch_run(name, options, format, steps=STEPS):
    dtype = numpy_dtype(format)
    fn = objective(name)
    tparams = [as_torch(p.astype(dtype), format) for p in start_params(np.float32)]
    opt = torch.optim.LBFGS(tparams, **options)
    trajectory = []
    for k in range(steps):
        def closure():
            loss, grads = fn([bits(t).view(dtype) for t in tparams], k)
            for t, g in zip(tparams, grads):
                t.grad = as_torch(np.ascontiguousarray(g), format)
            return loss
        opt.step(closure)
        trajectory.append(np.concatenate([bits(t).reshape(-1) for t in tparams]))
    return np.array(trajectory), opt


def scalar_bits(value, format):
    """A state scalar as torch holds it: a 0-d tensor's bits, or a Python number."""
    if isinstance(value, Scalar16) or torch.is_tensor(value):
        wide = float(value.float()) if torch.is_tensor(value) else float(value)
        return ("tensor", wide)
    return ("number", float(value))


@needs_torch
@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("name, options", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_bit_exact_against_torch(name, options, format):
    needs_torch_order()
    ours, opt = np_run(name, options, format)
    theirs, topt = torch_run(name, options, format)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        assert np.array_equal(a, b), (f"step {k + 1}", int((a != b).sum()))
    assert np.all(np.isfinite(ours.view(numpy_dtype(format)).astype(np.float32)))
    assert (np.diff(ours, axis=0) != 0).any(axis=1).sum() >= 7  # the runs keep moving
    mine, state = opt.state[0], topt.state[topt.param_groups[0]["params"][0]]
    assert (mine["func_evals"], mine["n_iter"]) == (state["func_evals"], state["n_iter"])
    for key in VECTORS:
        assert np.array_equal(bits(opt.state_dict()["state"][0][key]), bits(state[key])), key
    for key in ("old_dirs", "old_stps"):
        assert len(mine[key]) == len(state[key])
        for x, y in zip(opt.state_dict()["state"][0][key], state[key]):
            assert np.array_equal(bits(x), bits(y)), key
    for key in SCALARS:
        assert scalar_bits(mine[key], format) == scalar_bits(state[key], format), key
    for key in ("ro", "al"):
        assert [None if v is None else scalar_bits(v, format) for v in mine[key]] == \
            [None if v is None else scalar_bits(v, format) for v in state[key]], key


@needs_torch
def test_the_half_probe_tells_a_left_to_right_dot_apart(monkeypatch):
    import npoptim.precision.lbfgs as module

    def left_to_right(x, y):
        total = np.float32(0)
        for a, b in zip(x, y):
            total = np.float32(total + a * b)
        return total

    monkeypatch.setattr(module, "dot16", left_to_right)
    assert not cpu_probe.half_reduction_order_is_torchs()


def test_dot_and_sum_orders_hand_derived():
    """float32 sums of values where the order shows: a 2**30 absorbs any 1 or 2 added to it.

    16 elements (one 16-bit vector, two float32 halves added lane by lane): 2**30 at 0 and
    -2**30 at 8 meet in lane 0 first and cancel; the seven other lanes hold 1 + 1: 14. (Left
    to right: the ones after the 2**30 vanish, the seven after -2**30 count: 7.) 64 elements
    (one block of eight 8-lane registers, folded by halving): the 2**30 pair sits in lane 0 of
    registers 0 and 1, which meet last, after lane 0 took registers 2-7's ones: lane 0 ends at
    0, the other lanes hold 8 each: 56."""
    x = np.ones(16, np.float32)
    x[0], x[8] = 2.0 ** 30, -2.0 ** 30
    assert dot16(x, np.ones(16, np.float32)) == 14.0
    assert sum16(x) == 14.0  # the sum loads the vector as the sum of its two halves too
    x = np.ones(64, np.float32)
    x[0], x[8] = 2.0 ** 30, -2.0 ** 30
    assert dot16(x, np.ones(64, np.float32)) == 56.0
    # below 16 elements the sum reads one element at a time into four accumulators: 2**30
    # and -2**30 at 0 and 4 share the first; 1, 2, 3, 5, 6 survive in the others
    x = np.ones(7, np.float32)
    x[0], x[4] = 2.0 ** 30, -2.0 ** 30
    assert sum16(x) == 5.0


def test_scalar_rules_hand_derived():
    """torch's 0-d 16-bit tensor arithmetic (bfloat16: 8 significant bits, 2 apart at 256)."""
    code = 0
    assert float(Scalar16(256.0, code) + 1.0039) == 256.0  # R(1.0039) = 1; 257 ties to 256
    assert float(1.0039 + Scalar16(256.0, code)) == 256.0
    assert float(Scalar16(1.0, code) * 1.00391) == 1.0078125  # a float32 factor, not R(.)
    assert float(Scalar16(1.0, code) / 1.0039) == 0.99609375  # R(1.0039) would give 1
    assert float(7.0 / Scalar16(3.0, code)) == 2.34375  # R(R(1/3) * 7); R(7/3) = 2.328125
    assert float(1.0039 - Scalar16(0.0, code)) == 1.0
    assert not Scalar16(1.0, code) < 1.001  # 1.001 rounds to 1 before the comparison
    assert Scalar16(1.0, code) < 1.01
    assert float(np.sqrt(Scalar16(2.0, code))) == 1.4140625
    assert min(1.0, Scalar16(0.5, code)).value == 0.5 and max(Scalar16(0.5, code), 1.0) == 1.0


@needs_torch
@pytest.mark.parametrize("format", FORMATS)
def test_scalar_arithmetic_against_torch(format):
    """Every operation LBFGS's scalars meet, on random 0-d tensors and Python floats."""
    rng = np.random.default_rng(4)
    dtype = getattr(torch, format)
    code = 0 if format == "bfloat16" else 1
    ops = [lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a / b]
    compares = [lambda a, b: a < b, lambda a, b: a <= b, lambda a, b: a > b,
                lambda a, b: a >= b]
    for _ in range(300):
        x, y = (rng.standard_normal(2) * np.exp(rng.uniform(-3, 3, 2))).tolist()
        number = float(y * (1 + rng.uniform(-1, 1) * 2.0 ** -9))  # off the 16-bit grid
        tx, ty = torch.tensor(x).to(dtype), torch.tensor(y).to(dtype)
        sx, sy = Scalar16(float(tx), code), Scalar16(float(ty), code)
        for op in ops:
            for ours, theirs in ((op(sx, sy), op(tx, ty)), (op(sx, number), op(tx, number)),
                                 (op(number, sx), op(number, tx))):
                assert float(ours) == float(theirs), (x, y, number)
        for op in compares:
            assert op(sx, number) == bool(op(tx, number)), (x, number)
            assert op(number, sx) == bool(op(number, tx)), (x, number)
        assert float(np.sqrt(abs(sx))) == float(abs(tx).sqrt())
        assert float(-sx) == float(-tx)


@needs_torch
@pytest.mark.parametrize("format", FORMATS)
def test_raw_uint16_bits_and_state_dict_continue_bit_for_bit(format):
    """Raw uint16 params give the same run; a state_dict taken after 10 steps (vectors of the
    params' dtype, 0-d tensors as 0-d arrays), npoptim's or torch's, continues exactly as the
    uninterrupted run."""
    name, options = CASES[2]
    whole, _ = np_run(name, options, format)
    raw, _ = np_run(name, options, format, raw=True)
    assert np.array_equal(whole, raw)
    first, opt = np_run(name, options, format, steps=10)
    saved = opt.state_dict()
    assert all(v.dtype == numpy_dtype(format) for v in saved["state"][0]["old_dirs"])

    def resume(state_dict):
        shapes = [p.shape for p in start_params(np.float32)]
        params = [p.view(numpy_dtype(format)).reshape(shape).copy() for p, shape in zip(
            np.split(first[-1], np.cumsum([np.prod(s) for s in shapes])[:-1]), shapes)]
        resumed = precision.LBFGS(params, torch_cpu_lanes=torch_lanes(), **options)
        resumed.load_state_dict(state_dict)
        for k in range(10, STEPS):
            resumed.step(closure_of(name, params, k))
            assert np.array_equal(flat([bits(p) for p in params]), whole[k]), k

    resume(saved)
    needs_torch_order()  # torch's state after 10 steps is npoptim's where the orders agree
    from torch_compare import to_numpy
    _, topt = torch_run(name, options, format, steps=10)
    resume(to_numpy(topt.state_dict()))  # 16-bit tensors widened to float32, 0-d ones too


@pytest.mark.parametrize("format", FORMATS)
def test_bad_input_raises_before_anything_changes(format):
    dtype = numpy_dtype(format)
    other = numpy_dtype("float16" if format == "bfloat16" else "bfloat16")
    params = [p.astype(dtype) for p in start_params(np.float32)]
    opt = precision.LBFGS(params, max_iter=3)
    fn = objective("rosenbrock")
    opt.step(lambda: fn(params, 0))
    before = [p.copy() for p in params]
    state = {k: (list(v) if isinstance(v, list) else v) for k, v in opt.state[0].items()}

    def wrong_dtype():
        loss, grads = fn(params, 1)
        return loss, [g.astype(np.float32).astype(other) for g in grads]

    with pytest.raises(ValueError, match="dtype"):
        opt.step(wrong_dtype)
    opt.param_groups[0]["rounding"] = "fused"
    with pytest.raises(ValueError, match="rounding"):
        opt.step(lambda: fn(params, 1))
    opt.param_groups[0]["rounding"] = "per-op"
    opt.param_groups[0]["first_step_norm"] = "l2"  # the optax flavor's switch
    with pytest.raises(ValueError, match="first_step_norm"):
        opt.step(lambda: fn(params, 1))
    opt.param_groups[0]["first_step_norm"] = "l1"
    assert all(np.array_equal(bits(p), bits(q)) for p, q in zip(params, before))
    assert opt.state[0].keys() == state.keys() and opt.state[0]["n_iter"] == state["n_iter"]
    with pytest.raises(ValueError, match="rounding"):
        precision.LBFGS([p.copy() for p in params], rounding="stochastic")
    with pytest.raises(ValueError, match="zoom"):
        precision.LBFGS([p.copy() for p in params], line_search_fn="zoom")
    with pytest.raises(ValueError, match="torch's conventions only"):  # as Adafactor, Muon
        precision.LBFGS([p.copy() for p in params], flavor="optax")
    with pytest.raises(TypeError, match="one dtype"):
        precision.LBFGS([params[0].copy(), params[1].astype(np.float32).astype(other)])
    with pytest.raises(TypeError):
        precision.LBFGS([np.zeros(3, np.float32)])
