"""Timing on a shared, noisy machine: interleaved rounds and medians; the environment record.

Candidates compared with each other are timed in the same process, one call of each per
round, in a new random order every round (so that neither a burst of load from another
process nor the after-effects of the previous call, such as worker threads still spinning,
favour one candidate); the median of the rounds is reported. Ratios are only ever formed
between medians of one such run.
"""
import contextlib
import datetime
import os
import platform
import time

import numpy as np


def interleaved(fns, rounds=11, warmup=1, before=None, seed=0):
    """Median seconds of each ``fns[name]()`` over ``rounds`` interleaved rounds.

    ``before`` (if given) is called, untimed, before every timed call (e.g. an idle gap).
    Returns ``{name: {"median": s, "min": s, "samples": [s, ...]}}``.
    """
    names = list(fns)
    for name in names:
        for _ in range(warmup):
            fns[name]()
    samples = {name: [] for name in names}
    order = np.random.default_rng(seed)
    for _ in range(rounds):
        for name in order.permutation(names):
            if before is not None:
                before()
            start = time.perf_counter()
            fns[name]()
            samples[name].append(time.perf_counter() - start)
    return {name: {"median": float(np.median(s)), "min": float(np.min(s)), "samples": s}
            for name, s in samples.items()}


@contextlib.contextmanager
def one_thread(torch_module=None):
    """Numba (and torch, when given) on one thread inside the block, their thread counts
    restored after it: the cases that compare kernels, not thread pools, time in it."""
    import numba
    threads = numba.get_num_threads()
    torch_threads = torch_module.get_num_threads() if torch_module is not None else None
    try:
        numba.set_num_threads(1)
        if torch_module is not None:
            torch_module.set_num_threads(1)
        yield
    finally:
        numba.set_num_threads(threads)
        if torch_threads is not None:
            torch_module.set_num_threads(torch_threads)


def cycle(fn, items):
    """A call that applies ``fn`` to the next of ``items`` in turn (wrapping): one candidate of
    :func:`interleaved` stepping through several inputs, one per call."""
    state = {"k": 0}

    def call():
        fn(items[state["k"] % len(items)])
        state["k"] += 1
    return call


def cpu_name():
    """The CPU's model name from /proc/cpuinfo (or platform's guess)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(torch_module=None):
    """Date, CPU, core and thread counts, versions: the label of a results table."""
    import numba
    import scipy

    import npoptim
    from npoptim.kernels.parallel import get_parallel_threshold

    env = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
        "npoptim": npoptim.__version__,
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "numba": numba.__version__,
        "numba_threads": numba.get_num_threads(),
        "numba_threading_layer": _threading_layer(),
        "parallel_threshold": get_parallel_threshold(),
        "torch": None,
        "torch_threads": None,
    }
    if torch_module is not None:
        env["torch"] = torch_module.__version__
        env["torch_threads"] = torch_module.get_num_threads()
    return env


def _threading_layer():
    import numba
    try:
        return numba.threading_layer()
    except ValueError:  # no parallel region has run yet
        return None
