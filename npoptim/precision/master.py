r"""Master weights: a float32 (or float64) optimizer behind a 16-bit model, as mixed precision runs.

Mixed-precision training keeps the parameters the optimizer updates ("master weights") and
its state in float32, and the model a 16-bit copy of them::

    master = MasterWeights(model_params, lambda ps: npoptim.AdamW(ps, lr=1e-3))
    master.step(grads)          # grads: 16-bit (or float32) arrays, one per model param

A step widens each gradient to the master dtype (exactly), runs the float optimizer on the
master params, then writes the copy: each model element becomes its master value rounded to
nearest, ties to even, into the 16-bit format (:mod:`npoptim.precision.formats`); a float64
master is rounded to float32 first, then to the 16-bit format, as torch's
``model_param.copy_(master_param)`` converts a double. That is torch's recipe
``master = [p.float() for p in model]``; ``opt(master)``; ``p.copy_(m)`` after each step, and
it is what apex's ``O2`` and DeepSpeed's bf16 optimizer do.

The master params start as the model's values (exact) unless given; ``master.params`` and
``master.optimizer`` (with its ``state``, ``state_dict``) are the float side.
"""
import numpy as np

from npoptim.precision.formats import bits_of, format_of, from_float32_array, to_float32_array


class MasterWeights:
    """A float optimizer on master copies of 16-bit model params (see the module docstring).

    Parameters
    ----------
    model_params : iterable of arrays
        The model's bfloat16, float16 or uint16 (raw bits) arrays, written after every step.
    make_optimizer : callable
        ``make_optimizer(master_params)`` builds the float optimizer on the master params.
    dtype : {float32, float64}, default: np.float32
        The dtype of the master params and of the float optimizer's state.
    format : {'bfloat16', 'float16'} or None, default: None
        The format of raw ``uint16`` model arrays; ``ml_dtypes.bfloat16`` and NumPy
        ``float16`` arrays carry their own.
    """

    def __init__(self, model_params, make_optimizer, dtype=np.float32, format=None):
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.float32, np.float64):
            raise TypeError(f"master weights must be float32 or float64, got {self.dtype}")
        self.model_params = list(model_params)
        self.formats = []
        for i, p in enumerate(self.model_params):
            if type(p) is not np.ndarray:
                raise TypeError(f"model_params[{i}]: expected a NumPy array")
            try:
                self.formats.append(format_of(p, format))
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"model_params[{i}]: {exc}") from None
        self.params = [to_float32_array(p, f).astype(self.dtype)
                       for p, f in zip(self.model_params, self.formats)]
        self.optimizer = make_optimizer(self.params)

    def step(self, grads):
        """Widen ``grads``, step the float optimizer, write the rounded copy. Atomic: a bad
        gradient raises before anything changes.

        Parameters
        ----------
        grads : sequence
            One gradient per model param: an array of the model param's dtype (16-bit), or of
            the master dtype, or None (no gradient this step).
        """
        grads = list(grads)
        if len(grads) != len(self.model_params):
            raise ValueError(f"step() got {len(grads)} gradients for "
                             f"{len(self.model_params)} parameters")
        wide = []
        for i, (g, p, f) in enumerate(zip(grads, self.model_params, self.formats)):
            if g is None or (isinstance(g, np.ndarray) and g.dtype == self.dtype):
                wide.append(g)
            elif isinstance(g, np.ndarray) and g.dtype == p.dtype:
                wide.append(to_float32_array(g, f).astype(self.dtype))
            else:
                raise ValueError(f"grads[{i}]: expected the model param's dtype {p.dtype} or "
                                 f"the master dtype {self.dtype}, got "
                                 f"{getattr(g, 'dtype', type(g).__name__)}")
        self.optimizer.step(wide)
        self.write_model()

    def write_model(self):
        """Round every master param into its model param (see the module docstring)."""
        for model, master, f in zip(self.model_params, self.params, self.formats):
            bits_of(model)[...] = from_float32_array(master.astype(np.float32), f)

    @property
    def state(self):
        return self.optimizer.state

    def state_dict(self):
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict):
        self.optimizer.load_state_dict(state_dict)

