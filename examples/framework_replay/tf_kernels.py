"""Replay npoptim's golden cases through TensorFlow's raw training kernels (the ``tf`` flavor).

CI replays it through tensorflow-cpu 2.21.0 (Python 3.11), installed by .ci/run in a venv of
its own beside the main environment (tests/test_tf_kernels.py: every case a kernel computes
passes ``npoptim verify``, and the torch case each Keras case overrides fails through the same
kernel; one TensorFlow process writes both results files, ``--twins-out``). On 2026-12-01:
137 cases pass (26 of them CSR), 136 are skipped, and the 34 torch twins fail; about 7 s of
CPU, 4 of them importing TensorFlow. Usage::

    pip install tensorflow-cpu==2.21.0
    python examples/framework_replay/tf_kernels.py -o tf-results.json
    npoptim verify reference_results tf-results.json --flavor keras --flavor torch \\
        --optimizer Adam --optimizer SGD --optimizer Adagrad --optimizer RMSprop \\
        --optimizer Adadelta --optimizer Adamax --optimizer Ftrl --optimizer SparseAdam

Each case runs through the kernel ``tensorflow/core/kernels/training_ops.cc`` implements for
it, called as ``tf.raw_ops.ResourceApply*`` / ``ResourceSparseApply*`` on float32/float64
variables, every hyperparameter a scalar tensor of the variable's dtype (the
``tf.compat.v1.train`` optimizers hold Python floats as float32 tensors, so their float64
results are off by about 1e-8: lr=0.1 through ``FtrlOptimizer`` on a float64 variable moves
it 1.5e-8 relative off the kernel's float64 result):

========  ================================  ===============================================
optimizer kernel                            cases it computes (npoptim hyperparameters)
========  ================================  ===============================================
Adam      ApplyAdam                         eps-hat (``eps_mode="eps_hat"``: Keras's cases),
                                            no weight decay, no amsgrad; torch's cases with
                                            epsilon eps sqrt(1 - beta2^t) at step t (the
                                            caller's per-step epsilon: torch's eps placement)
Adamax    ApplyAdaMax                       ``eps_mode="added"`` (Keras's cases), no decay
RMSprop   Apply(Centered)RMSProp            ``eps_in_sqrt`` and lr inside the momentum buffer
                                            (Keras's cases), no decay
SGD       ApplyMomentum, ApplyGradient-     torch's momentum without dampening (torch cases)
          Descent
SGD       ApplyKerasMomentum                ``lr_in_buffer`` (Keras's cases), no decay
Adagrad   ApplyAdagradV2,                   torch's Adagrad without lr_decay (torch cases),
          SparseApplyAdagradV2              dense and CSR
Adadelta  ApplyAdadelta                     torch's Adadelta (torch and Keras cases)
Ftrl      ApplyFtrl, ApplyFtrlV2,           npoptim's Ftrl (Keras's): V1 without
          SparseApplyFtrl(V2)               l2_shrinkage, V2 with it, as
                                            ``tf.compat.v1.train.FtrlOptimizer`` calls them;
                                            Keras's ``beta`` folded into l2 as it does
                                            (l2 + beta / (2 lr), at each step's lr); dense
                                            and CSR
========  ================================  ===============================================

**CSR gradients** go to the sparse kernels as ``tf.compat.v1.train.Optimizer`` hands them an
``IndexedSlices``: duplicate indices summed first (``tf.unique`` and
``tf.math.unsorted_segment_sum``, its ``_deduplicate_indexed_slices``). Where every row a
step touches is stored whole, the slices are those rows of the variable (an embedding
table's gradient); where a case stores only some entries of a row, TF's kernels would update
the row's other entries too (with gradient 0: FTRL then recomputes their weight from z and n,
npoptim leaves them), so the replay views the variable as a vector and each stored entry is
one slice, which updates exactly the stored entries, as npoptim's CSR path does (whole rows
instead fail ``Ftrl/csr-duplicates/float64`` and both ``Ftrl/csr-explicit-zeros``; Adagrad
passes either way, as a zero gradient does not move it). No kernel computes torch's other CSR
cases: ``training_ops.cc`` has no sparse plain-SGD kernel (TF's sparse SGD is a scatter-add)
and its ``SparseApplyMomentum`` is lazy per row (torch's sparse momentum buffer moves every
row it has, as a dense one); it has no sparse Adam kernel at all (TF's LazyAdam is scatter ops
in Python, and torch's SparseAdam counts its step per parameter, TF's optimizers globally).

**Missing gradients.** The kernels have no step count: the caller passes beta1^t (and
beta2^t). The replay keeps t as the case says: per variable for torch's cases (a variable
whose gradient is None is left out and its t does not move: torch's per-parameter step), one
t for all variables for Keras's ``step_scope="global"`` cases (as
``tf.compat.v1.train.AdamOptimizer``'s shared beta powers; one t fails torch's
``Adam/null-and-zero-grads`` in both dtypes, a t per variable passes it). The kernels without
beta powers (Momentum, Adagrad, Adadelta, RMSProp, FTRL) just leave the variable out.

Every other case is written as ``{"id": ..., "skipped": reason}``, which ``npoptim verify``
reports apart from failures. Only parameters are compared (the kernels' slot names are not
torch's state names).
"""
import sys
from typing import NamedTuple

