"""npoptim.kernels.switches: a record's on/off field compiled as a constant, one specialization
per value, read as a plain truth value in Python."""
import pickle
from typing import NamedTuple

import numba
import numpy as np
import pytest

from npoptim.kernels.switches import OFF, ON, Switch, SwitchType, switch


class Record(NamedTuple):
    scale: float
    flag: Switch


@numba.njit
def _step(x, h):
    out = np.empty_like(x)
    for i in range(x.size):
        if h.flag:
            out[i] = x[i] * h.scale + 1
        else:
            out[i] = x[i] * h.scale
        if h.flag != 0:
            out[i] += 10
        if h.flag == 0:
            out[i] -= 10
    return out


def test_a_switch_is_a_truth_value_in_python():
    assert switch(1) is ON and switch(np.bool_(False)) is OFF and switch([]) is OFF
    assert bool(ON) and not OFF
    assert ON == 1 and ON == True and ON != 0 and OFF == 0 and OFF != 1  # noqa: E712
    assert pickle.loads(pickle.dumps(ON)) is ON and pickle.loads(pickle.dumps(OFF)) is OFF
    assert repr(ON) == "Switch(True)" and hash(ON) == hash(True)


COMPILED = pytest.mark.skipif(numba.config.DISABLE_JIT, reason="tests compiled code; "
                              "under NUMBA_DISABLE_JIT there is none")


@COMPILED
def test_each_value_compiles_its_own_specialization_with_the_python_result():
    x = np.arange(4.0)
    for value in (True, False):
        h = Record(2.0, switch(value))
        assert np.array_equal(_step(x, h), _step.py_func(x, h))
    expected = x * 2 + 11, x * 2 - 10
    assert np.array_equal(_step(x, Record(2.0, ON)), expected[0])
    assert np.array_equal(_step(x, Record(2.0, OFF)), expected[1])
    kinds = sorted(sig[1][1].on for sig in _step.signatures)
    assert kinds == [False, True]  # one compiled loop per value, not one that tests it
    assert all(isinstance(sig[1][1], SwitchType) for sig in _step.signatures)


@COMPILED
def test_a_switch_refuses_arithmetic_when_compiled():
    @numba.njit
    def add(h):
        return h.flag + 1
    with pytest.raises(numba.core.errors.TypingError):
        add(Record(1.0, ON))


def test_16_bit_records_carry_their_flags_as_switches():
    from npoptim.precision.optimizer import record16
    from npoptim.precision.sgd import SGD16Hyper
    param = np.zeros(4, np.float16)
    group = dict(format=None, torch_cpu_lanes=None)
    h = record16(SGD16Hyper, param, group, weight_decay=0.0, neg_lr=-0.1, maximize=False,
                 decays=np.float64(0.0) != 0, momentum=0.9, momentum_alpha=0.9,
                 one_minus_dampening=1.0, nesterov=True)
    assert h.maximize is OFF and h.decays is OFF and h.nesterov is ON
    assert type(h.momentum) is np.float32 and type(h.weight_decay) is np.float32
    assert h.neg_lr == np.float32(-0.1) and h.momentum == np.float32(0.9)


class FastRecord(NamedTuple):
    scale: float
    flag: Switch


def test_a_fast_typed_record_has_the_type_numba_gives_it_per_switch_value():
    from numba.core.typing.typeof import Purpose, typeof_impl
    from npoptim.kernels.switches import fast_typed
    fast_typed(FastRecord)
    fast_typed(FastRecord)  # twice: nothing more
    general = typeof_impl.dispatch(tuple)
    for value in (np.float32(2.0), np.float64(2.0), 2.0, 2, 2 ** 63):  # (2**63: uint64)
        for flag in (ON, OFF):
            h = FastRecord(value, flag)
            for _ in range(2):  # the first typing fills the cache, the second reads it
                assert numba.typeof(h) == general(h, Purpose.argument)
    assert numba.typeof(FastRecord(np.float32(1), ON)) != numba.typeof(FastRecord(np.float32(1),
                                                                                  OFF))


@COMPILED
def test_a_fast_typed_record_runs_its_own_specialization():
    from npoptim.kernels.switches import fast_typed
    fast_typed(FastRecord)
    x = np.arange(4.0)
    assert np.array_equal(_step(x, FastRecord(np.float64(2.0), ON)), x * 2 + 11)
    assert np.array_equal(_step(x, FastRecord(np.float64(2.0), OFF)), x * 2 - 10)
