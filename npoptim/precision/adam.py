r"""Adam and AdamW on bfloat16/float16 params, grads and state, rounded as torch 2.13's CPU code.

The math is :mod:`npoptim.optim.adam`'s; what changes is where results are rounded to the
16-bit format (:math:`R`). Every operation computes in float32 from float32 (or 16-bit) inputs;
scalars are float32, except an ``add``'s ``alpha`` and a scalar added to a tensor
(``denom.add_(eps)``), which torch rounds to the 16-bit format (per-op: :math:`\epsilon` is
:math:`R(\epsilon)`; it matters where eps dominates, measured with gradients of 1e-6).

``rounding="per-op"``: torch's single-tensor path (its CPU default), one rounding per tensor op
(torch's foreach path on CPU rounds differently and is not reproduced):

.. math::

    \theta &\leftarrow R(\theta\,(1-\gamma\lambda))                 &&\text{AdamW}\\
    g &\leftarrow R(\mathrm{fma}(R(\lambda), \theta, g))            &&\text{Adam (L2)}\\
    m &\leftarrow R(\mathrm{lerp}(m, g, 1-\beta_1))\\
    v &\leftarrow R(\mathrm{fma}((1-\beta_2)\,g,\; g,\; R(\beta_2 v)))\\
    \hat v &\leftarrow \max(\hat v, v)                              &&\text{amsgrad}\\
    d &\leftarrow R(R(R(\sqrt{\hat v}) / \sqrt{b_2}) + \epsilon)\\
    \theta &\leftarrow R(\theta + (-\tfrac{\gamma}{b_1} m) / d)

``rounding="fused"``: torch's ``fused=True`` CPU kernel (``_fused_adam(w)_``, compiled with
floating-point contraction, so its products-then-sums are fused multiply-adds): the step in
float32 from the stored values; ``m``, ``v`` (and ``max_exp_avg_sq``) and the parameter are
rounded once when stored, and the step uses the unrounded float32 ``m`` and ``v``. That is
:mod:`npoptim.optim.adam`'s float rule (``adam_rule``, ``amsgrad_rule``) run in float32, and
the fused path runs it:

.. math::

    g &\leftarrow \mathrm{fma}(\theta, \lambda, g) \quad\text{(Adam)};\qquad
        \theta \leftarrow \theta\,(1-\gamma\lambda) \quad\text{(AdamW)}\\
    m &\leftarrow \mathrm{lerp}(m, g, 1-\beta_1),\qquad
        v \leftarrow \mathrm{fma}((1-\beta_2) g,\; g,\; \beta_2 v)\\
    \theta &\leftarrow R\big(\theta + (-\tfrac{\gamma}{b_1} m) / (\sqrt{\hat v}/\sqrt{b_2}
        + \epsilon)\big),\qquad m, v, \hat v \text{ stored as } R(\cdot)

torch's CPU kernels run the last ``n % lanes`` elements of a tensor through scalar code
(``lanes`` = 32 16-bit lanes with AVX-512 and with AVX2, as measured; option
``torch_cpu_lanes``, default None: no such tail, as on a GPU). There the per-op ``add(.., alpha)`` rounds the product
first, :math:`R(g + R(\lambda\theta))`; every other operation, and the whole fused kernel,
rounds there as in the vector loop. Above 32768 elements torch splits each per-op operation
between its threads, each part with its own tail: npoptim matches it bit for bit with
``torch.set_num_threads(1)`` (or below that size).
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.jit import inlined, kernel
from npoptim.kernels.scalar import fma, lerp, maximum
from npoptim.kernels.switches import Switch
from npoptim.optim import adam
from npoptim.precision.drivers import apply_dense16, new_states
from npoptim.precision.formats import round_to, to_float32
from npoptim.precision.optimizer import LowPrecision, add_alpha, record16, rounded_scalar
from npoptim.precision.stochastic import random16, stochastic_round, stream_key


class Adam16Hyper(NamedTuple):
    """One step's hyperparameters of the 16-bit Adam rules (float32, and the format code)."""

    code: int                     # the 16-bit format (npoptim.precision.formats)
    tail_start: int               # first element of torch's scalar remainder loop
    key: int                      # stochastic rounding: the step's stream key (else 0)
    decay_factor: float           # 1 - lr * weight_decay (AdamW), else 1
    l2: float                     # weight_decay (Adam; per-op: rounded to the format), else 0
    l2_decays: Switch             # on for Adam with weight_decay != 0
    one_minus_beta1: float
    beta2: float
    one_minus_beta2: float
    maximize: Switch              # torch's maximize
    bias_correction2_sqrt: float
    eps: float
    neg_step_size: float          # -lr / b1
    # read by the float rules (fused, stochastic): torch's values of Adam's convention switches
    v_divisor: float              # 1 (amsgrad_max="raw")
    eps_in_sqrt: Switch           # off (eps_mode="bias_corrected")
    eps_root: float               # 0
    cautious: Switch              # off
    caution_scale: float          # 0


