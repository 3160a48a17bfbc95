"""Other frameworks' conventions as data: the flavors that :mod:`npoptim.flavors` presents.

:mod:`~npoptim.frameworks.model` (:class:`FrameworkOptimizer`, :data:`REQUIRED`,
:class:`Flavor`), one table per framework (:mod:`~npoptim.frameworks.keras`,
:mod:`~npoptim.frameworks.optax`, :mod:`~npoptim.frameworks.tf`,
:mod:`~npoptim.frameworks.tfjs`, :mod:`~npoptim.frameworks.onnx`) and
:mod:`~npoptim.frameworks.translation` (a framework's keywords to npoptim's and back),
:mod:`~npoptim.frameworks.known_bugs` (the frameworks' bugs the golden cases show, read by
``npoptim check``; not imported here); here:
the torch flavor, :data:`FLAVORS`, :func:`get` and :func:`framework_names`. What a flavor is,
and the precedence of flavor, variant and explicit keywords: :mod:`npoptim.flavors`.

This package imports nothing of npoptim but itself: the optimizers read it
(:func:`npoptim.optim.options.flavored`), so it must not reach them, not even through
:mod:`npoptim.registry`'s module names (that is why :func:`npoptim.flavors.from_framework`,
which builds an optimizer by name, is not here).
"""
from npoptim.frameworks.keras import KERAS
from npoptim.frameworks.model import REQUIRED, Flavor, FrameworkOptimizer
from npoptim.frameworks.onnx import ONNX
from npoptim.frameworks.optax import OPTAX
from npoptim.frameworks.tf import TF
from npoptim.frameworks.tfjs import TFJS
from npoptim.frameworks.translation import NOT_CONVENTIONS, framework_call, translate

__all__ = ["Flavor", "FrameworkOptimizer", "REQUIRED", "NOT_CONVENTIONS", "KERAS", "OPTAX",
           "TF", "TFJS", "ONNX", "TORCH", "FLAVORS", "get", "translate", "framework_call",
           "framework_names"]

#: torch's flavor: no switch set, for every optimizer that another framework's table names (the
#: optimizers that take ``flavor=``, :data:`npoptim.flavors.FLAVORED`), in the tables' order.
TORCH = Flavor(
    name="torch", framework="torch.optim 2.13 (npoptim's default)",
    switches={opt: {} for f in (KERAS, OPTAX, TF, TFJS, ONNX) for opt in f.switches},
    constructors={},
    differs={}, verified="CI: the torch cross-checks and provenance.json")

#: Every flavor, by name.
FLAVORS = {f.name: f for f in (TORCH, KERAS, OPTAX, TF, TFJS, ONNX)}


def get(name):
    """The :class:`Flavor` called ``name``.

    Parameters
    ----------
    name : str
        a flavor's name, a key of :data:`FLAVORS`.
    """
    if not isinstance(name, str) or name not in FLAVORS:
        raise ValueError(f"unknown flavor {name!r}; the flavors are {', '.join(FLAVORS)}")
    return FLAVORS[name]


def framework_names(flavor_name, optimizer, hyper):
    """The framework's own keywords for npoptim ``hyper`` (npoptim names): how a user of that
    framework writes the same constructor (the golden files store it beside npoptim's), for the
    constructor that can write them (:meth:`Flavor.constructor_name_for`).

    Parameters
    ----------
    flavor_name : str
        the flavor's name.
    optimizer : str
        an npoptim optimizer's name.
    hyper : dict
        npoptim hyperparameters, in npoptim's names.
    """
    entry = get(flavor_name).constructor_for(optimizer, hyper)
    return None if entry is None else framework_call(entry, hyper)
