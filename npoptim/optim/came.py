r"""CAME (Luo et al., ACL 2023, "CAME: Confidence-guided Adaptive Memory Efficient
Optimization", arXiv 2307.02047): the authors' ``came-pytorch`` 0.1.3 by default, with
pytorch_optimizer 4.1.0's extra options as switches.

CAME is Adafactor with a first moment whose step is weighted by a *confidence*: the factored
running mean of the squared difference between the update and the momentum (the
"instability"). A parameter of two or more dimensions is a matrix over its last two, one
factorization per leading index; vectors and scalars keep full second moments and take the
momentum as it is (no confidence). There is no bias correction and no step-count dependence.

At each step, with gradient :math:`G` (negated when ``maximize``), learning rate
:math:`\gamma`, ``betas`` :math:`(\beta_1, \beta_2, \beta_3)`, ``eps``
:math:`(\epsilon_1, \epsilon_2)`, ``clip_threshold`` :math:`d` and weight decay
:math:`\lambda`, for an :math:`R\times C` matrix:

.. math::

    R_t &= \beta_2 R_{t-1} + (1-\beta_2)\,\mathrm{mean}_{\text{cols}}(G^2 + \epsilon_1)\\
    C_t &= \beta_2 C_{t-1} + (1-\beta_2)\,\mathrm{mean}_{\text{rows}}(G^2 + \epsilon_1)\\
    U &= G \,/\, \sqrt{R_t C_t / \mathrm{mean}(R_t)}                    &&\quad\text{(1)}\\
    \hat U &= U / \max(1,\ \mathrm{RMS}(U)/d)\\
    m_t &= \beta_1 m_{t-1} + (1-\beta_1)\,\hat U\\
    I &= (\hat U - m_t)^2 + \epsilon_2                                  &&\quad\text{(2)}\\
    R'_t &= \beta_3 R'_{t-1} + (1-\beta_3)\,\mathrm{mean}_{\text{cols}}(I)\\
    C'_t &= \beta_3 C'_{t-1} + (1-\beta_3)\,\mathrm{mean}_{\text{rows}}(I)\\
    \theta &\leftarrow \theta - \gamma\lambda\theta                     &&\quad\text{(3)}\\
    \theta &\leftarrow \theta - \gamma\, m_t \,/\, \sqrt{R'_t C'_t / \mathrm{mean}(R'_t)}
                                                                        &&\quad\text{(4)}

1. For a vector: :math:`V_t = \beta_2 V_{t-1} + (1-\beta_2)(G^2 + \epsilon_1)`,
   :math:`U = G/\sqrt{V_t}`.
2. The instability is measured against the *new* momentum :math:`m_t`, and from the clipped
   update :math:`\hat U`, not from the gradient.
3. Decoupled weight decay, not scaled by the adaptive step (its update does not read
   :math:`\theta`, so before or after the rule is the same).
4. For a vector: :math:`\theta \leftarrow \theta - \gamma m_t`.

:math:`\mathrm{mean}(R_t)` is the mean of the row factor over the rows (per leading index),
so :math:`R_t C_t/\mathrm{mean}(R_t)` is the paper's :math:`r_t c_t / 1_n^\top r_t` written
with means. The factored inverse square root is computed as the sources do:
:math:`1/\sqrt{R_t/\mathrm{mean}(R_t)}` (a column) times :math:`1/\sqrt{C_t}` (a row).

Sources and where they differ:

* the authors' yangluo7/CAME ``came_pytorch/CAME.py`` (``CAME``; the PyPI package
  ``came-pytorch`` 0.1.3 holds the same file): the rule above, the default. ``eps`` a pair
  ``(1e-30, 1e-16)``, :math:`\epsilon_1` added to :math:`G^2` and :math:`\epsilon_2` to
  the instability (both *inside* the means: the same as adding them after, up to rounding);
  ``betas=(0.9, 0.999, 0.9999)``, ``clip_threshold=1``, no default lr (npoptim takes
  pytorch_optimizer's 2e-4). Its weight decay, documented as an "L2 penalty", is decoupled:
  ``p.add_(p, alpha=-weight_decay * lr)`` after the update is computed. It also keeps
  ``state["RMS"]``, the parameter's RMS, which nothing reads (npoptim does not store it),
  and a per-parameter step count, which nothing reads either.
* kozistr/pytorch_optimizer ``pytorch_optimizer/optimizer/came.py`` (``CAME``, 4.1.0): the
  same rule (its momentum by torch's ``lerp``, the authors' by ``mul_(β1).add_``: an ulp
  apart), ``eps1``/``eps2`` as two keywords, the decay first (:math:`\theta(1-\gamma\lambda)`),
  and four options the authors' code does not have, switches here:
  ``maximize``; ``decoupled_weight_decay=False`` (its ``weight_decouple=False``: L2, the
  gradient becomes :math:`G + \lambda\theta` before everything above, with the parameter
  before the step); ``fixed_decay`` (:math:`\theta(1-\lambda)`, the rate not multiplied by
  :math:`\gamma`); ``ams_bound``: a state :math:`H` of the parameter's full shape with
  :math:`H \leftarrow \max(H, 1/\text{(1)'s inverse root})` (the running max of
  :math:`\sqrt{\hat V}`, not of :math:`\hat V`), then :math:`U = G / \sqrt{H/\beta_2}`: a
  fourth root of the second moment, and :math:`\sqrt{\beta_2}` as a factor, which is what it
  computes (not AMSGrad's bound). It counts steps per param group (read by nothing).
* hpcaitech/ColossalAI ``colossalai/nn/optimizer/came.py`` says it is copied from the
  authors' file (its distributed variant aside).
* mindspore-lab/mindformers ``mindformers/core/optim/came.py`` (``Came``; read, not run, and
  not implemented here: no MindSpore) is another form, built on its Adafactor: three eps
  ``(1e-30, 1e-3, 1e-16)``, :math:`\beta_2` replaced by Adafactor's
  :math:`\hat\beta_{2,t} = 1 - t^{-0.8}` (``decay_rate``), ``beta3=0.99``, an optional
  parameter scale :math:`\max(\epsilon_2, \mathrm{RMS}(\theta))` on the lr (which also
  scales its decay), and on a CPU device its ``FusedAdaFactor`` kernel, which has no
  confidence at all: ``confidence=False`` here, as far as the confidence goes.

The row and column means here are NumPy's sums (a fixed pairwise order) divided by the
length, and the RMS a float64-accumulated 2-norm over the square root of the size, as
Adafactor's (:mod:`npoptim.optim.adafactor`); torch sums in its own order, so the float64
cross-checks agree to about 1e-15 of the parameters' scale, not to the bit.

This update is not element-wise (means over rows and columns, the RMS of the update), so it
is written in plain NumPy in the parameter's dtype. Dense gradients only, real parameters only.
"""
import math
from typing import NamedTuple

