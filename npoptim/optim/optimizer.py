"""The optimizer API shared by every npoptim optimizer, mirroring ``torch.optim.Optimizer``.

* ``Opt(params, **hyper)``: ``params`` is an iterable of float32/float64 NumPy arrays, or of
  dicts ``{"params": [...], **overrides}`` (param groups). Arrays are updated in place, so
  views into a user's model see every change.
* ``opt.step(grads)``: one gradient per parameter, in param-group order; each a dense array of
  the parameter's shape and dtype, a ``scipy.sparse`` CSR gradient (optimizers that accept
  one), or ``None`` (no gradient this step: the parameter and its state are left alone).
  ``step(f)`` or ``step(closure=f)`` calls ``f()``, which returns ``(loss, grads)``, and returns
  the loss: as in torch, ``opt.step(closure)`` passes the closure first and positionally (a
  callable is never a sequence of gradients). LBFGS has the same signature and needs a closure.
* ``opt.param_groups``: list of dicts (``lr`` and the other hyperparameters are mutable);
  ``opt.state``: dict from the parameter's index (its position in param-group order, as in
  torch's ``state_dict``) to its state dict, with torch's state names.
* ``state_dict()`` / ``load_state_dict()``: torch's layout, so a torch optimizer's state,
  its tensors turned into NumPy arrays, can be loaded and continued, and back.

A step is atomic: every gradient, parameter and hyperparameter is checked before the first
array is written, so a step either completes or raises leaving parameters and state untouched.

Subclasses provide ``_check_group`` (hyperparameter checks, torch's ``ValueError`` messages),
``_state_names`` (the array state a group creates), ``_init_state`` and
``_update(param, grad, state, group, index, shape)`` (the flat parameter and gradient, the
parameter's index and shape); the update itself is a per-element rule bound to a driver
(:mod:`npoptim.kernels.drivers`), given the family's hyperparameter record built by
:func:`typed_record`.
"""
import copy
import math
import numbers
import sys

import numpy as np

from npoptim.kernels.jit import kernel
from npoptim.optim.options import STEP_SCOPES
from npoptim.sparse.rowgrad import RowGradient, as_row_gradient, is_sparse
from npoptim.sparse.rowsparse import RowSparseGrad, as_rows_gradient

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


