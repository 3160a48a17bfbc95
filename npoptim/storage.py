"""Tables larger than memory: parameters and optimizer state as memory-mapped ``.npy`` files
in one directory, and steps that a killed process cannot leave half-done.

::

    store = npoptim.storage.MemmapStore("table/")   # replays a step that a kill interrupted
    emb = store.param("emb", (150_000_000, 16), np.float32)   # created (zeros) or reopened
    opt = npoptim.SparseAdam([emb], lr=1e-2, state_arrays=store)
    store.restore(opt)                              # a reopened table continues where it was
    for ids, rows in batches:
        store.step(opt, [npoptim.row_sparse_grad(ids, rows, emb.shape[0])])

Parameters are ``np.memmap`` arrays; ``state_arrays=store`` makes the optimizer create each
state array as the file ``state{index}.{name}.npy`` (through
:meth:`npoptim.Optimizer._new_state_array`), used in place, never copied. A step reads and
writes only the pages of the rows it touches, so resident memory stays O(touched rows) plus
what the page cache keeps; anonymous memory (``RssAnon``) does not grow with the table.

Crash safety (:meth:`MemmapStore.step`): before a step writes anything, the old values of the
rows it will touch (of every parameter and state array the step updates) are written to an
undo journal, ``journal.npz``, which appears by an atomic rename only once complete; then the
step runs; then ``meta.json`` (step counts, hyperparameters, the number of completed steps) is
replaced atomically and the journal removed. A process killed at any moment therefore leaves
either no journal or a complete one; opening the store replays a complete journal whose step
was not committed, which puts every row back to its value after the last completed step
(replay is idempotent, so a kill during replay is recovered the same way). The journal costs
O(touched rows) per step. Writes reach the page cache, which a killed process does not lose;
``sync=True`` also ``fsync``-s journal, tables and metadata at each step, for power loss.

What is stored: every array in the directory, and ``meta.json`` with each parameter's step
count and state names, the param groups' hyperparameters, ``nonfinite`` and
``skipped_steps``. :meth:`MemmapStore.restore` gives them back to an optimizer built over the
same parameters; a scheduler's state is not stored (save it with :func:`npoptim.save`, or
rebuild it from the step count).

Checkpoints of such a table: the directory itself is one, at the last completed step (copy it
while no step runs, e.g. with ``cp --reflink`` or a filesystem snapshot); no second copy of the
table is needed. :func:`npoptim.save` also works on memmapped state, streaming the arrays to
its archive (its ``state_dict()`` holds views, not copies) but needing the archive's space.
"""
import json
import mmap
import os
import secrets

import numpy as np

from npoptim.checkpoint import _fsync_directory

__all__ = ["MemmapStore"]

_META = "meta.json"
_JOURNAL = "journal.npz"


def _write_atomic(path, write, sync):
    """Write ``path`` through a temporary file in its directory and rename it into place."""
    tmp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        with open(tmp, "wb") as f:
            write(f)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    if sync:
        _fsync_directory(os.path.dirname(path))  # the rename itself survives a power loss


def _jsonable(value):
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _random_access(arr):
    """Tell the kernel that ``arr``'s pages are read at random (``MADV_RANDOM``): a fault then
    reads the one page, not the next few hundred kilobytes. Scattered rows with readahead read
    2.7 GB a second from a table of 150M rows (measured), evicting the rows the next step needs.
    """
    mapping = getattr(arr, "_mmap", None)
    advice = getattr(mmap, "MADV_RANDOM", None)
    if mapping is not None and advice is not None:
        try:
            mapping.madvise(advice)
        except (OSError, ValueError):
            pass


