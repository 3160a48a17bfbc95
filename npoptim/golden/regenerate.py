"""Regenerate ``reference_results/`` from npoptim: ``python -m npoptim.golden.regenerate``.

Writes, bit for bit reproducibly:

* ``cases/<Optimizer>.json``: one golden file per optimizer of :data:`cases.TABLE`;
* ``cases/<flavor>/<Optimizer>.json``: the flavor cases of :mod:`npoptim.golden.flavor_cases`
  (other frameworks' conventions, only where they change the math);
* ``cases/precision/<Optimizer>.json``: the bfloat16/float16 cases of
  :mod:`npoptim.golden.precision_cases` (schema version 3);
* ``golden.schema.json``: the JSON Schema (:data:`npoptim.golden.schema.JSON_SCHEMA`);
* ``provenance.json``: how far torch 2.13 is from each case, per implementation path
  (``foreach=False``, ``foreach=True``, ``fused=True``), each case run as ``npoptim check
  --torch`` runs it (:mod:`npoptim.golden.torch_replay`); a failing path is marked with its
  known bug (:mod:`npoptim.frameworks.known_bugs`). Measured only when torch is importable
  (imported in the functions that run it); without torch the previous measurements are
  kept, and cases never measured say so;
* the generated sections of ``README.md`` (between ``<!-- BEGIN GENERATED: name -->`` and
  ``<!-- END GENERATED: name -->``): the case table with flags, tolerances and the provenance.

``--check`` compares instead of writing and exits 1 when a file would change (what
``tests/test_golden.py`` runs, without torch).

Every file is the same bits on every machine (the regeneration is checked with NumPy's SIMD
dispatch lowered to the baseline, ``tests/test_same_bits.py``) except the cases flagged
``lapack-svd`` (:data:`npoptim.golden.flags.FLAGS`), whose values go through LAPACK as the
framework they follow: a fresh case of that flag that meets the committed one to its
tolerance counts as the same (:func:`matches_committed`), so the committed file is kept.
"""
import argparse
import difflib
import json
import re
import sys
from pathlib import Path

from npoptim import flavors
from npoptim.frameworks.known_bugs import known_bug
from npoptim.golden import cases, codec, flavor_cases, precision_cases
from npoptim.golden.generate import HEADER, build_case, build_file
from npoptim.golden.replay import Refused, replay, results_file
from npoptim.golden.schema import JSON_SCHEMA, parse

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "reference_results"
SCHEMA_FILE = "golden.schema.json"
PROVENANCE_FILE = "provenance.json"
PROVENANCE_SCHEMA = "npoptim-golden-provenance"
TORCH_PATHS = ("foreach=False", "foreach=True", "fused=True")


#: What ``--check`` (and tests/test_golden.py) say when a committed file differs.
MACHINE_ADVICE = (
    "If you changed an optimizer's numerics on purpose, run: python -m npoptim.golden.regenerate. "
    "If not, the golden files depend on this machine, which is a bug (they must be the same on "
    "every CPU; see tests/test_same_bits.py): do not regenerate, report it with the output of "
    "python -c 'import numpy; numpy.show_runtime()' and python tests/cpu_probe.py.")


# -------------------------------------------------------------------------------- cases
def covered_optimizers(optimizers=None):
    """Optimizers with rows in the table (in table order)."""
    return [n for n in cases.TABLE if optimizers is None or n in optimizers]


def build_optimizer_file(name):
    """The golden file (JSON-ready dict) of one optimizer."""
    built = [build_case(row, dtype) for row in cases.TABLE[name] for dtype in row.dtypes]
    return build_file(built, optimizer=name)


def build_flavor_file(flavor, name):
    """The golden file of one flavor's cases of one optimizer, or None if it has none."""
    built = flavor_cases.build_flavor_cases(flavor, name)
    if not built:
        return None
    header = [f"Golden trajectories of npoptim in the {flavor} flavor: "
              f"{flavors.get(flavor).framework}'s conventions (npoptim.flavors), only the "
              "cases where they change the math; every other case of cases/"
              f"{name}.json applies to {flavor} unchanged."] + HEADER[1:]
    doc = build_file(built, optimizer=name, header=header)
    doc["flavor"] = flavor
    return doc


