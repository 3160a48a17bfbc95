"""The wrappers' golden cases (Lookahead, SAM, Mechanic; schema version 4): the ``wrapped``
field and ``wrapper_state`` round-trip through the writer, the loader and the JSON Schema;
``verify`` passes npoptim and fails a wrong wrapper (alpha, rho, weight decay, a wrapper left
out, a wrong wrapper state); malformed wrapper fields raise naming the field; the registry
and ``npoptim list`` know the wrappers apart from the optimizers."""
import copy
import json
from pathlib import Path

import numpy as np
import pytest

from npoptim import registry, testing
from npoptim.cli import main
from npoptim.golden import (cases, codec, compare, generate, regenerate, schema,
                            verify as verification)
from npoptim.golden.replay import npoptim_make_step, replay, results_file

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "reference_results"
WRAPPERS = list(registry.WRAPPERS)


def _doc(name):
    return json.loads((SUITE / "cases" / f"{name}.json").read_text(encoding="utf-8"))


def _cases(name):
    return schema.load(SUITE / "cases" / f"{name}.json", kind="cases").cases


def _case(case_id):
    return next(c for c in _cases(case_id.split("/")[0]) if c.id == case_id)


# ------------------------------------------------------------------------ the format
@pytest.mark.parametrize("name", WRAPPERS)
def test_wrapper_files_are_version_4_and_round_trip(name):
    doc = _doc(name)
    assert doc["schema_version"] == 4
    rows = {r.name: r for r in cases.TABLE[name]}
    for raw, case in zip(doc["cases"], _cases(name)):
        row = rows[case.id.split("/")[1]]
        assert case.optimizer == name and "wrapper" in case.tags
        assert case.wrapped == raw["wrapped"]
        assert case.wrapped["optimizer"] == row.wrapped[0]
        for key, value in row.wrapped[1].items():  # the row's settings, among all resolved
            assert case.wrapped["hyperparameters"][key] == value
        own = [s.expected_wrapper_state for s in case.steps]
        if name == "SAM":  # no state of its own
            assert all(s is None for s in own)
        else:
            assert all(s for s in own)
            names = {"Lookahead": {"slow_params"},
                     "Mechanic": {"m", "v", "r", "s", "x0"}}[name]
            assert set(own[0]) == names
        # the wrapped optimizer's state is the per-parameter state
        assert case.steps[0].expected_state[0], case.id
    # the writer writes the loader's input back byte for byte
    assert codec.dumps(regenerate.build_optimizer_file(name)) == (
        SUITE / "cases" / f"{name}.json").read_text(encoding="utf-8")


def test_only_files_with_a_wrapper_case_are_version_4():
    assert schema.version_needed(_doc("Adam")["cases"]) == 2
    assert schema.version_needed(_doc("SGD")["cases"] + _doc("Lookahead")["cases"][:1]) == 4
    for path in (SUITE / "cases").rglob("*.json"):
        doc = json.loads(path.read_text(encoding="utf-8"))
        assert (doc["schema_version"] == 4) == (path.stem in registry.WRAPPERS), path


@pytest.mark.parametrize("name", WRAPPERS)
def test_json_schema_accepts_the_wrapper_files_and_refuses_bad_wrapped(name):
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(
        json.loads((SUITE / regenerate.SCHEMA_FILE).read_text(encoding="utf-8")))
    doc = _doc(name)
    assert not list(validator.iter_errors(doc))
    for mutate in (lambda c: c["wrapped"].__setitem__("extra", 1),
                   lambda c: c["wrapped"].pop("hyperparameters"),
                   lambda c: c["wrapped"].__setitem__("optimizer", 3),
                   lambda c: c.__setitem__("wrapped", "SGD")):
        bad = copy.deepcopy(doc)
        mutate(bad["cases"][0])
        assert list(validator.iter_errors(bad))


