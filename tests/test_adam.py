"""Adam and AdamW against torch.optim 2.13, option for option.

The standard problem of :mod:`torch_compare` (24 steps, two param groups with different
hyperparameters, some None gradients): float64 to 1e-12 of the parameters' scale, float32 no
further from torch than torch's own foreach-vs-single spread plus 2 float32 ulps; the state
agrees too, under torch's names.
"""
import numpy as np

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
