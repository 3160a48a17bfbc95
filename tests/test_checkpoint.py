"""npoptim.save / npoptim.load: exact resumes, atomic writes, and bad files that change nothing.

Written against the registry, so every optimizer present is covered: a run interrupted by a
save and a load into a fresh (and deliberately dirtied) optimizer must continue bit for bit
like the run that was never interrupted, with and without every scheduler.
"""
import copy
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest
import scipy.sparse

from npoptim import registry
from npoptim.checkpoint import CheckpointError, load, save
import npoptim.checkpoint as checkpoint

import problems
from problems import gradients

REPO = pathlib.Path(__file__).resolve().parents[1]
SHAPES = problems.SHAPES
CASES = problems.cases(registry.OPTIMIZERS)
CASE_IDS = [f"{name}-{i}" for name, i, _ in CASES]


# ---------------------------------------------------------------------------------- helpers
def build(name, kwargs, dtype=np.float64, seed=0):
    params = problems.initial_values(dtype, seed)
    return problems.make(registry.get(name), name, kwargs, params), params


def run(opt, params, name, steps, scheduler=None):
    for step in steps:
        problems.step(opt, params, name, step)
        if scheduler is not None:
            if type(scheduler).__name__ == "ReduceLROnPlateau":
                scheduler.step(float(np.sum(params[0] ** 2)) if step % 4 else 1e9)
            else:
                scheduler.step()


