"""The auxiliary mode (paper 002, CReaM): DISTINCT and holistic aggregates kept through an auxiliary view.

A view with COUNT/SUM/AVG/MIN/MAX(DISTINCT e) over one argument e is not distributive over its
groups' rows, but it is over the group's *multiset of values of e*: CReaM keeps, per group, each
value with its multiplicity. That multiset is itself a summary view of the fact table,

    A = SELECT <group keys> AS g1.., e AS e, COUNT(*) AS m, <partial aggregates> FROM <the view's
        tables> WHERE <its filter> GROUP BY <group keys>, e

kept in delta mode (paper 001) in the lake only (Plan.auxiliary: never a warehouse table), and the
view becomes a view over A, kept by the nested machinery (paper 000: A's changed groups are its
change set, A's lake copy holds the old rows):

    COUNT(DISTINCT e) -> COUNT(e)    SUM/AVG/MIN/MAX(DISTINCT e) -> SUM/AVG/MIN/MAX(e)
    COUNT(*) -> SUM(m)   COUNT(x) -> SUM(COUNT(x))   SUM(x) -> SUM(SUM(x))   MIN/MAX(x) -> MIN/MAX(MIN/MAX(x))
    MEDIAN(e), PERCENTILE_CONT/DISC(p) WITHIN GROUP (ORDER BY e), MODE() WITHIN GROUP (ORDER BY e)
        -> the same aggregate over A's values e weighted by m (a holistic stored aggregate: every
           changed group's value is recomputed from A's rows after the batch, emit.holistic_values)

A value of e whose last occurrence in a group is deleted leaves A (its COUNT(*) reaches 0), so its
row of the outer view's change set is deleted: only the groups the batch touches are re-aggregated,
from A, never from the base. What this pass cannot rewrite (two different DISTINCT arguments, AVG of
another column beside them, a grand total with COUNT, an expression over aggregates) stays with the
recompute mode, which the plan reports with the original reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import sqlglot
from sqlglot import exp

from lattice.ir import UserAggregate
from lattice.passes.parse_views import AUXILIARY_SUFFIX, ViewStatement, holistic

SUFFIX = AUXILIARY_SUFFIX  # the auxiliary view of view V is V__ns_aux (lake only)
_PARTIAL = {exp.Count: ("c", "COUNT", "SUM"), exp.Sum: ("s", "SUM", "SUM"), exp.Min: ("lo", "MIN", "MIN"),
            exp.Max: ("hi", "MAX", "MAX")}
_DISTINCT = {exp.Count: "COUNT", exp.Sum: "SUM", exp.Avg: "AVG", exp.Min: "MIN", exp.Max: "MAX"}


@dataclass(frozen=True)
class Split:
    auxiliary: ViewStatement  # A: the multiset of the argument's values per group (lake only)
    outer: ViewStatement  # the view, over A
    argument: str  # e, as written
    distinct: bool  # a DISTINCT aggregate is among them (else holistic ones only)
    columns: tuple[tuple[str, str], ...]  # A's columns and why each is needed (nightshift plan prints them)


def auxiliary_name(view: str) -> str:
    return f"{view}{SUFFIX}"


def split(statement: ViewStatement, udas: tuple[UserAggregate, ...] = ()) -> Split | None:
    """The view as an outer view over its auxiliary view, or None when it has no DISTINCT aggregate or
    this rewrite does not cover it (the caller keeps it by recompute)."""
    query = statement.query
    if not isinstance(query, exp.Select) or query.args.get("distinct") or query.args.get("order") \
            or query.args.get("limit") or query.args.get("with_") or query.args.get("with"):
        return None
    aggregates = list(query.find_all(exp.AggFunc, exp.WithinGroup, exp.Anonymous))
    distinct = [d for a in aggregates if (d := _multiset_argument(a, udas)) is not None]
    if len({d.sql() for d in distinct}) != 1:
        return None
    argument = distinct[0]
    group = list(query.args["group"].expressions) if query.args.get("group") else []
    if any(_same(g, argument) for g in group):
        return None  # the group keys determine the argument (003): without_distinct keeps it in delta mode
    name = auxiliary_name(statement.name)
    columns: list[tuple[str, str]] = []
    items = []
    for i, g in enumerate(group, 1):
        items.append(exp.alias_(g.copy(), f"g{i}"))
        columns.append((f"g{i}", f"group key {g.sql()}"))
    items.append(exp.alias_(argument.copy(), "e"))
    columns.append(("e", f"the argument {argument.sql()} of the DISTINCT and holistic aggregates"))
    items.append(exp.alias_(exp.Count(this=exp.Star()), "m"))
    columns.append(("m", "the value's multiplicity (a value leaves its group when it reaches 0)"))
    partials: dict[tuple[str, str], str] = {}
    outputs = {item.alias.lower() for item in query.expressions if isinstance(item, exp.Alias)}

    def rewrite(node: exp.Expression) -> exp.Expression:
        if isinstance(node, (exp.AggFunc, exp.WithinGroup)) or holistic(node, udas) is not None:
            return _outer_aggregate(node, argument, partials, items, columns, udas)
        for i, g in enumerate(group, 1):
            if _same(node, g):
                return exp.column(f"g{i}")
        if isinstance(node, exp.Column) and not (not node.table and node.name.lower() in outputs):
            raise _NotCovered()  # a column neither grouped nor an output's name (HAVING may name one)
        return node

    try:
        select = []
        for item in query.expressions:
            out = item.alias_or_name
            new = item.transform(rewrite)
            if not isinstance(item, exp.Alias) and out:
                new = exp.alias_(new, out, quoted=out in statement.quoted)
            select.append(new)
        having = query.args["having"].this.transform(rewrite) if query.args.get("having") else None
    except _NotCovered:
        return None
    if not group and any(isinstance(a, exp.Count) and _multiset_argument(a, udas) is None for a in aggregates):
        return None  # a grand total's COUNT over no rows is 0, SUM(m) over no rows NULL
    aux = query.copy()
    aux.set("expressions", items)
    aux.set("group", exp.Group(expressions=[g.copy() for g in group] + [argument.copy()]))
    aux.set("having", None)
    outer = exp.select(*select).from_(exp.to_table(name))
    if group:
        outer = outer.group_by(*[exp.column(f"g{i}") for i in range(1, len(group) + 1)])
    if having is not None:
        outer = outer.having(having)
    return Split(ViewStatement(name, statement.file, (), aux, ()),
                 ViewStatement(statement.name, statement.file, statement.columns, outer, statement.quoted),
                 argument.sql(), any(_multiset_argument(a, udas) is not None and holistic(a, udas) is None
                                     for a in aggregates),
                 tuple(columns))


class _NotCovered(Exception):
    pass


def extremes_through_auxiliary(statement: ViewStatement) -> ViewStatement | None:
    """The view with MIN(x)/MAX(x) written MIN/MAX(DISTINCT x) (the same values), so that split keeps it
    over an auxiliary view of x's multiplicities (issue 19 item 4: a deleted extreme is then recomputed
    from that view's lake copy, never from the base); None when the view has no MIN/MAX."""
    query = statement.query.copy()
    found = False

    def rewrite(node: exp.Expression) -> exp.Expression:
        nonlocal found
        if isinstance(node, (exp.Min, exp.Max)) and node.this is not None and not isinstance(node.this, exp.Distinct):
            found = True
            return type(node)(this=exp.Distinct(expressions=[node.this.copy()]))
        return node

    query = query.transform(rewrite)
    return ViewStatement(statement.name, statement.file, statement.columns, query, statement.quoted) if found else None


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


