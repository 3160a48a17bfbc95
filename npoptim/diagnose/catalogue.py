r"""The catalogue of ``npoptim diagnose``: known convention differences and mistakes, each a
named, documented switch of npoptim's reference optimizer (never a second implementation).

An :class:`Entry` changes how a golden case is replayed through the reference optimizer, in
one or more of these ways (each exact in real arithmetic; rounding differs by a few ulps,
far inside every case's tolerance):

* ``switches``: constructor keywords of the reference optimizer: a framework **convention
  switch** (``eps_mode="eps_hat"``, ``lr_in_buffer=True``: see :mod:`npoptim.flavors`). An
  entry whose switch the optimizer does not have is reported as unavailable, not run;
* ``hyper``: ``fn(case hyperparameters) -> overrides or None`` (None: not applicable to that
  case), e.g. toggling ``nesterov``;
* ``per_step``: ``fn(t, hyperparameters) -> {"lr": factor, "eps": factor}``, factors the
  reference's lr and eps are multiplied by at step ``t`` (1-based). Adam without bias
  correction of m is Adam at ``lr·(1-β₁ᵗ)``; SparseAdam with Adam's eps placement is
  SparseAdam at ``eps·√(1-β₂ᵗ)``;
* ``step_origin``: the step counter's value before the first step (torch: 0, incremented
  before use). -1 is "counted from 0": the first bias correction is 1-β⁰ = 0, and the step
  gives the inf/NaN such code gives;
* ``decoupled``: ``"before"`` or ``"after"``: weight decay taken out of the rule
  (``weight_decay=0``) and applied as θ ← θ(1-γλ) before or after the reference's step;
* ``grads``: ``fn(CsrGrad) -> CsrGrad``, the stored entries as the mistaken code sees them
  (explicit zeros dropped, duplicates not summed);
* ``dtype``: ``"float32"``: a float64 case computed in float32 and reported in float64;
* ``optimizer``: the reference optimizer to replay instead (AdamW's cases through Adam).

``kind`` says what the entry is: ``"convention"`` (another framework's choice), ``"default"``
(another framework's default value) or ``"mistake"``.
"""
import inspect
import math
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from npoptim import registry
from npoptim.golden.codec import CsrGrad


@dataclass(frozen=True)
class Entry:
    """One catalogue entry (see the module docstring for the fields)."""

    name: str
    optimizers: tuple
    kind: str
    doc: str
    switches: dict = field(default_factory=dict)
    hyper: Optional[Callable] = None
    per_step: Optional[Callable] = None
    step_origin: Optional[float] = None
    decoupled: Optional[str] = None
    grads: Optional[Callable] = None
    dtype: Optional[str] = None
    optimizer: Optional[str] = None
    parts: tuple = ()

    def missing_switches(self, optimizer):
        """The ``switches`` the reference optimizer's constructor does not take."""
        cls = registry.get(self.optimizer or optimizer)
        accepted = inspect.signature(cls.__init__).parameters
        if any(p.kind is p.VAR_KEYWORD for p in accepted.values()):
            return []
        return [k for k in self.switches if k not in accepted]

    def overrides(self, hyper):
        """The hyperparameters this entry replays ``hyper`` with, or None if it does not apply
        (it would change nothing, or the case lacks what it changes)."""
        out = dict(hyper)
        changed = False
        for key, value in self.switches.items():
            changed |= out.get(key, _MISSING) != value
            out[key] = value
        if self.hyper is not None:
            more = self.hyper(hyper)
            if more is None:
                return None
            out.update(more)
            changed = True
        if self.decoupled is not None:
            if not hyper.get("weight_decay"):
                return None
            out["weight_decay"] = 0
            out.pop("decoupled_weight_decay", None)
            changed = True
        changed |= any(x is not None for x in (self.per_step, self.step_origin, self.grads,
                                               self.dtype, self.optimizer))
        return out if changed else None


_MISSING = object()


