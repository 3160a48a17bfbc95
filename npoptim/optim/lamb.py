r"""LAMB (You et al., "Large Batch Optimization for Deep Learning", ICLR 2020), with a switch for
every published variant.

There is no single "LAMB": the published implementations differ by up to 1e-1 after three
steps (each is listed below with its source file). The default is the paper's Algorithm 2 (v5), which ``optax.lamb`` and TF-Addons
``LAMB`` implement; ``variant=`` names each other published form, and the switches below can be
set one by one (an explicit keyword overrides the variant's value). A variant also sets
``eps``, ``weight_decay`` and ``max_grad_norm`` to its implementation's defaults; ``lr`` and
``betas`` keep npoptim's defaults unless given.

For each parameter tensor :math:`w` (one "layer") with gradient :math:`g`, step count :math:`t`
(per parameter), :math:`b_1 = 1-\beta_1^t`, :math:`b_2 = 1-\beta_2^t` (both 1 without bias
correction; ``bias_correction="step_size"`` sets both to 1 and divides the step by
:math:`1-\beta_1^t` instead, outside the ratio, where it is not cancelled by the normalisation):

.. math::

    g &\leftarrow g / \max(1, G/G_{max})      &&\text{``max\_grad\_norm``: } G = \text{norm of
                                                  all gradients of all groups}\\
    g &\leftarrow g + \lambda w               &&\text{``weight\_decay\_mode="l2"''}\\
    m &\leftarrow \beta_1 m + \beta_3 g       &&\beta_3 = 1-\beta_1 \text{ (``grad\_averaging''),
                                                  else } 1\\
    v &\leftarrow \beta_2 v + (1-\beta_2)\,g^2\\
    w &\leftarrow w\,(1 - \gamma\lambda)      &&\text{``weight\_decay\_mode="decoupled"'', before
                                                  the norms}\\
    r &= \frac{m / b_1}{\sqrt{v}/\sqrt{b_2} + \epsilon}\\
    u &= r + \lambda w                        &&\text{``weight\_decay\_mode="in\_update"''
                                                  (default); else } u = r\\
    \rho &= \frac{\phi(\|w\|)}{\|x\| + \epsilon_t}, \quad x = u \text{ (``trust\_norm="update"'')
            or } g \text{ (``"grad"'')}, \quad \phi(z) = \min(\max(z, \phi_{lo}), \phi_{hi})\\
    \rho &\leftarrow 1 \text{ if } \|w\| = 0 \text{ or } \|x\| = 0; \quad
    \rho \leftarrow \min(\max(\rho, \rho_{lo}), \rho_{hi});\quad
    \rho \leftarrow \min(\rho, 1) \text{ (``trust\_clip'', LAMBC)}\\
    w &\leftarrow w - \gamma\,\rho\,u     &&\text{(} \gamma/(1-\beta_1^t) \text{ with
                                                  ``bias\_correction="step\_size"'')}

:math:`\rho = 1` (no layer adaptation) for a group with ``exclude_from_layer_adaptation``, and,
unless ``always_adapt``, for a group whose ``weight_decay`` is 0 (apex/timm). :math:`\|\cdot\|`
is the Frobenius norm of the whole tensor, :math:`\epsilon_t` is ``trust_eps``. Without the
optional parts (the default) this is Algorithm 2 with :math:`\phi` the identity; the paper
gives neither bounds for :math:`\phi` nor a zero-norm rule (the guard is the convention of
Google's TF code, kept by every implementation below).

========================  =====================================================================
``variant``               reproduces (repository, file)
========================  =====================================================================
``"paper_v5"`` (default)  paper v5 Algorithm 2; aliases ``"optax"`` (google-deepmind/optax
                          ``optax/_src/alias.py`` ``lamb``), ``"tfa"`` (tensorflow/addons
                          ``tensorflow_addons/optimizers/lamb.py``), ``"paper"``. ε=1e-6, λ=0.
``"apex"``                NVIDIA/apex ``apex/optimizers/fused_lamb.py`` ``FusedLAMB`` (NVLAMB) =
                          huggingface/pytorch-image-models ``timm/optim/lamb.py`` ``Lamb``
                          defaults (alias ``"timm"``): ``max_grad_norm=1.0`` global clipping,
                          ``always_adapt=False``, λ=0.01.
``"keras3"``              keras-team/keras ``keras/src/optimizers/lamb.py``: decay applied to
                          :math:`w` first, outside the ratio (``weight_decay_mode="decoupled"``),
                          ε=1e-7.
``"albert_v3"``           google-research/albert ``lamb_optimizer.py`` = paper v3: no bias
                          correction (alias ``"paper_v3"``).
``"kozistr"``             kozistr/pytorch_optimizer ``pytorch_optimizer/optimizer/lamb.py``
                          ``Lamb`` defaults: ``bias_correction="step_size"`` (step
                          γ/(1-β1^t), no correction in r), decoupled decay first, φ bounds
                          (0, 10), ``trust_eps`` = ε.
``"tutorial"``            the simplified form of tutorials: ratio :math:`\|w\|/\|g\|` of the
                          (raw) gradient, clamped to [0, 10] (``trust_norm="grad"``,
                          ``ratio_bounds=(0, 10)``), decoupled decay applied first.
========================  =====================================================================

Differences that remain, all outside the default path: apex and timm count steps per param
group, npoptim per parameter (they differ only when a parameter has no gradient in a step);
Keras decays with :math:`w - w\lambda\gamma` and timm with :math:`w - \gamma\lambda w`, npoptim
with :math:`w(1-\gamma\lambda)` (rounding only); apex ``max_grad_norm=0`` zeroes every gradient,
npoptim refuses 0 (``None`` disables clipping); timm rewrites ``p.grad`` when clipping, npoptim
never writes the gradients. Per-element rounding follows npoptim's Adam
(:math:`\sqrt{v}/\sqrt{b_2}`), within an ulp of optax/TF-Addons' :math:`\sqrt{v/b_2}`.

A step makes two passes over each parameter. The first updates the moments and, in the same
loop, sums :math:`\|w\|^2` and :math:`\|x\|^2` without storing :math:`u` (the decoupled decay
:math:`w(1-\gamma\lambda)` is computed there but not stored). The second recomputes :math:`u`
from the stored moments with the same rule (so the norm is the norm of exactly the vector
applied), then writes :math:`w` only. Norms are sums of squares in the parameter's dtype, in an
order fixed by the array's size alone (see :func:`sumsq_pair`): bit-identical whatever the
thread count and the parallel threshold. Dense gradients only.
"""
import math
import numbers

