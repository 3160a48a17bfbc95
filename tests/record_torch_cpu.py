"""Record torch's outputs on this machine's kind of CPU: ``python tests/record_torch_cpu.py``.

Adds (or refreshes) one entry of ``tests/data/torch_cpu_records.json``: this CPU's
description, torch's results for the summation-order probe (:mod:`cpu_probe`) and a few short
float64 LBFGS runs (each also with the params listed to torch in other orders, which
measures torch's own sensitivity to its summation order). :mod:`test_cpu_orders` then checks, on every machine, that npoptim's
emulated order reproduces the kinds it claims to, and that the others are told apart.
Run it on a CPU kind the file does not have yet (``python tests/cpu_probe.py`` says whether
it has this one) and commit the file.
"""
import datetime
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import cpu_probe  # noqa: E402
import lbfgs_problems  # noqa: E402

RUN_STEPS = 8
REORDERINGS = lbfgs_problems.REORDERINGS
RECORDED_RUNS = [
    ({}, "drifting_quartic"),
    ({"line_search_fn": "strong_wolfe"}, "drifting_quartic"),
    ({"max_iter": 4, "history_size": 3}, "rosenbrock"),
    ({"lr": 0.5, "max_iter": 3, "tolerance_change": 1e-5}, "rosenbrock"),
    ({"line_search_fn": "strong_wolfe", "max_iter": 6, "history_size": 2, "max_eval": 9},
     "rosenbrock"),
]


def record():
    import torch
    torch.set_num_threads(1)
    outputs = cpu_probe.torch_outputs()
    cpu = cpu_probe.cpu_description()
    runs = []
    for options, name in RECORDED_RUNS:
        params, losses = lbfgs_problems.torch_trajectory(options, name, np.float64, RUN_STEPS)
        reordered = [lbfgs_problems.torch_trajectory(options, name, np.float64, RUN_STEPS,
                                                     order=order)[0] for order in REORDERINGS]
        runs.append({"options": options, "objective": name,
                     "params": _hex_rows(params), "losses": [float(v).hex() for v in losses],
                     "reordered_params": [_hex_rows(r) for r in reordered]})
    return {"kind": cpu_probe.kind_name(outputs, cpu["torch_capability"]), "cpu": cpu,
            "torch": torch.__version__, "date": datetime.date.today().isoformat(),
            "probe": outputs, "runs": runs}


def _hex_rows(rows):
    return [[float(v).hex() for v in row] for row in rows]


def main():
    entry = record()
    kinds = []
    if os.path.exists(cpu_probe.RECORDS):
        kinds = [k for k in cpu_probe.load_records() if k["kind"] != entry["kind"]]
    kinds.append(entry)
    with open(cpu_probe.RECORDS, "w") as f:
        json.dump({"about": "torch's outputs on each kind of CPU met so far; written by "
                            "tests/record_torch_cpu.py, read by tests/test_cpu_orders.py",
                   "kinds": kinds}, f, indent=1)
        f.write("\n")
    print(f"recorded {entry['kind']} ({entry['cpu']['model']})")


if __name__ == "__main__":
    main()
