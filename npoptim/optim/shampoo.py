r"""Shampoo (Gupta, Koren & Singer, ICML 2018, "Shampoo: Preconditioned Stochastic Tensor
Optimization", arXiv 1802.09568) and its scalable form (Anil, Gupta, Koren, Regan & Singer
2020, "Scalable Second Order Optimization for Deep Learning", arXiv 2002.09018), as
pytorch_optimizer 4.1.0's ``Shampoo`` (``variant="pytorch_optimizer"``, the default) and
``ScalableShampoo`` (``variant="scalable"``), and as the authors' JAX ``distributed_shampoo``
in optax-shampoo 0.0.6 (``variant="optax"``, the optax flavor).

An order-:math:`k` gradient :math:`G` gets one statistic per dimension :math:`i`, the
unfolding :math:`G_{(i)}` (dimension :math:`i` as rows, the rest as columns) times its
transpose, and the step preconditions each mode by that statistic's inverse
:math:`2k`-th root:

.. math::

    L_i &\leftarrow \beta_2 L_i + w_2\, G_{(i)} G_{(i)}^\top                 &&\quad\text{(1)}\\
    P_i &= (L_i + \epsilon_i)^{-1/(2k)}                                     &&\quad\text{(2)}\\
    \tilde G &= G \times_1 P_1 \times_2 P_2 \cdots \times_k P_k              &&\quad\text{(3)}

(:math:`\times_i` the mode-:math:`i` product). For a matrix this is the paper's
:math:`L^{-1/4} G R^{-1/4}`.

**variant="pytorch_optimizer"** (``pytorch_optimizer/optimizer/shampoo.py``, ``Shampoo``):
the paper's Algorithm 1 with options. (1) is a sum (:math:`\beta_2 = w_2 = 1`) from
:math:`L_i = \epsilon I`, ``matrix_eps`` in the matrix; (2) is recomputed when the step is a
multiple of ``preconditioning_compute_steps`` and is *zero* before its first computation (so
with an interval above 1 the first steps do not move the parameter: the source's
``inv_pre_cond`` starts at zeros). Before (1), ``momentum`` :math:`\mu` mixes the gradient
with the previous step's *preconditioned* gradient :math:`\tilde G_{t-1}` (at step 1 the
first gradient as given, *before* ``maximize`` negates it, as the source's buffer), and the
weight decay is applied (L2: :math:`G + \lambda\theta`, or
decoupled :math:`\theta(1-\gamma\lambda)`, ``fixed_decay``: :math:`\theta(1-\lambda)`):

.. math::

    G \leftarrow G + \mu(\tilde G_{t-1} - G),\qquad
    \theta \leftarrow \theta - \gamma \tilde G

The statistics are built from that mixed, decayed gradient. The root is the source's
``compute_power_svd`` (an SVD, :math:`|\lambda|^{-1/2k}` of the eigenvalues):
``inverse_root="eigh"`` here (:func:`npoptim.kernels.decompositions.eigh_inverse_root`).

**variant="scalable"** (``pytorch_optimizer/optimizer/shampoo.py``, ``ScalableShampoo``;
``optimizer/utils/preconditioner.py``, ``partition.py``, ``graft.py``, ``shape.py``; itself
a port of google-research ``scalable_shampoo/optax/distributed_shampoo.py``):

* the parameter is reshaped by ``merge_small_dims(shape, block_size)`` when
  ``shape_interpretation`` (consecutive dimensions merged while their product stays at most
  ``block_size``; a shape that merges into one dimension becomes ``[1]``: **a vector, or a
  matrix with at most ``block_size`` entries, is not preconditioned at all** and steps by its
  graft), then each dimension larger than ``block_size`` is cut into blocks of
  ``block_size`` (the last one shorter); every block has its own statistics;
* a parameter with any dimension above ``no_preconditioning_for_layers_with_dim_gt``, or
  whose reshaped shape has one dimension, is not preconditioned;
* (1) with :math:`\beta_2` = ``betas[1]`` and :math:`w_2 = 1-\beta_2` (1 if
  :math:`\beta_2 = 1`) every ``statistics_compute_steps``, from :math:`L_i = \epsilon I`;
  (2) every ``preconditioning_compute_steps`` (from :math:`P_i = I`), its exponent
  :math:`-1/(2k)` with :math:`k` the reshaped order, or :math:`-1/n` with
  ``inverse_exponent_override`` :math:`n > 0`; the root by the coupled Newton iteration
  (``inverse_root="newton"``, the source's ``compute_power_schur_newton``, its ridge
  :math:`\epsilon\lambda_{\max} I` added to the matrix:
  :func:`npoptim.kernels.decompositions.coupled_newton_inverse_root`) or by SVD
  (``use_svd=True`` there, ``inverse_root="eigh"`` here); (3) contracts each mode with
  :math:`P_i`'s *first* index (``tensordot(G, P, [[0], [0]])``, :math:`P_i^\top`);
* the graft :math:`D` (``graft_type``): ``"sgd"`` :math:`G`, ``"adagrad"``
  :math:`G/(\sqrt{\textstyle\sum G^2} + \epsilon_d)`, ``"rmsprop"``
  :math:`G/(\sqrt{v} + \epsilon_d)` with :math:`v \leftarrow \beta_2 v + (1-\beta_2)G^2`,
  ``"sqrt_n"`` :math:`\mathrm{sign}(G)`, ``"none"`` no graft; :math:`D` and :math:`\tilde G`
  are multiplied by :math:`\gamma` unless ``decoupled_learning_rate``, and (graft not
  ``"none"``) :math:`\tilde G \leftarrow \tilde G\,\|D\|/(\|\tilde G\| + 10^{-16})`; an
  unpreconditioned parameter takes :math:`\tilde G = D`;
* weight decay: decoupled :math:`\theta(1-\gamma\lambda)`, or L2 added to both :math:`D` and
  :math:`\tilde G` (after the grafting);
* momenta :math:`m \leftarrow \beta_1 m + \tilde G` and :math:`m_D \leftarrow \beta_1 m_D + D`
  (``moving_average_for_momentum``: :math:`(1-\beta_1)` on the new term); the step takes
  :math:`m` from step ``start_preconditioning_step`` on and :math:`m_D` before it, with
  ``nesterov`` :math:`\beta_1 m + \tilde G` (or :math:`\beta_1 m_D + D`; lerps with the
  moving average), and :math:`\theta \leftarrow \theta - \gamma\,\cdot` it (times 1 when the
  lr is not decoupled: it is already in :math:`D` and :math:`\tilde G`).

**variant="optax"** (optax-shampoo 0.0.6, ``optax_shampoo/distributed_shampoo.py``
``distributed_shampoo``: google-research ``scalable_shampoo/optax/distributed_shampoo.py``
as a package, an optax ``GradientTransformation``; ``flavor="optax"`` and
``npoptim.flavors.from_framework("optax", "distributed_shampoo", ...)`` with its keyword
names): the scalable form above with these switches, its defaults otherwise
(``start_preconditioning_step=5``, ``preconditioning_compute_steps=1``, the skip bound 4096):

* ``count_from=0``: the schedules read optax's ``count``, 0 at the first update: the
  statistics and roots are computed at the first update (``count % interval == 0``) and the
  Shampoo momentum is taken from ``count >= start_preconditioning_step`` (pytorch_optimizer:
  the step, 1 first);
* ``skip_preconditioning_rank_lt=1``, ``skip_rank_shape="original"``: a parameter is left to
  its graft when its *own* order is below 1 (a scalar) or a side exceeds
  ``no_preconditioning_for_layers_with_dim_gt`` (``skip_preconditioning_dim_size_gt``), so a
  **vector is preconditioned** (one statistic, exponent -1/2), and so is a matrix merged into
  one side (pytorch_optimizer: reshaped order below 2 is not);
* ``merge_rule="optax_shampoo"`` under ``merge_small_dims_block_size`` (4096; its own bound,
  not ``block_size``): :func:`npoptim.optim.dimensions.merge_small_dims` (``(3, 6)`` is
  ``(18,)``, not ``(1,)``);
* ``newton_rule="optax"``, ``root_tolerance=1e-6``: its ``matrix_inverse_pth_root``:
  :math:`\lambda_{\max}` by its power iteration (from ``RandomState(1729).uniform(-1, 1)``,
  to an absolute 1e-6), the ridge :math:`\epsilon\max(\lambda_{\max}, 10^{-6})` (or
  :math:`\epsilon` with ``relative_matrix_eps=False``, its ``relative_matrix_epsilon``),
  :math:`T^p` by squaring, no iteration when :math:`M_0` is already within the tolerance, and
  a 1 x 1 statistic through the iteration unless every statistic is 1 x 1 (it pads them all
  to the largest side for one batched root);
* ``inverse_failure_threshold=0.1``: a new root whose final :math:`\max|M - I|` (in float32)
  is NaN or at least the threshold is dropped and the previous preconditioner kept;
* grafts ``"adagrad_normalized"`` and ``"rmsprop_normalized"``
  (:math:`G/(\|G\| + 10^{-16})` into the AdaGrad/RMSProp graft) and
  ``clip_by_scaled_gradient_norm`` :math:`c` (the RMSProp graft divided by
  :math:`\max(1, \mathrm{rms}(D)/c)`); there is no ``"none"`` graft there;
* ``decoupled_decay_form="in_update"``: the decoupled decay :math:`\gamma\lambda\theta` is
  added to the momentum step, which is multiplied by :math:`\gamma` with the decoupled
  learning rate: :math:`\theta \leftarrow \theta - \gamma(u + \gamma\lambda\theta)`, a
  :math:`\gamma^2\lambda` decay (``"before_step"``, pytorch_optimizer's:
  :math:`\theta(1-\gamma\lambda)` first).

Its sharded and distributed modes (``shard_optimizer_states``, ``batch_axis_name``, the
partition specs), the quantized states (``best_effort_memory_usage_reduction``), LOBPCG
deflation and one-sided ``precondtioner_type=INPUT`` are refused by name (the flavor's
table, npoptim/frameworks/optax.py). Its momenta are ``β1 m + w x`` where pytorch_optimizer
lerps (the same up to rounding). ``tests/test_shampoo.py`` runs it on jax 0.10.2 through a
test-side shim of the names it imports that jax and flax no longer give (``jax.tree_map``,
``jax.experimental.pjit``'s, ``flax.struct``; a Python bool carried in a ``while_loop``), with
its float32-initialized statistics made float64 (its float64 ``lax.cond`` fails otherwise),
and agrees in float64 to 2.2e-15 of the parameters' scale (its tolerance, 2e-10, derived
there); with one of the switches above set back to ScalableShampoo's value it misses by
4.6e-8 (the Newton rule) to 0.25.

**matrix_eps_mode**: where :math:`\epsilon_i` of (2) is. ``"added"`` (both pytorch_optimizer
forms): :math:`\epsilon I` is the statistics' initial value, so with :math:`\beta_2 < 1` it
decays as :math:`\beta_2^t\epsilon`; ``"eigenvalues"`` (Meta's distributed_shampoo,
facebookresearch/optimizers ``distributed_shampoo/preconditioner/matrix_functions.py``,
``matrix_inverse_root_from_eigendecomposition``): the statistics start at zero and
:math:`\epsilon` is added to every eigenvalue at each root,
:math:`(\max(\lambda, 0)+\epsilon)^{-1/2k}` (Meta's shifts *all* eigenvalues by
:math:`-\min(\lambda_{\min}, 0)` instead of clamping each: the two differ only where
rounding left an eigenvalue of the positive semidefinite statistic negative). For the sum of
``variant="pytorch_optimizer"`` the two agree up to rounding (the sum never decays
:math:`\epsilon I`); with :math:`\beta_2 < 1` they do not. ``"eigenvalues"`` takes
``inverse_root="eigh"``.

Where the implementations differ (besides the above):

* Meta's distributed_shampoo (read, not run): its coupled Newton root
  (``matrix_inverse_root_newton``) adds :math:`\epsilon I` to the matrix, not scaled by
  :math:`\lambda_{\max}`, iterates to a tolerance of 1e-6 and has no divergence stop;
  factor matrices :math:`\beta_2`-averaged with
  an optional bias correction, epsilon (default 1e-12) added to the eigenvalues, grafting of
  the *diagonal preconditioner only* (SGD, AdaGrad, RMSProp, Adam; its own momentum applied
  after the grafted direction), roots first at ``start_preconditioning_step`` (default: the
  ``precondition_frequency``) and the graft's step before it; blocks of
  ``max_preconditioner_dim``; none of these is a switch here beyond ``matrix_eps_mode``.
* google-research's distributed_shampoo (optax; pytorch_optimizer's port source) uses a
  power iteration from ``RandomState(1729)``; pytorch_optimizer from ``torch.randn``; here
  from a fixed vector (``_power_start``). The estimate of :math:`\lambda_{\max}` only scales
  the ridge :math:`\epsilon\lambda_{\max}`; after 100 iterations the starts agree to about
  :math:`(\lambda_2/\lambda_1)^{200}` relative, which is not small where the top two
  eigenvalues are close: over the tests' 24 steps at ``matrix_eps=1e-4`` the source with its
  ``torch.randn`` start is 8.1e-10 of the parameters' scale away, with this start 4.7e-16.

Eigen root versus Newton root: the Newton iteration stops when
:math:`e = \max|M - I| \le 10^{-3}` with :math:`M = X^p A` (the iteration keeps this
invariant), so :math:`X = (M A^{-1})^{1/p}` and, to first order,
:math:`\|X - A^{-1/p}\|_2 \le \|A^{-1/p}\|_2\, \|M - I\|_2 / p
\le \|A^{-1/p}\|_2\, n e / p`: for the tests' :math:`n \le 8`, :math:`p = 4`, at most
:math:`2\times10^{-3}` relative (the quadratic convergence leaves it below: at most
:math:`2.6\times10^{-4}` measured, and 6.5e-5 of the parameters' scale over a 24-step run,
where the ridge :math:`\epsilon\lambda_{\max}` of the Newton root adds to it);
``tests/test_shampoo.py`` checks the two roots against that bound, and each against its own
source to 1e-12.

All products run in a fixed order (:func:`npoptim.kernels.reduction.matmul_of`), the
eigendecompositions by the fixed-order Jacobi method up to 128 on a side (LAPACK beyond), the
powers of eigenvalues by ``math.pow`` as torch's ``pow``. The update is not element-wise, so
it is plain NumPy in the parameter's dtype. Dense gradients only, real parameters only; a
parameter with no elements only counts its steps.
"""
import math

