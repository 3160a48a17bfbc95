"""npoptim.RAdam against torch.optim.RAdam: trajectories, state, state_dict."""
import numpy as np
import pytest

import npoptim
from torch_compare import STEPS, DenseOnlySuite


class TestRAdam(DenseOnlySuite):
    NAME = "RAdam"
    # optim_inputs_func_radam (CPU configs) in torch/testing/_internal/common_optimizers.py,
    # plus a beta2 for which the rectification never switches on
    CONFIGS = {
        "default": {},
        "non-default lr": {"lr": 2e-3},
        "non-default eps": {"eps": 1e-6},
        "nonzero weight_decay": {"weight_decay": 0.1},
        "decoupled_weight_decay": {"weight_decay": 0.1, "decoupled_weight_decay": True},
        "maximize": {"weight_decay": 0.1, "maximize": True},
        "never rectified": {"betas": (0.9, 0.6)},
    }
    GROUP1 = {"lr": 0.01, "betas": (0.8, 0.9)}
    ERRORS = [{"lr": -0.01}, {"eps": -1e-8}, {"betas": (1.0, 0.0)}, {"betas": (0.0, 1.0)},
              {"weight_decay": -1}]
    # no EXACT: GROUP1's rectified steps take torch's sqrt, not always correctly rounded


def rho_t(beta2, step):
    rho_inf = 2 / (1 - beta2) - 1
    return rho_inf - 2 * step * beta2 ** step / (1 - beta2 ** step)


@pytest.mark.parametrize("beta2", [0.999, TestRAdam.GROUP1["betas"][1]])
def test_trajectories_cover_both_branches(beta2):
    rhos = [rho_t(beta2, step) for step in range(1, STEPS + 1)]
    assert min(rhos) <= 5 < max(rhos)
    assert max(rho_t(0.6, step) for step in range(1, 10 ** 4)) <= 5


def test_unrectified_steps_are_sgd_with_bias_corrected_momentum():
    p = np.array([1.0, -1.0])
    opt = npoptim.RAdam([p], lr=0.1, betas=(0.5, 0.999))
    opt.step([np.array([2.0, 4.0])])
    np.testing.assert_allclose(p, [1.0 - 0.1 * 2.0, -1.0 - 0.1 * 4.0], rtol=0, atol=1e-15)
