"""What the 16-bit optimizers share: 16-bit params, grads and state, and the rounding mode.

A 16-bit optimizer (``npoptim.precision.Adam``, ``AdamW``, ``SGD``, ``KahanAdamW``,
``KahanSGD``) takes its float optimizer's options plus these:

* ``rounding``: ``"per-op"`` rounds the result of every tensor operation of torch's
  single-tensor implementation (its CPU default) to the 16-bit format, as torch does for bfloat16
  and float16 tensors on CPU (each operation computes in float32 and rounds once);
  ``"fused"`` computes the whole step in float32 from the stored 16-bit values and rounds the
  new parameter and state once, as torch's ``fused=True`` kernels ("opmath") do;
  ``"stochastic"`` (Adam/AdamW; bfloat16 or float16) is the fused step with the new parameter rounded
  stochastically (:mod:`npoptim.precision.stochastic`), its draws keyed by ``seed``.
* ``format``: ``"bfloat16"`` or ``"float16"``, needed only for raw ``uint16`` arrays (the bits);
  ``ml_dtypes.bfloat16`` and NumPy ``float16`` arrays carry their format.
* ``torch_cpu_lanes``: None (default), or the number of 16-bit lanes of torch's CPU vectors
  (32 with AVX-512 and with AVX2, as measured) to reproduce the different rounding of torch's
  scalar remainder loop on the last ``n % lanes`` elements of each tensor.

Params, grads and state all have the param's dtype (torch's ``zeros_like(param)`` state); a
gradient of another dtype (a float16 grad for a bfloat16 param) is refused before anything
changes, as is an unknown rounding mode or format. The helpers at the end are the pieces of
torch's 16-bit arithmetic every family's rules and records share.
"""
import numpy as np

from npoptim.kernels.jit import inlined, kernel
from npoptim.kernels.scalar import fma
from npoptim.kernels.switches import fast_typed, switch
from npoptim.optim.optimizer import _as_step
from npoptim.precision.formats import (BFLOAT16, FLOAT16, FORMATS, bits_of, format_of,
                                       from_float32_array)
from npoptim.precision.formats import round_to, to_float32_array

#: every rounding mode; each class lists the ones it has in ``roundings``
ROUNDINGS = ("per-op", "fused", "stochastic")


def check_rounding(group, roundings=ROUNDINGS):
    """``ValueError`` for a rounding mode or format name the optimizer does not have."""
    if group.get("rounding") not in roundings:
        raise ValueError(f"rounding must be one of {', '.join(map(repr, roundings))}, got "
                         f"{group.get('rounding')!r}")
    if group.get("format") is not None and group["format"] not in FORMATS:
        raise ValueError(f"format must be 'bfloat16' or 'float16', got {group['format']!r}")
    lanes = group.get("torch_cpu_lanes")
    if lanes is not None and (not isinstance(lanes, int) or isinstance(lanes, bool)
                              or lanes < 1):
        raise ValueError(f"torch_cpu_lanes must be None or a positive int, got {lanes!r}")
    seed = group.get("seed", 0)
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")


