"""A ``npoptim verify`` run: which cases it selects, whose results it compares, and a report
for each case as soon as that case is judged.

* :func:`select` picks cases by optimizer, id pattern, capability tag and flavor
  (:func:`select_flavors`: the cases a framework's users run), and :func:`unselected_note`
  says what a selection left out and the option that adds it;
* :class:`Verification` is one run: the selection and its notes, then :meth:`reports
  <Verification.reports>` yields a :class:`~npoptim.golden.compare.CaseReport` per case in
  the cases' order, replaying each case through npoptim just before judging it (or reading
  another implementation's results file), so a caller can print results as they come;
* :func:`verify` is the whole run at once: ``(reports, notes)``.

The numbers and the report's text are :mod:`npoptim.golden.compare`'s.
"""
import fnmatch

from npoptim.golden.compare import CaseReport, compare_case
from npoptim.golden.schema import GoldenFileError


def select(cases, optimizers=None, ids=None, tags=None, exclude_tags=None, flavors=None):
    """Cases of the given optimizers whose id matches one of the ``ids`` glob patterns, that
    have every tag of ``tags`` and none of ``exclude_tags`` (capability tags, schema
    version 2), and (``flavors``) are computed in one of these flavors."""
    out = list(cases)
    if optimizers:
        out = [c for c in out if c.optimizer in optimizers]
    if ids:
        out = [c for c in out if any(fnmatch.fnmatchcase(c.id, p) for p in ids)]
    if tags:
        out = [c for c in out if set(tags) <= set(c.tags)]
    if exclude_tags:
        out = [c for c in out if not set(exclude_tags) & set(c.tags)]
    return select_flavors(out, flavors)


def select_flavors(cases, flavors=None):
    """The cases a framework's users run (see reference_results/README.md, Flavors).

    * ``flavors`` None: the torch cases in float32/float64, if there are any among ``cases``,
      else the torch cases (the 16-bit ones of ``cases/precision``, given alone or selected
      by a tag such as ``bfloat16``), else all of them (a flavor's directory given alone);
    * ``["all"]``: every case;
    * ``[name, ...]``: each flavor's own cases, plus the torch cases of the same optimizers that
      the flavor does not override (a flavor has a case only where its conventions change the
      result, so every other torch case applies to it unchanged; the 16-bit cases are not
      among them). ``"torch"`` is torch's cases, the 16-bit ones included.
    """
    cases = list(cases)
    if flavors is None:
        torch_cases = [c for c in cases if c.flavor == "torch"]
        full_precision = [c for c in torch_cases if getattr(c, "precision", None) is None]
        return full_precision or torch_cases or cases
    if "all" in flavors:
        return cases
    keep = set()
    for flavor in flavors:
        own = [c for c in cases if c.flavor == flavor]
        keep |= {c.id for c in own}
        if flavor == "torch":
            continue
        overridden = {_torch_id(c) for c in own}
        optimizers = {c.optimizer for c in own} | _flavor_optimizers(flavor)
        keep |= {c.id for c in cases if c.flavor == "torch" and c.optimizer in optimizers
                 and c.id not in overridden and getattr(c, "precision", None) is None}
    return [c for c in cases if c.id in keep]


def unselected_note(every, filtered, selected):
    """What a selection left out of ``every`` case: those the filters (optimizer, id, tags)
    keep, ``filtered``, but the flavor selection does not, by family with the option that adds
    them, and those the filters left out."""
    chosen = {c.id for c in selected}
    left = [c for c in filtered if c.id not in chosen]
    flavor = [c for c in left if c.flavor != "torch"]
    half = [c for c in left if c.flavor == "torch" and getattr(c, "precision", None) is not None]
    other = len(every) - len(filtered)
    parts = []
    if flavor:
        names = sorted({c.flavor for c in flavor})
        parts.append(f"{len(flavor)} flavor cases ({', '.join(names)}: --flavor NAME, or "
                     "--flavor all)")
    if half:
        parts.append(f"{len(half)} 16-bit and quantized cases (--flavor torch, or --tag "
                     "bfloat16 / float16)")
    if other:
        parts.append(f"{other} left out by --optimizer, --case, --tag or --exclude-tag")
    return (f"{len(selected)} of {len(every)} cases selected; not selected: "
            + "; ".join(parts))


def _torch_id(case):
    """``Adam/keras/eps-dominated/float64`` -> ``Adam/eps-dominated/float64``."""
    parts = case.id.split("/")
    return "/".join([parts[0]] + parts[2:]) if len(parts) == 4 else case.id


