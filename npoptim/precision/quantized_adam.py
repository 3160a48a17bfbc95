r"""Adam and AdamW with blockwise-quantized moments, as torchao 0.18's ``torchao.optim``
``AdamW8bit``, ``AdamW4bit``, ``AdamWFp8`` (and ``Adam8bit``, ``Adam4bit``, ``AdamFp8``) run
them on CPU (through ``torch.compile``).

Each step, for each block of the state (:mod:`npoptim.precision.quantized` has the formats):
dequantize ``exp_avg`` and ``exp_avg_sq``, update them and the parameter in float32 from the
dequantized values, then quantize the new moments (a new scale per block). The parameter
update uses the float32 moments of this step, not their quantized values. With step count
:math:`t` (a float32), every operation in float32:

.. math::

    \theta &\leftarrow \theta - (\gamma\lambda)\,\theta                    &&\text{AdamW}\\
    g &\leftarrow g + \lambda\theta                                       &&\text{Adam}\\
    m &\leftarrow \mathrm{lerp}(Q^{-1}(m), g, 1-\beta_1),\quad
        v \leftarrow \mathrm{lerp}(Q^{-1}(v), g\cdot g, 1-\beta_2)\\
    \theta &\leftarrow \theta - \gamma\,(m / b_1) / (\sqrt v / \sqrt{b_2} + \epsilon),
        \qquad b_i = 1 - \beta_i^t\\
    m, v &\text{ stored as } Q(m), Q(v)

``lerp`` is ``torch.compile``'s decomposition, two roundings (no fused multiply-add):
:math:`w (e - s) + s` for :math:`|w| < 0.5`, :math:`(w - 1)(e - s) + e` otherwise, the
coefficient computed in double then rounded to float32. :math:`\gamma\lambda` is a float32
product; :math:`\beta_i^t` is float32 ``pow``.

As torchao (following bitsandbytes), only parameters of at least 4096 elements whose size is a
multiple of ``block_size`` get quantized state; smaller ones keep float32 ``exp_avg`` and
``exp_avg_sq`` and the same float32 update. Quantized state is kept under torchao's names,
``exp_avg.codes``, ``exp_avg.scale``, ``exp_avg.qmap`` (the attributes of torchao's
``OptimState8bit``/``OptimState4bit`` tensors; ``OptimStateFp8`` has no ``qmap``, and its
``codes`` are here the ``uint8`` bits of torchao's float8 e4m3fn codes): ``codes`` has the
parameter's shape (flat, half the size, for 4-bit), ``scale`` one float32 per block.

``amsgrad=True`` (torchao's third state, ``max_exp_avg_sq``, made as ``exp_avg_sq`` is:
unsigned, quantized alike, or plain below 4096 elements): :math:`\hat v \leftarrow
\max(Q^{-1}(\hat v), v)` from this step's float32 :math:`v` (before its quantization; NaN
propagates, as ``torch.maximum``) replaces :math:`v` in the denominator and is stored as
:math:`Q(\hat v)`. torchao 0.18 raises on it for every parameter with quantized state (its
state tensors lack ``aten.maximum``: ``.float()`` only relabels their dtype); npoptim computes
what its code says, checked against torchao's own step with the operator lent to it
(tests/torchao_compare.py), and plain state against torchao directly.

Parameters are float32 or bfloat16 (``ml_dtypes.bfloat16`` arrays, grads of the same dtype):
a bfloat16 parameter and gradient are widened to float32 for the step and the new parameter
rounded to nearest even (torchao's ``p.copy_(p_f32)``); below 4096 elements the moments are
bfloat16 too (torchao's ``zeros_like(p)``), rounded to nearest when stored. With
``bf16_stochastic_round=True`` the new bfloat16 parameter is rounded stochastically instead
(torchao's ``_fp32_to_bf16_sr`` rule, :mod:`npoptim.precision.stochastic`) with npoptim's
counter-based stream keyed by ``seed``, the parameter's index and its step; the moments still
round to nearest, and float32 parameters ignore the option (as torchao). torchao draws its
random bits inside the compiled step (inductor's CPU ``randint64``: Philox4x32 of a seed drawn
from torch's global generator at each call, the element's index as offset; Triton's Philox
on a GPU), a stream of torch's process state, not of the step: not reproduced, and checked
statistically instead (tests/test_precision_torchao.py: both unbiased against the float32
trajectory, the same spread). Blocks are independent, so results are the same at any thread
count. torchao's CPU results are matched
bit for bit (tests/test_precision_quantized.py); on a GPU torch.compile generates other code
(Triton), whose ``pow``, division and ``sqrt`` need not round the same.
"""
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.optim.optimizer import Optimizer, _as_step, _check_param
from npoptim.optim.options import check_betas
from npoptim.precision.drivers import apply_blockwise, apply_dense16
from npoptim.precision.formats import BFLOAT16, to_float32
from npoptim.precision.quantized import CODECS, qmap_for
from npoptim.precision.stochastic import random16, stochastic_bfloat16, stream_key

