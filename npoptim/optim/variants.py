"""The variant machinery LAMB and LARS share: published forms chosen by name, switches that
override them one by one, and the checks of those switches.

An optimizer with variants has a table ``VARIANTS`` (name -> the switches that form sets) and
``ALIASES`` (other names of the same forms). Its constructor's switches default to
:data:`VARIANT_DEFAULT`, "the value the chosen variant gives it"; :func:`resolve_variant`
merges the variant's values with the switches given explicitly. The variant is chosen for the
whole optimizer: a param group may override single switches but not name a variant
(:func:`check_no_variant`).
"""
import math
import numbers

import numpy as np


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
