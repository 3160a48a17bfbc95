"""Blockwise-quantized Adam state (npoptim.precision.quantized, quantized_adam).

Hand-derived: the 4-bit dynamic map value by value, codes of a few values in each codec (a
tie, a value below the map, packing, float8 bits). Against torchao 0.18 on CPU: AdamW8bit,
AdamW4bit, AdamWFp8 and Adam8bit over 20 steps, parameters, codes, scales and maps bit for
bit, on float32 params and (AdamW8bit, AdamW4bit, AdamWFp8) on bfloat16 params. torchao
compiles each step with ``torch.compile`` (a C++ build per shape on 2 cores), so the
cross-checks are few and small (4096 elements, the least torchao quantizes). torchao is
installed with ``pip install --no-deps torchao``; the tests skip without it
(``NPOPTIM_REQUIRE_TORCHAO=1`` in CI makes that a failure).
"""
import importlib
import os

import numpy as np
import pytest

from npoptim.kernels.parallel import parallel_threshold_set
from npoptim.precision import quantized as Q
from npoptim.precision.quantized_adam import (Adam8bit, AdamW4bit, AdamW8bit, AdamWFp8,
                                              MIN_QUANTIZED_SIZE)
from torchao_compare import torchao_optim

f32 = np.float32


# ------------------------------------------------------------------------ hand-derived
def test_four_bit_dynamic_map_by_hand():
    # exponents e = 0, 1, 2 hold 1, 2, 4 midpoints of linspace(0.1, 1, k + 1), times 10**(e-2)
    positive = [0.0055, 0.0325, 0.0775, 0.2125, 0.4375, 0.6625, 0.8875]
    expected = sorted([-x for x in positive] + [0.0] + positive + [1.0])
    np.testing.assert_allclose(Q.dynamic_map(True, 3, 4), expected, rtol=1e-6, atol=0)
    assert Q.dynamic_map(True, 3, 4).dtype == np.float32
    assert list(Q.linear_map_4bit()) == [k / 16 for k in range(1, 17)]  # exact: k/16


def test_eight_bit_dynamic_maps_ends():
    signed, unsigned = Q.dynamic_map(True), Q.dynamic_map(False)
    assert signed.size == unsigned.size == 256
    # the largest mean of linspace(0.1, 1, 65): 1 - 0.9 / 128, so no -1 in the signed map
    assert signed[0] == -signed[254] and abs(signed[0] + (1 - 0.9 / 128)) < 1e-7
    assert signed[127] == 0 and signed[255] == 1 and np.all(np.diff(signed) > 0)
    assert unsigned[0] == 0 and unsigned[255] == 1 and np.all(np.diff(unsigned) > 0)
    # the smallest positive unsigned value: 1e-6 * mean(0.1, 0.1 + 0.9/2) = 3.25e-7
    assert abs(unsigned[1] - 3.25e-7) < 1e-13
    with pytest.raises(ValueError, match="max_exponent_bits"):
        Q.dynamic_map(True, 8, 8)


def test_qmap4_codes_by_hand():
    # signed 4-bit map (above): 0.5 lies between 0.4375 (code 12) and 0.6625 (13), nearer 12;
    # -1 is below the map's -0.8875 (code 0); 0.03 is past the middle of 0.0055 (8) and
    # 0.0325 (9); 0 is code 7. Packed two per byte, the even element high.
    codes, scale = Q.quantize_blockwise(np.array([0.5, -1.0, 0.03, 0.0], f32), "qmap4", 4)
    assert list(scale) == [1.0] and list(codes) == [12 << 4 | 0, 9 << 4 | 7]
    # unsigned linear map k/16: 1.5/16 is exactly between codes 0 and 1, and a tie goes up
    codes, scale = Q.quantize_blockwise(np.array([0.375, 4.0], f32), "qmap4", 2, signed=False)
    assert list(scale) == [4.0] and list(codes) == [1 << 4 | 15]
    back = Q.dequantize_blockwise(codes, scale, "qmap4", 2, signed=False)
    assert list(back) == [0.5, 4.0]  # 2/16 * 4, 16/16 * 4


