"""The figures: each function draws onto a matplotlib ``Axes`` (a new figure if none is given)
and returns it; :func:`overview` puts the panels together and :func:`save` writes PNG or SVG.

The runs come from :func:`npoptim.teaching.compare.compare` or
:func:`npoptim.teaching.trajectory.trajectory`; nothing here computes optimizer steps.

Rules every figure keeps (``tests/test_plot.py`` checks them on the matplotlib artists):

* a quantity that spans more than :data:`LOG_SPAN` (100x) is drawn on a log axis;
* :func:`overview` has no panel for a quantity that does not change (a constant lr is said in
  the caption instead);
* titles and axis labels lie inside the figure (constrained layout);
* every path ends inside the axes: the frame grows to hold the paths when that keeps the
  problem's region readable (at most :data:`FRAME_GROWTH` times its bounds), and a path that
  leaves even that frame is drawn up to where it leaves, its end marked there and its label
  saying so;
* runs are told apart where they overlap: each run has its own line style and marker;
* a figure made here has a caption line with the settings (problem, steps, lr, start).
"""
from pathlib import Path

import numpy as np

from npoptim.plotting import pyplot

__all__ = ["paths", "losses", "learning_rates", "trust_ratios", "phase_diagram", "overview",
           "caption", "save", "FORMATS", "LOG_SPAN", "FRAME_GROWTH", "STYLES"]

FORMATS = (".png", ".svg")
#: A positive quantity whose largest value is more than this times its smallest gets a log axis.
LOG_SPAN = 100.0
#: The paths' frame may grow to this many times the problem's bounds (per axis) to hold them.
FRAME_GROWTH = 3.0
#: One style per run, in order: line style and marker (LAMB's path would hide Adam's).
STYLES = (("-", "o"), ("--", "s"), ("-.", "^"), (":", "D"), ((0, (5, 1, 1, 1)), "v"),
          ((0, (1, 1)), "P"))


def _axes(ax, size=(6, 5)):
    if ax is not None:
        return ax
    return pyplot().figure(figsize=size, layout="constrained").add_subplot()


def _style(i):
    return STYLES[i % len(STYLES)]


def _label(run, left_at=None):
    notes = ([] if run.diverged_at is None else [f"diverged at step {run.diverged_at}"])
    if left_at is not None:
        notes.insert(0, f"leaves the frame at step {left_at}")
    return f"{run.name} ({'; '.join(notes)})" if notes else run.name


