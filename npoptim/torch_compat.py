"""Moving optimizer state between PyTorch and npoptim, without npoptim importing torch.

npoptim's ``state_dict()`` has torch's layout (``{"state": {index: {...}}, "param_groups":
[...]}``, torch's state names, ``step`` stored as torch stores it), so a run can start in one
library and continue in the other: the next step matches the one the first library would
have taken. Only the tensors need converting, and these two helpers do the remaining
normalisation.

**torch → npoptim.** Build the npoptim optimizer over NumPy copies of the same parameters,
with the same param-group structure, then load torch's state::

    import torch, numpy as np, npoptim
    from npoptim.torch_compat import from_torch_state_dict

    # torch side: model.parameters() trained for a while with torch.optim.Adam
    params = [p.detach().cpu().numpy().copy() for p in model.parameters()]
    sd = topt.state_dict()                        # tensors inside

    def to_numpy(obj):                            # tensors -> NumPy, recursively
        if isinstance(obj, torch.Tensor):
            t = obj.detach().cpu()
            return (t.float() if t.dtype == torch.bfloat16 else t).numpy().copy()
        if isinstance(obj, dict):
            return {k: to_numpy(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(to_numpy(v) for v in obj)
        return obj

    opt = npoptim.Adam(params)                   # same groups, any hyperparameters
    opt.load_state_dict(from_torch_state_dict(to_numpy(sd)))
    opt.step(grads)                              # == topt.step() with the same grads

(:func:`from_torch_state_dict` also accepts the tensors themselves and converts them the same
way, by duck typing, so ``from_torch_state_dict(topt.state_dict())`` works too.) The
parameters' values are not in an optimizer's state_dict: copy them as above.

**npoptim → torch.** ::

    from npoptim.torch_compat import to_torch_state_dict

    sd = to_torch_state_dict(opt.state_dict(), as_tensor=torch.from_numpy)
    with torch.no_grad():
        for t, p in zip(model.parameters(), opt.params):
            t.copy_(torch.from_numpy(p))
    topt.load_state_dict(sd)                      # topt built over model.parameters()

Without ``as_tensor`` the arrays are left as NumPy arrays (normalised as described below), for
a conversion of your own.

Things to know:

* torch keeps ``step`` as a float32 scalar tensor for most optimizers (an ``int`` for
  SparseAdam and LBFGS's counters); npoptim keeps an exact integer and exports torch's form.
  float32 counts exactly only up to 2**24 = 16,777,216 steps, in torch too.
* A param group may carry keys a scheduler added (``initial_lr``, and ``max_lr``, ``min_lr``,
  ``max_momentum``, ``base_momentum`` for the cyclic schedulers); they are kept, as both
  libraries' schedulers expect them after loading.
* torch accepts a scalar tensor as a hyperparameter (``lr=torch.tensor(0.01)``); npoptim's
  hyperparameters are Python numbers, so 0-d arrays and NumPy scalars in ``param_groups`` are
  turned into Python numbers (and back into Python numbers for torch).
"""
import numbers

import numpy as np

__all__ = ["from_torch_state_dict", "to_torch_state_dict"]


def from_torch_state_dict(state_dict):
    """A torch optimizer's ``state_dict()`` in the form npoptim's ``load_state_dict`` takes.

    ``state_dict`` may hold NumPy arrays (tensors converted by you, see the module docstring)
    or the tensors themselves (converted here by duck typing, ``t.detach().cpu().numpy()``,
    bfloat16/float16 widened to float32; torch is never imported). Returns a new dict: state
    arrays are copied as C-contiguous NumPy arrays; integer state indices given as strings
    (e.g. after a JSON round trip) become ints; 0-d arrays and NumPy scalars among the
    hyperparameters become Python numbers. The input is not modified. Shapes, names and values
    are validated by ``load_state_dict`` itself.

    Parameters
    ----------
    state_dict : dict
        a torch optimizer's ``state_dict()``, with tensors or NumPy arrays as its state.
    """
    state_dict = _check_layout(state_dict)
    state = {}
    for key, entry in state_dict["state"].items():
        index = _as_index(key)
        if index in state:
            raise ValueError(f"state index {key!r} appears twice")
        state[index] = _to_numpy(entry)
    groups = []
    for i, group in enumerate(state_dict["param_groups"]):
        if not isinstance(group, dict) or "params" not in group:
            raise ValueError(f"param_groups[{i}] must be a dict with a 'params' list")
        out = {k: _to_python(_to_numpy(v)) for k, v in group.items() if k != "params"}
        out["params"] = [_as_index(k) for k in group["params"]]
        groups.append(out)
    return {"state": state, "param_groups": groups}


