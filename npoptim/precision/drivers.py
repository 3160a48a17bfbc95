"""The driver of 16-bit updates: a rule computes in float32 on values decoded from 16-bit bits.

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
"""
from numba import prange
from numba.extending import overload

from npoptim.kernels.drivers import load_state, store_state
from npoptim.kernels.jit import JIT_OPTIONS, driver
from npoptim.kernels.parallel import parallel_threshold
from npoptim.precision.formats import from_float32, to_float32


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
