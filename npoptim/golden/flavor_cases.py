"""The flavor cases, ``reference_results/cases/<flavor>/<Optimizer>.json``: rows of the torch
table (:data:`npoptim.golden.cases.TABLE`) computed in another framework's conventions
(:mod:`npoptim.flavors`), kept only where those conventions change the math.

For each generated flavor and each optimizer it has:

* ``<flavor>/defaults``: the framework's own defaults (``Adam(params, flavor="keras")``: eps
  1e-7, ...), the "framework defaults" case;
* ``<flavor>/<row>`` for each torch row the framework can express: the torch case's
  hyperparameters and inputs (the same seed) with the flavor's convention switches, so that it
  differs from the torch case by the conventions only.

Every case's comment ends with the framework call that computes it (its constructor, and what
it needs beyond ``framework_hyperparameters``: :meth:`npoptim.flavors.Flavor.call_statement`).

A case is kept only if the torch case of the same row would fail it (the conventions change
the result beyond the tolerance); otherwise the framework is expected to pass the torch case
itself. A row is left out where the framework cannot express it: an option no constructor of
the framework names (``maximize``, ``lr_decay``, ``dampening``, ...), a value the flavor refuses
(:attr:`npoptim.flavors.Flavor.zero_only`: Keras SGD's dampening), CSR gradients, missing
gradients (``none-grad``) where the framework has none (:attr:`npoptim.flavors.Flavor.step_scope`
None: optax, ONNX, the TF kernels; Keras and TF.js have them, with a global step count), and
float64 where the framework holds a hyperparameter as float32 that is not exact
there (ONNX attributes; the ``f32-exact`` rows are). :data:`FLAVOR_ROWS` adds rows of a
flavor for a hyperparameter torch lacks (ONNX's ``norm_coefficient_post``, onnxruntime's
``bias_correction``). An optimizer may have fewer dtypes than its flavor
(:meth:`npoptim.flavors.Flavor.dtypes_of`: onnxruntime's AdamW is float32 only). Case ids are
``"<Optimizer>/<flavor>/<row>/<dtype>"``.
"""
import dataclasses

import numpy as np

from npoptim import flavors, registry
from npoptim.golden import cases
from npoptim.golden.compare import compare_case
from npoptim.golden.generate import build_case, hyperparameters
from npoptim.golden.inputs import case_seed
from npoptim.golden.replay import results_file
from npoptim.golden.schema import parse

#: The flavors whose cases are generated and checked against the framework in CI.
GENERATED = ("keras", "optax", "onnx", "tfjs")

