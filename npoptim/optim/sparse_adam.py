r"""SparseAdam: Adam for sparse (embedding-row) gradients, as ``torch.optim.SparseAdam`` 2.13.

Only the entries stored in the gradient are updated ("lazy" sparse semantics): an entry that
is not in the gradient keeps its parameter value and its moments bit for bit, so its moments
do not decay. The step count :math:`t` is one counter per parameter (global across its rows),
advanced by every step in which the parameter has a gradient, even an empty one. For each
stored entry, with gradient :math:`g` (negated when ``maximize``):

.. math::

    m &\leftarrow m + (1-\beta_1)(g - m)\\
    v &\leftarrow v + (1-\beta_2)(g^2 - v)\\
    \theta &\leftarrow \theta - \gamma\,\frac{\sqrt{1-\beta_2^t}}{1-\beta_1^t}
        \cdot \frac{m}{\sqrt{v} + \epsilon}

Note where :math:`\epsilon` sits: added to :math:`\sqrt{v}`, not to the bias-corrected
:math:`\sqrt{v/(1-\beta_2^t)}` as in :class:`npoptim.Adam` (the "epsilon-hat" form of Kingma &
Ba, section 2, also used by TF's LazyAdam).

Gradients: a CSR gradient (see :mod:`npoptim.sparse.rowgrad`: explicit zeros are updated,
duplicates are summed first), or a dense array whose *nonzero* entries are taken as the stored
ones (torch refuses dense gradients; this "masked-dense" mode is npoptim's convenience). An
empty gradient updates nothing but advances the step count, as torch does.
"""
import math
from typing import NamedTuple

import numpy as np
import scipy.sparse

from npoptim.kernels.drivers import apply_dense, apply_rows
from npoptim.kernels.jit import kernel
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import check_betas, check_nonnegative
from npoptim.sparse.rowgrad import as_row_gradient, row_shape


class SparseAdamHyper(NamedTuple):
    """One step's hyperparameters of the SparseAdam rule (built by ``SparseAdam._update``)."""

    one_minus_beta1: float
    one_minus_beta2: float
    eps: float
    neg_step_size: float  # -lr sqrt(1 - beta2^t) / (1 - beta1^t)
    maximize: float       # 1 or 0


@kernel
def sparse_adam_rule(p, g, s, h):
    """One stored entry; ``s = (exp_avg, exp_avg_sq)``."""
    m, v = s
    if h.maximize != 0:
        g = -g
    m_update = (g - m) * h.one_minus_beta1
    v_update = (g * g - v) * h.one_minus_beta2
    m = m + m_update
    v = v + v_update
    denom = np.sqrt(v) + h.eps
    return p + h.neg_step_size * (m / denom), (m, v)


@kernel
def _sparse_adam_dense(param, grad, states, hyper):
    apply_dense(sparse_adam_rule, param, grad, states, SparseAdamHyper(*hyper))


@kernel
def _sparse_adam_rows(param, ncols, rows, row_ptr, indices, data, states, hyper):
    apply_rows(sparse_adam_rule, param, ncols, rows, row_ptr, indices, data, states,
               SparseAdamHyper(*hyper))


class SparseAdam(Optimizer):
    """SparseAdam, matching ``torch.optim.SparseAdam`` (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.999)
        Decay rates (β1, β2) of the first and second moments.
    eps : float, default: 1e-08
        Term ε added to sqrt(v), before the bias correction.
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    state_arrays : store or None, default: None
        Where the state arrays are created, e.g. a :class:`npoptim.storage.MemmapStore`; None: in
        RAM.
    """

    sparse_kind = "lazy"
    step_in_state_dict = "int"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False, *,
                 state_arrays=None):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize),
                         state_arrays=state_arrays)

    def _check_group(self, group):
        check_nonnegative(group, "lr", "eps")
        # torch's SparseAdam, unlike Adam, also refuses lr == 0 and eps == 0
        if group["lr"] == 0:
            raise ValueError(f"Invalid learning rate: {group['lr']}")
        if group["eps"] == 0:
            raise ValueError(f"Invalid epsilon value: {group['eps']}")
        check_betas(group["betas"])

    def _state_names(self, group):
        return ("exp_avg", "exp_avg_sq")

    def _prepare_grad(self, grad, param, group, where):
        if grad is not None and param.ndim == 0:
            raise ValueError(f"{where}: SparseAdam updates rows, and a 0-d parameter has none; "
                             "give it a shape (1,) or use Adam")
        if isinstance(grad, np.ndarray) and grad.shape == param.shape:
            if grad.dtype != param.dtype:
                raise ValueError(f"{where}: gradient has dtype {grad.dtype}, the parameter has "
                                 f"{param.dtype}")
            grad = scipy.sparse.csr_array(grad.reshape(row_shape(param.shape)))
            return as_row_gradient(grad, param.shape, param.dtype, where)
        return super()._prepare_grad(grad, param, group, where)

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        step = state["step"]
        if grad.nnz == 0:
            return
        beta1, beta2 = group["betas"]
        step_size = group["lr"] * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
        hyper = typed_record(SparseAdamHyper, param, one_minus_beta1=1 - beta1,
                             one_minus_beta2=1 - beta2, eps=group["eps"],
                             neg_step_size=-step_size, maximize=bool(group["maximize"]))
        self._run((_sparse_adam_dense, _sparse_adam_rows), param, grad,
                  self._flat_states(state, group), hyper)
