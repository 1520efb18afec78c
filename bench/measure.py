"""The alternatives Section 6 of paper 001 compares summary-delta maintenance with, each measured on
the project's current state (the DuckDB warehouse file and the lake's Parquet):

    rematerialize   Spark recomputes every summary table along the lattice and the warehouse loads them
    duckdb          DuckDB recomputes every view's SQL over the base Parquet (no load)
    counting        [GMS93]: delete the groups the changes touch, recompute them from the base
    bare_merge      the physical limit of refresh: one plain MERGE of the night's summary-delta rows

counting and bare_merge run inside a transaction that is rolled back, so they leave the summary
tables as refresh made them.
"""

from __future__ import annotations

import time
from pathlib import Path

import sqlglot

from lattice import emit
from lattice.ir import View
from lattice.sql import duckdb_read_parquet as read_parquet
from lattice.sql import ident as q
from lattice.sql import literal as lit
from lattice.sql import to_dialect
from nightshift.cycle import Cycle
from nightshift.oracle import duckdb_base
from runtime.delta import register_base
from runtime.options import Options
from spark_jobs.materialize import materialize
from lattice.refresh import delta_columns, summary_columns


def readers(cycle: Cycle, name: str) -> list[str]:
    """The views that read the lake view `name` (an auxiliary view or map: more than one when shared)."""
    return [v.name for v in cycle.plan.views if name in v.reads]


def load_base(cycle: Cycle, batch: str) -> None:
    """A first load's base tables alone (apply-base of `batch`, no night propagated; materialize follows), each laid
    out as the nights will keep it (Cycle.layouts)."""
    from runtime.layout import partitions
    from spark_jobs.apply_base import apply_base

    state = cycle.lake.state()
    apply_base(cycle.spark, cycle.plan, cycle.lake, batch, state, partitions=partitions(cycle.layouts(state, batch)))


def rematerialize(cycle: Cycle) -> tuple[float, dict]:
    """Seconds and per-view {rows, parent} of Spark's recompute along the lattice plus the warehouse load."""
    t = time.perf_counter()
    state = cycle.lake.state()
    out = cycle.lake.root / "materialized"
    views = materialize(cycle.spark, cycle.plan, cycle.lake, state, out, along_lattice_of=Options(lattice=True))
    cycle.warehouse.materialize(cycle.plan, {v.name: out / v.name for v in cycle.plan.views}, state.last or "", views)
    return time.perf_counter() - t, views


def duckdb_recompute(cycle: Cycle) -> float:
    """Seconds for DuckDB to recompute every view from the base Parquet (what a single box would do)."""
    con = duckdb_base(cycle.lake, cycle.plan.schema)
    try:
        t = time.perf_counter()
        for v in cycle.plan.views:
            con.execute(f"CREATE OR REPLACE TEMP TABLE _r AS {v.sql}")
        return time.perf_counter() - t
    finally:
        con.close()


def counting(cycle: Cycle, batch: str) -> tuple[float, dict]:
    """[GMS93] as Section 6 describes it, after apply-base (the base holds the batch): for every
    summary table, the groups the batch's changes touch are deleted and recomputed from the base.

    Returns seconds and per view Appendix A's tuple accesses: change rows read, rows deleted, base
    rows in the recomputed groups, rows inserted."""
    changes = _change_relations(cycle, batch)
    d = cycle.warehouse.dialect
    stats = {}
    with cycle.warehouse.engine.connect() as conn:
        tx = conn.begin()
        try:
            t = time.perf_counter()
            _register_base(conn, cycle, changes)
            for view in cycle.plan.views:
                stats[view.name] = _count_view(conn, d, view, changes)
            seconds = time.perf_counter() - t
        finally:
            tx.rollback()
    return seconds, stats


def _change_relations(cycle: Cycle, batch: str) -> dict[str, list[Path]]:
    return cycle.lake.batch_files(batch, [t.name for t in cycle.plan.schema.base_tables])


def _register_base(conn, cycle: Cycle, changes: dict[str, list[Path]]) -> None:
    """The relations emit's SQL reads, as DuckDB views: base tables (old = new: the bench's nights
    change only the fact table) and the batch's insertions and deletions."""
    state = cycle.lake.state()
    for t in cycle.plan.schema.base_tables:
        register_base(conn.connection.driver_connection, cycle.lake, t, state)  # the lake's one DuckDB reader
        cols = ", ".join(q(c.name) for c in t.columns)
        conn.exec_driver_sql(f"CREATE OR REPLACE TEMP VIEW {emit.rel('old', t.name)} AS SELECT {cols} FROM {q(t.name)}")
        conn.exec_driver_sql(f"CREATE OR REPLACE TEMP VIEW {emit.rel('new', t.name)} AS SELECT * FROM {emit.rel('old', t.name)}")
        files = changes.get(t.name)
        for kind, op in (("ins", "insert"), ("del", "delete")):
            src = (read_parquet(files) if files
                   else f"(SELECT * FROM {emit.rel('old', t.name)} LIMIT 0)")
            where = f" WHERE _op = {lit(op)}" if files else ""
            conn.exec_driver_sql(f"CREATE OR REPLACE TEMP VIEW {emit.rel(kind, t.name)} AS SELECT {cols} FROM {src}{where}")


