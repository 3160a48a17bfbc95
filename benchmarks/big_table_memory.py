"""Peak memory of SparseAdam on a big embedding table: params + state + O(touched rows)?

Trains a ``rows x dim`` float32 table (default 10M x 16, 640 MB) for ``steps`` steps with
SparseAdam, each step a gradient from ``embedding_row_grad`` over ``density * rows`` random
lookups (repeats included), and reports:

* peak RSS of the process (``VmHWM``) and, per step, the peak RSS *above* the RSS before
  the step (Linux: ``/proc/self/clear_refs`` resets the high-water mark before each step);
* the peak of Python-visible allocations per step (``tracemalloc``: NumPy's allocations,
  not those made inside Numba kernels, which only the RSS sees);
* the bytes of the parameters and the state, and of one step's gradient;
* time per step, and optionally (``--checkpoint PATH``) the size, time and peak-RSS cost of
  ``npoptim.save`` and ``npoptim.load`` of the trained table.

Not run in CI (the full size needs ~2.5 GB of RAM and a minute or two);
tests/test_checkpoint.py runs it at a tiny size. Usage::

    python benchmarks/big_table_memory.py                     # 10M x 16, 200 steps, 0.1%
    python benchmarks/big_table_memory.py --rows 1000000 --steps 50 --checkpoint /tmp/t.npz
    python benchmarks/big_table_memory.py --json              # machine-readable
"""
import argparse
import json
import os
import pathlib
import platform
import resource
import sys
import time
import tracemalloc

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import npoptim  # noqa: E402
from npoptim.checkpoint import load, save  # noqa: E402

MB = 1024 * 1024


