"""npoptim.SGD against torch.optim.SGD: dense trajectories, state, state_dict, CSR gradients."""
import numpy as np
import pytest
import scipy.sparse

import npoptim
from torch_compare import needs_torch
from torch_compare import (DTYPES, STEPS, TorchSuite, exact_fraction, groups, make_problem,
                           run_torch, state_error, to_torch_grad, tolerance, torch,
                           torch_state_dict, trajectory_error)


class TestSGD(TorchSuite):
    NAME = "SGD"
    # optim_inputs_func_sgd in torch/testing/_internal/common_optimizers.py, plus nesterov alone
    # and a dampening whose 1 - dampening is inexact (so the buffer's fused rounding shows)
    CONFIGS = {
        "default": {},
        "non-default lr": {"lr": 1e-2},
        # (the npoptim-only tests run it with the float where torch is missing)
        "tensor lr": {"lr": 0.001 if torch is None else torch.tensor(0.001)},
        "non-zero weight_decay": {"weight_decay": 0.5},
        "momentum": {"momentum": 0.9},
        "maximize": {"weight_decay": 0.1, "maximize": True},
        "dampening": {"momentum": 0.9, "dampening": 0.5},
        "inexact dampening": {"momentum": 0.9, "dampening": 0.3},
        "weight_decay w/ momentum": {"momentum": 0.9, "weight_decay": 0.1},
        "nesterov": {"momentum": 0.9, "nesterov": True, "weight_decay": 0.1},
        "nesterov, maximize": {"momentum": 0.5, "nesterov": True, "maximize": True},
    }
    GROUP1 = {"lr": 0.03, "momentum": 0.5}
    ERRORS = [{"lr": -0.01}, {"momentum": -0.5}, {"weight_decay": -1},
              {"nesterov": True}, {"momentum": 0.9, "dampening": 0.1, "nesterov": True}]
    # SGD is products and fused multiply-adds only: every config is bit-exact
    EXACT = tuple(CONFIGS)


def test_state_only_with_momentum():
    p = np.ones(3)
    opt = npoptim.SGD([p], lr=0.1)
    opt.step([np.ones(3)])
    assert opt.state == {} and opt.state_dict()["state"] == {}
    opt.param_groups[0]["momentum"] = 0.9  # turned on later: the first momentum step clones
    opt.step([np.full(3, 2.0)])
    np.testing.assert_array_equal(opt.state[0]["momentum_buffer"], np.full(3, 2.0))
    np.testing.assert_array_equal(p, 1 - 0.1 - 0.1 * 2.0)


def test_first_step_buffer_is_the_gradient_not_dampened():
    p = np.zeros(2)
    opt = npoptim.SGD([p], lr=1.0, momentum=0.9, dampening=0.5)
    opt.step([np.array([1.0, -2.0])])
    np.testing.assert_array_equal(opt.state[0]["momentum_buffer"], [1.0, -2.0])
    opt.step([np.array([1.0, -2.0])])
    np.testing.assert_array_equal(opt.state[0]["momentum_buffer"], [1.4, -2.8])


# --------------------------------------------------------------------------- CSR gradients
SPARSE_SHAPES = [(6, 3), (5,), (4, 2, 3)]
SPARSE_CONFIGS = {
    "plain": {},
    "maximize": {"maximize": True},
    "momentum": {"momentum": 0.9},
    "dampening": {"momentum": 0.9, "dampening": 0.5},
    "nesterov": {"momentum": 0.9, "nesterov": True},
    "momentum, maximize": {"momentum": 0.9, "maximize": True},
}


def sparse_gradient(rng, t, i, shape, dtype):
    """A CSR gradient of a param of SPARSE_SHAPES: random entries, embedding-style full rows
    with repeated ids (summed), explicit zeros, empty gradients, and None."""
    rows, cols = shape[0], int(np.prod(shape[1:]))
    if (t + i) % 7 == 5:
        return None
    if t % 6 == 4:
        return scipy.sparse.csr_array((rows, cols), dtype=dtype)
    if i == 0 and t % 3 == 0:
        ids = rng.integers(0, rows, size=4)
        values = rng.standard_normal((4, cols)).astype(dtype)
        return npoptim.embedding_row_grad(ids, values, rows)
    dense = rng.standard_normal((rows, cols)).astype(dtype)
    dense[rng.random((rows, cols)) < 0.6] = 0
    grad = scipy.sparse.csr_array(dense)
    if grad.nnz:
        grad.data[0] = 0.0  # an explicitly stored zero
    return grad


def make_sparse_problem(dtype, seed=0):
    """Params of SPARSE_SHAPES and per step CSR gradients (see :func:`sparse_gradient`)."""
    return make_problem(dtype, seed, SPARSE_SHAPES, sparse_gradient)


