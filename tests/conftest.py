"""Shared test configuration.

A cross-check against another library skips cleanly where that library is not installed. In
CI, ``.ci/run`` sets ``NPOPTIM_REQUIRE_<NAME>=1`` for each of them, and a library that cannot be
imported then fails the session before any test runs, so a green CI run means every
cross-check ran:

* ``NPOPTIM_REQUIRE_TORCH``: torch (torch.optim, the core of the suite);
* ``NPOPTIM_REQUIRE_OPTAX``: optax and jax (LAMB's and LARS's optax variants);
* ``NPOPTIM_REQUIRE_PYTORCH_OPTIMIZER``: pytorch_optimizer (LAMB's kozistr variant);
* ``NPOPTIM_REQUIRE_TIMM``: timm's optimizer files (LAMB's apex/timm and LARS's variants;
  timm is installed with ``--no-deps`` and its files are loaded alone, see
  ``torch_compare.timm_optim``);
* ``NPOPTIM_REQUIRE_LION_PYTORCH``: lion-pytorch (Lion's authors' form; ``--no-deps``);
* ``NPOPTIM_REQUIRE_ADABELIEF_PYTORCH``: adabelief-pytorch (AdaBelief's authors' code;
  ``--no-deps``, with its tabulate and colorama);
* ``NPOPTIM_REQUIRE_JSONSCHEMA``: jsonschema (the JSON Schema against the golden files and the
  procedural checker);
* ``NPOPTIM_REQUIRE_KERAS``: keras (FTRL's trajectories against ``keras.optimizers.Ftrl`` on
  the JAX backend; tests/test_ftrl.py selects the backend before importing keras, so the check
  here only locates it; also the keras flavor replayed through Keras,
  tests/test_framework_replay.py);
* ``NPOPTIM_REQUIRE_FBGEMM``: fbgemm_gpu (row-wise Adagrad against FBGEMM's
  ``EXACT_ROWWISE_ADAGRAD`` on the CPU).
* ``NPOPTIM_REQUIRE_ML_DTYPES``: ml_dtypes (bfloat16 arrays of npoptim.precision).
* ``NPOPTIM_REQUIRE_TORCH_OPTIMI``: torch-optimi (npoptim.precision's Kahan-compensated updates;
  installed with ``--no-deps``).
* ``NPOPTIM_REQUIRE_TORCHAO``: torchao (stochastic rounding compared with its
  ``_AdamW(bf16_stochastic_round=True)``, its AdamW8bit/4bit/Fp8; installed with ``--no-deps``). Only located here, as
  timm: importing it registers torch.compile machinery, which the rest of the suite should not
  run under; its test imports it, and fails instead of skipping when this switch is set.
* ``NPOPTIM_REQUIRE_SCHEDULEFREE``: the authors' schedulefree (Schedule-Free SGD and AdamW).
* ``NPOPTIM_REQUIRE_PRODIGYOPT``: the authors' prodigyopt (Prodigy).
* ``NPOPTIM_REQUIRE_MADGRAD``: the authors' madgrad (MADGRAD).
* ``NPOPTIM_REQUIRE_DADAPTATION``: the authors' dadaptation (D-Adaptation AdamW).
* ``NPOPTIM_REQUIRE_GALORE_TORCH``: the authors' galore-torch (GaLore AdamW; ``--no-deps``, only
  located here: its package ``__init__`` imports transformers and bitsandbytes, and
  tests/test_galore.py loads its two files alone).
* ``NPOPTIM_REQUIRE_DOG_OPTIMIZER`` / ``NPOPTIM_REQUIRE_MOMO_OPT``: the authors' dog-optimizer
  (DoG) and momo-opt (Momo, MomoAdam), ``--no-deps``.
* ``NPOPTIM_REQUIRE_SOPHIA_OPT``: the authors' SophiaG as sophia-opt (Sophia's
  ``variant="sophiag"``), ``--no-deps``.
* ``NPOPTIM_REQUIRE_GRAMS_PYTORCH``: the authors' grams-pytorch (module ``grams``; Grams's
  ``eps_mode="eps_hat"``), ``--no-deps``.
* ``NPOPTIM_REQUIRE_CAME_PYTORCH``: the authors' came-pytorch (CAME), ``--no-deps``.
* ``NPOPTIM_REQUIRE_APOLLO_TORCH``: the authors' apollo-torch (APOLLO; ``--no-deps``, only
  located here: its package ``__init__`` imports transformers, and tests/test_apollo.py loads
  its optimizer files alone).
* ``NPOPTIM_REQUIRE_MUON_OPTIMIZER``: Keller Jordan's muon-optimizer (Muon's
  ``variant="keller_jordan"``), ``--no-deps``.
* ``NPOPTIM_REQUIRE_ADAM_MINI``: the authors' adam-mini (Adam-mini), ``--no-deps``.
* ``NPOPTIM_REQUIRE_QUAD_TORCH``: Evan Walters' quad-torch (PSGD-QUAD), ``--no-deps``.
* ``NPOPTIM_REQUIRE_DISTRIBUTED_KRON``: Evan Walters' distributed-kron and its chex (Kron's
  optax flavor), ``--no-deps``.
* ``NPOPTIM_REQUIRE_HEAVYBALL``: heavyball (SOAP's and Kron's ``variant="heavyball"``;
  ``--no-deps``, with opt-einsum pinned).
* ``NPOPTIM_REQUIRE_ONNX``: onnx (the onnx flavor replayed through ``onnx.reference``);
* ``NPOPTIM_REQUIRE_TFJS``: Node and tfjs-core with its CPU backend, npm-installed in the
  directory ``NPOPTIM_TFJS_DIR`` (.ci/run prepares it; the tfjs flavor's replay).
* ``NPOPTIM_REQUIRE_NODE``: Node.js (examples/node's replay of the golden files).
* ``NPOPTIM_REQUIRE_TENSORFLOW``: an interpreter in ``NPOPTIM_TF_PYTHON`` that imports
  tensorflow and npoptim (.ci/run makes a venv of its own for tensorflow-cpu; the tf flavor's
  raw kernels, tests/test_tf_kernels.py).
* ``NPOPTIM_REQUIRE_BITSANDBYTES``: bitsandbytes (its CPU Adam8bit/AdamW8bit against
  npoptim.precision.bnb_adam; installed with ``--no-deps``). Only located here: its import
  takes seconds.
* ``NPOPTIM_REQUIRE_ONNXRUNTIME_TRAINING``: an interpreter in ``NPOPTIM_ORT_PYTHON`` that imports
  onnxruntime.training and npoptim (.ci/run makes a venv of its own for onnxruntime-training;
  the onnx flavor's AdamW, tests/test_ort_training.py).
* ``NPOPTIM_REQUIRE_NUMPYDOC``: numpydoc (the docs extra: the optimizers' Parameters sections
  checked as the docs build checks them, tests/test_docs.py).

(``NPOPTIM_REQUIRE_DASK`` and ``NPOPTIM_REQUIRE_MATPLOTLIB`` are read by test_distributed.py and
test_plot.py themselves.)

**The needs marker.** A test that needs a library outside npoptim's runtime and ``[test]``
dependencies carries ``@pytest.mark.needs("torch", ...)`` (the modules it imports; ``"node"``
for Node.js, ``"tfjs"``, ``"tensorflow"`` and ``"onnxruntime.training"`` as above), directly, as a
module's ``pytestmark`` or through a helper such as ``torch_compare.needs_torch``. It is skipped
where one of them does not import, and ``-m needs`` / ``-m "not needs"`` select the two halves
of the suite.

**The import blocker.** With ``NPOPTIM_BLOCK_OPTIONAL=1`` every library outside the runtime and
``[test]`` dependencies is made unimportable, here and in every process the tests start
(``tests/import_blocker/sitecustomize.py``), so ``.ci/run`` proves on a machine that has every
library that ``-m "not needs"`` passes as in a bare venv. There, a test that skips for a missing
library without the marker fails (it needs a library it does not declare), and the
``NPOPTIM_REQUIRE_*`` switches are refused (the two contradict each other).
"""
import functools
import importlib
import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest

