r"""Adafactor (Shazeer & Stern, 2018): ``torch.optim.Adafactor`` 2.13 by default, with the
convention switches that make it optax's ``adafactor`` (T5's form) and Keras 3's
``keras.optimizers.Adafactor``.

Adafactor keeps the second moment of a matrix gradient *factored*: instead of a full
:math:`R\times C` estimate it stores the mean of :math:`g^2` over each row (``row_var``,
shape :math:`R\times 1`) and over each column (``col_var``, :math:`1\times C`), and rebuilds
the estimate as their outer product divided by the overall mean. A parameter of more than two
dimensions is factored over its last two, one factorization per leading index; vectors and
scalars keep a full ``variance``. There is no first moment (optax's ``momentum`` adds one).

**torch's form** (``torch/optim/_adafactor.py``, ``_single_tensor_adafactor``). At step
:math:`t`, with gradient :math:`G` (negated when ``maximize``), learning rate :math:`\gamma`,
decay exponent :math:`\tau` (``beta2_decay``), ``eps`` :math:`=(\epsilon_1, \epsilon_2)` and
clipping threshold :math:`d`:

.. math::

    \hat\beta_t &= 1 - t^{\tau}, \qquad \rho_t = \min(\gamma, 1/\sqrt t)\\
    \alpha_t &= \max(\epsilon_2, \mathrm{RMS}(\theta_{t-1}))\,\rho_t        &&\quad\text{(1)}\\
    \theta &\leftarrow \theta\,(1 - \gamma\lambda)                         &&\quad\text{(2)}\\
    R &\leftarrow \mathrm{lerp}(R,\ \mathrm{mean}_{\text{cols}}(G^2),\ 1-\hat\beta_t)\\
    C &\leftarrow \mathrm{lerp}(C,\ \mathrm{mean}_{\text{rows}}(G^2),\ 1-\hat\beta_t)\\
    \hat V &= \frac{R\,C}{\max(\mathrm{mean}_{\text{rows}}(R),\ \epsilon_1)}  &&\quad\text{(3)}\\
    U &= G / \sqrt{\max(\hat V, \epsilon_1^2)}\\
    \theta &\leftarrow \theta - \frac{\alpha_t}{\max(1,\ \mathrm{RMS}(U)/d)}\,U

1. The relative step size, from the parameter before decay.
2. Decoupled weight decay.
3. For vectors: :math:`\hat V = V \leftarrow \mathrm{lerp}(V, G^2, 1-\hat\beta_t)`.

:math:`\epsilon_1` defaults (``eps=(None, 1e-3)``) to the machine epsilon of the parameter's
dtype; as in torch's single-tensor loop, the first parameter of a group updated in a step
fixes it for the rest of that group in that step. Row and column means are computed as torch
does: the norm along the axis, squared, divided by the length. Note that the update uses
:math:`1 - \hat\beta_t = t^{\tau}` as the interpolation weight, so at :math:`t=1` the
factors are set to the current gradient's statistics.

**The switches** (their torch values in :attr:`Adafactor.torch_conventions`), each one line of
the rule above:

* ``eps1_mode="added"``: :math:`\epsilon_1` is added to the squared gradient,
  :math:`G^2 + \epsilon_1` in :math:`R`, :math:`C` (or :math:`V`), and neither clamp is taken:
  :math:`\hat V = R C / \mathrm{mean}_{\text{rows}}(R)`, :math:`U = G/\sqrt{\hat V}` (optax,
  Keras; torch ``"max"``, its ``clamp(min=...)``; ``"clamp"``, the older word, is an alias).
* ``relative_step=False``: :math:`\rho_t = \gamma` (optax: ``scale_by_learning_rate``, no
  :math:`1/\sqrt t`).
* ``parameter_scale=False``: :math:`\alpha_t = \rho_t` (optax
  ``multiply_by_parameter_scale=False``: the lr is the absolute step size).
* ``decay_offset`` :math:`k`: :math:`\hat\beta_t = 1 - (t - k)^{\tau}` (optax's
  ``decay_offset``, for fine-tuning from step :math:`k`; a step with :math:`t \le k` raises).
* ``min_dim_size_to_factor`` :math:`m` and ``factor_dims="largest_two"``: a parameter is
  factored only if its second-largest dimension is at least :math:`m`, over its two largest
  dimensions (optax's ``_factored_dims``, ties as ``np.argsort``); others keep a full
  :math:`V`. torch: :math:`m=0` over the last two.
* ``d=inf``: no update clipping (optax ``clipping_threshold=None``).
* ``momentum`` :math:`\mu` (optax ``momentum``, ``transform.ema`` without debiasing) on the
  scaled step, before the weight decay: :math:`M \leftarrow \mu M + (1-\mu)\,\alpha_t
  U/\max(1, \mathrm{RMS}(U)/d)`, :math:`\theta \leftarrow \theta - M`, with :math:`M` stored
  rounded to float32 when ``momentum_dtype="float32"`` (optax's ``dtype_momentum`` default;
  the step uses the unrounded :math:`M`, as optax's).
* ``weight_decay_mode``: ``"decoupled"`` (torch, above), ``"before_rule"`` (Keras's base
  optimizer: :math:`\theta \leftarrow \theta - \theta\lambda\gamma` before the rule, so
  :math:`\mathrm{RMS}(\theta)` in :math:`\alpha_t` is the decayed parameter's), ``"added"``
  (optax ``add_decayed_weights`` after the scaling: :math:`\theta \leftarrow \theta -
  (\alpha_t U_{\text{clipped}}\ \text{or}\ M) - \lambda\theta`, the rate not multiplied by
  the lr).

optax 0.2.8 (``optax/_src/alias.py`` ``adafactor``, ``optax/_src/factorized.py``
``scale_by_factored_rms``; ``clip_by_block_rms``, ``scale_by_param_block_rms`` with
:math:`\epsilon_2 = 10^{-3}`) is ``eps1_mode="added"``, ``relative_step=False``,
``min_dim_size_to_factor=128``, ``factor_dims="largest_two"``, ``weight_decay_mode="added"``,
``momentum_dtype="float32"``, :math:`\epsilon_1 = 10^{-30}`, :math:`\tau=-0.8`, lr 1 (its
``learning_rate=None``), with its float hyperparameters as float64 values, as
``inject_hyperparams`` holds them under x64 (or ``np.float64`` scalars). Python floats are
weakly typed in JAX, so there XLA computes the decay's power :math:`t^{-0.8}` (not correctly
rounded: it differs from float64 rounded to float32 from :math:`t=4`) and the momentum's
:math:`\mu M` in float32, which agrees only to float32's precision.

Keras 3.15 (``keras/src/optimizers/adafactor.py``) is ``eps1_mode="added"`` and
``weight_decay_mode="before_rule"`` with :math:`\epsilon_1 = 10^{-30}`, lr 1e-3 and a global
step count (``iterations``); its ``relative_step`` changes nothing (its
:math:`\rho_t` is :math:`\min(\gamma, 1/\sqrt t)` either way), and it factors every
parameter of two or more dimensions over its last two, as torch. Keras 3.15's ``ops.mean`` on
the JAX backend computes a float64 mean in float32 (its ``result_type(float64, "float32")``
is float32), and every mean of its Adafactor (the RMS of the parameter and of :math:`U`, the
row and column means) is one, so its float64 Adafactor agrees with this rule only to about
1e-7; with those means taken in float64 it agrees to 1e-12 (``tests/test_adafactor.py``), and
the keras flavor's cases are float32.

This update is not element-wise (norms and means over the parameter), so it is written in
plain NumPy, in the parameter's dtype. Dense gradients only, real parameters only, as in torch.
"""
import numpy as np

