"""The Numba configuration used by every kernel in npoptim.

* ``cache=True`` on every entry point (:func:`kernel`): compiled code is written next to the
  source, so a second process does not recompile. Processes that compile at once (a process
  pool, Dask workers, the tests' xdist workers) share that cache safely:
  :mod:`npoptim.kernels.cache_lock` puts a file lock around Numba's cache writes and reads.
* ``error_model='numpy'``: division by zero gives inf/nan as in NumPy and PyTorch instead of
  raising; it also lets LLVM vectorize loops that divide.
* no ``fastmath``: it reorders floating-point operations and changes results.

Drivers (:func:`driver`) take the update rule as an argument. Numba specialises them per rule
and cannot reuse that specialisation from its on-disk cache in another process, so they are
not cached themselves: they are compiled into the cached kernel that binds them to a rule.

A rule that LLVM's own inliner leaves as a call (the 16-bit per-op rules, large with their
roundings) keeps the loop around it from vectorizing: :func:`inlined` compiles such a function
into its callers at the Numba IR level. It changes where the code runs, never what it
computes (a bfloat16 SGD step on 1M elements: 1.8 ms against 14 ms, the same bits).

A driver may contain a ``prange`` loop (run above a size threshold, see
:mod:`npoptim.kernels.parallel`); a kernel that calls such a driver is compiled with
``parallel=True``, every other kernel (rules, helpers) without it, which keeps their compile
time and their load time from the cache small.

With ``NUMBA_DISABLE_JIT=1`` every kernel runs as plain Python, steppable in a debugger.

Intel's SVML stays off (:mod:`npoptim` sets ``NUMBA_DISABLE_INTEL_SVML`` before Numba loads):
a kernel's ``math.log`` or non-integer power is the C library's, the same function Python
and XLA call. If Numba was imported first with SVML on, a warning says so.
"""
import warnings

import numba

from npoptim.kernels import cache_lock

cache_lock.install()

if numba.config.USING_SVML:
    warnings.warn("Numba uses Intel SVML (imported before npoptim, NUMBA_DISABLE_INTEL_SVML "
                  "unset): npoptim's float64 jax stream and its kernels' non-integer powers may "
                  "differ from glibc's in the last bit", RuntimeWarning, stacklevel=2)

JIT_OPTIONS = {"error_model": "numpy"}

# the dispatchers of drivers that contain a prange loop
_PARALLEL_DRIVERS = []


def _calls_parallel_driver(func):
    names = getattr(getattr(func, "__code__", None), "co_names", ())
    glob = getattr(func, "__globals__", {})
    return any(any(glob.get(name) is d for d in _PARALLEL_DRIVERS) for name in names)


def kernel(func):
    """Compile ``func`` with npoptim's options and cache it on disk (see the module docstring).

    A kernel that calls a parallel driver is compiled with ``parallel=True``.
    """
    options = dict(JIT_OPTIONS)
    if _calls_parallel_driver(func):
        options["parallel"] = True
    return numba.njit(cache=True, **options)(func)


def inlined(func):
    """:func:`kernel`, also compiled into every caller at the Numba IR level
    (``inline='always'``): for a rule or a piece of one that a driver's loop calls, so that the
    loop vectorizes with it (see the module docstring). Called on its own it is a cached kernel
    like any other."""
    return numba.njit(cache=True, inline="always", **JIT_OPTIONS)(func)


def driver(func=None, *, parallel=False):
    """Compile a driver: a loop that takes an update rule as its first argument.

    Drivers are inlined into the kernel that binds them to a rule (``inline='always'``, at the
    Numba IR level); otherwise the compiled call would pass the rule's dispatcher object by
    address, and Numba would refuse to cache that kernel on disk. ``parallel=True`` marks a
    driver with a ``prange`` loop: kernels that call it are compiled with ``parallel=True``.
    """
    if func is None:
        return lambda f: driver(f, parallel=parallel)
    dispatcher = numba.njit(inline="always", **JIT_OPTIONS)(func)
    if parallel:
        _PARALLEL_DRIVERS.append(dispatcher)
    return dispatcher