BLOCKER_DIR = Path(__file__).resolve().parent / "import_blocker"

# The pytest-xdist workers (and their children) share one Numba cache, .numba_cache/, unless
# NUMBA_CACHE_DIR is set (.ci/run sets it for the whole run): a kernel one worker compiled, the
# other loads. Two processes compiling one function at once would corrupt Numba's cache
# ("can't unbox array", seen when both workers wrote one directory) but for the lock that
# npoptim.kernels.cache_lock puts around Numba's cache reads and writes.
if "PYTEST_XDIST_WORKER" in os.environ and "NUMBA_CACHE_DIR" not in os.environ:
    if "numba" in sys.modules:
        raise RuntimeError("numba was imported before tests/conftest.py set its cache directory")
    os.environ["NUMBA_CACHE_DIR"] = str(Path(__file__).resolve().parents[1] / ".numba_cache")


def _start_blocker():
    """Install the import blocker in this process and pass it on to its children (see the
    module docstring); returns the blocked names, or None where it is off."""
    spec = importlib.util.spec_from_file_location("npoptim_import_blocker",
                                                  BLOCKER_DIR / "sitecustomize.py")
    blocker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(blocker)
    installed = blocker.install_from_environment()
    if installed is None:
        return None
    names, loaded = installed
    cross_checks = {module.partition(".")[0] for modules in REQUIRED.values() for module in modules}
    if cross_checks & set(loaded):  # a plugin's dependency such as certifi is harmless
        raise pytest.UsageError("the import blocker came too late: "
                                f"{', '.join(sorted(cross_checks & set(loaded)))} imported already")
    path = os.environ.get("PYTHONPATH", "")
    if str(BLOCKER_DIR) not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(BLOCKER_DIR), path) if p)
    return names


