"""Compare results with golden cases: errors, tolerances and the report of ``npoptim verify``
(which cases a run selects, and the run itself: :mod:`npoptim.golden.verify`).

For each step and each compared array (every parameter, then each state entry when the
results carry state), with ``e`` the expected and ``a`` the actual values in the case's dtype:

* **abs error** ``|a - e|``;
* **scale-relative error** ``|a - e| / S`` with ``S = max |e|`` over the array (the array's
  scale; an all-zero expected array has ``S = 0`` and any difference there is infinite); a
  state entry that is a list of arrays (L-BFGS's history) has one scale, over the list;
* **ULP distance**: how many representable values of the dtype lie between ``a`` and ``e``;
* the array **passes** when every element has ``|a - e| <= atol + rtol * S``; NaN must be
  NaN and an infinity the same infinity. Integer state (step counters) must be equal.
* a **16-bit** array (bfloat16, float16; schema version 3) passes when every element is
  within the tolerance's ``ulp`` units in the last place *of the 16-bit type* (adjacent
  bfloat16 values are 1 apart, 0.0 and -0.0 are 0 apart); NaN must be NaN, an infinity the
  same infinity. Its abs and scale-relative errors are reported as for other arrays.

A case passes when every step passes. The first failing step, array and element (first in
row-major order) is "where the case diverges".
"""
import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from npoptim.golden.schema import GoldenFileError


@dataclass
class Divergence:
    step: int                 # 1-based
    field: str                # e.g. "params[0]" or "state[1].exp_avg_sq"
    index: tuple
    actual: float
    expected: float
    abs_err: float
    limit: float
    ulp: Optional[float] = None        # 16-bit arrays: the element's ULP distance
    ulp_limit: Optional[int] = None    # and the tolerance's

    def __str__(self):
        where = f"{self.field}[{', '.join(map(str, self.index))}]" if self.index else self.field
        if self.ulp_limit is not None:
            return (f"step {self.step}: {where} = {_num(self.actual)}, expected "
                    f"{_num(self.expected)} ({_ulp(self.ulp)} ulp > allowed "
                    f"{self.ulp_limit} ulp of the 16-bit type)")
        return (f"step {self.step}: {where} = {_num(self.actual)}, expected "
                f"{_num(self.expected)} (abs err {self.abs_err:.3g} > allowed "
                f"{self.limit:.3g})")


@dataclass
class ArrayDiff:
    field: str
    max_abs: float
    max_scaled: float
    max_ulp: float
    passed: bool
    excess: float             # max |a-e| / allowed (>1 fails)
    first_bad: Optional[tuple] = None   # (index, actual, expected, abs_err, limit[, ulp,
    #                                      ulp_limit]): ulp for 16-bit arrays


@dataclass
class StepReport:
    step: int
    max_abs: float = 0.0
    max_scaled: float = 0.0
    max_ulp: float = 0.0
    worst: str = "-"
    passed: bool = True
    divergence: Optional[Divergence] = None
    compared: int = 0


@dataclass
class CaseReport:
    """The comparison of one case's results with its golden case.

    Parameters
    ----------
    case_id : str
        the case's id.
    tolerance : object
        the tolerance it was compared to.
    status : str, default: 'pass'
        ``"pass"``, ``"fail"``, ``"missing"``, ``"error"`` or ``"skipped"``.
    steps : list
        the comparison of each step.
    message : str, default: ''
        what went wrong, where something did.
    state_compared : bool, default: False
        whether the optimizer state was compared too.
    """

    case_id: str
    tolerance: object
    status: str = "pass"      # pass | fail | missing | error | skipped
    steps: list = field(default_factory=list)
    message: str = ""
    state_compared: bool = False

    @property
    def passed(self):
        return self.status == "pass"

    @property
    def failed(self):
        """A failure: not passed and not skipped by the results (with a reason)."""
        return self.status not in ("pass", "skipped")

    @property
    def divergence(self):
        for s in self.steps:
            if not s.passed:
                return s.divergence
        return None


# ------------------------------------------------------------------------------ numerics
def _ordered(x):
    """Integers in the order of the floats (adjacent floats differ by 1; -0 == +0)."""
    if x.dtype.itemsize == 2:  # float16, bfloat16
        bits = x.view(np.int16).astype(np.int64)
        return np.where(bits < 0, -(bits & 0x7FFF), bits)
    if x.dtype == np.float32:
        bits = x.view(np.int32).astype(np.int64)
        return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)
    bits = x.view(np.int64)
    return np.where(bits < 0, -(bits & 0x7FFFFFFFFFFFFFFF), bits)


