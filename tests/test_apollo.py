"""APOLLO against the authors' apollo-torch 1.0.3 (``APOLLOAdamW``, ``proj="random"``,
``proj_type="std"``) and pytorch_optimizer 4.1.0's ``APOLLO`` in float64, 24 steps, with the
projectors torch drew handed in (``step(projection=...)``), refreshed every 5 steps: a tall
and a wide matrix, a rank beyond the matrix's side, a vector and a 3-D array (plain AdamW in
all three), weight decay, channel- and tensor-wise scaling, the norm-growth limiter on and off,
scale_front, an lr schedule; each variant fails against the other implementation; the first
step hand-derived; the counter-stream projector, the projection hook's checks, bad input.

apollo-torch's package ``__init__`` imports transformers (which CI does not install: it would
move torch): :func:`authors_apollo` loads ``random_projector.py``, ``svd_projector.py`` and
``apollo.py`` alone, the last with its one transformers import (``require_version``, a version
check of torch) replaced by a no-op.
"""
import importlib
import importlib.util
import math
import sys
import types

import numpy as np
import pytest
from hand_derived import assert_unchanged, close, snapshot

from npoptim.kernels.counter_stream import standard_normal
from npoptim.optim.apollo import APOLLO, random_projector, refreshes

try:
    import torch
except ImportError:   # the bare stage
    torch = None

STEPS = 24
GAP = 5
SHAPES = ((8, 5), (4, 9), (6,), (3, 2, 2))
LRS = [0.02 * (1 - 0.5 * t / STEPS) for t in range(STEPS)]
#: The worst error of each cross-check, relative to the parameters' scale (reported).
TOL = 1e-12


def authors_apollo():
    """apollo-torch's ``AdamW`` (APOLLO), loaded alone; skips without it."""
    spec = importlib.util.find_spec("apollo_torch") if torch is not None else None
    if spec is None:
        pytest.skip("needs apollo-torch (pip install --no-deps apollo-torch==1.0.3) and torch")
    package = "_apollo_torch_alone"
    if package not in sys.modules:
        root = spec.submodule_search_locations[0]
        module = types.ModuleType(package)
        module.__path__ = [root]
        sys.modules[package] = module
        importlib.import_module(f"{package}.random_projector")
        importlib.import_module(f"{package}.svd_projector")
        source = open(f"{root}/apollo.py", encoding="utf-8").read()
        line = "from transformers.utils.versions import require_version"
        assert line in source
        apollo = types.ModuleType(f"{package}.apollo")
        apollo.__package__ = package
        exec(compile(source.replace(line, "require_version = lambda requirement: None"),
                     f"{root}/apollo.py", "exec"), apollo.__dict__)
        sys.modules[f"{package}.apollo"] = apollo
        module.AdamW = apollo.AdamW
    return sys.modules[package].AdamW


def problem(seed=0, shapes=SHAPES, dtype=np.float64):
    """Start values, the quadratic's centres and per-step noise: g = (p - c) * w + noise."""
    rng = np.random.default_rng(seed)
    params = [rng.uniform(-1, 1, s).astype(dtype) for s in shapes]
    centres = [rng.standard_normal(s).astype(dtype) for s in shapes]
    noise = [[(rng.standard_normal(s) * 0.3).astype(dtype) for s in shapes]
             for _ in range(STEPS)]
    return params, centres, noise


def grad_of(p, c, n, t):
    return (p - c) * (1.0 + 0.5 * math.sin(t)) + n


def run_pair(make_torch, refreshed, params, centres, noise, steps=STEPS, **kw):
    """Both trajectories: torch's (``make_torch(tensors)``), then npoptim's ``APOLLO(**kw)``
    with the projectors torch used (it draws new ones exactly at ``refreshed(t)``); returns
    the worst error relative to the parameters' scale."""
    # requires_grad: apollo-torch seeds each projector from the parameter's place among
    # those that require a gradient
    tensors = [torch.tensor(p.copy(), requires_grad=True) for p in params]
    theirs = make_torch(tensors)
    ours_params = [p.copy() for p in params]
    ours = APOLLO(ours_params, lr=LRS[0], **kw)
    worst, last = 0.0, {}
    for t in range(steps):
        for group in theirs.param_groups:
            group["lr"] = LRS[t]
        for group in ours.param_groups:
            group["lr"] = LRS[t]
        for x, c, n in zip(tensors, centres, noise[t]):
            x.grad = torch.tensor(grad_of(x.detach().numpy(), c, n, t))
        theirs.step()
        projection = []
        for index, x in enumerate(tensors):
            if x.dim() != 2:
                projection.append(None)
                continue
            held = theirs.state[x]["projector"].ortho_matrix.detach().double().numpy().copy()
            # torch refreshed exactly where its form says it does
            assert (index not in last or not np.array_equal(held, last[index])) \
                == refreshed(t + 1), (t + 1, index)
            last[index] = held
            # torch's projector where npoptim draws one: its new one where torch refreshed
            # too, else the one torch still holds (a form that refreshes elsewhere differs)
            projection.append(held if refreshes(t + 1, ours.param_groups[0]) else None)
        ours.step([grad_of(p, c, n, t) for p, c, n in zip(ours_params, centres, noise[t])],
                  projection=projection)
        for p, x in zip(ours_params, tensors):
            scale = max(1.0, float(np.abs(x.detach().numpy()).max()))
            worst = max(worst, float(np.abs(p - x.detach().numpy()).max()) / scale)
    return worst


