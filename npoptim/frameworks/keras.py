"""Keras 3's flavor: its convention switches, defaults and constructor names per optimizer
(keras.optimizers)."""
from npoptim.frameworks.model import Flavor, FrameworkOptimizer

_BETAS = {"beta_1": ("betas", 0), "beta_2": ("betas", 1)}
_KERAS_ADAM_NAMES = {"learning_rate": "lr", **_BETAS, "epsilon": "eps", "amsgrad": "amsgrad",
                     "weight_decay": "weight_decay"}
_KERAS_ADAM_DEFAULTS = dict(learning_rate=1e-3, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                            amsgrad=False, weight_decay=None)

KERAS = Flavor(
    name="keras", call_prefix="keras.optimizers.",
    framework="Keras 3 (keras.optimizers, keras-team/keras keras/src/optimizers)",
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
