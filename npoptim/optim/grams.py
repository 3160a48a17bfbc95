r"""Grams, "Gradient Descent with Adaptive Momentum Scaling" (Cao et al., arXiv 2412.17107,
Algorithm 1): Adam's update magnitude with the sign of the current gradient.

For each element, with gradient :math:`g` (negated when ``maximize``), step count :math:`t`
(per parameter), :math:`b_1 = 1-\beta_1^t`, :math:`b_2 = 1-\beta_2^t`, learning rate
:math:`\gamma` and weight decay :math:`\lambda`:

.. math::

    \theta &\leftarrow \theta\,(1 - \gamma\lambda)\\
    m &\leftarrow \beta_1 m + (1-\beta_1)\,g\\
    v &\leftarrow \beta_2 v + (1-\beta_2)\,g^2\\
    u &= \frac{m/b_1}{\sqrt{v}/\sqrt{b_2} + \epsilon}
        &&\text{(default, ``eps\_mode="bias\_corrected"``)}\\
    u &= \frac{\sqrt{b_2}}{b_1}\cdot\frac{m}{\sqrt{v} + \epsilon}
        &&\text{(``eps\_mode="eps\_hat"``)}\\
    \theta &\leftarrow \theta - \gamma\,\operatorname{sign}(g)\,|u|

``sign(0) = 0``: an element whose gradient is 0 does not move (but for the decay), whatever
its momentum. Adam's last line would be :math:`\theta - \gamma u`, whose sign is that of
:math:`m`; Grams keeps Adam's magnitude and moves against the current gradient. The moments
are Adam's (:func:`npoptim.optim.adam.adam_moments`, torch's roundings: ``lerp`` and
``addcmul``); the state is ``exp_avg``, ``exp_avg_sq`` and ``step``. ``bias_correction=False``
sets :math:`b_1 = b_2 = 1` (grams-pytorch's ``correct_bias=False``). Dense gradients only.

Sources and where they differ:

* the paper's Algorithm 1: :math:`\hat m/(\sqrt{\hat v}+\epsilon)` with the bias-corrected
  moments, the decoupled decay :math:`\theta - \gamma(\hat u + \lambda\theta)`: the default,
  ``eps_mode="bias_corrected"`` (the decay is written :math:`\theta(1-\gamma\lambda)` first,
  the same in real arithmetic).
* kozistr/pytorch_optimizer 4.1.0 ``pytorch_optimizer/optimizer/grams.py`` ``Grams``: the
  paper's form, ``(m / b1) / (sqrt(v) / sqrt(b2) + eps)``, ``abs_().mul_(grad.sign())``, the
  decay :math:`\theta(1-\gamma\lambda)` applied after the update is computed (the same), eps
  1e-6: the default. Its step count is the param group's (``group["step"]``), npoptim's the
  parameter's: they differ only where a parameter has no gradient at some step (measured:
  where every parameter has one, the golden cases match it to 1e-16). Its
  ``weight_decouple=False`` adds :math:`\lambda\theta` to ``p.grad`` *after* the update was
  computed from it, so the L2 decay changes nothing but the caller's gradient; npoptim has no
  such form (decoupled decay only).
* Gunale0926/Grams, the authors' code, PyPI ``grams-pytorch`` 0.0.2 ``grams.py`` ``Grams``
  (written from Hugging Face's AdamW): eps on :math:`\sqrt v`, the bias corrections in the
  step size :math:`\gamma\sqrt{b_2}/b_1`: ``eps_mode="eps_hat"`` (the words of Adam's
  switch); the decay :math:`\theta - \gamma\lambda\theta` first (a rounding apart), ``m`` as
  :math:`\beta_1 m + (1-\beta_1) g` (a rounding apart from ``lerp``), only for
  ``weight_decay > 0``. It has no ``maximize``, and it overwrites ``p.grad`` with
  :math:`\operatorname{sign}(g)|m|`; npoptim never writes the gradients.
"""
import math
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.optim.adam import adam_moments, moment_hyper
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import check_betas, check_choice, check_flag, check_nonnegative