#: Rows of a flavor that no torch row has, for a hyperparameter torch lacks; their cases have
#: no torch counterpart, except a row named as a torch row of its optimizer: that row's *twin*
#: (its inputs, seed and objective; the torch case must fail it), for a framework that computes
#: the row's problem in its own way (optax.lbfgs: one iteration per update, its zoom line
#: search). Names as in the torch table (``<flavor>/`` is prefixed).
FLAVOR_ROWS = {
    "onnx": {"Adam": (cases.Row(
        "Adam", "post-weight-decay", "ONNX Adam's norm_coefficient_post (npoptim "
        "post_weight_decay): x <- (1 - c) x after the update; with L2 decay "
        "(norm_coefficient) too; hyperparameters exact in float32.",
        dict(lr=2.0 ** -7, betas=(0.875, 0.9990234375), eps=2.0 ** -20,
             weight_decay=2.0 ** -4, post_weight_decay=2.0 ** -5), flavor="onnx"),),
             # the accumulator's square root with no epsilon (ONNX's default is 1e-6, not exact
             # in float32: its defaults case would be float32 only and within torch's tolerance)
             "Adagrad": (cases.Row(
                 "Adagrad", "eps-zero", "ONNX Adagrad with epsilon=0 (the schema's default is "
                 "1e-6): X <- X - R G / sqrt(H), torch's defaults otherwise; float64 "
                 "(every attribute exact in float32).", dict(lr=1e-2, eps=0.0),
                 dtypes=("float64",), flavor="onnx"),),
             "AdamW": (cases.Row(
                 "AdamW", "no-bias-correction", "onnxruntime-training's AdamW with "
                 "bias_correction=False (correct_bias=0: b1 = b2 = 1), the decoupled decay after "
                 "the update; float32 (its kernel's only dtype).",
                 dict(lr=1e-2, weight_decay=0.1, bias_correction=False), dtypes=("float32",),
                 flavor="onnx"),)},
    "keras": {"Muon": (
        cases.Row("Muon", "rms-rate-none", "Keras Muon's rms_rate=None: no lr scale (npoptim "
                  "rms_rate=None), a wide and a tall matrix, without nesterov.",
                  dict(lr=1e-2, rms_rate=None, nesterov=False), shapes=((2, 4), (4, 2)),
                  steps=10, flavor="keras"),
        cases.Row("Muon", "rms-rate-coefficients", "Keras Muon's rms_rate 0.3, muon_a/b/c "
                  "(3.4, -4.7, 2.0), ns_steps 4, momentum 0.8, on a tall matrix.",
                  dict(lr=1e-2, rms_rate=0.3, ns_coefficients=(3.4, -4.7, 2.0), ns_steps=4,
                       momentum=0.8), shapes=((5, 3),), steps=10, flavor="keras")),
        # torch's Adafactor rows mostly leave eps1 None (the dtype's epsilon), which neither
        # framework can write: these rows give eps1 (1e-30, their default) explicitly
        "Adafactor": (
        cases.Row("Adafactor", "decay-schedule", "Keras's weight decay before the rule (the "
                  "relative step reads the decayed parameter) under an lr schedule; a vector, "
                  "a matrix and a 3-D parameter.",
                  dict(lr=1e-2, weight_decay=0.1, eps=(1e-30, 1e-3)),
                  shapes=((5,), (3, 4), (2, 2, 3)), steps=10, schedule="warmup-cosine",
                  flavor="keras"),
        cases.Row("Adafactor", "null-and-zero-grads-eps1", "Missing and all-zero gradients: the "
                  "global step ages a variable left out; epsilon_1 keeps a zero gradient's "
                  "update finite.", dict(lr=1e-2, eps=(1e-30, 1e-3)), shapes=cases.MIXED,
                  grads="dense-none-zero", steps=10, flavor="keras"),)},
    "optax": {"Adafactor": (
        cases.Row("Adafactor", "momentum-decay-schedule", "optax's momentum (float32 "
                  "buffer) and weight_decay_rate added to the scaled update under an lr "
                  "schedule; a vector and a matrix (unfactored: below 128).",
                  dict(lr=1e-2, momentum=0.9, weight_decay=0.05), shapes=((5,), (3, 4)),
                  steps=10, schedule="warmup-cosine", flavor="optax"),
        cases.Row("Adafactor", "absolute-step-factored", "multiply_by_parameter_scale=False, "
                  "clipping 1.5, decay_rate 0.5 with decay_offset -2, and "
                  "min_dim_size_to_factor 3: a 4x3x5 parameter factored over its two largest "
                  "dimensions (axes 0 and 2).",
                  dict(lr=1e-2, parameter_scale=False, d=1.5, beta2_decay=-0.5,
                       decay_offset=-2, min_dim_size_to_factor=3),
                  shapes=((4, 3, 5), (3, 4)), steps=10, flavor="optax"),),
        "LBFGS": (
        cases.Row("LBFGS", "strong-wolfe", "optax.lbfgs(memory_size=5) on the strong-wolfe "
                  "row's problem: one L-BFGS iteration per update with optax's zoom line search "
                  "(scale_by_zoom_linesearch(max_linesearch_steps=20, initial_guess_strategy="
                  "'one'), npoptim line_search_fn='zoom').",
                  dict(lr=1.0, history_size=5), shapes=((3, 5), (4,)),
                  objective="separable-quartic", dtypes=("float64",),
                  tolerance=cases.LBFGS_TOLERANCE, flavor="optax",
                  matches=("optax.lbfgs 0.2.8 (scale_by_zoom_linesearch)",)),
        cases.Row("LBFGS", "short-history", "optax.lbfgs(learning_rate=0.5, memory_size=2) on "
                  "the short-history row's problem, the zoom line search with its Wolfe "
                  "constants changed (slope_rtol 0.3, curv_rtol 0.1: the zoom interpolates) and "
                  "at most 3 steps (max_linesearch_steps: some searches end on the fallback).",
                  dict(lr=0.5, history_size=2, slope_rtol=0.3, curv_rtol=0.1,
                       max_linesearch_steps=3), shapes=((6,),), objective="separable-quartic",
                  dtypes=("float64",), tolerance=cases.LBFGS_TOLERANCE, flavor="optax",
                  matches=("optax.lbfgs 0.2.8 (scale_by_zoom_linesearch)",)),
    ),
        # optax's galore is float32 only (its SVD is float32 under x64 too); the torch row's
        # case (the authors' form) fails through optax
        "GaLoreAdamW": (
        cases.Row("GaLoreAdamW", "tall-wide-vector", "optax.contrib.galore(rank=1, "
                  "update_proj_gap=6, scale=0.5, weight_decay=0.1) on a tall (3x2), a wide "
                  "(2x3) and a square (2x2) matrix and a vector, under warmup + cosine: the "
                  "larger side projected (tall and square from the left), the float32 SVD "
                  "with LAPACK gesdd's signs (jax's: scipy's LAPACK), refreshed at steps 1, 7, "
                  "13 and 19 with the moments carried over; optax's Adam (eps 1e-8 on "
                  "sqrt(v_hat)) in the subspace, and on the vector's full gradient without "
                  "the scale; the decoupled decay added to the update before the lr (on the "
                  "parameter before the step).",
                  dict(lr=1e-2, rank=1, update_proj_gap=6, scale=0.5, weight_decay=0.1),
                  shapes=((3, 2), (2, 3), (2, 2), (2,)), steps=20, schedule="warmup-cosine",
                  dtypes=("float32",), flavor="optax", flags=("lapack-svd",),
                  matches=("optax.contrib.galore 0.2.8",)),
    ),
        # the noise of optax's own stream: jax.random's normals from key(seed), split per step
        # and per parameter as optax splits them (npoptim noise_stream="jax"); float64 only and
        # tiny (the size budget): float32's normals are checked in tests/test_jax_random.py
        "NoisySGD": (
        cases.Row("NoisySGD", "jax-stream", "optax.noisy_sgd(key=7): its noise is jax.random's "
                  "stream from key 7 (npoptim noise_stream='jax', seed 7), eta 0.3, gamma 0.55, "
                  "two parameters, under warmup + cosine.",
                  dict(lr=1e-2, eta=0.3, seed=7), shapes=((3,), (2,)), steps=20,
                  schedule="warmup-cosine", dtypes=("float64",), flavor="optax",
                  matches=("optax.noisy_sgd 0.2.8",)),),
        "DPSGD": (
        cases.Row("DPSGD", "jax-stream", "optax.contrib.dpsgd(seed=5): per-example gradients "
                  "(batch 4) clipped to a global norm 2, noise multiplier 0.5 from jax.random's "
                  "stream from key 5 (npoptim noise_stream='jax'), two parameters, under warmup "
                  "+ cosine (its momentum is checked against optax in tests/test_dpsgd.py).",
                  dict(lr=0.05, l2_norm_clip=2.0, noise_multiplier=0.5, seed=5),
                  shapes=((2,), (1,)), grads="per-example", steps=20, schedule="warmup-cosine",
                  dtypes=("float64",), flavor="optax",
                  matches=("optax.contrib.dpsgd 0.2.8",)),)},
}