def ulp_distance(a, e):
    """Element-wise ULP distance of two float arrays of one dtype (as float64)."""
    oa, oe = _ordered(a), _ordered(e)
    with np.errstate(over="ignore"):
        diff = oa - oe
    same = (oa >= 0) == (oe >= 0)
    return np.where(same, np.abs(diff).astype(np.float64),
                    np.abs(oa.astype(np.float64)) + np.abs(oe.astype(np.float64)))


def compare_arrays(actual, expected, tolerance, name, scale=None):
    """:class:`ArrayDiff` of ``actual`` against ``expected`` (same shape, checked before).

    ``scale`` overrides the array's own scale (a list of state arrays shares one scale)."""
    e = np.asarray(expected)
    if e.dtype.kind in "iu":
        a = np.asarray(actual, np.float64)
        err = np.abs(a - e.astype(np.float64))
        bad = err != 0
        passed = not bad.any()
        first = None
        if not passed:
            i = int(np.argmax(bad.reshape(-1)))
            idx = np.unravel_index(i, e.shape) if e.shape else ()
            first = (tuple(int(k) for k in idx), float(a.reshape(-1)[i]),
                     float(e.reshape(-1)[i]), float(err.reshape(-1)[i]), 0.0)
        m = float(err.max()) if err.size else 0.0
        return ArrayDiff(name, m, 0.0 if passed else math.inf, m, passed,
                         0.0 if passed else math.inf, first)
    a = np.asarray(actual, np.float64).astype(e.dtype)
    e_flat, a_flat = e.reshape(-1), a.reshape(-1)
    if e_flat.size == 0:
        return ArrayDiff(name, 0.0, 0.0, 0.0, True, 0.0)
    finite = np.isfinite(e_flat)
    special_bad = ~finite & ~((np.isnan(e_flat) & np.isnan(a_flat)) | (e_flat == a_flat))
    if scale is None:
        scale = float(np.max(np.abs(e_flat[finite]))) if finite.any() else 0.0
    limit = tolerance.atol + tolerance.rtol * scale
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.where(finite, np.abs(a_flat.astype(np.float64) - e_flat.astype(np.float64)),
                       0.0)
    err = np.where(finite & ~np.isfinite(a_flat), math.inf, err)
    err = np.where(special_bad, math.inf, err)
    ulps = ulp_distance(np.where(finite & np.isfinite(a_flat), a_flat, e_flat).astype(e.dtype),
                        e_flat)
    ulps = np.where(err == math.inf, math.inf, ulps)
    half = e.dtype.itemsize == 2 and getattr(tolerance, "ulp", None) is not None
    bad = ((ulps > tolerance.ulp) if half else (err > limit)) | special_bad
    max_abs = float(err.max())
    if scale > 0:
        max_scaled = max_abs / scale
    else:
        max_scaled = 0.0 if max_abs == 0 else math.inf
    excess = max_abs / limit if limit > 0 else (0.0 if max_abs == 0 else math.inf)
    max_ulp = float(ulps.max())
    if half:
        excess = (max_ulp / tolerance.ulp if tolerance.ulp > 0
                  else (0.0 if max_ulp == 0 else math.inf))
    first = None
    if bad.any():
        i = int(np.argmax(bad))
        idx = np.unravel_index(i, e.shape) if e.shape else ()
        first = (tuple(int(k) for k in idx), float(a_flat[i]), float(e_flat[i]), float(err[i]),
                 limit) + ((float(ulps[i]), tolerance.ulp) if half else ())
        excess = max(excess, 1.0 + 1e-12) if excess <= 1 else excess
    return ArrayDiff(name, max_abs, max_scaled, max_ulp, not bad.any(), excess, first)


# ------------------------------------------------------------------------------- cases
def compare_case(case, result, results_file="<results>"):
    """A :class:`CaseReport` of one :class:`~npoptim.golden.schema.ResultCase` against its
    :class:`~npoptim.golden.schema.Case`. Structural mismatches raise
    :class:`~npoptim.golden.schema.GoldenFileError` naming the results file, case and field."""
    report = CaseReport(case.id, case.tolerance)
    if result is None:
        report.status = "missing"
        report.message = "no results for this case"
        return report
    if getattr(result, "skipped", None):
        report.status = "skipped"
        report.message = result.skipped
        return report
    if len(result.steps) > len(case.steps):
        raise GoldenFileError(results_file, case.id, "steps",
                              f"has {len(result.steps)} steps, the case has {len(case.steps)}")
    for t, (step, got) in enumerate(zip(case.steps, result.steps)):
        report.steps.append(_compare_step(t, step, got, case, results_file, report))
    if any(not s.passed for s in report.steps):
        report.status = "fail"
    if len(result.steps) < len(case.steps):
        report.status = "fail"
        report.message = (f"results stop after step {len(result.steps)} of "
                          f"{len(case.steps)}")
        if report.divergence is None:
            report.message += f"; missing from step {len(result.steps) + 1}"
    return report