def authors_refreshed(t):
    return (t - 1) % GAP == 0


def pytorch_optimizer_refreshed(t):
    return t == 1 or t % GAP == 0


def make_authors(rank, scale, scale_type, weight_decay, scale_front=False, disable_nl=False):
    AdamW = authors_apollo()

    def make(tensors):
        matrices = [x for x in tensors if x.dim() == 2]
        others = [x for x in tensors if x.dim() != 2]
        return AdamW([{"params": matrices, "rank": rank, "update_proj_gap": GAP,
                       "scale": scale, "proj": "random", "proj_type": "std",
                       "scale_type": scale_type},
                      {"params": others}], lr=LRS[0], weight_decay=weight_decay,
                     scale_front=scale_front, disable_nl=disable_nl)
    return make


#: (rank, scale, scale_type, weight_decay, scale_front, disable_nl) and npoptim's variant.
AUTHORS_CASES = {
    "apollo": ((2, 1.0, "channel", 0.1, False, False), dict(variant="apollo", rank=2)),
    "apollo_big_rank": ((7, 2.0, "channel", 0.1, False, False), dict(variant="apollo", rank=7,
                                                                     scale=2.0)),
    "apollo_mini": ((1, 128.0, "tensor", 0.05, False, False), dict(variant="apollo_mini")),
    "scale_front": ((2, 4.0, "channel", 0.1, True, False),
                    dict(rank=2, scale=4.0, scale_front=True)),
    "no_limiter": ((3, 1.0, "tensor", 0.0, False, True),
                   dict(rank=3, scale_type="tensor", norm_growth_limiter=False)),
}


@pytest.mark.needs("torch", "apollo_torch")
@pytest.mark.parametrize("case", sorted(AUTHORS_CASES))
def test_matches_authors_apollo_torch(case):
    """24 float64 steps, refreshes at t = 1, 6, 11, 16, 21, to 1e-12 of the scale."""
    theirs, ours = AUTHORS_CASES[case]
    rank, scale, scale_type, wd, front, no_nl = theirs
    worst = run_pair(make_authors(rank, scale, scale_type, wd, front, no_nl), authors_refreshed,
                     *problem(1), update_proj_gap=GAP, weight_decay=wd, **ours)
    print(f"APOLLO {case} vs apollo-torch: worst {worst:.2e} of the scale")
    assert worst < TOL


def make_pytorch_optimizer(rank, scale, scale_type, weight_decay, foreach):
    import pytorch_optimizer

    def make(tensors):
        torch.manual_seed(0)
        matrices = [x for x in tensors if x.dim() == 2]
        others = [x for x in tensors if x.dim() != 2]
        return pytorch_optimizer.APOLLO(
            [{"params": matrices, "rank": rank, "update_proj_gap": GAP, "scale": scale,
              "projection_type": "random"}, {"params": others}],
            lr=LRS[0], scale_type=scale_type, weight_decay=weight_decay, foreach=foreach)
    return make


@pytest.mark.needs("torch", "pytorch_optimizer")
@pytest.mark.parametrize("rank, scale, scale_type, foreach",
                         [(2, 1.0, "tensor", False), (2, 3.0, "channel", False),
                          (1, 128.0, "tensor", True)])
