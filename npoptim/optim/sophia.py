r"""Sophia: a second-order clipped optimizer with a Hessian-diagonal EMA (Liu et al., "Sophia: A
Scalable Stochastic Second-order Optimizer for Language Model Pre-training", ICLR 2024,
arXiv 2305.14342), as ``optax.contrib.sophia`` 0.2.8.

For each element, with gradient :math:`g`, step count :math:`t` (per parameter, from 1),
:math:`b_1 = 1-\beta_1^t`, the Hessian-diagonal EMA :math:`h` and the current Hessian-diagonal
estimate :math:`\hat h`:

.. math::

    m &\leftarrow \beta_1 m + (1-\beta_1)\,g\\
    u &= \operatorname{clip}\Big(\frac{m / b_1}{\max(\gamma h, \epsilon)},\ -c,\ c\Big)
        + \lambda\theta\\
    \theta &\leftarrow \theta - \lr\, u\\
    h &\leftarrow \beta_2 h + (1-\beta_2)\,\hat h
        \qquad\text{at steps } t = 1, k+1, 2k+1, \dots \text{ only}

(:math:`u` uses :math:`h` *before* this step's update, so the first step, with :math:`h = 0`,
is :math:`\operatorname{clip}(m/(b_1\epsilon))`: a sign step.) :math:`c` is
``clip_threshold`` (1; ``None``: no clipping), :math:`k` ``update_interval`` (10),
:math:`\gamma` ``gamma`` (0.01), :math:`\lambda` ``weight_decay`` (1e-4, decoupled: added to
the update). This is google-deepmind/optax ``optax/contrib/_sophia.py``: ``scale_by_sophia``
(``update_moment``, ``bias_correction``, ``m / maximum(gamma * nu, eps)``, ``clip``, the
Hessian update under ``count % update_interval == 0``), ``add_decayed_weights``,
``scale_by_learning_rate``. The state is kept under the authors' PyTorch names
(Liu-Hong/Sophia ``sophia.py``, ``SophiaG``): ``exp_avg`` (optax's ``mu``) and ``hessian``
(``nu``).

Where the sources differ (``variant``; each switch can also be set on its own):

=================  ===================  ============  ==================
``variant``        ``bias_correction``  ``eps_mode``  ``hessian_update``
=================  ===================  ============  ==================
``"optax"``        True                 ``"max"``     ``"after"``
``"paper"``        False                ``"max"``     ``"before"``
``"sophiag"``      False                ``"added"``   ``"after-kth"``
=================  ===================  ============  ==================

``"optax"`` is the default.

* ``bias_correction=False``: :math:`b_1 = 1` (the paper's Algorithm 3 and the authors' code
  divide by nothing).
* ``eps_mode="added"``: the denominator is :math:`\gamma h + \epsilon` in place of
  :math:`\max(\gamma h, \epsilon)`.
* ``hessian_update``: when :math:`h` takes the estimate. ``"after"``: at steps
  :math:`t = 1, k+1, 2k+1, \dots`, after this step's :math:`u` (optax). ``"before"``: at the
  same steps, before :math:`u` (the paper's Algorithm 3, "if :math:`t \bmod k = 1`", then
  :math:`h_t` in the step). ``"after-kth"``: at :math:`t = k, 2k, \dots`, after :math:`u`: the
  authors' training loop calls ``update_hessian()`` after ``step()`` when
  ``iter_num % hess_interval == hess_interval - 1`` (``iter_num`` from 0), so their first
  :math:`k` steps run with :math:`h = 0`.

``"sophiag"`` (aliases ``"authors"``, ``"sophia_opt"``) is the authors' ``SophiaG``
(Liuhong99/Sophia ``sophia.py``; PyPI ``sophia-opt`` 0.2.2 packages it unchanged):
:math:`\theta \leftarrow \theta(1 - \lr\lambda) - \lr\,\operatorname{sign}(m)
\min(|m| / (\rho\, bs\, h + 10^{-15}), 1)`, which is the rule above with
:math:`\gamma = \rho\cdot bs` (their ``rho`` 0.04 times the ``bs`` argument of their
``step``, 5120: 204.8), :math:`\epsilon = 10^{-15}` and :math:`c = 1` (for :math:`h \ge 0`,
which their Gauss-Newton-Bartlett estimate :math:`\hat g \odot \hat g` always is; pass it as
``hessian=``). Their defaults are ``lr=1e-4``, ``weight_decay=0.1``: the variant sets the
switches, not these. The paper's form (``"paper"``) is the same with :math:`\max(\gamma h,
\epsilon)` and the estimate taken at the step's start.

Where :math:`\hat h` comes from, at a step that updates :math:`h` (exactly one of):

* ``step(grads, hessian=[...])``: the caller's own estimate, one array per parameter (e.g.
  Sophia-G's Gauss-Newton-Bartlett estimate);
* ``step(grads, hvp=fn)``: Hutchinson's estimate :math:`\hat h = r \odot (H r)` (Sophia-H),
  with ``fn(r)`` returning the Hessian-vector products :math:`H r` (a list, one array per
  parameter) for the probe vectors ``r`` (a list of arrays of the parameters' shapes). The
  probes are Rademacher vectors: given as ``probes=[...]`` (how the cross-check feeds optax's
  ``jax.random.rademacher`` samples), or else from the counter-based stream of
  :mod:`npoptim.kernels.counter_stream`, keyed by ``(seed, parameter index, t)``:
  :math:`r_i = 1` where value :math:`i` of the stream is :math:`\ge 0`, else :math:`-1`.
  optax draws Rademacher probes too (the paper's code uses Gaussian ones).

At other steps ``hessian``, ``hvp`` and ``probes`` are not used (``fn`` is not called), so a
caller can pass them every step. With ``hessian_estimate="squared-gradient"`` (a param
group's option; default ``"caller"``: the two sources above) the estimate is instead
:math:`\hat h = g \odot g` of the step's own gradient (the empirical Fisher diagonal; the
paper's Sophia-G squares the gradient of a loss with *sampled* labels, which only the caller
can compute: pass it as ``hessian=``), so the step needs nothing but the gradients; optax
runs it with a ``hessian_diagonal_fn`` returning ``updates * updates``.
Dense gradients only.
"""
import math
import numbers
from typing import NamedTuple

