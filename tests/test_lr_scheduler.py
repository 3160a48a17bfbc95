"""npoptim.lr_scheduler against torch.optim.lr_scheduler (PyTorch 2.13), side by side.

Every case builds the same scheduler on an npoptim optimizer and on a torch optimizer with
the same param groups (one builder, called with either module), steps both, and after every
step compares the param groups' scheduled entries (``lr``, ``initial_lr``, momentum or
``betas``, ...), ``get_last_lr()`` and the whole ``state_dict()`` to 1e-12 relative, and the
groups' rates and momenta exactly (the implementation follows torch's arithmetic operation
by operation). The same runs are repeated with a state_dict round trip (and with loading
torch's state_dict) in the middle.
"""
import copy
import math
import numbers
import subprocess
import sys
import warnings

import numpy as np
import pytest

from npoptim import lr_scheduler as N
from npoptim.optim.adagrad import Adagrad
from npoptim.optim.adam import Adam
from npoptim.optim.sgd import SGD
from torch_compare import needs_torch, torch

T = None if torch is None else torch.optim.lr_scheduler

RTOL = 1e-12
STEPS = 60
GROUP_LRS = (0.1, 0.03)
# param-group entries that schedulers read or write
SCHEDULED_KEYS = ("lr", "initial_lr", "max_lr", "min_lr", "momentum", "betas",
                  "max_momentum", "base_momentum")


# ------------------------------------------------------------------ optimizers for the tests
# kinds: "adam" has betas (beta1 is cycled), "sgd" has momentum, "plain" (Adagrad) has neither
def make_ours(kind, lrs=GROUP_LRS):
    groups = [{"params": [np.zeros(3)], "lr": lr} for lr in lrs]
    if kind == "sgd":
        return SGD(groups, lr=0.1, momentum=0.9)
    return {"adam": Adam, "plain": Adagrad}[kind](groups, lr=0.1)


def make_torch(kind, lrs=GROUP_LRS):
    groups = [{"params": [torch.zeros(3, requires_grad=True)], "lr": lr} for lr in lrs]
    if kind == "sgd":
        return torch.optim.SGD(groups, lr=0.1, momentum=0.9)
    return {"adam": torch.optim.Adam, "plain": torch.optim.Adagrad}[kind](groups, lr=0.1)


# ----------------------------------------------------------------------------- comparisons
def assert_same_value(ours, theirs, where):
    if isinstance(theirs, dict):
        assert isinstance(ours, dict), where
        assert set(ours) == set(theirs), f"{where}: keys {sorted(ours)} != {sorted(theirs)}"
        for key in theirs:
            assert_same_value(ours[key], theirs[key], f"{where}[{key!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert isinstance(ours, (list, tuple)) and len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same_value(a, b, f"{where}[{i}]")
    elif isinstance(theirs, bool) or theirs is None or isinstance(theirs, str):
        assert ours == theirs and type(ours) is type(theirs), f"{where}: {ours!r} != {theirs!r}"
    elif isinstance(theirs, numbers.Real):
        assert isinstance(ours, numbers.Real) and not isinstance(ours, bool), where
        if math.isinf(theirs) or theirs == 0:
            assert ours == theirs, f"{where}: {ours!r} != {theirs!r}"
        else:
            np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=0, err_msg=where)
    else:
        raise AssertionError(f"{where}: unexpected value {theirs!r} in torch's state")


def assert_same(ours, theirs, ours_opt, torch_opt, where):
    assert len(ours_opt.param_groups) == len(torch_opt.param_groups)
    for k, (group, tgroup) in enumerate(zip(ours_opt.param_groups, torch_opt.param_groups)):
        for key in SCHEDULED_KEYS:
            assert (key in group) == (key in tgroup), f"{where}: group {k} {key!r} presence"
            if key in tgroup:
                assert_same_value(group[key], tgroup[key], f"{where}: group {k} {key!r}")
    assert_same_value(ours.get_last_lr(), theirs.get_last_lr(), f"{where}: get_last_lr()")
    assert_same_value(ours.state_dict(), theirs.state_dict(), f"{where}: state_dict()")


