"""npoptim.Adamax against torch.optim.Adamax: trajectories, state, state_dict."""
import numpy as np

import npoptim
from torch_compare import DenseOnlySuite, needs_torch, torch


class TestAdamax(DenseOnlySuite):
    NAME = "Adamax"
    # optim_inputs_func_adamax (CPU configs) in torch/testing/_internal/common_optimizers.py
    CONFIGS = {
        "default": {},
        "non-default lr": {"lr": 0.1},
        "nonzero weight_decay": {"weight_decay": 0.1},
        "maximize": {"maximize": True},
        "maximize, weight_decay": {"weight_decay": 0.1, "maximize": True},
        "large eps": {"eps": 1e-3},
    }
    GROUP1 = {"lr": 0.01, "betas": (0.8, 0.99)}
    ERRORS = [{"lr": -0.01}, {"eps": -1e-8}, {"betas": (0.0, 1.0)}, {"betas": (1.0, 0.0)},
              {"weight_decay": -0.1}]
    # products, a maximum, a lerp, fused multiply-adds and one division: all bit-exact
    EXACT = tuple(CONFIGS)


@needs_torch
def test_nan_propagates_through_the_maximum_like_torch():
    p = np.array([1.0, 2.0, 3.0])
    t = torch.tensor(p, requires_grad=True)
    opt = npoptim.Adamax([p], lr=0.1)
    t_opt = torch.optim.Adamax([t], lr=0.1, foreach=False)
    for grad in (np.array([1.0, -1.0, 0.5]), np.array([np.nan, 1.0, 0.5]),
                 np.array([1.0, 1.0, 0.5])):
        opt.step([grad])
        t.grad = torch.from_numpy(grad.copy())
        t_opt.step()
    assert np.isnan(opt.state[0]["exp_inf"][0]) and np.isnan(p[0])
    np.testing.assert_array_equal(p, t.detach().numpy())
    np.testing.assert_array_equal(opt.state[0]["exp_inf"],
                                  t_opt.state[t]["exp_inf"].numpy())
