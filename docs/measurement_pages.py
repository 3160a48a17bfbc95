"""The measured tables of the docs, rendered at build time from committed ``npoptim bench
--json`` results (``docs/measurements/*.json``), never typed by hand.

Each ``docs/measurements/<name>.json`` becomes ``docs/_generated/measurements/<name>.md``:
``npoptim bench --markdown``'s text for that run (the machine, date and load of the run, every
target with its timings, and the case's own tables), which ``docs/performance.md`` includes.
A new measurement is a new run's ``--json`` file committed here; the docs build never runs a
benchmark.
"""
import json
from pathlib import Path

from npoptim.bench.runner import markdown

HERE = Path(__file__).resolve().parent
MEASUREMENTS = HERE / "measurements"


def write(generated):
    """Render every committed measurement into ``generated / "measurements"``; returns the
    names written."""
    out = Path(generated) / "measurements"
    out.mkdir(parents=True, exist_ok=True)
    names = []
    for path in sorted(MEASUREMENTS.glob("*.json")):
        text = markdown(json.loads(path.read_text(encoding="utf-8")))
        target = out / f"{path.stem}.md"
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
        names.append(path.stem)
    return names
