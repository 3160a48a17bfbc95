"""The flags of golden cases: what each one means, and the ones a case's data shows.

:data:`FLAGS` becomes the ``notes`` of every golden file (as in Wycheproof): per flag, the bug it
targets, what it is and what a bug does. A case's flags are those its row declares (see
:class:`npoptim.golden.cases.Row`) plus those :func:`detect_flags` finds in its data.
"""
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
    # low precision (npoptim.precision; schema version 3, the case's "precision" object)
    "per-op-rounding": dict(
        bug_type="low precision",
        description="bfloat16/float16 params, grads and state, every tensor operation of "
                    "torch's single-tensor step rounded to the 16-bit type (torch's CPU "
                    "default on 16-bit tensors; precision.rounding \"per-op\").",
        effect="Computing the step in float32 and rounding once (a fused kernel) gives other "
               "16-bit values in most elements within a few steps."),
    "fused-rounding": dict(
        bug_type="low precision",
        description="bfloat16/float16 storage, the step computed in float32 from the stored "
                    "values and each stored value rounded once to nearest even (torch's "
                    "fused=True kernels; precision.rounding \"fused\").",
        effect="Rounding intermediates to 16 bits, or truncating instead of rounding to "
               "nearest even, moves elements by units of the 16-bit type."),
    "master-weights": dict(
        bug_type="low precision",
        description="float32 master weights and state behind a 16-bit model: the optimizer "
                    "steps the masters, then every model element is its master rounded to "
                    "nearest even (precision.master_weights \"float32\"); the state is "
                    "float32.",
        effect="Stepping the 16-bit copy itself loses updates below half a 16-bit spacing; "
               "truncating the copy biases it toward zero."),
    "stochastic-rounding": dict(
        bug_type="low precision",
        description="The new 16-bit parameter is rounded stochastically with the "
                    "counter-based stream of npoptim.precision.stochastic (SplitMix64 of "
                    "seed, parameter, step and element index; precision.seed), the moments "
                    "to nearest (precision.rounding \"stochastic\").",
        effect="Another random stream matches only statistically; rounding to nearest "
               "instead stalls small updates."),
    "kahan": dict(
        bug_type="low precision",
        description="Kahan-compensated 16-bit updates as torch-optimi's kahan_sum=True: the "
                    "state kahan_comp keeps what the 16-bit parameter could not take "
                    "(precision.kahan true).",
        effect="Without the compensation (or with it rounded in another order) small updates "
               "are lost and the trajectory drifts by 16-bit units."),
    "quantized-state": dict(
        bug_type="low precision",
        description="Blockwise-quantized moments (torchao's AdamW8bit/AdamW4bit/AdamWFp8, "
                    "precision.quantization): each step dequantizes the state, updates in "
                    "float32 and quantizes it again with a new scale per block; the state "
                    "(codes, scales, maps) is stored at the last step.",
        effect="A different map, block size, scale (absmax floor, division or reciprocal) or "
               "rounding of a code to the nearer map value moves codes, and through the "
               "dequantized moments every later parameter."),
    "lapack-svd": dict(
        bug_type="platform dependence",
        description="The expected values go through LAPACK's SVD (gesdd through scipy, with "
                    "LAPACK's own singular-vector signs, as the framework the case follows "
                    "computes it): unlike every other case, its last bits depend on the CPU "
                    "and the LAPACK build (OpenBLAS picks its kernels by CPU: 8.5e-7 of the "
                    "scale apart in float32 between its core types, measured), which the "
                    "tolerance covers. regenerate --check and the tests compare such a case "
                    "to its tolerance, not bit for bit.",
        effect="A LAPACK that picks another sign for a singular vector carries the moments "
               "over into the opposite basis at a refresh: off by the parameters' scale."),
}


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