import numpy as np

from npoptim.kernels.decompositions import (NEWTON_RULES, coupled_newton_inverse_root,
                                            eigh_inverse_root)
from npoptim.kernels.reduction import grad_sumsq, matmul_of
from npoptim.optim.dimensions import merge_small_dims
from npoptim.optim.optimizer import Optimizer
from npoptim.optim.options import (VARIANT_DEFAULT, check_betas, check_choice, check_flag,
                                   check_no_variant, check_nonnegative, flavored, is_real,
                                   resolve_variant)

#: The published forms (:func:`npoptim.optim.options.resolve_variant`).
#: ScalableShampoo's values of the switches optax-shampoo sets otherwise (the pytorch_optimizer
#: form reads none of them).
_PYTORCH_OPTIMIZER_SWITCHES = dict(
    start_preconditioning_step=25, no_preconditioning_for_layers_with_dim_gt=8192,
    merge_small_dims_block_size=None, skip_preconditioning_rank_lt=2,
    skip_rank_shape="reshaped", merge_rule="pytorch_optimizer", count_from=1,
    newton_rule="pytorch_optimizer",
    root_tolerance=1e-3, inverse_failure_threshold=None, decoupled_decay_form="before_step")
VARIANTS = {
    "pytorch_optimizer": dict(inverse_root="eigh", graft_type="none",
                              preconditioning_compute_steps=1, **_PYTORCH_OPTIMIZER_SWITCHES),
    "scalable": dict(inverse_root="newton", graft_type="sgd",
                     preconditioning_compute_steps=1000, **_PYTORCH_OPTIMIZER_SWITCHES),
    # optax-shampoo 0.0.6's distributed_shampoo (google-research scalable_shampoo/optax), its
    # defaults; the optax flavor (npoptim/frameworks/optax.py)
    "optax": dict(inverse_root="newton", graft_type="sgd", preconditioning_compute_steps=1,
                  start_preconditioning_step=5, no_preconditioning_for_layers_with_dim_gt=4096,
                  merge_small_dims_block_size=4096, skip_preconditioning_rank_lt=1,
                  skip_rank_shape="original", merge_rule="optax_shampoo", count_from=0,
                  newton_rule="optax",
                  root_tolerance=1e-6, inverse_failure_threshold=0.1,
                  decoupled_decay_form="in_update"),
}
#: pytorch_optimizer's class names, and the optax function's.
ALIASES = {"shampoo": "pytorch_optimizer", "scalable_shampoo": "scalable",
           "distributed_shampoo": "optax"}
