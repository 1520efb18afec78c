"""The correctness oracle: every summary view recomputed from scratch over the lake's base tables,
by DuckDB directly over the lake's Delta tables (and by Spark in spark_jobs/recompute.py), compared bag-equal
with what the warehouse serves. Shares no code with propagate or refresh.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import duckdb

from lattice.ir import Plan, Schema, View
from lattice.sql import ident, to_dialect
from runtime.delta import register_base
from runtime.lake import Lake, LakeState


@dataclass(frozen=True)
class Mismatch:
    view: str
    missing: list  # rows the recompute has and the warehouse lacks
    extra: list  # rows the warehouse has and the recompute lacks

    def __str__(self) -> str:
        return f"{self.view}: {len(self.missing)} row(s) missing, {len(self.extra)} unexpected; e.g. missing {self.missing[:2]} extra {self.extra[:2]}"


def normalize_value(v):
    """Values compare across engines: ints and decimals by value, floats to 9 significant digits."""
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        return float(f"{v:.9g}")
    if isinstance(v, decimal.Decimal):
        return int(v) if v == v.to_integral_value() else float(f"{float(v):.12g}")
    if isinstance(v, dt.datetime):
        return v.isoformat()
    if isinstance(v, dt.date):
        return v.isoformat()
    return v


def _decimal_against_float(expected: list[tuple], actual: list[tuple]) -> dict[int, int]:
    """The columns (by place) where one side holds a DECIMAL and the other floating point: each with the largest
    scale among its decimals."""
    def kinds(rows):
        out: dict[int, set] = {}
        for r in rows:
            for i, v in enumerate(r):
                if isinstance(v, (float, decimal.Decimal)):
                    out.setdefault(i, set()).add(type(v))
        return out
    e, a = kinds(expected), kinds(actual)
    scales = {}
    for i in set(e) & set(a):
        if {float, decimal.Decimal} <= e[i] | a[i] and e[i] != a[i]:
            exps = [r[i].as_tuple().exponent for r in expected + actual if isinstance(r[i], decimal.Decimal)]
            scales[i] = max((-x for x in exps if isinstance(x, int)), default=0)  # NaN's exponent is no int
    return scales


def bag(rows) -> Counter:
    return Counter(tuple(normalize_value(v) for v in r) for r in rows)


def compare(view: str, expected_rows, actual_rows) -> Mismatch | None:
    """None when the two bags of rows are equal (normalize_value). A column one side gives as DECIMAL and the other
    as floating point (Spark's AVG of a DECIMAL(p,s) is a DECIMAL of scale s+4, a warehouse's may be a DOUBLE) is
    compared at the decimals' scale: its floating-point values rounded to it."""
    expected_rows, actual_rows = [tuple(r) for r in expected_rows], [tuple(r) for r in actual_rows]
    scales = _decimal_against_float(expected_rows, actual_rows)
    if scales:
        at = lambda rows: [tuple(round(v, scales[i]) if i in scales and isinstance(v, float) and math.isfinite(v)  # noqa: E731
                                 else v for i, v in enumerate(r)) for r in rows]
        expected_rows, actual_rows = at(expected_rows), at(actual_rows)
    e, a = bag(expected_rows), bag(actual_rows)
    if e == a:
        return None
    return Mismatch(view, sorted((e - a).elements(), key=repr), sorted((a - e).elements(), key=repr))


def duckdb_base(lake: Lake, schema: Schema, state: LakeState | None = None, database: str = ":memory:") -> duckdb.DuckDBPyConnection:
    """A DuckDB (in memory, or the file `database`) whose tables are the lake's base tables at the versions
    `state` (default: the lake's current state) records: views over their Delta tables, deletion vectors
    honoured (runtime.delta)."""
    state = state or lake.state()
    con = duckdb.connect(database)
    for t in schema.base_tables:
        register_base(con, lake, t, state)
    return con


def recompute_duckdb(con: duckdb.DuckDBPyConnection, view: View) -> list[tuple]:
    return [tuple(r) for r in con.execute(to_dialect(view.sql, "duckdb")).fetchall()]


def define_views(con: duckdb.DuckDBPyConnection, plan: Plan) -> None:
    """Every summary view another view reads, as a DuckDB view of its own SQL (plan order puts the
    views a view reads before it)."""
    read = {r.lower() for v in plan.lake_views for r in v.reads}
    for v in plan.lake_views:  # auxiliary views too: an auxiliary-mode view's IR reads its own
        if v.name.lower() in read:
            names = ", ".join(ident(o.name) for o in v.outputs)
            con.execute(f"CREATE VIEW {ident(v.name)}({names}) AS {to_dialect(v.sql, 'duckdb')}")


def check_all(plan: Plan, lake: Lake, read_view) -> list[Mismatch]:
    """Compare every view served by the warehouse (read_view(view) -> rows) with a DuckDB recompute."""
    con = duckdb_base(lake, plan.schema)
    define_views(con, plan)
    try:
        out = []
        for v in plan.views:
            m = compare(v.name, recompute_duckdb(con, v), read_view(v))
            if m:
                out.append(m)
        return out
    finally:
        con.close()