# ------------------------------------------------------------------ verify: pass and fail
def test_every_wrapper_case_passes_verify_with_its_state_compared():
    reports, _ = verification.verify(SUITE, optimizers=WRAPPERS)
    assert len(reports) == sum(len(r.dtypes) for n in WRAPPERS for r in cases.TABLE[n])
    assert all(r.passed and r.state_compared for r in reports), compare.format_reports(
        reports, summary=True)


def _results_of(case, make_step):
    """The case's results through ``make_step``, written and loaded as a results file."""
    doc = results_file([replay(case, make_step)])
    return schema.parse(json.loads(codec.dumps(doc)), "<results>", "results").cases[0], doc


def test_npoptim_results_carry_the_wrapper_state_and_round_trip():
    case = _case("Mechanic/adam-num-betas-decay/float64")
    result, doc = _results_of(case, testing.npoptim_step(case))
    assert doc["schema_version"] == 4
    assert set(result.steps[0].wrapper_state) == {"m", "v", "r", "s", "x0"}
    report = compare.compare_case(case, result)
    assert report.passed and report.state_compared
    # a result without the wrapper state is still read (version 2) and compared on the rest
    plain = {"id": case.id, "steps": [{"params": s["params"], "state": s["state"]}
                                      for s in replay(case, testing.npoptim_step(case))["steps"]]}
    doc = results_file([plain])
    assert doc["schema_version"] == 2
    result = schema.parse(json.loads(codec.dumps(doc)), "<r>", "results").cases[0]
    assert compare.compare_case(case, result).passed


def _wrong_make_step(case, **override):
    """npoptim's make_step with some wrapper settings replaced (a wrong implementation),
    returning the parameters only (a state where the case has none, after Lookahead's
    reset, is a structural mismatch, not a divergence)."""
    make_step = npoptim_make_step(case.optimizer, wrapped=case.wrapped)

    def wrong(params, hyper):
        step = make_step(params, dict(hyper, **override))
        return lambda grads, lr: step(grads, lr)[0]
    return wrong


@pytest.mark.parametrize("case_id, override, step, field", [
    # a wrong alpha shows at the first synchronization, step k
    ("Lookahead/sgd-momentum/float32", dict(alpha=0.4), 5, "params[0]"),
    ("Lookahead/adam-reset-state/float64", dict(alpha=0.35), 3, "params[0]"),
    ("Lookahead/adam-reset-state/float64", dict(reset_state=False), 4, "params[0]"),
    ("Lookahead/sgd-momentum/float64", dict(k=4), 4, "params[0]"),
    ("SAM/sgd-momentum/float32", dict(rho=0.12), 1, "params[0]"),
    ("SAM/adam-two-ascents/float64", dict(adversarial_steps=1), 1, "params[0]"),
    ("SAM/asam-per-parameter/float64", dict(adaptive=(True, True)), 1, "params[0]"),
    ("SAM/asam-per-parameter/float32", dict(adaptive=(False, False), eta=0.0), 1, "params[0]"),
    ("SAM/asam-per-parameter/float32", dict(eta=0.0), 1, "params[0]"),
    ("Mechanic/adam-num-betas-decay/float32", dict(weight_decay=0.0), 3, "params[0]"),
    ("Mechanic/adam-num-betas-decay/float32", dict(betas=(0.9, 0.99, 0.999, 0.9999)), 3,
     "params[0]"),
    ("Mechanic/adam-num-betas-decay/float64", dict(s_init=0.04), 1, "params[0]"),
    ("Mechanic/sgd-momentum/float64", dict(betas=(0.9, 0.99, 0.999)), 3, "params[0]"),
])
def test_verify_fails_a_wrong_wrapper_where_it_diverges(case_id, override, step, field):
    case = _case(case_id)
    result, _ = _results_of(case, _wrong_make_step(case, **override))
    report = compare.compare_case(case, result)
    assert report.failed
    assert (report.divergence.step, report.divergence.field) == (step, field), \
        str(report.divergence)


