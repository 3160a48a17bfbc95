r"""SOAP (Vyas et al., 2024, "SOAP: Improving and Stabilizing Shampoo using Adam",
arXiv 2409.11321): Adam run in the eigenbasis of Shampoo's preconditioner, the basis
refreshed by one power iteration and a QR decomposition every ``precondition_frequency``
steps. pytorch_optimizer 4.1.0's ``SOAP`` by default, the authors' file as
``variant="authors"``, heavyball 3.2.1's ``SOAP`` as ``variant="heavyball"``.

For a parameter whose (possibly merged) shape has sides :math:`d_1, \dots, d_k`, each side
:math:`i` with :math:`d_i \le` ``max_precond_dim`` keeps a statistic :math:`L_i`
(:math:`d_i \times d_i`) and a basis :math:`Q_i`; a larger side keeps neither and is left as it
is (:math:`Q_i = I`). :math:`\mathcal{Q}(X)` applies :math:`Q_i^\top` along every side
:math:`i` of :math:`X`, :math:`\mathcal{Q}^{-1}(X)` applies :math:`Q_i`, and
:math:`G_{(i)}` is the unfolding of :math:`G` along side :math:`i` (:math:`d_i` rows).

The first call only starts the statistics, :math:`L_i = (1-\beta_s) G_{(i)} G_{(i)}^\top`,
and takes :math:`Q_i` from their eigendecompositions (eigenvalues descending, of
:math:`L_i + 10^{-30} I`); the parameter does not move. Each later call, :math:`t = 1, 2,
\dots` (the number of earlier updates plus one), with gradient :math:`G` (negated when
``maximize``), learning rate :math:`\gamma`, ``betas`` :math:`(\beta_1, \beta_2)`,
``shampoo_beta`` :math:`\beta_s` (``None``: :math:`\beta_2`) and weight decay :math:`\lambda`:

.. math::

    \tilde G &= \mathcal{Q}(G)\\
    m_t &= \beta_1 m_{t-1} + (1-\beta_1)\,G                          &&\quad\text{(1)}\\
    v_t &= \beta_2 v_{t-1} + (1-\beta_2)\,\tilde G^2                 &&\quad\text{(2)}\\
    U &= \mathcal{Q}^{-1}\!\big(\mathcal{Q}(m_t) / (\sqrt{v_t} + \epsilon)\big)
                                                                     &&\quad\text{(3)}\\
    \theta &\leftarrow \theta - \gamma\,\frac{\sqrt{1-\beta_2^t}}{1-\beta_1^t}\, U
                                                                     &&\quad\text{(4)}\\
    \theta &\leftarrow \theta\,(1 - \gamma\lambda)\\
    L_i &\leftarrow \beta_s L_i + (1-\beta_s)\, G_{(i)} G_{(i)}^\top &&\quad\text{(5)}

and when :math:`t` is a multiple of ``precondition_frequency``, each :math:`Q_i` is refreshed
(5'): :math:`P = L_i Q_i`, the estimated eigenvalues :math:`\mathrm{diag}(Q_i^\top P)` sort
the columns of :math:`P` descending (and the entries of :math:`v_t` along side :math:`i`
with them), and :math:`Q_i` becomes the Q factor of the sorted :math:`P`.

1. The momentum is kept in the parameter's space (pytorch_optimizer); the authors keep it in
   the eigenbasis and carry it over at each refresh (back with the old basis, forward with the
   new): the same vectors, rounding apart.
2. :math:`v` lives in the eigenbasis and is not rotated at a refresh, only permuted.
3. ``normalize_gradient``: :math:`U \leftarrow U / (\mathrm{RMS}(U) + f)`, :math:`f` the
   ``normalize_floor``.
4. ``correct_bias=False``: the step is :math:`\gamma U`. The bias correction is the
   "eps-hat" form: :math:`\epsilon` is added to :math:`\sqrt{v_t}` before it.
5. A 1-D parameter is preconditioned only with ``precondition_1d`` (:math:`L = g g^\top`);
   else, and for a 0-D one, every side is left alone: Adam.

Sources and where they differ:

* kozistr/pytorch_optimizer ``pytorch_optimizer/optimizer/soap.py`` (``SOAP``, 4.1.0, with
  ``merge_small_dims`` of ``pytorch_optimizer/optimizer/utils/shape.py``): the default,
  ``variant="pytorch_optimizer"``. Defaults ``lr=3e-3``, ``betas=(0.95, 0.95)``,
  ``weight_decay=1e-2``, ``precondition_frequency=10``, ``eps=1e-8``; ``maximize``; the
  normalization floor is ``eps`` (``normalize_floor="eps"``); its merge of small sides
  (``merge_rule="pytorch_optimizer"``) multiplies sides while the product stays
  :math:`\le` ``max_precond_dim``, starting a new side when it would not; a parameter it
  would merge to a single side it reshapes to ``[1]``, which torch refuses (every 1-D
  parameter, and a matrix whose size fits): npoptim refuses it too, with a message, before
  anything changes. The eigendecomposition runs in the parameter's dtype
  (``eigh_dtype="param"``), the refresh's QR in float32 (``.to(torch.float32)``,
  ``qr_dtype="float32"``).
* the authors' nikhilvyas/SOAP ``soap.py`` (commit f42d296, "momentum change", the master
  branch): ``variant="authors"``: normalization by :math:`\mathrm{RMS}(U) + 10^{-30}`
  (``normalize_floor=1e-30``), their merge (``merge_rule="authors"``: the same runs, without
  the side of 1 pytorch_optimizer puts before a first side larger than ``max_precond_dim``,
  and a parameter merged into one side keeps it: a 4x4 matrix with ``max_precond_dim=20``
  is preconditioned as one side of 16), the statistics, eigendecompositions and QR in
  float32 (``.float()``) whatever the parameter's dtype (``eigh_dtype="float32"``,
  ``qr_dtype="float32"``), the momentum in the
  eigenbasis (note 1), no ``maximize``, decay ``p.add_(p, alpha=-lr*wd)`` (the same
  product, rounding apart). Same defaults otherwise (``shampoo_beta=-1`` there means
  :math:`\beta_2`, ``None`` here).
* HomebrewML/HeavyBall 3.2.1's ``SOAP`` (``heavyball/__init__.py`` class ``SOAP``, the
  chain of ``heavyball/chainable.py`` ``scale_by_soap`` and ``_apply_soap_preconditioner``,
  the arithmetic in ``heavyball/utils.py``: ``adam_``, ``beta_debias``, ``update_ggt``,
  ``init_preconditioner``, ``get_orthogonal_matrix_QR``, ``psgd_should_update``,
  ``dim_merger``, ``update_param_``): ``variant="heavyball"``, another form of the same
  algorithm, each difference a switch (pytorch_optimizer and the authors take the other
  value of each: ``eps_mode="added"``, ``debiased_betas=False``, ``decay_after_update=True``,
  ``refresh_lift=0``, ``refresh_schedule="multiples"``, ``basis_order="sorted"``):

  - ``debiased_betas=True``: the bias correction inside the averages. ``m`` (kept in the
    eigenbasis there and carried over at each refresh, as the authors': note 1), ``v`` and
    the statistics decay by :math:`\hat\beta = 1 - (1-\beta)/(1-\beta^k)`, so they hold
    the bias-corrected averages (:math:`k = t` for the moments, :math:`k = t + 1`, the calls
    so far, for the statistics: the first call's :math:`L_i = G_{(i)}G_{(i)}^\top`), and the
    step is :math:`\gamma U`; with ``correct_bias=False`` (not heavyball's) nothing is
    corrected: the plain :math:`\beta` everywhere.
  - ``eps_mode="max"``: :math:`U = \mathcal{Q}^{-1}(\mathcal{Q}(m)/\max(\sqrt{v},
    \epsilon))` (``clamp(min=eps)``); the other two add it (``"added"``).
  - ``decay_after_update=False``: :math:`\theta \leftarrow \theta(1-\gamma\lambda) -
    \gamma U`, the decay of the parameter before the step (the name Adam's switch has).
  - ``refresh_lift=1e-8`` (5''): the power iteration is :math:`P = (L_i + cI)\,Q_i`,
    :math:`c = \max(f, \min(64\,d_i\,\epsilon_{dt}, 1/8))\cdot\max_j|e_j|` with
    :math:`e = \mathrm{diag}(Q_i^\top L_i Q_i)` and :math:`\epsilon_{dt}` the statistic's
    machine epsilon (heavyball lifts the null space of a rank-deficient statistic this way;
    its floor is a fixed 1e-8, not ``eps``).
  - ``refresh_schedule="cumulative"``: the refresh follows heavyball's running Python-float
    sum of ``1/precondition_frequency``, one term per call, the first call included
    (:func:`cumulative_refresh`): a refresh at call :math:`n` (after update :math:`t = n-1`)
    when its integer part goes up, so one call before the other two's multiples of
    :math:`t`, and the sum's rounding moves some a call later still (frequency 3: calls 3,
    7, 9, 12, ..., not 6). The sum is kept per parameter here (its calls), optimizer-wide
    there (its ``step()`` calls): the same for parameters that have a gradient every step.
  - ``basis_order="kept"``: the QR runs on the sorted columns, and its columns are put back
    where their columns of :math:`P` were, ``v`` left alone: the same preconditioner as
    sorting both (``"sorted"``), the state's columns in another order.
  - ``merge_rule="heavyball"`` (with ``merge_dims``, its default there): the first side
    kept, the rest merged from the last one backwards (``npoptim.optim.dimensions``).
  - ``eigh_dtype="param"``, ``qr_dtype="param"``: the decompositions in the statistics'
    dtype, the parameter's.

  Not switches, changing no update: heavyball flips the signs of the QR's columns to make
  :math:`R`'s diagonal positive (the update does not depend on them, below), and a side of
  1 has no statistic there (one of 1 x 1, :math:`Q = \pm 1`, here). What npoptim does not
  take: heavyball's ``storage_dtype`` (default ``"float32"``: a float64 parameter's moments
  rounded to float32 at every step; npoptim keeps all state in the parameter's dtype, which
  is heavyball's default for float32 parameters and its ``storage_dtype="float64"`` for
  float64 ones, as the cross-check runs it), ``warmup_steps`` (use a scheduler), ``palm``
  (the β₂ schedule), ``use_precond_schedule``, ``mars``, ``caution``, clipping, ``split``.
  Its defaults differ (``betas=(0.9, 0.95)``, ``shampoo_beta=0.95``,
  ``precondition_frequency=2``, ``max_precond_dim=2048``, ``merge_dims=True``): the variant
  sets the switches only. Its ``dim_merger`` fails on a 0-d parameter under
  ``merge_dims=True`` (npoptim takes it as Adam). heavyball computes ``beta ** step`` of the
  statistics' decay and its learning rate ``lr * step / step`` as a Python float times an
  int64 tensor, in torch's default dtype (float32): measured against that (the test's
  learning rates and decay are a few bits each, exact in float32), 3.9e-9 of the
  parameters' scale over tests/test_soap.py's 24 steps; with torch's default dtype float64,
  4.4e-16 (the test allows 1e-12), its float64 LAPACK QR and eigh against npoptim's
  fixed-order ones.

**Eigenvectors and the cross-checks.** The update (3) does not change when a column of
:math:`Q_i` changes sign (the sign multiplies :math:`\tilde G` and :math:`\mathcal{Q}(m)`
alike and :math:`v` holds squares), and the QR of :math:`L_i Q_i` does not depend on the
signs of :math:`Q_i`'s columns (a Householder QR of :math:`AD`, :math:`D` a diagonal of
signs, has the same Q). So the trajectory depends on the basis only through its order
(eigenvalues descending) and its span, and npoptim's bases (the fixed-order Jacobi
:func:`npoptim.kernels.decompositions.eigh` and
:func:`npoptim.kernels.decompositions.householder_qr`, LAPACK's sign convention) follow
torch's LAPACK ones within :math:`\epsilon\lVert L\rVert/\mathrm{gap}`. With the QR in the
parameter's float64 on both sides (``qr_dtype="param"``, torch's ``float32`` patched to
float64 in the test), 24 steps with refreshes every 3 agree with pytorch_optimizer to
about 1e-15 of the parameters' scale (measured 4.4e-16; tests/test_soap.py allows 1e-12); with both QRs in float32, as
the sources run, two float32 Householder QRs of the same matrix differ by rounding, about
:math:`10^{-7}` relative in :math:`Q`, and the update moves by as much: the test's bound
there is 1e-6 of the parameters' scale over the same run (measured: 1.9e-8). A statistic with a repeated
eigenvalue (a side larger than the rank of the gradients so far) has no unique basis:
there the implementations may differ by more than rounding (a property of the algorithm).

Written in plain NumPy in the parameter's dtype, products by
:func:`npoptim.kernels.reduction.matmul_of` (a fixed order). Dense gradients only.
"""
import math
from typing import NamedTuple

