"""`nightshift validate --batch ID` (issue 7): the Great Expectations gate between refresh and publish.

Runs the suites that nightshift/expectations.py generates from the plan with GX 1.x:

    warehouse   every storage table "<view>__ns" through SQLAlchemy (DuckDB via the duckdb+autocommit
                dialect of nightshift/gx_duckdb.py; PostgreSQL as is); every check is SQL run there,
                in ONE connection that first gets the dimension tables the rollup checks join as
                temporary tables (only the columns read, from the lake's current base: DuckDB reads
                the Parquet itself, PostgreSQL gets them through COPY)
    lake        the sampled recompute, by DuckDB over the lake's Parquet (not Spark: a few groups per
                view need no cluster), in a DuckDB file beside the lake (gx/uncommitted/lake.duckdb)
                whose views read the base tables, holding the sampled groups' keys and the
                warehouse's stored rows for them (a few rows per view, never a whole table)

writes the data docs (HTML) into <project>/gx/data_docs/, the suites as JSON into
<project>/gx/expectations/ and GX's validation results into <project>/gx/validations/ (the newest
[validate] keep_results runs, default 30, are kept there and in the data docs), and records
the outcome in the ledger row of the batch: validated_at is set only when no critical check
failed; stats["_validation"] keeps the summary either way. Critical failures raise
ValidationFailed (naming batch, summary table and check, and pointing at the data docs);
warnings are reported and do not block publish.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import sqlalchemy as sa

from lattice.errors import BatchOrderError, ConfigError, NightshiftError, PlanChanged
from lattice.ir import Plan, View
from nightshift import expectations as ex
from nightshift.config import Project
from nightshift.lake import Lake, LakeState
from warehouse.dialects import copy_parquet, q, read_parquet
from warehouse.store import LEDGER, LedgerRow, Warehouse

DEFAULT_SAMPLE = 50
DEFAULT_ROW_TOLERANCE = 0.5
DEFAULT_KEEP_RESULTS = 30
DOCS_HISTORY = 1000  # validation results the data docs index lists (newest first)


class ValidationFailed(NightshiftError):
    """A critical expectation failed: the night must not be published."""

    def __init__(self, report: "ValidationReport"):
        self.report = report
        super().__init__(report.message())


@dataclass(frozen=True)
class Settings:
    """[validate] in nightshift.toml."""

    sample: int = DEFAULT_SAMPLE  # random groups per summary table: this many from it, this many from the base
    row_tolerance: float = DEFAULT_ROW_TOLERANCE  # warn when the row count moves more than this fraction
    keep_results: int = DEFAULT_KEEP_RESULTS  # validation runs kept in gx/validations and the data docs


def settings_of(project: Project, sample: int | None = None) -> Settings:
    section = project.settings.get("validate", {})
    file = project.root / "nightshift.toml"
    if not isinstance(section, dict):
        raise ConfigError(f"{file}: [validate] must be a table")
    n = section.get("sample", DEFAULT_SAMPLE) if sample is None else sample
    tol = section.get("row_count_tolerance", DEFAULT_ROW_TOLERANCE)
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ConfigError(f"{file}: [validate] sample must be a whole number >= 0, got {n!r}")
    if not isinstance(tol, (int, float)) or isinstance(tol, bool) or tol < 0:
        raise ConfigError(f"{file}: [validate] row_count_tolerance must be a number >= 0, got {tol!r}")
    keep = section.get("keep_results", DEFAULT_KEEP_RESULTS)
    if not isinstance(keep, int) or isinstance(keep, bool) or keep < 1:
        raise ConfigError(f"{file}: [validate] keep_results must be a whole number >= 1, got {keep!r}")
    return Settings(n, float(tol), keep)


@dataclass(frozen=True)
class Finding:
    """One failed expectation."""

    batch: str
    view: str
    table: str
    check: str
    severity: str
    observed: object  # unexpected row count, or the observed value (row count)
    examples: tuple = ()
    error: str | None = None
    docs: str | None = None

    def __str__(self) -> str:
        if self.error:
            what = f"could not run: {self.error}"
        elif self.check == "row_count_vs_previous":
            what = f"{self.observed} rows is outside the allowed range of the previous night's count"
        else:
            what = f"{self.observed} unexpected row(s)" + (f", e.g. ({_show(self.examples[0])})" if self.examples else "")
        where = f"; data docs: {self.docs}" if self.docs else ""
        return f"batch {self.batch}: summary table {self.view} ({self.table}): check {self.check} failed ({self.severity}): {what}{where}"


@dataclass(frozen=True)
class ValidationReport:
    batch: str
    expectations: int
    failures: tuple[Finding, ...]
    warnings: tuple[Finding, ...]
    docs: Path
    seconds: float
    sampled: dict = field(default_factory=dict)  # view -> number of sampled groups

    @property
    def success(self) -> bool:
        return not self.failures

    def message(self) -> str:
        head = (f"validate {self.batch}: {len(self.failures)} critical check(s) failed; the night stays unpublished"
                if self.failures else f"validate {self.batch}: ok")
        lines = [head] + [str(f) for f in self.failures] + [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines + [f"data docs: {self.docs}"])


# ---------------------------------------------------------------- the gate


def validate_batch(project: Project, batch: str, sample: int | None = None,
                   progress: Callable[[str], None] = lambda _: None, raise_on_failure: bool = True) -> ValidationReport:
    """Run every generated suite against the warehouse state of `batch` (refreshed and applied)."""
    from nightshift.cycle import Cycle

    t0 = time.perf_counter()
    settings = settings_of(project, sample)
    cycle = Cycle(project, progress=progress)
    try:
        here = _where(cycle, batch)
        plan, warehouse, lake = cycle.plan, cycle.warehouse, cycle.lake
        state = lake.state()
        rollups = ex.rollups(plan, chosen=chosen_parents(lake.read_manifest(batch)))
        specs = ex.plan_suites(plan, _ident(warehouse), SQLGLOT_DIALECT[warehouse.dialect.name], rollups)
        gx_dir = project.root / "gx"
        _write_suites(specs, gx_dir / "expectations")
        lake_db = gx_dir / "uncommitted" / "lake.duckdb"
        sampled = prepare_lake(plan, lake, state, warehouse, batch, settings.sample, lake_db)
        params = row_count_bounds(plan, warehouse, here, settings.row_tolerance)
        dims = dimension_files(plan, lake, state, rollups)
        warehouse.dispose()  # GX opens its own read connections
        progress(f"validate {batch}: running {sum(len(s.suite.expectations) for s in specs)} expectations")
        findings, count, docs = run_suites(specs, warehouse, lake_db, params, batch, gx_dir, dims, settings.keep_results)
        failures = tuple(f for f in findings if f.severity == "critical")
        warnings = tuple(f for f in findings if f.severity != "critical")
        report = ValidationReport(batch, count, failures, warnings, docs, round(time.perf_counter() - t0, 3), sampled)
        _record(warehouse, here, report)
    finally:
        cycle.close()
    if failures and raise_on_failure:
        raise ValidationFailed(report)
    return report


def _where(cycle, batch: str) -> LedgerRow:
    """Validation reads the current warehouse and the current base: both must be at `batch`."""
    status = cycle.status(batch)
    if status == "pending":
        raise BatchOrderError(f"validate {batch}: batch {batch} is not refreshed yet; run nightshift run --batch {batch} first")
    if status == "refreshed":
        raise BatchOrderError(
            f"validate {batch}: batch {batch} is refreshed but not applied to the base yet (the sampled recompute "
            f"reads the base after the batch); run nightshift apply-base --batch {batch} first"
        )
    ledger = cycle.warehouse.ledger()
    here = ledger[-1]
    if here.position != batch:
        raise BatchOrderError(
            f"validate {batch}: the warehouse has moved on to batch {here.position}; validation checks the "
            f"current state, so validate batch {here.position} instead"
        )
    if here.plan != cycle.plan.fingerprint:
        raise PlanChanged(
            f"validate {batch}: sql/schema.sql or sql/summaries changed since the summary tables were built "
            f"(plan {here.plan} -> {cycle.plan.fingerprint}); run nightshift materialize"
        )
    return here


def _write_suites(specs, folder: Path) -> None:
    """The generated suites as JSON under the project (stale ones of removed views go)."""
    folder.mkdir(parents=True, exist_ok=True)
    names = {f"{s.suite.name}.json" for s in specs}
    for old in folder.glob("nightshift.*.json"):
        if old.name not in names:
            old.unlink()
    for s in specs:
        (folder / f"{s.suite.name}.json").write_text(json.dumps(s.suite.to_json_dict(), indent=1) + "\n")


# ---------------------------------------------------------------- the lake side: sampled groups


def prepare_lake(plan: Plan, lake: Lake, state: LakeState, warehouse: Warehouse, batch: str, sample: int,
                 path: Path) -> dict[str, int]:
    """Build the lake's validation DuckDB: views over the current base tables' Parquet, and per
    summary table the sampled groups' keys and the warehouse's stored rows for them.

    Sampled groups: `sample` random groups of the summary table (catches wrong and extra rows),
    `sample` groups of random base rows (catches missing groups), and every group of a view with
    MIN/MAX that lost rows in this batch (_lost_groups)."""
    from nightshift.oracle import duckdb_base

    path.parent.mkdir(parents=True, exist_ok=True)
    for p in (path, path.with_name(path.name + ".wal")):
        p.unlink(missing_ok=True)
    manifest = lake.read_manifest(batch) or {}
    con = duckdb_base(lake, plan.schema, state, database=str(path))
    con.execute("BEGIN TRANSACTION")  # one commit for the whole file
    counts = {}
    try:
        with warehouse.engine.connect() as conn:
            for view in plan.views:
                keys = _random_warehouse_groups(conn, warehouse, view, sample)
                keys += _random_base_groups(con, view, sample)
                keys += _lost_groups(con, lake, view, batch, manifest)
                keys = list(dict.fromkeys(keys))
                _create(con, ex.keys_table(view), [(k.name, k.type) for k in view.keys], keys)
                rows = _stored_rows(conn, warehouse, view, keys)
                cols = [(k.name, k.type) for k in view.keys] + [(s.column, s.type) for s in view.stored]
                _create(con, ex.sample_table(view), cols, rows)
                counts[view.name] = len(keys)
        con.execute("COMMIT")
    finally:
        con.close()
    return counts


def _random_warehouse_groups(conn, warehouse: Warehouse, view: View, n: int) -> list[tuple]:
    if n == 0:
        return []
    name = _ident(warehouse)
    keys = ", ".join(name(view, k.name) for k in view.keys)
    sql = f"SELECT {keys} FROM {name(view, view.storage_table)} ORDER BY RANDOM() LIMIT {int(n)}"
    return [tuple(r) for r in conn.exec_driver_sql(sql).fetchall()]


def _random_base_groups(con, view: View, n: int) -> list[tuple]:
    if n == 0:
        return []
    sql = f"SELECT * FROM ({ex.base_rows_sql(view)}) AS b USING SAMPLE reservoir({int(n)} ROWS)"
    return [tuple(r) for r in con.execute(sql).fetchall()]


def _lost_groups(con, lake: Lake, view: View, batch: str, manifest: dict) -> list[tuple]:
    """Groups of a view with MIN/MAX that lost rows this batch: the groups of the batch's deleted
    fact rows (under the view's joins and filter, dimensions as of after the batch) and the groups
    propagate recomputed an extreme for (_ns_lost = 1 in the batch's summary-delta: this also
    covers rows that moved away with a dimension change)."""
    if not view.has_min_max:
        return []
    out = []
    changes = sorted(lake.change_dir(view.fact, batch).glob("*.parquet"))
    if changes:
        deleted = f"(SELECT * FROM {read_parquet(changes)} WHERE _op = 'delete')"
        out += [tuple(r) for r in con.execute(f"SELECT DISTINCT * FROM ({ex.base_rows_sql(view, deleted)}) AS d").fetchall()]
    entry = manifest.get("views", {}).get(view.name)
    files = lake.delta_files(batch, entry["part"]) if entry and entry.get("rows") else []
    if files:
        p = entry["prefix"]
        cols = ", ".join(f"{q(p + k.name)}" for k in view.keys)
        sql = f"SELECT DISTINCT {cols} FROM {read_parquet(files)} WHERE {q(p + '_ns_lost')} = 1"
        out += [tuple(r) for r in con.execute(sql).fetchall()]
    return out


def _stored_rows(conn, warehouse: Warehouse, view: View, keys: list[tuple]) -> list[tuple]:
    """The warehouse's rows for the sampled groups: the keys go into a temporary table and are
    matched NULL-safely with hashable equalities (COALESCE plus an IS NULL flag)."""
    if not keys:
        return []
    name = _ident(warehouse)
    tmp = q("ns_validate_keys")
    cols = ", ".join(f"{q(f'k{i}')} {warehouse.dialect.column_type(k.type)}" for i, k in enumerate(view.keys))
    conn.exec_driver_sql(f"CREATE TEMPORARY TABLE {tmp} ({cols})")
    try:
        binds = ", ".join(f":k{i}" for i in range(len(view.keys)))
        conn.execute(sa.text(f"INSERT INTO {tmp} VALUES ({binds})"),
                     [{f"k{i}": v for i, v in enumerate(key)} for key in keys])
        match = " AND ".join(ex.same(f"t.{name(view, k.name)}", f"s.{q(f'k{i}')}", k.type) for i, k in enumerate(view.keys))
        select = ", ".join(f"t.{name(view, c)}" for c in [k.name for k in view.keys] + [s.column for s in view.stored])
        sql = f"SELECT {select} FROM {name(view, view.storage_table)} AS t, {tmp} AS s WHERE {match}"
        return [tuple(r) for r in conn.exec_driver_sql(sql).fetchall()]
    finally:
        conn.exec_driver_sql(f"DROP TABLE {tmp}")


def _create(con, table: str, columns: list[tuple[str, str]], rows: list[tuple]) -> None:
    """A typed table of `rows` in the lake's DuckDB (through Arrow: executemany is row by row)."""
    import pyarrow as pa

    con.execute(f"CREATE TABLE {q(table)} ({', '.join(f'{q(c)} {t}' for c, t in columns)})")
    if rows:
        con.register("ns_rows", pa.table({f"c{i}": [r[i] for r in rows] for i in range(len(columns))}))
        con.execute(f"INSERT INTO {q(table)} SELECT * FROM ns_rows")
        con.unregister("ns_rows")


def _ident(warehouse: Warehouse) -> ex.Ident:
    """How the warehouse names things (PostgreSQL folds unquoted names to lower case): the storage
    table through Warehouse.storage_name, columns and serving views through Warehouse.sql_name."""

    def ident(view: View, name: str) -> str:
        if name == view.storage_table:
            return q(warehouse.storage_name(view))
        return warehouse.sql_name(view, name)

    return ident


# ---------------------------------------------------------------- the warehouse side: dimensions for the rollups

SQLGLOT_DIALECT = {"duckdb": "duckdb", "postgresql": "postgres"}  # Dialect.name -> sqlglot's name


def chosen_parents(manifest: dict | None) -> tuple[tuple[str, str], ...]:
    """(child, parent) of every summary-delta that propagate derived from another one this batch."""
    nodes = ((manifest or {}).get("lattice") or {}).get("nodes") or {}
    return tuple((name, n["parent"]) for name, n in nodes.items() if n.get("parent"))


def dimension_files(plan: Plan, lake: Lake, state: LakeState, rollups) -> dict[str, tuple[list[Path], tuple]]:
    """table -> (the current base's Parquet files, the (column, type)s the rollup checks read)."""
    out = {}
    for table, columns in ex.dimensions_needed(rollups, plan.schema).items():
        d = lake.current_base_dir(table, state)
        out[table] = (sorted(Path(d).glob("*.parquet")) if d is not None else [], columns)
    return out


def stage_dimensions(engine: sa.Engine, dialect, dims: dict[str, tuple[list[Path], tuple]]) -> None:
    """The dimension tables the rollup checks join, as temporary tables of GX's one warehouse
    connection (ex.dimension_relation): DuckDB reads the lake's Parquet itself, PostgreSQL gets it
    through COPY (warehouse/dialects.py). Only the columns the edges read; dimensions are small
    next to the summary tables, and nothing of a summary table leaves the warehouse."""
    with engine.connect() as conn:
        for table, (files, columns) in dims.items():
            name = ex.dimension_relation(table)  # unquoted: both sides fold it the same way
            if dialect.name == "duckdb" and files:
                cols = ", ".join(f"CAST({q(c)} AS {t}) AS {q(c)}" for c, t in columns)
                conn.exec_driver_sql(f"CREATE TEMP TABLE {name} AS SELECT {cols} FROM {read_parquet(files)}")
                continue
            cols = ", ".join(f"{q(c)} {dialect.column_type(t)}" for c, t in columns)
            conn.exec_driver_sql(f"CREATE TEMP TABLE {name} ({cols})")
            if files:
                copy_parquet(conn, name, files, [(c, c, t) for c, t in columns], dialect.COPY_BATCH_ROWS, quoted_table=True)
        conn.commit()


# ---------------------------------------------------------------- row-count bounds (warning)


def row_count_bounds(plan: Plan, warehouse: Warehouse, here: LedgerRow, tolerance: float) -> dict[str, int | None]:
    """Suite parameters: each table's row count may move by `tolerance` x last night's count.

    Last night's count = tonight's - rows this batch inserted + rows it deleted (the refresh
    statistics in the ledger). After a first load (nothing before) there is no bound."""
    name = _ident(warehouse)
    params: dict[str, int | None] = {}
    with warehouse.engine.connect() as conn:
        for view in plan.views:
            now = int(conn.exec_driver_sql(f"SELECT COUNT(*) FROM {name(view, view.storage_table)}").scalar())
            st = here.stats.get(view.name, {}) if here.kind == "batch" else {}
            before = now - int(st.get("inserted", 0)) + int(st.get("deleted", 0))
            lo, hi = ex.row_count_parameters(view)
            if before <= 0:
                params[lo], params[hi] = 0, None
            else:
                params[lo] = max(0, math.floor(before * (1 - tolerance)))
                params[hi] = math.ceil(before * (1 + tolerance))
    return params


# ---------------------------------------------------------------- running GX


def _context(gx_dir: Path):
    """An ephemeral GX context (datasources and credentials stay in memory) whose validation
    results and data docs go to files under the project, so the docs list every night."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    defaults = InMemoryStoreBackendDefaults()
    stores = dict(defaults.stores)
    stores[defaults.validation_results_store_name] = {
        "class_name": "ValidationResultsStore",
        "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(gx_dir / "validations")},
    }
    config = DataContextConfig(
        store_backend_defaults=defaults,
        stores=stores,
        data_docs_sites={"nightshift": {
            "class_name": "SiteBuilder",
            "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(gx_dir / "data_docs")},
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder", "show_how_to_buttons": False,
                                   "validation_results_limit": DOCS_HISTORY},
        }},
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False),
    )
    return gx.get_context(project_config=config, mode="ephemeral")


def run_suites(specs, warehouse: Warehouse, lake_db: Path, params: dict, batch: str, gx_dir: Path,
               dims: dict | None = None, keep: int = DEFAULT_KEEP_RESULTS) -> tuple[list[Finding], int, Path]:
    """One GX checkpoint over every suite; returns the failed expectations, how many ran, the docs.

    The warehouse datasource holds ONE connection (StaticPool): the dimension tables the rollup
    checks join are staged in it as temporary tables first (stage_dimensions), and every query GX
    runs there sees them."""
    from nightshift.gx_duckdb import gx_url  # registers duckdb+autocommit before GX builds engines

    import great_expectations as gx
    from great_expectations.core.run_identifier import RunIdentifier

    ctx = _context(gx_dir)
    with warnings.catch_warnings():  # "a more specific PostgresDatasource may be more appropriate": the
        warnings.simplefilter("ignore")  # generic one takes any SQLAlchemy URL (postgresql+psycopg too)
        sources = {
            "warehouse": ctx.data_sources.add_sql(name="warehouse", connection_string=gx_url(warehouse.url),
                                                  kwargs={"poolclass": sa.pool.StaticPool}),
            "lake": ctx.data_sources.add_sql(name="lake", connection_string=gx_url(f"duckdb:///{lake_db}")),
        }
    definitions = []
    try:
        stage_dimensions(sources["warehouse"].get_execution_engine().engine, warehouse.dialect, dims or {})
        for spec in specs:
            asset = sources[spec.source].add_table_asset(name=spec.suite.name, table_name=spec.table)
            suite = ctx.suites.add(spec.suite)
            definitions.append(ctx.validation_definitions.add(gx.ValidationDefinition(
                name=spec.suite.name, data=asset.add_batch_definition_whole_table("whole table"), suite=suite)))
        checkpoint = ctx.checkpoints.add(gx.Checkpoint(
            name="nightshift", validation_definitions=definitions, result_format="COMPLETE"))
        result = checkpoint.run(expectation_parameters=params,
                                run_id=RunIdentifier(run_name=batch, run_time=dt.datetime.now(dt.timezone.utc)))
        prune_results(gx_dir, keep)
        # one incremental data docs build for the whole night (GX's UpdateDataDocsAction rebuilds
        # the index and copies the static assets once per suite: 14 suites took 20 s here)
        ctx.build_data_docs(site_names=["nightshift"], resource_identifiers=list(result.run_results))
        findings, count = [], 0
        for key, suite_result in result.run_results.items():
            url = _page(ctx, key)
            for r in suite_result.results:
                count += 1
                if not r.success:
                    findings.append(_finding(batch, r, url))
    finally:  # release the DuckDB files: GX keeps pooled connections in two engines per datasource
        for ds in sources.values():
            ds.get_execution_engine().close()
            ds.get_engine().dispose()
    index = gx_dir / "data_docs" / "index.html"
    return findings, count, index


def prune_results(gx_dir: Path, keep: int) -> None:
    """Keep the newest `keep` validation runs in gx/validations and their pages in the data docs
    (GX stores one file per suite under <suite>/<run name>/<run time>/; run times sort as text)."""
    results, pages = gx_dir / "validations", gx_dir / "data_docs" / "validations"
    runs: dict[tuple[str, str], list[Path]] = {}
    for f in results.rglob("*.json"):
        runs.setdefault((f.parent.name, f.parent.parent.name), []).append(f)
    for run in sorted(runs, reverse=True)[keep:]:
        for f in runs[run]:
            rel = f.relative_to(results)
            for p in (f, pages / rel.with_suffix(".html")):
                p.unlink(missing_ok=True)
                for parent in (p.parent, p.parent.parent):  # <run time>/ and <run name>/ when emptied
                    if parent.is_dir() and not any(parent.iterdir()):
                        parent.rmdir()


def _page(ctx, key) -> str | None:
    urls = ctx.get_docs_sites_urls(resource_identifier=key, site_names=["nightshift"])
    return urls[0].get("site_url") if urls else None


def _finding(batch: str, r, url: str | None) -> Finding:
    cfg = r.expectation_config
    meta = (cfg.meta or {}).get("nightshift", {})
    result = r.result or {}
    exc = r.exception_info or {}
    errors = [exc] if "raised_exception" in exc else [v for v in exc.values() if isinstance(v, dict)]
    error = next((e.get("exception_message") for e in errors if e.get("raised_exception")), None)
    examples = tuple((result.get("details") or {}).get("unexpected_rows") or ())[:5]
    severity = getattr(cfg.severity, "value", cfg.severity) or "critical"
    return Finding(batch, meta.get("view", "?"), meta.get("table", "?"), meta.get("check", cfg.type),
                   "critical" if error else str(severity), result.get("observed_value"), examples, error, url)


def _record(warehouse: Warehouse, here: LedgerRow, report: ValidationReport) -> None:
    """The ledger row of the batch: validated_at only on success, the summary in stats either way."""
    stats = dict(here.stats)
    stats["_validation"] = {
        "success": report.success,
        "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "expectations": report.expectations,
        "failed": [f"{f.view}: {f.check}" for f in report.failures],
        "warnings": [f"{w.view}: {w.check}" for w in report.warnings],
        "sampled_groups": report.sampled,
        "seconds": report.seconds,
        "data_docs": str(report.docs),
    }
    stamp = "CURRENT_TIMESTAMP" if report.success else "NULL"
    with warehouse.engine.begin() as conn:
        conn.execute(sa.text(f"UPDATE {q(LEDGER)} SET validated_at = {stamp}, stats = :stats WHERE seq = :seq"),
                     {"stats": json.dumps(stats, default=str), "seq": here.seq})


def _show(row) -> str:
    return ", ".join(f"{k}={v}" for k, v in dict(row).items())
