"""Adadelta against torch.optim 2.13, option for option.

The standard problem of :mod:`torch_compare` (24 steps, two param groups with different
hyperparameters, some None gradients): float64 to 1e-12 of the parameters' scale, float32 no
further from torch than torch's own foreach-vs-single spread plus 2 float32 ulps; the state
agrees too, under torch's names.
"""
from torch_compare import matches_torch_test

CASES = [
    ("Adadelta", dict(), dict(lr=0.5)),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1), dict(rho=0.95)),
    ("Adadelta", dict(maximize=True, weight_decay=0.01), dict(eps=1e-2)),
]
test_matches_torch = matches_torch_test(CASES)
