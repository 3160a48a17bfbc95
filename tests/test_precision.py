"""npoptim.precision without torch: the 16-bit conversions, bad input, determinism.

The conversions are checked against ml_dtypes (bfloat16) and NumPy (float16) on every 16-bit
pattern and on a spread of float32 patterns (every 4099th one, ~1M values with all exponents,
ties, subnormals, infinities and NaNs).
"""
import numpy as np
import pytest

import npoptim.precision as precision
from npoptim.kernels.parallel import parallel_threshold_set
from npoptim.precision import formats

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)


def reference_dtype(format):
    return BF16 if format == "bfloat16" else np.dtype(np.float16)


@pytest.mark.parametrize("format", ["bfloat16", "float16"])
def test_decoding_every_16_bit_pattern_is_exact(format):
    bits = np.arange(1 << 16, dtype=np.uint64).astype(np.uint16)
    ours = formats.to_float32_array(bits, format)
    theirs = bits.view(reference_dtype(format)).astype(np.float32)
    nan = np.isnan(theirs)
    assert np.array_equal(np.isnan(ours), nan)
    assert np.array_equal(ours[~nan].view(np.uint32), theirs[~nan].view(np.uint32))


@pytest.mark.parametrize("format", ["bfloat16", "float16"])
def test_rounding_float32_matches_ml_dtypes_and_numpy(format):
    patterns = np.arange(0, 1 << 32, 4099, dtype=np.uint64).astype(np.uint32)
    ties = np.array([0x3F808000, 0x3F818000, 0x33000000, 0x33000001, 0x477FF000, 0x477FEFFF,
                     0x387FE000, 0x00000001, 0x807FFFFF], np.uint32)  # halfway cases
    values = np.concatenate([patterns, ties]).view(np.float32)
    ours = formats.from_float32_array(values, format)
    with np.errstate(all="ignore"):
        theirs = values.astype(reference_dtype(format)).view(np.uint16)
    nan = np.isnan(values)
    assert np.array_equal(ours[~nan], theirs[~nan])
    decoded = formats.to_float32_array(ours[nan], format)
    assert np.isnan(decoded).all()
    if format == "bfloat16":
        assert (ours[nan] == 0x7FC0).all()  # the documented canonical NaN


def test_float16_nan_keeps_sign_and_payload():
    nan = np.array([0xFFC02000], np.uint32).view(np.float32)  # negative quiet NaN, payload
    assert formats.from_float32_array(nan, "float16")[0] == 0xFE01


def _problem(dtype, n=50, steps=3, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n).astype(np.float32).astype(dtype),
            [rng.standard_normal(n).astype(np.float32).astype(dtype) for _ in range(steps)])


@pytest.mark.parametrize("name", ["Adam", "AdamW", "SGD", "RMSprop", "Adagrad", "Adamax",
                                  "Adadelta", "KahanLion", "NAdam", "RAdam", "ASGD", "Rprop"])
def test_a_float16_grad_for_a_bfloat16_param_raises_before_anything_changes(name):
    kwargs = dict(momentum=0.9) if name in ("SGD", "RMSprop") else {}
    param, grads = _problem(BF16)
    other = param.copy()
    opt = getattr(precision, name)([param, other], lr=0.1, **kwargs)
    opt.step([grads[0], grads[1]])
    before = (param.copy(), other.copy(), {k: {n: np.copy(v) for n, v in s.items()}
                                           for k, s in opt.state.items()})
    with pytest.raises(ValueError, match="dtype float16"):
        opt.step([grads[2], grads[2].astype(np.float32).astype(np.float16)])
    assert np.array_equal(param.view(np.uint16), before[0].view(np.uint16))
    assert np.array_equal(other.view(np.uint16), before[1].view(np.uint16))
    for k, s in opt.state.items():
        for n, v in s.items():
            assert np.asarray(v).tobytes() == np.asarray(before[2][k][n]).tobytes(), (k, n)


