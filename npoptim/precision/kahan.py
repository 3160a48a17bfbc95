r"""Kahan-compensated 16-bit updates, as torch-optimi 0.3 (``optimi.AdamW``, ``optimi.SGD``,
``optimi.Lion``) runs them with ``kahan_sum=True`` on bfloat16/float16 params.

A 16-bit parameter loses every update smaller than half its spacing. Kahan summation keeps the
lost part in a 16-bit state ``kahan_comp`` (:math:`c`, zero at first) and adds it back next
step. With :math:`u` the step's update, every op rounded to the format (:math:`R`, torch's
per-op rounding, :mod:`npoptim.precision.adam`):

.. math::

    c &\leftarrow R(c + u), \qquad \theta' \leftarrow R(\theta + c), \qquad
    c \leftarrow R(c + R(\theta - \theta'))

optimi's formulations (not torch.optim's):

* ``KahanAdamW`` (``optimi.AdamW``): debiased betas
  :math:`\hat\beta = (\beta^t - \beta)/(\beta^t - 1)` instead of bias corrections; decoupled
  decay :math:`\theta \leftarrow R(\theta(1-\gamma\lambda))`;
  :math:`m \leftarrow R(\mathrm{lerp}(m, g, 1-\hat\beta_1))`,
  :math:`v \leftarrow R(\mathrm{fma}((1-\hat\beta_2) g, g, R(\hat\beta_2 v)))`,
  :math:`u = (-\gamma m) / R(R(\sqrt v) + R(\epsilon))` (``eps`` added to :math:`\sqrt v`; torch
  rounds a scalar added to a 16-bit tensor to the format).
* ``KahanSGD`` (``optimi.SGD``): L2 decay :math:`g \leftarrow R(g + R(\lambda)\theta)`,
  momentum :math:`b \leftarrow R(R(\mu b) + g)` from a zero buffer (``exp_avg``), or
  :math:`b = g` without momentum; :math:`u = R(-\gamma)\, b` (``add(b, alpha=-lr)``).
* ``KahanLion`` (``optimi.Lion``): decoupled decay
  :math:`\theta \leftarrow R(\theta(1-\gamma\lambda))`,
  :math:`u = R(-\gamma)\,\mathrm{sign}(R(\mathrm{lerp}(m, g, 1-\beta_1)))`,
  :math:`m \leftarrow R(\mathrm{lerp}(m, g, 1-\beta_2))`. With ``kahan_sum=False``
  (optimi's plain 16-bit Lion) the parameter takes :math:`\theta \leftarrow
  R(\mathrm{fma}(R(-\gamma), \mathrm{sign}(\cdot), \theta))` and there is no ``kahan_comp``.

optimi counts steps per param group; npoptim per parameter (they agree while every parameter
has a gradient at every step). ``rounding`` is ``"per-op"`` only (optimi's CPU path).
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.jit import inlined, kernel
from npoptim.kernels.scalar import fma, lerp
from npoptim.optim.optimizer import Optimizer
from npoptim.optim.options import check_betas, check_nonnegative
from npoptim.precision.drivers import apply_dense16, new_states
from npoptim.precision.formats import round_to
from npoptim.precision.optimizer import LowPrecision, add_alpha, record16, rounded_scalar


class KahanHyper(NamedTuple):
    """One step's hyperparameters of the Kahan rules (float32; ``*_alpha`` in the format)."""

    code: int
    tail_start: int
    decay_factor: float      # AdamW: 1 - lr * weight_decay
    l2_alpha: float          # SGD: R(weight_decay)
    one_minus_beta1: float   # 1 - beta1_hat
    beta2: float             # beta2_hat
    one_minus_beta2: float
    eps: float
    neg_lr: float            # float32 (AdamW's addcdiv value)
    neg_lr_alpha: float      # R(-lr) (SGD's add alpha)
    momentum: float


