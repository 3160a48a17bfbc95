"""The Numba configuration used by every kernel in npoptim.

* ``cache=True`` on every entry point (:func:`kernel`): compiled code is written next to the
  source, so a second process does not recompile.
* ``error_model='numpy'``: division by zero gives inf/nan as in NumPy and PyTorch instead of
  raising; it also lets LLVM vectorize loops that divide.
* no ``fastmath``: it reorders floating-point operations and changes results.

Drivers (:func:`driver`) take the update rule as an argument. Numba specialises them per rule
and cannot reuse that specialisation from its on-disk cache in another process, so they are
not cached themselves: they are compiled into the cached kernel that binds them to a rule.

With ``NUMBA_DISABLE_JIT=1`` every kernel runs as plain Python, steppable in a debugger.
"""
import numba

JIT_OPTIONS = {"error_model": "numpy"}


def kernel(func):
    """Compile ``func`` with npoptim's options and cache it on disk (see the module docstring)."""
    return numba.njit(cache=True, **JIT_OPTIONS)(func)


def driver(func):
    """Compile a driver: a loop that takes an update rule as its first argument.

    Drivers are inlined into the kernel that binds them to a rule (``inline='always'``, at the
    Numba IR level); otherwise the compiled call would pass the rule's dispatcher object by
    address, and Numba would refuse to cache that kernel on disk.
    """
    return numba.njit(inline="always", **JIT_OPTIONS)(func)
