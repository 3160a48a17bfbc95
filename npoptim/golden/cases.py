"""THE case-definition table of ``reference_results/``, and what its rows are made of.

Every golden case comes from one :class:`Row`: an optimizer (a name in
:data:`npoptim.registry.OPTIMIZERS`), the hyperparameters that differ from its defaults, the
parameter shapes, a gradient pattern (:data:`npoptim.golden.inputs.PATTERNS`), the steps and,
optionally, an lr schedule. Each row becomes one case per dtype, named
``"{optimizer}/{name}/{dtype}"`` (a 16-bit row's ``"{optimizer}/{mode}/{name}/{dtype}"``). The
torch cases' rows are :data:`TABLE`; the other families declare rows of the same type in their
own modules: the flavor cases (:mod:`npoptim.golden.flavor_cases`, ``flavor=``, most made from
this table's rows) and the 16-bit cases (:mod:`npoptim.golden.precision_cases`,
``precision_mode=``).

Adding an optimizer to the suite = adding its rows here and running
``python -m npoptim.golden.regenerate``; ``tests/test_golden.py`` fails for an optimizer
without rows.

The inputs the rows name (RNG, schedules, initialisers, gradient patterns, objectives) are made
in :mod:`npoptim.golden.inputs`; the flags they declare are explained in
:mod:`npoptim.golden.flags`.
"""
import dataclasses
from dataclasses import dataclass, field
from typing import Optional

