"""Show a D-lattice to a person: text, a JSON-ready dict, Graphviz DOT (plan.dot) and a PNG (plan.png).

Nodes are named by view and group-by attributes as in the paper's figures ("+region" marks a hidden
lattice-friendly attribute, Example 5.4); edges carry their join labels (Example 5.3); the chosen
parent of every summary-delta (5.5) is drawn solid, other lattice edges dashed. Estimated rows are
shown next to actual rows when those are given (e.g. after a propagate run).

The PNG is drawn in pure Python with matplotlib (no Graphviz binary needed): a layered layout, one
layer per depth below the change set. matplotlib (already in requirements.txt) is imported inside
write_png only, so the compiler itself still needs nothing beyond sqlglot and the standard library.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import dataclasses

from lattice import emit
from lattice.dlattice import lattice_shape
from lattice.graph import levels, topological_order
from lattice.ir import Edge, JoinStep, Lattice, LatticeNode, Plan
from lattice.sql import to_dialect
from runtime.manifest import RowsRead
from runtime.night import NightPlan, preaggregation
from runtime.options import Options
from runtime.serial import to_json as serial_json

Rows = dict[str, int] | None


# ------------------------------------------------------------------ the compiled plan and the night's plan


def plan_text(plan: Plan, options: Options, night: NightPlan | None = None) -> str:
    """What `nightshift plan` prints before the lattice: every view, how it is stored and kept; with
    a night, how that night kept it."""
    head = f"plan {plan.fingerprint}: {len(plan.views)} summary table(s)"
    if night is not None:
        head += (f"\nnight {night.batch}: base at {night.base_state or '(empty)'}; {night.info.describe()}; "
                 f"statistics {night.statistics}; options: {_options_text(night.options)}")
        if night.unreached:
            head += (f"\n  {', '.join(night.unreached)}: rows added under new keys only, which no row before the batch "
                     f"references: views meet them through tonight's inserted rows, without reading their fact table")
    lines = [head]
    new_keys = {n.lower() for n in (night.options if night else options).new_keys}
    auxiliary = {a.name for a in plan.auxiliary}
    for v in (*plan.views, *plan.auxiliary):  # the served views, then the auxiliary views they read
        if v.name in auxiliary:
            lines += ["", f"{v.name}  (auxiliary view, lake only: lake/tables/{v.name}/, never a warehouse table)",
                      f"  mode: {v.mode}"]
        else:
            lines += ["", f"{v.name}  ({v.file})", f"  mode: {v.mode}" + (f" ({v.maintain} in [views])" if v.maintain != "auto" else "")]
        if not v.incremental:
            lines.append(f"  why: {v.reason}")
            lines.append(f"  reads: {', '.join((*v.tables, *v.reads))}; columns: {', '.join(o.name for o in v.outputs)}")
            if night is not None:
                lines += _night_lines(night, v.name)
            continue
        if v.reason:
            lines.append(f"  why: {v.reason}")
        joins = ", ".join(f"{j.child}.{'/'.join(j.child_columns)} -> {j.parent}" for j in v.joins) or "none"
        lines.append(f"  fact {v.fact}; joins: {joins}")
        if v.where:
            lines.append(f"  filter: {v.where}")
        lines.append("  group by: " + (", ".join(_key_text(k) for k in v.keys) or "(none: a grand total, one row)"))
        if v.having:
            lines.append(f"  having (applied by the serving view; every group is stored): {v.having}")
        for o in v.outputs:
            if o.kind != "key":
                extra = f" / {o.count_column}" if o.count_column else ""
                what = o.kind.upper()
                if o.kind == "holistic":  # recomputed for each changed group from the auxiliary view's values
                    s = next(s for s in v.stored if s.column == o.source)
                    name, _, p = s.func.partition(" ")
                    what = f"{name.upper()}({p}) of e weighted by m" if p else f"{name.upper()} of e weighted by m"
                lines.append(f"  {o.name} = {what} -> {o.source}{extra}")
        lines.append(f"  stored: {', '.join(f'{s.column} {s.kind}' for s in v.stored)}")
        by = preaggregation(plan, v, night.options if night else options)
        if by:
            lines.append(f"  pre-aggregation (4.1.3): fact changes grouped by {', '.join(by)} before joining "
                         f"{', '.join(v.dimensions)} (when computed from the change set)")
        if v.name.lower() in new_keys:
            lines.append("  refresh (4.3): every summary-delta group declared new ([refresh] new_keys), verified each night")
        if night is not None:
            lines += _night_lines(night, v.name)
    return "\n".join(lines)


# ------------------------------------------------------------------ the product's own words (plan, status)

_REFERENCES = [  # the method's papers are cited under `nightshift plan --explain` and on "How it works" only
    re.compile(r"\s*\((?:[^()]*\b(?:paper|papers|Section|Figure|Table \d|Appendix|Example)\b[^()]*)\)"),
    re.compile(r"\s*\(\d(?:\.\d){1,3}\)"),  # a section number such as (4.1.3)
    re.compile(r",?\s*\bpapers? \d{3}(?:[,/ ]+\d{3})*(?:,?\s*§?\s*\d+(?:\.\d+)*)?"),
    re.compile(r"\s*\b00\d (?:§\s*)?\d+(?:\.\d+)*(?:'s C_i)?"),
    re.compile(r"\s*\b(?:Section|Figure|Appendix) [\dA-Z]+(?:\.\d+)*"),
]


def plain(text: str, plan: Plan | None = None) -> str:
    """`text` in the product's words: without references to the method's papers, and with hidden lake
    objects named after the views they serve."""
    for r in _REFERENCES:
        text = r.sub("", text)
    if plan is not None:
        for a in plan.auxiliary:
            shown = display_name(plan, a.name)
            text = re.sub(rf"\bthe map {re.escape(a.name)}\b", display_name(plan, a.name, "map"), text)
            text = re.sub(rf"\b(?:(?:the |an )?auxiliary view|(?<!summary )view) {re.escape(a.name)}\b", shown, text)
            text = re.sub(rf"\bsd_{re.escape(a.name)}\b", f"the summary-delta of {shown}", text)
            text = re.sub(rf"\b{re.escape(a.name)}\b", shown, text)
    return re.sub(r"\s*\(\s*\)", "", text).replace(" ;", ";").replace(" ,", ",").strip()


def served_by(plan: Plan, name: str) -> list[str]:
    """The served views that read lake object `name` (an auxiliary view)."""
    low = name.lower()
    return [v.name for v in plan.views if low in {r.lower() for r in v.reads}]


def display_name(plan: Plan, name: str, noun: str = "auxiliary view") -> str | None:
    """How a user reads a point of the plan: a summary view by its name, an auxiliary view as "<view>'s
    auxiliary view" (noun "map": "<view>'s map", where the plan keeps the view over it); None for the lattice's
    intermediate points (not shown outside --explain)."""
    if any(v.name == name for v in plan.views):
        return name
    if any(a.name == name for a in plan.auxiliary):
        users = served_by(plan, name)
        return (" and ".join(f"{u}'s" for u in users) or "an") + f" {noun}"
    return None


def view_mode(plan: Plan, view: str, night_mode: str | None = None) -> str:
    """The mode a person reads for a view: the plan's (delta, auxiliary, nested, recompute), or recompute
    when tonight traded its incremental mode for a recompute. A night's "delta" means "by its
    summary-delta", which every incremental mode is."""
    try:
        mode = plan.view(view).mode
    except KeyError:
        return night_mode or "?"
    return "recompute" if night_mode == "recompute" else mode