def combine(first, second):
    """Both entries at once (``first + second``), or None where they clash."""
    if first.step_origin is not None and second.step_origin is not None:
        return None
    if (first.decoupled and second.decoupled) or (first.grads and second.grads) or (
            first.optimizer and second.optimizer and first.optimizer != second.optimizer):
        return None
    if set(first.switches) & set(second.switches):
        return None

    def hyper(h, a=first.hyper, b=second.hyper):
        out = {}
        for fn in (a, b):
            if fn is not None:
                more = fn(dict(h, **out))
                if more is None:
                    return None
                out.update(more)
        return out

    def per_step(t, h, a=first.per_step, b=second.per_step):
        out = {}
        for fn in (a, b):
            for key, factor in (fn(t, h) if fn else {}).items():
                out[key] = out.get(key, 1.0) * factor
        return out

    return Entry(
        name=f"{first.name} + {second.name}", optimizers=tuple(
            o for o in first.optimizers if o in second.optimizers),
        kind="combination", doc=f"{first.doc} And: {second.doc}",
        switches={**first.switches, **second.switches},
        hyper=hyper if first.hyper or second.hyper else None,
        per_step=per_step if first.per_step or second.per_step else None,
        step_origin=first.step_origin if first.step_origin is not None else second.step_origin,
        decoupled=first.decoupled or second.decoupled, grads=first.grads or second.grads,
        dtype=first.dtype or second.dtype, optimizer=first.optimizer or second.optimizer,
        parts=(first.name, second.name))


# ------------------------------------------------------------------- per-step rewrites
def _b1(t, h):
    return 1 - h["betas"][0] ** t


def _b2(t, h):
    return 1 - h["betas"][1] ** t


def _no_bias_correction_m(t, h):
    return {"lr": _b1(t, h)}


def _no_bias_correction_v(t, h):
    # sqrt(v) + eps = sqrt(b2) (sqrt(v)/sqrt(b2) + eps/sqrt(b2))
    root = math.sqrt(_b2(t, h))
    return {"lr": 1 / root, "eps": 1 / root}


def _no_bias_correction(t, h):
    return {"lr": _b1(t, h) / math.sqrt(_b2(t, h)), "eps": 1 / math.sqrt(_b2(t, h))}


def _eps_on_sqrt_v_hat(t, h):
    # SparseAdam with Adam's placement: lr sqrt(b2)/b1 m/(sqrt(v) + eps sqrt(b2))
    return {"eps": math.sqrt(_b2(t, h))}


# ------------------------------------------------------------------- gradient rewrites
def _entries(grad):
    return [(row, col, value) for row, col, value in grad.rows()]


def _from_entries(grad, entries):
    nrows = grad.shape[0]
    indptr = np.zeros(nrows + 1, grad.indptr.dtype)
    for row, _, _ in entries:
        indptr[row + 1] += 1
    indptr = np.cumsum(indptr).astype(grad.indptr.dtype)
    indices = np.array([c for _, c, _ in entries], grad.indices.dtype)
    data = np.array([v for _, _, v in entries], grad.data.dtype)
    return CsrGrad(grad.shape, indptr, indices, data)


def drop_explicit_zeros(grad):
    """The stored entries without those whose value is zero (scipy's ``eliminate_zeros``)."""
    return _from_entries(grad, [e for e in _entries(grad) if e[2] != 0])


def keep_first_duplicate(grad):
    """Of entries stored more than once at one (row, column), only the first."""
    seen, out = set(), []
    for row, col, value in _entries(grad):
        if (row, col) not in seen:
            seen.add((row, col))
            out.append((row, col, value))
    return _from_entries(grad, out)


def keep_last_duplicate(grad):
    """Of entries stored more than once at one (row, column), only the last (an assignment
    ``dense[r, c] = value`` per entry)."""
    last = {}
    for k, (row, col, value) in enumerate(_entries(grad)):
        last[(row, col)] = k
    return _from_entries(grad, [e for k, e in enumerate(_entries(grad))
                                if last[(e[0], e[1])] == k])


