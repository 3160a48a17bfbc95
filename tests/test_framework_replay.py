"""The flavors against the frameworks themselves: each flavor's golden cases replayed through the
real framework, as its users run it, must pass ``npoptim verify``; the torch cases the flavor
overrides must fail through the same framework (the switches matter).

* optax: :func:`npoptim.check.optax.make_step` (``optax.<name>`` in
  ``optax.inject_hyperparams``, the lr injected per step; what ``npoptim check --optax`` runs).
* Keras 3 on the JAX backend in float64: :func:`npoptim.check.keras.make_step`
  (``keras.optimizers.<Name>(**framework_hyperparameters)``, ``opt.learning_rate = lr``,
  ``opt.apply_gradients``; what ``npoptim check --keras`` runs).
* ONNX (``onnx.reference``) and TF.js (Node) through this file's runners.

Which cases a framework runs is decided by npoptim's flavor tables, not by this file
(:func:`npoptim.check.constructors.constructor_for_case`, which says why a case is skipped).
Keras leaves a variable out of ``apply_gradients``, TF.js gives it a null entry in
``applyGradients``, and both age the global step, npoptim's ``step_scope="global"``. Known
framework bugs are expected failures listed in npoptim/frameworks/framework_known_bugs.json
(:mod:`npoptim.frameworks.known_bugs`), on the call path an entry names (``call_path``: tfjs's
state by position shows only with a variable left out of ``applyGradients``, which
:func:`test_tfjs_loses_track_of_state_only_with_a_variable_left_out` replays; a tfjs replay
that crashes on a bug reports NaN parameters from the step it crashed in, and the error).

Skips cleanly without the framework; ``NPOPTIM_REQUIRE_OPTAX=1`` / ``NPOPTIM_REQUIRE_KERAS=1``
(set by .ci/run) make a missing one fail the session instead (tests/conftest.py).
"""
import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest

from npoptim import flavors
from npoptim.check import keras as keras_check
from npoptim.check import optax as optax_check
from npoptim.check.constructors import ONNX_ATTRIBUTES, ORT_ONLY, constructor_for_case
from npoptim.frameworks.known_bugs import BUGS, known_bug
from npoptim.frameworks.tfjs import POSITIONAL
from npoptim.golden import codec, compare, verify as verification
from npoptim.golden.replay import replay, results_file
from npoptim.golden.schema import load_all, parse

os.environ.setdefault("KERAS_BACKEND", "jax")  # before anything imports keras

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "reference_results"
#: Keras warns for each variable left out of apply_gradients (the none-grad cases do it).
pytestmark = pytest.mark.filterwarnings("ignore:Gradients do not exist:UserWarning")


def keras_make_step(name, kwargs):
    """:func:`npoptim.check.keras.make_step` of ``keras.optimizers.<name>``."""
    import keras
    return keras_check.make_step(getattr(keras.optimizers, name), kwargs)


#: The step count input T at the first step, per ONNX operator (as the cases' notes say): 1 for
#: Adam (at T=0 it skips the bias correction), 0 for Adagrad and Momentum.
ONNX_FIRST_T = {"Adam": 1, "Adagrad": 0, "Momentum": 0}


