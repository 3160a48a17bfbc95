"""A tiny smoke run of ``npoptim bench``: the cases run end to end and report something, and a
case that fails is reported without losing the others.

Benchmarks are not timed tests: nothing here checks a speed.
"""
import json
import re

import numpy as np
import pytest
import scipy.sparse

from npoptim.bench import floors, workloads
from npoptim.bench.runner import DEFAULT_CASES, format_targets, main
from npoptim.kernels.drivers import ROWS_BLOCK
from npoptim.kernels.parallel import (get_parallel_threshold, parallel_threshold_set,
                                      set_parallel_threshold)


#: what each default case leaves in the JSON output: the group names of its rows
CASE_GROUPS = {"sparse": "sparse ", "dense": "dense ", "threads": "threads: ",
               "startup": "start-up: "}


def _check_quick_run(out, md, torch):
    """The JSON and Markdown of a whole ``--quick`` run: every default case is in them, each
    target once in the table, in the order of its number (an int), and nothing failed."""
    result = json.loads(out.read_text())
    assert result["quick"] and result["environment"]["numba"]
    assert result["cases"] == list(DEFAULT_CASES)
    assert result["failures"] == [] and result["skipped"] == []
    assert bool(result["environment"]["torch"]) == torch
    groups = {row["group"] for row in result["rows"]}
    for case, prefix in CASE_GROUPS.items():
        assert any(g.startswith(prefix) for g in groups), (case, sorted(groups))
    assert len(result["sparse16"]) == 4 and any(g.startswith("sparse16: ") for g in groups)
    from npoptim.bench import precision16
    cells = {(c["optimizer"], c["format"], c["mode"]) for c in result["precision16"]}
    assert {name for name, _, _ in cells} == {name for name, _, _ in precision16.OPTIMIZERS}
    assert ("Adam", "float16", "fused") in cells and ("SGD", "bfloat16", "fused") not in cells
    assert all((precision16.TORCH in c) == torch for c in result["precision16"])
    assert all(row["ms"] is None or row["ms"] > 0 for row in result["rows"])
    names = {row["name"] for row in result["rows"]}
    assert {"SparseAdam step (ready CSR)", "Adam", "LARS",
            "SparseAdam (CSR gradient): warm cache"} <= names
    assert ("torch SparseAdam step" in names) == torch
    assert ("torch fused Adam" in names) == torch

    targets = result["targets"]
    assert all(type(t["target"]) is int for t in targets), {t["target"] for t in targets}
    assert {t["target"] for t in targets} >= {1, 2, 3, 4, 5, 6, 111, 112, 113, 114, 121}
    identical = [t for t in targets if t["what"].startswith("results bit-identical")]
    assert identical and identical[0]["met"], identical
    table = re.findall(r"^\| (\d+) \|", md.read_text(), re.MULTILINE)
    assert [int(n) for n in table] == sorted(t["target"] for t in targets)
    return result


def test_quick_run_end_to_end(tmp_path, capsys):
    """``npoptim bench --quick`` through the command line, every default case (torch's rows
    left out: the test with torch is below)."""
    from npoptim.cli import main as cli_main

    out, md = tmp_path / "bench.json", tmp_path / "bench.md"
    assert cli_main(["bench", "--quick", "--no-torch", "--json", str(out), "--markdown",
                     str(md)]) == 0
    _check_quick_run(out, md, torch=False)
    printed = capsys.readouterr().out
    assert "== targets" in printed and " 111. " in printed


@pytest.mark.needs("torch")
def test_quick_run_with_torch_end_to_end(tmp_path):
    """``npoptim bench --quick`` as a user types it, torch's rows included."""
    from npoptim.cli import main as cli_main

    out, md = tmp_path / "bench.json", tmp_path / "bench.md"
    assert cli_main(["bench", "--quick", "--json", str(out), "--markdown", str(md)]) == 0
    result = _check_quick_run(out, md, torch=True)
    assert all(c.get("torch bf16 SparseAdam", 0) > 0 for c in result["sparse16"])


def test_a_failing_case_is_recorded_and_the_run_goes_on(tmp_path, monkeypatch, capsys):
    def planted(report, nrows, width, density, **kwargs):
        if density == 0.01:
            raise RuntimeError("planted failure")
        return real(report, nrows, width, density, **kwargs)
    real = workloads.sparse
    monkeypatch.setattr(workloads, "sparse", planted)
    out, md = tmp_path / "bench.json", tmp_path / "bench.md"
    assert main(["--quick", "--cases", "sparse,dense", "--no-torch", "--json", str(out),
                 "--markdown", str(md)]) == 1
    result = json.loads(out.read_text())
    assert [(f["case"], f["error"]) for f in result["failures"]] == [
        ("sparse 1.0%", "RuntimeError: planted failure")]
    assert "in planted" in result["failures"][0]["traceback"]
    assert {row["group"] for row in result["rows"]} == {  # the rest ran
        "sparse 2,000x8 f32, 10.0% rows", "dense 20,000 float32"}
    text = md.read_text()
    assert "**Failed**" in text and "sparse 1.0%: RuntimeError: planted failure" in text
    assert "| 3 |" in text and "| 4 |" in text  # the targets of the parts that ran
    captured = capsys.readouterr()
    assert "sparse 1.0%: RuntimeError: planted failure" in captured.out
    assert "planted failure" in captured.err and "1 case(s) failed" in captured.err


