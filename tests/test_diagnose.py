"""``npoptim diagnose``: each catalogue entry is named, with its first divergent step, for a
mutant implementation written here as independent plain NumPy code (not npoptim's rules).

Each mutant is the textbook update with one deliberate difference (the ``bug`` branches);
its results for a few golden cases go through ``diagnose`` as another implementation's
results file would.
"""
import json
import math
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from npoptim.cli import main
from npoptim.diagnose.catalogue import (CATALOGUE, drop_explicit_zeros, keep_first_duplicate,
                                        keep_last_duplicate)
from npoptim.diagnose.engine import DiagnoseError, diagnose
from npoptim.golden.codec import CsrGrad, dumps
from npoptim.golden.replay import replay, results_file
from npoptim.golden.schema import load_all

SUITE = "reference_results"
CASES = {c.id: c for c in load_all(SUITE, kind="cases")}
CATALOGUE_BY_NAME = {e.name: e for e in CATALOGUE}


# ------------------------------------------------------------------ plain NumPy mutants
def dense(g, shape):
    """A case gradient as the plain code sees it: dense, duplicates summed."""
    if g is None:
        return None
    if hasattr(g, "toarray"):
        out = np.zeros(g.shape)
        for row in range(g.shape[0]):
            for k in range(g.indptr[row], g.indptr[row + 1]):
                out[row, g.indices[k]] += g.data[k]
        return out.reshape(shape)
    return np.asarray(g, np.float64)


def adam(bug=None, dtype=None):
    """Adam (torch's hyperparameters: maximize and amsgrad are absent from these cases)."""
    def make_step(params, h, bug=bug):
        beta1, beta2 = h["betas"]
        eps, wd = h["eps"], h.get("weight_decay", 0)
        decoupled = h.get("decoupled_weight_decay", False)
        if bug == "keras eps":
            eps = 1e-7
        if bug == "d2l eps":
            eps = 1e-6
        if bug == "keras":  # Keras's Adam: eps hat and eps 1e-7
            bug, eps = "eps hat", 1e-7
        kind = np.float32 if dtype == "float32" else params[0].dtype.type
        ms = [np.zeros(p.shape, kind) for p in params]
        vs = [np.zeros(p.shape, kind) for p in params]
        counts = [0] * len(params)

        def step(grads, lr):
            for i, (p, g) in enumerate(zip(params, grads)):
                if g is None:
                    continue
                g = dense(g, p.shape).astype(kind)
                x = p.astype(kind)
                counts[i] += 1
                t = counts[i] - 1 if bug == "t from 0" else counts[i]
                t = t + 1 if bug == "t ahead" else t
                if wd and (decoupled or bug == "decoupled") and bug != "decay after":
                    x = x * kind(1 - lr * wd)
                elif wd and not decoupled and bug != "decoupled":
                    g = g + kind(wd) * x
                ms[i] = kind(beta1) * ms[i] + kind(1 - beta1) * g
                vs[i] = kind(beta2) * vs[i] + kind(1 - beta2) * g * g
                with np.errstate(all="ignore"):
                    b1, b2 = kind(1 - beta1 ** t), kind(1 - beta2 ** t)
                    m_hat = ms[i] if bug in ("no m correction", "no correction") else ms[i] / b1
                    v_hat = vs[i] if bug in ("no v correction", "no correction") else vs[i] / b2
                    if bug == "eps hat":  # Keras: lr sqrt(b2)/b1 m / (sqrt(v) + eps)
                        x = x - kind(lr) * np.sqrt(b2) / b1 * ms[i] / (np.sqrt(vs[i]) + kind(eps))
                    elif bug == "eps in sqrt":
                        x = x - kind(lr) * m_hat / np.sqrt(v_hat + kind(eps))
                    else:
                        x = x - kind(lr) * m_hat / (np.sqrt(v_hat) + kind(eps))
                if wd and decoupled and bug == "decay after":
                    x = x * kind(1 - lr * wd)
                p[...] = x
            return params
        return step
    return make_step


