"""Numba's on-disk cache, made safe for processes that compile at once.

Numba keeps a function's compiled signatures in one index file (``name.nbi``: signature ->
data file ``name.N.nbc``) per cache directory. Saving a new signature reads the index, takes
the first free ``N``, writes the index, then the data. Two processes that compile two
signatures of one function at the same time can both take the same ``N``: the index then names
one signature's file while it holds the other's code, and a later process loads the wrong
machine code for its arguments (seen as "can't unbox array" in a cold-cache run of the tests
on two pytest-xdist workers; numba/numba#10128 is a sibling of this race, and a file lock is
the fix Numba's developers suggested there). A process pool or a set of Dask workers that
first use npoptim together runs into the same race. Four processes compiling eight signatures
of one function into an empty cache, then a fifth loading them all: without the lock, the
fifth got another signature's code in 1 of 4 rounds; with it, in none
(``tests/test_cache_lock.py``, 2026-12-07, 2-core AMD EPYC).

:func:`install` wraps Numba's cache file methods once per process: a save holds an exclusive
lock on ``numba-cache.lock`` in the cache directory (so a save reads the index its
predecessor wrote and writes the index and the data before another starts), and a load holds
a shared one (so it never sees an index whose data file is not written yet). The locks are
advisory ``flock`` locks, released when the process dies; where ``fcntl`` is missing (Windows)
nothing is locked and the cache behaves as Numba's own. It changes no compiled code and no
result, only who writes the cache when.
"""
import contextlib
import os

try:
    import fcntl
except ImportError:  # Windows: Numba's cache as it is
    fcntl = None

from numba.core import caching

LOCK_NAME = "numba-cache.lock"


@contextlib.contextmanager
def _locked(cache_path, mode):
    """Hold ``flock(mode)`` on the lock file of the cache directory ``cache_path``."""
    try:
        handle = open(os.path.join(cache_path, LOCK_NAME), "a+b")
    except OSError:  # an unwritable directory: Numba's own behaviour, nothing to lock
        yield
        return
    with handle:
        fcntl.flock(handle, mode)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def install():
    """Wrap :class:`numba.core.caching.IndexDataCacheFile`'s ``save`` and ``load`` with the
    cache directory's lock (see the module docstring); a second call does nothing."""
    cls = caching.IndexDataCacheFile
    if fcntl is None or getattr(cls, "_npoptim_locked", False):
        return
    save, load = cls.save, cls.load

    def locked_save(self, key, data):
        with _locked(self._cache_path, fcntl.LOCK_EX):
            return save(self, key, data)

    def locked_load(self, key):
        with _locked(self._cache_path, fcntl.LOCK_SH):
            return load(self, key)

    cls.save, cls.load = locked_save, locked_load
    cls._npoptim_locked = True
