"""PSGD Kron: kron-torch 0.3.3's ``Kron`` and pytorch_optimizer 4.1.0's ``Kron`` in float64
over 24 steps (a vector, a matrix, a 3-D tensor, a matrix with a side beyond
max_size_triangular and so a diagonal factor), weight decay, an update-probability schedule
that thins the preconditioner updates, and two forced balancings; torch's own probes
(``torch.randn_like``, recorded) are given to npoptim's ``step(probes=...)``, its balancing
draws (kron_torch's ``self.rng``, pytorch_optimizer's ``np.random.random``, replaced by
stubs that balance at chosen steps) to ``step(balance=...)``, while the update decisions
are npoptim's own and must equal the sources'. Once with the sources' float32 triangular
solve patched to float64 (``solve_dtype="param"``), once as they run it
(``solve_dtype="float32"``). Hand-derived first steps, the counter stream's draws, the
variants' difference, bad input.

kron-torch applies ``@torch.compile`` to its functions when imported: this file's tests run
with ``torch._dynamo.config.disable = True`` (a module fixture, which puts it back as it was
afterwards: a later file on the same worker, tests/test_precision_torchao.py, runs torchao's
``torch.compile(fullgraph=True)`` step, which refuses to run with dynamo off), so its functions
run eagerly (the same arithmetic, no compiler on this CPU-only machine).

heavyball 3.2.1's ``PSGDKron`` (``variant="heavyball"``) in float64 (``q_dtype`` and
``storage_dtype``) over the same 24 steps and shapes plus a 0-d parameter, a learning-rate
schedule, weight decay, heavyball's reading of the update schedule (its cumulative sum thins
the updates) and its balancing at every update, the probes it draws given to npoptim; its
soft update clip off (``update_clipping=None``; npoptim ``clip_update=False``), its compile
off and torch's default dtype float64 for its float32 scalars (tests/heavyball_compare.py
says why; once as it runs, to their rounding). Each switch of the variant flipped alone
leaves heavyball's trajectory (or, balancing, its factors).
"""
import warnings

import numpy as np
import pytest
from hand_derived import assert_unchanged, snapshot
from scheduled_runs import random_problem
from scheduled_runs import worst_error

from npoptim.optim.kron import Kron, float32_probability, merged_shape

try:
    import torch
except ImportError:  # the tests of npoptim alone still run
    torch = None

SHAPES = ((5,), (4, 3), (2, 3, 4), (8, 3))
STEPS = 24
MAX_TRIANGULAR = 6          # the (8, 3) matrix's side of 8 takes a diagonal factor
SCHEDULE = (1.0, 0.25, 0.3, 4)   # updates every step for 5 steps, then every 2nd .. 4th
BALANCE_AT = (3, 11)        # steps (1-based) whose balancing draw is forced below 0.01
BASE = dict(lr=0.05, b1=0.9, weight_decay=0.02, max_size_triangular=MAX_TRIANGULAR,
            precond_lr=0.2, precond_init_scale=0.7)
#: the worst float64 error allowed with the solves in float64, relative to each tensor's
#: scale, parameters and factors (measured: kron_torch 4.9e-16, pytorch_optimizer 3.2e-16
#: over the 24 steps; the factors 1.7e-16 and 1.9e-16)
RTOL64 = 1e-12
#: ... with both solves in float32 as the sources run them (two float32 substitutions of
#: different order: measured 2.4e-8 kron_torch, 3.0e-8 pytorch_optimizer; factors 2.0e-8,
#: 1.5e-8)
RTOL_FLOAT32_SOLVE = 1e-6


def problem(seed):
    return random_problem(seed, SHAPES, STEPS)


class ForcedDraws:
    """A ``random()`` below 0.01 at the steps of BALANCE_AT (1-based calls), 0.5 else."""
    def __init__(self):
        self.calls = 0

    def random(self):
        self.calls += 1
        return 0.0 if self.calls in BALANCE_AT else 0.5


@pytest.fixture(autouse=True, scope="module")
def _dynamo_off_in_this_file():
    """kron-torch's functions run eagerly while this file's tests run (the docstring)."""
    if torch is None:
        yield
        return
    before = torch._dynamo.config.disable
    torch._dynamo.config.disable = True
    try:
        yield
    finally:
        torch._dynamo.config.disable = before


