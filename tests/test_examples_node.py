"""examples/node: a Node.js consumer (no npm packages) passes `npoptim verify`, and the same
consumer with an eps-placement bug fails it, with the step where it diverges."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "node"

pytestmark = pytest.mark.needs("node")


def test_run_sh_passes_and_catches_the_eps_bug():
    out = subprocess.run(["bash", str(EXAMPLE / "run.sh")], capture_output=True, text=True,
                         timeout=900, env=dict(os.environ, PYTHON=sys.executable))
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    good, _, buggy = text.partition("--bug eps-placement (must fail)")
    assert "OK: all" in good and "FAIL" not in good
    # bfloat16/float16 Adam (schema version 3) in per-op and fused rounding, bit for bit
    # and 16-bit SparseAdam with CSR gradients in the 16-bit type (duplicates summed in it)
    for case in ("Adam/per-op/weight-decay/bfloat16", "Adam/fused/weight-decay/float16",
                 "SparseAdam/per-op/csr-duplicates/bfloat16",
                 "SparseAdam/per-op/csr-duplicates/float16"):
        line = next(x for x in good.splitlines() if x.startswith(case + " "))
        assert line.split()[-1] == "ok" and line.split()[4] == "0", line
    assert "FAILED:" in buggy
    # float32: only the eps-dominated cases expose the bug, from the first step
    assert "-> Adam/eps-dominated/float32 diverges at step 1: params[0]" in buggy
    assert "-> SparseAdam/eps-dominated/float32 diverges at step 1: params[0]" in buggy
    assert "Adam/defaults/float32 " in buggy and "run.sh: OK" in text


def test_consumer_results_verify_case_by_case(tmp_path):
    results = tmp_path / "results.json"
    cases = ROOT / "reference_results" / "cases" / "SparseAdam.json"
    subprocess.run(["node", str(EXAMPLE / "golden_consumer.mjs"), "-o", str(results),
                    str(cases)], check=True, capture_output=True, timeout=300)
    out = subprocess.run([sys.executable, "-m", "npoptim", "verify", str(cases), str(results),
                          "--case", "SparseAdam/csr-empty/*", "--steps"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("SparseAdam/csr-empty/float32 ") == 12  # a row per step


def test_consumer_declares_the_wrapper_cases_skipped(tmp_path):
    """Schema version 4 (cases/Lookahead.json): the consumer has no wrappers, so it declares
    each wrapper case skipped with the reason, and verify reports them apart from failures."""
    results = tmp_path / "results.json"
    cases = ROOT / "reference_results" / "cases" / "Lookahead.json"
    subprocess.run(["node", str(EXAMPLE / "golden_consumer.mjs"), "-o", str(results),
                    str(cases)], check=True, capture_output=True, timeout=300)
    out = subprocess.run([sys.executable, "-m", "npoptim", "verify", str(cases), str(results),
                          "--summary"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SKIPPED by the results (not failures): 4 case(s)" in out.stdout, out.stdout
    assert "no optimizer wrappers (Lookahead around SGD)" in out.stdout, out.stdout