# ------------------------------------------------------------------------------- the table
@dataclass(frozen=True)
class Row:
    """One row of a case table: becomes one case per dtype, id ``optimizer/name/dtype``.

    * ``hyper``: constructor keywords that differ from the optimizer's defaults (the case
      stores every hyperparameter, defaults included).
    * ``shapes``: the parameters' shapes (one param group, in this order).
    * ``grads``: a :data:`~npoptim.golden.inputs.PATTERNS` name; ``grad_scale`` multiplies
      the gradients; ``density`` is the fraction of rows a sparse pattern touches per step.
    * ``init``: how parameters start (``"uniform"`` in [-1, 1), ``"zeros"``, ``"small"``), one
      kind for all or a tuple with one per parameter.
    * ``schedule``: None (constant lr) or a :data:`~npoptim.golden.inputs.SCHEDULES` name.
    * ``flags``: flags the data cannot show by itself (``eps-dominated``, ...).
    * ``tolerance``: overrides of :data:`DEFAULT_RTOL` as ``{"rtol": {dtype: x}, "atol":
      {dtype: x}, "reason": "..."}``.
    * ``matches``: the published implementation(s) the case reproduces; defaults to
      ``torch.optim.<torch name> 2.13`` for optimizers torch has.
    * ``objective``: an :data:`~npoptim.golden.inputs.OBJECTIVES` name for closure-driven
      optimizers (LBFGS): each step calls ``step(closure)`` and the case stores the objective
      instead of gradients.
    * ``wrapped``: for a wrapper (Lookahead, SAM, Mechanic: ``hyper`` are its settings), the
      optimizer it wraps as ``(name, hyperparameters)``; the case's ``wrapped`` field.
    * ``precision_mode``: a 16-bit row's mode (:data:`npoptim.golden.precision_cases.MODES`;
      its case id ``optimizer/mode/name/dtype``, built by
      :func:`npoptim.golden.precision_cases.build_case`), with two of the size budget's knobs:
      ``active``, the flat index from which a quantized case's inputs are zero (or None), and
      ``state_every``, the state stored after every this many steps (and the last; ``null`` at
      the others).
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
    #: the conventions the case is computed in (:mod:`npoptim.flavors`); rows of other
    #: flavors are made from this table by :mod:`npoptim.golden.flavor_cases`
    flavor: str = "torch"
    #: a wrapper's row (:data:`npoptim.registry.WRAPPERS`, ``hyper`` its settings): the
    #: optimizer it wraps, ``(name, hyperparameters that differ from its defaults)``
    wrapped: Optional[tuple] = None
    precision_mode: Optional[str] = None
    active: Optional[int] = None
    state_every: int = 1

    def __post_init__(self):
        if self.precision_mode is None and (self.active is not None or self.state_every != 1):
            raise ValueError(f"{self.optimizer}/{self.name}: active= and state_every= are a "
                             "16-bit row's (precision_mode=)")
        if self.precision_mode is not None and (self.flavor != "torch" or self.wrapped):
            raise ValueError(f"{self.optimizer}/{self.name}: a 16-bit row (precision_mode=) "
                             "is in the torch flavor and wraps nothing")


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

FTRL_DENSE = ("keras.optimizers.Ftrl 3.15.1 (JAX backend, float64)", "TF ApplyFtrlV2")
FTRL_SPARSE = ("TF SparseApplyFtrlV2 (duplicates summed first, as Keras)",)
FBGEMM_ROWWISE = ("FBGEMM EXACT_ROWWISE_ADAGRAD (fbgemm-gpu-cpu 1.8.0 scalar CPU kernel)",)


def _optax_contrib(opt, lr, source, extra=(), **common):
    """:func:`_common_dense` rows for an optimizer torch does not have, each naming the
    implementation it reproduces (``source``), and its defaults row said so; 10 steps where a
    row does not ask for more (the suite's size cap is shared by many optimizers)."""
    rows = [Row(opt, "defaults", f"The defaults of {opt} (the paper's, as {source}).", {})]
    rows += _common_dense(opt, lr, **common)[1:] + list(extra)
    return [dataclasses.replace(row, matches=row.matches or (source,),
                                steps=10 if row.steps == 12 else row.steps) for row in rows]


#: THE table. One entry per optimizer.
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
        Row("SGD", "nesterov-lr-schedule", "Nesterov momentum under a schedule: torch's "
            "d = g + mu b and Keras's p += mu m - lr g (lr inside the buffer) differ from the "
            "first change of lr on.", dict(lr=0.1, momentum=0.9, nesterov=True), steps=16,
            schedule="warmup-cosine"),
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
        Row("RMSprop", "momentum-lr-schedule", "Momentum under a schedule: lr is applied "
            "outside the buffer (lr inside it, as Keras, TF and optax do, differs from the "
            "first change of lr on).", dict(lr=1e-2, momentum=0.9), steps=16,
            schedule="warmup-cosine"),
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
        Row("RAdam", "rho-equals-5", "beta2 0.8397685748659791: rho_t is exactly 5.0 at step "
            "6 (torch: an SGD step there, > 5; optax rectifies, >= 5).",
            dict(lr=1e-2, betas=(0.9, 0.8397685748659791)), steps=10),
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
        Row("Muon", "keller-jordan", "variant='keller_jordan': a wide 3x5 and a tall 5x3, "
            "whose scale sqrt(5/3) multiplies the bfloat16 update; the package's lr 0.02 and "
            "no decay.", dict(lr=0.02, weight_decay=0.0, variant="keller_jordan"),
            shapes=((3, 5), (5, 3)), steps=10, tolerance=MUON_TOLERANCE,
            matches=("muon-optimizer 0.1.0 SingleDeviceMuon",)),
        Row("Muon", "keller-jordan-conv", "variant='keller_jordan': a 4-D (4, 2, 3, 1) "
            "orthogonalized as 4x6, scaled by sqrt(3/1) from its last two sizes; decay 0.1, "
            "momentum 0.9, under warmup + cosine.",
            dict(lr=0.02, weight_decay=0.1, momentum=0.9, variant="keller_jordan"),
            shapes=((4, 2, 3, 1),), steps=10, schedule="warmup-cosine",
            tolerance=MUON_TOLERANCE,
            matches=("KellerJordan/Muon muon.py (GitHub, with the 4-D reshape of c33a468)",)),
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
    "Ftrl": [
        Row("Ftrl", "defaults", "Keras 3's defaults (lr 1e-3, initial_accumulator_value 0.1, "
            "learning_rate_power -0.5).", {}, matches=FTRL_DENSE),
        Row("Ftrl", "l1-l2", "l1 large enough to zero some weights (|z| <= l1), and l2.",
            dict(lr=0.1, l1=0.05, l2=0.1), matches=FTRL_DENSE),
        Row("Ftrl", "shrinkage-power", "l2_shrinkage, learning_rate_power -0.7 (a pow, not "
            "a square root) and initial_accumulator_value 0.5.",
            dict(lr=0.1, l2_shrinkage=0.1, learning_rate_power=-0.7,
                 initial_accumulator_value=0.5), matches=FTRL_DENSE),
        Row("Ftrl", "beta-lr-schedule", "beta under warmup + cosine: l2 + beta / (2 lr) and "
            "sigma / lr follow the per-step lr.", dict(lr=0.1, beta=0.5), steps=16,
            schedule="warmup-cosine", matches=FTRL_DENSE),
        Row("Ftrl", "null-and-zero-grads", "Missing and all-zero dense gradients with "
            "l2_shrinkage: a zero gradient recomputes w from z and n and shrinks z; a missing "
            "one changes nothing.", dict(lr=0.1, l2_shrinkage=0.1), shapes=MIXED,
            grads="dense-none-zero", matches=FTRL_DENSE),
        Row("Ftrl", "csr-embedding", "A 32x4 table updated by lookups with repeated ids "
            "(summed first, as Keras does before the kernel), with l1.", dict(lr=0.1, l1=0.01),
            shapes=((32, 4),), grads="csr-embedding", density=0.2, steps=10,
            matches=FTRL_SPARSE),
        Row("Ftrl", "csr-duplicates", "Duplicate (row, column) entries and unsorted columns.",
            dict(lr=0.1), shapes=TABLE_SMALL, grads="csr-duplicates", matches=FTRL_SPARSE),
        Row("Ftrl", "csr-explicit-zeros", "Explicit zeros are updated (w recomputed, z "
            "shrunk); unstored entries are not.", dict(lr=0.1, l2_shrinkage=0.1),
            shapes=TABLE_SMALL, grads="csr-zeros", matches=FTRL_SPARSE),
        Row("Ftrl", "csr-late-row-shrinkage", "Lazy: with l2_shrinkage, rows without a "
            "gradient are neither recomputed nor shrunk; a row first touched late.",
            dict(lr=0.1, l2_shrinkage=0.1), shapes=TABLE_SMALL, grads="csr-late",
            matches=FTRL_SPARSE),
    ],
    "RowWiseAdagrad": [
        Row("RowWiseAdagrad", "defaults", "FBGEMM's defaults (lr 0.01, eps 1e-8); a dense "
            "gradient updates every row.", {}, matches=FBGEMM_ROWWISE),
        Row("RowWiseAdagrad", "weight-decay-l2", "weight_decay_mode l2: lambda w enters the "
            "accumulator's mean and the step.",
            dict(lr=0.1, weight_decay=0.1, weight_decay_mode="l2"), matches=FBGEMM_ROWWISE),
        Row("RowWiseAdagrad", "decouple-lr-schedule", "weight_decay_mode decouple (1 - lr "
            "lambda) under warmup + cosine.",
            dict(lr=0.1, weight_decay=0.1, weight_decay_mode="decouple"), steps=16,
            schedule="warmup-cosine", matches=FBGEMM_ROWWISE),
        Row("RowWiseAdagrad", "eps-dominated", "Tiny gradients: eps is comparable to the root "
            "of the row's accumulator.", dict(lr=0.1, eps=1e-3), grad_scale=1e-4,
            flags=("eps-dominated",), matches=FBGEMM_ROWWISE),
        Row("RowWiseAdagrad", "null-and-zero-grads", "Three parameters (1-D ones have rows of "
            "one element); missing and all-zero gradients: decoupled decay still applies on a "
            "zero gradient, not on a missing one.",
            dict(lr=0.1, weight_decay=0.1, weight_decay_mode="decouple"), shapes=MIXED,
            grads="dense-none-zero", matches=FBGEMM_ROWWISE),
        Row("RowWiseAdagrad", "csr-embedding", "A 64x8 table updated by lookups with repeated "
            "ids (summed first: FBGEMM's exact mode).", dict(lr=0.1), shapes=EMBEDDING,
            grads="csr-embedding", density=0.2, steps=10, matches=FBGEMM_ROWWISE),
        Row("RowWiseAdagrad", "csr-embedding-l2", "Lookups with weight_decay_mode l2: only the "
            "touched rows decay (a 32x4 table).",
            dict(lr=0.1, weight_decay=0.1, weight_decay_mode="l2"),
            shapes=((32, 4),), grads="csr-embedding", density=0.2, steps=10,
            matches=FBGEMM_ROWWISE),
        Row("RowWiseAdagrad", "csr-explicit-zeros", "Explicit zeros and partially stored rows "
            "(a touched row is updated whole, its unstored columns as zero gradients) with "
            "decoupled decay.", dict(lr=0.1, weight_decay=0.1, weight_decay_mode="decouple"),
            shapes=TABLE_SMALL, grads="csr-zeros", matches=FBGEMM_ROWWISE),
        Row("RowWiseAdagrad", "csr-late-row", "A row first touched late and a row never "
            "touched, with l2 decay.", dict(lr=0.1, weight_decay=0.1, weight_decay_mode="l2"),
            shapes=TABLE_SMALL, grads="csr-late", matches=FBGEMM_ROWWISE),
        Row("RowWiseAdagrad", "csr-3d", "A (4, 3, 2) parameter: rows of 6 elements.",
            dict(lr=0.1), shapes=((4, 3, 2),), grads="csr-embedding", density=0.5,
            matches=FBGEMM_ROWWISE),
    ],
    "ADOPT": _optax_contrib("ADOPT", 1e-2, "optax.contrib.adopt 0.2.8", extra=[
        Row("ADOPT", "nesterov", "nesterov=True (optax's option).", dict(lr=1e-2, nesterov=True)),
        Row("ADOPT", "no-clipping-decoupled", "clip_exponent=None (no clipping) with decoupled "
            "weight decay (the authors' decouple=True).",
            dict(lr=1e-2, clip_exponent=None, weight_decay=0.1, decoupled_weight_decay=True),
            grad_scale=3.0, matches=("iShohei220/adopt ADOPT (clip_lambda=None)",)),
        Row("ADOPT", "authors", "The authors' code: clip step**0.25 counted from the first "
            "gradient.", dict(lr=1e-2, variant="authors"), grad_scale=3.0,
            matches=("iShohei220/adopt ADOPT", "pytorch_optimizer.ADOPT 4.1.0")),
    ]),
    "AdEMAMix": _optax_contrib("AdEMAMix", 1e-2, "optax.contrib.ademamix 0.2.8",
                               weight_decay=0, extra=[
        Row("AdEMAMix", "decoupled-weight-decay", "Weight decay added to the update, scaled by "
            "the lr.", dict(lr=1e-2, weight_decay=0.1)),
        Row("AdEMAMix", "warmups", "The paper's alpha and beta3 warmups over 10 steps, "
            "evaluated at the step count (the authors' schedulers).",
            dict(lr=1e-2, alpha_warmup=10, beta3_warmup=10, weight_decay=0.01), steps=14,
            matches=("optax.contrib.ademamix 0.2.8 (the schedules of apple/ml-ademamix)",)),
        Row("AdEMAMix", "betas-alpha", "betas (0.8, 0.99, 0.999), alpha=8.",
            dict(lr=1e-2, betas=(0.8, 0.99, 0.999), alpha=8.0), shapes=MIXED),
    ]),
    "SimplifiedAdEMAMix": _optax_contrib(
        "SimplifiedAdEMAMix", 1e-3, "optax.contrib.simplified_ademamix 0.2.8",
        weight_decay=0, extra=[
            Row("SimplifiedAdEMAMix", "decoupled-weight-decay", "Weight decay added to the "
                "update, scaled by the lr.", dict(lr=1e-3, weight_decay=0.1)),
            Row("SimplifiedAdEMAMix", "alpha", "alpha=2 with betas (0.9, 0.99).",
                dict(lr=1e-3, alpha=2.0, betas=(0.9, 0.99)), shapes=MIXED),
        ]),
    "ScheduleFreeSGD": _optax_contrib(
        "ScheduleFreeSGD", 0.1, "schedulefree.SGDScheduleFree 1.4.1", maximize=False,
        eps_scale=None, extra=[
            Row("ScheduleFreeSGD", "warmup-momentum", "warmup_steps=5 and momentum=0.8.",
                dict(lr=0.1, warmup_steps=5, momentum=0.8), steps=14,
                matches=("schedulefree.SGDScheduleFree 1.4.1",)),
            Row("ScheduleFreeSGD", "optax-warmup", "variant='optax': the z step's warmup lags "
                "one step (optax.contrib.schedule_free_sgd with warmup_steps).",
                dict(lr=0.1, warmup_steps=5, variant="optax"), steps=14,
                matches=("optax.contrib.schedule_free_sgd 0.2.8 (float64 warmup)",)),
            Row("ScheduleFreeSGD", "r-power", "r=1 and weight_lr_power=1: the average weights "
                "later steps more.", dict(lr=0.1, r=1.0, weight_lr_power=1.0),
                matches=("schedulefree.SGDScheduleFree 1.4.1",)),
        ]),
    "ScheduleFreeAdamW": _optax_contrib(
        "ScheduleFreeAdamW", 1e-2, "schedulefree.AdamWScheduleFree 1.4.1", maximize=False,
        weight_decay=0, extra=[
            Row("ScheduleFreeAdamW", "weight-decay", "Weight decay at y, added to the "
                "normalised gradient.", dict(lr=1e-2, weight_decay=0.1),
                matches=("schedulefree.AdamWScheduleFree 1.4.1",
                         "optax.contrib.schedule_free_adamw 0.2.8")),
            Row("ScheduleFreeAdamW", "warmup-betas", "warmup_steps=5, betas (0.8, 0.99).",
                dict(lr=1e-2, warmup_steps=5, betas=(0.8, 0.99)), steps=14,
                matches=("schedulefree.AdamWScheduleFree 1.4.1",)),
            Row("ScheduleFreeAdamW", "optax-warmup", "variant='optax' with warmup_steps=5.",
                dict(lr=1e-2, warmup_steps=5, variant="optax"), steps=14,
                matches=("optax.contrib.schedule_free_adamw 0.2.8 (float64 warmup)",)),
        ]),
    "Prodigy": _optax_contrib("Prodigy", 1.0, "prodigyopt.Prodigy 1.1.2", maximize=False,
                              weight_decay=0, extra=[
        Row("Prodigy", "decoupled-weight-decay", "Decoupled weight decay scaled by d*lr.",
            dict(weight_decay=0.1)),
        Row("Prodigy", "l2-safeguard", "L2 decay in the gradient (decouple=False) and "
            "safeguard_warmup.", dict(weight_decay=0.1, decouple=False,
                                      safeguard_warmup=True)),
        Row("Prodigy", "growth-d-coef", "growth_rate=1.1 and d_coef=0.5 limit d.",
            dict(growth_rate=1.1, d_coef=0.5, d0=1e-4)),
        Row("Prodigy", "optax", "variant='optax': bias-corrected steps.",
            dict(variant="optax", betas=(0.8, 0.99)), steps=16, schedule="warmup-cosine",
            matches=("optax.contrib.prodigy 0.2.8",)),
    ]),
    "MADGRAD": _optax_contrib("MADGRAD", 1e-2, "madgrad.MADGRAD 1.3", maximize=False,
                              extra=[
        Row("MADGRAD", "decoupled-weight-decay", "decouple_decay=True.",
            dict(lr=1e-2, weight_decay=0.1, decouple_decay=True)),
        Row("MADGRAD", "no-momentum", "momentum=0: x0 recomputed each step, as the authors.",
            dict(lr=1e-2, momentum=0.0)),
    ]),
    "DAdaptAdamW": _optax_contrib("DAdaptAdamW", 1.0, "dadaptation.DAdaptAdam 3.2 "
                                  "(decouple=True)", maximize=False, weight_decay=0, extra=[
        Row("DAdaptAdamW", "decoupled-weight-decay", "Decoupled weight decay scaled by d*lr.",
            dict(weight_decay=0.1)),
        Row("DAdaptAdamW", "l2-growth", "L2 decay in the gradient (decouple=False, the "
            "authors' DAdaptAdam default) and growth_rate=1.1.",
            dict(weight_decay=0.1, decouple=False, growth_rate=1.1)),
        Row("DAdaptAdamW", "optax", "variant='optax': bias-corrected steps.",
            dict(variant="optax", betas=(0.8, 0.99)), steps=16, schedule="warmup-cosine",
            matches=("optax.contrib.dadapt_adamw 0.2.8",)),
    ]),
}