import numpy as np

from npoptim.kernels.decompositions import eigh, householder_qr
from npoptim.kernels.reduction import matmul_of
from npoptim.optim.dimensions import merge_small_dims
from npoptim.optim.optimizer import Optimizer
from npoptim.optim.options import (VARIANT_DEFAULT, check_betas, check_choice, check_flag,
                                   check_no_variant, check_nonnegative, resolve_variant)

#: The published forms (:func:`npoptim.optim.options.resolve_variant`).
_TWO_SOURCES = dict(eps_mode="added", debiased_betas=False, decay_after_update=True,
                    refresh_lift=0.0, refresh_schedule="multiples", basis_order="sorted")
VARIANTS = {
    "pytorch_optimizer": dict(normalize_floor="eps", merge_rule="pytorch_optimizer",
                              eigh_dtype="param", qr_dtype="float32", **_TWO_SOURCES),
    "authors": dict(normalize_floor=1e-30, merge_rule="authors", eigh_dtype="float32",
                    qr_dtype="float32", **_TWO_SOURCES),
    "heavyball": dict(normalize_floor="eps", merge_rule="heavyball", eigh_dtype="param",
                      qr_dtype="param", eps_mode="max", debiased_betas=True,
                      decay_after_update=False, refresh_lift=1e-8,
                      refresh_schedule="cumulative", basis_order="kept"),
}
ALIASES = {"nikhilvyas": "authors", "kozistr": "pytorch_optimizer", "homebrewml": "heavyball"}
MERGE_RULES = ("pytorch_optimizer", "authors", "heavyball")
DECOMPOSITION_DTYPES = ("param", "float32")
EPS_MODES = ("added", "max")
REFRESH_SCHEDULES = ("multiples", "cumulative")
BASIS_ORDERS = ("sorted", "kept")
#: Added to the diagonal of a statistic before its eigendecomposition (both sources).
EIGH_SHIFT = 1e-30