def scheduled_values(opt):
    """The group entries a scheduler may change, as one tuple (to see that they do change)."""
    values = []
    for group in opt.param_groups:
        values.append(group["lr"])
        if "momentum" in group:
            values.append(group["momentum"])
        if "betas" in group:
            values.append(group["betas"][0])
    return tuple(values)


# --------------------------------------------------------------------------------- running
class Pair:
    """The same scheduler on an npoptim optimizer and on a torch optimizer."""

    def __init__(self, case):
        self.case = case
        self.opt, self.topt = make_ours(case.kind, case.lrs), make_torch(case.kind, case.lrs)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # npoptim must not warn
            self.sched = case.build(N, self.opt)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.tsched = case.build(T, self.topt)

    def check(self, where):
        assert_same(self.sched, self.tsched, self.opt, self.topt, where)
        # the arithmetic follows torch's operation by operation: equal, not just within RTOL
        assert scheduled_values(self.opt) == scheduled_values(self.topt), where

    def step(self, i):
        args = () if self.case.metrics is None else (self.case.metrics[i],)
        self.opt.step([None] * len(self.opt.params))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            self.sched.step(*args)
        self.topt.step()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.tsched.step(*args)

    def reload(self, source="ours"):
        """Rebuild both sides (fresh optimizer and scheduler), then load the saved states.

        ``source="torch"``: npoptim's new scheduler loads torch's state_dict instead of its own.
        """
        saved = self.sched.state_dict() if source == "ours" else self.tsched.state_dict()
        saved = copy.deepcopy(saved)  # no live references into the old scheduler
        saved_torch = copy.deepcopy(self.tsched.state_dict())

        opt = make_ours(self.case.kind, self.case.lrs)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            sched = self.case.build(N, opt)
        opt.load_state_dict(self.opt.state_dict())
        sched.load_state_dict(saved)
        self.opt, self.sched = opt, sched

        topt = make_torch(self.case.kind, self.case.lrs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tsched = self.case.build(T, topt)
        topt.load_state_dict(self.topt.state_dict())
        tsched.load_state_dict(saved_torch)
        self.topt, self.tsched = topt, tsched


def run(case, reload_at=None, source="ours"):
    """Step a case side by side, checking after every step.

    Returns the scheduled values seen on each side, ``(ours, torch's)``.
    """
    pair = Pair(case)
    pair.check("after construction")
    seen, tseen = [scheduled_values(pair.opt)], [scheduled_values(pair.topt)]
    for i in range(case.steps):
        if i == reload_at:
            pair.reload(source)
            pair.check(f"after reloading at step {i}")
        pair.step(i)
        pair.check(f"step {i + 1}")
        seen.append(scheduled_values(pair.opt))
        tseen.append(scheduled_values(pair.topt))
    return seen, tseen


# ----------------------------------------------------------------------------------- cases
class Case:
    def __init__(self, name, build, kind="adam", lrs=GROUP_LRS, steps=STEPS, metrics=None,
                 min_distinct=3):
        self.name, self.build, self.kind, self.lrs = name, build, kind, lrs
        self.steps, self.metrics, self.min_distinct = steps, metrics, min_distinct

    def __repr__(self):
        return self.name


class Decay:
    """A callable object with state, which state_dict saves (unlike a function)."""

    def __init__(self, rate):
        self.rate = rate
        self.calls = 0

    def __call__(self, epoch):
        self.calls += 1
        return self.rate ** (epoch + 0.01 * self.calls)


class Wave:
    """A callable scale_fn object."""

    def __init__(self, period):
        self.period = period

    def __call__(self, x):
        return 0.5 * (1 + math.cos(2 * math.pi * x / self.period))


def resumed(build, factor=2.0):
    """Build after giving each group an ``initial_lr``, as a resumed run has."""
    def build_resumed(L, o):
        for group in o.param_groups:
            group["initial_lr"] = group["lr"] * factor
        return build(L, o)
    return build_resumed


def plateau_metrics(sign=1.0, seed=0):
    """Improves for 15 epochs, then plateaus with noise."""
    rng = np.random.default_rng(seed)
    return [sign * (1.0 / (1 + 0.2 * min(i, 15)) + 0.02 * rng.standard_normal())
            for i in range(STEPS)]


CASES = [
    # LambdaLR
    Case("LambdaLR-exp", lambda L, o: L.LambdaLR(o, lambda e: 0.95 ** e)),
    Case("LambdaLR-list", lambda L, o: L.LambdaLR(
        o, [lambda e: 1 / (1 + e), lambda e: 0.5 * (1 + math.cos(e / 5))])),
    Case("LambdaLR-callable-object", lambda L, o: L.LambdaLR(o, Decay(0.97))),
    # MultiplicativeLR
    Case("MultiplicativeLR-const", lambda L, o: L.MultiplicativeLR(o, lambda e: 0.97)),
    Case("MultiplicativeLR-list", lambda L, o: L.MultiplicativeLR(
        o, (lambda e: 0.9 if e % 3 == 0 else 1.0, lambda e: 1.01)), kind="sgd"),
    Case("MultiplicativeLR-callable-object",
         lambda L, o: L.MultiplicativeLR(o, [Decay(0.99), Decay(0.95)])),
    # StepLR
    Case("StepLR-7-0.5", lambda L, o: L.StepLR(o, step_size=7, gamma=0.5)),
    Case("StepLR-1-0.9", lambda L, o: L.StepLR(o, 1, 0.9), kind="sgd"),
    Case("StepLR-default-gamma", lambda L, o: L.StepLR(o, 20)),
    Case("StepLR-resumed", resumed(lambda L, o: L.StepLR(o, 4, 0.7, last_epoch=9))),
    # MultiStepLR
    Case("MultiStepLR-repeated", lambda L, o: L.MultiStepLR(o, [5, 15, 15, 40], gamma=0.5)),
    Case("MultiStepLR-default", lambda L, o: L.MultiStepLR(o, [10, 30]), kind="sgd"),
    # ConstantLR
    Case("ConstantLR-default", lambda L, o: L.ConstantLR(o), min_distinct=2),
    Case("ConstantLR-0.25-20", lambda L, o: L.ConstantLR(o, factor=0.25, total_iters=20),
         min_distinct=2),
    # LinearLR
    Case("LinearLR-default", lambda L, o: L.LinearLR(o)),
    Case("LinearLR-warmup", lambda L, o: L.LinearLR(o, start_factor=0.01, total_iters=10)),
    Case("LinearLR-decay", lambda L, o: L.LinearLR(o, 1.0, 0.1, total_iters=40), kind="sgd"),
    Case("LinearLR-to-zero", lambda L, o: L.LinearLR(o, 1.0, 0.0, total_iters=STEPS)),
    # ExponentialLR
    Case("ExponentialLR-0.95", lambda L, o: L.ExponentialLR(o, 0.95)),
    Case("ExponentialLR-0.5", lambda L, o: L.ExponentialLR(o, gamma=0.5), kind="sgd"),
    Case("ExponentialLR-resumed", resumed(lambda L, o: L.ExponentialLR(o, 0.9, last_epoch=3))),
    # PolynomialLR
    Case("PolynomialLR-default", lambda L, o: L.PolynomialLR(o)),
    Case("PolynomialLR-30-2", lambda L, o: L.PolynomialLR(o, total_iters=30, power=2.0)),
    Case("PolynomialLR-60-0.5", lambda L, o: L.PolynomialLR(o, STEPS, 0.5), kind="sgd"),
    # CosineAnnealingLR
    Case("CosineAnnealingLR-10", lambda L, o: L.CosineAnnealingLR(o, T_max=10)),
    Case("CosineAnnealingLR-7-eta", lambda L, o: L.CosineAnnealingLR(o, 7, eta_min=1e-3)),
    Case("CosineAnnealingLR-60", lambda L, o: L.CosineAnnealingLR(o, STEPS), kind="sgd"),
    Case("CosineAnnealingLR-1", lambda L, o: L.CosineAnnealingLR(o, 1, 0.01), min_distinct=2),
    Case("CosineAnnealingLR-resumed",
         resumed(lambda L, o: L.CosineAnnealingLR(o, 20, 1e-4, last_epoch=5))),
    # CosineAnnealingWarmRestarts
    Case("CAWR-10", lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=10)),
    Case("CAWR-5-x2", lambda L, o: L.CosineAnnealingWarmRestarts(o, 5, T_mult=2, eta_min=1e-3)),
    Case("CAWR-1-x3", lambda L, o: L.CosineAnnealingWarmRestarts(o, 1, 3), kind="sgd"),
    # CyclicLR
    Case("CyclicLR-triangular-betas", lambda L, o: L.CyclicLR(
        o, base_lr=[0.01, 0.001], max_lr=[0.1, 0.05], step_size_up=5)),
    Case("CyclicLR-triangular2-momentum", lambda L, o: L.CyclicLR(
        o, 0.01, 0.1, step_size_up=4, step_size_down=8, mode="triangular2"), kind="sgd"),
    Case("CyclicLR-exp_range", lambda L, o: L.CyclicLR(
        o, 0.001, 0.1, step_size_up=6, mode="exp_range", gamma=0.98,
        base_momentum=[0.7, 0.75], max_momentum=[0.9, 0.95]), kind="sgd"),
    Case("CyclicLR-scale_fn-cycle", lambda L, o: L.CyclicLR(
        o, 0.01, 0.1, step_size_up=3, step_size_down=5,
        scale_fn=lambda x: 0.5 * (1 + math.sin(x * math.pi / 2)))),
    Case("CyclicLR-scale_fn-object-iterations", lambda L, o: L.CyclicLR(
        o, 0.01, 0.1, 5, scale_fn=Wave(23), scale_mode="iterations"), kind="sgd"),
    Case("CyclicLR-no-momentum", lambda L, o: L.CyclicLR(
        o, 0.02, 0.2, 7, cycle_momentum=False), kind="plain"),
    Case("CyclicLR-resumed", resumed(lambda L, o: L.CyclicLR(
        o, 0.01, 0.1, 4, cycle_momentum=False, last_epoch=7))),
    # OneCycleLR
    Case("OneCycleLR-cos-betas", lambda L, o: L.OneCycleLR(o, max_lr=0.1, total_steps=STEPS)),
    Case("OneCycleLR-linear-momentum", lambda L, o: L.OneCycleLR(
        o, [0.1, 0.05], epochs=6, steps_per_epoch=10, anneal_strategy="linear"), kind="sgd"),
    Case("OneCycleLR-three-phase", lambda L, o: L.OneCycleLR(
        o, [0.1, 0.02], total_steps=STEPS, pct_start=0.25, three_phase=True, div_factor=10.0,
        final_div_factor=100.0, base_momentum=[0.8, 0.85], max_momentum=0.9)),
    Case("OneCycleLR-three-phase-linear-sgd", lambda L, o: L.OneCycleLR(
        o, 0.3, total_steps=STEPS + 15, three_phase=True, anneal_strategy="linear"),
        kind="sgd"),
    Case("OneCycleLR-no-momentum", lambda L, o: L.OneCycleLR(
        o, 0.1, total_steps=STEPS, cycle_momentum=False), kind="plain"),
    # SequentialLR
    Case("SequentialLR-warmup-cosine", lambda L, o: L.SequentialLR(
        o, [L.LinearLR(o, start_factor=0.01, total_iters=10),
            L.CosineAnnealingLR(o, T_max=STEPS - 10, eta_min=1e-5)], milestones=[10])),
    Case("SequentialLR-three", lambda L, o: L.SequentialLR(
        o, [L.ConstantLR(o, 0.5, 5), L.ExponentialLR(o, 0.9), L.StepLR(o, 10, 0.5)],
        [5, 25]), kind="sgd"),
    Case("SequentialLR-nested-chain", lambda L, o: L.SequentialLR(
        o, [L.ChainedScheduler([L.LinearLR(o, 0.1, total_iters=8), L.ExponentialLR(o, 0.97)]),
            L.CosineAnnealingLR(o, 20)], [8])),
    # ChainedScheduler
    Case("ChainedScheduler-constant-exp", lambda L, o: L.ChainedScheduler(
        [L.ConstantLR(o, factor=0.5, total_iters=4), L.ExponentialLR(o, gamma=0.95)])),
    Case("ChainedScheduler-linear-multistep", lambda L, o: L.ChainedScheduler(
        [L.LinearLR(o, 0.1, total_iters=10), L.MultiStepLR(o, [20, 40], 0.3)], optimizer=o),
        kind="sgd"),
    Case("ChainedScheduler-cosine-exp", lambda L, o: L.ChainedScheduler(
        [L.CosineAnnealingLR(o, 15, 1e-4), L.ExponentialLR(o, 0.98)])),
    # ReduceLROnPlateau
    Case("ReduceLROnPlateau-min-rel", lambda L, o: L.ReduceLROnPlateau(o, patience=3),
         metrics=plateau_metrics()),
    Case("ReduceLROnPlateau-max-abs-cooldown", lambda L, o: L.ReduceLROnPlateau(
        o, mode="max", factor=0.5, patience=1, threshold=0.01, threshold_mode="abs",
        cooldown=2), metrics=plateau_metrics(-1.0, seed=1), kind="sgd"),
    Case("ReduceLROnPlateau-min-abs-min_lr-list", lambda L, o: L.ReduceLROnPlateau(
        o, "min", 0.5, 0, threshold_mode="abs", min_lr=[0.01, 0.001]),
        metrics=plateau_metrics(seed=2)),
    Case("ReduceLROnPlateau-max-rel-eps", lambda L, o: L.ReduceLROnPlateau(
        o, mode="max", factor=0.7, patience=2, cooldown=1, min_lr=0.02, eps=1e-3),
        metrics=plateau_metrics(-1.0, seed=3)),
]


