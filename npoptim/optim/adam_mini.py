r"""Adam-mini (Zhang et al., 2024, "Adam-mini: Use Fewer Learning Rates To Gain More",
arXiv 2406.16793), as the authors' ``adam-mini`` 1.1.1 (``Adam_mini``).

Adam-mini is AdamW with one second moment per *block* of a parameter instead of one per
element: the block's mean of :math:`g^2` feeds a scalar :math:`v_b`, and every element of the
block steps with the same denominator. With gradient :math:`g`, step count :math:`t` (per
parameter), :math:`b_1 = 1-\beta_1^t`, :math:`b_2 = 1-\beta_2^t`, learning rate
:math:`\gamma` and weight decay :math:`\lambda`, for a block :math:`B` of :math:`|B|`
elements:

.. math::

    v_B &\leftarrow \beta_2 v_B + (1-\beta_2)\,\frac{1}{|B|}\sum_{i\in B} g_i^2\\
    \theta &\leftarrow \theta\,(1 - \gamma\lambda)\\
    m &\leftarrow m + (1-\beta_1)(g - m)\\
    \theta_i &\leftarrow \theta_i - \gamma\, m_i\,
        \frac{1/b_1}{\sqrt{v_B}/\sqrt{b_2} + \epsilon}              &&\quad i \in B

The blocks come from the parameter's *name* (lower-cased; see :mod:`npoptim.optim.naming`
for how names are given), by substrings, tested in this order:

1. a name containing ``bias``: Adam's per-element :math:`v` (state ``v``), its step
   :math:`\theta - \frac{\gamma}{b_1}\cdot\frac{m}{\sqrt{v}/\sqrt{b_2}+\epsilon}`;
2. a query or key (:data:`QUERY_KEY_NAMES`: ``q_proj``, ``k_proj``, ``wq``, ``wk``,
   ``query``, ``key``): one block per attention head, the flat parameter cut into blocks of
   ``dim * dim // n_heads`` elements (a key of grouped-query attention has ``n_kv_heads`` of
   them); its size must be a multiple of that;
3. an embedding, output layer, value, attention output projection or MLP
   (:data:`NEURON_NAMES`): one block per output neuron, the rows of a matrix (one per token
   for an embedding or the output layer); a 2-D parameter only;
4. anything else (norms, unnamed parameters): the whole tensor is one block, one scalar
   :math:`v` (state ``vmean`` of shape ``()``).

The weight decay is 0 for a name containing ``norm``, ``ln`` or ``bias`` (the package builds
one param group per parameter with that decay), :math:`\lambda` for every other.
``vmean`` has shape ``(blocks, 1)`` for 2 and 3, as the package's; ``m`` has the
parameter's shape (the package keeps a query's or key's as ``(heads, head size)``: the same
numbers). ``n_kv_heads`` is checked
(it must divide ``n_heads``) but, as in the package, does not change the blocks: a key's
blocks have the size of a query's.

Sources and where they differ:

* zyushun/Adam-mini ``adam_mini/adam_mini.py`` (the PyPI package ``adam-mini`` 1.1.1), the
  form followed here. Its docstring says ``eps`` defaults to 1e-6; its signature says 1e-8,
  which is what it uses, and npoptim's default. Its distributed paths (the ``all_reduce`` of
  a block's sum over GPUs) are not reproduced: one process holds each whole parameter.
* The paper (Algorithm 1-3) partitions by Hessian structure in the same way, and states the
  embedding and output layers keep Adam's per-element :math:`v` in its first version; the
  1.1.1 code gives them one :math:`v` per token (rule 3 above), which is what npoptim does.

Rounding: the moments and the bias step as torch's ``addcmul``, ``lerp`` and ``addcdiv``
(:mod:`npoptim.kernels.scalar`); a block's step as the package's ``m * ((1/b_1)/h)``, times
:math:`\gamma`, subtracted. A block's mean of :math:`g^2` is summed in the fixed order of
:func:`npoptim.kernels.reduction.mean_of_squares`; torch sums in its own order, so the
float64 cross-checks agree to about 1e-16 of the parameters' scale, not to the bit. Dense
gradients only, float32 and float64 parameters.
"""
import math
from typing import NamedTuple

import numpy as np

from npoptim.kernels.drivers import apply_block_rule_dense, apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.reduction import mean_of_squares
from npoptim.kernels.scalar import fma, lerp
from npoptim.optim.naming import NamedParameters, with_names
from npoptim.optim.optimizer import Optimizer, typed_record
from npoptim.optim.options import check_betas, check_nonnegative

