r"""Stochastic gradient descent with optional (Nesterov) momentum, as ``torch.optim.SGD`` 2.13.

For each element, with gradient :math:`g` (negated when ``maximize``), momentum :math:`\mu`,
dampening :math:`\tau`:

.. math::

    g &\leftarrow g + \lambda\theta                        &&\text{weight decay}\\
    b &\leftarrow g                                          &&\text{first step (1)}\\
    b &\leftarrow \mu b + (1-\tau)\,g                        &&\text{later steps}\\
    d &\leftarrow g + \mu b \;\text{(nesterov)}\quad\text{else}\quad d \leftarrow b\\
    \theta &\leftarrow \theta - \gamma d

1. A copy of :math:`g`, not scaled by :math:`1-\tau`.

The momentum lines apply only when :math:`\mu \ne 0`; only then does a parameter get the state
``momentum_buffer`` (created, as in torch, by the first step in which the parameter has a
gradient and momentum is non-zero). SGD has no ``step`` counter.

Rounding follows torch's CPU kernels (see :mod:`npoptim.kernels.scalar`): weight decay, the
buffer update, the nesterov direction and the parameter update are each one fused
multiply-add (torch's ``add(.., alpha=..)``), so dense results equal torch's bit for bit.

Sparse kind "exact": a CSR gradient gives exactly the update of the dense gradient with the
missing entries zero.

* Without momentum a zero gradient changes nothing, so only the stored entries are touched.
* With momentum torch keeps a *sparse* buffer: the first step clones the sparse gradient, later
  steps scale it and add the new gradient (the union of the stored entries), and the parameter
  moves by the whole buffer. Every entry the buffer holds keeps decaying and moving the
  parameter after its gradient has stopped, which is exactly what a dense buffer does (an entry
  the sparse buffer lacks is a zero of the dense one and moves nothing). npoptim therefore keeps
  the buffer dense, scatters the CSR gradient into a dense one and runs the dense update; the
  state holds the dense buffer, where torch's state_dict holds the sparse one (``to_dense()``
  of it is equal). npoptim also accepts the mixes torch refuses ("add(sparse, dense) is not
  supported"): a dense gradient after a sparse first step, and nesterov with a sparse gradient
  and a dense buffer.
* Weight decay with a CSR gradient is refused with ``ValueError`` before anything changes
  (torch fails with ``RuntimeError`` from ``add(sparse, dense)``; it would touch every entry).
* Gradients with duplicate entries are summed first (see :mod:`npoptim.sparse.rowgrad`); torch
  on an uncoalesced gradient keeps the duplicates in its buffer and may round differently.
* Rounding is the dense rule's. torch's ``param.add_(sparse_grad, alpha=-lr)`` for a coalesced
  COO gradient (no momentum) does not fuse, so there npoptim can differ from torch's sparse
  path in the last bit (its momentum path, and a hybrid COO gradient, fuse as the dense one).

Convention switch (see :mod:`npoptim.flavors`): ``lr_in_buffer=True`` (Keras, TF
``ApplyKerasMomentum``) puts the learning rate inside the buffer, as Keras's
``m = mu*m - lr*g; p += m`` (nesterov ``p += mu*m - lr*g``): here
:math:`b \leftarrow \mu b + \gamma g` and :math:`\theta \leftarrow \theta - b`
(nesterov :math:`\theta - (\mu b + \gamma g)`), the buffer starting from zero (so the first
step's :math:`b = \gamma g`). The rule runs with ``grad_scale = lr`` and ``neg_lr = -1``; it
equals torch at constant lr only. Keras has no dampening, so the switch refuses one.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense, apply_rows
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import decayed_grad, fma
from npoptim.optim.optimizer import Optimizer, flat_view, typed_record
from npoptim.optim.options import check_flag, check_nonnegative, flavored, is_real
from npoptim.sparse.rowgrad import RowGradient


class SGDHyper(NamedTuple):
    """One step's hyperparameters of the SGD rules (built by ``SGD._update``)."""

    weight_decay: float
    neg_lr: float               # -lr
    maximize: float             # 1 or 0
    momentum: float
    one_minus_dampening: float
    nesterov: float             # 1 or 0
    grad_scale: float           # lr with lr_in_buffer (and momentum), else 1


