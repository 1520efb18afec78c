"""The lake's layout and its state record (pure Python; Spark jobs read and write the tables).

    lake/tables/<table>/                            a Delta Lake table per base table (Delta 4.4, written and read
                                                    by Spark; deletion vectors on: delta.enableDeletionVectors)
    lake/tables/<view>/                             a Delta table per auxiliary view and per copy of a view nested
                                                    views read (its stored rows: group keys and stored aggregates)
    lake/tables/_state.json                         the lake's state: the applied batches and, for every table and
                                                    copy, the Delta version that is current ({name: version});
                                                    written (write-then-rename) after every table's commit
    lake/tables/_nights/batch_id=<ID>.json          the same record as it stood after batch <ID> was applied (one per
                                                    applied batch: the versions a night read or wrote, for time travel)
    lake/changes/<table>/batch_id=<ID>/*.parquet     change batches (the contract)
    lake/deltas/batch_id=<ID>/part=<i>/*.parquet    summary-deltas written by propagate (view i of the
                                                    plan, columns prefixed v<i>__, one Spark job)
    lake/deltas/batch_id=<ID>/_night.json           the night's plan (runtime.night), written before the
                                                    summary-deltas; later levels execute it as it is
    lake/deltas/batch_id=<ID>/_manifest.json        written last: propagate of <ID> is complete
    lake/deltas/batch_id=<ID>/_levels/level-<k>.json  propagate --level k ran (Airflow: a task per level)
    lake/deltas/batch_id=<ID>/_nodes/<point>/         summary-deltas a later level derives from
    lake/deltas/batch_id=<ID>/_copies/<view>/         new stored rows of the changed groups of a view nested
                                                    views read (apply-base makes them part of its lake copy)
    lake/changes/<table>/batch_id=<ID>/_capture.json  what nightshift capture read for the batch (and an
                                                    append source's watermark; runtime.capture)
    lake/stats/batch_id=<ID>.json                   measured summary-delta sizes of the D-lattice's
                                                    points for batch <ID> (the cost model's cache)

A base table's Delta table holds the declared columns plus hidden ones, which every reader leaves out
(read the declared columns by name):

    __ns_batch BIGINT   the sequence number (1, 2, ...: position in the applied batches) of the batch
                        that inserted the row
    __ns_row   BIGINT   the row's number within that insert; (__ns_batch, __ns_row) identifies a row, so
                        a delete removes exactly one of several equal rows (bag semantics)
    __ns_part  STRING   only in a table laid out by month ([lake] partition_by): the month 'YYYY-MM' of
                        the partition column (NULL for NULL), the Delta table's partition column;
                        the state record names the date column (LakeState.partitions)

A reader of the base reads each table at exactly the version the state record holds (Delta time
travel, `versionAsOf`), never the latest. apply-base commits each table of batch k once (the
commit's user metadata names the table and k's sequence number: Lake.commit_mark), then writes the
state record: a crash between two tables' commits leaves the old state record, and the rerun commits
only the tables that are missing (it finds a commit with the same mark after the recorded version and
skips it; the check reads the table's newest log files on the driver).
"""
from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from lattice.dlattice import Statistics
from lattice.emit import rel
from lattice.ir import ColumnRef, Plan
from runtime.capture import CAPTURE_VERSION, CaptureRecord
from runtime.errors import BadChangeBatch, SchemaError
from runtime.manifest import MANIFEST_VERSION, LevelRecord, Manifest
from runtime.night import NIGHT_VERSION, NightPlan
from runtime.serial import from_json, to_json

BATCH_ID = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass(frozen=True)
class LakeState:
    """The lake as a night sees it: the applied batches and each Delta table's current version."""

    applied: tuple[str, ...] = ()
    versions: dict[str, int] = field(default_factory=dict)  # table or copied view -> its Delta version
    partitions: dict[str, str] = field(default_factory=dict)  # table -> the date column its months lay it out by

    @property
    def last(self) -> str | None:
        return self.applied[-1] if self.applied else None

    @property
    def sequence(self) -> int:
        """The sequence number of the next batch to apply (in its commits' marks, Lake.commit_mark)."""
        return len(self.applied) + 1

    def version(self, name: str) -> int | None:
        return self.versions.get(name)

    @property
    def recorded(self) -> tuple[tuple[str, int], ...]:
        """The versions as a night's plan and manifest record them (NightPlan.base_versions)."""
        return tuple(sorted(self.versions.items()))

    def planned(self, night) -> bool:
        """`night` (a NightPlan) was planned over exactly this state: its last batch and every table's version."""
        return night.base_state == self.last and night.base_versions == self.recorded


