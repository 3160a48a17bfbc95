"""``npoptim check``: the golden suite run straight through another implementation.

* torch's own optimizers (CPU, defaults) pass on a sample of their cases; optax's and Keras's
  on a sample of their flavors' cases (every case: the command in docs/checking.md);
* torch optimizers with a planted mistake, written here in plain torch (not through npoptim's
  switches nor its catalogue), fail, and ``diagnose`` names the mistake first;
* a ``make_step`` in plain NumPy passes or fails the same way, without any framework;
* the command line: its report, its exit status and its usage errors.
"""
import sys

import numpy as np
import pytest

from npoptim import registry
from npoptim.check import run as check_run
from npoptim.frameworks.known_bugs import BUGS, known_bug
from npoptim.check.spec import UsageError
from npoptim.cli import main
from npoptim.golden.suite import suite_path

SUITE = str(suite_path())
#: torch's optimizers: the npoptim optimizers with a torch.optim counterpart
TORCH_OPTIMIZERS = [name for name, (_, torch_name) in registry.OPTIMIZERS.items() if torch_name]


def _check(kind, target, optimizer=None, ids=None, sample=None, diagnose=True):
    impl = check_run.implementation(kind, target, optimizer)
    cases = check_run.cases_for(impl, SUITE, ids)
    assert cases, (target, ids)
    if sample:
        cases = cases[:sample] + [c for c in cases[sample:] if "csr" in c.tags][:1]
    return check_run.run(impl, cases, SUITE, diagnose=diagnose)


def _report(outcome):
    return check_run.format_check(outcome, summary=True)


def test_torch_s_15_optimizers_are_those_with_a_torch_name():
    assert len(TORCH_OPTIMIZERS) == 15


# ---------------------------------------------------------------- the frameworks' own pass
@pytest.mark.needs("torch")
@pytest.mark.parametrize("name", TORCH_OPTIMIZERS)
def test_torch_optimizers_pass_a_sample_of_their_cases(name):
    outcome = _check("torch", f"torch.optim:{name}", sample=2, diagnose=False)
    assert outcome.implementation.optimizer == name
    ran = [r for r in outcome.reports if r.status != "skipped"]
    assert ran and not outcome.failed, _report(outcome)


@pytest.mark.needs("torch")
def test_torch_sparse_gradients_reach_sparse_adam_as_sparse_coo():
    outcome = _check("torch", "torch.optim:SparseAdam",
                     ids=["SparseAdam/csr-explicit-zeros/*", "SparseAdam/csr-duplicates/*"],
                     diagnose=False)
    assert len(outcome.reports) == 4 and all(r.passed for r in outcome.reports), \
        _report(outcome)


@pytest.mark.needs("torch")
def test_torch_foreach_asgd_is_a_known_bug_on_its_path_only():
    """torch's foreach ASGD (its default off the CPU) fails ASGD's float64 cases: a known bug
    on that call path, not a failure; on the CPU's default path it passes."""
    import torch
    assert known_bug("torch", "ASGD/defaults/float64", "foreach=True")
    assert not known_bug("torch", "ASGD/defaults/float64")

    class ForeachASGD(torch.optim.ASGD):  # the foreach path, on the CPU
        def __init__(self, params, **kwargs):
            super().__init__(params, **kwargs, foreach=True)
    impl = check_run.implementation("torch", ForeachASGD)
    impl.call_path = "foreach=True"  # what check_run.implementation says on CUDA
    cases = check_run.cases_for(impl, SUITE, ["ASGD/defaults/*"])
    outcome = check_run.run(impl, cases, SUITE)
    assert list(outcome.known) == ["ASGD/defaults/float64"] and not outcome.failed
    assert "KNOWN torch bugs (not failures): 1" in _report(outcome)
    assert outcome.diagnosis is None


