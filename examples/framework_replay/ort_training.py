"""Replay npoptim's AdamW golden cases through onnxruntime-training (the ``onnx`` flavor's AdamW).

onnxruntime-training's AdamW is the ``com.microsoft`` ``AdamWOptimizer`` kernel
(``orttraining/orttraining/training_ops/cpu/optimizer/adamw/adamw.cc``), float32 only. Its
``adam_mode=1`` ("Hugging Face") is what ``onnxruntime.training.artifacts.generate_artifacts``
builds for ``OptimType.AdamW`` / ``onnxblock.optim.AdamW``: npoptim's
``AdamW(flavor="onnx")`` (eps-hat, the decoupled decay after the update, ``bias_correction``);
``adam_mode=0`` is torch's AdamW (npoptim's torch flavor). Usage::

    python -m venv /tmp/ortvenv && /tmp/ortvenv/bin/pip install onnxruntime-training==1.19.2
    /tmp/ortvenv/bin/python examples/framework_replay/ort_training.py -o ort-results.json
    npoptim verify reference_results ort-results.json --flavor onnx --flavor torch \\
        --optimizer AdamW

Each case runs as an onnxruntime-training user trains: a model whose loss is
``sum_i sum(w_i * g_i)`` (so the gradient of ``w_i`` is the case's ``g_i``, fed as an input),
``generate_artifacts(..., optimizer=onnxblock.optim.AdamW(bias_correction, betas, eps,
weight_decay))``, then the training API's ``Module``/``Optimizer``:
``set_learning_rate(lr)`` and ``step()`` at each step. The artifacts are saved with
``ir_version=9`` (the onnx package writes a newer IR than onnxruntime 1.19 loads).

=================================  ===========  =============================================
cases                              adam_mode    how
=================================  ===========  =============================================
``AdamW/onnx/*`` (float32)         1            the optimizer graph as generate_artifacts
                                                builds it
``AdamW/*`` torch (float32, no     0            the same graph with the node's ``adam_mode``
amsgrad, no maximize)                           attribute set to 0 (ORT's torch form)
=================================  ===========  =============================================

Every other AdamW case (float64, amsgrad, maximize, missing gradients) is written as
``{"id": ..., "skipped": reason}``, which ``npoptim verify`` reports apart from failures. Only
parameters are compared. ``--torch-twins`` runs instead the torch case each onnx case overrides
through the onnx case's graph (adam_mode 1): these must fail (the conventions matter).
"""
import contextlib
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

import replay_cli  # this directory's shared command line; it puts npoptim on sys.path
from npoptim.golden import codec

OFF = (None, False, 0, 0.0)
#: The IR version onnxruntime 1.19 loads (it refuses the onnx package's newer default).
IR_VERSION = 9


def mode_for(case):
    """``(adam_mode, reason)``: the AdamWOptimizer mode that computes ``case``, or None and
    why not."""
    h = case.hyperparameters
    if "csr" in case.tags or "none-grad" in case.tags:
        return None, "the training API computes a dense gradient for every parameter"
    if case.dtype != "float32":
        return None, "onnxruntime's AdamWOptimizer CPU kernel is float32 only"
    if h.get("maximize") not in OFF or h.get("amsgrad") not in OFF:
        return None, "onnxruntime's AdamW has no maximize and no amsgrad"
    if case.flavor == "onnx" and h.get("eps_mode") == "eps_hat" and (
            h.get("decay_after_update") or h.get("weight_decay") in OFF):
        return 1, None
    if (case.flavor == "torch" and h.get("eps_mode", "torch") == "torch"
            and h.get("bias_correction", True)):
        return 0, None
    return None, "no adam_mode of onnxruntime's AdamW computes these conventions"


def linear_model(params):
    """An ONNX model with initializers ``w0, w1, ...`` (the parameters), inputs ``g0, g1, ...``
    and loss ``sum_i ReduceSum(w_i * g_i)``: the gradient of ``w_i`` is ``g_i``."""
    from onnx import TensorProto, helper, numpy_helper
    nodes, inputs, sums = [], [], []
    for i, p in enumerate(params):
        inputs.append(helper.make_tensor_value_info(f"g{i}", TensorProto.FLOAT, list(p.shape)))
        nodes.append(helper.make_node("Mul", [f"w{i}", f"g{i}"], [f"wg{i}"]))
        nodes.append(helper.make_node("ReduceSum", [f"wg{i}"], [f"s{i}"], keepdims=0))
        sums.append(f"s{i}")
    total = sums[0]
    for k, s in enumerate(sums[1:]):  # Add: onnxruntime has no gradient of Sum
        nodes.append(helper.make_node("Add", [total, s], [f"total{k}"]))
        total = f"total{k}"
    nodes.append(helper.make_node("Identity", [total], ["loss"]))
    graph = helper.make_graph(
        nodes, "linear", inputs, [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        initializer=[numpy_helper.from_array(p, f"w{i}") for i, p in enumerate(params)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                             ir_version=IR_VERSION)


@contextlib.contextmanager
def native_stderr_silenced():
    """The gradient-graph builder logs each graph transformer to the C stderr whatever the
    logger severity; its errors still arrive as Python exceptions."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def make_step(adam_mode, case):
    import onnx
    from onnxruntime.training import artifacts, onnxblock
    from onnxruntime.training.api import CheckpointState, Module, Optimizer

    h = codec.from_json_hyper(case.hyperparameters)

    def factory(params, _hyper):
        params = [np.asarray(p, np.float32) for p in params]
        with tempfile.TemporaryDirectory() as where:  # the sessions keep what they loaded
            return training_step(params, Path(where))

    def training_step(params, where):
        with native_stderr_silenced():
            artifacts.generate_artifacts(
                linear_model(params), requires_grad=[f"w{i}" for i in range(len(params))],
                loss=None, artifact_directory=where,
                optimizer=onnxblock.optim.AdamW(
                    bias_correction=bool(h.get("bias_correction", True)),
                    betas=tuple(h["betas"]), eps=h["eps"], weight_decay=h["weight_decay"]))
        for name in ("training_model.onnx", "eval_model.onnx", "optimizer_model.onnx"):
            model = onnx.load(where / name)
            model.ir_version = IR_VERSION
            for node in model.graph.node:
                if node.op_type == "AdamWOptimizer":
                    mode = next(a for a in node.attribute if a.name == "adam_mode")
                    assert mode.i == 1, "generate_artifacts builds adam_mode=1"
                    mode.i = adam_mode
            onnx.save(model, where / name)
        state = CheckpointState.load_checkpoint(str(where / "checkpoint"))
        module = Module(str(where / "training_model.onnx"), state,
                        str(where / "eval_model.onnx"))
        optimizer = Optimizer(str(where / "optimizer_model.onnx"), module)
        module.train()

        def step(grads, lr):
            optimizer.set_learning_rate(float(lr))
            module.lazy_reset_grad()
            module(*[np.asarray(g, np.float32) for g in grads])
            optimizer.step()
            return [np.array(state.parameters[f"w{i}"].data) for i in range(len(params))]
        return step
    return factory


def ort_label():
    import onnxruntime
    return f"onnxruntime-training {onnxruntime.__version__} training API (AdamWOptimizer)"


def main(argv=None):
    import onnxruntime
    onnxruntime.set_default_logger_severity(3)
    return replay_cli.main(argv, __doc__.splitlines()[0], "onnx", ("AdamW",), mode_for,
                           make_step, ort_label)


if __name__ == "__main__":
    sys.exit(main())