class Lake:
    def __init__(self, root: Path):
        self.root = Path(root)

    # ---------------------------------------------------------------- paths
    @property
    def changes(self) -> Path:
        return self.root / "changes"

    @property
    def tables(self) -> Path:
        return self.root / "tables"

    def change_dir(self, table: str, batch: str) -> Path:
        return self.changes / table / f"batch_id={batch}"

    def table_path(self, name: str) -> Path:
        """The Delta table of a base table, an auxiliary view or a view's lake copy."""
        return self.tables / name

    def commit_mark(self, name: str, sequence: int, step: str = "") -> str:
        """The user metadata of batch `sequence`'s commit to table `name` (`step`: a commit of the batch's
        before its main one, e.g. a DELETE before the append): how a rerun knows the commit is done
        (runtime.delta.committed compares the table, the sequence number and the step). It names no path: a
        lake moved to another folder, or seen under another mount by another worker, still knows its commits."""
        return json.dumps({"nightshift": "apply-base", "table": name, "batch": sequence,
                           **({"step": step} if step else {})}, sort_keys=True)

    def delta_root(self, batch: str) -> Path:
        return self.root / "deltas" / f"batch_id={batch}"

    def delta_files(self, batch: str, part: int) -> list[Path]:
        return sorted((self.delta_root(batch) / f"part={part}").glob("*.parquet"))

    def manifest_path(self, batch: str) -> Path:
        return self.delta_root(batch) / "_manifest.json"

    def copy_update_dir(self, batch: str, view: str) -> Path:
        """The new stored rows of the groups batch <ID> changes in a view the lake copies: propagate
        writes them, apply-base makes them part of the view's next lake copy (lake/tables/<view>/)."""
        return self.delta_root(batch) / "_copies" / rel("copy", view)

    def matched_dir(self, batch: str, table: str, version: int) -> Path:
        """The base rows (declared columns, and their places or their row identity) of `table` at `version`
        that may equal a row batch <ID> deletes: the delete check writes them for a table apply-base deletes
        from, and apply-base deletes the ones the deletes pick without reading the base again."""
        return self.delta_root(batch) / "_matched" / f"{rel('matched', table)}_v{version}"

    def node_dir(self, batch: str, node: str) -> Path:
        """Where propagate --level stores the summary-delta of lattice point `node` for later levels."""
        return self.delta_root(batch) / "_nodes" / rel("sd", node)

    def source_of(self, path: str, night: NightPlan) -> tuple[str, str]:
        """What a folder or file a Spark scan of `night`'s propagate read is, as (kind, name) of
        runtime.manifest.RowsRead: the layout above read backwards. `path` as Spark lists it (a URI
        such as file:/lake/tables/pos/part-0.parquet or a plain path)."""
        local = Path(re.sub(r"^file:(//)?", "", path))
        try:
            parts = local.resolve().relative_to(self.root.resolve()).parts
        except ValueError:
            return "other", path
        if len(parts) >= 3 and parts[0] == "tables" and parts[2] == "_delta_log":
            return "log", parts[1]  # the table's log, as Delta's own reader reads it to find a version's files
        copied = {c.view for c in night.copies}
        if len(parts) >= 2 and parts[0] == "tables":
            return ("copy" if parts[1] in copied else "base"), parts[1]
        if len(parts) >= 2 and parts[0] == "changes":
            return "changes", parts[1]
        if len(parts) >= 3 and parts[:2] == ("deltas", f"batch_id={night.batch}"):
            folder = parts[3] if len(parts) >= 4 else ""
            names = {"_nodes": {rel("sd", n.node): n.node for n in night.nodes},
                     "_copies": {rel("copy", v): v for v in copied}}.get(parts[2])
            if names is not None and folder in names:
                return ("node" if parts[2] == "_nodes" else "update"), names[folder]
            if parts[2] == "_matched":  # <rel('matched', table)>_v<version>
                table = next((t for t in night.info.deleted if folder.startswith(rel("matched", t) + "_v")), None)
                if table is not None:
                    return "matched", table
            part = {f"part={v.part}": v.view for v in night.views}.get(parts[2])
            if part is not None:
                return "delta", part
        return "other", path

    def level_path(self, batch: str, level: int) -> Path:
        return self.delta_root(batch) / "_levels" / f"level-{level}.json"

    def read_level(self, batch: str, level: int) -> LevelRecord | None:
        data = _read_json(self.level_path(batch, level))
        return None if data is None or data.get("version") != MANIFEST_VERSION else from_json(LevelRecord, data["record"])

    def write_level(self, batch: str, record: LevelRecord) -> None:
        _write_json(self.level_path(batch, record.level), {"version": MANIFEST_VERSION, "record": to_json(record)})

    def night_path(self, batch: str) -> Path:
        return self.delta_root(batch) / "_night.json"

    def read_night(self, batch: str) -> NightPlan | None:
        """The night's plan propagate wrote for `batch`; None when absent or of another version."""
        data = _read_json(self.night_path(batch))
        return None if data is None or data.get("version") != NIGHT_VERSION else from_json(NightPlan, data)

    def write_night(self, night: NightPlan) -> None:
        _write_json(self.night_path(night.batch), to_json(night))

    def invalidate_levels(self, batch: str, level: int) -> None:
        """Before propagate --level `level` rewrites its points: the manifest and the records of this and
        every later level no longer hold (a later level may have read what this one rewrites)."""
        self.manifest_path(batch).unlink(missing_ok=True)
        for p in self.level_path(batch, 0).parent.glob("level-*.json"):
            if int(p.stem.split("-", 1)[1]) >= level:
                p.unlink(missing_ok=True)

    def propagated_batches(self) -> list[str]:
        """Batch ids that have a summary-delta folder, in apply order."""
        return sorted(d.name.split("=", 1)[1] for d in (self.root / "deltas").glob("batch_id=*"))

    def stats_path(self, batch: str) -> Path:
        return self.root / "stats" / f"batch_id={batch}.json"

    def read_change_distincts(self, batch: str, combos: dict | None = None) -> dict | None:
        """Cached summary-delta sizes of `batch` ({(ColumnRef, ...): rows}); None when not measured, or
        measured for other attribute combinations than `combos` (when given)."""
        p = self.stats_path(batch)
        if not p.is_file():
            return None
        saved = json.loads(p.read_text())
        if saved.get("version") != 2 or (combos is not None and saved.get("combos") != json.loads(json.dumps(combos))):
            return None
        return {tuple(ColumnRef(t, c) for t, c in attrs): n for attrs, n in saved["distinct"]}

    def write_change_distincts(self, batch: str, combos: dict, distinct: dict) -> None:
        p = self.stats_path(batch)
        p.parent.mkdir(parents=True, exist_ok=True)
        rows = [[[[r.table, r.column] for r in attrs], n] for attrs, n in distinct.items()]
        p.write_text(json.dumps({"version": 2, "combos": combos, "distinct": rows}))

    def footprint(self, limit: int | None = None) -> int:
        """Bytes of every file under the lake's folder (its tables with their older versions, the change batches,
        the nights' records): what a night may read, from the file system (no table is opened). With `limit`, the
        count stops as soon as it passes it (a big lake's folder is not walked whole to learn it is big)."""
        total = 0
        for folder, _, files in os.walk(self.root):
            for name in files:
                try:
                    total += os.stat(os.path.join(folder, name)).st_size
                except OSError:  # removed meanwhile (a compaction, another night's clean-up)
                    pass
            if limit is not None and total > limit:
                break
        return total

    def table_rows(self, tables, state: LakeState) -> dict[str, int]:
        """Rows of each table at `state`, from its Delta log's file statistics (no Spark job)."""
        return {t.name: self.rows(t.name, state) for t in tables}

    def rows(self, name: str, state: LakeState) -> int:
        """Rows of a Delta table at its version in `state` (0 when absent), from its log's statistics."""
        v = state.version(name)
        return 0 if v is None else delta_rows(self.table_path(name), v)

    def months(self, name: str, state: LakeState) -> list[str]:
        """The months ('YYYY-MM') a table laid out by month holds rows of at its version in `state`, in order,
        from its Delta log's partition values (no Spark job; NULL's partition left out)."""
        v = state.version(name)
        if v is None:
            return []
        _, files = delta_snapshot(self.table_path(name), v)
        return sorted({m for add in files.values() if (m := (add.get("partitionValues") or {}).get(PART))})

    def statistics(self, schema, state: LakeState, change_rows: dict[str, int],
                   change_distinct: dict | None = None) -> Statistics:
        """What the D-lattice's cost model (5.5) knows of a batch: the base tables' sizes (Parquet
        footers, no Spark job), the batch's change rows, and measured summary-delta sizes if any."""
        return Statistics.of(
            table_rows=self.table_rows(schema.tables, state),
            change_rows=change_rows,
            change_distinct=change_distinct,
        )

    # ---------------------------------------------------------------- batches
    def batch_ids(self) -> list[str]:
        """Every batch id that has at least one change folder, in apply order."""
        ids = set()
        if self.changes.is_dir():
            for table_dir in self.changes.iterdir():
                if table_dir.is_dir():
                    for d in table_dir.glob("batch_id=*"):
                        if d.is_dir():
                            ids.add(d.name.split("=", 1)[1])
        return sorted(ids)

    def batch_files(self, batch: str, tables: list[str]) -> dict[str, list[Path]]:
        """table -> parquet files of the batch; raises if the batch has no files at all."""
        check_batch_id(batch)
        out: dict[str, list[Path]] = {}
        for t in tables:
            d = self.change_dir(t, batch)
            if d.is_dir():
                out[t] = sorted(p for p in d.glob("*.parquet") if p.is_file())
        unknown = []
        if self.changes.is_dir():
            known = {t.lower() for t in tables}
            unknown = [p.name for p in self.changes.iterdir() if p.is_dir() and p.name.lower() not in known
                       and (p / f"batch_id={batch}").is_dir()]
        if unknown:
            raise BadChangeBatch(
                f"batch {batch}: {self.changes / unknown[0]} is not a table of sql/schema.sql "
                f"(known: {', '.join(tables)})"
            )
        if not any(out.values()):
            raise BadChangeBatch(f"no change batch {batch} under {self.changes} (no Parquet files for any table)")
        return out

    # ---------------------------------------------------------------- capture (nightshift capture)
    def capture_tmp_dir(self, table: str, batch: str) -> Path:
        """Where capture writes a table's batch before renaming it into place; not a batch_id=<ID> folder,
        so no reader sees it."""
        return self.changes / table / f"_capture-{batch}.tmp"

    def read_capture(self, table: str, batch: str) -> CaptureRecord | None:
        """The record nightshift capture left with table's batch; None when the batch was not captured
        (hand-written, or absent) or by another version."""
        data = _read_json(self.change_dir(table, batch) / "_capture.json")
        return None if data is None or data.get("version") != CAPTURE_VERSION else from_json(CaptureRecord, data)

    @staticmethod
    def write_capture(folder: Path, record: CaptureRecord) -> None:
        _write_json(Path(folder) / "_capture.json", to_json(record))

    def last_capture(self, table: str, before: str) -> CaptureRecord | None:
        """The newest capture record of `table` in a batch before `before` (an append source's watermark)."""
        folder = self.changes / table
        batches = sorted(d.name.split("=", 1)[1] for d in folder.glob("batch_id=*")) if folder.is_dir() else []
        for b in reversed([b for b in batches if b < before]):
            record = self.read_capture(table, b)
            if record is not None:
                return record
        return None

    def batch_used(self, batch: str, state: LakeState | None = None) -> str | None:
        """Why batch `batch` may no longer change (propagate has read it), or None."""
        if batch in (state or self.state()).applied:
            return f"batch {batch} is applied to the base"
        for p in (self.manifest_path(batch), self.night_path(batch)):
            if p.is_file():
                return f"propagate has used batch {batch} ({p} exists)"
        return None

    def install_change_dir(self, folder: Path, table: str, batch: str) -> Path:
        """Rename a captured batch folder into place as lake/changes/<table>/batch_id=<batch>. A rerun
        replaces the previous capture: the old folder is moved aside first, so a crash leaves the old
        batch, no batch (the rerun captures it again) or the new one, never a mix."""
        final = self.change_dir(table, batch)
        aside = final.with_name(f"_capture-{batch}.old")
        shutil.rmtree(aside, ignore_errors=True)
        if final.exists():
            os.replace(final, aside)
        os.replace(folder, final)
        shutil.rmtree(aside, ignore_errors=True)
        return final

    # ---------------------------------------------------------------- state
    @property
    def state_path(self) -> Path:
        return self.tables / "_state.json"

    def night_state_path(self, batch: str) -> Path:
        return self.tables / "_nights" / f"batch_id={batch}.json"

    def state(self) -> LakeState:
        """The lake's state record; an empty lake's when there is none. A lake of the earlier format (versioned
        Parquet folders under base/) is refused, naming the command that converts it: read as empty, its
        base tables would vanish from the nights."""
        data = _read_json(self.state_path)
        if data is None and (self.root / "base" / "_state.json").is_file():
            # the project's folder is the lake's parent when it holds nightshift.toml (the usual [lake] path = "lake")
            project = str(self.root.parent) if (self.root.parent / "nightshift.toml").is_file() else None
            raise SchemaError(f"{self.root} is a lake of the earlier format (versioned Parquet folders under "
                              f"{self.root / 'base'}); convert it to Delta tables once: nightshift migrate-lake --project "
                              + (project or "<the folder of the project's nightshift.toml>"))
        return _state_of(data) if data is not None else LakeState()

    def state_after(self, batch: str) -> LakeState | None:
        """The lake's state as batch `batch`'s apply-base left it (None when not applied)."""
        data = _read_json(self.night_state_path(batch))
        return _state_of(data) if data is not None else None

    def write_state(self, state: LakeState) -> None:
        """Atomic replace (write a temporary file, fsync, rename); a batch's record is kept beside it."""
        data = {"applied": list(state.applied), "versions": state.versions, "partitions": state.partitions}
        if state.last is not None:
            _write_json(self.night_state_path(state.last), data)
        self.tables.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".json.tmp")
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.state_path)

    def check_columns(self, schema, state: LakeState | None = None) -> None:
        """Refuse a NOT NULL column declared after the current version of its table was written: those
        rows have no value for it (a nullable one reads NULL, spark_jobs.changes.read_base)."""
        state = state or self.state()
        for t in schema.base_tables:
            v = state.version(t.name)
            if v is not None:
                missing_columns(t, delta_columns(self.table_path(t.name), v), self.table_path(t.name))

    def read_manifest(self, batch: str) -> Manifest | None:
        """The manifest of propagated batch `batch`; None when propagate has not finished it, or when
        it was written by another nightshift version (then it is stale: rerun propagate)."""
        data = _read_json(self.manifest_path(batch))
        return None if data is None or data.get("version") != MANIFEST_VERSION else from_json(Manifest, data)

    def write_manifest(self, manifest: Manifest) -> None:
        _write_json(self.manifest_path(manifest.batch), to_json(manifest))