def onnx_make_step(name, kwargs, first_t=None):
    """One ``ai.onnx.preview.training`` node per parameter (the single-tensor form; the
    reference's multi-tensor Adam casts to float32), run by ``onnx.reference``. T counts from
    ``first_t`` (default :data:`ONNX_FIRST_T`)."""
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    slots = {"Adam": ("V", "H"), "Adagrad": ("H",), "Momentum": ("V",)}[name]
    attributes = {k: kwargs[k] for k in ONNX_ATTRIBUTES[name] if k in kwargs}
    if name == "Momentum":
        attributes["mode"] = kwargs["mode"]

    def evaluator(dtype, shape):
        elem = TensorProto.DOUBLE if dtype == np.float64 else TensorProto.FLOAT
        names = ["R", "T", "X", "G", *slots]
        kinds = {"T": TensorProto.INT64}
        inputs = [helper.make_tensor_value_info(n, kinds.get(n, elem),
                                                [] if n in ("R", "T") else list(shape))
                  for n in names]
        outputs = [helper.make_tensor_value_info(n + "_new", elem, list(shape))
                   for n in ["X", *slots]]
        node = helper.make_node(name, names, [o.name for o in outputs],
                                domain="ai.onnx.preview.training", **attributes)
        graph = helper.make_graph([node], name, inputs, outputs)
        model = helper.make_model(graph, opset_imports=[
            helper.make_opsetid("", 18), helper.make_opsetid("ai.onnx.preview.training", 1)])
        return ReferenceEvaluator(model)

    def make_step(params, _hyper):
        dtype = params[0].dtype
        runs = [evaluator(dtype, p.shape) for p in params]
        initial = kwargs.get("H_initial", 0.0) if name == "Adagrad" else 0.0
        state = [{"X": p.copy(), **{n: np.full(p.shape, initial if n == "H" else 0.0, dtype)
                                    for n in slots}} for p in params]
        t = [ONNX_FIRST_T[name] if first_t is None else first_t]

        def step(grads, lr):
            for run, s, g in zip(runs, state, grads):
                feed = {"R": np.array(lr, dtype), "T": np.array(t[0], np.int64),
                        "G": g, **s}
                out = run.run(None, feed)
                for n, value in zip(["X", *slots], out):
                    s[n] = np.asarray(value, dtype)
            t[0] += 1
            return [s["X"] for s in state]
        return step
    return make_step


RUNNERS = {"optax": optax_check.make_step, "keras": keras_make_step, "onnx": onnx_make_step}
MODULES = {"optax": ("optax", "jax"), "keras": ("keras", "jax"), "onnx": ("onnx",)}
#: The replayed flavors, each marked with what it needs (tests/conftest.py's needs marker).
FLAVORS = [pytest.param(flavor, marks=pytest.mark.needs(*modules))
           for flavor, modules in {**MODULES, "tfjs": ("node", "tfjs")}.items()]

TFJS_SCRIPT = ROOT / "tests" / "tfjs" / "replay.cjs"


def tfjs_dir():
    """The directory ``npm install @tensorflow/tfjs-core@4.22.0 @tensorflow/tfjs-backend-cpu``
    ran in (``NPOPTIM_TFJS_DIR``, set by .ci/run), or None."""
    path = os.environ.get("NPOPTIM_TFJS_DIR")
    if path and (Path(path) / "node_modules" / "@tensorflow" / "tfjs-core").is_dir():
        return path
    return None


def replay_tfjs(jobs_cases, tmp_path, leave_out=False):
    """Results entries of ``[(case, name, kwargs)]`` through tfjs in one Node process; a
    missing gradient is a null entry of applyGradients' map, or with ``leave_out`` the variable
    is left out of it (the call path of a known bug)."""
    import subprocess
    jobs = []
    for case, name, kwargs in jobs_cases:
        full = dict(flavors.get("tfjs").constructors[name].defaults, **kwargs)
        jobs.append({"id": case.id, "ctor": name, "args": [full[k] for k in POSITIONAL[name]],
                     "leaveOut": leave_out,
                     "params": [{"shape": list(p.shape), "data": p.ravel().tolist()}
                                for p in case.params],
                     "steps": [{"lr": st.lr, "grads": [None if g is None else g.ravel().tolist()
                                                       for g in st.grads]}
                               for st in case.steps]})
    jobs_file, out_file = tmp_path / "tfjs-jobs.json", tmp_path / "tfjs-out.json"
    jobs_file.write_text(json.dumps(jobs))
    subprocess.run(["node", str(TFJS_SCRIPT), str(jobs_file), str(out_file)], check=True,
                   env=dict(os.environ, NPOPTIM_TFJS_DIR=tfjs_dir()), timeout=600)
    out = json.loads(out_file.read_text())
    for r in out:
        if r.get("error"):  # a crash (a known bug is then an expected failure, see the file)
            print(f"tfjs {r['id']}: {r['error']}")
    shapes = {c.id: [p.shape for p in c.params] for c, _, _ in jobs_cases}
    return [{"id": r["id"], "steps": [{"params": [
        codec.encode_array(np.array(d, np.float32).reshape(shape))  # null (crash): NaN
        for d, shape in zip(st["params"], shapes[r["id"]])]} for st in r["steps"]]}
        for r in out]


