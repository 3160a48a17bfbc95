"""Row-wise Adagrad: hand-derived values of FBGEMM's EXACT_ROWWISE_ADAGRAD (every weight decay
mode), trajectories against FBGEMM itself (fbgemm-gpu-cpu, float32, CPU placement), the row
semantics of sparse gradients, and bad input."""
import math

import numpy as np
import pytest
import scipy.sparse

from npoptim.optim.rowwise_adagrad import RowWiseAdagrad
from npoptim.sparse.rowgrad import embedding_row_grad


def hand_step(w, G, g, lr, eps, wd, mode):
    """FBGEMM's split_weight_update_cpu for one row, in float64, written out."""
    g_decayed = g + wd * w if mode == "l2" else g
    G = G + np.mean(g_decayed ** 2)
    multiplier = lr / (math.sqrt(G) + eps)
    correction = {"l2": 1 - multiplier * wd, "decouple": 1 - lr * wd, "none": 1.0}[mode]
    return correction * w - multiplier * g, G


@pytest.mark.parametrize("mode,wd", [("none", 0.0), ("l2", 0.3), ("decouple", 0.3)])
def test_hand_derived_csr_steps(mode, wd):
    rng = np.random.default_rng(5)
    w0 = rng.uniform(-1, 1, (6, 3))
    param = w0.copy()
    opt = RowWiseAdagrad([param], lr=0.2, eps=1e-3, weight_decay=wd, weight_decay_mode=mode)
    w, G = w0.copy(), np.zeros(6)
    for _ in range(5):
        ids = rng.choice(6, size=4)
        lookups = rng.standard_normal((4, 3))
        for row in np.unique(ids):
            w[row], G[row] = hand_step(w[row], G[row], lookups[ids == row].sum(axis=0), 0.2,
                                       1e-3, wd, mode)
        opt.step([embedding_row_grad(ids, lookups, 6)])
        np.testing.assert_allclose(param, w, rtol=0, atol=1e-15)
        np.testing.assert_allclose(opt.state[0]["momentum1"], G, rtol=0, atol=1e-15)


def test_one_accumulator_per_row_by_hand():
    param = np.array([[1.0, 2.0], [3.0, 4.0]])
    opt = RowWiseAdagrad([param], lr=0.5, eps=1e-30)
    opt.step([np.array([[3.0, 4.0], [0.0, 0.0]])])
    # G_0 = (9 + 16) / 2 = 12.5; m = 0.5 / sqrt(12.5) (eps below its ulp); row 1: a zero
    # gradient, G stays 0 and the row keeps its values (m = 5e29 times a zero gradient)
    np.testing.assert_array_equal(opt.state[0]["momentum1"], [12.5, 0.0])
    m = 0.5 / math.sqrt(12.5)
    np.testing.assert_allclose(param[0], [1 - 3 * m, 2 - 4 * m], rtol=1e-15)
    assert param[1].tolist() == [3.0, 4.0]


def test_partial_row_counts_missing_columns_as_zero_and_untouched_rows_stay():
    w0 = np.array([[1.0, -1.0, 0.5], [2.0, 0.25, -0.5], [0.1, 0.2, 0.3]])
    param = w0.copy()
    opt = RowWiseAdagrad([param], lr=0.1, weight_decay=0.5, weight_decay_mode="l2")
    grad = scipy.sparse.csr_array((np.array([2.0]), np.array([1]), np.array([0, 1, 1, 1])),
                                  shape=(3, 3))
    opt.step([grad])
    expected, G = hand_step(w0[0], 0.0, np.array([0.0, 2.0, 0.0]), 0.1, 1e-8, 0.5, "l2")
    np.testing.assert_allclose(param[0], expected, rtol=1e-15)
    assert opt.state[0]["momentum1"][0] == pytest.approx(G, rel=1e-15)
    assert param[1:].tobytes() == w0[1:].tobytes()
    assert np.all(opt.state[0]["momentum1"][1:] == 0)
    # the same row given dense (every other row zero): untouched rows decay in "l2" mode
    dense = w0.copy()
    RowWiseAdagrad([dense], lr=0.1, weight_decay=0.5, weight_decay_mode="l2").step(
        [grad.toarray()])
    assert dense[0].tobytes() == param[0].tobytes()
    assert np.all(np.abs(dense[1:]) < np.abs(w0[1:]))


def test_without_decay_sparse_equals_dense():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((8, 4))
    b = a.copy()
    sparse_opt, dense_opt = RowWiseAdagrad([a], lr=0.1), RowWiseAdagrad([b], lr=0.1)
    for _ in range(5):
        grad = embedding_row_grad(rng.choice(8, 5), rng.standard_normal((5, 4)), 8)
        sparse_opt.step([grad])
        dense_opt.step([grad.toarray()])
    assert a.tobytes() == b.tobytes()
    assert sparse_opt.state[0]["momentum1"].tobytes() == dense_opt.state[0]["momentum1"].tobytes()


