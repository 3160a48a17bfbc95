"""The ``sparse16`` case of ``npoptim bench``: 16-bit SparseAdam's cost against table rows and
touched rows.

One process: for each table of ``rows x D`` (D = 64) and each number of touched rows, three
steps from a ready, coalesced row gradient of the same rows (medians):

* ``npoptim.precision.SparseAdam`` on a bfloat16 table (per-op rounding: torch's arithmetic),
  from a :class:`~npoptim.sparse.rowsparse.RowSparseGrad` with bfloat16 values;
* torch's ``SparseAdam`` on a bfloat16 table (its only CPU path), from the coalesced hybrid
  COO gradient of the same rows (what ``nn.Embedding(sparse=True)``'s gradient is after
  ``coalesce()``; a step's own ``coalesce()`` of it returns at once);
* npoptim's float32 ``SparseAdam`` on a float32 table, from the float32 ``RowSparseGrad``.

The touched rows are drawn without repeats over the whole table (scattered touches), a new set
each of ``GRADIENTS`` gradients, stepped in turn. The table sweep keeps the touched rows fixed
(``rows`` grows 100x: a step that is O(touched rows) costs the same), the touched sweep keeps
the largest table (the cost grows with the touched rows); the cell in both is measured once. A
candidate has one table per table size, which the gradients of every touched count step, and
torch's tables are made after npoptim's are freed: the process holds about one cell's tables at
a time (peak resident memory 1.1 GB at 1,000,000 x 64, 0.3 GB of it the imports, where a table
set per cell and sweep, all at once, made it 2.4 GB). npoptim's candidates of every cell of
both sweeps are timed in the same interleaved rounds, so that the ratios between cells are
between medians of one run too (on this shared machine, cells timed one after the other
differed by 5x under the same code); torch's, in rounds of their own right after: its step
grows with the table (0.33 ms at 10,000 rows, 1.37 ms at 1,000,000, 1,000 rows touched,
measured alone), and interleaved with it npoptim's 16-bit step at 1,000,000 rows took 5x its
time alone. torch runs on one thread (its setting is restored after), as npoptim's steps here
are below its parallel threshold (serial): see :mod:`npoptim.bench.scale` for why. bfloat16
needs ``ml_dtypes`` (the extra ``bf16``); without it the case is skipped with a note.
"""
import numpy as np

from npoptim.bench import torch_ref
from npoptim.bench.scale import small_pages
from npoptim.bench.timing import cycle, interleaved

WIDTH = 64
GRADIENTS = 4
BF16 = "npoptim bf16 (precision.SparseAdam)"
TORCH = "torch bf16 SparseAdam"
F32 = "npoptim float32 SparseAdam"
#: the suffix of a candidate's fastest round (ms): the growth targets read it, as on this
#: shared machine another process preempting a 2 ms call inflates its median by several times
MIN = ", fastest round"


def gradients(nrows, touched, width, seed=0):
    """``GRADIENTS`` coalesced row gradients ``(rows, values)``: ``touched`` distinct rows of
    ``nrows`` (sorted), standard normal float32 values."""
    rng = np.random.default_rng(seed)
    return [(np.sort(rng.choice(nrows, touched, replace=False)).astype(np.int64),
             rng.standard_normal((touched, width)).astype(np.float32))
            for _ in range(GRADIENTS)]


