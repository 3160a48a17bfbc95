"""Exact trajectories of real npoptim optimizers on a :class:`~npoptim.teaching.problems.Problem`,
and the per-step recorder they are built on.

:func:`trajectory` runs ``steps`` optimizer steps from ``x0`` (float64 by default) and returns a
:class:`Trajectory` of NumPy arrays: the iterates, the losses, the learning rate each step used
and, for LAMB and LARS, the trust ratio each layer got. Nothing is tuned or clipped: every
optimizer runs as constructed, so several optimizers built with the same settings can be
compared step for step.

:class:`StepRecorder` is the recorder: it wraps an optimizer's ``step`` and keeps one
:class:`StepRecord` per step (the record API is :attr:`StepRecorder.records` and the callbacks
``callback(record)`` called after each step). What it reads from inside a step (the trust
ratios) comes from ``npoptim explain``'s tracer, :func:`npoptim.explainer.trace.recording`:
one tracing mechanism for both.
"""
import importlib
import math
from dataclasses import dataclass

import numpy as np

from npoptim import registry
from npoptim.explainer.trace import recording
from npoptim.explainer.views import trust_ratios as layer_trust_ratio


@dataclass(frozen=True)
class StepRecord:
    """What one optimizer step used: ``step`` (1-based), ``lr`` (one per param group, the rate
    the step ran with) and ``trust_ratios`` (one per parameter, in param-group order: the
    layer-wise ratio the step applied, 1.0 for a layer that does not adapt, NaN for a parameter
    without a gradient; None for optimizers without trust ratios)."""

    step: int
    lr: tuple
    trust_ratios: tuple = None


class StepRecorder:
    """Records per-step quantities of an optimizer's steps.

    ``recorder = StepRecorder(opt, callbacks=[fn])``; then ``recorder.step(grads)`` does
    ``opt.step(grads)``, appends a :class:`StepRecord` to :attr:`records`, calls each
    ``fn(record)`` and returns the step's return value. :meth:`lrs` and :meth:`trust_ratios`
    stack the records into arrays.

    Trust ratios (LAMB, LARS) are the exact values the optimizer applied: the optimizers do not
    expose them, so a step of an optimizer whose module has a ``trust_ratio`` function runs
    under :func:`~npoptim.explainer.trace.recording` (calls only, kernels compiled), and each
    parameter's ratio is the result of the ``trust_ratio`` call inside its ``_update`` call
    (the parameter's index is the loop index of the ``Optimizer._apply`` that made the call).
    Nothing of the optimizer is patched; recording holds a lock and traces the calling thread
    only (see :mod:`npoptim.explainer.trace`).

    Parameters
    ----------
    optimizer : Optimizer
        the optimizer whose steps are recorded.
    callbacks : sequence of callable, default: ()
        each called as ``fn(record)`` after every step.
    """

    def __init__(self, optimizer, callbacks=()):
        self.optimizer = optimizer
        self.callbacks = list(callbacks)
        self.records = []
        module = importlib.import_module(type(optimizer).__module__)
        self._has_trust_ratios = callable(getattr(module, "trust_ratio", None))

    def step(self, grads=None, closure=None):
        """``optimizer.step(grads, closure)``, recorded.

        Parameters
        ----------
        grads : list, optional
            the gradients, as ``optimizer.step`` takes them.
        closure : callable, optional
            the closure, for optimizers that take one.
        """
        opt = self.optimizer
        lr = tuple(float(group["lr"]) for group in opt.param_groups)
        if self._has_trust_ratios:
            result, ratios = self._step_capturing_ratios(grads, closure)
        else:
            result, ratios = opt.step(grads, closure=closure), None
        record = StepRecord(step=len(self.records) + 1, lr=lr, trust_ratios=ratios)
        self.records.append(record)
        for callback in self.callbacks:
            callback(record)
        return result

    def _step_capturing_ratios(self, grads, closure):
        opt = self.optimizer
        ratios = [math.nan] * len(opt.params)  # a parameter without a gradient has no update
        with recording(kernels=False, lines=False) as root:
            result = opt.step(grads, closure=closure)
        for update in root.find("_update"):
            if not update.module.startswith("npoptim.optim"):
                continue
            layer = layer_trust_ratio(update)  # None: the layer does not adapt
            ratios[update.caller_locals["index"]] = (1.0 if layer is None
                                                     else layer["trust_ratio"])
        return result, tuple(ratios)

    def lrs(self):
        """``(steps, param groups)`` array of the learning rates the steps used."""
        return np.array([r.lr for r in self.records], np.float64).reshape(len(self.records), -1)

    def trust_ratios(self):
        """``(steps, parameters)`` array of the applied trust ratios, or None."""
        if not self.records or self.records[0].trust_ratios is None:
            return None
        return np.array([r.trust_ratios for r in self.records], np.float64)


