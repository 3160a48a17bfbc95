"""The driver of ``npoptim check``: the golden cases run straight through an implementation.

An :class:`Implementation` (built by :func:`implementation`) says, for each case, the step
function that runs it (:func:`npoptim.golden.replay.replay`'s protocol) or why it cannot
(``prepare(case) -> (make_step, None)`` or ``(None, reason)``). :func:`run` replays the
selected cases, keeps of each result's state the entries the case has (the state the
implementation exposes under torch's names and shapes is compared, the rest is left out and
said), compares each case to its own tolerance (:func:`npoptim.golden.compare.compare_case`),
counts a failure listed in the framework's known bugs
(:mod:`npoptim.frameworks.known_bugs`) as known, and on any other failure asks
:func:`npoptim.diagnose.engine.diagnose` which known convention or mistake reproduces the
results. :func:`format_check` is the report.
"""
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from npoptim import registry
from npoptim.check import spec
from npoptim.frameworks.known_bugs import known_bug
from npoptim.check.spec import UsageError
from npoptim.golden import codec
from npoptim.golden.compare import CaseReport, compare_case, format_reports
from npoptim.golden.replay import Refused, replay, results_file
from npoptim.golden.schema import GoldenFileError, load_all, parse
from npoptim.golden.verify import select

#: the kinds of implementation, each with its flag
KINDS = ("torch", "optax", "keras", "callable")


@dataclass
class Implementation:
    """What is checked: ``kind`` (:data:`KINDS`), ``label`` (as the user named it), the npoptim
    ``optimizer`` whose cases it runs, the ``flavors`` of cases it runs (None: torch's, as
    ``npoptim verify``), ``prepare(case)``, the ``grad_format`` its step functions take, and
    the ``call_path`` of the framework's known bugs it takes."""

    kind: str
    label: str
    optimizer: str
    flavors: Optional[list]
    prepare: Callable
    grad_format: str = "dense"
    call_path: Optional[str] = None


@dataclass
class Outcome:
    """The check of an implementation over its cases: ``reports`` (one per case, known bugs
    included), ``known`` (case id -> the known bug's entry, for cases that fail by it),
    ``state`` (case id -> the state entries compared), ``notes``, and diagnose's answer for
    the failures (``diagnoses``, :class:`npoptim.diagnose.engine.Diagnosis` objects, and its
    report ``diagnosis``; empty and None without failures)."""

    implementation: Implementation
    suite: str
    reports: list
    known: dict = field(default_factory=dict)
    state: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    diagnoses: list = field(default_factory=list)
    diagnosis: Optional[str] = None

    @property
    def failed(self):
        return [r for r in self.reports if r.failed and r.case_id not in self.known]


