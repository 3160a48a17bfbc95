r"""Low-rank projections of matrix gradients, shared by GaLore (:mod:`npoptim.optim.galore`,
an orthogonal projector from the gradient's SVD) and APOLLO (:mod:`npoptim.optim.apollo`, a
random one): which side a projector sits on, the shapes it gives, and the two products.

For a gradient :math:`G` of shape :math:`m \times n` and a projector :math:`P`:

.. math::

    R = G P^\top,\; \tilde G = D P \quad (P: r \times n)   &&\text{projector on the right}\\
    R = P^\top G,\; \tilde G = P D \quad (P: m \times r)   &&\text{projector on the left}

Both products are :func:`~npoptim.kernels.reduction.matmul_of` (each entry summed over the
inner index in order, the same bits on every CPU), never BLAS.
"""
from npoptim.kernels.reduction import matmul_of


def projects_right(shape, projected_side="smaller"):
    """Is the projector on the right (:math:`R = G P^\\top`, :math:`P` of shape
    :math:`r \\times n`)? It reduces the smaller side (the authors' ``proj_type="std"``:
    :math:`m \\ge n`) or the larger one (optax's: :math:`m < n`)."""
    m, n = shape
    return m >= n if projected_side == "smaller" else m < n


def projection_shapes(shape, rank, projected_side="smaller", clip_rank=True):
    """``(projector shape, low-rank shape)`` of a parameter, or None if it is not
    projected (not 2-D, or empty). With ``clip_rank`` the rank is at most ``min(m, n)``
    (GaLore's SVD has no more singular vectors); without it (APOLLO's random projection) it
    is ``rank`` whatever the shape."""
    if len(shape) != 2 or min(shape) == 0:
        return None
    m, n = shape
    r = min(rank, m, n) if clip_rank else rank
    return ((r, n), (m, r)) if projects_right(shape, projected_side) else ((m, r), (r, n))


def project(g, projector, right):
    """The low-rank gradient: :math:`G P^\\top` (``right``) or :math:`P^\\top G`."""
    return matmul_of(g, projector.T) if right else matmul_of(projector.T, g)


def project_back(low, projector, right):
    """The low-rank ``low`` in the full space: :math:`D P` (``right``) or :math:`P D`."""
    return matmul_of(low, projector) if right else matmul_of(projector, low)
