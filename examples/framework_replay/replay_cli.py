"""The command line the framework replay scripts share (tf_kernels.py, ort_training.py).

A script says which golden cases its framework computes (``choose(case)``: a way to run it,
or None and why not) and how to run one (``make_step(way, case)``, the factory
:func:`npoptim.golden.replay.replay` takes); :func:`main` writes the results file that
``npoptim verify`` reads: every considered case run, or ``{"id": ..., "skipped": reason}``.
With ``--torch-twins`` it runs instead the torch case that each case of the flavor overrides
(same inputs and hyperparameter values, torch's conventions) the flavor case's way: these must
fail, which shows the conventions matter. ``--twins-out FILE`` writes those twins' results to
``FILE`` as well, in the same run (one start of the framework for both).
"""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from npoptim.golden import codec  # noqa: E402
from npoptim.golden.replay import replay, results_file  # noqa: E402
from npoptim.golden.schema import load  # noqa: E402


def torch_twin_id(case):
    """``Adam/keras/eps-dominated/float64`` -> ``Adam/eps-dominated/float64``: the torch case
    with the same inputs and hyperparameter values."""
    parts = case.id.split("/")
    return "/".join([parts[0]] + parts[2:]) if case.flavor != "torch" else case.id


def case_files(path, optimizers):
    """The golden files of ``optimizers`` at ``path`` (a file, or a directory holding
    ``<Optimizer>.json`` and ``<flavor>/<Optimizer>.json``): reading only these is most of
    the difference to reading every case."""
    path = Path(path)
    if path.is_file():
        return [path]
    return sorted(p for name in optimizers for p in path.rglob(f"{name}.json"))


def main(argv, description, flavor, optimizers, choose, make_step, label, grad_format="dense"):
    """Replay the torch and ``flavor`` cases of ``optimizers``; ``label()`` names the
    framework in the results file (called after the replay, once the framework is imported);
    ``grad_format``: how the step functions get CSR gradients (:func:`replay`)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("cases", nargs="?", default=str(ROOT / "reference_results"))
    parser.add_argument("-o", "--out", required=True, help="results file to write")
    parser.add_argument("--torch-twins", action="store_true",
                        help=f"instead, run the torch case each {flavor} case overrides the "
                             f"{flavor} case's way (these must fail: the conventions matter)")
    parser.add_argument("--twins-out", help="also write the torch twins' results to this file")
    args = parser.parse_args(argv)
    # the 16-bit and quantized cases (a precision object) are torch's low-precision modes,
    # not a framework kernel's float arithmetic: as verify's flavors, leave them out
    every = [c for p in case_files(args.cases, optimizers) for c in load(p, "cases").cases
             if c.precision is None]
    by_id = {c.id: c for c in every}
    entries, twins = [], []
    for case in every:
        if case.flavor not in ("torch", flavor) or case.optimizer not in optimizers:
            continue
        way, reason = choose(case)
        twin = by_id.get(torch_twin_id(case))  # the defaults cases are not twins
        if (case.flavor == flavor and way is not None and twin is not None
                and "/defaults/" not in case.id and (args.torch_twins or args.twins_out)):
            twins.append(replay(twin, make_step(way, twin), grad_format=grad_format))
        if args.torch_twins:
            continue
        if way is None:
            entries.append({"id": case.id, "skipped": reason})
            continue
        entries.append(replay(case, make_step(way, case), grad_format=grad_format))
    outputs = [(args.out, twins if args.torch_twins else entries)]
    if args.twins_out and not args.torch_twins:
        outputs.append((args.twins_out, twins))
    for path, written in outputs:
        Path(path).write_text(codec.dumps(results_file(written, label())))
        ran = sum("steps" in e for e in written)
        print(f"wrote {path}: {ran} cases run, {len(written) - ran} skipped", file=sys.stderr)
    return 0
