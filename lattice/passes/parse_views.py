"""Pass 2: sql/summaries/<name>.sql -> ParsedView, for the views the delta mode keeps (paper 001, 4).

The delta mode covers one fact table joined to dimensions through foreign-key equi-joins, a
conjunctive WHERE filter, group keys that are columns or any deterministic scalar expression of the
joined row (EXTRACT(YEAR FROM date), CASE buckets, ...), no GROUP BY at all (a grand total: one
row), COUNT/SUM/AVG/MIN/MAX over scalar expressions, and HAVING over those aggregates (every group is
stored; the serving view applies the condition). Valid SQL outside that class raises NotIncremental,
whose message (naming file, view and construct) becomes the reason the view is kept by recompute
(lattice/passes/recompute.py). What is not valid at all raises UnsupportedView or UnknownReference.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types

from lattice import types
from lattice.errors import NotIncremental, UnknownReference, UnsupportedView
from lattice.ir import EXPRESSION, ColumnRef, GroupKey, Join, Schema, Table, UserAggregate
from lattice.passes.functions import nondeterministic
from lattice.warehouse_sql import duckdb_decimal_type

AGGREGATES = {exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}
HAVING_AGGREGATE = "__ns_agg__"  # HAVING's aggregates become columns named __ns_agg__<output> (normalize maps them)
AUXILIARY_SUFFIX = "__ns_aux"  # an auxiliary view's name ends with it (lattice/passes/auxiliary.py)
HOLISTIC = "holistic"  # ParsedAggregate.func prefix of a holistic aggregate: "holistic:<function>" (holistic())


def holistic(node: exp.Expression, aggregates: tuple[UserAggregate, ...] = ()) -> tuple[str, exp.Expression] | None:
    """(function, argument) of a holistic aggregate written in a form every engine evaluates alike:
    MEDIAN(x) and PERCENTILE_CONT(p) WITHIN GROUP (ORDER BY x) -> ("percentile_cont <p>", x),
    PERCENTILE_DISC(p) WITHIN GROUP (ORDER BY x) -> ("percentile_disc <p>", x), MODE() WITHIN GROUP
    (ORDER BY x) -> ("mode", x), a user-defined aggregate name(x) -> ("uda <name>", x); None for anything
    else (a descending order, p not a literal in [0, 1])."""
    if isinstance(node, exp.Anonymous) and len(node.expressions) == 1:
        uda = user_aggregate(node.name, aggregates)
        return (f"uda {uda.name}", node.expressions[0]) if uda is not None else None
    if isinstance(node, exp.Median) and node.this is not None and not isinstance(node.this, exp.Distinct):
        return "percentile_cont 0.5", node.this
    if not isinstance(node, exp.WithinGroup) or not isinstance(node.expression, exp.Order):
        return None
    order = node.expression.expressions
    if len(order) != 1 or order[0].args.get("desc"):
        return None
    arg = order[0].this
    if isinstance(node.this, exp.Mode) and node.this.this is None:
        return "mode", arg
    if isinstance(node.this, (exp.PercentileCont, exp.PercentileDisc)):
        p = node.this.this
        if isinstance(p, exp.Literal) and not p.is_string and 0 <= float(p.this) <= 1:
            func = "percentile_cont" if isinstance(node.this, exp.PercentileCont) else "percentile_disc"
            return f"{func} {float(p.this)!r}", arg
    return None


def grouping_sets(group: exp.Group) -> str:
    """'GROUPING SETS', 'CUBE' or 'ROLLUP' when the GROUP BY has one ('' otherwise): sqlglot keeps them
    among the GROUP BY's items (older versions in args of their own)."""
    for node in [*group.expressions, *(group.args.get(k) for k in ("grouping_sets", "cube", "rollup"))]:
        for kind, label in ((exp.GroupingSets, "GROUPING SETS"), (exp.Cube, "CUBE"), (exp.Rollup, "ROLLUP")):
            if isinstance(node, kind) or (isinstance(node, list) and node and isinstance(node[0], kind)):
                return label
    return ""


