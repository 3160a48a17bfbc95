r"""Rprop, resilient backpropagation (Riedmiller & Braun, 1993), as ``torch.optim.Rprop`` 2.13.

Each element has its own step size :math:`\Delta`, adapted from the sign of successive
gradients only; the gradient's magnitude is never used. With gradient :math:`g` (negated when
``maximize``), the previous (stored) gradient :math:`g'` (``prev``), factors
:math:`0 < \eta_- < 1 < \eta_+` (``etas``) and bounds :math:`[\Delta_{min}, \Delta_{max}]`
(``step_sizes``):

.. math::

    \Delta &\leftarrow \mathrm{clamp}(\Delta \cdot
        \begin{cases} \eta_+ & g g' > 0 \\ \eta_- & g g' < 0 \\ 1 & \text{otherwise}
        \end{cases},\ \Delta_{min}, \Delta_{max})\\
    g &\leftarrow 0 \quad\text{where } g g' < 0  &&\quad\text{(1)}\\
    \theta &\leftarrow \theta - \mathrm{sign}(g)\,\Delta\\
    g' &\leftarrow g

1. The sign flipped: skip one step.

``step_size`` starts at ``lr``, ``prev`` at 0. As in torch, ``sign`` of NaN is 0, and the
factor is chosen by comparing the stored factor with :math:`\eta_-` cast to the parameter's
dtype (torch's ``sign.eq(etaminus)``).
"""
from typing import NamedTuple

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import constant
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import check_nonnegative, flavored


class RpropHyper(NamedTuple):
    """One step's hyperparameters of the Rprop rule (built by ``Rprop._update``)."""

    etaminus: float
    etaplus: float
    step_size_min: float
    step_size_max: float
    maximize: float  # 1 or 0


@kernel
def rprop_rule(p, g, s, h):
    """One element; ``s = (prev, step_size)``."""
    prev, step_size = s
    etaminus, etaplus, size_min, size_max = h.etaminus, h.etaplus, h.step_size_min, h.step_size_max
    one, zero = constant(1.0, p), constant(0.0, p)
    if h.maximize != 0:
        g = -g
    # torch: sign = (g * prev).sign(); sign[>0] = etaplus; sign[<0] = etaminus; sign[==0] = 1
    prod = g * prev
    factor = zero
    if prod > 0:
        factor = one
    elif prod < 0:
        factor = -one
    if factor > 0:
        factor = etaplus
    if factor < 0:
        factor = etaminus
    if factor == 0:
        factor = one
    step_size = step_size * factor
    if step_size < size_min:  # clamp_(min, max); NaN stays NaN
        step_size = size_min
    if step_size > size_max:
        step_size = size_max
    if factor == etaminus:
        g = zero
    sign_g = zero  # torch.sign: 0 for 0 and NaN
    if g > 0:
        sign_g = one
    elif g < 0:
        sign_g = -one
    # param.addcmul_(grad.sign(), step_size, value=-1)
    return p + (-sign_g) * step_size, (g, step_size)


@kernel
def _rprop_dense(param, grad, states, hyper):
    apply_dense(rprop_rule, param, grad, states, RpropHyper(*hyper))


class Rprop(Optimizer):
    """Rprop, matching ``torch.optim.Rprop`` (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.01
        Initial step size Δ of every element.
    etas : tuple of float, default: (0.5, 1.2)
        Factors (η-, η+) that shrink and grow the step size.
    step_sizes : tuple of float, default: (1e-06, 50)
        Bounds (Δmin, Δmax) of the step size.
    capturable, foreach, differentiable : ignored
        Accepted for compatibility with torch only: they choose torch's implementations and change
        nothing here (``differentiable=True`` is refused: npoptim has no autograd).
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    @flavored
    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        super().__init__(params, dict(lr=lr, etas=etas, step_sizes=step_sizes,
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, capturable=capturable))

    def _check_group(self, group):
        check_nonnegative(group, "lr")
        etas, sizes = group["etas"], group["step_sizes"]
        if not isinstance(etas, (tuple, list)) or len(etas) != 2:
            raise ValueError(f"etas must be a pair of floats, got {etas!r}")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        if not isinstance(sizes, (tuple, list)) or len(sizes) != 2:
            raise ValueError(f"step_sizes must be a pair of floats, got {sizes!r}")

    def _state_names(self, group):
        return ("prev", "step_size")

    def _init_state(self, param, group):
        state = super()._init_state(param, group)
        state["step_size"][...] = group["lr"]
        return state

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        etaminus, etaplus = group["etas"]
        size_min, size_max = group["step_sizes"]
        hyper = typed_record(RpropHyper, param, etaminus=etaminus, etaplus=etaplus,
                             step_size_min=size_min, step_size_max=size_max,
                             maximize=bool(group["maximize"]))
        _rprop_dense(param, grad, self._flat_states(state, group), hyper)