def _count_view(conn, d, view: View, changes: dict) -> dict:
    changed = frozenset(t for t, f in changes.items() if f)
    keys = [d.col(view, k.name) for k in view.keys]
    sd = to_dialect(emit.summary_delta(view, changed), "duckdb")
    d.create_temp_as(conn, "__ns_affected", f"SELECT DISTINCT {', '.join(keys) or '1 AS _one'} FROM ({sd}) AS sd")
    t = d.table(view)
    deleted = conn.exec_driver_sql(
        f"DELETE FROM {t} AS t WHERE EXISTS (SELECT 1 FROM __ns_affected AS a WHERE {d.keys_match(view, 't', 'a')})"
    ).rowcount
    # recompute the affected groups from the base: the base rows filtered by the affected keys, then grouped
    refs = {k.name: f"{q(k.ref.table)}.{q(k.ref.column)}" for k in view.keys}
    on = " AND ".join(f"a.{d.col(view, k)} IS NOT DISTINCT FROM {ref}" for k, ref in refs.items()) or "TRUE"
    select = sqlglot.parse_one(emit.materialize(view)).where(f"EXISTS (SELECT 1 FROM __ns_affected AS a WHERE {on})")
    cols = [q(c) for c, _ in summary_columns(view)]
    into = [d.col(view, k.name) for k in view.keys] + [q(s.column) for s in view.stored]
    d.create_temp_as(conn, "__ns_recomputed", to_dialect(select.sql(), "duckdb"))
    inserted, base_rows = conn.exec_driver_sql(f"SELECT COUNT(*), COALESCE(SUM({q(_count_star(view))}), 0) FROM __ns_recomputed").fetchone()
    conn.exec_driver_sql(f"INSERT INTO {t} ({', '.join(into)}) SELECT {', '.join(cols)} FROM __ns_recomputed")
    return {"deleted": int(deleted), "base_rows": int(base_rows), "inserted": int(inserted)}


def _count_star(view: View) -> str:
    return next(s.column for s in view.stored if s.kind == "count_star")


def bare_merge(cycle: Cycle, batch: str, statement: str = "merge") -> float:
    """The physical limit of refresh on this warehouse: stage each summary-delta of `batch` and MERGE
    it into its summary table by key with plain additions (no emptied groups, no exact MIN/MAX, no
    NULL-safe keys, no ledger), in one transaction that is rolled back. Run before refresh.
    `statement`: "merge" (MERGE INTO) or "upsert" (INSERT … ON CONFLICT DO UPDATE through the summary
    table's unique index; PostgreSQL only)."""
    with cycle.warehouse.engine.connect() as conn:
        tx = conn.begin()
        try:
            t0 = time.perf_counter()
            bare_merges(cycle, batch, conn, statement)
            return time.perf_counter() - t0
        finally:
            tx.rollback()


def bare_merges(cycle: Cycle, batch: str, conn, statement: str = "merge") -> None:
    """Stage each summary-delta of `batch` and MERGE it plainly into its summary table over `conn` (the
    caller's transaction: rolled back by bare_merge, committed on a copy by bench/window.py)."""
    manifest = cycle.lake.read_manifest(batch)
    d = cycle.warehouse.dialect
    for view in cycle.plan.views:
        entry = manifest.delta(view.name)
        files = cycle.lake.delta_files(batch, entry.part)
        if files:
            d.stage_parquet(conn, "__ns_bare", files, d.staging(view, delta_columns(view), entry.prefix))
            conn.exec_driver_sql(_upsert_sql(d, view) if statement == "upsert" and view.keys else _merge_sql(d, view))


def _merge_sql(d, view: View) -> str:
    on = " AND ".join(f"t.{d.col(view, k.name)} = s.{d.col(view, k.name)}" for k in view.keys) or "TRUE"
    sets = ", ".join(f"{q(s.column)} = " + (f"s.{q(s.column)}" if s.kind in ("min", "max") else f"t.{q(s.column)} + s.{q(s.column)}")
                     for s in view.stored)
    cols = [d.col(view, k.name) for k in view.keys] + [q(s.column) for s in view.stored]
    return (f"MERGE INTO {d.table(view)} AS t USING __ns_bare AS s ON {on} "
            f"WHEN MATCHED THEN UPDATE SET {sets} "
            f"WHEN NOT MATCHED THEN INSERT ({', '.join(cols)}) VALUES ({', '.join('s.' + c for c in cols)})")


def _upsert_sql(d, view: View) -> str:
    """The bare MERGE as PostgreSQL's INSERT … ON CONFLICT DO UPDATE (an index probe per row through the
    unique index on the keys that refresh keeps), with the same plain additions as _merge_sql."""
    keys = [d.col(view, k.name) for k in view.keys]
    cols = keys + [q(s.column) for s in view.stored]
    sets = ", ".join(f"{q(s.column)} = " + (f"EXCLUDED.{q(s.column)}" if s.kind in ("min", "max")
                                           else f"t.{q(s.column)} + EXCLUDED.{q(s.column)}") for s in view.stored)
    return (f"INSERT INTO {d.table(view)} AS t ({', '.join(cols)}) SELECT {', '.join(cols)} FROM __ns_bare "
            f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {sets}")