@pytest.mark.parametrize("case_id", ["Lookahead/sgd-momentum/float32",
                                     "SAM/sgd-momentum/float64",
                                     "Mechanic/adam-num-betas-decay/float64"])
def test_verify_fails_the_wrapped_optimizer_run_alone(case_id):
    case = _case(case_id)
    inner = npoptim_make_step(case.wrapped["optimizer"])
    result, _ = _results_of(case, lambda params, _hyper: inner(
        params, codec.from_json_hyper(case.wrapped["hyperparameters"])))
    assert compare.compare_case(case, result).failed


def test_verify_fails_a_wrong_wrapper_state():
    case = _case("Lookahead/adam-reset-state/float64")
    make_step = testing.npoptim_step(case)

    def shifted(params, hyper):
        step = make_step(params, hyper)

        def wrong(grads, lr):
            params_, state, own = step(grads, lr)
            return params_, state, dict(own, slow_params=[s + 1e-9 for s in own["slow_params"]])
        return wrong
    report = compare.compare_case(case, _results_of(case, shifted)[0])
    assert report.failed and report.divergence.field == "wrapper_state.slow_params[0]"
    assert report.divergence.step == 1
    with pytest.raises(schema.GoldenFileError, match="no such wrapper state entry"):
        bad = copy.deepcopy(_results_of(case, make_step)[1])
        bad["cases"][0]["steps"][0]["wrapper_state"]["slow"] = bad["cases"][0]["steps"][0][
            "wrapper_state"].pop("slow_params")
        compare.compare_case(case, schema.parse(json.loads(codec.dumps(bad)), "<r>",
                                                "results").cases[0])


def test_testing_assert_case_runs_a_wrapper_case():
    case = _case("SAM/adam-two-ascents/float32")
    testing.assert_case(case, testing.npoptim_step(case))
    with pytest.raises(AssertionError, match="diverges at step"):
        testing.assert_case(case, _wrong_make_step(case, rho=0.1))


# ------------------------------------------------------------------------- bad fields
@pytest.fixture(scope="module")
def lookahead_doc():
    doc = _doc("Lookahead")
    doc["cases"] = doc["cases"][:1]
    doc["number_of_cases"] = 1
    return doc