@dataclass(frozen=True)
class Trajectory:
    """An optimizer's run on a problem: ``xs`` ``(steps+1, dim)`` iterates (``xs[0]`` is the
    start), ``losses`` ``(steps+1,)``, ``lrs`` ``(steps, groups)``, ``trust_ratios``
    ``(steps, layers)`` or None. After a divergence (a non-finite iterate or loss at step
    ``diverged_at``) the run stops and later rows are NaN.

    Parameters
    ----------
    name : str
        the run's label.
    xs : numpy.ndarray
        the iterates, ``(steps+1, dim)``.
    losses : numpy.ndarray
        the loss at each iterate, ``(steps+1,)``.
    lrs : numpy.ndarray
        the learning rate of each step and param group, ``(steps, groups)``.
    trust_ratios : numpy.ndarray, optional
        LAMB's and LARS's trust ratio per step and layer, ``(steps, layers)``.
    diverged_at : int, optional
        the step of a divergence, None if there was none.
    """

    name: str
    xs: np.ndarray
    losses: np.ndarray
    lrs: np.ndarray
    trust_ratios: np.ndarray = None
    diverged_at: int = None


def optimizer_factory(name, **hyperparameters):
    """``params -> npoptim.<name>(params, **hyperparameters)`` (for :func:`trajectory`)."""
    cls = registry.get(name)
    return lambda params: cls(params, **hyperparameters)


def trajectory(optimizer_factory, problem, x0=None, steps=None, *, scheduler_factory=None,
               callbacks=(), progress=None, name=None, dtype=np.float64):
    """Run an optimizer on ``problem`` for ``steps`` steps (default ``problem.steps``).

    ``optimizer_factory(params)`` builds the optimizer on the list of parameter arrays (one
    per entry of ``problem.layer_sizes``, together the vector ``x``, starting at ``x0``,
    default ``problem.x0``); ``scheduler_factory(optimizer)``, if given, builds an lr scheduler
    stepped after every optimizer step. ``callbacks`` get each :class:`StepRecord`;
    ``progress(step, steps)`` is called after every step. Returns a :class:`Trajectory`.

    Parameters
    ----------
    optimizer_factory : callable
        ``optimizer_factory(params)`` builds the optimizer on the list of parameter
        arrays.
    problem : Problem
        the problem to run on.
    x0 : array_like, optional
        the start; None means ``problem.x0``.
    steps : int, optional
        the number of steps; None means ``problem.steps``.
    scheduler_factory : callable, optional
        ``scheduler_factory(optimizer)`` builds an lr scheduler stepped after every
        optimizer step.
    callbacks : sequence of callable, default: ()
        each called with every :class:`StepRecord`.
    progress : callable, optional
        called as ``progress(step, steps)`` after every step.
    name : str, optional
        the run's label; None names it after the optimizer.
    dtype : numpy.dtype, default: numpy.float64
        the parameters' dtype.
    """
    steps = problem.steps if steps is None else int(steps)
    start = np.array(problem.x0 if x0 is None else x0, dtype)
    if start.shape != (problem.dim,):
        raise ValueError(f"x0 must have {problem.dim} values, got shape {start.shape}")
    bounds = np.cumsum((0,) + problem.layer_sizes)
    params = [start[a:b].copy() for a, b in zip(bounds[:-1], bounds[1:])]
    optimizer = optimizer_factory(params)
    scheduler = scheduler_factory(optimizer) if scheduler_factory is not None else None
    recorder = StepRecorder(optimizer, callbacks)
    xs = np.full((steps + 1, problem.dim), np.nan)
    losses = np.full(steps + 1, np.nan)
    xs[0], losses[0] = start, problem.loss(start)
    diverged_at = None
    for k in range(1, steps + 1):
        x = np.concatenate(params)
        with np.errstate(over="ignore", invalid="ignore"):
            g = np.asarray(problem.grad(x), dtype)
        recorder.step([g[a:b].copy() for a, b in zip(bounds[:-1], bounds[1:])])
        if scheduler is not None:
            scheduler.step()
        x = np.concatenate(params)
        with np.errstate(over="ignore", invalid="ignore"):
            loss = problem.loss(x) if np.all(np.isfinite(x)) else math.nan
        xs[k], losses[k] = x, loss
        if progress is not None:
            progress(k, steps)
        if not (np.all(np.isfinite(x)) and math.isfinite(loss)):
            diverged_at = k
            xs[k] = np.nan
            losses[k] = np.nan
            break
    taken = len(recorder.records)
    lrs = np.full((steps, len(optimizer.param_groups)), np.nan)
    lrs[:taken] = recorder.lrs()
    ratios = recorder.trust_ratios()
    if ratios is not None:
        padded = np.full((steps, ratios.shape[1]), np.nan)
        padded[:taken] = ratios
        ratios = padded
    return Trajectory(name=name or type(optimizer).__name__, xs=xs, losses=losses, lrs=lrs,
                      trust_ratios=ratios, diverged_at=diverged_at)