#: flavor -> {optimizer: why}: optimizers whose flavor cases are their :data:`FLAVOR_ROWS` only
#: (no framework-defaults case, no case from a torch row): every torch row would differ by its
#: noise alone, one small case per optimizer shows the stream, and the size budget is small.
OWN_ROWS_ONLY = {"optax": {
    "NoisySGD": "the noise stream is the only change: one small case (FLAVOR_ROWS)",
    "DPSGD": "the noise stream is the only change: one small case (FLAVOR_ROWS)"}}


def probe():
    """The parameters an optimizer is built on to read its hyperparameters: one 1x1 matrix
    (Muon takes 2-D parameters only; the others any shape)."""
    return [np.zeros((1, 1))]


def expressible(flavor, optimizer):
    """npoptim keywords some constructor of the framework sets for ``optimizer``."""
    names = {"lr"}
    for entry in flavors.get(flavor).constructors.values():
        if entry.npoptim != optimizer:
            continue
        names |= {t[0] if isinstance(t, tuple) else t for t in entry.names.values()}
        names |= set(entry.fixed)
    return names


#: (flavor, optimizer) -> the tolerance of its cases from torch rows, where the flavor takes
#: away the reason for the rows' own: Keras's Muon orthogonalizes in the parameter's dtype
#: (``ns_dtype="param"``), not in torch's bfloat16 (``cases.MUON_TOLERANCE``), so the defaults;
#: so does optax.contrib.muon.
FLAVOR_TOLERANCE = {("keras", "Muon"): None, ("optax", "Muon"): None}


