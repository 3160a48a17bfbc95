"""The ``precision`` case of ``npoptim bench``: 16-bit element-wise steps against torch's CPU
kernels and the touch floor.

For each element-wise optimizer of :data:`OPTIMIZERS`, each 16-bit format (bfloat16, float16)
and each rounding mode the optimizer has (``per-op``: torch's single-tensor path,
``foreach=False``; ``fused``: ``fused=True``, where torch has it), one cell: a step on
``SIZE`` (1M) elements, cycling through ``GRADIENTS`` gradients, timed in interleaved rounds
(medians) against

* torch 2.13 on the same 16-bit tensors (``torch.optim.<Name>`` with the same settings);
* the touch floor (:mod:`npoptim.bench.floors`): one pass that reads the gradient and reads
  and writes the parameter and each state, at 2 bytes an element, and does no math.

Both sides run on one thread (Numba's and torch's thread counts are set to 1 for the case and
restored after): the ratios compare kernels, not thread pools. A cell's target is met when
npoptim is at least as fast as torch, or (where torch itself is within 5% of the floor) within
1.1x of the floor. bfloat16 needs ``ml_dtypes`` (the extra ``bf16``); without it the
bfloat16 cells are skipped with a note, and without torch only the floor is compared.
"""
import numpy as np

from npoptim.bench import floors, torch_ref
from npoptim.bench.timing import cycle, interleaved, one_thread

SIZE = 1 << 20
GRADIENTS = 4
FORMATS = ("bfloat16", "float16")
#: (name, settings, the states torch's step reads and writes per element): the element-wise
#: optimizers of the performance issue, at common settings (SGD with momentum, RMSprop plain)
OPTIMIZERS = (
    ("Adam", dict(lr=1e-3), 2),
    ("AdamW", dict(lr=1e-3), 2),
    ("SGD", dict(lr=1e-2, momentum=0.9), 1),
    ("RMSprop", dict(lr=1e-3), 1),
    ("Adagrad", dict(lr=1e-2), 1),
    ("Adamax", dict(lr=2e-3), 2),
    ("Adadelta", dict(lr=1.0), 2),
    ("NAdam", dict(lr=2e-3), 2),
    ("RAdam", dict(lr=1e-3), 2),
    ("ASGD", dict(lr=1e-2), 2),
    ("Rprop", dict(lr=1e-2), 2),
)
NPOPTIM, TORCH, FLOOR = "npoptim", "torch", "touch floor"


def _arrays(fmt, size, seed=0):
    """A 16-bit parameter and ``GRADIENTS`` gradients of ``size`` elements, as NumPy arrays
    of the format (``ml_dtypes.bfloat16`` or ``float16``)."""
    from npoptim.precision.formats import bfloat16_dtype
    dtype = bfloat16_dtype() if fmt == "bfloat16" else np.dtype(np.float16)
    rng = np.random.default_rng(seed)
    param = rng.standard_normal(size).astype(np.float32).astype(dtype)
    grads = [(0.1 * rng.standard_normal(size)).astype(np.float32).astype(dtype)
             for _ in range(GRADIENTS)]
    return param, grads


def _npoptim_step(name, settings, fmt, mode, size):
    import npoptim.precision as precision
    param, grads = _arrays(fmt, size)
    opt = getattr(precision, name)([param], rounding=mode, **settings)
    return cycle(lambda g: opt.step([g]), grads)


def _torch_step(torch, name, settings, fmt, mode, size):
    param, grads = _arrays(fmt, size)
    dtype = torch.bfloat16 if fmt == "bfloat16" else torch.float16
    as_torch = lambda a: torch.from_numpy(a.view(np.int16).copy()).view(dtype)  # noqa: E731
    p = as_torch(param).requires_grad_()
    gs = [as_torch(g) for g in grads]
    implementation = dict(fused=True) if mode == "fused" else dict(foreach=False)
    opt = getattr(torch.optim, name)([p], **settings, **implementation)

    def step(g):
        p.grad = g
        opt.step()
    return cycle(step, gs)


def _floor(states, size):
    arrays = [np.zeros(size, np.uint16) for _ in range(states + 2)]
    return floors.passes_floor([([arrays[1]], [arrays[0]] + arrays[2:])], parallel=False)


def _has_mode(name, mode):
    import npoptim.precision as precision
    return mode in getattr(precision, name).roundings


