r"""A counter-based stream of standard normal numbers: the same values from the same counters in
any language and on any CPU, bit for bit, with no generator state to save.

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
    z_i     = sqrt(-2 ln(u1)) * cos_turns(u2)                   (Box-Muller, float64)

``ln`` and ``cos_turns`` (:math:`\cos 2\pi u`) are not the platform's maths library (whose
results differ by CPU: NumPy picks its SIMD code, glibc its FMA variant, at run time) but the
fixed formulas below, made of IEEE 754 float64 operations that are correctly rounded
everywhere (``+ - * /`` and ``sqrt``, round to nearest even) and exact ones (``frexp``,
``rint``, multiplying by 2, 4 or 1/2, comparisons), evaluated one operation at a time in the
order written, with no fused multiply-add. So every ``z_i`` is the same float64 on every
machine, and a port that follows the formulas gets those bits. Values are made in float64 and
rounded to the parameter's dtype by the caller.

.. code-block:: text

    ln(x), x > 0 finite and normal (fdlibm's argument reduction, Taylor coefficients):
        m, e = frexp(x)                          x = m 2**e, m in [0.5, 1)
        if m < SQRT_HALF: m = 2 m; e = e - 1     m in [sqrt(1/2), sqrt(2))
        f    = m - 1                             (exact)
        s    = f / (2 + f);  z = s * s           ln(1 + f) = 2 atanh(s)
        R    = z * (L1 + z * (L2 + ... + z * L10))      Horner, L_k = 2 / (2k + 1)
        hfsq = 0.5 * f * f
        ln   = e * LN2_HI - ((hfsq - (s * (hfsq + R) + e * LN2_LO)) - f)
    SQRT_HALF = 0x1.6a09e667f3bcdp-1    LN2_HI = 0x1.62e42fefa4000p-1  (so e * LN2_HI is exact)
    LN2_LO = -0x1.8432a1b0e2634p-43     (ln 2 - LN2_HI, rounded)

    cos_turns(u) = cos(2 pi u), |u| < 2**50:
        v = 4 u;  n = rint(v);  f = v - n       (exact; f in [-1/2, 1/2])
        w = f * f
        C = C0 + w * (C1 + w * (C2 + ... + w * C8))    ~ cos(pi f / 2), Horner
        S = f * (S0 + w * (S1 + ... + w * S8))         ~ sin(pi f / 2), Horner
        cos_turns = C, -S, -C, S                 for n = 0, 1, 2, 3 (mod 4)
    C_k = (-1)**k (pi/2)**(2k) / (2k)!,  S_k = (-1)**k (pi/2)**(2k+1) / (2k+1)!, each the
    float64 nearest to the exact value (the literals of :data:`COS_COEFFICIENTS` and
    :data:`SIN_COEFFICIENTS`, shortest decimals that read back to them).

``L_k`` is the float64 quotient ``2.0 / (2k + 1)``. Measured against mpmath over 2·10**5
``u1`` and ``u2`` of the stream and the edges: ``ln`` within 0.8 ulp of the exact value,
``cos_turns`` within 1.6 ulp, and exactly 0 at ``u = 1/4, 3/4``; the series are truncated
below 2**-55 relative. The normals pass mean, variance, Kolmogorov–Smirnov and tail-count
tests on 10**6 draws (``tests/test_noisy_sgd.py``).
"""
import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)

SQRT_HALF = float.fromhex("0x1.6a09e667f3bcdp-1")
LN2_HI = float.fromhex("0x1.62e42fefa4000p-1")   # ln 2 to 40 bits: e * LN2_HI is exact
LN2_LO = float.fromhex("-0x1.8432a1b0e2634p-43")
#: ``L_k = 2 / (2k + 1)``, k = 1..10 (the atanh series of ``ln``), highest degree last.
LN_COEFFICIENTS = tuple(2.0 / (2 * k + 1) for k in range(1, 11))
#: ``C_k = (-1)^k (pi/2)^(2k) / (2k)!``, k = 0..8, highest degree last.
COS_COEFFICIENTS = (1.0, -1.2337005501361697, 0.25366950790104803, -0.02086348076335296,
                    0.0009192602748394266, -2.5202042373060607e-05, 4.710874778818172e-07,
                    -6.386603083791852e-09, 6.565963114979473e-11)
#: ``S_k = (-1)^k (pi/2)^(2k+1) / (2k+1)!``, k = 0..8, highest degree last.
SIN_COEFFICIENTS = (1.5707963267948966, -0.6459640975062463, 0.07969262624616705,
                    -0.004681754135318688, 0.00016044118478735983, -3.598843235212085e-06,
                    5.692172921967927e-08, -6.688035109811468e-10, 6.0669357311061955e-12)


def _horner(coefficients, w):
    """``c0 + w (c1 + w (c2 + ...))``, one rounded multiply and one rounded add per step."""
    p = np.full_like(w, coefficients[-1])
    for c in coefficients[-2::-1]:
        p = p * w
        p = p + c
    return p


def ln(x):
    """The natural logarithm of positive, finite, normal float64 values, by the fixed formula
    of the module docstring (not the platform's ``log``): the same bits on every machine."""
    x = np.asarray(x, np.float64)
    m, e = np.frexp(x)
    low = m < SQRT_HALF
    m = np.where(low, m * 2.0, m)
    e = (e - low).astype(np.float64)
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    r = z * _horner(LN_COEFFICIENTS, z)
    hfsq = 0.5 * f * f
    return e * LN2_HI - ((hfsq - (s * (hfsq + r) + e * LN2_LO)) - f)


def cos_turns(u):
    """``cos(2 pi u)`` of float64 values ``|u| < 2**50``, by the fixed formula of the module
    docstring (not the platform's ``cos``): the same bits on every machine."""
    v = np.asarray(u, np.float64) * 4.0
    n = np.rint(v)
    f = v - n
    w = f * f
    c = _horner(COS_COEFFICIENTS, w)
    s = f * _horner(SIN_COEFFICIENTS, w)
    quadrant = n.astype(np.int64) & 3
    return np.select([quadrant == 0, quadrant == 1, quadrant == 2], [c, -s, -c], s)


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
    u1 *= np.ldexp(1.0, -53)
    u2 *= np.ldexp(1.0, -53)
    return np.sqrt(-2.0 * ln(u1)) * cos_turns(u2)


def uniform(seed, stream, step, size):
    """``size`` uniform values in ``[0, 1)`` keyed by ``(seed, stream, step)``: value ``i`` is
    ``(mix(key ^ (2 i + 1)) >> 11) * 2**-53`` (the ``u2`` of the module docstring), exact
    float64 on every machine. A random decision drawn with probability ``p`` is
    ``uniform(...)[0] < p`` (PSGD Kron's balancing)."""
    with np.errstate(over="ignore"):
        key = _mix(np.array([seed], np.uint64))
        key = _mix(key ^ np.uint64(stream))
        key = _mix(key ^ np.uint64(step))[0]
        counters = np.arange(size, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        u = (_mix(key ^ counters) >> np.uint64(11)).astype(np.float64)
    return u * np.ldexp(1.0, -53)