def optimizers(flavor):
    """The optimizers with flavor cases: those whose switches the flavor sets or whose
    defaults it changes, and that have rows and no variants (variants have their own rows),
    or whose default form is torch's (Muon: torch's form is its default, Keller Jordan's a
    variant with rows of its own)."""
    return [name for name in flavors.get(flavor).switches
            if name in cases.TABLE and (not registry.variants(name)[0]
                                        or registry.OPTIMIZERS[name][1] is not None)]


def candidate_rows(flavor, optimizer):
    """``(row, torch_row)``: the flavor's rows of ``optimizer`` before the "changes the math"
    test; ``torch_row`` is the row whose case it is compared with (None for defaults)."""
    framework = flavors.get(flavor).framework.split(" (")[0]
    torch_defaults = next((r for r in cases.TABLE[optimizer] if r.name == "defaults"), None)
    out = []
    if optimizer in OWN_ROWS_ONLY.get(flavor, {}):
        return [(_with_call(flavor, dataclasses.replace(row, name=f"{flavor}/{row.name}")),
                 None) for row in FLAVOR_ROWS[flavor][optimizer]]
    if torch_defaults is not None:  # (an optimizer without a defaults row has no such case)
        row = cases.Row(optimizer, f"{flavor}/defaults", f"{framework}'s defaults for "
                        f"{optimizer} (npoptim {optimizer}(params, flavor={flavor!r})).", {},
                        flavor=flavor)
        row = dataclasses.replace(row, hyper=_required_lr(flavor, optimizer, torch_defaults))
        cls = registry.get(optimizer)
        if (hyperparameters(cls(probe(), flavor=flavor, **row.hyper))
                != hyperparameters(cls(probe(), **torch_defaults.hyper))):
            out.append((row, None))  # (the same defaults: torch's defaults case is the case)
    switch_keys = set(flavors.get(flavor).switches.get(optimizer, {}))
    allowed = expressible(flavor, optimizer) | switch_keys  # a switch's row is the flavor's
    cls = registry.get(optimizer)
    for row in cases.TABLE[optimizer]:
        if row.name == "defaults" or row.grads.startswith("csr"):
            continue
        if "none" in row.grads and flavors.get(flavor).step_scope != "global":
            continue  # a framework without missing gradients (see Flavor.step_scope)
        if set(row.hyper) - allowed:
            continue
        resolved = hyperparameters(cls(probe(), **row.hyper))
        hyper = {k: tuple(v) if isinstance(v, list) else v for k, v in resolved.items()
                 if k not in switch_keys and k not in getattr(cls, "torch_conventions", {})}
        try:
            cls(probe(), flavor=flavor, **hyper)
        except ValueError:  # a value the flavor refuses (see Flavor.zero_only)
            continue
        if not any(all(hyper.get(k, v) == v for k, v in entry.fixed.items())
                   for entry in flavors.get(flavor).constructors.values()
                   if entry.npoptim == optimizer):
            continue  # a value the framework fixes (tfjs Adagrad's eps 1e-7)
        if not _framework_builds(flavor, optimizer, hyper):
            continue  # a value the framework cannot write (Keras's epsilon_1=None)
        out.append((dataclasses.replace(row, name=f"{flavor}/{row.name}", hyper=hyper,
                                        flavor=flavor, matches=(), tolerance=FLAVOR_TOLERANCE.get(
                                            (flavor, optimizer), row.tolerance)), row))
    twins = {row.name: row for row in cases.TABLE[optimizer]}
    out += [(dataclasses.replace(row, name=f"{flavor}/{row.name}"), twins.get(row.name))
            for row in FLAVOR_ROWS.get(flavor, {}).get(optimizer, ())]
    return [(_with_call(flavor, row), twin) for row, twin in out]