@kernel
def _momentum_step(p, g, buf, h):
    """The parameter after the step with the updated buffer ``buf`` (torch's
    ``grad.add(buf, alpha=momentum)`` for nesterov, then ``param.add_(.., alpha=-lr)``)."""
    direction = fma(h.momentum, buf, g) if h.nesterov != 0 else buf
    return fma(h.neg_lr, direction, p)


@kernel
def sgd_rule(p, g, s, h):
    """One element of SGD without momentum; ``s = ()``."""
    g = decayed_grad(p, g, h)
    return fma(h.neg_lr, g, p), s


@kernel
def momentum_first_rule(p, g, s, h):
    """The first momentum step: the buffer becomes the (decayed) gradient; ``s = (buf,)``."""
    g = decayed_grad(p, g, h) * h.grad_scale
    buf = g
    return _momentum_step(p, g, buf, h), (buf,)


@kernel
def momentum_rule(p, g, s, h):
    """A later momentum step: ``buf = momentum * buf + (1 - dampening) * g`` (torch's
    ``buf.mul_(momentum).add_(g, alpha=1 - dampening)``); ``s = (buf,)``."""
    (buf,) = s
    g = decayed_grad(p, g, h) * h.grad_scale
    buf = fma(h.one_minus_dampening, g, buf * h.momentum)
    return _momentum_step(p, g, buf, h), (buf,)


@kernel
def _sgd_dense(param, grad, states, hyper):
    apply_dense(sgd_rule, param, grad, states, SGDHyper(*hyper))


@kernel
def _sgd_rows(param, ncols, rows, row_ptr, indices, data, states, hyper):
    apply_rows(sgd_rule, param, ncols, rows, row_ptr, indices, data, states,
               SGDHyper(*hyper))


@kernel
def _momentum_first_dense(param, grad, states, hyper):
    apply_dense(momentum_first_rule, param, grad, states, SGDHyper(*hyper))


@kernel
def _momentum_dense(param, grad, states, hyper):
    apply_dense(momentum_rule, param, grad, states, SGDHyper(*hyper))


def _densify(grad, dtype):
    """The flat dense array of a canonical :class:`RowGradient` (missing entries zero)."""
    nrows, ncols = grad.shape
    dense = np.zeros(nrows * ncols, dtype)
    rows = np.repeat(grad.rows, np.diff(grad.row_ptr))
    dense[rows * ncols + grad.indices] = grad.data
    return dense


