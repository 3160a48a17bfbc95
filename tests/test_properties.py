"""Property-based tests (hypothesis): sparse paths, compiled vs interpreted kernels, threads,
and exact state round trips, over random shapes (zero-size and 1-element included), dtypes,
densities, duplicate entries and valid hyperparameters of every registered optimizer.

* A CSR gradient that stores every entry gives the dense update, bit for bit.
* Exact-sparse optimizers (``sparse_kind == "exact"``: Adagrad, SGD): a CSR gradient touching
  some rows gives the dense update with zeros elsewhere; rows it does not touch, and (for
  every sparse optimizer, lazy ones included) their state, stay bit-identical.
* Compiled Numba, ``NUMBA_DISABLE_JIT=1``, 1 and 2 Numba threads: bit-identical results
  (subprocesses running this file as a worker, comparing saved outputs).
* ``state_dict()``/``load_state_dict()`` and ``npoptim.save``/``npoptim.load`` round trips.

Run as ``python tests/test_properties.py worker CASES.json OUT.npz`` this file is the worker.
Under CI (``CI`` set) hypothesis is derandomized so a run is reproducible.
"""
import copy
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import scipy.sparse

REPO = pathlib.Path(__file__).resolve().parents[1]
if __name__ == "__main__":
    sys.path.insert(0, str(REPO))

from npoptim import registry  # noqa: E402


# ------------------------------------------------------------------- cases (also the worker)
def random_csr(rng, nrows, ncols, density, dup, dtype, full=False):
    """A CSR gradient with unsorted columns, duplicates, explicit zeros, and its dense sum.

    Each row is stored with probability ``density`` (every row if ``full``); a stored row
    holds all its columns or a random subset, plus duplicates with probability ``dup`` each.
    The dense twin adds the entries in stored order, as CSR coalescing does.
    """
    indptr, indices, data = [0], [], []
    for _ in range(nrows):
        if ncols and (full or rng.random() < density):
            cols = (np.arange(ncols) if full or rng.random() < 0.5
                    else rng.choice(ncols, rng.integers(0, ncols + 1), replace=False))
            extra = cols[rng.random(cols.size) < dup] if cols.size else cols
            cols = rng.permutation(np.concatenate([cols, extra]))
            values = rng.standard_normal(cols.size)
            values[rng.random(cols.size) < 0.1] = 0.0   # explicit zeros are stored entries
            indices.extend(cols.tolist())
            data.extend(values.tolist())
        indptr.append(len(indices))
    index_dtype = np.int32 if rng.random() < 0.5 else np.int64
    grad = scipy.sparse.csr_array((np.asarray(data, dtype), np.asarray(indices, index_dtype),
                                   np.asarray(indptr, index_dtype)), shape=(nrows, ncols))
    dense = np.zeros((nrows, ncols), dtype)
    for row in range(nrows):
        for k in range(indptr[row], indptr[row + 1]):
            dense[row, indices[k]] += dtype(data[k])
    return grad, dense


def hyper_from_json(hyper):
    """JSON turns tuples into lists; every list-valued option of torch.optim is a tuple."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in hyper.items()}


def make(case):
    """``case``'s rng (after drawing the param), dtype, shape and initial param."""
    rng = np.random.default_rng(case["seed"])
    dtype = np.dtype(case["dtype"]).type
    shape = tuple(case["shape"])
    param = np.asarray(rng.standard_normal(shape)).astype(dtype)
    return rng, dtype, shape, param


def step_grads(name, grads):
    """``grads`` as the optimizer's step takes them: a per-example optimizer (DPSGD) gets a
    batch of two examples made of each gradient."""
    if registry.get(name).per_example_grads:
        return [None if g is None else np.stack([g, -2 * g]) for g in grads]
    return grads