def user_aggregate(name: str, aggregates: tuple[UserAggregate, ...]) -> UserAggregate | None:
    return next((a for a in aggregates if a.name.lower() == name.lower()), None)


@dataclass(frozen=True)
class ParsedAggregate:
    """A select-list (or HAVING) aggregate before normalization: func over qualified argument SQL (None = *)."""

    output: str
    func: str  # count | sum | avg | min | max | holistic:<function> (holistic())
    arg_sql: str | None
    arg_type: str | None
    declared: bool = True  # False: only HAVING reads it (a hidden stored aggregate)
    user: UserAggregate | None = None  # a user-defined aggregate's declaration
    result_type: str | None = None  # PERCENTILE_CONT of a DECIMAL: the DECIMAL(p,s) the warehouse (DuckDB) gives


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
    having: str | None = None  # neutral SQL over key names and __ns_agg__<output> columns
    key_aliases: tuple[tuple[str, str], ...] = ()  # (output, key name): a group key selected a second time


@dataclass(frozen=True)
class ViewStatement:
    """The one CREATE VIEW name [(columns)] AS <query> of a view file."""

    name: str
    file: str
    columns: tuple[str, ...]  # the column list, if written
    query: exp.Expression
    quoted: tuple[str, ...]  # the view name and column-list names written "quoted"


def read_view(text: str, file: str, dialect: str | None = None) -> ViewStatement:
    """Parse a view file, written in the warehouse's SQL dialect (None: nightshift's neutral SQL): exactly
    one CREATE VIEW statement (anything else is refused)."""
    try:
        statements = [s for s in sqlglot.parse(text, read=dialect) if s is not None]
    except sqlglot.errors.ParseError as e:
        raise UnsupportedView(f"{file}: cannot parse SQL: {str(e).splitlines()[0]}") from None
    if len(statements) != 1 or not isinstance(statements[0], exp.Create) or statements[0].kind != "VIEW":
        names = [s.this.this.name if isinstance(s.this, exp.Schema) else s.this.name
                 for s in statements if isinstance(s, exp.Create) and s.this is not None]
        found = f" (found {len(statements)} statements: {', '.join(names)})" if names else ""
        raise UnsupportedView(f"{file}: expected exactly one CREATE VIEW name AS SELECT ... statement{found}")
    create = statements[0]
    target, columns, quoted = create.this, [], set()
    if isinstance(target, exp.Schema):
        columns = [i.name for i in target.expressions]
        quoted |= {i.name for i in target.expressions if isinstance(i, exp.Identifier) and i.quoted}
        target = target.this
    ident = target.args.get("this")
    if isinstance(ident, exp.Identifier) and ident.quoted:
        quoted.add(ident.name)
    return ViewStatement(target.name, file, tuple(columns), create.expression, tuple(sorted(quoted)))


def parse_view(statement: ViewStatement, schema: Schema, views: frozenset[str] = frozenset(),
               aggregates: tuple[UserAggregate, ...] = ()) -> ParsedView:
    """`views`: the lower-case names of every summary view of the project (a view may read another);
    `aggregates`: the user-defined aggregates of nightshift.toml [aggregates]."""
    return _ViewParser(statement, schema, views, aggregates).parse()


def fact_of(statement: ViewStatement, schema: Schema, views: frozenset[str] = frozenset()) -> str | None:
    """The fact table of a view: the root of its tree of foreign-key joins; None when its FROM is not such
    a tree of declared tables (parse_view then says why)."""
    select = statement.query
    if not isinstance(select, exp.Select):
        return None
    parser = _ViewParser(statement, schema, views)
    try:
        parser._collect_tables(select)
        return parser._join_tree(parser._joins_and_filters(select)[0])[0]
    except UnsupportedView:
        return None


def is_auxiliary(table: str) -> bool:
    """A table that is an auxiliary view (lattice/passes/auxiliary.py): rows of a fact grouped, weighted."""
    return table.lower().endswith(AUXILIARY_SUFFIX)


