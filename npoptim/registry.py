"""Every optimizer and wrapper npoptim has: its name, the module it lives in, its torch
counterpart and its references (its sparse kind and variants are read from the class itself).

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
    "MARS": ("npoptim.optim.mars", None),
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
    "Grams": ("npoptim.optim.grams", None),
    "CAME": ("npoptim.optim.came", None),
    "Shampoo": ("npoptim.optim.shampoo", None),
    "APOLLO": ("npoptim.optim.apollo", None),
    "Scion": ("npoptim.optim.scion", None),
    "AdamMini": ("npoptim.optim.adam_mini", None),
    "SOAP": ("npoptim.optim.soap", None),
    "SPlus": ("npoptim.optim.splus", None),
    "Kron": ("npoptim.optim.kron", None),
    "PSGDQuad": ("npoptim.optim.psgd_quad", None),
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


_TORCH = "https://github.com/pytorch/pytorch/blob/v2.13.0/torch/optim/"
_OPTAX = "https://github.com/google-deepmind/optax/blob/v0.2.8/optax/"
_ARXIV = "https://arxiv.org/abs/"

#: Where each optimizer and wrapper comes from, for its docs page: name -> (the paper, the code
#: it follows). A paper is an arXiv, DOI or proceedings page (None: RowWiseAdagrad has none of
#: its own); the code is the file of the implementation the module reproduces by default, at the
#: version its docstring names (the repository's default branch where it names none; None for
#: LARS, whose default is the paper's Algorithm 1, and whose variants' files its docstring lists).
REFERENCES = {
    "Adam": (_ARXIV + "1412.6980", _TORCH + "adam.py"),
    "AdamW": (_ARXIV + "1711.05101", _TORCH + "adamw.py"),
    "SparseAdam": (_ARXIV + "1412.6980", _TORCH + "sparse_adam.py"),
    "Adagrad": ("https://jmlr.org/papers/v12/duchi11a.html", _TORCH + "adagrad.py"),
    "Adadelta": (_ARXIV + "1212.5701", _TORCH + "adadelta.py"),
    "SGD": ("https://proceedings.mlr.press/v28/sutskever13.html", _TORCH + "sgd.py"),
    "RMSprop": ("https://www.cs.toronto.edu/~tijmen/csc321/slides/lecture_slides_lec6.pdf",
                _TORCH + "rmsprop.py"),
    "Adamax": (_ARXIV + "1412.6980", _TORCH + "adamax.py"),
    "NAdam": ("https://openreview.net/forum?id=OM0jvwB8jIp57ZJjtNEZ", _TORCH + "nadam.py"),
    "RAdam": (_ARXIV + "1908.03265", _TORCH + "radam.py"),
    "ASGD": ("https://doi.org/10.1137/0330046", _TORCH + "asgd.py"),
    "Rprop": ("https://doi.org/10.1109/ICNN.1993.298623", _TORCH + "rprop.py"),
    "Adafactor": (_ARXIV + "1804.04235", _TORCH + "_adafactor.py"),
    "Muon": ("https://kellerjordan.github.io/posts/muon/", _TORCH + "_muon.py"),
    "LBFGS": ("https://doi.org/10.1007/BF01589116", _TORCH + "lbfgs.py"),
    "LAMB": (_ARXIV + "1904.00962", _OPTAX + "_src/alias.py"),
    "LARS": (_ARXIV + "1708.03888", None),
    "Ftrl": ("https://doi.org/10.1145/2487575.2488200",
             "https://github.com/keras-team/keras/blob/v3.15.1/keras/src/optimizers/ftrl.py"),
    "RowWiseAdagrad": (None, "https://github.com/pytorch/FBGEMM/blob/v1.8.0/fbgemm_gpu/codegen/"
                             "genscript/optimizers.py"),
    "Lion": (_ARXIV + "2302.06675", _OPTAX + "_src/alias.py"),
    "MARS": (_ARXIV + "2411.10438",
             "https://github.com/AGI-Arena/MARS/blob/HEAD/MARS/optimizers/mars.py"),
    "AdaBelief": (_ARXIV + "2010.07468", _OPTAX + "_src/alias.py"),
    "Adan": (_ARXIV + "2208.06677", "https://github.com/sail-sg/Adan/blob/HEAD/adan.py"),
    "Yogi": ("https://papers.nips.cc/paper/8186-adaptive-methods-for-nonconvex-optimization",
             _OPTAX + "_src/alias.py"),
    "AdamaxW": (_ARXIV + "1711.05101", _OPTAX + "_src/alias.py"),
    "NovoGrad": (_ARXIV + "1905.11286", _OPTAX + "_src/alias.py"),
    "Fromage": (_ARXIV + "2002.03432", "https://github.com/jxbz/fromage/blob/HEAD/fromage.py"),
    "SM3": (_ARXIV + "1901.11150", _OPTAX + "_src/alias.py"),
    "SignSGD": (_ARXIV + "1802.04434", _OPTAX + "_src/alias.py"),
    "Signum": (_ARXIV + "1802.04434", _OPTAX + "_src/alias.py"),
    "NoisySGD": (_ARXIV + "1511.06807", _OPTAX + "_src/alias.py"),
    "PolyakSGD": (_ARXIV + "2002.10542", _OPTAX + "_src/alias.py"),
    "OptimisticGD": (_ARXIV + "1711.00141", _OPTAX + "_src/alias.py"),
    "OptimisticAdam": (_ARXIV + "1711.00141", _OPTAX + "_src/alias.py"),
    "ADOPT": (_ARXIV + "2411.02853", _OPTAX + "contrib/_adopt.py"),
    "AdEMAMix": (_ARXIV + "2409.03137", _OPTAX + "contrib/_ademamix.py"),
    "SimplifiedAdEMAMix": (_ARXIV + "2502.02431", _OPTAX + "contrib/_ademamix.py"),
    "ScheduleFreeSGD": (_ARXIV + "2405.15682", "https://github.com/facebookresearch/"
                        "schedule_free/blob/HEAD/schedulefree/sgd_schedulefree.py"),
    "ScheduleFreeAdamW": (_ARXIV + "2405.15682", "https://github.com/facebookresearch/"
                          "schedule_free/blob/HEAD/schedulefree/adamw_schedulefree.py"),
    "Prodigy": (_ARXIV + "2306.06101",
                "https://github.com/konstmish/prodigy/blob/HEAD/prodigyopt/prodigy.py"),
    "MADGRAD": (_ARXIV + "2101.11075",
                "https://github.com/facebookresearch/madgrad/blob/HEAD/madgrad/madgrad.py"),
    "DAdaptAdamW": (_ARXIV + "2301.07733", "https://github.com/facebookresearch/dadaptation/"
                    "blob/HEAD/dadaptation/dadapt_adam.py"),
    "DPSGD": (_ARXIV + "1607.00133", _OPTAX + "contrib/_privacy.py"),
    "Sophia": (_ARXIV + "2305.14342", _OPTAX + "contrib/_sophia.py"),
    "GaLoreAdamW": (_ARXIV + "2403.03507",
                    "https://github.com/jiaweizzhao/GaLore/blob/HEAD/galore_torch/adamw.py"),
    "ACProp": (_ARXIV + "2110.05454", _OPTAX + "contrib/_acprop.py"),
    "COCOB": (_ARXIV + "1705.07795", _OPTAX + "contrib/_cocob.py"),
    "DoG": (_ARXIV + "2302.12022", _OPTAX + "contrib/_dog.py"),
    "DoWG": (_ARXIV + "2305.16284", _OPTAX + "contrib/_dog.py"),
    "Momo": (_ARXIV + "2305.07583", "https://github.com/fabian-sp/MoMo/blob/HEAD/momo/momo.py"),
    "MomoAdam": (_ARXIV + "2305.07583",
                 "https://github.com/fabian-sp/MoMo/blob/HEAD/momo/momo_adam.py"),
    "Grams": (_ARXIV + "2412.17107", "https://github.com/kozistr/pytorch_optimizer/blob/v4.1.0/"
              "pytorch_optimizer/optimizer/grams.py"),
    "CAME": (_ARXIV + "2307.02047",
             "https://github.com/yangluo7/CAME/blob/HEAD/came_pytorch/CAME.py"),
    "Shampoo": (_ARXIV + "1802.09568", "https://github.com/kozistr/pytorch_optimizer/blob/"
                "v4.1.0/pytorch_optimizer/optimizer/shampoo.py"),
    "APOLLO": (_ARXIV + "2412.05270",
               "https://github.com/zhuhanqing/APOLLO/blob/HEAD/apollo_torch/apollo.py"),
    "Scion": (_ARXIV + "2502.07529", "https://github.com/LIONS-EPFL/scion/blob/HEAD/scion.py"),
    "AdamMini": (_ARXIV + "2406.16793",
                 "https://github.com/zyushun/Adam-mini/blob/HEAD/adam_mini/adam_mini.py"),
    "SOAP": (_ARXIV + "2409.11321", "https://github.com/kozistr/pytorch_optimizer/blob/v4.1.0/"
             "pytorch_optimizer/optimizer/soap.py"),
    "SPlus": (_ARXIV + "2506.07254", "https://github.com/kozistr/pytorch_optimizer/blob/v4.1.0/"
              "pytorch_optimizer/optimizer/splus.py"),
    "Kron": (_ARXIV + "1512.04202", "https://github.com/evanatyourservice/kron_torch/blob/"
             "HEAD/kron_torch/kron.py"),
    "PSGDQuad": (_ARXIV + "1512.04202", "https://github.com/evanatyourservice/quad_torch/blob/"
                 "HEAD/quad_torch/quad.py"),
    "Lookahead": (_ARXIV + "1907.08610", _OPTAX + "_src/lookahead.py"),
    "SAM": (_ARXIV + "2010.01412", _OPTAX + "contrib/_sam.py"),
    "Mechanic": (_ARXIV + "2306.00144", _OPTAX + "contrib/_mechanic.py"),
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
