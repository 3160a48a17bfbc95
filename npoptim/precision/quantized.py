r"""Blockwise-quantized optimizer state: the code maps, the formats bit by bit, the codecs.

An optimizer state :math:`x` (a flat float32 array) is cut into blocks of ``block_size``
consecutive elements; each block keeps one float32 ``scale`` and one small code per element.
A code stands for a value of a fixed table (a "quantization map", ``qmap``) or a float8 value;
the element's value is that value times the block's scale. The codecs below are torchao
0.18's (``torchao.optim``: ``OptimState8bit``, ``OptimState4bit``, ``OptimStateFp8``):

* ``"qmap8"`` (AdamW8bit, block 256): ``codes`` is a ``uint8`` per element, the index into a
  256-entry float32 ``qmap`` (:func:`dynamic_map`, signed for ``exp_avg``, unsigned for
  ``exp_avg_sq``). ``scale = max(max|x|, 1e-12)`` per block; value ``qmap[code] * scale``.
* ``"qmap4"`` (AdamW4bit, block 128): codes are 4-bit indices into a 16-entry ``qmap``
  (signed: ``dynamic_map(True, 3, 4)``; unsigned: the linear map
  :math:`\{1/16, 2/16, \dots, 1\}`, which has no zero), two per byte: byte ``j`` of ``codes``
  is ``code[2j] << 4 | code[2j+1]`` (the even element in the high nibble). Scale as qmap8.
* ``"fp8"`` (AdamWFp8, block 256): ``codes`` holds float8 e4m3fn bits (1 sign bit, 4 exponent
  bits of bias 7, 3 mantissa bits; no infinities; ``0x7F``/``0xFF`` are NaN; largest finite
  448; subnormals :math:`m \cdot 2^{-9}`). ``scale = max(max|x|, 1e-12) / 448`` (a float32
  division), code ``e4m3(x / scale)``, value ``float(code) * scale``.

Quantizing (torchao's ``scale_tensor`` then ``quantize_*bit_with_qmap``), all in float32:
``y = x / scale`` (a division, per element), then a branchless binary search for the largest
``c`` with ``y >= qmap[c]`` (``c = 0`` when there is none: a NaN gets code 0), then rounding
up to ``c + 1`` when ``y - qmap[c] >= (qmap[c+1] - qmap[c]) * 0.5`` (a tie goes up). The
maximum propagates NaN (a block holding a NaN gets a NaN scale). Float to e4m3fn rounds to
nearest, ties to even, with gradual underflow, as torch 2.13's CPU conversion does: what would
round past 448 (``|y| >= 464``, infinities too) saturates to 448, a NaN becomes ``0x7F``, sign
kept (``ml_dtypes`` turns ``|y| > 464`` into NaN instead; from a finite block ``|y| <= 448``).

The dynamic map (:func:`dynamic_map`, Dettmers' "dynamic tree" type as bitsandbytes' and
torchao's ``create_dynamic_map`` build it): for each exponent :math:`e = 0 \dots E-1`
(``E = max_exponent_bits``), :math:`k = 2^{e + B - 1 - E}` (signed) or
:math:`2^{e + B - E}` (unsigned) midpoints of ``linspace(0.1, 1, k + 1)`` scaled by
:math:`10^{e - E + 1}` (and their negatives when signed), then 0 and 1; sorted. All in float32
as torch's CPU kernels compute it: ``linspace`` element ``i`` is ``fma(step, i, start)`` for
``i < n/2`` and ``fma(-step, n - 1 - i, end)`` after, ``step = (end - start) / (n - 1)``
(torch's CPU ``linspace``, which ATen's compiler contracts to fused multiply-adds); midpoints
``(b[i] + b[i+1]) / 2``; then ``float32(10**(e-E+1)) * mid``. The 8-bit signed map runs from
-0.99297 to 1 (no -1), the unsigned one from 0 to 1.

bitsandbytes 0.50's CPU quantization (:func:`bnb_lut`, :func:`bnb_encode_block`, used by
:mod:`npoptim.precision.bnb_adam`) differs from torchao's: the absmax has no floor (an
all-zero block keeps absmax 0 and code 0), ``y = x * (1/absmax)`` (a reciprocal), and the code
comes from a 65536-bin table over [-1, 1] rather than a search, so values closer together than
a bin (2/65535) share the code of the bin's centre: in the unsigned map every
``0 <= y < 3.05e-5`` (codes 0 to 7) becomes code 7 (1.5625e-05), and in the signed map 0
becomes code 131 (the code nearest the bin's centre 1.53e-5), not 127 (0). bitsandbytes' CUDA
kernels search the map instead.
"""
from functools import lru_cache

