"""Switches: a rule's on/off options as values its compiled loop knows when it is compiled.

A rule tests its switches (``if h.nesterov != 0``, ``if h.maximize != 0``) once per element.
When the switch is a number in the record, the test runs in the loop; a loop that LLVM
vectorizes then computes both sides and selects, so every switch costs as if it were on (a
bfloat16 SGD momentum step on 1M elements with nesterov, weight decay and maximize off: 1.31 ms
with the three as numbers, 0.89 ms with them known, the same bits; float16 0.77 against 0.39,
measured on a 2-core AMD EPYC). A :class:`Switch` carries its value in its Numba type: a record
field holding one makes the kernel compile once per combination of switches it meets (and cache
each on disk), and in each the dead side of the test is gone. Under ``NUMBA_DISABLE_JIT`` a
switch is a plain truth value.

In a rule a switch is read as a flag is: ``if h.name:``, ``h.name != 0``, ``h.name == 0``
(nothing else: no arithmetic). :func:`switch` makes one from any truth value.

Numba's dispatcher types a tuple of NumPy scalars in C, but a tuple holding a switch in Python,
field by field: 65 us for a 17-field record on each kernel call (measured), an eighth of a
bfloat16 AdamW step on 1M elements. :func:`fast_typed` registers a record class whose type is
then looked up by its switches' values and its fields' classes.
"""
import operator

from numba import types
from numba.core.imputils import lower_builtin
from numba.core.typing.templates import AbstractTemplate, infer_global, signature
from numba.extending import (NativeValue, intrinsic, models, overload, register_model,
                             typeof_impl, unbox)
from numpy import generic


class Switch:
    """An on/off value whose compiled code is specialized on it (see the module docstring)."""

    __slots__ = ("on",)

    def __init__(self, on):
        self.on = bool(on)

    def __bool__(self):
        return self.on

    def __eq__(self, other):
        return self.on == other

    def __ne__(self, other):
        return self.on != other

    def __hash__(self):
        return hash(self.on)

    def __repr__(self):
        return f"Switch({self.on})"

    def __reduce__(self):
        return switch, (self.on,)


ON, OFF = Switch(True), Switch(False)


def switch(value):
    """:data:`ON` if ``value`` is true, else :data:`OFF`."""
    return ON if value else OFF


class SwitchType(types.Type):
    """The Numba type of a :class:`Switch`: one type for on, one for off."""

    def __init__(self, on):
        self.on = bool(on)
        super().__init__(name=f"Switch({self.on})")


@typeof_impl.register(Switch)
def _typeof_switch(value, context):
    return SwitchType(value.on)


# nothing is stored: the value is the type's
register_model(SwitchType)(models.OpaqueModel)


@unbox(SwitchType)
def _unbox_switch(typ, obj, c):
    return NativeValue(c.context.get_dummy_value())


@intrinsic
def _value(typingctx, x):
    def codegen(context, builder, sig, args):
        return context.get_constant(types.boolean, sig.args[0].on)
    return types.boolean(x), codegen


@infer_global(bool)
class _BoolOfSwitch(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) == 1 and not kws and isinstance(args[0], SwitchType):
            return signature(types.boolean, args[0])


@lower_builtin(bool, SwitchType)
def _bool_of_switch(context, builder, sig, args):
    return context.get_constant(types.boolean, sig.args[0].on)


@overload(operator.ne)
def _switch_ne(a, b):
    if isinstance(a, SwitchType) and isinstance(b, (types.Boolean, types.Number)):
        return lambda a, b: _value(a) != b


@overload(operator.eq)
def _switch_eq(a, b):
    if isinstance(a, SwitchType) and isinstance(b, (types.Boolean, types.Number)):
        return lambda a, b: _value(a) == b


_FAST_TYPED = set()


def fast_typed(record):
    """Type the instances of the record class ``record`` (a ``typing.NamedTuple``) from a cache:
    a record whose fields are all switches and NumPy scalars (whose classes fix their Numba
    types) is typed once per combination of its fields' classes and its switches' values;
    any other is typed as Numba types a tuple. Registering twice does nothing."""
    if record in _FAST_TYPED:
        return
    _FAST_TYPED.add(record)
    typeof_tuple = typeof_impl.dispatch(tuple)
    known = {}

    @typeof_impl.register(record)
    def _typeof_record(value, context):
        key = (context, *[v.on if type(v) is Switch else type(v) for v in value])
        found = known.get(key)
        if found is None:
            found = typeof_tuple(value, context)
            if all(type(v) is Switch or isinstance(v, generic) for v in value):
                known[key] = found
        return found
