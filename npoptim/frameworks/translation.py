"""A framework constructor's keywords as npoptim's, and back: :func:`translate` (the
framework's names and values to npoptim's keywords, refusing the options that are not
conventions, :data:`NOT_CONVENTIONS`), :func:`framework_call` (the reverse), and the value
converters a table names in a ``(keyword, conversion)`` target (``_CONVERSIONS``: optax's
mostly, also TF Ftrl's ``beta``, ONNX Momentum's ``beta`` and ``mode``, Keras Muon's
``rms_rate``). It reads an entry's fields only, so it imports no table."""
import math
import numbers

import numpy as np

#: Framework options that wrap the update rather than change it: refused by name.
NOT_CONVENTIONS = {
    "clipnorm": "per-variable gradient clipping is not part of the update; clip the gradients "
                "before step()",
    "clipvalue": "gradient clipping is not part of the update; clip the gradients before step()",
    "global_clipnorm": "global gradient clipping is not part of the update; clip the gradients "
                       "before step()",
    "use_ema": "an exponential moving average of the weights is kept outside the optimizer",
    "ema_momentum": "an exponential moving average of the weights is kept outside the optimizer",
    "ema_overwrite_frequency": "an exponential moving average of the weights is kept outside "
                               "the optimizer",
    "gradient_accumulation_steps": "accumulate the gradients before step()",
    "loss_scale_factor": "scale the loss and unscale the gradients outside the optimizer",
    "name": None,  # accepted and ignored: a Keras/TF object name
}


def translate(entry, framework_kwargs, flavor_name, optional=False):
    """npoptim keywords from a framework constructor's keywords (``entry``: a
    :class:`~npoptim.frameworks.model.FrameworkOptimizer`). ``None`` for a Keras
    ``weight_decay``/optax ``momentum`` means 0.

    Parameters
    ----------
    entry : FrameworkOptimizer
        the framework constructor.
    framework_kwargs : dict
        the call's keywords, in the framework's names.
    flavor_name : str
        the flavor's name, for error messages.
    optional : bool, default: False
        skip keywords the constructor does not name instead of refusing them.
    """
    out, pairs = {}, {}
    for key, value in _without_aliases(entry, framework_kwargs, flavor_name).items():
        if key in NOT_CONVENTIONS:
            if NOT_CONVENTIONS[key] is None:
                continue
            if value is None or value is False:
                continue  # the framework's "off"
            raise ValueError(f"{flavor_name}: {key}={value!r} is not a convention of the "
                             f"update, and npoptim does not implement it: "
                             f"{NOT_CONVENTIONS[key]}")
        if key in entry.elsewhere or key in entry.derived:
            continue
        if key in entry.unsupported:
            allowed, why = entry.unsupported[key]
            if value not in allowed:
                raise ValueError(f"{flavor_name}: {key}={value!r}: {why}")
            continue
        if key not in entry.names:
            if optional:
                continue
            takes = (set(entry.names) | set(entry.unsupported) | set(entry.elsewhere)
                     | set(entry.aliases))
            raise TypeError(f"{flavor_name} {entry.npoptim}: unknown argument {key!r}; it takes "
                            f"{', '.join(sorted(takes))}")
        target = entry.names[key]
        if value is None and entry.defaults.get(key, None) is not None and target not in (
                "weight_decay", "momentum") and not (isinstance(target, tuple) and target[1]
                                                     in _NONE_IS_A_VALUE):
            # npoptim's None (eps_root = eps) has no twin
            raise ValueError(f"{flavor_name}: {key}=None: the framework takes a number")
        if value is None and target in ("weight_decay", "momentum"):
            value = 0.0
        if isinstance(target, tuple) and target[1] in _CONVERSIONS:
            out[target[0]] = _CONVERSIONS[target[1]][0](value)
        elif isinstance(target, tuple):
            pairs.setdefault(target[0], {})[target[1]] = value
        else:
            out[target] = value
    for name, parts in pairs.items():
        out[name] = tuple(parts.get(i) for i in range(max(2, max(parts) + 1)))
    given = _without_aliases(entry, framework_kwargs, flavor_name)
    for key, derive in entry.derived.items():
        if key in given:
            out.update(derive(given))
    return out