def _spans_decades(values):
    """Whether the finite ``values`` are all positive and span more than :data:`LOG_SPAN`."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    return values.size > 0 and values.min() > 0 and values.max() > LOG_SPAN * values.min()


def caption(runs, problem=None):
    """The settings line of a figure: problem, steps, lr (its range when it changes), start.

    Parameters
    ----------
    runs : list of Trajectory
        the runs to draw.
    problem : Problem, optional
        the problem the runs ran on.
    """
    if not runs:
        return f"{problem.name}: no runs" if problem is not None else "no runs"
    lrs = np.asarray(runs[0].lrs[:, 0])
    lr = (f"lr {lrs[0]:g} (constant)" if np.all(lrs == lrs[0])
          else f"lr from {lrs[0]:g} to {lrs[-1]:g} (max {lrs.max():g})")
    start = ", ".join(f"{v:g}" for v in runs[0].xs[0][:4]) + (", ..." if runs[0].xs.shape[1] > 4
                                                                else "")
    name = f"{problem.name}: " if problem is not None else ""
    return f"{name}{len(lrs)} steps, {lr}, start ({start}); every optimizer otherwise at its defaults"


def _caption(ax, runs, problem=None, own_figure=False):
    if own_figure:
        ax.figure.supxlabel(caption(runs, problem), fontsize=8)


def paths(problem, runs, ax=None, grid=200, levels=30):
    """Contours of a 2-D ``problem`` and each run's path (start, path, end, known minima).

    Parameters
    ----------
    problem : Problem
        a 2-D problem with bounds.
    runs : list of Trajectory
        the runs to draw.
    ax : matplotlib.axes.Axes, optional
        where to draw; None makes a new figure.
    grid : int, default: 200
        the contour mesh's points per axis.
    levels : int, default: 30
        the number of contour levels.
    """
    if problem.dim != 2 or problem.bounds is None:
        raise ValueError(f"paths need a 2-D problem with bounds; {problem.name} has "
                         f"{problem.dim} dimensions")
    own = ax is None
    ax = _axes(ax)
    shown = [run.xs[np.all(np.isfinite(run.xs), axis=1)] for run in runs]
    (x_lo, x_hi), (y_lo, y_hi) = frame = _frame(problem.bounds, shown)
    x, y = np.meshgrid(np.linspace(x_lo, x_hi, grid), np.linspace(y_lo, y_hi, grid))
    z = problem.loss_grid(x, y)
    ax.contour(x, y, np.log1p(z - z.min()), levels=levels, cmap="viridis", linewidths=0.6)
    for i, (run, xs) in enumerate(zip(runs, shown)):
        xs, left_at = _inside(xs, frame)
        linestyle, marker = _style(i)
        line, = ax.plot(xs[:, 0], xs[:, 1], linestyle=linestyle, marker=marker, lw=1.4,
                        ms=4, markevery=max(len(xs) // 8, 1), label=_label(run, left_at))
        ax.plot(xs[-1, 0], xs[-1, 1], marker=marker, ms=8, color=line.get_color(),
                markeredgecolor="black", linestyle="none")
    start = runs[0].xs[0] if runs else np.array(problem.x0)
    ax.plot(start[0], start[1], "ks", ms=6, label="start")
    for m in problem.minima:
        ax.plot(m[0], m[1], "r*", ms=11)
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_title(f"{problem.name}: paths")
    ax.legend(fontsize=8, loc="best")
    _caption(ax, runs, problem, own)
    return ax


def _frame(bounds, paths, margin=0.05):
    """The problem's ``bounds`` grown to hold every point of ``paths`` (with a margin), each
    axis at most :data:`FRAME_GROWTH` times as wide as the bounds."""
    out = []
    for k, (lo, hi) in enumerate(bounds):
        values = np.concatenate([[lo, hi]] + [p[:, k] for p in paths])
        need_lo, need_hi = values.min(), values.max()
        pad = margin * (need_hi - need_lo)
        need_lo, need_hi = min(lo, need_lo - pad), max(hi, need_hi + pad)
        width = FRAME_GROWTH * (hi - lo)
        if need_hi - need_lo > width:  # a path runs away: the frame is the bounds, centred
            centre, half = (lo + hi) / 2, width / 2
            need_lo, need_hi = max(need_lo, centre - half), min(need_hi, centre + half)
        out.append((need_lo, need_hi))
    return tuple(out)


def _inside(xs, frame):
    """The path ``xs`` up to where it first leaves ``frame`` (ending on the frame's edge
    there), and that step (None: it stays inside)."""
    (x_lo, x_hi), (y_lo, y_hi) = frame
    outside = ((xs[:, 0] < x_lo) | (xs[:, 0] > x_hi) | (xs[:, 1] < y_lo) | (xs[:, 1] > y_hi))
    if not outside.any():
        return xs, None
    k = int(np.argmax(outside))
    if k == 0:
        return xs[:1], 0
    a, b = xs[k - 1], xs[k]
    t = 1.0  # the fraction of the segment a -> b inside the frame
    for axis, (lo, hi) in enumerate(frame):
        d = b[axis] - a[axis]
        if b[axis] > hi:
            t = min(t, (hi - a[axis]) / d)
        elif b[axis] < lo:
            t = min(t, (lo - a[axis]) / d)
    return np.vstack([xs[:k], a + t * (b - a)]), k


def _per_step_axes(ax, ylabel, title, legend=True):
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if legend:
        ax.legend(fontsize=8)
    return ax


def losses(runs, ax=None):
    """Loss per step (log scale when every loss is positive).

    Parameters
    ----------
    runs : list of Trajectory
        the runs to draw.
    ax : matplotlib.axes.Axes, optional
        where to draw; None makes a new figure.
    """
    own = ax is None
    ax = _axes(ax)
    for i, run in enumerate(runs):
        linestyle, marker = _style(i)
        ax.plot(np.arange(len(run.losses)), run.losses, linestyle=linestyle, marker=marker,
                ms=4, markevery=max(len(run.losses) // 8, 1), label=_label(run))
    finite = np.concatenate([r.losses[np.isfinite(r.losses)] for r in runs]) if runs else []
    if len(finite) and np.all(finite > 0):
        ax.set_yscale("log")
    _caption(ax, runs, own_figure=own)
    return _per_step_axes(ax, "loss", "loss")


def learning_rates(runs, ax=None):
    """The learning rate each step used (param group 0).

    Parameters
    ----------
    runs : list of Trajectory
        the runs to draw.
    ax : matplotlib.axes.Axes, optional
        where to draw; None makes a new figure.
    """
    own = ax is None
    ax = _axes(ax)
    for i, run in enumerate(runs):  # equal schedules overlap: styles tell them apart
        linestyle, marker = _style(i)
        ax.plot(np.arange(1, len(run.lrs) + 1), run.lrs[:, 0], linestyle=linestyle,
                marker=marker, ms=4, markevery=max(len(run.lrs) // 8, 1), label=run.name)
    if _spans_decades(np.concatenate([r.lrs[:, 0] for r in runs]) if runs else []):
        ax.set_yscale("log")
    _caption(ax, runs, own_figure=own)
    return _per_step_axes(ax, "lr", "learning rate")


def trust_ratios(runs, ax=None):
    """The trust ratio of each layer per step, for the runs that have one (LAMB, LARS); a log
    axis when the ratios span more than :data:`LOG_SPAN` (a spike near 1e5 hides the rest).

    Parameters
    ----------
    runs : list of Trajectory
        the runs to draw.
    ax : matplotlib.axes.Axes, optional
        where to draw; None makes a new figure.
    """
    own = ax is None
    ax = _axes(ax)
    with_ratios = [r for r in runs if r.trust_ratios is not None]
    k = 0
    for run in with_ratios:
        for layer in range(run.trust_ratios.shape[1]):
            linestyle, marker = _style(k)
            k += 1
            ax.plot(np.arange(1, len(run.trust_ratios) + 1), run.trust_ratios[:, layer],
                    linestyle=linestyle, marker=marker, ms=4,
                    markevery=max(len(run.trust_ratios) // 8, 1),
                    label=f"{run.name} layer {layer}")
    if not with_ratios:
        ax.text(0.5, 0.5, "no LAMB/LARS run", ha="center", va="center",
                transform=ax.transAxes)
    elif _spans_decades(np.concatenate([r.trust_ratios.ravel() for r in with_ratios])):
        ax.set_yscale("log")
    _caption(ax, runs, own_figure=own)
    return _per_step_axes(ax, "trust ratio", "trust ratio per layer", legend=bool(with_ratios))


def phase_diagram(ax=None, step_sizes=None, momenta=None):
    """Goh's phase diagram of heavy-ball momentum: the rate ρ over (αλ, β), with the regime
    boundaries (see :mod:`npoptim.theory.momentum`).

    Parameters
    ----------
    ax : matplotlib.axes.Axes, optional
        where to draw; None makes a new figure.
    step_sizes : array_like, optional
        values of αλ; None means 241 values from 0 to 4.
    momenta : array_like, optional
        values of β; None means 100 values from 0 to 0.99.
    """
    from npoptim.theory import momentum
    own = ax is None
    ax = _axes(ax)
    step_sizes = np.linspace(0.0, 4.0, 241) if step_sizes is None else step_sizes
    momenta = np.linspace(0.0, 0.99, 100) if momenta is None else momenta
    rho, _ = momentum.phase_diagram(step_sizes, momenta)
    image = ax.pcolormesh(step_sizes, momenta, np.minimum(rho, 1.0), cmap="magma_r",
                          shading="auto")
    pyplot().colorbar(image, ax=ax, label="rate ρ (clipped at 1)")
    root = np.sqrt(momenta)
    ax.plot((1 - root) ** 2, momenta, "c-", label="(1-√β)²: complex roots begin")
    ax.plot((1 + root) ** 2, momenta, "g-.", label="(1+√β)²: complex roots end")
    ax.plot(2 + 2 * momenta, momenta, "w--", label="2+2β: divergence")
    ax.set_xlim(step_sizes[0], step_sizes[-1])
    ax.set_xlabel("αλ (step size × eigenvalue)")
    ax.set_ylabel("β (momentum)")
    ax.set_title("heavy-ball momentum on a quadratic")
    ax.legend(fontsize=7, loc="lower right")
    if own:
        ax.figure.supxlabel("x_{t+1} = x_t - α∇f(x_t) + β(x_t - x_{t-1}) on f = λx²/2; "
                            f"{len(step_sizes)} step sizes x {len(momenta)} momenta",
                            fontsize=8)
    return ax


def overview(problem, runs):
    """Paths (2-D problems), loss, lr (when it changes) and, with LAMB/LARS runs, trust
    ratios, in one figure with the settings as its caption.

    Parameters
    ----------
    problem : Problem
        the problem the runs ran on.
    runs : list of Trajectory
        the runs to draw.
    """
    panels = ([paths] if problem.dim == 2 and problem.bounds is not None else [])
    panels.append(losses)
    if any(np.any(r.lrs != r.lrs[0, 0]) for r in runs):
        panels.append(learning_rates)
    if any(r.trust_ratios is not None for r in runs):
        panels.append(trust_ratios)
    columns = min(len(panels), 2)
    rows = (len(panels) + 1) // 2
    fig = pyplot().figure(figsize=(6 * columns, 5 * rows), layout="constrained")
    for i, panel in enumerate(panels):
        ax = fig.add_subplot(rows, columns, i + 1)
        panel(problem, runs, ax=ax) if panel is paths else panel(runs, ax=ax)
    fig.supxlabel(caption(runs, problem), fontsize=9)
    return fig


def save(figure_or_axes, path):
    """Write a figure (or an Axes' figure) to ``path``, PNG or SVG by its suffix.

    Parameters
    ----------
    figure_or_axes : matplotlib.figure.Figure or matplotlib.axes.Axes
        what to write.
    path : str or os.PathLike
        the file; its suffix (``.png`` or ``.svg``) is the format.
    """
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise ValueError(f"output must end in .png or .svg, got {path.name!r}")
    figure = getattr(figure_or_axes, "figure", figure_or_axes)
    figure.savefig(path, dpi=110)
    pyplot().close(figure)
    return path
