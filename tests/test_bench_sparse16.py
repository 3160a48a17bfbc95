"""A tiny smoke run of ``npoptim bench --cases sparse16`` (16-bit SparseAdam against table and
touched rows): it runs end to end and reports every npoptim column. Benchmarks are not timed
tests: nothing here checks a speed."""
import json

import numpy as np
import pytest

from npoptim.bench import sparse16
from npoptim.bench.runner import main

pytest.importorskip("ml_dtypes")


def test_quick_sparse16_run_reports_both_sweeps(tmp_path):
    out, md = tmp_path / "s16.json", tmp_path / "s16.md"
    madvise = pytest.importorskip("numpy._core.multiarray")._set_madvise_hugepage
    saved = madvise(True)
    try:
        assert main(["--quick", "--cases", "sparse16", "--no-torch", "--json", str(out),
                     "--markdown", str(md)]) == 0
        # the run backs its tables with small pages, and gives later tests huge pages back
        assert madvise(True) is True
    finally:
        madvise(saved)
    result = json.loads(out.read_text())
    cells = result["sparse16"]
    assert [(c["rows"], c["touched"]) for c in cells] == [  # both sweeps, (20,000, 50) once
        (2_000, 50), (20_000, 20), (20_000, 50), (20_000, 200)]
    assert all(c[sparse16.BF16] > 0 and c[sparse16.F32] > 0 for c in cells)
    assert "| rows x D | touched rows |" in md.read_text()
    assert {t["target"] for t in result["targets"]} >= {111, 112, 114}


def test_gradients_touch_distinct_sorted_rows():
    data = sparse16.gradients(1000, 50, 4)
    assert len(data) == sparse16.GRADIENTS
    for rows, values in data:
        assert rows.size == 50 and np.all(np.diff(rows) > 0) and rows.max() < 1000
        assert values.shape == (50, 4) and values.dtype == np.float32