def sgd(bug=None):
    def make_step(params, h):
        mu, wd, nesterov = h["momentum"], h["weight_decay"], h["nesterov"]
        if bug == "nesterov":
            nesterov = not nesterov
        bufs = [None] * len(params)

        def step(grads, lr):
            for i, (p, g) in enumerate(zip(params, grads)):
                if g is None:
                    continue
                g = dense(g, p.shape) + wd * p
                if mu and bug == "lr in buffer":  # Keras: b = mu b + lr g; p -= b
                    bufs[i] = lr * g if bufs[i] is None else mu * bufs[i] + lr * g
                    p -= bufs[i]
                    continue
                if mu and bug == "keras nesterov":  # m = mu m - lr g; p += mu m - lr g
                    bufs[i] = -lr * g if bufs[i] is None else mu * bufs[i] - lr * g
                    p += mu * bufs[i] - lr * g
                    continue
                if mu:
                    bufs[i] = g.copy() if bufs[i] is None else mu * bufs[i] + g
                    g = g + mu * bufs[i] if nesterov else bufs[i]
                p -= lr * g
            return params
        return step
    return make_step


def adagrad(bug=None):
    def make_step(params, h):
        start = 0.1 if bug == "accumulator 0.1" else h["initial_accumulator_value"]
        sums = [np.full(p.shape, float(start)) for p in params]

        def step(grads, lr):
            for i, (p, g) in enumerate(zip(params, grads)):
                g = dense(g, p.shape)
                sums[i] += g * g
                if bug == "eps in sqrt":
                    p -= lr * g / np.sqrt(sums[i] + h["eps"])
                else:
                    p -= lr * g / (np.sqrt(sums[i]) + h["eps"])
            return params
        return step
    return make_step


def rmsprop(bug=None):
    """RMSprop without centering or decay (the cases used here)."""
    def make_step(params, h):
        squares = [np.zeros(p.shape) for p in params]
        bufs = [np.zeros(p.shape) for p in params]
        mu = h["momentum"]

        def step(grads, lr):
            for i, (p, g) in enumerate(zip(params, grads)):
                g = dense(g, p.shape)
                squares[i] = h["alpha"] * squares[i] + (1 - h["alpha"]) * g * g
                if bug == "eps in sqrt":
                    d = np.sqrt(squares[i] + h["eps"])
                else:
                    d = np.sqrt(squares[i]) + h["eps"]
                if mu and bug == "lr in buffer":  # Keras, TF: b = mu b + lr g/d; p -= b
                    bufs[i] = mu * bufs[i] + lr * g / d
                    p -= bufs[i]
                elif mu:
                    bufs[i] = mu * bufs[i] + g / d
                    p -= lr * bufs[i]
                else:
                    p -= lr * g / d
            return params
        return step
    return make_step


def adamax(bug=None):
    def make_step(params, h):
        beta1, beta2 = h["betas"]
        ms = [np.zeros(p.shape) for p in params]
        us = [np.zeros(p.shape) for p in params]
        counts = [0] * len(params)

        def step(grads, lr):
            for i, (p, g) in enumerate(zip(params, grads)):
                g = dense(g, p.shape)
                counts[i] += 1
                ms[i] = beta1 * ms[i] + (1 - beta1) * g
                if bug == "eps added":
                    us[i] = np.maximum(beta2 * us[i], np.abs(g))
                    p -= lr / (1 - beta1 ** counts[i]) * ms[i] / (us[i] + h["eps"])
                else:
                    us[i] = np.maximum(beta2 * us[i], np.abs(g) + h["eps"])
                    p -= lr / (1 - beta1 ** counts[i]) * ms[i] / us[i]
            return params
        return step
    return make_step


