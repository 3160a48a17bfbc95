"""Check built HTML for TeX that did not become math: ``python docs/check_html.py docs/_build/html``.

Outside math elements (MathJax's ``class="math"`` spans and divs), scripts, styles and
preformatted code blocks, the visible text must hold no TeX: no ``\\command``, no ``$$``, no
``\\(`` or ``\\[`` delimiters and no unrendered ``:math:`` roles. Also checks that every page
with math loads MathJax from the build itself (no CDN: the docs must render offline). Exits 1
listing each offending page and snippet.
"""
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

RAW_TEX = re.compile(r"\\[A-Za-z]{2,}|\\[()\[\]{}]|\$\$|:math:`")
SKIPPED = {"script", "style", "pre"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


class _Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack = []          # (tag, skipped) of open elements
        self.text = []           # visible text outside math
        self.math_count = 0
        self.mathjax_sources = []

    def _skipping(self):
        return any(skipped for _, skipped in self.stack)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "script" and "mathjax" in (attrs.get("src") or "").lower():
            self.mathjax_sources.append(attrs["src"])
        if tag in VOID:
            return
        classes = (attrs.get("class") or "").split()
        is_math = "math" in classes
        self.math_count += is_math and not self._skipping()
        self.stack.append((tag, tag in SKIPPED or is_math))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):  # tolerate unclosed inner elements
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        if not self._skipping():
            self.text.append(data)


def check_page(html):
    """``(problems, math_count)`` for one page's HTML: problems are raw-TeX snippets and CDN
    MathJax sources."""
    page = _Page()
    page.feed(html)
    text = "".join(page.text)
    problems = [f"raw TeX {m.group()!r} in ...{text[max(m.start() - 40, 0):m.end() + 40]!r}..."
                for m in RAW_TEX.finditer(text)]
    problems += [f"MathJax loaded from {src!r}, not from the build" for src in
                 page.mathjax_sources if re.match(r"(https?:)?//", src)]
    if page.math_count and not page.mathjax_sources:
        problems.append("page has math but loads no MathJax")
    return problems, page.math_count


def check_tree(root):
    """``{page: problems}`` for every HTML page under ``root`` with a problem."""
    found = {}
    for path in sorted(Path(root).rglob("*.html")):
        problems, _ = check_page(path.read_text(encoding="utf-8"))
        if problems:
            found[str(path.relative_to(root))] = problems
    return found


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    root = Path(argv[0] if argv else "docs/_build/html")
    pages = list(root.rglob("*.html"))
    if not pages:
        print(f"no HTML pages under {root}", file=sys.stderr)
        return 1
    found = check_tree(root)
    for page, problems in found.items():
        for problem in problems:
            print(f"{page}: {problem}", file=sys.stderr)
    adam = root / "_generated" / "optimizers" / "Adam.html"
    if adam.exists() and check_page(adam.read_text(encoding="utf-8"))[1] == 0:
        print("Adam.html has no math element", file=sys.stderr)
        return 1
    print(f"{len(pages)} pages, {len(found)} with raw TeX or online MathJax")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
