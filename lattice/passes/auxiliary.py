"""The auxiliary mode (paper 002, CReaM) and higher-order delta maps (paper 004, Cumulus): one construction,
the fact table grouped by what a view reads of it, as small as keys and foreign keys allow (paper 003).

A view over a fact table F (joined to dimensions through foreign keys) is kept over

    A = SELECT <the fact columns it reads outside its aggregates: the foreign keys of its joins, the
                columns of the filters that also read a dimension>,
               <its fact-side group keys and the arguments of its DISTINCT and holistic aggregates, as
                written (a column, or an expression over F's columns)>,
               COUNT(*) AS ns_m, <partial COUNT/SUM/MIN/MAX of its other fact-side arguments>
        FROM F WHERE <the conjuncts of its filter over F alone> GROUP BY <the columns and expressions>

kept in delta mode (paper 001) in the lake only (Plan.auxiliary: never a warehouse table). A holds the
fact's foreign keys, never dimension attributes (003, Algorithm 2: the dimension tables are their own
auxiliary data, and the lake has them), so a dimension change never rewrites A; the view joins A to the
dimensions as it joined F, kept by the nested machinery (paper 000: A's changed groups are its change
set, A's lake copy its old rows), so a dimension change joins the changed dimension rows with A's lake
copy, never with F. Views whose A is the same share one: A is named by its definition
(<fact>_<digest>__ns_aux), whichever views read it.

The view over A (columns of F read from A under the same names, F's alias kept):

    COUNT(*) -> SUM(ns_m)    COUNT(x) -> SUM(ns_count_x)    SUM(x) -> SUM(ns_sum_x)
    MIN/MAX(x) -> MIN/MAX(ns_min_x / ns_max_x), or over A's values of x ([views] v = "auxiliary": a deleted
                  extreme is recomputed from A's lake copy by 000 5's C_i, never from the base)
    MIN/MAX(DISTINCT e) -> MIN/MAX(e)
    COUNT/SUM/AVG(DISTINCT e) -> COUNT/SUM/AVG(e) where A's rows are exactly the view's (group, e) pairs (no
                  dimension, no other fact column): a value whose last occurrence goes leaves A, a delta;
                  else kept DISTINCT, a holistic aggregate of the view over A
    MEDIAN(e), PERCENTILE_CONT/DISC(p) WITHIN GROUP (ORDER BY e), MODE() WITHIN GROUP (ORDER BY e), a
                  user-defined aggregate -> holistic: every changed group's value recomputed after the batch
                  from its rows of A (values weighted by ns_m) joined to the dimensions (emit.holistic_values)

What this cannot rewrite (AVG of a non-DISTINCT argument beside them, an aggregate of a dimension column
other than DISTINCT or holistic ones, an expression over aggregates, a grand total with COUNT) stays with
the recompute mode, which the plan reports with the original reason.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Callable

import sqlglot
from sqlglot import exp

from lattice.ir import UserAggregate
from lattice.passes.parse_views import AUXILIARY_SUFFIX, ViewStatement, grouping_sets, holistic

SUFFIX = AUXILIARY_SUFFIX  # an auxiliary view's name ends with it (lake only)
WEIGHT = "ns_m"  # A's COUNT(*): the rows of F with these values (a holistic aggregate's weights)
_PARTIAL = {exp.Count: ("count", "COUNT", "SUM"), exp.Sum: ("sum", "SUM", "SUM"), exp.Min: ("min", "MIN", "MIN"),
            exp.Max: ("max", "MAX", "MAX")}
_DISTINCT = {exp.Count: "COUNT", exp.Sum: "SUM", exp.Avg: "AVG", exp.Min: "MIN", exp.Max: "MAX"}


@dataclass(frozen=True)
class Split:
    auxiliary: ViewStatement  # A: the fact grouped by what the view reads of it (lake only)
    outer: ViewStatement  # the view, over A
    arguments: str  # the arguments of its DISTINCT and holistic aggregates, as written ("" for none)
    distinct: bool  # a DISTINCT aggregate is among them
    columns: tuple[tuple[str, str], ...]  # A's columns and why each is needed (nightshift plan prints them)
    form: str  # what A is (nightshift plan prints it)


def auxiliary_name(fact: str, definition: str) -> str:
    """A's name: its fact and the digest of its definition, so that views with the same A share it and
    adding or dropping one of them renames (and rebuilds) nothing. Only letters, digits and _ of the
    fact's name are kept (a name like p"os would need quoting in every path and SQL text that holds
    A's name; the digest tells such facts apart)."""
    return f"{re.sub(r'[^A-Za-z0-9_]', '_', fact)}_{hashlib.sha256(definition.encode()).hexdigest()[:8]}{SUFFIX}"