def test_matches_pytorch_optimizer(rank, scale, scale_type, foreach):
    """pytorch_optimizer's APOLLO (refreshes at t = 1, 5, 10, 15, 20), 24 float64 steps."""
    worst = run_pair(make_pytorch_optimizer(rank, scale, scale_type, 0.1, foreach),
                     pytorch_optimizer_refreshed, *problem(2), variant="pytorch_optimizer",
                     rank=rank, scale=scale, scale_type=scale_type, update_proj_gap=GAP,
                     weight_decay=0.1)
    print(f"APOLLO pytorch_optimizer rank {rank} {scale_type} vs pytorch_optimizer: "
          f"worst {worst:.2e} of the scale")
    assert worst < TOL


@pytest.mark.needs("torch", "apollo_torch", "pytorch_optimizer")
def test_the_variants_tell_the_implementations_apart():
    """The authors' form fails against pytorch_optimizer and the other way round, and one
    switch alone is not enough (each of the three places matters)."""
    params, centres, noise = problem(3)
    theirs = make_pytorch_optimizer(2, 2.0, "tensor", 0.1, False)
    base = dict(rank=2, scale=2.0, scale_type="tensor", update_proj_gap=GAP, weight_decay=0.1)
    assert run_pair(theirs, pytorch_optimizer_refreshed, params, centres, noise,
                    variant="pytorch_optimizer", **base) < TOL
    for switch, value in (("scaled_gradient", "full"), ("refresh_offset", 1),
                          ("decay_lr", "lr")):
        worst = run_pair(theirs, pytorch_optimizer_refreshed, params, centres, noise,
                         variant="pytorch_optimizer", **{switch: value}, **base)
        assert worst > 1e-6, switch
    authors = make_authors(2, 2.0, "tensor", 0.1)
    assert run_pair(authors, authors_refreshed, params, centres, noise, **base) < TOL
    assert run_pair(authors, authors_refreshed, params, centres, noise,
                    variant="pytorch_optimizer", **base) > 1e-6


@pytest.mark.needs("torch", "apollo_torch")
def test_authors_given_the_counter_stream_projectors_match_the_default():
    """The other direction (what the golden cases' ``matches`` say): apollo-torch with its
    projector's draw replaced by npoptim's counter stream (keyed by the parameter's index and
    the step) follows npoptim's default APOLLO, which draws them itself."""
    AdamW = authors_apollo()
    projector_module = sys.modules["_apollo_torch_alone.random_projector"]

    class CounterProjector(projector_module.GradientProjector):
        def project(self, full_rank_grad, iter):
            self.t = iter + 1
            return super().project(full_rank_grad, iter)

        def get_orthogonal_matrix(self, weights, rank, type, seed):
            shape = (rank, weights.shape[1]) if type == "right" else (weights.shape[0], rank)
            return torch.tensor(random_projector(7, self.index, self.t, shape, rank,
                                                 np.float64))

    params, centres, noise = problem(6)
    tensors = [torch.tensor(p.copy(), requires_grad=True) for p in params]
    theirs = AdamW([{"params": tensors[:2], "rank": 2, "update_proj_gap": GAP, "scale": 1.0,
                     "proj": "random", "proj_type": "std", "scale_type": "channel"},
                    {"params": tensors[2:]}], lr=LRS[0], weight_decay=0.1)

    def initialize(group, state):
        made = CounterProjector(group["rank"], update_proj_gap=group["update_proj_gap"],
                                scale=group["scale"], proj_type=group["proj_type"])
        made.index = state["seed"] - 1   # apollo-torch's seed: the parameter's place, from 1
        return made
    theirs._initialize_projector = initialize
    ours_params = [p.copy() for p in params]
    ours = APOLLO(ours_params, lr=LRS[0], rank=2, update_proj_gap=GAP, weight_decay=0.1,
                  seed=7)
    worst = 0.0
    for t in range(STEPS):
        for opt in (theirs, ours):
            for group in opt.param_groups:
                group["lr"] = LRS[t]
        for x, c, n in zip(tensors, centres, noise[t]):
            x.grad = torch.tensor(grad_of(x.detach().numpy(), c, n, t))
        theirs.step()
        ours.step([grad_of(p, c, n, t) for p, c, n in zip(ours_params, centres, noise[t])])
        for p, x in zip(ours_params, tensors):
            worst = max(worst, float(np.abs(p - x.detach().numpy()).max()))
    print(f"apollo-torch with the counter-stream projectors vs APOLLO: worst {worst:.2e}")
    assert worst < TOL


@pytest.mark.needs("torch", "apollo_torch")
def test_channel_and_tensor_scaling_differ_against_the_authors():
    params, centres, noise = problem(4)
    worst = run_pair(make_authors(2, 1.0, "channel", 0.0), authors_refreshed, params, centres,
                     noise, rank=2, scale_type="tensor", update_proj_gap=GAP)
    assert worst > 1e-6