def assert_same(a, b, where="value"):
    """Exact equality: same types, same dtypes and shapes, same bits (NaN included)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray), where
        assert a.dtype == b.dtype and a.shape == b.shape, (where, a.dtype, b.dtype, a.shape,
                                                           b.shape)
        assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes(), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), (where, list(a), list(b))
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), (where, a, b)
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, np.generic):
        assert type(a) is type(b) and a.tobytes() == b.tobytes(), (where, a, b)
    elif isinstance(a, float):
        assert type(b) is float and (a == b or (a != a and b != b)), (where, a, b)
        assert np.signbit(a) == np.signbit(b), where
    elif callable(a):
        assert callable(b), where
    else:
        assert type(a) is type(b) and a == b, (where, a, b)


def snapshot(opt, scheduler=None):
    return ([p.copy() for p in opt.params], copy.deepcopy(opt.state_dict()),
            None if scheduler is None else copy.deepcopy(scheduler.state_dict()))


def assert_untouched(before, opt, scheduler=None):
    params, sd, sched = before
    for p, q in zip(params, opt.params):
        assert_same(p, q, "param")
    assert_same(sd, opt.state_dict(), "state_dict")
    if scheduler is not None:
        assert_same(sched, scheduler.state_dict(), "scheduler")


@pytest.fixture
def adam_ckpt(tmp_path):
    """A small Adam checkpoint and a fresh optimizer (with state) to load it into."""
    opt, params = build("Adam", dict(lr=0.01, amsgrad=True))
    run(opt, params, "Adam", range(3))
    path = tmp_path / "adam.npz"
    save(path, opt)
    target, target_params = build("Adam", dict(lr=0.02), seed=1)
    run(target, target_params, "Adam", range(2))
    return path, opt, target


# ------------------------------------------------------------------------- exact resumes
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,i,kwargs", CASES, ids=CASE_IDS)
def test_resume_is_bit_identical(tmp_path, name, i, kwargs, dtype):
    total, cut = 9, 4
    ref, ref_params = build(name, kwargs, dtype)
    run(ref, ref_params, name, range(total))

    first, first_params = build(name, kwargs, dtype)
    run(first, first_params, name, range(cut))
    path = tmp_path / "ckpt.npz"
    save(path, first)

    # a fresh optimizer over other values, with state of its own, takes the checkpoint
    resumed, resumed_params = build(name, kwargs, dtype, seed=7)
    run(resumed, resumed_params, name, range(2))
    load(path, resumed)
    assert_same(first.state_dict(), resumed.state_dict(), "loaded state_dict")
    run(resumed, resumed_params, name, range(cut, total))
    for a, b in zip(ref_params, resumed_params):
        assert_same(a, b, "params")
    assert_same(ref.state_dict(), resumed.state_dict(), "state_dict")


@pytest.mark.parametrize("name", ["SparseAdam", "Adagrad", "SGD"])
def test_resume_with_csr_gradients(tmp_path, name):
    rng = np.random.default_rng(3)
    total, cut = 8, 3
    grads = []
    for _ in range(total):
        dense = rng.standard_normal((50, 4)).astype(np.float32)
        dense[rng.random(50) < 0.8] = 0
        grads.append([scipy.sparse.csr_array(dense)])

    def fresh():
        p = np.random.default_rng(0).standard_normal((50, 4)).astype(np.float32)
        return registry.get(name)([p], lr=0.05), p

    ref, ref_p = fresh()
    for g in grads:
        ref.step(g)
    first, _ = fresh()
    for g in grads[:cut]:
        first.step(g)
    save(tmp_path / "c.npz", first)
    resumed, p = fresh()
    load(tmp_path / "c.npz", resumed)
    for g in grads[cut:]:
        resumed.step(g)
    assert_same(ref_p, p, "param")
    assert_same(ref.state_dict(), resumed.state_dict())


def scheduler_factories():
    lr_scheduler = pytest.importorskip("npoptim.lr_scheduler")
    S = lr_scheduler
    factories = {
        "LambdaLR": lambda o: S.LambdaLR(o, lr_lambda=lambda e: 0.9 ** e),
        "MultiplicativeLR": lambda o: S.MultiplicativeLR(o, lr_lambda=lambda e: 0.95),
        "StepLR": lambda o: S.StepLR(o, step_size=2, gamma=0.5),
        "MultiStepLR": lambda o: S.MultiStepLR(o, milestones=[2, 5], gamma=0.3),
        "ConstantLR": lambda o: S.ConstantLR(o, factor=0.5, total_iters=3),
        "LinearLR": lambda o: S.LinearLR(o, start_factor=0.3, total_iters=4),
        "ExponentialLR": lambda o: S.ExponentialLR(o, gamma=0.9),
        "PolynomialLR": lambda o: S.PolynomialLR(o, total_iters=6, power=2.0),
        "CosineAnnealingLR": lambda o: S.CosineAnnealingLR(o, T_max=5, eta_min=1e-4),
        "CosineAnnealingWarmRestarts":
            lambda o: S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=1e-4),
        "CyclicLR": lambda o: S.CyclicLR(o, base_lr=0.001, max_lr=0.01, step_size_up=3),
        "OneCycleLR": lambda o: S.OneCycleLR(o, max_lr=0.05, total_steps=20),
        "SequentialLR": lambda o: S.SequentialLR(
            o, [S.ConstantLR(o, factor=0.5, total_iters=2), S.ExponentialLR(o, gamma=0.9)],
            milestones=[3]),
        "ChainedScheduler": lambda o: S.ChainedScheduler(
            [S.StepLR(o, step_size=2, gamma=0.5), S.ExponentialLR(o, gamma=0.95)],
            optimizer=o),
        "ReduceLROnPlateau": lambda o: S.ReduceLROnPlateau(o, patience=1, factor=0.5),
    }
    return {k: v for k, v in factories.items() if hasattr(S, k)}


SCHEDULERS = ["LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR",
              "ExponentialLR", "PolynomialLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts",
              "CyclicLR", "OneCycleLR", "SequentialLR", "ChainedScheduler", "ReduceLROnPlateau"]


@pytest.mark.parametrize("opt_name", ["Adam", "SGD"])
@pytest.mark.parametrize("sched_name", SCHEDULERS)
def test_resume_with_scheduler_is_bit_identical(tmp_path, sched_name, opt_name):
    factories = scheduler_factories()
    if sched_name not in factories:
        pytest.skip(f"npoptim.lr_scheduler has no {sched_name}")
    make = factories[sched_name]
    kwargs = dict(lr=0.01, momentum=0.9) if opt_name == "SGD" else dict(lr=0.01)
    total, cut = 11, 5

    def fresh(seed=0):
        opt, params = build(opt_name, kwargs, seed=seed)
        return opt, params, make(opt)

    ref, ref_params, ref_sched = fresh()
    run(ref, ref_params, opt_name, range(total), ref_sched)
    first, first_params, first_sched = fresh()
    run(first, first_params, opt_name, range(cut), first_sched)
    save(tmp_path / "c.npz", first, first_sched)

    resumed, params, sched = fresh(seed=5)
    run(resumed, params, opt_name, range(2), sched)
    load(tmp_path / "c.npz", resumed, sched)
    assert sched.get_last_lr() == first_sched.get_last_lr()
    run(resumed, params, opt_name, range(cut, total), sched)
    for a, b in zip(ref_params, params):
        assert_same(a, b, "params")
    assert_same(ref.state_dict(), resumed.state_dict(), "optimizer")
    assert_same(ref_sched.state_dict(), sched.state_dict(), "scheduler")
    assert sched.get_last_lr() == ref_sched.get_last_lr()


def test_step_counts_beyond_float32_are_exact(tmp_path):
    """state_dict() exports step as float32 (torch's form); the checkpoint keeps the integer."""
    opt, params = build("Adam", {})
    run(opt, params, "Adam", range(1))
    opt.state[0]["step"] = 2 ** 24 + 1
    opt.state[1]["step"] = 2 ** 40 + 3
    save(tmp_path / "c.npz", opt)
    other, _ = build("Adam", {})
    load(tmp_path / "c.npz", other)
    assert other.state[0]["step"] == 2 ** 24 + 1
    assert other.state[1]["step"] == 2 ** 40 + 3


def test_round_trip_keeps_types_and_special_values(tmp_path):
    opt, params = build("Adam", dict(lr=0.01, betas=(0.5, 0.75)))
    run(opt, params, "Adam", range(2))
    opt.state[0]["exp_avg"][0, 0] = np.nan
    opt.state[0]["exp_avg"][0, 1] = -np.inf
    opt.state[0]["exp_avg"][0, 2] = -0.0
    opt.param_groups[0]["eps"] = np.float32(1e-6)       # a NumPy scalar stays one
    opt.param_groups[1]["lr"] = 1e-300
    save(tmp_path / "c.npz", opt)
    other, _ = build("Adam", {})
    load(tmp_path / "c.npz", other)
    assert_same(opt.state_dict(), other.state_dict())
    assert type(other.param_groups[0]["betas"]) is tuple
    assert type(other.param_groups[0]["eps"]) is np.float32


# ------------------------------------------------------------------------------ the format
def test_file_is_a_plain_npz_without_pickle(adam_ckpt):
    path, opt, _ = adam_ckpt
    with np.load(path, allow_pickle=False) as npz:
        manifest = json.loads(npz["__manifest__"].tobytes())
        assert npz["__sha256__"].shape == (32,)
        for name, meta in manifest["arrays"].items():
            assert npz[name].dtype == np.dtype(meta["dtype"])
            assert list(npz[name].shape) == meta["shape"]
    assert manifest["format"] == "npoptim-checkpoint" and manifest["version"] == 1
    assert manifest["optimizer"] == "Adam" and manifest["scheduler"] is None
    assert [p["shape"] for p in manifest["params"]] == [list(s) for s in SHAPES]
    with zipfile.ZipFile(path) as zf:
        assert all(i.compress_type == zipfile.ZIP_STORED for i in zf.infolist())


def test_path_is_used_as_given(tmp_path):
    opt, _ = build("Adam", {})
    save(str(tmp_path / "noext"), opt)
    assert sorted(os.listdir(tmp_path)) == ["noext"]
    load(tmp_path / "noext", opt)


def test_missing_file_raises_file_not_found(tmp_path):
    opt, _ = build("Adam", {})
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "nope.npz", opt)


