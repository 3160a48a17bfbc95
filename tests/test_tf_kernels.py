"""TensorFlow's raw training kernels (the ``tf`` flavor) against npoptim's golden cases.

TensorFlow pins its own stack, so it lives in an interpreter of its own: ``NPOPTIM_TF_PYTHON``
names a Python that can import ``tensorflow`` and ``npoptim`` (.ci/run makes a venv with
``--system-site-packages`` and ``pip install tensorflow-cpu==2.21.0`` in it). The replay is
examples/framework_replay/tf_kernels.py, the script a user runs by hand. Skips without such an
interpreter; ``NPOPTIM_REQUIRE_TENSORFLOW=1`` (set by .ci/run) makes that a failure.
"""
import pytest

from framework_scripts import interpreter, replay
from npoptim.golden import compare


@pytest.fixture(scope="module")
def needs_tf():
    if interpreter("NPOPTIM_TF_PYTHON") is None:
        pytest.skip("no NPOPTIM_TF_PYTHON interpreter with tensorflow")


def test_tf_kernels_pass_the_cases_they_compute(needs_tf, tmp_path):
    reports = replay(interpreter("NPOPTIM_TF_PYTHON"), "tf_kernels.py", tmp_path)
    ran = [r for r in reports if r.status != "skipped"]
    failed = [r for r in ran if r.failed]
    assert not failed, compare.format_reports(failed, summary=True)
    by_optimizer = {r.case_id.split("/")[0] for r in ran}
    assert by_optimizer == {"Adam", "Adamax", "RMSprop", "SGD", "Adagrad", "Adadelta"}
    assert any("/keras/" in r.case_id for r in ran)  # the eps-hat and Keras RMSprop cases


def test_tf_kernels_fail_the_torch_cases_the_keras_conventions_override(needs_tf, tmp_path):
    reports = replay(interpreter("NPOPTIM_TF_PYTHON"), "tf_kernels.py", tmp_path,
                     "--torch-twins")
    assert reports, "no Keras case has a torch twin run through a kernel"
    passing = [r.case_id for r in reports if r.passed]
    assert not passing, f"TF kernels pass torch cases whose conventions they do not share: {passing}"
