"""A tiny smoke run of ``npoptim bench``: the cases run end to end and report something.

Benchmarks are not timed tests: nothing here checks a speed.
"""
import json

import numpy as np
import pytest
import scipy.sparse

from npoptim.bench import floors, workloads
from npoptim.bench.runner import main
from npoptim.kernels.drivers import ROWS_BLOCK
from npoptim.kernels.parallel import (get_parallel_threshold, parallel_threshold_set,
                                      set_parallel_threshold)


def test_quick_run_writes_json_and_markdown(tmp_path, capsys):
    out, md = tmp_path / "bench.json", tmp_path / "bench.md"
    assert main(["--quick", "--cases", "sparse,dense,threads", "--no-torch", "--json",
                 str(out), "--markdown", str(md)]) == 0
    result = json.loads(out.read_text())
    assert result["quick"] and result["environment"]["numba"]
    names = {row["name"] for row in result["rows"]}
    assert "SparseAdam step (ready CSR)" in names and "Adam" in names
    assert all(row["ms"] is None or row["ms"] > 0 for row in result["rows"])
    identical = [t for t in result["targets"] if t["what"].startswith("results bit-identical")]
    assert identical and identical[0]["met"], identical
    assert "| # | what |" in md.read_text()
    assert "targets" in capsys.readouterr().out


def test_unknown_case_is_refused(capsys):
    assert main(["--quick", "--cases", "nope"]) == 2


def test_cli_dispatches_to_bench(tmp_path):
    from npoptim.cli import main as cli_main
    assert cli_main(["bench", "--quick", "--cases", "dense", "--no-torch", "--dtypes",
                     "float64", "--json", str(tmp_path / "b.json")]) == 0


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


def test_startup_quick_runs_in_a_fresh_process():
    report = workloads.Report()
    workloads.startup(report, optimizers=(("Adam", False),), warm_runs=1, cold=False)
    assert report.targets and report.targets[0]["value"] > 0


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
