"""Sparse row gradients: validating and canonicalising CSR gradients, and building them; the
row-sparse form (touched rows and a dense block of their gradients, O(touched rows)).

See :mod:`npoptim.sparse.rowgrad` and :mod:`npoptim.sparse.rowsparse`.
"""
from npoptim.sparse.rowgrad import RowGradient, as_row_gradient, embedding_row_grad
from npoptim.sparse.rowsparse import RowSparseGrad, as_rows_gradient, row_sparse_grad

__all__ = ["RowGradient", "as_row_gradient", "embedding_row_grad", "RowSparseGrad",
           "as_rows_gradient", "row_sparse_grad"]
