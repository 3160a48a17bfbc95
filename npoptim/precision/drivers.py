"""The drivers of 16-bit updates (a rule computes in float32 on values decoded from 16-bit
bits) and of blockwise-quantized state.

A 16-bit rule has the shape of every npoptim rule plus the element's flat index and where it
falls in torch's loops, ``rule(p, g, s, h, i, tail) -> (new_p, new_s)`` (see
:mod:`npoptim.kernels.drivers`): its arguments are float32 values decoded from the 16-bit
storage, its record ``h`` has float32 fields, on/off switches that the loop is compiled with
(:mod:`npoptim.kernels.switches`: ``maximize``, ``decays``, ...), ``h.code``, the storage
format (:mod:`npoptim.precision.formats`), and ``h.tail_start``, the first element of torch's
scalar remainder loop: torch's CPU kernels run ``n - n % lanes`` elements through vector code
and the rest through scalar code, which rounds some operations differently (each 16-bit module
says where). ``tail`` is ``i >= h.tail_start``, computed by the driver, not the rule: the dense
driver runs the two parts as two loops, each passing a constant, so that the vector loop
compiles without the scalar tail's roundings (a flag computed per element made LLVM evaluate
both and select: 4x slower, measured on 1M float16 elements). The index also numbers the
element's draw in stochastic rounding (:mod:`npoptim.precision.stochastic`). The driver rounds
what the rule returns to the format once, when it writes it back; a rule that rounds every
operation (``rounding="per-op"``) returns values already in the format, so that last rounding
is exact for it.

The 16-bit rules are compiled into the drivers' loops (:func:`npoptim.kernels.jit.inlined`),
which then vectorize. A rule with two or more states returns them as ``new_states(m, v)``, not as
the literal ``(m, v)``: Numba's array analysis of a parallel kernel (the drivers have a
``prange`` loop) takes an inlined tuple literal nested in the returned pair for a shape and
refuses to compile; the call keeps the tuple opaque to it and costs nothing once compiled.

The driver of blockwise-quantized state, :func:`apply_blockwise`, runs a float32 rule on
moments dequantized a block at a time (:mod:`npoptim.precision.quantized`) and quantizes the
new ones per block.
"""
import numpy as np
from numba import prange
from numba.extending import overload

from npoptim.kernels.drivers import (load_state, prefetch_first_rows, prefetch_row_ahead,
                                     slice_states, store_state)
from npoptim.kernels.jit import JIT_OPTIONS, driver, kernel
from npoptim.kernels.parallel import parallel_threshold
from npoptim.precision.formats import BFLOAT16, from_float32, read_float32, to_float32
from npoptim.precision.quantized import decode, encode_state_block


@kernel
def new_states(*values):
    """The tuple of a 16-bit rule's new states (see the module docstring for why a rule
    returns ``new_states(m, v)`` rather than ``(m, v)``)."""
    return values


def decode_each(values, code):
    """``(read_float32(values[0], code), ...)``."""
    return tuple([read_float32(v, code) for v in values])


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
        return lambda values, code: (read_float32(values[0], code),)
    if n == 2:
        return lambda values, code: (read_float32(values[0], code),
                                     read_float32(values[1], code))
    if n == 3:
        return lambda values, code: (read_float32(values[0], code),
                                     read_float32(values[1], code),
                                     read_float32(values[2], code))


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


def vector_end(hyper, n):
    """Where torch's scalar tail starts in ``n`` elements: ``min(n, hyper.tail_start)``, or
    ``n`` for a record without ``tail_start`` (a rule that rounds alike everywhere)."""
    return min(n, getattr(hyper, "tail_start", n))


@overload(vector_end, jit_options=JIT_OPTIONS)
def _vector_end_jit(hyper, n):
    if "tail_start" in getattr(hyper, "fields", ()):
        return lambda hyper, n: min(n, hyper.tail_start)
    return lambda hyper, n: n


