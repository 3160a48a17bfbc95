"""``npoptim plot``: contours and paths of several optimizers at the same settings, loss, lr
and LAMB/LARS trust ratios per step, or the momentum phase diagram; PNG or SVG.

Needs matplotlib (``pip install 'npoptim[plot]'``); the runs themselves need NumPy only
(:func:`npoptim.teaching.compare.compare`).
"""
import sys

from npoptim.cli.progress import ProgressLine
from npoptim.teaching.compare import SCHEDULES
from npoptim.teaching.problems import PROBLEMS

FIGURES = ("overview", "paths", "loss", "lr", "trust", "phase")


def add_arguments(parser):
    parser.add_argument("problem", nargs="?", default="rosenbrock", choices=list(PROBLEMS),
                        help="test problem (default: rosenbrock)")
    parser.add_argument("--optimizers", default="SGD,Adam,RMSprop,LAMB",
                        help="comma-separated optimizer names (default: SGD,Adam,RMSprop,LAMB)")
    parser.add_argument("--lr", type=float, default=None,
                        help="one learning rate for all (default: the problem's)")
    parser.add_argument("--steps", type=int, default=None,
                        help="steps per optimizer (default: the problem's)")
    parser.add_argument("--x0", default=None, help="start, comma-separated (default: the "
                                                   "problem's)")
    parser.add_argument("--schedule", default="constant", choices=list(SCHEDULES),
                        help="lr schedule for all (default: constant)")
    parser.add_argument("--warmup", type=int, default=None,
                        help="warm-up steps of warmup-cosine (default: a tenth of the run)")
    parser.add_argument("--layers", default=None,
                        help="split x into parameter arrays of these sizes, e.g. 1,1 (one "
                             "layer per coordinate: per-layer trust ratios)")
    parser.add_argument("--figure", default="overview", choices=FIGURES,
                        help="what to draw (default: overview = paths, loss, lr when it "
                             "changes, trust ratios with LAMB/LARS)")
    parser.add_argument("-o", "--output", default=None,
                        help="output file, .png or .svg (default: PROBLEM.png)")


def _floats(text, what):
    try:
        return tuple(float(v) for v in text.split(","))
    except ValueError:
        raise SystemExit(f"npoptim plot: {what} must be comma-separated numbers, got {text!r}")


def run(args):
    from npoptim.plotting import figures, pyplot
    try:
        pyplot()  # before any run: without matplotlib, fail at once
    except ImportError as error:
        print(f"npoptim plot: {error}", file=sys.stderr)
        return 2
    output = args.output or f"{args.problem if args.figure != 'phase' else 'momentum'}.png"
    if not output.lower().endswith(figures.FORMATS):
        print(f"npoptim plot: output must end in .png or .svg, got {output!r}", file=sys.stderr)
        return 2
    try:
        if args.figure == "phase":
            figures.save(figures.phase_diagram(), output)
            print(f"wrote {output}")
            return 0
        from npoptim import registry
        from npoptim.teaching.compare import compare
        problem = PROBLEMS[args.problem]()
        if args.layers:
            problem = problem.with_layers(int(v) for v in _floats(args.layers, "--layers"))
        # any case (adam is Adam); unknown names fail before any run
        names = [registry.resolve(n.strip()) for n in args.optimizers.split(",") if n.strip()]
        runs = compare(problem, names, lr=args.lr, steps=args.steps,
                       x0=_floats(args.x0, "--x0") if args.x0 else None,
                       schedule=args.schedule, warmup=args.warmup,
                       progress=ProgressLine("npoptim plot"))
        draw = {"overview": lambda: figures.overview(problem, runs),
                "paths": lambda: figures.paths(problem, runs),
                "loss": lambda: figures.losses(runs),
                "lr": lambda: figures.learning_rates(runs),
                "trust": lambda: figures.trust_ratios(runs)}[args.figure]
        figures.save(draw(), output)
    except (KeyError, ValueError, TypeError) as error:
        print(f"npoptim plot: {error.args[0] if error.args else error}", file=sys.stderr)
        return 2
    for r in runs:
        end = "diverged at step %d" % r.diverged_at if r.diverged_at else (
            "loss %.6g at (%s)" % (r.losses[-1], ", ".join("%.4g" % v for v in r.xs[-1])))
        print(f"{r.name:>10}: {end}")
    print(f"wrote {output}")
    return 0