import numpy as np

from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import fma
from npoptim.precision.formats import bits_float32, float32_bits

#: codec name -> code (the ``codec`` argument of the kernels)
QMAP8, QMAP4, FP8, BNB8 = 0, 1, 2, 3
CODECS = {"qmap8": QMAP8, "qmap4": QMAP4, "fp8": FP8}  # the array API's (torchao's) codecs
#: the largest finite float8 e4m3fn value
E4M3_MAX = 448.0
#: the smallest block scale of torchao's qmap codecs (``clip(1e-12)``)
MIN_SCALE = 1e-12


# ------------------------------------------------------------------------------ the maps
def _linspace32(start, end, steps):
    """torch's CPU ``torch.linspace(start, end, steps)`` in float32 (see the module docstring)."""
    start, end = np.float32(start), np.float32(end)
    step = np.float32((end - start) / np.float32(steps - 1))
    half = steps // 2
    return np.array([fma(step, np.float32(i), start) if i < half
                     else fma(-step, np.float32(steps - i - 1), end) for i in range(steps)],
                    np.float32)


@lru_cache(maxsize=None)
def _dynamic_map(signed, max_exponent_bits, total_bits):
    data = []
    non_sign_bits = total_bits - 1
    additional_items = 2 ** (non_sign_bits - max_exponent_bits) - 1
    scale = None
    for e in range(max_exponent_bits):
        items = 2 ** (e + non_sign_bits - max_exponent_bits + (0 if signed else 1)) + 1
        bounds = _linspace32(0.1, 1.0, items)
        means = (bounds[:-1] + bounds[1:]) / np.float32(2.0)
        scale = np.float32(10.0 ** (-(max_exponent_bits - 1) + e))
        data.append(scale * means)
        if signed:
            data.append(-scale * means)
    if additional_items > 0:  # as the libraries: at the last exponent's scale
        bounds = _linspace32(0.1, 1.0, additional_items + 1)
        means = (bounds[:-1] + bounds[1:]) / np.float32(2.0)
        data.append(scale * means)
        if signed:
            data.append(-scale * means)
    data.append(np.array([0.0, 1.0], np.float32))
    values = np.sort(np.concatenate(data))
    if values.size != 2 ** total_bits:
        raise ValueError(f"dynamic_map({signed}, {max_exponent_bits}, {total_bits}) has "
                         f"{values.size} values, not 2**{total_bits}")
    values.flags.writeable = False
    return values