@needs_torch
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_matches_torch(case):
    seen, tseen = run(case)
    # the schedule must actually move, or matching torch would prove little
    assert len(set(seen)) >= case.min_distinct, f"{case}: only {len(set(seen))} distinct values"


@needs_torch
@pytest.mark.parametrize("case", CASES, ids=repr)
@pytest.mark.parametrize("reload_at", [1, 23])
def test_state_dict_round_trip(case, reload_at):
    run(case, reload_at=reload_at)


@needs_torch
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_loads_torch_state_dict(case):
    run(case, reload_at=17, source="torch")


@needs_torch
def test_comparison_detects_a_difference():
    """The checks are real: a slightly different gamma is caught."""
    def build(L, o):
        return L.StepLR(o, 7, gamma=0.5 if L is N else 0.5 * (1 + 1e-10))
    with pytest.raises(AssertionError):
        run(Case("StepLR-mismatch", build))


@needs_torch
def test_cosine_annealing_is_torchs_recursion_not_the_closed_form():
    """The recursion's rounding differs from the closed form's (by ~1e-16, inside RTOL);
    the exact comparison of test_matches_torch is what pins the recursion down."""
    case = next(c for c in CASES if c.name == "CosineAnnealingLR-60")
    seen, tseen = run(case)
    closed = [0.5 * lr * (1 + math.cos(math.pi * t / STEPS))
              for t in range(STEPS + 1) for lr in GROUP_LRS]
    recursive = [v for values in seen for v in values[::2]]  # the lrs (momentum in between)
    assert recursive == [v for values in tseen for v in values[::2]]
    assert recursive != closed
    np.testing.assert_allclose(recursive, closed, rtol=1e-12, atol=1e-17)


