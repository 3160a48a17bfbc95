r"""PSGD Kron (Xi-Lin Li, "Preconditioned Stochastic Gradient Descent", arXiv 1512.04202, and
his Kronecker-factored preconditioner; Evan Walters' kron_torch): momentum preconditioned by
:math:`P = Q^\top Q`, :math:`Q = Q_1 \otimes \dots \otimes Q_k` one factor per side of the
(merged) parameter, each upper triangular (:math:`d_i \times d_i`) or diagonal (a vector: a
side larger than ``max_size_triangular``, of size 1, a tensor with fewer than
``min_ndim_triangular`` sides, or one ``memory_save_mode`` picks). kron-torch 0.3.3's ``Kron``
by default, pytorch_optimizer 4.1.0's ``Kron`` as ``variant="pytorch_optimizer"``,
heavyball 3.2.1's ``PSGDKron`` as ``variant="heavyball"``.

:math:`X \times_i M` applies :math:`M` along side :math:`i`; :math:`X_{(i)}` is the unfolding
(:math:`d_i` rows). Each factor starts as :math:`s^{1/k} I` (or :math:`s^{1/k}\mathbf 1`),
:math:`s` the ``precond_init_scale``. Step :math:`t` (the optimizer's steps, 1-based), with
gradient :math:`G`, momentum decay :math:`\beta` (``b1``), learning rate :math:`\gamma`,
preconditioner step :math:`\eta` (``precond_lr``) and weight decay :math:`\lambda`:

.. math::

    m_t &= \beta m_{t-1} + (1-\beta) G                                     &&\\
    \hat m &= m_t / (1-\beta^t)                                            &&\quad (1)\\
    V &\sim N(0, 1)\ \text{(at a preconditioner update)}                  &&\\
    H &= \hat m + \sqrt{\epsilon_{32}}\,\overline{|\hat m|}\, V\ \text{(kron\_torch)}
                                                                        &&\quad (2)\\
    A &= H \times_1 Q_1 \cdots \times_k Q_k                                &&\\
    B &= V \times_1 Q_1^{-\top} \cdots \times_k Q_k^{-\top}                &&\quad (3)\\
    S_i &= A_{(i)}A_{(i)}^\top + B_{(i)}B_{(i)}^\top                       &&\\
    Q_i &\leftarrow Q_i - \frac{\eta}{\lVert S_i\rVert}
        \,\mathrm{triu}\big(A_{(i)}A_{(i)}^\top - B_{(i)}B_{(i)}^\top\big)\, Q_i  &&\quad (4)\\
    U &= \hat m \times_1 Q_1^\top Q_1 \cdots \times_k Q_k^\top Q_k                 &&\\
    U &\leftarrow U \min\!\big(1, 1.1 / (\mathrm{RMS}(U) + \epsilon_c)\big)         &&\quad (5)\\
    \theta &\leftarrow \theta - \gamma\,(U + \lambda\theta)
        \quad(\lambda\theta\ \text{for} \ge 2\ \text{sides only})                &&\quad (6)

A diagonal factor takes (4) elementwise: :math:`q \leftarrow q - \eta\, q \odot (a - b) /
\lVert a + b\rVert_\infty` with :math:`a, b` the sums of squares of :math:`A, B` over the other
sides. The norm of a triangular factor's step is a cheap lower bound of the spectral norm
of :math:`S = A_{(i)}A_{(i)}^\top + B_{(i)}B_{(i)}^\top`: :math:`x` its column of largest
norm (of :math:`S/\max|S|`), :math:`\lVert S\,(x^\top S)/\lVert x^\top S\rVert\rVert`.
:math:`B` is :math:`V` solved against the triangular factors (a fixed-order substitution
here, :func:`solve_upper_right`; torch's ``solve_triangular``). With ``kron_torch`` the
damped :math:`H` of (2) is the momentum then preconditioned in (5) (its ``G +=`` acts on the
debiased momentum in place) when ``momentum_into_precond_update``; else :math:`H = G`
(damped too, not reused).

**When the preconditioner is updated** (both sources, deterministic, not a random draw): the
probability :math:`p_n = \mathrm{clamp}(p_{max} e^{-d(n - n_0)}, p_{min}, p_{max})` of step
:math:`n = 0, 1, \dots` (``preconditioner_update_probability``: a number, or the tuple
``(max_prob, min_prob, decay, flat_start)``; None: ``(1.0, 0.03, 0.001, 500)``), computed in
float32 as the sources do; a counter goes up by one each step and the update runs when
counter :math:`\ge 1/p_n`, which resets it. **Balancing**: when the preconditioner is
updated and a uniform draw is below ``balance_prob`` (0.01), the factors of a parameter with
>= 2 sides are first rescaled to the same max-abs norm (their geometric mean; the product
:math:`Q` unchanged).

**Randomness, reproducible and explicit.** By default the probe :math:`V` of parameter
``index`` at step ``t`` is :func:`npoptim.kernels.counter_stream.standard_normal` keyed
``(seed, index, t)`` and the balancing draw is
:func:`npoptim.kernels.counter_stream.uniform` keyed ``(seed, BALANCE_STREAM, t)``. The
sources draw :math:`V` with ``torch.randn_like`` and the balancing draw with Python's
``random.Random(42)`` (kron_torch, one per optimizer) or ``np.random.random()``
(pytorch_optimizer). ``step(grads, probes=[...], update_preconditioner=..., balance=...)``
gives any of them for one step instead (the cross-checks feed torch's draws in).

Where the implementations differ (switches, set by the variant):

* kron-torch 0.3.3 ``kron_torch/kron.py`` (``Kron``, the default ``variant="kron_torch"``):
  ``merge_dims=True`` (a tensor of > 2 sides is viewed as the matrix
  ``[prod(s[:-1]), s[-1]]`` or ``[s[0], prod(s[1:])]``, the first when
  ``s[-1] - prod(s[:-1]) <= prod(s[1:]) - s[0]``), the damping of (2)
  (``probe_damping=True``), the norms floored (``norm_floor_mode="max"``: ``clamp(min=tiny)``,
  the dtype's smallest normal), the lower bound from the columns only
  (``lower_bound="columns"``), balancing by :math:`\exp(\mathrm{mean}\log)`
  (``balance_mean="log"``), :math:`\epsilon_c = 10^{-12}` (``clip_eps``), ``lr=3e-4``.
* pytorch_optimizer 4.1.0 ``pytorch_optimizer/optimizer/psgd.py`` (``Kron``, with
  ``norm_lower_bound`` of ``optimizer/utils/psgd.py``): no merge (``merge_dims=False``: a
  3-D parameter has three factors), no damping, the floor added (``norm_floor_mode="added"``,
  ``torch.finfo(torch.bfloat16).tiny`` = 2**-126, and the diagonal step ``(d q)/(n + f)``
  rather than ``d (q / max(n, f))``), the bound from the larger of the largest column and row
  (``lower_bound="rows_or_columns"``), balancing by ``prod ** (1/k)``
  (``balance_mean="prod"``), :math:`\epsilon_c = 10^{-6}`, ``lr=1e-3``; its
  ``weight_decouple=False`` adds :math:`\lambda\theta` to :math:`G` before (1) (same here).
* HomebrewML/HeavyBall 3.2.1 ``PSGDKron`` (``heavyball/__init__.py``; the chain
  ``exp_avg`` then ``update_by_psgd`` of ``heavyball/chainable.py``, ``_init_psgd_kron``,
  ``_update_psgd_precond``; in ``heavyball/utils.py`` ``dampen_grad``,
  ``psgd_update_precond``, ``psgd_calc_A_and_conjB``, ``max_eigenvalue_spd``,
  ``_update_lb``, ``psgd_balance_Q``, ``precond_update_prob_schedule``,
  ``psgd_should_update``, ``update_param_``): ``variant="heavyball"``, each difference a
  switch (kron_torch's and pytorch_optimizer's value in brackets): the momentum kept
  debiased, :math:`\hat m` by the decay :math:`1 - (1-\beta)/(1-\beta^t)`
  (``debiased_betas=True`` [False]; the same :math:`\hat m`, rounding apart); the damping
  elementwise, :math:`H = \hat m + (10^{-9} + \epsilon_{32}|\hat m|)\,V`, not reused as
  the momentum (``damping_mode="elementwise"`` ["mean"]); a triangular factor's step
  normalized by two power iterations for the largest eigenvalue of :math:`S`
  (``lower_bound="power_iteration"``, :func:`power_iteration_bound`), and every factor's
  norm by a running maximum :math:`\ell \leftarrow \max(\ell_{new}, r + (\ell_{new} -
  r)(1-\beta_\ell))`, :math:`r` the last :math:`\ell` (0 at first; the state
  ``lower_bound{i}``; ``lower_bound_beta=0.9`` [0]); the factors balanced at every
  preconditioner update (``balance_schedule="every_update"`` ["random"]); the update
  decision the integer part of the running Python-float sum of :math:`p_n` going up, with
  :math:`p_n = \max(p_{min}, p_{max} d^{\max(n - n_0, 0)})` at step :math:`n = 1, 2, ...`
  (the same tuple ``(max_prob, min_prob, decay, flat_start)`` read as heavyball reads it;
  None: ``(1.0, 0.03, 0.999, 1000)``; ``update_schedule="cumulative"`` ["counter"]); the
  decay :math:`\theta(1-\gamma\lambda) - \gamma U` of every parameter, vectors and
  scalars too (``decay_vectors=True`` [False]); no merge (``merge_dims=False``: heavyball's
  ``merge_dims=True`` uses its SOAP ``dim_merger``, not taken here). Not taken either:
  its default update clip ``trust_region_clip_`` (an elementwise
  :math:`\pm 2`-bounded mix of tanh and log1p, transcendental functions with no fixed-order
  kernel here): pass ``clip_update=False``, heavyball's ``update_clipping=None``; its
  ``precond_init_scale=None`` (a scale from the first gradient): give the scale;
  ``q_dtype``/``storage_dtype="float32"`` for float64 parameters (npoptim keeps the
  parameter's dtype: theirs ``"float64"``; its solve runs in ``q_dtype``, so
  ``solve_dtype="param"``); ``cached``, ``delayed``, ``mars``, ``caution``,
  ``precond_grad_accum``, Hessian-vector products. It draws :math:`V` with
  ``torch.randn_like`` on the parameter with a leading axis of 1 (``probes=``). heavyball
  computes :math:`\beta^t` of the momentum's debiasing (and the lr's ``lr * step / step``)
  as a Python float times an int64 tensor, in torch's default dtype float32: measured
  against that over tests/test_kron.py's 24 steps, 7.4e-8 of the parameters' scale; with
  torch's default dtype float64, 7.4e-16 (factors 3.9e-16; the test allows 1e-12).
* Both solve :math:`B` in float32 (``.float()`` / ``.to(torch.float32)``) whatever the
  dtype: ``solve_dtype="float32"`` (default) does too, ``"param"`` solves in the parameter's
  dtype (the cross-checks patch the sources' solve to float64 for that). Both keep ``Q`` in
  float32 by default (``precond_dtype``); npoptim keeps it in the parameter's dtype (the
  tests pass ``precond_dtype=torch.float64``). Measured over tests/test_kron.py's 24 steps
  (1-D, 2-D, 3-D, a diagonal factor, thinned updates, two balancings), relative to each
  tensor's scale: with both solves in float64, 4.9e-16 (kron_torch) and 3.2e-16
  (pytorch_optimizer); with both in float32, 2.4e-8 and 3.0e-8 (two float32 substitutions
  in different orders; the test allows 1e-6).
* distributed-kron 2.0.0 ``distributed_kron/kron.py`` (Evan Walters' optax form,
  ``distributed_kron.kron``: ``scale_by_kron``, then optax's ``add_decayed_weights`` and
  ``scale_by_learning_rate``) is npoptim's ``flavor="optax"`` (the switches of its table,
  :mod:`npoptim.frameworks.optax`): the diagonal sides decided on the parameter's own sides,
  which are then merged into runs of consecutive sides by its ``dim2loss`` around
  ``target_merged_dim_size`` 4096 (``merge_rule="small_dims"``,
  :func:`npoptim.optim.psgd.small_dims_sides`: a small matrix becomes one side, its one
  factor triangular unless all its sides were diagonal, whatever its size); the damping of
  (2) with :math:`\sqrt{\epsilon_{32}}` taken in float32 (``damping_dtype="float32"``) fits the
  factors, but (5) preconditions the undamped :math:`\hat m` (``precondition_damped=False``);
  the norm plus the factors' dtype's tiny (``norm_floor_mode="added"``; npoptim adds 2**-126,
  its value in distributed-kron's float32 factors: with float64 factors its 2**-1022 and
  2**-126 change a norm only below 2**-73); the bound from the columns; balancing in float32,
  of every parameter's factors, one factor too (``balance_mean="log_float32"``); the clip
  :math:`U / \max(1, \mathrm{RMS}(U)/1.1)` (``clip_eps=0``); solves in the factors' dtype
  (``solve_dtype="param"``); :math:`\lambda\theta` added to :math:`U` of every parameter
  (``decay_vectors=True``); the schedule's :math:`n` the count including the step
  (``schedule_from_one=True``); the probes and the balancing draw (:math:`\le` 0.01) from
  ``jax.random`` as it derives them, key 42 folded with the step count
  (``probe_stream="jax"``, ``seed=42``: :func:`jax_stream_keys`). Its default
  ``partition_grads_into_blocks=True`` (each side past 256 split into blocks with a factor
  each, and every side zero-padded to a multiple of 256, the padding fitted to the probe: a
  4 x 3 parameter gets a 256 x 256 factor) is not implemented; the flavor is its
  ``partition_grads_into_blocks=False``. Measured over tests/test_kron_distributed.py's 24
  steps in float64 (merged and unmerged sides, a diagonal factor, thinned updates, two forced
  balancings): 3.9e-16 of each tensor's scale.

Written in plain NumPy in the parameter's dtype; products by
:func:`npoptim.kernels.reduction.matmul_of` and sums in index order
(:func:`npoptim.optim.psgd.ordered_sum`; the pieces PSGD-QUAD shares are in
:mod:`npoptim.optim.psgd`):
no BLAS, the same bits on every CPU. Dense gradients only. A 0-D parameter is handled as
one element of a vector.
"""
import math
from typing import NamedTuple

