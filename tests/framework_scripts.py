"""Run a replay script of examples/framework_replay/ in the framework's own interpreter.

TensorFlow and onnxruntime-training pin their own stacks, so each lives in a venv of its own
(.ci/run makes them, with ``--system-site-packages``) named by an environment variable; the
tests run the script a user runs by hand there and compare its results file with the golden
cases, as ``npoptim verify`` does.
"""
import os
import subprocess
from pathlib import Path

from npoptim.golden import compare, verify as verification
from npoptim.golden.schema import load

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "examples" / "framework_replay"
SUITE = ROOT / "reference_results"


def interpreter(variable):
    """The interpreter the environment variable ``variable`` names if it is one, else None."""
    path = os.environ.get(variable)
    return path if path and Path(path).is_file() else None


def replay(python, script, tmp_path, *flags):
    """The compare reports of ``script``'s results (one per case it wrote, skipped included)."""
    out = tmp_path / "results.json"
    _run(python, script, out, *flags)
    return _reports(verification.load_results(out), str(out))


def replay_with_twins(python, script, tmp_path):
    """``(reports, twin_reports)``: the compare reports of ``script``'s results and of its torch
    twins' (``--twins-out``), from one run of the framework."""
    out, twins = tmp_path / "results.json", tmp_path / "twins.json"
    _run(python, script, out, "--twins-out", str(twins))
    results, twin_results = verification.load_results(out), verification.load_results(twins)
    cases = _cases({i.split("/")[0] for i in [*results, *twin_results]})
    return _reports(results, str(out), cases), _reports(twin_results, str(twins), cases)


def _run(python, script, out, *flags):
    subprocess.run([python, str(SCRIPTS / script), str(SUITE), "-o", str(out), *flags],
                   check=True, timeout=900, cwd=ROOT)


def _cases(optimizers):
    """The golden cases of ``optimizers`` (their files only: reading every file is slow)."""
    return {c.id: c for name in sorted(optimizers) for p in sorted(SUITE.rglob(f"{name}.json"))
            for c in load(p, "cases").cases}


def _reports(results, where, cases=None):
    cases = cases or _cases({i.split("/")[0] for i in results})
    return [compare.compare_case(cases[i], r, where) for i, r in results.items()]
