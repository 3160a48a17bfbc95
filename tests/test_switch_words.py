"""One vocabulary for where eps goes, across the optimizers' switches (issue 25).

``eps_mode`` (Adam, RAdam, GaLore, Grams, Adamax, Sophia, SOAP), ``eps1_mode`` (Adafactor) and
``ns_eps_mode`` (Muon) use the same word for the same placement: ``"max"`` is eps as a floor
(torch's ``clamp(min=eps)``), ``"added"`` is eps added to the quantity. The older words
(``"clamp"``, and Adam's/RAdam's ``"torch"``, tested in tests/test_adam.py) load as aliases.
"""
import numpy as np
import pytest

import npoptim

#: Every word an eps switch takes, with its meaning (the docstrings say it at each optimizer).
WORDS = {
    "bias_corrected": "added to the square root of the bias-corrected second moment",
    "eps_hat": "added to the square root of the raw second moment (before the correction)",
    "in_sqrt": "added inside the square root",
    "in_max": "added to |g| inside Adamax's running max",
    "max": "a floor: max(quantity, eps)",
    "added": "added to the quantity",
    "eigenvalues": "added to each eigenvalue of the matrix before its root",
}

#: Each eps switch and the words it takes (all of them words of :data:`WORDS`).
EPS_SWITCHES = {
    ("Adam", "eps_mode"): {"bias_corrected", "eps_hat", "in_sqrt"},
    ("AdamW", "eps_mode"): {"bias_corrected", "eps_hat", "in_sqrt"},
    ("RAdam", "eps_mode"): {"eps_hat", "bias_corrected"},
    ("GaLoreAdamW", "eps_mode"): {"eps_hat", "bias_corrected"},
    ("Grams", "eps_mode"): {"bias_corrected", "eps_hat"},
    ("Adamax", "eps_mode"): {"in_max", "added"},
    ("Sophia", "eps_mode"): {"max", "added"},
    ("Adafactor", "eps1_mode"): {"max", "added"},
    ("Muon", "ns_eps_mode"): {"max", "added"},
    ("MARS", "eps_mode"): {"bias_corrected", "eps_hat"},
    ("Shampoo", "matrix_eps_mode"): {"added", "eigenvalues"},
    ("Scion", "ns_eps_mode"): {"max", "added"},
    ("Kron", "norm_floor_mode"): {"max", "added"},
    ("SOAP", "eps_mode"): {"added", "max"},
}


@pytest.mark.parametrize("name, switch", sorted(EPS_SWITCHES))
def test_every_eps_switch_speaks_the_one_vocabulary(name, switch):
    """A switch takes exactly its words, all from the one vocabulary, and refuses the rest."""
    assert EPS_SWITCHES[name, switch] <= set(WORDS)
    cls = getattr(npoptim, name)
    assert cls([np.zeros((3, 2))]).defaults[switch] in EPS_SWITCHES[name, switch]
    taken = set()
    for word in [*WORDS, "torch-ish", "MAX"]:
        try:
            opt = cls([np.zeros((3, 2))], **{switch: word})
        except ValueError as exc:
            assert switch in str(exc)
        else:
            assert opt.defaults[switch] == word
            taken.add(word)
    assert taken == EPS_SWITCHES[name, switch]


@pytest.mark.parametrize("name, switch", [("Muon", "ns_eps_mode"), ("Adafactor", "eps1_mode")])
def test_the_older_word_clamp_is_rewritten(name, switch):
    opt = getattr(npoptim, name)([np.zeros((3, 2))], **{switch: "clamp"})
    assert opt.defaults[switch] == "max"


def test_newton_schulz_called_directly_takes_the_older_word_and_refuses_others():
    from npoptim.optim.orthogonalize import zeropower_via_newtonschulz
    g = np.random.default_rng(0).standard_normal((4, 3))
    args = (g, (3.4445, -4.7750, 2.0315), 5, 1e-7, "param")
    np.testing.assert_array_equal(zeropower_via_newtonschulz(*args, ns_eps_mode="clamp"),
                                  zeropower_via_newtonschulz(*args, ns_eps_mode="max"),
                                  strict=True)
    with pytest.raises(ValueError, match="ns_eps_mode must be 'max' or 'added'"):
        zeropower_via_newtonschulz(*args, ns_eps_mode="torch")


def _muon_run(mode):
    rng = np.random.default_rng(5)
    w = rng.standard_normal((4, 3))
    opt = npoptim.Muon([w], lr=0.02, ns_eps_mode=mode, eps=1e-3)
    for _ in range(3):
        opt.step([rng.standard_normal((4, 3))])
    return w, opt


def _adafactor_run(mode):
    rng = np.random.default_rng(6)
    w = rng.standard_normal((4, 3))
    opt = npoptim.Adafactor([w], lr=0.02, eps1_mode=mode, eps=(1e-2, 1e-3))
    for _ in range(3):
        opt.step([rng.standard_normal((4, 3)) * 1e-3])  # small: the floor decides
    return w, opt


@pytest.mark.parametrize("run, switch", [(_muon_run, "ns_eps_mode"),
                                         (_adafactor_run, "eps1_mode")])
def test_clamp_is_an_alias_of_max(run, switch):
    """``"clamp"`` (the word before 2026-12) is read as ``"max"``: the same steps, and the
    groups and the state dict hold ``"max"``; an older checkpoint's "clamp" loads."""
    old, old_opt = run("clamp")
    new, new_opt = run("max")
    np.testing.assert_array_equal(old, new, strict=True)
    assert old_opt.param_groups[0][switch] == "max"
    assert old_opt.state_dict()["param_groups"][0].get(switch, "max") == "max"
    state = new_opt.state_dict()
    state["param_groups"][0][switch] = "clamp"
    new_opt.load_state_dict(state)
    assert new_opt.param_groups[0][switch] == "max"
    _, added = run("added")
    assert added.param_groups[0][switch] == "added"
