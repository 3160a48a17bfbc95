"""npoptim.distributed: a table sharded over a Dask LocalCluster equals one process, bit for bit.

The cluster is started here, bound to 127.0.0.1 with no dashboard, three worker processes with
an explicit memory limit, and closed at the end. Tables of 2M x 16 float32 are trained 200 steps
on Zipf-skewed lookups (whose gradient rows depend on the looked-up rows), sharded over two
workers, and compared with the same optimizer stepping the whole table in this process:
params and every state array must be equal bit for bit, for both partitions and for
SparseAdam, Adagrad and SGD. Checkpoints are saved mid-run and resumed on two and on three
workers (re-sharded), and a worker is killed in mid-run.

Skipped without ``distributed``; with ``NPOPTIM_REQUIRE_DASK=1`` (set by ``.ci/run``) a
missing ``distributed`` fails instead.
"""
import os

import numpy as np
import pytest

import npoptim

try:
    import distributed  # noqa: F401
except ImportError:
    if os.environ.get("NPOPTIM_REQUIRE_DASK") == "1":  # CI: must be installed
        raise
pytestmark = pytest.mark.needs("distributed")

from npoptim.distributed import Partition, ShardedTable, ShardLostError  # noqa: E402

NUM_ROWS, DIM, BATCH, STEPS = 2_000_000, 16, 4096, 200
OPTIONS = {"SparseAdam": {"lr": 1e-2, "betas": (0.8, 0.99)},
           "Adagrad": {"lr": 0.1, "lr_decay": 1e-3, "initial_accumulator_value": 0.1},
           "SGD": {"lr": 0.05}}


def initial_rows(ids):
    """The table's initial rows, a function of the global ids alone (runs on the workers)."""
    ids = np.asarray(ids, np.float64)[:, None]
    return (0.1 * np.sin(0.37 * ids + np.arange(DIM))).astype(np.float32)


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address=None,
                                       memory_limit="1.5GiB", silence_logs=40)
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def workers(client, n):
    return sorted(client.scheduler_info()["workers"])[:n]


def batches(seed=0):
    rng = np.random.default_rng(seed)
    while True:
        ids = np.minimum(rng.zipf(1.2, BATCH) - 1, NUM_ROWS - 1)
        yield ids, rng.standard_normal((BATCH, DIM)).astype(np.float32)


def gradient_rows(rows, noise):
    return (np.float32(0.1) * rows + noise).astype(np.float32)


class Reference:
    """The single-process run: the same optimizer on the whole table."""

    def __init__(self, name):
        self.table = initial_rows(np.arange(NUM_ROWS))
        self.opt = npoptim.registry.get(name)([self.table], **OPTIONS[name])

    def train(self, stream, steps):
        for _ in range(steps):
            ids, noise = next(stream)
            g = gradient_rows(self.table[ids], noise)
            self.opt.step([npoptim.embedding_row_grad(ids, g, NUM_ROWS)])


def train(table, stream, steps):
    for _ in range(steps):
        ids, noise = next(stream)
        table.step((ids, gradient_rows(table.lookup(ids), noise)))


def assert_same(table, ref):
    params, state = table.to_numpy()
    np.testing.assert_array_equal(params, ref.table)
    expected = ref.opt.state.get(0, {})
    assert set(state) == set(expected)
    for name, value in expected.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(state[name], value, err_msg=name)
        else:
            assert state[name] == value, name


@pytest.mark.parametrize("partition", ["mod", "hash"])
@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_two_workers_equal_one_process_bit_for_bit(client, name, partition):
    table = ShardedTable(client, NUM_ROWS, DIM, name, OPTIONS[name], partition=partition,
                         initializer=initial_rows, workers=workers(client, 2))
    ref = Reference(name)
    train(table, batches(), STEPS)
    ref.train(batches(), STEPS)
    assert_same(table, ref)
    assert np.any(ref.table != initial_rows(np.arange(NUM_ROWS)))  # it trained
    table.close()


def test_checkpoint_mid_run_and_reshard_from_two_to_three_workers(client, tmp_path):
    name = "SparseAdam"
    table = ShardedTable(client, NUM_ROWS, DIM, name, OPTIONS[name], partition="hash",
                         initializer=initial_rows, workers=workers(client, 2))
    ref = Reference(name)
    stream, ref_stream = batches(1), batches(1)
    train(table, stream, 30)
    ref.train(ref_stream, 30)
    table.save(tmp_path / "ckpt")
    train(table, stream, 5)  # steps after the checkpoint are lost on resume
    same = ShardedTable.load(client, tmp_path / "ckpt", workers=workers(client, 2))
    wider = ShardedTable.load(client, tmp_path / "ckpt", workers=workers(client, 3))
    other = ShardedTable.load(client, tmp_path / "ckpt", workers=workers(client, 3),
                              partition="mod")
    assert len(wider.shards) == 3
    for resumed in (same, wider, other):
        assert_same(resumed, ref)
    for resumed, seed in ((same, 2), (wider, 2), (other, 2)):
        train(resumed, batches(seed), 20)
    ref.train(batches(2), 20)
    for resumed in (same, wider, other):
        assert_same(resumed, ref)
        resumed.close()
    table.close()


