"""Scalar helpers shared by update rules, written as torch's CPU kernels compute them.

Rules never use numeric literals in arithmetic: Numba types a literal as float64 or int64,
which would silently promote float32 arithmetic to float64.
"""
from npoptim.kernels.jit import kernel


@kernel
def lerp(start, end, weight):
    """``start + weight * (end - start)``, in the two forms torch's ``lerp`` switches between.

    For ``|weight| >= 0.5`` torch evaluates ``end - (end - start) * (1 - weight)``, exact at
    ``weight == 1``. ``weight / weight`` is that 1 in the arguments' own dtype (``weight`` is
    not 0 on that branch).
    """
    if abs(weight) < 0.5:
        return start + weight * (end - start)
    return end - (end - start) * (weight / weight - weight)