def test_qmap8_and_fp8_codes_by_hand():
    x = np.array([-2.0, 2.0, 0.0, 1.0], f32)  # scale 2: normalised -1, 1, 0, 0.5
    codes, scale = Q.quantize_blockwise(x, "qmap8", 4)
    signed = Q.dynamic_map(True)
    assert list(scale) == [2.0] and list(codes[:3]) == [0, 255, 127]
    assert abs(signed[codes[3]] - 0.5) == np.min(np.abs(signed - 0.5))
    # an all-zero block gets the smallest scale, 1e-12, and every code is 0's
    codes, scale = Q.quantize_blockwise(np.zeros(4, f32), "qmap8", 4)
    assert scale[0] == f32(1e-12) and list(codes) == [127] * 4
    # fp8: scale = 896 / 448 = 2; 448 = 0 1111 110, 0.5 = 0 0110 000; -1.65 rounds to -1.625
    # = 1 0111 101; 2**-9 (the smallest subnormal) = 0 0000 001
    codes, scale = Q.quantize_blockwise(np.array([896.0, 1.0, -3.3, 2.0 ** -8], f32), "fp8", 4)
    assert list(scale) == [2.0] and list(codes) == [0x7E, 0x30, 0xBD, 0x01]
    assert list(Q.dequantize_blockwise(codes, scale, "fp8", 4)) == [896.0, 1.0, -3.25, 2.0 ** -8]


def test_e4m3_conversions_against_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    e4m3 = np.dtype(ml_dtypes.float8_e4m3fn)
    every = np.arange(256, dtype=np.uint8)
    values = every.view(e4m3).astype(np.float32)
    ours = np.array([Q.e4m3_to_float32(b) for b in every], np.float32)
    assert np.array_equal(ours, values, equal_nan=True)
    finite = np.sort(values[np.isfinite(values)])
    rng = np.random.default_rng(0)
    x = np.concatenate([finite, (finite[:-1] + finite[1:]) / 2,  # every tie
                        (rng.standard_normal(3000) * 10.0 ** rng.uniform(-4, 2.6, 3000))
                        .astype(np.float32)])
    x = x[np.abs(x) <= 464]  # beyond, ml_dtypes gives NaN where torch saturates
    assert np.array_equal(np.array([Q.float32_to_e4m3(v) for v in x], np.uint8),
                          x.astype(e4m3).view(np.uint8))
    # torch 2.13's CPU conversion saturates: 470, 1e6 and -inf become +-448; NaN is 0x7F
    saturated = [Q.float32_to_e4m3(f32(v)) for v in (470.0, 1e6, -np.inf, np.nan)]
    assert saturated == [0x7E, 0x7E, 0xFE, 0x7F]


def test_quantize_bad_input_raises():
    with pytest.raises(ValueError, match="multiple of block_size"):
        Q.quantize_blockwise(np.zeros(300, f32))
    with pytest.raises(TypeError, match="float32"):
        Q.quantize_blockwise(np.zeros(256))
    with pytest.raises(ValueError, match="codec"):
        Q.quantize_blockwise(np.zeros(256, f32), "int8")
    with pytest.raises(ValueError, match="sorted"):
        Q.quantize_blockwise(np.zeros(256, f32), qmap=Q.dynamic_map(True)[::-1].copy())
    with pytest.raises(ValueError, match="do not fit"):
        Q.dequantize_blockwise(np.zeros(10, np.uint8), np.ones(1, f32))


# -------------------------------------------------------------------------- optimizers
def _problem(n, steps, seed=0):
    rng = np.random.default_rng(seed)
    p0 = rng.standard_normal(n).astype(np.float32)
    grads = [(rng.standard_normal(n) * np.exp(rng.uniform(-6, 1, n))).astype(np.float32)
             for _ in range(steps)]
    return p0, grads


def test_small_params_keep_float32_state_and_match_the_float32_rule():
    p0, grads = _problem(MIN_QUANTIZED_SIZE - 256, 3)
    p = p0.copy()
    opt = AdamW8bit([p], lr=1e-2)
    for g in grads:
        opt.step([g])
    assert sorted(opt.state[0]) == ["exp_avg", "exp_avg_sq", "step"]
    assert opt.state[0]["exp_avg"].dtype == np.float32 and not np.array_equal(p, p0)
    assert not AdamW8bit([np.zeros(4096 + 100, f32)]).quantized(np.zeros(4196, f32))


