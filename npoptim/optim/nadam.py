r"""NAdam: Adam with Nesterov momentum (Dozat, 2016), as ``torch.optim.NAdam`` 2.13.

With step count :math:`t` (per parameter), momentum decay :math:`\psi`, the momentum schedule

.. math::

    \mu_t = \beta_1\bigl(1 - \tfrac12\, 0.96^{t\psi}\bigr), \qquad
    \Pi_t = \prod_{i \le t} \mu_i,

and for each element (:math:`\Pi_t` is the state ``mu_product``), with gradient :math:`g`
(negated when ``maximize``):

.. math::

    \theta &\leftarrow \theta\,(1 - \gamma\lambda)     &&\quad\text{decoupled decay}\\
    g &\leftarrow g + \lambda\theta                    &&\quad\text{else L2 decay}\\
    m &\leftarrow m + (1-\beta_1)(g - m)\\
    v &\leftarrow \beta_2 v + (1-\beta_2)\,g^2\\
    d &\leftarrow \sqrt{v / (1-\beta_2^t)} + \epsilon\\
    \theta &\leftarrow \theta - \gamma\frac{1-\mu_t}{1-\Pi_t}\cdot\frac{g}{d}
                              - \gamma\frac{\mu_{t+1}}{1-\Pi_t\,\mu_{t+1}}\cdot\frac{m}{d}

(the two terms applied one after the other, as torch does).

``mu_product`` is kept as torch keeps it: a 0-d float32 array, multiplied in float32 by each
:math:`\mu_t` (convention switch ``state_dtype="float32"``); ``state_dtype="param"`` keeps it in
the parameter's dtype, as Keras keeps its ``u_product`` (the ``keras`` flavor, with
``momentum_decay=1``: Keras's schedule :math:`\beta_1(1 - \tfrac12 0.96^{t})` is torch's with
:math:`\psi = 1`). Under ``step_scope="global"`` a step without a gradient ages ``step`` and
multiplies ``mu_product`` by that step's :math:`\mu_t`, as Keras's one ``u_product`` does.

Convention switch ``momentum_schedule="none"`` (the ``optax`` flavor, with
``state_dtype="param"``): a constant :math:`\mu_t = \beta_1`, so :math:`\Pi_t = \beta_1^t` and
the step is optax's ``nadam`` (``scale_by_adam(nesterov=True)``, Dozat's form):
:math:`\hat m = \beta_1\, m / (1-\beta_1^{t+1}) + (1-\beta_1)\, g / (1-\beta_1^t)`,
:math:`\theta \leftarrow \theta - \gamma\, \hat m / (\sqrt{v / (1-\beta_2^t)} + \epsilon)`
(``momentum_decay`` is then unused); optax's ``nadamw`` adds the decoupled decay, which is
``decoupled_weight_decay=True`` (optax decays by :math:`\gamma\lambda\theta` of the
parameter before the update, as torch does).
Loading a state_dict casts it to the parameter's dtype, as torch's
``load_state_dict`` does with every floating-point state except ``step``; so for a float64
parameter a loaded optimizer continues (like torch) with a float64 ``mu_product`` and drifts
from an uninterrupted run in the last digits. Dense gradients only, as in torch.

Rounding follows torch's CPU kernels (see :mod:`npoptim.kernels.scalar`): L2 weight decay and
the :math:`v` update are fused multiply-adds, :math:`m` a ``lerp``, and each of the two last
terms torch's ``addcdiv``, ``p + (coefficient * g) / d``.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.optim.adam import adam_moments, moment_hyper
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import check_betas, check_choice, check_nonnegative, flavored


class NAdamHyper(NamedTuple):
    """One step's hyperparameters of the NAdam rule (built by ``NAdam._update``)."""

    # read by Adam's adam_moments (see npoptim.optim.adam.moment_hyper)
    decay_factor: float
    l2: float
    l2_decays: float
    one_minus_beta1: float
    beta2: float
    one_minus_beta2: float
    maximize: float
    # NAdam's own
    bias_correction2: float  # 1 - beta2^t
    eps: float
    grad_coef: float         # -lr (1 - mu_t) / (1 - Pi_t)
    avg_coef: float          # -lr mu_{t+1} / (1 - Pi_t mu_{t+1})


@kernel
def nadam_rule(p, g, s, h):
    """One element; ``s = (exp_avg, exp_avg_sq)``: Adam's moments, then the two terms."""
    exp_avg, exp_avg_sq = s
    p, g, m, v = adam_moments(p, g, exp_avg, exp_avg_sq, h)
    denom = np.sqrt(v / h.bias_correction2) + h.eps
    p = p + h.grad_coef * g / denom
    return p + h.avg_coef * m / denom, (m, v)


