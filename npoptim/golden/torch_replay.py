"""A ``torch.optim.Optimizer`` (torch's own or any subclass) as a step function of the golden
cases' protocol (:func:`npoptim.golden.replay.replay`): what ``npoptim check --torch`` runs
(:mod:`npoptim.check.torch`) and :mod:`npoptim.golden.regenerate` measures torch's
implementation paths with.

:func:`make_step` builds the optimizer on tensors copied from the case's parameters (on a
``device``: ``"cpu"``, ``"cuda"``, ...), sets each group's ``lr`` before each step, gives dense
gradients as dense tensors and CSR ones as the sparse COO tensors torch's sparse optimizers
take (SparseAdam, Adagrad, SGD: every stored entry, duplicates and explicit zeros included),
a case's objective as the closure (LBFGS), and returns the parameters and
``state_dict()["state"]`` as NumPy arrays (sparse state densified). What torch refuses (a
keyword the class lacks, sparse gradients it does not take) raises
:class:`~npoptim.golden.replay.Refused` with torch's reason: the case is skipped, not failed.

torch is imported inside the functions only.
"""
import numpy as np

from npoptim.golden.replay import Refused


def make_step(cls, hyper, device="cpu", who=None):
    """``make_step`` (the replay protocol) of ``cls(params, **hyper)`` on ``device``; ``who``
    names the implementation in a refusal (default: the class's name)."""
    import torch
    who = who or cls.__name__

    def refused(exc):
        return Refused(f"{who} refuses: {str(exc).splitlines()[0][:80] if str(exc) else exc!r}")

    def make(params, _hyper):
        tensors = [torch.tensor(p.copy(), device=device, requires_grad=True) for p in params]
        try:
            opt = cls(tensors, **hyper)
        except (RuntimeError, ValueError, TypeError) as exc:
            raise refused(exc) from exc

        def step(grads, lr):
            for group in opt.param_groups:
                group["lr"] = lr
            closure = None
            if callable(grads):  # the case's objective, evaluated at ``params``
                def closure():
                    _write_back(params, tensors)
                    loss, values = grads()
                    for t, g in zip(tensors, values):
                        t.grad = torch.from_numpy(g).to(device)
                    return torch.tensor(loss, dtype=torch.float64)
            else:
                for t, g in zip(tensors, grads):
                    t.grad = torch_grad(g, t)
            try:
                opt.step(closure)
            except (RuntimeError, ValueError, TypeError) as exc:
                raise refused(exc) from exc
            _write_back(params, tensors)
            state = opt.state_dict()["state"]
            return params, [None if state.get(i) is None else
                            {k: to_numpy(v) for k, v in state[i].items() if v is not None}
                            for i in range(len(params))]
        return step
    return make


def _write_back(params, tensors):
    for p, t in zip(params, tensors):
        p[...] = t.detach().cpu().numpy()


def torch_grad(g, p):
    """A gradient as torch takes it for parameter ``p``: None, dense, or a CSR gradient
    (``scipy.sparse`` CSR, or :class:`npoptim.golden.codec.CsrGrad`) as a sparse COO tensor of
    its stored entries (rows of a 2-D CSR are ``p``'s first dimension, columns its trailing
    dimensions flattened)."""
    import torch
    if g is None:
        return None
    if hasattr(g, "indptr"):
        rows = np.repeat(np.arange(p.shape[0]), np.diff(g.indptr))
        trailing = tuple(p.shape[1:])
        cols = np.unravel_index(np.asarray(g.indices), trailing) if trailing else ()
        index = np.stack([rows, *cols]).astype(np.int64).reshape(len(p.shape), -1)
        return torch.sparse_coo_tensor(torch.from_numpy(index),
                                       torch.from_numpy(np.array(g.data)),
                                       size=tuple(p.shape), check_invariants=True,
                                       device=p.device)
    return torch.from_numpy(np.array(g)).to(p.device)


def to_numpy(value):
    """A state value as NumPy (tensors dense, on the CPU; lists element by element)."""
    import torch
    if isinstance(value, torch.Tensor):
        if value.is_sparse:
            value = value.to_dense()
        return value.detach().cpu().numpy().copy()
    if isinstance(value, (list, tuple)):
        return [to_numpy(v) for v in value]
    return value
