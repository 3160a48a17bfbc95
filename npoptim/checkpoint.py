"""Checkpoints: an optimizer's parameters and state, and optionally its scheduler, in one ``.npz``.

::

    npoptim.save("run.npz", optimizer, scheduler)     # atomic: the old file stays until done
    ...
    npoptim.load("run.npz", optimizer, scheduler)     # validated; in place; or raises

A checkpoint holds everything needed to continue a run bit for bit: the parameter values
(:attr:`Optimizer.params`, restored into the same arrays in place), the optimizer's
``state_dict()`` (state and param-group hyperparameters), its non-finite gradient policy
(``nonfinite``) and ``skipped_steps`` count, and the scheduler's ``state_dict()``. As with
``load_state_dict``, what the checkpoint holds replaces what the optimizer was built with.
Resuming from it gives exactly the trajectory of the run that was never interrupted.

The file is an ordinary NumPy ``.npz`` archive that :func:`numpy.load` reads with
``allow_pickle=False``: every array is a member of its own, and the structure around them
(dicts, lists, tuples, numbers, strings, ``None``) is a JSON manifest stored as a ``uint8``
array. Nothing is pickled, so loading a checkpoint never runs code. The manifest records a
format version, the optimizer's and scheduler's class names, the parameters' shapes and dtypes,
and the dtype and shape of every array; a SHA-256 digest over the manifest and all array bytes
is stored beside it.

Writing is atomic: the archive goes to a temporary file in the target's directory, is flushed
and ``fsync``-ed, then renamed over ``path`` (and the directory is ``fsync``-ed), so a crash or
a full disk mid-write leaves the previous checkpoint in place, never a half-written file. The
temporary files that killed saves of the same ``path`` left behind (their process no longer
runs) are removed by the next save.

Tables larger than memory (``np.memmap`` parameters and state, see :mod:`npoptim.storage`):
``save`` streams every array to the archive (``state_dict()`` holds views of memmapped state,
and NumPy writes an array to a zip member in 16 MiB chunks), so it needs the archive's space
on disk but no RAM in proportion to the table; ``load`` memory-maps the archive's large
members instead of reading them, and ``load_state_dict`` of an optimizer built with
``state_arrays`` copies loaded state into its state arrays in chunks.

Loading checks everything before anything changes: the archive's structure, every array
header against the manifest, the digest (a truncated or tampered file fails here), the format
version, the optimizer and scheduler classes, the number, shapes and dtypes of the parameters,
and then the optimizer's own ``load_state_dict`` validation. Any failure raises
:class:`CheckpointError` (a ``ValueError``) and leaves the parameters, the optimizer and the
scheduler as they were.

Exactness: step counts are stored as exact integers (``state_dict()`` exports ``step`` as
torch does, a float32 scalar, exact only up to 2**24 steps), and each state array comes back
in the dtype it was saved in (``load_state_dict`` alone casts state to the parameter's dtype,
as torch does, which changes e.g. NAdam's float32 ``mu_product`` beside float64 parameters).
"""
import copy
import hashlib
import json
import numbers
import os
import secrets
import zipfile

import numpy as np

__all__ = ["save", "load", "CheckpointError", "FORMAT", "VERSION"]

FORMAT = "npoptim-checkpoint"
VERSION = 1

