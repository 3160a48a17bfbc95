r"""Cautious masking (Liang et al., "Cautious Optimizers: Improving Training with One Line of
Code", arXiv 2411.16085), the ``cautious=True`` switch of Adam/AdamW, Lion and ADOPT.

An optimizer proposes the update :math:`u` (the parameter moves by :math:`-\gamma u`); the
cautious form keeps only the elements where :math:`u` and the gradient :math:`g` agree in
sign, and scales the kept ones up so that the step keeps its size on average. Over the whole
tensor (one parameter, :math:`n` elements):

.. math::

    \phi &= \mathbb{1}(u \odot g > 0)                &&\text{the mask, element-wise}\\
    k &= \textstyle\sum_i \phi_i                     &&\text{how many agree}\\
    s &= \frac{n}{k + 1}                  &&\text{(``cautious\_scale="plus\_one"``)}\\
    s &= \frac{1}{\max(k/n,\ 10^{-3})}    &&\text{(``cautious\_scale="floored\_mean"``)}\\
    \theta &\leftarrow \theta - \gamma\, s\,(\phi \odot u)

:math:`g` is the gradient the optimizer steps on: negated under ``maximize``, with the L2
decay :math:`\lambda\theta` added where the optimizer adds it to the gradient (Adam's
``weight_decay`` without ``decoupled_weight_decay``). A decay applied to the parameter
(AdamW's :math:`\theta(1-\gamma\lambda)`, Lion's :math:`\lambda\theta` added to the sign)
stays outside the mask: it is neither masked nor rescaled. An element where :math:`u g` is
0 or NaN is masked (a NaN update stays NaN: it is multiplied by 0, as torch's ``mul``).

The mask needs :math:`k`, a sum over the whole tensor, before any element is updated: a
cautious step makes two passes over each parameter. The first computes every element's
update without storing anything and counts the elements that agree
(:func:`~npoptim.kernels.reduction.sum_pair`, an order fixed by the size alone; the count
is exact below :math:`2^{24}` agreeing elements in float32, :math:`2^{53}` in float64); the
second is the optimizer's ordinary rule with the scale :math:`s` in its record, applied by
:func:`masked` to each element. Each optimizer writes its first-pass rule (the same
arithmetic as its update rule, through the same helper) next to its rule; what the cautious
forms share lives here. The scale is computed in the parameter's dtype, as torch computes it
(``numel / (mask.sum() + 1)``; ``1 / mask.mean().clamp(min=1e-3)``).

Sources and where they differ:

* the paper's Algorithm 1 (v1) and section 2: :math:`\phi = \mathbb{1}(u\circ g > 0)`, the
  learning rate scaled by :math:`\dim(\phi)/(\mathrm{nnz}(\phi) + 1)`: ``"plus_one"``, the
  default. (The one-line form at the top of arXiv v4, ``u * m / (m.mean() + eps)``, leaves
  ``eps`` unnamed: with ``eps = 1/n`` it is ``"plus_one"``.)
* kozistr/pytorch_optimizer 4.1.0 ``pytorch_optimizer/base/optimizer.py``
  ``BaseOptimizer.apply_cautious`` (used by ``optimizer/lion.py`` ``Lion`` with
  ``cautious=True``, and by ADOPT, AdEMAMix, Adafactor, LaProp, MARS, Muon...): the mask of
  ``update * grad > 0`` in the gradient's dtype, multiplied by ``numel / (sum + 1)``, then
  the update by the mask: ``"plus_one"`` (ADOPT's tests the update against the normalised
  gradient, of the gradient's sign). The gradient is the one after its in-place
  ``maximize`` and L2 decay. pytorch_optimizer 4.1.0 has no cautious AdamW (its ``adamw.py``
  is StableAdamW, without the option).
* kyleliang919/C-Optim ``c_lion.py`` ``update_fn``: decay :math:`\theta(1-\gamma\lambda)`
  first, the mask of ``update * grad > 0`` scaled by ``numel / (sum + 1)``: ``"plus_one"``
  (npoptim ``Lion(variant="lion_pytorch", cautious=True)``).
* kyleliang919/C-Optim ``c_adamw.py`` ``AdamW.step`` (``foreach=False``; the Hugging Face
  AdamW it copies: eps on :math:`\sqrt v`, the step :math:`\gamma\sqrt{b_2}/b_1`, decay
  :math:`\theta - \gamma\lambda\theta` first): the mask of ``exp_avg * grad > 0`` (the same
  signs as the update's), divided by ``mask.mean().clamp_(min=1e-3)``: ``"floored_mean"``
  (npoptim ``AdamW(eps_mode="eps_hat", cautious=True, cautious_scale="floored_mean")``). Its
  comment keeps ``numel / (sum + 1)`` as "the original implementation". Its default
  ``foreach=True`` path (``c_adamw_update_foreach_async``, under ``torch.compile``) has the
  same mask and scale but puts eps on the bias-corrected :math:`\sqrt{v/b_2}` (torch's form,
  ``AdamW(eps=1e-6, cautious=True, cautious_scale="floored_mean")``) and counts steps per
  param group: the file's two paths differ (read, not run here: it needs its async runtime).
* huggingface/pytorch-image-models (timm 1.0) ``timm/optim/adamw.py`` ``AdamWLegacy``
  (``caution=True``: torch's AdamW form), ``timm/optim/lion.py`` and ``timm/optim/adopt.py``:
  the floored mean, ``"floored_mean"``; timm masks ``exp_avg`` before the division by the
  denominator, npoptim the update after it (the same in real arithmetic: a rounding apart).
"""
from npoptim.kernels.jit import kernel
from npoptim.kernels.scalar import constant
from npoptim.optim.options import check_choice, check_flag

