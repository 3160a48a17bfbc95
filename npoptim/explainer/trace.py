"""The recorder behind ``npoptim explain``: run npoptim's own code as Python and record it.

Every kernel is a Numba dispatcher whose ``py_func`` is the very function it compiled. Inside
:func:`recording`, each npoptim module's dispatchers are swapped for their ``py_func`` (the
functions look their callees up in their module's globals, so a rule's calls to
``adam_moments`` or ``lerp`` run as Python too) and :func:`sys.settrace` records every call of
an npoptim function as a :class:`Call`: its arguments, each assignment in execution order
(re-assignments and loop iterations included), the calls it made, and its return value. No
rule is written twice, so what is recorded cannot drift from what the kernels compute:
compiled and Python runs agree to the bit (same IEEE operations, and :func:`~npoptim.kernels.
scalar.fma` is correctly rounded in both).

Recording is for small problems (every element's every local is kept) and is not
thread-safe: while it runs, other threads calling npoptim kernels run them as Python too (same
results, slower). A lock keeps two recordings from overlapping.

A :class:`Call` tree is the raw record; :mod:`npoptim.explainer.views` reads tables out of it.
Other per-step recorders are built on :func:`recording` the same way: the teaching
:class:`~npoptim.teaching.trajectory.StepRecorder` reads a layer's trust ratio as the return
value of the ``trust_ratio`` call inside the ``_update`` call of that parameter, recording
calls only with the kernels left compiled (``recording(kernels=False, lines=False)``).
"""
import contextlib
import os
import sys
import threading
from dataclasses import dataclass, field

import numpy as np

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_OWN_DIR = os.path.dirname(os.path.abspath(__file__))
# files whose calls are recorded but whose lines are not followed (plumbing, not math)
_CALLS_ONLY = tuple(os.path.join(_PACKAGE_DIR, *parts) for parts in (
    ("kernels",), ("sparse",), ("optim", "optimizer.py"), ("golden",), ("checkpoint.py",),
    ("registry.py",)))
_LOCK = threading.Lock()


@dataclass
class Call:
    """One call of an npoptim function, as recorded.

    ``name`` is the function's qualified name, ``module`` its module; ``args`` the arguments
    at the call; ``events`` in execution order: ``("set", name, value)`` for each assignment
    (a value that changes), ``("call", Call)`` for each call made; ``result`` the return
    value; ``caller_locals`` the calling frame's locals at the call (drivers: the loop index).
    Arrays are copies taken at that moment.
    """

    name: str
    module: str
    args: dict
    caller_locals: dict = None
    events: list = field(default_factory=list)
    result: object = None
    parent: "Call" = field(default=None, repr=False)

    @property
    def calls(self):
        """The calls this call made, in order."""
        return [e[1] for e in self.events if e[0] == "call"]

    @property
    def sets(self):
        """``(name, value)`` of each assignment, in order."""
        return [(e[1], e[2]) for e in self.events if e[0] == "set"]

    def walk(self):
        """This call and every call below it, depth first in execution order."""
        yield self
        for call in self.calls:
            yield from call.walk()

    def find(self, name):
        """Every call below (or at) this one whose name (last dotted part) is ``name``."""
        return [c for c in self.walk() if c.name.rsplit(".", 1)[-1] == name]


