r"""The catalogue of ``npoptim diagnose``: known convention differences and mistakes, each a
named, documented change of how npoptim's reference optimizer replays a case (never a second
implementation).

An :class:`Entry` is one piece of code done another way, and it is replayed only on the cases
whose flags reach that piece (its ``scope``; decoupled decay, for instance, only where the case
decouples): on every other case the mistaken code is the correct one, and the entry replays
the reference. Where it applies it changes the replay in one or more of these ways, each exact
in real arithmetic under every other option of the case (L2 or decoupled decay, lr schedules,
``maximize``, ``amsgrad``, parameters without a gradient, the flavors' switches: eps_mode,
``step_scope``...; rounding differs by a few ulps, far inside every case's tolerance;
``tests/test_diagnose_mutants.py`` holds each entry to that with independent mutants):

* ``scope``: ``fn(optimizer, hyperparameters) -> bool``, whether the case reaches the code
  (None: every case does), e.g. :func:`decouples`, :func:`l2_decay`;
* ``switches``: constructor keywords of the reference optimizer: a framework **convention
  switch** (``eps_mode="eps_hat"``, ``lr_in_buffer=True``: see :mod:`npoptim.flavors`) or
  another named switch of the rule (Adam's ``bias_correction=False``). An entry whose switch
  the optimizer does not have is reported as unavailable, not run;
* ``hyper``: ``fn(case hyperparameters) -> overrides or None`` (None: the case does not reach
  the code either), e.g. toggling ``nesterov``;
* ``per_step``: ``fn(t, hyperparameters) -> {"lr": factor, "eps": factor}``, factors the
  reference's lr and eps are multiplied by at step ``t`` (1-based; each parameter's own count,
  or the optimizer's under ``step_scope="global"``). Adam without bias correction of m is Adam
  at ``lr·(1-β₁ᵗ)``; SparseAdam with Adam's eps placement is SparseAdam at ``eps·√(1-β₂ᵗ)``.
  The lr factor scales the update only: on a case that decouples its weight decay the engine
  applies the decay θ ← θ(1-γλ) itself, with the step's own γ, and the rule runs without it;
* ``state_start``: ``{state name: value}`` a new state starts with instead of the
  reference's: ``{"step": -1.0}`` is a step counter "counted from 0" (the first bias
  correction is 1-β⁰ = 0, and the step gives the inf/NaN such code gives); NAdam's
  ``{"mu_product": 0.0}`` drops its bias corrections 1/(1-Πₜ);
* ``decoupled``: ``"before"`` or ``"after"``: weight decay taken out of the rule
  (``weight_decay=0``) and applied by the engine as θ ← θ(1-γλ) before or after the
  reference's step;
* ``grads``: ``fn(CsrGrad) -> CsrGrad``, the stored entries as the mistaken code sees them
  (explicit zeros dropped, duplicates not summed);
* ``dtype``: ``"float32"``: a float64 case computed in float32 and reported in float64;
* ``optimizer``: ``{case's optimizer: reference optimizer to replay instead}`` (AdamW's cases
  through Adam).

``kind`` says what the entry is: ``"convention"`` (another framework's choice), ``"default"``
(another framework's default value), ``"mistake"``, or ``"combination"`` (two entries at once,
:func:`combine`: each part applies where its own scope holds).
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
    """One catalogue entry (see the module docstring for the fields); ``members``: the two
    entries of a combination."""

    name: str
    optimizers: tuple
    kind: str
    doc: str
    scope: Optional[Callable] = None
    switches: dict = field(default_factory=dict)
    hyper: Optional[Callable] = None
    per_step: Optional[Callable] = None
    state_start: dict = field(default_factory=dict)
    decoupled: Optional[str] = None
    grads: Optional[Callable] = None
    dtype: Optional[str] = None
    optimizer: dict = field(default_factory=dict)
    members: tuple = ()

    @property
    def parts(self):
        """The names of a combination's entries (empty for a single entry)."""
        return tuple(m.name for m in self.members)

    def missing_switches(self, optimizer):
        """The ``switches`` the reference optimizer's constructor does not take."""
        cls = registry.get(self.optimizer.get(optimizer, optimizer))
        accepted = inspect.signature(cls.__init__).parameters
        if any(p.kind is p.VAR_KEYWORD for p in accepted.values()):
            return []
        return [k for k in self.switches if k not in accepted]

    def on(self, optimizer, hyper):
        """This entry as replayed on a case of ``optimizer`` with ``hyper``: itself, None where
        the case does not reach its code (the reference is replayed), for a combination the
        parts that do."""
        if self.members:
            live = [m for m in self.members if m.on(optimizer, hyper) is not None]
            return combine(*live) if len(live) == 2 else live[0] if live else None
        if self.scope is not None and not self.scope(optimizer, hyper):
            return None
        if self.hyper is not None and self.hyper(hyper) is None:
            return None
        return self

    def overrides(self, optimizer, hyper):
        """The hyperparameters this entry replays ``hyper`` with, or None where it changes
        nothing: call it on :meth:`on`'s answer."""
        out = self._switched(hyper)
        changed = self.hyper is not None or any(
            hyper.get(key, _MISSING) != value for key, value in self.switches.items())
        if self.decay_by_engine(optimizer, hyper):
            out["weight_decay"] = 0
            out.pop("decoupled_weight_decay", None)
            out.pop("decay_after_update", None)
            changed = True
        changed |= bool(self.per_step or self.state_start or self.grads or self.dtype
                        or optimizer in self.optimizer)
        return out if changed else None

    def _switched(self, hyper):
        """``hyper`` with the ``switches`` and the ``hyper`` overrides."""
        out = dict(hyper, **self.switches)
        if self.hyper is not None:
            out.update(self.hyper(hyper))
        return out

    def decay_by_engine(self, optimizer, hyper):
        """Where the engine applies the decoupled decay θ ← θ(1-γλ) itself, with the step's
        lr (the rule then runs without decay): ``"before"``, ``"after"`` or None (the rule
        decays, if the case does). ``decoupled`` says so, and a ``per_step`` lr factor where
        the rule replayed decouples needs it (the factor scales the update, not the decay)."""
        if self.decoupled is not None:
            return self.decoupled
        rule = self._switched(hyper)
        if self.per_step is not None and decouples(self.optimizer.get(optimizer, optimizer),
                                                   rule):
            return "after" if rule.get("decay_after_update") else "before"
        return None


