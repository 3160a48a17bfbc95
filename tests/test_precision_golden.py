"""The bfloat16/float16 golden cases (reference_results/cases/precision, schema version 3):
each replayed through the library it reproduces via npoptim.testing (torch 2.13 CPU for per-op,
fused and master weights, torch-optimi for Kahan, torchao 0.18 for the float32 quantized-state
case) with 0 ULP (quantized: bit for bit); the ULP tolerance passes a
neighbouring value and fails the other rounding mode; the loader's and JSON Schema's checks
of the new fields; regeneration; npoptim.testing reading both the 16-bit and float cases."""
import copy
import dataclasses
import importlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse

from npoptim import testing
from npoptim.golden import (cases, codec, compare, generate, precision_cases, regenerate, schema,
                            verify as verification)
from npoptim.golden.replay import (QUANTIZATIONS, mode_of, npoptim_make_step, replay,
                                   results_file)

ml_dtypes = pytest.importorskip("ml_dtypes")

ROOT = Path(__file__).resolve().parents[1]
PRECISION = ROOT / "reference_results" / "cases" / "precision"
CASES = testing.load_cases(PRECISION, flavor="all")


def _by_mode(*modes):
    return [c for c in CASES if mode_of(c.precision) in modes]


@pytest.mark.parametrize("name", list(precision_cases.TABLE))
def test_committed_precision_file_equals_fresh_generation(name):
    path = PRECISION / f"{name}.json"
    fresh = codec.dumps(precision_cases.build_files([name])[name])
    assert path.exists() and path.read_text(encoding="utf-8") == fresh, (
        f"{path} differs from a fresh generation: run python -m npoptim.golden.regenerate")
    assert json.loads(fresh)["schema_version"] == 3


def test_a_16_bit_row_is_a_case_row_with_a_mode():
    """The torch, flavor and 16-bit families declare rows of one type, cases.Row: a 16-bit row
    has a precision_mode (the size budget's active and state_every need one), is in the torch
    flavor, and only precision_cases builds it."""
    row = precision_cases.TABLE["SparseAdam"][0]
    assert type(row) is cases.Row and (row.precision_mode, row.state_every) == ("per-op", 5)
    with pytest.raises(ValueError, match="precision_mode"):
        dataclasses.replace(row, precision_mode=None)
    with pytest.raises(ValueError, match="torch flavor"):
        dataclasses.replace(row, flavor="keras")
    with pytest.raises(ValueError, match="precision_cases.build_case"):
        generate.build_case(row, "bfloat16")


def test_the_suite_has_every_mode_in_both_formats():
    modes = {(mode_of(c.precision), c.dtype) for c in CASES}
    for mode in set(precision_cases.MODES) - set(QUANTIZATIONS):
        assert (mode, "bfloat16") in modes, mode
    assert ("torchao-8bit", "float32") in modes
    for mode in ("per-op", "fused", "master-weights", "kahan"):
        assert (mode, "float16") in modes, mode
    flags = {f for c in CASES for f in c.flags}
    assert {"per-op-rounding", "fused-rounding", "stochastic-rounding", "master-weights",
            "kahan", "none-grad", "quantized-state"} <= flags
    for case in CASES:  # no torch CPU scalar tail (see precision_cases)
        assert all(p.size % 32 == 0 for p in case.params), case.id
        assert len(case.steps) >= 10


def test_npoptim_passes_its_16_bit_cases_and_float_cases_still_load():
    reports, notes = verification.verify(PRECISION, flavors=["all"])
    assert all(r.passed for r in reports) and len(reports) == len(CASES) and not notes
    assert all(s.max_ulp == 0 for r in reports for s in r.steps)
    float_case = testing.load_cases(optimizer="Adam", ids="Adam/defaults/float32")[0]
    assert float_case.precision is None and float_case.tolerance.ulp is None
    testing.assert_case(float_case, testing.npoptim_step(float_case))


# ----------------------------------------------------------------- against the libraries
def _torch():
    from torch_compare import torch
    if torch is None:
        pytest.skip("torch is not installed")
    return torch