import numpy as np
from numba import prange

from npoptim.kernels.drivers import load_state, slice_states, store_state
from npoptim.kernels.jit import driver, kernel
from npoptim.kernels.parallel import parallel_threshold
from npoptim.optim.optimizer import Optimizer, check_betas, check_nonnegative, typed

# ------------------------------------------------------------------------ the reduction driver
#: Elements per block. Blocks are summed independently (on several threads above the parallel
#: threshold), then their sums are combined pairwise.
BLOCK = 1024
#: Partial sums ("lanes") per block: element ``i`` of a block adds into lane ``i % LANES``.
#: Independent lanes let LLVM vectorize the loop without reassociating anything (a single
#: running sum is a chain of dependent adds: latency-bound, and not vectorizable without
#: fastmath). ``BLOCK`` is a multiple of ``LANES``. 16 was the fastest of 16 to 256 measured
#: (AVX-512 machine, 10M elements; 64 lanes ran float64 sums at half the speed).
LANES = 16
#: Blocks per parallel task (each task reuses one lanes array).
_TASK_BLOCKS = 64
_DEPTH = 64  # levels of the pairwise tree: enough for 2**64 blocks


@kernel
def _fold_lanes(lanes):
    """Fold ``lanes`` (shape ``(2, LANES)``) into column 0 by halving: lane ``k`` takes lane
    ``k + w`` for ``w = LANES/2, LANES/4, ..., 1`` (a fixed tree)."""
    width = LANES // 2
    while width > 0:
        for k in range(width):
            lanes[0, k] += lanes[0, k + width]
            lanes[1, k] += lanes[1, k + width]
        width //= 2


