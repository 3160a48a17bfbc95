r"""Schedule-Free SGD and AdamW (Defazio et al., "The Road Less Scheduled", NeurIPS 2024, arXiv
2405.15682), as the authors' ``schedulefree`` 1.4.1 (facebookresearch/schedule_free
``schedulefree/sgd_schedulefree.py``, ``adamw_schedulefree.py``) and ``optax.contrib``
``schedule_free_sgd`` / ``schedule_free_adamw`` 0.2.8.

Momentum is replaced by interpolation and averaging of three sequences: the gradient is taken
at :math:`y`, the base step moves :math:`z`, and :math:`x`, the average of the :math:`z`, is
what to evaluate. The parameters hold :math:`y` while training; :math:`x` is given by
:meth:`ScheduleFree.eval_params` (optax's ``schedule_free_eval_params``), or swapped into the
parameters by :meth:`~ScheduleFree.eval` and back by :meth:`~ScheduleFree.train` (the authors'
``optimizer.eval()`` / ``optimizer.train()``).

Per param group, at its step :math:`k` (0, 1, ...; the authors' ``group["k"]``), with
``warmup_steps`` :math:`W`, :math:`s(j) = \min(j/W, 1)` (1 without warmup),
:math:`\gamma = \text{lr}\cdot s(k+1)`:

.. math::

    \gamma_{max} &\leftarrow \max(\gamma_{max}, \gamma),\qquad
    w = (k+1)^r\,\gamma_{max}^{p},\\
    W_{sum} &\leftarrow W_{sum} + w,\qquad
    c = w / W_{sum}\ (0 \text{ if } W_{sum} = 0)

and for each element, with gradient :math:`g` at :math:`y`:

.. math::

    d &= g + \lambda y                         &&\quad\text{SGD}\\
    v &\leftarrow \beta_2 v + (1-\beta_2) g^2                 &&\quad\text{AdamW}\\
    d &= \frac{g}{\sqrt{v / (1-\beta_2^{k+1})} + \epsilon} + \lambda y   &&\quad\text{AdamW}\\
    y &\leftarrow y + c\,(z - y) + \gamma_z\,(\beta_1 (1-c) - 1)\, d\\
    z &\leftarrow z - \gamma_z d

which is :math:`z \leftarrow z - \gamma_z d`, :math:`x \leftarrow (1-c)\,x + c\,z`,
:math:`y = \beta_1 x + (1-\beta_1) z` without storing :math:`x`. :math:`\gamma_z = \gamma` in
the paper's Algorithm 1 and the authors' code (``variant="paper"``, the default, alias
``"authors"``). ``variant="optax"`` sets ``warmup_lag=True``: optax evaluates the warmup of the
base optimizer's step with that optimizer's own counter, which starts at 0, so
:math:`\gamma_z = \text{lr}\cdot s(k)` (0 at the first step) while :math:`c` uses
:math:`s(k+1)`; the two agree without warmup. (optax also evaluates that warmup on an int32
counter, which returns a float32 lr even with ``jax_enable_x64``: its trajectories differ from
the ``"optax"`` variant by that rounding, 5e-10 of the scale after two steps measured; the
cross-check writes optax's chain out with a float64 count.)

:math:`\beta_1` is ``momentum`` (SGD) / ``betas[0]`` (AdamW) and must be positive (as in
optax; :math:`x` is :math:`(y - (1-\beta_1) z)/\beta_1`). :math:`r` (``r``, 0) and :math:`p`
(``weight_lr_power``, 2) are the authors'; optax has :math:`r = 0`. Defaults are the
authors': SGD ``lr=1.0``, ``momentum=0.9``; AdamW ``lr=0.0025``, betas (0.9, 0.999),
``eps=1e-8``. The group counters live in the param group under the authors' names (``k``,
``lr_max``, ``weight_sum``, ``train_mode``), so they are in ``state_dict()``; the per-parameter
state is ``z`` (initialised to the parameter) and, for AdamW, ``exp_avg_sq``; there is no
per-parameter step. The bias correction of :math:`v` uses the group's :math:`k`, as the
authors' code does. Rounding follows the authors' non-foreach path (torch's ``lerp``,
``add_(alpha=)`` as fused multiply-adds); optax recomputes :math:`x` from :math:`y` and
:math:`z` each step (a division by :math:`\beta_1`), an ulp or so away. Dense gradients only.
"""
import math
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import fma, lerp, lerp_arrays
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import (VARIANT_DEFAULT, check_flag, check_no_variant,
                                   check_nonnegative, flavored, is_real, resolve_variant)