# ---------------------------------------------------------------------------- FBGEMM itself
# FBGEMM 1.8.0's CPU backward (fbgemm_gpu/codegen/training/backward/
# embedding_backward_split_cpu_template.cpp) has two paths for EXACT_ROWWISE_ADAGRAD: float32
# tables not shared by two features go to fbgemm's JIT kernel (GenerateSparseAdaGrad,
# rowwise), which sums the squares in SIMD lanes and is called with weight_decay=0 (so it
# ignores every weight decay mode); shared tables take the template's scalar kernel
# (split_weight_update_cpu), the definition npoptim follows. The tests feed both.
def fbgemm_table(w0, lr, eps, wd, mode, shared):
    """FBGEMM's EXACT_ROWWISE_ADAGRAD table on the CPU, initialised to ``w0`` (float32);
    ``shared``: two features look the table up (the scalar kernel), else one (the JIT one)."""
    torch = pytest.importorskip("torch")
    training = pytest.importorskip("fbgemm_gpu.split_table_batched_embeddings_ops_training")
    from fbgemm_gpu.split_embedding_configs import EmbOptimType
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import (
        ComputeDevice, EmbeddingLocation, PoolingMode)
    from fbgemm_gpu.tbe.config.optimizer_config import WeightDecayMode

    E, D = w0.shape
    table = training.SplitTableBatchedEmbeddingBagsCodegen(
        embedding_specs=[(E, D, EmbeddingLocation.HOST, ComputeDevice.CPU)],
        feature_table_map=[0, 0] if shared else [0],
        optimizer=EmbOptimType.EXACT_ROWWISE_ADAGRAD, learning_rate=lr, eps=eps,
        weight_decay=wd, weight_decay_mode=getattr(WeightDecayMode, mode.upper()),
        pooling_mode=PoolingMode.SUM)
    with torch.no_grad():
        table.split_embedding_weights()[0].copy_(torch.from_numpy(w0))
    table.features = 2 if shared else 1
    return table


def fbgemm_step(table, ids, lookups):
    """One backward of one-lookup bags of the first feature: row ``ids[k]`` gets gradient
    ``lookups[k]`` (the second feature, if any, has empty bags)."""
    import torch

    n, D = lookups.shape
    offsets = np.concatenate([np.arange(n + 1), np.full(n * (table.features - 1), n)])
    out = table(torch.from_numpy(ids.astype(np.int64)), torch.from_numpy(offsets))
    grad_out = torch.zeros(out.shape)
    grad_out[:, :D] = torch.from_numpy(lookups)
    out.backward(grad_out)


def run_against_fbgemm(mode, wd, width, shared, steps=25, rows=200, lookups_per_step=64):
    """Max |difference| over the run, as a fraction of each array's scale, for the weights and
    the accumulator; and how far the weights moved."""
    rng = np.random.default_rng(11)
    w0 = rng.uniform(-0.5, 0.5, (rows, width)).astype(np.float32)
    table = fbgemm_table(w0, 0.05, 1e-8, wd, mode, shared)
    param = w0.copy()
    opt = RowWiseAdagrad([param], lr=0.05, eps=1e-8, weight_decay=wd, weight_decay_mode=mode)
    zipf = 1.0 / np.arange(1, rows + 1) ** 1.1
    zipf /= zipf.sum()
    worst = [0.0, 0.0]
    for _ in range(steps):
        ids = rng.choice(rows, size=lookups_per_step, p=zipf)  # repeated ids: summed
        lookups = rng.standard_normal((lookups_per_step, width)).astype(np.float32)
        fbgemm_step(table, ids, lookups)
        opt.step([embedding_row_grad(ids, lookups, rows)])
        theirs = (table.split_embedding_weights()[0].detach().numpy(),
                  table.split_optimizer_states()[0][0].detach().numpy())
        ours = (param, opt.state[0]["momentum1"])
        for k in range(2):
            diff = np.max(np.abs(ours[k].astype(np.float64) - theirs[k]))
            worst[k] = max(worst[k], diff / np.max(np.abs(theirs[k])))
    return worst, np.max(np.abs(param - w0))


@pytest.mark.needs("torch", "fbgemm_gpu")
@pytest.mark.parametrize("mode,wd", [("none", 0.0), ("l2", 0.05), ("decouple", 0.05)])
@pytest.mark.parametrize("width", [16, 4])
def test_trajectory_is_fbgemm_bit_for_bit(mode, wd, width):
    """FBGEMM's scalar kernel in float32, 25 steps of Zipf lookups with repeats: every bit
    equal (its compiled ``c * w - g * m`` is one fma, as the rule writes it)."""
    worst, moved = run_against_fbgemm(mode, wd, width, shared=True)
    assert moved > 0.1
    assert worst == [0.0, 0.0]


