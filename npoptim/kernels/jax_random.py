r"""The part of ``jax.random`` (jax 0.10.2, its default threefry2x32 implementation with
``jax_threefry_partitionable=True``) that optax's noisy SGD and DP-SGD draw from, in NumPy:
the same keys, bits and uniforms bit for bit, and the same standard normals to the last few
bits, so that a golden case can say "jax's stream from key ``seed``" and be replayed by
optax and by npoptim alike.

A key is two ``uint32`` words ``(k0, k1)``; every operation is the Threefry-2x32 hash
(Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011; 20 rounds) of a
pair of 32-bit counters under a key, all arithmetic modulo 2**32:

.. code-block:: text

    threefry2x32((k0, k1), (x0, x1)):
        ks = (k0, k1, k0 ^ k1 ^ 0x1BD11BDA)
        x0 += ks[0];  x1 += ks[1]
        for i in 1..5:
            for r in (13, 15, 26, 6) if i odd else (17, 29, 16, 24):
                x0 += x1;  x1 = rotl(x1, r) ^ x0
            x0 += ks[i % 3];  x1 += ks[(i + 1) % 3] + i
        return (x0, x1)

    key(seed)            = (seed >> 32, seed & 0xFFFFFFFF)         (jax.random.key / PRNGKey)
    split(key, n)[i]     = threefry2x32(key, (0, i))              i = 0 .. n-1
    fold_in(key, d)      = threefry2x32(key, (0, d))
    bits(key, shape)[j]  = (y0, y1) = threefry2x32(key, (j >> 32, j & 0xFFFFFFFF)),
                           j the element's index in C order;
                           32-bit: y0 ^ y1     64-bit: (y0 << 32) | y1
    uniform(key, shape, dtype, lo, hi):
        f = bit pattern (bits >> (nbits - nmant)) | bits of 1.0, read as dtype   in [1, 2)
        max(lo, (f - 1) * (hi - lo) + lo)                          in dtype's arithmetic
    normal(key, shape, dtype) = sqrt(2) * erfinv(uniform(key, shape, dtype, -1 + ulp, 1))
        (lo = nextafter(-1, 0) in dtype: the uniform never reaches -1)

float64 takes 64-bit draws (jax under ``jax_enable_x64``), float32 32-bit ones (nmant = 52,
23). ``erfinv`` is XLA's own approximation (Giles, "Approximating the erfinv function", GPU
Computing Gems, 2011: :func:`erfinv`, its branches and coefficients as XLA 0.10.2's CPU
code computes them), not an accurate erfinv: scipy's is 2e-12 relative from XLA's in
float64 (11869 ulp; 6e-6, 90 ulp in float32). It is computed here as XLA's CPU backend
computes it on an x86-64 CPU with FMA (every x86-64-v3 machine: XLA lets LLVM fuse each
multiply-add, "always allow FMA fusion"), so the normals are jax's bit for bit:

.. code-block:: text

    w = -log1p(-x*x)                (x*x rounded first)
    log1p(a) = a + fma(-0.5, a*a, (a*(a*a)) * (N(a) / D(a)))    if |a| < sqrt(2) - 1
               log(1 + a)                                       otherwise
      (XLA's EmitLog1p: Cephes' rational approximation, N and D of degree 6, Horner with
       one fma per step, coefficients :data:`_LOG1P_NUMERATOR`, :data:`_LOG1P_DENOMINATOR`)
    erfinv(x) = P(t) * x, P by Horner with one fma per step (p = fma(p, t, c))

``log`` is XLA's too: in float64 it calls the C library's ``log`` (glibc's, as Python's
``math.log``; measured identical to jax's on 10**6 values), in float32 its own Cephes
polynomial (Eigen's ``plog_float``, :func:`_log_float32`, measured identical to
``jnp.log`` on 8·10**4 values from 1e-30 to 2). ``fma`` is the correctly rounded fused
multiply-add (:func:`npoptim.kernels.scalar.fma`), the same on every CPU. Measured against
jax 0.10.2 on CPU (this formula, an AVX-512 machine): 10**6 normals of each dtype
bit-identical. The float64 bits rest on glibc's ``log`` (its FMA variant, which every
x86-64-v3 CPU takes: glibc picks it at load time, as it does for jax); jax itself gives
other bits on a CPU without FMA (no fusion there).

Keys are uint32 arrays of shape ``(2,)`` (what ``jax.random.key_data`` gives); ``split``
returns shape ``(n, 2)``.
"""
import math
import numbers

