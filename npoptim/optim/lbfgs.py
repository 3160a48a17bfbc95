r"""L-BFGS (Liu & Nocedal, 1989), as ``torch.optim.LBFGS`` 2.13 (after Schmidt's minFunc).

A quasi-Newton method: it approximates the inverse Hessian from the last ``history_size``
pairs of steps :math:`s_k = x_{k+1} - x_k` and gradient changes :math:`y_k = g_{k+1} - g_k`,
never forming a matrix. All parameters are treated as one flat vector :math:`x` (one param
group only, as in torch), and one call of :meth:`LBFGS.step` runs up to ``max_iter``
iterations, calling the closure (``closure() -> (loss, grads)``) as often as it needs.

Each iteration:

1. **Direction** :math:`d = -H g` by the *two-loop recursion*: with :math:`\rho_k = 1/y_k^\top
   s_k`, walk the history newest to oldest, :math:`\alpha_k = \rho_k s_k^\top q`,
   :math:`q \leftarrow q - \alpha_k y_k` (from :math:`q = -g`); scale by
   :math:`H_0 = y^\top s / y^\top y` of the newest pair; walk back oldest to newest,
   :math:`\beta_k = \rho_k y_k^\top r`, :math:`r \leftarrow r + (\alpha_k - \beta_k) s_k`.
   The first iteration ever uses :math:`d = -g`. A pair is stored only when
   :math:`y^\top s > 10^{-10}` (curvature condition), the oldest dropped when full.
2. **Step length** :math:`t`: ``lr`` (the very first iteration:
   :math:`\min(1, 1/\|g\|_1)\,\mathrm{lr}`), either taken as is (``line_search_fn=None``), or
   refined by a line search satisfying the *strong Wolfe* conditions
   (``"strong_wolfe"``: sufficient decrease :math:`f(x+td) \le f + c_1 t\,g^\top d` and
   curvature :math:`|g(x+td)^\top d| \le c_2 |g^\top d|`, :math:`c_1=10^{-4}, c_2=0.9`),
   by bracketing and cubic interpolation (:func:`strong_wolfe`). ``"zoom"`` (not torch's) is
   optax's zoom line search (:mod:`npoptim.optim.zoom_linesearch`) along :math:`u = t d`, from
   a step of 1 (``initial_guess_strategy="one"``; ``"keep"``: the last step found), with
   optax's hyperparameters under optax's names and defaults: ``max_linesearch_steps`` 20,
   ``max_learning_rate`` None, ``linesearch_tol`` (optax's ``tol``) 0, ``increase_factor``
   2, ``slope_rtol`` 1e-4, ``curv_rtol`` 0.9, ``approx_dec_rtol`` 1e-6 (approximate Wolfe),
   ``stepsize_precision`` 1e-5; the step is then :math:`x \leftarrow x + \eta u` and the
   state keeps :math:`u` as ``d``, :math:`\eta` as ``t`` and as ``stepsize`` (optax's
   ``learning_rate`` state). Its evaluations are bounded by ``max_linesearch_steps``, not by
   ``max_eval`` (they count towards ``func_evals``). The trial points are
   :math:`x + \eta u` with one rounding (as XLA fuses them in optax's loop), the step
   :math:`x + (\eta u)` with two (as ``optax.apply_updates`` adds the update).
3. :math:`x \leftarrow x + t d`; stop when ``max_iter`` or ``max_eval`` is reached, the
   gradient's largest entry is within ``tolerance_grad``, or the step or the change of loss
   is within ``tolerance_change``.

**State**, kept as torch keeps it, in the state of the first parameter (index 0):
``func_evals``, ``n_iter`` (ints), ``d``, ``prev_flat_grad`` (flat arrays), ``old_dirs``
(the :math:`y_k`), ``old_stps`` (the :math:`s_k`), ``ro`` (lists), ``al`` (list of
``history_size`` entries, None until used), ``H_diag``, ``t`` and ``prev_loss``. Values that
torch holds as 0-d tensors (``ro``, ``al`` entries, ``H_diag``, often ``t``) are NumPy scalars
of the parameters' dtype here, 0-d arrays in :meth:`~LBFGS.state_dict`; values torch holds as
Python numbers stay Python numbers. The arithmetic mixing them follows NumPy 2's promotion
rules (NEP 50), which are torch's: a Python float takes the dtype of the array or scalar it
meets, so float32 parameters are optimized in float32 where torch uses float32.

**Rounding.** L-BFGS feeds every rounding difference back into its history, so two runs
that differ in the last bit drift apart within a few steps (by far more than the rounding).
To agree with torch beyond that, the vector operations that round follow torch's CPU order
(:mod:`npoptim.kernels.torch_order`): :func:`dot` (float64: MKL's ``ddot`` order, checked bit
for bit below 4096 elements), :func:`torch_sum` (ATen's cascade sum, single-threaded up to
32768 elements) and :func:`axpy` (``add`` with ``alpha``: one fused multiply-add per element).
With these the float64 iterates equal torch's bit for bit, except after a line search whose
cubic interpolation takes a square root that torch (MKL's vector math) rounds differently
from the correctly rounded ``np.sqrt``, about 1% of them. float32 dot products take the
same order in float32 arithmetic (MKL's ``sdot`` order is not reproduced; BLAS's would depend
on the CPU), so float32 agrees to rounding, then drifts as torch itself does when its
parameters are listed in another order. bfloat16/float16 parameters, every operation rounded
as torch rounds it: :mod:`npoptim.precision.lbfgs`.

Which CPUs sum that way: torch's order depends on the kernels MKL and ATen pick for the CPU.
npoptim's order is fixed (the same results, and golden files, on every machine): it is the one
torch 2.13 uses on an AMD EPYC (Zen 5) that torch reports as ``AVX512``, where MKL's ``ddot``
takes its two-lane path and ATen's float64 sum reads four doubles at a time. On an Intel Xeon
with AVX-512 and AMX, also reported as ``AVX512``, MKL's ``ddot`` adds in another order (ATen's
sum is the same; measured by the probe) and the float64 runs drift apart as above. The
test suite finds out which by a probe (``tests/cpu_probe.py``) and keeps torch's outputs as
recorded on each kind of CPU (``tests/data/torch_cpu_records.json``).

**Convention switches** (see :mod:`npoptim.flavors`). ``flavor="optax"`` is ``optax.lbfgs``
0.2.8 (google-deepmind/optax optax/_src/alias.py ``lbfgs``, optax/_src/transform.py
``scale_by_lbfgs`` and optax/_src/linesearch.py ``scale_by_zoom_linesearch``): one iteration
per step (``max_iter=1``, no
tolerance tests: ``tolerance_grad = tolerance_change = -inf``), ``history_size`` 10, lr 1, and

* ``first_step_norm="l2"``: the first step is :math:`\min(1, 1/\|g\|_2)\,\mathrm{lr}` (torch:
  ``"l1"``, :math:`\|g\|_1`);
* ``curvature_condition=False``: every pair is stored (torch keeps one only if
  :math:`y^\top s > 10^{-10}`), with :math:`\rho = 0` where :math:`y^\top s = 0`, and
  :math:`H_0 = y^\top s / y^\top y` of the newest pair (1 where :math:`y^\top y = 0`);
* ``scale_init_precond=False`` (optax's option; torch always scales): :math:`H_0 = 1` and the
  first step is ``lr``;
* ``measured_step=True``: the pair's :math:`s` is the parameters' change as rounded,
  :math:`x_{k+1} - x_k` (optax's ``diff_params``; torch: :math:`t d`); they differ by the
  rounding of the addition, which is large relative to a tiny step (a line search that
  ended far below 1), and the pairs carry it;
* ``line_search_fn="zoom"``: optax.lbfgs's default line search,
  ``scale_by_zoom_linesearch(max_linesearch_steps=20, initial_guess_strategy="one")``
  (``from_framework("optax", "lbfgs", params, linesearch=None)`` is the fixed step; the zoom's
  keywords, e.g. ``curv_rtol=0.1``, are ``from_framework`` keywords too, ``tol`` as
  ``linesearch_tol``). The closure gives what optax's ``value_fn`` gives: the loss (and the
  gradient) at each trial point.

A step is atomic: if the closure raises or returns an invalid gradient, the parameters and
the state are restored to what they were before the step, and the error propagates.
"""
import copy
import numbers

