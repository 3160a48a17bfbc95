"""npoptim.RMSprop against torch.optim.RMSprop: trajectories, state, state_dict."""
import numpy as np
import pytest

import npoptim
from torch_compare import DenseOnlySuite, needs_torch, rel_error, torch


class TestRMSprop(DenseOnlySuite):
    NAME = "RMSprop"
    # optim_inputs_func_rmsprop (CPU configs) in torch/testing/_internal/common_optimizers.py,
    # plus momentum without centering
    CONFIGS = {
        "default": {},
        "non-default lr": {"lr": 1e-3},
        "nonzero weight_decay": {"weight_decay": 0.1},
        "maximize": {"maximize": True},
        "centered": {"weight_decay": 0.1, "centered": True},
        "maximize, weight_decay": {"maximize": True, "weight_decay": 0.1},
        "momentum": {"weight_decay": 0.1, "centered": True, "momentum": 0.1},
        "maximize, centered, weight_decay, w/ momentum": {"weight_decay": 0.1, "centered": True,
                                                          "momentum": 0.1, "maximize": True},
        "momentum, not centered": {"momentum": 0.5},
    }
    GROUP1 = {"lr": 0.003, "alpha": 0.9, "momentum": 0.3}  # different state names in most
    ERRORS = [{"lr": -0.01}, {"eps": -1e-8}, {"momentum": -1.0}, {"weight_decay": -0.1},
              {"alpha": -0.5}]
    # no EXACT: torch's sqrt is not always correctly rounded


@pytest.mark.parametrize("momentum, centered, names", [
    (0, False, ["step", "square_avg"]),
    (0.5, False, ["step", "square_avg", "momentum_buffer"]),
    (0, True, ["step", "square_avg", "grad_avg"]),
    (0.5, True, ["step", "square_avg", "momentum_buffer", "grad_avg"]),
])
@needs_torch
def test_state_names_in_torch_order(momentum, centered, names):
    opt = npoptim.RMSprop([np.ones(3)], momentum=momentum, centered=centered)
    opt.step([np.ones(3)])
    t = torch.ones(3, dtype=torch.float64, requires_grad=True)
    t_opt = torch.optim.RMSprop([t], momentum=momentum, centered=centered)
    t.grad = torch.ones(3, dtype=torch.float64)
    t_opt.step()
    assert list(opt.state_dict()["state"][0]) == list(t_opt.state_dict()["state"][0]) == names


@needs_torch
def test_momentum_turned_on_later_starts_from_zero_buffers():
    """torch raises KeyError; npoptim creates the missing states as zeros, which equals torch
    with zero tensors inserted."""
    p = np.array([1.0, -2.0, 3.0])
    t = torch.tensor(p, requires_grad=True)
    opt = npoptim.RMSprop([p], lr=0.1)
    t_opt = torch.optim.RMSprop([t], lr=0.1, foreach=False)
    for k, grad in enumerate([np.array([0.5, 1.0, -1.0]), np.array([2.0, -1.0, 0.25])]):
        if k == 1:
            for group in (opt.param_groups[0], t_opt.param_groups[0]):
                group.update(momentum=0.9, centered=True)
            t_opt.state[t]["momentum_buffer"] = torch.zeros_like(t)
            t_opt.state[t]["grad_avg"] = torch.zeros_like(t)
        opt.step([grad])
        t.grad = torch.from_numpy(grad.copy())
        t_opt.step()
    assert rel_error([p], [t.detach().numpy()]) <= 1e-15
