r"""Muon (Jordan et al., 2024), as ``torch.optim.Muon`` 2.13: momentum, then orthogonalization.

For a 2-D parameter :math:`\theta\in\mathbb R^{A\times B}` with gradient :math:`G`, momentum
:math:`\mu`, learning rate :math:`\gamma`, weight decay :math:`\lambda`:

.. math::

    M &\leftarrow \mathrm{lerp}(M, G, 1-\mu) = \mu M + (1-\mu) G\\
    U &= \mathrm{lerp}(G, M, \mu) \;\text{(nesterov)} \quad\text{or}\quad U = M\\
    O &= \mathrm{NS}_k(U)\\
    \theta &\leftarrow \theta\,(1 - \gamma\lambda) - \gamma'\,O

(:math:`M` is the state ``momentum_buffer``), where :math:`\gamma' = \gamma\sqrt{\max(1, A/B)}` (``adjust_lr_fn`` None or "original") or
:math:`0.2\,\gamma\sqrt{\max(A, B)}` ("match_rms_adamw"). Note torch's momentum is a ``lerp``,
an exponential average of gradients, not SGD's :math:`\mu M + G`.

:math:`\mathrm{NS}_k` is :math:`k` (``ns_steps``) Newton–Schulz iterations that push every
singular value of :math:`U` towards 1 (roughly :math:`U \mapsto U(U^\top U)^{-1/2}`). With
:math:`X` the wide orientation of :math:`U` (transposed when :math:`A > B`), scaled to
Frobenius norm 1 (:math:`X / \max(\|X\|_F, \epsilon)`), each iteration with coefficients
:math:`(a, b, c)` is

.. math::

    S = X X^\top,\qquad X \leftarrow a X + (b S + c S^2) X .

**Precision.** torch runs the iteration in bfloat16 whatever the parameter's dtype, so this
module does too: :func:`~npoptim.kernels.bfloat16.to_bfloat16` rounds to bfloat16 (8
significant bits), as torch's conversion does (a float64 goes through float32 first; any NaN
becomes the canonical quiet NaN ``0x7FC0``, c10's), and :func:`bf16_addmm` reproduces
torch's CPU bfloat16 ``addmm``: float32 products of bfloat16 values (exact), summed in float32
in the order torch's backend sums them, then ``fma(beta, C, alpha * sum)`` rounded once to
bfloat16. The order depends on the size (:func:`bf16_matmul_float32`): up to
``NATIVE_GEMM_MAX_SIZE`` multiply-adds torch runs its own loop (four interleaved partial
sums); above, it calls oneDNN, whose AVX512-BF16 kernel feeds one accumulator with pairs of
products. Both were checked bit for bit against torch 2.13 on an x86 CPU with AVX512-BF16 for
matrices up to 512 in each dimension. Not reproduced: oneDNN splits longer sums (an inner
dimension above 512) into chunks whose length depends on its blocking heuristics, and on a
CPU where oneDNN uses other instructions (AMX, no native bfloat16, ARM) the order differs
too; there an element of the orthogonalized update may differ from torch's by one bfloat16
unit (a relative 2**-8 of that element). Nor is the layout dependence of torch's own loop: its
summation order depends on the operands' layouts (measured with cancelling inputs as
tests/cpu_probe.py builds them, k from 5 to 64): row-major times row-major, and column-major
times column-major, add in four interleaved partial sums (npoptim's order); column-major times
row-major in one running sum; row-major times column-major, ``X @ X.T``, in float32 vector
lanes whose width depends on the inner dimension (one running sum below 16); npoptim sums in
four partial sums throughout, so a float32 sum near a bfloat16 midpoint rounds the other way
now and then (rarely: a few elements of a 20-step run, when at all). Bfloat16 values are held
in float32 arrays; the parameter update itself is done in the parameter's dtype.

**Keller Jordan's Muon** (``variant="keller_jordan"``; the default ``variant="torch"`` is
torch's): ``SingleDeviceMuon`` and ``SingleDeviceMuonWithAuxAdam`` of the package
``muon-optimizer`` 0.1.0 (KellerJordan/Muon muon.py; its ``Muon`` and ``MuonWithAuxAdam`` are
the same steps spread over ``torch.distributed`` ranks). Its momentum is torch's (``momentum.
lerp_(grad, 1-beta)``, then ``grad.lerp_(momentum, beta)``, always Nesterov), its coefficients
are torch's defaults (3.4445, −4.7750, 2.0315), its Newton–Schulz runs in bfloat16 as torch's
does, and its weight decay is torch's, :math:`\theta(1-\gamma\lambda)` before the update. It
differs in four places, each a switch the variant sets (a switch given explicitly overrides
it):

* ``ns_eps_mode="added"``: :math:`X/(\|X\|_F + 10^{-7})`. In bfloat16 the sum is torch's
  bfloat16 tensor plus a Python number, which torch casts to bfloat16 first (as the clamp's
  bound; measured: a norm of 1.6e-8 plus 1e-7 gives 1.1642e-7, the float32 sum 1.1595e-7),
  then adds in float32 and rounds.
* ``ns_form="separate"``: each iteration as the package writes it, ``B = b * A + c * A @ A``
  (Python reads ``c * A @ A`` as ``(c * A) @ A``) and ``X = a * X + B @ X``: every product,
  scalar multiple and sum rounded to bfloat16 on its own, where torch's ``"addmm"`` fuses
  :math:`bA + c A^2` and :math:`aX + BX` into one ``addmm`` each, rounded once.
* ``scale_on="update"``: the shape scale :math:`\sqrt{\max(1, A/B)}` multiplies the
  orthogonalized bfloat16 update in place (``update *= ...``, rounded to bfloat16), and the
  parameter moves by :math:`-\gamma` times it; torch's ``"lr"`` scales the learning rate
  (:math:`\gamma'`) and the update keeps its bfloat16 values.
* ``nd_params="flatten_conv"``: a 4-D parameter (a convolution's (out, in, h, w)) is
  orthogonalized as the (out, in·h·w) matrix and the update reshaped back (the reshape that
  KellerJordan/Muon added after 0.1.0, commit c33a468: 0.1.0's own ``p.add_`` of the 2-D
  update to the 4-D parameter fails to broadcast), and its scale reads the *tensor's* last two
  sizes, :math:`\sqrt{\max(1, h/w)}` (``grad.size(-2) / grad.size(-1)``), not the matrix's.
  The package runs 3-D and 5-D+ parameters as batches of matrices (torch's ``bmm``, whose
  bfloat16 summation order npoptim does not reproduce): npoptim refuses them, as torch's
  ``"refuse"`` refuses every parameter that is not 2-D.

``SingleDeviceMuonWithAuxAdam``'s other groups, ``use_muon=False`` (a group option, True by
default; the biases, gains and embeddings), get the package's AdamW, run as npoptim's AdamW
rule (:func:`npoptim.optim.adam.adam_rule`): their own ``lr`` (default 3e-4), ``betas``
((0.9, 0.95)), ``eps`` (1e-10) and ``weight_decay`` (0), decoupled decay
:math:`\theta(1-\gamma\lambda)` first, then :math:`\theta - \gamma\,\hat m/(\sqrt{\hat v} +
\epsilon)` with both moments bias-corrected by the group's step count (state ``exp_avg``,
``exp_avg_sq`` and ``step``, an int as the package's). The package writes :math:`v` as
``lerp_(grad.square(), 1-beta2)`` and the denominator as ``(v/b_2).sqrt() + eps``, npoptim's
rule as an fma and :math:`\sqrt v/\sqrt{b_2} + \epsilon`: the same in real arithmetic
(measured over 24 steps: the same float64 bits, float32 within an ulp). The package's constructor defaults (``lr=0.02``, ``weight_decay=0`` for the Muon
groups) are not the variant's: npoptim's Muon keeps torch's, so pass them. Not reproduced:
the package's Nesterov step writes the Nesterov direction into ``p.grad`` (``grad.lerp_``),
npoptim leaves the gradients alone; a parameter without a gradient fails 0.1.0's step
(``lerp_`` of None) and the GitHub version steps it as a zero gradient, where npoptim, as
torch, leaves it and its state alone.

**Convention switches** (see :mod:`npoptim.flavors`; ``flavor="optax"`` sets all four, as
``optax.contrib.muon`` 0.2.8 computes, google-deepmind/optax optax/contrib/_muon.py, for 2-D
parameters):

* ``bias_correction=True``: the momentum is bias-corrected with the step count :math:`t`
  (state ``count``), :math:`U = \mu\,M/(1-\mu^{t+1}) + (1-\mu)\,G/(1-\mu^t)` with Nesterov,
  else :math:`U = M/(1-\mu^t)`; torch has none.
* ``ns_dtype="param"``: the Newton–Schulz iteration in the parameter's dtype (torch:
  ``"bfloat16"``).
* ``ns_eps_mode="added"``: :math:`X/(\|X\|_F + \epsilon)` (torch: ``"max"``,
  :math:`X/\max(\|X\|_F, \epsilon)`, its ``clamp(min=eps)``; ``"clamp"``, the older word,
  is an alias).
* ``weight_layout="in_out"``: the matrix is (fan-in, fan-out) as in JAX's ``x @ W``, so
  ``adjust_lr_fn`` None/"original" scales by :math:`\sqrt{\max(1, B/A)}` (torch's
  ``"out_in"``, ``nn.Linear``'s (fan-out, fan-in): :math:`\sqrt{\max(1, A/B)}`).
  "match_rms_adamw" (optax ``consistent_rms=0.2``) is symmetric.

And one option optax has and torch lacks: ``adaptive=True`` scales the orthogonalized update
by the dual norm :math:`\langle U, O\rangle` (Bernstein & Newhouse, 2024), :math:`O
\leftarrow \mathrm{sum}(U \odot O)\,O`.

optax's weight decay is ``add_decayed_weights`` before ``scale_by_learning_rate``,
:math:`\theta - \gamma(\gamma'/\gamma\, O + \lambda\theta)`, which is torch's
:math:`\theta(1-\gamma\lambda) - \gamma' O` in real arithmetic (a few ulps apart). Not
reproduced: optax's other ``preconditioning`` modes, per-iteration coefficient lists (the
"dion" preset), ``mu_dtype``, and non-2-D parameters (optax sends them to AdamW; npoptim's
Muon refuses them, as torch's does).

**Keras** (``flavor="keras"``: ``keras.optimizers.Muon`` 3.15, keras-team/keras
keras/src/optimizers/muon.py, for the 2-D variables it orthogonalizes) sets ``ns_dtype="param"``
and ``ns_eps_mode="added"`` as optax (Keras's Newton–Schulz eps is a literal 1e-7; its
``epsilon`` is its AdamW's), and two switches of its own:

* ``momentum_form="sum"``: SGD's undampened momentum :math:`M \leftarrow \mu M + G`,
  :math:`U = G + \mu M` with Nesterov (torch's ``"lerp"`` is :math:`(1-\mu)` times it; the
  orthogonalization is scale-free but for eps, so the two differ by about eps/‖U‖).
* ``adjust_lr_fn="match_rms_adamw"`` with ``rms_rate`` (Keras's, default 0.2 = torch's
  constant): :math:`\gamma' = \mathrm{rms\_rate}\,\gamma\sqrt{\max(A, B)}`;
  ``rms_rate=None`` (Keras: off) leaves :math:`\gamma' = \gamma`.

Keras transposes tall matrices as torch does; its weight decay is :math:`\theta - \gamma\lambda
\theta` before the step (torch's, default 0.004); it has no bias correction. Keras's other
variables (not 2-D, ``exclude_layers``, ``exclude_embeddings``) get an AdamW step:
:func:`keras_adamw_part` builds it as npoptim's ``AdamW(flavor="keras")``; the Keras
constructor (``npoptim.flavors.from_framework("keras", "Muon", ...)``) accepts the AdamW
keywords for it and refuses ``exclude_layers`` (npoptim's parameters have no names).
Keras 3.15 on the JAX backend computes ``ops.norm`` of a float64 matrix in float32 (its JAX
dtype promotion maps float64 to float32), so its float64 Muon differs from this one by 1e-10
to 2e-8 of the scale over 10 to 24 steps (``tests/data/framework_known_bugs.json``); with the
norm in float64 (as its TensorFlow backend's promotion keeps it) the two agree to about 1e-15.
"""
import math
import numbers

