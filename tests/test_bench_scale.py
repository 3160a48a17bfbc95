"""A tiny smoke run of ``npoptim bench --cases scale`` (a process per framework and size):
it runs end to end and reports every column. Benchmarks are not timed tests: nothing here
checks a speed."""
import json

import numpy as np

from npoptim.bench import scale
from npoptim.bench.runner import main


def test_quick_scale_run_reports_every_npoptim_column(tmp_path):
    out, md = tmp_path / "scale.json", tmp_path / "scale.md"
    assert main(["--quick", "--cases", "scale", "--no-torch", "--json", str(out),
                 "--markdown", str(md)]) == 0
    result = json.loads(out.read_text())
    cells = result["scale"]
    assert {(c["optimizer"], c["rows"]) for c in cells} == {
        (o, n) for o in ("SparseAdam", "Adagrad") for n in (2_000, 20_000)}
    for cell in cells:
        for key in ("row-sparse build + step", "CSR build + step", "row-sparse build",
                    scale.STEP_BUILDER, scale.STEP_SCIPY, "floor"):
            assert cell[key] > 0, (cell, key)
    assert "| optimizer | rows x D |" in md.read_text()
    assert {t["target"] for t in result["targets"]} >= {101, 103, 104, 105, 106}


def test_batches_are_zipf_lookups_within_the_table():
    data = scale.batches(1000, 4)
    assert len(data) == scale.BATCHES
    for ids, values in data:
        assert ids.shape == (scale.BATCH,) and values.shape == (scale.BATCH, 4)
        assert ids.min() >= 0 and ids.max() < 1000
        assert np.unique(ids).size < ids.size  # repeats, as Zipf lookups have
