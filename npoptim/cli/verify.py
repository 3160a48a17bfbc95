"""``npoptim verify CASES [RESULTS]``: check results against golden cases.

CASES and RESULTS are golden files or directories of them (``reference_results`` is one).
Without RESULTS, npoptim itself is run over the cases. Prints a per-case, per-step table of
max abs error, max scale-relative error and ULP distance against each case's tolerance, and
names the first step and element where a case diverges. Exit status: 0 if every selected case
passes, 1 if any fails, 2 if a file is malformed or does not match its cases (the message
names the file, the case and the field).
"""
import sys

from npoptim.golden.compare import format_reports, verify
from npoptim.golden.schema import GoldenFileError


def add_arguments(parser):
    parser.add_argument("cases", metavar="CASES",
                        help="golden case file, or a directory of them (e.g. reference_results)")
    parser.add_argument("results", metavar="RESULTS", nargs="?",
                        help="another implementation's results file or directory (same "
                             "schema, kind \"results\"); omit to re-run npoptim itself")
    parser.add_argument("--optimizer", action="append", metavar="NAME",
                        help="only the cases of this optimizer (repeatable)")
    parser.add_argument("--case", action="append", metavar="GLOB",
                        help="only cases whose id matches (repeatable), e.g. 'Adam/*/float32'")
    parser.add_argument("--summary", action="store_true",
                        help="one line per case instead of one per step")


def run(args):
    try:
        reports, notes = verify(args.cases, args.results, args.optimizer, args.case)
    except GoldenFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    against = args.results or "npoptim (re-run)"
    print(format_reports(reports, summary=args.summary,
                         title=f"verify {against} against {args.cases}"))
    for note in notes:
        print(f"note: {note}")
    return 0 if all(r.passed for r in reports) else 1