def _npoptim_steps(nrows, touched_counts, width):
    """``{(touched, name): step()}``: npoptim's bfloat16 and float32 SparseAdam, each on one
    ``nrows x width`` table that the gradients of every touched count step (the values do not
    change the cost; a table per count would hold several copies of the largest table)."""
    import npoptim
    import npoptim.precision as lowp
    from npoptim.precision.formats import bfloat16_dtype
    from npoptim.sparse.rowsparse import RowSparseGrad

    bf16 = bfloat16_dtype()
    opt16 = lowp.SparseAdam([np.zeros((nrows, width), bf16)], lr=1e-3)
    opt32 = npoptim.SparseAdam([np.zeros((nrows, width), np.float32)], lr=1e-3)
    fns = {}
    for touched in touched_counts:
        data = gradients(nrows, touched, width)
        fns[(touched, BF16)] = cycle(lambda g: opt16.step([g]), [
            RowSparseGrad(rows, values.astype(bf16), nrows) for rows, values in data])
        fns[(touched, F32)] = cycle(lambda g: opt32.step([g]), [
            RowSparseGrad(rows, values, nrows) for rows, values in data])
    return fns


def _torch_steps(torch, nrows, touched_counts, width):
    """``{(touched, TORCH): step()}``: torch's SparseAdam on one bfloat16 table, as above."""
    tparam = torch.zeros((nrows, width), dtype=torch.bfloat16)
    topt = torch.optim.SparseAdam([tparam], lr=1e-3)

    def step(g):
        tparam.grad = g
        topt.step()
    fns = {}
    for touched in touched_counts:
        fns[(touched, TORCH)] = cycle(step, [
            torch.sparse_coo_tensor(torch.from_numpy(rows).reshape(1, -1),
                                    torch.from_numpy(values).to(torch.bfloat16),
                                    (nrows, width), check_invariants=False).coalesce()
            for rows, values in gradients(nrows, touched, width)])
    return fns


def sweep(plan, width=WIDTH, rounds=31, use_torch=True):
    """One cell per ``(rows, touched)`` of ``plan``: npoptim's candidates of every cell timed in
    the same interleaved rounds (so that ratios between cells are between medians of one run),
    then torch's, in rounds of their own (see the module docstring). A candidate has one table
    per table size, which every touched count of that size steps, and a framework's tables are
    freed before the next one's are made: the peak is about one cell's tables."""
    by_rows = {}
    for nrows, touched in plan:
        by_rows.setdefault(nrows, []).append(touched)
    torch = torch_ref.load() if use_torch else None
    builders = [lambda n, counts: _npoptim_steps(n, counts, width)]
    if torch is not None:
        builders.append(lambda n, counts: _torch_steps(torch, n, counts, width))
    result = {}
    threads = torch.get_num_threads() if torch is not None else None
    try:
        if torch is not None:
            torch.set_num_threads(1)
        with small_pages():  # scattered touches of 4 KiB pages, not 2 MiB ones (see there)
            for build in builders:  # a framework's tables are freed when _timed returns
                result.update(_timed({f"{nrows}/{touched}/{name}": fn
                                      for nrows, counts in by_rows.items()
                                      for (touched, name), fn in build(nrows, counts).items()},
                                     rounds))
    finally:
        if threads is not None:
            torch.set_num_threads(threads)
    cells = []
    for nrows, touched in plan:
        c = {"rows": nrows, "touched": touched, "width": width}
        for name in (BF16, TORCH, F32):
            r = result.get(f"{nrows}/{touched}/{name}")
            if r is not None:
                c[name] = r["median"] * 1e3
                c[name + MIN] = r["min"] * 1e3
        cells.append(c)
    return cells


def _timed(fns, rounds):
    for fn in fns.values():  # compile, and fault in the touched pages
        for _ in range(2 * GRADIENTS):
            fn()
    return interleaved(fns, rounds=rounds, warmup=0)


