"""The torch side of the comparisons; every function returns None when torch is missing.

torch is imported lazily (never by npoptim itself). Its arrays share memory with nothing of
npoptim's: each torch optimizer gets its own copy of the parameter.
"""
import functools
import warnings


@functools.lru_cache(maxsize=None)
def load():
    """The torch module, or None."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def _tensor(array):
    torch = load()
    return torch.from_numpy(array.copy())


def sparse_lookup_grad(ids, values, shape):
    """What ``nn.Embedding(sparse=True)`` leaves in ``.grad``: an uncoalesced hybrid COO tensor
    with one row of values per lookup (repeats included)."""
    torch = load()
    index = torch.from_numpy(ids).reshape(1, -1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.sparse_coo_tensor(index, torch.from_numpy(values), shape,
                                       check_invariants=False)


def sparse_step(name, param, ids, values):
    """A callable: one step of ``torch.optim.<name>`` (SparseAdam or Adagrad) on a sparse
    gradient built from raw lookups; the step coalesces it, as in training."""
    torch = load()
    if torch is None:
        return None
    p = _tensor(param)
    grad = sparse_lookup_grad(ids, values, tuple(p.shape))
    opt = getattr(torch.optim, name)([p])

    def step():
        p.grad = grad
        opt.step()
    return step


def sparse_end_to_end(name, param, ids, values):
    """A callable: build the sparse COO gradient from raw lookups, then step (as torch's
    embedding backward + optimizer do)."""
    torch = load()
    if torch is None:
        return None
    p = _tensor(param)
    opt = getattr(torch.optim, name)([p])
    shape = tuple(p.shape)

    def step():
        p.grad = sparse_lookup_grad(ids, values, shape)
        opt.step()
    return step


def densify(ids, values, shape):
    """A callable: the sparse lookup gradient turned into a dense tensor (``to_dense``)."""
    torch = load()
    if torch is None:
        return None
    grad = sparse_lookup_grad(ids, values, shape)
    return lambda: grad.to_dense()


def dense_step(name, param, grad, fused=True):
    """A callable: one step of ``torch.optim.<name>(fused=...)`` with a dense gradient, or
    None (no torch, or no such optimizer with that option on this build)."""
    torch = load()
    if torch is None or not hasattr(torch.optim, name):
        return None
    p = _tensor(param)
    p.grad = torch.from_numpy(grad.copy())
    try:
        opt = getattr(torch.optim, name)([p], fused=fused) if fused else getattr(
            torch.optim, name)([p])
        opt.step()
    except (RuntimeError, TypeError, ValueError):
        return None
    return opt.step