def _without_aliases(entry, framework_kwargs, flavor_name):
    """``framework_kwargs`` with each deprecated keyword
    (:attr:`~npoptim.frameworks.model.FrameworkOptimizer.aliases`) given as the keyword it
    stands for; both given (not None) is refused."""
    out = dict(framework_kwargs)
    for old, new in entry.aliases.items():
        value = out.pop(old, None)
        if value is None:
            continue
        if out.get(new) is not None:
            raise ValueError(f"{flavor_name} {entry.npoptim}: only one of {old} (deprecated) or "
                             f"{new} can be specified")
        out[new] = value
    return out


def _jax_key_seed(key):
    """optax noisy_sgd's ``key`` as npoptim's ``seed`` (``noise_stream="jax"``): None is 0
    (optax's key 0, with a warning); an integer, or a 0-d integer array, is the seed of
    ``jax.random.key(seed)`` (the optimizer checks its range, [0, 2**63)). A key array is
    refused (npoptim takes no jax objects; optax itself refuses raw key data), naming the
    seed that gives it: ``key(seed) = (seed >> 32, seed & 0xFFFFFFFF)``."""
    if key is None:
        return 0
    if isinstance(key, numbers.Integral):
        return key
    if "key<" in str(getattr(key, "dtype", "")):
        raise ValueError("optax noisy_sgd: key is a typed jax key; pass the integer seed it was "
                         "made from, key=seed (jax.random.key(seed)), in [0, 2**63) (for "
                         "jax.random.key_data(key) = (k0, k1) with k0 < 2**31, seed = "
                         "k0 * 2**32 + k1)")
    words = np.asarray(key)
    if words.ndim == 0 and words.dtype.kind in "iu":
        return int(words)
    if words.shape == (2,) and words.dtype == np.uint32:
        seed = int(words[0]) << 32 | int(words[1])
        which = (f"it is jax.random.key_data(jax.random.key({seed})): pass key={seed}"
                 if seed < 2 ** 63 else "its first word is >= 2**31, which no seed in "
                 "[0, 2**63) gives")
        raise ValueError(f"optax noisy_sgd: key={key!r} is raw key data, which optax refuses "
                         f"(jax.random.key takes a scalar seed); {which}")
    raise ValueError(f"optax noisy_sgd: key={key!r}: an integer seed in [0, 2**63) "
                     "(jax.random.key(seed)) or None (0)")


def _hessian_estimate(value):
    """optax sophia's ``hessian_diagonal_fn``, named by its estimate, as npoptim's
    ``hessian_estimate``: ``"hutchinson"`` (optax's default,
    ``hutchinson_estimator_diag_hessian``) is the caller's estimate (``step(grads, hvp=fn)``,
    optax's ``obj_fn``; the probes: npoptim's counter stream, or optax's given as
    ``probes=``), ``"squared-gradient"`` a transformation returning ``updates * updates``."""
    names = {"hutchinson": "caller", "squared-gradient": "squared-gradient"}
    if value not in names:
        raise ValueError(f"optax sophia hessian_diagonal_fn={value!r}: name the estimate, "
                         "'hutchinson' (optax's default; npoptim: step(grads, hvp=fn)) or "
                         "'squared-gradient' (updates * updates)")
    return names[value]


def _consistent_rms_to_adjust_lr_fn(value):
    """optax Muon's ``consistent_rms`` as torch's ``adjust_lr_fn``."""
    if value is None:
        return None
    if value == 0.2:
        return "match_rms_adamw"
    raise ValueError(f"optax: consistent_rms={value!r}: only None and 0.2 (torch's "
                     "adjust_lr_fn='match_rms_adamw') are implemented")


