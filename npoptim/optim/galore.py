r"""GaLore AdamW: Adam on a low-rank projection of each matrix gradient (Zhao et al., "GaLore:
Memory-Efficient LLM Training by Gradient Low-Rank Projection", ICML 2024, arXiv 2403.03507),
as the authors' ``galore_torch.GaLoreAdamW`` (jiaweizzhao/GaLore, PyPI ``galore-torch`` 1.0,
``galore_torch/adamw.py`` and ``galore_projector.py``, ``proj_type="std"``).

For a 2-D parameter :math:`W` of shape :math:`m \times n` with gradient :math:`G`, rank
:math:`r` (``rank``, at most :math:`\min(m, n)`), step count :math:`t` (from 1), every
``update_proj_gap``-th step from the first the projector is refreshed from the SVD
:math:`G = U \Sigma V^\top`:

.. math::

    P &= V_{:, :r}^\top \;(r \times n), \quad R = G P^\top \;(m \times r)
        &&\text{if } m \ge n \text{ (the smaller side is projected)}\\
    P &= U_{:, :r} \;(m \times r), \quad R = P^\top G \;(r \times n)   &&\text{else}\\
    M &\leftarrow \beta_1 M + (1-\beta_1) R, \quad
        V \leftarrow \beta_2 V + (1-\beta_2) R^2  &&\text{(low-rank Adam moments)}\\
    N &= M / (\sqrt{V} + \epsilon), \quad
        D = s \cdot (N P \text{ if } m \ge n \text{ else } P N)\\
    W &\leftarrow W - \gamma\frac{\sqrt{1-\beta_2^t}}{1-\beta_1^t} D, \quad
        W \leftarrow W - \gamma\lambda W

:math:`s` is ``scale`` (0.25, the authors' README; their projector's own default is 1),
:math:`\lambda` ``weight_decay`` (decoupled, applied after the step, to the updated
parameter), :math:`\epsilon` ``eps`` (1e-6, added to :math:`\sqrt{V}` without bias
correction, as the authors' code, from transformers' AdamW), ``correct_bias=False`` drops the
bias-correction factor. Parameters that are not 2-D (and empty matrices) take the same AdamW
step on the full gradient (the authors leave that to the param groups without ``rank``;
optax's ``scale_by_galore`` projects exactly the 2-D ones). State: ``exp_avg`` and
``exp_avg_sq`` of the low-rank shape, ``ortho_matrix`` (the projector :math:`P`, the name
the authors' ``GaLoreProjector`` gives it) and ``step``.

The SVD: the authors (and optax) compute it in float32, whatever the parameter's dtype, and
cast the projector back; npoptim computes it in the parameter's dtype (``numpy.linalg.svd``,
LAPACK ``gesdd``), so a float64 GaLore is float64 throughout. Singular vectors are defined
up to sign. The step does not depend on the signs while a projector is in use (Adam's
direction is odd in the gradient), but at a refresh the moments carried over are read in the
new basis, so a sign that another LAPACK build picks differently changes the trajectory:
npoptim fixes the signs (each singular vector's entry of largest magnitude is positive, as
scikit-learn's ``svd_flip``), so its results do not depend on the LAPACK build; the authors'
depend on theirs. The cross-checks: against galore-torch with its SVD done in float64 and
signed the same way, to 1e-12 of the parameters' scale over several refreshes; against
galore-torch as published (float32 SVD, its build's signs) with one refresh, at 1e-5 (a
float32 SVD moves the projector by ~1e-7 of its scale, carried by every later step).
optax's ``optax.contrib.galore`` differs: it projects the *larger* side (:math:`U^\top G` for
:math:`m \ge n`) and runs optax's Adam (:math:`\epsilon` outside the bias-corrected
:math:`\sqrt{\hat v}`), and its SVD is float32 under x64 too (singular vectors of an 8x5
matrix 1.6e-6 from the float64 ones); that form is not implemented here
(``npoptim.flavors.OPTAX.not_reproduced``). Dense gradients only.
"""
import math
import numbers
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import fma
from npoptim.optim.optimizer import Optimizer, check_betas, check_nonnegative, typed_record
from npoptim.optim.variants import check_flag


class GaLoreHyper(NamedTuple):
    """One step's hyperparameters of the GaLore rules (built by ``GaLoreAdamW._update``)."""

    beta1: float
    one_minus_beta1: float
    beta2: float
    one_minus_beta2: float
    eps: float
    neg_step_size: float   # -γ √(1-β2^t)/(1-β1^t) (-γ without bias correction)
    neg_decay: float       # -γ λ


@kernel
def galore_moments_rule(n, r, s, h):
    """One element of the low-rank Adam direction: ``r`` the projected gradient,
    ``s = (exp_avg, exp_avg_sq)``; returns :math:`M/(\\sqrt{V}+\\epsilon)` (``n`` unread).
    torch's ``mul_(b1).add_(r, alpha=1-b1)`` and ``mul_(b2).addcmul_(r, r, value=1-b2)``."""
    m, v = s
    m = fma(h.one_minus_beta1, r, m * h.beta1)
    v = fma(h.one_minus_beta2 * r, r, v * h.beta2)
    return m / (np.sqrt(v) + h.eps), (m, v)


