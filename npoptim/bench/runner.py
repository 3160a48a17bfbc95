"""Command line of ``npoptim bench``: choose cases and sizes, print tables, write JSON/Markdown.

``--quick`` runs every case at tiny sizes with few rounds, one size of each kind of call where
the full run sweeps several (``QUICK``): the smoke run the tests make, every code path of the
runner in seconds once Numba's cache is warm. The default sizes are the issue's: a 1,000,000 x
64 float32 table at 0.1%, 1% and 10% of rows, and 10,000,000-element dense parameters in
float32 and float64.

A case that raises is recorded (its error and traceback) and the run goes on with the next;
``--json`` and ``--markdown`` are written all the same, with the failures in them, and the exit
code is 1.
"""
import argparse
import json
import sys
import traceback

import numba

CASES = ("sparse", "dense", "threads", "startup", "scale", "lookups", "sparse16", "precision",
         "references")
#: ``scale`` (npoptim.bench.scale: tables of 1M to 100M rows, a process per framework) takes
#: many minutes and up to 20 GB, ``lookups`` (npoptim.bench.lookups: batches of 1,024 to
#: 65,536 lookups against FBGEMM) minutes and 6 GB, ``references`` (npoptim.bench.references:
#: Adafactor, Muon, LBFGS, Kahan, quantized against their libraries) minutes, torchao's
#: torch.compile builds included: run them by name
DEFAULT_CASES = ("sparse", "dense", "threads", "startup", "sparse16", "precision")

#: ``--quick``: tiny sizes and few rounds, one of each kind of call where the full run sweeps
#: several (both densities stay: they take the two branches of the sparse targets)
QUICK = dict(rows=2_000, width=8, densities=(0.01, 0.1), dense_size=20_000, dtypes="float32",
             rounds=3, thread_sizes=(1 << 12,), identity_size=20_000,
             identity_table=(2_000, 8), scale_rows=(2_000, 20_000), scale_widths=(8,),
             sparse16_rows=(2_000, 20_000), sparse16_touched=(20, 50, 200), sparse16_width=8,
             precision_size=4_096, lookups_rows=(2_000, 20_000), lookups_widths=(8,),
             lookups_batches=(64, 512), references_size=4_096)


