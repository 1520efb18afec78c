"""Pass 2: sql/summaries/<name>.sql -> View (tables, FK join tree, filter, group-by keys, aggregates).

Only what the summary-delta method (paper 001, Section 4) maintains is accepted: one fact table
joined to dimensions through foreign-key equi-joins, a conjunctive WHERE filter, plain group-by
columns, and COUNT/SUM/AVG/MIN/MAX over scalar expressions. Everything else is refused with an
UnsupportedView that names the file, the view and the construct.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types

from lattice import types
from lattice.errors import UnknownReference, UnsupportedView
from lattice.ir import ColumnRef, GroupKey, Join, Schema, Table

AGGREGATES = {exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}


@dataclass(frozen=True)
class ParsedAggregate:
    """A select-list aggregate before normalization: func over qualified argument SQL (None = *)."""

    output: str
    func: str  # count | sum | avg | min | max
    arg_sql: str | None
    arg_type: str | None


@dataclass(frozen=True)
class ParsedView:
    name: str
    file: str
    sql: str
    fact: str
    tables: tuple[str, ...]
    joins: tuple[Join, ...]
    where: str | None
    keys: tuple[GroupKey, ...]
    aggregates: tuple[ParsedAggregate, ...]
    order: tuple[str, ...]  # declared output names in select order
    quoted: tuple[str, ...] = ()  # view/column names written "quoted" (case-sensitive in PostgreSQL)


def parse_view(text: str, file: str, schema: Schema) -> ParsedView:
    return _ViewParser(text, file, schema).parse()


class _ViewParser:
    def __init__(self, text: str, file: str, schema: Schema):
        self.text, self.file, self.schema = text, file, schema
        self.name = "?"
        self.aliases: dict[str, Table] = {}  # lower alias -> table
        self.quoted: set[str] = set()  # names written "quoted": PostgreSQL keeps their case

    # ------------------------------------------------------------ errors
    def unsupported(self, construct: str) -> UnsupportedView:
        return UnsupportedView(f"{self.file}: view {self.name}: unsupported {construct}")

    def unknown(self, what: str) -> UnknownReference:
        return UnknownReference(f"{self.file}: view {self.name}: {what}")

    # ------------------------------------------------------------ top level
    def parse(self) -> ParsedView:
        try:
            statements = [s for s in sqlglot.parse(self.text) if s is not None]
        except sqlglot.errors.ParseError as e:
            raise UnsupportedView(f"{self.file}: cannot parse SQL: {str(e).splitlines()[0]}") from None
        if len(statements) != 1 or not isinstance(statements[0], exp.Create) or statements[0].kind != "VIEW":
            names = [s.this.this.name if isinstance(s.this, exp.Schema) else s.this.name
                     for s in statements if isinstance(s, exp.Create) and s.this is not None]
            found = f" (found {len(statements)} statements: {', '.join(names)})" if names else ""
            raise UnsupportedView(f"{self.file}: expected exactly one CREATE VIEW name AS SELECT ... statement{found}")
        create = statements[0]
        target = create.this
        column_list: list[str] = []
        if isinstance(target, exp.Schema):
            column_list = [i.name for i in target.expressions]
            self._note_quoted(*target.expressions)
            target = target.this
        self.name = target.name
        self._note_quoted(target.args.get("this"))
        select = create.expression
        if not isinstance(select, exp.Select):
            raise self.unsupported(f"query ({type(select).__name__.upper()}); only SELECT ... GROUP BY is maintained")
        self._refuse_constructs(select)
        self._collect_tables(select)
        joins, filters = self._joins_and_filters(select)
        fact, ordered, joins = self._join_tree(joins)
        keys_by_col, order, aggs = self._select_list(select, column_list)
        keys = self._group_keys(select, keys_by_col)
        where = None
        if filters:
            where = " AND ".join(f"({f})" for f in filters)
        return ParsedView(
            name=self.name,
            file=self.file,
            sql=select.sql(),
            fact=fact,
            tables=ordered,
            joins=joins,
            where=where,
            keys=keys,
            aggregates=tuple(aggs),
            order=tuple(order),
            quoted=tuple(sorted(self.quoted)),
        )

    def _note_quoted(self, *nodes) -> None:
        for node in nodes:
            ident = node.this if isinstance(node, exp.Column) else node
            if isinstance(ident, exp.Identifier) and ident.quoted:
                self.quoted.add(ident.name)

    def _refuse_constructs(self, select: exp.Select) -> None:
        if select.args.get("distinct"):
            raise self.unsupported("SELECT DISTINCT")
        if select.args.get("having"):
            raise self.unsupported("HAVING")
        for key, label in (("order", "ORDER BY"), ("limit", "LIMIT"), ("offset", "OFFSET"), ("with_", "WITH"), ("with", "WITH")):
            if select.args.get(key):
                raise self.unsupported(label)
        if select.find(exp.Window):
            raise self.unsupported("window function (OVER)")
        for sub in select.find_all(exp.Subquery, exp.Exists, exp.In):
            if isinstance(sub, exp.In) and not sub.args.get("query"):
                continue
            raise self.unsupported("subquery")
        if select.find(exp.Union, exp.Intersect, exp.Except):
            raise self.unsupported("set operation")
        if not select.args.get("group"):
            raise self.unsupported("view without GROUP BY (a summary table aggregates: add GROUP BY)")

    def _collect_tables(self, select: exp.Select) -> None:
        sources = [select.args["from_"].this] if select.args.get("from_") else []
        for j in select.args.get("joins") or []:
            sources.append(j.this)
        for src in sources:
            if not isinstance(src, exp.Table):
                raise self.unsupported("subquery in FROM")
            table = self.schema.table(src.name)
            if table is None:
                raise self.unknown(f"unknown table {src.name} (not declared in {self.schema.file})")
            alias = (src.alias or src.name).lower()
            if alias in self.aliases:
                raise self.unsupported(f"self-join or repeated table {src.name}")
            self.aliases[alias] = table

    # ------------------------------------------------------------ joins and filters
    def _joins_and_filters(self, select: exp.Select) -> tuple[list[Join], list[str]]:
        conjuncts: list[exp.Expression] = []
        for j in select.args.get("joins") or []:
            side, kind = (j.side or "").upper(), (j.kind or "").upper()
            if side in ("LEFT", "RIGHT", "FULL") or kind in ("OUTER", "CROSS", "SEMI", "ANTI"):
                raise self.unsupported(f"{side or kind} JOIN (only inner foreign-key joins are maintained)")
            if j.args.get("using"):
                raise self.unsupported("JOIN ... USING (write JOIN ... ON fact.fk = dim.key)")
            if j.args.get("on"):
                conjuncts.extend(_conjuncts(j.args["on"]))
        if select.args.get("where"):
            conjuncts.extend(_conjuncts(select.args["where"].this))
        joins, filters = [], []
        for c in conjuncts:
            join = self._as_join_predicate(c)
            if join is not None:
                joins.append(join)
            else:
                if c.find(exp.AggFunc):
                    raise self.unsupported("aggregate in WHERE")
                filters.append(self._qualify(c).sql())
        return joins, filters

    def _as_join_predicate(self, c: exp.Expression) -> tuple[ColumnRef, ColumnRef] | None:
        if not (isinstance(c, exp.EQ) and isinstance(c.this, exp.Column) and isinstance(c.expression, exp.Column)):
            return None
        a, b = self._resolve(c.this), self._resolve(c.expression)
        if a.table == b.table:
            return None
        return (a, b)

    def _join_tree(self, pairs: list[tuple[ColumnRef, ColumnRef]]) -> tuple[str, tuple[str, ...], tuple[Join, ...]]:
        """Match equi-join predicates to declared FKs and check they form a tree rooted at the fact."""
        by_edge: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for a, b in pairs:
            edge = self._fk_direction(a, b)
            if edge is None:
                raise self.unsupported(
                    f"join {a.table}.{a.column} = {b.table}.{b.column}: not a declared FOREIGN KEY "
                    f"(declare it in {self.schema.file}; only foreign-key equi-joins are maintained)"
                )
            child, parent, ccol, pcol = edge
            by_edge.setdefault((child, parent), []).append((ccol, pcol))
        joins = []
        for (child, parent), cols in by_edge.items():
            fk = self._matching_fk(child, parent, cols)
            joins.append(Join(child, parent, fk.columns, fk.ref_columns))
        tables = [t.name for t in self.aliases.values()]
        parents = {j.parent for j in joins}
        roots = [t for t in tables if t not in parents]
        if len(roots) != 1:
            if len(tables) > 1 and len(joins) < len(tables) - 1:
                raise self.unsupported("cross product: every table must be joined to the fact through a foreign key")
            raise self.unsupported("join shape: the tables must form a tree of foreign keys rooted at one fact table")
        fact = roots[0]
        seen = {fact}
        order = [fact]
        ordered_joins = []
        frontier = [fact]
        while frontier:
            t = frontier.pop(0)
            for j in joins:
                if j.child == t and j.parent not in seen:
                    seen.add(j.parent)
                    order.append(j.parent)
                    ordered_joins.append(j)
                    frontier.append(j.parent)
        if len(order) != len(tables) or len(ordered_joins) != len(joins):
            raise self.unsupported("join shape: the tables must form a tree of foreign keys rooted at one fact table")
        return fact, tuple(order), tuple(ordered_joins)

    def _fk_direction(self, a: ColumnRef, b: ColumnRef):
        for child, parent in ((a, b), (b, a)):
            ct = self.schema.table(child.table)
            for fk in ct.foreign_keys:
                if fk.ref_table.lower() != parent.table.lower():
                    continue
                for cc, pc in zip(fk.columns, fk.ref_columns):
                    if cc.lower() == child.column.lower() and pc.lower() == parent.column.lower():
                        return child.table, parent.table, cc, pc
        return None

    def _matching_fk(self, child: str, parent: str, cols: list[tuple[str, str]]):
        got = {(c.lower(), p.lower()) for c, p in cols}
        for fk in self.schema.table(child).foreign_keys:
            want = {(c.lower(), p.lower()) for c, p in zip(fk.columns, fk.ref_columns)}
            if fk.ref_table.lower() == parent.lower() and want == got:
                return fk
        raise self.unsupported(f"join {child} -> {parent}: the ON/WHERE predicates do not equate the whole foreign key")

    # ------------------------------------------------------------ select list and group by
    def _select_list(self, select: exp.Select, column_list: list[str]):
        items = select.expressions
        if column_list and len(column_list) != len(items):
            raise self.unsupported(
                f"column list: CREATE VIEW names {len(column_list)} columns but the SELECT has {len(items)}"
            )
        keys_by_col: dict[ColumnRef, str] = {}
        order: list[str] = []
        aggs: list[ParsedAggregate] = []
        for pos, item in enumerate(items):
            inner = item.this if isinstance(item, exp.Alias) else item
            if isinstance(inner, exp.Star):
                raise self.unsupported("SELECT * (list the group-by columns and aggregates)")
            name = column_list[pos] if column_list else (item.alias_or_name if isinstance(item, exp.Alias) else None)
            if not column_list:
                self._note_quoted(item.args.get("alias") if isinstance(item, exp.Alias) else inner)
            if isinstance(inner, exp.Column):
                ref = self._resolve(inner)
                out = name or ref.column
                if ref in keys_by_col:
                    raise self.unsupported(
                        f"column {ref.table}.{ref.column} selected twice (as {keys_by_col[ref]} and {out}); select it once"
                    )
                keys_by_col[ref] = out
                order.append(out)
                continue
            agg_type = next((k for k in AGGREGATES if isinstance(inner, k)), None)
            if agg_type is None:
                if inner.find(exp.AggFunc):
                    raise self.unsupported(f"expression over aggregates ({inner.sql()}); select each aggregate by itself")
                raise self.unsupported(f"select item {inner.sql()}: only group-by columns and aggregates are maintained")
            if not name:
                raise self.unsupported(f"aggregate {inner.sql()} without a name (add AS <name>)")
            aggs.append(self._aggregate(name, AGGREGATES[agg_type], inner))
            order.append(name)
        lowered = [o.lower() for o in order]
        dup = next((o for o in order if lowered.count(o.lower()) > 1), None)
        if dup:
            raise self.unsupported(f"duplicate output column {dup}")
        return keys_by_col, order, aggs

    def _aggregate(self, output: str, func: str, node: exp.Expression) -> ParsedAggregate:
        arg = node.this
        if isinstance(arg, exp.Distinct) or node.args.get("distinct"):
            raise self.unsupported(f"{func.upper()}(DISTINCT ...) in {output}")
        if func == "count" and (arg is None or isinstance(arg, exp.Star)):
            return ParsedAggregate(output, "count", None, None)
        if arg is None or isinstance(arg, exp.Star):
            raise self.unsupported(f"{func.upper()}(*) in {output}")
        if arg.find(exp.AggFunc):
            raise self.unsupported(f"nested aggregate in {output}")
        if node.args.get("expressions"):
            raise self.unsupported(f"multi-argument {func.upper()} in {output}")
        qualified = self._qualify(arg)
        return ParsedAggregate(output, func, qualified.sql(), self._type_of(qualified, output))

    def _group_keys(self, select: exp.Select, keys_by_col: dict[ColumnRef, str]) -> tuple[GroupKey, ...]:
        keys = []
        grouped: set[ColumnRef] = set()
        for g in select.args["group"].expressions:
            if not isinstance(g, exp.Column):
                raise self.unsupported(f"GROUP BY expression {g.sql()} (group by plain columns)")
            ref = self._resolve(g)
            if ref in grouped:
                continue
            if ref not in keys_by_col:
                self._note_quoted(g)
            grouped.add(ref)
            col = self.schema.table(ref.table).column(ref.column)
            declared = ref in keys_by_col
            keys.append(GroupKey(keys_by_col.get(ref, ref.column), ref, col.type, declared))
        for ref, out in keys_by_col.items():
            if ref not in grouped:
                raise self.unsupported(f"column {out} is selected but not in GROUP BY")
        names = [k.name.lower() for k in keys]
        if len(set(names)) != len(names):
            raise self.unsupported("two group-by columns with the same name (alias one of them)")
        return tuple(keys)

    # ------------------------------------------------------------ columns
    def _resolve(self, col: exp.Column) -> ColumnRef:
        name = col.name
        if col.table:
            table = self.aliases.get(col.table.lower())
            if table is None:
                raise self.unknown(f"column {col.table}.{name}: unknown table or alias {col.table}")
            c = table.column(name)
            if c is None:
                raise self.unknown(f"unknown column {col.table}.{name} (table {table.name} has {', '.join(table.column_names)})")
            return ColumnRef(table.name, c.name)
        hits = [(t, t.column(name)) for t in self.aliases.values() if t.column(name) is not None]
        if not hits:
            raise self.unknown(f"unknown column {name} (not in {', '.join(t.name for t in self.aliases.values())})")
        if len(hits) > 1:
            raise UnsupportedView(
                f"{self.file}: view {self.name}: ambiguous column {name} (in {', '.join(t.name for t, _ in hits)}); qualify it"
            )
        return ColumnRef(hits[0][0].name, hits[0][1].name)

    def _qualify(self, e: exp.Expression) -> exp.Expression:
        def qualify(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Column):
                ref = self._resolve(node)
                return exp.column(ref.column, table=ref.table, quoted=True)
            return node

        return e.copy().transform(qualify)

    def _type_of(self, qualified: exp.Expression, output: str) -> str:
        exact = _exact_numeric_type(qualified, self.schema)
        if exact is not None:
            return exact
        mapping = {t.name: {c.name: c.type for c in t.columns} for t in self.aliases.values()}
        try:
            query = exp.select(qualified.copy()).from_(exp.table_(next(iter(mapping)), quoted=True))
            for name in list(mapping)[1:]:
                query = query.join(exp.table_(name, quoted=True))
            annotated = annotate_types(query, schema=mapping)
            t = types.from_datatype(annotated.expressions[0].type)
        except Exception:  # sqlglot cannot type it: keep it exact-agnostic
            t = None
        if t is None:
            raise self.unsupported(f"argument of {output}: cannot determine the type of {qualified.sql()}")
        if t.startswith("DECIMAL"):
            scale = _decimal_scale(qualified, self.schema)
            t = f"DECIMAL(38,{scale})" if scale is not None else "DOUBLE"
        return t


def _exact_numeric_type(e: exp.Expression, schema: Schema) -> str | None:
    """INTEGER/BIGINT or DECIMAL(38,s) for +, -, * over integer and decimal columns and numeric
    literals (Spark and DuckDB read 1.5 as a decimal literal); None for anything else."""
    leaves = list(e.find_all(exp.Column, exp.Literal))
    allowed = (exp.Column, exp.Literal, exp.Paren, exp.Neg, exp.Mul, exp.Add, exp.Sub, exp.Identifier)
    if not leaves or not all(isinstance(n, allowed) for n in e.walk()):
        return None
    fams = []
    for leaf in leaves:
        if isinstance(leaf, exp.Column):
            fams.append(types.family(schema.table(leaf.table).column(leaf.name).type))
        elif leaf.is_string or "e" in leaf.this.lower():
            return None
        else:
            fams.append("decimal" if "." in leaf.this else "integer")
    if any(f not in ("integer", "decimal") for f in fams):
        return None
    if all(f == "integer" for f in fams):
        cols = [schema.table(c.table).column(c.name).type for c in e.find_all(exp.Column)]
        return "BIGINT" if "BIGINT" in cols else "INTEGER"
    scale = _decimal_scale(e, schema)
    return f"DECIMAL(38,{scale})" if scale is not None else None


def _conjuncts(e: exp.Expression) -> list[exp.Expression]:
    e = e.unnest() if isinstance(e, exp.Paren) else e
    if isinstance(e, exp.And):
        return _conjuncts(e.this) + _conjuncts(e.expression)
    return [e]


def _decimal_scale(e: exp.Expression, schema: Schema) -> int | None:
    """Scale of a decimal expression (Spark and DuckDB agree for these shapes); None = unknown."""
    if isinstance(e, exp.Paren):
        return _decimal_scale(e.this, schema)
    if isinstance(e, exp.Column):
        t = schema.table(e.table).column(e.name).type
        fam = types.family(t)
        return types.decimal_scale(t) if fam == "decimal" else (0 if fam == "integer" else None)
    if isinstance(e, exp.Literal) and not e.is_string:
        return len(e.this.split(".")[1]) if "." in e.this else 0
    if isinstance(e, exp.Neg):
        return _decimal_scale(e.this, schema)
    if isinstance(e, exp.Mul):
        a, b = _decimal_scale(e.this, schema), _decimal_scale(e.expression, schema)
        return None if a is None or b is None else a + b
    if isinstance(e, (exp.Add, exp.Sub)):
        a, b = _decimal_scale(e.this, schema), _decimal_scale(e.expression, schema)
        return None if a is None or b is None else max(a, b)
    return None
