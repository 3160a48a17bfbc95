r"""Row-wise Adagrad, as FBGEMM's ``EXACT_ROWWISE_ADAGRAD`` (the torchrec/DLRM table default).

Adagrad (Duchi, Hazan & Singer, 2011) with one accumulator per *row* of an embedding table
instead of one per element. It has no paper of its own: FBGEMM's source defines it,
pytorch/FBGEMM ``fbgemm_gpu/codegen/genscript/optimizers.py`` (``rowwise_adagrad()``, whose
``split_weight_update_cpu`` is the CPU kernel), with ``WeightDecayMode`` in
``fbgemm_gpu/fbgemm_gpu/tbe/config/optimizer_config.py``. For each updated row :math:`r` of width
:math:`D`, with gradient row :math:`g` (duplicate lookups summed first: FBGEMM's "exact"),
accumulator :math:`G_r` (state ``momentum1``, FBGEMM's name, one value per row, starts at 0),
learning rate :math:`\gamma` and weight decay :math:`\lambda`:

.. math::

    g' &= g + \lambda\theta_r \text{ (mode l2), else } g      &&\quad\text{(1)}\\
    G_r &\leftarrow G_r + \frac1D\sum_{d<D} g'^2_d             &&\quad\text{(2)}\\
    m &= \frac{\gamma}{\sqrt{G_r} + \epsilon}\\
    c &= 1 - m\lambda \text{ (l2)},\quad 1 - \gamma\lambda \text{ (decouple)},
        \quad 1 \text{ (none)}\\
    \theta_r &\leftarrow c\,\theta_r - m\,g

1. Used for the accumulator only.
2. Summed in column order, then divided by :math:`D`.

The modes are ``"l2"``, ``"decouple"`` and ``"none"``.

(in mode ``"l2"`` the last line is :math:`\theta_r - m(g + \lambda\theta_r)`). FBGEMM computes
this in float32 for float32 tables (``at::acc_type<float, true>`` is float), and its compiled
CPU kernel rounds :math:`g + \lambda\theta` and :math:`c\,\theta - (m g)` once each (fused
multiply-adds); npoptim computes in the parameter's dtype with the same two fmas, so a float32
table follows FBGEMM 1.8.0's scalar CPU kernel bit for bit (tests/test_rowwise_adagrad.py).
FBGEMM sends an unshared float32 table to another CPU kernel, fbgemm's JIT
``GenerateSparseAdaGrad(rowwise=true)``, which sums the squares in SIMD lanes (float32
rounding apart from this order) and is called with ``weight_decay=0``: in FBGEMM 1.8.0 every
weight decay mode is ignored on that path. FBGEMM's ``DECOUPLE_GLOBAL`` (mode 5) is
``"decouple"`` in its CPU kernel; its GPU form, which catches up on the iterations a row
missed, and ``max_norm`` (GPU only; the CPU kernel ignores it) are not offered, nor the
counter-based modes (another optimizer, ``rowwise_adagrad_with_counter``).

Rows are the parameter's first axis (a parameter of shape ``(n, *rest)`` has ``n`` rows of
width ``prod(rest)``; a 0-d parameter is one row of one element). A dense gradient updates
every row, as if every row had been looked up. A CSR gradient (or the row-sparse form)
updates the rows it touches, each *as a whole*: a touched row's columns that are not stored
are zero gradients (they enter the mean and, with weight decay, decay). Rows without a stored
entry keep their weights and accumulator bit for bit. Sparse kind "lazy": with weight decay a
dense step decays every row and a sparse one only the touched rows, as FBGEMM does; without
it a zero gradient row changes nothing, so sparse and dense agree.

No step counter (FBGEMM keeps none for this optimizer). Defaults are FBGEMM's
(``SplitTableBatchedEmbeddingBagsCodegen``: ``learning_rate=0.01``, ``eps=1e-8``,
``weight_decay=0``, ``weight_decay_mode=NONE``).
"""
import math
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_row_rule_dense, apply_row_rule_rows
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import constant, fma
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import check_nonnegative
from npoptim.sparse.rowgrad import RowGradient

#: FBGEMM's ``WeightDecayMode`` members this optimizer implements, by npoptim's name.
WEIGHT_DECAY_MODES = {"none": 0, "l2": 1, "decouple": 2}