import numpy as np

from npoptim.kernels.counter_stream import standard_normal
from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import constant
from npoptim.optim.noise import check_noise, check_seed
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import (VARIANT_DEFAULT, check_betas, check_choice, check_flag,
                                   check_no_variant, check_nonnegative, flavored, is_real,
                                   resolve_variant)

_ESTIMATES = ("caller", "squared-gradient")
_EPS_MODES = ("max", "added")
_HESSIAN_UPDATES = ("after", "before", "after-kth")
#: The switches each variant sets (see the module docstring).
VARIANTS = {"optax": dict(bias_correction=True, eps_mode="max", hessian_update="after"),
            "paper": dict(bias_correction=False, eps_mode="max", hessian_update="before"),
            "sophiag": dict(bias_correction=False, eps_mode="added",
                            hessian_update="after-kth")}
#: Other names of the variants.
ALIASES = {"authors": "sophiag", "sophia_opt": "sophiag"}


class SophiaHyper(NamedTuple):
    """One step's hyperparameters of :func:`sophia_rule` (built by ``Sophia._update``)."""

    beta1: float
    one_minus_beta1: float
    bias_correction1: float   # 1 - β1^t (1 without bias correction)
    gamma: float
    eps: float
    eps_added: float          # 1: γh + ε; 0: max(γh, ε)
    clip: float               # c (inf without clipping)
    weight_decay: float
    neg_lr: float             # -γ
    update_hessian: float     # 1 at a Hessian-update step, else 0
    hessian_first: float      # 1: h takes the estimate before u (hessian_update="before")
    beta2: float
    one_minus_beta2: float


@kernel
def sophia_rule(p, g, s, h):
    """One element of Sophia; ``s = (exp_avg, hessian, estimate)`` (the estimate read only)."""
    m, hess, estimate = s
    m = h.one_minus_beta1 * g + h.beta1 * m
    zero = constant(0.0, p)
    takes_estimate = h.update_hessian != zero
    if takes_estimate and h.hessian_first != zero:
        hess = h.one_minus_beta2 * estimate + h.beta2 * hess
    denom = h.gamma * hess
    if h.eps_added != zero:
        denom = denom + h.eps
    elif denom < h.eps:   # jnp.maximum(gamma h, eps)
        denom = h.eps
    u = (m / h.bias_correction1) / denom
    if u > h.clip:
        u = h.clip
    elif u < -h.clip:
        u = -h.clip
    u = u + h.weight_decay * p
    if takes_estimate and h.hessian_first == zero:
        hess = h.one_minus_beta2 * estimate + h.beta2 * hess
    return p + h.neg_lr * u, (m, hess, estimate)


