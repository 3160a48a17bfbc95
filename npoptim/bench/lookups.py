"""The ``lookups`` case of ``npoptim bench``: embedding steps as the batch of lookups grows,
against FBGEMM's CPU backward+update.

For ``RowWiseAdagrad`` and ``Adagrad`` on tables of 1M and 10M rows, D = 16 and 64, float32,
with batches of 1,024 to 65,536 lookups (Zipf over the table's rows, scattered, as in
:mod:`npoptim.bench.scale`; sixteen batches of each size in turn), the timed regions are:

* npoptim end to end, both gradient forms: ``row_sparse_grad`` (O(lookups)) + step, and
  ``embedding_row_grad`` (the CSR builder, O(lookups + rows)) + step; and each build alone;
* FBGEMM's backward pass of a ``SplitTableBatchedEmbeddingBagsCodegen`` with
  ``EXACT_ROWWISE_ADAGRAD`` / ``EXACT_ADAGRAD`` (which sums the lookups per row and applies the
  update in one pass), after an untimed forward (:mod:`npoptim.bench.fbgemm_ref`).

Everything on one thread (npoptim's steps here are below its parallel threshold). Each
(framework, optimizer, table) runs in a process of its own (``python -m npoptim.bench.lookups
--worker ...``), which steps one table through every batch size; npoptim's candidates of one
batch size and gradient form are timed interleaved (medians), the row-sparse ones in rounds
of their own, the CSR ones in rounds after, and FBGEMM's medians come from the process after.
Each library's table is allocated as it allocates it for a user: npoptim's is ``np.zeros``,
which NumPy backs with transparent huge pages where the kernel allows them (``madvise``),
FBGEMM's is torch's (here on 4 KiB pages: torch does not ask for huge pages unless
``THP_MEM_ALLOC_ENABLE`` is set). The tables fit in memory either way (at most 5 GB), unlike
the scale case's 100M rows, which is why that case puts npoptim's on 4 KiB pages and this one
does not: with 4 KiB pages, every scattered row that npoptim touches waits for a page walk.
"""
import argparse
import json
import sys

import numpy as np

from npoptim.bench.processes import run_worker
from npoptim.bench.scale import batches

OPTIMIZERS = ("RowWiseAdagrad", "Adagrad")
ROWS = (1_000_000, 10_000_000)
WIDTHS = (16, 64)
LOOKUPS = (1024, 4096, 16384, 65536)
#: lookup batches of each size that a candidate cycles through
COUNT = 16
RS, CSR = "row-sparse build + step", "CSR build + step"
RS_BUILD, CSR_BUILD = "row-sparse build", "CSR build"
FBGEMM = "FBGEMM backward + update"


def _npoptim_worker(optimizer, nrows, width, rounds, sizes):
    import npoptim
    from npoptim.bench.timing import cycle, interleaved

    out = {}
    param = np.zeros((nrows, width), np.float32)
    opt = getattr(npoptim, optimizer)([param], lr=1e-2)
    for batch in sizes:
        data = batches(nrows, width, batch=batch, count=COUNT)
        cell = {}
        # the two gradient forms in rounds of their own: the CSR builder streams through an
        # O(rows) indptr (40 MB at 10M rows), which evicted the lookups and the touched rows
        # from the caches before the row-sparse candidates of the same round (3x their time
        # alone at 10M rows, measured); FBGEMM's loop has no such neighbour either
        for fns in ({RS: cycle(lambda b: opt.step([npoptim.row_sparse_grad(b[0], b[1], nrows)]),
                               data),
                     RS_BUILD: cycle(lambda b: npoptim.row_sparse_grad(b[0], b[1], nrows),
                                     data)},
                    {CSR: cycle(lambda b: opt.step([npoptim.embedding_row_grad(b[0], b[1],
                                                                               nrows)]), data),
                     CSR_BUILD: cycle(lambda b: npoptim.embedding_row_grad(b[0], b[1], nrows),
                                      data)}):
            for fn in fns.values():  # compile and fault in what the steps touch
                for _ in range(COUNT):
                    fn()
            result = interleaved(fns, rounds=rounds, warmup=0)
            cell.update({name: r["median"] * 1e3 for name, r in result.items()})
        cell["touched rows"] = float(np.mean([np.unique(ids).size for ids, _ in data]))
        out[str(batch)] = cell
    return out


def _fbgemm_worker(optimizer, nrows, width, rounds, sizes):
    from npoptim.bench import fbgemm_ref

    emb = fbgemm_ref.table(optimizer, nrows, width)
    if emb is None:
        return {}
    return {str(batch): {FBGEMM: fbgemm_ref.backward_ms(
        emb, batches(nrows, width, batch=batch, count=COUNT), rounds)} for batch in sizes}


WORKERS = {"npoptim": _npoptim_worker, "fbgemm": _fbgemm_worker}


