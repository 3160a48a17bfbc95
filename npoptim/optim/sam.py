r"""SAM, sharpness-aware minimization (Foret et al., "Sharpness-Aware Minimization for
Efficiently Improving Generalization", ICLR 2021, arXiv 2010.01412): a wrapper around any
npoptim optimizer, as ``optax.contrib.sam`` 0.2.8 with its normalized-SGD adversary.

Each step calls the closure (``closure()`` returns ``(loss, grads)`` at the current
parameters) ``1 + adversarial_steps`` times. With :math:`\rho` (``rho``) and the global norm
:math:`\|g\|` over every parameter's gradient:

.. math::

    \tilde\theta_0 &= \theta, \qquad g_0 = \nabla f(\theta)\\
    \tilde\theta_{i+1} &= \tilde\theta_i + \rho\,\big(g_i / (\|g_i\| + \epsilon)\big),
        \qquad g_{i+1} = \nabla f(\tilde\theta_{i+1})
        \qquad (i = 0 \dots n-1)\\
    \theta &\leftarrow \text{the wrapped optimizer's step at } \theta \text{ with the
        gradient } g_n

(``adversarial_steps`` :math:`n = 1`: the paper's SAM, its Algorithm 1 with
:math:`p = 2`). The parameters are restored bit for bit to :math:`\theta` before the wrapped
optimizer steps, so its state and any lr schedule see only the outer steps; ``step`` returns
the loss at :math:`\theta`. A zero gradient (:math:`\|g_i\| + \epsilon = 0`) does not
perturb (optax divides by zero there and gives NaN).

Sources: google-deepmind/optax ``optax/contrib/_sam.py``, ``sam(optimizer,
chain(normalize(), sgd(rho)), sync_period=n + 1, opaque_mode=True)``: its ``grad_fn`` is the
closure, its adversarial update ``-(-rho * g / ‖g‖)``, applied cumulatively. ``eps`` (0 in
optax) is the ``1e-12`` the authors' PyTorch code adds to the norm (davda54/sam ``sam.py``,
``scale = rho / (grad_norm + 1e-12)``; its default ``rho=0.05`` is npoptim's). The authors'
``adaptive`` (ASAM) option is not implemented.

SAM is a wrapper, like :class:`~npoptim.optim.lookahead.Lookahead`; its ``state_dict()``
holds the wrapped optimizer's and its own settings (it has no state of its own).
"""
import math
import numbers
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.reduction import grad_sumsq
from npoptim.optim.optimizer import flat_view, step_arguments, typed_record
from npoptim.optim.wrapper import OptimizerWrapper


class SAMHyper(NamedTuple):
    """One ascent's hyperparameters of :func:`sam_ascent_rule`."""

    rho: float
    norm: float    # ‖g‖ + ε


@kernel
def sam_ascent_rule(p, g, s, h):
    """One element of the adversarial step :math:`p + \\rho\\,(g / \\|g\\|)` (no state)."""
    return p + h.rho * (g / h.norm), s


@kernel
def _sam_ascent(param, grad, states, hyper):
    apply_dense(sam_ascent_rule, param, grad, states, SAMHyper(*hyper))


