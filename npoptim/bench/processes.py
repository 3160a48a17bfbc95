"""A benchmark's worker in a process of its own (the scale and lookups cases).

A table and its state are allocated in a fresh process per (framework, optimizer, size), so
that two frameworks' tables never sit in memory beside each other and no process inherits
another's caches, heap or thread pools. The worker is ``python -m <module> --worker ARGS...``,
run from the checkout's root, and prints its results as JSON on its last line of output.
"""
import json
import os
import subprocess
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_worker(module, args, label):
    """The JSON result of ``python -m module --worker *args``, or {} if it failed (``label``
    names it in the message printed to stderr)."""
    cmd = [sys.executable, "-m", module, "--worker", *(str(a) for a in args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=_ROOT)
    if proc.returncode != 0:
        print(f"  ({label} failed: {proc.stderr.strip().splitlines()[-1:]})", file=sys.stderr)
        return {}
    return json.loads(proc.stdout.strip().splitlines()[-1])
