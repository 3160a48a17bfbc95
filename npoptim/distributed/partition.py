"""Which shard owns which row of a sharded table: ``"mod"`` (id mod N) or ``"hash"``.

Embedding lookups are skewed (Zipf): a few ids take most of the traffic, and they are usually
the small ones (ids are often assigned by frequency). Contiguous ranges would put nearly all
lookups on the first shard, so rows are dealt out instead:

* ``"mod"``: row ``i`` lives on shard ``i % N`` at local row ``i // N``;
* ``"hash"``: row ``i`` lives on shard ``h(i) % N``, where ``h`` is the splitmix64 finalizer
  (a bijection of 64-bit integers that scatters neighbouring ids); a shard keeps the sorted
  list of the ids it owns, and its local row of ``i`` is ``i``'s position in that list.

Both are pure functions of ``(id, N, num_rows)``, so any process computes the same layout.
"""
import numpy as np

KINDS = ("mod", "hash")
_CHUNK = 1 << 20


def splitmix64(ids):
    """The splitmix64 finalizer of ``ids`` (as uint64), computed with wrapping arithmetic."""
    x = np.asarray(ids).astype(np.uint64)
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


class Partition:
    """The layout of ``num_rows`` rows over ``num_shards`` shards (see the module docstring).

    Parameters
    ----------
    kind : str
        ``"mod"`` or ``"hash"``.
    num_shards : int
        the number of shards.
    num_rows : int
        the number of rows.
    """

    def __init__(self, kind, num_shards, num_rows):
        if kind not in KINDS:
            raise ValueError(f"partition must be one of {', '.join(KINDS)}, got {kind!r}")
        if int(num_shards) < 1:
            raise ValueError(f"the number of shards must be >= 1, got {num_shards}")
        if int(num_rows) < 0:
            raise ValueError(f"num_rows must be >= 0, got {num_rows}")
        self.kind, self.num_shards, self.num_rows = kind, int(num_shards), int(num_rows)

    def __repr__(self):
        return f"Partition({self.kind!r}, num_shards={self.num_shards}, num_rows={self.num_rows})"

    def shard_of(self, ids):
        """The shard of each id (int64 array); ids must be in range.

        Parameters
        ----------
        ids : array_like of int
            global row ids, in range.
        """
        ids = np.asarray(ids, np.int64)
        if self.kind == "mod":
            return ids % self.num_shards
        return (splitmix64(ids) % np.uint64(self.num_shards)).astype(np.int64)

    def owned_ids(self, shard):
        """The global ids shard ``shard`` owns, increasing (its local rows in order).

        Parameters
        ----------
        shard : int
            a shard's index.
        """
        if self.kind == "mod":
            return np.arange(shard, self.num_rows, self.num_shards, dtype=np.int64)
        parts = []
        for start in range(0, self.num_rows, _CHUNK):
            ids = np.arange(start, min(start + _CHUNK, self.num_rows), dtype=np.int64)
            parts.append(ids[self.shard_of(ids) == shard])
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def num_local_rows(self, shard):
        if self.kind == "mod":
            return max(0, -(-(self.num_rows - shard) // self.num_shards))
        return int(self.owned_ids(shard).size)

    def split(self, ids):
        """``(order, bounds)``: ``ids[order[bounds[k]:bounds[k+1]]]`` are shard k's ids, in
        their original order (a stable sort by shard, so sums over repeated ids keep the
        lookup order).

        Parameters
        ----------
        ids : array_like of int
            global row ids, in range.
        """
        shards = self.shard_of(ids)
        order = np.argsort(shards, kind="stable")
        counts = np.bincount(shards, minlength=self.num_shards)
        bounds = np.concatenate([[0], np.cumsum(counts)])
        return order, bounds
