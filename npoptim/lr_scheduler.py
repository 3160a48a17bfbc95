r"""Learning-rate schedulers, matching ``torch.optim.lr_scheduler`` (PyTorch 2.13).

A scheduler adjusts ``group["lr"]`` in each of an optimizer's ``param_groups`` (CyclicLR and
OneCycleLR also cycle ``group["momentum"]``, or ``group["betas"][0]`` for Adam-style
optimizers). Call :meth:`~LRScheduler.step` once per epoch (or per batch, for CyclicLR and
OneCycleLR) *after* the optimizer's step::

    opt = npoptim.Adam(params, lr=1e-3)
    sched = CosineAnnealingLR(opt, T_max=100)
    for epoch in range(100):
        opt.step(grads)
        sched.step()
        print(sched.get_last_lr())

Conventions, all as in torch:

* ``last_epoch`` counts the steps taken. Construction performs an initial step to
  ``last_epoch = 0``, which records ``initial_lr`` in every param group (``base_lrs`` are
  these) and sets the epoch-0 rate.
* Most schedulers are *chainable*: :meth:`~LRScheduler.get_lr` computes the next rate from
  the group's **current** ``lr`` (for example ``lr * gamma``), so several schedulers can act on
  one optimizer (:class:`ChainedScheduler`), and an ``lr`` changed from outside is respected.
  The price is that the recursion's floating-point rounding differs from the textbook closed
  form; the arithmetic here follows torch's order operation by operation so that the rates
  agree with torch's bit for bit, not just to rounding.
* ``step(epoch)`` is deprecated (as in torch): it sets ``last_epoch = epoch`` and uses the
  scheduler's closed form where it has one (StepLR, MultiStepLR, ConstantLR, LinearLR,
  ExponentialLR, PolynomialLR, CosineAnnealingLR), otherwise the chainable rule.
* ``state_dict()`` holds every attribute except the optimizer, under torch's names, so a
  torch scheduler's state_dict can be loaded here and back. Plain functions and lambdas
  (``lr_lambda``, ``scale_fn``) are not saved; a callable *object* has its ``__dict__`` saved.
  Restore a checkpoint by building the optimizer and scheduler, then loading the optimizer's
  state (its param groups carry ``lr``, ``initial_lr`` and the cycling keys), then the
  scheduler's.

The schedulers, with :math:`\eta_0` the base rate (``initial_lr``) and :math:`t` the
``last_epoch``:

====================================  =============================================================
:class:`LambdaLR`                     :math:`\eta_0 \, f(t)`
:class:`MultiplicativeLR`             :math:`\eta_{t-1} \, f(t)`
:class:`StepLR`                       :math:`\eta_0 \, \gamma^{\lfloor t / s \rfloor}`
:class:`MultiStepLR`                  :math:`\eta_0 \, \gamma^{\#\{m \le t\}}`
:class:`ConstantLR`                   :math:`\eta_0 \, k` for :math:`t < T`, then :math:`\eta_0`
:class:`LinearLR`                     :math:`\eta_0 \, (k_s + (k_e - k_s) \min(t, T) / T)`
:class:`ExponentialLR`                :math:`\eta_0 \, \gamma^t`
:class:`PolynomialLR`                 :math:`\eta_0 \, (1 - \min(t, T)/T)^p`
:class:`CosineAnnealingLR`            :math:`\eta_{min} + (\eta_0 - \eta_{min})(1 + \cos \pi t/T)/2`
:class:`CosineAnnealingWarmRestarts`  the same within each restart period
:class:`CyclicLR`                     triangular cycles between ``base_lr`` and ``max_lr``
:class:`OneCycleLR`                   warm up to ``max_lr``, then anneal far below the start
:class:`SequentialLR`                 one scheduler after another, switching at milestones
:class:`ChainedScheduler`             several schedulers' steps applied together each step
:class:`ReduceLROnPlateau`            :math:`\eta \leftarrow \max(\eta \cdot f, \eta_{min})` when a
                                      metric stops improving
====================================  =============================================================
"""
import copy
import math
import types
import warnings
from bisect import bisect_right
from collections import Counter
from contextlib import contextmanager

from npoptim.optim.optimizer import Optimizer

__all__ = [
    "LRScheduler",
    "LambdaLR",
    "MultiplicativeLR",
    "StepLR",
    "MultiStepLR",
    "ConstantLR",
    "LinearLR",
    "ExponentialLR",
    "PolynomialLR",
    "CosineAnnealingLR",
    "CosineAnnealingWarmRestarts",
    "CyclicLR",
    "OneCycleLR",
    "SequentialLR",
    "ChainedScheduler",
    "ReduceLROnPlateau",
]

_EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` is deprecated: with it the scheduler sets "
    "last_epoch = epoch and uses its closed form (where it has one) instead of the chainable "
    "form. Call `scheduler.step()` without arguments instead."
)


# --------------------------------------------------------------------------------- helpers
def _check_optimizer(optimizer):
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


def _per_group(name, optimizer, value):
    """``value`` once per param group; a list or tuple must already have one per group."""
    n_groups = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n_groups:
            raise ValueError(
                f"{name} must have the same length as optimizer.param_groups. "
                f"{name} has {len(value)} values, param_groups has {n_groups}."
            )
        return list(value)
    return [value] * n_groups


def _group_values(optimizer, key):
    """``[group[key] for each param group]``."""
    return [group[key] for group in optimizer.param_groups]


def _set_group_values(optimizer, key, values):
    values = list(values)
    if len(values) != len(optimizer.param_groups):
        raise ValueError(f"got {len(values)} values of {key!r} for "
                         f"{len(optimizer.param_groups)} param groups")
    for group, value in zip(optimizer.param_groups, values):
        group[key] = value


@contextmanager
def _flag(scheduler, name):
    """Set the boolean attribute ``name`` for the duration of a block."""
    setattr(scheduler, name, True)
    try:
        yield
    finally:
        setattr(scheduler, name, False)


def _save_callable(fn):
    """torch's rule for a user callable in a state_dict: a plain function or lambda is not
    saved (``None``); a callable object's ``__dict__`` is."""
    if fn is None or isinstance(fn, types.FunctionType) or not hasattr(fn, "__dict__"):
        return None
    return dict(fn.__dict__)


def _load_callable(fn, saved):
    if saved is not None:
        fn.__dict__.update(saved)


def _cosine(eta_min, base_lr, angle):
    r""":math:`\eta_{min} + (\eta_0 - \eta_{min})(1 + \cos\theta)/2`, in torch's order."""
    return eta_min + (base_lr - eta_min) * (1 + math.cos(angle)) / 2


def _setup_momentum(scheduler, optimizer, base_momentum, max_momentum, last_epoch):
    """Prepare a scheduler that cycles momentum (CyclicLR, OneCycleLR).

    The cycled value is ``group["momentum"]``, or ``group["betas"][0]`` when the optimizer has
    ``betas`` (Adam and relatives); ``scheduler.use_beta1`` records which. On a fresh start
    each group gets ``max_momentum`` and ``base_momentum`` entries and starts at
    ``max_momentum``. Returns the per-group ``(base_momentums, max_momentums)``.
    """
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError(
            "optimizer must support momentum or beta1 with `cycle_momentum` option enabled"
        )
    scheduler.use_beta1 = "betas" in optimizer.defaults
    base_momentums = _per_group("base_momentum", optimizer, base_momentum)
    max_momentums = _per_group("max_momentum", optimizer, max_momentum)
    if last_epoch == -1:
        for group, base, top in zip(optimizer.param_groups, base_momentums, max_momentums):
            _set_momentum(group, top, scheduler.use_beta1)
            group["max_momentum"] = top
            group["base_momentum"] = base
    return base_momentums, max_momentums


def _set_momentum(group, value, use_beta1):
    if use_beta1:
        group["betas"] = (value, *group["betas"][1:])
    else:
        group["momentum"] = value


# ------------------------------------------------------------------------------ base class
class LRScheduler:
    """Base class: ``last_epoch``, ``base_lrs``, :meth:`step`, :meth:`get_last_lr`, state dicts.

    A subclass implements :meth:`get_lr`, the rates for the new ``last_epoch`` (computed from
    the groups' current ``lr`` for a chainable scheduler), and optionally
    ``_get_closed_form_lr``, the rates as a function of ``last_epoch`` and ``base_lrs`` alone,
    which the deprecated ``step(epoch)`` uses.

    Parameters
    ----------
    optimizer : Optimizer
        the optimizer whose learning rates are scheduled.
    last_epoch : int
        ``-1`` (default) to start afresh: each group's ``lr`` is recorded as
        its ``initial_lr`` (unless it already has one). Otherwise the index of the last
        epoch of a run being resumed; the groups must already hold ``initial_lr``.
    """

    # True while step() computes the rates / during the constructor's step; once set they are
    # instance attributes, so state_dict has them, as torch's has
    _get_lr_called_within_step = False
    _is_initial = False
    _unsaved = ("optimizer",)  # attributes state_dict leaves out (or saves its own way)

    def __init__(self, optimizer, last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when "
                        "resuming scheduler with last_epoch >= 0.\n"
                        "This typically happens when:\n"
                        "1. You're trying to resume training from a checkpoint but haven't "
                        "properly loaded the optimizer state\n"
                        "2. You're using last_epoch >= 0 for a fresh training run (not "
                        "recommended)"
                    )
        self.base_lrs = _group_values(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self):
        """Reset the step count and take the constructor's step (``_is_initial`` set)."""
        self._step_count = 0
        with _flag(self, "_is_initial"):
            self.step()

    # ------------------------------------------------------------------------- state
    def state_dict(self):
        """Every attribute except the optimizer (copies), under torch's names."""
        return {key: copy.deepcopy(value) for key, value in self.__dict__.items()
                if key not in self._unsaved}

    def load_state_dict(self, state_dict):
        """Restore attributes from :meth:`state_dict` (npoptim's or torch's).

        Parameters
        ----------
        state_dict : dict
            a scheduler's :meth:`state_dict`.
        """
        self.__dict__.update(copy.deepcopy(state_dict))

    # ------------------------------------------------------------------------- rates
    def get_last_lr(self):
        """The rates set by the latest step, one per param group."""
        return list(self._last_lr)

    def get_lr(self):
        """The rates for the current ``last_epoch``; called by :meth:`step`.

        Chainable schedulers compute them from the groups' current ``lr``, so calling this
        outside ``step`` does not return the current rates: use :meth:`get_last_lr`.
        """
        raise NotImplementedError

    def _get_closed_form_lr(self):
        """The rates at ``last_epoch`` from ``base_lrs`` alone; without a closed form, the
        chainable rule."""
        return self.get_lr()

    def _warn_outside_step(self):
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please use "
                          "`get_last_lr()`.", UserWarning, stacklevel=3)

    def _current_lrs(self):
        return _group_values(self.optimizer, "lr")

    def _scaled_lrs(self, factor):
        return [group["lr"] * factor for group in self.optimizer.param_groups]

    # -------------------------------------------------------------------------- step
    def step(self, epoch=None):
        """Advance ``last_epoch`` by one and set the new rates.

        Parameters
        ----------
        epoch : int, optional
            deprecated: sets ``last_epoch`` to it and uses the closed form where the
            scheduler has one.
        """
        self._step_count += 1
        if epoch is not None:
            warnings.warn(_EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch=None):
        with _flag(self, "_get_lr_called_within_step"):
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                values = self._get_closed_form_lr()
        self._apply_lrs(values)

    def _apply_lrs(self, values):
        _set_group_values(self.optimizer, "lr", values)
        self._last_lr = self._current_lrs()


# ----------------------------------------------------------------------- factor schedulers
class _LambdaScheduler(LRScheduler):
    """Shared by LambdaLR and MultiplicativeLR: one factor function ``f(epoch)`` per group.

    ``state_dict`` saves a callable object's ``__dict__`` and nothing for a plain function.
    """

    _unsaved = ("optimizer", "lr_lambdas")

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        n_groups = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n_groups:
                raise ValueError(f"Expected {n_groups} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n_groups
        for fn in self.lr_lambdas:
            if not callable(fn):
                raise TypeError(f"lr_lambda should be a function, but got {type(fn).__name__}")
        super().__init__(optimizer, last_epoch)

    def state_dict(self):
        state = super().state_dict()
        state["lr_lambdas"] = [_save_callable(fn) for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict):
        state = dict(state_dict)
        saved = state.pop("lr_lambdas")
        super().load_state_dict(state)
        for fn, fn_state in zip(self.lr_lambdas, saved):
            _load_callable(fn, copy.deepcopy(fn_state))


class LambdaLR(_LambdaScheduler):
    r"""The base rate times a factor function of the epoch.

    .. math:: \eta_t = \eta_0 \, f(t)

    Parameters
    ----------
    optimizer : Optimizer
        wrapped optimizer.
    lr_lambda : callable or list
        ``f(epoch)``, or one per param group.
    last_epoch : int
        the index of the last epoch. Default: -1.
    """

    def get_lr(self):
        self._warn_outside_step()
        return [base_lr * fn(self.last_epoch)
                for fn, base_lr in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(_LambdaScheduler):
    r"""Multiply the current rate by a factor function of the epoch at each step.

    .. math:: \eta_t = \eta_{t-1} \, f(t) \quad (t \ge 1), \qquad \eta_0 = \eta_0

    Parameters
    ----------
    optimizer : Optimizer
        wrapped optimizer.
    lr_lambda : callable or list
        ``f(epoch)``, or one per param group.
    last_epoch : int
        the index of the last epoch. Default: -1.
    """

    def get_lr(self):
        self._warn_outside_step()
        if self._is_initial:
            return self._current_lrs()
        return [group["lr"] * fn(self.last_epoch)
                for fn, group in zip(self.lr_lambdas, self.optimizer.param_groups)]


class StepLR(LRScheduler):
    r"""Decay the rate by ``gamma`` every ``step_size`` epochs.

    .. math:: \eta_t = \eta_0 \, \gamma^{\lfloor t / \text{step\_size} \rfloor}

    Chainable: at each non-zero multiple of ``step_size`` the current rate is multiplied by
    :math:`\gamma`.

    Parameters
    ----------
    optimizer : Optimizer
        wrapped optimizer.
    step_size : int
        period of the decay.
    gamma : float
        multiplicative factor. Default: 0.1.
    last_epoch : int
        the index of the last epoch. Default: -1.
    """

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._current_lrs()
        return self._scaled_lrs(self.gamma)

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size)
                for base_lr in self.base_lrs]


class MultiStepLR(LRScheduler):
    r"""Decay the rate by ``gamma`` at each milestone epoch.

    .. math:: \eta_t = \eta_0 \, \gamma^{n(t)}, \quad n(t) = \#\{\text{milestones} \le t\}

    A milestone listed ``k`` times decays by :math:`\gamma^k` (milestones are kept as a
    ``Counter``).

    Parameters
    ----------
    optimizer : Optimizer
        wrapped optimizer.
    milestones : iterable of int
        epoch indices, increasing.
    gamma : float
        multiplicative factor. Default: 0.1.
    last_epoch : int
        the index of the last epoch. Default: -1.
    """

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        if self.last_epoch not in self.milestones:
            return self._current_lrs()
        return self._scaled_lrs(self.gamma ** self.milestones[self.last_epoch])

    def _get_closed_form_lr(self):
        milestones = sorted(self.milestones.elements())
        return [base_lr * self.gamma ** bisect_right(milestones, self.last_epoch)
                for base_lr in self.base_lrs]


class ConstantLR(LRScheduler):
    r"""Scale the rate by a constant ``factor`` until epoch ``total_iters``.

    .. math:: \eta_t = \begin{cases} \eta_0 \, k & t < T \\ \eta_0 & t \ge T \end{cases}

    Chainable: the rate is multiplied by :math:`k` at epoch 0 and by :math:`1/k` at epoch
    :math:`T`.

    Parameters
    ----------
    optimizer : Optimizer
        wrapped optimizer.
    factor : float
        :math:`k`, in [0, 1]. Default: 1/3.
    total_iters : int
        :math:`T`. Default: 5.
    last_epoch : int
        the index of the last epoch. Default: -1.
    """

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        if self.last_epoch == 0:
            return self._scaled_lrs(self.factor)
        if self.last_epoch != self.total_iters:
            return self._current_lrs()
        return self._scaled_lrs(1.0 / self.factor)

    def _get_closed_form_lr(self):
        return [base_lr * (self.factor + (self.last_epoch >= self.total_iters)
                           * (1 - self.factor))
                for base_lr in self.base_lrs]


class LinearLR(LRScheduler):
    r"""Scale the rate by a factor changing linearly from ``start_factor`` to ``end_factor``.

    .. math:: \eta_t = \eta_0 \left(k_s + (k_e - k_s) \frac{\min(t, T)}{T}\right)

    Chainable: with :math:`\Delta = k_e - k_s`, step :math:`t \le T` multiplies the current
    rate by :math:`1 + \Delta / (T k_s + (t-1)\Delta)`, the ratio of consecutive factors.
    (Typical use: a warm-up, ``LinearLR(opt, start_factor=0.01, total_iters=warmup)``.)

    Parameters
    ----------
    optimizer : Optimizer
        wrapped optimizer.
    start_factor : float
        :math:`k_s`, in (0, 1]. Default: 1/3.
    end_factor : float
        :math:`k_e`, in [0, 1]. Default: 1.0.
    total_iters : int
        :math:`T`. Default: 5.
    last_epoch : int
        the index of the last epoch. Default: -1.
    """

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and "
                             "less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        if self.last_epoch == 0:
            return self._scaled_lrs(self.start_factor)
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._current_lrs()
        delta = self.end_factor - self.start_factor
        return self._scaled_lrs(
            1.0 + delta / (self.total_iters * self.start_factor + (self.last_epoch - 1) * delta))

    def _get_closed_form_lr(self):
        return [base_lr * (self.start_factor + (self.end_factor - self.start_factor)
                           * min(self.total_iters, self.last_epoch) / self.total_iters)
                for base_lr in self.base_lrs]


class ExponentialLR(LRScheduler):
    r"""Decay the rate by ``gamma`` every epoch.

    .. math:: \eta_t = \eta_0 \, \gamma^t

    Parameters
    ----------
    optimizer : Optimizer
        wrapped optimizer.
    gamma : float
        multiplicative factor.
    last_epoch : int
        the index of the last epoch. Default: -1.
    """

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        if self._is_initial:  # resuming: the constructor's step must not decay once more
            return self._current_lrs()
        return self._scaled_lrs(self.gamma)

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** self.last_epoch for base_lr in self.base_lrs]


class PolynomialLR(LRScheduler):
    r"""Decay the rate polynomially to zero over ``total_iters`` epochs.

    .. math:: \eta_t = \eta_0 \left(1 - \frac{\min(t, T)}{T}\right)^p

    Chainable: step :math:`t \le T` multiplies the current rate by
    :math:`\left(\frac{1 - t/T}{1 - (t-1)/T}\right)^p`.

    Parameters
    ----------
    optimizer : Optimizer
        wrapped optimizer.
    total_iters : int
        :math:`T`. Default: 5.
    power : float
        :math:`p`. Default: 1.0.
    last_epoch : int
        the index of the last epoch. Default: -1.
    """

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._current_lrs()
        decay_factor = ((1.0 - self.last_epoch / self.total_iters)
                        / (1.0 - (self.last_epoch - 1) / self.total_iters)) ** self.power
        return self._scaled_lrs(decay_factor)

    def _get_closed_form_lr(self):
        return [base_lr * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters)
                ** self.power
                for base_lr in self.base_lrs]


# ------------------------------------------------------------------------- cosine schedules
class CosineAnnealingLR(LRScheduler):
    r"""Cosine annealing from the base rate to ``eta_min`` over ``T_max`` epochs (no restarts).

    The target is SGDR's closed form

    .. math:: \eta_t = \eta_{min} + \tfrac12(\eta_0 - \eta_{min})
              \left(1 + \cos\frac{t\pi}{T_{max}}\right),

    but, like torch, the rate is updated *recursively* from the current one:

    .. math:: \eta_t = \frac{1 + \cos(t\pi/T_{max})}{1 + \cos((t-1)\pi/T_{max})}
              (\eta_{t-1} - \eta_{min}) + \eta_{min},

    except at the steps just past an odd multiple of :math:`T_{max}` (where the denominator
    is 0), which add :math:`(\eta_0 - \eta_{min})(1 - \cos(\pi/T_{max}))/2`. Past
    :math:`T_{max}` the rate therefore climbs back up and the cosine repeats with period
    :math:`2T_{max}`. The recursion's rounding differs from the closed form's (by ~1e-16
    relative per step); this follows torch's recursion exactly.

    Parameters
    ----------
    optimizer : Optimizer
        wrapped optimizer.
    T_max : int
        half period, in epochs.
    eta_min : float
        minimum rate. Default: 0.
    last_epoch : int
        the index of the last epoch. Default: -1.
    """

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        if self._is_initial:
            return self._current_lrs()
        if self._step_count == 1 and self.last_epoch > 0:
            # first step of a resumed run: the closed form (torch's order: t*pi/T)
            return [_cosine(self.eta_min, base_lr, self.last_epoch * math.pi / self.T_max)
                    for base_lr in self.base_lrs]
        if (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            # just past the minimum: the ratio below would be 0/0
            return [group["lr"] + (base_lr - self.eta_min)
                    * (1 - math.cos(math.pi / self.T_max)) / 2
                    for base_lr, group in zip(self.base_lrs, self.optimizer.param_groups)]
        ratio = ((1 + math.cos(math.pi * self.last_epoch / self.T_max))
                 / (1 + math.cos(math.pi * (self.last_epoch - 1) / self.T_max)))
        return [ratio * (group["lr"] - self.eta_min) + self.eta_min
                for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [_cosine(self.eta_min, base_lr, math.pi * self.last_epoch / self.T_max)
                for base_lr in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    r"""Cosine annealing with warm restarts (SGDR), in closed form.

    .. math:: \eta_t = \eta_{min} + \tfrac12(\eta_0 - \eta_{min})
              \left(1 + \cos\frac{T_{cur}\pi}{T_i}\right)

    :math:`T_{cur}` counts the epochs since the last restart; at :math:`T_{cur} = T_i` the
    rate restarts at :math:`\eta_0` and the period becomes :math:`T_{i+1} = T_{mult} T_i`
    (:math:`T_0` at first).

    ``step(epoch)`` is supported (not deprecated here) and may be fractional, to anneal
    within an epoch: ``sched.step(epoch + i / iters_per_epoch)``. It then finds the period
    containing ``epoch`` in closed form.

    Parameters
    ----------
    optimizer : Optimizer
        wrapped optimizer.
    T_0 : int
        epochs until the first restart.
    T_mult : int
        factor by which the period grows after each restart. Default: 1.
    eta_min : float
        minimum rate. Default: 0.
    last_epoch : int
        the index of the last epoch. Default: -1.
    """

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(
                f"Expected float or int eta_min, but got {eta_min} of type {type(eta_min)}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        return [_cosine(self.eta_min, base_lr, math.pi * self.T_cur / self.T_i)
                for base_lr in self.base_lrs]

    def step(self, epoch=None):
        """Advance one epoch, or (``epoch`` given) jump to ``epoch``.

        Parameters
        ----------
        epoch : float, optional
            the epoch to jump to, possibly fractional; None advances by one.
        """
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        elif epoch < 0:
            raise ValueError(f"Expected non-negative epoch, but got {epoch}")
        elif epoch < self.T_0:
            self.T_i = self.T_0
            self.T_cur = epoch
        elif self.T_mult == 1:
            self.T_cur = epoch % self.T_0
        else:
            # periods T_0 T_mult^k: epoch lies in period n, which starts at the geometric sum
            # T_0 (T_mult^n - 1) / (T_mult - 1)
            n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
            self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
            self.T_i = self.T_0 * self.T_mult ** n
        self.last_epoch = math.floor(epoch)
        with _flag(self, "_get_lr_called_within_step"):
            values = self.get_lr()
        self._apply_lrs(values)


# ------------------------------------------------------------------------- cyclic schedules
class CyclicLR(LRScheduler):
    r"""Cyclical learning rate (Smith, 2017): triangular cycles between two bounds, per batch.

    With cycle length :math:`S = S_{up} + S_{down}`, cycle number
    :math:`c = \lfloor 1 + t/S \rfloor` and position :math:`x = 1 + t/S - c \in [0, 1)`,
    the height :math:`h` rises linearly from 0 to 1 over the first :math:`S_{up}` steps and
    falls back over the next :math:`S_{down}`:

    .. math::
        h = \begin{cases} x / r & x \le r \\ (x - 1)/(r - 1) & x > r \end{cases},
        \qquad r = S_{up}/S,

        \eta_t = \eta_{base} + (\eta_{max} - \eta_{base})\, h \, s,

        m_t = m_{max} - (m_{max} - m_{base})\, h \, s,

    where the amplitude scale :math:`s` is ``scale_fn(c)`` (``scale_mode="cycle"``) or
    ``scale_fn(t)`` (``"iterations"``); the modes are ``"triangular"`` (:math:`s = 1`),
    ``"triangular2"`` (:math:`s = 2^{1-c}`, halving each cycle) and ``"exp_range"``
    (:math:`s = \gamma^t`). With ``cycle_momentum`` the momentum (or Adam's
    :math:`\beta_1`) :math:`m` moves inversely to the rate. Not chainable: the rate depends
    on :math:`t` only. Call :meth:`step` after every batch.

    Parameters
    ----------
    optimizer : Optimizer
        wrapped optimizer.
    base_lr : float or list
        lower bound of the cycle, per group.
    max_lr : float or list
        upper bound (reached only when :math:`s = 1`).
    step_size_up : int
        :math:`S_{up}`, batches in the rising half. Default: 2000.
    step_size_down : int
        :math:`S_{down}`; ``None`` means :math:`S_{up}`.
    mode : str
        ``"triangular"``, ``"triangular2"`` or ``"exp_range"``; ignored when
        ``scale_fn`` is given. Default: ``"triangular"``.
    gamma : float
        :math:`\gamma` of ``"exp_range"``. Default: 1.0.
    scale_fn : callable
        custom :math:`s(\cdot)` with values in [0, 1]. Default: None.
    scale_mode : str
        ``"cycle"`` or ``"iterations"``, the argument of a custom
        ``scale_fn`` (the modes fix their own). Default: ``"cycle"``.
    cycle_momentum : bool
        cycle the momentum / :math:`\beta_1` too. Default: True.
    base_momentum : float or list
        momentum at the rate's peak. Default: 0.8.
    max_momentum : float or list
        momentum at the cycle's start. Default: 0.9.
    last_epoch : int
        the index of the last batch. Default: -1.
    """

    _unsaved = ("optimizer", "_scale_fn_custom")

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None,
                 mode="triangular", gamma=1.0, scale_fn=None, scale_mode="cycle",
                 cycle_momentum=True, base_momentum=0.8, max_momentum=0.9, last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            _set_group_values(optimizer, "lr", base_lrs)
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)

        step_size_up = float(step_size_up)
        step_size_down = float(step_size_down) if step_size_down is not None else step_size_up
        self.total_size = step_size_up + step_size_down
        self.step_ratio = step_size_up / self.total_size

        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_mode()

        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.base_momentums, self.max_momentums = _setup_momentum(
                self, optimizer, base_momentum, max_momentum, last_epoch)

        # torch's order: the constructor's step still sees base_lrs = the groups' initial_lr
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_mode(self):
        """The built-in modes fix the argument of their scale function."""
        if self._scale_fn_custom is None:
            self.scale_mode = "iterations" if self.mode == "exp_range" else "cycle"

    def scale_fn(self, x):
        """The amplitude scale :math:`s(x)` (see the class docstring).

        Parameters
        ----------
        x : float
            the cycle number (``scale_mode="cycle"``) or the step (``"iterations"``).
        """
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def get_lr(self):
        """The rates for batch ``last_epoch``; sets the groups' momentum as a side effect."""
        self._warn_outside_step()
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            height = x / self.step_ratio
        else:
            height = (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)

        lrs = [base_lr + (max_lr - base_lr) * height * scale
               for base_lr, max_lr in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            momentums = [top - (top - base) * height * scale
                         for base, top in zip(self.base_momentums, self.max_momentums)]
            for group, momentum in zip(self.optimizer.param_groups, momentums):
                _set_momentum(group, momentum, self.use_beta1)
        return lrs

    def state_dict(self):
        state = super().state_dict()
        state["_scale_fn_custom"] = _save_callable(self._scale_fn_custom)
        return state

    def load_state_dict(self, state_dict):
        state = dict(state_dict)
        saved = state.pop("_scale_fn_custom", None)
        state.pop("_scale_fn_ref", None)  # torch's cached bound method, if present
        super().load_state_dict(state)
        if self._scale_fn_custom is not None:
            _load_callable(self._scale_fn_custom, copy.deepcopy(saved))
        self._init_scale_mode()


class OneCycleLR(LRScheduler):
    r"""The 1cycle policy (Smith & Topin, 2018), per batch.

    The rate goes from :math:`\eta_{max}/d` (``initial_lr``) up to :math:`\eta_{max}` over the
    first ``pct_start`` of ``total_steps``, then down to
    :math:`\eta_{min} = \eta_{max}/(d\,d_f)`. With ``three_phase`` it instead comes back
    down to ``initial_lr`` symmetrically, then anneals to :math:`\eta_{min}` in a third
    phase. Within a phase from step :math:`a` to :math:`b`, with
    :math:`p = (t - a)/(b - a)`, the annealing from :math:`u` to :math:`v` is

    .. math::
        \text{cos:}\quad v + \tfrac{u - v}{2}\,(\cos(\pi p) + 1), \qquad
        \text{linear:}\quad (v - u)\,p + u.

    With ``cycle_momentum`` the momentum (or Adam's :math:`\beta_1`) is annealed inversely,
    between ``max_momentum`` and ``base_momentum``. The groups carry ``initial_lr``,
    ``max_lr``, ``min_lr`` (and ``max_momentum``, ``base_momentum``). Not chainable. Call
    :meth:`step` after every batch; stepping past ``total_steps`` raises ``ValueError``.

    Parameters
    ----------
    optimizer : Optimizer
        wrapped optimizer.
    max_lr : float or list
        peak rate, per group.
    total_steps : int
        steps in the cycle; or give ``epochs`` and ``steps_per_epoch``.
    epochs : int
        with ``steps_per_epoch``, ``total_steps = epochs * steps_per_epoch``.
    steps_per_epoch : int
        see ``epochs``.
    pct_start : float
        fraction of the cycle spent increasing the rate. Default: 0.3.
    anneal_strategy : str
        ``"cos"`` or ``"linear"``. Default: ``"cos"``.
    cycle_momentum : bool
        cycle momentum / :math:`\beta_1` too. Default: True.
    base_momentum : float or list
        momentum at the peak rate. Default: 0.85.
    max_momentum : float or list
        momentum at the start and end. Default: 0.95.
    div_factor : float
        :math:`d`, ``initial_lr = max_lr / d``. Default: 25.
    final_div_factor : float
        :math:`d_f`, ``min_lr = initial_lr / d_f``. Default: 1e4.
    three_phase : bool
        use the three-phase schedule. Default: False.
    last_epoch : int
        the index of the last batch. Default: -1.
    """

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start=0.3, anneal_strategy="cos", cycle_momentum=True,
                 base_momentum=0.85, max_momentum=0.95, div_factor=25.0,
                 final_div_factor=1e4, three_phase=False, last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer

        if total_steps is not None:
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(
                    f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")

        self._schedule_phases = self._phases(pct_start, three_phase)

        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._anneal_func_type = anneal_strategy

        max_lrs = _per_group("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for group, top in zip(optimizer.param_groups, max_lrs):
                group["initial_lr"] = top / div_factor
                group["max_lr"] = top
                group["min_lr"] = group["initial_lr"] / final_div_factor

        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            _setup_momentum(self, optimizer, base_momentum, max_momentum, last_epoch)

        super().__init__(optimizer, last_epoch)

    def _phases(self, pct_start, three_phase):
        """Each phase: its last step and the group keys it anneals from and to."""
        def phase(end_step, start_lr, end_lr, start_momentum, end_momentum):
            return {"end_step": end_step, "start_lr": start_lr, "end_lr": end_lr,
                    "start_momentum": start_momentum, "end_momentum": end_momentum}

        warmup_end = float(pct_start * self.total_steps) - 1
        last = self.total_steps - 1
        if three_phase:
            return [
                phase(warmup_end, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                phase(float(2 * pct_start * self.total_steps) - 2,
                      "max_lr", "initial_lr", "base_momentum", "max_momentum"),
                phase(last, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        return [
            phase(warmup_end, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
            phase(last, "max_lr", "min_lr", "base_momentum", "max_momentum"),
        ]

    @staticmethod
    def _annealing_cos(start, end, pct):
        """Cosine anneal from ``start`` to ``end`` as ``pct`` goes from 0 to 1."""
        cos_out = math.cos(math.pi * pct) + 1
        return end + (start - end) / 2.0 * cos_out

    @staticmethod
    def _annealing_linear(start, end, pct):
        """Linear anneal from ``start`` to ``end`` as ``pct`` goes from 0 to 1."""
        return (end - start) * pct + start

    def _anneal_func(self, start, end, pct):
        if self._anneal_func_type == "cos":
            return self._annealing_cos(start, end, pct)
        if self._anneal_func_type == "linear":
            return self._annealing_linear(start, end, pct)
        raise ValueError(f"Unknown _anneal_func_type: {self._anneal_func_type}")

    def get_lr(self):
        """The rates for batch ``last_epoch``; sets the groups' momentum as a side effect."""
        self._warn_outside_step()
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise ValueError(f"Tried to step {step_num} times. The specified number of total "
                             f"steps is {self.total_steps}")
        # the phase containing step_num (the last phase also takes anything beyond it)
        start_step = 0.0
        for i, phase in enumerate(self._schedule_phases):
            if step_num <= phase["end_step"] or i == len(self._schedule_phases) - 1:
                break
            start_step = phase["end_step"]
        pct = (step_num - start_step) / (phase["end_step"] - start_step)

        lrs = []
        for group in self.optimizer.param_groups:
            lrs.append(self._anneal_func(group[phase["start_lr"]], group[phase["end_lr"]], pct))
            if self.cycle_momentum:
                momentum = self._anneal_func(group[phase["start_momentum"]],
                                             group[phase["end_momentum"]], pct)
                _set_momentum(group, momentum, self.use_beta1)
        return lrs


# ------------------------------------------------------------------- combining schedulers
class _SchedulerContainer(LRScheduler):
    """Shared by SequentialLR and ChainedScheduler: checks, and state dicts that nest the
    wrapped schedulers' state dicts under ``_schedulers``."""

    _unsaved = ("optimizer", "_schedulers")

    def _check_schedulers(self, schedulers, optimizer):
        name = type(self).__name__
        for i, scheduler in enumerate(schedulers):
            if not hasattr(scheduler, "optimizer"):
                raise TypeError(f"{name} at index {i} should have `optimizer` as its "
                                "attribute.")
            if isinstance(scheduler, ReduceLROnPlateau):
                raise ValueError(
                    f"{name} does not support `ReduceLROnPlateau` scheduler as it requires "
                    "additional kwargs to be specified when calling `step`, but got one at "
                    f"index {i} in the given schedulers sequence.")
            if optimizer != scheduler.optimizer:
                raise ValueError(
                    f"{name} expects all schedulers to belong to the same optimizer, but got "
                    f"scheduler {type(scheduler).__name__} at index {i} has "
                    f"{scheduler.optimizer}, which is different from "
                    f"{type(optimizer).__name__}.")

    def state_dict(self):
        state = super().state_dict()
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict):
        state = dict(state_dict)
        saved = state.pop("_schedulers")
        super().load_state_dict(state)
        for scheduler, scheduler_state in zip(self._schedulers, saved):
            scheduler.load_state_dict(scheduler_state)


class SequentialLR(_SchedulerContainer):
    r"""Run schedulers one after another, switching at the milestone epochs.

    Scheduler :math:`i` runs for epochs in :math:`[m_{i-1}, m_i)`. At a milestone the next
    scheduler starts from its own epoch 0 (its closed form at 0, from its ``base_lrs``), so
    each sees its epochs counted from its start. The usual warm-up recipe::

        warmup = LinearLR(opt, start_factor=0.01, total_iters=w)
        decay = CosineAnnealingLR(opt, T_max=total - w)
        sched = SequentialLR(opt, [warmup, decay], milestones=[w])

    Construction resets every group's ``lr`` to ``initial_lr`` and undoes the constructor
    steps of the wrapped schedulers, then takes the first one's initial step.

    Parameters
    ----------
    optimizer : Optimizer
        wrapped optimizer.
    schedulers : list
        the schedulers, all of ``optimizer``.
    milestones : list of int
        ``len(schedulers) - 1`` increasing epochs.
    last_epoch : int
        the index of the last epoch. Default: -1.
    """

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if len(schedulers) < 1:
            raise ValueError(f"{type(self).__name__} expects at least one scheduler, but got "
                             "no scheduler.")
        self._check_schedulers(schedulers, optimizer)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                "Sequential Schedulers expects number of schedulers provided to be one more "
                f"than the number of milestone points, but got number of schedulers "
                f"{len(schedulers)} and the number of milestones to be equal to "
                f"{len(milestones)}")
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer

        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        self.recursive_undo()
        first = self._schedulers[bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def recursive_undo(self, sched=None):
        """Undo the constructor step of every wrapped scheduler (nested ones included).

        Parameters
        ----------
        sched : LRScheduler, optional
            the scheduler to undo (with its children); None means this one.
        """
        scheduler = self if sched is None else sched
        if hasattr(scheduler, "_schedulers"):
            for child in scheduler._schedulers:
                self.recursive_undo(child)
        elif hasattr(scheduler, "last_epoch"):
            scheduler.last_epoch -= 1

    def step(self):
        """Advance one epoch with the scheduler whose interval contains it."""
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._update_lr(0)  # the next scheduler starts at its epoch 0
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


class ChainedScheduler(_SchedulerContainer):
    r"""Step several chainable schedulers together: each :meth:`step` calls every wrapped
    scheduler's ``step`` in order, so their factors multiply.

    For example ``ChainedScheduler([ConstantLR(opt, factor=0.1, total_iters=2),
    ExponentialLR(opt, gamma=0.9)])`` gives :math:`\eta_0 \cdot 0.9^t`, times 0.1 for
    :math:`t < 2`.

    Parameters
    ----------
    schedulers : sequence
        the schedulers, all of the same optimizer.
    optimizer : Optimizer
        the optimizer; default: the first scheduler's.
    """

    def __init__(self, schedulers, optimizer=None):
        if len(schedulers) < 1:
            raise ValueError(f"{type(self).__name__} expects at least one scheduler to be "
                             "chained, but got no scheduler.")
        optimizer = optimizer or schedulers[0].optimizer
        self._check_schedulers(schedulers, optimizer)
        self._schedulers = schedulers
        self.optimizer = optimizer
        self._last_lr = _group_values(self._schedulers[-1].optimizer, "lr")

    def step(self):
        """Step every wrapped scheduler, in order."""
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = _group_values(self._schedulers[-1].optimizer, "lr")


# ---------------------------------------------------------------------- metric-driven
class ReduceLROnPlateau(LRScheduler):
    r"""Reduce the rate when a metric has stopped improving.

    ``step(metric)`` compares the metric with the best so far. It improves on ``best`` when

    ==========  ===================================  ===================================
    mode        ``threshold_mode="rel"``             ``threshold_mode="abs"``
    ==========  ===================================  ===================================
    ``"min"``   :math:`a < best\,(1 - \theta)`       :math:`a < best - \theta`
    ``"max"``   :math:`a > best\,(1 + \theta)`       :math:`a > best + \theta`
    ==========  ===================================  ===================================

    Each step without improvement counts as a bad epoch (but none count during the
    ``cooldown`` steps after a reduction). When the bad epochs exceed ``patience``, every
    group's rate becomes

    .. math:: \eta \leftarrow \max(\eta \cdot f, \eta_{min})

    unless that changes it by no more than ``eps``; then the count restarts and the cooldown
    begins.

    Parameters
    ----------
    optimizer : Optimizer
        wrapped optimizer.
    mode : str
        ``"min"`` (the metric should decrease) or ``"max"``. Default: ``"min"``.
    factor : float
        :math:`f < 1`. Default: 0.1.
    patience : int
        bad epochs tolerated before a reduction. Default: 10.
    threshold : float
        :math:`\theta`, the improvement that counts. Default: 1e-4.
    threshold_mode : str
        ``"rel"`` or ``"abs"``. Default: ``"rel"``.
    cooldown : int
        epochs after a reduction during which bad epochs are ignored.
        Default: 0.
    min_lr : float or list
        :math:`\eta_{min}`, for all groups or per group. Default: 0.
    eps : float
        smallest change of rate applied. Default: 1e-8.
    """

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8):
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        self.factor = factor
        _check_optimizer(optimizer)
        self.optimizer = optimizer

        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise ValueError(
                    f"expected {len(optimizer.param_groups)} min_lrs, got {len(min_lr)}")
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)

        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = self._current_lrs()
        self._init_is_better(mode=mode, threshold=threshold, threshold_mode=threshold_mode)
        self._reset()

    def _reset(self):
        """Forget the best value, the bad-epoch count and the cooldown."""
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def step(self, metrics, epoch=None):
        """Record the epoch's metric, and reduce the rates if it has plateaued.

        Parameters
        ----------
        metrics : float
            the epoch's value of the monitored metric.
        epoch : int, optional
            deprecated: sets ``last_epoch``; it does not affect the rates.
        """
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(_EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self.last_epoch = epoch

        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1

        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs during the cooldown are ignored

        if self.num_bad_epochs > self.patience:
            self._reduce_lr(epoch)
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0

        self._last_lr = self._current_lrs()

    def _reduce_lr(self, epoch):
        if len(self.optimizer.param_groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    "The number of param groups in the `optimizer` "
                    f"({len(self.optimizer.param_groups)}) differs from when "
                    f"`ReduceLROnPlateau` was initialized ({len(self.min_lrs)}), usually due "
                    "to a new param group being added to the optimizer. Please modify the "
                    "`min_lrs` field to match the length of the `optimizer` param groups.")
            self.min_lrs = [self.default_min_lr] * len(self.optimizer.param_groups)

        for group, min_lr in zip(self.optimizer.param_groups, self.min_lrs):
            old_lr = float(group["lr"])
            new_lr = max(old_lr * self.factor, min_lr)
            if old_lr - new_lr > self.eps:
                group["lr"] = new_lr

    @property
    def in_cooldown(self):
        """Whether the scheduler is in the cooldown after a reduction."""
        return self.cooldown_counter > 0

    def _is_better(self, a, best):
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min" and self.threshold_mode == "abs":
            return a < best - self.threshold
        if self.mode == "max" and self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def _init_is_better(self, mode, threshold, threshold_mode):
        if mode not in {"min", "max"}:
            raise ValueError("mode " + mode + " is unknown!")
        if threshold_mode not in {"rel", "abs"}:
            raise ValueError("threshold mode " + threshold_mode + " is unknown!")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        self._init_is_better(mode=self.mode, threshold=self.threshold,
                             threshold_mode=self.threshold_mode)
