"""The small problem shared by the checkpoint and torch-state tests (a plain module imported
by the tests; pytest puts tests/ on sys.path).

Two parameters of SHAPES, a smooth objective with a per-step twist for the gradients, and per
optimizer the hyperparameters that switch on its optional state (a name not listed in CONFIGS
runs with its defaults). Every optimizer but LBFGS gets two param groups, the second at half
the first's learning rate (the same lr for ONE_LR optimizers), and a None gradient for the
second parameter every third step; LBFGS (one group only, as in torch) minimizes the objective through a closure.
"""
import numpy as np

from npoptim import registry

SHAPES = [(4, 3), (3, 5)]

CONFIGS = {
    "Adam": [dict(lr=0.01), dict(lr=0.01, amsgrad=True, weight_decay=0.1, maximize=True)],
    "AdamW": [dict(lr=0.01, amsgrad=True)],
    "SparseAdam": [dict(lr=0.01)],
    "Adagrad": [dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.1)],
    "Adadelta": [dict(lr=0.5, weight_decay=0.1)],
    "SGD": [dict(lr=0.05), dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
            dict(lr=0.05, momentum=0.5, dampening=0.1)],
    "RMSprop": [dict(lr=0.01), dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.1)],
    "Adamax": [dict(lr=0.01, weight_decay=0.1)],
    "NAdam": [dict(lr=0.01, decoupled_weight_decay=True, weight_decay=0.1)],
    "RAdam": [dict(lr=0.01, weight_decay=0.1)],
    "ASGD": [dict(lr=0.01, t0=2)],
    "Rprop": [dict(lr=0.01)],
    "Adafactor": [dict(lr=0.01)],
    "Muon": [dict(lr=0.01)],
    "LBFGS": [dict(lr=0.5, history_size=3, max_iter=4)],
    "Ftrl": [dict(lr=0.1, l1=0.01, l2=0.1, l2_shrinkage=0.05, beta=0.1,
                  learning_rate_power=-0.6)],
    "RowWiseAdagrad": [dict(lr=0.1), dict(lr=0.1, weight_decay=0.1, weight_decay_mode="l2")],
    "Lion": [dict(lr=0.01, weight_decay=0.1)],
    "AdaBelief": [dict(lr=0.01), dict(lr=0.01, amsgrad=True, weight_decay=0.1,
                                      variant="adabelief_pytorch")],
    "Adan": [dict(lr=0.01, weight_decay=0.1), dict(lr=0.01, variant="optax")],
    "Yogi": [dict(lr=0.01, initial_accumulator_value=0.1)],
    "AdamaxW": [dict(lr=0.01, weight_decay=0.1)],
    "NovoGrad": [dict(lr=0.01, weight_decay=0.1)],
    "Fromage": [dict(lr=0.01)],
    "SM3": [dict(lr=0.05)],
    "SignSGD": [dict(lr=0.01)],
    "Signum": [dict(lr=0.01, weight_decay=0.1)],
    "NoisySGD": [dict(lr=0.01, seed=3)],
    "PolyakSGD": [dict(lr=0.5)],
    "DPSGD": [dict(lr=0.05, seed=4), dict(lr=0.05, momentum=0.9, nesterov=True)],
    "Sophia": [dict(lr=0.01, update_interval=2, hessian_estimate="squared-gradient")],
    "GaLoreAdamW": [dict(lr=0.01, rank=2, update_proj_gap=2, weight_decay=0.1)],
    "OptimisticGD": [dict(lr=0.01)],
    "OptimisticAdam": [dict(lr=0.01), dict(lr=0.01, variant='optax')],
    "ADOPT": [dict(lr=0.01, weight_decay=0.1, nesterov=True)],
    "AdEMAMix": [dict(lr=0.01, alpha_warmup=5, beta3_warmup=5, weight_decay=0.1)],
    "SimplifiedAdEMAMix": [dict(lr=0.001, alpha=1.0, weight_decay=0.1)],
    "ScheduleFreeSGD": [dict(lr=0.05, weight_decay=0.01, warmup_steps=3)],
    "ScheduleFreeAdamW": [dict(lr=0.01, weight_decay=0.01, warmup_steps=3, r=0.5)],
    "Prodigy": [dict(weight_decay=0.01)],
    "DAdaptAdamW": [dict(weight_decay=0.01)],
    "MADGRAD": [dict(weight_decay=0.01), dict(momentum=0.0, decouple_decay=True, weight_decay=0.01)],
    "ACProp": [dict(lr=0.01, weight_decay=0.1)],
    "COCOB": [dict(weight_decay=0.1, alpha=10.0)],
    "DoG": [dict(weight_decay=0.1)],
    "DoWG": [dict(weight_decay=0.1)],
    "Momo": [dict(weight_decay=0.1, adapt_lower_bound=True)],
    "MomoAdam": [dict(lr=0.1, weight_decay=0.1)],
    "CAME": [dict(lr=0.01, weight_decay=0.1), dict(lr=0.01, ams_bound=True, maximize=True)],
    "Shampoo": [dict(lr=0.01, momentum=0.5, weight_decay=0.1, preconditioning_compute_steps=2),
                dict(lr=0.01, variant="scalable", graft_type="adagrad", block_size=2,
                     shape_interpretation=False, start_preconditioning_step=2,
                     preconditioning_compute_steps=2),
                dict(lr=0.01, variant="optax", graft_type="rmsprop_normalized", block_size=2,
                     start_preconditioning_step=1, preconditioning_compute_steps=2,
                     weight_decay=0.1, decoupled_weight_decay=True)],
    "APOLLO": [dict(lr=0.01, rank=2, update_proj_gap=2, weight_decay=0.1),
               dict(lr=0.01, variant="pytorch_optimizer", rank=2, update_proj_gap=2,
                    scale_type="channel", weight_decay=0.1)],
    "Scion": [dict(lr=0.01, momentum=0.3, weight_decay=0.1),
              dict(lr=0.01, constraint=True, momentum_form="sum", ns_dtype="param")],
    "AdamMini": [dict(lr=0.01, weight_decay=0.1),
                 dict(lr=0.01, weight_decay=0.1, dim=3, n_heads=3,
                      param_names=("embed.weight", "layers.0.q_proj.weight"))],
    "SOAP": [dict(lr=0.01, weight_decay=0.1, precondition_frequency=2),
             dict(lr=0.01, variant="authors", normalize_gradient=True, max_precond_dim=4),
             dict(lr=0.01, variant="heavyball", weight_decay=0.1, precondition_frequency=3)],
    "Kron": [{}, dict(lr=0.01, variant="heavyball", clip_update=False, weight_decay=0.1)],
    "SPlus": [dict(lr=0.1, inverse_steps=2), dict(lr=0.1, maximize=True, ema_rate=0.9,
                                                 decoupled_weight_decay=False)],
}