class LowPrecision:
    """Mixin before a float32 optimizer class: 16-bit arrays in, the same torch API out.

    The subclass's ``__init__`` sets ``self._low_precision_defaults = dict(rounding=...,
    format=...)`` before calling the float optimizer's. The subclass's ``_update`` gets flat 16-bit arrays; :meth:`_code` and :func:`bits_of` give
    the format code and the ``uint16`` views its kernels take.
    """

    sparse_kind = "dense-only"
    roundings = ("per-op", "fused")
    #: 0-d states torch keeps as float32 tensors (NAdam's ``mu_product``, ASGD's ``eta`` and
    #: ``mu``): float32 0-d arrays, or of the param's dtype after a ``load_state_dict``, which
    #: casts them as torch's does (see :func:`scalar_state` and :func:`set_scalar_state`)
    scalar_states = ()

    def _check_param(self, param, where):
        if type(param) is not np.ndarray:
            raise TypeError(f"{where}: optimizer can only optimize NumPy arrays, got "
                            f"{type(param).__name__}")
        if not (param.dtype in (np.float16, np.uint16) or param.dtype.name == "bfloat16"):
            raise TypeError(f"{where}: {type(self).__name__} of npoptim.precision takes "
                            f"bfloat16, float16 or uint16 (raw bits) arrays, got {param.dtype}")
        if not param.flags.writeable:
            raise ValueError(f"{where}: the parameter array is read-only; the optimizer "
                             "updates parameters in place")

    def add_param_group(self, param_group):
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        for i, param in enumerate(group["params"]):
            try:
                format_of(param, group["format"])
            except (TypeError, ValueError) as exc:
                del self.param_groups[-1]
                raise type(exc)(f"param group {len(self.param_groups)}, params[{i}]: "
                                f"{exc}") from None

    def _check_group(self, group):
        if "rounding" not in group:
            # the defaults being built by the float optimizer's __init__, which does not know
            # these two options: the subclass's __init__ set them aside
            group.update(self._low_precision_defaults)
        check_rounding(group, self.roundings)
        super()._check_group(group)   # first: it reads a switch's older words as today's
        # the 16-bit kernels compute torch's form only (another framework's convention switch
        # would do nothing here; the float optimizers' decay outside the rule is not rounded as
        # these kernels round)
        conventions = getattr(self, "torch_conventions", {})
        for name, value in conventions.items():
            if group.get(name, value) != value:
                raise ValueError(
                    f"{name}={group[name]!r} is not implemented for 16-bit parameters: "
                    f"npoptim.precision.{type(self).__name__} has torch's conventions only ("
                    + ", ".join(f"{k}={v!r}" for k, v in conventions.items()) + ")")

    def _prepare_grad(self, grad, param, group, where):
        format_of(param, group["format"])  # the group's format may have been edited
        return super()._prepare_grad(grad, param, group, where)

    def _check_state(self, state, param, group, where):
        for name in self.scalar_states:
            value = state.get(name)
            if (type(value) is not np.ndarray or value.shape != ()
                    or value.dtype not in (np.float32, param.dtype)):
                raise ValueError(f"{where}['{name}'] must be a 0-d float32 or {param.dtype} "
                                 "array")
        for name, shape in self._array_state_shapes(param, group).items():
            value = state.get(name)
            if value is None:
                if self.creates_missing_state:
                    continue
                raise ValueError(f"{where} has no '{name}': the param group's options changed "
                                 "after this parameter's state was created")
            if (type(value) is not np.ndarray or value.shape != tuple(shape)
                    or not value.flags.c_contiguous or value.dtype != param.dtype):
                raise ValueError(f"{where}['{name}'] must be a C-contiguous array of shape "
                                 f"{tuple(shape)} and dtype {param.dtype}")

    def _array_state_shapes(self, param, group):
        """``{name: shape}`` of the array states (the parameter's shape, or Adafactor's
        factors), the 0-d :attr:`scalar_states` left out."""
        return {name: shape for name, shape in self._state_shapes(param, group).items()
                if name not in self.scalar_states}

    def _load_param_state(self, entry, param, group, where):
        """A parameter's state from a state_dict: arrays of the param's dtype, or float arrays
        whose values the format holds exactly (torch's 16-bit state widened to float32)."""
        if not isinstance(entry, dict):
            raise ValueError(f"{where} must be a dict")
        shapes = self._array_state_shapes(param, group)
        expected = set(shapes) | set(self.scalar_states)
        if self.step_in_state_dict is not None:
            expected.add("step")
        if set(entry) != expected and not (self.creates_missing_state
                                           and set(entry) <= expected):
            raise ValueError(f"{where} has entries {sorted(entry)}, {type(self).__name__} with "
                             f"these options expects {sorted(expected)}")
        name_of_format = format_of(param, group["format"])
        out = {}
        for name, value in entry.items():
            if name == "step":
                out[name] = _as_step(value, f"{where}['step']")
                continue
            arr = np.asarray(value)
            if name in self.scalar_states:
                out[name] = _loaded_scalar(arr, param, name_of_format, f"{where}['{name}']")
                continue
            if arr.shape != tuple(shapes[name]):
                raise ValueError(f"{where}['{name}'] has shape {arr.shape}, expected "
                                 f"{tuple(shapes[name])}")
            if arr.dtype != param.dtype:
                if arr.dtype.kind != "f":
                    raise ValueError(f"{where}['{name}'] must be {param.dtype} or float "
                                     f"values, got {arr.dtype}")
                wide = arr.astype(np.float32)
                bits = from_float32_array(wide, name_of_format)
                back = to_float32_array(bits, name_of_format)
                if not (np.array_equal(back, wide, equal_nan=True)
                        and np.array_equal(wide, arr, equal_nan=True)):
                    raise ValueError(f"{where}['{name}'] has values that {name_of_format} "
                                     "does not hold exactly")
                arr = bits if param.dtype == np.uint16 else bits.view(param.dtype)
            out[name] = np.array(arr, order="C")
        return out

    @staticmethod
    def _code(param, group):
        """The format code (:data:`npoptim.precision.formats.FORMATS`) of ``param``."""
        return FORMATS[format_of(param, group["format"])]

    def _flat_bits(self, state, group):
        """The group's array states as flat ``uint16`` views, in ``_state_names`` order."""
        return tuple(bits_of(state[name].reshape(-1)) for name in self._state_names(group))


@inlined
def add_alpha(a, alpha, b, code, tail):
    """torch's 16-bit ``a.add(b, alpha=alpha)`` (``alpha`` already in the format): one fused
    multiply-add in the vector loop, the product rounded first in the scalar tail."""
    total = a + round_to(alpha * b, code) if tail else fma(alpha, b, a)
    return round_to(total, code)


@inlined
def _add_alpha_loops(a, alpha, b, code, tail_start, out):
    vector = min(a.size, tail_start)
    for i in range(vector):
        out[i] = add_alpha(a[i], alpha, b[i], code, False)
    for i in range(vector, a.size):
        out[i] = add_alpha(a[i], alpha, b[i], code, True)


