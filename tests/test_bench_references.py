"""A tiny smoke run of ``npoptim bench --cases references`` (npoptim.precision's Adafactor,
Muon, LBFGS, Kahan, stochastically rounded and quantized steps against torch, torch-optimi,
torchao and bitsandbytes): it runs end to end, without the reference libraries (their cells
keep npoptim and the floor, the libraries recorded as skipped) and with them. Benchmarks are
not timed tests: nothing here checks a speed."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from npoptim.bench import floors, references
from npoptim.bench.runner import QUICK, main


def _has_bfloat16():
    try:
        import ml_dtypes  # noqa: F401
    except ImportError:
        return False
    return True


def _expected_cells():
    formats = references.BOTH if _has_bfloat16() else ("float16",)
    return [(cell.name, fmt) for cell, fmt in references.all_cells() if fmt in formats]


def test_quick_references_run_without_the_libraries(tmp_path):
    """``--no-torch``, as in a bare venv: every cell times npoptim and the floor, no cell has a
    reference, each library is recorded as skipped and each target has no verdict."""
    out, md = tmp_path / "refs.json", tmp_path / "refs.md"
    assert main(["--quick", "--cases", "references", "--no-torch", "--json", str(out),
                 "--markdown", str(md)]) == 0
    result = json.loads(out.read_text())
    cells = result["references"]
    assert [(c["optimizer"], c["format"]) for c in cells] == _expected_cells()
    assert all(c[references.NPOPTIM] > 0 and c[references.FLOOR] > 0 for c in cells)
    assert not any(references.REFERENCE in c for c in cells)
    shapes = {c["optimizer"]: tuple(c["shape"]) for c in cells}
    assert shapes["Muon"] == (64, 64) and shapes["KahanSGD"] == (QUICK["references_size"],)
    assert {s["case"] for s in result["skipped"]} >= {
        "references torch", "references optimi", "references torchao.optim",
        "references bitsandbytes"}
    targets = {t["target"]: t for t in result["targets"]}
    assert all(targets[c["target"]]["met"] is None for c in cells)
    assert "| optimizer | format | reference |" in md.read_text()


@pytest.mark.needs("torch", "optimi", "torchao", "bitsandbytes", "ml_dtypes")
def test_quick_references_run_against_every_library(tmp_path):
    """The whole case, every reference, in a process of its own (torchao's and bitsandbytes'
    imports stay out of this one) with ``torch.compile`` off: torchao's step runs eagerly
    (its first compiled step builds C++ code for a minute here), the cells say so."""
    out = tmp_path / "refs.json"
    env = dict(os.environ, TORCHDYNAMO_DISABLE="1")
    run = subprocess.run([sys.executable, "-m", "npoptim.bench", "--quick", "--cases",
                          "references", "--rounds", "1", "--json", str(out)], env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(out.read_text())
    cells = result["references"]
    assert [(c["optimizer"], c["format"]) for c in cells] == _expected_cells()
    assert all(c[references.REFERENCE] > 0 and not c["skipped"] for c in cells)
    assert all(("[eager" in c["reference_name"]) == (c["library"] == "torchao.optim")
               for c in cells)
    assert result["skipped"] == []
    full = {references.NPOPTIM: references.LBFGS_HISTORY,
            references.REFERENCE: references.LBFGS_HISTORY}
    assert [c["history"] for c in cells if c["optimizer"] == "LBFGS"] == [full, full]
    targets = {t["target"]: t for t in result["targets"]}
    assert all(targets[c["target"]]["value"] == pytest.approx(
        c[references.REFERENCE] / c[references.NPOPTIM]) for c in cells)


def test_sizes_and_floors():
    assert references.matrix_shape(1 << 20) == (1024, 1024)
    assert references.matrix_shape(4096) == (64, 64)
    assert references.matrix_shape(1 << 21) == (2048, 1024)
    for bad in (2048, 4096 + 128):
        with pytest.raises(ValueError, match="at least 4,096 and a multiple of 256"):
            references.check_size(bad)
    by_name = {c.name: c for c in references.CELLS}

    def bytes_per_element(name, n=1024):
        return sum(a.nbytes for read, written in references.floor_passes(by_name[name], n)
                   for a in read + 2 * written) / n
    # grad read; param, m, v, kahan_comp read and written: 2 + 4 * 4 bytes
    assert bytes_per_element("KahanAdamW") == 18
    # a bfloat16 param and grad, two moments' codes at a byte, or half a byte for 4-bit
    assert bytes_per_element("AdamW8bit") == 6 + 4 and bytes_per_element("AdamW4bit") == 6 + 2
    # three passes: param and grad read; grad read; grad read, param read and written
    assert bytes_per_element("Adafactor") == 4 + 2 + 6
    # the new pair (3 read, 2 written), 2 x 10 pair passes (2 read, q written), the step
    assert bytes_per_element("LBFGS") == 14 + 20 * 8 + 6
    for cell in references.CELLS:  # the floor leaves the values alone
        passes = references.floor_passes(cell, 1024)
        for read, written in passes:
            for a in read + written:
                a[...] = np.arange(a.size) % 7
        floors.passes_floor(passes, parallel=False)()
        assert all(np.array_equal(a, np.arange(a.size) % 7)
                   for read, written in passes for a in read + written)


def test_an_unknown_cell_name_fails_the_case(tmp_path):
    out = tmp_path / "refs.json"
    assert main(["--quick", "--cases", "references", "--no-torch", "--references-cells",
                 "KahanSGD,Nope", "--json", str(out)]) == 1
    assert "unknown cell(s) ['Nope']" in json.loads(out.read_text())["failures"][0]["error"]
