"""Arrays, gradients, optimizer state and hyperparameters to and from the golden-file JSON
encoding.

Every number array is an object ``{"dtype": ..., "shape": [...], "data": [...]}`` with ``data``
flattened in row-major (C) order. Float values are JSON numbers written as the *shortest
decimal string that round-trips to the float64 value* (Python's ``repr``, JavaScript's
``Number.prototype.toString``); a float32 value is written as the float64 number equal to it, so
parsing it as float64 and rounding to float32 is exact. Non-finite values are the strings
``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` (JSON has no literal for them).

16-bit arrays (schema version 3), dtype ``"bfloat16"`` or ``"float16"``, are stored the same
way: each value as the number it is exactly (every bfloat16 and float16 value is a float32
value, so the float64 number is exact and short: ``0.0100097656``, never a bit pattern). A
reader parses it as float64 and converts it to the 16-bit type, which is exact (the loader
refuses a value the type does not hold exactly). A NaN is ``"NaN"``, whatever its payload.
In Python a float16 array decodes to NumPy's ``float16``, a bfloat16 one to
``ml_dtypes.bfloat16`` (the extra ``npoptim[bf16]``).

A gradient is ``null`` (no gradient this step), a dense array object with ``"format": "dense"``,
or a CSR object ``{"format": "csr", "dtype", "shape": [rows, cols], "indptr", "indices",
"data"}`` stored *exactly as the optimizer receives it*: duplicate ``(row, column)`` entries,
unsorted columns and explicit zeros are kept (they are what the case tests).

:func:`dumps` writes JSON deterministically (sorted keys, fixed layout), so regenerating a file
from the same inputs gives the same bytes.
"""
import json
import math
from typing import NamedTuple

import numpy as np
import scipy.sparse

FLOAT_DTYPES = ("float32", "float64")
#: the 16-bit dtypes (schema version 3): values stored as the numbers they exactly are
HALF_DTYPES = ("bfloat16", "float16")
INT_DTYPES = ("int64",)
NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class CsrGrad(NamedTuple):
    """A CSR gradient exactly as stored in a case (duplicates, order and zeros kept).

    Parameters
    ----------
    shape : tuple
        the gradient's ``(rows, columns)``.
    indptr : numpy.ndarray
        the CSR row pointers.
    indices : numpy.ndarray
        the column of each stored entry.
    data : numpy.ndarray
        the stored values.
    """

    shape: tuple
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray

    @property
    def nnz(self):
        return int(self.indptr[-1])

    def to_scipy(self):
        """A ``scipy.sparse.csr_array`` holding the stored entries as they are (not summed)."""
        grad = scipy.sparse.csr_array((self.data.copy(), self.indices.copy(), self.indptr.copy()),
                                      shape=self.shape)
        grad.has_canonical_format = False
        return grad

    def to_dense(self, param_shape=None):
        """The dense gradient: duplicates summed in stored order, missing entries zero.

        Parameters
        ----------
        param_shape : tuple, optional
            the shape to return, the parameter's; None means ``shape``.
        """
        out = np.zeros(self.shape, self.data.dtype)
        for row in range(self.shape[0]):
            for k in range(self.indptr[row], self.indptr[row + 1]):
                out[row, self.indices[k]] += self.data[k]
        return out.reshape(param_shape) if param_shape is not None else out

    def rows(self):
        """``[(row, column, value)]`` of every stored entry, in stored order."""
        out = []
        for row in range(self.shape[0]):
            for k in range(self.indptr[row], self.indptr[row + 1]):
                out.append((row, int(self.indices[k]), self.data[k]))
        return out


# ------------------------------------------------------------------------------ encoding
def float_value(x):
    """One float as its JSON value (a number, or a string for a non-finite value)."""
    x = float(x)
    if math.isfinite(x):
        return x
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


def encode_array(arr):
    """A NumPy array (or scalar) as a golden array object."""
    arr = np.asarray(arr)
    if arr.dtype.kind == "f" or arr.dtype.name == "bfloat16":
        dtype = str(arr.dtype)
        if dtype not in FLOAT_DTYPES + HALF_DTYPES:
            raise ValueError(f"cannot encode {dtype} arrays (float32, float64, bfloat16, "
                             "float16, int64 only)")
        data = [float_value(x) for x in arr.astype(np.float64).reshape(-1).tolist()]
    elif arr.dtype.kind in "iub":
        dtype = "int64"
        data = [int(x) for x in arr.reshape(-1).tolist()]
    else:
        raise ValueError(f"cannot encode {arr.dtype} arrays")
    return {"dtype": dtype, "shape": [int(n) for n in arr.shape], "data": data}


def encode_grad(grad):
    """``None``, a dense array, a :class:`CsrGrad` or a scipy CSR matrix as JSON."""
    if grad is None:
        return None
    if isinstance(grad, CsrGrad) or scipy.sparse.issparse(grad):
        return {"format": "csr", "dtype": str(grad.data.dtype),
                "shape": [int(n) for n in grad.shape],
                "indptr": [int(x) for x in grad.indptr.tolist()],
                "indices": [int(x) for x in grad.indices.tolist()],
                "data": [float_value(x) for x in grad.data.astype(np.float64).tolist()]}
    out = encode_array(grad)
    out["format"] = "dense"
    return out


