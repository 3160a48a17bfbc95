"""Adam-mini: the authors' adam-mini 1.1.1 in float64 over a toy transformer's named
parameters (an embedding, a query of 3-D shape, grouped-query key and value, an output
projection, an MLP with a bias, norms, a 3-D unnamed-kind tensor, an output layer; 24 steps
under an lr schedule, gradients of a random scale per step, weight decay), float32 to
float32's precision, the ways to name parameters, hand-derived steps, what tells Adam-mini
from AdamW and from wrong partitions, and bad input."""
import math

import numpy as np
import pytest
from hand_derived import assert_unchanged, close, snapshot
from scheduled_runs import npoptim_trajectory, random_problem, worst_error

from npoptim.kernels.parallel import parallel_threshold_set
from npoptim.kernels.reduction import grad_sumsq, mean_of_squares
from npoptim.optim.adam import AdamW
from npoptim.optim.adam_mini import AdamMini, decays, partition

DIM, HEADS, KV_HEADS, VOCAB, HIDDEN = 8, 4, 2, 11, 16
HEAD = DIM * DIM // HEADS
#: a toy transformer's named parameters (Llama's names; "conv" matches no rule: one block)
SHAPES = {
    "model.embed_tokens.weight": (VOCAB, DIM),
    "model.layers.0.input_layernorm.weight": (DIM,),
    "model.layers.0.self_attn.q_proj.weight": (HEADS, DIM // HEADS, DIM),
    "model.layers.0.self_attn.k_proj.weight": (KV_HEADS * DIM // HEADS, DIM),
    "model.layers.0.self_attn.v_proj.weight": (KV_HEADS * DIM // HEADS, DIM),
    "model.layers.0.self_attn.o_proj.weight": (DIM, DIM),
    "model.layers.0.post_attention_layernorm.weight": (DIM,),
    "model.layers.0.mlp.up_proj.weight": (HIDDEN, DIM),
    "model.layers.0.mlp.up_proj.bias": (HIDDEN,),
    "model.layers.0.mlp.down_proj.weight": (DIM, HIDDEN),
    "model.conv.weight": (3, 2, 4),
    "model.norm.weight": (DIM,),
    "lm_head.weight": (VOCAB, DIM),
}
NAMES = list(SHAPES)
STEPS = 24
LRS = [1e-2 * min(1.0, (t + 1) / 5) * (0.5 + 0.5 * math.cos(math.pi * t / STEPS))
       for t in range(STEPS)]
#: the worst float64 error allowed, relative to each tensor's scale (measured: 2.2e-16)
RTOL64 = 1e-12
MODEL = dict(dim=DIM, n_heads=HEADS, n_kv_heads=KV_HEADS)


def problem(seed, dtype=np.float64):
    return random_problem(seed, list(SHAPES.values()), STEPS, dtype)


def run_adam_mini(params, grads, **kw):
    import torch
    from adam_mini import Adam_mini
    tensors = [torch.nn.Parameter(torch.tensor(p.copy())) for p in params]
    opt = Adam_mini(list(zip(NAMES, tensors)), lr=LRS[0], verbose=False, **kw)
    out = []
    for lr, step_grads in zip(LRS, grads):
        for group in opt.param_groups:
            group["lr"] = lr
        for t, g in zip(tensors, step_grads):
            t.grad = torch.tensor(g.copy())
        opt.step()
        out.append([t.detach().numpy().copy() for t in tensors])
    return out, opt, tensors


def run_npoptim(params, grads, named=True, **kw):
    ps = [p.copy() for p in params]
    opt = (AdamMini(list(zip(NAMES, ps)), lr=LRS[0], **kw) if named
           else AdamMini(ps, lr=LRS[0], param_names=NAMES, **kw))
    return npoptim_trajectory(opt, ps, grads, LRS), opt


@pytest.mark.needs("torch", "adam_mini")
@pytest.mark.parametrize("kw", [dict(weight_decay=0.1),
                                dict(weight_decay=0.05, betas=(0.8, 0.99), eps=1e-3),
                                dict(n_kv_heads=None, weight_decay=0.0)],
                         ids=["decay", "decay-betas-eps", "no-decay-mha"])
def test_matches_adam_mini(kw):
    kw = dict(MODEL, **kw)
    if kw["n_kv_heads"] is None:  # multi-head attention: the key has a head per query head
        kw["n_kv_heads"] = HEADS
    params, grads = problem(0)
    expected, theirs, tensors = run_adam_mini(params, grads, **kw)
    got, opt = run_npoptim(params, grads, **kw)
    assert worst_error(got, expected) < RTOL64
    for i, t in enumerate(tensors):
        state = theirs.state[t]
        assert state["step"] == opt.state[i]["step"] == STEPS
        for name in ("m", "v", "vmean"):
            assert (name in state) == (name in opt.state[i]), (NAMES[i], name)
            if name in state:  # the package keeps a query's m as (heads, head size)
                close(opt.state[i][name], state[name].numpy().reshape(opt.state[i][name].shape),
                      rtol=1e-11)
                assert state[name].numel() == opt.state[i][name].size


@pytest.mark.needs("torch", "adam_mini")
def test_float32_matches_adam_mini_to_float32_precision():
    params, grads = problem(2, np.float32)
    expected, _, _ = run_adam_mini(params, grads, weight_decay=0.1, **MODEL)
    got, opt = run_npoptim(params, grads, weight_decay=0.1, **MODEL)
    assert all(p.dtype == np.float32 for p in got[-1])
    assert all(s.dtype == np.float32 for st in opt.state.values() for s in st.values()
               if hasattr(s, "dtype"))
    assert worst_error(got, expected) < 1e-6


def test_param_names_and_pairs_give_the_same_bits():
    params, grads = problem(3)
    a, _ = run_npoptim(params, grads, weight_decay=0.1, **MODEL)
    b, opt = run_npoptim(params, grads, named=False, weight_decay=0.1, **MODEL)
    assert all(np.array_equal(x, y) for xs, ys in zip(a, b) for x, y in zip(xs, ys))
    assert opt.param_names == NAMES


def test_groups_of_pairs_and_of_named_arrays():
    arrays = [np.ones((4, 4)), np.ones(4)]
    opt = AdamMini([{"params": [("wq", arrays[0])], "lr": 0.5}, {"params": [("b.bias", arrays[1])]}],
                   dim=4, n_heads=2)
    assert opt.param_names == ["wq", "b.bias"] and opt.param_groups[0]["lr"] == 0.5
    opt.add_param_group({"params": [("norm", np.ones(3))]})
    assert opt.param_names[-1] == "norm"
    copies = [a.copy() for a in arrays]
    other = AdamMini([{"params": [copies[0]], "lr": 0.5}, {"params": [copies[1]]}],
                     param_names=["wq", "b.bias"], dim=4, n_heads=2)
    assert other.param_names == ["wq", "b.bias"]
    assert other.state == {} and other.param_groups[0]["params"][0] is copies[0]


# ------------------------------------------------------------------ the partition
def test_each_name_gets_the_packages_blocks():
    group = dict(dim=DIM, n_heads=HEADS)
    kinds = {name: partition(name, shape, group) for name, shape in SHAPES.items()}
    assert kinds["model.embed_tokens.weight"] == ("neuron", DIM)
    assert kinds["lm_head.weight"] == ("neuron", DIM)
    assert kinds["model.layers.0.self_attn.q_proj.weight"] == ("head", HEAD)
    assert kinds["model.layers.0.self_attn.k_proj.weight"] == ("head", HEAD)
    assert kinds["model.layers.0.mlp.up_proj.bias"] == ("adam", 1)
    assert kinds["model.layers.0.input_layernorm.weight"] == ("tensor", DIM)
    assert kinds["model.conv.weight"] == ("tensor", 24)
    assert partition(None, (3, 4), group) == ("tensor", 12)
    assert partition("Layer.WQ", (4, 16), group) == ("head", HEAD)  # names are lower-cased
    assert [decays(n) for n in ("mlp.weight", "ln_f.weight", "x.bias", "final_norm", None)] == [
        True, False, False, False, True]


def test_none_is_an_unnamed_parameter_and_param_names_round_trip():
    opt = AdamMini([np.ones(2), np.ones((2, 2))], param_names=[None, "wq"], dim=2, n_heads=2)
    assert opt.param_names == [None, "wq"]
    again = AdamMini([np.ones(2), np.ones((2, 2))], param_names=opt.param_names, dim=2,
                     n_heads=2)
    assert again.param_names == [None, "wq"]
    assert AdamMini([np.ones(2)]).param_names == [None]
    assert AdamMini([(None, np.ones(2))], param_names=None).param_names == [None]


def test_unnamed_parameters_are_one_block_each_with_decay():
    p = np.array([[1.0, -2.0], [3.0, 4.0]])
    g = np.array([[1.0, 2.0], [2.0, 4.0]])
    opt = AdamMini([p], lr=0.1, eps=0.0, weight_decay=0.5)
    opt.step([g])
    assert opt.state[0]["vmean"].shape == ()
    close(opt.state[0]["vmean"], 0.001 * np.mean(g * g))
    # first step: m/b1 = g, sqrt(v/b2) = RMS(g) = sqrt(25/4)
    close(p, np.array([[1.0, -2.0], [3.0, 4.0]]) * (1 - 0.05) - 0.1 * g / 2.5)


# ------------------------------------------------------------------ hand-derived steps
def test_first_step_of_a_query_divides_each_head_by_its_rms():
    """dim 2, 2 heads: a head is 2 elements (a row); with eps 0 the first step is
    θ - γ g / RMS(head's g), and the second moment is (1-β2) mean(g²) per head."""
    p = np.zeros((2, 2))
    g = np.array([[3.0, 4.0], [1.0, -1.0]])
    opt = AdamMini([("q_proj.weight", p)], lr=0.1, eps=0.0, dim=2, n_heads=2)
    opt.step([g])
    close(opt.state[0]["vmean"], 0.001 * np.array([[12.5], [1.0]]))
    close(p, -0.1 * g / np.array([[math.sqrt(12.5)], [1.0]]))
    close(opt.state[0]["m"], 0.1 * g)


def test_second_step_of_a_bias_is_adams():
    p = np.array([0.5, -1.0])
    g1, g2 = np.array([1.0, -2.0]), np.array([0.5, 3.0])
    opt = AdamMini([("fc.bias", p)], lr=0.01, betas=(0.5, 0.75), eps=1e-3, weight_decay=9.0)
    opt.step([g1])
    opt.step([g2])
    m = 0.5 * (0.5 * g1) + 0.5 * g2
    v = 0.75 * (0.25 * g1 * g1) + 0.25 * g2 * g2
    first = np.array([0.5, -1.0]) - 0.01 * g1 / (np.abs(g1) + 1e-3)  # no decay: a bias
    close(p, first - 0.01 / 0.75 * m / (np.sqrt(v / (1 - 0.75 ** 2)) + 1e-3))
    close(opt.state[0]["v"], v)


def test_a_row_block_of_an_mlp_is_not_adamw():
    """One v per row: a row whose gradient has unequal elements steps unlike AdamW (which
    divides each element by its own |g| on the first step), and like it with equal ones."""
    g = np.array([[1.0, -1.0], [2.0, 0.5]])
    p, q = np.zeros((2, 2)), np.zeros((2, 2))
    AdamMini([("mlp.fc", p)], lr=0.1, eps=0.0).step([g])
    AdamW([q], lr=0.1, eps=0.0, weight_decay=0.0).step([g.copy()])
    close(p[0], q[0])
    assert not np.allclose(p[1], q[1])
    close(p[1], -0.1 * g[1] / math.sqrt((4 + 0.25) / 2))


def test_mean_of_squares_is_grad_sumsqs_order_over_the_size():
    x = np.random.default_rng(5).standard_normal(3000)
    assert mean_of_squares(x) == grad_sumsq(x) / 3000
    assert np.isnan(mean_of_squares(np.zeros(0)))


def test_same_bits_on_one_thread_and_on_several():
    params, grads = problem(4)
    a, _ = run_npoptim(params, grads[:3], weight_decay=0.1, **MODEL)
    with parallel_threshold_set(1):
        b, _ = run_npoptim(params, grads[:3], weight_decay=0.1, **MODEL)
    assert all(np.array_equal(x, y) for xs, ys in zip(a, b) for x, y in zip(xs, ys))


def test_state_dict_round_trip_continues_the_same_bits():
    params, grads = problem(6)
    ps = [p.copy() for p in params]
    opt = AdamMini(list(zip(NAMES, ps)), lr=0.01, weight_decay=0.1, **MODEL)
    opt.step(grads[0])
    saved = opt.state_dict()
    assert saved["state"][0]["step"] == 1 and isinstance(saved["state"][0]["step"], int)
    qs = [p.copy() for p in ps]
    other = AdamMini(qs, lr=0.01, weight_decay=0.1, param_names=NAMES, **MODEL)
    other.load_state_dict(saved)
    opt.step(grads[1])
    other.step(grads[1])
    assert all(np.array_equal(p, q) for p, q in zip(ps, qs))


# ------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("kw, message", [
    (dict(lr=-1.0), "learning rate"),
    (dict(betas=(0.9, 1.0)), "beta parameter at index 1"),
    (dict(eps=-1.0), "epsilon"),
    (dict(weight_decay=-0.1), "weight_decay"),
    (dict(dim=0), "dim"),
    (dict(n_heads=2.0), "n_heads"),
    (dict(n_heads=4, n_kv_heads=3), "must divide n_heads"),
])
def test_bad_hyperparameters_raise(kw, message):
    with pytest.raises(ValueError, match=message):
        AdamMini([np.zeros(2)], **kw)


@pytest.mark.parametrize("params, kw, error, message", [
    ([("a", np.zeros(2)), ("a", np.zeros(2))], {}, ValueError, "used twice"),
    ([("", np.zeros(2))], {}, ValueError, "must not be empty"),
    ([("a", np.zeros(2)), np.zeros(2)], {}, TypeError, "name every parameter"),
    ([np.zeros(2)], dict(param_names=["a", "b"]), ValueError, "2 names for 1 parameters"),
    ([np.zeros(2)], dict(param_names="a"), TypeError, "sequence of strings"),
    ([np.zeros(2)], dict(param_names=[3]), TypeError, "must be a string"),
    ([("a", np.zeros(2))], dict(param_names=["a"]), ValueError, "not both"),
    ([("q_proj", np.zeros(5))], dict(dim=4, n_heads=2), ValueError, "multiple of"),
    ([("wq", np.zeros(8))], dict(dim=3, n_heads=2), ValueError, "dim\\*dim"),
    ([("mlp.w", np.zeros((2, 2, 2)))], {}, ValueError, "must be 2-D"),
])
def test_bad_names_and_shapes_raise(params, kw, error, message):
    with pytest.raises(error, match=message):
        AdamMini(params, **kw)


def test_a_bad_partition_is_refused_before_anything_changes():
    params = [np.ones((2, 4)), np.ones(3)]
    opt = AdamMini(list(zip(["wq", "norm"], params)), dim=2, n_heads=1)
    opt.step([np.ones((2, 4)), np.ones(3)])
    snap = snapshot(opt)
    opt.param_groups[0]["n_heads"] = 3  # 2*2/3: no whole heads
    with pytest.raises(ValueError, match="wq.*multiple of n_heads"):
        opt.step([np.ones((2, 4)), np.ones(3)])
    assert_unchanged(opt, snap)


# ------------------------------------------------------------------ the golden cases
@pytest.mark.needs("torch", "adam_mini")
def test_golden_cases_are_the_packages_steps():
    """Every case of reference_results/cases/AdamMini.json, replayed through adam-mini 1.1.1
    itself (names from the case, or none: its default partition), to 1e-12 (float64) and
    1e-6 (float32) of each tensor's scale."""
    import json
    import pathlib

    import torch
    from adam_mini import Adam_mini

    from npoptim.golden import codec
    path = pathlib.Path(__file__).resolve().parents[1] / "reference_results/cases/AdamMini.json"
    cases = json.loads(path.read_text())["cases"]
    assert len(cases) == 3
    for case in cases:
        hyper = codec.from_json_hyper(case["hyperparameters"])
        names = [name or f"p{i}" for i, name in enumerate(hyper.pop("param_names"))]
        tensors = [torch.nn.Parameter(torch.tensor(codec.decode_array(p).copy()))
                   for p in case["params"]]
        opt = Adam_mini(list(zip(names, tensors)), verbose=False, **hyper)
        rtol = 1e-12 if case["dtype"] == "float64" else 1e-6
        for step in case["steps"]:
            for group in opt.param_groups:
                group["lr"] = step["lr"]
            for t, g in zip(tensors, step["grads"]):
                t.grad = torch.tensor(codec.decode_grad(g).copy())
            opt.step()
            for t, e in zip(tensors, step["expected"]["params"]):
                expected = codec.decode_array(e)
                err = np.max(np.abs(t.detach().numpy() - expected), initial=0.0)
                assert err <= rtol * max(np.max(np.abs(expected)), 1e-300), (case["id"], err)
