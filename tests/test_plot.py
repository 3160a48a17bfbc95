"""npoptim.plotting and ``npoptim plot``: files written, panels drawn, the missing-extra error."""
import os
import sys

import numpy as np
import pytest

from npoptim.cli import main
from npoptim.teaching import compare, get_problem


def _matplotlib():
    if os.environ.get("NPOPTIM_REQUIRE_MATPLOTLIB") == "1":
        import matplotlib
        return matplotlib
    return pytest.importorskip("matplotlib")


@pytest.fixture
def no_matplotlib(monkeypatch):
    """matplotlib made unimportable, whether or not it is installed."""
    for name in list(sys.modules):
        if name == "matplotlib" or name.startswith("matplotlib."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)


def test_without_matplotlib_the_api_names_the_extra(no_matplotlib):
    from npoptim.plotting import figures
    runs = compare(get_problem("d2l_quadratic"), ["SGD"], steps=3)
    with pytest.raises(ImportError, match=r"npoptim\[plot\]"):
        figures.paths(get_problem("d2l_quadratic"), runs)


def test_without_matplotlib_the_command_names_the_extra(no_matplotlib, tmp_path, capsys):
    assert main(["plot", "d2l_quadratic", "-o", str(tmp_path / "x.png")]) == 2
    assert "npoptim[plot]" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


@pytest.mark.needs("matplotlib")
def test_command_writes_png_with_all_panels(tmp_path, capsys):
    _matplotlib()
    out = tmp_path / "rosenbrock.png"
    assert main(["plot", "rosenbrock", "--optimizers", "SGD,Adam,RMSprop,LAMB", "--steps",
                 "200", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for name in ("SGD", "Adam", "RMSprop", "LAMB"):
        assert f"{name}:" in text


@pytest.mark.needs("matplotlib")
def test_api_figures_and_svg(tmp_path):
    _matplotlib()
    from npoptim.plotting import figures
    problem = get_problem("rosenbrock").with_layers((1, 1))
    runs = compare(problem, ["SGD", "LAMB", "LARS"], lr=0.002, steps=50,
                   schedule="warmup-cosine", warmup=5)
    fig = figures.overview(problem, runs)
    assert len(fig.axes) == 4
    paths_ax, loss_ax, lr_ax, trust_ax = fig.axes
    labels = [t.get_text() for t in paths_ax.get_legend().get_texts()]
    assert labels[:3] == ["SGD", "LAMB", "LARS"] and "start" in labels
    assert len(paths_ax.collections) > 0  # the contours
    # the lr panel draws exactly the recorded rates: warm-up then cosine
    np.testing.assert_array_equal(lr_ax.lines[0].get_ydata(), runs[0].lrs[:, 0])
    assert runs[0].lrs[0, 0] == pytest.approx(0.002 * 0.01) and runs[0].lrs[5, 0] == 0.002
    # two layers for each of LAMB and LARS
    assert len(trust_ax.lines) == 4
    np.testing.assert_array_equal(trust_ax.lines[2].get_ydata(), runs[2].trust_ratios[:, 0])
    written = figures.save(fig, tmp_path / "overview.svg")
    assert written.read_text()[:200].lstrip().startswith("<?xml")


@pytest.mark.needs("matplotlib")
def test_diverged_runs_are_labelled(tmp_path):
    _matplotlib()
    from npoptim.plotting import figures
    problem = get_problem("d2l_quadratic")
    runs = compare(problem, ["SGD", "Adam"], lr=0.6, steps=1500)
    ax = figures.paths(problem, runs)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0].startswith("SGD (diverged at step ") and labels[1] == "Adam"
    with pytest.raises(ValueError, match=".png or .svg"):
        figures.save(ax, tmp_path / "x.jpg")


@pytest.mark.needs("matplotlib")
def test_phase_diagram_and_bad_arguments(tmp_path, capsys):
    _matplotlib()
    assert main(["plot", "--figure", "phase", "-o", str(tmp_path / "m.png")]) == 0
    assert (tmp_path / "m.png").stat().st_size > 1000
    assert main(["plot", "beale", "--optimizers", "SGD,Nope", "-o",
                 str(tmp_path / "b.png")]) == 2
    assert "unknown optimizer 'Nope'" in capsys.readouterr().err
    assert main(["plot", "beale", "-o", str(tmp_path / "b.gif")]) == 2
    with pytest.raises(ValueError, match="2-D"):
        from npoptim.plotting import figures
        figures.paths(get_problem("quadratic").__class__(
            name="q3", loss=None, grad=None, x0=(0.0, 0.0, 0.0)), [])


def test_progress_line_reports_slow_runs_only():
    import io
    from npoptim.cli.progress import ProgressLine
    quiet, slow = io.StringIO(), io.StringIO()
    ProgressLine("a", quiet, delay=60)(5, 10)
    line = ProgressLine("b", slow, delay=0, interval=0)
    line(5, 10)
    line(10, 10)
    assert quiet.getvalue() == "" and slow.getvalue().splitlines()[-1].startswith("b: 10/10")


def test_runs_and_the_command_module_do_not_import_matplotlib():
    import subprocess
    code = ("import sys, npoptim.teaching, npoptim.cli.plot, npoptim.plotting, npoptim.theory."
            "momentum; from npoptim.teaching import compare, get_problem; "
            "compare(get_problem('beale'), ['Adam'], steps=2); "
            "assert not any(m.startswith('matplotlib') for m in sys.modules), 'imported'")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)