class _NotCovered(Exception):
    pass


def fact_map(statement: ViewStatement, fact: str, tables: dict[str, frozenset[str]],
             udas: tuple[UserAggregate, ...] = (), grouped: bool = False) -> Split | None:
    """The view as a view over A (module docstring), and A; None when the rewrite does not cover it.
    tables: every table of the view by its alias (lower case) -> its columns (lower case).

    grouped ([views] v = "auxiliary": MIN/MAX of A's values): A is the view's own join grouped by its
    group keys and the arguments of its MIN/MAX, DISTINCT and holistic aggregates (CReaM's form, as small
    as the view's groups allow, but a dimension change rewrites it); the view reads A alone."""
    query = statement.query
    if not isinstance(query, exp.Select) or any(query.args.get(k) for k in ("distinct", "order", "limit", "offset",
                                                                              "with_", "with")):
        return None
    outer = query.copy()
    facts = [t for t in outer.find_all(exp.Table) if t.name.lower() == fact.lower()]
    if len(facts) != 1 or WEIGHT in tables.get(facts[0].alias_or_name.lower(), ()):
        return None
    try:
        return _Rewrite(statement, outer, facts[0], tables, udas, grouped).split()
    except _NotCovered:
        return None


class _Rewrite:
    """One view's A and the view over it (fact_map)."""

    def __init__(self, statement: ViewStatement, outer: exp.Select, fact: exp.Table, tables: dict[str, frozenset[str]],
                 udas: tuple[UserAggregate, ...], grouped: bool):
        self.statement, self.outer, self.fact, self.tables = statement, outer, fact, tables
        self.alias, self.udas, self.grouped = fact.alias_or_name, udas, grouped
        self.joined = len(tables) > 1
        self.kept: dict[str, tuple[exp.Expression, str]] = {}  # canonical SQL -> (A's expression, A's column)

    # ---------------------------------------------------------------- names
    def table_of(self, col: exp.Column) -> str | None:
        """The alias (lower case) of the table a column reads; None for a name no table has (an output)."""
        if col.table:
            if col.table.lower() not in self.tables:
                raise _NotCovered()
            return col.table.lower()
        found = [t for t, cols in self.tables.items() if col.name.lower() in cols]
        if len(found) > 1:
            raise _NotCovered()  # which table's? leave the view as it is
        return found[0] if found else None

    def of_fact(self, col: exp.Column) -> bool:
        return self.table_of(col) == self.alias.lower()

    def fact_only(self, e: exp.Expression) -> bool:
        cols = list(e.find_all(exp.Column))
        return bool(cols) and all(self.of_fact(c) for c in cols)

    def in_a(self, e: exp.Expression) -> bool:
        """A can compute e: over the fact alone, or (grouped) over the view's whole join."""
        return self.grouped or self.fact_only(e)

    def canon(self, e: exp.Expression) -> str:
        """e written alike whichever way the view qualifies its columns (the key of A's expressions)."""
        while isinstance(e, exp.Paren):
            e = e.this
        return e.transform(lambda n: exp.column(n.name.lower(), table=self.table_of(n) or "")
                           if isinstance(n, exp.Column) else n).sql().lower()

    def _kept(self, node: exp.Expression) -> str | None:
        """The column of A holding `node` when it is one of the expressions A keeps (written alike)."""
        if isinstance(node, (exp.Identifier, exp.Ordered, exp.Alias, exp.Star)) or \
                (isinstance(node, exp.Column) and not self.grouped):
            return None
        found = self.kept.get(self.canon(node))
        return found[1] if found and type(found[0]) is type(_unparen(node)) else None

    def _keep(self, e: exp.Expression) -> None:
        key = self.canon(e)
        if key in self.kept:
            return
        e = _unparen(e)
        taken = {c for _, c in self.kept.values()}
        name = e.name if isinstance(e, exp.Column) and e.name not in taken else f"ns_k_{_digest(key)}"
        self.kept[key] = ((e.copy() if self.grouped else _bare(e)), name)

    def _item(self, e: exp.Expression) -> str:
        if isinstance(e, exp.Column) and not self.grouped:
            return e.name.lower()
        found = self.kept.get(self.canon(e))
        return found[1] if found else f"?{e.sql()}"

    # ---------------------------------------------------------------- the rewrite
    def split(self) -> Split | None:
        q = self.outer
        group = _group_items(q, {c for cols in self.tables.values() for c in cols})
        aggregates = [a for a in q.find_all(exp.AggFunc, exp.WithinGroup, exp.Anonymous)
                      if not isinstance(a, exp.Anonymous) or holistic(a, self.udas) is not None]
        aggregates = [a for a in aggregates if not any(isinstance(p, (exp.AggFunc, exp.WithinGroup))
                                                       for p in _ancestors(a))]
        multiset, partial, values, distinct = [], [], [], False
        for a in aggregates:
            e = _multiset_argument(a, self.udas)
            if holistic(a, self.udas) is not None:
                multiset.append(e)
            elif isinstance(a, (exp.WithinGroup, exp.Anonymous)):
                raise _NotCovered()  # a descending order, a fraction that is not a literal
            elif e is not None:
                if type(a) not in _DISTINCT:
                    raise _NotCovered()
                multiset.append(e)
                distinct = True
            elif isinstance(a.this, exp.Distinct):
                raise _NotCovered()  # DISTINCT over several expressions
            elif isinstance(a, exp.Count) and (a.this is None or isinstance(a.this, exp.Star)):
                partial.append(a)
            elif type(a) in _PARTIAL and a.this is not None and not a.expressions and self.in_a(a.this):
                if self.grouped and isinstance(a, (exp.Min, exp.Max)):
                    values.append(a)
                    multiset.append(a.this)
                else:
                    partial.append(a)
            else:
                raise _NotCovered()  # AVG(x), an aggregate of a dimension column, another aggregate
        if any(self.canon(g) == self.canon(e) for g in group for e in multiset):
            return None  # the group keys determine an argument (003): without_distinct keeps it in delta mode
        if not group and any(isinstance(a, exp.Count) for a in partial):
            return None  # a grand total's COUNT over no rows is 0, SUM(ns_m) over no rows NULL
        where = q.args.get("where")
        conjuncts = _conjuncts(where.this) if where else []
        pushed = [c for c in conjuncts if self.grouped or self.fact_only(c)]
        for x in group + multiset:
            if self.grouped or (not isinstance(_unparen(x), exp.Column) and self.fact_only(x)):
                self._keep(x)
        columns: dict[str, str] = {}  # A's plain columns (the fact's, by their declared names): lower -> name
        if not self.grouped:
            self._read(q, {id(n) for n in partial + pushed}, columns)
        items = set(columns) | {c for _, c in self.kept.values()}
        unique = not (self.joined and not self.grouped) and len({self.canon(e) for e in multiset}) <= 1 and \
            items == {self._item(g) for g in group} | {self._item(e) for e in multiset}
        if distinct and not group and not unique:
            return None  # COUNT(DISTINCT e) of a grand total over no rows is 0, a holistic value NULL
        return self._parts(q, group, aggregates, partial, values, multiset, pushed, columns, unique, distinct)

    def _read(self, node: exp.Expression, skip: set[int], out: dict[str, str]) -> None:
        """The fact columns the view over A reads (outside partials, pushed conjuncts and kept expressions)."""
        if id(node) in skip or self._kept(node):
            return
        if isinstance(node, exp.Column) and self.of_fact(node):
            out.setdefault(node.name.lower(), node.name)
            return
        for child in node.iter_expressions():
            self._read(child, skip, out)

    def _parts(self, q: exp.Select, group, aggregates, partial, values, multiset, pushed, columns, unique,
               distinct) -> Split:
        alias = self.alias
        source = self.statement.query  # A's FROM, joins and filter (grouped), as the view writes them
        partials: dict[str, exp.Expression] = {}  # A's partial columns: name -> aggregate over F
        aggs = {id(a) for a in aggregates}
        partial_ids, value_ids = {id(a) for a in partial}, {id(a) for a in values}

        def kept(node: exp.Expression) -> exp.Expression:
            found = self._kept(node)
            return exp.column(found, table=alias) if found else node

        def inner(node: exp.Expression) -> exp.Expression:
            return node.transform(kept)

        def rewrite(node: exp.Expression) -> exp.Expression:
            if id(node) not in aggs:
                return kept(node)
            if id(node) in partial_ids:
                if isinstance(node, exp.Count) and (node.this is None or isinstance(node.this, exp.Star)):
                    return exp.func("SUM", exp.column(WEIGHT, table=alias))
                kind, func, outer_func = _PARTIAL[type(node)]
                arg = _unparen(node.this)
                name = f"ns_{kind}_{arg.name if isinstance(arg, exp.Column) else _digest(self.canon(arg))}"
                partials[name] = exp.func(func, arg.copy() if self.grouped else _bare(arg))
                return exp.func(outer_func, exp.column(name, table=alias))
            if id(node) in value_ids or holistic(node, self.udas) is not None:
                return inner(node)
            e = inner(_multiset_argument(node, self.udas))  # a DISTINCT aggregate
            if isinstance(node, (exp.Min, exp.Max)) or unique:
                return exp.func(_DISTINCT[type(node)], e)
            return type(node)(this=exp.Distinct(expressions=[e]))

        rest = [c for c in (_conjuncts(q.args["where"].this) if q.args.get("where") else [])
                if all(c is not p for p in pushed)]
        q.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)
        if self.grouped:
            q.set("joins", None)
        select = []
        for item in q.expressions:
            out = item.alias_or_name
            new = item.transform(rewrite, copy=False)
            if not isinstance(new, exp.Alias) and out and (not isinstance(new, exp.Column) or new.name != out):
                new = exp.alias_(new, out, quoted=out in self.statement.quoted)
            select.append(new)
        q.set("expressions", select)
        for key in ("joins", "where", "group", "having"):
            for part in (q.args.get(key) if isinstance(q.args.get(key), list) else [q.args.get(key)]):
                if part is not None:
                    part.transform(rewrite, copy=False)
        items = [exp.column(exp.to_identifier(c)) for _, c in sorted(columns.items())]
        items += [e.copy() if isinstance(e, exp.Column) and e.name == c else exp.alias_(e.copy(), c)
                  for e, c in sorted(self.kept.values(), key=lambda k: k[1])]
        keys = [i.copy() if isinstance(i, exp.Column) else i.this.copy() for i in items]
        items.append(exp.alias_(exp.Count(this=exp.Star()), WEIGHT))
        items += [exp.alias_(partials[n], n) for n in sorted(partials)]
        if self.grouped:
            aux = exp.select(*items).from_(source.args["from_"].copy())
            aux.set("joins", [j.copy() for j in source.args.get("joins") or []] or None)
            if source.args.get("where"):
                aux.set("where", source.args["where"].copy())
            names = {c for _, c in self.kept.values()} | {WEIGHT} | set(partials)
            if any(c.table.lower() != alias.lower() or c.name not in names
                   for c in q.find_all(exp.Column) if not (not c.table and c.name.lower() not in
                                                           {n.lower() for cols in self.tables.values() for n in cols})):
                raise _NotCovered()  # the view reads a column A does not keep (an ungrouped column in HAVING)
        else:
            aux = exp.select(*items).from_(exp.Table(this=self.fact.this.copy()))
            if pushed:
                aux = aux.where(exp.and_(*[_bare(c) for c in pushed]))
        if keys:
            aux = aux.group_by(*keys)
        name = auxiliary_name(self.fact.name, aux.sql())
        self.fact.replace(exp.Table(this=exp.to_identifier(name)).as_(alias))
        why = self._why(group, multiset, columns, partials, pushed)
        arguments = ", ".join(dict.fromkeys(e.sql() for e in multiset if all(e is not v.this for v in values)))
        return Split(ViewStatement(name, self.statement.file, (), aux, ()),
                     ViewStatement(self.statement.name, self.statement.file, self.statement.columns, q,
                                   self.statement.quoted),
                     arguments, distinct, why,
                     "the view's join grouped by its groups and the values of its MIN/MAX arguments (paper 002; a "
                     "dimension change rewrites it)" if self.grouped else
                     f"{self.fact.name} alone grouped by what the view reads of it: foreign keys, not dimension "
                     f"attributes (paper 003), so a dimension change never rewrites it")

    def _why(self, group, multiset, columns, partials, pushed) -> tuple[tuple[str, str], ...]:
        groups = {self._item(g) for g in group}
        args = {self._item(e) for e in multiset}
        out = []
        for low, c in sorted(columns.items()):
            out.append((c, "a group key" if low in groups else "an argument of a DISTINCT or holistic aggregate"
                        if low in args else "a foreign key (not the dimension's attributes, paper 003)"
                        if self._joins(low) else "read by a filter that also reads a dimension"))
        for e, c in sorted(self.kept.values(), key=lambda k: k[1]):
            what = "a group key" if c in groups else "an argument of a DISTINCT, holistic or MIN/MAX aggregate"
            out.append((c, what if isinstance(e, exp.Column) and e.name == c else f"{e.sql()}: {what}"))
        out.append((WEIGHT, "the rows of the fact with these values (its multiplicity: the row leaves A at 0)"))
        out += [(n, f"{partials[n].sql()} per row of A") for n in sorted(partials)]
        if pushed and not self.grouped:
            out.append(("(filter)", " AND ".join(_bare(c).sql() for c in pushed) + ": applied in A"))
        return tuple(out)

    def _joins(self, low: str) -> bool:
        for eq in self.statement.query.find_all(exp.EQ):
            cols = [c for c in (eq.this, eq.expression) if isinstance(c, exp.Column)]
            if len(cols) == 2 and any(self.of_fact(c) and c.name.lower() == low for c in cols) \
                    and not all(self.of_fact(c) for c in cols):
                return True
        return False


