r"""APOLLO: AdamW's scaling of the gradient, estimated in a random low-rank space (Zhu et al.,
"APOLLO: SGD-like Memory, AdamW-level Performance", MLSys 2025, arXiv 2412.05270), as the
authors' ``apollo_torch.APOLLOAdamW`` (zhuhanqing/APOLLO, PyPI ``apollo-torch`` 1.0.3,
``apollo_torch/apollo.py`` and ``random_projector.py``, ``proj="random"``,
``proj_type="std"``), and as ``pytorch_optimizer.APOLLO`` (kozistr/pytorch_optimizer 4.1.0,
``pytorch_optimizer/optimizer/apollo.py`` and ``optimizer/utils/galore.py``).

For a 2-D parameter :math:`W` of shape :math:`m \times n` with gradient :math:`G`, rank
:math:`r` (``rank``; not clipped to the shape: a random projection may have more rows than
the matrix), step count :math:`t` (from 1), at the refresh steps (the first, then every
``update_proj_gap``-th) a new random projector :math:`P` is drawn, entries
:math:`\mathcal N(0, 1/r)`:

.. math::

    P &\in \mathbb R^{r \times n},\quad R = G P^\top \;(m \times r)  &&\text{if } m \ge n\\
    P &\in \mathbb R^{m \times r},\quad R = P^\top G \;(r \times n)  &&\text{else}\\
    M &\leftarrow \beta_1 M + (1-\beta_1) R, \quad
        V \leftarrow \beta_2 V + (1-\beta_2) R^2\\
    N &= M / (\sqrt{V} + \epsilon)

The low-rank Adam direction :math:`N` is not projected back: only its ratio to :math:`R`,
per channel (``scale_type="channel"``: the rows of :math:`R` for :math:`m \ge n`, its
columns else; one factor per row, or column, of :math:`G`) or for the whole tensor
(``"tensor"``), scales the full gradient:

.. math::

    c_i &= \frac{\lVert N_{i,:}\rVert}{\lVert R_{i,:}\rVert + 10^{-8}},\quad
        D = \operatorname{diag}(c)\, G  &&\text{channel, } m \ge n\\
    c_j &= \frac{\lVert N_{:,j}\rVert}{\lVert R_{:,j}\rVert + 10^{-8}},\quad
        D = G \operatorname{diag}(c)  &&\text{channel, } m < n\\
    c &= \frac{\lVert N\rVert_F}{\lVert R\rVert_F + 10^{-8}},\quad D = c\, G
        &&\text{tensor}

then Fira's norm-growth limiter (``norm_growth_limiter``, arXiv 2410.01623) keeps
:math:`\lVert D\rVert` from growing by more than 1.01 per step: with :math:`\nu` the norm
kept from the step before (the state ``scaled_grad``),

.. math::

    \ell = \max\!\Big(\frac{\lVert D\rVert}{\nu + 10^{-8}},\, 1.01\Big) / 1.01, \quad
        D \leftarrow D/\ell, \quad \nu \leftarrow \lVert D\rVert/\ell

(at :math:`t = 1`: :math:`\nu = \lVert D\rVert`, no limit), and the step is

.. math::

    W \leftarrow W - \gamma\frac{\sqrt{1-\beta_2^t}}{1-\beta_1^t}\sqrt{s}\, D, \quad
    W \leftarrow W - \gamma\lambda W

with :math:`s` ``scale`` (the authors multiply by its square root), :math:`\lambda`
``weight_decay`` (decoupled, on the updated parameter, by the lr without the bias
correction), :math:`\epsilon` ``eps``; ``correct_bias=False`` drops the correction. With
``scale_front=True`` (the authors' switch) :math:`\sqrt{s}` multiplies :math:`D` before the
limiter. Parameters that are not 2-D (and empty matrices) take plain AdamW (the same
:math:`M, V, N` on the full gradient, :math:`W \leftarrow W - \gamma\frac{\sqrt{1-\beta_2^t}}
{1-\beta_1^t} N` and the decay; the authors leave them to param groups without ``rank``,
pytorch_optimizer projects exactly the 2-D ones). State: ``exp_avg`` and ``exp_avg_sq`` of
the low-rank shape, ``projector`` (:math:`P`), ``scaled_grad`` (:math:`\nu`, one value) and
``step``.

Variants (``variant=``; each sets ``rank``, ``scale``, ``scale_type``, ``scaled_gradient``,
``refresh_offset`` and ``decay_lr``, and a switch given explicitly overrides it):

* ``"apollo"`` (the default): the authors' APOLLO, channel-wise, rank 256, scale 1 (their
  README's settings for LLaMA pre-training).
* ``"apollo_mini"``: the authors' APOLLO-Mini, rank 1, tensor-wise, scale 128 (their README).
* ``"pytorch_optimizer"``: ``pytorch_optimizer.APOLLO``, which differs from the authors in
  three places, each a switch: (1) ``scaled_gradient="projected_back"``: it scales the
  low-rank :math:`R` (not :math:`G`) by the factors, applies the limiter and
  :math:`\sqrt s` to that, and steps along its projection back, :math:`D P` (or :math:`P D`),
  times :math:`s` once more (its ``GaLoreProjector.project_back``), so the step lies in the
  projector's span and scales by :math:`s^{3/2}`; the authors' ``"full"`` scales :math:`G`
  itself; its channel axis is chosen from the low-rank shape (the same as the authors' while
  :math:`r \le \min(m, n)`); (2) ``refresh_offset=0``: it refreshes at :math:`t = 1` and
  at every :math:`t \equiv 0 \pmod{\text{gap}}` (``num_steps % update_proj_gap == 0`` on the
  group's step counted from 1), the authors at :math:`t \equiv 1` (``refresh_offset=1``: their
  count from 0); (3) ``decay_lr="step_size"``: its decay is :math:`W \leftarrow W(1 -
  \lambda\gamma_t)` with the bias-corrected step size :math:`\gamma_t = \gamma\sqrt{1-\beta_2^t}
  /(1-\beta_1^t)`, the authors' (``"lr"``) :math:`W \leftarrow W - \gamma\lambda W`. Its
  defaults are tensor-wise, and scale 1, rank 256 here (it has none: the group must give
  them). It updates the moments with ``lerp_`` (:math:`M + (1-\beta_1)(R - M)`), which rounds
  differently from the authors' form npoptim computes (a difference of rounding only,
  ~1e-16 relative per step).

The random projection. The authors draw :math:`P` from torch's generator
(``torch.randn`` in float32, seeded per parameter, divided by :math:`\sqrt r`, cast to the
parameter's dtype), pytorch_optimizer from torch's global generator in the parameter's
dtype; neither's bits are reproducible without torch. npoptim draws it from its counter
stream (:mod:`npoptim.kernels.counter_stream`, keyed by ``(seed, parameter index, t)``, the
:math:`r n` or :math:`m r` values in C order, divided by :math:`\sqrt r` in float64 and
rounded to the parameter's dtype): the same bits on every CPU, so golden files can hold it.
To reproduce another implementation's trajectory exactly, pass its projectors:
``step(grads, projection=[...])``, one entry per parameter, an array of the projector's
shape (:math:`r \times n` or :math:`m \times r`) and the parameter's dtype, or None; a given
array replaces the drawn one at that parameter's refresh step, and giving one at a step that
does not refresh it (or for a parameter that is not projected) raises before anything
changes. The tests hand in the projectors torch drew (``projector.ortho_matrix``) that way.

Every product is :func:`~npoptim.kernels.reduction.matmul_of` and every norm
:func:`~npoptim.kernels.reduction.grad_sumsq` (fixed orders), the square roots of scalars
``math.sqrt``: the same bits on every CPU. The authors' ``proj="svd"`` (GaLore's SVD
projector under APOLLO's scaling) and pytorch_optimizer's ``weight_decouple=False`` and
``fixed_decay`` are not modelled. Dense gradients only.
"""
import math
import numbers
from typing import NamedTuple

