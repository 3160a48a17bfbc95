"""The drivers of 16-bit updates (a rule computes in float32 on values decoded from 16-bit
bits) and of blockwise-quantized state.

A 16-bit rule has the shape of every npoptim rule plus the element's flat index,
``rule(p, g, s, h, i) -> (new_p, new_s)`` (see :mod:`npoptim.kernels.drivers`): its
arguments are float32 values decoded from the 16-bit storage, its record ``h`` has float32
fields plus ``h.code``, the storage format (:mod:`npoptim.precision.formats`), and
``h.tail_start``, the first element of torch's scalar remainder loop: torch's CPU kernels run
``n - n % lanes`` elements through vector code and the rest through scalar code, which rounds
some operations differently (each 16-bit module says where). The index also numbers the
element's draw in stochastic rounding (:mod:`npoptim.precision.stochastic`). The driver rounds what the rule returns to the format once,
when it writes it back; a rule that rounds every operation (``rounding="per-op"``) returns
values already in the format, so that last rounding is exact for it.

The driver of blockwise-quantized state, :func:`apply_blockwise`, runs a float32 rule on
moments dequantized a block at a time (:mod:`npoptim.precision.quantized`) and quantizes the
new ones per block.
"""
import numpy as np
from numba import prange
from numba.extending import overload

from npoptim.kernels.drivers import load_state, store_state
from npoptim.kernels.jit import JIT_OPTIONS, driver
from npoptim.kernels.parallel import parallel_threshold
from npoptim.precision.formats import from_float32, to_float32
from npoptim.precision.quantized import decode, encode_state_block


def decode_each(values, code):
    """``(to_float32(values[0], code), ...)``."""
    return tuple([to_float32(v, code) for v in values])


def encode_each(values, code):
    """``(from_float32(values[0], code), ...)``."""
    return tuple([from_float32(v, code) for v in values])


# as load_state/store_state: a tuple of run-time length, written out for 0 to 3 states
@overload(decode_each, jit_options=JIT_OPTIONS)
def _decode_each_jit(values, code):
    n = len(values)
    if n == 0:
        return lambda values, code: ()
    if n == 1:
        return lambda values, code: (to_float32(values[0], code),)
    if n == 2:
        return lambda values, code: (to_float32(values[0], code), to_float32(values[1], code))
    if n == 3:
        return lambda values, code: (to_float32(values[0], code), to_float32(values[1], code),
                                     to_float32(values[2], code))


@overload(encode_each, jit_options=JIT_OPTIONS)
def _encode_each_jit(values, code):
    n = len(values)
    if n == 0:
        return lambda values, code: ()
    if n == 1:
        return lambda values, code: (from_float32(values[0], code),)
    if n == 2:
        return lambda values, code: (from_float32(values[0], code),
                                     from_float32(values[1], code))
    if n == 3:
        return lambda values, code: (from_float32(values[0], code),
                                     from_float32(values[1], code),
                                     from_float32(values[2], code))


@driver
def _update16(rule, param, grad, states, hyper, i):
    code = hyper.code
    p, values = rule(to_float32(param[i], code), to_float32(grad[i], code),
                     decode_each(load_state(states, i), code), hyper, i)
    param[i] = from_float32(p, code)
    store_state(states, i, encode_each(values, code))


@driver(parallel=True)
def apply_dense16(rule, param, grad, states, hyper):
    """Apply the float32 ``rule`` to every element of the flat ``uint16`` arrays ``param``,
    ``grad`` and ``states`` (bits of the format ``hyper.code``). Element-wise: the result is the
    same whatever the thread count."""
    n = param.size
    if n >= parallel_threshold():
        for i in prange(n):
            _update16(rule, param, grad, states, hyper, i)
    else:
        for i in range(n):
            _update16(rule, param, grad, states, hyper, i)


@driver
def _update_block(rule, param, grad, first, second, hyper, block):
    size = hyper.block_size
    start = block * size
    count = min(size, param.size - start)
    codes1, scale1, qmap1, _ = first
    codes2, scale2, qmap2, _ = second
    new1 = np.empty(count, np.float32)
    new2 = np.empty(count, np.float32)
    for j in range(count):
        i = start + j
        s = (decode(codes1, i, qmap1, scale1, size, hyper.codec),
             decode(codes2, i, qmap2, scale2, size, hyper.codec))
        if hyper.code >= 0:  # 16-bit params and grads (uint16 bits of the format hyper.code)
            p, (m, v) = rule(to_float32(param[i], hyper.code), to_float32(grad[i], hyper.code),
                             s, hyper)
            param[i] = from_float32(p, hyper.code)
        else:
            p, (m, v) = rule(param[i], grad[i], s, hyper)
            param[i] = p
        new1[j] = m
        new2[j] = v
    encode_state_block(new1, first, start, count, block, hyper.codec)
    encode_state_block(new2, second, start, count, block, hyper.codec)


@driver(parallel=True)
def apply_blockwise(rule, param, grad, first, second, hyper):
    """Apply ``rule`` (``rule(p, g, (s1, s2), h) -> (p, (s1, s2))``) to every element, its two
    states dequantized from ``first = (codes, scale, qmap, lut)`` and ``second`` (``lut``:
    bitsandbytes' table, for ``h.codec == BNB8``), and quantize the new states a block at a
    time (the last block may be short). ``param`` and ``grad`` are float32, or (``h.code``
    >= 0) ``uint16`` bits of that 16-bit format, the new parameter rounded to nearest. Blocks are independent: the same at any thread
    count."""
    blocks = -(-param.size // hyper.block_size)
    if param.size >= parallel_threshold():
        for b in prange(blocks):
            _update_block(rule, param, grad, first, second, hyper, b)
    else:
        for b in range(blocks):
            _update_block(rule, param, grad, first, second, hyper, b)
