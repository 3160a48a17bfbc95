"""How an optimizer takes its keywords, shared by the optimizers: :func:`flavored` (the
``flavor=`` keyword, a framework's preset of the keywords, and the optimizer-wide conventions
:data:`OPTIMIZER_CONVENTIONS`, with the :data:`STEP_SCOPES`), the variant machinery (published
forms chosen by name, switches that override them one by one), the checks of those switches,
and the checks of numbers several optimizers take (positive, a step counter, one lr for all
groups, three betas).

An optimizer with variants has a table ``VARIANTS`` (name -> the switches that form sets) and
``ALIASES`` (other names of the same forms). Its constructor's switches default to
:data:`VARIANT_DEFAULT`, "the value the chosen variant gives it"; :func:`resolve_variant`
merges the variant's values with the switches given explicitly. The variant is chosen for the
whole optimizer: a param group may override single switches but not name a variant
(:func:`check_no_variant`).
"""
import functools
import inspect
import math
import numbers

import numpy as np

from npoptim import frameworks

#: Conventions of an optimizer's own bookkeeping (attributes of the optimizer, not param-group
#: options), at torch's values; flavored optimizers take them as keywords (:func:`flavored`),
#: and :mod:`npoptim.optim.optimizer` checks them.
OPTIMIZER_CONVENTIONS = {"step_scope": "per_param"}
STEP_SCOPES = ("per_param", "global")


class _VariantDefault:
    """The default of a switch: "the value the chosen ``variant`` gives it"."""

    def __repr__(self):
        return "<variant's value>"


VARIANT_DEFAULT = _VariantDefault()


def resolve_variant(variants, aliases, variant, given):
    """The switches of ``variant`` with every explicitly ``given`` one overriding it."""
    if not isinstance(variant, str) or aliases.get(variant, variant) not in variants:
        names = sorted(set(variants) | set(aliases))
        raise ValueError(f"unknown variant {variant!r}; the variants are {', '.join(names)}")
    canonical = aliases.get(variant, variant)
    values = dict(variants[canonical])
    values.update({k: v for k, v in given.items() if v is not VARIANT_DEFAULT})
    return canonical, values


def check_no_variant(group):
    """A param group cannot choose a variant: that would silently do nothing."""
    if "variant" in group:
        raise ValueError("variant is chosen for the whole optimizer (it sets the defaults); "
                         "a param group overrides the individual switches instead")


def check_flag(group, *names):
    """``ValueError`` unless each named option is a bool."""
    for name in names:
        if not isinstance(group[name], (bool, np.bool_)):
            raise ValueError(f"{name} must be True or False, got {group[name]!r}")


#: The older word of eps as a floor, max(quantity, eps): torch's ``clamp(min=eps)``. Muon's
#: ``ns_eps_mode`` and Adafactor's ``eps1_mode`` said "clamp" where Sophia's ``eps_mode`` said
#: "max"; "max" is the one word now (tests/test_switch_words.py).
FLOOR_ALIASES = {"clamp": "max"}


def check_choice(group, name, choices, aliases=None):
    """``ValueError`` unless the option is one of ``choices`` (strings). A word of ``aliases``
    (an older spelling: alias -> choice) is replaced in ``group`` by the choice it names."""
    if aliases and isinstance(group[name], str) and group[name] in aliases:
        group[name] = aliases[group[name]]
    if not isinstance(group[name], str) or group[name] not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got "
                         f"{group[name]!r}")


def check_bounds(group, name):
    """``None`` or a pair ``(lo, hi)`` with ``0 <= lo <= hi`` (``hi`` may be ``inf``)."""
    bounds = group[name]
    if bounds is None:
        return
    if (not isinstance(bounds, (tuple, list)) or len(bounds) != 2
            or not all(is_real(b) for b in bounds)
            or not (0.0 <= bounds[0] <= bounds[1]) or math.isinf(bounds[0])):
        raise ValueError(f"{name} must be None or a pair (lo, hi) with 0 <= lo <= hi, got "
                         f"{bounds!r}")


def is_real(value):
    """A real number that is not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_positive(group, name, allow_inf=False):
    """``ValueError`` unless the option is a positive (finite, unless ``allow_inf``) number."""
    value = group[name]
    if not (is_real(value) and value > 0 and (allow_inf or math.isfinite(value))):
        raise ValueError(f"Invalid {name} value: {value!r} (must be positive"
                         + ("" if allow_inf else " and finite") + ")")


def growth_bound(group):
    """The growth-rate bound of d: ``None`` (the default) is the authors' ``float('inf')``."""
    rate = group["growth_rate"]
    return math.inf if rate is None else rate


def check_counter(group, name):
    """``ValueError`` unless the group's step counter is a non-negative whole number."""
    k = group[name]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
        raise ValueError(f"{name} (the step count) must be a non-negative whole number, "
                         f"got {k!r}")


def check_one_lr(groups, optimizer):
    """``ValueError`` unless every group's lr is the largest one or 0 (the authors' rule for
    Prodigy and D-Adaptation, whose step size is shared by all groups)."""
    lr = max(group["lr"] for group in groups)
    for i, group in enumerate(groups):
        if group["lr"] not in (lr, 0.0):
            raise ValueError(f"param group {i}: lr {group['lr']!r}: {optimizer} takes one lr "
                             f"for all groups ({lr!r}), or 0 for a group")


