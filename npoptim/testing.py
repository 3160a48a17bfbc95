"""Check an optimizer implementation against npoptim's golden cases from a Python test suite.

One test per case, with the report of ``npoptim verify`` as the failure message::

    import pytest
    from npoptim import testing

    CASES = testing.load_cases("reference_results", optimizer="Adam")

    @pytest.mark.parametrize("case", CASES, ids=str)
    def test_my_adam(case):
        def make_step(params, hyperparameters):
            opt = MyAdam(params, **hyperparameters)

            def step(grads, lr):
                opt.lr = lr
                opt.step(grads)
                return params          # or (params, state)
            return step

        testing.assert_case(case, make_step)

``make_step(params, hyperparameters)`` receives fresh copies of the case's initial parameters
(NumPy arrays of the case's dtype) and its hyperparameters (torch's names; pairs as tuples)
and returns ``step(grads, lr)``. ``step`` applies one step and returns the parameters (a list
of arrays, or None meaning "the arrays I was given, updated in place") or ``(params, state)``
with ``state`` one dict per parameter (torch's state names; None for no state), which is then
compared too. ``grads`` has one entry per parameter: a dense array, None (no gradient this
step) or a CSR gradient in the form ``grad_format`` asks for: ``"csr"`` (default: a
``scipy.sparse.csr_array`` with the entries exactly as stored, duplicates and explicit zeros
included, ``has_canonical_format`` False), ``"dense"`` (duplicates summed, absent entries
zero: loses what lazy optimizers need) or ``"raw"`` (:class:`CsrGrad`, a named tuple of
``shape, indptr, indices, data``).

A wrapper's case (Lookahead, SAM, Mechanic; schema version 4) passes ``make_step`` the
wrapper's settings; the optimizer it wraps is ``case.wrapped`` (``{"optimizer": name,
"hyperparameters": {...}}``), and ``step`` may return ``(params, state, wrapper_state)``
(the wrapped optimizer's state per parameter, the wrapper's own as a dict), compared too.
Select or leave them out with the tag ``wrapper``.
"""
from npoptim.golden.codec import CsrGrad
from npoptim.golden.compare import CaseReport, compare_case, format_reports
from npoptim.golden.replay import npoptim_make_step, replay, results_file
from npoptim.golden.schema import Case, GoldenFileError, load_all, parse
from npoptim.golden.verify import select

__all__ = ["Case", "CaseReport", "CsrGrad", "GoldenFileError", "load_cases", "run_case",
           "check_case", "assert_case", "npoptim_step", "results_file", "default_suite"]


def default_suite():
    """The golden suite's directory: a checkout's ``reference_results/``, or the copy an
    installed npoptim carries (:func:`npoptim.golden.suite.suite_path`)."""
    from npoptim.golden.suite import suite_path
    return suite_path()


def load_cases(path=None, optimizer=None, ids=None, flags=None, dtype=None, tags=None,
               exclude_tags=None, flavor=None):
    """The cases in a golden file or directory (default: :func:`default_suite`; schema
    versions 1 to 4), filtered by optimizer name(s), id glob pattern(s), required flag(s),
    dtype, capability tag(s) required and excluded, and flavor(s) (``"torch"``, ``"keras"``,
    ...; see :mod:`npoptim.flavors`). A file whose arrays need a library that is not installed
    (bfloat16: ``npoptim[bf16]``) is left out with a warning that names it.

    Parameters
    ----------
    path : str or os.PathLike, optional
        a golden file or directory; None means :func:`default_suite`.
    optimizer : str or list of str, optional
        keep the cases of these optimizers.
    ids : str or list of str, optional
        keep the cases whose id matches one of these glob patterns.
    flags : str or list of str, optional
        keep the cases that have every one of these flags.
    dtype : str, optional
        keep the cases of this dtype.
    tags : str or list of str, optional
        keep the cases that have every one of these capability tags.
    exclude_tags : str or list of str, optional
        leave out the cases with these tags.
    flavor : str or list of str, optional
        the flavors whose cases to keep (``"all"`` for every one); None keeps the torch
        cases where there are any.
    """
    def as_list(x):
        return None if x is None else ([x] if isinstance(x, str) else list(x))
    unavailable = []
    loaded = load_all(default_suite() if path is None else path, kind="cases",
                      unavailable=unavailable)
    if unavailable:
        import warnings
        warnings.warn(f"{len(unavailable)} case files not read (first: "
                      f"{unavailable[0][0].name}): {unavailable[0][1]}", stacklevel=2)
    cases = select(loaded, as_list(optimizer), as_list(ids), as_list(tags),
                   as_list(exclude_tags), as_list(flavor))
    for flag in as_list(flags) or ():
        cases = [c for c in cases if flag in c.flags]
    if dtype is not None:
        cases = [c for c in cases if c.dtype == str(dtype)]
    return cases


def run_case(case, make_step, grad_format="csr"):
    """Run ``case`` through ``make_step``; return its results (the schema's ``"results"``
    form, ready for :func:`results_file` and ``npoptim verify``).

    Parameters
    ----------
    case : Case
        a golden case, as :func:`load_cases` returns it.
    make_step : callable
        ``make_step(params, hyperparameters) -> step``, the implementation under test
        (see the module docstring).
    grad_format : str, default: 'csr'
        how CSR gradients reach ``step``: ``"csr"``, ``"dense"`` or ``"raw"``.
    """
    return replay(case, make_step, grad_format)


def check_case(case, make_step, grad_format="csr"):
    """Run and compare one case; returns the :class:`~npoptim.golden.compare.CaseReport`.

    Parameters
    ----------
    case : Case
        a golden case, as :func:`load_cases` returns it.
    make_step : callable
        ``make_step(params, hyperparameters) -> step``, the implementation under test
        (see the module docstring).
    grad_format : str, default: 'csr'
        how CSR gradients reach ``step``: ``"csr"``, ``"dense"`` or ``"raw"``.
    """
    result = parse(results_file([run_case(case, make_step, grad_format)], "npoptim.testing"),
                   "<step function>", "results").cases[0]
    return compare_case(case, result, "<step function>")


def assert_case(case, make_step, grad_format="csr", summary=False):
    """:func:`check_case`, raising ``AssertionError`` with the ``npoptim verify`` report
    (first divergence: step, array, element) when the case does not pass.

    Parameters
    ----------
    case : Case
        a golden case, as :func:`load_cases` returns it.
    make_step : callable
        ``make_step(params, hyperparameters) -> step``, the implementation under test
        (see the module docstring).
    grad_format : str, default: 'csr'
        how CSR gradients reach ``step``: ``"csr"``, ``"dense"`` or ``"raw"``.
    summary : bool, default: False
        a one-line report instead of the full one.
    """
    report = check_case(case, make_step, grad_format)
    if not report.passed:
        raise AssertionError(f"{case.id} does not match the golden case "
                             f"({case.source}):\n" + format_reports([report], summary=summary))
    return report


def npoptim_step(case):
    """npoptim's own ``make_step`` for ``case`` (a reference for the expected protocol).

    Parameters
    ----------
    case : Case
        a golden case, as :func:`load_cases` returns it.
    """
    return npoptim_make_step(case.optimizer, case.precision, case.wrapped)