def test_callable_object_state_is_saved_and_restored():
    opt = make_ours("adam")
    sched = N.LambdaLR(opt, [Decay(0.9), lambda e: 1.0])
    for _ in range(5):
        sched.step()
    state = sched.state_dict()
    assert state["lr_lambdas"][0] == {"rate": 0.9, "calls": 6}
    assert state["lr_lambdas"][1] is None
    fresh = N.LambdaLR(make_ours("adam"), [Decay(0.5), lambda e: 1.0])
    fresh.load_state_dict(state)
    assert fresh.lr_lambdas[0].rate == 0.9 and fresh.lr_lambdas[0].calls == 6
    assert callable(fresh.lr_lambdas[1])


def test_state_dict_is_a_copy():
    opt = make_ours("adam")
    sched = N.MultiStepLR(opt, [3, 6])
    state = sched.state_dict()
    state["base_lrs"][0] = 123.0
    state["milestones"][4] = 1
    assert sched.base_lrs[0] == GROUP_LRS[0] and 4 not in sched.milestones


# ---------------------------------------------------------------- step(epoch), deprecated
EPOCHS = [0, 1, 2, 5, 3, 10, 10, 17, 40, 7, 59, 60, 61, 30, 0, 25, 26, 27]
EPOCH_CASES = [
    Case("StepLR", lambda L, o: L.StepLR(o, 4, 0.5)),
    Case("MultiStepLR", lambda L, o: L.MultiStepLR(o, [5, 15, 15, 40], 0.5)),
    Case("ConstantLR", lambda L, o: L.ConstantLR(o, 0.25, 10), min_distinct=2),
    Case("LinearLR", lambda L, o: L.LinearLR(o, 0.2, 0.9, 30)),
    Case("ExponentialLR", lambda L, o: L.ExponentialLR(o, 0.9)),
    Case("PolynomialLR", lambda L, o: L.PolynomialLR(o, 50, 1.5)),
    Case("CosineAnnealingLR", lambda L, o: L.CosineAnnealingLR(o, 12, 1e-3)),
    Case("LambdaLR", lambda L, o: L.LambdaLR(o, lambda e: 1 / (1 + e))),
    Case("MultiplicativeLR", lambda L, o: L.MultiplicativeLR(o, lambda e: 0.9 + e / 1000)),
    Case("CyclicLR", lambda L, o: L.CyclicLR(o, 0.01, 0.1, 6, mode="triangular2")),
]