def check_betas(betas):
    """torch's check of an Adam-style ``betas`` pair."""
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise ValueError(f"betas must be a pair of floats, got {betas!r}")
    for k, beta in enumerate(betas):
        if not (is_real(beta) or (isinstance(beta, np.ndarray) and beta.ndim == 0
                                  and beta.dtype.kind in "fiu")):  # a 0-d array, as torch
            raise ValueError(f"Invalid beta parameter at index {k}: {beta!r} is "
                             f"{_kind(beta)}, not a real number")
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {k}: {beta}")


def check_nonnegative(group, *names, label=None):
    """``ValueError(f"Invalid {label}: {value}")`` for each named option below 0."""
    labels = {"lr": "learning rate", "eps": "epsilon value", "weight_decay": "weight_decay value",
              "lr_decay": "lr_decay value", "momentum": "momentum value"}
    for name in names:
        value = group[name]
        if not is_real(value):  # the type is the problem, not the value: say so
            raise ValueError(f"Invalid {label or labels.get(name, name)}: {value!r} is "
                             f"{_kind(value)}, not a real number")
        if not value >= 0.0 or not _fits_float(value):
            raise ValueError(f"Invalid {label or labels.get(name, name)}: {value}")


def _fits_float(value):
    """False for a number too large for a float (a huge int), which a step could not use."""
    try:
        float(value)
    except OverflowError:
        return False
    return True


def _kind(value):
    """``value``'s type in words: "a str", "an int"."""
    name = type(value).__name__
    return f"an {name}" if name[:1] in "aeiou" else f"a {name}"


def check_three_betas(betas):
    """``ValueError`` unless ``betas`` is three reals in [0, 1) (Adan's and AdEMAMix's, with
    torch's message for a beta out of range)."""
    if not isinstance(betas, (tuple, list)) or len(betas) != 3:
        raise ValueError(f"betas must be three floats (beta1, beta2, beta3), got {betas!r}")
    for i, beta in enumerate(betas):
        if not (is_real(beta) and 0.0 <= beta < 1.0):
            raise ValueError(f"Invalid beta parameter at index {i}: {beta}")


def flavored(init):
    """Give an optimizer's ``__init__`` the keyword ``flavor`` (see :mod:`npoptim.flavors`).

    The flavor fills every keyword the caller did not give with the flavor's value; the
    optimizer records ``self.flavor``. The wrapper also takes the optimizer-wide conventions
    (``step_scope``, :data:`OPTIMIZER_CONVENTIONS`), which are attributes of the optimizer
    rather than group options: the flavor's
    :attr:`~npoptim.frameworks.model.Flavor.step_scope` unless given. Keyword checks of values
    the flavor cannot take (:attr:`~npoptim.frameworks.model.Flavor.zero_only`) run on the
    final values. The optimizers it wraps are :data:`npoptim.flavors.FLAVORED`
    (tests/test_flavors.py holds the two together).
    """
    owner = init.__qualname__.split(".")[0]
    signature = inspect.signature(init)

    @functools.wraps(init)
    def __init__(self, params, *args, flavor="torch", step_scope=None, **kwargs):
        preset = frameworks.get(flavor)
        if flavor == "torch":
            init(self, params, *args, **kwargs)
        else:
            given = signature.bind_partial(self, params, *args, **kwargs).arguments
            given.pop("self")
            given.pop("params")
            init(self, params, **flavor_keywords(flavor, owner, signature.parameters, given))
        self.flavor = flavor
        self.step_scope = step_scope if step_scope is not None else (preset.step_scope
                                                                     or "per_param")

    # the optimizer-wide conventions are keywords too (inspect, golden hyperparameters)
    parameters = list(signature.parameters.values())
    at = len(parameters) - (parameters[-1].kind is inspect.Parameter.VAR_KEYWORD)
    parameters[at:at] = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=value)
                         for name, value in OPTIMIZER_CONVENTIONS.items()]
    __init__.__signature__ = signature.replace(parameters=parameters)
    __init__.takes_flavor = True
    return __init__


def flavor_keywords(flavor, owner, accepted, given):
    """The keywords optimizer ``owner`` (a class name) is built with under ``flavor``: the
    flavor's defaults and switches for it, with the keywords the caller ``given`` over them.
    ``accepted`` holds the names its ``__init__`` takes: a switch of the flavor's table that
    the optimizer lacks is a table error (``TypeError``); a value the flavor cannot take
    (:attr:`npoptim.frameworks.model.Flavor.zero_only`) is refused on the merged keywords."""
    preset = frameworks.get(flavor)
    merged = preset.defaults(owner)
    unknown = set(merged) - set(accepted)
    if unknown:
        raise TypeError(f"flavor {flavor!r} sets {sorted(unknown)}, which {owner} lacks")
    merged.update(given)
    for name, why in preset.zero_only.get(owner, {}).items():
        if merged.get(name, 0) not in (0, 0.0, None):
            raise ValueError(f"flavor {flavor!r}: {name}={merged[name]!r}: {why}")
    return merged