@inlined
def kahan_add(p, c, code):
    """``p + c`` with the rounding error kept: the new parameter and compensation, from the
    compensation ``c`` that already holds this step's update (torch's ``param.add_(c)``,
    ``c.add_(old_param.sub_(param))``; an ``add`` of alpha 1 rounds alike in torch's tail)."""
    new_p = round_to(p + c, code)
    return new_p, round_to(c + round_to(p - new_p, code), code)


@inlined
def kahan_adamw_rule(p, g, s, h, i, tail):
    """optimi AdamW; ``s = (exp_avg, exp_avg_sq, kahan_comp)``."""
    m, v, c = s
    p = round_to(p * h.decay_factor, h.code)
    m = round_to(lerp(m, g, h.one_minus_beta1), h.code)
    v = round_to(v * h.beta2, h.code)
    v = round_to(fma(h.one_minus_beta2 * g, g, v), h.code)
    denom = round_to(round_to(np.sqrt(v), h.code) + h.eps, h.code)
    c = round_to(c + h.neg_lr * m / denom, h.code)  # c.addcdiv_(m, denom, value=-lr)
    p, c = kahan_add(p, c, h.code)
    return p, new_states(m, v, c)


@inlined
def _sgd_direction(p, g, h, tail):
    if h.l2_alpha != 0:
        g = add_alpha(g, h.l2_alpha, p, h.code, tail)
    return g


@inlined
def kahan_sgd_rule(p, g, s, h, i, tail):
    """optimi SGD without momentum; ``s = (kahan_comp,)``."""
    (c,) = s
    g = _sgd_direction(p, g, h, tail)
    c = add_alpha(c, h.neg_lr_alpha, g, h.code, tail)
    p, c = kahan_add(p, c, h.code)
    return p, (c,)


@inlined
def kahan_momentum_rule(p, g, s, h, i, tail):
    """optimi SGD with momentum (no dampening); ``s = (exp_avg, kahan_comp)``."""
    b, c = s
    g = _sgd_direction(p, g, h, tail)
    b = round_to(round_to(b * h.momentum, h.code) + g, h.code)
    c = add_alpha(c, h.neg_lr_alpha, b, h.code, tail)
    p, c = kahan_add(p, c, h.code)
    return p, new_states(b, c)


@inlined
def _lion_direction(p, g, m, h):
    """optimi Lion's decayed parameter, update sign and new ``exp_avg``."""
    p = round_to(p * h.decay_factor, h.code)
    u = np.sign(round_to(lerp(m, g, h.one_minus_beta1), h.code))
    return p, u, round_to(lerp(m, g, h.one_minus_beta2), h.code)


@inlined
def kahan_lion_rule(p, g, s, h, i, tail):
    """optimi Lion, ``kahan_sum=True``; ``s = (exp_avg, kahan_comp)``."""
    m, c = s
    p, u, m = _lion_direction(p, g, m, h)
    c = add_alpha(c, h.neg_lr_alpha, u, h.code, tail)
    p, c = kahan_add(p, c, h.code)
    return p, new_states(m, c)


@inlined
def lion_rule(p, g, s, h, i, tail):
    """optimi Lion on 16-bit params, ``kahan_sum=False``; ``s = (exp_avg,)``."""
    (m,) = s
    p, u, m = _lion_direction(p, g, m, h)
    return add_alpha(p, h.neg_lr_alpha, u, h.code, tail), (m,)


@kernel
def _kahan_lion_dense(param, grad, states, hyper):
    apply_dense16(kahan_lion_rule, param, grad, states, hyper)


@kernel
def _lion_dense(param, grad, states, hyper):
    apply_dense16(lion_rule, param, grad, states, hyper)


@kernel
def _kahan_adamw_dense(param, grad, states, hyper):
    apply_dense16(kahan_adamw_rule, param, grad, states, hyper)


@kernel
def _kahan_sgd_dense(param, grad, states, hyper):
    apply_dense16(kahan_sgd_rule, param, grad, states, hyper)


@kernel
def _kahan_momentum_dense(param, grad, states, hyper):
    apply_dense16(kahan_momentum_rule, param, grad, states, hyper)


