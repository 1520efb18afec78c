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

import pyarrow.parquet as pq
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from lattice.ir import Plan, View
from lattice.layer import LEDGER_KEY, LayerDiff, changed_message, describe, diff
from lattice.refresh import delta_columns
from lattice.sql import ident as q
from lattice.sql import literal as lit
from runtime.errors import PlanChanged, WarehouseError, WarehouseStateError
from runtime.faults import checkpoint
from warehouse.dialects import Dialect, NewKeyConflict, dialect_for

LEDGER = "ns_ledger"


def _dropped_view(name: str, described: dict) -> View:
    """Enough of a view that is no longer compiled to name its serving view and storage table."""
    return View(name=name, file="", sql="", fact="", tables=(), joins=(), where=None, keys=(),
                quoted=tuple(described.get("quoted") or ()))


@dataclass(frozen=True)
class LedgerRow:
    seq: int
    batch_id: str
    kind: str  # 'batch' | 'materialize' | 'apply' (nightshift apply: views added, changed, dropped)
    plan: str
    position: str  # the last batch the summary tables reflect after this row
    stats: dict
    validated_at: str | None = None  # nightshift validate passed (no critical failure)
    published_at: str | None = None  # nightshift publish (the DAG's publish task) after validate


@dataclass(frozen=True)
class StagedDelta:
    """What refresh applies to one summary table: the Parquet files of its summary-delta (mode
    'delta') or of its whole contents tonight (mode 'recompute'), their column prefix, why, and a
    recompute view's column types."""

    files: list[Path]
    prefix: str
    mode: str = "delta"
    reason: str = ""
    columns: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class RefreshHints:
    """What is known about a night's changes (paper 001, 4.3), from its manifest and nightshift.toml.

    insert_only: the views whose summary-delta deletes nothing (the batch deletes no row of any table and
    the view is not nested): every delta COUNT(*) is positive.
    new_keys: views declared in [refresh] new_keys: every summary-delta group is new every night.
    optimize: False refreshes every table by the plain Figure 8 path (NIGHTSHIFT_REFRESH_OPT=0).
    """

    insert_only: frozenset[str] = frozenset()  # views whose summary-delta deletes nothing tonight
    deletes: bool = True  # the batch deletes rows (else only a view over another view's rows may delete tonight)
    new_keys: frozenset[str] = frozenset()
    optimize: bool = True


def _stamp(value) -> str | None:
    """A ledger timestamp as ISO text (DuckDB and PostgreSQL return datetime)."""
    return None if value is None else (value.isoformat(sep=" ", timespec="seconds") if hasattr(value, "isoformat") else str(value))


_KEYWORD_SECRET = re.compile(r"(?i)\b(password|passwd|pwd|sslpassword)(\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]+)")