_MISSING = object()


def combine(first, second):
    """Both entries at once (``first + second``), or None where they clash."""
    if set(first.state_start) & set(second.state_start):
        return None
    if (first.decoupled and second.decoupled) or (first.grads and second.grads) or any(
            second.optimizer.get(k, v) != v for k, v in first.optimizer.items()):
        return None
    if set(first.switches) & set(second.switches):
        return None

    def hyper(h, a=first.hyper, b=second.hyper):
        out = {}
        for fn in (a, b):
            if fn is not None:
                out.update(fn(dict(h, **out)))
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
        state_start={**first.state_start, **second.state_start},
        decoupled=first.decoupled or second.decoupled, grads=first.grads or second.grads,
        dtype=first.dtype or second.dtype, optimizer={**first.optimizer, **second.optimizer},
        members=(first, second))


# ------------------------------------------------------------------- scopes
def decouples(optimizer, hyper):
    """Whether the case decays its weights decoupled, θ ← θ(1-γλ) (AdamW, or
    ``decoupled_weight_decay=True``), with a non-zero λ."""
    return bool(hyper.get("weight_decay")) and (
        optimizer == "AdamW" or bool(hyper.get("decoupled_weight_decay")))


def kron_damped(optimizer, hyper):
    """Whether a Kron case damps its pair (kron_torch's form, ``probe_damping``)."""
    return bool(hyper.get("probe_damping"))


def quad_adam_style(optimizer, hyper):
    """Whether a PSGD-QUAD case steps by lr/5 (``lr_style="adam"``)."""
    return hyper.get("lr_style") == "adam"


def l2_decay(optimizer, hyper):
    """Whether the case adds L2 decay λθ to the gradient (a non-zero λ, not decoupled)."""
    return bool(hyper.get("weight_decay")) and not decouples(optimizer, hyper)