@pytest.mark.needs("optax", "jax")
@pytest.mark.parametrize("factory,optimizer,ids", [
    ("optax:adam", "Adam", ["Adam/defaults/float64", "Adam/lr-schedule/*"]),
    ("optax:amsgrad", "Adam", ["Adam/optax/amsgrad/*"]),
    ("optax:sgd", "SGD", ["SGD/lr-schedule/*"]),
    ("optax:rmsprop", "RMSprop", ["RMSprop/optax/defaults/*", "RMSprop/optax/centered/*"])])
def test_optax_passes_a_sample_of_its_flavor_s_cases(factory, optimizer, ids):
    outcome = _check("optax", factory, ids=ids, diagnose=False)
    assert outcome.implementation.optimizer == optimizer
    ran = [r for r in outcome.reports if r.status != "skipped"]
    assert len(ran) >= 2 and not outcome.failed, _report(outcome)


@pytest.mark.needs("optax", "jax")
def test_optax_rprop_s_listed_bug_is_known_not_failed():
    outcome = _check("optax", "optax:rprop", ids=["Rprop/defaults/*"])
    assert sorted(outcome.known) == ["Rprop/defaults/float32", "Rprop/defaults/float64"]
    assert not outcome.failed and outcome.diagnosis is None
    assert "KNOWN optax bugs (not failures): 2 case(s)" in _report(outcome)


@pytest.mark.needs("keras", "jax")
@pytest.mark.filterwarnings("ignore:Gradients do not exist:UserWarning")
@pytest.mark.parametrize("cls,optimizer", [("keras.optimizers:Adam", "Adam"),
                                           ("keras.optimizers:SGD", "SGD")])
def test_keras_passes_a_sample_of_its_flavor_s_cases(cls, optimizer):
    outcome = _check("keras", cls, ids=[f"{optimizer}/keras/*"], sample=3, diagnose=False)
    assert outcome.implementation.optimizer == optimizer
    ran = [r for r in outcome.reports if r.status != "skipped"]
    assert ran and not outcome.failed, _report(outcome)


