r"""Mechanic, a learning-rate tuner (Cutkosky, Defazio and Mehta, "Mechanic: A Learning Rate
Tuner", NeurIPS 2023, arXiv 2306.00144): a wrapper around any npoptim optimizer, as
``optax.contrib.mechanize`` 0.2.8.

The wrapped ("base") optimizer proposes an update :math:`u_t` from the gradient :math:`g_t` at
the parameters :math:`x_t`; Mechanic keeps the parameters the first step sees,
:math:`x_0`, and learns the scale :math:`S = \sum_j s_j` applied to the sum of the base
updates, with one coin-betting scale :math:`s_j` per :math:`\beta_j` (default
:math:`\beta_j = 1 - 10^{-j}`, :math:`j = 1 \dots n`, ``num_betas`` :math:`= n`). With
:math:`\lambda` (``weight_decay``), :math:`\epsilon` (``eps``) and the global norms over all
parameters:

.. math::

    \Delta_t &= (x_0 - x_t) / (S_t + \epsilon)\\
    \tilde g_t &= g_t + \lambda S_t \frac{\|g_t\|}{\|x_t\| + \epsilon}\, x_t\\
    h_t &= \langle \tilde g_t, \Delta_t \rangle\\
    m_j &\leftarrow \max(\beta_j m_j, |h_t| + \epsilon), \qquad
    v_j \leftarrow \beta_j^2 v_j + h_t^2\\
    r_j &\leftarrow \beta_j r_j + \operatorname{clip}(h_t, -m_j^{\text{old}},
        m_j^{\text{old}})\, s_j^{\text{old}}\\
    s_j &\leftarrow \frac{(s_{\text{init}} / n)\, m_j + \max(0, r_j)}{\sqrt{v_j} + \epsilon}\\
    x_{t+1} &= x_0 - S_{t+1}\,(\Delta_t - u_t), \qquad S_{t+1} = \textstyle\sum_j s_j

(:math:`m = v = r = 0`, :math:`s_j = s_{\text{init}}` initially). The base optimizer sees the
raw gradient :math:`g_t` (the weight decay :math:`\lambda` is Mechanic's own, only in
:math:`h_t`); its update is :math:`u_t` = its step's parameters minus :math:`x_t`. The first
step has :math:`\Delta = 0`, so it moves the parameters by :math:`s_{\text{init}}\, u_0`.
Mechanic does not replace an lr schedule: schedule the base optimizer's lr (base value 1) as
usual, through :attr:`param_groups`.

The reductions (:math:`\|g\|`, :math:`\|x\|`, :math:`h`) are the deterministic sums of
:mod:`npoptim.kernels.reduction` per parameter, added in the parameters' order: bit-identical
whatever the thread count. The scalars ``m, v, r, s`` are in the parameters' lowest dtype, as
optax's.

Source: google-deepmind/optax ``optax/contrib/_mechanic.py`` (``mechanize``, by the paper's
authors: the "memory-efficient" form that recomputes :math:`\Delta` from :math:`x_0`, and the
clipping of :math:`h` the paper does not have); its defaults ``weight_decay=1e-2, eps=1e-8,
s_init=1e-6, num_betas=6`` are npoptim's (``num_betas=None`` is 6). ``betas=`` (npoptim's)
gives the :math:`\beta_j` explicitly instead (``num_betas``, if given, must be their number).

Mechanic is a wrapper, like :class:`~npoptim.optim.lookahead.Lookahead`; its
``state_dict()`` holds the wrapped optimizer's ``state_dict()``, its scalars and
:math:`x_0`.
"""
import math
import numbers
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.reduction import sum_pair, sumsq_pair
from npoptim.kernels.scalar import constant
from npoptim.optim.optimizer import flat_view, step_arguments, typed_record
from npoptim.optim.options import is_real
from npoptim.optim.wrapper import OptimizerWrapper


class MechanicHyper(NamedTuple):
    """The per-step scalars of :func:`mechanic_inner_product_term` and
    :func:`mechanic_step_rule`."""

    decay: float      # λ S ‖g‖ / (‖x‖ + ε)
    scale_eps: float  # S_t + ε
    scale: float      # S_{t+1}


@kernel
def mechanic_norms_term(p, g, s, h):
    """The gradient and the parameter: :func:`sumsq_pair` of it is ``(‖g‖², ‖x‖²)``."""
    return (), g, p


@kernel
def mechanic_inner_product_term(p, g, s, h):
    """One element of :math:`h = \\langle g + \\text{decay}\\,x, (x_0 - x)/(S + \\epsilon)
    \\rangle` (``s = (x0,)``, unchanged) and a zero, for :func:`sum_pair`."""
    (x0,) = s
    return s, (g + h.decay * p) * ((x0 - p) / h.scale_eps), constant(0.0, g)