@needs_torch
@pytest.mark.parametrize("case", EPOCH_CASES, ids=repr)
def test_step_with_epoch_matches_torch(case):
    pair = Pair(case)
    seen = set()
    for epoch in EPOCHS:
        with pytest.warns(UserWarning, match="deprecated"):
            pair.sched.step(epoch)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pair.tsched.step(epoch)
        pair.check(f"step({epoch})")
        seen.add(scheduled_values(pair.opt))
    assert len(seen) >= case.min_distinct


@needs_torch
@pytest.mark.parametrize("T_mult", [1, 2, 3])
def test_warm_restarts_fractional_epochs_match_torch(T_mult):
    case = Case("CAWR", lambda L, o: L.CosineAnnealingWarmRestarts(o, 3, T_mult, 1e-4))
    pair = Pair(case)
    seen = set()
    for epoch in range(40):
        for i in range(4):
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # step(epoch) is the documented use here
                pair.sched.step(epoch + i / 4)
            pair.tsched.step(epoch + i / 4)
            pair.check(f"step({epoch + i / 4})")
            seen.add(scheduled_values(pair.opt))
    assert len(seen) > 10


@needs_torch
def test_one_cycle_refuses_to_step_past_total_steps():
    pair = Pair(Case("OneCycleLR", lambda L, o: L.OneCycleLR(o, 0.1, total_steps=5)))
    for i in range(5):
        pair.step(i)
    with pytest.raises(ValueError) as ours:
        pair.sched.step()
    with pytest.raises(ValueError) as theirs:
        pair.tsched.step()
    assert str(ours.value) == str(theirs.value) == (
        "Tried to step 6 times. The specified number of total steps is 5")


