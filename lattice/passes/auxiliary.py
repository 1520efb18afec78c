"""The auxiliary mode (paper 002, CReaM): DISTINCT aggregates kept through an auxiliary view.

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

A value of e whose last occurrence in a group is deleted leaves A (its COUNT(*) reaches 0), so its
row of the outer view's change set is deleted: only the groups the batch touches are re-aggregated,
from A, never from the base. What this pass cannot rewrite (two different DISTINCT arguments, AVG of
another column beside them, a grand total with COUNT, an expression over aggregates) stays with the
recompute mode, which the plan reports with the original reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from lattice.passes.parse_views import ViewStatement

SUFFIX = "__ns_aux"  # the auxiliary view of view V is V__ns_aux (lake only)
_PARTIAL = {exp.Count: ("c", "COUNT", "SUM"), exp.Sum: ("s", "SUM", "SUM"), exp.Min: ("lo", "MIN", "MIN"),
            exp.Max: ("hi", "MAX", "MAX")}
_DISTINCT = {exp.Count: "COUNT", exp.Sum: "SUM", exp.Avg: "AVG", exp.Min: "MIN", exp.Max: "MAX"}


@dataclass(frozen=True)
class Split:
    auxiliary: ViewStatement  # A: the multiset of the argument's values per group (lake only)
    outer: ViewStatement  # the view, over A
    argument: str  # e, as written
    columns: tuple[tuple[str, str], ...]  # A's columns and why each is needed (nightshift plan prints them)


def auxiliary_name(view: str) -> str:
    return f"{view}{SUFFIX}"


def split(statement: ViewStatement) -> Split | None:
    """The view as an outer view over its auxiliary view, or None when it has no DISTINCT aggregate or
    this rewrite does not cover it (the caller keeps it by recompute)."""
    query = statement.query
    if not isinstance(query, exp.Select) or query.args.get("distinct") or query.args.get("order") \
            or query.args.get("limit") or query.args.get("with_") or query.args.get("with"):
        return None
    aggregates = list(query.find_all(exp.AggFunc))
    distinct = [d for a in aggregates if (d := _distinct_argument(a)) is not None]
    if len({d.sql() for d in distinct}) != 1:
        return None
    argument = distinct[0]
    group = list(query.args["group"].expressions) if query.args.get("group") else []
    if any(_same(g, argument) for g in group):
        return None  # the group keys determine the argument (003): DISTINCT is 0/1; recompute keeps it
    name = auxiliary_name(statement.name)
    columns: list[tuple[str, str]] = []
    items = []
    for i, g in enumerate(group, 1):
        items.append(exp.alias_(g.copy(), f"g{i}"))
        columns.append((f"g{i}", f"group key {g.sql()}"))
    items.append(exp.alias_(argument.copy(), "e"))
    columns.append(("e", f"the argument {argument.sql()} of the DISTINCT aggregates"))
    items.append(exp.alias_(exp.Count(this=exp.Star()), "m"))
    columns.append(("m", "the value's multiplicity (a value leaves its group when it reaches 0)"))
    partials: dict[tuple[str, str], str] = {}
    outputs = {item.alias.lower() for item in query.expressions if isinstance(item, exp.Alias)}

    def rewrite(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.AggFunc):
            return _outer_aggregate(node, argument, partials, items, columns)
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
    if not group and any(isinstance(a, exp.Count) and _distinct_argument(a) is None for a in aggregates):
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
                 argument.sql(), tuple(columns))


class _NotCovered(Exception):
    pass


def _distinct_argument(node: exp.Expression) -> exp.Expression | None:
    arg = node.this if isinstance(node, exp.AggFunc) else None
    if isinstance(arg, exp.Distinct) and len(arg.expressions) == 1:
        return arg.expressions[0]
    return None


def _same(a: exp.Expression, b: exp.Expression) -> bool:
    if a.sql().lower() == b.sql().lower():
        return True
    return isinstance(a, exp.Column) and isinstance(b, exp.Column) and a.name.lower() == b.name.lower() \
        and (not a.table or not b.table)


def _outer_aggregate(node: exp.AggFunc, argument: exp.Expression, partials: dict, items: list, columns: list):
    distinct = _distinct_argument(node)
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