# ----------------------------------------------- beyond torch.optim: optax's optimizers (#16)
TABLE["Lion"] = [
    Row("Lion", "defaults", "lion-pytorch's defaults (lr=1e-4, betas (0.9, 0.99), no decay).",
        {}, matches=("optax.lion 0.2.8", "arXiv 2302.06675 Program 1")),
    Row("Lion", "weight-decay-mixed", "Weight decay inside the update, betas (0.95, 0.98), "
        "missing and zero gradients on three parameters (a zero gradient still moves the "
        "parameter: sign of the momentum).", dict(lr=1e-2, weight_decay=0.1, betas=(0.95, 0.98)),
        shapes=MIXED, grads="dense-none-zero",
        matches=("optax.lion 0.2.8", "arXiv 2302.06675 Program 1")),
    Row("Lion", "lr-schedule-maximize", "maximize under warmup + cosine.",
        dict(lr=1e-2, weight_decay=0.05, maximize=True), steps=16, schedule="warmup-cosine",
        matches=("optax.lion 0.2.8 (negated gradients)",)),
    Row("Lion", "lion-pytorch", "The authors' PyTorch form: decay applied first.",
        dict(lr=1e-2, weight_decay=0.1, variant="lion_pytorch"),
        matches=("lion-pytorch 0.2.3 Lion", "google/automl lion_pytorch.py")),
    Row("Lion", "cautious-lion-pytorch", "C-Lion: the signs that disagree with the gradient "
        "masked, the others scaled by n/(k+1); decay applied first, outside the mask.",
        dict(lr=1e-2, weight_decay=0.1, variant="lion_pytorch", cautious=True),
        matches=("pytorch_optimizer 4.1.0 Lion(cautious=True)", "C-Optim c_lion.py")),
    Row("Lion", "cautious-floored-mean-mixed", "C-Lion with timm's scale 1/max(k/n, 1e-3), "
        "the decay inside the update but outside the mask; missing and zero gradients (a zero "
        "gradient is masked).", dict(lr=1e-2, weight_decay=0.1, betas=(0.95, 0.98),
                                     cautious=True, cautious_scale="floored_mean"),
        shapes=MIXED, grads="dense-none-zero",
        matches=("arXiv 2411.16085 with timm 1.0.31's floored mean",)),
]

TABLE["MARS"] = [
    Row("MARS", "defaults", "The authors' defaults (lr=3e-3, betas (0.95, 0.99), gamma=0.025): a "
        "matrix through MARS-AdamW (corrected gradient clipped to norm 1), a bias through "
        "AdamW (betas_1d, lr_1d, weight_decay_1d=0.1).", {}, shapes=LAYERS,
        matches=("AGI-Arena/MARS mars.py (is_approx=True)",)),
    Row("MARS", "lion-decay-schedule-maximize", "The Lion type (sign of the momentum), weight "
        "decay in the update, maximize, under warmup + cosine (the 1-D lr follows it).",
        dict(lr=1e-2, mars_type="lion", weight_decay=0.1, maximize=True), shapes=LAYERS,
        steps=16, schedule="warmup-cosine",
        matches=("AGI-Arena/MARS mars.py (is_approx=True, negated gradients)",)),
    Row("MARS", "optimize-1d-small-grads", "optimize_1d=True (MARS for every tensor) with "
        "small gradients: no clipping, eps felt.", dict(lr=1e-2, optimize_1d=True, gamma=0.1),
        shapes=LAYERS, grad_scale=0.01,
        matches=("AGI-Arena/MARS mars.py (is_approx=True)",)),
    Row("MARS", "pytorch-optimizer-amsgrad", "pytorch_optimizer's form: eps on sqrt(v + 1e-15) "
        "before the bias correction, decay first, a 3-D tensor as a matrix; amsgrad and weight "
        "decay.", dict(lr=1e-2, variant="pytorch_optimizer", amsgrad=True, weight_decay=0.1),
        shapes=MIXED,
        matches=("pytorch_optimizer.MARS 4.1.0 (ams_bound=True)",)),
]

TABLE["AdaBelief"] = [
    Row("AdaBelief", "defaults", "The paper's Algorithm 2 (= optax.adabelief), eps=1e-16 added "
        "to s every step and to sqrt(s_hat).", dict(lr=1e-2),
        matches=("optax.adabelief 0.2.8", "arXiv 2010.07468 Alg. 2")),
    Row("AdaBelief", "nesterov-lr-schedule", "optax's nesterov, a separate eps_root, betas "
        "(0.8, 0.99), maximize, under warmup + cosine.",
        dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-8, eps_root=1e-12, nesterov=True,
             maximize=True), steps=16, schedule="warmup-cosine",
        matches=("optax.adabelief 0.2.8 (nesterov; negated gradients)",)),
    Row("AdaBelief", "adabelief-pytorch", "The authors' 0.2.1 defaults: RAdam-style "
        "rectification (SGD steps until rho_t >= 5), decoupled weight decay.",
        dict(lr=1e-2, weight_decay=0.1, variant="adabelief_pytorch"),
        matches=("adabelief-pytorch 0.2.1 AdaBelief",)),
    Row("AdaBelief", "amsgrad-l2-mixed", "amsgrad and L2 decay, three parameters, missing and "
        "zero gradients.", dict(lr=1e-2, eps=1e-8, amsgrad=True,
                                                     weight_decay=0.05),
        shapes=MIXED, grads="dense-none-zero",
        matches=("adabelief-pytorch 0.2.1 AdaBelief(rectify=False, weight_decouple=False)",)),
    Row("AdaBelief", "eps-dominated", "Tiny gradients: eps inside s and outside the root.",
        dict(lr=1e-2, eps=1e-8), grad_scale=1e-9, flags=("eps-dominated",),
        matches=("optax.adabelief 0.2.8 (eps=eps_root=1e-8)",)),
    Row("AdaBelief", "optax-eps-root", "optax.adabelief's separate eps_root, nesterov, betas "
        "(0.8, 0.99), dense gradients under warmup + cosine (the optax flavor replays it).",
        dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-8, eps_root=1e-12, nesterov=True), steps=12,
        schedule="warmup-cosine", matches=("optax.adabelief 0.2.8 (nesterov)",)),
]

TABLE["Adan"] = [
    Row("Adan", "defaults", "The authors' defaults (betas 0.98, 0.92, 0.99 as decay rates).",
        dict(lr=1e-2), matches=("sail-sg/Adan adan.py", "arXiv 2208.06677 Alg. 1")),
    Row("Adan", "proximal-decay-mixed", "Proximal weight decay (theta / (1 + lr lambda)), three "
        "parameters, missing and zero gradients (the previous gradient is kept across a "
        "missing one).", dict(lr=1e-2, weight_decay=0.1), shapes=MIXED,
        grads="dense-none-zero", matches=("sail-sg/Adan adan.py",)),
    Row("Adan", "no-prox-lr-schedule", "The authors' no_prox=True decay under warmup + cosine, "
        "other betas, maximize.", dict(lr=1e-2, weight_decay=0.1, betas=(0.9, 0.8, 0.95),
                                       weight_decay_form="decoupled", maximize=True),
        steps=16, schedule="warmup-cosine", matches=("sail-sg/Adan adan.py (no_prox=True)",)),
    Row("Adan", "optax", "optax 0.2.8: the gradient difference weighted by 1 - beta2, decay "
        "added to the update, eps_root=1e-8.", dict(lr=1e-2, weight_decay=0.1, variant="optax"),
        matches=("optax.adan 0.2.8",)),
]

TABLE["Yogi"] = [
    Row("Yogi", "defaults", "optax's defaults (eps=1e-3, m and v start at 1e-6).", dict(lr=1e-2),
        matches=("optax.yogi 0.2.8",)),
    Row("Yogi", "sign-flips-schedule", "Small gradients near v (the sign of v - g^2 flips), "
        "betas (0.8, 0.99), eps_root, maximize, under warmup + cosine.",
        dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-4, eps_root=1e-10,
             initial_accumulator_value=1e-4, maximize=True), grad_scale=0.01, steps=16,
        schedule="warmup-cosine", matches=("optax.scale_by_yogi 0.2.8 (negated gradients)",)),
    Row("Yogi", "no-bias-correction-mixed", "The paper's uncorrected update, three parameters, "
        "missing and zero gradients.", dict(lr=1e-2, bias_correction=False), shapes=MIXED,
        grads="dense-none-zero", matches=("arXiv/NeurIPS 2018 Yogi pseudo-code",)),
]

