r"""``npoptim.explain(...)``: every intermediate of an optimizer's steps, as the kernels compute
them (:func:`explain`, also the top-level ``npoptim.explain``).

::

    >>> import npoptim
    >>> e = npoptim.explain("Adam", params=2.0, steps=1, lr=0.1, eps=0.0)  # f = θ², g = 2θ
    >>> print(e)                      # the formula, then a table per step
    >>> e.steps[0].tables[0]["rows"]  # the same numbers as data (``e.to_dict()`` for JSON)

Each step runs ``opt.step`` itself with every kernel swapped for its pure-Python form and
recorded (:mod:`npoptim.explainer.trace`): the tables show the locals of the very rule the
compiled kernel runs (``adam_rule``, and the ``adam_moments`` it calls), so they cannot drift
from it, and the explained parameters end at the bits a compiled ``opt.step`` gives. Values are
printed with ``repr`` (shortest round-trip form): in float64, Adam's first ``m`` is
``0.3999999999999999``, not 0.4, because ``(1 - 0.9) * 4`` is. Columns marked derived (m̂, v̂,
update/p) are textbook quantities computed afterwards, for teaching: the kernel never forms
them.
"""
import inspect
import math
import re
import sys
from dataclasses import dataclass, field

import numpy as np

from npoptim import registry
from npoptim.explainer.trace import recording
from npoptim.explainer.views import (derived_columns, element_tables, listing, short_name,
                                   trust_ratios)

__all__ = ["explain", "Explanation", "StepExplanation", "formula"]

#: Largest parameter (elements) explain records: every element's every local is kept.
MAX_ELEMENTS = 4096

_LATEX = [(r"\leftarrow", "←"), (r"\beta", "β"), (r"\gamma", "γ"), (r"\lambda", "λ"),
          (r"\epsilon", "ε"), (r"\theta", "θ"), (r"\alpha", "α"), (r"\mu", "μ"),
          (r"\rho", "ρ"), (r"\tau", "τ"), (r"\eta", "η"), (r"\sigma", "σ"), (r"\phi", "φ"),
          (r"\sqrt", "√"), (r"\cdot", "·"), (r"\max", "max"), (r"\min", "min"),
          (r"\hat v", "v̂"), (r"\hat m", "m̂"), (r"\hat", "^"), (r"\quad", "  "), (r"\;", " "),
          (r"\,", " "), (r"\\", ""), ("&&", "   "), ("&", ""), (r"\text", ""),
          (r"\mathrm", ""), (r"\left", ""), (r"\right", ""), (r"\|", "‖"), (r"\top", "ᵀ"),
          (r"\le", "≤"), (r"\ge", "≥"), (r"\ne", "≠"), (r"\odot", "⊙")]


def formula(optimizer):
    """The ``.. math::`` block of the optimizer's module docstring, LaTeX made readable
    (Greek letters and arrows in Unicode); '' where the docstring has none.

    Parameters
    ----------
    optimizer : str or type
        an optimizer's name or class.
    """
    cls = registry.get(optimizer) if isinstance(optimizer, str) else optimizer
    doc = inspect.getdoc(sys.modules[cls.__module__]) or ""
    match = re.search(r"\.\. math::\n\n((?:[ \t]+.*\n?|\n)+)", doc)
    if not match:
        return ""
    lines = []
    for line in match.group(1).rstrip().splitlines():
        line = _fractions(line)
        for latex, text in _LATEX:
            line = line.replace(latex, text)
        line = line.replace("{", "").replace("}", "").replace("^t", "ᵗ").replace("_t", "ₜ")
        lines.append(line.rstrip())
    return "\n".join(lines)


def _braced(text, start):
    """``(content, end)`` of the ``{...}`` group opening at ``text[start]``."""
    depth = 0
    for k in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[k], 0)
        if depth == 0:
            return text[start + 1:k], k + 1
    return text[start + 1:], len(text)


def _fractions(line):
    r"""``\frac{a}{b}`` as ``(a)/(b)``, nested braces included."""
    while r"\frac{" in line:
        start = line.index(r"\frac{")
        numerator, end = _braced(line, start + 5)
        if end >= len(line) or line[end] != "{":
            break
        denominator, end = _braced(line, end)
        line = line[:start] + f"({numerator})/({denominator})" + line[end:]
    while r"\sqrt{" in line:
        start = line.index(r"\sqrt{")
        root, end = _braced(line, start + 5)
        simple = re.fullmatch(r"\\?\w+( \w)?|\w+_\w", root)
        line = line[:start] + (f"√{root}" if simple else f"√({root})") + line[end:]
    return line


