"""THE case-definition table of ``reference_results/``, and what its rows are made of.

Every golden case comes from one :class:`Row` of :data:`TABLE`: an optimizer (a name in
:data:`npoptim.registry.OPTIMIZERS`), the hyperparameters that differ from its defaults, the
parameter shapes, a gradient pattern (:data:`PATTERNS`), the steps and, optionally, an lr
schedule. Each row becomes one case per dtype, named ``"{optimizer}/{name}/{dtype}"``.

Adding an optimizer to the suite = adding its rows here and running
``python -m npoptim.golden.regenerate``. Rows of an optimizer that is not installed are
skipped; ``tests/test_golden.py`` fails for an installed optimizer without rows.

All inputs are made by :class:`Rng` (SplitMix64, integers only), seeded with the CRC-32 of the
case id, so they are the same on every platform and NumPy version. The flags of a case are
those its row declares plus those :func:`detect_flags` finds in its data; :data:`FLAGS` says
what each flag means (it becomes the ``notes`` of every file, as in Wycheproof).
"""
import math
import zlib
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from npoptim.golden.codec import CsrGrad

# ------------------------------------------------------------------------------- the flags
#: flag -> note (Wycheproof's ``notes``: what bug it targets, what it is, what a bug does).
FLAGS = {
    "one-element": dict(
        bug_type="shape handling",
        description="A parameter with a single element.",
        effect="Implementations that squeeze, broadcast or reduce over a size-1 axis may drop "
               "the dimension or the state's shape."),
    "multi-param": dict(
        bug_type="state bookkeeping",
        description="Several parameters of different shapes in one param group; state is per "
                    "parameter, in param-group order.",
        effect="Mixing up state between parameters, or sharing one step counter."),
    "none-grad": dict(
        bug_type="step counting",
        description="A parameter has no gradient (null) in some step: its value, its state and "
                    "its step counter must stay exactly as they are.",
        effect="Treating a missing gradient as zero advances the step counter and decays the "
               "moments."),
    "zero-grad": dict(
        bug_type="edge case",
        description="A dense gradient that is exactly zero everywhere in some step (unlike a "
                    "null gradient it counts as a step).",
        effect="Skipping zero gradients, or dividing 0 by 0 in the update."),
    "duplicate-rows": dict(
        bug_type="sparse semantics",
        description="A CSR gradient stores the same (row, column) more than once, as an "
                    "embedding backward does for a repeated id; the entries are summed, in "
                    "stored order, before the update (torch's coalesce()).",
        effect="Applying duplicates one after the other, or keeping only one of them."),
    "cancelling-duplicates": dict(
        bug_type="sparse semantics",
        description="Duplicate entries that sum to exactly zero: the entry is still present "
                    "(an explicit zero after coalescing).",
        effect="Dropping zeros after summing duplicates changes lazy optimizers (SparseAdam "
               "decays the moments of a present zero entry)."),
    "unsorted-columns": dict(
        bug_type="sparse semantics",
        description="Column indices within a CSR row are not sorted.",
        effect="Kernels that assume canonical CSR read the wrong entries."),
    "explicit-zero-entry": dict(
        bug_type="sparse semantics",
        description="A CSR gradient stores explicit zero values: they are part of the gradient "
                    "(torch keeps them when it coalesces).",
        effect="Lazy optimizers (SparseAdam) must decay the moments of, and move, a stored zero "
               "entry; dropping zeros leaves them untouched."),
    "explicit-zero-row": dict(
        bug_type="sparse semantics",
        description="A touched CSR row whose stored values are all zero (after summing "
                    "duplicates).",
        effect="As explicit-zero-entry, for a whole embedding row."),
    "empty-grad": dict(
        bug_type="step counting",
        description="A CSR gradient with no stored entries: nothing is updated, but torch "
                    "advances the parameter's step counter (pytorch/pytorch#82486).",
        effect="Not advancing the counter shifts every later bias correction."),
    "untouched-rows": dict(
        bug_type="sparse semantics",
        description="Some rows of a CSR-updated parameter are never in any gradient: they and "
                    "their state must stay exactly as initialised.",
        effect="Dense-style decay of absent rows, or writes outside the stored entries."),
    "late-first-touch": dict(
        bug_type="step counting",
        description="A row of a CSR-updated parameter is first touched in the second half of "
                    "the steps; the step counter is per parameter, so its first update uses "
                    "the parameter's (large) step count in the bias corrections.",
        effect="Per-row step counters (FBGEMM's rowwise bias correction, TF's global "
               "iterations) give a different first step for that row."),
    "eps-dominated": dict(
        bug_type="eps placement",
        description="Gradients (or eps) are such that eps is comparable to or larger than the "
                    "term it is added to, so where eps is added (inside or outside the square "
                    "root, before or after bias correction) changes the result.",
        effect="An implementation with eps in another place (e.g. the eps-hat form of "
               "SparseAdam/TF in Adam) fails these cases and usually passes all others."),
    "zero-norm-param": dict(
        bug_type="division by zero",
        description="A parameter (or its update) has norm zero: layer-wise trust ratios must "
                    "take their zero-norm fallback.",
        effect="NaN or a frozen parameter from dividing by a zero norm."),
    "subnormal": dict(
        bug_type="floating point",
        description="Some expected value is subnormal in the case's dtype.",
        effect="Flush-to-zero arithmetic (fast-math, some GPU modes) gives 0 there."),
    "lr-schedule": dict(
        bug_type="schedule",
        description="The learning rate changes every step (linear warmup then cosine decay); "
                    "each step's lr is given in steps[].lr, so no scheduler is needed.",
        effect="Optimizers that fold lr into their state (decoupled weight decay, lr inside a "
               "momentum buffer, Adagrad's lr_decay) differ from ones that apply it outside."),
    "sign-flips": dict(
        bug_type="edge case",
        description="Gradients change sign from step to step in many elements.",
        effect="Sign-based rules (Rprop) shrink or grow their step sizes wrongly."),
}


# --------------------------------------------------------------------------------- the RNG
_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