def _group_items(query: exp.Select, columns: set[str]) -> list[exp.Expression]:
    """GROUP BY's expressions, an ordinal or a select alias resolved to the select item it names (a
    column of the FROM tables first, as SQL resolves names)."""
    group = query.args.get("group")
    if not group:
        return []
    if grouping_sets(group):
        raise _NotCovered()
    items = [i.this if isinstance(i, exp.Alias) else i for i in query.expressions]
    aliases = {i.alias.lower(): i.this for i in query.expressions if isinstance(i, exp.Alias)}
    out = []
    for g in group.expressions:
        if isinstance(g, exp.Literal) and g.is_int:
            if not 1 <= int(g.this) <= len(items):
                raise _NotCovered()
            g = items[int(g.this) - 1]
        elif isinstance(g, exp.Column) and not g.table and g.name.lower() not in columns and g.name.lower() in aliases:
            g = aliases[g.name.lower()]
        out.append(g)
    return out


def _unparen(e: exp.Expression) -> exp.Expression:
    while isinstance(e, exp.Paren):
        e = e.this
    return e


def _bare(e: exp.Expression) -> exp.Expression:
    """e with its columns unqualified (A reads the fact alone) and outer parentheses dropped."""
    return _unparen(e).transform(lambda n: exp.column(n.this.copy()) if isinstance(n, exp.Column) else n)


