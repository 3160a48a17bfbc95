"""What a wrapper around an npoptim optimizer (:class:`~npoptim.optim.lookahead.Lookahead`,
:class:`~npoptim.optim.sam.SAM`) shares: the wrapped optimizer's parameters and param groups
(so lr schedulers drive it) and torch's ``zero_grad``."""
from npoptim.optim.optimizer import Optimizer


class OptimizerWrapper:
    """Base of the wrappers: ``self.optimizer`` is the wrapped npoptim optimizer."""

    def __init__(self, optimizer):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(self).__name__} wraps an npoptim optimizer, got "
                            f"{type(optimizer).__name__}")
        self.optimizer = optimizer

    def _require_one_gradient_per_parameter(self):
        """``TypeError`` for a wrapped optimizer that takes a closure or per-example gradients
        (a wrapper that computes with, or hands it, one gradient per parameter: SAM,
        Mechanic)."""
        optimizer = self.optimizer
        if optimizer.needs_closure or optimizer.per_example_grads:
            raise TypeError(f"{type(self).__name__} gives the wrapped optimizer one gradient per "
                            f"parameter; {type(optimizer).__name__} takes "
                            + ("a closure" if optimizer.needs_closure
                               else "per-example gradients"))

    @property
    def param_groups(self):
        """The wrapped optimizer's param groups (so lr schedulers drive it)."""
        return self.optimizer.param_groups

    @property
    def params(self):
        return self.optimizer.params

    def zero_grad(self, set_to_none=True):
        """Nothing to clear (kept for torch code)."""
