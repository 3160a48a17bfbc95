r"""SAM, sharpness-aware minimization (Foret et al., "Sharpness-Aware Minimization for
Efficiently Improving Generalization", ICLR 2021, arXiv 2010.01412): a wrapper around any
npoptim optimizer, as ``optax.contrib.sam`` 0.2.8 with its normalized-SGD adversary.

Each step calls the closure (``closure()`` returns ``(loss, grads)`` at the current
parameters) ``1 + adversarial_steps`` times. With :math:`\rho` (``rho``) and the global norm
:math:`\|g\|` over every parameter's gradient:

.. math::

    \tilde\theta_0 &= \theta, \qquad g_0 = \nabla f(\theta)\\
    \tilde\theta_{i+1} &= \tilde\theta_i + \rho\,\big(g_i / (\|g_i\| + \epsilon)\big),
        \qquad g_{i+1} = \nabla f(\tilde\theta_{i+1})\\
    \theta &\leftarrow \text{the wrapped optimizer's step at } \theta
        \text{ with the gradient } g_n

for :math:`i = 0 \dots n-1` (``adversarial_steps`` :math:`n = 1`: the paper's SAM, its Algorithm 1 with
:math:`p = 2`). The parameters are restored bit for bit to :math:`\theta` before the wrapped
optimizer steps, so its state and any lr schedule see only the outer steps; ``step`` returns
the loss at :math:`\theta`. A zero gradient (:math:`\|g_i\| + \epsilon = 0`) does not
perturb (optax divides by zero there and gives NaN).

Sources: google-deepmind/optax ``optax/contrib/_sam.py``, ``sam(optimizer,
chain(normalize(), sgd(rho)), sync_period=n + 1, opaque_mode=True)``: its ``grad_fn`` is the
closure, its adversarial update ``-(-rho * g / ‖g‖)``, applied cumulatively. ``eps`` (0 in
optax) is the ``1e-12`` the authors' PyTorch code adds to the norm (davda54/sam ``sam.py``,
``scale = rho / (grad_norm + 1e-12)``; its default ``rho=0.05`` is npoptim's).

``adaptive=True`` is ASAM (Kwon et al., "ASAM: Adaptive Sharpness-Aware Minimization for
Scale-Invariant Learning of Deep Neural Networks", ICML 2021, arXiv 2102.11600): the ascent
is taken in the parameters' scale, with :math:`T = |\tilde\theta_i| + \eta` (elementwise,
``eta`` :math:`\eta`) and the norm over every parameter,

.. math::

    \tilde\theta_{i+1} = \tilde\theta_i + \rho\,\frac{T^2 g_i}{\|T g_i\| + \epsilon}.

With ``eta=0`` and ``eps=1e-12`` this is davda54/sam's ``adaptive=True``
(``e_w = p² · grad · rho / (‖|p| grad‖ + 1e-12)``); the paper's code (SamsungLabs/ASAM
``asam.py``) takes ``eta=0.01`` and ``rho=0.5``, with ``1e-16`` for ``eps``, and scales only the
parameters whose name contains ``weight``: ``adaptive`` may be one flag per parameter for that
(False: :math:`T = 1` for it). pytorch_optimizer's ``SAM(adaptive=True)`` computes the norm in
float32 whatever the dtype; npoptim computes it in the parameters' dtype.

SAM is a wrapper, like :class:`~npoptim.optim.lookahead.Lookahead`; its ``state_dict()``
holds the wrapped optimizer's and its own settings (it has no state of its own).
"""
import math
import numbers
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.reduction import grad_sumsq, sumsq_pair
from npoptim.kernels.scalar import constant
from npoptim.optim.optimizer import flat_view, step_arguments, typed_record
from npoptim.optim.options import is_real
from npoptim.optim.wrapper import OptimizerWrapper


class SAMHyper(NamedTuple):
    """One ascent's hyperparameters of :func:`sam_ascent_rule`."""

    rho: float
    norm: float    # ‖T g‖ + ε
    adaptive: float  # 1: T = |p| + η (ASAM); 0: T = 1
    eta: float


@kernel
def sam_ascent_rule(p, g, s, h):
    """One element of the adversarial step :math:`p + \\rho\\,(T^2 g / \\|T g\\|)` (no
    state; :math:`T = 1` without ``adaptive``)."""
    if h.adaptive != 0.0:
        t = abs(p) + h.eta
        g = t * t * g
    return p + h.rho * (g / h.norm), s


@kernel
def asam_scaled_term(p, g, s, h):
    """ASAM's scaled gradient :math:`(|p| + \\eta)\\, g` and a zero: :func:`sumsq_pair` of it
    is :math:`(\\|T g\\|^2, 0)` (no state)."""
    return s, (abs(p) + h.eta) * g, constant(0.0, g)


@kernel
def _asam_sumsq(param, grad, hyper):
    return sumsq_pair(asam_scaled_term, param, grad, (), SAMHyper(*hyper))[0]


@kernel
def _sam_ascent(param, grad, states, hyper):
    apply_dense(sam_ascent_rule, param, grad, states, SAMHyper(*hyper))


