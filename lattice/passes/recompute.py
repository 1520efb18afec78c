"""Pass 2b: a view no incremental rule covers is kept by recompute (DESIGN.md, the fourth mode).

Outer and non-foreign-key joins, window functions, subqueries, set operations, DISTINCT, GROUPING
SETS / CUBE / ROLLUP (GROUPING(a, b) written so that Spark computes it too: portable_grouping),
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
        if table is not None and table.view is None:
            tables.append(table.name)
        elif low in views:  # also an incremental view that the schema holds as a table (nested mode reads it)
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
        name=name, file=file, sql=portable_grouping(query).sql(), fact="", tables=tuple(dict.fromkeys(tables)),
        joins=(), where=None,
        keys=(), outputs=tuple(Output(n, "column", n) for n in names), quoted=tuple(sorted(set(statement.quoted) | quoted)),
        mode="recompute", reason=reason, reads=tuple(dict.fromkeys(reads)),
    )


def portable_grouping(query: exp.Expression) -> exp.Expression:
    """GROUPING(a, b, …) as GROUPING(a) * 2^(n-1) + … + GROUPING(b): the bit mask PostgreSQL and DuckDB
    compute, written with the one-argument GROUPING every engine has (Spark's takes one column; its
    several-column form is grouping_id)."""
    def one_each(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Grouping) or len(node.expressions) < 2:
            return node
        n = len(node.expressions)
        terms = [exp.Mul(this=exp.Grouping(expressions=[e.copy()]), expression=exp.Literal.number(2 ** (n - 1 - i)))
                 for i, e in enumerate(node.expressions)]
        total = terms[0]
        for t in terms[1:]:
            total = exp.Add(this=total, expression=t)
        return exp.Paren(this=total)

    return query.transform(one_each) if query.find(exp.Grouping) else query


def _output_names(statement: ViewStatement) -> tuple[list[str], set[str]]:
    select = statement.query
    while isinstance(select, (exp.Union, exp.Intersect, exp.Except)):
        select = select.this  # a set operation's columns are named by its first SELECT
    items = select.expressions if isinstance(select, exp.Select) else []
    if len(statement.columns) > len(items) and items:
        raise UnsupportedView(f"{statement.file}: view {statement.name}: column list: CREATE VIEW names "
                              f"{len(statement.columns)} columns but the SELECT has {len(items)}")
    names, quoted = list(statement.columns), set()
    for item in items[len(names):]:  # a column list may name the first columns only (stars: expand_stars.py)
        ident = item.args.get("alias") if isinstance(item, exp.Alias) else (item.this if isinstance(item, exp.Column) else None)
        names.append(item.alias_or_name or item.sql())
        if isinstance(ident, exp.Identifier) and ident.quoted:
            quoted.add(ident.name)
    return names, quoted