#: torchao's (and bitsandbytes') smallest parameter with quantized state
MIN_QUANTIZED_SIZE = 4096


class QuantizedAdamHyper(NamedTuple):
    """One step's hyperparameters (float32 values; the codec and block size as ints)."""

    codec: int
    block_size: int
    code: int                # -1: float32 params; else their 16-bit format (bfloat16: 0)
    decoupled: int           # 1: AdamW's decay of the parameter; 0: Adam's L2 term
    lr_wd: float             # float32(lr) * float32(weight_decay), rounded to float32
    weight_decay: float
    lerp1_low: int           # 1 when |1 - beta1| < 0.5 (lerp's first form)
    lerp1_coeff: float       # 1 - beta1, or (1 - beta1) - 1
    lerp2_low: int
    lerp2_coeff: float
    bias_correction1: float  # 1 - beta1 ** step (float32)
    bias_correction2_sqrt: float
    eps: float
    lr: float
    stochastic: int          # 1: the new bfloat16 parameter rounded stochastically
    key: int                 # its stream key (npoptim.precision.stochastic), else 0


@kernel
def compiled_lerp(start, end, low, coeff):
    """``torch.compile``'s ``lerp`` (two roundings): ``coeff * (end - start) + start`` in the
    low form, else ``coeff * (end - start) + end``."""
    if low != 0:
        return coeff * (end - start) + start
    return coeff * (end - start) + end


@kernel
def _moments(p, g, exp_avg, exp_avg_sq, h):
    """The decayed parameter and the new float32 moments."""
    if h.decoupled != 0:
        p = p - h.lr_wd * p
    else:
        g = g + h.weight_decay * p
    m = compiled_lerp(exp_avg, g, h.lerp1_low, h.lerp1_coeff)
    v = compiled_lerp(exp_avg_sq, g * g, h.lerp2_low, h.lerp2_coeff)
    return p, m, v


@kernel
def _new_param(p, m, v, h, i):
    """``p - lr (m / b1) / (sqrt(v) / sqrt(b2) + eps)``, rounded stochastically to bfloat16
    with draw ``i`` when ``h.stochastic`` (a bfloat16 value: the driver's rounding is exact)."""
    p = p - h.lr * (m / h.bias_correction1) / (np.sqrt(v) / h.bias_correction2_sqrt + h.eps)
    if h.stochastic != 0:
        return to_float32(stochastic_bfloat16(p, random16(h.key, i)), h.code)
    return p


@kernel
def quantized_adam_rule(p, g, s, h, i, tail):
    """One element ``i`` of torchao's Adam/AdamW from the dequantized ``s = (exp_avg,
    exp_avg_sq)``; returns the new parameter and the float32 moments (quantized, or rounded to
    the parameter's 16-bit format, by the driver)."""
    p, m, v = _moments(p, g, s[0], s[1], h)
    return _new_param(p, m, v, h, i), (m, v)