def _as_torch(torch, array):
    return torch.from_numpy(array.view(np.int16).copy()).view(getattr(torch, str(array.dtype)))


def _from_torch(torch, tensor, dtype):
    if tensor.dtype in (torch.bfloat16, torch.float16):
        return tensor.detach().view(torch.int16).numpy().copy().view(dtype)
    return tensor.detach().numpy().copy()


def _as_torch_grad(torch, grad, param):
    """A case's gradient as torch's: dense, or (CSR) the uncoalesced sparse COO gradient of
    the stored entries in stored order, duplicates left for torch's SparseAdam to sum."""
    if not scipy.sparse.issparse(grad):
        return _as_torch(torch, grad).to(param.dtype)
    rows = np.repeat(np.arange(grad.shape[0]), np.diff(grad.indptr))
    index = np.stack(np.unravel_index(rows * grad.shape[1] + grad.indices, tuple(param.shape)))
    return torch.sparse_coo_tensor(torch.from_numpy(index), _as_torch(torch, grad.data),
                                   tuple(param.shape), check_invariants=True)


def torch_make_step(case, library):
    """make_step (npoptim.testing's protocol) running the case in torch 2.13 (or optimi)."""
    torch = _torch()
    mode = mode_of(case.precision)

    def make_step(params, hyper):
        dtype = params[0].dtype
        model = [_as_torch(torch, p) for p in params]
        if mode == "master-weights":
            tparams = [m.float() for m in model]
        else:
            tparams = model
        if mode == "kahan":
            opt = getattr(library, case.optimizer)(tparams, kahan_sum=True, **hyper)
        else:
            path = {"fused": dict(fused=True), "per-op": dict(foreach=False)}.get(mode, {})
            if case.optimizer in precision_cases.SINGLE_TENSOR_ONLY:
                path = {}  # (torch's Muon, LBFGS and SparseAdam have no foreach option)
            opt = getattr(torch.optim, case.torch_name)(tparams, **hyper, **path)

        def step(grads, lr):
            for group in opt.param_groups:
                group["lr"] = lr
            if callable(grads):  # a closure-driven case: the objective at torch's params
                def closure():
                    for p, t in zip(params, tparams):
                        p[...] = _from_torch(torch, t, dtype)
                    loss, gs = grads()
                    for t, g in zip(tparams, gs):
                        t.grad = _as_torch(torch, np.ascontiguousarray(g))
                    return loss
                opt.step(closure)
                return [_from_torch(torch, m, dtype) for m in model], [
                    _closure_state(torch, opt.state.get(p), dtype) for p in tparams]
            for p, g in zip(tparams, grads):
                p.grad = None if g is None else _as_torch_grad(torch, g, p)
            opt.step()
            if mode == "master-weights":
                with torch.no_grad():
                    for m, p in zip(model, tparams):
                        m.copy_(p)
            state = []
            for p in tparams:
                s = opt.state.get(p)
                state.append(None if not s else {
                    k: (_from_torch(torch, v, dtype) if torch.is_tensor(v) and v.dim() else
                        int(v) if k == "step" else v)
                    for k, v in s.items() if k != "step" or mode != "kahan"})
            return [_from_torch(torch, m, dtype) for m in model], state
        return step
    return make_step


def _closure_state(torch, state, dtype):
    """LBFGS's torch state with its tensors (0-d ones too, in lists) as NumPy arrays."""
    def convert(v):
        if isinstance(v, list):
            return [convert(x) for x in v]
        return _from_torch(torch, v, dtype) if torch.is_tensor(v) else v
    return None if not state else {k: convert(v) for k, v in state.items()}


@pytest.mark.needs("torch")
@pytest.mark.parametrize("case", _by_mode("per-op", "fused", "master-weights"), ids=str)
def test_torch_reproduces_the_case(case):
    """Per-op (foreach=False) and fused (fused=True) on 16-bit tensors: every param and state
    array bit for bit (0 ulp). Master weights: torch's float32 masters and copy_, within the
    case's tolerance (float32 masters agree to a few float32 ulps, most bit for bit)."""
    report = testing.assert_case(case, torch_make_step(case, None))
    assert report.state_compared
    if mode_of(case.precision) != "master-weights":
        assert all(s.max_ulp == 0 for s in report.steps), case.id


