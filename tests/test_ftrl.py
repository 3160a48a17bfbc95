"""FTRL-Proximal: dense trajectories against Keras 3 (JAX backend, float64), the lazy sparse
path against TF's ``SparseApplyFtrl`` semantics written out by hand, and bad input.

Keras runs on the JAX backend: its TensorFlow backend rounds float64 hyperparameters through
float32, and Keras on JAX has no sparse path, so the sparse semantics are checked against the
kernel's definition (tensorflow/core/kernels/training_ops.cc, ``SparseApplyFtrlV2``) below.
"""
import math

import numpy as np
import pytest
import scipy.sparse

from keras_compare import keras_float64
from npoptim.optim.ftrl import Ftrl
from npoptim.sparse.rowgrad import embedding_row_grad


def keras_trajectory(w0, grads, lrs, optimizer="Ftrl", **kw):
    """Parameters after each step of ``keras.optimizers.<optimizer>`` in float64."""
    with keras_float64() as (keras, jax):
        variables = [keras.Variable(w.copy(), dtype="float64") for w in w0]
        opt = getattr(keras.optimizers, optimizer)(learning_rate=lrs[0], **kw)
        out = []
        for lr, step_grads in zip(lrs, grads):
            opt.learning_rate = lr
            opt.apply_gradients([(jax.numpy.asarray(g), v)
                                 for g, v in zip(step_grads, variables)])
            out.append([np.array(v.value, np.float64) for v in variables])
        return out


KERAS_NAMES = {"l1": "l1_regularization_strength", "l2": "l2_regularization_strength",
               "l2_shrinkage": "l2_shrinkage_regularization_strength"}

#: every option that changes the math, one at a time and together, with lr schedules
OPTIONS = [
    ({}, "constant"),
    (dict(l1=0.05), "constant"),
    (dict(l2=0.3), "constant"),
    (dict(l2_shrinkage=0.2), "constant"),
    (dict(learning_rate_power=-0.7), "constant"),
    (dict(learning_rate_power=0.0), "constant"),
    (dict(initial_accumulator_value=0.5), "constant"),
    (dict(beta=0.4), "decay"),
    (dict(l1=0.02, l2=0.1, l2_shrinkage=0.05, beta=0.2, learning_rate_power=-0.6,
          initial_accumulator_value=0.01), "decay"),
]


@pytest.mark.needs("keras", "jax")
@pytest.mark.parametrize("options,schedule", OPTIONS,
                         ids=[",".join(o) or "defaults" for o, _ in OPTIONS])
def test_dense_trajectory_matches_keras(options, schedule):
    rng = np.random.default_rng(16)
    shapes = [(4, 3), (5,)]
    w0 = [rng.uniform(-1, 1, s) for s in shapes]
    steps = 24
    grads = [[rng.standard_normal(s) for s in shapes] for _ in range(steps)]
    grads[5] = [np.zeros(s) for s in shapes]  # a zero gradient still recomputes w
    lr = 0.1
    lrs = [lr if schedule == "constant" else lr / (1 + 0.1 * t) for t in range(steps)]
    expected = keras_trajectory(w0, grads, lrs,
                                **{KERAS_NAMES.get(k, k): v for k, v in options.items()})
    params = [w.copy() for w in w0]
    opt = Ftrl(params, lr=lr, **options)
    for t in range(steps):
        opt.param_groups[0]["lr"] = lrs[t]
        opt.step(grads[t])
        for p, e in zip(params, expected[t]):
            scale = np.max(np.abs(e))
            assert np.max(np.abs(p - e)) <= 1e-12 * scale, (t, options)
    assert np.max(np.abs(expected[-1][0] - w0[0])) > 0.05  # the trajectory went somewhere