# ------------------------------------------------------------------- planted mistakes
def _planted():
    """torch optimizers with one classic mistake each, written from the algorithms' papers and
    torch's docs in plain torch: ``{name: (class, npoptim optimizer, case globs, the
    catalogue entry diagnose must name first)}``."""
    import torch

    class Plain(torch.optim.Optimizer):
        """The keywords the golden cases pass; a value these classes do not implement is
        refused (ValueError: the case is skipped). Each step hands every parameter with a
        gradient (negated for ``maximize``, with L2 decay ``weight_decay * p`` added) to
        ``update(p, g, group, state)``."""
        OWN = {}

        def __init__(self, params, **kwargs):
            for key, value in kwargs.items():
                if key not in self.OWN and value not in (False, 0, 0.0):
                    raise ValueError(f"{type(self).__name__} has no {key}={value!r}")
            super().__init__(params, {**self.OWN, **{k: v for k, v in kwargs.items()
                                                     if k in self.OWN}})

        @torch.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        g = -p.grad if group.get("maximize") else p.grad
                        if group.get("weight_decay"):
                            g = g + group["weight_decay"] * p
                        self.update(p, g, group, self.state[p])

    def moments(s, p, g, b1, b2):
        """Adam's step count and moment averages in the state ``s`` of ``p``."""
        if not s:
            s.update(t=0, m=torch.zeros_like(p), v=torch.zeros_like(p))
        s["t"] += 1
        s["m"] = b1 * s["m"] + (1 - b1) * g
        s["v"] = b2 * s["v"] + (1 - b2) * g * g
        return s["t"], s["m"], s["v"]

    class AdamNoBiasCorrectionOfM(Plain):
        OWN = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
        M_CORRECTED = False

        def update(self, p, g, group, s):
            b1, b2 = group["betas"]
            t, m, v = moments(s, p, g, b1, b2)
            m_hat = m / (1 - b1 ** t) if self.M_CORRECTED else m
            v_hat = v / (1 - b2 ** t)
            p -= group["lr"] * m_hat / (v_hat.sqrt() + group["eps"])

    class AdamWWithL2(AdamNoBiasCorrectionOfM):
        """Adam, bias-corrected, with AdamW's weight decay through the gradient (L2, as
        :class:`Plain` adds it), not decoupled."""
        OWN = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)
        M_CORRECTED = True

    class SGDNesterovToggled(Plain):
        OWN = dict(lr=1e-3, momentum=0.0, dampening=0.0, nesterov=False, weight_decay=0.0)

        def update(self, p, g, group, s):
            mu = group["momentum"]
            s["buf"] = g.clone() if "buf" not in s else (
                mu * s["buf"] + (1 - group["dampening"]) * g)
            # the flag read the wrong way round
            p -= group["lr"] * (s["buf"] if group["nesterov"] else g + mu * s["buf"])

    class RMSpropEpsInsideTheRoot(Plain):
        OWN = dict(lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0)

        def update(self, p, g, group, s):
            a = group["alpha"]
            s["v"] = a * s.get("v", torch.zeros_like(p)) + (1 - a) * g * g
            p -= group["lr"] * g / (s["v"] + group["eps"]).sqrt()

    class AdagradEpsInsideTheRoot(Plain):
        OWN = dict(lr=1e-2, eps=1e-10, weight_decay=0.0)

        def update(self, p, g, group, s):
            s["sum"] = s.get("sum", torch.zeros_like(p)) + g * g
            p -= group["lr"] * g / (s["sum"] + group["eps"]).sqrt()

    class SparseAdamWithAdamsEps(Plain):
        """Lazy Adam over the stored entries of a sparse gradient, with eps added to
        sqrt(v_hat) as dense Adam does (torch's SparseAdam adds it to sqrt(v))."""
        OWN = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8)

        def update(self, p, g, group, s):
            b1, b2 = group["betas"]
            g = g.coalesce()
            where, values = tuple(g.indices()), g.values()
            if not s:
                s.update(t=0, m=torch.zeros_like(p), v=torch.zeros_like(p))
            s["t"] += 1
            m = s["m"][where] = b1 * s["m"][where] + (1 - b1) * values
            v = s["v"][where] = b2 * s["v"][where] + (1 - b2) * values * values
            v_hat = v / (1 - b2 ** s["t"])
            p[where] -= group["lr"] * (m / (1 - b1 ** s["t"])) / (v_hat.sqrt() + group["eps"])

    return {
        "Adam without bias correction of m": (
            AdamNoBiasCorrectionOfM, "Adam",
            ["Adam/defaults/float64", "Adam/lr-schedule/float64", "Adam/weight-decay/float64"],
            "no bias correction of m"),
        "AdamW with L2 decay": (
            AdamWWithL2, "AdamW", ["AdamW/defaults/float64", "AdamW/weight-decay/float64"],
            "L2 decay instead of decoupled"),
        "SGD with nesterov read the wrong way round": (
            SGDNesterovToggled, "SGD",
            ["SGD/momentum/float64", "SGD/nesterov-lr-schedule/float64"],
            "Nesterov toggled (SGD)"),
        "RMSprop with eps inside the root": (
            RMSpropEpsInsideTheRoot, "RMSprop",
            ["RMSprop/defaults/float64", "RMSprop/eps-dominated/float64"],
            "eps inside the square root (RMSprop)"),
        "Adagrad with eps inside the root": (
            AdagradEpsInsideTheRoot, "Adagrad",
            ["Adagrad/defaults/float64", "Adagrad/eps-dominated/float64"],
            "eps inside the square root (Adagrad)"),
        "SparseAdam with Adam's eps": (
            SparseAdamWithAdamsEps, "SparseAdam",
            ["SparseAdam/eps-dominated/float64", "SparseAdam/csr-embedding/float64"],
            "eps on sqrt(v_hat) (Adam's placement in SparseAdam)"),
    }


PLANTED = ["Adam without bias correction of m", "AdamW with L2 decay",
           "SGD with nesterov read the wrong way round", "RMSprop with eps inside the root",
           "Adagrad with eps inside the root", "SparseAdam with Adam's eps"]


