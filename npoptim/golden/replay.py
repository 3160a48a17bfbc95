"""Replay golden cases through npoptim or any step function: what ``npoptim verify``
(:mod:`npoptim.golden.compare`), :mod:`npoptim.testing` and :mod:`npoptim.diagnose` run.

* :func:`replay` runs a loaded :class:`~npoptim.golden.schema.Case` through a step function and
  returns the results in the schema's ``"results"`` form; :func:`results_file` wraps them into
  a ``"results"`` golden file.
* :func:`npoptim_make_step` is the step function of npoptim itself, for every kind of case: a
  float case, a wrapper's (its ``wrapped`` optimizer inside) and a 16-bit or quantized-state
  case (its ``precision`` object: :func:`make_optimizer` builds the
  :mod:`npoptim.precision` optimizer it names).
* :func:`wrapper_state` reads a wrapper's own state as the schema stores it (generating a
  case records it the same way);
* :class:`Refused`: what a step function raises for a case its implementation cannot run
  (``npoptim check`` then reports the case skipped, with the reason).

Building cases is :mod:`npoptim.golden.generate`'s (and the case modules'); this module
imports none of them.
"""
import numpy as np

from npoptim import registry
from npoptim.golden import codec, inputs, schema

#: quantized-state mode (the ``precision`` object's ``quantization``) -> the suffix of its
#: npoptim.precision class (``AdamW`` + ``8bit``: torchao's ``AdamW8bit``)
QUANTIZATIONS = dict(zip(schema.QUANTIZATIONS, ("8bit", "4bit", "Fp8", "8bit")))
#: the prefix of a quantized mode's class name, when it has one (``BnbAdamW8bit``)
QUANTIZATION_PREFIXES = {"bnb-8bit": "Bnb"}


class Refused(Exception):
    """A step function's implementation refuses the case (the message is the reason)."""


# ------------------------------------------------------------------------ npoptim's steps
def npoptim_make_step(name, precision=None, wrapped=None):
    """npoptim's own ``make_step`` (see :func:`replay`) for the optimizer called ``name``;
    with a case's ``precision`` object, its 16-bit or quantized form (:func:`make_optimizer`);
    for a wrapper, with the case's ``wrapped`` object: the wrapped optimizer built on the
    parameters, wrapped (its ``step`` also returns the wrapper's state)."""
    if precision is not None:
        return _precision_make_step(name, precision)
    if registry.is_wrapper(name) != (wrapped is not None):
        raise ValueError(f"{name} is a wrapper: its case needs a 'wrapped' optimizer" if
                         wrapped is None else f"{name} is not a wrapper; only a wrapper's "
                                              "case has a 'wrapped' optimizer")
    if wrapped is not None:
        if registry.is_wrapper(wrapped["optimizer"]):
            raise ValueError(f"{name} wraps {wrapped['optimizer']}, a wrapper: npoptim's "
                             "golden cases wrap one optimizer once")
        wrapped_cls = registry.get(wrapped["optimizer"])
        wrapped_hyper = codec.from_json_hyper(wrapped["hyperparameters"])
    cls = registry.get_wrapper(name) if wrapped is not None else registry.get(name)

    def make_step(params, hyper):
        if wrapped is not None:
            inner = wrapped_cls(params, **wrapped_hyper)
            opt = cls(inner, **hyper)
        else:
            inner = opt = cls(params, **hyper)

        def step(grads, lr):
            for group in opt.param_groups:
                group["lr"] = lr
            if callable(grads):  # a closure: the case has an objective
                opt.step(closure=grads)
            else:
                opt.step([codec.optimizer_grad(g) for g in grads])
            state = inner.state_dict()["state"]
            state = [state.get(i) for i in range(len(params))]
            if wrapped is not None:
                return params, state, wrapper_state(opt)
            return params, state
        return step
    return make_step


def _precision_make_step(name, precision):
    """npoptim's ``make_step`` for a case with a ``precision`` object."""
    def make_step(params, hyper):
        opt, inner = make_optimizer(name, params, hyper, precision)
        groups = (inner or opt).param_groups

        def step(grads, lr):
            for group in groups:
                group["lr"] = lr
            if callable(grads):  # a closure: the case has an objective (LBFGS)
                opt.step(closure=grads)
            else:
                opt.step(list(grads))
            state = (inner or opt).state_dict()["state"]
            return params, [state.get(i) for i in range(len(params))]
        return step
    return make_step


def wrapper_state(wrapper):
    """A wrapper's own state (the schema's ``wrapper_state``): the float arrays and lists of
    arrays of its ``state_dict()`` besides the wrapped optimizer's, or None without any."""
    out = {k: v for k, v in wrapper.state_dict().items() if k != "optimizer" and (
        isinstance(v, np.ndarray) and v.dtype.kind == "f"
        or isinstance(v, list) and v and all(isinstance(a, np.ndarray) for a in v))}
    return out or None


# ------------------------------------------------------------- the 16-bit cases' classes
def mode_of(precision):
    """The mode of a case's ``precision`` object (the modes are
    :data:`npoptim.golden.precision_cases.MODES`)."""
    if precision.get("quantization") is not None:
        return precision["quantization"]
    if precision["kahan"]:
        return "kahan"
    if precision["master_weights"] is not None:
        return "master-weights"
    return precision["rounding"]