def peak_rss_mb():
    """This process's peak resident memory so far (MB), or None where ``resource`` is
    missing."""
    try:
        import resource
    except ImportError:
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def sparse16(report, table_rows, touched_rows, width=WIDTH, rounds=31, use_torch=True):
    """The table sweep (every ``table_rows`` at the middle count of ``touched_rows``) and the
    touched sweep (every ``touched_rows`` at the largest table), timed in one :func:`sweep` (the
    cell in both is measured once): adds rows and targets to ``report`` and the cells, by rows
    then touched rows, to ``report.sparse16``."""
    try:
        from npoptim.precision.formats import bfloat16_dtype
        bfloat16_dtype()
    except ImportError as exc:
        print(f"\n== sparse16 skipped: {exc}")
        report.skip("sparse16", str(exc))
        return []
    fixed, biggest = touched_rows[len(touched_rows) // 2], max(table_rows)
    table_plan = [(n, fixed) for n in table_rows]
    touched_plan = [(biggest, t) for t in touched_rows]
    plan = sorted(set(table_plan + touched_plan))  # (biggest, fixed) is in both sweeps
    cells = sweep(plan, width, rounds, use_torch)
    by_key = {(c["rows"], c["touched"]): c for c in cells}
    table, touched = [by_key[k] for k in table_plan], [by_key[k] for k in touched_plan]
    for c in cells:
        group = (f"sparse16: SparseAdam, {c['rows']:,} x {width}, {c['touched']:,} rows "
                 "touched")
        print(f"\n== {group}")
        for name in (BF16, TORCH, F32):
            if name in c:
                ratios = {} if name == BF16 else {"over_bf16": c[name] / c[BF16]}
                report.row(group, name, c[name], **ratios)
                print(f"  {name:<44} {c[name]:10.4f} ms")
    peak = peak_rss_mb()
    if peak is not None:
        print(f"  (this process's peak resident memory so far: {peak:,.0f} MB)")
    report.sparse16 = cells
    _targets(report, table, touched)
    return cells


def _targets(report, table, touched):
    """Targets from the table sweep's cells and the touched sweep's (each one run)."""
    small, big = min(table, key=lambda c: c["rows"]), max(table, key=lambda c: c["rows"])
    fast = BF16 + MIN
    growth = big[fast] / small[fast] if big is not small else None
    report.target(111, f"16-bit SparseAdam, {big['rows'] // small['rows']}x the table rows, "
                  "same touched rows: time ratio (fastest rounds)", growth,
                  "<= 1.5 (O(touched rows))", growth <= 1.5 if growth is not None else None)
    lo, hi = min(touched, key=lambda c: c["touched"]), max(touched, key=lambda c: c["touched"])
    if hi is not lo:
        per_row = (hi[fast] / hi["touched"]) / (lo[fast] / lo["touched"])
        report.target(112, f"16-bit SparseAdam, time per touched row at {hi['touched']:,} / "
                      f"at {lo['touched']:,} rows (fastest rounds)", per_row,
                      "<= 1 (linear or better)", per_row <= 1.0)
    cells = table + touched
    over_torch = [c[TORCH] / c[BF16] for c in cells if c.get(TORCH)]
    report.target(113, "torch bf16 SparseAdam / npoptim bf16, worst cell",
                  min(over_torch) if over_torch else None, ">= 1",
                  min(over_torch) >= 1 if over_torch else None)
    over_f32 = [c[BF16] / c[F32] for c in cells]
    report.target(114, "npoptim bf16 (per-op rounding) / npoptim float32, worst cell",
                  max(over_f32), "informational (rounding every op costs)", None)


def markdown_table(cells):
    """The README's table: one line per cell, ms and ratios."""
    lines = ["| rows x D | touched rows | npoptim bf16 (fastest) | torch bf16 | "
             "npoptim float32 | torch / npoptim bf16 | npoptim bf16 / float32 |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for c in cells:
        t = c.get(TORCH)
        lines.append(f"| {c['rows']:,} x {c['width']} | {c['touched']:,} | {c[BF16]:.3g} ms "
                     f"({c[BF16 + MIN]:.3g} ms) | "
                     f"{'-' if t is None else f'{t:.3g} ms'} | {c[F32]:.3g} ms | "
                     f"{'-' if t is None else f'{t / c[BF16]:.1f}x'} | "
                     f"{c[BF16] / c[F32]:.2f} |")
    return "\n".join(lines) + "\n"