import numpy as np

import replay_cli  # this directory's shared command line; it puts npoptim on sys.path
from npoptim.golden import codec

OFF = (None, False, 0, 0.0)
#: Why no kernel computes an optimizer's CSR cases (see the module docstring).
NO_SPARSE_KERNEL = {
    "SGD": "training_ops.cc has no sparse plain-SGD kernel (TF's sparse SGD is a scatter-add), "
           "and its SparseApplyMomentum is lazy per row (torch's sparse momentum buffer moves "
           "every row it has)",
    "SparseAdam": "training_ops.cc has no sparse Adam kernel (TF's LazyAdam is scatter ops in "
                  "Python; torch's SparseAdam counts its step per parameter, TF's optimizers "
                  "globally)",
}


class Way(NamedTuple):
    """How a case runs: the kernel (``ResourceApply<kernel>``, ``ResourceSparseApply<kernel>``
    for CSR gradients), the step count's scope and how CSR gradients become slices."""

    kernel: str
    step_scope: str = "per_param"   # or "global" (one t for all variables)
    slices: str = "dense"           # "rows" (whole rows), "entries" (a vector's elements)


def kernel_for(case):
    """``(way, reason)``: the :class:`Way` that computes ``case``, or None and why not."""
    h = case.hyperparameters
    if h.get("maximize") not in OFF or h.get("weight_decay") not in OFF:
        return None, "the raw kernels have no maximize and no weight decay"
    name, csr = case.optimizer, "csr" in case.tags
    if csr and name not in ("Adagrad", "Ftrl"):
        return None, NO_SPARSE_KERNEL[name]
    kernel = _dense_kernel(case)
    if kernel is None:
        return None, f"no TensorFlow kernel computes {name} with these conventions"
    return Way(kernel, h.get("step_scope", "per_param"),
               _slices(case) if csr else "dense"), None


def _dense_kernel(case):
    h, name = case.hyperparameters, case.optimizer
    if name == "Adam" and not h.get("amsgrad"):
        return "Adam" if h.get("eps_mode") == "eps_hat" else "AdamTorchEps"
    if name == "Adamax" and h.get("eps_mode") == "added":
        return "AdaMax"
    if (name == "RMSprop" and h.get("eps_in_sqrt")
            and (h.get("lr_in_momentum") or h.get("momentum") in OFF)):
        return "CenteredRMSProp" if h.get("centered") else "RMSProp"
    if name == "SGD" and h.get("dampening") in OFF:
        if h.get("momentum") in OFF:
            return "GradientDescent"
        if case.flavor == "torch":
            return "Momentum"
        return "KerasMomentum" if h.get("lr_in_buffer") else None
    if name == "Adagrad" and case.flavor == "torch" and h.get("lr_decay") in OFF:
        return "AdagradV2"
    if name == "Adadelta":
        return "Adadelta"
    if name == "Ftrl":
        return "FtrlV2" if h.get("l2_shrinkage") not in OFF else "Ftrl"
    return None


