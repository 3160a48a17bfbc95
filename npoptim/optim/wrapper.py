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

    @property
    def param_groups(self):
        """The wrapped optimizer's param groups (so lr schedulers drive it)."""
        return self.optimizer.param_groups

    @property
    def params(self):
        return self.optimizer.params

    def zero_grad(self, set_to_none=True):
        """Nothing to clear (kept for torch code)."""