def case_files(optimizers=None, on_error=None):
    """``{relative path: text}`` of the case files. ``on_error(name, exc)`` decides what an
    optimizer whose cases cannot be built does (default: raise)."""
    out = {}
    for name in covered_optimizers(optimizers):
        try:
            out[f"cases/{name}.json"] = codec.dumps(build_optimizer_file(name))
            for flavor in flavor_cases.GENERATED:
                if name in flavor_cases.optimizers(flavor):
                    doc = build_flavor_file(flavor, name)
                    if doc is not None:
                        out[f"cases/{flavor}/{name}.json"] = codec.dumps(doc)
            for doc_name, doc in precision_cases.build_files([name]).items():
                out[f"cases/precision/{doc_name}.json"] = codec.dumps(doc)
        except Exception as exc:
            if on_error is None:
                raise
            on_error(name, exc)
    return out


def schema_text():
    return json.dumps(JSON_SCHEMA, indent=1, sort_keys=True) + "\n"


# ---------------------------------------------------------------------------- torch runs
def torch_results(case, path):
    """Run ``case`` through ``torch.optim`` on one implementation path
    (:func:`npoptim.golden.torch_replay.make_step`, what ``npoptim check --torch`` runs).

    Returns ``(result entry, None)`` or ``(None, reason)`` when torch has no such path for the
    case (e.g. fused with sparse gradients)."""
    import inspect
    import torch
    from npoptim.golden.torch_replay import make_step

    cls = getattr(torch.optim, case.torch_name)
    kwargs = codec.from_json_hyper(case.hyperparameters)
    key, value = path.split("=")
    if key in inspect.signature(cls.__init__).parameters:
        kwargs[key] = value == "True"
    elif path != "foreach=False":  # without the option, torch has the single-tensor path only
        return None, f"torch.optim.{case.torch_name} has no {key} option"
    sparse = any(isinstance(g, codec.CsrGrad) for s in case.steps for g in s.grads)
    if path == "fused=True" and sparse:
        return None, "fused does not take sparse gradients"
    if path == "foreach=True" and sparse:
        return None, "foreach falls back to foreach=False for sparse gradients"
    try:
        return replay(case, make_step(cls, kwargs, who="torch"), "raw"), None
    except Refused as exc:
        return None, str(exc)


def measure_torch(files):
    """``{case id: {path: {...}}}`` for every case with a torch counterpart."""
    import torch
    from npoptim.golden.compare import compare_case

    out = {}
    for text in files.values():
        for case in parse(json.loads(text), "<generated>", "cases").cases:
            if not case.torch_name or case.flavor != "torch" or case.precision is not None:
                continue  # 16-bit cases: tests/test_precision_golden.py replays them in torch
            entry = {}
            for path in TORCH_PATHS:
                result, reason = torch_results(case, path)
                if result is None:
                    entry[path] = {"status": "n/a", "reason": reason}
                    continue
                parsed = parse(results_file([result], f"torch {torch.__version__}"),
                               f"<torch {path}>", "results").cases[0]
                report = compare_case(case, parsed, f"<torch {path}>")
                agg = [s for s in report.steps]
                known = known_bug("torch", case.id, path)
                entry[path] = {
                    "known_divergence": known["what"] if not report.passed and known else None,
                    "status": "pass" if report.passed else "fail",
                    "max_abs": max(s.max_abs for s in agg),
                    "max_scaled": max(s.max_scaled for s in agg),
                    "max_ulp": max(s.max_ulp for s in agg),
                    "divergence": str(report.divergence) if report.divergence else None,
                }
            out[case.id] = entry
    return {"schema": PROVENANCE_SCHEMA, "torch_version": torch.__version__, "cases": out}


# ------------------------------------------------------------------------------- README
def _fmt_path(result):
    if result is None:
        return "not measured"
    if result["status"] == "n/a":
        return "n/a"
    if result["max_abs"] == 0:
        text = "exact"
    else:
        text = f"{result['max_scaled']:.1e} ({int(result['max_ulp'])} ulp)"
    if result["status"] == "pass":
        return text
    return f"**FAIL** {text}" + (" (known)" if result.get("known_divergence") else "")