import numpy as np

from npoptim import frameworks
from npoptim.kernels.bfloat16 import round_to_bfloat16
from npoptim.kernels.drivers import apply_dense
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import lerp_arrays
from npoptim.optim import adam
from npoptim.optim.adam import AdamHyper, adam_rule
from npoptim.optim.optimizer import Optimizer, _as_step, typed, typed_record
from npoptim.optim.options import (FLOOR_ALIASES, VARIANT_DEFAULT, check_betas, check_choice,
                                   check_flag, check_no_variant, check_nonnegative, flavored,
                                   is_real, resolve_variant)
# The Newton–Schulz iteration (its own module since Scion uses it too), re-exported: Muon's names
from npoptim.optim.orthogonalize import (  # noqa: F401
    DEFAULT_A, DEFAULT_B, DEFAULT_C, DEFAULT_NS_STEPS, EPS, FLOAT32_TINY, NATIVE_GEMM_MAX_SIZE,
    NS_FORMS, _dot_native, _dot_onednn, bf16_addmm, bf16_matmul_float32, float_addmm,
    sum_rounded_to_float32, zeropower_via_newtonschulz)

#: "match_rms_adamw"'s factor: torch's constant, Keras's ``rms_rate`` (Liu et al., 2025)
MATCH_RMS_RATE = 0.2