@kernel
def mechanic_step_rule(p, x, s, h):
    """One element of :math:`x_0 - S_{t+1}(\\Delta_t - u_t)`: ``p`` is the base optimizer's
    new parameter, ``x`` the one before its step (:math:`u_t = p - x`), ``s = (x0,)``."""
    (x0,) = s
    delta = (x0 - x) / h.scale_eps
    return x0 - h.scale * (delta - (p - x)), s


@kernel
def _mechanic_norms(param, grad):
    return sumsq_pair(mechanic_norms_term, param, grad, (), ())


@kernel
def _mechanic_inner_product(param, grad, states, hyper):
    return sum_pair(mechanic_inner_product_term, param, grad, states, MechanicHyper(*hyper))[0]


@kernel
def _mechanic_step(param, before, states, hyper):
    apply_dense(mechanic_step_rule, param, before, states, MechanicHyper(*hyper))


def _checked_real(name, value, low, low_open=False):
    if not is_real(value) or not math.isfinite(
            value) or value < low or (low_open and value == low):
        raise ValueError(f"{name} must be a finite number {'>' if low_open else '>='} {low}, "
                         f"got {value!r}")
    return float(value)


class Mechanic(OptimizerWrapper):
    """Mechanic around ``optimizer`` (an npoptim optimizer taking one dense gradient per
    parameter); see the module docstring. ``step(grads)``, or ``step(closure)`` with
    ``closure()`` returning ``(loss, grads)``.

    Parameters
    ----------
    optimizer : Optimizer
        The npoptim optimizer to wrap (built on the parameters).
    weight_decay : float, default: 0.01
        Mechanic's own weight decay λ (only in h).
    eps : float, default: 1e-08
        Term ε of the divisions.
    s_init : float, default: 1e-06
        Initial scale s_init.
    num_betas : int or None, default: None
        Number n of β_j = 1 - 10^-j (None: 6, or len(betas)).
    betas : sequence of float or None, default: None
        The β_j explicitly (None: from ``num_betas``).
    """

    _SCALARS = ("m", "v", "r", "s")
    sparse_kind = "dense-only"

    def __init__(self, optimizer, weight_decay=1e-2, eps=1e-8, s_init=1e-6, num_betas=None, *,
                 betas=None):
        super().__init__(optimizer)
        self._require_one_gradient_per_parameter()
        settings = self._checked(weight_decay, eps, s_init, num_betas, betas)
        self.weight_decay, self.eps, self.s_init, self.betas = settings
        self.dtype = min((p.dtype for p in optimizer.params), key=lambda d: d.itemsize)
        n = len(self.betas)
        self.count = 0
        self.m, self.v, self.r = (np.zeros(n, self.dtype) for _ in range(3))
        self.s = np.full(n, self.s_init, self.dtype)
        self.x0 = None   # the parameters the first step sees

    @staticmethod
    def _checked(weight_decay, eps, s_init, num_betas, betas):
        weight_decay = _checked_real("weight_decay", weight_decay, 0.0)
        eps = _checked_real("eps", eps, 0.0)
        s_init = _checked_real("s_init", s_init, 0.0, low_open=True)
        if num_betas is not None and (isinstance(num_betas, bool) or not isinstance(
                num_betas, numbers.Integral) or num_betas < 1):
            raise ValueError(f"num_betas must be an integer >= 1, got {num_betas!r}")
        if betas is None:
            betas = tuple(1.0 - 0.1 ** j for j in range(1, int(num_betas or 6) + 1))
        else:
            if isinstance(betas, (str, bytes)) or not hasattr(betas, "__len__") \
                    or len(betas) == 0:
                raise ValueError(f"betas must be a non-empty tuple of numbers in [0, 1), got "
                                 f"{betas!r}")
            betas = tuple(betas)
            for b in betas:
                if not is_real(b) or not 0.0 <= b < 1.0:
                    raise ValueError(f"betas must be numbers in [0, 1), got {betas!r}")
            if num_betas is not None and num_betas != len(betas):
                raise ValueError(f"num_betas {num_betas} does not match the {len(betas)} betas")
            betas = tuple(float(b) for b in betas)
        return weight_decay, eps, s_init, betas

    def __repr__(self):
        return (f"Mechanic(weight_decay={self.weight_decay}, eps={self.eps}, s_init="
                f"{self.s_init}, betas={self.betas}, optimizer={self.optimizer!r})")

    def step(self, grads=None, closure=None):
        """One Mechanic step (see the module docstring); returns the closure's loss, or None.
        The gradients are checked, and the wrapped optimizer checks its own input, before
        anything changes."""
        grads, closure = step_arguments(grads, closure)
        loss = None
        if closure is not None:
            loss, grads = closure()
        if grads is None:
            raise TypeError("Mechanic needs gradients: step(grads), or step(closure) with "
                            "closure() returning (loss, grads)")
        params = self.optimizer.params
        grads = self._checked_grads(grads, params)
        flat_grads = [np.ascontiguousarray(g).reshape(-1) for g in grads]
        x0 = self.x0 if self.x0 is not None else [p.copy() for p in params]
        dt = self.dtype.type

        grad_sq = param_sq = 0.0
        for param, g in zip(params, flat_grads):
            with flat_view(param) as view:
                gs, ps = _mechanic_norms(view, g)
            grad_sq, param_sq = grad_sq + gs, param_sq + ps
        scale = dt(np.sum(self.s))
        eps = dt(self.eps)
        decay = dt(self.weight_decay) * scale * dt(math.sqrt(grad_sq)) / (
            dt(math.sqrt(param_sq)) + eps)
        h = dt(0.0)
        for param, g, start in zip(params, flat_grads, x0):
            hyper = typed_record(MechanicHyper, param, decay=decay, scale_eps=scale + eps,
                                 scale=scale)
            with flat_view(param) as view:
                h = h + dt(_mechanic_inner_product(view, g, (start.reshape(-1),), hyper))

        before = [p.copy() for p in params]
        self.optimizer.step(grads)   # checks its input before it changes anything

        betas = np.array(self.betas, self.dtype)
        clipped = np.clip(h, -self.m, self.m)
        m = np.maximum(betas * self.m, np.abs(h) + eps)
        v = np.square(betas) * self.v + h * h
        r = betas * self.r + clipped * self.s
        wealth = dt(self.s_init / len(betas)) * m + np.maximum(dt(0.0), r)
        s = wealth / (np.sqrt(v) + eps)
        new_scale = dt(np.sum(s))
        for param, x, start in zip(params, before, x0):
            hyper = typed_record(MechanicHyper, param, decay=decay, scale_eps=scale + eps,
                                 scale=new_scale)
            with flat_view(param) as view:
                _mechanic_step(view, x.reshape(-1), (start.reshape(-1),), hyper)
        self.m, self.v, self.r, self.s = m, v, r, s
        self.x0 = x0
        self.count += 1
        return loss

    @staticmethod
    def _checked_grads(grads, params):
        """The gradients as a list of dense arrays of each parameter's shape and dtype (a copy
        of one that shares memory with a parameter, which the base step would move)."""
        grads = [grads] if isinstance(grads, np.ndarray) else list(grads)
        if len(grads) != len(params):
            raise ValueError(f"got {len(grads)} gradients for {len(params)} parameters")
        for i, (g, p) in enumerate(zip(grads, params)):
            if not isinstance(g, np.ndarray) or g.shape != p.shape or g.dtype != p.dtype:
                raise ValueError(f"Mechanic needs a dense gradient for every parameter: "
                                 f"grads[{i}] must be an array of shape {p.shape} and dtype "
                                 f"{p.dtype}")
        return [g.copy() if any(np.may_share_memory(g, p) for p in params) else g
                for g in grads]

    def state_dict(self):
        """``{"optimizer": the wrapped optimizer's state_dict(), "count": n, "m", "v", "r",
        "s": arrays of the betas' length, "x0": copies of the first step's parameters (None
        before it), "weight_decay", "eps", "s_init", "betas": settings}``."""
        return {"optimizer": self.optimizer.state_dict(), "count": self.count,
                **{name: getattr(self, name).copy() for name in self._SCALARS},
                "x0": None if self.x0 is None else [x.copy() for x in self.x0],
                "weight_decay": self.weight_decay, "eps": self.eps, "s_init": self.s_init,
                "betas": self.betas}

    def load_state_dict(self, state_dict):
        """Restore :meth:`state_dict`'s output; checked whole before anything changes."""
        keys = {"optimizer", "count", *self._SCALARS, "x0", "weight_decay", "eps", "s_init",
                "betas"}
        if not isinstance(state_dict, dict) or set(state_dict) != keys:
            raise ValueError(f"a Mechanic state_dict has exactly the keys {sorted(keys)}")
        weight_decay, eps, s_init, betas = self._checked(
            state_dict["weight_decay"], state_dict["eps"], state_dict["s_init"], None,
            state_dict["betas"])
        n = len(betas)
        for name in self._SCALARS:
            a = state_dict[name]
            if not isinstance(a, np.ndarray) or a.shape != (n,) or a.dtype != self.dtype:
                raise ValueError(f"{name} must be an array of shape ({n},) and dtype "
                                 f"{self.dtype}")
        count = state_dict["count"]
        if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 0:
            raise ValueError(f"count must be an integer >= 0, got {count!r}")
        x0 = state_dict["x0"]
        params = self.optimizer.params
        if (x0 is None) != (count == 0) or x0 is not None and (
                len(x0) != len(params) or any(
                    not isinstance(x, np.ndarray) or x.shape != p.shape or x.dtype != p.dtype
                    for x, p in zip(x0, params))):
            raise ValueError("x0 must be None before the first step, else arrays matching the "
                             "parameters (number, shapes, dtypes)")
        self.optimizer.load_state_dict(state_dict["optimizer"])
        self.weight_decay, self.eps, self.s_init, self.betas = weight_decay, eps, s_init, betas
        for name in self._SCALARS:
            setattr(self, name, state_dict[name].copy())
        self.count = int(count)
        self.x0 = None if x0 is None else [x.copy() for x in x0]
