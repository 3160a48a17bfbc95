"""npoptim's emulated summation orders against torch's, as recorded on each kind of CPU.

torch's float64 ``dot`` and ``sum`` and its bfloat16 matrix products add in an order that
depends on the CPU (see :mod:`cpu_probe`). These tests need no torch: they check npoptim's
emulation against torch's outputs recorded on every kind of CPU met so far
(``tests/data/torch_cpu_records.json``), so both branches of the probe are exercised on any
machine: on a kind whose order npoptim emulates, LBFGS must equal torch's recorded runs bit
for bit (before the first step at which torch's line search took a square root that is not
correctly rounded, if any was recorded); on any kind, it must stay within torch's own
sensitivity to its order; and a wrong LBFGS (one curvature pair dropped, ``H_diag`` from the
step before) must fail both. Every recorded kind is checked on every machine: the probe
inputs and the LBFGS problems are made of exact arithmetic, the same bits everywhere.

Which kinds' probe outputs are compared: only those made from today's probe inputs
(``cpu_probe.PROBE_INPUTS``). The two AMD EPYC kinds (Zen 5 with AVX-512, and AVX2 only) were
recorded with inputs made by ``np.exp``, whose last bits differ between NumPy's AVX-512 and
AVX2 code: their outputs are kept and name the kinds, but are not compared (what their probe
found when recorded is their ``emulated`` entry); their LBFGS runs are compared.
"""
import hashlib
import inspect
import textwrap

import numpy as np
import pytest

import npoptim
from npoptim.optim import lbfgs as lbfgs_module
import cpu_probe
import lbfgs_problems

RECORDED = cpu_probe.load_records()
CURRENT = [kind for kind in RECORDED if cpu_probe.probe_is_current(kind)]
EMULATED = cpu_probe.emulated_outputs()
PARTS = ("dot", "sum", "bf16_matmul")
#: SHA-256 of the probe inputs' bytes, by PROBE_INPUTS: the bits the records were made from
INPUTS_SHA256 = {"exact-1": "e40e91b48ad70dbc957f796acc1fa1e49c77e6a57db595d9e5e697e0bfdf21c8"}


def emulates(kind, parts=("dot", "sum")):
    """Whether torch used npoptim's orders on that kind (by its probe when recorded)."""
    return all(kind["emulated"][part] for part in parts)


def exact_steps(run):
    """The steps of a recorded run compared bit for bit: those before torch's first square
    root that is not correctly rounded."""
    return min(run["sqrt_departures"] or [len(run["params"])])


def unhex(rows):
    return np.array([[float.fromhex(v) for v in row] for row in rows])


def recorded_runs(kinds):
    return [pytest.param(kind, run, id=f"{kind['cpu']['model']}-{run['objective']}-"
                                       f"{run['options']}")
            for kind in kinds for run in kind["runs"]]


def mutant(old, new):
    """An LBFGS whose ``_step`` has ``old`` replaced by ``new`` in its source."""
    source = textwrap.dedent(inspect.getsource(npoptim.LBFGS._step))
    assert source.count(old) == 1, old
    namespace = dict(vars(lbfgs_module))
    exec(compile(source.replace(old, new), lbfgs_module.__file__, "exec"), namespace)
    return type("MutantLBFGS", (npoptim.LBFGS,), {"_step": namespace["_step"]})


MUTANTS = {
    # the third iteration's (y, s) pair is never stored
    "curvature pair dropped": mutant("if ys > 1e-10 or not curvature_condition:",
                                     "if ys > 1e-10 and total_iter != 3:"),
    # H_0 = y's / y'y of the pair before the newest
    "H_diag from the step before": mutant(
        "H_diag = ys / self._dot(y, y)",
        "H_diag, self._next_H = getattr(self, '_next_H', H_diag), ys / self._dot(y, y)"),
}