def _debiased(beta, step):
    """optimi's debiased beta: ``(beta**t - beta) / (beta**t - 1)`` (0 at the first step)."""
    return (beta ** step - beta) / (beta ** step - 1)


class _Kahan(LowPrecision, Optimizer):
    roundings = ("per-op",)

    def __init__(self, params, defaults, format, torch_cpu_lanes):
        self._low_precision_defaults = dict(rounding="per-op", format=format,
                                            torch_cpu_lanes=torch_cpu_lanes)
        super().__init__(params, defaults)

    def _hyper(self, param, group, step):
        raise NotImplementedError

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        hyper, kernel_ = self._hyper(param, group, state["step"])
        kernel_(param.view(np.uint16), grad.view(np.uint16), self._flat_bits(state, group),
                hyper)


class KahanAdamW(_Kahan):
    """``optimi.AdamW(..., kahan_sum=True)`` on bfloat16/float16 arrays (module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The bfloat16, float16 or uint16 (raw bits) arrays to optimize (updated in place),
        or param groups (dicts with ``"params"``).
    lr : float
        Learning rate γ (no default, as optimi's).
    betas : tuple of float, default: (0.9, 0.99)
        Decay rates (β1, β2) of the moments, debiased as optimi does.
    weight_decay : float, default: 0.01
        Decoupled weight decay λ: θ(1 - γλ).
    eps : float, default: 1e-06
        Term ε added to the denominator for numerical stability.
    format : {'bfloat16', 'float16'} or None, default: None
        ``"bfloat16"`` or ``"float16"``: the format of raw ``uint16`` arrays (the bits);
        ``ml_dtypes.bfloat16`` and NumPy ``float16`` arrays carry their own.
    torch_cpu_lanes : int or None, default: None
        None: no scalar remainder loop (as on a GPU); or the number of 16-bit lanes of
        torch's CPU vectors (32 with AVX-512 and with AVX2), to round the last
        ``n % lanes`` elements of each tensor as torch's scalar loop does.
    """

    def __init__(self, params, lr, betas=(0.9, 0.99), weight_decay=1e-2, eps=1e-6, *,
                 format=None, torch_cpu_lanes=None):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay, eps=eps),
                         format, torch_cpu_lanes)

    def _check_group(self, group):
        super()._check_group(group)
        check_nonnegative(group, "lr", "eps", "weight_decay")
        check_betas(group["betas"])

    def _state_names(self, group):
        return ("exp_avg", "exp_avg_sq", "kahan_comp")

    def _hyper(self, param, group, step):
        beta1, beta2 = group["betas"]
        beta1_hat, beta2_hat = _debiased(beta1, step), _debiased(beta2, step)
        hyper = record16(KahanHyper, param, group,
                         decay_factor=1 - group["lr"] * group["weight_decay"], l2_alpha=0.0,
                         one_minus_beta1=1 - beta1_hat, beta2=beta2_hat,
                         one_minus_beta2=1 - beta2_hat,
                         eps=rounded_scalar(group["eps"], self._code(param, group)),
                         neg_lr=-group["lr"],
                         neg_lr_alpha=0.0, momentum=0.0)
        return hyper, _kahan_adamw_dense


