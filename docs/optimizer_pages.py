"""The reference part of each optimizer's page, which ``docs/conf.py`` writes at build time.

After the module's math and the class with its numpydoc Parameters section, a page has: its
algorithm box (:func:`algorithm_box`, as torch.optim's pages have: the inputs from the
Parameters section, the state to initialize as the optimizer creates it in the example's step,
the loop with the module's update math, the return; tests/test_docs.py holds each box to the
constructor, the state_dict and the module docstring), its references (the paper and the code it follows, :data:`npoptim.registry.REFERENCES`), the
sparse kind (:attr:`~npoptim.optim.optimizer.Optimizer.sparse_kind`), the flavors (each
framework's name for the optimizer and its defaults, from the tables of
:mod:`npoptim.frameworks`, what ``npoptim list --json`` shows), a short runnable example
(:func:`example`, generated from the registry; tests/test_docs.py runs every one), and where
its golden cases are, with the ``npoptim explain`` command. Everything is read from the
registry, the classes and the flavor tables, so a page cannot drift from the code.
"""
import contextlib
import copy
import importlib
import inspect
import io
import json
import re
from pathlib import Path

import numpy as np

from npoptim import flavors, registry
from npoptim.frameworks import REQUIRED

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "reference_results" / "cases"

#: What a sparse kind means (:class:`npoptim.optim.optimizer.Optimizer`'s docstring).
SPARSE_KINDS = {
    "exact": "a CSR gradient updates only its stored entries, and that equals the dense "
             "update with the missing entries zero (a zero gradient changes nothing).",
    "lazy": "a CSR gradient updates only its stored entries; the others keep stale state, "
            "which differs from the dense update.",
    "dense-only": "a CSR gradient is refused; give dense arrays.",
    "wrapped": "the wrapped optimizer's: a CSR gradient goes to it.",
}

#: Keywords an example needs beyond the defaults (GaLore's rank is at most the matrix's side).
EXAMPLE_KEYWORDS = {"GaLoreAdamW": "rank=1"}
#: What ``npoptim explain`` needs beyond the name (Sophia's first step updates its Hessian
#: estimate, which the command line cannot pass: the estimate from the gradient).
EXPLAIN_ARGUMENTS = {"Sophia": "hessian_estimate=squared-gradient"}
#: The optimizer a wrapper's example wraps.
WRAPPED = {"Lookahead": "npoptim.SGD([param], lr=0.1)", "SAM": "npoptim.SGD([param], lr=0.1)",
           "Mechanic": "npoptim.Adam([param])"}


def _class(name):
    if registry.is_wrapper(name):
        return registry.get_wrapper(name)
    return registry.get(name)


def example(name):
    """A short script: ``name`` built on a 2x2 NumPy parameter, one ``step`` on the gradient
    of ``sum(param ** 2)``, the parameter printed."""
    cls = _class(name)
    if registry.is_wrapper(name):
        build = f"optimizer = npoptim.{name}({WRAPPED[name]})"
    else:
        keywords = EXAMPLE_KEYWORDS.get(name)
        build = f"optimizer = npoptim.{name}([param]{', ' + keywords if keywords else ''})"
    lines = ["import numpy as np", "import npoptim", "",
             "param = np.array([[1.0, -2.0], [0.5, 3.0]])", build]
    if getattr(cls, "needs_closure", False) or name == "SAM":
        lines += ["", "", "def closure():  # the loss sum(param ** 2) and its gradient",
                  "    return float(np.sum(param ** 2)), [2 * param]", "", "",
                  "loss = optimizer.step(closure)"]
    elif getattr(cls, "per_example_grads", False):
        lines += ["per_example = np.stack([2 * param, param])  # two examples' gradients",
                  "optimizer.step([per_example])"]
    elif name == "Sophia":
        lines += ["grad = 2 * param  # the gradient of sum(param ** 2)",
                  "optimizer.step([grad], hessian=[np.full_like(param, 2.0)])"
                  "  # and its Hessian's diagonal"]
    else:
        lines += ["grad = 2 * param  # the gradient of sum(param ** 2)",
                  "optimizer.step([grad])"]
    lines.append("print(param)")
    return "\n".join(lines) + "\n"


