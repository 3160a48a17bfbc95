"""The optimizers: one module per algorithm family, each reading top-down (docstring with the
algorithm and its sources, the hyperparameter record, the per-element rule reading it by name,
the class).

Besides the algorithms, four modules are shared: :mod:`npoptim.optim.optimizer` (the API every
optimizer has: param groups, checks, atomic steps, state dicts), :mod:`npoptim.optim.options`
(how an optimizer takes its keywords: named variants and the shared checks),
:mod:`npoptim.optim.wrapper` (the base of the wrappers Lookahead, SAM and Mechanic) and
:mod:`npoptim.optim.zoom_linesearch` (the line search L-BFGS shares with optax's form).
:mod:`npoptim.registry` lists them all; ``docs/developing.md`` is the map.
"""
