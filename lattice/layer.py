"""The summary layer as built vs as compiled: what `nightshift plan` lists and `nightshift apply` builds.

Every view has a definition fingerprint (its SQL, its [views] setting, its mode, the declarations of
the columns it reads, and the fingerprints of the summary views it reads, so a view over a changed
view changes too) and a description (keys, aggregates, filter, HAVING, mode, tables, columns). The
ledger keeps both for the layer it built (materialize and apply write them); `diff` compares that with
the compiled plan: views added, changed (and how), dropped. A change of sql/schema.sql that no view
reads (a new column, a comment, another table) changes no view.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp

from lattice.ir import Edge, LatticeNode, Plan, Table, View
from lattice.passes.derives import derives, node_of_view

LEDGER_KEY = "_ns_views"  # the ledger stats entry holding the built layer (view names never start with _ns_)

_FIELDS = (("keys", "group keys"), ("aggregates", "aggregates"), ("filter", "filter"), ("having", "HAVING"),
           ("tables", "tables"), ("columns", "declared columns it reads"), ("mode", "mode"),
           ("maintain", "[views] setting"))


def describe(plan: Plan) -> dict[str, dict]:
    """Each served view's fingerprint and description, by name (plan order). An auxiliary view is part
    of the definition of the view it serves (its fingerprint goes into that view's), never its own entry."""
    out: dict[str, dict] = {}
    for v in plan.lake_views:
        names = _names(v.sql)
        out[v.name] = {
            # only the declarations of the columns its SQL names: a column nobody names changes no view
            "fingerprint": _fingerprint(plan, v, out, "fingerprint", lambda t: _declaration(t, names)),
            # the rule before per-column declarations (every table's whole declaration): a layer built by it
            # compares by it, so upgrading rebuilds nothing
            "legacy": _fingerprint(plan, v, out, "legacy", repr),
            **_description(v), "columns": _columns(plan, v, names)}
    served = {v.name for v in plan.views}
    return {name: d for name, d in out.items() if name in served}


def _description(v: View) -> dict:
    args = {a.index: a.sql for a in v.arguments}
    stored = {s.column: s for s in v.stored}

    def aggregate(o) -> str:
        if o.kind == "count_star":
            return f"{o.name} = COUNT(*)"
        s = stored.get(o.source)
        arg = args.get(s.arg) if s is not None else None
        if arg and o.kind == "holistic":  # e.g. percentile_cont 0.5, uda trimmed_mean (its SQL is in the fingerprint)
            return f"{o.name} = {s.func.upper()}({arg})"
        return f"{o.name} = {o.kind.upper()}({arg})" if arg else o.name

    return {
        "keys": [k.name if not k.ref.is_expression else f"{k.name} = {k.sql}" for k in v.keys],
        "aggregates": [aggregate(o) for o in v.outputs if o.kind not in ("key", "column")]
        or [o.name for o in v.outputs if o.kind == "column"],
        "filter": v.where or "", "having": v.having or "", "tables": list(v.tables), "mode": v.mode,
        "maintain": v.maintain, "reads": list(v.reads), "quoted": list(v.quoted),
    }


def _fingerprint(plan: Plan, v: View, done: dict[str, dict], key: str, declaration) -> str:
    """Over what decides the view's rows: its SQL, mode and settings, the fingerprints (`key` of `done`) of
    the views it reads, and declaration(table) of each table it reads."""
    digest = hashlib.sha256()
    parts = [v.name.lower(), v.sql, v.mode, v.maintain, v.having or "", repr(v.quoted)]
    by_low = {name.lower(): d for name, d in done.items()}
    for t in sorted(set(v.tables) | set(v.reads), key=str.lower):
        if t.lower() in by_low:  # a summary view it reads: that view's definition
            parts.append(f"view {t.lower()} {by_low[t.lower()][key]}")
        elif (table := plan.schema.table(t)) is not None:
            parts.append(declaration(table))
    for p in parts:
        digest.update(p.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def _columns(plan: Plan, v: View, names: set[str] | None) -> list[str]:
    """The declarations of the base-table columns the view reads (`names`: _names of its SQL), as
    `nightshift plan` shows a change of them ("pos.qty INTEGER NOT NULL")."""
    out = []
    for t in v.tables:
        table = plan.schema.table(t)
        if table is None or table.view is not None:
            continue
        out += [f"{table.name}.{c.name} {c.type}{'' if c.nullable else ' NOT NULL'}" for c in table.columns
                if names is None or c.name.lower() in names]
    return out


def _names(sql: str) -> set[str] | None:
    """Every name the SQL writes (lower case), None when it selects * (every column)."""
    tree = sqlglot.parse_one(sql)
    if any(isinstance(s.parent, (exp.Select, exp.Column)) for s in tree.find_all(exp.Star)):
        return None
    return {i.name.lower() for i in tree.find_all(exp.Identifier)}


def _declaration(table: Table, names: set[str] | None) -> str:
    """The part of a table's declaration a view with these names depends on. Over-approximate by
    design: a name matching a column of any table it reads counts for each of them."""
    def read(cols) -> bool:
        return names is None or any(c.lower() in names for c in cols)

    columns = [c for c in table.columns if read([c.name])]
    keys = [repr(table.primary_key)] if read(table.primary_key) else []
    fks = [repr(fk) for fk in table.foreign_keys if read(fk.columns)]
    return f"table {table.name.lower()} " + repr(columns) + "".join(keys) + "".join(fks)


@dataclass(frozen=True)
class Changed:
    view: str
    how: tuple[str, ...]  # "group keys: (storeID, date) -> (storeID, month)", "reads changed view X", ...


@dataclass(frozen=True)
class LayerDiff:
    added: tuple[str, ...] = ()
    changed: tuple[Changed, ...] = ()
    dropped: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    known: bool = True  # False: the ledger holds no description of the built layer (built before this version)
    built: dict = field(default_factory=dict)  # the ledger's description (dropped views' storage names)

    @property
    def empty(self) -> bool:
        return self.known and not (self.added or self.changed or self.dropped)

    @property
    def rebuild(self) -> tuple[str, ...]:
        """The views apply builds (added and changed), in plan order by construction."""
        return self.added + tuple(c.view for c in self.changed)

    def lines(self) -> list[str]:
        if not self.known:
            return ["the ledger does not describe the built summary layer (built by an earlier nightshift): "
                    "nightshift apply rebuilds every view once"]
        out = [f"added: {v}" for v in self.added]
        out += [f"changed: {c.view} ({'; '.join(c.how)})" for c in self.changed]
        out += [f"dropped: {v}" for v in self.dropped]
        return out or ["no summary view changed (sql/schema.sql or a setting changed that no view reads)"]

    def summary(self) -> str:
        parts = []
        if not self.known:
            return "the built layer is not described in the ledger; every view is rebuilt"
        if self.added:
            parts.append("added " + ", ".join(self.added))
        if self.changed:
            parts.append("changed " + ", ".join(c.view for c in self.changed))
        if self.dropped:
            parts.append("dropped " + ", ".join(self.dropped))
        return "; ".join(parts) or "no summary view changed"


def diff(built: dict | None, plan: Plan) -> LayerDiff:
    """The compiled plan against the layer the ledger describes (`built`: describe() of the plan that
    built it, None when the ledger holds none)."""
    now = describe(plan)
    if built is None:
        return LayerDiff(changed=tuple(Changed(v, ("not described in the ledger",)) for v in now), known=False)
    old = {name.lower(): (name, d) for name, d in built.items()}
    added, changed, unchanged = [], [], []
    for name, d in now.items():
        if name.lower() not in old:
            added.append(name)
            continue
        before = old[name.lower()][1]
        rule = "fingerprint" if "columns" in before else "legacy"  # a layer built before per-column fingerprints
        if before.get("fingerprint") == d[rule]:
            unchanged.append(name)
            continue
        how = [_how(label, before.get(key), d[key]) for key, label in _FIELDS
               if before.get(key) != d[key] and (key != "columns" or rule == "fingerprint")]
        reads = [r for r in d["reads"] if r in now and any(c.view == r for c in changed)]
        reads += [r for r in d["reads"] if r in added]
        how += [f"reads {r}, which changed" for r in dict.fromkeys(reads)]
        changed.append(Changed(name, tuple(how) or (
            "definition (SQL text, the declaration of a table it reads, or a user-defined aggregate it calls)",)))
    live = {n.lower() for n in now}
    dropped = [old_name for low, (old_name, _) in old.items() if low not in live]
    return LayerDiff(tuple(added), tuple(changed), tuple(dropped), tuple(unchanged), True, built)


def _how(label: str, before, now) -> str:
    if label.startswith("declared columns"):  # only the declarations that differ
        before, now = [c for c in before or () if c not in now], [c for c in now if c not in (before or ())]
    return f"{label}: {_show(before)} -> {_show(now)}"


def _show(value) -> str:
    if isinstance(value, list):
        return "(" + ", ".join(map(str, value)) + ")"
    return str(value) if value else "none"


def changed_message(diff: LayerDiff, built: str, now: str) -> str:
    """The error of a night (or refresh) that finds the summary layer changed since it was built."""
    head = (f"sql/schema.sql, sql/summaries, [views] or [statistics] changed since the summary tables were built "
            f"(plan {built} -> {now})")
    if diff.empty:
        return f"{head}, but no summary view is affected; run nightshift apply to record the new plan (it rebuilds nothing)"
    return (f"{head}: {diff.summary()}; nightshift plan shows how; run nightshift apply to build only those "
            f"(nightshift materialize rebuilds every summary table)")


def built_parents(plan: Plan, rebuild: tuple[str, ...], rows: dict[str, int] | None = None,
                  base_rows: dict[str, int] | None = None) -> dict[str, tuple[Edge, LatticeNode]]:
    """For each view nightshift apply builds, the derives edge (5.1) from a summary table that is already
    built and stays, with the view's own lattice point: the new view is one GROUP BY over that
    table's stored rows, joined with the edge's dimensions, instead of a pass over the base (a region-by-day
    rollup from sCD_sales through city -> region). The edge is derived between the two views as stored
    (no lattice-friendly hidden attribute: those live in summary-deltas, not in tables). Only a delta-mode
    view qualifies. Of several parents the smallest by `rows` (summary table -> rows; without it, the fewest
    group keys), and only one holding at most half the rows of the view's fact table (`base_rows`):
    exporting a table nearly as large as the base costs more than reading the base."""
    rebuilding = {n.lower() for n in rebuild}
    out: dict[str, tuple[Edge, LatticeNode]] = {}
    for name in rebuild:
        view = next((v for v in plan.views if v.name == name), None)
        if view is None or view.mode != "delta" or view.has_holistic:
            continue
        lower = node_of_view(view)
        best: tuple[tuple[int, int, str], Edge] | None = None
        for upper in plan.views:
            if upper.name.lower() in rebuilding or upper.mode != "delta" or upper.fact != view.fact:
                continue
            size = (rows or {}).get(upper.name, 0)
            if rows is not None and base_rows is not None and size * 2 > base_rows.get(view.fact, 0):
                continue
            edge = derives(lower, node_of_view(upper), plan.schema, plan.dependencies)
            if isinstance(edge, Edge) and (best is None or (size, len(upper.keys), upper.name) < best[0]):
                best = ((size, len(upper.keys), upper.name), edge)
        if best is not None:
            out[name] = (best[1], lower)
    return out
