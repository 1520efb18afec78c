"""The warehouse side: summary tables, serving views, the ledger, and refresh (paper 001, Figure 8).

Each summary view <V> is stored as table "<V>__ns" (group-by columns plus the hidden aggregates
of Table 2) behind a serving view "<V>" that exposes exactly the declared columns. refresh applies
every summary-delta and writes the ledger row in ONE transaction: a reader sees all of a night or
none of it.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from lattice.errors import PlanChanged, WarehouseError
from lattice.ir import Plan, View
from nightshift.faults import checkpoint
from warehouse.dialects import Dialect, dialect_for, lit, q

LEDGER = "ns_ledger"


@dataclass(frozen=True)
class LedgerRow:
    seq: int
    batch_id: str
    kind: str  # 'batch' | 'materialize'
    plan: str
    position: str  # the last batch the summary tables reflect after this row
    stats: dict


def mask(url: str) -> str:
    """The URL without its password, for messages and logs."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)


class Warehouse:
    def __init__(self, url: str, root: Path):
        self.url = _resolve(url, root)
        self.dialect: Dialect = dialect_for(self.url)
        self._engine: sa.Engine | None = None

    # ---------------------------------------------------------------- connection
    @property
    def engine(self) -> sa.Engine:
        if self._engine is None:
            if self.dialect.name == "duckdb":
                path = make_url(self.url).database
                if path and path != ":memory:" and not Path(path).parent.is_dir():
                    raise WarehouseError(
                        f"warehouse {mask(self.url)} is unreachable: folder {Path(path).parent} does not exist"
                    )
            try:
                self._engine = sa.create_engine(self.url, poolclass=sa.pool.NullPool)
                with self._engine.connect() as c:
                    c.exec_driver_sql("SELECT 1")
            except Exception as e:
                self._engine = None
                raise WarehouseError(f"warehouse {mask(self.url)} is unreachable: {_first_line(e)}") from None
        return self._engine

    def dispose(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    # ---------------------------------------------------------------- ledger
    def _ensure_ledger(self, conn) -> None:
        conn.exec_driver_sql(
            f"CREATE TABLE IF NOT EXISTS {q(LEDGER)} (seq INTEGER NOT NULL, batch_id VARCHAR NOT NULL, "
            f"kind VARCHAR NOT NULL, plan VARCHAR NOT NULL, position VARCHAR NOT NULL, applied_at TIMESTAMP, "
            f"stats VARCHAR, validated_at TIMESTAMP, published_at TIMESTAMP)"
        )

    def ledger(self, conn=None) -> list[LedgerRow]:
        if conn is None:
            with self.engine.connect() as c:
                return self.ledger(c)
        if not self._has_table(conn, LEDGER):
            return []
        rows = conn.exec_driver_sql(
            f"SELECT seq, batch_id, kind, plan, position, stats FROM {q(LEDGER)} ORDER BY seq"
        ).fetchall()
        return [LedgerRow(r[0], r[1], r[2], r[3], r[4], json.loads(r[5] or "{}")) for r in rows]

    def position(self, conn=None) -> LedgerRow | None:
        rows = self.ledger(conn)
        return rows[-1] if rows else None

    def _append_ledger(self, conn, batch: str, kind: str, plan: Plan, position: str, stats: dict) -> None:
        self._ensure_ledger(conn)
        seq = conn.exec_driver_sql(f"SELECT COALESCE(MAX(seq), 0) + 1 FROM {q(LEDGER)}").scalar()
        conn.exec_driver_sql(
            f"INSERT INTO {q(LEDGER)} (seq, batch_id, kind, plan, position, applied_at, stats) "
            f"VALUES ({int(seq)}, {lit(batch)}, {lit(kind)}, {lit(plan.fingerprint)}, {lit(position)}, "
            f"CURRENT_TIMESTAMP, {lit(json.dumps(stats, default=str))})"
        )

    def _has_table(self, conn, name: str) -> bool:
        return sa.inspect(conn).has_table(name)

    # ---------------------------------------------------------------- summary tables
    def serving_view_sql(self, view: View) -> str:
        cols = []
        for o in view.outputs:
            if o.kind == "avg":
                expr = f"CASE WHEN {q(o.count_column)} = 0 THEN NULL ELSE CAST({q(o.source)} AS DOUBLE PRECISION) / {q(o.count_column)} END"
            else:
                expr = q(o.source)
            cols.append(f"{expr} AS {q(o.name)}")
        return f"CREATE OR REPLACE VIEW {q(view.name)} AS SELECT {', '.join(cols)} FROM {q(view.storage_table)}"

    def materialize(self, plan: Plan, parquet_dirs: dict[str, Path], position: str, stats: dict) -> None:
        """Replace every summary table by freshly computed contents, in one transaction."""
        with self.engine.begin() as conn:
            self.dialect.lock(conn, plan.fingerprint)
            for view in plan.views:
                conn.exec_driver_sql(f"DROP VIEW IF EXISTS {q(view.name)}")
                conn.exec_driver_sql(f"DROP TABLE IF EXISTS {q(view.storage_table)}")
                conn.exec_driver_sql(self.dialect.summary_ddl(view))
                files = sorted(parquet_dirs[view.name].glob("*.parquet"))
                if files:
                    columns = [k.name for k in view.keys] + [s.column for s in view.stored]
                    self.dialect.stage_parquet(conn, "__ns_stage", files, [(col, col) for col in columns])
                    cols = ", ".join(q(k.name) for k in view.keys) + (", " if view.keys else "")
                    cols += ", ".join(q(s.column) for s in view.stored)
                    conn.exec_driver_sql(f"INSERT INTO {q(view.storage_table)} ({cols}) SELECT {cols} FROM {q('__ns_stage')}")
                conn.exec_driver_sql(self.serving_view_sql(view))
            self._append_ledger(conn, f"materialize@{position or 'empty'}", "materialize", plan, position, stats)

    def summary_tables_exist(self, plan: Plan) -> bool:
        with self.engine.connect() as conn:
            return all(self._has_table(conn, v.storage_table) for v in plan.views)

    # ---------------------------------------------------------------- refresh (Figure 8)
    def refresh(
        self,
        plan: Plan,
        batch: str,
        deltas: dict[str, tuple[list[Path], str]],
        expected_position: str,
        progress: Callable[[str], None] = lambda _: None,
    ) -> dict | None:
        """Apply every summary-delta of `batch` plus its ledger row in one transaction.

        Returns the per-view statistics, or None when the batch is already in the ledger (no-op).
        """
        t0 = time.perf_counter()
        with self.engine.begin() as conn:
            self.dialect.lock(conn, plan.fingerprint)
            ledger = self.ledger(conn)
            if any(r.batch_id == batch and r.kind == "batch" for r in ledger):
                return None
            here = ledger[-1] if ledger else None
            if here is None:
                raise WarehouseError(f"refresh {batch}: the warehouse has no summary tables yet; run nightshift materialize")
            if here.plan != plan.fingerprint:
                raise PlanChanged(
                    f"refresh {batch}: sql/schema.sql or sql/summaries changed since the summary tables were built "
                    f"(plan {here.plan} -> {plan.fingerprint}); run nightshift materialize"
                )
            if here.position != expected_position:
                raise WarehouseError(
                    f"refresh {batch}: the summary-deltas were computed against base state {expected_position or 'empty'} "
                    f"but the summary tables are at {here.position or 'empty'}; rerun nightshift propagate --batch {batch}"
                )
            stats = {}
            for i, view in enumerate(plan.views, 1):
                t1 = time.perf_counter()
                files, prefix = deltas[view.name]
                stats[view.name] = self._refresh_view(conn, view, files, prefix, batch)
                stats[view.name]["seconds"] = round(time.perf_counter() - t1, 3)
                progress(
                    f"refresh {batch}: [{i}/{len(plan.views)}] {view.name}: +{stats[view.name]['inserted']} "
                    f"~{stats[view.name]['updated']} -{stats[view.name]['deleted']} in {stats[view.name]['seconds']:.2f}s"
                )
                checkpoint(f"refresh:after_merge:{view.name}")
            stats["_seconds"] = round(time.perf_counter() - t0, 3)
            self._append_ledger(conn, batch, "batch", plan, batch, stats)
            checkpoint("refresh:before_commit")
        return stats

    def _refresh_view(self, conn, view: View, files: list[Path], prefix: str, batch: str) -> dict:
        if not files:
            return {"delta_rows": 0, "inserted": 0, "updated": 0, "deleted": 0}
        t, d, c = q(view.storage_table), q("__ns_delta"), q("__ns_class")
        columns = [k.name for k in view.keys] + [s.column for s in view.stored] + ["_ns_lost"]
        self.dialect.stage_parquet(conn, "__ns_delta", files, [(prefix + col, col) for col in columns])
        match = self.dialect.keys_match(view, "t", "d")
        conn.exec_driver_sql(
            f"CREATE OR REPLACE TEMP TABLE {c} AS SELECT d.*, t.{q('_ns_count')} IS NOT NULL AS _ns_found, "
            f"COALESCE(t.{q('_ns_count')} + d.{q('_ns_count')} = 0, FALSE) AS _ns_gone "
            f"FROM {d} AS d LEFT JOIN {t} AS t ON {match}"
        )
        counts = conn.exec_driver_sql(
            f"SELECT COALESCE(SUM(CASE WHEN NOT _ns_found AND {q('_ns_count')} > 0 THEN 1 ELSE 0 END), 0), "
            f"COALESCE(SUM(CASE WHEN _ns_found AND NOT _ns_gone THEN 1 ELSE 0 END), 0), "
            f"COALESCE(SUM(CASE WHEN _ns_gone THEN 1 ELSE 0 END), 0), "
            f"COALESCE(SUM(CASE WHEN NOT _ns_found AND {q('_ns_count')} < 0 THEN 1 ELSE 0 END), 0) FROM {c}"
        ).fetchone()
        inserted, updated, deleted, broken = (int(x) for x in counts)
        if broken:
            raise WarehouseError(
                f"refresh {batch}: view {view.name}: {broken} summary-delta group(s) remove rows from groups the summary "
                f"table does not hold; the summary table is out of sync with the base: run nightshift materialize"
            )
        cm = self.dialect.keys_match(view, "t", "c")
        if deleted:
            conn.exec_driver_sql(f"DELETE FROM {t} AS t USING {c} AS c WHERE {cm} AND c._ns_gone")
        if updated:
            sets = ", ".join(f"{q(s.column)} = {self._merged(view, s)}" for s in view.stored)
            conn.exec_driver_sql(f"UPDATE {t} AS t SET {sets} FROM {c} AS c WHERE {cm} AND c._ns_found AND NOT c._ns_gone")
        if inserted:
            cols = [q(k.name) for k in view.keys] + [q(s.column) for s in view.stored]
            vals = [f"c.{q(k.name)}" for k in view.keys] + [self._fresh(view, s) for s in view.stored]
            conn.exec_driver_sql(
                f"INSERT INTO {t} ({', '.join(cols)}) SELECT {', '.join(vals)} FROM {c} AS c "
                f"WHERE NOT c._ns_found AND c.{q('_ns_count')} > 0"
            )
        return {"delta_rows": inserted + updated + deleted, "inserted": inserted, "updated": updated, "deleted": deleted}

    @staticmethod
    def _merged(view: View, s) -> str:
        """Figure 8's update of one stored aggregate of an existing group t from its delta c."""
        col = q(s.column)
        if s.kind in ("count_star", "count"):
            return f"t.{col} + c.{col}"
        cnt = q(view.stored_of("count", s.arg).column)
        empty = f"t.{cnt} + c.{cnt} = 0"
        if s.kind == "sum":
            return f"CASE WHEN {empty} THEN NULL ELSE COALESCE(t.{col}, 0) + COALESCE(c.{col}, 0) END"
        pick = "LEAST" if s.kind == "min" else "GREATEST"
        return f"CASE WHEN {empty} THEN NULL WHEN c.{q('_ns_lost')} = 1 THEN c.{col} ELSE {pick}(t.{col}, c.{col}) END"

    @staticmethod
    def _fresh(view: View, s) -> str:
        """A new group's stored aggregate: the delta's, NULL where its COUNT(e) is 0."""
        col = q(s.column)
        if s.kind in ("count_star", "count"):
            return f"c.{col}"
        cnt = q(view.stored_of("count", s.arg).column)
        return f"CASE WHEN c.{cnt} = 0 THEN NULL ELSE c.{col} END"

    # ---------------------------------------------------------------- reading
    def read_view(self, view: View) -> list[tuple]:
        cols = ", ".join(q(o.name) for o in view.outputs)
        with self.engine.connect() as conn:
            return [tuple(r) for r in conn.exec_driver_sql(f"SELECT {cols} FROM {q(view.name)}").fetchall()]


def _resolve(url: str, root: Path) -> str:
    """duckdb:///relative.duckdb is relative to the project folder, not to the current directory."""
    if url.startswith("duckdb:///") and not url.startswith("duckdb:////") and ":memory:" not in url:
        rel = url[len("duckdb:///"):]
        return f"duckdb:///{(Path(root) / rel).resolve()}"
    return url


def _first_line(e: Exception) -> str:
    text = str(getattr(e, "orig", None) or e)
    return text.strip().splitlines()[0] if text.strip() else type(e).__name__
