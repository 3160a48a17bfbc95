"""The command line the framework replay scripts share (tf_kernels.py, ort_training.py).

A script says which golden cases its framework computes (``choose(case)``: a way to run it,
or None and why not) and how to run one (``make_step(way, case)``, the factory
:func:`npoptim.golden.generate.replay` takes); :func:`main` writes the results file that
``npoptim verify`` reads: every considered case run, or ``{"id": ..., "skipped": reason}``.
With ``--torch-twins`` it runs instead the torch case that each case of the flavor overrides
(same inputs and hyperparameter values, torch's conventions) the flavor case's way: these must
fail, which shows the conventions matter.
"""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from npoptim.golden import codec, generate  # noqa: E402
from npoptim.golden.schema import load_all  # noqa: E402


def torch_twin_id(case):
    """``Adam/keras/eps-dominated/float64`` -> ``Adam/eps-dominated/float64``: the torch case
    with the same inputs and hyperparameter values."""
    parts = case.id.split("/")
    return "/".join([parts[0]] + parts[2:]) if case.flavor != "torch" else case.id


def main(argv, description, flavor, optimizers, choose, make_step, label):
    """Replay the torch and ``flavor`` cases of ``optimizers``; ``label()`` names the
    framework in the results file (called after the replay, once the framework is imported)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("cases", nargs="?", default=str(ROOT / "reference_results"))
    parser.add_argument("-o", "--out", required=True, help="results file to write")
    parser.add_argument("--torch-twins", action="store_true",
                        help=f"instead, run the torch case each {flavor} case overrides the "
                             f"{flavor} case's way (these must fail: the conventions matter)")
    args = parser.parse_args(argv)
    # the 16-bit and quantized cases (a precision object) are torch's low-precision modes,
    # not a framework kernel's float arithmetic: as verify's flavors, leave them out
    every = [c for c in load_all(args.cases, kind="cases") if c.precision is None]
    by_id = {c.id: c for c in every}
    entries = []
    for case in every:
        if case.flavor not in ("torch", flavor) or case.optimizer not in optimizers:
            continue
        way, reason = choose(case)
        if args.torch_twins:
            twin = by_id.get(torch_twin_id(case))  # the defaults cases are not twins
            if (case.flavor == flavor and way is not None and twin is not None
                    and "/defaults/" not in case.id):
                entries.append(generate.replay(twin, make_step(way, twin),
                                               grad_format="dense"))
            continue
        if way is None:
            entries.append({"id": case.id, "skipped": reason})
            continue
        entries.append(generate.replay(case, make_step(way, case), grad_format="dense"))
    Path(args.out).write_text(codec.dumps(generate.results_file(entries, label())))
    ran = sum("steps" in e for e in entries)
    print(f"wrote {args.out}: {ran} cases run, {len(entries) - ran} skipped", file=sys.stderr)
    return 0
