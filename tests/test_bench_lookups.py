"""A tiny smoke run of ``npoptim bench --cases lookups`` (a process per framework and table):
it runs end to end and reports every column and target. Benchmarks are not timed tests:
nothing here checks a speed."""
import json

import pytest

from npoptim.bench import lookups
from npoptim.bench.runner import main

_QUICK_CELLS = {(o, n, b) for o in lookups.OPTIMIZERS for n in (2_000, 20_000)
                for b in (64, 512)}


def _run(tmp_path, *extra):
    out, md = tmp_path / "lookups.json", tmp_path / "lookups.md"
    assert main(["--quick", "--cases", "lookups", "--json", str(out), "--markdown", str(md),
                 *extra]) == 0
    return json.loads(out.read_text()), md.read_text()


def test_quick_lookups_run_reports_every_npoptim_column(tmp_path):
    result, md = _run(tmp_path, "--no-torch")
    cells = result["lookups"]
    assert {(c["optimizer"], c["rows"], c["lookups"]) for c in cells} == _QUICK_CELLS
    for cell in cells:
        for key in (lookups.RS, lookups.CSR, lookups.RS_BUILD, lookups.CSR_BUILD):
            assert cell[key] > 0, (cell, key)
        assert 0 < cell["touched rows"] <= cell["lookups"]
        assert lookups.FBGEMM not in cell  # --no-torch: no FBGEMM either
    assert "| optimizer | rows x D | lookups (rows touched) |" in md
    targets = {t["target"]: t for t in result["targets"]}
    assert targets[153]["value"] > 0
    assert targets[151]["value"] is None and targets[152]["value"] is None


@pytest.mark.needs("torch", "fbgemm_gpu")
def test_quick_lookups_run_against_fbgemm(tmp_path):
    pytest.importorskip("fbgemm_gpu")
    result, _ = _run(tmp_path)
    for cell in result["lookups"]:
        assert cell[lookups.FBGEMM] > 0, cell
    targets = {t["target"]: t for t in result["targets"]}
    assert targets[151]["value"] > 0 and targets[152]["value"] > 0
