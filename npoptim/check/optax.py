"""An optax ``GradientTransformation`` factory as a step function of the golden cases'
protocol (:func:`npoptim.golden.replay.replay`), as optax's users run it.

:func:`make_step` builds ``optax.<name>`` (``optax.contrib.<name>`` for a dotted name; or the
user's own factory) wrapped in ``optax.inject_hyperparams`` so the learning rate (or the
keyword that is npoptim's lr: ``polyak_sgd``'s ``scaling``) can change per step, callable
defaults kept static (``contrib.adopt``'s ``clip_value_fn``; :data:`OPTAX_STATIC`), an argument
the flavor table names built as the optax object (:data:`OPTAX_NAMED`: ``contrib.sophia``'s
``hessian_diagonal_fn``), ``tx.update`` (with the params, which
``prodigy``/``dadapt_adamw``/schedule-free read; for a case with an objective, the loss as
``value=``; compiled with ``jax.jit`` for :data:`OPTAX_JIT`) then ``optax.apply_updates``.
``optax.lbfgs`` runs on the case's objective with its zoom line search
(:func:`lbfgs_make_step`). jax runs with ``jax_enable_x64``.

jax and optax are imported inside the functions only (``npoptim check --optax`` names them when
they are missing).
"""
import inspect

import numpy as np

from npoptim import flavors
from npoptim.check.spec import require
from npoptim.golden.replay import Refused


def _modules():
    jax = require("jax", "--optax")
    optax = require("optax", "--optax")
    jax.config.update("jax_enable_x64", True)
    return jax, optax


def optax_constructor(name):
    """``optax.<name>``; a dotted name (``contrib.adopt``) reads the submodule."""
    import functools
    optax = _modules()[1]
    return functools.reduce(getattr, name.split("."), optax)


def table_name(factory):
    """The optax flavor's table name of ``factory`` (``optax.adam`` -> ``"adam"``), or None
    for a factory that is not optax's own."""
    for name in flavors.get("optax").constructors:
        try:
            if optax_constructor(name) is factory:
                return name
        except AttributeError:  # a constructor this optax version lacks
            continue
    return None


def optax_squared_gradient():
    """contrib.sophia's ``hessian_diagonal_fn`` computing g * g of the step's gradient (npoptim
    ``hessian_estimate="squared-gradient"``)."""
    optax = _modules()[1]

    def update(updates, state, params=None, **extra):
        return [u * u for u in updates], state
    return optax.GradientTransformationExtraArgs(lambda _: optax.EmptyState(), update)


#: Framework arguments the flavor table names (the golden files store names), as optax
#: objects: keyword -> name -> a function building it.
OPTAX_NAMED = {"hessian_diagonal_fn": {"squared-gradient": optax_squared_gradient}}
#: Arguments kept static in inject_hyperparams beyond callable defaults (sophia branches on
#: them in Python, as tests/test_sophia.py keeps them).
OPTAX_STATIC = {"contrib.sophia": ("hessian_diagonal_fn", "clip_threshold", "update_interval"),
                # galore's rank and gap are Python ints it checks and branches on
                "contrib.galore": ("rank", "update_proj_gap")}


#: Constructors whose ``tx.update`` the replay compiles with ``jax.jit`` (the injected lr a
#: traced hyperparameter, compiled once a case): optax.contrib.muon's Newton-Schulz iterations
#: are many small ops (measured: its 6 flavor cases and 4 torch twins, 12 steps each, 32 s
#: eagerly, 4.6 s jitted). The others run eagerly: jitting every constructor breaks adafactor
#: (its injected min_dim_size_to_factor, traced, is branched on in Python) and makes the torch
#: twins' replay slower (45 s against 22 s: compiling costs more than the small steps).
#: contrib.galore is slow eagerly too (a lax.cond around the SVD each step; its flavor case
#: and torch twin, 20 and 12 steps: 28 s eagerly, 6.6 s jitted, on a loaded machine).
OPTAX_JIT = ("contrib.muon", "contrib.galore")

#: optax.lbfgs's default line search (alias.py): the zoom keywords of a case complete it.
OPTAX_LBFGS_ZOOM = dict(max_linesearch_steps=20, initial_guess_strategy="one")


def numpy_value_fn(fn, like):
    """``value_fn(params, k)``: a JAX function of a list of arrays shaped as ``like`` (and a
    float ``k``, the outer step, for objectives that drift) whose value and gradient are
    ``fn(list of NumPy arrays, int(k)) -> (loss, grads)``'s, through ``jax.pure_callback``
    and a custom VJP: optax's line searches (``value_fn=``, differentiated by
    ``jax.value_and_grad``) see the very numbers npoptim's closure computes, so a comparison
    measures the optimizers' arithmetic only. Jit-able with ``value_fn`` static."""
    import jax
    dtype = like[0].dtype
    shapes = (jax.ShapeDtypeStruct((), dtype),
              *[jax.ShapeDtypeStruct(p.shape, p.dtype) for p in like])

    def evaluate(k, *xs):
        loss, grads = fn([np.asarray(x) for x in xs], int(k))
        return (np.asarray(loss, dtype), *[np.asarray(g, p.dtype) for g, p in zip(grads, like)])

    def forward(params, k):
        out = jax.pure_callback(evaluate, shapes, k, *params)
        return out[0], (list(out[1:]), k)

    @jax.custom_vjp
    def value_fn(params, k):
        return forward(params, k)[0]

    def backward(residuals, cotangent):
        grads, k = residuals
        return [cotangent * g for g in grads], k * 0.0
    value_fn.defvjp(forward, backward)
    return value_fn