def _digest(sql: str) -> str:
    return hashlib.sha256(sql.lower().encode()).hexdigest()[:8]


def _conjuncts(e: exp.Expression) -> list[exp.Expression]:
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.And):
        return _conjuncts(e.this) + _conjuncts(e.expression)
    return [e]


_SCALAR = {exp.Count: "CASE WHEN ({e}) IS NULL THEN 0 ELSE 1 END", exp.Sum: "{e}", exp.Min: "{e}", exp.Max: "{e}",
           exp.Avg: "CAST({e} AS DOUBLE)"}


def without_distinct(statement: ViewStatement, fact_key: Callable[[ViewStatement, exp.Column], bool]
                     ) -> tuple[ViewStatement, str] | None:
    """The view without DISTINCT where keys make it redundant (paper 003: then no auxiliary view at all),
    and why; None when some DISTINCT aggregate stays.

    The group keys determine e (e is a group key): every row of a group has the same e, so COUNT(DISTINCT
    e) is 1 (0 when e is NULL), SUM/MIN/MAX(DISTINCT e) is e and AVG(DISTINCT e) is e as a DOUBLE: a
    scalar of the group key, added to GROUP BY (it does not change the groups). e is the fact table's
    primary key (fact_key(statement, e): the caller knows the fact): its values are distinct on every
    joined row already (the joins go to dimensions through foreign keys), so DISTINCT is dropped."""
    query = statement.query
    if not isinstance(query, exp.Select):
        return None
    group = list(query.args["group"].expressions) if query.args.get("group") else []
    added: list[exp.Expression] = []
    why: list[str] = []
    key_args: list[exp.Column] = []

    def rewrite(node: exp.Expression) -> exp.Expression:
        e = _multiset_argument(node) if isinstance(node, exp.AggFunc) and holistic(node) is None else None
        if e is None or type(node) not in _SCALAR:
            return node
        if any(_same(g, e) for g in group):
            scalar = sqlglot.parse_one(_SCALAR[type(node)].format(e=e.sql()))
            added.append(scalar.copy())
            why.append(f"{node.sql()} is a scalar of the group key {e.sql()}")
            return scalar
        if isinstance(e, exp.Column):
            key_args.append(e)
            why.append(f"{node.sql()} is {type(node).__name__.upper()}({e.sql()}): {e.name} is the fact table's key")
            return type(node)(this=e.copy())
        raise _NotCovered()

    try:
        select = [item.transform(rewrite) for item in query.expressions]
        having = query.args["having"].this.transform(rewrite) if query.args.get("having") else None
    except _NotCovered:
        return None
    if not why:
        return None
    out = query.copy()
    out.set("expressions", select)
    if having is not None:
        out.set("having", exp.Having(this=having))
    if added:
        out.set("group", exp.Group(expressions=group + added))
    rewritten = ViewStatement(statement.name, statement.file, statement.columns, out, statement.quoted)
    if not all(fact_key(rewritten, c) for c in key_args):
        return None
    return rewritten, "; ".join(why)


def _multiset_argument(node: exp.Expression, udas: tuple[UserAggregate, ...] = ()) -> exp.Expression | None:
    """e of an aggregate over the group's multiset of values of e: a DISTINCT aggregate, or a holistic
    one (MEDIAN, PERCENTILE_CONT/DISC, MODE: parse_views.holistic); None for any other."""
    kept = holistic(node, udas)
    if kept is not None:
        return kept[1]
    arg = node.this if isinstance(node, exp.AggFunc) else None
    if isinstance(arg, exp.Distinct) and len(arg.expressions) == 1:
        return arg.expressions[0]
    return None


def _same(a: exp.Expression, b: exp.Expression) -> bool:
    if a.sql().lower() == b.sql().lower():
        return True
    return isinstance(a, exp.Column) and isinstance(b, exp.Column) and a.name.lower() == b.name.lower() \
        and (not a.table or not b.table)




def _ancestors(node: exp.Expression):
    p = node.parent
    while p is not None:
        yield p
        p = p.parent