def kron_torch_module():
    import kron_torch.kron as source
    return source


def float64_solve(x, a):
    """The sources' ``X @ inv(A)`` with their float32 casts left out."""
    return torch.linalg.solve_triangular(a, x.reshape(-1, x.size(-1)), upper=True,
                                         left=False).reshape_as(x)


def run_torch(variant, params, grads, float64, monkeypatch):
    """The torch trajectory and, per step, the probes drawn (per parameter, None where none)
    and whether the preconditioner was updated."""
    draws = []
    real = torch.randn_like

    def recording(t, *args, **kw):
        v = real(t, *args, **kw)
        draws[-1].append(v.detach().numpy().copy())
        return v
    monkeypatch.setattr(torch, "randn_like", recording)
    tensors = [torch.tensor(p.copy()) for p in params]
    if variant == "kron_torch":
        source = kron_torch_module()
        if float64:
            monkeypatch.setattr(source, "_solve_triangular_right", float64_solve)
        opt = source.Kron(tensors, preconditioner_update_probability=source
                          .precond_update_prob_schedule(*SCHEDULE),
                          precond_dtype=torch.float64, **BASE)
        opt.rng = ForcedDraws()
    else:
        import pytorch_optimizer.optimizer.psgd as source
        if float64:
            monkeypatch.setattr(source, "solve_triangular_right", float64_solve)
        stub = ForcedDraws()
        monkeypatch.setattr(source.np.random, "random", stub.random)
        kw = dict(BASE)
        groups = [{"params": tensors, "precondition_lr": kw.pop("precond_lr"),
                   "precondition_init_scale": kw.pop("precond_init_scale")}]
        kw["momentum"] = kw.pop("b1")
        opt = source.Kron(groups, pre_conditioner_update_probability=source
                          .precondition_update_prob_schedule(*SCHEDULE),
                          precondition_dtype=torch.float64, **kw)
    out = []
    torch.manual_seed(0)
    for step_grads in grads:
        draws.append([])
        for t, g in zip(tensors, step_grads):
            t.grad = torch.tensor(g.copy())
        opt.step()
        out.append([t.detach().numpy().copy() for t in tensors])
    monkeypatch.undo()
    probes = [d if d else None for d in draws]
    factors = [[q.numpy().copy() for q in opt.state[t]["Q"]] for t in tensors]
    return out, probes, factors


def run_npoptim(variant, params, grads, probes, solve_dtype):
    params = [p.copy() for p in params]
    opt = Kron(params, preconditioner_update_probability=SCHEDULE, variant=variant,
               solve_dtype=solve_dtype, **BASE)
    out, updated = [], []
    run_npoptim.last = opt
    for t, step_grads in enumerate(grads, start=1):
        given = None if probes[t - 1] is None else [v.reshape(p.shape) for v, p
                                                     in zip(probes[t - 1], params)]
        opt.step([g.copy() for g in step_grads], probes=given, balance=t in BALANCE_AT)
        updated.append(opt.param_groups[0]["update_counter"] == 0)
        out.append([p.copy() for p in params])
    return out, updated


@pytest.mark.needs("torch")
@pytest.mark.parametrize("variant", [
    pytest.param("kron_torch", marks=pytest.mark.needs("kron_torch")),
    pytest.param("pytorch_optimizer", marks=pytest.mark.needs("pytorch_optimizer"))])
@pytest.mark.parametrize("float64", [True, False], ids=["float64_solve", "float32_solve"])
def test_matches_source(variant, float64, monkeypatch):
    params, grads = problem(1)
    expected, probes, factors = run_torch(variant, params, grads, float64, monkeypatch)
    torch_updated = [p is not None for p in probes]
    assert 8 < sum(torch_updated) < STEPS     # the schedule thinned the updates
    actual, updated = run_npoptim(variant, params, grads, probes,
                                  "param" if float64 else "float32")
    assert updated == torch_updated
    error = worst_error(actual, expected)
    print(f"{variant} float64_solve={float64}: worst error {error:.3g}")
    assert error <= (RTOL64 if float64 else RTOL_FLOAT32_SOLVE), error
    # the factors themselves (balancing leaves the trajectory alone, up to rounding, but
    # not the factors' norms)
    state = run_npoptim.last.state
    ours = [[state[i][f"Q{k}"] for k in range(len(qs))] for i, qs in enumerate(factors)]
    factor_error = worst_error(ours, factors)
    print(f"  factors: worst error {factor_error:.3g}")
    assert factor_error <= (RTOL64 if float64 else RTOL_FLOAT32_SOLVE), factor_error
    # the run moved, and a wrong probe would be seen
    assert worst_error([params], [expected[-1]]) > 1e-2


