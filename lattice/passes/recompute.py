"""Pass 2b: a view no incremental rule covers is kept by recompute (DESIGN.md, the fourth mode).

Outer and non-foreign-key joins, window functions, subqueries, set operations, DISTINCT,
non-deterministic functions, a view over another summary view, holistic aggregates: valid SQL over
the declared tables that the delta mode (parse_views) does not keep. Each night Spark evaluates the
view over the base at state k (the base before the batch and the batch, without applying it) and
refresh replaces the table's contents in the same one transaction as every other view. The view
records why (the construct, the file), which `nightshift plan` prints.

Refused here are only references to nothing: a table that is neither declared nor a summary view.
(nightshift.config checks the whole statement against the schema with DuckDB, which names an
unknown column or any other error.)
"""

from __future__ import annotations

from sqlglot import exp

from lattice.errors import UnknownReference, UnsupportedView
from lattice.ir import Output, Schema, View
from lattice.passes.parse_views import ViewStatement


def recompute_view(statement: ViewStatement, schema: Schema, views: frozenset[str], reason: str) -> View:
    """The View of a recompute-mode view: its tables and the summary views it reads, its declared
    output columns (the column list, else each select item's name), no stored aggregates."""
    query, file, name = statement.query, statement.file, statement.name
    ctes = {c.alias_or_name.lower() for c in query.find_all(exp.CTE)}
    tables, reads = [], []
    for t in query.find_all(exp.Table):
        low = t.name.lower()
        if low in ctes or not t.name:
            continue
        table = schema.table(t.name)
        if table is not None:
            tables.append(table.name)
        elif low in views:
            reads.append(t.name)
        else:
            raise UnknownReference(f"{file}: view {name}: unknown table {t.name} (not declared in {schema.file} "
                                   f"and not a summary view)")
    names, quoted = _output_names(statement)
    lowered = [n.lower() for n in names]
    dup = next((n for n in names if lowered.count(n.lower()) > 1), None)
    if dup:
        raise UnsupportedView(f"{file}: view {name}: duplicate output column {dup} (alias one of them)")
    return View(
        name=name, file=file, sql=query.sql(), fact="", tables=tuple(dict.fromkeys(tables)), joins=(), where=None,
        keys=(), outputs=tuple(Output(n, "column", n) for n in names), quoted=tuple(sorted(set(statement.quoted) | quoted)),
        mode="recompute", reason=reason, reads=tuple(dict.fromkeys(reads)),
    )


def _output_names(statement: ViewStatement) -> tuple[list[str], set[str]]:
    select = statement.query
    while isinstance(select, (exp.Union, exp.Intersect, exp.Except)):
        select = select.this  # a set operation's columns are named by its first SELECT
    items = select.expressions if isinstance(select, exp.Select) else []
    if statement.columns:
        return list(statement.columns), set()
    names, quoted = [], set()
    for item in items:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            raise UnsupportedView(f"{statement.file}: view {statement.name}: SELECT * in a view kept by recompute "
                                  f"(list its columns: the summary table's columns must not change with the schema)")
        ident = item.args.get("alias") if isinstance(item, exp.Alias) else (item.this if isinstance(item, exp.Column) else None)
        names.append(item.alias_or_name or item.sql())
        if isinstance(ident, exp.Identifier) and ident.quoted:
            quoted.add(ident.name)
    return names, quoted
