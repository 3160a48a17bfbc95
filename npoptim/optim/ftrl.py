r"""FTRL-Proximal (McMahan et al., 2013), as ``keras.optimizers.Ftrl`` 3 / TF ``ApplyFtrlV2``.

McMahan et al., "Ad Click Prediction: a View from the Trenches", KDD 2013, Algorithm 1, in the
form of keras-team/keras ``keras/src/optimizers/ftrl.py`` (``Ftrl.update_step``), which is TF's
``ApplyFtrlV2`` kernel (tensorflow/tensorflow ``tensorflow/core/kernels/training_ops.cc``,
``ApplyFtrlV2`` / ``SparseApplyFtrlV2``) with Keras's ``beta``. Per element, with gradient
:math:`g`, learning rate :math:`\gamma`, ``learning_rate_power`` :math:`p \le 0`, state
:math:`n` (``accumulator``, starts at ``initial_accumulator_value``) and :math:`z`
(``linear``, starts at 0):

.. math::

    \lambda_2' &= \lambda_2 + \frac{\beta}{2\gamma}                  &&\quad\text{(1)}\\
    \tilde g &= g + 2\lambda_s\theta                                 &&\quad\text{(2)}\\
    n' &= n + g^2                                                    &&\quad\text{(3)}\\
    z &\leftarrow z + \tilde g - \frac{n'^{-p} - n^{-p}}{\gamma}\,\theta\\
    \theta &\leftarrow \frac{\operatorname{clip}(z, -\lambda_1, \lambda_1) - z}
        {n'^{-p}/\gamma + 2\lambda_2'}
        &&\text{(0 where }|z| \le \lambda_1)\\
    n &\leftarrow n'

1. Keras folds the paper's :math:`\beta` into TF's l2.
2. l2-shrinkage: a penalty :math:`\lambda_s\theta^2` on the loss.
3. The raw gradient, not :math:`\tilde g`.

With :math:`p = -1/2` this is the paper's :math:`w = -(z - \operatorname{sgn}(z)\lambda_1) /
((\beta + \sqrt n)/\alpha + \lambda_2)` with the paper's :math:`\lambda_2` twice TF's ``l2``.
TF evaluates :math:`n^{1/2}` as a square root for :math:`p = -1/2`, and so does npoptim;
Keras writes ``power(n, 0.5)`` (the two agree to within a float64 ulp).

Note that :math:`\theta` is *recomputed* from :math:`(z, n)` at every step; the incoming
:math:`\theta` only enters through :math:`\sigma\theta` and the shrinkage term. So a **dense**
step with a zero gradient still changes :math:`\theta` (to the value :math:`z` and :math:`n`
imply: on the first step, 0 when :math:`|z| \le \lambda_1`, whatever the initial weights), and
with ``l2_shrinkage`` it also moves :math:`z`.

Sparse kind "lazy", as TF's ``SparseApplyFtrl`` (which Keras 2 called on ``IndexedSlices``):
a CSR gradient (or the row-sparse form) updates only its stored entries, with the same rule;
every other entry keeps its :math:`\theta`, :math:`z` and :math:`n` bit for bit, so the rows
without a gradient are *not* recomputed and *not* shrunk (Keras: "when input is sparse
shrinkage will only happen on the active weights"). An explicitly stored zero is updated (as
TF updates every row it is given). Duplicate entries are summed first, as Keras sums
``IndexedSlices`` duplicates before calling the kernel (TF's kernel alone would apply them in
sequence). TF's kernel updates every element of the rows it is given, so a CSR gradient that
stores whole rows is its ``IndexedSlices`` of those rows, and one that stores part of a row is
its slices of the table viewed as a vector, one per stored entry (how
examples/framework_replay/tf_kernels.py replays the CSR cases through
``ResourceSparseApplyFtrl(V2)``). Without l2-shrinkage a zero gradient changes only
:math:`\theta`, to the value :math:`z` and :math:`n` imply, so there the lazy result differs
from the dense one only on entries whose :math:`\theta` is not yet that value (before their
first update); with l2-shrinkage every dense step moves every :math:`z`, so the two differ
everywhere.

No step counter. Hyperparameters as Keras checks them: ``lr > 0`` (TF's kernel requires it;
:math:`\gamma` divides), ``learning_rate_power <= 0``, the rest ``>= 0``. With
``initial_accumulator_value=0`` and no l2, an entry whose gradient is still 0 divides 0 by 0
(NaN), in Keras and TF alike.
"""
import math
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense, apply_rows
from npoptim.kernels.jit import kernel
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import check_nonnegative, flavored


