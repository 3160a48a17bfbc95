r"""Adam with 8-bit blockwise moments as bitsandbytes 0.50.2 runs it on CPU
(``bnb.optim.Adam8bit``, ``AdamW8bit``; ``optimizer_update_8bit_blockwise`` of its CPU
backend).

Each step, in float32: dequantize ``state1`` and ``state2`` (:math:`m = \text{qmap1}[c]
\cdot \text{absmax1}`, blocks of 256, the last one possibly short), update them with torch's
CPU arithmetic (its ``add``/``addcmul`` are fused multiply-adds), the parameter, then quantize
the new moments with bitsandbytes' CPU table (:func:`npoptim.precision.quantized.bnb_lut`):

.. math::

    m &\leftarrow \mathrm{fma}(g, 1-\beta_1, \beta_1 m),\qquad
        v \leftarrow \mathrm{fma}((1-\beta_2) g, g, \beta_2 v)\\
    d &= \sqrt v / c_2 + \epsilon,\qquad c_1 = 1-\beta_1^t,\quad c_2 = \sqrt{1-\beta_2^t}
        \ \text{(double, then float32)}\\
    \theta &\leftarrow \theta\,(1-\gamma\lambda) \quad\text{(only when } \lambda > 0)\\
    \theta &\leftarrow \theta + ((-\gamma/c_1)\, m) / d

Weight decay is decoupled (AdamW's) in both classes, as in bitsandbytes; ``AdamW8bit`` only
changes the default ``weight_decay``. Parameters below ``min_8bit_size`` (4096) elements keep
float32 ``state1``/``state2`` and bitsandbytes' 32-bit CPU update, whose form differs:
:math:`\theta \leftarrow \mathrm{fma}(m / (\sqrt v + \epsilon c_2), -\gamma c_2/c_1, \theta)`.

State under bitsandbytes' names: ``step`` (an int), ``state1``, ``state2`` (``uint8`` codes of
the parameter's shape), ``qmap1`` (the signed dynamic map), ``qmap2`` (the unsigned one),
``absmax1``, ``absmax2`` (float32, one per block).

bfloat16 parameters (``ml_dtypes.bfloat16``, grads of the same dtype), as bitsandbytes' CPU
backend takes them in both paths: ``p.float()``, ``g.float()`` (exact), the float32 update
above, ``p.copy_(p_fp32)`` (one rounding to nearest even); the state is the float32 path's
(8-bit codes, or float32 ``state1``/``state2`` below ``min_8bit_size``). Measured over 20
steps (tests/test_precision_quantized.py): codes, absmax and float32 moments bit for bit, the
bfloat16 params bit for bit in every element (a float32 ulp of ``sqrt`` rarely crosses a
bfloat16 rounding midpoint; the test allows 1 bfloat16 ulp).

Agreement: codes and absmax bit for bit with bitsandbytes' CPU path (the moments never read
the parameter); parameters within a few float32 ulps of the update, since torch's vectorized
CPU ``sqrt`` is not always correctly rounded (1 ulp in about a sixth of the elements) and
npoptim's is. Where bitsandbytes' CPU and GPU paths differ (read from bitsandbytes' sources,
``csrc/kernels.cu`` ``kOptimizerStatic8bit2StateBlockwise``, not measured: no GPU here):

* codes: the CUDA kernel searches the map (a binary search, then the nearer of two neighbours
  by their midpoint), where the CPU's 65536-bin table merges codes closer than a bin (every
  unsigned value below 3e-5 of the block's absmax gets code 7, a zero signed one code 131);
  the CUDA kernel divides by the absmax (``__fdividef``), the CPU multiplies by its reciprocal;
* the step: CUDA :math:`\theta + (-\gamma c_2/c_1)\, m / (\sqrt v + \epsilon c_2)` with
  ``__powf``/``__fdividef`` (fast approximate intrinsics), the CPU's form above;
* weight decay: after the Adam step on CUDA, before it on CPU;
* a NaN or infinite gradient element leaves its parameter unchanged on CUDA; on CPU it
  propagates.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import fma
from npoptim.precision.quantized import BNB8, bnb_lut, dynamic_map
from npoptim.precision.drivers import apply_blockwise
from npoptim.precision.formats import BFLOAT16, from_float32_array, to_float32_array
from npoptim.precision.quantized_adam import BlockwiseStateOptimizer

#: bitsandbytes' CPU block size (fixed in its CPU kernel)
BNB_BLOCK_SIZE = 256


class BnbAdamHyper(NamedTuple):
    """One step's hyperparameters (float32; the codec and block size as ints)."""

    codec: int
    block_size: int
    code: int                  # -1: float32 params (the blockwise driver's field)
    decay: int                 # 1 when weight_decay > 0
    decay_factor: float        # 1 - lr * weight_decay
    beta1: float
    one_minus_beta1: float
    beta2: float
    one_minus_beta2: float
    correction2: float         # sqrt(1 - beta2 ** t)
    eps: float
    neg_step: float            # 8-bit: -lr / c1
    eps_c2: float              # 32-bit: eps * c2
    step_size: float           # 32-bit: -lr * c2 / c1