@kernel
def quantized_amsgrad_rule(p, g, s, h, i, tail):
    """:func:`quantized_adam_rule` with ``amsgrad``: ``s = (exp_avg, exp_avg_sq,
    max_exp_avg_sq)``; ``v_max = maximum(Q^{-1}(v_max), v)`` (float32 ``v``, before its
    quantization; NaN propagates) divides, and is stored quantized as ``v``."""
    p, m, v = _moments(p, g, s[0], s[1], h)
    old = s[2]
    v_max = v if (v > old or v != v) else old
    return _new_param(p, m, v_max, h, i), (m, v, v_max)


@kernel
def _quantized_dense(param, grad, states, hyper):
    apply_blockwise(quantized_adam_rule, param, grad, states, QuantizedAdamHyper(*hyper))


@kernel
def _quantized_amsgrad_dense(param, grad, states, hyper):
    apply_blockwise(quantized_amsgrad_rule, param, grad, states, QuantizedAdamHyper(*hyper))


@kernel
def quantized_adam_rule32(p, g, s, h):
    """:func:`quantized_adam_rule` in the float32 drivers' shape (no index: no stochastic
    rounding of float32 parameters)."""
    return quantized_adam_rule(p, g, s, h, 0, False)


@kernel
def quantized_amsgrad_rule32(p, g, s, h):
    """:func:`quantized_amsgrad_rule` in the float32 drivers' shape."""
    return quantized_amsgrad_rule(p, g, s, h, 0, False)


@kernel
def _plain_dense(param, grad, states, hyper):
    apply_dense(quantized_adam_rule32, param, grad, states, QuantizedAdamHyper(*hyper))


@kernel
def _plain_amsgrad_dense(param, grad, states, hyper):
    apply_dense(quantized_amsgrad_rule32, param, grad, states, QuantizedAdamHyper(*hyper))


@kernel
def _plain_dense16(param, grad, states, hyper):
    apply_dense16(quantized_adam_rule, param, grad, states, QuantizedAdamHyper(*hyper))


@kernel
def _plain_amsgrad_dense16(param, grad, states, hyper):
    apply_dense16(quantized_amsgrad_rule, param, grad, states, QuantizedAdamHyper(*hyper))


_MOMENTS = (("exp_avg", True), ("exp_avg_sq", False))
#: amsgrad's third state: unsigned, quantized as ``exp_avg_sq`` (torchao's ``_new_buffer``)
_MAX_MOMENT = ("max_exp_avg_sq", False)


def _moments_of(group):
    return _MOMENTS + (_MAX_MOMENT,) if group.get("amsgrad") else _MOMENTS


