"""``npoptim golden OPTIMIZER ...``: write a custom golden case (reference_results schema).

Example::

    npoptim golden SparseAdam --lr 1e-2 --shape 1000x16 --density 0.01 --steps 10 \\
        --dtype float32 --seed 0 -o case.json

Hyperparameters: ``--lr``, ``--betas``, ``--eps``, ``--weight-decay``, ``--momentum``, and any
other with ``--set NAME=VALUE`` (VALUE as JSON: ``--set amsgrad=true``, ``--set
betas=[0.9,0.99]``). ``--variant`` picks a named variant (``npoptim list`` shows them) or
turns on a boolean switch (``--variant amsgrad``). Gradients are CSR (embedding-style
lookups of ``density`` x rows rows per step, repeats summed) for optimizers that take them and
dense otherwise (only ``density`` of the rows non-zero when ``density < 1``); closure-driven
optimizers (LBFGS) get the ``separable-quartic`` objective instead of stored gradients, in
16-bit too. A 16-bit SparseAdam case has CSR gradients (summed in the 16-bit type).

Low precision (schema version 3, :mod:`npoptim.golden.precision_cases`): ``--dtype bfloat16``
or ``float16`` with ``--precision per-op | fused | stochastic | master-weights | kahan``
(default per-op) and ``--precision-seed`` (stochastic rounding's stream)::

    npoptim golden AdamW --dtype bfloat16 --precision fused --shape 4x8 -o case.json

16-bit cases take dense gradients; a parameter whose size is not a multiple of 32 is computed
without torch's CPU scalar remainder loop (as a GPU runs it; see npoptim.precision.adam).

Quantized state (flag ``quantized-state``): a float32 Adam or AdamW case with ``--precision
torchao-8bit | torchao-4bit | torchao-fp8`` runs torchao's ``AdamW8bit`` (``4bit``, ``Fp8``;
``Adam8bit`` ...); a parameter of at least 4096 elements (a multiple of the block size) gets
quantized moments, stored at the last step; initial params and grads are multiples of 1/64.
``--precision bnb-8bit`` runs bitsandbytes' CPU ``Adam8bit``/``AdamW8bit``
(``npoptim.precision.BnbAdamW8bit``; ``--set min_8bit_size=256`` quantizes smaller ones)::

    npoptim golden AdamW --precision torchao-8bit --shape 16x256 -o case.json
    npoptim golden AdamW --precision bnb-8bit --set min_8bit_size=256 --shape 352 -o case.json
"""
import hashlib
import json
import sys

from npoptim import registry
from npoptim.golden.codec import to_json_value
from npoptim.optim.options import VARIANT_DEFAULT


def _shape(text):
    try:
        dims = tuple(int(n) for n in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--shape {text!r}: expected dimensions like 1000x16") from None
    if not dims or any(n < 1 for n in dims):
        raise ValueError(f"--shape {text!r}: every dimension must be >= 1")
    return dims


def _pair(text):
    try:
        parts = [float(x) for x in text.replace("(", "").replace(")", "").split(",")]
    except ValueError:
        parts = []
    if len(parts) != 2:
        raise ValueError(f"expected two comma-separated numbers, got {text!r}")
    return tuple(parts)


def add_arguments(parser):
    parser.add_argument("optimizer", metavar="OPTIMIZER", help="an optimizer name (npoptim list)")
    hyper = parser.add_argument_group("hyperparameters")
    hyper.add_argument("--lr", type=float)
    hyper.add_argument("--betas", help="two numbers, e.g. 0.9,0.999")
    hyper.add_argument("--eps", type=float)
    hyper.add_argument("--weight-decay", type=float)
    hyper.add_argument("--momentum", type=float)
    hyper.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                       help="any hyperparameter; VALUE is JSON (true, 0.5, [0.9,0.99], \"x\")")
    hyper.add_argument("--variant", help="a named variant, or a boolean switch to turn on")
    data = parser.add_argument_group("data")
    data.add_argument("--shape", action="append", metavar="AxB",
                      help="a parameter's shape (repeat for several parameters; default 3x5)")
    data.add_argument("--density", type=float, default=1.0,
                      help="fraction of rows with a gradient per step (default 1)")
    data.add_argument("--grad", choices=("auto", "dense", "csr"), default="auto",
                      help="gradient format (default: csr when the optimizer takes it and "
                           "density < 1, or for lazy optimizers)")
    data.add_argument("--grad-scale", type=float, default=1.0,
                      help="gradients are uniform(-1, 1) times this")
    data.add_argument("--init", choices=("uniform", "zeros", "small"), default="uniform",
                      help="initial parameters")
    data.add_argument("--steps", type=int, default=10)
    data.add_argument("--dtype", choices=("float32", "float64", "bfloat16", "float16"),
                      default="float32")
    data.add_argument("--precision", choices=("per-op", "fused", "stochastic",
                                              "master-weights", "kahan", "torchao-8bit",
                                              "torchao-4bit", "torchao-fp8", "bnb-8bit"),
                      help="the low-precision mode of a bfloat16/float16 case (default "
                           "per-op), or the quantized state of a float32 Adam/AdamW case "
                           "(torchao-8bit, torchao-4bit, torchao-fp8, bnb-8bit)")
    data.add_argument("--precision-seed", type=int, default=None,
                      help="the seed of stochastic rounding's stream (default 2026)")
    data.add_argument("--seed", type=int, default=0)
    data.add_argument("--schedule", choices=("none", "warmup-cosine"), default="none",
                      help="per-step lr: constant, or linear warmup then cosine decay")
    parser.add_argument("--id", help="the case id (default: OPTIMIZER/custom-.../DTYPE, with a "
                        "tag of the hyperparameters set, -h + 8 hex digits)")
    parser.add_argument("-o", "--output", default="-", help="output file (default: stdout)")


