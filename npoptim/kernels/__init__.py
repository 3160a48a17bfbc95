"""Numba machinery shared by every optimizer, and the bit-exact number streams golden cases name.

* :mod:`npoptim.kernels.jit` -- the one ``numba.njit`` configuration the package uses.
* :mod:`npoptim.kernels.drivers` -- loops that apply a per-element update rule to a dense
  array, to the stored entries of CSR rows and to row-sparse rows.
* :mod:`npoptim.kernels.parallel` -- when a driver splits its loop over threads.
* :mod:`npoptim.kernels.reduction` -- sums and sums of squares in an order fixed by the size
  alone (trust ratios, step-size estimates, gradient norms) and a matrix product in a fixed
  order (GaLore's projections, Muon's Newton–Schulz in the parameter's dtype).
* :mod:`npoptim.kernels.scalar` -- scalar helpers that rules share (torch's ``lerp`` and
  ``fma``, ``constant`` for a number in a rule, ``decayed_grad``: maximize and L2 decay).
* :mod:`npoptim.kernels.torch_order` -- torch's CPU orders of dots and sums, where a result
  follows torch to the bit (L-BFGS, 16-bit Adafactor and L-BFGS).
* :mod:`npoptim.kernels.bfloat16` -- the one rounding of float32 to bfloat16 (torch's
  ``c10::BFloat16``), for the 16-bit formats and Muon's bfloat16 Newton–Schulz.
* :mod:`npoptim.kernels.counter_stream` and :mod:`npoptim.kernels.jax_random` -- normal
  numbers from counters, the same bits on every CPU: npoptim's own stream, and the part of
  ``jax.random`` that optax's noisy optimizers draw from.
"""