def snapshot(value, depth=0):
    """A copy of ``value`` that later in-place changes cannot reach, or None for what a table
    has no use for (optimizers, dicts of state, functions)."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, (bool, int, float, complex, str, np.generic)) or value is None:
        return value
    if isinstance(value, tuple) and depth < 3:
        items = [snapshot(v, depth + 1) for v in value]
        if hasattr(value, "_fields"):  # a hyperparameter record
            return type(value)(*items)
        return tuple(items)
    if isinstance(value, list) and depth < 3 and len(value) <= 64:
        return [snapshot(v, depth + 1) for v in value]
    return None


def same(a, b):
    """Whether two snapshots hold the same bits (NaN equals NaN)."""
    if a is b:
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape
                and a.dtype == b.dtype and a.tobytes() == b.tobytes())
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if type(a) is not type(b):
        return False
    try:
        return bool(a == b) or (a != a and b != b)
    except (TypeError, ValueError):
        return False


def _npoptim_modules():
    return [m for name, m in list(sys.modules.items())
            if (name == "npoptim" or name.startswith("npoptim.")) and m is not None
            and not name.startswith("npoptim.explainer")]


def _is_dispatcher(value):
    return getattr(value, "py_func", None) is not None and type(value).__module__.startswith(
        "numba")


@contextlib.contextmanager
def python_kernels():
    """Within the block, every npoptim kernel runs as its Python ``py_func`` (see the module
    docstring); restored on exit, whatever happens."""
    swapped, swapped_attributes = [], []
    for module in _npoptim_modules():
        namespace = vars(module)
        for name, value in list(namespace.items()):
            if _is_dispatcher(value):
                swapped.append((namespace, name, value))
                namespace[name] = value.py_func
            elif isinstance(value, dict) and any(_is_dispatcher(v) for v in value.values()):
                # a table of kernels (RMSprop's): a Python copy, the table itself untouched
                swapped.append((namespace, name, value))
                namespace[name] = {k: v.py_func if _is_dispatcher(v) else v
                                   for k, v in value.items()}
            elif isinstance(value, type) and value.__module__ == module.__name__:
                # kernels a class holds (Momo's KERNELS tuple): called inside the block, a
                # dispatcher would compile against the swapped globals, and fail
                for attribute, held in list(vars(value).items()):
                    if isinstance(held, tuple) and any(_is_dispatcher(v) for v in held):
                        swapped_attributes.append((value, attribute, held))
                        setattr(value, attribute, tuple(v.py_func if _is_dispatcher(v) else v
                                                        for v in held))
    try:
        yield
    finally:
        for namespace, name, value in swapped:
            namespace[name] = value
        for cls, attribute, value in swapped_attributes:
            setattr(cls, attribute, value)


def _kind(code, lines):
    """How calls of ``code`` are recorded: ``"skip"`` (not npoptim's, or the explainer's
    own), ``"lines"`` (call and assignments) or ``"call"`` (call only)."""
    filename = os.path.abspath(code.co_filename)
    if (not filename.startswith(_PACKAGE_DIR) or filename.startswith(_OWN_DIR)
            or code.co_name.startswith("<")):
        return "skip"
    return "lines" if lines and not filename.startswith(_CALLS_ONLY) else "call"


class _Tracer:
    def __init__(self, lines=True):
        self.lines = lines
        self.root = Call("<recording>", __name__, {})
        self.stack = [self.root]
        self.seen = {}  # id(frame) -> last snapshot of its locals
        self.kinds = {}  # code object -> _kind(code)

    def trace_call(self, frame, event, arg):
        if event != "call":
            return None
        code = frame.f_code
        kind = self.kinds.get(code)
        if kind is None:
            kind = self.kinds[code] = _kind(code, self.lines)
        if kind == "skip":
            return None
        args = {name: snapshot(frame.f_locals[name])
                for name in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
                if name in frame.f_locals}
        back = frame.f_back
        caller = ({k: snapshot(v) for k, v in back.f_locals.items()
                   if isinstance(v, (int, np.integer))} if back is not None else {})
        call = Call(getattr(code, "co_qualname", code.co_name),
                    frame.f_globals.get("__name__", "?"), args, caller)
        call.parent = self.stack[-1]
        self.stack[-1].events.append(("call", call))
        self.stack.append(call)
        self.seen[id(frame)] = dict(args)
        frame.f_trace_lines = kind == "lines"
        return self.trace_local

    def _record_sets(self, frame):
        last = self.seen[id(frame)]
        call = self.stack[-1]
        for name, value in frame.f_locals.items():
            if name in last and same(last[name], value):
                continue
            copied = snapshot(value)
            if name in last and same(last[name], copied):
                continue
            last[name] = copied
            call.events.append(("set", name, copied))

    def trace_local(self, frame, event, arg):
        if event == "line" and frame.f_trace_lines:
            self._record_sets(frame)
        elif event == "return":
            if frame.f_trace_lines:
                self._record_sets(frame)
            call = self.stack.pop()
            call.result = snapshot(arg)
            del self.seen[id(frame)]
        return self.trace_local


@contextlib.contextmanager
def recording(*, kernels=True, lines=True):
    """``with recording() as root:`` runs npoptim's kernels as Python and records every
    npoptim call made in the block under ``root`` (a :class:`Call`).

    ``kernels=False`` leaves the kernels compiled (their calls are then not recorded, only
    those of npoptim's Python functions: ``_update``, ``trust_ratio``, ...); ``lines=False``
    records calls (arguments, results) but no assignments. Both off, a step costs little more
    than without recording: :class:`~npoptim.teaching.trajectory.StepRecorder` records that
    way."""
    with _LOCK:
        tracer = _Tracer(lines)
        previous = sys.gettrace()
        with python_kernels() if kernels else contextlib.nullcontext():
            sys.settrace(tracer.trace_call)
            try:
                yield tracer.root
            finally:
                sys.settrace(previous)
