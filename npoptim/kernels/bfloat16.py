"""The one rounding of float32 to bfloat16 (the top 16 bits of a float32), as torch's
``c10::BFloat16`` converts a float: the 16-bit optimizers' bfloat16 format
(:mod:`npoptim.precision.formats`) and Muon's bfloat16 Newton–Schulz (:mod:`npoptim.optim.muon`)
both round with it.

From the float32 bits ``u``: round to nearest, ties to even, ``(u + 0x7FFF + ((u >> 16) & 1))
>> 16``, as ``c10::BFloat16`` and ``ml_dtypes`` do. Subnormals are kept (bfloat16 has
float32's exponent range); a value beyond the largest bfloat16 rounds to inf. Any NaN becomes
``0x7FC0``, the canonical quiet NaN, as ``c10::BFloat16``'s scalar conversion gives it (torch's
AVX2/AVX-512 tensor conversion writes ``0xFFFF``, also a NaN; NaN bits are not part of what
npoptim reproduces).

* :func:`bfloat16_bits` -- the scalar kernel: the bfloat16 bits of float32 bits, branch-free
  (the NaN case is selected arithmetically), so that loops calling it vectorize.
* :func:`rounded_bfloat16_bits` -- the same with the NaN test the caller's: a caller holding the
  float32 value tests ``x != x``, one vector instruction where the test on the bits takes three
  (a fused bfloat16 AdamW step stores three values an element: 8% of its time, measured).
* :func:`round_to_bfloat16` -- the array form, that kernel on each element: float32 values
  rounded to bfloat16 values, held in float32.
* :func:`to_bfloat16` -- torch's ``x.bfloat16()`` of an array of any float dtype.
"""
import numpy as np

from npoptim.kernels.jit import kernel

#: the canonical quiet NaN of bfloat16 (``c10::BFloat16``'s, and the top half of float32's)
CANONICAL_NAN = 0x7FC0


@kernel
def rounded_bfloat16_bits(u, nan):
    """The bits (``uint16``) of the bfloat16 nearest to the float32 whose bits are ``u``;
    ``nan`` is whether that float32 is a NaN."""
    u = np.int64(u)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return np.uint16(rounded + nan * (CANONICAL_NAN - rounded))  # a select, not a branch


@kernel
def bfloat16_bits(u):
    """The bits (``uint16``) of the bfloat16 nearest to the float32 whose bits are ``u``."""
    u = np.int64(u)
    return rounded_bfloat16_bits(u, (u & 0x7FFFFFFF) > 0x7F800000)


@kernel
def _bfloat16_bits_flat(bits32, out):
    for i in range(bits32.size):
        out[i] = bfloat16_bits(bits32[i])


def round_to_bfloat16(x):
    """A float32 array (or scalar) rounded to bfloat16 (:func:`bfloat16_bits` on each element),
    as a float32 array of the same shape; every NaN becomes the canonical one."""
    x = np.asarray(x, np.float32)
    bits = np.empty(x.shape, np.uint16)
    _bfloat16_bits_flat(np.ascontiguousarray(x).reshape(-1).view(np.uint32), bits.reshape(-1))
    top = bits.astype(np.uint32)
    top <<= 16
    return top.view(np.float32)


def to_bfloat16(x):
    """``x.bfloat16()``: float64 is rounded to float32 first, then to bfloat16, as torch does."""
    return round_to_bfloat16(np.asarray(x).astype(np.float32))
