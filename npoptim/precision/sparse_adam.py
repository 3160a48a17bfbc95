r"""SparseAdam on bfloat16/float16 params, sparse grads and state, rounded as torch 2.13's CPU
code (``torch.optim._functional.sparse_adam``, the only implementation torch has).

The math is :mod:`npoptim.optim.sparse_adam`'s (lazy: only stored entries move); ``rounding=
"per-op"`` rounds every tensor operation of torch's code to the 16-bit format (:math:`R`), each
computed in float32; the scalars :math:`1-\beta_1`, :math:`1-\beta_2` and the step size are
float32, :math:`\epsilon` (added to a tensor) is :math:`R(\epsilon)`. For each stored entry,
gradient :math:`g` (negated when ``maximize``, exact):

.. math::

    u_m &\leftarrow R(R(g - m)\,(1-\beta_1)),\qquad m \leftarrow R(m + u_m)\\
    u_v &\leftarrow R(R(R(g^2) - v)\,(1-\beta_2)),\qquad v \leftarrow R(v + u_v)\\
    \theta &\leftarrow R\big(\theta + R(-\gamma\tfrac{\sqrt{1-\beta_2^t}}{1-\beta_1^t}\,
        R(m / R(R(\sqrt v) + R(\epsilon))))\big)

(torch's ``numer = u_m + m_old`` and ``u_v + v_old`` are the new moments bit for bit.)

Duplicate entries are summed first as torch's ``coalesce()`` sums them on CPU: the first
copied, each later one added in the format, :math:`s \leftarrow R(s + g_k)`, in stored order
(torch 2.13's CPU sort of the indices keeps stored order up to 16 entries; beyond, it sums the
duplicates in the order its unstable sort leaves them, so a 16-bit sum that depends on the
order can differ: measured in tests/test_precision_golden.py). torch's ``add(.., alpha)`` tail
rounding does not arise (every ``alpha`` is 1), so there is no ``torch_cpu_lanes`` option.

Gradients: a ``scipy.sparse`` CSR gradient whose ``data`` has the param's dtype (see
:mod:`npoptim.sparse.rowgrad`), checked before any kernel reads it, or a
:class:`npoptim.sparse.rowsparse.RowSparseGrad`; torch's sparse COO embedding gradient is the
CSR gradient with every column of each looked-up row stored, one copy per lookup. Dense
gradients are refused, as torch refuses them (npoptim's float SparseAdam's masked-dense mode
would need a 16-bit "nonzero": not provided).
"""
import math
from typing import NamedTuple

import numpy as np

from npoptim.kernels.jit import inlined, kernel
from npoptim.kernels.switches import Switch
from npoptim.optim import sparse_adam
from npoptim.precision.drivers import apply_rows16, new_states
from npoptim.precision.formats import FORMATS, format_of, from_float32, round_to, to_float32
from npoptim.precision.optimizer import LowPrecision, record16, rounded_scalar
from npoptim.sparse.rowgrad import as_row_gradient, coalesce_order, is_sparse, sum_by_slot
from npoptim.sparse.rowsparse import RowSparseGrad, as_rows_gradient


class SparseAdam16Hyper(NamedTuple):
    """One step's hyperparameters of the 16-bit SparseAdam rule (float32, and the format)."""

    code: int            # the 16-bit format (npoptim.precision.formats)
    tail_start: int      # unused: no operation rounds differently in torch's scalar tail
    one_minus_beta1: float
    one_minus_beta2: float
    eps: float           # rounded to the format
    neg_step_size: float  # -lr sqrt(1 - beta2^t) / (1 - beta1^t)
    maximize: Switch     # torch's maximize


@inlined
def sparse_adam_per_op_rule(p, g, s, h, i, tail):
    """One stored entry, every op rounded; ``s = (exp_avg, exp_avg_sq)``."""
    m, v = s
    if h.maximize != 0:
        g = -g
    m_update = round_to(round_to(g - m, h.code) * h.one_minus_beta1, h.code)
    v_update = round_to(round_to(round_to(g * g, h.code) - v, h.code) * h.one_minus_beta2,
                        h.code)
    m = round_to(m + m_update, h.code)
    v = round_to(v + v_update, h.code)
    denom = round_to(round_to(np.sqrt(v), h.code) + h.eps, h.code)
    step = round_to(h.neg_step_size * round_to(m / denom, h.code), h.code)
    return round_to(p + step, h.code), new_states(m, v)


