r"""A counter-based stream of standard normal numbers: the same values from the same counters in
any language, with no generator state to save.

Value ``i`` (``i = 0, 1, ...``, a parameter's elements in C order) of the stream keyed by the
unsigned 64-bit integers ``(seed, stream, step)``:

.. code-block:: text

    mix(x)  = SplitMix64's output function of x (all arithmetic modulo 2**64):
              z = x + 0x9E3779B97F4A7C15
              z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
              z = (z ^ (z >> 27)) * 0x94D049BB133111EB
              return z ^ (z >> 31)
    key     = mix(mix(mix(seed) ^ stream) ^ step)
    u1      = ((mix(key ^ (2 i))     >> 11) + 1) * 2**-53      in (0, 1]
    u2      =  (mix(key ^ (2 i + 1)) >> 11)      * 2**-53      in [0, 1)
    z_i     = sqrt(-2 ln u1) * cos(2 pi u2)                     (Box-Muller, float64)

The integers are exact everywhere; ``ln`` and ``cos`` come from the platform's maths library,
so another implementation may differ in the last bit of ``z_i`` (1e-16 relative), far below
any tolerance of the golden files. Values are made in float64 and rounded to the parameter's
dtype by the caller.
"""
import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(x):
    """SplitMix64's output function of a uint64 array (wrapping arithmetic)."""
    z = x + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def standard_normal(seed, stream, step, size):
    """``size`` values of the stream keyed by ``(seed, stream, step)`` (see the module
    docstring), as a float64 array."""
    with np.errstate(over="ignore"):
        key = _mix(np.array([seed], np.uint64))
        key = _mix(key ^ np.uint64(stream))
        key = _mix(key ^ np.uint64(step))[0]
        counters = np.arange(size, dtype=np.uint64) * np.uint64(2)
        u1 = ((_mix(key ^ counters) >> np.uint64(11)) + np.uint64(1)).astype(np.float64)
        u2 = (_mix(key ^ (counters + np.uint64(1))) >> np.uint64(11)).astype(np.float64)
    u1 *= 2.0 ** -53
    u2 *= 2.0 ** -53
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)
