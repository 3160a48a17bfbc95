"""Adam, AdamW, SparseAdam, Adagrad and Adadelta against torch.optim 2.13, option for option.

Each case runs 25 steps on params of shapes (5,), (3, 4), (2, 3, 4) and (1,) split over two
param groups with different hyperparameters, with some None gradients mixed in. float64 must
agree to 1e-12 of the parameters' scale; float32 no worse than torch's own foreach-vs-single
spread (or 4 float32 ulps of scale when that spread is zero). The fraction of bit-exact
elements is printed (``pytest -s``) and must stay high in float64.
"""
import numpy as np
import pytest
import scipy.sparse

import npoptim

torch = pytest.importorskip("torch")

SHAPES = [(5,), (3, 4), (2, 3, 4), (1,)]
STEPS = 25


def run_pair(name, options, group_overrides, dtype, seed=0, foreach=False, sparse=False):
    """Run npoptim and torch side by side; return (np params, torch params, np opt, torch opt)."""
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    tparams = [torch.tensor(p.copy(), requires_grad=True) for p in params]
    ours = getattr(npoptim, name)(
        [{"params": params[:2]}, {"params": params[2:], **group_overrides}], **options)
    topts = dict(options)
    if name not in ("SparseAdam",):
        topts["foreach"] = foreach
    theirs = getattr(torch.optim, name)(
        [{"params": tparams[:2]}, {"params": tparams[2:], **group_overrides}], **topts)
    for step in range(STEPS):
        grads = []
        for k, p in enumerate(params):
            if (step + k) % 7 == 3:
                grads.append(None)
                continue
            g = rng.standard_normal(p.shape).astype(dtype)
            if sparse:
                g[rng.random(p.shape[0]) < 0.4] = 0  # some untouched rows
            grads.append(g)
        if sparse:
            csr = [None if g is None else scipy.sparse.csr_array(g.reshape(g.shape[0], -1))
                   for g in grads]
            ours.step(csr)
        else:
            ours.step(grads)
        for t, g in zip(tparams, grads):
            if g is None:
                t.grad = None
            elif sparse:
                t.grad = torch.tensor(g).to_sparse()
            else:
                t.grad = torch.tensor(g)
        theirs.step()
    return params, [t.detach().numpy() for t in tparams], ours, theirs


def scaled_error(a_list, b_list):
    scale = max(1.0, max(float(np.max(np.abs(b))) for b in b_list))
    return max(float(np.max(np.abs(a.astype(np.float64) - b))) for a, b in zip(a_list, b_list)) / scale


def exact_fraction(a_list, b_list):
    return float(np.mean(np.concatenate([(a == b).ravel() for a, b in zip(a_list, b_list)])))


CASES = [
    ("Adam", dict(lr=0.01), dict(lr=0.05)),
    ("Adam", dict(lr=0.01, amsgrad=True), dict(betas=(0.8, 0.9))),
    ("Adam", dict(lr=0.01, weight_decay=0.1, maximize=True), dict(eps=1e-3)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, amsgrad=True),
     dict(weight_decay=0.0)),
    ("AdamW", dict(lr=0.01), dict(weight_decay=0.5)),
    ("AdamW", dict(lr=0.02, amsgrad=True, maximize=True), dict(betas=(0.5, 0.6))),
    ("Adagrad", dict(lr=0.1), dict(lr=0.3)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.2),
     dict(eps=1e-3)),
    ("Adagrad", dict(lr=0.1, maximize=True), dict(lr_decay=0.5)),
    ("Adadelta", dict(), dict(lr=0.5)),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1), dict(rho=0.95)),
    ("Adadelta", dict(maximize=True, weight_decay=0.01), dict(eps=1e-2)),
]


