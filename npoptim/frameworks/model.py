"""The data model of a flavor: a framework constructor as an npoptim optimizer
(:class:`FrameworkOptimizer`, :data:`REQUIRED` for a keyword the framework requires) and a
framework (:class:`Flavor`: its switches per optimizer, its constructors, how it is checked).
The tables (:mod:`npoptim.frameworks.keras`, ...) are instances of these."""
from dataclasses import dataclass, field

from npoptim.frameworks.translation import translate


@dataclass(frozen=True)
class FrameworkOptimizer:
    """One constructor of a framework, as an npoptim optimizer.

    Parameters
    ----------
    npoptim : str
        the npoptim optimizer it is.
    names : dict
        the framework's keyword -> npoptim's keyword, or ``(keyword, index)`` for one element
        of a pair (Keras ``beta_1`` is ``betas[0]``).
    defaults : dict
        the framework's defaults, in the framework's names; a name missing here and from the
        call keeps npoptim's default; ``REQUIRED`` marks one the framework requires.
    fixed : dict
        npoptim keywords the constructor implies (optax ``amsgrad`` is Adam with
        ``amsgrad=True``).
    unsupported : dict
        framework keyword -> (the values npoptim implements, why not others).
    elsewhere : dict
        framework keywords that do not reach this npoptim optimizer's math -> where they go
        instead (accepted with any value and not used; Keras Muon's AdamW keywords configure
        its AdamW part, :func:`npoptim.optim.muon.keras_adamw_part`).
    aliases : dict
        a deprecated framework keyword -> the keyword it stands for (optax noisy_sgd's
        ``seed`` is its ``key``): given (not None) it is that keyword; both given is refused,
        as the framework refuses it.
    derived : dict
        a framework keyword that sets several npoptim keywords -> a function of the call's
        keywords (with the framework's defaults) returning them; applied after the one-to-one
        names, over them (optax Adam's ``eps_root``:
        :func:`npoptim.frameworks.optax._optax_eps_root`).
    call : str, default: ''
        how the framework's user calls it, where that is not the flavor's
        :attr:`Flavor.call_prefix` and the table's name (onnxruntime-training's AdamW).
    notes : tuple, default: ()
        what the call needs beyond its keywords (a choice that changes the numbers, an
        argument's type, the order of positional arguments): written into each flavor case's
        comment (:meth:`Flavor.call_statement`), so the case can be run from the file alone.
    """

    npoptim: str
    names: dict
    defaults: dict = field(default_factory=dict)
    fixed: dict = field(default_factory=dict)
    unsupported: dict = field(default_factory=dict)
    elsewhere: dict = field(default_factory=dict)
    aliases: dict = field(default_factory=dict)
    derived: dict = field(default_factory=dict)
    call: str = ""
    notes: tuple = ()


REQUIRED = object()


