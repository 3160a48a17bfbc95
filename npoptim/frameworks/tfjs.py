"""TensorFlow.js's flavor: its convention switches and constructors (tfjs-core's optimizers)."""
from npoptim.frameworks.model import REQUIRED, Flavor, FrameworkOptimizer

#: tf.train.<name>'s arguments, in the order it takes them (by position).
POSITIONAL = {"adam": ("learningRate", "beta1", "beta2", "epsilon"), "sgd": ("learningRate",),
              "momentum": ("learningRate", "momentum", "useNesterov"),
              "adagrad": ("learningRate", "initialAccumulatorValue"),
              "rmsprop": ("learningRate", "decay", "momentum", "epsilon", "centered"),
              "adamax": ("learningRate", "beta1", "beta2", "epsilon", "decay"),
              "adadelta": ("learningRate", "rho", "epsilon")}


def _notes(name):
    """What a tf.train call needs beyond its keywords: their order, and how a step is taken."""
    return (f"tf.train.{name} takes them by position: {', '.join(POSITIONAL[name])} (tfjs's "
            "default where one is not given). Each step: set the lr (setLearningRate for sgd "
            "and momentum, else opt.learningRate), then opt.applyGradients({name: gradient}) "
            "naming every variable, a missing gradient as null (leaving the variable out "
            "is a known bug: tests/data/framework_known_bugs.json).",)

TFJS = Flavor(
    name="tfjs", call_prefix="tf.train.",
    framework="TensorFlow.js 4 (tensorflow/tfjs tfjs-core/src/optimizers)",
    switches={"Adam": {}, "SGD": {}, "Adagrad": dict(eps_in_sqrt=True),
              "RMSprop": dict(eps_in_sqrt=True, lr_in_momentum=True),
              "Adamax": dict(eps_mode="added"), "Adadelta": {}},
    constructors={
        "adam": FrameworkOptimizer("Adam", {"learningRate": "lr", "beta1": ("betas", 0),
                                            "beta2": ("betas", 1), "epsilon": "eps"},
                                   dict(learningRate=1e-3, beta1=0.9, beta2=0.999,
                                        epsilon=1e-7), notes=_notes("adam")),
        "sgd": FrameworkOptimizer("SGD", {"learningRate": "lr"}, dict(learningRate=REQUIRED),
                                  notes=_notes("sgd")),
        "momentum": FrameworkOptimizer("SGD", {"learningRate": "lr", "momentum": "momentum",
                                               "useNesterov": "nesterov"},
                                       dict(learningRate=REQUIRED, momentum=REQUIRED,
                                            useNesterov=False), notes=_notes("momentum")),
        "adagrad": FrameworkOptimizer(
            "Adagrad", {"learningRate": "lr",
                        "initialAccumulatorValue": "initial_accumulator_value"},
            dict(learningRate=REQUIRED, initialAccumulatorValue=0.1), fixed=dict(eps=1e-7),
            notes=_notes("adagrad")),
        "rmsprop": FrameworkOptimizer(
            "RMSprop", {"learningRate": "lr", "decay": "alpha", "momentum": "momentum",
                        "epsilon": "eps", "centered": "centered"},
            dict(learningRate=REQUIRED, decay=0.9, momentum=0.0, epsilon=1e-7,
                 centered=False), notes=_notes("rmsprop")),
        "adamax": FrameworkOptimizer("Adamax", {"learningRate": "lr", "beta1": ("betas", 0),
                                                "beta2": ("betas", 1), "epsilon": "eps"},
                                     dict(learningRate=2e-3, beta1=0.9, beta2=0.999,
                                          epsilon=1e-7, decay=0.0),
                                     unsupported={"decay": ((0.0,), "tfjs's lr decay by "
                                                            "iteration is not implemented")},
                                     notes=_notes("adamax")),
        "adadelta": FrameworkOptimizer("Adadelta", {"learningRate": "lr", "rho": "rho",
                                                    "epsilon": "eps"},
                                       dict(learningRate=1e-3, rho=0.95, epsilon=1e-7),
                                       notes=_notes("adadelta")),
    },
    differs={"Adam": "torch's math; eps 1e-7; global step count (a variable left out of "
                     "applyGradients has a bug: see the known bugs)", "SGD": "= torch", "Adagrad": "eps 1e-7 inside "
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
