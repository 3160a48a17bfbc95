"""``npoptim compile``: compile npoptim's kernels into Numba's on-disk cache ahead of use.

Numba compiles a kernel the first time a process calls it with a new signature (about 2 s
each on a 2-core machine) and keeps it in its cache (``__pycache__`` beside the sources, or
``NUMBA_CACHE_DIR``). This command runs the golden suite's cases of each optimizer (dense,
row-sparse and CSR gradients, float32 and float64: :func:`npoptim.golden.regenerate.
build_optimizer_file`, its results thrown away), which compiles the kernels they take, so
that the processes started afterwards (a test run, a pool of workers, a container's first
job) load them instead. ``--jobs N`` splits the optimizers between N processes, each
compiling its own share (the cache is shared safely: :mod:`npoptim.kernels.cache_lock`).

Examples::

    npoptim compile --jobs 2
    npoptim compile --optimizer Adam --optimizer SparseAdam
"""
import subprocess
import sys
import time

from npoptim.cli.progress import ProgressLine


def add_arguments(parser):
    parser.add_argument("--optimizer", action="append", metavar="NAME",
                        help="compile this optimizer's kernels (repeatable; default: every "
                             "optimizer of the golden suite)")
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="processes to split the optimizers between (default 1)")


def shares(names, jobs):
    """``names`` dealt round-robin into at most ``jobs`` non-empty lists."""
    return [names[k::jobs] for k in range(min(jobs, len(names)))]


def run(args):
    from npoptim.golden import regenerate
    covered = regenerate.covered_optimizers()
    names = args.optimizer or covered
    unknown = [n for n in names if n not in covered]
    if unknown:
        print(f"error: no golden cases for {unknown[0]!r}; the optimizers with cases: "
              f"{', '.join(covered)}", file=sys.stderr)
        return 2
    if args.jobs < 1:
        print(f"error: --jobs must be at least 1, got {args.jobs}", file=sys.stderr)
        return 2
    start = time.monotonic()
    if args.jobs == 1:
        progress = ProgressLine("npoptim compile: optimizers done")
        for done, name in enumerate(names, 1):
            regenerate.build_optimizer_file(name)
            progress(done, len(names))
    else:
        procs = []
        for share in shares(names, args.jobs):
            command = [sys.executable, "-m", "npoptim", "compile"]
            for name in share:
                command += ["--optimizer", name]
            procs.append((share, subprocess.Popen(command)))
        failed = [share for share, proc in procs if proc.wait() != 0]
        if failed:
            print(f"error: a compile process failed (its optimizers: {', '.join(failed[0])})",
                  file=sys.stderr)
            return 1
    print(f"npoptim compile: the kernels of {len(names)} optimizers in "
          f"{time.monotonic() - start:.0f} s ({args.jobs} process"
          f"{'es' if args.jobs > 1 else ''})", flush=True)
    return 0