@kernel
def add_alpha_array(a, alpha, b, code, tail_start, out):
    """``out = a + alpha * b`` elementwise as :func:`add_alpha`, the elements from
    ``tail_start`` on in torch's scalar remainder loop: two loops, each with its flag a
    constant, written out for each format, the format a constant (as
    :mod:`npoptim.precision.drivers` runs them; tested per element, both formats were
    computed and one selected: 4x slower, measured on 1M bfloat16 values)."""
    if code == BFLOAT16:
        _add_alpha_loops(a, alpha, b, BFLOAT16, tail_start, out)
    else:
        _add_alpha_loops(a, alpha, b, FLOAT16, tail_start, out)


@inlined
def per_op_decayed_grad(p, g, h, tail):
    """torch's per-op ``grad = -grad`` (maximize) then ``grad.add(param, alpha=weight_decay)``
    (L2) in the 16-bit format; ``h`` has the switches ``maximize`` and ``decays`` (torch's
    ``weight_decay != 0``, of the value before its rounding to the format), ``weight_decay``
    and ``code``."""
    if h.maximize:
        g = -g
    if h.decays:
        g = add_alpha(g, h.weight_decay, p, h.code, tail)
    return g


def rounded_scalar(value, code):
    """``value`` as torch turns a scalar into a 16-bit tensor's: to float32, then the format.

    A step rounds its few hyperparameters again each time, and the array conversion costs
    microseconds (a tenth of a 16-bit SGD step on 1K elements): the results are kept, keyed by
    the value's float64 bits (so -0.0 and 0.0 stay apart) and the format."""
    key = (np.float64(value).view(np.uint64).item(), code)
    rounded = _ROUNDED_SCALARS.get(key)
    if rounded is None:
        bits = from_float32_array(np.float32(value), format=("bfloat16", "float16")[code])
        rounded = float(to_float32_array(bits, ("bfloat16", "float16")[code]))
        if len(_ROUNDED_SCALARS) >= 4096:  # a schedule's many learning rates: start over
            _ROUNDED_SCALARS.clear()
        _ROUNDED_SCALARS[key] = rounded
    return rounded


#: rounded_scalar's results: {(float64 bits of the value, format code): float}
_ROUNDED_SCALARS = {}


def tail_start(param, group):
    """The first element of torch's scalar remainder loop (``param.size`` without one, or
    for an optimizer without the option)."""
    lanes = group.get("torch_cpu_lanes")
    return param.size if lanes is None else param.size - param.size % lanes


_TRUTH_VALUES = (bool, np.bool_)


def record16(record, param, group, key=None, **values):
    """The record ``record(**values)`` of a step on ``param``: every number a float32, every
    truth value (a Python or NumPy bool: ``maximize``, ``nesterov``, ``decays``, ...) a
    :class:`~npoptim.kernels.switches.Switch`, so that the kernel is compiled with it known
    (the loop then carries no test of it: see that module), with the format code, the start of
    torch's scalar tail and (records that have one) the stochastic-rounding ``key``."""
    fast_typed(record)
    extra = {} if key is None else {"key": np.uint64(key)}
    given = list(values.values())
    # one conversion of every number (each as np.float32(value) rounds it), a switch for each
    # truth value: a step builds a record per parameter
    numbers = np.array([0 if type(v) in _TRUTH_VALUES else v for v in given], np.float32)
    return record(code=np.int64(LowPrecision._code(param, group)),
                  tail_start=np.int64(tail_start(param, group)), **extra,
                  **{name: switch(value) if type(value) in _TRUTH_VALUES else number
                     for name, value, number in zip(values, given, numbers)})


def _loaded_scalar(arr, param, format, where):
    """A loaded 0-d scalar state cast to the param's dtype, as torch's ``load_state_dict``
    casts every floating-point state but ``step`` (rounded to nearest: float32, then the
    format)."""
    if arr.shape != () or (arr.dtype.kind != "f" and arr.dtype != param.dtype):
        raise ValueError(f"{where} must be a 0-d float array, got shape {arr.shape} and dtype "
                         f"{arr.dtype}")
    if arr.dtype == param.dtype:
        return np.array(arr)
    bits = from_float32_array(arr.astype(np.float32), format)
    return np.array(bits if param.dtype == np.uint16 else bits.view(param.dtype))


def scalar_state(value, format):
    """The float32 value of a 0-d scalar state (float32, or 16-bit bits of ``format``)."""
    if value.dtype == np.float32:
        return np.float32(value)
    return np.float32(to_float32_array(value, format))


def set_scalar_state(target, value, format):
    """Store the float32 ``value`` in the 0-d scalar state ``target``, rounded to its dtype
    (torch's ``copy_`` or in-place op on a float32 or 16-bit 0-d tensor)."""
    if target.dtype == np.float32:
        target[...] = np.float32(value)
    else:
        bits_of(target)[...] = from_float32_array(np.float32(value), format)
