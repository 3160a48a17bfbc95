"""The low-precision cases, ``reference_results/cases/precision/<Optimizer>.json`` (schema
version 3): bfloat16 and float16 params, grads and state in each mode of
:mod:`npoptim.precision`.

A case's ``precision`` object names the mode (see ``reference_results/README.md``):

========================  ====================================================================
mode (id part, flag)      ``precision``; what runs
========================  ====================================================================
``per-op``                ``rounding "per-op"``: ``npoptim.precision.<Opt>(rounding="per-op")``,
(``per-op-rounding``)     torch's single-tensor CPU path on 16-bit tensors (every op rounded)
``fused``                 ``rounding "fused"``: torch's ``fused=True`` (float32 inside, one
(``fused-rounding``)      rounding of each stored value)
``stochastic``            ``rounding "stochastic"``, ``seed``: fused, the new parameter rounded
(``stochastic-rounding``) stochastically with the counter-based stream of
                          :mod:`npoptim.precision.stochastic`
``master-weights``        ``master_weights "float32"``: npoptim's float32 optimizer on float32
(``master-weights``)      masters; the params are the 16-bit model copy (rounded to nearest
                          after each step); the state is the float32 optimizer's
``kahan``                 ``kahan true``: torch-optimi's ``kahan_sum=True`` formulation
(``kahan``)               (``npoptim.precision.Kahan<Opt>``), every op rounded
``torchao-8bit``,         ``quantization "torchao-8bit"`` (``"torchao-4bit"``,
``torchao-4bit``,         ``"torchao-fp8"``), ``rounding "fused"``: float32 params and grads,
``torchao-fp8``           blockwise-quantized moments, ``npoptim.precision.<Opt>8bit``
(``quantized-state``)     (``4bit``, ``Fp8``), torchao 0.18's CPU result bit for bit. The
                          state (codes, scales, maps under torchao's names) is stored at the
                          last step only, to keep the 4096-element cases small.
``bnb-8bit``              ``quantization "bnb-8bit"``: ``npoptim.precision.Bnb<Opt>8bit``,
(``quantized-state``)     bitsandbytes 0.50.2's CPU Adam8bit/AdamW8bit (codes and absmax bit
                          for bit, params within a few float32 ulps), state under its names
                          (``state1``, ``qmap1``, ``absmax1``, ...), stored at the last step
========================  ====================================================================

A closure-driven row (LBFGS) stores its ``objective`` (:mod:`npoptim.golden.inputs`, its
arrays in the 16-bit type, evaluated in it) instead of gradients, and its state, like a
quantized case's, at the last step only (the size budget).

A quantized row may set ``active``: the params' and grads' elements from that flat index on
are zero (they stay zero: whole blocks of zero moments, the scale's floor), so that a
4096-element torchao case, the least torchao quantizes, stores in few bytes.

A row whose gradient pattern is a CSR one (:data:`npoptim.golden.inputs.PATTERNS`,
``csr-*``) stores CSR gradients exactly as the float cases do
(:mod:`npoptim.golden.codec`: ``{"format": "csr", "dtype", "shape": [rows, cols], "indptr",
"indices", "data"}``, duplicate ``(row, column)`` entries, unsorted columns and explicit zeros
kept), their ``data`` in the case's 16-bit dtype, each value stored as the number it exactly
is; the optimizer sums duplicates itself, in the 16-bit type and in stored order (torch's CPU
``coalesce()``). Its ``sparse_kind`` is the 16-bit class's (SparseAdam: ``lazy``) and its
tags include ``csr``. Schema version 3 already held such a gradient (a CSR gradient's dtype is
the case's), so these files are version 3 too, and the JSON Schema is unchanged. The suite's
one such row is ``SparseAdam/per-op/csr-duplicates`` (torch's ``SparseAdam``, whose only path
is per-op): an 8x4 table, 20 steps, at most 16 stored entries a step (torch 2.13's CPU
``coalesce()`` keeps stored order only up to 16 entries, beyond which an order-sensitive 16-bit
sum is its unstable sort's), the state stored after every 5th step only (``state_every``;
``null`` at the others, as the quantized cases' earlier steps: the size budget).

Every parameter's size is a multiple of 32, so torch's CPU kernels never reach their scalar
remainder loop (:mod:`npoptim.precision.adam`): the elementwise cases are torch's CPU results
bit for bit with AVX2 or AVX-512, and what a GPU kernel without such a tail computes. Not so
the cases with reductions or products whose float32 sums npoptim adds in torch's x86 CPU
order (measured on AVX-512): Adafactor's norms and row mean, LBFGS's dot products and sums,
Muon's Newton-Schulz products; a GPU or an ARM build adds in another order, so its 16-bit
results may differ from these by an ulp now and then (more in LBFGS, which feeds them back). Case ids are
``"<Optimizer>/<mode>/<row>/<dtype>"``.
"""
import math