_MANIFEST = "__manifest__"
_DIGEST = "__sha256__"
_ARRAY_KINDS = "biufc"      # bool, integers, floats, complex: no objects, no structured dtypes
# JSON objects whose single key is one of these encode what plain JSON cannot
_TUPLE, _DICT, _ARRAY, _SCALAR = "__tuple__", "__dict__", "__array__", "__scalar__"


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded: unreadable, corrupt, or for another optimizer."""


# ------------------------------------------------------------------------------------- save
def save(path, optimizer, scheduler=None):
    """Write ``optimizer`` (its parameters and ``state_dict()``) and ``scheduler`` to ``path``.

    ``path`` is used exactly as given (no ``.npz`` is appended). The write is atomic: ``path``
    is either the previous file or the complete new one, whatever happens mid-write. Raises
    ``TypeError`` if a state holds a value that cannot be stored without pickle (a function,
    an arbitrary object); nothing is written then.

    Parameters
    ----------
    path : str or os.PathLike
        the file to write, used exactly as given.
    optimizer : Optimizer
        the optimizer whose parameters and state are saved.
    scheduler : LRScheduler, optional
        a learning-rate scheduler saved with it.
    """
    path = os.fspath(path)
    manifest, arrays = _build(optimizer, scheduler)
    blob = _manifest_bytes(manifest)
    digest = _digest(blob, manifest["arrays"], arrays)
    members = {_MANIFEST: np.frombuffer(blob, np.uint8),
               _DIGEST: np.frombuffer(digest, np.uint8), **arrays}
    directory = os.path.dirname(os.path.abspath(path))
    _remove_stale_temporaries(directory, os.path.basename(path))
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}."
                                  f"{secrets.token_hex(4)}.tmp")
    # os.open with 0o666 lets the umask decide the mode, as for any new file
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            _write_npz(f, members)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_directory(directory)


def _remove_stale_temporaries(directory, basename):
    """Remove the temporary files that saves of ``basename`` killed mid-write left behind:
    ``.{basename}.{pid}.{hex}.tmp`` whose process no longer runs."""
    prefix = f".{basename}."
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        parts = name[len(prefix):].split(".")
        if not (name.startswith(prefix) and len(parts) == 3 and parts[2] == "tmp"
                and parts[0].isdigit()):
            continue
        pid = int(parts[0])
        if pid == os.getpid() or _process_exists(pid):
            continue  # a save that may still be running
        try:
            os.unlink(os.path.join(directory, name))
        except OSError:
            pass


def _process_exists(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def _build(optimizer, scheduler):
    arrays = {}
    params = []
    for i, p in enumerate(optimizer.params):
        name = f"param{i}"
        arrays[name] = p
        params.append({"shape": list(p.shape), "dtype": p.dtype.str, "array": name})
    state_dict = _exact_steps(optimizer, optimizer.state_dict())
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "optimizer": type(optimizer).__name__,
        "params": params,
        "optimizer_state": _encode(state_dict, arrays, "optimizer.state_dict()"),
        "settings": _settings(optimizer),
        "scheduler": None if scheduler is None else type(scheduler).__name__,
        "scheduler_state": (None if scheduler is None else
                            _encode(scheduler.state_dict(), arrays, "scheduler.state_dict()")),
    }
    manifest["arrays"] = {name: {"dtype": a.dtype.str, "shape": list(a.shape)}
                          for name, a in arrays.items()}
    return manifest, arrays


# Optimizer attributes outside state_dict() that a resumed run needs: the non-finite gradient
# policy and the count of steps it skipped.
_SETTINGS = {"nonfinite": ("propagate", "raise", "skip"), "skipped_steps": None}


def _settings(optimizer):
    return {name: (str if _SETTINGS[name] else int)(getattr(optimizer, name))
            for name in _SETTINGS if hasattr(optimizer, name)}


def _check_settings(saved, optimizer, where):
    if saved is None:
        return {}
    if not isinstance(saved, dict):
        raise CheckpointError(f"{where}: malformed settings in the manifest")
    for name, value in saved.items():
        allowed = _SETTINGS.get(name, ())
        ok = (value in allowed) if allowed is not None else (
            isinstance(value, int) and not isinstance(value, bool) and value >= 0)
        if not ok or not hasattr(optimizer, name):
            raise CheckpointError(f"{where}: bad optimizer setting {name}={value!r}")
    return saved


def _exact_steps(optimizer, state_dict):
    """Replace each float32 ``step`` of the state_dict by the optimizer's exact integer count."""
    for index, entry in state_dict["state"].items():
        internal = optimizer.state.get(index, {}).get("step")
        if (isinstance(entry, dict) and "step" in entry
                and isinstance(internal, numbers.Integral) and not isinstance(internal, bool)):
            exported = np.asarray(entry["step"])
            if exported.shape == () and exported.dtype.kind in "fiu" and \
                    float(exported) == float(np.asarray(internal, exported.dtype)):
                entry["step"] = int(internal)
    return state_dict