# ------------------------------------------------------------------------- atomic writing
def test_failed_write_keeps_the_previous_file(tmp_path, monkeypatch, adam_ckpt):
    path, opt, _ = adam_ckpt
    good = path.read_bytes()
    run(opt, opt.params, "Adam", range(3, 5))

    def crash(f, members):
        f.write(b"PK\x03\x04 half a checkpoint")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint, "_write_npz", crash)
    with pytest.raises(OSError, match="No space"):
        save(path, opt)
    assert path.read_bytes() == good
    assert os.listdir(path.parent) == [path.name]  # the temporary file is gone


def test_failed_rename_keeps_the_previous_file(tmp_path, monkeypatch, adam_ckpt):
    path, opt, _ = adam_ckpt
    good = path.read_bytes()

    def no_replace(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", no_replace)
    with pytest.raises(KeyboardInterrupt):
        save(path, opt)
    assert path.read_bytes() == good
    assert os.listdir(path.parent) == [path.name]


def test_data_is_fsynced_before_the_rename(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd)))
    monkeypatch.setattr(os, "replace",
                        lambda a, b: (events.append("replace"), real_replace(a, b)))
    opt, _ = build("Adam", {})
    save(tmp_path / "c.npz", opt)
    assert events[:2] == ["fsync", "replace"]
    if os.name == "posix":
        assert events[2:] == ["fsync"]  # the directory entry