def measure(framework, optimizer, nrows, width, rounds, sizes):
    """Run one worker in a process of its own: ``{batch: {name: ms}}``, or {} if it failed."""
    return run_worker("npoptim.bench.lookups", (framework, optimizer, nrows, width, rounds,
                                                ",".join(str(b) for b in sizes)),
                      f"{framework} {optimizer} {nrows:,} x {width}")


def lookups(report, sizes=ROWS, widths=WIDTHS, batch_sizes=LOOKUPS, rounds=15,
            use_fbgemm=True, optimizers=OPTIMIZERS):
    """Measure every (optimizer, table, batch size); add rows, the cells and the targets to
    ``report``."""
    cells = []
    for optimizer in optimizers:
        for width in widths:
            for nrows in sizes:
                ours = measure("npoptim", optimizer, nrows, width, rounds, batch_sizes)
                theirs = (measure("fbgemm", optimizer, nrows, width, rounds, batch_sizes)
                          if use_fbgemm else {})
                for batch in batch_sizes:
                    cell = {"optimizer": optimizer, "rows": nrows, "width": width,
                            "lookups": batch}
                    cell.update(ours.get(str(batch), {}))
                    cell.update(theirs.get(str(batch), {}))
                    group = (f"lookups: {optimizer}, {nrows:,} x {width} float32, "
                             f"{batch:,} lookups")
                    for name, value in cell.items():
                        if isinstance(value, float) and name != "touched rows":
                            report.row(group, name, value)
                    cells.append(cell)
                    _print_cell(cell)
    report.lookups = cells
    _targets(report, cells)
    return cells


def _print_cell(cell):
    print(f"\n== lookups: {cell['optimizer']}, {cell['rows']:,} x {cell['width']}, "
          f"{cell['lookups']:,} lookups ({cell.get('touched rows', 0):,.0f} rows touched)")
    for name, value in cell.items():
        if isinstance(value, float) and name != "touched rows":
            print(f"  {name:<44} {value:10.3f} ms")
    sys.stdout.flush()


def _worst(values, low=True):
    return (min(values) if low else max(values)) if values else None


def _targets(report, cells):
    for number, optimizer in ((151, "RowWiseAdagrad"), (152, "Adagrad")):
        ratios = [c[FBGEMM] / c[RS] for c in cells
                  if c["optimizer"] == optimizer and c.get(FBGEMM) and c.get(RS)]
        worst = _worst(ratios)
        report.target(number, f"lookups: FBGEMM / npoptim {optimizer} (row-sparse build + "
                      "step), worst cell", worst, ">= 1",
                      None if worst is None else worst >= 1, _where(cells, ratios, optimizer))
    builds = [c[RS_BUILD] / c[CSR_BUILD] for c in cells if c.get(RS_BUILD) and c.get(CSR_BUILD)]
    worst = _worst(builds, low=False)
    report.target(153, "lookups: row-sparse build / CSR build, worst cell", worst, "<= 1",
                  None if worst is None else worst <= 1)


def _where(cells, ratios, optimizer):
    """Where the worst ratio of ``optimizer``'s cells was measured (a note for the table)."""
    mine = [c for c in cells if c["optimizer"] == optimizer and c.get(FBGEMM) and c.get(RS)]
    if not mine:
        return ""
    c = mine[int(np.argmin(ratios))]
    return f"worst at {c['rows']:,} x {c['width']}, {c['lookups']:,} lookups"


def markdown_table(cells):
    """One line per (optimizer, table, batch size): ms and the ratios."""
    lines = ["| optimizer | rows x D | lookups (rows touched) | row-sparse build + step | "
             "CSR build + step | row-sparse build | CSR build | FBGEMM | "
             "FBGEMM / row-sparse | row-sparse / CSR build |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]

    def ms(value):
        if value is None:
            return "-"
        return f"{value:.3g} ms" if value < 100 else f"{value:,.0f} ms"

    def ratio(a, b):
        return "-" if not (a and b) else f"{a / b:.2f}"
    for c in cells:
        cols = [c["optimizer"], f"{c['rows']:,} x {c['width']}",
                f"{c['lookups']:,} ({c.get('touched rows', 0):,.0f})", ms(c.get(RS)),
                ms(c.get(CSR)), ms(c.get(RS_BUILD)), ms(c.get(CSR_BUILD)), ms(c.get(FBGEMM)),
                ratio(c.get(FBGEMM), c.get(RS)), ratio(c.get(RS_BUILD), c.get(CSR_BUILD))]
        lines.append("| " + " | ".join(cols) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m npoptim.bench.lookups")
    parser.add_argument("--worker", nargs=6, metavar=("FRAMEWORK", "OPTIMIZER", "ROWS",
                                                      "WIDTH", "ROUNDS", "BATCHES"))
    args = parser.parse_args(argv)
    framework, optimizer, nrows, width, rounds, sizes = args.worker
    result = WORKERS[framework](optimizer, int(nrows), int(width), int(rounds),
                                [int(b) for b in sizes.split(",")])
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
