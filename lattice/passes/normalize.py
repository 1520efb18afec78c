"""Pass 3: normalize aggregates (paper 001, Table 2 and Figure 8).

AVG(e) becomes SUM(e)/COUNT(e); every view keeps a hidden COUNT(*) (a group is deleted when it
reaches 0) and a hidden COUNT(e) for every SUM/AVG/MIN/MAX argument (the aggregate becomes NULL
when it reaches 0). Equal argument expressions share their stored columns.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from lattice import types
from lattice.ir import Argument, Output, StoredAggregate, View
from lattice.passes.parse_views import HAVING_AGGREGATE, HOLISTIC, ParsedView
from lattice.sql import ident as q

COUNT_STAR = "_ns_count"
_HOLISTIC_TYPES = {"percentile_cont": "DOUBLE", "distinct count": "BIGINT", "distinct sum": "SUM", "distinct avg": "DOUBLE"}


def normalize(parsed: ParsedView) -> View:
    arguments: list[Argument] = []
    for agg in parsed.aggregates:
        if agg.arg_sql is not None and not any(a.sql == agg.arg_sql for a in arguments):
            arguments.append(Argument(len(arguments) + 1, agg.arg_sql, agg.arg_type))
    index = {a.sql: a for a in arguments}

    needed: dict[tuple[str, int | None], StoredAggregate] = {
        ("count_star", None): StoredAggregate("count_star", COUNT_STAR, None, "BIGINT")
    }

    def need(kind: str, arg: Argument) -> StoredAggregate:
        key = (kind, arg.index)
        if key not in needed:
            t = {"count": "BIGINT", "sum": types.sum_type(arg.type)}.get(kind, arg.type)
            needed[key] = StoredAggregate(kind, f"_ns_{'cnt' if kind == 'count' else kind}_{arg.index}", arg.index, t)
        return needed[key]

    def need_holistic(agg, arg: Argument) -> StoredAggregate:
        func = agg.func.split(":", 1)[1]
        key = (f"{HOLISTIC}:{func}", arg.index)
        if key not in needed:
            n = sum(1 for k in needed if k[0].startswith(HOLISTIC)) + 1
            t = _HOLISTIC_TYPES.get(func.split(" ")[0] if func.startswith("percentile") else func, arg.type)
            t = types.sum_type(arg.type) if t == "SUM" else t  # what every engine returns
            t = agg.result_type or t  # PERCENTILE_CONT of a DECIMAL: the warehouse's DECIMAL(p,s)
            t, definition = (agg.user.type, agg.user.sql) if agg.user is not None else (t, "")
            needed[key] = StoredAggregate(HOLISTIC, f"_ns_hol_{arg.index}_{n}", arg.index, t, func, definition)
        return needed[key]

    outputs: dict[str, Output] = {}  # every aggregate, declared or read by HAVING alone
    for agg in parsed.aggregates:
        if agg.arg_sql is None:
            outputs[agg.output] = Output(agg.output, "count_star", COUNT_STAR)
            continue
        arg = index[agg.arg_sql]
        count = need("count", arg)  # Figure 8 needs COUNT(e) for every argument
        if agg.func.startswith(HOLISTIC):
            outputs[agg.output] = Output(agg.output, HOLISTIC, need_holistic(agg, arg).column)
        elif agg.func == "count":
            outputs[agg.output] = Output(agg.output, "count", count.column)
        elif agg.func == "avg":
            outputs[agg.output] = Output(agg.output, "avg", need("sum", arg).column, count.column)
        else:
            outputs[agg.output] = Output(agg.output, agg.func, need(agg.func, arg).column)
    for key in parsed.keys:
        if key.declared:
            outputs[key.name] = Output(key.name, "key", key.name)
    for name, key in parsed.key_aliases:
        outputs[name] = Output(name, "key", key)
    ordered = tuple(outputs[name] for name in parsed.order)  # the declared ones, in select order
    stored = tuple(sorted(needed.values(), key=_stored_order))
    having = _having(parsed.having, outputs) if parsed.having else None
    return View(
        name=parsed.name,
        file=parsed.file,
        sql=parsed.sql,
        fact=parsed.fact,
        tables=parsed.tables,
        joins=parsed.joins,
        where=parsed.where,
        keys=parsed.keys,
        arguments=tuple(arguments),
        stored=stored,
        outputs=ordered,
        quoted=parsed.quoted,
        having=having,
    )


def served(o: Output) -> str:
    """A declared output as neutral SQL over the storage table's columns (AVG as SUM/COUNT, NULL at 0)."""
    if o.kind == "avg":
        return (f"CASE WHEN {q(o.count_column)} = 0 THEN NULL "
                f"ELSE CAST({q(o.source)} AS DOUBLE) / {q(o.count_column)} END")
    return q(o.source)


def _having(having: str, outputs: dict[str, Output]) -> str:
    """HAVING over the storage table's columns: each __ns_agg__<output> becomes that output's served
    expression (a hidden aggregate of HAVING alone included), a key name stays its column."""
    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and node.name.startswith(HAVING_AGGREGATE):
            return sqlglot.parse_one(f"({served(outputs[node.name[len(HAVING_AGGREGATE):]])})")
        return node

    return sqlglot.parse_one(having).transform(swap).sql()


def _stored_order(s: StoredAggregate) -> tuple[int, int, str]:
    kinds = ["count_star", "count", "sum", "min", "max", HOLISTIC]
    return (s.arg or 0, kinds.index(s.kind), s.column)