def test_a_target_number_is_an_int():
    report = workloads.Report()
    with pytest.raises(TypeError, match="int, not str"):
        report.target("1", "a target", 1.0, "<= 2", True)
    report.target(101, "later", 1.0, "<= 2", True)
    report.target(2, "earlier", None, "-", None)
    # sorted by number, not as text ("101" < "2")
    assert [line.split(".")[0].strip() for line in
            format_targets(report.targets).splitlines()[1:]] == ["2", "101"]


def test_unknown_case_is_refused(capsys):
    assert main(["--quick", "--cases", "nope"]) == 2


def test_a_missing_library_is_recorded_as_a_skip(tmp_path, monkeypatch):
    from npoptim.precision import formats

    def missing():
        raise ImportError("no ml_dtypes here")
    monkeypatch.setattr(formats, "bfloat16_dtype", missing)
    out, md = tmp_path / "bench.json", tmp_path / "bench.md"
    assert main(["--quick", "--cases", "sparse16", "--no-torch", "--json", str(out),
                 "--markdown", str(md)]) == 0
    result = json.loads(out.read_text())
    assert result["skipped"] == [{"case": "sparse16", "reason": "no ml_dtypes here"}]
    assert "Skipped: sparse16 (no ml_dtypes here)." in md.read_text()


def test_lookups_have_the_requested_distinct_rows():
    ids, rows = workloads.lookups(1000, 0.05, np.random.default_rng(0))
    assert np.array_equal(np.unique(ids), rows) and rows.size == 50 and ids.size == 200


def test_floor_leaves_the_values_alone():
    p, g, s = np.arange(5.0), np.ones(5), np.full(5, 3.0)
    for parallel in (False, True):
        # one element-wise pass, then LARS's two: norms only (nothing written), then update
        floors.passes_floor([([g], [p, s])], parallel)()
        floors.passes_floor([([p, g], []), ([g], [p, s])], parallel)()
    assert np.array_equal(p, np.arange(5.0)) and np.array_equal(s, np.full(5, 3.0))
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    for parallel in (False, True):
        floors.rows_floor(table, [table.copy(), table.copy()], np.array([1, 3]),
                          np.ones(6, np.float32), 3, parallel)()
    assert np.array_equal(table, np.arange(12, dtype=np.float32).reshape(4, 3))


# ------------------------------------------- invariants the speed work relies on (fast)
def test_parallel_threshold_is_settable_and_restored():
    before = get_parallel_threshold()
    with parallel_threshold_set(0):
        assert get_parallel_threshold() == 0
        with parallel_threshold_set(None):
            assert get_parallel_threshold() == np.iinfo(np.int64).max
    assert get_parallel_threshold() == before
    with pytest.raises(ValueError):
        set_parallel_threshold(-1)


def test_sparse_and_dense_steps_do_not_depend_on_the_threshold():
    from npoptim import embedding_row_grad
    from npoptim.optim.adam import Adam
    from npoptim.optim.sparse_adam import SparseAdam

    results = []
    for threshold in (None, 0):
        with parallel_threshold_set(threshold):
            rng = np.random.default_rng(3)
            table = rng.standard_normal((40_000, 8)).astype(np.float32)
            partial = rng.standard_normal((40_000, 8)).astype(np.float32)
            flat = rng.standard_normal(70_000)
            sparse, dense = SparseAdam([table, partial]), Adam([flat])
            for _ in range(2):
                ids = rng.integers(0, 40_000, 30_000)
                # rows with some of their columns stored: the per-entry path, and parallel
                # blocks that begin inside a row
                some = scipy.sparse.random_array((40_000, 8), density=0.3, format="csr",
                                                 dtype=np.float32, rng=rng)
                assert some.nnz > 5 * ROWS_BLOCK
                sparse.step([embedding_row_grad(ids, np.ones((ids.size, 8), np.float32),
                                                40_000), some])
                dense.step([rng.standard_normal(70_000)])
            results.append((table, partial, flat))
    assert all(np.array_equal(a, b) for a, b in zip(*results))


def test_a_built_gradient_whose_arrays_are_replaced_is_validated_again():
    from npoptim import embedding_row_grad
    from npoptim.optim.sparse_adam import SparseAdam

    grad = embedding_row_grad([1, 3], np.ones((2, 4), np.float32), 5)
    with pytest.raises(ValueError):
        grad.indptr[2] = 100  # read-only
    with pytest.raises(ValueError):
        grad.indptr.flags.writeable = True
    indptr = grad.indptr.copy()
    indptr[2] = 100
    grad.indptr = indptr
    table = np.zeros((5, 4), np.float32)
    with pytest.raises(ValueError, match="points past"):
        SparseAdam([table]).step([grad])
    assert not table.any()
