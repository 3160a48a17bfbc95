"""TensorFlow's raw training kernels (the ``tf`` flavor) against npoptim's golden cases.

TensorFlow pins its own stack, so it lives in an interpreter of its own: ``NPOPTIM_TF_PYTHON``
names a Python that can import ``tensorflow`` and ``npoptim`` (.ci/run makes a venv with
``--system-site-packages`` and ``pip install tensorflow-cpu==2.21.0`` in it). The replay is
examples/framework_replay/tf_kernels.py, the script a user runs by hand, started once for both
tests (``--twins-out``: TensorFlow's import is most of its time). Skips without such an
interpreter; ``NPOPTIM_REQUIRE_TENSORFLOW=1`` (set by .ci/run) makes that a failure.
"""
import pytest

from framework_scripts import interpreter, replay_with_twins
from npoptim.golden import compare


@pytest.fixture(scope="module")
def tf_reports(tmp_path_factory):
    """``(reports, twin_reports)`` of one run of the replay script."""
    if interpreter("NPOPTIM_TF_PYTHON") is None:
        pytest.skip("no NPOPTIM_TF_PYTHON interpreter with tensorflow")
    return replay_with_twins(interpreter("NPOPTIM_TF_PYTHON"), "tf_kernels.py",
                             tmp_path_factory.mktemp("tf"))


@pytest.mark.needs("tensorflow")
def test_tf_kernels_pass_the_cases_they_compute(tf_reports):
    reports = tf_reports[0]
    ran = [r for r in reports if r.status != "skipped"]
    failed = [r for r in ran if r.failed]
    assert not failed, compare.format_reports(failed, summary=True)
    by_optimizer = {r.case_id.split("/")[0] for r in ran}
    assert by_optimizer == {"Adam", "Adamax", "RMSprop", "SGD", "Adagrad", "Adadelta", "Ftrl"}
    assert any("/keras/" in r.case_id for r in ran)  # the eps-hat and Keras RMSprop cases
    ids = {r.case_id for r in ran}
    # the sparse kernels (whole rows and single entries), both FTRL kernels, Keras's momentum,
    # torch's Adam (a per-step epsilon), and missing gradients with torch's per-variable and
    # Keras's global step count
    for case in ("Adagrad/csr-embedding/float64", "Adagrad/csr-duplicates/float64",
                 "Ftrl/csr-explicit-zeros/float64", "Ftrl/csr-late-row-shrinkage/float64",
                 "Ftrl/l1-l2/float64", "Ftrl/shrinkage-power/float64",
                 "Ftrl/beta-lr-schedule/float64", "SGD/keras/nesterov-lr-schedule/float64",
                 "SGD/momentum-null-grads/float64", "Adam/null-and-zero-grads/float64",
                 "Adam/keras/null-and-zero-grads/float64"):
        assert case in ids, case


@pytest.mark.needs("tensorflow")
def test_tf_kernels_fail_the_torch_cases_the_keras_conventions_override(tf_reports):
    reports = tf_reports[1]
    assert reports, "no Keras case has a torch twin run through a kernel"
    passing = [r.case_id for r in reports if r.passed]
    assert not passing, f"TF kernels pass torch cases whose conventions they do not share: {passing}"
