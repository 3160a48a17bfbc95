"""npoptim.kernels.cache_lock: processes that compile at once share Numba's cache safely.

Each test writes a small module with one cached function into a temporary directory and runs
processes against a fresh NUMBA_CACHE_DIR, with npoptim imported (which installs the lock).
Without the lock (the worker's mode "nolock"), the stress test's check loaded another
signature's code in 1 of 4 rounds (2026-12-07, 2-core AMD EPYC): the race is real, but too
rare in a few rounds to be a test of its own.
"""
import os
import subprocess
import sys
import textwrap
import time

import pytest

MODULE = textwrap.dedent('''
    import numpy as np
    from numba import njit

    @njit(cache=True)
    def twice(x):
        return x + x
''')

# Each process compiles its own signatures of `twice` (the same N in the index for each if they
# save at once), in an order of its own, then checks every result: a signature that loaded
# another signature's machine code crashes or returns a wrong value.
WORKER = textwrap.dedent('''
    import sys
    if sys.argv[1] == "lock":
        import npoptim  # installs the lock
    import numpy as np
    sys.path.insert(0, sys.argv[2])
    from cached_module import twice
    values = [np.int64(3), np.float64(1.5), np.float32(2.5), np.arange(3, dtype=np.int32),
              np.ones(2), np.ones((2, 2), np.float32), np.int16(7), np.complex128(1j)]
    order = [int(i) for i in sys.argv[3].split(",")]
    for i in order:
        out = twice(values[i])
        assert np.all(out == values[i] + values[i]), (i, out)
        if isinstance(values[i], np.ndarray):
            assert out.dtype == values[i].dtype, (i, out)
    print("ok")
''')


def _run_together(tmp_path, mode, rounds):
    """``rounds`` times: a fresh cache, four processes compiling at once, then a fifth that
    loads every signature from the cache; the outputs of the fifth."""
    (tmp_path / "cached_module.py").write_text(MODULE)
    (tmp_path / "worker.py").write_text(WORKER)
    orders = ["0,1,2,3,4,5,6,7", "7,6,5,4,3,2,1,0", "1,3,5,7,0,2,4,6", "6,4,2,0,7,5,3,1"]
    failures = []
    for r in range(rounds):
        cache = tmp_path / f"cache{r}"
        env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
        procs = [subprocess.Popen([sys.executable, str(tmp_path / "worker.py"), mode,
                                   str(tmp_path), order], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for order in orders]
        for p in procs:
            p.communicate(timeout=300)
        check = subprocess.run([sys.executable, str(tmp_path / "worker.py"), mode,
                                str(tmp_path), orders[0]], env=env, capture_output=True,
                               text=True, timeout=300)
        if check.returncode != 0:
            failures.append(check.stderr.strip().splitlines()[-1:])
    return failures


def test_processes_compiling_at_once_leave_a_cache_every_process_loads_right(tmp_path):
    assert _run_together(tmp_path, "lock", rounds=1) == []


def test_a_save_waits_for_the_lock(tmp_path):
    """While this process holds the cache directory's lock, another process cannot write a
    compiled function into that directory; it writes it once the lock is released."""
    fcntl = pytest.importorskip("fcntl", reason="no flock on this system: nothing is locked")
    from npoptim.kernels.cache_lock import LOCK_NAME

    (tmp_path / "cached_module.py").write_text(MODULE)
    (tmp_path / "worker.py").write_text(WORKER)
    cache = tmp_path / "cache"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    # a first run creates the cache directory of the module (its path depends on Numba's rules)
    subprocess.run([sys.executable, str(tmp_path / "worker.py"), "lock", str(tmp_path), "0"],
                   env=env, check=True, capture_output=True, timeout=300)
    index = next(cache.rglob("*.nbi"))
    before = index.stat().st_mtime_ns
    with open(index.parent / LOCK_NAME, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        proc = subprocess.Popen([sys.executable, str(tmp_path / "worker.py"), "lock",
                                 str(tmp_path), "1"], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(8)  # the import, then its compile of float64; then it waits for the lock
        assert proc.poll() is None, proc.communicate()
        assert index.stat().st_mtime_ns == before
        fcntl.flock(handle, fcntl.LOCK_UN)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert index.stat().st_mtime_ns != before
