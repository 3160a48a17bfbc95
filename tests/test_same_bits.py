"""The same bits on every CPU: a static audit of every call whose result can depend on the
machine, and a regeneration of the golden suite with NumPy's SIMD dispatch lowered.

**What depends on the CPU.** NumPy dispatches its transcendental ufuncs (``exp``, ``log``,
``sin``, ``cos``, ``tanh``, ``power``, ``log1p``, ``arctan``, ...) to code chosen for the CPU
at import (AVX-512 paths round differently from the baseline ones); BLAS and LAPACK
(``np.dot``, ``@``, ``einsum``, ``np.linalg``, ``scipy.linalg``) pick their kernels by CPU
(``OPENBLAS_CORETYPE``); glibc's libm (``math.*``, Python's float ``**``, and what Numba calls
for ``math.log`` or a non-integer power) picks FMA variants at load time; Numba would use
Intel's SVML for vectorized transcendentals if installed (npoptim turns it off, see
:mod:`npoptim`). Correctly rounded operations (``+ - * /``, ``sqrt``, ``fma``) and exact ones
(``frexp``, ``ldexp``, ``rint``, comparisons, integer arithmetic) are the same everywhere, and
so are NumPy's sums (a fixed pairwise order) and Numba's loops (no fastmath, so LLVM neither
reorders nor fuses: checked below).

:func:`test_no_cpu_dependent_call_outside_the_allow_list` parses ``npoptim/**.py``,
``tests/cpu_probe.py`` and ``tests/lbfgs_problems.py`` and fails on any such call that
:data:`ALLOWED` does not list with its reason (file and function, not line numbers); an entry
that no longer matches a call fails too. :func:`test_golden_slice_is_the_same_bits_at_every_
numpy_dispatch_level` regenerates the whole golden suite (every optimizer, flavor and
precision file) in a subprocess with every NumPy dispatch level above the baseline disabled
(``NPY_DISABLE_CPU_FEATURES``, from ``__cpu_dispatch__``; the child reports what it
dispatches to), and :data:`SLICE` with the AVX-512 levels disabled (an AVX2 machine), and
requires the committed bytes (a ``lapack-svd`` case: its tolerance). About 9 s and 4 s with
Numba's cache warm; a cold cache compiles every kernel first (about 3 minutes on 2 cores,
shared through the on-disk cache with tests/test_golden.py).
"""
import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from npoptim.golden import regenerate

ROOT = Path(__file__).resolve().parents[1]
SCANNED = sorted((ROOT / "npoptim").rglob("*.py")) + [ROOT / "tests" / "cpu_probe.py",
                                                      ROOT / "tests" / "lbfgs_problems.py"]

#: NumPy functions that dispatch by CPU (SIMD transcendentals) or call BLAS/LAPACK.
NUMPY_DISPATCHED = {
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "arcsin",
    "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh",
    "power", "float_power", "cbrt", "hypot", "logaddexp", "logaddexp2", "sinc", "i0",
    "dot", "vdot", "inner", "matmul", "einsum", "tensordot", "convolve", "correlate", "cov",
    "corrcoef", "polyfit", "vecdot", "matvec", "vecmat", "linalg", "emath", "random"}
#: ``math`` functions that are glibc's (not correctly rounded, FMA variants by CPU).
MATH_LIBM = {
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "pow", "sin", "cos", "tan",
    "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf",
    "erfc", "gamma", "lgamma", "hypot", "dist", "cbrt"}


#: scipy's subpackages built on LAPACK/BLAS or libm (scipy.sparse's own loops are not).
SCIPY_DISPATCHED = {"linalg", "special", "stats", "optimize", "signal", "fft", "fftpack",
                    "integrate", "interpolate", "ndimage", "spatial"}


def _powers_of_two_literal(node):
    value = node.value if isinstance(node, ast.Constant) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return False
    mantissa, _ = np.frexp(value)
    return mantissa == 0.5


def _int_literal(node):
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is int


