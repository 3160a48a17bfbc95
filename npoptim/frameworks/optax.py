"""optax's flavor: its convention switches, defaults and constructor names per optimizer
(optax and optax.contrib), with the keyword optax's Adam family derives (``eps_root``)."""
import math

from npoptim.frameworks.model import REQUIRED, Flavor, FrameworkOptimizer

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
    name="optax", call_prefix="optax.",
    framework="optax 0.2 (google-deepmind/optax optax/_src/alias.py)",
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
        # optax-shampoo 0.0.6 (PyPI; google-research scalable_shampoo/optax), an optax
        # GradientTransformation outside optax: see npoptim/optim/shampoo.py
        "Shampoo": dict(variant="optax"),
        # Evan Walters' distributed-kron 2.0.0 (distributed_kron/kron.py), PSGD Kron in optax
        "Kron": dict(merge_dims=True, merge_rule="small_dims", probe_damping=True,
                     precondition_damped=False, norm_floor_mode="added", lower_bound="columns",
                     balance_mean="log_float32", clip_eps=0.0, solve_dtype="param",
                     decay_vectors=True, schedule_from_one=True, probe_stream="jax", seed=42,
                     damping_dtype="float32"),
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
            fixed=dict(max_iter=1, tolerance_grad=-math.inf, tolerance_change=-math.inf),
            notes=("linesearch 'zoom' is linesearch=optax.scale_by_zoom_linesearch(...), given "
                   "the zoom keywords here (max_linesearch_steps, slope_rtol, curv_rtol, "
                   "increase_factor, max_learning_rate, approx_dec_rtol, stepsize_precision, "
                   "tol, initial_guess_strategy) and for those not here optax.lbfgs's own "
                   "search's: max_linesearch_steps=20, initial_guess_strategy='one' "
                   "(scale_by_zoom_linesearch's own default, 'keep', gives other numbers); "
                   "null is linesearch=None. Each step is tx.update(grads, state, params, "
                   "value=loss, grad=grads, value_fn=the objective).",)),
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
                         "weight_decay_mask": _OPTAX_MASK},
            # (measured against optax 0.2.8: its float64 cases miss by 5e-8 to 1e-9 of the
            # scale with Python floats, and pass as float64 arrays)
            notes=("In float64 (jax_enable_x64), pass each float argument as a float64 array "
                   "(jax.numpy.asarray(value, jax.numpy.float64), as optax.inject_hyperparams "
                   "makes them): given Python floats, optax computes its decay-rate power "
                   "and its momentum average in float32. dtype_momentum names a dtype "
                   "(jax.numpy.float32), or null for None.",)),
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
        # optax_shampoo.distributed_shampoo.distributed_shampoo (npoptim Shampoo
        # variant="optax"); learning_rate and block_size have no default there
        "distributed_shampoo": FrameworkOptimizer(
            "Shampoo", {"learning_rate": "lr", "block_size": "block_size",
                        "beta1": ("betas", 0), "beta2": ("betas", 1),
                        "diagonal_epsilon": "diagonal_eps", "matrix_epsilon": "matrix_eps",
                        "weight_decay": "weight_decay",
                        "start_preconditioning_step": "start_preconditioning_step",
                        "preconditioning_compute_steps": "preconditioning_compute_steps",
                        "statistics_compute_steps": "statistics_compute_steps",
                        "best_effort_shape_interpretation": "shape_interpretation",
                        "graft_type": ("graft_type", "shampoo_graft"),
                        "nesterov": "nesterov",
                        "exponent_override": "inverse_exponent_override",
                        "inverse_failure_threshold": "inverse_failure_threshold",
                        "moving_average_for_momentum": "moving_average_for_momentum",
                        "skip_preconditioning_dim_size_gt":
                            "no_preconditioning_for_layers_with_dim_gt",
                        "clip_by_scaled_gradient_norm": ("clip_by_scaled_gradient_norm",
                                                         "nullable"),
                        "relative_matrix_epsilon": "relative_matrix_eps",
                        "merge_small_dims_block_size": "merge_small_dims_block_size",
                        "skip_preconditioning_rank_lt": "skip_preconditioning_rank_lt",
                        "decoupled_learning_rate": "decoupled_learning_rate",
                        "decoupled_weight_decay": "decoupled_weight_decay"},
            dict(learning_rate=REQUIRED, block_size=REQUIRED, beta1=0.9, beta2=0.999,
                 diagonal_epsilon=1e-10, matrix_epsilon=1e-6, weight_decay=0.0,
                 start_preconditioning_step=5, preconditioning_compute_steps=1,
                 statistics_compute_steps=1, best_effort_shape_interpretation=True,
                 graft_type=1, nesterov=True, exponent_override=0, batch_axis_name=None,
                 statistics_partition_spec=None, preconditioner_partition_spec=None,
                 num_devices_for_pjit=None, shard_optimizer_states=False,
                 best_effort_memory_usage_reduction=False, inverse_failure_threshold=0.1,
                 moving_average_for_momentum=False, skip_preconditioning_dim_size_gt=4096,
                 clip_by_scaled_gradient_norm=None, precision=None, tensordot_precision=None,
                 relative_matrix_epsilon=True, merge_small_dims_block_size=4096,
                 lobpcg_topk_precondition=0, lobpcg_max_iter=0, precondtioner_type=1,
                 skip_preconditioning_rank_lt=1, decoupled_learning_rate=True,
                 decoupled_weight_decay=False, generate_training_metrics=True),
            call="optax_shampoo.distributed_shampoo.distributed_shampoo",
            unsupported={
                "batch_axis_name": ((None,), "pmap's data-parallel axis: npoptim runs on one "
                                             "host (each device's roots are the same math)"),
                "statistics_partition_spec": ((None,), "pjit sharding of the statistics: not "
                                                       "a convention of the update"),
                "preconditioner_partition_spec": ((None,), "pjit sharding: not a convention "
                                                           "of the update"),
                "num_devices_for_pjit": ((None,), "pjit sharding: not a convention of the "
                                                  "update"),
                "shard_optimizer_states": ((False,), "sharded (pjit) optimizer states: not a "
                                                     "convention of the update"),
                "best_effort_memory_usage_reduction": (
                    (False,), "int8/int16 quantized momenta and statistics are not "
                              "implemented"),
                "precision": ((None,), "an XLA matmul precision flag (its default is "
                                       "HIGHEST, npoptim's exact products; pass no value)"),
                "tensordot_precision": ((None,), "an XLA matmul precision flag"),
                "lobpcg_topk_precondition": ((0,), "LOBPCG deflation of the top eigenvectors "
                                                   "is not implemented"),
                "lobpcg_max_iter": ((0,), "LOBPCG is not implemented"),
                "precondtioner_type": ((1,), "PreconditionerType.INPUT (one-sided Shampoo) is "
                                             "not implemented; ALL (1) is")},
            elsewhere={"generate_training_metrics": "the root's error and iteration count, "
                                                    "diagnostics only (npoptim keeps none)"},
            notes=("optax-shampoo 0.0.6 needs jax's removed jax.tree_map and "
                   "jax.experimental.pjit names and flax.struct (tests/test_shampoo.py's shim "
                   "gives them); in float64 its init's float32 statistics and preconditioners "
                   "are cast to float64 (its lax.cond between the float32 identity and a "
                   "float64 root fails otherwise). graft_type is GraftingType's number.",)),
        # distributed-kron's kron (not in optax itself: distributed_kron.kron, an optax chain
        # of scale_by_kron, add_decayed_weights and scale_by_learning_rate)
        "kron": FrameworkOptimizer(
            "Kron", {"learning_rate": "lr", "b1": "b1", "weight_decay": "weight_decay",
                     "preconditioner_update_probability": "preconditioner_update_probability",
                     "max_size_triangular": "max_size_triangular",
                     "min_ndim_triangular": "min_ndim_triangular",
                     "memory_save_mode": "memory_save_mode",
                     "preconditioner_lr": "precond_lr",
                     "preconditioner_init_scale": "precond_init_scale",
                     "merge_small_dims": "merge_dims",
                     "target_merged_dim_size": "target_merged_dim_size"},
            dict(learning_rate=0.0003, b1=0.9, weight_decay=0.0, weight_decay_mask=None,
                 preconditioner_update_probability=None, max_size_triangular=8192,
                 min_ndim_triangular=2, memory_save_mode=None, preconditioner_lr=0.1,
                 preconditioner_init_scale=1.0, mu_dtype=None, precond_dtype=None,
                 scanned_layers=None, merge_small_dims=True, target_merged_dim_size=4096,
                 partition_grads_into_blocks=False),
            unsupported={
                "weight_decay_mask": _OPTAX_MASK,
                "mu_dtype": ((None,), "npoptim keeps the momentum in the parameter's dtype"),
                "precond_dtype": ((None,), "npoptim keeps the factors in the parameter's dtype "
                                           "(distributed-kron: float32 unless given)"),
                "scanned_layers": ((None,), "scanned (stacked) layers are not implemented "
                                            "here: one parameter per layer"),
                "partition_grads_into_blocks": ((False,), (
                    "distributed-kron's default True splits each side past block_size (256) "
                    "into blocks with a factor each and pads every side to a multiple of "
                    "block_size (a 4 x 3 parameter gets a 256 x 256 factor, the padding "
                    "fitted to the probe): not implemented here"))},
            elsewhere={name: "the accelerators' matmul precision, memory layout or sharding: "
                             "npoptim's products are in-order float products on one device"
                       for name in ("precond_update_precision", "precond_grads_precision",
                                    "lax_map_scanned_layers", "lax_map_batch_size",
                                    "block_size", "params_partition_specs",
                                    "preconditioner_partition_spec")},
            call="distributed_kron.kron",
            notes=("partition_grads_into_blocks=False (its default is True, see npoptim/optim/"
                   "kron.py); preconditioner_update_probability (max_prob, min_prob, decay, "
                   "flat_start) is distributed_kron.precond_update_prob_schedule(*values), "
                   "null its default; in float64 (jax_enable_x64) precond_dtype="
                   "jax.numpy.float64 (npoptim keeps the factors in the parameter's dtype).",)),
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
                           "npoptim.frameworks.translation._no_warmup); no r",
        "ScheduleFreeAdamW": "the paper's math without warmup (a warmup_steps is refused: see "
                             "npoptim.frameworks.translation._no_warmup); no r",
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
        "Kron": "distributed-kron 2.0.0's distributed_kron.kron: the sides merged into runs "
                "by its dim2loss around target_merged_dim_size 4096 (merge_rule='small_dims': "
                "a small matrix becomes one side), each run diagonal only if all its sides "
                "are; the damped momentum fits the factors but the undamped one is "
                "preconditioned (precondition_damped=False), its sqrt(eps_f32) in float32 "
                "(damping_dtype); the norm plus the dtype's tiny "
                "(norm_floor_mode='added'); balancing in float32, one factor too "
                "(balance_mean='log_float32'); the clip u / max(1, RMS/1.1) (clip_eps 0); "
                "solves in the factors' dtype; weight decay on every parameter "
                "(decay_vectors); the schedule at the count including the step "
                "(schedule_from_one); probes and balancing draws from jax.random key 42 "
                "folded with the count (probe_stream='jax', seed 42); "
                "partition_grads_into_blocks=False only",
        "DPSGD": "npoptim's math (optax.contrib.dpsgd's); the noise is jax.random's normal "
                 "stream from key(seed) as optax splits it (noise_stream='jax'); momentum "
                 "None is 0; lr, l2_norm_clip, noise_multiplier and seed required",
        "Shampoo": "the optax variant: optax-shampoo 0.0.6's distributed_shampoo (not optax's "
                   "own; google-research scalable_shampoo/optax): the count from 0 "
                   "(statistics and roots at the first update), vectors preconditioned, "
                   "optax-shampoo's merge_small_dims (bound 4096), the coupled Newton root to "
                   "1e-6 with its power iteration (RandomState(1729) start), a root whose "
                   "error is >= 0.1 is dropped for the previous one, the decoupled decay "
                   "added to the momentum step (lr^2 lambda with the decoupled lr), "
                   "start_preconditioning_step 5; see npoptim/optim/shampoo.py",
    },
    zero_only={"SGD": {"dampening": "optax trace has no dampening"}},
    verified="CI: tests/test_framework_replay.py replays cases/optax/ through optax (jax, "
             "jax_enable_x64)",
    step_scope=None,
    # optax.contrib.galore takes its SVD in float32 under x64 too
    optimizer_dtypes={"GaLoreAdamW": ("float32",)},
)