import numpy as np

from npoptim.kernels.torch_order import axpy, dot, torch_sum
from npoptim.optim.optimizer import Optimizer, flat_view, step_arguments
from npoptim.optim.options import check_choice, check_flag, flavored, is_real
from npoptim.optim.zoom_linesearch import zoom_linesearch


def cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """Minimizer of the cubic through two points with values ``f`` and slopes ``g``, clamped
    to ``bounds`` (default: the interval between the points); the midpoint if it has none.
    Rounded as torch's ``_cubic_interpolate``, whose steps are 0-d tensors (NumPy scalars
    here) or Python numbers, depending on how the line search reached them."""
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    span = x1 - x2
    if isinstance(span, np.generic):
        # a 0-d tensor in torch, which divides a Python number by it as Tensor.__rdiv__ does,
        # self.reciprocal() * other: two roundings, not one
        d1 = g1 + g2 - (1 / span) * (3 * (f1 - f2))
    else:
        d1 = g1 + g2 - 3 * (f1 - f2) / span
    d2_square = d1 * d1 - g1 * g2  # torch squares a tensor as d1 * d1 (not pow)
    if d2_square >= 0:
        d2 = np.sqrt(d2_square)
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


def max_abs(x):
    """``x.abs().max()``."""
    return np.max(np.abs(x))


def strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                 max_ls=25, *, dot=dot, max_abs=max_abs):
    """Line search along ``d`` from ``x`` for a step satisfying the strong Wolfe conditions.

    ``obj_func(x, t, d)`` returns ``(loss, flat_grad)`` at ``x + t d``; ``f``, ``g``,
    ``gtd`` are the loss, gradient and directional derivative at ``x``. Returns
    ``(loss, flat_grad, t, evaluations)``. Phase 1 grows ``t`` until an interval is bracketed
    (or a point already satisfies the conditions); phase 2 ("zoom") shrinks the bracket by
    cubic interpolation, moving trial points away from the ends when progress stalls.
    ``dot`` and ``max_abs`` are the vector reductions (the 16-bit form passes torch's).
    """
    d_norm = max_abs(d)
    g = g.copy()
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = dot(g_new, d)

    # phase 1: bracket an interval containing a point satisfying the conditions
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        # extrapolate
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                              bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.copy(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = dot(g_new, d)
        ls_iter += 1

    if ls_iter == max_ls:  # no bracket found within the budget
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]

    # phase 2: zoom
    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0],
                              bracket[1], bracket_f[1], bracket_gtd[1])
        # a trial point too close to an end of the bracket is moved 10% inside it, if the
        # previous trial made insufficient progress too or the point is on (or past) an end
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                if abs(t - max(bracket)) < abs(t - min(bracket)):
                    t = max(bracket) - eps
                else:
                    t = min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False

        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = dot(g_new, d)
        ls_iter += 1

        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            # not enough decrease, or not below the low end: the new point is the high end
            bracket[high_pos], bracket_f[high_pos] = t, f_new
            bracket_g[high_pos], bracket_gtd[high_pos] = g_new.copy(), gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                # the old high end becomes the new low end
                bracket[high_pos], bracket_f[high_pos] = bracket[low_pos], bracket_f[low_pos]
                bracket_g[high_pos] = bracket_g[low_pos]
                bracket_gtd[high_pos] = bracket_gtd[low_pos]
            # the new point becomes the low end
            bracket[low_pos], bracket_f[low_pos] = t, f_new
            bracket_g[low_pos], bracket_gtd[low_pos] = g_new.copy(), gtd_new

    return bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_func_evals


