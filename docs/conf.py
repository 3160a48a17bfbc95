"""Sphinx configuration of npoptim's reference (``python -m sphinx -W -b html docs docs/_build/html``).

Pages generated here at build time, into ``docs/_generated`` (not committed): one page per
optimizer (its module docstring, the math, the class with its numpydoc Parameters section,
then the sections of ``docs/optimizer_pages.py``: the algorithm box, references, sparse kind,
flavors, an example, golden cases), one API page per public module (``docs/api_pages.py``), the CLI's ``--help`` texts,
the figures of the learning page (with matplotlib), the measured tables of the performance
page from the committed ``bench --json`` results (``docs/measurement_pages.py``), and the gallery of the worked examples
(sphinx-gallery runs each script of ``examples/teaching``).
MathJax is served from the build itself (``sphinx-mathjax-offline``), so the pages render
without internet access.
"""
import argparse
import importlib
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]  # npoptim, and docs/optimizer_pages.py
os.environ.setdefault("MPLBACKEND", "Agg")

import api_pages  # noqa: E402  (docs/api_pages.py)
import measurement_pages  # noqa: E402  (docs/measurement_pages.py)
import npoptim  # noqa: E402
import optimizer_pages  # noqa: E402  (docs/optimizer_pages.py)
from npoptim import registry  # noqa: E402

project = "npoptim"
author = "the npoptim developers"
copyright = "2026, the npoptim developers"  # as LICENSE says
release = version = npoptim.__version__
extensions = ["sphinx.ext.autodoc", "sphinx.ext.mathjax", "sphinx-mathjax-offline",
              "myst_parser", "numpydoc", "sphinx_gallery.gen_gallery"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "_generated/measurements"]  # included by performance.md
# The theme NumPy, SciPy and pandas use, so the pages read as theirs do.
html_theme = "pydata_sphinx_theme"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
html_static_path = ["_static"]
html_css_files = ["npoptim.css"]
autodoc_member_order = "bysource"
autodoc_default_options = {"show-inheritance": True}
myst_heading_anchors = 3
# The docstrings write option names inside \text{} as ``trust\_norm''; MathJax's textmacros
# (loaded from the build, like the rest of MathJax) typesets \_ and the quotes there.
mathjax3_config = {"loader": {"load": ["[tex]/textmacros"]},
                   "tex": {"packages": {"[+]": ["textmacros"]}}}
nitpicky = False
# numpydoc renders the Parameters sections; its own member tables would need autosummary.
numpydoc_show_class_members = False
numpydoc_xref_param_type = False
# numpydoc's validation, under -W: every optimizer class and wrapper documents each parameter
# of its constructor (PR01) and none it does not take (PR02), and so does every name the
# public modules' pages describe (docs/api_pages.py's PUBLIC, with the methods their pages
# document). Every other name (internal modules) is excluded.
numpydoc_validation_checks = {"PR01", "PR02"}
numpydoc_validation_exclude = {
    r"^(?!(" + "|".join([*(rf"{module}\.{name}" for name, (module, _) in
                           [*registry.OPTIMIZERS.items(), *registry.WRAPPERS.items()]),
                         *(name.replace(".", r"\.") for name in api_pages.validated_names())])
    + r")$)"}
# The golden-format page includes reference_results/README.md, whose links to files of the
# repository are not documents of this site, and whose JSON sketches elide with "...".
suppress_warnings = ["myst.xref_missing", "misc.highlighting_failure"]

GENERATED = HERE / "_generated"