import numpy as np

from npoptim.kernels.counter_stream import standard_normal
from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.reduction import grad_sumsq
from npoptim.kernels.scalar import fma
from npoptim.optim.noise import check_seed
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import (VARIANT_DEFAULT, check_betas, check_choice, check_flag,
                                   check_no_variant, check_nonnegative, resolve_variant)
from npoptim.optim.projection import project, project_back, projection_shapes, projects_right


class APOLLOHyper(NamedTuple):
    """One step's hyperparameters of the APOLLO rules (built by ``APOLLO._update``)."""

    beta1: float
    one_minus_beta1: float
    beta2: float
    one_minus_beta2: float
    eps: float
    neg_step_size: float   # -γ √(1-β2^t)/(1-β1^t) (-γ without bias correction)
    neg_decay: float       # decay_lr="lr": -γ λ (the authors' p.add_(p, alpha=-lr*wd)), else 0
    decay_factor: float    # decay_lr="step_size": 1 - λ γ_t (pytorch_optimizer's), else 1


@kernel
def apollo_moments_rule(n, r, s, h):
    """One element of the low-rank Adam direction: ``r`` the projected gradient (the
    gradient for plain AdamW), ``s = (exp_avg, exp_avg_sq)``; returns :math:`M/(\\sqrt V +
    \\epsilon)` (``n`` unread): the authors' ``mul_(b1).add_(r, alpha=1-b1)`` and
    ``mul_(b2).addcmul_(r, r, value=1-b2)``."""
    m, v = s
    m = fma(h.one_minus_beta1, r, m * h.beta1)
    v = fma(h.one_minus_beta2 * r, r, v * h.beta2)
    return m / (np.sqrt(v) + h.eps), (m, v)