def make_optimizer(name, params, hyper, precision):
    """The npoptim optimizer of a 16-bit case: ``(optimizer, float optimizer)``; the second is
    the float32 optimizer behind master weights (whose state the case records), else None."""
    import npoptim.precision as lowp
    mode = mode_of(precision)
    if mode == "master-weights":
        cls = registry.get(name)
        master = lowp.MasterWeights(params, lambda ps: cls(ps, **hyper),
                                    dtype=np.dtype(precision["master_weights"]))
        return master, master.optimizer
    if mode == "kahan":
        cls = getattr(lowp, "Kahan" + name, None)
        if cls is None:
            raise ValueError(f"npoptim.precision has no Kahan-compensated {name}")
        return cls(params, **hyper), None
    if mode in QUANTIZATIONS:
        return quantized_class(name, mode)(params, **hyper), None
    cls = getattr(lowp, name, None)
    if cls is None:
        raise ValueError(f"npoptim.precision has no 16-bit {name}")
    seed = {"seed": precision["seed"]} if mode == "stochastic" else {}
    return cls(params, rounding=precision["rounding"], **seed, **hyper), None


def quantized_class(name, mode):
    """The npoptim.precision class of ``name`` (Adam, AdamW) with a quantized ``mode``."""
    import npoptim.precision as lowp
    cls = getattr(lowp, QUANTIZATION_PREFIXES.get(mode, "") + name + QUANTIZATIONS[mode], None)
    if cls is None:
        raise ValueError(f"npoptim.precision has no {mode} {name}")
    return cls


# ------------------------------------------------------------------------------ replaying
def replay(case, make_step, grad_format="csr"):
    """Run ``case`` through a step function; return its ``"results"`` entry (JSON-ready).

    ``make_step(params, hyperparameters)`` gets fresh copies of the initial parameters and the
    hyperparameters (tuples for pairs) and returns ``step(grads, lr)``, which applies one step
    and returns the parameters (a list of arrays; None for "the arrays I was given, updated
    in place") or ``(params, state)`` with ``state`` a list with one dict (or None) per
    parameter in torch's state names, or ``(params, state, wrapper_state)`` for a wrapper case
    (``wrapper_state``: a dict name -> array or list of arrays, or None). A wrapper case's
    ``make_step`` gets the wrapper's hyperparameters; the wrapped optimizer is
    ``case.wrapped``. Gradients are dense arrays, None, and CSR gradients as
    ``grad_format`` says: ``"csr"`` (a ``scipy.sparse.csr_array`` with the entries exactly as
    stored: duplicates, order, zeros), ``"dense"`` (duplicates summed, absent entries zero),
    or ``"raw"`` (:class:`~npoptim.golden.codec.CsrGrad`). For a case with an ``objective``
    (closure-driven optimizers such as LBFGS) ``step`` receives a closure instead of the
    gradients: ``closure()`` returns ``(loss, grads)`` at the arrays given to ``make_step``
    (so the step function must update them in place, as torch and npoptim do).
    """
    if grad_format not in ("csr", "dense", "raw"):
        raise ValueError(f"grad_format must be 'csr', 'dense' or 'raw', got {grad_format!r}")
    params = [p.copy() for p in case.params]
    step_fn = make_step(params, codec.from_json_hyper(case.hyperparameters))
    steps = []
    for t, step in enumerate(case.steps):
        if case.objective is not None:
            def grads(params=params):
                return inputs.evaluate_objective(case.objective, params)
        else:
            grads = [_grad_as(g, grad_format, case.params[i].shape)
                     for i, g in enumerate(step.grads)]
        out = step_fn(grads, step.lr)
        state = own = None
        if isinstance(out, tuple) and len(out) in (2, 3) and not isinstance(out[0], np.ndarray):
            out, state, own = out if len(out) == 3 else (*out, None)
        current = params if out is None else list(out)
        entry = {"params": [codec.encode_array(np.asarray(p)) for p in current]}
        if state is not None:
            state = dict(enumerate(state)) if isinstance(state, (list, tuple)) else state
            entry["state"] = codec.encode_state(
                {i: s for i, s in state.items() if s is not None}, len(current))
        if own:
            entry["wrapper_state"] = {k: codec.encode_state_value(v) for k, v in own.items()}
        steps.append(entry)
    return {"id": case.id, "steps": steps}


def _grad_as(g, grad_format, shape):
    if not isinstance(g, codec.CsrGrad):
        return None if g is None else g.copy()
    if grad_format == "csr":
        return g.to_scipy()
    if grad_format == "dense":
        return g.to_dense(shape)
    return g


def results_file(results, implementation="npoptim"):
    """A ``"results"`` golden file from :func:`replay` entries.

    Parameters
    ----------
    results : list of dict
        the entries :func:`replay` returned, one per case.
    implementation : str, default: 'npoptim'
        the name the file gives the implementation.
    """
    half = any(p.get("dtype") in codec.HALF_DTYPES for r in results
               for s in r.get("steps", ()) for p in s["params"])
    wrapper = any(s.get("wrapper_state") for r in results for s in r.get("steps", ()))
    return {"schema": schema.SCHEMA_NAME, "schema_version": 4 if wrapper else 3 if half else 2,
            "kind": "results",
            "implementation": implementation, "cases": list(results)}