# The worked examples as a gallery (sphinx-gallery): each script of examples/teaching runs once
# per build, its text cells rendered as prose, its printed output and matplotlib figures
# under its code; an assert that fails (or any error) fails the build. This build is where CI
# runs them (tests/test_teaching_examples.py checks their form, not their numbers).
sphinx_gallery_conf = {
    "examples_dirs": [str(ROOT / "examples" / "teaching")],
    "gallery_dirs": [str(GENERATED / "examples")],
    "filename_pattern": r"\.py$",  # run every script, not only plot_*.py
    "abort_on_example_error": True,
    "download_all_examples": False,
    "remove_config_comments": True,
    "min_reported_time": 60,  # no per-example timing table
    "write_computation_times": False,
    "show_memory": False,
    "reset_modules": ("matplotlib",),
}


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def _optimizer_pages():
    seen = set()
    names = []
    titled = [(name, module, name + (f" (torch.optim.{torch_name})" if torch_name else ""))
              for name, (module, torch_name) in registry.OPTIMIZERS.items()]
    titled += [(name, module, f"{name} (wrapper, {counterpart})")  # around an optimizer
               for name, (module, counterpart) in registry.WRAPPERS.items()]
    for name, module, title in titled:
        lines = [title, "=" * len(title), "", f".. automodule:: {module}", "   :no-members:"]
        if module in seen:  # a second optimizer of the same module (AdamW): no second target
            lines.append("   :no-index:")
        seen.add(module)
        lines += ["", "Class and parameters", "--------------------", "",
                  f".. autoclass:: {module}.{name}", ""]
        lines += optimizer_pages.sections(name)
        _write(GENERATED / "optimizers" / f"{name}.rst", "\n".join(lines))
        names.append(name)
    toc = ["Optimizers", "==========", "",
           "One page per optimizer: the algorithm as its module documents it, the class and its",
           "parameters, the algorithm box, its references, its sparse kind, its flavors, an",
           "example, its golden cases; the wrappers (built around an optimizer) last.",
           "", ".. toctree::", "   :maxdepth: 1", ""]
    toc += [f"   optimizers/{n}" for n in names]
    _write(GENERATED / "optimizers.rst", "\n".join(toc) + "\n")


def _api_pages():
    """One page per public module (docs/api_pages.py), and the API index."""
    for module in api_pages.PUBLIC:
        _write(GENERATED / "api" / f"{module}.rst", api_pages.page(module))
    _write(GENERATED / "api_index.txt", api_pages.index())  # docs/api.rst includes it


def _cli_page():
    from npoptim.cli import COMMANDS
    lines = ["Command line", "============", "",
             "``python -m npoptim COMMAND`` (or the ``npoptim`` console script). Each command's",
             "``--help``:", ""]
    for name, (module_name, help_) in COMMANDS.items():
        parser = argparse.ArgumentParser(prog=f"npoptim {name}", description=help_)
        importlib.import_module(module_name).add_arguments(parser)
        text = parser.format_help()
        lines += [f"npoptim {name}", "-" * (len(name) + 8), "", "::", ""]
        lines += ["    " + line if line else "" for line in text.splitlines()] + [""]
    _write(GENERATED / "cli.rst", "\n".join(lines))


def _figures():
    """The learning page's figures (needs matplotlib, the docs extra installs it)."""
    from npoptim.plotting import figures
    from npoptim.teaching import compare, get_problem
    out = GENERATED / "figures"
    out.mkdir(parents=True, exist_ok=True)
    rosenbrock = get_problem("rosenbrock").with_layers((1, 1))
    runs = compare(rosenbrock, ["SGD", "Adam", "RMSprop", "LAMB"])
    figures.save(figures.overview(rosenbrock, runs), out / "rosenbrock.png")
    d2l = get_problem("d2l_quadratic")
    from npoptim.teaching.trajectory import optimizer_factory, trajectory
    from npoptim.theory import momentum
    alpha, beta = momentum.optimal_parameters(0.2, 4.0)
    momentum_runs = [trajectory(optimizer_factory("SGD", lr=0.4), d2l, name="SGD lr 0.4"),
                     trajectory(optimizer_factory("SGD", lr=0.4, momentum=0.5), d2l,
                                name="SGD lr 0.4, momentum 0.5"),
                     trajectory(optimizer_factory("SGD", lr=alpha, momentum=beta), d2l,
                                name=f"optimal lr {alpha:.3f}, momentum {beta:.3f}")]
    figures.save(figures.paths(d2l, momentum_runs), out / "d2l_momentum.png")
    figures.save(figures.phase_diagram(), out / "momentum_phase.png")
    least = get_problem("least_squares")
    warm = compare(least, ["AdamW", "SGD"], schedule="warmup-cosine", steps=100)
    figures.save(figures.learning_rates(warm), out / "warmup_cosine.png")


_optimizer_pages()
_api_pages()
_cli_page()
_figures()
measurement_pages.write(GENERATED)