@pytest.mark.needs("torch")
@pytest.mark.needs("pytorch_optimizer")
def test_balancing_is_seen_in_the_factors(monkeypatch):
    """Without the forced balancings npoptim's factors differ from the source's (while the
    parameters agree to rounding: balancing keeps the product of the factors)."""
    params, grads = problem(1)
    expected, probes, factors = run_torch("pytorch_optimizer", params, grads, True,
                                          monkeypatch)
    monkeypatch.setattr(globals()["run_npoptim"], "last", None, raising=False)
    monkeypatch.setitem(globals(), "BALANCE_AT", ())
    actual, _ = run_npoptim("pytorch_optimizer", params, grads, probes, "param")
    assert worst_error(actual, expected) < RTOL64
    state = run_npoptim.last.state
    ours = [[state[i][f"Q{k}"] for k in range(len(qs))] for i, qs in enumerate(factors)]
    assert worst_error(ours, factors) > 1e-3


@pytest.mark.needs("torch")
@pytest.mark.needs("kron_torch")
def test_kron_torch_needs_compile_off():
    """The test's own switch: kron-torch's functions run eagerly here."""
    source = kron_torch_module()
    assert torch._dynamo.config.disable
    assert source.Kron is not None


def test_schedule_is_the_sources_float32_formula():
    assert float32_probability((1.0, 0.03, 0.001, 500), 0) == np.float32(1.0)
    assert float32_probability((1.0, 0.03, 0.001, 500), 10 ** 5) == np.float32(0.03)
    p = float32_probability(SCHEDULE, 6)
    assert p.dtype == np.float32 and abs(float(p) - np.exp(-0.6)) < 1e-7


def test_merge_rule_of_kron_torch():
    assert merged_shape((2, 3, 4), True) == (6, 4)
    # np.diff is signed: [12, 2] (-10) beats [4, 6] (2), the sources' rule as written
    assert merged_shape((4, 3, 2), True) == (12, 2)
    assert merged_shape((2, 2, 8), True) == (4, 8)
    assert merged_shape((2, 3, 4), False) == (2, 3, 4)
    assert merged_shape((), True) == (1,)


def test_first_step_by_hand():
    """A vector (one diagonal factor), pytorch_optimizer's form (no damping), probe given:
    q = s - η s (a - b)/(max|a + b| + 2**-126), a = (s ĝ)², b = (v/s)², U = q² ĝ clipped to
    RMS 1.1, θ - γ U (no decay on a vector)."""
    g = np.array([0.5, -2.0, 1.0, 3.0])
    v = np.array([1.0, -0.5, 2.0, 0.25])
    theta = np.array([0.1, 0.2, -0.3, 0.4])
    s, eta, lr = 0.8, 0.3, 0.1
    opt = Kron([theta], lr=lr, precond_lr=eta, precond_init_scale=s, weight_decay=0.5,
               variant="pytorch_optimizer")
    opt.step([g], probes=[v])
    a, b = (s * g) ** 2, (v / s) ** 2
    q = s - eta * s * (a - b) / (np.max(np.abs(a + b)) + 2.0 ** -126)
    u = q * q * g
    u = u * min(1.0, 1.1 / (np.sqrt(np.mean(u * u)) + 1e-6))
    np.testing.assert_allclose(theta, np.array([0.1, 0.2, -0.3, 0.4]) - lr * u,
                               rtol=1e-15, atol=1e-16)
    np.testing.assert_allclose(opt.state[0]["Q0"], q, rtol=1e-15)