class KahanSGD(_Kahan):
    """``optimi.SGD(..., kahan_sum=True)`` on bfloat16/float16 arrays: L2 weight decay,
    momentum without dampening from a zero buffer (module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The bfloat16, float16 or uint16 (raw bits) arrays to optimize (updated in place),
        or param groups (dicts with ``"params"``).
    lr : float
        Learning rate γ (no default, as optimi's).
    momentum : float, default: 0
        Momentum factor μ (0: no momentum buffer).
    weight_decay : float, default: 0
        Weight decay λ: λθ added to the gradient (L2).
    format : {'bfloat16', 'float16'} or None, default: None
        ``"bfloat16"`` or ``"float16"``: the format of raw ``uint16`` arrays (the bits);
        ``ml_dtypes.bfloat16`` and NumPy ``float16`` arrays carry their own.
    torch_cpu_lanes : int or None, default: None
        None: no scalar remainder loop (as on a GPU); or the number of 16-bit lanes of
        torch's CPU vectors (32 with AVX-512 and with AVX2), to round the last
        ``n % lanes`` elements of each tensor as torch's scalar loop does.
    """

    def __init__(self, params, lr, momentum=0, weight_decay=0, *, format=None,
                 torch_cpu_lanes=None):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay),
                         format, torch_cpu_lanes)

    def _check_group(self, group):
        super()._check_group(group)
        check_nonnegative(group, "lr", "momentum", "weight_decay")
        if not group["momentum"] < 1:
            raise ValueError(f"Invalid momentum: {group['momentum']}")

    def _state_names(self, group):
        return ("exp_avg", "kahan_comp") if group["momentum"] != 0 else ("kahan_comp",)

    def _hyper(self, param, group, step):
        code = self._code(param, group)
        hyper = record16(KahanHyper, param, group, decay_factor=1.0,
                         l2_alpha=rounded_scalar(group["weight_decay"], code),
                         one_minus_beta1=0.0, beta2=0.0, one_minus_beta2=0.0, eps=0.0,
                         neg_lr=-group["lr"], neg_lr_alpha=rounded_scalar(-group["lr"], code),
                         momentum=group["momentum"])
        return hyper, (_kahan_momentum_dense if group["momentum"] != 0 else _kahan_sgd_dense)


class KahanLion(_Kahan):
    """``optimi.Lion(..., kahan_sum=True)`` on bfloat16/float16 arrays (module docstring);
    ``kahan_sum=False`` is optimi's plain 16-bit Lion (every op rounded, no compensation).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The bfloat16, float16 or uint16 (raw bits) arrays to optimize (updated in place),
        or param groups (dicts with ``"params"``).
    lr : float
        Learning rate γ (no default, as optimi's).
    betas : tuple of float, default: (0.9, 0.99)
        (β1, β2): β1 of the interpolation the sign is taken of, β2 of the momentum.
    weight_decay : float, default: 0
        Decoupled weight decay λ: θ(1 - γλ).
    kahan_sum : bool, default: True
        Kahan-compensated parameter updates; False: optimi's plain 16-bit Lion.
    format : {'bfloat16', 'float16'} or None, default: None
        ``"bfloat16"`` or ``"float16"``: the format of raw ``uint16`` arrays (the bits);
        ``ml_dtypes.bfloat16`` and NumPy ``float16`` arrays carry their own.
    torch_cpu_lanes : int or None, default: None
        None: no scalar remainder loop (as on a GPU); or the number of 16-bit lanes of
        torch's CPU vectors (32 with AVX-512 and with AVX2), to round the last
        ``n % lanes`` elements of each tensor as torch's scalar loop does.
    """

    def __init__(self, params, lr, betas=(0.9, 0.99), weight_decay=0, *, kahan_sum=True,
                 format=None, torch_cpu_lanes=None):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay,
                                      kahan_sum=kahan_sum), format, torch_cpu_lanes)

    def _check_group(self, group):
        super()._check_group(group)
        check_nonnegative(group, "lr", "weight_decay")
        check_betas(group["betas"])
        if not isinstance(group["kahan_sum"], bool):
            raise ValueError(f"kahan_sum must be True or False, got {group['kahan_sum']!r}")

    def _state_names(self, group):
        return ("exp_avg", "kahan_comp") if group["kahan_sum"] else ("exp_avg",)

    def _hyper(self, param, group, step):
        beta1, beta2 = group["betas"]
        hyper = record16(KahanHyper, param, group,
                         decay_factor=1 - group["lr"] * group["weight_decay"], l2_alpha=0.0,
                         one_minus_beta1=1 - beta1, beta2=0.0, one_minus_beta2=1 - beta2,
                         eps=0.0, neg_lr=-group["lr"],
                         neg_lr_alpha=rounded_scalar(-group["lr"], self._code(param, group)),
                         momentum=0.0)
        return hyper, (_kahan_lion_dense if group["kahan_sum"] else _lion_dense)
