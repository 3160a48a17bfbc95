r"""optax's zoom line search (``optax.scale_by_zoom_linesearch`` 0.2.8, google-deepmind/optax
optax/_src/linesearch.py ``zoom_linesearch``), on the line :math:`\phi(\eta) = f(x + \eta u)`.

It looks for a step size :math:`\eta` satisfying a *sufficient decrease* and a *small
curvature* condition (strong Wolfe, Nocedal & Wright 1999, Algorithms 3.5 and 3.6), with
:math:`\phi_0 = \phi(0)`, :math:`\phi'_0 = \phi'(0) = \nabla f(x)^\top u < 0`:

.. math::
    \text{decrease error} &= \max(0, \min(A, \max(B, C))),\quad
    A = \phi(\eta) - \phi_0 - c_1 \eta \phi'_0 \ \text{(Armijo)},\\
    B &= \phi'(\eta) - (2 c_1 - 1) \phi'_0 \ \text{(approximate Wolfe, Hager \& Zhang 2006)},
    \quad C = \phi(\eta) - \phi_0 - c_3 |\phi_0|,\\
    \text{curvature error} &= \max(0, |\phi'(\eta)| - c_2 |\phi'_0|),

with :math:`c_1` ``slope_rtol`` (1e-4), :math:`c_2` ``curv_rtol`` (0.9), :math:`c_3`
``approx_dec_rtol`` (1e-6; ``None``: the decrease error is :math:`\max(0, A)` alone); a NaN
error counts as infinite. A step is accepted when both errors are within ``tol`` (0).
Each iteration evaluates :math:`\phi` once; there are at most ``max_linesearch_steps``.

1. **Interval search.** Trial :math:`\eta_0` = ``stepsize_guess`` (optax.lbfgs: 1), then
   :math:`\eta_{i} = ` ``increase_factor`` :math:`\cdot\,\eta_{i-1}` (2), capped at
   ``max_learning_rate`` (if given). The bracket (low, high) is (previous, new) if the new
   point violates the decrease or (from the second trial on) does not lower :math:`\phi`
   below the previous one; (new, previous) if instead :math:`\phi'(\eta) \ge 0`; either ends
   the search. At the cap without a bracket, the cap is taken.
2. **Zoom.** "low" is the end with the lower value (not the smaller step). A trial point is
   the minimizer of the cubic through low (value and slope), high and the previous reference
   point, if it lies inside the bracket by more than 20% of its width; else the minimizer of
   the quadratic through low (value and slope) and high, if inside by more than 10%; else the
   midpoint. If it violates the decrease or does not lower :math:`\phi` below low, it becomes
   high; otherwise it becomes low, and the old low becomes high if
   :math:`\phi'(\eta)(\text{high} - \text{low}) \ge 0`. The reference point of the next
   cubic is the end that was replaced (the old high if high changed, else the old low).
3. **Fallback.** Every trial meeting the decrease condition is remembered as a *safe* step
   (in the zoom, only if its value is below the safe one so far). When the steps run out, or
   the bracket is narrower than ``stepsize_precision`` (1e-5) once a safe step exists, the
   search ends without a step meeting both conditions: it returns the safe step if there is
   one, else the last trial (unless that one's value was NaN or infinite: then the step 0, no
   move).

The function works on the scalars only: ``phi(eta)`` returns :math:`(\phi(\eta), \phi'(\eta),
\text{extra})` and the result carries the chosen point's ``extra`` (L-BFGS: its gradient), as
optax's state carries the chosen point's value and gradient. The scalar arithmetic is
optax's, in NumPy's float64 (XLA fuses some products and sums into fused multiply-adds, so
step sizes agree to a few ulps, not bit for bit).
"""
import numpy as np


