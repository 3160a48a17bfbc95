"""A Keras 3 optimizer class as a step function of the golden cases' protocol
(:func:`npoptim.golden.replay.replay`), as a float64 JAX user runs it.

:func:`use_jax_in_float64` selects the JAX backend before keras is imported
(``KERAS_BACKEND=jax``), enables ``jax_enable_x64`` and sets ``floatx`` to float64 (which keeps
the learning-rate variable from rounding to float32). :func:`make_step` builds
``cls(**kwargs)`` (the framework's names), one ``keras.Variable`` per parameter, and each step
sets ``opt.learning_rate`` and calls ``opt.apply_gradients``; a missing gradient is a ``None``
pair (Keras leaves that variable out, and ages its global step: npoptim's
``step_scope="global"``).

keras and jax are imported inside the functions only.
"""
import os

import numpy as np

from npoptim.check.spec import UsageError, require


def use_jax_in_float64(flag="--keras"):
    """keras on the JAX backend in float64; :class:`UsageError` if keras was imported with
    another backend before."""
    os.environ.setdefault("KERAS_BACKEND", "jax")
    keras = require("keras", flag)
    jax = require("jax", flag)
    jax.config.update("jax_enable_x64", True)
    if keras.backend.backend() != "jax":
        raise UsageError(f"{flag}: keras runs on {keras.backend.backend()!r}; npoptim check "
                         "runs it on JAX in float64 (set KERAS_BACKEND=jax before keras is "
                         "imported)")
    keras.config.set_floatx("float64")
    return keras


def make_step(cls, kwargs):
    """``make_step`` (the replay protocol) of the Keras optimizer ``cls(**kwargs)``."""
    keras = require("keras", "--keras")

    def make(params, _hyper):
        dtype = str(params[0].dtype)
        variables = [keras.Variable(p.copy(), dtype=dtype) for p in params]
        opt = cls(**kwargs)

        def step(grads, lr):
            opt.learning_rate = lr
            opt.apply_gradients([(None if g is None else keras.ops.convert_to_tensor(
                g, dtype=dtype), v) for g, v in zip(grads, variables)])
            return [np.asarray(v.value) for v in variables]
        return step
    return make
