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
    assert labels[0].startswith("SGD (") and "diverged at step " in labels[0]
    assert labels[1] == "Adam"
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


def figure_rules(fig):
    """The rules of :mod:`npoptim.plotting.figures`, checked on the artists: a list of what
    breaks them (empty: the figure keeps them)."""
    from matplotlib.lines import Line2D
    from npoptim.plotting.figures import LOG_SPAN
    broken = []
    fig.canvas.draw()
    box = fig.bbox
    renderer = fig.canvas.get_renderer()
    if not any(t.get_text() for t in fig.texts) and not (
            fig._supxlabel is not None and fig._supxlabel.get_text()):
        broken.append("no caption line")
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>":
            continue
        name = ax.get_title() or ax.get_ylabel()
        for text in (ax.title, ax.xaxis.label, ax.yaxis.label):
            extent = text.get_window_extent(renderer)
            if text.get_text() and not (extent.x0 >= box.x0 - 1 and extent.x1 <= box.x1 + 1
                                        and extent.y0 >= box.y0 - 1 and extent.y1 <= box.y1 + 1):
                broken.append(f"{name}: {text.get_text()!r} outside the figure")
        lines = [ln for ln in ax.get_lines() if len(np.asarray(ln.get_xdata())) > 1]
        if ax.collections and not lines and not ax.texts:
            continue
        ys = [np.asarray(ln.get_ydata(), float) for ln in lines]
        finite = np.concatenate([y[np.isfinite(y)] for y in ys]) if ys else np.array([])
        if not ax.texts and finite.size and np.all(finite == finite[0]):
            broken.append(f"{name}: a panel for a quantity that does not change")
        if (finite.size and finite.min() > 0 and finite.max() > LOG_SPAN * finite.min()
                and ax.get_yscale() != "log"):
            broken.append(f"{name}: spans {finite.max() / finite.min():.0f}x on a linear axis")
        (x_lo, x_hi), (y_lo, y_hi) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
        for ln in lines:
            xy = np.column_stack([ln.get_xdata(), ln.get_ydata()]).astype(float)
            xy = xy[np.all(np.isfinite(xy), axis=1)]
            if xy.size and not (x_lo <= xy[-1, 0] <= x_hi and y_lo <= xy[-1, 1] <= y_hi):
                broken.append(f"{name}: {ln.get_label()!r} ends outside the axes")
        labelled = [ln for ln in lines if not ln.get_label().startswith("_")]
        styles = [(str(ln.get_linestyle()), str(ln.get_marker())) for ln in labelled]
        if len(set(styles)) < len(styles):  # colour alone: an overlapping path hides another
            broken.append(f"{name}: runs drawn alike (same line style and marker)")
    return broken


def _figure_runs():
    rosenbrock = get_problem("rosenbrock").with_layers((1, 1))
    d2l = get_problem("d2l_quadratic")
    return {
        "overview": lambda f: f.overview(rosenbrock, compare(
            rosenbrock, ["SGD", "Adam", "RMSprop", "LAMB"], steps=300)),
        "d2l paths at lr 0.4": lambda f: f.paths(d2l, compare(d2l, ["SGD", "Adam"], lr=0.4,
                                                               steps=60)).figure,
        "diverging paths": lambda f: f.paths(d2l, compare(d2l, ["SGD", "Adam"], lr=0.6,
                                                          steps=300)).figure,
        "warm-up lr": lambda f: f.learning_rates(compare(
            get_problem("least_squares"), ["AdamW", "SGD"], schedule="warmup-cosine",
            steps=100)).figure,
        "trust ratios": lambda f: f.trust_ratios(compare(
            rosenbrock, ["LAMB", "LARS"], lr=0.002, steps=80)).figure,
        "losses": lambda f: f.losses(compare(d2l, ["SGD", "Adam"], steps=50)).figure,
        "phase": lambda f: f.phase_diagram().figure,
    }


@pytest.mark.needs("matplotlib")
@pytest.mark.parametrize("figure", list(_figure_runs()))
def test_figures_keep_the_rules(figure):
    _matplotlib()
    from npoptim.plotting import figures, pyplot
    fig = _figure_runs()[figure](figures)
    try:
        assert figure_rules(fig) == []
    finally:
        pyplot().close(fig)


@pytest.mark.needs("matplotlib")
def test_the_rules_catch_a_figure_that_breaks_them():
    _matplotlib()
    from npoptim.plotting import pyplot
    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2)
    a.plot([1, 2, 3], [1.0, 1e5, 2.0], "-", label="spike")   # linear axis over 1e5x
    a.plot([1, 2, 3], [1.0, 2.0, 3.0], "-", label="other")   # drawn alike
    a.set_xlim(0, 2.5)                                       # "other" ends outside
    b.plot([1, 2, 3], [0.1, 0.1, 0.1], label="constant lr")  # a flat panel
    b.set_ylabel("y" * 400)                                  # a label outside
    broken = figure_rules(fig)
    plt.close(fig)
    text = "\n".join(broken)
    for what in ("no caption line", "linear axis", "ends outside", "drawn alike",
                 "does not change", "outside the figure"):
        assert what in text, (what, broken)


@pytest.mark.needs("matplotlib")
def test_a_path_that_runs_away_ends_on_the_frame_and_says_so():
    _matplotlib()
    from npoptim.plotting import figures, pyplot
    d2l = get_problem("d2l_quadratic")
    runs = compare(d2l, ["SGD", "Adam"], lr=0.6, steps=300)
    ax = figures.paths(d2l, runs)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    pyplot().close(ax.figure)
    assert any("leaves the frame at step" in label for label in labels), labels


@pytest.mark.needs("matplotlib")
def test_overview_leaves_out_a_constant_lr_and_says_it_in_the_caption():
    _matplotlib()
    from npoptim.plotting import figures, pyplot
    problem = get_problem("rosenbrock").with_layers((1, 1))
    fig = figures.overview(problem, compare(problem, ["SGD", "Adam"], steps=20))
    titles = [ax.get_title() for ax in fig.axes]
    caption = fig._supxlabel.get_text()
    pyplot().close(fig)
    assert "learning rate" not in titles and len(fig.axes) == 2
    assert "20 steps" in caption and "(constant)" in caption


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