def explain_command(name):
    """The ``npoptim explain`` command of the page (tests/test_docs.py runs them)."""
    return " ".join(["npoptim explain", name] + ([EXPLAIN_ARGUMENTS[name]]
                                                   if name in EXPLAIN_ARGUMENTS else []))


def _rst_text(text):
    """Plain text as reStructuredText: markup characters escaped."""
    return re.sub(r"([\\*`|_<>\[\]])", r"\\\1", text)


def _call(keywords):
    return ", ".join(f"{k}=<required>" if v is REQUIRED else f"{k}={v!r}"
                     for k, v in keywords.items())


def flavor_lines(name):
    """The Flavors section's body: one item per framework that has ``name``."""
    items = []
    for flavor in flavors.FLAVORS.values():
        if flavor.name == "torch" or name not in flavor.switches:
            continue
        sets = dict(flavor.defaults(name))
        if isinstance(flavor.step_scope, str) and flavor.step_scope != "per_param":
            sets["step_scope"] = flavor.step_scope
        items += [f"* **{flavor.name}**: {_rst_text(flavor.framework)}", ""]
        for table_name, entry in flavor.constructors.items():
            if entry.npoptim == name:
                call = entry.call or f"{flavor.call_prefix}{table_name}"
                items += [f"  - ``{call}({_call(entry.defaults)})``"]
        differs = flavor.differs.get(name, "torch's math")
        items += [f"  - ``npoptim.{name}(params, flavor=\"{flavor.name}\")`` sets "
                  + (f"``{_call(sets)}``" if sets else "nothing beyond torch's form"),
                  f"  - what differs from torch: {_rst_text(differs)}", ""]
    if not items:
        return [f"None: {name} takes no ``flavor=`` (one form, the module docstring's; "
                "see :doc:`/flavors`).", ""]
    return [f"``flavor=NAME`` or ``npoptim.flavors.from_framework(NAME, ...)`` builds {name} "
            "as another framework computes it (see :doc:`/flavors`).", ""] + items


def _number_of_cases(name):
    return json.loads((CASES / f"{name}.json").read_text())["number_of_cases"]


def reference_lines(name):
    """The References section's body: the paper and the code, as links."""
    paper, code = registry.REFERENCES[name]
    lines = [f"* Paper: {paper}" if paper else "* Paper: none of its own (see the module "
             "docstring)"]
    if code:
        owner, repo, _, ref, path = code.split("/", 7)[3:]
        at = "" if ref == "HEAD" else f" at {ref}"
        lines.append(f"* The code it follows: `{owner}/{repo} {path}{at} <{code}>`__")
    else:
        lines.append("* The code it follows: the paper's algorithm; each variant's source file "
                     "is listed above")
    return lines + ["", "Every source and where they differ: the module docstring above.", ""]


def sections(name):
    """The reStructuredText of the page's sections after the class."""
    cls = _class(name)
    kind = cls.sparse_kind
    lines = algorithm_box(name)
    lines += ["References", "----------", ""] + reference_lines(name)
    lines += ["Sparse gradients", "----------------", "",
             f"Sparse kind ``{kind}``: {SPARSE_KINDS[kind]} See :doc:`/sparse`.", ""]
    if not registry.is_wrapper(name):
        lines += ["Flavors", "-------", ""] + flavor_lines(name)
    lines += ["Example", "-------", "", ".. code-block:: python", ""]
    lines += ["   " + line if line else "" for line in example(name).splitlines()] + [""]
    lines += ["Golden cases and ``explain``", "----------------------------", "",
              f"{_number_of_cases(name)} golden cases in "
              f"``reference_results/cases/{name}.json`` (the format: :doc:`/golden`)."]
    if registry.is_wrapper(name):
        lines += ["``npoptim explain`` takes optimizers, not wrappers: explain the wrapped one.",
                  ""]
    else:
        lines += ["Every intermediate of a step (``--help``: :doc:`/_generated/cli`)::", "",
                  f"    {explain_command(name)}", ""]
    return lines


