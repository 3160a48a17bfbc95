"""The data model of a flavor: a framework constructor as an npoptim optimizer
(:class:`FrameworkOptimizer`, :data:`REQUIRED` for a keyword the framework requires) and a
framework (:class:`Flavor`: its switches per optimizer, its constructors, how it is checked).
The tables (:mod:`npoptim.frameworks.keras`, ...) are instances of these."""
from dataclasses import dataclass, field

from npoptim.frameworks.translation import translate


@dataclass(frozen=True)
class FrameworkOptimizer:
    """One constructor of a framework, as an npoptim optimizer.

    * ``npoptim``: the npoptim optimizer it is.
    * ``names``: the framework's keyword -> npoptim's keyword, or ``(keyword, index)`` for one
      element of a pair (Keras ``beta_1`` is ``betas[0]``).
    * ``defaults``: the framework's defaults, in the framework's names; a name missing here
      and from the call keeps npoptim's default; ``REQUIRED`` marks one the framework requires.
    * ``fixed``: npoptim keywords the constructor implies (optax ``amsgrad`` is Adam with
      ``amsgrad=True``).
    * ``unsupported``: framework keyword -> (the values npoptim implements, why not others).
    * ``elsewhere``: framework keywords that do not reach this npoptim optimizer's math ->
      where they go instead (accepted with any value and not used; Keras Muon's AdamW
      keywords configure its AdamW part, :func:`npoptim.optim.muon.keras_adamw_part`).
    * ``aliases``: a deprecated framework keyword -> the keyword it stands for (optax
      noisy_sgd's ``seed`` is its ``key``): given (not None) it is that keyword; both given is
      refused, as the framework refuses it.
    * ``derived``: a framework keyword that sets several npoptim keywords -> a function of the
      call's keywords (with the framework's defaults) returning them; applied after the
      one-to-one names, over them (optax Adam's ``eps_root``:
      :func:`npoptim.frameworks.optax._optax_eps_root`).
    """

    npoptim: str
    names: dict
    defaults: dict = field(default_factory=dict)
    fixed: dict = field(default_factory=dict)
    unsupported: dict = field(default_factory=dict)
    elsewhere: dict = field(default_factory=dict)
    aliases: dict = field(default_factory=dict)
    derived: dict = field(default_factory=dict)


REQUIRED = object()


@dataclass(frozen=True)
class Flavor:
    """A framework: its convention switches per npoptim optimizer and its constructors.

    ``switches[opt]``: npoptim keywords the framework's conventions set (defaults of the
    flavor); ``constructors``: framework name -> :class:`FrameworkOptimizer`; the first
    constructor of an optimizer gives ``Opt(params, flavor=...)`` its defaults.
    ``zero_only[opt]``: npoptim keywords that must stay 0 (a convention npoptim does not
    implement yet) -> why; ``verified``: how this flavor is checked against the framework.
    """

    name: str
    framework: str
    switches: dict
    constructors: dict
    differs: dict
    zero_only: dict = field(default_factory=dict)
    verified: str = ""
    #: npoptim hyperparameters the framework holds as float32 (ONNX attributes): its float64
    #: cases are generated only where these are exact in float32
    float32_hyperparameters: tuple = ()
    #: the dtypes the framework computes in (its cases are generated in these only)
    dtypes: tuple = ("float32", "float64")
    #: optimizer -> its dtypes, where they are fewer than :attr:`dtypes` (see :meth:`dtypes_of`)
    optimizer_dtypes: dict = field(default_factory=dict)
    #: how a missing gradient counts (:attr:`npoptim.Optimizer.step_scope`): ``"per_param"``
    #: (torch), ``"global"`` (Keras's ``iterations``, TF.js's beta powers: a skipped variable
    #: still ages), or None where the framework has no missing gradient (optax: its users pass
    #: zeros, which is a step; ONNX and the TF kernels: the caller passes the step count), so
    #: its ``none-grad`` cases are not generated
    step_scope: object = "per_param"

    def dtypes_of(self, optimizer):
        """The dtypes the framework computes ``optimizer`` in."""
        return self.optimizer_dtypes.get(optimizer, self.dtypes)

    def constructor_for(self, optimizer):
        for entry in self.constructors.values():
            if entry.npoptim == optimizer:
                return entry
        return None

    def defaults(self, optimizer):
        """npoptim keywords for ``Opt(params, flavor=self.name)``: switches, then the
        framework's defaults translated to npoptim's names."""
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