def _available(flavor):
    if flavor == "tfjs":
        return tfjs_dir() is not None
    return all(importlib.util.find_spec(m) is not None for m in MODULES[flavor])


@pytest.fixture(scope="module", autouse=True)
def _keras_on_jax_in_float64():
    """Keras 3 as a float64 JAX user runs it (:func:`npoptim.check.keras.use_jax_in_float64`:
    the backend chosen before keras is imported, floatx float64)."""
    os.environ["KERAS_BACKEND"] = "jax"
    if importlib.util.find_spec("keras") is not None and importlib.util.find_spec("jax"):
        from npoptim.check.spec import UsageError
        try:
            keras_check.use_jax_in_float64()
        except UsageError as exc:
            pytest.skip(str(exc))


def replay_flavor(flavor, cases, use_switches=True, tmp_path=None):
    """Results (the schema's ``"results"`` entries) of ``cases`` through the framework."""
    entries, batch = [], []
    for case in cases:
        name, kwargs = constructor_for_case(flavor, case, use_switches)
        if name is None:
            entries.append({"id": case.id, "skipped": kwargs})
        elif flavor == "tfjs":
            batch.append((case, name, kwargs))
        else:
            entries.append(replay(case, RUNNERS[flavor](name, kwargs),
                                  grad_format="dense"))
    if batch:
        entries += replay_tfjs(batch, tmp_path)
    return parse(json.loads(codec.dumps(results_file(entries, flavor))),
                 f"<{flavor}>", "results").cases


@pytest.mark.parametrize("flavor", FLAVORS)
def test_framework_passes_its_flavor(flavor, tmp_path):
    if not _available(flavor):
        pytest.skip(f"{flavor} is not installed")
    cases = verification.select(load_all(SUITE, kind="cases"), flavors=[flavor])
    results = {r.id: r for r in replay_flavor(flavor, cases, tmp_path=tmp_path)}
    reports = [compare.compare_case(c, results[c.id], f"<{flavor}>") for c in cases]
    ran = [r for r in reports if r.status != "skipped"]
    own = [r for r, c in zip(reports, cases) if c.flavor == flavor
           and not (flavor == "onnx" and c.optimizer in ORT_ONLY)]
    failed = [r for r in reports if r.failed and not known_bug(flavor, r.case_id)]
    assert not failed, compare.format_reports(failed, summary=True)
    assert all(r.status != "skipped" for r in own), [r.case_id for r in own if r.failed]
    assert len(ran) > len(own), compare.format_reports(reports, summary=True)
    for r in reports:  # a listed bug must still fail: a fix upstream is noticed
        if known_bug(flavor, r.case_id) and r.status != "skipped":
            assert r.failed, f"{r.case_id} passes {flavor}: remove it from the known bugs"
    # and through the CLI, as a user runs it, declaring the known bugs skipped
    path = tmp_path / "results.json"
    entries = [{"id": r.id, "skipped": f"known {flavor} bug: {known_bug(flavor, r.id)['what']}"}
               if known_bug(flavor, r.id) else r.raw for r in results.values()]
    path.write_text(codec.dumps(results_file(entries, flavor)))
    from npoptim.cli import verify as verify_cli
    import argparse
    parser = argparse.ArgumentParser()
    verify_cli.add_arguments(parser)
    assert verify_cli.run(parser.parse_args([str(SUITE), str(path), "--flavor", flavor,
                                             "--summary"])) == 0