class Optimizer:
    """Base class: param groups, state, gradient checks, atomic steps, torch-layout state_dict.

    Class attributes a subclass sets:

    * ``sparse_kind``: ``"exact"`` (a CSR gradient updates only its stored entries, and that
      equals the dense update because a zero gradient changes nothing), ``"lazy"`` (only stored
      entries are updated; untouched entries keep stale state, which differs from dense) or
      ``"dense-only"`` (a CSR gradient is refused).
    * ``step_in_state_dict``: how torch stores ``step``: ``"tensor"`` (a float32 scalar tensor,
      exported as a 0-d float32 array), ``"int"``, or ``None`` (no step counter).
    * ``needs_closure``: True for an optimizer whose step evaluates the loss itself
      (``step(closure)`` only: LBFGS, PolyakSGD).
    * ``per_example_grads``: True for an optimizer whose step takes per-example gradients,
      each of shape ``(batch, *param.shape)`` (DPSGD).

    :attr:`step_scope` (a convention of the step bookkeeping, not a group option): whether a
    parameter without a gradient this step ages its step count.

    Parameters
    ----------
    params : iterable of ndarray or of dict
        The arrays to optimize (updated in place), or param groups
        ``{"params": [...], **overrides}``; not empty.
    defaults : dict
        The hyperparameters of every group, where a group does not override them.
    state_arrays : callable, optional
        Where state arrays are created: called as ``state_arrays(index, name, shape, dtype,
        fill)``, it returns a writeable C-contiguous array holding ``fill`` (e.g. a
        :class:`npoptim.storage.MemmapStore`); None (the default): in RAM.

    Attributes
    ----------
    param_groups : list of dict
        One dict per param group: its ``"params"`` list and its hyperparameters (mutable: a new
        ``lr`` applies from the next step).
    state : dict
        From a parameter's index (its position in param-group order) to its state dict, with
        torch's state names.
    defaults : dict
        The constructor's hyperparameters, which :meth:`add_param_group` fills missing options
        from.
    """

    sparse_kind = "dense-only"
    step_in_state_dict = "tensor"
    needs_closure = False
    per_example_grads = False
    #: True where ``_update`` creates a state that options switched on later need (RMSprop's
    #: momentum buffer, SGD's); elsewhere a missing state is an error before the step.
    creates_missing_state = False
    #: True where the switch ``decoupled_weight_decay`` is applied by the base class before
    #: the family's rule (see :meth:`_decay_before_rule`); False where the rule has its own
    #: decoupled form (Adam, NAdam) or none.
    decouples_weight_decay = False
    _step_scope = "per_param"

    def __init__(self, params, defaults, state_arrays=None):
        if isinstance(params, np.ndarray) or isinstance(params, dict):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            f"arrays or dicts, but got {type(params).__name__}")
        self.defaults = dict(defaults)
        if self.defaults.get("differentiable"):
            raise ValueError("differentiable=True needs autograd, which npoptim does not have")
        self._check_group(self.defaults)
        self.param_groups = []
        self.state = {}
        #: Where state arrays are created (see :meth:`_new_state_array`); None: in RAM.
        self.state_arrays = state_arrays
        self._nonfinite = "propagate"
        self.skipped_steps = 0
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in sorted(group.items()) if k != "params"]
        return "\n".join(lines + [")"])

    # ----------------------------------------------------------------- parameters and groups
    def add_param_group(self, param_group):
        """Add a group ``{"params": [...], **overrides}``; missing options take the defaults.

        Parameters
        ----------
        param_group : dict
            ``"params"``: an array or an ordered collection of arrays (not a set), none already
            in the optimizer; every other key overrides a default.
        """
        if not isinstance(param_group, dict):
            raise TypeError(f"param group must be a dict, got {type(param_group).__name__}")
        params = param_group.get("params")
        if params is None:
            raise ValueError("param group has no 'params' entry")
        params = [params] if isinstance(params, np.ndarray) else list(params)
        if isinstance(param_group.get("params"), set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of sets is not deterministic; use a list")
        existing = self.params
        for i, p in enumerate(params):
            where = f"param group {len(self.param_groups)}, params[{i}]"
            self._check_param(p, where)
            for q in existing + params[:i]:
                if q is p or np.shares_memory(p, q):
                    raise ValueError(f"{where}: the same array (or overlapping memory) appears "
                                     "more than once in the optimizer's parameters")
        group = dict(self.defaults)
        group.update({k: v for k, v in param_group.items() if k != "params"})
        self._check_group(group)
        group["params"] = params
        self.param_groups.append(group)

    @property
    def params(self):
        """All parameters in param-group order (the order ``step`` expects gradients in)."""
        return [p for group in self.param_groups for p in group["params"]]

    # ----------------------------------------------------------------------------- the step
    def step(self, grads=None, closure=None):
        """Update every parameter that has a gradient; atomic (see the module docstring).

        Parameters
        ----------
        grads : sequence, optional
            One gradient per parameter, aligned with :attr:`params`: a dense array of the
            parameter's shape and dtype, a sparse gradient (optimizers that accept one), or None
            (that parameter and its state are left alone). A callable here is the closure
            (``step(closure)``, as in torch).
        closure : callable, optional
            Called with no arguments, returns ``(loss, grads)``; given instead of ``grads``.

        Returns
        -------
        loss
            The closure's loss, or None without a closure.
        """
        loss = None
        grads, closure = step_arguments(grads, closure)
        if closure is not None:
            loss, grads = closure()
        prepared = self._prepare(grads)
        if self._nonfinite != "propagate" and _first_nonfinite_grad(prepared) is not None:
            if self._nonfinite == "raise":
                index, where = _first_nonfinite_grad(prepared)
                raise FloatingPointError(f"grads[{index}] has a non-finite value at {where}; "
                                         "nothing was changed (nonfinite='raise')")
            self.skipped_steps += 1
            return loss
        self._apply(prepared)
        if self._step_scope == "global":
            self._age_skipped(prepared)
        return loss

    @property
    def nonfinite(self):
        """What a step does with a NaN or infinite gradient value.

        * ``"propagate"`` (default, as torch): the values flow into the parameters and state.
        * ``"raise"``: raise ``FloatingPointError`` naming the gradient and the position,
          before anything changes.
        * ``"skip"``: leave the whole step out (parameters, state and step counts untouched)
          and count it in :attr:`skipped_steps`, as mixed-precision loss scalers do.
        """
        return self._nonfinite

    @nonfinite.setter
    def nonfinite(self, policy):
        if policy not in ("propagate", "raise", "skip"):
            raise ValueError(f"nonfinite must be 'propagate', 'raise' or 'skip', got {policy!r}")
        self._nonfinite = policy

    @property
    def step_scope(self):
        """How the step count ``t`` (bias corrections, momentum schedules) advances.

        * ``"per_param"`` (default, as torch): each parameter counts the steps it had a
          gradient in; a ``None`` gradient leaves the parameter and its whole state alone.
        * ``"global"`` (Keras's ``iterations``, TF.js's accumulated beta powers): every
          ``step()`` call ages every parameter, one with a ``None`` gradient included: its
          values and moments stay as they are but its step count advances (its state is
          created, zero, if it had none, as Keras builds every slot up front), so its next
          gradient is bias-corrected with the optimizer's step count. :meth:`_age` says what
          aging means for a family (NAdam also multiplies its momentum product). Optimizers
          without a step count (``step_in_state_dict`` None) are not changed by it. Only the
          optimizers that take ``flavor=`` (:data:`npoptim.flavors.FLAVORED`, whose aging is
          known) accept it. It is not part of ``state_dict()``, like :attr:`nonfinite`.
        """
        return self._step_scope

    @step_scope.setter
    def step_scope(self, scope):
        if scope not in STEP_SCOPES:
            raise ValueError(f"step_scope must be one of {', '.join(map(repr, STEP_SCOPES))}, "
                             f"got {scope!r}")
        if scope != "per_param" and not getattr(type(self).__init__, "takes_flavor", False):
            raise ValueError(f"{type(self).__name__} has per-parameter step counts only "
                             "(step_scope='global' is defined for the optimizers that take "
                             "flavor=)")
        self._step_scope = scope

    def zero_grad(self, set_to_none=True):
        """Gradients are passed to ``step``, so there is nothing to clear (kept for torch code).

        Parameters
        ----------
        set_to_none : bool, default True
            Accepted, as torch's, and ignored.
        """

    def _prepare(self, grads):
        """Check everything the step will read; return ``[(group, index, param, grad)]``."""
        params = self.params
        if grads is None:
            raise TypeError("step() needs grads: a sequence with one gradient (or None) per "
                            "parameter")
        if isinstance(grads, (np.ndarray, RowSparseGrad)) or hasattr(grads, "tocsr"):
            grads = [grads]  # one gradient (a scipy.sparse one of any format: CSR is checked
            #                  with the others, and another format refused by name)
        grads = list(grads)
        if len(grads) != len(params):
            raise ValueError(f"step() got {len(grads)} gradients for {len(params)} parameters "
                             "(one per parameter, in param-group order; None for no gradient)")
        for i, group in enumerate(self.param_groups):
            try:
                self._check_group(group)
            except ValueError as exc:
                raise ValueError(f"param group {i}: {exc}") from None
        prepared = []
        index = 0
        for group in self.param_groups:
            for param in group["params"]:
                where = f"grads[{index}]"
                self._check_param(param, f"params[{index}]")
                if index in self.state:
                    self._check_state(self.state[index], param, group, f"state[{index}]")
                grad = self._prepare_grad(grads[index], param, group, where)
                if grad is not None:
                    prepared.append((group, index, param, grad))
                index += 1
        return prepared

    def _prepare_grad(self, grad, param, group, where):
        """A flat contiguous dense gradient, a :class:`RowGradient`, or None."""
        if grad is None:
            return None
        if is_sparse(grad) or isinstance(grad, RowSparseGrad):
            if self.sparse_kind == "dense-only":
                raise TypeError(f"{where}: {type(self).__name__} does not accept sparse (CSR) "
                                "gradients; pass a dense array, or use an optimizer that "
                                "takes them (SparseAdam, Adagrad, SGD)")
            if isinstance(grad, RowSparseGrad):
                return as_rows_gradient(grad, param, where)
            return as_row_gradient(grad, param.shape, param.dtype, where)
        if not isinstance(grad, np.ndarray):
            raise TypeError(f"{where}: expected a NumPy array, a scipy.sparse CSR gradient or "
                            f"None, got {type(grad).__name__}")
        grad = np.asarray(grad)  # an ndarray subclass (np.matrix) as a plain view
        if grad.shape != param.shape:
            raise ValueError(f"{where}: gradient has shape {grad.shape}, the parameter has "
                             f"{param.shape}")
        if grad.dtype != param.dtype:
            raise ValueError(f"{where}: gradient has dtype {grad.dtype}, the parameter has "
                             f"{param.dtype}")
        if np.may_share_memory(grad, param):
            grad = grad.copy()
        return np.ascontiguousarray(grad).reshape(-1)

    def _apply(self, prepared):
        """Run the update of every (group, index, param, grad); nothing here may raise."""
        for group, index, param, grad in prepared:
            state = self.state.get(index)
            if state is None:
                state = self.state[index] = self._init_state(param, group)
            with flat_view(param) as flat:
                self._update(flat, grad, state, self._decay_before_rule(flat, group), index,
                             param.shape)

    def _age_skipped(self, prepared):
        """``step_scope="global"``: age every parameter without a gradient this step."""
        if self.step_in_state_dict is None:
            return
        stepped = {index for _, index, _, _ in prepared}
        index = 0
        for group in self.param_groups:
            for param in group["params"]:
                if index not in stepped:
                    state = self.state.get(index)
                    if state is None:
                        state = self.state[index] = self._init_state(param, group)
                    self._age(state, group)
                index += 1

    def _decay_before_rule(self, flat, group):
        """Decoupled weight decay where the family's torch rule has L2 decay only
        (:attr:`decouples_weight_decay`): with ``decoupled_weight_decay`` and a non-zero
        ``weight_decay``, ``p <- p (1 - lr wd)`` before the rule (Keras's ``_apply_weight_decay``
        of every optimizer, and torch's decoupled form in Adam), and the group the rule reads,
        with ``weight_decay`` 0 (no L2 on top)."""
        if not (self.decouples_weight_decay and group.get("decoupled_weight_decay")
                and group["weight_decay"] != 0):
            return group
        np.multiply(flat, flat.dtype.type(1 - group["lr"] * group["weight_decay"]), out=flat)
        return dict(group, weight_decay=0)

    def _age(self, state, group):
        """A step without a gradient under ``step_scope="global"``: advance the step count
        only (a family whose state follows the count too extends this)."""
        state["step"] += 1

    # -------------------------------------------------------------------- subclass hooks
    def _check_param(self, param, where):
        """Raise for an array this optimizer cannot update (float32 or float64 arrays here;
        :mod:`npoptim.precision` takes 16-bit ones)."""
        _check_param(param, where)

    def _check_group(self, group):
        """Raise ``ValueError`` for an invalid hyperparameter (torch's messages)."""

    def _state_names(self, group):
        """Names of the array states a parameter of ``group`` has (e.g. ``exp_avg``)."""
        return ()

    def _state_shapes(self, param, group):
        """``{name: shape}`` of each array state; the parameter's shape unless overridden."""
        return {name: param.shape for name in self._state_names(group)}

    def _init_state(self, param, group):
        """A new state dict: ``step`` 0 and zero arrays of each state's shape."""
        state = {} if self.step_in_state_dict is None else {"step": 0}
        for name, shape in self._state_shapes(param, group).items():
            state[name] = self._new_state_array(param, name, shape)
        return state

    def _new_state_array(self, param, name, shape, fill=0):
        """A new state array of the parameter's dtype holding ``fill``: in RAM, or from the
        constructor's ``state_arrays(index, name, shape, dtype, fill)`` (e.g. a
        :class:`npoptim.storage.MemmapStore`), which returns a writeable C-contiguous array
        (an ``np.memmap`` or an ndarray) holding the initial state, used without a copy."""
        if self.state_arrays is None:
            if fill == 0:
                return np.zeros(shape, param.dtype)
            return np.full(shape, fill, param.dtype)
        index = next(i for i, p in enumerate(self.params) if p is param)
        arr = self.state_arrays(index, name, tuple(shape), param.dtype, fill)
        if (not isinstance(arr, np.ndarray) or type(arr) not in _ARRAY_TYPES
                or arr.shape != tuple(shape) or arr.dtype != param.dtype
                or not arr.flags.c_contiguous or not arr.flags.writeable):
            raise ValueError(f"state_arrays returned no writeable C-contiguous {param.dtype} "
                             f"array of shape {tuple(shape)} for state[{index}]['{name}']")
        return arr

    def _check_state(self, state, param, group, where):
        """Raise ``ValueError`` if a parameter's state does not fit its group's options.

        Kernels index state arrays by the parameter's flat index, so each must be a
        C-contiguous float array of its state's shape (kernel states in the parameter's dtype);
        a state created under other options (e.g. ``amsgrad`` switched on later) lacks a name.
        """
        kernel_states = set(self._state_names(group))
        for name, shape in self._state_shapes(param, group).items():
            value = state.get(name)
            if value is None:
                if self.creates_missing_state:
                    continue
                raise ValueError(f"{where} has no '{name}': the param group's options changed "
                                 "after this parameter's state was created (torch fails the "
                                 "same way); use a new optimizer or load a state_dict made "
                                 "with these options")
            if (type(value) not in _ARRAY_TYPES or value.shape != tuple(shape)
                    or not value.flags.c_contiguous or value.dtype.kind != "f"
                    or (name in kernel_states and value.dtype != param.dtype)):
                raise ValueError(f"{where}['{name}'] must be a C-contiguous float array of "
                                 f"shape {tuple(shape)}"
                                 + (f" and dtype {param.dtype}" if name in kernel_states else ""))

    def _flat_states(self, state, group):
        """The group's array states as a tuple of flat views, in ``_state_names`` order."""
        return tuple(np.asarray(state[name]).reshape(-1) for name in self._state_names(group))

    def _update(self, param, grad, state, group, index, shape):
        """Update the flat ``param`` (and ``state``) with a dense flat ``grad`` or RowGradient;
        ``index`` is the parameter's (its key in :attr:`state`, a noise stream's key) and
        ``shape`` its shape (``param`` is flat)."""
        raise NotImplementedError

    @staticmethod
    def _run(kernels, param, grad, states, hyper):
        """Apply a rule through its ``(dense, rows)`` kernels to a dense or CSR gradient."""
        dense_kernel, rows_kernel = kernels
        if isinstance(grad, RowGradient):
            rows_kernel(param, grad.shape[1], grad.rows, grad.row_ptr, grad.indices, grad.data,
                        states, hyper)
        else:
            dense_kernel(param, grad, states, hyper)

    # ------------------------------------------------------------------------ state_dict
    def state_dict(self):
        """torch's layout: ``{"state": {index: {...}}, "param_groups": [{..., "params": [...]}]}``.

        Arrays are copies with the parameter's shape, except state held in memory-mapped files
        (``np.memmap``, e.g. from ``state_arrays``): those are read-only views of the files
        (torch's state_dict holds references too), so a table larger than memory is never
        copied into RAM; they change with every later step. ``step`` is stored as torch
        stores it. A
        convention switch at torch's value (``torch_conventions``) is left out, so the groups
        have exactly torch's keys; loading fills it back from the defaults.

        Returns
        -------
        dict
            ``{"state": {index: {name: value}}, "param_groups": [{..., "params": [indices]}]}``.
        """
        groups, index = [], 0
        conventions = getattr(type(self), "torch_conventions", {})
        for group in self.param_groups:
            packed = {k: copy.deepcopy(v) for k, v in group.items() if k != "params"
                      and not (k in conventions and v == conventions[k])}
            packed["params"] = list(range(index, index + len(group["params"])))
            index += len(group["params"])
            groups.append(packed)
        state = {}
        for i, entry in sorted(self.state.items()):
            out = {}
            for name, value in entry.items():
                if name == "step":
                    out[name] = (np.array(value, np.float32)
                                 if self.step_in_state_dict == "tensor" else int(value))
                elif isinstance(value, np.memmap):
                    out[name] = np.asarray(value).view()
                    out[name].flags.writeable = False
                else:
                    out[name] = copy.deepcopy(value)
            state[i] = out
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Load a state_dict (npoptim's, or torch's with tensors turned into NumPy arrays).

        Everything is checked before anything changes: the group structure, each
        hyperparameter, each state's names, shapes and values. Arrays are copied and cast to
        the parameter's dtype, as torch does.

        Parameters
        ----------
        state_dict : dict
            Exactly the keys ``"state"`` and ``"param_groups"``, in :meth:`state_dict`'s layout,
            with as many groups, each with as many parameters, as this optimizer has.
        """
        if not isinstance(state_dict, dict) or set(state_dict) != {"state", "param_groups"}:
            raise ValueError("state_dict must be a dict with exactly the keys 'state' and "
                             "'param_groups'")
        saved_groups = state_dict["param_groups"]
        if not isinstance(saved_groups, (list, tuple)) or len(saved_groups) != len(
                self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        new_groups, id_map = [], {}
        for gi, (group, saved) in enumerate(zip(self.param_groups, saved_groups)):
            if not isinstance(saved, dict) or "params" not in saved:
                raise ValueError(f"param_groups[{gi}] must be a dict with a 'params' list")
            if len(saved["params"]) != len(group["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't "
                                 f"match the size of optimizer's group (group {gi})")
            new = dict(self.defaults)
            new.update({k: copy.deepcopy(v) for k, v in saved.items() if k != "params"})
            try:
                self._check_group(new)
            except ValueError as exc:
                raise ValueError(f"param_groups[{gi}]: {exc}") from None
            new["params"] = group["params"]
            new_groups.append(new)
            base = sum(len(g["params"]) for g in self.param_groups[:gi])
            for k, saved_id in enumerate(saved["params"]):
                id_map[saved_id] = base + k
        saved_state = state_dict["state"]
        if not isinstance(saved_state, dict):
            raise ValueError("state_dict['state'] must be a dict")
        params = self.params
        group_of = [g for g in new_groups for _ in g["params"]]
        new_state = {}
        for saved_id, entry in saved_state.items():
            if saved_id not in id_map:
                raise ValueError(f"state for parameter id {saved_id!r}, which no param group "
                                 "lists")
            i = id_map[saved_id]
            new_state[i] = self._load_param_state(entry, params[i], group_of[i], f"state[{i}]")
        if self.state_arrays is not None:
            self._place_loaded_state(new_state)
        variant = self._loaded_variant(new_groups) if hasattr(self, "variant") else None
        for group, new in zip(self.param_groups, new_groups):
            group.clear()
            group.update(new)
        self.state = new_state
        if hasattr(self, "variant"):
            self.variant = variant

    def _loaded_variant(self, new_groups):
        """The ``variant`` after loading ``new_groups``: the loaded switches set the math, not
        the constructor's ``variant=``. Unchanged if they equal the current ones; else the
        variant whose switches they hold, or None when they match none."""
        # the table of the class that defines the variants (a subclass may live elsewhere)
        variants = next((module.VARIANTS for module in (sys.modules.get(cls.__module__)
                                                         for cls in type(self).__mro__)
                         if hasattr(module, "VARIANTS")), {})
        keys = {k for switches in variants.values() for k in switches}
        if all(old.get(k) == new.get(k) for old, new in zip(self.param_groups, new_groups)
               for k in keys):
            return self.variant
        for name, switches in variants.items():
            if all(g.get(k) == v for g in new_groups for k, v in switches.items()):
                return name
        return None

    def _place_loaded_state(self, new_state):
        """Copy loaded state arrays into the optimizer's state arrays (those it has, else new
        ones from ``state_arrays``), in chunks: a table larger than memory is never held in
        RAM whole."""
        params = self.params
        for index, entry in new_state.items():
            current = self.state.get(index, {})
            for name, value in entry.items():
                if not isinstance(value, np.ndarray) or value.ndim == 0:
                    continue
                target = current.get(name)
                if (type(target) not in _ARRAY_TYPES or target.shape != value.shape
                        or target.dtype != params[index].dtype or not target.flags.writeable):
                    target = self._new_state_array(params[index], name, value.shape)
                if not np.shares_memory(target, value):
                    _copy_in_chunks(target, value)
                entry[name] = target

    def _load_param_state(self, entry, param, group, where):
        if not isinstance(entry, dict):
            raise ValueError(f"{where} must be a dict")
        shapes = self._state_shapes(param, group)
        expected = set(shapes)
        if self.step_in_state_dict is not None:
            expected.add("step")
        if set(entry) != expected:
            raise ValueError(f"{where} has entries {sorted(entry)}, {type(self).__name__} with "
                             f"these options expects {sorted(expected)}")
        out = {}
        for name, value in entry.items():
            if name == "step":
                out[name] = _as_step(value, f"{where}['step']")
                continue
            arr = np.asarray(value)
            if arr.shape != tuple(shapes[name]):
                raise ValueError(f"{where}['{name}'] has shape {arr.shape}, expected "
                                 f"{tuple(shapes[name])}")
            if arr.dtype.kind not in "fiu":
                raise ValueError(f"{where}['{name}'] must be real numbers, got {arr.dtype}")
            if self.state_arrays is not None and arr.ndim:
                out[name] = arr  # copied into the state arrays once all is checked
            else:
                out[name] = np.array(arr, dtype=param.dtype, order="C")  # kernels need C order
        return out


# --------------------------------------------------------------------------------- helpers
#: The array types parameters and state may have: ndarrays (views included) and memory-mapped
#: files, which the kernels see as plain ndarrays (see flat_view); no other subclass.
_ARRAY_TYPES = (np.ndarray, np.memmap)


def _check_param(p, where):
    if type(p) not in _ARRAY_TYPES:
        raise TypeError(f"{where}: optimizer can only optimize NumPy arrays or np.memmap "
                        f"(not other subclasses such as np.matrix), got {type(p).__name__}")
    if p.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{where}: parameters must be float32 or float64 arrays, got {p.dtype}")
    if not p.flags.writeable:
        raise ValueError(f"{where}: the parameter array is read-only; the optimizer updates "
                         "parameters in place")


def _copy_in_chunks(target, source, chunk_bytes=1 << 24):
    """``target[...] = source`` (cast to ``target``'s dtype) a block of rows at a time."""
    rows = target.reshape(target.shape[0], -1)
    source = source.reshape(source.shape[0], -1)
    step = max(1, chunk_bytes // max(1, rows.shape[1] * rows.itemsize))
    for start in range(0, rows.shape[0], step):
        rows[start:start + step] = source[start:start + step]


def _as_step(value, where):
    step = float(np.asarray(value).reshape(()) if not isinstance(value, numbers.Number)
                 else value)
    if not math.isfinite(step) or step < 0 or step != int(step):
        raise ValueError(f"{where} must be a non-negative whole number, got {value!r}")
    return int(step)


@kernel
def _first_nonfinite(values):
    """Index of the first NaN or infinite value of a flat array, or -1."""
    for i in range(values.size):
        if not np.isfinite(values[i]):
            return i
    return -1


def _first_nonfinite_grad(prepared):
    """``(param index, position)`` of the first non-finite gradient value, or None."""
    for _, index, param, grad in prepared:
        if isinstance(grad, RowGradient):
            k = _first_nonfinite(grad.data)
            if k >= 0:
                j = int(np.searchsorted(grad.row_ptr, k, side="right")) - 1
                return index, f"row {int(grad.rows[j])}, column {int(grad.indices[k])}"
        else:
            k = _first_nonfinite(grad)
            if k >= 0:
                example = ""
                if grad.size != param.size:   # per-example gradients (DPSGD), flattened
                    b, k = divmod(k, param.size)
                    example = f"example {b}, "
                return index, (f"{example}index "
                               f"{tuple(int(i) for i in np.unravel_index(k, param.shape))}")
    return None


class flat_view:
    """Context manager giving a flat 1-D array that writes through to ``param``.

    A C-contiguous parameter is reshaped (a view, no copy; an ``np.memmap`` becomes a plain
    ndarray view of the same pages); any other view is copied in and written back on exit, so
    the caller's array sees the update either way.
    """

    def __init__(self, param):
        self.param = param

    def __enter__(self):
        if self.param.flags.c_contiguous:
            self.flat = np.asarray(self.param).reshape(-1)
        else:
            self.flat = np.asarray(self.param).ravel(order="C").copy()
        return self.flat

    def __exit__(self, *exc):
        if not self.param.flags.c_contiguous:
            self.param[...] = self.flat.reshape(self.param.shape)
        return False


def step_arguments(grads, closure):
    """``(grads, closure)`` of a ``step(grads=None, closure=None)`` call: a callable passed as
    ``grads`` is the closure (torch's positional ``step(closure)``); both is a TypeError."""
    if callable(grads):
        if closure is not None:
            raise TypeError("step() got two closures")
        grads, closure = None, grads
    if closure is not None and grads is not None:
        raise TypeError("pass grads or a closure that returns (loss, grads), not both")
    return grads, closure


def loss_and_grads(name, grads, closure):
    """``(loss, grads)`` from the closure of an optimizer whose step needs the loss
    (PolyakSGD, Momo): ``TypeError`` without a closure or for a loss that is not a real
    number, before anything changes."""
    grads, closure = step_arguments(grads, closure)
    if closure is None:
        raise TypeError(f"{name} needs the loss: call step(closure), with closure() "
                        "returning (loss, grads)")
    loss, grads = closure()
    if not isinstance(loss, numbers.Real) or isinstance(loss, bool):
        raise TypeError(f"closure() must return (loss, grads) with a real loss, got "
                        f"{type(loss).__name__}")
    return loss, grads


def typed(param, *values):
    """Scalars of the parameter's dtype, as a tuple (for a kernel)."""
    cast = param.dtype.type
    return tuple(cast(v) for v in values)


def typed_record(record, param, **values):
    """The fields of the hyperparameter record ``record(**values)`` (a ``typing.NamedTuple``
    class) in its order, each a scalar of the parameter's dtype (a flag is 1 or 0).

    A plain tuple: the kernel that binds a rule to a driver rebuilds the record
    (``record(*hyper)``, compiled), because Numba's dispatcher types a plain tuple of scalars
    in C and a NamedTuple in Python, which cost microseconds per call (measured: 2 us), once
    per parameter and step."""
    if len(values) != len(record._fields):
        raise TypeError(f"{record.__name__} has the fields {', '.join(record._fields)}; got "
                        f"{', '.join(values)}")
    cast = param.dtype.type
    return tuple([cast(values[name]) for name in record._fields])