@kernel
def _nadam_dense(param, grad, states, hyper):
    apply_dense(nadam_rule, param, grad, states, NAdamHyper(*hyper))


#: the dtypes ``mu_product`` can be kept in (``state_dtype``)
STATE_DTYPES = ("float32", "param")
#: torch's (and Keras's) momentum schedule, or optax's constant mu_t = beta1
MOMENTUM_SCHEDULES = ("torch", "none")


class NAdam(Optimizer):
    """NAdam, matching ``torch.optim.NAdam`` option for option (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.002
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.999)
        Decay rates (β1, β2) of the first and second moments.
    eps : float, default: 1e-08
        Term ε added to the denominator for numerical stability.
    weight_decay : float, default: 0
        Weight decay λ: L2, or decoupled with ``decoupled_weight_decay``.
    momentum_decay : float, default: 0.004
        Momentum decay ψ of the schedule μ_t = β1(1 - 0.96^(tψ)/2).
    decoupled_weight_decay : bool, default: False
        Decoupled decay θ(1 - γλ) (NAdamW).
    foreach, capturable, differentiable : ignored
        Accepted for compatibility with torch only: they choose torch's implementations and change
        nothing here (``differentiable=True`` is refused: npoptim has no autograd).
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    state_dtype : str, default: 'float32'
        dtype of ``mu_product``: ``"float32"`` (torch) or ``"param"`` (the parameter's, Keras).
    momentum_schedule : str, default: 'torch'
        ``"torch"`` (Dozat's schedule μ_t) or ``"none"`` (constant μ_t = β1, optax's ``nadam``).
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    torch_conventions = {"state_dtype": "float32", "momentum_schedule": "torch"}

    @flavored
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False,
                 state_dtype="float32", momentum_schedule="torch"):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, foreach=foreach,
                                      capturable=capturable, differentiable=differentiable,
                                      state_dtype=state_dtype,
                                      momentum_schedule=momentum_schedule))

    def _check_group(self, group):
        if group.get("state_dtype", "float32") not in STATE_DTYPES:
            raise ValueError(f"state_dtype must be one of {', '.join(map(repr, STATE_DTYPES))}, "
                             f"got {group['state_dtype']!r}")
        check_choice(group, "momentum_schedule", MOMENTUM_SCHEDULES)
        check_nonnegative(group, "lr", "eps")
        check_betas(group["betas"])
        check_nonnegative(group, "weight_decay")
        check_nonnegative(group, "momentum_decay", label="momentum_decay value")

    def _state_names(self, group):
        return ("exp_avg", "exp_avg_sq")

    def _state_shapes(self, param, group):
        return {"mu_product": (), "exp_avg": param.shape, "exp_avg_sq": param.shape}

    def _init_state(self, param, group):
        dtype = np.float32 if group.get("state_dtype", "float32") == "float32" else param.dtype
        return {"step": 0, "mu_product": np.array(1.0, dtype),
                "exp_avg": np.zeros(param.shape, param.dtype),
                "exp_avg_sq": np.zeros(param.shape, param.dtype)}

    @staticmethod
    def _mu(group, step):
        """The momentum schedule's mu_t (the module docstring)."""
        if group.get("momentum_schedule", "torch") == "none":
            return group["betas"][0]
        return group["betas"][0] * (1.0 - 0.5 * (0.96 ** (step * group["momentum_decay"])))

    def _advance(self, state, group):
        """``step += 1`` and ``mu_product *= mu_t`` (torch: on a 0-d tensor, in that tensor's
        dtype); returns the new step."""
        state["step"] += 1
        mu_product = state["mu_product"]
        mu_product[...] = mu_product * mu_product.dtype.type(self._mu(group, state["step"]))
        return state["step"]

    _age = _advance  # step_scope="global": a step without a gradient ages both

    def _update(self, param, grad, state, group, index, shape):
        step = self._advance(state, group)
        lr = group["lr"]
        beta2 = group["betas"][1]
        mu, mu_next = self._mu(group, step), self._mu(group, step + 1)
        mu_product = float(state["mu_product"])
        mu_product_next = mu_product * mu_next
        hyper = typed_record(NAdamHyper, param, **moment_hyper(group),
                             bias_correction2=1 - beta2 ** step, eps=group["eps"],
                             grad_coef=-lr * (1.0 - mu) / (1.0 - mu_product),
                             avg_coef=(-lr * mu_next) / (1.0 - mu_product_next))
        _nadam_dense(param, grad, self._flat_states(state, group), hyper)
