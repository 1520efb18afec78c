"""`nightshift capture --batch ID`: the sources a warehouse team has (nightly table extracts, Debezium change
feeds, append-only logs) become the night's change batch.

Sources come from nightshift.toml or the command line:

    [capture.stores]
    kind = "snapshot"                      # snapshot | cdc | append
    path = "extracts/stores/{ds}/*.csv"    # a file, a folder or a glob; {batch_id} and {ds} are filled in

    [capture.events]
    kind = "append"
    path = "logs/events-{batch_id}.parquet"
    since_column = "loaded_at"

    [capture.orders]
    kind = "delta"                         # a Delta table with its change data feed on
    path = "/data/delta/orders"

A Delta source needs no Spark: its change data feed between the version the previous batch captured and
the newest version becomes the batch (runtime.delta reads it with the deltalake package); its first
capture compares the whole table with the lake's base. Once captured, it follows its feed, not the base, so
an earlier batch may still wait unapplied.

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

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lattice.ir import Table
from lattice.sql import ident
from nightshift.config import CAPTURE_KEYS, Project
from nightshift.load import OP, arrow_type, batch_schema
from runtime import delta
from runtime.capture import KINDS, CaptureRecord
from runtime.delta import register_base
from runtime.errors import BadChangeBatch, BatchOrderError, ConfigError
from runtime.lake import Lake, check_batch_id
from spark_jobs.capture import capture_table, source_files
from spark_jobs.session import get_spark

_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_DATE_ID = re.compile(r"^(\d{4})(\d{2})(\d{2})$")


@dataclass(frozen=True)
class Source:
    table: str
    kind: str  # snapshot | cdc | append | delta
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
            raise ConfigError(f"{where}: path must be a file, folder or glob, e.g. \"extracts/{table}/{{ds}}/*.parquet\""
                              + (" (a delta source: the Delta table's folder)" if kind == "delta" else ""))
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
    _check_order(lake, batch, state.last, state.applied, compares=any(not _follows_feed(lake, s, batch) for s in sources))
    jobs = []
    for s in sources:
        table = _base_table(project, s.table, f"capture of batch {batch}")
        _check_overwrite(lake, table.name, batch)
        where = f"capture of batch {batch}, table {table.name}"
        path = source_path(project, s, batch, ds)
        jobs.append((s, table, delta_source(path, where) if s.kind == "delta" else source_files(path, s.kind, where)))
    if len({table.name for _, table, _ in jobs}) < len(jobs):
        raise ConfigError(f"capture of batch {batch}: one source per table")
    session = None
    written: list[tuple[str, Path, CaptureRecord]] = []
    try:
        for s, table, files in jobs:
            folder = lake.capture_tmp_dir(table.name, batch)
            shutil.rmtree(folder, ignore_errors=True)
            if s.kind == "delta":
                progress(f"capture {batch}: {table.name} from the Delta table {files}")
                record = capture_delta(lake, state, table, files, batch, folder)
            else:
                progress(f"capture {batch}: {table.name} from {s.kind} {files.path} ({len(files.files)} file(s))")
                session = session or spark or (spark_factory() if spark_factory else get_spark(
                    project.spark_master, f"nightshift:{project.name}", project.spark_remote))
                record = capture_table(session, lake, state, table, s.kind, files, batch, folder, s.since_column)
            lake.write_capture(folder, record)
            written.append((table.name, folder, record))
        for table_name, folder, _ in written:  # all sources read and checked: now they appear
            lake.install_change_dir(folder, table_name, batch)
    finally:
        for _, table, _ in jobs:
            shutil.rmtree(lake.capture_tmp_dir(table.name, batch), ignore_errors=True)
    return CaptureResult(batch, tuple(r for _, _, r in written), seconds=time.perf_counter() - t0)


def _follows_feed(lake: Lake, source: Source, batch: str) -> bool:
    """A Delta source captured before `batch`: its batch follows its change data feed, not the base."""
    if source.kind != "delta":
        return False
    last = lake.last_capture(source.table, batch)
    return last is not None and last.kind == "delta"


def _check_order(lake: Lake, batch: str, last: str | None, applied: tuple[str, ...], compares: bool = True) -> None:
    """A capture compares with the base as of the last applied batch: `batch` must come after it, and no other
    batch may be waiting (an earlier one's changes are not in that base; a later one was computed without
    `batch`). Only a capture that compares with the base (`compares`) minds an earlier batch waiting: a Delta
    source's change data feed continues from the version its previous batch captured."""
    if last is not None and batch < last:
        raise BatchOrderError(f"capture of batch {batch}: batch {last} is already applied and batches apply in id order; "
                              f"capture the changes as a batch with an id after {last}")
    waiting = [b for b in lake.batch_ids() if b != batch and b not in applied]
    earlier = [b for b in waiting if b < batch]
    if earlier and compares:
        raise BatchOrderError(f"capture of batch {batch}: batch {earlier[0]} is not applied yet, so the base that capture "
                              f"compares with would miss its changes; run nightshift run --batch {earlier[0]} first")
    later = [b for b in waiting if b > batch]
    if later:
        raise BatchOrderError(f"capture of batch {batch}: batch {later[0]} already waits after it; capture writes the "
                              f"newest batch only (run or remove {later[0]} first)")


