"""Check built pages as a reader sees them, in a real headless browser:
``python docs/check_browser.py docs/_build/html [PAGE ...]``.

Each page is loaded by Chromium (Debian's ``chromium`` package; ``$CHROMIUM`` names another
binary) in a frame of a probe page: by default every optimizer's page at the first width of
:data:`WIDTHS` and the pages of :data:`PAGES` at each width (given PAGE paths, relative to the
build: those at each width). Once MathJax has typeset it (``MathJax.startup.promise``), the
probe measures and the check asserts:

* the math is typeset: at least one ``mjx-container`` on a page whose HTML has math, and no
  ``mjx-merror`` (a TeX error MathJax shows in red);
* no raw TeX is left in the visible text (``\\(``, ``\\[``, ``$$``) outside typeset math,
  scripts and code blocks;
* nothing runs off sideways: the page is no wider than the window; at the first (laptop) width
  every display equation fits its box, and at a narrower one it fits or scrolls inside it
  (``overflow-x: auto``).

Prints a line per page and width with what it saw; exits 1 listing what fails, 2 when no
browser is found. The probe and the browser's profile live in a temporary directory; nothing
is written to the build.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: Pages with much math, the longest display equations (LAMB), and the landing pages.
PAGES = ("index.html", "learning.html", "_generated/optimizers/Adam.html",
         "_generated/optimizers/LAMB.html", "_generated/optimizers/Muon.html",
         "_generated/optimizers/Adafactor.html")
#: Window widths in CSS pixels: a laptop and a narrow window.
WIDTHS = (1280, 800)
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

PROBE = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="page" src="%(url)s" style="border:0;width:%(width)dpx;height:900px"></iframe>
<pre id="result">pending</pre>
<script>
function measure() {
  var d = document.getElementById("page").contentDocument, w = d.defaultView;
  var res = {containers: d.querySelectorAll("mjx-container").length,
             errors: Array.prototype.map.call(d.querySelectorAll("mjx-merror"), function (e) {
               return e.getAttribute("data-mjx-error") || e.textContent; }),
             page_width: d.documentElement.scrollWidth, window_width: w.innerWidth,
             overflowing: []};
  d.querySelectorAll("mjx-container[display='true']").forEach(function (m) {
    var inner = m.querySelector("mjx-math");
    if (!inner) return;
    var over = inner.getBoundingClientRect().right - m.getBoundingClientRect().right;
    var scrolls = false, wide = %(widest)s;
    for (var e = m; e && e !== d.body; e = e.parentElement) {
      var s = w.getComputedStyle(e).overflowX;
      if (s === "auto" || s === "scroll") { scrolls = true; break; }
    }
    if (over > 1 && (wide || !scrolls)) res.overflowing.push(
      [Math.round(over), (m.textContent || "").slice(0, 60)]);
  });
  var copy = d.body.cloneNode(true);
  copy.querySelectorAll("mjx-container, script, style, pre, code").forEach(
    function (e) { e.remove(); });
  var raw = (copy.textContent || "").match(/\\\\\\(|\\\\\\[|\\$\\$/g);
  res.raw_tex = raw ? raw.length : 0;
  document.getElementById("result").textContent = JSON.stringify(res);
}
document.getElementById("page").onload = function () {
  var w = document.getElementById("page").contentWindow;
  if (w.MathJax && w.MathJax.startup && w.MathJax.startup.promise) {
    w.MathJax.startup.promise.then(measure, measure);
  } else {
    setTimeout(measure, 2000);
  }
};
</script></body></html>
"""


def browser():
    """The Chromium binary (``$CHROMIUM`` or one of :data:`BROWSERS` on PATH), or None."""
    named = os.environ.get("CHROMIUM")
    if named:
        return named
    return next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)


def probe(binary, page, width, workdir):
    """What the probe measured on ``page`` (a path) at ``width``: a dict (see PROBE)."""
    html = Path(workdir) / f"probe-{width}.html"
    html.write_text(PROBE % {"url": page.resolve().as_uri(), "width": width,
                             "widest": "true" if width == WIDTHS[0] else "false"})
    out = subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--allow-file-access-from-files", f"--user-data-dir={Path(workdir) / 'profile'}",
         "--virtual-time-budget=30000", f"--window-size={width + 40},1000", "--dump-dom",
         html.as_uri()],
        capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="result">([^<]*)</pre>', out.stdout)
    if not found or found.group(1) == "pending":
        raise RuntimeError(f"{page.name}: the probe did not report (browser exit "
                           f"{out.returncode}; {out.stderr.strip().splitlines()[-1:]})")
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def problems(page, width, seen):
    """What breaks the rules in one measurement (a list of strings)."""
    out = []
    has_math = 'class="math' in page.read_text(encoding="utf-8")
    if has_math and seen["containers"] == 0:
        out.append("has math but MathJax typeset none")
    for error in seen["errors"]:
        out.append(f"TeX error (mjx-merror): {error}")
    if seen["raw_tex"]:
        out.append(f"{seen['raw_tex']} raw TeX delimiters left in the text")
    if seen["page_width"] > seen["window_width"] + 1:
        out.append(f"page {seen['page_width']} px wide in a {seen['window_width']} px window")
    for over, text in seen["overflowing"]:
        out.append(f"display math runs {over} px past its box: {text!r}")
    return [f"{page.name} at {width} px: {p}" for p in out]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(__doc__.splitlines()[1].strip(), file=sys.stderr)
        return 2
    root = Path(argv[0])
    if argv[1:]:
        runs = [(name, width) for name in argv[1:] for width in WIDTHS]
    else:
        everyone = sorted(p.relative_to(root).as_posix()
                          for p in (root / "_generated" / "optimizers").glob("*.html"))
        runs = [(name, width) for name in PAGES for width in WIDTHS]
        runs += [(name, WIDTHS[0]) for name in everyone if name not in PAGES]
    binary = browser()
    if binary is None:
        print("check_browser: no Chromium found; install Debian's chromium "
              "(apt-get install chromium) or set CHROMIUM", file=sys.stderr)
        return 2
    failures = []
    with tempfile.TemporaryDirectory() as workdir:
        for name, width in runs:
            page = root / name
            if not page.exists():
                failures.append(f"{name}: not in the build")
                continue
            seen = probe(binary, page, width, workdir)
            print(f"{name} at {width} px: {seen['containers']} typeset, "
                  f"{len(seen['errors'])} errors, page {seen['page_width']} px, "
                  f"{len(seen['overflowing'])} equations past their box")
            failures += problems(page, width, seen)
    for failure in failures:
        print(f"FAIL {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
