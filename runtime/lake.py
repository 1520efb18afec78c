"""The lake's layout and its state file (pure Python; Spark jobs read and write the Parquet).

    lake/changes/<table>/batch_id=<ID>/*.parquet     change batches (the contract)
    lake/base/<table>/v-<ID>/*.parquet              base table versions, one per applied batch
    lake/base/<table>/v-<ID>/__ns_part=YYYY-MM/*.parquet   ... of a table laid out by month ([lake]
                                                    partition_by; _partition.json names the column)
    lake/base/_state.json                           which version of every table is current and
                                                    which batches are applied; replaced atomically
    lake/deltas/batch_id=<ID>/part=<i>/*.parquet    summary-deltas written by propagate (view i of the
                                                    plan, columns prefixed v<i>__, one Spark job)
    lake/deltas/batch_id=<ID>/_night.json           the night's plan (runtime.night), written before the
                                                    summary-deltas; later levels execute it as it is
    lake/deltas/batch_id=<ID>/_manifest.json        written last: propagate of <ID> is complete
    lake/deltas/batch_id=<ID>/_levels/level-<k>.json  propagate --level k ran (Airflow: a task per level)
    lake/deltas/batch_id=<ID>/_nodes/<point>/         summary-deltas a later level derives from
    lake/deltas/batch_id=<ID>/_copies/<view>/         new stored rows of the changed groups of a view nested
                                                    views read (apply-base writes its next copy from them)
    lake/base/<view>/v-<ID>/*.parquet               the copy of a view nested views read (its stored rows),
                                                    versioned and switched with the base tables
    lake/changes/<table>/batch_id=<ID>/_capture.json  what nightshift capture read for the batch (and an
                                                    append source's watermark; runtime.capture)
    lake/stats/batch_id=<ID>.json                   measured summary-delta sizes of the D-lattice's
                                                    points for batch <ID> (the cost model's cache)

apply-base writes new versions (v-<ID>) beside the old ones and then swaps _state.json with one rename,
so a reader or a crash sees the old base or the new one, never half.
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
from lattice.ir import ColumnRef
from runtime.capture import CAPTURE_VERSION, CaptureRecord
from runtime.errors import BadChangeBatch, SchemaError
from runtime.manifest import MANIFEST_VERSION, LevelRecord, Manifest
from runtime.night import NIGHT_VERSION, NightPlan
from runtime.serial import from_json, to_json

BATCH_ID = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass(frozen=True)
class LakeState:
    applied: tuple[str, ...] = ()
    versions: dict[str, str] = field(default_factory=dict)  # table -> version folder name

    @property
    def last(self) -> str | None:
        return self.applied[-1] if self.applied else None


class Lake:
    def __init__(self, root: Path):
        self.root = Path(root)

    # ---------------------------------------------------------------- paths
    @property
    def changes(self) -> Path:
        return self.root / "changes"

    @property
    def base(self) -> Path:
        return self.root / "base"

    def change_dir(self, table: str, batch: str) -> Path:
        return self.changes / table / f"batch_id={batch}"

    def base_version_dir(self, table: str, version: str) -> Path:
        return self.base / table / version

    def delta_root(self, batch: str) -> Path:
        return self.root / "deltas" / f"batch_id={batch}"

    def delta_files(self, batch: str, part: int) -> list[Path]:
        return sorted((self.delta_root(batch) / f"part={part}").glob("*.parquet"))

    def manifest_path(self, batch: str) -> Path:
        return self.delta_root(batch) / "_manifest.json"

    def copy_update_dir(self, batch: str, view: str) -> Path:
        """The new stored rows of the groups batch <ID> changes in a view the lake copies: propagate
        writes them, apply-base makes them part of the view's next lake copy (lake/base/<view>/)."""
        return self.delta_root(batch) / "_copies" / rel("copy", view)

    def node_dir(self, batch: str, node: str) -> Path:
        """Where propagate --level stores the summary-delta of lattice point `node` for later levels."""
        return self.delta_root(batch) / "_nodes" / rel("sd", node)

    def source_of(self, path: str, night: NightPlan) -> tuple[str, str]:
        """What a folder or file a Spark scan of `night`'s propagate read is, as (kind, name) of
        runtime.manifest.RowsRead: the layout above read backwards. `path` as Spark lists it (a URI
        such as file:/lake/base/pos/v-b1 or a plain path)."""
        local = Path(re.sub(r"^file:(//)?", "", path))
        try:
            parts = local.resolve().relative_to(self.root.resolve()).parts
        except ValueError:
            return "other", path
        copied = {c.view for c in night.copies}
        if len(parts) >= 2 and parts[0] == "base":
            return ("copy" if parts[1] in copied else "base"), parts[1]
        if len(parts) >= 2 and parts[0] == "changes":
            return "changes", parts[1]
        if len(parts) >= 3 and parts[:2] == ("deltas", f"batch_id={night.batch}"):
            folder = parts[3] if len(parts) >= 4 else ""
            names = {"_nodes": {rel("sd", n.node): n.node for n in night.nodes},
                     "_copies": {rel("copy", v): v for v in copied}}.get(parts[2])
            if names is not None and folder in names:
                return ("node" if parts[2] == "_nodes" else "update"), names[folder]
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

    def table_rows(self, tables, state: LakeState) -> dict[str, int]:
        """Rows of each table's lake copy at `state`, from its Parquet footers (no Spark job)."""
        return {t.name: parquet_rows(self.current_base_dir(t.name, state)) for t in tables}

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
        return self.base / "_state.json"

    def state(self) -> LakeState:
        if not self.state_path.is_file():
            return LakeState()
        data = json.loads(self.state_path.read_text())
        return LakeState(tuple(data["applied"]), dict(data["versions"]))

    def write_state(self, state: LakeState) -> None:
        """Atomic replace: write a temporary file, fsync, rename over the old one."""
        self.base.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".json.tmp")
        with open(tmp, "w") as f:
            json.dump({"applied": list(state.applied), "versions": state.versions}, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.state_path)

    def current_base_dir(self, table: str, state: LakeState | None = None) -> Path | None:
        state = state or self.state()
        v = state.versions.get(table)
        return self.base_version_dir(table, v) if v else None

    def base_files(self, table: str, state: LakeState | None = None) -> list[Path]:
        """The Parquet files of a table's current base version (in its month folders when partitioned)."""
        d = self.current_base_dir(table, state)
        return sorted(d.rglob("*.parquet")) if d is not None else []

    def check_columns(self, schema, state: LakeState | None = None) -> None:
        """Refuse a NOT NULL column declared after the current base version of its table was written: those
        rows have no value for it (a nullable one reads NULL, spark_jobs.changes.read_base)."""
        for t in schema.base_tables:
            present = parquet_columns(self.base_files(t.name, state))
            if present:
                missing_columns(t, present, self.current_base_dir(t.name, state))

    def collect_garbage(self, state: LakeState, keep: int = 2) -> None:
        """Remove base versions older than the newest `keep` of each table (never the current one)."""
        for table, current in state.versions.items():
            d = self.base / table
            if not d.is_dir():
                continue
            versions = sorted(p.name for p in d.glob("v-*") if p.is_dir())
            doomed = [v for v in versions if v != current][: max(0, len(versions) - keep)]
            for v in doomed:
                shutil.rmtree(d / v, ignore_errors=True)

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
    """Row count of a folder of Parquet files (and its month folders) from their footers (no Spark job);
    0 for no folder."""
    if folder is None:
        return 0
    return sum(pq.ParquetFile(f).metadata.num_rows for f in Path(folder).rglob("*.parquet"))