#: switch name -> the modules it requires
REQUIRED = {
    "TORCH": ("torch",),
    "OPTAX": ("optax", "jax"),
    "PYTORCH_OPTIMIZER": ("pytorch_optimizer",),
    "TIMM": ("timm",),
    "JSONSCHEMA": ("jsonschema",),
    "KERAS": ("keras",),
    "FBGEMM": ("fbgemm_gpu",),
    "ML_DTYPES": ("ml_dtypes",),
    "TORCH_OPTIMI": ("optimi",),
    "TORCHAO": ("torchao",),
    "LION_PYTORCH": ("lion_pytorch",),
    "ADABELIEF_PYTORCH": ("adabelief_pytorch",),
    "SCHEDULEFREE": ("schedulefree",),
    "PRODIGYOPT": ("prodigyopt",),
    "MADGRAD": ("madgrad",),
    "DADAPTATION": ("dadaptation",),
    "GALORE_TORCH": ("galore_torch",),
    "DOG_OPTIMIZER": ("dog",),
    "MOMO_OPT": ("momo",),
    "SOPHIA_OPT": ("sophia_opt",),
    "GRAMS_PYTORCH": ("grams",),
    "CAME_PYTORCH": ("came_pytorch",),
    "APOLLO_TORCH": ("apollo_torch",),
    "MUON_OPTIMIZER": ("muon",),
    "ADAM_MINI": ("adam_mini",),
    "KRON_TORCH": ("kron_torch",),
    "OPTAX_SHAMPOO": ("optax_shampoo",),
    "QUAD_TORCH": ("quad_torch",),
    "DISTRIBUTED_KRON": ("distributed_kron", "chex"),
    "HEAVYBALL": ("heavyball",),
    "ONNX": ("onnx",),
    "TFJS": ("tfjs",),
    "NODE": ("node",),
    "TENSORFLOW": ("tensorflow",),
    "BITSANDBYTES": ("bitsandbytes",),
    "ONNXRUNTIME_TRAINING": ("onnxruntime.training",),
    "NUMPYDOC": ("numpydoc",),
}
#: modules that live in an interpreter of their own -> the variable naming that interpreter
OWN_INTERPRETER = {"tensorflow": "NPOPTIM_TF_PYTHON",
                   "onnxruntime.training": "NPOPTIM_ORT_PYTHON"}
#: the names the import blocker hides here, or None where it is off
BLOCKED = _start_blocker()