def exact_power(base, exponent):
    """``base ** exponent`` that is exact on every machine: an integer literal to a
    non-negative integer literal (integer arithmetic), a power-of-two literal to an integer
    literal (an exact power of two, which any libm returns exactly), or a ``Fraction(...)``
    to an integer (rational arithmetic)."""
    if isinstance(base, ast.Call) and getattr(base.func, "id", None) == "Fraction":
        return True
    if not _int_literal(exponent):
        return False
    if _powers_of_two_literal(base):
        return True
    negative = isinstance(exponent, ast.UnaryOp) and isinstance(exponent.op, ast.USub)
    return type(getattr(base, "value", None)) is int and not negative


def _imports(tree):
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    names[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _dotted(node, names):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in names:
        return ".".join([names[node.id]] + parts[::-1])
    return None


def _dependent_name(dotted):
    """The CPU-dependent function a resolved dotted name refers to, or None."""
    parts = dotted.split(".")
    if parts[0] == "numpy" and len(parts) > 1 and parts[1] in NUMPY_DISPATCHED:
        return ".".join(parts[:3] if parts[1] in ("linalg", "emath", "random") else parts[:2])
    if parts[0] == "math" and len(parts) == 2 and parts[1] in MATH_LIBM:
        return dotted
    if parts[0] == "scipy" and len(parts) > 1 and (parts[1] in SCIPY_DISPATCHED or (
            parts[1] == "sparse" and "linalg" in parts)):
        return ".".join(parts[:3])
    return None


def hits(path):
    """``[(function, what)]``: the CPU-dependent calls of one file, ``function`` the dotted
    name of the enclosing def/class (``<module>`` at the top), ``what`` the resolved name
    (``numpy.log``, ``math.cos``, ``scipy.linalg.svd``), ``@``, ``**`` or ``.dot``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = _imports(tree)
    found = []

    def visit(node, scope):
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner = scope + [child.name]
            where = ".".join(inner) or "<module>"
            if isinstance(child, ast.Attribute):
                dotted = _dotted(child, names)
                if dotted is not None:
                    what = _dependent_name(dotted)
                    if what is not None:
                        found.append((where, what))
                    continue   # the outermost attribute of a chain only
                if child.attr in ("dot", "__matmul__"):
                    found.append((where, "." + child.attr))
            elif isinstance(child, ast.Name) and child.id in names and isinstance(
                    child.ctx, ast.Load):
                what = _dependent_name(names[child.id])
                if what is not None and "." in names[child.id]:   # from math import exp
                    found.append((where, what))
            elif isinstance(child, (ast.BinOp, ast.AugAssign)):
                left = child.left if isinstance(child, ast.BinOp) else child.target
                right = child.right if isinstance(child, ast.BinOp) else child.value
                if isinstance(child.op, ast.MatMult):
                    found.append((where, "@"))
                elif isinstance(child.op, ast.Pow) and not exact_power(left, right):
                    found.append((where, "**"))
            elif (isinstance(child, ast.Call) and isinstance(child.func, ast.Name)
                  and child.func.id == "pow" and len(child.args) == 2):
                found.append((where, "pow"))
            visit(child, inner)

    visit(tree, [])
    return found


# ----------------------------------------------------------------------------- reasons
LIBM_AS_TORCH = (
    "(c) a Python-float power or function of step counts and hyperparameters, written as "
    "torch.optim (or the reference library) computes it in Python: glibc's libm, the same "
    "bits on every x86-64-v3 CPU (all take glibc's FMA variants); a CPU without FMA takes "
    "the SSE2 variants, 1 ulp apart on 0.07% of random arguments (measured), none in the "
    "golden suite (regenerated under GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA,-AVX512F: no "
    "file changed)")
LIBM_SCHEDULE = ("(c) torch's lr_scheduler formula in Python floats (math.cos, math.log, "
                 "** as torch.optim.lr_scheduler): glibc's libm, see LIBM_AS_TORCH")
KERNEL_POW = ("(c) a non-integer power inside a Numba kernel (llvm.pow: glibc's pow; SVML "
              "off, see npoptim/__init__.py): the same bits on every x86-64-v3 CPU, see "
              "LIBM_AS_TORCH")
TOLERANCE_DIGITS = ("(c) a tolerance's lre, -log10(rtol) rounded to 3 decimals: a 1-ulp "
                    "libm difference cannot move it (rtol is a power of ten)")
XLA_LOG = ("(b) XLA's CPU log1p calls the C library's log for float64 (|a| >= sqrt(2)-1): "
           "glibc's, as jax (measured identical on 10**6 values); the bits are jax's on every "
           "x86-64-v3 CPU")
LAPACK_OPTAX = ("(b) svd_signs='lapack': optax's GaLore takes LAPACK's own signs (jax's "
                "LAPACK is scipy's): its cases carry the golden flag lapack-svd, compared to "
                "their tolerance")
LAPACK_LARGE = ("(d) matrices larger than JACOBI_MAX_SIDE: LAPACK (gesdd, syevd) for speed; "
                "the golden cases' matrices are smaller and take the fixed-order Jacobi "
                "routines of npoptim/kernels/decompositions.py")
TEACHING = "(d) teaching problems, plots and theory: not an optimizer's result, no golden value"
DEMO_BENCH = "(d) the demo and the benchmarks: not an optimizer's result, no golden value"
EXPLAIN = ("(d) explain/diagnose: the bias corrections shown next to a step, as the optimizer "
           "computes them (LIBM_AS_TORCH); not a result, no golden value")

#: ``{(file, function): {what: reason}}``: every CPU-dependent call that stays, and why.
ALLOWED = {}


def _allow(reason, file, *functions, what=("**",)):
    for function in functions:
        for w in what:
            ALLOWED.setdefault((file, function), {})[w] = reason


for _file, _functions in {
        "npoptim/optim/acprop.py": ["ACProp._update"],
        "npoptim/optim/adabelief.py": ["AdaBelief._step_form"],
        "npoptim/optim/adafactor.py": ["Adafactor._update"],
        "npoptim/optim/adam.py": ["Adam._update"],
        "npoptim/optim/adam_mini.py": ["AdamMini._update"],
        "npoptim/optim/adamax.py": ["Adamax._update"],
        "npoptim/optim/adamaxw.py": ["AdamaxW._update"],
        "npoptim/optim/adan.py": ["Adan._update"],
        "npoptim/optim/apollo.py": ["APOLLO._update"],
        "npoptim/optim/ademamix.py": ["AdEMAMix._update", "SimplifiedAdEMAMix._update"],
        "npoptim/optim/adopt.py": ["ADOPT._update"],
        "npoptim/optim/asgd.py": ["ASGD._update"],
        "npoptim/optim/dadapt.py": ["DAdaptAdamW._apply", "DAdaptAdamW._hyper"],
        "npoptim/optim/galore.py": ["GaLoreAdamW._update"],
        "npoptim/optim/grams.py": ["Grams._update"],
        "npoptim/optim/lamb.py": ["LAMB._hyper", "LAMB._update"],
        "npoptim/optim/mars.py": ["MARS._hyper"],
        "npoptim/optim/mechanic.py": ["Mechanic._checked"],
        "npoptim/optim/momo.py": ["Momo._averaging", "MomoAdam._averaging",
                                  "_MomoBase._hyper"],
        "npoptim/optim/muon.py": ["momentum_direction", "Muon._aux_adamw"],
        "npoptim/optim/nadam.py": ["NAdam._mu", "NAdam._update"],
        "npoptim/optim/noisy_sgd.py": ["NoisySGD._update"],
        "npoptim/optim/optimistic.py": ["OptimisticAdam._update"],
        "npoptim/optim/polyak_sgd.py": ["PolyakSGD._apply"],
        "npoptim/optim/prodigy.py": ["Prodigy._apply"],
        "npoptim/optim/radam.py": ["RAdam._update"],
        "npoptim/optim/schedule_free.py": ["ScheduleFree._advance"],
        "npoptim/optim/soap.py": ["SOAP._update"],
        "npoptim/optim/sophia.py": ["Sophia._update"],
        "npoptim/optim/sparse_adam.py": ["SparseAdam._update"],
        "npoptim/optim/splus.py": ["SPlus.ema_params"],
        "npoptim/optim/yogi.py": ["Yogi._update"],
        "npoptim/precision/adafactor.py": ["Adafactor._update"],
        "npoptim/precision/adam.py": ["Adam._update"],
        "npoptim/precision/adamax.py": ["Adamax._update"],
        "npoptim/precision/asgd.py": ["ASGD._update"],
        "npoptim/precision/bnb_adam.py": ["BnbAdam8bit._hyper"],
        "npoptim/precision/kahan.py": ["_debiased"],
        "npoptim/precision/nadam.py": ["NAdam._update"],
        "npoptim/precision/quantized.py": ["_dynamic_map"],
        "npoptim/precision/quantized_adam.py": ["QuantizedAdam._hyper"],
        "npoptim/precision/radam.py": ["RAdam._update"],
        "npoptim/precision/sparse_adam.py": ["SparseAdam._update"]}.items():
    _allow(LIBM_AS_TORCH, _file, *_functions)
_allow(EXPLAIN, "npoptim/diagnose/catalogue.py", "_b1", "_b2")
_allow(EXPLAIN, "npoptim/explainer/views.py", "_adam_derived")
_allow(LIBM_AS_TORCH, "npoptim/optim/ademamix.py", "beta3_at", what=("math.pow",))
_allow(LIBM_AS_TORCH, "npoptim/optim/ademamix.py", "beta3_at.half_life", what=("math.log",))
_allow(LIBM_SCHEDULE, "npoptim/lr_scheduler.py", "CosineAnnealingWarmRestarts.step",
       what=("**", "math.log"))
_allow(LIBM_SCHEDULE, "npoptim/lr_scheduler.py", "CyclicLR.scale_fn",
       "ExponentialLR._get_closed_form_lr", "MultiStepLR._get_closed_form_lr",
       "MultiStepLR.get_lr", "PolynomialLR._get_closed_form_lr", "PolynomialLR.get_lr",
       "StepLR._get_closed_form_lr")
_allow(LIBM_SCHEDULE, "npoptim/lr_scheduler.py", "_cosine", "CosineAnnealingLR.get_lr",
       "OneCycleLR._annealing_cos", what=("math.cos",))
_allow(KERNEL_POW, "npoptim/optim/ftrl.py", "_power")
_allow(KERNEL_POW, "npoptim/optim/madgrad.py", "_rho")
_allow(TOLERANCE_DIGITS, "npoptim/golden/schema.py", "Tolerance.lre", what=("math.log10",))
_allow(TOLERANCE_DIGITS, "npoptim/golden/precision_cases.py", "quantized_tolerance",
       "build_case", what=("math.log10",))
_allow(TOLERANCE_DIGITS, "npoptim/golden/generate.py", "tolerance_for", what=("math.log10",))
_allow(XLA_LOG, "npoptim/kernels/jax_random.py", "_log_float64", what=("math.log",))
_allow(LAPACK_OPTAX, "npoptim/optim/galore.py", "orthogonal_projector",
       what=("scipy.linalg.svd",))
_allow(LAPACK_LARGE, "npoptim/optim/galore.py", "orthogonal_projector",
       what=("numpy.linalg.svd",))
_allow(LAPACK_LARGE, "npoptim/kernels/decompositions.py", "eigh", what=("numpy.linalg.eigh",))
_allow(LIBM_AS_TORCH, "npoptim/kernels/decompositions.py", "eigh_inverse_root",
       "coupled_newton_inverse_root", what=("math.pow",))
# PSGD Kron: 1 - b1**t and scale**(1/k) as the sources write them, the balancing's geometric
# mean (kron_torch's exp(mean(log)), pytorch_optimizer's prod ** (1/k)) and the update
# probability's exp (the sources' float32 exp, here libm's float64 exp rounded to float32).
_allow(LIBM_AS_TORCH, "npoptim/optim/kron.py", "Kron._init_state", "Kron._update")
_allow(LIBM_AS_TORCH, "npoptim/optim/psgd.py", "balance_factors",
       what=("**", "math.exp", "math.log"))
_allow(LIBM_AS_TORCH, "npoptim/optim/kron.py", "float32_probability", what=("math.exp",))
_allow(LIBM_AS_TORCH, "npoptim/optim/kron.py", "heavyball_probability")
_allow(LIBM_AS_TORCH, "npoptim/optim/soap.py", "debiased")
_allow(TEACHING, "npoptim/teaching/problems.py", "_rastrigin", what=("numpy.cos", "**"))
_allow(TEACHING, "npoptim/teaching/problems.py", "_rastrigin_grad", what=("numpy.sin",))
_allow(TEACHING, "npoptim/teaching/problems.py", "quadratic",
       what=("math.cos", "math.sin", "@"))
_allow(TEACHING, "npoptim/teaching/problems.py", "_sigmoid", what=("numpy.tanh",))
_allow(TEACHING, "npoptim/teaching/problems.py", "_design", what=("numpy.random.default_rng",))
_allow(TEACHING, "npoptim/teaching/problems.py", "least_squares",
       what=("@", "numpy.linalg.lstsq", "**"))
_allow(TEACHING, "npoptim/teaching/problems.py", "least_squares.loss", "logistic",
       "logistic.grad", what=("@",))
_allow(TEACHING, "npoptim/teaching/problems.py", "logistic.loss",
       what=("@", "numpy.logaddexp"))
_allow(TEACHING, "npoptim/teaching/problems.py", "_beale", "_beale_grad", "_beale_terms",
       "_d2l", "_himmelblau", "_himmelblau_grad", "_rosenbrock", "_rosenbrock_grad", "_saddle")
_allow(TEACHING, "npoptim/theory/momentum.py", "iterates",
       what=("@", "numpy.linalg.matrix_power"))
_allow(TEACHING, "npoptim/theory/momentum.py", "fitted_rate", what=("numpy.linalg.norm", "**"))
_allow(TEACHING, "npoptim/theory/momentum.py", "optimal_parameters", "regime")
_allow(TEACHING, "npoptim/plotting/figures.py", "paths", what=("numpy.log1p",))
_allow(TEACHING, "npoptim/plotting/figures.py", "phase_diagram")
_allow(DEMO_BENCH, "npoptim/cli/demo.py", "Problem.__init__",
       what=("numpy.random.default_rng", "**"))
_allow(DEMO_BENCH, "npoptim/cli/demo.py", "Problem.batch", "loss_and_row_grads",
       what=("numpy.einsum",))
_allow(DEMO_BENCH, "npoptim/cli/demo.py", "train", what=("numpy.random.default_rng",))
for _file, _function in (("npoptim/bench/sparse16.py", "gradients"),
                         ("npoptim/bench/precision16.py", "_arrays"),
                         ("npoptim/bench/references.py", "_arrays"),
                         ("npoptim/bench/scale.py", "batches"),
                         ("npoptim/bench/workloads.py", "sparse"),
                         ("npoptim/bench/workloads.py", "dense"),
                         ("npoptim/bench/workloads.py", "threads"),
                         ("npoptim/bench/workloads.py", "_run_sequence"),
                         ("npoptim/bench/timing.py", "interleaved")):
    _allow(DEMO_BENCH, _file, _function, what=("numpy.random.default_rng",))
# optax-shampoo's power-iteration start: the legacy generator's uniform is integer draws
# scaled by 2**-53, one multiply and add each (no dispatched ufunc), and its stream is fixed by
# NumPy's compatibility policy (NEP 19).
_allow("(a) numpy.random.RandomState(1729).uniform: integer draws times 2**-53, then "
       "low + (high - low) * x, exact IEEE operations; the stream fixed by NEP 19",
       "npoptim/kernels/decompositions.py", "optax_power_start",
       what=("numpy.random.RandomState",))
# The torch probe and the LBFGS problems (tests/): their inputs are exact, so each recorded
# kind replays on every machine; what stays is integer-only, compared live or checked below.
LIVE = ("a live comparison: torch and npoptim are given the same arrays in one process, so the "
        "call's bits do not reach a recorded value")
INTEGER_RNG = ("numpy.random's integers, random and choice are integer arithmetic (the probe "
               "inputs are pinned by their SHA-256 in tests/test_cpu_orders.py)")
_allow(INTEGER_RNG, "tests/cpu_probe.py", "probe_inputs", what=("numpy.random.default_rng",))
_allow(LIVE, "tests/cpu_probe.py", "half_reduction_order_is_torchs",
       what=("numpy.random.default_rng", ".dot", "**"))
_allow(LIVE, "tests/cpu_probe.py", "torch_outputs", what=("@",))
_allow(LIVE, "tests/lbfgs_problems.py", "wavy", what=("numpy.sin", "numpy.cos"))
_allow(LIVE, "tests/lbfgs_problems.py", "watching_torch_sqrt.watched")
_allow("Python's decimal arithmetic (the correctly rounded sine of the drifting target), the "
       "same on every machine", "tests/lbfgs_problems.py", "_drifting_target")
_allow("NumPy's normal generator is table-based (rare slow paths call libm's exp and log1p); "
       "the start points are pinned by the recorded LBFGS runs, which replay bit for bit on "
       "every machine (tests/test_cpu_orders.py)", "tests/lbfgs_problems.py", "start_params",
       what=("numpy.random.default_rng",))


def audit():
    """``(unlisted, stale)``: CPU-dependent calls without an entry in :data:`ALLOWED`, and
    entries that match no call."""
    unlisted, used = [], set()
    for path in SCANNED:
        rel = path.relative_to(ROOT).as_posix()
        for function, what in hits(path):
            if what in ALLOWED.get((rel, function), {}):
                used.add((rel, function, what))
            else:
                unlisted.append(f"{rel}: {function}: {what}")
    stale = [f"{file}: {function}: {what}" for (file, function), entry in ALLOWED.items()
             for what in entry if (file, function, what) not in used]
    return sorted(set(unlisted)), sorted(stale)


def test_no_cpu_dependent_call_outside_the_allow_list():
    unlisted, stale = audit()
    assert not unlisted, ("calls whose result depends on the CPU (NumPy's dispatched ufuncs, "
                          "BLAS/LAPACK, libm): make them exact, or list them in ALLOWED with "
                          "the reason:\n" + "\n".join(unlisted))
    assert not stale, "ALLOWED entries that match no call:\n" + "\n".join(stale)
    assert all(reason for entry in ALLOWED.values() for reason in entry.values())


def test_the_audit_finds_each_kind_of_call(tmp_path):
    source = textwrap.dedent("""
        import math
        import numpy as np
        import scipy.linalg
        from math import exp as e
        from numpy import linalg

        def f(x, a, b, beta, t):
            y = np.log(x) + np.cos(x) + math.pow(beta, t) + e(1.0) + linalg.norm(x)
            z = a @ b + a.dot(b) + np.einsum("ij,jk", a, b) + scipy.linalg.svd(a)[0]
            return (beta ** t, x ** 0.5, 2.0 ** -53, 2 ** 64, 2 ** -7, 3 ** -1, np.sqrt(x),
                    np.sum(x), Fraction(0.6) ** t, scipy.__version__)
        """)
    path = tmp_path / "m.py"
    path.write_text(source)
    assert sorted(what for _, what in hits(path)) == sorted([
        "numpy.log", "numpy.cos", "math.pow", "math.exp", "numpy.linalg.norm", "@", ".dot",
        "numpy.einsum", "scipy.linalg.svd", "**", "**", "**"])


def test_numba_neither_fuses_nor_reorders():
    """Without fastmath LLVM keeps every multiply and add (no vfmadd: npoptim's fma is the
    only fused operation) and vectorizes only loops whose order it keeps."""
    import numba

    from npoptim.kernels.jit import JIT_OPTIONS

    def multiply_add(a, b, c, out):
        for i in range(out.size):
            out[i] = a[i] * b[i] + c[i]

    compiled = numba.njit(**JIT_OPTIONS)(multiply_add)
    x = np.linspace(0.0, 1.0, 64)
    out = np.empty_like(x)
    compiled(x, x, x, out)
    np.testing.assert_array_equal(out, x * x + x)
    assembly = "".join(compiled.inspect_asm().values())
    assert "mul" in assembly and "fma" not in assembly


def test_importing_npoptim_first_turns_numba_s_svml_off():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_DISABLE_INTEL_SVML"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get(
        "PYTHONPATH", "").split(os.pathsep) if p])
    done = subprocess.run([sys.executable, "-c", "import npoptim, numba; "
                           "print(numba.config.DISABLE_INTEL_SVML, numba.config.USING_SVML)"],
                          env=env, capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["1", "False"]


# ------------------------------------------------------------------ the regeneration test
#: The optimizers whose files (torch-convention, flavor and precision) the AVX2-level run
#: regenerates, chosen to cover every mode once: the counter and jax noise streams (NoisySGD,
#: DPSGD, Sophia), the fixed-order SVD and matmul (GaLoreAdamW, Muon), LBFGS's dot order and
#: closure, 16-bit, quantized and stochastic-rounding cases (Adam's and AdamW8bit's precision
#: files), CSR gradients (SparseAdam, Adagrad), wrappers (Lookahead, SAM), schedules.
SLICE = ("DPSGD", "NoisySGD", "Sophia", "GaLoreAdamW", "Muon", "LBFGS", "Adam", "SparseAdam",
         "Adagrad", "Lookahead", "SAM", "Adafactor", "AdEMAMix", "MADGRAD", "Ftrl")

_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    from npoptim.golden import regenerate
    names = json.loads(sys.argv[1])   # None: every optimizer
    files = regenerate.case_files(names)
    committed = regenerate.committed_case_files(regenerate.DEFAULT_OUT)
    kept = regenerate.keep_matching(files, committed)
    print(json.dumps({"enabled": sorted(k for k, v in __cpu_features__.items() if v),
                      "dispatch": sorted(t for t in __cpu_dispatch__ if __cpu_features__.get(t)),
                      "files": sorted(files),
                      "differ": sorted(k for k, v in kept.items() if committed.get(k) != v)}))
    """)