TABLE["AdamaxW"] = [
    Row("AdamaxW", "defaults", "optax's weight_decay=1e-4, torch Adamax's lr.", {},
        matches=("optax.adamaxw 0.2.8",)),
    Row("AdamaxW", "decay-mixed-schedule", "Large decay, three parameters with missing and zero "
        "gradients, under warmup + cosine.", dict(lr=2e-2, weight_decay=0.3), shapes=MIXED,
        grads="dense-none-zero", steps=16, schedule="warmup-cosine",
        matches=("optax.adamaxw 0.2.8",)),
    Row("AdamaxW", "maximize-betas", "maximize with betas (0.8, 0.9), shrinking gradients.",
        dict(lr=2e-2, betas=(0.8, 0.9), maximize=True), grads="dense-shrinking",
        matches=("optax.adamaxw 0.2.8 (negated gradients)",)),
]

TABLE["NovoGrad"] = [
    Row("NovoGrad", "defaults", "optax's defaults (betas 0.9, 0.25; eps 1e-6), two layers.",
        dict(lr=1e-2), shapes=LAYERS, matches=("optax.novograd 0.2.8",
                                               "arXiv 1905.11286 Alg. 1")),
    Row("NovoGrad", "decay-mixed-schedule", "Weight decay inside the momentum, eps_root, three "
        "parameters with missing and zero gradients (a zero gradient's layer norm is 0), under "
        "warmup + cosine.", dict(lr=1e-2, weight_decay=0.1, eps_root=1e-3), shapes=MIXED,
        grads="dense-none-zero", steps=16, schedule="warmup-cosine",
        matches=("optax.novograd 0.2.8",)),
    Row("NovoGrad", "maximize-betas", "maximize with betas (0.8, 0.5).",
        dict(lr=1e-2, betas=(0.8, 0.5), maximize=True), shapes=LAYERS,
        matches=("optax.novograd 0.2.8 (negated gradients)",)),
]

TABLE["Fromage"] = [
    Row("Fromage", "paper", "The authors' step: ratio ||w||/||g||, shrink by sqrt(1 + lr^2); "
        "a zero-initialised bias takes the zero-norm guard (ratio 1).", dict(lr=0.05),
        shapes=LAYERS, init=("uniform", "zeros"),
        matches=("jxbz/fromage fromage.py", "arXiv 2002.03432 Alg. 1")),
    Row("Fromage", "optax-lr-schedule", "optax's min_norm=1e-6, maximize, missing and zero "
        "gradients, under warmup + cosine.", dict(lr=0.05, variant="optax", maximize=True),
        shapes=MIXED, grads="dense-none-zero", steps=16, schedule="warmup-cosine",
        matches=("optax.fromage 0.2.8 (negated gradients)",)),
    Row("Fromage", "optax-dense", "optax's min_norm=1e-6 with dense gradients (the optax "
        "flavor replays it); a zero-initialised bias takes the guard.",
        dict(lr=0.05, variant="optax"), shapes=LAYERS, init=("uniform", "zeros"),
        matches=("optax.fromage 0.2.8",)),
]

TABLE["SM3"] = [
    Row("SM3", "defaults", "optax's defaults (momentum 0.9): a vector (one accumulator per "
        "element), a matrix (rows and columns) and a 3-D tensor (three covers).", dict(lr=0.05),
        shapes=((7,), (4, 6), (2, 3, 4)), matches=("optax.sm3 0.2.8",
                                                   "arXiv 1901.11150 SM3-II")),
    Row("SM3", "momentum-schedule-maximize", "momentum 0.5, maximize, missing and zero "
        "gradients, under warmup + cosine.", dict(lr=0.05, momentum=0.5, maximize=True),
        shapes=MIXED, grads="dense-none-zero", steps=16, schedule="warmup-cosine",
        matches=("optax.scale_by_sm3 0.2.8 (negated gradients)",)),
]

TABLE["SignSGD"] = [
    Row("SignSGD", "lr-schedule", "sign(g) under warmup + cosine; missing and zero gradients "
        "(sign(0) = 0: no move).", dict(lr=1e-2), shapes=MIXED, grads="dense-none-zero",
        steps=16, schedule="warmup-cosine",
        matches=("optax.sign_sgd 0.2.8", "arXiv 1802.04434 Alg. 1")),
    Row("SignSGD", "weight-decay-maximize", "The authors' L2 weight decay inside the sign, "
        "maximize.", dict(lr=1e-2, weight_decay=0.5, maximize=True),
        matches=("mxnet.optimizer.Signum (momentum=0, the authors')",)),
    Row("SignSGD", "defaults", "sign(g), dense gradients (the optax flavor replays it).",
        dict(lr=1e-2), matches=("optax.sign_sgd 0.2.8",)),
]

TABLE["Signum"] = [
    Row("Signum", "defaults", "The authors' defaults (lr 1e-2, momentum 0.9).", {},
        matches=("optax.signum 0.2.8", "arXiv 1802.04434 Alg. 3")),
    Row("Signum", "decay-mixed-schedule", "momentum 0.5, L2 weight decay, maximize, missing and "
        "zero gradients (the buffer keeps moving the parameter), under warmup + cosine.",
        dict(lr=1e-2, momentum=0.5, weight_decay=0.1, maximize=True), shapes=MIXED,
        grads="dense-none-zero", steps=16, schedule="warmup-cosine",
        matches=("mxnet.optimizer.Signum (the authors')",)),
]

TABLE["NoisySGD"] = [
    Row("NoisySGD", "defaults", "eta=0.01, gamma=0.55; the noise is the documented "
        "counter-based stream (npoptim.kernels.counter_stream) with seed 0.", dict(lr=1e-2),
        matches=("optax.noisy_sgd 0.2.8 (given the same samples)",)),
    Row("NoisySGD", "seed-mixed-schedule", "seed 12345, eta 0.3, gamma 1, maximize, missing and "
        "zero gradients (a missing gradient takes no step and no noise), under warmup + cosine.",
        dict(lr=1e-2, eta=0.3, gamma=1.0, seed=12345, maximize=True), shapes=MIXED,
        grads="dense-none-zero", steps=16, schedule="warmup-cosine",
        matches=("optax.noisy_sgd 0.2.8 (given the same samples)",)),
]

TABLE["PolyakSGD"] = [
    Row("PolyakSGD", "defaults", "optax's defaults (scaling 1, max_learning_rate 1, f_min 0) "
        "on the separable quartic (the case stores the objective, not gradients).", {},
        shapes=((3, 5), (4,)), objective="separable-quartic",
        matches=("optax.polyak_sgd 0.2.8", "arXiv 2002.10542 SPS_max (c=1, gamma_b=1)")),
    Row("PolyakSGD", "sps-plus-schedule", "sps+ with f_min above the minimum (the gap is "
        "clipped at 0 near the end), a capped step, eps, the scaling under warmup + cosine.",
        dict(lr=0.8, max_learning_rate=0.5, f_min=0.05, eps=1e-6, mode="sps+"),
        shapes=((6,),), objective="separable-quartic", steps=16, schedule="warmup-cosine",
        matches=("optax.polyak_sgd 0.2.8 (variant='sps+')",)),
]

TABLE["OptimisticGD"] = [
    Row("OptimisticGD", "defaults", "alpha = beta = 1: theta - lr (2 g_t - g_{t-1}); the first "
        "step uses g_0 = g_1.", dict(lr=1e-2),
        matches=("optax.optimistic_gradient_descent 0.2.8",)),
    Row("OptimisticGD", "alpha-beta-mixed-schedule", "alpha 0.5, beta 2, maximize, missing and "
        "zero gradients, under warmup + cosine.", dict(lr=1e-2, alpha=0.5, beta=2.0,
                                                       maximize=True),
        shapes=MIXED, grads="dense-none-zero", steps=16, schedule="warmup-cosine",
        matches=("optax.optimistic_gradient_descent 0.2.8 (negated gradients)",)),
]

TABLE["OptimisticAdam"] = [
    Row("OptimisticAdam", "paper", "The paper's Algorithm 1: 2 d_t - d_{t-1} of plain Adam "
        "directions.", dict(lr=1e-2), matches=("arXiv 1711.00141 Alg. 1",
                                               "optax.optimistic_adam_v2 0.2.8 (nesterov=False)")),
    Row("OptimisticAdam", "optax-lr-schedule", "optax's defaults (Nesterov moments), alpha 0.5, "
        "beta 2, eps_root, missing and zero gradients, under warmup + cosine.",
        dict(lr=1e-2, variant="optax", alpha=0.5, beta=2.0, eps_root=1e-10), shapes=MIXED,
        grads="dense-none-zero", steps=16, schedule="warmup-cosine",
        matches=("optax.optimistic_adam_v2 0.2.8",)),
    Row("OptimisticAdam", "optax-dense", "optax's defaults (Nesterov moments) with dense "
        "gradients (the optax flavor replays it).", dict(lr=1e-2, variant="optax"),
        matches=("optax.optimistic_adam_v2 0.2.8",)),
]