def readme_sections(files, provenance):
    """``{section name: markdown}`` generated from the case files and provenance."""
    parsed = {path: json.loads(text) for path, text in sorted(files.items())}
    measured = (provenance or {}).get("cases", {})
    version = (provenance or {}).get("torch_version", "not measured")
    summary = ["| optimizer | file | cases | torch counterpart | sparse kind |",
               "|---|---|---:|---|---|"]
    total = 0
    for path, doc in parsed.items():
        first = doc["cases"][0]
        total += doc["number_of_cases"]
        summary.append(f"| {doc['optimizer']} | `{path}` | {doc['number_of_cases']} | "
                       f"{('torch.optim.' + first['torch_name']) if first['torch_name'] else '—'}"
                       f" | {first['sparse_kind']} |")
    size = sum(len(t.encode()) for t in files.values())
    summary.append("")
    summary.append(f"{total} cases in {len(parsed)} files, {size / 1e6:.1f} MB.")

    torch_rows = ["| case | flags | rtol | " + " | ".join(f"torch `{p}`" for p in TORCH_PATHS)
                  + " |", "|---|---|---:|" + "---|" * len(TORCH_PATHS)]
    other_rows = ["| case | flags | rtol | variant | matches |", "|---|---|---:|---|---|"]
    for doc in parsed.values():
        for case in doc["cases"]:
            flags = ", ".join(case["flags"]) or "—"
            rtol = f"{case['tolerance']['rtol']:.0e}"
            if case.get("flavor", "torch") != "torch" or case.get("precision"):
                continue  # the flavors and precision sections
            if case["torch_name"]:
                m = measured.get(case["id"], {})
                torch_rows.append(f"| `{case['id']}` | {flags} | {rtol} | "
                                  + " | ".join(_fmt_path(m.get(p)) for p in TORCH_PATHS)
                                  + " |")
            else:
                other_rows.append(f"| `{case['id']}` | {flags} | {rtol} | "
                                  f"{case.get('variant') or '—'} | "
                                  f"{'; '.join(case.get('matches') or []) or '—'} |")
    fails = [(cid, p, r) for cid, m in sorted(measured.items()) for p, r in m.items()
             if r["status"] == "fail"]
    torch_text = [f"Measured with torch {version} (CPU). Each cell: the largest scale-relative "
                  "error over all steps, parameters and state, and the largest ULP distance; "
                  "\"exact\" = bit-identical; n/a = torch has no such path for the case. "
                  f"Measurements failing the case's tolerance: {len(fails)}.", ""] + torch_rows
    known = sorted({(cid.split("/")[0], p, r.get("known_divergence") or "not explained")
                    for cid, p, r in fails})
    if known:
        torch_text += ["", "Known divergences of torch (each failing measurement above):", ""]
        torch_text += [f"* {opt}, torch `{p}`: {why}" for opt, p, why in known]
    flavor_rows = ["| flavor | optimizer | file | cases (rows; each in float32 and float64 "
                   "unless noted) |", "|---|---|---|---|"]
    for path, doc in parsed.items():
        if doc.get("flavor"):
            dtypes = {}
            for c in doc["cases"]:
                dtypes.setdefault(c["id"].split("/")[2], set()).add(c["dtype"])
            names = [name if len(dtypes[name]) > 1 else f"{name} ({min(dtypes[name])} only)"
                     for name in sorted(dtypes)]
            flavor_rows.append(f"| {doc['flavor']} | {doc['optimizer']} | `{path}` | "
                               f"{doc['number_of_cases']} ({', '.join(names)}) |")
    precision_rows = ["| case | mode (`precision`) | flags | tolerance | matches |",
                      "|---|---|---|---|---|"]
    for doc in parsed.values():
        for case in doc["cases"]:
            if case.get("precision"):
                p = case["precision"]
                mode = ", ".join([f"rounding {p['rounding']}"]
                                 + ([f"seed {p['seed']}"] if p["seed"] is not None else [])
                                 + ([f"master {p['master_weights']}"] if p["master_weights"]
                                    else []) + (["kahan"] if p["kahan"] else [])
                                 + ([f"quantization {p['quantization']}"]
                                    if p.get("quantization") else []))
                ulp = case["tolerance"].get("ulp")
                precision_rows.append(
                    f"| `{case['id']}` | {mode} | {', '.join(case['flags'])} | "
                    + (f"{ulp} ulp (16-bit), " if ulp is not None else "")
                    + f"{case['tolerance']['rtol']:.0e} (float) | "
                    f"{'; '.join(case['matches'])} |")
    return {"summary": "\n".join(summary), "torch": "\n".join(torch_text),
            "flavors": "\n".join(flavor_rows), "precision": "\n".join(precision_rows),
            "variants": "\n".join(other_rows if len(other_rows) > 2 else
                                  ["(no cases of optimizers without a torch counterpart)"])}