#: The published forms (:func:`npoptim.optim.options.resolve_variant`): torch.optim.Muon
#: 2.13, and Keller Jordan's muon-optimizer 0.1.0 (see the module docstring).
VARIANTS = {
    "torch": dict(ns_eps_mode="max", ns_form="addmm", scale_on="lr", nd_params="refuse"),
    "keller_jordan": dict(ns_eps_mode="added", ns_form="separate", scale_on="update",
                          nd_params="flatten_conv"),
}
#: The package's name for its form.
ALIASES = {"muon_optimizer": "keller_jordan"}
SCALE_PLACEMENTS = ("lr", "update")
ND_PARAMS = ("refuse", "flatten_conv")
#: The package's defaults of a ``use_muon=False`` group (SingleDeviceMuonWithAuxAdam)
AUX_ADAMW_DEFAULTS = dict(lr=3e-4, betas=(0.9, 0.95), eps=1e-10, weight_decay=0)


def matrix_shape(shape, nd_params):
    """The shape of the matrix a parameter of ``shape`` is orthogonalized as: itself (2-D),
    or with ``nd_params="flatten_conv"`` a 4-D (out, in, h, w) as (out, in·h·w)."""
    if len(shape) == 4 and nd_params == "flatten_conv":
        return (shape[0], int(np.prod(shape[1:])))
    return tuple(shape)


