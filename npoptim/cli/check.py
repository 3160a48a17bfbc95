"""``npoptim check --torch MODULE:CLASS | --optax MODULE:FACTORY | --keras MODULE:CLASS |
--callable MODULE:FUNC``: the golden suite run straight through another implementation.

No results file to write: each golden case of the implementation's optimizer (inferred from
its name, or ``--optimizer``) is run through it (:mod:`npoptim.check`), its parameters and
the state it exposes judged by the case's own tolerance. Prints the per-case table, the cases
skipped with their reasons, the framework's known bugs (not failures), which state was
compared, and on a failure ``diagnose``'s ranking of the known conventions and mistakes that
reproduce it. Exit status: 0 if every case that ran passes (known bugs allowed), 1 if any
fails, 2 for a usage error (a bad ``MODULE:NAME``, a framework not installed, an unknown
optimizer).
"""
import sys

from npoptim.check.run import KINDS, cases_for, format_check, implementation, run as run_check
from npoptim.check.spec import UsageError
from npoptim.golden.schema import GoldenFileError
from npoptim.golden.suite import suite_path
from npoptim.cli.progress import ProgressLine

HELP = {"torch": "a torch.optim.Optimizer subclass, e.g. torch.optim:Adam or mypkg.opt:MyAdam",
        "optax": "an optax GradientTransformation factory, e.g. optax:adam (its flavor's cases)",
        "keras": "a Keras 3 optimizer class, e.g. keras.optimizers:Adam (its flavor's cases, "
                 "on JAX in float64)",
        "callable": "a make_step(params, hyperparameters) in npoptim.testing's protocol "
                    "(needs --optimizer)"}


def add_arguments(parser):
    which = parser.add_mutually_exclusive_group(required=True)
    for kind in KINDS:
        which.add_argument(f"--{kind}", metavar="MODULE:NAME", help=HELP[kind])
    parser.add_argument("--optimizer", metavar="NAME",
                        help="whose cases to run (default: inferred from the class or "
                             "factory name, e.g. torch.optim:Adam -> Adam)")
    parser.add_argument("--case", action="append", metavar="GLOB",
                        help="only cases whose id matches (repeatable), e.g. 'Adam/*/float32'")
    parser.add_argument("--flavor", action="append", metavar="NAME",
                        help="the flavors' cases to run (repeatable; default: torch's for "
                             "--torch and --callable, optax's for --optax, keras's for --keras)")
    parser.add_argument("--device", default="cpu",
                        help="the torch device the parameters live on (--torch; default cpu)")
    parser.add_argument("--grad-format", default="csr", choices=("csr", "dense", "raw"),
                        help="how --callable receives CSR gradients (npoptim.testing)")
    parser.add_argument("--suite", metavar="CASES",
                        help="golden cases (default: the suite npoptim carries)")
    parser.add_argument("--no-diagnose", action="store_true",
                        help="do not run diagnose on failures")
    parser.add_argument("--summary", action="store_true",
                        help="one line per case instead of one per step")


def run(args):
    kind = next(k for k in KINDS if getattr(args, k) is not None)
    try:
        impl = implementation(kind, getattr(args, kind), args.optimizer, args.device,
                              args.grad_format)
        suite = args.suite or str(suite_path())
        cases = cases_for(impl, suite, args.case, args.flavor)
    except (UsageError, FileNotFoundError, GoldenFileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not cases:
        print(f"error: no case of {impl.optimizer} matches (--case, --flavor)", file=sys.stderr)
        return 2
    outcome = run_check(impl, cases, suite, diagnose=not args.no_diagnose,
                        progress=ProgressLine(f"npoptim check {impl.label}: cases run"))
    print(format_check(outcome, summary=args.summary))
    return 1 if outcome.failed else 0