class SOAPHyper(NamedTuple):
    """The hyperparameters of one SOAP update, as :func:`soap_update` reads them."""
    step_size: float       # γ·sqrt(1-β2^t)/(1-β1^t) (γ without correct_bias or with
                           # debiased_betas)
    beta1: float           # decay of the momentum m (parameter space; debiased_betas: β̂1)
    beta2: float           # decay of v (eigenbasis; debiased_betas: β̂2)
    shampoo_beta: float    # decay of the statistics L_i (debiased_betas: β̂s)
    eps: float             # added to sqrt(v) (eps_mode="added") or its floor ("max")
    eps_mode: str          # "added" or "max"
    decay: float           # γλ: θ ← θ(1 - γλ)
    decay_after_update: bool  # the decay after the step (else before it)
    normalize: bool        # divide U by RMS(U) + normalize_floor
    normalize_floor: float  # the floor of the normalization
    refresh: bool          # refresh the bases after (5)
    qr_dtype: str          # "param" or "float32": the dtype of the refresh's QR
    refresh_lift: float    # f of the refresh's shift (5''); 0: no shift
    basis_order: str       # "sorted" (columns and v sorted) or "kept" (columns in place)


def preconditioned_shape(shape, group):
    """``(sides, factored)``: the shape the update works on and, per side, whether it has a
    statistic and a basis."""
    max_dim = group["max_precond_dim"]
    if len(shape) <= 1:
        factored = (len(shape) == 1 and group["precondition_1d"] and shape[0] <= max_dim,)
        return tuple(shape), factored[:len(shape)]
    sides = merge_small_dims(shape, max_dim, group["merge_rule"]) if group["merge_dims"] \
        else tuple(shape)
    return sides, tuple(side <= max_dim for side in sides)