# ---------------------------------------------------------------- Delta tables' change data feed


def delta_source(path: str, where: str) -> str:
    """A Delta source's table folder, checked: it must be a Delta table with its change data feed on."""
    if not delta.is_delta_table(path):
        raise BadChangeBatch(f"{where}: {path} is not a Delta table (no _delta_log folder); a delta source's path "
                             f"is the table's folder; nothing was written")
    config = delta.open_table(path).metadata().configuration or {}
    if str(config.get("delta.enableChangeDataFeed", "false")).lower() != "true":
        raise BadChangeBatch(f"{where}: the Delta table {path} does not record its changes; turn its change data feed "
                             f"on (ALTER TABLE ... SET TBLPROPERTIES (delta.enableChangeDataFeed = true)) and capture "
                             f"again; nothing was written")
    return path


def capture_delta(lake: Lake, state, table: Table, path: str, batch: str, folder: Path) -> CaptureRecord:
    """Table's changes for batch `batch` from the Delta table at `path`, written into `folder` (one Parquet
    file, rows sorted: the same changes give the same file).

    The change data feed of the versions after the one the previous batch captured, up to the newest: an
    insert and an update's new image are inserts, a delete and an update's old image deletes, netted per
    row image over the whole range (bag semantics: a row inserted and deleted within the range gives
    nothing, whatever the order of its commits; what remains applies to the base as one batch). A rerun of
    the batch reads the same versions again. The first capture of a table has no previous version: the
    table as it is, compared whole with the lake's base."""
    where = f"capture of batch {batch}, table {table.name}"
    rerun, last = lake.read_capture(table.name, batch), lake.last_capture(table.name, batch)
    end = rerun.delta_version if rerun is not None and rerun.delta_version is not None else delta.version(path)
    since = last.delta_version if last is not None and last.kind == "delta" else None
    con = duckdb.connect()
    try:
        if since is None:
            snap = delta.snapshot(path, end)  # the declared columns only are read (a large source's others never)
            wanted = _source_names(snap.schema.names, table, path, where)
            con.register("__ns_source", _declared(delta.read_snapshot(snap, wanted), table, path, where))
            register_base(con, lake, table, state)
            signed = (f"SELECT *, 1 AS _ns_sign FROM __ns_source UNION ALL "
                      f"SELECT {', '.join(ident(c) for c in table.column_names)}, -1 FROM {ident(table.name)}")
        elif end < since:
            raise BadChangeBatch(f"{where}: the Delta table {path} is at version {end}, before version {since} that "
                                 f"batch {last.batch} captured (was it restored or recreated?); nothing was written")
        else:
            con.register("__ns_source", _feed(path, since, end, table, where))
            signed = "SELECT * FROM __ns_source"
        inserted, deleted = _write_net(con, signed, table, folder)
    finally:
        con.close()
    return CaptureRecord(table.name, batch, "delta", (str(path),), inserted, deleted, state.last,
                         delta_version=end, delta_since=since)


_SIGNS = {"insert": 1, "update_postimage": 1, "delete": -1, "update_preimage": -1}