GRAFT_TYPES = ("none", "sgd", "adagrad", "rmsprop", "sqrt_n", "adagrad_normalized",
               "rmsprop_normalized")
#: optax-shampoo's GraftingType numbers of the graft types it has.
OPTAX_GRAFT_TYPES = {1: "sgd", 2: "adagrad", 3: "rmsprop", 4: "rmsprop_normalized",
                     5: "sqrt_n", 6: "adagrad_normalized"}
SKIP_RANK_SHAPES = ("reshaped", "original")
MERGE_RULES = ("pytorch_optimizer", "optax_shampoo")
DECOUPLED_DECAY_FORMS = ("before_step", "in_update")
INVERSE_ROOTS = ("eigh", "newton")
MATRIX_EPS_MODES = ("added", "eigenvalues")


# ---------------------------------------------------------------------------- shapes
def block_slices(shape, block_size):
    """The blocks of an array of ``shape``: a list of slice tuples, each dimension larger than
    ``block_size`` cut into pieces of ``block_size`` (the last shorter), the first dimension
    outermost (pytorch_optimizer's ``BlockPartitioner``)."""
    per_dim = []
    for d in shape:
        if block_size <= 0 or block_size >= d:
            per_dim.append([slice(0, d)])
        else:
            per_dim.append([slice(s, min(s + block_size, d)) for s in range(0, d, block_size)])
    blocks = [()]
    for pieces in per_dim:
        blocks = [b + (s,) for b in blocks for s in pieces]
    return blocks


