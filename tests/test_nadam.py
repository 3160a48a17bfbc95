"""npoptim.NAdam against torch.optim.NAdam: trajectories, state (mu_product), state_dict."""
import copy

import numpy as np
import pytest

import npoptim
from torch_compare import needs_torch
from torch_compare import (DTYPES, SPLIT, DenseOnlySuite, check_round_trip, make_problem,
                           run_np, run_torch, state_error, torch_state_dict, trajectory_error)


class TestNAdam(DenseOnlySuite):
    NAME = "NAdam"
    # optim_inputs_func_nadam (CPU configs) in torch/testing/_internal/common_optimizers.py
    CONFIGS = {
        "default": {},
        "non-default lr": {"lr": 1e-3},
        "non-zero momentum_decay": {"momentum_decay": 6e-3},
        "weight_decay": {"weight_decay": 0.1},
        "weight_decay, momentum_decay": {"weight_decay": 0.1, "momentum_decay": 6e-3},
        "decoupled_weight_decay": {"weight_decay": 0.1, "momentum_decay": 6e-3,
                                   "decoupled_weight_decay": True},
        "maximize": {"weight_decay": 0.1, "maximize": True},
    }
    GROUP1 = {"lr": 0.01, "betas": (0.8, 0.99), "momentum_decay": 0.01}
    ERRORS = [{"lr": -0.01}, {"eps": -1e-8}, {"betas": (1.0, 0.0)}, {"betas": (0.0, 1.0)},
              {"weight_decay": -0.1}, {"momentum_decay": -0.2}]
    # no EXACT: torch's sqrt is not always correctly rounded

    def test_state_dict_round_trip(self, config):
        # float32 only: for float64 see test_state_dict_round_trip_float64_continues_like_torch
        check_round_trip(self.NAME, self.CONFIGS[config], self.GROUP1, np.float32)

    @needs_torch
    def test_state_dict_round_trip_float64_continues_like_torch(self, config):
        """Loading casts mu_product to the parameter's dtype, as torch does, so a float64
        optimizer continues with a float64 mu_product (and leaves the uninterrupted trajectory
        in the last digits, as torch does): compare with torch's own round trip."""
        name, kwargs, group1 = self.NAME, self.CONFIGS[config], self.GROUP1
        params, grads = make_problem(np.float64)
        first, opt = run_np(name, kwargs, group1, params, grads[:SPLIT])
        first_t, t_opt = run_torch(name, kwargs, group1, params, grads[:SPLIT])
        actual, opt2 = run_np(name, kwargs, group1, first[-1], grads[SPLIT:],
                              state_dict=opt.state_dict())
        expected, t_opt2 = run_torch(name, kwargs, group1, first_t[-1], grads[SPLIT:],
                                     state_dict=copy.deepcopy(t_opt.state_dict()))
        assert trajectory_error(actual, expected) <= 1e-12
        assert state_error(opt2.state_dict()["state"],
                           torch_state_dict(t_opt2)["state"]) <= 1e-12
        assert opt2.state[0]["mu_product"].dtype == np.float64


def test_mu_product_is_a_0d_float32_array_as_in_torch():
    for dtype in DTYPES:
        opt = npoptim.NAdam([np.ones(3, dtype)])
        opt.step([np.ones(3, dtype)])
        mu_product = opt.state_dict()["state"][0]["mu_product"]
        assert isinstance(mu_product, np.ndarray)
        assert mu_product.shape == () and mu_product.dtype == np.float32


def test_no_momentum_schedule_is_dozats_form_with_a_constant_beta1():
    """momentum_schedule="none" (optax.nadam), by hand: m_hat = b1 m / (1 - b1^(t+1)) +
    (1 - b1) g / (1 - b1^t) over sqrt(v / (1 - b2^t)) + eps."""
    beta1, beta2, lr, eps = 0.8, 0.99, 0.1, 1e-3
    rng = np.random.default_rng(3)
    p = rng.standard_normal(4)
    expected, m, v = p.copy(), np.zeros(4), np.zeros(4)
    opt = npoptim.NAdam([p], lr=lr, betas=(beta1, beta2), eps=eps, momentum_schedule="none",
                        state_dtype="param")
    for t in range(1, 9):
        g = rng.standard_normal(4)
        opt.step([g])
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        m_hat = beta1 * m / (1 - beta1 ** (t + 1)) + (1 - beta1) * g / (1 - beta1 ** t)
        expected = expected - lr * m_hat / (np.sqrt(v / (1 - beta2 ** t)) + eps)
    np.testing.assert_allclose(p, expected, rtol=1e-13, atol=1e-15)
    with pytest.raises(ValueError, match="momentum_schedule"):
        npoptim.NAdam([p], momentum_schedule="keras")
