"""The benchmark workloads (``npoptim bench --cases``). Each adds rows (a timing, its ratios)
and targets to a :class:`Report`.

* :func:`sparse` -- an embedding table with a fraction of its rows touched: npoptim's
  SparseAdam and Adagrad steps from a ready CSR row gradient, building that gradient from raw
  lookups, end to end; torch's sparse SparseAdam/Adagrad (coalescing included) and dense
  fused Adam on the whole table; the touch-only floor.
* :func:`dense` -- a large dense parameter: Adam, AdamW, Adagrad, LAMB, LARS (those present)
  against torch's fused CPU Adam and the floor.
* :func:`threads` -- serial against parallel kernels by size, back to back and after an idle
  gap; bit-identical results for any thread count and threshold.
* :func:`startup` -- a fresh process's import + first step, with Numba's cache warm and cold.
"""
import os
import subprocess
import sys
import tempfile
import time

import numba
import numpy as np

from npoptim import registry
from npoptim.bench import floors, torch_ref
from npoptim.bench.timing import interleaved
from npoptim.kernels.parallel import parallel_threshold_set


class Report:
    """Rows of timings, the targets they are checked against, the failures (a case, or a part
    of one, that raised, with its error: the run goes on and its output says so) and the cases
    skipped for a missing library (with the reason).

    A target's number is an int: the performance issue's targets 1 to 6, and 101 on for the
    cases added later (scale, sparse16); the tables sort by it.
    """

    def __init__(self):
        self.rows = []
        self.targets = []
        self.failures = []
        self.skipped = []

    def row(self, group, name, ms, **ratios):
        self.rows.append({"group": group, "name": name, "ms": ms, **ratios})

    def target(self, number, text, value, goal, met, note=""):
        if not isinstance(number, int) or isinstance(number, bool):
            raise TypeError(f"a target's number is an int, not {type(number).__name__} "
                            f"({number!r})")
        self.targets.append({"target": number, "what": text, "value": value, "goal": goal,
                             "met": bool(met) if met is not None else None, "note": note})

    def failure(self, case, error, traceback=""):
        """Record that ``case`` failed with ``error`` (its message; ``traceback`` the text of
        the Python traceback, where there is one)."""
        self.failures.append({"case": case, "error": error, "traceback": traceback})

    def skip(self, case, reason):
        """Record that ``case`` did not run here and why (a library it needs is missing)."""
        self.skipped.append({"case": case, "reason": reason})


def lookups(nrows, density, rng, per_row=4, zipf=1.2):
    """Row ids with repeats: ``density * nrows`` distinct rows, ``per_row`` lookups per
    distinct row on average, the repeats Zipf-distributed over the distinct rows."""
    distinct = rng.choice(nrows, max(1, int(round(nrows * density))), replace=False)
    ranks = np.minimum(rng.zipf(zipf, (per_row - 1) * distinct.size) - 1, distinct.size - 1)
    ids = np.concatenate([distinct, distinct[ranks]])
    rng.shuffle(ids)
    return ids.astype(np.int64), np.sort(distinct)


def _ms(result):
    return result["median"] * 1e3


def _ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def _optimizer(name, param):
    cls = registry.get(name)
    try:
        return cls([param])
    except TypeError:
        return cls([param], lr=1e-2)


