"""TensorFlow's flavor: its raw kernels' convention switches and the tf.compat.v1.train
constructors."""
from npoptim.frameworks.model import REQUIRED, Flavor, FrameworkOptimizer

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
