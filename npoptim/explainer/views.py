"""Tables read out of a recorded step (:mod:`npoptim.explainer.trace`).

* :func:`element_tables`: for each kernel that applies a per-element rule, one row per element
  with every scalar the rule and the rules it calls assign, in execution order (a name
  assigned a second, different value gets a prime: ``g′`` is ``g`` after weight decay), then
  the new parameter value.
* :func:`listing`: what the optimizer's own Python code assigns around the kernels (norms,
  trust ratios, Adafactor's factors, Muon's Newton–Schulz iterates, LBFGS's direction, step
  length and line-search trials), in order, with the function that assigned it.
* :data:`DERIVED`: textbook quantities a rule does not form (Adam's m̂ and v̂), computed from
  the recorded ones and marked as derived.
"""
import numpy as np

from npoptim.explainer.trace import same

#: Drivers that call a rule once per element.
ELEMENT_DRIVERS = ("apply_dense", "_update_rows", "apply_from_states", "_sum_blocks")
#: Modules whose calls a table does not open (arithmetic helpers: their result is assigned).
HELPER_MODULES = ("npoptim.kernels.scalar",)
#: Names that are plumbing, not math.
SKIPPED_NAMES = {"h", "s", "values", "self", "group", "state", "hyper", "kernel_", "states"}


def short_name(call):
    return call.name.rsplit(".", 1)[-1]


def is_scalar(value):
    return isinstance(value, (float, int, np.floating, np.integer, np.bool_, bool))


def element_index(call):
    """The flat index of the element a rule call updated (from its driver's loop variables)."""
    where = call.caller_locals
    if short_name(call.parent) == "_sum_blocks":
        return int(where["row"] + where["k"])
    if short_name(call.parent) == "_update_rows" and where["stop"] - where["start"] == \
            where["ncols"]:
        return int(where["base"] + where["c"])
    return int(where["i"])


def _scalar_sets(call, out, latest):
    """Append ``(name, value)`` for each new scalar value ``call`` and its callees assign."""
    for event in call.events:
        if event[0] == "call":
            if event[1].module not in HELPER_MODULES:
                _scalar_sets(event[1], out, latest)
            continue
        _, name, value = event
        if name in SKIPPED_NAMES or not is_scalar(value):
            continue
        if name in latest and same(latest[name][1], value):
            continue
        column = name if name not in latest else latest[name][0] + "′"
        latest[name] = (column, value)
        out.append((column, value))


def element_row(call):
    """``{column: value}`` of one rule call: its inputs, every scalar assigned, the result."""
    row = {}
    latest = {}
    for name, value in call.args.items():
        if name not in SKIPPED_NAMES and is_scalar(value):
            row[name] = value
            latest[name] = (name, value)
    items = []
    _scalar_sets(call, items, latest)
    row.update(items)
    result = call.result
    new_p = result[0] if isinstance(result, tuple) else result
    if is_scalar(new_p) and short_name(call.parent) != "_sum_blocks":
        row["p_new"] = new_p
    return row


def record_fields(record):
    """A hyperparameter record as ``{field: value}``."""
    if record is None or not hasattr(record, "_fields"):
        return {}
    return {name: getattr(record, name) for name in record._fields}


def element_tables(update):
    """The per-element tables of one ``_update`` call: a list of dicts with ``kernel``,
    ``rule``, ``hyper`` (the record's fields) and ``rows`` (``index`` and the columns)."""
    tables = []
    for kernel_call in update.calls:
        rule_calls = [c for c in kernel_call.walk()
                      if c.parent is not None and short_name(c.parent) in ELEMENT_DRIVERS
                      and not c.module.startswith("npoptim.kernels")]
        if not rule_calls:
            continue
        rows = [dict(index=element_index(c), **element_row(c)) for c in rule_calls]
        columns = []
        for row in rows:
            columns += [k for k in row if k not in columns]
        tables.append(dict(kernel=short_name(kernel_call), rule=short_name(rule_calls[0]),
                           hyper=record_fields(rule_calls[0].args.get("h")),
                           columns=columns, rows=rows))
    return tables


def listing(update):
    """``(function, name, value)`` for what the optimizer's Python code assigns during one
    ``_update`` (or LBFGS ``_step``) call and the functions it calls (not deeper: their
    helpers' arithmetic is in their results), outside the per-element kernels; a name
    assigned again (a loop) is numbered: ``x[2]`` is the second value of ``x``."""
    out = []
    counts = {}

    def visit(call, depth=0):
        for event in call.events:
            if event[0] == "call":
                child = event[1]
                if depth >= 1:
                    continue
                if (child.module in HELPER_MODULES or child.module.startswith("npoptim.kernels")
                        or (child.calls and any(short_name(c) in ELEMENT_DRIVERS
                                                for c in child.calls))):
                    continue
                visit(child, depth + 1)
                continue
            _, name, value = event
            if name in SKIPPED_NAMES or value is None or hasattr(value, "_fields"):
                continue
            if isinstance(value, str) or (isinstance(value, tuple) and not value):
                continue
            key = (short_name(call), name)
            counts[key] = counts.get(key, 0) + 1
            label = name if counts[key] == 1 else f"{name}[{counts[key]}]"
            out.append((short_name(call), label, value))

    visit(update)
    return out


def trust_ratios(update):
    """LAMB/LARS: ``{"w_norm", "x_norm", "trust_ratio"}`` of the layer, from the recorded
    ``trust_ratio`` call (None where the layer does not adapt)."""
    calls = update.find("trust_ratio")
    if not calls:
        return None
    call = calls[0]
    w_sq, x_sq = call.args["w_sq"], call.args["x_sq"]
    return dict(w_norm=float(np.sqrt(w_sq)), x_norm=float(np.sqrt(x_sq)),
                trust_ratio=float(call.result))


def _adam_derived(rows, hyper, group, step):
    beta1, beta2 = group["betas"]
    b1, b2 = 1 - beta1 ** step, 1 - beta2 ** step
    derived = []
    for row in rows:
        extra = {}
        if "m" in row:
            extra["m̂"] = float(row["m"]) / b1
        if "v" in row:
            extra["v̂"] = float(row["v"]) / b2
        derived.append(extra)
    return derived


def _relative_update(rows):
    return [{"update/p": (float(r["p_new"]) - float(r["p"])) / float(r["p"])}
            if "p_new" in r and "p" in r and float(r["p"]) != 0 else {} for r in rows]


#: optimizer name -> fn(rows, hyper, group, step) -> one dict of derived columns per row
DERIVED = {"Adam": _adam_derived, "AdamW": _adam_derived, "NAdam": _adam_derived,
           "RAdam": _adam_derived, "LAMB": _adam_derived}


def derived_columns(optimizer_name, table, group, step):
    """Textbook quantities for ``table``'s rows (derived, not computed by the kernel)."""
    rows = table["rows"]
    extras = [dict() for _ in rows]
    rule = DERIVED.get(optimizer_name)
    if rule is not None and step is not None and table["rule"] not in (
            "lamb_update_rule",):
        for extra, more in zip(extras, rule(rows, table["hyper"], group, step)):
            extra.update(more)
    for extra, more in zip(extras, _relative_update(rows)):
        extra.update(more)
    return extras