@pytest.mark.needs("torch", "optimi")
@pytest.mark.parametrize("case", _by_mode("kahan"), ids=str)
def test_optimi_reproduces_the_kahan_case(case):
    optimi = pytest.importorskip("optimi")
    report = testing.assert_case(case, torch_make_step(case, optimi))
    assert report.state_compared and all(s.max_ulp == 0 for s in report.steps), case.id


SPARSE = [c for c in CASES if "csr" in c.tags]


def test_the_16_bit_csr_cases_hold_what_they_test():
    """bfloat16 and float16 SparseAdam with CSR gradients in the 16-bit type: duplicates, an
    unsorted row, an explicit zero, untouched rows, at most 16 entries a step (torch's stored
    order, below), the state every 5th step; summing the duplicates in float32 first (one
    rounding) fails the case."""
    assert {c.dtype for c in SPARSE} == set(precision_cases.HALF)
    for case in SPARSE:
        assert case.raw["sparse_kind"] == "lazy" and case.optimizer == "SparseAdam"
        grads = [s.grads[0] for s in case.steps]
        assert all(isinstance(g, codec.CsrGrad) and g.data.dtype == case.params[0].dtype
                   and g.nnz <= 16 for g in grads)
        assert {"duplicate-rows", "unsorted-columns", "cancelling-duplicates",
                "untouched-rows"} <= set(case.flags)
        stored = [t + 1 for t, s in enumerate(case.steps) if s.expected_state is not None]
        assert stored == [5, 10, 15, 20]
        last = case.steps[-1].expected_params[0]
        assert np.array_equal(last[-2:].view(np.uint16), case.params[0][-2:].view(np.uint16))
        report = compare.compare_case(case, _npoptim_results(case, grads=_float32_sums))
        assert report.failed, case.id


def _float32_sums(grad):
    """A CSR gradient with its duplicates summed in float32, rounded once to its type."""
    rows = np.repeat(np.arange(grad.shape[0]), np.diff(grad.indptr))
    total = np.zeros(grad.shape, np.float32)
    np.add.at(total, (rows, grad.indices), grad.data.astype(np.float32))
    stored = np.zeros(grad.shape, bool)
    stored[rows, grad.indices] = True
    r, c = np.nonzero(stored)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(r, minlength=grad.shape[0]))])
    return scipy.sparse.csr_array((total[r, c].astype(grad.dtype), c, indptr),
                                  shape=grad.shape)


@pytest.mark.needs("torch")
def test_torch_sums_duplicates_in_stored_order_only_up_to_16_entries():
    """Why the 16-bit CSR cases store at most 16 entries a step: torch 2.13's CPU
    coalesce() sums duplicates in the 16-bit type in the order its sort of the indices leaves
    them, stable up to 16 entries (stored order, what the format defines), not beyond. The
    sum -0.392578125 + s + s (s below half a bfloat16 ulp of it, 2s above) is -0.396484375 in
    stored order and -0.39453125 with the small ones first (measured)."""
    torch = _torch()
    a, small = -0.392578125, -0.001434326171875

    def coalesced(others):
        index = torch.tensor([[0, 0, 0] + list(range(1, others + 1))])
        values = torch.tensor([a, small, small] + [1.0] * others, dtype=torch.bfloat16)
        return torch.sparse_coo_tensor(index, values, (others + 1,),
                                       check_invariants=True).coalesce().values()[0].item()
    assert coalesced(13) == -0.396484375  # 16 entries: stored order
    assert coalesced(14) == -0.39453125   # 17 entries, sorted input: another order


# ------------------------------------------------------------------------ quantized state
QUANTIZED = _by_mode(*QUANTIZATIONS)
TORCHAO = [c for c in QUANTIZED if c.precision["quantization"].startswith("torchao-")]
BNB = [c for c in QUANTIZED if c.precision["quantization"] == "bnb-8bit"]