def test_the_records_name_their_kinds_by_probe():
    assert CURRENT, "no CPU kind recorded with today's probe inputs"
    for kind in RECORDED:
        assert kind["kind"] == cpu_probe.kind_name(kind["probe"], kind["cpu"]["torch_capability"])
        assert {"model", "vector_flags", "torch_capability"} <= set(kind["cpu"])
        assert kind["probe_inputs"] in ("np.exp", cpu_probe.PROBE_INPUTS) and kind["note"]
        assert set(kind["emulated"]) == set(PARTS)
        options = [run["options"] for run in kind["runs"]]
        assert len(options) >= 3 and any("line_search_fn" in o for o in options)
        assert any("line_search_fn" not in o for o in options)


def test_the_probe_inputs_are_the_recorded_bits():
    """The probe inputs are exact arithmetic: the bits the current records were made from,
    on any machine (a CPU-dependent call in probe_inputs() fails this somewhere)."""
    dots, sums, matmuls = cpu_probe.probe_inputs()
    arrays = [v for pair in dots + matmuls for v in pair] + sums
    digest = hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays))
    assert digest.hexdigest() == INPUTS_SHA256[cpu_probe.PROBE_INPUTS]


def test_npoptim_emulates_the_order_of_a_recorded_kind_bit_for_bit():
    """Each emulated order (LBFGS's dot and sum, Muon's oneDNN bfloat16 products) is torch's
    on at least one kind recorded with today's probe inputs, and exactly on those whose
    record says so; the probe's signatures tell the same."""
    for part in PARTS:
        assert any(kind["probe"][part] == EMULATED[part] for kind in CURRENT), part
        for kind in CURRENT:
            same = kind["probe"][part] == EMULATED[part]
            assert same == kind["emulated"][part], (kind["kind"], part)
            assert same == (cpu_probe.signature(kind["probe"], part)
                            == cpu_probe.signature(EMULATED, part))


def test_the_probe_tells_other_orders_apart():
    """The probe is not vacuous: a plain left-to-right dot, NumPy's pairwise sum, and
    torch's own small-matrix loop in place of oneDNN's all give other outputs."""
    from npoptim.kernels.bfloat16 import round_to_bfloat16, to_bfloat16
    from npoptim.optim.muon import _dot_native
    dots, sums, matmuls = cpu_probe.probe_inputs()
    plain_dot = [float(sum((x * y).tolist())).hex() for x, y in dots]
    pairwise = [float(np.sum(x)).hex() for x in sums]
    native = []
    for a, b in matmuls:
        out = np.empty((a.shape[0], b.shape[1]), np.float32)
        _dot_native(to_bfloat16(a), to_bfloat16(b), out)
        native.append(cpu_probe._hex_matrix(round_to_bfloat16(out)))
    assert plain_dot != EMULATED["dot"]
    assert pairwise != EMULATED["sum"]
    assert native != EMULATED["bf16_matmul"]


def test_each_kind_of_order_has_runs_compared_bit_for_bit():
    """Not vacuous: the kinds whose order npoptim emulates, recorded with the probe inputs of
    before and of today, have runs compared bit for bit over several steps."""
    for inputs in ("np.exp", cpu_probe.PROBE_INPUTS):
        kinds = [k for k in RECORDED if k["probe_inputs"] == inputs and emulates(k)]
        assert kinds and all(exact_steps(run) >= 3 for k in kinds for run in k["runs"]), inputs


def test_the_lane_probe_tells_widths_apart():
    """cpu_probe.half_lanes's reading of torch's outputs: masks of the elements the scalar code
    computed, for tensors of 1 to 256 elements, as widths 16 and 32 and no vector loop at all
    make them (and one a vector loop with a partial last vector would)."""
    def masks(tail):
        return [np.arange(n) >= n - tail(n) for n in range(1, 257)]

    assert cpu_probe.lanes_explaining(masks(lambda n: n % 16)) == 16
    assert cpu_probe.lanes_explaining(masks(lambda n: n % 32)) == 32
    assert cpu_probe.lanes_explaining(masks(lambda n: n)) is None
    assert cpu_probe.lanes_explaining(masks(lambda n: 0)) == 1
    assert cpu_probe.lanes_explaining(masks(lambda n: n % 32 if n % 32 > 8 else 0)) is None