# ------------------------------------------------------------------------------- per-op
@inlined
def per_op_moments(p, g, m, v, h, tail):
    """Weight decay and the two moments, every op rounded (shared by NAdam and RAdam):
    the decayed parameter, the gradient after ``maximize`` and L2 decay, ``m`` and ``v``."""
    if h.maximize != 0:
        g = -g
    p = round_to(p * h.decay_factor, h.code)
    if h.l2_decays != 0:
        g = add_alpha(g, h.l2, p, h.code, tail)
    m = round_to(lerp(m, g, h.one_minus_beta1), h.code)
    v = round_to(v * h.beta2, h.code)
    v = round_to(fma(h.one_minus_beta2 * g, g, v), h.code)
    return p, g, m, v


def per_op_moment_hyper(group, code):
    """The fields :func:`per_op_moments` reads: :func:`npoptim.optim.adam.moment_hyper`'s, with
    the L2 ``alpha`` rounded to the format ``code`` (shared by NAdam and RAdam)."""
    moments = adam.moment_hyper(group)
    moments["l2"] = rounded_scalar(moments["l2"], code)
    return moments


@inlined
def _per_op_param(p, m, v_hat, h):
    denom = round_to(np.sqrt(v_hat), h.code)
    denom = round_to(denom / h.bias_correction2_sqrt, h.code)
    denom = round_to(denom + h.eps, h.code)
    return round_to(p + h.neg_step_size * m / denom, h.code)


@inlined
def adam_per_op_rule(p, g, s, h, i, tail):
    """One element of Adam/AdamW, every op rounded; ``s = (exp_avg, exp_avg_sq)``."""
    exp_avg, exp_avg_sq = s
    p, _, m, v = per_op_moments(p, g, exp_avg, exp_avg_sq, h, tail)
    return _per_op_param(p, m, v, h), new_states(m, v)


@inlined
def amsgrad_per_op_rule(p, g, s, h, i, tail):
    """As :func:`adam_per_op_rule` with ``max_exp_avg_sq`` (a maximum: no rounding)."""
    exp_avg, exp_avg_sq, max_exp_avg_sq = s
    p, _, m, v = per_op_moments(p, g, exp_avg, exp_avg_sq, h, tail)
    v_hat = maximum(max_exp_avg_sq, v)
    return _per_op_param(p, m, v_hat, h), new_states(m, v, v_hat)


# -------------------------------------------------------------------------------- fused
@inlined
def adam_fused_rule(p, g, s, h, i, tail):
    """One element of fused Adam/AdamW: the float rule in float32 (the driver rounds what it
    stores; the fused kernel has no different tail)."""
    return adam.adam_rule(p, g, s, h)


@inlined
def amsgrad_fused_rule(p, g, s, h, i, tail):
    """As :func:`adam_fused_rule`, with ``max_exp_avg_sq``."""
    return adam.amsgrad_rule(p, g, s, h)


# ---------------------------------------------------------------------------- stochastic
@inlined
def _stochastic(p, h, i):
    """The parameter rounded stochastically with draw ``i`` of the step's key."""
    return to_float32(stochastic_round(p, random16(h.key, i), h.code), h.code)


@inlined
def adam_stochastic_rule(p, g, s, h, i, tail):
    """Fused Adam/AdamW with the new parameter rounded stochastically (the moments to
    nearest, by the driver)."""
    p, (m, v) = adam_fused_rule(p, g, s, h, i, tail)
    return _stochastic(p, h, i), new_states(m, v)


@inlined
def amsgrad_stochastic_rule(p, g, s, h, i, tail):
    p, (m, v, v_hat) = amsgrad_fused_rule(p, g, s, h, i, tail)
    return _stochastic(p, h, i), new_states(m, v, v_hat)


@kernel
def _adam_stochastic_dense(param, grad, states, hyper):
    apply_dense16(adam_stochastic_rule, param, grad, states, hyper)


@kernel
def _amsgrad_stochastic_dense(param, grad, states, hyper):
    apply_dense16(amsgrad_stochastic_rule, param, grad, states, hyper)


@kernel
def _adam_per_op_dense(param, grad, states, hyper):
    apply_dense16(adam_per_op_rule, param, grad, states, hyper)


@kernel
def _amsgrad_per_op_dense(param, grad, states, hyper):
    apply_dense16(amsgrad_per_op_rule, param, grad, states, hyper)


@kernel
def _adam_fused_dense(param, grad, states, hyper):
    apply_dense16(adam_fused_rule, param, grad, states, hyper)


@kernel
def _amsgrad_fused_dense(param, grad, states, hyper):
    apply_dense16(amsgrad_fused_rule, param, grad, states, hyper)


KERNELS = {("per-op", False): _adam_per_op_dense, ("per-op", True): _amsgrad_per_op_dense,
           ("fused", False): _adam_fused_dense, ("fused", True): _amsgrad_fused_dense,
           ("stochastic", False): _adam_stochastic_dense,
           ("stochastic", True): _amsgrad_stochastic_dense}


