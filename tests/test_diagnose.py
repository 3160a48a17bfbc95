"""``npoptim diagnose``: its answers and report, on results of the plain NumPy mutants of
``test_diagnose_mutants.py`` (independent code, not npoptim's rules): a mistake no entry
knows, a pair of entries, ties told apart, the first divergent step of a convention, bad
input and the CLI. That each catalogue entry is named for its mutant, on every case of each
family it covers, is ``test_diagnose_mutants.py``'s.
"""
import json
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from npoptim.cli import main
from npoptim.diagnose.catalogue import (CATALOGUE, combine, drop_explicit_zeros,
                                        keep_first_duplicate, keep_last_duplicate)
from npoptim.diagnose.engine import DiagnoseError, diagnose, replay_params
from npoptim.golden.codec import CsrGrad, dumps
from npoptim.golden.replay import replay, results_file
from npoptim.golden.schema import load_all
from test_diagnose_mutants import MUTANTS, dense

SUITE = "reference_results"
CASES = {c.id: c for c in load_all(f"{SUITE}/cases", kind="cases")}
CATALOGUE_BY_NAME = {e.name: e for e in CATALOGUE}


def mutant(optimizer, bug=None):
    return MUTANTS[optimizer](optimizer, bug)


def results_for(tmp_path, make_step, case_ids, name="results.json"):
    entries = [replay(CASES[i], make_step) for i in case_ids]
    path = tmp_path / name
    path.write_text(dumps(results_file(entries, implementation="mutant")))
    return path


ADAM_CASES = ["Adam/defaults/float64", "Adam/eps-dominated/float64"]


def diagnosed(tmp_path, make_step, case_ids):
    optimizer = CASES[case_ids[0]].optimizer
    (d,) = diagnose(results_for(tmp_path, make_step, case_ids),
                    f"{SUITE}/cases/{optimizer}.json")
    return d


# ------------------------------------------------------------------------------ the tests
@pytest.mark.parametrize("make_step, entry, case, first_step", [
    (mutant("Adagrad", "eps in sqrt"), "eps inside the square root (Adagrad)",
     "Adagrad/eps-dominated/float64", 1),
    (mutant("RMSprop", "eps in sqrt"), "eps inside the square root (RMSprop)",
     "RMSprop/eps-dominated/float64", 1),
    # the first step is m/(|g| + eps) in both forms
    (mutant("Adamax", "eps added"), "eps added after the max (Adamax: Keras, TF, tfjs)",
     "Adamax/eps-dominated/float64", 2),
    # equal to torch's at constant lr: the schedule's first change of lr shows it
    (mutant("SGD", "lr in buffer"), "lr inside the momentum buffer (SGD)",
     "SGD/momentum-lr-schedule/float64", None),
    # the other Nesterov form (Keras, Sutskever et al.): the same at constant lr
    (mutant("SGD", "lr in buffer"), "lr inside the momentum buffer (SGD)",
     "SGD/nesterov-lr-schedule/float64", None),
    (mutant("RMSprop", "lr in buffer"), "lr inside the momentum buffer (RMSprop)",
     "RMSprop/momentum-lr-schedule/float64", None),
])
def test_framework_conventions_first_diverge_where_they_show(tmp_path, make_step, entry, case,
                                                              first_step):
    d = diagnosed(tmp_path, make_step, [case])
    assert d.verdict == "reproduced" and d.candidates[0].entry.name == entry
    assert d.candidates[0].entry.kind == "convention"
    if first_step is not None:
        assert d.divergence[1].step == first_step
    else:
        lrs = [s.lr for s in CASES[case].steps]
        changed = next(t for t in range(1, len(lrs)) if lrs[t] != lrs[t - 1])
        assert d.divergence[1].step == changed + 1


def test_an_unrelated_mistake_is_no_known_variant_for_rmsprop(tmp_path):
    def wrong(params, h):  # the square average of |g|, not g²: no catalogue entry does this
        step = mutant("RMSprop")(params, h)
        return lambda grads, lr: step([np.sqrt(np.abs(dense(g, p.shape))) * np.sign(
            dense(g, p.shape)) for g, p in zip(grads, params)], lr)
    d = diagnosed(tmp_path, wrong, ["RMSprop/momentum-lr-schedule/float64"])
    assert d.verdict == "no known variant" and not d.candidates and d.closest


def test_an_unrelated_mistake_is_no_known_variant(tmp_path):
    def wrong(params, h):  # momentum of the gradient's sign: no catalogue entry does this
        step = mutant("Adam")(params, h)
        return lambda grads, lr: step([None if g is None else np.sign(dense(g, p.shape))
                                       for g, p in zip(grads, params)], lr)
    d = diagnosed(tmp_path, wrong, ADAM_CASES)
    assert d.verdict == "no known variant" and not d.candidates and d.closest


def test_only_a_pair_reproduces_keras(tmp_path):
    # Keras's Adam: eps on sqrt(v) *and* its default eps 1e-7; neither alone reproduces it
    d = diagnosed(tmp_path, mutant("Adam", "keras"), ["Adam/defaults/float64"])
    assert d.verdict == "reproduced"
    assert set(d.candidates[0].entry.parts) == {
        "eps on sqrt(v) (epsilon hat: Keras, TF, ONNX)", "eps = 1e-7 (Keras default)"}