class SGD(Optimizer):
    """SGD, matching ``torch.optim.SGD`` option for option (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    momentum : float, default: 0
        Momentum factor μ (0: no momentum buffer).
    dampening : float, default: 0
        Dampening τ of the momentum: b ← μb + (1 - τ)g.
    weight_decay : float, default: 0
        Weight decay λ: λθ added to the gradient (L2), or θ(1 - γλ) with
        ``decoupled_weight_decay``.
    nesterov : bool, default: False
        Nesterov momentum: step along g + μb.
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    foreach, differentiable, fused : ignored
        Accepted for compatibility with torch only: they choose torch's implementations and change
        nothing here (``differentiable=True`` is refused: npoptim has no autograd).
    lr_in_buffer : bool, default: False
        Put the lr inside the momentum buffer, b ← μb + γg, θ ← θ - b (Keras, TF
        ``ApplyKerasMomentum``).
    decoupled_weight_decay : bool, default: False
        Decay the parameter, θ(1 - γλ), before the rule instead of adding λθ to the gradient.
    state_arrays : store or None, default: None
        Where the momentum buffer is created, e.g. a :class:`npoptim.storage.MemmapStore`; None: in
        RAM.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "exact"
    step_in_state_dict = None
    creates_missing_state = True  # the buffer appears at the first step with momentum
    #: The convention switches and their torch values (see :mod:`npoptim.flavors`).
    torch_conventions = {"lr_in_buffer": False, "decoupled_weight_decay": False}
    #: A switch that matters only when this option is non-zero.
    conventions_apply = {"lr_in_buffer": "momentum", "decoupled_weight_decay": "weight_decay"}
    #: the base class applies ``decoupled_weight_decay`` before the rule (Keras's decay)
    decouples_weight_decay = True

    @flavored
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None, lr_in_buffer=False, decoupled_weight_decay=False,
                 state_arrays=None):
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused,
                                      lr_in_buffer=lr_in_buffer,
                                      decoupled_weight_decay=decoupled_weight_decay),
                         state_arrays=state_arrays)

    def _check_group(self, group):
        check_nonnegative(group, "lr", "momentum", "weight_decay")
        dampening = group["dampening"]
        if not is_real(dampening):
            raise ValueError(f"Invalid dampening value: {dampening}")
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        check_flag(group, "lr_in_buffer", "decoupled_weight_decay")
        if group["lr_in_buffer"] and group["dampening"] != 0:
            raise ValueError("lr_in_buffer=True (Keras's momentum) has no dampening; got "
                             f"dampening={group['dampening']}")

    def _state_names(self, group):
        return ("momentum_buffer",) if group["momentum"] != 0 else ()

    def _apply(self, prepared):
        # as the base, except that a parameter gets state only from its first momentum step
        # (torch has no state entry for a parameter that never used momentum)
        for group, index, param, grad in prepared:
            state = self.state.get(index, {})
            first = group["momentum"] != 0 and "momentum_buffer" not in state
            if first:
                # uninitialised until the first step writes it (no fill needed in RAM)
                state["momentum_buffer"] = (np.empty(param.shape, param.dtype)
                                            if self.state_arrays is None else
                                            self._new_state_array(param, "momentum_buffer",
                                                                  param.shape))
            if state:
                self.state[index] = state
            with flat_view(param) as flat:
                self._update(flat, grad, state, self._decay_before_rule(flat, group), index,
                             param.shape, first)

    def _load_param_state(self, entry, param, group, where):
        # torch accepts a buffer whatever the group's momentum now is (it ignores it at 0)
        if isinstance(entry, dict) and not entry:
            return {}
        return super()._load_param_state(entry, param, dict(group, momentum=1), where)

    def _prepare_grad(self, grad, param, group, where):
        prepared = super()._prepare_grad(grad, param, group, where)
        if isinstance(prepared, RowGradient) and group["weight_decay"] != 0:
            raise ValueError(f"{where}: weight_decay option is not compatible with sparse "
                             "gradients")
        return prepared

    def _update(self, param, grad, state, group, index, shape, first=False):
        """``first``: the momentum buffer was just created and is not initialised yet."""
        momentum = group["momentum"]
        lr_in_buffer = group["lr_in_buffer"] and momentum != 0
        hyper = typed_record(SGDHyper, param, weight_decay=group["weight_decay"],
                             neg_lr=-1.0 if lr_in_buffer else -group["lr"],
                             maximize=bool(group["maximize"]),
                             momentum=momentum, one_minus_dampening=1 - group["dampening"],
                             nesterov=bool(group["nesterov"]),
                             grad_scale=group["lr"] if lr_in_buffer else 1.0)
        if momentum == 0:
            self._run((_sgd_dense, _sgd_rows), param, grad, (), hyper)
            return
        if isinstance(grad, RowGradient):
            grad = _densify(grad, param.dtype)
        kernel_ = _momentum_first_dense if first else _momentum_dense
        kernel_(param, grad, self._flat_states(state, group), hyper)
