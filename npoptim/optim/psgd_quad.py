r"""PSGD-QUAD (Xi-Lin Li's preconditioned stochastic gradient descent, arXiv 1512.04202, with the
Kronecker-factored preconditioner fitted by a quadratic form, "QUAD"; Evan Walters'
quad-torch 0.4.5 ``QUAD``): momentum preconditioned by :math:`P = Q_1^2 \otimes Q_2^2`, one
symmetric factor per side of the parameter viewed as a matrix (or one diagonal factor for a
vector), each dense (:math:`d_i \times d_i`) or diagonal (a vector).

:math:`X \times_i M` applies :math:`M` along side :math:`i` (a diagonal factor :math:`q`
multiplies elementwise); :math:`X_{(i)}` is the unfolding (:math:`d_i` rows); :math:`N` is
the size of the parameter. Step :math:`t` (each parameter's own count, 1-based), gradient
:math:`G_t`, momentum :math:`\beta` (``momentum``), learning rate :math:`\gamma`,
preconditioner step :math:`\eta` (``preconditioner_lr``), noise scale :math:`\sigma`
(``noise_scale``) and weight decay :math:`\lambda`. At the first step each factor starts as
:math:`s I` (or :math:`s \mathbf 1`) and each bound :math:`L_i` as 0, with
:math:`s = (\overline{G_1^2} + \sigma^2)^{-1/8}` for a matrix and :math:`^{-1/4}` for a vector
(so :math:`P` starts at :math:`(\overline{G_1^2})^{-1/2}`, as Adam's first step):

.. math::

    m_1 &= G_1,\quad m_t = m_{t-1} + (1-\beta)(G_t - m_{t-1})              &&\quad (1)\\
    \eta_t &= \max\!\big(\eta / \sqrt{1 + t/10000},\ 0.3\big)
        \ \text{(in float32)}                                                &&\quad (2)\\
    H &= m_t + \sigma V,\quad V \sim N(0, 1)                                  &&\quad (3)\\
    A &= H \times_1 Q_1^2 \times_2 Q_2^2,\quad c_i = N / d_i                  &&\\
    T_i &= A_{(i)} A_{(i)}^\top\ \text{(dense)}                              &&\quad (4)\\
    t_i &= \textstyle\sum_{\text{other side}} A^2\ \text{(diagonal)}          &&\\
    \ell_i &= \mathrm{lb}(T_i) + c_i\ \text{or}\ \max t_i + c_i                &&\\
    L_i &\leftarrow \max(0.95 L_i + 0.05\,\ell_i,\ \ell_i)                    &&\quad (5)\\
    R &= Q_i - \tfrac{\eta_t}{2L_i}(T_i Q_i - c_i Q_i)                         &&\\
    R &\leftarrow R - \tfrac{\eta_t}{2L_i}(R\,T_i - c_i R)                     &&\\
    Q_i &\leftarrow (R + R^\top)/2                                             &&\quad (6)\\
    q_i &\leftarrow q_i \odot \big(1 - \tfrac{\eta_t}{2L_i}(t_i - c_i)\big)^2  &&\quad (7)\\
    U &= m_t \times_1 Q_1^2 \times_2 Q_2^2\ \text{(the new factors)}          &&\\
    U &\leftarrow U \cdot 1.05 / \max(\mathrm{RMS}(U),\ 1.05)                  &&\quad (8)\\
    \theta &\leftarrow \theta\,(1 - \gamma\lambda) - \gamma_u U                &&\quad (9)\\
    \gamma_u &= \gamma/5\ (\texttt{lr\_style="adam"})\ \text{or}\ \gamma       &&

(6) is a dense factor's step, (7) a diagonal one's; each side's :math:`T_i` comes from the
same :math:`A` (the factors of the step before). :math:`\mathrm{lb}` is the lower bound of
the spectral norm that Kron uses: :math:`S = T / \max \mathrm{diag}\, T`, :math:`x` the row
of :math:`S` of largest norm, :math:`\lVert S\,(Sx)/\lVert Sx\rVert\rVert \max\mathrm{diag}\,T`
(:func:`npoptim.optim.psgd.lower_bound` with ``scale="diagonal"``). The fit drives
:math:`T_i` towards :math:`c_i I`: the whitened momentum :math:`A` of RMS 1. **Balancing**:
at every 100th step of a parameter with two sides, before (3), both factors are rescaled to
the geometric mean :math:`\sqrt{n_1 n_2}` of their max-abs norms :math:`n_i` (:math:`P`
unchanged). **Sides**: a tensor of > 2 sides is viewed as the matrix of the split of its
sides whose products are the closest to square, one whose size is its largest side as a
vector (:func:`npoptim.optim.psgd.squarest_sides`); a matrix's side is diagonal when larger
than ``max_size_dense`` or when its square is larger than ``max_skew_dense`` times
:math:`N` (by default the longer side of a non-square matrix;
:func:`npoptim.optim.psgd.quad_diagonal_sides`).

**Where QUAD differs from Kron** (:mod:`npoptim.optim.kron`, the same family): symmetric
factors and :math:`P = Q^2` (Kron: triangular, :math:`Q^\top Q`); no probe solve: the fit
compares :math:`A A^\top` with the constant :math:`c_i I` where Kron compares it with
:math:`B B^\top` of a probe solved against the factors; each step is normalized by a running
maximum :math:`L_i` of the bound (Kron: the bound itself), taken on both sides of a dense
factor, (6); a tiny noise :math:`\sigma V` (1e-9) instead of the probe; the preconditioner
fitted at every step (no probability schedule), with :math:`\eta` decaying to a floor of 0.3
(any ``preconditioner_lr`` below 0.3 acts as 0.3); balancing every 100 steps (Kron: a random
draw at an update); the factors' start from the first gradient (Kron: ``precond_init_scale``);
the momentum starts at the first gradient, not debiased (Kron: zero start, :math:`1-\beta^t`);
at most two factors (Kron: one per side without ``merge_dims``); the clip at RMS 1.05 with no
eps (Kron: 1.1 and :math:`\epsilon_c`); weight decay multiplicative and on every parameter,
vectors too (Kron: :math:`\lambda\theta` added to :math:`U` of matrices only); ``lr_style``.

Where the implementations differ: quad-torch 0.4.5 ``quad_torch/quad.py`` (``QUAD``) is the
one implementation; npoptim follows it, with these notes:

* its ``merge_dims`` calls ``math.max``, which Python's ``math`` does not have: 0.4.5 raises
  ``AttributeError`` at the first step of any parameter with two or more sides (vectors
  work, and matrices with two diagonal factors once past this). npoptim applies the rule
  the code spells out (Python's ``max``); the cross-check gives quad-torch's module that
  ``max``.
* its ``lb`` selects the row of largest norm with a 0-D index, ``A.index_select(0, j)``,
  which torch 2.13 returns as a 1 x n matrix, and ``A.mv`` of it raises (eagerly and under
  ``torch.compile`` alike): 0.4.5 cannot step a parameter with a dense factor either. npoptim
  takes the row itself, as the code means; the cross-check gives torch's ``index_select``
  a 0-D index's row.
* its ``dtype`` knob computes the states in that dtype; npoptim computes them in the
  parameter's (the cross-check runs float64 parameters, which quad-torch then keeps in
  float64 with ``dtype=None`` or ``torch.float64``). :math:`\eta_t` of (2) is float32 in both,
  as quad-torch's int32 step count makes it.
* it draws :math:`V` with ``torch.randn_like`` at every step of every parameter; here
  :math:`V` of parameter ``index`` at its step :math:`t` is
  :func:`npoptim.kernels.counter_stream.standard_normal` keyed ``(seed, index, t)``, or the
  array given to ``step(grads, noise=[...])`` (one per parameter, None for the stream): the
  cross-check feeds torch's draws in.
* its bound of an all-zero :math:`T` (a zero momentum and :math:`\sigma = 0`) is 0/0, NaN;
  here 0, so :math:`\ell = c_i`.
* :math:`s` of the start is :math:`x^{-1/8}` (:math:`x^{-1/4}`) as torch's ``pow``; here
  ``1 / sqrt(sqrt(sqrt(x)))`` in float64 (correctly rounded roots: the same bits on every
  CPU; within 2 float64 ulps of ``pow``), rounded to the parameter's dtype.

Measured over tests/test_psgd_quad.py's 104 steps in float64 (a vector, a dense-dense square
matrix, a diagonal-dense matrix, a 3-D tensor merged to a matrix, a matrix with a side past
``max_size_dense``; weight decay, a schedule, both ``lr_style``; a balancing at step 100),
quad-torch's noise fed in (and two of its bugs worked around, see the test): worst error
7.2e-16 of each tensor's scale (the factors 6.3e-16); the test allows 1e-12.

Written in plain NumPy in the parameter's dtype; products by
:func:`npoptim.kernels.reduction.matmul_of` and sums in index order
(:func:`npoptim.optim.psgd.ordered_sum`): no BLAS, the same bits on every CPU. Dense gradients
only; a 0-D parameter is handled as one element of a vector.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.reduction import matmul_of
from npoptim.kernels.scalar import lerp_arrays
from npoptim.optim.noise import check_noise, check_seed
from npoptim.optim.optimizer import Optimizer
from npoptim.optim.options import check_nonnegative
from npoptim.optim.psgd import (along, balance_factors, gram, lower_bound, ordered_sum,
                                probe_for, quad_diagonal_sides, scaled_along, squarest_sides,
                                sum_of_squares_along)

LR_STYLES = ("adam", None)
#: Balance the factors at every this many steps of a parameter (quad-torch's ``% 100``).
BALANCE_EVERY = 100
#: The floor of the preconditioner step (2), and its decay's scale in steps.
PRECOND_LR_FLOOR = 0.3
PRECOND_LR_STEPS = 10000.0
#: The clip of (8): RMS(U) at most this.
CLIP_RMS = 1.05
#: (9) with ``lr_style="adam"``: γ/5, quad-torch's match of Adam's update RMS (0.2).
ADAM_DIVISOR = 5.0


class QuadHyper(NamedTuple):
    """The hyperparameters of one QUAD update, as :func:`quad_update` reads them."""
    momentum: float        # β
    lr: float              # γ (the decay's)
    update_lr: float       # γ_u: γ/5 (lr_style "adam") or γ
    weight_decay: float    # λ
    precond_lr: float      # η_t of (2), a float32 value
    noise_scale: float     # σ
    balance: bool          # balance the two factors first (every 100th step)


def float32_precond_lr(lr, step):
    """(2) as quad-torch's ``get_precond_lr`` computes it from its int32 step: float32
    ``max(lr * (1 / sqrt(1 + step / 10000)), 0.3)`` (each operation rounded to float32;
    ``step`` may be an array)."""
    f32 = np.float32
    ratio = np.asarray(step).astype(f32) / f32(PRECOND_LR_STEPS)
    root = f32(1) / np.sqrt(f32(1) + ratio)
    return np.maximum(f32(lr) * root, f32(PRECOND_LR_FLOOR))


def start_scale(grad, noise_scale, sides):
    """The factors' start :math:`s = (\\overline{G^2} + \\sigma^2)^{-1/8}` (``-1/4`` for a
    vector), the mean in the gradient's dtype and the root in float64 (see the module
    docstring), rounded to the gradient's dtype."""
    dtype = grad.dtype.type
    flat = np.ascontiguousarray(grad).reshape(-1)
    mean = dtype(ordered_sum(flat * flat)) / dtype(flat.size)
    x = float(mean + dtype(noise_scale * noise_scale))
    root = np.sqrt(np.sqrt(x))
    if len(sides) > 1:
        root = np.sqrt(root)
    return dtype(1.0 / root)