def _torch_has_fused(torch, name):
    import inspect
    return "fused" in inspect.signature(getattr(torch.optim, name)).parameters


def precision16(report, size=SIZE, rounds=15, use_torch=True, optimizers=OPTIMIZERS,
                formats=FORMATS):
    """Time every cell (see the module docstring); adds rows and one target per optimizer and
    format to ``report`` and the cells to ``report.precision16``."""
    torch = torch_ref.load() if use_torch else None
    try:
        from npoptim.precision.formats import bfloat16_dtype
        bfloat16_dtype()
    except ImportError as exc:
        if "bfloat16" in formats:
            print(f"\n== precision: bfloat16 cells skipped: {exc}")
            report.skip("precision bfloat16", str(exc))
        formats = tuple(f for f in formats if f != "bfloat16")
    cells = []
    with one_thread(torch):
        for name, settings, states in optimizers:
            for fmt in formats:
                for mode in ("per-op", "fused"):
                    if not _has_mode(name, mode):
                        continue
                    fns = {NPOPTIM: _npoptim_step(name, settings, fmt, mode, size),
                           FLOOR: _floor(states, size)}
                    if torch is not None and (mode == "per-op" or _torch_has_fused(torch, name)):
                        fns[TORCH] = _torch_step(torch, name, settings, fmt, mode, size)
                    timed = interleaved(fns, rounds=rounds, warmup=2)
                    cell = {"optimizer": name, "format": fmt, "mode": mode, "size": size}
                    cell.update({k: v["median"] * 1e3 for k, v in timed.items()})
                    cells.append(cell)
                    _row(report, cell)
    report.precision16 = cells
    _targets(report, cells)
    return cells


def _row(report, cell):
    group = f"precision: {cell['optimizer']} {cell['format']} {cell['mode']}, {cell['size']:,}"
    print(f"\n== {group}")
    for name in (NPOPTIM, TORCH, FLOOR):
        if name in cell:
            ratios = {} if name == NPOPTIM else {"over_npoptim": cell[name] / cell[NPOPTIM]}
            report.row(group, name, cell[name], **ratios)
            print(f"  {name:<12} {cell[name]:9.3f} ms")


def met(cell):
    """Whether a cell meets its target: at least torch's speed, or within 1.1x of the floor
    where torch is within 5% of it; None without torch."""
    torch = cell.get(TORCH)
    if torch is None:
        return None
    if cell[NPOPTIM] <= torch:
        return True
    return torch <= 1.05 * cell[FLOOR] and cell[NPOPTIM] <= 1.1 * cell[FLOOR]


def _targets(report, cells):
    """One target per optimizer and format (its worst mode), numbered from 121."""
    keys = list(dict.fromkeys((c["optimizer"], c["format"]) for c in cells))
    for k, (name, fmt) in enumerate(keys):
        mine = [c for c in cells if (c["optimizer"], c["format"]) == (name, fmt)]
        ratios = [c[TORCH] / c[NPOPTIM] for c in mine if TORCH in c]
        verdicts = [met(c) for c in mine]
        report.target(121 + k, f"16-bit {name} {fmt}: torch / npoptim, worst mode",
                      min(ratios) if ratios else None, ">= 1 (or <= 1.1x the floor)",
                      None if None in verdicts else all(verdicts),
                      note=", ".join(f"{c['mode']} {c[TORCH] / c[NPOPTIM]:.2f}x"
                                     for c in mine if TORCH in c))


def markdown_table(cells):
    """The docs' table: one line per cell, ms and ratios (torch / npoptim: above 1 is npoptim
    faster; npoptim / floor: 1 is the memory-bound floor)."""
    lines = ["| optimizer | format | rounding | npoptim | torch | touch floor | "
             "torch / npoptim | npoptim / floor |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for c in cells:
        t = c.get(TORCH)
        lines.append(f"| {c['optimizer']} | {c['format']} | {c['mode']} | "
                     f"{c[NPOPTIM]:.3g} ms | {'-' if t is None else f'{t:.3g} ms'} | "
                     f"{c[FLOOR]:.3g} ms | {'-' if t is None else f'{t / c[NPOPTIM]:.2f}x'} | "
                     f"{c[NPOPTIM] / c[FLOOR]:.2f} |")
    return "\n".join(lines) + "\n"