@kernel
def _combine_blocks(sums):
    """``(sum of sums[:, 0], sum of sums[:, 1])``, the block sums combined pairwise.

    The blocks are combined as a binary counter combines carries: a tree fixed by the number
    of blocks alone, then the remaining partial sums from the last to the first.
    """
    partial = np.zeros((_DEPTH, 2), sums.dtype)
    level = np.zeros(_DEPTH, np.int64)
    top = 0
    for block in range(sums.shape[0]):
        partial[top, 0] = sums[block, 0]
        partial[top, 1] = sums[block, 1]
        level[top] = 0
        top += 1
        while top > 1 and level[top - 1] == level[top - 2]:
            partial[top - 2, 0] += partial[top - 1, 0]
            partial[top - 2, 1] += partial[top - 1, 1]
            level[top - 2] += 1
            top -= 1
    last = max(top - 1, 0)  # no block gives the zeros of row 0
    sum_a = partial[last, 0]
    sum_b = partial[last, 1]
    for k in range(top - 2, -1, -1):
        sum_a = partial[k, 0] + sum_a
        sum_b = partial[k, 1] + sum_b
    return sum_a, sum_b


@driver
def _sum_blocks(rule, param, grad, states, hyper, sums, first, last):
    """``sums[block] = (sum a**2, sum b**2)`` over the blocks ``first .. last - 1``.

    In a row of up to LANES elements, element k goes to lane k: the inner loop has no
    dependency between iterations, so it vectorizes (through the 1-d views lanes_a and
    lanes_b: indexing lanes[0, k] there was not vectorized; a row count that is not a
    compile-time constant keeps LLVM from unrolling the loop fully instead of vectorizing it).
    """
    n = param.size
    lanes = np.empty((2, LANES), param.dtype)
    lanes_a, lanes_b = lanes[0], lanes[1]
    for block in range(first, last):
        for k in range(LANES):
            lanes_a[k] = 0
            lanes_b[k] = 0
        stop = min(n, (block + 1) * BLOCK)
        for row in range(block * BLOCK, stop, LANES):
            count = min(LANES, stop - row)
            p = param[row:row + count]
            g = grad[row:row + count]
            s = slice_states(states, row, row + count)
            for k in range(count):
                values, a, b = rule(p[k], g[k], load_state(s, k), hyper)
                store_state(s, k, values)
                lanes_a[k] += a * a
                lanes_b[k] += b * b
        _fold_lanes(lanes)
        sums[block, 0] = lanes[0, 0]
        sums[block, 1] = lanes[1, 0]


