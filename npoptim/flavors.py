"""Flavors: another framework's conventions and defaults, as named presets of npoptim's switches.

Each optimizer follows ``torch.optim`` by default. Where another framework computes the same
optimizer differently (where eps goes, whether lr sits inside the momentum buffer, which
second moment amsgrad maximises, ...), the optimizer has a **convention switch**: a keyword
that changes one line of the one rule (see each optimizer's docstring and its
``torch_conventions``, the switches' torch values). A **flavor** is a framework's choice of
those switches plus its defaults and its hyperparameter names::

    npoptim.Adam(params, flavor="keras")            # eps-hat, eps=1e-7, decoupled decay
    npoptim.flavors.from_framework("keras", "Adam", params, learning_rate=1e-3, epsilon=1e-7)
    npoptim.flavors.from_framework("optax", "amsgrad", params, learning_rate=1e-2)

**Flavor and variant (the rule).** ``variant=`` names a *published algorithm* (LAMB's
``"apex"``, LARS's ``"optax"``); ``flavor=`` names a *framework*: its switches, its defaults
and, for an optimizer with variants, the variant that framework ships (a LAMB with
``flavor="keras"`` is its ``"keras3"`` variant). Precedence, lowest first: torch's defaults <
the flavor's defaults and switches (including its variant) < the variant's switches <
keywords given explicitly. So an explicit keyword always wins, and a flavor never changes a
value the caller wrote.

Framework options that are not conventions of the update (Keras ``clipnorm``,
``global_clipnorm``, ``use_ema``, ``gradient_accumulation_steps``, ``loss_scale_factor``, ...)
are refused by name; so is a value of a convention npoptim does not implement yet (it says
which).

This module is the front door: :func:`from_framework` and :data:`FLAVORED`, and the names of
:mod:`npoptim.frameworks`, where the flavors are data: the model
(:mod:`~npoptim.frameworks.model`), one table per framework (:mod:`~npoptim.frameworks.keras`,
:mod:`~npoptim.frameworks.optax`, :mod:`~npoptim.frameworks.tf`,
:mod:`~npoptim.frameworks.tfjs`, :mod:`~npoptim.frameworks.onnx`) and the translation of a
framework's keywords (:mod:`~npoptim.frameworks.translation`). The two are apart because the
optimizers read the tables (:func:`npoptim.optim.options.flavored`, the decorator that gives an
optimizer ``flavor=``), while :func:`from_framework` builds an optimizer by name through
:mod:`npoptim.registry`, which imports optimizer modules: in one package the two would close an
import circle through the registry's module names.
"""
from npoptim import registry
from npoptim.frameworks import (FLAVORS, KERAS, NOT_CONVENTIONS, ONNX, OPTAX, REQUIRED, TF,
                                TFJS, TORCH, Flavor, FrameworkOptimizer, framework_call,
                                framework_names, get, translate)

__all__ = ["Flavor", "FrameworkOptimizer", "REQUIRED", "NOT_CONVENTIONS", "KERAS", "OPTAX",
           "TF", "TFJS", "ONNX", "TORCH", "FLAVORS", "FLAVORED", "get", "translate",
           "framework_call", "framework_names", "from_framework"]

#: The optimizers that take ``flavor=`` (the others are torch's or a paper's only), in the
#: registry's order: those whose ``__init__`` :func:`npoptim.optim.options.flavored` wraps.
FLAVORED = sorted(TORCH.switches, key=list(registry.OPTIMIZERS).index)


def from_framework(framework, optimizer, params, **framework_kwargs):
    """An npoptim optimizer built from a framework's constructor call, in its names:
    ``from_framework("keras", "Adam", params, learning_rate=1e-3, epsilon=1e-7)``.

    Missing arguments take the framework's defaults (not torch's); the flavor's convention
    switches are set; a framework option that is not a convention is refused by name.

    Parameters
    ----------
    framework : str
        a flavor's name, e.g. ``"keras"``.
    optimizer : str
        the framework's name of the optimizer's constructor, e.g. ``"Adam"``.
    params : list of numpy.ndarray
        the parameters, as npoptim's optimizers take them.
    **framework_kwargs
        the call's keywords, in the framework's names.
    """
    flavor = get(framework)
    if optimizer not in flavor.constructors:
        raise ValueError(f"{framework} has no optimizer {optimizer!r} that npoptim reproduces; "
                         f"it has {', '.join(flavor.constructors)}")
    entry = flavor.constructors[optimizer]
    missing = [k for k, v in entry.defaults.items() if v is REQUIRED and k not in
               framework_kwargs]
    if missing:
        raise TypeError(f"{framework} {optimizer} requires {', '.join(missing)}")
    given = dict(entry.defaults)
    given.update(framework_kwargs)
    given = {k: v for k, v in given.items() if v is not REQUIRED}
    kwargs = translate(entry, given, framework)  # a pair's missing half: the default's
    kwargs.update(entry.fixed)
    return registry.get(entry.npoptim)(params, flavor=framework, **kwargs)