@pytest.mark.needs("node", "tfjs")
def test_tfjs_loses_track_of_state_only_with_a_variable_left_out(tmp_path):
    """The tfjs bug listed with ``call_path`` "variable-left-out": its cases, which pass with a
    null entry for a missing gradient (test_framework_passes_its_flavor), fail when the
    variable is left out of applyGradients' map."""
    if not _available("tfjs"):
        pytest.skip("tfjs is not installed")
    bug = next(b for b in BUGS if b.get("call_path") == "variable-left-out")
    cases = [c for c in load_all(SUITE, kind="cases") if c.dtype == "float32"
             and known_bug("tfjs", c.id, "variable-left-out") is bug
             and not known_bug("tfjs", c.id)]
    assert len(cases) == 4, [c.id for c in cases]
    jobs = [(c, *constructor_for_case("tfjs", c)) for c in cases]
    assert all(name is not None for _, name, _ in jobs), jobs
    for leave_out in (False, True):
        results = parse(json.loads(codec.dumps(results_file(
            replay_tfjs(jobs, tmp_path, leave_out=leave_out), "tfjs"))), "<tfjs>",
            "results").cases
        passed = [compare.compare_case(c, r, "<tfjs>").passed for c, r in zip(cases, results)]
        assert passed == [not leave_out] * len(cases), (leave_out, passed)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_framework_fails_the_torch_cases_its_flavor_overrides(flavor, tmp_path):
    """The conventions matter: every torch case the flavor overrides, replayed through the
    framework with the same hyperparameters in its names, fails."""
    if not _available(flavor):
        pytest.skip(f"{flavor} is not installed")
    every = load_all(SUITE, kind="cases")
    by_id = {c.id: c for c in every}
    overridden = [by_id[verification._torch_id(c)] for c in every if c.flavor == flavor
                  and "/defaults/" not in c.id and verification._torch_id(c) in by_id
                  and not (flavor == "onnx" and c.optimizer in ORT_ONLY)]
    assert overridden
    results = {r.id: r for r in replay_flavor(flavor, overridden, use_switches=False,
                                              tmp_path=tmp_path)}
    passing = [c.id for c in overridden
               if compare.compare_case(c, results[c.id], f"<{flavor}>").passed]
    assert not passing, f"{flavor} passes torch cases its flavor overrides: {passing}"


def _optax_from_the_file(case, as_arrays):
    """``make_step`` of ``optax.<constructor>(**framework_hyperparameters)`` as a user builds it
    from the file, without inject_hyperparams: the floats as Python floats, or as arrays of
    the case's dtype; rebuilt each step with that step's lr (state kept)."""
    import re
    import jax.numpy as jnp
    import optax
    name = re.search(r"Framework call: optax\.([\w.]+)\(", case.comment).group(1)
    lr_name = next(k for k, t in flavors.get("optax").constructors[name].names.items()
                   if t == "lr" or isinstance(t, tuple) and t[0] == "lr")

    def typed(value, dtype):
        return jnp.asarray(value, dtype) if as_arrays and isinstance(value, float) else value

    def make_step(params, _hyper):
        dtype = params[0].dtype
        kwargs = {k: typed(v, dtype) for k, v in case.framework_hyperparameters.items()}
        state = {"params": [jnp.asarray(p) for p in params]}

        def step(grads, lr):
            tx = optax_check.optax_constructor(name)(**dict(kwargs, **{lr_name: typed(lr, dtype)}))
            if "opt" not in state:
                state["opt"] = tx.init(state["params"])
            updates, state["opt"] = tx.update([jnp.asarray(g) for g in grads], state["opt"],
                                              state["params"])
            state["params"] = optax.apply_updates(state["params"], updates)
            return [np.asarray(p) for p in state["params"]]
        return step
    return make_step