def test_first_step_by_hand_kron_torch_damps_the_momentum():
    """kron_torch: the pair's G is ĝ + 2**-11.5 mean|ĝ| v, and that G is preconditioned."""
    g = np.array([0.5, -2.0, 1.0, 3.0])
    v = np.array([1.0, -0.5, 2.0, 0.25])
    theta = np.zeros(4)
    opt = Kron([theta], lr=1.0, precond_lr=0.0)
    opt.step([g], probes=[v])
    h = g + np.sqrt(2.0 ** -23) * np.mean(np.abs(g)) * v
    u = h * min(1.0, 1.1 / (np.sqrt(np.mean(h * h)) + 1e-12))
    np.testing.assert_allclose(theta, -u, rtol=1e-15)


def test_counter_stream_draws_are_reproducible_and_seeded():
    params, grads = problem(2)

    def run(seed, **kw):
        ps = [p.copy() for p in params]
        opt = Kron(ps, seed=seed, **dict(BASE, **kw))
        for step_grads in grads[:6]:
            opt.step([g.copy() for g in step_grads])
        return ps
    first, again, other = run(0), run(0), run(1)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert not all(np.array_equal(a, b) for a, b in zip(first, other))


def test_update_and_balance_switches_change_the_run():
    params, grads = problem(3)

    def run(**step_kw):
        ps = [p.copy() for p in params]
        opt = Kron(ps, **BASE)
        for step_grads in grads[:5]:
            opt.step([g.copy() for g in step_grads], **step_kw)
        return ps, opt
    updated, _ = run()
    frozen, opt = run(update_preconditioner=False)
    assert np.array_equal(opt.state[1]["Q0"], np.eye(4) * 0.7 ** 0.5)
    assert not np.allclose(updated[1], frozen[1])
    balanced, _ = run(balance=True)
    assert not all(np.array_equal(a, b) for a, b in zip(updated, balanced))


def test_balancing_keeps_the_product():
    from npoptim.optim.kron import balance_factors
    rng = np.random.default_rng(0)
    q1, q2 = np.triu(rng.uniform(1, 2, (3, 3))) * 8, np.triu(rng.uniform(1, 2, (2, 2))) / 4
    before = np.kron(q1, q2)
    for mean in ("log", "prod"):
        a, b = q1.copy(), q2.copy()
        balance_factors([a, b], mean)
        np.testing.assert_allclose(np.kron(a, b), before, rtol=1e-14)
        assert abs(np.max(np.abs(a)) - np.max(np.abs(b))) < 1e-12 * np.max(np.abs(a))


def test_variants_differ():
    params, grads = problem(4)
    runs = {}
    for variant in ("kron_torch", "pytorch_optimizer"):
        ps = [p.copy() for p in params]
        opt = Kron(ps, variant=variant, **BASE)
        for step_grads in grads[:4]:
            opt.step([g.copy() for g in step_grads])
        runs[variant] = ps
        if variant == "pytorch_optimizer":
            assert opt.state[2]["Q2"].shape == (4, 4)     # no merge: three factors
        else:
            assert "Q2" not in opt.state[2] and opt.state[2]["Q0"].shape == (6, 6)
    assert worst_error([runs["kron_torch"]], [runs["pytorch_optimizer"]]) > 1e-6


def test_diagonal_sides():
    opt = Kron([np.zeros((8, 3)), np.zeros((4, 5)), np.zeros(3)], max_size_triangular=6,
               memory_save_mode="smart_one_diag")
    opt.step([np.ones((8, 3)), np.ones((4, 5)), np.ones(3)])
    assert opt.state[0]["Q0"].shape == (8,) and opt.state[0]["Q1"].shape == (3, 3)
    assert opt.state[1]["Q1"].shape == (5,) and opt.state[1]["Q0"].shape == (4, 4)
    assert opt.state[2]["Q0"].shape == (3,)


@pytest.mark.parametrize("kw", [dict(lr=-1.0), dict(b1=1.0), dict(precond_init_scale=0.0),
                                dict(preconditioner_update_probability=0.0),
                                dict(preconditioner_update_probability=(0.1, 0.5, 0.1, 2)),
                                dict(memory_save_mode="some_diag"), dict(seed=-1),
                                dict(variant="kron"), dict(solve_dtype="float16"),
                                dict(lower_bound_beta=1.0), dict(damping_mode="max"),
                                dict(update_schedule="sometimes"), dict(decay_vectors=1),
                                dict(balance_prob=2.0)])
