"""Running the generated suites with Great Expectations 1.x: the warehouse suites through SQLAlchemy
(DuckDB via nightshift/gx_duckdb.py's duckdb+autocommit dialect; PostgreSQL as is) in ONE connection
that first gets the dimension tables the rollup checks join as temporary tables; the lake suites over
the sampled groups (validate.sampling). Writes GX's validation results and the data docs under
<project>/gx/ and keeps the newest [validate] keep_results runs."""

from __future__ import annotations

import datetime as dt
import math
import warnings
from pathlib import Path

import great_expectations as gx
import pyarrow.parquet as pq
import sqlalchemy as sa
from great_expectations.core.run_identifier import RunIdentifier
from great_expectations.data_context.types.base import DataContextConfig, InMemoryStoreBackendDefaults, ProgressBarsConfig

from lattice.ir import Plan
from lattice.sql import base_select_list, duckdb_read_parquet
from lattice.sql import ident as q
from nightshift import expectations as ex
from nightshift.gx_duckdb import gx_url  # registers duckdb+autocommit before GX builds engines
from nightshift.validate.offline import make_offline
from nightshift.validate.report import DEFAULT_KEEP_RESULTS, DOCS_HISTORY, Finding
from runtime import delta
from runtime.lake import Lake, LakeState, parquet_columns
from warehouse.dialects import copy_parquet
from warehouse.store import LedgerRow, Warehouse

SQLGLOT_DIALECT = {"duckdb": "duckdb", "postgresql": "postgres"}  # Dialect.name -> sqlglot's name

def dimension_files(plan: Plan, lake: Lake, state: LakeState, rollups, folder: Path) -> dict[str, tuple[list[Path], tuple]]:
    """table -> (a Parquet file in `folder` of the columns the rollup checks read, as the lake's Delta table
    holds them at the state's version; none when the lake has no such table yet, the (column, type)s)."""
    out = {}
    folder.mkdir(parents=True, exist_ok=True)
    for table, columns in ex.dimensions_needed(rollups, plan.schema).items():
        v, f = state.version(table), folder / f"{table}.parquet"
        f.unlink(missing_ok=True)
        if v is not None:  # a column declared after the version was written is left out: it reads NULL
            present = {n.lower(): n for n in delta.snapshot(lake.table_path(table), v).schema.names}
            wanted = [present[c.lower()] for c, _ in columns if c.lower() in present]
            pq.write_table(delta.read_table(lake.table_path(table), v, columns=wanted), f)
        out[table] = ([f] if v is not None else [], columns)
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
                cols = base_select_list(columns, parquet_columns(files), cast=True)
                dialect.run(conn, f"CREATE TEMP TABLE {name} AS SELECT {cols} FROM {duckdb_read_parquet(files)}")
                continue
            cols = ", ".join(f"{q(c)} {dialect.column_type(t)}" for c, t in columns)
            dialect.run(conn, f"CREATE TEMP TABLE {name} ({cols})")
            if files:  # a column declared after the lake's version was written stays NULL (as read_base reads it)
                present = parquet_columns(files)
                copy_parquet(conn, name, files, [(c, c, t) for c, t in columns if c.lower() in present],
                             dialect.COPY_BATCH_ROWS, quoted_table=True)
        conn.commit()


# ---------------------------------------------------------------- row-count bounds (warning)


def row_count_bounds(plan: Plan, warehouse: Warehouse, here: LedgerRow, tolerance: float) -> dict[str, int | None]:
    """Suite parameters: each table's row count may move by `tolerance` x last night's count.

    Last night's count = tonight's - rows this batch inserted + rows it deleted (the refresh
    statistics in the ledger). After a first load (nothing before) there is no bound."""
    name = warehouse.ident
    params: dict[str, int | None] = {}
    with warehouse.engine.connect() as conn:
        for view in plan.views:
            now = int(warehouse.dialect.run(conn, f"SELECT COUNT(*) FROM {name(view, view.storage_table)}").scalar())
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
            table = sa.sql.quoted_name(spec.table, quote=True)  # GX re-quotes a quoted string wrongly
            asset = sources[spec.source].add_table_asset(name=spec.suite.name, table_name=table)
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
        make_offline(gx_dir / "data_docs")  # GX's pages load their CSS/JS from CDNs; warehouse hosts may be offline
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