class GramsHyper(NamedTuple):
    """One step's hyperparameters of :func:`grams_rule` (built by ``Grams._update``)."""

    # read by Adam's adam_moments (see npoptim.optim.adam.moment_hyper)
    decay_factor: float           # 1 - lr * weight_decay (decoupled decay), 1 without decay
    l2: float                     # always 0: Grams decays decoupled
    l2_decays: float              # always 0
    one_minus_beta1: float
    beta2: float
    one_minus_beta2: float
    maximize: float               # 1 or 0
    # Grams's own
    bias_correction1: float       # b1 (eps_mode="eps_hat": 1, the correction is in neg_step)
    bias_correction2_sqrt: float  # sqrt(b2) (eps_mode="eps_hat": 1)
    eps: float
    neg_step: float               # -lr (eps_mode="eps_hat": -lr * sqrt(b2) / b1)


@kernel
def grams_rule(p, g, s, h):
    """One element of Grams; ``s = (exp_avg, exp_avg_sq)``."""
    exp_avg, exp_avg_sq = s
    p, g, m, v = adam_moments(p, g, exp_avg, exp_avg_sq, h)
    u = m / h.bias_correction1 / (math.sqrt(v) / h.bias_correction2_sqrt + h.eps)
    return p + h.neg_step * (np.sign(g) * abs(u)), (m, v)


@kernel
def _grams_dense(param, grad, states, hyper):
    apply_dense(grams_rule, param, grad, states, GramsHyper(*hyper))


_EPS_MODES = ("bias_corrected", "eps_hat")


class Grams(Optimizer):
    """Grams (see the module docstring): Adam's magnitude, the gradient's sign.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.999)
        Decay rates (β1, β2) of the first and second moments.
    eps : float, default: 1e-06
        Term ε added to the denominator (both implementations' default).
    weight_decay : float, default: 0.0
        Decoupled weight decay λ: θ(1 - γλ) before the moments.
    eps_mode : {'bias_corrected', 'eps_hat'}, default: 'bias_corrected'
        Where ε goes: added to sqrt(v/b2) (the paper, pytorch_optimizer) or to sqrt(v), the
        bias corrections in the step size (the authors' grams-pytorch).
    bias_correction : bool, default: True
        Bias-correct the moments; False: b1 = b2 = 1 at every step (grams-pytorch's
        ``correct_bias=False``).
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    """

    sparse_kind = "dense-only"
    step_in_state_dict = "int"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, *,
                 eps_mode="bias_corrected", bias_correction=True, maximize=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      eps_mode=eps_mode, bias_correction=bias_correction,
                                      maximize=maximize))

    def _check_group(self, group):
        check_nonnegative(group, "lr", "eps", "weight_decay")
        check_betas(group["betas"])
        check_choice(group, "eps_mode", _EPS_MODES)
        check_flag(group, "bias_correction", "maximize")

    def _state_names(self, group):
        return ("exp_avg", "exp_avg_sq")

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        step = state["step"]
        beta1, beta2 = group["betas"]
        b1, b2 = 1 - beta1 ** step, 1 - beta2 ** step
        if not group["bias_correction"]:
            b1 = b2 = 1.0
        neg_step = -group["lr"]
        if group["eps_mode"] == "eps_hat":  # grams-pytorch: lr * sqrt(b2) / b1
            neg_step = -(group["lr"] * math.sqrt(b2) / b1)
            b1 = b2 = 1.0
        hyper = typed_record(GramsHyper, param,
                             **moment_hyper(dict(group, decoupled_weight_decay=True)),
                             bias_correction1=b1, bias_correction2_sqrt=math.sqrt(b2),
                             eps=group["eps"], neg_step=neg_step)
        _grams_dense(param, grad, self._flat_states(state, group), hyper)