def plan_short(plan: Plan, night: NightPlan | None = None, preview: bool = False) -> str:
    """`nightshift plan`: one line per summary view (its mode and why), then the levels."""
    head = f"{len(plan.views)} summary view(s)"  # the plan's fingerprint: under --explain
    if night is not None:
        what = "preview of night" if preview else "night"
        head += f"\n{what} {night.batch}: base at {night.base_state or '(empty)'}; {night.info.describe()}"
    lines = [head]
    for v in plan.views:
        step = night.view(v.name) if night is not None and any(x.view == v.name for x in night.views) else None
        mode = view_mode(plan, v.name, step.mode if step else None)
        why = step.reason if step is not None and step.mode == "recompute" else v.reason
        setting = f'[views] {v.name} = "{v.maintain}"'
        if v.maintain != "auto" and setting not in why and not (step is not None and step.mode == "recompute"):
            why = setting + (f"; {why}" if why else "")
        if not why:
            why = _default_why(v)
        why = plain(why, plan)
        reads = [n for r in v.reads if (n := display_name(plan, r)) and n != r
                 and n not in why and display_name(plan, r, "map") not in why]
        extra = f"; reads {', '.join(reads)} (lake only)" if reads else ""
        lines.append(f"  {v.name}: {mode} mode ({why}){extra}")
    return "\n".join(lines)


