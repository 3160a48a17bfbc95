"""``npoptim explain OPTIMIZER [--param ...] [--grad ...] [--steps N] [hyper ...] [--json]``:
every intermediate of an optimizer's steps, as its kernels compute them.

Hyperparameters are ``name=value``, anywhere on the line, values read as Python literals:
``npoptim explain Adam lr=0.1 eps=0`` explains Adam's first step on f = θ² from θ₀ = 2 (so
g = 4), the hand-worked example (m = 0.3999999999999999 in float64, v̂ = 16, θ₁ = 1.9). See
:mod:`npoptim.explainer`.
"""
import ast
import json
import sys

import numpy as np

from npoptim import registry


def literal(text):
    """A Python literal (number, list, tuple, None, True), else the text itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _array_arg(text):
    value = literal(text)
    if isinstance(value, str):
        value = [literal(v) for v in text.split(",")]
    return np.array(value, dtype=np.float64)


def add_arguments(parser):
    parser.add_argument("optimizer", metavar="OPTIMIZER", help="e.g. Adam, SGD, Muon, LBFGS")
    parser.add_argument("hyper", nargs="*", metavar="NAME=VALUE",
                        help="hyperparameters, e.g. lr=0.1 eps=0 betas='(0.9, 0.99)'")
    parser.add_argument("--param", action="append", metavar="VALUES",
                        help="a parameter's initial value: 2, '1,-2,3' or '[[1,2],[3,4]]' "
                             "(repeat for several parameters; default 2)")
    parser.add_argument("--grad", action="append", metavar="VALUES",
                        help="a constant gradient per parameter (default: f = Σθ², g = 2θ)")
    parser.add_argument("--steps", type=int, default=1, help="steps to explain (default 1)")
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    parser.add_argument("--scheduler", metavar="NAME",
                        help="an npoptim.lr_scheduler class, stepped after each step")
    parser.add_argument("--scheduler-arg", action="append", default=[], metavar="NAME=VALUE",
                        help="the scheduler's keyword arguments (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the explanation as JSON")
    # NAME=VALUE may come after the options too (``Adam --steps 3 lr=0.1``)
    parser.parse_args = parser.parse_intermixed_args


def _pairs(items, what):
    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"{what} must be NAME=VALUE, got {item!r}")
        name, value = item.split("=", 1)
        out[name.strip().replace("-", "_")] = literal(value)
    return out


def run(args):
    from npoptim.explainer import explain
    from npoptim.explainer.render import explanation_to_dict
    try:
        hyper = _pairs(args.hyper, "a hyperparameter")
        params = [_array_arg(p) for p in args.param] if args.param else 2.0
        grad = [_array_arg(g) for g in args.grad] if args.grad else None
        if isinstance(params, list) and len(params) == 1:
            params = params[0]
        if grad is not None and len(grad) == 1:
            grad = grad[0]
        e = explain(registry.resolve(args.optimizer), params=params, grad=grad, steps=args.steps,
                    dtype=np.dtype(args.dtype), scheduler=args.scheduler,
                    scheduler_args=_pairs(args.scheduler_arg, "a scheduler argument"),
                    **hyper)
    except (KeyError, ValueError, TypeError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"error: {message}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(explanation_to_dict(e), indent=1, ensure_ascii=False))
    else:
        print(e)
    return 0
