"""Adagrad against torch.optim 2.13, option for option, with dense and CSR gradients.

The standard problem of :mod:`torch_compare` (24 steps, two param groups with different
hyperparameters, some None gradients): float64 to 1e-12 of the parameters' scale, float32 no
further from torch than torch's own foreach-vs-single spread plus 2 float32 ulps; the state
agrees too, under torch's names. CSR gradients (about 40% of the rows untouched) against
torch's sparse COO ones.
"""
from torch_compare import csr_matches_torch_test, matches_torch_test

CASES = [
    ("Adagrad", dict(lr=0.1), dict(lr=0.3)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.2),
     dict(eps=1e-3)),
    ("Adagrad", dict(lr=0.1, maximize=True), dict(lr_decay=0.5)),
]
SPARSE_CASES = [
    ("Adagrad", dict(lr=0.1, lr_decay=0.05), dict(initial_accumulator_value=0.5)),
    ("Adagrad", dict(lr=0.1, maximize=True), dict(eps=1e-2)),
]
test_matches_torch = matches_torch_test(CASES)
test_csr_gradients_match_torch_sparse = csr_matches_torch_test(SPARSE_CASES)