def rss_bytes(field="VmRSS"):
    """Current (``VmRSS``) or peak (``VmHWM``) resident set size, from /proc (Linux)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    # elsewhere: the lifetime peak only (KB on Linux, bytes on macOS)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak * (1 if sys.platform == "darwin" else 1024)


def reset_peak_rss():
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def measure(fn):
    """Run ``fn``; return (result, seconds, peak RSS above the RSS before, tracemalloc peak)."""
    can_reset = reset_peak_rss()
    rss_before = rss_bytes()
    tracemalloc.reset_peak()
    traced_before = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - t0
    traced_peak = tracemalloc.get_traced_memory()[1] - traced_before
    rss_peak = rss_bytes("VmHWM") - rss_before if can_reset else float("nan")
    return result, seconds, rss_peak, traced_peak


def warm_up(dim):
    """Compile (or load from Numba's cache) the kernels on a tiny table, so that the memory
    the compiler takes counts in the baseline, not in the training it is compared with."""
    tiny = np.zeros((4, dim), np.float32)
    opt = npoptim.SparseAdam([tiny])
    for _ in range(2):
        opt.step([npoptim.embedding_row_grad([1, 3, 1], np.ones((3, dim), np.float32), 4)])


def run(rows, dim, steps, density, checkpoint=None, seed=0):
    warm_up(dim)
    tracemalloc.start()
    rng = np.random.default_rng(seed)
    baseline_rss = rss_bytes()
    table = rng.standard_normal((rows, dim), dtype=np.float32)
    table *= np.float32(0.01)
    opt = npoptim.SparseAdam([table], lr=1e-3)
    lookups = max(1, int(round(density * rows)))

    def make_grad():
        ids = rng.integers(0, rows, lookups)
        values = rng.standard_normal((lookups, dim), dtype=np.float32)
        return npoptim.embedding_row_grad(ids, values, rows)

    step_times, step_rss, step_traced, grad_rss, grad_traced = [], [], [], [], []
    touched = 0
    grad_bytes = 0
    for _ in range(steps):
        grad, _, g_rss, g_traced = measure(make_grad)
        grad_rss.append(g_rss)
        grad_traced.append(g_traced)
        grad_bytes = max(grad_bytes, grad.indptr.nbytes + grad.indices.nbytes + grad.data.nbytes)
        touched = max(touched, int(np.count_nonzero(np.diff(grad.indptr))))
        _, seconds, s_rss, s_traced = measure(lambda g=grad: opt.step([g]))
        step_times.append(seconds)
        step_rss.append(s_rss)
        step_traced.append(s_traced)
        del grad
    params_bytes = table.nbytes
    state_bytes = sum(v.nbytes for s in opt.state.values() for v in s.values()
                      if isinstance(v, np.ndarray))
    report = {
        "machine": f"{platform.machine()} {platform.system()}, {os.cpu_count()} CPUs, "
                   f"Python {platform.python_version()}, NumPy {np.__version__}",
        "rows": rows, "dim": dim, "steps": steps, "density": density,
        "lookups_per_step": lookups, "max_touched_rows_per_step": touched,
        "params_MB": params_bytes / MB, "state_MB": state_bytes / MB,
        "grad_MB": grad_bytes / MB,
        "baseline_rss_MB": baseline_rss / MB,
        "final_rss_MB": rss_bytes() / MB,
        "peak_rss_MB": rss_bytes("VmHWM") / MB,
        "step_ms_median": 1e3 * float(np.median(step_times)),
        "step_ms_first": 1e3 * step_times[0],
        "step_ms_max": 1e3 * max(step_times),
        "step_peak_rss_above_before_MB_max": max(step_rss[1:] or step_rss) / MB,
        "step_peak_traced_MB_max": max(step_traced[1:] or step_traced) / MB,
        "grad_build_peak_rss_MB_max": max(grad_rss[1:] or grad_rss) / MB,
        "grad_build_peak_traced_MB_max": max(grad_traced[1:] or grad_traced) / MB,
    }
    # everything above the interpreter's own memory, against the table + state it must hold
    report["overhead_over_params_state_MB"] = (report["peak_rss_MB"] - report["baseline_rss_MB"]
                                               - report["params_MB"] - report["state_MB"])
    if checkpoint:
        _, seconds, s_rss, s_traced = measure(lambda: save(checkpoint, opt))
        report.update(save_s=seconds, save_peak_rss_above_MB=s_rss / MB,
                      save_peak_traced_MB=s_traced / MB,
                      file_MB=os.path.getsize(checkpoint) / MB)
        _, seconds, l_rss, l_traced = measure(lambda: load(checkpoint, opt))
        report.update(load_s=seconds, load_peak_rss_above_MB=l_rss / MB,
                      load_peak_traced_MB=l_traced / MB)
    tracemalloc.stop()
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--density", type=float, default=0.001,
                        help="lookups per step as a fraction of the rows (default 0.001)")
    parser.add_argument("--checkpoint", metavar="PATH",
                        help="also time npoptim.save/load of the trained table to PATH")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    report = run(args.rows, args.dim, args.steps, args.density, args.checkpoint)
    if args.json:
        print(json.dumps(report, indent=2))
        return report
    r = report
    print(f"SparseAdam, {r['rows']:,} x {r['dim']} float32, {r['steps']} steps, "
          f"{r['lookups_per_step']:,} lookups/step ({100 * r['density']:g}%), "
          f"<= {r['max_touched_rows_per_step']:,} rows touched/step")
    print(f"  machine: {r['machine']}")
    print(f"  params {r['params_MB']:.0f} MB + state {r['state_MB']:.0f} MB = "
          f"{r['params_MB'] + r['state_MB']:.0f} MB; one gradient {r['grad_MB']:.1f} MB")
    print(f"  RSS: interpreter + libraries {r['baseline_rss_MB']:.0f} MB, peak "
          f"{r['peak_rss_MB']:.0f} MB, final {r['final_rss_MB']:.0f} MB; peak above "
          f"params + state + interpreter: {r['overhead_over_params_state_MB']:.0f} MB")
    print(f"  per step (max over steps 2..): optimizer step peak RSS +"
          f"{r['step_peak_rss_above_before_MB_max']:.1f} MB, traced "
          f"{r['step_peak_traced_MB_max']:.2f} MB; building the gradient peak RSS +"
          f"{r['grad_build_peak_rss_MB_max']:.1f} MB, traced "
          f"{r['grad_build_peak_traced_MB_max']:.2f} MB")
    print(f"  step time: median {r['step_ms_median']:.2f} ms, max {r['step_ms_max']:.1f} ms "
          f"(first, which creates the state: {r['step_ms_first']:.0f} ms)")
    if "save_s" in r:
        print(f"  checkpoint: {r['file_MB']:.0f} MB file; save {r['save_s']:.1f} s, peak RSS +"
              f"{r['save_peak_rss_above_MB']:.0f} MB; load {r['load_s']:.1f} s, peak RSS +"
              f"{r['load_peak_rss_above_MB']:.0f} MB")
    return report


if __name__ == "__main__":
    main()
