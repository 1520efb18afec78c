"""Figure 8 (paper 001), the refresh function, as SQL expressions: one place for it.

The warehouse's refresh applies a summary-delta to a summary table with these expressions
(warehouse/dialects.py); propagate applies the same ones in Spark to the lake copy of a view that
other views read (the nested mode), so both states of the view agree row for row.
"""

from __future__ import annotations

from lattice.ir import DISTINCT_COUNT, StoredAggregate, View
from lattice.sql import ident as q


def merged(view: View, s: StoredAggregate, t: str, c: str, lost: str) -> str:
    """Figure 8's new value of stored aggregate s of an existing group t given its summary-delta c.

    `lost` is the SQL of "this group lost rows in this batch" (its MIN/MAX in c is then exact)."""
    col = q(s.column)
    if s.kind in ("count_star", "count"):
        return f"{t}.{col} + {c}.{col}"
    if s.func == DISTINCT_COUNT:  # recomputed for every changed group; 0 over no values
        return f"COALESCE({c}.{col}, 0)"
    cnt = q(view.stored_of("count", s.arg).column)
    empty = f"{t}.{cnt} + {c}.{cnt} = 0"
    if s.kind == "sum":
        return f"CASE WHEN {empty} THEN NULL ELSE COALESCE({t}.{col}, 0) + COALESCE({c}.{col}, 0) END"
    if s.kind == "holistic":  # propagate recomputed it for every changed group (emit.holistic_values)
        return f"CASE WHEN {empty} THEN NULL ELSE {c}.{col} END"
    pick = "LEAST" if s.kind == "min" else "GREATEST"
    return f"CASE WHEN {empty} THEN NULL WHEN {lost} THEN {c}.{col} ELSE {pick}({t}.{col}, {c}.{col}) END"


def fresh(view: View, s: StoredAggregate, c: str) -> str:
    """A new group's stored aggregate: the delta's, NULL where its COUNT(e) is 0 (Figure 8)."""
    col = q(s.column)
    if s.kind in ("count_star", "count"):
        return f"{c}.{col}"
    if s.func == DISTINCT_COUNT:
        return f"COALESCE({c}.{col}, 0)"
    cnt = q(view.stored_of("count", s.arg).column)
    return f"CASE WHEN {c}.{cnt} = 0 THEN NULL ELSE {c}.{col} END"


def summary_columns(view: View) -> list[tuple[str, str]]:
    """(column, type) of a summary table's contents: group-by columns, stored aggregates."""
    return [(k.name, k.type) for k in view.keys] + [(s.column, s.type) for s in view.stored]


def delta_columns(view: View) -> list[tuple[str, str]]:
    """(column, type) of a staged summary-delta: the summary table's columns plus _ns_lost."""
    return summary_columns(view) + [("_ns_lost", "INTEGER")]