def add_arguments(parser):
    parser.add_argument("--cases", default=",".join(DEFAULT_CASES),
                        help=f"comma-separated cases to run, from {', '.join(CASES)} "
                             f"(default: {','.join(DEFAULT_CASES)})")
    parser.add_argument("--scale-rows", default="1000000,10000000,100000000",
                        help="scale case: table sizes (rows)")
    parser.add_argument("--scale-widths", default="16,64",
                        help="scale case: embedding widths (64 only up to 10M rows)")
    parser.add_argument("--lookups-rows", default="1000000,10000000",
                        help="lookups case: table sizes (rows)")
    parser.add_argument("--lookups-widths", default="16,64",
                        help="lookups case: embedding widths")
    parser.add_argument("--lookups-batches", default="1024,4096,16384,65536",
                        help="lookups case: lookups per batch")
    parser.add_argument("--sparse16-rows", default="10000,100000,1000000",
                        help="sparse16 case: table sizes (rows), the touched rows fixed")
    parser.add_argument("--sparse16-touched", default="100,1000,10000",
                        help="sparse16 case: touched rows (the middle one for the table "
                             "sweep; all at the largest table)")
    parser.add_argument("--precision-size", type=int, default=1 << 20,
                        help="precision case: elements of the 16-bit parameter")
    parser.add_argument("--references-size", type=int, default=1 << 20,
                        help="references case: elements of the 16-bit parameter (Adafactor's "
                             "and Muon's a matrix of about as many: 1024 x 1024 for 1M)")
    parser.add_argument("--references-cells", default=None,
                        help="references case: comma-separated optimizers to run (default: all; "
                             "e.g. KahanSGD,BnbAdam8bit)")
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes and few rounds: a smoke run, not a measurement")
    parser.add_argument("--rows", type=int, default=1_000_000, help="embedding table rows")
    parser.add_argument("--width", type=int, default=64, help="embedding table columns")
    parser.add_argument("--densities", default="0.001,0.01,0.1",
                        help="fractions of rows touched per step (default 0.001,0.01,0.1)")
    parser.add_argument("--dense-size", type=int, default=10_000_000,
                        help="elements of the dense parameters")
    parser.add_argument("--dtypes", default=None,
                        help="dense dtypes (default float32,float64; float32 with --quick)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="timing rounds per case (medians are reported)")
    parser.add_argument("--threads", type=int, default=None,
                        help="Numba threads (default: Numba's, NUMBA_NUM_THREADS)")
    parser.add_argument("--torch-threads", type=int, default=None,
                        help="torch threads (default: torch's)")
    parser.add_argument("--no-torch", action="store_true", help="skip the torch rows")
    parser.add_argument("--no-cold", action="store_true",
                        help="start-up: skip the cold-cache (compiling) runs")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    parser.add_argument("--markdown", metavar="PATH",
                        help="write the results as a Markdown table")


def run(args):
    """Run the chosen cases; returns the exit code: 0, 1 when a case failed (the others ran,
    and the outputs were written with the failure and its error in them), 2 on bad arguments.
    """
    from npoptim.bench import torch_ref, workloads
    from npoptim.bench.timing import environment

    wanted = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = set(wanted) - set(CASES)
    if unknown:
        print(f"npoptim bench: unknown case(s) {sorted(unknown)}; choose from {CASES}",
              file=sys.stderr)
        return 2
    if args.threads:
        numba.set_num_threads(args.threads)
    torch = None if args.no_torch else torch_ref.load()
    if torch is not None and args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    use_torch = torch is not None
    quick = QUICK if args.quick else None
    if quick:
        rows, width, densities = quick["rows"], quick["width"], quick["densities"]
        size, rounds = quick["dense_size"], args.rounds or quick["rounds"]
        sizes = quick["thread_sizes"]
        identity = dict(identity_size=quick["identity_size"],
                        identity_table=quick["identity_table"])
    else:
        rows, width = args.rows, args.width
        densities = tuple(float(d) for d in args.densities.split(","))
        size, rounds = args.dense_size, args.rounds
        sizes = (1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 25)
        identity = {}
    dtypes = args.dtypes or (quick["dtypes"] if quick else "float32,float64")
    report = workloads.Report()
    env = environment(torch)
    print(_environment_line(env), flush=True)

    def attempt(case, call, prints=True):
        """Run one case (or one size of it); a failure is recorded and the run goes on."""
        before = len(report.rows)
        try:
            call()
        except Exception as exc:  # recorded, printed, and the exit code says so
            text = traceback.format_exc()
            print(f"\n== {case}: FAILED\n{text}", file=sys.stderr, flush=True)
            report.failure(case, f"{type(exc).__name__}: {exc}", text)
            return
        if prints:
            for group in dict.fromkeys(row["group"] for row in report.rows[before:]):
                _print_group(report, group)

    if "sparse" in wanted:
        for density in densities:
            attempt(f"sparse {density:.1%}", lambda: workloads.sparse(
                report, rows, width, density, rounds=rounds or 11, use_torch=use_torch))
    if "dense" in wanted:
        for dtype in dtypes.split(","):
            attempt(f"dense {dtype.strip()}", lambda: workloads.dense(
                report, size, dtype.strip(), rounds=rounds or 11, use_torch=use_torch))
    if "threads" in wanted:
        attempt("threads", lambda: workloads.threads(
            report, sizes=sizes, rounds=rounds or 15, gap=0.005 if quick else 0.05,
            table=(rows, width), densities=densities[:1] if quick else densities[:2],
            **identity))
    if "scale" in wanted:
        from npoptim.bench import scale

        if quick:
            scale_rows, scale_widths = quick["scale_rows"], quick["scale_widths"]
        else:
            scale_rows = tuple(int(n) for n in args.scale_rows.split(","))
            scale_widths = tuple(int(n) for n in args.scale_widths.split(","))
        attempt("scale", lambda: scale.scale(report, scale_rows, scale_widths,
                                             rounds=rounds or 15, use_torch=use_torch),
                prints=False)  # it prints each cell as it comes
    if "lookups" in wanted:
        from npoptim.bench import lookups

        if quick:
            lookup_rows, lookup_widths, lookup_batches = (
                quick["lookups_rows"], quick["lookups_widths"], quick["lookups_batches"])
        else:
            lookup_rows, lookup_widths, lookup_batches = (
                tuple(int(n) for n in getattr(args, name).split(","))
                for name in ("lookups_rows", "lookups_widths", "lookups_batches"))
        attempt("lookups", lambda: lookups.lookups(
            report, lookup_rows, lookup_widths, lookup_batches, rounds=rounds or 15,
            use_fbgemm=use_torch),
            prints=False)  # it prints each cell as it comes
    if "sparse16" in wanted:
        from npoptim.bench import sparse16

        if quick:
            table_rows, touched = quick["sparse16_rows"], quick["sparse16_touched"]
        else:
            table_rows = tuple(int(n) for n in args.sparse16_rows.split(","))
            touched = tuple(int(n) for n in args.sparse16_touched.split(","))
        attempt("sparse16", lambda: sparse16.sparse16(
            report, table_rows, touched, width=quick["sparse16_width"] if quick
            else sparse16.WIDTH, rounds=rounds or 31, use_torch=use_torch), prints=False)
    if "precision" in wanted:
        from npoptim.bench import precision16

        attempt("precision", lambda: precision16.precision16(
            report, size=quick["precision_size"] if quick else args.precision_size,
            rounds=rounds or 15, use_torch=use_torch), prints=False)  # prints each cell
    if "references" in wanted:
        from npoptim.bench import references

        names = (None if args.references_cells is None else
                 [n.strip() for n in args.references_cells.split(",") if n.strip()])
        attempt("references", lambda: references.references(
            report, size=quick["references_size"] if quick else args.references_size,
            rounds=rounds or 15, use_torch=use_torch, names=names),
            prints=False)  # prints each cell
    if "startup" in wanted:
        optimizers = (workloads.STARTUP_OPTIMIZERS[:1] if quick
                      else workloads.STARTUP_OPTIMIZERS)
        attempt("startup", lambda: workloads.startup(
            report, optimizers=optimizers, warm_runs=1 if quick else 3,
            cold=not (args.no_cold or quick)))
    env = environment(torch)  # the threading layer is known once a parallel region ran
    result = {"environment": env, "quick": bool(quick), "cases": wanted, "rows": report.rows,
              "targets": report.targets, "failures": report.failures,
              "skipped": report.skipped}
    if getattr(report, "scale", None):
        result["scale"] = report.scale
    if getattr(report, "lookups", None):
        result["lookups"] = report.lookups
    if getattr(report, "sparse16", None):
        result["sparse16"] = report.sparse16
    if getattr(report, "precision16", None):
        result["precision16"] = report.precision16
    if getattr(report, "references", None):
        result["references"] = report.references
    # the outputs first: nothing printed below can lose them
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, default=float)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(result))
    print()
    print(format_targets(report.targets, quick=bool(quick)))
    if report.failures:
        print(format_failures(report.failures))
        print(f"npoptim bench: {len(report.failures)} case(s) failed: "
              f"{', '.join(f['case'] for f in report.failures)}", file=sys.stderr)
        return 1
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m npoptim.bench",
        description="Benchmark npoptim's sparse and dense steps: medians and ratios against "
                    "torch (when installed) and against a touch-only floor.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