def sparse_adam(bug=None):
    """SparseAdam on the stored entries, duplicates summed unless the bug says otherwise."""
    def make_step(params, h):
        beta1, beta2 = h["betas"]
        ms = [np.zeros(p.shape) for p in params]
        vs = [np.zeros(p.shape) for p in params]
        counts = [0] * len(params)

        def step(grads, lr):
            for i, (p, g) in enumerate(zip(params, grads)):
                if g is None:
                    continue
                counts[i] += 1
                t = counts[i]
                entries = {}
                for row in range(g.shape[0]):
                    for k in range(g.indptr[row], g.indptr[row + 1]):
                        key, value = (row, int(g.indices[k])), float(g.data[k])
                        if bug == "drop zeros" and value == 0:
                            continue
                        if key in entries and bug == "first kept":
                            continue
                        if key in entries and bug != "last kept":
                            value += entries[key]
                        entries[key] = value
                flat_m, flat_v = ms[i].reshape(g.shape), vs[i].reshape(g.shape)
                flat_p = p.reshape(g.shape)
                b1, b2 = 1 - beta1 ** t, 1 - beta2 ** t
                for (row, col), value in entries.items():
                    flat_m[row, col] += (1 - beta1) * (value - flat_m[row, col])
                    flat_v[row, col] += (1 - beta2) * (value * value - flat_v[row, col])
                    if bug == "adam eps":  # Adam's placement: m_hat / (sqrt(v_hat) + eps)
                        flat_p[row, col] -= lr * (flat_m[row, col] / b1) / (
                            math.sqrt(flat_v[row, col] / b2) + h["eps"])
                    else:
                        flat_p[row, col] -= lr * math.sqrt(b2) / b1 * flat_m[row, col] / (
                            math.sqrt(flat_v[row, col]) + h["eps"])
            return params
        return step
    return make_step


def results_for(tmp_path, make_step, case_ids, name="results.json"):
    entries = [replay(CASES[i], make_step) for i in case_ids]
    path = tmp_path / name
    path.write_text(dumps(results_file(entries, implementation="mutant")))
    return path


ADAM_CASES = ["Adam/defaults/float64", "Adam/eps-dominated/float64"]


def diagnosed(tmp_path, make_step, case_ids):
    (d,) = diagnose(results_for(tmp_path, make_step, case_ids), SUITE)
    return d


def assert_named(d, entry_name, first_step=1):
    assert d.verdict == "reproduced", [(c.entry.name, c.excess) for c in d.closest]
    assert d.candidates[0].entry.name == entry_name, [c.entry.name for c in d.candidates]
    assert d.divergence[1].step == first_step


# ------------------------------------------------------------------------------ the tests
def test_a_correct_implementation_matches(tmp_path):
    d = diagnosed(tmp_path, adam(), ADAM_CASES)
    assert d.verdict == "matches" and not d.failing


@pytest.mark.parametrize("bug, entry", [
    ("eps hat", "eps on sqrt(v) (epsilon hat: Keras, TF, ONNX)"),
    ("eps in sqrt", "eps inside the square root (Adam)"),
    ("no m correction", "no bias correction of m"),
    ("no v correction", "no bias correction of v"),
    ("no correction", "no bias correction at all"),
    ("t from 0", "step counter from 0"),
    ("t ahead", "step counter one ahead"),
    ("keras eps", "eps = 1e-7 (Keras default)"),
    ("d2l eps", "eps = 1e-6 (d2l default)"),
])
def test_adam_mutants_are_named(tmp_path, bug, entry):
    assert_named(diagnosed(tmp_path, adam(bug), ADAM_CASES), entry)


def test_float32_accumulation_is_named(tmp_path):
    assert_named(diagnosed(tmp_path, adam(dtype="float32"), ADAM_CASES),
                 "float32 accumulation of float64")


def test_decay_mutants_are_named(tmp_path):
    assert_named(diagnosed(tmp_path, adam("decoupled"), ["Adam/weight-decay/float64"]),
                 "decoupled decay instead of L2")


def test_decay_after_the_update_is_named(tmp_path):
    def adamw(bug):
        inner = adam(bug)
        return lambda params, h: inner(params, dict(h, decoupled_weight_decay=True))
    d = diagnosed(tmp_path, adamw("decay after"), ["AdamW/weight-decay/float64"])
    assert_named(d, "decoupled decay after the update")
    d = diagnosed(tmp_path, adam(), ["AdamW/weight-decay/float64"])  # L2 where AdamW decouples
    assert_named(d, "L2 decay instead of decoupled")


