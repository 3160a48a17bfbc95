"""The FBGEMM side of the embedding comparisons (``fbgemm_gpu``'s CPU build, where installed).

FBGEMM has no separate optimizer step: the backward pass of a
``SplitTableBatchedEmbeddingBagsCodegen`` sums the lookups of each row and applies the update
to the table in the same pass. Its cost is timed as that backward alone, after an untimed
forward of the same batch (bags of one lookup, sum pooling), which is what an optimizer step
from lookups costs npoptim (building the gradient, then the step). One float32 table on the
host, FBGEMM's CPU path; weight decay off.
"""
import time

import numpy as np

#: npoptim's optimizer -> FBGEMM's ``OptimType`` of the same update
OPTIM_TYPES = {"Adagrad": "EXACT_ADAGRAD", "RowWiseAdagrad": "EXACT_ROWWISE_ADAGRAD"}


def load():
    """``(torch, the table class, EmbeddingLocation, PoolingMode, ComputeDevice, OptimType)``,
    or None when fbgemm_gpu does not import (not installed, or built for another torch)."""
    try:
        import torch
        from fbgemm_gpu.split_table_batched_embeddings_ops_common import (EmbeddingLocation,
                                                                          PoolingMode)
        from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
            ComputeDevice, OptimType, SplitTableBatchedEmbeddingBagsCodegen)
    except Exception:
        return None
    return (torch, SplitTableBatchedEmbeddingBagsCodegen, EmbeddingLocation, PoolingMode,
            ComputeDevice, OptimType)


def table(optimizer, nrows, width, lr=1e-2, eps=1e-10):
    """A one-table ``SplitTableBatchedEmbeddingBagsCodegen`` (``nrows x width`` float32 on the
    host) that applies ``optimizer``'s update in its backward; None without fbgemm_gpu or for
    an optimizer FBGEMM does not have. Sets torch to one thread."""
    loaded = load()
    if loaded is None or optimizer not in OPTIM_TYPES:
        return None
    torch, Table, Location, Pooling, Device, OptimType = loaded
    torch.set_num_threads(1)
    return Table(embedding_specs=[(nrows, width, Location.HOST, Device.CPU)],
                 optimizer=getattr(OptimType, OPTIM_TYPES[optimizer]), learning_rate=lr,
                 eps=eps, pooling_mode=Pooling.SUM)


def backward_ms(emb, lookup_batches, rounds):
    """Median milliseconds of ``emb``'s backward (which applies its update) over ``rounds``
    calls, cycling through ``lookup_batches`` (``(ids, values)`` pairs of NumPy arrays, all of
    one size), each after an untimed forward of the same batch; one warm-up call per batch."""
    import torch

    batch = lookup_batches[0][0].size
    offsets = torch.arange(batch + 1, dtype=torch.int64)
    tensors = [(torch.from_numpy(ids), torch.from_numpy(v)) for ids, v in lookup_batches]
    samples = []
    for k in range(len(tensors) + rounds):
        ids, grad = tensors[k % len(tensors)]
        out = emb(ids, offsets)
        start = time.perf_counter()
        out.backward(grad)
        if k >= len(tensors):
            samples.append(time.perf_counter() - start)
    return float(np.median(samples)) * 1e3