# ------------------------------------------------------------------------------ sparse
def sparse(report, nrows=1_000_000, width=64, density=0.01, rounds=11, use_torch=True,
           scipy_path=None, seed=0):
    """Sparse row updates of an ``nrows x width`` float32 table, ``density`` of rows touched."""
    import scipy.sparse

    from npoptim import embedding_row_grad
    from npoptim.optim.adagrad import Adagrad
    from npoptim.optim.adam import Adam
    from npoptim.optim.sparse_adam import SparseAdam

    group = f"sparse {nrows:,}x{width} f32, {density:.1%} rows"
    rng = np.random.default_rng(seed)
    ids, rows = lookups(nrows, density, rng)
    values = rng.standard_normal((ids.size, width)).astype(np.float32)
    param = rng.standard_normal((nrows, width)).astype(np.float32)
    grad = embedding_row_grad(ids, values, nrows)

    raw = scipy.sparse.csr_array((grad.data.copy(), grad.indices.copy(), grad.indptr.copy()),
                                 shape=grad.shape)
    sparse_adam = SparseAdam([param.copy()])
    adagrad = Adagrad([param.copy()])
    sparse_adam.step([grad])
    adagrad.step([grad])
    # the floors touch the optimizers' own arrays (same pages; values left unchanged)
    sa_arrays = (sparse_adam.params[0], [sparse_adam.state[0]["exp_avg"],
                                         sparse_adam.state[0]["exp_avg_sq"]])
    ag_arrays = (adagrad.params[0], [adagrad.state[0]["sum"]])
    fns = {
        "SparseAdam step (ready CSR)": lambda: sparse_adam.step([grad]),
        "Adagrad step (ready CSR)": lambda: adagrad.step([grad]),
        "floor 2 states serial": floors.rows_floor(*sa_arrays, rows, grad.data, width, False),
        "floor 2 states parallel": floors.rows_floor(*sa_arrays, rows, grad.data, width, True),
        "floor 1 state serial": floors.rows_floor(*ag_arrays, rows, grad.data, width, False),
        "floor 1 state parallel": floors.rows_floor(*ag_arrays, rows, grad.data, width, True),
        # the same gradient as scipy would hand it over (canonical, not the builder's): a
        # step validates it in full (an O(rows) pass over indptr, one over indices)
        "SparseAdam step (scipy CSR)": lambda: sparse_adam.step([raw]),
        "Adagrad step (scipy CSR)": lambda: adagrad.step([raw]),
        "build CSR from lookups": lambda: embedding_row_grad(ids, values, nrows),
        "end to end SparseAdam": lambda: sparse_adam.step(
            [embedding_row_grad(ids, values, nrows)]),
    }
    dense_grad = grad.toarray()
    dense_adam = Adam([param.copy()])
    dense_adam.step([dense_grad])
    fns["dense Adam step, whole table"] = lambda: dense_adam.step([dense_grad])
    if scipy_path is None:
        scipy_path = density <= 0.01
    if scipy_path:
        coo_rows = np.repeat(ids, width)
        coo_cols = np.tile(np.arange(width), ids.size)

        def scipy_coo_to_csr():
            scipy.sparse.coo_array((values.reshape(-1), (coo_rows, coo_cols)),
                                   shape=(nrows, width)).tocsr()
        fns["scipy COO->CSR (sum_duplicates)"] = scipy_coo_to_csr
    torch = torch_ref.load() if use_torch else None
    if torch is not None:
        fns["torch SparseAdam step"] = torch_ref.sparse_step("SparseAdam", param, ids, values)
        fns["torch Adagrad sparse step"] = torch_ref.sparse_step("Adagrad", param, ids, values)
        fns["torch end to end SparseAdam"] = torch_ref.sparse_end_to_end("SparseAdam", param,
                                                                         ids, values)
        fns["torch to_dense"] = torch_ref.densify(ids, values, (nrows, width))
        fns["torch fused Adam, whole table"] = torch_ref.dense_step("Adam", param, dense_grad)
        fns = {k: v for k, v in fns.items() if v is not None}
    res = {k: _ms(v) for k, v in interleaved(fns, rounds=rounds).items()}
    floor2 = min(res["floor 2 states serial"], res["floor 2 states parallel"])
    floor1 = min(res["floor 1 state serial"], res["floor 1 state parallel"])
    t = res.get
    for name, ms in res.items():
        ratios = {}
        if name.startswith(("SparseAdam", "end to end")):  # (the scipy CSR's rows too)
            ratios = {"x_floor": ms / floor2, "torch_over_this": _ratio(
                t("torch SparseAdam step" if name.startswith("SparseAdam")
                  else "torch end to end SparseAdam"), ms)}
        elif name.startswith("Adagrad"):
            ratios = {"x_floor": ms / floor1,
                      "torch_over_this": _ratio(t("torch Adagrad sparse step"), ms)}
        report.row(group, name, ms, **ratios)
    report.row(group, "floor 2 states (faster of serial/parallel)", floor2)
    report.row(group, "floor 1 state (faster of serial/parallel)", floor1)

    label = f"{density:.1%}"
    sa, ag, e2e = (res["SparseAdam step (ready CSR)"], res["Adagrad step (ready CSR)"],
                   res["end to end SparseAdam"])
    torch_sa, torch_ag = t("torch SparseAdam step"), t("torch Adagrad sparse step")
    torch_dense, torch_e2e = t("torch fused Adam, whole table"), t("torch end to end SparseAdam")

    def faster(reference, ours, goal, text, note=""):
        value = _ratio(reference, ours)
        report.target(number, text, value, f">= {goal}x", _ge(value, goal),
                      f"{_fmt(ours)} ms vs {_fmt(reference)} ms{note}")

    def near_floor(ours, floor, serial_floor, text):
        report.target(number, text, ours / floor, "<= 2x", ours / floor <= 2,
                      f"{_fmt(ours)} ms vs floor {_fmt(floor)} ms (the serial floor "
                      f"{_fmt(serial_floor)} ms: {ours / serial_floor:.3g}x)")

    if density == 0.01:
        number = 1
        faster(torch_sa, sa, 10, f"SparseAdam step vs torch SparseAdam step, {label}")
        faster(torch_dense, sa, 25, f"SparseAdam step vs torch dense fused Adam, {label}")
        near_floor(sa, floor2, res["floor 2 states serial"],
                   f"SparseAdam step / touch floor, {label}")
        faster(torch_ag, ag, 10, f"Adagrad sparse step vs torch sparse Adagrad, {label}")
        faster(torch_dense, ag, 25, f"Adagrad sparse step vs torch dense fused Adam, {label}")
        near_floor(ag, floor1, res["floor 1 state serial"],
                   f"Adagrad sparse step / touch floor, {label}")
        number = 7
        for name, ours, reference, goal, floor in (
                ("SparseAdam", res["SparseAdam step (scipy CSR)"], torch_sa, 10,
                 res["floor 2 states serial"]),
                ("Adagrad", res["Adagrad step (scipy CSR)"], torch_ag, 5,
                 res["floor 1 state serial"])):
            faster(reference, ours, goal, f"{name} step from a scipy CSR vs torch's step, "
                                          f"{label}")
            report.target(number, f"{name} step from a scipy CSR / serial touch floor, {label}",
                          ours / floor, "<= 1.5x", ours / floor <= 1.5,
                          f"{_fmt(ours)} ms vs {_fmt(floor)} ms (validating it included)")
        number = 2
        faster(torch_e2e, e2e, 4, f"end to end (lookups -> CSR -> SparseAdam) vs torch, "
                                  f"{label}", f"; building the CSR: "
                                              f"{_fmt(res['build CSR from lookups'])} ms")
    else:
        dense_np = res["dense Adam step, whole table"]
        best_dense = min(x for x in (dense_np, torch_dense) if x is not None)
        report.target(3, f"SparseAdam step / fastest dense Adam step, {label}",
                      sa / best_dense, "< 1", sa < best_dense,
                      f"{_fmt(sa)} ms vs {_fmt(best_dense)} ms; end to end from lookups "
                      f"{_fmt(e2e)} ms ({e2e / best_dense:.3g}x dense); torch SparseAdam "
                      f"step {_fmt(torch_sa)} ms ({_fmt(_ratio(torch_sa, best_dense))}x dense)")
        report.target(2, f"end to end vs torch, {label} (context)", _ratio(torch_e2e, e2e),
                      "-", None, f"{_fmt(e2e)} ms vs {_fmt(torch_e2e)} ms; building the CSR: "
                                 f"{_fmt(res['build CSR from lookups'])} ms")
    return res


