"""The ``references`` case of ``npoptim bench``: npoptim.precision's non-element-wise, Kahan,
stochastically rounded and quantized optimizers against the library each one reproduces.

For each optimizer of :data:`CELLS` and each 16-bit format it has (bfloat16, float16; the
quantized ones and stochastic rounding bfloat16 only: their references have no float16), one
cell: npoptim's step and the reference library's step on the same 16-bit tensors at the same
settings, ``SIZE`` (1M) elements (a ``1024 x 1024`` matrix for Adafactor and Muon, a flat
vector otherwise), cycling through ``GRADIENTS`` gradients, and the touch floor, timed in
interleaved rounds (medians):

* Adafactor, Muon, LBFGS: ``torch.optim``'s (Adafactor ``foreach=False``; LBFGS with
  ``history_size=10`` and ``max_iter=1``, so that a step is one closure evaluation, one
  two-loop over the history, full after the warm-up, and one parameter step; the closure
  computes the gradient of ``0.5 sum w (x - c)^2``, the curvatures ``w`` from 0.5 to 2.9, the
  target ``c`` the next of ``GRADIENTS`` random vectors each step (so that every step has work
  to do), ``R(w R(x - c))`` in the format on both sides: :func:`quadratic_grad16`, one Numba
  pass, and torch's ``mul(w, sub(p, c))``, two: the closure is a small part of a step, and in
  the timings);
* KahanAdamW, KahanSGD (momentum 0.9), KahanLion: torch-optimi's ``AdamW``, ``SGD``,
  ``Lion`` with ``kahan_sum=True``;
* AdamW ``rounding="stochastic"``: torchao's ``_AdamW(bf16_stochastic_round=True)``;
* AdamW8bit, AdamW4bit, AdamWFp8 (and AdamW8bit with ``bf16_stochastic_round=True``):
  torchao's, which compiles its step with ``torch.compile`` (the first step of each
  optimizer and shape builds C++ code for tens of seconds on 2 cores: untimed warm-up);
* BnbAdam8bit, BnbAdamW8bit: bitsandbytes' CPU ``Adam8bit`` and ``AdamW8bit``.

The touch floor (:mod:`npoptim.bench.floors`, not redefined: passes that read and write the
bytes a step must move, no math) is, per cell, :func:`floor_passes`: one pass over the
gradient, parameter and element-wise states for the element-wise steps (the quantized codes at
a byte an element, half a byte for 4-bit); Adafactor's three (the norms of the parameter and of
the gradient's rows and columns, the norm of the update, then the update: each waits for the
one before); Muon's two element-wise halves (the matrix products, compute, are not in it);
LBFGS's new pair, each loop's pass per stored pair and the parameter step (its closure's
gradient, timed with the step, is not in the floor: the objective's bytes, not the
optimizer's).

A cell's rounds are cut, to no fewer than 3, where they would take over two minutes (timed
from the warm-up: Muon's Newton-Schulz products, cubic in the side, take npoptim's in-order
kernels 1.3 s a step at 256 x 256 on the 2-core EPYC this was written on, under load: some 64
times that at 1024 x 1024, not measured); each cell records its rounds, and LBFGS's cells the
length of each side's history after the timed steps.

Both sides run on one thread (Numba's and torch's thread counts are set to 1 for the case and
restored after; bitsandbytes' CPU step is torch operations, torchao's compiled C++ takes
torch's thread count when it is built). ratio = reference time / npoptim time; a cell's target
is met when it is at least 0.5. A reference library that does not import (or ``--no-torch``)
leaves its cells with npoptim and the floor only, and is recorded as skipped with the reason;
bfloat16 needs ``ml_dtypes`` (the extra ``bf16``): without it the bfloat16 cells are skipped.
"""
import importlib
import math
import os
import time
from typing import Callable, NamedTuple

import numpy as np

from npoptim.bench import floors, torch_ref
from npoptim.bench.timing import cycle, interleaved, one_thread
from npoptim.kernels.jit import kernel
from npoptim.precision.formats import FORMATS, from_float32, round_to, to_float32

