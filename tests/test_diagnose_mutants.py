"""``npoptim diagnose`` against independent mutants: for each optimizer family the catalogue
covers, the textbook update written here in plain NumPy (never through npoptim's switches or
rules), with every option of torch's golden cases (L2 and decoupled weight decay, lr
schedules, ``maximize``, ``amsgrad``, several parameters, parameters without a gradient, CSR
gradients), and one deliberate mistake in one piece of code (the ``bug`` branches).

Each mutant is run on *all* the float64 golden cases of its optimizer, torch's and (but for
SparseAdam, which has none) Keras's, ONNX's and optax's: the mutants take those flavors'
options too (eps hat or inside the root, Keras's one step count and decoupled decay, lr inside
the momentum, ONNX's post-update decay, optax's amsgrad and NAdam schedule...). So a mistake
reaches some cases only (decoupled decay: the cases that decouple) and the others match the
reference: the right catalogue entry must come first and reproduce every case, and the mutant
without a bug must match.
"""
import functools
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from npoptim.diagnose.catalogue import CATALOGUE
from npoptim.diagnose.engine import diagnose
from npoptim.golden.codec import dumps
from npoptim.golden.replay import replay, results_file
from npoptim.golden.schema import load_all

SUITE = Path("reference_results/cases")
#: The families whose mutants also take the flavors' options, and those flavors' cases
FLAVORED = ("Adam", "AdamW", "NAdam", "RAdam", "Adamax", "SGD", "RMSprop", "Adagrad",
            "Adadelta")
FLAVORS = ("keras", "onnx", "optax")


def golden_files(optimizer):
    """The golden files of the optimizer's cases the mutants are run on: torch's, and the
    flavors' for :data:`FLAVORED`."""
    flavors = [SUITE / f / f"{optimizer}.json" for f in FLAVORS] if optimizer in FLAVORED else []
    return [SUITE / f"{optimizer}.json"] + [f for f in flavors if f.exists()]


@functools.lru_cache(maxsize=None)
def cases_of(optimizer):
    """The float64 cases of each of :func:`golden_files`, or its float32 ones for a file
    without float64 cases (onnxruntime's AdamW); read once (replay copies what it changes)."""
    out = []
    for f in golden_files(optimizer):
        cases = load_all(f, kind="cases")
        dtype = "float64" if any(c.dtype == "float64" for c in cases) else "float32"
        out += [c for c in cases if c.dtype == dtype]
    return out


@pytest.fixture(scope="module")
def suite_of(tmp_path_factory):
    """The suite diagnose is given: the optimizer's own golden files (read in milliseconds;
    the whole suite takes seconds)."""
    def suite(optimizer):
        files = golden_files(optimizer)
        if len(files) == 1:
            return files[0]
        where = tmp_path_factory.mktemp(optimizer)
        for f in files:
            shutil.copy(f, where / "-".join(f.relative_to(SUITE).parts))
        return where
    return suite


# ------------------------------------------------------------------ what the mutants share
def dense(g, shape):
    """A case gradient as the plain code sees it: dense, duplicates summed."""
    if g is None:
        return None
    if hasattr(g, "indptr"):
        return dense_entries(entries(g), g.shape).reshape(shape)
    return np.asarray(g, np.float64)


def entries(g, bug=None):
    """The stored CSR entries ``[((row, col), value)]`` as the code reads them: all of them,
    or with the bug ``"drop zeros"``, ``"first kept"``, ``"last kept"``."""
    out = []
    for row in range(g.shape[0]):
        for k in range(g.indptr[row], g.indptr[row + 1]):
            out.append(((row, int(g.indices[k])), float(g.data[k])))
    if bug == "drop zeros":
        out = [e for e in out if e[1] != 0]
    if bug == "first kept":
        seen = set()
        out = [e for e in out if not (e[0] in seen or seen.add(e[0]))]
    if bug == "last kept":
        last = {key: k for k, (key, _) in enumerate(out)}
        out = [e for k, e in enumerate(out) if last[e[0]] == k]
    return out


def dense_entries(stored, shape):
    out = np.zeros(shape)
    for (row, col), value in stored:
        out[row, col] += value
    return out


def start(p, g, lr, h, decoupled, bug):
    """``(p, g)`` as the rule starts from them, in the mutant's precision: g dense (CSR entries
    as the bug reads them), negated for ``maximize``, then the weight decay."""
    kind = kind_of(bug)
    g = (dense_entries(entries(g, bug), g.shape).reshape(p.shape) if hasattr(g, "indptr")
         else np.asarray(g)).astype(kind)
    return weight_decay(p.astype(kind), -g if h["maximize"] else g, lr, h, decoupled, bug)


def decay_form(h, decoupled, bug):
    """How the code decays the weights: None, ``"l2"`` (λθ added to g), ``"before"`` or
    ``"after"`` (θ(1-γλ) before or after the update; onnxruntime's AdamW decays after)."""
    if not h.get("weight_decay"):
        return None
    if decoupled and bug == "l2" or not decoupled and bug != "decoupled":
        return "l2"
    return "after" if bug == "decay after" or h.get("decay_after_update") else "before"


def weight_decay(p, g, lr, h, decoupled, bug):
    """The decay before the rule: ``(p, g)`` (see :func:`decay_form`)."""
    form = decay_form(h, decoupled, bug)
    if form == "l2":
        return p, g + h["weight_decay"] * p
    return (p * (1 - lr * h["weight_decay"]) if form == "before" else p), g


def decay_after(p, lr, h, decoupled, bug):
    """The decay after the rule (see :func:`decay_form`)."""
    if decay_form(h, decoupled, bug) == "after":
        return p * (1 - lr * h["weight_decay"])
    return p


def kind_of(bug):
    """The float type the mutant computes in: float32 with the bug ``"float32"``."""
    return np.float32 if bug == "float32" else np.float64


def eps_of(h, bug):
    return {"keras eps": 1e-7, "d2l eps": 1e-6, "keras": 1e-7}.get(bug, h["eps"])


def step_of(count, bug):
    return count - 1 if bug == "t from 0" else count + 1 if bug == "t ahead" else count


# ---------------------------------------------------------------------------- the mutants
def adam(optimizer, bug=None):
    """Adam and AdamW, with the flavors' options: where eps goes (``eps_mode``), optax's max
    of the bias-corrected v (``amsgrad_max``), Keras's one step count (``step_scope``), ONNX's
    ``post_weight_decay``, onnxruntime's ``decay_after_update`` and ``bias_correction``. Bug
    ``"keras"``: Keras's Adam, eps hat and eps 1e-7."""
    def make_step(params, h):
        kind = kind_of(bug)
        beta1, beta2 = h["betas"]
        eps = eps_of(h, bug)
        decoupled = optimizer == "AdamW" or h.get("decoupled_weight_decay", False)
        max_of_v_hat = h["amsgrad"] and h.get("amsgrad_max") == "bias_corrected"
        mode = h.get("eps_mode", "bias_corrected")
        if bug in ("eps hat", "keras") and not max_of_v_hat:  # no framework has both
            mode = "eps_hat"
        if bug == "eps in sqrt":
            mode = "in_sqrt"
        one_count = h.get("step_scope") == "global"  # a parameter without a gradient ages
        ms = [np.zeros(p.shape, kind) for p in params]
        vs = [np.zeros(p.shape, kind) for p in params]
        vmax = [np.zeros(p.shape, kind) for p in params]
        counts = [0] * len(params)

        def step(grads, lr):
            for i, (p, g) in enumerate(zip(params, grads)):
                counts[i] += g is not None or one_count
                if g is None:
                    continue
                x, g = start(p, g, lr, h, decoupled, bug)
                ms[i] = beta1 * ms[i] + (1 - beta1) * g
                vs[i] = beta2 * vs[i] + (1 - beta2) * g * g
                t = step_of(counts[i], bug)
                with np.errstate(all="ignore"):
                    b1, b2 = 1 - kind(beta1) ** t, 1 - kind(beta2) ** t
                    corrects = h.get("bias_correction", True)
                    if bug in ("no m correction", "no correction") or not corrects:
                        b1 = kind(1)
                    if bug in ("no v correction", "no correction") or not corrects:
                        b2 = kind(1)
                    if max_of_v_hat:  # optax: the max of v/b2
                        v_hat = vmax[i] = np.maximum(vmax[i], vs[i] / b2)
                    else:
                        v = vmax[i] = np.maximum(vmax[i], vs[i]) if h["amsgrad"] else vs[i]
                        v_hat = v / b2
                    if mode == "eps_hat":  # lr sqrt(b2)/b1 m / (sqrt(v) + eps)
                        x = x - lr * np.sqrt(b2) / b1 * ms[i] / (np.sqrt(v) + eps)
                    elif mode == "in_sqrt":
                        x = x - lr / b1 * ms[i] / np.sqrt(v_hat + eps)
                    else:
                        x = x - lr * (ms[i] / b1) / (np.sqrt(v_hat) + eps)
                x = decay_after(x, lr, h, decoupled, bug)
                p[...] = x * (1 - h.get("post_weight_decay", 0))
            return params
        return step
    return make_step


def nadam(optimizer, bug=None):
    """NAdam with torch's float32 product of the momentum schedule, or (``state_dtype``
    ``"param"``: Keras, optax) in the parameter's dtype; optax's constant ``mu = beta1``
    (``momentum_schedule="none"``); Keras's one step count, which also ages the product."""
    def make_step(params, h):
        kind = kind_of(bug)
        beta1, beta2 = h["betas"]
        eps, psi = eps_of(h, bug), h["momentum_decay"]
        decoupled = h["decoupled_weight_decay"]
        one_count = h.get("step_scope") == "global"
        product_kind = kind if h.get("state_dtype") == "param" else np.float32
        ms = [np.zeros(p.shape, kind) for p in params]
        vs = [np.zeros(p.shape, kind) for p in params]
        products = [product_kind(1.0)] * len(params)
        counts = [0] * len(params)

        def mu(t):
            if h.get("momentum_schedule") == "none":
                return beta1
            return beta1 * (1 - 0.5 * 0.96 ** (t * psi))

        def step(grads, lr):
            for i, (p, g) in enumerate(zip(params, grads)):
                if g is None and not one_count:
                    continue
                counts[i] += 1
                t = step_of(counts[i], bug)
                products[i] = product_kind(products[i] * product_kind(mu(t)))
                if g is None:
                    continue
                x, g = start(p, g, lr, h, decoupled, bug)
                product, product_next = float(products[i]), float(products[i]) * mu(t + 1)
                if bug == "no m correction":
                    product = product_next = 0.0
                ms[i] = beta1 * ms[i] + (1 - beta1) * g
                vs[i] = beta2 * vs[i] + (1 - beta2) * g * g
                with np.errstate(all="ignore"):
                    d = np.sqrt(vs[i] / (1 - beta2 ** t)) + eps
                    x = x - lr * (1 - mu(t)) / (1 - product) * g / d
                    x = x - lr * mu(t + 1) / (1 - product_next) * ms[i] / d
                p[...] = decay_after(x, lr, h, decoupled, bug)
            return params
        return step
    return make_step


