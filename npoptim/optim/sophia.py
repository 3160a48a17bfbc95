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
(``nu``). The authors' SophiaG itself computes another step (no bias correction,
``sign(m) min(|m| / (rho bs h + 1e-15), 1)``, decay applied to the parameter first); it is
not implemented here.

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

from npoptim.flavors import flavored
from npoptim.kernels.counter_stream import standard_normal
from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import constant
from npoptim.optim.noisy_sgd import check_noise, check_seed
from npoptim.optim.optimizer import Optimizer, check_betas, check_nonnegative, typed_record
from npoptim.optim.variants import check_choice

_ESTIMATES = ("caller", "squared-gradient")


class SophiaHyper(NamedTuple):
    """One step's hyperparameters of :func:`sophia_rule` (built by ``Sophia._update``)."""

    beta1: float
    one_minus_beta1: float
    bias_correction1: float   # 1 - β1^t
    gamma: float
    eps: float
    clip: float               # c (inf without clipping)
    weight_decay: float
    neg_lr: float             # -γ
    update_hessian: float     # 1 at a Hessian-update step, else 0
    beta2: float
    one_minus_beta2: float


@kernel
def sophia_rule(p, g, s, h):
    """One element of Sophia; ``s = (exp_avg, hessian, estimate)`` (the estimate read only)."""
    m, hess, estimate = s
    m = h.one_minus_beta1 * g + h.beta1 * m
    denom = h.gamma * hess
    if denom < h.eps:   # jnp.maximum(gamma h, eps)
        denom = h.eps
    u = (m / h.bias_correction1) / denom
    if u > h.clip:
        u = h.clip
    elif u < -h.clip:
        u = -h.clip
    u = u + h.weight_decay * p
    if h.update_hessian != constant(0.0, p):
        hess = h.one_minus_beta2 * estimate + h.beta2 * hess
    return p + h.neg_lr * u, (m, hess, estimate)


@kernel
def _sophia_dense(param, grad, states, hyper):
    apply_dense(sophia_rule, param, grad, states, SophiaHyper(*hyper))


class Sophia(Optimizer):
    """Sophia (see the module docstring): ``lr``, ``betas``, ``eps``, ``weight_decay``,
    ``gamma``, ``clip_threshold``, ``update_interval``, ``seed``;
    ``step(grads, hessian=None, hvp=None, probes=None)``."""

    sparse_kind = "dense-only"

    @flavored
    def __init__(self, params, lr=1e-3, betas=(0.965, 0.99), eps=1e-8, weight_decay=1e-4, *,
                 gamma=0.01, clip_threshold=1.0, update_interval=10, seed=0,
                 hessian_estimate="caller"):
        self._estimates = self._source = None
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      gamma=gamma, clip_threshold=clip_threshold,
                                      update_interval=update_interval, seed=seed,
                                      hessian_estimate=hessian_estimate))

    def _check_group(self, group):
        check_nonnegative(group, "lr", "eps", "weight_decay", "gamma")
        check_betas(group["betas"])
        clip = group["clip_threshold"]
        if clip is not None and (isinstance(clip, bool) or not isinstance(clip, numbers.Real)
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
        return done % group["update_interval"] == 0

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
                             f"{[i for i, _, _ in due]}: pass hessian=[...] or hvp=fn")
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

    def _update(self, param, grad, state, group):
        due = state["step"] % group["update_interval"] == 0
        state["step"] += 1
        step = state["step"]
        beta1, beta2 = group["betas"]
        clip = group["clip_threshold"]
        estimate = (np.ascontiguousarray(self._estimates[self._current_index]).reshape(-1)
                    .copy() if due else np.zeros_like(param))
        hyper = typed_record(SophiaHyper, param, beta1=beta1, one_minus_beta1=1 - beta1,
                             bias_correction1=1 - beta1 ** step, gamma=group["gamma"],
                             eps=group["eps"], clip=math.inf if clip is None else clip,
                             weight_decay=group["weight_decay"], neg_lr=-group["lr"],
                             update_hessian=1.0 if due else 0.0, beta2=beta2,
                             one_minus_beta2=1 - beta2)
        _sophia_dense(param, grad, self._flat_states(state, group) + (estimate,), hyper)