class ScheduleFreeHyper(NamedTuple):
    """One step's hyperparameters of the Schedule-Free rules (built by ``_update``)."""

    weight_decay: float
    ckp1: float               # c
    y_coef: float             # gamma_z * (beta1 * (1 - c) - 1)
    neg_z_lr: float           # -gamma_z
    beta2: float              # AdamW only
    one_minus_beta2: float
    bias_correction2: float   # 1 - beta2^(k+1)
    eps: float


@kernel
def _interpolate(y, z, d, h):
    """The y and z updates shared by both rules."""
    y_new = fma(h.y_coef, d, lerp(y, z, h.ckp1))
    return y_new, fma(h.neg_z_lr, d, z)


@kernel
def schedule_free_sgd_rule(p, g, s, h):
    """One element of Schedule-Free SGD; ``p`` is y, ``s = (z,)``."""
    (z,) = s
    d = g
    if h.weight_decay != 0:
        d = fma(h.weight_decay, p, g)
    y, z = _interpolate(p, z, d, h)
    return y, (z,)


@kernel
def schedule_free_adamw_rule(p, g, s, h):
    """One element of Schedule-Free AdamW; ``p`` is y, ``s = (z, exp_avg_sq)``."""
    z, exp_avg_sq = s
    v = fma(h.one_minus_beta2 * g, g, exp_avg_sq * h.beta2)
    d = g / (np.sqrt(v / h.bias_correction2) + h.eps)
    if h.weight_decay != 0:
        d = fma(h.weight_decay, p, d)
    y, z = _interpolate(p, z, d, h)
    return y, (z, v)


@kernel
def _sgd_dense(param, grad, states, hyper):
    apply_dense(schedule_free_sgd_rule, param, grad, states, ScheduleFreeHyper(*hyper))


@kernel
def _adamw_dense(param, grad, states, hyper):
    apply_dense(schedule_free_adamw_rule, param, grad, states, ScheduleFreeHyper(*hyper))


#: The switches each variant sets.
VARIANTS = {"paper": dict(warmup_lag=False), "optax": dict(warmup_lag=True)}
#: Other names of the variants.
ALIASES = {"authors": "paper", "schedulefree": "paper"}

#: The group counters (the authors' names) and their initial values.
_COUNTERS = dict(k=0, lr_max=-1.0, weight_sum=0.0, train_mode=True)