@kernel
def _moments(g, m, v, h):
    m = fma(g, h.one_minus_beta1, m * h.beta1)
    v = fma(h.one_minus_beta2 * g, g, v * h.beta2)
    return m, v


@kernel
def bnb_adam8bit_rule(p, g, s, h, i, tail):
    """One element of bitsandbytes' 8-bit CPU Adam from dequantized ``s = (state1, state2)``
    (the blockwise driver's shape; ``i`` unused)."""
    m, v = _moments(g, s[0], s[1], h)
    denom = np.sqrt(v) / h.correction2 + h.eps
    if h.decay != 0:
        p = p * h.decay_factor
    return p + (h.neg_step * m) / denom, (m, v)


@kernel
def bnb_adam32bit_rule(p, g, s, h):
    """One element of bitsandbytes' 32-bit CPU Adam (parameters below ``min_8bit_size``)."""
    m, v = _moments(g, s[0], s[1], h)
    if h.decay != 0:
        p = p * h.decay_factor
    return fma(m / (np.sqrt(v) + h.eps_c2), h.step_size, p), (m, v)


@kernel
def _bnb8_dense(param, grad, first, second, hyper):
    apply_blockwise(bnb_adam8bit_rule, param, grad, (first, second), BnbAdamHyper(*hyper))


@kernel
def _bnb32_dense(param, grad, states, hyper):
    apply_dense(bnb_adam32bit_rule, param, grad, states, BnbAdamHyper(*hyper))


_STATES = (("state1", "qmap1", "absmax1", True), ("state2", "qmap2", "absmax2", False))