def run_sparse_np(kwargs, params, grads, dense=False):
    ps = [p.copy() for p in params]
    opt = npoptim.SGD(groups(ps, {"lr": 0.03}), **kwargs)
    trajectory = []
    for step in grads:
        if dense:
            step = [None if g is None else g.toarray().reshape(p.shape)
                    for g, p in zip(step, ps)]
        opt.step(step)
        trajectory.append([p.copy() for p in ps])
    return trajectory, opt


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", SPARSE_CONFIGS)
def test_csr_matches_torch_sparse_coo(config, dtype):
    kwargs = SPARSE_CONFIGS[config]
    params, grads = make_sparse_problem(dtype)
    expected, t_opt = run_torch("SGD", kwargs, {"lr": 0.03}, params, grads)
    actual, n_opt = run_sparse_np(kwargs, params, grads)
    # not asserted: without momentum torch adds a sparse gradient without fusing (the dense
    # rule, which a CSR gradient must equal, fuses); its sparse momentum buffer is fused
    print(f"\nSGD CSR {kwargs} {np.dtype(dtype).name}: bit-exact "
          f"{exact_fraction(actual, expected):.1%}")
    # torch's foreach SGD refuses sparse gradients: the float32 bound is 2 ulps alone
    assert trajectory_error(actual, expected) <= tolerance(dtype, 0.0)
    if kwargs.get("momentum"):
        assert any(t_opt.state[p]["momentum_buffer"].is_sparse
                   for group in t_opt.param_groups for p in group["params"])
    assert state_error(n_opt.state_dict()["state"],
                       torch_state_dict(t_opt)["state"]) <= tolerance(dtype, 0.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", SPARSE_CONFIGS)
def test_csr_is_exact(config, dtype):
    """sparse kind "exact": a CSR gradient gives the dense update, bit for bit."""
    params, grads = make_sparse_problem(dtype, seed=1)
    sparse, _ = run_sparse_np(SPARSE_CONFIGS[config], params, grads)
    dense, _ = run_sparse_np(SPARSE_CONFIGS[config], params, grads, dense=True)
    for a, b in zip(sparse, dense):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


@needs_torch
def test_momentum_buffer_keeps_moving_rows_without_gradient():
    """torch's sparse buffer decays and applies rows that the new gradient lacks."""
    p = np.zeros((3, 2))
    t = torch.zeros((3, 2), dtype=torch.float64, requires_grad=True)
    opt = npoptim.SGD([p], lr=0.1, momentum=0.9)
    t_opt = torch.optim.SGD([t], lr=0.1, momentum=0.9, foreach=False)
    for row in (0, 2, 2):
        dense = np.zeros((3, 2))
        dense[row] = [1.0, -3.0]
        grad = scipy.sparse.csr_array(dense)
        opt.step([grad])
        t.grad = to_torch_grad(grad, (3, 2))
        t_opt.step()
    assert np.all(p[0] != 0)
    np.testing.assert_allclose(p, t.detach().numpy(), rtol=0, atol=1e-15)


@needs_torch
def test_dense_after_sparse_buffer():
    """torch refuses a dense gradient after a sparse first step; npoptim gives the dense
    update, which is what torch computes from dense gradients throughout."""
    params, grads = make_sparse_problem(np.float64)
    grads = [step[:] for step in grads]
    for t in range(1, STEPS, 2):
        grads[t] = [None if g is None else g.toarray().reshape(s)
                    for g, s in zip(grads[t], SPARSE_SHAPES)]
    kwargs = {"momentum": 0.9, "nesterov": True}
    actual, _ = run_sparse_np(kwargs, params, grads)
    dense = [[None if g is None else (g.toarray().reshape(s) if scipy.sparse.issparse(g) else g)
              for g, s in zip(step, SPARSE_SHAPES)] for step in grads]
    expected, _ = run_torch("SGD", kwargs, {"lr": 0.03}, params, dense)
    assert trajectory_error(actual, expected) <= 1e-12


@needs_torch
def test_weight_decay_with_csr_is_refused_atomically():
    p, q = np.ones((3, 2)), np.ones(4)
    opt = npoptim.SGD([q, p], lr=0.1, momentum=0.9, weight_decay=0.1)
    opt.step([np.ones(4), None])
    q_before, state_before = q.copy(), opt.state[0]["momentum_buffer"].copy()
    grad = scipy.sparse.csr_array(np.eye(3, 2))
    with pytest.raises(ValueError, match="weight_decay"):
        opt.step([np.ones(4), grad])
    np.testing.assert_array_equal(q, q_before)
    np.testing.assert_array_equal(p, np.ones((3, 2)))
    np.testing.assert_array_equal(opt.state[0]["momentum_buffer"], state_before)
    assert 1 not in opt.state
    t = torch.ones((3, 2), dtype=torch.float64, requires_grad=True)
    t.grad = to_torch_grad(grad, (3, 2))
    with pytest.raises(RuntimeError):  # torch refuses it too, from add(sparse, dense)
        torch.optim.SGD([t], lr=0.1, weight_decay=0.1, foreach=False).step()