def encode_state_value(value):
    """An entry of a parameter's state: array, number, list of those, or None."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [encode_state_value(v) for v in value]
    if isinstance(value, (bool, np.bool_, int, np.integer)):
        return encode_array(np.array(int(value), np.int64))
    if isinstance(value, (float, np.floating)) and not isinstance(value, np.ndarray):
        return encode_array(np.array(value, np.asarray(value).dtype
                                     if isinstance(value, np.floating) else np.float64))
    return encode_array(np.asarray(value))


def encode_state(state, nparams):
    """``state_dict()["state"]`` as a list aligned with the parameters (``null``: no state)."""
    out = []
    for i in range(nparams):
        entry = state.get(i)
        out.append(None if entry is None else
                   {name: encode_state_value(v) for name, v in sorted(entry.items())})
    return out


def to_json_value(value):
    """A hyperparameter's value as JSON: tuples as lists, NumPy scalars as Python numbers, a
    non-finite float as its string (:func:`float_value`)."""
    if isinstance(value, (tuple, list)):
        return [to_json_value(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if not math.isfinite(value):
            return float_value(value)
        return value
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"hyperparameter value {value!r} has no JSON form")


# ------------------------------------------------------------------------------ decoding
def decode_float(x):
    return NONFINITE[x] if isinstance(x, str) else float(x)


def numpy_dtype(name):
    """The NumPy dtype of a golden dtype name (``bfloat16``: ml_dtypes', a clear error
    naming the extra without it)."""
    if name == "bfloat16":
        from npoptim.precision.formats import bfloat16_dtype
        return bfloat16_dtype()
    return np.dtype(name)


def half_values_exact(values, dtype):
    """Whether every float64 value is exactly a value of the 16-bit ``dtype`` (NaN passes)."""
    from npoptim.precision.formats import from_float32_array, to_float32_array
    values = np.asarray(values, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        narrow = values.astype(np.float32)
    back = to_float32_array(from_float32_array(narrow, dtype), dtype).astype(np.float64)
    return bool(np.all((back == values) | np.isnan(values)))


def decode_array(obj):
    """A validated golden array object as a NumPy array of its dtype."""
    if obj["dtype"] in INT_DTYPES:
        return np.array(obj["data"], np.int64).reshape(obj["shape"])
    values = obj["data"]
    data = (np.array([decode_float(x) for x in values], np.float64)
            if str in set(map(type, values)) else np.array(values, np.float64))
    if obj["dtype"] in HALF_DTYPES:  # exact: float64 -> float32 -> the 16-bit type
        data = data.astype(np.float32)
    return data.astype(numpy_dtype(obj["dtype"])).reshape(obj["shape"])


def decode_grad(obj):
    if obj is None:
        return None
    if obj["format"] == "csr":
        return CsrGrad(tuple(obj["shape"]), np.array(obj["indptr"], np.int64),
                       np.array(obj["indices"], np.int64),
                       decode_array({"dtype": obj["dtype"], "shape": [len(obj["data"])],
                                     "data": obj["data"]}))
    return decode_array(obj)


def optimizer_grad(g):
    """A decoded gradient as npoptim's ``step`` takes it: a :class:`CsrGrad` as a scipy CSR
    array with its entries as stored (:meth:`CsrGrad.to_scipy`), anything else unchanged."""
    return g.to_scipy() if isinstance(g, CsrGrad) else g


def decode_state_value(obj):
    if obj is None:
        return None
    if isinstance(obj, list):
        return [decode_state_value(v) for v in obj]
    return decode_array(obj)


def from_json_hyper(hyper):
    """Hyperparameters from a case as constructor keywords: lists become tuples and the
    non-finite strings of :func:`to_json_value` (``"Infinity"``, ``"-Infinity"``, ``"NaN"``,
    :data:`NONFINITE`) floats again, at any depth."""
    def convert(v):
        if isinstance(v, list):
            return tuple(convert(x) for x in v)
        if isinstance(v, str) and v in NONFINITE:
            return NONFINITE[v]
        return v
    return {k: convert(v) for k, v in hyper.items()}


# ------------------------------------------------------------------------------ writing
_WRAP = 8  # numbers per line in long lists


def dumps(obj):
    """Deterministic JSON: sorted keys, one-space indent, short scalar lists on one line."""
    out = []
    _write(obj, 0, out)
    out.append("\n")
    return "".join(out)


def _scalar(x):
    if isinstance(x, (bool, np.bool_)):
        return "true" if x else "false"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if isinstance(x, (float, np.floating)):
        x = float(x)
        if not math.isfinite(x):
            raise ValueError("non-finite floats must be encoded as strings first")
        return repr(x)
    return json.dumps(x, ensure_ascii=False)


def _write(obj, depth, out):
    pad = " " * (depth + 1)
    if isinstance(obj, dict):
        if not obj:
            out.append("{}")
            return
        out.append("{\n")
        items = sorted(obj.items())
        for n, (key, value) in enumerate(items):
            out.append(pad + json.dumps(str(key), ensure_ascii=False) + ": ")
            _write(value, depth + 1, out)
            out.append(",\n" if n + 1 < len(items) else "\n")
        out.append(" " * depth + "}")
    elif isinstance(obj, (list, tuple)):
        if not obj:
            out.append("[]")
        elif all(not isinstance(v, (dict, list, tuple)) for v in obj):
            parts = [_scalar(v) for v in obj]
            if len(parts) <= _WRAP:
                out.append("[" + ", ".join(parts) + "]")
            else:
                lines = [", ".join(parts[i:i + _WRAP]) for i in range(0, len(parts), _WRAP)]
                out.append("[\n" + pad + (",\n" + pad).join(lines) + "\n" + " " * depth + "]")
        else:
            out.append("[\n")
            for n, value in enumerate(obj):
                out.append(pad)
                _write(value, depth + 1, out)
                out.append(",\n" if n + 1 < len(obj) else "\n")
            out.append(" " * depth + "]")
    else:
        out.append(_scalar(obj))