SIZE = 1 << 20
GRADIENTS = 4
#: LBFGS: the history the two-loop runs over (full after the warm-up) and one iteration a step
LBFGS_HISTORY = 10
#: LBFGS: the parameter and targets are this over sqrt(size) (see _problem)
LBFGS_SCALE = 4.0
LBFGS_SETTINGS = dict(lr=1.0, max_iter=1, history_size=LBFGS_HISTORY)
#: the first target number; cell k of :func:`all_cells` (skipped or not) is target 161 + k
TARGET_BASE = 161
#: a cell's goal: reference time / npoptim time at least this
GOAL = 0.5
#: a cell's timed rounds are cut (to no fewer than MIN_ROUNDS) where they would take longer than
#: this many seconds (module docstring)
CELL_BUDGET_S, MIN_ROUNDS = 120.0, 3
NPOPTIM, REFERENCE, FLOOR = "npoptim", "reference", "touch floor"
BOTH, BF16 = ("bfloat16", "float16"), ("bfloat16",)


class Cell(NamedTuple):
    """One optimizer of the case: how each side makes it, on which formats, and its floor."""

    name: str              # the row's label (npoptim.precision's class, and its option)
    library: str           # the module the reference needs (its absence skips the reference)
    reference: str         # the reference, as printed
    formats: tuple
    kind: str              # "flat" (element-wise), "matrix" (Adafactor, Muon) or "lbfgs"
    ours: Callable         # (npoptim.precision, [param]) -> optimizer
    theirs: Callable       # (library module, [tensor]) -> optimizer
    floor: tuple           # floor_passes' description (see there)


def _q(codes):
    """The floor of a quantized state: ``codes`` bytes per element for each of two moments."""
    return ("codes", codes)