@pytest.mark.parametrize("make,n", [(lambda p: AdamW4bit([p]), 4096 * 2),
                                    (lambda p: _bnb().BnbAdam8bit([p]), 4096 * 2 + 100)],
                         ids=["torchao-4bit", "bitsandbytes"])
def test_same_result_at_any_thread_count(make, n):
    p0, grads = _problem(n, 4)
    results = []
    for threshold in (1, 1 << 40):  # every block on the thread pool, or all on this thread
        p = p0.copy()
        opt = make(p)
        with parallel_threshold_set(threshold):
            for g in grads:
                opt.step([g])
        results.append([p] + [opt.state[0][name] for name in sorted(opt.state[0])
                              if name != "step"])
    for a, b in zip(*results):
        assert np.array_equal(a, b)


def _bnb():
    from npoptim.precision import bnb_adam
    return bnb_adam


@pytest.mark.parametrize("cls", [AdamW8bit, AdamW4bit, AdamWFp8])
def test_state_dict_round_trip_without_pickle(tmp_path, cls):
    p0, grads = _problem(4096, 10)
    p = p0.copy()
    opt = cls([p], lr=1e-2)
    for g in grads[:5]:
        opt.step([g])
    sd = opt.state_dict()
    arrays = {name: value for name, value in sd["state"][0].items()}
    np.savez(tmp_path / "state.npz", **arrays)
    loaded = dict(np.load(tmp_path / "state.npz", allow_pickle=False))
    q = p.copy()
    other = cls([q], lr=1e-2)
    other.load_state_dict({"state": {0: loaded}, "param_groups": sd["param_groups"]})
    for g in grads[5:]:
        opt.step([g])
        other.step([g])
    assert np.array_equal(p, q)
    for name, value in opt.state[0].items():
        assert np.array_equal(value, other.state[0][name]), name


def test_bad_input_raises_before_anything_changes():
    p0, grads = _problem(4096, 2)
    p, small = p0.copy(), np.ones(10, f32)
    opt = AdamW8bit([p, small])
    opt.step([grads[0], np.ones(10, f32)])
    before = (p.copy(), {k: np.copy(v) for k, v in opt.state[0].items()})

    def unchanged():
        assert np.array_equal(p, before[0])
        for k, v in before[1].items():
            assert np.array_equal(opt.state[0][k], v), k

    with pytest.raises(ValueError, match="dtype"):
        opt.step([grads[1], np.ones(10)])  # a float64 grad for the second param
    unchanged()
    opt.state[1]["exp_avg"] = opt.state[1]["exp_avg"].astype(np.float64)
    with pytest.raises(ValueError, match=r"state\[1\]\['exp_avg'\]"):
        opt.step([grads[1], np.ones(10, f32)])
    unchanged()
    opt.state[1]["exp_avg"] = opt.state[1]["exp_avg"].astype(np.float32)
    sd = opt.state_dict()
    sd["state"][0]["exp_avg.scale"] = np.zeros(3, f32)
    with pytest.raises(ValueError, match=r"exp_avg.scale"):
        opt.load_state_dict(sd)
    unchanged()
    sd = opt.state_dict()
    del sd["state"][0]["exp_avg.qmap"]
    with pytest.raises(ValueError, match="expects"):
        opt.load_state_dict(sd)
    unchanged()
    opt.param_groups[0]["amsgrad"] = True  # the state has no max_exp_avg_sq
    with pytest.raises(ValueError, match="max_exp_avg_sq"):
        opt.step([grads[1], None])
    unchanged()
    for flag in ("yes", 1, 1.0):   # 1 == True, but not a bool
        opt.param_groups[0]["amsgrad"] = flag
        with pytest.raises(ValueError, match="amsgrad must be"):
            opt.step([grads[1], None])
        unchanged()
    with pytest.raises(ValueError, match="bf16_stochastic_round must be"):
        AdamW8bit([np.zeros(4096, f32)], bf16_stochastic_round=1)
    opt.param_groups[0]["amsgrad"] = False
    with pytest.raises(TypeError, match="float32"):
        AdamW8bit([np.zeros(4096)])
    with pytest.raises(ValueError, match="block_size"):
        AdamW4bit([np.zeros(4096, f32)], block_size=127)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        AdamWFp8([np.zeros(4096, f32)], lr=-1)


# ---------------------------------------------------------------------- against torchao
def _torchao_optim():
    return torchao_optim()


