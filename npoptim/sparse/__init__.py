"""Sparse row gradients: validating and canonicalising CSR gradients, and building them.

See :mod:`npoptim.sparse.rowgrad`.
"""
from npoptim.sparse.rowgrad import RowGradient, as_row_gradient, embedding_row_grad

__all__ = ["RowGradient", "as_row_gradient", "embedding_row_grad"]
