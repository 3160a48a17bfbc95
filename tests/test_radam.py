"""npoptim.RAdam against torch.optim.RAdam: trajectories, state, state_dict."""
import numpy as np
import pytest

import npoptim
from torch_compare import STEPS, DenseOnlySuite


#: rho_t is exactly 5.0 at step 6 (torch: not rectified there; optax: rectified)
RHO_5_BETA2 = 0.8397685748659791


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
        "rho exactly 5 at step 6": {"betas": (0.9, RHO_5_BETA2)},
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


def test_rho_equals_5_is_rectified_only_with_the_inclusive_threshold():
    assert rho_t(RHO_5_BETA2, 6) == 5.0
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(4) for _ in range(6)]
    runs = {}
    for inclusive in (False, True):
        p = np.ones(4)
        opt = npoptim.RAdam([p], lr=0.1, betas=(0.9, RHO_5_BETA2),
                            rectify_threshold_inclusive=inclusive)
        trajectory = []
        for g in grads:
            opt.step([g])
            trajectory.append(p.copy())
        runs[inclusive] = trajectory
    for before, after in zip(runs[False][:5], runs[True][:5]):
        np.testing.assert_array_equal(before, after)
    assert np.all(runs[False][5] != runs[True][5])


def test_bias_corrected_eps_is_eps_added_to_sqrt_v_hat():
    """Eight steps by hand (steps 7 and 8 rectified), eps large enough to matter: eps on
    sqrt(v / b2), not torch's sqrt(v) before the sqrt(b2) factor."""
    beta1, beta2, lr, eps = 0.9, 0.999, 0.1, 0.5
    g = np.array([0.3, -2.0])
    p = np.array([1.0, -1.0])
    opt = npoptim.RAdam([p], lr=lr, betas=(beta1, beta2), eps=eps, eps_mode="bias_corrected")
    m, v, expected = np.zeros(2), np.zeros(2), p.copy()
    for step in range(1, 9):
        opt.step([g])
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        b1, b2 = 1 - beta1 ** step, 1 - beta2 ** step
        rho = rho_t(beta2, step)
        rho_inf = 2 / (1 - beta2) - 1
        if rho > 5:
            r = np.sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho))
            expected = expected - lr * r * (m / b1) / (np.sqrt(v / b2) + eps)
        else:
            expected = expected - lr * m / b1
    assert rho_t(beta2, 8) > 5
    np.testing.assert_allclose(p, expected, rtol=1e-13, atol=0)