def _torchao_optim():
    if os.environ.get("NPOPTIM_REQUIRE_TORCHAO") == "1":  # CI: a broken install fails
        return importlib.import_module("torchao.optim")
    return pytest.importorskip("torchao.optim")


def torchao_make_step(case):
    """make_step running the quantized-state case in torchao 0.18 (CPU, torch.compile); state
    under npoptim's names (torchao's attribute names: ``exp_avg.codes``, ...)."""
    optim = _torchao_optim()
    torch = _torch()
    suffix = QUANTIZATIONS[mode_of(case.precision)]

    def make_step(params, hyper):
        tparams = [torch.from_numpy(p.copy()) for p in params]
        opt = getattr(optim, case.optimizer + suffix)(tparams, **hyper)

        def step(grads, lr):
            for group in opt.param_groups:  # torchao keeps lr as a tensor
                group["lr"].fill_(lr)
            for p, g in zip(tparams, grads):
                p.grad = torch.from_numpy(g.copy())
            opt.step()
            state = []
            for p in tparams:
                s = opt.state[p]
                entry = {"step": s["step"].numpy().copy()}
                for moment in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")[:len(s) - 1]:
                    for attr in ("codes", "scale", "qmap"):
                        value = getattr(s[moment], attr, None)
                        if value is not None:
                            if value.dtype == torch.float8_e4m3fn:
                                value = value.view(torch.uint8)
                            entry[f"{moment}.{attr}"] = value.numpy().copy()
                state.append(entry)
            return [p.numpy().copy() for p in tparams], state
        return step
    return make_step


def test_the_quantized_cases_are_quantized_and_keep_their_state_once():
    assert {c.precision["quantization"] for c in QUANTIZED} == set(schema.QUANTIZATIONS)
    for case in QUANTIZED:
        assert case.dtype == "float32" and len(case.steps) >= 10
        assert all(s.expected_state is None for s in case.steps[:-1])
        state = case.steps[-1].expected_state[0]
        codes = [v for k, v in state.items() if k.endswith("codes") or k.startswith("state")]
        assert len(codes) in (2, 3) and all(0 <= c.min() and c.max() <= 255 for c in codes)
        assert all(len(np.unique(c)) > 20 for c in codes), case.id  # really quantized
        for array in [case.params[0]] + [g for s in case.steps for g in s.grads]:
            assert np.array_equal(array, precision_cases.to_grid(array))  # few digits
    by_id = {c.id: c for c in QUANTIZED}
    eight = by_id["AdamW/torchao-8bit/weight-decay/float32"].steps[-1].expected_state[0]
    assert eight["exp_avg.codes"].shape == (16, 256) and eight["exp_avg.scale"].shape == (16,)
    four = by_id["Adam/torchao-4bit/weight-decay/float32"].steps[-1].expected_state[0]
    assert four["exp_avg.codes"].shape == (2048,) and four["exp_avg.scale"].shape == (32,)
    fp8 = by_id["AdamW/torchao-fp8/amsgrad/float32"].steps[-1].expected_state[0]
    assert "max_exp_avg_sq.codes" in fp8 and "exp_avg.qmap" not in fp8
    assert np.any(fp8["max_exp_avg_sq.codes"] != fp8["exp_avg_sq.codes"])
    bnb = by_id["AdamW/bnb-8bit/weight-decay/float32"]
    assert bnb.params[0].size == 352 and bnb.steps[-1].expected_state[0]["absmax1"].size == 2


@pytest.mark.needs("torch", "torchao")
@pytest.mark.parametrize("case", TORCHAO, ids=str)
def test_torchao_reproduces_the_quantized_case(case):
    """torchao's AdamW8bit, Adam4bit, AdamWFp8 with amsgrad (one shape each: one C++ build
    each): params every step and the final codes, scales and maps bit for bit (amsgrad with the
    aten.maximum torchao 0.18 lacks, tests/torchao_compare.py)."""
    from torchao_compare import quantized_maximum
    with quantized_maximum():
        report = testing.assert_case(case, torchao_make_step(case))
    assert report.state_compared
    assert all(s.max_abs == 0 for s in report.steps), case.id


