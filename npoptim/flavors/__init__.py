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

The package: :mod:`~npoptim.flavors.model` (:class:`FrameworkOptimizer`, :data:`REQUIRED`,
:class:`Flavor`), one table per framework (:mod:`~npoptim.flavors.keras`,
:mod:`~npoptim.flavors.optax`, :mod:`~npoptim.flavors.tf`, :mod:`~npoptim.flavors.tfjs`,
:mod:`~npoptim.flavors.onnx`), :mod:`~npoptim.flavors.translation` (a framework's keywords to
npoptim's and back); here: the torch flavor, :data:`FLAVORS`, :data:`FLAVORED`, :func:`get`,
:func:`from_framework` and :func:`framework_names`. The decorator that gives an optimizer
``flavor=`` is :func:`npoptim.optim.options.flavored`, where an optimizer takes its keywords.
"""
from npoptim import registry
from npoptim.flavors.keras import KERAS
from npoptim.flavors.model import REQUIRED, Flavor, FrameworkOptimizer
from npoptim.flavors.onnx import ONNX
from npoptim.flavors.optax import OPTAX
from npoptim.flavors.tf import TF
from npoptim.flavors.tfjs import TFJS
from npoptim.flavors.translation import NOT_CONVENTIONS, framework_call, translate

__all__ = ["Flavor", "FrameworkOptimizer", "REQUIRED", "NOT_CONVENTIONS", "KERAS", "OPTAX",
           "TF", "TFJS", "ONNX", "TORCH", "FLAVORS", "FLAVORED", "get", "translate",
           "framework_call", "framework_names", "from_framework"]

#: The optimizers that take ``flavor=`` (the others are torch's or a paper's only): those whose
#: ``__init__`` :func:`npoptim.optim.options.flavored` wraps.
FLAVORED = sorted({opt for f in (KERAS, OPTAX, TF, TFJS, ONNX) for opt in f.switches},
                  key=list(registry.OPTIMIZERS).index)

TORCH = Flavor(
    name="torch", framework="torch.optim 2.13 (npoptim's default)",
    switches={name: {} for name in FLAVORED}, constructors={},
    differs={}, verified="CI: the torch cross-checks and provenance.json")

#: Every flavor, by name.
FLAVORS = {f.name: f for f in (TORCH, KERAS, OPTAX, TF, TFJS, ONNX)}


def get(name):
    """The :class:`Flavor` called ``name``."""
    if not isinstance(name, str) or name not in FLAVORS:
        raise ValueError(f"unknown flavor {name!r}; the flavors are {', '.join(FLAVORS)}")
    return FLAVORS[name]


def framework_names(flavor_name, optimizer, hyper):
    """The framework's own keywords for npoptim ``hyper`` (npoptim names): how a user of that
    framework writes the same constructor (the golden files store it beside npoptim's)."""
    entry = get(flavor_name).constructor_for(optimizer)
    return None if entry is None else framework_call(entry, hyper)


def from_framework(framework, optimizer, params, **framework_kwargs):
    """An npoptim optimizer built from a framework's constructor call, in its names:
    ``from_framework("keras", "Adam", params, learning_rate=1e-3, epsilon=1e-7)``.

    Missing arguments take the framework's defaults (not torch's); the flavor's convention
    switches are set; a framework option that is not a convention is refused by name.
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