# ------------------------------------------------------------------------- implementations
def implementation(kind, target, optimizer=None, device="cpu", grad_format="csr"):
    """The :class:`Implementation` of ``--<kind> target`` (``MODULE:NAME`` or the object);
    ``optimizer`` (npoptim's name, any case) overrides the one inferred from the name.
    :class:`~npoptim.check.spec.UsageError` for what cannot be run."""
    flag = f"--{kind}"
    if kind == "keras":  # the backend is chosen before keras is imported
        from npoptim.check import keras as adapter
        keras = adapter.use_jax_in_float64(flag)
    obj = spec.load(target, flag) if isinstance(target, str) else target
    label = target if isinstance(target, str) else getattr(obj, "__qualname__", repr(obj))
    name = None if optimizer is None else _resolve(optimizer)
    if kind == "torch":
        from npoptim.check import torch as adapter
        cls = adapter.check_class(obj, flag)
        name = name or _inferred(adapter.optimizer_of(cls), label, "torch.optim")

        def prepare(case):
            hyper = codec.from_json_hyper(case.hyperparameters)
            return adapter.make_step(cls, hyper, device), None
        return Implementation(kind, label, name, None, prepare, "csr",
                              adapter.call_path(cls, device))
    if kind == "optax":
        from npoptim import flavors
        from npoptim.check import optax as adapter
        from npoptim.check.constructors import constructor_for_case
        if not callable(obj):
            raise UsageError(f"{flag}: {obj!r} is not a GradientTransformation factory")
        table = adapter.table_name(obj)
        name = name or _inferred(table and flavors.get("optax").constructors[table].npoptim,
                                 label, "the optax flavor's constructors (npoptim list)")
        table = table or flavors.get("optax").constructor_name_for(name)
        if table is None:
            raise UsageError(f"{flag}: the optax flavor has no {name} (npoptim list)")
        own = adapter.table_name(obj) is not None

        def prepare(case):
            ctor, kwargs = constructor_for_case("optax", case, only=table)
            if ctor is None:
                return None, kwargs
            return adapter.make_step(ctor, kwargs, None if own else obj), None
        return Implementation(kind, label, name, ["optax"], prepare)
    if kind == "keras":
        from npoptim import flavors
        from npoptim.check.constructors import constructor_for_case
        if not (isinstance(obj, type) and issubclass(obj, keras.optimizers.Optimizer)):
            raise UsageError(f"{flag}: {obj!r} is not a keras.optimizers.Optimizer subclass")
        table = next((b.__name__ for b in obj.__mro__
                      if b.__name__ in flavors.get("keras").constructors), None)
        name = name or _inferred(table and flavors.get("keras").constructors[table].npoptim,
                                 label, "the keras flavor's constructors (npoptim list)")
        table = table or flavors.get("keras").constructor_name_for(name)
        if table is None:
            raise UsageError(f"{flag}: the keras flavor has no {name} (npoptim list)")

        def prepare(case):
            ctor, kwargs = constructor_for_case("keras", case, only=table)
            if ctor is None:
                return None, kwargs
            return adapter.make_step(obj, kwargs), None
        return Implementation(kind, label, name, ["keras"], prepare)
    if kind == "callable":
        from npoptim.check.callable import check_function
        fn = check_function(obj, flag)
        if name is None:
            raise UsageError(f"{flag}: say which optimizer's cases {label} runs with "
                             "--optimizer NAME")
        return Implementation(kind, label, name, None, lambda case: (fn, None), grad_format)
    raise UsageError(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")


def _resolve(optimizer):
    try:
        return registry.resolve(optimizer)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None


def _inferred(name, label, where):
    if name is None:
        raise UsageError(f"cannot tell which npoptim optimizer {label} is (its name is none of "
                         f"{where}): say it with --optimizer NAME")
    return name


# ------------------------------------------------------------------------------- running
def optimizer_files(suite, optimizer):
    """The golden files of ``optimizer`` in ``suite``: ``cases/**/<optimizer>.json`` of a
    directory laid out as ``reference_results/`` (reading only these is what keeps a check
    quick: the whole suite takes seconds to parse), else the whole of ``suite``."""
    suite = Path(suite)
    own = sorted(suite.glob(f"cases/**/{optimizer}.json")) if suite.is_dir() else []
    return own or [suite]


def cases_for(impl, suite, ids=None, flavors=None):
    """The cases of ``impl``'s optimizer in ``suite`` (a golden directory or file), matching
    the ``ids`` globs, of ``flavors`` (default: the implementation's). A file whose arrays need
    a library that is not installed (bfloat16 without ``npoptim[bf16]``) is left out."""
    every = []
    for path in optimizer_files(suite, impl.optimizer):
        every += load_all(path, kind="cases", unavailable=[])
    return select(every, [impl.optimizer], ids, flavors=flavors or impl.flavors)


def run(impl, cases, suite, diagnose=True, progress=None):
    """Check ``impl`` on ``cases`` (of ``suite``); an :class:`Outcome`."""
    outcome = Outcome(impl, str(suite), [])
    entries = {}
    for k, case in enumerate(cases):
        report, entry = _run_case(impl, case, outcome)
        outcome.reports.append(report)
        bug = known_bug(impl.kind, case.id) or (
            impl.call_path and known_bug(impl.kind, case.id, impl.call_path))
        if bug and report.failed:
            outcome.known[case.id] = bug
        elif bug and report.passed:
            outcome.notes.append(f"{case.id} passes, though listed as a known {impl.kind} bug "
                                 f"({bug['version']}): fixed upstream?")
        elif entry is not None:
            entries[case.id] = entry
        if progress is not None:
            progress(k + 1, len(cases))
    if diagnose and outcome.failed and entries:
        outcome.diagnoses, outcome.diagnosis = _diagnose(list(entries.values()), suite, impl)
    return outcome


def _run_case(impl, case, outcome):
    """``(report, result entry or None)`` of one case."""
    make_step, reason = impl.prepare(case)
    if make_step is None:
        return _status(case, "skipped", reason), None
    try:
        entry = replay(case, make_step, impl.grad_format)
    except Refused as exc:
        return _status(case, "skipped", str(exc)), None
    except Exception as exc:  # the implementation's own error: the case fails with it
        return _status(case, "error", f"{type(exc).__name__}: {exc}".splitlines()[0]), None
    kept = _readable_state(entry, case)
    try:
        report = compare_case(case, _parsed(entry, impl), f"<{impl.label}>")
    except GoldenFileError as exc:  # state in other shapes or types: compare the params only
        for step in entry["steps"]:
            step.pop("state", None)
        report = compare_case(case, _parsed(entry, impl), f"<{impl.label}>")
        outcome.notes.append(f"{case.id}: state not compared ({exc})")
        kept = set()
    outcome.state[case.id] = sorted(kept)
    return report, entry


def _status(case, status, message):
    return CaseReport(case.id, case.tolerance, status=status, message=message)


def _parsed(entry, impl):
    return parse(results_file([entry], impl.label), f"<{impl.label}>", "results").cases[0]


def _readable_state(entry, case):
    """Keep in ``entry`` the state entries the case has (by parameter and name); the names
    kept."""
    kept = set()
    for step, expected in zip(entry["steps"], case.steps):
        if "state" not in step:
            continue
        wanted = expected.expected_state or [None] * len(step["state"])
        step["state"] = [None if got is None or want is None else
                         {k: v for k, v in got.items() if k in want}
                         for got, want in zip(step["state"], wanted)]
        kept |= {k for s in step["state"] if s for k in s}
        if not any(step["state"]):
            del step["state"]
    return kept


def _diagnose(entries, suite, impl):
    """``(diagnoses, report)`` of ``entries`` (the cases that ran, known bugs left out),
    through a temporary results file, against a temporary suite of the optimizer's files."""
    from npoptim.diagnose.engine import DiagnoseError, diagnose, format_diagnoses
    with tempfile.TemporaryDirectory(prefix="npoptim-check-") as tmp:
        results = Path(tmp) / "results.json"
        results.write_text(codec.dumps(results_file(entries, impl.label)), encoding="utf-8")
        own = Path(tmp) / "suite"
        for k, path in enumerate(optimizer_files(suite, impl.optimizer)):
            (own / str(k)).mkdir(parents=True)
            shutil.copy(path, own / str(k) / path.name)
        try:
            found = diagnose(str(results), str(own), [impl.optimizer])
        except DiagnoseError as exc:
            return [], f"diagnose cannot judge these results: {exc}"
        return found, format_diagnoses(found, impl.label, suite)


# ------------------------------------------------------------------------------- report
def format_check(outcome, summary=False):
    """The report of :func:`run`: the verify table (known bugs apart), the known bugs, the
    skipped cases with their reasons, which state was compared, and the diagnosis."""
    impl = outcome.implementation
    shown = [r for r in outcome.reports if r.case_id not in outcome.known]
    lines = [format_reports(shown, summary=summary,
                            title=f"check {impl.label} ({impl.kind}) on {impl.optimizer}'s "
                                  f"cases of {outcome.suite}")]
    ran = [r for r in outcome.reports if r.status != "skipped"]
    skipped = len(outcome.reports) - len(ran)
    if outcome.known:
        lines.append(f"KNOWN {impl.kind} bugs (not failures): {len(outcome.known)} case(s)")
        for case_id, bug in outcome.known.items():
            lines.append(f"  {case_id}: {bug['what'][:160]}"
                         + ("..." if len(bug["what"]) > 160 else ""))
    by_state = {}
    for case_id, names in outcome.state.items():
        by_state.setdefault(", ".join(names) or "none (parameters only)", []).append(case_id)
    lines.append(f"ran {len(ran)} case(s), skipped {skipped}, failed {len(outcome.failed)}, "
                 f"known bugs {len(outcome.known)}; state compared:")
    for names, ids in sorted(by_state.items()):
        lines.append(f"  {names}: {len(ids)} case(s)")
    lines += [f"note: {n}" for n in outcome.notes]
    if outcome.diagnosis:
        lines += ["", outcome.diagnosis]
    return "\n".join(lines)
