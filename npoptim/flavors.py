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
"""
import functools
import inspect
import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from npoptim import registry

#: Conventions of an optimizer's own bookkeeping (attributes of the optimizer, not param-group
#: options), at torch's values; flavored optimizers take them as keywords (:func:`flavored`).
#: They live here, not in :mod:`npoptim.optim.optimizer`, which reads them, so that this
#: module imports nothing above it.
OPTIMIZER_CONVENTIONS = {"step_scope": "per_param"}
STEP_SCOPES = ("per_param", "global")

#: Framework options that wrap the update rather than change it: refused by name.
NOT_CONVENTIONS = {
    "clipnorm": "per-variable gradient clipping is not part of the update; clip the gradients "
                "before step()",
    "clipvalue": "gradient clipping is not part of the update; clip the gradients before step()",
    "global_clipnorm": "global gradient clipping is not part of the update; clip the gradients "
                       "before step()",
    "use_ema": "an exponential moving average of the weights is kept outside the optimizer",
    "ema_momentum": "an exponential moving average of the weights is kept outside the optimizer",
    "ema_overwrite_frequency": "an exponential moving average of the weights is kept outside "
                               "the optimizer",
    "gradient_accumulation_steps": "accumulate the gradients before step()",
    "loss_scale_factor": "scale the loss and unscale the gradients outside the optimizer",
    "name": None,  # accepted and ignored: a Keras/TF object name
}


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
      one-to-one names, over them (optax Adam's ``eps_root``: :func:`_optax_eps_root`).
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


_BETAS = {"beta_1": ("betas", 0), "beta_2": ("betas", 1)}
_KERAS_ADAM_NAMES = {"learning_rate": "lr", **_BETAS, "epsilon": "eps", "amsgrad": "amsgrad",
                     "weight_decay": "weight_decay"}
_KERAS_ADAM_DEFAULTS = dict(learning_rate=1e-3, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                            amsgrad=False, weight_decay=None)

KERAS = Flavor(
    name="keras", framework="Keras 3 (keras.optimizers, keras-team/keras keras/src/optimizers)",
    switches={
        "Adam": dict(eps_mode="eps_hat", decoupled_weight_decay=True),
        "AdamW": dict(eps_mode="eps_hat"),
        # Keras's base optimizer decays every optimizer's variables decoupled, before the rule
        "Adagrad": dict(eps_in_sqrt=True, decoupled_weight_decay=True),
        "RMSprop": dict(eps_in_sqrt=True, lr_in_momentum=True, decoupled_weight_decay=True),
        "SGD": dict(lr_in_buffer=True, decoupled_weight_decay=True),
        "Adamax": dict(eps_mode="added", decoupled_weight_decay=True),
        "Adadelta": dict(decoupled_weight_decay=True),
        "LAMB": dict(variant="keras3"),
        # Keras's schedule beta_1 (1 - 0.96^t / 2) is torch's with momentum_decay 1
        "NAdam": dict(momentum_decay=1.0, decoupled_weight_decay=True, state_dtype="param"),
        # Lion's decoupled decay is Keras's (the decay does not reach the sign); Ftrl is
        # Keras's own (npoptim's Ftrl follows it)
        "Lion": {},
        "Ftrl": {},
        # Keras's Muon step for the 2-D variables it orthogonalizes (its AdamW part:
        # npoptim.optim.muon.keras_adamw_part)
        "Muon": dict(momentum_form="sum", ns_dtype="param", ns_eps_mode="added",
                     adjust_lr_fn="match_rms_adamw"),
        # epsilon_1 added to g^2; the decay before the rule (its base optimizer's)
        "Adafactor": dict(eps1_mode="added", weight_decay_mode="before_rule"),
    },
    constructors={
        "Adam": FrameworkOptimizer("Adam", _KERAS_ADAM_NAMES, _KERAS_ADAM_DEFAULTS),
        "AdamW": FrameworkOptimizer("AdamW", _KERAS_ADAM_NAMES,
                                    dict(_KERAS_ADAM_DEFAULTS, weight_decay=0.004)),
        "Adagrad": FrameworkOptimizer(
            "Adagrad", {"learning_rate": "lr", "initial_accumulator_value":
                        "initial_accumulator_value", "epsilon": "eps",
                        "weight_decay": "weight_decay"},
            dict(learning_rate=1e-3, initial_accumulator_value=0.1, epsilon=1e-7,
                 weight_decay=None)),
        "RMSprop": FrameworkOptimizer(
            "RMSprop", {"learning_rate": "lr", "rho": "alpha", "momentum": "momentum",
                        "epsilon": "eps", "centered": "centered", "weight_decay": "weight_decay"},
            dict(learning_rate=1e-3, rho=0.9, momentum=0.0, epsilon=1e-7, centered=False,
                 weight_decay=None)),
        "SGD": FrameworkOptimizer(
            "SGD", {"learning_rate": "lr", "momentum": "momentum", "nesterov": "nesterov",
                    "weight_decay": "weight_decay"},
            dict(learning_rate=0.01, momentum=0.0, nesterov=False, weight_decay=None)),
        "Adamax": FrameworkOptimizer(
            "Adamax", {"learning_rate": "lr", **_BETAS, "epsilon": "eps",
                       "weight_decay": "weight_decay"},
            dict(learning_rate=1e-3, beta_1=0.9, beta_2=0.999, epsilon=1e-7, weight_decay=None)),
        "Adadelta": FrameworkOptimizer(
            "Adadelta", {"learning_rate": "lr", "rho": "rho", "epsilon": "eps",
                         "weight_decay": "weight_decay"},
            dict(learning_rate=1e-3, rho=0.95, epsilon=1e-7, weight_decay=None)),
        "Lamb": FrameworkOptimizer(
            "LAMB", {"learning_rate": "lr", **_BETAS, "epsilon": "eps",
                     "weight_decay": "weight_decay"},
            dict(learning_rate=1e-3, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 weight_decay=None)),
        "Nadam": FrameworkOptimizer(
            "NAdam", {"learning_rate": "lr", **_BETAS, "epsilon": "eps",
                      "weight_decay": "weight_decay"},
            dict(learning_rate=1e-3, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 weight_decay=None)),
        "Lion": FrameworkOptimizer(
            "Lion", {"learning_rate": "lr", **_BETAS, "weight_decay": "weight_decay"},
            dict(learning_rate=1e-3, beta_1=0.9, beta_2=0.99, weight_decay=None)),
        "Ftrl": FrameworkOptimizer(
            "Ftrl", {"learning_rate": "lr", "learning_rate_power": "learning_rate_power",
                     "initial_accumulator_value": "initial_accumulator_value",
                     "l1_regularization_strength": "l1", "l2_regularization_strength": "l2",
                     "l2_shrinkage_regularization_strength": "l2_shrinkage", "beta": "beta"},
            dict(learning_rate=1e-3, learning_rate_power=-0.5, initial_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                 l2_shrinkage_regularization_strength=0.0, beta=0.0, weight_decay=None),
            unsupported={"weight_decay": ((None, 0.0), "npoptim's Ftrl has no decoupled "
                                                       "decay (use l2 or l2_shrinkage)")}),
        # the 2-D variables Keras's Muon orthogonalizes; the others (not 2-D, exclude_layers,
        # exclude_embeddings) get its AdamW step: npoptim.optim.muon.keras_adamw_part
        "Muon": FrameworkOptimizer(
            "Muon", {"learning_rate": "lr", "momentum": "momentum", "nesterov": "nesterov",
                     "weight_decay": "weight_decay", "muon_a": ("ns_coefficients", 0),
                     "muon_b": ("ns_coefficients", 1), "muon_c": ("ns_coefficients", 2),
                     "ns_steps": "ns_steps", "rms_rate": ("rms_rate", "nullable")},
            dict(learning_rate=1e-3, adam_beta_1=0.9, adam_beta_2=0.999,
                 adam_weight_decay=0.004, epsilon=1e-7, weight_decay=0.004,
                 exclude_layers=None, exclude_embeddings=True, muon_a=3.4445, muon_b=-4.7750,
                 muon_c=2.0315, adam_lr_ratio=1, momentum=0.95, ns_steps=5, nesterov=True,
                 rms_rate=0.2),
            # the Newton-Schulz eps is a literal 1e-7 in Keras (its epsilon is AdamW's)
            fixed=dict(eps=1e-7),
            unsupported={"exclude_layers": ((None, [], ()), "npoptim's parameters have no "
                                            "names: give the parameters Keras would exclude "
                                            "to npoptim.optim.muon.keras_adamw_part")},
            elsewhere={name: "Keras's AdamW part: npoptim.optim.muon.keras_adamw_part"
                       for name in ("adam_beta_1", "adam_beta_2", "adam_weight_decay",
                                    "epsilon", "adam_lr_ratio", "exclude_embeddings")}),
        "Adafactor": FrameworkOptimizer(
            "Adafactor", {"learning_rate": "lr", "beta_2_decay": "beta2_decay",
                          "epsilon_1": ("eps", 0), "epsilon_2": ("eps", 1),
                          "clip_threshold": "d", "weight_decay": "weight_decay"},
            dict(learning_rate=1e-3, beta_2_decay=-0.8, epsilon_1=1e-30, epsilon_2=1e-3,
                 clip_threshold=1.0, relative_step=True, weight_decay=None),
            unsupported={"relative_step": ((True, False), "Keras's rho_t is min(lr, 1/sqrt(t)) "
                                                          "either way")}),
    },
    differs={
        "Adam": "eps added to sqrt(v) (eps-hat: lr*sqrt(b2)/b1 * m/(sqrt(v)+eps)); eps 1e-7; "
                "weight_decay decoupled; global step count",
        "AdamW": "eps-hat; eps 1e-7; weight_decay default 0.004; global step count",
        "Adagrad": "eps inside the square root; accumulator starts at 0.1; lr 1e-3; eps 1e-7; "
                   "weight_decay decoupled",
        "RMSprop": "eps inside the square root; lr inside the momentum buffer; rho 0.9; "
                   "weight_decay decoupled",
        "SGD": "lr inside the momentum buffer (m = mu*m - lr*g; equal to torch only at constant "
               "lr); no dampening; lr 0.01; weight_decay decoupled",
        "Adamax": "eps added to u after the max (m/(u+eps)); eps 1e-7; weight_decay decoupled; "
                  "global step count",
        "Adadelta": "torch's formula; lr 1e-3, rho 0.95, eps 1e-7; weight_decay decoupled",
        "LAMB": "the keras3 variant (decoupled decay outside the trust ratio)",
        "NAdam": "momentum schedule beta_1 (1 - 0.96^t / 2) (torch's with momentum_decay 1, "
                 "not 0.004); u_product in the parameter's dtype (state_dtype='param'); "
                 "weight_decay decoupled; eps 1e-7, lr 1e-3; global step count",
        "Lion": "npoptim's math; lr 1e-3; weight_decay decoupled (as the paper's)",
        "Ftrl": "Keras's math (npoptim's Ftrl is Keras's); no weight_decay",
        "Muon": "momentum M = mu M + G, nesterov G + mu M (momentum_form='sum'; torch: a lerp); "
                "Newton-Schulz in the parameter's dtype (torch: bfloat16) with X/(|X|+1e-7); "
                "lr scale rms_rate sqrt(max(A, B)), rms_rate 0.2 (adjust_lr_fn="
                "'match_rms_adamw'; rms_rate=None: none); weight_decay 0.004; 2-D only (Keras's "
                "AdamW part: npoptim.optim.muon.keras_adamw_part)",
        "Adafactor": "epsilon_1 added to g^2, no clamps (eps1_mode='added'; torch clamps the "
                     "estimate at eps1^2 and its row mean at eps1); weight_decay before the "
                     "rule, so the relative step reads the decayed parameter's RMS "
                     "(weight_decay_mode='before_rule'); epsilon_1 1e-30, lr 1e-3; global step "
                     "count",
    },
    zero_only={"SGD": {"dampening": "Keras SGD has no dampening"}},
    verified="CI: tests/test_framework_replay.py replays cases/keras/ through Keras 3 (JAX "
             "backend, jax_enable_x64)",
    step_scope="global",
    # Keras 3.15's ops.mean takes a float64 mean in float32 (npoptim/optim/adafactor.py)
    optimizer_dtypes={"Adafactor": ("float32",)},
)

_OPTAX_MASK = ((None,), "use param groups with weight_decay=0")
_OPTAX_ADAM_NAMES = {"learning_rate": "lr", "b1": ("betas", 0), "b2": ("betas", 1),
                     "eps": "eps"}
_OPTAX_EPS_ROOT = ((0.0,), "eps_root (eps inside the square root) is not implemented here")
_OPTAX_ADAM_UNSUPPORTED = {"eps_root": _OPTAX_EPS_ROOT,
                           "nesterov": ((False,), "Adam with nesterov is optax's nadam: "
                                                  "from_framework('optax', 'nadam', ...)"),
                           "mu_dtype": ((None,), "npoptim keeps the moments in the "
                                                 "parameter's dtype")}
#: optax's Adam keywords npoptim's Adam refuses, less eps_root, which it computes
_OPTAX_ADAM_ROOTED = {k: v for k, v in _OPTAX_ADAM_UNSUPPORTED.items() if k != "eps_root"}


def _optax_eps_root(given):
    """optax's ``scale_by_adam`` divides by ``sqrt(nu_hat + eps_root) + eps``; npoptim's Adam
    puts its ``eps`` outside the root (``eps_mode="bias_corrected"``) or inside it
    (``"in_sqrt"``), not both: ``eps_root`` is taken where ``eps`` is 0."""
    eps_root, eps = given.get("eps_root", 0.0), given.get("eps", 0.0)
    if eps_root == 0:
        return {}
    if eps != 0:
        raise ValueError(f"optax: eps_root={eps_root!r} with eps={eps!r}: npoptim's Adam adds "
                         "eps inside the square root or outside it, not both; pass eps=0.0 "
                         "with eps_root (or eps_root=0.0)")
    return {"eps": eps_root, "eps_mode": "in_sqrt"}


_OPTAX_NADAM_UNSUPPORTED = dict(
    eps_root=_OPTAX_ADAM_UNSUPPORTED["eps_root"], mu_dtype=_OPTAX_ADAM_UNSUPPORTED["mu_dtype"],
    nesterov=((True,), "nadam without nesterov is optax's adam (npoptim Adam)"))
OPTAX = Flavor(
    name="optax", framework="optax 0.2 (google-deepmind/optax optax/_src/alias.py)",
    switches={
        "Adam": dict(amsgrad_max="bias_corrected"),
        "AdamW": dict(amsgrad_max="bias_corrected"),
        "Adagrad": dict(eps_in_sqrt=True),
        "RMSprop": dict(eps_in_sqrt=True, lr_in_momentum=True),
        "SGD": {},
        "Adamax": {},
        "Adadelta": {},
        "LAMB": dict(variant="paper_v5"),
        "LARS": dict(variant="optax"),
        # optimizers optax and torch-style libraries both ship (npoptim's default = optax's
        # math unless a variant is named)
        "Lion": {},
        "Yogi": {},
        "Adan": dict(variant="optax"),
        "AdamaxW": {},
        "NovoGrad": {},
        "Fromage": dict(variant="optax"),
        "SM3": {},
        "SignSGD": {},
        "Signum": {},
        "OptimisticGD": {},
        "OptimisticAdam": dict(variant="optax"),
        "ADOPT": {},
        "AdEMAMix": {},
        "SimplifiedAdEMAMix": {},
        "MADGRAD": {},
        "Prodigy": dict(variant="optax"),
        "DAdaptAdamW": dict(variant="optax"),
        "AdaBelief": {},
        "ScheduleFreeSGD": {},
        "ScheduleFreeAdamW": {},
        "PolyakSGD": {},
        "Muon": dict(bias_correction=True, ns_dtype="param", ns_eps_mode="added",
                     weight_layout="in_out"),
        "LBFGS": dict(first_step_norm="l2", curvature_condition=False, measured_step=True),
        "RAdam": dict(eps_mode="bias_corrected", rectify_threshold_inclusive=True),
        "NAdam": dict(momentum_schedule="none", state_dtype="param"),
        # torch's math; optax 0.2.8's rprop has a bug (tests/data/framework_known_bugs.json)
        "Rprop": {},
        # optax.contrib optimizers npoptim implements as optax computes them (Momo/MomoAdam:
        # npoptim's default is the authors' weight decay, optax's is variant="optax"; Sophia's
        # default variant is optax's)
        "ACProp": {},
        "COCOB": {},
        "DoG": {},
        "DoWG": {},
        "Momo": dict(variant="optax"),
        "MomoAdam": dict(variant="optax"),
        "Sophia": dict(variant="optax"),
        # T5's Adafactor (optax/_src/alias.py adafactor, factorized.py)
        "Adafactor": dict(eps1_mode="added", relative_step=False, min_dim_size_to_factor=128,
                          factor_dims="largest_two", weight_decay_mode="added",
                          momentum_dtype="float32"),
        # optax.contrib.galore (optax/contrib/_galore.py): see npoptim/optim/galore.py
        "GaLoreAdamW": dict(projected_side="larger", svd_dtype="float32", svd_signs="lapack",
                            eps_mode="bias_corrected", decay_after_update=False),
        # the noise optax draws from jax.random (npoptim.kernels.jax_random)
        "NoisySGD": dict(noise_stream="jax"),
        "DPSGD": dict(noise_stream="jax"),
    },
    constructors={
        "adam": FrameworkOptimizer("Adam", _OPTAX_ADAM_NAMES,
                                   dict(learning_rate=REQUIRED, b1=0.9, b2=0.999, eps=1e-8,
                                        eps_root=0.0, nesterov=False, mu_dtype=None),
                                   unsupported=_OPTAX_ADAM_ROOTED,
                                   derived={"eps_root": _optax_eps_root}),
        "amsgrad": FrameworkOptimizer("Adam", _OPTAX_ADAM_NAMES,
                                      dict(learning_rate=REQUIRED, b1=0.9, b2=0.999, eps=1e-8,
                                           eps_root=0.0, mu_dtype=None),
                                      fixed=dict(amsgrad=True),
                                      unsupported=_OPTAX_ADAM_ROOTED,
                                      derived={"eps_root": _optax_eps_root}),
        "adamw": FrameworkOptimizer("AdamW", dict(_OPTAX_ADAM_NAMES, weight_decay="weight_decay"),
                                    dict(learning_rate=REQUIRED, b1=0.9, b2=0.999, eps=1e-8,
                                         eps_root=0.0, mu_dtype=None, weight_decay=1e-4,
                                         mask=None, nesterov=False),
                                    unsupported=dict(_OPTAX_ADAM_ROOTED, mask=(
                                        (None,), "use param groups with weight_decay=0")),
                                    derived={"eps_root": _optax_eps_root}),
        "adagrad": FrameworkOptimizer(
            "Adagrad", {"learning_rate": "lr", "initial_accumulator_value":
                        "initial_accumulator_value", "eps": "eps"},
            dict(learning_rate=REQUIRED, initial_accumulator_value=0.1, eps=1e-7)),
        "rmsprop": FrameworkOptimizer(
            "RMSprop", {"learning_rate": "lr", "decay": "alpha", "eps": "eps",
                        "centered": "centered", "momentum": "momentum",
                        "eps_in_sqrt": "eps_in_sqrt"},
            dict(learning_rate=REQUIRED, decay=0.9, eps=1e-8, initial_scale=0.0,
                 eps_in_sqrt=True, centered=False, momentum=None, nesterov=False,
                 bias_correction=False),
            unsupported={"initial_scale": ((0.0,), "npoptim's square_avg starts at 0"),
                         "nesterov": ((False,), "RMSprop with nesterov is not implemented"),
                         "bias_correction": ((False,), "not implemented")}),
        "sgd": FrameworkOptimizer(
            "SGD", {"learning_rate": "lr", "momentum": "momentum", "nesterov": "nesterov"},
            dict(learning_rate=REQUIRED, momentum=None, nesterov=False)),
        "adamax": FrameworkOptimizer("Adamax", {"learning_rate": "lr", "b1": ("betas", 0),
                                                "b2": ("betas", 1), "eps": "eps"},
                                     dict(learning_rate=REQUIRED, b1=0.9, b2=0.999, eps=1e-8)),
        "adadelta": FrameworkOptimizer(
            "Adadelta", {"learning_rate": "lr", "rho": "rho", "eps": "eps",
                         "weight_decay": "weight_decay"},
            # optax chains add_decayed_weights before scale_by_adadelta: torch's L2 decay
            dict(learning_rate=REQUIRED, rho=0.9, eps=1e-6, weight_decay=0.0)),
        "lamb": FrameworkOptimizer("LAMB", {"learning_rate": "lr", "b1": ("betas", 0),
                                            "b2": ("betas", 1), "eps": "eps",
                                            "weight_decay": "weight_decay"},
                                   dict(learning_rate=REQUIRED, b1=0.9, b2=0.999, eps=1e-6,
                                        eps_root=0.0, weight_decay=0.0, mask=None),
                                   unsupported={"eps_root": ((0.0,), "not implemented"),
                                                "mask": ((None,), "use param groups")}),
        "lars": FrameworkOptimizer("LARS", {"learning_rate": "lr", "weight_decay":
                                            "weight_decay", "trust_coefficient":
                                            "trust_coefficient", "eps": "eps",
                                            "momentum": "momentum", "nesterov": "nesterov"},
                                   dict(learning_rate=REQUIRED, weight_decay=0.0,
                                        trust_coefficient=0.001, eps=0.0, momentum=0.9,
                                        nesterov=False)),
        "lion": FrameworkOptimizer("Lion", {"learning_rate": "lr", "b1": ("betas", 0),
                                            "b2": ("betas", 1), "weight_decay": "weight_decay"},
                                   dict(learning_rate=REQUIRED, b1=0.9, b2=0.99,
                                        weight_decay=1e-3, mu_dtype=None, mask=None),
                                   unsupported=dict(mu_dtype=_OPTAX_ADAM_UNSUPPORTED["mu_dtype"],
                                                    mask=_OPTAX_MASK)),
        "yogi": FrameworkOptimizer("Yogi", {"learning_rate": "lr", "b1": ("betas", 0),
                                            "b2": ("betas", 1), "eps": "eps"},
                                   dict(learning_rate=REQUIRED, b1=0.9, b2=0.999, eps=1e-3)),
        "adan": FrameworkOptimizer("Adan", {"learning_rate": "lr", "b1": ("betas", 0),
                                            "b2": ("betas", 1), "b3": ("betas", 2),
                                            "eps": "eps", "eps_root": "eps_root",
                                            "weight_decay": "weight_decay"},
                                   dict(learning_rate=REQUIRED, b1=0.98, b2=0.92, b3=0.99,
                                        eps=1e-8, eps_root=1e-8, weight_decay=0.0, mask=None),
                                   unsupported=dict(mask=_OPTAX_MASK)),
        "adamaxw": FrameworkOptimizer("AdamaxW", {"learning_rate": "lr", "b1": ("betas", 0),
                                                  "b2": ("betas", 1), "eps": "eps",
                                                  "weight_decay": "weight_decay"},
                                      dict(learning_rate=REQUIRED, b1=0.9, b2=0.999, eps=1e-8,
                                           weight_decay=1e-4, mask=None),
                                      unsupported=dict(mask=_OPTAX_MASK)),
        "novograd": FrameworkOptimizer("NovoGrad", {"learning_rate": "lr", "b1": ("betas", 0),
                                                    "b2": ("betas", 1), "eps": "eps",
                                                    "eps_root": "eps_root",
                                                    "weight_decay": "weight_decay"},
                                       dict(learning_rate=REQUIRED, b1=0.9, b2=0.25, eps=1e-6,
                                            eps_root=0.0, weight_decay=0.0)),
        "fromage": FrameworkOptimizer("Fromage", {"learning_rate": "lr", "min_norm": "min_norm"},
                                      dict(learning_rate=REQUIRED, min_norm=1e-6)),
        "sm3": FrameworkOptimizer("SM3", {"learning_rate": "lr", "momentum": "momentum"},
                                  dict(learning_rate=REQUIRED, momentum=0.9)),
        "sign_sgd": FrameworkOptimizer("SignSGD", {"learning_rate": "lr"},
                                       dict(learning_rate=REQUIRED)),
        "signum": FrameworkOptimizer("Signum", {"learning_rate": "lr", "beta": "momentum"},
                                     dict(learning_rate=REQUIRED, beta=0.9,
                                          accumulator_dtype=None),
                                     unsupported={"accumulator_dtype": (
                                         (None,), "npoptim keeps the momentum in the "
                                                  "parameter's dtype")}),
        "optimistic_gradient_descent": FrameworkOptimizer(
            "OptimisticGD", {"learning_rate": "lr", "alpha": "alpha", "beta": "beta"},
            dict(learning_rate=REQUIRED, alpha=1.0, beta=1.0)),
        "optimistic_adam_v2": FrameworkOptimizer(
            "OptimisticAdam", dict(_OPTAX_ADAM_NAMES, alpha="alpha", beta="beta",
                                   eps_root="eps_root", nesterov="nesterov"),
            dict(learning_rate=REQUIRED, alpha=1.0, beta=1.0, b1=0.9, b2=0.999, eps=1e-8,
                 eps_root=0.0, mu_dtype=None, nesterov=True),
            unsupported=dict(mu_dtype=_OPTAX_ADAM_UNSUPPORTED["mu_dtype"])),
        "contrib.adopt": FrameworkOptimizer(
            "ADOPT", dict(_OPTAX_ADAM_NAMES, nesterov="nesterov"),
            dict(learning_rate=REQUIRED, b1=0.9, b2=0.9999, eps=1e-6, mu_dtype=None,
                 nesterov=False, use_clipping=True),
            unsupported=dict(mu_dtype=_OPTAX_ADAM_UNSUPPORTED["mu_dtype"],
                             use_clipping=((True,), "npoptim's clip_exponent=None; not mapped"),
                             clip_value_fn=((), "a callable: npoptim's clip is step ** 0.25 "
                                                "(clip_exponent)"))),
        "contrib.ademamix": FrameworkOptimizer(
            "AdEMAMix", {"learning_rate": "lr", "b1": ("betas", 0), "b2": ("betas", 1),
                         "b3": ("betas", 2), "alpha": "alpha", "eps": "eps",
                         "weight_decay": "weight_decay"},
            dict(learning_rate=REQUIRED, b1=0.9, b2=0.999, b3=0.9999, alpha=5.0, eps=1e-8,
                 eps_root=0.0, mu_dtype=None, weight_decay=0.0, mask=None),
            unsupported=dict(eps_root=_OPTAX_ADAM_UNSUPPORTED["eps_root"],
                             mu_dtype=_OPTAX_ADAM_UNSUPPORTED["mu_dtype"], mask=_OPTAX_MASK)),
        "contrib.simplified_ademamix": FrameworkOptimizer(
            "SimplifiedAdEMAMix", {"learning_rate": "lr", "b1": ("betas", 0),
                                   "b2": ("betas", 1), "alpha": "alpha", "eps": "eps",
                                   "weight_decay": "weight_decay"},
            dict(learning_rate=REQUIRED, b1=0.99, b2=0.95, alpha=0.0, eps=1e-8, eps_root=0.0,
                 weight_decay=0.0, mask=None),
            unsupported=dict(eps_root=_OPTAX_ADAM_UNSUPPORTED["eps_root"], mask=_OPTAX_MASK)),
        "contrib.madgrad": FrameworkOptimizer(
            "MADGRAD", {"learning_rate": "lr", "momentum": "momentum",
                        "weight_decay": "weight_decay", "eps": "eps"},
            dict(learning_rate=REQUIRED, momentum=0.9, weight_decay=0.0, eps=1e-6)),
        "contrib.prodigy": FrameworkOptimizer(
            "Prodigy", {"learning_rate": "lr", "betas": "betas", "beta3": "beta3", "eps": "eps",
                        "estim_lr0": "d0", "estim_lr_coef": "d_coef",
                        "weight_decay": "weight_decay", "safeguard_warmup": "safeguard_warmup"},
            dict(learning_rate=1.0, betas=(0.9, 0.999), beta3=None, eps=1e-8, estim_lr0=1e-6,
                 estim_lr_coef=1.0, weight_decay=0.0, safeguard_warmup=False)),
        "contrib.dadapt_adamw": FrameworkOptimizer(
            "DAdaptAdamW", {"learning_rate": "lr", "betas": "betas", "eps": "eps",
                            "estim_lr0": "d0", "weight_decay": "weight_decay"},
            dict(learning_rate=1.0, betas=(0.9, 0.999), eps=1e-8, estim_lr0=1e-6,
                 weight_decay=0.0)),
        "adabelief": FrameworkOptimizer(
            "AdaBelief", dict(_OPTAX_ADAM_NAMES, eps_root="eps_root", nesterov="nesterov"),
            dict(learning_rate=REQUIRED, b1=0.9, b2=0.999, eps=1e-16, eps_root=1e-16,
                 nesterov=False)),
        "contrib.schedule_free_sgd": FrameworkOptimizer(
            "ScheduleFreeSGD", {"learning_rate": "lr", "warmup_steps": ("warmup_steps", "none0"),
                                "b1": "momentum", "weight_decay": "weight_decay",
                                "weight_lr_power": "weight_lr_power"},
            dict(learning_rate=1.0, warmup_steps=None, b1=0.9, weight_decay=None,
                 weight_lr_power=2.0, state_dtype=None),
            unsupported={"state_dtype": ((None,), "npoptim keeps the state in the parameter's "
                                                  "dtype")}),
        "contrib.schedule_free_adamw": FrameworkOptimizer(
            "ScheduleFreeAdamW", {"learning_rate": "lr",
                                  "warmup_steps": ("warmup_steps", "none0"),
                                  "b1": ("betas", 0), "b2": ("betas", 1), "eps": "eps",
                                  "weight_decay": "weight_decay",
                                  "weight_lr_power": "weight_lr_power"},
            dict(learning_rate=0.0025, warmup_steps=None, b1=0.9, b2=0.999, eps=1e-8,
                 weight_decay=0.0, weight_lr_power=2.0, state_dtype=None),
            unsupported={"state_dtype": ((None,), "npoptim keeps the state in the parameter's "
                                                  "dtype")}),
        # the loss is an extra argument of update (value=); npoptim's lr is optax's scaling
        "polyak_sgd": FrameworkOptimizer(
            "PolyakSGD", {"scaling": "lr", "max_learning_rate": "max_learning_rate",
                          "f_min": "f_min", "eps": "eps", "variant": "mode"},
            dict(max_learning_rate=1.0, scaling=1.0, f_min=0.0, eps=0.0, variant="sps")),
        # optax.contrib.muon, for 2-D parameters (the others go to optax's AdamW there);
        # optax 0.2.8 has no optax.muon: contrib.muon is the only name
        "contrib.muon": FrameworkOptimizer(
            "Muon", {"learning_rate": "lr", "ns_coeffs": "ns_coefficients",
                     "ns_steps": "ns_steps", "beta": "momentum", "eps": "eps",
                     "weight_decay": "weight_decay", "nesterov": "nesterov",
                     "adaptive": "adaptive",
                     "consistent_rms": ("adjust_lr_fn", "consistent_rms")},
            dict(learning_rate=REQUIRED, ns_coeffs=(3.4445, -4.7750, 2.0315), ns_steps=5,
                 beta=0.95, eps=1e-8, weight_decay=0.0, weight_decay_mask=None,
                 mu_dtype=None, nesterov=True, adaptive=False, preconditioning="frobenius",
                 consistent_rms=None, muon_weight_dimension_numbers=None),
            unsupported={"weight_decay_mask": ((None,), "use param groups with "
                                                        "weight_decay=0"),
                         "mu_dtype": ((None,), "npoptim keeps the momentum in the "
                                               "parameter's dtype"),
                         "preconditioning": (("frobenius",), "only the Frobenius-norm "
                                                             "scaling is implemented"),
                         "muon_weight_dimension_numbers": ((None,), "npoptim's Muon takes "
                                                                    "2-D parameters only")}),
        # optax.lbfgs: one iteration per update, no tolerance tests; linesearch "zoom" (its
        # default) is scale_by_zoom_linesearch with the keywords below (npoptim's zoom), None
        # the fixed step
        "lbfgs": FrameworkOptimizer(
            "LBFGS", {"learning_rate": ("lr", "none_is_one"), "memory_size": "history_size",
                      "scale_init_precond": "scale_init_precond",
                      "linesearch": ("line_search_fn", "optax_linesearch"),
                      **{k: k for k in ("max_linesearch_steps", "max_learning_rate",
                                        "increase_factor", "slope_rtol", "curv_rtol",
                                        "approx_dec_rtol", "stepsize_precision",
                                        "initial_guess_strategy")},
                      "tol": "linesearch_tol"},
            dict(learning_rate=None, memory_size=10, scale_init_precond=True,
                 linesearch="zoom", max_linesearch_steps=20),
            fixed=dict(max_iter=1, tolerance_grad=-math.inf, tolerance_change=-math.inf)),
        "radam": FrameworkOptimizer(
            "RAdam", _OPTAX_ADAM_NAMES,
            dict(learning_rate=REQUIRED, b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0,
                 threshold=5.0, nesterov=False),
            unsupported={"eps_root": _OPTAX_ADAM_UNSUPPORTED["eps_root"],
                         "threshold": ((5.0,), "npoptim rectifies at rho_t = 5 (torch's "
                                               "threshold)"),
                         "nesterov": ((False,), "RAdam with a Nesterov first moment is not "
                                                "implemented")}),
        # optax.nadam / nadamw: adam / adamw with nesterov=True (Dozat's form, constant b1)
        "nadam": FrameworkOptimizer(
            "NAdam", _OPTAX_ADAM_NAMES,
            dict(learning_rate=REQUIRED, b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0,
                 mu_dtype=None, nesterov=True),
            fixed=dict(weight_decay=0.0),
            unsupported=dict(_OPTAX_NADAM_UNSUPPORTED)),
        "nadamw": FrameworkOptimizer(
            "NAdam", dict(_OPTAX_ADAM_NAMES, weight_decay="weight_decay"),
            dict(learning_rate=REQUIRED, b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0,
                 mu_dtype=None, weight_decay=1e-4, mask=None, nesterov=True),
            fixed=dict(decoupled_weight_decay=True),
            unsupported=dict(_OPTAX_NADAM_UNSUPPORTED, mask=_OPTAX_MASK)),
        "rprop": FrameworkOptimizer(
            "Rprop", {"learning_rate": "lr", "eta_minus": ("etas", 0), "eta_plus": ("etas", 1),
                      "min_step_size": ("step_sizes", 0), "max_step_size": ("step_sizes", 1)},
            dict(learning_rate=REQUIRED, eta_minus=0.5, eta_plus=1.2, min_step_size=1e-6,
                 max_step_size=50.0)),
        "contrib.acprop": FrameworkOptimizer(
            "ACProp", dict(_OPTAX_ADAM_NAMES, eps_root="eps_root", weight_decay="weight_decay"),
            dict(learning_rate=REQUIRED, b1=0.9, b2=0.999, eps=1e-16, eps_root=1e-16,
                 weight_decay=0.0, mask=None),
            unsupported=dict(mask=_OPTAX_MASK)),
        "contrib.cocob": FrameworkOptimizer(
            "COCOB", {"learning_rate": "lr", "alpha": "alpha", "eps": "eps",
                      "weight_decay": "weight_decay"},
            dict(learning_rate=1.0, alpha=100.0, eps=1e-8, weight_decay=0.0, mask=None),
            unsupported=dict(mask=_OPTAX_MASK)),
        "contrib.dog": FrameworkOptimizer(
            "DoG", {"learning_rate": "lr", "init_step": "init_step", "eps": "eps",
                    "weight_decay": "weight_decay"},
            dict(learning_rate=1.0, init_step=("heuristic", 1e-6), eps=1e-8, weight_decay=None,
                 mask=None),
            unsupported=dict(mask=_OPTAX_MASK)),
        "contrib.dowg": FrameworkOptimizer(
            "DoWG", {"learning_rate": "lr", "init_estim_sq_dist": "init_estim_sq_dist",
                     "eps": "eps", "weight_decay": "weight_decay"},
            dict(learning_rate=1.0, init_estim_sq_dist=None, eps=1e-4, weight_decay=None,
                 mask=None),
            unsupported=dict(mask=_OPTAX_MASK)),
        # the loss is an extra argument of update (value=), as polyak_sgd's
        "contrib.momo": FrameworkOptimizer(
            "Momo", {"learning_rate": "lr", "beta": "beta", "lower_bound": "lower_bound",
                     "weight_decay": "weight_decay", "adapt_lower_bound": "adapt_lower_bound"},
            dict(learning_rate=1.0, beta=0.9, lower_bound=0.0, weight_decay=0.0,
                 adapt_lower_bound=False)),
        "contrib.momo_adam": FrameworkOptimizer(
            "MomoAdam", dict(_OPTAX_ADAM_NAMES, lower_bound="lower_bound",
                             weight_decay="weight_decay", adapt_lower_bound="adapt_lower_bound"),
            dict(learning_rate=1e-2, b1=0.9, b2=0.999, eps=1e-8, lower_bound=0.0,
                 weight_decay=0.0, adapt_lower_bound=False)),
        # hessian_diagonal_fn is named by the estimate it computes (the golden files store
        # names: _hessian_estimate); optax's default draws Hutchinson probes from jax.random
        "contrib.sophia": FrameworkOptimizer(
            "Sophia", dict(_OPTAX_ADAM_NAMES, weight_decay="weight_decay", gamma="gamma",
                           clip_threshold=("clip_threshold", "nullable"),
                           update_interval="update_interval",
                           hessian_diagonal_fn=("hessian_estimate", "hessian_fn")),
            dict(learning_rate=REQUIRED, b1=0.965, b2=0.99, eps=1e-8, weight_decay=1e-4,
                 weight_decay_mask=None, gamma=0.01, clip_threshold=1.0, update_interval=10,
                 hessian_diagonal_fn="hutchinson", mu_dtype=None, verbose=False,
                 print_win_rate_every_n_steps=0),
            unsupported=dict(weight_decay_mask=_OPTAX_MASK,
                             mu_dtype=_OPTAX_ADAM_UNSUPPORTED["mu_dtype"],
                             verbose=((False,), "npoptim prints nothing; read the state"),
                             print_win_rate_every_n_steps=((0,), "npoptim prints nothing"))),
        "adafactor": FrameworkOptimizer(
            "Adafactor", {"learning_rate": ("lr", "none_is_one"),
                          "min_dim_size_to_factor": "min_dim_size_to_factor",
                          "decay_rate": ("beta2_decay", "negated"),
                          "decay_offset": "decay_offset",
                          "multiply_by_parameter_scale": "parameter_scale",
                          "clipping_threshold": ("d", "none_is_inf"), "momentum": "momentum",
                          "dtype_momentum": ("momentum_dtype", "momentum_dtype"),
                          "weight_decay_rate": "weight_decay", "eps": ("eps", "eps1_of_pair")},
            dict(learning_rate=None, min_dim_size_to_factor=128, decay_rate=0.8, decay_offset=0,
                 multiply_by_parameter_scale=True, clipping_threshold=1.0, momentum=None,
                 dtype_momentum="float32", weight_decay_rate=None, eps=1e-30, factored=True,
                 weight_decay_mask=None),
            unsupported={"factored": ((True,), "factored=False: pass a min_dim_size_to_factor "
                                               "above every dimension"),
                         "weight_decay_mask": _OPTAX_MASK}),
        # optax.contrib.galore with its default base_optimizer, scale_by_adam() (b1 0.9,
        # b2 0.999, eps 1e-8: not arguments of galore, so fixed)
        "contrib.galore": FrameworkOptimizer(
            "GaLoreAdamW", {"learning_rate": "lr", "rank": "rank",
                            "update_proj_gap": "update_proj_gap", "scale": "scale",
                            "weight_decay": "weight_decay"},
            dict(learning_rate=REQUIRED, rank=128, update_proj_gap=200, scale=1.0,
                 base_optimizer=None, weight_decay=0.0, mask=None,
                 weight_dimension_numbers=None),
            fixed=dict(betas=(0.9, 0.999), eps=1e-8, correct_bias=True),
            unsupported={"base_optimizer": ((None,), "npoptim's GaLore runs optax's default "
                                                     "scale_by_adam() (b1 0.9, b2 0.999, eps "
                                                     "1e-8) in the subspace"),
                         "mask": _OPTAX_MASK,
                         "weight_dimension_numbers": ((None,), "npoptim projects the 2-D "
                                                               "parameters only")}),
        # key / seed: the jax.random key the noise comes from (npoptim's seed with
        # noise_stream="jax"); optax's key=None is key 0 (with a warning), its deprecated
        # seed= is the key
        "noisy_sgd": FrameworkOptimizer(
            "NoisySGD", {"learning_rate": "lr", "eta": "eta", "gamma": "gamma",
                         "key": ("seed", "jax_key")},
            dict(learning_rate=REQUIRED, eta=0.01, gamma=0.55, key=None, seed=None),
            fixed=dict(noise_stream="jax"), aliases={"seed": "key"}),
        "contrib.dpsgd": FrameworkOptimizer(
            "DPSGD", {"learning_rate": "lr", "l2_norm_clip": "l2_norm_clip",
                      "noise_multiplier": "noise_multiplier", "seed": "seed",
                      "momentum": "momentum", "nesterov": "nesterov"},
            dict(learning_rate=REQUIRED, l2_norm_clip=REQUIRED, noise_multiplier=REQUIRED,
                 seed=REQUIRED, momentum=None, nesterov=False),
            fixed=dict(noise_stream="jax")),
    },
    differs={
        "Adam": "amsgrad takes the max of the bias-corrected second moment (torch: raw v); "
                "otherwise torch's math",
        "AdamW": "as Adam; weight_decay default 1e-4",
        "Adagrad": "eps inside the square root (update 0 where the accumulator is 0); "
                   "accumulator starts at 0.1; eps 1e-7",
        "RMSprop": "eps inside the square root (optax eps_in_sqrt=True, its default); lr "
                   "inside the momentum buffer (trace after scale_by_learning_rate); decay 0.9",
        "SGD": "torch's math (trace = torch's buffer without dampening)",
        "Adamax": "torch's math",
        "Adadelta": "torch's math (weight_decay is L2, added before the scaling); rho 0.9, "
                    "eps 1e-6",
        "LAMB": "the paper_v5 variant",
        "LARS": "the optax variant",
        "Lion": "npoptim's math (the paper's decoupled decay); weight_decay default 1e-3",
        "Yogi": "npoptim's math (initial accumulator 1e-6, eps_root 0: not settable in "
                "optax.yogi); eps 1e-3",
        "Adan": "the optax variant",
        "AdamaxW": "npoptim's math",
        "NovoGrad": "npoptim's math",
        "Fromage": "the optax variant",
        "SM3": "npoptim's math (eps 1e-8, not settable in optax.sm3)",
        "SignSGD": "npoptim's math; optax.sign_sgd has no weight_decay",
        "Signum": "npoptim's math (beta is the momentum); optax.signum has no weight_decay",
        "OptimisticGD": "npoptim's math",
        "OptimisticAdam": "the optax variant (optimistic_adam_v2)",
        "ADOPT": "npoptim's math (optax.contrib.adopt: clip step ** 0.25); no weight decay",
        "AdEMAMix": "npoptim's math; no warmups (optax takes schedules for b3 and alpha)",
        "SimplifiedAdEMAMix": "npoptim's math",
        "MADGRAD": "npoptim's math (L2 decay)",
        "Prodigy": "the optax variant",
        "DAdaptAdamW": "the optax variant",
        "AdaBelief": "the paper's math; eps_root given (npoptim's None is eps_root = eps, "
                     "optax's default 1e-16 = its default eps); no weight decay",
        "ScheduleFreeSGD": "the paper's math without warmup (a warmup_steps is refused: see "
                           "npoptim.flavors._no_warmup); no r",
        "ScheduleFreeAdamW": "the paper's math without warmup (a warmup_steps is refused: see "
                             "npoptim.flavors._no_warmup); no r",
        "PolyakSGD": "npoptim's math (optax's code: the scaling, npoptim's lr, divides the "
                     "Polyak ratio); the loss is update's value=",
        "LBFGS": "optax's zoom line search (line_search_fn='zoom', its default; linesearch="
                 "None: the fixed step); one iteration per step; first step min(1, 1/|g|_2) lr "
                 "(torch: |g|_1); every pair stored (torch: only if y.s > 1e-10); history 10",
        "Muon": "bias-corrected momentum (count state); Newton-Schulz in the parameter's dtype "
                "(torch: bfloat16) with X/(|X|+eps); the shape scale sqrt(max(1, fan_out/"
                "fan_in)) of a (fan_in, fan_out) matrix; eps 1e-8, weight_decay 0",
        "RAdam": "eps added to sqrt(v_hat), the bias-corrected v (eps_mode='bias_corrected'; "
                 "torch: to sqrt(v) before the sqrt(1 - b2^t) factor); rectified where rho_t "
                 ">= 5 (rectify_threshold_inclusive; torch: > 5); no weight decay",
        "NAdam": "nadam/nadamw: a constant mu_t = b1 (momentum_schedule='none'; torch: "
                 "b1 (1 - 0.96^(t momentum_decay) / 2)), so m_hat = b1 m / (1 - b1^(t+1)) + "
                 "(1 - b1) g / (1 - b1^t); b1^t in the parameter's dtype (state_dtype='param'); "
                 "nadamw: decoupled decay, default 1e-4; lr required",
        "Rprop": "torch's math (optax's initial step sizes are learning_rate, as torch's); "
                 "optax 0.2.8's scale_by_rprop has a bug: it returns the previous step's "
                 "update (the first step moves nothing; optax PR #1725), a known bug "
                 "(tests/data/framework_known_bugs.json)",
        "ACProp": "npoptim's math (optax.contrib.acprop's); lr required",
        "COCOB": "npoptim's math (optax.contrib.cocob's)",
        "DoG": "npoptim's math (optax.contrib.dog's; weight_decay None is 0)",
        "DoWG": "npoptim's math (optax.contrib.dowg's; weight_decay None is 0)",
        "Momo": "the optax variant (weight_decay_form='optax'; npoptim's default is the "
                "authors' form); the loss is update's value=",
        "MomoAdam": "the optax variant (weight_decay_form='optax'; npoptim's default is the "
                    "authors' form); the loss is update's value=",
        "Sophia": "the optax variant (npoptim's default); hessian_diagonal_fn: optax's "
                  "default Hutchinson estimate is npoptim's hessian_estimate='caller' with "
                  "step(hvp=...) (probes from the counter stream unless given as probes=), "
                  "a transformation returning updates*updates is 'squared-gradient'",
        "Adafactor": "T5's form: eps 1e-30 added to g^2, no clamps (eps1_mode='added'); "
                     "rho_t = lr, no 1/sqrt(t) (relative_step=False; lr 1 for its None); "
                     "factored only where the second-largest dimension is >= 128, over the two "
                     "largest (min_dim_size_to_factor, factor_dims='largest_two'); "
                     "weight_decay_rate added to the scaled update, not times lr "
                     "(weight_decay_mode='added'); optional momentum on the scaled step, kept "
                     "in float32 (momentum_dtype); decay_offset; clipping_threshold None is "
                     "d=inf; its float hyperparameters as float64 (as inject_hyperparams holds "
                     "them: Python floats make XLA take the decay's power and the momentum "
                     "product in float32; see npoptim/optim/adafactor.py)",
        "GaLoreAdamW": "optax.contrib.galore: the larger side projected (projected_side="
                       "'larger'; a tall matrix from the left), the SVD in float32 "
                       "(svd_dtype='float32') with LAPACK gesdd's signs through scipy, jax's "
                       "LAPACK (svd_signs='lapack'), optax's Adam in the subspace (eps on "
                       "sqrt(v_hat): eps_mode='bias_corrected'), the decoupled decay on the "
                       "parameter before the step (decay_after_update=False); eps 1e-8, scale "
                       "1; float32 only (cases): optax's SVD is float32 under x64 too",
        "NoisySGD": "torch-style math (npoptim's); the noise is jax.random's normal stream "
                    "from key(key) as optax splits it (noise_stream='jax': "
                    "npoptim/kernels/jax_random.py), a gradient for every parameter each step; "
                    "lr required",
        "DPSGD": "npoptim's math (optax.contrib.dpsgd's); the noise is jax.random's normal "
                 "stream from key(seed) as optax splits it (noise_stream='jax'); momentum "
                 "None is 0; lr, l2_norm_clip, noise_multiplier and seed required",
    },
    zero_only={"SGD": {"dampening": "optax trace has no dampening"}},
    verified="CI: tests/test_framework_replay.py replays cases/optax/ through optax (jax, "
             "jax_enable_x64)",
    step_scope=None,
    # optax.contrib.galore takes its SVD in float32 under x64 too
    optimizer_dtypes={"GaLoreAdamW": ("float32",)},
)

TF = Flavor(
    name="tf", framework="TensorFlow raw kernels (tensorflow/core/kernels/training_ops.cc, "
                         "tf.compat.v1.train)",
    switches={"Adam": dict(eps_mode="eps_hat"), "RMSprop": dict(eps_in_sqrt=True,
                                                                  lr_in_momentum=True),
              "SGD": {}, "Adagrad": {}, "Adadelta": {}, "Adamax": dict(eps_mode="added"),
              # ApplyFtrl/ApplyFtrlV2 are Keras's FTRL (npoptim's)
              "Ftrl": {}},
    constructors={
        "AdamOptimizer": FrameworkOptimizer("Adam", {"learning_rate": "lr", "beta1": ("betas", 0),
                                                     "beta2": ("betas", 1),
                                                     "epsilon": "eps"},
                                            dict(learning_rate=1e-3, beta1=0.9, beta2=0.999,
                                                 epsilon=1e-8)),
        "RMSPropOptimizer": FrameworkOptimizer(
            "RMSprop", {"learning_rate": "lr", "decay": "alpha", "momentum": "momentum",
                        "epsilon": "eps", "centered": "centered"},
            dict(learning_rate=REQUIRED, decay=0.9, momentum=0.0, epsilon=1e-10,
                 centered=False)),
        "MomentumOptimizer": FrameworkOptimizer(
            "SGD", {"learning_rate": "lr", "momentum": "momentum", "use_nesterov": "nesterov"},
            dict(learning_rate=REQUIRED, momentum=REQUIRED, use_nesterov=False)),
        "GradientDescentOptimizer": FrameworkOptimizer("SGD", {"learning_rate": "lr"},
                                                       dict(learning_rate=REQUIRED)),
        "AdagradOptimizer": FrameworkOptimizer(
            "Adagrad", {"learning_rate": "lr",
                        "initial_accumulator_value": "initial_accumulator_value"},
            dict(learning_rate=REQUIRED, initial_accumulator_value=0.1), fixed=dict(eps=0.0)),
        "AdadeltaOptimizer": FrameworkOptimizer(
            "Adadelta", {"learning_rate": "lr", "rho": "rho", "epsilon": "eps"},
            dict(learning_rate=1e-3, rho=0.95, epsilon=1e-8)),
        # tf.compat.v1.train.FtrlOptimizer: ApplyFtrl without l2_shrinkage, ApplyFtrlV2 with
        # it (SparseApplyFtrl(V2) for IndexedSlices), beta folded into l2 as l2 + beta/(2 lr).
        # Like every tf.compat.v1.train optimizer it holds Python-float hyperparameters as
        # float32 tensors and casts them to the variable's dtype (measured: lr=0.1 on a float64
        # variable moves it 1.5e-8 relative off the float64 kernel), so a float64 user passes
        # float64 tensors, as examples/framework_replay/tf_kernels.py does
        "FtrlOptimizer": FrameworkOptimizer(
            "Ftrl", {"learning_rate": "lr", "learning_rate_power": "learning_rate_power",
                     "initial_accumulator_value": "initial_accumulator_value",
                     "l1_regularization_strength": "l1", "l2_regularization_strength": "l2",
                     "l2_shrinkage_regularization_strength": "l2_shrinkage",
                     "beta": ("beta", "none_is_zero")},
            dict(learning_rate=REQUIRED, learning_rate_power=-0.5, initial_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                 l2_shrinkage_regularization_strength=0.0, beta=None)),
        # Kernels no tf.compat.v1.train optimizer calls (Keras 2's, tf.keras.optimizers.legacy),
        # in the kernels' own input names; the caller creates the slots (the accumulator's
        # start: initial_accumulator_value) and passes beta1^t
        "ApplyKerasMomentum": FrameworkOptimizer(
            "SGD", {"lr": "lr", "momentum": "momentum", "use_nesterov": "nesterov"},
            dict(lr=REQUIRED, momentum=REQUIRED, use_nesterov=False),
            fixed=dict(lr_in_buffer=True)),
        "ApplyAdaMax": FrameworkOptimizer("Adamax", {"lr": "lr", "beta1": ("betas", 0),
                                                     "beta2": ("betas", 1), "epsilon": "eps"},
                                          dict(lr=REQUIRED, beta1=REQUIRED, beta2=REQUIRED,
                                               epsilon=REQUIRED)),
        "ApplyAdagradV2": FrameworkOptimizer(
            "Adagrad", {"lr": "lr", "epsilon": "eps",
                        "initial_accumulator_value": "initial_accumulator_value"},
            dict(lr=REQUIRED, epsilon=REQUIRED, initial_accumulator_value=0.0)),
    },
    differs={"Adam": "ApplyAdam: eps-hat", "RMSprop": "eps inside the square root; lr inside "
             "the momentum buffer", "SGD": "ApplyMomentum = torch; ApplyKerasMomentum: lr "
             "inside the buffer (lr_in_buffer, Keras's)", "Adagrad": "ApplyAdagrad "
             "(V1, no eps) = torch with eps=0; accumulator starts at 0.1; ApplyAdagradV2 and "
             "SparseApplyAdagradV2 = torch's dense and CSR paths",
             "Adadelta": "= torch", "Adamax": "ApplyAdaMax: eps added after the max",
             "Ftrl": "ApplyFtrl/ApplyFtrlV2 = npoptim's (Keras's) FTRL; SparseApplyFtrl(V2) "
                     "updates every element of the rows it is given (npoptim's CSR path: the "
                     "stored entries; equal where a CSR gradient stores whole rows)"},
    verified="in CI (tensorflow-cpu 2.21.0 in a venv of its own, tests/test_tf_kernels.py): "
             "examples/framework_replay/tf_kernels.py, 137 cases pass (26 CSR), 136 skipped",
    # The kernels have no step count: the caller passes beta1^t (and beta2^t), so either scope
    # is the caller's choice. tf_kernels.py replays torch's none-grad cases with a t per
    # variable (a variable whose gradient is None is left out and keeps its t: torch's
    # per_param) and Keras's with one t (step_scope="global", as tf.compat.v1.train's
    # AdamOptimizer shares its beta powers); so the flavor has no none-grad cases of its own
    # and Opt(flavor="tf") keeps npoptim's per_param (pass step_scope="global" for AdamOptimizer's
    # shared beta powers).
    step_scope=None,
)

TFJS = Flavor(
    name="tfjs", framework="TensorFlow.js 4 (tensorflow/tfjs tfjs-core/src/optimizers)",
    switches={"Adam": {}, "SGD": {}, "Adagrad": dict(eps_in_sqrt=True),
              "RMSprop": dict(eps_in_sqrt=True, lr_in_momentum=True),
              "Adamax": dict(eps_mode="added"), "Adadelta": {}},
    constructors={
        "adam": FrameworkOptimizer("Adam", {"learningRate": "lr", "beta1": ("betas", 0),
                                            "beta2": ("betas", 1), "epsilon": "eps"},
                                   dict(learningRate=1e-3, beta1=0.9, beta2=0.999,
                                        epsilon=1e-7)),
        "sgd": FrameworkOptimizer("SGD", {"learningRate": "lr"}, dict(learningRate=REQUIRED)),
        "momentum": FrameworkOptimizer("SGD", {"learningRate": "lr", "momentum": "momentum",
                                               "useNesterov": "nesterov"},
                                       dict(learningRate=REQUIRED, momentum=REQUIRED,
                                            useNesterov=False)),
        "adagrad": FrameworkOptimizer(
            "Adagrad", {"learningRate": "lr",
                        "initialAccumulatorValue": "initial_accumulator_value"},
            dict(learningRate=REQUIRED, initialAccumulatorValue=0.1), fixed=dict(eps=1e-7)),
        "rmsprop": FrameworkOptimizer(
            "RMSprop", {"learningRate": "lr", "decay": "alpha", "momentum": "momentum",
                        "epsilon": "eps", "centered": "centered"},
            dict(learningRate=REQUIRED, decay=0.9, momentum=0.0, epsilon=1e-7,
                 centered=False)),
        "adamax": FrameworkOptimizer("Adamax", {"learningRate": "lr", "beta1": ("betas", 0),
                                                "beta2": ("betas", 1), "epsilon": "eps"},
                                     dict(learningRate=2e-3, beta1=0.9, beta2=0.999,
                                          epsilon=1e-7, decay=0.0),
                                     unsupported={"decay": ((0.0,), "tfjs's lr decay by "
                                                            "iteration is not implemented")}),
        "adadelta": FrameworkOptimizer("Adadelta", {"learningRate": "lr", "rho": "rho",
                                                    "epsilon": "eps"},
                                       dict(learningRate=1e-3, rho=0.95, epsilon=1e-7)),
    },
    differs={"Adam": "torch's math; eps 1e-7; global step count (a missing gradient has a "
                     "bug: see the known bugs)", "SGD": "= torch", "Adagrad": "eps 1e-7 inside "
             "the square root (not settable); accumulator starts at 0.1",
             "RMSprop": "eps inside the square root; lr inside the momentum buffer; centered "
                        "has a bug (sqrt(v - g_avg^2 - eps))",
             "Adamax": "eps added after the max; global step count",
             "Adadelta": "torch's formula (tfjs 4.22 has a bug: see the known bugs)"},
    verified="CI: tests/test_framework_replay.py replays the cases through tfjs-core 4.22.0 "
             "(pure-JS CPU backend, float32) in Node",
    dtypes=("float32",),
    step_scope="global",
)

ONNX = Flavor(
    name="onnx", framework="ONNX ai.onnx.preview.training (onnx/onnx onnx/reference/ops/"
                           "aionnx_preview_training)",
    switches={"Adam": dict(eps_mode="eps_hat"), "Adagrad": {}, "SGD": {},
              # onnxruntime-training's AdamW: AdamWOptimizer adam_mode=1, as generate_artifacts
              # builds it (adam_mode=0 is torch's AdamW: the torch flavor)
              "AdamW": dict(eps_mode="eps_hat", decay_after_update=True)},
    constructors={
        # R (the learning rate) and T (the step count) are inputs; H_initial is the
        # accumulator tensor the caller passes in at the first step.
        "Adam": FrameworkOptimizer("Adam", {"R": "lr", "alpha": ("betas", 0),
                                            "beta": ("betas", 1), "epsilon": "eps",
                                            "norm_coefficient": "weight_decay",
                                            "norm_coefficient_post": "post_weight_decay"},
                                   dict(R=REQUIRED, alpha=0.9, beta=0.999, epsilon=0.0,
                                        norm_coefficient=0.0, norm_coefficient_post=0.0)),
        "Adagrad": FrameworkOptimizer(
            "Adagrad", {"R": "lr", "decay_factor": "lr_decay", "epsilon": "eps",
                        "norm_coefficient": "weight_decay",
                        "H_initial": "initial_accumulator_value"},
            dict(R=REQUIRED, decay_factor=0.0, epsilon=0.0, norm_coefficient=0.0,
                 H_initial=0.0)),
        "Momentum": FrameworkOptimizer(
            "SGD", {"R": "lr", "alpha": "momentum", "beta": ("dampening", "complement"),
                    "norm_coefficient": "weight_decay", "mode": ("nesterov", "mode")},
            dict(R=REQUIRED, alpha=REQUIRED, beta=REQUIRED, norm_coefficient=0.0,
                 mode="standard")),
        # onnxruntime.training.onnxblock.optim.AdamW (what generate_artifacts(optimizer=
        # OptimType.AdamW) builds: the com.microsoft AdamWOptimizer node, adam_mode=1); the
        # learning rate is the training API's Optimizer.set_learning_rate.
        "AdamW": FrameworkOptimizer("AdamW", {"learning_rate": "lr", "betas": "betas",
                                              "eps": "eps", "weight_decay": "weight_decay",
                                              "bias_correction": "bias_correction"},
                                    dict(learning_rate=REQUIRED, betas=(0.9, 0.999), eps=1e-6,
                                         weight_decay=0.0, bias_correction=True)),
    },
    differs={"Adam": "eps-hat (no bias correction at T=0; T counts from 1); float32 attributes; "
                     "norm_coefficient_post: decay (1 - c) x after the update "
                     "(post_weight_decay)",
             "Adagrad": "= torch (T counts from 0); float32 attributes",
             "SGD": "Momentum = torch with dampening (beta = 1 - dampening, 1 at T=0); float32 "
                    "attributes",
             "AdamW": "onnxruntime-training's AdamW (AdamWOptimizer adam_mode=1, the Hugging "
                      "Face form): eps-hat; the decoupled decay x <- x - lr*wd*x after the "
                      "update (decay_after_update); bias_correction=False drops both "
                      "corrections; eps 1e-6, weight_decay 0; float32 only (adam_mode=0 is "
                      "torch's AdamW)"},
    verified="CI: tests/test_framework_replay.py replays the cases through onnx.reference "
             "(float32, and float64 cases whose attributes are exact in float32); AdamW "
             "through onnxruntime-training 1.19.2's training API (tests/test_ort_training.py, "
             "a venv of its own)",
    float32_hyperparameters=("betas", "eps", "weight_decay", "lr_decay", "momentum",
                             "dampening"),
    step_scope=None,
    # onnxruntime's AdamWOptimizer CPU kernel is registered for float only
    optimizer_dtypes={"AdamW": ("float32",)},
)

#: The optimizers that take ``flavor=`` (the others are torch's or a paper's only).
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


# ------------------------------------------------------------------------------ translation
def translate(entry, framework_kwargs, flavor_name, optional=False):
    """npoptim keywords from a framework constructor's keywords (``entry``: a
    :class:`FrameworkOptimizer`). ``None`` for a Keras ``weight_decay``/optax ``momentum``
    means 0."""
    out, pairs = {}, {}
    for key, value in _without_aliases(entry, framework_kwargs, flavor_name).items():
        if key in NOT_CONVENTIONS:
            if NOT_CONVENTIONS[key] is None:
                continue
            if value is None or value is False:
                continue  # the framework's "off"
            raise ValueError(f"{flavor_name}: {key}={value!r} is not a convention of the "
                             f"update, and npoptim does not implement it: "
                             f"{NOT_CONVENTIONS[key]}")
        if key in entry.elsewhere or key in entry.derived:
            continue
        if key in entry.unsupported:
            allowed, why = entry.unsupported[key]
            if value not in allowed:
                raise ValueError(f"{flavor_name}: {key}={value!r}: {why}")
            continue
        if key not in entry.names:
            if optional:
                continue
            takes = (set(entry.names) | set(entry.unsupported) | set(entry.elsewhere)
                     | set(entry.aliases))
            raise TypeError(f"{flavor_name} {entry.npoptim}: unknown argument {key!r}; it takes "
                            f"{', '.join(sorted(takes))}")
        target = entry.names[key]
        if value is None and entry.defaults.get(key, None) is not None and target not in (
                "weight_decay", "momentum") and not (isinstance(target, tuple) and target[1]
                                                     in _NONE_IS_A_VALUE):
            # npoptim's None (eps_root = eps) has no twin
            raise ValueError(f"{flavor_name}: {key}=None: the framework takes a number")
        if value is None and target in ("weight_decay", "momentum"):
            value = 0.0
        if isinstance(target, tuple) and target[1] in _CONVERSIONS:
            out[target[0]] = _CONVERSIONS[target[1]][0](value)
        elif isinstance(target, tuple):
            pairs.setdefault(target[0], {})[target[1]] = value
        else:
            out[target] = value
    for name, parts in pairs.items():
        out[name] = tuple(parts.get(i) for i in range(max(2, max(parts) + 1)))
    given = _without_aliases(entry, framework_kwargs, flavor_name)
    for key, derive in entry.derived.items():
        if key in given:
            out.update(derive(given))
    return out


def _without_aliases(entry, framework_kwargs, flavor_name):
    """``framework_kwargs`` with each deprecated keyword (:attr:`FrameworkOptimizer.aliases`)
    given as the keyword it stands for; both given (not None) is refused."""
    out = dict(framework_kwargs)
    for old, new in entry.aliases.items():
        value = out.pop(old, None)
        if value is None:
            continue
        if out.get(new) is not None:
            raise ValueError(f"{flavor_name} {entry.npoptim}: only one of {old} (deprecated) or "
                             f"{new} can be specified")
        out[new] = value
    return out


def _jax_key_seed(key):
    """optax noisy_sgd's ``key`` as npoptim's ``seed`` (``noise_stream="jax"``): None is 0
    (optax's key 0, with a warning); an integer, or a 0-d integer array, is the seed of
    ``jax.random.key(seed)`` (the optimizer checks its range, [0, 2**63)). A key array is
    refused (npoptim takes no jax objects; optax itself refuses raw key data), naming the
    seed that gives it: ``key(seed) = (seed >> 32, seed & 0xFFFFFFFF)``."""
    if key is None:
        return 0
    if isinstance(key, numbers.Integral):
        return key
    if "key<" in str(getattr(key, "dtype", "")):
        raise ValueError("optax noisy_sgd: key is a typed jax key; pass the integer seed it was "
                         "made from, key=seed (jax.random.key(seed)), in [0, 2**63) (for "
                         "jax.random.key_data(key) = (k0, k1) with k0 < 2**31, seed = "
                         "k0 * 2**32 + k1)")
    words = np.asarray(key)
    if words.ndim == 0 and words.dtype.kind in "iu":
        return int(words)
    if words.shape == (2,) and words.dtype == np.uint32:
        seed = int(words[0]) << 32 | int(words[1])
        which = (f"it is jax.random.key_data(jax.random.key({seed})): pass key={seed}"
                 if seed < 2 ** 63 else "its first word is >= 2**31, which no seed in "
                 "[0, 2**63) gives")
        raise ValueError(f"optax noisy_sgd: key={key!r} is raw key data, which optax refuses "
                         f"(jax.random.key takes a scalar seed); {which}")
    raise ValueError(f"optax noisy_sgd: key={key!r}: an integer seed in [0, 2**63) "
                     "(jax.random.key(seed)) or None (0)")


def _hessian_estimate(value):
    """optax sophia's ``hessian_diagonal_fn``, named by its estimate, as npoptim's
    ``hessian_estimate``: ``"hutchinson"`` (optax's default,
    ``hutchinson_estimator_diag_hessian``) is the caller's estimate (``step(grads, hvp=fn)``,
    optax's ``obj_fn``; the probes: npoptim's counter stream, or optax's given as
    ``probes=``), ``"squared-gradient"`` a transformation returning ``updates * updates``."""
    names = {"hutchinson": "caller", "squared-gradient": "squared-gradient"}
    if value not in names:
        raise ValueError(f"optax sophia hessian_diagonal_fn={value!r}: name the estimate, "
                         "'hutchinson' (optax's default; npoptim: step(grads, hvp=fn)) or "
                         "'squared-gradient' (updates * updates)")
    return names[value]


def _consistent_rms_to_adjust_lr_fn(value):
    """optax Muon's ``consistent_rms`` as torch's ``adjust_lr_fn``."""
    if value is None:
        return None
    if value == 0.2:
        return "match_rms_adamw"
    raise ValueError(f"optax: consistent_rms={value!r}: only None and 0.2 (torch's "
                     "adjust_lr_fn='match_rms_adamw') are implemented")


#: Names whose framework value is a function of npoptim's: (to npoptim, to the framework).
_CONVERSIONS = {
    "none_is_one": (lambda v: 1.0 if v is None else v, lambda v: v),  # optax lbfgs's lr
    "optax_linesearch": (lambda v: _optax_linesearch(v), lambda v: v),  # optax lbfgs's
    "none_is_zero": (lambda v: 0.0 if v is None else v, lambda v: v),  # TF FtrlOptimizer beta
    "consistent_rms": (_consistent_rms_to_adjust_lr_fn,
                       lambda v: 0.2 if v == "match_rms_adamw" else None),
    "complement": (lambda v: 1 - v, lambda v: 1 - v),    # ONNX Momentum beta = 1 - dampening
    "mode": (lambda v: v == "nesterov", lambda v: "nesterov" if v else "standard"),
    "none0": (lambda v: _no_warmup(v), lambda v: None if v == 0 else v),  # optax's warmup
    "hessian_fn": (_hessian_estimate,                  # optax sophia's hessian_diagonal_fn
                   lambda v: "hutchinson" if v == "caller" else v),
    "nullable": (lambda v: v, lambda v: v),  # None is a value (Keras Muon's rms_rate: off;
                                             # optax sophia's clip_threshold: no clipping)
    # optax adafactor: decay_rate = -beta2_decay; clipping_threshold None = no clipping;
    # eps is eps1 (its eps2, scale_by_param_block_rms's min_scale, is 1e-3)
    "negated": (lambda v: -v, lambda v: -v),
    "none_is_inf": (lambda v: math.inf if v is None else v,
                    lambda v: None if v == math.inf else v),
    "eps1_of_pair": (lambda v: (v, 1e-3), lambda v: v[0]),
    "momentum_dtype": (lambda v: _momentum_dtype(v), lambda v: None if v == "param" else v),
    "jax_key": (_jax_key_seed, lambda v: v),   # optax noisy_sgd's key: None is 0
}

#: Conversions whose framework None is a value (not "take the default").
_NONE_IS_A_VALUE = {"nullable", "none_is_inf", "momentum_dtype",
                    "optax_linesearch"}  # (optax lbfgs's linesearch=None: no line search)


def _momentum_dtype(dtype):
    """optax adafactor's ``dtype_momentum`` as npoptim's ``momentum_dtype``: float32 (optax's
    default) or None (the parameter's dtype)."""
    if dtype is None:
        return "param"
    name = getattr(dtype, "__name__", None) or getattr(dtype, "name", None) or str(dtype)
    if name == "float32":
        return "float32"
    raise ValueError(f"optax adafactor dtype_momentum={dtype!r}: float32 or None (the "
                     "parameter's dtype) are implemented")


def _optax_linesearch(value):
    """optax lbfgs's ``linesearch``: ``"zoom"`` (its default, ``scale_by_zoom_linesearch``;
    npoptim ``line_search_fn="zoom"``) or None (no line search)."""
    if value in (None, "zoom"):
        return value
    raise ValueError(f"optax: linesearch={value!r}: 'zoom' (optax's scale_by_zoom_linesearch, "
                     "its keywords given to from_framework) or None are implemented")


def _no_warmup(steps):
    """optax schedule_free's ``warmup_steps``: None (or 0) is npoptim's 0; a warmup is refused
    (optax's warmup runs on its int32 count, rounded to float32 under x64, and with the optax
    variant's lag: npoptim ``variant="optax"``, which this constructor does not select)."""
    if steps in (None, 0):
        return 0
    raise ValueError(f"optax schedule_free warmup_steps={steps!r}: not mapped (use npoptim "
                     "ScheduleFree*(..., variant='optax', warmup_steps=...))")


def framework_call(entry, hyper):
    """The keywords of the framework constructor ``entry`` (a :class:`FrameworkOptimizer`) for
    npoptim hyperparameters ``hyper`` (npoptim's names)."""
    out = {}
    for key, target in entry.names.items():
        name, index = target if isinstance(target, tuple) else (target, None)
        if name not in hyper:
            continue
        if index in _CONVERSIONS:
            out[key] = _CONVERSIONS[index][1](hyper[name])
        else:
            out[key] = hyper[name] if index is None else hyper[name][index]
    return out


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


# ------------------------------------------------------------------ the constructor wrapper
def flavored(init):
    """Give an optimizer's ``__init__`` the keyword ``flavor`` (see the module docstring).

    The flavor fills every keyword the caller did not give with the flavor's value; the
    optimizer records ``self.flavor``. The wrapper also takes the optimizer-wide conventions
    (``step_scope``, :data:`OPTIMIZER_CONVENTIONS`), which are
    attributes of the optimizer rather than group options: the flavor's
    :attr:`Flavor.step_scope` unless given. Keyword checks of values the flavor cannot take
    (:attr:`Flavor.zero_only`) run on the final values.
    """
    owner = init.__qualname__.split(".")[0]
    signature = inspect.signature(init)

    @functools.wraps(init)
    def __init__(self, params, *args, flavor="torch", step_scope=None, **kwargs):
        preset = get(flavor)
        if flavor == "torch":
            init(self, params, *args, **kwargs)
        else:
            given = signature.bind_partial(self, params, *args, **kwargs).arguments
            given.pop("self")
            given.pop("params")
            merged = preset.defaults(owner)
            unknown = set(merged) - set(signature.parameters)
            if unknown:  # a switch this optimizer lacks: a table error, not a user error
                raise TypeError(f"flavor {flavor!r} sets {sorted(unknown)}, which {owner} lacks")
            merged.update(given)
            for name, why in preset.zero_only.get(owner, {}).items():
                if merged.get(name, 0) not in (0, 0.0, None):
                    raise ValueError(f"flavor {flavor!r}: {name}={merged[name]!r}: {why}")
            init(self, params, **merged)
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