import numpy as np

from npoptim.kernels import jax_random
from npoptim.kernels.counter_stream import uniform
from npoptim.kernels.jit import kernel
from npoptim.kernels.reduction import matmul_of
from npoptim.optim.noise import check_noise, check_seed
from npoptim.optim.optimizer import Optimizer
from npoptim.optim.options import (VARIANT_DEFAULT, check_choice, check_flag, check_no_variant,
                                   check_nonnegative, flavored, resolve_variant)
# the pieces PSGD-QUAD shares (npoptim/optim/psgd.py), imported by their old names here
from npoptim.optim.psgd import (along, balance_factors, diagonal_sides, gram,  # noqa: F401
                                lower_bound, merged_shape, norm2, ordered_sum, probe_for,
                                scaled_along, small_dims_sides, sum_of_squares_along)

#: The switches heavyball's form added, at the value of the forms before it (a variant that
#: does not name one takes this value).
NOT_HEAVYBALL = dict(debiased_betas=False, damping_mode="mean", lower_bound_beta=0.0,
                     balance_schedule="random", update_schedule="counter",
                     decay_vectors=False)
#: The published forms (:func:`npoptim.optim.options.resolve_variant`).
VARIANTS = {
    "kron_torch": dict(merge_dims=True, probe_damping=True, norm_floor_mode="max",
                       lower_bound="columns", balance_mean="log", clip_eps=1e-12,
                       **NOT_HEAVYBALL),
    "pytorch_optimizer": dict(merge_dims=False, probe_damping=False, norm_floor_mode="added",
                              lower_bound="rows_or_columns", balance_mean="prod",
                              clip_eps=1e-6, **NOT_HEAVYBALL),
    "heavyball": dict(merge_dims=False, probe_damping=True, norm_floor_mode="max",
                      lower_bound="power_iteration", balance_mean="log", clip_eps=1e-12,
                      debiased_betas=True, damping_mode="elementwise", lower_bound_beta=0.9,
                      balance_schedule="every_update", update_schedule="cumulative",
                      decay_vectors=True),
}
ALIASES = {"evanatyourservice": "kron_torch", "kozistr": "pytorch_optimizer",
           "homebrewml": "heavyball"}