def bnb_make_step():
    """make_step running a bnb-8bit case in bitsandbytes 0.50.2 (CPU), state under its names."""
    if os.environ.get("NPOPTIM_REQUIRE_BITSANDBYTES") == "1":
        bnb = importlib.import_module("bitsandbytes")
    else:
        bnb = pytest.importorskip("bitsandbytes")
    torch = _torch()

    def make_step(params, hyper):
        tparams = [torch.from_numpy(p.copy()) for p in params]
        opt = bnb.optim.AdamW8bit(tparams, **hyper)

        def step(grads, lr):
            for group in opt.param_groups:
                group["lr"] = lr
            for p, g in zip(tparams, grads):
                p.grad = torch.from_numpy(g.copy())
            opt.step()
            state = [{k: (v.numpy().copy() if hasattr(v, "numpy") else v)
                      for k, v in opt.state[p].items()} for p in tparams]
            return [p.numpy().copy() for p in tparams], state
        return step
    return make_step


@pytest.mark.needs("torch", "bitsandbytes")
@pytest.mark.parametrize("case", BNB, ids=str)
def test_bitsandbytes_reproduces_the_quantized_case(case):
    """bitsandbytes' CPU AdamW8bit: the final codes, absmax and maps bit for bit, the params
    within the case's tolerance at every step (measured: within a few float32 ulps)."""
    report = testing.assert_case(case, bnb_make_step())
    assert report.state_compared
    worst = max(s.max_abs for s in report.steps)
    assert worst < 1e-6, worst
    print(f"\n{case.id}: bitsandbytes' params within {worst:.2e} of the case's")


def test_the_quantized_case_fails_unquantized_moments():
    """float32 AdamW (the same math without quantizing the moments) leaves the case's
    tolerance within the first steps, before the stored state is compared."""
    case = next(c for c in QUANTIZED if c.precision["quantization"] == "torchao-8bit")
    def make_step(params, hyper):  # params only: the float32 state has other names
        step = npoptim_make_step(case.optimizer)(
            params, {k: v for k, v in hyper.items()
                     if k not in ("block_size", "bf16_stochastic_round")})
        return lambda grads, lr: (step(grads, lr)[0], [None] * len(params))
    plain = schema.parse(results_file([replay(case, make_step)]), "<r>", "results").cases[0]
    report = compare.compare_case(case, plain)
    assert report.failed and report.divergence.step < len(case.steps)


# ---------------------------------------------------------------------- the ULP tolerance
def _npoptim_results(case, precision=None, grads=None):
    """npoptim's results of ``case`` (in another ``precision`` mode; each gradient passed
    through ``grads`` first)."""
    make = npoptim_make_step(case.optimizer, precision or case.precision)
    if grads is not None:
        inner = make

        def make(params, hyper):
            step = inner(params, hyper)
            return lambda gs, lr: step([None if g is None else grads(g) for g in gs], lr)
    return schema.parse(results_file([replay(case, make)]), "<r>", "results").cases[0]


def test_the_other_rounding_mode_fails_by_many_ulp():
    """per-op cases replayed with fused rounding and fused ones with per-op fail; the worst
    element is many 16-bit units away (what 1 ulp is measured against)."""
    worst = {}
    for case in _by_mode("per-op", "fused"):
        import npoptim.precision as lowp
        if "fused" not in getattr(lowp, case.optimizer).roundings:  # per-op only: SGD, RMSprop
            continue
        other = dict(case.precision, rounding="fused" if case.precision["rounding"] == "per-op"
                     else "per-op")
        report = compare.compare_case(case, _npoptim_results(case, other))
        assert report.failed, case.id
        worst[case.id] = max(s.max_ulp for s in report.steps)
    assert min(worst.values()) >= 2, worst
    print("worst ulp of the other rounding mode:", worst)