def render_readme(text, sections):
    for name, body in sections.items():
        pattern = re.compile(rf"(<!-- BEGIN GENERATED: {name} -->\n).*?(<!-- END GENERATED: "
                             rf"{name} -->)", re.S)
        if not pattern.search(text):
            raise ValueError(f"README.md has no <!-- BEGIN GENERATED: {name} --> section")
        text = pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)
    return text


# --------------------------------------------------------------------------------- main
def assemble(out, files, provenance):
    """``{relative path: text}`` of every generated file: the case files, the JSON Schema,
    the README with its generated sections, and provenance.json (cases present only)."""
    generated = dict(files)
    generated[SCHEMA_FILE] = schema_text()
    readme = out / "README.md"
    if readme.exists():
        generated["README.md"] = render_readme(readme.read_text(encoding="utf-8"),
                                               readme_sections(files, provenance))
    if provenance is not None:
        live = {case["id"] for t in files.values() for case in json.loads(t)["cases"]}
        provenance = dict(provenance, cases={k: v for k, v in sorted(provenance["cases"].items())
                                             if k in live})
        generated[PROVENANCE_FILE] = json.dumps(provenance, indent=1, sort_keys=True) + "\n"
    return generated


#: The flag of cases compared to their tolerance, not bit for bit, with the committed file.
PLATFORM_FLAG = "lapack-svd"


def _without_expected(case):
    return dict(case, steps=[{k: v for k, v in step.items() if k != "expected"}
                             for step in case["steps"]])


def matches_committed(committed, fresh):
    """Is ``fresh`` (a case file's text) the ``committed`` one: equal, or different only in
    the expected values of :data:`PLATFORM_FLAG` cases, which meet the committed ones to
    their tolerance?"""
    if committed == fresh:
        return True
    from npoptim.golden.compare import compare_case
    old, new = json.loads(committed), json.loads(fresh)
    if ({k: v for k, v in old.items() if k != "cases"} != {k: v for k, v in new.items()
                                                            if k != "cases"}
            or len(old["cases"]) != len(new["cases"])):
        return False
    old_cases = parse(old, "<committed>", "cases").cases
    for index, (a, b) in enumerate(zip(old["cases"], new["cases"])):
        if a == b:
            continue
        if PLATFORM_FLAG not in a["flags"] or _without_expected(a) != _without_expected(b):
            return False
        entry = {"id": b["id"], "steps": [{"params": s["expected"]["params"],
                                           "state": s["expected"]["state"]}
                                          for s in b["steps"]]}
        result = parse(results_file([entry], "fresh"), "<fresh>", "results").cases[0]
        if not compare_case(old_cases[index], result, "<fresh>").passed:
            return False
    return True


def keep_matching(files, committed):
    """``files`` with each text that :func:`matches_committed` its committed one replaced by
    the committed text (so a machine whose LAPACK rounds otherwise rewrites nothing)."""
    return {name: committed[name] if name in committed and matches_committed(committed[name],
                                                                             text) else text
            for name, text in files.items()}


def committed_case_files(out):
    """``{relative path: text}`` of the case files on disk."""
    return {p.relative_to(out).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted((out / "cases").rglob("*.json"))}


