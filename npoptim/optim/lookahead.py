r"""Lookahead (Zhang et al., "Lookahead Optimizer: k steps forward, 1 step back", NeurIPS 2019,
arXiv 1907.08610, Algorithm 1): a wrapper around any npoptim optimizer, as
``optax.lookahead`` 0.2.8.

The wrapped ("fast") optimizer updates the parameters every step; every :math:`k`-th step the
slow weights :math:`\phi` (a copy of the parameters taken when the wrapper is built) move
towards the fast ones and the fast ones are reset to them:

.. math::

    \theta &\leftarrow \text{the fast optimizer's step}   &&\text{every step}\\
    \phi &\leftarrow \phi + \alpha(\theta - \phi), \quad \theta \leftarrow \phi
        &&\text{after every } k\text{-th step}

With ``reset_state=True`` the fast optimizer's state is cleared at each synchronization, so
it starts again from its initial state (optax's ``reset_state``: its ``init``). The parameters
the caller holds are the fast weights (compute gradients there); :attr:`Lookahead.slow_params`
are the slow ones (evaluate there). Sources: google-deepmind/optax ``optax/_src/lookahead.py``
(``sync_period`` = ``k``, ``slow_step_size`` = ``alpha``); the authors' PyTorch code
(michaelrzhang/lookahead ``lookahead_pytorch.py``, defaults ``la_steps=5, la_alpha=0.8``,
slow weights under ``cached_params``) computes the same sync as
:math:`\alpha\theta + (1-\alpha)\phi`; its ``pullback_momentum`` options are not implemented.
Defaults: ``k=5`` and ``alpha=0.5``, the paper's experiments.

Lookahead is a wrapper, not an optimizer over parameters, so it is in
:data:`npoptim.registry.WRAPPERS`, not :data:`~npoptim.registry.OPTIMIZERS` (the generic
checkpoint format is written for those); its golden cases name the fast optimizer in their
``wrapped`` field (reference_results/README.md). Its ``state_dict()`` holds the fast
optimizer's ``state_dict()`` and the slow weights. Its sparse kind is the wrapped
optimizer's (``"wrapped"``): a CSR gradient goes to the fast optimizer, and the
synchronization moves every element whatever the gradient.
"""
import numbers
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.optim.optimizer import flat_view, typed_record
from npoptim.optim.options import is_real
from npoptim.optim.wrapper import OptimizerWrapper


class LookaheadHyper(NamedTuple):
    """The hyperparameter of :func:`lookahead_sync_rule`."""

    alpha: float


@kernel
def lookahead_sync_rule(p, fast, s, h):
    """One element of the synchronization; ``fast`` is the fast weight (= ``p``),
    ``s = (slow,)``; both become :math:`\\phi + \\alpha(\\theta - \\phi)`."""
    (slow,) = s
    new = slow + h.alpha * (fast - slow)
    return new, (new,)


@kernel
def _lookahead_sync(param, fast, states, hyper):
    apply_dense(lookahead_sync_rule, param, fast, states, LookaheadHyper(*hyper))


class Lookahead(OptimizerWrapper):
    """Lookahead around ``optimizer`` (an npoptim optimizer); see the module docstring.

    Parameters
    ----------
    optimizer : Optimizer
        The npoptim optimizer to wrap (built on the parameters).
    k : int, default: 5
        Synchronization period: every k-th step the slow weights move.
    alpha : float, default: 0.5
        Step α of the slow weights towards the fast ones.
    reset_state : bool, default: False
        Clear the fast optimizer's state at each synchronization.
    """

    sparse_kind = "wrapped"

    def __init__(self, optimizer, k=5, alpha=0.5, *, reset_state=False):
        super().__init__(optimizer)
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
            raise ValueError(f"k (the synchronization period) must be an integer >= 1, got "
                             f"{k!r}")
        if not is_real(alpha) \
                or not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha (the slow step size) must be in [0, 1], got {alpha!r}")
        if not isinstance(reset_state, (bool, np.bool_)):
            raise ValueError(f"reset_state must be True or False, got {reset_state!r}")
        self.k, self.alpha, self.reset_state = int(k), float(alpha), bool(reset_state)
        self.slow_params = [np.array(p, copy=True) for p in optimizer.params]
        self.steps_since_sync = 0

    def __repr__(self):
        return (f"Lookahead(k={self.k}, alpha={self.alpha}, reset_state={self.reset_state}, "
                f"optimizer={self.optimizer!r})")

    def step(self, grads=None, closure=None):
        """A step of the fast optimizer (which checks everything before it changes
        anything), then, every ``k``-th step, the synchronization; returns the loss."""
        loss = self.optimizer.step(grads, closure)
        self.steps_since_sync = (self.steps_since_sync + 1) % self.k
        if self.steps_since_sync == 0:
            self._sync()
        return loss

    def _sync(self):
        for param, slow in zip(self.optimizer.params, self.slow_params):
            hyper = typed_record(LookaheadHyper, param, alpha=self.alpha)
            with flat_view(param) as flat:
                _lookahead_sync(flat, flat.copy(), (slow.reshape(-1),), hyper)
        if self.reset_state:
            self.optimizer.state.clear()

    def state_dict(self):
        """``{"optimizer": the fast optimizer's state_dict(), "slow_params": [copies],
        "steps_since_sync": n, "k": k, "alpha": alpha, "reset_state": flag}``."""
        return {"optimizer": self.optimizer.state_dict(),
                "slow_params": [p.copy() for p in self.slow_params],
                "steps_since_sync": self.steps_since_sync, "k": self.k, "alpha": self.alpha,
                "reset_state": self.reset_state}

    def load_state_dict(self, state_dict):
        """Restore :meth:`state_dict`'s output; checked whole before anything changes."""
        slow = state_dict["slow_params"]
        if len(slow) != len(self.slow_params) or any(
                not isinstance(s, np.ndarray) or s.shape != p.shape or s.dtype != p.dtype
                for s, p in zip(slow, self.slow_params)):
            raise ValueError("slow_params do not match the parameters (number, shapes, dtypes)")
        steps = state_dict["steps_since_sync"]
        k = state_dict["k"]
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1 \
                or not isinstance(steps, numbers.Integral) or not 0 <= steps < k:
            raise ValueError(f"steps_since_sync {steps!r} does not fit k {k!r}")
        probe = Lookahead(self.optimizer, k, state_dict["alpha"],
                          reset_state=state_dict["reset_state"])   # checks k, alpha, flag
        self.optimizer.load_state_dict(state_dict["optimizer"])
        for mine, theirs in zip(self.slow_params, slow):
            mine[...] = theirs
        self.k, self.alpha, self.reset_state = probe.k, probe.alpha, probe.reset_state
        self.steps_since_sync = int(steps)