CROSS_CHECKS = [("AdamW8bit", AdamW8bit, dict(lr=1e-2, weight_decay=0.1)),
                ("AdamW4bit", AdamW4bit, dict(lr=1e-2, weight_decay=0.1)),
                ("AdamWFp8", AdamWFp8, dict(lr=1e-2, weight_decay=0.1)),
                # L2 decay, and beta1 < 0.5: lerp's second form
                ("Adam8bit", Adam8bit, dict(lr=1e-3, betas=(0.3, 0.99), weight_decay=0.05))]


@pytest.mark.needs("torch", "torchao")
@pytest.mark.parametrize("name,cls,options", CROSS_CHECKS, ids=[c[0] for c in CROSS_CHECKS])
def test_matches_torchao_bit_for_bit(name, cls, options):
    torchao_optim = _torchao_optim()
    import torch
    shape, steps = (16, 256), 20
    p0, grads = _problem(4096, steps, seed=len(name))
    small0, small_grads = _problem(100, steps, seed=1)  # float32 state: torchao's float path
    theirs = [torch.from_numpy(p0.reshape(shape).copy()), torch.from_numpy(small0.copy())]
    ours = [p0.reshape(shape).copy(), small0.copy()]
    if name != "AdamW8bit":  # one small parameter is enough (one more C++ build)
        theirs, ours = theirs[:1], ours[:1]
    ao = getattr(torchao_optim, name)(theirs, **options)
    opt = cls(ours, **options)
    for k, (g, small_g) in enumerate(zip(grads, small_grads)):
        gs = [g.reshape(shape), small_g][:len(ours)]
        for t, gt in zip(theirs, gs):
            t.grad = torch.from_numpy(gt)
        ao.step()
        opt.step(gs)
        for mine, t in zip(ours, theirs):
            assert np.array_equal(mine, t.numpy()), f"step {k + 1}"
        _assert_torchao_states_equal(opt.state[0], ao.state[theirs[0]], k + 1)
        if len(ours) > 1:
            for moment in ("exp_avg", "exp_avg_sq"):
                assert np.array_equal(opt.state[1][moment], ao.state[theirs[1]][moment].numpy())


def _assert_torchao_states_equal(ours, theirs, step):
    """A quantized parameter's moments, npoptim's against torchao's: codes (float8 as their
    ``uint8`` bits), scales and, where the codec has one, maps."""
    import torch
    for moment in ("exp_avg", "exp_avg_sq"):
        state = theirs[moment]
        codes = state.codes
        if codes.dtype == torch.float8_e4m3fn:
            codes = codes.view(torch.uint8)
        assert np.array_equal(ours[f"{moment}.codes"], codes.numpy()), (step, moment)
        assert np.array_equal(ours[f"{moment}.scale"], state.scale.numpy()), (step, moment)
        assert hasattr(state, "qmap") == (f"{moment}.qmap" in ours), (step, moment)
        if hasattr(state, "qmap"):
            assert np.array_equal(ours[f"{moment}.qmap"], state.qmap.numpy()), (step, moment)


# ------------------------------------------------------------------- bitsandbytes (CPU)
def test_bnb_table_by_hand():
    # 0 falls in bin (0 + 1) * 0.5 * 65535 + 0.5 -> 32768, whose centre is -1 + 2 * 32768 /
    # 65535 = 1.526e-5: the unsigned map's codes 0..7 (0 to 1.5625e-5) all lie within it and
    # it holds code 7; in the signed map it holds code 131, not 0's 127
    lut = Q.bnb_lut(Q.dynamic_map(False))
    assert lut.size == 65536 and Q.bnb_lut_index(f32(0.0)) == 32768 and lut[32768] == 7
    assert Q.bnb_lut_index(f32(1.0)) == 65535 and lut[65535] == 255
    assert Q.bnb_lut_index(f32(-3.0)) == 0 and Q.bnb_lut_index(f32(2.0)) == 65535  # clamped
    signed = Q.dynamic_map(True)
    lut = Q.bnb_lut(signed)
    centre = f32(-1) + f32(2 * 32768) / f32(65535)
    assert lut[0] == 0 and lut[65535] == 255
    assert lut[32768] == np.argmin(np.abs(signed - centre)) == 131
    codes, absmax = np.zeros(4, np.uint8), np.zeros(1, f32)
    Q.bnb_encode_block(np.array([0.0, -2.0, 2.0, 1.0], f32), codes, 0, 4, lut, absmax, 0)
    assert absmax[0] == 2.0 and list(codes[:3]) == [131, 0, 255]
    assert abs(signed[codes[3]] - 0.5) == np.min(np.abs(signed - 0.5))
    Q.bnb_encode_block(np.zeros(4, f32), codes, 0, 4, lut, absmax, 0)
    assert absmax[0] == 0 and list(codes) == [0] * 4  # an all-zero block: no floor