def _slices(case):
    """``"rows"`` if every row a step's CSR gradient touches is stored whole, else
    ``"entries"`` (see the module docstring)."""
    for step in case.steps:
        for g in step.grads:
            if not isinstance(g, codec.CsrGrad):
                continue
            for row in range(g.shape[0]):
                stored = g.indices[g.indptr[row]:g.indptr[row + 1]]
                if len(stored) and len(set(stored.tolist())) != g.shape[1]:
                    return "entries"
    return "rows"


def full_hyperparameters(case):
    """The case's hyperparameters over the npoptim constructor's defaults (a case stores only
    what it sets, e.g. no ``nesterov`` when it is False)."""
    import inspect

    from npoptim import registry
    defaults = {name: p.default for name, p in
                inspect.signature(registry.get(case.optimizer).__init__).parameters.items()
                if p.default is not inspect.Parameter.empty}
    return dict(defaults, **codec.from_json_hyper(case.hyperparameters))


def _slices_of(grad, form):
    """``(indices, values)`` of a CSR gradient as an ``IndexedSlices`` of the variable held as
    ``form`` says, duplicates summed as ``tf.compat.v1.train.Optimizer`` sums them."""
    import tensorflow as tf

    rows = np.repeat(np.arange(grad.shape[0]), np.diff(grad.indptr))
    if form == "entries":
        indices, values = rows * grad.shape[1] + grad.indices, grad.data
    else:  # one slice per stored entry: its row, with the value in its column
        indices = rows
        values = np.zeros((len(rows), grad.shape[1]), grad.data.dtype)
        values[np.arange(len(rows)), grad.indices] = grad.data
    unique, position = tf.unique(tf.constant(indices, tf.int64))
    summed = tf.math.unsorted_segment_sum(tf.constant(values), position, tf.shape(unique)[0])
    return unique, summed


