r"""DoG (Ivgi, Hinder & Carmon, "DoG is SGD's Best Friend: A Parameter-Free Dynamic Step Size
Schedule", ICML 2023, arXiv 2302.12022) and DoWG (Khaled, Mishchenko & Jin, "DoWG Unleashed: An
Efficient Universal Parameter-Free Gradient Descent Method", NeurIPS 2023, arXiv 2305.16284), as
``optax.contrib.dog`` and ``optax.contrib.dowg`` 0.2.8 (google-deepmind/optax
``optax/contrib/_dog.py``).

SGD whose step size is the distance travelled from the start over the gradients seen so far,
one step size for all parameters. With gradients :math:`g` (negated when ``maximize``, plus
:math:`\lambda\theta` with ``weight_decay`` :math:`\lambda`, as optax's
``add_decayed_weights`` in front), :math:`\theta_0` the parameters at their first step,
:math:`\|\cdot\|` the norm over every parameter of every group that has a gradient this step
and :math:`\gamma` the group's lr (1; a schedule multiplies the step, as optax's
``learning_rate``):

.. math::

    \text{DoG:}\quad \bar r &\leftarrow \max(\bar r, \|\theta - \theta_0\|), \quad
        G \leftarrow G + \|g\|^2,\\
        \eta &= \frac{\bar r}{\sqrt{G + \epsilon}}\\
    \text{DoWG:}\quad \bar r^2 &\leftarrow \max(\bar r^2, \|\theta - \theta_0\|^2), \quad
        v \leftarrow v + \bar r^2 \|g\|^2,\\
        \eta &= \frac{\bar r^2}{\sqrt{v} + \epsilon}\\
    \theta &\leftarrow \theta - \gamma\,\eta\, g

DoG starts from :math:`\bar r = r_\epsilon`, set by ``init_step = (kind, value)``:
``"heuristic"`` (the default, value 1e-6): :math:`r_\epsilon = \text{value}\,(1 +
\|\theta_0\|)`; ``"distance"``: :math:`r_\epsilon = \text{value}`; ``"learning_rate"``:
:math:`r_\epsilon = 0` and the first step takes :math:`\eta = \text{value}`. DoWG starts from
:math:`\bar r^2` = ``init_estim_sq_dist`` (``None``: ``eps``); its ``eps`` is 1e-4, DoG's 1e-8.
With ``eps = 0`` and all gradients zero so far, :math:`\eta = 0` (optax divides by zero).

State: per parameter ``init_params`` (:math:`\theta_0`); in every param group (they share
one step size) DoG's ``max_dist`` (:math:`\bar r`, None before the first step),
``sum_sq_norm_grads`` (:math:`G`), DoWG's ``estim_sq_dist`` (:math:`\bar r^2`),
``weighted_sq_norm_grads`` (:math:`v`), and ``k`` (the steps taken), under optax's names.
Each parameter's sums are deterministic (:func:`~npoptim.kernels.reduction.sumsq_pair`),
added in param-group order; the step sizes are computed in double. A parameter without a
gradient in a step is left out of that step's norms (optax has no such case). The authors
recommend iterate averaging on top (not part of the optimizer). Dense gradients only.

The authors' code (formll/dog ``src/dog/dog.py``, PyPI ``dog-optimizer`` 1.0.3, ``DoG``) is
the same with one param group: its ``reps_rel`` is ``init_step=("heuristic", reps_rel)`` and
its ``init_eta`` is ``init_step=("learning_rate", init_eta)`` (its first step is ``init_eta``
itself, so the two agree at lr 1, the authors' recommended value); it keeps :math:`\bar r`
and :math:`G` per param group, where optax and npoptim share them across groups.
"""
import math
from typing import NamedTuple

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.reduction import grad_sumsq, sumsq_pair
from npoptim.kernels.scalar import decayed_grad, fma
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import (check_counter, check_flag, check_nonnegative, check_positive,
                                   flavored, is_real)