def unfolding(x, axis):
    """``x`` with ``axis`` as rows and the other dimensions (in order) as columns."""
    return np.ascontiguousarray(np.moveaxis(x, axis, 0).reshape(x.shape[axis], -1))


def mode_product(x, matrix, axis):
    """``x ×_axis matrix``: ``matrix @`` the unfolding along ``axis``, folded back."""
    moved = np.moveaxis(x, axis, 0)
    product = matmul_of(matrix, np.ascontiguousarray(moved.reshape(moved.shape[0], -1)))
    return np.moveaxis(product.reshape((matrix.shape[0],) + moved.shape[1:]), 0, axis)


def add_statistic(statistic, x, axis, beta, weight):
    """(1) in place: ``L ← β L + w X_(i) X_(i)ᵀ`` (``β = w = 1``: a sum)."""
    u = unfolding(x, axis)
    outer = matmul_of(u, np.ascontiguousarray(u.T))
    if beta != 1.0:
        statistic *= statistic.dtype.type(beta)
    if weight != 1.0:
        outer *= outer.dtype.type(weight)
    statistic += outer


def inverse_root(statistic, exponent, group, padded_side=1):
    """(2): ``(root, error)``, the statistic's inverse ``exponent``-th root by the group's
    method and the Newton iteration's final ``max|M - I|`` (0 for the eigen root);
    ``padded_side``: the largest statistic's side (``newton_rule="optax"``, see
    :func:`~npoptim.kernels.decompositions.coupled_newton_inverse_root`)."""
    if group["inverse_root"] == "newton":
        return coupled_newton_inverse_root(
            statistic, exponent, ridge_epsilon=group["matrix_eps"],
            error_tolerance=group["root_tolerance"], rule=group["newton_rule"],
            relative_ridge=group["relative_matrix_eps"], return_error=True,
            padded_side=padded_side)
    return (eigh_inverse_root(statistic, exponent, group["matrix_eps"],
                              group["matrix_eps_mode"]), 0.0)


def root_failed(error, threshold):
    """optax-shampoo's check of a new root: its error (as float32) NaN or at least the
    threshold (float32): the previous preconditioner is kept. ``threshold`` None: never."""
    if threshold is None:
        return False
    error = np.float32(error)
    return bool(np.isnan(error) or error >= np.float32(threshold))