# ------------------------------------------------------------------ hand-derived semantics
def tf_sparse_apply_ftrl(var, accum, linear, rows, values, lr, l1, l2, shrinkage, lr_power):
    """TF's SparseApplyFtrlV2 written out: for each listed row in order, every column."""
    var, accum, linear = var.copy(), accum.copy(), linear.copy()
    for row, grad_row in zip(rows, values):
        for c, g in enumerate(grad_row):
            w, n, z = var[row, c], accum[row, c], linear[row, c]
            g_shrunk = g + 2 * shrinkage * w
            new_n = n + g * g
            if lr_power == -0.5:
                sigma = (math.sqrt(new_n) - math.sqrt(n)) / lr
                quadratic = math.sqrt(new_n) / lr + 2 * l2
            else:
                sigma = (new_n ** -lr_power - n ** -lr_power) / lr
                quadratic = new_n ** -lr_power / lr + 2 * l2
            z = z + g_shrunk - sigma * w
            w = (np.sign(z) * l1 - z) / quadratic if abs(z) > l1 else 0.0
            var[row, c], accum[row, c], linear[row, c] = w, new_n, z
    return var, accum, linear


@pytest.mark.parametrize("lr_power", [-0.5, -0.8])
def test_sparse_step_is_tf_sparse_apply_ftrl(lr_power):
    rng = np.random.default_rng(3)
    w = rng.uniform(-1, 1, (6, 3))
    hyper = dict(lr=0.2, l1=0.01, l2=0.05, l2_shrinkage=0.1, learning_rate_power=lr_power,
                 initial_accumulator_value=0.1)
    param = w.copy()
    opt = Ftrl([param], **hyper)
    var, accum, linear = w.copy(), np.full_like(w, 0.1), np.zeros_like(w)
    for step in range(6):
        ids = rng.choice(6, size=3)  # repeats: Keras sums them before the kernel
        lookups = rng.standard_normal((3, 3))
        grad = embedding_row_grad(ids, lookups, 6)
        rows = np.unique(ids)
        summed = np.array([lookups[ids == r].sum(axis=0) for r in rows])
        var, accum, linear = tf_sparse_apply_ftrl(var, accum, linear, rows, summed, 0.2, 0.01,
                                                  0.05, 0.1, lr_power)
        opt.step([grad])
        np.testing.assert_allclose(param, var, rtol=0, atol=1e-14)
        np.testing.assert_allclose(opt.state[0]["accumulator"], accum, rtol=0, atol=1e-14)
        np.testing.assert_allclose(opt.state[0]["linear"], linear, rtol=0, atol=1e-14)


def test_sparse_is_lazy_and_dense_zero_gradient_is_not():
    """Rows without a CSR gradient keep w, n, z bit for bit; a dense zero-gradient row is
    recomputed from z and n (here to 0: z = 0 on the first step) and, with l2-shrinkage, its z
    moves: z = 2 l2_shrinkage w0, w = (clip(z) - z) / (sqrt(n)/lr + 2 l2)."""
    w0 = np.array([[0.5, -0.25], [1.0, 2.0], [-0.75, 0.125]])
    grad = np.array([[0.0, 0.0], [0.3, -0.2], [0.0, 0.0]])
    lazy = w0.copy()
    opt = Ftrl([lazy], lr=0.5, l2_shrinkage=0.1, l2=0.2, initial_accumulator_value=0.1)
    opt.step([scipy.sparse.csr_array(grad)])
    assert lazy[0].tobytes() == w0[0].tobytes() and lazy[2].tobytes() == w0[2].tobytes()
    assert np.all(opt.state[0]["linear"][[0, 2]] == 0)
    assert np.all(opt.state[0]["accumulator"][[0, 2]] == 0.1)

    dense = w0.copy()
    opt = Ftrl([dense], lr=0.5, l2_shrinkage=0.1, l2=0.2, initial_accumulator_value=0.1)
    opt.step([grad])
    z = 2 * 0.1 * w0[0]  # sigma = 0 for a zero gradient
    np.testing.assert_allclose(opt.state[0]["linear"][0], z, rtol=1e-15)
    np.testing.assert_allclose(dense[0], -z / (math.sqrt(0.1) / 0.5 + 2 * 0.2), rtol=1e-14)
    # the touched row: the same value by both paths
    assert dense[1].tobytes() == lazy[1].tobytes()

    # without shrinkage a dense zero gradient leaves z and n, and w becomes what they imply
    dense = w0.copy()
    opt = Ftrl([dense], lr=0.5)
    opt.step([np.zeros_like(w0)])
    assert np.all(dense == 0) and np.all(opt.state[0]["linear"] == 0)