def _ge(value, goal):
    return None if value is None else value >= goal


def _fmt(x):
    return "n/a" if x is None else f"{x:.3g}"


# ------------------------------------------------------------------------------- dense
DENSE_OPTIMIZERS = ("Adam", "AdamW", "Adagrad", "LAMB", "LARS")

#: The passes a step makes over memory, for its touch floor: each pass is (arrays only read,
#: arrays read and written), ``p`` the parameter, ``g`` the gradient, ``s`` every state. An
#: element-wise update makes one pass, ``("g", "ps")``. LAMB and LARS need global norms
#: before they can write the parameter, so they read memory twice: LAMB its moments and
#: norms, then the parameter from the moments (10 array sweeps to Adam's 7); LARS the two
#: norms, then momentum and parameter (7 sweeps to SGD-with-momentum's 5).
FLOOR_PASSES = {
    "LAMB": (("pg", "s"), ("s", "p")),
    "LARS": (("pg", ""), ("g", "ps")),
}


def dense(report, size=10_000_000, dtype=np.float32, rounds=11, use_torch=True, seed=0,
          optimizers=DENSE_OPTIMIZERS):
    """Dense steps on a flat parameter of ``size`` elements."""
    dtype = np.dtype(dtype)
    group = f"dense {size:,} {dtype.name}"
    rng = np.random.default_rng(seed)
    param = rng.standard_normal(size).astype(dtype)
    grad = (rng.standard_normal(size) * 1e-2).astype(dtype)
    fns, passes_of = {}, {}
    for name in optimizers:
        opt = _optimizer(name, param.copy())
        opt.step([grad])
        states = [v for v in opt.state[0].values()
                  if isinstance(v, np.ndarray) and v.size == size][:3]
        named = {"p": [opt.params[0]], "g": [grad], "s": states}
        # the floor touches the optimizer's own arrays, as its step does
        passes = [([a for c in read for a in named[c]], [a for c in written for a in named[c]])
                  for read, written in FLOOR_PASSES.get(name, (("g", "ps"),))]
        passes_of[name] = passes
        fns[name] = (lambda opt=opt: opt.step([grad]))
        for par in (False, True):
            fns[f"floor {name} {'parallel' if par else 'serial'}"] = floors.passes_floor(
                passes, par)
    torch = torch_ref.load() if use_torch else None
    if torch is not None:
        for name in ("Adam", "AdamW", "Adagrad"):
            fn = torch_ref.dense_step(name, param, grad, fused=True)
            if fn is not None:
                fns[f"torch fused {name}"] = fn
    res = {k: _ms(v) for k, v in interleaved(fns, rounds=rounds).items()}
    torch_adam = res.get("torch fused Adam")
    for name, passes in passes_of.items():
        floor = min(res[f"floor {name} serial"], res[f"floor {name} parallel"])
        sweeps = sum(len(read) + 2 * len(written) for read, written in passes)
        ms = res[name]
        report.row(group, name, ms, x_floor=ms / floor,
                   x_torch_fused_adam=_ratio(ms, torch_adam),
                   x_torch_same=_ratio(ms, res.get(f"torch fused {name}")))
        report.target(4, f"{name} {dtype.name} / torch fused Adam", _ratio(ms, torch_adam),
                      "<= 1.0", None if torch_adam is None else ms <= torch_adam,
                      f"{_fmt(ms)} ms vs {_fmt(torch_adam)} ms; its touch floor "
                      f"{_fmt(floor)} ms")
        report.target(4, f"{name} {dtype.name} / touch floor ({len(passes)} pass"
                           f"{'es' if len(passes) > 1 else ''}, {sweeps} array sweeps)",
                      ms / floor, "<= 1.2", ms / floor <= 1.2, f"floor {_fmt(floor)} ms")
    for name, ms in res.items():
        if name not in passes_of:
            report.row(group, name, ms)
    return res


