"""Which framework constructor computes a golden case, with which keywords, or why none does.

:func:`constructor_for_case` is decided by npoptim's flavor tables (:mod:`npoptim.flavors`),
not by the framework: the call is built from the case's hyperparameters in the framework's
names (:func:`framework_kwargs`, through :func:`npoptim.frameworks.framework_call`), and the
case is declared skipped, with the reason, when npoptim's own ``from_framework`` of that call
does not give the case's hyperparameters (an option the framework lacks: ``maximize``, L2
decay in Keras, ...), or when it needs what the framework cannot do (CSR gradients; a missing
gradient where the framework has none: optax, ONNX; TF.js computing in float32 only; ONNX's
float32 attributes). ``npoptim check --optax`` / ``--keras`` and tests/test_framework_replay.py
run the frameworks through it.
"""
import numpy as np

from npoptim import flavors, registry
from npoptim.golden import codec, flavor_cases, generate

#: ONNX float attributes are float32; a float64 case runs only if they are exact in float32.
ONNX_ATTRIBUTES = {"Adam": ("alpha", "beta", "epsilon", "norm_coefficient",
                            "norm_coefficient_post"),
                   "Adagrad": ("decay_factor", "epsilon", "norm_coefficient"),
                   "Momentum": ("alpha", "beta", "norm_coefficient")}
#: The onnx flavor's constructors that onnx.reference lacks: onnxruntime-training's AdamW,
#: replayed by examples/framework_replay/ort_training.py (tests/test_ort_training.py).
ORT_ONLY = {"AdamW": "onnxruntime-training's AdamW: examples/framework_replay/ort_training.py"}
#: optax-flavor constructors from another package (an optax transformation outside optax):
#: optax's replay does not build them; the test named replays their cases
OPTAX_ELSEWHERE = {"distributed_shampoo": "optax-shampoo's distributed_shampoo (not optax's "
                                          "own): tests/test_shampoo.py replays its cases "
                                          "through it"}


def framework_kwargs(entry, hyper):
    """The framework call (its names) for npoptim hyperparameters ``hyper``; floats as floats
    (Keras ``SGD(momentum=0)``, an int, raises "must be a float"), ints where the framework's
    default is one (optax sophia's ``update_interval``) or that is a random key's seed (optax
    contrib.dpsgd's required ``seed``)."""
    seeds = {k for k, t in entry.names.items()
             if (t[0] if isinstance(t, tuple) else t) == "seed"}
    return {k: float(v) if type(v) is int and type(entry.defaults.get(k)) is not int
            and k not in seeds else v
            for k, v in flavors.framework_call(entry, hyper).items()}


def _stepless(optimizer):
    """No step count (``step_in_state_dict`` None): the step scope changes nothing."""
    return registry.get(optimizer).step_in_state_dict is None


def constructor_for_case(flavor, case, use_switches=True, only=None):
    """``(framework name, kwargs)`` of the framework's constructor that computes ``case``, or
    ``(None, reason)``. With ``use_switches=False`` the case's hyperparameters are translated
    name by name, whatever their conventions (how a user would replay a torch case). ``only``:
    the one constructor (its table name) to consider, the one a user gives."""
    if "csr" in case.tags:
        return None, f"{flavor} takes dense gradients only"
    if flavor == "tfjs" and case.dtype != "float32":
        return None, "tfjs's CPU backend computes in float32 only"
    if "none-grad" in case.tags and flavors.get(flavor).step_scope != "global":
        return None, (f"{flavor} has no missing gradient (a zero gradient is a step, or the "
                      "caller passes the step count): npoptim.flavors.Flavor.step_scope")
    hyper = codec.from_json_hyper(case.hyperparameters)
    tried = []
    for name, entry in flavors.get(flavor).constructors.items():
        if entry.npoptim != case.optimizer or only is not None and name != only:
            continue
        if flavor == "onnx" and name in ORT_ONLY:
            tried.append(ORT_ONLY[name])
            continue
        if flavor == "optax" and name in OPTAX_ELSEWHERE:
            tried.append(OPTAX_ELSEWHERE[name])
            continue
        kwargs = framework_kwargs(entry, hyper)
        if not use_switches:
            return name, kwargs
        try:
            built = flavors.from_framework(flavor, name, flavor_cases.probe(), **kwargs)
        except (TypeError, ValueError) as exc:
            tried.append(f"{name}: {exc}")
            continue
        resolved = generate.hyperparameters(built)
        differ = sorted(k for k in set(resolved) | set(case.hyperparameters)
                        if resolved.get(k) != case.hyperparameters.get(k)
                        # without a missing gradient, or without a step count, both step
                        # scopes give the same steps
                        and not (k == "step_scope" and ("none-grad" not in case.tags
                                                        or _stepless(case.optimizer))))
        if not differ and flavor == "onnx" and case.dtype == "float64":
            inexact = [k for k in ONNX_ATTRIBUTES[name] if k in kwargs
                       and float(np.float32(kwargs[k])) != float(kwargs[k])]
            if inexact:
                return None, ("ONNX float attributes are float32: "
                              f"{', '.join(inexact)} not exact in float32")
        if not differ:
            return name, kwargs
        tried.append(f"{name} cannot express {', '.join(differ)}")
    return None, "; ".join(tried) or f"{flavor} has no {case.optimizer}" + (
        f" through {only}" if only else "")
