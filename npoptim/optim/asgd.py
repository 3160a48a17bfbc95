r"""Averaged SGD (Polyak & Juditsky, 1992), as ``torch.optim.ASGD`` 2.13.

SGD with a decaying step size :math:`\eta_t` and a running average :math:`\bar\theta` of the
iterates, which starts averaging after step :math:`t_0`. With gradient :math:`g` (negated when
``maximize``), learning rate :math:`\gamma`, decay :math:`\lambda` (``lambd``), power
:math:`\alpha`:

.. math::

    g &\leftarrow g + w\,\theta                                  &&\text{weight decay } w\\
    \theta &\leftarrow \theta\,(1 - \lambda\eta_{t-1}) - \eta_{t-1}\,g\\
    \bar\theta &\leftarrow \bar\theta + \mu_{t-1}(\theta - \bar\theta)
                                                  &&\text{``ax``; } \bar\theta = \theta
                                                    \text{ while } \mu = 1\\
    \eta_t &= \gamma / (1 + \lambda\gamma t)^{\alpha}\\
    \mu_t &= 1 / \max(1, t - t_0)

``eta`` and ``mu`` are per-parameter scalars kept, as torch keeps them, in 0-d arrays of
torch's scalar dtype (float32; loading a state_dict casts them to the parameter's dtype, as
torch's ``load_state_dict`` does). Their new values are computed in Python double and rounded
to float32 (torch builds them with ``torch.as_tensor``) before being stored, even after a load
made the stored scalars float64; the update reads the stored values. The average is never used by
the step itself: it is the estimate Polyak averaging returns, read from ``state["ax"]``.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import check_nonnegative

# torch's ``_get_scalar_dtype()`` with its default dtype float32: the dtype of step, eta, mu.
SCALAR_DTYPE = np.float32


class ASGDHyper(NamedTuple):
    """One step's hyperparameters of the ASGD rule (built by ``ASGD._update``)."""

    decay: float        # 1 - lambd * eta
    neg_eta: float      # -eta
    weight_decay: float
    mu: float
    averaging: float    # 1 once averaging has started (mu != 1), else 0
    maximize: float     # 1 or 0


@kernel
def asgd_rule(p, g, s, h):
    """One element; ``s = (ax,)``."""
    (ax,) = s
    if h.maximize != 0:
        g = -g
    if h.weight_decay != 0:
        g = g + h.weight_decay * p
    p = p * h.decay
    p = p + h.neg_eta * g
    if h.averaging != 0:
        ax = ax + (p - ax) * h.mu
    else:
        ax = p
    return p, (ax,)


@kernel
def _asgd_dense(param, grad, states, hyper):
    apply_dense(asgd_rule, param, grad, states, ASGDHyper(*hyper))


class ASGD(Optimizer):
    """Averaged SGD, matching ``torch.optim.ASGD`` (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.01
        Learning rate γ.
    lambd : float, default: 0.0001
        Decay term λ of the step size η_t.
    alpha : float, default: 0.75
        Power α of the step size decay η_t = γ/(1 + λγt)^α.
    t0 : float, default: 1000000.0
        Step after which the average of the iterates starts.
    weight_decay : float, default: 0
        L2 weight decay w: w θ added to the gradient.
    foreach, differentiable, capturable : ignored
        Accepted for compatibility with torch only: they choose torch's implementations and change
        nothing here (``differentiable=True`` is refused: npoptim has no autograd).
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    """

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def _check_group(self, group):
        check_nonnegative(group, "lr", "weight_decay")

    def _state_names(self, group):
        return ("ax",)

    def _state_shapes(self, param, group):
        return {"eta": (), "mu": (), "ax": param.shape}

    def _init_state(self, param, group):
        return {"step": 0,
                "eta": np.array(group["lr"], SCALAR_DTYPE),
                "mu": np.ones((), SCALAR_DTYPE),
                "ax": np.zeros(param.shape, param.dtype)}

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        step = float(state["step"])
        lr, lambd = group["lr"], group["lambd"]
        eta, mu = float(state["eta"]), float(state["mu"])
        hyper = typed_record(ASGDHyper, param, decay=1 - lambd * eta, neg_eta=-eta,
                             weight_decay=group["weight_decay"], mu=mu, averaging=mu != 1,
                             maximize=bool(group["maximize"]))
        _asgd_dense(param, grad, self._flat_states(state, group), hyper)
        # the new scalars: computed in Python double, made a float32 tensor (torch.as_tensor
        # of a Python float) and copied into the stored scalar, whatever its dtype
        state["eta"][...] = SCALAR_DTYPE(lr / ((1 + lambd * lr * step) ** group["alpha"]))
        state["mu"][...] = SCALAR_DTYPE(1 / max(1, step - group["t0"]))
