"""npoptim's RowWiseAdagrad against FBGEMM's EXACT_ROWWISE_ADAGRAD on one CPU table.

A ``rows x width`` float32 table (default 1M x 16), batches of Zipf-distributed lookups
(default 1024, 4096 and 16384 per step: how the cost grows with the batch), one lookup per bag
(sum pooling), weight decay off (FBGEMM's common CPU path: the JIT ``GenerateSparseAdaGrad``
kernel of an unshared float32 table). Timed, interleaved, medians:

* ``npoptim step``: ``RowWiseAdagrad.step`` from a ready CSR gradient (``embedding_row_grad``);
* ``npoptim build+step``: building that gradient from the lookups, then the step;
* ``FBGEMM fwd+bwd``: FBGEMM's forward and its backward, which sums the lookups per row and
  applies the optimizer in one pass (it has no separate optimizer step), and ``FBGEMM fwd``
  alone; their difference estimates FBGEMM's build+step.

Run on one thread each (``--threads``, default 1: torch's and Numba's thread pools swing on a
shared machine) unless told otherwise. Needs torch 2.13.0 and fbgemm-gpu-cpu 1.8.0; not run
in CI (not a timed test). Usage::

    python benchmarks/rowwise_adagrad_fbgemm.py
    python benchmarks/rowwise_adagrad_fbgemm.py --rows 100000 --batches 4096 --rounds 5
"""
import argparse
import json
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from npoptim import embedding_row_grad  # noqa: E402
from npoptim.bench.timing import environment, interleaved  # noqa: E402
from npoptim.optim.rowwise_adagrad import RowWiseAdagrad  # noqa: E402


def fbgemm_table(w0, lr, eps):
    from fbgemm_gpu.split_embedding_configs import EmbOptimType
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import (
        ComputeDevice, EmbeddingLocation, PoolingMode)
    from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
        SplitTableBatchedEmbeddingBagsCodegen)
    import torch

    rows, width = w0.shape
    table = SplitTableBatchedEmbeddingBagsCodegen(
        embedding_specs=[(rows, width, EmbeddingLocation.HOST, ComputeDevice.CPU)],
        optimizer=EmbOptimType.EXACT_ROWWISE_ADAGRAD, learning_rate=lr, eps=eps,
        pooling_mode=PoolingMode.SUM)
    with torch.no_grad():
        table.split_embedding_weights()[0].copy_(torch.from_numpy(w0))
    return table


def zipf_ids(rng, rows, batch, exponent=1.1):
    """``batch`` row ids, rank-Zipf over a random permutation of the rows (repeats)."""
    ranks = np.minimum(rng.zipf(exponent, batch) - 1, rows - 1)
    return rng.permutation(rows)[ranks].astype(np.int64)


def measure(rows, width, batch, rounds, seed=0):
    import torch

    rng = np.random.default_rng(seed)
    w0 = rng.uniform(-0.1, 0.1, (rows, width)).astype(np.float32)
    ids = zipf_ids(rng, rows, batch)
    values = rng.standard_normal((batch, width)).astype(np.float32) * 1e-3
    param = w0.copy()
    opt = RowWiseAdagrad([param], lr=0.01, eps=1e-8)
    grad = embedding_row_grad(ids, values, rows)
    table = fbgemm_table(w0, 0.01, 1e-8)
    t_ids = torch.from_numpy(ids)
    offsets = torch.arange(batch + 1, dtype=torch.int64)
    t_values = torch.from_numpy(values)

    def fbgemm_forward_backward():
        table(t_ids, offsets).backward(t_values)

    def fbgemm_forward():
        with torch.no_grad():
            table(t_ids, offsets)

    res = interleaved({
        "npoptim step": lambda: opt.step([grad]),
        "npoptim build+step": lambda: opt.step([embedding_row_grad(ids, values, rows)]),
        "FBGEMM fwd+bwd": fbgemm_forward_backward,
        "FBGEMM fwd": fbgemm_forward,
    }, rounds=rounds)
    ms = {k: v["median"] * 1e3 for k, v in res.items()}
    ms["FBGEMM bwd (fwd+bwd - fwd)"] = ms["FBGEMM fwd+bwd"] - ms["FBGEMM fwd"]
    return {"rows": rows, "width": width, "batch": batch,
            "touched_rows": int(np.unique(ids).size), "ms": ms,
            "fbgemm_bwd_over_npoptim_build_step": ms["FBGEMM bwd (fwd+bwd - fwd)"]
            / ms["npoptim build+step"]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--batches", default="1024,4096,16384")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    import numba
    import torch

    if args.threads:
        numba.set_num_threads(args.threads)
        torch.set_num_threads(args.threads)
    results = [measure(args.rows, args.width, int(b), args.rounds)
               for b in args.batches.split(",")]
    if args.json:
        print(json.dumps({"environment": environment(torch), "results": results}, indent=1,
                         default=float))
        return 0
    print(f"RowWiseAdagrad vs FBGEMM EXACT_ROWWISE_ADAGRAD, {args.rows:,}x{args.width} f32, "
          f"{args.threads or 'default'} thread(s), medians of {args.rounds} (ms)")
    for r in results:
        cells = "  ".join(f"{k} {v:.3f}" for k, v in r["ms"].items())
        print(f"batch {r['batch']:>6} ({r['touched_rows']} rows): {cells}  "
              f"FBGEMM bwd / npoptim build+step {r['fbgemm_bwd_over_npoptim_build_step']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