TABLE["DPSGD"] = [
    Row("DPSGD", "clipped-noised", "Per-example gradients (batch 4, a leading axis) of growing "
        "norms, the global norm clipped to 2 (most examples clipped), noise multiplier 0.5 from "
        "the documented counter-based stream (npoptim.kernels.counter_stream), seed 0.",
        dict(lr=0.05, l2_norm_clip=2.0, noise_multiplier=0.5), grads="per-example",
        matches=("optax.contrib.dpsgd 0.2.8 (given the same samples)",)),
    Row("DPSGD", "nesterov-mixed-schedule", "Nesterov momentum 0.9 over three parameters (one "
        "global norm across them), clipping norm 4, seed 12345, under warmup + cosine.",
        dict(lr=0.05, l2_norm_clip=4.0, noise_multiplier=1.0, momentum=0.9, nesterov=True,
             seed=12345), shapes=MIXED, grads="per-example", steps=16,
        schedule="warmup-cosine",
        matches=("optax.contrib.dpsgd 0.2.8 (given the same samples)",)),
]
TABLE["Sophia"] = [
    Row("Sophia", "sophiag-authors", "The authors' SophiaG (variant 'sophiag': no bias "
        "correction, eps 1e-15 added to gamma h, the estimate after steps 3, 6, 9) with their "
        "rho 0.04 times a batch size 8 as gamma, weight decay 0.1, and their update_hessian "
        "squaring the step's own gradient (hessian_estimate='squared-gradient').",
        dict(lr=1e-2, gamma=0.32, eps=1e-15, weight_decay=0.1, update_interval=3,
             hessian_estimate="squared-gradient", variant="sophiag"),
        matches=("sophia-opt 0.2.2 SophiaG (Liuhong99/Sophia, update_hessian after the "
                 "step)",)),
    Row("Sophia", "squared-gradient", "optax's defaults with the Hessian-diagonal estimate g*g "
        "of the step's gradient (hessian_estimate='squared-gradient'), updated every 3rd step "
        "(steps 1, 4, 7, 10): the first step is a clipped sign step, later ones mostly clipped.",
        dict(lr=1e-2, update_interval=3, hessian_estimate="squared-gradient"),
        matches=("optax.contrib.sophia 0.2.8 (hessian_diagonal_fn returning g*g)",)),
    Row("Sophia", "no-clip-mixed-schedule", "No clipping (clip_threshold null), gamma 1 and "
        "eps 0.1 bounding the step, betas (0.9, 0.8), decoupled weight decay 0.1, the estimate "
        "every 2nd step, missing and zero gradients, under warmup + cosine.",
        dict(lr=1e-2, betas=(0.9, 0.8), eps=0.1, weight_decay=0.1, gamma=1.0,
             clip_threshold=None, update_interval=2, hessian_estimate="squared-gradient"),
        shapes=MIXED, grads="dense-none-zero", steps=16, schedule="warmup-cosine",
        matches=("optax.contrib.sophia 0.2.8 (hessian_diagonal_fn returning g*g)",)),
    Row("Sophia", "no-clip-dense", "No clipping (clip_threshold null), gamma 1, eps 0.1, betas "
        "(0.9, 0.8), decoupled weight decay 0.1, the estimate every 2nd step, dense gradients "
        "(the optax flavor replays it: optax has no missing gradient).",
        dict(lr=1e-2, betas=(0.9, 0.8), eps=0.1, weight_decay=0.1, gamma=1.0,
             clip_threshold=None, update_interval=2, hessian_estimate="squared-gradient"),
        steps=10, matches=("optax.contrib.sophia 0.2.8 (hessian_diagonal_fn returning g*g)",)),
]
TABLE["GaLoreAdamW"] = [
    Row("GaLoreAdamW", "tall-wide-vector", "Rank 2 on a tall (8x5, right projector) and a wide "
        "(4x9, left projector) matrix and plain AdamW on a vector; the projectors refreshed "
        "from the SVD (signed: each singular vector's largest entry positive) at steps 1, 5 "
        "and 9, the moments carried over.",
        dict(lr=1e-2, rank=2, update_proj_gap=4), shapes=((8, 5), (4, 9), (6,)),
        matches=("galore_torch.GaLoreAdamW 1.0 (SVD in float64, the same signs)",)),
    Row("GaLoreAdamW", "decay-no-bias-correction-schedule", "Rank 3, scale 1, decoupled weight "
        "decay 0.1 after the step, correct_bias False, a refresh every 5 steps, under warmup "
        "+ cosine.", dict(lr=1e-2, rank=3, update_proj_gap=5, scale=1.0, weight_decay=0.1,
                          correct_bias=False),
        shapes=((6, 4),), steps=16, schedule="warmup-cosine",
        matches=("galore_torch.GaLoreAdamW 1.0 (SVD in float64, the same signs)",)),
]

def _lean(rows):
    """Rows without the one-element case (it changes no math; the suite's size cap is shared)."""
    return [row for row in rows if row.name != "one-element"]


TABLE["ACProp"] = _lean(_optax_contrib("ACProp", 1e-2, "optax.contrib.acprop 0.2.8",
                                       weight_decay=0, maximize=False,
                                       eps_hyper=dict(eps=1e-9), extra=[
    Row("ACProp", "decoupled-weight-decay", "Weight decay added to the direction, scaled by "
        "the lr.", dict(lr=1e-2, weight_decay=0.1)),
    Row("ACProp", "betas-eps-root", "betas (0.8, 0.99), eps 1e-6, eps_root 1e-10.",
        dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-6, eps_root=1e-10), shapes=MIXED),
]))

TABLE["COCOB"] = _lean(_optax_contrib("COCOB", 1.0, "optax.contrib.cocob 0.2.8",
                                      maximize=False, extra=[
    Row("COCOB", "alpha-eps", "alpha=10 and eps=1e-3: the bet is capped by alpha L in the "
        "early steps, and the initial scale matters.", dict(alpha=10.0, eps=1e-3)),
]))

TABLE["DoG"] = _lean(_optax_contrib("DoG", 1.0, "optax.contrib.dog 0.2.8", maximize=False,
                                    extra=[
    Row("DoG", "distance", "init_step=('distance', 0.1): r_eps given, eps 1e-6; two "
        "parameters share the step size.", dict(init_step=("distance", 0.1), eps=1e-6),
        shapes=MIXED),
    Row("DoG", "learning-rate", "init_step=('learning_rate', 0.05): the first step's size is "
        "given, r_eps = 0.", dict(init_step=("learning_rate", 0.05))),
]))
TABLE["DoWG"] = _lean(_optax_contrib("DoWG", 1.0, "optax.contrib.dowg 0.2.8", maximize=False,
                                     extra=[
    Row("DoWG", "init-estim", "init_estim_sq_dist=0.01, eps 1e-6; two parameters share the "
        "step size.", dict(init_estim_sq_dist=0.01, eps=1e-6), shapes=MIXED),
]))

TABLE["Momo"] = [
    Row("Momo", "defaults", "optax's defaults (lr 1, beta 0.9, lower_bound 0) on the separable "
        "quartic (the case stores the objective, not gradients).", {},
        shapes=((3, 5), (4,)), objective="separable-quartic",
        matches=("optax.contrib.momo 0.2.8", "momo-opt 0.1.0 Momo")),
    Row("Momo", "adapt-lower-bound-schedule", "adapt_lower_bound (MoMo*) from -1, weight decay, "
        "beta 0.5, the lr cap under warmup + cosine.",
        dict(lr=0.8, beta=0.5, lower_bound=-1.0, weight_decay=0.05, adapt_lower_bound=True),
        shapes=((6,),), objective="separable-quartic", steps=16, schedule="warmup-cosine",
        matches=("momo-opt 0.1.0 Momo (use_fstar)",)),
    Row("Momo", "optax", "variant='optax' (optax's weight decay form).",
        dict(lr=0.5, weight_decay=0.1, variant="optax"), shapes=((6,),),
        objective="separable-quartic", matches=("optax.contrib.momo 0.2.8",)),
    Row("Momo", "bias-correction", "bias_correction=True: the averages start at 0 and the "
        "lower bound and the lr cap are scaled by 1 - beta^t.",
        dict(lr=0.5, weight_decay=0.1, bias_correction=True), shapes=((6,),),
        objective="separable-quartic", matches=("momo-opt 0.1.0 Momo (bias_correction)",)),
]
TABLE["MomoAdam"] = [
    Row("MomoAdam", "defaults", "optax's defaults (lr 1e-2, betas (0.9, 0.999), eps 1e-8) on "
        "the separable quartic.", {}, shapes=((3, 5), (4,)), objective="separable-quartic",
        matches=("optax.contrib.momo_adam 0.2.8", "momo-opt 0.1.0 MomoAdam")),
    Row("MomoAdam", "adapt-lower-bound-schedule", "adapt_lower_bound from -1, weight decay, "
        "betas (0.8, 0.99), the lr cap under warmup + cosine.",
        dict(lr=0.2, betas=(0.8, 0.99), lower_bound=-1.0, weight_decay=0.05,
             adapt_lower_bound=True),
        shapes=((6,),), objective="separable-quartic", steps=16, schedule="warmup-cosine",
        matches=("momo-opt 0.1.0 MomoAdam (use_fstar)",)),
    Row("MomoAdam", "optax", "variant='optax' (optax's weight decay form).",
        dict(lr=0.1, weight_decay=0.1, variant="optax"), shapes=((6,),),
        objective="separable-quartic", matches=("optax.contrib.momo_adam 0.2.8",)),
    Row("MomoAdam", "multiply-decay", "weight_decay_form='multiply' (the authors' "
        "divide=False).", dict(lr=0.1, weight_decay=0.1, weight_decay_form="multiply"),
        shapes=((6,),), objective="separable-quartic",
        matches=("momo-opt 0.1.0 MomoAdam (divide=False)",)),
]
TABLE["CAME"] = [
    Row("CAME", "defaults", "The authors' betas (0.9, 0.999, 0.9999) and eps (1e-30, 1e-16), "
        "lr 1e-2: a matrix with factored second moment and confidence, a vector with full "
        "moments and the momentum as its step.", dict(lr=1e-2), shapes=((3, 2), (2,)), steps=10,
        matches=("came-pytorch 0.1.3 CAME", "pytorch_optimizer.CAME 4.1.0")),
    Row("CAME", "decay-3d-clip", "Decoupled weight decay, clip_threshold 1.5, betas (0.8, "
        "0.99, 0.999); a 3-D tensor factored over its last two dimensions (float64 only: the "
        "suite's size budget).",
        dict(lr=1e-2, weight_decay=0.1, clip_threshold=1.5, betas=(0.8, 0.99, 0.999)),
        shapes=((2, 2, 2), (2,)), steps=10, dtypes=("float64",),
        matches=("came-pytorch 0.1.3 CAME",)),
    Row("CAME", "pytorch-optimizer-options", "pytorch_optimizer's options: maximize, L2 "
        "decay (weight_decouple=False) and ams_bound, under warmup + cosine.",
        dict(lr=1e-2, weight_decay=0.05, maximize=True, decoupled_weight_decay=False,
             ams_bound=True), shapes=((2, 3), (2,)), steps=10, schedule="warmup-cosine",
        matches=("pytorch_optimizer.CAME 4.1.0 (weight_decouple=False, ams_bound=True)",)),
]
TABLE["APOLLO"] = [
    Row("APOLLO", "tall-wide-vector", "The authors' APOLLO, channel-wise, rank 2 on a tall (5x3, "
        "right projector, one factor per row) and a wide (2x5, left projector, one per column) "
        "matrix, plain AdamW on a vector; projectors from the counter stream at steps 1, 5 "
        "and 9, the norm-growth limiter, decoupled decay 0.1.",
        dict(lr=1e-2, rank=2, update_proj_gap=4, weight_decay=0.1),
        shapes=((5, 3), (2, 5), (3,)), steps=10,
        matches=("apollo-torch 1.0.3 APOLLOAdamW (given these projectors)",)),
    Row("APOLLO", "mini", "APOLLO-Mini: rank 1, tensor-wise, scale 128 (sqrt(128) on the "
        "update), a refresh every 4 steps, under warmup + cosine (float64 only: the suite's "
        "size budget).", dict(variant="apollo_mini", lr=1e-3, update_proj_gap=4),
        shapes=((5, 3), (3,)), steps=10, schedule="warmup-cosine", dtypes=("float64",),
        matches=("apollo-torch 1.0.3 APOLLOAdamW rank 1 tensor (given these projectors)",)),
    Row("APOLLO", "pytorch-optimizer-channel", "pytorch_optimizer's APOLLO, channel-wise, "
        "scale 2: the scaled low-rank gradient projected back (times s^1.5), refreshes at "
        "steps 1, 4 and 8, the decay by the bias-corrected step size (float64 only).",
        dict(variant="pytorch_optimizer", lr=1e-2, rank=2, update_proj_gap=4, scale=2.0,
             scale_type="channel", weight_decay=0.1),
        shapes=((4, 3), (2, 5)), steps=10, dtypes=("float64",),
        matches=("pytorch_optimizer.APOLLO 4.1.0 (given these projectors)",)),
]

