"""The build: setup.cfg holds the metadata; this file adds the golden suite to the package.

A wheel (and an install from an sdist) carries ``reference_results/`` as
``npoptim/golden/suite.zip``, written by :func:`npoptim.golden.suite.write_archive` (loaded by
file: numpy and npoptim need not be importable while building). An editable install reads the
checkout's ``reference_results/`` directly and gets no archive.
"""
import importlib.util
import pathlib
import re

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).resolve().parent


def _suite_module():
    spec = importlib.util.spec_from_file_location("_npoptim_suite",
                                                  HERE / "npoptim" / "golden" / "suite.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _version():
    text = (HERE / "npoptim" / "__init__.py").read_text(encoding="utf-8")
    return re.search(r'^__version__ = "([^"]+)"', text, re.M).group(1)


class BuildWithSuite(build_py):
    """``build_py`` that also writes the golden suite's archive into the built package."""

    def run(self):
        super().run()
        if not getattr(self, "editable_mode", False):
            target = pathlib.Path(self.build_lib) / "npoptim" / "golden" / "suite.zip"
            _suite_module().write_archive(HERE / "reference_results", target, _version())


setup(cmdclass={"build_py": BuildWithSuite})
