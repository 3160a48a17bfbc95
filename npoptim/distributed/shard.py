"""One shard of a :class:`~npoptim.distributed.ShardedTable`: a Dask actor on one worker.

It owns the rows of its shard (see :mod:`npoptim.distributed.partition`) as a plain array of
``(local rows, dim)``, and a regular npoptim optimizer over that array, so its step is the
very kernel a single process runs on those rows. A step comes in two phases:
:meth:`TableShard.prepare` builds and validates the shard's gradient without changing
anything, :meth:`TableShard.commit` applies it (it cannot fail on input the prepare
accepted). The client prepares every shard before it commits any, so bad input changes no
shard.
"""
import numpy as np

from npoptim import checkpoint, registry
from npoptim.distributed.partition import Partition
from npoptim.sparse.rowsparse import RowSparseGrad, row_sparse_grad


class TableShard:
    """Rows ``partition.owned_ids(shard)`` of the table and their optimizer state."""

    def __init__(self, shard, kind, num_shards, num_rows, dim, dtype, optimizer, options,
                 initializer=None):
        self.partition = Partition(kind, num_shards, num_rows)
        self.shard = int(shard)
        self._owned = None if kind == "mod" else self.partition.owned_ids(self.shard)
        rows = self.partition.num_local_rows(self.shard)
        self.table = np.zeros((rows, int(dim)), np.dtype(dtype))
        if initializer is not None and rows:
            self.table[...] = initializer(self.global_ids())
        self.optimizer_name, self.options = optimizer, dict(options)
        self.optimizer = registry.get(optimizer)([self.table], **self.options)
        self._pending = None

    # ---------------------------------------------------------------------------- layout
    def global_ids(self):
        return self.partition.owned_ids(self.shard) if self._owned is None else self._owned

    def _to_local(self, ids):
        if self._owned is None:
            return ids // self.partition.num_shards
        return np.searchsorted(self._owned, ids)

    def num_rows(self):
        return int(self.table.shape[0])

    # ------------------------------------------------------------------- lookups and steps
    def lookup(self, ids):
        """The rows of global ``ids`` (all owned by this shard)."""
        return self.table[self._to_local(np.asarray(ids, np.int64))]

    def prepare(self, payload):
        """Build and validate this shard's gradient for the next step; change nothing.

        ``payload`` is ``("lookups", ids, values)`` (global ids of this shard, in lookup
        order, and their gradient rows: summed here by :func:`row_sparse_grad`, in lookup
        order, exactly as one process sums them), ``("row_block", ids, values)`` (a row-sparse
        gradient's increasing rows of this shard and their block) or ``("rows", ids, counts,
        indices, data)`` (the stored entries of the CSR rows ``ids`` of this shard,
        increasing). The first two cost O(touched rows); the CSR form O(local rows).
        """
        kind = payload[0]
        if kind == "lookups":
            _, ids, values = payload
            grad = row_sparse_grad(self._to_local(ids), values, self.num_rows())
        elif kind == "row_block":
            _, ids, values = payload
            grad = RowSparseGrad(self._to_local(ids), values, self.num_rows())
        elif kind == "rows":
            import scipy.sparse
            _, ids, counts, indices, data = payload
            indptr = np.zeros(self.num_rows() + 1, np.int64)
            indptr[self._to_local(ids) + 1] = counts
            np.cumsum(indptr, out=indptr)
            grad = scipy.sparse.csr_array((data, indices, indptr), shape=(self.num_rows(),
                                                                           self.table.shape[1]))
        else:
            raise ValueError(f"unknown payload kind {kind!r}")
        self._pending = self.optimizer._prepare([grad])
        return True

    def commit(self):
        """Apply the prepared step (every shard steps, an empty one included, so per-tensor
        step counts advance as in one process)."""
        if self._pending is None:
            raise RuntimeError("commit without a prepared step")
        prepared, self._pending = self._pending, None
        self.optimizer._apply(prepared)
        return True

    def abort(self):
        self._pending = None
        return True

    # ------------------------------------------------------------------------- checkpoint
    def save(self, path):
        """An ordinary atomic npoptim checkpoint of this shard's table and optimizer."""
        checkpoint.save(path, self.optimizer)
        return True

    def load(self, path):
        checkpoint.load(path, self.optimizer)
        return True

    def reshard_from(self, sources):
        """Fill this shard from the checkpoints of another layout: ``sources`` lists
        ``(path, kind, num_shards, shard)`` of every old shard. Each old shard is loaded in
        turn (one at a time, so a shard's memory holds its own rows plus one old shard's),
        and the rows this shard owns are copied, with their per-row state; per-tensor state
        (the step count) must be the same on every old shard."""
        mine = self.global_ids()
        state, groups, names = None, None, None
        for path, kind, num_shards, old_shard in sources:
            old = TableShard(old_shard, kind, num_shards, self.partition.num_rows,
                             self.table.shape[1], self.table.dtype, self.optimizer_name,
                             self.options)
            old.load(path)
            old_ids = old.global_ids()
            take = np.isin(old_ids, mine, assume_unique=True)
            if not take.any() and state is not None:
                continue
            dest = self._to_local(old_ids[take])
            self.table[dest] = old.table[take]
            old_sd = old.optimizer.state_dict()
            groups = old_sd["param_groups"]
            entry = old_sd["state"].get(0)
            if entry is None:
                continue
            if state is None:
                names = [n for n, v in entry.items()
                         if isinstance(v, np.ndarray) and v.shape == old.table.shape]
                state = {n: (np.zeros_like(self.table, dtype=entry[n].dtype) if n in names
                             else v) for n, v in entry.items()}
            for n, v in entry.items():
                if n in names:
                    state[n][dest] = v[take]
                elif not np.array_equal(np.asarray(v), np.asarray(state[n])):
                    raise ValueError(f"old shards disagree on {n!r}: {v} vs {state[n]}")
        sd = self.optimizer.state_dict()
        sd["param_groups"] = [{**g, "params": mine_g["params"]}
                              for g, mine_g in zip(groups, sd["param_groups"])]
        sd["state"] = {} if state is None else {0: state}
        self.optimizer.load_state_dict(sd)
        return True

    # ------------------------------------------------------------------------- inspection
    def contents(self):
        """``(global ids, table rows, {state name: rows or value})``: for tests and gathers."""
        entry = self.optimizer.state.get(0, {})
        state = {n: (np.array(v) if isinstance(v, np.ndarray) else v) for n, v in entry.items()}
        return self.global_ids(), self.table.copy(), state