@kernel
def _sophia_dense(param, grad, states, hyper):
    apply_dense(sophia_rule, param, grad, states, SophiaHyper(*hyper))


class Sophia(Optimizer):
    """Sophia (see the module docstring); ``step(grads, hessian=None, hvp=None, probes=None)``.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    betas : tuple of float, default: (0.965, 0.99)
        Decay rates (β1, β2) of the momentum and of the Hessian EMA.
    eps : float, default: 1e-08
        Floor ε of the denominator (added to it with ``eps_mode="added"``).
    weight_decay : float, default: 0.0001
        Decoupled weight decay λ, added to the update.
    gamma : float, default: 0.01
        Scale γ of the Hessian EMA in the denominator.
    clip_threshold : float, default: 1.0
        Clip c of the preconditioned step (None: no clipping).
    update_interval : int, default: 10
        Steps k between Hessian updates.
    seed : int, default: 0
        Seed of the probe vectors of Hutchinson's estimate.
    hessian_estimate : str, default: 'caller'
        ``"caller"`` (``step``'s ``hessian=`` or ``hvp=``) or ``"squared-gradient"`` (g ⊙ g).
    bias_correction : bool, default: the variant's
        Bias-correct the momentum (optax).
    eps_mode : str, default: the variant's
        ``"max"`` (max(γh, ε)) or ``"added"`` (γh + ε).
    hessian_update : str, default: the variant's
        When h takes the estimate: ``"after"`` (optax), ``"before"`` (paper) or ``"after-kth"``
        (the authors' loop).
    variant : str, default: 'optax'
        The published form to reproduce (a name of ``VARIANTS`` or ``ALIASES``, see the module
        docstring); it sets every switch whose default is "the variant's", and a switch given
        explicitly overrides it.
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    sparse_kind = "dense-only"

    @flavored
    def __init__(self, params, lr=1e-3, betas=(0.965, 0.99), eps=1e-8, weight_decay=1e-4, *,
                 gamma=0.01, clip_threshold=1.0, update_interval=10, seed=0,
                 hessian_estimate="caller", bias_correction=VARIANT_DEFAULT,
                 eps_mode=VARIANT_DEFAULT, hessian_update=VARIANT_DEFAULT, variant="optax"):
        self._estimates = self._source = None
        self.variant, switches = resolve_variant(
            VARIANTS, ALIASES, variant, dict(bias_correction=bias_correction, eps_mode=eps_mode,
                                             hessian_update=hessian_update))
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      gamma=gamma, clip_threshold=clip_threshold,
                                      update_interval=update_interval, seed=seed,
                                      hessian_estimate=hessian_estimate, **switches))

    def _check_group(self, group):
        check_no_variant(group)
        check_flag(group, "bias_correction")
        check_choice(group, "eps_mode", _EPS_MODES)
        check_choice(group, "hessian_update", _HESSIAN_UPDATES)
        check_nonnegative(group, "lr", "eps", "weight_decay", "gamma")
        check_betas(group["betas"])
        clip = group["clip_threshold"]
        if clip is not None and (not is_real(clip)
                                 or not clip >= 0.0):
            raise ValueError(f"clip_threshold must be a number >= 0 or None, got {clip!r}")
        k = group["update_interval"]
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
            raise ValueError(f"update_interval must be an integer >= 1, got {k!r}")
        check_seed(group["seed"])
        check_choice(group, "hessian_estimate", _ESTIMATES)

    def _state_names(self, group):
        return ("exp_avg", "hessian")

    def step(self, grads=None, closure=None, *, hessian=None, hvp=None, probes=None):
        """As :meth:`Optimizer.step`, with the Hessian-diagonal estimate for the parameters
        whose step updates it (see the module docstring): ``hessian``, or ``hvp`` (and
        optionally ``probes``). Everything, ``hvp``'s products included, is checked before
        anything changes."""
        if hessian is not None and hvp is not None:
            raise TypeError("pass the Hessian-diagonal estimate (hessian=) or a Hessian-vector "
                            "product (hvp=), not both")
        if probes is not None and hvp is None:
            raise TypeError("probes= are the probe vectors of hvp=; pass hvp too")
        params = self.params
        self._estimates = None
        self._source = (None if hessian is None else check_noise(params, hessian, "hessian"),
                        hvp, None if probes is None else check_noise(params, probes, "probes"))
        try:
            return super().step(grads, closure)
        finally:
            self._estimates = self._source = None

    def _due(self, index, group):
        """Whether parameter ``index``'s next step updates its Hessian EMA."""
        done = self.state[index]["step"] if index in self.state else 0
        return _takes_estimate(done + 1, group)

    def _prepare(self, grads):
        prepared = super()._prepare(grads)
        hessian, hvp, probes = self._source
        estimates = {index: grad * grad for group, index, _, grad in prepared
                     if group["hessian_estimate"] == "squared-gradient"
                     and self._due(index, group)}
        if estimates and (hessian is not None or hvp is not None):
            raise TypeError("a param group with hessian_estimate='squared-gradient' makes its "
                            "own estimate: pass no hessian= or hvp=")
        due = [(index, param, group) for group, index, param, _ in prepared
               if self._due(index, group) and index not in estimates]
        if not due:
            self._estimates = estimates
            return prepared
        if hessian is None and hvp is None:
            raise ValueError(f"this step updates the Hessian estimate of parameter(s) "
                             f"{[i for i, _, _ in due]}: pass hessian=[...] or hvp=fn, or "
                             "build Sophia with hessian_estimate='squared-gradient' (the "
                             "estimate from the gradient alone; on the command line: "
                             "npoptim explain Sophia hessian_estimate=squared-gradient)")
        if hessian is not None:
            for index, _, _ in due:
                if hessian[index] is None:
                    raise ValueError(f"hessian[{index}] is None but its step updates the "
                                     "Hessian estimate")
                estimates[index] = hessian[index]
        else:
            vectors = self._probes(due, probes)
            products = check_noise(self.params, hvp(vectors), "hvp(probes)")
            for index, _, _ in due:
                if products[index] is None:
                    raise ValueError(f"hvp returned None for parameter {index}")
                estimates[index] = vectors[index] * products[index]
        self._estimates = estimates
        return prepared

    def _probes(self, due, probes):
        """Rademacher probe vectors, one per parameter (zeros where the step does not update
        the estimate): the caller's, or from the counter stream."""
        params = self.params
        vectors = [np.zeros_like(p) for p in params]
        for index, param, group in due:
            if probes is not None:
                if probes[index] is None:
                    raise ValueError(f"probes[{index}] is None but its step updates the "
                                     "Hessian estimate")
                vectors[index] = probes[index].copy()
            else:
                t = (self.state[index]["step"] if index in self.state else 0) + 1
                z = standard_normal(group["seed"], index, t, param.size)
                vectors[index] = np.where(z >= 0, 1.0, -1.0).astype(param.dtype).reshape(
                    param.shape)
        return vectors

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        step = state["step"]
        due = _takes_estimate(step, group)
        beta1, beta2 = group["betas"]
        clip = group["clip_threshold"]
        estimate = (np.ascontiguousarray(self._estimates[index]).reshape(-1)
                    .copy() if due else np.zeros_like(param))
        hyper = typed_record(SophiaHyper, param, beta1=beta1, one_minus_beta1=1 - beta1,
                             bias_correction1=(1 - beta1 ** step if group["bias_correction"]
                                               else 1.0),
                             gamma=group["gamma"], eps=group["eps"],
                             eps_added=1.0 if group["eps_mode"] == "added" else 0.0,
                             clip=math.inf if clip is None else clip,
                             weight_decay=group["weight_decay"], neg_lr=-group["lr"],
                             update_hessian=1.0 if due else 0.0,
                             hessian_first=1.0 if group["hessian_update"] == "before" else 0.0,
                             beta2=beta2, one_minus_beta2=1 - beta2)
        _sophia_dense(param, grad, self._flat_states(state, group) + (estimate,), hyper)


def _takes_estimate(t, group):
    """Whether step ``t`` (from 1) of a parameter in ``group`` updates its Hessian EMA."""
    k = group["update_interval"]
    if group["hessian_update"] == "after-kth":
        return t % k == 0
    return t % k == 1 % k
