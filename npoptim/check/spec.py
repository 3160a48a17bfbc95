"""Naming an implementation on the command line: ``MODULE:NAME`` imported, or a clear error.

:func:`load` imports ``MODULE`` and reads ``NAME`` from it (dotted: ``optax:contrib.muon``);
:func:`require` imports a framework npoptim does not depend on, naming what to install when
it is missing. Both raise :class:`UsageError`, which ``npoptim check`` reports with exit
status 2.
"""
import functools
import importlib

#: module -> what to install for it (npoptim depends on none of them)
PACKAGES = {"torch": "torch (e.g. pip install torch==2.13.0 --index-url "
                     "https://download.pytorch.org/whl/cpu)",
            "jax": "jax (pip install jax)", "optax": "optax (pip install optax)",
            "keras": "keras 3 and a backend (pip install keras jax)"}


class UsageError(ValueError):
    """What the user asked for cannot be run: a bad ``MODULE:NAME``, a missing framework, an
    optimizer that cannot be inferred."""


def require(module, flag):
    """``import module``, or :class:`UsageError` naming what ``flag`` needs installed."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise UsageError(f"{flag} needs {PACKAGES.get(module, module)}, which is not "
                         f"installed ({exc})") from exc


def load(spec, flag):
    """The object ``MODULE:NAME`` names (``NAME`` may be dotted)."""
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise UsageError(f"{flag} takes MODULE:NAME (e.g. {EXAMPLES.get(flag, 'pkg.mod:Name')}), "
                         f"got {spec!r}")
    root = module.split(".")[0]
    if root in PACKAGES:
        require(root, flag)
    try:
        owner = importlib.import_module(module)
    except ImportError as exc:
        raise UsageError(f"{flag} {spec}: cannot import {module!r} ({exc})") from exc
    try:
        return functools.reduce(getattr, name.split("."), owner)
    except AttributeError:
        raise UsageError(f"{flag} {spec}: module {module!r} has no {name!r}") from None


#: an example of each flag's spelling, for the error messages
EXAMPLES = {"--torch": "torch.optim:Adam", "--optax": "optax:adam",
            "--keras": "keras.optimizers:Adam", "--callable": "mypkg.opt:make_step"}
