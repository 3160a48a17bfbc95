"""``npoptim bench`` (also ``python -m npoptim.bench``): how fast npoptim's steps are.

Runs the cases of the performance issue with whatever is installed and prints medians and
ratios: against torch when it is installed (imported lazily, its rows skipped otherwise) and,
always, against a *touch-only floor* measured in the same run: a Numba loop that reads and
writes the same bytes as the update and does no math, the speed of memory on this machine.

* :mod:`npoptim.bench.timing` -- interleaved timing (medians), the environment record.
* :mod:`npoptim.bench.floors` -- the touch-only floor loops.
* :mod:`npoptim.bench.torch_ref` -- the torch side of each comparison.
* :mod:`npoptim.bench.workloads` -- the workloads (``--cases``): sparse steps, end to end from
  raw lookups, dense steps, threads, start-up.
* :mod:`npoptim.bench.scale` -- the ``scale`` case: tables of 1M to 100M rows, a process per
  framework and size (run by name: ``--cases scale``).
* :mod:`npoptim.bench.sparse16` -- the ``sparse16`` case: 16-bit SparseAdam (npoptim.precision,
  torch) against float32 as the table and the touched rows grow.
* :mod:`npoptim.bench.references` -- the ``references`` case: npoptim.precision's Adafactor,
  Muon, LBFGS, Kahan and quantized steps against torch, torch-optimi, torchao and bitsandbytes
  (run by name: ``--cases references``).
* :mod:`npoptim.bench.runner` -- command line, tables, targets, JSON and Markdown output.

These are benchmarks, not tests: the tests run only ``--quick`` (tiny sizes, few rounds,
every code path; seconds once Numba's cache is warm).
"""


def main(argv=None):
    """Run the benchmark from the command line; returns the exit code."""
    from npoptim.bench.runner import main as run_main
    return run_main(argv)