@dataclass(frozen=True)
class Flavor:
    """A framework: its convention switches per npoptim optimizer and its constructors.

    Parameters
    ----------
    name : str
        the flavor's name, as ``Opt(params, flavor=name)`` takes it.
    framework : str
        the framework, as its users name it.
    switches : dict
        ``switches[opt]``: the npoptim keywords the framework's conventions set (defaults of
        the flavor).
    constructors : dict
        framework name -> :class:`FrameworkOptimizer`; the first constructor of an optimizer
        gives ``Opt(params, flavor=...)`` its defaults.
    differs : dict
        ``differs[opt]``: how the framework's optimizer differs from torch's, in words.
    zero_only : dict
        ``zero_only[opt]``: npoptim keywords that must stay 0 (a convention npoptim does not
        implement yet) -> why.
    verified : str, default: ''
        how this flavor is checked against the framework.
    float32_hyperparameters : tuple, default: ()
        npoptim hyperparameters the framework holds as float32 (ONNX attributes): its float64
        cases are generated only where these are exact in float32.
    dtypes : tuple, default: ('float32', 'float64')
        the dtypes the framework computes in (its cases are generated in these only).
    optimizer_dtypes : dict
        optimizer -> its dtypes, where they are fewer than ``dtypes`` (see :meth:`dtypes_of`).
    step_scope : str or None, default: 'per_param'
        how a missing gradient counts (:attr:`npoptim.Optimizer.step_scope`): ``"per_param"``
        (torch), ``"global"`` (Keras's ``iterations``, TF.js's beta powers: a skipped variable
        still ages), or None where the framework has no missing gradient (optax: its users
        pass zeros, which is a step; ONNX and the TF kernels: the caller passes the step
        count), so its ``none-grad`` cases are not generated.
    call_prefix : str, default: ''
        what a constructor's table name is prefixed with in the framework's call
        (``"optax."``: ``optax.nadamw``), unless its :attr:`FrameworkOptimizer.call` says
        otherwise.
    """

    name: str
    framework: str
    switches: dict
    constructors: dict
    differs: dict
    zero_only: dict = field(default_factory=dict)
    verified: str = ""
    float32_hyperparameters: tuple = ()
    dtypes: tuple = ("float32", "float64")
    optimizer_dtypes: dict = field(default_factory=dict)
    step_scope: object = "per_param"
    call_prefix: str = ""

    def dtypes_of(self, optimizer):
        """The dtypes the framework computes ``optimizer`` in.

        Parameters
        ----------
        optimizer : str
            an npoptim optimizer's name.
        """
        return self.optimizer_dtypes.get(optimizer, self.dtypes)

    def constructor_for(self, optimizer, hyper=None):
        """The constructor of ``optimizer`` (:meth:`constructor_name_for`), or None.

        Parameters
        ----------
        optimizer : str
            an npoptim optimizer's name.
        hyper : dict, optional
            npoptim hyperparameters, in npoptim's names; None takes the first
            constructor.
        """
        name = self.constructor_name_for(optimizer, hyper)
        return None if name is None else self.constructors[name]

    def constructor_name_for(self, optimizer, hyper=None):
        """The table name of the first constructor of ``optimizer`` that can write npoptim
        hyperparameters ``hyper`` (the first one without ``hyper``): its ``fixed`` keywords
        hold ``hyper``'s values, and ``hyper`` does not hold a value another constructor fixes
        that this one does not name (optax's ``amsgrad=True`` is ``optax.amsgrad``, its
        decoupled decay ``optax.nadamw``). None if the framework has no such optimizer.

        Parameters
        ----------
        optimizer : str
            an npoptim optimizer's name.
        hyper : dict, optional
            npoptim hyperparameters, in npoptim's names; None takes the first
            constructor.
        """
        names = [n for n, e in self.constructors.items() if e.npoptim == optimizer]
        if not names or hyper is None:
            return names[0] if names else None
        for name in names:
            entry = self.constructors[name]
            own = {t[0] if isinstance(t, tuple) else t for t in entry.names.values()}
            if any(k in hyper and hyper[k] != v for k, v in entry.fixed.items()):
                continue
            if any(k not in own and k not in entry.fixed and k in hyper and hyper[k] == v
                   for other in names if other != name
                   for k, v in self.constructors[other].fixed.items()):
                continue
            return name
        return names[0]

    def call_statement(self, optimizer, hyper):
        """The sentence a flavor case's comment ends with: the framework call that computes
        npoptim hyperparameters ``hyper`` (its keywords are the case's
        ``framework_hyperparameters``) and what it needs beyond them (its ``notes``).

        Parameters
        ----------
        optimizer : str
            an npoptim optimizer's name.
        hyper : dict
            npoptim hyperparameters, in npoptim's names.
        """
        name = self.constructor_name_for(optimizer, hyper)
        if name is None:
            return ""
        entry = self.constructors[name]
        call = entry.call or f"{self.call_prefix}{name}"
        return " ".join([f"Framework call: {call}(**framework_hyperparameters).",
                         *entry.notes])

    def defaults(self, optimizer):
        """npoptim keywords for ``Opt(params, flavor=self.name)``: switches, then the
        framework's defaults translated to npoptim's names.

        Parameters
        ----------
        optimizer : str
            an npoptim optimizer's name.
        """
        if optimizer not in self.switches:
            raise ValueError(f"flavor {self.name!r} ({self.framework}) has no {optimizer}; it "
                             f"has {', '.join(self.switches)}")
        out = dict(self.switches[optimizer])
        entry = self.constructor_for(optimizer)
        if entry is not None and "variant" not in out:  # a variant carries its defaults
            out.update(translate(entry, {k: v for k, v in entry.defaults.items()
                                         if v is not REQUIRED}, self.name, optional=True))
            out.update(entry.fixed)
        return out