def dispatch_levels():
    """``(baseline, above)``: NumPy's baseline SIMD features and the dispatch targets it found
    above them on this CPU (the names ``np.show_runtime()`` prints)."""
    from numpy._core import _multiarray_umath as umath
    baseline = list(umath.__cpu_baseline__)
    above = [name for name in umath.__cpu_dispatch__ if umath.__cpu_features__.get(name)]
    return baseline, above


def _regenerate_in_child(names, disabled):
    # (the whole suite's regeneration, 106 files, ran past 600 s on a loaded 2-core machine:
    # the limit is there to stop a hang, not to time it)
    env = dict(os.environ, NPY_DISABLE_CPU_FEATURES=" ".join(disabled),
               PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in os.environ.get(
                   "PYTHONPATH", "").split(os.pathsep) if p]))
    done = subprocess.run([sys.executable, "-c", _CHILD,
                           json.dumps(None if names is None else list(names))], env=env,
                          capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("level", ["baseline", "below-AVX-512"])
def test_golden_slice_is_the_same_bits_at_every_numpy_dispatch_level(level):
    baseline, above = dispatch_levels()
    if level == "baseline":
        disabled = above
    else:   # an AVX2 machine: NumPy's X86_V4 and the AVX-512 targets off, X86_V3 kept
        disabled = [name for name in above if name.startswith(("X86_V4", "AVX512"))]
    if not disabled:
        pytest.skip(f"this CPU has no NumPy dispatch level above {baseline} to turn off"
                    if level == "baseline" else "this CPU has no AVX-512 level to turn off")
    report = _regenerate_in_child(None if level == "baseline" else SLICE, disabled)
    assert sorted(set(above) - set(disabled)) == report["dispatch"], (
        f"NPY_DISABLE_CPU_FEATURES={' '.join(disabled)} did not take: the child dispatches to "
        f"{report['dispatch']}")
    assert set(baseline) <= set(report["enabled"])
    assert len(report["files"]) >= (len(regenerate.covered_optimizers()) if level == "baseline"
                                    else len(SLICE))
    assert not report["differ"], (
        f"with NumPy's dispatch limited to {baseline + report['dispatch']} these golden files "
        f"change: {report['differ']}")
