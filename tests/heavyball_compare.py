"""heavyball 3.2.1 as the cross-checks run it (tests/test_soap.py, tests/test_kron.py).

heavyball compiles its functions with torch.compile by default (``heavyball.utils.compile_mode
= "max-autotune-no-cudagraphs"``): inductor takes minutes per shape on this CPU-only machine
and fuses the arithmetic (one kernel, its own order of operations), so what ran would not be
the eager arithmetic the update rule reads as. :func:`import_heavyball` sets
``heavyball.utils.compile_mode`` and ``compile_mode_recommended_to_none`` to None (its switches
for eager functions) before the first use; torch's own switches stay as they are (dynamo turned
off here would stay off for the next test file of the worker).

heavyball computes a few scalars as a Python float times an int64 step tensor (the learning
rate ``base_lr * step / step`` of its warmup, the debiased decay ``beta ** step`` of SOAP's
statistics), which torch makes in its *default* dtype, float32: in a float64 run those scalars
are float32-rounded. :func:`trajectory` runs it with ``torch.set_default_dtype(float64)`` for
the float64 comparisons (``default_float64=False`` runs it as it comes), and restores the
default afterwards."""
import contextlib
import warnings

import numpy as np


def import_heavyball():
    import heavyball
    heavyball.utils.compile_mode = None
    heavyball.utils.compile_mode_recommended_to_none = None
    return heavyball


@contextlib.contextmanager
def default_dtype(dtype):
    import torch
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def trajectory(make, params, grads, lrs=None, default_float64=True):
    """``(trajectory, optimizer, tensors)`` of ``make(tensors)`` on copies of ``params``: the
    lr set in every group before each step (heavyball warns once when it changes: silenced),
    a new ``.grad`` each step."""
    import torch
    tensors = [torch.tensor(p.copy()) for p in params]
    out = []
    with default_dtype(torch.float64 if default_float64 else torch.float32), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        optimizer = make(tensors)
        for k, step_grads in enumerate(grads):
            if lrs is not None:
                for group in optimizer.param_groups:
                    group["lr"] = lrs[k]
            for t, g in zip(tensors, step_grads):
                t.grad = torch.tensor(g.copy())
            optimizer.step()
            out.append([t.detach().numpy().copy() for t in tensors])
    return out, optimizer, tensors


def npoptim_trajectory(optimizer, params, grads, lrs=None, **step_kw):
    out = []
    for k, step_grads in enumerate(grads):
        if lrs is not None:
            for group in optimizer.param_groups:
                group["lr"] = lrs[k]
        optimizer.step([g.copy() for g in step_grads],
                       **{name: value[k] for name, value in step_kw.items()})
        out.append([p.copy() for p in params])
    return out


def dyadic_schedule(steps, lr):
    """A warmup and a decay in steps of ``lr / 4``: every value a few bits (exact in float32,
    as heavyball's float32 ``lr * step / step`` keeps them)."""
    quarter = lr / 4
    return [quarter * min(k + 1, 4, max(1, 9 - k // 3)) for k in range(steps)]


def worst_state_error(ours, theirs):
    """Worst error relative to each array's scale."""
    return max(float(np.max(np.abs(a - b))) / max(float(np.max(np.abs(b))), 1e-300)
               for a, b in zip(ours, theirs))


def golden_case(optimizer, case_id):
    """``(case, params, grads, lrs, expected)`` of a committed golden case."""
    import json
    from pathlib import Path
    path = Path(__file__).resolve().parent.parent / "reference_results" / "cases"
    case = next(c for c in json.loads((path / f"{optimizer}.json").read_text())["cases"]
                if c["id"] == case_id)

    def arrays(entries):
        return [np.array(e["data"], np.float64).reshape(e["shape"]) for e in entries]
    steps = case["steps"]
    return (case, arrays(case["params"]), [arrays(s["grads"]) for s in steps],
            [s["lr"] for s in steps], [arrays(s["expected"]["params"]) for s in steps])
