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

Dense gradients only: a zero gradient still moves :math:`\theta` and :math:`m`, so a CSR
update of the stored entries alone would differ from the dense one.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
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


@kernel
def lion_rule(p, g, s, h):
    """One element of Lion; ``s = (exp_avg,)``."""
    (exp_avg,) = s
    if h.maximize != 0:
        g = -g
    c = h.one_minus_beta1 * g + h.beta1 * exp_avg
    u = np.sign(c)
    if h.update_decay != 0:
        u = u + h.update_decay * p
    p = p * h.decay_factor
    m = h.one_minus_beta2 * g + h.beta2 * exp_avg
    return p + h.neg_lr * u, (m,)


@kernel
def _lion_dense(param, grad, states, hyper):
    apply_dense(lion_rule, param, grad, states, LionHyper(*hyper))


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
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"
    step_in_state_dict = None

    @flavored
    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0, *,
                 variant="paper", weight_decay_form=VARIANT_DEFAULT, maximize=False):
        self.variant, switches = resolve_variant(VARIANTS, ALIASES, variant,
                                                 dict(weight_decay_form=weight_decay_form))
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay,
                                      maximize=maximize, **switches))

    def _check_group(self, group):
        check_no_variant(group)
        check_nonnegative(group, "lr", "weight_decay")
        check_betas(group["betas"])
        check_flag(group, "maximize")
        check_choice(group, "weight_decay_form", _WEIGHT_DECAY_FORMS)

    def _state_names(self, group):
        return ("exp_avg",)

    def _update(self, param, grad, state, group, index, shape):
        lr, wd = group["lr"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        decoupled = group["weight_decay_form"] == "decoupled"
        hyper = typed_record(LionHyper, param, maximize=bool(group["maximize"]), beta1=beta1,
                             one_minus_beta1=1 - beta1, beta2=beta2, one_minus_beta2=1 - beta2,
                             update_decay=0.0 if decoupled else wd,
                             decay_factor=1 - lr * wd if decoupled else 1.0, neg_lr=-lr)
        _lion_dense(param, grad, self._flat_states(state, group), hyper)
