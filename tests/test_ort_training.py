"""onnxruntime-training's AdamW (the onnx flavor's AdamW) against npoptim's golden cases.

onnxruntime-training pins its own stack, so it lives in an interpreter of its own:
``NPOPTIM_ORT_PYTHON`` names a Python that can import ``onnxruntime.training`` and ``npoptim``
(.ci/run makes a venv with ``--system-site-packages`` and ``pip install
onnxruntime-training==1.19.2`` in it). The replay is examples/framework_replay/ort_training.py,
the script a user runs by hand: the onnx flavor's AdamW cases through the training API as
generate_artifacts builds it (AdamWOptimizer adam_mode=1), torch's through adam_mode=0. Skips
without such an interpreter; ``NPOPTIM_REQUIRE_ONNXRUNTIME_TRAINING=1`` (set by .ci/run) makes
that a failure.
"""
import pytest

from framework_scripts import SUITE, interpreter, replay
from npoptim.golden import compare
from npoptim.golden.schema import load_all


@pytest.fixture(scope="module")
def needs_ort():
    if interpreter("NPOPTIM_ORT_PYTHON") is None:
        pytest.skip("no NPOPTIM_ORT_PYTHON interpreter with onnxruntime-training")


@pytest.mark.needs("onnxruntime.training")
def test_ort_adamw_passes_the_cases_it_computes(needs_ort, tmp_path):
    reports = replay(interpreter("NPOPTIM_ORT_PYTHON"), "ort_training.py", tmp_path)
    ran = [r for r in reports if r.status != "skipped"]
    failed = [r for r in ran if r.failed]
    assert not failed, compare.format_reports(failed, summary=True)
    onnx_cases = {c.id for c in load_all(SUITE, kind="cases")
                  if c.flavor == "onnx" and c.optimizer == "AdamW"}
    assert onnx_cases and onnx_cases <= {r.case_id for r in ran}  # every onnx AdamW case ran
    assert any("/onnx/" not in r.case_id for r in ran)  # and torch's, through adam_mode=0


@pytest.mark.needs("onnxruntime.training")
def test_ort_adamw_fails_the_torch_cases_the_onnx_conventions_override(needs_ort, tmp_path):
    reports = replay(interpreter("NPOPTIM_ORT_PYTHON"), "ort_training.py", tmp_path,
                     "--torch-twins")
    assert reports, "no onnx AdamW case has a torch twin run through onnxruntime"
    passing = [r.case_id for r in reports if r.passed]
    assert not passing, ("onnxruntime passes torch cases whose conventions it does not share: "
                         f"{passing}")