class SAM(OptimizerWrapper):
    """SAM around ``optimizer`` (an npoptim optimizer taking gradients); see the module
    docstring. ``step(closure)`` only.

    Parameters
    ----------
    optimizer : Optimizer
        The npoptim optimizer to wrap (built on the parameters).
    rho : float, default: 0.05
        Radius ρ of the adversarial step.
    eps : float, default: 0.0
        Term ε added to the gradient norm.
    adversarial_steps : int, default: 1
        Adversarial steps n per step.
    adaptive : bool or sequence of bool, default: False
        ASAM: the ascent in the parameters' scale (one flag, or one per parameter).
    eta : float, default: 0.0
        ASAM's η in T = abs(θ) + η.
    """

    needs_closure = True
    sparse_kind = "dense-only"   # the closure's gradients are dense

    def __init__(self, optimizer, rho=0.05, *, eps=0.0, adversarial_steps=1, adaptive=False,
                 eta=0.0):
        super().__init__(optimizer)
        self._require_one_gradient_per_parameter()
        (self.rho, self.eps, self.adversarial_steps, self.adaptive,
         self.eta) = self._checked(rho, eps, adversarial_steps, adaptive, eta,
                                   len(self.optimizer.params))

    @staticmethod
    def _checked(rho, eps, adversarial_steps, adaptive, eta, count):
        if isinstance(adaptive, (bool, np.bool_)):
            adaptive = [bool(adaptive)] * count
        elif (not isinstance(adaptive, (list, tuple)) or len(adaptive) != count
              or not all(isinstance(a, (bool, np.bool_)) for a in adaptive)):
            raise ValueError(f"adaptive must be True, False or one bool per parameter ({count}), "
                             f"got {adaptive!r}")
        for name, value in (("rho", rho), ("eps", eps), ("eta", eta)):
            if not is_real(value) \
                    or not 0.0 <= value < math.inf:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if isinstance(adversarial_steps, bool) or not isinstance(
                adversarial_steps, numbers.Integral) or adversarial_steps < 1:
            raise ValueError(f"adversarial_steps must be an integer >= 1, got "
                             f"{adversarial_steps!r}")
        if eta != 0.0 and not any(adaptive):
            raise ValueError(f"eta={eta!r} offsets ASAM's scale |p| + eta: it needs adaptive=True "
                             "(for at least one parameter)")
        return float(rho), float(eps), int(adversarial_steps), [bool(a) for a in adaptive], \
            float(eta)

    def __repr__(self):
        adaptive = (f", adaptive={self.adaptive}, eta={self.eta}" if any(self.adaptive) else "")
        return (f"SAM(rho={self.rho}, eps={self.eps}, adversarial_steps="
                f"{self.adversarial_steps}{adaptive}, optimizer={self.optimizer!r})")

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
        """The parameters moved by ``rho T² g / (‖T g‖ + eps)`` (not at all for a zero
        norm)."""
        flat = [None if g is None else np.ascontiguousarray(g).reshape(-1) for g in grads]
        sumsq = 0.0
        for param, g, adaptive in zip(params, flat, self.adaptive):
            if g is None:
                continue
            if adaptive:
                hyper = typed_record(SAMHyper, param, rho=self.rho, norm=1.0, adaptive=1.0,
                                     eta=self.eta)
                with flat_view(param) as view:
                    sumsq += float(_asam_sumsq(view, g, hyper))
            else:
                sumsq += float(grad_sumsq(g))
        norm = math.sqrt(sumsq) + self.eps
        if norm == 0.0:
            return
        for param, g, adaptive in zip(params, flat, self.adaptive):
            if g is None:
                continue
            hyper = typed_record(SAMHyper, param, rho=self.rho, norm=norm,
                                 adaptive=1.0 if adaptive else 0.0, eta=self.eta)
            with flat_view(param) as view:
                _sam_ascent(view, g, (), hyper)

    def state_dict(self):
        """``{"optimizer": the wrapped optimizer's state_dict(), "rho": .., "eps": ..,
        "adversarial_steps": .., "adaptive": [one bool per parameter], "eta": ..}``."""
        return {"optimizer": self.optimizer.state_dict(), "rho": self.rho, "eps": self.eps,
                "adversarial_steps": self.adversarial_steps, "adaptive": list(self.adaptive),
                "eta": self.eta}

    def load_state_dict(self, state_dict):
        """Restore :meth:`state_dict`'s output (one written before ``adaptive`` existed has
        neither ``adaptive`` nor ``eta``: plain SAM); checked whole before anything
        changes."""
        keys = {"optimizer", "rho", "eps", "adversarial_steps"}
        if not isinstance(state_dict, dict) or set(state_dict) not in (
                keys, keys | {"adaptive", "eta"}):
            raise ValueError("a SAM state_dict has exactly the keys 'optimizer', 'rho', 'eps', "
                             "'adversarial_steps', 'adaptive' and 'eta' (the last two may be "
                             "missing together)")
        settings = self._checked(state_dict["rho"], state_dict["eps"],
                                 state_dict["adversarial_steps"],
                                 state_dict.get("adaptive", False), state_dict.get("eta", 0.0),
                                 len(self.optimizer.params))
        self.optimizer.load_state_dict(state_dict["optimizer"])
        (self.rho, self.eps, self.adversarial_steps, self.adaptive,
         self.eta) = settings