def to_torch_state_dict(state_dict, as_tensor=None):
    """An npoptim ``state_dict()`` in the form ``torch.optim.Optimizer.load_state_dict`` takes.

    Arrays become C-contiguous, writeable, native-byte-order copies (what ``torch.from_numpy``
    accepts), and are then passed through ``as_tensor`` if given (``torch.from_numpy`` or
    ``torch.as_tensor``); NumPy scalars and 0-d arrays among the hyperparameters become Python
    numbers; ``step`` keeps the form torch uses for that optimizer (a 0-d float32 array, i.e.
    a scalar tensor, or an int). Returns a new dict; the input is not modified.

    Parameters
    ----------
    state_dict : dict
        an npoptim optimizer's ``state_dict()``.
    as_tensor : callable, optional
        applied to every array, e.g. ``torch.from_numpy``; None leaves NumPy arrays.
    """
    state_dict = _check_layout(state_dict)
    convert = (lambda a: a) if as_tensor is None else as_tensor

    def tensors(obj):
        if isinstance(obj, (np.ndarray, np.generic)):
            return convert(_native_copy(np.asarray(obj)))
        if isinstance(obj, dict):
            return {k: tensors(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(tensors(v) for v in obj)
        return obj

    state = {_as_index(k): tensors(v) for k, v in state_dict["state"].items()}
    groups = []
    for group in state_dict["param_groups"]:
        out = {k: _to_python(v) for k, v in group.items() if k != "params"}
        out["params"] = [_as_index(k) for k in group["params"]]
        groups.append(out)
    return {"state": state, "param_groups": groups}


# --------------------------------------------------------------------------------- helpers
def _check_layout(state_dict):
    if not isinstance(state_dict, dict) or not {"state", "param_groups"} <= set(state_dict):
        raise ValueError("expected an optimizer state_dict: a dict with the keys 'state' and "
                         "'param_groups'")
    if not isinstance(state_dict["state"], dict):
        raise ValueError("state_dict['state'] must be a dict")
    if not isinstance(state_dict["param_groups"], (list, tuple)):
        raise ValueError("state_dict['param_groups'] must be a list")
    return state_dict


def _as_index(key):
    if isinstance(key, bool):
        raise ValueError(f"parameter index {key!r} must be an integer")
    if isinstance(key, numbers.Integral):
        return int(key)
    if isinstance(key, str) and key.strip().lstrip("-").isdigit():
        return int(key)
    raise ValueError(f"parameter index {key!r} must be an integer")


def _is_tensor(obj):
    """A torch.Tensor, recognised without importing torch."""
    return type(obj).__module__.startswith("torch") and hasattr(obj, "detach") and \
        hasattr(obj, "numpy")


def _to_numpy(obj):
    """Tensors -> NumPy arrays (copies), recursively; arrays -> C-contiguous copies."""
    if _is_tensor(obj):
        t = obj.detach().cpu()
        if str(t.dtype) in ("torch.bfloat16", "torch.float16"):
            t = t.float()
        return np.array(t.numpy(), order="C", copy=True)
    if isinstance(obj, np.ndarray):
        return np.array(obj, order="C", copy=True)
    if isinstance(obj, dict):
        return {k: _to_numpy(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_numpy(v) for v in obj)
    return obj


def _to_python(obj):
    """0-d arrays and NumPy scalars -> Python numbers, recursively through lists and tuples."""
    if isinstance(obj, (np.ndarray, np.generic)) and np.ndim(obj) == 0:
        return np.asarray(obj).item()
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_python(v) for v in obj)
    return obj


def _native_copy(arr):
    if arr.dtype.byteorder not in "=|":
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return np.array(arr, order="C", copy=True)
