"""Record torch's outputs on this machine's kind of CPU: ``python tests/record_torch_cpu.py``.

Adds (or refreshes) one entry of ``tests/data/torch_cpu_records.json``: this CPU's
description, torch's results for the summation-order probe (:mod:`cpu_probe`) and a few short
float64 LBFGS runs (each also with the params listed to torch in other orders, which
measures torch's own sensitivity to its summation order). :mod:`test_cpu_orders` then checks, on every machine, that npoptim's
emulated order reproduces the kinds it claims to, and that the others are told apart.
Run it on a CPU kind the file does not have yet (``python tests/cpu_probe.py`` says whether
it has this one) and commit the file. ``--note TEXT`` adds a sentence on how the record was
made; the dispatch settings of the environment (``cpu_probe.DISPATCH_SETTINGS``, e.g.
``MKL_CBWR``) are recorded with the CPU, since they change which kernels torch runs.
"""
import argparse
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
PARTS = ("dot", "sum", "bf16_matmul")
RECORDED_RUNS = [
    ({}, "drifting_quartic"),
    ({"line_search_fn": "strong_wolfe"}, "drifting_quartic"),
    ({"max_iter": 4, "history_size": 3}, "rosenbrock"),
    ({"lr": 0.5, "max_iter": 3, "tolerance_change": 1e-5}, "rosenbrock"),
    ({"line_search_fn": "strong_wolfe", "max_iter": 6, "history_size": 2, "max_eval": 9},
     "rosenbrock"),
]


def record(note=""):
    import torch
    torch.set_num_threads(1)
    outputs = cpu_probe.torch_outputs()
    cpu = cpu_probe.cpu_description()
    runs = []
    for options, name in RECORDED_RUNS:
        departures = []
        params, losses = lbfgs_problems.torch_trajectory(options, name, np.float64, RUN_STEPS,
                                                         sqrt_departures=departures)
        reordered = [lbfgs_problems.torch_trajectory(options, name, np.float64, RUN_STEPS,
                                                     order=order)[0] for order in REORDERINGS]
        runs.append({"options": options, "objective": name,
                     "params": _hex_rows(params), "losses": [float(v).hex() for v in losses],
                     "reordered_params": [_hex_rows(r) for r in reordered],
                     "sqrt_departures": departures})
    return {"kind": cpu_probe.kind_name(outputs, cpu["torch_capability"]), "cpu": cpu,
            "torch": torch.__version__, "date": datetime.date.today().isoformat(),
            "note": note, "probe_inputs": cpu_probe.PROBE_INPUTS,
            "emulated": {part: cpu_probe.probe()[part] for part in PARTS},
            "half_lanes": cpu_probe.half_lanes(), "probe": outputs, "runs": runs}


def _hex_rows(rows):
    return [[float(v).hex() for v in row] for row in rows]


ABOUT = ("torch's outputs on each kind of CPU met so far; written by "
         "tests/record_torch_cpu.py, read by tests/test_cpu_orders.py. A kind's probe outputs "
         "are compared with npoptim's only if its probe_inputs are tests/cpu_probe.py's "
         "PROBE_INPUTS; its LBFGS runs always. emulated: which of npoptim's emulated "
         "orders torch used there, by the probe when recorded; half_lanes: cpu_probe.py's "
         "half_lanes() (null: not recorded); sqrt_departures: the steps at which torch's "
         "line search took a square root that is not correctly rounded, null where not "
         "recorded; the runs are compared bit for bit before the first).")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--note", default="", help="how the record was made (one sentence)")
    entry = record(parser.parse_args().note)
    kinds = []
    if os.path.exists(cpu_probe.RECORDS):
        kinds = [k for k in cpu_probe.load_records() if k["kind"] != entry["kind"]]
    kinds.append(entry)
    with open(cpu_probe.RECORDS, "w") as f:
        json.dump({"about": ABOUT, "kinds": kinds}, f, indent=1)
        f.write("\n")
    print(f"recorded {entry['kind']} ({entry['cpu']['model']})")


if __name__ == "__main__":
    main()
