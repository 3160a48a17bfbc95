"""npoptim: deep-learning optimizers in NumPy/SciPy/Numba, agreeing with ``torch.optim``.

Optimizers update NumPy arrays in place from dense gradients, row-sparse gradients (touched
rows and their gradient rows, O(touched rows) whatever the table's size) or ``scipy.sparse``
CSR row gradients::

    import numpy as np, npoptim
    w = np.zeros((1000, 16), np.float32)
    opt = npoptim.SparseAdam([w], lr=1e-2)
    opt.step([npoptim.row_sparse_grad([3, 7, 3], np.ones((3, 16), np.float32), 1000)])

Top-level names: every optimizer in :data:`npoptim.registry.OPTIMIZERS` (imported on first
use), :mod:`npoptim.lr_scheduler`, :class:`Optimizer`, :func:`row_sparse_grad` and
:class:`RowSparseGrad`, :func:`embedding_row_grad` (the CSR form), the
checkpoint functions :func:`save` and :func:`load`, :func:`set_parallel_threshold`, the
:class:`~npoptim.optim.lookahead.Lookahead`, :class:`~npoptim.optim.sam.SAM` and
:class:`~npoptim.optim.mechanic.Mechanic` wrappers,
and :func:`explain` (:mod:`npoptim.explainer`).

Importing npoptim before Numba sets ``NUMBA_DISABLE_INTEL_SVML=1`` (unless it is set): with
Intel's SVML installed, Numba would vectorize the C library's ``log`` and ``pow`` in kernels
with SVML's, whose last bits differ from glibc's (npoptim's results rest on glibc's there:
the float64 jax stream, FTRL's and MADGRAD's powers; see the README, "On any CPU").
"""
import os
import sys

if "numba" not in sys.modules:
    os.environ.setdefault("NUMBA_DISABLE_INTEL_SVML", "1")

import importlib  # noqa: E402

from npoptim import registry  # noqa: E402
from npoptim.checkpoint import load, save  # noqa: E402
from npoptim.kernels.parallel import get_parallel_threshold, set_parallel_threshold  # noqa: E402
from npoptim.optim.optimizer import Optimizer  # noqa: E402
from npoptim.sparse.rowgrad import embedding_row_grad  # noqa: E402
from npoptim.sparse.rowsparse import RowSparseGrad, row_sparse_grad  # noqa: E402

__version__ = "0.1.0"
__all__ = ["Optimizer", "row_sparse_grad", "RowSparseGrad", "embedding_row_grad", "lr_scheduler",
           "save", "load",
           "set_parallel_threshold", "get_parallel_threshold", "Lookahead", "SAM", "Mechanic",
           *registry.OPTIMIZERS, "explain"]


def __getattr__(name):
    if name in registry.OPTIMIZERS:
        return registry.get(name)
    if name == "Lookahead":
        return importlib.import_module("npoptim.optim.lookahead").Lookahead
    if name == "SAM":
        return importlib.import_module("npoptim.optim.sam").SAM
    if name == "Mechanic":
        return importlib.import_module("npoptim.optim.mechanic").Mechanic
    if name in ("lr_scheduler", "flavors", "frameworks"):  # modules, imported on first use
        return importlib.import_module(f"npoptim.{name}")
    if name == "explain":  # the function (its package is npoptim.explainer)
        return importlib.import_module("npoptim.explainer").explain
    raise AttributeError(f"module 'npoptim' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