def test_l1_zeroes_small_linear():
    param = np.array([1.0, 1.0])
    opt = Ftrl([param], lr=1.0, l1=0.5, initial_accumulator_value=0.0)
    opt.step([np.array([0.4, 2.0])])
    # n' = g^2, sigma = |g| (n = 0), z = g - |g| * 1: 0 and 0 -> |z| <= l1 -> w = 0
    np.testing.assert_array_equal(param, [0.0, 0.0])
    opt.step([np.array([0.4, 2.0])])
    # n' = 2 g^2, sigma = (sqrt 2 - 1)|g|, z = g (w = 0): 0.4 <= l1 -> 0; 2 > l1
    assert param[0] == 0.0
    np.testing.assert_allclose(param[1], -(2.0 - 0.5) / math.sqrt(8.0), rtol=1e-15)


def test_float32_runs_in_float32():
    param = np.ones((3, 2), np.float32)
    opt = Ftrl([param], lr=0.1, l1=0.001, beta=0.1)
    opt.step([np.full((3, 2), 0.5, np.float32)])
    opt.step([scipy.sparse.csr_array(np.eye(3, 2, dtype=np.float32))])
    assert param.dtype == np.float32 and opt.state[0]["linear"].dtype == np.float32


@pytest.mark.parametrize("kw", [dict(lr=0.0), dict(lr=-1.0), dict(lr=float("nan")),
                                dict(learning_rate_power=0.5), dict(l1=-1.0), dict(l2=-0.1),
                                dict(l2_shrinkage=-0.1), dict(beta=-1.0),
                                dict(initial_accumulator_value=-0.1), dict(l1=float("inf")),
                                dict(learning_rate_power=float("nan"))])
def test_bad_hyperparameters_raise(kw):
    with pytest.raises(ValueError):
        Ftrl([np.ones(2)], **kw)


def test_bad_input_changes_nothing():
    param = np.ones((4, 2))
    opt = Ftrl([param], lr=0.1)
    opt.step([np.ones((4, 2))])
    before = param.copy(), {k: v.copy() for k, v in opt.state[0].items()}
    opt.param_groups[0]["l1"] = -1.0
    with pytest.raises(ValueError):
        opt.step([np.ones((4, 2))])
    opt.param_groups[0]["l1"] = 0.0
    bad_column = scipy.sparse.csr_array((np.ones(1), np.array([5]), np.array([0, 1, 1, 1, 1])),
                                        shape=(4, 2))
    for grad in (np.ones((4, 3)), np.ones((4, 2), np.float32), bad_column):
        with pytest.raises(ValueError):
            opt.step([grad])
    assert param.tobytes() == before[0].tobytes()
    for k, v in before[1].items():
        assert opt.state[0][k].tobytes() == v.tobytes()


def test_state_dict_round_trip_continues_bit_for_bit():
    rng = np.random.default_rng(1)
    grads = [rng.standard_normal((3, 2)) for _ in range(6)]
    a = np.ones((3, 2))
    opt = Ftrl([a], lr=0.1, l1=0.01, l2_shrinkage=0.1)
    for g in grads[:3]:
        opt.step([g])
    b = a.copy()
    other = Ftrl([b], lr=0.1, l1=0.01, l2_shrinkage=0.1)
    other.load_state_dict(opt.state_dict())
    for g in grads[3:]:
        opt.step([g])
        other.step([g])
    assert a.tobytes() == b.tobytes()
