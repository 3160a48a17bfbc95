"""The optimizers: one module per family, each reading top-down (docstring with the algorithm,
the per-element rule, the class). The shared API is :mod:`npoptim.optim.optimizer`."""
