r"""Adagrad (Duchi, Hazan & Singer, 2011), as ``torch.optim.Adagrad`` 2.13.

With gradient :math:`g` (negated when ``maximize``), step count :math:`t` per parameter and
learning rate decay :math:`\eta`:

.. math::

    g &\leftarrow g + \lambda\theta              &&\quad\text{(1)}\\
    s &\leftarrow s + g^2                         &&\quad\text{(2)}\\
    \theta &\leftarrow \theta - \frac{\gamma}{1 + (t-1)\eta}\cdot\frac{g}{\sqrt{s} + \epsilon}

1. Weight decay (dense gradients only).
2. The state ``sum``, starts at :math:`s_0` = ``initial_accumulator_value``.

Sparse kind "exact": a zero gradient leaves both :math:`s` and :math:`\theta` unchanged, so a
CSR gradient updates only its stored entries and the result equals the dense update with the
missing entries zero. As in torch, weight decay with a CSR gradient is refused (it would touch
every entry), and the step count advances on every step in which the parameter has a gradient.
State exists from construction, as torch creates it in ``__init__``; like torch, it starts from
the constructor's ``initial_accumulator_value``, even for a param group that overrides it or is
added later.

Convention switch (see :mod:`npoptim.flavors`): ``eps_in_sqrt=True`` (Keras, optax, tfjs)
puts :math:`\epsilon` inside the square root, :math:`g/\sqrt{s+\epsilon}`, and, as optax,
makes the update 0 where :math:`s = 0` (so ``eps=0`` with a zero accumulator gives 0, not NaN).
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense, apply_rows
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import fma
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import check_flag, check_nonnegative, flavored
from npoptim.sparse.rowgrad import RowGradient


class AdagradHyper(NamedTuple):
    """One step's hyperparameters of the Adagrad rule (built by ``Adagrad._update``)."""

    weight_decay: float
    eps: float
    neg_clr: float   # -clr
    maximize: float  # 1 or 0
    eps_in_sqrt: float  # 1 or 0


@kernel
def adagrad_rule(p, g, s, h):
    """One element; ``s = (sum,)``."""
    (total,) = s
    if h.maximize != 0:
        g = -g
    if h.weight_decay != 0:
        g = fma(h.weight_decay, p, g)
    total = fma(g, g, total)
    if h.eps_in_sqrt != 0:
        if total == 0:
            return p, (total,)
        return p + h.neg_clr * g / np.sqrt(total + h.eps), (total,)
    denom = np.sqrt(total) + h.eps
    return p + h.neg_clr * g / denom, (total,)


@kernel
def _adagrad_dense(param, grad, states, hyper):
    apply_dense(adagrad_rule, param, grad, states, AdagradHyper(*hyper))


@kernel
def _adagrad_rows(param, ncols, rows, row_ptr, indices, data, states, hyper):
    apply_rows(adagrad_rule, param, ncols, rows, row_ptr, indices, data, states,
               AdagradHyper(*hyper))


class Adagrad(Optimizer):
    """Adagrad, matching ``torch.optim.Adagrad`` (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.01
        Learning rate γ.
    lr_decay : float, default: 0
        Learning-rate decay η: the step is γ/(1 + (t-1)η).
    weight_decay : float, default: 0
        Weight decay λ: λθ added to the gradient (L2; dense gradients only), or θ(1 - γλ) with
        ``decoupled_weight_decay``.
    initial_accumulator_value : float, default: 0
        Start value of the accumulator ``sum``.
    eps : float, default: 1e-10
        Term ε added to the denominator for numerical stability.
    foreach, differentiable, fused : ignored
        Accepted for compatibility with torch only: they choose torch's implementations and change
        nothing here (``differentiable=True`` is refused: npoptim has no autograd).
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    eps_in_sqrt : bool, default: False
        Put ε inside the square root, g/sqrt(s + ε), with a zero update where s = 0 (Keras, optax,
        tfjs).
    decoupled_weight_decay : bool, default: False
        Decay the parameter, θ(1 - γλ), before the rule instead of adding λθ to the gradient
        (Keras).
    state_arrays : store or None, default: None
        Where the state arrays are created, e.g. a :class:`npoptim.storage.MemmapStore`; None: in
        RAM.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "exact"
    #: The convention switches and their torch values (see :mod:`npoptim.flavors`).
    torch_conventions = {"eps_in_sqrt": False, "decoupled_weight_decay": False}
    conventions_apply = {"decoupled_weight_decay": "weight_decay"}
    #: the base class applies ``decoupled_weight_decay`` before the rule (Keras's decay)
    decouples_weight_decay = True

    @flavored
    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None,
                 eps_in_sqrt=False, decoupled_weight_decay=False, state_arrays=None):
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps,
                                      weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, fused=fused,
                                      eps_in_sqrt=eps_in_sqrt,
                                      decoupled_weight_decay=decoupled_weight_decay),
                         state_arrays=state_arrays)
        # As torch: state is created here, from the constructor's initial_accumulator_value
        # even where a param group overrides it.
        for index, param in enumerate(self.params):
            self.state[index] = self._init_state(param, None)

    def _check_group(self, group):
        check_nonnegative(group, "lr", "lr_decay", "weight_decay")
        check_nonnegative(group, "initial_accumulator_value",
                          label="initial_accumulator_value")
        check_nonnegative(group, "eps")
        check_flag(group, "eps_in_sqrt", "decoupled_weight_decay")

    def _state_names(self, group):
        return ("sum",)

    def _init_state(self, param, group):
        # torch's value, for a param group added later too: the constructor's
        return {"step": 0, "sum": self._new_state_array(
            param, "sum", param.shape, self.defaults["initial_accumulator_value"])}

    def _prepare_grad(self, grad, param, group, where):
        prepared = super()._prepare_grad(grad, param, group, where)
        if isinstance(prepared, RowGradient) and group["weight_decay"] != 0:
            raise ValueError(f"{where}: weight_decay option is not compatible with sparse "
                             "gradients")
        return prepared

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        clr = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
        hyper = typed_record(AdagradHyper, param, weight_decay=group["weight_decay"],
                             eps=group["eps"], neg_clr=-clr, maximize=bool(group["maximize"]),
                             eps_in_sqrt=bool(group["eps_in_sqrt"]))
        self._run((_adagrad_dense, _adagrad_rows), param, grad, self._flat_states(state, group),
                  hyper)