def _decay_before_the_update(optimizer, hyper):
    return decouples(optimizer, hyper) and not hyper.get("decay_after_update")


def _corrects_bias(optimizer, hyper):
    # onnxruntime's correct_bias=0 has no bias correction to leave out
    return hyper.get("bias_correction", True)


def _max_of_raw_v(optimizer, hyper):
    # eps hat moves the bias correction out of the denominator: optax's amsgrad max of the
    # bias-corrected v has no such form (and the switch refuses it)
    return not (hyper.get("amsgrad") and hyper.get("amsgrad_max") == "bias_corrected")


def _scaled_plus_one(optimizer, hyper):
    return bool(hyper.get("cautious")) and hyper.get("cautious_scale", "plus_one") == "plus_one"


def _scaled_floored_mean(optimizer, hyper):
    return bool(hyper.get("cautious")) and hyper.get("cautious_scale") == "floored_mean"


def _undamped(optimizer, hyper):
    # Keras's momentum has no dampening (and the switch refuses one)
    return not hyper.get("dampening")


# ------------------------------------------------------------------- per-step rewrites
def _b1(t, h):
    return 1 - h["betas"][0] ** t


def _b2(t, h):
    return 1 - h["betas"][1] ** t


def _no_bias_correction_m(t, h):
    # every eps_mode has 1/(1-β₁ᵗ) in the step size only
    return {"lr": _b1(t, h)}


def _bias_correction_m(t, h):
    # with bias_correction=False (b1 = b2 = 1), m's correction put back
    return {"lr": 1 / _b1(t, h)}


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
    # Adam refuses decay_after_update without decoupled decay
    return {"decoupled_weight_decay": False, **(
        {"decay_after_update": False} if "decay_after_update" in h else {})}


def _set(name, value):
    def hyper(h):
        return {name: value} if name in h and h[name] != value else None
    return hyper


def _shampoo_square_root(h):
    if h.get("inverse_exponent_override", 2) in (0,):
        return {"inverse_exponent_override": 2}
    return None


def _mars_without_the_ratio(h):
    # gamma' = gamma (1-β₁)/β₁ makes the reference's weight γ'β₁/(1-β₁) the mistaken γ
    beta1 = h["betas"][0]
    if not h.get("gamma") or beta1 == 0:
        return None
    return {"gamma": h["gamma"] * (1 - beta1) / beta1}


def _soap_without_refresh(h):
    return {"precondition_frequency": 10 ** 9} if h.get("precondition_frequency", 0) < 10 ** 9 \
        else None


def _splus_without_refresh(h):
    return {"inverse_steps": 10 ** 9} if h.get("inverse_steps", 0) < 10 ** 9 else None


def _mars_for_every_tensor(h):
    return None if h.get("optimize_1d", True) else {"optimize_1d": True}


def _muon_rms_scale(h):
    # Keller Jordan's (and torch's default) shape scale replaced by Moonlight's RMS match
    return None if h.get("adjust_lr_fn") == "match_rms_adamw" else {
        "adjust_lr_fn": "match_rms_adamw"}


def _scion_momentum_as_beta(h):
    # the weight of the new gradient read as the usual momentum: α -> 1 - α
    m = h.get("momentum")
    return None if m is None or m >= 1 or m == 0.5 else {"momentum": 1 - m}


def _scion_constrained(h):
    # the authors' default (unconstrained=False) where pytorch_optimizer's is unconstrained
    return None if h.get("constraint", True) or h.get("weight_decay") else {"constraint": True}


def _scion_sign_for_spectral(h):
    return None if h.get("norm") != "spectral" else {"norm": "sign", "normalized": None,
                                                     "max_scale": False}


#: Adam-mini's name rules (npoptim.optim.adam_mini): a query's or key's, a norm's
_ADAM_MINI_QK = ("k_proj", "q_proj", "wq", "wk", "query", "key")
_ADAM_MINI_NO_DECAY = ("norm", "ln", "bias")


