"""Cross-checks under a learning-rate schedule, shared by the test files of the optimizers
checked against torch implementations (CAME, MARS, Shampoo, Scion, Adam-mini, SOAP, SPlus,
Kron): a random problem, the two trajectories with the lr set in every param group before
each step, and their worst error."""
import numpy as np


def random_problem(seed, shapes, steps, dtype=np.float64):
    """``(params, grads)``: params uniform in [-1, 1], and ``steps`` lists of Gaussian grads,
    each scaled by a factor drawn from [0.1, 3]."""
    rng = np.random.default_rng(seed)
    params = [np.asarray(rng.uniform(-1, 1, s)).astype(dtype) for s in shapes]
    grads = [[np.asarray(rng.standard_normal(s) * rng.uniform(0.1, 3.0)).astype(dtype)
              for s in shapes] for _ in range(steps)]
    return params, grads


def set_lr(param_groups, lr):
    for group in param_groups:
        group["lr"] = lr


def npoptim_trajectory(optimizer, params, grads, lrs):
    """The params (the arrays ``optimizer`` updates) after each step, copies of the grads
    given, the lr set first."""
    out = []
    for lr, step_grads in zip(lrs, grads):
        set_lr(optimizer.param_groups, lr)
        optimizer.step([g.copy() for g in step_grads])
        out.append([p.copy() for p in params])
    return out


def torch_trajectory(make, params, grads, lrs):
    """``(trajectory, optimizer, tensors)`` of the torch optimizer ``make(tensors)`` built on
    copies of ``params``: a new ``.grad`` tensor each step (``zero_grad(set_to_none=True)``)."""
    import torch
    tensors = [torch.tensor(p.copy()) for p in params]
    optimizer = make(tensors)
    out = []
    for lr, step_grads in zip(lrs, grads):
        set_lr(optimizer.param_groups, lr)
        for t, g in zip(tensors, step_grads):
            t.grad = torch.tensor(g.copy())
        optimizer.step()
        out.append([t.detach().numpy().copy() for t in tensors])
    return out, optimizer, tensors


def worst_error(actual, expected):
    """The largest error of any step and tensor, relative to that tensor's scale (max |x|)."""
    return max(float(np.max(np.abs(a - e))) / max(float(np.max(np.abs(e))), 1e-300)
               for a_step, e_step in zip(actual, expected) for a, e in zip(a_step, e_step))