#: The zoom line search's hyperparameters and their defaults (optax.lbfgs's
#: ``scale_by_zoom_linesearch(max_linesearch_steps=20, initial_guess_strategy="one")``;
#: ``linesearch_tol`` is optax's ``tol``).
ZOOM_DEFAULTS = {"max_linesearch_steps": 20, "max_learning_rate": None, "linesearch_tol": 0.0,
                 "increase_factor": 2.0, "slope_rtol": 1e-4, "curv_rtol": 0.9,
                 "approx_dec_rtol": 1e-6, "stepsize_precision": 1e-5,
                 "initial_guess_strategy": "one"}

# state entries holding flat vectors, lists of them, and lists of scalars
_VECTORS = ("d", "prev_flat_grad")
_VECTOR_LISTS = ("old_dirs", "old_stps")
_SCALAR_LISTS = ("ro", "al")
_SCALARS = ("t", "H_diag", "prev_loss", "stepsize")
_COUNTERS = ("func_evals", "n_iter")
_STATE_KEYS = _COUNTERS + _VECTORS + _VECTOR_LISTS + _SCALAR_LISTS + _SCALARS


class LBFGS(Optimizer):
    """L-BFGS, matching ``torch.optim.LBFGS`` (see the module docstring).

    ``step(closure)`` needs a closure returning ``(loss, grads)`` (grads aligned with the
    parameters, dense arrays or None for zero) and returns the first loss it computed.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 1
        Step length of an iteration (the line search's first trial).
    max_iter : int, default: 20
        Iterations per ``step``.
    max_eval : int or None, default: None
        Closure evaluations per ``step`` (None: max_iter * 5 // 4).
    tolerance_grad : float, default: 1e-07
        Stop when the gradient's largest entry is within this.
    tolerance_change : float, default: 1e-09
        Stop when the step or the change of loss is within this.
    history_size : int, default: 100
        Number of (s, y) pairs kept.
    line_search_fn : str or None, default: None
        None (fixed step), ``"strong_wolfe"`` (torch) or ``"zoom"`` (optax's zoom line search).
    first_step_norm : str, default: 'l1'
        Norm of the first step's scaling min(1, 1/‖g‖) lr: ``"l1"`` (torch) or ``"l2"`` (optax).
    curvature_condition : bool, default: True
        Store a pair only if yᵀs > 1e-10 (torch); False: every pair (optax).
    scale_init_precond : bool, default: True
        Scale the initial inverse Hessian by yᵀs/yᵀy (torch); False: H0 = 1 (optax).
    measured_step : bool, default: False
        Take s as the parameters' change as rounded (optax) instead of t d.
    max_linesearch_steps : int, default: 20
        The zoom line search's evaluations per iteration (optax).
    max_learning_rate : float or None, default: None
        The zoom line search's largest step (None: no bound).
    linesearch_tol : float, default: 0.0
        The zoom line search's tolerance (optax's ``tol``).
    increase_factor : float, default: 2.0
        The zoom line search's growth of the trial step.
    slope_rtol : float, default: 0.0001
        The zoom line search's sufficient-decrease constant c1.
    curv_rtol : float, default: 0.9
        The zoom line search's curvature constant c2.
    approx_dec_rtol : float or None, default: 1e-06
        The zoom line search's c3 of the approximate Wolfe decrease (None: the exact condition
        alone).
    stepsize_precision : float, default: 1e-05
        The zoom line search gives up once its bracket is narrower than this and a safe step
        exists.
    initial_guess_strategy : str, default: 'one'
        The zoom line search's first trial: ``"one"`` or ``"keep"`` (the last step found).
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    needs_closure = True

    step_in_state_dict = None

    #: The convention switches and their torch values (see :mod:`npoptim.flavors`); the zoom
    #: line search's hyperparameters (optax's names and defaults) are left out of torch's
    #: groups the same way at their defaults, which leave torch's math alone.
    torch_conventions = {"first_step_norm": "l1", "curvature_condition": True,
                         "scale_init_precond": True, "measured_step": False, **ZOOM_DEFAULTS}

    @flavored
    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None, *,
                 first_step_norm="l1", curvature_condition=True, scale_init_precond=True,
                 measured_step=False, max_linesearch_steps=20, max_learning_rate=None,
                 linesearch_tol=0.0, increase_factor=2.0, slope_rtol=1e-4, curv_rtol=0.9,
                 approx_dec_rtol=1e-6, stepsize_precision=1e-5, initial_guess_strategy="one"):
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                                      tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change,
                                      history_size=history_size,
                                      line_search_fn=line_search_fn,
                                      first_step_norm=first_step_norm,
                                      curvature_condition=curvature_condition,
                                      scale_init_precond=scale_init_precond,
                                      measured_step=measured_step,
                                      max_linesearch_steps=max_linesearch_steps,
                                      max_learning_rate=max_learning_rate,
                                      linesearch_tol=linesearch_tol,
                                      increase_factor=increase_factor, slope_rtol=slope_rtol,
                                      curv_rtol=curv_rtol, approx_dec_rtol=approx_dec_rtol,
                                      stepsize_precision=stepsize_precision,
                                      initial_guess_strategy=initial_guess_strategy))

    def add_param_group(self, param_group):
        if self.param_groups:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        super().add_param_group(param_group)

    def _check_group(self, group):
        lr = group["lr"]
        if not is_real(lr) or not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        check_choice(group, "first_step_norm", ("l1", "l2"))
        check_flag(group, "curvature_condition", "scale_init_precond", "measured_step")
        check_choice(group, "initial_guess_strategy", ("one", "keep"))
        steps = group["max_linesearch_steps"]
        if not isinstance(steps, numbers.Integral) or isinstance(steps, bool) or steps < 1:
            raise ValueError(f"max_linesearch_steps must be an int >= 1, got {steps!r}")
        for name in ("linesearch_tol", "slope_rtol", "curv_rtol", "stepsize_precision",
                     "increase_factor", "approx_dec_rtol", "max_learning_rate"):
            value = group[name]
            if value is None and name in ("approx_dec_rtol", "max_learning_rate"):
                continue
            if (not is_real(value)
                    or not value >= 0 or (name == "max_learning_rate" and value == 0)):
                raise ValueError(f"Invalid {name}: {value!r}")
        if group["line_search_fn"] != "zoom":
            unused = [k for k, v in ZOOM_DEFAULTS.items() if group[k] != v]
            if unused:
                raise ValueError(f"{', '.join(unused)}: the zoom line search's options, which "
                                 f"line_search_fn={group['line_search_fn']!r} does not read")

    # ------------------------------------------------------------------- flat vectors
    @property
    def _dtype(self):
        """The dtype of the flat vectors (torch.cat's: the parameters' common dtype)."""
        return np.result_type(*self.param_groups[0]["params"])

    def _numel(self):
        return sum(p.size for p in self.param_groups[0]["params"])

    def _gather_flat_grad(self, grads):
        """The closure's gradients, checked, as one flat vector (None counts as zeros)."""
        params = self.param_groups[0]["params"]
        group = self.param_groups[0]
        if isinstance(grads, np.ndarray):
            grads = [grads]
        try:
            grads = list(grads)
        except TypeError:
            raise TypeError("the closure must return (loss, grads) with grads a sequence of "
                            f"arrays, got grads of type {type(grads).__name__}") from None
        if len(grads) != len(params):
            raise ValueError(f"the closure returned {len(grads)} gradients for {len(params)} "
                             "parameters (one per parameter; None for no gradient)")
        views = []
        for i, (p, g) in enumerate(zip(params, grads)):
            flat = self._prepare_grad(g, p, group, f"grads[{i}]")
            views.append(np.zeros(p.size, p.dtype) if flat is None else flat)
        return np.concatenate(views).astype(self._dtype, copy=False)

    def _evaluate(self, closure):
        result = closure()
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise TypeError("the closure must return (loss, grads), got "
                            f"{type(result).__name__}")
        loss, grads = result
        return loss, self._gather_flat_grad(grads)

    def _add_grad(self, step_size, update):
        """``x <- x + step_size * update``, parameter by parameter (torch's ``add_``)."""
        offset = 0
        for p in self.param_groups[0]["params"]:
            with flat_view(p) as flat:
                flat[...] = axpy(flat, step_size, update[offset:offset + p.size].astype(
                    flat.dtype, copy=False))
            offset += p.size

    def _flat_params(self):
        return np.concatenate([p.reshape(-1) for p in self.param_groups[0]["params"]]).astype(
            self._dtype, copy=False)

    def _clone_param(self):
        return [p.copy() for p in self.param_groups[0]["params"]]

    def _set_param(self, values):
        for p, value in zip(self.param_groups[0]["params"], values):
            p[...] = value

    def _directional_evaluate(self, closure, x, t, d):
        self._add_grad(t, d)
        loss, flat_grad = self._evaluate(closure)
        loss = float(loss)
        self._set_param(x)
        return loss, flat_grad

    # torch's vector operations on the flat vectors, as methods so that the 16-bit form
    # (npoptim.precision.lbfgs) can round them as torch does; scalars round as their type does
    def _dot(self, x, y):
        return dot(x, y)

    def _axpy(self, x, alpha, y):
        return axpy(x, alpha, y)

    def _scaled(self, x, scale):
        """``x.mul(scale)``."""
        return x * self._dtype.type(scale)

    def _difference(self, x, y):
        """``x.sub(y)``."""
        return x - y

    def _abs_sum(self, x):
        """``x.abs().sum()``."""
        return torch_sum(np.abs(x))

    def _max_abs(self, x):
        return max_abs(x)

    # ----------------------------------------------------------------------- the step
    def step(self, grads=None, closure=None):
        """Run up to ``max_iter`` iterations; return the closure's first loss.

        The base class's signature: ``step(closure)`` (torch's idiom) or ``step(closure=...)``.
        """
        grads, closure = step_arguments(grads, closure)
        if grads is not None or not callable(closure):
            raise TypeError("LBFGS.step needs a closure: step(closure) with closure() "
                            "returning (loss, grads); it evaluates the loss several times")
        group = self.param_groups[0]
        self._check_group(group)
        if group["line_search_fn"] not in (None, "strong_wolfe", "zoom"):
            raise RuntimeError("only 'strong_wolfe' is supported (and npoptim's 'zoom', "
                               "optax's zoom line search)")
        for i, p in enumerate(group["params"]):
            self._check_param(p, f"params[{i}]")
        saved = self._clone_param()
        try:
            return self._step(closure, group)
        except BaseException:
            self._set_param(saved)  # the state is only written at the end of _step
            raise

    def _step(self, closure, group):
        lr = group["lr"]
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        curvature_condition = group["curvature_condition"]
        scale_init_precond = group["scale_init_precond"]
        dtype = self._dtype.type

        # LBFGS's state is global; like torch, keep it as the first parameter's state.
        # Work on copies of its lists and commit them at the end (atomic step).
        state = self.state.get(0, {})
        func_evals = state.get("func_evals", 0)
        total_iter = state.get("n_iter", 0)

        orig_loss, flat_grad = self._evaluate(closure)
        loss = float(orig_loss)
        current_evals = 1
        func_evals += 1
        opt_cond = self._max_abs(flat_grad) <= tolerance_grad
        if opt_cond:
            self.state[0] = {**state, "func_evals": func_evals, "n_iter": total_iter}
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs = _copy_list(state.get("old_dirs"))
        old_stps = _copy_list(state.get("old_stps"))
        ro = _copy_list(state.get("ro"))
        al = _copy_list(state.get("al"))
        H_diag = state.get("H_diag")
        prev_flat_grad = state.get("prev_flat_grad")
        prev_loss = state.get("prev_loss")
        stepsize = state.get("stepsize")  # the zoom line search's last step (optax's state)

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            total_iter += 1

            # ---- direction
            if total_iter == 1:
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                y = self._difference(flat_grad, prev_flat_grad)
                s = self._scaled(d, t)
                ys = self._dot(y, s)
                if ys > 1e-10 or not curvature_condition:  # store the pair
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    if curvature_condition:
                        ro.append(1.0 / ys)
                        H_diag = ys / self._dot(y, y)
                    else:  # optax: weight 0 where y.s = 0, H0 = 1 where y.y = 0
                        yy = self._dot(y, y)
                        ro.append(1.0 / ys if ys != 0 else dtype(0))
                        H_diag = ys / yy if yy > 0 else dtype(1)
                if not scale_init_precond:
                    H_diag = 1
                num_old = len(old_dirs)
                if al is None:
                    al = [None] * history_size
                # two-loop recursion
                q = -flat_grad
                for i in range(num_old - 1, -1, -1):
                    al[i] = self._dot(old_stps[i], q) * ro[i]
                    q = self._axpy(q, -al[i], old_dirs[i])
                d = r = self._scaled(q, H_diag)
                for i in range(num_old):
                    be_i = self._dot(old_dirs[i], r) * ro[i]
                    r[...] = self._axpy(r, al[i] - be_i, old_stps[i])

            prev_flat_grad = flat_grad.copy()
            prev_loss = loss

            # ---- step length
            first_scale = None
            if total_iter == 1 and scale_init_precond:
                norm = (self._abs_sum(flat_grad) if group["first_step_norm"] == "l1"
                        else np.sqrt(self._dot(flat_grad, flat_grad)))
                first_scale = min(1.0, 1.0 / norm)
                t = first_scale * lr
            else:
                t = lr
            gtd = self._dot(flat_grad, d)
            if gtd > -tolerance_change:  # not a descent direction (any more)
                break

            ls_func_evals = 0
            x_before = self._flat_params() if group["measured_step"] else None
            if line_search_fn == "zoom":
                # optax's order: the direction scaled (first step), times lr, then searched
                # from a step of 1 (or the last step, initial_guess_strategy="keep")
                if first_scale is not None:
                    d = d * dtype(first_scale)
                d = d * dtype(lr)
                guess = (1.0 if group["initial_guess_strategy"] == "one" or stepsize is None
                         else stepsize)
                t, loss, flat_grad, ls_func_evals = self._zoom(closure, group, d, loss,
                                                               flat_grad, guess)
                stepsize = t
                opt_cond = self._max_abs(flat_grad) <= tolerance_grad
            elif line_search_fn is not None:
                x_init = self._clone_param()

                def obj_func(x, t, d):
                    return self._directional_evaluate(closure, x, t, d)

                loss, flat_grad, t, ls_func_evals = strong_wolfe(
                    obj_func, x_init, t, d, loss, flat_grad, gtd,
                    max_ls=max_eval - current_evals, dot=self._dot, max_abs=self._max_abs)
                self._add_grad(t, d)
                opt_cond = self._max_abs(flat_grad) <= tolerance_grad
            else:
                self._add_grad(t, d)
                if n_iter != max_iter:
                    # no re-evaluation after the last iteration (torch's choice)
                    loss, flat_grad = self._evaluate(closure)
                    loss = float(loss)
                    opt_cond = self._max_abs(flat_grad) <= tolerance_grad
                    ls_func_evals = 1

            current_evals += ls_func_evals
            func_evals += ls_func_evals
            if x_before is not None:  # the step as the parameters moved (optax's diff_params)
                d, t = self._flat_params() - x_before, 1.0

            # ---- stopping conditions
            if n_iter == max_iter:
                break
            if current_evals >= max_eval:
                break
            if opt_cond:
                break
            if self._max_abs(self._scaled(d, t)) <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break

        new_state = dict(state, func_evals=func_evals, n_iter=total_iter)
        if al is not None:
            new_state["al"] = al
        new_state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag,
                         prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        if stepsize is not None:
            new_state["stepsize"] = stepsize
        self.state[0] = new_state
        return orig_loss

    def _zoom(self, closure, group, direction, loss, flat_grad, guess):
        """optax's zoom line search along ``direction`` (:func:`zoom_linesearch`); moves the
        parameters by the step found, as ``optax.apply_updates`` adds ``eta * direction``.
        Returns ``(eta, loss, flat_grad, evaluations)`` (loss and gradient at the step)."""
        x_init = self._clone_param()

        def phi(eta):
            value, grad = self._directional_evaluate(closure, x_init, eta, direction)
            return value, dot(grad, direction), grad

        eta, loss, flat_grad, evaluations = zoom_linesearch(
            phi, loss, dot(flat_grad, direction), flat_grad, guess,
            max_linesearch_steps=group["max_linesearch_steps"],
            max_learning_rate=group["max_learning_rate"], tol=group["linesearch_tol"],
            increase_factor=group["increase_factor"], slope_rtol=group["slope_rtol"],
            curv_rtol=group["curv_rtol"], approx_dec_rtol=group["approx_dec_rtol"],
            stepsize_precision=group["stepsize_precision"])
        update = direction * self._dtype.type(eta)  # x + (eta u), rounded twice as in optax
        offset = 0
        for p in self.param_groups[0]["params"]:
            with flat_view(p) as flat:
                flat += update[offset:offset + p.size].astype(flat.dtype, copy=False)
            offset += p.size
        return eta, loss, flat_grad, evaluations

    def _update(self, param, grad, state, group, index, shape):
        raise TypeError("LBFGS updates all parameters together: use step(closure)")

    # ------------------------------------------------------------------------ state_dict
    def state_dict(self):
        """torch's layout; the values torch holds as 0-d tensors become 0-d arrays."""
        out = super().state_dict()
        out["state"] = {i: {k: _export(v) for k, v in entry.items()}
                        for i, entry in out["state"].items()}
        return out

    def _load_param_state(self, entry, param, group, where):
        if not isinstance(entry, dict):
            raise ValueError(f"{where} must be a dict")
        unknown = set(entry) - set(_STATE_KEYS)
        if unknown:
            raise ValueError(f"{where} has entries {sorted(unknown)} that LBFGS does not have")
        # torch casts the state's tensors to the dtype of the parameter holding it
        dtype = param.dtype.type
        numel = self._numel()
        out = {}
        for key, value in entry.items():
            name = f"{where}['{key}']"
            if key in _COUNTERS:
                out[key] = _as_count(value, name)
            elif key in _VECTORS:
                out[key] = None if value is None else _as_vector(value, numel, dtype, name)
            elif key in _VECTOR_LISTS:
                out[key] = None if value is None else [
                    _as_vector(v, numel, dtype, f"{name}[{k}]") for k, v in enumerate(_seq(
                        value, name))]
            elif key in _SCALAR_LISTS:
                out[key] = None if value is None else [
                    None if v is None else _as_scalar(v, dtype, f"{name}[{k}]")
                    for k, v in enumerate(_seq(value, name))]
            else:
                out[key] = None if value is None else _as_scalar(value, dtype, name)
        lengths = {len(out[k]) for k in ("old_dirs", "old_stps", "ro") if out.get(k) is not None}
        if len(lengths) > 1:
            raise ValueError(f"{where}: old_dirs, old_stps and ro must have the same length")
        return out