from npoptim.kernels.scalar import lerp_arrays
from npoptim.optim.optimizer import Optimizer, typed
from npoptim.optim.options import FLOOR_ALIASES, check_choice, check_flag, flavored


def norm(x, axis=None):
    """The 2-norm in ``x``'s dtype (accumulated in float64, rounded once)."""
    total = np.sum(np.square(x, dtype=np.float64), axis=axis, keepdims=axis is not None)
    return np.sqrt(total).astype(x.dtype)


def factored_axes(shape, group):
    """``(row axis, column axis)`` a parameter of ``shape`` is factored over, or None (a full
    variance): torch's last two dimensions of every parameter of two or more; with
    ``factor_dims="largest_two"`` optax's two largest (``np.argsort`` of the shape), only if
    the second-largest is at least ``min_dim_size_to_factor``."""
    if len(shape) < 2:
        return None
    if group["factor_dims"] == "largest_two":
        order = np.argsort(shape)
        axes = int(order[-2]), int(order[-1])
    else:
        axes = len(shape) - 2, len(shape) - 1
    if shape[axes[0]] < group["min_dim_size_to_factor"]:
        return None
    return axes


def factored_shapes(shape, axes):
    """``(row_var shape, col_var shape)`` of a parameter factored over ``axes``: the
    parameter's shape with those axes moved last, then reduced over one of them."""
    moved = tuple(n for k, n in enumerate(shape) if k not in axes) + tuple(shape[k] for k in axes)
    return moved[:-1] + (1,), moved[:-2] + (1,) + moved[-1:]