#: Substrings of a query's or key's name: one second moment per attention head.
QUERY_KEY_NAMES = ("k_proj", "q_proj", "wq", "wk", "query", "key")
#: Substrings of the names with one second moment per output neuron (a matrix's row):
#: embeddings and output layers (one per token), values, attention output projections, MLPs.
NEURON_NAMES = ("embed", "embd", "wte", "lm_head", "output", "final_layer", "v_proj", "wv",
                "value", "o_proj", "wo", "attn.proj", "feed_forward", "linear", "mlp")
#: Substrings of the names without weight decay.
NO_DECAY_NAMES = ("norm", "ln", "bias")


class AdamMiniHyper(NamedTuple):
    """One step's hyperparameters of a parameter, as the rules read them."""
    decay_factor: float           # 1 - lr * weight_decay (that parameter's decay), or 1
    one_minus_beta1: float        # the weight of m's lerp towards g
    beta2: float
    one_minus_beta2: float
    bias_correction2_sqrt: float  # sqrt(b2)
    eps: float
    inv_bias_correction1: float   # 1 / b1 (a block's step)
    lr: float                     # γ (a block's step)
    neg_step_size: float          # -lr / b1 (a bias's step, Adam's)


def partition(name, shape, group):
    """``(kind, block_size)`` of a parameter of this ``name`` (None: unnamed) and ``shape``:
    kind ``"adam"`` (per element; block_size 1), ``"head"``, ``"neuron"`` or ``"tensor"`` (see
    the module docstring). ``ValueError`` if the shape does not fit the kind."""
    name = (name or "").lower()
    size = math.prod(shape)
    if "bias" in name:
        return "adam", 1
    if any(word in name for word in QUERY_KEY_NAMES):
        dim, heads = group["dim"], group["n_heads"]
        if (dim * dim) % heads != 0:
            raise ValueError(f"{name!r} is a query or key: dim*dim ({dim}*{dim}) must be a "
                             f"multiple of n_heads ({heads})")
        head = dim * dim // heads
        if size % head != 0 or size == 0:
            raise ValueError(f"{name!r} is a query or key: its size {size} (shape "
                             f"{tuple(shape)}) must be a positive multiple of "
                             f"dim*dim/n_heads = {head}, one block per head")
        return "head", head
    if any(word in name for word in NEURON_NAMES):
        if len(shape) != 2:
            raise ValueError(f"{name!r} has one second moment per output neuron (a row of a "
                             f"matrix): it must be 2-D, not of shape {tuple(shape)}")
        return "neuron", shape[1]
    return "tensor", size


def decays(name):
    """Whether the parameter of this name takes the weight decay."""
    name = (name or "").lower()
    return not any(word in name for word in NO_DECAY_NAMES)


@kernel
def adam_mini_bias_rule(p, g, s, h):
    """One element of a bias (Adam's step, the package's order); ``s = (m, v)``."""
    m, v = s
    v = fma(h.one_minus_beta2 * g, g, v * h.beta2)
    p = p * h.decay_factor
    m = lerp(m, g, h.one_minus_beta1)
    denom = np.sqrt(v) / h.bias_correction2_sqrt + h.eps
    return p + h.neg_step_size * m / denom, (m, v)


@kernel
def adam_mini_block_rule(p, g, s, b, h):
    """One block (a :func:`~npoptim.kernels.drivers.apply_block_rule_dense` block rule):
    ``s = (m,)``, the block's slice of the first moment, ``b = (vmean,)``."""
    (m,) = s
    (vmean,) = b
    vmean = fma(h.one_minus_beta2, mean_of_squares(g), vmean * h.beta2)
    step = h.inv_bias_correction1 / (np.sqrt(vmean) / h.bias_correction2_sqrt + h.eps)
    for k in range(p.size):
        m[k] = lerp(m[k], g[k], h.one_minus_beta1)
        p[k] = p[k] * h.decay_factor - m[k] * step * h.lr
    return (vmean,)


@kernel
def _bias_dense(param, grad, states, hyper):
    apply_dense(adam_mini_bias_rule, param, grad, states, AdamMiniHyper(*hyper))


@kernel
def _blocks_dense(param, grad, block_size, states, block_states, hyper):
    apply_block_rule_dense(adam_mini_block_rule, param, grad, block_size, states, block_states,
                           AdamMiniHyper(*hyper))


