r"""The 16-bit storage formats, bfloat16 and float16, their conversions to and from float32, and
each one's largest finite value (``MAX_FINITE``: torch refuses to convert a larger finite
scalar to the format, and so do the 16-bit optimizers).

Numba has no bfloat16 or float16 arithmetic, so 16-bit arrays are read and written through
``uint16`` views of their bits, and the kernels compute in float32 with the conversions below
(written out with integer operations, so they are the same compiled and under
``NUMBA_DISABLE_JIT=1``). The roundings (float32 to bfloat16 or float16, :func:`round_to`) have
no branch but the format's: the special cases -- NaN, overflow, subnormals -- are computed
alongside and selected arithmetically, so that the loops calling them vectorize.

bfloat16 (code 0): 1 sign bit, 8 exponent bits, 7 mantissa bits, the top half of a float32.

* to float32: exact, ``bits << 16``.
* from float32: :mod:`npoptim.kernels.bfloat16`'s rounding (torch's ``c10::BFloat16``): to
  nearest, ties to even, ``(u + 0x7FFF + ((u >> 16) & 1)) >> 16`` of the float32 bits ``u``;
  any NaN becomes ``0x7FC0``, the canonical quiet NaN.

float16 (code 1): IEEE binary16, 1 sign, 5 exponent, 10 mantissa bits.

* to float32: exact (subnormals included).
* from float32: round to nearest, ties to even, with gradual underflow to float16's subnormals
  (steps of 2**-24) and overflow to inf from 65520 on, as the F16C instruction ``vcvtps2ph``,
  NumPy's ``astype(float16)`` and torch do. A NaN keeps its sign and the top 10 bits of its
  payload, with the quiet bit set.

Where the CPU converts float16 itself (x86's F16C, on every x86-64 since 2012; every 64-bit ARM
core) and Numba compiles for it, :data:`HARDWARE_FLOAT16` is true and the float16 conversions
are the instructions (LLVM's ``fpext``/``fptrunc`` of ``half``), which vectorize where the
integer forms did not: the same bits (the instruction is IEEE's rounding, as above, and keeps a
NaN's sign and payload top, quiet), except that on the way to float32 the instruction quiets a
signaling NaN, which the integer form, NumPy and torch keep: that bit is put back.
``tests/test_precision.py`` holds the two forms to each other on every pattern.

Arrays: a bfloat16 array is an ``ml_dtypes.bfloat16`` array (the optional extra
``npoptim[bf16]``), a float16 array a NumPy ``float16`` one; a raw ``uint16`` array holds either
format's bits, and the format is then named by the caller (``format="bfloat16"``).
"""
import platform

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload

from npoptim.kernels.bfloat16 import rounded_bfloat16_bits
from npoptim.kernels.jit import JIT_OPTIONS, kernel

BFLOAT16 = 0
FLOAT16 = 1
#: format name -> code (the ``code`` field of a rule's record)
FORMATS = {"bfloat16": BFLOAT16, "float16": FLOAT16}
#: format name -> the largest finite value of that format
MAX_FINITE = {"bfloat16": (2 - 2 ** -7) * 2.0 ** 127, "float16": 65504.0}


def _hardware_float16():
    """Whether Numba compiles for a CPU that converts float16 itself (see the module
    docstring): the host, F16C on x86 or any 64-bit ARM; False for a named target CPU
    (``NUMBA_CPU_NAME``, e.g. a portable cache) and under ``NUMBA_DISABLE_JIT``."""
    from numba.core import config
    if config.DISABLE_JIT or (config.CPU_NAME and config.CPU_NAME != "host"):
        return False
    if platform.machine().lower() in ("aarch64", "arm64"):
        return True
    from llvmlite import binding
    return bool(binding.get_host_cpu_features().get("f16c", False))


#: The float16 conversions are the CPU's instructions (see the module docstring).
HARDWARE_FLOAT16 = _hardware_float16()


def bfloat16_dtype():
    """``ml_dtypes.bfloat16`` as a NumPy dtype; a clear error without the extra."""
    try:
        import ml_dtypes
    except ImportError:
        raise ImportError("bfloat16 arrays need ml_dtypes: pip install 'npoptim[bf16]' "
                          "(or pass the bits as a uint16 array with format='bfloat16')") from None
    return np.dtype(ml_dtypes.bfloat16)


def format_of(array, format=None):
    """The format name of a 16-bit array: its dtype's, or ``format`` for a raw uint16 array.

    Raises ``TypeError`` for any other dtype, a uint16 array without a format, or a format that
    contradicts the dtype; ``ValueError`` for an unknown format name.
    """
    if format is not None and format not in FORMATS:
        raise ValueError(f"format must be 'bfloat16' or 'float16', got {format!r}")
    dtype = array.dtype
    if dtype == np.uint16:
        if format is None:
            raise TypeError("a uint16 array holds raw 16-bit values: name their format "
                            "(format='bfloat16' or 'float16')")
        return format
    if dtype == np.float16:
        name = "float16"
    elif dtype.name == "bfloat16":
        name = "bfloat16"
    else:
        raise TypeError(f"expected a bfloat16, float16 or uint16 array, got {dtype}")
    if format is not None and format != name:
        raise TypeError(f"the array is {name}, but format={format!r} was given")
    return name


