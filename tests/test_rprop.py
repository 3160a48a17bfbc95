"""Rprop against torch.optim.Rprop 2.13, for every CPU option set torch's own suite uses.

The standard problem of :mod:`torch_compare` (two param groups, each config with its own
second-group overrides, state_dict round trips on both sides), with about 10% of the gradient
entries exactly 0: the signs of successive gradients agree, disagree and vanish, exercising all
three branches; some step sizes hit the clamps. float64 must agree to 1e-12 of the parameters'
scale (states elementwise to 1e-12 too); float32 no worse than torch's own foreach-vs-single
spread plus 4 float32 ulps, and the step sizes bit for bit.
"""
import numpy as np
import pytest

import npoptim
from torch_compare import needs_torch
from torch_compare import TorchSuite, run_np, run_torch, standard_gradient, torch_state_dict


def gradient(rng, t, i, shape, dtype):
    g = standard_gradient(rng, t, i, shape, np.float64)
    if g is None:
        return None
    g[rng.random(shape) < 0.1] = 0.0  # exact zeros: the "product is 0" branch, sign 0
    return g.astype(dtype)


class TestRprop(TorchSuite):
    NAME = "Rprop"
    # optim_inputs_func_rprop (CPU; capturable and tensor-lr variants are device features), with
    # the second group overriding something so the groups differ.
    CONFIGS = {
        "default": ({}, {"lr": 0.05}),
        "non-default lr": ({"lr": 2e-4}, {"etas": (0.3, 1.1)}),
        "clamped": ({"etas": (0.5, 1.5)}, {"step_sizes": (1e-3, 0.02)}),  # above and below
        "step_sizes": ({"step_sizes": (2e-6, 100)}, {"lr": 0.1, "etas": (0.9, 3.0)}),
        "maximize": ({"maximize": True}, {"step_sizes": (0.005, 0.05)}),
    }
    ERRORS = [{"lr": -0.1}, {"lr": 1e-2, "etas": (1.0, 0.5)}]
    F32_ULPS = 4
    STATE_RTOL = 1e-12
    # signs, clamps, products and one multiply-add per element: all bit-exact
    EXACT = tuple(CONFIGS)
    gradient = staticmethod(gradient)

    @needs_torch
    def test_float32_step_sizes_are_bit_exact(self, config):
        """The sign logic is exact: the step sizes agree with torch's bit for bit."""
        params, grads = self.problem(np.float32)
        _, opt = run_np(self.NAME, *self.case(config), params, grads)
        _, topt = run_torch(self.NAME, *self.case(config), params, grads)
        torch_state = torch_state_dict(topt)["state"]
        for index, entry in opt.state_dict()["state"].items():
            np.testing.assert_array_equal(entry["step_size"], torch_state[index]["step_size"])


def test_sign_flip_skips_one_step_and_shrinks_the_step_size():
    p = np.zeros(1)
    opt = npoptim.Rprop([p], lr=0.1, etas=(0.5, 2.0))
    opt.step([np.ones(1)])              # first step: prev is 0, factor 1
    assert p[0] == pytest.approx(-0.1)
    opt.step([np.ones(1)])              # same sign: step size doubles
    assert p[0] == pytest.approx(-0.3)
    opt.step([-np.ones(1)])             # sign flip: step size halves, no move, prev = 0
    assert p[0] == pytest.approx(-0.3)
    assert opt.state[0]["prev"][0] == 0 and opt.state[0]["step_size"][0] == pytest.approx(0.1)
    opt.step([-np.ones(1)])             # prev is 0: factor 1, move up by 0.1
    assert p[0] == pytest.approx(-0.2)


def test_state_layout_matches_torch():
    p = np.zeros((2, 2), np.float32)
    opt = npoptim.Rprop([p], lr=0.25)
    opt.step([np.ones((2, 2), np.float32)])
    entry = opt.state_dict()["state"][0]
    assert list(entry) == ["step", "prev", "step_size"]
    assert entry["step"].dtype == np.float32 and entry["step"] == 1
    assert entry["step_size"].dtype == np.float32


def test_invalid_hyperparameters_raise_torch_messages():
    p = np.zeros(2)
    with pytest.raises(ValueError, match="Invalid learning rate: -0.1"):
        npoptim.Rprop([p], lr=-0.1)
    with pytest.raises(ValueError, match="Invalid eta values: 1.0, 0.5"):
        npoptim.Rprop([p], lr=1e-2, etas=(1.0, 0.5))


@pytest.mark.needs("optax", "jax")
def test_optax_rprop_lags_one_step_behind_torchs_and_is_a_known_bug():
    """optax 0.2.8's scale_by_rprop (tests/data/framework_known_bugs.json) returns the previous
    step's update, zeroed where this step's gradient flips its sign; with the same step sizes
    and signs as torch's: so each optax update is npoptim's (torch's) update of the step
    before, d_{t-1}, where g_t d_{t-1} <= 0, and 0 elsewhere. The first step moves nothing."""
    import json
    from pathlib import Path
    from optax_compare import npoptim_trajectory, optax_trajectory, problem
    params, grads = problem(seed=5, steps=10)
    grads = [[g * (-1) ** t for g in step] for t, step in enumerate(grads)]  # sign flips too
    optax = pytest.importorskip("optax")
    theirs = optax_trajectory(lambda: optax.rprop(1e-2), params, grads)
    start = [p.copy() for p in params]
    ours = npoptim_trajectory(npoptim.Rprop(params, lr=1e-2), params, grads)
    for t in range(len(grads)):
        before_theirs = theirs[t - 1] if t else start
        lagged = [np.zeros_like(p) for p in start] if t == 0 else [
            a - (ours[t - 2][i] if t >= 2 else start[i]) for i, a in enumerate(ours[t - 1])]
        for i, g in enumerate(grads[t]):
            expected = np.where(g * lagged[i] > 0, 0.0, lagged[i])
            np.testing.assert_allclose(theirs[t][i] - before_theirs[i], expected,
                                       rtol=0, atol=1e-15)
    bugs = json.loads((Path(__file__).parent / "data" / "framework_known_bugs.json").read_text())
    assert any(b["framework"] == "optax" and b["optimizer"] == "Rprop" for b in bugs["bugs"])