def _default_why(v) -> str:
    if v.mode == "delta":
        return "from its changes: COUNT/SUM/AVG/MIN/MAX over the fact table and its dimensions"
    return ""


def levels_short(plan: Plan, tiers: tuple[tuple[str, ...], ...], used: set[str]) -> str:
    """The levels with the views they compute; the lattice's intermediate points are counted when the
    night computes them (`used`) and left out when the plan dropped them."""
    lines = ["levels (propagate --level K; one Airflow task each, in order):"]
    for k, tier in enumerate(tiers):
        names = [n for n in (display_name(plan, t) for t in tier) if n]
        shared = sum(1 for t in tier if display_name(plan, t) is None and t in used)
        if shared:
            names.append(f"{shared} intermediate result(s) other views derive from")
        lines.append(f"  {k}: {', '.join(names) or 'nothing to compute'}")
    return "\n".join(lines)


def _key_text(k) -> str:
    """A group key as the user reads it: a computed key in warehouse SQL (DAYOFWEEK(d), not the
    compiler's neutral DAY_OF_WEEK(d))."""
    text = k.name + (f" = {to_dialect('SELECT ' + k.sql, 'duckdb')[len('SELECT '):]}" if k.ref.is_expression else "")
    return text + ("" if k.declared else " (hidden)")


def _night_lines(night: NightPlan, view: str) -> list[str]:
    step = night.view(view)
    if step.mode == "recompute":
        return [f"  night {night.batch}: recompute ({step.reason}); whole contents to part={step.part}, level {step.level}"]
    node = night.node(view)
    where = "the change set" if node.from_changes else f"sd_{node.parent} (5.1)"
    pre = f", pre-aggregated by {', '.join(node.preaggregated_by)}" if node.preaggregated_by else ""
    exact = {"": "", "lost": "; exact MIN/MAX for every group that lost rows",
             "weakly_minimal": "; exact MIN/MAX for groups a deleted extreme undercuts (4.3, weakly minimal)",
             "extreme_deleted": "; exact MIN/MAX for groups whose old extreme (lake copy) was deleted and not "
                                "re-established (000 5's C_i)",
             "monotone": "; no exact MIN/MAX: tonight deletes nothing and changes no dimension it joins, so its "
                         "inner view's extremes only move outward and none is lost (000 5's C_i never holds)"}
    months = "; read from the months of the deleted extremes first (the base is laid out by that date's months)" \
        if step.by_month else ""
    return [f"  night {night.batch}: {step.mode} mode ({step.reason}); summary-delta from {where}{pre}, level "
            f"{node.level}, part={step.part}{exact[step.exact_minmax]}{months}"]


def _options_text(options: Options) -> str:
    flags = [name for name in ("lattice", "preaggregate", "weak_minimality", "refresh_optimize") if getattr(options, name)]
    off = [name for name in ("lattice", "preaggregate", "weak_minimality", "refresh_optimize") if not getattr(options, name)]
    return ", ".join(flags) + (f"; off: {', '.join(off)}" if off else "") + f"; statistics from {options.stats_rows} change rows"


def shape_levels(plan: Plan) -> tuple[tuple[str, ...], ...]:
    """The D-lattice's levels (from its shape: the same every night): one propagate task each."""
    return levels(lattice_shape(plan))


def levels_text(tiers: tuple[tuple[str, ...], ...]) -> str:
    lines = ["levels (propagate --level K; one Airflow task each, in order):"]
    lines += [f"  {k}: {', '.join(tier)}" for k, tier in enumerate(tiers)]
    return "\n".join(lines)


