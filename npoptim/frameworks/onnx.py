"""ONNX's flavor: the ai.onnx.preview.training operators (and onnxruntime-training's AdamW)
as npoptim's convention switches and constructors."""
from npoptim.frameworks.model import REQUIRED, Flavor, FrameworkOptimizer

#: What every ai.onnx.preview.training case's call needs beyond its keywords: a node, not a
#: constructor (op_type the table's name, domain ai.onnx.preview.training version 1).
_NODE = ("An ai.onnx.preview.training node (domain version 1) per parameter, run once a step: "
         "R is its learning-rate input (a scalar of the case's dtype: each step's lr), the "
         "other keywords its float attributes (float32); X and G are the parameter and its "
         "gradient.")

ONNX = Flavor(
    name="onnx", call_prefix="ai.onnx.preview.training.",
    framework="ONNX training (ai.onnx.preview.training: onnx/onnx onnx/reference/ops/"
              "aionnx_preview_training; AdamW: onnxruntime-training's com.microsoft "
              "AdamWOptimizer, not an ai.onnx.preview.training operator)",
    switches={"Adam": dict(eps_mode="eps_hat"), "Adagrad": {}, "SGD": {},
              # onnxruntime-training's AdamW: AdamWOptimizer adam_mode=1, as generate_artifacts
              # builds it (adam_mode=0 is torch's AdamW: the torch flavor)
              "AdamW": dict(eps_mode="eps_hat", decay_after_update=True)},
    constructors={
        # R (the learning rate) and T (the step count) are inputs; H_initial is the
        # accumulator tensor the caller passes in at the first step. The defaults are the
        # onnx 1.23 schema's (epsilon 1e-6 for Adam and Adagrad).
        "Adam": FrameworkOptimizer("Adam", {"R": "lr", "alpha": ("betas", 0),
                                            "beta": ("betas", 1), "epsilon": "eps",
                                            "norm_coefficient": "weight_decay",
                                            "norm_coefficient_post": "post_weight_decay"},
                                   dict(R=REQUIRED, alpha=0.9, beta=0.999, epsilon=1e-6,
                                        norm_coefficient=0.0, norm_coefficient_post=0.0),
                                   notes=(_NODE, "T, the int64 step count input, is 1 at the "
                                          "first step (torch's step; at T=0 the node skips "
                                          "the bias correction, so counting from 0 gives "
                                          "other numbers); V and H start at zeros.")),
        "Adagrad": FrameworkOptimizer(
            "Adagrad", {"R": "lr", "decay_factor": "lr_decay", "epsilon": "eps",
                        "norm_coefficient": "weight_decay",
                        "H_initial": "initial_accumulator_value"},
            dict(R=REQUIRED, decay_factor=0.0, epsilon=1e-6, norm_coefficient=0.0,
                 H_initial=0.0),
            notes=(_NODE, "T, the int64 step count input, is 0 at the first step (the lr is "
                   "R / (1 + T decay_factor)); H_initial is not an attribute but the value of "
                   "the H input at the first step.")),
        "Momentum": FrameworkOptimizer(
            "SGD", {"R": "lr", "alpha": "momentum", "beta": ("dampening", "complement"),
                    "norm_coefficient": "weight_decay", "mode": ("nesterov", "mode")},
            dict(R=REQUIRED, alpha=REQUIRED, beta=REQUIRED, norm_coefficient=0.0,
                 mode="standard"),
            notes=(_NODE, "T, the int64 step count input, is 0 at the first step (at T=0 the "
                   "node takes the gradient undamped, as torch's first step does); V starts "
                   "at zeros.")),
        # onnxruntime.training.onnxblock.optim.AdamW (what generate_artifacts(optimizer=
        # OptimType.AdamW) builds: the com.microsoft AdamWOptimizer node, adam_mode=1); the
        # learning rate is the training API's Optimizer.set_learning_rate.
        "AdamW": FrameworkOptimizer("AdamW", {"learning_rate": "lr", "betas": "betas",
                                              "eps": "eps", "weight_decay": "weight_decay",
                                              "bias_correction": "bias_correction"},
                                    dict(learning_rate=REQUIRED, betas=(0.9, 0.999), eps=1e-6,
                                         weight_decay=0.0, bias_correction=True),
                                    call="onnxruntime.training.onnxblock.optim.AdamW",
                                    notes=("onnxruntime-training's (1.19.2), not ONNX's: "
                                           "ai.onnx.preview.training has no AdamW. Its "
                                           "com.microsoft AdamWOptimizer node (adam_mode=1), "
                                           "as onnxruntime.training.artifacts."
                                           "generate_artifacts(..., optimizer=this) builds "
                                           "it, takes the keywords but learning_rate: that "
                                           "is the training API's Optimizer."
                                           "set_learning_rate(lr) before each step. float32 "
                                           "only.",)),
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