def test_bad_hyperparameters(kw):
    with pytest.raises(ValueError):
        Kron([np.zeros(3)], **kw)


def test_bad_step_input_changes_nothing():
    params = [np.ones((3, 2)), np.ones(4)]
    opt = Kron(params, lr=0.1)
    opt.step([np.ones((3, 2)), np.ones(4)])
    snap = snapshot(opt)
    for kw in (dict(probes=[np.ones(6)]), dict(probes=[np.ones((2, 3)), None]),
               dict(update_preconditioner="yes")):
        with pytest.raises(ValueError):
            opt.step([np.ones((3, 2)), np.ones(4)], **kw)
        assert_unchanged(opt, snap)
    counters = dict(opt.param_groups[0])
    with pytest.raises(ValueError):
        opt.step([np.ones((3, 2)), np.ones(5)])
    assert opt.param_groups[0]["update_counter"] == counters["update_counter"]


def test_state_dict_resumes_bit_for_bit():
    """The step counters (param_groups[0]'s prob_step and update_counter, as
    pytorch_optimizer keeps them in its first group) and the factors travel in the
    state_dict: a loaded copy continues the same run, probes and schedule included."""
    rng = np.random.default_rng(5)
    params = [rng.standard_normal((3, 2)), rng.standard_normal(4)]
    grads = [[rng.standard_normal(p.shape) for p in params] for _ in range(8)]
    kw = dict(preconditioner_update_probability=(1.0, 0.3, 0.5, 1), lr=0.1)
    opt = Kron(params, **kw)
    for g in grads[:3]:
        opt.step([x.copy() for x in g])
    copies = [p.copy() for p in params]
    resumed = Kron(copies, **kw)
    resumed.load_state_dict(opt.state_dict())
    for g in grads[3:]:
        opt.step([x.copy() for x in g])
        resumed.step([x.copy() for x in g])
    assert all(np.array_equal(a, b) for a, b in zip(params, copies))
    assert resumed.param_groups[0]["prob_step"] == 8


# ---------------------------------------------------------------- heavyball's PSGDKron
HB_SHAPES = ((5,), (4, 3), (2, 3, 4), (8, 3), ())
HB_LR = 2.0 ** -5
HB_SCHEDULE = (1.0, 0.25, 0.5, 4)   # heavyball's form: max(0.25, 0.5 ** max(n - 4, 0))
HB_BASE = dict(weight_decay=0.125, max_size_triangular=MAX_TRIANGULAR, precond_lr=0.25,
               precond_init_scale=0.75)
#: the worst float64 error allowed against heavyball, relative to each tensor's scale, with
#: torch's default dtype float64 (measured: parameters 7.4e-16, factors 3.9e-16)
HB_RTOL64 = 1e-12
#: ... as heavyball runs, its β^step of the momentum's debiasing in float32 (measured 7.4e-8)
HB_RTOL_AS_IT_RUNS = 1e-6


def run_heavyball_kron(params, grads, monkeypatch, default_float64=True):
    """heavyball's PSGDKron in float64 (``q_dtype``, ``storage_dtype``), its soft update clip
    off (``update_clipping=None``: npoptim's ``clip_update=False``), the lr scheduled; the
    trajectory, the probes it drew per step and its factors."""
    from heavyball_compare import default_dtype, dyadic_schedule, import_heavyball
    heavyball = import_heavyball()
    draws = []
    real = torch.randn_like

    def recording(t, *args, **kw):
        v = real(t, *args, **kw)
        draws[-1].append(v.detach().numpy().copy())
        return v
    monkeypatch.setattr(torch, "randn_like", recording)
    lrs = dyadic_schedule(len(grads), HB_LR)
    tensors = [torch.tensor(p.copy()) for p in params]
    out = []
    torch.manual_seed(0)
    with default_dtype(torch.float64 if default_float64 else torch.float32), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")   # heavyball's warn_once of a changed lr
        opt = heavyball.PSGDKron(
            tensors, lr=HB_LR, betas=(0.875, 0.999), preconditioner_update_probability=heavyball
            .utils.precond_update_prob_schedule(*HB_SCHEDULE), q_dtype="float64",
            storage_dtype="float64", update_clipping=None, merge_dims=False,
            store_triu_as_line=False, **HB_BASE)
        for lr, step_grads in zip(lrs, grads):
            draws.append([])
            for group in opt.param_groups:
                group["lr"] = lr
            for t, g in zip(tensors, step_grads):
                t.grad = torch.tensor(g.copy())
            opt.step()
            out.append([t.detach().numpy().copy() for t in tensors])
    monkeypatch.undo()
    probes = [[v.reshape(p.shape) for v, p in zip(d, params)] if d else None for d in draws]
    factors = []
    for t in tensors:
        state = opt.state[t][0]
        key = next(k for k in state if k.startswith("update_by_psgd_Q_"))
        factors.append([q.numpy()[0] for q in state[key]])
    return out, probes, factors