def test_the_row_sparse_and_csr_gradient_forms_and_empty_batches(client):
    name = "SparseAdam"
    table = ShardedTable(client, 10_000, DIM, name, OPTIONS[name], initializer=initial_rows,
                         workers=workers(client, 2))
    ref_table = initial_rows(np.arange(10_000))
    ref = npoptim.SparseAdam([ref_table], **OPTIONS[name])
    rng = np.random.default_rng(3)
    for step in range(6):
        n = 0 if step == 2 else 300  # an empty batch still advances the step counts
        ids = rng.integers(0, 10_000, n)
        values = rng.standard_normal((n, DIM)).astype(np.float32)
        grad = npoptim.embedding_row_grad(ids, values, 10_000)
        table.step(grad if step % 2 else npoptim.row_sparse_grad(ids, values, 10_000))
        ref.step([grad])
    params, state = table.to_numpy()
    np.testing.assert_array_equal(params, ref_table)
    np.testing.assert_array_equal(state["exp_avg_sq"], ref.state[0]["exp_avg_sq"])
    assert state["step"] == ref.state[0]["step"] == 6
    table.close()


def test_bad_input_raises_before_any_shard_changes(client):
    table = ShardedTable(client, 1000, 4, "Adagrad", {"lr": 0.1}, initializer=None,
                         workers=workers(client, 2))
    table.step((np.array([1, 2, 3]), np.ones((3, 4), np.float32)))
    before = table.to_numpy()
    for grad, error in [((np.array([1, 1000]), np.ones((2, 4), np.float32)), ValueError),
                        ((np.array([-1]), np.ones((1, 4), np.float32)), ValueError),
                        ((np.array([1, 2]), np.ones((2, 5), np.float32)), ValueError),
                        ((np.array([1, 2]), np.ones((2, 4), np.float64)), ValueError),
                        ((np.array([0.5]), np.ones((1, 4), np.float32)), ValueError),
                        ([np.array([1])], TypeError)]:
        with pytest.raises(error):
            table.step(grad)
    with pytest.raises(ValueError, match="ids must lie in"):
        table.lookup([5, 1000])
    after = table.to_numpy()
    np.testing.assert_array_equal(after[0], before[0])
    np.testing.assert_array_equal(after[1]["sum"], before[1]["sum"])
    assert after[1]["step"] == before[1]["step"]
    table.close()
    with pytest.raises(ValueError, match="does not take sparse gradients"):
        ShardedTable(client, 10, 4, "Adam", {}, workers=workers(client, 2))
    with pytest.raises(ValueError, match="Invalid learning rate"):
        ShardedTable(client, 10, 4, "SparseAdam", {"lr": -1.0}, workers=workers(client, 2))
    with pytest.raises(ValueError, match="partition must be"):
        ShardedTable(client, 10, 4, "SparseAdam", {}, partition="range",
                     workers=workers(client, 2))


def test_partitions_spread_zipf_lookups():
    ids = np.minimum(np.random.default_rng(0).zipf(1.2, 100_000) - 1, NUM_ROWS - 1)
    for kind in ("mod", "hash"):
        p = Partition(kind, 2, NUM_ROWS)
        share = np.bincount(p.shard_of(ids), minlength=2).max() / ids.size
        assert share < 0.65, (kind, share)
        owned = [p.owned_ids(k) for k in range(2)]
        assert sum(o.size for o in owned) == NUM_ROWS
        assert [p.num_local_rows(k) for k in range(2)] == [o.size for o in owned]
        np.testing.assert_array_equal(np.sort(np.concatenate(owned)), np.arange(NUM_ROWS))


def test_a_killed_worker_raises_and_the_last_checkpoint_restores(client, tmp_path):
    name = "Adagrad"
    table = ShardedTable(client, NUM_ROWS // 10, DIM, name, OPTIONS[name],
                         initializer=initial_rows, workers=workers(client, 3)[1:])
    stream = batches(5)
    for _ in range(10):
        ids, noise = next(stream)
        table.step((ids % table.num_rows, noise))
    table.save(tmp_path / "ckpt")
    expected = table.to_numpy()
    victim = table.workers[1]
    try:
        client.run(os._exit, 1, workers=[victim])
    except Exception:
        pass  # the worker died before it could answer
    ids, noise = next(stream)
    with pytest.raises(ShardLostError, match="restore it with ShardedTable.load"):
        for _ in range(50):  # until the scheduler notices the worker is gone
            table.step((ids % table.num_rows, noise))
    with pytest.raises(ShardLostError):
        table.lookup([1])
    client.wait_for_workers(3, timeout=60)
    restored = ShardedTable.load(client, tmp_path / "ckpt", workers=workers(client, 2))
    params, state = restored.to_numpy()
    np.testing.assert_array_equal(params, expected[0])
    np.testing.assert_array_equal(state["sum"], expected[1]["sum"])
    restored.close()


def test_a_clear_error_without_distributed(monkeypatch):
    import builtins
    import npoptim.distributed.table as table_module
    real_import = builtins.__import__

    def no_distributed(name, *args, **kwargs):
        if name == "distributed":
            raise ImportError("No module named 'distributed'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_distributed)
    with pytest.raises(ImportError, match=r"pip install npoptim\[dask\]"):
        table_module.ShardedTable(None, 10, 4)