# ---------------------------------------------------------------- partitioned base versions (issue 21)
# A partitioned table's version folder holds one folder per month of its partition column,
# __ns_part=YYYY-MM (Hive style, so Spark reads the value back; rows whose column is NULL in
# __ns_part=__HIVE_DEFAULT_PARTITION__), and _partition.json naming the column. apply-base rewrites the
# months a batch touches and hard-links the files of the others from the previous version.
PART = "__ns_part"
NULL_PART = "__HIVE_DEFAULT_PARTITION__"
PARTITION_FILE = "_partition.json"


def partition_column(folder: Path | None) -> str | None:
    """The column a base version is partitioned by (months), None for an unpartitioned one."""
    data = _read_json(Path(folder) / PARTITION_FILE) if folder is not None else None
    return data.get("column") if data else None


def partition_folder(folder: Path, month: str | None) -> Path:
    """The folder of one month ('2024-01'; None: the rows whose partition column is NULL)."""
    return Path(folder) / f"{PART}={NULL_PART if month is None else month}"


def partition_months(folder: Path) -> dict[str | None, Path]:
    """month -> its folder, for every month a partitioned version holds."""
    out = {}
    for d in sorted(Path(folder).glob(f"{PART}=*")):
        value = d.name.split("=", 1)[1]
        out[None if value == NULL_PART else value] = d
    return out


def write_partition_column(folder: Path, column: str) -> None:
    _write_json(Path(folder) / PARTITION_FILE, {"column": column, "by": "month"})


def link_folder(src: Path, dst: Path) -> int:
    """Hard-link every file of `src` into `dst` (created): an untouched month enters the new version
    without a copy; removing the old version later leaves the data. Returns the files linked."""
    dst.mkdir(parents=True, exist_ok=True)
    n = 0
    for f in src.iterdir():
        if f.is_file():
            target = dst / f.name
            if target.exists():
                target.unlink()
            try:
                os.link(f, target)
            except OSError:  # another file system: copy
                shutil.copy2(f, target)
            n += 1
    return n


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
