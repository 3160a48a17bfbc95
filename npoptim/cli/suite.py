"""``npoptim suite [--export DIR]``: where the golden suite is, its version and its counts.

The suite is ``reference_results/`` of a checkout, or the copy a wheel carries (extracted into
a cache directory on first use; :mod:`npoptim.golden.suite`). ``--export DIR`` writes its
files to DIR as plain JSON, the layout of ``reference_results/``.
"""
import json
import sys
from collections import Counter


def add_arguments(parser):
    parser.add_argument("--export", metavar="DIR",
                        help="write the suite's files (plain JSON) into DIR")
    parser.add_argument("--json", action="store_true", help="print the description as JSON")


def describe(path):
    """Where the suite is, its schema version and npoptim version, and its case counts."""
    import npoptim
    from npoptim.golden import suite
    from npoptim.golden.schema import SCHEMA_VERSION, load_all
    unavailable = []
    cases = load_all(path, kind="cases", unavailable=unavailable)
    families = Counter("16-bit and quantized" if getattr(c, "precision", None) is not None
                       else ("torch" if c.flavor == "torch" else f"flavor {c.flavor}")
                       for c in cases)
    return {"path": str(path), "from": suite.where(), "npoptim": npoptim.__version__,
            "schema_version": SCHEMA_VERSION, "files": len(suite.suite_files(path)),
            "cases": len(cases), "optimizers": len({c.optimizer for c in cases}),
            "by_family": dict(sorted(families.items())),
            "not_read": [f"{p.relative_to(path).as_posix()}: {why}" for p, why in unavailable]}


def run(args):
    from npoptim.golden import suite
    try:
        path = suite.suite_path()
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    info = describe(path)
    if args.json:
        print(json.dumps(info, indent=1))
    else:
        print(f"golden suite: {info['path']} ({info['from']})")
        print(f"npoptim {info['npoptim']}, schema version {info['schema_version']}: "
              f"{info['cases']} cases of {info['optimizers']} optimizers in {info['files']} "
              "files")
        for family, count in info["by_family"].items():
            print(f"  {count:>4} {family}")
        if info["not_read"]:
            print(f"  {len(info['not_read'])} files not read here: {info['not_read'][0]}")
    if args.export:
        count = suite.export(args.export, path)
        print(f"wrote {count} files to {args.export}", file=sys.stderr)
    return 0
