"""The compiler pipeline, top to bottom (modelled on sqlglot's optimizer: one pass per module).

    parse_schema      sql/schema.sql              -> Schema
    read_view         sql/summaries/<view>.sql    -> ViewStatement   (one CREATE VIEW per file)
    view_order        ViewStatements              -> order           (a view after the views it reads; no cycles)
    check_functions   ViewStatement               -> (refuses what the engines disagree on)
    with_view_tables  Schema + Views read         -> Schema          (an incremental view another reads is a table)
    parse_view        ViewStatement               -> ParsedView      delta (or nested) mode, or NotIncremental ...
    normalize         ParsedView                  -> View            (AVG -> SUM/COUNT, hidden counts, HAVING)
    split             ViewStatement               -> A + outer view  ... auxiliary mode (DISTINCT aggregates), else
    recompute_view    ViewStatement + reason      -> View            ... then the view is kept by recompute
    check_names       Views                       -> Plan            (names unique, no clashes)
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

from sqlglot import exp

from lattice.errors import ConfigError, NotIncremental, UnsupportedView
from lattice.ir import MAINTAIN, FunctionalDependency, Plan, Schema, View
from lattice.passes.auxiliary import split
from lattice.passes.functions import check_functions
from lattice.passes.nested import with_view_tables
from lattice.passes.normalize import normalize
from lattice.passes.parse_schema import parse_schema
from lattice.passes.parse_views import ViewStatement, parse_view, read_view
from lattice.passes.recompute import recompute_view


def compile_project(
    schema_sql: str,
    view_files: dict[str, str],
    dependencies: tuple[FunctionalDependency, ...] = (),
    schema_file: str = "sql/schema.sql",
    maintain: tuple[tuple[str, str], ...] = (),
) -> Plan:
    """Compile a project's schema and summary views (file name -> SQL text) into a Plan.
    maintain: nightshift.toml [views] as (view name, "auto" | "incremental" | "recompute") pairs."""
    schema = parse_schema(schema_sql, schema_file)
    statements = [read_view(text, file) for file, text in sorted(view_files.items())]
    names = frozenset(s.name.lower() for s in statements)
    settings = _settings(maintain, names)
    _check_statement_names(statements)
    compiled: dict[str, View] = {}
    auxiliary: list[View] = []
    for st in view_order(statements, names):
        read = [compiled[n] for n in _reads(st, names) if compiled[n].incremental]
        view, aux = compile_view(st, with_view_tables(schema, read), names, settings.get(st.name.lower(), "auto"))
        compiled[st.name.lower()] = view
        auxiliary += aux
    views = tuple(compiled[s.name.lower()] for s in view_order(statements, names))
    _check_names(views)
    _check_auxiliary_names(views, auxiliary)
    read = {r.lower() for v in (*auxiliary, *views) if v.incremental for r in v.reads}
    schema = with_view_tables(schema, [v for v in (*auxiliary, *views) if v.name.lower() in read])
    digest = hashlib.sha256()
    for part in [schema_sql, *(f"{f}\0{t}" for f, t in sorted(view_files.items())), repr(dependencies), repr(maintain)]:
        digest.update(part.encode())
        digest.update(b"\0")
    return Plan(schema=schema, views=views, dependencies=dependencies, fingerprint=digest.hexdigest()[:16],
                auxiliary=tuple(auxiliary))


def compile_view(statement: ViewStatement, schema: Schema, names: frozenset[str], maintain: str = "auto"
                 ) -> tuple[View, tuple[View, ...]]:
    """The view in the cheapest mode that keeps it exactly: delta when paper 001's rules cover it
    (nested when its fact table is another summary view), auxiliary when its DISTINCT aggregates
    are kept over an auxiliary view (returned beside it, lake only), else recompute (with the
    reason); [views] <name> = "incremental" makes the latter an error."""
    check_functions(statement.query, f"{statement.file}: view {statement.name}")
    try:
        view = normalize(parse_view(statement, schema, names))
    except NotIncremental as e:
        kept = _auxiliary(statement, schema, names) if maintain != "recompute" else None
        if kept is not None:
            return replace(kept[0], maintain=maintain), kept[1]
        if maintain == "incremental":
            raise NotIncremental(f"{e}; nightshift.toml [views] {statement.name} = \"incremental\" forbids keeping it "
                                 f"by recompute (remove the setting, or rewrite the view)") from None
        view = recompute_view(statement, schema, names, str(e))
    inner = schema.table(view.fact).view if view.incremental else None
    if inner is not None:
        view = replace(view, mode="nested", reads=(inner,),
                       reason=f"reads {inner}'s summary-delta as updates (paper 000, 6) and its lake copy")
    return replace(view, maintain=maintain), ()


def _auxiliary(statement: ViewStatement, schema: Schema, names: frozenset[str]) -> tuple[View, tuple[View]] | None:
    """The auxiliary mode (lattice/passes/auxiliary.py): the view over its auxiliary view A, and A (a
    delta-mode view of base tables, lake only); None when the rewrite does not cover the view."""
    parts = split(statement)
    if parts is None:
        return None
    try:
        aux = normalize(parse_view(parts.auxiliary, schema, names))
        if schema.table(aux.fact).view is not None:
            return None  # DISTINCT over another summary view's rows: recompute
        outer = normalize(parse_view(parts.outer, with_view_tables(schema, [aux]), names | {aux.name.lower()}))
    except UnsupportedView:  # NotIncremental too: the rewrite does not cover the view
        return None
    why = "; ".join(f"{c}: {w}" for c, w in parts.columns)
    aux = replace(aux, reason=f"auxiliary view of {statement.name} (paper 002): per group, each value of "
                              f"{parts.argument} with its multiplicity; columns {why}")
    view = replace(outer, sql=statement.query.sql(), mode="auxiliary", reads=(aux.name,),
                   reason=f"DISTINCT aggregates over {parts.argument} kept from the auxiliary view {aux.name} "
                          f"(paper 002, lake only): its changed groups re-aggregated as updates (paper 000, 6)")
    return view, (aux,)


def _check_auxiliary_names(views: tuple[View, ...], auxiliary: list[View]) -> None:
    names = {v.name.lower(): v for v in views}
    for a in auxiliary:
        if a.name.lower() in names:
            v = names[a.name.lower()]
            raise UnsupportedView(f"{v.file}: view {v.name}: the name {a.name} is reserved for an auxiliary view "
                                  f"(rename the view)")


def view_order(statements: list[ViewStatement], names: frozenset[str]) -> list[ViewStatement]:
    """Statements in file order, except that a view comes after every summary view it reads; a cycle
    of views reading each other is refused, naming them."""
    by_name = {s.name.lower(): s for s in statements}
    out: list[ViewStatement] = []
    state: dict[str, str] = {}

    def visit(st: ViewStatement, path: list[str]) -> None:
        low = st.name.lower()
        if state.get(low) == "done":
            return
        if state.get(low) == "open":
            cycle = path[[p.lower() for p in path].index(low):] + [st.name]
            raise UnsupportedView(f"{st.file}: view {st.name}: views read each other in a cycle: {' -> '.join(cycle)}")
        state[low] = "open"
        for inner in _reads(st, names):
            visit(by_name[inner], path + [st.name])
        state[low] = "done"
        out.append(st)

    for st in statements:
        visit(st, [])
    return out


def _reads(statement: ViewStatement, names: frozenset[str]) -> list[str]:
    """The summary views (lower-case names) a view's SQL reads as tables (not its own CTEs)."""
    ctes = {c.alias_or_name.lower() for c in statement.query.find_all(exp.CTE)}
    found = [t.name.lower() for t in statement.query.find_all(exp.Table) if t.name.lower() in names - ctes]
    return list(dict.fromkeys(found))