import numpy as np

from npoptim.optim.optimizer import Optimizer
from npoptim.optim.options import check_flag, check_nonnegative, check_three_betas


class CAMEHyper(NamedTuple):
    """The hyperparameters of one CAME step, as the update reads them."""
    lr: float              # learning rate γ
    beta1: float           # decay of the momentum m
    beta2: float           # decay of the (factored) second moment
    beta3: float           # decay of the (factored) instability
    eps1: float            # added to G² before its means
    eps2: float            # added to the instability (Û - m)²
    clip_threshold: float  # d: Û = U / max(1, RMS(U)/d)
    decay_rate: float      # the decoupled decay θ ← θ - decay_rate·θ (γλ, or λ with fixed_decay)
    l2: float              # λ of the L2 form: G ← G + l2·θ (0 unless decoupled_weight_decay=False)
    confidence: bool       # weigh a matrix's momentum by the confidence (False: Adafactor's step)


def norm(x):
    """The 2-norm of all of ``x`` in its dtype (accumulated in float64, rounded once)."""
    return np.sqrt(np.sum(np.square(x, dtype=np.float64))).astype(x.dtype)


def rms(x):
    """``‖x‖ / sqrt(x.size)`` in ``x``'s dtype, as the sources' ``_rms``."""
    return norm(x) / x.dtype.type(math.sqrt(x.size))