def _encode(obj, arrays, where):
    """``obj`` as JSON-ready data; arrays and NumPy scalars move to ``arrays``."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, numbers.Integral) and not isinstance(obj, np.generic):
        return int(obj)
    if isinstance(obj, float):
        return float(obj)
    if isinstance(obj, (np.ndarray, np.generic)):
        arr = np.asarray(obj)
        if arr.dtype.kind not in _ARRAY_KINDS:
            raise TypeError(f"{where}: cannot store an array of dtype {arr.dtype} in a "
                            "checkpoint (only bool, integer, float and complex arrays)")
        name = f"a{len(arrays)}"
        while name in arrays:
            name += "_"
        arrays[name] = arr
        return {_ARRAY if isinstance(obj, np.ndarray) else _SCALAR: name}
    if isinstance(obj, tuple):
        return {_TUPLE: [_encode(v, arrays, f"{where}[{i}]") for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_encode(v, arrays, f"{where}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("__") for k in obj):
            return {k: _encode(v, arrays, f"{where}[{k!r}]") for k, v in obj.items()}
        return {_DICT: [[_encode(k, arrays, f"{where} key {k!r}"),
                         _encode(v, arrays, f"{where}[{k!r}]")] for k, v in obj.items()]}
    raise TypeError(f"{where}: cannot store a value of type {type(obj).__name__} in a "
                    "checkpoint without pickle (arrays, numbers, strings, None, and lists, "
                    "tuples and dicts of them can be stored)")


def _manifest_bytes(manifest):
    return json.dumps(manifest, allow_nan=True, separators=(",", ":")).encode("utf-8")


def _digest(blob, table, arrays):
    """SHA-256 over the manifest and every array's name, dtype, shape and bytes."""
    h = hashlib.sha256()
    h.update(len(blob).to_bytes(8, "little"))
    h.update(blob)
    for name in sorted(table):
        arr = arrays[name]
        h.update(f"\0{name}\0{arr.dtype.str}\0{list(arr.shape)}\0".encode())
        if arr.size:
            data = arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)
            h.update(memoryview(data.reshape(-1)).cast("B"))
    return h.digest()