@driver
def _update16(rule, param, g, states, hyper, at, i, tail):
    """Element ``at`` of ``param`` and ``states`` updated with the gradient bits ``g``; ``i`` is
    the element's flat index in the whole parameter, ``tail`` whether it is in torch's scalar
    tail (what the rule is told)."""
    code = hyper.code
    p, values = rule(read_float32(param[at], code), read_float32(g, code),
                     decode_each(load_state(states, at), code), hyper, i, tail)
    param[at] = from_float32(p, code)
    store_state(states, at, encode_each(values, code))


@driver(parallel=True)
def _dense16(rule, param, grad, states, hyper):
    """torch's vector part (``tail=False``), then its scalar tail (``tail=True``): two loops,
    each with its flag a constant (see the module docstring)."""
    n = param.size
    vector = vector_end(hyper, n)
    if vector >= parallel_threshold():
        for i in prange(vector):
            _update16(rule, param, grad[i], states, hyper, i, i, False)
    else:
        for i in range(vector):
            _update16(rule, param, grad[i], states, hyper, i, i, False)
    for i in range(vector, n):
        _update16(rule, param, grad[i], states, hyper, i, i, True)


@driver(parallel=True)
def apply_dense16(rule, param, grad, states, hyper):
    """Apply the float32 ``rule`` to every element of the flat ``uint16`` arrays ``param``,
    ``grad`` and ``states`` (bits of the format ``hyper.code``). Element-wise: the result is the
    same whatever the thread count.

    The loop is written out once for each format: in each copy the compiler knows
    ``hyper.code``, drops the other format's conversions and vectorizes what is left."""
    if hyper.code == BFLOAT16:
        _dense16(rule, param, grad, states, hyper)
    else:
        _dense16(rule, param, grad, states, hyper)


@driver
def _update_row16(rule, param, ncols, rows, row_ptr, indices, data, states, hyper, j):
    base = rows[j] * ncols
    start = row_ptr[j]
    stop = row_ptr[j + 1]
    if stop - start == ncols:
        # a full row (an embedding's) as a dense block, through slices: LLVM vectorizes this
        # loop, not the same loop indexing the whole arrays at base + c (11x slower, measured)
        p = param[base:base + ncols]
        g = data[start:stop]
        s = slice_states(states, base, base + ncols)
        for c in range(ncols):
            _update16(rule, p, g[c], s, hyper, c, base + c, base + c >= hyper.tail_start)
    else:
        for k in range(start, stop):
            i = base + indices[k]
            _update16(rule, param, data[k], states, hyper, i, i, i >= hyper.tail_start)


@driver
def _rows16_serial(rule, param, ncols, rows, row_ptr, indices, data, states, hyper, first,
                   last):
    """Rows ``rows[first:last]``, prefetched ``PREFETCH_ROWS`` touched rows ahead (as
    :func:`npoptim.kernels.drivers.apply_rows` does)."""
    prefetch_first_rows(param, states, rows, ncols, first, last)
    for j in range(first, last):
        prefetch_row_ahead(param, states, rows, ncols, j, last)
        _update_row16(rule, param, ncols, rows, row_ptr, indices, data, states, hyper, j)


@driver(parallel=True)
def _rows16(rule, param, ncols, rows, row_ptr, indices, data, states, hyper):
    n = rows.size
    if row_ptr[n] >= parallel_threshold():
        for j in prange(n):
            _update_row16(rule, param, ncols, rows, row_ptr, indices, data, states, hyper, j)
    else:
        _rows16_serial(rule, param, ncols, rows, row_ptr, indices, data, states, hyper, 0, n)


@driver(parallel=True)
def apply_rows16(rule, param, ncols, rows, row_ptr, indices, data, states, hyper):
    """Apply the float32 ``rule`` to the stored entries of a canonical CSR gradient, the
    ``uint16`` arrays ``param``, ``data`` and ``states`` as :func:`apply_dense16` takes them,
    the gradient's touched rows as :func:`npoptim.kernels.drivers.apply_rows` takes them.
    Touched rows are distinct and element-wise: the same at any thread count. As in
    :func:`apply_dense16`, the loop is written out once for each format."""
    if rows.size == 0:
        return
    if hyper.code == BFLOAT16:
        _rows16(rule, param, ncols, rows, row_ptr, indices, data, states, hyper)
    else:
        _rows16(rule, param, ncols, rows, row_ptr, indices, data, states, hyper)