def _bitsandbytes():
    if os.environ.get("NPOPTIM_REQUIRE_BITSANDBYTES") == "1":
        return importlib.import_module("bitsandbytes")
    return pytest.importorskip("bitsandbytes")


@pytest.mark.needs("torch", "bitsandbytes")
@pytest.mark.parametrize("n", [4096 + 96, 1000], ids=["8-bit, short last block", "32-bit"])
def test_matches_bitsandbytes_cpu(n):
    bnb = _bitsandbytes()
    import torch
    from npoptim.precision.bnb_adam import BnbAdamW8bit
    p0, grads = _problem(n, 20, seed=n)
    theirs = torch.from_numpy(p0.copy())
    ref = bnb.optim.AdamW8bit([theirs], lr=1e-2, weight_decay=0.1)
    ours = p0.copy()
    opt = BnbAdamW8bit([ours], lr=1e-2, weight_decay=0.1)
    names = (["state1", "state2", "qmap1", "qmap2", "absmax1", "absmax2"] if n >= 4096
             else ["state1", "state2"])
    exact = []
    for k, g in enumerate(grads):
        theirs.grad = torch.from_numpy(g.copy())
        ref.step()
        opt.step([g])
        # the moments never read the parameter: every code, absmax and map bit for bit
        for name in names:
            assert np.array_equal(opt.state[0][name], ref.state[theirs][name].numpy()), name
        assert opt.state[0]["step"] == ref.state[theirs]["step"]
        # the parameter: torch's vectorized sqrt is not always correctly rounded
        target = theirs.numpy()
        spacing = np.spacing(np.maximum(np.abs(target), f32(1e-2)))
        assert np.max(np.abs(ours - target) / spacing) <= 8, f"step {k + 1}"
        exact.append(np.mean(ours == target))
    assert min(exact) > 0.9
    print(f"\nbitsandbytes n={n}: params bit-equal in {min(exact):.1%} of elements at worst")


def test_bnb_state_dict_round_trip_and_bad_input():
    from npoptim.precision.bnb_adam import BnbAdam8bit
    p0, grads = _problem(4096 + 10, 6)
    p = p0.copy()
    opt = BnbAdam8bit([p], lr=1e-2)
    for g in grads[:3]:
        opt.step([g])
    sd = opt.state_dict()
    assert sorted(sd["state"][0]) == ["absmax1", "absmax2", "qmap1", "qmap2", "state1",
                                      "state2", "step"]
    q = p.copy()
    other = BnbAdam8bit([q], lr=1e-2)
    other.load_state_dict(sd)
    for g in grads[3:]:
        opt.step([g])
        other.step([g])
    assert np.array_equal(p, q)
    before = p.copy()
    bad = opt.state_dict()
    bad["state"][0]["absmax1"] = np.zeros(3, f32)
    with pytest.raises(ValueError, match="absmax1"):
        opt.load_state_dict(bad)
    with pytest.raises(ValueError, match="dtype"):
        opt.step([grads[0].astype(np.float64)])
    assert np.array_equal(p, before)
    with pytest.raises(ValueError, match="percentile_clipping"):
        BnbAdam8bit([np.zeros(10, f32)], percentile_clipping=5)
    with pytest.raises(ValueError, match="weight_decay"):
        BnbAdam8bit([np.zeros(10, f32)], weight_decay=-1)


