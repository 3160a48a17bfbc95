"""Adam and AdamW against torch.optim 2.13, option for option.

The standard problem of :mod:`torch_compare` (24 steps, two param groups with different
hyperparameters, some None gradients): float64 to 1e-12 of the parameters' scale, float32 no
further from torch than torch's own foreach-vs-single spread plus 2 float32 ulps; the state
agrees too, under torch's names.
"""
import numpy as np
import pytest

import npoptim
from torch_compare import matches_torch_test, needs_torch, rel_error, torch, torch_state_dict

CASES = [
    ("Adam", dict(lr=0.01), dict(lr=0.05)),
    ("Adam", dict(lr=0.01, amsgrad=True), dict(betas=(0.8, 0.9))),
    ("Adam", dict(lr=0.01, weight_decay=0.1, maximize=True), dict(eps=1e-3)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, amsgrad=True),
     dict(weight_decay=0.0)),
    ("AdamW", dict(lr=0.01), dict(weight_decay=0.5)),
    ("AdamW", dict(lr=0.02, amsgrad=True, maximize=True), dict(betas=(0.5, 0.6))),
]
test_matches_torch = matches_torch_test(CASES)


@needs_torch
def test_continuing_from_a_torch_state_dict_matches_torch():
    rng = np.random.default_rng(3)
    p0 = rng.standard_normal((4, 3))
    t = torch.tensor(p0.copy(), requires_grad=True)
    topt = torch.optim.AdamW([t], lr=0.01, amsgrad=True, foreach=False)
    for _ in range(5):
        t.grad = torch.tensor(rng.standard_normal((4, 3)))
        topt.step()
    p = t.detach().numpy().copy()
    ours = npoptim.AdamW([p], lr=0.5)
    ours.load_state_dict(torch_state_dict(topt))
    assert ours.param_groups[0]["lr"] == 0.01
    for _ in range(3):
        g = rng.standard_normal((4, 3))
        ours.step([g])
        t.grad = torch.tensor(g)
        topt.step()
    assert rel_error([p], [t.detach().numpy()]) <= 1e-13


@pytest.mark.parametrize("cls, today", [(npoptim.Adam, "bias_corrected"),
                                        (npoptim.AdamW, "bias_corrected"),
                                        (npoptim.RAdam, "eps_hat")])
def test_eps_mode_torch_is_an_alias_of_the_word_for_torchs_placement(cls, today):
    """``eps_mode="torch"`` (the word before 2026-12, naming opposite placements in Adam and
    RAdam) is read as today's word for torch's placement: the same steps, and the groups and
    the state dict hold today's word."""
    rng = np.random.default_rng(3)
    grads = [rng.standard_normal((4, 3)) for _ in range(5)]
    runs = []
    for mode in ("torch", today):
        w = np.linspace(-1.0, 1.0, 12).reshape(4, 3)
        opt = cls([w], lr=0.1, eps=1e-3, eps_mode=mode)
        assert opt.param_groups[0]["eps_mode"] == today
        for g in grads:
            opt.step([g])
        runs.append(w)
    np.testing.assert_array_equal(runs[0], runs[1], strict=True)
    assert cls([np.zeros(2)]).defaults["eps_mode"] == today
    opt = cls([np.zeros(2)])
    state = opt.state_dict()
    state["param_groups"][0]["eps_mode"] = "torch"   # an older checkpoint's word
    opt.load_state_dict(state)
    assert opt.param_groups[0]["eps_mode"] == today