def radam(optimizer, bug=None):
    """RAdam; optax's eps on the bias-corrected sqrt(v) and its threshold rho >= 5."""
    def make_step(params, h):
        kind = kind_of(bug)
        beta1, beta2 = h["betas"]
        decoupled = h["decoupled_weight_decay"]
        ms = [np.zeros(p.shape, kind) for p in params]
        vs = [np.zeros(p.shape, kind) for p in params]
        counts = [0] * len(params)
        rho_inf = 2 / (1 - beta2) - 1

        def step(grads, lr):
            for i, (p, g) in enumerate(zip(params, grads)):
                if g is None:
                    continue
                x, g = start(p, g, lr, h, decoupled, bug)
                ms[i] = beta1 * ms[i] + (1 - beta1) * g
                vs[i] = beta2 * vs[i] + (1 - beta2) * g * g
                counts[i] += 1
                t = step_of(counts[i], bug)
                with np.errstate(all="ignore"):
                    # in double (as torch), and 0/0 a NaN (not an exception) at t = 0
                    b1, b2 = float(1 - np.float64(beta1) ** t), float(1 - np.float64(beta2) ** t)
                    m_hat = ms[i] if bug == "no m correction" else ms[i] / b1
                    rho = rho_inf - float(np.float64(2 * t * beta2 ** t) / b2)
                    if rho >= 5 if h.get("rectify_threshold_inclusive") else rho > 5:
                        rect = math.sqrt((rho - 4) * (rho - 2) * rho_inf
                                         / ((rho_inf - 4) * (rho_inf - 2) * rho))
                        if h.get("eps_mode") == "bias_corrected":
                            adaptive = 1 / (np.sqrt(vs[i] / b2) + h["eps"])
                        else:
                            adaptive = math.sqrt(b2) / (np.sqrt(vs[i]) + h["eps"])
                        x = x - lr * m_hat * rect * adaptive
                    else:
                        x = x - lr * m_hat
                p[...] = decay_after(x, lr, h, decoupled, bug)
            return params
        return step
    return make_step


def adamax(optimizer, bug=None):
    """Adamax; Keras's eps after the max (``eps_mode="added"``) and one step count."""
    def make_step(params, h):
        kind = kind_of(bug)
        beta1, beta2 = h["betas"]
        eps = eps_of(h, bug)
        decoupled = h.get("decoupled_weight_decay", False)
        added = bug == "eps added" or h.get("eps_mode") == "added"
        one_count = h.get("step_scope") == "global"
        ms = [np.zeros(p.shape, kind) for p in params]
        us = [np.zeros(p.shape, kind) for p in params]
        counts = [0] * len(params)

        def step(grads, lr):
            for i, (p, g) in enumerate(zip(params, grads)):
                counts[i] += g is not None or one_count
                if g is None:
                    continue
                x, g = start(p, g, lr, h, decoupled, bug)
                t = step_of(counts[i], bug)
                ms[i] = beta1 * ms[i] + (1 - beta1) * g
                with np.errstate(all="ignore"):
                    clr = lr if bug == "no m correction" else lr / (1 - kind(beta1) ** t)
                    if added:  # Keras: max(b2 u, |g|), m / (u + eps)
                        us[i] = np.maximum(beta2 * us[i], np.abs(g))
                        x = x - clr * ms[i] / (us[i] + eps)
                    else:
                        us[i] = np.maximum(beta2 * us[i], np.abs(g) + eps)
                        x = x - clr * ms[i] / us[i]
                p[...] = decay_after(x, lr, h, decoupled, bug)
            return params
        return step
    return make_step


def sgd(optimizer, bug=None):
    """SGD; Keras's momentum with the lr inside (``lr_in_buffer``)."""
    def make_step(params, h):
        kind = kind_of(bug)
        mu, damp = h["momentum"], h["dampening"]
        decoupled = h.get("decoupled_weight_decay", False)
        # a flag torch's SGD takes: nesterov needs momentum and no dampening
        nesterov = h["nesterov"] != (bug == "nesterov" and mu and not damp)
        keras = (bug == "lr in buffer" or h.get("lr_in_buffer")) and mu and not damp
        bufs = [None] * len(params)

        def step(grads, lr):
            for i, (p, g) in enumerate(zip(params, grads)):
                if g is None:
                    continue
                x, g = start(p, g, lr, h, decoupled, bug)
                if keras:  # m = mu m - lr g; p += m (nesterov: p += mu m - lr g)
                    bufs[i] = lr * g if bufs[i] is None else mu * bufs[i] + lr * g
                    x = x - (mu * bufs[i] + lr * g if nesterov else bufs[i])
                else:
                    if mu:
                        bufs[i] = g.copy() if bufs[i] is None else mu * bufs[i] + (1 - damp) * g
                        g = g + mu * bufs[i] if nesterov else bufs[i]
                    x = x - lr * g
                p[...] = decay_after(x, lr, h, decoupled, bug)
            return params
        return step
    return make_step


def rmsprop(optimizer, bug=None):
    """RMSprop; Keras's and optax's eps inside the root and lr inside the momentum."""
    def make_step(params, h):
        kind = kind_of(bug)
        alpha, mu, eps = h["alpha"], h["momentum"], eps_of(h, bug)
        decoupled = h.get("decoupled_weight_decay", False)
        in_sqrt = bug == "eps in sqrt" or h.get("eps_in_sqrt")
        keras = bug == "lr in buffer" or h.get("lr_in_momentum")
        squares = [np.zeros(p.shape, kind) for p in params]
        averages = [np.zeros(p.shape, kind) for p in params]
        bufs = [np.zeros(p.shape, kind) for p in params]

        def step(grads, lr):
            for i, (p, g) in enumerate(zip(params, grads)):
                if g is None:
                    continue
                x, g = start(p, g, lr, h, decoupled, bug)
                squares[i] = alpha * squares[i] + (1 - alpha) * g * g
                centered = squares[i]
                if h["centered"]:
                    averages[i] = alpha * averages[i] + (1 - alpha) * g
                    centered = squares[i] - averages[i] ** 2
                d = np.sqrt(centered + eps) if in_sqrt else np.sqrt(centered) + eps
                if mu and keras:  # Keras, TF: b = mu b + lr g/d; p -= b
                    bufs[i] = mu * bufs[i] + lr * g / d
                    x = x - bufs[i]
                elif mu:
                    bufs[i] = mu * bufs[i] + g / d
                    x = x - lr * bufs[i]
                else:
                    x = x - lr * g / d
                p[...] = decay_after(x, lr, h, decoupled, bug)
            return params
        return step
    return make_step


def adagrad(optimizer, bug=None):
    """Adagrad; Keras's and optax's eps inside the root."""
    def make_step(params, h):
        kind = kind_of(bug)
        initial = 0.1 if bug == "accumulator 0.1" else h["initial_accumulator_value"]
        eps = eps_of(h, bug)
        decoupled = h.get("decoupled_weight_decay", False)
        in_sqrt = bug == "eps in sqrt" or h.get("eps_in_sqrt")
        sums = [np.full(p.shape, initial, kind) for p in params]
        counts = [0] * len(params)

        def step(grads, lr):
            for i, (p, g) in enumerate(zip(params, grads)):
                if g is None:
                    continue
                x, g = start(p, g, lr, h, decoupled, bug)
                counts[i] += 1
                clr = lr / (1 + (counts[i] - 1) * h["lr_decay"])
                sums[i] = sums[i] + g * g
                d = np.sqrt(sums[i] + eps) if in_sqrt else np.sqrt(sums[i]) + eps
                p[...] = decay_after(x - clr * g / d, lr, h, decoupled, bug)
            return params
        return step
    return make_step


def adadelta(optimizer, bug=None):
    def make_step(params, h):
        kind = kind_of(bug)
        rho, eps = h["rho"], eps_of(h, bug)
        decoupled = h.get("decoupled_weight_decay", False)
        squares = [np.zeros(p.shape, kind) for p in params]
        deltas = [np.zeros(p.shape, kind) for p in params]

        def step(grads, lr):
            for i, (p, g) in enumerate(zip(params, grads)):
                if g is None:
                    continue
                x, g = start(p, g, lr, h, decoupled, bug)
                squares[i] = rho * squares[i] + (1 - rho) * g * g
                delta = np.sqrt(deltas[i] + eps) / np.sqrt(squares[i] + eps) * g
                deltas[i] = rho * deltas[i] + (1 - rho) * delta * delta
                p[...] = decay_after(x - lr * delta, lr, h, decoupled, bug)
            return params
        return step
    return make_step


def sparse_adam(optimizer, bug=None):
    """SparseAdam on the stored entries (summed per position unless the bug says otherwise)."""
    def make_step(params, h):
        kind = kind_of(bug)
        beta1, beta2 = h["betas"]
        ms = [np.zeros(p.shape, kind) for p in params]
        vs = [np.zeros(p.shape, kind) for p in params]
        counts = [0] * len(params)

        def step(grads, lr):
            for i, (p, g) in enumerate(zip(params, grads)):
                if g is None:
                    continue
                counts[i] += 1
                summed = {}
                for key, value in entries(g, bug):
                    value = kind(-value if h["maximize"] else value)
                    summed[key] = summed.get(key, kind(0)) + value
                m, v = ms[i].reshape(g.shape), vs[i].reshape(g.shape)
                x = p.astype(kind).reshape(g.shape)
                b1, b2 = 1 - beta1 ** counts[i], 1 - beta2 ** counts[i]
                for key, value in summed.items():
                    m[key] += (1 - beta1) * (value - m[key])
                    v[key] += (1 - beta2) * (value * value - v[key])
                    if bug == "adam eps":  # Adam's placement: m_hat / (sqrt(v_hat) + eps)
                        x[key] -= lr * (m[key] / b1) / (np.sqrt(v[key] / b2) + h["eps"])
                    else:
                        x[key] -= lr * math.sqrt(b2) / b1 * m[key] / (np.sqrt(v[key])
                                                                      + h["eps"])
                p[...] = x.reshape(p.shape)
            return params
        return step
    return make_step