import numpy as np

from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import fma

_PARITY = np.uint32(0x1BD11BDA)
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_MASK32 = 0xFFFFFFFF


def _rotl(x, r):
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def threefry2x32(key, x0, x1):
    """The Threefry-2x32 hash (20 rounds) of the counter pairs ``(x0, x1)`` (uint32 arrays of
    one shape) under ``key`` (two uint32 words): the pair ``(y0, y1)`` of uint32 arrays."""
    k = np.asarray(key, np.uint32)
    ks = (k[0], k[1], k[0] ^ k[1] ^ _PARITY)
    x0 = np.asarray(x0, np.uint32) + ks[0]
    x1 = np.asarray(x1, np.uint32) + ks[1]
    for i in range(1, 6):
        for r in _ROTATIONS[(i - 1) % 2]:
            x0 = x0 + x1
            x1 = _rotl(x1, r) ^ x0
        x0 = x0 + ks[i % 3]
        x1 = x1 + ks[(i + 1) % 3] + np.uint32(i)
    return x0, x1


def check_jax_seed(seed):
    """Raise unless ``seed`` is a key seed: an integer in [0, 2**63) (jax's int64)."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) \
            or not 0 <= seed < 2 ** 63:
        raise ValueError(f"a jax key seed must be an integer in [0, 2**63), got {seed!r}")


def key(seed):
    """``jax.random.key_data(jax.random.key(seed))``: ``(seed >> 32, seed & 0xFFFFFFFF)``."""
    check_jax_seed(seed)
    seed = int(seed)
    return np.array([seed >> 32, seed & _MASK32], np.uint32)


def _counters(size):
    index = np.arange(size, dtype=np.uint64)
    return ((index >> np.uint64(32)).astype(np.uint32),
            (index & np.uint64(_MASK32)).astype(np.uint32))


def split(key, num=2):
    """``jax.random.split(key, num)``: ``num`` new keys, shape ``(num, 2)``."""
    y0, y1 = threefry2x32(key, *_counters(num))
    return np.stack([y0, y1], axis=1)


def fold_in(key, data):
    """``jax.random.fold_in(key, data)`` for ``data`` in [0, 2**32)."""
    y0, y1 = threefry2x32(key, np.zeros(1, np.uint32), np.array([data], np.uint32))
    return np.array([y0[0], y1[0]], np.uint32)


def random_bits(key, bit_width, shape):
    """``jax.random.bits(key, shape, uint<bit_width>)`` for a width of 32 or 64."""
    shape = tuple(shape)
    y0, y1 = threefry2x32(key, *_counters(int(np.prod(shape, dtype=np.int64))))
    if bit_width == 32:
        bits = y0 ^ y1
    elif bit_width == 64:
        bits = (y0.astype(np.uint64) << np.uint64(32)) | y1.astype(np.uint64)
    else:
        raise ValueError(f"bit_width must be 32 or 64, got {bit_width!r}")
    return bits.reshape(shape)


def _float_type(dtype):
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype}")
    return dtype


def uniform(key, shape, dtype=np.float64, minval=0.0, maxval=1.0):
    """``jax.random.uniform(key, shape, dtype, minval, maxval)``, bit for bit."""
    dtype = _float_type(dtype)
    info = np.finfo(dtype)
    uint = np.uint32 if info.bits == 32 else np.uint64
    bits = random_bits(key, info.bits, shape)
    mantissa = bits >> uint(info.bits - info.nmant)
    floats = (mantissa | np.array(1.0, dtype).view(uint)).view(dtype) - dtype.type(1.0)
    lo, hi = dtype.type(minval), dtype.type(maxval)
    return np.maximum(lo, floats * (hi - lo) + lo)


# XLA's erfinv (Giles 2011): w = -log1p(-x*x), a polynomial P(t) in t evaluated by Horner's
# rule with an fma per step (coefficients from the highest degree down), erfinv(x) = P(t) x,
# x * inf at |x| = 1.
# float32: t = w - 2.5 (w < 5) or sqrt(w) - 3; float64: t = w - 3.125 (w < 6.25),
# sqrt(w) - 3.25 (w < 16) or sqrt(w) - 5.
_ERFINV32 = (
    (5.0, None, 2.5, (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                      0.00021858087, -0.00125372503, -0.00417768164, 0.246640727,
                      1.50140941)),
    (None, True, 3.0, (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                       0.00573950773, -0.0076224613, 0.00943887047, 1.00167406,
                       2.83297682)),
)
_ERFINV64 = (
    (6.25, None, 3.125, (
        -3.64441206401782e-21, -1.6850591381820166e-19, 1.28584807152564e-18,
        1.1157877678025181e-17, -1.3331716628546209e-16, 2.0972767875968562e-17,
        6.6376381343583238e-15, -4.0545662729752069e-14, -8.1519341976054722e-14,
        2.6335093153082323e-12, -1.2975133253453532e-11, -5.4154120542946279e-11,
        1.0512122733215323e-09, -4.1126339803469837e-09, -2.9070369957882005e-08,
        4.2347877827932404e-07, -1.3654692000834679e-06, -1.3882523362786469e-05,
        0.00018673420803405714, -0.000740702534166267, -0.0060336708714301491,
        0.24015818242558962, 1.6536545626831027)),
    (16.0, True, 3.25, (
        2.2137376921775787e-09, 9.0756561938885391e-08, -2.7517406297064545e-07,
        1.8239629214389228e-08, 1.5027403968909828e-06, -4.013867526981546e-06,
        2.9234449089955446e-06, 1.2475304481671779e-05, -4.7318229009055734e-05,
        6.8284851459573175e-05, 2.4031110387097894e-05, -0.00035503752036284748,
        0.0009532893797373805, -0.0016882755560235047, 0.0024914420961078508,
        -0.0037512085075692412, 0.0053709145535900636, 1.0052589676941592,
        3.0838856104922208)),
    (None, True, 5.0, (
        -2.7109920616438573e-11, -2.5556418169965252e-10, 1.5076572693500548e-09,
        -3.789465440126737e-09, 7.61570120807834e-09, -1.496002662714924e-08,
        2.9147953450901081e-08, -6.7711997758452339e-08, 2.2900482228026655e-07,
        -9.9298272942317e-07, 4.5260625972231537e-06, -1.9681778105531671e-05,
        7.5995277030017761e-05, -0.00021503011930044477, -0.00013871931833623122,
        1.0103004648645344, 4.8499064014085844)),
)


#: XLA's log1p for |a| < sqrt(2) - 1 (Cephes): a + (-a²/2 + a³ N(a)/D(a)), highest degree first.
_LOG1P_NUMERATOR = (4.5270000862445199635215e-5, 4.9854102823193375972212e-1,
                    6.5787325942061044846969e0, 2.9911919328553073277375e1,
                    6.0949667980987787057556e1, 5.7112963590585538103336e1,
                    2.0039553499201281259648e1)
_LOG1P_DENOMINATOR = (1.0, 1.5062909083469192043167e1, 8.3047565967967209469434e1,
                      2.2176239823732856465394e2, 3.0909872225312059774938e2,
                      2.1642788614495947685003e2, 6.0118660497603843919306e1)
#: XLA's float32 log (Eigen's plog_float, Cephes): log(1+f) ~ f - f²/2 + f³ Q(f), Q's
#: coefficients highest degree first; e ln 2 added as e (Q1 + Q2).
_LOG32_POLYNOMIAL = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
                     1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
                     3.3333331174e-1)
_LOG32_Q1, _LOG32_Q2 = -2.12194440e-4, 0.693359375


@kernel
def _fma_elements(a, b, c, out):
    for i in range(out.size):
        out[i] = fma(a[i], b[i], c[i])


def _fma(a, b, c):
    """Elementwise correctly rounded ``a * b + c`` of arrays (or scalars) of one dtype."""
    a, b, c = np.broadcast_arrays(a, b, c)
    out = np.empty(a.shape, a.dtype)
    _fma_elements(np.ascontiguousarray(a).ravel(), np.ascontiguousarray(b).ravel(),
                  np.ascontiguousarray(c).ravel(), out.reshape(-1))
    return out


def _horner_fma(coefficients, x):
    """``c0 x^n + ... + cn`` by Horner's rule with one fma per step (highest degree first)."""
    p = np.full_like(x, coefficients[0])
    for c in coefficients[1:]:
        p = _fma(p, x, np.full_like(x, c))
    return p


