"""The golden-file CLI: ``npoptim list``, ``npoptim golden``, ``npoptim verify``."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from npoptim import registry
from npoptim.cli import main
from npoptim.golden import schema, verify as verification
from npoptim.golden.replay import npoptim_make_step, replay, results_file

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "reference_results"


def run_cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


# ---------------------------------------------------------------------------------- list
def test_list_shows_every_optimizer_with_defaults_and_sparse_kind(capsys):
    code, out, _ = run_cli(capsys, "list")
    assert code == 0
    for name in registry.OPTIMIZERS:
        assert f"\n{name}  (" in "\n" + out
    assert "Adam  (torch.optim.Adam; sparse: dense-only)" in out
    assert "SparseAdam  (torch.optim.SparseAdam; sparse: lazy)" in out
    assert "lr=0.001" in out and "betas=(0.9, 0.999)" in out


def test_list_json_and_variants(capsys):
    code, out, _ = run_cli(capsys, "list", "--json", "Adam", "Adagrad")
    info = {d["name"]: d for d in json.loads(out)}
    assert code == 0 and set(info) == {"Adam", "Adagrad"}
    assert info["Adagrad"]["sparse_kind"] == "exact"
    assert info["Adam"]["hyperparameters"]["eps"] == 1e-8
    assert "amsgrad" in info["Adam"]["switches"]
    code, out, _ = run_cli(capsys, "list", "--json", "LAMB")
    lamb = json.loads(out)[0]
    assert "apex" in lamb["variants"] and lamb["hyperparameters"]["variant"] == "paper_v5"
    assert run_cli(capsys, "list", "NoSuchOpt")[0] == 2


def test_list_names_each_optimizer_s_sources_and_each_variant_with_what_it_sets(capsys):
    code, out, _ = run_cli(capsys, "list", "Shampoo", "SOAP")
    assert code == 0
    assert ("  sources: paper https://arxiv.org/abs/1802.09568; implementation "
            "https://github.com/kozistr/pytorch_optimizer/blob/v4.1.0/pytorch_optimizer/"
            "optimizer/shampoo.py") in out
    assert "    pytorch_optimizer (= shampoo) [default]: inverse_root='eigh'" in out
    assert "    authors (= nikhilvyas): normalize_floor=1e-30, merge_rule='authors'" in out
    code, out, _ = run_cli(capsys, "list", "--json", "Shampoo")
    info = json.loads(out)[0]
    assert info["sources"]["paper"] == "https://arxiv.org/abs/1802.09568"
    assert info["variant_switches"]["scalable"]["inverse_root"] == "newton"


# -------------------------------------------------------------------------------- golden
def test_golden_custom_sparse_case_roundtrips_through_verify(capsys, tmp_path):
    out = tmp_path / "case.json"
    argv = ["golden", "SparseAdam", "--lr", "1e-2", "--shape", "200x16", "--density", "0.05",
            "--steps", "10", "--dtype", "float32", "--seed", "0", "-o", str(out)]
    code, _, err = run_cli(capsys, *argv)
    assert code == 0, err
    doc = schema.load(out, kind="cases")
    case = doc.cases[0]
    assert case.optimizer == "SparseAdam" and case.dtype == "float32" and len(case.steps) == 10
    assert case.params[0].shape == (200, 16)
    assert all(g.__class__.__name__ == "CsrGrad" for s in case.steps for g in s.grads)
    assert case.hyperparameters["lr"] == 1e-2
    # deterministic: the same command gives the same bytes
    again = tmp_path / "again.json"
    run_cli(capsys, *argv[:-1], str(again))
    assert again.read_bytes() == out.read_bytes()
    code, text, _ = run_cli(capsys, "verify", str(out))
    assert code == 0 and "OK: all 1 cases pass" in text


def test_golden_hyperparameters_variant_and_schedule(capsys, tmp_path):
    out = tmp_path / "adam.json"
    code, _, err = run_cli(capsys, "golden", "Adam", "--variant", "amsgrad", "--betas",
                           "0.8,0.99", "--set", "weight_decay=0.1", "--shape", "4x3",
                           "--shape", "5", "--schedule", "warmup-cosine", "--dtype",
                           "float64", "--steps", "12", "-o", str(out))
    assert code == 0, err
    case = schema.load(out).cases[0]
    assert case.hyperparameters["amsgrad"] is True
    assert case.hyperparameters["betas"] == [0.8, 0.99]
    assert case.hyperparameters["weight_decay"] == 0.1
    assert "lr-schedule" in case.flags and "multi-param" in case.flags
    assert len({s.lr for s in case.steps}) > 1
    assert "max_exp_avg_sq" in case.steps[0].expected_state[0]
    code, text, err = run_cli(capsys, "golden", "LAMB", "--variant", "apex", "-o", "-")
    assert code == 0, err
    assert json.loads(text)["cases"][0]["variant"] == "apex"


@pytest.mark.parametrize("argv, words", [
    (["golden", "Adam", "--set", "nosuch=1"], "has no hyperparameter(s) nosuch"),
    (["golden", "Adam", "--grad", "csr"], "does not take CSR gradients"),
    (["golden", "Adam", "--variant", "bogus"], "no variant or switch 'bogus'"),
    (["golden", "Adam", "--shape", "3y4"], "--shape '3y4'"),
    (["golden", "Adam", "--density", "0"], "--density must be in (0, 1]"),
    (["golden", "NoSuchOpt"], "unknown optimizer"),
    (["golden", "Adam", "--lr", "-1"], "Invalid learning rate"),
])
def test_golden_errors(capsys, argv, words):
    code, _, err = run_cli(capsys, *argv, "-o", "-")
    assert code == 2 and words in err, err


# -------------------------------------------------------------------------------- verify
def _results(case_file, ids=None, perturb=None):
    cases = schema.load(case_file).cases
    out = []
    for case in cases:
        if ids and case.id not in ids:
            continue
        entry = replay(case, npoptim_make_step(case.optimizer))
        if perturb:
            perturb(case, entry)
        out.append(entry)
    return results_file(out, "test")


def _write(tmp_path, doc, name="results.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_verify_results_file_pass_and_per_step_table(capsys, tmp_path):
    results = _write(tmp_path, _results(SUITE / "cases" / "Adagrad.json"))
    code, out, _ = run_cli(capsys, "verify", str(SUITE / "cases" / "Adagrad.json"),
                           str(results), "--steps")
    assert code == 0
    lines = [ln for ln in out.splitlines() if ln.startswith("Adagrad/defaults/float32 ")]
    assert len(lines) == 12  # one row per step
    assert "max abs err" in out and "max rel/scale" in out and "max ulp" in out
    assert "OK: all" in out
    code, out, _ = run_cli(capsys, "verify", str(SUITE / "cases" / "Adagrad.json"),
                           str(results))
    lines = [ln for ln in out.splitlines() if ln.startswith("Adagrad/defaults/float32 ")]
    assert code == 0 and len(lines) == 1 and "  all  " in lines[0]  # a passing case: one row


def test_verify_streams_a_report_per_case_before_the_next_case_runs(monkeypatch):
    from npoptim.golden import verify as verifying
    events = []
    real = verifying.npoptim_result

    def replayed(case):
        events.append(("replay", case.id))
        return real(case)
    monkeypatch.setattr(verifying, "npoptim_result", replayed)
    run = verifying.Verification(SUITE, optimizers=["SignSGD"], ids=["*/float64"])
    assert len(run.cases) > 2 and not events  # the selection is known before any case runs
    for report in run.reports():
        events.append(("report", report.case_id))
    assert events == [(kind, c.id) for c in run.cases for kind in ("replay", "report")]


def test_verify_reports_first_divergence_and_exits_1(capsys, tmp_path):
    target = "Adagrad/lr-decay/float64"

    def perturb(case, entry):
        if case.id == target:
            for step in entry["steps"][6:]:
                step["params"][0]["data"][4] *= 1.001
    results = _write(tmp_path, _results(SUITE / "cases" / "Adagrad.json", perturb=perturb))
    code, out, _ = run_cli(capsys, "verify", str(SUITE), str(results), "--optimizer",
                           "Adagrad")
    assert code == 1
    assert f"-> {target} diverges at step 7: params[0][0, 4]" in out
    assert "FAILED: 1 of" in out and f"(first: {target}, diverges at step 7)" in out
    rows = [ln for ln in out.splitlines() if ln.startswith(target + " ")]
    assert len(rows) == 12 and "FAIL" in rows[6]  # a failing case: a row per step
    code, out, _ = run_cli(capsys, "verify", str(SUITE), str(results), "--case", target,
                           "--summary")
    assert code == 1 and out.count(target) == 3  # summary row, divergence, closing line


def test_verify_missing_results_fail(capsys, tmp_path):
    results = _write(tmp_path, _results(SUITE / "cases" / "Adadelta.json",
                                        ids={"Adadelta/defaults/float32"}))
    code, out, _ = run_cli(capsys, "verify", str(SUITE / "cases" / "Adadelta.json"),
                           str(results), "--summary")
    assert code == 1
    assert "Adadelta/defaults/float64" in out and "MISSING: no results for this case" in out


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d["cases"][0]["steps"][2]["params"][0].__setitem__("shape", [5, 3]),
     "steps[2].params[0].shape"),
    (lambda d: d["cases"][0]["steps"][1]["params"][0].__setitem__("dtype", "float64"),
     "steps[1].params[0].dtype"),
    (lambda d: d["cases"][0]["steps"][0]["params"][0]["data"].__setitem__(3, "1.0"),
     "steps[0].params[0].data[3]"),
    (lambda d: d["cases"][0]["steps"][0].pop("params"), "steps[0].params"),
    (lambda d: d.__setitem__("kind", "cases"), "kind"),
])
def test_verify_malformed_results_name_file_case_field(capsys, tmp_path, mutate, field):
    doc = _results(SUITE / "cases" / "Adadelta.json", ids={"Adadelta/defaults/float32"})
    mutate(doc)
    results = _write(tmp_path, doc)
    code, out, err = run_cli(capsys, "verify", str(SUITE / "cases" / "Adadelta.json"),
                             str(results))
    assert code == 2, out
    assert str(results) in err and field in err, err
    if field != "kind":
        assert "case 'Adadelta/defaults/float32'" in err


def test_verify_malformed_cases_file(capsys, tmp_path):
    doc = json.loads((SUITE / "cases" / "Adadelta.json").read_text())
    doc["cases"][1]["steps"][0]["grads"][0]["data"] = [1.0]
    bad = _write(tmp_path, doc, "cases.json")
    code, _, err = run_cli(capsys, "verify", str(bad))
    assert code == 2
    assert str(bad) in err and "case 'Adadelta/defaults/float64'" in err
    assert "steps[0].grads[0].data: has 1 values" in err


def test_verify_npoptim_itself_on_a_selection(capsys):
    code, out, _ = run_cli(capsys, "verify", str(SUITE), "--case", "SGD/*/float64",
                           "--summary")
    assert code == 0 and "OK: all" in out and "SGD/csr-momentum/float64" in out
    code, _, err = run_cli(capsys, "verify", str(SUITE), "--case", "Nothing/*")
    assert code == 2 and "no case matches" in err


def test_python_dash_m_npoptim_and_console_script_entry():
    out = subprocess.run([sys.executable, "-m", "npoptim", "verify", str(SUITE / "cases" /
                                                                        "Rprop.json"),
                          "--case", "Rprop/defaults/*", "--summary"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Rprop/defaults/float64" in out.stdout
    cfg = (ROOT / "setup.cfg").read_text()
    assert "npoptim = npoptim.cli:main" in cfg


# ------------------------------------------------------------------- golden, low precision
@pytest.mark.parametrize("dtype, mode", [("bfloat16", "per-op"), ("float16", "fused"),
                                         ("bfloat16", "stochastic"), ("float16", "stochastic"),
                                         ("float16", "master-weights"), ("bfloat16", "kahan")])
def test_golden_writes_a_16_bit_case_in_each_mode(capsys, tmp_path, dtype, mode):
    pytest.importorskip("ml_dtypes")
    out = tmp_path / "case.json"
    code, _, err = run_cli(capsys, "golden", "AdamW", "--lr", "1e-2", "--shape", "4x8",
                           "--dtype", dtype, "--precision", mode, "-o", str(out))
    assert code == 0, err
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["schema_version"] == 3
    case = schema.load(out, kind="cases").cases[0]
    assert case.dtype == dtype and case.params[0].dtype.name == dtype
    assert re.fullmatch(f"AdamW/{mode}/custom-4x8-dense-d1-seed0-h[0-9a-f]{{8}}/{dtype}", case.id)
    assert (case.precision["seed"] is not None) == (mode == "stochastic")
    assert case.tolerance.ulp == 1
    code, text, _ = run_cli(capsys, "verify", str(out), "--summary")
    assert code == 0 and "OK: all 1 cases pass" in text


@pytest.mark.parametrize("name, dtype", [("NAdam", "bfloat16"), ("RAdam", "float16"),
                                         ("ASGD", "bfloat16"), ("Rprop", "float16")])
def test_golden_writes_16_bit_cases_of_the_later_per_op_families(capsys, tmp_path, name,
                                                                 dtype):
    pytest.importorskip("ml_dtypes")
    out = tmp_path / "case.json"
    code, _, err = run_cli(capsys, "golden", name, "--shape", "4x8", "--dtype", dtype,
                           "--precision", "per-op", "-o", str(out))
    assert code == 0, err
    case = schema.load(out, kind="cases").cases[0]
    assert case.id == f"{name}/per-op/custom-4x8-dense-d1-seed0/{dtype}"
    code, text, _ = run_cli(capsys, "verify", str(out), "--summary")
    assert code == 0 and "OK: all 1 cases pass" in text
    code, _, err = run_cli(capsys, "golden", name, "--shape", "4x8", "--dtype", dtype,
                           "--precision", "fused", "-o", str(tmp_path / "fused.json"))
    assert code == 2 and "rounding must be one of 'per-op'" in err


@pytest.mark.parametrize("name, argv, case_id, kind", [
    ("Adafactor", ["--shape", "4x8"], "Adafactor/per-op/custom-4x8-dense-d1-seed0", "dense-only"),
    ("Muon", ["--shape", "4x8"], "Muon/per-op/custom-4x8-dense-d1-seed0", "dense-only"),
    ("LBFGS", ["--shape", "32"], "LBFGS/per-op/custom-32-objective-seed0", "dense-only"),
    ("SparseAdam", ["--shape", "8x4", "--density", "0.5"],
     "SparseAdam/per-op/custom-8x4-csr-d0.5-seed0", "lazy"),
])
def test_golden_writes_16_bit_cases_of_adafactor_muon_lbfgs_and_sparse_adam(
        capsys, tmp_path, name, argv, case_id, kind):
    # LBFGS's case is driven by its stored objective, SparseAdam's has CSR gradients
    pytest.importorskip("ml_dtypes")
    out = tmp_path / "case.json"
    code, _, err = run_cli(capsys, "golden", name, *argv, "--steps", "3", "--dtype",
                           "bfloat16", "-o", str(out))
    assert code == 0, err
    case = schema.load(out, kind="cases").cases[0]
    assert (case.id, case.raw["sparse_kind"]) == (f"{case_id}/bfloat16", kind)
    assert (case.objective is not None) == (name == "LBFGS")
    code, text, _ = run_cli(capsys, "verify", str(out), "--summary")
    assert code == 0 and "OK: all 1 cases pass" in text


@pytest.mark.parametrize("argv, message", [
    (["--dtype", "float32", "--precision", "fused"], "needs --dtype bfloat16 or float16"),
    (["--dtype", "bfloat16", "--precision-seed", "3"], "is for --precision stochastic"),
    (["--dtype", "bfloat16", "--grad", "csr"], "does not take CSR gradients"),
])
def test_golden_refuses_bad_16_bit_requests(capsys, tmp_path, argv, message):
    pytest.importorskip("ml_dtypes")
    code, _, err = run_cli(capsys, "golden", "Adam", *argv, "-o", str(tmp_path / "c.json"))
    assert code == 2 and message in err
    assert not (tmp_path / "c.json").exists()


def test_golden_writes_a_quantized_state_case(capsys, tmp_path):
    out = tmp_path / "case.json"
    code, _, err = run_cli(capsys, "golden", "AdamW", "--lr", "1e-2", "--shape", "16x256",
                           "--shape", "32", "--precision", "torchao-4bit", "-o", str(out))
    assert code == 0, err
    case = schema.load(out, kind="cases").cases[0]
    assert case.dtype == "float32" and case.precision["quantization"] == "torchao-4bit"
    assert "quantized-state" in case.flags and case.tolerance.ulp is None
    assert re.fullmatch("AdamW/torchao-4bit/custom-16x256_32-dense-d1-seed0-h[0-9a-f]{8}/float32",
                        case.id)
    assert all(s.expected_state is None for s in case.steps[:-1])
    big, small = case.steps[-1].expected_state
    assert big["exp_avg.codes"].shape == (2048,) and big["exp_avg.scale"].shape == (32,)
    assert set(small) == {"step", "exp_avg", "exp_avg_sq"}  # below 4096: float32 moments
    code, text, _ = run_cli(capsys, "verify", str(out), "--summary")
    assert code == 0 and "OK: all 1 cases pass" in text


def test_golden_writes_a_bitsandbytes_case(capsys, tmp_path):
    out = tmp_path / "case.json"
    code, _, err = run_cli(capsys, "golden", "AdamW", "--lr", "1e-2", "--shape", "352",
                           "--set", "min_8bit_size=256", "--precision", "bnb-8bit", "-o",
                           str(out))
    assert code == 0, err
    case = schema.load(out, kind="cases").cases[0]
    assert case.precision["quantization"] == "bnb-8bit"
    assert case.hyperparameters["min_8bit_size"] == 256
    state = case.steps[-1].expected_state[0]
    assert state["state1"].shape == (352,) and state["absmax1"].shape == (2,)  # 256 + 96
    code, text, _ = run_cli(capsys, "verify", str(out), "--summary")
    assert code == 0 and "OK: all 1 cases pass" in text


@pytest.mark.parametrize("optimizer, argv, message", [
    ("AdamW", ["--dtype", "bfloat16", "--precision", "torchao-8bit"], "needs --dtype float32"),
    ("SGD", ["--precision", "torchao-8bit"], "has no torchao-8bit SGD"),
    ("SGD", ["--precision", "bnb-8bit"], "has no bnb-8bit SGD"),
    ("AdamW", ["--precision", "bnb-8bit", "--set", "block_size=128"],
     "has no hyperparameter(s) block_size"),
])
def test_golden_refuses_bad_quantized_requests(capsys, tmp_path, optimizer, argv, message):
    code, _, err = run_cli(capsys, "golden", optimizer, *argv, "-o", str(tmp_path / "c.json"))
    assert code == 2 and message in err
    assert not (tmp_path / "c.json").exists()


@pytest.mark.parametrize("setting, message", [
    ("amsgrad=yes", "--set amsgrad=yes: VALUE is JSON"),
    ("amsgrad=1", "--set amsgrad=1: amsgrad is true or false"),
    ("eps_mode=bogus", "eps_mode must be one of"),
])
def test_golden_set_takes_json_and_words_only_where_the_option_takes_words(capsys, tmp_path,
                                                                          setting, message):
    out = tmp_path / "c.json"
    code, _, err = run_cli(capsys, "golden", "Adam", "--set", setting, "-o", str(out))
    assert code == 2 and message in err
    assert not out.exists()


def test_golden_custom_cases_with_other_hyperparameters_have_other_ids(capsys, tmp_path):
    ids = []
    for argv in ([], ["--lr", "0.01"], ["--lr", "0.02"], ["--set", "eps_mode=eps_hat"],
                 ["--set", 'eps_mode="eps_hat"'], ["--set", "amsgrad=true"]):
        out = tmp_path / "c.json"
        code, _, err = run_cli(capsys, "golden", "Adam", "--steps", "2", *argv, "-o", str(out))
        assert code == 0, err
        ids.append(schema.load(out, kind="cases").cases[0].id)
    assert ids[0] == "Adam/custom-3x5-dense-d1-seed0/float32"   # no hyperparameter set
    assert ids[3] == ids[4]                                   # a bare word is the JSON word
    assert len(set(ids)) == 5, ids


def test_cli_names_an_unknown_optimizer_with_the_closest_one(capsys):
    for argv in (["verify", "reference_results", "--optimizer", "Adamm"],
                 ["diagnose", "results.json", "--optimizer", "Adamm"],
                 ["golden", "Adamm"]):
        code, _, err = run_cli(capsys, *argv)
        assert code == 2 and "unknown optimizer 'Adamm' (did you mean 'Adam'?)" in err, argv
    code, out, _ = run_cli(capsys, "list", "Adamm")
    assert code == 2 and "did you mean 'Adam'?" in out
    code, out, _ = run_cli(capsys, "list", "sparseadam")
    assert code == 0 and out.startswith("SparseAdam")


def test_verify_says_what_it_did_not_select_and_how_to_select_it(capsys):
    code, out, _ = run_cli(capsys, "verify", str(SUITE), "--optimizer", "SignSGD", "--summary")
    assert code == 0
    note = [line for line in out.splitlines() if line.startswith("note: ")]
    assert len(note) == 1 and " cases selected; not selected: " in note[0]
    assert "16-bit and quantized cases (--flavor torch" not in note[0]  # SignSGD has none
    assert "left out by --optimizer, --case, --tag or --exclude-tag" in note[0]
    code, out, _ = run_cli(capsys, "verify", str(SUITE), "--optimizer", "Adagrad",
                           "--summary")
    assert code == 0
    assert re.search(r"note: \d+ of \d+ cases selected; not selected: \d+ flavor cases "
                     r"\(keras, onnx, optax, tfjs: --flavor NAME, or --flavor all\); \d+ "
                     r"16-bit and quantized cases \(--flavor torch", out)


def test_verify_reports_progress_as_npoptim_replays_the_cases():
    from npoptim.golden import compare
    calls = []
    reports, _ = verification.verify(SUITE, optimizers=["SignSGD"],
                                progress=lambda done, total: calls.append((done, total)))
    assert [done for done, _ in calls] == list(range(1, len(reports) + 1))
    assert {total for _, total in calls} == {len(reports)}
