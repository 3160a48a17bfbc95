"""The engine of ``npoptim diagnose``: replay the catalogue, rank what reproduces the results.

For each optimizer in a results file (the ``verify`` format):

1. the reference (npoptim, torch's numbers) is replayed on every case with results and
   compared: if every case passes, the answer is "matches"; otherwise the first divergent
   step and the size of the gap are reported;
2. each of the optimizer's catalogue entries (:mod:`npoptim.diagnose.catalogue`) is replayed
   on the same cases: the mistake on the cases whose flags reach its code, the reference on
   the others; an entry *reproduces* the results when every case passes against it, with the
   case's own tolerance. Entries are ranked by distance: the largest error over all cases,
   in units of the allowed error (``excess``, at most 1 for a reproduction);
3. when no single entry reproduces them, pairs of the closest entries are tried;
4. when several candidates reproduce them, the golden cases of the suite are searched for one
   on which the candidates differ beyond its tolerance: running it tells them apart;
5. otherwise the answer is "no known variant", with the closest entries.

Only parameters are compared (implementations name and store their state differently).
"""
import math
from dataclasses import dataclass, field

import numpy as np

from npoptim import registry
from npoptim.diagnose.catalogue import CATALOGUE, combine, entries_for
from npoptim.golden import inputs
from npoptim.golden.codec import CsrGrad, from_json_hyper
from npoptim.golden.compare import compare_arrays, compare_case
from npoptim.golden.schema import ResultCase, ResultStep, Tolerance, load_all
from npoptim.golden.verify import load_results

#: How many of the closest single entries are paired when none reproduces alone.
PAIRED = 6


class DiagnoseError(ValueError):
    """Results diagnose cannot judge: cases the suite lacks, the wrong optimizer, a bad file."""


@dataclass
class Candidate:
    """A catalogue entry's fit: ``excess`` (worst error over the cases, in allowed errors;
    <= 1 reproduces), ``case`` and ``step`` where that worst error is."""

    entry: object
    excess: float
    case: str = None
    step: int = None

    @property
    def reproduces(self):
        return self.excess <= 1.0


@dataclass
class Diagnosis:
    """The answer for one optimizer's cases.

    ``verdict``: ``"matches"``, ``"reproduced"`` or ``"no known variant"``; ``divergence``: the
    reference's first divergence (case id, :class:`~npoptim.golden.compare.Divergence`, the
    step's max scale-relative error); ``candidates``: entries that reproduce, best first;
    ``closest``: the nearest ones that do not; ``tell_apart``: ``(name a, name b, case id)``;
    ``unavailable``: ``(entry, missing switches)``.
    """

    optimizer: str
    cases: list
    failing: list
    verdict: str
    divergence: tuple = None
    candidates: list = field(default_factory=list)
    closest: list = field(default_factory=list)
    tell_apart: list = field(default_factory=list)
    unavailable: list = field(default_factory=list)


# ------------------------------------------------------------------------------ replay
def replay_params(case, entry=None):
    """The parameters after each step of ``case`` through the reference optimizer, switched
    by ``entry`` (None: the reference itself); a list (steps) of lists (parameters) of arrays
    in the case's dtype. An entry whose code the case does not reach (:meth:`Entry.on
    <npoptim.diagnose.catalogue.Entry.on>`) replays the reference."""
    base = from_json_hyper(case.hyperparameters)
    entry, hyper = _as_replayed(case, entry, base)
    name = entry.optimizer.get(case.optimizer, case.optimizer) if entry else case.optimizer
    dtype = np.dtype(entry.dtype if entry is not None and entry.dtype else case.dtype)
    params = [np.array(p, dtype=dtype) for p in case.params]
    per_step = entry.per_step if entry is not None else None
    # per-step factors follow each parameter's own step count: one group per parameter
    opt = registry.get(name)([{"params": [p]} for p in params] if per_step else params,
                             **hyper)
    if entry is not None and entry.state_start:
        _start_states_at(opt, entry.state_start)
    decay_by_engine = entry.decay_by_engine(case.optimizer, base) if entry else None
    one_count = base.get("step_scope") == "global"  # a step without a gradient counts too
    eps0 = hyper.get("eps")
    counts = [0] * len(params)
    out = []
    with np.errstate(all="ignore"):
        for step in case.steps:
            grads = [_grad(g, entry, dtype) for g in step.grads]
            for i, group in enumerate(opt.param_groups):
                group["lr"] = step.lr
                if per_step:
                    counts[i] += one_count or grads[i] is not None
                    factors = per_step(max(counts[i], 1), base)
                    group["lr"] = step.lr * factors.get("lr", 1.0)
                    if "eps" in factors and isinstance(eps0, (int, float)):
                        group["eps"] = eps0 * factors["eps"]
            decay = 1 - step.lr * base["weight_decay"] if decay_by_engine else None
            touched = [g is not None for g in grads]
            if decay_by_engine == "before":
                _decay(params, touched, decay)
            if case.objective is not None:
                opt.step(lambda: inputs.evaluate_objective(case.objective, params))
            else:
                opt.step(grads)
            if decay_by_engine == "after":
                _decay(params, touched, decay)
            out.append([p.astype(case.dtype) for p in params])
    return out