def test_a_pair_replays_each_part_where_the_case_reaches_it():
    # no m correction (an lr factor, with the decoupled decay applied apart) with L2 in place
    # of the decoupled decay: on AdamW's case, Adam's L2 under the factor; on an L2 case
    # (where the L2 entry does not apply), the lr factor alone
    no_m, l2 = (CATALOGUE_BY_NAME[n] for n in ("no bias correction of m",
                                               "L2 decay instead of decoupled"))
    pair = combine(no_m, l2)
    adamw = CASES["AdamW/weight-decay/float64"]
    as_adam = replace(adamw, optimizer="Adam", hyperparameters=dict(
        adamw.hyperparameters, decoupled_weight_decay=False))
    adam = CASES["Adam/weight-decay/float64"]
    for got, expected in ((replay_params(adamw, pair), replay_params(as_adam, no_m)),
                          (replay_params(adam, pair), replay_params(adam, no_m))):
        assert all(np.array_equal(a, b) for s, t in zip(got, expected) for a, b in zip(s, t))
    assert not np.array_equal(replay_params(adamw, pair)[-1][0],
                              replay_params(adamw, no_m)[-1][0])


def test_candidates_that_tie_are_told_apart(tmp_path):
    # two switches that agree wherever eps is 1e-8 (as in the diagnosed case), not elsewhere
    ten_times = replace(CATALOGUE_BY_NAME["eps = 1e-7 (Keras default)"], name="eps times 10",
                        hyper=None, per_step=lambda t, h: {"eps": 10.0})
    catalogue = (CATALOGUE_BY_NAME["eps = 1e-7 (Keras default)"], ten_times)
    path = results_for(tmp_path, mutant("Adam", "keras eps"), ["Adam/defaults/float64"])
    (d,) = diagnose(path, f"{SUITE}/cases/Adam.json", catalogue=catalogue)
    assert {c.entry.name for c in d.candidates} == {"eps = 1e-7 (Keras default)", "eps times 10"}
    ((_, _, case),) = d.tell_apart
    assert CASES[case].hyperparameters["eps"] != 1e-8  # e.g. Adam/large-eps


def test_the_catalogue_entries_are_documented():
    names = [e.name for e in CATALOGUE]
    assert len(names) == len(set(names))
    assert all(e.doc and e.kind in ("convention", "default", "mistake") for e in CATALOGUE)


def test_every_catalogue_entry_has_a_mutant_here():
    # each entry is named by a test of this file or of test_diagnose_mutants.py (the issue's
    # "at least one per entry")
    here = Path(__file__)
    source = here.read_text() + here.with_name("test_diagnose_mutants.py").read_text()
    assert [e.name for e in CATALOGUE if f'"{e.name}"' not in source] == []


def test_csr_rewrites():
    g = CsrGrad((2, 3), np.array([0, 3, 4]), np.array([1, 1, 2, 0]),
                np.array([1.0, 2.0, 0.0, 5.0]))
    assert drop_explicit_zeros(g).rows() == [(0, 1, 1.0), (0, 1, 2.0), (1, 0, 5.0)]
    assert keep_first_duplicate(g).rows() == [(0, 1, 1.0), (0, 2, 0.0), (1, 0, 5.0)]
    assert keep_last_duplicate(g).rows() == [(0, 1, 2.0), (0, 2, 0.0), (1, 0, 5.0)]


def test_bad_input_gets_a_clear_error(tmp_path, capsys):
    path = results_for(tmp_path, mutant("Adam"), ["Adam/defaults/float64"])
    doc = json.loads(path.read_text())
    doc["cases"][0]["id"] = "Adam/no-such-case/float64"
    lacking = tmp_path / "lacking.json"
    lacking.write_text(json.dumps(doc))
    with pytest.raises(DiagnoseError, match="the suite .* lacks"):
        diagnose(lacking, SUITE)
    with pytest.raises(DiagnoseError, match="holds results of Adam, not of SGD"):
        diagnose(path, SUITE, optimizers=["SGD"])
    assert main(["diagnose", str(lacking)]) == 2
    assert "lacks" in capsys.readouterr().err
    assert main(["diagnose", str(tmp_path / "missing.json")]) == 2


def test_cli_report(tmp_path, capsys):
    path = results_for(tmp_path, mutant("Adam", "eps hat"), ADAM_CASES)
    assert main(["diagnose", str(path), "--optimizer", "Adam"]) == 1
    out = capsys.readouterr().out
    assert "reproduced by" in out and "1. eps on sqrt(v)" in out and "step 1" in out
    good = results_for(tmp_path, mutant("Adam"), ADAM_CASES, "good.json")
    assert main(["diagnose", str(good)]) == 0
    assert "matches" in capsys.readouterr().out


@pytest.mark.needs("node")
def test_the_node_consumers_misplaced_eps_is_named(tmp_path):
    root = Path(__file__).resolve().parents[1]
    cases = [str(root / "reference_results" / "cases" / f"{n}.json")
             for n in ("Adam", "SparseAdam")]
    out = tmp_path / "buggy.json"
    subprocess.run(["node", str(root / "examples" / "node" / "golden_consumer.mjs"), "--bug",
                    "eps-placement", "-o", str(out), *cases], check=True, capture_output=True,
                   timeout=300)
    by_name = {d.optimizer: d for d in diagnose(out, SUITE)}
    assert by_name["Adam"].candidates[0].entry.name == \
        "eps on sqrt(v) (epsilon hat: Keras, TF, ONNX)"
    assert by_name["SparseAdam"].candidates[0].entry.name == \
        "eps on sqrt(v_hat) (Adam's placement in SparseAdam)"
    assert by_name["Adam"].divergence[1].step == 1