@pytest.mark.needs("optax", "jax")
def test_optax_adafactor_float64_needs_float64_arguments_as_its_cases_say():
    """What the Adafactor/optax float64 cases' comments state: built from the file with the
    floats as float64 arrays they pass; with Python floats optax computes its decay-rate power
    and momentum average in float32, and they fail."""
    if not _available("optax"):
        pytest.skip("optax is not installed")
    import jax
    jax.config.update("jax_enable_x64", True)
    cases = [c for c in load_all(SUITE, kind="cases")
             if c.id.startswith("Adafactor/optax/") and c.dtype == "float64"]
    assert len(cases) == 3 and all("float64 array" in c.comment for c in cases)
    for as_arrays in (True, False):
        entries = [replay(c, _optax_from_the_file(c, as_arrays), grad_format="dense")
                   for c in cases]
        results = parse(json.loads(codec.dumps(results_file(entries, "optax"))), "<optax>",
                        "results").cases
        passed = [compare.compare_case(c, r, "<optax>").passed for c, r in zip(cases, results)]
        assert passed == [as_arrays] * 3, (as_arrays, passed)


def _passes(case, make_step, flavor):
    entry = replay(case, make_step, grad_format="dense")
    result = parse(json.loads(codec.dumps(results_file([entry], flavor))), f"<{flavor}>",
                   "results").cases[0]
    return compare.compare_case(case, result, f"<{flavor}>").passed


def _suite_case(case_id):
    return next(c for c in load_all(SUITE, kind="cases") if c.id == case_id)


@pytest.mark.needs("optax", "jax")
def test_the_optax_choices_the_cases_state_change_the_numbers():
    """What the optax cases' comments state, and the other choice fails: optax.lbfgs's own
    zoom search starts from a step of 1 (initial_guess_strategy='one'; the search's default
    'keep' fails LBFGS/optax/short-history); Adam/optax/amsgrad is optax.amsgrad (optax.adam
    with the same keywords fails)."""
    if not _available("optax"):
        pytest.skip("optax is not installed")
    lbfgs = _suite_case("LBFGS/optax/short-history/float64")
    assert "initial_guess_strategy='one'" in lbfgs.comment
    name, kwargs = constructor_for_case("optax", lbfgs)
    assert _passes(lbfgs, optax_check.make_step(name, kwargs), "optax")
    assert not _passes(lbfgs, optax_check.make_step(
        name, dict(kwargs, initial_guess_strategy="keep")), "optax")
    amsgrad = _suite_case("Adam/optax/amsgrad/float64")
    assert "Framework call: optax.amsgrad(" in amsgrad.comment
    assert _passes(amsgrad, optax_check.make_step("amsgrad", amsgrad.framework_hyperparameters),
                   "optax")
    assert not _passes(amsgrad, optax_check.make_step("adam", amsgrad.framework_hyperparameters),
                       "optax")


@pytest.mark.needs("onnx")
def test_onnx_adam_s_step_count_from_1_is_the_cases_choice():
    """ONNX Adam's T is 1 at the first step, as its cases' comments say; from 0 they fail."""
    if not _available("onnx"):
        pytest.skip("onnx is not installed")
    cases = [c for c in load_all(SUITE, kind="cases") if c.id.startswith("Adam/onnx/")]
    assert cases and all("is 1 at the first step" in c.comment for c in cases)
    for case in cases:
        name, kwargs = constructor_for_case("onnx", case)
        assert _passes(case, onnx_make_step(name, kwargs), "onnx"), case.id
        assert not _passes(case, onnx_make_step(name, kwargs, first_t=0), "onnx"), case.id


@pytest.mark.needs("optax", "jax")
def test_optax_contrib_fails_the_cases_of_npoptim_s_other_variants(tmp_path):
    """The variants matter: the cases of Momo's and MomoAdam's authors' weight decay form
    (npoptim's default; the optax flavor is ``variant="optax"``) and of Sophia's authors'
    SophiaG, replayed through optax.contrib.momo / momo_adam / sophia with the same
    hyperparameters in optax's names, fail."""
    if not _available("optax"):
        pytest.skip("optax is not installed")
    others = [c for c in load_all(SUITE, kind="cases")
              if c.optimizer in ("Momo", "MomoAdam") and c.hyperparameters.get("variant")
              == "paper" and c.hyperparameters.get("weight_decay")
              or c.optimizer == "Sophia" and c.hyperparameters.get("variant") == "sophiag"]
    assert len(others) >= 6 and {c.optimizer for c in others} == {"Momo", "MomoAdam", "Sophia"}
    results = {r.id: r for r in replay_flavor("optax", others, use_switches=False,
                                              tmp_path=tmp_path)}
    passing = [c.id for c in others if compare.compare_case(c, results[c.id], "<optax>").passed]
    assert not passing, passing