class DoGHyper(NamedTuple):
    """One step's hyperparameters of the DoG and DoWG rules (built by ``_hyper``)."""

    maximize: float   # 1 or 0
    weight_decay: float  # L2 decay added to the gradient
    neg_step: float   # -lr * eta (0 in the norms pass)


@kernel
def dog_norms_rule(p, g, s, h):
    """Pass 1: ``theta - theta_0`` and the gradient, for their sums of squares;
    ``s = (init_params,)``, only read."""
    (init_params,) = s
    return (init_params,), p - init_params, decayed_grad(p, g, h)


@kernel
def dog_step_rule(p, g, s, h):
    """Pass 2: the SGD step with the global step size (no state)."""
    return fma(h.neg_step, decayed_grad(p, g, h), p), s


@kernel
def _norms(param, grad, states, hyper):
    return sumsq_pair(dog_norms_rule, param, grad, states, DoGHyper(*hyper))


@kernel
def _dog_step(param, grad, states, hyper):
    apply_dense(dog_step_rule, param, grad, states, DoGHyper(*hyper))


def _as_tuple(value):
    return tuple(value) if isinstance(value, list) else value


def _check_finite_nonnegative(group, name, allow_none=False):
    value = group[name]
    if value is None and allow_none:
        return
    if not (is_real(value) and 0 <= value < math.inf):
        raise ValueError(f"{name} must be a finite non-negative number, got {value!r}")


class _DistanceOverGradients(Optimizer):
    """The two passes DoG and DoWG share; a subclass gives :meth:`_step_size`."""

    sparse_kind = "dense-only"
    step_in_state_dict = None
    #: Options that are one value for the whole optimizer (the step size is global).
    GLOBAL = ("eps",)

    def _check_group(self, group):
        check_nonnegative(group, "lr", "weight_decay", "eps")
        check_flag(group, "maximize")
        check_counter(group, "k")
        for name in self.GLOBAL:   # (a checkpoint may give init_step back as a list)
            if _as_tuple(group[name]) != _as_tuple(self.defaults[name]):
                raise ValueError(f"{name} is one value for the whole optimizer (the step size "
                                 "is global): set it in the constructor, not per group")

    def _state_names(self, group):
        return ("init_params",)

    def _state_shapes(self, param, group):
        return {"init_params": (param.size,)}

    def _init_state(self, param, group):
        state = super()._init_state(param, group)
        state["init_params"][...] = param.reshape(-1)
        return state

    def _apply(self, prepared):
        """The norms over every parameter, the step size, then each parameter's step."""
        if not prepared:
            return
        dist_sq = grad_sq = 0.0
        init_sq = 0.0   # ||theta_0||^2 of the parameters that start now
        for group, index, param, grad in prepared:
            state = self.state.get(index)
            flat = param.reshape(-1) if param.flags.c_contiguous else param.ravel()
            if state is None:
                state = self.state[index] = self._init_state(param, group)
                init_sq += float(grad_sumsq(flat))
            dist, grads = _norms(flat, grad, (state["init_params"],), self._hyper(param, group))
            dist_sq += float(dist)
            grad_sq += float(grads)
        self._eta, scalars = self._step_size(self.param_groups[0], dist_sq, grad_sq, init_sq)
        for group in self.param_groups:
            group.update(scalars, k=group["k"] + 1)
        super()._apply(prepared)

    def _update(self, param, grad, state, group, index, shape):
        _dog_step(param, grad, (), self._hyper(param, group, -group["lr"] * self._eta))

    def _step_size(self, first, dist_sq, grad_sq, init_sq):
        """``(eta, {scalar: new value})`` from the first group's scalars and the sums."""
        raise NotImplementedError

    @staticmethod
    def _hyper(param, group, neg_step=0.0):
        return typed_record(DoGHyper, param, maximize=bool(group["maximize"]),
                            weight_decay=group["weight_decay"], neg_step=neg_step)


_INIT_KINDS = ("heuristic", "distance", "learning_rate")


