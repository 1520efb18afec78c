"""`nightshift capture --batch ID`: the sources a warehouse team has (nightly table extracts, Debezium change
feeds, append-only logs) become the night's change batch (issue 22).

Sources come from nightshift.toml or the command line:

    [capture.stores]
    kind = "snapshot"                      # snapshot | cdc | append
    path = "extracts/stores/{ds}/*.csv"    # a file, a folder or a glob; {batch_id} and {ds} are filled in

    [capture.events]
    kind = "append"
    path = "logs/events-{batch_id}.parquet"
    since_column = "loaded_at"

A capture compares with the lake's base as of the last applied batch, so batch ID must come after it and no
other batch may wait unapplied (its changes would be missing from that base). It is idempotent: a rerun
before propagate writes the same batch; a batch propagate has used is never overwritten (capture says so
and does nothing). Every table's batch is written to a temporary folder and renamed into place once all
sources were read and checked, so a refused source writes nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from lattice.ir import Table
from nightshift.config import CAPTURE_KEYS, Project
from runtime.capture import KINDS, CaptureRecord
from runtime.errors import BatchOrderError, ConfigError
from runtime.lake import Lake, check_batch_id
from spark_jobs.capture import capture_table, source_files
from spark_jobs.session import get_spark

_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_DATE_ID = re.compile(r"^(\d{4})(\d{2})(\d{2})$")


@dataclass(frozen=True)
class Source:
    table: str
    kind: str  # snapshot | cdc | append
    path: str  # may hold {batch_id} and {ds}; relative paths are relative to the project folder
    since_column: str | None = None  # append sources: the column whose watermark is kept


@dataclass(frozen=True)
class CaptureResult:
    batch: str
    records: tuple[CaptureRecord, ...] = ()
    skipped: str | None = None  # why nothing was done
    seconds: float = 0.0


def configured_sources(project: Project) -> tuple[Source, ...]:
    """[capture.<table>] sections of nightshift.toml, checked against sql/schema.sql."""
    toml = project.root / "nightshift.toml"
    section = project.settings.get("capture", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{toml}: [capture] must hold one table per source, like [capture.pos]")
    out = []
    for table, spec in section.items():
        where = f"{toml}: [capture.{table}]"
        if not isinstance(spec, dict):
            raise ConfigError(f"{where} must be a table with kind and path")
        unknown = sorted(set(spec) - set(CAPTURE_KEYS))
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (kind, path, since_column)")
        kind, path, since = spec.get("kind"), spec.get("path"), spec.get("since_column")
        if kind not in KINDS:
            raise ConfigError(f"{where}: kind must be one of {', '.join(repr(k) for k in KINDS)}, got {kind!r}")
        if not isinstance(path, str) or not path:
            raise ConfigError(f"{where}: path must be a file, folder or glob, e.g. \"extracts/{table}/{{ds}}/*.parquet\"")
        if (kind == "append") != (since is not None):
            raise ConfigError(f"{where}: " + ("an append source needs since_column = \"<column>\"" if kind == "append"
                                               else "since_column applies to append sources only"))
        if since is not None and not isinstance(since, str):
            raise ConfigError(f"{where}: since_column must be a column name")
        out.append(Source(_table_name(project, table, where), kind, path, since))
    return tuple(out)


def chosen_sources(project: Project, table: str | None = None, snapshot: str | None = None, cdc: str | None = None,
                   append: str | None = None, since_column: str | None = None) -> tuple[Source, ...]:
    """The command line's choice: --table T with --snapshot/--cdc/--append PATH (a path relative to the current
    folder), --table T alone (its [capture.T] source), or nothing (every configured source)."""
    given = [(kind, path) for kind, path in (("snapshot", snapshot), ("cdc", cdc), ("append", append)) if path]
    if since_column and not append:
        raise ConfigError("capture: --since-column goes with --append PATH")
    if given:
        kind, path = given[0]
        if not table:
            raise ConfigError(f"capture: --{kind} PATH needs --table T (the table of sql/schema.sql it holds)")
        if kind == "append" and not since_column:
            raise ConfigError("capture: --append PATH needs --since-column C (rows with C beyond the last watermark are new)")
        return (Source(_table_name(project, table, "capture --table"), kind, os.path.abspath(path), since_column),)
    configured = configured_sources(project)
    if table:
        name = _table_name(project, table, "capture --table")
        chosen = tuple(s for s in configured if s.table == name)
        if not chosen:
            raise ConfigError(f"capture: no [capture.{name}] source in {project.root / 'nightshift.toml'}; "
                              f"give one with --snapshot, --cdc or --append PATH")
        return chosen
    return configured


def _table_name(project: Project, name: str, where: str) -> str:
    return _base_table(project, name, where).name


def _base_table(project: Project, name: str, where: str) -> Table:
    """A table of sql/schema.sql (a summary view read as a table is not captured: it has no source)."""
    tables = project.plan.schema.base_tables
    table = next((t for t in tables if t.name.lower() == name.lower()), None)
    if table is None:
        raise ConfigError(f"{where}: {name} is not a table of sql/schema.sql (tables: {', '.join(t.name for t in tables)})")
    return table


def source_path(project: Project, source: Source, batch: str, ds: str | None = None) -> str:
    """The source's path for batch `batch`: {batch_id} is the batch id, {ds} the night's date (YYYY-MM-DD:
    `ds`, else the batch id when it is a date YYYYMMDD, as the DAG's batch ids are)."""
    m = _DATE_ID.match(batch)
    ds = ds or (f"{m.group(1)}-{m.group(2)}-{m.group(3)}" if m else None)

    def fill(match: re.Match) -> str:
        name = match.group(1)
        if name == "batch_id":
            return batch
        if name == "ds":
            if ds is None:
                raise ConfigError(f"capture of {source.table}: path {source.path!r} uses {{ds}}, but batch id {batch} "
                                  f"is not a date (YYYYMMDD); pass --ds YYYY-MM-DD")
            return ds
        raise ConfigError(f"capture of {source.table}: path {source.path!r}: unknown placeholder {{{name}}} "
                          f"(use {{batch_id}} or {{ds}})")

    path = _PLACEHOLDER.sub(fill, source.path)
    return str(project.root / path) if not Path(path).is_absolute() else path


def capture(project: Project, batch: str, sources: tuple[Source, ...] | None = None, spark=None,
            spark_factory: Callable | None = None, progress: Callable[[str], None] = lambda _: None,
            ds: str | None = None) -> CaptureResult:
    """Capture `sources` (default: the configured ones) as batch `batch`. spark: a session to use;
    spark_factory: makes one when there is work (spark-submit's); neither: the project's [spark] master."""
    t0 = time.perf_counter()
    check_batch_id(batch)
    sources = configured_sources(project) if sources is None else sources
    if not sources:
        raise ConfigError(f"{project.root / 'nightshift.toml'}: no [capture.<table>] sources; configure some, or pass "
                          f"--table T with --snapshot, --cdc or --append PATH")
    lake = Lake(project.lake)
    state = lake.state()
    used = lake.batch_used(batch, state)
    if used:
        return CaptureResult(batch, skipped=f"{used}; capture never overwrites a batch propagate has read")
    _check_order(lake, batch, state.last, state.applied)
    jobs = []
    for s in sources:
        table = _base_table(project, s.table, f"capture of batch {batch}")
        _check_overwrite(lake, table.name, batch)
        where = f"capture of batch {batch}, table {table.name}"
        jobs.append((s, table, source_files(source_path(project, s, batch, ds), s.kind, where)))
    if len({table.name for _, table, _ in jobs}) < len(jobs):
        raise ConfigError(f"capture of batch {batch}: one source per table")
    session = spark or (spark_factory() if spark_factory else
                        get_spark(project.spark_master, f"nightshift:{project.name}", project.spark_remote))
    written: list[tuple[str, Path, CaptureRecord]] = []
    try:
        for s, table, files in jobs:
            progress(f"capture {batch}: {table.name} from {s.kind} {files.path} ({len(files.files)} file(s))")
            folder = lake.capture_tmp_dir(table.name, batch)
            shutil.rmtree(folder, ignore_errors=True)
            record = capture_table(session, lake, state, table, s.kind, files, batch, folder, s.since_column)
            lake.write_capture(folder, record)
            written.append((table.name, folder, record))
        for table_name, folder, _ in written:  # all sources read and checked: now they appear
            lake.install_change_dir(folder, table_name, batch)
    finally:
        for _, table, _ in jobs:
            shutil.rmtree(lake.capture_tmp_dir(table.name, batch), ignore_errors=True)
    return CaptureResult(batch, tuple(r for _, _, r in written), seconds=time.perf_counter() - t0)


def _check_order(lake: Lake, batch: str, last: str | None, applied: tuple[str, ...]) -> None:
    """A capture compares with the base as of the last applied batch: `batch` must come after it, and no other
    batch may be waiting (an earlier one's changes are not in that base; a later one was computed without
    `batch`)."""
    if last is not None and batch < last:
        raise BatchOrderError(f"capture of batch {batch}: batch {last} is already applied and batches apply in id order; "
                              f"capture the changes as a batch with an id after {last}")
    waiting = [b for b in lake.batch_ids() if b != batch and b not in applied]
    earlier = [b for b in waiting if b < batch]
    if earlier:
        raise BatchOrderError(f"capture of batch {batch}: batch {earlier[0]} is not applied yet, so the base that capture "
                              f"compares with would miss its changes; run nightshift run --batch {earlier[0]} first")
    if waiting:
        raise BatchOrderError(f"capture of batch {batch}: batch {waiting[0]} already waits after it; capture writes the "
                              f"newest batch only (run or remove {waiting[0]} first)")


def _check_overwrite(lake: Lake, table: str, batch: str) -> None:
    folder = lake.change_dir(table, batch)
    if folder.is_dir() and lake.read_capture(table, batch) is None:
        raise BatchOrderError(f"capture of batch {batch}: {folder} holds change files nightshift capture did not write; "
                              f"capture never replaces them: remove the folder or capture another batch id")
