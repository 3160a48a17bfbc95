"""Every optimizer and wrapper npoptim has: its name, the module it lives in and its torch
counterpart (its sparse kind and variants are read from the class itself).

The package's top-level names (``npoptim.Adam``, ...), ``npoptim list`` and the docs pages are
read from :data:`OPTIMIZERS`, and tests/test_readme.py holds the README's table to it, so an
optimizer is added in one place (and one README row). Modules are imported on first use, which
keeps ``import npoptim`` fast.
"""
import difflib
import importlib

# name -> (module, torch.optim counterpart or None)
OPTIMIZERS = {
    "Adam": ("npoptim.optim.adam", "Adam"),
    "AdamW": ("npoptim.optim.adam", "AdamW"),
    "SparseAdam": ("npoptim.optim.sparse_adam", "SparseAdam"),
    "Adagrad": ("npoptim.optim.adagrad", "Adagrad"),
    "Adadelta": ("npoptim.optim.adadelta", "Adadelta"),
    "SGD": ("npoptim.optim.sgd", "SGD"),
    "RMSprop": ("npoptim.optim.rmsprop", "RMSprop"),
    "Adamax": ("npoptim.optim.adamax", "Adamax"),
    "NAdam": ("npoptim.optim.nadam", "NAdam"),
    "RAdam": ("npoptim.optim.radam", "RAdam"),
    "ASGD": ("npoptim.optim.asgd", "ASGD"),
    "Rprop": ("npoptim.optim.rprop", "Rprop"),
    "Adafactor": ("npoptim.optim.adafactor", "Adafactor"),
    "Muon": ("npoptim.optim.muon", "Muon"),
    "LBFGS": ("npoptim.optim.lbfgs", "LBFGS"),
    "LAMB": ("npoptim.optim.lamb", None),
    "LARS": ("npoptim.optim.lars", None),
    "Ftrl": ("npoptim.optim.ftrl", None),
    "RowWiseAdagrad": ("npoptim.optim.rowwise_adagrad", None),
    "Lion": ("npoptim.optim.lion", None),
    "AdaBelief": ("npoptim.optim.adabelief", None),
    "Adan": ("npoptim.optim.adan", None),
    "Yogi": ("npoptim.optim.yogi", None),
    "AdamaxW": ("npoptim.optim.adamaxw", None),
    "NovoGrad": ("npoptim.optim.novograd", None),
    "Fromage": ("npoptim.optim.fromage", None),
    "SM3": ("npoptim.optim.sm3", None),
    "SignSGD": ("npoptim.optim.sign", None),
    "Signum": ("npoptim.optim.sign", None),
    "NoisySGD": ("npoptim.optim.noisy_sgd", None),
    "PolyakSGD": ("npoptim.optim.polyak_sgd", None),
    "OptimisticGD": ("npoptim.optim.optimistic", None),
    "OptimisticAdam": ("npoptim.optim.optimistic", None),
    "ADOPT": ("npoptim.optim.adopt", None),
    "AdEMAMix": ("npoptim.optim.ademamix", None),
    "SimplifiedAdEMAMix": ("npoptim.optim.ademamix", None),
    "ScheduleFreeSGD": ("npoptim.optim.schedule_free", None),
    "ScheduleFreeAdamW": ("npoptim.optim.schedule_free", None),
    "Prodigy": ("npoptim.optim.prodigy", None),
    "MADGRAD": ("npoptim.optim.madgrad", None),
    "DAdaptAdamW": ("npoptim.optim.dadapt", None),
    "DPSGD": ("npoptim.optim.dpsgd", None),
    "Sophia": ("npoptim.optim.sophia", None),
    "GaLoreAdamW": ("npoptim.optim.galore", None),
    "ACProp": ("npoptim.optim.acprop", None),
    "COCOB": ("npoptim.optim.cocob", None),
    "DoG": ("npoptim.optim.dog", None),
    "DoWG": ("npoptim.optim.dog", None),
    "Momo": ("npoptim.optim.momo", None),
    "MomoAdam": ("npoptim.optim.momo", None),
}


#: The wrappers around an npoptim optimizer (:class:`npoptim.optim.wrapper.OptimizerWrapper`):
#: name -> (module, the framework counterpart). They are built from an optimizer, not from
#: parameters, so they are kept apart from :data:`OPTIMIZERS` (whose users construct
#: ``cls(params, **hyperparameters)``); ``npoptim list`` and the golden cases (a case's
#: ``wrapped`` optimizer, reference_results/README.md) read them from here, and the README's
#: table is held to them.
WRAPPERS = {
    "Lookahead": ("npoptim.optim.lookahead", "optax.lookahead"),
    "SAM": ("npoptim.optim.sam", "optax.contrib.sam"),
    "Mechanic": ("npoptim.optim.mechanic", "optax.contrib.mechanize"),
}


def is_wrapper(name):
    """Whether ``name`` is one of the :data:`WRAPPERS`."""
    return name in WRAPPERS


def suggestion(name, names):
    """`` (did you mean 'Adam'?)`` for the name of ``names`` closest to ``name`` (the same
    name in another case first), or ``""``."""
    if not isinstance(name, str):
        return ""
    folded = [n for n in names if n.lower() == name.lower()]
    close = folded or difflib.get_close_matches(name, list(names), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def resolve(name):
    """The name of an optimizer or wrapper as npoptim spells it, from a command line's spelling
    in any case (``"adam"`` -> ``"Adam"``); ``KeyError`` naming the closest one otherwise."""
    names = [*OPTIMIZERS, *WRAPPERS]
    if name in names:
        return name
    folded = [n for n in names if isinstance(name, str) and n.lower() == name.lower()]
    if len(folded) == 1:
        return folded[0]
    raise KeyError(f"unknown optimizer {name!r}{suggestion(name, names)}; npoptim has "
                   f"{', '.join(names)}")


def get(name):
    """The optimizer class called ``name`` (built from parameters; a wrapper's name raises,
    see :func:`get_wrapper`)."""
    if name in WRAPPERS:
        raise KeyError(f"{name} is a wrapper (npoptim.registry.WRAPPERS), built around an "
                       f"optimizer, {name}(optimizer, ...), not from parameters")
    if name not in OPTIMIZERS:
        raise KeyError(f"unknown optimizer {name!r}{suggestion(name, OPTIMIZERS)}; npoptim has "
                       f"{', '.join(OPTIMIZERS)}")
    module, _ = OPTIMIZERS[name]
    return getattr(importlib.import_module(module), name)


def get_wrapper(name):
    """The wrapper class called ``name`` (:data:`WRAPPERS`)."""
    if name not in WRAPPERS:
        raise KeyError(f"unknown wrapper {name!r}; npoptim has {', '.join(WRAPPERS)}")
    module, _ = WRAPPERS[name]
    return getattr(importlib.import_module(module), name)


def variants(name):
    """``(VARIANTS, ALIASES)`` of the optimizer called ``name``: its published forms (name ->
    the switches they set) and their other names, from the class or else its module; two empty
    dicts for an optimizer without variants (see :mod:`npoptim.optim.options`)."""
    module = importlib.import_module(OPTIMIZERS[name][0])
    cls = getattr(module, name)   # a module with two optimizers keeps them on the class
    return (getattr(cls, "VARIANTS", getattr(module, "VARIANTS", {})),
            getattr(cls, "ALIASES", getattr(module, "ALIASES", {})))