def orthogonalizes(shape, nd_params):
    """Whether Muon takes a parameter of ``shape`` (see ``nd_params``)."""
    return len(shape) == 2 or (len(shape) == 4 and nd_params == "flatten_conv")


def adjust_lr(lr, adjust_lr_fn, shape, weight_layout="out_in", rms_rate=MATCH_RMS_RATE):
    """The learning rate scaled for the matrix's shape (see the module docstring);
    "match_rms_adamw" scales by ``rms_rate * sqrt(max(A, B))``, not at all if ``rms_rate`` is
    None (Keras's ``rms_rate=None``). (A, B) are the last two sizes of ``shape``: a 2-D
    matrix's, a 4-D tensor's (h, w) as Keller Jordan's package reads them."""
    rows, cols = shape[-2:]
    if weight_layout == "in_out":  # (fan_in, fan_out): optax's sqrt(max(1, fan_out/fan_in))
        rows, cols = cols, rows
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        ratio = math.sqrt(max(1, rows / cols))
    elif adjust_lr_fn == "match_rms_adamw":
        ratio = 1.0 if rms_rate is None else rms_rate * math.sqrt(max(rows, cols))
    else:
        ratio = 1.0
    return lr * ratio


def momentum_direction(param, grad, flat_buf, state, group):
    """Step the momentum buffer (in place) and return the matrix Newton–Schulz orthogonalizes:
    torch's lerp (optax's, bias-corrected with ``bias_correction``) or, with
    ``momentum_form="sum"``, Keras's :math:`M \\leftarrow \\mu M + G`, :math:`U = G + \\mu M`."""
    momentum = group["momentum"]
    if group["momentum_form"] == "sum":
        mu = typed(param, momentum)[0]
        flat_buf *= mu
        flat_buf += grad
        return grad + mu * flat_buf if group["nesterov"] else flat_buf
    flat_buf[...] = lerp_arrays(flat_buf, grad, 1 - momentum)
    if not group["bias_correction"]:
        return lerp_arrays(grad, flat_buf, momentum) if group["nesterov"] else flat_buf
    state["count"][...] += 1
    t = int(state["count"])
    if not group["nesterov"]:
        return flat_buf / typed(param, 1 - momentum ** t)[0]
    # optax: mu m / (1 - mu^(t+1)) + (1 - mu) g / (1 - mu^t)
    grad_scale, buf_scale = typed(param, (1 - momentum) / (1 - momentum ** t),
                                  momentum / (1 - momentum ** (t + 1)))
    return buf_scale * flat_buf + grad_scale * grad


