"""Embedding tables sharded by row over a Dask cluster, bit-identical to one process.

For tables (with their optimizer state) beyond what one machine holds: a 100M x 64 float32
table with SparseAdam's two moments is 77 GB. Each Dask worker owns the rows of one shard,
dealt out by id (:mod:`npoptim.distributed.partition`: id mod N, or a hash, so that Zipf-skewed
lookups spread), as an actor holding a regular npoptim optimizer over its local rows
(:class:`~npoptim.distributed.shard.TableShard`). A training loop needs two calls::

    from distributed import Client, LocalCluster
    from npoptim.distributed import ShardedTable

    cluster = LocalCluster(n_workers=2, host="127.0.0.1", dashboard_address=None,
                           memory_limit="4GiB")
    client = Client(cluster)
    table = ShardedTable(client, 2_000_000, 16, "SparseAdam", {"lr": 1e-2})
    rows = table.lookup(ids)                 # forward: gather rows
    table.step((ids, grad_rows))             # backward: the lookups' gradient rows
    table.save("ckpt/")                      # one atomic checkpoint per shard + manifest
    table = ShardedTable.load(client, "ckpt/")   # same or another number of workers

Results are bit-identical to one process running the same optimizer on the whole table: the
update rules are element-wise, the rows of repeated ids are summed in lookup order on the
shard that owns them, and every shard steps on every step, so per-tensor step counts
(SparseAdam's ``step``, which advances even for an empty gradient) advance together.

On one machine it is slower than the plain optimizer (every call crosses to the workers and
back); use it for capacity. Size each worker's ``memory_limit`` for its shard: rows x dim x
itemsize x (1 + state arrays per row: 2 for SparseAdam, 1 for Adagrad, 0 or 1 for SGD), plus
the batch; the nanny restarts a worker near its limit, and an actor's rows die with it. A
worker that dies makes the next call raise :class:`ShardLostError`: restore the table from the
last checkpoint. Requires ``pip install npoptim[dask]``.
"""
from npoptim.distributed.partition import Partition
from npoptim.distributed.table import ShardedTable, ShardLostError

__all__ = ["ShardedTable", "ShardLostError", "Partition"]