# ------------------------------------------------------------------------ the update
def along(x, axis, matrix):
    """``matrix`` (r x d_axis) applied along ``axis`` of ``x`` (fixed-order products)."""
    moved = np.moveaxis(x, axis, 0)
    rest = moved.shape[1:]
    out = matmul_of(matrix, np.ascontiguousarray(moved).reshape(moved.shape[0], -1))
    return np.moveaxis(out.reshape((matrix.shape[0],) + rest), 0, axis)


def project(x, bases, back=False):
    """:math:`\\mathcal{Q}(x)` (``Q_i^T`` along each side with a basis), or with ``back``
    :math:`\\mathcal{Q}^{-1}(x)` (``Q_i``)."""
    for axis, q in enumerate(bases):
        if q is not None:
            x = along(x, axis, q if back else np.ascontiguousarray(q.T))
    return x


def side_statistic(g, axis):
    """:math:`G_{(i)} G_{(i)}^\\top` over ``axis`` (exactly symmetric: each entry's products
    summed in one order)."""
    unfolded = np.ascontiguousarray(np.moveaxis(g, axis, 0)).reshape(g.shape[axis], -1)
    return matmul_of(unfolded, np.ascontiguousarray(unfolded.T))


def eigenbasis(statistic, dtype_rule):
    """The eigenvectors of ``statistic + 1e-30 I``, eigenvalues descending (the sources'
    ``torch.flip`` of ``eigh``'s ascending order), in ``dtype_rule``'s dtype."""
    work = statistic.astype(np.float32) if dtype_rule == "float32" else statistic
    shifted = work + np.eye(work.shape[0], dtype=work.dtype) * work.dtype.type(EIGH_SHIFT)
    _, vectors = eigh(shifted)
    return np.ascontiguousarray(vectors[:, ::-1]).astype(statistic.dtype)


