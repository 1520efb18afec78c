"""`nightshift validate --batch ID`: the Great Expectations gate between refresh and publish.

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
import time
from pathlib import Path
from typing import Callable

from lattice.dlattice import lattice_shape
from nightshift import expectations as ex
from nightshift.config import Project
from nightshift.cycle import Cycle
from nightshift.validate.report import Finding, Settings, ValidationFailed, ValidationReport, settings_of
from nightshift.validate.run import SQLGLOT_DIALECT, dimension_files, row_count_bounds, run_suites
from nightshift.validate.sampling import prepare_lake
from lattice.layer import changed_message
from runtime.errors import BatchOrderError, PlanChanged
from runtime.manifest import Manifest
from warehouse.store import LedgerRow

__all__ = ["Finding", "Settings", "ValidationFailed", "ValidationReport", "chosen_parents", "settings_of",
           "validate_batch"]


def validate_batch(project: Project, batch: str, sample: int | None = None,
                   progress: Callable[[str], None] = lambda _: None, raise_on_failure: bool = True) -> ValidationReport:
    """Run every generated suite against the warehouse state of `batch` (refreshed and applied)."""
    t0 = time.perf_counter()
    settings = settings_of(project, sample)
    cycle = Cycle(project, progress=progress)
    try:
        here = _where(cycle, batch)
        plan, warehouse, lake = cycle.plan, cycle.warehouse, cycle.lake
        state = lake.state()
        manifest = lake.read_manifest(batch)
        lattice = manifest.night.lattice if manifest and manifest.night.lattice else lattice_shape(plan)
        rollups = ex.rollups(plan, lattice, chosen_parents(manifest))
        specs = ex.plan_suites(plan, warehouse.ident, SQLGLOT_DIALECT[warehouse.dialect.name], rollups,
                               warehouse.storage_name)
        gx_dir = project.root / "gx"
        _write_suites(specs, gx_dir / "expectations")
        lake_db = gx_dir / "uncommitted" / "lake.duckdb"
        sampled = prepare_lake(plan, lake, state, warehouse, batch, manifest, settings.sample, lake_db)
        params = row_count_bounds(plan, warehouse, here, settings.row_tolerance)
        dims = dimension_files(plan, lake, state, rollups, gx_dir / "uncommitted" / "dimensions")
        warehouse.dispose()  # GX opens its own read connections
        progress(f"validate {batch}: running {sum(len(s.suite.expectations) for s in specs)} expectations")
        findings, count, docs = run_suites(specs, warehouse, lake_db, params, batch, gx_dir, dims, settings.keep_results)
        failures = tuple(f for f in findings if f.severity == "critical")
        warnings = tuple(f for f in findings if f.severity != "critical")
        report = ValidationReport(batch, count, failures, warnings, docs, round(time.perf_counter() - t0, 3), sampled)
        warehouse.record_validation(here.seq, report.success, {**here.stats, "_validation": _summary(report)})
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
        raise PlanChanged(f"validate {batch}: " + changed_message(cycle.warehouse.layer_diff(cycle.plan, ledger), here.plan,
                                                                   cycle.plan.fingerprint))
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


def chosen_parents(manifest: Manifest | None) -> tuple[tuple[str, str], ...]:
    """(child, parent) of every summary-delta that propagate derived from another one this batch."""
    return manifest.night.chosen_parents if manifest else ()


def _summary(report: ValidationReport) -> dict:
    """What the ledger row of the batch keeps of the validation (stats["_validation"])."""
    return {
        "success": report.success,
        "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "expectations": report.expectations,
        "failed": [f"{f.view}: {f.check}" for f in report.failures],
        "warnings": [f"{w.view}: {w.check}" for w in report.warnings],
        "sampled_groups": report.sampled,
        "seconds": report.seconds,
        "data_docs": str(report.docs),
    }
