"""The inputs of golden cases: the RNG, lr schedules, parameter initialisers, gradient patterns
and the objectives of closure-driven optimizers.

All inputs are made by :class:`Rng` (SplitMix64, integers only), seeded with the CRC-32 of the
case id (:func:`case_seed`), so they are the same on every platform and NumPy version. A row of
:data:`npoptim.golden.cases.TABLE` names its pattern (:data:`PATTERNS`), schedule
(:data:`SCHEDULES`) and objective (:data:`OBJECTIVES`).
"""
import math
import zlib
from fractions import Fraction

import numpy as np

from npoptim.golden.codec import CsrGrad
from npoptim.kernels.counter_stream import cos_turns

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

    The cosine is :func:`npoptim.kernels.counter_stream.cos_turns` (a fixed formula, not the
    platform's ``cos``, whose last bit differs by CPU), and values are rounded to 12
    significant digits. Returns ``(lrs, description)``.
    """
    eta_min = base_lr * eta_min_factor
    lrs = []
    for t in range(steps):
        if t < warmup_steps:
            lr = base_lr * (start_factor + (1.0 - start_factor) * t / warmup_steps)
        else:
            # cos(pi a / b) = cos_turns(a / 2b): npoptim's fixed cos, the same on every CPU
            turns = (t - warmup_steps) / (2.0 * (steps - warmup_steps))
            lr = eta_min + (base_lr - eta_min) * (1.0 + float(cos_turns(turns))) / 2.0
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
    """Dense gradients whose magnitude shrinks by 0.6 per step (amsgrad's max matters): the
    factor of step t is the float64 nearest to 0.6**t (exactly, from the rational value, not
    by the platform's pow)."""
    return [[_dense(rng, s, dtype, scale * float(Fraction(0.6) ** t)) for s in shapes]
            for t in range(steps)]


def pattern_dense_signflip(rng, shapes, dtype, steps, scale, density):
    """Dense gradients whose sign flips every step in about half of the elements."""
    out = []
    for t in range(steps):
        grads = []
        for s in shapes:
            n = int(np.prod(s, dtype=np.int64))
            base = 0.2 + rng.uniform(n, 0.0, 1.0)
            flip = np.where(np.arange(n) % 2 == 0, -1.0 if t % 2 else 1.0, 1.0)
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
            u = rng.uniform(k, 0.0, 1.0)
            ids = np.floor(rows * (u * u)).astype(np.int64)
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


def _with_cancelling_pair(rng, entries, row, cols, scale):
    """``entries`` with those of ``row`` replaced by a duplicate pair that cancels exactly (an
    explicit zero after summing) next to a normal entry."""
    x = float(rng.uniform(1)[0]) * scale
    return ([e for e in entries if e[0] != row]
            + [(row, 0, x), (row, cols - 1, x / 2), (row, 0, -x)])


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
                entries = _with_cancelling_pair(rng, entries, (int(ids[0]) + 1) % rows, cols,
                                                scale)
            grads.append(csr_from_entries(entries, (rows, cols), dtype))
        out.append(grads)
    return out


def pattern_csr_duplicate_sums(rng, shapes, dtype, steps, scale, density):
    """Duplicates whose 16-bit sum is tested, at most 16 stored entries per step for a table of
    4 columns (torch 2.13's CPU ``coalesce()`` sorts the indices stably only up to 16 entries,
    so that torch sums duplicates in stored order, as the format defines). Each step looks up
    2 rows of the first ``rows - 2`` (the last two are never touched), the first of them twice
    (duplicate entries), its first lookup's columns stored in reverse (unsorted). In step 4 a
    fresh row holds a duplicate pair that cancels exactly (an explicit zero) next to a normal
    entry. In steps 2, 7, 12, ... the first row is instead looked up three times: a value, then
    twice a small one, ``2**-(9 + column % 4)`` times it (times 1 to 1.9), so that in a 16-bit
    type some columns' sum depends on its order and precision (in stored order a small addend
    below half an ulp rounds back to the first value; summed in float32 first, the two
    together round up)."""
    out = []
    for t in range(steps):
        grads = []
        for s in shapes:
            rows, cols = _row_shape(s)
            first, other = (int(r) for r in rng.integers(2, rows - 2))
            if t % 5 == 1:
                value = rng.uniform(cols) * scale
                small = value * np.ldexp(1.0, -(9 + np.arange(cols) % 4)) * rng.uniform(cols, 1.0,
                                                                                  1.9)
                entries = ([(first, c, value[c]) for c in range(cols)]
                           + [(first, c, small[c]) for c in range(cols)] * 2
                           + _lookups(rng, s, [other], dtype, scale))
            else:
                entries = _lookups(rng, s, [first, other, first], dtype, scale)
                entries = entries[:cols][::-1] + entries[cols:]
            if t == 3:
                fresh = (max(first, other) + 1) % (rows - 2)
                entries = _with_cancelling_pair(rng, entries, fresh, cols, scale)
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


#: Examples per batch of the ``per-example`` pattern.
PER_EXAMPLE_BATCH = 4


def pattern_per_example(rng, shapes, dtype, steps, scale, density):
    """Per-example gradients (DP-SGD): for each parameter an array of shape
    ``(PER_EXAMPLE_BATCH, *shape)``, example ``b``'s uniform(-1, 1) values times
    ``scale * 2**(b - 1)`` (global norms from small to large, so a clipping norm in between
    clips some examples and not others)."""
    out = []
    for _ in range(steps):
        grads = []
        for s in shapes:
            n = int(np.prod(s, dtype=np.int64))
            factors = scale * np.ldexp(1.0, np.arange(PER_EXAMPLE_BATCH) - 1)
            values = rng.uniform(PER_EXAMPLE_BATCH * n).reshape(PER_EXAMPLE_BATCH, n)
            grads.append((values * factors[:, None]).astype(dtype).reshape(
                (PER_EXAMPLE_BATCH,) + tuple(s)))
        out.append(grads)
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
    "csr-duplicate-sums": pattern_csr_duplicate_sums,
    "csr-zeros": pattern_csr_zeros,
    "csr-empty": pattern_csr_empty,
    "csr-late": pattern_csr_late,
    "csr-none": pattern_csr_none,
    "per-example": pattern_per_example,
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