@kernel
def _aux_adamw_dense(param, grad, states, hyper):
    apply_dense(adam_rule, param, grad, states, AdamHyper(*hyper))


class Muon(Optimizer):
    """Muon, matching ``torch.optim.Muon`` (see the module docstring), or with
    ``variant="keller_jordan"`` Keller Jordan's ``SingleDeviceMuon``. 2-D parameters only
    (and 4-D with ``nd_params="flatten_conv"``); a param group with ``use_muon=False`` (the
    group option of ``SingleDeviceMuonWithAuxAdam``) is stepped with its AdamW instead, any
    shape, from the group's ``lr``, ``betas``, ``eps`` and ``weight_decay`` (defaults 3e-4,
    (0.9, 0.95), 1e-10 and 0, the package's).

    Parameters
    ----------
    params : iterable of arrays or dicts
        The arrays to optimize (updated in place), or param groups (dicts with ``"params"``).
    lr : float, default: 0.001
        Learning rate γ.
    weight_decay : float, default: 0.1
        Decoupled weight decay λ: θ(1 - γλ).
    momentum : float, default: 0.95
        Momentum μ of the buffer.
    nesterov : bool, default: True
        Orthogonalize the Nesterov direction lerp(G, M, μ) instead of M.
    ns_coefficients : tuple of float, default: (3.4445, -4.775, 2.0315)
        Coefficients (a, b, c) of each Newton–Schulz iteration.
    eps : float, default: 1e-07
        Floor ε of the Frobenius norm the matrix is scaled by.
    ns_steps : int, default: 5
        Number k of Newton–Schulz iterations.
    adjust_lr_fn : str or None, default: None
        None or ``"original"`` (γ sqrt(max(1, A/B))) or ``"match_rms_adamw"`` (rms_rate γ
        sqrt(max(A, B))).
    adaptive : bool, default: False
        Scale the orthogonalized update by the dual norm <U, O> (optax).
    bias_correction : bool, default: False
        Bias-correct the momentum (optax); torch has none.
    ns_dtype : str, default: 'bfloat16'
        dtype of the Newton–Schulz iteration: ``"bfloat16"`` (torch) or ``"param"`` (optax, Keras).
    ns_eps_mode : str, default: the variant's
        ``"max"`` (X/max(‖X‖, ε), torch) or ``"added"`` (X/(‖X‖ + ε): optax, Keras, Keller
        Jordan); ``"clamp"``, the older word of ``"max"``, is an alias.
    weight_layout : str, default: 'out_in'
        ``"out_in"`` (torch's (fan-out, fan-in)) or ``"in_out"`` (JAX's), for the lr adjustment.
    momentum_form : str, default: 'lerp'
        ``"lerp"`` (torch's average) or ``"sum"`` (M ← μM + G, Keras).
    rms_rate : float, default: 0.2
        Keras's factor of ``"match_rms_adamw"`` (None: γ' = γ).
    variant : str, default: 'torch'
        The published form: ``"torch"`` or ``"keller_jordan"`` (alias ``"muon_optimizer"``);
        it sets every switch whose default is "the variant's", and a switch given explicitly
        overrides it.
    ns_form : str, default: the variant's
        ``"addmm"`` (bA + cA² and aX + BX each one fused addmm, torch) or ``"separate"``
        (each product, multiple and sum rounded on its own, Keller Jordan).
    scale_on : str, default: the variant's
        Where the shape scale goes: ``"lr"`` (γ', torch) or ``"update"`` (the bfloat16
        update multiplied in place, Keller Jordan).
    nd_params : str, default: the variant's
        ``"refuse"`` (2-D only, torch) or ``"flatten_conv"`` (a 4-D parameter as its (out,
        in·h·w) matrix, scaled by its last two sizes, Keller Jordan).
    step_scope : {'per_param', 'global'}, default: 'per_param'
        How the step count advances: per parameter (torch) or at every ``step()`` (Keras's
        ``iterations``); a flavor sets its own (see ``Optimizer.step_scope``).
    """

    step_in_state_dict = None
    #: The convention switches and their torch values (see :mod:`npoptim.flavors`), and
    #: optax's ``adaptive``, which torch lacks (off): left out of torch-form state_dicts.
    #: Keras's ``momentum_form`` and ``rms_rate`` (torch's fixed 0.2) are left out likewise.
    #: Keller Jordan's switches at torch's values too, ``use_muon`` (every group
    #: orthogonalized, as torch's) and the variant itself (an attribute, not a group option).
    torch_conventions = {"bias_correction": False, "ns_dtype": "bfloat16",
                         "ns_eps_mode": "max", "weight_layout": "out_in", "adaptive": False,
                         "momentum_form": "lerp", "rms_rate": MATCH_RMS_RATE,
                         "ns_form": "addmm", "scale_on": "lr", "nd_params": "refuse",
                         "use_muon": True, "variant": "torch"}

    @flavored
    def __init__(self, params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                 ns_coefficients=(DEFAULT_A, DEFAULT_B, DEFAULT_C), eps=EPS,
                 ns_steps=DEFAULT_NS_STEPS, adjust_lr_fn=None, *, adaptive=False,
                 bias_correction=False, ns_dtype="bfloat16", ns_eps_mode=VARIANT_DEFAULT,
                 weight_layout="out_in", momentum_form="lerp", rms_rate=MATCH_RMS_RATE,
                 variant="torch", ns_form=VARIANT_DEFAULT, scale_on=VARIANT_DEFAULT,
                 nd_params=VARIANT_DEFAULT):
        self.variant, switches = resolve_variant(
            VARIANTS, ALIASES, variant, dict(ns_eps_mode=ns_eps_mode, ns_form=ns_form,
                                             scale_on=scale_on, nd_params=nd_params))
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum,
                                      nesterov=nesterov, ns_coefficients=ns_coefficients,
                                      eps=eps, ns_steps=ns_steps, adjust_lr_fn=adjust_lr_fn,
                                      adaptive=adaptive, bias_correction=bias_correction,
                                      ns_dtype=ns_dtype, weight_layout=weight_layout,
                                      momentum_form=momentum_form, rms_rate=rms_rate,
                                      use_muon=True, **switches))

    def add_param_group(self, param_group):
        if isinstance(param_group, dict) and param_group.get("use_muon", True) in (False,):
            # SingleDeviceMuonWithAuxAdam's defaults of an AdamW group, not the Muon ones
            param_group = {**AUX_ADAMW_DEFAULTS, **param_group}
        super().add_param_group(param_group)
        try:
            self._check_shapes(self.param_groups[-1])
        except ValueError:
            self.param_groups.pop()
            raise

    @staticmethod
    def _check_shapes(group):
        if not group["use_muon"]:
            return
        for p in group["params"]:
            if orthogonalizes(p.shape, group["nd_params"]):
                continue
            if group["nd_params"] == "flatten_conv" and p.ndim > 2:
                raise ValueError(
                    f"Muon with nd_params='flatten_conv' takes 2-D and 4-D parameters, got "
                    f"{p.shape}: Keller Jordan's Muon runs other shapes as batches of "
                    "matrices (torch's bmm), which npoptim does not reproduce; give it a "
                    "group with use_muon=False (AdamW) or reshape it")
            raise ValueError("Muon only supports 2D parameters whereas we found a "
                             f"parameter with size: {p.shape} (optax and Keras give "
                             "the others AdamW: npoptim.AdamW, for Keras's form "
                             "npoptim.optim.muon.keras_adamw_part; Keller Jordan's: a "
                             "param group with use_muon=False)")

    def _check_group(self, group):
        check_no_variant(group)
        check_flag(group, "use_muon")
        if not group["use_muon"]:  # SingleDeviceMuonWithAuxAdam's AdamW
            check_nonnegative(group, "lr", "eps", "weight_decay")
            check_betas(group["betas"])
        check_choice(group, "ns_form", NS_FORMS)
        check_choice(group, "scale_on", SCALE_PLACEMENTS)
        check_choice(group, "nd_params", ND_PARAMS)
        if "params" in group:  # a step's check: the group's options may have been edited
            self._check_shapes(group)
        if not 0.0 <= group["lr"]:
            raise ValueError(f"Learning rate should be >= 0 but is: {group['lr']}")
        if not 0.0 <= group["momentum"]:
            raise ValueError(f"momentum should be >= 0 but is: {group['momentum']}")
        if not 0.0 <= group["weight_decay"]:
            raise ValueError(f"weight decay should be >= 0 but is: {group['weight_decay']}")
        # torch accepts any eps; a negative one would clamp the norm below zero
        if not (isinstance(group["eps"], numbers.Real) and group["eps"] >= 0.0):
            raise ValueError(f"Invalid epsilon value: {group['eps']}")
        fn = group["adjust_lr_fn"]
        if fn is not None and fn not in ("original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {fn} is not supported")
        # torch checks these two in the step; checking them here keeps the step atomic
        if group["ns_steps"] >= 100:
            raise ValueError("Number of steps must be less than 100 for computational "
                             "efficiency")
        if len(group["ns_coefficients"]) != 3:
            raise ValueError("Coefficients must be a tuple of exactly 3 values")
        check_flag(group, "adaptive", "bias_correction")
        check_choice(group, "ns_dtype", ("bfloat16", "param"))
        check_choice(group, "ns_eps_mode", ("max", "added"), FLOOR_ALIASES)
        check_choice(group, "weight_layout", ("out_in", "in_out"))
        check_choice(group, "momentum_form", ("lerp", "sum"))
        rate = group["rms_rate"]
        if rate is not None and not (is_real(rate)
                                     and 0.0 <= rate < math.inf):
            raise ValueError(f"rms_rate must be None or a finite number >= 0, got {rate!r}")
        if rate != MATCH_RMS_RATE and fn != "match_rms_adamw":
            raise ValueError(f"rms_rate={rate!r} is the factor of adjust_lr_fn="
                             f"'match_rms_adamw'; with adjust_lr_fn={fn!r} it would do nothing")
        if group["momentum_form"] == "sum" and group["bias_correction"]:
            raise ValueError("bias_correction corrects the lerp momentum (optax's): it needs "
                             "momentum_form='lerp'")
        if group["bias_correction"] and not group["momentum"] < 1:
            raise ValueError("bias_correction needs momentum < 1 (1 - momentum**t is 0)")

    def _state_names(self, group):
        if not group["use_muon"]:  # the package's AdamW (its "step" is an int, not an array)
            return ("exp_avg", "exp_avg_sq")
        # count: the steps taken, for the bias correction (optax's MuonState.count)
        return ("momentum_buffer", "count") if group["bias_correction"] else ("momentum_buffer",)

    def _init_state(self, param, group):
        state = super()._init_state(param, group)
        if not group["use_muon"]:
            state["step"] = 0
        return state

    def _load_param_state(self, entry, param, group, where):
        if group["use_muon"] or not isinstance(entry, dict) or "step" not in entry:
            return super()._load_param_state(entry, param, group, where)
        out = super()._load_param_state({k: v for k, v in entry.items() if k != "step"},
                                        param, group, where)
        out["step"] = _as_step(entry["step"], f"{where}['step']")
        return out

    def _state_shapes(self, param, group):
        shapes = super()._state_shapes(param, group)
        if "count" in shapes:
            shapes["count"] = ()
        return shapes

    def _update(self, param, grad, state, group, index, shape):
        if not group["use_muon"]:
            self._aux_adamw(param, grad, state, group)
            return
        buf = state["momentum_buffer"]
        flat_buf = buf.reshape(-1)
        update = momentum_direction(param, grad, flat_buf, state, group)
        matrix = matrix_shape(shape, group["nd_params"])
        ortho = zeropower_via_newtonschulz(update.reshape(matrix), group["ns_coefficients"],
                                           group["ns_steps"], group["eps"], group["ns_dtype"],
                                           group["ns_eps_mode"], ns_form=group["ns_form"])
        if group["adaptive"]:  # the dual norm <U, O> (optax's adaptive=True)
            ortho = np.sum(update.reshape(matrix) * ortho.astype(param.dtype)) * ortho
        lr = group["lr"]
        adjusted = adjust_lr(lr, group["adjust_lr_fn"], shape, group["weight_layout"],
                             group["rms_rate"])
        if group["scale_on"] == "update":  # Keller Jordan: update *= scale, in its dtype
            scale = adjust_lr(1.0, group["adjust_lr_fn"], shape, group["weight_layout"],
                              group["rms_rate"])
            if scale != 1.0:
                if group["ns_dtype"] == "bfloat16":
                    ortho = round_to_bfloat16(np.float32(scale) * ortho)
                else:
                    ortho = ortho * ortho.dtype.type(scale)
            adjusted = lr
        decay, neg_lr = typed(param, 1 - lr * group["weight_decay"], -adjusted)
        param *= decay
        param += neg_lr * ortho.reshape(-1).astype(param.dtype)

    def _aux_adamw(self, param, grad, state, group):
        """SingleDeviceMuonWithAuxAdam's AdamW (module docstring), as npoptim's AdamW rule."""
        state["step"] += 1
        t = state["step"]
        lr, (beta1, beta2) = group["lr"], group["betas"]
        hyper = typed_record(AdamHyper, param, decay_factor=1 - lr * group["weight_decay"],
                             l2=0.0, l2_decays=False, one_minus_beta1=1 - beta1, beta2=beta2,
                             one_minus_beta2=1 - beta2, maximize=False,
                             bias_correction2_sqrt=(1 - beta2 ** t) ** 0.5, eps=group["eps"],
                             neg_step_size=-lr / (1 - beta1 ** t), v_divisor=1.0,
                             eps_in_sqrt=False, eps_root=0.0, cautious=False, caution_scale=0.0)
        _aux_adamw_dense(param, grad, self._flat_states(state, group), hyper)


