r"""SOAP (Vyas et al., 2024, "SOAP: Improving and Stabilizing Shampoo using Adam",
arXiv 2409.11321): Adam run in the eigenbasis of Shampoo's preconditioner, the basis
refreshed by one power iteration and a QR decomposition every ``precondition_frequency``
steps. pytorch_optimizer 4.1.0's ``SOAP`` by default, the authors' file as
``variant="authors"``.

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
* heavyball 3.2.1's ``SOAP`` (``heavyball/__init__.py``, ``chainable.py``'s
  ``scale_by_soap``; installed and read, not run against this module, not pinned) is another
  form: its momentum of the *projected* gradient through ``utils.adam_`` with debiased betas
  (:math:`1 - (1-\beta)/(1-\beta^t)`, the bias correction inside the averages) and eps as a
  floor (``clamp(min=eps)``), state stored in float32 (``storage_dtype``), ``merge_dims=True``,
  ``precondition_frequency=2`` and ``max_precond_dim=2048`` by default, with clipping,
  PaLM's β₂ schedule and a precondition schedule as options: none of them a switch here.

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
VARIANTS = {
    "pytorch_optimizer": dict(normalize_floor="eps", merge_rule="pytorch_optimizer",
                              eigh_dtype="param", qr_dtype="float32"),
    "authors": dict(normalize_floor=1e-30, merge_rule="authors", eigh_dtype="float32",
                    qr_dtype="float32"),
}
ALIASES = {"nikhilvyas": "authors", "kozistr": "pytorch_optimizer"}
MERGE_RULES = ("pytorch_optimizer", "authors")
DECOMPOSITION_DTYPES = ("param", "float32")
#: Added to the diagonal of a statistic before its eigendecomposition (both sources).
EIGH_SHIFT = 1e-30


class SOAPHyper(NamedTuple):
    """The hyperparameters of one SOAP update, as :func:`soap_update` reads them."""
    step_size: float       # γ·sqrt(1-β2^t)/(1-β1^t) (γ without correct_bias)
    beta1: float           # decay of the momentum m (parameter space)
    beta2: float           # decay of v (eigenbasis)
    shampoo_beta: float    # decay of the statistics L_i
    eps: float             # added to sqrt(v)
    decay: float           # γλ: θ ← θ(1 - γλ) after the step
    normalize: bool        # divide U by RMS(U) + normalize_floor
    normalize_floor: float  # the floor of the normalization
    refresh: bool          # refresh the bases after (5) (t a multiple of the frequency)
    qr_dtype: str          # "param" or "float32": the dtype of the refresh's QR


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


def refreshed_basis(statistic, basis, v, axis, qr_dtype):
    """(5'): one power iteration ``P = L Q``, columns sorted by ``diag(Q^T P)`` descending,
    and ``v`` permuted the same way along ``axis``; returns ``(new basis, permuted v)``."""
    power = matmul_of(statistic, basis)
    estimates = np.sum(basis * power, axis=0)
    order = np.argsort(-estimates, kind="stable")
    v = np.take(v, order, axis=axis)
    power = np.ascontiguousarray(power[:, order])
    if qr_dtype == "float32":
        q, _ = householder_qr(power.astype(np.float32))
        return q.astype(statistic.dtype), v
    q, _ = householder_qr(power)
    return q, v


def soap_update(param, grad, statistics, bases, m, v, hyper):
    """One SOAP update (t >= 1) of ``param`` (in place, the preconditioned shape), the
    momentum ``m`` (in place), the statistics (in place) and the ``bases`` list (replaced
    on a refresh); returns the new ``v``."""
    dtype = param.dtype.type
    projected = project(grad, bases)
    m += dtype(1 - hyper.beta1) * (grad - m)
    v += dtype(1 - hyper.beta2) * (projected * projected - v)
    denom = np.sqrt(v) + dtype(hyper.eps)
    update = project(project(m, bases) / denom, bases, back=True)
    if hyper.normalize:
        rms = np.sqrt(np.sum(update * update) / dtype(update.size))
        update = update / (rms + dtype(hyper.normalize_floor))
    param -= dtype(hyper.step_size) * update
    if hyper.decay != 0:
        param *= dtype(1 - hyper.decay)
    accumulate(grad, statistics, hyper.shampoo_beta)
    if hyper.refresh:
        for axis, (statistic, basis) in enumerate(zip(statistics, bases)):
            if basis is not None:
                bases[axis], v = refreshed_basis(statistic, basis, v, axis, hyper.qr_dtype)
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
    ``soap.py``; see the module docstring).

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
    variant : {"pytorch_optimizer", "authors"}, default: 'pytorch_optimizer'
        The published form whose switches are the defaults of the next four.
    normalize_floor : float or "eps", default: the variant's
        The normalization's floor: "eps" (pytorch_optimizer) or a number (the authors' 1e-30).
    merge_rule : {"pytorch_optimizer", "authors"}, default: the variant's
        Whose merge of small sides ``merge_dims`` uses.
    eigh_dtype : {"param", "float32"}, default: the variant's
        The dtype of the first eigendecompositions (the authors': float32).
    qr_dtype : {"param", "float32"}, default: the variant's
        The dtype of the refresh's QR (both sources: float32).
    """

    def __init__(self, params, lr=3e-3, betas=(0.95, 0.95), shampoo_beta=None, eps=1e-8,
                 weight_decay=1e-2, precondition_frequency=10, max_precond_dim=10000,
                 merge_dims=False, precondition_1d=False, normalize_gradient=False,
                 correct_bias=True, *, maximize=False, variant="pytorch_optimizer",
                 normalize_floor=VARIANT_DEFAULT, merge_rule=VARIANT_DEFAULT,
                 eigh_dtype=VARIANT_DEFAULT, qr_dtype=VARIANT_DEFAULT):
        self.variant, switches = resolve_variant(
            VARIANTS, ALIASES, variant, dict(normalize_floor=normalize_floor,
                                             merge_rule=merge_rule, eigh_dtype=eigh_dtype,
                                             qr_dtype=qr_dtype))
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
                   "correct_bias", "maximize")
        floor = group["normalize_floor"]
        if floor != "eps" and (isinstance(floor, bool) or not isinstance(floor, (int, float))
                               or not floor >= 0):
            raise ValueError(f"normalize_floor must be 'eps' or a non-negative number, "
                             f"got {floor!r}")
        check_choice(group, "merge_rule", MERGE_RULES)
        check_choice(group, "eigh_dtype", DECOMPOSITION_DTYPES)
        check_choice(group, "qr_dtype", DECOMPOSITION_DTYPES)

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
        if state["step"] == 0:   # the first call: statistics and bases only
            accumulate(g, statistics, shampoo_beta)
            for i, statistic in enumerate(statistics):
                if statistic is not None:
                    state[f"Q{i}"][...] = eigenbasis(statistic, group["eigh_dtype"])
            state["step"] = 1
            return
        t = state["step"]
        step_size = group["lr"]
        if group["correct_bias"]:
            step_size = step_size * math.sqrt(1.0 - beta2 ** t) / (1.0 - beta1 ** t)
        floor = group["eps"] if group["normalize_floor"] == "eps" else group["normalize_floor"]
        hyper = SOAPHyper(step_size=step_size, beta1=beta1, beta2=beta2,
                          shampoo_beta=shampoo_beta, eps=group["eps"],
                          decay=group["lr"] * group["weight_decay"],
                          normalize=group["normalize_gradient"], normalize_floor=floor,
                          refresh=t % group["precondition_frequency"] == 0,
                          qr_dtype=group["qr_dtype"])
        m = state["exp_avg"].reshape(sides)
        v = state["exp_avg_sq"].reshape(sides)
        new_v = soap_update(p, g, statistics, bases, m, v.copy(), hyper)
        v[...] = new_v
        for i, basis in enumerate(bases):
            if basis is not None:
                state[f"Q{i}"][...] = basis
        state["step"] = t + 1