def test_nesterov_toggled_is_named(tmp_path):
    assert_named(diagnosed(tmp_path, sgd("nesterov"), ["SGD/momentum/float64"]),
                 "Nesterov toggled (SGD)")  # d = (1 + μ) g from the first step


def test_adagrad_initial_accumulator_is_named(tmp_path):
    assert_named(diagnosed(tmp_path, adagrad("accumulator 0.1"), ["Adagrad/defaults/float64"]),
                 "Adagrad initial accumulator 0.1 (Keras, TF)")


@pytest.mark.parametrize("mutant, entry, case, first_step", [
    (adagrad("eps in sqrt"), "eps inside the square root (Adagrad)",
     "Adagrad/eps-dominated/float64", 1),
    (rmsprop("eps in sqrt"), "eps inside the square root (RMSprop)",
     "RMSprop/eps-dominated/float64", 1),
    # the first step is m/(|g| + eps) in both forms
    (adamax("eps added"), "eps added after the max (Adamax: Keras, TF, tfjs)",
     "Adamax/eps-dominated/float64", 2),
    # equal to torch's at constant lr: the schedule's first change of lr shows it
    (sgd("lr in buffer"), "lr inside the momentum buffer (SGD)",
     "SGD/momentum-lr-schedule/float64", None),
    # the other Nesterov form (Keras, Sutskever et al.): the same at constant lr
    (sgd("keras nesterov"), "lr inside the momentum buffer (SGD)",
     "SGD/nesterov-lr-schedule/float64", None),
    (rmsprop("lr in buffer"), "lr inside the momentum buffer (RMSprop)",
     "RMSprop/momentum-lr-schedule/float64", None),
])
def test_framework_conventions_are_named(tmp_path, mutant, entry, case, first_step):
    d = diagnosed(tmp_path, mutant, [case])
    assert d.verdict == "reproduced" and d.candidates[0].entry.name == entry
    assert d.candidates[0].entry.kind == "convention"
    if first_step is not None:
        assert d.divergence[1].step == first_step
    else:
        lrs = [s.lr for s in CASES[case].steps]
        changed = next(t for t in range(1, len(lrs)) if lrs[t] != lrs[t - 1])
        assert d.divergence[1].step == changed + 1


@pytest.mark.parametrize("bug, entry, case", [
    ("drop zeros", "explicit CSR zero dropped", "SparseAdam/csr-explicit-zeros/float64"),
    ("first kept", "duplicate CSR entries not summed (first kept)",
     "SparseAdam/csr-duplicates/float64"),
    ("last kept", "duplicate CSR entries not summed (last kept)",
     "SparseAdam/csr-duplicates/float64"),
])
def test_sparse_mutants_are_named(tmp_path, bug, entry, case):
    assert diagnosed(tmp_path, sparse_adam(), [case]).verdict == "matches"
    d = diagnosed(tmp_path, sparse_adam(bug), [case])
    assert d.verdict == "reproduced" and d.candidates[0].entry.name == entry
    assert d.divergence[1].step >= 1


def test_sparse_adam_with_adams_eps_placement_is_named(tmp_path):
    d = diagnosed(tmp_path, sparse_adam("adam eps"), ["SparseAdam/eps-dominated/float64"])
    assert_named(d, "eps on sqrt(v_hat) (Adam's placement in SparseAdam)")
    assert d.candidates[0].entry.kind == "convention"


@pytest.mark.parametrize("mutant, case", [
    (sgd(), "SGD/momentum-lr-schedule/float64"),
    (sgd(), "SGD/nesterov/float64"),
    (sgd(), "SGD/nesterov-lr-schedule/float64"),
    (adagrad(), "Adagrad/eps-dominated/float64"),
    (rmsprop(), "RMSprop/eps-dominated/float64"),
    (rmsprop(), "RMSprop/momentum-lr-schedule/float64"),
    (adamax(), "Adamax/eps-dominated/float64"),
    (sparse_adam(), "SparseAdam/eps-dominated/float64"),
])
def test_each_correct_mutant_matches(tmp_path, mutant, case):
    # the mutants' correct branches are the reference: else a named mistake proves nothing
    d = diagnosed(tmp_path, mutant, [case])
    assert d.verdict == "matches" and not d.failing