def keras_adamw_part(params, learning_rate=1e-3, *, adam_beta_1=0.9, adam_beta_2=0.999,
                     adam_weight_decay=0.004, epsilon=1e-7, adam_lr_ratio=1, **muon_keywords):
    """The AdamW step ``keras.optimizers.Muon`` gives the variables it does not orthogonalize
    (those not 2-D, those whose path matches ``exclude_layers``, embeddings with
    ``exclude_embeddings``), as npoptim's ``AdamW(flavor="keras")``: Keras's Adam
    (eps-hat, global step count) at ``learning_rate * adam_lr_ratio``, decayed decoupled by
    ``learning_rate * adam_weight_decay`` (Keras's own learning rate, not the ratio's).

    Takes keras Muon's keywords (the Muon-only ones are accepted and not used), so one Keras
    call splits in two: ``Muon(matrices, flavor="keras", ...)`` (or
    ``from_framework("keras", "Muon", matrices, **kw)``) and ``keras_adamw_part(others,
    **kw)``, stepped together. Under a schedule set this optimizer's lr to
    ``lr * adam_lr_ratio``.
    """
    entry = frameworks.get("keras").constructors["Muon"]
    unknown = sorted(set(muon_keywords) - set(entry.defaults) - set(frameworks.NOT_CONVENTIONS))
    if unknown:
        raise TypeError(f"keras Muon has no argument(s) {', '.join(unknown)}")
    # refuses what the Muon part refuses, but exclude_layers (which chose these parameters)
    frameworks.translate(entry, {k: v for k, v in muon_keywords.items() if k != "exclude_layers"},
                         "keras")
    if not (isinstance(adam_lr_ratio, numbers.Real) and adam_lr_ratio > 0):
        raise ValueError(f"adam_lr_ratio must be > 0 (npoptim's AdamW decays by lr * "
                         f"weight_decay), got {adam_lr_ratio!r}")
    decay = 0.0 if adam_weight_decay is None else adam_weight_decay / adam_lr_ratio
    return adam.AdamW(params, lr=learning_rate * adam_lr_ratio, betas=(adam_beta_1, adam_beta_2),
                 eps=epsilon, weight_decay=decay, flavor="keras")
