r"""Lion, "EvoLved Sign Momentum" (Chen et al., "Symbolic Discovery of Optimization Algorithms",
NeurIPS 2023, arXiv 2302.06675, Program 1), as ``optax.lion`` 0.2.8.

For each element, with gradient :math:`g` (negated when ``maximize``), learning rate
:math:`\gamma` and weight decay :math:`\lambda`:

.. math::

    c &= \beta_1 m + (1-\beta_1)\,g        &&\text{the interpolation the sign is taken of}\\
    u &= \operatorname{sign}(c) + \lambda\theta\\
    \theta &\leftarrow \theta - \gamma\,u  &&\text{(default, ``variant="paper"``)}\\
    \theta &\leftarrow \theta\,(1-\gamma\lambda) - \gamma\operatorname{sign}(c)
                                           &&\text{(``variant="lion\_pytorch"``)}\\
    m &\leftarrow \beta_2 m + (1-\beta_2)\,g

``sign(0) = 0``. There is no step counter and no bias correction; the state is ``exp_avg``
(:math:`m`), the name of the authors' PyTorch code.

Sources and where they differ:

* the paper's Program 1 and google-deepmind/optax ``optax/_src/alias.py`` ``lion`` (=
  ``scale_by_lion`` in ``optax/_src/transform.py``, then ``add_decayed_weights``, then the
  learning rate) add :math:`\lambda\theta` to the sign and scale the sum by :math:`\gamma`:
  the default here, in the same order of operations.
* the authors' PyTorch file (google/automl ``lion/lion_pytorch.py``) and lucidrains
  ``lion-pytorch`` (PyPI, ``lion_pytorch/lion_pytorch.py``, the widely used port) decay the
  parameter first, :math:`\theta(1-\gamma\lambda)`, then add :math:`-\gamma\,\mathrm{sign}(c)`:
  ``variant="lion_pytorch"`` (alias ``"google_automl"``). The two forms are the same
  algorithm, rounded differently (a few ulps per step).
* defaults: ``optax.lion`` has no default learning rate and ``weight_decay=1e-3``;
  lion-pytorch has ``lr=1e-4`` and ``weight_decay=0``; npoptim takes lion-pytorch's (torch
  style: no decay unless asked). lion-pytorch's ``decoupled_weight_decay=True`` divides
  ``weight_decay`` by the initial lr; npoptim has no such switch (pass ``weight_decay / lr``).
* optax's ``scale_by_lion`` also has ``mode="smooth"``/``"refined"`` (tanh or clipped
  instead of the sign), which ``optax.lion`` does not expose; npoptim implements the sign only.

``cautious=True`` (C-Lion, :mod:`npoptim.optim.cautious`): the sign is masked where it
disagrees with :math:`g` (:math:`c\,g \le 0`) and the kept signs are scaled by
``cautious_scale``'s :math:`s`, :math:`u = s\,\phi\odot\operatorname{sign}(c) + \lambda\theta`:
the decay stays outside the mask in both forms. pytorch_optimizer 4.1.0's ``Lion(cautious=True)``
(``pytorch_optimizer/optimizer/lion.py``, default ``weight_decouple=True``) and C-Optim's
``c_lion.py`` are ``variant="lion_pytorch", cautious=True`` (``"plus_one"``), timm's
``Lion(caution=True)`` (``timm/optim/lion.py``) is ``cautious_scale="floored_mean"`` with
the same decay first. pytorch_optimizer and timm interpolate with ``lerp``,
:math:`m + (1-\beta)(g - m)`, npoptim (as lion-pytorch and C-Optim) with
:math:`\beta m + (1-\beta)g`: the same in real arithmetic, a rounding apart in the moment
(and in the sign only where :math:`c` rounds across 0). A cautious step makes two passes over
each parameter (the first counts the agreeing elements: :func:`lion_agreement`).

Dense gradients only: a zero gradient still moves :math:`\theta` and :math:`m`, so a CSR
update of the stored entries alone would differ from the dense one.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.reduction import sum_pair
from npoptim.kernels.scalar import constant
from npoptim.optim.cautious import NOT_CAUTIOUS, agrees, caution_scale, check_cautious, masked
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import (VARIANT_DEFAULT, check_betas, check_choice, check_flag,
                                   check_no_variant, check_nonnegative, flavored, resolve_variant)


class LionHyper(NamedTuple):
    """One step's hyperparameters of :func:`lion_rule` (built by ``Lion._update``)."""

    maximize: float         # 1 or 0
    beta1: float
    one_minus_beta1: float
    beta2: float
    one_minus_beta2: float
    update_decay: float     # λ added to the sign (weight_decay_form="in_update"), else 0
    decay_factor: float     # 1 - γλ applied first (weight_decay_form="decoupled"), else 1
    neg_lr: float           # -γ
    caution_scale: float    # cautious: the scale s of the kept signs, else 0


