"""``npoptim diagnose RESULTS [--suite CASES] [--optimizer NAME]``: why results differ.

RESULTS is another implementation's results for golden cases (the format ``npoptim verify``
reads). Replays a catalogue of known convention differences and mistakes through npoptim's
reference optimizers (:mod:`npoptim.diagnose.catalogue`) and reports which reproduces the
results, ranked by distance, with the reference's first divergent step and the golden case
that tells close candidates apart. Exit status: 0 if the results match the reference, 1 if
they do not (whether or not a variant reproduces them), 2 for bad input.
"""
import sys

from npoptim import registry
from npoptim.diagnose.engine import DiagnoseError, diagnose, format_diagnoses
from npoptim.golden.schema import GoldenFileError
from npoptim.golden.suite import suite_path


def add_arguments(parser):
    parser.add_argument("results", metavar="RESULTS",
                        help="results file or directory (golden schema, kind \"results\")")
    parser.add_argument("--suite", default=None, metavar="CASES",
                        help="the golden cases the results were computed from (default: the "
                             "suite npoptim carries, see npoptim suite)")
    parser.add_argument("--optimizer", action="append", metavar="NAME",
                        help="the optimizer the results should be of (repeatable)")


def run(args):
    try:
        names = [registry.resolve(n) for n in args.optimizer or ()] or None
        args.suite = args.suite or str(suite_path())
    except (KeyError, FileNotFoundError) as exc:  # an unknown name; no suite installed
        print(f"error: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return 2
    try:
        diagnoses = diagnose(args.results, args.suite, names)
    except (DiagnoseError, GoldenFileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_diagnoses(diagnoses, args.results, args.suite))
    return 0 if all(d.verdict == "matches" for d in diagnoses) else 1
