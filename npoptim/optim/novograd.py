r"""NovoGrad (Ginsburg et al., "Stochastic Gradient Methods with Layer-wise Adaptive Moments for
Training of Deep Networks", arXiv 1905.11286, Algorithm 1), as ``optax.novograd`` 0.2.8.

Adam's second moment per layer (one scalar per parameter tensor, of the squared norm of its
gradient), the normalized gradient and the weight decay inside the momentum. For each
parameter tensor :math:`w` with gradient :math:`g` (negated when ``maximize``) and step count
:math:`t` (per parameter):

.. math::

    v &\leftarrow \|g\|^2 \text{ if } t = 1, \text{ else } \beta_2 v + (1-\beta_2)\|g\|^2\\
    u &= \frac{g}{\sqrt{v + \bar\epsilon} + \epsilon} + \lambda w\\
    m &\leftarrow u \text{ if } t = 1, \text{ else } \beta_1 m + u\\
    w &\leftarrow w - \gamma\, m

(:math:`v` is a scalar, the state ``exp_avg_sq``.)

:math:`\|g\|^2` is the sum of squares of the whole tensor in the parameter's dtype, in an order
fixed by its size (see :func:`~npoptim.kernels.reduction.grad_sumsq`); :math:`\bar\epsilon` is
``eps_root`` (0).

Source: google-deepmind/optax ``optax/_src/transform.py`` ``scale_by_novograd``
(``optax/_src/alias.py`` ``novograd``; defaults ``b1=0.9, b2=0.25, eps=1e-6``), which follows the
paper's Algorithm 1 (the paper has no :math:`\bar\epsilon`); optax's learning rate has no
default (npoptim: 1e-3). The state is kept under the names of NVIDIA NeMo's PyTorch
``Novograd`` (``exp_avg``, and the scalar ``exp_avg_sq``); NeMo's and apex's ``grad_averaging``
(a factor :math:`1-\beta_1` on :math:`u`) and ``amsgrad`` are not implemented.

Dense gradients only: the layer norm needs the whole gradient.
"""
import math
from typing import NamedTuple

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.reduction import grad_sumsq
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import check_betas, check_flag, check_nonnegative, flavored


class NovoGradHyper(NamedTuple):
    """One step's hyperparameters of :func:`novograd_rule` (built by ``NovoGrad._update``)."""

    sign: float           # -1 with maximize, else 1
    beta1: float          # 0 in the first step (m = u)
    denom: float          # sqrt(v + eps_root) + eps
    weight_decay: float
    neg_lr: float         # -γ


@kernel
def novograd_rule(p, g, s, h):
    """One element of NovoGrad; ``s = (exp_avg,)``."""
    (exp_avg,) = s
    u = h.sign * g / h.denom + h.weight_decay * p
    m = h.beta1 * exp_avg + u
    return p + h.neg_lr * m, (m,)


@kernel
def _novograd_dense(param, grad, states, hyper):
    apply_dense(novograd_rule, param, grad, states, NovoGradHyper(*hyper))


class NovoGrad(Optimizer):
    """NovoGrad (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.25)
        (β1, β2): the momentum and the layer's second moment decays.
    eps : float, default: 1e-06
        Term ε added to the denominator.
    weight_decay : float, default: 0.0
        Weight decay λ, added to the normalized gradient inside the momentum.
    eps_root : float, default: 0.0
        Term added inside the square root.
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"

    @flavored
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.25), eps=1e-6, weight_decay=0.0, *,
                 eps_root=0.0, maximize=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, eps_root=eps_root,
                                      weight_decay=weight_decay, maximize=maximize))

    def _check_group(self, group):
        check_nonnegative(group, "lr", "eps", "weight_decay")
        check_nonnegative(group, "eps_root", label="eps_root value")
        check_betas(group["betas"])
        check_flag(group, "maximize")

    def _state_names(self, group):
        return ("exp_avg",)

    def _state_shapes(self, param, group):
        return {"exp_avg": param.shape, "exp_avg_sq": ()}

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        first = state["step"] == 1
        beta1, beta2 = group["betas"]
        norm_sq = float(grad_sumsq(grad))
        v = norm_sq if first else beta2 * float(state["exp_avg_sq"]) + (1 - beta2) * norm_sq
        state["exp_avg_sq"][...] = v
        hyper = typed_record(NovoGradHyper, param, sign=-1.0 if group["maximize"] else 1.0,
                             beta1=0.0 if first else beta1,
                             denom=math.sqrt(v + group["eps_root"]) + group["eps"],
                             weight_decay=group["weight_decay"], neg_lr=-group["lr"])
        _novograd_dense(param, grad, self._flat_states(state, group), hyper)
