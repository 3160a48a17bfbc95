r"""Adamax, the infinity-norm variant of Adam (Kingma & Ba, 2015, section 7.1), as
``torch.optim.Adamax`` 2.13.

For each element, with gradient :math:`g` (negated when ``maximize``) and step count :math:`t`
(per parameter):

.. math::

    g &\leftarrow g + \lambda\theta                                   &&\text{weight decay}\\
    m &\leftarrow m + (1-\beta_1)(g - m)                               &&\text{``exp\_avg``}\\
    u &\leftarrow \max(\beta_2 u,\; |g| + \epsilon)                    &&\text{``exp\_inf``}\\
    \theta &\leftarrow \theta - \frac{\gamma}{1-\beta_1^t}\cdot\frac{m}{u}

:math:`\epsilon` sits inside the maximum (so :math:`u \ge \epsilon` and the division is safe),
and the maximum propagates NaN as ``torch.maximum`` does. Dense gradients only, as in torch.

Rounding follows torch's CPU kernels (see :mod:`npoptim.kernels.scalar`): weight decay is a
fused multiply-add, :math:`m` a ``lerp``, and the last line torch's ``addcdiv``,
``p + (-clr * m) / u``.

Convention switch (see :mod:`npoptim.flavors`): ``eps_mode="added"`` (Keras, TF
``ApplyAdaMax``, tfjs) keeps :math:`\epsilon` out of the maximum and adds it after,
:math:`u \leftarrow \max(\beta_2 u, |g|)`, :math:`\theta \leftarrow \theta -
\frac{\gamma}{1-\beta_1^t}\cdot\frac{m}{u + \epsilon}`; ``"in_max"`` is torch's. The rule
runs with ``eps_in_max`` and ``eps_added``, one of them 0.
"""
from typing import NamedTuple

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import fma, lerp, maximum
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import (check_betas, check_choice, check_flag, check_nonnegative,
                                   flavored)


class AdamaxHyper(NamedTuple):
    """One step's hyperparameters of the Adamax rule (built by ``Adamax._update``)."""

    weight_decay: float
    one_minus_beta1: float
    beta2: float
    eps_in_max: float   # eps (eps_mode="in_max"), else 0
    eps_added: float    # eps (eps_mode="added"), else 0
    neg_clr: float   # -lr / (1 - beta1^t)
    maximize: float  # 1 or 0


@kernel
def adamax_rule(p, g, s, h):
    """One element; ``s = (exp_avg, exp_inf)``."""
    exp_avg, exp_inf = s
    if h.maximize != 0:
        g = -g
    if h.weight_decay != 0:
        g = fma(h.weight_decay, p, g)
    m = lerp(exp_avg, g, h.one_minus_beta1)
    u = maximum(exp_inf * h.beta2, abs(g) + h.eps_in_max)
    return p + h.neg_clr * m / (u + h.eps_added), (m, u)


@kernel
def _adamax_dense(param, grad, states, hyper):
    apply_dense(adamax_rule, param, grad, states, AdamaxHyper(*hyper))


class Adamax(Optimizer):
    """Adamax, matching ``torch.optim.Adamax`` option for option (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.002
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.999)
        Decay rates (β1, β2) of the first moment and of the infinity norm.
    eps : float, default: 1e-08
        Term ε, inside the maximum (or added after it with ``eps_mode="added"``).
    weight_decay : float, default: 0
        Weight decay λ: λθ added to the gradient (L2), or θ(1 - γλ) with
        ``decoupled_weight_decay``.
    foreach, differentiable, capturable : ignored
        Accepted for compatibility with torch only: they choose torch's implementations and change
        nothing here (``differentiable=True`` is refused: npoptim has no autograd).
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    eps_mode : str, default: 'in_max'
        ``"in_max"`` (torch: u ← max(β2u, abs(g) + ε)) or ``"added"`` (Keras, TF, tfjs: m/(u + ε)).
    decoupled_weight_decay : bool, default: False
        Decay the parameter, θ(1 - γλ), before the rule instead of adding λθ to the gradient.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    #: The convention switches and their torch values (see :mod:`npoptim.flavors`).
    torch_conventions = {"eps_mode": "in_max", "decoupled_weight_decay": False}
    conventions_apply = {"decoupled_weight_decay": "weight_decay"}
    #: the base class applies ``decoupled_weight_decay`` before the rule (Keras's decay)
    decouples_weight_decay = True

    @flavored
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False,
                 eps_mode="in_max", decoupled_weight_decay=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, capturable=capturable,
                                      eps_mode=eps_mode,
                                      decoupled_weight_decay=decoupled_weight_decay))

    def _check_group(self, group):
        check_nonnegative(group, "lr", "eps")
        check_betas(group["betas"])
        check_nonnegative(group, "weight_decay")
        check_choice(group, "eps_mode", ("in_max", "added"))
        check_flag(group, "decoupled_weight_decay")

    def _state_names(self, group):
        return ("exp_avg", "exp_inf")

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        beta1, beta2 = group["betas"]
        clr = group["lr"] / (1 - beta1 ** state["step"])
        hyper = typed_record(AdamaxHyper, param, weight_decay=group["weight_decay"],
                             one_minus_beta1=1 - beta1, beta2=beta2,
                             eps_in_max=group["eps"] if group["eps_mode"] == "in_max" else 0.0,
                             eps_added=group["eps"] if group["eps_mode"] == "added" else 0.0,
                             neg_clr=-clr, maximize=bool(group["maximize"]))
        _adamax_dense(param, grad, self._flat_states(state, group), hyper)
