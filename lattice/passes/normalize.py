"""Pass 3: normalize aggregates (paper 001, Table 2 and Figure 8).

AVG(e) becomes SUM(e)/COUNT(e); every view keeps a hidden COUNT(*) (a group is deleted when it
reaches 0) and a hidden COUNT(e) for every SUM/AVG/MIN/MAX argument (the aggregate becomes NULL
when it reaches 0). Equal argument expressions share their stored columns.
"""

from __future__ import annotations

from lattice import types
from lattice.ir import Argument, Output, StoredAggregate, View
from lattice.passes.parse_views import ParsedView

COUNT_STAR = "_ns_count"


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

    outputs: dict[str, Output] = {}
    for agg in parsed.aggregates:
        if agg.arg_sql is None:
            outputs[agg.output] = Output(agg.output, "count_star", COUNT_STAR)
            continue
        arg = index[agg.arg_sql]
        count = need("count", arg)  # Figure 8 needs COUNT(e) for every argument
        if agg.func == "count":
            outputs[agg.output] = Output(agg.output, "count", count.column)
        elif agg.func == "avg":
            outputs[agg.output] = Output(agg.output, "avg", need("sum", arg).column, count.column)
        else:
            outputs[agg.output] = Output(agg.output, agg.func, need(agg.func, arg).column)
    for key in parsed.keys:
        if key.declared:
            outputs[key.name] = Output(key.name, "key", key.name)
    ordered = tuple(outputs[name] for name in parsed.order)
    stored = tuple(sorted(needed.values(), key=_stored_order))
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
    )


def _stored_order(s: StoredAggregate) -> tuple[int, int]:
    kinds = ["count_star", "count", "sum", "min", "max"]
    return (s.arg or 0, kinds.index(s.kind))
