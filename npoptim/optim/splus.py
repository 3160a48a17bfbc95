r"""SPlus (Frans et al., 2025, "A Stable Whitening Optimizer for Efficient Neural Network
Training", arXiv 2506.07254): the sign of the momentum in the eigenbasis of Shampoo's two
side statistics, an lr scaled by the matrix's shape, and an EMA of the parameters to
evaluate with. pytorch_optimizer 4.1.0's ``SPlus`` by default, the authors' torch file as
``variant="authors"``.

At step :math:`t` (from 1), with gradient :math:`G` (negated when ``maximize``), learning rate
:math:`\gamma`, ``betas`` :math:`(\beta_1, \beta_2)`, ``ema_rate`` :math:`r`, weight decay
:math:`\lambda`, for an :math:`m\times n` matrix whose sides are both below ``max_dim``:

.. math::

    \mu_t &= \beta_1 \mu_{t-1} + (1-\beta_1)\,G\\
    L &\leftarrow \beta_2 L + (1-\beta_2)\, G G^\top, \qquad
    R \leftarrow \beta_2 R + (1-\beta_2)\, G^\top G                      &&\quad\text{(1)}\\
    U &= Q_L\, \mathrm{sign}\big(Q_L^\top \mu_t Q_R\big)\, Q_R^\top        &&\quad\text{(2)}\\
    \theta &\leftarrow \theta - \gamma s\, U, \qquad s = \frac{2}{m+n}    &&\quad\text{(3)}\\
    e_t &= r\, e_{t-1} + (1-r)\,\theta                                   &&\quad\text{(4)}\\
    \theta &\leftarrow \theta\,(1 - \gamma s \lambda)                     &&\quad\text{(5)}

and at :math:`t = 1` and every ``inverse_steps``-th step, after (2), :math:`Q_L` and
:math:`Q_R` become the eigenvectors of :math:`L + \epsilon I` and :math:`R + \epsilon I`
(they start as the identity, so the first update is the sign of the momentum).

1. A side of ``max_dim`` or more has no statistic (its :math:`Q` is the identity); a
   parameter that is not a matrix, or a matrix with a side *larger* than ``max_dim``, takes
   :math:`s` = ``nonstandard_constant`` instead (so a side of exactly ``max_dim`` has no
   statistic but keeps :math:`2/(m+n)`, as the source's ``<`` and ``>`` say). Not a matrix:
   :math:`U = \mathrm{sign}(\mu_t)`.
2. The sign is 0 at 0 (torch's ``sign``).
3. ``variant="authors"``: :math:`s = 1/(2(m+n))`.
4. The EMA reads the parameter after the step and before the decay.
5. ``decoupled_weight_decay=False``: :math:`G \leftarrow G + \lambda\theta` first (the
   statistics see it too), no (5); ``fixed_decay``: :math:`\theta(1-\lambda)`.

**Evaluation parameters.** :meth:`SPlus.eval` swaps every parameter for its bias-corrected
EMA, :math:`e_t \cdot (1/(1-r^t))` (a product by the reciprocal, as the sources compute it),
keeping the training values, and :meth:`SPlus.train` puts them back;
:meth:`SPlus.ema_params` returns the same arrays without touching the parameters (the
authors' optax ``splus_get_eval_params``, which divides: rounding apart).

Sources and where they differ:

* kozistr/pytorch_optimizer ``pytorch_optimizer/optimizer/splus.py`` (``SPlus``, 4.1.0): the
  default. Defaults ``lr=0.1``, ``betas=(0.9, 0.999)``, ``weight_decay=1e-2``,
  ``ema_rate=0.999``, ``inverse_steps=100``, ``nonstandard_constant=1e-3``,
  ``max_dim=10000``, ``eps=1e-30``; ``maximize``, ``weight_decouple`` (here
  ``decoupled_weight_decay``), ``fixed_decay``; its ``foreach`` path (the non-matrix
  parameters) is the same arithmetic. Its eigendecompositions run in float32
  (``sides[0].float()``) whatever the parameter's dtype: ``eigh_dtype="float32"``. It counts
  steps per param group.
* the authors' kvfrans/splus ``torch/splus.py`` (``SPlus``): ``variant="authors"``:
  :math:`s = 1/(2(m+n))` (``lr * (1 / (m + n) / 2)``, a quarter of the paper's and
  pytorch_optimizer's :math:`2/(m+n)`; ``matrix_scale="half_over_sum"``), the
  eigendecompositions in the statistics' dtype (``eigh_dtype="param"``), decoupled decay
  only, no ``maximize``. ``b1``, ``b2``, ``inverse_every`` are its names of ``betas``
  and ``inverse_steps``.
* the authors' ``optax/splus.py`` (read, not implemented): the EMA of the parameters
  *before* the step, the decay added to the update before the lr, and :math:`s = 1/m` for a
  matrix not named ``embed``/``layernorm``.

**Eigenvectors and the cross-checks.** :math:`U` in (2) does not change when a column of
:math:`Q_L` or :math:`Q_R` changes sign, or when the columns are permuted (the sign is taken
entry by entry), so only the eigenspaces matter, and npoptim's
(:func:`npoptim.kernels.decompositions.eigh`, fixed-order Jacobi up to its side limit) are
LAPACK's within :math:`\epsilon\lVert L\rVert/\mathrm{gap}`. With both decompositions in
float64 (``eigh_dtype="param"``, torch's ``Tensor.float`` patched to keep float64 in the
test) 24 steps with refreshes every 3 agree with pytorch_optimizer to 3e-15 of the
parameters' scale (measured; tests/test_splus.py allows 1e-12), the EMA evaluation
parameters too. In float32 the two bases differ by rounding
(about :math:`10^{-7}`) and :math:`U` moves by as much, unless an entry of
:math:`Q_L^\top \mu Q_R` is within that of 0 and changes sign (a jump of :math:`2\gamma s`
on that entry): the float32 comparison's bound is 1e-5 of the parameters' scale on runs
without such an entry (measured: 2.0e-6 over the 24 steps, the rounding of every refresh
carried forward). A statistic with a repeated eigenvalue (a side larger than the rank
of the gradients so far) has no unique basis, and :math:`U` depends on the basis chosen
there: the cross-checks take full-rank sides.

Written in plain NumPy in the parameter's dtype, products by
:func:`npoptim.kernels.reduction.matmul_of` (a fixed order). Dense gradients only.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.decompositions import eigh
from npoptim.kernels.reduction import matmul_of
from npoptim.optim.optimizer import Optimizer
from npoptim.optim.options import (VARIANT_DEFAULT, check_betas, check_choice, check_flag,
                                   check_no_variant, check_nonnegative, resolve_variant)

#: The published forms (:func:`npoptim.optim.options.resolve_variant`).
VARIANTS = {
    "pytorch_optimizer": dict(matrix_scale="two_over_sum", eigh_dtype="float32"),
    "authors": dict(matrix_scale="half_over_sum", eigh_dtype="param"),
}
ALIASES = {"kvfrans": "authors", "kozistr": "pytorch_optimizer"}
MATRIX_SCALES = ("two_over_sum", "half_over_sum")
EIGH_DTYPES = ("float32", "param")


class SPlusHyper(NamedTuple):
    """The hyperparameters of one SPlus step, as :func:`splus_update` reads them."""
    scaled_lr: float   # γ s
    beta1: float       # decay of the momentum μ
    beta2: float       # decay of the side statistics L, R
    ema_rate: float    # r: e ← r e + (1-r) θ
    decay_rate: float  # θ ← θ(1 - decay_rate) after the EMA (γsλ, or λ with fixed_decay)
    l2: float          # G ← G + l2 θ first (0 unless decoupled_weight_decay=False)
    refresh: bool      # recompute Q_L, Q_R after (2) (t = 1 or a multiple of inverse_steps)
    eps: float         # ε I added before each eigendecomposition
    eigh_dtype: str    # "float32" or "param": the eigendecomposition's dtype


def has_side(side, max_dim):
    """Whether a matrix side keeps a statistic: below ``max_dim`` (the source's ``<``)."""
    return side < max_dim


def shape_scale(shape, group):
    """:math:`s`: ``2/(m+n)`` (or ``1/(2(m+n))``) for a matrix with no side above
    ``max_dim`` (the source's ``>``), else ``nonstandard_constant``."""
    if len(shape) != 2 or shape[0] > group["max_dim"] or shape[1] > group["max_dim"]:
        return group["nonstandard_constant"]
    if group["matrix_scale"] == "half_over_sum":
        return 1 / (shape[0] + shape[1]) / 2
    return 2.0 / (shape[0] + shape[1])


def side_basis(statistic, hyper):
    """The eigenvectors of ``statistic + eps I`` (eigenvalues ascending, as ``eigh``; the
    order does not matter to (2)), in ``hyper.eigh_dtype``, returned in the statistic's."""
    work = statistic.astype(np.float32) if hyper.eigh_dtype == "float32" else statistic
    shifted = work + np.eye(work.shape[0], dtype=work.dtype) * work.dtype.type(hyper.eps)
    return eigh(shifted)[1].astype(statistic.dtype)


def splus_update(param, grad, state, hyper):
    """One SPlus step of ``param`` (in place, its own shape) and ``state`` (``momentum``,
    ``ema``, and for a matrix ``sides0/1``, ``q_sides0/1``, of shape (0, 0) where a side
    has none)."""
    dtype = param.dtype.type
    if hyper.l2 != 0:
        grad = grad + dtype(hyper.l2) * param
    m = state["momentum"]
    m += dtype(1 - hyper.beta1) * (grad - m)   # torch's lerp_ (weight < 0.5)
    if param.ndim == 2:
        sides = [state["sides0"], state["sides1"]]
        bases = [state["q_sides0"], state["q_sides1"]]
        rotated = m
        if bases[0].size:
            rotated = matmul_of(np.ascontiguousarray(bases[0].T), rotated)
        if bases[1].size:
            rotated = matmul_of(rotated, bases[1])
        g = np.ascontiguousarray(grad)
        for k, side in enumerate(sides):
            if side.size:
                outer = matmul_of(g, np.ascontiguousarray(g.T)) if k == 0 else \
                    matmul_of(np.ascontiguousarray(g.T), g)
                side += dtype(1 - hyper.beta2) * (outer - side)
        update = np.sign(rotated)
        if bases[0].size:
            update = matmul_of(bases[0], update)
        if bases[1].size:
            update = matmul_of(update, np.ascontiguousarray(bases[1].T))
        if hyper.refresh:
            for side, basis in zip(sides, bases):
                if side.size:
                    basis[...] = side_basis(side, hyper)
    else:
        update = np.sign(m)
    param -= dtype(hyper.scaled_lr) * update
    ema = state["ema"]
    ema += dtype(1 - hyper.ema_rate) * (param - ema)
    if hyper.decay_rate != 0:
        param *= dtype(1 - hyper.decay_rate)


class SPlus(Optimizer):
    """SPlus, pytorch_optimizer 4.1.0's ``SPlus`` (``variant="authors"``: the authors'
    ``torch/splus.py``; see the module docstring), with :meth:`eval`, :meth:`train` and
    :meth:`ema_params` for the EMA evaluation parameters.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.1
        Learning rate γ (scaled per parameter by s).
    betas : tuple (float, float), default: (0.9, 0.999)
        Decays of the momentum and of the side statistics.
    weight_decay : float, default: 0.01
        Weight decay λ: θ ← θ(1 - γsλ) after the step and the EMA.
    decoupled_weight_decay : bool, default: True
        False: L2, G ← G + λθ first (pytorch_optimizer's ``weight_decouple=False``).
    fixed_decay : bool, default: False
        The decoupled decay not scaled by the lr: θ ← θ(1 - λ).
    ema_rate : float, default: 0.999
        r, the decay of the parameters' EMA.
    inverse_steps : int, default: 100
        The bases are recomputed at step 1 and every ``inverse_steps``-th step.
    nonstandard_constant : float, default: 0.001
        s for a parameter that is not a matrix, or a matrix with a side above ``max_dim``.
    max_dim : int, default: 10000
        A matrix side of this size or more has no statistic.
    eps : float, default: 1e-30
        ε I added to each statistic before its eigendecomposition.
    maximize : bool, default: False
        Maximize the objective: the gradient is negated (pytorch_optimizer).
    variant : {"pytorch_optimizer", "authors"}, default: 'pytorch_optimizer'
        The published form whose switches are the defaults of the next two.
    matrix_scale : {"two_over_sum", "half_over_sum"}, default: the variant's
        s of a matrix: 2/(m+n) (paper, pytorch_optimizer) or 1/(2(m+n)) (the authors' torch).
    eigh_dtype : {"float32", "param"}, default: the variant's
        The dtype of the eigendecompositions (pytorch_optimizer: float32).
    """

    def __init__(self, params, lr=1e-1, betas=(0.9, 0.999), weight_decay=1e-2,
                 decoupled_weight_decay=True, fixed_decay=False, ema_rate=0.999,
                 inverse_steps=100, nonstandard_constant=1e-3, max_dim=10000, eps=1e-30, *,
                 maximize=False, variant="pytorch_optimizer", matrix_scale=VARIANT_DEFAULT,
                 eigh_dtype=VARIANT_DEFAULT):
        self.variant, switches = resolve_variant(
            VARIANTS, ALIASES, variant, dict(matrix_scale=matrix_scale, eigh_dtype=eigh_dtype))
        super().__init__(params, dict(
            lr=lr, betas=betas, weight_decay=weight_decay,
            decoupled_weight_decay=decoupled_weight_decay, fixed_decay=fixed_decay,
            ema_rate=ema_rate, inverse_steps=inverse_steps,
            nonstandard_constant=nonstandard_constant, max_dim=max_dim, eps=eps,
            maximize=maximize, **switches))
        #: True between :meth:`eval` and :meth:`train`: the parameters hold the EMA.
        self.evaluating = False
        self._training_values = {}

    def _check_group(self, group):
        check_no_variant(group)
        check_nonnegative(group, "lr", "weight_decay", "eps", "nonstandard_constant")
        check_betas(group["betas"])
        rate = group["ema_rate"]
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate < 1:
            raise ValueError(f"ema_rate must be in [0, 1), got {rate!r}")
        for name in ("inverse_steps", "max_dim"):
            value = group[name]
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        check_flag(group, "decoupled_weight_decay", "fixed_decay", "maximize")
        check_choice(group, "matrix_scale", MATRIX_SCALES)
        check_choice(group, "eigh_dtype", EIGH_DTYPES)

    def _state_shapes(self, param, group):
        shapes = {"momentum": param.shape, "ema": param.shape}
        if param.ndim == 2:
            for k, side in enumerate(param.shape):
                size = (side, side) if has_side(side, group["max_dim"]) else (0, 0)
                shapes[f"sides{k}"] = size
                shapes[f"q_sides{k}"] = size
        return shapes

    def _init_state(self, param, group):
        state = super()._init_state(param, group)
        for k in (0, 1):
            basis = state.get(f"q_sides{k}")
            if basis is not None and basis.size:
                basis[...] = np.eye(basis.shape[0], dtype=basis.dtype)
        return state

    def _prepare(self, grads):
        if self.evaluating:
            raise RuntimeError("SPlus is in eval mode (the parameters hold their EMA): call "
                               "train() before step()")
        prepared = super()._prepare(grads)
        for group, index, param, grad in prepared:
            if group["eigh_dtype"] == "float32" and param.ndim == 2:
                with np.errstate(over="ignore"):
                    narrowed = grad.astype(np.float32)
                if not np.all(np.isfinite(narrowed)):
                    raise FloatingPointError(f"grads[{index}] overflows float32, the dtype of "
                                             "SPlus's eigendecompositions here")
        return prepared

    def _update(self, param, grad, state, group, index, shape):
        if group["maximize"]:
            grad = -grad
        state["step"] += 1
        t = state["step"]
        beta1, beta2 = group["betas"]
        scaled_lr = group["lr"] * shape_scale(shape, group)
        decoupled = group["decoupled_weight_decay"]
        hyper = SPlusHyper(
            scaled_lr=scaled_lr, beta1=beta1, beta2=beta2, ema_rate=group["ema_rate"],
            decay_rate=(group["weight_decay"] * (1.0 if group["fixed_decay"] else scaled_lr))
            if decoupled else 0.0,
            l2=0.0 if decoupled else group["weight_decay"],
            refresh=t == 1 or t % group["inverse_steps"] == 0, eps=group["eps"],
            eigh_dtype=group["eigh_dtype"])
        views = {name: state[name] for name in self._state_shapes(param.reshape(shape), group)}
        splus_update(param.reshape(shape), grad.reshape(shape), views, hyper)

    # ------------------------------------------------------------ evaluation parameters
    def ema_params(self):
        """The evaluation parameters: each parameter's bias-corrected EMA,
        ``ema * (1 / (1 - ema_rate**t))`` (new arrays, in parameter order; a parameter not
        stepped yet is returned as it is)."""
        out = []
        index = 0
        for group in self.param_groups:
            for param in group["params"]:
                state = self.state.get(index)
                if state is None or state["step"] == 0:
                    out.append(np.array(self._training_values.get(index, param)))
                else:
                    correction = 1.0 / (1.0 - group["ema_rate"] ** state["step"])
                    out.append(state["ema"] * param.dtype.type(correction))
                index += 1
        return out

    def eval(self):
        """Swap every parameter (in place) for its evaluation value (:meth:`ema_params`),
        keeping the training values for :meth:`train`; a second call does nothing."""
        if self.evaluating:
            return
        values = self.ema_params()
        for index, (param, value) in enumerate(zip(self.params, values)):
            self._training_values[index] = param.copy()
            param[...] = value
        self.evaluating = True

    def train(self):
        """Put the training values back after :meth:`eval` (in place); otherwise nothing."""
        if not self.evaluating:
            return
        for index, param in enumerate(self.params):
            param[...] = self._training_values.pop(index)
        self.evaluating = False