MEMORY_SAVE_MODES = (None, "smart_one_diag", "one_diag", "all_diag")
#: The schedule of both sources' ``precond_update_prob_schedule()``.
DEFAULT_SCHEDULE = (1.0, 0.03, 0.001, 500)
#: The counter stream's ``stream`` key of the balancing draws (parameter indices are below).
BALANCE_STREAM = 2 ** 64 - 1
#: pytorch_optimizer's added floor: ``torch.finfo(torch.bfloat16).tiny``.
BFLOAT16_TINY = 2.0 ** -126
#: ``torch.finfo(torch.float32).eps``: its square root scales the damping of (2).
FLOAT32_EPS = 2.0 ** -23
#: heavyball's ``dampening`` (PSGDKron's default): the constant of its elementwise damping.
HEAVYBALL_DAMPENING = 1e-9
#: heavyball's ``precond_update_power_iterations`` (default): the power iterations of its
#: spectral-norm estimate (``lower_bound="power_iteration"``).
HEAVYBALL_POWER_ITERATIONS = 2
#: heavyball's ``precond_update_prob_schedule()``: ``(max_prob, min_prob, decay, flat_start)``
#: of ``max(min_prob, max_prob * decay ** max(n - flat_start, 0))``.
HEAVYBALL_SCHEDULE = (1.0, 0.03, 0.999, 1000)


