"""Figures of optimizer runs (matplotlib, the optional extra ``plot``).

``pip install npoptim[plot]`` installs matplotlib; without it every figure function raises an
``ImportError`` that names the extra. The figures are in :mod:`npoptim.plotting.figures`:
contours with the paths of several optimizers, loss per step, learning rate per step, LAMB/LARS
trust ratio per layer per step, and the momentum phase diagram. Importing this package does
not import matplotlib.
"""
import importlib

__all__ = ["MISSING_MATPLOTLIB", "pyplot"]  # the figures: npoptim.plotting.figures

MISSING_MATPLOTLIB = ("npoptim's plots need matplotlib, which is not installed: "
                      "pip install 'npoptim[plot]' (or pip install matplotlib)")


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend, or a clear ImportError."""
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ImportError as error:
        raise ImportError(MISSING_MATPLOTLIB) from error
    matplotlib.use("Agg", force=False)
    return importlib.import_module("matplotlib.pyplot")


def __getattr__(name):
    figures = importlib.import_module("npoptim.plotting.figures")
    if name in figures.__all__:
        return getattr(figures, name)
    raise AttributeError(f"module 'npoptim.plotting' has no attribute {name!r}")