def _error(doc, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(schema.GoldenFileError) as info:
        schema.load(path)
    return str(info.value)


@pytest.mark.parametrize("mutate, field, words", [
    (lambda d: d["cases"][0].__setitem__("wrapped", "SGD"), "wrapped", "expected an object"),
    (lambda d: d["cases"][0]["wrapped"].pop("hyperparameters"), "wrapped.hyperparameters",
     "missing"),
    (lambda d: d["cases"][0]["wrapped"].__setitem__("hyper", {}), "wrapped.hyper",
     "unknown field of a wrapped object"),
    (lambda d: d["cases"][0]["wrapped"].__setitem__("optimizer", 7), "wrapped.optimizer",
     "expected a string"),
    (lambda d: d["cases"][0]["wrapped"].__setitem__("optimizer", ""), "wrapped.optimizer",
     "must name"),
    (lambda d: d["cases"][0]["wrapped"].__setitem__("optimizer", "Lookahead"),
     "wrapped.optimizer", "itself"),
    (lambda d: d["cases"][0]["wrapped"].__setitem__("hyperparameters", [0.05]),
     "wrapped.hyperparameters", "expected an object"),
    (lambda d: d.__setitem__("schema_version", 3), "wrapped", "schema_version 4 field"),
    (lambda d: d["cases"][0]["steps"][2]["expected"].__setitem__("wrapper_state", [1]),
     "steps[2].expected.wrapper_state", "expected an object"),
    (lambda d: d["cases"][0]["steps"][1]["expected"]["wrapper_state"]["slow_params"][0][
        "data"].pop(), "steps[1].expected.wrapper_state.slow_params[0].data", "has 14 values"),
    (lambda d: d["cases"][0].pop("wrapped"), "steps[0].expected.wrapper_state",
     "only a wrapper case"),
])
def test_malformed_wrapper_fields_name_the_field(lookahead_doc, tmp_path, mutate, field,
                                                   words):
    doc = copy.deepcopy(lookahead_doc)
    mutate(doc)
    message = _error(doc, tmp_path)
    assert "case 'Lookahead/sgd-momentum/float32'" in message
    assert field in message and words in message, message


def test_a_results_wrapper_state_needs_version_4(tmp_path):
    case = _case("Lookahead/sgd-momentum/float32")
    doc = _results_of(case, testing.npoptim_step(case))[1]
    doc["schema_version"] = 2
    path = tmp_path / "r.json"
    path.write_text(codec.dumps(doc), encoding="utf-8")
    with pytest.raises(schema.GoldenFileError, match=r"steps\[0\].wrapper_state: is a "
                                                     "schema_version 4 field"):
        schema.load(path, "results")


def test_make_step_refuses_a_wrapper_without_its_wrapped_optimizer_and_nesting():
    with pytest.raises(ValueError, match="Lookahead is a wrapper: its case needs a 'wrapped'"):
        npoptim_make_step("Lookahead")
    with pytest.raises(ValueError, match="Adam is not a wrapper"):
        npoptim_make_step("Adam", wrapped={"optimizer": "SGD", "hyperparameters": {}})
    with pytest.raises(ValueError, match="wraps SAM, a wrapper"):
        npoptim_make_step("Lookahead", wrapped={"optimizer": "SAM", "hyperparameters": {}})


def test_verify_reports_a_wrapped_optimizer_npoptim_rejects(lookahead_doc, tmp_path):
    doc = copy.deepcopy(lookahead_doc)
    doc["cases"][0]["wrapped"]["hyperparameters"]["momentum"] = -1.0
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    (report,), _ = verification.verify(path)
    assert report.status == "error" and "momentum" in report.message, report.message


def test_table_rows_of_wrappers_are_checked():
    row = cases.TABLE["Lookahead"][0]
    import dataclasses
    with pytest.raises(ValueError, match="needs wrapped="):
        generate.build_case(dataclasses.replace(row, wrapped=None), "float64")
    with pytest.raises(ValueError, match="only a wrapper's row"):
        generate.build_case(dataclasses.replace(cases.TABLE["SGD"][0], wrapped=("Adam", {})),
                            "float64")
    with pytest.raises(ValueError, match="SGD has no hyperparameter"):
        generate.build_case(dataclasses.replace(row, wrapped=("SGD", dict(alpha=1.0))),
                            "float64")


# ---------------------------------------------------------------- registry and listing
def test_registry_keeps_wrappers_apart_and_gets_them():
    from npoptim.optim.wrapper import OptimizerWrapper
    assert not set(registry.WRAPPERS) & set(registry.OPTIMIZERS)
    for name in registry.WRAPPERS:
        assert registry.is_wrapper(name)
        assert issubclass(registry.get_wrapper(name), OptimizerWrapper)
        # code that builds registry.get(name)(params) never gets a wrapper
        with pytest.raises(KeyError, match=f"{name} is a wrapper"):
            registry.get(name)
    assert not any(registry.is_wrapper(n) for n in registry.OPTIMIZERS)
    with pytest.raises(KeyError, match="unknown wrapper 'Adam'"):
        registry.get_wrapper("Adam")


def test_list_shows_the_wrappers_marked_as_wrappers(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "Lookahead  (wrapper; optax.lookahead; sparse: wrapped)" in out
    assert "SAM  (wrapper; optax.contrib.sam; sparse: dense-only)" in out
    assert "Mechanic  (wrapper; optax.contrib.mechanize; sparse: dense-only)" in out
    assert main(["list", "--json", "SAM"]) == 0
    (info,) = json.loads(capsys.readouterr().out)
    assert info["wrapper"] is True and info["hyperparameters"]["rho"] == 0.05
    assert np.isclose(info["hyperparameters"]["rho"], 0.05)
