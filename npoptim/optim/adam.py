r"""Adam and AdamW (Kingma & Ba, 2015; Loshchilov & Hutter, 2019), as ``torch.optim`` 2.13.

For each element, with gradient :math:`g_t` (negated when ``maximize``), step count :math:`t`
(per parameter), :math:`b_1 = 1-\beta_1^t`, :math:`b_2 = 1-\beta_2^t`:

.. math::

    \theta &\leftarrow \theta\,(1 - \gamma\lambda)            &&\text{AdamW (decoupled decay)}\\
    g &\leftarrow g + \lambda\theta                           &&\text{Adam (L2 decay)}\\
    m &\leftarrow m + (1-\beta_1)(g - m)\\
    v &\leftarrow \beta_2 v + (1-\beta_2)\,g^2\\
    \hat v &\leftarrow \max(\hat v, v)                        &&\text{amsgrad; else } \hat v = v\\
    \theta &\leftarrow \theta - \frac{\gamma}{b_1}\cdot
        \frac{m}{\sqrt{\hat v}/\sqrt{b_2} + \epsilon}

Rounding follows torch's CPU kernels (see :mod:`npoptim.kernels.scalar`): the moment updates
are fused multiply-adds, and the last line is ``p + (-step_size * m) / denom``.

Note where :math:`\epsilon` sits: added to :math:`\sqrt{\hat v / b_2}` (Kingma's Algorithm 1),
not to :math:`\sqrt{v}` as SparseAdam does. Dense gradients only: torch's Adam refuses sparse
ones too.

Convention switches (other frameworks; see :mod:`npoptim.flavors`), each a change of the
hyperparameters the one rule reads, not of the rule:

* ``eps_mode`` says where :math:`\epsilon` goes, in the words every optimizer with the switch
  uses (RAdam, GaLore): ``"bias_corrected"`` (torch's, the default) adds it to the
  bias-corrected :math:`\sqrt{v/b_2}`, as above; ``"eps_hat"`` to :math:`\sqrt{v}` before the
  bias correction; ``"in_sqrt"`` inside the root. ``"torch"``, this switch's word for
  ``"bias_corrected"`` before 2026-12 (in RAdam it named ``"eps_hat"``), is read as an alias,
  so older checkpoints and scripts keep working.
* ``eps_mode="eps_hat"`` (Keras, TF ``ApplyAdam``, ONNX): :math:`\epsilon` is added to
  :math:`\sqrt{\hat v}` and the bias correction moves into the step size,
  :math:`\theta \leftarrow \theta - \gamma\frac{\sqrt{b_2}}{b_1}\cdot\frac{m}{\sqrt{\hat v}
  + \epsilon}` (the rule runs with ``bias_correction2_sqrt = 1``).
* ``eps_mode="in_sqrt"``: :math:`\epsilon` inside the square root,
  :math:`\theta \leftarrow \theta - \frac{\gamma}{b_1}\cdot\frac{m}{\sqrt{\hat v/b_2 +
  \epsilon}}` (optax ``adam(eps=0, eps_root=ε)``; a common hand-written form). The rule runs
  with ``eps = 0`` and ``eps_root = ε·b_2``, as
  :math:`\sqrt{\hat v + \epsilon b_2}/\sqrt{b_2} = \sqrt{\hat v/b_2 + \epsilon}` (with
  ``amsgrad_max="bias_corrected"``, whose :math:`\hat v` is already divided by :math:`b_2`,
  ``eps_root = ε``). In the torch form ``eps_root = 0`` and ``sqrt(v + 0)`` is
  ``sqrt(v)`` to the bit.
* ``amsgrad_max="bias_corrected"`` (optax ``amsgrad``): the running max is taken of
  :math:`v/b_2` (and ``max_exp_avg_sq`` holds it), :math:`\hat v \leftarrow \max(\hat v,
  v/b_2)`, denominator :math:`\sqrt{\hat v} + \epsilon` (the rule runs with
  ``v_divisor = b_2`` and ``bias_correction2_sqrt = 1``). torch and Keras take the max of
  the raw :math:`v`.
* ``post_weight_decay=c`` (ONNX ``Adam``'s ``norm_coefficient_post``; torch: 0): after the
  update, :math:`\theta \leftarrow (1 - c)\,\theta` (not scaled by the learning rate).
* ``decay_after_update=True`` (onnxruntime-training's ``AdamWOptimizer`` with ``adam_mode=1``,
  the "Hugging Face" form its ``generate_artifacts`` builds; Hugging Face transformers' old
  ``AdamW``; torch: False): the decoupled decay :math:`\theta \leftarrow \theta\,(1 -
  \gamma\lambda)` is applied to the *updated* parameter, after the last line, instead of
  before the moments. Decoupled decay only (AdamW).
* ``bias_correction=False`` (onnxruntime-training's ``correct_bias=0``, ``onnxblock``
  ``AdamW(bias_correction=False)``, Hugging Face's ``correct_bias=False``; torch: True):
  :math:`b_1 = b_2 = 1` at every step (then both ``eps_mode`` give the same step).

``cautious=True`` (not a torch option): C-AdamW, the cautious mask of
:mod:`npoptim.optim.cautious` on the last line's update :math:`\frac{\gamma}{b_1}\cdot
\frac{m}{\sqrt{\hat v}/\sqrt{b_2}+\epsilon}`, whose sign is that of :math:`m` (the mask
tests :math:`m g > 0`, :math:`g` after ``maximize`` and the L2 decay); the decoupled decay
and ``post_weight_decay`` stay outside the mask. ``cautious_scale`` says how the kept
elements are scaled up: ``"plus_one"`` (the paper, pytorch_optimizer's ``apply_cautious``)
or ``"floored_mean"`` (C-Optim's ``c_adamw.py``, timm's ``AdamWLegacy(caution=True)``). With
the other switches it gives each published C-AdamW: C-Optim's (``foreach=False``) is
``AdamW(eps=1e-6, eps_mode="eps_hat", cautious=True, cautious_scale="floored_mean")`` (its decay
:math:`\theta - \gamma\lambda\theta` rounds differently from :math:`\theta(1-\gamma\lambda)`),
timm's ``AdamW(cautious=True, cautious_scale="floored_mean")``. A cautious step makes two
passes over each parameter (the first counts the agreeing elements: :func:`adam_agreement`).
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.reduction import sum_pair
from npoptim.kernels.scalar import constant, fma, lerp, maximum
from npoptim.optim.cautious import NOT_CAUTIOUS, agrees, caution_scale, check_cautious, masked
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import (check_betas, check_choice, check_flag, check_nonnegative,
                                   flavored)


class AdamHyper(NamedTuple):
    """One step's hyperparameters of Adam's rules (built by ``Adam._update``).

    The first seven are the fields :func:`adam_moments` reads; RAdam's and NAdam's records
    have them too, under the same names.
    """

    decay_factor: float           # 1 - lr * weight_decay for decoupled decay (AdamW), else 1
    l2: float                     # weight_decay for L2 decay (Adam), else 0
    l2_decays: float              # 1 when l2 != 0, else 0
    one_minus_beta1: float
    beta2: float
    one_minus_beta2: float
    maximize: float               # 1 or 0
    bias_correction2_sqrt: float  # sqrt(b2)
    eps: float
    neg_step_size: float          # -lr / b1 (eps_mode="eps_hat": -lr * sqrt(b2) / b1)
    v_divisor: float              # amsgrad_max="bias_corrected": b2, else 1
    eps_in_sqrt: float            # 1 when eps_mode="in_sqrt", else 0
    eps_root: float               # eps_mode="in_sqrt": eps * b2 (see above), else 0
    cautious: float               # 1 or 0
    caution_scale: float          # cautious: the scale s of the kept elements, else 0


def moment_hyper(group):
    """The fields :func:`adam_moments` reads, as keywords of a record: computed in double as
    torch does (``decay_factor = 1 - lr * weight_decay`` for decoupled decay, else 1)."""
    lr, wd = group["lr"], group["weight_decay"]
    beta1, beta2 = group["betas"]
    decoupled = group["decoupled_weight_decay"]
    return dict(decay_factor=1 - lr * wd if decoupled and wd != 0 else 1.0,
                l2=0.0 if decoupled else wd, l2_decays=not decoupled and wd != 0,
                one_minus_beta1=1 - beta1, beta2=beta2, one_minus_beta2=1 - beta2,
                maximize=bool(group["maximize"]))


@kernel
def adam_moments(p, g, m, v, h):
    """Weight decay and the two moment updates, shared by Adam, AdamW, RAdam and NAdam.

    Returns the decayed parameter, the gradient after ``maximize`` and L2 decay, ``m`` and ``v``.
    ``h`` is any record with the fields of :func:`moment_hyper`.
    """
    if h.maximize != 0:
        g = -g
    p = p * h.decay_factor
    if h.l2_decays != 0:
        g = fma(h.l2, p, g)
    m = lerp(m, g, h.one_minus_beta1)
    v = fma(h.one_minus_beta2 * g, g, v * h.beta2)
    return p, g, m, v


@kernel
def _adam_param(p, g, m, v_hat, h):
    """The last line of the math: ``p - step_size * m / denom`` (masked where cautious)."""
    if h.eps_in_sqrt != 0:
        v_hat = v_hat + h.eps_root
    denom = np.sqrt(v_hat) / h.bias_correction2_sqrt + h.eps
    update = h.neg_step_size * m / denom
    if h.cautious != 0:
        update = masked(update, m, g, h.caution_scale)
    return p + update


@kernel
def adam_rule(p, g, s, h):
    """One element of Adam/AdamW; ``s = (exp_avg, exp_avg_sq)``."""
    exp_avg, exp_avg_sq = s
    p, g, m, v = adam_moments(p, g, exp_avg, exp_avg_sq, h)
    return _adam_param(p, g, m, v, h), (m, v)


@kernel
def amsgrad_rule(p, g, s, h):
    """Adam/AdamW with amsgrad; ``s = (exp_avg, exp_avg_sq, max_exp_avg_sq)``."""
    exp_avg, exp_avg_sq, max_exp_avg_sq = s
    p, g, m, v = adam_moments(p, g, exp_avg, exp_avg_sq, h)
    v_hat = maximum(max_exp_avg_sq, v / h.v_divisor)
    return _adam_param(p, g, m, v_hat, h), (m, v, v_hat)


@kernel
def adam_agreement(p, g, s, h):
    """The cautious first pass: whether this element's update agrees with its gradient
    (:func:`npoptim.optim.cautious.agrees` of the new ``m``, the update's sign), as the
    value to sum; ``s = (exp_avg,)`` is only read (written back unchanged)."""
    (exp_avg,) = s
    p, g, m, v = adam_moments(p, g, exp_avg, constant(0.0, exp_avg), h)
    return (exp_avg,), agrees(m, g), constant(0.0, g)


@kernel
def _adam_dense(param, grad, states, hyper):
    apply_dense(adam_rule, param, grad, states, AdamHyper(*hyper))


@kernel
def _amsgrad_dense(param, grad, states, hyper):
    apply_dense(amsgrad_rule, param, grad, states, AdamHyper(*hyper))


@kernel
def _adam_agreeing(param, grad, states, hyper):
    return sum_pair(adam_agreement, param, grad, states, AdamHyper(*hyper))[0]


#: Words this switch had before 2026-12, read as today's (old checkpoints, old scripts).
EPS_MODE_ALIASES = {"torch": "bias_corrected"}


class Adam(Optimizer):
    """Adam, matching ``torch.optim.Adam`` option for option (see the module docstring);
    ``decoupled_weight_decay=True`` is AdamW.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.999)
        Decay rates (β1, β2) of the first and second moments.
    eps : float, default: 1e-08
        Term ε added to the denominator for numerical stability.
    weight_decay : float, default: 0
        Weight decay λ: L2 (λθ added to the gradient), or decoupled with
        ``decoupled_weight_decay``.
    amsgrad : bool, default: False
        Divide by the running maximum of the second moment (AMSGrad).
    foreach, capturable, differentiable, fused : ignored
        Accepted for compatibility with torch only: they choose torch's implementations and change
        nothing here (``differentiable=True`` is refused: npoptim has no autograd).
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    decoupled_weight_decay : bool, default: False
        Decoupled decay θ(1 - γλ) before the moments: AdamW.
    eps_mode : str, default: 'bias_corrected'
        Where ε goes: ``"bias_corrected"`` (added to sqrt(v/b2), torch), ``"eps_hat"`` (added to
        sqrt(v) before the bias correction: Keras, TF, ONNX) or ``"in_sqrt"`` (inside the root,
        optax ``eps_root``).
    amsgrad_max : str, default: 'raw'
        Of what AMSGrad takes the running maximum: ``"raw"`` v (torch, Keras) or
        ``"bias_corrected"`` v/b2 (optax).
    post_weight_decay : float, default: 0.0
        After the update, θ ← (1 - c)θ, not scaled by the lr (ONNX's ``norm_coefficient_post``;
        torch: 0).
    decay_after_update : bool, default: False
        Apply the decoupled decay to the updated parameter, after the step (onnxruntime-training,
        Hugging Face's old AdamW); decoupled decay only.
    bias_correction : bool, default: True
        Bias-correct the moments; False: b1 = b2 = 1 at every step.
    cautious : bool, default: False
        C-AdamW: keep only the elements whose update agrees in sign with the gradient, scaled
        up as ``cautious_scale`` says (see :mod:`npoptim.optim.cautious`).
    cautious_scale : {'plus_one', 'floored_mean'}, default: 'plus_one'
        The scale of the kept elements: n/(k + 1) (the paper, pytorch_optimizer) or
        1/max(k/n, 1e-3) (C-Optim's C-AdamW, timm); read only when ``cautious``.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"
    #: The convention switches and their torch values (see :mod:`npoptim.flavors`).
    torch_conventions = {"eps_mode": "bias_corrected", "amsgrad_max": "raw", "post_weight_decay": 0.0,
                         "decay_after_update": False, "bias_correction": True, **NOT_CAUTIOUS}
    #: A switch that matters only when this option is on (else it is left out of golden
    #: hyperparameters, so that e.g. optax's Adam without amsgrad reads as torch's).
    conventions_apply = {"amsgrad_max": "amsgrad", "decay_after_update": "weight_decay",
                         "cautious_scale": "cautious"}

    @flavored
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False,
                 eps_mode="bias_corrected", amsgrad_max="raw", post_weight_decay=0.0,
                 decay_after_update=False, bias_correction=True, cautious=False,
                 cautious_scale="plus_one"):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay, eps_mode=eps_mode,
                        amsgrad_max=amsgrad_max, post_weight_decay=post_weight_decay,
                        decay_after_update=decay_after_update, bias_correction=bias_correction,
                        cautious=cautious, cautious_scale=cautious_scale)
        super().__init__(params, defaults)

    def _check_group(self, group):
        check_nonnegative(group, "lr", "eps", "weight_decay")
        check_nonnegative(group, "post_weight_decay", label="post_weight_decay value")
        check_betas(group["betas"])
        check_choice(group, "eps_mode", ("bias_corrected", "eps_hat", "in_sqrt"), EPS_MODE_ALIASES)
        check_choice(group, "amsgrad_max", ("raw", "bias_corrected"))
        if group["eps_mode"] == "eps_hat" and group["amsgrad_max"] == "bias_corrected":
            raise ValueError("eps_mode='eps_hat' moves the bias correction into the step size; "
                             "amsgrad_max='bias_corrected' needs it in the denominator (no "
                             "framework combines them)")
        check_flag(group, "decay_after_update", "bias_correction")
        check_cautious(group)
        if group["decay_after_update"] and not group["decoupled_weight_decay"]:
            raise ValueError("decay_after_update=True moves the decoupled weight decay after the "
                             "update: it needs decoupled_weight_decay=True (AdamW); L2 decay "
                             "is added to the gradient")

    def _state_names(self, group):
        names = ("exp_avg", "exp_avg_sq")
        return names + ("max_exp_avg_sq",) if group["amsgrad"] else names

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        step = state["step"]
        beta1, beta2 = group["betas"]
        bias_correction1, bias_correction2 = 1 - beta1 ** step, 1 - beta2 ** step
        if not group["bias_correction"]:  # onnxruntime's correct_bias=0
            bias_correction1 = bias_correction2 = 1.0
        step_size = group["lr"] / bias_correction1
        bias_correction2_sqrt, v_divisor = bias_correction2 ** 0.5, 1.0
        max_of_v_hat = group["amsgrad"] and group["amsgrad_max"] == "bias_corrected"
        if max_of_v_hat:
            bias_correction2_sqrt, v_divisor = 1.0, bias_correction2
        elif group["eps_mode"] == "eps_hat":  # Keras: lr * sqrt(b2) / b1, as the framework
            step_size = group["lr"] * bias_correction2 ** 0.5 / bias_correction1
            bias_correction2_sqrt = 1.0
        eps, eps_root = group["eps"], 0.0
        if group["eps_mode"] == "in_sqrt":  # sqrt(v_hat + eps b2) / sqrt(b2)
            eps, eps_root = 0.0, group["eps"] * (1.0 if max_of_v_hat else bias_correction2)
        moments = moment_hyper(group)
        decay_after = moments["decay_factor"] if group["decay_after_update"] else 1.0
        if group["decay_after_update"]:  # the rule runs undecayed; the decay follows it
            moments["decay_factor"] = 1.0
        fields = dict(moments, bias_correction2_sqrt=bias_correction2_sqrt, eps=eps,
                      neg_step_size=-step_size, v_divisor=v_divisor,
                      eps_in_sqrt=group["eps_mode"] == "in_sqrt", eps_root=eps_root,
                      cautious=bool(group["cautious"]))
        states = self._flat_states(state, group)
        scale = caution_scale(group, param, lambda: _adam_agreeing(
            param, grad, states[:1], typed_record(AdamHyper, param, **fields, caution_scale=0)))
        hyper = typed_record(AdamHyper, param, **fields, caution_scale=scale)
        kernel_ = _amsgrad_dense if group["amsgrad"] else _adam_dense
        kernel_(param, grad, states, hyper)
        if decay_after != 1.0:  # onnxruntime adam_mode=1: x <- x - lr * wd * x, after the update
            np.multiply(param, param.dtype.type(decay_after), out=param)
        if group["post_weight_decay"] != 0:  # ONNX: X_final = (1 - norm_coefficient_post) X_new
            np.multiply(param, param.dtype.type(1 - group["post_weight_decay"]), out=param)