@pytest.mark.needs("torch", "torchao")
def test_codecs_match_torchaos_eager_functions():
    """torchao's quantizers called directly (eagerly: no C++ build) on values with ties,
    zeros, signs, a NaN and an infinity: our codes and scales are theirs."""
    _torchao_optim()
    import torch
    from torchao.optim import quant_utils, subclass_fp8
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(4096) * np.exp(rng.uniform(-9, 2, 4096))).astype(np.float32)
    x[:256] = np.round(x[:256] * 16) / 16  # a block of values on the 4-bit grid: ties
    x[256:512] = 0.0
    x[600], x[900] = np.nan, np.inf
    for codec, block, signed in [("qmap8", 256, True), ("qmap8", 256, False),
                                 ("qmap4", 128, True), ("qmap4", 128, False)]:
        values = x if signed else np.abs(x)
        codes, scale = Q.quantize_blockwise(values, codec, block, signed=signed)
        scaled, their_scale = quant_utils.scale_tensor(torch.from_numpy(values.copy()), block)
        qmap = torch.from_numpy(Q.qmap_for(codec, signed).copy())
        quantize = (quant_utils.quantize_8bit_with_qmap if codec == "qmap8"
                    else quant_utils.quantize_4bit_with_qmap)
        theirs = quantize(scaled, qmap).numpy()
        if codec == "qmap4":
            theirs = (theirs[::2] << 4) | theirs[1::2]
        assert np.array_equal(codes, theirs), codec
        assert np.array_equal(scale, their_scale.numpy(), equal_nan=True)
    codes, scale = Q.quantize_blockwise(x, "fp8", 256)
    their_codes, their_scale = subclass_fp8.quantize_fp8(torch.from_numpy(x.copy()), 256)
    assert np.array_equal(codes, their_codes.view(torch.uint8).numpy())
    assert np.array_equal(scale, their_scale.numpy(), equal_nan=True)


BF16_CROSS_CHECKS = [("AdamW8bit", AdamW8bit), ("AdamW4bit", AdamW4bit), ("AdamWFp8", AdamWFp8)]


@pytest.mark.needs("torch", "torchao")
@pytest.mark.parametrize("name,cls", BF16_CROSS_CHECKS, ids=[c[0] for c in BF16_CROSS_CHECKS])
def test_bfloat16_params_match_torchao_bit_for_bit(name, cls):
    """bfloat16 params (and grads) with 8-bit, 4-bit and float8 state, rounded to nearest
    (``bf16_stochastic_round=False``), over 20 steps: params, codes, scales and maps; for
    8-bit also a small parameter with torchao's bfloat16 moments (one C++ build per shape:
    the other forms take the 4096-element parameter only)."""
    torchao_optim = _torchao_optim()
    ml_dtypes = pytest.importorskip("ml_dtypes")
    import torch
    bf16 = np.dtype(ml_dtypes.bfloat16)

    def as_torch(a):
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)

    def as_numpy(t):
        return t.view(torch.int16).numpy().view(bf16)

    p0, grads = _problem(4096, 20, seed=11)
    s0, small_grads = _problem(100, 20, seed=12)
    ours = [p0.astype(bf16), s0.astype(bf16)][:2 if name == "AdamW8bit" else 1]
    theirs = [as_torch(a) for a in ours]
    options = dict(lr=1e-2, weight_decay=0.1, bf16_stochastic_round=False)
    ao = getattr(torchao_optim, name)(theirs, **options)
    opt = cls(ours, **options)
    for k, (g, h) in enumerate(zip(grads, small_grads)):
        gs = [g.astype(bf16), h.astype(bf16)][:len(ours)]
        for t, gt in zip(theirs, gs):
            t.grad = as_torch(gt)
        ao.step()
        opt.step(gs)
        for mine, t in zip(ours, theirs):
            assert np.array_equal(mine.view(np.uint16), as_numpy(t).view(np.uint16)), k + 1
        _assert_torchao_states_equal(opt.state[0], ao.state[theirs[0]], k + 1)
        if len(ours) > 1:
            for moment in ("exp_avg", "exp_avg_sq"):
                assert np.array_equal(opt.state[1][moment].view(np.uint16),
                                      as_numpy(ao.state[theirs[1]][moment]).view(np.uint16))
    if len(ours) > 1:
        assert opt.state[1]["exp_avg"].dtype == bf16
    assert np.mean(ours[0] != p0.astype(bf16)) > 0.5  # the bfloat16 params moved