# ------------------------------------------------------------------- hyperparameter toggles
def _toggle_nesterov(h):
    if not h.get("momentum") or h.get("dampening"):
        return None
    return {"nesterov": not h.get("nesterov", False)}


def _l2_instead_of_decoupled(h):
    return {"decoupled_weight_decay": False} if h.get("weight_decay") else None


def _set(name, value):
    def hyper(h):
        return {name: value} if name in h and h[name] != value else None
    return hyper


ADAMS = ("Adam", "AdamW")
KERAS_EPS = ("Adam", "AdamW", "Adagrad", "RMSprop", "Adamax", "NAdam", "Adadelta")
DECAYING = ("Adam", "SGD", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam")

#: Every entry, in the order reports list them.
CATALOGUE = (
    # -------- conventions: the flavor switches (npoptim.flavors)
    Entry("eps on sqrt(v) (epsilon hat: Keras, TF, ONNX)", ADAMS, "convention",
          "eps added to sqrt(v) with the bias correction in the step size, "
          "lr·sqrt(1-β₂ᵗ)/(1-β₁ᵗ)·m/(sqrt(v)+eps) (Kingma & Ba section 2, TF ApplyAdam, "
          "Keras).", switches={"eps_mode": "eps_hat"}),
    Entry("eps inside the square root (Adam)", ADAMS, "convention",
          "eps added to v_hat under the root, m_hat/sqrt(v/(1-β₂ᵗ) + eps), instead of "
          "m_hat/(sqrt(v/(1-β₂ᵗ)) + eps) (optax adam(eps=0, eps_root=eps), hand-written "
          "code).", switches={"eps_mode": "in_sqrt"}),
    Entry("eps on sqrt(v_hat) (Adam's placement in SparseAdam)", ("SparseAdam",), "convention",
          "SparseAdam with eps added to the bias-corrected sqrt(v/(1-β₂ᵗ)), as Adam does.",
          per_step=_eps_on_sqrt_v_hat),
    Entry("eps added after the max (Adamax: Keras, TF, tfjs)", ("Adamax",), "convention",
          "u ← max(β₂u, |g|), θ ← θ - lr/(1-β₁ᵗ)·m/(u + eps), instead of torch's "
          "u ← max(β₂u, |g| + eps), θ ← θ - lr/(1-β₁ᵗ)·m/u.", switches={"eps_mode": "added"}),
    Entry("eps inside the square root (Adagrad)", ("Adagrad",), "convention",
          "sqrt(sum + eps) instead of sqrt(sum) + eps (Keras Adagrad, TF).",
          switches={"eps_in_sqrt": True}),
    Entry("eps inside the square root (RMSprop)", ("RMSprop",), "convention",
          "sqrt(v + eps) instead of sqrt(v) + eps (TF, Keras RMSprop).",
          switches={"eps_in_sqrt": True}),
    Entry("lr inside the momentum buffer (SGD)", ("SGD",), "convention",
          "b ← μb + lr·g, θ ← θ - b (Sutskever et al.; TF MomentumOptimizer, Keras) instead "
          "of torch's b ← μb + g, θ ← θ - lr·b: differs when lr changes. With nesterov it "
          "is the other Nesterov form, Keras's m ← μm - lr·g, θ ← θ + μm - lr·g, against "
          "torch's θ ← θ - lr·(g + μb).",
          switches={"lr_in_buffer": True}),
    Entry("lr inside the momentum buffer (RMSprop)", ("RMSprop",), "convention",
          "b ← μb + lr·g/denom, θ ← θ - b (TF, Keras) instead of torch's θ ← θ - lr·b.",
          switches={"lr_in_momentum": True}),
    Entry("Adagrad initial accumulator 0.1 (Keras, TF)", ("Adagrad",), "default",
          "the accumulator starts at 0.1 (Keras/TF's initial_accumulator_value), torch's "
          "at 0.", hyper=_set("initial_accumulator_value", 0.1)),
    # -------- other frameworks' defaults
    Entry("eps = 1e-7 (Keras default)", KERAS_EPS, "default",
          "Keras's default epsilon, 1e-7, where torch's is 1e-8 (1e-10 for Adagrad, 1e-6 "
          "Adadelta).", hyper=_set("eps", 1e-7)),
    Entry("eps = 1e-6 (d2l default)", ("Adam", "AdamW", "RMSprop"), "default",
          "d2l's from-scratch Adam and RMSprop use eps = 1e-6.", hyper=_set("eps", 1e-6)),
    # -------- mistakes
    Entry("no bias correction of m", ADAMS + ("NAdam",), "mistake",
          "m used as is, not m/(1-β₁ᵗ) (the first steps are 10x smaller with β₁=0.9).",
          per_step=_no_bias_correction_m),
    Entry("no bias correction of v", ADAMS, "mistake",
          "v used as is, not v/(1-β₂ᵗ) (the first steps are ~30x larger with β₂=0.999).",
          per_step=_no_bias_correction_v),
    Entry("no bias correction at all", ADAMS, "mistake",
          "neither m nor v bias-corrected (RMSprop with momentum, as Adam's paper warns).",
          per_step=_no_bias_correction),
    Entry("step counter from 0", ADAMS + ("NAdam", "RAdam", "Adamax"), "mistake",
          "the bias corrections use t-1: the counter starts at 0 and is incremented after "
          "use, so the first step divides by 1-β⁰ = 0 (inf/NaN).", step_origin=-1.0),
    Entry("step counter one ahead", ADAMS + ("NAdam", "RAdam", "Adamax"), "mistake",
          "the bias corrections use t+1 (a counter that starts at 1 and is incremented "
          "before use).", step_origin=1.0),
    Entry("Nesterov toggled (SGD)", ("SGD",), "mistake",
          "nesterov=True where the case has False, or the reverse: torch's Nesterov form "
          "d = g + μb against plain momentum d = b.", hyper=_toggle_nesterov),
    Entry("decoupled decay instead of L2", DECAYING, "mistake",
          "weight decay applied to the parameter, θ ← θ(1-γλ) before the step (AdamW, SGDW), "
          "instead of added to the gradient (g + λθ).", decoupled="before"),
    Entry("decoupled decay after the update", DECAYING + ("AdamW",), "mistake",
          "θ ← θ(1-γλ) applied after the step instead of before it (AdamW's paper and torch "
          "decay first).", decoupled="after"),
    Entry("L2 decay instead of decoupled", ("AdamW",), "mistake",
          "AdamW's weight decay added to the gradient (Adam's L2) instead of decoupled.",
          hyper=_l2_instead_of_decoupled, optimizer="Adam"),
    Entry("float32 accumulation of float64", tuple(registry.OPTIMIZERS), "mistake",
          "a float64 case computed in float32 (state or arithmetic in single precision) and "
          "reported in float64.", dtype="float32"),
    Entry("explicit CSR zero dropped", ("SparseAdam", "Adagrad", "SGD"), "mistake",
          "stored zero entries removed before the update (scipy's eliminate_zeros, a "
          "nonzero() mask): SparseAdam then skips entries torch updates.",
          grads=drop_explicit_zeros),
    Entry("duplicate CSR entries not summed (first kept)", ("SparseAdam", "Adagrad", "SGD"),
          "mistake", "of several entries stored at one position only the first is used.",
          grads=keep_first_duplicate),
    Entry("duplicate CSR entries not summed (last kept)", ("SparseAdam", "Adagrad", "SGD"),
          "mistake", "of several entries stored at one position only the last is used "
          "(dense[r, c] = value per entry).", grads=keep_last_duplicate),
)


def entries_for(optimizer, catalogue=CATALOGUE):
    """``(available, unavailable)`` entries for ``optimizer``'s cases; unavailable ones are
    ``(entry, missing switches)``."""
    available, unavailable = [], []
    for entry in catalogue:
        if optimizer not in entry.optimizers:
            continue
        missing = entry.missing_switches(optimizer)
        if missing:
            unavailable.append((entry, missing))
        else:
            available.append(entry)
    return available, unavailable