def zoom_linesearch(phi, value_init, slope_init, extra_init=None, stepsize_guess=1.0, *,
                    max_linesearch_steps=20, max_learning_rate=None, tol=0.0,
                    increase_factor=2.0, slope_rtol=1e-4, curv_rtol=0.9, approx_dec_rtol=1e-6,
                    stepsize_precision=1e-5):
    """The step size along the line (see the module docstring).

    ``phi(eta) -> (value, slope, extra)``; ``value_init``, ``slope_init`` and ``extra_init``
    are those at 0. Returns ``(eta, value, extra, evaluations)``: the step, the value and
    ``extra`` there, and the number of calls of ``phi``.
    """
    value_init = np.float64(value_init)

    def errors(eta, value, slope):
        """(decrease error, curvature error) of a trial point, NaN as inf."""
        decrease = value - value_init - slope_rtol * eta * slope_init
        if approx_dec_rtol is not None:
            approx = np.maximum(slope - (2 * slope_rtol - 1.0) * slope_init,
                                value - value_init - approx_dec_rtol * np.abs(value_init))
            decrease = np.minimum(approx, decrease)
        curvature = np.abs(slope) - curv_rtol * np.abs(slope_init)
        return tuple(np.inf if np.isnan(e) else np.maximum(e, 0.0) for e in (decrease, curvature))

    # points are (step, value, slope); "last" is the latest trial
    last = (np.float64(0.0), value_init, slope_init)
    low = high = cubic_ref = last
    safe, safe_extra = (np.float64(0.0), value_init), extra_init
    interval_found = False
    for count in range(max(int(max_linesearch_steps), 1)):
        if not interval_found:  # 1. interval search
            eta = np.float64(stepsize_guess) if count == 0 else increase_factor * last[0]
            capped = max_learning_rate is not None and eta >= max_learning_rate
            if max_learning_rate is not None:
                eta = np.minimum(eta, max_learning_rate)
            value, slope, extra = phi(eta)
            decrease, curvature = errors(eta, value, slope)
            if decrease <= tol:
                safe, safe_extra = (eta, value), extra
            to_high = decrease > 0.0 or (count > 0 and value >= last[1])
            to_low = slope >= 0.0 and not to_high
            new = (eta, value, slope)
            low, high = (new, last) if to_low else (last, new)
            cubic_ref = low
            done = max(decrease, curvature) <= tol
            interval_found = to_high or to_low or done
            done = done or (capped and not interval_found)
            give_up = False
        else:  # 2. zoom
            eta = _trial_point(low, high, cubic_ref)
            value, slope, extra = phi(eta)
            decrease, curvature = errors(eta, value, slope)
            if decrease <= tol and value < safe[1]:
                safe, safe_extra = (eta, value), extra
            done = max(decrease, curvature) <= tol
            new = (eta, value, slope)
            to_high = decrease > 0.0 or value >= low[1]
            low_to_high = not to_high and slope * (high[0] - low[0]) >= 0.0
            cubic_ref = high if (to_high or low_to_high) else low
            give_up = abs(high[0] - low[0]) <= stepsize_precision and safe[0] > 0.0
            if to_high:
                high = new
            else:
                high = low if low_to_high else high
                low = new
        last = (eta, value, slope)
        if done:
            return eta, value, extra, count + 1
        if give_up or count + 1 >= max_linesearch_steps:  # 3. fallback
            if safe[0] > 0.0 or np.isinf(decrease):
                return safe[0], safe[1], safe_extra, count + 1
            return eta, value, extra, count + 1
    raise AssertionError("unreachable")  # pragma: no cover


def _trial_point(low, high, ref):
    """The zoom's next trial: the cubic's minimizer, else the quadratic's, else the midpoint."""
    width = abs(high[0] - low[0])
    left, right = min(high[0], low[0]), max(high[0], low[0])
    cubic = _cubic_minimizer(low, high, ref)
    if left + 0.2 * width < cubic < right - 0.2 * width:
        return cubic
    quadratic = _quadratic_minimizer(low, high)
    if left + 0.1 * width < quadratic < right - 0.1 * width:
        return quadratic
    return (low[0] + high[0]) / 2.0


def _cubic_minimizer(a, b, c):
    """The critical point of the cubic through a (value and slope), b and c (values); NaN where
    it has none or the points do not determine it (optax's ``_cubicmin``, after SciPy)."""
    (a, fa, fpa), (b, fb, _), (c, fc, _) = a, b, c
    with np.errstate(all="ignore"):
        db, dc = b - a, c - a
        denom = (db * dc) * (db * dc) * (db - dc)
        rb, rc = fb - fa - fpa * db, fc - fa - fpa * dc
        big_a = (dc * dc * rb - db * db * rc) / denom
        big_b = (-(dc * dc * dc) * rb + db * db * db * rc) / denom
        radical = big_b * big_b - 3.0 * big_a * fpa
        return a + (-big_b + np.sqrt(radical)) / (3.0 * big_a)


def _quadratic_minimizer(a, b):
    """The critical point of the quadratic through a (value and slope) and b (value)."""
    (a, fa, fpa), (b, fb, _) = a, b
    with np.errstate(all="ignore"):
        db = b - a
        curvature = (fb - fa - fpa * db) / (db * db)
        return a - fpa / (2.0 * curvature)