class _ViewParser:
    def __init__(self, statement: ViewStatement, schema: Schema, views: frozenset[str],
                 aggregates: tuple[UserAggregate, ...] = ()):
        self.statement, self.schema, self.views, self.aggregates = statement, schema, views, aggregates
        self.file, self.name = statement.file, statement.name
        self.aliases: dict[str, Table] = {}  # lower alias -> table
        self.quoted: set[str] = set(statement.quoted)  # names written "quoted": PostgreSQL keeps their case

    # ------------------------------------------------------------ errors
    def not_incremental(self, construct: str) -> NotIncremental:
        return NotIncremental(f"{self.file}: view {self.name}: {construct}")

    def invalid(self, what: str) -> UnsupportedView:
        return UnsupportedView(f"{self.file}: view {self.name}: {what}")

    def unknown(self, what: str) -> UnknownReference:
        return UnknownReference(f"{self.file}: view {self.name}: {what}")

    # ------------------------------------------------------------ top level
    def parse(self) -> ParsedView:
        select = self.statement.query
        if isinstance(select, (exp.Union, exp.Intersect, exp.Except)):
            raise self.not_incremental(f"set operation ({type(select).__name__.upper()})")
        if not isinstance(select, exp.Select):
            raise self.not_incremental(f"query ({type(select).__name__.upper()}) that is not a SELECT")
        self._refuse_constructs(select)
        self._collect_tables(select)
        joins, filters = self._joins_and_filters(select)
        fact, ordered, joins = self._join_tree(joins)
        self.fact = fact
        group = self._group_by(select)
        if not group and not select.find(exp.AggFunc):
            raise self.not_incremental("a projection without aggregates or GROUP BY (nothing to summarize)")
        keys_by_ref, order, aggs, aliases = self._select_list(select, group)
        keys = self._group_keys(group, keys_by_ref)
        having = self._having(select, keys, aggs)
        where = " AND ".join(f"({f})" for f in filters) if filters else None
        return ParsedView(
            name=self.name, file=self.file, sql=select.sql(), fact=fact, tables=ordered, joins=joins, where=where,
            keys=keys, aggregates=tuple(aggs), order=tuple(order), quoted=tuple(sorted(self.quoted)), having=having,
            key_aliases=tuple(aliases),
        )

    def _note_quoted(self, *nodes) -> None:
        for node in nodes:
            ident = node.this if isinstance(node, exp.Column) else node
            if isinstance(ident, exp.Identifier) and ident.quoted:
                self.quoted.add(ident.name)

    def _refuse_constructs(self, select: exp.Select) -> None:
        if select.args.get("distinct"):
            raise self.not_incremental("SELECT DISTINCT")
        for key, label in (("limit", "LIMIT"), ("offset", "OFFSET"), ("with_", "WITH"), ("with", "WITH")):
            if select.args.get(key):
                raise self.not_incremental(label)
        if select.find(exp.Window):
            raise self.not_incremental("window function (OVER)")
        for sub in select.find_all(exp.Subquery, exp.Exists, exp.In):
            if isinstance(sub, exp.In) and not sub.args.get("query"):
                continue
            if isinstance(sub, exp.Subquery) and isinstance(sub.unnest(), exp.Table):  # (r JOIN s ON …): a join nest
                raise self.not_incremental(f"parenthesized join {sub.sql()[:60]}")
            raise self.not_incremental("subquery")
        if select.find(exp.Union, exp.Intersect, exp.Except):
            raise self.not_incremental("set operation")
        random = nondeterministic(select)
        if random:
            raise self.not_incremental(f"{random} is not deterministic (each night's value differs)")

    def _collect_tables(self, select: exp.Select) -> None:
        sources = [select.args["from_"].this] if select.args.get("from_") else []
        for j in select.args.get("joins") or []:
            sources.append(j.this)
        if not sources:
            raise self.not_incremental("no FROM table")
        for src in sources:
            if not isinstance(src, exp.Table):
                raise self.not_incremental("subquery in FROM")
            table = self.schema.table(src.name)
            if table is None:
                if src.name.lower() in self.views:
                    raise self.not_incremental(f"reads the summary view {src.name}, which is kept by recompute")
                raise self.unknown(f"unknown table {src.name} (not declared in {self.schema.file})")
            alias = (src.alias or src.name).lower()
            if alias in self.aliases:
                raise self.not_incremental(f"self-join or repeated table {src.name}")
            self.aliases[alias] = table

    # ------------------------------------------------------------ joins and filters
    def _joins_and_filters(self, select: exp.Select) -> tuple[list, list[str]]:
        conjuncts: list[exp.Expression] = []
        for j in select.args.get("joins") or []:
            side, kind = (j.side or "").upper(), (j.kind or "").upper()
            if side in ("LEFT", "RIGHT", "FULL") or kind in ("OUTER", "CROSS", "SEMI", "ANTI"):
                raise self.not_incremental(f"{side or kind} JOIN (only inner foreign-key joins are incremental)")
            if j.args.get("using"):
                raise self.not_incremental("JOIN ... USING (write JOIN ... ON fact.fk = dim.key to keep it incremental)")
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
                    raise self.invalid("aggregate in WHERE (use HAVING)")
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
                raise self.not_incremental(
                    f"join {a.table}.{a.column} = {b.table}.{b.column}: not a declared FOREIGN KEY "
                    f"(declare it in {self.schema.file} to keep the view incremental)"
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
                raise self.not_incremental("cross product: a table is not joined to the fact through a foreign key")
            raise self.not_incremental("join shape: the tables do not form a tree of foreign keys rooted at one fact table")
        fact = roots[0]
        seen, order, ordered_joins, frontier = {fact}, [fact], [], [fact]
        while frontier:
            t = frontier.pop(0)
            for j in joins:
                if j.child == t and j.parent not in seen:
                    seen.add(j.parent)
                    order.append(j.parent)
                    ordered_joins.append(j)
                    frontier.append(j.parent)
        if len(order) != len(tables) or len(ordered_joins) != len(joins):
            raise self.not_incremental("join shape: the tables do not form a tree of foreign keys rooted at one fact table")
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
        raise self.not_incremental(f"join {child} -> {parent}: the ON/WHERE predicates do not equate the whole foreign key")

    # ------------------------------------------------------------ GROUP BY
    def _group_by(self, select: exp.Select) -> list[tuple[ColumnRef, exp.Expression]]:
        """The GROUP BY items as attributes (a column, or a computed expression), in order, without
        repeats; an alias or ordinal names the select item it refers to (SQL's resolution order:
        a column of the FROM tables first, then a select alias)."""
        group = select.args.get("group")
        if not group:
            return []
        sets = grouping_sets(group)
        if sets:
            raise self.not_incremental(f"GROUP BY {sets}: each grouping set is a summary of its own, which the "
                                       f"incremental modes do not keep yet (the view is recomputed whole)")
        items = [i.this if isinstance(i, exp.Alias) else i for i in select.expressions]
        aliases = {i.alias.lower(): i.this for i in select.expressions if isinstance(i, exp.Alias)}
        out: dict[ColumnRef, exp.Expression] = {}
        for g in group.expressions:
            if isinstance(g, exp.Literal) and g.is_int:
                pos = int(g.this)
                if not 1 <= pos <= len(items):
                    raise self.invalid(f"GROUP BY {pos}: the select list has {len(items)} items")
                g = items[pos - 1]
            elif isinstance(g, exp.Column) and not g.table and not self._is_column(g.name) and g.name.lower() in aliases:
                g = aliases[g.name.lower()]
            if g.find(exp.AggFunc):
                raise self.invalid(f"aggregate in GROUP BY ({g.sql()})")
            ref = self._attribute(g)
            out.setdefault(ref, g)
            if isinstance(g, exp.Column):
                self._note_quoted(g)
        return list(out.items())

    def _is_column(self, name: str) -> bool:
        return any(t.column(name) is not None for t in self.aliases.values())

    def _attribute(self, e: exp.Expression) -> ColumnRef:
        """A column as itself; any other scalar expression as ColumnRef(EXPRESSION, its qualified SQL)."""
        if isinstance(e, exp.Paren):
            return self._attribute(e.this)
        if isinstance(e, exp.Column):
            return self._resolve(e)
        if not e.find(exp.Column):
            raise self.not_incremental(f"constant group key {e.sql()}")
        return ColumnRef(EXPRESSION, self._qualify(e).sql())

    # ------------------------------------------------------------ the select list
    def _select_list(self, select: exp.Select, group: list[tuple[ColumnRef, exp.Expression]]):
        column_list = self.statement.columns
        items = select.expressions
        if len(column_list) > len(items):  # fewer is SQL: the rest keep the select list's names
            raise self.invalid(f"column list: CREATE VIEW names {len(column_list)} columns but the SELECT has {len(items)}")
        grouped = {ref for ref, _ in group}
        keys_by_ref: dict[ColumnRef, str] = {}
        aliases: list[tuple[str, str]] = []  # (a second output name, the key's name)
        order: list[str] = []
        aggs: list[ParsedAggregate] = []
        for pos, item in enumerate(items):
            inner = item.this if isinstance(item, exp.Alias) else item
            if isinstance(inner, exp.Star):
                raise self.not_incremental("SELECT * (list the group-by columns and aggregates)")
            listed = pos < len(column_list)
            name = column_list[pos] if listed else (item.alias_or_name if isinstance(item, exp.Alias) else None)
            if not listed:
                self._note_quoted(item.args.get("alias") if isinstance(item, exp.Alias) else inner)
            agg_type = next((k for k in AGGREGATES if isinstance(inner, k)), None)
            kept = holistic(inner, self.aggregates)
            if kept is not None:
                if not name:
                    raise self.not_incremental(f"aggregate {inner.sql()} without a name (add AS <name>)")
                aggs.append(self._holistic(name, *kept, inner))
                order.append(name)
                continue
            if agg_type is not None:
                if not name:
                    raise self.not_incremental(f"aggregate {inner.sql()} without a name (add AS <name>)")
                aggs.append(self._aggregate(name, AGGREGATES[agg_type], inner))
                order.append(name)
                continue
            if isinstance(inner, exp.AggFunc):
                raise self.not_incremental(f"aggregate {_func_name(inner)} in {name or inner.sql()}")
            if inner.find(exp.AggFunc):
                raise self.not_incremental(f"expression over aggregates ({inner.sql()})")
            ref = self._attribute(inner)
            out = name or (ref.column if not ref.is_expression else None)
            if out is None:
                raise self.not_incremental(f"select item {inner.sql()} without a name (add AS <name>)")
            if ref not in grouped:
                if group and all(c in grouped for c in self._columns(inner)):
                    raise self.not_incremental(f"select item {inner.sql()}: an expression over group keys that is not "
                                               f"itself a group key (group by it to keep the view incremental)")
                raise self.invalid(f"column {out} is selected but not in GROUP BY")
            if ref in keys_by_ref:  # one group key, served under a second name too
                aliases.append((out, keys_by_ref[ref]))
            else:
                keys_by_ref[ref] = out
            order.append(out)
        lowered = [o.lower() for o in order]
        dup = next((o for o in order if lowered.count(o.lower()) > 1), None)
        if dup:
            raise self.invalid(f"duplicate output column {dup}")
        return keys_by_ref, order, aggs, aliases

    def _columns(self, e: exp.Expression) -> list[ColumnRef]:
        return [self._resolve(c) for c in e.find_all(exp.Column)]

    def _aggregate(self, output: str, func: str, node: exp.Expression, declared: bool = True) -> ParsedAggregate:
        arg = node.this
        if isinstance(arg, exp.Distinct) and len(arg.expressions) == 1 and func in ("count", "sum", "avg") \
                and is_auxiliary(self.fact):  # over an auxiliary view: each changed group's value from its rows
            return self._holistic(output, f"distinct {func}", arg.expressions[0], node)
        if isinstance(arg, exp.Distinct) or node.args.get("distinct"):
            raise self.not_incremental(f"{func.upper()}(DISTINCT ...) in {output} (a holistic aggregate)")
        if func == "count" and (arg is None or isinstance(arg, exp.Star)):
            return ParsedAggregate(output, "count", None, None, declared)
        if arg is None or isinstance(arg, exp.Star):
            raise self.invalid(f"{func.upper()}(*) in {output}")
        if arg.find(exp.AggFunc):
            raise self.invalid(f"nested aggregate in {output}")
        if node.args.get("expressions"):
            raise self.not_incremental(f"multi-argument {func.upper()} in {output}")
        qualified = self._qualify(arg)
        return ParsedAggregate(output, func, qualified.sql(), self._type_of(qualified, f"argument of {output}"), declared)

    def _holistic(self, output: str, func: str, arg: exp.Expression, node: exp.Expression) -> ParsedAggregate:
        """A holistic aggregate is kept only over an auxiliary view (the group's values with their
        multiplicities m, paper 002); over any other table the view is not incremental."""
        qualified = self._qualify(arg)
        arg_type = self._type_of(qualified, f"argument of {output}")
        result_type = None
        if func.startswith("percentile_cont") and types.family(arg_type) == "decimal":
            # DuckDB keeps the argument's DECIMAL(p,s) (lattice/warehouse_sql.py); PostgreSQL's reads a DOUBLE
            result_type = duckdb_decimal_type(qualified, self._declared_type) or arg_type
        elif func.startswith("percentile_cont") and types.family(arg_type) not in ("integer", "float"):
            raise self.invalid(f"{output}: {_func_name(node.this if isinstance(node, exp.WithinGroup) else node)} of "
                               f"a {arg_type} is not translated; write it over a number")
        if not is_auxiliary(self.fact):
            raise self.not_incremental(f"{_func_name(node.this if isinstance(node, exp.WithinGroup) else node)} in "
                                       f"{output} (a holistic aggregate)")
        user = user_aggregate(func.split()[1], self.aggregates) if func.startswith("uda ") else None
        return ParsedAggregate(output, f"{HOLISTIC}:{func}", qualified.sql(), arg_type, user=user,
                               result_type=result_type)

    def _declared_type(self, col: exp.Column) -> str | None:
        """A qualified column's declared type."""
        table = self.schema.table(col.table)
        column = table.column(col.name) if table is not None else None
        return column.type if column is not None else None

    def _group_keys(self, group: list[tuple[ColumnRef, exp.Expression]], keys_by_ref: dict[ColumnRef, str]):
        keys = []
        for n, (ref, node) in enumerate(group, 1):
            declared = ref in keys_by_ref
            if ref.is_expression:
                name = keys_by_ref.get(ref) or f"_ns_key_{n}"
                keys.append(GroupKey(name, ref, self._type_of(self._qualify(node), f"group key {node.sql()}"), declared))
            else:
                col = self.schema.table(ref.table).column(ref.column)
                keys.append(GroupKey(keys_by_ref.get(ref, ref.column), ref, col.type, declared))
        names = [k.name.lower() for k in keys]
        if len(set(names)) != len(names):
            raise self.invalid("two group-by columns with the same name (alias one of them)")
        return tuple(keys)

    # ------------------------------------------------------------ HAVING
    def _having(self, select: exp.Select, keys: tuple[GroupKey, ...], aggs: list[ParsedAggregate]) -> str | None:
        """HAVING as an expression over the group keys (by their names) and aggregates (as
        __ns_agg__<output> columns; an aggregate the select list does not have becomes a hidden one)."""
        having = select.args.get("having")
        if not having:
            return None
        by_ref = {k.ref: k.name for k in keys}
        outputs = {(a.func, a.arg_sql): a.output for a in aggs}
        aliases = {a.output.lower(): HAVING_AGGREGATE + a.output for a in aggs if a.declared}
        aliases |= {k.name.lower(): k.name for k in keys if k.declared}

        def rewrite(node: exp.Expression) -> exp.Expression:
            kind = next((k for k in AGGREGATES if isinstance(node, k)), None)
            if kind is not None:
                parsed = self._aggregate(f"_ns_having_{len(aggs) + 1}", AGGREGATES[kind], node, declared=False)
                name = outputs.get((parsed.func, parsed.arg_sql))
                if name is None:
                    aggs.append(parsed)
                    name = outputs[(parsed.func, parsed.arg_sql)] = parsed.output
                return exp.column(HAVING_AGGREGATE + name, quoted=True)
            if isinstance(node, exp.AggFunc):
                raise self.not_incremental(f"HAVING with aggregate {_func_name(node)}")
            if isinstance(node, exp.Column):
                if not node.table and not self._is_column(node.name) and node.name.lower() in aliases:
                    return exp.column(aliases[node.name.lower()], quoted=True)
                ref = self._resolve(node)
                if ref not in by_ref:
                    raise self.invalid(f"HAVING reads {node.sql()}, which is neither grouped nor aggregated")
                return exp.column(by_ref[ref], quoted=True)
            if node.find(exp.Column) and not node.find(exp.AggFunc) and not isinstance(node, exp.Identifier):
                ref = ColumnRef(EXPRESSION, self._qualify(node).sql()) if self._resolvable(node) else None
                if ref in by_ref:  # a computed group key written out again
                    return exp.column(by_ref[ref], quoted=True)
            return node

        return having.this.copy().transform(rewrite).sql()

    def _resolvable(self, node: exp.Expression) -> bool:
        try:
            self._qualify(node)
            return True
        except UnsupportedView:
            return False

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
            raise self.invalid(f"ambiguous column {name} (in {', '.join(t.name for t, _ in hits)}); qualify it")
        return ColumnRef(hits[0][0].name, hits[0][1].name)

    def _qualify(self, e: exp.Expression) -> exp.Expression:
        def qualify(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Column):
                ref = self._resolve(node)
                return exp.column(ref.column, table=ref.table, quoted=True)
            return node

        return e.copy().transform(qualify)

    def _fallback_type(self, e: exp.Expression) -> str | None:
        """Result types sqlglot does not infer: text functions, and FLOOR/CEIL/ROUND of a column."""
        if isinstance(e, _TEXT_FUNCTIONS):
            return "VARCHAR"
        if isinstance(e, (exp.Floor, exp.Ceil, exp.Round)) and isinstance(e.this, exp.Column):
            t = self.schema.table(e.this.table).column(e.this.name).type
            if types.family(t) == "decimal":
                digits = e.args.get("decimals")
                scale = int(digits.this) if isinstance(e, exp.Round) and isinstance(digits, exp.Literal) else 0
                return f"DECIMAL(38,{max(0, scale)})"
            return t if types.family(t) in ("integer", "float") else None
        return None

    def _type_of(self, qualified: exp.Expression, what: str) -> str:
        exact = _exact_numeric_type(qualified, self.schema)
        if exact is not None:
            return exact
        mapping = {t.name: {c.name: c.type for c in t.columns} for t in self.aliases.values()}
        try:
            query = exp.select(qualified.copy()).from_(exp.table_(next(iter(mapping)), quoted=True))
            for name in list(mapping)[1:]:
                query = query.join(exp.table_(name, quoted=True))
            annotated = annotate_types(query, schema=mapping, dialect="duckdb")
            t = types.from_datatype(annotated.expressions[0].type)
        except Exception:  # sqlglot cannot type it
            t = None
        if t is None:
            t = self._fallback_type(qualified)
        if t is None:
            raise self.not_incremental(f"{what}: cannot determine the type of {qualified.sql()}")
        if t.startswith("DECIMAL") and not (isinstance(qualified, exp.Cast) and t == types.from_datatype(qualified.to)):
            scale = _decimal_scale(qualified, self.schema)
            t = f"DECIMAL(38,{scale})" if scale is not None else "DOUBLE"
        return t  # a CAST to a DECIMAL keeps its precision (a quantile's argument, lattice/warehouse_sql.py)


_TEXT_FUNCTIONS = (exp.Replace, exp.Left, exp.Right, exp.Pad, exp.SplitPart, exp.Trim, exp.Upper, exp.Lower,
                   exp.Reverse, exp.Substring, exp.Concat, exp.ConcatWs, exp.DPipe, exp.Initcap)


def _func_name(node: exp.Expression) -> str:
    return (node.name if isinstance(node, exp.Anonymous) else node.key).upper()


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