def _compare_step(t, step, got, case, results_file, report):
    where = f"steps[{t}]"
    out = StepReport(t + 1)
    if len(got.params) != len(step.expected_params):
        raise GoldenFileError(results_file, case.id, f"{where}.params",
                              f"has {len(got.params)} arrays, the case has "
                              f"{len(step.expected_params)} parameters")
    diffs = []
    for i, (a, e) in enumerate(zip(got.params, step.expected_params)):
        if a.shape != e.shape:
            raise GoldenFileError(results_file, case.id, f"{where}.params[{i}].shape",
                                  f"is {list(a.shape)}, expected {list(e.shape)}")
        if a.dtype != e.dtype:
            raise GoldenFileError(results_file, case.id, f"{where}.params[{i}].dtype",
                                  f"is {str(a.dtype)!r}, the case is {case.dtype!r}")
        diffs.append(compare_arrays(a, e, case.tolerance, f"params[{i}]"))
    if got.state is not None and step.expected_state is not None:
        report.state_compared = True
        for i, (a_state, e_state) in enumerate(zip(got.state, step.expected_state)):
            if a_state is None:
                continue
            for name, a in sorted(a_state.items()):
                field_ = f"{where}.state[{i}].{name}"
                if e_state is None or name not in e_state:
                    raise GoldenFileError(results_file, case.id, field_,
                                          "the case has no such state entry (expected "
                                          f"{sorted(e_state or {})})")
                diffs += _compare_state(a, e_state[name], case, results_file, field_,
                                        f"state[{i}].{name}")
    expected_own = getattr(step, "expected_wrapper_state", None)
    if getattr(got, "wrapper_state", None) is not None and expected_own is not None:
        report.state_compared = True
        for name, a in sorted(got.wrapper_state.items()):
            field_ = f"{where}.wrapper_state.{name}"
            if name not in expected_own:
                raise GoldenFileError(results_file, case.id, field_,
                                      "the case has no such wrapper state entry (expected "
                                      f"{sorted(expected_own)})")
            diffs += _compare_state(a, expected_own[name], case, results_file, field_,
                                    f"wrapper_state.{name}")
    out.compared = len(diffs)
    worst = None
    for d in diffs:
        out.max_abs = max(out.max_abs, d.max_abs)
        out.max_scaled = max(out.max_scaled, d.max_scaled)
        out.max_ulp = max(out.max_ulp, d.max_ulp)
        if worst is None or d.excess > worst.excess:
            worst = d
        if not d.passed and out.passed:
            out.passed = False
            out.divergence = Divergence(t + 1, d.field, *d.first_bad)
    if worst is not None and worst.max_abs > 0:
        out.worst = worst.field
    return out


def _list_scale(values):
    """The largest finite magnitude over a (nested) list of arrays."""
    scale = 0.0
    for v in values:
        if isinstance(v, list):
            scale = max(scale, _list_scale(v))
        elif v is not None and np.asarray(v).dtype.kind == "f":
            v = np.asarray(v, np.float64)
            finite = v[np.isfinite(v)]
            if finite.size:
                scale = max(scale, float(np.max(np.abs(finite))))
    return scale


def _compare_state(a, e, case, results_file, field_, name, scale=None):
    if isinstance(e, list) or isinstance(a, list):
        if not (isinstance(e, list) and isinstance(a, list)) or len(a) != len(e):
            raise GoldenFileError(results_file, case.id, field_,
                                  "does not match the case's list of arrays")
        scale = _list_scale(e) if scale is None else scale
        out = []
        for k, (x, y) in enumerate(zip(a, e)):
            out += _compare_state(x, y, case, results_file, f"{field_}[{k}]", f"{name}[{k}]",
                                  scale)
        return out
    if e is None or a is None:
        if (e is None) != (a is None):
            return [ArrayDiff(name, math.inf, math.inf, math.inf, False, math.inf,
                              ((), math.nan, math.nan, math.inf, 0.0))]
        return []
    if a.shape != e.shape:
        raise GoldenFileError(results_file, case.id, f"{field_}.shape",
                              f"is {list(a.shape)}, expected {list(e.shape)}")
    if np.asarray(e).dtype.kind in "iu":
        scale = None
    return [compare_arrays(a, e, case.tolerance, name, scale)]


