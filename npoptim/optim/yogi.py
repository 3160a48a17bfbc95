r"""Yogi (Zaheer et al., "Adaptive Methods for Nonconvex Optimization", NeurIPS 2018), as
``optax.yogi`` 0.2.8.

Adam with an additive second moment: :math:`v` moves towards :math:`g^2` by
:math:`(1-\beta_2)g^2` in the direction of the sign, so it can neither grow nor shrink by more
than that in a step. For each element, with gradient :math:`g` (negated when ``maximize``),
step count :math:`t` (per parameter), :math:`b_1 = 1-\beta_1^t`, :math:`b_2 = 1-\beta_2^t`:

.. math::

    m &\leftarrow \beta_1 m + (1-\beta_1)\,g\\
    v &\leftarrow v - (1-\beta_2)\operatorname{sign}(v - g^2)\,g^2\\
    \theta &\leftarrow \theta - \gamma\,\frac{m/b_1}{\sqrt{v/b_2 + \bar\epsilon} + \epsilon}

``bias_correction=False`` sets :math:`b_1 = b_2 = 1`, the update as the paper's pseudo-code
writes it. :math:`m` and :math:`v` both start at ``initial_accumulator_value`` (1e-6), as in
optax (the paper starts :math:`v` from a data-dependent estimate, which no library does);
:math:`\bar\epsilon` is ``eps_root`` (0). The state is kept under optax's names, ``mu`` and
``nu`` (there is no PyTorch code of the authors).

Source: google-deepmind/optax ``optax/_src/transform.py`` ``scale_by_yogi``
(``optax/_src/alias.py`` ``yogi``, defaults ``b1=0.9, b2=0.999, eps=1e-3``); its learning
rate has no default (npoptim: 1e-2, the paper's). optax has no weight decay option for Yogi,
nor does npoptim.

Dense gradients only: a zero gradient still moves :math:`m` towards 0 and :math:`v` down.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import check_betas, check_flag, check_nonnegative, flavored


class YogiHyper(NamedTuple):
    """One step's hyperparameters of :func:`yogi_rule` (built by ``Yogi._update``)."""

    maximize: float           # 1 or 0
    beta1: float
    one_minus_beta1: float
    one_minus_beta2: float
    bias_correction1: float   # b1 (1 without bias correction)
    bias_correction2: float   # b2 (1 without bias correction)
    eps_root: float
    eps: float
    neg_lr: float             # -γ


@kernel
def yogi_rule(p, g, s, h):
    """One element of Yogi; ``s = (mu, nu)``."""
    mu, nu = s
    if h.maximize != 0:
        g = -g
    m = h.one_minus_beta1 * g + h.beta1 * mu
    g2 = g * g
    v = nu - h.one_minus_beta2 * np.sign(nu - g2) * g2
    update = (m / h.bias_correction1) / (np.sqrt(v / h.bias_correction2 + h.eps_root) + h.eps)
    return p + h.neg_lr * update, (m, v)


@kernel
def _yogi_dense(param, grad, states, hyper):
    apply_dense(yogi_rule, param, grad, states, YogiHyper(*hyper))


class Yogi(Optimizer):
    """Yogi (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.01
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.999)
        Decay rates (β1, β2) of the first and second moments.
    eps : float, default: 0.001
        Term ε added to the denominator.
    eps_root : float, default: 0.0
        Term added inside the square root.
    initial_accumulator_value : float, default: 1e-06
        Start value of m and v.
    bias_correction : bool, default: True
        Bias-correct the moments; False: the paper's pseudo-code.
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"

    @flavored
    def __init__(self, params, lr=1e-2, betas=(0.9, 0.999), eps=1e-3, *, eps_root=0.0,
                 initial_accumulator_value=1e-6, bias_correction=True, maximize=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, eps_root=eps_root,
                                      initial_accumulator_value=initial_accumulator_value,
                                      bias_correction=bias_correction, maximize=maximize))

    def _check_group(self, group):
        check_nonnegative(group, "lr", "eps")
        check_nonnegative(group, "eps_root", label="eps_root value")
        check_nonnegative(group, "initial_accumulator_value",
                          label="initial_accumulator_value")
        check_betas(group["betas"])
        check_flag(group, "bias_correction", "maximize")

    def _state_names(self, group):
        return ("mu", "nu")

    def _init_state(self, param, group):
        value = group["initial_accumulator_value"]
        return {"step": 0, "mu": np.full(param.shape, value, param.dtype),
                "nu": np.full(param.shape, value, param.dtype)}

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        step = state["step"]
        beta1, beta2 = group["betas"]
        correct = group["bias_correction"]
        hyper = typed_record(YogiHyper, param, maximize=bool(group["maximize"]), beta1=beta1,
                             one_minus_beta1=1 - beta1, one_minus_beta2=1 - beta2,
                             bias_correction1=1 - beta1 ** step if correct else 1.0,
                             bias_correction2=1 - beta2 ** step if correct else 1.0,
                             eps_root=group["eps_root"], eps=group["eps"], neg_lr=-group["lr"])
        _yogi_dense(param, grad, self._flat_states(state, group), hyper)
