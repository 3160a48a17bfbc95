"""``npoptim verify [CASES [RESULTS]]``: check results against golden cases.

CASES and RESULTS are golden files or directories of them (``reference_results`` is one;
without CASES, the suite npoptim carries: ``npoptim suite`` says where it is). Without
RESULTS, npoptim itself is run over the cases. Prints, as each case is judged, its row of max
abs error, max scale-relative error and ULP distance against the case's tolerance (a row per
step for a case that fails, with the first step and element where it diverges; ``--steps``
for every case, ``--summary`` for one row each), then what was and was not selected. When
the output is not a terminal, a progress line goes to stderr on long runs. Cases can be selected by id, optimizer,
flavor and capability tag (``--tag``, ``--exclude-tag``); a results file may declare a case
``skipped`` with a reason, and skipped cases are reported apart from failures. Exit status: 0
if every selected case passes or is skipped by the results, 1 if any fails or is missing, 2 if
a file is malformed or does not match its cases (the message names the file, the case and the
field).
"""
import sys

from npoptim import registry
from npoptim.cli.progress import ProgressLine
from npoptim.golden.compare import report_footer, report_header, report_lines, report_width
from npoptim.golden.schema import GoldenFileError
from npoptim.golden.suite import suite_path
from npoptim.golden.verify import Verification


def add_arguments(parser):
    parser.add_argument("cases", metavar="CASES", nargs="?",
                        help="golden case file, or a directory of them (default: the suite "
                             "npoptim carries, see npoptim suite)")
    parser.add_argument("results", metavar="RESULTS", nargs="?",
                        help="another implementation's results file or directory (same "
                             "schema, kind \"results\"); omit to re-run npoptim itself")
    parser.add_argument("--optimizer", action="append", metavar="NAME",
                        help="only the cases of this optimizer (repeatable)")
    parser.add_argument("--case", action="append", metavar="GLOB",
                        help="only cases whose id matches (repeatable), e.g. 'Adam/*/float32'")
    parser.add_argument("--tag", action="append", metavar="TAG",
                        help="only cases with this capability tag (repeatable: all of them), "
                             "e.g. float32, amsgrad, lr-schedule")
    parser.add_argument("--exclude-tag", action="append", metavar="TAG",
                        help="leave out cases with this tag (repeatable), e.g. float64, "
                             "none-grad, csr, maximize")
    parser.add_argument("--flavor", action="append", metavar="NAME",
                        help="the cases a framework's users run (repeatable): the flavor's "
                             "own cases plus the torch cases it does not override; torch, "
                             "keras, optax, ... (npoptim list) or all. Default: torch's "
                             "cases, or every case if CASES has none")
    detail = parser.add_mutually_exclusive_group()
    detail.add_argument("--steps", action="store_true",
                        help="a row per step for every case (default: for failing cases "
                             "only)")
    detail.add_argument("--summary", action="store_true",
                        help="one row per case, failing cases too")


def run(args):
    try:
        names = [registry.resolve(n) for n in args.optimizer or ()] or None
        args.cases = args.cases or str(suite_path())
    except (KeyError, FileNotFoundError) as exc:  # an unknown name; no suite installed
        print(f"error: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return 2
    try:
        run = Verification(args.cases, args.results, names, args.case, args.tag,
                           args.exclude_tag, args.flavor)
        width = report_width(c.id for c in run.cases)
        print(f"verify {args.results or 'npoptim (re-run)'} against {args.cases}: "
              f"{len(run.cases)} cases", flush=True)
        for line in report_header(width):
            print(line)
        detail = "steps" if args.steps else "cases" if args.summary else "failures"
        progress = (None if sys.stdout.isatty()
                    else ProgressLine("npoptim verify: cases judged"))
        reports = []
        for report in run.reports(progress):
            reports.append(report)
            print("\n".join(report_lines(report, width, detail)), flush=True)
    except GoldenFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join([""] + report_footer(reports)))
    for note in run.notes:
        print(f"note: {note}")
    failed = [r for r in reports if r.failed]
    if failed and any(r.status == "fail" for r in failed):
        print("verify failed? If your framework is Keras, optax, TF, TF.js or ONNX, check that "
              "you replay the flavor's cases (reference_results/cases/<flavor>/, npoptim list "
              "shows what each flavor changes); leave out what it cannot run with "
              "--exclude-tag or declare it skipped in the results "
              "(reference_results/README.md, Flavors).")
    return 1 if failed else 0