@kernel
def apollo_param_rule(p, d, s, h):
    """One element of the step along the full-space ``d`` (no state): torch's
    ``p.add_(d, alpha=-step_size)``, then the decay (``p.add_(p, alpha=-lr*wd)``, or
    ``p.mul_(1 - wd*step_size)``; the unused one adds 0 or multiplies by 1)."""
    p = fma(h.neg_step_size, d, p)
    return fma(h.neg_decay, p, p) * h.decay_factor, s


@kernel
def _apollo_moments(direction, low_rank_grad, states, hyper):
    apply_dense(apollo_moments_rule, direction, low_rank_grad, states, APOLLOHyper(*hyper))


@kernel
def _apollo_param(param, direction, states, hyper):
    apply_dense(apollo_param_rule, param, direction, states, APOLLOHyper(*hyper))


#: The published forms: the switches each sets (module docstring).
VARIANTS = {
    "apollo": dict(rank=256, scale=1.0, scale_type="channel", scaled_gradient="full",
                   refresh_offset=1, decay_lr="lr"),
    "apollo_mini": dict(rank=1, scale=128.0, scale_type="tensor", scaled_gradient="full",
                        refresh_offset=1, decay_lr="lr"),
    "pytorch_optimizer": dict(rank=256, scale=1.0, scale_type="tensor",
                              scaled_gradient="projected_back", refresh_offset=0,
                              decay_lr="step_size"),
}
ALIASES = {"mini": "apollo_mini"}


def norm(a):
    """``‖a‖`` (Frobenius) of an array, summed in a fixed order."""
    return math.sqrt(float(grad_sumsq(np.ascontiguousarray(a).reshape(-1))))


def channel_norms(a, axis):
    """The norms of ``a``'s rows (``axis=1``: one per row) or columns (``axis=0``)."""
    lines = np.ascontiguousarray(a if axis == 1 else a.T)
    return np.array([math.sqrt(float(grad_sumsq(line))) for line in lines], a.dtype)


def scaling_factors(direction, low, axis, scale_type):
    """APOLLO's factors :math:`c`: per channel along ``axis`` of the low-rank matrices (as an
    array that broadcasts against the matrix scaled) or one for the tensor."""
    dtype = low.dtype.type
    if scale_type == "tensor":
        return dtype(norm(direction)) / (dtype(norm(low)) + dtype(1e-8))
    c = channel_norms(direction, axis) / (channel_norms(low, axis) + dtype(1e-8))
    return c[:, None] if axis == 1 else c[None, :]


def refreshes(step, group):
    """Does step ``step`` (from 1) draw a new projector? The first, then every
    ``update_proj_gap``-th counted from ``refresh_offset`` (1: the authors', 0:
    pytorch_optimizer's)."""
    return step == 1 or (step - group["refresh_offset"]) % group["update_proj_gap"] == 0


def random_projector(seed, index, step, shape, rank, dtype):
    """The counter stream's projector of parameter ``index`` at ``step``: ``shape``'s
    standard normals keyed by ``(seed, index, step)``, over :math:`\\sqrt r` in float64,
    rounded to ``dtype``."""
    z = standard_normal(seed, index, step, shape[0] * shape[1])
    return (z / math.sqrt(rank)).reshape(shape).astype(dtype)