@kernel
def galore_param_rule(p, d, s, h):
    """One element of the parameter update from the full-space direction ``d`` (no state):
    torch's ``p.add_(d, alpha=-step_size)``, then ``p.add_(p, alpha=-lr*wd)``."""
    p = fma(h.neg_step_size, d, p)
    return fma(h.neg_decay, p, p), s


@kernel
def _galore_moments(direction, low_rank_grad, states, hyper):
    apply_dense(galore_moments_rule, direction, low_rank_grad, states, GaLoreHyper(*hyper))


@kernel
def _galore_param(param, direction, states, hyper):
    apply_dense(galore_param_rule, param, direction, states, GaLoreHyper(*hyper))


@kernel
def matmul(a, b, out):
    """``out = a @ b``, each entry summed over the inner index in order (deterministic)."""
    rows, inner = a.shape
    cols = b.shape[1]
    for i in range(rows):
        for j in range(cols):
            acc = out[i, j] - out[i, j]
            for k in range(inner):
                acc += a[i, k] * b[k, j]
            out[i, j] = acc


def _product(a, b):
    out = np.zeros((a.shape[0], b.shape[1]), a.dtype)
    matmul(np.ascontiguousarray(a), np.ascontiguousarray(b), out)
    return out


def orthogonal_projector(g, shape):
    """The projector of the gradient matrix ``g``: its first right singular vectors as rows
    (tall ``g``) or left ones as columns (wide ``g``), each signed so that its entry of
    largest magnitude (the first such) is positive."""
    u, _, vh = np.linalg.svd(g, full_matrices=False)
    vectors = vh[:shape[0], :].T if g.shape[0] >= g.shape[1] else u[:, :shape[1]]
    peaks = vectors[np.argmax(np.abs(vectors), axis=0), np.arange(vectors.shape[1])]
    vectors = vectors * np.where(peaks < 0, -1.0, 1.0).astype(vectors.dtype)
    return vectors.T if g.shape[0] >= g.shape[1] else vectors


def projection_shapes(shape, rank):
    """``(projector shape, low-rank shape)`` of a parameter, or None if it is not
    projected (not 2-D, or empty)."""
    if len(shape) != 2 or min(shape) == 0:
        return None
    m, n = shape
    r = min(rank, m, n)
    return ((r, n), (m, r)) if m >= n else ((m, r), (r, n))


class GaLoreAdamW(Optimizer):
    """GaLore AdamW (see the module docstring): ``lr``, ``betas``, ``eps``,
    ``weight_decay``, ``correct_bias``, ``rank``, ``update_proj_gap``, ``scale``."""

    sparse_kind = "dense-only"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0,
                 correct_bias=True, *, rank=128, update_proj_gap=200, scale=0.25):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      correct_bias=correct_bias, rank=rank,
                                      update_proj_gap=update_proj_gap, scale=scale))

    def _check_group(self, group):
        check_nonnegative(group, "lr", "eps", "weight_decay", "scale")
        check_betas(group["betas"])
        check_flag(group, "correct_bias")
        for name in ("rank", "update_proj_gap"):
            value = group[name]
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")

    def _state_names(self, group):
        return ("exp_avg", "exp_avg_sq", "ortho_matrix")

    def _state_shapes(self, param, group):
        shapes = projection_shapes(param.shape, group["rank"])
        if shapes is None:
            return {"exp_avg": param.shape, "exp_avg_sq": param.shape, "ortho_matrix": (0, 0)}
        projector, low = shapes
        return {"exp_avg": low, "exp_avg_sq": low, "ortho_matrix": projector}

    def _update(self, param, grad, state, group):
        refresh = state["step"] % group["update_proj_gap"] == 0
        state["step"] += 1
        step = state["step"]
        beta1, beta2 = group["betas"]
        step_size = group["lr"]
        if group["correct_bias"]:
            step_size = step_size * math.sqrt(1.0 - beta2 ** step) / (1.0 - beta1 ** step)
        hyper = typed_record(GaLoreHyper, param, beta1=beta1, one_minus_beta1=1.0 - beta1,
                             beta2=beta2, one_minus_beta2=1.0 - beta2, eps=group["eps"],
                             neg_step_size=-step_size,
                             neg_decay=-group["lr"] * group["weight_decay"])
        shape = self._current_shape
        moments = (state["exp_avg"].reshape(-1), state["exp_avg_sq"].reshape(-1))
        if projection_shapes(shape, group["rank"]) is None:
            direction = np.zeros_like(param)
            _galore_moments(direction, grad, moments, hyper)
            _galore_param(param, direction, (), hyper)
            return
        g = grad.reshape(shape)
        m, n = shape
        projector = state["ortho_matrix"]
        if refresh:
            projector[...] = orthogonal_projector(g, projector.shape)
        low = _product(g, projector.T) if m >= n else _product(projector.T, g)
        direction = np.zeros_like(low)
        _galore_moments(direction.reshape(-1), low.reshape(-1), moments, hyper)
        full = _product(direction, projector) if m >= n else _product(projector, direction)
        full *= param.dtype.type(group["scale"])
        _galore_param(param, full.reshape(-1), (), hyper)