@dataclass
class StepExplanation:
    """One explained step.

    ``step`` (1-based); ``lr`` per param group; ``params_before``/``params_after`` and
    ``grads`` (arrays); ``tables``: one per (parameter, element-wise kernel) with ``param``,
    ``kernel``, ``rule``, ``hyper`` (the rule's record), ``columns``, ``rows`` (one dict per
    element: ``index``, then the rule's values) and ``derived`` (per row: the derived
    columns); ``listings``: per parameter, ``(function, name, value)`` the optimizer's Python
    code assigned (norms, factors, iterations); ``trust_ratios`` (LAMB/LARS, per parameter);
    ``record``: the raw :class:`~npoptim.explainer.trace.Call` tree.

    Parameters
    ----------
    step : int
        the step's number, from 1.
    lr : list of float
        the learning rate of each param group.
    params_before : list of numpy.ndarray
        the parameters before the step.
    grads : list of numpy.ndarray
        the gradients of the step.
    params_after : list of numpy.ndarray
        the parameters after it.
    tables : list of dict
        one per (parameter, element-wise kernel), as described above.
    listings : list
        per parameter, the ``(function, name, value)`` the optimizer's Python code
        assigned.
    trust_ratios : list
        LAMB's and LARS's trust ratio per parameter.
    loss : float, optional
        the loss, where the gradient comes from f = Σθ².
    record : object, optional
        the raw call tree of the step.
    """

    step: int
    lr: list
    params_before: list
    grads: list
    params_after: list
    tables: list = field(default_factory=list)
    listings: list = field(default_factory=list)
    trust_ratios: list = field(default_factory=list)
    loss: float = None
    record: object = field(default=None, repr=False)


@dataclass
class Explanation:
    """What :func:`explain` returns: ``optimizer`` (name), ``hyper`` (its settings),
    ``formula`` (text), ``steps`` (:class:`StepExplanation` each) and ``final`` (the
    parameters after the last step). ``str()`` is the terminal table, :meth:`to_dict` the
    same as JSON-ready data.

    Parameters
    ----------
    optimizer : str
        the optimizer's name.
    hyper : dict
        its settings.
    formula : str
        its update rule as text (:func:`formula`).
    steps : list of StepExplanation
        one per step.
    final : list of numpy.ndarray
        the parameters after the last step.
    """

    optimizer: str
    hyper: dict
    formula: str
    steps: list
    final: list

    def __str__(self):
        from npoptim.explainer.render import format_explanation
        return format_explanation(self)

    def to_dict(self):
        from npoptim.explainer.render import explanation_to_dict
        return explanation_to_dict(self)


def _as_params(params, dtype, optimizer):
    values = params if isinstance(params, (list, tuple)) and params and isinstance(
        params[0], np.ndarray) else [params]
    out = []
    for value in values:
        array = np.array(value, dtype=dtype)
        if array.ndim == 0:
            array = array.reshape(1)
        if optimizer == "Muon" and array.ndim == 1:
            side = math.isqrt(array.size)
            if side * side != array.size:
                raise ValueError("Muon needs a 2-D parameter: give a matrix (e.g. 3x3)")
            array = array.reshape(side, side)
        if array.size > MAX_ELEMENTS:
            raise ValueError(f"explain records every element: give at most {MAX_ELEMENTS} "
                             f"elements (got {array.size})")
        out.append(np.ascontiguousarray(array))
    return out


def _gradient_function(grad, params):
    """``fn(params) -> (loss, grads)``: f = Σθ² (g = 2θ) without ``grad``, else the constant
    ``grad`` (one array per parameter, or one for all), or ``grad(params)``."""
    if grad is None:
        return lambda ps: (float(sum(np.sum(p * p) for p in ps)), [2 * p for p in ps])
    if callable(grad):
        def call(ps):
            out = grad(ps[0] if len(ps) == 1 else ps)
            grads = out if isinstance(out, (list, tuple)) and len(ps) > 1 else [out]
            grads = [np.broadcast_to(np.asarray(g, p.dtype), p.shape).copy()
                     for g, p in zip(grads, ps)]
            return float(sum(np.sum(g * p) for g, p in zip(grads, ps))), grads
        return call
    fixed = grad if isinstance(grad, (list, tuple)) and len(params) > 1 else [grad]
    arrays = [np.broadcast_to(np.asarray(g, p.dtype), p.shape).copy()
              for g, p in zip(fixed, params)]
    # a linear objective f = g·θ has the constant gradient g
    return lambda ps: (float(sum(np.sum(g * p) for g, p in zip(arrays, ps))),
                       [g.copy() for g in arrays])