def test_unstorable_value_raises_before_writing(tmp_path, adam_ckpt):
    path, opt, _ = adam_ckpt
    good = path.read_bytes()
    opt.param_groups[0]["foreach"] = object()
    with pytest.raises(TypeError, match=r"param_groups.*foreach.*without pickle"):
        save(path, opt)
    assert path.read_bytes() == good
    assert os.listdir(path.parent) == [path.name]


WRITER = r"""
import sys, numpy as np
from npoptim import SparseAdam
from npoptim.checkpoint import save
w = np.zeros((200_000, 8), np.float32)
opt = SparseAdam([w], lr=0.1)
step = 0
while True:
    step += 1
    g = np.zeros_like(w); g[step % 1000] = 1.0
    opt.step([g])
    save(sys.argv[1], opt)
    print(step, flush=True)
"""


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_killed_mid_write_leaves_a_loadable_checkpoint(tmp_path):
    """Kill a process that saves a 19 MB checkpoint in a loop: the file always loads."""
    from npoptim import SparseAdam
    path = tmp_path / "c.npz"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for delay in (0.05, 0.21, 0.37):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], env=env,
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "1"   # one complete checkpoint exists
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        w = np.zeros((200_000, 8), np.float32)
        opt = SparseAdam([w], lr=0.1)
        load(path, opt)
        step = opt.state[0]["step"]
        assert step >= 1 and w[step % 1000, 0] != 0
    # what a crash leaves behind is only ever a hidden temporary file, never the target
    assert all(n == "c.npz" or (n.startswith(".c.npz.") and n.endswith(".tmp"))
               for n in os.listdir(tmp_path))


# ----------------------------------------------------------- bad files change nothing
@pytest.mark.parametrize("keep", [0, 1, 30, 200, 0.5, -1, -22, -100])
def test_truncated_file_raises_and_changes_nothing(tmp_path, adam_ckpt, keep):
    path, _, target = adam_ckpt
    data = path.read_bytes()
    n = int(len(data) * keep) if isinstance(keep, float) else keep % len(data)
    bad = tmp_path / "bad.npz"
    bad.write_bytes(data[:n])
    before = snapshot(target)
    with pytest.raises(CheckpointError, match="truncated or corrupt|not an npoptim"):
        load(bad, target)
    assert_untouched(before, target)


