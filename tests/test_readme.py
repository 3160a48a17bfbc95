"""The README stays true: its example runs and its optimizer table matches the registry."""
import pathlib
import re

import npoptim
from npoptim import registry

README = (pathlib.Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_readme_example_runs():
    code = re.search(r"## Example\n\n```python\n(.*?)```", README, re.S).group(1)
    exec(compile(code, "README.md example", "exec"), {})


def test_optimizer_table_matches_the_registry():
    table = README.split("<!-- optimizer-table")[1].split("<!-- end optimizer-table")[0]
    rows = {}
    for line in table.splitlines():
        m = re.match(r"\| `(\w+)` \| (.*?) \| ([\w-]+) \| (.*) \|$", line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3), m.group(4))
    assert sorted(rows) == sorted([*registry.OPTIMIZERS, *registry.WRAPPERS])
    for name, (torch_cell, kind, notes) in rows.items():
        cls = getattr(npoptim, name)
        assert kind == cls.sparse_kind, name
        if registry.is_wrapper(name):  # marked as a wrapper, with its framework counterpart
            assert torch_cell == "—", name
            assert notes.startswith("**wrapper**"), name
            assert f"`{registry.WRAPPERS[name][1]}`" in notes, name
            continue
        assert "**wrapper**" not in notes, name
        torch_name = registry.OPTIMIZERS[name][1]
        assert torch_cell == (f"`torch.optim.{torch_name}`" if torch_name else "—"), name


def test_ci_runs_the_readme_test_command():
    command = re.search(r"Install and run the tests.*?\n\n    ([^\n]+)\n", README, re.S).group(1)
    ci = (pathlib.Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
    install, _, run = command.partition(" && ")
    assert run.startswith("python -m pytest")
    # CI runs the suite in two stages, -m "not needs" under the import blocker and -m needs
    # (tests/conftest.py); it adds reporting options of its own (-q -rs), and the README's
    # options all run in both
    stages = [line for line in ci.splitlines() if "python -m pytest" in line]
    assert [line.partition("python -m pytest")[0] for line in stages] == [
        "NPOPTIM_BLOCK_OPTIONAL=1 ", ""], stages
    assert stages[0].endswith(' -m "not needs"') and stages[1].endswith(" -m needs"), stages
    for ci_run in stages:
        assert set(run.split()) <= set(ci_run.split()), (run, ci_run)
    # (CI adds extras of its own to the test extra: ".[test,dask]")
    assert '-e ".[test]"' in install and '-e ".[test' in ci


def test_links_to_files_in_the_repository_resolve():
    """Every relative link of the README (``[text](path)`` or ``[text](path#anchor)``) names a
    file or folder of the checkout, and the README links to the developers' map."""
    root = pathlib.Path(__file__).resolve().parents[1]
    links = [target.split("#")[0] for target in re.findall(r"\]\(([^)\s]+)\)", README)
             if not re.match(r"[a-z]+:", target) and not target.startswith("#")]
    assert "docs/developing.md" in links
    missing = [link for link in links if not (root / link).exists()]
    assert not missing, missing


def test_readme_is_a_front_page_that_links_every_topic_page():
    """At most 320 lines (issue 27): what does not fit is on a docs page, and the README links
    every such page, so nothing moved out of it is out of reach."""
    assert len(README.splitlines()) <= 320, len(README.splitlines())
    for page in ["sparse", "wrappers", "schedulers", "guarantees", "checking", "flavors",
                 "precision", "checkpoints", "big-tables", "performance", "teaching",
                 "developing"]:
        assert f"](docs/{page}.md" in README, page
    assert "](docs/learning.rst)" in README


def test_readme_states_the_supported_versions_of_setup_cfg():
    setup = (pathlib.Path(__file__).resolve().parents[1] / "setup.cfg").read_text()
    python = re.search(r"python_requires = >=(\S+)", setup).group(1)
    assert f"Python {python} or later" in README
    for name in ("numpy", "scipy", "numba"):
        version = re.search(rf"^\s+{name}>=(\S+)$", setup, re.M).group(1)
        assert f"{name} ({version} or later)" in README, name