#: Names whose framework value is a function of npoptim's: (to npoptim, to the framework).
_CONVERSIONS = {
    "none_is_one": (lambda v: 1.0 if v is None else v, lambda v: v),  # optax lbfgs's lr
    "optax_linesearch": (lambda v: _optax_linesearch(v), lambda v: v),  # optax lbfgs's
    "none_is_zero": (lambda v: 0.0 if v is None else v, lambda v: v),  # TF FtrlOptimizer beta
    "consistent_rms": (_consistent_rms_to_adjust_lr_fn,
                       lambda v: 0.2 if v == "match_rms_adamw" else None),
    "complement": (lambda v: 1 - v, lambda v: 1 - v),    # ONNX Momentum beta = 1 - dampening
    "mode": (lambda v: v == "nesterov", lambda v: "nesterov" if v else "standard"),
    "none0": (lambda v: _no_warmup(v), lambda v: None if v == 0 else v),  # optax's warmup
    "hessian_fn": (_hessian_estimate,                  # optax sophia's hessian_diagonal_fn
                   lambda v: "hutchinson" if v == "caller" else v),
    "nullable": (lambda v: v, lambda v: v),  # None is a value (Keras Muon's rms_rate: off;
                                             # optax sophia's clip_threshold: no clipping)
    # optax adafactor: decay_rate = -beta2_decay; clipping_threshold None = no clipping;
    # eps is eps1 (its eps2, scale_by_param_block_rms's min_scale, is 1e-3)
    "negated": (lambda v: -v, lambda v: -v),
    "none_is_inf": (lambda v: math.inf if v is None else v,
                    lambda v: None if v == math.inf else v),
    "eps1_of_pair": (lambda v: (v, 1e-3), lambda v: v[0]),
    "momentum_dtype": (lambda v: _momentum_dtype(v), lambda v: None if v == "param" else v),
    "jax_key": (_jax_key_seed, lambda v: v),   # optax noisy_sgd's key: None is 0
    # optax-shampoo's GraftingType (an IntEnum): its number as npoptim Shampoo's graft_type
    "shampoo_graft": (lambda v: _shampoo_graft(v), lambda v: _SHAMPOO_GRAFTS.index(v) + 1),
}

#: optax-shampoo's GraftingType members in number order (SGD = 1 ... ADAGRAD_NORMALIZED = 6).
_SHAMPOO_GRAFTS = ("sgd", "adagrad", "rmsprop", "rmsprop_normalized", "sqrt_n",
                   "adagrad_normalized")


def _shampoo_graft(value):
    """optax-shampoo's ``graft_type`` (GraftingType, or its number) as npoptim's name."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not (
            1 <= int(value) <= len(_SHAMPOO_GRAFTS)):
        raise ValueError(f"optax-shampoo graft_type={value!r}: a GraftingType (1 SGD ... 6 "
                         "ADAGRAD_NORMALIZED)")
    return _SHAMPOO_GRAFTS[int(value) - 1]

#: Conversions whose framework None is a value (not "take the default").
_NONE_IS_A_VALUE = {"nullable", "none_is_inf", "momentum_dtype",
                    "optax_linesearch"}  # (optax lbfgs's linesearch=None: no line search)


def _momentum_dtype(dtype):
    """optax adafactor's ``dtype_momentum`` as npoptim's ``momentum_dtype``: float32 (optax's
    default) or None (the parameter's dtype)."""
    if dtype is None:
        return "param"
    name = getattr(dtype, "__name__", None) or getattr(dtype, "name", None) or str(dtype)
    if name == "float32":
        return "float32"
    raise ValueError(f"optax adafactor dtype_momentum={dtype!r}: float32 or None (the "
                     "parameter's dtype) are implemented")


def _optax_linesearch(value):
    """optax lbfgs's ``linesearch``: ``"zoom"`` (its default, ``scale_by_zoom_linesearch``;
    npoptim ``line_search_fn="zoom"``) or None (no line search)."""
    if value in (None, "zoom"):
        return value
    raise ValueError(f"optax: linesearch={value!r}: 'zoom' (optax's scale_by_zoom_linesearch, "
                     "its keywords given to from_framework) or None are implemented")


def _no_warmup(steps):
    """optax schedule_free's ``warmup_steps``: None (or 0) is npoptim's 0; a warmup is refused
    (optax's warmup runs on its int32 count, rounded to float32 under x64, and with the optax
    variant's lag: npoptim ``variant="optax"``, which this constructor does not select)."""
    if steps in (None, 0):
        return 0
    raise ValueError(f"optax schedule_free warmup_steps={steps!r}: not mapped (use npoptim "
                     "ScheduleFree*(..., variant='optax', warmup_steps=...))")


def framework_call(entry, hyper):
    """The keywords of the framework constructor ``entry`` (a
    :class:`~npoptim.frameworks.model.FrameworkOptimizer`) for npoptim hyperparameters
    ``hyper`` (npoptim's names).

    Parameters
    ----------
    entry : FrameworkOptimizer
        the framework constructor.
    hyper : dict
        npoptim hyperparameters, in npoptim's names.
    """
    out = {}
    for key, target in entry.names.items():
        name, index = target if isinstance(target, tuple) else (target, None)
        if name not in hyper:
            continue
        if index in _CONVERSIONS:
            out[key] = _CONVERSIONS[index][1](hyper[name])
        else:
            out[key] = hyper[name] if index is None else hyper[name][index]
    return out