def test_bad_options_and_arrays_are_refused():
    param, _ = _problem(BF16)
    with pytest.raises(ValueError, match="rounding must be one of"):
        precision.AdamW([param], rounding="stochastic-ish")
    with pytest.raises(ValueError, match="rounding must be one of 'per-op'"):
        precision.SGD([param], rounding="fused")
    with pytest.raises(ValueError, match="rounding must be one of 'per-op'"):
        precision.RMSprop([param], rounding="fused")
    with pytest.raises(ValueError, match="rounding must be one of 'per-op', 'fused'"):
        precision.Adagrad([param], rounding="stochastic")
    # every other framework's convention switch is refused (the 16-bit kernels are torch's)
    for cls, switch in ((precision.RMSprop, dict(eps_in_sqrt=True)),
                        (precision.Adam, dict(eps_mode="eps_hat")),
                        (precision.AdamW, dict(amsgrad=True, amsgrad_max="bias_corrected")),
                        (precision.SGD, dict(momentum=0.9, lr_in_buffer=True)),
                        (precision.Adagrad, dict(eps_in_sqrt=True)),
                        (precision.Adamax, dict(eps_mode="added")),
                        (precision.NAdam, dict(momentum_schedule="none"))):
        with pytest.raises(ValueError, match="torch's conventions only"):
            cls([param], **switch)
    with pytest.raises(ValueError, match="kahan_sum must be True or False"):
        precision.KahanLion([param], lr=1e-3, kahan_sum=None)
    with pytest.raises(ValueError, match="format must be"):
        precision.Adam([param.view(np.uint16)], format="float8")
    with pytest.raises(TypeError, match="name their format"):
        precision.Adam([param.view(np.uint16)])
    with pytest.raises(TypeError, match="the array is bfloat16"):
        precision.Adam([param], format="float16")
    with pytest.raises(TypeError, match="takes bfloat16, float16 or uint16"):
        precision.Adam([param.astype(np.float32)])
    with pytest.raises(ValueError, match="torch_cpu_lanes"):
        precision.Adam([param], torch_cpu_lanes=0)
    opt = precision.Adam([param])
    opt.param_groups[0]["rounding"] = "exact"
    with pytest.raises(ValueError, match="rounding must be one of"):
        opt.step([param.copy()])
    assert 0 not in opt.state


@pytest.mark.parametrize("rounding", ["per-op", "fused"])
def test_results_do_not_depend_on_the_thread_count(rounding):
    param, grads = _problem(np.float16, n=20000)
    results = []
    for threshold in (0, 1 << 40):  # every update on threads, and none
        p = param.copy()
        opt = precision.AdamW([p], lr=1e-2, rounding=rounding)
        with parallel_threshold_set(threshold):
            for g in grads:
                opt.step([g])
        results.append(p.view(np.uint16).copy())
    assert np.array_equal(results[0], results[1])


def test_bfloat16_needs_ml_dtypes_only_for_typed_arrays(monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_ml_dtypes(name, *args, **kwargs):
        if name == "ml_dtypes":
            raise ImportError("no ml_dtypes")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ml_dtypes)
    with pytest.raises(ImportError, match=r"npoptim\[bf16\]"):
        formats.bfloat16_dtype()
    bits = np.array([0x3F80], np.uint16)
    opt = precision.SGD([bits], lr=0.5, format="bfloat16")
    opt.step([bits.copy()])
    assert bits[0] == 0x3F00  # 1 - 0.5 * 1


def test_master_weights_copy_is_the_rounded_master_and_bad_grads_change_nothing():
    import npoptim

    model = [np.array([1.0, -2.0, 3.0], BF16), np.array([0.5, 0.25], np.float16)]
    master = precision.MasterWeights(model, lambda ps: npoptim.SGD(ps, lr=1e-3))
    master.step([np.array([1.0, 1.0, 1.0], BF16), np.array([1.0, -1.0], np.float16)])
    assert master.params[0].dtype == np.float32
    assert np.array_equal(master.params[0], np.float32([1.0, -2.0, 3.0]) - np.float32(1e-3))
    # the copy is the master rounded to nearest: 0.999 in bfloat16 is 1.0 (spacing 2**-8)
    assert np.array_equal(model[0].astype(np.float32), [1.0, -2.0, 3.0])
    assert np.array_equal(model[1], np.float16([0.499, 0.251]))
    before = [m.copy() for m in master.params]
    with pytest.raises(ValueError, match="grads\\[1\\]"):
        master.step([np.ones(3, BF16), np.ones(2, BF16)])
    assert all(np.array_equal(a, b) for a, b in zip(before, master.params))


def test_grad_scaler_backs_off_skips_and_grows():
    import npoptim

    p = np.zeros(3, np.float32)
    opt = npoptim.SGD([p], lr=1.0)
    scaler = precision.GradScaler(init_scale=8.0, growth_interval=2)
    assert not scaler.step(opt, [np.float32([1, np.inf, 0])])
    scaler.update()
    assert scaler.get_scale() == 4.0 and np.array_equal(p, np.zeros(3))
    for _ in range(2):
        assert scaler.step(opt, [np.float32([4, 8, 0])])
        scaler.update()
    assert scaler.get_scale() == 8.0 and np.array_equal(p, np.float32([-2, -4, 0]))
    g16 = np.array([8.0, 16.0, np.nan], BF16)
    assert scaler.unscale([g16])[1] and not scaler.unscale([g16[:2]])[1]
    assert np.array_equal(scaler.unscale([g16[:2]])[0][0], np.array([1.0, 2.0], BF16))