# ------------------------------------------------------------ the wrappers through optax
#: The forms of npoptim's wrappers optax's lack (their cases are declared skipped, with this).
OPTAX_WRAPPERS_NOT_REPRODUCED = {
    "SAM": "optax.contrib.sam's normalize() adversary divides by the plain global norm: no "
           "eps, no adaptive (ASAM) scaling",
    "Mechanic": "optax.contrib.mechanize takes num_betas only (betas 1 - 10^-j), not betas",
}


def _optax_wrapper(case):
    """``(make_step, None)`` replaying a wrapper case (Lookahead, SAM, Mechanic; schema
    version 4) through ``optax.lookahead`` / ``optax.contrib.sam`` (opaque mode, the
    ``normalize()`` + ``sgd(rho)`` adversary of tests/test_sam.py) / ``optax.contrib.mechanize``
    around the optax constructor of the wrapped optimizer (the optax flavor's table, as for the
    flavor cases, its lr injected per step), or ``(None, reason)`` for a form optax lacks."""
    from types import SimpleNamespace
    inner_case = SimpleNamespace(optimizer=case.wrapped["optimizer"], dtype=case.dtype,
                                 hyperparameters=case.wrapped["hyperparameters"], tags=case.tags)
    name, kwargs = constructor_for_case("optax", inner_case)
    if name is None:
        return None, f"the wrapped {inner_case.optimizer} in optax: {kwargs}"
    hyper = codec.from_json_hyper(case.hyperparameters)
    if case.optimizer == "SAM" and (hyper["eps"] != 0 or any(hyper.get("adaptive", ()))):
        return None, OPTAX_WRAPPERS_NOT_REPRODUCED["SAM"]
    if case.optimizer == "Mechanic" and tuple(hyper["betas"]) != tuple(
            1.0 - 0.1 ** j for j in range(1, len(hyper["betas"]) + 1)):
        return None, OPTAX_WRAPPERS_NOT_REPRODUCED["Mechanic"]

    import jax
    import jax.numpy as jnp
    import optax
    from npoptim.golden import inputs
    jax.config.update("jax_enable_x64", True)
    lr_name = next(k for k, t in flavors.get("optax").constructors[name].names.items()
                   if t == "lr")
    # where the wrapped optimizer's (injected) state sits in the wrapper's state
    inner_state = {"Lookahead": lambda s: s.fast_state, "SAM": lambda s: s.opt_state,
                   "Mechanic": lambda s: s.base_optimizer_state}[case.optimizer]

    def make_step(params, _hyper):
        dtype = params[0].dtype
        inner = optax.inject_hyperparams(optax_check.optax_constructor(name))(
            **dict(kwargs, **{lr_name: jnp.asarray(kwargs[lr_name], dtype)}))
        if case.optimizer == "Lookahead":
            tx = optax.lookahead(inner, sync_period=hyper["k"], slow_step_size=hyper["alpha"],
                                 reset_state=hyper["reset_state"])
            current = optax.LookaheadParams.init_synced([jnp.asarray(p) for p in params])
        elif case.optimizer == "SAM":
            tx = optax.contrib.sam(inner, optax.chain(optax.contrib.normalize(),
                                                      optax.sgd(hyper["rho"])),
                                   sync_period=hyper["adversarial_steps"] + 1, opaque_mode=True)
            current = [jnp.asarray(p) for p in params]
        else:
            tx = optax.contrib.mechanize(inner, weight_decay=hyper["weight_decay"],
                                         eps=hyper["eps"], s_init=hyper["s_init"],
                                         num_betas=len(hyper["betas"]))
            current = [jnp.asarray(p) for p in params]
        state = {"params": current, "opt": tx.init(current)}

        def grad_fn(points, _i):  # SAM's gradient at the perturbed points (the objective's)
            return [jnp.asarray(g) for g in inputs.evaluate_objective(
                case.objective, [np.asarray(q) for q in points])[1]]

        def step(grads, lr):
            inner_state(state["opt"]).hyperparams[lr_name] = jnp.asarray(lr, dtype)
            extra = {}
            if callable(grads):  # SAM: the gradient at the parameters, then its grad_fn
                grads = grads()[1]
                extra["grad_fn"] = grad_fn
            updates, state["opt"] = tx.update([jnp.asarray(g) for g in grads], state["opt"],
                                              state["params"], **extra)
            state["params"] = optax.apply_updates(state["params"], updates)
            fast = (state["params"].fast if case.optimizer == "Lookahead"
                    else state["params"])
            for p, new in zip(params, fast):
                p[...] = np.asarray(new)
            return [np.asarray(p) for p in fast]
        return step
    return make_step, None