class BlockwiseStateOptimizer(Optimizer):
    """What the quantized Adams share: float32 or bfloat16 (``ml_dtypes``) parameters, Adam's
    options, array state of a fixed layout per parameter and group (``_layout``: codes, scales
    and maps for quantized parameters, plain moments for the others), checked before every
    step and when loaded. Subclasses define ``_layout(param, group)`` and
    ``_maps(param, group)``."""

    sparse_kind = "dense-only"

    def _check_param(self, param, where):
        if type(param) is np.ndarray and param.dtype.name == "bfloat16":  # ml_dtypes'
            if not param.flags.writeable:
                raise ValueError(f"{where}: the parameter array is read-only; the optimizer "
                                 "updates parameters in place")
            return
        _check_param(param, where)
        if param.dtype != np.float32:
            raise TypeError(f"{where}: {type(self).__name__} takes float32 or bfloat16 "
                            f"parameters, got {param.dtype}")

    def _check_group(self, group):
        for name in ("lr", "eps", "weight_decay"):
            value = group.get(name)
            if not isinstance(value, (int, float, np.floating, np.integer)) or isinstance(
                    value, bool) or not np.isfinite(value):
                raise ValueError(f"Invalid {name}: {value!r}")
        if not 0.0 <= group["lr"]:
            raise ValueError(f"Invalid learning rate: {group['lr']}")
        if not 0.0 <= group["eps"]:
            raise ValueError(f"Invalid epsilon value: {group['eps']}")
        check_betas(group.get("betas"))
        if not isinstance(group.get("amsgrad"), (bool, np.bool_)):
            raise ValueError(f"amsgrad must be True or False, got {group.get('amsgrad')!r}")

    def _layout(self, param, group):
        """``{name: (shape, dtype)}`` of a parameter's array state."""
        raise NotImplementedError

    def _maps(self, param, group):
        """``{name: qmap}`` of a new parameter's quantization maps."""
        raise NotImplementedError

    def _state_names(self, group):
        return ()

    def _init_state(self, param, group):
        state = {"step": 0}
        for name, (shape, dtype) in self._layout(param, group).items():
            state[name] = np.zeros(shape, dtype)
        state.update({name: qmap.copy() for name, qmap in self._maps(param, group).items()})
        return state

    def _check_state(self, state, param, group, where):
        for name, (shape, dtype) in self._layout(param, group).items():
            value = state.get(name)
            if (type(value) is not np.ndarray or value.shape != shape or value.dtype != dtype
                    or not value.flags.c_contiguous or not value.flags.writeable):
                raise ValueError(f"{where}['{name}'] must be a writeable C-contiguous {dtype} "
                                 f"array of shape {shape}")

    def _load_param_state(self, entry, param, group, where):
        """A parameter's state from a state_dict: npoptim's, or the library's with each tensor
        turned into a NumPy array (torchao's float8 codes as their ``uint8`` bits or as
        ``ml_dtypes.float8_e4m3fn``). Every array is checked before anything is kept."""
        if not isinstance(entry, dict):
            raise ValueError(f"{where} must be a dict")
        layout = self._layout(param, group)
        expected = set(layout) | {"step"}
        if set(entry) != expected:
            raise ValueError(f"{where} has entries {sorted(entry)}, {type(self).__name__} "
                             f"expects {sorted(expected)} for a parameter of {param.size} "
                             "elements")
        out = {"step": _as_step(entry["step"], f"{where}['step']")}
        for name, (shape, dtype) in layout.items():
            arr = np.asarray(entry[name])
            if arr.dtype.name == "float8_e4m3fn" and dtype == np.uint8:
                arr = arr.view(np.uint8)
            if arr.shape != shape or arr.dtype != dtype:
                raise ValueError(f"{where}['{name}'] must be {dtype} of shape {shape}, got "
                                 f"{arr.dtype} of shape {arr.shape}")
            if "qmap" in name and not np.all(arr[:-1] <= arr[1:]):
                raise ValueError(f"{where}['{name}'] must be sorted (codes are searched in it)")
            out[name] = np.array(arr, order="C")
        return out