class BnbAdam8bit(BlockwiseStateOptimizer):
    """bitsandbytes' ``Adam8bit`` on CPU (see the module docstring), float32 or bfloat16
    parameters. ``amsgrad``, ``optim_bits != 8``, ``percentile_clipping`` and paging are
    refused.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The float32 or bfloat16 (``ml_dtypes``) arrays to optimize (updated in place), or param
        groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.999)
        Decay rates (β1, β2) of the first and second moments.
    eps : float, default: 1e-08
        Term ε added to the denominator for numerical stability.
    weight_decay : float, default: 0
        Decoupled weight decay λ: θ(1 - γλ), applied only when λ > 0.
    amsgrad : bool, default: False
        Accepted as bitsandbytes' signature has it; True is refused.
    optim_bits, args, percentile_clipping, block_wise, is_paged
        bitsandbytes' options, accepted at their defaults only (8, None, 100, True, False);
        any other value is refused.
    min_8bit_size : int, default: 4096
        Parameters with fewer elements keep float32 state and the 32-bit update.
    """

    step_in_state_dict = "int"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, optim_bits=8, args=None, min_8bit_size=4096,
                 percentile_clipping=100, block_wise=True, is_paged=False):
        if optim_bits != 8 or args is not None or percentile_clipping != 100 or (
                not block_wise) or is_paged:
            raise ValueError("npoptim's BnbAdam8bit has bitsandbytes' defaults only for "
                             "optim_bits, args, percentile_clipping, block_wise and is_paged")
        if (not isinstance(min_8bit_size, (int, np.integer)) or isinstance(min_8bit_size, bool)
                or min_8bit_size < 0):
            raise ValueError(f"min_8bit_size must be a non-negative int, got {min_8bit_size!r}")
        self.min_8bit_size = int(min_8bit_size)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad))

    def _check_group(self, group):
        super()._check_group(group)
        if group["amsgrad"]:
            raise ValueError(f"amsgrad=True is not implemented for {type(self).__name__}")
        if not 0.0 <= group["weight_decay"]:
            raise ValueError(f"Invalid weight_decay value: {group['weight_decay']}")

    def quantized(self, param):
        """Whether ``param`` gets 8-bit state (``param.size >= min_8bit_size``).

        Parameters
        ----------
        param : ndarray
            One of the optimizer's parameters (its size is what counts).
        """
        return param.size >= self.min_8bit_size

    def _layout(self, param, group):
        if not self.quantized(param):
            return {"state1": (param.shape, np.dtype(np.float32)),
                    "state2": (param.shape, np.dtype(np.float32))}
        blocks = -(-param.size // BNB_BLOCK_SIZE)
        layout = {}
        for codes, qmap, absmax, _ in _STATES:
            layout[codes] = (param.shape, np.dtype(np.uint8))
            layout[qmap] = ((256,), np.dtype(np.float32))
            layout[absmax] = ((blocks,), np.dtype(np.float32))
        return layout

    def _maps(self, param, group):
        if not self.quantized(param):
            return {}
        return {qmap: dynamic_map(signed) for _, qmap, _, signed in _STATES}

    def _hyper(self, group, step, code=-1):
        f32 = np.float32
        beta1, beta2 = group["betas"]
        lr, wd, eps = group["lr"], group["weight_decay"], group["eps"]
        c1 = 1.0 - beta1 ** step
        c2 = (1.0 - beta2 ** step) ** 0.5
        return BnbAdamHyper(
            codec=np.int64(BNB8), block_size=np.int64(BNB_BLOCK_SIZE), code=np.int64(code),
            decay=np.int64(wd > 0),
            decay_factor=f32(1.0 - lr * wd), beta1=f32(beta1), one_minus_beta1=f32(1.0 - beta1),
            beta2=f32(beta2), one_minus_beta2=f32(1.0 - beta2), correction2=f32(c2),
            eps=f32(eps), neg_step=f32(-lr / c1), eps_c2=f32(eps * c2),
            step_size=f32(-lr * c2 / c1))

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        bfloat16 = param.dtype.name == "bfloat16"
        if not self.quantized(param):
            moments = (state["state1"].reshape(-1), state["state2"].reshape(-1))
            hyper = tuple(self._hyper(group, state["step"]))
            if not bfloat16:
                _bnb32_dense(param, grad, moments, hyper)
                return
            # p.float(), g.float(), the float32 update, p.copy_(p_float): one rounding
            wide = to_float32_array(param.view(np.uint16), "bfloat16")
            _bnb32_dense(wide, to_float32_array(grad.view(np.uint16), "bfloat16"), moments,
                         hyper)
            param.view(np.uint16)[...] = from_float32_array(wide, "bfloat16")
            return
        hyper = tuple(self._hyper(group, state["step"], BFLOAT16 if bfloat16 else -1))
        if bfloat16:
            param, grad = param.view(np.uint16), grad.view(np.uint16)
        first, second = ((state[codes].reshape(-1), state[absmax], state[qmap],
                          _lut(state[qmap])) for codes, qmap, absmax, _ in _STATES)
        _bnb8_dense(param, grad, first, second, hyper)


_LUTS = {}


def _lut(qmap):
    """bitsandbytes' table of ``qmap``, kept per map (its CPU backend caches them too)."""
    key = qmap.tobytes()
    if key not in _LUTS:
        if len(_LUTS) > 8:
            _LUTS.clear()
        _LUTS[key] = bnb_lut(qmap)
    return _LUTS[key]


class BnbAdamW8bit(BnbAdam8bit):
    """bitsandbytes' ``AdamW8bit``: :class:`BnbAdam8bit` with ``weight_decay=1e-2``.

    Parameters
    ----------
    params : iterable of arrays or dicts
        The float32 or bfloat16 (``ml_dtypes``) arrays to optimize (updated in place), or param
        groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.999)
        Decay rates (β1, β2) of the first and second moments.
    eps : float, default: 1e-08
        Term ε added to the denominator for numerical stability.
    weight_decay : float, default: 0.01
        Decoupled weight decay λ: θ(1 - γλ), applied only when λ > 0.
    amsgrad : bool, default: False
        Accepted as bitsandbytes' signature has it; True is refused.
    optim_bits, args, percentile_clipping, block_wise, is_paged
        bitsandbytes' options, accepted at their defaults only (8, None, 100, True, False);
        any other value is refused.
    min_8bit_size : int, default: 4096
        Parameters with fewer elements keep float32 state and the 32-bit update.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, optim_bits=8, args=None, min_8bit_size=4096,
                 percentile_clipping=100, block_wise=True, is_paged=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, optim_bits=optim_bits, args=args,
                         min_8bit_size=min_8bit_size, percentile_clipping=percentile_clipping,
                         block_wise=block_wise, is_paged=is_paged)