def mars(optimizer, bug=None):
    """MARS's approximate form with both published forms' switches (eps placement, eps_root,
    weight decay form, which tensors are matrices), amsgrad, the Lion type and the AdamW of
    the other tensors. Bugs: ``"no ratio"`` (c = g + γ(g - g_prev)), ``"no correction"``
    (c = g), ``"no clipping"``, ``"eps hat"`` (pytorch_optimizer's denominator), ``"all
    mars"`` (optimize_1d ignored), ``"float32"``."""
    def make_step(params, h):
        kind = kind_of(bug)
        ms = [np.zeros(p.shape, kind) for p in params]
        vs = [np.zeros(p.shape, kind) for p in params]
        vmax = [np.zeros(p.shape, kind) for p in params]
        prevs = [np.zeros(p.shape, kind) for p in params]
        counts = [0] * len(params)

        def step(grads, lr):
            for i, (p, g) in enumerate(zip(params, grads)):
                if g is None:
                    continue
                counts[i] += 1
                t = counts[i]
                g = np.asarray(g).astype(kind)
                g = -g if h["maximize"] else g
                x = p.astype(kind)
                matrix = p.ndim == 2 if h["mars_ndim"] == "exactly_2" else p.ndim >= 2
                lion = False
                if h["optimize_1d"] or matrix or bug == "all mars":
                    (beta1, beta2), step_lr, wd = h["betas"], lr, h["weight_decay"]
                    ratio = 1.0 if bug == "no ratio" else beta1 / (1 - beta1)
                    c = g if bug == "no correction" else g + h["gamma"] * ratio * (g - prevs[i])
                    norm = np.sqrt(np.sum(c * c))
                    if bug != "no clipping" and h["clip_norm"] is not None \
                            and norm > h["clip_norm"]:
                        c = c * (h["clip_norm"] / norm)
                    lion = h["mars_type"] == "lion"
                else:  # AdamW at lr · lr_1d / (the constructor's lr)
                    (beta1, beta2), wd = h["betas_1d"], h["weight_decay_1d"]
                    step_lr, c = lr * h["lr_1d"] / h["lr"], g
                ms[i] = beta1 * ms[i] + (1 - beta1) * c
                if lion:
                    u = np.sign(ms[i])
                else:
                    vs[i] = beta2 * vs[i] + (1 - beta2) * c * c
                    v = vmax[i] = np.maximum(vmax[i], vs[i]) if h["amsgrad"] else vs[i]
                    b1, b2 = 1 - beta1 ** t, 1 - beta2 ** t
                    if bug == "eps hat" or h["eps_mode"] == "eps_hat":
                        root = 1e-15 if bug == "eps hat" else h["eps_root"]
                        u = ms[i] * math.sqrt(b2) / (b1 * (np.sqrt(v + root) + h["eps"]))
                    else:
                        u = ms[i] / b1 / (np.sqrt(v + h["eps_root"]) / math.sqrt(b2) + h["eps"])
                if h["weight_decay_form"] == "decoupled":
                    x = x * (1 - step_lr * wd) - step_lr * u
                else:
                    x = x - step_lr * (u + wd * x)
                prevs[i] = g
                p[...] = x
            return params
        return step
    return make_step


def grams(optimizer, bug=None):
    """Grams: Adam's moments, the step sign(g)·|u| with u Adam's update (eps on the
    bias-corrected sqrt(v), or ``eps_mode="eps_hat"``), the decay decoupled. Bug
    ``"momentum sign"``: sign(m)·|u|, which is u."""
    def make_step(params, h):
        kind = kind_of(bug)
        beta1, beta2 = h["betas"]
        ms = [np.zeros(p.shape, kind) for p in params]
        vs = [np.zeros(p.shape, kind) for p in params]
        counts = [0] * len(params)

        def step(grads, lr):
            for i, (p, g) in enumerate(zip(params, grads)):
                if g is None:
                    continue
                counts[i] += 1
                x, g = start(p, g, lr, h, True, bug)
                ms[i] = beta1 * ms[i] + (1 - beta1) * g
                vs[i] = beta2 * vs[i] + (1 - beta2) * g * g
                b1, b2 = 1 - kind(beta1) ** counts[i], 1 - kind(beta2) ** counts[i]
                if not h["bias_correction"]:
                    b1 = b2 = kind(1)
                if h["eps_mode"] == "eps_hat":
                    u = lr * np.sqrt(b2) / b1 * ms[i] / (np.sqrt(vs[i]) + h["eps"])
                else:
                    u = lr * (ms[i] / b1) / (np.sqrt(vs[i] / b2) + h["eps"])
                direction = ms[i] if bug == "momentum sign" else g
                p[...] = x - np.sign(direction) * np.abs(u)
            return params
        return step
    return make_step


def lion(optimizer, bug=None):
    """Lion in both decay forms (``weight_decay_form``), with the cautious mask and its two
    scales. Bugs ``"floored mean"`` and ``"plus one"``: that scale on every cautious case."""
    def make_step(params, h):
        kind = kind_of(bug)
        beta1, beta2 = h["betas"]
        ms = [np.zeros(p.shape, kind) for p in params]
        scale_form = {"floored mean": "floored_mean", "plus one": "plus_one"}.get(
            bug, h.get("cautious_scale", "plus_one"))

        def step(grads, lr):
            for i, (p, g) in enumerate(zip(params, grads)):
                if g is None:
                    continue
                g = np.asarray(g).astype(kind)
                g = -g if h["maximize"] else g
                x = p.astype(kind)
                c = beta1 * ms[i] + (1 - beta1) * g
                u = np.sign(c)
                if h.get("cautious"):
                    kept = (u * g > 0).astype(kind)
                    n, k = kept.size, kept.sum()
                    scale = n / (k + 1) if scale_form == "plus_one" else 1 / max(k / n, 1e-3)
                    u = u * kept * scale
                if h["weight_decay_form"] == "decoupled":
                    x = x * (1 - lr * h["weight_decay"]) - lr * u
                else:
                    x = x - lr * (u + h["weight_decay"] * x)
                ms[i] = beta2 * ms[i] + (1 - beta2) * g
                p[...] = x
            return params
        return step
    return make_step


def came(optimizer, bug=None):
    """CAME (the authors' came-pytorch) with pytorch_optimizer's options: tensors of two or
    more dimensions factored over their last two, decoupled, fixed or L2 decay, maximize,
    ams_bound. Bugs: ``"l2"`` (the decoupled decay added to the gradient), ``"no clipping"``,
    ``"no confidence"`` (a matrix steps by m, as Adafactor with momentum), ``"float32"``."""
    def factored_rsqrt(row, col):  # 1/sqrt(row·col/mean(row)), row (..., R), col (..., C)
        return 1 / np.sqrt(row[..., :, None] * col[..., None, :]
                           / row.mean(axis=-1)[..., None, None])

    def make_step(params, h):
        kind = kind_of(bug)
        state = [dict(m=np.zeros(p.shape, kind), hat=np.zeros(p.shape, kind),
                      v=np.zeros(p.shape, kind), r=np.zeros(p.shape[:-1], kind),
                      c=np.zeros(p.shape[:-2] + p.shape[-1:], kind),
                      rr=np.zeros(p.shape[:-1], kind),
                      rc=np.zeros(p.shape[:-2] + p.shape[-1:], kind)) for p in params]

        def step(grads, lr):
            b1, b2, b3 = h["betas"]
            e1, e2 = h["eps"]
            wd = h["weight_decay"]
            l2 = bug == "l2" or not h["decoupled_weight_decay"]
            for p, g, s in zip(params, grads, state):
                if g is None:
                    continue
                x = p.astype(kind)
                g = np.asarray(g).astype(kind)
                g = -g if h["maximize"] else g
                if l2:
                    g = g + wd * x
                elif wd:
                    x = x * (1 - wd * (1.0 if h["fixed_decay"] else lr))
                sq = g * g + e1
                if p.ndim >= 2:
                    s["r"] = b2 * s["r"] + (1 - b2) * sq.mean(axis=-1)
                    s["c"] = b2 * s["c"] + (1 - b2) * sq.mean(axis=-2)
                    inv = factored_rsqrt(s["r"], s["c"])
                else:
                    s["v"] = b2 * s["v"] + (1 - b2) * sq
                    inv = 1 / np.sqrt(s["v"])
                if h["ams_bound"]:
                    s["hat"] = np.maximum(s["hat"], 1 / inv)
                    inv = 1 / np.sqrt(s["hat"] / b2)
                u = g * inv
                if bug != "no clipping":
                    u = u / max(1.0, np.sqrt(np.mean(u * u)) / h["clip_threshold"])
                s["m"] = b1 * s["m"] + (1 - b1) * u
                if p.ndim >= 2 and bug != "no confidence":
                    res = (u - s["m"]) ** 2 + e2
                    s["rr"] = b3 * s["rr"] + (1 - b3) * res.mean(axis=-1)
                    s["rc"] = b3 * s["rc"] + (1 - b3) * res.mean(axis=-2)
                    x = x - lr * factored_rsqrt(s["rr"], s["rc"]) * s["m"]
                else:
                    x = x - lr * s["m"]
                p[...] = x
            return params
        return step
    return make_step