def _feed(path: str, since: int, end: int, table: Table, where: str):
    """The change data feed of versions since+1..end as the declared columns plus _ns_sign (+1 / -1)."""
    if end == since:
        rows = _declared(delta.snapshot(path, end).schema.empty_table(), table, path, where)
        return rows.append_column("_ns_sign", pa.array([], pa.int64()))
    try:
        feed = pa.RecordBatchReader.from_stream(delta.open_table(path).load_cdf(since + 1, end)).read_all()
    except Exception as e:  # deltalake's errors: DeltaError, or Arrow's when a data file is gone
        text = str(e)
        if "does not have change data enabled" in text:
            why = "its change data feed was off for some of these versions; capture them as a snapshot comparison"
        elif "not found" in text or "No such file" in text or "Invalid table version" in text:
            why = ("their files or log entries were removed (VACUUM, log retention): keep the feed longer than the "
                   "time between captures")
        else:
            why = text.strip().splitlines()[0] if text.strip() else type(e).__name__
        raise BadChangeBatch(f"{where}: cannot read the change data feed of the Delta table {path}, versions "
                             f"{since + 1} to {end}: {why}; nothing was written") from None
    kinds = feed.column("_change_type").to_pylist()
    unknown = sorted(set(kinds) - set(_SIGNS))
    if unknown:
        raise BadChangeBatch(f"{where}: the change data feed of {path} holds change type(s) {', '.join(unknown)}; "
                             f"nothing was written")
    rows = _declared(feed, table, path, where)
    return rows.append_column("_ns_sign", pa.array([_SIGNS[k] for k in kinds], pa.int64()))


def _source_names(names: list[str], table: Table, path: str, where: str) -> list[str]:
    """The Delta table's names (`names`) of `table`'s declared columns, in their declared order, matched without
    regard to case; refused when it lacks one."""
    by_lower = {n.lower(): n for n in names}
    missing = [c.name for c in table.columns if c.name.lower() not in by_lower]
    if missing:
        raise BadChangeBatch(f"{where}: the Delta table {path} has no column(s) {', '.join(missing)} "
                             f"(table {table.name} has {', '.join(table.column_names)}); nothing was written")
    return [by_lower[c.name.lower()] for c in table.columns]


def _declared(rows: pa.Table, table: Table, path: str, where: str) -> pa.Table:
    """The declared columns of `table` from a Delta table's rows (names matched without regard to case; its
    other columns left out: bag semantics over the declared columns stays exact), in the batch's types."""
    out = delta.plain(rows.select(_source_names(rows.column_names, table, path, where)))
    out = out.rename_columns(list(table.column_names))
    for c in table.columns:
        try:
            out = out.set_column(out.schema.get_field_index(c.name), c.name,
                                 pc.cast(out.column(c.name), arrow_type(c.type), safe=True))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise BadChangeBatch(f"{where}: column {c.name} of the Delta table {path} is {out.column(c.name).type}, "
                                 f"which does not convert exactly to {c.type} ({e}); nothing was written") from None
    return out


def _write_net(con, signed: str, table: Table, folder: Path) -> tuple[int, int]:
    """Net the signed rows per row image (NULLs equal) and write folder/part-00000.parquet: n > 0 gives n
    inserts, n < 0 gives -n deletes, sorted by every column and _op."""
    cols = ", ".join(ident(c) for c in table.column_names)
    net = (f"SELECT {cols}, CASE WHEN n > 0 THEN 'insert' ELSE 'delete' END AS {OP} FROM "
           f"(SELECT *, unnest(range(CAST(abs(n) AS BIGINT))) AS _ns_i FROM "
           f"(SELECT {cols}, SUM(_ns_sign) AS n FROM ({signed}) GROUP BY ALL HAVING SUM(_ns_sign) <> 0)) ORDER BY ALL")
    rows = con.sql(net).to_arrow_table()
    rows = pa.table({f.name: rows.column(i).cast(f.type) for i, f in enumerate(batch_schema(table))})
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(rows, folder / "part-00000.parquet")
    ops = rows.column(OP).to_pylist()
    return ops.count("insert"), ops.count("delete")


def _check_overwrite(lake: Lake, table: str, batch: str) -> None:
    folder = lake.change_dir(table, batch)
    if folder.is_dir() and lake.read_capture(table, batch) is None:
        raise BatchOrderError(f"capture of batch {batch}: {folder} holds change files nightshift capture did not write; "
                              f"capture never replaces them: remove the folder or capture another batch id")
