r"""Dynamic loss scaling for float16 training, as ``torch.amp.GradScaler`` 2.13 does it.

Per iteration (torch's defaults in brackets):

1. ``scaler.scale(loss)``: the loss times ``scale`` (a float32, ``init_scale`` [2**16]);
   backpropagating it gives gradients times ``scale``.
2. ``scaler.step(optimizer, grads)``: ``inv_scale`` is ``1/scale`` computed in float64 and
   rounded to float32; each gradient is multiplied by it (in float32 for float32 and 16-bit
   gradients, the product of a 16-bit one rounded back to its format; in float64 for float64
   ones) and checked: if any element of any gradient is inf or NaN the optimizer step is
   skipped (parameters and state untouched), else the optimizer steps on the unscaled grads.
3. ``scaler.update()``: after a skipped step ``scale *= backoff_factor`` [0.5] and the count
   of clean steps restarts; after ``growth_interval`` [2000] clean steps in a row
   ``scale *= growth_factor`` [2.0] (kept only if finite) and the count restarts.

``state_dict()`` has torch's keys (``scale``, ``growth_factor``, ``backoff_factor``,
``growth_interval``, ``_growth_tracker``).
"""
import numpy as np

from npoptim.precision.formats import format_of, from_float32_array, to_float32_array


class GradScaler:
    """``torch.amp.GradScaler`` for npoptim optimizers (see the module docstring).

    Parameters
    ----------
    init_scale : float, default: 65536.0
        The first scale (stored as a float32).
    growth_factor : float, default: 2.0
        What the scale is multiplied by after ``growth_interval`` clean steps; above 1.
    backoff_factor : float, default: 0.5
        What the scale is multiplied by after a skipped step; below 1.
    growth_interval : int, default: 2000
        The number of clean steps in a row after which the scale grows.
    enabled : bool, default: True
        False: no scaling (a scale of 1), :meth:`step` always steps and :meth:`update` does
        nothing.
    """

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if not growth_factor > 1.0:
            raise ValueError("The growth factor must be > 1.0.")
        if not backoff_factor < 1.0:
            raise ValueError("The backoff factor must be < 1.0.")
        self.scale_value = np.float32(init_scale)
        self.growth_factor = float(growth_factor)
        self.backoff_factor = float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self.enabled = enabled
        self.growth_tracker = 0
        self.found_inf = None  # of the last step(), until update()

    def get_scale(self):
        return float(self.scale_value) if self.enabled else 1.0

    def scale(self, loss):
        """``loss * scale`` (float32 arithmetic for a float32 loss, as torch).

        Parameters
        ----------
        loss : float or ndarray
            The loss; returned as is when the scaler is disabled.
        """
        if not self.enabled:
            return loss
        return np.asarray(loss) * self.scale_value.astype(np.asarray(loss).dtype)

    def unscale(self, grads, format=None):
        """``(unscaled grads, found_inf)``: new arrays (None stays None); ``found_inf`` is true
        if a gradient, as given (scaled), has an inf or NaN.

        Parameters
        ----------
        grads : sequence
            float32, float64 or 16-bit arrays (or None), as scaled by :meth:`scale`.
        format : {'bfloat16', 'float16'} or None, default: None
            The format of raw ``uint16`` gradients.
        """
        inv_scale = np.float32(1.0 / np.float64(self.scale_value))
        unscaled, found_inf = [], False
        for g in grads:
            if g is None:
                unscaled.append(None)
            elif g.dtype in (np.float32, np.float64):
                found_inf = found_inf or not np.isfinite(g).all()
                unscaled.append(g * g.dtype.type(inv_scale))
            else:
                f = format_of(g, format)
                wide = to_float32_array(g, f)
                found_inf = found_inf or not np.isfinite(wide).all()
                bits = from_float32_array(wide * inv_scale, f)
                unscaled.append(bits if g.dtype == np.uint16 else bits.view(g.dtype))
        return unscaled, found_inf

    def step(self, optimizer, grads, format=None):
        """Unscale ``grads`` and step ``optimizer`` unless one holds an inf or NaN; returns
        True when the optimizer stepped.

        Parameters
        ----------
        optimizer : Optimizer
            The npoptim optimizer to step (``optimizer.step(unscaled grads)``).
        grads : sequence
            Its gradients, as scaled by :meth:`scale` (see :meth:`unscale`).
        format : {'bfloat16', 'float16'} or None, default: None
            The format of raw ``uint16`` gradients.
        """
        if not self.enabled:
            optimizer.step(grads)
            return True
        unscaled, self.found_inf = self.unscale(grads, format)
        if self.found_inf:
            return False
        optimizer.step(unscaled)
        return True

    def update(self, new_scale=None):
        """Back off after a skipped step, grow after ``growth_interval`` clean ones.

        Parameters
        ----------
        new_scale : float, optional
            Set the scale to this instead (as torch's ``update(new_scale)``).
        """
        if not self.enabled:
            return
        if new_scale is not None:
            self.scale_value = np.float32(new_scale)
        elif self.found_inf is None:
            raise RuntimeError("update() needs a step() since the last update()")
        elif self.found_inf:
            self.scale_value = np.float32(self.scale_value * np.float32(self.backoff_factor))
            self.growth_tracker = 0
        else:
            self.growth_tracker += 1
            if self.growth_tracker == self.growth_interval:
                grown = np.float32(self.scale_value * np.float32(self.growth_factor))
                if np.isfinite(grown):
                    self.scale_value = grown
                self.growth_tracker = 0
        self.found_inf = None

    def state_dict(self):
        return {"scale": self.get_scale(), "growth_factor": self.growth_factor,
                "backoff_factor": self.backoff_factor, "growth_interval": self.growth_interval,
                "_growth_tracker": self.growth_tracker} if self.enabled else {}

    def load_state_dict(self, state_dict):
        self.scale_value = np.float32(state_dict["scale"])
        self.growth_factor = float(state_dict["growth_factor"])
        self.backoff_factor = float(state_dict["backoff_factor"])
        self.growth_interval = int(state_dict["growth_interval"])
        self.growth_tracker = int(state_dict["_growth_tracker"])