def run_case(case):
    """Run one case; return the final parameter and every state array, by name."""
    rng, dtype, shape, param = make(case)
    opt = registry.get(case["name"])([param], **hyper_from_json(case["hyper"]))
    rows, cols = (shape[0], int(np.prod(shape[1:], dtype=np.int64))) if shape else (0, 0)
    if registry.get(case["name"]).needs_closure:
        w = np.asarray(rng.uniform(0.5, 2, shape)).astype(dtype)
        c = np.asarray(rng.standard_normal(shape)).astype(dtype)

        def closure():
            return (float(np.sum(0.5 * w * param * param + c * param)),
                    [np.asarray(w * param + c, dtype)])
    for _ in range(case["steps"]):
        if registry.get(case["name"]).needs_closure:
            opt.step(closure=closure)
        elif case["grad"] == "csr":
            opt.step([random_csr(rng, rows, cols, case["density"], case["dup"], dtype)[0]])
        elif rng.random() < 0.15:
            opt.step([None])
        else:
            opt.step(step_grads(case["name"], [np.asarray(rng.standard_normal(shape))
                                               .astype(dtype)]))
    out = {"param": param}
    for index, entry in opt.state_dict()["state"].items():
        for key, value in entry.items():
            if isinstance(value, (np.ndarray, np.generic, int, float)):
                out[f"state{index}.{key}"] = np.asarray(value)
    return out


def worker(cases_path, out_path):
    with open(cases_path) as f:
        cases = json.load(f)
    arrays = {}
    for i, case in enumerate(cases):
        try:
            result = run_case(case)
        except Exception as exc:  # recorded: a case that fails in one mode only is a mismatch
            result = {"error": np.frombuffer(repr(exc).encode(), np.uint8)}
        for key, value in result.items():
            arrays[f"{i}/{key}"] = value
    np.savez(out_path, **arrays)


if __name__ == "__main__":
    assert sys.argv[1] == "worker"
    worker(sys.argv[2], sys.argv[3])
    sys.exit(0)


# ----------------------------------------------------------------------------------- tests
import pytest  # noqa: E402

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from npoptim.checkpoint import load, save  # noqa: E402

SETTINGS = dict(deadline=None, database=None, derandomize=bool(os.environ.get("CI")),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.large_base_example,
                                       HealthCheck.function_scoped_fixture])

CLASSES = {name: registry.get(name) for name in registry.OPTIMIZERS}
NAMES = sorted(CLASSES)
SPARSE = [n for n in NAMES if CLASSES[n].sparse_kind != "dense-only"]
EXACT = [n for n in NAMES if CLASSES[n].sparse_kind == "exact"]


unit = st.floats(0.0, 1.0)
lr = st.floats(1e-4, 1.0)
small = st.floats(0.0, 0.5)
eps = st.floats(1e-10, 1e-2)
beta = st.floats(0.0, 0.999)
flag = st.booleans()