def _write_npz(f, members):
    """An uncompressed ``.npz`` (what :func:`numpy.savez` writes), no pickle allowed."""
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, arr in members.items():
            with zf.open(name + ".npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(arr), allow_pickle=False)


def _fsync_directory(directory):
    """Make the rename durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ------------------------------------------------------------------------------------- load
def load(path, optimizer, scheduler=None):
    """Restore ``optimizer`` (parameters in place, state, hyperparameters, non-finite policy
    and skipped-step count) and ``scheduler``.

    Everything is validated first (see the module docstring); on any error
    :class:`CheckpointError` is raised and nothing has changed. ``scheduler`` must be given
    exactly when the checkpoint holds one, and be of the same class.

    Parameters
    ----------
    path : str or os.PathLike
        a checkpoint written by :func:`save`.
    optimizer : Optimizer
        the optimizer to restore, built as the saved one was.
    scheduler : LRScheduler, optional
        the scheduler to restore, exactly when the checkpoint holds one.
    """
    path = os.fspath(path)
    manifest, arrays = _read(path)
    where = f"checkpoint {path!r}"
    if manifest.get("optimizer") != type(optimizer).__name__:
        raise CheckpointError(f"{where} is for a {manifest.get('optimizer')} optimizer, not "
                              f"{type(optimizer).__name__}")
    saved_sched = manifest.get("scheduler")
    if scheduler is None and saved_sched is not None:
        raise CheckpointError(f"{where} holds a {saved_sched} scheduler state; pass the "
                              "scheduler to load it into")
    if scheduler is not None and saved_sched != type(scheduler).__name__:
        held = "no scheduler" if saved_sched is None else f"a {saved_sched}"
        raise CheckpointError(f"{where} holds {held} state, not {type(scheduler).__name__}")
    params = optimizer.params
    saved_params = manifest.get("params")
    if not isinstance(saved_params, list) or len(saved_params) != len(params):
        count = len(saved_params) if isinstance(saved_params, list) else "?"
        raise CheckpointError(f"{where} has {count} parameters, the optimizer has "
                              f"{len(params)}")
    values = []
    for i, (p, saved) in enumerate(zip(params, saved_params)):
        try:
            arr = arrays[saved["array"]]
        except (TypeError, KeyError):
            raise CheckpointError(f"{where}: parameter {i} is malformed") from None
        if arr.shape != p.shape or arr.dtype != p.dtype:
            raise CheckpointError(f"{where}: parameter {i} has shape {arr.shape} and dtype "
                                  f"{arr.dtype}, the optimizer's has shape {p.shape} and dtype "
                                  f"{p.dtype}")
        if not p.flags.writeable:
            raise CheckpointError(f"parameter {i} is read-only; load() restores parameters "
                                  "in place")
        values.append(arr)
    settings = _check_settings(manifest.get("settings"), optimizer, where)
    try:
        used = {p["array"] for p in saved_params}
        state_dict = _decode(manifest["optimizer_state"], arrays, used)
        sched_state = (None if scheduler is None else
                       _decode(manifest["scheduler_state"], arrays, used))
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise CheckpointError(f"{where}: malformed state in the manifest ({exc})") from None

    backup = None
    if scheduler is not None:
        backup = copy.deepcopy(scheduler.state_dict())
        try:
            scheduler.load_state_dict(sched_state)
        except Exception as exc:
            scheduler.load_state_dict(backup)
            raise CheckpointError(f"{where}: the scheduler state does not load: {exc}") from exc
    try:
        optimizer.load_state_dict(state_dict)
    except Exception as exc:
        if scheduler is not None:
            scheduler.load_state_dict(backup)
        raise CheckpointError(f"{where}: the optimizer state does not load: {exc}") from exc
    _restore_dtypes(optimizer, state_dict)
    for name, value in settings.items():
        setattr(optimizer, name, value)
    for p, value in zip(params, values):
        p[...] = value


def _restore_dtypes(optimizer, state_dict):
    """Give each loaded state array the dtype it was saved with.

    ``load_state_dict`` casts floating-point state to the parameter's dtype, as torch does;
    state that an optimizer keeps in another dtype (NAdam's float32 ``mu_product`` beside a
    float64 parameter, as torch keeps it) would then continue differently from the run that
    was saved. Runs after validation; cannot fail.
    """
    for index, entry in state_dict["state"].items():
        loaded = optimizer.state.get(index)
        if not isinstance(entry, dict) or not isinstance(loaded, dict):
            continue
        for name, saved in entry.items():
            current = loaded.get(name)
            if isinstance(saved, np.ndarray) and isinstance(current, np.ndarray) and \
                    saved.shape == current.shape and saved.dtype != current.dtype and \
                    saved.dtype in (np.float32, np.float64) and saved.ndim == 0:
                loaded[name] = saved.copy()


def _read(path):
    """The manifest and arrays of a checkpoint, after every structural check and the digest."""
    where = f"checkpoint {path!r}"
    with open(path, "rb") as file:  # a missing or unreadable file raises OSError as usual
        try:
            manifest, blob, digest, table, arrays = _read_archive(file, where, path)
        except CheckpointError:
            raise
        except Exception as exc:  # whatever a damaged archive makes zipfile or NumPy raise
            raise CheckpointError(f"{where} is truncated or corrupt: "
                                  f"{type(exc).__name__}: {exc}") from None
    if _digest(blob.tobytes(), table, arrays) != digest.tobytes():
        raise CheckpointError(f"{where} is corrupt or was modified: its SHA-256 digest does "
                              "not match its contents")
    return manifest, arrays


def _read_archive(file, where, path=None):
    """Parse the archive: members, manifest, array headers; the arrays themselves."""
    with zipfile.ZipFile(file) as zf:
        members = {}
        for info in zf.infolist():
            if not info.filename.endswith(".npy") or info.filename[:-4] in members:
                raise CheckpointError(f"{where}: unexpected archive member "
                                      f"{info.filename!r}")
            members[info.filename[:-4]] = info
        for name in (_MANIFEST, _DIGEST):
            if name not in members:
                raise CheckpointError(f"{where} is not an npoptim checkpoint (no {name})")
        blob = _read_member(zf, members[_MANIFEST], np.dtype(np.uint8), None, where)
        digest = _read_member(zf, members[_DIGEST], np.dtype(np.uint8), (32,), where)
        manifest = _parse_manifest(blob.tobytes(), where)
        table = manifest["arrays"]
        if set(table) != set(members) - {_MANIFEST, _DIGEST}:
            raise CheckpointError(f"{where}: the archive's arrays do not match its "
                                  "manifest")
        arrays = {}
        for name, meta in table.items():
            try:
                dtype = np.dtype(meta["dtype"])
                shape = tuple(int(n) for n in meta["shape"])
            except (TypeError, KeyError, ValueError):
                raise CheckpointError(f"{where}: bad manifest entry for array "
                                      f"{name!r}") from None
            if dtype.kind not in _ARRAY_KINDS:
                raise CheckpointError(f"{where}: array {name!r} has dtype {dtype}")
            arrays[name] = _read_member(zf, members[name], dtype, shape, where, path)
    return manifest, blob, digest, table, arrays


#: Members of at least this many bytes, stored uncompressed, are memory-mapped by ``load``
#: (read-only) rather than read into memory.
_MMAP_BYTES = 1 << 26


def _member_data_offset(zf, info):
    """Where a stored member's bytes start in the archive file (after its local header)."""
    zf.fp.seek(info.header_offset)
    local = zf.fp.read(30)
    if len(local) != 30 or local[:4] != b"PK\x03\x04":
        raise CheckpointError(f"bad local header for member {info.filename!r}")
    return (info.header_offset + 30 + int.from_bytes(local[26:28], "little")
            + int.from_bytes(local[28:30], "little"))


def _read_member(zf, info, dtype, shape, where, path=None):
    """Read one ``.npy`` member after checking its header against the expected dtype/shape;
    a large stored member of the file ``path`` is memory-mapped instead (see _MMAP_BYTES)."""
    name = info.filename
    with zf.open(info) as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            found_shape, fortran, found_dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            found_shape, fortran, found_dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise CheckpointError(f"{where}: member {name!r} has .npy version {version}")
        header_size = f.tell()
    if found_dtype != dtype or (shape is not None and tuple(found_shape) != shape) or \
            (shape is None and len(found_shape) != 1):
        raise CheckpointError(f"{where}: member {name!r} holds {found_dtype} {found_shape}, "
                              f"the manifest says {dtype} {shape}")
    nbytes = int(np.prod(found_shape, dtype=np.int64)) * dtype.itemsize
    if info.file_size != header_size + nbytes:
        raise CheckpointError(f"{where}: member {name!r} has {info.file_size} bytes, its "
                              f"header needs {header_size + nbytes}")
    if (path is not None and not fortran and nbytes >= _MMAP_BYTES and nbytes > 0
            and info.compress_type == zipfile.ZIP_STORED):
        offset = _member_data_offset(zf, info) + header_size
        return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=tuple(found_shape))
    with zf.open(info) as f:
        arr = np.lib.format.read_array(f, allow_pickle=False)
    return np.ascontiguousarray(arr) if fortran else arr