@pytest.mark.parametrize("kind,run", recorded_runs([k for k in RECORDED if emulates(k)]))
def test_lbfgs_equals_torch_bit_for_bit_where_the_order_is_emulated(kind, run):
    ours, losses = lbfgs_problems.trajectory(run["options"], run["objective"], np.float64,
                                             len(run["params"]))
    steps = exact_steps(run)
    np.testing.assert_array_equal(ours[:steps], unhex(run["params"])[:steps])
    assert [float(v).hex() for v in losses[:steps]] == run["losses"][:steps]


@pytest.mark.parametrize("kind,run", recorded_runs(RECORDED))
def test_lbfgs_within_torchs_order_sensitivity_on_every_recorded_kind(kind, run):
    ours, _ = lbfgs_problems.trajectory(run["options"], run["objective"], np.float64,
                                        len(run["params"]))
    reordered = [unhex(r) for r in run["reordered_params"]]
    failures, horizon = lbfgs_problems.order_sensitivity_failures(
        ours, unhex(run["params"]), reordered)
    assert horizon >= 3, "torch's own spread left the rounding regime at once"
    assert not failures


@pytest.mark.parametrize("kind,run", recorded_runs(RECORDED))
def test_another_summation_order_passes_the_sensitivity_check(kind, run, monkeypatch):
    """What a CPU whose torch sums in another order looks like: npoptim with NumPy's dot and
    pairwise sum in place of the emulated ones differs from torch in the last bits, then by
    what L-BFGS makes of them, and must still pass (the check is honest, not only strict)."""
    monkeypatch.setattr(lbfgs_module, "dot", lambda x, y: np.float64(np.dot(x, y)))
    monkeypatch.setattr(lbfgs_module, "torch_sum", lambda x: x.dtype.type(np.sum(x)))
    ours, _ = lbfgs_problems.trajectory(run["options"], run["objective"], np.float64,
                                        len(run["params"]))
    theirs = unhex(run["params"])
    failures, _ = lbfgs_problems.order_sensitivity_failures(
        ours, theirs, [unhex(r) for r in run["reordered_params"]])
    assert not failures
    if emulates(kind):  # not vacuous: the order did change the result
        assert np.any(ours[:exact_steps(run)] != theirs[:exact_steps(run)])


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_a_wrong_lbfgs_fails_both_comparisons_on_every_recorded_kind(name):
    for kind in RECORDED:
        caught_exact = caught_sensitivity = 0
        for run in kind["runs"]:
            steps = len(run["params"])
            wrong, _ = lbfgs_problems.trajectory(run["options"], run["objective"], np.float64,
                                                 steps, lbfgs=MUTANTS[name])
            theirs = unhex(run["params"])
            caught_exact += float(np.max(lbfgs_problems.scaled_errors(wrong, theirs))) > 1e-12
            failures, _ = lbfgs_problems.order_sensitivity_failures(
                wrong, theirs, [unhex(r) for r in run["reordered_params"]])
            caught_sensitivity += bool(failures)
        assert caught_exact == len(kind["runs"]), (kind["kind"], caught_exact)
        assert caught_sensitivity == len(kind["runs"]), (kind["kind"], caught_sensitivity)


@pytest.mark.needs("torch")
def test_this_machine_is_a_recorded_kind_or_says_which_it_is():
    """With torch here: the live probe agrees with the record of this machine's kind, if the
    file has it; a kind it does not have is reported (record it with record_torch_cpu.py)."""
    live = cpu_probe.torch_outputs()
    name = cpu_probe.kind_name(live, cpu_probe.cpu_description()["torch_capability"])
    print(f"machine kind {name}: {cpu_probe.describe_probe()}")
    for kind in CURRENT:
        if kind["kind"] == name:
            assert kind["probe"] == live
            assert kind["emulated"] == {part: cpu_probe.probe()[part] for part in PARTS}
            assert kind["half_lanes"] == cpu_probe.half_lanes()
            return
    pytest.skip(f"this CPU kind ({name}) is not in tests/data/torch_cpu_records.json: "
                "run python tests/record_torch_cpu.py here and commit the file")