def test_bfloat16_param_with_float32_grad_raises_before_anything_changes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = np.dtype(ml_dtypes.bfloat16)
    p0, grads = _problem(4096, 2)
    p = p0.astype(bf16)
    opt = AdamW8bit([p])
    opt.step([grads[0].astype(bf16)])
    before = p.copy(), opt.state[0]["exp_avg.codes"].copy(), opt.state[0]["step"]
    with pytest.raises(ValueError, match="dtype"):
        opt.step([grads[1]])  # float32
    assert np.array_equal(p.view(np.uint16), before[0].view(np.uint16))
    assert np.array_equal(opt.state[0]["exp_avg.codes"], before[1])
    assert opt.state[0]["step"] == before[2]
    with pytest.raises(ValueError, match="bf16_stochastic_round"):
        AdamW8bit([p], bf16_stochastic_round=1.5)
    with pytest.raises(ValueError, match="seed"):
        AdamW8bit([p], bf16_stochastic_round=True, seed=-1)


# ------------------------------------------------------------ amsgrad, stochastic rounding
@pytest.mark.needs("torch", "torchao")
def test_amsgrad_matches_torchao_bit_for_bit():
    """torchao's AdamW8bit(amsgrad=True): ``max_exp_avg_sq`` quantized with the unsigned map
    (a 4096-element parameter) or float32 (a small one), over 20 steps. torchao 0.18 lacks
    ``aten.maximum`` on its quantized state (tests/torchao_compare.py): the test lends it
    one."""
    torchao_optim = _torchao_optim()
    import torch
    from torchao_compare import quantized_maximum
    shape, steps = (16, 256), 20
    p0, grads = _problem(4096, steps, seed=5)
    small0, small_grads = _problem(100, steps, seed=6)
    theirs = [torch.from_numpy(p0.reshape(shape).copy()), torch.from_numpy(small0.copy())]
    ours = [p0.reshape(shape).copy(), small0.copy()]
    options = dict(lr=1e-2, weight_decay=0.1, amsgrad=True)
    ao = torchao_optim.AdamW8bit(theirs, **options)
    opt = AdamW8bit(ours, **options)
    for k, (g, small_g) in enumerate(zip(grads, small_grads)):
        for t, gt in zip(theirs, (g.reshape(shape), small_g)):
            t.grad = torch.from_numpy(gt)
        with quantized_maximum():
            ao.step()
        opt.step([g.reshape(shape), small_g])
        for mine, t in zip(ours, theirs):
            assert np.array_equal(mine, t.numpy()), f"step {k + 1}"
        for moment in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            state = ao.state[theirs[0]][moment]
            for attr in ("codes", "scale", "qmap"):
                assert np.array_equal(opt.state[0][f"{moment}.{attr}"],
                                      getattr(state, attr).numpy()), (k + 1, moment, attr)
            assert np.array_equal(opt.state[1][moment], ao.state[theirs[1]][moment].numpy())
    # the maximum really is another state than exp_avg_sq (the gradients shrink and grow)
    state = opt.state[0]
    assert np.mean(state["max_exp_avg_sq.codes"] != state["exp_avg_sq.codes"]) > 0.05
    assert np.all(opt.state[1]["max_exp_avg_sq"] >= opt.state[1]["exp_avg_sq"])


