"""When kernels run on several threads: the size threshold, settable at run time.

The drivers (:mod:`npoptim.kernels.drivers`) split an update over threads (Numba ``prange``)
only when it touches at least :func:`parallel_threshold` elements; smaller updates run on the
calling thread. Below some size a parallel region costs more than it saves: waking the worker
threads takes microseconds when they spin, and milliseconds on a busy machine or after an idle
gap between steps. ``npoptim bench`` measures both sides on the machine at hand.

Results never depend on this setting nor on the thread count (``numba.set_num_threads``):
element-wise updates are the same whichever thread computes them. (A reduction, such as the
norms of LAMB/LARS, must fix its summation order by the array's size alone, never by the
thread count: see ``npoptim.kernels.reduction.sumsq_pair``.)

The threshold is read by compiled code at run time, so changing it needs no recompilation and
works with kernels loaded from Numba's on-disk cache: it lives in a C ``int64`` registered with
LLVM under a fixed symbol name, which cached machine code is relinked against in each process.
"""
import ctypes
import os

import numpy as np
from llvmlite import binding as _llvm
from llvmlite import ir as _ir
from numba.core import types as _types
from numba.extending import intrinsic, overload

from npoptim.kernels.jit import JIT_OPTIONS

#: Default minimum number of elements (dense) or stored entries (CSR) for a parallel update:
#: 2**22 (4.2M). Measured by ``npoptim bench`` on the 2-core shared machine this package is
#: benchmarked on (Adam float32, parallel time / serial time):
#:
#: * below 2**20 elements a parallel region is not worth it: 0.6-0.9 back to back, but 4-30x
#:   slower after a 50 ms idle gap (the workers have gone to sleep);
#: * from 2**22 on, on a quiet machine, 0.8-0.9 whether or not steps come back to back, which
#:   brings Adam, AdamW and Adagrad at 10M elements to torch's 2-thread fused Adam (0.96x) and
#:   to the memory floor (1.0x), where serial loops are 1.5-1.7x slower;
#: * when the other core is busy, a region costs 5-30 ms (the worker waits to be scheduled):
#:   at 4M-16M elements parallel was then 1.0-4.8x slower than serial;
#: * sparse row updates (SparseAdam, 1M x 64 float32 table): at 0.1% and 1% of rows (64,000
#:   and 640,000 entries) parallel was 0.7-0.8x serial back to back but 7 ms (10-30x) slower
#:   after a 50 ms idle gap; at 10% (6.4M entries) 0.7-0.8x either way. Scattered rows gain
#:   from a second thread sooner than streamed arrays do, but they pay the same wake-up, so
#:   the same threshold serves both.
#:
#: 2**22 takes the quiet-machine gain where a stall costs at most a few times a step that
#: already takes milliseconds. Set it higher on a busy machine, lower with idle cores
#: (:func:`set_parallel_threshold`, or ``NPOPTIM_PARALLEL_THRESHOLD`` in the environment).
DEFAULT_PARALLEL_THRESHOLD = 1 << 22

_SYMBOL = "npoptim_parallel_threshold_v1"


def _from_environment():
    try:
        return max(0, int(os.environ.get("NPOPTIM_PARALLEL_THRESHOLD",
                                         DEFAULT_PARALLEL_THRESHOLD)))
    except ValueError:
        return DEFAULT_PARALLEL_THRESHOLD


_threshold = ctypes.c_int64(_from_environment())
_llvm.add_symbol(_SYMBOL, ctypes.addressof(_threshold))


def set_parallel_threshold(elements):
    """Run updates of at least ``elements`` elements (or stored CSR entries) on several threads.

    ``0`` parallelises every update, ``None`` or a huge number none; returns the previous value.
    The number of threads is Numba's (``numba.set_num_threads``, ``NUMBA_NUM_THREADS``).
    Results are bit-identical whatever the threshold and the thread count.

    Parameters
    ----------
    elements : int or None
        the smallest update run on several threads; 0 parallelises every update, None
        none.
    """
    previous = get_parallel_threshold()
    if elements is None:
        elements = np.iinfo(np.int64).max
    elements = int(elements)
    if elements < 0:
        raise ValueError(f"parallel threshold must be >= 0 (or None), got {elements}")
    _threshold.value = elements
    return previous


def get_parallel_threshold():
    """The current threshold (see :func:`set_parallel_threshold`)."""
    return int(_threshold.value)


class parallel_threshold_set:
    """Context manager: ``with parallel_threshold_set(0): ...`` restores the old value on exit."""

    def __init__(self, elements):
        self.elements = elements

    def __enter__(self):
        self.previous = set_parallel_threshold(self.elements)
        return self

    def __exit__(self, *exc):
        set_parallel_threshold(self.previous)
        return False


def parallel_threshold():
    """The threshold, readable from compiled code (plain Python under NUMBA_DISABLE_JIT)."""
    return _threshold.value


@intrinsic
def _load_threshold(typingctx):
    def codegen(context, builder, signature, args):
        module = builder.module
        try:
            gv = module.get_global(_SYMBOL)
        except KeyError:
            gv = _ir.GlobalVariable(module, _ir.IntType(64), name=_SYMBOL)
            gv.linkage = "external"
        return builder.load(gv)
    return _types.int64(), codegen


@overload(parallel_threshold, jit_options=JIT_OPTIONS)
def _parallel_threshold_jit():
    return lambda: _load_threshold()