CELLS = (
    Cell("Adafactor", "torch", "torch.optim.Adafactor (foreach=False)", BOTH, "matrix",
         lambda P, ps: P.Adafactor(ps, lr=1e-2),
         lambda torch, ts: torch.optim.Adafactor(ts, lr=1e-2, foreach=False), ("adafactor",)),
    Cell("Muon", "torch", "torch.optim.Muon", BOTH, "matrix",
         lambda P, ps: P.Muon(ps, lr=1e-3),
         lambda torch, ts: torch.optim.Muon(ts, lr=1e-3), ("muon",)),
    Cell("LBFGS", "torch", f"torch.optim.LBFGS (history {LBFGS_HISTORY}, 1 iteration a step)",
         BOTH, "lbfgs", lambda P, ps: P.LBFGS(ps, **LBFGS_SETTINGS),
         lambda torch, ts: torch.optim.LBFGS(ts, **LBFGS_SETTINGS), ("lbfgs", LBFGS_HISTORY)),
    Cell("KahanAdamW", "optimi", "optimi.AdamW(kahan_sum=True)", BOTH, "flat",
         lambda P, ps: P.KahanAdamW(ps, lr=1e-3, weight_decay=1e-2),
         lambda optimi, ts: optimi.AdamW(ts, lr=1e-3, weight_decay=1e-2, kahan_sum=True),
         ("states", 3)),
    Cell("KahanSGD", "optimi", "optimi.SGD(momentum=0.9, kahan_sum=True)", BOTH, "flat",
         lambda P, ps: P.KahanSGD(ps, lr=1e-3, momentum=0.9),
         lambda optimi, ts: optimi.SGD(ts, lr=1e-3, momentum=0.9, kahan_sum=True),
         ("states", 2)),
    Cell("KahanLion", "optimi", "optimi.Lion(kahan_sum=True)", BOTH, "flat",
         lambda P, ps: P.KahanLion(ps, lr=1e-4, weight_decay=0.1),
         lambda optimi, ts: optimi.Lion(ts, lr=1e-4, weight_decay=0.1, kahan_sum=True),
         ("states", 2)),
    Cell("AdamW stochastic", "torchao.optim", "torchao.optim._AdamW(bf16_stochastic_round=True)",
         BF16, "flat",
         lambda P, ps: P.AdamW(ps, lr=1e-3, weight_decay=1e-2, rounding="stochastic"),
         lambda ao, ts: ao._AdamW(ts, lr=1e-3, weight_decay=1e-2, bf16_stochastic_round=True),
         ("states", 2)),
    Cell("AdamW8bit", "torchao.optim", "torchao.optim.AdamW8bit", BF16, "flat",
         lambda P, ps: P.AdamW8bit(ps, lr=1e-3, weight_decay=1e-2),
         lambda ao, ts: ao.AdamW8bit(ts, lr=1e-3, weight_decay=1e-2), _q(1)),
    Cell("AdamW8bit stochastic", "torchao.optim",
         "torchao.optim.AdamW8bit(bf16_stochastic_round=True)", BF16, "flat",
         lambda P, ps: P.AdamW8bit(ps, lr=1e-3, weight_decay=1e-2, bf16_stochastic_round=True),
         lambda ao, ts: ao.AdamW8bit(ts, lr=1e-3, weight_decay=1e-2,
                                     bf16_stochastic_round=True), _q(1)),
    Cell("AdamW4bit", "torchao.optim", "torchao.optim.AdamW4bit", BF16, "flat",
         lambda P, ps: P.AdamW4bit(ps, lr=1e-3, weight_decay=1e-2),
         lambda ao, ts: ao.AdamW4bit(ts, lr=1e-3, weight_decay=1e-2), _q(0.5)),
    Cell("AdamWFp8", "torchao.optim", "torchao.optim.AdamWFp8", BF16, "flat",
         lambda P, ps: P.AdamWFp8(ps, lr=1e-3, weight_decay=1e-2),
         lambda ao, ts: ao.AdamWFp8(ts, lr=1e-3, weight_decay=1e-2), _q(1)),
    Cell("BnbAdam8bit", "bitsandbytes", "bitsandbytes.optim.Adam8bit (CPU)", BF16, "flat",
         lambda P, ps: P.BnbAdam8bit(ps, lr=1e-3),
         lambda bnb, ts: bnb.optim.Adam8bit(ts, lr=1e-3), _q(1)),
    Cell("BnbAdamW8bit", "bitsandbytes", "bitsandbytes.optim.AdamW8bit (CPU)", BF16, "flat",
         lambda P, ps: P.BnbAdamW8bit(ps, lr=1e-3, weight_decay=1e-2),
         lambda bnb, ts: bnb.optim.AdamW8bit(ts, lr=1e-3, weight_decay=1e-2), _q(1)),
)


def all_cells(cells=CELLS):
    """Every ``(cell, format)`` of the case, in target order."""
    return [(cell, fmt) for cell in cells for fmt in cell.formats]


