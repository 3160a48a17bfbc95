"""Keras 3 on the JAX backend in float64, for the tests that compare against it (Ftrl, Muon).

A plain module imported by the tests (pytest puts tests/ on sys.path). The backend is chosen
before keras is first imported (``KERAS_BACKEND=jax``); :func:`keras_float64` runs a block with
``jax_enable_x64`` and ``floatx`` float64 and restores both afterwards.
"""
import contextlib
import os
import sys

import pytest


def keras_jax():
    """keras on the JAX backend with float64 (skips without keras or jax)."""
    if "keras" not in sys.modules:
        os.environ["KERAS_BACKEND"] = "jax"
    jax = pytest.importorskip("jax")
    keras = pytest.importorskip("keras")
    if keras.backend.backend() != "jax":
        pytest.fail(f"keras was imported with the {keras.backend.backend()} backend before "
                    "this test could select jax (set KERAS_BACKEND=jax)")
    return keras, jax


@contextlib.contextmanager
def keras_float64():
    """``(keras, jax)`` with x64 and floatx float64 inside the block."""
    keras, jax = keras_jax()
    previous_x64, previous_floatx = jax.config.jax_enable_x64, keras.config.floatx()
    jax.config.update("jax_enable_x64", True)
    keras.config.set_floatx("float64")
    try:
        yield keras, jax
    finally:
        keras.config.set_floatx(previous_floatx)
        jax.config.update("jax_enable_x64", previous_x64)