def make_step(way, case):
    import tensorflow as tf

    h = full_hyperparameters(case)
    kernel = way.kernel
    sparse = way.slices != "dense"

    def factory(params, _hyper):
        dtype = params[0].dtype
        c = lambda x: tf.constant(x, dtype=dtype)  # noqa: E731  scalars of the variable's dtype
        shapes = [p.shape for p in params]
        held = [p.reshape(-1) if way.slices == "entries"
                else p.reshape(p.shape[0], -1) if sparse else p for p in params]
        initial = (h.get("initial_accumulator_value", 0.0)
                   if kernel in ("AdagradV2", "Ftrl", "FtrlV2") else 0.0)
        variables = [tf.Variable(p.copy()) for p in held]
        slots = [[tf.Variable(np.full(p.shape, initial if k == 0 else 0.0, dtype))
                  for k in range(3)] for p in held]
        t = [0] * len(params)

        def step(grads, lr):
            for i, (var, (s0, s1, s2), g) in enumerate(zip(variables, slots, grads)):
                if way.step_scope == "global" or g is not None:
                    t[i] += 1
                if g is None:  # left out (torch skips it; TF's apply_gradients drops it)
                    continue
                if sparse:
                    indices, g = _slices_of(g, way.slices)
                    apply(kernel, var, s0, s1, s2, tf.cast(g, dtype), lr, t[i], indices)
                else:
                    apply(kernel, var, s0, s1, s2, c(g), lr, t[i])
            return [v.numpy().reshape(shape) for v, shape in zip(variables, shapes)]

        def apply(kernel, var, s0, s1, s2, g, lr, t, indices=None):
            if kernel in ("Adam", "AdamTorchEps"):
                b1, b2 = h["betas"]
                # torch's eps is eps sqrt(1 - b2^t) in ApplyAdam's eps-hat form
                eps = h["eps"] * (1.0 if kernel == "Adam" else (1 - b2 ** t) ** 0.5)
                tf.raw_ops.ResourceApplyAdam(
                    var=var.handle, m=s0.handle, v=s1.handle, beta1_power=c(b1 ** t),
                    beta2_power=c(b2 ** t), lr=c(lr), beta1=c(b1), beta2=c(b2),
                    epsilon=c(eps), grad=g)
            elif kernel == "AdaMax":
                b1, b2 = h["betas"]
                tf.raw_ops.ResourceApplyAdaMax(
                    var=var.handle, m=s0.handle, v=s1.handle, beta1_power=c(b1 ** t),
                    lr=c(lr), beta1=c(b1), beta2=c(b2), epsilon=c(h["eps"]), grad=g)
            elif kernel == "RMSProp":
                tf.raw_ops.ResourceApplyRMSProp(
                    var=var.handle, ms=s0.handle, mom=s1.handle, lr=c(lr), rho=c(h["alpha"]),
                    momentum=c(h["momentum"]), epsilon=c(h["eps"]), grad=g)
            elif kernel == "CenteredRMSProp":
                tf.raw_ops.ResourceApplyCenteredRMSProp(
                    var=var.handle, mg=s2.handle, ms=s0.handle, mom=s1.handle, lr=c(lr),
                    rho=c(h["alpha"]), momentum=c(h["momentum"]), epsilon=c(h["eps"]), grad=g)
            elif kernel == "Momentum":
                tf.raw_ops.ResourceApplyMomentum(
                    var=var.handle, accum=s0.handle, lr=c(lr), grad=g,
                    momentum=c(h["momentum"]), use_nesterov=bool(h["nesterov"]))
            elif kernel == "KerasMomentum":
                tf.raw_ops.ResourceApplyKerasMomentum(
                    var=var.handle, accum=s0.handle, lr=c(lr), grad=g,
                    momentum=c(h["momentum"]), use_nesterov=bool(h["nesterov"]))
            elif kernel == "GradientDescent":
                tf.raw_ops.ResourceApplyGradientDescent(var=var.handle, alpha=c(lr), delta=g)
            elif kernel == "AdagradV2" and indices is not None:
                tf.raw_ops.ResourceSparseApplyAdagradV2(
                    var=var.handle, accum=s0.handle, lr=c(lr), epsilon=c(h["eps"]), grad=g,
                    indices=indices)
            elif kernel == "AdagradV2":
                tf.raw_ops.ResourceApplyAdagradV2(var=var.handle, accum=s0.handle, lr=c(lr),
                                                  epsilon=c(h["eps"]), grad=g)
            elif kernel == "Adadelta":
                tf.raw_ops.ResourceApplyAdadelta(
                    var=var.handle, accum=s0.handle, accum_update=s1.handle, lr=c(lr),
                    rho=c(h["rho"]), epsilon=c(h["eps"]), grad=g)
            elif kernel in ("Ftrl", "FtrlV2"):
                # tf.compat.v1.train.FtrlOptimizer's adjusted l2: Keras's beta folded in
                ftrl = dict(var=var.handle, accum=s0.handle, linear=s1.handle, grad=g,
                            lr=c(lr), l1=c(h["l1"]), l2=c(h["l2"] + h["beta"] / (2.0 * lr)),
                            lr_power=c(h["learning_rate_power"]))
                if kernel == "FtrlV2":
                    ftrl["l2_shrinkage"] = c(h["l2_shrinkage"])
                if indices is not None:
                    getattr(tf.raw_ops, f"ResourceSparseApply{kernel}")(indices=indices, **ftrl)
                else:
                    getattr(tf.raw_ops, f"ResourceApply{kernel}")(**ftrl)
            else:
                raise ValueError(f"no kernel {kernel!r}")
        return step
    return factory


def tf_label():
    import tensorflow as tf
    return f"tensorflow {tf.__version__} raw training kernels"


def main(argv=None):
    return replay_cli.main(argv, __doc__.splitlines()[0], "keras",
                           ("Adam", "Adamax", "RMSprop", "SGD", "Adagrad", "Adadelta", "Ftrl",
                            "SparseAdam"),
                           kernel_for, make_step, tf_label, grad_format="raw")


if __name__ == "__main__":
    sys.exit(main())