@pytest.mark.parametrize("name,options,overrides", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_float64_matches_torch(name, options, overrides):
    ours, theirs, opt, topt = run_pair(name, options, overrides, np.float64)
    err = scaled_error(ours, theirs)
    frac = exact_fraction(ours, theirs)
    print(f"{name} {options} {overrides}: scaled error {err:.2e}, bit-exact {frac:.1%}")
    assert err <= 1e-12
    assert frac >= 0.5
    # the state agrees too, under torch's names
    tstate = topt.state_dict()["state"]
    for index, entry in opt.state_dict()["state"].items():
        assert set(entry) == set(tstate[index])
        for key, value in entry.items():
            np.testing.assert_allclose(np.asarray(value, np.float64),
                                       np.asarray(tstate[index][key].numpy() if hasattr(
                                           tstate[index][key], "numpy") else tstate[index][key],
                                           np.float64), rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize("name,options,overrides", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_float32_within_torch_spread(name, options, overrides):
    ours, single, _, _ = run_pair(name, options, overrides, np.float32)
    _, multi, _, _ = run_pair(name, options, overrides, np.float32, foreach=True)
    spread = scaled_error(multi, single)
    err = scaled_error(ours, single)
    assert err <= max(2 * spread, 4 * np.finfo(np.float32).eps), (err, spread)


SPARSE_CASES = [
    ("SparseAdam", dict(lr=0.05), dict(lr=0.1)),
    ("SparseAdam", dict(lr=0.05, maximize=True), dict(betas=(0.5, 0.7), eps=1e-3)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05), dict(initial_accumulator_value=0.5)),
    ("Adagrad", dict(lr=0.1, maximize=True), dict(eps=1e-2)),
]


@pytest.mark.parametrize("name,options,overrides", SPARSE_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(SPARSE_CASES)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_csr_gradients_match_torch_sparse(name, options, overrides, dtype):
    ours, theirs, opt, topt = run_pair(name, options, overrides, dtype, sparse=True)
    err = scaled_error(ours, theirs)
    tol = 1e-12 if dtype == np.float64 else 4 * np.finfo(np.float32).eps
    print(f"sparse {name} {dtype.__name__}: scaled error {err:.2e}, "
          f"bit-exact {exact_fraction(ours, theirs):.1%}")
    assert err <= tol
    # SparseAdam's step counter (an int in torch) agrees, None steps included
    for index, entry in opt.state_dict()["state"].items():
        assert int(entry["step"]) == int(topt.state_dict()["state"][index]["step"])


def test_sparse_adam_eps_placement_differs_from_adam():
    """The note's example: constant g=1e-6 for 3 steps, lr=1: SparseAdam -2.42, Adam -2.97."""
    moved = {}
    for name in ("SparseAdam", "Adam"):
        p = np.zeros(1)
        opt = getattr(npoptim, name)([p], lr=1.0)
        for _ in range(3):
            opt.step([np.full(1, 1e-6)])
        moved[name] = p[0]
    assert moved["SparseAdam"] == pytest.approx(-2.42, abs=5e-3)
    assert moved["Adam"] == pytest.approx(-2.97, abs=5e-3)


def test_continuing_from_a_torch_state_dict_matches_torch():
    rng = np.random.default_rng(3)
    p0 = rng.standard_normal((4, 3))
    t = torch.tensor(p0.copy(), requires_grad=True)
    topt = torch.optim.AdamW([t], lr=0.01, amsgrad=True, foreach=False)
    for _ in range(5):
        t.grad = torch.tensor(rng.standard_normal((4, 3)))
        topt.step()
    sd = topt.state_dict()
    converted = {"state": {k: {n: (v.numpy() if hasattr(v, "numpy") else v)
                               for n, v in s.items()} for k, s in sd["state"].items()},
                 "param_groups": sd["param_groups"]}
    p = t.detach().numpy().copy()
    ours = npoptim.AdamW([p], lr=0.5)
    ours.load_state_dict(converted)
    assert ours.param_groups[0]["lr"] == 0.01
    for _ in range(3):
        g = rng.standard_normal((4, 3))
        ours.step([g])
        t.grad = torch.tensor(g)
        topt.step()
    assert scaled_error([p], [t.detach().numpy()]) <= 1e-13
