"""Numba machinery shared by every optimizer.

* :mod:`npoptim.kernels.jit` -- the one ``numba.njit`` configuration the package uses.
* :mod:`npoptim.kernels.drivers` -- loops that apply a per-element update rule to a dense
  array or to the stored entries of CSR rows.
* :mod:`npoptim.kernels.reduction` -- the deterministic sums of squares behind LAMB's and
  LARS's trust ratios.
* :mod:`npoptim.kernels.scalar` -- scalar helpers that rules share (torch's ``lerp``,
  ``constant`` for a number in a rule).
"""
