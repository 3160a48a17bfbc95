"""Parameter names, for the optimizers whose rule depends on what a parameter is (Adam-mini
partitions a transformer's parameters by their names, as torch's ``model.named_parameters()``
gives them).

:class:`NamedParameters` is a mixin for an :class:`npoptim.optim.optimizer.Optimizer`
subclass. Such an optimizer takes its parameters in any of three forms:

* ``(name, array)`` pairs, as ``named_parameters()`` yields them;
* param groups (dicts) whose ``"params"`` are such pairs;
* plain arrays or groups of them, with ``param_names=`` a sequence of one name per parameter
  in param-group order (the order :meth:`step` takes gradients in).

Plain arrays without ``param_names`` are unnamed, and so is a parameter whose name is None (in
a pair or in ``param_names``): :attr:`NamedParameters.param_names` holds ``None`` for it, and
the optimizer says what an unnamed parameter is; ``param_names=opt.param_names`` builds the
same naming again. Names are strings, not empty, each used once; in a group given as pairs,
every parameter is a pair. Everything is checked
before the optimizer takes a parameter. The names are not hyperparameters: they belong to the
parameters, as the arrays do, so a ``state_dict`` does not hold them and loading one keeps
the optimizer's own.
"""
import numpy as np


def _is_pair(item):
    return (isinstance(item, tuple) and len(item) == 2
            and (isinstance(item[0], str) or item[0] is None)
            and not isinstance(item[1], (str, tuple)))


def _split_pairs(params, where):
    """``(arrays, names)`` of a group's ``"params"``: names ``None`` for plain arrays."""
    if isinstance(params, np.ndarray) or isinstance(params, set):
        return params, None  # one array, or a set: the base class says what is wrong
    items = list(params)
    pairs = [_is_pair(item) for item in items]
    if not any(pairs):
        return items, None
    if not all(pairs):
        k = pairs.index(False)
        raise TypeError(f"{where}[{k}]: expected a (name, array) pair like the others, got "
                        f"{type(items[k]).__name__}; name every parameter of a group or none")
    return [array for _, array in items], [name for name, _ in items]


def with_names(params, param_names):
    """``params`` with ``param_names`` attached, as (name, array) pairs in each group (the form
    :class:`NamedParameters` reads); ``params`` unchanged when ``param_names`` is None."""
    if param_names is None:
        return params
    if isinstance(param_names, str) or not hasattr(param_names, "__iter__"):
        raise TypeError(f"param_names must be a sequence of strings, one per parameter, got "
                        f"{type(param_names).__name__}")
    names = list(param_names)
    if isinstance(params, np.ndarray) or isinstance(params, dict):
        return params  # the base class refuses it, with its message
    given = list(params)  # (a generator is read once: what is returned below is this list)
    plain = not given or not isinstance(given[0], dict)
    groups = [{"params": given}] if plain else given
    members = []
    for gi, group in enumerate(groups):
        if not isinstance(group, dict) or group.get("params") is None:
            return given  # a mix of groups and arrays, or no params: the base class refuses
        items = group["params"]
        items = [items] if isinstance(items, np.ndarray) else list(items)
        if any(_is_pair(item) for item in items):
            raise ValueError(f"param group {gi} names its parameters already: give names "
                             "either as (name, array) pairs or as param_names, not both")
        members.append(items)
    count = sum(len(items) for items in members)
    if len(names) != count:
        raise ValueError(f"param_names has {len(names)} names for {count} parameters (one "
                         "name per parameter, in param-group order)")
    for k, name in enumerate(names):
        if not isinstance(name, str) and name is not None:
            raise TypeError(f"param_names[{k}] must be a string (or None: unnamed), got "
                            f"{type(name).__name__}")
    named, used = [], 0
    for group, items in zip(groups, members):
        named.append(dict(group, params=list(zip(names[used:used + len(items)], items))))
        used += len(items)
    return named[0]["params"] if plain else named


class NamedParameters:
    """Mixin: an optimizer whose parameters have names (see the module docstring).

    Put it before :class:`~npoptim.optim.optimizer.Optimizer` in the bases and call
    ``super().__init__(with_names(params, param_names), defaults)``.

    Attributes
    ----------
    param_names : list of (str or None)
        One name per parameter, aligned with :attr:`params` (None: unnamed).
    """

    def add_param_group(self, param_group):
        """As :meth:`Optimizer.add_param_group`; ``"params"`` may be ``(name, array)`` pairs.

        Parameters
        ----------
        param_group : dict
            ``"params"``: arrays, or ``(name, array)`` pairs (every name a non-empty string not
            already used); every other key overrides a default.
        """
        if not isinstance(param_group, dict) or param_group.get("params") is None:
            return super().add_param_group(param_group)  # its error
        where = f"param group {len(self.param_groups)}, params"
        arrays, names = _split_pairs(param_group["params"], where)
        taken = set(getattr(self, "param_names", None) or ()) - {None}
        if names is not None:
            for k, name in enumerate(names):
                if name is None:
                    continue
                if not name:
                    raise ValueError(f"{where}[{k}]: a parameter name must not be empty")
                if name in taken:
                    raise ValueError(f"{where}[{k}]: the name {name!r} is used twice; each "
                                     "parameter needs its own name")
                taken.add(name)
        super().add_param_group(dict(param_group, params=arrays))
        count = len(self.param_groups[-1]["params"])
        if not hasattr(self, "param_names"):
            self.param_names = []
        self.param_names.extend(names if names is not None else [None] * count)

    def name_of(self, param):
        """The name of the parameter ``param`` (an array the optimizer holds), or None."""
        for p, name in zip(self.params, self.param_names):
            if p is param:
                return name
        raise ValueError("the array is not one of this optimizer's parameters")
