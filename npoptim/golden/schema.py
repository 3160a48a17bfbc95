"""The golden-file schema (version 4; versions 1 to 3 are read too): loading with precise
errors, and the JSON Schema.

A golden file is one JSON object with ``"schema": "npoptim-golden"``, ``"schema_version"``
(2; 1 is still read) and ``"kind"``:

* ``"cases"``: a suite file (``reference_results/cases/*.json``) or a custom case written by
  ``npoptim golden``. Its ``cases`` carry everything needed to replay them (hyperparameters,
  initial parameters, each step's lr and gradients) and the expected parameters and full
  optimizer state after every step.
* ``"results"``: another implementation's output, ``cases[].steps[].params`` (and optionally
  ``state``) after every step, matched to the cases by ``id``.

:func:`load` checks a file completely before anything uses it and raises
:class:`GoldenFileError` naming the file, the case and the field (a JSON path such as
``steps[3].grads[0].indptr``). :data:`JSON_SCHEMA` is the same structure as a JSON Schema
(draft 2020-12); ``python -m npoptim.golden.regenerate`` writes it to
``reference_results/golden.schema.json``. ``reference_results/README.md`` documents the fields.

Version 2 adds, per case: ``flavor`` (the framework conventions the case is computed in,
:mod:`npoptim.flavors`; ``"torch"`` when absent), ``framework_hyperparameters`` (the same
hyperparameters in the framework's own names, or null) and ``tags`` (capabilities a
framework needs to run it: ``float64``, ``amsgrad``, ``none-grad``, ``lr-schedule``, ``csr``,
``per-example-grads`` (each dense gradient has a leading batch axis: DP-SGD), ...); per result case: ``skipped`` (a reason string, instead of ``steps``: the implementation
cannot run the case). A version 1 file has none of them and reads as before.

Version 3 adds low precision (:mod:`npoptim.precision`): the dtypes ``bfloat16`` and
``float16`` (values stored as the numbers they exactly are, :mod:`npoptim.golden.codec`), a
case's ``precision`` object (required with a 16-bit dtype: ``rounding`` ``"per-op"``,
``"fused"`` or ``"stochastic"``, ``seed`` of stochastic rounding's stream or null,
``master_weights`` ``"float32"`` or null, ``kahan`` true/false) and the tolerance's ``ulp``:
16-bit arrays pass when every element is within ``ulp`` units in the last place of the 16-bit
type (float arrays of the same case, such as master weights' float32 state, by ``rtol`` and
``atol`` as before). A float32 case may have a ``precision`` object too when it holds the
optional ``quantization`` (``"torchao-8bit"``, ``"torchao-4bit"``, ``"torchao-fp8"``,
``"bnb-8bit"``; null or absent otherwise): blockwise-quantized moments, stored as the library
names them (torchao's ``exp_avg.codes`` as integers, ``exp_avg.scale``, ``exp_avg.qmap``;
bitsandbytes' ``state1``, ``qmap1``, ``absmax1``, ...), with flag
``quantized-state``. npoptim writes a file in the lowest version it needs: a file without a
16-bit case is version 2, byte for byte as before. A 16-bit case's CSR gradient has the
case's dtype like any of its arrays (values stored exactly); its duplicates are summed in the
16-bit type in stored order (:mod:`npoptim.golden.precision_cases`), so a version 3 reader
needs nothing new for it.

Version 4 adds the optimizer wrappers (:data:`npoptim.registry.WRAPPERS`: Lookahead, SAM,
Mechanic): a case whose ``optimizer`` is a wrapper, with its ``hyperparameters``, has a
``wrapped`` object ``{"optimizer": name, "hyperparameters": {...}}``, the optimizer it wraps
(built on the case's parameters, then wrapped); each step's ``expected.state`` is the wrapped
optimizer's per-parameter state, and ``expected.wrapper_state`` (an object: name -> array or
list of arrays, one per parameter) the wrapper's own (Lookahead's ``slow_params``,
Mechanic's ``m``, ``v``, ``r``, ``s`` and ``x0``; none for SAM). A result step may carry
``wrapper_state`` too (compared when it does). Only files with a wrapper case are version 4;
a reader of versions 1 to 3 refuses them, rather than replaying the inner optimizer alone.
"""
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from npoptim.golden import codec

SCHEMA_NAME = "npoptim-golden"
SCHEMA_VERSION = 4
#: The versions this npoptim reads (it writes the lowest one a file needs, see
#: :func:`version_needed`).
READABLE_VERSIONS = (1, 2, 3, 4)
KINDS = ("cases", "results")
#: the keys of a case's ``precision`` object (version 3) and their allowed values
ROUNDINGS = ("per-op", "fused", "stochastic")
MASTER_DTYPES = ("float32",)
#: a ``precision`` object's optional ``quantization`` (version 3): blockwise-quantized moments
#: of a float32 case (:mod:`npoptim.precision.quantized_adam`), or null
QUANTIZATIONS = ("torchao-8bit", "torchao-4bit", "torchao-fp8", "bnb-8bit")


def version_needed(cases):
    """The schema version a file of these (JSON-ready) cases needs: 4 with a wrapper case
    (``wrapped``), 3 with a 16-bit dtype or a ``precision`` object, else 2."""
    if any(c.get("wrapped") is not None for c in cases):
        return 4
    return 3 if any(c.get("precision") is not None or c.get("dtype") in codec.HALF_DTYPES
                    for c in cases) else 2


