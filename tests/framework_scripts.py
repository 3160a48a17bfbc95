"""Run a replay script of examples/framework_replay/ in the framework's own interpreter.

TensorFlow and onnxruntime-training pin their own stacks, so each lives in a venv of its own
(.ci/run makes them, with ``--system-site-packages``) named by an environment variable; the
tests run the script a user runs by hand there and compare its results file with the golden
cases, as ``npoptim verify`` does.
"""
import os
import subprocess
from pathlib import Path

from npoptim.golden import compare
from npoptim.golden.schema import load_all

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
    subprocess.run([python, str(SCRIPTS / script), str(SUITE), "-o", str(out), *flags],
                   check=True, timeout=900, cwd=ROOT)
    results = compare.load_results(out)
    cases = {c.id: c for c in load_all(SUITE, kind="cases")}
    return [compare.compare_case(cases[i], r, str(out)) for i, r in results.items()]