# ----------------------------------------------------------------------------- threads
def threads(report, sizes=(1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24),
            rounds=15, gap=0.05, seed=0, table=(1_000_000, 64), densities=(0.001, 0.01),
            identity_size=300_000, identity_table=(20_000, 16)):
    """Serial (threshold None) vs parallel (threshold 0) steps, back to back and after an idle
    gap of ``gap`` seconds: Adam float32 by size, then SparseAdam on a ``table`` (rows,
    columns) float32 embedding table by fraction of rows touched; then a bit-identity check
    across thread counts (:func:`bit_identical` at ``identity_size`` and
    ``identity_table``)."""
    from npoptim import embedding_row_grad
    from npoptim.optim.adam import Adam
    from npoptim.optim.sparse_adam import SparseAdam

    rng = np.random.default_rng(seed)
    group = f"threads: {numba.get_num_threads()} Numba threads"
    for size in sizes:
        param = rng.standard_normal(size).astype(np.float32)
        grad = (rng.standard_normal(size) * 1e-2).astype(np.float32)
        opt = Adam([param])
        _serial_vs_parallel(report, group, f"Adam f32 {size:,} elements",
                            lambda: opt.step([grad]), rounds, gap)
    nrows, width = table
    param = rng.standard_normal((nrows, width)).astype(np.float32)
    sparse_adam = SparseAdam([param])
    for density in densities:
        ids, _ = lookups(nrows, density, rng)
        row_grad = embedding_row_grad(ids, rng.standard_normal((ids.size, width)).astype(
            np.float32), nrows)
        _serial_vs_parallel(report, group, f"SparseAdam {nrows:,}x{width} f32, {density:.1%} "
                            f"rows ({row_grad.nnz:,} entries)",
                            lambda: sparse_adam.step([row_grad]), rounds, gap)
    same, detail = bit_identical(identity_size, identity_table)
    report.target(6, "results bit-identical for any thread count and threshold",
                  None, "identical", same, detail)
    return same