# --------------------------------------------------------------------------- validation
def _other(L, o):
    """A second optimizer of the same library as ``o``."""
    return make_ours("adam") if L is N else make_torch("adam")


INVALID = [
    ("not-an-optimizer", lambda L, o: L.StepLR(object(), 3)),
    ("resume-without-initial_lr", lambda L, o: L.StepLR(o, 3, last_epoch=5)),
    ("LambdaLR-list-length", lambda L, o: L.LambdaLR(o, [lambda e: 1.0])),
    ("MultiplicativeLR-not-callable", lambda L, o: L.MultiplicativeLR(o, 0.9)),
    ("ConstantLR-factor>1", lambda L, o: L.ConstantLR(o, factor=1.5)),
    ("ConstantLR-factor<0", lambda L, o: L.ConstantLR(o, factor=-0.1)),
    ("LinearLR-start-0", lambda L, o: L.LinearLR(o, start_factor=0)),
    ("LinearLR-start>1", lambda L, o: L.LinearLR(o, start_factor=1.5)),
    ("LinearLR-end<0", lambda L, o: L.LinearLR(o, end_factor=-0.1)),
    ("LinearLR-end>1", lambda L, o: L.LinearLR(o, end_factor=1.1)),
    ("CAWR-T_0-0", lambda L, o: L.CosineAnnealingWarmRestarts(o, 0)),
    ("CAWR-T_0-float", lambda L, o: L.CosineAnnealingWarmRestarts(o, 2.5)),
    ("CAWR-T_mult-0", lambda L, o: L.CosineAnnealingWarmRestarts(o, 5, 0)),
    ("CAWR-T_mult-float", lambda L, o: L.CosineAnnealingWarmRestarts(o, 5, 1.5)),
    ("CAWR-eta_min-str", lambda L, o: L.CosineAnnealingWarmRestarts(o, 5, eta_min="0")),
    ("CAWR-negative-epoch", lambda L, o: L.CosineAnnealingWarmRestarts(o, 5).step(-1)),
    ("CyclicLR-mode", lambda L, o: L.CyclicLR(o, 0.01, 0.1, mode="sawtooth")),
    ("CyclicLR-base_lr-length", lambda L, o: L.CyclicLR(o, [0.01], 0.1)),
    ("CyclicLR-max_lr-length", lambda L, o: L.CyclicLR(o, 0.01, [0.1, 0.2, 0.3])),
    ("CyclicLR-momentum-length", lambda L, o: L.CyclicLR(o, 0.01, 0.1, base_momentum=[0.8])),
    ("OneCycleLR-no-total_steps", lambda L, o: L.OneCycleLR(o, 0.1)),
    ("OneCycleLR-epochs-only", lambda L, o: L.OneCycleLR(o, 0.1, epochs=3)),
    ("OneCycleLR-total_steps-0", lambda L, o: L.OneCycleLR(o, 0.1, total_steps=0)),
    ("OneCycleLR-total_steps-float", lambda L, o: L.OneCycleLR(o, 0.1, total_steps=10.0)),
    ("OneCycleLR-epochs-0", lambda L, o: L.OneCycleLR(o, 0.1, epochs=0, steps_per_epoch=5)),
    ("OneCycleLR-steps_per_epoch", lambda L, o: L.OneCycleLR(o, 0.1, epochs=2,
                                                             steps_per_epoch=-1)),
    ("OneCycleLR-pct_start>1", lambda L, o: L.OneCycleLR(o, 0.1, 10, pct_start=1.5)),
    ("OneCycleLR-pct_start-int", lambda L, o: L.OneCycleLR(o, 0.1, 10, pct_start=0)),
    ("OneCycleLR-anneal", lambda L, o: L.OneCycleLR(o, 0.1, 10, anneal_strategy="exp")),
    ("OneCycleLR-max_lr-length", lambda L, o: L.OneCycleLR(o, [0.1], 10)),
    ("ReduceLROnPlateau-factor", lambda L, o: L.ReduceLROnPlateau(o, factor=1.0)),
    ("ReduceLROnPlateau-mode", lambda L, o: L.ReduceLROnPlateau(o, mode="avg")),
    ("ReduceLROnPlateau-threshold_mode",
     lambda L, o: L.ReduceLROnPlateau(o, threshold_mode="pct")),
    ("ReduceLROnPlateau-min_lr-length", lambda L, o: L.ReduceLROnPlateau(o, min_lr=[0.1])),
    ("SequentialLR-empty", lambda L, o: L.SequentialLR(o, [], [])),
    ("SequentialLR-milestones", lambda L, o: L.SequentialLR(
        o, [L.StepLR(o, 2), L.StepLR(o, 3)], [1, 2])),
    ("SequentialLR-plateau", lambda L, o: L.SequentialLR(
        o, [L.StepLR(o, 2), L.ReduceLROnPlateau(o)], [3])),
    ("SequentialLR-not-a-scheduler", lambda L, o: L.SequentialLR(o, [object()], [])),
    ("ChainedScheduler-empty", lambda L, o: L.ChainedScheduler([])),
    ("ChainedScheduler-plateau", lambda L, o: L.ChainedScheduler(
        [L.ExponentialLR(o, 0.9), L.ReduceLROnPlateau(o)])),
]
# the message names the optimizer (its repr differs between the libraries): type only
INVALID_TYPE_ONLY = [
    ("SequentialLR-other-optimizer", lambda L, o: L.SequentialLR(
        o, [L.StepLR(o, 2), L.StepLR(_other(L, o), 2)], [3])),
    ("ChainedScheduler-other-optimizer", lambda L, o: L.ChainedScheduler(
        [L.StepLR(o, 2), L.StepLR(_other(L, o), 2)])),
]
NO_MOMENTUM = [
    ("CyclicLR-cycle_momentum", lambda L, o: L.CyclicLR(o, 0.01, 0.1)),
    ("OneCycleLR-cycle_momentum", lambda L, o: L.OneCycleLR(o, 0.1, 10)),
]