def lbfgs_make_step(kwargs):
    """optax.lbfgs as its users run it on an objective (alias.py's example): ``tx.update(grads,
    state, params, value=loss, grad=grads, value_fn=f)``, then ``optax.apply_updates``. The
    case's ``linesearch`` is ``"zoom"`` (``scale_by_zoom_linesearch`` with the case's zoom
    keywords over optax.lbfgs's defaults), None, or for a torch case ``"strong_wolfe"``: optax's
    strong-Wolfe search is its zoom. ``f`` is the case objective through the replay's closure
    (:func:`numpy_value_fn`: the objective's float64 formula as the case defines it,
    not XLA's sums); the lr is constant in these cases."""
    jax, optax = _modules()
    import jax.numpy as jnp
    kwargs = dict(kwargs)
    linesearch = kwargs.pop("linesearch", "zoom")
    zoom = {k: kwargs.pop(k) for k in list(kwargs) if k in set(inspect.signature(
        optax.scale_by_zoom_linesearch).parameters)}
    lr = kwargs.get("learning_rate")

    def make(params, _hyper):
        search = None if linesearch is None else optax.scale_by_zoom_linesearch(
            **dict(OPTAX_LBFGS_ZOOM, **zoom))
        tx = optax.lbfgs(**kwargs, linesearch=search)
        state = {"params": [jnp.asarray(p) for p in params]}
        state["opt"] = tx.init(state["params"])
        closure = []

        def at(xs, _k):  # the replay's closure evaluates at ``params``: move them there
            saved = [p.copy() for p in params]
            for p, x in zip(params, xs):
                p[...] = x
            try:
                return closure[0]()
            finally:
                for p, s in zip(params, saved):
                    p[...] = s
        value_fn = numpy_value_fn(at, params)

        def step(objective, step_lr):
            if lr is not None and step_lr != lr:
                raise Refused("optax.lbfgs takes a constant lr (the case changes it)")
            closure[:] = [objective]
            value, grads = objective()
            grads = [jnp.asarray(g) for g in grads]
            extra = {} if search is None else dict(grad=grads, value_fn=value_fn,
                                                   k=jnp.asarray(0.0))
            updates, state["opt"] = tx.update(grads, state["opt"], state["params"],
                                              value=jnp.asarray(value), **extra)
            state["params"] = optax.apply_updates(state["params"], updates)
            params[:] = [np.array(x) for x in state["params"]]  # (what the closure reads)
        return step
    return make


def make_step(name, kwargs, factory=None):
    """``make_step`` (the replay protocol) of the optax constructor whose flavor table name is
    ``name`` called with ``kwargs`` (the framework's names); ``factory`` replaces
    ``optax.<name>`` (a user's own transformation with that constructor's keywords)."""
    jax, optax = _modules()
    import jax.numpy as jnp
    if name == "lbfgs" and factory is None:  # closure-driven: the zoom search needs value_fn
        return lbfgs_make_step(kwargs)
    kwargs = {k: OPTAX_NAMED[k][v]() if k in OPTAX_NAMED else v for k, v in kwargs.items()}

    # the keyword that is npoptim's lr (optax.polyak_sgd's scaling), set before each step
    # (or the lr through a conversion: adafactor's learning_rate, whose None is lr 1)
    lr_name = next(k for k, t in flavors.get("optax").constructors[name].names.items()
                   if t == "lr" or isinstance(t, tuple) and t[0] == "lr")

    def make(params, _hyper):
        dtype = params[0].dtype
        constructor = factory or optax_constructor(name)
        # a callable default (contrib.adopt's clip_value_fn) is not a schedule to inject
        static = tuple(k for k, p in inspect.signature(constructor).parameters.items()
                       if p.default is not p.empty and callable(p.default)
                       or k in OPTAX_STATIC.get(name, ()))
        injected = optax.inject_hyperparams(constructor, static_args=static)
        tx = injected(**dict(kwargs, **{lr_name: jnp.asarray(kwargs[lr_name], dtype)}))
        state = {"params": [jnp.asarray(p) for p in params]}
        state["opt"] = tx.init(state["params"])
        update = jax.jit(tx.update) if name in OPTAX_JIT else tx.update

        def step(grads, lr):
            state["opt"].hyperparams[lr_name] = jnp.asarray(lr, dtype)
            extra = {}
            if callable(grads):  # a case with an objective: the loss is update's value=
                extra["value"], grads = grads()  # (evaluated at ``params``, kept current)
            updates, state["opt"] = update([jnp.asarray(g) for g in grads], state["opt"],
                                           state["params"], **extra)
            state["params"] = optax.apply_updates(state["params"], updates)
            for p, new in zip(params, state["params"]):
                p[...] = np.asarray(new)
            return [np.asarray(p) for p in state["params"]]
        return step
    return make