class MemmapStore:
    """A directory of memory-mapped parameters and state with an undo journal (see the module
    docstring). Opening it recovers from a step that a killed process left unfinished;
    :attr:`recovered` says whether one was rolled back. One process uses a store at a time
    (opening it removes the temporary files of writes that were cut short).

    Parameters
    ----------
    directory : str or os.PathLike
        the store's directory, created if missing.
    sync : bool, default: False
        ``fsync`` the journal, tables and metadata at each step, so a power loss, not only a
        killed process, leaves them recoverable.
    """

    def __init__(self, directory, sync=False):
        self.directory = os.path.abspath(os.fspath(directory))
        self.sync = bool(sync)
        os.makedirs(self.directory, exist_ok=True)
        for name in os.listdir(self.directory):  # temporaries of a killed write
            if name.endswith(".tmp"):
                os.unlink(os.path.join(self.directory, name))
        self.meta = self._read_meta()
        self.recovered = self._replay()
        self._arrays = {}

    # ------------------------------------------------------------------------- arrays
    def _path(self, filename):
        return os.path.join(self.directory, filename)

    def _open(self, filename, shape, dtype, fill):
        """The file's array if it exists with this shape and dtype and ``fill`` is None, else a
        new file holding ``fill`` (a new file is sparse: zeros cost no disk write)."""
        path = self._path(filename)
        dtype = np.dtype(dtype)
        if fill is None and os.path.exists(path):
            arr = np.lib.format.open_memmap(path, mode="r+")
            if arr.shape != tuple(shape) or arr.dtype != dtype:
                raise ValueError(f"{path} holds {arr.dtype} {arr.shape}, expected {dtype} "
                                 f"{tuple(shape)}")
        else:
            arr = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=tuple(shape))
            if fill is not None and fill != 0:
                flat = arr.reshape(-1)
                chunk = 1 << 22
                for start in range(0, flat.size, chunk):
                    flat[start:start + chunk] = fill
        _random_access(arr)
        self._arrays[filename] = arr
        return arr

    def param(self, name, shape, dtype=np.float32, init=None):
        """The parameter ``name`` as an ``np.memmap``: reopened if its file exists (then
        ``init`` is ignored), else created holding ``init`` (a scalar, default 0, or an array
        of the shape, copied in chunks).

        Parameters
        ----------
        name : str
            the parameter's name, also its file's.
        shape : tuple of int
            its shape.
        dtype : numpy.dtype, default: numpy.float32
            its dtype.
        init : float or array_like, optional
            the initial value of a new parameter: a scalar (None means 0) or an
            array of the shape.
        """
        if not name.isidentifier():
            raise ValueError(f"parameter name must be an identifier, got {name!r}")
        filename = f"param.{name}.npy"
        if os.path.exists(self._path(filename)):
            return self._open(filename, shape, dtype, None)
        scalar = init is None or np.ndim(init) == 0
        arr = self._open(filename, shape, dtype, 0 if init is None else (init if scalar else 0))
        if not scalar:
            source = np.asarray(init).reshape(arr.shape[0], -1)
            rows = arr.reshape(arr.shape[0], -1)
            step = max(1, (1 << 22) // max(1, rows.shape[1]))
            for start in range(0, rows.shape[0], step):
                rows[start:start + step] = source[start:start + step]
        return arr

    def __call__(self, index, name, shape, dtype, fill):
        """The ``state_arrays`` protocol: state ``name`` of parameter ``index``. A state the
        store's committed metadata lists is reopened as it is on disk (a resumed run); any
        other is a new file holding ``fill``."""
        filename = f"state{index}.{name}.npy"
        committed = name in self.meta["state"].get(str(index), {}).get("arrays", ())
        return self._open(filename, shape, dtype, None if committed else fill)

    def _filename(self, arr, where):
        path = getattr(arr, "filename", None)
        name = None if path is None else os.path.basename(path)
        if name is None or self._arrays.get(name) is not arr:
            raise ValueError(f"{where} is not an array of this store (make parameters with "
                             "store.param and the optimizer with state_arrays=store)")
        return name

    # --------------------------------------------------------------------- metadata
    def _read_meta(self):
        path = self._path(_META)
        if not os.path.exists(path):
            return {"completed": 0, "state": {}, "param_groups": None, "settings": {}}
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    def _commit(self, optimizer, completed):
        state = {}
        for index, entry in optimizer.state.items():
            state[str(index)] = {
                "step": entry.get("step"),
                "arrays": [name for name, value in entry.items() if isinstance(value, np.memmap)]}
        groups = [{k: _jsonable(v) for k, v in group.items() if k != "params"}
                  for group in optimizer.param_groups]
        meta = {"completed": completed, "state": state, "param_groups": groups,
                "settings": {"nonfinite": optimizer.nonfinite,
                             "skipped_steps": int(optimizer.skipped_steps)}}
        blob = json.dumps(meta).encode("utf-8")
        _write_atomic(self._path(_META), lambda f: f.write(blob), self.sync)
        self.meta = meta

    def restore(self, optimizer):
        """Give ``optimizer`` (built over this store's parameters with ``state_arrays=self``)
        the committed step counts, state, hyperparameters and settings. A new store changes
        nothing.

        Parameters
        ----------
        optimizer : Optimizer
            an optimizer built over this store's parameters with
            ``state_arrays=self``.
        """
        if self.meta["param_groups"] is None:
            return
        if len(self.meta["param_groups"]) != len(optimizer.param_groups):
            raise ValueError("the store's metadata has another number of param groups")
        for group, saved in zip(optimizer.param_groups, self.meta["param_groups"]):
            for key, value in saved.items():
                group[key] = tuple(value) if isinstance(group.get(key), tuple) else value
        params = optimizer.params
        group_of = [g for g in optimizer.param_groups for _ in g["params"]]
        new_state = {}
        for key, saved in self.meta["state"].items():
            index = int(key)
            entry = optimizer.state.get(index)
            if entry is None or set(saved["arrays"]) - set(entry):
                entry = optimizer._init_state(params[index], group_of[index])
            for name in saved["arrays"]:
                if not isinstance(entry.get(name), np.memmap):
                    entry[name] = self(index, name, params[index].shape, params[index].dtype, 0)
            for name in list(entry):
                if name != "step" and name not in saved["arrays"]:
                    del entry[name]
            if saved["step"] is not None:
                entry["step"] = int(saved["step"])
            new_state[index] = entry
        optimizer.state = new_state
        optimizer.nonfinite = self.meta["settings"]["nonfinite"]
        optimizer.skipped_steps = int(self.meta["settings"]["skipped_steps"])

    # ----------------------------------------------------------------- the journal
    def _replay(self):
        path = self._path(_JOURNAL)
        if not os.path.exists(path):
            return False
        with np.load(path, allow_pickle=False) as journal:
            header = json.loads(journal["header"].tobytes().decode("utf-8"))
            if header["step"] <= self.meta["completed"]:
                recovered = False  # the step was committed; the journal is stale
            else:
                for k, filename in enumerate(header["files"]):
                    arr = np.lib.format.open_memmap(self._path(filename), mode="r+")
                    rows = journal[f"rows{k}"]
                    arr.reshape(arr.shape[0], -1)[rows] = journal[f"old{k}"]
                    arr.flush()
                    del arr
                recovered = True
        os.unlink(path)
        return recovered

    def _write_journal(self, entries, step):
        """``entries``: ``[(filename, array, rows)]``; saves ``array``'s old ``rows``."""
        members = {"header": np.frombuffer(json.dumps(
            {"step": step, "files": [e[0] for e in entries]}).encode("utf-8"), np.uint8)}
        for k, (_, arr, rows) in enumerate(entries):
            members[f"rows{k}"] = rows
            members[f"old{k}"] = np.asarray(arr).reshape(arr.shape[0], -1)[rows]
        _write_atomic(self._path(_JOURNAL), lambda f: np.savez(f, **members), self.sync)

    def step(self, optimizer, grads):
        """``optimizer.step(grads)``, journaled: a kill at any moment leaves the directory
        recoverable to the last completed step. Costs O(touched rows) more than the step.

        Parameters
        ----------
        optimizer : Optimizer
            the optimizer restored from this store.
        grads : list
            the gradients, as ``optimizer.step`` takes them.
        """
        from npoptim.sparse.rowgrad import RowGradient

        prepared = optimizer._prepare(grads)  # raises, before the journal, on bad input
        entries = []
        for group, index, param, grad in prepared:
            if isinstance(grad, RowGradient):
                rows = np.asarray(grad.rows)
            else:
                rows = np.arange(param.shape[0] if param.ndim else 1)
            arrays = [(f"params[{index}]", param)]
            arrays += [(f"state[{index}]['{name}']", value)
                       for name, value in optimizer.state.get(index, {}).items()
                       if isinstance(value, np.ndarray) and value.shape == param.shape]
            for where, arr in arrays:
                entries.append((self._filename(arr, where), arr, rows))
        completed = self.meta["completed"] + 1
        self._write_journal(entries, completed)
        optimizer.step(grads)
        if self.sync:
            for arr in self._arrays.values():
                arr.flush()
        self._commit(optimizer, completed)
        os.unlink(self._path(_JOURNAL))

    def flush(self):
        """Write every array's dirty pages to disk (``msync``)."""
        for arr in self._arrays.values():
            arr.flush()