#: ``{name}`` of a state as a module docstring names it with its symbol: ``name`` (:math:`m`)
#: or :math:`m` (``name``).
_NAMED_SYMBOL = (r"``(?P<name>\w+)``\s+\(:math:`(?P<symbol>[^`]+)`[,;)]",
                 r":math:`(?P<symbol>[^`]+)`\s+\(``(?P<name>\w+)``[,;)]")


def _symbols(module):
    """The symbols the module docstring gives its states' names (see :data:`_NAMED_SYMBOL`)."""
    doc = importlib.import_module(module).__doc__ or ""
    found = {}
    for pattern in _NAMED_SYMBOL:
        for match in re.finditer(pattern, doc):
            found.setdefault(match.group("name"), match.group("symbol"))
    return found


def _described(value, param):
    """A state's initial value as a reader reads it: a number, θ₀ (a copy of the parameter),
    a constant array, each parameter's (a list: its first entry's), or None (for what this
    cannot say)."""
    if isinstance(value, list) and value:
        first = _described(value[0], param)
        return first and first + " (one per parameter)"
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return f"``{value!r}``"
    if isinstance(value, np.ndarray) and value.size:
        if value.shape == param.shape and np.array_equal(value, param):
            return r":math:`\theta_0`"
        if np.all(value == value.flat[0]):
            return f"``{value.flat[0].item()!r}``" + (" (an array)" if value.ndim else "")
    return None


def _module(name):
    return (registry.WRAPPERS if registry.is_wrapper(name) else registry.OPTIMIZERS)[name][0]


def built_and_stepped(name):
    """``(before, after, param0)``: the page's example optimizer just built (a dict of its
    first parameter's fresh state, from ``_init_state``, and its first group; a wrapper's
    state_dict) and after its one step (the state_dict), and the parameter it started
    from."""
    code = example(name)
    build_end = code.index("\n", code.index("optimizer = ")) + 1
    namespace = {}
    exec(compile(code[:build_end], f"<example of {name}>", "exec"), namespace)
    optimizer, param = namespace["optimizer"], namespace["param"]
    param0 = param.copy()
    if registry.is_wrapper(name):
        fresh, group0 = copy.deepcopy(optimizer.state_dict()), {}
    else:
        fresh = optimizer._init_state(param, optimizer.param_groups[0])
        group0 = {k: v for k, v in optimizer.param_groups[0].items() if k != "params"}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(code[build_end:], f"<example of {name}>", "exec"), namespace)
    return (fresh, group0), optimizer.state_dict(), param0


def _first_clause(text):
    """``text`` up to its first ``.``, ``:`` or ``;`` outside brackets and literals, followed
    by a space or the end (the whole text if none)."""
    depth, literal = 0, False
    for i, char in enumerate(text):
        if text.startswith("``", i):
            literal = not literal
        elif not literal:
            depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(char, 0)
            if depth == 0 and char in ".:;" and text[i + 1:i + 2] in ("", " "):
                return text[:i]
    return text


def algorithm_inputs(name):
    """``(entries, ignored)``: the constructor's parameters but ``params`` as the numpydoc
    Parameters section gives them, each ``(name, default, first sentence)``, and the names
    it accepts and ignores."""
    from numpydoc.docscrape import NumpyDocString
    entries, ignored = [], []
    for entry in NumpyDocString(inspect.getdoc(_class(name)))["Parameters"]:
        if entry.name == "params":
            continue
        if entry.type == "ignored":
            ignored += entry.name.split(", ")
            continue
        default = entry.type.split(", default: ")[1] if ", default: " in entry.type else None
        entries.append((entry.name, default, _first_clause(" ".join(
            line.strip() for line in entry.desc))))
    return entries, ignored


def algorithm_states(name):
    """``(per_param, per_group)``: the state a parameter has after one step with the
    defaults (the state_dict's keys), each ``(name, symbol, initial value or None)``, and the
    state of a param group (its entries that are no constructor parameter, but flags). A
    wrapper's: its state_dict's entries but the wrapped optimizer's and the options, and no
    group state."""
    (fresh, group0), after, param0 = built_and_stepped(name)
    symbols = _symbols(_module(name))
    constructor = set(inspect.signature(_class(name)).parameters)
    if registry.is_wrapper(name):
        return [(key, symbols.get(key), _described(fresh.get(key), param0))
                for key in sorted(after) if key not in constructor and key != "optimizer"], []
    per_param = [(key, symbols.get(key), _described(fresh[key], param0) if key in fresh
                  else None) for key in sorted(after["state"].get(0, {}))]
    per_group = [(key, symbols.get(key), _described(group0.get(key), param0))
                 for key in sorted(after["param_groups"][0])
                 if key not in constructor and key != "params"
                 and not isinstance(after["param_groups"][0][key], bool)]
    return per_param, per_group