def shampoo(optimizer, bug=None):
    """Shampoo, pytorch_optimizer's (sum from eps I, roots -1/(2k) every few steps, zero before
    the first, momentum toward the last preconditioned gradient) and variant "scalable"
    (ScalableShampoo: blocks, β2 statistics, grafting, the start step, Nesterov, the coupled
    Newton root with its ridge) and variant "optax" (optax-shampoo's distributed_shampoo: the
    count from 0, vectors preconditioned, its dimension merging, its power iteration from
    RandomState(1729), Newton to 1e-6 with its ratio rule, a failed root dropped, the
    normalized grafts, the decoupled decay in the step), roots by LAPACK's eigh or the
    textbook Newton iteration. Bugs: ``"eps added"`` (eps I in the statistics where the case
    puts it on the eigenvalues), ``"no graft"``, ``"square root"`` (every root -1/2),
    ``"count from 1"`` (optax's form with the steps counted from 1), ``"float32"``."""
    def eigen_root(a, p, eps, mode):
        w, q = np.linalg.eigh(a)
        w = np.abs(w) if mode == "added" else np.maximum(w, 0) + eps
        return (q * w ** (-1.0 / p)) @ q.T

    def newton_root(a, p, ridge):
        n = a.shape[0]
        if n == 1:
            return (a + ridge * np.maximum(a, 1e-16)) ** (-1.0 / p)
        v = np.array([(i + 1) * 0.6180339887498949 % 1.0 - 0.5 for i in range(n)])
        for _ in range(100):
            v = a @ v
            v = v / max(np.linalg.norm(v), np.finfo(float).tiny)
        g = a + max(v @ a @ v, 1e-16) * ridge * np.eye(n)
        z = (1 + p) / (2 * np.linalg.norm(g))
        x, m = np.eye(n) * z ** (1.0 / p), g * z
        err0 = np.max(np.abs(m - np.eye(n)))
        for _ in range(100):
            t = (1 + 1.0 / p) * np.eye(n) - m / p
            x_new, m_new = x @ t, np.linalg.matrix_power(t, p) @ m
            err = np.max(np.abs(m_new - np.eye(n)))
            if err > 1.2 * err0 or err <= 1e-3:
                return x if err > 1.2 * err0 else x_new
            x, m, err0 = x_new, m_new, err
        return x

    def optax_root(a, p, eps, relative, tol, padded):
        n, one = a.shape[0], np.eye(a.shape[0], dtype=a.dtype)
        lam = 1.0
        if relative:  # its power iteration, to an absolute 1e-6
            v, lam = np.random.RandomState(1729).uniform(-1.0, 1.0, n).astype(a.dtype), 0.0
            for _ in range(100):
                v = v / np.linalg.norm(v)
                av = a @ v
                new = v @ av
                v, done, lam = av, abs(new - lam) <= 1e-6, new
                if done:
                    break
        ridge = eps * max(lam, 1e-6)
        if n == 1 and padded == 1:
            return (a + a.dtype.type(ridge)) ** a.dtype.type(-1.0 / p), 0.0
        g = a + a.dtype.type(ridge) * one
        z = (1 + p) / (2 * np.linalg.norm(g))
        x, m = one * a.dtype.type(z ** (1.0 / p)), g * a.dtype.type(z)
        err, old, ratio, it = np.max(np.abs(m - one)), x, 1.0, 0
        while it < 100 and err > tol and ratio < 1.2:
            t = a.dtype.type(1 + 1.0 / p) * one - m / a.dtype.type(p)
            m_new = np.linalg.matrix_power(t, p) @ m
            old, x = x, x @ t
            new_err = np.max(np.abs(m_new - one))
            ratio, m, err, it = new_err / err, m_new, new_err, it + 1
        return (x if ratio < 1.2 else old), err

    def optax_merge(shape, bound):
        if shape and all(d == 1 for d in shape):
            return (1,)
        out, prod = [], 1
        for d in shape:
            if prod * d <= bound:
                prod *= d
            else:
                out += [prod] if prod > 1 else []
                prod = d
        return tuple(out + ([prod] if prod > 1 else []))

    def mode(x, mat, axis):  # x ×_axis mat
        return np.moveaxis(np.tensordot(mat, x, axes=([1], [axis])), 0, axis)

    def gram(x, axis):
        u = np.moveaxis(x, axis, 0).reshape(x.shape[axis], -1)
        return u @ u.T

    def make_step(params, h):
        kind = kind_of(bug)
        optax = h["variant"] == "optax"
        scalable = h["variant"] in ("scalable", "optax")
        count_from = 1 if bug == "count from 1" else h["count_from"]
        eps_mode = "added" if bug == "eps added" else h["matrix_eps_mode"]
        graft_type = "none" if bug == "no graft" else h["graft_type"]
        eps = h["matrix_eps"]
        start = eps if eps_mode == "added" else 0.0
        state = []
        for p in params:
            shape = p.shape
            limit = h["no_preconditioning_for_layers_with_dim_gt"]
            if optax and h["shape_interpretation"]:
                shape = optax_merge(shape, h["merge_small_dims_block_size"])
            if optax and (len(p.shape) < h["skip_preconditioning_rank_lt"]
                          or any(d > limit for d in p.shape)):
                blocks = []
            elif scalable and (optax or not h["shape_interpretation"] and len(shape) > 1) and all(
                    d <= limit for d in shape):
                b = h["block_size"]
                cuts = [[(s, min(s + b, d)) for s in range(0, d, b)] if b < d else [(0, d)]
                        for d in shape]
                blocks = [()]
                for c in cuts:
                    blocks = [x + (slice(*y),) for x in blocks for y in c]
            else:
                blocks = [] if scalable else [tuple(slice(0, d) for d in shape)]
            sides = [[sl.stop - sl.start for sl in bl] for bl in blocks]
            state.append(dict(
                blocks=blocks, step=0, shape=shape,
                m=np.zeros(p.shape, kind), gm=np.zeros(p.shape, kind),
                acc=np.zeros(p.shape, kind),
                stats=[[start * np.eye(d, dtype=kind) for d in sd] for sd in sides],
                roots=[[(np.eye(d, dtype=kind) if scalable else np.zeros((d, d), kind))
                        for d in sd] for sd in sides]))

        padded = max([d for s in state for sd in s["stats"] for d in (m.shape[0] for m in sd)],
                     default=1)

        def root(a, order):
            p = 2 if bug == "square root" else (h["inverse_exponent_override"] or 2 * order)
            if optax:
                return optax_root(a, p, eps, h["relative_matrix_eps"], h["root_tolerance"],
                                  padded)
            if h["inverse_root"] == "newton":
                return newton_root(a, p, eps)
            return eigen_root(a, p, eps, eps_mode)

        def simple(x, g, s, lr):
            wd = h["weight_decay"]
            if h["momentum"] > 0:
                if s["step"] == 1:
                    s["m"] = -g if h["maximize"] else g
                g = g + h["momentum"] * (s["m"] - g)
            if wd and h["decoupled_weight_decay"]:
                x = x * (1 - wd * (1.0 if h["fixed_decay"] else lr))
            elif wd:
                g = g + wd * x
            out = g
            for i in range(g.ndim):
                s["stats"][0][i] = s["stats"][0][i] + gram(g, i)
                if s["step"] % h["preconditioning_compute_steps"] == 0:
                    s["roots"][0][i] = root(s["stats"][0][i], g.ndim)
                out = mode(out, s["roots"][0][i], i)
            s["m"] = out
            return x - lr * out

        def scaled(x, g, s, lr):
            b1, b2 = h["betas"]
            ma = h["moving_average_for_momentum"]
            w = 1 - b1 if ma else 1.0
            mult = 1.0 if h["decoupled_learning_rate"] else lr
            count = s["step"] - 1 + count_from
            gs = g / (np.linalg.norm(g) + 1e-16) if graft_type.endswith("_normalized") else g
            if graft_type.startswith("adagrad"):
                s["acc"] = s["acc"] + gs * gs
            elif graft_type.startswith("rmsprop"):
                s["acc"] = b2 * s["acc"] + (1 - b2) * gs * gs
            d = np.sign(g) if graft_type == "sqrt_n" else g
            if graft_type.startswith(("adagrad", "rmsprop")):
                d = gs / (np.sqrt(s["acc"]) + h["diagonal_eps"])
            d = d * mult
            if s["blocks"]:
                gr = g.reshape(s["shape"])
                out = np.empty_like(gr)
                for bl, stats, roots in zip(s["blocks"], s["stats"], s["roots"]):
                    piece = gr[bl]
                    for i in range(gr.ndim):
                        if count % h["statistics_compute_steps"] == 0:
                            stats[i] = b2 * stats[i] + (1 - b2) * gram(piece, i)
                    for i in range(gr.ndim):
                        if count % h["preconditioning_compute_steps"] == 0:
                            new = root(stats[i], gr.ndim)
                            if not optax:
                                roots[i] = new
                            elif not (np.isnan(np.float32(new[1])) or np.float32(new[1])
                                      >= np.float32(h["inverse_failure_threshold"])):
                                roots[i] = new[0]
                        piece = mode(piece, roots[i].T, i)
                    out[bl] = piece
                sg = out.reshape(g.shape) * mult
            else:
                sg = d.copy()
            if graft_type != "none":
                sg = sg * (np.linalg.norm(d) / (np.linalg.norm(sg) + 1e-16))
            wd = h["weight_decay"]
            x0 = x
            if wd and h["decoupled_weight_decay"] and not optax:
                x = x * (1 - lr * wd)
            elif wd and not h["decoupled_weight_decay"]:
                d, sg = d + wd * x, sg + wd * x
            s["m"] = s["m"] + w * (sg - s["m"]) if ma else b1 * s["m"] + sg
            s["gm"] = b1 * s["gm"] + w * d
            pre = count >= h["start_preconditioning_step"]
            u = s["m"] if pre else s["gm"]
            if h["nesterov"]:
                new = sg if pre else d
                u = u + w * (new - u) if ma else b1 * u + new
            if wd and h["decoupled_weight_decay"] and optax:  # γλθ in the step (γ²λ)
                u = u + lr * wd * x0
            return x - (lr if h["decoupled_learning_rate"] else 1.0) * u

        def step(grads, lr):
            for p, g, s in zip(params, grads, state):
                if g is None:
                    continue
                s["step"] += 1
                g = np.asarray(g).astype(kind)
                g = -g if h["maximize"] else g
                x = p.astype(kind)
                p[...] = (scaled if scalable else simple)(x, g, s, lr)
            return params
        return step
    return make_step


def apollo(optimizer, bug=None):
    """APOLLO with its switches (the authors' full-gradient scaling or pytorch_optimizer's
    projected back), projectors from npoptim's counter stream (the cases' definition of
    them). Bugs: ``"tensor"`` (one factor where the case scales channels), ``"no limiter"``,
    ``"no refresh"`` (the first projector kept), ``"projected back"`` (pytorch_optimizer's
    scaled low-rank gradient where the case scales the full one), ``"float32"``."""
    from npoptim.kernels.counter_stream import standard_normal

    def make_step(params, h):
        kind = kind_of(bug)
        beta1, beta2 = h["betas"]
        rank, gap = h["rank"], h["update_proj_gap"]
        state = [dict(t=0, m=None, v=None, proj=None, nu=None) for _ in params]

        def refreshes(t):
            return t == 1 or (bug != "no refresh" and (t - h["refresh_offset"]) % gap == 0)

        def step(grads, lr):
            for i, (p, g) in enumerate(zip(params, grads)):
                if g is None:
                    continue
                s = state[i]
                s["t"] += 1
                t = s["t"]
                x, g = p.astype(kind), np.asarray(g).astype(kind)
                size = math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t) if h["correct_bias"] else 1
                step_size = lr * size
                matrix = p.ndim == 2 and min(p.shape) > 0
                tall = matrix and p.shape[0] >= p.shape[1]
                if matrix and refreshes(t):
                    shape = (rank, p.shape[1]) if tall else (p.shape[0], rank)
                    z = standard_normal(h["seed"], i, t, shape[0] * shape[1]) / math.sqrt(rank)
                    s["proj"] = z.reshape(shape).astype(p.dtype).astype(kind)
                r = (g @ s["proj"].T if tall else s["proj"].T @ g) if matrix else g
                if s["m"] is None:
                    s["m"], s["v"] = np.zeros_like(r), np.zeros_like(r)
                s["m"] = beta1 * s["m"] + (1 - beta1) * r
                s["v"] = beta2 * s["v"] + (1 - beta2) * r * r
                n = s["m"] / (np.sqrt(s["v"]) + h["eps"])
                if matrix:
                    back = h["scaled_gradient"] == "projected_back" or bug == "projected back"
                    base = r if back else g
                    axis = 0 if base.shape[0] < base.shape[1] else 1
                    if h["scale_type"] == "tensor" or bug == "tensor":
                        c = np.linalg.norm(n) / (np.linalg.norm(r) + 1e-8)
                    else:
                        c = (np.linalg.norm(n, axis=axis) / (np.linalg.norm(r, axis=axis) + 1e-8))
                        c = c[:, None] if axis == 1 else c[None, :]
                    d = base * c
                    root = math.sqrt(h["scale"])
                    if h["scale_front"]:
                        d = d * root
                    if h["norm_growth_limiter"] and bug != "no limiter":
                        size_d = np.linalg.norm(d)
                        if s["nu"] is not None:
                            limiter = max(size_d / (s["nu"] + 1e-8), 1.01) / 1.01
                            d, size_d = d / limiter, size_d / limiter
                        s["nu"] = size_d
                    if not h["scale_front"]:
                        d = d * root
                    if back:
                        d = (d @ s["proj"] if tall else s["proj"] @ d) * h["scale"]
                    n = d
                x = x - step_size * n
                if h["decay_lr"] == "lr":
                    x = x - lr * h["weight_decay"] * x
                else:
                    x = x * (1 - h["weight_decay"] * step_size)
                p[...] = x
            return params
        return step
    return make_step


