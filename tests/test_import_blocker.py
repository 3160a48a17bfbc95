"""The import blocker of tests/import_blocker (see tests/conftest.py): with it, a machine that
has every cross-check library runs ``-m "not needs"`` as a bare venv would, in every process.

These tests carry no needs marker: they run in the blocked stage of ``.ci/run``, where the
canary below proves that torch (installed there) cannot be imported, and anywhere else.
"""
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import conftest

CHILD = """
import importlib.util, sys
hidden = sys.argv[1]
assert importlib.util.find_spec(hidden) is None, "find_spec found " + hidden
try:
    __import__(hidden)
except ModuleNotFoundError:
    pass
else:
    raise SystemExit(hidden + " imported")
import numpy, scipy, numba, pytest, npoptim  # the runtime and test dependencies stay
print("hidden", hidden)
"""


def blocked_env(**extra):
    env = dict(os.environ, NPOPTIM_BLOCK_OPTIONAL="1", **extra)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(conftest.BLOCKER_DIR), os.environ.get("PYTHONPATH", "")) if p)
    return env


def run_child(hidden, env):
    return subprocess.run([sys.executable, "-c", CHILD, hidden], env=env, capture_output=True,
                          text=True, timeout=120)


def test_a_blocked_name_is_not_found_in_a_child_process():
    """The mechanism, on a module every interpreter has: ``colorsys`` (found on the path, as
    an installed library is) is hidden from ``import`` and ``find_spec`` alike."""
    done = run_child("colorsys", blocked_env(NPOPTIM_BLOCKED_MODULES="colorsys"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["hidden", "colorsys"]


def test_torch_cannot_be_imported_under_the_blocker():
    """The canary: under the blocker (this process in ``.ci/run``'s first stage, or a child
    started with it here) torch is not importable, whether or not it is installed."""
    if conftest.BLOCKED is not None:
        try:
            import torch  # noqa: F401
        except ModuleNotFoundError:
            pass
        else:
            raise AssertionError("torch imported under the import blocker")
    env = blocked_env()
    env.pop("NPOPTIM_BLOCKED_MODULES", None)  # the child computes the list itself
    done = run_child("torch", env)
    assert done.returncode == 0, done.stderr


def test_what_stays_importable_is_the_runtime_and_the_test_extra():
    spec = importlib.util.spec_from_file_location("blocker_under_test",
                                                  conftest.BLOCKER_DIR / "sitecustomize.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    allowed = module.allowed_distributions()
    for name in ("numpy", "scipy", "numba", "llvmlite", "pytest", "pytest-xdist", "hypothesis",
                 "ml-dtypes", "jsonschema"):
        assert name in allowed, name
    blocked = set(module.blocked_modules())
    assert not blocked & {"numpy", "scipy", "numba", "pytest", "npoptim", "hypothesis"}
    for dist, module_name in (("torch", "torch"), ("jax", "jax"), ("optax", "optax")):
        try:
            importlib.metadata.distribution(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        assert module_name in blocked, module_name


def test_under_the_blocker_an_unmarked_skip_for_a_library_fails(tmp_path):
    """The enforcement, in a pytest run of its own with this conftest and blocker: a test that
    importorskips a library without the needs marker fails, a marked one is deselected by
    ``-m "not needs"``, and a skip for another reason stays a skip."""
    shutil.copy(Path(conftest.__file__), tmp_path / "conftest.py")
    shutil.copytree(conftest.BLOCKER_DIR, tmp_path / "import_blocker")
    (tmp_path / "test_planted.py").write_text(
        "import pytest\n\n"
        "def test_unmarked():\n    pytest.importorskip('colorsys')\n\n"
        "@pytest.mark.needs('colorsys')\ndef test_marked():\n    import colorsys\n\n"
        "def test_other_reason():\n    pytest.skip('torch sums in another order on this CPU')\n")
    env = blocked_env(NPOPTIM_BLOCKED_MODULES="colorsys")
    for name in [n for n in env if n.startswith("NPOPTIM_REQUIRE_")]:
        del env[name]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "-m", "not needs", "-rA", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert "1 failed, 1 skipped, 1 deselected" in done.stdout, done.stdout + done.stderr
    assert "test_unmarked skipped under the import blocker without a needs marker" in done.stdout