class APOLLO(Optimizer):
    """APOLLO (see the module docstring for the math, the variants and the projection hook).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.999)
        Decay rates (β1, β2) of the first and second moments.
    eps : float, default: 1e-06
        Term ε added to sqrt(V).
    weight_decay : float, default: 0.0
        Decoupled weight decay λ.
    correct_bias : bool, default: True
        Bias-correct the step.
    variant : str, default: 'apollo'
        ``"apollo"``, ``"apollo_mini"`` (alias ``"mini"``) or ``"pytorch_optimizer"``: it sets
        every switch whose default is "the variant's"; a switch given explicitly overrides it.
    rank : int, default: the variant's
        Rank r of the random projection (256; APOLLO-Mini: 1).
    update_proj_gap : int, default: 200
        Steps between draws of a new projector.
    scale : float, default: the variant's
        Scale s; the update is multiplied by sqrt(s) (1; APOLLO-Mini: 128).
    scale_type : str, default: the variant's
        ``"channel"`` (one factor per row or column) or ``"tensor"`` (one factor).
    scaled_gradient : str, default: the variant's
        ``"full"`` (the authors': the factors scale G) or ``"projected_back"``
        (pytorch_optimizer: they scale the low-rank R, projected back and times s).
    refresh_offset : int, default: the variant's
        Refresh at t = 1 and t ≡ offset (mod update_proj_gap): 1 (the authors') or 0.
    decay_lr : str, default: the variant's
        ``"lr"`` (W - γλW, the authors') or ``"step_size"`` (W(1 - λγ_t), pytorch_optimizer).
    scale_front : bool, default: False
        Multiply by sqrt(s) before the norm-growth limiter (the authors' switch).
    norm_growth_limiter : bool, default: True
        Apply Fira's norm-growth limiter (the authors' ``disable_nl=False``).
    seed : int, default: 0
        Key of the counter stream the projectors are drawn from.
    """

    sparse_kind = "dense-only"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0,
                 correct_bias=True, *, variant="apollo", rank=VARIANT_DEFAULT,
                 update_proj_gap=200, scale=VARIANT_DEFAULT, scale_type=VARIANT_DEFAULT,
                 scaled_gradient=VARIANT_DEFAULT, refresh_offset=VARIANT_DEFAULT,
                 decay_lr=VARIANT_DEFAULT, scale_front=False, norm_growth_limiter=True,
                 seed=0):
        self.variant, switches = resolve_variant(
            VARIANTS, ALIASES, variant,
            dict(rank=rank, scale=scale, scale_type=scale_type, scaled_gradient=scaled_gradient,
                 refresh_offset=refresh_offset, decay_lr=decay_lr))
        self._projection = None
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      correct_bias=correct_bias,
                                      update_proj_gap=update_proj_gap, scale_front=scale_front,
                                      norm_growth_limiter=norm_growth_limiter, seed=seed,
                                      **switches))

    def _check_group(self, group):
        check_no_variant(group)
        check_nonnegative(group, "lr", "eps", "weight_decay", "scale")
        check_betas(group["betas"])
        check_flag(group, "correct_bias", "scale_front", "norm_growth_limiter")
        check_choice(group, "scale_type", ("channel", "tensor"))
        check_choice(group, "scaled_gradient", ("full", "projected_back"))
        check_choice(group, "decay_lr", ("lr", "step_size"))
        check_seed(group["seed"])
        for name, low in (("rank", 1), ("update_proj_gap", 1), ("refresh_offset", 0)):
            value = group[name]
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")

    def _state_names(self, group):
        return ("exp_avg", "exp_avg_sq", "projector", "scaled_grad")

    def _state_shapes(self, param, group):
        shapes = projection_shapes(param.shape, group["rank"], clip_rank=False)
        if shapes is None:
            return {"exp_avg": param.shape, "exp_avg_sq": param.shape, "projector": (0, 0),
                    "scaled_grad": (0,)}
        projector, low = shapes
        return {"exp_avg": low, "exp_avg_sq": low, "projector": projector, "scaled_grad": (1,)}

    def step(self, grads=None, closure=None, *, projection=None):
        """As :meth:`Optimizer.step`; ``projection`` gives the projectors of this step (one
        array or None per parameter; see the module docstring), checked with everything else
        before anything changes."""
        self._projection = projection
        try:
            return super().step(grads, closure)
        finally:
            self._projection = None

    def _prepare(self, grads):
        prepared = super()._prepare(grads)
        given = self._projection
        if given is None:
            return prepared
        if isinstance(given, np.ndarray) or not hasattr(given, "__iter__") \
                or len(given := list(given)) != len(self.params):
            raise ValueError(f"projection must be a list with one array (or None) per "
                             f"parameter ({len(self.params)})")
        self._projection = given
        stepping = {index: group for group, index, _, _ in prepared}
        for index, array in enumerate(given):
            if array is None:
                continue
            param = self.params[index]
            group = stepping.get(index)
            shapes = None if group is None else projection_shapes(param.shape, group["rank"],
                                                                   clip_rank=False)
            state = self.state.get(index)
            step = 1 if state is None else state["step"] + 1
            if shapes is None or not refreshes(step, group):
                raise ValueError(f"projection[{index}] is given but parameter {index} draws no "
                                 "projector at this step (not a 2-D parameter stepped now, or "
                                 "not a refresh step)")
            if (not isinstance(array, np.ndarray) or array.shape != shapes[0]
                    or array.dtype != param.dtype):
                raise ValueError(f"projection[{index}] must be an array of shape {shapes[0]} "
                                 f"and dtype {param.dtype}")
        return prepared

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        step = state["step"]
        beta1, beta2 = group["betas"]
        step_size = group["lr"]
        if group["correct_bias"]:
            step_size = step_size * math.sqrt(1.0 - beta2 ** step) / (1.0 - beta1 ** step)
        by_lr = group["decay_lr"] == "lr"
        hyper = typed_record(APOLLOHyper, param, beta1=beta1, one_minus_beta1=1.0 - beta1,
                             beta2=beta2, one_minus_beta2=1.0 - beta2, eps=group["eps"],
                             neg_step_size=-step_size,
                             neg_decay=-group["lr"] * group["weight_decay"] if by_lr else 0.0,
                             decay_factor=1.0 if by_lr else
                             1.0 - group["weight_decay"] * step_size)
        moments = (state["exp_avg"].reshape(-1), state["exp_avg_sq"].reshape(-1))
        shapes = projection_shapes(shape, group["rank"], clip_rank=False)
        if shapes is None:   # plain AdamW
            direction = np.zeros_like(param)
            _apollo_moments(direction, grad, moments, hyper)
            _apollo_param(param, direction, (), hyper)
            return
        g = grad.reshape(shape)
        right = projects_right(shape)
        projector = state["projector"]
        if refreshes(step, group):
            given = None if self._projection is None else self._projection[index]
            if given is None:
                given = random_projector(group["seed"], index, step, projector.shape,
                                         group["rank"], param.dtype)
            projector[...] = given
        low = project(g, projector, right)
        direction = np.zeros_like(low)
        _apollo_moments(direction.reshape(-1), low.reshape(-1), moments, hyper)
        root_scale = param.dtype.type(math.sqrt(group["scale"]))
        if group["scaled_gradient"] == "full":
            axis = 0 if shape[0] < shape[1] else 1   # the authors' norm_dim, of G's shape
            scaled = g * scaling_factors(direction, low, axis, group["scale_type"])
        else:   # pytorch_optimizer: of the low-rank shape
            axis = 0 if low.shape[0] < low.shape[1] else 1
            scaled = low * scaling_factors(direction, low, axis, group["scale_type"])
        if group["scale_front"]:
            scaled *= root_scale
        if group["norm_growth_limiter"]:
            size = norm(scaled)
            if step > 1:
                limiter = max(size / (float(state["scaled_grad"][0]) + 1e-8), 1.01) / 1.01
                scaled /= param.dtype.type(limiter)
                size = size / limiter
            state["scaled_grad"][0] = size
        if not group["scale_front"]:
            scaled *= root_scale
        if group["scaled_gradient"] == "projected_back":
            scaled = project_back(scaled, projector, right)
            scaled *= param.dtype.type(group["scale"])
        _apollo_param(param, np.ascontiguousarray(scaled).reshape(-1), (), hyper)