def with_squares(x, factors):
    """:math:`X \\times_1 Q_1^2 \\times_2 Q_2^2`: a dense factor applied twice, a diagonal one
    as ``x * (q * q)``."""
    for axis, q in enumerate(factors):
        if q.ndim == 2:
            x = along(along(x, axis, q), axis, q)
        else:
            x = scaled_along(x, axis, q * q)
    return x


def _bound_update(bound, ell, dtype):
    """(5): ``L <- max(0.95 L + 0.05 ell, ell)`` in place (NaN kept, as torch.maximum)."""
    bound[...] = np.maximum(dtype(0.95) * bound + dtype(0.05) * ell, ell)


def fit_factors(factors, bounds, a, hyper):
    """(4)-(7): one fit of ``factors`` and their ``bounds`` (in place) from :math:`A`."""
    dtype = a.dtype.type
    for axis, (q, bound) in enumerate(zip(factors, bounds)):
        c = dtype(a.size / a.shape[axis])
        if q.ndim < 2:
            t = a * a if a.ndim == 1 else sum_of_squares_along(a, axis)
            _bound_update(bound, np.max(t) + c, dtype)
            step = dtype(hyper.precond_lr) / (dtype(2) * bound)
            gain = dtype(1) - step * (t - c)
            q *= gain * gain
            continue
        t = gram(a, axis)
        _bound_update(bound, dtype(lower_bound(t, "columns", scale="diagonal")) + c, dtype)
        step = dtype(hyper.precond_lr) / (dtype(2) * bound)
        r = q - step * (matmul_of(t, q) - c * q)
        r = r - step * (matmul_of(r, t) - r * c)
        q[...] = (r + r.T) / dtype(2)