# -------------------------------------------------------------------------------- output
def _environment_line(env):
    torch = (f"torch {env['torch']} ({env['torch_threads']} threads)" if env["torch"]
             else "torch not installed: torch rows skipped")
    return (f"{env['date']} | {env['cpu']}, {env['cores']} cores | numba {env['numba']} "
            f"({env['numba_threads']} threads, parallel threshold {env['parallel_threshold']:,}"
            f") | numpy {env['numpy']} | scipy {env['scipy']} | {torch}")


def _num(x, unit=""):
    if x is None:
        return "-"
    if abs(x) >= 100:
        return f"{x:,.0f}{unit}"
    if abs(x) >= 10:
        return f"{x:.1f}{unit}"
    return f"{x:.3g}{unit}" if abs(x) >= 0.01 else f"{x:.2g}{unit}"


_RATIO_NAMES = {"x_floor": "x floor", "torch_over_this": "torch / this",
                "x_torch_fused_adam": "x torch fused Adam", "x_torch_same": "x torch same",
                "parallel_over_serial": "parallel / serial",
                "process_wall_ms": "process wall ms"}


def _ratios(row):
    parts = []
    for key, label in _RATIO_NAMES.items():
        value = row.get(key)
        if value is not None:
            parts.append(f"{label} {_num(value)}")
    return ", ".join(parts)


