"""An embedding table sharded by row over a Dask cluster, stepped as one optimizer.

See :mod:`npoptim.distributed` for when to use it. Every public call validates its input in
full on the client before any shard is asked to do anything.
"""
import json
import os

import numpy as np

from npoptim import registry
from npoptim.distributed.partition import Partition
from npoptim.distributed.shard import TableShard
from npoptim.sparse.rowgrad import is_csr
from npoptim.sparse.rowsparse import RowSparseGrad

MANIFEST = "manifest.json"
FORMAT = "npoptim-sharded-table"
VERSION = 1


class ShardLostError(RuntimeError):
    """A shard's worker failed or died; the table must be restored from a checkpoint."""


def _distributed():
    try:
        import distributed
    except ImportError:
        raise ImportError("npoptim.distributed needs Dask's distributed scheduler: "
                          "pip install npoptim[dask]") from None
    return distributed


class ShardedTable:
    """A ``(num_rows, dim)`` table and its ``optimizer`` state, one shard per worker.

    ``client`` is a ``distributed.Client``; ``workers`` (default: all of the client's
    workers, sorted by address) get one shard each, as an actor. ``optimizer`` names any
    npoptim optimizer that takes sparse gradients (``SparseAdam``, ``Adagrad``, ``SGD``), built
    on every shard with ``options``. ``partition`` is ``"mod"`` or ``"hash"`` (see
    :mod:`npoptim.distributed.partition`). ``initializer(global_ids) -> rows`` fills the table
    (zeros if None); it runs on the workers, so it must be a picklable function of the ids
    alone, which is what makes a sharded table equal to a single-process one.

    Parameters
    ----------
    client : distributed.Client
        the Dask client.
    num_rows : int
        the table's rows.
    dim : int
        the width of a row.
    optimizer : str, default: 'SparseAdam'
        an npoptim optimizer that takes sparse gradients.
    options : dict, optional
        its keywords, the same on every shard.
    dtype : numpy.dtype, default: numpy.float32
        the table's dtype.
    partition : str, default: 'mod'
        ``"mod"`` or ``"hash"``: which shard owns which row.
    initializer : callable, optional
        ``initializer(global_ids) -> rows``, a picklable function of the ids alone; None
        fills zeros.
    workers : list of str, optional
        the workers' addresses, one shard each; None means all of the client's, sorted
        by address.
    """

    def __init__(self, client, num_rows, dim, optimizer="SparseAdam", options=None, *,
                 dtype=np.float32, partition="mod", initializer=None, workers=None):
        _distributed()
        cls = registry.get(optimizer)
        if getattr(cls, "sparse_kind", "dense-only") == "dense-only":
            raise ValueError(f"{optimizer} does not take sparse gradients; a sharded table "
                             "needs one that does (SparseAdam, Adagrad, SGD)")
        dtype = np.dtype(dtype)
        if dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {dtype}")
        if int(dim) < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        self.client = client
        self.workers = sorted(client.scheduler_info()["workers"]) if workers is None \
            else list(workers)
        if not self.workers:
            raise ValueError("the client has no workers")
        self.partition = Partition(partition, len(self.workers), num_rows)
        self.num_rows, self.dim, self.dtype = int(num_rows), int(dim), dtype
        self.optimizer, self.options = optimizer, dict(options or {})
        cls([np.zeros((1, self.dim), dtype)], **self.options)  # bad options raise here
        self.bytes_sent = self.bytes_received = 0
        self._broken = None
        futures = [client.submit(TableShard, k, partition, len(self.workers), self.num_rows,
                                 self.dim, dtype.str, optimizer, self.options, initializer,
                                 actor=True, workers=[w], allow_other_workers=False, pure=False)
                   for k, w in enumerate(self.workers)]
        self._futures = futures  # an actor lives while its future does
        self.shards = [f.result() for f in futures]

    def __repr__(self):
        return (f"ShardedTable({self.num_rows} x {self.dim} {self.dtype}, {self.optimizer}, "
                f"{self.partition.kind} over {len(self.shards)} workers)")

    # ------------------------------------------------------------------------ the calls
    def lookup(self, ids):
        """The rows of ``ids`` (any shape of integer ids in range), shape ``ids.shape + (dim,)``.

        Parameters
        ----------
        ids : array_like of int
            row ids in range, of any shape.
        """
        self._check_usable()
        ids = self._check_ids(ids)
        flat = ids.reshape(-1)
        order, bounds = self.partition.split(flat)
        calls = [(k, order[bounds[k]:bounds[k + 1]]) for k in range(len(self.shards))]
        futures = [(k, pos, self._call(k, "lookup", flat[pos])) for k, pos in calls if pos.size]
        out = np.empty((flat.size, self.dim), self.dtype)
        for k, pos, fut in futures:
            out[pos] = self._result(fut, k, "lookup")
            self.bytes_sent += flat[pos].nbytes
            self.bytes_received += out[pos].nbytes
        return out.reshape(ids.shape + (self.dim,))

    def step(self, grad):
        """One optimizer step on every shard.

        ``grad`` is ``(row_ids, row_values)``, the raw gradient of a batch of lookups
        (repeated ids allowed; rows of repeated ids are summed in lookup order, exactly as
        :func:`npoptim.row_sparse_grad` and :func:`npoptim.embedding_row_grad` do), a
        :class:`~npoptim.sparse.rowsparse.RowSparseGrad` of ``num_rows`` rows, or a
        ``scipy.sparse`` CSR gradient of shape ``(num_rows, dim)``. The first two cost
        O(touched rows) on every shard; a CSR costs O(rows of the shard) there, as its
        ``indptr`` does. Every shard steps, those with no rows in the batch too, so
        per-tensor step counts advance as in one process. All shards validate their part
        first; only then does any shard change. If a worker fails meanwhile,
        :class:`ShardLostError` is raised and the table must be restored with :meth:`load`.

        Parameters
        ----------
        grad : tuple, RowSparseGrad or scipy.sparse CSR
            ``(row_ids, row_values)``, a row-sparse gradient or a CSR gradient of
            shape ``(num_rows, dim)``.
        """
        self._check_usable()
        payloads = self._split_grad(grad)
        prepared = []
        try:
            futures = [self._call(k, "prepare", p) for k, p in enumerate(payloads)]
            for k, fut in enumerate(futures):
                self._result(fut, k, "prepare", lost_only=False)
                prepared.append(k)
        except Exception:
            for k in prepared:
                self._call(k, "abort").result()
            raise
        futures = [self._call(k, "commit") for k in range(len(self.shards))]
        for k, fut in enumerate(futures):
            self._result(fut, k, "commit")

    # ------------------------------------------------------------------------ checkpoint
    def save(self, directory):
        """Write every shard's npoptim checkpoint (atomic each, written by its own worker
        to ``directory``, which every worker must see) and then ``manifest.json``, the last
        file written: a directory whose manifest is missing or older than a shard's file
        holds no complete checkpoint.

        Parameters
        ----------
        directory : str or os.PathLike
            where the checkpoint goes; every worker must see it.
        """
        self._check_usable()
        directory = os.fspath(directory)
        os.makedirs(directory, exist_ok=True)
        files = [f"shard-{k:05d}-of-{len(self.shards):05d}.npz" for k in range(len(self.shards))]
        futures = [self._call(k, "save", os.path.join(directory, f)) for k, f in enumerate(files)]
        for k, fut in enumerate(futures):
            self._result(fut, k, "save")
        manifest = {"format": FORMAT, "version": VERSION, "num_rows": self.num_rows,
                    "dim": self.dim, "dtype": self.dtype.str, "optimizer": self.optimizer,
                    "options": self.options, "partition": self.partition.kind,
                    "num_shards": len(self.shards), "shards": files}
        tmp = os.path.join(directory, MANIFEST + ".tmp")
        with open(tmp, "w") as f:
            json.dump(manifest, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(directory, MANIFEST))

    @classmethod
    def load(cls, client, directory, *, workers=None, partition=None):
        """A table restored from :meth:`save`'s ``directory`` onto ``workers`` (default: all
        of the client's). With the same number of workers and partition, each shard loads
        its own file; otherwise the rows are re-sharded: every new shard reads the old
        shards' files one at a time and keeps the rows it owns, state included.

        Parameters
        ----------
        client : distributed.Client
            the Dask client.
        directory : str or os.PathLike
            a directory :meth:`save` wrote.
        workers : list of str, optional
            the workers' addresses, one shard each; None means all of the client's,
            sorted by address.
        partition : str, optional
            ``"mod"`` or ``"hash"``; None keeps the saved table's.
        """
        directory = os.fspath(directory)
        with open(os.path.join(directory, MANIFEST)) as f:
            manifest = json.load(f)
        if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
            raise ValueError(f"{directory} does not hold an npoptim sharded-table checkpoint "
                             f"of version {VERSION}")
        table = cls(client, manifest["num_rows"], manifest["dim"], manifest["optimizer"],
                    manifest["options"], dtype=manifest["dtype"],
                    partition=partition or manifest["partition"], workers=workers)
        paths = [os.path.join(directory, f) for f in manifest["shards"]]
        same = (len(table.shards) == manifest["num_shards"]
                and table.partition.kind == manifest["partition"])
        if same:
            futures = [table._call(k, "load", p) for k, p in enumerate(paths)]
        else:
            sources = [(p, manifest["partition"], manifest["num_shards"], k)
                       for k, p in enumerate(paths)]
            futures = [table._call(k, "reshard_from", sources) for k in range(len(table.shards))]
        for k, fut in enumerate(futures):
            table._result(fut, k, "load", lost_only=False)
        return table

    # ------------------------------------------------------------------------ inspection
    def to_numpy(self):
        """``(table, state)``: the whole table and every per-row state array in global row
        order, per-tensor state as one value (gathered to the client: small tables only)."""
        table = np.empty((self.num_rows, self.dim), self.dtype)
        state = {}
        for k in range(len(self.shards)):
            ids, rows, entry = self._result(self._call(k, "contents"), k, "contents")
            table[ids] = rows
            for name, value in entry.items():
                if isinstance(value, np.ndarray) and value.shape == rows.shape:
                    state.setdefault(name, np.zeros((self.num_rows, self.dim), value.dtype))
                    state[name][ids] = value
                else:
                    state[name] = value
        return table, state

    def close(self):
        """Release the shards (their memory on the workers)."""
        self.shards = []
        self.client.cancel(self._futures)
        self._futures = []

    # -------------------------------------------------------------------------- helpers
    def _check_usable(self):
        if self._broken is not None:
            raise ShardLostError(self._broken)
        if not self.shards:
            raise RuntimeError("the table was closed")

    def _check_ids(self, ids):
        ids = np.asarray(ids)
        if ids.size == 0:
            ids = ids.astype(np.int64)
        if ids.dtype.kind not in "iu":
            raise ValueError(f"ids must be integers, got {ids.dtype}")
        ids = ids.astype(np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_rows):
            raise ValueError(f"ids must lie in [0, {self.num_rows}); got range "
                             f"[{ids.min()}, {ids.max()}]")
        return ids

    def _split_grad(self, grad):
        n = len(self.shards)
        if is_csr(grad):
            return self._split_csr(grad)
        if isinstance(grad, RowSparseGrad):
            return self._split_row_block(grad)
        if not (isinstance(grad, tuple) and len(grad) == 2):
            raise TypeError("grad must be (row_ids, row_values) or a scipy.sparse CSR "
                            f"gradient, got {type(grad).__name__}")
        ids = self._check_ids(grad[0])
        values = np.asarray(grad[1])
        if ids.ndim != 1:
            raise ValueError("row_ids must be 1-D")
        if values.shape != (ids.size, self.dim):
            raise ValueError(f"row_values must have shape ({ids.size}, {self.dim}), got "
                             f"{values.shape}")
        if values.dtype != self.dtype:
            raise ValueError(f"row_values must be {self.dtype}, got {values.dtype}")
        order, bounds = self.partition.split(ids)
        payloads = []
        for k in range(n):
            pos = order[bounds[k]:bounds[k + 1]]
            payloads.append(("lookups", ids[pos], np.ascontiguousarray(values[pos])))
            self.bytes_sent += ids[pos].nbytes + values[pos].nbytes
        return payloads

    def _split_row_block(self, grad):
        if grad.num_rows != self.num_rows:
            raise ValueError(f"the gradient has {grad.num_rows} rows, the table {self.num_rows}")
        rows, values = self._check_ids(grad.rows), np.asarray(grad.values)
        if rows.ndim != 1 or rows.size > 1 and np.any(np.diff(rows) <= 0):
            raise ValueError("a row-sparse gradient's rows must be strictly increasing")
        if values.shape != (rows.size, self.dim) or values.dtype != self.dtype:
            raise ValueError(f"the gradient's block must be {self.dtype} of shape "
                             f"({rows.size}, {self.dim}), got {values.dtype} {values.shape}")
        shards = self.partition.shard_of(rows)
        payloads = []
        for k in range(len(self.shards)):
            mine = np.flatnonzero(shards == k)
            payloads.append(("row_block", rows[mine], np.ascontiguousarray(values[mine])))
            self.bytes_sent += rows[mine].nbytes + values[mine].nbytes
        return payloads

    def _split_csr(self, grad):
        from npoptim.sparse.rowgrad import as_row_gradient
        rg = as_row_gradient(grad, (self.num_rows, self.dim), self.dtype, "grad")
        rows = np.asarray(rg.rows, np.int64)
        counts = np.diff(np.asarray(rg.row_ptr, np.int64))
        shards = self.partition.shard_of(rows)
        payloads = []
        for k in range(len(self.shards)):
            mine = np.flatnonzero(shards == k)
            if mine.size:
                entries = np.concatenate([np.arange(rg.row_ptr[j], rg.row_ptr[j + 1])
                                          for j in mine])
            else:
                entries = np.zeros(0, np.int64)
            payloads.append(("rows", rows[mine], counts[mine], rg.indices[entries],
                             rg.data[entries]))
            self.bytes_sent += rows[mine].nbytes + counts[mine].nbytes + \
                rg.indices[entries].nbytes + rg.data[entries].nbytes
        return payloads

    def _call(self, shard, method, *args):
        """Call ``method`` of shard ``shard``'s actor; a worker already known to be lost (the
        proxy refuses the call) marks the table broken and raises :class:`ShardLostError`."""
        try:
            return getattr(self.shards[shard], method)(*args)
        except Exception as exc:
            self._broken = self._lost_message(shard, method, exc)
            raise ShardLostError(self._broken) from exc

    def _result(self, future, shard, what, lost_only=True):
        """The future's result; a failure of the worker (not of the input) marks the table
        broken and raises :class:`ShardLostError`."""
        try:
            return future.result()
        except (ValueError, TypeError) as exc:
            if not lost_only:
                raise
            self._broken = self._lost_message(shard, what, exc)
            raise ShardLostError(self._broken) from exc
        except Exception as exc:
            self._broken = self._lost_message(shard, what, exc)
            raise ShardLostError(self._broken) from exc

    def _lost_message(self, shard, what, exc):
        return (f"shard {shard} (worker {self.workers[shard]}) failed during {what}: "
                f"{type(exc).__name__}: {exc}. Its rows and optimizer state died with it, so "
                "the table is no longer consistent: restore it with ShardedTable.load() from "
                "the last checkpoint")
