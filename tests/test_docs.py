"""The docs: the raw-TeX checker CI runs on the built HTML, the offline-MathJax setup, the pages
moved from the README, the optimizer pages (numpydoc Parameters, examples, references, algorithm
boxes) and the TeX of the module docstrings' math."""
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


def test_measurement_tables_are_rendered_from_committed_runs():
    """The performance page types no table by hand: each of its tables is a committed ``npoptim
    bench --json`` run (``docs/measurements/``) that the build renders, whose text starts with
    where and when it ran; every committed run is shown, and the page says the tables are
    dated logs (the docs build runs no benchmark)."""
    import json
    import re
    spec = importlib.util.spec_from_file_location("measurement_pages",
                                                  DOCS / "measurement_pages.py")
    measurement_pages = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(measurement_pages)
    text = (DOCS / "performance.md").read_text()
    assert "measurement logs" in text
    typed = [line for line in text.splitlines() if line.lstrip().startswith("|")]
    assert not typed, typed
    included = re.findall(r"\{include\} _generated/measurements/(\w+)\.md", text)
    committed = sorted(p.stem for p in measurement_pages.MEASUREMENTS.glob("*.json"))
    assert sorted(included) == committed and len(committed) >= 5, (included, committed)
    for name in committed:
        result = json.loads((measurement_pages.MEASUREMENTS / f"{name}.json").read_text())
        assert not result["quick"] and not result["failures"], name
        rendered = measurement_pages.markdown(result)
        assert re.match(r"Measured 20\d\d-\d\d-\d\d \d\d:\d\d UTC on ", rendered), name
        assert "\n| " in rendered, name


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
    first step only sets its second moment, SOAP's its statistics and eigenbases: their
    parameters move from the second on)."""
    import numpy as np
    code = _pages().example(name)
    namespace = {}
    exec(compile(code, f"<example of {name}>", "exec"), namespace)
    param = namespace["param"]
    assert np.all(np.isfinite(param))
    assert np.array_equal(param, [[1.0, -2.0], [0.5, 3.0]]) == (name in ("ADOPT", "SOAP")), name
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


@pytest.mark.needs("numpydoc")  # the algorithm box reads the Parameters sections
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


def _math_of(doc):
    """The math of a reST docstring: each ``.. math::`` block's parts (split at blank lines, as
    Sphinx splits them into equations) as ``("block", text)``, each ``:math:`` role as
    ``("role", text)``."""
    import re
    found = [("role", m) for m in re.findall(r":math:`([^`]*)`", doc)]
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        if line.strip() != ".. math::":
            continue
        indent = len(line) - len(line.lstrip())
        body = []
        for following in lines[i + 1:]:
            if following.strip() and len(following) - len(following.lstrip()) <= indent:
                break
            body.append(following)
        found += [("block", part) for part in re.split(r"\n\s*\n", "\n".join(body))
                  if part.strip() and not part.strip().startswith(":")]
    return found


def _text_arguments(tex):
    r"""The argument of every ``\text{...}`` in ``tex`` (braces balanced)."""
    out = []
    for start in (i for i in range(len(tex)) if tex.startswith("\\text{", i)):
        depth, j = 0, start + len("\\text")
        for j in range(j, len(tex)):
            depth += {"{": 1, "}": -1}.get(tex[j], 0)
            if depth == 0:
                break
        out.append(tex[start + len("\\text{"):j])
    return out


def math_errors(doc):
    r"""The TeX errors MathJax would show in red for the math of a docstring: a ``_`` not
    escaped inside ``\text{...}`` ("_ allowed only in math mode"), an ``&`` in a math block's
    equation with no ``\\`` (Sphinx wraps only a multi-line equation in ``split``, so a lone
    ``&`` is "Misplaced &")."""
    import re
    errors = []
    for kind, tex in _math_of(doc):
        for argument in _text_arguments(tex):
            if re.search(r"(?<!\\)_", argument):
                errors.append(f"unescaped _ in \\text{{{argument}}}")
        if kind == "block" and "&" in tex and "\\\\" not in tex:
            errors.append(f"& in a one-line math block: {tex.strip()[:60]}")
    return errors


@pytest.mark.parametrize("doc, what", [
    ("x\n\n.. math::\n\n    v \\leftarrow v &&\\text{``square_avg``}\\\\\n    w\n", "_"),
    ("a :math:`\\text{lr_max}` here", "_"),
    ("x\n\n.. math::\n\n    c = w / W &&\\text{(0 if W = 0)}\n\nafter\n", "&"),
])
def test_math_errors_finds_what_mathjax_refuses(doc, what):
    errors = math_errors(doc)
    assert errors and what in errors[0], errors


def test_math_errors_accepts_escaped_and_multiline_math():
    doc = ("x\n\n.. math::\n\n    v &\\leftarrow v &&\\text{``square\\_avg``}\\\\\n"
           "    m &= \\text{a {nested} text}\n\n    y = x_1\n\ntext :math:`x_t` and "
           ":math:`\\text{trust\\_norm}`\n")
    assert math_errors(doc) == []


def test_module_docstrings_math_has_no_tex_errors():
    r"""Issue 27: what docs/check_browser.py found on 8 pages as red TeX errors, without a
    browser: no module docstring of npoptim/optim has an unescaped ``_`` inside ``\text{}`` or
    an ``&`` in a one-line math block."""
    import ast
    bad = {}
    for path in sorted((DOCS.parent / "npoptim" / "optim").glob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text()), clean=True) or ""
        if math_errors(doc):
            bad[path.name] = math_errors(doc)
    assert not bad, bad


def _box_items(box, after):
    """The ``- ``name``...`` items of an algorithm box after the line starting ``after``, up
    to the next bold heading or the next plain line."""
    import re
    lines = [line.strip() for line in box]
    start = next(i for i, line in enumerate(lines) if line.startswith(after))
    names = []
    for line in lines[start + 1:]:
        if line.startswith("**") or (line and not line.startswith("- ")):
            break
        match = re.match(r"- ``(\w+)``", line)
        if match:
            names.append(match.group(1))
    return names


@pytest.mark.needs("numpydoc")
@pytest.mark.parametrize("name, module", _optimizer_classes())
def test_algorithm_box_is_the_optimizers_own(name, module):
    """Issue 27: each optimizer's and wrapper's algorithm box cannot drift from the code: its
    inputs are the constructor's parameters (but ``params``, which is θ0; the ignored ones on
    one line), its per-parameter state the state_dict's keys after the example's step, its
    per-group state the group's entries that are no constructor parameter (a wrapper's state:
    its state_dict's entries but the wrapped optimizer's and the options), and its update the
    module docstring's math, verbatim."""
    import contextlib
    import importlib
    import inspect
    import io
    import re
    from npoptim import registry
    pages = _pages()
    box = pages.algorithm_box(name)
    text = "\n".join(box)
    cls = registry.get_wrapper(name) if registry.is_wrapper(name) else registry.get(name)
    constructor = [p for p in inspect.signature(cls).parameters if p != "params"]
    inputs = _box_items(box, "**input**")
    ignored = re.findall(r"``(\w+)``", next((line for line in box if "- ignored" in line), ""))
    assert sorted(inputs + ignored) == sorted(constructor), name
    namespace = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(pages.example(name), namespace)
    state = namespace["optimizer"].state_dict()
    if registry.is_wrapper(name):
        own = sorted(k for k in state if k not in constructor and k != "optimizer")
        assert _box_items(box, "**initialize**") == own, name
        state = {"param_groups": [{}]}
    else:
        assert _box_items(box, "**initialize**") == sorted(state["state"].get(0, {})), name
    group = {k: v for k, v in state["param_groups"][0].items()
             if k not in constructor and k != "params" and not isinstance(v, bool)}
    if group:
        assert _box_items(box, "and per param group") == sorted(group), name
    else:
        assert "per param group" not in text
    doc = [line.strip() for line in importlib.import_module(module).__doc__.splitlines()]
    for i, line in enumerate(box):
        if line.strip() == ".. math::":
            indent = len(line) - len(line.lstrip())
            math = []
            for following in box[i + 1:]:
                if following.strip() and len(following) - len(following.lstrip()) <= indent:
                    break
                math.append(following.strip())
            math = "\n".join(math).strip("\n")
            assert math and math in "\n".join(doc), (name, math[:60])
    assert "**for** :math:`t = 1, 2, \\dots` **do**" in text and "**return**" in text


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
    assert {name for name, _ in api.validated()} >= described - {
        f"{module}.{name}" for module, name, _, kind, _ in rows if kind == "data"}
    conf = (DOCS / "conf.py").read_text()
    assert "api_pages.validated_names()" in conf and "_api_pages()" in conf


@pytest.mark.needs("numpydoc")
def test_validated_modules_document_exactly_their_parameters():
    """numpydoc's PR01/PR02 (the docs build runs them under -W) on every name of the public
    modules, npoptim.precision and the Optimizer base class included, and on the methods
    their pages document."""
    from numpydoc.docscrape import get_doc_object
    from numpydoc.validate import validate
    validated = _api_pages().validated()
    names = [name for name, _ in validated]
    assert "npoptim.save" in names and "npoptim.lr_scheduler.StepLR" in names
    assert {"npoptim.Optimizer", "npoptim.Optimizer.step", "npoptim.Optimizer.zero_grad",
            "npoptim.Optimizer.add_param_group", "npoptim.Optimizer.load_state_dict",
            "npoptim.Optimizer.state_dict"} <= set(names)
    precision = importlib.import_module("npoptim.precision")
    assert {f"npoptim.precision.{name}" for name in precision.__all__
            if callable(getattr(precision, name))} <= set(names)
    errors = {name: [e for e in validate(get_doc_object(obj))["errors"]
                     if e[0] in ("PR01", "PR02")] for name, obj in validated}
    errors = {name: e for name, e in errors.items() if e}
    assert not errors, errors