#: The words of ``cautious_scale`` (see the module docstring).
CAUTIOUS_SCALES = ("plus_one", "floored_mean")
#: The floor of the kept fraction k/n in ``"floored_mean"`` (timm's and C-Optim's 1e-3).
MEAN_FLOOR = 1e-3
#: The switches and their values when the optimizer is not cautious (torch's optimizers
#: have no cautious form: the ``torch_conventions`` of the optimizers that take them).
NOT_CAUTIOUS = {"cautious": False, "cautious_scale": "plus_one"}


@kernel
def agrees(direction, g):
    """1 where ``direction`` (any value with the sign of the update) and the gradient agree
    in sign, ``direction * g > 0``, else 0, in the gradient's dtype (the first pass's count)."""
    if direction * g > 0:
        return constant(1.0, g)
    return constant(0.0, g)


@kernel
def masked(update, direction, g, scale):
    """``update * scale`` where ``direction`` and ``g`` agree in sign, else ``update * 0``
    (a NaN update stays NaN, as torch's ``update.mul_(mask)``)."""
    if direction * g > 0:
        return update * scale
    return update * constant(0.0, update)


def check_cautious(group):
    """``ValueError`` unless ``cautious`` is a bool and ``cautious_scale`` one of
    :data:`CAUTIOUS_SCALES`."""
    check_flag(group, "cautious")
    check_choice(group, "cautious_scale", CAUTIOUS_SCALES)


def cautious_scale(count, size, form, dtype):
    """The scale :math:`s` of ``size`` elements of which ``count`` agree, in ``dtype`` as torch
    computes it: ``"plus_one"`` :math:`n/(k+1)`, ``"floored_mean"``
    :math:`1/\\max(k/n, 10^{-3})`. Positive for any ``size`` >= 1."""
    kind = dtype.type
    if form == "plus_one":
        return kind(size) / (kind(count) + kind(1))
    return kind(1) / max(kind(count) / kind(size), kind(MEAN_FLOOR))


def caution_scale(group, param, count_agreeing):
    """The ``caution_scale`` field of a rule's record: 0 where the group is not cautious (the
    rule then runs as without the switch), else :func:`cautious_scale` of the count
    ``count_agreeing()`` returns (the first pass, run only here)."""
    if not group["cautious"] or param.size == 0:
        return 0.0
    return cautious_scale(float(count_agreeing()), param.size, group["cautious_scale"],
                          param.dtype)