@kernel
def _interpolation(g, exp_avg, h):
    """The gradient after ``maximize`` and the interpolation ``c`` the sign is taken of."""
    if h.maximize != 0:
        g = -g
    return g, h.one_minus_beta1 * g + h.beta1 * exp_avg


@kernel
def lion_rule(p, g, s, h):
    """One element of Lion; ``s = (exp_avg,)``."""
    (exp_avg,) = s
    g, c = _interpolation(g, exp_avg, h)
    u = np.sign(c)
    if h.caution_scale != 0:
        u = masked(u, c, g, h.caution_scale)
    if h.update_decay != 0:
        u = u + h.update_decay * p
    p = p * h.decay_factor
    m = h.one_minus_beta2 * g + h.beta2 * exp_avg
    return p + h.neg_lr * u, (m,)


@kernel
def lion_agreement(p, g, s, h):
    """The cautious first pass: whether this element's sign agrees with its gradient, as the
    value to sum (:func:`npoptim.optim.cautious.agrees`); ``s = (exp_avg,)`` is only read."""
    (exp_avg,) = s
    g, c = _interpolation(g, exp_avg, h)
    return (exp_avg,), agrees(c, g), constant(0.0, g)


@kernel
def _lion_dense(param, grad, states, hyper):
    apply_dense(lion_rule, param, grad, states, LionHyper(*hyper))


@kernel
def _lion_agreeing(param, grad, states, hyper):
    return sum_pair(lion_agreement, param, grad, states, LionHyper(*hyper))[0]


#: The published forms (see the module docstring).
VARIANTS = {
    "paper": dict(weight_decay_form="in_update"),
    "lion_pytorch": dict(weight_decay_form="decoupled"),
}
ALIASES = {"optax": "paper", "google_automl": "lion_pytorch"}
_WEIGHT_DECAY_FORMS = ("in_update", "decoupled")


class Lion(Optimizer):
    """Lion (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.0001
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.99)
        (β1, β2): β1 of the interpolation the sign is taken of, β2 of the momentum.
    weight_decay : float, default: 0.0
        Weight decay λ, in the form ``weight_decay_form`` says.
    variant : str, default: 'paper'
        The published form to reproduce (a name of ``VARIANTS`` or ``ALIASES``, see the module
        docstring); it sets every switch whose default is "the variant's", and a switch given
        explicitly overrides it.
    weight_decay_form : str, default: the variant's
        ``"in_update"`` (λθ added to the sign, the paper, optax) or ``"decoupled"`` (θ(1 - γλ)
        first, lion-pytorch).
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    cautious : bool, default: False
        C-Lion: keep only the signs that agree with the gradient, scaled up as
        ``cautious_scale`` says (see :mod:`npoptim.optim.cautious`).
    cautious_scale : {'plus_one', 'floored_mean'}, default: 'plus_one'
        The scale of the kept signs: n/(k + 1) (the paper, pytorch_optimizer, C-Optim) or
        1/max(k/n, 1e-3) (timm); read only when ``cautious``.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"
    step_in_state_dict = None
    #: The switches at the value of the forms without caution (left out of state dicts and
    #: golden hyperparameters there); the scale matters only when cautious.
    torch_conventions = dict(NOT_CAUTIOUS)
    conventions_apply = {"cautious_scale": "cautious"}

    @flavored
    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0, *,
                 variant="paper", weight_decay_form=VARIANT_DEFAULT, maximize=False,
                 cautious=False, cautious_scale="plus_one"):
        self.variant, switches = resolve_variant(VARIANTS, ALIASES, variant,
                                                 dict(weight_decay_form=weight_decay_form))
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay,
                                      maximize=maximize, cautious=cautious,
                                      cautious_scale=cautious_scale, **switches))

    def _check_group(self, group):
        check_no_variant(group)
        check_nonnegative(group, "lr", "weight_decay")
        check_betas(group["betas"])
        check_flag(group, "maximize")
        check_choice(group, "weight_decay_form", _WEIGHT_DECAY_FORMS)
        check_cautious(group)

    def _state_names(self, group):
        return ("exp_avg",)

    def _update(self, param, grad, state, group, index, shape):
        lr, wd = group["lr"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        decoupled = group["weight_decay_form"] == "decoupled"
        fields = dict(maximize=bool(group["maximize"]), beta1=beta1, one_minus_beta1=1 - beta1,
                      beta2=beta2, one_minus_beta2=1 - beta2,
                      update_decay=0.0 if decoupled else wd,
                      decay_factor=1 - lr * wd if decoupled else 1.0, neg_lr=-lr)
        states = self._flat_states(state, group)
        scale = caution_scale(group, param, lambda: _lion_agreeing(
            param, grad, states, typed_record(LionHyper, param, **fields, caution_scale=0)))
        _lion_dense(param, grad, states, typed_record(LionHyper, param, **fields,
                                                      caution_scale=scale))