def test_first_step_hand_derived():
    """t = 1 on a tall 3x2 matrix with a given 1x2 projector: R = G P^T, N = (1-β1)R /
    (sqrt(1-β2)|R| + ε), one factor per row, D = diag(c) G, step γ sqrt(1-β2)/(1-β1) √s."""
    b1, b2, eps, lr, wd, s = 0.9, 0.99, 1e-6, 0.1, 0.5, 4.0
    w = np.array([[0.5, -1.0], [2.0, 0.25], [-0.75, 1.5]])
    g = np.array([[1.0, -2.0], [0.5, 0.5], [-3.0, 1.0]])
    proj = np.array([[0.6, -0.8]])
    r = g @ proj.T
    n = (1 - b1) * r / (math.sqrt(1 - b2) * np.abs(r) + eps)
    c = np.abs(n[:, 0]) / (np.abs(r[:, 0]) + 1e-8)
    step = lr * math.sqrt(1 - b2) / (1 - b1)
    expected = w - step * math.sqrt(s) * c[:, None] * g
    expected = expected - lr * wd * expected
    p = w.copy()
    opt = APOLLO([p], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, rank=1, scale=s)
    opt.step([g.copy()], projection=[proj.copy()])
    close(p, expected, rtol=1e-14)
    close(opt.state[0]["scaled_grad"][0], np.linalg.norm(c[:, None] * g), rtol=1e-14)
    # the wide form: P (2x1) on the left, one factor per column
    p = w.T.copy()
    opt = APOLLO([p], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, rank=1, scale=s)
    opt.step([g.T.copy()], projection=[proj.T.copy()])
    close(p, expected.T, rtol=1e-14)


def test_norm_growth_limiter_hand_derived():
    """Step 2's gradient lies almost outside the projector's span: R is tiny, so the factor
    ‖N‖/‖R‖ and the update's norm would grow ~1e3-fold; the limiter cuts the update to
    1.01 (ν + 1e-8), ν step 1's norm (lr 1, scale 1, no bias correction: the update is D)."""
    proj = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    g1 = np.arange(12.0).reshape(4, 3) - 5
    g2 = np.zeros((4, 3))
    g2[:, 2], g2[:, :2] = 10.0, 1e-3
    sizes = {}
    for limited in (True, False):
        w = np.zeros((4, 3))
        opt = APOLLO([w], lr=1.0, rank=2, scale_type="tensor", correct_bias=False,
                     norm_growth_limiter=limited)
        opt.step([g1.copy()], projection=[proj.copy()])
        first = np.linalg.norm(w)
        before = w.copy()
        opt.step([g2.copy()])
        sizes[limited] = np.linalg.norm(w - before)
        if limited:
            close(sizes[limited], 1.01 * (first + 1e-8), rtol=1e-12)
            close(opt.state[0]["scaled_grad"][0], sizes[limited], rtol=1e-12)
    assert sizes[False] > 100 * sizes[True]


def test_projector_comes_from_the_counter_stream_and_refreshes():
    """Without a projection hook, P is the counter stream keyed (seed, index, t) over sqrt(r),
    drawn at t = 1 and every update_proj_gap-th step after (t = 1, 4, 7 with gap 3), and two
    runs give the same bits."""
    shapes = ((6, 4), (3, 7))
    runs = []
    for _ in range(2):
        params = [np.ones(s) for s in shapes]
        opt = APOLLO(params, rank=2, update_proj_gap=3, seed=11)
        seen = []
        for t in range(1, 8):
            opt.step([np.full(s, 0.1 * t) + np.arange(np.prod(s)).reshape(s) for s in shapes])
            seen.append([opt.state[i]["projector"].copy() for i in range(2)])
            for i, s in enumerate(shapes):
                drawn = max(k for k in (1, 4, 7) if k <= t)
                shape = (2, s[1]) if s[0] >= s[1] else (s[0], 2)
                z = standard_normal(11, i, drawn, shape[0] * shape[1]) / math.sqrt(2)
                np.testing.assert_array_equal(seen[-1][i], z.reshape(shape))
        runs.append([p.copy() for p in params])
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)
    ref = APOLLO([np.ones((6, 4))], rank=2, update_proj_gap=3, variant="pytorch_optimizer")
    for t in range(1, 7):
        old = ref.state[0]["projector"].copy() if 0 in ref.state else None
        ref.step([np.full((6, 4), float(t))])
        changed = old is None or not np.array_equal(old, ref.state[0]["projector"])
        assert changed == (t in (1, 3, 6)), t