class GoldenFileError(ValueError):
    """A malformed or mismatched golden/results file: names the file, the case and the field.

    Parameters
    ----------
    file : str
        the file.
    case : str or None
        the case's id, or None for the file as a whole.
    field_ : str
        the field at fault ('' for none).
    message : str
        what is wrong.
    """

    def __init__(self, file, case, field_, message):
        self.file, self.case, self.field, self.message = file, case, field_, message
        where = [str(file)]
        if case is not None:
            where.append(f"case {case!r}")
        if field_:
            where.append(field_)
        super().__init__(": ".join(where) + ": " + message)


# ------------------------------------------------------------------------- loaded objects
@dataclass
class Tolerance:
    """An array passes when every ``|actual - expected| <= atol + rtol * scale``.

    ``scale`` is the largest magnitude in the expected array (see the README); ``lre`` is the
    same ``rtol`` as digits of accuracy, ``-log10(rtol)``.
    """

    rtol: float
    atol: float
    reason: str = ""
    ulp: Optional[int] = None        # 16-bit arrays: allowed units in the last place (v3)

    @property
    def lre(self):
        return math.inf if self.rtol == 0 else -math.log10(self.rtol)


@dataclass
class Step:
    lr: float
    grads: list                      # None | np.ndarray | codec.CsrGrad, one per parameter
    expected_params: list            # np.ndarray per parameter
    expected_state: Optional[list]   # per parameter: None | {name: array | [arrays] | None}
    expected_wrapper_state: Optional[dict] = None   # v4: {name: array | [arrays]} or None


@dataclass
class Case:
    """One golden case: an optimizer's settings, its inputs and the expected trajectory.

    Parameters
    ----------
    id : str
        ``"{optimizer}/{name}/{dtype}"``, unique across the suite.
    optimizer : str
        npoptim's name of the optimizer (or wrapper).
    dtype : str
        the dtype of every parameter, gradient and float state.
    hyperparameters : dict
        every constructor hyperparameter, with torch's names.
    params : list of numpy.ndarray
        the initial parameters.
    steps : list
        per step: its lr, gradients and expected parameters and state.
    flags : list of str
        the edge cases the case exercises.
    tolerance : Tolerance
        the recommended tolerance.
    comment : str, default: ''
        what the case is about.
    torch_name : str, optional
        the ``torch.optim`` class it agrees with.
    variant : str, optional
        the named variant (LAMB, LARS).
    flavor : str, default: 'torch'
        the flavor whose conventions it follows (:mod:`npoptim.flavors`).
    framework_hyperparameters : dict, optional
        the same settings in the flavor's framework's names.
    tags : list of str
        its capability tags.
    matches : list
        the published implementations the case reproduces.
    lr_schedule : dict, optional
        how the per-step lr was made (informational).
    objective : dict, optional
        the loss a closure-driven optimizer (L-BFGS) minimises.
    source : str, default: ''
        the file it was read from.
    precision : dict, optional
        schema version 3: the low-precision mode.
    wrapped : dict, optional
        schema version 4: the optimizer a wrapper's case wraps.
    raw : dict
        the case as the JSON file holds it.
    """

    id: str
    optimizer: str
    dtype: str
    hyperparameters: dict
    params: list
    steps: list
    flags: list
    tolerance: Tolerance
    comment: str = ""
    torch_name: Optional[str] = None
    variant: Optional[str] = None
    flavor: str = "torch"
    framework_hyperparameters: Optional[dict] = None
    tags: list = field(default_factory=list)
    matches: list = field(default_factory=list)
    lr_schedule: Optional[dict] = None
    objective: Optional[dict] = None
    source: str = ""
    precision: Optional[dict] = None  # version 3: rounding, seed, master_weights, kahan
    wrapped: Optional[dict] = None    # version 4: {"optimizer": name, "hyperparameters": {}}
    raw: dict = field(default_factory=dict, repr=False)

    def __str__(self):
        return self.id


@dataclass
class ResultStep:
    params: list
    state: Optional[list]
    wrapper_state: Optional[dict] = None   # version 4: {name: array | [arrays]}


@dataclass
class ResultCase:
    """One case of a results file: what an implementation computed for a golden case.

    Parameters
    ----------
    id : str
        the golden case's id.
    steps : list
        per step, the parameters (and state) the implementation computed.
    source : str, default: ''
        the file it was read from.
    skipped : str, optional
        the implementation's reason for not running the case.
    raw : dict
        the case as the JSON file holds it.
    """

    id: str
    steps: list
    source: str = ""
    skipped: Optional[str] = None    # the implementation's reason for not running the case
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class GoldenFile:
    path: str
    kind: str
    cases: list                      # Case or ResultCase
    notes: dict = field(default_factory=dict)
    header: list = field(default_factory=list)
    raw: dict = field(default_factory=dict, repr=False)