def cases(names):
    """(name, config index, kwargs) for every config of the given optimizer names."""
    return [(name, i, kwargs) for name in names
            for i, kwargs in enumerate(CONFIGS.get(name, [{}]))]


def initial_values(dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in SHAPES]


def weights(dtype):
    rng = np.random.default_rng(123)
    return [rng.uniform(0.5, 2.0, s).astype(dtype) for s in SHAPES]


def gradients(params, step):
    """A deterministic gradient of the params and the step index (of a smooth objective)."""
    w = weights(params[0].dtype)
    return [(wi * p - 0.3 * np.sin(p) + 0.1 * np.sin(step + k)).astype(p.dtype)
            for k, (wi, p) in enumerate(zip(w, params))]


def step_gradients(params, step):
    """:func:`gradients`, with None for the second parameter every third step."""
    grads = gradients(params, step)
    if step % 3 == 2:
        grads[1] = None
    return grads


def objective(params):
    """(loss, gradients) of the objective LBFGS minimizes."""
    w = weights(params[0].dtype)
    loss = float(sum(np.sum(0.5 * wi * p * p + 0.3 * np.cos(p)) for wi, p in zip(w, params)))
    return loss, [(wi * p - 0.3 * np.sin(p)).astype(p.dtype) for wi, p in zip(w, params)]


#: Optimizers whose param groups share one lr (the largest lr, or 0, per group).
ONE_LR = ("Prodigy", "DAdaptAdamW", "Momo", "MomoAdam")


def make(cls, name, kwargs, params):
    """An optimizer of class ``cls`` (npoptim's or torch's) over ``params``, grouped as above."""
    if name == "LBFGS":
        return cls(list(params), **kwargs)
    opt = cls([{"params": params[:1]}, {"params": params[1:]}], **kwargs)
    if name not in ONE_LR:
        opt.param_groups[1]["lr"] = opt.param_groups[1]["lr"] * 0.5
    return opt


def per_example(grads):
    """Per-example gradients (DPSGD) made of batch gradients: a batch of three examples, the
    gradient scaled by 1, -0.5 and 3 (so a clipping norm of 1 clips some of them)."""
    return [None if g is None else np.stack([g, -0.5 * g, 3 * g]) for g in grads]


def step(opt, params, name, k):
    """Step ``k`` of an npoptim optimizer over ``params``."""
    if registry.get(name).needs_closure:
        opt.step(closure=lambda: objective(params))
    elif registry.get(name).per_example_grads:
        opt.step(per_example(step_gradients(params, k)))
    else:
        opt.step(step_gradients(params, k))