def test_other_parameters_take_plain_adamw():
    rng = np.random.default_rng(5)
    for shape in ((6,), (3, 2, 2), (0, 4)):
        p = rng.uniform(-1, 1, shape)
        expected = p.copy()
        m = np.zeros(shape)
        v = np.zeros(shape)
        opt = APOLLO([p], lr=0.01, weight_decay=0.1, rank=2)
        for t in range(1, 4):
            g = rng.standard_normal(shape)
            m = 0.9 * m + 0.1 * g
            v = 0.999 * v + 0.001 * g * g
            step = 0.01 * math.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
            expected = expected - step * m / (np.sqrt(v) + 1e-6)
            expected = expected - 0.01 * 0.1 * expected
            opt.step([g])
        close(p, expected, rtol=1e-13)


def test_projection_hook_checks_before_anything_changes():
    params = [np.ones((5, 3)), np.ones(4)]
    opt = APOLLO(params, rank=2, update_proj_gap=3)
    grads = [np.full((5, 3), 0.5), np.full(4, 0.5)]
    for bad, match in (([np.ones((3, 2)), None], "shape"),
                       ([np.ones((2, 3), np.float32), None], "dtype"),
                       ([None, np.ones(4)], "draws no projector"),
                       ([np.ones((2, 3))], "one array"),
                       (np.ones((2, 2, 3)), "one array"), (3.0, "one array")):
        before = snapshot(opt)
        with pytest.raises(ValueError, match=match):
            opt.step(grads, projection=bad)
        assert_unchanged(opt, before)
    opt.step(grads, projection=[np.ones((2, 3)), None])
    np.testing.assert_array_equal(opt.state[0]["projector"], np.ones((2, 3)))
    with pytest.raises(ValueError, match="draws no projector"):   # t = 2 does not refresh
        opt.step(grads, projection=[np.ones((2, 3)), None])
    opt.step(grads)
    opt.step(grads)
    opt.step(grads, projection=[2 * np.ones((2, 3)), None])   # t = 4 does
    np.testing.assert_array_equal(opt.state[0]["projector"], 2 * np.ones((2, 3)))


@pytest.mark.parametrize("kw, match", [
    (dict(rank=0), "rank"), (dict(rank=1.5), "rank"),
    (dict(update_proj_gap=0), "update_proj_gap"),
    (dict(scale=-1.0), "scale"), (dict(scale_type="row"), "scale_type"),
    (dict(scaled_gradient="back"), "scaled_gradient"), (dict(decay_lr="wd"), "decay_lr"),
    (dict(refresh_offset=-1), "refresh_offset"), (dict(variant="apollo_max"), "variant"),
    (dict(seed=-1), "seed"), (dict(lr=-1.0), "learning rate"), (dict(betas=(1.0, 0.9)), "beta"),
    (dict(norm_growth_limiter=1), "norm_growth_limiter"), (dict(scale_front="no"), "scale_front"),
])
def test_bad_options_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        APOLLO([np.ones((3, 2))], **kw)


def test_variants_set_their_defaults():
    mini = APOLLO([np.ones((3, 2))], variant="mini")
    assert mini.variant == "apollo_mini"
    assert (mini.defaults["rank"], mini.defaults["scale"], mini.defaults["scale_type"]) == \
        (1, 128.0, "tensor")
    full = APOLLO([np.ones((3, 2))])
    assert (full.defaults["rank"], full.defaults["scale_type"],
            full.defaults["scaled_gradient"]) == (256, "channel", "full")
    po = APOLLO([np.ones((3, 2))], variant="pytorch_optimizer", scale_type="channel")
    assert (po.defaults["scale_type"], po.defaults["scaled_gradient"],
            po.defaults["refresh_offset"], po.defaults["decay_lr"]) == \
        ("channel", "projected_back", 0, "step_size")
    with pytest.raises(ValueError, match="variant"):
        APOLLO([{"params": [np.ones((3, 2))], "variant": "apollo_mini"}])


def test_float32_stays_float32():
    p = np.ones((5, 3), np.float32)
    opt = APOLLO([p], rank=2)
    opt.step([np.full((5, 3), 0.5, np.float32)])
    assert p.dtype == np.float32 and opt.state[0]["projector"].dtype == np.float32
    assert np.isfinite(p).all() and not np.array_equal(p, np.ones((5, 3), np.float32))