class ScheduleFree(Optimizer):
    """What Schedule-Free SGD and AdamW share: the group counters, the averaging weight, and
    the evaluation parameters (see the module docstring)."""

    sparse_kind = "dense-only"
    step_in_state_dict = None

    def __init__(self, params, defaults, variant, warmup_lag):
        self.variant, switches = resolve_variant(VARIANTS, ALIASES, variant,
                                                 dict(warmup_lag=warmup_lag))
        super().__init__(params, dict(defaults, **switches, **_COUNTERS))

    def _beta1(self, group):
        raise NotImplementedError

    def _check_group(self, group):
        check_no_variant(group)
        check_nonnegative(group, "lr", "weight_decay", "r", "weight_lr_power")
        beta1 = self._beta1(group)
        if not (is_real(beta1) and 0.0 < beta1 < 1.0):
            raise ValueError(f"Invalid beta1 (momentum) value: {beta1} (0 < beta1 < 1)")
        warmup = group["warmup_steps"]
        if isinstance(warmup, bool) or not isinstance(warmup, (int, np.integer)) or warmup < 0:
            raise ValueError(f"warmup_steps must be a non-negative whole number, got {warmup!r}")
        check_flag(group, "warmup_lag", "train_mode")
        k = group["k"]
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
            raise ValueError(f"k (the group's step count) must be a non-negative whole number, "
                             f"got {k!r}")
        for name in ("lr_max", "weight_sum"):
            if not (is_real(group[name]) and math.isfinite(group[name])):
                raise ValueError(f"{name} must be a finite number, got {group[name]!r}")
        if group["weight_sum"] < 0:
            raise ValueError(f"weight_sum must be non-negative, got {group['weight_sum']!r}")

    def _init_state(self, param, group):
        state = super()._init_state(param, group)
        state["z"] = param.copy()
        return state

    def _prepare(self, grads):
        if not all(group["train_mode"] for group in self.param_groups):
            raise RuntimeError("the optimizer is in eval mode (parameters hold x): call "
                               "train() before step(), as with the authors' optimizers")
        return super()._prepare(grads)

    def _apply(self, prepared):
        """Advance every group's counters once (the authors do so even for a group without
        gradients), then update each parameter with its group's coefficients."""
        self._coefficients = {}
        for i, group in enumerate(self.param_groups):
            self._coefficients[i] = self._advance(group)
        self._group_index = {id(group): i for i, group in enumerate(self.param_groups)}
        super()._apply(prepared)

    def _advance(self, group):
        k, warmup = int(group["k"]), int(group["warmup_steps"])

        def sched(j):
            return j / warmup if j < warmup else 1.0

        lr = group["lr"] * sched(k + 1)
        group["lr_max"] = lr_max = max(lr, group["lr_max"])
        weight = (k + 1) ** group["r"] * lr_max ** group["weight_lr_power"]
        group["weight_sum"] = weight_sum = group["weight_sum"] + weight
        ckp1 = weight / weight_sum if weight_sum != 0 else 0.0
        z_lr = group["lr"] * sched(k) if group["warmup_lag"] else lr
        group["k"] = k + 1
        return dict(ckp1=ckp1, y_coef=z_lr * (self._beta1(group) * (1 - ckp1) - 1),
                    neg_z_lr=-z_lr, bias_correction2=1 - self._beta2(group) ** (k + 1))

    def _beta2(self, group):
        return 0.0

    def _hyper(self, param, group):
        coefficients = self._coefficients[self._group_index[id(group)]]
        beta2 = self._beta2(group)
        return typed_record(ScheduleFreeHyper, param, weight_decay=group["weight_decay"],
                            beta2=beta2, one_minus_beta2=1 - beta2,
                            eps=group.get("eps", 0.0), **coefficients)

    # ------------------------------------------------------------------ evaluation params
    def eval_params(self):
        """The evaluation parameters :math:`x` (new arrays, in :attr:`params` order): a
        parameter without state yet is its own :math:`x` (``z`` = ``y``)."""
        out = []
        index = 0
        for group in self.param_groups:
            beta1 = self._beta1(group)
            for param in group["params"]:
                state = self.state.get(index)
                if state is None or not group["train_mode"]:
                    out.append(param.copy())
                else:
                    out.append(lerp_arrays(param, state["z"], 1 - 1 / beta1))
                index += 1
        return out

    def eval(self):
        """Put :math:`x` into the parameters (the authors' ``optimizer.eval()``)."""
        self._swap(False, lambda beta1: 1 - 1 / beta1)

    def train(self):
        """Put :math:`y` back into the parameters (the authors' ``optimizer.train()``)."""
        self._swap(True, lambda beta1: 1 - beta1)

    def _swap(self, train_mode, weight_of):
        index = 0
        for group in self.param_groups:
            for param in group["params"]:
                state = self.state.get(index)
                if group["train_mode"] != train_mode and state is not None:
                    param[...] = lerp_arrays(param, state["z"], weight_of(self._beta1(group)))
                index += 1
            group["train_mode"] = train_mode