import numpy as np

from npoptim import registry
from npoptim.golden import cases, codec, generate, inputs
from npoptim.golden.flags import FLAGS, detect_flags
from npoptim.golden.replay import QUANTIZATIONS, make_optimizer, npoptim_make_step

#: mode -> (the flag it sets, the ``precision`` object of its cases without the seed)
MODES = {
    "per-op": ("per-op-rounding", dict(rounding="per-op", master_weights=None, kahan=False)),
    "fused": ("fused-rounding", dict(rounding="fused", master_weights=None, kahan=False)),
    "stochastic": ("stochastic-rounding",
                   dict(rounding="stochastic", master_weights=None, kahan=False)),
    "master-weights": ("master-weights",
                       dict(rounding="fused", master_weights="float32", kahan=False)),
    "kahan": ("kahan", dict(rounding="per-op", master_weights=None, kahan=True)),
}
MODES.update({q: ("quantized-state", dict(rounding="fused", master_weights=None, kahan=False,
                                          quantization=q)) for q in QUANTIZATIONS})
#: a quantized-state case's single parameter: torchao's smallest quantized size, 4096
QUANTIZED_SHAPES = ((16, 256),)
#: a quantized-state case's initial params and grads are multiples of 1/64 (drawn as float32
#: then rounded to the grid), so that they store in a few digits (the size budget)
QUANTIZED_GRID = 64
#: options of the 16-bit classes that the case's ``precision`` object holds instead of its
#: ``hyperparameters`` (``format``: the dtype says it; ``torch_cpu_lanes``: no tail, above)
PRECISION_OPTIONS = ("rounding", "format", "torch_cpu_lanes", "seed", "kahan_sum")
#: torch optimizers with their single-tensor path only (no ``foreach`` option to name)
SINGLE_TENSOR_ONLY = ("Muon", "LBFGS", "SparseAdam")
#: the seed of stochastic rounding's stream in the suite's cases
STOCHASTIC_SEED = 2026
#: allowed distance of a 16-bit array, in units in the last place of the 16-bit type
ULP_TOLERANCE = 1
TOLERANCE_REASON = (
    "16-bit arrays: within {ulp} ulp of the 16-bit type, element by element. npoptim is torch "
    "2.13's CPU result bit for bit in these modes (tests/test_precision_golden.py); an "
    "implementation that evaluates a float32 intermediate in another order (a fused "
    "multiply-add or not) lands on the neighbouring 16-bit value where the float32 result is "
    "near a rounding midpoint, and that difference stays about one unit. The other rounding "
    "mode, a missing rounding of one operation or unrounded state fails by many units "
    "(measured in tests/test_precision_golden.py). Float arrays of the case (master weights' "
    "float32 state) by rtol {rtol:g} of their scale, as float32 cases.")

SHAPES = ((4, 8), (32,))
#: one 32-element parameter: the size budget of the later per-op families' cases
TINY_SHAPES = ((4, 8),)
HALF = ("bfloat16", "float16")
#: a 16-bit CSR case's table (32 elements, few rows per step) and steps: the size budget
SPARSE_SHAPES = ((8, 4),)
SPARSE_STEPS = 20
#: ... whose state is stored after steps 5, 10, 15 and 20 only (params after every step)
SPARSE_STATE_EVERY = 5


