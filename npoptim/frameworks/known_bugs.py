"""Known bugs of other frameworks: the cases each one fails and why, on which call path.

The list is ``framework_known_bugs.json`` beside this module (shipped in the package;
``tests/data/framework_known_bugs.json`` is a link to it). Each entry names a framework, its
version, the cases it fails (glob patterns over case ids), what the bug is, and optionally the
``call_path`` it shows on (tfjs's ``"variable-left-out"``; torch's implementation path such as
``"foreach=True"``); an entry without one shows on the path the framework's users run.
``npoptim check`` reports such a case as known, not as a failure;
:mod:`npoptim.golden.regenerate` marks torch's measured divergences with it.

This module imports only the standard library.
"""
import fnmatch
import json
from pathlib import Path

#: The file of known bugs.
PATH = Path(__file__).with_name("framework_known_bugs.json")
#: Its entries (``{"framework", "version", "optimizer", "cases", "what", ...}``).
BUGS = json.loads(PATH.read_text(encoding="utf-8"))["bugs"]


def known_bug(framework, case_id, call_path=None):
    """The known bug of ``framework`` that ``case_id`` shows on ``call_path`` (an entry's
    ``call_path``; None: the path its users run), or None."""
    return next((b for b in BUGS if b["framework"] == framework
                 and b.get("call_path") == call_path
                 and any(fnmatch.fnmatchcase(case_id, p) for p in b["cases"])), None)
