"""``npoptim bench``: benchmark sparse and dense steps (see :mod:`npoptim.bench`)."""
from npoptim.bench.runner import add_arguments, run

__all__ = ["add_arguments", "run"]