def dynamic_map(signed=True, max_exponent_bits=7, total_bits=8):
    """The dynamic quantization map (float32, sorted, ``2**total_bits`` values, read-only) of
    bitsandbytes' and torchao's ``create_dynamic_map`` (see the module docstring)."""
    for name, value in (("max_exponent_bits", max_exponent_bits), ("total_bits", total_bits)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if max_exponent_bits >= total_bits:
        raise ValueError(f"max_exponent_bits ({max_exponent_bits}) must be below total_bits "
                         f"({total_bits})")
    return _dynamic_map(bool(signed), int(max_exponent_bits), int(total_bits))


@lru_cache(maxsize=None)
def linear_map_4bit():
    """torchao's unsigned 4-bit map ``linspace(0, 1, 17)[1:]``: 1/16, 2/16, ..., 1 (no zero)."""
    values = _linspace32(0.0, 1.0, 17)[1:].copy()
    values.flags.writeable = False
    return values


def qmap_for(codec, signed):
    """The map torchao gives a state of ``codec`` (None for fp8, which needs none)."""
    if codec == "qmap8":
        return dynamic_map(signed)
    if codec == "qmap4":
        return dynamic_map(True, 3, 4) if signed else linear_map_4bit()
    if codec == "fp8":
        return None
    raise ValueError(f"codec must be one of {', '.join(map(repr, CODECS))}, got {codec!r}")


# ------------------------------------------------------------------------------ float8 e4m3fn
@kernel
def e4m3_to_float32(bits):
    """The float32 value of float8 e4m3fn ``bits`` (exact; ``0x7F``/``0xFF`` are NaN)."""
    b = np.int64(bits)
    sign = (b & 0x80) << 24
    exponent = (b >> 3) & 0xF
    mantissa = b & 0x7
    if exponent == 0xF and mantissa == 0x7:
        return bits_float32(sign | 0x7FC00000)
    if exponent == 0:  # zero or subnormal: mantissa * 2**-9, exact in float32
        magnitude = np.float32(mantissa) * bits_float32(0x3B000000)
        return -magnitude if sign != 0 else magnitude
    return bits_float32(sign | ((exponent + 120) << 23) | (mantissa << 20))


@kernel
def float32_to_e4m3(x):
    """float32 ``x`` to float8 e4m3fn bits as torch 2.13's CPU conversion: nearest, ties to
    even, gradual underflow; a value that would round past 448 (from 464 on, infinities
    included) saturates to 448 with its sign; NaN becomes ``0x7F`` with its sign."""
    u = float32_bits(x)
    sign = (u >> 24) & 0x80
    a = u & 0x7FFFFFFF
    if a > 0x7F800000:
        return np.uint8(sign | 0x7F)
    if a >= 0x43E80000:  # 464.0
        return np.uint8(sign | 0x7E)
    if a < 0x3C800000:  # below 2**-6: a subnormal or zero
        # adding 2**14 puts the value's 2**-9 units in the low mantissa bits, float32's own
        # addition rounding them to nearest even; 2**14's bits are then subtracted
        shifted = bits_float32(a) + bits_float32(0x46800000)
        return np.uint8(sign | (float32_bits(shifted) - 0x46800000))
    odd = (a >> 20) & 1
    return np.uint8(sign | ((a - (120 << 23) + 0x7FFFF + odd) >> 20))


# ------------------------------------------------------------------------- element codecs
@kernel
def qmap_code(y, qmap):
    """The code of the normalised value ``y`` in the sorted ``qmap`` (16 or 256 values):
    torchao's branchless binary search, then rounding up from ``c`` to ``c + 1`` when
    ``y - qmap[c] >= (qmap[c+1] - qmap[c]) * 0.5``."""
    n = qmap.size
    code = 0
    step = n // 2
    while step >= 1:
        if y >= qmap[code + step]:
            code += step
        step //= 2
    up = min(code + 1, n - 1)
    down_value = qmap[code]
    if y - down_value >= (qmap[up] - down_value) * np.float32(0.5):
        code = up
    return code


@kernel
def load_code(codes, i, codec):
    """Element ``i``'s code (4-bit codes unpacked: the even element in the high nibble)."""
    if codec == QMAP4:
        byte = np.int64(codes[i >> 1])
        return (byte >> 4) if (i & 1) == 0 else (byte & 0xF)
    return np.int64(codes[i])


@kernel
def decode(codes, i, qmap, scale, block_size, codec):
    """The float32 value of element ``i``: ``qmap[code] * scale`` (``float(e4m3) * scale``)."""
    s = scale[i // block_size]
    code = load_code(codes, i, codec)
    if codec == FP8:
        return e4m3_to_float32(code) * s
    return qmap[code] * s


@kernel
def block_scale(values, count, codec):
    """The block's scale: ``max(max|values[:count]|, 1e-12)`` (NaN propagates), over 448
    for fp8."""
    peak = np.float32(0.0)
    for j in range(count):
        a = abs(values[j])
        if a > peak or a != a:
            peak = a
            if a != a:
                break
    if peak < np.float32(MIN_SCALE):
        peak = np.float32(MIN_SCALE)
    if codec == FP8:
        return peak / np.float32(E4M3_MAX)
    return peak


@kernel
def encode_block(values, codes, start, count, qmap, scale, block, codec):
    """Quantize the float32 ``values[:count]`` (elements ``start...`` of the state, block
    ``block``) into ``codes`` and ``scale[block]``."""
    s = block_scale(values, count, codec)
    scale[block] = s
    if codec == QMAP4:
        for j in range(0, count, 2):
            high = qmap_code(values[j] / s, qmap)
            low = qmap_code(values[j + 1] / s, qmap)
            codes[(start + j) >> 1] = np.uint8((high << 4) | low)
    elif codec == FP8:
        for j in range(count):
            codes[start + j] = float32_to_e4m3(values[j] / s)
    else:
        for j in range(count):
            codes[start + j] = np.uint8(qmap_code(values[j] / s, qmap))


@kernel
def _quantize_flat(values, codes, qmap, scale, block_size, codec):
    for b in range(scale.size):
        start = b * block_size
        encode_block(values[start:start + block_size], codes, start, block_size, qmap, scale,
                     b, codec)


@kernel
def _dequantize_flat(codes, qmap, scale, block_size, codec, out):
    for i in range(out.size):
        out[i] = decode(codes, i, qmap, scale, block_size, codec)


# ---------------------------------------------------------------------------- array API
def _check_codec(codec, block_size):
    if codec not in CODECS:
        raise ValueError(f"codec must be one of {', '.join(map(repr, CODECS))}, got {codec!r}")
    if (not isinstance(block_size, (int, np.integer)) or isinstance(block_size, bool)
            or block_size < 1 or (codec == "qmap4" and block_size % 2)):
        raise ValueError(f"block_size must be a positive int (even for qmap4), got "
                         f"{block_size!r}")


def _qmap_array(codec, qmap, signed):
    if codec == "fp8":
        return np.zeros(1, np.float32)  # unused: the kernels take an array
    qmap = qmap_for(codec, signed) if qmap is None else qmap
    qmap = np.asarray(qmap)
    size = 256 if codec == "qmap8" else 16
    if qmap.dtype != np.float32 or qmap.shape != (size,) or not np.all(qmap[:-1] <= qmap[1:]):
        raise ValueError(f"qmap must be a sorted float32 array of {size} values for {codec}")
    return np.ascontiguousarray(qmap)


def quantize_blockwise(values, codec="qmap8", block_size=256, signed=True, qmap=None):
    """``(codes, scale)`` of a float32 array quantized as torchao does (module docstring).

    ``values.size`` must be a multiple of ``block_size``; ``codes`` is flat (``uint8``; half
    the size for qmap4), ``scale`` has one float32 per block.
    """
    _check_codec(codec, block_size)
    values = np.asarray(values)
    if values.dtype != np.float32:
        raise TypeError(f"values must be float32, got {values.dtype}")
    if values.size == 0 or values.size % block_size:
        raise ValueError(f"values has {values.size} elements, not a positive multiple of "
                         f"block_size={block_size}")
    flat = np.ascontiguousarray(values).reshape(-1)
    qmap = _qmap_array(codec, qmap, signed)
    codes = np.zeros(flat.size // 2 if codec == "qmap4" else flat.size, np.uint8)
    scale = np.zeros(flat.size // block_size, np.float32)
    _quantize_flat(flat, codes, qmap, scale, block_size, CODECS[codec])
    return codes, scale


def dequantize_blockwise(codes, scale, codec="qmap8", block_size=256, signed=True, qmap=None):
    """The flat float32 values of ``(codes, scale)`` (the inverse map of
    :func:`quantize_blockwise`: ``qmap[code] * scale`` per element)."""
    _check_codec(codec, block_size)
    codes, scale = np.asarray(codes), np.asarray(scale)
    if codes.dtype != np.uint8 or scale.dtype != np.float32:
        raise TypeError(f"codes must be uint8 and scale float32, got {codes.dtype} and "
                        f"{scale.dtype}")
    size = scale.size * block_size
    if codes.size != (size // 2 if codec == "qmap4" else size):
        raise ValueError(f"{codes.size} codes do not fit {scale.size} blocks of {block_size}")
    qmap = _qmap_array(codec, qmap, signed)
    out = np.empty(size, np.float32)
    _dequantize_flat(np.ascontiguousarray(codes).reshape(-1), qmap,
                     np.ascontiguousarray(scale).reshape(-1), block_size, CODECS[codec], out)
    return out


# ------------------------------------------------------------------- bitsandbytes' CPU codec
#: bitsandbytes' CPU quantization table: 65536 bins over [-1, 1]
BNB_LUT_SIZE = 65536


def bnb_lut(qmap):
    r"""bitsandbytes 0.50's CPU lookup table for a sorted 256-value ``qmap`` (``uint8``, 65536
    entries): bin ``i`` stands for :math:`u_i = -1 + (2i)/65535` (float32) and holds the number
    of midpoints ``0.5 * (qmap[k] + qmap[k+1])`` below :math:`u_i`, the code nearest to
    :math:`u_i` (a tie to the lower code)."""
    qmap = np.asarray(qmap, np.float32)
    midpoints = (np.float32(0.5) * (qmap[:-1] + qmap[1:])).astype(np.float32)
    bins = np.arange(BNB_LUT_SIZE).astype(np.float32)
    centers = (np.float32(-1.0) + (np.float32(2.0) * bins) / np.float32(BNB_LUT_SIZE - 1))
    return np.searchsorted(midpoints, centers.astype(np.float32), side="left").astype(np.uint8)


@kernel
def bnb_lut_index(y):
    """The bin of the normalised ``y``: clamped to [-1, 1], ``(y + 1) * 0.5 * 65535 + 0.5``
    in float32, truncated."""
    if y < np.float32(-1.0):
        y = np.float32(-1.0)
    elif y > np.float32(1.0):
        y = np.float32(1.0)
    return np.int64((y + np.float32(1.0)) * np.float32(0.5) * np.float32(BNB_LUT_SIZE - 1)
                    + np.float32(0.5))


@kernel
def bnb_encode_block(values, codes, start, count, lut, absmax, block):
    """bitsandbytes' CPU ``quantize_blockwise`` of ``values[:count]``: ``absmax = max|x|`` (no
    floor), codes ``lut[bin(x * (1 / absmax))]`` (a multiplication by the float32 reciprocal);
    an all-zero block keeps code 0 and absmax 0."""
    peak = np.float32(0.0)
    for j in range(count):
        if peak < abs(values[j]):  # std::max: a NaN is passed over
            peak = abs(values[j])
    absmax[block] = peak
    if peak == np.float32(0.0):
        for j in range(count):
            codes[start + j] = 0
        return
    inverse = np.float32(1.0) / peak
    for j in range(count):
        codes[start + j] = lut[bnb_lut_index(values[j] * inverse)]


@kernel
def encode_state_block(values, state, start, count, block, codec):
    """Quantize ``values[:count]`` into the state ``(codes, scale, qmap, lut)``: bitsandbytes'
    table for ``BNB8``, torchao's search otherwise."""
    codes, scale, qmap, lut = state
    if codec == BNB8:
        bnb_encode_block(values, codes, start, count, lut, scale, block)
    else:
        encode_block(values, codes, start, count, qmap, scale, block, codec)