def _settings(maintain: tuple[tuple[str, str], ...], names: frozenset[str]) -> dict[str, str]:
    out = {}
    for name, value in maintain:
        if name.lower() not in names:
            raise ConfigError(f"nightshift.toml: [views] {name}: no summary view of that name "
                              f"(views: {', '.join(sorted(names))})")
        if value not in MAINTAIN:
            raise ConfigError(f"nightshift.toml: [views] {name} = {value!r}: use one of {', '.join(MAINTAIN)}")
        out[name.lower()] = value
    return out


def _check_statement_names(statements: list[ViewStatement]) -> None:
    seen: dict[str, str] = {}
    for st in statements:
        low = st.name.lower()
        if low in seen:
            raise UnsupportedView(f"{st.file}: view {st.name} is also defined in {seen[low]}")
        seen[low] = st.file


def _check_names(views: tuple[View, ...]) -> None:
    for v in views:
        for k in v.keys:
            if k.name.lower().startswith("_ns_") and k.declared:
                raise UnsupportedView(f"{v.file}: view {v.name}: column {k.name}: names starting with _ns_ are reserved")
        for o in v.outputs:
            if o.name.lower().startswith("_ns_"):
                raise UnsupportedView(f"{v.file}: view {v.name}: column {o.name}: names starting with _ns_ are reserved")