def _raised(build, L, opt):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            build(L, opt)
        except Exception as exc:  # noqa: BLE001 - compared below
            return exc
    raise AssertionError(f"{L.__name__} raised nothing")


@needs_torch
@pytest.mark.parametrize("kind, name, build, same_message", [
    *[pytest.param("adam", name, build, True, id=name) for name, build in INVALID],
    *[pytest.param("adam", name, build, False, id=name) for name, build in INVALID_TYPE_ONLY],
    *[pytest.param("plain", name, build, True, id=name) for name, build in NO_MOMENTUM],
])
def test_invalid_arguments_raise_like_torch(kind, name, build, same_message):
    ours = _raised(build, N, make_ours(kind))
    theirs = _raised(build, T, make_torch(kind))
    assert type(ours) is type(theirs), f"{name}: {ours!r} vs {theirs!r}"
    assert isinstance(ours, (ValueError, TypeError, KeyError)), repr(ours)
    if same_message:
        assert str(ours) == str(theirs)


def test_linear_lr_start_factor_out_of_range_message():
    with pytest.raises(ValueError, match="Starting multiplicative factor expected to be greater "
                                         "than 0 and less or equal to 1."):
        N.LinearLR(make_ours("adam"), start_factor=0.0)


def test_one_cycle_needs_total_steps():
    with pytest.raises(ValueError, match=r"You must define either total_steps OR \(epochs AND "
                                         r"steps_per_epoch\)"):
        N.OneCycleLR(make_ours("adam"), max_lr=0.1)