def norm(x):
    """The 2-norm of ``x`` in its dtype, summed in a fixed order."""
    return math.sqrt(float(grad_sumsq(np.ascontiguousarray(x).reshape(-1))))


def lerp(start, end, weight):
    """torch's ``lerp``: ``start + w (end - start)`` for ``w < 0.5``, else
    ``end - (end - start)(1 - w)``."""
    dtype = start.dtype.type
    if weight < 0.5:
        return start + dtype(weight) * (end - start)
    return end - (end - start) * dtype(1 - weight)


# ------------------------------------------------------------------------- the class
class Shampoo(Optimizer):
    """Shampoo: pytorch_optimizer's ``Shampoo`` (``variant="pytorch_optimizer"``) or
    ``ScalableShampoo`` (``variant="scalable"``), or optax-shampoo's ``distributed_shampoo``
    (``variant="optax"``, ``flavor="optax"``); see the module docstring. "scalable" below is
    said of both scalable forms.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    momentum : float, default: 0.0
        ``variant="pytorch_optimizer"``: μ, the gradient lerped toward the previous
        preconditioned gradient (0: none).
    betas : tuple (float, float), default: (0.9, 0.999)
        scalable: β1 of the momenta, β2 of the statistics and the RMSProp graft.
    weight_decay : float, default: 0.0
        Weight decay λ (L2 unless ``decoupled_weight_decay``).
    decoupled_weight_decay : bool, default: False
        θ ← θ(1 - γλ) instead of L2 (pytorch_optimizer's ``weight_decouple`` and
        ``decoupled_weight_decay``).
    fixed_decay : bool, default: False
        ``variant="pytorch_optimizer"``: the decoupled decay not scaled by γ, θ(1 - λ).
    preconditioning_compute_steps : int, default: the variant's
        The roots (2) are recomputed when the step count is a multiple of it (1;
        ``variant="scalable"``: 1000).
    start_preconditioning_step : int, default: the variant's
        scalable: the step from which the Shampoo momentum is taken (the graft's before): 25
        (``"optax"``: 5).
    statistics_compute_steps : int, default: 1
        scalable: the statistics (1) are updated when the step count is a
        multiple of it.
    block_size : int, default: 512
        scalable: the block side, and the bound of ``merge_small_dims``.
    no_preconditioning_for_layers_with_dim_gt : int, default: the variant's
        scalable: a parameter with a larger dimension is not preconditioned (8192;
        ``"optax"``: 4096, its ``skip_preconditioning_dim_size_gt``).
    shape_interpretation : bool, default: True
        scalable: reshape by ``merge_small_dims`` first.
    merge_small_dims_block_size : int or None, default: the variant's
        scalable: the bound of ``merge_small_dims`` (None: ``block_size``; ``"optax"``: 4096).
    skip_preconditioning_rank_lt : int, default: the variant's
        scalable: a parameter of a lower order is not preconditioned (2; ``"optax"``: 1).
    skip_rank_shape : str, default: the variant's
        scalable: whose order that is: 'reshaped' (after ``merge_small_dims``) or 'original'
        (``"optax"``'s).
    merge_rule : str, default: the variant's
        scalable: 'pytorch_optimizer' or 'optax_shampoo' (:mod:`npoptim.optim.dimensions`).
    inverse_exponent_override : int, default: 0
        n > 0 makes the root's exponent -1/n for every tensor (ScalableShampoo's option;
        for ``variant="pytorch_optimizer"`` an npoptim extension, 0 is the source's).
    graft_type : str, default: the variant's
        scalable: 'none', 'sgd' (its default), 'adagrad', 'rmsprop', 'sqrt_n',
        'adagrad_normalized' or 'rmsprop_normalized' (optax-shampoo's, g/(‖g‖ + 1e-16) first);
        ``variant="pytorch_optimizer"`` takes 'none' only.
    nesterov : bool, default: True
        scalable: Nesterov momentum.
    moving_average_for_momentum : bool, default: False
        scalable: momenta as moving averages (weight 1 - β1 on the new term).
    decoupled_learning_rate : bool, default: True
        scalable: γ multiplies the momentum step (False: the preconditioned
        gradients).
    diagonal_eps : float, default: 1e-10
        scalable: added to the square root of the AdaGrad/RMSProp graft.
    matrix_eps : float, default: 1e-06
        ε of (2); with ``inverse_root="newton"`` also the ridge's factor on λ_max.
    matrix_eps_mode : str, default: 'added'
        'added': ε I is the statistics' initial value; 'eigenvalues': statistics from zero,
        ε added to the eigenvalues at each root (Meta's; ``inverse_root="eigh"`` only).
    relative_matrix_eps : bool, default: True
        The Newton root's ridge ε λ_max (False: ε; optax-shampoo's
        ``relative_matrix_epsilon``).
    inverse_root : str, default: the variant's
        'eigh' (the default of ``variant="pytorch_optimizer"``): the eigendecomposition
        (pytorch_optimizer's SVD, ``use_svd=True``); 'newton' (``variant="scalable"``'s): the
        coupled Newton iteration.
    newton_rule : str, default: the variant's
        The Newton root's power iteration and stopping rule: 'pytorch_optimizer' or 'optax'
        (:func:`~npoptim.kernels.decompositions.coupled_newton_inverse_root`).
    root_tolerance : float, default: the variant's
        The Newton root stops at max|M - I| <= it (1e-3; ``"optax"``: 1e-6).
    inverse_failure_threshold : float or None, default: the variant's
        A new root whose error is NaN or at least this keeps the previous preconditioner
        (None: never; ``"optax"``: 0.1).
    count_from : int, default: the variant's
        The count the schedules read at the first step: 1 (the step) or 0 (``"optax"``'s
        count).
    decoupled_decay_form : str, default: the variant's
        'before_step' (θ(1 - γλ) first) or 'in_update' (``"optax"``'s: γλθ added to the
        momentum step, then multiplied by γ with the decoupled learning rate).
    clip_by_scaled_gradient_norm : float or None, default: None
        scalable: the RMSProp grafts divided by max(1, rms(D)/c) (optax-shampoo's option).
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    variant : str, default: 'pytorch_optimizer'
        'pytorch_optimizer' (alias 'shampoo'), 'scalable' (alias 'scalable_shampoo') or
        'optax' (alias 'distributed_shampoo'): the algorithm, and the defaults of the
        switches marked "the variant's".
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()``; a flavor
        sets its own (see ``Optimizer.step_scope``).
    """

    @flavored
    def __init__(self, params, lr=1e-3, momentum=0.0, betas=(0.9, 0.999), weight_decay=0.0,
                 *, decoupled_weight_decay=False, fixed_decay=False,
                 preconditioning_compute_steps=VARIANT_DEFAULT,
                 start_preconditioning_step=VARIANT_DEFAULT, statistics_compute_steps=1,
                 block_size=512, no_preconditioning_for_layers_with_dim_gt=VARIANT_DEFAULT,
                 shape_interpretation=True, merge_small_dims_block_size=VARIANT_DEFAULT,
                 skip_preconditioning_rank_lt=VARIANT_DEFAULT, skip_rank_shape=VARIANT_DEFAULT,
                 merge_rule=VARIANT_DEFAULT,
                 inverse_exponent_override=0, graft_type=VARIANT_DEFAULT, nesterov=True,
                 moving_average_for_momentum=False, decoupled_learning_rate=True,
                 diagonal_eps=1e-10, matrix_eps=1e-6, matrix_eps_mode="added",
                 relative_matrix_eps=True, inverse_root=VARIANT_DEFAULT,
                 newton_rule=VARIANT_DEFAULT, root_tolerance=VARIANT_DEFAULT,
                 inverse_failure_threshold=VARIANT_DEFAULT, count_from=VARIANT_DEFAULT,
                 decoupled_decay_form=VARIANT_DEFAULT, clip_by_scaled_gradient_norm=None,
                 maximize=False, variant="pytorch_optimizer"):
        switches = dict(
            inverse_root=inverse_root, graft_type=graft_type,
            preconditioning_compute_steps=preconditioning_compute_steps,
            start_preconditioning_step=start_preconditioning_step,
            no_preconditioning_for_layers_with_dim_gt=no_preconditioning_for_layers_with_dim_gt,
            merge_small_dims_block_size=merge_small_dims_block_size,
            skip_preconditioning_rank_lt=skip_preconditioning_rank_lt,
            skip_rank_shape=skip_rank_shape, merge_rule=merge_rule, count_from=count_from,
            newton_rule=newton_rule,
            root_tolerance=root_tolerance, inverse_failure_threshold=inverse_failure_threshold,
            decoupled_decay_form=decoupled_decay_form)
        self.variant, switches = resolve_variant(VARIANTS, ALIASES, variant, switches)
        super().__init__(params, dict(
            lr=lr, momentum=momentum, betas=betas, weight_decay=weight_decay,
            decoupled_weight_decay=decoupled_weight_decay, fixed_decay=fixed_decay,
            statistics_compute_steps=statistics_compute_steps, block_size=block_size,
            shape_interpretation=shape_interpretation,
            inverse_exponent_override=inverse_exponent_override, nesterov=nesterov,
            moving_average_for_momentum=moving_average_for_momentum,
            decoupled_learning_rate=decoupled_learning_rate, diagonal_eps=diagonal_eps,
            matrix_eps=matrix_eps, matrix_eps_mode=matrix_eps_mode,
            relative_matrix_eps=relative_matrix_eps,
            clip_by_scaled_gradient_norm=clip_by_scaled_gradient_norm, maximize=maximize,
            **switches))

    # ----------------------------------------------------------------------- checks
    def _check_group(self, group):
        check_no_variant(group)
        check_nonnegative(group, "lr", "weight_decay", "diagonal_eps", "matrix_eps")
        check_betas(group["betas"])
        momentum = group["momentum"]
        if not (is_real(momentum) and 0.0 <= momentum <= 1.0):
            raise ValueError(f"momentum must be a number in [0, 1], got {momentum!r}")
        for name in ("preconditioning_compute_steps", "statistics_compute_steps", "block_size",
                     "no_preconditioning_for_layers_with_dim_gt", "merge_small_dims_block_size"):
            value = group[name]
            if name == "merge_small_dims_block_size" and value is None:
                continue  # block_size's
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive whole number, got {value!r}")
        for name in ("start_preconditioning_step", "skip_preconditioning_rank_lt", "count_from"):
            value = group[name]
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"{name} must be a non-negative whole number, got {value!r}")
        if group["count_from"] not in (0, 1):
            raise ValueError(f"count_from must be 0 or 1, got {group['count_from']!r}")
        check_nonnegative(group, "root_tolerance")
        for name in ("inverse_failure_threshold", "clip_by_scaled_gradient_norm"):
            value = group[name]
            if value is not None and not (is_real(value) and value > 0):
                raise ValueError(f"{name} must be None or a positive number, got {value!r}")
        value = group["inverse_exponent_override"]
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError("inverse_exponent_override must be a non-negative whole number, "
                             f"got {value!r}")
        check_flag(group, "decoupled_weight_decay", "fixed_decay", "shape_interpretation",
                   "nesterov", "moving_average_for_momentum", "decoupled_learning_rate",
                   "relative_matrix_eps", "maximize")
        check_choice(group, "graft_type", GRAFT_TYPES)
        check_choice(group, "skip_rank_shape", SKIP_RANK_SHAPES)
        check_choice(group, "merge_rule", MERGE_RULES)
        check_choice(group, "newton_rule", NEWTON_RULES)
        check_choice(group, "decoupled_decay_form", DECOUPLED_DECAY_FORMS)
        check_choice(group, "inverse_root", INVERSE_ROOTS)
        check_choice(group, "matrix_eps_mode", MATRIX_EPS_MODES)
        if group["matrix_eps_mode"] == "eigenvalues" and group["inverse_root"] != "eigh":
            raise ValueError("matrix_eps_mode='eigenvalues' adds eps to the eigenvalues: it "
                             "takes inverse_root='eigh'")
        if self.variant == "pytorch_optimizer" and group["graft_type"] != "none":
            raise ValueError("graft_type: variant='pytorch_optimizer' (pytorch_optimizer's "
                             "Shampoo) has no grafting; use variant='scalable'")

    # ------------------------------------------------------------------------ state
    def _layout(self, shape, group):
        """``(shape, blocks, exponent)`` of the scalable form: the reshaped shape, the block
        slices of a preconditioned parameter (``[]`` if it is not) and the root's order."""
        shape = tuple(shape)
        bound = group["merge_small_dims_block_size"] or group["block_size"]
        reshaped = (merge_small_dims(shape, bound, group["merge_rule"])
                    if group["shape_interpretation"] else shape)
        limit = group["no_preconditioning_for_layers_with_dim_gt"]
        ranked = shape if group["skip_rank_shape"] == "original" else reshaped
        if (len(ranked) < group["skip_preconditioning_rank_lt"] or not reshaped
                or any(d > limit for d in shape)):
            return reshaped, [], 0
        override = group["inverse_exponent_override"]
        return reshaped, block_slices(reshaped, group["block_size"]), (
            override if override > 0 else 2 * len(reshaped))

    def _largest_side(self):
        """The largest statistic's side among every parameter's (optax-shampoo pads its
        statistics to it for one batched root)."""
        sides = [piece.stop - piece.start for group in self.param_groups
                 for p in group["params"] for block in self._layout(p.shape, group)[1]
                 for piece in block]
        return max(sides, default=1)

    def _state_shapes(self, param, group):
        shape = tuple(param.shape)
        if self.variant == "pytorch_optimizer":
            shapes = {"momentum_buffer": shape}
            for i, d in enumerate(shape):
                shapes[f"pre_cond_{i}"] = (d, d)
                shapes[f"inv_pre_cond_{i}"] = (d, d)
            return shapes
        shapes = {"momentum": shape, "graft_momentum": shape}
        if group["graft_type"] not in ("none", "sgd", "sqrt_n"):
            shapes["graft_statistics"] = shape
        reshaped, blocks, _ = self._layout(shape, group)
        k = 0
        for block in blocks:
            for piece in block:
                side = piece.stop - piece.start
                shapes[f"statistics_{k}"] = (side, side)
                shapes[f"preconditioner_{k}"] = (side, side)
                k += 1
        return shapes

    def _init_state(self, param, group):
        state = super()._init_state(param, group)
        eps = group["matrix_eps"] if group["matrix_eps_mode"] == "added" else 0.0
        for name, value in state.items():
            if name.startswith(("pre_cond_", "statistics_")):
                value[...] = np.eye(value.shape[0], dtype=value.dtype) * value.dtype.type(eps)
            elif name.startswith("preconditioner_"):
                value[...] = np.eye(value.shape[0], dtype=value.dtype)
        return state

    # ----------------------------------------------------------------------- update
    def _update(self, param, grad, state, group, index, shape):
        param = param.reshape(shape)
        grad = np.array(grad, dtype=param.dtype).reshape(shape)
        if group["maximize"]:
            grad = -grad
        state["step"] += 1
        if param.size == 0:  # nothing to precondition (torch's reshape(d, -1) would fail)
            return
        if self.variant == "pytorch_optimizer":
            self._simple_step(param, grad, state, group)
        else:
            self._scalable_step(param, grad, state, group)

    def _simple_step(self, param, grad, state, group):
        dtype = param.dtype.type
        step, lr, wd = state["step"], group["lr"], group["weight_decay"]
        buffer = state["momentum_buffer"]
        if group["momentum"] > 0:
            if step == 1:  # the source's buffer is the gradient before maximize negates it
                buffer[...] = -grad if group["maximize"] else grad
            grad = lerp(grad, buffer, group["momentum"])
        if wd != 0:
            if group["decoupled_weight_decay"]:
                param *= dtype(1 - wd * (1.0 if group["fixed_decay"] else lr))
            else:
                grad = grad + dtype(wd) * param
        order = grad.ndim
        exponent = group["inverse_exponent_override"] or 2 * order
        refresh = step % group["preconditioning_compute_steps"] == 0
        preconditioned = grad
        for i in range(order):
            statistic = state[f"pre_cond_{i}"]
            add_statistic(statistic, grad, i, 1.0, 1.0)
            if refresh:
                state[f"inv_pre_cond_{i}"][...] = inverse_root(statistic, exponent, group)[0]
            root = state[f"inv_pre_cond_{i}"]
            # the source: inv @ G for the first dimensions, G^T-unfolded @ inv for the last
            matrix = np.ascontiguousarray(root.T) if i == order - 1 else root
            preconditioned = mode_product(preconditioned, matrix, i)
        buffer[...] = preconditioned
        param -= dtype(lr) * preconditioned

    def _scalable_step(self, param, grad, state, group):
        dtype = param.dtype.type
        lr, wd = group["lr"], group["weight_decay"]
        # the count the schedules read: the step (1 first), or optax-shampoo's (0 first)
        count = state["step"] - 1 + group["count_from"]
        beta1, beta2 = group["betas"]
        graft_type = group["graft_type"]
        moving = group["moving_average_for_momentum"]
        w = (1.0 - beta1) if moving else 1.0
        decoupled_lr = group["decoupled_learning_rate"]
        multiplier = 1.0 if decoupled_lr else lr

        # the graft D
        if graft_type not in ("none", "sgd", "sqrt_n"):
            scaled = grad
            if graft_type.endswith("_normalized"):  # g/(‖g‖ + 1e-16) first
                scaled = grad * dtype(1.0 / (norm(grad) + 1e-16))
            statistics = state["graft_statistics"]
            if graft_type.startswith("adagrad"):
                statistics += scaled * scaled
            else:
                statistics *= dtype(beta2)
                statistics += dtype(1 - beta2 if beta2 != 1.0 else 1.0) * (scaled * scaled)
            graft = scaled / (np.sqrt(statistics) + dtype(group["diagonal_eps"]))
            clip = group["clip_by_scaled_gradient_norm"]
            if clip is not None and graft_type.startswith("rmsprop"):
                rms = norm(graft) / math.sqrt(graft.size)
                graft = graft / dtype(max(1.0, rms / clip))
        elif graft_type == "sqrt_n":
            graft = np.sign(grad)
        else:
            graft = grad
        graft = graft * dtype(multiplier)

        # the Shampoo direction
        reshaped, blocks, exponent = self._layout(grad.shape, group)
        if blocks:
            g = grad.reshape(reshaped)
            rank = len(reshaped)
            weight2 = 1.0 if beta2 == 1.0 else 1.0 - beta2
            if count % group["statistics_compute_steps"] == 0:
                for j, block in enumerate(blocks):
                    for i in range(rank):
                        add_statistic(state[f"statistics_{j * rank + i}"], g[block], i,
                                      beta2, weight2)
            if count % group["preconditioning_compute_steps"] == 0:
                side = self._largest_side() if group["newton_rule"] == "optax" else 1
                for k in range(len(blocks) * rank):
                    root, error = inverse_root(state[f"statistics_{k}"], exponent, group, side)
                    if not root_failed(error, group["inverse_failure_threshold"]):
                        state[f"preconditioner_{k}"][...] = root
            out = np.empty_like(g)
            for j, block in enumerate(blocks):
                piece = g[block]
                for i in range(rank):  # tensordot(G, P, [[0], [0]]): Pᵀ on each mode
                    matrix = np.ascontiguousarray(state[f"preconditioner_{j * rank + i}"].T)
                    piece = mode_product(piece, matrix, i)
                out[block] = piece
            shampoo = out.reshape(grad.shape) * dtype(multiplier)
        else:
            shampoo = graft.copy()
        if graft_type != "none":
            shampoo = shampoo * dtype(norm(graft) / (norm(shampoo) + 1e-16))

        in_update = False
        if wd != 0:
            if not group["decoupled_weight_decay"]:
                graft = graft + dtype(wd) * param
                shampoo = shampoo + dtype(wd) * param
            elif group["decoupled_decay_form"] == "before_step":
                param *= dtype(1 - lr * wd)
            else:
                in_update = True

        momentum, graft_momentum = state["momentum"], state["graft_momentum"]
        if moving:
            momentum[...] = lerp(momentum, shampoo, w)
        else:
            momentum *= dtype(beta1)
            momentum += shampoo
        graft_momentum *= dtype(beta1)
        graft_momentum += graft if w == 1.0 else dtype(w) * graft
        preconditioning = count >= group["start_preconditioning_step"]
        update = momentum if preconditioning else graft_momentum
        if group["nesterov"]:
            new = shampoo if preconditioning else graft
            update = lerp(update, new, w) if moving else dtype(beta1) * update + new
        if in_update:  # optax-shampoo: γλθ joins the step, which γ multiplies again
            update = update + dtype(lr * wd) * param
        param -= dtype(lr if decoupled_lr else 1.0) * update
