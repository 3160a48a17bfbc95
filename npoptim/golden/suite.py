"""Where the golden suite is: ``reference_results/`` of a checkout, or the copy a wheel carries.

``reference_results/`` (at the top of the repository) is the one source of the suite. A wheel or
an sdist built from a checkout carries it as ``npoptim/golden/suite.zip``, written at build
time (``setup.py``: the suite's files, deflate-compressed, with a manifest of their SHA-256);
an installed npoptim extracts it once into a cache directory and reads the files there, so
``npoptim verify``, ``npoptim diagnose``, ``npoptim suite`` and
:func:`npoptim.testing.load_cases` find it from any working directory. :func:`suite_path`
decides, in this order: the environment variable ``NPOPTIM_SUITE`` (a directory), the
``reference_results/`` of the checkout this npoptim runs from, the packaged archive.

This module imports only the standard library at its top: ``setup.py`` loads it by file to
write the archive, before numpy or npoptim can be imported.
"""
import hashlib
import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

#: The archive a built npoptim carries (absent in a checkout and an editable install).
ARCHIVE = Path(__file__).with_name("suite.zip")
#: The checkout's suite, next to the ``npoptim`` package.
CHECKOUT = Path(__file__).resolve().parents[2] / "reference_results"
#: The archive's manifest: ``{"files": {path: sha256}, "version": ...}``.
MANIFEST = "manifest.json"
#: What the archive holds of ``reference_results/``.
PATTERNS = ("README.md", "golden.schema.json", "provenance.json", "cases/**/*.json")


def suite_files(source):
    """The files of the suite under ``source`` (a ``reference_results`` directory), sorted."""
    source = Path(source)
    found = {p for pattern in PATTERNS for p in source.glob(pattern) if p.is_file()}
    return sorted(found, key=lambda p: p.relative_to(source).as_posix())


def write_archive(source, target, version):
    """Write the suite under ``source`` to the zip ``target``, with its manifest."""
    files = suite_files(source)
    if not any(p.parent.name == "cases" for p in files):
        raise FileNotFoundError(f"{source}: no cases/ (not a reference_results directory)")
    manifest = {"version": version, "files": {}}
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for path in files:
            name = path.relative_to(source).as_posix()
            data = path.read_bytes()
            manifest["files"][name] = hashlib.sha256(data).hexdigest()
            archive.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)), data,
                             zipfile.ZIP_DEFLATED)
        archive.writestr(zipfile.ZipInfo(MANIFEST, date_time=(2026, 1, 1, 0, 0, 0)),
                         json.dumps(manifest, indent=1, sort_keys=True))
    return target


def cache_root():
    """Where an installed npoptim extracts its suite: ``$XDG_CACHE_HOME/npoptim`` (or
    ``~/.cache/npoptim``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "npoptim"


def extract(archive=ARCHIVE, root=None):
    """The directory holding ``archive``'s suite, extracted on first use into ``root`` (default
    :func:`cache_root`) under a name made of the archive's hash; each file is checked against
    the manifest, and a partial extraction never takes the final name."""
    archive = Path(archive)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()[:16]
    root = Path(root) if root is not None else cache_root()
    final = root / f"suite-{digest}"
    if (final / MANIFEST).is_file():
        return final
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".suite-", dir=root))
    try:
        with zipfile.ZipFile(archive) as zf:
            manifest = json.loads(zf.read(MANIFEST))
            for name, sha in manifest["files"].items():
                parts = PurePosixPath(name).parts
                if PurePosixPath(name).is_absolute() or ".." in parts:
                    raise ValueError(f"{archive}: unsafe member name {name!r}")
                data = zf.read(name)
                if hashlib.sha256(data).hexdigest() != sha:
                    raise ValueError(f"{archive}: {name} does not match its manifest")
                out = work.joinpath(*parts)
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(data)
            (work / MANIFEST).write_bytes(zf.read(MANIFEST))
        try:
            work.rename(final)
        except OSError:  # another process extracted it first
            if not (final / MANIFEST).is_file():
                raise
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return final


def suite_path():
    """The directory of the golden suite: ``$NPOPTIM_SUITE``, else the checkout's
    ``reference_results/``, else the archive this npoptim was built with, extracted."""
    given = os.environ.get("NPOPTIM_SUITE")
    if given:
        if not Path(given, "cases").is_dir():
            raise FileNotFoundError(f"NPOPTIM_SUITE={given}: no cases/ there")
        return Path(given)
    if (CHECKOUT / "cases").is_dir():
        return CHECKOUT
    if ARCHIVE.is_file():
        return extract()
    raise FileNotFoundError("no golden suite: this npoptim is neither a checkout (no "
                            "reference_results/ beside the package) nor built with one (no "
                            f"{ARCHIVE.name}); pass a path, or set NPOPTIM_SUITE")


def where():
    """What :func:`suite_path` chose, in words."""
    if os.environ.get("NPOPTIM_SUITE"):
        return "NPOPTIM_SUITE"
    if (CHECKOUT / "cases").is_dir():
        return "the checkout's reference_results/"
    return f"the archive built into npoptim ({ARCHIVE}), extracted"


def export(target, source=None):
    """Copy the suite's files (plain JSON) to the directory ``target``; returns their count."""
    source = Path(source) if source is not None else suite_path()
    target = Path(target)
    files = suite_files(source)
    for path in files:
        out = target / path.relative_to(source)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, out)
    return len(files)