def run_npoptim_heavyball(params, grads, probes, **kw):
    from heavyball_compare import dyadic_schedule
    ps = [p.copy() for p in params]
    kw = dict(HB_BASE, **kw)
    kw.setdefault("variant", "heavyball")
    kw.setdefault("preconditioner_update_probability", HB_SCHEDULE)
    opt = Kron(ps, lr=HB_LR, b1=0.875, clip_update=False, solve_dtype="param", **kw)
    updated, out = [], []
    for k, (lr, step_grads) in enumerate(zip(dyadic_schedule(len(grads), HB_LR), grads)):
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step([g.copy() for g in step_grads], probes=probes[k])
        updated.append(opt.param_groups[0]["update_counter"] == 0)
        out.append([p.copy() for p in ps])
    return out, updated, opt


@pytest.mark.needs("torch", "heavyball")
def test_matches_heavyball(monkeypatch):
    """24 steps, a schedule that thins the updates on heavyball's cumulative sum, weight
    decay (of the vector and the scalar too), its balancing at every update, the probes it
    drew; the factors too."""
    params, grads = random_problem(1, HB_SHAPES, STEPS)
    expected, probes, factors = run_heavyball_kron(params, grads, monkeypatch)
    actual, updated, opt = run_npoptim_heavyball(params, grads, probes)
    assert updated == [p is not None for p in probes]
    assert 8 < sum(updated) < STEPS
    error = worst_error(actual, expected)
    print(f"heavyball: worst error {error:.3g}")
    assert error < HB_RTOL64, error
    ours = [[opt.state[i][f"Q{k}"] for k in range(len(qs))] for i, qs in enumerate(factors)]
    factor_error = worst_error(ours, factors)
    print(f"  factors: worst error {factor_error:.3g}")
    assert factor_error < HB_RTOL64, factor_error
    assert worst_error([params], [expected[-1]]) > 1e-2


@pytest.mark.needs("torch", "heavyball")
def test_matches_heavyball_as_it_runs_to_its_float32_scalars(monkeypatch):
    params, grads = random_problem(2, HB_SHAPES, STEPS)
    expected, probes, _ = run_heavyball_kron(params, grads, monkeypatch, default_float64=False)
    actual, _, _ = run_npoptim_heavyball(params, grads, probes)
    error = worst_error(actual, expected)
    print(f"heavyball as it runs: worst error {error:.3g}")
    assert 1e-12 < error < HB_RTOL_AS_IT_RUNS, error


