r"""Fromage, "Frobenius matched gradient descent" (Bernstein et al., "On the distance between two
neural networks and the stability of learning", NeurIPS 2020, arXiv 2002.03432, Algorithm 1),
as the authors' code computes it, with ``optax.fromage`` 0.2.8 as ``variant="optax"``.

For each parameter tensor :math:`w` with gradient :math:`g` (negated when ``maximize``):

.. math::

    \rho &= \frac{\max(\|w\|, \nu)}{\max(\|g\|, \nu)}, \quad \rho = 1 \text{ if } \|w\| = 0
            \text{ or } \|g\| = 0 \;(\nu = 0)\\
    w &\leftarrow \frac{w - \gamma\,\rho\, g}{\sqrt{1 + \gamma^2}}

:math:`\nu` is ``min_norm``: 0 in the paper and the authors' code (jxbz/fromage
``fromage.py``: ratio :math:`\|w\|/\|g\|`, or 1 when either is 0), 1e-6 in optax
(google-deepmind/optax ``optax/_src/alias.py`` ``fromage``: ``scale_by_trust_ratio(min_norm)``,
then the learning rate times :math:`1/\sqrt{1+\gamma^2}`, then ``add_decayed_weights`` of
:math:`1/\sqrt{1+\gamma^2} - 1`; the same map, rounded differently). ``variant="optax"`` sets
``min_norm=1e-6``. The authors' optional ``p_bound`` (a bound on :math:`\|w\|`) is not
implemented. Norms are Frobenius norms of the whole tensor, summed in an order fixed by its size
(see :func:`~npoptim.kernels.reduction.sumsq_pair`). There is no state.

Dense gradients only: the norms need the whole tensor.
"""
import math
from typing import NamedTuple

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.reduction import sumsq_pair
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import (VARIANT_DEFAULT, check_flag, check_no_variant,
                                   check_nonnegative, flavored, resolve_variant)


class FromageHyper(NamedTuple):
    """One step's hyperparameters of :func:`fromage_rule` (built by ``Fromage._update``)."""

    neg_step: float    # -γρ (-γρ with maximize: +γρ)
    shrink: float      # 1 / sqrt(1 + γ²)


@kernel
def fromage_rule(p, g, s, h):
    """One element of Fromage (no state)."""
    return (p + h.neg_step * g) * h.shrink, s


@kernel
def weight_and_grad(p, g, s, h):
    """The parameter and the gradient: :func:`sumsq_pair` of it is ``(‖w‖², ‖g‖²)``."""
    return s, p, g


@kernel
def _fromage_norms(param, grad):
    return sumsq_pair(weight_and_grad, param, grad, (), ())


@kernel
def _fromage_dense(param, grad, states, hyper):
    apply_dense(fromage_rule, param, grad, states, FromageHyper(*hyper))


VARIANTS = {"paper": dict(min_norm=0.0), "optax": dict(min_norm=1e-6)}
ALIASES = {"authors": "paper"}


class Fromage(Optimizer):
    """Fromage (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.01
        Learning rate γ.
    variant : str, default: 'paper'
        The published form to reproduce (a name of ``VARIANTS`` or ``ALIASES``, see the module
        docstring); it sets every switch whose default is "the variant's", and a switch given
        explicitly overrides it.
    min_norm : float, default: the variant's
        Floor ν of both norms of the ratio (0: the paper; 1e-6: optax).
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"
    step_in_state_dict = None

    @flavored
    def __init__(self, params, lr=1e-2, *, variant="paper", min_norm=VARIANT_DEFAULT,
                 maximize=False):
        self.variant, switches = resolve_variant(VARIANTS, ALIASES, variant,
                                                 dict(min_norm=min_norm))
        super().__init__(params, dict(lr=lr, maximize=maximize, **switches))

    def _check_group(self, group):
        check_no_variant(group)
        check_nonnegative(group, "lr")
        check_nonnegative(group, "min_norm", label="min_norm value")
        check_flag(group, "maximize")

    def _update(self, param, grad, state, group, index, shape):
        lr, floor = group["lr"], group["min_norm"]
        w_sq, g_sq = _fromage_norms(param, grad)
        w_norm = max(math.sqrt(float(w_sq)), floor)
        g_norm = max(math.sqrt(float(g_sq)), floor)
        ratio = w_norm / g_norm if w_norm > 0 and g_norm > 0 else 1.0
        sign = 1.0 if group["maximize"] else -1.0
        hyper = typed_record(FromageHyper, param, neg_step=sign * lr * ratio,
                             shrink=1 / math.sqrt(1 + lr * lr))
        _fromage_dense(param, grad, (), hyper)