def test_every_flipped_byte_is_caught_or_harmless(tmp_path, adam_ckpt):
    """A changed byte anywhere either raises or (zip metadata such as a timestamp) loads the
    very same content; it never loads something else."""
    path, opt, target = adam_ckpt
    data = bytearray(path.read_bytes())
    reference, _ = build("Adam", {}, seed=3)
    load(path, reference)
    expected = snapshot(reference)
    bad = tmp_path / "bad.npz"
    raised = 0
    positions = sorted(set(np.linspace(0, len(data) - 1, 400).astype(int)))
    for pos in positions:
        flipped = bytearray(data)
        flipped[pos] ^= 0x41
        bad.write_bytes(bytes(flipped))
        before = snapshot(target)
        try:
            load(bad, target)
        except CheckpointError:
            raised += 1
            assert_untouched(before, target)
        else:
            assert_untouched(expected, target)
            load(path, target)
    assert raised > 0.8 * len(positions)


def rewrite(path, out, edit_manifest=None, edit_arrays=None, fix_digest=False):
    """Rewrite a checkpoint's members (with valid zip CRCs), optionally fixing the digest."""
    with np.load(path, allow_pickle=False) as npz:
        members = {k: npz[k] for k in npz.files}
    manifest = json.loads(members["__manifest__"].tobytes())
    if edit_manifest:
        edit_manifest(manifest)
    if edit_arrays:
        edit_arrays(members)
    blob = json.dumps(manifest).encode()
    members["__manifest__"] = np.frombuffer(blob, np.uint8)
    if fix_digest:
        arrays = {k: v for k, v in members.items() if k not in ("__manifest__", "__sha256__")}
        manifest_arrays = {k: None for k in manifest["arrays"]}
        members["__sha256__"] = np.frombuffer(
            checkpoint._digest(blob, manifest_arrays, arrays), np.uint8)
    with open(out, "wb") as f:
        checkpoint._write_npz(f, members)


def test_tampered_values_with_valid_zip_are_caught_by_the_digest(tmp_path, adam_ckpt):
    path, _, target = adam_ckpt
    bad = tmp_path / "bad.npz"

    def more_lr(m):
        m["optimizer_state"]["param_groups"][0]["lr"] = 10.0

    def bigger_step(arrays):
        arrays["param0"] = arrays["param0"] + 1

    for kwargs in (dict(edit_manifest=more_lr), dict(edit_arrays=bigger_step)):
        rewrite(path, bad, **kwargs)
        before = snapshot(target)
        with pytest.raises(CheckpointError, match="digest"):
            load(bad, target)
        assert_untouched(before, target)


@pytest.mark.parametrize("edit,match", [
    (lambda m: m.update(version=2), "format version 2"),
    (lambda m: m.update(format="other"), "not an npoptim checkpoint"),
    (lambda m: m["optimizer_state"]["state"]["__dict__"][0][1].pop("exp_avg"),
     "optimizer state does not load"),
    (lambda m: m["optimizer_state"]["param_groups"][1].update(lr=-1.0),
     "optimizer state does not load.*learning rate"),
    (lambda m: m["optimizer_state"].update(state={"__weird__": 1}), "malformed state"),
    (lambda m: m["optimizer_state"]["param_groups"][0]["params"].append(1),
     "optimizer state does not load"),
    (lambda m: m["params"].pop(), "has 1 parameters"),
    (lambda m: m["params"][0].update(array="param1"), "parameter 0 has shape"),
    (lambda m: m["optimizer_state"]["state"]["__dict__"][0][1].update(
        exp_avg={"__array__": "param1"}), "exp_avg'\\] has shape"),
    (lambda m: m["arrays"].pop("a2"), "do not match its manifest"),
    (lambda m: m["arrays"]["a2"].update(shape=[3, 4]), "the manifest says"),
    (lambda m: m["arrays"]["a2"].update(dtype="|O"), "dtype object"),
])
def test_consistent_but_wrong_content_raises_and_changes_nothing(tmp_path, adam_ckpt, edit,
                                                                 match):
    """Files with a correct digest whose content does not fit: each check of load() fires."""
    path, _, target = adam_ckpt
    bad = tmp_path / "bad.npz"
    rewrite(path, bad, edit_manifest=edit, fix_digest=True)
    before = snapshot(target)
    with pytest.raises(CheckpointError, match=match):
        load(bad, target)
    assert_untouched(before, target)