@pytest.mark.needs("torch", "heavyball")
def test_each_heavyball_switch_tells_it_apart(monkeypatch):
    """Each of the variant's switches at kron_torch's value alone leaves heavyball's
    trajectory (measured: damping_mode 4.2e-5, lower_bound 0.22, lower_bound_beta 0.84,
    update_schedule 9.9e-2 (the tuple read as kron_torch's formula), decay_vectors 0.14,
    probe_damping 2.8e-8); balancing changes the factors (2.4e-2) and not the trajectory, the
    momentum's debiased form neither (it holds m̂ instead of m)."""
    params, grads = random_problem(1, HB_SHAPES, STEPS)
    expected, probes, factors = run_heavyball_kron(params, grads, monkeypatch)
    flips = dict(damping_mode="mean", lower_bound="columns", lower_bound_beta=0.0,
                 update_schedule="counter", decay_vectors=False, probe_damping=False)
    for name, value in flips.items():
        actual, _, _ = run_npoptim_heavyball(params, grads, probes, **{name: value})
        print(name, worst_error(actual, expected))
        assert worst_error(actual, expected) > 1e-10, name
    for name, value in dict(balance_schedule="random", debiased_betas=False).items():
        actual, _, opt = run_npoptim_heavyball(params, grads, probes, **{name: value})
        assert worst_error(actual, expected) < HB_RTOL64, name
        ours = [[opt.state[i][f"Q{k}"] for k in range(len(qs))]
                for i, qs in enumerate(factors)]
        print(name, worst_error(ours, factors))
        assert (worst_error(ours, factors) > 1e-3) == (name == "balance_schedule"), name


@pytest.mark.needs("heavyball")
def test_heavyball_update_schedule():
    from heavyball_compare import import_heavyball

    from npoptim.optim.kron import heavyball_probability
    utils = import_heavyball().utils
    theirs_schedule = utils.precond_update_prob_schedule(*HB_SCHEDULE)
    default = utils.precond_update_prob_schedule()
    for n in (1, 4, 5, 7, 30, 1001, 1500, 5000):
        assert heavyball_probability(HB_SCHEDULE, n) == theirs_schedule(n)
        assert heavyball_probability(None, n) == default(n)
    group = {}
    theirs = [utils.psgd_should_update(group, theirs_schedule) for _ in range(40)]
    opt = Kron([np.zeros(3)], variant="heavyball", preconditioner_update_probability=HB_SCHEDULE)
    ours = []
    for _ in range(40):
        opt.step([np.ones(3)])
        ours.append(opt.param_groups[0]["update_counter"] == 0)
    assert ours == theirs


def test_power_iteration_bound_is_near_the_spectral_norm():
    from npoptim.optim.kron import power_iteration_bound
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 8))
    s = a @ a.T
    top = np.linalg.eigvalsh(s)[-1]
    bound = power_iteration_bound(s)
    assert 0.9 * top < bound <= top * (1 + 1e-12)
    assert power_iteration_bound(s, iterations=30) == pytest.approx(top, rel=1e-10)


@pytest.mark.needs("torch", "heavyball")
def test_heavyball_replays_the_golden_case(monkeypatch):
    """The case's probes are npoptim's counter stream: heavyball's ``torch.randn_like`` is
    replaced by those draws (parameter index in call order, the step)."""
    from heavyball_compare import golden_case, import_heavyball, trajectory

    from npoptim.kernels.counter_stream import standard_normal
    heavyball = import_heavyball()
    case, params, grads, lrs, expected = golden_case("Kron", "Kron/heavyball/float64")
    h = case["hyperparameters"]
    calls = dict(step=0, index=0)

    def counter_stream(t, *args, **kw):
        draw = standard_normal(h["seed"], calls["index"], calls["step"], t.numel())
        calls["index"] += 1
        return torch.tensor(draw, dtype=t.dtype).reshape(t.shape)
    monkeypatch.setattr(torch, "randn_like", counter_stream)

    class Stepped:   # the step counter and index advanced around each heavyball step
        def __init__(self, opt):
            self.opt, self.param_groups = opt, opt.param_groups

        def step(self):
            calls["step"] += 1
            calls["index"] = 0
            self.opt.step()
    actual, _, _ = trajectory(lambda ts: Stepped(heavyball.PSGDKron(
        ts, lr=h["lr"], betas=(h["b1"], 0.999), weight_decay=h["weight_decay"],
        preconditioner_update_probability=heavyball.utils.precond_update_prob_schedule(
            *h["preconditioner_update_probability"]), precond_lr=h["precond_lr"],
        precond_init_scale=h["precond_init_scale"], max_size_triangular=h["max_size_triangular"],
        q_dtype="float64", storage_dtype="float64", update_clipping=None, merge_dims=False)),
        params, grads, lrs)
    error = worst_error(actual, expected)
    print(f"golden replay: {error:.3g}")
    assert error < case["tolerance"]["rtol"], error   # measured 2.2e-16