def test_the_stochastic_stream_is_the_documented_hash():
    from npoptim.precision import stochastic

    # SplitMix64's first output from state 0 (a published test vector)
    assert stochastic.mix(0) == 0xE220A8397B1DCDAF
    key = stochastic.stream_key(7, 2, 5)
    values = np.float32([1.0 + 2 ** -9] * 8)
    bits = stochastic.stochastic_round_array(values, seed=7, parameter=2, step=5)
    expected = [0x3F81 if stochastic.random16(key, i) < 0x4000 else 0x3F80 for i in range(8)]
    assert bits.tolist() == expected  # compiled draws equal the pure-Python definition


def test_stochastic_rounding_is_unbiased_and_exact_at_representable_values():
    from npoptim.precision import stochastic

    x = np.float32(1.0 + 2 ** -9)  # a quarter of the way from 1 to the next bfloat16
    values = np.full(100000, x, np.float32)
    rounded = stochastic.stochastic_round_array(values, seed=1).view(BF16).astype(np.float64)
    p = 0.25
    assert set(np.unique(rounded)) == {1.0, 1.0 + 2 ** -7}
    assert abs((rounded > 1).mean() - p) < 5 * np.sqrt(p * (1 - p) / values.size)
    exact = np.float32([1.5, -3.0, 0.0, np.inf])
    assert np.array_equal(stochastic.stochastic_round_array(exact, 0).view(BF16)
                          .astype(np.float32), exact)


def test_stochastic_adamw_is_reproducible_and_thread_count_independent():
    param, grads = _problem(BF16, n=20000)
    runs = []
    for threshold, seed in ((0, 5), (1 << 40, 5), (0, 6)):
        p = param.copy()
        opt = precision.AdamW([p], lr=1e-3, rounding="stochastic", seed=seed)
        with parallel_threshold_set(threshold):
            for g in grads:
                opt.step([g])
        runs.append(p.view(np.uint16).copy())
    assert np.array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])  # another seed, other draws


FLOAT16_SR = [  # (value, the two float16 neighbours): normal, exponent edge, subnormal, top
    (np.float32(1.0 + 2 ** -12), 1.0, 1.0 + 2 ** -10),
    (np.float32(-(2.0 - 2 ** -13)), -(2.0 - 2 ** -10), -2.0),
    (np.float32(2 ** -24 * 0.3), 0.0, 2 ** -24),
    (np.float32(-(2 ** -15 + 2 ** -26)), -2 ** -15, -(2 ** -15 + 2 ** -24)),
    (np.float32(65504 + 8), 65504.0, np.inf),
]


@pytest.mark.parametrize("x, toward, away", FLOAT16_SR)
def test_float16_stochastic_rounding_is_unbiased(x, toward, away):
    """No library rounds float16 stochastically: npoptim's rule (npoptim.precision.stochastic)
    picks the two float16 neighbours of x only, with the probability that makes the mean x
    (to the rule's resolution, 2**-13 of a spacing for normals, 2**-16 for subnormals)."""
    from npoptim.precision import stochastic

    n = 100000
    rounded = stochastic.stochastic_round_array(np.full(n, x, np.float32), seed=4,
                                                format="float16").view(np.float16)
    rounded = rounded.astype(np.float64)
    assert set(np.unique(rounded)) == {toward, away}
    p = (float(x) - toward) / (away - toward) if np.isfinite(away) else (float(x) - toward) / 32
    assert abs((rounded == away).mean() - p) < 5 * np.sqrt(p * (1 - p) / n) + 2 ** -13


def test_float16_stochastic_rounding_keeps_exact_values_and_matches_itself():
    from npoptim.precision import stochastic

    exact = np.float32([1.5, -3.0, 0.0, -0.0, np.inf, 2 ** -24, 65504, 1e6])
    out = stochastic.stochastic_round_array(exact, 0, format="float16").view(np.float16)
    assert np.array_equal(out.astype(np.float32), np.float32([1.5, -3, 0, 0, np.inf, 2 ** -24,
                                                              65504, np.inf]))
    assert np.signbit(out[3])
    values = np.random.default_rng(3).standard_normal(5000).astype(np.float32)
    first = stochastic.stochastic_round_array(values, 9, 1, 2, format="float16")
    assert np.array_equal(first, stochastic.stochastic_round_array(values, 9, 1, 2,
                                                                   format="float16"))
    wide = first.view(np.float16).astype(np.float32)
    nearest = values.astype(np.float16).astype(np.float32)
    spacing = np.spacing(np.abs(values).astype(np.float16)).astype(np.float32)
    assert np.all(np.abs(wide - values) <= spacing) and not np.array_equal(wide, nearest)