def _as_replayed(case, entry, hyper):
    """``(entry, hyperparameters)`` that ``case`` (hyperparameters ``hyper``) is replayed
    with: the entry as it reaches the case, or ``(None, hyper)`` (the reference) where it
    does not reach it or changes nothing."""
    if entry is not None:
        entry = entry.on(case.optimizer, hyper)
    overrides = entry.overrides(case.optimizer, hyper) if entry is not None else None
    return (entry, overrides) if overrides is not None else (None, hyper)


def _replayed(case, entry, cache):
    """:func:`replay_params` through ``cache``: one replay serves every entry that replays
    the case alike (the reference, for each entry that does not reach it); None where the
    switch refuses the case's options."""
    live, _ = _as_replayed(case, entry, from_json_hyper(case.hyperparameters))
    key = (live.name if live is not None else None, case.id)
    if key not in cache:
        try:
            cache[key] = replay_params(case, live)
        except (ValueError, TypeError, ZeroDivisionError):
            cache[key] = None
    return cache[key]


def _decay(params, touched, factor):
    for p, has_grad in zip(params, touched):
        if has_grad:
            p *= p.dtype.type(factor)


def _grad(g, entry, dtype):
    if g is None:
        return None
    if isinstance(g, CsrGrad):
        if entry is not None and entry.grads is not None:
            g = entry.grads(g)
        return CsrGrad(g.shape, g.indptr, g.indices, g.data.astype(dtype)).to_scipy()
    return np.asarray(g, dtype)


def _start_states_at(opt, values):
    """Make every new state start with ``values`` (``{name: value}``) instead of the
    reference's: a step counter as a float (a zero bias correction then gives IEEE inf/NaN, as
    such code does, instead of ZeroDivisionError), an array state filled with the value in its
    own dtype."""
    init = opt._init_state

    def init_state(param, group):
        state = init(param, group)
        for key, value in values.items():
            if isinstance(state.get(key), np.ndarray):
                state[key] = np.full_like(state[key], value)
            elif key in state:
                state[key] = np.float64(value)
        return state
    opt._init_state = init_state


# ------------------------------------------------------------------------------ distances
#: The tolerance a float64 case is judged with against an entry that computes in float32
#: (the golden float32 cases' own: a float32 implementation cannot agree to 1e-12).
FLOAT32_TOLERANCE = Tolerance(rtol=1e-5, atol=0.0, reason="computed in float32")


def distance(case, replayed, result, tolerance=None):
    """``(excess, step)``: the worst error of ``result`` against ``replayed`` (in allowed
    errors of the case's tolerance, or of ``tolerance``) and its step (1-based)."""
    tolerance = tolerance or case.tolerance
    worst, where = 0.0, None
    for t, (expected, got) in enumerate(zip(replayed, result.steps), start=1):
        for i, (e, a) in enumerate(zip(expected, got.params)):
            if np.shape(a) != np.shape(e):
                raise DiagnoseError(f"{case.id}: step {t} params[{i}] has shape "
                                    f"{np.shape(a)}, the case's is {np.shape(e)}")
            diff = compare_arrays(a, e, tolerance, f"params[{i}]")
            if diff.excess > worst or (where is None and not diff.passed):
                worst, where = max(worst, diff.excess), t
    if len(result.steps) < len(replayed):
        worst = math.inf
    return worst, where