class FtrlHyper(NamedTuple):
    """One step's hyperparameters of the FTRL rule (built by ``Ftrl._update``)."""

    lr: float
    neg_lr_power: float      # -p >= 0
    square_root: float       # 1 when -p == 1/2 (n^(1/2) as a square root), else 0
    l1: float
    two_l2: float            # 2 (l2 + beta / (2 lr))
    two_shrinkage: float     # 2 l2_shrinkage


@kernel
def _power(n, h):
    """:math:`n^{-p}`."""
    if h.square_root != 0:
        return np.sqrt(n)
    return n ** h.neg_lr_power


@kernel
def ftrl_rule(p, g, s, h):
    """One element; ``s = (accumulator, linear)``."""
    n, z = s
    shrunk_g = g + h.two_shrinkage * p
    new_n = n + g * g
    new_n_power = _power(new_n, h)
    sigma = (new_n_power - _power(n, h)) / h.lr
    z = z + (shrunk_g - sigma * p)
    quadratic = new_n_power / h.lr + h.two_l2
    z_clipped = min(max(z, -h.l1), h.l1)
    return (z_clipped - z) / quadratic, (new_n, z)


@kernel
def _ftrl_dense(param, grad, states, hyper):
    apply_dense(ftrl_rule, param, grad, states, FtrlHyper(*hyper))


@kernel
def _ftrl_rows(param, ncols, rows, row_ptr, indices, data, states, hyper):
    apply_rows(ftrl_rule, param, ncols, rows, row_ptr, indices, data, states,
               FtrlHyper(*hyper))


class Ftrl(Optimizer):
    """FTRL-Proximal, matching ``keras.optimizers.Ftrl`` (see the module docstring).

    The hyperparameter names are Keras's, shortened as TF's kernel names them: ``l1`` is
    ``l1_regularization_strength``, ``l2`` ``l2_regularization_strength`` and
    ``l2_shrinkage`` ``l2_shrinkage_regularization_strength``. State per parameter:
    ``accumulator`` (:math:`n`) and ``linear`` (:math:`z`), Keras's names.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ (> 0).
    learning_rate_power : float, default: -0.5
        Power p <= 0 of the per-coordinate rate (-1/2: the paper's).
    initial_accumulator_value : float, default: 0.1
        Start value of the accumulator n.
    l1 : float, default: 0.0
        L1 regularization strength λ1 (Keras's ``l1_regularization_strength``).
    l2 : float, default: 0.0
        L2 regularization strength λ2 (``l2_regularization_strength``).
    l2_shrinkage : float, default: 0.0
        L2 shrinkage λs: a penalty λs θ² on the loss (``l2_shrinkage_regularization_strength``).
    beta : float, default: 0.0
        Keras's β, folded into λ2 as β/(2γ).
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "lazy"
    step_in_state_dict = None

    @flavored
    def __init__(self, params, lr=1e-3, learning_rate_power=-0.5, initial_accumulator_value=0.1,
                 l1=0.0, l2=0.0, l2_shrinkage=0.0, beta=0.0):
        super().__init__(params, dict(lr=lr, learning_rate_power=learning_rate_power,
                                      initial_accumulator_value=initial_accumulator_value,
                                      l1=l1, l2=l2, l2_shrinkage=l2_shrinkage, beta=beta))

    def _check_group(self, group):
        check_nonnegative(group, "lr", "initial_accumulator_value", "l1", "l2", "l2_shrinkage",
                          "beta")
        for name in ("lr", "learning_rate_power", "initial_accumulator_value", "l1", "l2",
                     "l2_shrinkage", "beta"):
            value = group[name]
            if isinstance(value, bool) or not math.isfinite(value):
                raise ValueError(f"Invalid {name}: {value} (must be finite)")
        if group["lr"] == 0:
            raise ValueError(f"Invalid learning rate: {group['lr']} (FTRL divides by it)")
        if not group["learning_rate_power"] <= 0:
            raise ValueError("`learning_rate_power` needs to be negative or zero. Received: "
                             f"learning_rate_power={group['learning_rate_power']}.")

    def _state_names(self, group):
        return ("accumulator", "linear")

    def _init_state(self, param, group):
        return {"accumulator": np.full(param.shape, group["initial_accumulator_value"],
                                       param.dtype),
                "linear": np.zeros(param.shape, param.dtype)}

    def _update(self, param, grad, state, group, index, shape):
        lr = group["lr"]
        neg_power = -group["learning_rate_power"]
        hyper = typed_record(FtrlHyper, param, lr=lr, neg_lr_power=neg_power,
                             square_root=neg_power == 0.5, l1=group["l1"],
                             two_l2=2 * (group["l2"] + group["beta"] / (2.0 * lr)),
                             two_shrinkage=2 * group["l2_shrinkage"])
        self._run((_ftrl_dense, _ftrl_rows), param, grad, self._flat_states(state, group),
                  hyper)