def test_stochastic_float16_adamw_keeps_small_updates_and_is_thread_independent():
    """lr below half the float16 spacing: rounding to nearest never moves the parameters,
    stochastic rounding moves them by the expected amount on average."""
    p0 = np.full(20000, 1.0, np.float16)
    runs = []
    for threshold in (0, 1 << 40):
        p = p0.copy()
        opt = precision.AdamW([p], lr=2 ** -13, weight_decay=0, rounding="stochastic", seed=1)
        with parallel_threshold_set(threshold):
            for _ in range(8):
                opt.step([np.ones_like(p)])
        runs.append(p.view(np.uint16).copy())
    assert np.array_equal(runs[0], runs[1])
    nearest = p0.copy()
    fused = precision.AdamW([nearest], lr=2 ** -13, weight_decay=0, rounding="fused")
    for _ in range(8):
        fused.step([np.ones_like(nearest)])
    assert np.all(nearest == 1.0)
    moved = runs[0].view(np.float16).astype(np.float64)
    assert abs((1.0 - moved.mean()) - 8 * 2 ** -13) < 0.1 * 8 * 2 ** -13


_EVERY_MODE = """
import sys
import numpy as np
import ml_dtypes
import npoptim.precision as P
rng = np.random.default_rng(0)
out = []
SPECIAL = {False: [0x7F81, 0xFFA5, 0x7FC1, 0x7F80, 0xFF80, 0x8000, 0x0001, 0x7F7F],  # bfloat16
           True: [0x7C01, 0xFD55, 0x7E01, 0x7C00, 0xFC00, 0x8000, 0x0001, 0x7BFF]}   # float16
modes = [(P.AdamW, dict(rounding="per-op", torch_cpu_lanes=32, weight_decay=0.1)),
         (P.Adam, dict(rounding="fused", weight_decay=0.1)),
         (P.AdamW, dict(rounding="stochastic", seed=2)),
         (P.SGD, dict(momentum=0.9, weight_decay=0.01, torch_cpu_lanes=32)),
         (P.KahanAdamW, dict()), (P.KahanSGD, dict(momentum=0.9)),
         (P.RMSprop, dict(momentum=0.9, centered=True, weight_decay=0.1, torch_cpu_lanes=32)),
         (P.Adagrad, dict(rounding="fused", weight_decay=0.1, torch_cpu_lanes=32)),
         (P.Adagrad, dict(weight_decay=0.1, initial_accumulator_value=0.1)),
         (P.KahanLion, dict(weight_decay=0.1)), (P.KahanLion, dict(kahan_sum=False)),
         (P.NAdam, dict(weight_decay=0.1, torch_cpu_lanes=32)),
         (P.NAdam, dict(weight_decay=0.1, decoupled_weight_decay=True)),
         (P.RAdam, dict(weight_decay=0.1, torch_cpu_lanes=32)),
         (P.RAdam, dict(betas=(0.5, 0.6))),  # rectified from step 2
         (P.ASGD, dict(t0=1, weight_decay=0.1, torch_cpu_lanes=32)),
         (P.Rprop, dict(maximize=True))]
for cls, kwargs in modes:
    for dtype in (ml_dtypes.bfloat16, np.float16):
        p = rng.standard_normal(40).astype(np.float32).astype(dtype)
        opt = cls([p], lr=1e-2, **kwargs)
        for _ in range(3):
            opt.step([rng.standard_normal(40).astype(np.float32).astype(dtype)])
        out.append(p.view(np.uint16))
        # one step with special values in the param (elements 0-7) and the grad (8-15):
        # signaling and quiet NaNs of both signs, infinities, -0, the smallest subnormal and
        # the largest finite value. (One step: where two NaNs of different payloads meet, as
        # a NaN param and a NaN state would later, which one comes out depends on the order
        # the compiler gives the operands, not on the reading this checks.)
        special = np.array(SPECIAL[dtype == np.float16], np.uint16)
        p = rng.standard_normal(40).astype(np.float32).astype(dtype)
        g = rng.standard_normal(40).astype(np.float32).astype(dtype)
        p.view(np.uint16)[:8] = special
        g.view(np.uint16)[8:16] = special
        cls([p], lr=1e-2, **kwargs).step([g])
        out.append(p.view(np.uint16))
sys.stdout.write(np.concatenate(out).tobytes().hex())
"""