def explain(optimizer, params=2.0, grad=None, steps=1, *, dtype=np.float64, scheduler=None,
            scheduler_args=None, **hyper):
    """Run ``steps`` steps of ``optimizer`` (a name, e.g. ``"Adam"``) on ``params`` and record
    every intermediate (see the module docstring).

    ``params``: a number, a list of numbers, an array or a list of arrays (one per
    parameter); ``grad``: None for f = Σθ² (so g = 2θ, as in the hand-worked θ₀=2, g=4), a
    constant gradient (a number or array, every step) or ``grad(theta) -> gradient`` (a
    per-example optimizer, DPSGD, takes it as a batch of one example);
    ``hyper``: the optimizer's keywords; ``scheduler``: the name of a
    :mod:`npoptim.lr_scheduler` class, built with ``scheduler_args`` and stepped after each
    step. Returns an :class:`Explanation`.

    Parameters
    ----------
    optimizer : str
        an optimizer's name, e.g. ``"Adam"``.
    params : float, list or numpy.ndarray, default: 2.0
        a number, a list of numbers, an array or a list of arrays (one per parameter).
    grad : float, numpy.ndarray or callable, optional
        None for f = Σθ², a constant gradient, or ``grad(theta) -> gradient``.
    steps : int, default: 1
        how many steps to run and record.
    dtype : numpy.dtype, default: numpy.float64
        the parameters' dtype.
    scheduler : str, optional
        the name of a :mod:`npoptim.lr_scheduler` class, stepped after each step.
    scheduler_args : dict, optional
        the scheduler's keywords.
    **hyper
        the optimizer's keywords.
    """
    name = optimizer if isinstance(optimizer, str) else optimizer.__name__
    cls = registry.get(name)
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    arrays = _as_params(params, dtype, name)
    opt = cls(arrays, **hyper)
    sched = None
    if scheduler is not None:
        from npoptim import lr_scheduler
        if not hasattr(lr_scheduler, scheduler):
            raise ValueError(f"unknown scheduler {scheduler!r}")
        sched = getattr(lr_scheduler, scheduler)(opt, **(scheduler_args or {}))
    evaluate = _gradient_function(grad, arrays)
    explained = []
    for step in range(1, steps + 1):
        lr = [float(g["lr"]) for g in opt.param_groups]
        before = [p.copy() for p in arrays]
        seen_grads = []

        def closure():
            loss, grads = evaluate(arrays)
            seen_grads.append([g.copy() for g in grads])
            return loss, grads

        with recording() as root:
            if cls.needs_closure:
                loss = opt.step(closure)
            else:
                loss, grads = closure()
                # per-example optimizers (DPSGD) take the gradient as a batch of one example
                opt.step([g[None] for g in grads] if cls.per_example_grads else grads)
            if sched is not None:
                sched.step()
        explained.append(_explain_step(name, opt, root, step, lr, before, seen_grads[0],
                                       [p.copy() for p in arrays], loss))
    return Explanation(optimizer=name, hyper=dict(hyper), formula=formula(cls),
                       steps=explained, final=[p.copy() for p in arrays])


def _explain_step(name, opt, root, step, lr, before, grads, after, loss):
    out = StepExplanation(step=step, lr=lr, params_before=before, grads=grads,
                          params_after=after, loss=loss, record=root)
    updates = [c for c in root.walk() if short_name(c) in ("_update", "_step")
               and c.module.startswith("npoptim.optim")]
    groups = [g for g in opt.param_groups for _ in g["params"]]
    for index, update in enumerate(updates):
        group = groups[min(index, len(groups) - 1)]
        state = opt.state.get(index, {})
        t = state.get("step")
        t = int(t) if t is not None and np.ndim(t) == 0 else None
        for table in element_tables(update):
            table["param"] = index
            table["step_count"] = t
            table["derived"] = derived_columns(name, table, group, t)
            out.tables.append(table)
        # the optimizer's own array code (Adafactor, Muon, LBFGS, LAMB/LARS norms); for a
        # purely element-wise rule it holds only the bookkeeping of the record's fields
        out.listings.append(listing(update) if not out.tables or name in ("LAMB", "LARS")
                            else [])
        if name in ("LAMB", "LARS"):
            out.trust_ratios.append(trust_ratios(update))
    schedulers = [c for c in root.calls if c.module == "npoptim.lr_scheduler"]
    if schedulers:
        out.listings.append([(short_name(c), n, v) for s in schedulers for c in s.walk()
                             for n, v in c.sets if isinstance(v, (float, list))])
    return out
