"""Several optimizers on one problem at the same settings.

:func:`compare` runs each named optimizer from the same start, with the same learning rate
and schedule and otherwise its defaults (nothing tuned per optimizer, no gradient clipping),
and returns their :class:`~npoptim.teaching.trajectory.Trajectory` objects.
"""
from npoptim import lr_scheduler
from npoptim.teaching.trajectory import optimizer_factory, trajectory

#: schedule name -> (optimizer, steps, warmup) -> scheduler or None
SCHEDULES = {
    "constant": lambda opt, steps, warmup: None,
    "cosine": lambda opt, steps, warmup: lr_scheduler.CosineAnnealingLR(opt, T_max=steps),
    "warmup-cosine": lambda opt, steps, warmup: lr_scheduler.SequentialLR(
        opt, [lr_scheduler.LinearLR(opt, start_factor=0.01, total_iters=warmup),
              lr_scheduler.CosineAnnealingLR(opt, T_max=max(steps - warmup, 1))],
        milestones=[warmup]),
    "step": lambda opt, steps, warmup: lr_scheduler.StepLR(opt, step_size=max(steps // 3, 1),
                                                           gamma=0.1),
}


def compare(problem, optimizers, lr=None, steps=None, *, x0=None, schedule="constant",
            warmup=None, hyperparameters=None, progress=None):
    """Run each optimizer of ``optimizers`` (names, e.g. ``["SGD", "Adam"]``) on ``problem``.

    ``lr`` (default ``problem.lr``) and ``schedule`` (a key of :data:`SCHEDULES`; ``warmup``
    steps, default a tenth of the run) are the same for all; ``hyperparameters`` maps a name
    to extra keywords for that optimizer. ``progress`` is a callable ``(done, total)`` over
    all optimizers' steps (e.g. :class:`npoptim.cli.progress.ProgressLine`). Returns a list
    of trajectories.

    Parameters
    ----------
    problem : Problem
        the problem every optimizer runs on.
    optimizers : list of str
        optimizer names, e.g. ``["SGD", "Adam"]``.
    lr : float, optional
        the learning rate of all; None means ``problem.lr``.
    steps : int, optional
        the steps of each run; None means ``problem.steps``.
    x0 : array_like, optional
        the start; None means ``problem.x0``.
    schedule : str, default: 'constant'
        a key of :data:`SCHEDULES`.
    warmup : int, optional
        the schedule's warm-up steps; None means a tenth of the run.
    hyperparameters : dict, optional
        an optimizer's name to extra keywords for it.
    progress : callable, optional
        called as ``progress(done, total)`` over all optimizers' steps.
    """
    lr = problem.lr if lr is None else float(lr)
    steps = problem.steps if steps is None else int(steps)
    warmup = max(steps // 10, 1) if warmup is None else int(warmup)
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; choose from {', '.join(SCHEDULES)}")
    make_scheduler = SCHEDULES[schedule]
    runs = []
    for i, name in enumerate(optimizers):
        extra = dict((hyperparameters or {}).get(name, {}))
        tick = None if progress is None else (
            lambda k, n, i=i: progress(i * steps + k, len(optimizers) * steps))
        runs.append(trajectory(
            optimizer_factory(name, lr=lr, **extra), problem, x0=x0, steps=steps,
            scheduler_factory=lambda opt: make_scheduler(opt, steps, warmup),
            progress=tick, name=name))
    return runs
