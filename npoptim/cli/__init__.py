"""The ``npoptim`` command line (also ``python -m npoptim``).

Each command lives in its own module of this package, with ``add_arguments(parser)`` and
``run(args) -> exit code``; a command's module is imported only when that command runs.
:mod:`npoptim.cli.progress` is the progress line the long-running commands print.
"""
import argparse
import importlib
import sys

#: what ``npoptim --help`` says first: plain text, as a terminal shows it (the module
#: docstring's first line is reST)
DESCRIPTION = "The npoptim command line (also python -m npoptim)."

# command -> (module, one-line help)
COMMANDS = {
    "demo": ("npoptim.cli.demo", "train a synthetic recommender: SparseAdam on row-sparse "
                                 "gradients vs dense Adam and AdamW + warmup/cosine"),
    "list": ("npoptim.cli.listing", "optimizers, their hyperparameters, defaults and sparse "
                                    "kind"),
    "golden": ("npoptim.cli.golden", "write a custom golden case (reference_results schema)"),
    "verify": ("npoptim.cli.verify", "check another implementation's results against golden "
                                     "cases"),
    "bench": ("npoptim.cli.bench", "benchmark sparse and dense steps (vs torch when installed)"),
    "plot": ("npoptim.cli.plot", "contours and paths of optimizers at the same settings, loss, "
                                 "lr, trust ratios (PNG/SVG; needs npoptim[plot])"),
    "explain": ("npoptim.cli.explain", "every intermediate of an optimizer's steps, as its "
                                       "kernels compute them"),
    "diagnose": ("npoptim.cli.diagnose", "name the convention or mistake that reproduces "
                                         "another implementation's results"),
    "check": ("npoptim.cli.check", "run the golden suite straight through a torch, optax or "
                                   "Keras optimizer or a step function (no results file)"),
    "suite": ("npoptim.cli.suite", "where the golden suite is, its version and counts; "
                                   "--export DIR writes it as plain JSON files"),
    "compile": ("npoptim.cli.compile", "compile the kernels that the golden cases run into "
                                       "Numba's on-disk cache, ahead of use (--jobs N)"),
}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(prog="npoptim", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_) in COMMANDS.items():
        sub.add_parser(name, help=help_, add_help=False)
    if not argv or argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0
    if argv[0] not in COMMANDS:
        parser.parse_args(argv)  # exits with argparse's "invalid choice" error
    module = importlib.import_module(COMMANDS[argv[0]][0])
    command = argparse.ArgumentParser(prog=f"npoptim {argv[0]}",
                                      description=COMMANDS[argv[0]][1])
    module.add_arguments(command)
    return module.run(command.parse_args(argv[1:]))
