"""The golden suite found from anywhere: a checkout's reference_results/, or the archive a
built npoptim carries (npoptim/golden/suite.py, written by setup.py's build_py)."""
import json
import os
import pathlib
import subprocess
import sys
import zipfile

import pytest

from npoptim.golden import suite, verify as verification
from npoptim.golden.schema import load_all

ROOT = pathlib.Path(__file__).resolve().parents[1]
SUITE = ROOT / "reference_results"


def _same_tree(a, b):
    names = [p.relative_to(a).as_posix() for p in suite.suite_files(a)]
    assert names == [p.relative_to(b).as_posix() for p in suite.suite_files(b)]
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    return names


def test_the_archive_holds_the_suite_byte_for_byte_and_extracts_once(tmp_path):
    archive = suite.write_archive(SUITE, tmp_path / "suite.zip", "test")
    assert archive.stat().st_size <= 14e6   # the wheel's budget is 15 MB
    first = suite.extract(archive, tmp_path / "cache")
    names = _same_tree(SUITE, first)
    assert "cases/Adam.json" in names and "README.md" in names
    stamp = (first / "cases" / "Adam.json").stat().st_mtime_ns
    assert suite.extract(archive, tmp_path / "cache") == first          # not extracted again
    assert (first / "cases" / "Adam.json").stat().st_mtime_ns == stamp
    assert len(load_all(first, kind="cases")) == len(load_all(SUITE, kind="cases"))


def test_a_damaged_archive_is_refused_before_anything_is_read(tmp_path):
    archive = suite.write_archive(SUITE, tmp_path / "suite.zip", "test")
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(archive) as src, zipfile.ZipFile(bad, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "cases/SGD.json":
                data = data.replace(b'"lr"', b'"LR"', 1)
            dst.writestr(info, data)
    with pytest.raises(ValueError, match="cases/SGD.json does not match its manifest"):
        suite.extract(bad, tmp_path / "cache")
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.startswith("suite-")]


def test_suite_path_is_the_checkout_or_what_npoptim_suite_names(monkeypatch, tmp_path):
    monkeypatch.delenv("NPOPTIM_SUITE", raising=False)
    assert suite.suite_path() == SUITE
    monkeypatch.setenv("NPOPTIM_SUITE", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="no cases/ there"):
        suite.suite_path()
    assert suite.export(tmp_path, SUITE) == len(suite.suite_files(SUITE))
    assert suite.suite_path() == tmp_path
    _same_tree(SUITE, tmp_path)


@pytest.mark.needs("setuptools")
def test_a_built_npoptim_finds_its_suite_from_an_empty_directory(tmp_path):
    """setup.py's build_py writes the archive; run from an empty directory with only the built
    package on the path, npoptim suite, verify and testing.load_cases find the suite."""
    build = tmp_path / "build"
    subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(build)],
                   cwd=ROOT, check=True, capture_output=True)
    assert (build / "npoptim" / "golden" / "suite.zip").is_file()
    empty = tmp_path / "empty"
    empty.mkdir()
    env = dict(os.environ, PYTHONPATH=str(build), XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("NPOPTIM_SUITE", None)

    def npoptim(*argv):
        return subprocess.run([sys.executable, "-m", "npoptim", *argv], cwd=empty, env=env,
                              capture_output=True, text=True)
    out = npoptim("suite", "--json")
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["from"].startswith("the archive built into npoptim")
    assert info["cases"] == len(load_all(SUITE, kind="cases"))
    out = npoptim("verify", "--case", "SignSGD/*/float64", "--summary")
    assert out.returncode == 0 and "OK: all" in out.stdout, out.stdout + out.stderr
    code = ("from npoptim import testing; "
            "print(len(testing.load_cases(optimizer='SignSGD')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=empty, env=env, capture_output=True,
                         text=True)
    assert out.returncode == 0 and int(out.stdout) > 0, out.stderr


def test_without_ml_dtypes_the_bfloat16_files_are_left_out_and_said_so(monkeypatch, capsys):
    """A bare install (no npoptim[bf16]) verifies and describes the rest of the suite; the
    files it cannot read are named with the extra that reads them."""
    from npoptim.cli import main
    from npoptim.golden import compare
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)   # import ml_dtypes fails
    with pytest.raises(ImportError, match="npoptim\\[bf16\\]"):
        load_all(SUITE, kind="cases")
    reports, notes = verification.verify(SUITE, optimizers=["SignSGD"])
    assert reports and all(r.passed for r in reports)
    assert any("case files not read" in n and "npoptim[bf16]" in n for n in notes), notes
    assert main(["suite"]) == 0
    assert "files not read here" in capsys.readouterr().out
    from npoptim import testing
    with pytest.warns(UserWarning, match="case files not read .*npoptim\\[bf16\\]"):
        assert testing.load_cases(SUITE, optimizer="SignSGD")