def factored_inverse_root(row, col):
    """``1/sqrt(row·col/mean(row))`` as the sources' ``_approx_sq_grad``: the row factor
    ``1/sqrt(row/mean(row))`` (its mean over the rows, the last axis of ``row``) as a column,
    times ``1/sqrt(col)`` as a row. ``row`` has shape ``(..., R)``, ``col`` ``(..., C)``."""
    one = row.dtype.type(1)
    row_mean = np.sum(row, axis=-1, keepdims=True) / row.dtype.type(row.shape[-1])
    row_factor = one / np.sqrt(row / row_mean)
    col_factor = one / np.sqrt(col)
    return row_factor[..., :, None] * col_factor[..., None, :]


def ema_of_means(row, col, values, beta):
    """Update the factors in place: ``row ← β·row + (1-β)·mean of values over its last axis``,
    ``col`` the same over the second-to-last (torch's ``mul_(β).add_(mean, alpha=1-β)``)."""
    dtype = values.dtype.type
    row_mean = np.sum(values, axis=-1) / dtype(values.shape[-1])
    col_mean = np.sum(values, axis=-2) / dtype(values.shape[-2])
    row *= dtype(beta)
    row += dtype(1 - beta) * row_mean
    col *= dtype(beta)
    col += dtype(1 - beta) * col_mean


def came_update(param, grad, state, hyper):
    """One CAME step of ``param`` (in place) and its ``state`` (a dict of the arrays named as
    the sources name them) for the gradient ``grad`` (maximize already applied), with the
    record ``hyper`` (:class:`CAMEHyper`). Both arrays have the parameter's shape."""
    dtype = param.dtype.type
    if hyper.l2 != 0:
        grad = grad + dtype(hyper.l2) * param
    square = grad * grad + dtype(hyper.eps1)
    factored = "exp_avg_sq_row" in state
    if factored:
        row, col = state["exp_avg_sq_row"], state["exp_avg_sq_col"]
        ema_of_means(row, col, square, hyper.beta2)
        inverse_root = factored_inverse_root(row, col)
    else:
        variance = state["exp_avg_sq"]
        variance *= dtype(hyper.beta2)
        variance += dtype(1 - hyper.beta2) * square
        inverse_root = dtype(1) / np.sqrt(variance)
    if "exp_avg_sq_hat" in state:  # pytorch_optimizer's ams_bound
        hat = state["exp_avg_sq_hat"]
        np.maximum(hat, dtype(1) / inverse_root, out=hat)
        inverse_root = dtype(1) / np.sqrt(hat / dtype(hyper.beta2))
    update = inverse_root * grad
    update /= max(dtype(1), rms(update) / dtype(hyper.clip_threshold))

    exp_avg = state["exp_avg"]
    exp_avg *= dtype(hyper.beta1)
    exp_avg += dtype(1 - hyper.beta1) * update
    if factored and hyper.confidence:
        instability = update - exp_avg
        instability *= instability
        instability += dtype(hyper.eps2)
        row, col = state["exp_avg_res_row"], state["exp_avg_res_col"]
        ema_of_means(row, col, instability, hyper.beta3)
        step = factored_inverse_root(row, col) * exp_avg
    else:
        step = exp_avg
    if hyper.decay_rate != 0:
        param += dtype(-hyper.decay_rate) * param
    param -= dtype(hyper.lr) * step