def _with_call(flavor, row):
    """``row`` with its comment ending in the framework call that computes it
    (:meth:`npoptim.flavors.Flavor.call_statement`: the constructor, what the call needs beyond
    the case's ``framework_hyperparameters``), so a framework's user can run the case from the
    file alone."""
    hyper = hyperparameters(registry.get(row.optimizer)(probe(), flavor=flavor, **row.hyper))
    statement = flavors.get(flavor).call_statement(row.optimizer, hyper)
    return dataclasses.replace(row, comment=f"{row.comment} {statement}".strip())


def _framework_builds(flavor, optimizer, hyper):
    """Does some constructor of the framework, called with ``hyper`` in its names, build the
    optimizer ``Opt(params, flavor=flavor, **hyper)``? (No for a value it cannot write: a
    None it takes as a number, a half of a pair it does not name.) Only the optimizers whose
    rows leave such values are asked (:data:`FRAMEWORK_CHECKED`)."""
    if optimizer not in FRAMEWORK_CHECKED:
        return True
    want = hyperparameters(registry.get(optimizer)(probe(), flavor=flavor, **hyper))
    for name, entry in flavors.get(flavor).constructors.items():
        if entry.npoptim != optimizer:
            continue
        try:
            built = flavors.from_framework(flavor, name, probe(),
                                           **flavors.framework_call(entry, hyper))
        except (TypeError, ValueError):
            continue
        if hyperparameters(built) == want:
            return True
    return False


#: The optimizers whose torch rows hold values a framework cannot write (Adafactor's eps1
#: None, its eps2 beside optax's eps): their flavor rows are kept only where it can.
FRAMEWORK_CHECKED = ("Adafactor",)


def _required_lr(flavor, optimizer, torch_defaults):
    """``{"lr": ...}`` of the torch defaults row where the framework has no default lr
    (optax's ``learning_rate`` is required): a framework without one does not change it."""
    entry = flavors.get(flavor).constructor_for(optimizer)
    required = entry is not None and any(
        target == "lr" and entry.defaults.get(name) is flavors.REQUIRED
        for name, target in entry.names.items())
    return {"lr": torch_defaults.hyper["lr"]} if required and "lr" in torch_defaults.hyper else {}


def build_flavor_cases(flavor, optimizer):
    """The kept cases (JSON-ready dicts) of one flavor and optimizer."""
    kept = []
    for row, torch_row in candidate_rows(flavor, optimizer):
        base = torch_row or next((r for r in cases.TABLE[optimizer] if r.name == "defaults"),
                                 None)
        for dtype in row.dtypes:
            if dtype not in flavors.get(flavor).dtypes_of(optimizer) or (
                    dtype == "float64" and not _exact_in_float32(flavor, row)):
                continue
            if base is None:  # a flavor row of an optimizer without a defaults row: kept
                kept.append(build_case(row, dtype, seed=case_seed(
                    f"{optimizer}/{row.name}/{dtype}")))
                continue
            torch_id = f"{optimizer}/{base.name}/{dtype}"
            case = build_case(row, dtype, seed=case_seed(torch_id))
            reference = build_case(base, dtype)
            if _same_within_tolerance(case, reference):
                continue
            kept.append(case)
    return kept


def _exact_in_float32(flavor, row):
    """False if the framework holds a hyperparameter as float32 that is not exact there
    (such a float64 case would fail a correct implementation of that framework)."""
    hyper = hyperparameters(registry.get(row.optimizer)(probe(), flavor=flavor,
                                                        **row.hyper))
    for name in flavors.get(flavor).float32_hyperparameters:
        values = hyper.get(name, ())
        for value in values if isinstance(values, (tuple, list)) else (values,):
            if isinstance(value, float) and float(np.float32(value)) != value:
                return False
    return True


def _same_within_tolerance(case, reference):
    """Would the reference's trajectory pass ``case``? (same inputs, other conventions)."""
    if len(case["params"]) != len(reference["params"]) or case["params"] != reference["params"]:
        return False
    doc = {"schema": "npoptim-golden", "schema_version": 2, "kind": "cases",
           "notes": {f: {"description": f} for f in set(case["flags"]) | set(reference["flags"])},
           "cases": [case]}
    parsed = parse(doc, "<flavor>", "cases").cases[0]
    got = {"id": case["id"], "steps": [{"params": s["expected"]["params"]}
                                       for s in reference["steps"]]}
    result = parse(results_file([got]), "<torch>", "results").cases[0]
    return compare_case(parsed, result, "<torch>").passed