class SAM(OptimizerWrapper):
    """SAM around ``optimizer`` (an npoptim optimizer taking gradients); see the module
    docstring. ``step(closure)`` only."""

    needs_closure = True
    sparse_kind = "dense-only"   # the closure's gradients are dense

    def __init__(self, optimizer, rho=0.05, *, eps=0.0, adversarial_steps=1):
        super().__init__(optimizer)
        self._require_one_gradient_per_parameter()
        self.rho, self.eps, self.adversarial_steps = self._checked(rho, eps, adversarial_steps)

    @staticmethod
    def _checked(rho, eps, adversarial_steps):
        for name, value in (("rho", rho), ("eps", eps)):
            if isinstance(value, bool) or not isinstance(value, numbers.Real) \
                    or not 0.0 <= value < math.inf:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if isinstance(adversarial_steps, bool) or not isinstance(
                adversarial_steps, numbers.Integral) or adversarial_steps < 1:
            raise ValueError(f"adversarial_steps must be an integer >= 1, got "
                             f"{adversarial_steps!r}")
        return float(rho), float(eps), int(adversarial_steps)

    def __repr__(self):
        return (f"SAM(rho={self.rho}, eps={self.eps}, adversarial_steps="
                f"{self.adversarial_steps}, optimizer={self.optimizer!r})")

    def step(self, grads=None, closure=None):
        """One SAM step (see the module docstring); returns the loss at the parameters.
        Everything is checked before anything changes: a gradient the closure returns that
        does not fit raises with the parameters restored and the wrapped optimizer
        untouched."""
        grads, closure = step_arguments(grads, closure)
        if closure is None:
            raise TypeError("SAM needs a closure: call step(closure), with closure() "
                            "returning (loss, grads) at the current parameters")
        params = self.optimizer.params
        loss, grads = closure()
        grads = self._checked_grads(grads, params)
        saved = [p.copy() for p in params]
        try:
            for _ in range(self.adversarial_steps):
                self._ascend(params, grads)
                _, grads = closure()
                grads = self._checked_grads(grads, params)
        finally:
            for p, p0 in zip(params, saved):
                p[...] = p0
        self.optimizer.step(grads)
        return loss

    @staticmethod
    def _checked_grads(grads, params):
        """The closure's gradients as a list: dense arrays of each parameter's shape and
        dtype, or None."""
        grads = [grads] if isinstance(grads, np.ndarray) else list(grads)
        if len(grads) != len(params):
            raise ValueError(f"closure() returned {len(grads)} gradients for {len(params)} "
                             "parameters")
        for i, (g, p) in enumerate(zip(grads, params)):
            if g is not None and (not isinstance(g, np.ndarray) or g.shape != p.shape
                                  or g.dtype != p.dtype):
                raise ValueError(f"grads[{i}] must be a dense array of shape {p.shape} and "
                                 f"dtype {p.dtype} (or None)")
        # a gradient that is a view of a parameter would move with the ascent and the restore
        return [g.copy() if g is not None and any(np.may_share_memory(g, p) for p in params)
                else g for g in grads]

    def _ascend(self, params, grads):
        """The parameters moved by ``rho g / (‖g‖ + eps)`` (not at all for a zero norm)."""
        flat = [None if g is None else np.ascontiguousarray(g).reshape(-1) for g in grads]
        sumsq = sum(float(grad_sumsq(g)) for g in flat if g is not None)
        norm = math.sqrt(sumsq) + self.eps
        if norm == 0.0:
            return
        for param, g in zip(params, flat):
            if g is None:
                continue
            hyper = typed_record(SAMHyper, param, rho=self.rho, norm=norm)
            with flat_view(param) as view:
                _sam_ascent(view, g, (), hyper)

    def state_dict(self):
        """``{"optimizer": the wrapped optimizer's state_dict(), "rho": .., "eps": ..,
        "adversarial_steps": ..}``."""
        return {"optimizer": self.optimizer.state_dict(), "rho": self.rho, "eps": self.eps,
                "adversarial_steps": self.adversarial_steps}

    def load_state_dict(self, state_dict):
        """Restore :meth:`state_dict`'s output; checked whole before anything changes."""
        if not isinstance(state_dict, dict) or set(state_dict) != {
                "optimizer", "rho", "eps", "adversarial_steps"}:
            raise ValueError("a SAM state_dict has exactly the keys 'optimizer', 'rho', 'eps' "
                             "and 'adversarial_steps'")
        settings = self._checked(state_dict["rho"], state_dict["eps"],
                                 state_dict["adversarial_steps"])
        self.optimizer.load_state_dict(state_dict["optimizer"])
        self.rho, self.eps, self.adversarial_steps = settings
