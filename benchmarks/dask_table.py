"""Benchmark: a ShardedTable on 2 local Dask workers against the plain optimizer in one process.

    python benchmarks/dask_table.py [--rows 2000000 20000000] [--steps 100]

For each table size (D=16, float32, SparseAdam, batches of 4,096 Zipf(1.2) lookups), runs the
one-process optimizer, then (after it is freed) the sharded table on a LocalCluster of two
worker processes bound to 127.0.0.1, one configuration after the other to stay within memory.
Reports steps per second (lookup + gradient + step, warm) and the bytes moved between the
client and the workers per step. This is a benchmark, not a test.

Tables are on 4 KiB pages (NUMPY_MADVISE_HUGEPAGE=0, set here before NumPy is imported, and
inherited by the workers): with NumPy's transparent huge pages, every scattered first touch of
a 20M-row table and its state zero-fills 2 MiB, and the one-process run spends its steps
faulting pages in (11 steps/s measured) instead of stepping.
"""
import argparse
import gc
import os
import time

os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
import numpy as np  # noqa: E402

import npoptim  # noqa: E402

DIM, BATCH = 16, 4096


def stream(num_rows, seed=0):
    rng = np.random.default_rng(seed)
    while True:
        ids = np.minimum(rng.zipf(1.2, BATCH) - 1, num_rows - 1)
        yield ids, rng.standard_normal((BATCH, DIM)).astype(np.float32)


def one_process(num_rows, steps):
    table = np.zeros((num_rows, DIM), np.float32)
    opt = npoptim.SparseAdam([table], lr=1e-2)
    batches = stream(num_rows)
    for _ in range(5):
        ids, g = next(batches)
        opt.step([npoptim.row_sparse_grad(ids, g + table[ids], num_rows)])
    start = time.perf_counter()
    for _ in range(steps):
        ids, g = next(batches)
        opt.step([npoptim.row_sparse_grad(ids, g + table[ids], num_rows)])
    return steps / (time.perf_counter() - start)


def sharded(num_rows, steps, memory_limit):
    from distributed import Client, LocalCluster
    from npoptim.distributed import ShardedTable
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address=None, memory_limit=memory_limit, silence_logs=40)
    with Client(cluster) as client:
        table = ShardedTable(client, num_rows, DIM, "SparseAdam", {"lr": 1e-2})
        batches = stream(num_rows)
        for _ in range(5):
            ids, g = next(batches)
            table.step((ids, g + table.lookup(ids)))
        sent, received = table.bytes_sent, table.bytes_received
        start = time.perf_counter()
        for _ in range(steps):
            ids, g = next(batches)
            table.step((ids, g + table.lookup(ids)))
        rate = steps / (time.perf_counter() - start)
        moved = (table.bytes_sent - sent + table.bytes_received - received) / steps
        table.close()
    cluster.close()
    return rate, moved


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[2_000_000, 20_000_000])
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args(argv)
    print("| table rows | one process (steps/s) | 2 Dask workers (steps/s) | sharded / one "
          "process | bytes moved per step |")
    print("|---|---|---|---|---|")
    for rows in args.rows:
        single = one_process(rows, args.steps)
        gc.collect()
        shard_bytes = rows * DIM * 4 * 3 // 2  # params + two moments, half the rows each
        limit = f"{max(1, 2 * shard_bytes // 2**30 + 1)}GiB"
        rate, moved = sharded(rows, args.steps, limit)
        print(f"| {rows:,} | {single:.0f} | {rate:.0f} | {rate / single:.2f}x | "
              f"{moved / 1024:.0f} KiB |", flush=True)


if __name__ == "__main__":
    main()
