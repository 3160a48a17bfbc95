"""Checkpoints written by an earlier npoptim (tests/fixtures/legacy_checkpoints, made by
make_legacy_checkpoints.py before the hyperparameter records of issue 11) still load, and the
run continues to exactly the params that code reached; and checkpoints whose param_groups carry
the convention switches (tests/fixtures/switch_checkpoints, written by the code of 2026-12-02)
load and continue as bit for bit, whatever words today's code uses for those switches."""
import os
import sys

import numpy as np
import pytest

import npoptim

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fixtures"))
import make_legacy_checkpoints as legacy  # noqa: E402


@pytest.mark.parametrize("name, here", [(n, legacy.HERE) for n in sorted(legacy.CONFIGS)]
                         + [(n, legacy.SWITCHES_HERE) for n in sorted(legacy.SWITCH_CONFIGS)])
def test_legacy_checkpoint_continues_bit_identically(name, here):
    params, opt = legacy.build(name, seed=1)  # other values: the checkpoint must replace them
    npoptim.checkpoint.load(os.path.join(here, f"{name}.npz"), opt)
    for t in range(legacy.STEPS_BEFORE, legacy.STEPS_BEFORE + legacy.STEPS_AFTER):
        opt.step(legacy.gradients(name, t))
    with np.load(os.path.join(here, "expected.npz"), allow_pickle=False) as expected:
        for i, p in enumerate(params):
            np.testing.assert_array_equal(p, expected[f"{name}/{i}"], strict=True)