@kernel
def _sparse_adam_rows(param, ncols, rows, row_ptr, indices, data, states, hyper):
    apply_rows16(sparse_adam_per_op_rule, param, ncols, rows, row_ptr, indices, data, states,
                 hyper)


@inlined
def _add16(a, b, code):
    """``a + b`` of two ``uint16`` bit patterns of the format ``code``, rounded to it."""
    return from_float32(to_float32(a, code) + to_float32(b, code), code)


@kernel
def _coalesce_rows16(indptr, indices, data, code):
    out_indptr, out_indices, order, slot = coalesce_order(indptr, indices)
    out_data = np.empty(out_indices.size, np.uint16)
    sum_by_slot(_add16, data, order, slot, out_data, code)
    return out_indptr, out_indices, out_data


def _as_bits(gradient):
    """The checked gradient with its ``data`` as ``uint16`` bits (the kernels' view)."""
    return gradient._replace(data=np.ascontiguousarray(gradient.data).view(np.uint16))


class SparseAdam(LowPrecision, sparse_adam.SparseAdam):
    """``torch.optim.SparseAdam`` on bfloat16/float16 arrays, ``rounding="per-op"`` (the module
    docstring); ``format`` names the format of raw ``uint16`` arrays.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The bfloat16, float16 or uint16 (raw bits) arrays to optimize (updated in place),
        or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.999)
        Decay rates (β1, β2) of the first and second moments.
    eps : float, default: 1e-08
        Term ε added to sqrt(v), before the bias correction.
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    rounding : {'per-op'}, default: 'per-op'
        Where results are rounded to the 16-bit format (see the module docstring): ``"per-op"``.
    format : {'bfloat16', 'float16'} or None, default: None
        ``"bfloat16"`` or ``"float16"``: the format of raw ``uint16`` arrays (the bits);
        ``ml_dtypes.bfloat16`` and NumPy ``float16`` arrays carry their own.
    """

    sparse_kind = "lazy"
    roundings = ("per-op",)

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False, *,
                 rounding="per-op", format=None):
        self._low_precision_defaults = dict(rounding=rounding, format=format)
        super().__init__(params, lr=lr, betas=betas, eps=eps, maximize=maximize)

    def _prepare_grad(self, grad, param, group, where):
        fmt = format_of(param, group["format"])  # the group's format may have been edited
        if grad is None:
            return None
        if param.ndim == 0:
            raise ValueError(f"{where}: SparseAdam updates rows, and a 0-d parameter has none; "
                             "give it a shape (1,)")
        if isinstance(grad, RowSparseGrad):
            return _as_bits(as_rows_gradient(grad, param, where))
        if not is_sparse(grad):
            raise TypeError(f"{where}: npoptim.precision.SparseAdam takes sparse gradients only "
                            "(a scipy.sparse CSR gradient or a RowSparseGrad), as torch's "
                            f"SparseAdam does; got {type(grad).__name__}")

        def coalesce(indptr, indices, data):
            return _coalesce_rows16(indptr, indices, data.view(np.uint16), FORMATS[fmt])

        return _as_bits(as_row_gradient(grad, param.shape, param.dtype, where,
                                        coalesce=coalesce))

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        step = state["step"]
        if grad.nnz == 0:
            return
        code = self._code(param, group)
        beta1, beta2 = group["betas"]
        hyper = record16(SparseAdam16Hyper, param, group, one_minus_beta1=1 - beta1,
                         one_minus_beta2=1 - beta2, eps=rounded_scalar(group["eps"], code),
                         neg_step_size=-(group["lr"] * math.sqrt(1 - beta2 ** step)
                                         / (1 - beta1 ** step)),
                         maximize=bool(group["maximize"]))
        _sparse_adam_rows(param.view(np.uint16), grad.shape[1], grad.rows, grad.row_ptr,
                          grad.indices, grad.data, self._flat_bits(state, group), hyper)