class DoG(_DistanceOverGradients):
    """DoG (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 1.0
        Multiplier γ of the step size (a schedule).
    init_step : tuple (str, float), default: ('heuristic', 1e-06)
        (kind, value): ``"heuristic"``, ``"distance"`` or ``"learning_rate"`` (see the module
        docstring).
    eps : float, default: 1e-08
        Term ε added to G.
    weight_decay : float, default: 0.0
        L2 weight decay λ, in the gradient.
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    GLOBAL = ("eps", "init_step")

    @flavored
    def __init__(self, params, lr=1.0, init_step=("heuristic", 1e-6), eps=1e-8,
                 weight_decay=0.0, *, maximize=False):
        super().__init__(params, dict(lr=lr, init_step=init_step, eps=eps,
                                      weight_decay=weight_decay, maximize=maximize,
                                      max_dist=None, sum_sq_norm_grads=0.0, k=0))

    def _check_group(self, group):
        init_step = group["init_step"]
        if (not isinstance(init_step, (tuple, list)) or len(init_step) != 2
                or init_step[0] not in _INIT_KINDS or not is_real(init_step[1])
                or not 0 < init_step[1] < math.inf):
            raise ValueError(f"init_step must be (kind, value) with kind one of "
                             f"{', '.join(map(repr, _INIT_KINDS))} and a positive finite "
                             f"value, got {init_step!r}")
        super()._check_group(group)
        _check_finite_nonnegative(group, "max_dist", allow_none=True)
        _check_finite_nonnegative(group, "sum_sq_norm_grads")

    def _step_size(self, first, dist_sq, grad_sq, init_sq):
        kind, value = first["init_step"]
        max_dist = first["max_dist"]
        if max_dist is None:
            max_dist = {"heuristic": value * (1 + math.sqrt(init_sq)), "distance": value,
                        "learning_rate": 0.0}[kind]
        max_dist = max(max_dist, math.sqrt(dist_sq))
        sum_sq = first["sum_sq_norm_grads"] + grad_sq
        denom = math.sqrt(sum_sq + first["eps"])
        eta = max_dist / denom if denom > 0 else 0.0
        if kind == "learning_rate" and first["k"] == 0:
            eta = value
        return eta, dict(max_dist=max_dist, sum_sq_norm_grads=sum_sq)


class DoWG(_DistanceOverGradients):
    """DoWG (see the module docstring).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 1.0
        Multiplier γ of the step size (a schedule).
    init_estim_sq_dist : float or None, default: None
        Initial squared distance estimate (None: ``eps``).
    eps : float, default: 0.0001
        Term ε added to the denominator.
    weight_decay : float, default: 0.0
        L2 weight decay λ, in the gradient.
    maximize : bool, default: False
        Maximize the objective: the gradient is negated.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    GLOBAL = ("eps", "init_estim_sq_dist")

    @flavored
    def __init__(self, params, lr=1.0, init_estim_sq_dist=None, eps=1e-4, weight_decay=0.0, *,
                 maximize=False):
        start = eps if init_estim_sq_dist is None else init_estim_sq_dist
        super().__init__(params, dict(lr=lr, init_estim_sq_dist=init_estim_sq_dist, eps=eps,
                                      weight_decay=weight_decay, maximize=maximize,
                                      estim_sq_dist=start, weighted_sq_norm_grads=0.0, k=0))

    def _check_group(self, group):
        if group["init_estim_sq_dist"] is not None:
            check_positive(group, "init_estim_sq_dist")
        elif group["eps"] == 0:
            raise ValueError("eps=0 needs init_estim_sq_dist (eps is the initial squared "
                             "distance when it is None)")
        super()._check_group(group)
        _check_finite_nonnegative(group, "estim_sq_dist")
        _check_finite_nonnegative(group, "weighted_sq_norm_grads")

    def _step_size(self, first, dist_sq, grad_sq, init_sq):
        estim = max(first["estim_sq_dist"], dist_sq)
        weighted = estim * grad_sq + first["weighted_sq_norm_grads"]
        denom = math.sqrt(weighted) + first["eps"]
        eta = estim / denom if denom > 0 else 0.0
        return eta, dict(estim_sq_dist=estim, weighted_sq_norm_grads=weighted)