@kernel
def _log_float64(x, out):
    """The C library's ``log`` (Numba calls it, as XLA's CPU code does for float64)."""
    for i in range(out.size):
        out[i] = math.log(x[i])


def _log_float32(y):
    """XLA's float32 ``log`` of positive normal values (Eigen's ``plog_float``, Cephes), with
    the fma of XLA's build at its one multiply-add that rounds differently fused."""
    real = np.float32
    m, e = np.frexp(y)
    e = e.astype(real)
    low = m < real(0.707106781186547524)
    e = np.where(low, e - real(1), e)
    x = np.where(low, (m - real(1)) + m, m - real(1))
    x2 = x * x
    x3 = x2 * x
    c = [np.full_like(x, real(v)) for v in _LOG32_POLYNOMIAL]
    y0 = _fma(_fma(c[0], x, c[1]), x, c[2])
    y1 = _fma(_fma(c[3], x, c[4]), x, c[5])
    y2 = _fma(_fma(c[6], x, c[7]), x, c[8])
    p = _fma(_fma(y0, x3, y1), x3, y2)
    p = _fma(p, x3, e * real(_LOG32_Q1))
    # x2 * 0.5 and e * Q2 are exact: fused or not, these two round the same
    return (x - x2 * real(0.5) + p) + e * real(_LOG32_Q2)