def refresh_shift(statistic, estimates, lift):
    r"""(5''): heavyball's shift :math:`c = \max(f, \min(64\,d\,\epsilon_{dt}, 1/8))
    \cdot\max(\max_j|e_j|, \text{tiny})` of the power iteration, in the statistic's dtype
    ``dt`` (:math:`\epsilon_{dt}`, tiny: its machine epsilon and smallest normal)."""
    info = np.finfo(statistic.dtype)
    dtype = statistic.dtype.type
    magnitude = max(np.max(np.abs(estimates)), dtype(info.tiny))
    margin = max(dtype(lift), dtype(min(64 * statistic.shape[0] * float(info.eps), 0.125)))
    return margin * magnitude


def refreshed_basis(statistic, basis, v, axis, qr_dtype, lift=0.0, basis_order="sorted"):
    """(5'): one power iteration ``P = L Q`` (plus ``c Q``, (5''), when ``lift``), the
    columns sorted by ``diag(Q^T P)`` descending for the QR, and ``v`` permuted the same way
    along ``axis`` (``basis_order="sorted"``), or the QR's columns put back where their
    columns of ``P`` were and ``v`` left alone (``"kept"``: the same preconditioner);
    returns ``(new basis, v)``."""
    power = matmul_of(statistic, basis)
    estimates = np.sum(basis * power, axis=0)
    order = np.argsort(-estimates, kind="stable")
    if lift:
        power = power + refresh_shift(statistic, estimates, lift) * basis
    sorted_power = np.ascontiguousarray(power[:, order])
    if qr_dtype == "float32":
        q, _ = householder_qr(sorted_power.astype(np.float32))
        q = q.astype(statistic.dtype)
    else:
        q, _ = householder_qr(sorted_power)
    if basis_order == "kept":
        kept = np.empty_like(q)
        kept[:, order] = q
        return kept, v
    return q, np.take(v, order, axis=axis)


#: The running sums of heavyball's schedule (:func:`cumulative_refresh`): ``{frequency:
#: (calls, sum)}``, so that a run's steps cost one addition each.
_CUMULATIVE_SUMS = {}


def cumulative_refresh(frequency, call):
    r"""heavyball's ``psgd_should_update`` with the probability ``1/frequency``: the Python
    float sum :math:`s_n = s_{n-1} + 1/f` (:math:`s_0 = 0`, one term per call, the first
    included) and a refresh at call :math:`n` when :math:`\lfloor s_n\rfloor >
    \lfloor s_{n-1}\rfloor`. The rounding of the sum moves some refreshes a call later
    than the multiples of ``frequency`` (``frequency=3``: calls 3, 7, 9, 12, ...)."""
    p = 1 / frequency
    calls, total = _CUMULATIVE_SUMS.get(frequency, (0, 0.0))
    if calls > call - 1:
        calls, total = 0, 0.0
    while calls < call - 1:
        total += p
        calls += 1
    _CUMULATIVE_SUMS[frequency] = (calls, total)
    return int(total + p) > int(total)


