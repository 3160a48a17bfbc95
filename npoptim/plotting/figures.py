"""The figures: each function draws onto a matplotlib ``Axes`` (a new figure if none is given)
and returns it; :func:`overview` puts the panels together and :func:`save` writes PNG or SVG.

The runs come from :func:`npoptim.teaching.compare.compare` or
:func:`npoptim.teaching.trajectory.trajectory`; nothing here computes optimizer steps.
"""
from pathlib import Path

import numpy as np

from npoptim.plotting import pyplot

__all__ = ["paths", "losses", "learning_rates", "trust_ratios", "phase_diagram", "overview",
           "save", "FORMATS"]

FORMATS = (".png", ".svg")


def _axes(ax, size=(6, 5)):
    if ax is not None:
        return ax
    return pyplot().figure(figsize=size).add_subplot()


def _label(run):
    return run.name if run.diverged_at is None else f"{run.name} (diverged at step {run.diverged_at})"


def paths(problem, runs, ax=None, grid=200, levels=30):
    """Contours of a 2-D ``problem`` and each run's path (start, path, end, known minima)."""
    if problem.dim != 2 or problem.bounds is None:
        raise ValueError(f"paths need a 2-D problem with bounds; {problem.name} has "
                         f"{problem.dim} dimensions")
    ax = _axes(ax)
    (x_lo, x_hi), (y_lo, y_hi) = problem.bounds
    x, y = np.meshgrid(np.linspace(x_lo, x_hi, grid), np.linspace(y_lo, y_hi, grid))
    z = problem.loss_grid(x, y)
    ax.contour(x, y, np.log1p(z - z.min()), levels=levels, cmap="viridis", linewidths=0.6)
    for run in runs:
        xs = run.xs[np.all(np.isfinite(run.xs), axis=1)]
        line, = ax.plot(xs[:, 0], xs[:, 1], "-", lw=1.4, label=_label(run))
        ax.plot(xs[-1, 0], xs[-1, 1], "o", ms=5, color=line.get_color())
    start = runs[0].xs[0] if runs else np.array(problem.x0)
    ax.plot(start[0], start[1], "ks", ms=6, label="start")
    for m in problem.minima:
        ax.plot(m[0], m[1], "r*", ms=11)
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_title(f"{problem.name}: paths ({_settings(runs)})")
    ax.legend(fontsize=8, loc="best")
    return ax


def _settings(runs):
    if not runs:
        return "no runs"
    steps = len(runs[0].lrs)
    lr0 = runs[0].lrs[0, 0]
    return f"{steps} steps, lr {lr0:g}"


def _per_step_axes(ax, ylabel, title, legend=True):
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if legend:
        ax.legend(fontsize=8)
    return ax


def losses(runs, ax=None):
    """Loss per step (log scale when every loss is positive)."""
    ax = _axes(ax)
    for run in runs:
        ax.plot(np.arange(len(run.losses)), run.losses, label=_label(run))
    finite = np.concatenate([r.losses[np.isfinite(r.losses)] for r in runs]) if runs else []
    if len(finite) and np.all(finite > 0):
        ax.set_yscale("log")
    return _per_step_axes(ax, "loss", "loss")


def learning_rates(runs, ax=None):
    """The learning rate each step used (param group 0)."""
    ax = _axes(ax)
    styles = ("-", "--", ":", "-.")
    for i, run in enumerate(runs):  # several styles: equal schedules overlap
        ax.plot(np.arange(1, len(run.lrs) + 1), run.lrs[:, 0], styles[i % len(styles)],
                label=run.name)
    return _per_step_axes(ax, "lr", "learning rate")


def trust_ratios(runs, ax=None):
    """The trust ratio of each layer per step, for the runs that have one (LAMB, LARS)."""
    ax = _axes(ax)
    with_ratios = [r for r in runs if r.trust_ratios is not None]
    for run in with_ratios:
        for layer in range(run.trust_ratios.shape[1]):
            ax.plot(np.arange(1, len(run.trust_ratios) + 1), run.trust_ratios[:, layer],
                    label=f"{run.name} layer {layer}")
    if not with_ratios:
        ax.text(0.5, 0.5, "no LAMB/LARS run", ha="center", va="center",
                transform=ax.transAxes)
    return _per_step_axes(ax, "trust ratio", "trust ratio per layer", legend=bool(with_ratios))


def phase_diagram(ax=None, step_sizes=None, momenta=None):
    """Goh's phase diagram of heavy-ball momentum: the rate ρ over (αλ, β), with the regime
    boundaries (see :mod:`npoptim.theory.momentum`)."""
    from npoptim.theory import momentum
    ax = _axes(ax)
    step_sizes = np.linspace(0.0, 4.0, 241) if step_sizes is None else step_sizes
    momenta = np.linspace(0.0, 0.99, 100) if momenta is None else momenta
    rho, _ = momentum.phase_diagram(step_sizes, momenta)
    image = ax.pcolormesh(step_sizes, momenta, np.minimum(rho, 1.0), cmap="magma_r",
                          shading="auto")
    pyplot().colorbar(image, ax=ax, label="rate ρ (clipped at 1)")
    root = np.sqrt(momenta)
    ax.plot((1 - root) ** 2, momenta, "c-", label="(1-√β)²: complex roots begin")
    ax.plot((1 + root) ** 2, momenta, "g-", label="(1+√β)²: complex roots end")
    ax.plot(2 + 2 * momenta, momenta, "w--", label="2+2β: divergence")
    ax.set_xlim(step_sizes[0], step_sizes[-1])
    ax.set_xlabel("αλ (step size × eigenvalue)")
    ax.set_ylabel("β (momentum)")
    ax.set_title("heavy-ball momentum on a quadratic")
    ax.legend(fontsize=7, loc="lower right")
    return ax


def overview(problem, runs):
    """Paths (2-D problems), loss, lr and, with LAMB/LARS runs, trust ratios, in one figure."""
    panels = ([paths] if problem.dim == 2 and problem.bounds is not None else [])
    panels += [losses, learning_rates]
    if any(r.trust_ratios is not None for r in runs):
        panels.append(trust_ratios)
    columns = 2
    rows = (len(panels) + 1) // columns
    fig = pyplot().figure(figsize=(6 * columns, 5 * rows))
    for i, panel in enumerate(panels):
        ax = fig.add_subplot(rows, columns, i + 1)
        panel(problem, runs, ax=ax) if panel is paths else panel(runs, ax=ax)
    fig.tight_layout()
    return fig


def save(figure_or_axes, path):
    """Write a figure (or an Axes' figure) to ``path``, PNG or SVG by its suffix."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise ValueError(f"output must end in .png or .svg, got {path.name!r}")
    figure = getattr(figure_or_axes, "figure", figure_or_axes)
    figure.savefig(path, dpi=110)
    pyplot().close(figure)
    return path