def _bf16(x):
    """float32 values rounded to bfloat16 (ties to even) by their bits."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return bits.astype(np.uint32).view(np.float32)


def _bf16_mm(a, b):
    """A bfloat16 matrix product: exact products summed in float64, rounded to bfloat16."""
    return _bf16((a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32))


def muon(optimizer, bug=None):
    """torch's Muon and Keller Jordan's (variant "keller_jordan": its eps added, each op of
    the iteration rounded, the scale on the bfloat16 update, 4-D as (out, in·h·w) scaled by
    its last two sizes), the iteration in bfloat16. Bug: ``"rms scale"`` (0.2·sqrt(max(A,
    B)) always)."""
    def make_step(params, h):
        kj = h.get("variant") == "keller_jordan"
        bufs = [np.zeros(p.shape) for p in params]
        a, b, c = h["ns_coefficients"]

        def orthogonalize(u):
            x = _bf16(u.astype(np.float32))
            tall = x.shape[0] > x.shape[1]
            x = x.T if tall else x
            norm = _bf16(np.float32(np.sqrt(np.sum(x.astype(np.float64) ** 2))))
            eps = _bf16(np.float32(h["eps"]))
            x = _bf16(x / (_bf16(norm + eps) if kj else max(norm, eps)))
            for _ in range(h["ns_steps"]):
                gram = _bf16_mm(x, x.T)
                if kj:  # B = b*A + (c*A) @ A; X = a*X + B @ X, each op rounded
                    gu = _bf16(_bf16(np.float32(b) * gram)
                               + _bf16_mm(_bf16(np.float32(c) * gram), gram))
                    x = _bf16(_bf16(np.float32(a) * x) + _bf16_mm(gu, x))
                else:   # addmm: one rounding each
                    gu = _bf16((b * gram.astype(np.float64) + c * (
                        gram.astype(np.float64) @ gram)).astype(np.float32))
                    x = _bf16((a * x.astype(np.float64) + gu.astype(np.float64) @ x)
                              .astype(np.float32))
            return x.T if tall else x

        def step(grads, lr):
            for i, (p, g) in enumerate(zip(params, grads)):
                if g is None:
                    continue
                g = np.asarray(g, np.float64)
                mu = h["momentum"]
                bufs[i] = bufs[i] + (1 - mu) * (g - bufs[i])
                u = g + mu * (bufs[i] - g) if h["nesterov"] else bufs[i]
                matrix = u.reshape(p.shape[0], -1) if p.ndim == 4 else u
                rows, cols = p.shape[-2:]
                if bug == "rms scale" or h["adjust_lr_fn"] == "match_rms_adamw":
                    s = 0.2 * math.sqrt(max(rows, cols))
                else:
                    s = math.sqrt(max(1.0, rows / cols))
                o = orthogonalize(matrix)
                if kj:
                    o, s = _bf16(np.float32(s) * o), 1.0
                p[...] = p * (1 - lr * h["weight_decay"]) - lr * s * o.reshape(p.shape)
            return params
        return step
    return make_step


def scion(optimizer, bug=None):
    """Scion as pytorch_optimizer's SCION/SCIONLight and the authors' (variant "lions_epfl":
    eps added to the norm, each op of the iteration rounded, the average as mul-add), every
    norm, the Newton–Schulz in bfloat16 or float64. Bugs: ``"beta"`` (momentum read as the
    usual β), ``"constrained"`` (θ(1-γ) always), ``"no radius"``, ``"textbook ns"`` (the
    coefficients (15/8, -5/4, 3/8)), ``"sign"`` (sign(M)/B for norm="spectral"),
    ``"float32"``."""
    def make_step(params, h):
        kind = kind_of(bug)
        bufs = [np.zeros(p.shape, kind) for p in params]
        bf16 = h["ns_dtype"] == "bfloat16"
        added, separate = h["ns_eps_mode"] == "added", h["ns_form"] == "separate"
        a, b, c = (1.875, -1.25, 0.375) if bug == "textbook ns" else h["ns_coefficients"]

        def newton_schulz(u):
            tall = u.shape[0] > u.shape[1]
            u = u.T if tall else u
            if not bf16:
                x = u / ((np.sqrt(np.sum(u * u)) + h["eps"]) if added
                         else max(np.sqrt(np.sum(u * u)), h["eps"]))
                for _ in range(h["ns_steps"]):
                    gram = x @ x.T
                    x = a * x + (b * gram + c * gram @ gram) @ x
                return x.T if tall else x
            x = _bf16(u.astype(np.float32))
            norm = _bf16(np.float32(np.sqrt(np.sum(x.astype(np.float64) ** 2))))
            eps = _bf16(np.float32(h["eps"]))
            x = _bf16(x / (_bf16(norm + eps) if added else max(norm, eps)))
            for _ in range(h["ns_steps"]):
                gram = _bf16_mm(x, x.T)
                if separate:
                    gu = _bf16(_bf16(np.float32(b) * gram)
                               + _bf16_mm(_bf16(np.float32(c) * gram), gram))
                    x = _bf16(_bf16(np.float32(a) * x) + _bf16_mm(gu, x))
                else:
                    gu = _bf16((b * gram.astype(np.float64) + c * (
                        gram.astype(np.float64) @ gram)).astype(np.float32))
                    x = _bf16((a * x.astype(np.float64) + gu.astype(np.float64) @ x)
                              .astype(np.float32))
            return x.T if tall else x

        def times(o, factor):  # in bfloat16 as torch multiplies the bfloat16 update
            return _bf16(np.float32(factor) * o) if bf16 else o * factor

        def lmo(m):
            norm = h["norm"]
            if norm == "auto":
                norm = "bias" if m.ndim <= 1 else "spectral" if m.ndim == 2 else "spectral_conv"
            normalized = h["normalized"] if norm != "auto" and h["normalized"] is not None \
                else norm != "col"
            if h["norm"] == "auto":
                normalized = True
            if h["norm"] == "spectral" and bug == "sign":
                norm, normalized = "sign", True
            if norm == "none":
                return m, False
            if norm == "sign":
                return np.sign(m) / (m.shape[1] if normalized else 1), False
            if norm == "bias":
                v = m.reshape(-1) if m.ndim == 0 else m
                return (v / (np.sqrt(np.mean(v * v, axis=0)) + 1e-8)).reshape(m.shape), False
            if norm in ("col", "row"):
                g = m.T if h["transpose"] else m
                if norm == "col":
                    r = np.sqrt(np.sum(g * g, axis=0)) / math.sqrt(g.shape[0])
                    r = r * g.shape[1] if normalized else r
                else:
                    r = np.sqrt(np.sum(g * g, axis=-1, keepdims=True))
                    r = r * math.sqrt(g.shape[-1]) if normalized else r
                out = g / (r + 1e-8)
                return (out.T if h["transpose"] else out), False
            o = newton_schulz(m.reshape(m.shape[0], -1))
            if norm == "spectral":
                s = math.sqrt(m.shape[0] / m.shape[1]) if normalized else math.sqrt(m.shape[0])
                s = max(1.0, s) if h["max_scale"] else s
            else:
                s = math.sqrt(m.shape[0] / m.shape[1]) / math.prod(m.shape[2:])
            return times(o, s).reshape(m.shape), bf16

        def step(grads, lr):
            alpha = 1 - h["momentum"] if bug == "beta" and h["momentum"] < 1 else h["momentum"]
            constrained = h["constraint"] or (bug == "constrained" and not h["weight_decay"])
            wd = 0.0 if constrained else h["weight_decay"]
            for i, (p, g) in enumerate(zip(params, grads)):
                if g is None:
                    continue
                x = p.astype(kind)
                g = np.asarray(g).astype(kind)
                if wd and h["weight_decouple"]:
                    x = x * (1 - lr * wd)
                elif wd:
                    g = g + wd * x
                if h["momentum_form"] == "sum":
                    bufs[i] = (1 - alpha) * bufs[i] + g
                else:
                    bufs[i] = (1 - alpha) * bufs[i] + alpha * g
                d, rounded = lmo(bufs[i])
                if bug != "no radius":
                    d = times(d, h["scale"]) if rounded else d * h["scale"]
                if constrained:
                    x = x * (1 - lr)
                p[...] = x - lr * d.astype(kind)
            return params
        return step
    return make_step


def soap(optimizer, bug=None):
    """SOAP as pytorch_optimizer's soap.py (and the authors' with their switches: float32
    eigendecompositions, the 1e-30 normalization floor; heavyball's: the averages debiased,
    eps a floor, the decay first, the lifted power iteration, its cumulative schedule, the
    columns kept in place), LAPACK's eigh and QR; the golden cases' options (no merge_dims,
    no 1-D preconditioning). Bugs: ``"no correction"`` (no bias correction: heavyball's
    averages with their plain betas), ``"never refreshed"`` (the first call's eigenbases
    kept)."""
    def make_step(params, h):
        b1, b2 = h["betas"]
        bs = b2 if h["shampoo_beta"] is None else h["shampoo_beta"]
        heavy = h.get("debiased_betas", False) and h["correct_bias"] and bug != "no correction"

        def hat(beta, k):   # heavyball's debiased decay
            return 1 - (1 - beta) / (1 - beta ** k) if heavy else beta
        state = []
        for p in params:
            sides = [d <= h["max_precond_dim"] for d in p.shape] if p.ndim >= 2 else \
                [h["precondition_1d"] and p.shape[0] <= h["max_precond_dim"]] * p.ndim
            state.append(dict(t=0, m=np.zeros(p.shape), v=np.zeros(p.shape),
                              L=[np.zeros((d, d)) if f else None
                                 for d, f in zip(p.shape, sides)], Q=None))

        def along(x, q, back):   # Q^T (or Q) along each side with a basis
            for i, qi in enumerate(q):
                if qi is not None:
                    x = np.moveaxis(np.tensordot(x, qi, axes=([i], [1 if back else 0])), -1, i)
            return x

        def stats(g, L, beta):
            for i, li in enumerate(L):
                if li is not None:
                    other = [k for k in range(g.ndim) if k != i]
                    li += (1 - beta) * (np.tensordot(g, g, axes=(other, other)) - li)

        def refreshes(s):   # after update t = s["t"] (call t + 1)
            if h.get("refresh_schedule", "multiples") == "multiples":
                return s["t"] % h["precondition_frequency"] == 0
            total = 0.0
            for _ in range(s["t"]):
                total += 1 / h["precondition_frequency"]
            return int(total + 1 / h["precondition_frequency"]) > int(total)

        def step(grads, lr):
            for p, g, s in zip(params, grads, state):
                if g is None:
                    continue
                g = np.asarray(g, np.float64)
                g = -g if h["maximize"] else g
                if s["t"] == 0:
                    stats(g, s["L"], hat(bs, 1))
                    f32 = h["eigh_dtype"] == "float32"
                    s["Q"] = [None if li is None else np.linalg.eigh(
                        (li.astype(np.float32) if f32 else li)
                        + 1e-30 * np.eye(len(li), dtype=np.float32 if f32 else np.float64)
                    )[1][:, ::-1].astype(np.float64) for li in s["L"]]
                    s["t"] = 1
                    continue
                t = s["t"]
                gp = along(g, s["Q"], False)
                s["m"] = s["m"] + (1 - hat(b1, t)) * (g - s["m"])
                s["v"] = s["v"] + (1 - hat(b2, t)) * (gp * gp - s["v"])
                root = np.sqrt(s["v"])
                denom = (np.maximum(root, h["eps"]) if h.get("eps_mode") == "max"
                         else root + h["eps"])
                u = along(along(s["m"], s["Q"], False) / denom, s["Q"], True)
                if h["normalize_gradient"]:
                    floor = h["eps"] if h["normalize_floor"] == "eps" else h["normalize_floor"]
                    u = u / (np.sqrt(np.mean(u * u)) + floor)
                size = lr
                if h["correct_bias"] and bug != "no correction" and not heavy:
                    size = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
                if h.get("decay_after_update", True):
                    p[...] = (p - size * u) * (1 - lr * h["weight_decay"])
                else:
                    p[...] = p * (1 - lr * h["weight_decay"]) - size * u
                stats(g, s["L"], hat(bs, t + 1))
                if refreshes(s) and bug != "never refreshed":
                    for i, (li, qi) in enumerate(zip(s["L"], s["Q"])):
                        if li is None:
                            continue
                        power = li @ qi
                        estimates = np.sum(qi * power, axis=0)
                        order = np.argsort(-estimates, kind="stable")
                        if h.get("refresh_lift", 0.0):
                            lift = max(h["refresh_lift"], min(64 * len(li) * 2.0 ** -52, 0.125))
                            power = power + lift * max(np.abs(estimates).max(), 2.0 ** -1022) * qi
                        f32 = h["qr_dtype"] == "float32"
                        q = np.linalg.qr(power[:, order].astype(np.float32 if f32 else np.float64)
                                         )[0].astype(np.float64)
                        if h.get("basis_order", "sorted") == "kept":
                            s["Q"][i] = np.empty_like(q)
                            s["Q"][i][:, order] = q
                        else:
                            s["Q"][i] = q
                            s["v"] = np.take(s["v"], order, axis=i)
                s["t"] = t + 1
            return params
        return step
    return make_step


def adam_mini(optimizer, bug=None):
    """Adam-mini (the authors' adam-mini 1.1.1): one second moment per block, the blocks read
    from the case's param_names. Bugs: ``"qk per tensor"`` (a query or key with one second
    moment for the whole tensor, not one per head), ``"norm decay"`` (the weight decay on
    the norms too), ``"float32"``."""
    qk = ("k_proj", "q_proj", "wq", "wk", "query", "key")
    neuron = ("embed", "embd", "wte", "lm_head", "output", "final_layer", "v_proj", "wv",
              "value", "o_proj", "wo", "attn.proj", "feed_forward", "linear", "mlp")

    def make_step(params, h):
        kind = kind_of(bug)
        names = [(n or "").lower() for n in h.get("param_names") or [None] * len(params)]
        state = [dict(m=np.zeros(p.shape, kind), v=np.zeros(p.shape, kind), t=0)
                 for p in params]
        head = h["dim"] * h["dim"] // h["n_heads"]

        def blocks(name, x):  # x as (blocks, block size), or None for Adam's per element
            if "bias" in name:
                return None
            if any(w in name for w in qk) and bug != "qk per tensor":
                return x.reshape(-1, head)
            if any(w in name for w in neuron):
                return x.reshape(x.shape[0], -1)
            return x.reshape(1, -1)

        def step(grads, lr):
            b1, b2 = h["betas"]
            for p, g, s, name in zip(params, grads, state, names):
                if g is None:
                    continue
                s["t"] += 1
                x = p.astype(kind)
                g = np.asarray(g).astype(kind)
                decay = bug == "norm decay" and "bias" not in name or not any(
                    w in name for w in ("norm", "ln", "bias"))
                if decay and h["weight_decay"]:
                    x = x * (1 - lr * h["weight_decay"])
                s["m"] = s["m"] + (1 - b1) * (g - s["m"])
                c1, c2 = 1 - b1 ** s["t"], 1 - b2 ** s["t"]
                gb = blocks(name, g)
                if gb is None:
                    s["v"] = b2 * s["v"] + (1 - b2) * g * g
                    v = s["v"]
                else:
                    vb = blocks(name, s["v"])[:, :1]  # the block's v in its first element
                    vb = b2 * vb + (1 - b2) * (gb * gb).mean(axis=1, keepdims=True)
                    v = np.broadcast_to(vb, gb.shape).reshape(p.shape)
                    s["v"] = v.copy()
                x = x - lr / c1 * s["m"] / (np.sqrt(v) / math.sqrt(c2) + h["eps"])
                p[...] = x
            return params
        return step
    return make_step


def splus(optimizer, bug=None):
    """SPlus as pytorch_optimizer's splus.py (and the authors' torch file: 1/(2(m+n)), eigh
    in float64), LAPACK's eigh. Bugs: ``"authors scale"`` (s = 1/(2(m+n)) everywhere),
    ``"l2"`` (the decoupled decay added to the gradient), ``"identity basis"`` (the bases
    recomputed at step 1 only)."""
    def make_step(params, h):
        b1, b2 = h["betas"]
        md = h["max_dim"]
        state = [dict(m=np.zeros(p.shape), L=[np.zeros((d, d)) if p.ndim == 2 and d < md
                                             else None for d in p.shape[:2]],
                      Q=[np.eye(d) if p.ndim == 2 and d < md else None for d in p.shape[:2]])
                 for p in params]
        count = [0]

        def scale(shape):
            if len(shape) != 2 or shape[0] > md or shape[1] > md:
                return h["nonstandard_constant"]
            half = bug == "authors scale" or h["matrix_scale"] == "half_over_sum"
            return 1 / (shape[0] + shape[1]) / 2 if half else 2 / (shape[0] + shape[1])

        def step(grads, lr):
            count[0] += 1
            t = count[0]
            for p, g, s in zip(params, grads, state):
                if g is None:
                    continue
                g = np.asarray(g, np.float64)
                g = -g if h["maximize"] else g
                sl = lr * scale(p.shape)
                wd = h["weight_decay"]
                l2 = bug == "l2" or not h["decoupled_weight_decay"]
                if l2:
                    g = g + wd * p
                s["m"] = s["m"] + (1 - b1) * (g - s["m"])
                if p.ndim == 2:
                    ql, qr = s["Q"]
                    r = s["m"]
                    r = ql.T @ r if ql is not None else r
                    r = r @ qr if qr is not None else r
                    for k, li in enumerate(s["L"]):
                        if li is not None:
                            li += (1 - b2) * ((g @ g.T if k == 0 else g.T @ g) - li)
                    u = np.sign(r)
                    u = ql @ u if ql is not None else u
                    u = u @ qr.T if qr is not None else u
                    if t == 1 or (t % h["inverse_steps"] == 0 and bug != "identity basis"):
                        f32 = h["eigh_dtype"] == "float32"
                        s["Q"] = [None if li is None else np.linalg.eigh(
                            (li.astype(np.float32) if f32 else li)
                            + h["eps"] * np.eye(len(li), dtype=np.float32 if f32
                                                else np.float64))[1].astype(np.float64)
                            for li in s["L"]]
                else:
                    u = np.sign(s["m"])
                x = p - sl * u
                s.setdefault("ema", np.zeros(p.shape))
                s["ema"] = s["ema"] + (1 - h["ema_rate"]) * (x - s["ema"])
                if not l2 and wd:
                    x = x * (1 - wd * (1.0 if h["fixed_decay"] else sl))
                p[...] = x
            return params
        return step
    return make_step


def kron(optimizer, bug=None):
    """PSGD Kron as kron_torch's kron.py (and pytorch_optimizer's psgd.py with its switches:
    no merge, no damping, the added floor, the rows-or-columns bound, prod balancing), the
    counter stream's probes and balancing draws as npoptim's defaults, LAPACK's triangular
    solve, einsum for the rest; heavyball's PSGDKron with its switches (the debiased momentum,
    the elementwise damping, two power iterations and their running maximum, its cumulative
    schedule, balancing at every update, decay of vectors). Bugs: ``"no clipping"`` (U not clipped to RMS 1.1),
    ``"every step"`` (the preconditioner updated at every step, not on the schedule),
    ``"no damping"`` (kron_torch's pair without its damping)."""
    import scipy.linalg
    from npoptim.kernels.counter_stream import standard_normal, uniform
    from npoptim.optim.kron import BALANCE_STREAM

    def make_step(params, h):
        def sides_of(shape):
            shape = tuple(shape) or (1,)
            if len(shape) > 2 and h["merge_dims"]:
                a = [math.prod(shape[:-1]), shape[-1]]
                b = [shape[0], math.prod(shape[1:])]
                shape = tuple(a) if a[1] - a[0] <= b[1] - b[0] else tuple(b)
            return shape
        state = []
        for p in params:
            sides = sides_of(p.shape)
            scale = h["precond_init_scale"] ** (1 / len(sides))
            diag = [d == 1 or d > h["max_size_triangular"]
                    or len(sides) < h["min_ndim_triangular"] for d in sides]
            state.append(dict(t=0, m=np.zeros(sides), sides=sides, Q=[
                scale * np.ones(d) if dg else scale * np.eye(d) for d, dg in zip(sides, diag)]))
        glob = dict(n=0, counter=0, cumulative=0.0)
        kron_torch = h["norm_floor_mode"] == "max"
        heavyball = h.get("lower_bound") == "power_iteration"   # heavyball's PSGDKron
        for s in state:
            s["lb"] = [0.0] * len(s["Q"])

        def running(bound, s, i):   # heavyball's running max of the norms
            beta = h.get("lower_bound_beta", 0.0)
            if beta:
                bound = s["lb"][i] = max(bound, s["lb"][i] + (bound - s["lb"][i]) * (1 - beta))
            return bound

        def apply(x, q, axis, transpose=False):
            if q.ndim == 1:
                shape = [1] * x.ndim
                shape[axis] = q.size
                return x * q.reshape(shape)
            return np.moveaxis(np.tensordot(q.T if transpose else q, x, axes=([1], [axis])),
                               0, axis)

        def bound(s):
            mx = np.max(np.abs(s))
            if heavyball:   # two power iterations from the row of largest norm
                rows = np.linalg.norm(s, axis=1)
                r = max(rows.max(), float(np.finfo(np.float32).tiny))
                a, x = s / r, s[np.argmax(rows)] / r
                for _ in range(2):
                    x = a @ (a @ x)
                    x = x / max(np.linalg.norm(x), 1e-12)
                return np.sqrt(x @ (a @ (a @ x))) * r
            if kron_torch:
                a = s / mx
                x = a[:, np.argmax((a * a).sum(0))] @ a
                return np.linalg.norm(a @ (x / np.linalg.norm(x))) * mx
            a = s / (mx if mx > 0 else 1)
            c, r = (a * a).sum(0), (a * a).sum(1)
            if c.max() > r.max():
                x = a[:, np.argmax(c)] @ a
                return mx * np.linalg.norm((x / np.linalg.norm(x)) @ a.T)
            x = a @ a[np.argmax(r)]
            return mx * np.linalg.norm(a.T @ (x / np.linalg.norm(x)))

        def step(grads, lr):
            prob = h["preconditioner_update_probability"]
            glob["counter"] += 1
            if h.get("update_schedule") == "cumulative":
                mx, mn, dec, fs = prob or (1.0, 0.03, 0.999, 1000)
                pr = (max(mn, mx * dec ** max(glob["n"] + 1 - fs, 0))
                      if prob is None or isinstance(prob, (list, tuple)) else prob)
                before = glob["cumulative"]
                glob["cumulative"] = before + pr
                update = int(glob["cumulative"]) > int(before)
            elif prob is None or isinstance(prob, (list, tuple)):
                mx, mn, dec, fs = (np.float32(x) for x in (prob or (1.0, 0.03, 0.001, 500)))
                pr = min(max(mx * np.exp(np.float32(-dec) * (np.float32(glob["n"]) - fs)),
                             mn), mx)
                update = glob["counter"] >= np.float32(1) / pr
            else:
                update = glob["counter"] >= 1 / prob
            update = update or bug == "every step"
            if update:
                glob["counter"] = 0
            glob["n"] += 1
            t = glob["n"]
            balance = update and (h.get("balance_schedule") == "every_update" or uniform(
                h["seed"], BALANCE_STREAM, t, 1)[0] < h["balance_prob"])
            for index, (p, g, s) in enumerate(zip(params, grads, state)):
                if g is None:
                    continue
                g = np.asarray(g, np.float64).reshape(s["sides"])
                x = np.asarray(p, np.float64).reshape(s["sides"])
                wd, matrix = h["weight_decay"], p.ndim >= 2 or h.get("decay_vectors", False)
                if wd and matrix and not h["weight_decouple"]:
                    g = g + wd * x
                s["t"] += 1
                if h.get("debiased_betas"):
                    s["m"] = s["m"] + (1 - h["b1"]) / (1 - h["b1"] ** s["t"]) * (g - s["m"])
                    m = s["m"]
                else:
                    s["m"] = h["b1"] * s["m"] + (1 - h["b1"]) * g
                    m = s["m"] / (1 - h["b1"] ** s["t"])
                qs = s["Q"]
                if balance and len(qs) > 1:
                    norms = np.array([np.max(np.abs(q)) for q in qs])
                    gm = np.prod(norms) ** (1 / len(qs))
                    s["Q"] = qs = [q * (gm / n) for q, n in zip(qs, norms)]
                if update:
                    v = standard_normal(h["seed"], index, t, g.size).reshape(s["sides"])
                    hh = m if h["momentum_into_precond_update"] else g
                    if (h["probe_damping"] and bug != "no damping"
                            and h.get("damping_mode") == "elementwise"):
                        hh = hh + (1e-9 + 2.0 ** -23 * np.abs(hh)) * v
                    elif h["probe_damping"] and bug != "no damping":
                        hh = hh + math.sqrt(2.0 ** -23) * np.mean(np.abs(hh)) * v
                        if h["momentum_into_precond_update"]:
                            m = hh
                    a, b = hh, v
                    for i, q in enumerate(qs):
                        a = apply(a, q, i)
                        if q.ndim == 1:
                            shape = [1] * b.ndim
                            shape[i] = q.size
                            b = b / q.reshape(shape)
                        else:
                            moved = np.moveaxis(b, i, -1)
                            flat = moved.reshape(-1, q.shape[0])
                            f32 = h["solve_dtype"] == "float32"
                            sol = scipy.linalg.solve_triangular(
                                q.astype(np.float32) if f32 else q,
                                (flat.astype(np.float32) if f32 else flat).T, trans="T",
                                lower=False).T.astype(np.float64)
                            b = np.moveaxis(sol.reshape(moved.shape), -1, i)
                    floor = np.finfo(np.float64).tiny if kron_torch else 2.0 ** -126
                    for i, q in enumerate(qs):
                        other = [k for k in range(a.ndim) if k != i]
                        if q.ndim == 1:
                            ta, tb = (a * a).sum(axis=tuple(other)), (b * b).sum(axis=tuple(other))
                        else:
                            ta = np.tensordot(a, a, axes=(other, other))
                            tb = np.tensordot(b, b, axes=(other, other))
                        d, tot = (ta - tb) * h["precond_lr"], ta + tb
                        if q.ndim == 1:
                            n = running(np.max(np.abs(tot)), s, i)
                            q -= d * q / (max(n, floor) if kron_torch else n + floor)
                        else:
                            n = running(bound(tot), s, i)
                            q -= np.triu(d) / (max(n, floor) if kron_torch else n + floor) @ q
                u = m
                for i, q in enumerate(qs):
                    u = apply(apply(u, q, i), q, i, transpose=True)
                if bug != "no clipping" and h["clip_update"]:
                    u = u * min(1.0, 1.1 / (np.sqrt(np.mean(u * u)) + h["clip_eps"]))
                if wd and matrix and h["weight_decouple"]:
                    u = u + wd * x
                p[...] = (x - lr * u).reshape(p.shape)
            return params
        return step
    return make_step


def psgd_quad(optimizer, bug=None):
    """PSGD-QUAD as quad-torch's quad.py (its math.max read as max, a 0-D index_select as the
    row), the counter stream's noise as npoptim's default, tensordot and np.linalg for the
    products and norms. Bugs: ``"whole lr"`` (lr_style="adam" stepped by lr, not lr/5),
    ``"float32"``."""
    from npoptim.kernels.counter_stream import standard_normal

    def make_step(params, h):
        kind = kind_of(bug)
        f32 = np.float32

        def sides_of(shape):
            shape = tuple(shape) or (1,)
            if len(shape) < 2:
                return shape
            if math.prod(shape) == max(shape):
                return (max(shape),)
            if len(shape) == 2:
                return shape
            ratios = [max(math.prod(shape[:k]), math.prod(shape[k:]))
                      / min(math.prod(shape[:k]), math.prod(shape[k:]))
                      for k in range(1, len(shape))]
            k = 1 + int(np.argmin(ratios))
            return math.prod(shape[:k]), math.prod(shape[k:])

        def with_squares(y, qs):
            for i, q in enumerate(qs):
                if q.ndim == 1:
                    shape = [1] * y.ndim
                    shape[i] = q.size
                    y = y * (q * q).reshape(shape)
                else:
                    y = np.moveaxis(np.tensordot(q @ q, y, axes=([1], [i])), 0, i)
            return y

        state = [dict(t=0) for _ in params]

        def step(grads, lr):
            for index, (p, g, s) in enumerate(zip(params, grads, state)):
                if g is None:
                    continue
                sides = sides_of(p.shape)
                g = np.asarray(g, kind).reshape(sides)
                x = np.asarray(p, kind).reshape(sides)
                ns = h["noise_scale"]
                if s["t"] == 0:
                    s["m"] = g.copy()
                    scale = (np.mean(g * g) + ns ** 2) ** (-1 / (8 if len(sides) > 1 else 4))
                    diag = [True] if len(sides) == 1 else [
                        d > h["max_size_dense"] or d * d > h["max_skew_dense"] * g.size
                        for d in sides]
                    s["Q"] = [scale * (np.ones(d, kind) if dg else np.eye(d, dtype=kind))
                              for d, dg in zip(sides, diag)]
                    s["L"] = [0.0] * len(sides)
                s["m"] = s["m"] + (1 - h["momentum"]) * (g - s["m"])
                s["t"] += 1
                t = s["t"]
                eta = float(max(f32(h["preconditioner_lr"])
                                * (f32(1) / np.sqrt(f32(1) + f32(t) / f32(10000))), f32(0.3)))
                qs = s["Q"]
                if len(qs) == 2 and t % 100 == 0:
                    n = [np.max(np.abs(q)) for q in qs]
                    qs = [q * (np.sqrt(n[0] * n[1]) / nq) for q, nq in zip(qs, n)]
                v = standard_normal(h["seed"], index, t, g.size).astype(kind).reshape(sides)
                a = with_squares(s["m"] + ns * v, qs)
                new = []
                for i, q in enumerate(qs):
                    other = tuple(k for k in range(a.ndim) if k != i)
                    c = a.size / a.shape[i]
                    if q.ndim == 1:
                        tt = (a * a).sum(axis=other) if other else a * a
                        ell = tt.max() + c
                    else:
                        tt = np.tensordot(a, a, axes=(other, other))
                        top = np.diag(tt).max()
                        sc = tt / top
                        y = sc @ sc[np.argmax((sc * sc).sum(1))]
                        ell = np.linalg.norm(sc @ (y / np.linalg.norm(y))) * top + c
                    s["L"][i] = max(0.95 * s["L"][i] + 0.05 * ell, ell)
                    k = eta / (2 * s["L"][i])
                    if q.ndim == 1:
                        new.append(q * (1 - k * (tt - c)) ** 2)
                    else:
                        r = q - k * (tt @ q - c * q)
                        r = r - k * (r @ tt - c * r)
                        new.append((r + r.T) / 2)
                s["Q"] = new
                u = with_squares(s["m"], new)
                u = u * 1.05 / max(np.sqrt(np.mean(u * u)), 1.05)
                if h["weight_decay"] > 0:
                    x = x * (1 - lr * h["weight_decay"])
                scaled = h["lr_style"] == "adam" and bug != "whole lr"
                p[...] = (x - (lr / 5 if scaled else lr) * u).reshape(p.shape)
            return params
        return step
    return make_step


MUTANTS = {"Adam": adam, "AdamW": adam, "NAdam": nadam, "RAdam": radam, "Adamax": adamax,
           "SGD": sgd, "RMSprop": rmsprop, "Adagrad": adagrad, "Adadelta": adadelta,
           "SparseAdam": sparse_adam, "MARS": mars, "Grams": grams, "Lion": lion,
           "CAME": came, "Muon": muon, "Shampoo": shampoo, "APOLLO": apollo,
           "Scion": scion, "AdamMini": adam_mini,
           "SOAP": soap, "SPlus": splus, "Kron": kron, "PSGDQuad": psgd_quad}

#: (optimizer, bug, the entry diagnose must name first)
MISTAKES = [
    *[(o, bug, entry) for o in ("Adam", "AdamW") for bug, entry in [
        ("eps hat", "eps on sqrt(v) (epsilon hat: Keras, TF, ONNX)"),
        ("eps in sqrt", "eps inside the square root (Adam)"),
        ("no m correction", "no bias correction of m"),
        ("no v correction", "no bias correction of v"),
        ("no correction", "no bias correction at all"),
        ("t from 0", "step counter from 0"),
        ("t ahead", "step counter one ahead"),
        ("keras eps", "eps = 1e-7 (Keras default)"),
        ("d2l eps", "eps = 1e-6 (d2l default)"),
        ("decay after", "decoupled decay after the update"),
        ("l2", "L2 decay instead of decoupled")]],
    *[("Adadelta", bug, entry) for bug, entry in [
        ("keras eps", "eps = 1e-7 (Keras default)"),
        ("decoupled", "decoupled decay instead of L2")]],
    # torch's cases of these never decouple: Keras's do
    *[(o, bug, entry) for o in ("Adamax", "SGD", "RMSprop", "Adagrad", "Adadelta")
      for bug, entry in [
        ("decay after", "decoupled decay after the update"),
        ("l2", "L2 decay instead of decoupled")]],
    *[(o, "float32", "float32 accumulation of float64") for o in (
        "Adam", "AdamW", "NAdam", "RAdam", "Adamax", "SGD", "RMSprop", "Adagrad", "Adadelta",
        "SparseAdam", "Grams", "Lion")],
    ("Lion", "floored mean", "cautious scale 1/max(k/n, 1e-3) (timm, C-Optim's C-AdamW)"),
    ("Lion", "plus one", "cautious scale n/(k+1) (the paper, pytorch_optimizer)"),
    ("Grams", "momentum sign", "sign of the momentum, not of the gradient (Grams)"),
    ("Adam", "decoupled", "decoupled decay instead of L2"),
    *[("NAdam", bug, entry) for bug, entry in [
        ("no m correction", "no bias correction of m (NAdam)"),
        ("t from 0", "step counter from 0"),
        ("t ahead", "step counter one ahead"),
        ("keras eps", "eps = 1e-7 (Keras default)"),
        ("decoupled", "decoupled decay instead of L2"),
        ("decay after", "decoupled decay after the update"),
        ("l2", "L2 decay instead of decoupled")]],
    *[("RAdam", bug, entry) for bug, entry in [
        ("no m correction", "no bias correction of m"),
        ("t from 0", "step counter from 0"),
        ("t ahead", "step counter one ahead"),
        ("decoupled", "decoupled decay instead of L2"),
        ("decay after", "decoupled decay after the update"),
        ("l2", "L2 decay instead of decoupled")]],
    *[("Adamax", bug, entry) for bug, entry in [
        ("eps added", "eps added after the max (Adamax: Keras, TF, tfjs)"),
        ("no m correction", "no bias correction of m"),
        ("t from 0", "step counter from 0"),
        ("t ahead", "step counter one ahead"),
        ("keras eps", "eps = 1e-7 (Keras default)"),
        ("decoupled", "decoupled decay instead of L2")]],
    *[("SGD", bug, entry) for bug, entry in [
        ("nesterov", "Nesterov toggled (SGD)"),
        ("lr in buffer", "lr inside the momentum buffer (SGD)"),
        ("decoupled", "decoupled decay instead of L2"),
        ("first kept", "duplicate CSR entries not summed (first kept)"),
        ("last kept", "duplicate CSR entries not summed (last kept)")]],
    *[("RMSprop", bug, entry) for bug, entry in [
        ("eps in sqrt", "eps inside the square root (RMSprop)"),
        ("lr in buffer", "lr inside the momentum buffer (RMSprop)"),
        ("decoupled", "decoupled decay instead of L2"),
        ("keras eps", "eps = 1e-7 (Keras default)"),
        ("d2l eps", "eps = 1e-6 (d2l default)")]],
    *[("Adagrad", bug, entry) for bug, entry in [
        ("eps in sqrt", "eps inside the square root (Adagrad)"),
        ("accumulator 0.1", "Adagrad initial accumulator 0.1 (Keras, TF)"),
        ("decoupled", "decoupled decay instead of L2"),
        ("keras eps", "eps = 1e-7 (Keras default)"),
        ("first kept", "duplicate CSR entries not summed (first kept)"),
        ("last kept", "duplicate CSR entries not summed (last kept)")]],
    *[("MARS", bug, entry) for bug, entry in [
        ("no ratio", "MARS correction without β₁/(1-β₁)"),
        ("no correction", "MARS correction left out"),
        ("no clipping", "MARS without clipping"),
        ("eps hat", "eps on sqrt(v + 1e-15) (pytorch_optimizer's MARS)"),
        ("all mars", "MARS for every tensor (optimize_1d ignored)"),
        ("float32", "float32 accumulation of float64")]],
    ("Muon", "rms scale", "Muon scale 0.2·sqrt(max(A, B)) (Moonlight's RMS match)"),
    *[("CAME", bug, entry) for bug, entry in [
        ("l2", "L2 decay instead of decoupled (pytorch_optimizer's CAME)"),
        ("no clipping", "CAME without update clipping"),
        ("no confidence", "CAME without the confidence (Adafactor with momentum)"),
        ("float32", "float32 accumulation of float64")]],
    *[("Shampoo", bug, entry) for bug, entry in [
        ("eps added", "Shampoo's eps in the matrix, not on its eigenvalues"),
        ("no graft", "Shampoo without grafting"),
        ("square root", "Shampoo roots -1/2, not -1/(2k)"),
        ("count from 1", "Shampoo's optax form counted from step 1"),
        ("float32", "float32 accumulation of float64")]],
    *[("APOLLO", bug, entry) for bug, entry in [
        ("tensor", "APOLLO tensor-wise scaling instead of channel-wise"),
        ("no limiter", "APOLLO without the norm-growth limiter"),
        ("no refresh", "APOLLO projector never refreshed"),
        ("projected back",
         "APOLLO's low-rank gradient projected back (pytorch_optimizer's APOLLO)"),
        ("float32", "float32 accumulation of float64")]],
    *[("Scion", bug, entry) for bug, entry in [
        ("beta", "Scion's momentum read as the usual β (1 - α)"),
        ("constrained", "Scion constrained (the authors' default unconstrained=False)"),
        ("no radius", "Scion without the radius (scale ignored)"),
        ("textbook ns", "Newton–Schulz with the textbook quintic (15/8, -5/4, 3/8)"),
        ("sign", "sign oracle instead of spectral (Scion)"),
        ("float32", "float32 accumulation of float64")]],
    *[("AdamMini", bug, entry) for bug, entry in [
        ("qk per tensor", "Adam-mini's query and key with one second moment per tensor"),
        ("norm decay", "Adam-mini's weight decay on the norms too"),
        ("float32", "float32 accumulation of float64")]],
    *[("SOAP", bug, entry) for bug, entry in [
        ("no correction", "SOAP without bias correction"),
        ("never refreshed", "SOAP's eigenbases never refreshed")]],
    *[("SPlus", bug, entry) for bug, entry in [
        ("authors scale", "SPlus scale 1/(2(m+n)) (the authors' torch file)"),
        ("l2", "L2 decay instead of decoupled (pytorch_optimizer's SPlus)"),
        ("identity basis", "SPlus's eigenbases computed at step 1 only")]],
    *[("Kron", bug, entry) for bug, entry in [
        ("no clipping", "Kron without the update clipping"),
        ("every step", "Kron's preconditioner updated at every step"),
        ("no damping", "Kron's pair without the damping (pytorch_optimizer's Kron)")]],
    *[("PSGDQuad", bug, entry) for bug, entry in [
        ("whole lr", "PSGD-QUAD stepped by lr, not lr/5 (lr_style='adam')"),
        ("float32", "float32 accumulation of float64")]],
    *[("SparseAdam", bug, entry) for bug, entry in [
        ("adam eps", "eps on sqrt(v_hat) (Adam's placement in SparseAdam)"),
        ("drop zeros", "explicit CSR zero dropped"),
        ("first kept", "duplicate CSR entries not summed (first kept)"),
        ("last kept", "duplicate CSR entries not summed (last kept)")]],
]

def diagnosed(tmp_path, suite, optimizer, bug):
    results = [replay(c, MUTANTS[optimizer](optimizer, bug)) for c in cases_of(optimizer)]
    path = tmp_path / "results.json"
    path.write_text(dumps(results_file(results, implementation=f"mutant {bug}")))
    (d,) = diagnose(path, suite(optimizer))
    return d


# ------------------------------------------------------------------------------ the tests
@pytest.mark.parametrize("optimizer", MUTANTS)
def test_each_correct_mutant_matches(tmp_path, suite_of, optimizer):
    # the mutants' correct branches are the reference: else a named mistake proves nothing
    d = diagnosed(tmp_path, suite_of, optimizer, None)
    assert d.verdict == "matches" and not d.failing


@pytest.mark.parametrize("optimizer, bug, entry", MISTAKES,
                         ids=[f"{o}-{bug}" for o, bug, _ in MISTAKES])
def test_each_mistake_is_named_on_every_case(tmp_path, suite_of, optimizer, bug, entry):
    d = diagnosed(tmp_path, suite_of, optimizer, bug)
    assert d.verdict == "reproduced", (d.failing, [(c.entry.name, c.excess, c.case, c.step)
                                                   for c in d.closest])
    assert d.candidates[0].entry.name == entry, [(c.entry.name, c.excess)
                                                 for c in d.candidates]
    assert d.failing  # the mistake shows on some case


def test_every_entry_has_a_mutant_in_every_family_it_covers():
    rows = {(entry, o) for o, _, entry in MISTAKES}
    missing = [(e.name, o) for e in CATALOGUE for o in e.optimizers
               if o in MUTANTS and (e.name, o) not in rows]
    assert missing == []