def _wrapper_cases():
    from npoptim import registry
    return [c for c in load_all(SUITE, kind="cases") if registry.is_wrapper(c.optimizer)]


@pytest.mark.needs("optax", "jax")
def test_optax_replays_the_wrapper_cases():
    """Every wrapper case through optax's wrapper around optax's form of the wrapped
    optimizer passes ``verify``, or is declared skipped with the reason
    (:data:`OPTAX_WRAPPERS_NOT_REPRODUCED`: the ASAM case); the wrapped optimizer alone
    through optax fails every one (the wrapper matters)."""
    if not _available("optax"):
        pytest.skip("optax is not installed")
    cases = _wrapper_cases()
    assert {c.optimizer for c in cases} == {"Lookahead", "SAM", "Mechanic"}
    entries, alone = [], []
    for case in cases:
        make_step, reason = _optax_wrapper(case)
        entries.append({"id": case.id, "skipped": reason} if make_step is None
                       else replay(case, make_step, grad_format="dense"))
        inner_case = type(case)(**{**case.__dict__, "optimizer": case.wrapped["optimizer"],
                                   "hyperparameters": case.wrapped["hyperparameters"],
                                   "wrapped": None})
        name, kwargs = constructor_for_case("optax", inner_case)
        if name is not None and inner_case.objective is None:
            alone.append(replay(inner_case, optax_check.make_step(name, kwargs),
                                grad_format="dense"))
        elif name is not None:  # SAM: the wrapped optimizer steps on the plain gradient
            alone.append(replay(inner_case, _plain_closure(optax_check.make_step(name, kwargs)),
                                grad_format="dense"))
    results = {r.id: r for r in parse(json.loads(codec.dumps(results_file(
        entries, "optax"))), "<optax>", "results").cases}
    reports = [compare.compare_case(c, results[c.id], "<optax>") for c in cases]
    assert not [r for r in reports if r.failed], compare.format_reports(reports, summary=True)
    skipped = {r.case_id: r.message for r in reports if r.status == "skipped"}
    assert skipped == {f"SAM/asam-per-parameter/{d}": OPTAX_WRAPPERS_NOT_REPRODUCED["SAM"]
                       for d in ("float32", "float64")}, skipped
    by_id = {c.id: c for c in cases}
    alone = parse(json.loads(codec.dumps(results_file(alone, "optax"))), "<optax>",
                  "results").cases
    assert len(alone) == len(cases)
    passing = [r.id for r in alone if compare.compare_case(by_id[r.id], r).passed]
    assert not passing, f"the wrapped optimizer alone passes wrapper cases: {passing}"


def _plain_closure(make_step):
    """A closure-driven replay (SAM's cases) through an optimizer that takes gradients: the
    closure's gradient at the parameters, no loss."""
    def make(params, hyper):
        step = make_step(params, hyper)
        return lambda closure, lr: step(closure()[1], lr)
    return make