def test_an_unrelated_mistake_is_no_known_variant_for_rmsprop(tmp_path):
    def wrong(params, h):  # the square average of |g|, not g²: no catalogue entry does this
        step = rmsprop()(params, h)
        return lambda grads, lr: step([np.sqrt(np.abs(dense(g, p.shape))) * np.sign(
            dense(g, p.shape)) for g, p in zip(grads, params)], lr)
    d = diagnosed(tmp_path, wrong, ["RMSprop/momentum-lr-schedule/float64"])
    assert d.verdict == "no known variant" and not d.candidates and d.closest


def test_an_unrelated_mistake_is_no_known_variant(tmp_path):
    def wrong(params, h):  # momentum of the gradient's sign: no catalogue entry does this
        step = adam()(params, h)
        return lambda grads, lr: step([None if g is None else np.sign(dense(g, p.shape))
                                       for g, p in zip(grads, params)], lr)
    d = diagnosed(tmp_path, wrong, ADAM_CASES)
    assert d.verdict == "no known variant" and not d.candidates and d.closest


def test_only_a_pair_reproduces_keras(tmp_path):
    # Keras's Adam: eps on sqrt(v) *and* its default eps 1e-7; neither alone reproduces it
    d = diagnosed(tmp_path, adam("keras"), ["Adam/defaults/float64"])
    assert d.verdict == "reproduced"
    assert set(d.candidates[0].entry.parts) == {
        "eps on sqrt(v) (epsilon hat: Keras, TF, ONNX)", "eps = 1e-7 (Keras default)"}


def test_candidates_that_tie_are_told_apart(tmp_path):
    # two switches that agree wherever eps is 1e-8 (as in the diagnosed case), not elsewhere
    ten_times = replace(CATALOGUE_BY_NAME["eps = 1e-7 (Keras default)"], name="eps times 10",
                        hyper=None, per_step=lambda t, h: {"eps": 10.0})
    catalogue = (CATALOGUE_BY_NAME["eps = 1e-7 (Keras default)"], ten_times)
    path = results_for(tmp_path, adam("keras eps"), ["Adam/defaults/float64"])
    (d,) = diagnose(path, SUITE, catalogue=catalogue)
    assert {c.entry.name for c in d.candidates} == {"eps = 1e-7 (Keras default)", "eps times 10"}
    ((_, _, case),) = d.tell_apart
    assert CASES[case].hyperparameters["eps"] != 1e-8  # e.g. Adam/large-eps


def test_the_catalogue_entries_are_documented():
    names = [e.name for e in CATALOGUE]
    assert len(names) == len(set(names))
    assert all(e.doc and e.kind in ("convention", "default", "mistake") for e in CATALOGUE)


def test_every_catalogue_entry_has_a_mutant_here():
    # each entry is named by a test of this file (the "at least one per entry")
    source = Path(__file__).read_text()
    assert [e.name for e in CATALOGUE if f'"{e.name}"' not in source] == []


def test_csr_rewrites():
    g = CsrGrad((2, 3), np.array([0, 3, 4]), np.array([1, 1, 2, 0]),
                np.array([1.0, 2.0, 0.0, 5.0]))
    assert drop_explicit_zeros(g).rows() == [(0, 1, 1.0), (0, 1, 2.0), (1, 0, 5.0)]
    assert keep_first_duplicate(g).rows() == [(0, 1, 1.0), (0, 2, 0.0), (1, 0, 5.0)]
    assert keep_last_duplicate(g).rows() == [(0, 1, 2.0), (0, 2, 0.0), (1, 0, 5.0)]


def test_bad_input_gets_a_clear_error(tmp_path, capsys):
    path = results_for(tmp_path, adam(), ["Adam/defaults/float64"])
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
    path = results_for(tmp_path, adam("eps hat"), ADAM_CASES)
    assert main(["diagnose", str(path), "--optimizer", "Adam"]) == 1
    out = capsys.readouterr().out
    assert "reproduced by" in out and "1. eps on sqrt(v)" in out and "step 1" in out
    good = results_for(tmp_path, adam(), ADAM_CASES, "good.json")
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
