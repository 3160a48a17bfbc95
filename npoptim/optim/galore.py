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
        &&\text{if } m \ge n\\
    P &= U_{:, :r} \;(m \times r), \quad R = P^\top G \;(r \times n)   &&\text{else}\\
    M &\leftarrow \beta_1 M + (1-\beta_1) R, \quad
        V \leftarrow \beta_2 V + (1-\beta_2) R^2\\
    N &= M / (\sqrt{V} + \epsilon), \quad
        D = s \cdot (N P \text{ if } m \ge n \text{ else } P N)\\
    W &\leftarrow W - \gamma\frac{\sqrt{1-\beta_2^t}}{1-\beta_1^t} D, \quad
        W \leftarrow W - \gamma\lambda W

The smaller side is projected; :math:`M, V` are the low-rank Adam moments.

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
cast the projector back; npoptim computes it in the parameter's dtype, so a float64 GaLore is
float64 throughout. Singular vectors are defined up to sign. The step does not depend on the
signs while a projector is in use (Adam's direction is odd in the gradient), but at a refresh
the moments carried over are read in the new basis, so a sign that another LAPACK build picks
differently changes the trajectory: npoptim fixes the signs (each singular vector's entry of
largest magnitude is positive, as scikit-learn's ``svd_flip``), so its results do not depend
on the LAPACK build; the authors' depend on theirs. For matrices of at most
:data:`~npoptim.kernels.decompositions.JACOBI_MAX_SIDE` rows and columns the singular vectors
come from npoptim's one-sided Jacobi SVD
(:func:`~npoptim.kernels.decompositions.jacobi_singular_vectors`: cyclic sweeps of plane
rotations in a fixed order, every operation a correctly rounded ``+ - * / sqrt``), so the
projector, like the rest of the step, is the same bits on every CPU (LAPACK's are not:
OpenBLAS picks its kernels by CPU, and the trajectories were 3.5e-16 of the scale apart in
float64 between its Haswell and SkylakeX kernels, measured); larger matrices take LAPACK ``gesdd``
(``numpy.linalg.svd``, faster there), whose bits depend on the CPU and the LAPACK build.
The cross-checks: against galore-torch with its SVD
done in float64 and signed the same way, to 1e-12 of the parameters' scale over several
refreshes; against galore-torch as published (float32 SVD, its build's signs) with one
refresh, at 1e-5 (a float32 SVD moves the projector by ~1e-7 of its scale, carried by every
later step).
Dense gradients only. A refresh step computes the SVDs of all its matrices before it changes
any parameter or state: a gradient the SVD cannot take (a NaN or infinite value, in float32
with ``svd_dtype="float32"``) raises ``FloatingPointError`` with nothing changed (with
``nonfinite="skip"`` a non-finite gradient skips the step, as in every optimizer).

Convention switches (optax's ``optax.contrib.galore`` 0.2.8, ``optax/contrib/_galore.py``,
is the ``optax`` flavor: :mod:`npoptim.flavors`), each a change of what the one rule reads,
not of the rule; the defaults are the form above (``torch_conventions``):

* ``projected_side="larger"`` (optax; default ``"smaller"``, the authors'): the projection
  reduces the *larger* side to rank :math:`r`: :math:`P = U_{:, :r}` and :math:`R = P^\top G`
  (:math:`r \times n`) for :math:`m \ge n` (square matrices included), :math:`P =
  V_{:, :r}^\top` and :math:`R = G P^\top` (:math:`m \times r`) for :math:`m < n`; the
  formulas above with the two cases swapped.
* ``svd_dtype="float32"`` (optax, and the authors' code as published; default
  ``"param"``): the SVD of the gradient cast to float32, the projector cast back.
* ``svd_signs="lapack"`` (optax; default ``"fixed"``): the singular vectors with the signs
  LAPACK ``gesdd`` returns, from ``scipy.linalg.svd(..., lapack_driver="gesdd")``. That is the
  routine optax's ``jnp.linalg.svd`` runs on CPU: jaxlib's LAPACK kernels call the LAPACK of
  ``scipy.linalg.cython_lapack``, so on the same float32 input scipy's and jax's singular
  vectors are the same, bit for bit (measured: 550 random float32 matrices of 11 shapes,
  2x7 to 30x20; scipy 1.17.1 on its OpenBLAS 0.3.30, jax 0.10.2). ``numpy.linalg.svd``
  links numpy's own LAPACK (its OpenBLAS 0.3.31, 64-bit integers), not that routine: it
  differs by ~1e-6 and flips the sign of some singular vector in 118 of those 550 matrices.
  So the optax form, like optax, depends on the LAPACK build (scipy's here; a jax on another
  LAPACK, a GPU's solver, may pick other signs, which matter from the first refresh that
  carries moments over).
* ``eps_mode="bias_corrected"`` (optax's ``scale_by_adam``; default ``"eps_hat"``, the
  authors'): :math:`N = \hat M/(\sqrt{\hat V} + \epsilon)` with :math:`\hat M =
  M/(1-\beta_1^t)`, :math:`\hat V = V/(1-\beta_2^t)`, and the step :math:`W \leftarrow W -
  \gamma D` (``correct_bias=False``: :math:`\hat M = M`, :math:`\hat V = V`).
* ``decay_after_update=False`` (optax: ``add_decayed_weights`` on the update, then the lr;
  default True, the authors'): the decoupled decay reads the parameter before the step,
  :math:`W \leftarrow W - \gamma(D + \lambda W)`, computed as :math:`W(1-\gamma\lambda) -
  \gamma D` (torch's AdamW order).

The optax flavor sets the five, with optax's defaults: ``eps`` 1e-8, ``scale`` 1, ``betas``
(0.9, 0.999) (those of ``scale_by_adam()``, optax's default ``base_optimizer``, whose options
``contrib.galore`` does not take). Non-2-D parameters take the same Adam in both forms,
without ``scale``, as optax runs its ``base_optimizer`` on them in full.
"""
import math
import numbers
from typing import NamedTuple

import numpy as np
import scipy.linalg

from npoptim.kernels.decompositions import (JACOBI_MAX_SIDE, fixed_signs,
                                            jacobi_singular_vectors)
from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import fma
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import (check_betas, check_choice, check_flag, check_nonnegative,
                                   flavored)
from npoptim.optim.projection import project, project_back, projection_shapes, projects_right


class GaLoreHyper(NamedTuple):
    """One step's hyperparameters of the GaLore rules (built by ``GaLoreAdamW._update``)."""

    beta1: float
    one_minus_beta1: float
    beta2: float
    one_minus_beta2: float
    eps: float
    m_divisor: float       # eps_mode="bias_corrected": 1-β1^t (optax's m_hat), else 1
    v_divisor: float       # eps_mode="bias_corrected": 1-β2^t, else 1
    neg_step_size: float   # -γ √(1-β2^t)/(1-β1^t) (-γ without bias correction, or with
                           # eps_mode="bias_corrected")
    decay_factor: float    # decay_after_update=False: 1 - γ λ (before the step), else 1
    neg_decay: float       # decay_after_update=True: -γ λ (after the step), else 0


@kernel
def galore_moments_rule(n, r, s, h):
    """One element of the low-rank Adam direction: ``r`` the projected gradient,
    ``s = (exp_avg, exp_avg_sq)``; returns :math:`M/(\\sqrt{V}+\\epsilon)` (``n`` unread),
    with ``eps_mode="bias_corrected"`` optax's :math:`\\hat M/(\\sqrt{\\hat V}+\\epsilon)`
    (the divisors are 1 otherwise: the same bits). torch's ``mul_(b1).add_(r, alpha=1-b1)``
    and ``mul_(b2).addcmul_(r, r, value=1-b2)``."""
    m, v = s
    m = fma(h.one_minus_beta1, r, m * h.beta1)
    v = fma(h.one_minus_beta2 * r, r, v * h.beta2)
    return (m / h.m_divisor) / (np.sqrt(v / h.v_divisor) + h.eps), (m, v)


@kernel
def galore_param_rule(p, d, s, h):
    """One element of the parameter update from the full-space direction ``d`` (no state):
    torch's ``p.add_(d, alpha=-step_size)``, then ``p.add_(p, alpha=-lr*wd)`` (with
    ``decay_after_update=False`` the decay ``p * (1 - lr*wd)`` comes first instead; the
    unused one multiplies by 1 or adds 0)."""
    p = fma(h.neg_step_size, d, p * h.decay_factor)
    return fma(h.neg_decay, p, p), s


@kernel
def _galore_moments(direction, low_rank_grad, states, hyper):
    apply_dense(galore_moments_rule, direction, low_rank_grad, states, GaLoreHyper(*hyper))


@kernel
def _galore_param(param, direction, states, hyper):
    apply_dense(galore_param_rule, param, direction, states, GaLoreHyper(*hyper))


def svd_input(g, svd_dtype="param"):
    """The matrix whose SVD gives the projector: ``g``, or ``g`` cast to float32 (a value
    beyond float32's range becomes infinite, which the step refuses)."""
    with np.errstate(over="ignore"):
        return g.astype(np.float32) if svd_dtype == "float32" else g


def orthogonal_projector(g, shape, right, svd_dtype="param", svd_signs="fixed"):
    """The projector of the gradient matrix ``g``: its first right singular vectors as rows
    (``right``) or left ones as columns, from the SVD in ``g``'s dtype or float32
    (``svd_dtype``), each signed so that its entry of largest magnitude (the first such) is
    positive, or as LAPACK's gesdd returns it through scipy (``svd_signs="lapack"``: jax's
    signs, see the module docstring)."""
    a = svd_input(g, svd_dtype)
    count = shape[0] if right else shape[1]
    if svd_signs == "lapack":
        u, _, vh = scipy.linalg.svd(a, full_matrices=False, lapack_driver="gesdd",
                                    check_finite=False)
        vectors = vh[:count, :].T if right else u[:, :count]
    elif max(a.shape) <= JACOBI_MAX_SIDE:
        vectors = jacobi_singular_vectors(a if right else a.T, count)
    else:
        u, _, vh = np.linalg.svd(a, full_matrices=False)
        vectors = vh[:count, :].T if right else u[:, :count]
    if svd_signs == "fixed":
        vectors = fixed_signs(vectors)
    vectors = vectors.astype(g.dtype, copy=False)
    return vectors.T if right else vectors


def refreshes(state, group):
    """Does this step refresh the projector (the first and every ``update_proj_gap``-th)?"""
    return state["step"] % group["update_proj_gap"] == 0


class GaLoreAdamW(Optimizer):
    """GaLore AdamW (see the module docstring); the convention switches are optax's form
    (``flavor="optax"``).

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
    rank : int, default: 128
        Rank r of the projection.
    update_proj_gap : int, default: 200
        Steps between refreshes of the projector.
    scale : float, default: 0.25
        Scale s of the projected-back update.
    projected_side : str, default: 'smaller'
        ``"smaller"`` (the authors') or ``"larger"`` (optax) side projected to rank r.
    svd_dtype : str, default: 'param'
        dtype of the SVD: ``"param"`` or ``"float32"`` (optax, the authors).
    svd_signs : str, default: 'fixed'
        ``"fixed"`` (largest entry positive) or ``"lapack"`` (gesdd's signs, optax).
    eps_mode : str, default: 'eps_hat'
        ``"eps_hat"`` (the authors') or ``"bias_corrected"`` (optax).
    decay_after_update : bool, default: True
        Decay the updated parameter (the authors'); False: before the step (optax).
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"
    #: The convention switches and their default values, the authors' form (there is no
    #: torch.optim GaLore; see :mod:`npoptim.flavors`).
    torch_conventions = {"projected_side": "smaller", "svd_dtype": "param",
                         "svd_signs": "fixed", "eps_mode": "eps_hat",
                         "decay_after_update": True}
    #: A switch that matters only when this option is on (else left out of golden files).
    conventions_apply = {"decay_after_update": "weight_decay"}

    @flavored
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0,
                 correct_bias=True, *, rank=128, update_proj_gap=200, scale=0.25,
                 projected_side="smaller", svd_dtype="param", svd_signs="fixed",
                 eps_mode="eps_hat", decay_after_update=True):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      correct_bias=correct_bias, rank=rank,
                                      update_proj_gap=update_proj_gap, scale=scale,
                                      projected_side=projected_side, svd_dtype=svd_dtype,
                                      svd_signs=svd_signs, eps_mode=eps_mode,
                                      decay_after_update=decay_after_update))

    def _check_group(self, group):
        check_nonnegative(group, "lr", "eps", "weight_decay", "scale")
        check_betas(group["betas"])
        check_flag(group, "correct_bias", "decay_after_update")
        check_choice(group, "projected_side", ("smaller", "larger"))
        check_choice(group, "svd_dtype", ("param", "float32"))
        check_choice(group, "svd_signs", ("fixed", "lapack"))
        check_choice(group, "eps_mode", ("eps_hat", "bias_corrected"))
        for name in ("rank", "update_proj_gap"):
            value = group[name]
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")

    def _state_names(self, group):
        return ("exp_avg", "exp_avg_sq", "ortho_matrix")

    def _state_shapes(self, param, group):
        shapes = projection_shapes(param.shape, group["rank"], group["projected_side"])
        if shapes is None:
            return {"exp_avg": param.shape, "exp_avg_sq": param.shape, "ortho_matrix": (0, 0)}
        projector, low = shapes
        return {"exp_avg": low, "exp_avg_sq": low, "ortho_matrix": projector}

    def _prepare(self, grads):
        """The base checks, then the new projector of every matrix whose projector this step
        refreshes, all before anything changes (an SVD that fails, or would, raises with
        every parameter and state as they were; :meth:`_update` installs them)."""
        prepared = super()._prepare(grads)
        self._projectors = {}
        for group, index, param, grad in prepared:
            shapes = projection_shapes(param.shape, group["rank"], group["projected_side"])
            state = self.state.get(index)
            if shapes is None or (state is not None and not refreshes(state, group)):
                continue
            g = grad.reshape(param.shape)
            if not np.isfinite(svd_input(g, group["svd_dtype"])).all():
                if self.nonfinite != "propagate" and not np.isfinite(grad).all():
                    continue   # the base step raises or skips the whole step (nonfinite=)
                raise FloatingPointError(
                    f"grads[{index}] has a NaN or infinite value"
                    + (" once cast to float32 (svd_dtype='float32')"
                       if group["svd_dtype"] == "float32" else "")
                    + " and this step refreshes its projector from the gradient's SVD "
                    "(every update_proj_gap-th step): nothing was changed (nonfinite='skip' "
                    "leaves such steps out)")
            self._projectors[index] = orthogonal_projector(
                g, shapes[0], projects_right(param.shape, group["projected_side"]),
                group["svd_dtype"], group["svd_signs"])
        return prepared

    def _update(self, param, grad, state, group, index, shape):
        refresh = refreshes(state, group)
        state["step"] += 1
        step = state["step"]
        beta1, beta2 = group["betas"]
        step_size, m_divisor, v_divisor = group["lr"], 1.0, 1.0
        if group["correct_bias"] and group["eps_mode"] == "bias_corrected":   # optax's
            m_divisor, v_divisor = 1.0 - beta1 ** step, 1.0 - beta2 ** step
        elif group["correct_bias"]:
            step_size = step_size * math.sqrt(1.0 - beta2 ** step) / (1.0 - beta1 ** step)
        decay = group["lr"] * group["weight_decay"]
        after = group["decay_after_update"]
        hyper = typed_record(GaLoreHyper, param, beta1=beta1, one_minus_beta1=1.0 - beta1,
                             beta2=beta2, one_minus_beta2=1.0 - beta2, eps=group["eps"],
                             m_divisor=m_divisor, v_divisor=v_divisor,
                             neg_step_size=-step_size,
                             decay_factor=1.0 if after else 1.0 - decay,
                             neg_decay=-decay if after else 0.0)
        moments = (state["exp_avg"].reshape(-1), state["exp_avg_sq"].reshape(-1))
        if projection_shapes(shape, group["rank"]) is None:
            direction = np.zeros_like(param)
            _galore_moments(direction, grad, moments, hyper)
            _galore_param(param, direction, (), hyper)
            return
        g = grad.reshape(shape)
        right = projects_right(shape, group["projected_side"])
        projector = state["ortho_matrix"]
        if refresh:
            projector[...] = self._projectors.pop(index)
        low = project(g, projector, right)
        direction = np.zeros_like(low)
        _galore_moments(direction.reshape(-1), low.reshape(-1), moments, hyper)
        full = project_back(direction, projector, right)
        full *= param.dtype.type(group["scale"])
        _galore_param(param, full.reshape(-1), (), hyper)