def _serial_vs_parallel(report, group, label, step, rounds, gap):
    def serial():
        with parallel_threshold_set(None):
            step()

    def parallel():
        with parallel_threshold_set(0):
            step()

    step()
    back = interleaved({"serial": serial, "parallel": parallel}, rounds=rounds)
    idle = interleaved({"serial": serial, "parallel": parallel}, rounds=max(3, rounds // 3),
                       before=lambda: time.sleep(gap))
    for mode, res in (("back to back", back), (f"after {gap * 1e3:.0f} ms idle", idle)):
        s, p = _ms(res["serial"]), _ms(res["parallel"])
        report.row(group, f"{label}, {mode}: serial", s)
        report.row(group, f"{label}, {mode}: parallel", p, parallel_over_serial=p / s)
        report.target(6, f"{label}, {mode}: parallel / serial", p / s, "(policy)", None,
                      f"serial {_fmt(s)} ms, parallel {_fmt(p)} ms")


def _run_sequence(size, nrows, width, seed=1):
    from npoptim import embedding_row_grad

    rng = np.random.default_rng(seed)
    out = {}
    for name in DENSE_OPTIMIZERS:
        for dtype in (np.float32, np.float64):
            p = rng.standard_normal(size).astype(dtype)
            opt = _optimizer(name, p)
            for _ in range(3):
                opt.step([(rng.standard_normal(size) * 1e-2).astype(dtype)])
            out[f"{name} {np.dtype(dtype).name}"] = p
    for name in ("SparseAdam", "Adagrad"):
        p = rng.standard_normal((nrows, width)).astype(np.float32)
        opt = registry.get(name)([p])
        for density in (0.01, 0.5):
            ids, _ = lookups(nrows, density, rng)
            values = rng.standard_normal((ids.size, width)).astype(np.float32)
            opt.step([embedding_row_grad(ids, values, nrows)])
        out[f"{name} rows"] = p
    return out


def bit_identical(size=300_000, table=(20_000, 16)):
    """Run the same steps with 1 thread serial, all threads always parallel, and the default
    policy: three steps of each dense optimizer on ``size`` elements in float32 and float64,
    and two row-sparse steps of SparseAdam and Adagrad on a ``table`` (rows, columns) float32
    table; True when every result is bit for bit the same."""
    saved = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        with parallel_threshold_set(None):
            reference = _run_sequence(size, *table)
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        with parallel_threshold_set(0):
            parallel = _run_sequence(size, *table)
        default = _run_sequence(size, *table)
    finally:
        numba.set_num_threads(saved)
    bad = [name for name in reference
           if not (np.array_equal(reference[name], parallel[name], equal_nan=True)
                   and np.array_equal(reference[name], default[name], equal_nan=True))]
    detail = (f"{len(reference)} runs compared ({', '.join(reference)}); 1 thread serial vs "
              f"{numba.config.NUMBA_NUM_THREADS} threads parallel vs default policy")
    if bad:
        detail += "; DIFFER: " + ", ".join(bad)
    return not bad, detail


# ----------------------------------------------------------------------------- startup
_STARTUP_SCRIPT = r"""
import time
start = time.perf_counter()
import numpy as np
import npoptim
name, sparse = {name!r}, {sparse!r}
param = np.random.default_rng(0).standard_normal((1000, 16)).astype(np.float32)
cls = getattr(npoptim, name)
try:
    opt = cls([param])
except TypeError:
    opt = cls([param], lr=1e-2)
if sparse:
    grad = npoptim.embedding_row_grad(np.array([1, 5, 1]), np.ones((3, 16), np.float32), 1000)
else:
    grad = np.full(param.shape, 1e-3, np.float32)
opt.step([grad])
print(time.perf_counter() - start)
"""


def _startup_once(name, sparse_grad, cache_dir=None):
    """One fresh process's import + first step: (seconds it measured itself, wall seconds of
    the process); Numba's cache in ``cache_dir``, or where this process's is when None."""
    env = dict(os.environ) if cache_dir is None else dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    script = _STARTUP_SCRIPT.format(name=name, sparse=sparse_grad)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=600)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr else "failed")
    return float(done.stdout.strip().splitlines()[-1]), wall