def _fit(entry, cases, results, cache):
    worst = Candidate(entry, 0.0)
    for case in cases:
        replayed = _replayed(case, entry, cache)
        if replayed is None:
            return Candidate(entry, math.inf, case.id, None)
        tolerance = None
        if entry is not None and entry.dtype == "float32" and case.dtype == "float64":
            tolerance = FLOAT32_TOLERANCE
            if not _float32_values(results[case.id]):
                # values a float32 computation cannot have produced
                worst = Candidate(entry, math.inf, case.id, None)
                break
        excess, step = distance(case, replayed, results[case.id], tolerance)
        if excess > worst.excess or (worst.case is None and excess > 1):
            worst = Candidate(entry, excess, case.id, step)
    return worst


def _float32_values(result):
    """Whether every parameter value of ``result`` is a float32 number (as a float32
    computation reported in float64 gives)."""
    return all(np.array_equal(p.astype(np.float32).astype(np.float64), p, equal_nan=True)
               for step in result.steps for p in step.params)


def _tell_apart(a, b, suite_cases, cache):
    """The first suite case on which entries ``a`` and ``b`` differ beyond its tolerance."""
    for case in suite_cases:
        replays = [_replayed(case, entry, cache) for entry in (a, b)]
        if None in replays:
            continue
        as_result = ResultCase(case.id, [ResultStep(p, None) for p in replays[1]])
        if distance(case, replays[0], as_result)[0] > 1:
            return case.id
    return None


# ------------------------------------------------------------------------------ diagnose
def diagnose(results_path, suite_path=None, optimizers=None, catalogue=CATALOGUE):
    """Diagnose the results file (or directory) ``results_path`` against the golden cases of
    ``suite_path`` (default: the suite, :func:`npoptim.golden.suite.suite_path`); returns one
    :class:`Diagnosis` per optimizer. Raises
    :class:`DiagnoseError` for results of cases the suite lacks or of another optimizer than
    ``optimizers`` asks for, :class:`~npoptim.golden.schema.GoldenFileError` for a malformed
    file."""
    if suite_path is None:
        from npoptim.golden.suite import suite_path as default_suite
        suite_path = default_suite()
    results = load_results(results_path)
    if not results:
        raise DiagnoseError(f"{results_path}: no results")
    unavailable = []
    suite = {c.id: c for c in load_all(suite_path, kind="cases", unavailable=unavailable)}
    lacking = sorted(set(results) - set(suite))
    if lacking:
        raise DiagnoseError(
            f"{results_path} has results for {len(lacking)} case(s) the suite {suite_path} "
            f"lacks (first: {lacking[0]!r}); diagnose replays the suite's cases, so give the "
            "golden files these results were computed from with --suite"
            + (f" ({len(unavailable)} of its files were not read: {unavailable[0][1]})"
               if unavailable else ""))
    by_optimizer = {}
    for case_id in results:
        case = suite[case_id]
        by_optimizer.setdefault(case.optimizer, []).append(case)
    if optimizers:
        wrong = sorted(set(by_optimizer) - set(optimizers))
        if wrong:
            raise DiagnoseError(
                f"{results_path} holds results of {', '.join(wrong)}, not of "
                f"{', '.join(optimizers)} (its cases are {sorted(results)[0]!r}, ...)")
    for name in by_optimizer:
        if registry.is_wrapper(name):
            raise DiagnoseError(f"{name} is a wrapper: diagnose's catalogue holds optimizers' "
                                "convention mistakes; `npoptim verify` names where its cases "
                                "diverge")
        if name not in registry.OPTIMIZERS:
            raise DiagnoseError(f"npoptim has no optimizer {name!r} to replay")
    out = []
    for name, cases in by_optimizer.items():
        cases.sort(key=lambda c: c.id)
        others = sorted((c for c in suite.values() if c.optimizer == name
                         and c.id not in results), key=lambda c: c.id)
        out.append(_diagnose_optimizer(name, cases, others, results, catalogue))
    return out