class Rng:
    """SplitMix64 over uint64 arrays: the same stream on every platform and NumPy version."""

    def __init__(self, seed):
        self.counter = int(seed) & _MASK

    def u64(self, n):
        idx = np.arange(1, n + 1, dtype=np.uint64)
        with np.errstate(over="ignore"):
            z = np.uint64(self.counter) + idx * np.uint64(_GOLDEN)
            z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            z = z ^ (z >> np.uint64(31))
        self.counter = (self.counter + n * _GOLDEN) & _MASK
        return z

    def uniform(self, n, low=-1.0, high=1.0):
        """``n`` float64 values in ``[low, high)`` (53 random bits each)."""
        unit = (self.u64(n) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
        return low + (high - low) * unit

    def integers(self, n, high):
        """``n`` integers in ``[0, high)``."""
        return (self.u64(n) % np.uint64(high)).astype(np.int64)


def case_seed(case_id):
    """The seed of a case: CRC-32 of its id (stable, documented in the README)."""
    return zlib.crc32(case_id.encode("utf-8"))


# ----------------------------------------------------------------------------- schedules
def warmup_cosine(base_lr, steps, warmup_steps=4, start_factor=0.1, eta_min_factor=0.01):
    """Per-step lr: linear warmup from ``start_factor * base_lr`` over ``warmup_steps`` steps
    (torch ``LinearLR``), then cosine decay to ``eta_min_factor * base_lr`` (torch
    ``CosineAnnealingLR`` with ``T_max = steps - warmup_steps``), in closed form.

    Values are rounded to 12 significant digits, so the stored list does not depend on the
    last bit of the platform's ``cos``. Returns ``(lrs, description)``.
    """
    eta_min = base_lr * eta_min_factor
    lrs = []
    for t in range(steps):
        if t < warmup_steps:
            lr = base_lr * (start_factor + (1.0 - start_factor) * t / warmup_steps)
        else:
            lr = eta_min + (base_lr - eta_min) * (
                1.0 + math.cos(math.pi * (t - warmup_steps) / (steps - warmup_steps))) / 2.0
        lrs.append(float(f"{lr:.12g}"))
    description = {"kind": "warmup-cosine", "base_lr": base_lr, "warmup_steps": warmup_steps,
                   "start_factor": start_factor, "eta_min": eta_min,
                   "t_max": steps - warmup_steps,
                   "formula": "t < warmup_steps: base_lr*(start_factor + (1-start_factor)*"
                              "t/warmup_steps); else eta_min + (base_lr-eta_min)*(1 + cos(pi*"
                              "(t-warmup_steps)/t_max))/2; t = step-1; rounded to 12 "
                              "significant digits"}
    return lrs, description


SCHEDULES = {"warmup-cosine": warmup_cosine}


# ------------------------------------------------------------------------ param initialisers
def init_param(rng, shape, kind, dtype):
    n = int(np.prod(shape, dtype=np.int64))
    if kind == "uniform":
        values = rng.uniform(n)
    elif kind == "zeros":
        values = np.zeros(n)
    elif kind == "small":
        values = rng.uniform(n) * 1e-3
    else:
        raise ValueError(f"unknown param init {kind!r}")
    return values.astype(dtype).reshape(shape)


# --------------------------------------------------------------------------- gradient patterns
def _row_shape(shape):
    return (int(shape[0]), int(np.prod(shape[1:], dtype=np.int64)))


def csr_from_entries(entries, shape, dtype):
    """A raw :class:`CsrGrad` from ``(row, column, value)`` entries, kept in the given order
    within each row (duplicates and explicit zeros kept)."""
    rows, cols = shape
    per_row = [[] for _ in range(rows)]
    for r, c, v in entries:
        per_row[r].append((c, v))
    indptr = np.zeros(rows + 1, np.int64)
    indices, data = [], []
    for r in range(rows):
        indptr[r + 1] = indptr[r] + len(per_row[r])
        for c, v in per_row[r]:
            indices.append(c)
            data.append(v)
    return CsrGrad((rows, cols), indptr, np.array(indices, np.int64),
                   np.array(data, np.float64).astype(dtype))


def _dense(rng, shape, dtype, scale):
    n = int(np.prod(shape, dtype=np.int64))
    return (rng.uniform(n) * scale).astype(dtype).reshape(shape)


def _lookups(rng, shape, ids, dtype, scale):
    """Entries of an embedding backward: every column of each looked-up row, in lookup order."""
    _, cols = _row_shape(shape)
    entries = []
    for r in ids:
        values = rng.uniform(cols) * scale
        entries += [(int(r), c, values[c]) for c in range(cols)]
    return entries


def pattern_dense(rng, shapes, dtype, steps, scale, density):
    """Dense uniform(-1, 1) * scale gradients for every parameter and step."""
    return [[_dense(rng, s, dtype, scale) for s in shapes] for _ in range(steps)]


def pattern_dense_shrinking(rng, shapes, dtype, steps, scale, density):
    """Dense gradients whose magnitude shrinks by 0.6 per step (amsgrad's max matters)."""
    return [[_dense(rng, s, dtype, scale * 0.6 ** t) for s in shapes] for t in range(steps)]


def pattern_dense_signflip(rng, shapes, dtype, steps, scale, density):
    """Dense gradients whose sign flips every step in about half of the elements."""
    out = []
    for t in range(steps):
        grads = []
        for s in shapes:
            n = int(np.prod(s, dtype=np.int64))
            base = 0.2 + rng.uniform(n, 0.0, 1.0)
            flip = np.where(np.arange(n) % 2 == 0, (-1.0) ** t, 1.0)
            grads.append((base * flip * scale).astype(dtype).reshape(s))
        out.append(grads)
    return out


def pattern_dense_none_zero(rng, shapes, dtype, steps, scale, density):
    """Dense gradients; every parameter after the first has no gradient (null) in steps 2 and
    3, the first has none in step 5, all gradients are exactly zero in step 4 and half the
    entries of the first parameter are zero in step 7."""
    out = pattern_dense(rng, shapes, dtype, steps, scale, density)
    for i in range(1, len(shapes)):
        for t in (1, 2):
            out[t][i] = None
    out[3] = [np.zeros(s, dtype) if g is not None else None for s, g in zip(shapes, out[3])]
    out[4][0] = None
    if steps > 6:
        flat = out[6][0].reshape(-1)
        flat[::2] = 0
    return out


def pattern_dense_rows(rng, shapes, dtype, steps, scale, density):
    """Dense gradients of an embedding table with only ~``density`` of the rows non-zero
    (what a dense-only optimizer sees for an embedding)."""
    out = []
    for _ in range(steps):
        grads = []
        for s in shapes:
            rows, cols = _row_shape(s)
            g = np.zeros((rows, cols))
            k = max(1, int(round(density * rows)))
            for r in rng.integers(k, rows):
                g[r] += rng.uniform(cols) * scale
            grads.append(g.astype(dtype).reshape(s))
        out.append(grads)
    return out


def pattern_csr_embedding(rng, shapes, dtype, steps, scale, density):
    """Embedding lookups: a batch of ~``density`` x rows ids per step, skewed towards low ids
    and with repeats; each lookup stores every column of its row (duplicates not summed)."""
    out = []
    for _ in range(steps):
        grads = []
        for s in shapes:
            rows, _ = _row_shape(s)
            k = max(2, int(round(density * rows)))
            ids = np.floor(rows * rng.uniform(k, 0.0, 1.0) ** 2).astype(np.int64)
            grads.append(csr_from_entries(_lookups(rng, s, ids, dtype, scale), _row_shape(s),
                                          dtype))
        out.append(grads)
    return out


def pattern_csr_density(rng, shapes, dtype, steps, scale, density):
    """``round(density * rows)`` uniformly drawn lookups per step (repeats possible)."""
    out = []
    for _ in range(steps):
        grads = []
        for s in shapes:
            rows, _ = _row_shape(s)
            k = max(1, int(round(density * rows)))
            ids = rng.integers(k, rows)
            grads.append(csr_from_entries(_lookups(rng, s, ids, dtype, scale), _row_shape(s),
                                          dtype))
        out.append(grads)
    return out


def pattern_csr_duplicates(rng, shapes, dtype, steps, scale, density):
    """Two of each step's rows are looked up twice (duplicate entries), the first lookup stores
    its columns in reverse order (unsorted), and in step 4 a fresh row holds a duplicate pair
    that cancels exactly (an explicit zero after summing) next to a normal entry."""
    out = []
    for t in range(steps):
        grads = []
        for s in shapes:
            rows, cols = _row_shape(s)
            ids = rng.integers(max(2, rows // 3), rows)
            entries = _lookups(rng, s, np.concatenate([ids, ids[:2]]), dtype, scale)
            entries = entries[:cols][::-1] + entries[cols:]
            if t == 3:
                z = (int(ids[0]) + 1) % rows
                x = float(rng.uniform(1)[0]) * scale
                entries = [e for e in entries if e[0] != z]
                entries += [(z, 0, x), (z, cols - 1, x / 2), (z, 0, -x)]
            grads.append(csr_from_entries(entries, (rows, cols), dtype))
        out.append(grads)
    return out


def pattern_csr_zeros(rng, shapes, dtype, steps, scale, density):
    """CSR gradients with explicit zero entries in every step, a whole explicit-zero row in
    steps 3 and 8, and rows where only some columns are stored."""
    out = []
    for t in range(steps):
        grads = []
        for s in shapes:
            rows, cols = _row_shape(s)
            ids = rng.integers(max(2, rows // 3), rows)
            entries = _lookups(rng, s, ids, dtype, scale)
            entries = [(r, c, 0.0 if (c + t) % 3 == 0 else v) for r, c, v in entries]
            if t in (2, 7):
                zero_row = int(rng.integers(1, rows)[0])
                entries = [e for e in entries if e[0] != zero_row]
                entries += [(zero_row, c, 0.0) for c in range(cols)]
            partial_row = int(rng.integers(1, rows)[0])
            entries = [e for e in entries if e[0] != partial_row]
            entries += [(partial_row, c, float(rng.uniform(1)[0]) * scale)
                        for c in range(0, cols, 2)]
            grads.append(csr_from_entries(entries, (rows, cols), dtype))
        out.append(grads)
    return out


def pattern_csr_empty(rng, shapes, dtype, steps, scale, density):
    """Embedding-style CSR gradients, empty (no stored entry) in steps 3, 7 and the last."""
    out = pattern_csr_embedding(rng, shapes, dtype, steps, scale, max(density, 0.25))
    for t in (2, 6, steps - 1):
        out[t] = [csr_from_entries([], _row_shape(s), dtype) for s in shapes]
    return out


def pattern_csr_late(rng, shapes, dtype, steps, scale, density):
    """Rows of the first half of the table touched from step 1; row ``rows-2`` first touched
    at step ``steps-2``; row ``rows-1`` never."""
    out = []
    for t in range(steps):
        grads = []
        for s in shapes:
            rows, _ = _row_shape(s)
            ids = list(rng.integers(max(2, rows // 4), max(1, rows // 2)))
            if t >= steps - 3:
                ids.append(rows - 2)
            grads.append(csr_from_entries(_lookups(rng, s, ids, dtype, scale), _row_shape(s),
                                          dtype))
        out.append(grads)
    return out


def pattern_csr_none(rng, shapes, dtype, steps, scale, density):
    """Embedding-style CSR gradients; parameters after the first have no gradient (null) in
    steps 2 and 3, the first has none in step 5."""
    out = pattern_csr_embedding(rng, shapes, dtype, steps, scale, max(density, 0.25))
    for i in range(1, len(shapes)):
        for t in (1, 2):
            out[t][i] = None
    out[4][0] = None
    return out


#: name -> fn(rng, shapes, dtype, steps, scale, density) -> grads[step][param]
PATTERNS = {
    "dense": pattern_dense,
    "dense-shrinking": pattern_dense_shrinking,
    "dense-signflip": pattern_dense_signflip,
    "dense-none-zero": pattern_dense_none_zero,
    "dense-rows": pattern_dense_rows,
    "csr-embedding": pattern_csr_embedding,
    "csr-density": pattern_csr_density,
    "csr-duplicates": pattern_csr_duplicates,
    "csr-zeros": pattern_csr_zeros,
    "csr-empty": pattern_csr_empty,
    "csr-late": pattern_csr_late,
    "csr-none": pattern_csr_none,
}


# ------------------------------------------------------------------------------ objectives
#: Closure-driven optimizers (LBFGS) cannot replay stored gradients: they evaluate the loss and
#: gradient as often as they need. Their cases carry an ``objective`` instead, defined
#: exactly enough for any implementation to evaluate it identically.
SEPARABLE_QUARTIC_FORMULA = (
    "x = the parameters flattened row-major and concatenated in order; center, h, q are "
    "arrays of that length in the case's dtype. In the case's dtype, element-wise: "
    "d = x - center; grad = h*d + q*((d*d)*d) (split back into the parameters' shapes). "
    "loss (float64): with D = float64(x) - float64(center) and H, Q the float64 values of h, "
    "q: term_i = (0.5*H_i)*(D_i*D_i) + (0.25*Q_i)*((D_i*D_i)*(D_i*D_i)), summed in index "
    "order starting from 0.0.")


def objective_separable_quartic(rng, shapes, dtype):
    """A separable, non-quadratic objective with curvature varying by coordinate."""
    n = sum(int(np.prod(s, dtype=np.int64)) for s in shapes)
    return {"kind": "separable-quartic",
            "formula": SEPARABLE_QUARTIC_FORMULA,
            "center": rng.uniform(n).astype(dtype),
            "h": rng.uniform(n, 0.5, 4.0).astype(dtype),
            "q": rng.uniform(n, 0.0, 1.0).astype(dtype)}


OBJECTIVES = {"separable-quartic": objective_separable_quartic}

#: Optimizers whose step needs a closure: their cases use an objective (``npoptim golden``
#: gives them ``separable-quartic``).
CLOSURE_DRIVEN = ("LBFGS",)


def evaluate_objective(objective, params):
    """``(loss, grads)`` of a case objective at ``params`` (see the formula above)."""
    if objective["kind"] != "separable-quartic":
        raise ValueError(f"unknown objective kind {objective['kind']!r}")
    dtype = params[0].dtype
    x = np.concatenate([np.asarray(p, dtype).reshape(-1) for p in params])
    center = np.asarray(objective["center"], dtype)
    h = np.asarray(objective["h"], dtype)
    q = np.asarray(objective["q"], dtype)
    d = x - center
    g = h * d + q * ((d * d) * d)
    d64 = x.astype(np.float64) - center.astype(np.float64)
    h64, q64 = h.astype(np.float64), q.astype(np.float64)
    sq = d64 * d64
    terms = (0.5 * h64) * sq + (0.25 * q64) * (sq * sq)
    loss = 0.0
    for t in terms.tolist():
        loss += t
    grads, start = [], 0
    for p in params:
        grads.append(g[start:start + p.size].reshape(p.shape).copy())
        start += p.size
    return loss, grads


# ------------------------------------------------------------------------------ flag detection
def detect_flags(params, grads, lrs, expected, dtype):
    """The flags a case's data shows (see :data:`FLAGS`)."""
    flags = set()
    if any(p.size == 1 for p in params):
        flags.add("one-element")
    if len(params) > 1:
        flags.add("multi-param")
    if any(not np.any(p) for p in params):
        flags.add("zero-norm-param")
    if len(set(lrs)) > 1:
        flags.add("lr-schedule")
    touched = {}
    for t, step in enumerate(grads):
        for i, g in enumerate(step):
            if g is None:
                flags.add("none-grad")
            elif isinstance(g, CsrGrad):
                if g.nnz == 0:
                    flags.add("empty-grad")
                _csr_flags(g, flags)
                for r in range(g.shape[0]):
                    if g.indptr[r + 1] > g.indptr[r]:
                        touched.setdefault((i, r), t)
            elif not np.any(g):
                flags.add("zero-grad")
    csr_params = {i for step in grads for i, g in enumerate(step) if isinstance(g, CsrGrad)}
    for i in csr_params:
        rows = params[i].shape[0]
        if any((i, r) not in touched for r in range(rows)):
            flags.add("untouched-rows")
        if any(touched.get((i, r), -1) >= len(grads) // 2 for r in range(rows)):
            flags.add("late-first-touch")
    tiny = np.finfo(dtype).tiny
    for arrays in expected:
        for a in arrays:
            a = np.abs(np.asarray(a, np.float64))
            if np.any((a > 0) & (a < tiny)):
                flags.add("subnormal")
    return flags


def _csr_flags(g, flags):
    for r in range(g.shape[0]):
        lo, hi = g.indptr[r], g.indptr[r + 1]
        if hi == lo:
            continue
        cols = g.indices[lo:hi].tolist()
        vals = g.data[lo:hi].tolist()
        if any(b < a for a, b in zip(cols, cols[1:])):
            flags.add("unsorted-columns")
        if 0.0 in vals:
            flags.add("explicit-zero-entry")
        sums, counts = {}, {}
        for c, v in zip(cols, vals):
            sums[c] = sums.get(c, 0.0) + v
            counts[c] = counts.get(c, 0) + 1
        if any(n > 1 for n in counts.values()):
            flags.add("duplicate-rows")
        if any(counts[c] > 1 and sums[c] == 0 and any(v != 0 for c2, v in zip(cols, vals)
                                                      if c2 == c) for c in sums):
            flags.add("cancelling-duplicates")
        if all(v == 0 for v in sums.values()):
            flags.add("explicit-zero-row")


# ------------------------------------------------------------------------------- the table
@dataclass(frozen=True)
class Row:
    """One row of :data:`TABLE`: becomes one case per dtype, id ``optimizer/name/dtype``.

    * ``hyper``: constructor keywords that differ from the optimizer's defaults (the case
      stores every hyperparameter, defaults included).
    * ``shapes``: the parameters' shapes (one param group, in this order).
    * ``grads``: a :data:`PATTERNS` name; ``grad_scale`` multiplies the gradients;
      ``density`` is the fraction of rows a sparse pattern touches per step.
    * ``init``: how parameters start (``"uniform"`` in [-1, 1), ``"zeros"``, ``"small"``), one
      kind for all or a tuple with one per parameter.
    * ``schedule``: None (constant lr) or a :data:`SCHEDULES` name.
    * ``flags``: flags the data cannot show by itself (``eps-dominated``, ...).
    * ``tolerance``: overrides of :data:`DEFAULT_RTOL` as ``{"rtol": {dtype: x}, "atol":
      {dtype: x}, "reason": "..."}``.
    * ``matches``: the published implementation(s) the case reproduces; defaults to
      ``torch.optim.<torch name> 2.13`` for optimizers torch has.
    * ``objective``: an :data:`OBJECTIVES` name for closure-driven optimizers (LBFGS): each
      step calls ``step(closure)`` and the case stores the objective instead of gradients.
    """

    optimizer: str
    name: str
    comment: str
    hyper: dict = field(default_factory=dict)
    shapes: tuple = ((3, 5),)
    grads: str = "dense"
    grad_scale: float = 1.0
    density: float = 0.25
    init: object = "uniform"
    dtypes: tuple = ("float32", "float64")
    steps: int = 12
    schedule: Optional[str] = None
    flags: tuple = ()
    tolerance: Optional[dict] = None
    matches: tuple = ()
    objective: Optional[str] = None


#: Scale-relative tolerance per dtype (see the README, "Tolerances").
DEFAULT_RTOL = {"float32": 1e-5, "float64": 1e-12}
DEFAULT_REASON = {
    "float32": "float32 arithmetic over {steps} steps: implementations that evaluate the same "
               "formula in another order (torch's foreach and fused paths) differ by a few "
               "float32 ulps (1.2e-7) of the array's scale per step; 1e-5 of the scale leaves "
               "a wide margin for that and still fails a wrong formula, eps placement in the "
               "eps-dominated cases, a wrong step count or wrong sparse semantics by orders of "
               "magnitude.",
    "float64": "float64 arithmetic over {steps} steps: a different evaluation order costs a "
               "few float64 ulps (2.2e-16) of the array's scale per step; 1e-12 of the scale "
               "allows that and catches any difference in the algorithm.",
}

# Shapes used below.
SCALAR = ((1,),)
MATRIX = ((3, 5),)
MIXED = ((2, 3, 4), (7,), (1,))
TABLE_SMALL = ((16, 4),)
EMBEDDING = ((64, 8),)
LAYERS = ((4, 3), (3,))


def _common_dense(opt, lr, *, maximize=True, weight_decay=0.1, eps_scale=1e-9, extra=(),
                  eps_hyper=None):
    """Rows every dense optimizer gets: defaults, one element, maximize, weight decay, null
    and zero gradients, an lr schedule, an embedding-shaped dense gradient, eps-dominated."""
    rows = [
        Row(opt, "defaults", f"torch's defaults for {opt}.", {}),
        Row(opt, "one-element", "A single-element parameter.", dict(lr=lr), shapes=SCALAR),
        Row(opt, "null-and-zero-grads", "Three parameters; missing (null) and all-zero "
            "gradients in some steps.", dict(lr=lr), shapes=MIXED, grads="dense-none-zero"),
        Row(opt, "lr-schedule", "Linear warmup then cosine decay, lr given per step.",
            dict(lr=lr), steps=16, schedule="warmup-cosine"),
        Row(opt, "eps-dominated", "Tiny gradients: eps is comparable to the terms it is "
            "added to, so its placement matters.", dict(lr=lr, **(eps_hyper or {})),
            grad_scale=eps_scale, flags=("eps-dominated",)),
    ]
    if not eps_scale:  # no eps in the rule
        rows.pop()
    if maximize:
        rows.append(Row(opt, "maximize", "maximize=True: the gradient is negated.",
                        dict(lr=lr, maximize=True)))
    if weight_decay:
        rows.append(Row(opt, "weight-decay", "L2 weight decay added to the gradient.",
                        dict(lr=lr, weight_decay=weight_decay)))
    return rows + list(extra)


def _embedding_dense(opt, lr):
    return Row(opt, "embedding-dense", "A 64x8 embedding table with a dense gradient in which "
               "only a few rows are non-zero (unlike a lazy sparse optimizer, every row's state "
               "decays).", dict(lr=lr), shapes=EMBEDDING, grads="dense-rows", density=0.1,
               steps=10, dtypes=("float32",))


def _common_sparse(opt, lr, extra=()):
    """Rows every optimizer that takes CSR gradients gets."""
    return [
        Row(opt, "csr-embedding", "A 64x8 embedding table updated by lookups with repeated "
            "ids (duplicate rows summed).", dict(lr=lr), shapes=EMBEDDING,
            grads="csr-embedding", density=0.2, steps=10),
        Row(opt, "csr-duplicates", "Duplicate (row, column) entries, unsorted columns, and a "
            "duplicate pair that cancels to an explicit zero.", dict(lr=lr), shapes=TABLE_SMALL,
            grads="csr-duplicates"),
        Row(opt, "csr-explicit-zeros", "Explicit zero entries, whole explicit-zero rows and "
            "partially stored rows.", dict(lr=lr), shapes=TABLE_SMALL, grads="csr-zeros"),
        Row(opt, "csr-empty", "Empty CSR gradients (no stored entry) in some steps.",
            dict(lr=lr), shapes=TABLE_SMALL, grads="csr-empty"),
        Row(opt, "csr-late-row", "A row first touched two steps before the end; a row never "
            "touched.", dict(lr=lr), shapes=TABLE_SMALL, grads="csr-late"),
        Row(opt, "csr-1d", "A 1-D parameter (7,) taking CSR gradients of shape (7, 1).",
            dict(lr=lr), shapes=((7,),), grads="csr-embedding", density=0.5),
        Row(opt, "csr-3d", "A (4, 3, 2) parameter taking CSR gradients of shape (4, 6).",
            dict(lr=lr), shapes=((4, 3, 2),), grads="csr-embedding", density=0.5),
        Row(opt, "csr-null-grads", "Two tables; missing (null) gradients in some steps.",
            dict(lr=lr), shapes=((8, 4), (5, 3)), grads="csr-none"),
        Row(opt, "csr-lr-schedule", "CSR gradients under linear warmup then cosine decay.",
            dict(lr=lr), shapes=TABLE_SMALL, grads="csr-embedding", steps=16,
            schedule="warmup-cosine"),
    ] + list(extra)


MUON_TOLERANCE = {
    "rtol": {"float32": 1e-4, "float64": 1e-4},
    "reason": "Muon orthogonalizes in bfloat16, as torch does; npoptim reproduces torch's CPU "
              "summation order bit for bit, but on CPUs where oneDNN sums in another order "
              "(AMX, ARM) torch itself differs by one bfloat16 unit (2^-8 relative) in "
              "elements of the orthogonalized update, i.e. up to ~lr*2^-8 of the parameter "
              "per step. 1e-4 of the scale allows that for these lr over the case's steps; "
              "it also admits a Newton-Schulz iteration in float32."}
#: L-BFGS cases are float64 only: in float32 the dot products' summation order (which differs
#: between BLAS libraries, and between torch and NumPy) changes the curvature pairs by far more
#: than rounding once the iterate nears the optimum; torch against itself with reversed sums
#: differs by up to 1e-1 of the history's scale (tests/test_lbfgs.py measures this spread).
LBFGS_TOLERANCE = {
    "rtol": {"float64": 1e-10},
    "reason": "float64; L-BFGS feeds every rounding difference back through its curvature "
              "pairs, line search and stopping tests, and its dot products and norms are "
              "reductions whose summation order is implementation-defined (the objective's "
              "own formula is exact). Implementations with other reduction orders were "
              "measured up to 1.4e-11 of the scale from these cases; 1e-10 still fails a "
              "wrong two-loop recursion or step length by orders of magnitude."}

#: THE table. One entry per optimizer; rows of optimizers not installed are skipped.
TABLE = {
    "Adam": _common_dense("Adam", 1e-2, extra=[
        _embedding_dense("Adam", 1e-2),
        Row("Adam", "amsgrad", "amsgrad=True with shrinking gradients, so the running max "
            "differs from exp_avg_sq.", dict(lr=1e-2, amsgrad=True), grads="dense-shrinking"),
        Row("Adam", "decoupled-weight-decay", "decoupled_weight_decay=True (AdamW's rule).",
            dict(lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True)),
        Row("Adam", "amsgrad-maximize-weight-decay", "amsgrad, maximize and L2 weight decay "
            "together, three parameters.", dict(lr=1e-2, amsgrad=True, maximize=True,
                                                  weight_decay=0.05),
            shapes=MIXED, grads="dense-shrinking",
            tolerance={"rtol": {"float32": 1e-4}, "reason": (
                "float32; the one-element parameter's exp_avg nearly cancels (L2 decay "
                "against shrinking gradients), and for a one-element array the scale is the "
                "element itself: a correct implementation with another evaluation order was "
                "measured 3.4e-6 of it away (39 ulp) after 12 steps, so 1e-4 leaves the usual "
                "margin.")}),
        Row("Adam", "large-eps", "eps=0.1 with unit gradients: eps dominates sqrt(v_hat).",
            dict(lr=1e-2, eps=0.1), flags=("eps-dominated",)),
        Row("Adam", "betas-edge", "beta1=0 (no momentum; torch's lerp with weight 1) and a "
            "short beta2=0.5.", dict(lr=1e-2, betas=(0.0, 0.5))),
        Row("Adam", "subnormal", "float32 gradients of 1e-20: (1-beta2)*g^2 is subnormal in "
            "exp_avg_sq.", dict(lr=1e-2), grad_scale=1e-20, dtypes=("float32",),
            flags=("eps-dominated",)),
    ]),
    "AdamW": [
        Row("AdamW", "defaults", "torch's defaults for AdamW (weight_decay=0.01).", {}),
        Row("AdamW", "weight-decay", "Large decoupled weight decay.",
            dict(lr=0.05, weight_decay=0.5)),
        Row("AdamW", "amsgrad-maximize", "amsgrad and maximize, three parameters.",
            dict(lr=1e-2, amsgrad=True, maximize=True), shapes=MIXED, grads="dense-shrinking"),
        Row("AdamW", "lr-schedule", "Decoupled decay scales with the per-step lr.",
            dict(lr=1e-2, weight_decay=0.1), steps=16, schedule="warmup-cosine"),
        Row("AdamW", "eps-dominated", "Tiny gradients: eps placement matters.",
            dict(lr=1e-2), grad_scale=1e-9, flags=("eps-dominated",)),
        Row("AdamW", "null-and-zero-grads", "Missing and all-zero gradients; decoupled decay "
            "still applies on a zero gradient but not on a missing one.",
            dict(lr=1e-2, weight_decay=0.1), shapes=MIXED, grads="dense-none-zero"),
    ],
    "SparseAdam": _common_sparse("SparseAdam", 1e-2, extra=[
        Row("SparseAdam", "maximize-betas", "maximize=True with betas (0.8, 0.99).",
            dict(lr=1e-2, maximize=True, betas=(0.8, 0.99)), shapes=TABLE_SMALL,
            grads="csr-embedding"),
        Row("SparseAdam", "eps-dominated", "Tiny gradients: eps is added to sqrt(v) before "
            "bias correction here, unlike Adam.", dict(lr=1e-2), shapes=TABLE_SMALL,
            grads="csr-embedding", grad_scale=1e-9, flags=("eps-dominated",)),
    ]),
    "Adagrad": _common_dense("Adagrad", 0.1, eps_scale=1e-12, extra=[
        _embedding_dense("Adagrad", 0.1),
        Row("Adagrad", "lr-decay", "lr_decay=0.1: lr / (1 + (step-1) lr_decay).",
            dict(lr=0.1, lr_decay=0.1)),
        Row("Adagrad", "initial-accumulator", "initial_accumulator_value=0.1.",
            dict(lr=0.1, initial_accumulator_value=0.1)),
    ]) + _common_sparse("Adagrad", 0.1, extra=[
        Row("Adagrad", "csr-lr-decay-maximize", "lr_decay, initial accumulator and maximize "
            "with CSR gradients.", dict(lr=0.1, lr_decay=0.05, initial_accumulator_value=0.5,
                                        maximize=True),
            shapes=TABLE_SMALL, grads="csr-duplicates"),
    ]),
    "Adadelta": _common_dense("Adadelta", 1.0, eps_scale=1e-5, extra=[
        Row("Adadelta", "rho", "rho=0.5 and a larger eps.", dict(rho=0.5, eps=1e-3)),
    ]),
    "SGD": _common_dense("SGD", 0.1, eps_scale=None, extra=[
        Row("SGD", "momentum", "momentum=0.9.", dict(lr=0.1, momentum=0.9)),
        Row("SGD", "momentum-dampening", "momentum=0.9, dampening=0.5 (not applied to the "
            "first step's buffer).", dict(lr=0.1, momentum=0.9, dampening=0.5)),
        Row("SGD", "nesterov", "Nesterov momentum with weight decay.",
            dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
        Row("SGD", "momentum-lr-schedule", "Momentum under a schedule: lr is applied outside "
            "the buffer.", dict(lr=0.1, momentum=0.9), steps=16, schedule="warmup-cosine"),
        Row("SGD", "momentum-null-grads", "Momentum with missing and zero gradients.",
            dict(lr=0.1, momentum=0.9), shapes=MIXED, grads="dense-none-zero"),
    ]) + _common_sparse("SGD", 0.1, extra=[
        Row("SGD", "csr-momentum", "Momentum with CSR gradients: rows keep coasting after "
            "their last touch (torch's sparse buffer equals a dense one).",
            dict(lr=0.1, momentum=0.9), shapes=TABLE_SMALL, grads="csr-late"),
    ]),
    "RMSprop": _common_dense("RMSprop", 1e-2, extra=[
        Row("RMSprop", "centered", "centered=True (grad_avg state).",
            dict(lr=1e-2, centered=True)),
        Row("RMSprop", "momentum", "momentum=0.9.", dict(lr=1e-2, momentum=0.9)),
        Row("RMSprop", "centered-momentum-alpha", "centered, momentum and alpha=0.9.",
            dict(lr=1e-2, centered=True, momentum=0.5, alpha=0.9), shapes=MIXED),
    ]),
    "Adamax": _common_dense("Adamax", 2e-2, extra=[
        Row("Adamax", "betas", "betas (0.5, 0.9) with shrinking gradients (the infinity norm "
            "keeps the max).", dict(lr=2e-2, betas=(0.5, 0.9)), grads="dense-shrinking"),
    ]),
    "NAdam": _common_dense("NAdam", 2e-2, extra=[
        Row("NAdam", "momentum-decay", "momentum_decay=0.1: mu_t changes fast.",
            dict(lr=2e-2, momentum_decay=0.1)),
        Row("NAdam", "decoupled-weight-decay", "decoupled_weight_decay=True.",
            dict(lr=2e-2, weight_decay=0.1, decoupled_weight_decay=True)),
    ]),
    "RAdam": _common_dense("RAdam", 1e-2, extra=[
        Row("RAdam", "decoupled-weight-decay", "decoupled_weight_decay=True.",
            dict(lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True)),
        Row("RAdam", "rectification", "betas (0.9, 0.9): the variance rectification switches "
            "on within the steps.", dict(lr=1e-2, betas=(0.9, 0.9)), steps=14),
    ]),
    "ASGD": _common_dense("ASGD", 1e-2, eps_scale=None, extra=[
        Row("ASGD", "averaging", "t0=3: averaging (ax, mu) starts at step 4; lambd and alpha "
            "changed.", dict(lr=1e-2, t0=3, lambd=1e-2, alpha=0.5)),
    ]),
    "Rprop": _common_dense("Rprop", 1e-2, weight_decay=0, eps_scale=None, extra=[
        Row("Rprop", "sign-flips", "Gradients flip sign each step in half of the elements: "
            "step sizes shrink there and grow elsewhere.", dict(lr=1e-2),
            grads="dense-signflip", flags=("sign-flips",)),
        Row("Rprop", "step-size-bounds", "Tight step_sizes (1e-3, 2e-2) and etas (0.3, 1.5), "
            "so both bounds are hit.", dict(lr=1e-2, etas=(0.3, 1.5), step_sizes=(1e-3, 2e-2)),
            grads="dense-signflip", flags=("sign-flips",)),
    ]),
    "LAMB": [
        Row("LAMB", "paper-v5", "Paper v5 Algorithm 2 = optax.lamb = TF-Addons LAMB, weight "
            "decay inside the trust ratio.", dict(lr=1e-2, weight_decay=0.01), shapes=LAYERS,
            matches=("paper v5 Alg. 2", "optax.lamb", "TF-Addons LAMB",
                     "timm Lamb(max_grad_norm=None)")),
        Row("LAMB", "paper-v5-zero-bias", "A zero-initialised bias: the trust ratio takes its "
            "zero-norm fallback (ratio 1) in the first step.",
            dict(lr=1e-2, weight_decay=0.01), shapes=LAYERS, init=("uniform", "zeros"),
            matches=("paper v5 Alg. 2", "optax.lamb", "TF-Addons LAMB")),
        Row("LAMB", "paper-v5-lr-schedule", "Paper v5 under warmup + cosine.",
            dict(lr=1e-2, weight_decay=0.01), shapes=LAYERS, steps=16, schedule="warmup-cosine",
            matches=("paper v5 Alg. 2", "optax.lamb", "TF-Addons LAMB")),
        Row("LAMB", "apex", "NVIDIA apex FusedLAMB (NVLAMB) = timm Lamb defaults: global "
            "gradient clipping at 1.0, no trust ratio when weight_decay is 0.",
            dict(lr=1e-2, variant="apex"), shapes=LAYERS, grad_scale=3.0,
            matches=("NVIDIA/apex FusedLAMB", "timm Lamb (defaults)")),
        Row("LAMB", "keras3", "Keras 3 Lamb: decoupled decay applied first, outside the "
            "ratio; eps=1e-7.", dict(lr=1e-2, weight_decay=0.01, variant="keras3"),
            shapes=LAYERS, matches=("keras.optimizers.Lamb (Keras 3)",)),
        Row("LAMB", "albert-v3", "Google ALBERT / paper v3: no bias correction.",
            dict(lr=1e-2, weight_decay=0.01, variant="albert_v3"), shapes=LAYERS,
            matches=("google-research/albert lamb_optimizer.py", "paper v3")),
        Row("LAMB", "kozistr", "kozistr/pytorch_optimizer Lamb defaults: step lr/b1, phi "
            "clamped to 10, eps in the ratio.", dict(lr=1e-2, weight_decay=0.01,
                                                       variant="kozistr"),
            shapes=LAYERS, matches=("kozistr/pytorch_optimizer Lamb",)),
        Row("LAMB", "tutorial", "Ratio ||w||/||g|| clamped to [0, 10], decoupled decay.",
            dict(lr=1e-2, weight_decay=0.01, variant="tutorial"), shapes=LAYERS,
            matches=("tutorial LAMB (ratio of the raw gradient)",)),
        Row("LAMB", "apex-no-decay", "apex defaults with weight_decay=0: no trust ratio at all "
            "(apex/timm adapt only when weight decay is non-zero).",
            dict(lr=1e-2, variant="apex", weight_decay=0.0), shapes=LAYERS, grad_scale=3.0,
            matches=("NVIDIA/apex FusedLAMB", "timm Lamb (defaults)")),
        Row("LAMB", "switches", "L2 weight decay fed into the moments (apex adam_w_mode=False), "
            "no gradient averaging, LAMBC trust clipping and phi bounds.",
            dict(lr=1e-2, weight_decay=0.05, weight_decay_mode="l2", grad_averaging=False,
                 trust_clip=True, phi_bounds=(0.5, 2.0)), shapes=LAYERS,
            matches=("npoptim switches (apex adam_w_mode=False, timm trust_clip)",)),
        Row("LAMB", "eps-dominated", "Tiny gradients: eps dominates the Adam direction.",
            dict(lr=1e-2, weight_decay=0.01), shapes=LAYERS, grad_scale=1e-8,
            flags=("eps-dominated",), matches=("paper v5 Alg. 2", "optax.lamb")),
    ],
    "Adafactor": _common_dense("Adafactor", 1e-2, weight_decay=0.1, eps_scale=1e-9, extra=[
        Row("Adafactor", "factored-3d", "A vector (full variance), a matrix and a 3-D "
            "parameter (factored over the last two dimensions).", dict(lr=1e-2),
            shapes=((7,), (4, 6), (2, 3, 4))),
        Row("Adafactor", "clipping-decay", "d=1.2 (update clipping threshold), beta2_decay=-0.5 "
            "and explicit eps (1e-3, 1e-2).", dict(lr=1e-2, d=1.2, beta2_decay=-0.5,
                                                   eps=(1e-3, 1e-2))),
    ]),
    "Muon": [
        Row("Muon", "defaults", "torch's defaults for Muon on a 4x6 matrix (wide orientation).",
            {}, shapes=((4, 6),), tolerance=MUON_TOLERANCE),
        Row("Muon", "tall", "A tall 6x4 matrix (orthogonalized transposed) and lr adjustment "
            "sqrt(max(1, A/B)).", dict(lr=1e-2), shapes=((6, 4),), tolerance=MUON_TOLERANCE),
        Row("Muon", "no-nesterov-match-rms", "nesterov=False, adjust_lr_fn='match_rms_adamw', "
            "weight_decay=0, ns_steps=3.", dict(lr=1e-2, nesterov=False,
                                                adjust_lr_fn="match_rms_adamw",
                                                weight_decay=0.0, ns_steps=3),
            shapes=((5, 5),), tolerance=MUON_TOLERANCE),
        Row("Muon", "null-grads-schedule", "Two matrices, missing gradients in some steps, "
            "under warmup + cosine.", dict(lr=1e-2, momentum=0.9), shapes=((3, 5), (4, 4)),
            grads="dense-none-zero", steps=16, schedule="warmup-cosine",
            tolerance=MUON_TOLERANCE),
    ],
    "LARS": [
        Row("LARS", "paper", "Paper Algorithm 1: lr inside the momentum buffer, trust ratio "
            "eta*||w|| / (||g|| + lambda*||w||).", dict(lr=0.1, weight_decay=1e-4),
            shapes=LAYERS, matches=("arXiv 1708.03888 Alg. 1", "FBGEMM lars_sgd (per tensor)")),
        Row("LARS", "paper-lr-schedule", "The paper's convention under warmup + cosine: the lr "
            "sits inside the buffer, so this differs from timm/torchlars.",
            dict(lr=0.1, weight_decay=1e-4), shapes=LAYERS, steps=16,
            schedule="warmup-cosine", matches=("arXiv 1708.03888 Alg. 1",)),
        Row("LARS", "optax", "optax.lars: ||g + lambda*w|| in the denominator.",
            dict(lr=0.1, weight_decay=1e-4, variant="optax"), shapes=LAYERS,
            matches=("optax.lars",)),
        Row("LARS", "timm-lr-schedule", "timm Lars: lr outside the buffer, eps=1e-8, "
            "adaptation only with weight decay; under warmup + cosine.",
            dict(lr=0.1, weight_decay=1e-4, variant="timm"), shapes=LAYERS, steps=16,
            schedule="warmup-cosine", matches=("timm Lars",)),
        Row("LARS", "torchlars", "torchlars.LARS wrapping torch SGD: as timm, always adapts.",
            dict(lr=0.1, weight_decay=1e-4, variant="torchlars"), shapes=LAYERS,
            matches=("kakaobrain/torchlars LARS(SGD)",)),
        Row("LARS", "larc", "apex LARC (clip=True, eta=0.02): local lr capped at lr.",
            dict(lr=0.1, weight_decay=1e-4, variant="larc"), shapes=LAYERS,
            matches=("NVIDIA/apex LARC (clip=True)",)),
        Row("LARS", "tutorial", "Buffer of raw gradients, lr*ratio at the update, no decay in "
            "the update.", dict(lr=0.1, weight_decay=1e-4, variant="tutorial"), shapes=LAYERS,
            matches=("tutorial LARS (raw-gradient buffer)",)),
        Row("LARS", "zero-bias-nesterov", "A zero-initialised bias (zero-norm fallback, ratio "
            "1) with Nesterov momentum.", dict(lr=0.1, weight_decay=1e-4, nesterov=True),
            shapes=LAYERS, init=("uniform", "zeros"), matches=("arXiv 1708.03888 Alg. 1",)),
        Row("LARS", "torch-dampening", "torch momentum convention with dampening=0.5 (not "
            "applied to the first step's buffer).",
            dict(lr=0.1, weight_decay=1e-4, dampening=0.5, momentum_convention="torch"),
            shapes=LAYERS, matches=("npoptim switches (torch SGD momentum, LARS ratio)",)),
        Row("LARS", "exclude-1d", "exclude_1d=True: the bias gets plain momentum SGD.",
            dict(lr=0.1, weight_decay=1e-4, exclude_1d=True), shapes=LAYERS,
            matches=("arXiv 1708.03888 Alg. 1 (biases excluded)",)),
    ],
    "LBFGS": [
        Row("LBFGS", "fixed-step", "line_search_fn=None, 4 iterations per step on a separable "
            "quartic objective (the case stores the objective, not gradients).",
            dict(lr=1.0, max_iter=4, history_size=5), shapes=((3, 5), (4,)),
            objective="separable-quartic",
            dtypes=("float64",), tolerance=LBFGS_TOLERANCE),
        Row("LBFGS", "strong-wolfe", "Strong Wolfe line search, 3 iterations per step.",
            dict(lr=1.0, max_iter=3, line_search_fn="strong_wolfe", history_size=5),
            shapes=((3, 5), (4,)),
            objective="separable-quartic", dtypes=("float64",), tolerance=LBFGS_TOLERANCE),
        Row("LBFGS", "short-history", "history_size=2 (the history wraps), lr=0.5, "
            "2 iterations per step.", dict(lr=0.5, max_iter=2, history_size=2),
            shapes=((6,),), objective="separable-quartic", dtypes=("float64",),
            tolerance=LBFGS_TOLERANCE),
    ],
}


def rows(optimizers=None):
    """The rows of the given optimizers (all in :data:`TABLE` by default), in table order."""
    names = TABLE if optimizers is None else [n for n in TABLE if n in optimizers]
    return [row for name in names for row in TABLE[name]]