# ------------------------------------------------------------------------------ reporting
def _num(x):
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    return repr(float(x))


def _g(x):
    if x == 0:
        return "0"
    if math.isinf(x):
        return "inf"
    return f"{x:.3e}"


def _ulp(x):
    return "inf" if math.isinf(x) else str(int(x))


def format_reports(reports, summary=False, title=None):
    """The text report: a per-case, per-step table (or one line per case with ``summary``),
    the first divergence of each failing case, and a closing count."""
    width = report_width(r.case_id for r in reports)
    lines = ([title] if title else []) + report_header(width)
    for r in reports:
        lines += report_lines(r, width, "cases" if summary else "steps")
    return "\n".join(lines + [""] + report_footer(reports))


def report_width(case_ids):
    """The width of the report's case column for these ids."""
    return max([len(i) for i in case_ids] + [4])


def report_header(width):
    """The report table's head and rule (a list of lines)."""
    head = (f"{'case':<{width}}  {'step':>4}  {'max abs err':>11}  {'max rel/scale':>13}  "
            f"{'max ulp':>9}  {'tol rtol/atol':>15}  {'worst array':<24}  result")
    return [head, "-" * len(head)]


def report_lines(report, width, detail="steps"):
    """One case's rows of the report table, and where a failing case diverges.

    ``detail``: ``"steps"`` (a row per step), ``"cases"`` (one row for the case) or
    ``"failures"`` (one row for a passing case, a row per step for a failing one)."""
    r = report
    tol = f"{r.tolerance.rtol:.0e}/{r.tolerance.atol:.0e}" if r.tolerance else "-"
    if getattr(r.tolerance, "ulp", None) is not None:
        tol = f"{r.tolerance.ulp} ulp16+{r.tolerance.rtol:.0e}"
    if r.status in ("missing", "error", "skipped"):
        return [f"{r.case_id:<{width}}  {'-':>4}  {'-':>11}  {'-':>13}  {'-':>9}  "
                f"{tol:>15}  {'-':<24}  {r.status.upper()}: {r.message}"]
    per_step = detail == "steps" or (detail == "failures" and r.failed)
    lines = []
    for s in r.steps if per_step else [_aggregate(r)]:
        step = str(s.step) if per_step else "all"
        lines.append(f"{r.case_id:<{width}}  {step:>4}  {_g(s.max_abs):>11}  "
                     f"{_g(s.max_scaled):>13}  {_ulp(s.max_ulp):>9}  {tol:>15}  "
                     f"{s.worst:<24}  {'ok' if s.passed else 'FAIL'}")
    if r.failed:
        div = r.divergence
        msg = f"diverges at {div}" if div else r.message
        if div and r.message:
            msg += f"; {r.message}"
        lines.append(f"  -> {r.case_id} {msg}")
    return lines


def report_footer(reports):
    """The closing lines: the cases the results skip, by reason, and the count that failed
    (or that all pass)."""
    lines = []
    skipped = [r for r in reports if r.status == "skipped"]
    n = len(reports) - len(skipped)
    failed = [r for r in reports if r.failed]
    if skipped:
        lines.append(f"SKIPPED by the results (not failures): {len(skipped)} case(s)")
        reasons = {}
        for r in skipped:
            reasons.setdefault(r.message, []).append(r.case_id)
        for reason, ids in sorted(reasons.items()):
            lines.append(f"  {len(ids)} x {reason} (first: {ids[0]})")
    if failed:
        first = failed[0]
        lines.append(f"FAILED: {len(failed)} of {n} cases do not pass (first: {first.case_id}"
                     + (f", diverges at step {first.divergence.step}" if first.divergence
                        else f", {first.message}") + ")")
    else:
        state = sum(r.state_compared for r in reports)
        lines.append(f"OK: all {n} cases pass ({state} with optimizer state compared)")
    return lines


def _aggregate(report):
    agg = StepReport(0)
    worst_excess = -1.0
    for s in report.steps:
        agg.max_abs = max(agg.max_abs, s.max_abs)
        agg.max_scaled = max(agg.max_scaled, s.max_scaled)
        agg.max_ulp = max(agg.max_ulp, s.max_ulp)
        if s.max_scaled > worst_excess and s.worst != "-":
            worst_excess, agg.worst = s.max_scaled, s.worst
        agg.passed = agg.passed and s.passed
    agg.passed = agg.passed and report.passed
    return agg