@st.composite
def hyperparameters(draw, name, sparse=False):
    """Valid hyperparameters of ``name`` (weight decay off where a CSR gradient refuses it)."""
    wd = st.just(0.0) if sparse else small
    if name in ("Adam", "AdamW"):
        return draw(st.fixed_dictionaries(dict(
            lr=lr, betas=st.tuples(beta, beta), eps=eps, weight_decay=wd, amsgrad=flag,
            maximize=flag)))
    if name == "SparseAdam":
        return draw(st.fixed_dictionaries(dict(lr=lr, betas=st.tuples(beta, beta), eps=eps,
                                               maximize=flag)))
    if name == "Adagrad":
        return draw(st.fixed_dictionaries(dict(
            lr=lr, lr_decay=small, weight_decay=wd, initial_accumulator_value=small, eps=eps,
            maximize=flag)))
    if name == "Adadelta":
        return draw(st.fixed_dictionaries(dict(lr=lr, rho=unit, eps=eps, weight_decay=wd,
                                               maximize=flag)))
    if name == "SGD":
        momentum = draw(st.sampled_from([0.0, 0.0, draw(st.floats(0.0, 0.99))]))
        dampening = draw(st.sampled_from([0.0, draw(unit)]))
        nesterov = momentum > 0 and dampening == 0 and draw(flag)
        return dict(lr=draw(lr), momentum=momentum, dampening=dampening, nesterov=nesterov,
                    weight_decay=draw(wd), maximize=draw(flag))
    if name == "RMSprop":
        return draw(st.fixed_dictionaries(dict(
            lr=lr, alpha=unit, eps=eps, weight_decay=wd, momentum=st.floats(0.0, 0.99),
            centered=flag, maximize=flag)))
    if name == "Adamax":
        return draw(st.fixed_dictionaries(dict(lr=lr, betas=st.tuples(beta, beta), eps=eps,
                                               weight_decay=wd, maximize=flag)))
    if name == "NAdam":
        return draw(st.fixed_dictionaries(dict(
            lr=lr, betas=st.tuples(beta, beta), eps=eps, weight_decay=wd,
            momentum_decay=st.floats(0.0, 0.01), decoupled_weight_decay=flag, maximize=flag)))
    if name == "RAdam":
        return draw(st.fixed_dictionaries(dict(
            lr=lr, betas=st.tuples(beta, beta), eps=eps, weight_decay=wd,
            decoupled_weight_decay=flag, maximize=flag)))
    if name == "ASGD":
        return draw(st.fixed_dictionaries(dict(
            lr=lr, lambd=st.floats(0.0, 0.01), alpha=unit, t0=st.floats(0.0, 4.0),
            weight_decay=wd, maximize=flag)))
    if name == "Rprop":
        return draw(st.fixed_dictionaries(dict(
            lr=lr, etas=st.tuples(st.floats(0.1, 0.9), st.floats(1.1, 2.0)),
            step_sizes=st.tuples(st.floats(0.0, 1e-3), st.floats(1.0, 50.0)), maximize=flag)))
    if name == "Adafactor":
        return draw(st.fixed_dictionaries(dict(
            lr=lr, beta2_decay=st.floats(-1.0, -0.1), d=st.floats(1.0, 2.0), weight_decay=wd,
            maximize=flag)))
    if name == "Muon":
        return draw(st.fixed_dictionaries(dict(
            lr=lr, weight_decay=wd, momentum=st.floats(0.0, 0.99), nesterov=flag,
            ns_steps=st.integers(1, 5))))
    if name == "LBFGS":
        return draw(st.fixed_dictionaries(dict(lr=st.floats(0.1, 1.0),
                                               history_size=st.integers(1, 5),
                                               max_iter=st.integers(1, 5))))
    if name == "Sophia":   # the estimate the step makes itself (no hessian= in these tests)
        return draw(st.fixed_dictionaries(dict(
            lr=st.floats(1e-4, 0.1), update_interval=st.integers(1, 3),
            hessian_estimate=st.just("squared-gradient"))))
    if name == "AdamMini":  # unnamed parameters: one second moment per tensor
        return draw(st.fixed_dictionaries(dict(lr=st.floats(1e-4, 0.1),
                                               betas=st.tuples(beta, beta), eps=eps,
                                               weight_decay=wd)))
    return {"lr": draw(st.floats(1e-4, 0.1))}


def shapes(name, min_dims=0):
    """Random shapes with zero-size and 1-element ones; Muon takes 2-D only."""
    if name == "Muon":
        return st.tuples(st.integers(1, 6), st.integers(1, 6))
    edge = [(1,), (1, 1), (0,), (3, 0), (0, 4)] + ([] if min_dims else [()])
    return st.lists(st.integers(0, 5), min_size=min_dims, max_size=3).map(tuple) | \
        st.sampled_from(edge)


@st.composite
def cases(draw, names, grad="dense", sparse=False):
    name = draw(st.sampled_from(names))
    # SparseAdam takes no 0-d parameter (torch's refuses its dense gradient outright)
    rows_needed = grad == "csr" or name == "SparseAdam"
    shape = draw(shapes(name, min_dims=1 if rows_needed else 0))
    # a zero-size parameter raises, as in torch (CAME: its update's RMS divides by the size;
    # SOAP: no statistic of a side of 0; Kron: no factor of a side of 0)
    if name in ("Adafactor", "LBFGS", "CAME", "SOAP", "Kron"):
        shape = tuple(max(n, 1) for n in shape)
    return dict(name=name, hyper=draw(hyperparameters(name, sparse=sparse)),
                dtype=draw(st.sampled_from(["float32", "float64"])), shape=list(shape),
                seed=draw(st.integers(0, 2 ** 32 - 1)), steps=draw(st.integers(1, 4)),
                grad=grad, density=draw(st.floats(0.0, 1.0)), dup=draw(st.floats(0.0, 0.5)))


def same_bits(a, b, where=""):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, where
    assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes(), where


def states(opt):
    return {k: v for entry in opt.state.values() for k, v in entry.items()
            if isinstance(v, np.ndarray) and v.ndim > 0}


