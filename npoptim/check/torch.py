"""``npoptim check --torch``: which ``torch.optim.Optimizer`` subclass, which npoptim optimizer
it is, which implementation path it takes; its steps are
:func:`npoptim.golden.torch_replay.make_step` (what :mod:`npoptim.golden.regenerate` measures
torch with).

torch is imported inside the functions only (:func:`~npoptim.check.spec.require` names it when
it is missing).
"""
import inspect

from npoptim import registry
from npoptim.check.spec import UsageError, require
from npoptim.golden import torch_replay

#: torch.optim's class name -> the npoptim optimizer it is
TORCH_NAMES = {torch_name: name for name, (_, torch_name) in registry.OPTIMIZERS.items()
               if torch_name}


def optimizer_of(cls):
    """The npoptim optimizer a torch optimizer class is: its own name or its nearest base's
    among torch.optim's (a subclass ``MyAdam(torch.optim.Adam)`` is Adam), else the longest
    of those names its name ends with (``MyAdam(torch.optim.Optimizer)`` is Adam,
    ``FusedAdamW`` AdamW); None if none."""
    for base in inspect.getmro(cls):
        if base.__name__ in TORCH_NAMES:
            return TORCH_NAMES[base.__name__]
    ends = [n for n in TORCH_NAMES if cls.__name__.lower().endswith(n.lower())]
    return TORCH_NAMES[max(ends, key=len)] if ends else None


def check_class(cls, flag="--torch"):
    """``cls`` if it is a ``torch.optim.Optimizer`` subclass, else :class:`UsageError`."""
    torch = require("torch", flag)
    if not (inspect.isclass(cls) and issubclass(cls, torch.optim.Optimizer)):
        raise UsageError(f"{flag}: {cls!r} is not a torch.optim.Optimizer subclass")
    return cls


def call_path(cls, device):
    """The implementation path torch takes by default for ``cls`` on ``device`` (the known
    bugs' ``call_path``): ``"foreach=True"`` off the CPU where the class has a foreach
    option, else ``"foreach=False"`` (torch's default on the CPU)."""
    foreach = "foreach" in inspect.signature(cls.__init__).parameters
    return "foreach=True" if foreach and str(device) != "cpu" else "foreach=False"


def make_step(cls, hyper, device="cpu"):
    """:func:`npoptim.golden.torch_replay.make_step` of ``cls(params, **hyper)`` on
    ``device``, torch required."""
    require("torch", "--torch")
    return torch_replay.make_step(cls, hyper, device)