class KronHyper(NamedTuple):
    """The hyperparameters of one Kron update, as :func:`kron_update` reads them."""
    beta: float            # b1, the momentum's decay
    bias_correction: float  # 1 - b1^t
    lr: float              # γ
    weight_decay: float    # λ (only for parameters of >= 2 sides)
    decouple: bool         # λθ added to U (True) or to G before (1) (False)
    matrix: bool           # the parameter has >= 2 sides (weight decay applies)
    precond_lr: float      # η
    update: bool           # update the preconditioner this step
    balance: bool          # balance the factors first (only with update, >= 2 merged sides)
    into: bool             # momentum_into_precond_update: the pair's G is the momentum
    damping: bool          # kron_torch's damping (2)
    precondition_damped: bool  # (5) preconditions the damped momentum (kron_torch)
    damping_dtype: str     # sqrt(eps_f32) of (2) in the parameter's dtype or in float32
    floor_mode: str        # "max" (kron_torch) or "added" (pytorch_optimizer)
    floor: float           # the norms' floor
    lower_bound: str       # "columns", "rows_or_columns" or "power_iteration"
    balance_mean: str      # "log", "prod" or "log_float32"
    clip: bool             # clip U to RMS 1.1 (5) (both sources; False: no clip)
    clip_eps: float        # ε_c of the RMS clip (5)
    solve_dtype: str       # "float32" or "param"
    debiased: bool         # debiased_betas: the momentum holds m̂ (decay 1-(1-β)/(1-β^t))
    damping_mode: str      # "mean" (kron_torch) or "elementwise" (heavyball)
    lower_bound_beta: float  # heavyball's running max of the step norms (0: none)


# ------------------------------------------------------------------- fixed-order pieces
@kernel
def solve_upper_right(x, q, out):
    """``out = x @ inv(q)`` for upper-triangular ``q`` (``d x d``), ``x`` and ``out``
    ``(n, d)``: column ``c`` is ``(x[:, c] - sum_{b<c} out[:, b] q[b, c]) / q[c, c]``, the
    sum in order of ``b``, every operation rounded (torch's ``solve_triangular(upper=True,
    left=False)``)."""
    rows, d = x.shape
    for r in range(rows):
        for c in range(d):
            s = x[r, c]
            for b in range(c):
                s -= out[r, b] * q[b, c]
            out[r, c] = s / q[c, c]


def solved(v, factors, solve_dtype):
    """:math:`B = V \\times_1 Q_1^{-\\top} \\cdots`: each side's last-axis solve against its
    triangular factor (or division by its diagonal)."""
    b = v
    for axis, q in enumerate(factors):
        if q.ndim < 2:
            b = b / q.reshape([q.size if k == axis else 1 for k in range(b.ndim)])
            continue
        moved = np.ascontiguousarray(np.moveaxis(b, axis, -1))
        flat = moved.reshape(-1, moved.shape[-1])
        work = np.float32 if solve_dtype == "float32" else b.dtype
        out = np.empty(flat.shape, work)
        solve_upper_right(np.ascontiguousarray(flat, work), np.ascontiguousarray(q, work), out)
        b = np.moveaxis(out.astype(b.dtype).reshape(moved.shape), -1, axis)
    return b


def power_iteration_bound(s, iterations=HEAVYBALL_POWER_ITERATIONS):
    r"""heavyball's ``max_eigenvalue_spd``: the spectral norm of the symmetric ``s`` estimated
    from its row of largest norm :math:`r` (:math:`x = r/\lVert r\rVert`, :math:`A =
    S/\lVert r\rVert`, the norm floored at float32's smallest normal), ``iterations`` steps
    :math:`x \leftarrow A^2 x / \max(\lVert A^2 x\rVert, 10^{-12})`, then
    :math:`\sqrt{x^\top A^2 x}\,\lVert r\rVert`."""
    dtype = s.dtype.type
    rows = np.array([norm2(s[i]) for i in range(s.shape[0])], s.dtype)
    i = int(np.argmax(rows))
    scale = max(rows[i], dtype(np.finfo(np.float32).tiny))
    a = s / scale
    x = s[i] / scale

    def squared(vector):
        once = matmul_of(vector.reshape(1, -1), np.ascontiguousarray(a.T))
        return matmul_of(once, np.ascontiguousarray(a.T)).reshape(-1)
    for _ in range(iterations):
        y = squared(x)
        x = y / max(norm2(y), dtype(1e-12))
    return np.sqrt(ordered_sum(x * squared(x))) * scale


def running_bound(bound, state, beta):
    """heavyball's ``_update_lb``: ``max(bound, r + (bound - r)(1 - beta))`` with ``r`` the
    value kept (``state[0]``, which takes the result)."""
    dtype = state.dtype.type
    kept = state[0]
    bound = max(dtype(bound), kept + (dtype(bound) - kept) * dtype(1 - beta))
    state[0] = bound
    return bound