def _flavor_optimizers(flavor):
    """The optimizers of a flavor whose torch cases apply to it where it has no case of its
    own: those it has switches for."""
    from npoptim import flavors as flavors_
    try:
        return set(flavors_.get(flavor).switches)
    except ValueError:
        return set()


def load_results(path):
    """``{case id: ResultCase}`` from a results file or a directory of them."""
    from npoptim.golden.schema import golden_documents, parse
    out, where = {}, {}
    for p, raw in golden_documents(path):
        doc = parse(raw, p, kind="results")
        for r in doc.cases:
            if r.id in out:
                raise GoldenFileError(p, r.id, "id", f"also has results in {where[r.id]}")
            out[r.id], where[r.id] = r, p
    return out


def npoptim_result(case):
    """npoptim's own result for ``case`` (a :class:`~npoptim.golden.schema.ResultCase`), or a
    :class:`CaseReport` with status ``"error"`` when npoptim lacks the optimizer or raises."""
    from npoptim import registry
    from npoptim.golden.replay import npoptim_make_step, replay, results_file
    from npoptim.golden.schema import parse
    if case.optimizer not in registry.OPTIMIZERS and not registry.is_wrapper(case.optimizer):
        return CaseReport(case.id, case.tolerance, "error",
                          message=f"npoptim has no optimizer {case.optimizer!r}")
    try:
        entry = replay(case, npoptim_make_step(case.optimizer, case.precision,
                                               getattr(case, "wrapped", None)))
    except Exception as exc:  # report it as this case's failure
        return CaseReport(case.id, case.tolerance, "error",
                          message=f"npoptim raised {type(exc).__name__}: {exc}")
    return parse(results_file([entry]), "<npoptim>", "results").cases[0]


class Verification:
    """One ``verify`` run over the cases of ``cases_path`` that the filters select (see
    :func:`select`), against the results in ``results_path`` or, without it, npoptim re-run.

    ``cases`` (the selection, in the suite's order) and ``notes`` (what was not selected and
    the option that selects it; files not read; results that match no selected case) are
    known before any case runs; :meth:`reports` then judges the cases one at a time. Raises
    :class:`~npoptim.golden.schema.GoldenFileError` for a malformed file or an empty
    selection."""

    def __init__(self, cases_path, results_path=None, optimizers=None, ids=None, tags=None,
                 exclude_tags=None, flavors=None):
        from npoptim.golden.schema import load_all
        unavailable = []
        every = load_all(cases_path, kind="cases", unavailable=unavailable)
        self.cases = select(every, optimizers, ids, tags, exclude_tags, flavors)
        if not self.cases:
            raise GoldenFileError(cases_path, None, None, "no case matches the selection" + (
                f" ({len(unavailable)} files not read: {unavailable[0][1]})" if unavailable
                else ""))
        filtered = select(every, optimizers, ids, tags, exclude_tags, ["all"])
        self.notes = ([unselected_note(every, filtered, self.cases)]
                      if len(self.cases) < len(every) else [])
        if unavailable:
            self.notes.append(f"{len(unavailable)} case files not read (first: "
                              f"{unavailable[0][0].name}): {unavailable[0][1]}")
        self.results_path = results_path
        self.results = None if results_path is None else load_results(results_path)
        if self.results is not None:
            extra = sorted(set(self.results) - {c.id for c in self.cases})
            if extra:
                self.notes.append(f"{len(extra)} result(s) match no selected case and were "
                                  f"ignored (first: {extra[0]!r})")

    def reports(self, progress=None):
        """Yield each case's :class:`CaseReport`, in the order of :attr:`cases`, as soon as it
        is judged (a case replayed through npoptim is replayed just before).
        ``progress(done, total)`` is called after each case."""
        for done, case in enumerate(self.cases, 1):
            if self.results is None:
                result, source = npoptim_result(case), "<npoptim>"
            else:
                result = self.results.get(case.id)
                source = getattr(result, "source", None) or str(self.results_path)
            yield (result if isinstance(result, CaseReport)
                   else compare_case(case, result, source))
            if progress is not None:
                progress(done, len(self.cases))


def verify(cases_path, results_path=None, optimizers=None, ids=None, tags=None,
           exclude_tags=None, flavors=None, progress=None):
    """A whole :class:`Verification` at once: ``(reports, notes)``.

    A result declared ``skipped`` gives a report with status ``"skipped"`` (not a failure).
    ``progress(done, total)`` is called after each case is judged."""
    run = Verification(cases_path, results_path, optimizers, ids, tags, exclude_tags, flavors)
    return list(run.reports(progress)), run.notes
