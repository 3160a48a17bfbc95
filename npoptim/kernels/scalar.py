"""Scalar helpers shared by update rules, written as torch's CPU kernels compute them.

torch's vectorized CPU kernels round some multiply-adds once (fused multiply-add):
``add(a, b, alpha)`` is ``fma(alpha, b, a)``, ``addcmul(s, t1, t2, value)`` is
``fma(value * t1, t2, s)`` and ``lerp`` is an fma in both of its forms. Rules use :func:`fma`
at those places. It is LLVM's correctly rounded ``llvm.fma`` when compiled, and an exact
rational computation under ``NUMBA_DISABLE_JIT=1``, so results do not depend on the CPU.

Rules never use numeric literals in arithmetic: Numba types a literal as float64 or int64,
which would silently promote float32 arithmetic to float64. :func:`constant` is the one way a
rule writes a number: ``constant(1.0, v)`` is 1 in ``v``'s dtype.
"""
import math
from fractions import Fraction

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload
from numba.np.numpy_support import as_dtype

from npoptim.kernels.jit import JIT_OPTIONS, kernel


def constant(value, like):
    """The number ``value`` in the dtype of the scalar ``like`` (a literal a rule can use)."""
    return type(like)(value)


@overload(constant, jit_options=JIT_OPTIONS)
def _constant_jit(value, like):
    if isinstance(like, types.Float):
        kind = as_dtype(like).type
        return lambda value, like: kind(value)


def fma(a, b, c):
    """``a * b + c`` rounded once, in the arguments' (common) float dtype."""
    dtype = np.result_type(a, b, c)
    a, b, c = float(a), float(b), float(c)
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)) or a * b == 0 or c == 0:
        # a single rounding already: IEEE arithmetic gives fma's inf/nan and signed zeros
        return dtype.type(a * b + c)
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    return _round_to(exact, dtype) if exact != 0 else dtype.type(0.0)


def _round_to(exact, dtype):
    """The ``dtype`` value nearest to the rational ``exact`` (ties to even)."""
    try:
        guess = dtype.type(float(exact))  # int/int division: correctly rounded to float64
    except OverflowError:
        return dtype.type(np.inf if exact > 0 else -np.inf)
    if dtype == np.float64 or not np.isfinite(guess):
        return guess
    # float64 then float32 can round twice; the right answer is the guess or a neighbour
    candidates = [np.nextafter(guess, dtype.type(-np.inf)), guess,
                  np.nextafter(guess, dtype.type(np.inf))]
    finite = [x for x in candidates if np.isfinite(x)]
    return min(finite, key=lambda x: (abs(Fraction(float(x)) - exact),
                                      int(np.asarray(x).view(np.int32)) & 1))


@intrinsic
def _llvm_fma(typingctx, a, b, c):
    if not (isinstance(a, types.Float) and a == b == c):
        return None

    def codegen(context, builder, signature, args):
        t = args[0].type
        name = "llvm.fma.f64" if t == ir.DoubleType() else "llvm.fma.f32"
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(t, [t, t, t]), name)
        return builder.call(fn, args)

    return a(a, b, c), codegen


@overload(fma, jit_options=JIT_OPTIONS)
def _fma_jit(a, b, c):
    if isinstance(a, types.Float) and a == b == c:
        return lambda a, b, c: _llvm_fma(a, b, c)


@kernel
def lerp(start, end, weight):
    """``start + weight * (end - start)``, rounded as torch's vectorized ``lerp``.

    torch switches form at ``|weight| = 0.5``: ``fma(weight, end - start, start)`` below it,
    ``fma(weight - 1, end - start, end)`` above (exact at ``weight == 1``).
    """
    if abs(weight) < 0.5:
        return fma(weight, end - start, start)
    return fma(weight - constant(1.0, weight), end - start, end)


@kernel
def decayed_grad(p, g, h):
    """The gradient torch's SGD-style rules step on: negated with ``h.maximize`` (1 or 0),
    then ``weight_decay * p`` added (L2 decay, ``grad.add(param, alpha=weight_decay)``; no
    fma when the decay is 0, so ``g`` passes unchanged, -0 and an infinite ``p`` included).
    The record ``h`` has the fields ``maximize`` and ``weight_decay``."""
    if h.maximize != 0:
        g = -g
    if h.weight_decay != 0:
        g = fma(h.weight_decay, p, g)
    return g


@kernel
def maximum(a, b):
    """``torch.maximum`` of two scalars: NaN if either is NaN (Python's ``max`` drops it)."""
    if a > b or a != a:
        return a
    return b


@kernel
def _lerp_flat(start, end, weight, out):
    for i in range(out.size):
        out[i] = lerp(start[i], end[i], weight)


def lerp_arrays(start, end, weight):
    """torch's ``start.lerp(end, weight)`` for arrays of one shape: a new array, each element
    rounded as :func:`lerp` (torch's vectorized kernel) rounds it, in ``start``'s dtype."""
    out = np.empty(start.shape, start.dtype)
    _lerp_flat(np.ascontiguousarray(start).reshape(-1),
               np.ascontiguousarray(end, dtype=start.dtype).reshape(-1),
               start.dtype.type(weight), out.reshape(-1))
    return out