def bits_of(array):
    """The ``uint16`` view of a 16-bit array (the array itself when it is uint16)."""
    return array if array.dtype == np.uint16 else array.view(np.uint16)


def to_float32_array(array, format=None):
    """A float32 copy of a 16-bit array's values (exact)."""
    code = FORMATS[format_of(array, format)]
    bits = np.ascontiguousarray(bits_of(array)).reshape(-1)
    out = np.empty(bits.size, np.float32)
    _decode_flat(bits, code, out)
    return out.reshape(array.shape)


def from_float32_array(values, format):
    """The bits (a ``uint16`` array) of float32 ``values`` rounded to ``format``."""
    code = FORMATS[format_of(np.empty(0, np.uint16), format)]
    flat = np.ascontiguousarray(values, dtype=np.float32).reshape(-1)
    out = np.empty(flat.size, np.uint16)
    _encode_flat(flat, code, out)
    return out.reshape(np.shape(values))


def round_to_array(values, format):
    """float32 ``values`` rounded to ``format``, as a new float32 array of their shape:
    ``to_float32_array(from_float32_array(values, format), format)`` in one pass
    (:func:`round_to` on each element)."""
    code = FORMATS[format_of(np.empty(0, np.uint16), format)]
    flat = np.ascontiguousarray(values, dtype=np.float32).reshape(-1)
    out = np.empty(flat.size, np.float32)
    _round_flat(flat, code, out)
    return out.reshape(np.shape(values))


# ------------------------------------------------------------------ bit casts (float32 <-> u32)
def float32_bits(x):
    """The bits of the float32 ``x`` as an integer."""
    return int(np.float32(x).view(np.uint32))


def bits_float32(u):
    """The float32 whose bits are the integer ``u`` (0 <= u < 2**32)."""
    return np.uint32(u).view(np.float32)


@intrinsic
def _f32_to_u32(typingctx, x):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.uint32(types.float32), codegen


@intrinsic
def _u32_to_f32(typingctx, u):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.uint32), codegen


@intrinsic
def _half_to_f32(typingctx, bits):
    def codegen(context, builder, signature, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())
    return types.float32(types.uint16), codegen


@intrinsic
def _f32_to_half(typingctx, x):
    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))
    return types.uint16(types.float32), codegen


@overload(float32_bits, jit_options=JIT_OPTIONS)
def _float32_bits_jit(x):
    return lambda x: np.int64(_f32_to_u32(np.float32(x)))


@overload(bits_float32, jit_options=JIT_OPTIONS)
def _bits_float32_jit(u):
    return lambda u: _u32_to_f32(np.uint32(u))


# ------------------------------------------------------------------------ scalar conversions
@kernel
def bfloat16_to_float32(bits):
    return bits_float32(np.int64(bits) << 16)


@kernel
def float32_to_bfloat16(x):
    return rounded_bfloat16_bits(float32_bits(x), x != x)  # (the NaN test on the value: cheaper)


@kernel
def _select(condition, if_true, if_false):
    """``if_true if condition else if_false`` for integers, as arithmetic: no branch, so that
    the loops of the conversions below vectorize."""
    return if_false + condition * (if_true - if_false)


@kernel
def float16_to_float32_integer(bits):
    """(Branches, unlike the other conversions: LLVM turns them into selects where a loop
    vectorizes, and the branch-free form was slower in the loops that do not.)"""
    h = np.int64(bits)
    sign = (h & 0x8000) << 16
    exponent = (h >> 10) & 0x1F
    mantissa = h & 0x3FF
    if exponent == 0x1F:
        return bits_float32(sign | 0x7F800000 | (mantissa << 13))
    if exponent == 0:  # zero or subnormal: mantissa * 2**-24, exact in float32
        magnitude = np.float32(mantissa) * bits_float32(0x33800000)
        return -magnitude if sign != 0 else magnitude
    return bits_float32(sign | ((exponent + 112) << 23) | (mantissa << 13))


@kernel
def float32_to_float16_integer(x):
    u = float32_bits(x)
    sign = (u >> 16) & 0x8000
    a = u & 0x7FFFFFFF
    odd = (a >> 13) & 1
    bits = (a - (112 << 23) + 0xFFF + odd) >> 13
    # below 2**-14: a float16 subnormal or zero. Adding 0.5 puts the value's 2**-24 units in the
    # low mantissa bits, float32's own addition rounding them to nearest even; 0.5's bits are
    # then subtracted (a larger value is added as 0, never overflowing)
    subnormal = a < 0x38800000
    shifted = bits_float32(subnormal * a) + bits_float32(0x3F000000)
    bits = _select(subnormal, float32_bits(shifted) - 0x3F000000, bits)
    bits = _select(a >= 0x477FF000, 0x7C00, bits)  # 65520 and above (and inf) round to inf
    bits = _select(a > 0x7F800000, 0x7E00 | ((a >> 13) & 0x3FF), bits)  # NaN: quiet, top of
    return np.uint16(sign | bits)                                         # the payload kept