# ----------------------------------------------------------------------- misc. behaviour
@needs_torch
def test_get_lr_outside_step_warns_like_torch():
    sched = N.ExponentialLR(make_ours("adam"), 0.9)
    tsched = T.ExponentialLR(make_torch("adam"), 0.9)
    with pytest.warns(UserWarning, match="get_last_lr"):
        ours = sched.get_lr()
    with pytest.warns(UserWarning, match="get_last_lr"):
        theirs = tsched.get_lr()
    assert_same_value(ours, theirs, "get_lr()")


def test_initial_lr_and_base_lrs():
    opt = make_ours("sgd")
    N.StepLR(opt, 3)
    assert [g["initial_lr"] for g in opt.param_groups] == list(GROUP_LRS)
    opt.param_groups[0]["lr"] = 0.5  # a second scheduler keeps the recorded initial_lr
    sched = N.ExponentialLR(opt, 0.9)
    assert sched.base_lrs == list(GROUP_LRS)
    assert sched.get_last_lr() == [0.5, GROUP_LRS[1]]


def test_plateau_reduces_only_after_patience():
    opt = make_ours("adam", lrs=(1.0,))
    sched = N.ReduceLROnPlateau(opt, patience=2, factor=0.5)
    for metric in [1.0, 1.0, 1.0]:
        sched.step(metric)
    assert sched.get_last_lr() == [1.0]
    sched.step(1.0)  # the third bad epoch exceeds patience=2
    assert sched.get_last_lr() == [0.5]


def test_does_not_import_torch():
    code = ("import sys, npoptim.lr_scheduler as m; "
            "assert 'torch' not in sys.modules, 'torch imported'; "
            "assert len(m.__all__) == 16")
    subprocess.run([sys.executable, "-c", code], check=True)


@needs_torch
def test_schedulers_refuse_non_optimizers():
    for cls, args in [(N.LambdaLR, (lambda e: 1.0,)), (N.CyclicLR, (0.01, 0.1)),
                      (N.OneCycleLR, (0.1, 10)), (N.ReduceLROnPlateau, ()),
                      (N.CosineAnnealingLR, (10,)), (N.ExponentialLR, (0.9,))]:
        with pytest.raises(TypeError, match="SGD is not an Optimizer"):
            cls(make_torch("sgd"), *args)


def test_all_fifteen_schedulers_are_covered():
    covered = {case.build(N, make_ours(case.kind, case.lrs)).__class__.__name__
               for case in CASES}
    assert covered == set(N.__all__) - {"LRScheduler"}
