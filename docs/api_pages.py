"""The API reference: which modules are public, one page per public module, and the names
numpydoc's validation checks: every one those pages describe (``docs/conf.py`` writes the pages
and sets the validation; ``tests/test_docs.py`` checks the same names).

A public module is one whose ``__all__`` is npoptim's promise to its users; every name in it is
documented on the module's page. An object exported by several public modules (``npoptim.save``
is ``npoptim.checkpoint.save``) is documented once, on the first page that exports it, and
linked from the others; the optimizer classes and wrappers link to their own pages. Every other
module (``npoptim.optim.*``, ``npoptim.kernels``, ``npoptim.registry``, ``npoptim.frameworks``,
the command-line modules, ...) is internal: it may change without notice.
"""
import importlib
import inspect

#: the public modules, in the order of the API index, each with what it is for
PUBLIC = {
    "npoptim": "the optimizers, the Optimizer base class, row-sparse gradients, save/load",
    "npoptim.checkpoint": "checkpoints of an optimizer and its scheduler in one .npz",
    "npoptim.sparse": "row-sparse and CSR gradients: building and validating them",
    "npoptim.lr_scheduler": "learning-rate schedulers, as torch.optim.lr_scheduler",
    "npoptim.explainer": "every intermediate of an optimizer's steps (npoptim.explain)",
    "npoptim.precision": "bfloat16/float16 optimizers as GPU kernels run them",
    "npoptim.flavors": "other frameworks' conventions and defaults as presets",
    "npoptim.torch_compat": "optimizer state to and from PyTorch's state_dict",
    "npoptim.storage": "tables larger than memory, as memory-mapped files",
    "npoptim.distributed": "embedding tables sharded by row over a Dask cluster",
    "npoptim.testing": "checking another implementation against the golden cases",
    "npoptim.golden": "the golden suite's schema and loaders",
    "npoptim.teaching": "test functions, exact trajectories, a per-step recorder",
    "npoptim.theory.momentum": "heavy-ball momentum on a quadratic, in closed form",
    "npoptim.plotting": "figures of optimizer runs: loading matplotlib",
    "npoptim.plotting.figures": "the figures themselves",
}


def _optimizer_pages():
    """Each optimizer and wrapper class, to the name its own page documents it under."""
    from npoptim import registry
    return {getattr(importlib.import_module(module), name): f"{module}.{name}"
            for name, (module, _) in [*registry.OPTIMIZERS.items(), *registry.WRAPPERS.items()]}


def _kind(obj):
    if inspect.ismodule(obj):
        return "module"
    if isinstance(obj, type):
        return "exception" if issubclass(obj, BaseException) else "class"
    if callable(obj):
        return "function"
    return "data"


def _members(cls):
    """The methods and properties autodoc's ``:members:`` shows: the class's own public ones
    that have a docstring."""
    return [name for name, value in vars(cls).items()
            if not name.startswith("_") and inspect.getdoc(value)
            and (callable(value) or isinstance(value, (property, classmethod, staticmethod)))]


def entries():
    """``(module, name, object, kind, documented_as)`` for every name in every public module's
    ``__all__``; ``documented_as`` is the full name of the description it links to, or None
    where this entry is that description."""
    first = dict(_optimizer_pages())
    rows = []
    for module in PUBLIC:
        exported = importlib.import_module(module)
        for name in exported.__all__:
            obj = getattr(exported, name)
            kind = _kind(obj)
            if kind == "module":
                rows.append((module, name, obj, kind, obj.__name__))
                continue
            key = obj if kind in ("class", "exception", "function") else (module, name)
            rows.append((module, name, obj, kind, first.get(key)))
            first.setdefault(key, f"{module}.{name}")
    return rows


def validated():
    """``(full name, object)`` of what numpydoc validates (PR01/PR02 under -W): each object
    described on a public module's page, and the methods its page documents. (The object, not
    only its name:
    ``npoptim.teaching.compare`` names a function that a module of the same name holds.)"""
    pairs = []
    for module, name, obj, kind, documented_as in entries():
        if documented_as is None and kind != "data":
            pairs.append((f"{module}.{name}", obj))
            if kind in ("class", "exception"):
                pairs += [(f"{module}.{name}.{member}", getattr(obj, member))
                          for member in _members(obj)]
    return pairs


def validated_names():
    """The full names of :func:`validated`, which docs/conf.py's validation matches."""
    return [name for name, _ in validated()]


_ROLE = {"module": "mod", "class": "class", "exception": "exc", "function": "func",
         "data": "data"}


def page(module):
    """The reStructuredText of one public module's page."""
    title = f"``{module}``"
    lines = [title, "=" * len(title), "", f".. automodule:: {module}", "   :no-members:", "",
             f"Names in ``{module}.__all__``", "-" * (len(module) + 22), ""]
    optimizers = _optimizer_pages().values()
    rows = [row for row in entries() if row[0] == module]
    links = [(name, kind, documented_as) for _, name, _, kind, documented_as in rows
             if documented_as is not None]
    if links:
        optimizer_links = [f":class:`{name} <{target}>`" for name, _, target in links
                           if target in optimizers]
        if optimizer_links:
            lines += ["Optimizers and wrappers, each on its own page: "
                      + ", ".join(optimizer_links) + ".", ""]
        for name, kind, target in links:
            if target not in optimizers:
                lines += [f"* ``{name}``: :{_ROLE[kind]}:`{target}`", ""]
    for _, name, obj, kind, documented_as in rows:
        if documented_as is not None:
            continue
        directive = {"class": "autoclass", "exception": "autoexception",
                     "function": "autofunction", "data": "autodata"}[kind]
        lines += [f".. {directive}:: {module}.{name}"]
        if kind in ("class", "exception"):
            lines += ["   :members:"]
        if kind == "data":
            lines += ["   :no-value:"]
        lines += [""]
    return "\n".join(lines)


def index():
    """The API index, which docs/api.rst includes (so the page stays ``api.html``)."""
    lines = ["API reference", "=============", "",
             "Every name in the ``__all__`` of npoptim's public modules, from its docstring. These",
             "modules are public; every other module of the package is internal and may change",
             "without notice. numpydoc's validation (parameters documented, none unknown) runs",
             "under ``-W`` on the optimizer classes and on every name of these modules, with the",
             "methods their pages document.", "",
             ".. list-table::", "   :header-rows: 1", "", "   * - module", "     - for"]
    for module, what in PUBLIC.items():
        lines += [f"   * - :doc:`{module} <_generated/api/{module}>`", f"     - {what}"]
    lines += ["", ".. toctree::", "   :hidden:", ""] + [f"   _generated/api/{m}" for m in PUBLIC]
    return "\n".join(lines) + "\n"