def _importable(module):
    if module in ("timm", "keras", "torchao", "galore_torch",
                  "apollo_torch", "kron_torch", "optax_shampoo", "quad_torch",
                  "distributed_kron"):  # only located: importing them
        # here would run timm's package __init__, fix keras's backend before a test chooses
        # it, register torchao's torch.compile machinery for the whole session, or import
        # galore-torch's or apollo-torch's transformers (see above), or wrap kron-torch's
        # (or quad-torch's) functions in torch.compile before tests/test_kron.py
        # (tests/test_psgd_quad.py) turns it off, or fail on optax-shampoo's flax and removed
        # jax names (tests/test_shampoo.py shims them), or import distributed-kron's pro.py
        # (which needs flax; tests/test_kron_distributed.py loads its kron.py alone)
        return importlib.util.find_spec(module) is not None
    if module == "bitsandbytes":  # only located: its import takes seconds (its CPU library)
        return importlib.util.find_spec(module) is not None
    if module == "node":  # Node.js itself (examples/node)
        import shutil
        if shutil.which("node") is None:
            raise ImportError("node is not installed")
        return True
    if module == "tfjs":  # an npm package in NPOPTIM_TFJS_DIR, run by node
        import shutil
        from pathlib import Path
        where = Path(os.environ.get("NPOPTIM_TFJS_DIR", "")) / "node_modules" / "@tensorflow"
        if shutil.which("node") is None or not (where / "tfjs-core").is_dir():
            raise ImportError("no node, or no tfjs-core in $NPOPTIM_TFJS_DIR/node_modules")
        return True
    if module in OWN_INTERPRETER:  # e.g. tensorflow in NPOPTIM_TF_PYTHON
        import subprocess
        variable = OWN_INTERPRETER[module]
        python = os.environ.get(variable, "")
        if not os.path.isfile(python) or subprocess.run(
                [python, "-c", f"import {module}, npoptim"], capture_output=True).returncode != 0:
            raise ImportError(f"no interpreter in ${variable} that imports {module} "
                              "and npoptim")
        return True
    importlib.import_module(module)
    return True


@functools.lru_cache(maxsize=None)
def available(module):
    """Whether ``module`` (a name of the needs marker) can be used here: ``(True, "")`` or
    ``(False, why)``."""
    try:
        if _importable(module):
            return True, ""
    except ImportError as exc:
        return False, f"{module} is not installed ({exc})"
    return False, f"{module} is not installed"


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "needs(*modules): the test needs these optional libraries (import names; "
        "'node' for Node.js) and is skipped where one does not import; select with -m needs "
        "or -m 'not needs' (see tests/conftest.py)")


def pytest_runtest_setup(item):
    for mark in item.iter_markers("needs"):
        for module in mark.args:
            ok, why = available(module)
            if not ok:
                pytest.skip(f"needs {module}: {why}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if BLOCKED is None:
        return
    report = outcome.get_result()
    if (report.skipped and not hasattr(report, "wasxfail") and _for_a_library(report)
            and item.get_closest_marker("needs") is None):
        _fail_the_skip(report, item.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if BLOCKED is not None and report.skipped and _for_a_library(report):  # a whole module
        _fail_the_skip(report, report.nodeid)


#: What the skip of a test that lacks a library says (importorskip's words, and the suite's).
_MISSING = re.compile(r"could not import|No module named|not installed|\bneeds ")


def _for_a_library(report):
    """Is this skip for a missing library? (A skip for another reason, such as a CPU whose
    torch sums in another order, is no sign of a missing marker.)"""
    return bool(_MISSING.search(str(report.longrepr)))


def _fail_the_skip(report, nodeid):
    report.outcome = "failed"
    report.longrepr = (f"{nodeid} skipped under the import blocker without a needs marker "
                       f"({report.longrepr}): mark it @pytest.mark.needs(...) with the "
                       "libraries it imports, and import them guarded, not with a module-level "
                       "importorskip (see tests/conftest.py)")


def pytest_sessionstart(session):
    if hasattr(session.config, "workerinput"):  # a pytest-xdist worker: its controller checked
        return
    required = sorted(name for name in REQUIRED if os.environ.get(f"NPOPTIM_REQUIRE_{name}") == "1")
    if BLOCKED is not None and required:
        raise pytest.UsageError("NPOPTIM_BLOCK_OPTIONAL=1 hides the libraries that "
                                f"NPOPTIM_REQUIRE_{required[0]}=1 requires: set one or the other")
    for name, modules in REQUIRED.items():
        if os.environ.get(f"NPOPTIM_REQUIRE_{name}") != "1":
            continue
        for module in modules:
            try:
                if not _importable(module):
                    raise ImportError(f"no module named {module!r}")
            except ImportError as exc:
                raise pytest.UsageError(f"NPOPTIM_REQUIRE_{name}=1 but {module} is missing: "
                                        f"{exc}")