def update_factors(factors, h, v, hyper, bounds=None):
    """(3), (4): one preconditioner update of ``factors`` (in place) from the pair;
    ``bounds`` (one array of 1 per factor) keeps heavyball's running norms when
    ``lower_bound_beta``."""
    dtype = h.dtype.type
    a = h
    for axis, q in enumerate(factors):
        a = along(a, axis, q) if q.ndim == 2 else scaled_along(a, axis, q)
    b = solved(v, factors, hyper.solve_dtype)
    for axis, q in enumerate(factors):
        if q.ndim < 2:
            ta, tb = sum_of_squares_along(a, axis), sum_of_squares_along(b, axis)
        else:
            ta, tb = gram(a, axis), gram(b, axis)
        diff, total = ta - tb, ta + tb
        diff = diff * dtype(hyper.precond_lr)
        if q.ndim < 2:
            norm = np.max(np.abs(total))
            if hyper.lower_bound_beta:
                norm = running_bound(norm, bounds[axis], hyper.lower_bound_beta)
            if hyper.floor_mode == "max":
                step = diff * (q / max(norm, dtype(hyper.floor)))
            else:
                step = diff * q / (norm + dtype(hyper.floor))
        else:
            diff = np.triu(diff)
            if hyper.lower_bound == "power_iteration":   # heavyball (its floor: float32's
                bound = power_iteration_bound(total)      # tiny, in the estimate)
                if hyper.lower_bound_beta:
                    bound = running_bound(bound, bounds[axis], hyper.lower_bound_beta)
                diff = diff / max(bound, dtype(hyper.floor))
            elif hyper.floor_mode == "max":
                norm = np.max(np.abs(total))
                bound = lower_bound(total, hyper.lower_bound) if norm > 0 else norm
                diff = diff / max(bound, dtype(hyper.floor))
            else:
                diff = diff / (lower_bound(total, hyper.lower_bound) + dtype(hyper.floor))
            step = matmul_of(np.ascontiguousarray(diff), q)
        q -= step


def preconditioned(m, factors):
    """:math:`\\hat m \\times_i Q_i^\\top Q_i`."""
    u = m
    for axis, q in enumerate(factors):
        if q.ndim == 2:
            u = along(along(u, axis, q), axis, np.ascontiguousarray(q.T))
        else:
            u = scaled_along(scaled_along(u, axis, q), axis, q)
    return u


def kron_update(param, grad, momentum, factors, probe, hyper, bounds=None):
    """One Kron update of ``param`` (in place, the preconditioned shape), the momentum and
    the factors (in place)."""
    dtype = param.dtype.type
    if hyper.weight_decay != 0 and hyper.matrix and not hyper.decouple:
        grad = grad + dtype(hyper.weight_decay) * param
    if hyper.debiased:    # heavyball: m̂ kept, by the debiased decay 1 - (1-β)/(1-β^t)
        weight = dtype((1 - hyper.beta) / hyper.bias_correction)
        momentum[...] = momentum * (dtype(1) - weight) + grad * weight
        m = momentum
    else:
        momentum *= dtype(hyper.beta)
        momentum += dtype(1 - hyper.beta) * grad
        m = momentum / dtype(hyper.bias_correction)
    if hyper.balance and (param.ndim > 1 or hyper.balance_mean == "log_float32"):
        balance_factors(factors, hyper.balance_mean)
    if hyper.update:
        h = m if hyper.into else grad
        if hyper.damping and hyper.damping_mode == "elementwise":   # heavyball's
            h = h + (dtype(HEAVYBALL_DAMPENING) + dtype(FLOAT32_EPS) * np.abs(h)) * probe
        elif hyper.damping:
            flat = np.ascontiguousarray(h).reshape(-1)
            mean = ordered_sum(np.abs(flat)) / dtype(flat.size)
            root = (np.sqrt(dtype(FLOAT32_EPS)) if hyper.damping_dtype == "param"
                    else dtype(np.sqrt(np.float32(FLOAT32_EPS))))
            h = h + (root * mean) * probe
            if hyper.into and hyper.precondition_damped:
                m = h
        update_factors(factors, h, probe, hyper, bounds)
    u = preconditioned(m, factors)
    flat = np.ascontiguousarray(u).reshape(-1)
    rms = np.sqrt(ordered_sum(flat * flat) / dtype(flat.size))
    if hyper.clip:
        u = u * min(dtype(1), dtype(1.1) / (rms + dtype(hyper.clip_eps)))
    if hyper.weight_decay != 0 and hyper.matrix and hyper.decouple:
        u = u + dtype(hyper.weight_decay) * param
    param -= dtype(hyper.lr) * u


def jax_stream_keys(seed, n, leaves):
    """distributed-kron's draws at its step count ``n`` (0-based) with ``probe_stream="jax"``
    (:mod:`npoptim.kernels.jax_random`): ``k = fold_in(key(seed), n)``, ``(k, s) = split(k)``;
    in its preconditioner update, ``(s, b) = split(s)``, the balancing draw
    ``uniform(b)`` (float64, as under jax_enable_x64), ``(s, v) = split(s)`` and one key per
    parameter (leaf), ``split(v, leaves)``, each parameter's probe ``normal(key, shape,
    dtype)``. Returns the balancing draw and the leaves' keys."""
    k = jax_random.fold_in(jax_random.key(seed), n)
    sub = jax_random.split(k)[1]
    sub, balance_key = jax_random.split(sub)
    _, probe_key = jax_random.split(sub)
    draw = float(jax_random.uniform(balance_key, (), np.float64))
    return draw, jax_random.split(probe_key, leaves)


def heavyball_probability(prob, n):
    """heavyball's update probability at its step ``n`` (1-based): the number ``prob``, or of
    the schedule ``(max_prob, min_prob, decay, flat_start)`` (None: HEAVYBALL_SCHEDULE)
    ``max(min_prob, max_prob * decay ** max(n - flat_start, 0))``, in Python floats."""
    if prob is not None and not isinstance(prob, (tuple, list)):
        return float(prob)
    max_prob, min_prob, decay, flat_start = HEAVYBALL_SCHEDULE if prob is None else prob
    return max(min_prob, max_prob * decay ** max(n - flat_start, 0))


def float32_probability(schedule, n):
    """The sources' float32 ``clamp(max_prob * exp(-decay * (n - flat_start)), min, max)``."""
    f32 = np.float32
    max_prob, min_prob, decay, flat_start = (f32(x) for x in schedule)
    exponent = f32(-decay) * (f32(n) - flat_start)
    prob = max_prob * f32(math.exp(float(exponent)))
    return min(max(prob, min_prob), max_prob)