def debiased(beta, k):
    r"""heavyball's ``beta_debias``: :math:`\hat\beta = 1 - (1-\beta)/(1-\beta^k)`, the
    decay whose average of :math:`k` values is already bias-corrected."""
    return 1 - (1 - beta) / (1 - beta ** k)


def soap_update(param, grad, statistics, bases, m, v, hyper):
    """One SOAP update (t >= 1) of ``param`` (in place, the preconditioned shape), the
    momentum ``m`` (in place), the statistics (in place) and the ``bases`` list (replaced
    on a refresh); returns the new ``v``."""
    dtype = param.dtype.type
    projected = project(grad, bases)
    m += dtype(1 - hyper.beta1) * (grad - m)
    v += dtype(1 - hyper.beta2) * (projected * projected - v)
    if hyper.eps_mode == "max":
        denom = np.maximum(np.sqrt(v), dtype(hyper.eps))
    else:
        denom = np.sqrt(v) + dtype(hyper.eps)
    update = project(project(m, bases) / denom, bases, back=True)
    if hyper.normalize:
        rms = np.sqrt(np.sum(update * update) / dtype(update.size))
        update = update / (rms + dtype(hyper.normalize_floor))
    if hyper.decay != 0 and not hyper.decay_after_update:
        param *= dtype(1 - hyper.decay)
    param -= dtype(hyper.step_size) * update
    if hyper.decay != 0 and hyper.decay_after_update:
        param *= dtype(1 - hyper.decay)
    accumulate(grad, statistics, hyper.shampoo_beta)
    if hyper.refresh:
        for axis, (statistic, basis) in enumerate(zip(statistics, bases)):
            if basis is not None:
                bases[axis], v = refreshed_basis(statistic, basis, v, axis, hyper.qr_dtype,
                                                 hyper.refresh_lift, hyper.basis_order)
    return v


def accumulate(grad, statistics, beta):
    """(5): ``L_i ← L_i + (1-β)(G_(i) G_(i)^T - L_i)`` (torch's ``lerp_``) for each side
    with a statistic."""
    dtype = grad.dtype.type
    for axis, statistic in enumerate(statistics):
        if statistic is not None:
            statistic += dtype(1 - beta) * (side_statistic(grad, axis) - statistic)