def by_row(state, rows):
    """A state array as ``(rows, per-row values)``: an element-wise state has the parameter's
    columns, a row-wise one (RowWiseAdagrad's ``momentum1``) one value per row."""
    return state.reshape(rows, state.size // rows if rows else 0)


def sparse_and_dense_twins(case):
    """``case``'s rng, dtype, shape, rows and columns (of the CSR view), and two optimizers
    over equal params: one for CSR gradients, one for their dense twins."""
    rng, dtype, shape, param = make(case)
    rows, cols = shape[0], int(np.prod(shape[1:], dtype=np.int64))
    dense_param = param.copy()
    cls = CLASSES[case["name"]]
    return (rng, dtype, shape, rows, cols, param, dense_param, cls([param], **case["hyper"]),
            cls([dense_param], **case["hyper"]))


# ------------------------------------------------------------------------------- sparse
@pytest.mark.skipif(not SPARSE, reason="no optimizer takes CSR gradients")
@settings(max_examples=200, **SETTINGS)
@given(case=cases(SPARSE or ["SGD"], grad="csr", sparse=True))
def test_csr_storing_every_entry_equals_dense(case):
    rng, dtype, shape, rows, cols, param, dense_param, ours, ref = sparse_and_dense_twins(case)
    cls = CLASSES[case["name"]]
    for _ in range(case["steps"]):
        grad, dense = random_csr(rng, rows, cols, 1.0, case["dup"], dtype, full=True)
        if cls.sparse_kind == "lazy":
            # a lazy optimizer's dense gradient stores its nonzeros only: avoid zeros
            grad.data[grad.data == 0] = 1
            dense = _dense_of(grad, rows, cols, dtype)
        ours.step([grad])
        ref.step([dense.reshape(shape)])
    same_bits(param, dense_param, "param")
    for (k, a), (_, b) in zip(states(ours).items(), states(ref).items()):
        same_bits(a, b, k)


def _dense_of(grad, rows, cols, dtype):
    dense = np.zeros((rows, cols), dtype)
    for row in range(rows):
        for k in range(grad.indptr[row], grad.indptr[row + 1]):
            dense[row, grad.indices[k]] += grad.data[k]
    return dense


@pytest.mark.skipif(not EXACT, reason="no exact-sparse optimizer")
@settings(max_examples=250, **SETTINGS)
@given(case=cases(EXACT or ["SGD"], grad="csr", sparse=True))
def test_exact_sparse_equals_dense_and_keeps_untouched_rows(case):
    rng, dtype, shape, rows, cols, param, dense_param, ours, ref = sparse_and_dense_twins(case)
    plain = not case["hyper"].get("momentum")   # momentum moves every row with a buffer
    for _ in range(case["steps"]):
        grad, dense = random_csr(rng, rows, cols, case["density"], case["dup"], dtype)
        before = param.copy(), {k: v.copy() for k, v in states(ours).items()}
        ours.step([grad])
        ref.step([dense.reshape(shape)])
        # equal values (a dense zero may turn -0.0 into +0.0 where the sparse path is idle)
        np.testing.assert_array_equal(param, dense_param)
        for (k, a), (_, b) in zip(states(ours).items(), states(ref).items()):
            np.testing.assert_array_equal(a, b, err_msg=k)
        if plain:
            untouched = np.diff(grad.indptr) == 0
            same_bits(param[untouched], before[0][untouched], "untouched param rows")
            for k, v in states(ours).items():
                same_bits(v[untouched], before[1][k][untouched], f"untouched {k} rows")


@pytest.mark.skipif(not SPARSE, reason="no optimizer takes CSR gradients")
@settings(max_examples=200, **SETTINGS)
@given(case=cases(SPARSE or ["SGD"], grad="csr", sparse=True))
def test_rows_without_stored_entries_stay_bit_identical(case):
    """Lazy and exact optimizers alike (without momentum): a row the gradient does not store
    keeps its parameter and state bits; duplicates and explicit zeros elsewhere included."""
    rng, dtype, shape, param = make(case)
    hyper = dict(case["hyper"], **({"momentum": 0.0, "nesterov": False}
                                   if "momentum" in case["hyper"] else {}))
    opt = CLASSES[case["name"]]([param], **hyper)
    rows, cols = shape[0], int(np.prod(shape[1:], dtype=np.int64))
    flat = param.reshape(rows, cols)
    for _ in range(case["steps"]):
        grad, _ = random_csr(rng, rows, cols, case["density"], case["dup"], dtype)
        untouched = np.diff(grad.indptr) == 0
        stored = np.zeros((rows, cols), bool)
        for row in range(rows):
            stored[row, grad.indices[grad.indptr[row]:grad.indptr[row + 1]]] = True
        before = flat.copy(), {k: by_row(v, rows).copy() for k, v in states(opt).items()}
        opt.step([grad])
        same_bits(flat[untouched], before[0][untouched], "param rows")
        if CLASSES[case["name"]].sparse_kind == "lazy":   # not even an unstored column moves
            same_bits(flat[~stored], before[0][~stored], "unstored entries")
        for k, v in states(opt).items():
            if k in before[1]:
                same_bits(by_row(v, rows)[untouched], before[1][k][untouched], k)


# ----------------------------------------------------------- compiled vs interpreted, threads
def run_worker(cases_path, out_path, env_extra):
    env = dict(os.environ, PYTHONPATH=str(REPO), **env_extra)
    proc = subprocess.run([sys.executable, __file__, "worker", str(cases_path), str(out_path)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(out_path, allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


#: the optimizers split in halves, one batch each: a batch of all of them, with three cases
#: each, outgrows what Hypothesis draws in one example (it then retries hundreds of times,
#: minutes, before one fits); half of them with two cases each stays well inside
BATCH_PARTS = (NAMES[0::2], NAMES[1::2])


@st.composite
def case_batches(draw, names, per_optimizer=2):
    """``per_optimizer`` cases of each of ``names`` (dense gradients), as many CSR cases of
    each sparse one."""
    batch = []
    for name in names:
        batch += [draw(cases([name])) for _ in range(per_optimizer)]
        if name in SPARSE:
            batch += [draw(cases([name], grad="csr", sparse=True))
                      for _ in range(per_optimizer)]
    return batch


# each example runs four subprocesses (2-4 s each once Numba's cache is warm): few
# examples, many cases in each; no shrinking (the failure message names the case). Two
# examples of each half: four cases of every optimizer.
@pytest.mark.parametrize("part", range(len(BATCH_PARTS)))
@settings(max_examples=2, phases=[Phase.explicit, Phase.generate], **SETTINGS)
@given(data=st.data())
def test_numba_jit_disabled_and_thread_counts_agree_bit_for_bit(tmp_path_factory, part, data):
    batch = data.draw(case_batches(BATCH_PARTS[part]), label="batch")
    tmp = tmp_path_factory.mktemp("jit")
    cases_path = tmp / "cases.json"
    cases_path.write_text(json.dumps(batch))
    parallel = {"NPOPTIM_PARALLEL_THRESHOLD": "0"}   # every update takes the prange path
    runs = {label: run_worker(cases_path, tmp / f"run{i}.npz", env)
            for i, (label, env) in enumerate([
                ("serial", {"NUMBA_NUM_THREADS": "1"}),
                ("1 thread, parallel path", {"NUMBA_NUM_THREADS": "1", **parallel}),
                ("2 threads, parallel path", {"NUMBA_NUM_THREADS": "2", **parallel}),
                ("NUMBA_DISABLE_JIT=1", {"NUMBA_DISABLE_JIT": "1"})])}
    reference = runs.pop("serial")
    assert len(reference) >= len(batch)
    for label, arrays in runs.items():
        for i, case in enumerate(batch):
            ours = {k: v for k, v in arrays.items() if k.startswith(f"{i}/")}
            theirs = {k: v for k, v in reference.items() if k.startswith(f"{i}/")}
            assert set(ours) == set(theirs), (label, case, _errors(ours), _errors(theirs))
            for key, value in ours.items():
                same_bits(value, theirs[key], f"{label} {key} {case}")


def _errors(arrays):
    return [bytes(v).decode() for k, v in arrays.items() if k.endswith("/error")]


def test_adadelta_float32_is_the_same_with_jit_disabled(tmp_path):
    if "Adadelta" not in NAMES:
        pytest.skip("no Adadelta")
    case = dict(name="Adadelta", hyper={"weight_decay": 0.1}, dtype="float32", shape=[40],
                seed=3, steps=12, grad="dense", density=1.0, dup=0.0)
    (tmp_path / "c.json").write_text(json.dumps([case]))
    jit = run_worker(tmp_path / "c.json", tmp_path / "jit.npz", {})
    nojit = run_worker(tmp_path / "c.json", tmp_path / "nojit.npz", {"NUMBA_DISABLE_JIT": "1"})
    for key in jit:
        same_bits(nojit[key], jit[key], key)


RMSPROP_NEGATIVE_VARIANCE = """
import numpy as np, npoptim
p = np.ones(3, np.float32)
opt = npoptim.RMSprop([p], lr=0.1, centered=True)
opt.step([np.ones(3, np.float32)])
opt.state[0]["square_avg"][:] = 0          # now square_avg < grad_avg**2
opt.step([np.zeros(3, np.float32)])
assert np.isnan(p).all(), p                # as torch and the compiled kernel
"""


def test_rmsprop_negative_centered_variance_gives_nan_with_jit_disabled():
    if "RMSprop" not in NAMES:
        pytest.skip("no RMSprop")
    for extra in ({}, {"NUMBA_DISABLE_JIT": "1"}):
        env = dict(os.environ, PYTHONPATH=str(REPO), **extra)
        proc = subprocess.run([sys.executable, "-c", RMSPROP_NEGATIVE_VARIANCE], env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, (extra, proc.stderr[-2000:])


# ------------------------------------------------------------------------- round trips
def assert_tree_same(a, b, where="", widen_to=None):
    """Exact equality of two state trees; arrays of ``a`` may come back widened to
    ``widen_to`` (load_state_dict casts state to the parameter's dtype, as torch does)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), where
        for k in a:
            assert_tree_same(a[k], b[k], f"{where}[{k!r}]", widen_to)
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_tree_same(x, y, f"{where}[{i}]", widen_to)
    elif isinstance(a, np.ndarray):
        if widen_to is not None and a.dtype != b.dtype and b.dtype == widen_to:
            a = a.astype(widen_to)
        same_bits(a, b, where)
    elif isinstance(a, float):
        assert type(b) is float and (a == b or (a != a and b != b)), where
    else:
        assert type(a) is type(b) and a == b, where


def trained(case):
    """An optimizer after ``case``'s steps (dense gradients), with its parameter and rng."""
    rng, dtype, shape, param = make(case)
    opt = CLASSES[case["name"]]([param], **case["hyper"])
    w = np.asarray(rng.uniform(0.5, 2, shape)).astype(dtype)

    def step():
        if registry.get(case["name"]).needs_closure:
            opt.step(closure=lambda: (float(np.sum(0.5 * w * param * param)),
                                      [np.asarray(w * param, dtype)]))
        else:
            opt.step(step_grads(case["name"], [np.asarray(rng.standard_normal(shape))
                                               .astype(dtype)]))
    for _ in range(case["steps"]):
        step()
    return opt, param, step


@settings(max_examples=200, **SETTINGS)
@given(case=cases(NAMES))
def test_state_dict_round_trip_is_exact(case):
    opt, param, _ = trained(case)
    sd = opt.state_dict()
    other = CLASSES[case["name"]]([np.zeros_like(param)], **case["hyper"])
    other.load_state_dict(copy.deepcopy(sd))
    assert_tree_same(sd, other.state_dict(), "state_dict", widen_to=param.dtype)


@settings(max_examples=120, **SETTINGS)
@given(case=cases(NAMES))
def test_checkpoint_round_trip_is_exact_and_continues_identically(tmp_path_factory, case):
    opt, param, step = trained(case)
    path = tmp_path_factory.mktemp("ckpt") / "c.npz"
    save(path, opt)
    twin_param = np.asarray(np.random.default_rng(1).standard_normal(param.shape)) \
        .astype(param.dtype)
    twin = CLASSES[case["name"]]([twin_param], **case["hyper"])
    load(path, twin)
    same_bits(param, twin_param, "param")
    assert_tree_same(opt.state_dict(), twin.state_dict(), "state_dict")
    # the same next steps from both
    rng_state = copy.deepcopy(np.random.default_rng(case["seed"] + 1).bit_generator.state)
    for target, p in ((opt, param), (twin, twin_param)):
        rng = np.random.default_rng()
        rng.bit_generator.state = copy.deepcopy(rng_state)
        for _ in range(2):
            if registry.get(case["name"]).needs_closure:
                target.step(closure=lambda p=p: (float(np.sum(p * p)),
                                                 [np.asarray(2 * p, p.dtype)]))
            else:
                target.step(step_grads(case["name"], [np.asarray(rng.standard_normal(p.shape))
                                                      .astype(p.dtype)]))
    same_bits(param, twin_param, "param after steps")
    assert_tree_same(opt.state_dict(), twin.state_dict(), "state_dict after steps")