def _read_json(p: Path) -> dict | None:
    return json.loads(p.read_text()) if p.is_file() else None


def _write_json(p: Path, data: dict) -> None:
    """Write-then-rename: a reader or a crash sees the old file or the new one, never half."""
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, p)


def parquet_rows(folder: Path | None) -> int:
    """Row count of a folder of Parquet files (summary-deltas, exported summary tables) from their footers
    (no Spark job); 0 for no folder."""
    if folder is None:
        return 0
    return sum(pq.ParquetFile(f).metadata.num_rows for f in Path(folder).rglob("*.parquet"))


# ---------------------------------------------------------------- Delta tables, read from their logs
ROW_BATCH, ROW_ID, PART = "__ns_batch", "__ns_row", "__ns_part"
HIDDEN = (ROW_BATCH, ROW_ID, PART)


def _state_of(data: dict) -> LakeState:
    return LakeState(tuple(data["applied"]), {k: int(v) for k, v in data["versions"].items()},
                     dict(data.get("partitions", {})))


def delta_snapshot(path: Path, version: int) -> tuple[dict, dict[str, dict]]:
    """(the table's metaData action, its live files: path -> add action) at `version`, replayed from the
    JSON commits of _delta_log (and its newest checkpoint at or before `version`, read with pyarrow). A file
    is its path and its deletion vector (Delta's protocol): a delete re-adds a file with a new vector and
    removes it with the old one, in either order."""
    log = Path(path) / "_delta_log"
    if not log.is_dir():
        raise SchemaError(f"{path} is not a Delta table (no _delta_log); the lake's state record names it")
    meta: dict = {}
    files: dict[str, dict] = {}
    start = 0
    checkpoints = sorted(int(p.name.split(".")[0]) for p in log.glob("*.checkpoint.parquet")
                         if p.name.split(".")[0].isdigit())
    usable = [c for c in checkpoints if c <= version]
    if usable:
        start = usable[-1]
        for row in pq.read_table(log / f"{start:020d}.checkpoint.parquet").to_pylist():
            if row.get("metaData"):
                meta = row["metaData"]
            if row.get("add"):
                files[_file_id(row["add"])] = row["add"]
        start += 1
    for v in range(start, version + 1):
        commit = log / f"{v:020d}.json"
        if not commit.is_file():
            raise SchemaError(f"{path}: Delta version {version} is not in its log ({commit} is missing)")
        for line in commit.read_text().splitlines():
            action = json.loads(line) if line.strip() else {}
            if "metaData" in action:
                meta = action["metaData"]
            elif "add" in action:
                files[_file_id(action["add"])] = action["add"]
            elif "remove" in action:
                files.pop(_file_id(action["remove"]), None)
    return meta, {add["path"]: add for add in files.values()}


