"""Optimization theory made executable: closed forms checked against the real optimizers.

* :mod:`npoptim.theory.momentum`: heavy-ball momentum on a quadratic as a 2x2 linear
  iteration, its rate (spectral radius), the optimal parameters and the phase diagram.
"""