# ------------------------------------------------------------------------------ checking
class _Checker:
    def __init__(self, file, case=None, version=SCHEMA_VERSION):
        self.file, self.case, self.version = file, case, version

    def float_dtypes(self):
        """The float dtypes of the file's version (16-bit ones from version 3)."""
        return codec.FLOAT_DTYPES + (codec.HALF_DTYPES if self.version >= 3 else ())

    def fail(self, where, message):
        raise GoldenFileError(self.file, self.case, where, message)

    def obj(self, value, where, required=()):
        if not isinstance(value, dict):
            self.fail(where, f"expected an object, got {_kind(value)}")
        for key in required:
            if key not in value:
                self.fail(_join(where, key), "missing (required)")
        return value

    def list_(self, value, where, min_len=0):
        if not isinstance(value, list):
            self.fail(where, f"expected a list, got {_kind(value)}")
        if len(value) < min_len:
            self.fail(where, f"expected at least {min_len} item(s), got {len(value)}")
        return value

    def string(self, value, where, nullable=False):
        if value is None and nullable:
            return None
        if not isinstance(value, str):
            self.fail(where, f"expected a string, got {_kind(value)}")
        return value

    def number(self, value, where, minimum=None):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(
                value):
            self.fail(where, f"expected a finite number, got {_kind(value)}")
        if minimum is not None and value < minimum:
            self.fail(where, f"must be >= {minimum}, got {value!r}")
        return value

    def integer(self, value, where, minimum=None):
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(where, f"expected an integer, got {_kind(value)}")
        if minimum is not None and value < minimum:
            self.fail(where, f"must be >= {minimum}, got {value}")
        return value

    def array(self, value, where, dtype=None, shape=None, dtypes=None):
        """A golden array object; returns it decoded."""
        self.obj(value, where, ("dtype", "shape", "data"))
        extra = set(value) - {"dtype", "shape", "data", "format"}
        if extra:
            self.fail(_join(where, sorted(extra)[0]), "unknown field of an array object")
        allowed = dtypes or (self.float_dtypes() + codec.INT_DTYPES)
        if value["dtype"] not in allowed:
            self.fail(_join(where, "dtype"), f"expected one of {list(allowed)}, got "
                                             f"{value['dtype']!r}")
        if dtype is not None and value["dtype"] != dtype:
            self.fail(_join(where, "dtype"), f"is {value['dtype']!r}, expected {dtype!r}")
        dims = self.list_(value["shape"], _join(where, "shape"))
        for i, n in enumerate(dims):
            self.integer(n, f"{_join(where, 'shape')}[{i}]", minimum=0)
        if shape is not None and list(dims) != list(shape):
            self.fail(_join(where, "shape"), f"is {list(dims)}, expected {list(shape)}")
        data = self.list_(value["data"], _join(where, "data"))
        size = math.prod(dims)
        if len(data) != size:
            self.fail(_join(where, "data"), f"has {len(data)} values, shape {list(dims)} "
                                            f"needs {size}")
        self.values(data, _join(where, "data"), integer=value["dtype"] in codec.INT_DTYPES)
        self.half_exact(value["dtype"], data, _join(where, "data"))
        return codec.decode_array(value)

    def half_exact(self, dtype, data, where):
        """A 16-bit array's values must be values of the type (stored exactly)."""
        if dtype not in codec.HALF_DTYPES or codec.half_values_exact(
                [codec.decode_float(x) for x in data], dtype):
            return
        for i, x in enumerate(data):
            if not codec.half_values_exact([codec.decode_float(x)], dtype):
                self.fail(f"{where}[{i}]", f"{x!r} is not a {dtype} value (16-bit values are "
                                           "stored as the numbers they exactly are)")

    def values(self, data, where, integer=False):
        kinds = set(map(type, data))  # what json gives: int, float, str, bool, None, list, dict
        if kinds <= ({int} if integer else {int, float}):
            return  # the common case, checked at C speed; else find the first bad value
        for i, x in enumerate(data):
            if integer:
                if isinstance(x, bool) or not isinstance(x, int):
                    self.fail(f"{where}[{i}]", f"expected an integer, got {_kind(x)}")
            elif isinstance(x, str):
                if x not in codec.NONFINITE:
                    self.fail(f"{where}[{i}]", f"expected a number (or \"NaN\", \"Infinity\", "
                                               f"\"-Infinity\"), got the string {x!r}")
            elif isinstance(x, bool) or not isinstance(x, (int, float)):
                self.fail(f"{where}[{i}]", f"expected a number, got {_kind(x)}")

    def grad(self, value, where, param, per_example=False):
        if value is None:
            return None
        self.obj(value, where, ("format",))
        fmt = value["format"]
        if fmt == "dense" and per_example:
            # DP-SGD's per-example gradients: a leading batch axis before the param's shape
            batch = value.get("shape", [None])[:1] if isinstance(value.get("shape"), list) \
                else []
            if not batch or isinstance(batch[0], bool) or not isinstance(batch[0], int) \
                    or batch[0] < 1:
                self.fail(_join(where, "shape"), "a case tagged per-example-grads needs a "
                                                 "leading batch axis of at least 1")
            return self.array(value, where, dtype=str(param.dtype),
                              shape=batch + list(param.shape))
        if fmt == "dense":
            return self.array(value, where, dtype=str(param.dtype), shape=param.shape)
        if fmt != "csr":
            self.fail(_join(where, "format"), f"expected \"dense\" or \"csr\", got {fmt!r}")
        self.obj(value, where, ("dtype", "shape", "indptr", "indices", "data"))
        extra = set(value) - {"format", "dtype", "shape", "indptr", "indices", "data"}
        if extra:
            self.fail(_join(where, sorted(extra)[0]), "unknown field of a CSR gradient")
        if value["dtype"] != str(param.dtype):
            self.fail(_join(where, "dtype"), f"is {value['dtype']!r}, expected "
                                             f"{str(param.dtype)!r}")
        if param.ndim == 0:
            self.fail(where, "a 0-d parameter cannot take a CSR gradient")
        rows = int(param.shape[0])
        cols = int(np.prod(param.shape[1:], dtype=np.int64))
        if value["shape"] != [rows, cols]:
            self.fail(_join(where, "shape"), f"is {value['shape']!r}, expected {[rows, cols]} "
                                             f"for a parameter of shape {list(param.shape)}")
        indptr = self.list_(value["indptr"], _join(where, "indptr"))
        indices = self.list_(value["indices"], _join(where, "indices"))
        data = self.list_(value["data"], _join(where, "data"))
        self.values(indptr, _join(where, "indptr"), integer=True)
        self.values(indices, _join(where, "indices"), integer=True)
        self.values(data, _join(where, "data"))
        self.half_exact(value["dtype"], data, _join(where, "data"))
        if len(indptr) != rows + 1:
            self.fail(_join(where, "indptr"), f"has {len(indptr)} entries, expected {rows + 1}")
        if indptr[0] != 0:
            self.fail(_join(where, "indptr") + "[0]", f"must be 0, got {indptr[0]}")
        for r in range(rows):
            if indptr[r + 1] < indptr[r]:
                self.fail(_join(where, "indptr") + f"[{r + 1}]", "indptr decreases")
        if indptr[-1] != len(indices) or len(indices) != len(data):
            self.fail(where, f"indptr[-1] = {indptr[-1]}, but indices has {len(indices)} and "
                             f"data {len(data)} entries (all three must agree)")
        for k, c in enumerate(indices):
            if not 0 <= c < cols:
                self.fail(_join(where, "indices") + f"[{k}]", f"column {c} is out of range "
                                                              f"[0, {cols})")
        return codec.decode_grad(value)

    def state_value(self, value, where):
        if value is None:
            return None
        if isinstance(value, list):
            return [self.state_value(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return self.array(value, where)

    def state(self, value, where, nparams):
        self.list_(value, where)
        if len(value) != nparams:
            self.fail(where, f"has {len(value)} entries, expected one per parameter "
                             f"({nparams}; null for a parameter without state)")
        out = []
        for i, entry in enumerate(value):
            if entry is None:
                out.append(None)
                continue
            self.obj(entry, f"{where}[{i}]")
            out.append({name: self.state_value(v, f"{where}[{i}].{name}")
                        for name, v in entry.items()})
        return out

    def wrapper_state(self, value, where):
        """A step's ``wrapper_state`` (version 4): an object, name -> array or list of
        arrays (or null)."""
        if self.version < 4:
            self.fail(where, f"is a schema_version 4 field; the file says version "
                             f"{self.version}")
        self.obj(value, where)
        return {name: self.state_value(v, f"{where}.{name}") for name, v in value.items()}

    def params(self, value, where, shapes_of=None, dtype=None):
        self.list_(value, where, min_len=1)
        if shapes_of is not None and len(value) != len(shapes_of):
            self.fail(where, f"has {len(value)} arrays, expected {len(shapes_of)} (one per "
                             "parameter)")
        return [self.array(v, f"{where}[{i}]", dtype=dtype,
                           shape=None if shapes_of is None else shapes_of[i].shape,
                           dtypes=self.float_dtypes())
                for i, v in enumerate(value)]


def _join(where, key):
    return f"{where}.{key}" if where else str(key)


def _kind(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


# ------------------------------------------------------------------------------- parsing
def _no_duplicates(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r} in a JSON object")
        out[key] = value
    return out


def _reject_constant(name):
    raise ValueError(f"{name} is not valid JSON; write non-finite values as the strings "
                     "\"NaN\", \"Infinity\", \"-Infinity\"")


def read_json(path):
    """Parse a JSON file strictly (no NaN literals, no duplicate keys)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise GoldenFileError(path, None, None, f"cannot read: {exc.strerror}") from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates,
                          parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise GoldenFileError(path, None, None, f"not valid JSON: {exc.msg} at line "
                                                f"{exc.lineno} column {exc.colno}") from None
    except (ValueError, RecursionError) as exc:
        raise GoldenFileError(path, None, None, f"not valid JSON: {exc}") from None


def parse(doc, path="<memory>", kind=None):
    """Check a parsed golden document and return a :class:`GoldenFile`."""
    path = str(path)
    c = _Checker(path)
    c.obj(doc, "", ("schema", "schema_version", "kind", "cases"))
    if doc["schema"] != SCHEMA_NAME:
        c.fail("schema", f"expected {SCHEMA_NAME!r}, got {doc['schema']!r}")
    version = doc["schema_version"]
    if version not in READABLE_VERSIONS or isinstance(version, bool):
        c.fail("schema_version", f"this npoptim reads versions "
                                 f"{', '.join(map(str, READABLE_VERSIONS))}, the file has "
                                 f"{version!r}")
    if doc["kind"] not in KINDS:
        c.fail("kind", f"expected one of {list(KINDS)}, got {doc['kind']!r}")
    if kind is not None and doc["kind"] != kind:
        c.fail("kind", f"is {doc['kind']!r}, expected a {kind!r} file here")
    notes = c.obj(doc.get("notes", {}), "notes")
    header = c.list_(doc.get("header", []), "header")
    cases = c.list_(doc["cases"], "cases")
    seen = {}
    parsed = []
    for n, raw in enumerate(cases):
        c.obj(raw, f"cases[{n}]", ("id",))
        case_id = c.string(raw["id"], f"cases[{n}].id")
        if case_id in seen:
            c.fail(f"cases[{n}].id", f"{case_id!r} is also the id of cases[{seen[case_id]}]")
        seen[case_id] = n
        if doc["kind"] == "cases":
            parsed.append(_parse_case(raw, path, notes, version))
        else:
            parsed.append(_parse_result(raw, path, version))
    if "number_of_cases" in doc and doc["number_of_cases"] != len(cases):
        c.fail("number_of_cases", f"is {doc['number_of_cases']!r}, the file has {len(cases)} "
                                  "cases")
    return GoldenFile(path, doc["kind"], parsed, notes, header, doc)


def _parse_case(raw, path, notes, version=SCHEMA_VERSION):
    c = _Checker(path, raw["id"], version)
    for since, names in ((2, ("flavor", "framework_hyperparameters", "tags")),
                         (3, ("precision",)), (4, ("wrapped",))):
        for name in names:
            if version < since and name in raw:
                c.fail(name, f"is a schema_version {since} field; the file says version "
                             f"{version}")
    c.obj(raw, "", ("optimizer", "dtype", "hyperparameters", "params", "steps", "flags",
                    "tolerance"))
    c.string(raw["optimizer"], "optimizer")
    dtype = raw["dtype"]
    if dtype not in c.float_dtypes():
        c.fail("dtype", f"expected one of {list(c.float_dtypes())}, got {dtype!r}")
    precision = _parse_precision(c, raw.get("precision"), dtype)
    hyper = c.obj(raw["hyperparameters"], "hyperparameters")
    wrapped = _parse_wrapped(c, raw.get("wrapped"), raw["optimizer"])
    params = c.params(raw["params"], "params", dtype=dtype)
    objective = _parse_objective(c, raw.get("objective"), params, dtype)
    steps = []
    for t, step in enumerate(c.list_(raw["steps"], "steps", min_len=1)):
        where = f"steps[{t}]"
        c.obj(step, where, ("lr", "expected") if objective else ("lr", "grads", "expected"))
        if "step" in step and step["step"] != t + 1:
            c.fail(f"{where}.step", f"is {step['step']!r}, expected {t + 1}")
        lr = c.number(step["lr"], f"{where}.lr", minimum=0)
        if objective is not None:
            if step.get("grads") is not None:
                c.fail(f"{where}.grads", "a case with an objective has no stored gradients")
            grads = [None] * len(params)
        else:
            grads = c.list_(step["grads"], f"{where}.grads")
            if len(grads) != len(params):
                c.fail(f"{where}.grads", f"has {len(grads)} entries, expected one per "
                                         f"parameter ({len(params)}; null for no gradient)")
            per_example = (isinstance(raw.get("tags"), list)
                           and "per-example-grads" in raw["tags"])
            grads = [c.grad(g, f"{where}.grads[{i}]", params[i], per_example)
                     for i, g in enumerate(grads)]
        expected = c.obj(step["expected"], f"{where}.expected", ("params",))
        exp_params = c.params(expected["params"], f"{where}.expected.params", params, dtype)
        exp_state = None
        if expected.get("state") is not None:
            exp_state = c.state(expected["state"], f"{where}.expected.state", len(params))
        exp_wrapper_state = None
        if expected.get("wrapper_state") is not None:
            if wrapped is None:
                c.fail(f"{where}.expected.wrapper_state", "only a wrapper case (with "
                                                           "\"wrapped\") has one")
            exp_wrapper_state = c.wrapper_state(expected["wrapper_state"],
                                                f"{where}.expected.wrapper_state")
        steps.append(Step(float(lr), grads, exp_params, exp_state, exp_wrapper_state))
    flags = c.list_(raw["flags"], "flags")
    for i, flag in enumerate(flags):
        c.string(flag, f"flags[{i}]")
        if flag not in notes:
            c.fail(f"flags[{i}]", f"flag {flag!r} has no entry in the file's \"notes\"")
    tol = c.obj(raw["tolerance"], "tolerance", ("rtol", "atol"))
    ulp = tol.get("ulp")
    if ulp is not None:
        if version < 3:
            c.fail("tolerance.ulp", f"is a schema_version 3 field; the file says version "
                                    f"{version}")
        c.integer(ulp, "tolerance.ulp", minimum=0)
    elif dtype in codec.HALF_DTYPES:
        c.fail("tolerance.ulp", f"missing (required for a {dtype} case)")
    tolerance = Tolerance(float(c.number(tol["rtol"], "tolerance.rtol", minimum=0)),
                          float(c.number(tol["atol"], "tolerance.atol", minimum=0)),
                          c.string(tol.get("reason", ""), "tolerance.reason"), ulp)
    matches = c.list_(raw.get("matches", []), "matches")
    for i, m in enumerate(matches):
        c.string(m, f"matches[{i}]")
    schedule = raw.get("lr_schedule")
    if schedule is not None:
        c.obj(schedule, "lr_schedule", ("kind",))
    tags = c.list_(raw.get("tags", []), "tags")
    for i, tag in enumerate(tags):
        c.string(tag, f"tags[{i}]")
    framework_hyper = raw.get("framework_hyperparameters")
    if framework_hyper is not None:
        c.obj(framework_hyper, "framework_hyperparameters")
    return Case(id=raw["id"], optimizer=raw["optimizer"], dtype=dtype, hyperparameters=hyper,
                params=params, steps=steps, flags=list(flags), tolerance=tolerance,
                comment=c.string(raw.get("comment", ""), "comment"),
                torch_name=c.string(raw.get("torch_name"), "torch_name", nullable=True),
                variant=c.string(raw.get("variant"), "variant", nullable=True),
                flavor=c.string(raw.get("flavor", "torch"), "flavor"),
                framework_hyperparameters=framework_hyper, tags=list(tags),
                matches=list(matches), lr_schedule=schedule, objective=objective,
                source=path, precision=precision, wrapped=wrapped, raw=raw)


def _parse_wrapped(c, raw, optimizer):
    """A wrapper case's ``wrapped`` object (version 4): the optimizer the case's
    ``optimizer`` wraps, with its hyperparameters."""
    if raw is None:
        return None
    c.obj(raw, "wrapped", ("optimizer", "hyperparameters"))
    extra = set(raw) - {"optimizer", "hyperparameters"}
    if extra:
        c.fail(f"wrapped.{sorted(extra)[0]}", "unknown field of a wrapped object (it has "
                                               "\"optimizer\" and \"hyperparameters\")")
    name = c.string(raw["optimizer"], "wrapped.optimizer")
    if not name:
        c.fail("wrapped.optimizer", "must name the wrapped optimizer")
    if name == optimizer:
        c.fail("wrapped.optimizer", f"is the case's optimizer {optimizer!r} itself (a "
                                    "wrapper wraps another optimizer)")
    c.obj(raw["hyperparameters"], "wrapped.hyperparameters")
    return {"optimizer": name, "hyperparameters": dict(raw["hyperparameters"])}


def _parse_precision(c, raw, dtype):
    """A case's ``precision`` object (version 3), required with a 16-bit dtype."""
    if raw is None:
        if dtype in codec.HALF_DTYPES:
            c.fail("precision", f"missing (required for a {dtype} case)")
        return None
    c.obj(raw, "precision", ("rounding", "seed", "master_weights", "kahan"))
    quantization = raw.get("quantization")
    if quantization is not None and quantization not in QUANTIZATIONS:
        c.fail("precision.quantization", f"expected one of {list(QUANTIZATIONS)} or null, got "
                                         f"{quantization!r}")
    if quantization is not None and dtype != "float32":
        c.fail("precision.quantization", f"is for float32 cases (the case is {dtype})")
    if quantization is None and dtype not in codec.HALF_DTYPES:
        c.fail("precision", f"only a bfloat16 or float16 case, or a float32 one with a "
                            f"quantization, has one (the case is {dtype})")
    extra = set(raw) - {"rounding", "seed", "master_weights", "kahan", "quantization"}
    if extra:
        c.fail(f"precision.{sorted(extra)[0]}", "unknown field of a precision object")
    if raw["rounding"] not in ROUNDINGS:
        c.fail("precision.rounding", f"expected one of {list(ROUNDINGS)}, got "
                                     f"{raw['rounding']!r}")
    if raw["seed"] is not None:
        c.integer(raw["seed"], "precision.seed", minimum=0)
    if (raw["seed"] is None) == (raw["rounding"] == "stochastic"):
        c.fail("precision.seed", "an integer with rounding \"stochastic\" (its stream's "
                                 "seed), null otherwise")
    if raw["master_weights"] not in MASTER_DTYPES + (None,):
        c.fail("precision.master_weights", f"expected one of {list(MASTER_DTYPES)} or null, "
                                           f"got {raw['master_weights']!r}")
    if not isinstance(raw["kahan"], bool):
        c.fail("precision.kahan", f"expected true or false, got {_kind(raw['kahan'])}")
    return dict(raw)


OBJECTIVE_KINDS = {"separable-quartic": ("center", "h", "q")}


def _parse_objective(c, raw, params, dtype):
    """``None``, or the objective with its arrays decoded (see
    ``npoptim.golden.inputs.OBJECTIVES``)."""
    if raw is None:
        return None
    c.obj(raw, "objective", ("kind",))
    kind = raw["kind"]
    if kind not in OBJECTIVE_KINDS:
        c.fail("objective.kind", f"expected one of {sorted(OBJECTIVE_KINDS)}, got {kind!r}")
    n = sum(p.size for p in params)
    out = dict(raw)
    for name in OBJECTIVE_KINDS[kind]:
        if name not in raw:
            c.fail(f"objective.{name}", "missing (required)")
        out[name] = c.array(raw[name], f"objective.{name}", dtype=dtype, shape=[n])
    return out


def _parse_result(raw, path, version=SCHEMA_VERSION):
    c = _Checker(path, raw["id"], version)
    if "skipped" in raw:
        if version < 2:
            c.fail("skipped", f"is a schema_version 2 field; the file says version {version}")
        reason = c.string(raw["skipped"], "skipped")
        if not reason.strip():
            c.fail("skipped", "must give the reason the case was not run")
        if raw.get("steps"):
            c.fail("steps", "a skipped case has no steps")
        return ResultCase(raw["id"], [], path, raw=raw, skipped=reason)
    c.obj(raw, "", ("steps",))
    steps = []
    for t, step in enumerate(c.list_(raw["steps"], "steps")):
        where = f"steps[{t}]"
        c.obj(step, where, ("params",))
        params = c.params(step["params"], f"{where}.params")
        state = None
        if step.get("state") is not None:
            state = c.state(step["state"], f"{where}.state", len(params))
        wrapper_state = None
        if step.get("wrapper_state") is not None:
            wrapper_state = c.wrapper_state(step["wrapper_state"], f"{where}.wrapper_state")
        steps.append(ResultStep(params, state, wrapper_state))
    return ResultCase(raw["id"], steps, path, raw=raw)


def load(path, kind=None):
    """Load and check one golden file (``kind``: require ``"cases"`` or ``"results"``).

    Parameters
    ----------
    path : str or os.PathLike
        the golden file.
    kind : str, optional
        ``"cases"`` or ``"results"`` to require that kind; None takes either.
    """
    return parse(read_json(path), path, kind)


def golden_documents(path):
    """``(path, parsed JSON)`` of each golden file at ``path``: the file itself, or every
    ``*.json`` under a directory whose top-level ``"schema"`` is ``"npoptim-golden"`` (sorted
    by path). Each file is read once: the caller checks the document it gets (:func:`parse`)."""
    path = Path(path)
    if not path.exists():
        raise GoldenFileError(path, None, None, "no such file or directory")
    if path.is_file():
        return [(path, read_json(path))]
    found = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith(".json"):
                continue
            p = Path(root) / name
            doc = read_json(p)
            if isinstance(doc, dict) and doc.get("schema") == SCHEMA_NAME:
                found.append((p, doc))
    if not found:
        raise GoldenFileError(path, None, None, "no golden files (JSON with \"schema\": "
                                                f"\"{SCHEMA_NAME}\") in this directory")
    return found


def load_all(path, kind=None, unavailable=None):
    """Every case (or result) at ``path`` (file or directory), ids unique across files.

    With a list ``unavailable``, a file whose arrays need a library that is not installed
    (bfloat16 needs ``ml_dtypes``, the extra ``npoptim[bf16]``) is left out and
    ``(path, message)`` appended to the list; without one, its ``ImportError`` is raised.

    Parameters
    ----------
    path : str or os.PathLike
        a golden file or a directory of them.
    kind : str, optional
        ``"cases"`` or ``"results"`` to require that kind; None takes either.
    unavailable : list, optional
        where to append ``(path, message)`` for each file left out for a missing
        library.
    """
    out, where = [], {}
    for p, raw in golden_documents(path):
        try:
            doc = parse(raw, p, kind)
        except ImportError as exc:
            if unavailable is None:
                raise
            unavailable.append((p, str(exc)))
            continue
        for case in doc.cases:
            if case.id in where:
                raise GoldenFileError(p, case.id, "id",
                                      f"also the id of a case in {where[case.id]}")
            where[case.id] = p
            out.append(case)
    return out


# ---------------------------------------------------------------------------- JSON Schema
_NUMBER = {"oneOf": [{"type": "number"}, {"enum": ["NaN", "Infinity", "-Infinity"]}]}
_SHAPE = {"type": "array", "items": {"type": "integer", "minimum": 0}}

JSON_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "npoptim-golden-v4.schema.json",
    "title": "npoptim golden optimizer cases and results, schema version 4 (reads 1 to 3)",
    "description": "See reference_results/README.md. Arrays are flattened in row-major order; "
                   "floats are the shortest round-trip decimal of the float64 value (float32, "
                   "bfloat16 and float16 values stored as the float64 number equal to them); "
                   "non-finite values are the strings NaN, Infinity, -Infinity.",
    "type": "object",
    "required": ["schema", "schema_version", "kind", "cases"],
    "properties": {
        "schema": {"const": SCHEMA_NAME},
        "schema_version": {"enum": list(READABLE_VERSIONS)},
        "kind": {"enum": list(KINDS)},
        "optimizer": {"type": "string"},
        "number_of_cases": {"type": "integer", "minimum": 0},
        "header": {"type": "array", "items": {"type": "string"}},
        "notes": {"type": "object", "additionalProperties": {"$ref": "#/$defs/note"}},
        "implementation": {"type": "string"},
        "cases": {"type": "array"},
    },
    "if": {"properties": {"kind": {"const": "cases"}}},
    "then": {"properties": {"cases": {"items": {"$ref": "#/$defs/case"}}}},
    "else": {"properties": {"cases": {"items": {"$ref": "#/$defs/result_case"}}}},
    "$defs": {
        "number": _NUMBER,
        "float_array": {
            "type": "object", "required": ["dtype", "shape", "data"],
            "additionalProperties": False,
            "properties": {"dtype": {"enum": list(codec.FLOAT_DTYPES + codec.HALF_DTYPES)},
                           "shape": _SHAPE,
                           "data": {"type": "array", "items": {"$ref": "#/$defs/number"}}}},
        "int_array": {
            "type": "object", "required": ["dtype", "shape", "data"],
            "additionalProperties": False,
            "properties": {"dtype": {"enum": list(codec.INT_DTYPES)}, "shape": _SHAPE,
                           "data": {"type": "array", "items": {"type": "integer"}}}},
        "array": {"oneOf": [{"$ref": "#/$defs/float_array"}, {"$ref": "#/$defs/int_array"}]},
        "dense_grad": {
            "type": "object", "required": ["format", "dtype", "shape", "data"],
            "additionalProperties": False,
            "properties": {"format": {"const": "dense"},
                           "dtype": {"enum": list(codec.FLOAT_DTYPES + codec.HALF_DTYPES)},
                           "shape": _SHAPE,
                           "data": {"type": "array", "items": {"$ref": "#/$defs/number"}}}},
        "csr_grad": {
            "type": "object",
            "required": ["format", "dtype", "shape", "indptr", "indices", "data"],
            "additionalProperties": False,
            "properties": {
                "format": {"const": "csr"},
                "dtype": {"enum": list(codec.FLOAT_DTYPES + codec.HALF_DTYPES)},
                "shape": {**_SHAPE, "minItems": 2, "maxItems": 2},
                "indptr": {"type": "array", "items": {"type": "integer", "minimum": 0},
                           "minItems": 1},
                "indices": {"type": "array", "items": {"type": "integer", "minimum": 0}},
                "data": {"type": "array", "items": {"$ref": "#/$defs/number"}}}},
        "grad": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/dense_grad"},
                           {"$ref": "#/$defs/csr_grad"}]},
        "state_value": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/array"},
                                  {"type": "array", "items": {"$ref": "#/$defs/state_value"}}]},
        "state": {"type": "array", "items": {
            "oneOf": [{"type": "null"},
                      {"type": "object",
                       "additionalProperties": {"$ref": "#/$defs/state_value"}}]}},
        "note": {"type": "object", "required": ["description"],
                 "properties": {"bug_type": {"type": "string"},
                                "description": {"type": "string"},
                                "effect": {"type": "string"}}},
        "tolerance": {"type": "object", "required": ["rtol", "atol"],
                      "properties": {"rtol": {"type": "number", "minimum": 0},
                                     "atol": {"type": "number", "minimum": 0},
                                     "lre": {"type": "number"},
                                     "scale": {"type": "string"},
                                     "ulp": {"type": "integer", "minimum": 0},
                                     "reason": {"type": "string"}}},
        "precision": {
            "type": "object", "required": ["rounding", "seed", "master_weights", "kahan"],
            "additionalProperties": False,
            "properties": {"rounding": {"enum": list(ROUNDINGS)},
                           "seed": {"type": ["integer", "null"], "minimum": 0},
                           "master_weights": {"enum": list(MASTER_DTYPES) + [None]},
                           "kahan": {"type": "boolean"},
                           "quantization": {"enum": list(QUANTIZATIONS) + [None]}}},
        "wrapped": {
            "type": "object", "required": ["optimizer", "hyperparameters"],
            "additionalProperties": False,
            "properties": {"optimizer": {"type": "string", "minLength": 1},
                           "hyperparameters": {"type": "object"}}},
        "wrapper_state": {"oneOf": [{"type": "null"},
                                    {"type": "object",
                                     "additionalProperties": {"$ref": "#/$defs/state_value"}}]},
        "case": {
            "type": "object",
            "required": ["id", "optimizer", "dtype", "hyperparameters", "params", "steps",
                         "flags", "tolerance"],
            "if": {"properties": {"dtype": {"enum": list(codec.HALF_DTYPES)}}},
            "then": {"required": ["precision"],
                     "properties": {"precision": {"$ref": "#/$defs/precision"},
                                    "tolerance": {"required": ["ulp"]}}},
            "properties": {
                "id": {"type": "string", "minLength": 1},
                "optimizer": {"type": "string"},
                "torch_name": {"type": ["string", "null"]},
                "variant": {"type": ["string", "null"]},
                "flavor": {"type": "string"},
                "framework_hyperparameters": {"type": ["object", "null"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "matches": {"type": "array", "items": {"type": "string"}},
                "comment": {"type": "string"},
                "dtype": {"enum": list(codec.FLOAT_DTYPES + codec.HALF_DTYPES)},
                "precision": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/precision"}]},
                "sparse_kind": {"type": "string"},
                "seed": {"type": "integer"},
                "hyperparameters": {"type": "object"},
                "wrapped": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/wrapped"}]},
                "lr_schedule": {"oneOf": [{"type": "null"},
                                          {"type": "object", "required": ["kind"]}]},
                "flags": {"type": "array", "items": {"type": "string"}},
                "tolerance": {"$ref": "#/$defs/tolerance"},
                "params": {"type": "array", "minItems": 1,
                           "items": {"$ref": "#/$defs/float_array"}},
                "objective": {"oneOf": [
                    {"type": "null"},
                    {"type": "object", "required": ["kind", "center", "h", "q"],
                     "properties": {"kind": {"const": "separable-quartic"},
                                    "formula": {"type": "string"},
                                    "center": {"$ref": "#/$defs/float_array"},
                                    "h": {"$ref": "#/$defs/float_array"},
                                    "q": {"$ref": "#/$defs/float_array"}}}]},
                "steps": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "required": ["lr", "expected"],
                    "properties": {
                        "step": {"type": "integer", "minimum": 1},
                        "lr": {"type": "number", "minimum": 0},
                        "grads": {"type": "array", "items": {"$ref": "#/$defs/grad"}},
                        "expected": {
                            "type": "object", "required": ["params"],
                            "properties": {
                                "params": {"type": "array",
                                           "items": {"$ref": "#/$defs/float_array"}},
                                "state": {"oneOf": [{"type": "null"},
                                                    {"$ref": "#/$defs/state"}]},
                                "wrapper_state": {"$ref": "#/$defs/wrapper_state"}}}}}}}},
        "result_case": {
            "type": "object", "required": ["id"],
            "oneOf": [{"required": ["steps"]},
                      {"required": ["skipped"], "properties": {"steps": {"maxItems": 0}}}],
            "properties": {
                "id": {"type": "string", "minLength": 1},
                "skipped": {"type": "string", "minLength": 1},
                "steps": {"type": "array", "items": {
                    "type": "object", "required": ["params"],
                    "properties": {
                        "params": {"type": "array", "minItems": 1,
                                   "items": {"$ref": "#/$defs/float_array"}},
                        "state": {"oneOf": [{"type": "null"},
                                            {"$ref": "#/$defs/state"}]},
                        "wrapper_state": {"$ref": "#/$defs/wrapper_state"}}}}}},
    },
}
