"""Train an embedding table larger than this machine's memory, from memory-mapped files.

SparseAdam on a ROWS x WIDTH float32 table whose parameters and state live as ``.npy`` files
in a :class:`npoptim.storage.MemmapStore` directory on local disk (default 150M x 16: 9.6 GB
of parameters and 19.2 GB of state, 28.8 GB in all), for STEPS journaled steps
(``store.step``), each a ``row_sparse_grad`` of 4,096 Zipf(1.2) lookups scattered over the
table. Reports steps/s and the process's anonymous memory (``RssAnon``, sampled during the
run): resident pages of the memory-mapped files are page cache, not counted there, and the
kernel drops them under pressure.

The parameters are written in full at the start (a uniform initialisation, as training would
start from); the state files start as sparse files of zeros, so they take disk space only
where rows are touched. The script checks the free disk space first and refuses a table that
would not fit, and removes its directory at the end (``--keep`` to keep it).

    python benchmarks/out_of_core.py --dir /work/ooc --rows 150000000 --steps 1000
"""
import argparse
import json
import os
import shutil
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import npoptim  # noqa: E402
from npoptim.bench.scale import batches, rss_anon_mb  # noqa: E402
from npoptim.storage import MemmapStore  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True, help="directory for the table (local disk)")
    parser.add_argument("--rows", type=int, default=150_000_000)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--keep", action="store_true", help="keep the table's directory")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)

    table_bytes = args.rows * args.width * 4
    total = 3 * table_bytes  # param + exp_avg + exp_avg_sq
    os.makedirs(args.dir, exist_ok=True)
    free = shutil.disk_usage(args.dir).free
    if total > 0.9 * free:
        print(f"the table needs {total / 1e9:.1f} GB, {args.dir} has {free / 1e9:.1f} GB free",
              file=sys.stderr)
        return 2
    directory = os.path.join(args.dir, "table")
    try:
        start = time.perf_counter()
        store = MemmapStore(directory)
        emb = store.param("emb", (args.rows, args.width), np.float32)
        rows = emb.reshape(args.rows, args.width)
        chunk = max(1, (64 << 20) // (4 * args.width))
        rng = np.random.default_rng(0)
        for first in range(0, args.rows, chunk):  # uniform init, written chunk by chunk
            block = rows[first:first + chunk]
            block[...] = rng.uniform(-0.01, 0.01, block.shape).astype(np.float32)
        emb.flush()
        init_s = time.perf_counter() - start
        opt = npoptim.SparseAdam([emb], lr=1e-2, state_arrays=store)
        data = batches(args.rows, args.width)
        rss = [rss_anon_mb()]
        start = time.perf_counter()
        for step in range(args.steps):
            ids, values = data[step % len(data)]
            store.step(opt, [npoptim.row_sparse_grad(ids, values, args.rows)])
            if step % 50 == 0:
                rss.append(rss_anon_mb())
        elapsed = time.perf_counter() - start
        rss.append(rss_anon_mb())
        used = sum(os.stat(os.path.join(directory, f)).st_blocks * 512
                   for f in os.listdir(directory))
        result = {"rows": args.rows, "width": args.width, "steps": args.steps,
                  "table_gb": total / 1e9, "disk_used_gb": used / 1e9,
                  "init_s": init_s, "steps_per_s": args.steps / elapsed,
                  "ms_per_step": 1e3 * elapsed / args.steps,
                  "rss_anon_mb_max": max(r for r in rss if r is not None) if rss[0] else None,
                  "rss_anon_mb_start": rss[0]}
    finally:
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>18}: {value:,.3f}" if isinstance(value, float) else
                  f"{key:>18}: {value:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