def _file_id(action: dict) -> tuple:
    dv = action.get("deletionVector") or {}
    return action["path"], dv.get("storageType"), dv.get("pathOrInlineDv"), dv.get("offset")


def delta_rows(path: Path, version: int) -> int:
    """Live rows of a Delta table at `version`: each file's numRecords less its deletion vector's rows."""
    _, files = delta_snapshot(path, version)
    total = 0
    for add in files.values():
        stats = add.get("stats")
        stats = json.loads(stats) if isinstance(stats, str) else (stats or {})
        dv = add.get("deletionVector") or {}
        total += int(stats.get("numRecords", 0)) - int(dv.get("cardinality", 0) or 0)
    return total


def delta_columns(path: Path, version: int) -> set[str]:
    """The column names (lower case, hidden ones left out) of a Delta table at `version`."""
    meta, _ = delta_snapshot(path, version)
    fields = json.loads(meta.get("schemaString") or "{}").get("fields", [])
    return {f["name"].lower() for f in fields if f["name"] not in HIDDEN}


def missing_columns(table, present: set[str], folder) -> list:
    """The declared columns of `table` a base version (`folder`, its Parquet columns `present` in lower
    case) was written without: they read NULL. A NOT NULL one is refused, naming it (its rows have no value)."""
    missing = [c for c in table.columns if c.name.lower() not in present]
    names = ", ".join(f"{table.name}.{c.name}" for c in missing if not c.nullable)
    if names:
        raise SchemaError(f"sql/schema.sql declares {names} NOT NULL, but the lake's base of {table.name} ({folder}) was "
                          f"written before the column was declared, so its rows have no value for it; declare it "
                          f"without NOT NULL (the rows already in the lake read NULL) and rerun")
    return missing