@kernel
def float16_to_float32(bits):
    """The float32 value of float16 ``bits`` (exact)."""
    if HARDWARE_FLOAT16:
        x = _half_to_f32(np.uint16(bits))
        # a NaN as the integer form gives it: the instruction quiets a signaling one (sets
        # bit 22), the integer form keeps the pattern's own quiet bit (bit 9) there
        h = np.uint32(bits)
        kept = ((_f32_to_u32(x) & np.uint32(0xFFBFFFFF))
                | ((h & np.uint32(0x200)) << np.uint32(13)))
        return x if x == x else _u32_to_f32(kept)
    return float16_to_float32_integer(bits)


@kernel
def float32_to_float16(x):
    """The float16 bits of the float32 ``x`` rounded to nearest, ties to even."""
    if HARDWARE_FLOAT16:  # a NaN keeps its sign and payload's top, quiet, as specified above
        return _f32_to_half(np.float32(x))
    return float32_to_float16_integer(x)


@kernel
def to_float32(bits, code):
    """The float32 value of 16-bit ``bits`` of the format ``code`` (exact)."""
    if code == BFLOAT16:
        return bfloat16_to_float32(bits)
    return float16_to_float32(bits)


@kernel
def read_float32(bits, code):
    """The float32 value of 16-bit ``bits`` as a step reads it: :func:`to_float32`'s, except
    that where the CPU converts float16 itself a signaling NaN comes out quiet (the bare
    instruction, which vectorizes, without :func:`float16_to_float32`'s fix-up of the quiet
    bit). The drivers read params, grads and states with it: what a step reads leaves it only
    through arithmetic or :func:`from_float32`, and both quiet a NaN and keep its sign and
    payload, so that bit never shows in a result (``tests/test_precision.py`` holds the
    signaling NaNs of every 16-bit optimizer's step to the integer form's). 40% of a float16
    SGD step's time on 1M elements was the fix-up, measured."""
    if code == BFLOAT16:
        return bfloat16_to_float32(bits)
    if HARDWARE_FLOAT16:
        return _half_to_f32(np.uint16(bits))
    return float16_to_float32_integer(bits)


@kernel
def from_float32(x, code):
    """The 16-bit bits of the float32 ``x`` rounded to the format ``code``."""
    if code == BFLOAT16:
        return float32_to_bfloat16(x)
    return float32_to_float16(x)


@kernel
def round_to(x, code):
    """The float32 ``x`` rounded to the format ``code``, as a float32 (exact in that format):
    ``to_float32(from_float32(x, code), code)``, computed on the float32 bits without the 16-bit
    step (no branch but the format's)."""
    u = float32_bits(x)
    if code == BFLOAT16:  # (the NaN test on the value, x != x: one instruction, not three)
        rounded = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
        return bits_float32(_select(x != x, 0x7FC00000, rounded))
    a = u & 0x7FFFFFFF
    if HARDWARE_FLOAT16:  # a NaN's round trip is quiet already: no select needed
        return _half_to_f32(_f32_to_half(np.float32(x)))
    sign = u & 0x80000000
    # 11 significant bits, to nearest even; below 2**-14 in steps of 2**-24 (as the conversion)
    bits = (u + 0xFFF + ((u >> 13) & 1)) & 0xFFFFE000
    subnormal = a < 0x38800000
    shifted = bits_float32(subnormal * a) + bits_float32(0x3F000000)
    small = sign | float32_bits(shifted - bits_float32(0x3F000000))
    bits = _select(subnormal, small, bits)
    bits = _select(a >= 0x477FF000, sign | 0x7F800000, bits)
    return bits_float32(_select(a > 0x7F800000, sign | 0x7FC00000 | (a & 0x7FE000), bits))


# the array conversions: a loop for each format, in which the format is a constant (a loop
# testing its run-time code per element computed both formats' conversions and selected)
@kernel
def _decode_flat(bits, code, out):
    if code == BFLOAT16:
        for i in range(bits.size):
            out[i] = to_float32(bits[i], BFLOAT16)
    else:
        for i in range(bits.size):
            out[i] = to_float32(bits[i], FLOAT16)


@kernel
def _encode_flat(values, code, out):
    if code == BFLOAT16:
        for i in range(values.size):
            out[i] = from_float32(values[i], BFLOAT16)
    else:
        for i in range(values.size):
            out[i] = from_float32(values[i], FLOAT16)


@kernel
def _round_flat(values, code, out):
    if code == BFLOAT16:
        for i in range(values.size):
            out[i] = round_to(values[i], BFLOAT16)
    else:
        for i in range(values.size):
            out[i] = round_to(values[i], FLOAT16)
