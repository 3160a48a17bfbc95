"""The optimizers: one module per family, each reading top-down (docstring with the algorithm,
the hyperparameter record and the per-element rule reading it by name, the class). The shared
API is :mod:`npoptim.optim.optimizer`; :mod:`npoptim.optim.options` holds the checks of
the optimizers' keywords they share, the named-variant machinery among them."""