def _outer_aggregate(node: exp.Expression, argument: exp.Expression, partials: dict, items: list, columns: list,
                     udas: tuple[UserAggregate, ...]):
    if isinstance(node, exp.WithinGroup) or holistic(node, udas) is not None:
        if holistic(node, udas) is None:
            raise _NotCovered()  # a descending order, a fraction that is not a literal: recompute
        outer = node.copy()  # the same aggregate over the auxiliary rows' values (weighted by m: emit.holistic_values)
        if isinstance(outer, exp.Anonymous):  # a user-defined aggregate
            outer.set("expressions", [exp.column("e")])
            return outer
        target = outer.expression.expressions[0] if isinstance(outer, exp.WithinGroup) else outer
        target.set("this", exp.column("e"))
        return outer
    distinct = _multiset_argument(node, udas)
    if distinct is not None:
        func = _DISTINCT.get(type(node))
        if func is None:
            raise _NotCovered()
        return exp.func(func, exp.column("e"))
    if isinstance(node, exp.Count) and (node.this is None or isinstance(node.this, exp.Star)):
        return exp.func("SUM", exp.column("m"))
    spec = _PARTIAL.get(type(node))
    if spec is None or node.this is None or node.expressions:
        raise _NotCovered()  # AVG(x), holistic or multi-argument aggregates: recompute
    prefix, inner, outer = spec
    key = (inner, node.this.sql())
    if key not in partials:
        partials[key] = f"{prefix}{len(partials) + 1}"
        items.append(exp.alias_(exp.func(inner, node.this.copy()), partials[key]))
        columns.append((partials[key], f"{inner}({node.this.sql()}) per value, for {node.sql()}"))
    return exp.func(outer, exp.column(partials[key]))


_MAP_PARTIAL = {exp.Count: ("c", "COUNT", "SUM"), exp.Sum: ("s", "SUM", "SUM"), exp.Min: ("lo", "MIN", "MIN"),
                exp.Max: ("hi", "MAX", "MAX")}