def test_one_ulp_passes_two_fail_and_the_report_says_ulp():
    case = next(c for c in CASES if c.id == "AdamW/fused/defaults/bfloat16")
    result = _npoptim_results(case)
    moved = copy.deepcopy(result)
    p = moved.steps[3].params[0]
    p.view(np.uint16).reshape(-1)[5] += 1
    assert compare.compare_case(case, moved).passed
    p.view(np.uint16).reshape(-1)[5] += 1
    report = compare.compare_case(case, moved)
    assert report.failed
    assert "2 ulp > allowed 1 ulp of the 16-bit type" in str(report.divergence)
    assert report.divergence.step == 4


# ------------------------------------------------------------------------------ format
@pytest.fixture(scope="module")
def half_doc():
    doc = json.loads((PRECISION / "AdamW.json").read_text(encoding="utf-8"))
    doc["cases"] = [c for c in doc["cases"] if c["id"] == "AdamW/per-op/defaults/bfloat16"]
    doc["number_of_cases"] = 1
    return doc


DEFECTS = {
    "not a bfloat16 value": (lambda d: d["cases"][0]["params"][0]["data"].__setitem__(0, 0.1),
                             "is not a bfloat16 value"),
    "version 2 with bfloat16": (lambda d: d.__setitem__("schema_version", 2),
                                "schema_version 3 field"),
    "no precision": (lambda d: d["cases"][0].pop("precision"), "precision"),
    "unknown rounding": (lambda d: d["cases"][0]["precision"].__setitem__("rounding", "nearest"),
                         "precision.rounding"),
    "no ulp": (lambda d: d["cases"][0]["tolerance"].pop("ulp"), "tolerance.ulp"),
    "seed without stochastic": (lambda d: d["cases"][0]["precision"].__setitem__("seed", 3),
                                "precision.seed"),
    "quantized bfloat16": (lambda d: d["cases"][0]["precision"].__setitem__(
        "quantization", "torchao-8bit"), "precision.quantization"),
    "unknown quantization": (lambda d: d["cases"][0]["precision"].__setitem__(
        "quantization", "bnb-4bit"), "precision.quantization"),
}


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_loader_refuses_bad_16_bit_cases(half_doc, tmp_path, defect):
    schema.parse(half_doc)  # the file itself loads
    doc = copy.deepcopy(half_doc)
    mutate, where = DEFECTS[defect]
    mutate(doc)
    with pytest.raises(schema.GoldenFileError, match=where):
        schema.parse(doc, tmp_path / "bad.json")


def test_a_float32_case_has_a_precision_object_only_with_a_quantization(tmp_path):
    doc = json.loads((PRECISION / "AdamW.json").read_text(encoding="utf-8"))
    doc["cases"] = [c for c in doc["cases"] if c["precision"].get("quantization")]
    doc["number_of_cases"] = len(doc["cases"])
    schema.parse(doc)
    doc["cases"][0]["precision"]["quantization"] = None
    with pytest.raises(schema.GoldenFileError, match="with a quantization"):
        schema.parse(doc, tmp_path / "bad.json")


def test_json_schema_accepts_the_precision_files_and_refuses_their_defects(half_doc):
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json.loads(regenerate.schema_text()))
    for path in sorted(PRECISION.glob("*.json")):
        errors = list(validator.iter_errors(json.loads(path.read_text(encoding="utf-8"))))
        assert not errors, errors[0].message
    for defect in ("no precision", "unknown rounding", "no ulp", "unknown quantization"):
        doc = copy.deepcopy(half_doc)
        DEFECTS[defect][0](doc)
        assert list(validator.iter_errors(doc)), defect


def test_16_bit_values_are_stored_as_their_exact_numbers():
    arr = np.array([0.1, -3.0, 1e-40, np.inf], np.float32).astype(ml_dtypes.bfloat16)
    enc = codec.encode_array(arr)
    assert enc["dtype"] == "bfloat16"
    assert enc["data"][0] == 0.10009765625 and enc["data"][3] == "Infinity"
    back = codec.decode_array(enc)
    assert back.dtype == arr.dtype and np.array_equal(back.view(np.uint16), arr.view(np.uint16))
    half = np.array([65504, 2 ** -24, -0.0], np.float16)
    assert np.array_equal(codec.decode_array(codec.encode_array(half)).view(np.uint16),
                          half.view(np.uint16))