class SOAP(Optimizer):
    """SOAP, pytorch_optimizer 4.1.0's ``SOAP`` (``variant="authors"``: the authors'
    ``soap.py``; ``variant="heavyball"``: heavyball 3.2.1's; see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.003
        Learning rate γ.
    betas : tuple (float, float), default: (0.95, 0.95)
        Decays of the momentum and of the second moment in the eigenbasis.
    shampoo_beta : float or None, default: None
        Decay of the statistics L_i (None: β2).
    eps : float, default: 1e-08
        Added to sqrt(v) in the eigenbasis.
    weight_decay : float, default: 0.01
        Decoupled weight decay λ: θ ← θ(1 - γλ) after the step.
    precondition_frequency : int, default: 10
        The bases are refreshed (power iteration and QR) after updates t that are multiples
        of it.
    max_precond_dim : int, default: 10000
        A side larger than this has no statistic and no basis.
    merge_dims : bool, default: False
        Precondition over runs of sides merged while their product fits ``max_precond_dim``.
    precondition_1d : bool, default: False
        Precondition a 1-D parameter (a full ``n x n`` statistic).
    normalize_gradient : bool, default: False
        Divide the update by its RMS plus ``normalize_floor``.
    correct_bias : bool, default: True
        Scale the step by sqrt(1-β2^t)/(1-β1^t).
    maximize : bool, default: False
        Maximize the objective: the gradient is negated (pytorch_optimizer).
    variant : {"pytorch_optimizer", "authors", "heavyball"}, default: 'pytorch_optimizer'
        The published form whose switches are the defaults of the next ten.
    normalize_floor : float or "eps", default: the variant's
        The normalization's floor: "eps" (pytorch_optimizer) or a number (the authors' 1e-30).
    merge_rule : {"pytorch_optimizer", "authors"}, default: the variant's
        Whose merge of small sides ``merge_dims`` uses.
    eigh_dtype : {"param", "float32"}, default: the variant's
        The dtype of the first eigendecompositions (the authors': float32).
    qr_dtype : {"param", "float32"}, default: the variant's
        The dtype of the refresh's QR (pytorch_optimizer and the authors: float32).
    eps_mode : {"added", "max"}, default: the variant's
        ε added to sqrt(v), or a floor: max(sqrt(v), ε) (heavyball).
    debiased_betas : bool, default: the variant's
        heavyball's bias correction inside the averages: m, v and the L_i decay by
        1 - (1-β)/(1-β^k) and the step is γ U (with ``correct_bias=False``: plain β, no
        correction anywhere).
    decay_after_update : bool, default: the variant's
        θ ← θ(1 - γλ) after the step (pytorch_optimizer, the authors), else before it.
    refresh_lift : float, default: the variant's
        heavyball's floor f of the power iteration's shift (5''); 0: no shift.
    refresh_schedule : {"multiples", "cumulative"}, default: the variant's
        Refresh after updates t that are multiples of ``precondition_frequency``, or at
        heavyball's cumulative sum of 1/frequency.
    basis_order : {"sorted", "kept"}, default: the variant's
        The refreshed columns (and v) sorted by eigenvalue, or left where they were.
    """

    def __init__(self, params, lr=3e-3, betas=(0.95, 0.95), shampoo_beta=None, eps=1e-8,
                 weight_decay=1e-2, precondition_frequency=10, max_precond_dim=10000,
                 merge_dims=False, precondition_1d=False, normalize_gradient=False,
                 correct_bias=True, *, maximize=False, variant="pytorch_optimizer",
                 normalize_floor=VARIANT_DEFAULT, merge_rule=VARIANT_DEFAULT,
                 eigh_dtype=VARIANT_DEFAULT, qr_dtype=VARIANT_DEFAULT,
                 eps_mode=VARIANT_DEFAULT, debiased_betas=VARIANT_DEFAULT,
                 decay_after_update=VARIANT_DEFAULT, refresh_lift=VARIANT_DEFAULT,
                 refresh_schedule=VARIANT_DEFAULT, basis_order=VARIANT_DEFAULT):
        self.variant, switches = resolve_variant(
            VARIANTS, ALIASES, variant, dict(
                normalize_floor=normalize_floor, merge_rule=merge_rule, eigh_dtype=eigh_dtype,
                qr_dtype=qr_dtype, eps_mode=eps_mode, debiased_betas=debiased_betas,
                decay_after_update=decay_after_update, refresh_lift=refresh_lift,
                refresh_schedule=refresh_schedule, basis_order=basis_order))
        super().__init__(params, dict(
            lr=lr, betas=betas, shampoo_beta=shampoo_beta, eps=eps, weight_decay=weight_decay,
            precondition_frequency=precondition_frequency, max_precond_dim=max_precond_dim,
            merge_dims=merge_dims, precondition_1d=precondition_1d,
            normalize_gradient=normalize_gradient, correct_bias=correct_bias,
            maximize=maximize, **switches))

    def _check_group(self, group):
        check_no_variant(group)
        check_nonnegative(group, "lr", "eps", "weight_decay")
        check_betas(group["betas"])
        beta = group["shampoo_beta"]
        if beta is not None and (isinstance(beta, bool) or not isinstance(beta, (int, float))
                                 or not 0 <= beta < 1):
            raise ValueError(f"shampoo_beta must be None or in [0, 1), got {beta!r}")
        for name in ("precondition_frequency", "max_precond_dim"):
            value = group[name]
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        check_flag(group, "merge_dims", "precondition_1d", "normalize_gradient",
                   "correct_bias", "maximize", "debiased_betas", "decay_after_update")
        lift = group["refresh_lift"]
        if isinstance(lift, bool) or not isinstance(lift, (int, float)) or not 0 <= lift < 1:
            raise ValueError(f"refresh_lift must be a number in [0, 1), got {lift!r}")
        floor = group["normalize_floor"]
        if floor != "eps" and (isinstance(floor, bool) or not isinstance(floor, (int, float))
                               or not floor >= 0):
            raise ValueError(f"normalize_floor must be 'eps' or a non-negative number, "
                             f"got {floor!r}")
        check_choice(group, "merge_rule", MERGE_RULES)
        check_choice(group, "eigh_dtype", DECOMPOSITION_DTYPES)
        check_choice(group, "qr_dtype", DECOMPOSITION_DTYPES)
        check_choice(group, "eps_mode", EPS_MODES)
        check_choice(group, "refresh_schedule", REFRESH_SCHEDULES)
        check_choice(group, "basis_order", BASIS_ORDERS)

    def _state_shapes(self, param, group):
        sides, factored = preconditioned_shape(param.shape, group)
        shapes = {"exp_avg": param.shape, "exp_avg_sq": param.shape}
        for i, (side, has) in enumerate(zip(sides, factored)):
            shapes[f"GG{i}"] = (side, side) if has else (0, 0)
            shapes[f"Q{i}"] = (side, side) if has else (0, 0)
        return shapes

    def _prepare(self, grads):
        prepared = super()._prepare(grads)
        for group, index, param, grad in prepared:
            sides, _ = preconditioned_shape(param.shape, group)
            if math.prod(sides) != param.size:
                raise ValueError(
                    f"params[{index}] has shape {param.shape}, which pytorch_optimizer's "
                    f"merge_small_dims (merge_dims=True) merges to {list(sides)}: torch "
                    "cannot reshape it (use merge_rule='authors' or merge_dims=False)")
            if param.size == 0:
                raise ValueError(f"params[{index}] has no elements")
            if group["eigh_dtype"] == "float32" or group["qr_dtype"] == "float32":
                with np.errstate(over="ignore"):
                    narrowed = grad.astype(np.float32)
                if not np.all(np.isfinite(narrowed)):
                    raise FloatingPointError(f"grads[{index}] overflows float32, the dtype "
                                             "of SOAP's decompositions here")
        return prepared

    def _update(self, param, grad, state, group, index, shape):
        if group["maximize"]:
            grad = -grad
        sides, factored = preconditioned_shape(shape, group)
        p = param.reshape(sides)
        g = grad.reshape(sides)
        beta1, beta2 = group["betas"]
        shampoo_beta = beta2 if group["shampoo_beta"] is None else group["shampoo_beta"]
        statistics = [state[f"GG{i}"] if has else None for i, has in enumerate(factored)]
        bases = [state[f"Q{i}"] if has else None for i, has in enumerate(factored)]
        debias = group["debiased_betas"] and group["correct_bias"]
        if state["step"] == 0:   # the first call: statistics and bases only
            accumulate(g, statistics, 0.0 if debias else shampoo_beta)
            for i, statistic in enumerate(statistics):
                if statistic is not None:
                    state[f"Q{i}"][...] = eigenbasis(statistic, group["eigh_dtype"])
            state["step"] = 1
            return
        t = state["step"]
        step_size = group["lr"]
        if debias:   # heavyball: the averages are bias-corrected, the statistics over t + 1
            beta1, beta2 = debiased(beta1, t), debiased(beta2, t)
            shampoo_beta = debiased(shampoo_beta, t + 1)
        elif group["correct_bias"]:
            step_size = step_size * math.sqrt(1.0 - beta2 ** t) / (1.0 - beta1 ** t)
        frequency = group["precondition_frequency"]
        if group["refresh_schedule"] == "cumulative":
            refresh = cumulative_refresh(frequency, t + 1)
        else:
            refresh = t % frequency == 0
        floor = group["eps"] if group["normalize_floor"] == "eps" else group["normalize_floor"]
        hyper = SOAPHyper(step_size=step_size, beta1=beta1, beta2=beta2,
                          shampoo_beta=shampoo_beta, eps=group["eps"],
                          eps_mode=group["eps_mode"],
                          decay=group["lr"] * group["weight_decay"],
                          decay_after_update=group["decay_after_update"],
                          normalize=group["normalize_gradient"], normalize_floor=floor,
                          refresh=refresh, qr_dtype=group["qr_dtype"],
                          refresh_lift=group["refresh_lift"], basis_order=group["basis_order"])
        m = state["exp_avg"].reshape(sides)
        v = state["exp_avg_sq"].reshape(sides)
        new_v = soap_update(p, g, statistics, bases, m, v.copy(), hyper)
        v[...] = new_v
        for i, basis in enumerate(bases):
            if basis is not None:
                state[f"Q{i}"][...] = basis
        state["step"] = t + 1