def parquet_columns(files) -> set[str]:
    """The column names (lower case) of a base version's Parquet files, from the first file's footer
    (apply-base writes every file of a version with one schema)."""
    files = list(files)
    return {n.lower() for n in pq.read_schema(files[0]).names} if files else set()


def check_batch_id(batch: str) -> None:
    if not BATCH_ID.match(batch or ""):
        raise BadChangeBatch(f"batch id {batch!r} is not valid: batch ids match [A-Za-z0-9_-]+")


def switch_layer_copies(plan: Plan, lake: Lake, copies: dict[str, int]) -> bool:
    """After nightshift apply committed: the copies it wrote become current, and the copies of views no
    nested view reads any more leave the lake's state, in one atomic switch. False when already so."""
    keep = {t.name for t in plan.schema.base_tables} | {v.name for v in plan.copied_views}
    return switch_copies(lake, copies, keep)


def switch_copies(lake: Lake, copies: dict[str, int], keep: set[str] | None = None) -> bool:
    """The lake copies just written (view -> Delta version) replace their old versions in one atomic write of
    the lake's state (the base unchanged); with `keep`, the state's other tables outside it leave it. False,
    and nothing written, when the state is already so (a rerun)."""
    current = lake.state()
    versions = {**{k: v for k, v in current.versions.items() if keep is None or k in keep}, **copies}
    if versions == current.versions:
        return False
    lake.write_state(LakeState(current.applied, versions, current.partitions))
    return True