def rows_read_text(plan: Plan, rows_read: tuple[RowsRead, ...] | None) -> str:
    """What the night's propagate read, per source of the lake, as Spark's scans measured it and the rows it sent
    with its queries (the manifest's rows_read), and whether it read each fact table's base: measured, not claimed."""
    if rows_read is None:
        return ("rows read by propagate: not measured (a manifest written before nightshift measured them, "
                "Spark's listener bus did not deliver the step's events in time, or a Spark Connect server that keeps "
                "no event log on this machine: start it with nightshift spark-connect start)")
    lines = ["rows read by propagate (Spark SQL metrics: the rows of the row groups each Parquet scan read, "
             "before filters; a cached relation once; a small table's rows sent with the queries once; a pass over a "
             "base table the command made, every row of the row groups it read), and the bytes read from their files "
             "where nightshift read them itself (the column chunks of its passes, whole small files):"]
    lines += [f"  {r.kind:<8} {r.name:<28} {r.rows:>13,} rows" + (f" in {r.scans} scan(s)" if r.scans else "")
              + _bytes_read(r) for r in rows_read] or ["  nothing (no Parquet scan)"]
    base = {t.name for t in plan.schema.base_tables}
    for fact in (f for f in plan.fact_tables if f in base):
        r = next((r for r in rows_read if (r.kind, r.name) == ("base", fact)), None)
        lines.append(f"  fact table {fact}: " + (f"base read, {r.rows:,} rows in {r.scans} scan(s){_bytes_read(r)}"
                                                 if r and r.rows else "base not read"))
    return "\n".join(lines)