def test_pickled_npz_is_refused_without_unpickling(tmp_path, adam_ckpt):
    path, _, target = adam_ckpt

    class Boom:
        def __reduce__(self):
            return (os.system, ("echo pwned > " + str(tmp_path / "pwned"),))

    bad = tmp_path / "bad.npz"
    with np.load(path, allow_pickle=False) as npz:
        members = {k: npz[k] for k in npz.files}
    members["a2"] = np.array([Boom()], dtype=object)
    np.savez(bad, **members)
    before = snapshot(target)
    with pytest.raises(CheckpointError):
        load(bad, target)
    assert not (tmp_path / "pwned").exists()
    assert_untouched(before, target)


def test_other_npz_and_other_files_are_refused(tmp_path, adam_ckpt):
    _, _, target = adam_ckpt
    before = snapshot(target)
    np.savez(tmp_path / "plain.npz", x=np.zeros(3))
    (tmp_path / "text.npz").write_text("hello")
    for name in ("plain.npz", "text.npz"):
        with pytest.raises(CheckpointError):
            load(tmp_path / name, target)
    assert_untouched(before, target)


@pytest.mark.parametrize("other", ["AdamW", "SGD", "SparseAdam", "Adagrad"])
def test_other_optimizer_class_is_refused(adam_ckpt, other):
    path, _, _ = adam_ckpt
    target, params = build(other, {})
    run(target, params, other, range(2))
    before = snapshot(target)
    with pytest.raises(CheckpointError, match=f"for a Adam optimizer, not {other}"):
        load(path, target)
    assert_untouched(before, target)


@pytest.mark.parametrize("shapes,dtype,match", [
    ([(4, 3), (5, 3)], np.float64, "parameter 1 has shape"),
    ([(4, 3)], np.float64, "has 2 parameters, the optimizer has 1"),
    ([(4, 3), (3, 5), (2,)], np.float64, "has 2 parameters, the optimizer has 3"),
    ([(4, 3), (3, 5)], np.float32, "parameter 0 has shape .* dtype float64"),
    ([(12,), (3, 5)], np.float64, "parameter 0 has shape"),
])
def test_other_shapes_or_dtypes_are_refused(adam_ckpt, shapes, dtype, match):
    from npoptim import Adam
    path, _, _ = adam_ckpt
    params = [np.ones(s, dtype) for s in shapes]
    target = Adam(params, lr=0.1)
    target.step([np.ones(s, dtype) for s in shapes])
    before = snapshot(target)
    with pytest.raises(CheckpointError, match=match):
        load(path, target)
    assert_untouched(before, target)


def test_other_param_group_structure_is_refused(adam_ckpt):
    from npoptim import Adam
    path, _, _ = adam_ckpt
    params = [np.ones(s) for s in SHAPES]
    target = Adam(params)                      # one group where the checkpoint has two
    before = snapshot(target)
    with pytest.raises(CheckpointError, match="number of parameter groups"):
        load(path, target)
    assert_untouched(before, target)


def test_read_only_parameter_is_refused(adam_ckpt):
    path, _, target = adam_ckpt
    before = snapshot(target)
    target.params[1].flags.writeable = False
    with pytest.raises(CheckpointError, match="read-only"):
        load(path, target)
    target.params[1].flags.writeable = True
    assert_untouched(before, target)