class QuantizedAdam(BlockwiseStateOptimizer):
    """torchao's low-bit Adam (``decoupled=False``) and AdamW; the classes below fix the
    codec. Options and defaults as torchao's; ``block_size`` and ``bf16_stochastic_round``
    are the optimizer's (not a group's), as torchao keeps them; ``seed`` (npoptim's) keys the
    stochastic rounding's counter-based stream."""

    step_in_state_dict = "tensor"
    codec = None
    decoupled = True
    default_block_size = 256

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, block_size=None, bf16_stochastic_round=False, seed=0):
        block_size = self.default_block_size if block_size is None else block_size
        if (not isinstance(block_size, (int, np.integer)) or isinstance(block_size, bool)
                or block_size < 2 or block_size % 2):
            raise ValueError(f"block_size must be an even int >= 2, got {block_size!r}")
        if not isinstance(bf16_stochastic_round, (bool, np.bool_)):
            raise ValueError(f"bf16_stochastic_round must be True or False, got "
                             f"{bf16_stochastic_round!r}")
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        self.block_size = int(block_size)
        self.bf16_stochastic_round = bool(bf16_stochastic_round)
        self.seed = int(seed)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad))

    def quantized(self, param):
        """Whether ``param`` gets quantized state (torchao's rule: at least 4096 elements and
        a multiple of ``block_size``)."""
        return param.size >= MIN_QUANTIZED_SIZE and param.size % self.block_size == 0

    def _layout(self, param, group):
        if not self.quantized(param):  # torchao's zeros_like(param)
            return {name: (param.shape, param.dtype) for name, _ in _moments_of(group)}
        codes_shape = (param.size // 2,) if self.codec == "qmap4" else param.shape
        layout = {}
        for name, signed in _moments_of(group):
            layout[f"{name}.codes"] = (codes_shape, np.dtype(np.uint8))
            layout[f"{name}.scale"] = ((param.size // self.block_size,), np.dtype(np.float32))
            qmap = qmap_for(self.codec, signed)
            if qmap is not None:
                layout[f"{name}.qmap"] = (qmap.shape, np.dtype(np.float32))
        return layout

    def _maps(self, param, group):
        if not self.quantized(param) or self.codec == "fp8":
            return {}
        return {f"{name}.qmap": qmap_for(self.codec, signed)
                for name, signed in _moments_of(group)}

    # --------------------------------------------------------------------------- the step
    def _hyper(self, group, step, code=-1, key=None):
        f32 = np.float32
        beta1, beta2 = group["betas"]
        lr, wd = f32(group["lr"]), f32(group["weight_decay"])
        t = f32(step)
        w1, w2 = 1.0 - beta1, 1.0 - beta2
        return QuantizedAdamHyper(
            codec=np.int64(CODECS[self.codec]), block_size=np.int64(self.block_size),
            code=np.int64(code), decoupled=np.int64(self.decoupled), lr_wd=f32(lr * wd), weight_decay=wd,
            lerp1_low=np.int64(abs(w1) < 0.5), lerp1_coeff=f32(w1 if abs(w1) < 0.5 else w1 - 1),
            lerp2_low=np.int64(abs(w2) < 0.5), lerp2_coeff=f32(w2 if abs(w2) < 0.5 else w2 - 1),
            bias_correction1=f32(1) - f32(beta1) ** t,
            bias_correction2_sqrt=np.sqrt(f32(1) - f32(beta2) ** t), eps=f32(group["eps"]),
            lr=lr, stochastic=np.int64(key is not None), key=np.uint64(key or 0))

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        bfloat16 = param.dtype.name == "bfloat16"
        key = (stream_key(self.seed, index, state["step"])
               if bfloat16 and self.bf16_stochastic_round else None)
        hyper = tuple(self._hyper(group, state["step"], BFLOAT16 if bfloat16 else -1, key))
        if bfloat16:
            param, grad = param.view(np.uint16), grad.view(np.uint16)
        moments = _moments_of(group)
        amsgrad = len(moments) == 3
        if not self.quantized(param):
            flat = tuple(state[name].reshape(-1) for name, _ in moments)
            if bfloat16:
                kernel = _plain_amsgrad_dense16 if amsgrad else _plain_dense16
                kernel(param, grad, tuple(m.view(np.uint16) for m in flat), hyper)
            else:
                (_plain_amsgrad_dense if amsgrad else _plain_dense)(param, grad, flat, hyper)
            return
        no_qmap, no_lut = np.zeros(1, np.float32), np.zeros(1, np.uint8)
        states = tuple((state[f"{name}.codes"].reshape(-1), state[f"{name}.scale"],
                        state.get(f"{name}.qmap", no_qmap), no_lut) for name, _ in moments)
        (_quantized_amsgrad_dense if amsgrad else _quantized_dense)(param, grad, states, hyper)


class AdamW8bit(QuantizedAdam):
    """torchao's ``AdamW8bit``: 8-bit dynamic-map moments, blocks of 256.

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
        Decoupled weight decay λ: θ(1 - γλ) before the moments.
    amsgrad : bool, default: False
        Divide by the running maximum of the second moment (AMSGrad), quantized as it is.
    block_size : int or None, default: None
        Elements per block of the quantized state (an even int; None: 256, torchao's); the
        optimizer's, not a group's.
    bf16_stochastic_round : bool, default: False
        Round a new bfloat16 parameter stochastically instead of to nearest (float32 parameters
        ignore it).
    seed : int, default: 0
        The key of the stochastic rounding's draws (npoptim's; see
        :mod:`npoptim.precision.stochastic`); a non-negative int.
    """

    codec = "qmap8"


class AdamW4bit(QuantizedAdam):
    """torchao's ``AdamW4bit``: 4-bit moments (signed dynamic map, unsigned linear map),
    blocks of 128.

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
        Decoupled weight decay λ: θ(1 - γλ) before the moments.
    amsgrad : bool, default: False
        Divide by the running maximum of the second moment (AMSGrad), quantized as it is.
    block_size : int or None, default: None
        Elements per block of the quantized state (an even int; None: 128, torchao's); the
        optimizer's, not a group's.
    bf16_stochastic_round : bool, default: False
        Round a new bfloat16 parameter stochastically instead of to nearest (float32 parameters
        ignore it).
    seed : int, default: 0
        The key of the stochastic rounding's draws (npoptim's; see
        :mod:`npoptim.precision.stochastic`); a non-negative int.
    """

    codec = "qmap4"
    default_block_size = 128


class AdamWFp8(QuantizedAdam):
    """torchao's ``AdamWFp8``: float8 e4m3fn moments with a scale per block of 256.

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
        Decoupled weight decay λ: θ(1 - γλ) before the moments.
    amsgrad : bool, default: False
        Divide by the running maximum of the second moment (AMSGrad), quantized as it is.
    block_size : int or None, default: None
        Elements per block of the quantized state (an even int; None: 256, torchao's); the
        optimizer's, not a group's.
    bf16_stochastic_round : bool, default: False
        Round a new bfloat16 parameter stochastically instead of to nearest (float32 parameters
        ignore it).
    seed : int, default: 0
        The key of the stochastic rounding's draws (npoptim's; see
        :mod:`npoptim.precision.stochastic`); a non-negative int.
    """

    codec = "fp8"


class _CoupledDecay:
    decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, block_size=None, bf16_stochastic_round=False, seed=0):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, block_size=block_size,
                         bf16_stochastic_round=bf16_stochastic_round, seed=seed)


class Adam8bit(_CoupledDecay, AdamW8bit):
    """torchao's ``Adam8bit``: :class:`AdamW8bit` with L2 decay (``g + weight_decay * p``).

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
        Weight decay λ: λθ added to the gradient (L2).
    amsgrad : bool, default: False
        Divide by the running maximum of the second moment (AMSGrad), quantized as it is.
    block_size : int or None, default: None
        Elements per block of the quantized state (an even int; None: 256, torchao's); the
        optimizer's, not a group's.
    bf16_stochastic_round : bool, default: False
        Round a new bfloat16 parameter stochastically instead of to nearest (float32 parameters
        ignore it).
    seed : int, default: 0
        The key of the stochastic rounding's draws (npoptim's; see
        :mod:`npoptim.precision.stochastic`); a non-negative int.
    """


class Adam4bit(_CoupledDecay, AdamW4bit):
    """torchao's ``Adam4bit``: :class:`AdamW4bit` with L2 decay.

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
        Weight decay λ: λθ added to the gradient (L2).
    amsgrad : bool, default: False
        Divide by the running maximum of the second moment (AMSGrad), quantized as it is.
    block_size : int or None, default: None
        Elements per block of the quantized state (an even int; None: 128, torchao's); the
        optimizer's, not a group's.
    bf16_stochastic_round : bool, default: False
        Round a new bfloat16 parameter stochastically instead of to nearest (float32 parameters
        ignore it).
    seed : int, default: 0
        The key of the stochastic rounding's draws (npoptim's; see
        :mod:`npoptim.precision.stochastic`); a non-negative int.
    """


class AdamFp8(_CoupledDecay, AdamWFp8):
    """torchao's ``AdamFp8``: :class:`AdamWFp8` with L2 decay.

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
        Weight decay λ: λθ added to the gradient (L2).
    amsgrad : bool, default: False
        Divide by the running maximum of the second moment (AMSGrad), quantized as it is.
    block_size : int or None, default: None
        Elements per block of the quantized state (an even int; None: 256, torchao's); the
        optimizer's, not a group's.
    bf16_stochastic_round : bool, default: False
        Round a new bfloat16 parameter stochastically instead of to nearest (float32 parameters
        ignore it).
    seed : int, default: 0
        The key of the stochastic rounding's draws (npoptim's; see
        :mod:`npoptim.precision.stochastic`); a non-negative int.
    """
