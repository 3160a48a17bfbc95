"""The docs: the raw-TeX checker CI runs on the built HTML, the offline-MathJax setup, the pages
moved from the README, and the optimizer pages (numpydoc Parameters, examples, references)."""
import importlib.util
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _checker():
    spec = importlib.util.spec_from_file_location("check_html", DOCS / "check_html.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LOCAL = '<script defer src="../_static/mathjax/tex-chtml.js"></script>'


@pytest.mark.parametrize("html", [
    r'<p>rate <span class="math notranslate nohighlight">\(\sqrt{\beta}\)</span></p>' + LOCAL,
    r'<div class="math notranslate nohighlight">\[\frac{m}{\sqrt{v} + \epsilon}\]</div>' + LOCAL,
    r'<p>plain text, a path C:/x and $5</p><pre>s = "\n\t"</pre>',
    r'<p><img src="a.png"><br>fine</p><script>var a = "\\frac";</script>',
])
def test_checker_accepts_rendered_math_and_code(html):
    problems, _ = _checker().check_page(html)
    assert problems == []


@pytest.mark.parametrize("html, what", [
    (r"<p>the update \frac{m}{\sqrt{v}}</p>", r"\frac"),
    (r"<p>inline \(x\) not marked as math</p>", r"\("),
    (r"<p>display $$x^2$$</p>", "$$"),
    ("<p>a role left as text: :math:`x`</p>", ":math:`"),
    (r'<p><span class="math">\(x\)</span> then \beta outside</p>' + LOCAL, r"\beta"),
    (r'<div class="math">\[x\]</div><script src="https://cdn.jsdelivr.net/mathjax/tex.js">'
     "</script>", "cdn.jsdelivr"),
    (r'<div class="math">\[x\]</div>', "loads no MathJax"),
])
def test_checker_finds_raw_tex_and_online_mathjax(html, what):
    problems, _ = _checker().check_page(html)
    assert problems and what in " ".join(problems)


def test_checker_on_a_tree(tmp_path, capsys):
    checker = _checker()
    (tmp_path / "good.html").write_text(r'<span class="math">\(x\)</span>' + LOCAL)
    assert checker.main([str(tmp_path)]) == 0
    (tmp_path / "bad.html").write_text(r"<p>\alpha</p>")
    assert checker.main([str(tmp_path)]) == 1
    assert "bad.html" in capsys.readouterr().err
    assert checker.main([str(tmp_path / "empty")]) == 1


def test_conf_uses_offline_mathjax_and_every_optimizer_gets_a_page():
    text = (DOCS / "conf.py").read_text()
    assert '"sphinx-mathjax-offline"' in text and "mathjax_path" not in text
    assert '"[tex]/textmacros"' in text  # \_ and quotes inside \text{} in the docstrings
    assert "registry.OPTIMIZERS.items()" in text and "_optimizer_pages()" in text
    assert "_generated/optimizers" in (DOCS / "index.rst").read_text()


PAGES = sorted(p for p in DOCS.glob("*.md")) + sorted(p for p in DOCS.glob("*.rst"))


def test_every_page_is_in_the_toctree():
    toctree = (DOCS / "index.rst").read_text().split(".. toctree::")[1].split()
    missing = [p.stem for p in PAGES if p.stem != "index" and p.stem not in toctree]
    assert not missing, missing


def test_relative_links_of_the_markdown_pages_resolve():
    """A link on a .md page names a page or file relative to docs/ (``page.md#anchor`` too)."""
    import re
    bad = []
    for page in DOCS.glob("*.md"):
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if not (DOCS / target.split("#")[0]).exists():
                bad.append((page.name, target))
    assert not bad, bad


#: the pages that hold what the README carried before it became a front page (issue 27)
FROM_THE_README = ["sparse", "wrappers", "schedulers", "teaching", "checking", "flavors",
                   "precision", "checkpoints", "big-tables", "performance", "guarantees"]


def test_no_table_cell_over_400_characters():
    """Issue 27: a long cell of the README's tables is prose or a list on its docs page, not a
    table cell to scroll through. (developing.md's map of the tree is not one of them.)"""
    import re
    long = [(page.name, cell[:60]) for page in (DOCS / f"{n}.md" for n in FROM_THE_README)
            for line in page.read_text().splitlines() if line.startswith("|")
            for cell in re.split(r"(?<!\\)\|", line) if len(cell.strip()) > 400]
    assert not long, long


def test_measurement_logs_carry_their_date():
    """Every section of the performance page with a table says when it was measured; the page
    says the tables are dated logs (the docs build runs no benchmark)."""
    import re
    text = (DOCS / "performance.md").read_text()
    assert "measurement logs" in text
    for section in re.split(r"\n## ", text):
        if "\n|" in section:
            before_table = section.split("\n|")[0]
            assert re.search(r"20\d\d-\d\d-\d\d", before_table), section.splitlines()[0]


def test_wrappers_page_gives_the_real_defaults():
    """The wrappers' calls written on their page (Mechanic's num_betas=None, not 6) have the
    keywords and defaults of the classes."""
    import ast
    import inspect
    import re
    import npoptim
    text = (DOCS / "wrappers.md").read_text()
    calls = re.findall(r"`npoptim\.(Lookahead|SAM|Mechanic)\((.*?)\)`", text)
    assert sorted(name for name, _ in calls) == ["Lookahead", "Mechanic", "SAM"]
    for name, args in calls:
        written = {k.arg: ast.literal_eval(k.value)
                   for k in ast.parse(f"f({args})").body[0].value.keywords}
        real = inspect.signature(getattr(npoptim, name)).parameters
        assert written == {k: real[k].default for k in written}, name


def test_developing_guide_names_the_switches_and_the_docs_build_ci_runs():
    import re
    text = (DOCS / "developing.md").read_text()
    root = DOCS.parent
    ci = (root / ".ci" / "run").read_text()
    conftest = (root / "tests" / "conftest.py").read_text()
    for switch in ("NPOPTIM_BLOCK_OPTIONAL", "NPOPTIM_REQUIRE_"):
        assert switch in text and switch in conftest + ci, switch
    for line in re.findall(r"^    (python (?:-m sphinx|docs/check_html).*)$", text, re.M):
        assert line in ci, line


def test_cli_help_is_plain_text():
    """``npoptim --help`` and the one-line helps (also on the CLI page) carry no reST markup."""
    import contextlib
    import io
    from npoptim.cli import COMMANDS, main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--help"]) == 0
    texts = [out.getvalue()] + [help_ for _, help_ in COMMANDS.values()]
    for text in texts:
        assert "``" not in text and ":math:" not in text and ":class:" not in text, text
    assert "CSR rows" not in COMMANDS["demo"][1]


def _optimizer_classes():
    from npoptim import registry
    return [(name, module) for name, (module, _) in
            [*registry.OPTIMIZERS.items(), *registry.WRAPPERS.items()]]


@pytest.mark.needs("numpydoc")
@pytest.mark.parametrize("name, module", _optimizer_classes())
def test_optimizer_documents_exactly_its_constructor_parameters(name, module):
    """Issue 27: each optimizer's and wrapper's class docstring has a numpydoc Parameters
    section naming every constructor parameter and no other (numpydoc's checks PR01 and PR02,
    which the docs build runs under -W), and each default it writes is the constructor's."""
    import importlib
    import inspect
    from numpydoc.docscrape import NumpyDocString
    from numpydoc.validate import validate
    from npoptim.optim.options import VARIANT_DEFAULT
    errors = [e for e in validate(f"{module}.{name}")["errors"] if e[0] in ("PR01", "PR02")]
    assert not errors, errors
    cls = getattr(importlib.import_module(module), name)
    signature = inspect.signature(cls).parameters
    for entry in NumpyDocString(inspect.getdoc(cls))["Parameters"]:
        if ", default: " not in entry.type:
            assert all(signature[n].default is inspect.Parameter.empty or entry.type == "ignored"
                       for n in entry.name.split(", ")), entry.name
            continue
        written = entry.type.split(", default: ")[1]
        default = signature[entry.name].default
        assert written == ("the variant's" if default is VARIANT_DEFAULT else repr(default)), \
            (entry.name, written, default)


def _pages():
    spec = importlib.util.spec_from_file_location("optimizer_pages", DOCS / "optimizer_pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name, module", _optimizer_classes())
def test_every_generated_example_runs_and_moves_the_parameter(name, module, capsys):
    """Issue 27: the example on each optimizer's page runs as written and takes a step (ADOPT's
    first step only sets its second moment: its parameter moves from the second on)."""
    import numpy as np
    code = _pages().example(name)
    namespace = {}
    exec(compile(code, f"<example of {name}>", "exec"), namespace)
    param = namespace["param"]
    assert np.all(np.isfinite(param))
    assert np.array_equal(param, [[1.0, -2.0], [0.5, 3.0]]) == (name == "ADOPT"), name
    assert capsys.readouterr().out.strip()


@pytest.mark.parametrize("name", ["Adam", "Sophia", "LBFGS", "DPSGD"])
def test_the_explain_command_of_a_page_runs(name, capsys):
    """The ``npoptim explain`` line of a page is a command that works (Sophia's needs its
    Hessian estimate from the gradient: the page says so)."""
    from npoptim.cli import main
    command = _pages().explain_command(name).split()
    assert command[:2] == ["npoptim", "explain"]
    assert main(command[1:]) == 0
    assert name in capsys.readouterr().out


def test_each_page_names_its_sparse_kind_flavors_and_golden_file():
    from npoptim import flavors, registry
    pages = _pages()
    for name, module in _optimizer_classes():
        text = "\n".join(pages.sections(name))
        cls = registry.get_wrapper(name) if registry.is_wrapper(name) else registry.get(name)
        assert f"Sparse kind ``{cls.sparse_kind}``" in text
        assert f"reference_results/cases/{name}.json" in text
        if name in flavors.FLAVORED:
            for flavor in flavors.FLAVORS.values():
                if flavor.name != "torch" and name in flavor.switches:
                    assert f'flavor="{flavor.name}"' in text, (name, flavor.name)


def test_every_optimizer_has_references_that_its_module_agrees_with():
    """Issue 27: each page links its paper and the code it follows (registry.REFERENCES); an
    arXiv paper is one its module docstring cites, where the docstring cites arXiv numbers."""
    import re
    from npoptim import registry
    names = [name for name, _ in _optimizer_classes()]
    assert sorted(registry.REFERENCES) == sorted(names)
    for name, module in _optimizer_classes():
        paper, code = registry.REFERENCES[name]
        assert paper is None or re.match(r"https://\S+$", paper), name
        assert code is None or re.match(r"https://github\.com/[\w.-]+/[\w.-]+/blob/[\w.-]+/\S+$",
                                        code), name
        cited = re.findall(r"arXiv\s+(\d{4}\.\d{4,5})", importlib.import_module(module).__doc__)
        if paper and paper.startswith("https://arxiv.org/abs/") and cited:
            assert paper.rsplit("/", 1)[1] in cited, (name, paper, cited)


def _api_pages():
    spec = importlib.util.spec_from_file_location("api_pages", DOCS / "api_pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_public_name_is_on_an_api_page_with_a_docstring():
    """Issue 27: each name in the ``__all__`` of a public module is documented on its module's
    page (or linked there to where it is documented), and every class and function has a
    docstring; the public modules are the API index's, every one with an ``__all__``."""
    import inspect
    api = _api_pages()
    rows = api.entries()
    assert {module for module, *_ in rows} == set(api.PUBLIC)
    described = {f"{module}.{name}" for module, name, _, _, target in rows if target is None}
    undocumented = [f"{module}.{name}" for module, name, obj, kind, target in rows
                    if kind in ("class", "exception", "function") and not inspect.getdoc(obj)]
    assert not undocumented, undocumented
    for module in api.PUBLIC:
        text = api.page(module)
        for _, name, _, kind, target in (row for row in rows if row[0] == module):
            assert (f":: {module}.{name}\n" in text if target is None
                    else target in text), (module, name)
    assert set(api.VALIDATED) <= set(api.PUBLIC) and set(api.NOT_VALIDATED) <= described
    conf = (DOCS / "conf.py").read_text()
    assert "api_pages.validated_names()" in conf and "_api_pages()" in conf


@pytest.mark.needs("numpydoc")
def test_validated_modules_document_exactly_their_parameters():
    """numpydoc's PR01/PR02 (the docs build runs them under -W) on every name of the modules
    the API index lists as validated, and on the methods their pages document."""
    from numpydoc.docscrape import get_doc_object
    from numpydoc.validate import validate
    validated = _api_pages().validated()
    names = [name for name, _ in validated]
    assert "npoptim.save" in names and "npoptim.lr_scheduler.StepLR" in names
    errors = {name: [e for e in validate(get_doc_object(obj))["errors"]
                     if e[0] in ("PR01", "PR02")] for name, obj in validated}
    errors = {name: e for name, e in errors.items() if e}
    assert not errors, errors