class CAME(Optimizer):
    """CAME, the authors' ``came_pytorch.CAME`` (see the module docstring for
    pytorch_optimizer's options).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.0002
        Learning rate γ (the authors' code has no default; this is pytorch_optimizer's).
    eps : tuple (float, float), default: (1e-30, 1e-16)
        (ε1, ε2): ε1 is added to G² in the second moment, ε2 to the instability (Û - m)².
    clip_threshold : float, default: 1.0
        d: the update U is divided by max(1, RMS(U)/d) (inf: no clipping).
    betas : tuple (float, float, float), default: (0.9, 0.999, 0.9999)
        Decays of the momentum, the second moment and the instability.
    weight_decay : float, default: 0.0
        Weight decay λ: decoupled, θ ← θ - γλθ (see ``decoupled_weight_decay``, ``fixed_decay``).
    maximize : bool, default: False
        Maximize the objective: the gradient is negated (pytorch_optimizer).
    decoupled_weight_decay : bool, default: True
        False: L2, G ← G + λθ (pytorch_optimizer's ``weight_decouple=False``).
    fixed_decay : bool, default: False
        The decoupled decay not scaled by the lr: θ ← θ(1 - λ) (pytorch_optimizer).
    ams_bound : bool, default: False
        pytorch_optimizer's ``ams_bound``: the running max of the inverse of the second
        moment's inverse root, in a state of the parameter's shape (``exp_avg_sq_hat``).
    confidence : bool, default: True
        False: a matrix steps by its momentum as a vector does, θ ← θ - γm (Adafactor with
        momentum, the paper's baseline), and keeps no instability factors.
    """

    def __init__(self, params, lr=2e-4, eps=(1e-30, 1e-16), clip_threshold=1.0,
                 betas=(0.9, 0.999, 0.9999), weight_decay=0.0, *, maximize=False,
                 decoupled_weight_decay=True, fixed_decay=False, ams_bound=False,
                 confidence=True):
        super().__init__(params, dict(lr=lr, eps=eps, clip_threshold=clip_threshold,
                                      betas=betas, weight_decay=weight_decay,
                                      maximize=maximize,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      fixed_decay=fixed_decay, ams_bound=ams_bound,
                                      confidence=confidence))

    def _check_group(self, group):
        check_nonnegative(group, "lr", "weight_decay")
        check_three_betas(group["betas"])
        eps = group["eps"]
        if not isinstance(eps, (tuple, list)) or len(eps) != 2 or not all(
                isinstance(e, (int, float)) and not isinstance(e, bool) and e >= 0
                for e in eps):
            raise ValueError(f"eps must be a pair (eps1, eps2) of non-negative numbers, "
                             f"got {eps!r}")
        d = group["clip_threshold"]
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not d > 0:
            raise ValueError(f"clip_threshold must be a positive number, got {d!r}")
        check_flag(group, "maximize", "decoupled_weight_decay", "fixed_decay", "ams_bound",
                   "confidence")

    def _state_shapes(self, param, group):
        shape = param.shape
        if len(shape) >= 2:
            row, col = shape[:-1], shape[:-2] + shape[-1:]
            shapes = {"exp_avg": shape, "exp_avg_sq_row": row, "exp_avg_sq_col": col}
            if group["confidence"]:
                shapes.update(exp_avg_res_row=row, exp_avg_res_col=col)
        else:
            shapes = {"exp_avg": shape, "exp_avg_sq": shape}
        if group["ams_bound"]:
            shapes["exp_avg_sq_hat"] = shape
        return shapes

    def _prepare(self, grads):
        prepared = super()._prepare(grads)
        for _, index, param, _ in prepared:
            if param.size == 0:
                raise ValueError(f"params[{index}] has no elements: CAME's RMS of the update "
                                 "divides by the parameter's size")
        return prepared

    def _update(self, param, grad, state, group, index, shape):
        if group["maximize"]:
            grad = -grad
        lr, weight_decay = group["lr"], group["weight_decay"]
        decoupled = group["decoupled_weight_decay"]
        beta1, beta2, beta3 = group["betas"]
        eps1, eps2 = group["eps"]
        hyper = CAMEHyper(
            lr=lr, beta1=beta1, beta2=beta2, beta3=beta3, eps1=eps1, eps2=eps2,
            clip_threshold=group["clip_threshold"],
            decay_rate=(weight_decay * (1.0 if group["fixed_decay"] else lr)) if decoupled
            else 0.0,
            l2=0.0 if decoupled else weight_decay, confidence=group["confidence"])
        state["step"] += 1
        views = {name: state[name] for name in self._state_shapes(param.reshape(shape), group)}
        came_update(param.reshape(shape), grad.reshape(shape), views, hyper)
