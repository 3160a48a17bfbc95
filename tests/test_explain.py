"""``npoptim explain``: the recorded intermediates are the kernels' own, to the bit.

Hand-worked Adam (f = θ², θ₀ = 2, g = 4, lr = 0.1, ε = 0): m = 0.4 (0.3999999999999999 in
float64, as (1 - 0.9) * 4 rounds), v = 0.016, m̂ = 4, v̂ = 16, θ₁ = 1.9.
"""
import json

import numpy as np
import pytest

from npoptim import registry
from npoptim.cli import main
from npoptim.explainer import explain, formula
from npoptim.explainer.trace import python_kernels, recording

X3 = np.array([0.5, -1.25, 2.0])
X33 = np.array([[0.5, -1.25, 2.0], [0.3, -0.7, 1.1], [0.9, 0.2, -0.4]])
#: settings under which each optimizer moves visibly in three steps
SETTINGS = {"Adafactor": {}, "LBFGS": dict(lr=1.0, line_search_fn="strong_wolfe", max_iter=3),
            "Sophia": dict(lr=0.1, hessian_estimate="squared-gradient")}


def first_row(e, step=0, table=0):
    t = e.steps[step].tables[table]
    return t["rows"][0], t["derived"][0]


def test_adam_hand_worked_first_step():
    e = explain("Adam", params=2.0, lr=0.1, eps=0.0)
    row, derived = first_row(e)
    assert row["g"] == 4.0
    assert repr(row["m"]) == "np.float64(0.3999999999999999)" or float(row["m"]) == \
        0.3999999999999999
    assert float(row["m"]) == (1 - 0.9) * 4.0 != 0.4
    assert float(row["v"]) == pytest.approx(0.016, rel=1e-14)
    assert derived["m̂"] == 4.0 and derived["v̂"] == 16.0
    assert float(row["denom"]) == 4.0 and float(row["update"]) == -0.1
    assert float(row["p_new"]) == 1.9 == float(e.final[0][0])
    text = str(e)
    assert "0.3999999999999999" in text and "m̂*" in text and "derived" in text
    assert "(m)/(√v̂/√b_2 + ε)" in text  # the docstring's formula above the table


def test_adam_from_five():
    e = explain("Adam", params=5.0, lr=0.1)
    assert float(e.final[0][0]) == pytest.approx(4.9, abs=1e-8)


@pytest.mark.parametrize("name", list(registry.OPTIMIZERS))
def test_three_explained_steps_end_at_the_bits_of_opt_step(name):
    x0 = X33 if name == "Muon" else X3
    hyper = SETTINGS.get(name, dict(lr=0.1))
    e = explain(name, params=x0, steps=3, **hyper)
    p = x0.copy()
    opt = registry.get(name)([p], **hyper)
    for _ in range(3):
        if opt.needs_closure:
            opt.step(lambda: (float(np.sum(p * p)), [2 * p]))
        elif opt.per_example_grads:
            opt.step([(2 * p)[None]])
        else:
            opt.step([2 * p])
    assert e.final[0].tobytes() == p.tobytes()
    assert not np.array_equal(p, x0)
    assert len(e.steps) == 3
    assert e.steps[0].tables or any(e.steps[0].listings)
    for step in e.steps:  # the per-element tables end at the step's parameters
        for table in step.tables:
            if "p_new" in table["columns"] and table["rule"] not in (
                    "lamb_moments_rule", "galore_moments_rule",
                    "apollo_moments_rule"):   # their "p" is no param
                new = {r["index"]: r["p_new"] for r in table["rows"]}
                after = step.params_after[table["param"]].reshape(-1)
                assert all(after[i] == v for i, v in new.items())


@pytest.mark.parametrize("name", ["Adam", "SGD", "Rprop", "LAMB"])
def test_float32_explained_steps_match(name):
    e = explain(name, params=X3, steps=3, dtype=np.float32, lr=0.1)
    p = X3.astype(np.float32)
    opt = registry.get(name)([p], lr=0.1)
    for _ in range(3):
        opt.step([2 * p])
    assert e.final[0].dtype == np.float32 and e.final[0].tobytes() == p.tobytes()


def test_adam_and_sparse_adam_show_their_two_denominators():
    adam = first_row(explain("Adam", params=1.0, grad=1e-6, lr=0.1))[0]
    sparse = first_row(explain("SparseAdam", params=1.0, grad=1e-6, lr=0.1))[0]
    # Adam: sqrt(v)/sqrt(b2) + eps = |g| + eps; SparseAdam: sqrt(v) + eps
    assert float(adam["denom"]) == pytest.approx(1e-6 + 1e-8, rel=1e-12)
    assert float(sparse["denom"]) == pytest.approx(np.sqrt(1e-3) * 1e-6 + 1e-8, rel=1e-12)
    assert float(adam["denom"]) / float(sparse["denom"]) > 20