def mask(url: str) -> str:
    """The URL without its password, for messages and logs: a SQLAlchemy URL's password, and any
    password=... of a libpq keyword string (host=... password=...) or of the URL's query."""
    try:
        text = make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL at all (a libpq keyword string, a typo): mask what looks secret
        text = re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)
    return _KEYWORD_SECRET.sub(lambda m: f"{m.group(1)}{m.group(2)}***", text)


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
        self.dialect.run(conn, 
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
        rows = self.dialect.run(conn, 
            f"SELECT seq, batch_id, kind, plan, position, stats, validated_at, published_at FROM {q(LEDGER)} ORDER BY seq"
        ).fetchall()
        return [LedgerRow(r[0], r[1], r[2], r[3], r[4], json.loads(r[5] or "{}"), _stamp(r[6]), _stamp(r[7])) for r in rows]

    def publish(self, batch: str) -> tuple[str, bool]:
        """Mark night `batch` published in its ledger row: the last step of the nightly cycle, after
        validate passed (DESIGN: publish follows validation). Returns (published_at, newly): a rerun
        keeps the first stamp and changes nothing. A night that is not refreshed, or whose last
        validation did not pass, is refused."""
        with self.engine.begin() as conn:
            row = None
            if self._has_table(conn, LEDGER):
                row = self.dialect.run(conn, 
                    f"SELECT seq, validated_at, published_at FROM {q(LEDGER)} WHERE batch_id = {lit(batch)} "
                    f"AND kind = 'batch' ORDER BY seq DESC"
                ).first()
            if row is None:
                raise WarehouseStateError(f"publish {batch}: batch {batch} is not in the ledger of {mask(self.url)}; "
                                          f"run nightshift run --batch {batch}, then nightshift validate --batch {batch}")
            if row[2] is not None:
                return _stamp(row[2]), False
            if row[1] is None:
                raise WarehouseStateError(f"publish {batch}: batch {batch} has not passed validation (validated_at is empty); "
                                          f"run nightshift validate --batch {batch} and fix what it reports first")
            stamp = self.dialect.run(conn, 
                f"UPDATE {q(LEDGER)} SET published_at = CURRENT_TIMESTAMP WHERE seq = {int(row[0])} RETURNING published_at"
            ).scalar()
        return _stamp(stamp), True

    def record_validation(self, seq: int, success: bool, stats: dict) -> None:
        """The outcome of nightshift validate in ledger row `seq`: validated_at only on success (publish
        requires it), the summary in stats either way."""
        stamp = "CURRENT_TIMESTAMP" if success else "NULL"
        with self.engine.begin() as conn:
            conn.execute(sa.text(f"UPDATE {q(LEDGER)} SET validated_at = {stamp}, stats = :stats WHERE seq = :seq"),
                         {"stats": json.dumps(stats, default=str), "seq": int(seq)})

    def _append_ledger(self, conn, batch: str, kind: str, plan: Plan, position: str, stats: dict) -> None:
        self._ensure_ledger(conn)
        seq = self.dialect.run(conn, f"SELECT COALESCE(MAX(seq), 0) + 1 FROM {q(LEDGER)}").scalar()
        self.dialect.run(conn, 
            f"INSERT INTO {q(LEDGER)} (seq, batch_id, kind, plan, position, applied_at, stats) "
            f"VALUES ({int(seq)}, {lit(batch)}, {lit(kind)}, {lit(plan.fingerprint)}, {lit(position)}, "
            f"CURRENT_TIMESTAMP, {lit(json.dumps(stats, default=str))})"
        )

    def layer_diff(self, plan: Plan, ledger: list[LedgerRow] | None = None) -> LayerDiff:
        """The compiled plan against the summary layer the ledger says is built (lattice/layer.py)."""
        ledger = self.ledger() if ledger is None else ledger
        built = next((r.stats.get(LEDGER_KEY) for r in reversed(ledger) if r.kind in ("materialize", "apply")), None)
        return diff(built, plan)

    def _has_table(self, conn, name: str) -> bool:
        return sa.inspect(conn).has_table(name)

    # ---------------------------------------------------------------- summary tables
    def storage_name(self, view: View) -> str:
        """The storage table's name as the warehouse spells it (unquoted)."""
        return self.dialect.storage_name(view)

    def sql_name(self, view: View, name: str) -> str:
        """A quoted identifier for a column of `view` (or the view itself) as named in the warehouse."""
        return self.dialect.col(view, name)

    def ident(self, view: View, name: str) -> str:
        """The quoted identifier of `name` (a column, the serving view, or the storage table
        view.storage_table) as the warehouse spells it (PostgreSQL folds unquoted names to lower case)."""
        if name == view.storage_table:
            return q(self.storage_name(view))
        return self.sql_name(view, name)

    def materialize(self, plan: Plan, parquet_dirs: dict[str, Path], position: str, stats: dict) -> None:
        """Replace every summary table by freshly computed contents, in one transaction. A recompute
        view is created with the column types its result has (stats[view]["columns"]); without them
        (an empty project: nothing computed yet) its table waits for the first refresh."""
        d = self.dialect
        with self.engine.begin() as conn:
            d.lock(conn)
            for view in plan.views:
                self._rebuild(conn, view, parquet_dirs[view.name], stats)
            self._append_ledger(conn, f"materialize@{position or 'empty'}", "materialize", plan, position,
                                {**stats, LEDGER_KEY: describe(plan)})

    def apply_layer(self, plan: Plan, change: LayerDiff, parquet_dirs: dict[str, Path], position: str, stats: dict,
                    progress: Callable[[str], None] = lambda _: None) -> None:
        """nightshift apply: in ONE transaction, drop the dropped views (serving view and storage), replace
        the added and changed ones by their freshly computed contents (`parquet_dirs`), leave every other
        summary table untouched, and record the new plan and layer in the ledger."""
        d = self.dialect
        with self.engine.begin() as conn:
            d.lock(conn)
            ledger = self.ledger(conn)
            if ledger and ledger[-1].position != position:
                raise WarehouseError(f"apply: the summary tables moved to {ledger[-1].position or 'empty'} while the views "
                                     f"were computed at {position or 'empty'}; rerun nightshift apply")
            for name in change.dropped:
                self._drop(conn, _dropped_view(name, change.built.get(name) or {}))
                progress(f"apply: dropped {name}")
            checkpoint("apply:after_drop")
            for name in change.rebuild:
                self._rebuild(conn, plan.view(name), parquet_dirs[name], stats)
                progress(f"apply: built {name}")
                checkpoint(f"apply:after_view:{name}")
            self._append_ledger(conn, f"apply@{position or 'empty'}", "apply", plan, position,
                                {**stats, LEDGER_KEY: describe(plan)})

    def row_count(self, view: View) -> int:
        """The rows of a summary table."""
        with self.engine.connect() as conn:
            return int(self.dialect.run(conn, f"SELECT COUNT(*) FROM {self.dialect.table(view)}").scalar())

    def export_storage(self, view: View, folder: Path) -> int:
        """A summary table's rows (keys and stored aggregates, under nightshift's column names) as one
        Parquet file in `folder`: what nightshift apply builds a new coarser view from."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "part-0.parquet"
        with self.engine.connect() as conn:
            self.dialect.export_parquet(conn, view, path)
        return pq.ParquetFile(path).metadata.num_rows

    def _drop(self, conn, view: View) -> None:
        self.dialect.run(conn, f"DROP VIEW IF EXISTS {self.dialect.serving(view)}")
        self.dialect.run(conn, f"DROP TABLE IF EXISTS {self.dialect.table(view)}")

    def _rebuild(self, conn, view: View, parquet_dir: Path, stats: dict) -> None:
        """Replace a summary table (and its serving view) by the rows in `parquet_dir`. A recompute view
        is created with the column types its result has (stats[view]["columns"]); without them (an empty
        project: nothing computed yet) its table waits for the first refresh."""
        self._drop(conn, view)
        columns = tuple(tuple(c) for c in (stats.get(view.name) or {}).get("columns") or ())
        if not view.incremental and not columns:
            return
        self._create(conn, view, columns)
        files = sorted(parquet_dir.glob("*.parquet"))
        if files:
            self.dialect.load_parquet(conn, view, files, columns=columns)

    def _create(self, conn, view: View, columns: tuple[tuple[str, str], ...] = ()) -> None:
        for ddl in self.dialect.summary_ddl(view, columns):
            self.dialect.run(conn, ddl)
        self.dialect.run(conn, self.dialect.serving_view_sql(view))

    def summary_tables_exist(self, plan: Plan) -> bool:
        with self.engine.connect() as conn:
            return all(self._has_table(conn, self.storage_name(v)) for v in plan.views)

    # ---------------------------------------------------------------- refresh (Figure 8)
    def refresh(
        self,
        plan: Plan,
        batch: str,
        deltas: dict[str, StagedDelta],
        expected_position: str,
        progress: Callable[[str], None] = lambda _: None,
        hints: RefreshHints = RefreshHints(),
        notes: dict | None = None,
    ) -> dict | None:
        """Apply every summary-delta of `batch` plus its ledger row in one transaction.

        Returns the per-view statistics, or None when the batch is already in the ledger (no-op).
        notes: recorded with them in the ledger row (e.g. "_window_override": why the night ran
        outside the batch window).
        """
        t0 = time.perf_counter()
        with self.engine.begin() as conn:
            self.dialect.lock(conn)
            ledger = self.ledger(conn)
            if any(r.batch_id == batch and r.kind == "batch" for r in ledger):
                return None
            here = ledger[-1] if ledger else None
            if here is None:
                raise WarehouseStateError(f"refresh {batch}: the warehouse has no summary tables yet; run nightshift materialize")
            if here.plan != plan.fingerprint:
                raise PlanChanged(f"refresh {batch}: " + changed_message(self.layer_diff(plan, ledger), here.plan, plan.fingerprint))
            if here.position != expected_position:
                raise WarehouseStateError(
                    f"refresh {batch}: the summary-deltas were computed against base state {expected_position or 'empty'} "
                    f"but the summary tables are at {here.position or 'empty'}; rerun nightshift propagate --batch {batch}"
                )
            stats = {}
            for i, view in enumerate(plan.views, 1):
                t1 = time.perf_counter()
                delta = deltas[view.name]
                if delta.mode == "recompute":
                    stats[view.name] = self._replace(conn, view, delta)
                else:
                    stats[view.name] = self._refresh_view(conn, view, delta.files, delta.prefix, batch, hints)
                stats[view.name].update(mode=delta.mode, mode_why=delta.reason)  # the night's choice (ledger, status)
                stats[view.name]["seconds"] = round(time.perf_counter() - t1, 3)
                progress(
                    f"refresh {batch}: [{i}/{len(plan.views)}] {view.name}: +{stats[view.name]['inserted']} "
                    f"~{stats[view.name]['updated']} -{stats[view.name]['deleted']} in {stats[view.name]['seconds']:.2f}s "
                    f"({stats[view.name]['path']}: {stats[view.name]['why']})"
                )
                checkpoint(f"refresh:after_merge:{view.name}")
            stats["_seconds"] = round(time.perf_counter() - t0, 3)
            stats.update(notes or {})
            self._append_ledger(conn, batch, "batch", plan, batch, stats)
            checkpoint("refresh:before_commit")
        return stats

    def _replace(self, conn, view: View, delta: "StagedDelta") -> dict:
        """The recompute mode: the table's whole contents replaced by tonight's (DELETE, not TRUNCATE:
        PostgreSQL readers keep reading the night before until the commit). A recompute view's table
        is created at its first night when the project started empty."""
        d = self.dialect
        if not self._has_table(conn, self.storage_name(view)):
            self._create(conn, view, delta.columns)
        deleted = int(self.dialect.run(conn, f"SELECT COUNT(*) FROM {d.table(view)}").scalar())
        self.dialect.run(conn, f"DELETE FROM {d.table(view)}")
        if delta.files:
            d.load_parquet(conn, view, delta.files, delta.prefix, delta.columns)
        inserted = int(self.dialect.run(conn, f"SELECT COUNT(*) FROM {d.table(view)}").scalar())
        return {"delta_rows": inserted, "inserted": inserted, "updated": 0, "deleted": deleted, "path": "recompute",
                "why": delta.reason}

    def _refresh_view(self, conn, view: View, files: list[Path], prefix: str, batch: str, hints: RefreshHints) -> dict:
        if not files:
            return {"delta_rows": 0, "inserted": 0, "updated": 0, "deleted": 0, "path": "none", "why": "no summary-delta rows"}
        d = self.dialect
        d.stage_parquet(conn, "__ns_delta", files, d.staging(view, delta_columns(view), prefix))
        path, why, positive = self._choose_path(conn, view, batch, hints)
        exact = {"minmax_exact_groups": d.exact_minmax_groups(conn, "__ns_delta")} if view.has_min_max else {}
        if path == "new_keys":
            try:
                d.insert_new_keys(conn, view, "__ns_delta")
                return {"delta_rows": positive, "inserted": positive, "updated": 0, "deleted": 0, "path": path, "why": why,
                        **exact}
            except NewKeyConflict as e:
                if view.name in hints.new_keys:
                    raise self._violated(view, batch, f"the unique index rejected one ({e})") from None
                path, why = "insert_only", "a speculative new-key insert met an existing group; merged instead"
        inserted, updated, deleted, broken = d.merge_delta(conn, view, "__ns_delta", insert_only=path == "insert_only")
        if broken:
            raise WarehouseStateError(
                f"refresh {batch}: view {view.name}: {'' if broken < 0 else f'{broken} '}summary-delta group(s) remove rows "
                f"from groups the summary table does not hold; the summary table is out of sync with the base: run "
                f"nightshift materialize (nothing of batch {batch} was applied)"
            )
        return {"delta_rows": inserted + updated + deleted, "inserted": inserted, "updated": updated, "deleted": deleted,
                "path": path, "why": why, **exact}

    def _choose_path(self, conn, view: View, batch: str, hints: RefreshHints) -> tuple[str, str, int]:
        """Paper 001, 4.3, per summary table per night: (path, why, delta rows with COUNT(*) > 0).

        new_keys     every delta group is new: INSERT without looking the summary table up. Detected
                     by the min-key check (DuckDB), declared in [refresh] new_keys and verified, or
                     tried first on insert-only nights (PostgreSQL: its unique index checks the insert).
        insert_only  the batch deletes nothing: no delete, no MIN/MAX-recompute path.
        merge        Figure 8 in full.
        """
        if not hints.optimize:
            return "merge", "refresh optimizations off (NIGHTSHIFT_REFRESH_OPT=0)", 0
        d, declared = self.dialect, view.name in hints.new_keys
        rows, positive, negative, proof = d.delta_profile(conn, view, "__ns_delta")
        if declared and negative:
            raise self._violated(view, batch, f"{negative} group(s) lose rows, so they are not new")
        if proof and not negative:
            return "new_keys", f"detected: every delta {proof} lies outside the summary table's range", positive
        if declared and d.min_key_check:
            found, example = d.existing_groups(conn, view, "__ns_delta")
            if found:
                raise self._violated(view, batch, f"{found} group(s) are already in the summary table, e.g. {example}")
            return "new_keys", "declared in [refresh] new_keys; verified: no delta group is in the summary table", positive
        if declared:
            return "new_keys", "declared in [refresh] new_keys; checked by the unique index", positive
        insert_only = view.name in hints.insert_only
        if insert_only and not d.min_key_check and rows == positive and view.keys:  # a grand total has no index
            return "new_keys", "insert-only night: tried as new keys first (the unique index checks every insert)", positive
        if insert_only:
            return "insert_only", "the batch deletes no rows", positive
        if not hints.deletes:  # a view over another view's rows: each changed group of those is a delete and an insert
            return "merge", "it is kept over another view's rows, whose changed groups replace their old rows", positive
        return "merge", "the batch deletes rows", positive

    def _violated(self, view: View, batch: str, what: str) -> WarehouseStateError:
        return WarehouseStateError(
            f"refresh {batch}: view {view.name}: nightshift.toml [refresh] new_keys declares every summary-delta group "
            f"new, but {what}; nothing of batch {batch} was applied. Remove {view.name} from new_keys or fix the batch"
        )

    # ---------------------------------------------------------------- reading
    def read_view(self, view: View) -> list[tuple]:
        cols = ", ".join(self.dialect.col(view, o.name) for o in view.outputs)
        with self.engine.connect() as conn:
            sql = f"SELECT {cols} FROM {self.dialect.serving(view)}"
            return [tuple(r) for r in self.dialect.run(conn, sql).fetchall()]


def _resolve(url: str, root: Path) -> str:
    """duckdb:///relative.duckdb is relative to the project folder, not to the current directory."""
    if url.startswith("duckdb:///") and not url.startswith("duckdb:////") and ":memory:" not in url:
        rel = url[len("duckdb:///"):]
        return f"duckdb:///{(Path(root) / rel).resolve()}"
    return url


def _first_line(e: Exception) -> str:
    text = str(getattr(e, "orig", None) or e)
    return text.strip().splitlines()[0] if text.strip() else type(e).__name__
