"""Replay npoptim's golden cases through TensorFlow's raw training kernels (the ``tf`` flavor).

CI replays it through tensorflow-cpu 2.21.0 (Python 3.11), installed by .ci/run in a venv of
its own beside the main environment (tests/test_tf_kernels.py: every case a kernel computes
passes ``npoptim verify``, and the torch case each Keras case overrides fails through the same
kernel). On 2026-12-01: 59 cases pass, 156 are skipped; about 20 s. Usage::

    pip install tensorflow-cpu==2.21.0
    python examples/framework_replay/tf_kernels.py -o tf-results.json
    npoptim verify reference_results tf-results.json --flavor keras --flavor torch \\
        --optimizer Adam --optimizer SGD --optimizer Adagrad --optimizer RMSprop \\
        --optimizer Adadelta --optimizer Adamax

Each case runs through the kernel ``tensorflow/core/kernels/training_ops.cc`` implements for
it, called as ``tf.raw_ops.ResourceApply*`` on float32/float64 variables:

============  =========================  ================================================
optimizer     kernel                     cases it computes (npoptim hyperparameters)
============  =========================  ================================================
Adam          ResourceApplyAdam          eps-hat (``eps_mode="eps_hat"``: Keras's cases),
                                         no weight decay, no amsgrad
Adamax        ResourceApplyAdaMax        ``eps_mode="added"`` (Keras's cases), no decay
RMSprop       ResourceApply(Centered)    ``eps_in_sqrt`` and lr inside the momentum buffer
              RMSProp                    (Keras's cases), no decay
SGD           ResourceApplyMomentum      torch's momentum without dampening (torch cases)
Adagrad       ResourceApplyAdagradV2     torch's Adagrad without lr_decay (torch cases)
Adadelta      ResourceApplyAdadelta      torch's Adadelta (torch cases)
============  =========================  ================================================

Every other case is written as ``{"id": ..., "skipped": reason}``, which ``npoptim verify``
reports apart from failures. Only parameters are compared (the kernels' slot names are not
torch's state names).
"""
import sys

import numpy as np

import replay_cli  # this directory's shared command line; it puts npoptim on sys.path
from npoptim.golden import generate

OFF = (None, False, 0, 0.0)


def kernel_for(case):
    """``(kernel name, reason)``: the kernel that computes ``case``, or None and why not."""
    h = case.hyperparameters
    if "csr" in case.tags or "none-grad" in case.tags:
        return None, "the raw kernels take dense gradients for every variable"
    if h.get("maximize") not in OFF or h.get("weight_decay") not in OFF:
        return None, "the raw kernels have no maximize and no weight decay"
    name = case.optimizer
    if name == "Adam" and h.get("eps_mode") == "eps_hat" and not h.get("amsgrad"):
        return "Adam", None
    if name == "Adamax" and h.get("eps_mode") == "added":
        return "AdaMax", None
    if (name == "RMSprop" and h.get("eps_in_sqrt")
            and (h.get("lr_in_momentum") or h.get("momentum") in OFF)):
        return "CenteredRMSProp" if h.get("centered") else "RMSProp", None
    if name == "SGD" and case.flavor == "torch" and h.get("dampening") in OFF:
        return "Momentum" if h.get("momentum") not in OFF else "GradientDescent", None
    if name == "Adagrad" and case.flavor == "torch" and h.get("lr_decay") in OFF:
        return "AdagradV2", None
    if name == "Adadelta" and case.flavor == "torch":
        return "Adadelta", None
    return None, f"no TensorFlow kernel computes {name} with these conventions"


def full_hyperparameters(case):
    """The case's hyperparameters over the npoptim constructor's defaults (a case stores only
    what it sets, e.g. no ``nesterov`` when it is False)."""
    import inspect

    from npoptim import registry
    defaults = {name: p.default for name, p in
                inspect.signature(registry.get(case.optimizer).__init__).parameters.items()
                if p.default is not inspect.Parameter.empty}
    return dict(defaults, **generate.from_json_hyper(case.hyperparameters))


def make_step(kernel, case):
    import tensorflow as tf

    h = full_hyperparameters(case)

    def factory(params, _hyper):
        dtype = params[0].dtype
        c = lambda x: tf.constant(x, dtype=dtype)  # noqa: E731  scalars of the variable's dtype
        variables = [tf.Variable(p.copy()) for p in params]
        slots = [[tf.Variable(np.full(p.shape, h.get("initial_accumulator_value", 0.0)
                                      if kernel == "AdagradV2" and k == 0 else 0.0, dtype))
                  for k in range(3)] for p in params]
        t = [0]

        def step(grads, lr):
            t[0] += 1
            for var, (s0, s1, s2), g in zip(variables, slots, grads):
                g = c(g)
                if kernel == "Adam":
                    b1, b2 = h["betas"]
                    tf.raw_ops.ResourceApplyAdam(
                        var=var.handle, m=s0.handle, v=s1.handle, beta1_power=c(b1 ** t[0]),
                        beta2_power=c(b2 ** t[0]), lr=c(lr), beta1=c(b1), beta2=c(b2),
                        epsilon=c(h["eps"]), grad=g)
                elif kernel == "AdaMax":
                    b1, b2 = h["betas"]
                    tf.raw_ops.ResourceApplyAdaMax(
                        var=var.handle, m=s0.handle, v=s1.handle, beta1_power=c(b1 ** t[0]),
                        lr=c(lr), beta1=c(b1), beta2=c(b2), epsilon=c(h["eps"]), grad=g)
                elif kernel == "RMSProp":
                    tf.raw_ops.ResourceApplyRMSProp(
                        var=var.handle, ms=s0.handle, mom=s1.handle, lr=c(lr),
                        rho=c(h["alpha"]), momentum=c(h["momentum"]), epsilon=c(h["eps"]),
                        grad=g)
                elif kernel == "CenteredRMSProp":
                    tf.raw_ops.ResourceApplyCenteredRMSProp(
                        var=var.handle, mg=s2.handle, ms=s0.handle, mom=s1.handle, lr=c(lr),
                        rho=c(h["alpha"]), momentum=c(h["momentum"]), epsilon=c(h["eps"]),
                        grad=g)
                elif kernel == "Momentum":
                    tf.raw_ops.ResourceApplyMomentum(
                        var=var.handle, accum=s0.handle, lr=c(lr), grad=g,
                        momentum=c(h["momentum"]), use_nesterov=bool(h["nesterov"]))
                elif kernel == "GradientDescent":
                    tf.raw_ops.ResourceApplyGradientDescent(var=var.handle, alpha=c(lr),
                                                            delta=g)
                elif kernel == "AdagradV2":
                    tf.raw_ops.ResourceApplyAdagradV2(var=var.handle, accum=s0.handle,
                                                      lr=c(lr), epsilon=c(h["eps"]), grad=g)
                elif kernel == "Adadelta":
                    tf.raw_ops.ResourceApplyAdadelta(
                        var=var.handle, accum=s0.handle, accum_update=s1.handle, lr=c(lr),
                        rho=c(h["rho"]), epsilon=c(h["eps"]), grad=g)
            return [v.numpy() for v in variables]
        return step
    return factory


def tf_label():
    import tensorflow as tf
    return f"tensorflow {tf.__version__} raw training kernels"


def main(argv=None):
    return replay_cli.main(argv, __doc__.splitlines()[0], "keras",
                           ("Adam", "Adamax", "RMSprop", "SGD", "Adagrad", "Adadelta"),
                           kernel_for, make_step, tf_label)


if __name__ == "__main__":
    sys.exit(main())