def _bytes_read(r: RowsRead) -> str:
    """', 12.5 MiB' (the bytes a source's reads took from its files), or nothing when not known or none."""
    if not r.bytes:
        return ""
    size, unit = float(r.bytes), "bytes"
    for bigger in ("KiB", "MiB", "GiB", "TiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f", {r.bytes:,} bytes" if unit == "bytes" else f", {size:.1f} {unit}"


def plan_dict(plan: Plan, lattice: Lattice, actual: Rows, night: NightPlan | None,
              rows_read: tuple[RowsRead, ...] | None = None) -> dict:
    """`nightshift plan --json`: the compiled plan, the lattice, the levels, the night's plan and what its
    propagate read (rows_read, when measured)."""
    return {**dataclasses.asdict(plan), "lattice": to_dict(lattice, actual),
            "levels": [list(t) for t in (night.levels if night else shape_levels(plan))],
            "night": serial_json(night) if night else None,
            "rows_read": serial_json(rows_read) if rows_read is not None else None}


# ------------------------------------------------------------------ shared pieces


def join_text(j: JoinStep) -> str:
    on = ", ".join(s.column for s in j.on)
    if j.via == "dependency":
        return f"{j.table} on {on} ({', '.join(j.key)} -> {', '.join(c for c in j.columns if c not in j.key)})"
    return f"{j.table} on {on}"


def edge_label(e: Edge) -> str:
    return ", ".join(e.join_labels)


def drawn_edges(lattice: Lattice) -> tuple[Edge, ...]:
    """The cover edges (Figure 9) plus any chosen parent edge that is not one."""
    chosen = {(p.parent, p.node) for p in lattice.parents}
    return tuple(e for e in lattice.edges if e.cover or (e.upper, e.lower) in chosen)


def is_chosen(lattice: Lattice, e: Edge) -> bool:
    return lattice.parent_of(e.lower) == e.upper


def rows_text(lattice: Lattice, name: str, actual: Rows) -> str:
    est = lattice.estimate(name)
    parts = [f"est {est.rows:,}" if est else "est ?"]
    if actual is not None and name in actual:
        parts.append(f"actual {actual[name]:,}")
    return " | ".join(parts)


def keys_text(node: LatticeNode) -> str:
    if node.kind == "changes":
        return f"changes of {node.fact}"
    return "(" + ", ".join(k.name if k.declared else f"+{k.name}" for k in node.keys) + ")"


# ------------------------------------------------------------------ text


def to_text(lattice: Lattice, actual_rows: Rows = None) -> str:
    lines = [
        f"D-lattice (paper 001, 5.4): {len(lattice.nodes)} nodes, {len(lattice.edges)} derives edges, "
        f"{len(lattice.cover_edges)} in the lattice drawing",
        "",
        "nodes (parent: where the summary-delta is computed from; rows: estimated | actual)",
    ]
    for name in topological_order(lattice):
        node = lattice.node(name)
        choice = next((p for p in lattice.parents if p.node == name), None)
        parent = f"from {choice.parent} (cost {choice.chosen.cost:,})" if choice else "top"
        shape = "" if node.kind == "changes" else keys_text(node)
        lines.append(f"  {node.name}{shape}  [{node.kind}]  {parent}  rows {rows_text(lattice, name, actual_rows)}")
    lines += ["", "edges (upper -> lower: joins; * chosen parent)"]
    for e in drawn_edges(lattice):
        joins = "; ".join(join_text(j) for j in e.joins) or "no join"
        where = f"; WHERE {e.where}" if e.where else ""
        lines.append(f"  {'*' if is_chosen(lattice, e) else ' '} {e.upper} -> {e.lower}: {joins}{where}")
    if lattice.augmentations:
        lines += ["", "augmentations (5.2, hidden: the serving contract is unchanged)"]
        for a in lattice.augmentations:
            if a.kind == "attribute":
                by = ", ".join(f"{r.table}.{r.column}" for r in a.determined_by)
                what = f"+{a.name} = {a.ref.table}.{a.ref.column} (determined by {by})"
            else:
                what = f"+{a.name} = {a.aggregate.upper()}({a.argument})"
            lines.append(f"  {a.node}: {what}, read by {', '.join(a.enables) or 'no edge'}")
    if lattice.notes:
        lines += ["", "notes"] + [f"  {n}" for n in lattice.notes]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ JSON


def to_dict(lattice: Lattice, actual_rows: Rows = None) -> dict:
    def ref(r):
        return f"{r.table}.{r.column}"

    nodes = []
    for n in lattice.nodes:
        est = lattice.estimate(n.name)
        item = {
            "name": n.name,
            "kind": n.kind,
            "label": n.label,
            "fact": n.fact,
            "where": n.where,
            "tables": list(n.tables),
            "keys": [{"name": k.name, "attribute": ref(k.ref), "hidden": not k.declared} for k in n.keys],
            "aggregates": [
                {"column": s.column, "kind": s.kind, "argument": n.argument(s.arg).sql if s.arg else None} for s in n.stored
            ],
            "parent": lattice.parent_of(n.name),
            "estimated_rows": est.rows if est else None,
            "estimate_basis": est.basis if est else None,
        }
        if actual_rows is not None:
            item["actual_rows"] = actual_rows.get(n.name)
        nodes.append(item)
    edges = [
        {
            "upper": e.upper,
            "lower": e.lower,
            "joins": [
                {"table": j.table, "via": j.via, "on": [s.column for s in j.on], "key": list(j.key), "columns": list(j.columns)}
                for j in e.joins
            ],
            "where": e.where,
            "aggregates": [{"column": a.column, "rule": a.rule, "source": a.source, "weight": a.weight} for a in e.aggregates],
            "cover": e.cover,
            "chosen": is_chosen(lattice, e),
        }
        for e in lattice.edges
    ]
    parents = [
        {
            "node": p.node,
            "parent": p.parent,
            "requires_unchanged": list(p.requires_unchanged),
            "candidates": [
                {
                    "parent": c.parent,
                    "parent_rows": c.parent_rows,
                    "join_rows": c.join_rows,
                    "cost": c.cost,
                    "valid": c.valid,
                    "reason": c.reason,
                }
                for c in p.candidates
            ],
        }
        for p in lattice.parents
    ]
    augmentations = [
        {
            "node": a.node,
            "kind": a.kind,
            "name": a.name,
            "attribute": ref(a.ref) if a.ref else None,
            "determined_by": [ref(r) for r in a.determined_by],
            "aggregate": a.aggregate,
            "argument": a.argument,
            "enables": list(a.enables),
        }
        for a in lattice.augmentations
    ]
    return {
        "nodes": nodes,
        "edges": edges,
        "not_derivable": [{"upper": n.upper, "lower": n.lower, "reason": n.reason} for n in lattice.not_derivable],
        "augmentations": augmentations,
        "parents": parents,
        "notes": list(lattice.notes),
    }


def to_json(lattice: Lattice, actual_rows: Rows = None) -> str:
    return json.dumps(to_dict(lattice, actual_rows), indent=2, ensure_ascii=False)


# ------------------------------------------------------------------ Graphviz DOT


def _dot_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


Recompute = tuple[tuple[str, str], ...]  # (view, why) of the views kept by recompute: drawn apart


def to_dot(lattice: Lattice, actual_rows: Rows = None, recompute: Recompute = ()) -> str:
    lines = [
        "digraph dlattice {",
        "  rankdir=TB;",
        '  node [shape=box, style=rounded, fontname="Helvetica", fontsize=10];',
        '  edge [fontname="Helvetica", fontsize=9];',
    ]
    styles = {"changes": "dashed", "view": "rounded", "implied": "dotted"}
    for n in lattice.nodes:
        label = f"{n.name}\n{keys_text(n)}\n{rows_text(lattice, n.name, actual_rows)}"
        lines.append(f"  {_dot_string(n.name)} [label={_dot_string(label)}, style={_dot_string(styles[n.kind])}];")
    for e in drawn_edges(lattice):
        attrs = [f"label={_dot_string(edge_label(e))}"]
        attrs.append("penwidth=2" if is_chosen(lattice, e) else "style=dashed")
        lines.append(f"  {_dot_string(e.upper)} -> {_dot_string(e.lower)} [{', '.join(attrs)}];")
    if recompute:
        lines.append('  subgraph cluster_recompute { label="kept by recompute (outside the lattice)"; style=dashed;')
        for name, reason in recompute:
            lines.append(f"    {_dot_string(name)} [label={_dot_string(name + chr(10) + _short(reason))}, style=filled, "
                         f"fillcolor=\"#fbeee6\"];")
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _short(reason: str, width: int = 48) -> str:
    """A recompute view's reason without its file and view prefix, cut to fit a box."""
    text = reason.split(": ", 2)[-1] if reason.count(": ") >= 2 else reason
    return text if len(text) <= width else text[: width - 3] + "..."


# ------------------------------------------------------------------ PNG


def layers(lattice: Lattice) -> list[list[str]]:
    """Longest-path layering over the drawn edges, each layer ordered by its parents' positions."""
    edges = drawn_edges(lattice)
    depth: dict[str, int] = {}
    for name in topological_order(lattice):
        ups = [depth[e.upper] for e in edges if e.lower == name and e.upper in depth]
        depth[name] = max(ups, default=-1) + 1
    out: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for name in topological_order(lattice):
        out[depth[name]].append(name)
    for i in range(1, len(out)):
        pos = {n: k for k, n in enumerate(out[i - 1])}
        for j in range(i - 1):
            pos.update({n: k for k, n in enumerate(out[j])})

        def centre(name: str) -> float:
            ups = [pos[e.upper] for e in edges if e.lower == name and e.upper in pos]
            return sum(ups) / len(ups) if ups else 0.0

        out[i].sort(key=lambda n: (centre(n), n))
    return out


def write_png(lattice: Lattice, path: str | Path, actual_rows: Rows = None, title: str = "D-lattice",
              recompute: Recompute = ()) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    rows = layers(lattice)
    text = {n.name: [n.name, keys_text(n), rows_text(lattice, n.name, actual_rows)] for n in lattice.nodes}
    char_w, line_h, gap_x, gap_y = 0.075, 0.2, 0.45, 1.0
    width = {n: max(len(s) for s in t) * char_w + 0.3 for n, t in text.items()}
    height = 3 * line_h + 0.2
    layer_w = [sum(width[n] for n in layer) + gap_x * (len(layer) - 1) for layer in rows]
    legend = "solid: chosen parent (5.5)   dashed: other lattice edge   label: dimension joined on the edge   +attr: hidden"
    side = max((max(len(n), len(_short(r))) * char_w + 0.5 for n, r in recompute), default=0.0)
    fig_w = max(max(layer_w, default=1) + 1.0, len(legend) * 0.065 + 0.5) + side
    fig_h = max(len(rows) * (height + gap_y) + 1.0, len(recompute) * (height + 0.3) + 1.6)
    centre: dict[str, tuple[float, float]] = {}
    for i, layer in enumerate(rows):
        x = (fig_w - side - layer_w[i]) / 2
        y = fig_h - 0.8 - i * (height + gap_y) - height / 2
        for n in layer:
            centre[n] = (x + width[n] / 2, y)
            x += width[n] + gap_x

    fig = Figure(figsize=(fig_w, fig_h), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, fig_w)
    ax.set_ylim(0, fig_h)
    ax.axis("off")
    ax.text(0.2, fig_h - 0.3, title, fontsize=11, fontweight="bold", va="center")
    styles = {"changes": "--", "view": "-", "implied": ":"}
    for name, (cx, cy) in centre.items():
        node = lattice.node(name)
        box = FancyBboxPatch(
            (cx - width[name] / 2, cy - height / 2), width[name], height,
            boxstyle="round,pad=0.02,rounding_size=0.08", linewidth=1.2, linestyle=styles[node.kind],
            edgecolor="#333333", facecolor="#eef3fb" if node.kind == "view" else "#f7f7f7",
        )
        ax.add_patch(box)
        name_line, keys_line, rows_line = text[name]
        ax.text(cx, cy + line_h, name_line, ha="center", va="center", fontsize=9, fontweight="bold")
        ax.text(cx, cy, keys_line, ha="center", va="center", fontsize=8.5)
        ax.text(cx, cy - line_h, rows_line, ha="center", va="center", fontsize=8, color="#444444")
    for e in drawn_edges(lattice):
        (x1, y1), (x2, y2) = centre[e.upper], centre[e.lower]
        chosen = is_chosen(lattice, e)
        arrow = FancyArrowPatch(
            (x1, y1 - height / 2), (x2, y2 + height / 2), arrowstyle="-|>", mutation_scale=12,
            linewidth=2.0 if chosen else 1.0, linestyle="-" if chosen else "--",
            color="#1f4e9c" if chosen else "#888888", shrinkA=2, shrinkB=2,
        )
        ax.add_patch(arrow)
        if e.join_labels:
            ax.text((x1 + x2) / 2, (y1 + y2) / 2, edge_label(e), ha="center", va="center", fontsize=8,
                    bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "#bbbbbb"})
    if recompute:  # beside the lattice: views kept by recompute, with why
        x0 = fig_w - side + 0.1
        ax.text(x0, fig_h - 0.3, "kept by recompute", fontsize=9.5, fontweight="bold", va="center")
        for i, (name, reason) in enumerate(recompute):
            y = fig_h - 0.8 - i * (height + 0.3) - height / 2
            ax.add_patch(FancyBboxPatch((x0, y - height / 2), side - 0.3, height, boxstyle="round,pad=0.02,rounding_size=0.08",
                                        linewidth=1.0, edgecolor="#a0522d", facecolor="#fbeee6"))
            ax.text(x0 + (side - 0.3) / 2, y + line_h / 2, name, ha="center", va="center", fontsize=9, fontweight="bold")
            ax.text(x0 + (side - 0.3) / 2, y - line_h / 2, _short(reason), ha="center", va="center", fontsize=7.5)
    ax.text(0.2, 0.3, legend, fontsize=7.5, color="#555555", va="center")
    path = Path(path)
    fig.savefig(path)
    return path


def write_files(lattice: Lattice, directory: str | Path, actual_rows: Rows = None,
                recompute: Recompute = ()) -> tuple[Path, Path, Path]:
    """plan.dot, plan.png and plan.json in `directory`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    dot = directory / "plan.dot"
    dot.write_text(to_dot(lattice, actual_rows, recompute), encoding="utf-8")
    js = directory / "plan.json"
    js.write_text(to_json(lattice, actual_rows), encoding="utf-8")
    return dot, write_png(lattice, directory / "plan.png", actual_rows, recompute=recompute), js