def quantized_tolerance(rtol, mode="torchao-8bit"):
    """The tolerance of a quantized-state (float32) case."""
    agreement = ("bitsandbytes 0.50.2's CPU result with codes and absmax bit for bit and params "
                 "within a few float32 ulps (torch's vectorized sqrt)" if mode == "bnb-8bit"
                 else "torchao 0.18's CPU result bit for bit")
    return {"rtol": rtol, "atol": 0.0, "lre": round(-math.log10(rtol), 3),
            "scale": "max |expected| of each array",
            "reason": f"float32 params and scales by rtol {rtol:g} of their scale, as float32 "
                      "cases; codes (integers) exactly (a code is 1 unit of 255 apart). npoptim "
                      f"is {agreement} "
                      "(tests/test_precision_golden.py); one moment landing on the other side "
                      "of a code's midpoint changes its code and the next steps' parameters."}


def _modes(optimizer, name, comment, hyper, modes, **options):
    """One :class:`~npoptim.golden.cases.Row` per mode (its ``precision_mode``), with this
    family's defaults: :data:`SHAPES`, :data:`HALF`, 10 steps."""
    options = dict(dict(shapes=SHAPES, dtypes=HALF, steps=10), **options)
    return [cases.Row(optimizer, name, comment, hyper, precision_mode=mode, **options)
            for mode in modes]