class Adam(LowPrecision, adam.Adam):
    """``torch.optim.Adam`` on bfloat16/float16 arrays (see the module docstring), with
    ``rounding="per-op"`` (torch's default on CPU: ``fused=None``) or ``"fused"``
    (``fused=True``), or ``"stochastic"`` (the fused step with the new parameter
    rounded stochastically, draws from ``seed``, see :mod:`npoptim.precision.stochastic`; the
    moments are rounded to nearest). ``format`` names the format of raw ``uint16`` arrays.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The bfloat16, float16 or uint16 (raw bits) arrays to optimize (updated in place),
        or param groups (dicts with ``"params"``).
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
    rounding : {'per-op', 'fused', 'stochastic'}, default: 'per-op'
        Where results are rounded to the 16-bit format (see the module docstring):
        ``"per-op"``, ``"fused"``, ``"stochastic"``.
    format : {'bfloat16', 'float16'} or None, default: None
        ``"bfloat16"`` or ``"float16"``: the format of raw ``uint16`` arrays (the bits);
        ``ml_dtypes.bfloat16`` and NumPy ``float16`` arrays carry their own.
    torch_cpu_lanes : int or None, default: None
        None: no scalar remainder loop (as on a GPU); or the number of 16-bit lanes of
        torch's CPU vectors (32 with AVX-512 and with AVX2), to round the last
        ``n % lanes`` elements of each tensor as torch's scalar loop does.
    seed : int, default: 0
        The key of the stochastic rounding's draws (``rounding="stochastic"``;
        see :mod:`npoptim.precision.stochastic`); a non-negative int.
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    decoupled_weight_decay : bool, default: False
        Decoupled decay θ(1 - γλ) before the moments: AdamW.
    **torch_options
        The other options of :class:`npoptim.optim.adam.Adam` (torch's
        ``foreach``, ``differentiable``, ``fused``, ...); its convention switches only at
        torch's values.
    """

    roundings = ("per-op", "fused", "stochastic")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, rounding="per-op", format=None, torch_cpu_lanes=None,
                 seed=0, maximize=False, decoupled_weight_decay=False, **torch_options):
        self._low_precision_defaults = dict(rounding=rounding, format=format,
                                            torch_cpu_lanes=torch_cpu_lanes, seed=seed)
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, maximize=maximize,
                         decoupled_weight_decay=decoupled_weight_decay, **torch_options)

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        step = state["step"]
        code = self._code(param, group)
        beta1, beta2 = group["betas"]
        moments = (per_op_moment_hyper(group, code) if group["rounding"] == "per-op"
                   else adam.moment_hyper(group))
        key = (stream_key(group["seed"], index, step)
               if group["rounding"] == "stochastic" else 0)
        hyper = record16(Adam16Hyper, param, group, key=key, **moments,
                         bias_correction2_sqrt=(1 - beta2 ** step) ** 0.5,
                         eps=(rounded_scalar(group["eps"], code)
                              if group["rounding"] == "per-op" else group["eps"]),
                         neg_step_size=-(group["lr"] / (1 - beta1 ** step)),
                         v_divisor=1.0, eps_in_sqrt=False, eps_root=0.0, cautious=False,
                         caution_scale=0.0)
        KERNELS[group["rounding"], bool(group["amsgrad"])](
            param.view(np.uint16), grad.view(np.uint16), self._flat_bits(state, group), hyper)


class AdamW(Adam):
    """``torch.optim.AdamW`` on bfloat16/float16 arrays: :class:`Adam` with decoupled decay.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The bfloat16, float16 or uint16 (raw bits) arrays to optimize (updated in place),
        or param groups (dicts with ``"params"``).
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
    rounding : {'per-op', 'fused', 'stochastic'}, default: 'per-op'
        Where results are rounded to the 16-bit format (see the module docstring):
        ``"per-op"``, ``"fused"``, ``"stochastic"``.
    format : {'bfloat16', 'float16'} or None, default: None
        ``"bfloat16"`` or ``"float16"``: the format of raw ``uint16`` arrays (the bits);
        ``ml_dtypes.bfloat16`` and NumPy ``float16`` arrays carry their own.
    torch_cpu_lanes : int or None, default: None
        None: no scalar remainder loop (as on a GPU); or the number of 16-bit lanes of
        torch's CPU vectors (32 with AVX-512 and with AVX2), to round the last
        ``n % lanes`` elements of each tensor as torch's scalar loop does.
    seed : int, default: 0
        The key of the stochastic rounding's draws (``rounding="stochastic"``;
        see :mod:`npoptim.precision.stochastic`); a non-negative int.
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    **torch_options
        The other options of :class:`npoptim.optim.adam.Adam` (torch's
        ``foreach``, ``differentiable``, ``fused``, ...); its convention switches only at
        torch's values.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, rounding="per-op", format=None, torch_cpu_lanes=None,
                 seed=0, maximize=False, **torch_options):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, rounding=rounding, format=format,
                         torch_cpu_lanes=torch_cpu_lanes, seed=seed, maximize=maximize,
                         decoupled_weight_decay=True, **torch_options)

    def load_state_dict(self, state_dict):
        """As :meth:`Adam.load_state_dict`; every group stays decoupled (torch's AdamW).

        Parameters
        ----------
        state_dict : dict
            As :meth:`npoptim.Optimizer.load_state_dict` takes.
        """
        super().load_state_dict(state_dict)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