class Kron(Optimizer):
    """PSGD Kron, kron-torch 0.3.3's ``Kron`` (``variant="pytorch_optimizer"``:
    pytorch_optimizer 4.1.0's; ``variant="heavyball"``: heavyball 3.2.1's ``PSGDKron``;
    ``flavor="optax"``: distributed-kron 2.0.0's; see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.0003
        Learning rate γ.
    b1 : float, default: 0.9
        Decay of the momentum (bias-corrected).
    weight_decay : float, default: 0.0
        λ: λθ added to the clipped update of parameters with >= 2 sides.
    preconditioner_update_probability : float, tuple or None, default: None
        A probability in (0, 1], or the schedule ``(max_prob, min_prob, decay, flat_start)``;
        None: ``(1.0, 0.03, 0.001, 500)``. The preconditioner is updated when a step counter
        reaches ``1/p`` (both sources).
    max_size_triangular : int, default: 8192
        A side larger than this has a diagonal factor.
    min_ndim_triangular : int, default: 2
        A tensor with fewer sides has diagonal factors only.
    memory_save_mode : {None, "smart_one_diag", "one_diag", "all_diag"}, default: None
        Which further sides are diagonal.
    momentum_into_precond_update : bool, default: True
        Update the preconditioner from the debiased momentum (else the gradient).
    precond_lr : float, default: 0.1
        η, the preconditioner's step.
    precond_init_scale : float, default: 1.0
        The factors start at ``scale ** (1/k)`` times I (or ones).
    balance_prob : float, default: 0.01
        Probability of balancing the factors at a preconditioner update.
    weight_decouple : bool, default: True
        λθ added to the update (else to the gradient, pytorch_optimizer's False).
    clip_update : bool, default: True
        Clip U to RMS 1.1 (both sources); False leaves it as it is.
    seed : int, default: 0
        The counter stream's key of the probes and balancing draws.
    variant : {"kron_torch", "pytorch_optimizer", "heavyball"}, default: 'kron_torch'
        The published form whose switches are the defaults of the next six and the last
        six.
    merge_dims : bool, default: the variant's
        View a tensor of > 2 sides as a matrix (kron_torch), or merge its sides
        (``merge_rule="small_dims"``).
    probe_damping : bool, default: the variant's
        kron_torch's damping of the pair, (2).
    norm_floor_mode : {"max", "added"}, default: the variant's
        How the floor enters the factors' step normalization.
    lower_bound : {"columns", "rows_or_columns", "power_iteration"}, default: the variant's
        Whose spectral-norm lower bound (or heavyball's estimate) normalizes a triangular
        factor's step.
    balance_mean : {"log", "prod", "log_float32"}, default: the variant's
        exp(mean log) (kron_torch), prod ** (1/k) (pytorch_optimizer), or exp(mean log) in
        float32 for every parameter, one factor too (distributed-kron).
    clip_eps : float, default: the variant's
        ε_c added to RMS(U) in the clip to 1.1.
    solve_dtype : {"float32", "param"}, default: 'float32'
        The dtype of the triangular solves (both sources: float32).
    debiased_betas : bool, default: the variant's
        Keep the debiased momentum m̂, by the decay 1 - (1-β)/(1-β^t) (heavyball).
    damping_mode : {"mean", "elementwise"}, default: the variant's
        kron_torch's damping by sqrt(ε32) mean|m̂|, or heavyball's by 1e-9 + ε32|m̂|.
    lower_bound_beta : float, default: the variant's
        heavyball's running maximum of the factors' step norms (0: none).
    balance_schedule : {"random", "every_update"}, default: the variant's
        Balance with probability ``balance_prob``, or at every preconditioner update.
    update_schedule : {"counter", "cumulative"}, default: the variant's
        The sources' counter against 1/p, or heavyball's cumulative sum of p (and its
        reading of the schedule tuple).
    decay_vectors : bool, default: the variant's
        λθ on parameters of fewer than 2 sides too (heavyball; distributed-kron, optax's
        add_decayed_weights).
    merge_rule : {"kron_torch", "small_dims"}, default: 'kron_torch'
        With ``merge_dims``: kron_torch's matrix view, or distributed-kron's merge of the
        sides into runs around ``target_merged_dim_size``, the diagonal sides decided first.
    target_merged_dim_size : int, default: 4096
        distributed-kron's target size of a merged side (``merge_rule="small_dims"``).
    precondition_damped : bool, default: True
        (5) preconditions the damped momentum of (2) (kron_torch); False: the undamped one
        (distributed-kron).
    schedule_from_one : bool, default: False
        The update schedule's n counts the step being taken (distributed-kron's count).
    probe_stream : {"counter", "jax"}, default: 'counter'
        The probes and balancing draws: the counter stream, or jax.random's keys as
        distributed-kron derives them from key ``seed`` (:func:`jax_stream_keys`).
    damping_dtype : {"param", "float32"}, default: 'param'
        sqrt(eps_f32) of the damping (2) taken in the parameter's dtype (kron_torch) or in
        float32 (distributed-kron).
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()``; a flavor
        sets its own (see ``Optimizer.step_scope``).
    """

    @flavored
    def __init__(self, params, lr=3e-4, b1=0.9, weight_decay=0.0,
                 preconditioner_update_probability=None, max_size_triangular=8192,
                 min_ndim_triangular=2, memory_save_mode=None,
                 momentum_into_precond_update=True, precond_lr=0.1, precond_init_scale=1.0,
                 balance_prob=0.01, weight_decouple=True, clip_update=True, *, seed=0,
                 variant="kron_torch",
                 merge_dims=VARIANT_DEFAULT, probe_damping=VARIANT_DEFAULT,
                 norm_floor_mode=VARIANT_DEFAULT, lower_bound=VARIANT_DEFAULT,
                 balance_mean=VARIANT_DEFAULT, clip_eps=VARIANT_DEFAULT, solve_dtype="float32",
                 debiased_betas=VARIANT_DEFAULT, damping_mode=VARIANT_DEFAULT,
                 lower_bound_beta=VARIANT_DEFAULT, balance_schedule=VARIANT_DEFAULT,
                 update_schedule=VARIANT_DEFAULT, decay_vectors=VARIANT_DEFAULT,
                 merge_rule="kron_torch", target_merged_dim_size=4096,
                 precondition_damped=True, schedule_from_one=False,
                 probe_stream="counter", damping_dtype="param"):
        self.variant, switches = resolve_variant(
            VARIANTS, ALIASES, variant, dict(
                merge_dims=merge_dims, probe_damping=probe_damping,
                norm_floor_mode=norm_floor_mode, lower_bound=lower_bound,
                balance_mean=balance_mean, clip_eps=clip_eps, debiased_betas=debiased_betas,
                damping_mode=damping_mode, lower_bound_beta=lower_bound_beta,
                balance_schedule=balance_schedule, update_schedule=update_schedule,
                decay_vectors=decay_vectors))
        switches = {**NOT_HEAVYBALL, **switches}
        super().__init__(params, dict(
            lr=lr, b1=b1, weight_decay=weight_decay,
            preconditioner_update_probability=preconditioner_update_probability,
            max_size_triangular=max_size_triangular, min_ndim_triangular=min_ndim_triangular,
            memory_save_mode=memory_save_mode,
            momentum_into_precond_update=momentum_into_precond_update, precond_lr=precond_lr,
            precond_init_scale=precond_init_scale, balance_prob=balance_prob,
            weight_decouple=weight_decouple, clip_update=clip_update, seed=seed,
            solve_dtype=solve_dtype, **switches,
            merge_rule=merge_rule, target_merged_dim_size=target_merged_dim_size,
            precondition_damped=precondition_damped,
            schedule_from_one=schedule_from_one, probe_stream=probe_stream,
            damping_dtype=damping_dtype))
        #: The optimizer-wide counters (both sources keep them on the optimizer / group 0):
        #: steps taken (the schedule's n) and steps since the last preconditioner update.
        self.param_groups[0].setdefault("prob_step", 0)
        self.param_groups[0].setdefault("update_counter", 0)
        self._given = (None, None, None)

    def _check_group(self, group):
        check_no_variant(group)
        check_nonnegative(group, "lr", "weight_decay", "precond_lr", "clip_eps")
        b1 = group["b1"]
        if isinstance(b1, bool) or not isinstance(b1, (int, float)) or not 0 <= b1 < 1:
            raise ValueError(f"b1 must be in [0, 1), got {b1!r}")
        prob = group["preconditioner_update_probability"]
        if prob is not None:
            values = tuple(prob) if isinstance(prob, (tuple, list)) else (prob,)
            if len(values) not in (1, 4) or any(
                    isinstance(x, bool) or not isinstance(x, (int, float)) for x in values):
                raise ValueError("preconditioner_update_probability must be None, a number in "
                                 "(0, 1] or (max_prob, min_prob, decay, flat_start), got "
                                 f"{prob!r}")
            if len(values) == 1 and not 0 < values[0] <= 1:
                raise ValueError(f"preconditioner_update_probability must be in (0, 1], got "
                                 f"{prob!r}")
            if len(values) == 4 and not (0 < values[1] <= values[0] <= 1 and values[2] >= 0):
                raise ValueError("the schedule needs 0 < min_prob <= max_prob <= 1 and "
                                 f"decay >= 0, got {prob!r}")
        for name in ("max_size_triangular", "min_ndim_triangular", "target_merged_dim_size"):
            value = group[name]
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        if group["memory_save_mode"] not in MEMORY_SAVE_MODES:
            raise ValueError(f"memory_save_mode must be one of {MEMORY_SAVE_MODES}, got "
                             f"{group['memory_save_mode']!r}")
        scale = group["precond_init_scale"]
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0:
            raise ValueError(f"precond_init_scale must be > 0, got {scale!r}")
        bp = group["balance_prob"]
        if isinstance(bp, bool) or not isinstance(bp, (int, float)) or not 0 <= bp <= 1:
            raise ValueError(f"balance_prob must be in [0, 1], got {bp!r}")
        check_flag(group, "momentum_into_precond_update", "weight_decouple", "merge_dims",
                   "probe_damping", "clip_update", "precondition_damped", "decay_vectors",
                   "schedule_from_one")
        check_seed(group["seed"])
        check_choice(group, "norm_floor_mode", ("max", "added"))
        check_choice(group, "lower_bound", ("columns", "rows_or_columns", "power_iteration"))
        check_choice(group, "balance_mean", ("log", "prod", "log_float32"))
        check_flag(group, "debiased_betas")
        check_choice(group, "damping_mode", ("mean", "elementwise"))
        check_choice(group, "balance_schedule", ("random", "every_update"))
        check_choice(group, "update_schedule", ("counter", "cumulative"))
        lb_beta = group["lower_bound_beta"]
        if (isinstance(lb_beta, bool) or not isinstance(lb_beta, (int, float))
                or not 0 <= lb_beta < 1):
            raise ValueError(f"lower_bound_beta must be in [0, 1), got {lb_beta!r}")
        check_choice(group, "merge_rule", ("kron_torch", "small_dims"))
        check_choice(group, "probe_stream", ("counter", "jax"))
        check_choice(group, "damping_dtype", ("param", "float32"))
        if group["probe_stream"] == "jax":
            jax_random.check_jax_seed(group["seed"])
        if group["target_merged_dim_size"] == 0:
            raise ValueError("target_merged_dim_size must be an integer >= 1, got 0")
        check_choice(group, "solve_dtype", ("float32", "param"))

    def _sides(self, shape, group):
        if group["merge_dims"] and group["merge_rule"] == "small_dims":
            # distributed-kron: the factor kinds of the sides first, then merged
            shape = tuple(shape) or (1,)
            return small_dims_sides(shape, group["target_merged_dim_size"],
                                    diagonal_sides(shape, group))
        sides = merged_shape(shape, group["merge_dims"])
        return sides, diagonal_sides(sides, group)

    def _state_shapes(self, param, group):
        sides, diag = self._sides(param.shape, group)
        shapes = {"momentum_buffer": param.shape}
        for i, (side, d) in enumerate(zip(sides, diag)):
            shapes[f"Q{i}"] = (side,) if d else (side, side)
        if group["lower_bound_beta"]:   # heavyball's running norm of each factor's step
            shapes.update({f"lower_bound{i}": (1,) for i in range(len(sides))})
        return shapes

    def _init_state(self, param, group):
        state = super()._init_state(param, group)
        sides, diag = self._sides(param.shape, group)
        scale = group["precond_init_scale"] ** (1 / len(sides))
        for i, (side, d) in enumerate(zip(sides, diag)):
            q = state[f"Q{i}"]
            if d:
                q[...] = scale
            else:
                q[...] = np.eye(side, dtype=param.dtype) * param.dtype.type(scale)
        return state

    def step(self, grads=None, closure=None, *, probes=None, update_preconditioner=None,
             balance=None):
        """As :meth:`Optimizer.step`; ``probes`` (one array or None per parameter, of its
        shape and dtype: the probe V of this step where the preconditioner is updated),
        ``update_preconditioner`` and ``balance`` (bools) replace this step's draws (see the
        module docstring); checked before anything changes."""
        if probes is not None:
            probes = check_noise(self.params, probes, "probes")
        for name, value in (("update_preconditioner", update_preconditioner),
                            ("balance", balance)):
            if value is not None and not isinstance(value, (bool, np.bool_)):
                raise ValueError(f"{name} must be None or a bool, got {value!r}")
        self._given = (probes, update_preconditioner, balance)
        try:
            return super().step(grads, closure)
        finally:
            self._given = (None, None, None)

    def _prepare(self, grads):
        prepared = super()._prepare(grads)
        for _, index, param, _ in prepared:
            if param.size == 0:
                raise ValueError(f"params[{index}] has no elements")
        return prepared

    def _apply(self, prepared):
        probes, given_update, given_balance = self._given
        first = self.param_groups[0]
        n = first["prob_step"]
        prob = first["preconditioner_update_probability"]
        counter = first["update_counter"] + 1
        if first["update_schedule"] == "cumulative":   # heavyball's psgd_should_update
            before = first.get("cumulative_prob", 0.0)
            first["cumulative_prob"] = before + heavyball_probability(prob, n + 1)
            do_update = int(first["cumulative_prob"]) > int(before)
        elif prob is None or isinstance(prob, (tuple, list)):
            p = float32_probability(DEFAULT_SCHEDULE if prob is None else prob,
                                    n + 1 if first["schedule_from_one"] else n)
            do_update = bool(counter >= np.float32(1) / p)
        else:
            do_update = bool(counter >= 1 / prob)
        if given_update is not None:
            do_update = bool(given_update)
        first["update_counter"] = 0 if do_update else counter
        t = first["prob_step"] = n + 1
        leaf_keys = None
        if first["probe_stream"] == "jax":
            balance_draw, leaf_keys = jax_stream_keys(first["seed"], n, len(self.params))
            draw = bool(balance_draw <= first["balance_prob"])
        else:
            draw = bool(uniform(first["seed"], BALANCE_STREAM, t, 1)[0] < first["balance_prob"])
        if given_balance is not None:
            draw = bool(given_balance)
        if first["balance_schedule"] == "every_update":
            draw = True
        self._step_draws = (t, do_update, draw and do_update, probes, leaf_keys)
        super()._apply(prepared)

    def _update(self, param, grad, state, group, index, shape):
        t, do_update, balance, probes, leaf_keys = self._step_draws
        sides, diag = self._sides(shape, group)
        p = param.reshape(sides)
        g = grad.reshape(sides)
        state["step"] += 1
        factors = [state[f"Q{i}"] for i in range(len(sides))]
        probe = None
        if do_update:
            given = None if probes is None else probes[index]
            if given is None and leaf_keys is not None:     # distributed-kron's normals
                given = jax_random.normal(leaf_keys[index], (param.size,), param.dtype)
            probe = probe_for(given, group["seed"], index, t, param.size, param.dtype, sides)
        b1 = group["b1"]
        floor = (np.finfo(param.dtype).tiny if group["norm_floor_mode"] == "max"
                 else BFLOAT16_TINY)
        hyper = KronHyper(
            beta=b1, bias_correction=1 - b1 ** state["step"], lr=group["lr"],
            weight_decay=group["weight_decay"], decouple=group["weight_decouple"],
            matrix=len(shape) >= 2 or group["decay_vectors"], precond_lr=group["precond_lr"],
            update=do_update,
            balance=balance, into=group["momentum_into_precond_update"],
            damping=group["probe_damping"], precondition_damped=group["precondition_damped"],
            damping_dtype=group["damping_dtype"], floor_mode=group["norm_floor_mode"],
            floor=floor, lower_bound=group["lower_bound"], balance_mean=group["balance_mean"],
            clip=group["clip_update"], clip_eps=group["clip_eps"],
            solve_dtype=group["solve_dtype"], debiased=group["debiased_betas"],
            damping_mode=group["damping_mode"], lower_bound_beta=group["lower_bound_beta"])
        bounds = ([state[f"lower_bound{i}"] for i in range(len(sides))]
                  if group["lower_bound_beta"] else None)
        kron_update(p, g, state["momentum_buffer"].reshape(sides), factors, probe, hyper,
                    bounds)
