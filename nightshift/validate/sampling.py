"""The lake side of validation: the sampled groups, recomputed by DuckDB over the lake's Parquet.

prepare_lake builds a DuckDB file beside the lake (gx/uncommitted/lake.duckdb) whose views read the
base tables, holding per summary table the sampled groups' keys and the warehouse's stored rows for
them (a few rows per view, never a whole table); the lake suites (nightshift.expectations) compare.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import sqlalchemy as sa

from lattice.ir import Plan, View
from lattice.sql import duckdb_read_parquet
from lattice.sql import ident as q
from nightshift import expectations as ex
from nightshift.oracle import define_views, duckdb_base
from runtime.lake import Lake, LakeState
from runtime.manifest import Manifest
from warehouse.store import Warehouse


def prepare_lake(plan: Plan, lake: Lake, state: LakeState, warehouse: Warehouse, batch: str,
                 manifest: Manifest | None, sample: int, path: Path) -> dict[str, int]:
    """Build the lake's validation DuckDB: views over the current base tables' Parquet, and per
    summary table the sampled groups' keys and the warehouse's stored rows for them.

    Sampled groups: `sample` random groups of the summary table (catches wrong and extra rows),
    `sample` groups of random base rows (catches missing groups), and every group of a view with
    MIN/MAX that lost rows in this batch (_lost_groups)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for p in (path, path.with_name(path.name + ".wal")):
        p.unlink(missing_ok=True)
    con = duckdb_base(lake, plan.schema, state, database=str(path))
    define_views(con, plan)  # the summary views nested views read, as DuckDB views
    con.execute("BEGIN TRANSACTION")  # one commit for the whole file
    counts = {}
    try:
        with warehouse.engine.connect() as conn:
            for view in plan.views:
                if not view.incremental:
                    continue  # a recompute view is recomputed whole every night: nothing to sample
                cols = [(k.name, k.type) for k in view.keys] + [(s.column, s.type) for s in view.stored]
                if not view.keys:  # a grand total: its one row (or none) is the sample
                    _create(con, ex.sample_table(view), cols, _all_rows(conn, warehouse, view))
                    counts[view.name] = 1
                    continue
                keys = _random_warehouse_groups(conn, warehouse, view, sample)
                keys += _random_base_groups(con, view, sample)
                keys += _lost_groups(con, lake, view, batch, manifest)
                keys = list(dict.fromkeys(keys))
                _create(con, ex.keys_table(view), [(k.name, k.type) for k in view.keys], keys)
                rows = _stored_rows(conn, warehouse, view, keys)
                _create(con, ex.sample_table(view), cols, rows)
                counts[view.name] = len(keys)
        con.execute("COMMIT")
    finally:
        con.close()
    return counts


def _all_rows(conn, warehouse: Warehouse, view: View) -> list[tuple]:
    name = warehouse.ident
    select = ", ".join(name(view, c) for c in [s.column for s in view.stored])
    return [tuple(r) for r in warehouse.dialect.run(conn, f"SELECT {select} FROM {name(view, view.storage_table)}").fetchall()]


def _random_warehouse_groups(conn, warehouse: Warehouse, view: View, n: int) -> list[tuple]:
    if n == 0:
        return []
    name = warehouse.ident
    keys = ", ".join(name(view, k.name) for k in view.keys)
    sql = f"SELECT {keys} FROM {name(view, view.storage_table)} ORDER BY RANDOM() LIMIT {int(n)}"
    return [tuple(r) for r in warehouse.dialect.run(conn, sql).fetchall()]


def _random_base_groups(con, view: View, n: int) -> list[tuple]:
    if n == 0:
        return []
    sql = f"SELECT * FROM ({ex.base_rows_sql(view)}) AS b USING SAMPLE reservoir({int(n)} ROWS)"
    return [tuple(r) for r in con.execute(sql).fetchall()]


def _lost_groups(con, lake: Lake, view: View, batch: str, manifest: Manifest | None) -> list[tuple]:
    """Groups of a view with MIN/MAX that lost rows this batch: the groups of the batch's deleted
    fact rows (under the view's joins and filter, dimensions as of after the batch) and the groups
    propagate recomputed an extreme for (_ns_lost = 1 in the batch's summary-delta: this also
    covers rows that moved away with a dimension change)."""
    if not view.has_min_max:
        return []
    out = []
    changes = sorted(lake.change_dir(view.fact, batch).glob("*.parquet"))
    if changes:
        deleted = f"(SELECT * FROM {duckdb_read_parquet(changes)} WHERE _op = 'delete')"
        out += [tuple(r) for r in con.execute(f"SELECT DISTINCT * FROM ({ex.base_rows_sql(view, deleted)}) AS d").fetchall()]
    entry = manifest.delta(view.name) if manifest else None
    files = lake.delta_files(batch, entry.part) if entry and entry.rows else []
    if files:
        p = entry.prefix
        cols = ", ".join(f"{q(p + k.name)}" for k in view.keys)
        sql = f"SELECT DISTINCT {cols} FROM {duckdb_read_parquet(files)} WHERE {q(p + '_ns_lost')} = 1"
        out += [tuple(r) for r in con.execute(sql).fetchall()]
    return out


def _stored_rows(conn, warehouse: Warehouse, view: View, keys: list[tuple]) -> list[tuple]:
    """The warehouse's rows for the sampled groups: the keys go into a temporary table and are
    matched NULL-safely with hashable equalities (COALESCE plus an IS NULL flag)."""
    if not keys:
        return []
    name = warehouse.ident
    tmp = q("ns_validate_keys")
    cols = ", ".join(f"{q(f'k{i}')} {warehouse.dialect.column_type(k.type)}" for i, k in enumerate(view.keys))
    warehouse.dialect.run(conn, f"CREATE TEMPORARY TABLE {tmp} ({cols})")
    try:
        binds = ", ".join(f":k{i}" for i in range(len(view.keys)))
        conn.execute(sa.text(f"INSERT INTO {tmp} VALUES ({binds})"),
                     [{f"k{i}": v for i, v in enumerate(key)} for key in keys])
        match = " AND ".join(ex.same(f"t.{name(view, k.name)}", f"s.{q(f'k{i}')}", k.type) for i, k in enumerate(view.keys))
        select = ", ".join(f"t.{name(view, c)}" for c in [k.name for k in view.keys] + [s.column for s in view.stored])
        sql = f"SELECT {select} FROM {name(view, view.storage_table)} AS t, {tmp} AS s WHERE {match}"
        return [tuple(r) for r in warehouse.dialect.run(conn, sql).fetchall()]
    finally:
        warehouse.dialect.run(conn, f"DROP TABLE {tmp}")


def _create(con, table: str, columns: list[tuple[str, str]], rows: list[tuple]) -> None:
    """A typed table of `rows` in the lake's DuckDB (through Arrow: executemany is row by row)."""
    con.execute(f"CREATE TABLE {q(table)} ({', '.join(f'{q(c)} {t}' for c, t in columns)})")
    if rows:
        con.register("ns_rows", pa.table({f"c{i}": [r[i] for r in rows] for i in range(len(columns))}))
        con.execute(f"INSERT INTO {q(table)} SELECT * FROM ns_rows")
        con.unregister("ns_rows")