def test_bf16_stochastic_rounding_is_the_documented_stream_at_any_thread_count():
    """bfloat16 params with ``bf16_stochastic_round=True``: the first step's parameter is
    ``stochastic_round_array`` (seed, parameter index, step 1) of the float32 step, element for
    element; every step is the same at any thread count, and another seed draws otherwise."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from npoptim.precision.stochastic import stochastic_round_array
    bf16 = np.dtype(ml_dtypes.bfloat16)
    p0, grads = _problem(4096 * 2, 4, seed=21)
    small0, small_grads = _problem(96, 4, seed=22)
    grads = [(g.astype(bf16), h.astype(bf16)) for g, h in zip(grads, small_grads)]

    def run(threshold, seed, steps=4):
        params = [p0.astype(bf16), small0.astype(bf16)]
        opt = AdamW4bit(params, lr=1e-3, bf16_stochastic_round=True, seed=seed, amsgrad=True)
        with parallel_threshold_set(threshold):
            for gs in grads[:steps]:
                opt.step(list(gs))
        return [p.view(np.uint16).copy() for p in params]

    a, b, other = run(1, 7), run(1 << 40, 7), run(1, 8)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0], other[0]) and not np.array_equal(a[1], other[1])
    for index, (start, g) in enumerate([(p0, grads[0][0]), (small0, grads[0][1])]):
        wide = [start.astype(bf16).astype(f32)]
        AdamW4bit(wide, lr=1e-3, amsgrad=True).step([g.astype(f32)])  # float32 params
        first = run(1, 7, steps=1)[index]
        assert np.array_equal(first, stochastic_round_array(wide[0], 7, index, 1))
        assert np.mean(first != wide[0].astype(bf16).view(np.uint16)) > 0.05  # not nearest


# --------------------------------------------------------- bitsandbytes on bfloat16 params
@pytest.mark.needs("torch", "bitsandbytes")
@pytest.mark.parametrize("n", [4096 + 96, 1000], ids=["8-bit", "32-bit"])
def test_bfloat16_params_match_bitsandbytes_cpu(n):
    """bitsandbytes on bfloat16 params: ``p.float()``, ``g.float()``, the float32 step, one
    rounding to nearest (``p.copy_``). Codes and absmax (8-bit) or the float32 moments
    (32-bit) bit for bit; the params within one bfloat16 ulp (torch's vectorized ``sqrt``,
    as for float32 params, moves a few float32 results across a rounding midpoint)."""
    bnb = _bitsandbytes()
    ml_dtypes = pytest.importorskip("ml_dtypes")
    import torch
    from npoptim.precision.bnb_adam import BnbAdamW8bit
    bf16 = np.dtype(ml_dtypes.bfloat16)
    p0, grads = _problem(n, 20, seed=n + 1)
    ours = p0.astype(bf16)
    theirs = torch.from_numpy(ours.view(np.int16).copy()).view(torch.bfloat16)
    ref = bnb.optim.AdamW8bit([theirs], lr=1e-2, weight_decay=0.1)
    opt = BnbAdamW8bit([ours], lr=1e-2, weight_decay=0.1)
    names = ["state1", "state2"] + (["absmax1", "absmax2"] if n >= 4096 else [])
    exact = []
    for k, g in enumerate(grads):
        g = g.astype(bf16)
        theirs.grad = torch.from_numpy(g.view(np.int16).copy()).view(torch.bfloat16)
        ref.step()
        opt.step([g])
        for name in names:
            assert np.array_equal(opt.state[0][name], ref.state[theirs][name].numpy()), name
        mine = ours.view(np.int16).astype(np.int64)
        target = theirs.view(torch.int16).numpy().astype(np.int64)
        assert np.max(np.abs(mine - target)) <= 1, f"step {k + 1}"  # same sign: bits are ulps
        exact.append(np.mean(mine == target))
    assert min(exact) > 0.999 and np.mean(ours != p0.astype(bf16)) > 0.5
    print(f"\nbitsandbytes bfloat16 n={n}: params bit-equal in {min(exact):.2%} of elements "
          f"at worst, {np.mean(exact):.3%} on average")


def test_bnb_bfloat16_bad_input_raises_before_anything_changes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from npoptim.precision.bnb_adam import BnbAdamW8bit
    bf16 = np.dtype(ml_dtypes.bfloat16)
    p0, grads = _problem(4096 + 96, 2, seed=3)
    p, small = p0.astype(bf16), np.ones(64, f32).astype(bf16)
    opt = BnbAdamW8bit([p, small])
    opt.step([grads[0].astype(bf16), np.ones(64, bf16)])
    before = p.view(np.uint16).copy(), small.view(np.uint16).copy(), opt.state_dict()
    with pytest.raises(ValueError, match="dtype"):
        opt.step([grads[1].astype(bf16), np.ones(64, f32)])  # float32 grad, bfloat16 param
    opt.param_groups[0]["amsgrad"] = True
    with pytest.raises(ValueError, match="amsgrad"):
        opt.step([grads[1].astype(bf16), np.ones(64, bf16)])
    assert np.array_equal(p.view(np.uint16), before[0])
    assert np.array_equal(small.view(np.uint16), before[1])
    for index, entry in before[2]["state"].items():
        for name, value in entry.items():
            assert np.array_equal(opt.state[index][name], value), name
    with pytest.raises(ValueError, match="amsgrad"):
        BnbAdamW8bit([np.zeros(10, f32)], amsgrad=True)