class RowWiseAdagradHyper(NamedTuple):
    """One step's hyperparameters of the row-wise Adagrad rule."""

    lr: float
    eps: float
    width: float          # D, the row's number of elements
    l2_decay: float       # lambda in mode "l2", else 0
    decoupled_decay: float  # lambda in mode "decouple", else 0


@kernel
def rowwise_adagrad_rule(p, g, s, h):
    """One row: ``p`` and ``g`` of length D; ``s = (momentum1,)`` of the row."""
    (momentum,) = s
    sum_square = constant(0.0, h.lr)
    for d in range(p.size):
        g_decayed = g[d]
        if h.l2_decay != 0:
            g_decayed = fma(h.l2_decay, p[d], g_decayed)
        sum_square = sum_square + g_decayed * g_decayed
    momentum = momentum + sum_square / h.width
    multiplier = h.lr / (np.sqrt(momentum) + h.eps)
    correction = constant(1.0, h.lr)
    if h.l2_decay != 0:
        correction = correction - multiplier * h.l2_decay
    elif h.decoupled_decay != 0:
        correction = correction - h.lr * h.decoupled_decay
    for d in range(p.size):
        p[d] = fma(correction, p[d], -(g[d] * multiplier))
    return (momentum,)


@kernel
def _rowwise_adagrad_dense(param, ncols, grad, row_states, hyper):
    apply_row_rule_dense(rowwise_adagrad_rule, param, ncols, grad, row_states,
                         RowWiseAdagradHyper(*hyper))


@kernel
def _rowwise_adagrad_rows(param, ncols, rows, row_ptr, indices, data, row_states, hyper):
    apply_row_rule_rows(rowwise_adagrad_rule, param, ncols, rows, row_ptr, indices, data,
                        row_states, RowWiseAdagradHyper(*hyper))


class RowWiseAdagrad(Optimizer):
    """Row-wise Adagrad, matching FBGEMM's ``EXACT_ROWWISE_ADAGRAD`` (see the module
    docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.01
        Learning rate γ.
    eps : float, default: 1e-08
        Term ε added to sqrt(G_r).
    weight_decay : float, default: 0.0
        Weight decay λ, applied as ``weight_decay_mode`` says.
    weight_decay_mode : str, default: 'none'
        ``"none"``, ``"l2"`` (λθ in the accumulator and the step) or ``"decouple"`` (θ(1 - γλ)).
    """

    sparse_kind = "lazy"
    step_in_state_dict = None

    def __init__(self, params, lr=1e-2, eps=1e-8, weight_decay=0.0, weight_decay_mode="none"):
        super().__init__(params, dict(lr=lr, eps=eps, weight_decay=weight_decay,
                                      weight_decay_mode=weight_decay_mode))

    def _check_group(self, group):
        check_nonnegative(group, "lr", "eps", "weight_decay")
        for name in ("lr", "eps", "weight_decay"):
            if not math.isfinite(group[name]):
                raise ValueError(f"Invalid {name}: {group[name]} (must be finite)")
        mode = group["weight_decay_mode"]
        if not isinstance(mode, str) or mode not in WEIGHT_DECAY_MODES:
            raise ValueError(f"Invalid weight_decay_mode: {mode!r}; FBGEMM's row-wise Adagrad "
                             f"has {', '.join(map(repr, WEIGHT_DECAY_MODES))}")
        if group["weight_decay"] != 0 and mode == "none":
            raise ValueError("weight_decay is set but weight_decay_mode is 'none' (FBGEMM "
                             "would ignore it): choose 'l2' or 'decouple'")

    def _state_names(self, group):
        return ("momentum1",)

    def _state_shapes(self, param, group):
        return {"momentum1": param.shape[:1]}

    def _update(self, param, grad, state, group, index, shape):
        mode = group["weight_decay_mode"]
        decay = group["weight_decay"]
        (momentum,) = self._flat_states(state, group)
        width = param.size // max(momentum.size, 1)  # D (a 0-d parameter: one row of one)
        hyper = typed_record(RowWiseAdagradHyper, param, lr=group["lr"], eps=group["eps"],
                             width=width, l2_decay=decay if mode == "l2" else 0.0,
                             decoupled_decay=decay if mode == "decouple" else 0.0)
        if isinstance(grad, RowGradient):
            _rowwise_adagrad_rows(param, width, grad.rows, grad.row_ptr, grad.indices,
                                  grad.data, (momentum,), hyper)
        else:
            _rowwise_adagrad_dense(param, width, grad, (momentum,), hyper)