def _set_value(name, text, default):
    """``--set NAME=VALUE``'s value: JSON (``true``, ``0.9``, ``[0.9, 0.99]``, ``null``); a bare
    word only for an option that takes words (its default is a word, or a variant's choice),
    ``--set eps_mode=eps_hat``; a switch whose default is a bool takes ``true`` or ``false``."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        if isinstance(default, str) or default is VARIANT_DEFAULT:
            return text
        raise ValueError(f"--set {name}={text}: VALUE is JSON (true, false, 0.9, null, "
                         "[0.9, 0.99], or a quoted word: '\"word\"')") from None
    if isinstance(default, bool) and not isinstance(value, bool):
        raise ValueError(f"--set {name}={text}: {name} is true or false")
    return tuple(value) if isinstance(value, list) else value


def _hyper_tag(hyper):
    """A short tag of the hyperparameters a custom case sets, so that two cases with other
    hyperparameters get other ids: ``h`` and 8 hex digits of a hash of their JSON."""
    text = json.dumps({k: to_json_value(v) for k, v in hyper.items()}, sort_keys=True)
    return f"-h{hashlib.sha256(text.encode()).hexdigest()[:8]}" if hyper else ""


def build(args):
    """The golden file (a dict) that ``args`` describe; ValueError/KeyError for bad input."""
    from npoptim.golden import cases
    from npoptim.golden.generate import HEADER, build_case, build_file, signature_defaults

    args.optimizer = registry.resolve(args.optimizer)  # any case: adam is Adam
    if args.optimizer not in registry.OPTIMIZERS:
        raise ValueError(f"unknown optimizer {args.optimizer!r}; npoptim has "
                         f"{', '.join(registry.OPTIMIZERS)}")
    cls = registry.get(args.optimizer)
    from npoptim.golden.schema import QUANTIZATIONS
    known = signature_defaults(cls)
    if args.precision in QUANTIZATIONS:  # the quantized class's options (min_8bit_size)
        from npoptim.golden.replay import quantized_class
        known = signature_defaults(quantized_class(args.optimizer, args.precision))
    hyper = {}
    for name, value in (("lr", args.lr), ("eps", args.eps),
                        ("weight_decay", args.weight_decay), ("momentum", args.momentum),
                        ("betas", _pair(args.betas) if args.betas else None)):
        if value is not None:
            hyper[name] = value
    for item in args.set:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise ValueError(f"--set {item!r}: expected NAME=VALUE")
        hyper[name] = _set_value(name, text, known.get(name))
    if args.variant:
        variants, aliases = registry.variants(args.optimizer)
        if "variant" in known and (args.variant in variants or args.variant in aliases):
            hyper["variant"] = args.variant
        elif isinstance(known.get(args.variant), bool):
            hyper[args.variant] = True
        else:
            choices = sorted(set(variants) | set(aliases)) + [
                k for k, v in known.items() if isinstance(v, bool)]
            raise ValueError(f"{args.optimizer} has no variant or switch {args.variant!r}; "
                             f"choose from {', '.join(choices) or '(none)'}")
    unknown = sorted(set(hyper) - set(known))
    if unknown:
        raise ValueError(f"{args.optimizer} has no hyperparameter(s) {', '.join(unknown)}; it "
                         f"has {', '.join(known)}")
    shapes = tuple(_shape(s) for s in (args.shape or ["3x5"]))
    if not 0 < args.density <= 1:
        raise ValueError(f"--density must be in (0, 1], got {args.density}")
    if args.steps < 1:
        raise ValueError(f"--steps must be >= 1, got {args.steps}")
    half = args.dtype in ("bfloat16", "float16")
    quantized = args.precision in QUANTIZATIONS
    if quantized and args.dtype != "float32":
        raise ValueError(f"--precision {args.precision} needs --dtype float32")
    if args.precision and not half and not quantized:
        raise ValueError(f"--precision {args.precision} needs --dtype bfloat16 or float16")
    if args.precision_seed is not None and (args.precision or "per-op") != "stochastic":
        raise ValueError("--precision-seed is for --precision stochastic")
    sparse_kind = cls.sparse_kind
    if half:  # a 16-bit case takes CSR gradients where its npoptim.precision class does
        import npoptim.precision as lowp
        sparse_kind = getattr(getattr(lowp, args.optimizer, None), "sparse_kind", "dense-only")
    takes_csr = sparse_kind != "dense-only" and not quantized
    grad = args.grad
    if grad == "auto":
        grad = "csr" if takes_csr and (args.density < 1 or sparse_kind == "lazy") else "dense"
    if grad == "csr" and not takes_csr:
        raise ValueError(f"{args.optimizer} does not take CSR gradients (sparse kind "
                         f"{sparse_kind}{' in ' + args.dtype if half else ''}); use "
                         "--grad dense")
    pattern = "csr-density" if grad == "csr" else ("dense" if args.density >= 1 else "dense-rows")
    shape_text = "_".join("x".join(map(str, s)) for s in shapes)
    mode = (args.precision or "per-op") if half else args.precision
    tag = _hyper_tag(hyper)
    case_id = args.id or (f"{args.optimizer}/{mode + '/' if mode else ''}custom-{shape_text}-"
                          f"{grad}-d{args.density:g}-seed{args.seed}{tag}/{args.dtype}")
    objective = "separable-quartic" if cls.needs_closure else None
    if objective:
        grad, pattern = "objective", "dense"
        case_id = args.id or (f"{args.optimizer}/{mode + '/' if mode else ''}custom-"
                              f"{shape_text}-objective-"
                              f"seed{args.seed}{tag}/{args.dtype}")
    if cls.per_example_grads:   # DPSGD: a batch of per-example gradients each step
        grad, pattern = "per-example", "per-example"
        case_id = args.id or (f"{args.optimizer}/custom-{shape_text}-per-example-"
                              f"seed{args.seed}{tag}/{args.dtype}")
    row = cases.Row(args.optimizer, "custom", "Custom case made by `npoptim golden`.",
                    hyper, shapes=shapes, grads=pattern, grad_scale=args.grad_scale,
                    density=args.density, init=args.init, dtypes=(args.dtype,),
                    steps=args.steps, objective=objective,
                    schedule=None if args.schedule == "none" else args.schedule,
                    precision_mode=mode)
    if half or quantized:
        from npoptim.golden import precision_cases
        seed = (precision_cases.STOCHASTIC_SEED if args.precision_seed is None
                else args.precision_seed)
        case = precision_cases.build_case(row, args.dtype, seed=args.seed, case_id=case_id,
                                          precision_seed=seed)
    else:
        case = build_case(row, args.dtype, seed=args.seed, case_id=case_id)
    command = "npoptim golden " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["golden"] else ""
    header = HEADER + ([f"Made by: {command}"] if command else [])
    return build_file([case], optimizer=args.optimizer, header=header)


def run(args):
    from npoptim.golden.codec import dumps
    try:
        doc = build(args)
    except (ValueError, TypeError, KeyError) as exc:
        print(f"error: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return 2
    text = dumps(doc)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
        case = doc["cases"][0]
        print(f"wrote {args.output}: case {case['id']}, {len(case['steps'])} steps, flags "
              f"{', '.join(case['flags']) or '(none)'}", file=sys.stderr)
    return 0