def _diagnose_optimizer(name, cases, others, results, catalogue):
    stripped = {c.id: ResultCase(c.id, [ResultStep(s.params, None)
                                        for s in results[c.id].steps]) for c in cases}
    cache = {}
    reports = {c.id: compare_case(c, stripped[c.id]) for c in cases}
    failing = [c.id for c in cases if not reports[c.id].passed]
    available, unavailable = entries_for(name, catalogue)
    diagnosis = Diagnosis(name, [c.id for c in cases], failing, "matches",
                          unavailable=unavailable)
    if not failing:
        return diagnosis
    # the earliest divergence over the failing cases
    earliest = min(failing, key=lambda i: (reports[i].divergence.step if reports[i].divergence
                                           else math.inf))
    first = reports[earliest]
    div = first.divergence
    step_report = first.steps[div.step - 1] if div is not None else None
    diagnosis.divergence = (earliest, div, step_report.max_scaled if step_report else None,
                            first.message)
    fits = sorted((_fit(e, cases, stripped, cache) for e in available),
                  key=lambda c: c.excess)
    reproduced = [f for f in fits if f.reproduces]
    if not reproduced:
        pairs = [combine(a.entry, b.entry) for k, a in enumerate(fits[:PAIRED])
                 for b in fits[k + 1:PAIRED]]
        pair_fits = sorted((_fit(p, cases, stripped, cache) for p in pairs if p is not None),
                           key=lambda c: c.excess)
        reproduced = [f for f in pair_fits if f.reproduces]
        fits = sorted(fits + pair_fits, key=lambda c: c.excess)
    diagnosis.candidates = reproduced
    diagnosis.closest = [f for f in fits if not f.reproduces][:3]
    diagnosis.verdict = "reproduced" if reproduced else "no known variant"
    for k, a in enumerate(reproduced):
        for b in reproduced[k + 1:]:
            diagnosis.tell_apart.append((a.entry.name, b.entry.name,
                                         _tell_apart(a.entry, b.entry, others, cache)))
    return diagnosis


# ------------------------------------------------------------------------------ the report
def _g(x):
    return "inf" if x == math.inf else f"{x:.3g}"


def format_diagnoses(diagnoses, results_path, suite_path):
    lines = [f"diagnose {results_path} against {suite_path}"]
    for d in diagnoses:
        lines.append("")
        n = len(d.cases)
        if d.verdict == "matches":
            lines.append(f"{d.optimizer}: matches: all {n} cases agree with the reference "
                         "(torch's numbers) to their tolerance")
            continue
        case_id, div, scaled, message = d.divergence
        where = (f"first diverges at {case_id} {div}" if div is not None
                 else f"{case_id}: {message}")
        gap = f" (max error {_g(scaled)} of the scale at that step)" if scaled else ""
        lines.append(f"{d.optimizer}: {len(d.failing)} of {n} cases differ from the "
                     f"reference; {where}{gap}")
        if d.candidates:
            lines.append("  reproduced by (ranked by distance, worst error over all cases in "
                         "units of the allowed error):")
            for k, c in enumerate(d.candidates, 1):
                lines.append(f"    {k}. {c.entry.name} [{c.entry.kind}]  distance "
                             f"{_g(c.excess)}")
                lines.append(f"       {c.entry.doc}")
            for a, b, case in d.tell_apart:
                lines.append(f"  to tell '{a}' from '{b}': " + (
                    f"run golden case {case}" if case else
                    "no golden case of the suite tells them apart"))
        else:
            lines.append("  no known variant: no catalogue entry (nor a pair of them) "
                         "reproduces these results")
        if d.closest:
            lines.append("  closest entries that do not reproduce them:")
            for c in d.closest:
                lines.append(f"    {c.entry.name}: distance {_g(c.excess)}"
                             + (f" (at {c.case} step {c.step})" if c.case else ""))
        if d.unavailable:
            lines.append("  not checked (the reference lacks their convention switch yet): "
                         + "; ".join(f"{e.name} ({', '.join(m)})" for e, m in d.unavailable))
    return "\n".join(lines)
