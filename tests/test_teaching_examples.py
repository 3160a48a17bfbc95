"""Each script in examples/teaching runs (its own asserts check the numbers it prints)."""
import runpy
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples" / "teaching").glob("*.py"))


def test_the_seven_examples_are_there():
    assert {p.stem for p in EXAMPLES} >= {
        "adam_by_hand", "eps_placement", "momentum_ill_conditioned", "lamb_variants",
        "warmup_cosine", "lazy_sparse_adam", "adamw_decoupled_vs_l2"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs_and_its_asserts_hold(path, capsys):
    text = path.read_text()
    assert text.startswith("# %% [markdown]") and "\nassert " in text
    runpy.run_path(str(path), run_name="__main__")
    assert capsys.readouterr().out.strip()  # it printed its numbers
