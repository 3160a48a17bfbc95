r"""Adafactor (Shazeer & Stern, 2018), in the form of ``torch.optim.Adafactor`` 2.13.

Adafactor keeps the second moment of a matrix gradient *factored*: instead of a full
:math:`R\times C` estimate it stores the mean of :math:`g^2` over each row (``row_var``,
shape :math:`R\times 1`) and over each column (``col_var``, :math:`1\times C`), and rebuilds
the estimate as their outer product divided by the overall mean. A parameter of more than two
dimensions is factored over its last two, one factorization per leading index; vectors and
scalars keep a full ``variance``. There is no first moment.

At step :math:`t`, with gradient :math:`G` (negated when ``maximize``), learning rate
:math:`\gamma`, decay exponent :math:`\tau` (``beta2_decay``), ``eps`` :math:`=(\epsilon_1,
\epsilon_2)` and clipping threshold :math:`d`:

.. math::

    \hat\beta_t &= 1 - t^{\tau}, \qquad \rho_t = \min(\gamma, 1/\sqrt t)\\
    \alpha_t &= \max(\epsilon_2, \mathrm{RMS}(\theta_{t-1}))\,\rho_t
        &&\text{(relative step size, from the parameter before decay)}\\
    \theta &\leftarrow \theta\,(1 - \gamma\lambda)    &&\text{decoupled weight decay}\\
    R &\leftarrow \mathrm{lerp}(R,\ \mathrm{mean}_{\text{cols}}(G^2),\ 1-\hat\beta_t),\quad
    C \leftarrow \mathrm{lerp}(C,\ \mathrm{mean}_{\text{rows}}(G^2),\ 1-\hat\beta_t)\\
    \hat V &= \frac{R\,C}{\max(\mathrm{mean}_{\text{rows}}(R),\ \epsilon_1)}
        \qquad(\text{vectors: } \hat V = V \leftarrow \mathrm{lerp}(V, G^2, 1-\hat\beta_t))\\
    U &= G / \sqrt{\max(\hat V, \epsilon_1^2)}\\
    \theta &\leftarrow \theta - \frac{\alpha_t}{\max(1,\ \mathrm{RMS}(U)/d)}\,U

:math:`\epsilon_1` defaults (``eps=(None, 1e-3)``) to the machine epsilon of the parameter's
dtype; as in torch's single-tensor loop, the first parameter of a group updated in a step
fixes it for the rest of that group in that step. Row and column means are computed as torch
does: the norm along the axis, squared, divided by the length. Note that the update uses
:math:`1 - \hat\beta_t = t^{\tau}` as the interpolation weight, so at :math:`t=1` the
factors are set to the current gradient's statistics.

This update is not element-wise (norms and means over the parameter), so it is written in
plain NumPy, in the parameter's dtype. Dense gradients only, real parameters only, as in torch.
"""
import numpy as np

from npoptim.kernels.scalar import lerp_arrays
from npoptim.optim.optimizer import Optimizer, typed


def norm(x, axis=None):
    """The 2-norm in ``x``'s dtype (accumulated in float64, rounded once)."""
    total = np.sum(np.square(x, dtype=np.float64), axis=axis, keepdims=axis is not None)
    return np.sqrt(total).astype(x.dtype)


def factored_shapes(shape):
    """``(row_var shape, col_var shape)`` of a parameter of two or more dimensions."""
    return shape[:-1] + (1,), shape[:-2] + (1,) + shape[-1:]


class Adafactor(Optimizer):
    """Adafactor, matching ``torch.optim.Adafactor`` (see the module docstring).

    ``foreach`` chooses a torch implementation and is accepted for compatibility only.
    """

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                 weight_decay=0.0, *, foreach=None, maximize=False):
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize))

    def _check_group(self, group):
        lr, beta2_decay, eps = group["lr"], group["beta2_decay"], group["eps"]
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if not isinstance(eps, (tuple, list)) or len(eps) != 2:
            raise ValueError(f"eps must be a pair (eps1 or None, eps2), got {eps!r}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= group["d"]:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {group['d']}")
        if not 0.0 <= group["weight_decay"]:
            raise ValueError(f"weight_decay should be >= 0 but is: {group['weight_decay']}")

    def _state_shapes(self, param, group):
        if param.ndim > 1:
            row, col = factored_shapes(param.shape)
            return {"row_var": row, "col_var": col}
        return {"variance": param.shape}

    def _prepare(self, grads):
        prepared = super()._prepare(grads)
        for _, index, param, _ in prepared:
            if param.size == 0:
                # torch divides by the parameter's size and raises this, mid-step; we raise
                # it before anything is written
                raise ZeroDivisionError(f"params[{index}] has no elements: Adafactor's relative "
                                        "step divides by the parameter's size")
        return prepared

    def _apply(self, prepared):
        # torch's loop sets eps1 from the first parameter of each group it updates
        self._default_eps1 = {}
        super()._apply(prepared)

    def _update(self, param, grad, state, group):
        dtype = param.dtype.type
        eps1, eps2 = group["eps"]
        if eps1 is None:
            eps1 = self._default_eps1.setdefault(id(group), float(np.finfo(param.dtype).eps))
        lr, d = group["lr"], group["d"]
        if group["maximize"]:
            grad = -grad

        state["step"] += 1
        step = float(state["step"])
        one_minus_beta2 = step ** group["beta2_decay"]
        rho = min(lr, 1 / (step ** 0.5))
        alpha = max(eps2, float(norm(param)) / (param.size ** 0.5)) * rho

        if group["weight_decay"] != 0:
            param *= dtype(1 - lr * group["weight_decay"])

        if "row_var" in state:
            row_var, col_var = state["row_var"], state["col_var"]
            g = grad.reshape(row_var.shape[:-1] + col_var.shape[-1:])
            nrows, ncols = g.shape[-2], g.shape[-1]
            row_mean = np.square(norm(g, axis=-1)) / dtype(ncols)
            row_var[...] = lerp_arrays(row_var, row_mean, one_minus_beta2)
            col_mean = np.square(norm(g, axis=-2)) / dtype(nrows)
            col_var[...] = lerp_arrays(col_var, col_mean, one_minus_beta2)
            row_var_mean = np.sum(row_var, axis=-2, keepdims=True) / dtype(nrows)
            var_estimate = (row_var * col_var) / np.maximum(row_var_mean, dtype(eps1))
            var_estimate = var_estimate.reshape(-1)
        else:
            variance = state["variance"].reshape(-1)
            variance[...] = lerp_arrays(variance, grad * grad, one_minus_beta2)
            var_estimate = variance.copy()

        update = dtype(1) / np.sqrt(np.maximum(var_estimate, dtype(eps1 * eps1)))
        update *= grad
        denom = max(1.0, float(norm(update)) / ((update.size ** 0.5) * d))
        (step_size,) = typed(param, -alpha / denom)
        param += step_size * update
