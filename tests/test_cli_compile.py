"""``npoptim compile``: the kernels of the golden cases compiled into Numba's cache."""
import os
import subprocess
import sys
from pathlib import Path

from npoptim.cli import compile as compile_command
from npoptim.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_shares_deal_every_name_once():
    names = list("abcdefg")
    assert compile_command.shares(names, 3) == [["a", "d", "g"], ["b", "e"], ["c", "f"]]
    assert compile_command.shares(names[:2], 4) == [["a"], ["b"]]
    assert sorted(sum(compile_command.shares(names, 2), [])) == names


def test_two_processes_fill_an_empty_cache(tmp_path):
    """--jobs 2 over two optimizers: both processes succeed and the cache then holds their
    kernels (dense Signum and Lion steps in a third process compile nothing new)."""
    cache = tmp_path / "cache"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, "-m", "npoptim", "compile", "--jobs", "2",
                          "--optimizer", "Signum", "--optimizer", "Lion"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "the kernels of 2 optimizers" in out.stdout and "(2 processes)" in out.stdout
    kernels = {p.name.split(".py")[0] for p in cache.rglob("*.nbi")}
    assert any(name.startswith("sign.") for name in kernels), kernels
    assert any(name.startswith("lion.") for name in kernels), kernels
    probe = ("import numpy as np, npoptim\n"
             "from numba.core import event\n"
             "seen = []\n"
             "class L(event.Listener):\n"
             "    def on_start(self, ev): seen.append(ev.data['dispatcher'].py_func.__name__)\n"
             "    def on_end(self, ev): pass\n"
             "event.register('numba:compile', L())\n"
             "for name, kw in (('Signum', dict(lr=0.1)), ('Lion', dict(lr=0.1))):\n"
             "    for dtype in (np.float32, np.float64):\n"
             "        p = np.ones(5, dtype)\n"
             "        getattr(npoptim, name)([p], **kw).step([np.ones(5, dtype)])\n"
             "print(seen)\n")
    probe_out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=600)
    assert probe_out.returncode == 0, probe_out.stderr
    assert probe_out.stdout.strip() == "[]", probe_out.stdout


def test_bad_arguments_are_refused(capsys):
    assert main(["compile", "--optimizer", "Adamm"]) == 2
    assert "no golden cases for 'Adamm'" in capsys.readouterr().err
    assert main(["compile", "--jobs", "0", "--optimizer", "SGD"]) == 2
    assert "--jobs must be at least 1" in capsys.readouterr().err