@pytest.mark.needs("torch")
@pytest.mark.parametrize("mistake", PLANTED)
def test_a_planted_mistake_fails_and_is_diagnosed_first(mistake):
    cls, optimizer, ids, entry = _planted()[mistake]
    outcome = _check("torch", cls, optimizer, ids)
    report = _report(outcome)
    assert len(outcome.failed) >= 1, report
    assert all(r.status != "skipped" for r in outcome.reports), report
    (diagnosis,) = outcome.diagnoses
    assert diagnosis.verdict == "reproduced", report
    assert diagnosis.candidates[0].entry.name == entry, report
    assert f"1. {entry}" in report


# --------------------------------------------------------- a make_step, no framework
def _numpy_adam(bias_correction_of_m=True):
    """Adam in plain NumPy (the torch docs' algorithm), as a make_step."""
    def make_step(params, hyper):
        b1, b2 = hyper["betas"]
        m = [np.zeros_like(p) for p in params]
        v = [np.zeros_like(p) for p in params]
        t = [0]

        def step(grads, lr):
            t[0] += 1
            for p, g, m_, v_ in zip(params, grads, m, v):
                g = g + hyper["weight_decay"] * p
                m_[...] = b1 * m_ + (1 - b1) * g
                v_[...] = b2 * v_ + (1 - b2) * g * g
                m_hat = m_ / (1 - b1 ** t[0]) if bias_correction_of_m else m_
                p -= lr * m_hat / (np.sqrt(v_ / (1 - b2 ** t[0])) + hyper["eps"])
            return params, [{"exp_avg": a, "exp_avg_sq": b} for a, b in zip(m, v)]
        return step
    return make_step


ADAM_PLAIN = ["Adam/defaults/float64", "Adam/lr-schedule/float64"]


def test_a_numpy_make_step_passes_and_its_state_is_compared():
    outcome = _check("callable", _numpy_adam(), "adam", ADAM_PLAIN)
    assert not outcome.failed and len(outcome.reports) == 2, _report(outcome)
    assert all(names == ["exp_avg", "exp_avg_sq"] for names in outcome.state.values())
    assert "exp_avg, exp_avg_sq: 2 case(s)" in _report(outcome)


def test_a_numpy_make_step_with_a_mistake_is_diagnosed():
    outcome = _check("callable", _numpy_adam(bias_correction_of_m=False), "Adam", ADAM_PLAIN)
    assert len(outcome.failed) == 2
    assert outcome.diagnoses[0].candidates[0].entry.name == "no bias correction of m"
    assert "reproduced by" in _report(outcome)


def test_a_make_step_that_raises_fails_its_case_with_the_error():
    def make_step(params, hyper):
        def step(grads, lr):
            raise ZeroDivisionError("planted")
        return step
    outcome = _check("callable", make_step, "Adam", ADAM_PLAIN[:1], diagnose=False)
    (report,) = outcome.reports
    assert report.status == "error" and "ZeroDivisionError: planted" in report.message
    assert outcome.failed


def test_known_bugs_ship_in_the_package_and_name_their_cases():
    from npoptim.frameworks import known_bugs
    assert known_bugs.PATH.parent.name == "frameworks" and known_bugs.PATH.exists()
    assert all({"framework", "version", "optimizer", "cases", "what"} <= set(b) for b in BUGS)
    assert known_bug("optax", "Rprop/defaults/float64")["optimizer"] == "Rprop"
    assert known_bug("tfjs", "Adam/tfjs/null-and-zero-grads/float32") is None
    assert known_bug("tfjs", "Adam/tfjs/null-and-zero-grads/float32", "variable-left-out")