TABLE["Shampoo"] = [
    Row("Shampoo", "pytorch-optimizer-l2", "pytorch_optimizer's Shampoo: one statistic per "
        "dimension summed from eps I (matrix_eps 1e-2), each mode preconditioned by its "
        "inverse 2k-th root (eigen root) every step; L2 decay; a matrix and a 3-D tensor.",
        dict(lr=1e-2, weight_decay=0.1, matrix_eps=1e-2), shapes=((3, 2), (2, 2, 2)), steps=10,
        dtypes=("float64",), matches=("pytorch_optimizer.Shampoo 4.1.0",)),
    Row("Shampoo", "float32", "The first row's Shampoo on a matrix alone, in float32.",
        dict(lr=1e-2, weight_decay=0.1, matrix_eps=1e-2), shapes=((3, 2),), steps=10,
        dtypes=("float32",), matches=("pytorch_optimizer.Shampoo 4.1.0",)),
    Row("Shampoo", "momentum-refresh-decoupled", "momentum 0.5 (toward the last preconditioned "
        "gradient), roots every 3 steps (zero before the first: steps 1-2 do not move), "
        "decoupled decay.",
        dict(lr=1e-2, momentum=0.5, weight_decay=0.1, decoupled_weight_decay=True,
             preconditioning_compute_steps=3, matrix_eps=1e-2),
        shapes=((3, 2), (2,)), steps=10, dtypes=("float64",),
        matches=("pytorch_optimizer.Shampoo 4.1.0 (weight_decouple=True)",)),
    Row("Shampoo", "scalable-adagrad-newton", "ScalableShampoo: AdaGrad grafting, blocks of 3 "
        "(a side of 4 cut 3 + 1), the coupled Newton root every 2 steps, the Shampoo "
        "momentum from step 4, Nesterov, L2 decay.",
        dict(lr=1e-2, variant="scalable", graft_type="adagrad", block_size=3,
             shape_interpretation=False, preconditioning_compute_steps=2,
             start_preconditioning_step=4, weight_decay=0.05, matrix_eps=1e-4),
        shapes=((3, 2), (4, 2)), steps=10, dtypes=("float64",),
        matches=("pytorch_optimizer.ScalableShampoo 4.1.0 (graft_type=ADAGRAD, power "
                 "iteration started from npoptim's vector)",)),
    Row("Shampoo", "scalable-eigenvalue-eps", "ScalableShampoo's form with the eigen root and "
        "eps on the eigenvalues (Meta's placement; statistics from zero), RMSProp grafting, "
        "decoupled decay.",
        dict(lr=1e-2, variant="scalable", graft_type="rmsprop", shape_interpretation=False,
             preconditioning_compute_steps=2, start_preconditioning_step=3,
             inverse_root="eigh", matrix_eps_mode="eigenvalues", matrix_eps=1e-3,
             weight_decay=0.1, decoupled_weight_decay=True),
        shapes=((2, 3), (3,)), steps=10, dtypes=("float64",)),
    # optax-shampoo's distributed_shampoo (the optax flavor: variant="optax"), replayed
    # through it by tests/test_shampoo.py
    Row("Shampoo", "optax-sgd-graft", "optax-shampoo 0.0.6's distributed_shampoo (npoptim "
        "variant='optax', the optax flavor): its count from 0 (statistics and the coupled "
        "Newton roots at the first update, then every 3), a vector preconditioned (blocks 3 "
        "+ 1: a 1 x 1 statistic, padded to 3 in its batched root) and a 3-D tensor unmerged, "
        "SGD grafting, the Shampoo momentum from count 3, Nesterov, L2 decay.",
        dict(lr=1e-2, variant="optax", block_size=3, shape_interpretation=False,
             preconditioning_compute_steps=3, start_preconditioning_step=3,
             weight_decay=0.05, matrix_eps=1e-4),
        shapes=((4,), (2, 2, 2)), steps=10, dtypes=("float64",),
        matches=("optax_shampoo.distributed_shampoo 0.0.6 (graft_type=SGD)",)),
    Row("Shampoo", "optax-rmsprop-normalized", "distributed_shampoo with RMSprop-normalized "
        "grafting (g/|g| first), the decoupled decay added to the momentum step (lr^2 "
        "weight_decay with the decoupled lr), no Nesterov, shapes merged under 6 ((2, 3, 2) "
        "is (6, 2), blocks 4 + 2 by 2), a root failing the check (error >= 1e-8) keeping "
        "the previous one.",
        dict(lr=1e-2, variant="optax", block_size=4, merge_small_dims_block_size=6,
             graft_type="rmsprop_normalized", nesterov=False, weight_decay=0.1,
             decoupled_weight_decay=True, preconditioning_compute_steps=2,
             start_preconditioning_step=2, inverse_failure_threshold=1e-8, matrix_eps=1e-4),
        shapes=((2, 3, 2),), steps=10, dtypes=("float64",),
        matches=("optax_shampoo.distributed_shampoo 0.0.6 (graft_type=RMSPROP_NORMALIZED)",)),
]

SCION_TOLERANCE = {
    "rtol": {"float32": 1e-4, "float64": 1e-4},
    "reason": "Scion's spectral norms orthogonalize in bfloat16, as pytorch_optimizer and the "
              "authors do; npoptim reproduces torch's CPU bfloat16 arithmetic (Muon's "
              "emulation), but where oneDNN sums in another order torch differs by one "
              "bfloat16 unit (2^-8 relative) in elements of the update, up to ~lr*scale*2^-8 "
              "of the parameter per step; 1e-4 of the scale allows that at these lr."}