def _math_block(lines, i):
    """The body of the ``.. math::`` block at ``lines[i]`` (stripped of blank lines at its
    ends) and the index of the line after it."""
    j = i + 1
    while j < len(lines) and (not lines[j].strip() or lines[j].startswith(" ")):
        j += 1
    return "\n".join(lines[i + 1:j]).strip("\n").splitlines(), j


def update_math(module):
    """The module docstring's update as reST lines, or None: its first ``.. math::`` block,
    and each next one a connecting sentence ("and for each element, ...:") leads to, with
    that sentence."""
    lines = (importlib.import_module(module).__doc__ or "").splitlines()
    i = next((k for k, line in enumerate(lines) if line.strip() == ".. math::"), None)
    if i is None:
        return None
    out = []
    while True:
        body, i = _math_block(lines, i)
        out += [".. math::", ""] + body + [""]
        prose = []
        while i < len(lines) and lines[i].strip() and lines[i].strip() != ".. math::":
            prose.append(lines[i])
            i += 1
        while i < len(lines) and not lines[i].strip():
            i += 1
        text = " ".join(prose)
        if not (text.startswith("and ") and text.endswith(":") and i < len(lines)
                and lines[i].strip() == ".. math::"):
            return out[:-1]
        out += prose + [""]


def _state_item(key, symbol, value):
    named = f"``{key}``" + (f" (:math:`{symbol}`)" if symbol else "")
    return f"- {named} ← {value}" if value else f"- {named}: set by the first step"


def algorithm_box(name):
    """The Algorithm section: a box with the inputs (the Parameters section's entries), the
    state to initialize (the example optimizer's state after one step, with the initial
    values its fresh state holds), the loop over t with the module's update block and the
    return, as torch.optim's pages have; a wrapper's initializes its own state."""
    cls = _class(name)
    module = _module(name)
    entries, ignored = algorithm_inputs(name)
    per_param, per_group = algorithm_states(name)
    box = ["**input**: the objective :math:`f`, the parameters :math:`\\theta_0`, and", ""]
    box += [f"- ``{key}``" + (f" = ``{default}``" if default else "") + f": {text}"
            for key, default, text in entries]
    if ignored:
        box.append("- ignored (torch's implementation switches): "
                   + ", ".join(f"``{key}``" for key in ignored))
    if registry.is_wrapper(name):
        box += ["", "**initialize** (the wrapper's own state, besides the wrapped optimizer's: "
                "its state_dict's entries after the first step)" + ("" if per_param else
                                                                    ": none"), ""]
    else:
        box += ["", "**initialize** (with the defaults: the state a parameter has after its "
                "first step)" + ("" if per_param else ": none"), ""]
    box += [_state_item(*entry) for entry in per_param]
    if per_group:
        box += ["", "and per param group:", ""]
        box += [_state_item(*entry) for entry in per_group]
    closure = getattr(cls, "needs_closure", False) or name == "SAM"
    update = update_math(module)
    loop = [":math:`g_t \\leftarrow \\nabla f(\\theta_{t-1})`"
            + (" (the closure returns :math:`f(\\theta_{t-1})` and :math:`g_t`)"
               if closure else "") + "; then, with :math:`g = g_t`, "
            + ("as the module's math above (its notes hold here too):" if update else
               "the update the module's docstring above describes."), ""] + (update or [])
    box += ["", "**for** :math:`t = 1, 2, \\dots` **do**", "", ".. container:: algorithm-loop",
            ""] + ["   " + line if line else "" for line in loop]
    box += ["", "**return** :math:`\\theta_t`"]
    return (["Algorithm", "---------", "", ".. container:: algorithm", ""]
            + ["   " + line if line else "" for line in box] + [""])