class Adafactor(Optimizer):
    """Adafactor, matching ``torch.optim.Adafactor`` (see the module docstring for the
    convention switches of optax's and Keras's forms).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.01
        Learning rate γ (the cap of the relative step size).
    beta2_decay : float, default: -0.8
        Decay exponent τ: β̂_t = 1 - t^τ.
    eps : tuple (float or None, float), default: (None, 0.001)
        (ε1, ε2): ε1 regularizes the second moment (None: the machine epsilon of the parameter's
        dtype), ε2 is the floor of RMS(θ) in the relative step size.
    d : float, default: 1.0
        Clipping threshold of RMS(U) (inf: no clipping).
    weight_decay : float, default: 0.0
        Weight decay λ, applied as ``weight_decay_mode`` says.
    foreach : ignored
        Accepted for compatibility with torch only: they choose torch's implementations and change
        nothing here (``differentiable=True`` is refused: npoptim has no autograd).
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    eps1_mode : str, default: 'max'
        ``"max"`` (torch: clamps by ε1) or ``"added"`` (ε1 added to G², optax, Keras).
    relative_step : bool, default: True
        ρ_t = min(γ, 1/sqrt(t)); False: ρ_t = γ (optax).
    parameter_scale : bool, default: True
        Scale the step by max(ε2, RMS(θ)); False: the lr is the absolute step size (optax
        ``multiply_by_parameter_scale=False``).
    decay_offset : int, default: 0
        Offset k of the decay: β̂_t = 1 - (t - k)^τ (optax).
    min_dim_size_to_factor : int, default: 0
        Factor a parameter only if its second-largest dimension is at least this (optax).
    factor_dims : str, default: 'last_two'
        Factor over the ``"last_two"`` dimensions (torch, Keras) or the ``"largest_two"`` (optax).
    momentum : float, default: 0.0
        Momentum μ on the scaled step (optax); 0: none.
    momentum_dtype : str, default: 'param'
        dtype the momentum is stored in: ``"param"`` or ``"float32"`` (optax).
    weight_decay_mode : str, default: 'decoupled'
        ``"decoupled"`` (torch), ``"before_rule"`` (Keras) or ``"added"`` (optax
        ``add_decayed_weights``, not scaled by the lr).
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    #: The convention switches and their torch values (see :mod:`npoptim.flavors`).
    torch_conventions = {"eps1_mode": "max", "relative_step": True, "parameter_scale": True,
                         "decay_offset": 0, "min_dim_size_to_factor": 0,
                         "factor_dims": "last_two", "momentum": 0.0, "momentum_dtype": "param",
                         "weight_decay_mode": "decoupled"}
    #: A switch that matters only when this option is on (else left out of golden files).
    conventions_apply = {"momentum_dtype": "momentum"}

    @flavored
    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                 weight_decay=0.0, *, foreach=None, maximize=False, eps1_mode="max",
                 relative_step=True, parameter_scale=True, decay_offset=0,
                 min_dim_size_to_factor=0, factor_dims="last_two", momentum=0.0,
                 momentum_dtype="param", weight_decay_mode="decoupled"):
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, eps1_mode=eps1_mode,
                                      relative_step=relative_step,
                                      parameter_scale=parameter_scale,
                                      decay_offset=decay_offset,
                                      min_dim_size_to_factor=min_dim_size_to_factor,
                                      factor_dims=factor_dims, momentum=momentum,
                                      momentum_dtype=momentum_dtype,
                                      weight_decay_mode=weight_decay_mode))

    def _check_group(self, group):
        lr, beta2_decay, eps = group["lr"], group["beta2_decay"], group["eps"]
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if not isinstance(eps, (tuple, list)) or len(eps) != 2:
            raise ValueError(f"eps must be a pair (eps1 or None, eps2), got {eps!r}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= group["d"]:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {group['d']}")
        if not 0.0 <= group["weight_decay"]:
            raise ValueError(f"weight_decay should be >= 0 but is: {group['weight_decay']}")
        check_choice(group, "eps1_mode", ("max", "added"), FLOOR_ALIASES)
        check_choice(group, "factor_dims", ("last_two", "largest_two"))
        check_choice(group, "momentum_dtype", ("param", "float32"))
        check_choice(group, "weight_decay_mode", ("decoupled", "before_rule", "added"))
        check_flag(group, "relative_step", "parameter_scale")
        for name in ("decay_offset", "min_dim_size_to_factor"):  # whole numbers (128.0 too)
            value = group[name]
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer)) or (
                    value != value // 1) or (name == "min_dim_size_to_factor" and value < 0):
                raise ValueError(f"{name} must be a{' non-negative' if name[0] == 'm' else 'n'}"
                                 f" integer, got {value!r}")
        if not (isinstance(group["momentum"], (int, float)) and 0.0 <= group["momentum"] < 1.0):
            raise ValueError(f"momentum must be in [0, 1), got {group['momentum']!r}")

    def _state_shapes(self, param, group):
        axes = factored_axes(param.shape, group)
        shapes = {"variance": param.shape}
        if axes is not None:
            row, col = factored_shapes(param.shape, axes)
            shapes = {"row_var": row, "col_var": col}
        if group["momentum"] != 0:
            shapes["momentum_buffer"] = param.shape
        return shapes

    def _prepare(self, grads):
        prepared = super()._prepare(grads)
        for group, index, param, _ in prepared:
            if param.size == 0:
                # torch divides by the parameter's size and raises this, mid-step; we raise
                # it before anything is written
                raise ZeroDivisionError(f"params[{index}] has no elements: Adafactor's relative "
                                        "step divides by the parameter's size")
            step = self.state[index]["step"] if index in self.state else 0
            if step + 1 <= group["decay_offset"]:
                raise ValueError(f"params[{index}]: step {step + 1} is not after decay_offset "
                                 f"{group['decay_offset']}: the decay (t - decay_offset)^"
                                 "beta2_decay needs t > decay_offset (optax gives NaN)")
        return prepared

    def _apply(self, prepared):
        # torch's loop sets eps1 from the first parameter of each group it updates
        self._default_eps1 = {}
        super()._apply(prepared)

    def _update(self, param, grad, state, group, index, shape):
        dtype = param.dtype.type
        eps1, eps2 = group["eps"]
        if eps1 is None:
            eps1 = self._default_eps1.setdefault(id(group), float(np.finfo(param.dtype).eps))
        lr, d, weight_decay = group["lr"], group["d"], group["weight_decay"]
        added, decay_mode = group["eps1_mode"] == "added", group["weight_decay_mode"]
        if group["maximize"]:
            grad = -grad

        state["step"] += 1
        step = float(state["step"])
        one_minus_beta2 = (step - group["decay_offset"]) ** group["beta2_decay"]
        rho = min(lr, 1 / (step ** 0.5)) if group["relative_step"] else lr
        if weight_decay != 0 and decay_mode == "before_rule":  # Keras: before the rule
            param *= dtype(1 - lr * weight_decay)
        scale = 1.0
        if group["parameter_scale"]:
            scale = max(eps2, float(norm(param)) / (param.size ** 0.5))
        alpha = scale * rho

        if weight_decay != 0 and decay_mode == "decoupled":
            param *= dtype(1 - lr * weight_decay)

        if "row_var" in state:
            row_var, col_var = state["row_var"], state["col_var"]
            axes = factored_axes(shape, group)
            g = np.moveaxis(grad.reshape(shape), axes, (-2, -1))
            nrows, ncols = g.shape[-2], g.shape[-1]
            if added:
                square = g * g + dtype(eps1)
                row_mean = np.sum(square, axis=-1, keepdims=True) / dtype(ncols)
                col_mean = np.sum(square, axis=-2, keepdims=True) / dtype(nrows)
            else:
                row_mean = np.square(norm(g, axis=-1)) / dtype(ncols)
                col_mean = np.square(norm(g, axis=-2)) / dtype(nrows)
            row_var[...] = lerp_arrays(row_var, row_mean, one_minus_beta2)
            col_var[...] = lerp_arrays(col_var, col_mean, one_minus_beta2)
            row_var_mean = np.sum(row_var, axis=-2, keepdims=True) / dtype(nrows)
            floor = dtype(0 if added else eps1)
            var_estimate = (row_var * col_var) / np.maximum(row_var_mean, floor)
            var_estimate = np.moveaxis(var_estimate, (-2, -1), axes).reshape(-1)
        else:
            variance = state["variance"].reshape(-1)
            square = grad * grad + dtype(eps1) if added else grad * grad
            variance[...] = lerp_arrays(variance, square, one_minus_beta2)
            var_estimate = variance.copy()

        update = dtype(1) / np.sqrt(np.maximum(var_estimate, dtype(0 if added else eps1 * eps1)))
        update *= grad
        denom = max(1.0, float(norm(update)) / ((update.size ** 0.5) * d))
        if group["momentum"] == 0 and (weight_decay == 0 or decay_mode != "added"):
            (step_size,) = typed(param, -alpha / denom)
            param += step_size * update
            return
        # optax: the scaled step, through the momentum, plus the decay, is subtracted
        (step_size,) = typed(param, alpha / denom)
        update *= step_size
        if group["momentum"] != 0:
            momentum, buffer = group["momentum"], state["momentum_buffer"].reshape(-1)
            update = dtype(1 - momentum) * update + dtype(momentum) * buffer
            buffer[...] = update.astype(np.float32) if group["momentum_dtype"] == "float32" \
                else update
        if weight_decay != 0 and decay_mode == "added":
            update += dtype(weight_decay) * param
        param -= update
