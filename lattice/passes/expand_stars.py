"""Pass 1b: `SELECT *` and `t.*` expanded into the columns they mean today.

    expand_stars   ViewStatement + Schema + the summary views' declared columns -> ViewStatement

A star in a view's select list stands for the columns of its FROM as sql/schema.sql declares them
today (a summary view it reads: that view's declared columns; a subquery or common table expression:
its own output names). The compiler writes them out before any other pass, so every mode keeps the
view as if the user had listed them, and the plan records what `*` meant: the view's SQL (View.sql)
is the expanded query, which the view's layer fingerprint hashes (lattice/layer.py), so a schema change
that changes what `*` means is a change of that view, which `nightshift plan` shows and `nightshift
apply` builds. DuckDB's `* EXCLUDE (c)` and `* REPLACE (e AS c)` are expanded too.

Columns merged by JOIN … USING / NATURAL JOIN appear once, unqualified; their place follows the
warehouse: PostgreSQL (and the SQL standard) puts them first, DuckDB where the left side has them.
A star over a source whose columns nobody declared (a table function, VALUES without column names,
an unnamed expression of a subquery) is refused with what to write instead.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

from sqlglot import exp

from lattice.errors import UnknownReference, UnsupportedView
from lattice.ir import Schema
from lattice.passes.parse_views import ViewStatement

USING_FIRST = {"duckdb": False, "postgres": True, "spark": True}  # where a JOIN … USING's merged columns go in *


@dataclass(frozen=True)
class _Entry:
    """One column a star stands for: its name and the source it is read from (None: merged by USING)."""

    name: str
    source: exp.Identifier | None


def expand_stars(statement: ViewStatement, schema: Schema, views: Mapping[str, tuple[str, ...]],
                 dialect: str = "duckdb") -> ViewStatement:
    """The statement with every `*` and `t.*` of a select list written out (module docstring).
    views: each summary view's lower-case name -> its declared column names."""
    if not any(_is_star(item) for s in statement.query.find_all(exp.Select) for item in s.expressions):
        return statement
    query = statement.query.copy()
    _Expander(statement, schema, {k.lower(): v for k, v in views.items()}, USING_FIRST.get(dialect, True)).query(query, {})
    return replace(statement, query=query)


def _is_star(item: exp.Expression) -> bool:
    return isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star))