#: optimizer -> its precision rows (:class:`~npoptim.golden.cases.Row` with a
#: ``precision_mode``; one case per row and dtype), written to
#: ``cases/precision/<Optimizer>.json``
TABLE = {
    "Adam": _modes("Adam", "weight-decay", "L2 weight decay: torch's per-op path rounds the "
                   "decayed gradient (and R(weight_decay)), the fused kernel does not.",
                   dict(lr=1e-2, weight_decay=0.1), ("per-op", "fused"))
    + _modes("Adam", "amsgrad-null-grads", "amsgrad with missing and zero gradients.",
             dict(lr=1e-2, amsgrad=True), ("per-op",), grads="dense-none-zero")
    + _modes("Adam", "eps-dominated", "Gradients of 1e-6 and eps 1e-6: torch's per-op "
             "denom.add_(eps) rounds eps to the 16-bit type first (a float32 eps fails).",
             dict(lr=1e-2, eps=1e-6), ("per-op",), grad_scale=1e-6, flags=("eps-dominated",))
    + _modes("Adam", "weight-decay", "torchao's Adam4bit (L2 decay) on one float32 parameter "
             "of 4096 elements, blocks of 128: the first 256 elements (2 blocks) are live, the "
             "rest zero (zero blocks: the scale's floor 1e-12, the unsigned 4-bit map has no "
             "zero); beta1 0.3 takes lerp's second form.",
             dict(lr=1e-2, betas=(0.3, 0.99), weight_decay=0.05), ("torchao-4bit",),
             dtypes=("float32",), shapes=QUANTIZED_SHAPES, active=256),
    "AdamW": _modes("AdamW", "defaults", "torch's AdamW defaults on 16-bit params.",
                    dict(lr=1e-2), ("per-op", "fused", "master-weights"))
    + _modes("AdamW", "weight-decay", "Decoupled weight decay 0.1.",
             dict(lr=1e-2, weight_decay=0.1), ("stochastic",))
    + _modes("AdamW", "optimi", "torch-optimi's AdamW (debiased betas, eps 1e-6 added to "
             "sqrt(v)) with a small lr, where Kahan compensation keeps updates plain "
             "bfloat16 loses.", dict(lr=1e-3), ("kahan",))
    + _modes("AdamW", "weight-decay", "torchao's AdamW8bit on one float32 parameter of 4096 "
             "elements (16 blocks of 256): moments stored as 8-bit codes of the dynamic map "
             "and a scale per block; the first 1024 elements (4 blocks) are live, the rest "
             "zero; the state is stored at the last step.",
             dict(lr=1e-2, weight_decay=0.1), ("torchao-8bit",), dtypes=("float32",),
             shapes=QUANTIZED_SHAPES, active=1024)
    + _modes("AdamW", "amsgrad", "torchao's AdamWFp8 with amsgrad on one float32 parameter of "
             "4096 elements: float8 e4m3fn moments and max_exp_avg_sq, a scale per block of "
             "256; the first 512 elements (2 blocks) are live, the rest zero; beta2 0.5, so "
             "that v falls below its maximum within the 10 steps.",
             dict(lr=1e-2, betas=(0.9, 0.5), weight_decay=0.1, amsgrad=True), ("torchao-fp8",),
             dtypes=("float32",), shapes=QUANTIZED_SHAPES, active=512)
    + _modes("AdamW", "weight-decay", "bitsandbytes' CPU AdamW8bit with min_8bit_size 256 on "
             "one parameter of 352 elements: a block of 256 and a short one of 96; codes from "
             "its 65536-bin table.", dict(lr=1e-2, weight_decay=0.1, min_8bit_size=256),
             ("bnb-8bit",), dtypes=("float32",), shapes=((352,),)),
    "SGD": _modes("SGD", "nesterov-weight-decay", "Nesterov momentum with L2 weight decay.",
                  dict(lr=1e-2, momentum=0.9, nesterov=True, weight_decay=0.01),
                  ("per-op", "master-weights"))
    + _modes("SGD", "optimi-momentum", "torch-optimi's SGD, momentum 0.9, lr 1e-3.",
             dict(lr=1e-3, momentum=0.9), ("kahan",), dtypes=("bfloat16",)),
    "Adagrad": _modes("Adagrad", "lr-decay-weight-decay", "lr_decay, an initial accumulator "
                      "and L2 weight decay; fused rounds lr, eps and weight_decay to the "
                      "16-bit type as torch's fused CPU kernel does.",
                      dict(lr=0.1, lr_decay=0.05, initial_accumulator_value=0.1,
                           weight_decay=0.1, eps=1e-6), ("per-op", "fused")),
    "RMSprop": _modes("RMSprop", "centered-momentum", "Centered RMSprop with momentum and "
                      "weight decay.", dict(lr=1e-3, alpha=0.9, momentum=0.9, centered=True,
                                            weight_decay=0.01), ("per-op",)),
    "Lion": _modes("Lion", "optimi", "torch-optimi's Lion (decoupled decay 1 - lr*wd) with "
                   "Kahan compensation.", dict(lr=1e-3, weight_decay=0.1), ("kahan",),
                   dtypes=("bfloat16",)),
    "NAdam": _modes("NAdam", "decoupled-momentum-decay", "Decoupled weight decay and "
                    "momentum_decay 0.01; mu_product a float32 0-d state, as torch keeps it.",
                    dict(lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True,
                         momentum_decay=0.01), ("per-op",), shapes=TINY_SHAPES),
    "RAdam": _modes("RAdam", "weight-decay", "L2 weight decay (R(weight_decay)); steps 1-5 "
                    "unrectified (rho_t <= 5), then rectified.",
                    dict(lr=1e-2, weight_decay=0.1), ("per-op",), shapes=TINY_SHAPES),
    "ASGD": _modes("ASGD", "averaging", "Averaging from step 4 (t0=3), lambd 0.01, alpha 0.5, "
                   "L2 weight decay; eta and mu float32 0-d states, as torch keeps them.",
                   dict(lr=1e-2, t0=3, lambd=0.01, alpha=0.5, weight_decay=0.1),
                   ("per-op",), shapes=TINY_SHAPES),
    "Rprop": _modes("Rprop", "etas-step-sizes", "etas (0.3, 1.3) and step sizes (1e-3, 0.05): "
                    "the factors and bounds are R(.) of the 16-bit type (R(0.3) != 0.3).",
                    dict(lr=1e-2, etas=(0.3, 1.3), step_sizes=(1e-3, 0.05)), ("per-op",),
                    shapes=TINY_SHAPES),
    "Adafactor": _modes("Adafactor", "weight-decay-maximize", "torch's defaults (eps1 the "
                        "format's machine epsilon) with decoupled weight decay and maximize "
                        "on a factored 4x8 (row and column factors 4x1 and 1x8): the row and "
                        "column norms, the row mean and the RMS terms accumulate in float32 "
                        "in torch's CPU orders, then round to the 16-bit type.",
                        dict(weight_decay=0.1, maximize=True), ("per-op",),
                        shapes=((4, 8),), steps=20),
    "Muon": _modes("Muon", "nesterov", "A wide 4x8 matrix, lr 0.02, 20 steps: the momentum "
                   "lerps rounded to the 16-bit type, the Newton-Schulz iteration in bfloat16 "
                   "whatever the format (products in torch's own loop at this size: the same "
                   "order on every CPU), the update added in bfloat16 (alpha R(-lr')) or, for "
                   "float16, in float32 then float16.", dict(lr=0.02), ("per-op",),
                   shapes=TINY_SHAPES, steps=20),
    "LBFGS": _modes("LBFGS", "strong-wolfe", "torch's LBFGS on bfloat16 tensors with the strong "
                    "Wolfe line search, 3 iterations per step, history 2, on the separable "
                    "quartic evaluated in bfloat16 (the case stores the objective): dot "
                    "products in float32 rounded to bfloat16, ro/al/H_diag/t 0-d bfloat16 "
                    "tensors.", dict(lr=1.0, max_iter=3, line_search_fn="strong_wolfe",
                                     history_size=2), ("per-op",), dtypes=("bfloat16",),
                    shapes=TINY_SHAPES, objective="separable-quartic"),
    "SparseAdam": _modes("SparseAdam", "csr-duplicates", "CSR gradients of an 8x4 table "
                         "(inputs.pattern_csr_duplicate_sums): 2 of the first 6 rows looked up "
                         "per step, one twice (duplicate (row, column) entries, summed in the "
                         "16-bit type in stored order), its first lookup's columns reversed "
                         "(an unsorted row); in step 4 a duplicate pair cancelling to an "
                         "explicit zero; in steps 2, 7, 12, 17 a row looked up three times "
                         "whose sum depends on its order (summed in float32 first, the case "
                         "fails); at most 16 entries a step, where torch sums in stored order. "
                         "eps 1e-6: float16 rounds torch's default 1e-8 to 0, and the cancelled "
                         "entry's 0/0 would make its parameter NaN.",
                         dict(lr=1e-2, eps=1e-6), ("per-op",), shapes=SPARSE_SHAPES,
                         grads="csr-duplicate-sums", steps=SPARSE_STEPS,
                         state_every=SPARSE_STATE_EVERY),
}