@driver(parallel=True)
def sumsq_pair(rule, param, grad, states, hyper):
    """Apply ``rule`` to every element, store the new states, return ``(sum a**2, sum b**2)``.

    ``rule(p, g, s, h) -> (new_s, a, b)`` follows the signature of an update rule (see
    :mod:`npoptim.kernels.drivers`) but returns the two values to square instead of a new
    parameter: ``param`` and ``grad`` are only read (``new_s`` is ``()`` for a pure reduction).

    The summation order depends on the array's size alone, never on the thread count:

    1. the array is cut into blocks of :data:`BLOCK` consecutive elements (the last may be
       shorter);
    2. in a block, element ``i`` (counted from the block's start) adds its square into lane
       ``i % LANES``, lanes starting at 0 and taking their elements in increasing order;
    3. the lanes are folded by halving (:func:`_fold_lanes`) into the block's sum;
    4. the block sums are combined pairwise (:func:`_combine_blocks`).

    Sums are in the parameter's dtype. Above the parallel threshold, tasks of
    ``_TASK_BLOCKS`` blocks run on several threads; each block's sum is the same either way.
    """
    n = param.size
    # (no array expressions here, such as ``a[:] = 0`` or ``np.zeros``: in a kernel compiled
    # with parallel=True, Numba would turn each into a parallel region of its own)
    sums = np.empty(((n + BLOCK - 1) // BLOCK, 2), param.dtype)
    if n >= parallel_threshold():
        tasks = (sums.shape[0] + _TASK_BLOCKS - 1) // _TASK_BLOCKS
        for task in prange(tasks):
            _sum_blocks(rule, param, grad, states, hyper, sums, task * _TASK_BLOCKS,
                        min((task + 1) * _TASK_BLOCKS, sums.shape[0]))
    else:
        _sum_blocks(rule, param, grad, states, hyper, sums, 0, sums.shape[0])
    return _combine_blocks(sums)


@driver(parallel=True)
def apply_from_states(rule, param, states, hyper):
    """``param[i] = rule(param[i], s, hyper)`` with ``s = (states[0][i], ...)``, read only.

    (``apply_dense`` would write every state back, unchanged: two more streams to memory.)
    """
    n = param.size
    if n >= parallel_threshold():
        for i in prange(n):
            param[i] = rule(param[i], load_state(states, i), hyper)
    else:
        for i in range(n):
            param[i] = rule(param[i], load_state(states, i), hyper)


@kernel
def grad_term(p, g, s, h):
    """The gradient and ``h[0]`` (a typed zero): :func:`sumsq_pair` of it is ``(‖g‖², 0)``."""
    return (), g, h[0]


@kernel
def grad_sumsq(grad, zero):
    """``‖grad‖²`` in the gradient's dtype (deterministic, see :func:`sumsq_pair`).

    ``zero`` is ``(0,)`` in that dtype (rules take no literals).
    """
    return sumsq_pair(grad_term, grad, grad, (), zero)[0]


# -------------------------------------------------------------------------------- the rules
# ``h`` for every LAMB rule (built by LAMB._hyper):
#   0 clip divisor   1 l2 coefficient   2 beta1   3 beta3 (coefficient of g in m)   4 beta2
#   5 1-beta2   6 decoupled decay factor   7 b1   8 sqrt(b2)   9 eps   10 lambda in u
#   11 trust_norm is "grad" (or the layer does not adapt)   12 -lr * ratio (the update pass)


@kernel
def lamb_moments_rule(p, g, s, h):
    """Pass 1: clipping, L2 decay, the two moments; ``s = (exp_avg, exp_avg_sq)``.

    Returns the new moments and ``(w, x)``, whose norms make the trust ratio: ``w`` after the
    decoupled decay (not stored: pass 2 applies it again), ``x`` is ``u`` or the clipped ``g``.
    """
    g = g / h[0]
    clipped = g
    if h[1] != 0:
        g = g + h[1] * p
    m = h[2] * s[0] + h[3] * g
    v = h[4] * s[1] + h[5] * g * g
    w = p * h[6]
    if h[11] != 0:
        return (m, v), w, clipped
    return (m, v), w, lamb_direction(w, m, v, h)


@kernel
def lamb_direction(p, m, v, h):
    """The update direction ``u = m/b1 / (sqrt(v)/sqrt(b2) + eps) (+ lambda w)``."""
    u = (m / h[7]) / (math.sqrt(v) / h[8] + h[9])
    if h[10] != 0:
        u = u + h[10] * p
    return u


@kernel
def lamb_update_rule(p, s, h):
    """Pass 2: the decoupled decay, then ``w - lr * ratio * u``; the moments are only read."""
    w = p * h[6]
    return w + h[12] * lamb_direction(w, s[0], s[1], h)


@kernel
def _lamb_moments_norms(param, grad, states, hyper):
    return sumsq_pair(lamb_moments_rule, param, grad, states, hyper)


@kernel
def _lamb_update(param, states, hyper):
    apply_from_states(lamb_update_rule, param, states, hyper)


# ----------------------------------------------------------------------------- the variants
class _VariantDefault:
    """The default of a switch: "the value the chosen ``variant`` gives it"."""

    def __repr__(self):
        return "<variant's value>"


VARIANT_DEFAULT = _VariantDefault()
_SAME_AS_EPS = "same as eps"

_PAPER_V5 = dict(eps=1e-6, weight_decay=0.0, bias_correction=True, grad_averaging=True,
                 weight_decay_mode="in_update", always_adapt=True, trust_norm="update",
                 phi_bounds=None, ratio_bounds=None, trust_clip=False, trust_eps=0.0,
                 max_grad_norm=None)

#: The switches (and eps, weight_decay, max_grad_norm defaults) each variant sets.
VARIANTS = {
    "paper_v5": _PAPER_V5,
    "apex": dict(_PAPER_V5, weight_decay=0.01, always_adapt=False, max_grad_norm=1.0),
    "keras3": dict(_PAPER_V5, eps=1e-7, weight_decay_mode="decoupled"),
    "albert_v3": dict(_PAPER_V5, bias_correction=False),
    "kozistr": dict(_PAPER_V5, bias_correction="step_size", weight_decay_mode="decoupled",
                    phi_bounds=(0.0, 10.0), trust_eps=_SAME_AS_EPS),
    "tutorial": dict(_PAPER_V5, weight_decay_mode="decoupled", trust_norm="grad",
                     ratio_bounds=(0.0, 10.0)),
}
#: Other names of the variants.
ALIASES = {"paper": "paper_v5", "optax": "paper_v5", "tfa": "paper_v5", "timm": "apex",
           "paper_v3": "albert_v3", "albert": "albert_v3"}

_WEIGHT_DECAY_MODES = ("in_update", "decoupled", "l2")
_TRUST_NORMS = ("update", "grad")


def resolve_variant(variants, aliases, variant, given):
    """The switches of ``variant`` with every explicitly ``given`` one overriding it."""
    if not isinstance(variant, str) or aliases.get(variant, variant) not in variants:
        names = sorted(set(variants) | set(aliases))
        raise ValueError(f"unknown variant {variant!r}; the variants are {', '.join(names)}")
    canonical = aliases.get(variant, variant)
    values = dict(variants[canonical])
    values.update({k: v for k, v in given.items() if v is not VARIANT_DEFAULT})
    return canonical, values


def check_no_variant(group):
    """A param group cannot choose a variant: that would silently do nothing."""
    if "variant" in group:
        raise ValueError("variant is chosen for the whole optimizer (it sets the defaults); "
                         "a param group overrides the individual switches instead")


def check_flag(group, *names):
    """``ValueError`` unless each named option is a bool."""
    for name in names:
        if not isinstance(group[name], (bool, np.bool_)):
            raise ValueError(f"{name} must be True or False, got {group[name]!r}")


def check_choice(group, name, choices):
    """``ValueError`` unless the option is one of ``choices`` (strings)."""
    if not isinstance(group[name], str) or group[name] not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got "
                         f"{group[name]!r}")


def check_bounds(group, name):
    """``None`` or a pair ``(lo, hi)`` with ``0 <= lo <= hi`` (``hi`` may be ``inf``)."""
    bounds = group[name]
    if bounds is None:
        return
    if (not isinstance(bounds, (tuple, list)) or len(bounds) != 2
            or not all(is_real(b) for b in bounds)
            or not (0.0 <= bounds[0] <= bounds[1]) or math.isinf(bounds[0])):
        raise ValueError(f"{name} must be None or a pair (lo, hi) with 0 <= lo <= hi, got "
                         f"{bounds!r}")


def is_real(value):
    """A real number that is not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _clamp(value, bounds):
    """``value`` clamped to ``bounds`` (a pair or None), in ``value``'s dtype."""
    if bounds is None:
        return value
    kind = type(value)
    return min(max(value, kind(bounds[0])), kind(bounds[1]))


class LAMB(Optimizer):
    """LAMB; ``variant`` picks a published form, keywords override its switches.

    See the module docstring for the algorithm and the variants (:data:`VARIANTS`).

    * ``lr``, ``betas``, ``eps``, ``weight_decay``: as Adam's (``weight_decay`` is λ).
    * ``bias_correction``: ``True``, ``False`` or ``"step_size"`` (no correction in r, the
      step divided by ``1 - beta1**t``: kozistr's form).
    * ``grad_averaging``: m takes ``(1-beta1) g`` (True) or ``g``.
    * ``weight_decay_mode``: ``"in_update"`` (λw added to u, inside the ratio), ``"decoupled"``
      (w scaled by ``1 - lr λ`` before the norms, outside the ratio) or ``"l2"`` (λw added to
      the gradient that feeds m and v; apex ``adam_w_mode=False``).
    * ``always_adapt``: if False, a group with ``weight_decay == 0`` gets ratio 1.
    * ``exclude_from_layer_adaptation``: ratio 1 for the group (TF/ALBERT's exclusion list,
      expressed as a param group).
    * ``trust_norm``: the ratio's denominator, ``‖u‖`` (``"update"``) or ``‖g‖`` (``"grad"``).
    * ``phi_bounds``: None or ``(lo, hi)`` clamping ``‖w‖`` in the numerator (the paper's φ).
    * ``ratio_bounds``: None or ``(lo, hi)`` clamping the ratio; ``trust_clip``: ratio ≤ 1.
    * ``trust_eps``: added to the denominator norm (0; kozistr: eps).
    * ``max_grad_norm``: None, or the threshold of the global gradient norm (all groups
      together, so it is set for the whole optimizer, not per group).
    """

    sparse_kind = "dense-only"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=VARIANT_DEFAULT,
                 weight_decay=VARIANT_DEFAULT, *, variant="paper_v5",
                 bias_correction=VARIANT_DEFAULT, grad_averaging=VARIANT_DEFAULT,
                 weight_decay_mode=VARIANT_DEFAULT, always_adapt=VARIANT_DEFAULT,
                 exclude_from_layer_adaptation=False, trust_norm=VARIANT_DEFAULT,
                 phi_bounds=VARIANT_DEFAULT, ratio_bounds=VARIANT_DEFAULT,
                 trust_clip=VARIANT_DEFAULT, trust_eps=VARIANT_DEFAULT,
                 max_grad_norm=VARIANT_DEFAULT):
        self.variant, switches = resolve_variant(
            VARIANTS, ALIASES, variant,
            dict(eps=eps, weight_decay=weight_decay, bias_correction=bias_correction,
                 grad_averaging=grad_averaging, weight_decay_mode=weight_decay_mode,
                 always_adapt=always_adapt, trust_norm=trust_norm, phi_bounds=phi_bounds,
                 ratio_bounds=ratio_bounds, trust_clip=trust_clip, trust_eps=trust_eps,
                 max_grad_norm=max_grad_norm))
        if switches["trust_eps"] == _SAME_AS_EPS:
            switches["trust_eps"] = switches["eps"]
        defaults = dict(lr=lr, betas=betas,
                        exclude_from_layer_adaptation=exclude_from_layer_adaptation,
                        **switches)
        self._clip_divisor = 1.0
        super().__init__(params, defaults)

    # ------------------------------------------------------------------------ validation
    def _check_group(self, group):
        check_no_variant(group)
        check_nonnegative(group, "lr", "eps", "weight_decay")
        check_betas(group["betas"])
        correction = group["bias_correction"]
        if not (isinstance(correction, (bool, np.bool_))
                or (isinstance(correction, str) and correction == "step_size")):
            raise ValueError("bias_correction must be True, False or 'step_size', got "
                             f"{group['bias_correction']!r}")
        check_flag(group, "grad_averaging", "always_adapt", "exclude_from_layer_adaptation",
                   "trust_clip")
        check_choice(group, "weight_decay_mode", _WEIGHT_DECAY_MODES)
        check_choice(group, "trust_norm", _TRUST_NORMS)
        check_bounds(group, "phi_bounds")
        check_bounds(group, "ratio_bounds")
        check_nonnegative(group, "trust_eps", label="trust_eps value")
        max_norm = group["max_grad_norm"]
        if max_norm is not None and (not is_real(max_norm) or not 0.0 < max_norm < math.inf):
            raise ValueError(f"max_grad_norm must be None (no clipping) or a positive finite "
                             f"number, got {max_norm!r}")
        if max_norm != self.defaults["max_grad_norm"]:
            raise ValueError("max_grad_norm clips the norm of all gradients together, so it is "
                             "one value for the whole optimizer: set it in the constructor, "
                             f"not per group (got {max_norm!r}, the optimizer has "
                             f"{self.defaults['max_grad_norm']!r})")

    def _state_names(self, group):
        return ("exp_avg", "exp_avg_sq")

    # ----------------------------------------------------------------------------- step
    def _apply(self, prepared):
        """Compute the global gradient-norm clipping divisor, then update every parameter."""
        max_norm = self.defaults["max_grad_norm"]
        self._clip_divisor = 1.0
        if max_norm is not None:
            total = 0.0
            for _, _, param, grad in prepared:  # fixed order: param-group order
                total += float(grad_sumsq(grad, typed(grad, 0.0)))
            self._clip_divisor = max(math.sqrt(total) / max_norm, 1.0)
        super()._apply(prepared)

    def _adapts(self, group):
        return not group["exclude_from_layer_adaptation"] and (
            group["always_adapt"] or group["weight_decay"] != 0)

    def _hyper(self, param, state, group, neg_step=0.0):
        step = state["step"]
        lr, wd = group["lr"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        # True: b1 and b2 inside r; False or "step_size": none inside r
        correct = not isinstance(group["bias_correction"], str) and bool(group["bias_correction"])
        mode = group["weight_decay_mode"]
        return typed(param,
                     self._clip_divisor,
                     wd if mode == "l2" else 0.0,
                     beta1,
                     1 - beta1 if group["grad_averaging"] else 1.0,
                     beta2,
                     1 - beta2,
                     1 - lr * wd if mode == "decoupled" else 1.0,
                     1 - beta1 ** step if correct else 1.0,
                     math.sqrt(1 - beta2 ** step) if correct else 1.0,
                     group["eps"],
                     wd if mode == "in_update" else 0.0,
                     # a layer that does not adapt asks for the cheap norms (unused)
                     group["trust_norm"] == "grad" or not self._adapts(group),
                     neg_step)

    def _update(self, param, grad, state, group):
        state["step"] += 1
        states = self._flat_states(state, group)
        w_sq, x_sq = _lamb_moments_norms(param, grad, states, self._hyper(param, state, group))
        ratio = 1.0
        if self._adapts(group):
            ratio = float(trust_ratio(param.dtype, w_sq, x_sq, group))
        lr = group["lr"]
        if isinstance(group["bias_correction"], str):  # "step_size"
            lr = lr / (1 - group["betas"][0] ** state["step"])
        _lamb_update(param, states, self._hyper(param, state, group, -(lr * ratio)))


def trust_ratio(dtype, w_sq, x_sq, group):
    """The layer's ratio from ``‖w‖²`` and ``‖x‖²``, in ``dtype`` (see the module docstring)."""
    kind = np.dtype(dtype).type
    w_norm, x_norm = np.sqrt(kind(w_sq)), np.sqrt(kind(x_sq))
    if not (w_norm > 0 and x_norm > 0):
        ratio = kind(1)
    else:
        ratio = _clamp(w_norm, group["phi_bounds"]) / (x_norm + kind(group["trust_eps"]))
    ratio = _clamp(ratio, group["ratio_bounds"])
    if group["trust_clip"]:
        ratio = min(ratio, kind(1))
    return ratio