_SCION_PT = "pytorch_optimizer.SCION 4.1.0 (foreach=False)"
TABLE["Scion"] = [
    Row("Scion", "defaults", "pytorch_optimizer's defaults (momentum 0.1, unconstrained), "
        "lr 1e-2, norm='auto': a matrix spectral (bfloat16 Newton-Schulz, sqrt(A/B)), a "
        "vector bias-RMS, a 3-D tensor spectral_conv.", dict(lr=1e-2),
        shapes=((2, 3), (3,), (2, 2, 2)), steps=10, tolerance=SCION_TOLERANCE,
        matches=(_SCION_PT,)),
    Row("Scion", "authors-constrained-conv", "variant='lions_epfl', the authors' constrained "
        "form (theta(1-lr) - lr*scale*lmo): a 4-D conv kernel (2, 2, 2, 2), scale 2, "
        "momentum 0.5, under warmup + cosine.",
        dict(lr=2e-2, momentum=0.5, scale=2.0, constraint=True, variant="lions_epfl"),
        shapes=((2, 2, 2, 2),), steps=10, schedule="warmup-cosine", dtypes=("float64",),
        tolerance=SCION_TOLERANCE,
        matches=("LIONS-EPFL/scion Scion (eager: TORCHDYNAMO_DISABLE=1)",)),
    Row("Scion", "spectral-float64-light", "ScionLight (momentum_form='sum') with the "
        "Newton-Schulz in float64 (ns_dtype='param'), spectral with normalized=False and "
        "max_scale on a tall matrix, decoupled decay.",
        dict(lr=1e-2, momentum=0.2, norm="spectral", normalized=False, max_scale=True,
             weight_decay=0.1, momentum_form="sum", ns_dtype="param"),
        shapes=((4, 3),), steps=10, dtypes=("float64",),
        matches=("pytorch_optimizer.SCIONLight 4.1.0 (its Newton-Schulz at dtype=float64)",)),
    Row("Scion", "sign-radius", "The output layer's norm: sign/B with radius 60, momentum "
        "0.3, coupled decay (weight_decouple=False).",
        dict(lr=1e-3, momentum=0.3, norm="sign", scale=60.0, weight_decay=0.1,
             weight_decouple=False), shapes=((2, 4),), steps=10, dtypes=("float64",),
        matches=(_SCION_PT,)),
    Row("Scion", "col-transpose", "Column norm of the transpose (an embedding stored (vocab, "
        "dim)), normalized, constrained.",
        dict(lr=1e-2, momentum=0.5, norm="col", normalized=True, transpose=True,
             constraint=True), shapes=((4, 3),), steps=10, dtypes=("float64",),
        matches=(_SCION_PT, "LIONS-EPFL/scion Scion, ColNorm (eager)")),
    Row("Scion", "row-bias", "Row norm (normalized by sqrt(B)) on a matrix and a vector, "
        "momentum 1 (no average).", dict(lr=1e-2, momentum=1.0, norm="row"),
        shapes=((2, 3), (3,)), steps=10, dtypes=("float64",),
        matches=(_SCION_PT, "LIONS-EPFL/scion Scion, RowNorm (unconstrained=True)")),
]

#: a toy transformer's names for AdamMini's rows (dim 2, 2 heads of 2 elements, 1 kv head)
_ADAM_MINI_NAMES = ("embed_tokens.weight", "layers.0.attn.q_proj.weight",
                    "layers.0.attn.k_proj.weight", "layers.0.mlp.up_proj.weight",
                    "layers.0.mlp.up_proj.bias", "layers.0.input_layernorm.weight")
TABLE["AdamMini"] = [
    Row("AdamMini", "toy-transformer", "A toy transformer's named parameters (dim 2, 2 heads, "
        "1 kv head): one second moment per token of the embedding, per head of the query and "
        "the key, per neuron of the MLP, Adam's per element for its bias, one for the norm; "
        "weight decay except on the bias and the norm, under warmup + cosine (float64 only: "
        "the suite's size budget).",
        dict(lr=1e-2, weight_decay=0.1, dim=2, n_heads=2, n_kv_heads=1,
             param_names=_ADAM_MINI_NAMES),
        shapes=((3, 2), (2, 2), (1, 2), (2, 2), (2,), (2,)), steps=10, dtypes=("float64",),
        schedule="warmup-cosine", matches=("adam-mini 1.1.1 Adam_mini",)),
    Row("AdamMini", "unnamed", "Unnamed parameters, the package's default partition: one "
        "second moment per tensor (a matrix and a vector), weight decay on both.",
        dict(lr=1e-2, weight_decay=0.1), shapes=((3, 2), (2,)), steps=10,
        matches=("adam-mini 1.1.1 Adam_mini (names matching no rule)",)),
]

TABLE["SOAP"] = [
    Row("SOAP", "refresh-every-3", "pytorch_optimizer's defaults but lr 1e-2 and the bases "
        "refreshed every 3 updates (power iteration and a float32 QR): a matrix "
        "preconditioned on both sides, a vector as Adam; the first call moves nothing.",
        dict(lr=1e-2, precondition_frequency=3), shapes=((3, 3), (2,)), steps=10,
        tolerance={"rtol": {"float64": 1e-6}, "reason": (
            "the refresh's QR runs in float32 in both sources: two float32 QRs (LAPACK's, "
            "npoptim's fixed-order Householder) differ by float32 rounding, and the float64 "
            "trajectory by as much (pytorch_optimizer: 1.9e-8 over 24 steps, "
            "tests/test_soap.py)")},
        matches=("pytorch_optimizer.SOAP 4.1.0 (to its float32 QR's rounding)",)),
    Row("SOAP", "authors-normalize-3d", "variant='authors' (float32 eigh and QR, "
        "normalize_floor 1e-30) with normalize_gradient, decay 0.1, betas (0.9, 0.99); a 3-D "
        "tensor with its last side beyond max_precond_dim 2 (float64 only: the suite's size "
        "budget).", dict(lr=1e-2, weight_decay=0.1, betas=(0.9, 0.99), variant="authors",
                         normalize_gradient=True, precondition_frequency=2, max_precond_dim=2),
        shapes=((2, 2, 3), (2,)), steps=10, dtypes=("float64",),
        tolerance={"rtol": {"float64": 1e-5}, "reason": (
            "the authors' eigendecompositions and QR run in float32: another float32 LAPACK "
            "differs by float32 rounding (see refresh-every-3)")},
        matches=("nikhilvyas/SOAP soap.py f42d296 (float32 decompositions)",)),
    Row("SOAP", "heavyball", "variant='heavyball' (bias correction inside the averages, eps "
        "as a floor 1e-3, decay 0.125 before the step, the lifted power iteration, refreshes "
        "on its cumulative sum of 1/3: calls 3, 7, 9) with lr 2**-6 and betas (0.875, "
        "0.9375): a matrix on both sides, a vector as Adam (float64 only: the suite's size "
        "budget).", dict(lr=2.0 ** -6, weight_decay=0.125, betas=(0.875, 0.9375),
                         shampoo_beta=0.875, eps=1e-3, variant="heavyball",
                         precondition_frequency=3),
        shapes=((3, 3), (2,)), steps=10, dtypes=("float64",),
        matches=("heavyball 3.2.1 SOAP (storage_dtype='float64', merge_dims=False, torch's "
                 "default dtype float64; tests/test_soap.py)",)),
]
TABLE["SPlus"] = [
    Row("SPlus", "refresh-every-3", "pytorch_optimizer's defaults but lr 0.1 and the bases "
        "recomputed at step 1 and every 3 (float32 eigh): a matrix at 2/(m+n), a vector's "
        "sign descent at the nonstandard constant.", dict(lr=0.1, inverse_steps=3),
        shapes=((3, 3), (2,)), steps=10,
        tolerance={"rtol": {"float64": 1e-5}, "reason": (
            "pytorch_optimizer's eigendecompositions run in float32: two float32 eigh (LAPACK's, "
            "npoptim's fixed-order Jacobi) differ by float32 rounding, and the float64 "
            "trajectory by as much (2.0e-6 over 24 steps, tests/test_splus.py)")},
        matches=("pytorch_optimizer.SPlus 4.1.0 (to its float32 eigh's rounding)",)),
    Row("SPlus", "pytorch-optimizer-options", "maximize, L2 decay (weight_decouple=False), "
        "the eigh in float64, max_dim 3: the 3-side has no statistic and s stays 2/(m+n) "
        "(float64 only: the suite's size budget).",
        dict(lr=0.1, weight_decay=0.05, maximize=True, decoupled_weight_decay=False,
             eigh_dtype="param", max_dim=3, inverse_steps=4), shapes=((2, 3), (2, 2, 2)),
        steps=10, dtypes=("float64",),
        matches=("pytorch_optimizer.SPlus 4.1.0 (weight_decouple=False, float64 eigh)",)),
    Row("SPlus", "authors", "variant='authors': s = 1/(2(m+n)), the eigh in the parameter's "
        "dtype, decay 0.1 (float64 only).", dict(lr=0.1, weight_decay=0.1, variant="authors",
                                                 inverse_steps=2),
        shapes=((3, 3),), steps=10, dtypes=("float64",),
        matches=("kvfrans/splus torch/splus.py",)),
]
TABLE["Kron"] = [
    Row("Kron", "thinned-updates", "kron_torch's form with lr 0.05, decay 0.02, "
        "precond_lr 0.2, init scale 0.7 and the schedule (1, 0.25, 0.3, 4): a matrix (two "
        "triangular factors; the solves in float32 as the sources), a vector (a diagonal "
        "factor); probes from the counter stream (seed 0).",
        dict(lr=0.05, weight_decay=0.02, precond_lr=0.2, precond_init_scale=0.7,
             preconditioner_update_probability=(1.0, 0.25, 0.3, 4)),
        shapes=((3, 2), (2,)), steps=10, grad_scale=4.0,
        tolerance={"rtol": {"float64": 1e-6}, "reason": (
            "the sources' triangular solves run in float32: two float32 substitutions "
            "(LAPACK's, npoptim's fixed order) differ by float32 rounding, and the float64 "
            "trajectory by as much (3.0e-8 over 24 steps, tests/test_kron.py)")},
        matches=("kron-torch 0.3.3 Kron (its torch.randn_like draws replaced by the counter "
                 "stream's; tests/test_kron.py feeds it torch's)",)),
    Row("Kron", "pytorch-optimizer-3d", "variant='pytorch_optimizer': a 3-D tensor with three "
        "factors (no merge), max_size_triangular 2 (its side of 3 diagonal), balancing at "
        "every update (balance_prob 1), solves in float64 (float64 only: the suite's size "
        "budget).", dict(lr=0.05, weight_decay=0.02, variant="pytorch_optimizer",
                         max_size_triangular=2, balance_prob=1.0, solve_dtype="param"),
        shapes=((2, 2, 3),), steps=10, dtypes=("float64",), grad_scale=4.0,
        matches=("pytorch_optimizer.Kron 4.1.0 (probes from the counter stream)",)),
    Row("Kron", "heavyball", "variant='heavyball' (the debiased momentum, elementwise damping, "
        "power-iteration norms with their running maximum, balancing at every update, "
        "heavyball's cumulative schedule (1, 0.25, 0.5, 4), decay of the vector too) with "
        "clip_update=False, lr 2**-5, decay 0.125, solves in float64; probes from the counter "
        "stream (float64 only: the suite's size budget).",
        dict(lr=2.0 ** -5, weight_decay=0.125, variant="heavyball", clip_update=False,
             solve_dtype="param", precond_lr=0.25, precond_init_scale=0.75,
             preconditioner_update_probability=(1.0, 0.25, 0.5, 4)),
        shapes=((3, 2), (2,)), steps=10, dtypes=("float64",), grad_scale=4.0,
        matches=("heavyball 3.2.1 PSGDKron (update_clipping=None, q_dtype and storage_dtype "
                 "'float64'; probes from the counter stream, tests/test_kron.py feeds it "
                 "torch's)",)),
]