# -------------------------------------------------------------------------------- modes
def precision_object(mode, seed=STOCHASTIC_SEED):
    """The ``precision`` object of a case in ``mode``."""
    _, base = MODES[mode]
    return dict(base, seed=seed if base["rounding"] == "stochastic" else None)


def hyperparameters(name, mode, dtype, hyper):
    """Every hyperparameter of the case (resolved from the class's defaults) without the
    :data:`PRECISION_OPTIONS`."""
    # (no quantized state: any dtype; 2-D: Muon takes matrices only)
    probe = [np.zeros((1, 32), codec.numpy_dtype(dtype))]
    opt, inner = make_optimizer(name, probe, dict(hyper), precision_object(mode))
    return {k: v for k, v in generate.hyperparameters(inner or opt).items()
            if k not in PRECISION_OPTIONS}


# ------------------------------------------------------------------------------- building
def to_half(values, dtype):
    """float32/float64 inputs rounded to nearest into the 16-bit ``dtype`` (via float32)."""
    if values is None:
        return None
    return np.asarray(values, np.float32).astype(codec.numpy_dtype(dtype))


def to_grid(values):
    """float32 ``values`` rounded to multiples of 1/:data:`QUANTIZED_GRID` (exact in float32)."""
    if values is None:
        return None
    return (np.round(np.asarray(values, np.float32) * QUANTIZED_GRID)
            / np.float32(QUANTIZED_GRID)).astype(np.float32)


