"""The reference part of each optimizer's page, which ``docs/conf.py`` writes at build time.

After the module's math and the class with its numpydoc Parameters section, a page has: its
references (the paper and the code it follows, :data:`npoptim.registry.REFERENCES`), the
sparse kind (:attr:`~npoptim.optim.optimizer.Optimizer.sparse_kind`), the flavors (each
framework's name for the optimizer and its defaults, from the tables of
:mod:`npoptim.frameworks`, what ``npoptim list --json`` shows), a short runnable example
(:func:`example`, generated from the registry; tests/test_docs.py runs every one), and where
its golden cases are, with the ``npoptim explain`` command. Everything is read from the
registry, the classes and the flavor tables, so a page cannot drift from the code.
"""
import json
import re
from pathlib import Path

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
    lines = ["References", "----------", ""] + reference_lines(name)
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
