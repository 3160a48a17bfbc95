"""The drivers' own rules (npoptim/kernels/drivers.py's header): what a driver may contain.

Drivers and ``inlined`` helpers are inlined at the Numba IR level into the kernels that call
them, and some of those kernels are compiled with ``parallel=True``. There Numba turns every
array expression and every filled allocation (``np.zeros``, ``np.ones``, ``np.full``, ``a[:] =
x``, ...) into a parallel region of its own, which wakes the thread pool on every call, below
the parallel threshold too: the row-rule driver's ``np.zeros`` scratch row cost
``RowWiseAdagrad`` 8 ms a step on a 2-core machine whose other core was busy (0.005 ms after).
Such code belongs in a ``@kernel`` (compiled apart) or is written as ``np.empty`` and a loop.
"""
import ast
import pathlib

import npoptim

ROOT = pathlib.Path(npoptim.__file__).resolve().parent
#: calls that a parallel kernel turns into a parallel region
FILLED = {"zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "arange"}


def _inlined_functions():
    """``(path, function node)`` of every function decorated ``@driver``, ``@driver(...)`` or
    ``@inlined`` in the package."""
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef):
                continue
            for deco in node.decorator_list:
                target = deco.func if isinstance(deco, ast.Call) else deco
                name = getattr(target, "id", getattr(target, "attr", None))
                if name in ("driver", "inlined"):
                    yield path, node


def _parallel_region_makers(func):
    for node in ast.walk(func):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "np"
                and node.func.attr in FILLED):
            yield node.lineno, f"np.{node.func.attr}(...)"
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AugAssign) else [])
        for target in targets:
            if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Slice):
                yield node.lineno, "an assignment to a slice"


def test_there_are_drivers_to_check():
    found = {(path.name, func.name) for path, func in _inlined_functions()}
    assert ("drivers.py", "apply_row_rule_rows") in found
    assert ("drivers.py", "_row_rule_rows") in found
    assert len(found) >= 20


def test_no_inlined_function_makes_a_parallel_region_of_its_own():
    offenders = [f"{path.relative_to(ROOT)}:{line} {func.name}: {what}"
                 for path, func in _inlined_functions()
                 for line, what in _parallel_region_makers(func)]
    assert not offenders, "\n".join(offenders)
