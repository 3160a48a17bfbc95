r"""Stochastic rounding to bfloat16 (and float16) with a counter-based random stream,
reproducible anywhere.

A float32 :math:`x` with bits :math:`u` (sign, exponent and 23 mantissa bits) lies between the
bfloat16 values :math:`u \gg 16` (toward zero) and :math:`(u \gg 16) + 1` (away from zero).
Stochastic rounding picks the one away from zero with probability
:math:`(u \mathbin{\&} \mathtt{0xFFFF}) / 2^{16}`, so that the rounded value's expectation is
:math:`x` (to float32's last 16 bits): with a 16-bit random integer :math:`r`, away from zero
iff :math:`r < u \mathbin{\&} \mathtt{0xFFFF}`, torchao's ``_fp32_to_bf16_sr`` rule. An inf or
NaN rounds to nearest (:mod:`npoptim.precision.formats`); a value past the largest bfloat16 may
round to inf.

float16 (no reference library has it; npoptim's own definition, checked statistically and
against itself in tests/test_precision.py): the same idea with float16's spacing. A float32
:math:`x` whose magnitude is a float16 normal number (:math:`2^{-14} \le |x| < 2^{16}`) drops
13 mantissa bits: toward zero is :math:`x` with them cleared, away from zero the next float16
(possibly inf), away iff :math:`(r \gg 3) < u \mathbin{\&} \mathtt{0x1FFF}`, probability
exactly the dropped fraction. Below :math:`2^{-14}` (float16 subnormals, spacing
:math:`2^{-24}`) with :math:`q = |x|\,2^{24}`: away iff :math:`r < \lfloor (q - \lfloor q
\rfloor)\,2^{16} \rfloor` (the fraction to 16 bits). Zero, inf and NaN round to nearest; from
:math:`2^{16}` on, to inf.

The random integers are a counter-based stream, a function of (seed, parameter, step, element)
only, so that every element's draw is the same whatever the thread count, the order of the
updates or the language re-implementing it. With :math:`\mathrm{mix}` SplitMix64's output
function on 64-bit words (all arithmetic modulo :math:`2^{64}`)::

    mix(z):  z = z + 0x9E3779B97F4A7C15
             z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
             z = (z ^ (z >> 27)) * 0x94D049BB133111EB
             return z ^ (z >> 31)

    key    = mix(mix(mix(seed) ^ parameter) ^ step)   # once per parameter and step
    r(i)   = mix(key ^ i) >> 48                       # element i of the flat parameter

``parameter`` is the parameter's index in param-group order (as in ``state_dict``), ``step`` its
step count after the increment (1 at the first step), ``i`` the element's C-order flat index.
"""
import numpy as np
from numba.extending import overload

from npoptim.kernels.jit import JIT_OPTIONS, kernel
from npoptim.precision.formats import BFLOAT16, FORMATS, bits_float32, float32_bits
from npoptim.precision.formats import float32_to_bfloat16, float32_to_float16

_MASK = (1 << 64) - 1
_INCREMENT, _MUL1, _MUL2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def mix(z):
    """SplitMix64's output function of the 64-bit word ``z`` (see the module docstring)."""
    z = (int(z) + _INCREMENT) & _MASK
    z = ((z ^ (z >> 30)) * _MUL1) & _MASK
    z = ((z ^ (z >> 27)) * _MUL2) & _MASK
    return z ^ (z >> 31)


def stream_key(seed, parameter, step):
    """The key of a parameter's draws at a step (an int below 2**64)."""
    return mix(mix(mix(seed & _MASK) ^ parameter) ^ step)


def random16(key, index):
    """The 16-bit random integer of element ``index`` under ``key``."""
    return mix(int(key) ^ int(index)) >> 48


_U_INCREMENT, _U_MUL1, _U_MUL2 = np.uint64(_INCREMENT), np.uint64(_MUL1), np.uint64(_MUL2)
_S30, _S27, _S31, _S48 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(48)


@overload(random16, jit_options=JIT_OPTIONS)
def _random16_jit(key, index):
    def impl(key, index):
        z = (np.uint64(key) ^ np.uint64(index)) + _U_INCREMENT
        z = (z ^ (z >> _S30)) * _U_MUL1
        z = (z ^ (z >> _S27)) * _U_MUL2
        z = z ^ (z >> _S31)
        return np.int64(z >> _S48)
    return impl


@kernel
def stochastic_bfloat16(x, r16):
    """The bfloat16 bits of the float32 ``x`` rounded stochastically with the 16-bit ``r16``."""
    u = float32_bits(x)
    if (u & 0x7FFFFFFF) >= 0x7F800000:
        return float32_to_bfloat16(x)
    if r16 < (u & 0xFFFF):
        return np.uint16((u >> 16) + 1)
    return np.uint16(u >> 16)


@kernel
def stochastic_float16(x, r16):
    """The float16 bits of the float32 ``x`` rounded stochastically with the 16-bit ``r16``."""
    u = float32_bits(x)
    a = u & 0x7FFFFFFF
    if a == 0 or a >= 0x47800000:  # zero; 2**16 and above, inf, NaN: to nearest
        return float32_to_float16(x)
    sign = (u >> 16) & 0x8000
    if a >= 0x38800000:  # a float16 normal: clear the 13 dropped bits (exact in float16)
        toward = np.int64(float32_to_float16(bits_float32(a & 0x7FFFE000)))
        away = (r16 >> 3) < (a & 0x1FFF)
    else:  # float16 subnormals: steps of 2**-24
        q = np.float64(bits_float32(a)) * 16777216.0
        whole = np.floor(q)
        toward = np.int64(whole)
        away = r16 < np.int64((q - whole) * 65536.0)
    return np.uint16(sign | (toward + 1 if away else toward))


@kernel
def stochastic_round(x, r16, code):
    """The 16-bit bits of the float32 ``x`` rounded stochastically to the format ``code``."""
    if code == BFLOAT16:
        return stochastic_bfloat16(x, r16)
    return stochastic_float16(x, r16)


@kernel
def _round_flat(values, key, code, out):
    for i in range(values.size):
        out[i] = stochastic_round(values[i], random16(key, i), code)


def stochastic_round_array(values, seed, parameter=0, step=1, format="bfloat16"):
    """The 16-bit bits (uint16) of float32 ``values`` rounded stochastically to ``format``,
    element ``i`` with the draw ``r(i)`` of (seed, parameter, step): what a step writes into
    a parameter."""
    flat = np.ascontiguousarray(values, dtype=np.float32).reshape(-1)
    out = np.empty(flat.size, np.uint16)
    _round_flat(flat, np.uint64(stream_key(seed, parameter, step)), np.int64(FORMATS[format]),
                out)
    return out.reshape(np.shape(values))