# ------------------------------------------------------------------------------- helpers
def _copy_list(value):
    return None if value is None else list(value)


def _export(value):
    """A state value as torch's state_dict holds it (NumPy scalars as 0-d arrays)."""
    if isinstance(value, np.generic):
        return np.asarray(value)
    if isinstance(value, list):
        return [_export(v) for v in value]
    return copy.deepcopy(value)


def _seq(value, name):
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{name} must be a list, got {type(value).__name__}")
    return value


def _as_count(value, name):
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)) or \
            value < 0:
        raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    return int(value)


def _as_vector(value, numel, dtype, name):
    arr = np.asarray(value)
    if arr.shape != (numel,) or arr.dtype.kind not in "fiu":
        raise ValueError(f"{name} must be a real flat array of {numel} elements, got shape "
                         f"{arr.shape} and dtype {arr.dtype}")
    return arr.astype(dtype, copy=True)


def _as_scalar(value, dtype, name):
    """A Python number stays one; a 0-d array (torch's 0-d tensor) becomes a NumPy scalar."""
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.generic)):
        return value
    arr = np.asarray(value)
    if arr.shape != () or arr.dtype.kind not in "fiu":
        raise ValueError(f"{name} must be a number or a 0-d array, got {value!r}")
    return dtype(arr)