def test_lamb_and_lars_trust_ratios_per_tensor():
    e = explain("LAMB", params=[X3, 2 * X3], steps=1, lr=0.1)
    ratios = e.steps[0].trust_ratios
    assert len(ratios) == 2
    for k, ratio in enumerate(ratios):
        rows = [t for t in e.steps[0].tables if t["param"] == k
                and t["rule"] == "lamb_update_rule"][0]["rows"]
        u = np.array([float(r["u"]) for r in rows])
        assert ratio["x_norm"] == pytest.approx(np.linalg.norm(u), rel=1e-15)
        assert ratio["w_norm"] == pytest.approx(np.linalg.norm(X3 * (k + 1)), rel=1e-15)
        assert ratio["trust_ratio"] == pytest.approx(ratio["w_norm"] / ratio["x_norm"])
    lars = explain("LARS", params=X3, lr=0.1).steps[0].trust_ratios[0]
    assert lars["trust_ratio"] > 0


def test_muon_newton_schulz_iterations_are_listed():
    e = explain("Muon", params=X33, lr=0.1, ns_steps=5)
    names = [n for f, n, _ in e.steps[0].listings[0] if f == "zeropower_via_newtonschulz"]
    assert [n for n in names if n.startswith("gram_update")] == [
        "gram_update"] + [f"gram_update[{k}]" for k in range(2, 6)]


def test_adafactor_row_and_column_factors():
    e = explain("Adafactor", params=X33)
    names = {n for _, n, _ in e.steps[0].listings[0]}
    assert {"row_var", "col_var", "var_estimate", "update"} <= names


def test_lbfgs_direction_step_length_and_line_search():
    e = explain("LBFGS", params=X3, lr=1.0, line_search_fn="strong_wolfe", max_iter=2)
    items = e.steps[0].listings[0]
    d = [v for f, n, v in items if f == "_step" and n == "d"][0]
    assert np.array_equal(d, -2 * X3)  # the first direction is -g
    assert any(f == "strong_wolfe" and n == "f_new" for f, n, _ in items)
    assert any(f == "_step" and n == "t" for f, n, _ in items)


def test_schedules_show_the_lr():
    e = explain("SGD", params=X3, steps=3, lr=0.1, scheduler="StepLR",
                scheduler_args=dict(step_size=1, gamma=0.5))
    assert [s.lr for s in e.steps] == [[0.1], [0.05], [0.025]]


def test_recording_restores_the_kernels_even_after_an_error():
    from npoptim.optim import adam
    dispatcher = adam.adam_rule
    with pytest.raises(RuntimeError):
        with python_kernels():
            assert adam.adam_rule is dispatcher.py_func
            raise RuntimeError
    assert adam.adam_rule is dispatcher
    with recording():
        pass
    assert adam.adam_rule is dispatcher


def test_top_level_explain_is_the_function():
    import npoptim
    assert npoptim.explain is explain and "explain" in dir(npoptim)


def test_formula_comes_from_the_docstring():
    assert "←" in formula("SGD") and "\\" not in formula("Adam")


def test_cli_table_and_json(capsys):
    assert main(["explain", "Adam", "lr=0.1", "eps=0"]) == 0
    out = capsys.readouterr().out
    assert "0.3999999999999999" in out and "1.9" in out
    assert main(["explain", "Adam", "--steps", "3", "lr=0.1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["steps"]) == 3 and data["steps"][0]["tables"][0]["rows"][0]["g"] == 4.0
    p = np.array([2.0])
    opt = registry.get("Adam")([p], lr=0.1)
    for _ in range(3):
        opt.step([2 * p])
    assert data["final"] == [p.tolist()]  # JSON keeps float64 exactly


@pytest.mark.parametrize("argv, message", [
    (["explain", "Nope"], "unknown optimizer"),
    (["explain", "Adamm"], "unknown optimizer 'Adamm' (did you mean 'Adam'?)"),
    (["explain", "Sophia"], "npoptim explain Sophia hessian_estimate=squared-gradient"),
    (["explain", "Adam", "lr=-1"], "Invalid learning rate"),
    (["explain", "Adam", "lr"], "NAME=VALUE"),
    (["explain", "Muon", "--param", "1,2,3"], "2-D"),
    (["explain", "Adam", "--param", "[" + ",".join(["1"] * 5000) + "]"], "at most"),
])
def test_cli_errors(capsys, argv, message):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_cli_takes_optimizer_names_in_any_case(capsys):
    assert main(["explain", "adam", "lr=0.1"]) == 0
    assert "Adam" in capsys.readouterr().out