def saved_adam_with_step_lr(path):
    """npoptim.lr_scheduler, and an Adam optimizer saved to ``path`` with its StepLR after 3
    steps."""
    S = pytest.importorskip("npoptim.lr_scheduler")
    opt, params = build("Adam", {})
    sched = S.StepLR(opt, step_size=2)
    run(opt, params, "Adam", range(3), sched)
    save(path, opt, sched)
    return S, opt


def test_scheduler_must_match(tmp_path):
    S, opt = saved_adam_with_step_lr(tmp_path / "with.npz")
    save(tmp_path / "without.npz", opt)

    target, _ = build("Adam", {}, seed=2)
    other = S.ExponentialLR(target, gamma=0.5)
    before = snapshot(target, other)
    with pytest.raises(CheckpointError, match="pass the scheduler"):
        load(tmp_path / "with.npz", target)
    with pytest.raises(CheckpointError, match="holds a StepLR state, not ExponentialLR"):
        load(tmp_path / "with.npz", target, other)
    with pytest.raises(CheckpointError, match="holds no scheduler state, not ExponentialLR"):
        load(tmp_path / "without.npz", target, other)
    assert_untouched(before, target, other)


def test_scheduler_is_restored_when_the_optimizer_state_fails(tmp_path):
    """The scheduler is loaded first; if the optimizer's state then fails, it is put back."""
    S, _ = saved_adam_with_step_lr(tmp_path / "c.npz")

    def bad_state(m):
        m["optimizer_state"]["param_groups"][0]["betas"] = {"__tuple__": [2.0, 0.5]}

    rewrite(tmp_path / "c.npz", tmp_path / "bad.npz", edit_manifest=bad_state, fix_digest=True)
    target, target_params = build("Adam", {}, seed=2)
    target_sched = S.StepLR(target, step_size=3, gamma=0.7)
    run(target, target_params, "Adam", range(2), target_sched)
    before = snapshot(target, target_sched)
    with pytest.raises(CheckpointError, match="beta"):
        load(tmp_path / "bad.npz", target, target_sched)
    assert_untouched(before, target, target_sched)


def test_big_table_benchmark_runs_at_a_tiny_size(tmp_path):
    """benchmarks/big_table_memory.py (not run in CI at full size) still works."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "big_table_memory", REPO / "benchmarks" / "big_table_memory.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    report = bench.run(rows=5000, dim=4, steps=5, density=0.01,
                       checkpoint=str(tmp_path / "t.npz"))
    assert report["params_MB"] > 0 and report["state_MB"] == 2 * report["params_MB"]
    assert report["lookups_per_step"] == 50 and report["file_MB"] > report["state_MB"]
    assert report["step_peak_traced_MB_max"] < report["params_MB"]


def test_nonfinite_policy_and_skipped_steps_are_restored(tmp_path):
    opt, params = build("Adam", {})
    if not hasattr(opt, "nonfinite"):
        pytest.skip("no non-finite policy")
    opt.nonfinite = "skip"
    bad = gradients(params, 0)
    bad[0][0, 0] = np.nan
    opt.step(bad)
    opt.step(bad)
    assert opt.skipped_steps == 2
    save(tmp_path / "c.npz", opt)
    other, _ = build("Adam", {}, seed=4)
    load(tmp_path / "c.npz", other)
    assert other.nonfinite == "skip" and other.skipped_steps == 2

    def bad_setting(m):
        m["settings"]["nonfinite"] = "ignore"

    rewrite(tmp_path / "c.npz", tmp_path / "bad.npz", edit_manifest=bad_setting,
            fix_digest=True)
    target, _ = build("Adam", {}, seed=5)
    before = snapshot(target)
    with pytest.raises(CheckpointError, match="bad optimizer setting nonfinite='ignore'"):
        load(tmp_path / "bad.npz", target)
    assert_untouched(before, target)
    assert target.nonfinite == "propagate" and target.skipped_steps == 0