def matrix_shape(size):
    """Adafactor's and Muon's matrix for ``size`` elements: ``size // cols x cols`` with
    ``cols`` the power of two at or below the square root (1024 x 1024 for 1M)."""
    cols = 1 << ((size.bit_length() - 1) // 2)
    return size // cols, cols


def check_size(size):
    """``size`` must be quantized by torchao and bitsandbytes alike: at least 4096 elements (the
    least they quantize), a multiple of 256 (their largest block)."""
    if size < 4096 or size % 256:
        raise ValueError(f"references: size {size:,} must be at least 4,096 and a multiple of "
                         "256 (the quantized optimizers' smallest quantized parameter, their "
                         "block)")


def _dtype(fmt):
    from npoptim.precision.formats import bfloat16_dtype
    return bfloat16_dtype() if fmt == "bfloat16" else np.dtype(np.float16)


def _arrays(fmt, shape, seed=0, scale=1.0):
    """A 16-bit parameter of ``shape`` and ``GRADIENTS`` gradients (NumPy arrays), standard
    normal and a tenth of it, times ``scale``."""
    dtype = _dtype(fmt)
    rng = np.random.default_rng(seed)
    param = (scale * rng.standard_normal(shape)).astype(np.float32).astype(dtype)
    grads = [(0.1 * scale * rng.standard_normal(shape)).astype(np.float32).astype(dtype)
             for _ in range(GRADIENTS)]
    return param, grads


def _problem(cell, fmt, size):
    """The arrays of a cell: LBFGS's (the parameter and the closure's targets) scaled by
    ``LBFGS_SCALE / sqrt(size)``, so that its sums, 0-d 16-bit tensors in torch, stay inside
    float16's range at any size. Measured (100 steps, torch's float16 LBFGS and npoptim's bit
    for bit alike): unscaled, the parameter went NaN at 4,096 elements; at a scale of 1,
    ``1 / y.dot(s)`` overflowed to inf there and the parameter went NaN; at 8 it went NaN at
    65,536 elements; 4 kept both formats finite and the history full at 4,096, 65,536 and 1M
    elements."""
    scale = LBFGS_SCALE / math.sqrt(size) if cell.kind == "lbfgs" else 1.0
    return _arrays(fmt, _shape(cell, size), scale=scale)


def _shape(cell, size):
    return matrix_shape(size) if cell.kind == "matrix" else (size,)


def quadratic_weights(size, dtype):
    """LBFGS's objective's curvatures ``w``: 0.5, 1.1, ..., 2.9 in turn (held by both
    formats)."""
    return (0.5 + (np.arange(size) % 5) * 0.6).astype(np.float32).astype(dtype)


@kernel
def quadratic_grad16(x, c, w, code, out):
    """``out = R(w R(x - c))`` on 16-bit bits: the gradient of ``0.5 sum w (x - c)^2`` with
    each op rounded to the format, as torch's ``w * (x - c)`` on 16-bit tensors."""
    for i in range(x.size):
        d = round_to(to_float32(x[i], code) - to_float32(c[i], code), code)
        out[i] = from_float32(w_times(to_float32(w[i], code), d, code), code)


@kernel
def w_times(w, d, code):
    return round_to(w * d, code)


def npoptim_step(cell, fmt, size):
    """A callable: one step of npoptim's optimizer of ``cell`` (the gradients in turn; LBFGS:
    the closure's targets in turn)."""
    import npoptim.precision as precision
    param, grads = _problem(cell, fmt, size)
    opt = cell.ours(precision, [param])
    if cell.kind == "lbfgs":
        code = FORMATS[fmt]
        bits, w = param.view(np.uint16), quadratic_weights(size, param.dtype).view(np.uint16)

        def step(target):
            def closure():
                out = np.empty(size, np.uint16)  # a new gradient each call, as torch's
                quadratic_grad16(bits, target.view(np.uint16), w, code, out)
                return 0.0, [out.view(param.dtype)]
            opt.step(closure)
        call = cycle(step, grads)
        call.history = lambda: len(opt.state_dict()["state"][0].get("old_dirs", []))
        return call
    return cycle(lambda g: opt.step([g]), grads)


def reference_step(cell, module, fmt, size):
    """A callable: one step of the reference of ``cell`` (``module``: its library) on the same
    tensors (copies of the same bits)."""
    torch = torch_ref.load()
    param, grads = _problem(cell, fmt, size)
    dtype = getattr(torch, fmt)

    def as_torch(a):
        return torch.from_numpy(a.view(np.int16).copy()).view(dtype)
    p = as_torch(param)
    gs = [as_torch(g) for g in grads]
    opt = cell.theirs(module, [p])
    if cell.kind == "lbfgs":
        w = as_torch(quadratic_weights(size, param.dtype))

        def step(target):
            def closure():
                p.grad = torch.mul(w, torch.sub(p, target))
                return 0.0
            opt.step(closure)
        call = cycle(step, gs)
        call.history = lambda: len(opt.state[p].get("old_dirs", []))
        return call

    def step(g):
        p.grad = g
        opt.step()
    return cycle(step, gs)


def floor_passes(cell, size):
    """The passes of ``cell``'s touch floor (module docstring) on ``size`` elements: lists of
    ``(read, written)`` arrays for :func:`npoptim.bench.floors.passes_floor`, 2 bytes an element
    (quantized codes: ``uint8``, one a byte, or two a byte for 4-bit)."""
    def a(n=size, dtype=np.uint16):
        return np.zeros(int(n), dtype)
    kind = cell.floor[0]
    if kind == "states":  # grad read; param and the element-wise states read and written
        return [([a()], [a() for _ in range(1 + cell.floor[1])])]
    if kind == "codes":  # the parameter's pass, then the two moments' codes
        return [([a()], [a()]), ([], [a(size * cell.floor[1], np.uint8) for _ in range(2)])]
    if kind == "adafactor":  # norms of param and grad rows/columns; norm of U; the update
        p, g = a(), a()
        return [([p, g], []), ([g], []), ([g], [p])]
    if kind == "muon":  # momentum from the gradient; param from the orthogonalized update
        return [([a()], [a()]), ([a()], [a()])]
    if kind == "lbfgs":  # the new pair; each loop's pass per stored pair; the param step
        pairs = [(a(), a()) for _ in range(cell.floor[1])]
        q = a()
        loop = [([s, y], [q]) for s, y in pairs]
        return [([a(), a(), a()], [a(), a()])] + loop + loop[::-1] + [([q], [a()])]
    raise ValueError(f"unknown floor {cell.floor!r}")


def load_library(name, use_torch=True):
    """``(module, None)``, or ``(None, why it is not there)``."""
    if not use_torch:
        return None, "--no-torch"
    if torch_ref.load() is None:
        return None, "torch is not installed"
    try:
        return (torch_ref.load() if name == "torch" else importlib.import_module(name)), None
    except Exception as exc:  # a library that does not import: its cells run without it
        return None, f"{name} does not import ({type(exc).__name__}: {exc})"


def torch_compiles():
    """False where ``TORCHDYNAMO_DISABLE=1`` turns ``torch.compile`` off (torchao's step then
    runs eagerly, op by op: its code path, not its speed; the tests run it so)."""
    return os.environ.get("TORCHDYNAMO_DISABLE", "") != "1"


def library_version(module):
    """The version of the package ``module`` belongs to (torchao for torchao.optim)."""
    package = importlib.import_module(module.__name__.partition(".")[0])
    return getattr(package, "__version__", None)


def references(report, size=SIZE, rounds=15, use_torch=True, names=None, cells=CELLS):
    """Time every cell (module docstring), or those whose name is in ``names``; adds rows, one
    target per cell (numbered by its place in :func:`all_cells`, :data:`TARGET_BASE` on) and
    the cells to ``report.references``."""
    check_size(size)
    if names is not None:
        unknown = set(names) - {c.name for c in cells}
        if unknown:
            raise ValueError(f"references: unknown cell(s) {sorted(unknown)}; choose from "
                             f"{[c.name for c in cells]}")
    try:
        _dtype("bfloat16")
        formats = BOTH
    except ImportError as exc:
        print(f"\n== references: bfloat16 cells skipped: {exc}")
        report.skip("references bfloat16", str(exc))
        formats = ("float16",)
    libraries = {}
    torch = torch_ref.load() if use_torch else None
    results = []
    with one_thread(torch):
        for number, (cell, fmt) in enumerate(all_cells(cells), TARGET_BASE):
            if fmt not in formats or (names is not None and cell.name not in names):
                continue
            if cell.library not in libraries:
                libraries[cell.library] = load_library(cell.library, use_torch)
                why = libraries[cell.library][1]
                if why is not None:
                    print(f"\n== references: {cell.library} cells without their reference: "
                          f"{why}")
                    report.skip(f"references {cell.library}", why)
            module, why = libraries[cell.library]
            shape = _shape(cell, size)
            n = math.prod(shape)
            fns = {NPOPTIM: npoptim_step(cell, fmt, n),
                   FLOOR: floors.passes_floor(floor_passes(cell, n), parallel=False)}
            reference_name = cell.reference
            if module is not None:
                fns[REFERENCE] = reference_step(cell, module, fmt, n)
                if cell.library == "torchao.optim" and not torch_compiles():
                    reference_name += " [eager: TORCHDYNAMO_DISABLE=1]"
            timed = interleaved(fns, rounds=_warm_up(cell, fns, rounds), warmup=0)
            result = {"target": number, "optimizer": cell.name, "format": fmt,
                      "shape": list(shape), "rounds": len(timed[NPOPTIM]["samples"]),
                      "reference_name": reference_name,
                      "library": cell.library,
                      "library_version": None if module is None else library_version(module),
                      "skipped": why}
            result.update({k: v["median"] * 1e3 for k, v in timed.items()})
            if cell.kind == "lbfgs":
                result["history"] = {k: fn.history() for k, fn in fns.items()
                                     if hasattr(fn, "history")}
            results.append(result)
            _row(report, result)
    report.references = results
    for result in results:
        ratio = ratio_of(result)
        report.target(result["target"], f"{result['optimizer']} {result['format']}: "
                      "reference / npoptim", ratio, f">= {GOAL}",
                      None if ratio is None else ratio >= GOAL,
                      note=result["reference_name"] if ratio is not None
                      else f"no reference: {result['skipped']}")
    return results


def _warm_up(cell, fns, rounds):
    """Two untimed calls of each candidate (compiling: Numba's kernels, torchao's
    ``torch.compile``; LBFGS: as many steps as fill its history first); returns the rounds to
    time: ``rounds``, fewer (not below ``MIN_ROUNDS``) where a round, measured by the last
    warm-up call of each, would make the cell take over ``CELL_BUDGET_S`` seconds."""
    calls = 2 * LBFGS_HISTORY if cell.kind == "lbfgs" else 2
    per_round = 0.0
    for fn in fns.values():
        for _ in range(calls - 1):
            fn()
        start = time.perf_counter()
        fn()
        per_round += time.perf_counter() - start
    return max(MIN_ROUNDS, min(rounds, int(CELL_BUDGET_S / per_round)))


def ratio_of(result):
    """reference time / npoptim time (above 1: npoptim faster), or None."""
    ref = result.get(REFERENCE)
    return None if ref is None else ref / result[NPOPTIM]


def _row(report, result):
    shape = " x ".join(f"{n:,}" for n in result["shape"])
    group = f"references: {result['optimizer']} {result['format']}, {shape}"
    print(f"\n== {group}  [{result['reference_name']}]")
    for name in (NPOPTIM, REFERENCE, FLOOR):
        if name in result:
            ratios = {} if name == NPOPTIM else {"over_npoptim": result[name] / result[NPOPTIM]}
            report.row(group, name, result[name], **ratios)
            print(f"  {name:<12} {result[name]:9.3f} ms")
    if result["skipped"]:
        print(f"  (no reference: {result['skipped']})")


def markdown_table(results):
    """The docs' table: one line per cell, ms and ratios (reference / npoptim: the target is
    0.5 or above; npoptim / floor: 1 is the memory-bound floor)."""
    lines = ["| optimizer | format | reference | npoptim | reference | touch floor | "
             "reference / npoptim | npoptim / floor |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        ref, ratio = r.get(REFERENCE), ratio_of(r)
        version = f" {r['library_version']}" if r.get("library_version") else ""
        name = r["reference_name"] + (version if r["library"] != "torch" else "")
        lines.append(f"| {r['optimizer']} | {r['format']} | {name} | {r[NPOPTIM]:.3g} ms | "
                     f"{'-' if ref is None else f'{ref:.3g} ms'} | {r[FLOOR]:.3g} ms | "
                     f"{'-' if ratio is None else f'{ratio:.2f}x'} | "
                     f"{r[NPOPTIM] / r[FLOOR]:.2f} |")
    return "\n".join(lines) + "\n"
