"""The import blocker: with ``NPOPTIM_BLOCK_OPTIONAL=1``, every library outside npoptim's runtime
and ``[test]`` dependencies becomes unimportable, so a machine that has them all (CI's) runs the
suite as a bare venv would.

How it reaches every process: ``tests/conftest.py``, seeing the variable, computes the blocked
top-level module names once (:func:`blocked_modules`), puts them in ``NPOPTIM_BLOCKED_MODULES``,
installs the blocker in its own process and prepends this folder to ``PYTHONPATH``. Python
imports ``sitecustomize`` at start-up, so every interpreter started from the tests (pytest-xdist's
workers, ``subprocess`` runs of ``python -m npoptim ...``) installs it too, reading the list
from the environment (no second scan of the installed distributions).

A blocked name is not found at all, as if it were not installed: ``import torch`` raises
``ModuleNotFoundError`` and ``importlib.util.find_spec("torch")`` returns None. The blocker wraps
the path-based finders of ``sys.meta_path`` rather than raising from a finder of its own, which
would make ``find_spec`` raise instead of answering None.

What stays importable (:func:`allowed_distributions`): the standard library; the distributions
that npoptim requires and those of its ``test`` extra, with their own requirements, transitively;
pip, setuptools and wheel (a new venv has them); and pytest plugins (distributions with a
``pytest11`` entry point, which pytest loads in every worker before any conftest runs).
"""
import importlib.machinery
import os
import sys

VARIABLE = "NPOPTIM_BLOCK_OPTIONAL"
LIST_VARIABLE = "NPOPTIM_BLOCKED_MODULES"
#: Distributions a new venv holds besides the standard library.
VENV_BASICS = ("pip", "setuptools", "wheel")


def allowed_distributions(project="npoptim", extras=("test",)):
    """Canonical names of the distributions that stay importable (see the module docstring)."""
    import importlib.metadata as metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pending = [(project, frozenset(extras))] + [(name, frozenset()) for name in VENV_BASICS]
    for dist in metadata.distributions():
        if any(ep.group == "pytest11" for ep in dist.entry_points):
            pending.append((dist.metadata["Name"], frozenset()))
    allowed = set()
    while pending:
        name, wanted = pending.pop()
        key = canonicalize_name(name)
        if key in allowed:
            continue
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        allowed.add(key)
        for text in requires:
            requirement = Requirement(text)
            marker = requirement.marker
            if marker is None or any(marker.evaluate({"extra": extra})
                                     for extra in (wanted or {""})):
                pending.append((requirement.name, frozenset(requirement.extras)))
    return allowed


def blocked_modules(project="npoptim", extras=("test",)):
    """The top-level module names that only distributions outside
    :func:`allowed_distributions` provide, sorted."""
    import importlib.metadata as metadata

    from packaging.utils import canonicalize_name

    allowed = allowed_distributions(project, extras)
    return sorted(module for module, dists in metadata.packages_distributions().items()
                  if module.isidentifier()
                  and not any(canonicalize_name(d) in allowed for d in dists))


class _Hidden:
    """A path-based finder that finds nothing under the blocked top-level names."""

    def __init__(self, finder, blocked):
        self.finder = finder
        self.blocked = blocked

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.blocked:
            return None
        return self.finder.find_spec(name, path, target)

    def __getattr__(self, attribute):  # invalidate_caches, find_distributions, ...
        return getattr(self.finder, attribute)


def install(blocked):
    """Hide the modules ``blocked`` (top-level names) in this interpreter; returns those of them
    that were imported already (the blocker cannot take them back)."""
    blocked = frozenset(blocked)
    loaded = sorted(name for name in blocked if name in sys.modules)
    sys.meta_path[:] = [_Hidden(finder, blocked)
                        if finder is importlib.machinery.PathFinder
                        or isinstance(finder, importlib.machinery.PathFinder) else finder
                        for finder in sys.meta_path if not isinstance(finder, _Hidden)]
    return loaded


def install_from_environment():
    """Install the blocker where ``NPOPTIM_BLOCK_OPTIONAL=1``, with the names of
    ``NPOPTIM_BLOCKED_MODULES`` (computed, and put there for the children, where it is unset).
    Returns ``(blocked names, those imported already)``, or None where the blocker is off."""
    if os.environ.get(VARIABLE) != "1":
        return None
    if LIST_VARIABLE not in os.environ:
        os.environ[LIST_VARIABLE] = ",".join(blocked_modules())
    names = [name for name in os.environ[LIST_VARIABLE].split(",") if name]
    return names, install(names)


if __name__ == "sitecustomize":  # at an interpreter's start-up (see the module docstring)
    install_from_environment()