def convert_grad(grad, convert):
    """A drawn gradient with its values converted (:func:`to_half`, :func:`to_grid`): a CSR
    one (:class:`~npoptim.golden.codec.CsrGrad`) keeps its entries as stored, ``data``
    converted entry by entry."""
    if isinstance(grad, codec.CsrGrad):
        return grad._replace(data=convert(grad.data))
    return convert(grad)


def sparse_kind(name, grads):
    """A case's ``sparse_kind``: its 16-bit class's with CSR gradients, else
    ``dense-only``."""
    if not any(isinstance(g, codec.CsrGrad) for step in grads for g in step):
        return "dense-only"
    import npoptim.precision as lowp
    return getattr(lowp, name).sparse_kind


def build_case(row, dtype, seed=None, case_id=None, precision_seed=STOCHASTIC_SEED):
    """One 16-bit case (JSON-ready) of a row with a ``precision_mode``: the float32 case's
    inputs (drawn as :func:`npoptim.golden.generate.build_case` draws them), rounded to
    ``dtype``, run through :func:`~npoptim.golden.replay.make_optimizer`. A quantized-state
    case is float32, its inputs rounded to :func:`to_grid`."""
    mode = row.precision_mode
    if mode not in MODES:
        raise ValueError(f"unknown precision mode {mode!r}; choose from {', '.join(MODES)}")
    quantized = mode in QUANTIZATIONS
    if quantized and dtype != "float32":
        raise ValueError(f"a {mode} case is float32, got {dtype!r}")
    if not quantized and dtype not in codec.HALF_DTYPES:
        raise ValueError(f"a precision case is bfloat16 or float16, got {dtype!r}")
    precision = precision_object(mode, precision_seed)
    torch_name = registry.OPTIMIZERS[row.optimizer][1]
    case_id = case_id or f"{row.optimizer}/{mode}/{row.name}/{dtype}"
    seed = inputs.case_seed(case_id) if seed is None else int(seed)
    rng = inputs.Rng(seed)
    inits = row.init if isinstance(row.init, tuple) else (row.init,) * len(row.shapes)
    convert = to_grid if quantized else (lambda values: to_half(values, dtype))
    params = [convert(inputs.init_param(rng, s, kind, "float32"))
              for s, kind in zip(row.shapes, inits)]
    objective = None
    if row.objective:  # closure-driven (LBFGS): the objective's arrays in the 16-bit type
        objective = {k: convert(v) if isinstance(v, np.ndarray) else v for k, v in
                     inputs.OBJECTIVES[row.objective](rng, row.shapes, "float32").items()}
        grads = [[None] * len(params) for _ in range(row.steps)]
    else:
        grads = [[convert_grad(g, convert) for g in step] for step in inputs.PATTERNS[row.grads](
            rng, row.shapes, "float32", row.steps, row.grad_scale, row.density)]
    if row.active is not None:
        for array in params + [g for step in grads for g in step if g is not None]:
            array.reshape(-1)[row.active:] = 0
    hyper = hyperparameters(row.optimizer, mode, dtype, row.hyper)
    live = [p.copy() for p in params]
    step_fn = npoptim_make_step(row.optimizer, precision)(live, codec.from_json_hyper(hyper))
    lr = hyper["lr"]
    steps, trajectory = [], []
    for t in range(row.steps):
        _, state = step_fn([codec.optimizer_grad(g) for g in grads[t]] if objective is None
                           else (lambda: inputs.evaluate_objective(objective, live)), lr)
        state = {i: s for i, s in enumerate(state) if s is not None}
        after = [p.copy() for p in live]
        trajectory.append([a.astype(np.float32) for a in after])
        keep_state = (t + 1 == row.steps
                      or not (quantized or objective) and (t + 1) % row.state_every == 0)
        steps.append({"step": t + 1, "lr": lr, "grads": [codec.encode_grad(g) for g in grads[t]],
                      "expected": {"params": [codec.encode_array(p) for p in after],
                                   "state": codec.encode_state(state, len(params))
                                   if keep_state else None}})
        if objective is not None:
            del steps[-1]["grads"]
    flag, _ = MODES[mode]
    kind = sparse_kind(row.optimizer, grads)
    flags = (detect_flags([p.astype(np.float32) for p in params], [] if objective else grads,
                          [lr] * row.steps, [], "float32") | set(row.flags) | {flag})
    if any(np.any((np.abs(a) > 0) & (np.abs(a) < np.finfo(np.float16).tiny))
           for arrays in trajectory for a in arrays) and dtype == "float16":
        flags.add("subnormal")
    unknown = flags - set(FLAGS)
    if unknown:
        raise ValueError(f"{case_id}: flags {sorted(unknown)} have no note in golden.flags.FLAGS")
    matches = {
        "per-op": [f"torch.optim.{torch_name}"
                   f"{'' if row.optimizer in SINGLE_TENSOR_ONLY else '(foreach=False)'} on "
                   f"{dtype} tensors (torch 2.13 CPU)" if kind == "dense-only" else
                   f"torch.optim.{torch_name} on {dtype} tensors, sparse COO gradients (torch "
                   "2.13 CPU; its only path)"],
        "fused": [f"torch.optim.{torch_name}(fused=True) on {dtype} tensors (torch 2.13 CPU)"],
        "stochastic": ["npoptim.precision.stochastic (counter-based stream; bfloat16: "
                       "statistically torchao's _AdamW(bf16_stochastic_round=True); float16: "
                       "no library has it)"],
        "master-weights": [f"torch.optim.{torch_name} on float32 masters, model.copy_(master) "
                           "(torch 2.13)"],
        "kahan": [f"optimi.{row.optimizer}(kahan_sum=True) (torch-optimi 0.3.3, CPU)"],
        **{q: [f"torchao.optim.{row.optimizer}{QUANTIZATIONS[q]} (torchao 0.18, CPU, "
               "torch.compile)"] for q in QUANTIZATIONS},
        "bnb-8bit": [f"bitsandbytes.optim.{row.optimizer}8bit (bitsandbytes 0.50.2, CPU)"],
    }[mode]
    rtol = cases.DEFAULT_RTOL["float32"]
    return {
        "id": case_id,
        "optimizer": row.optimizer,
        "torch_name": None if mode == "kahan" or quantized else torch_name,
        "flavor": "torch",
        "framework_hyperparameters": None,
        "tags": sorted(set(generate.capability_tags(row, dtype, hyper,
                                                    [] if objective else grads, None))
                       | {flag}),
        "variant": None,
        "matches": matches,
        "comment": row.comment,
        "dtype": dtype,
        "precision": precision,
        "sparse_kind": kind,
        "seed": seed,
        "hyperparameters": hyper,
        "lr_schedule": None,
        "flags": sorted(flags),
        "tolerance": quantized_tolerance(rtol, mode) if quantized else {
            "rtol": rtol, "atol": 0.0, "ulp": ULP_TOLERANCE, "lre": round(-math.log10(rtol), 3),
            "scale": "ulp of the 16-bit type; float arrays: max |expected| of each array",
            "reason": TOLERANCE_REASON.format(ulp=ULP_TOLERANCE, rtol=rtol)},
        "params": [codec.encode_array(p) for p in params],
        "objective": None if objective is None else {
            k: codec.encode_array(v) if isinstance(v, np.ndarray) else v
            for k, v in objective.items()},
        "steps": steps,
    }


def build_files(optimizers=None):
    """``{Optimizer: golden file (dict)}`` of the precision cases."""
    header = ["Golden trajectories of npoptim.precision: bfloat16/float16 params, grads and "
              "state in per-op and fused rounding, stochastic rounding, float32 master "
              "weights and Kahan compensation (schema version 3: the case's 'precision' "
              "object says which)."] + generate.HEADER[1:]
    out = {}
    for name in TABLE:
        if optimizers is not None and name not in optimizers:
            continue
        built = [build_case(r, dtype) for r in TABLE[name] for dtype in r.dtypes]
        out[name] = generate.build_file(built, optimizer=name, header=header)
    return out
