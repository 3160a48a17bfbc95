"""The terminal table and the JSON form of an :class:`~npoptim.explainer.Explanation`."""
import numpy as np

DERIVED_MARK = "*"


def format_value(value):
    """``repr`` precision (shortest form that reads back to the same bits): 0.3999999999999999
    is shown as such, never rounded to 0.4."""
    if isinstance(value, np.ndarray):
        if value.size <= 64:
            text = np.array2string(value, precision=17, floatmode="unique", separator=", ",
                                   max_line_width=10_000)
            return " ".join(line.strip() for line in text.splitlines())
        return f"<array {value.shape} {value.dtype}>"
    if isinstance(value, (np.floating, float)):
        return repr(float(value)) if np.dtype(type(value)) == np.float64 or isinstance(
            value, float) else str(value)
    if isinstance(value, (np.integer, np.bool_)):
        return str(value.item())
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    return str(value)


def _table(columns, rows):
    cells = [[format_value(row.get(c, "")) if c in row else "" for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in cells]
    return lines


def format_explanation(e):
    settings = ", ".join(f"{k}={v!r}" for k, v in e.hyper.items()) or "defaults"
    lines = [f"npoptim explain {e.optimizer} ({settings})", ""]
    if e.formula:
        lines += ["rule (from the module docstring):", *("    " + l for l in
                                                        e.formula.splitlines()), ""]
    lines.append("values are printed to the last digit (shortest repr that reads back to the "
                 "same bits);")
    lines.append(f"columns marked {DERIVED_MARK} are derived for teaching: the kernel does not "
                 "compute them.")
    for s in e.steps:
        lines += ["", f"== step {s.step}: lr = {format_value(s.lr)}"
                  + (f", loss before = {format_value(s.loss)}" if s.loss is not None else "")]
        for i, (p, g) in enumerate(zip(s.params_before, s.grads)):
            lines.append(f"  params[{i}] = {format_value(p)}   grad = {format_value(g)}")
        for table in s.tables:
            t = table.get("step_count")
            lines += ["", f"  params[{table['param']}] {table['rule']} (kernel "
                      f"{table['kernel']})" + (f", t = {t}" if t is not None else "")]
            if table["hyper"]:
                lines.append("  record: " + ", ".join(f"{k}={format_value(v)}"
                                                      for k, v in table["hyper"].items()))
            derived_names = []
            for d in table["derived"]:
                derived_names += [k for k in d if k not in derived_names]
            columns = table["columns"] + [k + DERIVED_MARK for k in derived_names]
            rows = [dict(r, **{k + DERIVED_MARK: v for k, v in d.items()})
                    for r, d in zip(table["rows"], table["derived"])]
            lines += ["  " + l for l in _table(columns, rows)]
        for i, ratio in enumerate(s.trust_ratios):
            if ratio is not None:
                lines.append(f"  params[{i}] trust ratio: ‖w‖ = {format_value(ratio['w_norm'])}"
                             f", ‖x‖ = {format_value(ratio['x_norm'])}, ratio = "
                             f"{format_value(ratio['trust_ratio'])}")
        for i, items in enumerate(s.listings):
            if items:
                lines += ["", f"  computed around the kernels ({'params[%d]' % i if i < len(s.params_before) else 'scheduler'}):"]
                lines += [f"    {func}: {name} = {format_value(value)}"
                          for func, name, value in items]
        for i, p in enumerate(s.params_after):
            lines.append(f"  -> params[{i}] = {format_value(p)}")
    return "\n".join(lines)


def to_json_value(value):
    """Numbers as Python floats (JSON keeps float64 exactly), arrays as nested lists."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [to_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json_value(v) for k, v in value.items()}
    return value


def explanation_to_dict(e):
    return {
        "optimizer": e.optimizer, "hyper": to_json_value(e.hyper), "formula": e.formula,
        "derived_columns_are_not_kernel_values": True,
        "steps": [{
            "step": s.step, "lr": s.lr, "loss": to_json_value(s.loss),
            "params_before": to_json_value(s.params_before), "grads": to_json_value(s.grads),
            "params_after": to_json_value(s.params_after),
            "tables": [{"param": t["param"], "kernel": t["kernel"], "rule": t["rule"],
                        "step_count": t.get("step_count"),
                        "hyper": to_json_value(t["hyper"]), "columns": t["columns"],
                        "rows": to_json_value(t["rows"]),
                        "derived": to_json_value(t["derived"])} for t in s.tables],
            "listings": [[{"function": f, "name": n, "value": to_json_value(v)}
                          for f, n, v in items] for items in s.listings],
            "trust_ratios": to_json_value(s.trust_ratios),
        } for s in e.steps],
        "final": to_json_value(e.final),
    }
