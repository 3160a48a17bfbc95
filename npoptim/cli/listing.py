"""``npoptim list``: the optimizers, their hyperparameters and defaults, sparse kind, variants,
the wrappers around them (:data:`npoptim.registry.WRAPPERS`), and the flavors (other
frameworks' conventions, :mod:`npoptim.flavors`) with what they change."""
import json

import numpy as np

from npoptim import registry
from npoptim.optim.options import OPTIMIZER_CONVENTIONS


def add_arguments(parser):
    parser.add_argument("optimizer", nargs="*", help="only these optimizers (default: all)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def describe(name):
    """``{name, torch, module, sparse_kind, sources, hyperparameters, variants,
    variant_switches, switches, conventions, flavors}``: ``sources`` the paper and the
    implementation it follows (:data:`npoptim.registry.REFERENCES`); ``variants`` each
    published form's other names, ``variant_switches`` what it sets (a variant is named for
    its source; the module docstring says where each differs)."""
    from npoptim.golden.generate import hyperparameters, signature_defaults
    cls = registry.get(name)
    module_name, torch_name = registry.OPTIMIZERS[name]
    try:  # resolved defaults (e.g. a variant's values), from an optimizer on a dummy parameter
        hyper = hyperparameters(cls([np.zeros((2, 2))]))
    except Exception:
        hyper = _signature_values(cls)
    variants, aliases = registry.variants(name)
    from npoptim import flavors
    flavor_info = {f.name: f.differs.get(name, "torch's math") for f in flavors.FLAVORS.values()
                   if name in f.switches and f.name != "torch"}
    paper, implementation = registry.REFERENCES.get(name, (None, None))
    return {
        "name": name,
        "torch": f"torch.optim.{torch_name}" if torch_name else None,
        "module": module_name,
        "sparse_kind": cls.sparse_kind,
        "sources": {"paper": paper, "implementation": implementation},
        "hyperparameters": hyper,
        "variants": {v: sorted(a for a, target in aliases.items() if target == v)
                     for v in variants},
        "variant_switches": {v: _json_values(switches) for v, switches in variants.items()},
        "switches": [k for k, v in hyper.items() if isinstance(v, bool)],
        "conventions": dict(getattr(cls, "torch_conventions", {}),
                            **{k: v for k, v in OPTIMIZER_CONVENTIONS.items()
                               if k in signature_defaults(cls)}),
        "flavors": flavor_info,
    }


def describe_wrapper(name):
    """``{name, wrapper: True, counterpart, module, sparse_kind, hyperparameters}`` of a
    wrapper (its settings' defaults; it wraps an npoptim optimizer)."""
    cls = registry.get_wrapper(name)
    module_name, counterpart = registry.WRAPPERS[name]
    return {"name": name, "wrapper": True, "counterpart": counterpart, "module": module_name,
            "sparse_kind": cls.sparse_kind, "hyperparameters": _signature_values(cls)}


def _json_values(values):
    """``values`` (a dict) as JSON values (one that has none: its ``repr``)."""
    from npoptim.golden.codec import to_json_value
    out = {}
    for k, v in values.items():
        try:
            out[k] = to_json_value(v)
        except TypeError:
            out[k] = repr(v)
    return out


def _signature_values(cls):
    """The constructor's defaults as JSON values (one that has none: its ``repr``)."""
    from npoptim.golden.generate import signature_defaults
    return _json_values(signature_defaults(cls))


def describe_flavors():
    """``[{name, framework, step_scope, optimizers: {npoptim name: what differs},
    constructors, verified}]`` of every flavor."""
    from npoptim import flavors
    return [{"name": f.name, "framework": f.framework, "step_scope": f.step_scope,
             "optimizers": {opt: f.differs.get(opt, "torch's math") for opt in f.switches},
             "constructors": {k: e.npoptim for k, e in f.constructors.items()},
             "verified": f.verified} for f in flavors.FLAVORS.values()]


def _value(v):
    if isinstance(v, list):
        return "(" + ", ".join(_value(x) for x in v) + ")"
    return repr(v)


def run(args):
    try:
        args.optimizer = [registry.resolve(n) for n in args.optimizer]  # any case
    except KeyError as exc:
        print(f"error: {exc.args[0]}")
        return 2
    names = [n for n in registry.OPTIMIZERS if not args.optimizer or n in args.optimizer]
    wrappers = [n for n in registry.WRAPPERS if not args.optimizer or n in args.optimizer]
    infos = [describe(n) for n in names]
    wrapper_infos = [describe_wrapper(n) for n in wrappers]
    if args.json:
        print(json.dumps(infos + wrapper_infos, indent=1))
        return 0
    for info in infos:
        print(f"{info['name']}  ({info['torch'] or 'no torch counterpart'}; sparse: "
              f"{info['sparse_kind']})")
        sources = [f"{k} {v}" for k, v in info["sources"].items() if v]
        if sources:
            print(f"  sources: {'; '.join(sources)}")
        hyper = "  ".join(f"{k}={_value(v)}" for k, v in info["hyperparameters"].items())
        print(f"  hyperparameters: {hyper}")
        if info["variants"]:
            default = info["hyperparameters"].get("variant")
            print("  variants (each named for its source; the module docstring says where "
                  "they differ):")
            for v, a in info["variants"].items():
                also = f" (= {', '.join(a)})" if a else ""
                sets = ", ".join(f"{k}={_value(x)}"
                                 for k, x in info["variant_switches"][v].items())
                print(f"    {v}{also}{' [default]' if v == default else ''}: "
                      f"{sets or 'the defaults'}")
        if info["switches"]:
            print(f"  switches: {', '.join(info['switches'])}")
        if info["conventions"]:
            print("  conventions (torch's value): "
                  + ", ".join(f"{k}={v!r}" for k, v in info["conventions"].items()))
        if info["flavors"]:
            print(f"  flavors: {', '.join(info['flavors'])}")
    if wrapper_infos:
        print("\nwrappers (built around an npoptim optimizer: Wrapper(optimizer, ...)):")
    for info in wrapper_infos:
        print(f"{info['name']}  (wrapper; {info['counterpart']}; sparse: "
              f"{info['sparse_kind']})")
        hyper = "  ".join(f"{k}={_value(v)}" for k, v in info["hyperparameters"].items())
        print(f"  hyperparameters: {hyper}")
    print("\nflavors (flavor=NAME on the optimizer, or npoptim.flavors.from_framework(NAME, "
          "framework optimizer, params, **framework keywords)):")
    for flavor in describe_flavors():
        print(f"  {flavor['name']}: {flavor['framework']}; {flavor['verified']}")
        print(f"    step count: {flavor['step_scope'] or 'no missing gradients'}")
        for opt, what in flavor["optimizers"].items():
            if flavor["name"] != "torch":
                print(f"    {opt}: {what}")
    print("\nsparse kinds: exact = a CSR gradient updates its stored entries only and equals "
          "the dense update; lazy = only stored entries are updated (untouched ones keep "
          "stale state); dense-only = CSR gradients are refused; wrapped = the wrapped "
          "optimizer's")
    return 0