class _Expander:
    def __init__(self, statement: ViewStatement, schema: Schema, views: dict[str, tuple[str, ...]], using_first: bool):
        self.statement, self.schema, self.views, self.using_first = statement, schema, views, using_first
        self.where = f"{statement.file}: view {statement.name}"

    def refuse(self, what: str) -> UnsupportedView:
        return UnsupportedView(f"{self.where}: SELECT * {what}")

    # ------------------------------------------------------------ queries
    def query(self, node: exp.Expression, ctes: dict[str, list[str]]) -> list[str]:
        """Expand the stars of `node` (a query) in place; returns its output column names."""
        with_ = node.args.get("with_") or node.args.get("with")
        if with_ is not None:
            ctes = dict(ctes)
            for cte in with_.expressions:
                names = self.query(cte.this, ctes)
                declared = [c.name for c in cte.args["alias"].columns] if cte.args.get("alias") else []
                ctes[cte.alias_or_name.lower()] = declared + names[len(declared):]
        if isinstance(node, exp.Subquery):
            return self.query(node.this, ctes)
        if isinstance(node, exp.SetOperation):
            names = self.query(node.left, ctes)
            self.query(node.right, ctes)
            return names
        if not isinstance(node, exp.Select):
            return []
        self._select(node, ctes)
        return [self._name(item) for item in node.expressions]

    def _name(self, item: exp.Expression) -> str:
        return item.alias_or_name if isinstance(item, (exp.Alias, exp.Column)) else ""

    def _select(self, select: exp.Select, ctes: dict[str, list[str]]) -> None:
        for node in select.find_all(exp.Subquery, exp.Exists):  # scalar, IN and EXISTS subqueries
            if node.parent_select is select and not isinstance(node.parent, (exp.From, exp.Join)):
                query = node.this
                if isinstance(query, exp.Query) and not (isinstance(node, exp.Exists) and self._only_stars(query)):
                    self.query(query, ctes)
        if select.args.get("from_") is None:
            sources: dict[str, list[_Entry]] = {}
            entries: list[_Entry] = []
        else:
            sources = {}
            entries = self._from(select.args["from_"].this, select.args.get("joins") or [], ctes, sources)
        if not any(_is_star(item) for item in select.expressions):
            return
        items: list[exp.Expression] = []
        for item in select.expressions:
            items += self._expand(item, entries, sources) if _is_star(item) else [item]
        select.set("expressions", items)

    def _only_stars(self, query: exp.Expression) -> bool:
        """EXISTS (SELECT * …): its columns mean nothing, so it stays as written."""
        return isinstance(query, exp.Select) and all(_is_star(i) for i in query.expressions)

    # ------------------------------------------------------------ FROM and joins
    def _from(self, first: exp.Expression, joins: list[exp.Join], ctes: dict[str, list[str]],
              sources: dict[str, list[_Entry]]) -> list[_Entry]:
        entries = self._source(first, ctes, sources)
        for join in joins:
            right = self._source(join.this, ctes, sources)
            merged = [i.name for i in join.args.get("using") or []]
            if join.args.get("method") == "NATURAL":
                lefts = {e.name.lower() for e in entries}
                merged = [e.name for e in right if e.name.lower() in lefts]
            entries = self._merge(entries, right, merged) if merged else entries + right
        return entries

    def _merge(self, left: list[_Entry], right: list[_Entry], merged: list[str]) -> list[_Entry]:
        low = {m.lower() for m in merged}
        rest = [e for e in right if e.name.lower() not in low]
        if self.using_first:
            return [_Entry(m, None) for m in merged] + [e for e in left if e.name.lower() not in low] + rest
        return [_Entry(e.name, None) if e.name.lower() in low else e for e in left] + rest

    def _source(self, node: exp.Expression, ctes: dict[str, list[str]], sources: dict[str, list[_Entry]]) -> list[_Entry]:
        """The columns of one FROM item, each read through its alias (a join nest: its tables' columns)."""
        joins = node.args.get("joins") if isinstance(node, (exp.Table, exp.Subquery)) else None
        if joins:  # inside a join nest: its first item (expanded in place), then the joins that follow it
            node.set("joins", None)
            try:
                return self._from(node, joins, ctes, sources)
            finally:
                node.set("joins", joins)
        alias = node.args.get("alias")
        nest = isinstance(node, exp.Subquery) and isinstance(node.unnest(), exp.Table)
        if nest and not alias:  # (a JOIN b): its tables' columns, each read through its own alias
            return self._source(node.this, ctes, sources)
        if nest:  # (a JOIN b) AS x
            names = [e.name for e in self._source(node.this, ctes, {})]
        elif isinstance(node, exp.Subquery):
            names = self.query(node.this, ctes)
        elif isinstance(node, exp.Table) and node.name:
            names = self._table(node, ctes)
        else:
            names = []
        declared = [c.name for c in alias.columns] if isinstance(alias, exp.TableAlias) else []
        names = declared + names[len(declared):]
        if not names or not all(names):
            what = node.sql()[:80]
            raise self.refuse(f"over {what}: its columns have no names here (name them: AS t(a, b), or alias each "
                              f"expression, or list the view's columns)")
        qualifier = alias.this if isinstance(alias, exp.TableAlias) and alias.this else (
            node.this if isinstance(node, exp.Table) else None)
        entries = [_Entry(n, qualifier) for n in names]
        if qualifier is not None:
            sources[qualifier.name.lower()] = entries
        return entries

    def _table(self, table: exp.Table, ctes: dict[str, list[str]]) -> list[str]:
        low = table.name.lower()
        if not table.args.get("db") and low in ctes:
            return ctes[low]
        declared = self.schema.table(table.name)
        if declared is not None and declared.view is None:
            return list(declared.column_names)
        if low in self.views:
            return list(self.views[low])
        raise UnknownReference(f"{self.where}: unknown table {table.name} (not declared in {self.schema.file} "
                               f"and not a summary view)")

    # ------------------------------------------------------------ the select list
    def _expand(self, item: exp.Expression, entries: list[_Entry], sources: dict[str, list[_Entry]]) -> list[exp.Expression]:
        star = item if isinstance(item, exp.Star) else item.this
        if isinstance(item, exp.Column):
            qualifier = item.table.lower()
            if qualifier not in sources:
                raise UnknownReference(f"{self.where}: {item.sql()}: no table or alias {item.table} in its FROM")
            entries = sources[qualifier]
        if not entries:
            raise self.refuse("without a FROM (list the columns)")
        if star.args.get("rename"):
            raise self.refuse("RENAME (list the columns, each with its AS name)")
        skip = {c.name.lower() for c in star.args.get("except_") or star.args.get("except") or []}
        unknown = skip - {e.name.lower() for e in entries}
        if unknown:
            raise UnknownReference(f"{self.where}: SELECT * EXCLUDE names {', '.join(sorted(unknown))}, which "
                                   f"the star does not select")
        swap = {a.alias.lower(): a for a in star.args.get("replace") or []}
        out: list[exp.Expression] = []
        for e in entries:
            if e.name.lower() in skip:
                continue
            if e.name.lower() in swap:
                out.append(swap[e.name.lower()].copy())
                continue
            column = exp.Column(this=exp.to_identifier(e.name))
            if e.source is not None:
                column.set("table", e.source.copy())
            out.append(column)
        return out