def load_provenance(out):
    path = out / PROVENANCE_FILE
    if path.exists():
        return json.loads(path.read_text(encoding="utf-8"))
    return None


def stale_files(out, generated):
    return [p for p in sorted((out / "cases").rglob("*.json"))
            if p.relative_to(out).as_posix() not in generated]


def out_of_date(out, generated):
    """Generated files that differ from (or are missing on) disk, and stale case files."""
    changed = [name for name, text in sorted(generated.items())
               if name != PROVENANCE_FILE and (not (out / name).exists() or
                                               (out / name).read_text(encoding="utf-8") != text)]
    return changed + [f"{p.relative_to(out).as_posix()} (no longer generated)"
                      for p in stale_files(out, generated)]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m npoptim.golden.regenerate",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="the reference_results directory (default: the repository's)")
    parser.add_argument("--check", action="store_true",
                        help="compare with the files on disk instead of writing; exit 1 if "
                             "any would change (provenance.json is not compared)")
    parser.add_argument("--optimizer", action="append", metavar="NAME",
                        help="regenerate only this optimizer's file (repeatable)")
    parser.add_argument("--no-torch", action="store_true",
                        help="do not measure torch (keep provenance.json as it is)")
    parser.add_argument("--skip-broken", action="store_true",
                        help="report and skip optimizers whose cases fail to build")
    args = parser.parse_args(argv)
    out = args.out
    broken = []
    unknown = [n for n in args.optimizer or () if n not in cases.TABLE]
    if unknown:
        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, list(cases.TABLE), n=1, cutoff=0.6)
            folded = [n for n in cases.TABLE if n.lower() == name.lower()]
            match = folded or close
            hints.append(f"{name!r}" + (f" (did you mean {match[0]!r}?)" if match else ""))
        parser.error(f"no golden cases for {', '.join(hints)}; the optimizers with cases are "
                     f"{', '.join(cases.TABLE)}")

    def on_error(name, exc):
        broken.append(name)
        print(f"error: cannot build the cases of {name}: {type(exc).__name__}: {exc}",
              file=sys.stderr)

    files = case_files(args.optimizer, on_error if args.skip_broken else None)
    selected = set(files)
    committed = committed_case_files(out) if (out / "cases").exists() else {}
    files = keep_matching(files, committed)
    if args.optimizer is not None:  # keep the other optimizers' files as they are
        for name, text in committed.items():
            files.setdefault(name, text)
    provenance = load_provenance(out)
    if not args.no_torch and not args.check:
        try:
            import torch  # noqa: F401  (only for the provenance measurements)
        except ImportError:
            print("torch is not installed: provenance.json kept as it is", file=sys.stderr)
        else:
            measured = measure_torch({k: v for k, v in files.items()
                                      if args.optimizer is None
                                      or Path(k).stem in args.optimizer})  # flavor files skip
            if provenance and args.optimizer is not None:
                provenance["cases"].update(measured["cases"])
                provenance["torch_version"] = measured["torch_version"]
            else:
                provenance = measured
    generated = assemble(out, files, provenance)
    if args.check:
        changed = out_of_date(out, generated)
        for name in changed:
            print(f"out of date: {out / name}")
        if changed:
            print(MACHINE_ADVICE, file=sys.stderr)
        else:
            which = "every optimizer" if args.optimizer is None else ", ".join(args.optimizer)
            print(f"up to date: {len(selected)} case file{'s' * (len(selected) != 1)} of "
                  f"{which}, as the code generates them"
                  + (f" (not checked, their cases failed to build: {', '.join(broken)})"
                     if broken else ""))
        return 1 if changed or broken else 0
    (out / "cases").mkdir(parents=True, exist_ok=True)
    for name, text in sorted(generated.items()):
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    for p in stale_files(out, generated):
        p.unlink()
        print(f"removed {p}")
    total = sum(json.loads(t)["number_of_cases"] for t in files.values())
    print(f"{total} cases in {len(files)} files: "
          f"{', '.join(k[len('cases/'):-len('.json')] for k in files)}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