class ScheduleFreeSGD(ScheduleFree):
    """Schedule-Free SGD, the authors' ``SGDScheduleFree`` (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 1.0
        Learning rate γ.
    momentum : float, default: 0.9
        Interpolation β1 between the average x and z (> 0).
    weight_decay : float, default: 0.0
        Weight decay λ: λy added to the direction.
    warmup_steps : int, default: 0
        Steps W of the linear lr warmup.
    r : float, default: 0.0
        Power r of the step in the averaging weight.
    weight_lr_power : float, default: 2.0
        Power p of the largest lr in the averaging weight.
    variant : str, default: 'paper'
        The published form to reproduce (a name of ``VARIANTS`` or ``ALIASES``, see the module
        docstring); it sets every switch whose default is "the variant's", and a switch given
        explicitly overrides it.
    warmup_lag : bool, default: the variant's
        Evaluate the base step's warmup one step late, as optax does.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    @flavored
    def __init__(self, params, lr=1.0, momentum=0.9, weight_decay=0.0, warmup_steps=0, r=0.0,
                 weight_lr_power=2.0, *, variant="paper", warmup_lag=VARIANT_DEFAULT):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay,
                                      warmup_steps=warmup_steps, r=r,
                                      weight_lr_power=weight_lr_power), variant, warmup_lag)

    def _beta1(self, group):
        return group["momentum"]

    def _state_names(self, group):
        return ("z",)

    def _update(self, param, grad, state, group, index, shape):
        _sgd_dense(param, grad, self._flat_states(state, group), self._hyper(param, group))


class ScheduleFreeAdamW(ScheduleFree):
    """Schedule-Free AdamW, the authors' ``AdamWScheduleFree`` (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.0025
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.999)
        (β1, β2): the interpolation between x and z (> 0), and the second moment.
    eps : float, default: 1e-08
        Term ε added to the denominator for numerical stability.
    weight_decay : float, default: 0.0
        Weight decay λ: λy added to the direction.
    warmup_steps : int, default: 0
        Steps W of the linear lr warmup.
    r : float, default: 0.0
        Power r of the step in the averaging weight.
    weight_lr_power : float, default: 2.0
        Power p of the largest lr in the averaging weight.
    variant : str, default: 'paper'
        The published form to reproduce (a name of ``VARIANTS`` or ``ALIASES``, see the module
        docstring); it sets every switch whose default is "the variant's", and a switch given
        explicitly overrides it.
    warmup_lag : bool, default: the variant's
        Evaluate the base step's warmup one step late, as optax does.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    @flavored
    def __init__(self, params, lr=0.0025, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 warmup_steps=0, r=0.0, weight_lr_power=2.0, *, variant="paper",
                 warmup_lag=VARIANT_DEFAULT):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      warmup_steps=warmup_steps, r=r,
                                      weight_lr_power=weight_lr_power), variant, warmup_lag)

    def _beta1(self, group):
        betas = group["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"betas must be a pair of floats, got {betas!r}")
        return betas[0]

    def _beta2(self, group):
        return group["betas"][1]

    def _check_group(self, group):
        super()._check_group(group)
        check_nonnegative(group, "eps")
        beta2 = group["betas"][1]
        if not (is_real(beta2) and 0.0 <= beta2 < 1.0):
            raise ValueError(f"Invalid beta parameter at index 1: {beta2}")

    def _state_names(self, group):
        return ("z", "exp_avg_sq")

    def _update(self, param, grad, state, group, index, shape):
        _adamw_dense(param, grad, self._flat_states(state, group), self._hyper(param, group))