def quad_update(param, grad, momentum, factors, bounds, noise, hyper):
    """One QUAD update of ``param`` (in place, viewed as its sides), the momentum, the
    factors and their bounds (in place); ``noise`` is V of (3)."""
    dtype = param.dtype.type
    momentum[...] = lerp_arrays(momentum, grad, 1 - hyper.momentum)
    if hyper.balance and len(factors) == 2:
        balance_factors(factors, "sqrt")
    a = with_squares(momentum + noise * dtype(hyper.noise_scale), factors)
    fit_factors(factors, bounds, a, hyper)
    u = with_squares(momentum, factors)
    flat = np.ascontiguousarray(u).reshape(-1)
    rms = np.sqrt(dtype(ordered_sum(flat * flat)) / dtype(flat.size))
    u = u * (dtype(CLIP_RMS) / max(rms, dtype(CLIP_RMS)))
    if hyper.weight_decay > 0:
        param *= dtype(1 - hyper.lr * hyper.weight_decay)
    param -= dtype(hyper.update_lr) * u


class PSGDQuad(Optimizer):
    """PSGD-QUAD, quad-torch 0.4.5's ``QUAD`` (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    lr_style : {"adam", None}, default: 'adam'
        "adam": the update steps by γ/5 (an RMS of about 0.2, as Adam's); None: by γ (PSGD's
        RMS 1).
    momentum : float, default: 0.95
        β of the momentum (1), which starts at the first gradient.
    weight_decay : float, default: 0.1
        λ: θ(1 - γλ) before the update, every parameter.
    max_size_dense : int, default: 8192
        A side larger than this has a diagonal factor.
    max_skew_dense : float, default: 1.0
        A side whose square is larger than this times the parameter's size has a diagonal
        factor (1: the longer side of a non-square matrix).
    preconditioner_lr : float, default: 0.7
        η of (2), decaying as 1/sqrt(1 + t/10000) to a floor of 0.3.
    noise_scale : float, default: 1e-09
        σ, the scale of the noise added to the momentum for the fit (3), and in the start.
    seed : int, default: 0
        The counter stream's key of the noise.
    """

    def __init__(self, params, lr=0.001, lr_style="adam", momentum=0.95, weight_decay=0.1,
                 max_size_dense=8192, max_skew_dense=1.0, preconditioner_lr=0.7,
                 noise_scale=1e-9, *, seed=0):
        super().__init__(params, dict(
            lr=lr, lr_style=lr_style, momentum=momentum, weight_decay=weight_decay,
            max_size_dense=max_size_dense, max_skew_dense=max_skew_dense,
            preconditioner_lr=preconditioner_lr, noise_scale=noise_scale, seed=seed))
        self._noise = None

    def _check_group(self, group):
        check_nonnegative(group, "lr", "weight_decay", "preconditioner_lr", "noise_scale",
                          "max_skew_dense")
        beta = group["momentum"]
        if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not 0 <= beta < 1:
            raise ValueError(f"momentum must be in [0, 1), got {beta!r}")
        if group["lr_style"] not in LR_STYLES:
            raise ValueError(f"lr_style must be 'adam' or None, got {group['lr_style']!r}")
        size = group["max_size_dense"]
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
            raise ValueError(f"max_size_dense must be an integer >= 0, got {size!r}")
        check_seed(group["seed"])

    def _sides(self, shape, group):
        sides = squarest_sides(shape)
        return sides, quad_diagonal_sides(sides, group["max_size_dense"],
                                          group["max_skew_dense"])

    def _state_shapes(self, param, group):
        sides, diag = self._sides(param.shape, group)
        shapes = {"momentum_buffer": param.shape}
        for i, (side, d) in enumerate(zip(sides, diag)):
            shapes[f"Q{i}"] = (side,) if d else (side, side)
            shapes[f"L{i}"] = ()
        return shapes

    def step(self, grads=None, closure=None, *, noise=None):
        """As :meth:`Optimizer.step`; ``noise`` (one array or None per parameter, of its shape
        and dtype) is this step's V of (3) instead of the counter stream's draw; checked before
        anything changes."""
        if noise is not None:
            noise = check_noise(self.params, noise, "noise")
        self._noise = noise
        try:
            return super().step(grads, closure)
        finally:
            self._noise = None

    def _prepare(self, grads):
        prepared = super()._prepare(grads)
        for _, index, param, _ in prepared:
            if param.size == 0:
                raise ValueError(f"params[{index}] has no elements")
        return prepared

    def _update(self, param, grad, state, group, index, shape):
        sides, diag = self._sides(shape, group)
        p = param.reshape(sides)
        g = grad.reshape(sides)
        momentum = state["momentum_buffer"].reshape(sides)
        factors = [state[f"Q{i}"] for i in range(len(sides))]
        bounds = [state[f"L{i}"] for i in range(len(sides))]
        if state["step"] == 0:     # quad-torch's start: the momentum and the factors from G
            momentum[...] = g
            scale = start_scale(g, group["noise_scale"], sides)
            for q, d in zip(factors, diag):
                q[...] = scale if d else np.eye(q.shape[0], dtype=param.dtype) * scale
                # (L starts at 0: the state's zeros)
        state["step"] += 1
        t = state["step"]
        noise = probe_for(None if self._noise is None else self._noise[index], group["seed"],
                          index, t, param.size, param.dtype, sides)
        lr = group["lr"]
        hyper = QuadHyper(
            momentum=group["momentum"], lr=lr,
            update_lr=lr / ADAM_DIVISOR if group["lr_style"] == "adam" else lr,
            weight_decay=group["weight_decay"],
            precond_lr=float(float32_precond_lr(group["preconditioner_lr"], t)),
            noise_scale=group["noise_scale"], balance=t % BALANCE_EVERY == 0)
        quad_update(p, g, momentum, factors, bounds, noise, hyper)
