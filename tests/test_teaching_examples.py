"""The scripts in examples/teaching are a sphinx-gallery: the docs build runs each of them once
(``sphinx_gallery_conf`` in docs/conf.py; CI's docs build in .ci/run), and a failing assert
fails the build. Here: that they are all there, in the gallery's form, and that the build is
set up to run every one (running them again here would run each twice in CI)."""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples" / "teaching").glob("*.py"))


def test_the_eight_examples_are_there():
    assert {p.stem for p in EXAMPLES} >= {
        "adam_by_hand", "eps_placement", "momentum_ill_conditioned", "lamb_variants",
        "warmup_cosine", "lazy_sparse_adam", "adamw_decoupled_vs_l2", "second_order_rotated"}


def test_each_example_is_a_gallery_script_that_asserts_what_it_prints():
    """A docstring with a reST title first (the gallery's page title and prose), then ``# %%``
    cells; it prints and asserts."""
    for path in EXAMPLES:
        text = path.read_text()
        docstring = ast.get_docstring(ast.parse(text))
        assert text.startswith('"""') and docstring, path.name
        title, underline = docstring.splitlines()[:2]
        assert underline == "=" * len(title), path.name
        assert "\n# %%\n" in text and "\nassert " in text and "print(" in text, path.name
        assert "[markdown]" not in text, path.name  # text cells are the gallery's: # %% + #


def test_the_docs_build_runs_every_example_and_fails_on_a_failing_one():
    conf = (ROOT / "docs" / "conf.py").read_text()
    assert '"sphinx_gallery.gen_gallery"' in conf
    assert '"examples_dirs": [str(ROOT / "examples" / "teaching")]' in conf
    assert '"abort_on_example_error": True' in conf
    pattern = re.search(r'"filename_pattern": r"(.*?)"', conf).group(1)
    assert all(re.search(pattern, str(path)) for path in EXAMPLES)
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^python -m sphinx -W .* docs docs/_build/html$", ci, re.M)
    assert '"sphinx-gallery==' in ci
