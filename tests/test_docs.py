"""The docs: the raw-TeX checker CI runs on the built HTML, and the offline-MathJax setup."""
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
