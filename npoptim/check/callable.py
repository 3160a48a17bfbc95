"""A Python ``make_step`` in :mod:`npoptim.testing`'s protocol as the implementation checked.

``make_step(params, hyperparameters)`` gets fresh copies of a case's parameters and its
hyperparameters (torch's names, or a flavor case's npoptim names) and returns
``step(grads, lr)`` (see :mod:`npoptim.testing`); CSR gradients come in the ``grad_format``
asked for (``"csr"``: ``scipy.sparse.csr_array`` with the entries as stored, ``"dense"``,
``"raw"``). It may raise :class:`npoptim.golden.replay.Refused` for a case it cannot run.
"""
from npoptim.check.spec import UsageError


def check_function(fn, flag="--callable"):
    """``fn`` if it is callable, else :class:`UsageError`."""
    if not callable(fn):
        raise UsageError(f"{flag}: {fn!r} is not callable (a make_step(params, "
                         "hyperparameters) -> step(grads, lr), see npoptim.testing)")
    return fn