TABLE["PSGDQuad"] = [
    Row("PSGDQuad", "dense-and-vector", "quad-torch's defaults but lr 0.01 (lr_style 'adam': "
        "steps of lr/5, decay 0.1, momentum 0.95, preconditioner lr 0.7): a square matrix "
        "(two dense factors), a vector (one diagonal factor); noise scale 0.01 so that its "
        "draws show, from the counter stream (seed 0).",
        dict(lr=0.01, noise_scale=0.01), shapes=((3, 3), (2,)), steps=10, grad_scale=4.0,
        matches=("quad-torch 0.4.5 QUAD (its torch.randn_like draws replaced by the counter "
                 "stream's, its math.max and 0-D index_select worked around as in "
                 "tests/test_psgd_quad.py)",)),
    Row("PSGDQuad", "diagonal-3d-plain-lr", "lr_style None (steps of lr), momentum 0.5, "
        "decay 0.05, preconditioner lr 0.3001 (its float32 floor of 0.3 from step 7): a 3-D "
        "tensor merged to 4 x 3, its side of 4 diagonal (past max_size_dense 3) and of 3 "
        "dense; a 2 x 5 matrix, its side of 5 diagonal and of 2 dense (float64 only: the "
        "suite's size budget).",
        dict(lr=0.02, lr_style=None, momentum=0.5, weight_decay=0.05, preconditioner_lr=0.3001,
             max_size_dense=3, noise_scale=0.01), shapes=((2, 2, 3), (2, 5)), steps=10,
        dtypes=("float64",), grad_scale=4.0,
        matches=("quad-torch 0.4.5 QUAD (noise from the counter stream)",)),
]

TABLE["Grams"] = [
    Row("Grams", "defaults", "pytorch_optimizer's defaults (lr 1e-3, betas (0.9, 0.999), eps "
        "1e-6, no decay).", {},
        matches=("pytorch_optimizer 4.1.0 Grams", "arXiv 2412.17107 Algorithm 1")),
    Row("Grams", "weight-decay-mixed", "Decoupled decay, betas (0.8, 0.99), missing and zero "
        "gradients on three parameters (a zero gradient moves by the decay only).",
        dict(lr=1e-2, weight_decay=0.1, betas=(0.8, 0.99)), shapes=MIXED,
        grads="dense-none-zero", matches=("arXiv 2412.17107 Algorithm 1",)),
    Row("Grams", "lr-schedule-maximize", "maximize and decay under warmup + cosine.",
        dict(lr=1e-2, weight_decay=0.05, maximize=True), steps=16, schedule="warmup-cosine",
        matches=("pytorch_optimizer 4.1.0 Grams",)),
    Row("Grams", "grams-pytorch", "The authors' form: eps added to sqrt(v), the bias "
        "corrections in the step size (eps 1e-3, where the placement shows).",
        dict(lr=1e-2, weight_decay=0.1, eps=1e-3, eps_mode="eps_hat"),
        matches=("grams-pytorch 0.0.2 Grams",)),
]

#: float64 cases whose float hyperparameters are exact in float32 (beta=0.875, lr=2^-k, ...):
#: frameworks that hold hyperparameters as float32 (ONNX attributes, TF casts) compute these
#: exactly in float64, where they fail the other float64 cases by 1e-11 to 1e-7.
F32_EXACT = "Hyperparameters exact in float32 (for frameworks with float32 attributes)"
TABLE["Adam"] = TABLE["Adam"] + [
    Row("Adam", "f32-exact", f"{F32_EXACT}: lr 2^-7, betas (0.875, 1-2^-10), eps 2^-20, L2 "
        "decay 2^-4.", dict(lr=2.0 ** -7, betas=(0.875, 0.9990234375), eps=2.0 ** -20,
                            weight_decay=2.0 ** -4), dtypes=("float64",))]
TABLE["Adagrad"] = TABLE["Adagrad"] + [
    Row("Adagrad", "f32-exact", f"{F32_EXACT}: lr 2^-4, lr_decay 2^-5, eps 2^-30, L2 decay "
        "2^-4, accumulator 0.125.", dict(lr=2.0 ** -4, lr_decay=2.0 ** -5, eps=2.0 ** -30,
                                          weight_decay=2.0 ** -4,
                                          initial_accumulator_value=0.125),
        dtypes=("float64",))]
TABLE["SGD"] = TABLE["SGD"] + [
    Row("SGD", "f32-exact-momentum", f"{F32_EXACT}: lr 2^-4, momentum 0.875, dampening "
        "0.25, L2 decay 2^-6.", dict(lr=2.0 ** -4, momentum=0.875, dampening=0.25,
                                     weight_decay=2.0 ** -6), dtypes=("float64",)),
    Row("SGD", "f32-exact-nesterov", f"{F32_EXACT}: Nesterov, lr 2^-4, momentum 0.875.",
        dict(lr=2.0 ** -4, momentum=0.875, nesterov=True), dtypes=("float64",))]

# The wrappers (npoptim.registry.WRAPPERS): each row wraps an optimizer (Row.wrapped); the case
# stores the wrapper's settings, the wrapped optimizer's hyperparameters (schema version 4,
# reference_results/README.md) and both states.
SGD_MOMENTUM = ("SGD", dict(lr=0.05, momentum=0.9))
TABLE["Lookahead"] = [
    Row("Lookahead", "sgd-momentum", "optax's k=5 and alpha=0.5 around SGD with momentum 0.9; "
        "12 steps: two synchronizations and two steps after the last.", {},
        wrapped=SGD_MOMENTUM, matches=("optax.lookahead 0.2.8 around optax.sgd",)),
    Row("Lookahead", "adam-reset-state", "k=3, alpha=0.3 around Adam, its state reset at each "
        "synchronization (Adam's step count starts again).",
        dict(k=3, alpha=0.3, reset_state=True), shapes=LAYERS, wrapped=("Adam", dict(lr=0.05)),
        matches=("optax.lookahead 0.2.8 (reset_state=True) around optax.adam",)),
]
TABLE["SAM"] = [
    Row("SAM", "sgd-momentum", "rho 0.1 around SGD with momentum 0.9 on the separable quartic "
        "(the case stores the objective, not gradients): one ascent per step.", dict(rho=0.1),
        shapes=((3, 5), (4,)), objective="separable-quartic", wrapped=SGD_MOMENTUM,
        matches=("optax.contrib.sam 0.2.8 (opaque mode, normalize + sgd(rho) adversary)",)),
    Row("SAM", "adam-two-ascents", "rho 0.2 and adversarial_steps=2 (two normalized ascents, "
        "each from the last perturbed point's gradient) around Adam.",
        dict(rho=0.2, adversarial_steps=2), shapes=((6,),), objective="separable-quartic",
        wrapped=("Adam", dict(lr=0.02)),
        matches=("optax.contrib.sam 0.2.8 (sync_period=3, opaque mode)",)),
    Row("SAM", "asam-per-parameter", "ASAM (adaptive, eta 0.01, eps 1e-16, rho 0.5: the "
        "paper's code) on the matrix, plain SAM on the vector (one flag per parameter, as the "
        "paper's code scales only weights), around SGD with momentum.",
        dict(rho=0.5, eps=1e-16, adaptive=(True, False), eta=0.01), shapes=((3, 5), (4,)),
        objective="separable-quartic", wrapped=SGD_MOMENTUM,
        matches=("SamsungLabs/ASAM asam.py ASAM ascent (weights only)",)),
]
TABLE["Mechanic"] = [
    Row("Mechanic", "sgd-momentum", "optax's defaults (6 betas, weight decay 1e-2, s_init 1e-6) "
        "around SGD with momentum 0.9 (base lr 1); float64 only: the tiny s_init moves the "
        "parameters by 1e-5 in 12 steps, float32's tolerance (the weight decay shows in the "
        "wrapper state m, v, r, s, not in the parameters).", {},
        wrapped=("SGD", dict(lr=1.0, momentum=0.9)), dtypes=("float64",),
        matches=("optax.contrib.mechanize 0.2.8 around optax.sgd",)),
    Row("Mechanic", "adam-num-betas-decay", "num_betas=3, weight decay 0.5 and s_init 0.05 "
        "around Adam (lr 0.1), two parameters (one global norm and inner product); each of "
        "the three moves float32 parameters by well over the tolerance.",
        dict(num_betas=3, weight_decay=0.5, s_init=0.05), shapes=LAYERS,
        wrapped=("Adam", dict(lr=0.1)), matches=("optax.contrib.mechanize 0.2.8 around "
                                                  "optax.adam",)),
]
