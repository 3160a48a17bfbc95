"""torchao for the cross-checks: the import (a failure in CI, a skip elsewhere) and the one
operator torchao 0.18's amsgrad lacks.

torchao 0.18's ``_AdamBase`` computes ``torch.maximum(max_exp_avg_sq.float(), exp_avg_sq_f32)``
and stores it with ``max_exp_avg_sq.copy_``, but ``.float()`` of its quantized state only
changes the tensor's apparent dtype and ``OptimState8bit``/``4bit``/``Fp8`` implement no
``aten.maximum``: ``amsgrad=True`` raises (``torch._dynamo.exc.Unsupported``) for every
parameter with quantized state, float32 or bfloat16. :func:`quantized_maximum` registers the
operator as torchao registers ``aten.lerp`` (dequantize, then the plain operator) for the
duration of a test, so that torchao's own step runs what its code says.
"""
import contextlib
import importlib
import os

import pytest


def torchao_optim():
    if os.environ.get("NPOPTIM_REQUIRE_TORCHAO") == "1":  # CI: a broken install fails
        return importlib.import_module("torchao.optim")
    return pytest.importorskip("torchao.optim")


@contextlib.contextmanager
def quantized_maximum():
    """torchao's quantized states with ``aten.maximum`` (dequantized operands)."""
    import torch
    from torchao.optim.subclass_4bit import OptimState4bit
    from torchao.optim.subclass_8bit import OptimState8bit
    from torchao.optim.subclass_fp8 import OptimStateFp8
    classes = (OptimState8bit, OptimState4bit, OptimStateFp8)
    op = torch.ops.aten.maximum.default

    def maximum(func, types, args, kwargs):
        args = [x.dequantize() if isinstance(x, classes) else x for x in args]
        return func(*args, **kwargs)

    tables = []
    for cls in classes:
        table = cls._ATEN_OP_TABLE[cls]
        assert op not in table, "torchao implements aten.maximum now: drop this helper"
        table[op] = maximum
        tables.append(table)
    try:
        yield
    finally:
        for table in tables:
            table.pop(op, None)