def _print_group(report, group):
    print(f"\n== {group}")
    for row in report.rows:
        if row["group"] == group:
            print(f"  {row['name']:<50} {_num(row['ms'], ' ms'):>12}  {_ratios(row)}")
    sys.stdout.flush()


def _verdict(met):
    return {True: "met", False: "NOT met", None: "-"}[met]


def format_targets(targets, quick=False):
    lines = ["== targets" + (" (quick run: tiny sizes, verdicts meaningless)" if quick else "")]
    for t in sorted(targets, key=lambda t: t["target"]):
        value = "" if t["value"] is None else _num(t["value"])
        note = f"  [{t['note']}]" if t["note"] else ""
        lines.append(f"  {t['target']:>2}. {t['what']:<66} {value:>8} (goal {t['goal']}) "
                     f"{_verdict(t['met'])}{note}")
    return "\n".join(lines)


def format_failures(failures):
    lines = ["== FAILED (the run went on without them; the tracebacks are on stderr and in "
             "--json)"]
    lines += [f"  {f['case']}: {f['error']}" for f in failures]
    return "\n".join(lines)


def markdown(result):
    """One Markdown table (every target, with the timings behind it), labelled with the
    environment; the full timings are in the JSON output."""
    env = result["environment"]
    torch = (f"torch {env['torch']} ({env['torch_threads']} threads)" if env["torch"]
             else "no torch")
    load = ", ".join(f"{x:.1f}" for x in env["load_average"] or [])
    out = [f"Measured {env['date']} on {env['cpu']} ({env['cores']} cores; load average "
           f"{load} at the end of the run: the machine is shared), Python {env['python']}, "
           f"NumPy {env['numpy']}, SciPy {env['scipy']}, Numba {env['numba']} "
           f"({env['numba_threads']} threads, {env['numba_threading_layer']} threading layer, "
           f"parallel threshold {env['parallel_threshold']:,} elements), {torch}. Medians of "
           "interleaved rounds; every ratio is between medians of one run.", "",
           "| # | what | measured | goal | verdict | timings |",
           "| --- | --- | ---: | --- | --- | --- |"]
    for t in sorted(result["targets"], key=lambda t: t["target"]):
        value = "" if t["value"] is None else _num(t["value"])
        out.append(f"| {t['target']} | {t['what']} | {value} | {t['goal']} | "
                   f"{_verdict(t['met'])} | {t['note']} |")
    if result.get("skipped"):
        out += ["", "Skipped: " + "; ".join(f"{s['case']} ({s['reason']})"
                                           for s in result["skipped"]) + "."]
    if result.get("failures"):
        out += ["", "**Failed** (the run went on without them; the tracebacks are in the JSON "
                "output):", ""]
        out += [f"- {f['case']}: {f['error']}" for f in result["failures"]]
    if result.get("scale"):
        from npoptim.bench.scale import markdown_table

        out += ["", markdown_table(result["scale"])]
    if result.get("lookups"):
        from npoptim.bench.lookups import markdown_table as lookups_table

        out += ["", lookups_table(result["lookups"])]
    if result.get("sparse16"):
        from npoptim.bench.sparse16 import markdown_table as sparse16_table

        out += ["", sparse16_table(result["sparse16"])]
    if result.get("precision16"):
        from npoptim.bench.precision16 import markdown_table as precision_table

        out += ["", precision_table(result["precision16"])]
    if result.get("references"):
        from npoptim.bench.references import markdown_table as references_table

        out += ["", references_table(result["references"])]
    return "\n".join(out) + "\n"