def _parse_manifest(blob, where):
    try:
        manifest = json.loads(blob.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise CheckpointError(f"{where}: its manifest is not valid JSON") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise CheckpointError(f"{where} is not an npoptim checkpoint")
    version = manifest.get("version")
    if version != VERSION:
        raise CheckpointError(f"{where} has format version {version!r}; this npoptim reads "
                              f"version {VERSION}")
    if not isinstance(manifest.get("arrays"), dict):
        raise CheckpointError(f"{where}: its manifest has no array table")
    return manifest


def _decode(data, arrays, used=None):
    """Inverse of :func:`_encode`; an array referenced twice is copied, so none is shared."""
    used = set() if used is None else used
    if isinstance(data, list):
        return [_decode(v, arrays, used) for v in data]
    if not isinstance(data, dict):
        if data is None or isinstance(data, (bool, int, float, str)):
            return data
        raise TypeError(f"unexpected {type(data).__name__} in the manifest")
    if len(data) == 1:
        (key, value), = data.items()
        if key == _TUPLE:
            return tuple(_decode(v, arrays, used) for v in value)
        if key == _DICT:
            out = {}
            for k, v in value:
                k = _decode(k, arrays, used)
                if isinstance(k, (list, dict, np.ndarray)):
                    raise TypeError("unhashable dict key in the manifest")
                out[k] = _decode(v, arrays, used)
            return out
        if key == _ARRAY:
            arr = arrays[value]
            if value in used:
                return arr.copy()
            used.add(value)
            return arr
        if key == _SCALAR:
            arr = arrays[value]
            if arr.shape != ():
                raise ValueError(f"scalar {value!r} is not 0-d")
            return arr[()]
    if any(k.startswith("__") for k in data):
        raise ValueError(f"unknown manifest tag in {sorted(data)}")
    return {k: _decode(v, arrays, used) for k, v in data.items()}