# ------------------------------------------------------------------------ command line
@pytest.mark.needs("torch")
def test_cli_check_passes_torch_adam_and_says_what_it_compared(capsys):
    code = main(["check", "--torch", "torch.optim:Adam", "--case", "Adam/amsgrad/*",
                 "--case", "Adam/defaults/float64", "--summary"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "OK: all 3 cases pass" in out
    assert "ran 3 case(s), skipped 0, failed 0, known bugs 0; state compared:" in out
    assert "exp_avg, exp_avg_sq, max_exp_avg_sq, step: 2 case(s)" in out


@pytest.mark.needs("torch")
def test_cli_check_of_a_planted_mistake_exits_1_with_the_diagnosis(tmp_path, capsys,
                                                                   monkeypatch):
    (tmp_path / "planted_adagrad.py").write_text(
        "import torch\n\n\n"
        "class Adagrad(torch.optim.Optimizer):\n"
        "    def __init__(self, params, lr=1e-2, eps=1e-10, **kwargs):\n"
        "        super().__init__(params, dict(lr=lr, eps=eps))\n\n"
        "    @torch.no_grad()\n"
        "    def step(self, closure=None):\n"
        "        for group in self.param_groups:\n"
        "            for p in group['params']:\n"
        "                s = self.state[p]\n"
        "                s['sum'] = s.get('sum', 0) + p.grad * p.grad\n"
        "                p -= group['lr'] * p.grad / (s['sum'] + group['eps']).sqrt()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    code = main(["check", "--torch", "planted_adagrad:Adagrad", "--case",
                 "Adagrad/eps-dominated/float64", "--case", "Adagrad/defaults/float64",
                 "--summary"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "FAILED: 2 of 2 cases do not pass" in out
    assert "1. eps inside the square root (Adagrad)" in out
    assert "sum: 2 case(s)" in out  # torch's name for the accumulator; no step count


@pytest.mark.parametrize("argv,message", [
    (["--callable", "no_colon"], "--callable takes MODULE:NAME"),
    (["--callable", "npoptim.nosuchmodule:f"], "cannot import 'npoptim.nosuchmodule'"),
    (["--callable", "npoptim.testing:nosuch"], "module 'npoptim.testing' has no 'nosuch'"),
    (["--callable", "npoptim.testing:npoptim_step"], "say which optimizer's cases"),
    (["--callable", "npoptim.testing:__all__", "--optimizer", "Adam"], "is not callable"),
    (["--callable", "npoptim.testing:npoptim_step", "--optimizer", "Adamm"],
     "unknown optimizer 'Adamm' (did you mean 'Adam'?)"),
])
def test_cli_check_usage_errors_exit_2(argv, message, capsys):
    assert main(["check", *argv]) == 2
    assert message in capsys.readouterr().err


def test_cli_check_needs_one_implementation(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["check", "--optimizer", "Adam"])
    assert exc.value.code == 2
    assert "one of the arguments --torch --optax --keras --callable is required" in \
        capsys.readouterr().err


@pytest.mark.needs("torch")
@pytest.mark.parametrize("argv,message", [
    (["--torch", "torch.optim:Adamm"], "module 'torch.optim' has no 'Adamm'"),
    (["--torch", "npoptim:Adam"], "is not a torch.optim.Optimizer subclass"),
    (["--torch", "torch.optim:Adam", "--case", "nothing/*"], "no case of Adam matches"),
])
def test_cli_check_torch_usage_errors_exit_2(argv, message, capsys):
    assert main(["check", *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.needs("torch")
def test_a_class_of_no_known_name_needs_optimizer_and_a_suffix_names_it():
    import torch

    class Mine(torch.optim.Optimizer):
        pass

    class FusedAdamW(torch.optim.Optimizer):
        pass
    with pytest.raises(UsageError, match="say it with --optimizer NAME"):
        check_run.implementation("torch", Mine)
    assert check_run.implementation("torch", Mine, "sgd").optimizer == "SGD"
    assert check_run.implementation("torch", FusedAdamW).optimizer == "AdamW"


@pytest.mark.parametrize("flag,target,package", [("--torch", "torch.optim:Adam", "torch"),
                                                 ("--optax", "optax:adam", "optax"),
                                                 ("--keras", "keras.optimizers:Adam", "keras")])
def test_cli_check_names_the_package_a_missing_framework_is(flag, target, package, capsys,
                                                           monkeypatch):
    monkeypatch.setitem(sys.modules, package, None)  # import raises ImportError
    assert main(["check", flag, target]) == 2
    assert f"{flag} needs {package}" in capsys.readouterr().err
