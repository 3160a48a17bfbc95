"""TensorFlow's raw training kernels (the ``tf`` flavor) against npoptim's golden cases.

TensorFlow pins its own stack, so it lives in an interpreter of its own: ``NPOPTIM_TF_PYTHON``
names a Python that can import ``tensorflow`` and ``npoptim`` (.ci/run makes a venv with
``--system-site-packages`` and ``pip install tensorflow-cpu==2.21.0`` in it). The replay is
examples/framework_replay/tf_kernels.py, the script a user runs by hand. Skips without such an
interpreter; ``NPOPTIM_REQUIRE_TENSORFLOW=1`` (set by .ci/run) makes that a failure.
"""
import os
import subprocess
from pathlib import Path

import pytest

from npoptim.golden import compare
from npoptim.golden.schema import load_all

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "framework_replay" / "tf_kernels.py"
SUITE = ROOT / "reference_results"


def tf_python():
    """The interpreter in ``NPOPTIM_TF_PYTHON`` if it is one, else None."""
    path = os.environ.get("NPOPTIM_TF_PYTHON")
    return path if path and Path(path).is_file() else None


def _replay(tmp_path, *flags):
    out = tmp_path / "tf-results.json"
    subprocess.run([tf_python(), str(SCRIPT), str(SUITE), "-o", str(out), *flags], check=True,
                   timeout=900, cwd=ROOT)
    results = compare.load_results(out)
    cases = {c.id: c for c in load_all(SUITE, kind="cases")}
    return [compare.compare_case(cases[i], r, str(out)) for i, r in results.items()]


@pytest.fixture(scope="module")
def needs_tf():
    if tf_python() is None:
        pytest.skip("no NPOPTIM_TF_PYTHON interpreter with tensorflow")


def test_tf_kernels_pass_the_cases_they_compute(needs_tf, tmp_path):
    reports = _replay(tmp_path)
    ran = [r for r in reports if r.status != "skipped"]
    failed = [r for r in ran if r.failed]
    assert not failed, compare.format_reports(failed, summary=True)
    by_optimizer = {r.case_id.split("/")[0] for r in ran}
    assert by_optimizer == {"Adam", "Adamax", "RMSprop", "SGD", "Adagrad", "Adadelta"}
    assert any("/keras/" in r.case_id for r in ran)  # the eps-hat and Keras RMSprop cases


def test_tf_kernels_fail_the_torch_cases_the_keras_conventions_override(needs_tf, tmp_path):
    reports = _replay(tmp_path, "--torch-twins")
    assert reports, "no Keras case has a torch twin run through a kernel"
    passing = [r.case_id for r in reports if r.passed]
    assert not passing, f"TF kernels pass torch cases whose conventions they do not share: {passing}"