def _check_count(group, name, allow_none=False):
    value = group[name]
    if allow_none and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"Invalid {name} value: {value!r} (must be a positive whole number)")


class AdamMini(NamedParameters, Optimizer):
    """Adam-mini, the authors' ``adam_mini.Adam_mini`` 1.1.1 (see the module docstring for the
    blocks each name gets).

    Parameters
    ----------
    params : iterable of (str, array) pairs, arrays or dicts
        The arrays to optimize (updated in place), as ``(name, array)`` pairs (torch's
        ``named_parameters()``), plain arrays (named by ``param_names``, or unnamed: one block
        a tensor) or param groups (dicts with ``"params"`` of either).
    lr : float, default: 0.001
        Learning rate γ.
    betas : tuple of float, default: (0.9, 0.999)
        Decay rates (β1, β2) of the first moment and of the blocks' second moments.
    eps : float, default: 1e-08
        Term ε added to the denominator, after the bias correction.
    weight_decay : float, default: 0.0
        Decoupled weight decay λ, θ(1 - γλ); 0 for names with ``norm``, ``ln`` or ``bias``.
    dim : int, default: 2048
        The model's hidden size: a query's or key's head has dim*dim/n_heads elements.
    n_heads : int, default: 32
        The number of attention heads.
    n_kv_heads : int or None, default: None
        The number of key and value heads (grouped-query attention); must divide
        ``n_heads``. None: ``n_heads``.
    param_names : sequence of str or None, default: None
        One name per parameter in param-group order, when ``params`` are plain arrays (see
        :mod:`npoptim.optim.naming`).
    """

    sparse_kind = "dense-only"
    step_in_state_dict = "int"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, *,
                 dim=2048, n_heads=32, n_kv_heads=None, param_names=None):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, dim=dim,
                        n_heads=n_heads, n_kv_heads=n_kv_heads)
        super().__init__(with_names(params, param_names), defaults)
        for group in self.param_groups:
            for param in group["params"]:
                partition(self.name_of(param), param.shape, group)

    def _check_group(self, group):
        check_nonnegative(group, "lr", "eps", "weight_decay")
        check_betas(group["betas"])
        _check_count(group, "dim")
        _check_count(group, "n_heads")
        _check_count(group, "n_kv_heads", allow_none=True)
        if group["n_kv_heads"] is not None and group["n_heads"] % group["n_kv_heads"] != 0:
            raise ValueError(f"n_kv_heads ({group['n_kv_heads']}) must divide n_heads "
                             f"({group['n_heads']})")

    def _state_names(self, group):
        return ("m", "v", "vmean")

    def _state_shapes(self, param, group):
        kind, block = partition(self.name_of(param), param.shape, group)
        if kind == "adam":
            return {"m": param.shape, "v": param.shape}
        if kind == "tensor":
            return {"m": param.shape, "vmean": ()}
        return {"m": param.shape, "vmean": (param.size // block, 1)}

    def _prepare(self, grads):
        prepared = super()._prepare(grads)
        for group, index, param, _ in prepared:
            try:
                partition(self.param_names[index], param.shape, group)
            except ValueError as exc:
                raise ValueError(f"params[{index}]: {exc}") from None
        return prepared

    def _update(self, param, grad, state, group, index, shape):
        state["step"] += 1
        step = state["step"]
        lr = group["lr"]
        beta1, beta2 = group["betas"]
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        name = self.param_names[index]
        weight_decay = group["weight_decay"] if decays(name) else 0.0
        hyper = typed_record(
            AdamMiniHyper, param,
            decay_factor=1 - lr * weight_decay if weight_decay > 0 else 1.0,
            one_minus_beta1=1 - beta1, beta2=beta2, one_minus_beta2=1 - beta2,
            bias_correction2_sqrt=math.sqrt(bias_correction2), eps=group["eps"],
            inv_bias_correction1=1 / bias_correction1, lr=lr, neg_step_size=-lr / bias_correction1)
        kind, block = partition(name, shape, group)
        m = np.asarray(state["m"]).reshape(-1)
        if kind == "adam":
            _bias_dense(param, grad, (m, np.asarray(state["v"]).reshape(-1)), hyper)
        else:
            _blocks_dense(param, grad, block, (m,), (np.asarray(state["vmean"]).reshape(-1),),
                          hyper)