def test_every_mode_runs_the_same_as_plain_python():
    """NUMBA_DISABLE_JIT=1 runs the same rules and conversions as plain Python: same bits,
    special values included. Compiled, the drivers read float16 with the CPU's conversion,
    which quiets a signaling NaN (``formats.read_float32``); plain Python reads it with the
    integer form, which keeps it: the results agree because nothing a step reads leaves it
    without an operation or a rounding that quiets it."""
    import os
    import subprocess
    import sys

    def run(disable):
        env = dict(os.environ, NUMBA_DISABLE_JIT=disable)
        return subprocess.run([sys.executable, "-c", _EVERY_MODE], env=env, check=True,
                              capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.dirname(__file__))).stdout

    compiled, python = run("0"), run("1")
    assert len(compiled) == 2 * 34 * 40 * 4 and compiled == python  # 17 modes, 2 formats


@pytest.mark.parametrize("format", ["bfloat16", "float16"])
def test_round_to_is_the_round_trip_through_the_format(format):
    """``round_to`` works on the float32 bits without the 16-bit step: the same bits as
    ``to_float32(from_float32(x))`` on the spread of float32 patterns (NaNs included), compiled
    and (under ``NUMBA_DISABLE_JIT=1``) as plain Python."""
    import numba

    @numba.njit
    def round_each(values, code, out):
        for i in range(values.size):
            out[i] = formats.round_to(values[i], code)

    patterns = np.arange(0, 1 << 32, 4099, dtype=np.uint64).astype(np.uint32)
    edges = np.array([0x477FF000, 0x477FEFFF, 0x387FF000, 0x38800000, 0x387FFFFF, 0x7F7FFFFF,
                      0x7F800001, 0xFFC02000, 0x7FFFFFFF, 0x3F808000, 0x3F818000], np.uint32)
    values = np.concatenate([patterns, edges, edges | 0x80000000]).view(np.float32)
    if numba.config.DISABLE_JIT:
        values = values[::97]
    ours = np.empty_like(values)
    round_each(values, formats.FORMATS[format], ours)
    trip = formats.to_float32_array(formats.from_float32_array(values, format), format)
    assert np.array_equal(ours.view(np.uint32), trip.view(np.uint32))


def test_float16_conversions_are_the_same_bits_in_hardware_and_in_integers():
    """Where the CPU converts float16 itself (``formats.HARDWARE_FLOAT16``, F16C here), the
    conversions are its instructions; they give every bit of the integer forms (the ones that
    run where it does not, and under ``NUMBA_DISABLE_JIT``): all 65,536 float16 patterns,
    signaling NaNs included, and a spread of float32 patterns with the rounding's edges."""
    import numba

    @numba.njit
    def both(bits, values, decoded, decoded_int, encoded, encoded_int, rounded):
        for i in range(bits.size):
            decoded[i] = formats.float16_to_float32(bits[i])
            decoded_int[i] = formats.float16_to_float32_integer(bits[i])
        for i in range(values.size):
            encoded[i] = formats.float32_to_float16(values[i])
            encoded_int[i] = formats.float32_to_float16_integer(values[i])
            rounded[i] = formats.round_to(values[i], formats.FLOAT16)

    bits = np.arange(1 << 16, dtype=np.uint64).astype(np.uint16)
    patterns = np.arange(0, 1 << 32, 4099, dtype=np.uint64).astype(np.uint32)
    edges = np.array([0x477FF000, 0x477FEFFF, 0x387FF000, 0x38800000, 0x387FFFFF, 0x33000000,
                      0x33000001, 0x7F800001, 0x7FBFFFFF, 0xFFC02000, 0x7FFFFFFF], np.uint32)
    values = np.concatenate([patterns, edges, edges | 0x80000000]).view(np.float32)
    if numba.config.DISABLE_JIT:
        values = values[::97]
    decoded, decoded_int = np.empty(bits.size, np.float32), np.empty(bits.size, np.float32)
    encoded, encoded_int = np.empty(values.size, np.uint16), np.empty(values.size, np.uint16)
    rounded = np.empty(values.size, np.float32)
    both(bits, values, decoded, decoded_int, encoded, encoded_int, rounded)
    assert np.array_equal(decoded.view(np.uint32), decoded_int.view(np.uint32))
    assert np.array_equal(encoded, encoded_int)
    trip = np.array([formats.float16_to_float32_integer(b) for b in encoded_int], np.float32) \
        if numba.config.DISABLE_JIT else formats.to_float32_array(encoded_int, "float16")
    assert np.array_equal(rounded.view(np.uint32), trip.view(np.uint32))