class AdamW(Adam):
    """AdamW: Adam with decoupled weight decay, ``torch.optim.AdamW`` (weight_decay=1e-2).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.999)
        Decay rates (β1, β2) of the first and second moments.
    eps : float, default: 1e-08
        Term ε added to the denominator for numerical stability.
    weight_decay : float, default: 0.01
        Decoupled weight decay λ: θ(1 - γλ) before the moments.
    amsgrad : bool, default: False
        Divide by the running maximum of the second moment (AMSGrad).
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    foreach, capturable, differentiable, fused : ignored
        Accepted for compatibility with torch only: they choose torch's implementations and change
        nothing here (``differentiable=True`` is refused: npoptim has no autograd).
    eps_mode : str, default: 'bias_corrected'
        Where ε goes: ``"bias_corrected"`` (added to sqrt(v/b2), torch), ``"eps_hat"`` (added to
        sqrt(v) before the bias correction: Keras, TF, ONNX) or ``"in_sqrt"`` (inside the root,
        optax ``eps_root``).
    amsgrad_max : str, default: 'raw'
        Of what AMSGrad takes the running maximum: ``"raw"`` v (torch, Keras) or
        ``"bias_corrected"`` v/b2 (optax).
    decay_after_update : bool, default: False
        Apply the decoupled decay to the updated parameter, after the step (onnxruntime-training,
        Hugging Face's old AdamW); decoupled decay only.
    bias_correction : bool, default: True
        Bias-correct the moments; False: b1 = b2 = 1 at every step.
    cautious : bool, default: False
        C-AdamW: keep only the elements whose update agrees in sign with the gradient, scaled
        up as ``cautious_scale`` says (see :mod:`npoptim.optim.cautious`).
    cautious_scale : {'plus_one', 'floored_mean'}, default: 'plus_one'
        The scale of the kept elements: n/(k + 1) (the paper, pytorch_optimizer) or
        1/max(k/n, 1e-3) (C-Optim's C-AdamW, timm); read only when ``cautious``.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    @flavored
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None, eps_mode="bias_corrected", amsgrad_max="raw",
                 decay_after_update=False, bias_correction=True, cautious=False,
                 cautious_scale="plus_one"):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True, eps_mode=eps_mode,
                         amsgrad_max=amsgrad_max, decay_after_update=decay_after_update,
                         bias_correction=bias_correction, cautious=cautious,
                         cautious_scale=cautious_scale)

    def load_state_dict(self, state_dict):
        """As :meth:`Adam.load_state_dict`; like torch's AdamW, every group stays decoupled."""
        super().load_state_dict(state_dict)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