def through_map(statement: ViewStatement, fact: str, fact_columns: tuple[str, ...], other_columns: frozenset[str]
                ) -> Split | None:
    """The view over a higher-order delta map (issue 21, Cumulus): its fact table grouped by every fact
    column the view reads outside an aggregate (foreign keys, fact-side group keys and filter columns),
    with the partial aggregates its aggregates need,

        M = SELECT <those columns>, COUNT(*) AS ns_m, SUM(x) AS ns_s1, ... FROM <fact> GROUP BY <those columns>

    and the view the same query with the fact table replaced by M under the fact's name or alias:
    COUNT(*) -> SUM(ns_m), COUNT/SUM(x) -> SUM(partial), MIN/MAX(x) -> MIN/MAX(partial). M is kept in
    the lake (like an auxiliary view: delta mode, from the fact's changes only, no dimension joins); the
    view is kept over it as a nested view, so a dimension change joins the changed dimension rows with M's
    lake copy instead of the fact table. None when the rewrite does not cover the view: no GROUP BY, an
    aggregate reading a dimension column, AVG, DISTINCT or holistic aggregates, a fact column name that
    another table of the view has too (unqualified), the fact table twice.

    fact_columns: the fact table's declared columns; other_columns: the columns (lower case) of the
    other tables the view reads."""
    query = statement.query.copy()  # rewritten in place below
    if not isinstance(query, exp.Select) or query.args.get("distinct") or query.args.get("order") \
            or query.args.get("limit") or query.args.get("with_") or query.args.get("with") \
            or not query.args.get("group"):
        return None
    facts = [t for t in query.find_all(exp.Table) if t.name.lower() == fact.lower()]
    if len(facts) != 1:
        return None
    alias = facts[0].alias_or_name
    declared = {c.lower(): c for c in fact_columns}

    def of_fact(col: exp.Column) -> bool:
        if col.table:
            return col.table.lower() == alias.lower()
        name = col.name.lower()
        if name in declared and name in other_columns:
            raise _NotCovered()  # which table's? leave the view as it is
        return name in declared

    aggregates = [a for a in query.find_all(exp.AggFunc, exp.WithinGroup, exp.Anonymous)
                  if not any(isinstance(p, (exp.AggFunc, exp.WithinGroup)) for p in _ancestors(a))]
    inside = {id(n) for a in aggregates for n in a.walk()}
    keep: dict[str, str] = {}  # the map's group columns: lower -> declared name
    try:
        for col in query.find_all(exp.Column):
            if id(col) not in inside and of_fact(col):
                keep.setdefault(col.name.lower(), declared[col.name.lower()])
        for a in aggregates:
            if type(a) not in _MAP_PARTIAL or _multiset_argument(a) is not None or isinstance(a.this, exp.Distinct):
                raise _NotCovered()
            if a.this is not None and not isinstance(a.this, exp.Star) \
                    and not all(of_fact(c) for c in a.this.find_all(exp.Column)):
                raise _NotCovered()  # an aggregate of a dimension column: no partial of the fact alone
    except _NotCovered:
        return None
    taken = set(declared)

    def fresh(base: str) -> str:
        name = base
        while name.lower() in taken:
            name = "_" + name
        taken.add(name.lower())
        return name

    count = fresh("ns_m")
    items = [exp.alias_(exp.column(exp.to_identifier(c), table=exp.to_identifier(alias)), exp.to_identifier(c))
             for c in keep.values()]
    columns = [(c, "a column of the fact the view reads outside its aggregates (a key, a foreign key, a filter)")
               for c in keep.values()]
    items.append(exp.alias_(exp.Count(this=exp.Star()), count))
    columns.append((count, "the rows of the fact with these values"))
    partials: dict[tuple[str, str], str] = {}

    def rewrite(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.AggFunc) or not any(node is a for a in aggregates):
            return node
        if isinstance(node, exp.Count) and (node.this is None or isinstance(node.this, exp.Star)):
            return exp.func("SUM", exp.column(count))
        prefix, inner, outer = _MAP_PARTIAL[type(node)]
        key = (inner, node.this.sql())
        if key not in partials:
            partials[key] = fresh(f"ns_{prefix}{len(partials) + 1}")
            items.append(exp.alias_(exp.func(inner, node.this.copy()), partials[key]))
            columns.append((partials[key], f"{inner}({node.this.sql()}), for {node.sql()}"))
        return exp.func(outer, exp.column(partials[key]))

    name = auxiliary_name(statement.name)
    outer = query.transform(rewrite, copy=False)
    for t in outer.find_all(exp.Table):
        if t.name.lower() == fact.lower():
            t.replace(exp.to_table(name).as_(alias))
    fact_table = exp.to_table(fact).as_(alias) if alias.lower() != fact.lower() else exp.to_table(fact)
    groups = [exp.column(exp.to_identifier(c), table=exp.to_identifier(alias)) for c in keep.values()]
    mapped = exp.select(*items).from_(fact_table)
    if groups:
        mapped = mapped.group_by(*groups)
    return Split(ViewStatement(name, statement.file, (), mapped, ()),
                 ViewStatement(statement.name, statement.file, statement.columns, outer, statement.quoted),
                 "", False, tuple(columns))


def _ancestors(node: exp.Expression):
    p = node.parent
    while p is not None:
        yield p
        p = p.parent