@pytest.mark.needs("torch", "fbgemm_gpu")
@pytest.mark.parametrize("width", [16, 4])
def test_trajectory_matches_fbgemm_simd_kernel(width):
    """FBGEMM's JIT kernel (the path of an unshared float32 table) sums a row's squares in
    SIMD lanes: another order, so float32 rounding apart (measured up to 3e-7 of the scale)."""
    worst, moved = run_against_fbgemm("none", 0.0, width, shared=False)
    assert moved > 0.1
    assert max(worst) <= 1e-5, worst


# ---------------------------------------------------------------------- threads, bad input
@pytest.mark.parametrize("mode,wd", [("none", 0.0), ("l2", 0.1)])
def test_parallel_and_serial_paths_agree_bit_for_bit(mode, wd):
    """Above the threshold rows are split into blocks over threads (dense: rows; CSR: blocks
    of stored entries); partially stored rows included."""
    from npoptim.kernels.parallel import parallel_threshold_set

    rng = np.random.default_rng(4)
    w0 = rng.standard_normal((3000, 16))
    dense = rng.standard_normal((3000, 16))
    dense[rng.random(3000) < 0.3] = 0
    dense[rng.random((3000, 16)) < 0.1] = 0  # partial rows in the CSR form
    grads = [dense, scipy.sparse.csr_array(dense)]
    results = []
    for threshold in (None, 0):
        with parallel_threshold_set(threshold):
            param = w0.copy()
            opt = RowWiseAdagrad([param], lr=0.1, weight_decay=wd, weight_decay_mode=mode)
            for grad in grads:
                opt.step([grad])
            results.append((param.tobytes(), opt.state[0]["momentum1"].tobytes()))
    assert results[0] == results[1]


@pytest.mark.parametrize("kw", [dict(lr=-0.1), dict(lr=float("nan")), dict(eps=-1.0),
                                dict(weight_decay=-0.1, weight_decay_mode="l2"),
                                dict(weight_decay=float("inf"), weight_decay_mode="l2"),
                                dict(weight_decay_mode="L2"), dict(weight_decay_mode=1),
                                dict(weight_decay_mode="decouple_global"),
                                dict(weight_decay=0.1)])  # a decay the mode would ignore
def test_bad_hyperparameters_raise(kw):
    with pytest.raises(ValueError):
        RowWiseAdagrad([np.ones((2, 2))], **kw)


def test_bad_input_changes_nothing():
    param = np.ones((4, 2))
    opt = RowWiseAdagrad([param], lr=0.1)
    opt.step([np.ones((4, 2))])
    before = param.copy(), opt.state[0]["momentum1"].copy()
    opt.param_groups[0]["weight_decay_mode"] = "l3"
    with pytest.raises(ValueError):
        opt.step([np.ones((4, 2))])
    opt.param_groups[0]["weight_decay_mode"] = "none"
    bad_column = scipy.sparse.csr_array((np.ones(1), np.array([5]), np.array([0, 1, 1, 1, 1])),
                                        shape=(4, 2))
    for grad in (np.ones((4, 3)), np.ones((4, 2), np.float32), bad_column,
                 scipy.sparse.csr_array(np.ones((4, 3)))):
        with pytest.raises(ValueError):
            opt.step([grad])
    opt.state[0]["momentum1"] = np.zeros((4, 2))  # a state of the wrong shape
    with pytest.raises(ValueError):
        opt.step([np.ones((4, 2))])
    opt.state[0]["momentum1"] = before[1].copy()
    assert param.tobytes() == before[0].tobytes()


def test_state_dict_round_trip_continues_bit_for_bit():
    rng = np.random.default_rng(1)
    grads = [embedding_row_grad(rng.choice(6, 4), rng.standard_normal((4, 3)), 6)
             for _ in range(6)]
    a = np.ones((6, 3))
    opt = RowWiseAdagrad([a], lr=0.1, weight_decay=0.01, weight_decay_mode="decouple")
    for g in grads[:3]:
        opt.step([g])
    b = a.copy()
    other = RowWiseAdagrad([b], lr=0.1, weight_decay=0.01, weight_decay_mode="decouple")
    other.load_state_dict(opt.state_dict())
    assert other.state[0]["momentum1"].shape == (6,)
    for g in grads[3:]:
        opt.step([g])
        other.step([g])
    assert a.tobytes() == b.tobytes()


def test_zero_size_and_one_element_parameters():
    empty_rows, empty_cols, scalar = np.ones((0, 3)), np.ones((3, 0)), np.array(2.0)
    opt = RowWiseAdagrad([empty_rows, empty_cols, scalar], lr=0.5, eps=0.0)
    opt.step([np.ones((0, 3)), np.ones((3, 0)), np.array(2.0)])
    # a 0-d parameter is one row of one element: G = 4, m = 0.5 / 2
    assert scalar == 2.0 - 0.25 * 2.0
    assert opt.state[2]["momentum1"].shape == () and opt.state[2]["momentum1"] == 4.0