def _adam_mini_unnamed(matches):
    """AdamMini's case with the parameters whose lower-cased name ``matches`` unnamed: one
    second moment for the whole tensor, and the weight decay (None: no name matches)."""
    def hyper(h):
        names = h.get("param_names") or ()
        renamed = tuple(None if n is not None and matches(n.lower()) else n for n in names)
        return {"param_names": renamed} if renamed != tuple(names) else None
    return hyper


def _adam_mini_decayed_norm(h):
    # (a bias keeps Adam's per-element v, which needs its name; a norm unnamed is one block)
    if not h.get("weight_decay"):
        return None
    return _adam_mini_unnamed(lambda n: "bias" not in n and any(
        w in n for w in _ADAM_MINI_NO_DECAY))(h)


ADAMS = ("Adam", "AdamW")
#: The optimizers with cautious=True (npoptim.optim.cautious) and golden cases of it.
CAUTIOUS = ("Lion",)
KERAS_EPS = ("Adam", "AdamW", "Adagrad", "RMSprop", "Adamax", "NAdam", "Adadelta")
DECAYING = ("Adam", "SGD", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam", "Adadelta")

#: Every entry, in the order reports list them.
CATALOGUE = (
    # -------- conventions: the flavor switches (npoptim.flavors)
    Entry("eps on sqrt(v) (epsilon hat: Keras, TF, ONNX)", ADAMS, "convention",
          "eps added to sqrt(v) with the bias correction in the step size, "
          "lr·sqrt(1-β₂ᵗ)/(1-β₁ᵗ)·m/(sqrt(v)+eps) (Kingma & Ba section 2, TF ApplyAdam, "
          "Keras).", scope=_max_of_raw_v, switches={"eps_mode": "eps_hat"}),
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
          "torch's θ ← θ - lr·(g + μb). On the cases without dampening.",
          scope=_undamped, switches={"lr_in_buffer": True}),
    Entry("lr inside the momentum buffer (RMSprop)", ("RMSprop",), "convention",
          "b ← μb + lr·g/denom, θ ← θ - b (TF, Keras) instead of torch's θ ← θ - lr·b.",
          switches={"lr_in_momentum": True}),
    Entry("cautious scale 1/max(k/n, 1e-3) (timm, C-Optim's C-AdamW)", CAUTIOUS, "convention",
          "the kept elements of a cautious step scaled by 1/max(k/n, 1e-3) (timm's caution=True, "
          "C-Optim c_adamw.py) instead of n/(k+1) (the paper, pytorch_optimizer): k of the n "
          "elements agree with the gradient; on the cautious cases.",
          scope=_scaled_plus_one, switches={"cautious_scale": "floored_mean"}),
    Entry("cautious scale n/(k+1) (the paper, pytorch_optimizer)", CAUTIOUS, "convention",
          "the kept elements of a cautious step scaled by n/(k+1) (the paper, pytorch_optimizer's "
          "apply_cautious, C-Optim c_lion.py) instead of 1/max(k/n, 1e-3) (timm); on the "
          "cautious cases.", scope=_scaled_floored_mean, switches={"cautious_scale": "plus_one"}),
    Entry("Adagrad initial accumulator 0.1 (Keras, TF)", ("Adagrad",), "default",
          "the accumulator starts at 0.1 (Keras/TF's initial_accumulator_value), torch's "
          "at 0.", hyper=_set("initial_accumulator_value", 0.1)),
    Entry("eps on sqrt(v + 1e-15) (pytorch_optimizer's MARS)", ("MARS",), "convention",
          "eps added to sqrt(v + 1e-15) before the bias correction, m·sqrt(1-β₂ᵗ)/((1-β₁ᵗ)"
          "(sqrt(v + 1e-15) + eps)) (pytorch_optimizer 4.1.0), instead of the authors' "
          "m/((sqrt(v)/sqrt(1-β₂ᵗ) + eps)(1-β₁ᵗ)).",
          switches={"eps_mode": "eps_hat", "eps_root": 1e-15}),
    # -------- other frameworks' defaults
    Entry("eps = 1e-7 (Keras default)", KERAS_EPS, "default",
          "Keras's default epsilon, 1e-7, where torch's is 1e-8 (1e-10 for Adagrad, 1e-6 "
          "Adadelta).", hyper=_set("eps", 1e-7)),
    Entry("eps = 1e-6 (d2l default)", ("Adam", "AdamW", "RMSprop"), "default",
          "d2l's from-scratch Adam and RMSprop use eps = 1e-6.", hyper=_set("eps", 1e-6)),
    # -------- mistakes
    Entry("no bias correction of m", ADAMS + ("RAdam", "Adamax"), "mistake",
          "m used as is, not m/(1-β₁ᵗ) (the first steps are 10x smaller with β₁=0.9).",
          scope=_corrects_bias, per_step=_no_bias_correction_m),
    Entry("no bias correction of m (NAdam)", ("NAdam",), "mistake",
          "the two terms without their corrections 1/(1-Πₜ) and 1/(1-Πₜμₜ₊₁): θ ← θ - "
          "γ(1-μₜ)·g/d - γμₜ₊₁·m/d (the product of the μ kept at 0).",
          state_start={"mu_product": 0.0}),
    Entry("no bias correction of v", ADAMS, "mistake",
          "v used as is, not v/(1-β₂ᵗ) (the first steps are ~30x larger with β₂=0.999).",
          scope=_corrects_bias, switches={"bias_correction": False},
          per_step=_bias_correction_m),
    Entry("no bias correction at all", ADAMS, "mistake",
          "neither m nor v bias-corrected (RMSprop with momentum, as Adam's paper warns).",
          switches={"bias_correction": False}),
    Entry("step counter from 0", ADAMS + ("NAdam", "RAdam", "Adamax"), "mistake",
          "the step count is t-1 wherever it is used (bias corrections, NAdam's μₜ, RAdam's "
          "ρₜ): the counter starts at 0 and is incremented after use, so the first step "
          "divides by 1-β⁰ = 0 (inf/NaN).", state_start={"step": -1.0}),
    Entry("step counter one ahead", ADAMS + ("NAdam", "RAdam", "Adamax"), "mistake",
          "the step count is t+1 wherever it is used (a counter that starts at 1 and is "
          "incremented before use).", state_start={"step": 1.0}),
    Entry("Nesterov toggled (SGD)", ("SGD",), "mistake",
          "nesterov=True where the case has False, or the reverse: torch's Nesterov form "
          "d = g + μb against plain momentum d = b.", hyper=_toggle_nesterov),
    Entry("decoupled decay instead of L2", DECAYING, "mistake",
          "weight decay applied to the parameter, θ ← θ(1-γλ) before the step (AdamW, SGDW), "
          "instead of added to the gradient (g + λθ); on the cases with L2 decay.",
          scope=l2_decay, decoupled="before"),
    Entry("decoupled decay after the update", DECAYING + ("AdamW",), "mistake",
          "θ ← θ(1-γλ) applied after the step instead of before it (AdamW's paper and torch "
          "decay first); on the cases that decouple.",
          scope=_decay_before_the_update, decoupled="after"),
    Entry("L2 decay instead of decoupled", DECAYING + ("AdamW",), "mistake",
          "the decoupled weight decay (AdamW, decoupled_weight_decay=True) added to the "
          "gradient instead (g + λθ, Adam's L2); on the cases that decouple.",
          scope=decouples, hyper=_l2_instead_of_decoupled, optimizer={"AdamW": "Adam"}),
    Entry("MARS correction without β₁/(1-β₁)", ("MARS",), "mistake",
          "the corrected gradient c = g + γ(g - g_prev), the weight γβ₁/(1-β₁) of the paper "
          "read as γ (19x weaker at β₁ = 0.95).", hyper=_mars_without_the_ratio),
    Entry("MARS correction left out", ("MARS",), "mistake",
          "c = g (γ = 0 in effect): no variance reduction, clipped AdamW or a one-beta Lion. "
          "The authors' state['last_grad'] = grad keeps a reference to p.grad, so with "
          "zero_grad(set_to_none=False) g_prev is g itself from the second step on.",
          hyper=_set("gamma", 0.0)),
    Entry("MARS without clipping", ("MARS",), "mistake",
          "the corrected gradient used as is, not rescaled to norm 1 where ‖c‖ > 1.",
          switches={"clip_norm": None}),
    Entry("MARS for every tensor (optimize_1d ignored)", ("MARS",), "mistake",
          "the vectors (biases, norms) through MARS too, instead of AdamW with betas_1d, "
          "lr_1d and weight_decay_1d (optimize_1d=False, both sources' default).",
          hyper=_mars_for_every_tensor),
    Entry("sign of the momentum, not of the gradient (Grams)", ("Grams",), "mistake",
          "sign(m)·|u| where Grams takes sign(g)·|u|: that is Adam's update m_hat/(sqrt(v_hat) "
          "+ eps) itself, so the case is replayed through AdamW with the same "
          "hyperparameters (eps_mode, bias_correction and the decoupled decay are AdamW's "
          "too).", optimizer={"Grams": "AdamW"}),
    Entry("L2 decay instead of decoupled (pytorch_optimizer's CAME)", ("CAME",), "convention",
          "CAME's weight decay added to the gradient, g + λθ, before the second moment "
          "(pytorch_optimizer 4.1.0's weight_decouple=False), instead of the authors' "
          "decoupled θ ← θ - γλθ; on the cases that decouple.",
          scope=decouples, hyper=_set("decoupled_weight_decay", False)),
    Entry("CAME without the confidence (Adafactor with momentum)", ("CAME",), "mistake",
          "a matrix steps by its momentum, θ ← θ - γm, not γm/sqrt(S) with S the factored "
          "instability (Û - m)² + ε₂: the paper's baseline, and what mindformers' Came runs "
          "on a CPU device (its FusedAdaFactor kernel).", switches={"confidence": False}),
    Entry("CAME without update clipping", ("CAME",), "mistake",
          "U = G/sqrt(V) used as is, not divided by max(1, RMS(U)/d): at the first step "
          "RMS(U) is about 1/sqrt(1-β₂) (32 at β₂ = 0.999), so the momentum takes a U that "
          "much larger.",
          hyper=_set("clip_threshold", math.inf)),
    Entry("Shampoo's eps in the matrix, not on its eigenvalues", ("Shampoo",), "convention",
          "ε I as the statistics' initial value (pytorch_optimizer's Shampoo and "
          "ScalableShampoo), where Meta's distributed_shampoo adds ε to the eigenvalues at "
          "each root: with β₂ < 1 the matrix's ε decays as β₂ᵗε; on the cases that put it on "
          "the eigenvalues.", hyper=_set("matrix_eps_mode", "added")),
    Entry("Shampoo without grafting", ("Shampoo",), "mistake",
          "ScalableShampoo's direction used at its own scale, not rescaled to the graft's norm "
          "‖D‖/‖G̃‖ (and the graft's momentum a plain copy of the gradient's); on the cases "
          "that graft.", hyper=_set("graft_type", "none")),
    Entry("Shampoo roots -1/2, not -1/(2k)", ("Shampoo",), "mistake",
          "every statistic's inverse square root (full-matrix AdaGrad's exponent) instead of "
          "the -1/(2k) of an order-k tensor: L^(-1/2) G R^(-1/2) for a matrix, where Shampoo "
          "takes L^(-1/4) G R^(-1/4).", hyper=_shampoo_square_root),
    Entry("Shampoo's optax form counted from step 1", ("Shampoo",), "mistake",
          "optax-shampoo's distributed_shampoo ported with the steps counted from 1 (as "
          "pytorch_optimizer's ScalableShampoo counts them) instead of its optax count from 0: "
          "the statistics and roots are first computed at step preconditioning_compute_steps "
          "instead of the first update, every refresh and the Shampoo momentum's start come "
          "one step late; on the optax cases.", hyper=_set("count_from", 1)),
    Entry("APOLLO tensor-wise scaling instead of channel-wise", ("APOLLO",), "mistake",
          "one factor ‖N‖/(‖R‖ + 1e-8) for the whole matrix (APOLLO-Mini's, "
          "scale_type='tensor') where APOLLO scales each channel (row of a tall, column of a "
          "wide matrix) by its own; on the channel-wise cases.",
          hyper=_set("scale_type", "tensor")),
    Entry("APOLLO without the norm-growth limiter", ("APOLLO",), "mistake",
          "the scaled gradient used as is, not divided by max(‖D‖/(ν + 1e-8), 1.01)/1.01 "
          "(Fira's limiter, the authors' disable_nl=True): the update may grow by more than "
          "1.01 per step.", hyper=_set("norm_growth_limiter", False)),
    Entry("APOLLO projector never refreshed", ("APOLLO",), "mistake",
          "the random projector drawn at the first step and kept, not drawn anew every "
          "update_proj_gap steps; on the cases that refresh.",
          hyper=lambda h: {"update_proj_gap": 2 ** 40} if "update_proj_gap" in h else None),
    Entry("APOLLO's low-rank gradient projected back (pytorch_optimizer's APOLLO)",
          ("APOLLO",), "convention",
          "the factors scale the low-rank R = GPᵀ (not G), and the step is its projection back "
          "RP (or PR) times scale once more (pytorch_optimizer 4.1.0's "
          "GaLoreProjector.project_back), instead of the authors' scaled full gradient.",
          hyper=_set("scaled_gradient", "projected_back")),
    Entry("Adam-mini's query and key with one second moment per tensor", ("AdamMini",),
          "mistake", "a query's or key's mean of g² taken over the whole tensor, not per "
          "attention head (dim·dim/n_heads elements each): as if its name matched no rule; on "
          "the cases with a query or key of more than one head.",
          hyper=_adam_mini_unnamed(lambda n: "bias" not in n and any(
              w in n for w in _ADAM_MINI_QK))),
    Entry("Adam-mini's weight decay on the norms too", ("AdamMini",), "mistake",
          "θ(1 - γλ) on the norm layers as well, where the package builds their param groups "
          "with no decay (names with norm or ln); on the cases with decay and a norm.",
          hyper=_adam_mini_decayed_norm),
    Entry("Muon scale 0.2·sqrt(max(A, B)) (Moonlight's RMS match)", ("Muon",), "convention",
          "the orthogonalized update scaled by 0.2·sqrt(max(A, B)), AdamW's update RMS (Liu "
          "et al. 2025, Moonlight; torch's adjust_lr_fn='match_rms_adamw'), instead of Keller "
          "Jordan's sqrt(max(1, A/B)), torch's default: 0.2·sqrt(5) = 0.45 against 1 on a "
          "3x5 matrix.", hyper=_muon_rms_scale),
    Entry("Scion's momentum read as the usual β (1 - α)", ("Scion",), "mistake",
          "Scion's momentum is the weight α of the new gradient, M ← (1-α)M + αG (both "
          "implementations' momentum=0.1 is the usual 0.9); read as the usual β, M ← αM + "
          "(1-α)G, the average forgets almost at once.", hyper=_scion_momentum_as_beta),
    Entry("Scion constrained (the authors' default unconstrained=False)", ("Scion",),
          "convention", "θ ← (1-γ)θ - γρ lmo(M), the conditional-gradient form the authors' "
          "Scion defaults to, where pytorch_optimizer's SCION (constraint=False) steps θ - "
          "γρ lmo(M); on the unconstrained cases without weight decay.",
          hyper=_scion_constrained),
    Entry("Scion without the radius (scale ignored)", ("Scion",), "mistake",
          "the oracle's direction not multiplied by the group's radius ρ (scale): the "
          "update of a layer with ρ = 60 (the paper's output layer) 60 times too small.",
          hyper=_set("scale", 1.0)),
    Entry("Newton–Schulz with the textbook quintic (15/8, -5/4, 3/8)", ("Scion",), "mistake",
          "the convergent quintic Newton–Schulz iteration (a, b, c) = (15/8, -5/4, 3/8) of the "
          "polar factor instead of Keller Jordan's tuned (3.4445, -4.7750, 2.0315): after 5 "
          "iterations small singular values are still far from 1, so the spectral update is "
          "smaller in those directions.",
          switches={"ns_coefficients": (1.875, -1.25, 0.375)}),
    Entry("sign oracle instead of spectral (Scion)", ("Scion",), "mistake",
          "a matrix of norm='spectral' stepped by sign(M)/B (the sign norm's, ℓ∞ → ℓ1 "
          "operator) instead of the orthogonalized M·sqrt(A/B).",
          hyper=_scion_sign_for_spectral),
    Entry("SOAP without bias correction", ("SOAP",), "mistake",
          "the step is γU, not γ·sqrt(1-β₂ᵗ)/(1-β₁ᵗ)·U: at the first update with β = 0.95 "
          "that is 4.5 times smaller.", hyper=_set("correct_bias", False)),
    Entry("SOAP's eigenbases never refreshed", ("SOAP",), "mistake",
          "the eigenbases of the first call kept, no power iteration and QR every "
          "precondition_frequency updates: the trajectory leaves the reference at the first "
          "refresh.", hyper=_soap_without_refresh),
    Entry("SPlus scale 1/(2(m+n)) (the authors' torch file)", ("SPlus",), "convention",
          "a matrix's lr scaled by 1/(2(m+n)), the authors' torch/splus.py "
          "(lr * (1 / (m + n) / 2)), not the paper's and pytorch_optimizer's 2/(m+n): a "
          "quarter of the step.", hyper=_set("matrix_scale", "half_over_sum")),
    Entry("L2 decay instead of decoupled (pytorch_optimizer's SPlus)", ("SPlus",),
          "convention", "SPlus's weight decay added to the gradient, g + λθ, before the "
          "momentum and the statistics (pytorch_optimizer 4.1.0's weight_decouple=False), "
          "instead of θ ← θ(1 - γsλ) after the step; on the cases that decouple.",
          scope=decouples, hyper=_set("decoupled_weight_decay", False)),
    Entry("SPlus's eigenbases computed at step 1 only", ("SPlus",), "mistake",
          "the bases of step 1's statistics kept, not recomputed every inverse_steps steps.",
          hyper=_splus_without_refresh),
    Entry("Kron without the update clipping", ("Kron",), "mistake",
          "the preconditioned momentum U stepped as it is, not scaled to RMS at most 1.1 "
          "(both sources' _clip_update_rms): a step too large wherever RMS(U) > 1.1.",
          switches={"clip_update": False}),
    Entry("Kron's preconditioner updated at every step", ("Kron",), "mistake",
          "the factors fitted at every step instead of when the update counter reaches "
          "1/p of the schedule (precond_update_prob_schedule): the same run until the "
          "schedule first skips a step.",
          switches={"preconditioner_update_probability": 1.0}),
    Entry("Kron's pair without the damping (pytorch_optimizer's Kron)", ("Kron",),
          "convention", "the preconditioner fitted from the debiased momentum as it is, "
          "without kron_torch's G += sqrt(eps_f32) mean|G| V (which the preconditioned step "
          "then also sees); on the cases in kron_torch's form.",
          scope=kron_damped, switches={"probe_damping": False}),
    Entry("PSGD-QUAD stepped by lr, not lr/5 (lr_style='adam')", ("PSGDQuad",), "mistake",
          "the preconditioned, clipped update stepped by the whole lr instead of quad-torch's "
          "lr/5 of lr_style='adam' (its match of Adam's update RMS, 0.2, to PSGD's 1): five "
          "times the step; on the cases in the adam style.",
          scope=quad_adam_style, switches={"lr_style": None}),
    # (not Muon: its cases allow 1e-4 for the bfloat16 iteration, float32 arithmetic is
    # inside; not SOAP, SPlus and Kron: their cases whose source decomposes or solves in
    # float32 allow 1e-6 and 1e-5 for it, and a whole run in float32 can fall inside that)
    Entry("float32 accumulation of float64",
          tuple(o for o in registry.OPTIMIZERS if o not in ("Muon", "SOAP", "SPlus", "Kron")),
          "mistake",
          "a float64 case computed in float32 (state or arithmetic in single precision) and "
          "reported in float64.", dtype="float32"),
    Entry("explicit CSR zero dropped", ("SparseAdam",), "mistake",
          "stored zero entries removed before the update (scipy's eliminate_zeros, a "
          "nonzero() mask): SparseAdam then skips entries torch updates (in Adagrad's and "
          "SGD's update a stored zero changes nothing).",
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