def _log(y):
    if y.dtype == np.float64:
        out = np.empty_like(y)
        _log_float64(np.ascontiguousarray(y).ravel(), out.reshape(-1))
        return out
    return _log_float32(y)


def log1p(a):
    """XLA's CPU ``log1p`` of a float32 or float64 array (see the module docstring)."""
    a = np.asarray(a)
    real = _float_type(a.dtype).type
    small = np.abs(a) < real(0.41421356237309504880)
    x2 = a * a
    ratio = _horner_fma(_LOG1P_NUMERATOR, a) / _horner_fma(_LOG1P_DENOMINATOR, a)
    near = a + _fma(np.full_like(a, real(-0.5)), x2, (a * x2) * ratio)
    one_plus = real(1.0) + a
    with np.errstate(divide="ignore", invalid="ignore"):   # a = -1: log(0) = -inf
        far = _log(np.where(small | (one_plus <= 0), real(1.0), one_plus))
    far = np.where(one_plus == 0, real(-np.inf), far)
    return np.where(small, near, far)


def erfinv(x):
    """XLA's ``erf_inv`` (what ``jax.lax.erf_inv`` runs on CPU) of a float32 or float64 array,
    in that dtype's arithmetic: the branches and coefficients above, the fma of XLA's CPU
    code (see the module docstring)."""
    x = np.asarray(x)
    dtype = _float_type(x.dtype)
    real = dtype.type
    w = -log1p(-(x * x))
    out = np.empty_like(x)
    taken = np.zeros(x.shape, bool)
    for bound, root, centre, coefficients in (_ERFINV32 if dtype == np.float32
                                              else _ERFINV64):
        where = ~taken if bound is None else ~taken & (w < real(bound))
        t = (np.sqrt(w[where]) if root else w[where]) - real(centre)
        out[where] = _horner_fma(coefficients, t) * x[where]
        taken |= where
    edge = np.abs(x) == real(1.0)
    out[edge] = x[edge] * real(np.inf)
    return out


def normal(key, shape, dtype=np.float64):
    """``jax.random.normal(key, shape, dtype)``: ``sqrt(2) erfinv(u)`` with ``u`` uniform in
    ``(-1, 1)`` and XLA's ``erfinv`` (:func:`erfinv`)."""
    dtype = _float_type(dtype)
    lo = np.nextafter(dtype.type(-1.0), dtype.type(0.0))
    u = uniform(key, shape, dtype, lo, 1.0)
    return dtype.type(np.sqrt(2.0)) * erfinv(u)