def state_columns(states):
    """``(codes, scales, qmaps, luts)``, each a tuple over the quantized ``states`` (a parallel
    loop takes tuples of arrays, not tuples of tuples)."""
    return tuple(tuple(s[k] for s in states) for k in range(4))


@overload(state_columns, jit_options=JIT_OPTIONS)
def _state_columns_jit(states):
    n = len(states)
    if n == 2:
        return lambda states: ((states[0][0], states[1][0]), (states[0][1], states[1][1]),
                               (states[0][2], states[1][2]), (states[0][3], states[1][3]))
    if n == 3:
        return lambda states: ((states[0][0], states[1][0], states[2][0]),
                               (states[0][1], states[1][1], states[2][1]),
                               (states[0][2], states[1][2], states[2][2]),
                               (states[0][3], states[1][3], states[2][3]))


def decode_states(codes, scales, qmaps, i, block_size, codec):
    """``(decode(codes[0], i, ...), ...)``: element ``i``'s float32 value in each quantized
    state."""
    return tuple([decode(c, i, q, s, block_size, codec)
                  for c, s, q in zip(codes, scales, qmaps)])


@overload(decode_states, jit_options=JIT_OPTIONS)
def _decode_states_jit(codes, scales, qmaps, i, block_size, codec):
    n = len(codes)
    if n == 2:
        return lambda codes, scales, qmaps, i, block_size, codec: (
            decode(codes[0], i, qmaps[0], scales[0], block_size, codec),
            decode(codes[1], i, qmaps[1], scales[1], block_size, codec))
    if n == 3:
        return lambda codes, scales, qmaps, i, block_size, codec: (
            decode(codes[0], i, qmaps[0], scales[0], block_size, codec),
            decode(codes[1], i, qmaps[1], scales[1], block_size, codec),
            decode(codes[2], i, qmaps[2], scales[2], block_size, codec))


@driver
def _update_block(rule, param, grad, codes, scales, qmaps, luts, hyper, block):
    size = hyper.block_size
    start = block * size
    count = min(size, param.size - start)
    new = np.empty((len(codes), count), np.float32)
    for j in range(count):
        i = start + j
        s = decode_states(codes, scales, qmaps, i, size, hyper.codec)
        if hyper.code >= 0:  # 16-bit params and grads (uint16 bits of the format hyper.code)
            p, values = rule(to_float32(param[i], hyper.code),
                             to_float32(grad[i], hyper.code), s, hyper, i, False)
            param[i] = from_float32(p, hyper.code)
        else:  # (np.float32: the branch is typed for uint16 arrays too, never run there)
            p, values = rule(np.float32(param[i]), np.float32(grad[i]), s, hyper, i, False)
            param[i] = p
        for k in range(len(codes)):
            new[k, j] = values[k]
    for k in range(len(codes)):
        encode_state_block(new[k], (codes[k], scales[k], qmaps[k], luts[k]), start, count,
                           block, hyper.codec)


@driver(parallel=True)
def apply_blockwise(rule, param, grad, states, hyper):
    """Apply ``rule`` (the 16-bit rules' shape, ``rule(p, g, s, h, i, tail) -> (p, s)``, on
    float32 values; ``tail`` is False: no blockwise rule rounds otherwise in a scalar tail) to
    every element, its states dequantized from ``states``, a tuple of 2 or 3
    quantized states ``(codes, scale, qmap, lut)`` (``lut``: bitsandbytes' table, for
    ``h.codec == BNB8``), and quantize the new states a block at a time (the last block may
    be short). ``param`` and ``grad`` are float32, or (``h.code >= 0``) ``uint16`` bits of
    that 16-bit format, the new parameter rounded to nearest (a rule rounding stochastically
    returns a value of the format: exact). Blocks are independent: the same at any thread
    count."""
    blocks = -(-param.size // hyper.block_size)
    codes, scales, qmaps, luts = state_columns(states)
    if param.size >= parallel_threshold():
        for b in prange(blocks):
            _update_block(rule, param, grad, codes, scales, qmaps, luts, hyper, b)
    else:
        for b in range(blocks):
            _update_block(rule, param, grad, codes, scales, qmaps, luts, hyper, b)