STARTUP_OPTIMIZERS = (("SparseAdam", True), ("Adagrad", True), ("Adam", False),
                      ("AdamW", False), ("Adagrad", False), ("LAMB", False), ("LARS", False))


def startup(report, optimizers=STARTUP_OPTIMIZERS, warm_runs=3, cold=True):
    """A fresh process's import + first step (float32) with Numba's cache warm, ``warm_runs``
    times (the median is reported). With ``cold``, first with the cache cold: a new empty cache
    directory, so that the first process compiles everything the step needs, and the warm runs
    use that directory. Without, no process compiles on purpose: the warm runs use this
    process's cache, after one untimed process that fills in whatever it lacks."""
    group = "start-up: fresh process, import + first step (float32)"
    worst_warm = None
    for name, sparse_grad in optimizers:
        label = f"{name} ({'CSR' if sparse_grad else 'dense'} gradient)"
        with tempfile.TemporaryDirectory(prefix="npoptim-bench-cache-") as new_cache:
            cache_dir = new_cache if cold else None
            try:
                first_s, first_wall = _startup_once(name, sparse_grad, cache_dir)
                warm = [_startup_once(name, sparse_grad, cache_dir)
                        for _ in range(warm_runs)]
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                report.failure(f"startup: {label}", f"{type(exc).__name__}: {exc}")
                continue
        warm_s = float(np.median([w[0] for w in warm]))
        warm_wall = float(np.median([w[1] for w in warm]))
        if cold:
            report.row(group, f"{label}: cold cache (compile)", first_s * 1e3,
                       process_wall_ms=first_wall * 1e3)
        report.row(group, f"{label}: warm cache", warm_s * 1e3,
                   process_wall_ms=warm_wall * 1e3)
        worst_warm = max(worst_warm or 0.0, warm_s)
        report.target(5, f"{label}: warm import + first step", warm_s, "<= 1 s",
                      warm_s <= 1.0, f"cold (compiling): {first_s:.1f} s" if cold
                      else "cold cache not measured")
    return worst_warm
