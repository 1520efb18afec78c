"""The lake's Delta tables read without a JVM, at one version, honouring their deletion vectors: for DuckDB
(the oracle and `nightshift verify`, validation, load's key lookup, a Delta source's first capture) and for
Python (pyarrow).

Through the `deltalake` package (delta-rs): its log replay gives the live files, their partition values and
their deletion vectors (each as a keep mask, read the first time one is asked for; which files have one comes
from the log's add actions). Two readers, one per engine:

    register_base   DuckDB: a view in plain SQL, DuckDB's own Parquet reader over the live files, less the
                    rows the vectors delete (a small table of (file, row number)), partition values joined
                    from the log. Plain SQL, so it holds in a DuckDB file other connections open.
    arrow_dataset   pyarrow: a file without a deletion vector is a lazy Parquet fragment; a file with one is
                    read whole and its deleted rows dropped (in memory: only the files the nights' deletes
                    touched since the last compaction). deltalake's own pyarrow dataset refuses every table
                    whose protocol has the deletionVectors reader feature, which every lake table has.

A table with column mapping on (its files hold physical column names) is read by delta-rs's own engine and
held in memory. Types are the lake's: Delta's `timestamp` (UTC instants) reads as a plain TIMESTAMP of the
UTC wall clock, as nightshift's TIMESTAMP is (Spark's session time zone is UTC); strings as plain strings.
"""

from __future__ import annotations

import json
import os
import re
import struct
import time
import uuid
import zlib
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from lattice.sql import base_select_list, ident, literal
from runtime.errors import SchemaError
from runtime.lake import Lake, LakeState


@dataclass(frozen=True)
class DeltaSnapshot:
    """A Delta table at one version, as its log says: where it is, its columns and its live files."""

    path: Path
    version: int
    schema: pa.Schema  # every column, partition columns included, in the lake's Arrow types
    partition_columns: tuple[str, ...]
    files: tuple[tuple[Path, dict], ...]  # (data file, its partition values as text) of every live file
    keep: Mapping  # data file -> its deletion vector's keep mask (pa.BooleanArray); files without one are absent
    mapped: bool  # column mapping on: files hold physical column names, read through deltalake's own scan
    schema_json: str = ""  # the log's schema as it holds it (Spark's JSON schema form)


def is_delta_table(path) -> bool:
    """A Delta table is at `path`: its log holds a commit."""
    log = Path(path) / "_delta_log"
    return log.is_dir() and any(p.suffix in (".json", ".parquet") and p.name[:20].isdigit() for p in log.iterdir())


def open_table(path, version: int | None = None):
    """The `deltalake.DeltaTable` at `path` (at `version`, else the newest); SchemaError naming the path
    when there is no Delta table or the version is not in its log (vacuumed or never written)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError, TableNotFoundError

    if not is_delta_table(path):
        raise SchemaError(f"{path} is not a Delta table (no _delta_log folder)")
    try:
        return DeltaTable(str(path), version=version)
    except TableNotFoundError:
        raise SchemaError(f"{path} is not a Delta table (its _delta_log holds no commit)") from None
    except (DeltaError, OSError, ValueError) as e:
        at = f" at version {version}" if version is not None else ""
        raise SchemaError(f"cannot read the Delta table {path}{at}: {_first_line(e)}") from None


def version(path) -> int | None:
    """The newest version of the Delta table at `path`; None when there is none."""
    return open_table(path).version() if is_delta_table(path) else None


_SNAPSHOTS: dict[tuple, DeltaSnapshot] = {}  # snapshot's, by table, version and its commit file's identity


def snapshot(path, version: int | None = None) -> DeltaSnapshot:
    """The table at `version` (else the newest) from its log: live files, partition values, deletion vectors.
    A version read before in this process is not read again (a commit never changes; the key holds its commit
    file's modification time, size and inode, so a table made anew at the same path is read anew)."""
    if version is not None:
        try:
            st = (Path(path) / "_delta_log" / f"{version:020d}.json").stat()
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = None
        key = (str(path), version, stamp)
        if stamp is not None and key in _SNAPSHOTS:
            return _SNAPSHOTS[key]
        snap = _snapshot(path, version)
        if stamp is not None:
            if len(_SNAPSHOTS) >= 64:
                _SNAPSHOTS.pop(next(iter(_SNAPSHOTS)))
            _SNAPSHOTS[key] = snap
        return snap
    return _snapshot(path, version)


def _snapshot(path, version: int | None = None) -> DeltaSnapshot:
    dt = open_table(path, version)
    config = dt.metadata().configuration or {}
    mapped = config.get("delta.columnMapping.mode", "none") not in ("none", "")
    schema_json = dt.schema().to_json()
    schema = arrow_schema(schema_json)
    parts = tuple(dt.metadata().partition_columns)
    actions = pa.table(dt.get_add_actions(flatten=True))
    part_names = {f"partition.{p}": p for p in parts}
    files, live = [], {}  # live: each file as the log names it -> where it is
    for row in actions.select(["path"] + [c for c in actions.column_names if c in part_names]).to_pylist():
        values = {part_names[k]: v for k, v in row.items() if k in part_names}
        live[row["path"]] = _local(Path(path), row["path"])
        files.append((live[row["path"]], {k: (None if v is None else str(v)) for k, v in values.items()}))
    marked = _marked_files(Path(path), dt.version(), live)
    keep = _keep_masks(dt, Path(path)) if marked is None else KeepMasks(Path(path), dt.version(), marked)
    return DeltaSnapshot(Path(path), dt.version(), schema, parts, tuple(files), keep, mapped, schema_json)


def _keep_masks(dt, path: Path) -> dict:
    """Each data file with a deletion vector -> its keep mask (pa.BooleanArray, False where a row is deleted), as
    delta-rs reads the vectors of the `deltalake.DeltaTable` `dt` of the table at `path`: the one reader of them."""
    dvs = pa.RecordBatchReader.from_stream(dt.deletion_vectors()).read_all()
    masks = dvs.column("selection_vector").combine_chunks() if dvs.num_rows else []
    return {_local(path, uri): masks[i].values for i, uri in enumerate(dvs.column("filepath").to_pylist())}


class KeepMasks(Mapping):
    """DeltaSnapshot.keep when the log said which live files have a deletion vector: which files are marked is
    known at once (whether a file is in it, the marked files, their number), and the masks themselves are read
    (_keep_masks, every vector of the version expanded to a mask a row) the first time one is asked for. Most
    reads of a table ask only which files are marked, and the masks of a large table cost a quarter of a second
    or more (pos at 100M rows, a vector in each month's file)."""

    def __init__(self, path: Path, version: int, marked: frozenset):
        self._path, self._version, self._marked, self._masks = path, version, marked, None

    def __contains__(self, f) -> bool:
        return f in self._marked

    def __iter__(self):
        return iter(self._marked)

    def __len__(self) -> int:
        return len(self._marked)

    def __getitem__(self, f):
        if f not in self._marked:
            raise KeyError(f)
        if self._masks is None:
            masks = _keep_masks(open_table(self._path, self._version), self._path)
            if set(masks) != self._marked:
                raise SchemaError(f"{self._path}: the deletion vectors of version {self._version} are not those of "
                                  f"the files its log marks ({len(masks)} against {len(self._marked)})")
            self._masks = masks
        return self._masks[f]


_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")


def _marked_files(path: Path, version: int, live: dict) -> frozenset | None:
    """The live files of the table at `version` that have a deletion vector, from its log's add actions (the newest
    classic checkpoint at or before `version`, then each commit after it), without reading a vector. live: the
    live files delta-rs found, each as the log names it -> where it is. None when the log is of a form not read
    here (a V2 checkpoint, a commit missing) or what it gives are not those files: the caller then reads the
    vectors themselves."""
    log = path / "_delta_log"
    try:
        names = os.listdir(log)
    except OSError:
        return None
    parts: dict[int, list[str]] = {}
    for name in names:
        m = _CHECKPOINT.match(name)
        if m:
            parts.setdefault(int(m.group(1)), []).append(name)
        elif ".checkpoint." in name and name[:20].isdigit() and int(name[:20]) <= version:
            return None  # a V2 checkpoint (its actions may be in sidecar files)
    start, state = 0, {}
    for v in sorted((v for v in parts if v <= version), reverse=True):
        total = _CHECKPOINT.match(parts[v][0]).group(3)
        if total is None or len(parts[v]) == int(total):
            for name in sorted(parts[v]):  # its live files' paths and whether each has a vector, in Arrow
                adds = pq.read_table(log / name, columns=["add"]).column("add").combine_chunks()
                adds = adds.filter(adds.is_valid())
                has = (pc.is_valid(adds.field("deletionVector")) if adds.type.get_field_index("deletionVector") >= 0
                       else pa.repeat(False, len(adds)))
                state.update(zip(adds.field("path").to_pylist(), has.to_pylist()))
            start = v + 1
            break
    for v in range(start, version + 1):
        try:
            with open(log / f"{v:020d}.json", encoding="utf-8") as commit:
                actions = [json.loads(line) for line in commit if line.strip()]
        except OSError:
            return None
        # a commit's removes name the files as they were (a file given a deletion vector is removed with its old
        # vector and added with its new one, in either order): they go first
        for action in actions:
            if "remove" in action:
                state.pop(action["remove"]["path"], None)
        for action in actions:
            if "add" in action:
                state[action["add"]["path"]] = action["add"].get("deletionVector") is not None
    local = {live.get(p) or _local(path, p): dv for p, dv in state.items()}  # a file is located once
    if set(local) != set(live.values()):
        return None
    return frozenset(f for f, dv in local.items() if dv)


def deleted_rows(snap: DeltaSnapshot, full_path: bool = False) -> pa.Table:
    """The rows the snapshot's deletion vectors delete: (file, row number in the file); the file by its name
    (unique: Delta names data files by a UUID), or by its whole path."""
    gone = {(str(f) if full_path else f.name): pc.indices_nonzero(pc.invert(m)).cast(pa.int64()) for f, m in snap.keep.items()}
    return pa.table({
        "file": pa.chunked_array([pa.repeat(pa.scalar(f), len(rows)) for f, rows in gone.items()], pa.string()),
        "row": pa.chunked_array(list(gone.values()), pa.int64()),
    })


# ---------------------------------------------------------------- compaction
# Compaction rewrites a table's files without changing its rows (Delta marks those commits dataChange=false):
# the nights' small appends bin-packed into larger files, and the rows deletion vectors delete dropped.
SMALL_FILE = 16 << 20  # a file under this is a candidate for bin-packing
SMALL_FILES = 16  # ... once the table has this many
TARGET_FILE = 128 << 20  # the size bin-packing writes
DELETED_RATIO = 0.05  # a file that lost more than this share of its rows has the table's deleted rows purged


@dataclass(frozen=True)
class Compaction:
    """What compacting one lake table at one version does, decided from its log alone (no Spark)."""

    table: str
    small: int  # files under SMALL_FILE
    deleted: int  # files with more than DELETED_RATIO of their rows deleted
    marked: int  # files with any deletion vector
    purge: bool  # drop every deleted row (`nightshift compact --purge`), not only those of the files above

    @property
    def pack(self) -> bool:
        """Bin-pack the small files (Delta's OPTIMIZE)."""
        return self.small >= SMALL_FILES

    @property
    def drop(self) -> bool:
        """Write every file with deleted rows again without them (REORG TABLE ... APPLY (PURGE))."""
        return self.deleted > 0 or (self.purge and self.marked > 0)

    @property
    def needed(self) -> bool:
        return self.pack or self.drop

    def reason(self) -> str:
        parts = []
        if self.small >= SMALL_FILES:
            parts.append(f"{self.small} files under {SMALL_FILE >> 20} MiB")
        if self.deleted:
            parts.append(f"{self.deleted} of {self.marked} file(s) with deleted rows lost more than "
                         f"{DELETED_RATIO:.0%} of their rows")
        elif self.purge and self.marked:
            parts.append(f"{self.marked} file(s) with deleted rows (--purge)")
        return "; ".join(parts) or "nothing to compact"


def compaction(table: str, path, version: int, purge: bool = False) -> Compaction:
    """Whether and why the Delta table at `version` needs compacting (its live files' sizes and record
    counts, its deletion vectors' cardinalities, all from the log)."""
    dt = open_table(path, version)
    adds = pa.table(dt.get_add_actions(flatten=True)).select(["path", "size_bytes", "num_records"]).to_pylist()
    records = {_local(Path(path), a["path"]): a["num_records"] for a in adds}
    small = sum(1 for a in adds if a["size_bytes"] < SMALL_FILE)
    deleted = marked = 0
    for f, mask in _keep_masks(dt, Path(path)).items():
        gone = len(mask) - (pc.sum(mask).as_py() or 0)
        if gone:
            marked += 1
            total = records.get(f) or len(mask)
            deleted += gone > DELETED_RATIO * total
    return Compaction(table, small, deleted, marked, purge)


def data_unchanged(path, since: int, until: int) -> bool:
    """Every commit of the Delta table after version `since` up to `until` only rearranged files (each of
    its file actions says dataChange false: a compaction): the table at `until` holds the rows it held at
    `since`."""
    log = Path(path) / "_delta_log"
    for v in range(since + 1, until + 1):
        commit = log / f"{v:020d}.json"
        if not commit.is_file():
            return False
        for line in commit.read_text().splitlines():
            action = json.loads(line) if line.strip() else {}
            for kind in ("add", "remove", "cdc"):
                if kind in action and action[kind].get("dataChange", True):
                    return False
            if "metaData" in action or "protocol" in action:
                return False
    return True


def committed(path, mark: str, since: int | None) -> bool:
    """Whether a commit of the Delta table after version `since` (None: any) carries `mark` (Lake.commit_mark) as
    its commit info's user metadata: a night's commit of the table done before a crash. The marks compare by the
    table, the batch's sequence number and the step, not by the lake's path (a lake written before marks left it
    out named its folder there: moved since, it still knows its commits). Read on the driver from the commits' log
    files, newest first (a night's rerun finds its own commit among the last few)."""
    wanted = _mark_key(mark)
    if wanted is None:  # not a night's mark: no commit is its commit (an unmarked one would compare equal)
        return False
    log = Path(path) / "_delta_log"
    versions = sorted((int(p.stem) for p in log.glob("*.json") if p.stem.isdigit()), reverse=True)
    for v in versions:
        if since is not None and v <= since:
            return False
        for line in (log / f"{v:020d}.json").read_text().splitlines():
            if '"commitInfo"' in line:
                if _mark_key(json.loads(line)["commitInfo"].get("userMetadata")) == wanted:
                    return True
                break
    return False


def _mark_key(metadata) -> tuple | None:
    """What identifies a night's commit in its user metadata: (table, sequence number, step); None for a commit
    nightshift did not mark."""
    try:
        mark = json.loads(metadata) if isinstance(metadata, str) else None
    except ValueError:
        return None
    if not isinstance(mark, dict) or "nightshift" not in mark:
        return None
    return mark.get("table"), mark.get("batch"), mark.get("step", "")


# A lake table's protocol when its properties turn deletion vectors on: the one Spark's writer gives it
_DV_PROTOCOL = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                "writerFeatures": ["deletionVectors", "invariants", "appendOnly"]}


def create_table(path, schema_json: str, partition_by: list[str], configuration: dict[str, str]) -> bool:
    """Make an empty Delta table at `path`: its version 0 holds only its protocol and metadata, as Spark's
    writer would make them for these columns (Spark's JSON schema form), layout and table properties.
    False, nothing made: the table exists (another writer made it first)."""
    (Path(path) / "_delta_log").mkdir(parents=True, exist_ok=True)
    now = int(time.time() * 1000)
    dv = configuration.get("delta.enableDeletionVectors", "false").lower() == "true"
    meta = {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}}, "schemaString": schema_json,
            "partitionColumns": list(partition_by), "configuration": dict(configuration), "createdTime": now}
    info = {"timestamp": now, "operation": "CREATE TABLE",
            "operationParameters": {"partitionBy": json.dumps(list(partition_by)), "properties": json.dumps(configuration)},
            "isolationLevel": "Serializable", "isBlindAppend": True, "engineInfo": "nightshift"}
    protocol = _DV_PROTOCOL if dv else {"minReaderVersion": 1, "minWriterVersion": 2}
    return _commit_file(Path(path), 0, [{"commitInfo": info}, {"metaData": meta}, {"protocol": protocol}])


def write_arrow(path, rows: pa.Table, mode: str, mark: str | None) -> bool:
    """Commit `rows` to the existing Delta table at `path` from this process (delta-rs), no Spark job: an
    append, or an overwrite keeping the table's columns and layout. `mark`: the commit's user metadata
    (Lake.commit_mark). For small commits: Spark's Delta writer spends about half a second on the
    table's state before it writes a few thousand rows (an overwrite even more); this takes a tenth.
    False, nothing committed: the table's columns are not the rows' (the caller writes through Spark)."""
    from deltalake import CommitProperties, write_deltalake

    dt = open_table(path)
    names = [f.name for f in dt.schema().fields]
    if sorted(names) != sorted(rows.column_names):
        return False
    parts = list(dt.metadata().partition_columns)
    props = CommitProperties(custom_metadata={"userMetadata": mark}) if mark else None
    write_deltalake(dt, rows.select(names), mode=mode, partition_by=parts or None, commit_properties=props)
    return True


# ---------------------------------------------------------------- deletes by row position
# A night's few deletes from a large table are deletion vectors on the files that hold the rows, as Spark's
# DELETE makes them, but written and committed from this process: Spark's DELETE rebuilds the table's state
# and scans it (seconds) to find rows the delete check already located (file, row number).
_DV_WRITER_FEATURES = {"deletionVectors", "invariants", "appendOnly", "checkConstraints", "timestampNtz",
                       "generatedColumns", "identityColumns", "domainMetadata", "vacuumProtocolCheck"}
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_PORTABLE_MAGIC = 1681511377  # Delta's RoaringBitmapArray, portable serialization
_NO_RUN_COOKIE = 12346  # a 32-bit Roaring bitmap without run containers (portable format)


def deletes_by_position(path) -> bool:
    """Whether delete_positions writes this Delta table's deletes (at its newest version): deletion vectors on,
    no table feature beyond their needs, no change data feed, not append-only, no column mapping."""
    return _deletes_by_position(open_table(path))


def _deletes_by_position(dt) -> bool:
    proto, config = dt.protocol(), dt.metadata().configuration or {}
    features = set(proto.writer_features or ())
    return (features <= _DV_WRITER_FEATURES and "deletionVectors" in features
            and config.get("delta.enableDeletionVectors", "false").lower() == "true"
            and config.get("delta.enableChangeDataFeed", "false").lower() != "true"
            and config.get("delta.appendOnly", "false").lower() != "true"
            and config.get("delta.columnMapping.mode", "none") in ("none", ""))


def delete_positions(path, rows: dict, mark: str | None) -> bool:
    """Delete rows of the Delta table at `path` by position, in one commit made from this process: `rows`
    maps a live data file's name to the row numbers (0-based, in the file) to delete. Each file's deletion
    vector becomes its old one plus these rows, written together to one new deletion-vector file, and the
    commit removes each file with its old vector and adds it back with its new one: the commit Spark's
    DELETE makes. `mark`: the commit's user metadata.

    False, nothing committed: the table is not one this writer handles (a table feature beyond deletion
    vectors' needs, change data feed, deletion vectors off, append-only) or a file is not live at the
    newest version or one of the rows is deleted already (another writer's commit since the rows were
    located); the caller then deletes through Spark."""
    dt = open_table(path)
    if not _deletes_by_position(dt):
        return False
    latest = dt.version()
    adds = _live_adds(Path(path), set(rows), latest)
    if adds is None:
        return False
    gone = {}  # file name -> the row numbers its old vector deletes
    if any(a.get("deletionVector") for a in adds.values()):
        gone = {f.name: pc.indices_nonzero(pc.invert(mask)).to_numpy().astype(np.int64)
                for f, mask in _keep_masks(dt, Path(path)).items() if f.name in rows}
    dv_id = uuid.uuid4()
    blob, actions, now, deleted = bytearray(b"\x01"), [], int(time.time() * 1000), 0
    for name, positions in rows.items():
        add = adds[name]
        if add.get("deletionVector") and name not in gone:
            return False  # a vector delta-rs did not read: leave it to Spark
        old = gone.get(name, np.empty(0, np.int64))
        new_rows = np.unique(np.asarray(positions, np.int64))
        if np.intersect1d(new_rows, old).size:
            return False
        dead = np.union1d(old, new_rows)
        deleted += new_rows.size
        bitmap = _roaring_array(dead)
        offset = len(blob)
        blob += struct.pack(">i", len(bitmap)) + bitmap + struct.pack(">I", zlib.crc32(bitmap))
        remove = {"path": add["path"], "deletionTimestamp": now, "dataChange": True, "extendedFileMetadata": True,
                  "partitionValues": add.get("partitionValues") or {}, "size": add["size"]}
        for k in ("stats", "tags", "deletionVector"):
            if add.get(k) is not None:
                remove[k] = add[k]
        new = dict(add)
        new["dataChange"] = True
        if new.get("stats"):
            new["stats"] = _wide_bounds(new["stats"])
        new["deletionVector"] = {"storageType": "u", "pathOrInlineDv": _z85(dv_id.bytes), "offset": offset,
                                 "sizeInBytes": len(bitmap), "cardinality": int(dead.size)}
        actions += [{"remove": remove}, {"add": new}]
    info = {"timestamp": now, "operation": "DELETE", "operationParameters": {"predicate": "[\"row positions\"]"},
            "readVersion": latest, "isolationLevel": "Serializable", "isBlindAppend": False,
            "operationMetrics": {"numDeletedRows": str(deleted), "numDeletionVectorsAdded": str(len(rows) - len(gone)),
                                 "numDeletionVectorsUpdated": str(len(gone)), "numRemovedFiles": "0", "numAddedFiles": "0"},
            "engineInfo": "nightshift"}
    if mark is not None:
        info["userMetadata"] = mark
    dv_file = Path(path) / f"deletion_vector_{dv_id}.bin"
    dv_file.write_bytes(bytes(blob))
    return _commit_file(Path(path), latest + 1, [{"commitInfo": info}] + actions)


def _commit_file(path: Path, version: int, actions: list[dict]) -> bool:
    """Write commit `version` of the table's log, only if no other writer made it first (the file is linked
    into place: created or not at all, never half written). False when the version exists."""
    log = path / "_delta_log"
    target = log / f"{version:020d}.json"
    tmp = log / f".{version:020d}.json.{uuid.uuid4()}.tmp"
    tmp.write_text("\n".join(json.dumps(a, separators=(",", ":")) for a in actions) + "\n")
    try:
        os.link(tmp, target)
    except FileExistsError:
        return False
    finally:
        tmp.unlink()
    return True


def _live_adds(path: Path, names: set[str], version: int) -> dict[str, dict] | None:
    """The `add` actions, as the log holds them, that make the files `names` (data file names) live at
    `version` (runtime.lake's replay of the log); None when one of them is not live."""
    from runtime.lake import delta_snapshot

    found = {}
    for add in delta_snapshot(path, version)[1].values():
        name = Path(unquote(add["path"])).name
        if name in names:
            found[name] = _as_logged(add)
    return found if len(found) == len(names) else None


def _as_logged(add: dict) -> dict:
    """An add action in the form a JSON commit holds it: a checkpoint's row of it has maps as lists of pairs,
    parsed copies of its statistics and partition values, and a null for every field it leaves out."""
    out = {k: v for k, v in add.items() if v is not None and not k.endswith("_parsed")}
    for k in ("partitionValues", "tags"):
        if isinstance(out.get(k), list):
            out[k] = dict(out[k])
    if isinstance(out.get("deletionVector"), dict):
        out["deletionVector"] = {k: v for k, v in out["deletionVector"].items() if v is not None}
    return out


def _wide_bounds(stats: str) -> str:
    """A file's statistics once rows of it are deleted: its minimum and maximum values may no longer be
    reached (Delta's tightBounds false). The rest verbatim."""
    if '"tightBounds":true' in stats:
        return stats.replace('"tightBounds":true', '"tightBounds":false')
    if '"tightBounds"' in stats:
        return stats
    return stats.rstrip()[:-1] + (',"tightBounds":false}' if stats.strip() != "{}" else '"tightBounds":false}')


def _roaring_array(values: np.ndarray) -> bytes:
    """Delta's portable RoaringBitmapArray of sorted, distinct row numbers: one 32-bit Roaring bitmap per
    value of their high 32 bits, from 0 to the largest."""
    highs = values >> 32
    count = int(highs[-1]) + 1 if values.size else 0
    out = struct.pack("<iq", _PORTABLE_MAGIC, count)
    for high in range(count):
        out += struct.pack("<i", high) + _roaring32(values[highs == high] & 0xFFFFFFFF)
    return out


def _roaring32(values: np.ndarray) -> bytes:
    """A 32-bit Roaring bitmap of sorted, distinct values in the portable format: a container per value of
    their high 16 bits, an array of the low 16 bits when 4,096 or fewer, else a 65,536-bit bitmap (no run
    containers)."""
    keys, starts = np.unique(values >> 16, return_index=True)
    ends = list(starts[1:]) + [values.size]
    header = struct.pack("<II", _NO_RUN_COOKIE, len(keys))
    bodies = []
    for key, start, end in zip(keys, starts, ends):
        lows = (values[start:end] & 0xFFFF).astype("<u2")
        header += struct.pack("<HH", int(key), lows.size - 1)
        if lows.size <= 4096:
            bodies.append(lows.tobytes())
        else:
            bits = np.zeros(65536, bool)
            bits[lows] = True
            bodies.append(np.packbits(bits, bitorder="little").tobytes())
    offset, offsets = len(header) + 4 * len(keys), []
    for body in bodies:
        offsets.append(offset)
        offset += len(body)
    return header + struct.pack(f"<{len(keys)}I", *offsets) + b"".join(bodies)


def _z85(data: bytes) -> str:
    """Z85 text of `data` (a multiple of 4 bytes): how the log names a deletion vector's file (its UUID)."""
    out = []
    for i in range(0, len(data), 4):
        n = struct.unpack(">I", data[i:i + 4])[0]
        chunk = []
        for _ in range(5):
            n, r = divmod(n, 85)
            chunk.append(_Z85[r])
        out.extend(reversed(chunk))
    return "".join(out)


def arrow_dataset(path, version: int | None = None) -> pads.Dataset:
    """The rows of the Delta table at `path` at `version` (else the newest) as a pyarrow dataset, without the
    rows its deletion vectors delete. Scan it as often as needed: it reads the files, not a stream."""
    return dataset_of(snapshot(path, version))


def dataset_of(snap: DeltaSnapshot, columns: list[str] | None = None) -> pads.Dataset:
    """arrow_dataset of a snapshot already read; `columns`: only these (a file with a deletion vector is read into
    memory, and only these columns of it)."""
    if snap.mapped:
        return pads.dataset(_scan_all(snap), schema=snap.schema)
    schema = snap.schema if columns is None else pa.schema([snap.schema.field(c) for c in columns])
    fmt = pads.ParquetFileFormat()
    fragments, deleted_from = [], []
    for f, values in snap.files:
        if f in snap.keep:
            deleted_from.append(_kept_rows(snap, f, values, schema))
        else:
            fragments.append(fmt.make_fragment(str(f), filesystem=_FS, partition_expression=_partition_expr(snap, values)))
    lazy = pads.FileSystemDataset(fragments, schema, fmt, _FS)
    if not deleted_from:
        return lazy
    return pads.UnionDataset(schema, [lazy, pads.InMemoryDataset(pa.concat_tables(deleted_from), schema=schema)])


def read_table(path, version: int | None = None, columns: list[str] | None = None) -> pa.Table:
    """The rows of the Delta table at `version` as one Arrow table (columns: a projection, the only columns read)."""
    return read_snapshot(snapshot(path, version), columns)


def read_snapshot(snap: DeltaSnapshot, columns: list[str] | None = None) -> pa.Table:
    """read_table of a snapshot already read."""
    return dataset_of(snap, columns).to_table(columns=columns)


# matching_rows reads each file this many rows at a time (memory is reused batch to batch, not taken anew per file)
MATCH_BATCH = 1 << 18
_MIX = np.uint64(0x9E3779B97F4A7C15)  # an odd 64-bit constant: row_words mixes columns by multiply-add with it


def _fixed(t: pa.DataType) -> bool:
    """Whether row_words takes a column of type `t`."""
    return pa.types.is_decimal128(t) or pa.types.is_integer(t) or pa.types.is_date(t)


def row_words(arrays: list[pa.Array]) -> np.ndarray | None:
    """One 64-bit word per row over the fixed-width values of `arrays` (integers, dates, decimals: their bits, a
    decimal's low 64), mixed column by column: rows equal on these columns have equal words, unequal ones rarely do.
    A NULL's word is whatever its slot holds (callers match such rows exactly after). None: a column of another type."""
    words = None
    with np.errstate(over="ignore"):
        for a in arrays:
            t = a.type
            if not len(a):
                held = np.zeros(0, dtype=np.uint64)
            elif pa.types.is_decimal128(t):
                held = np.frombuffer(a.buffers()[1], dtype=np.uint64, count=2 * (a.offset + len(a)))[2 * a.offset::2]
            elif pa.types.is_integer(t) or pa.types.is_date(t):
                held = np.frombuffer(a.buffers()[1], dtype=np.dtype(f"i{t.bit_width // 8}"),
                                     count=a.offset + len(a))[a.offset:]
            else:
                return None
            if words is None:
                words = held.astype(np.uint64)
            else:
                words *= _MIX
                words += held.astype(np.uint64, copy=False)
        if words is not None:
            words *= _MIX  # every column's bits reach the word's high bits (the sieve's index)
    return words


def _among(words: np.ndarray, known: np.ndarray) -> np.ndarray:
    """Which of `words` are in `known` (sorted): a mask, by binary search (a hash set of `known` built for every
    batch costs more than the lookups)."""
    if not len(known):
        return np.zeros(len(words), dtype=bool)
    at = np.searchsorted(known, words)
    at[at == len(known)] = 0
    return known[at] == words


class Read(NamedTuple):
    """What a pass over a table read: every row of every row group it read (its deleted ones too), and the
    compressed bytes of those row groups' column chunks of the columns it read (as the files' footers give them)."""

    rows: int
    bytes: int


def chunk_bytes(meta: pq.FileMetaData, group: int, columns) -> int:
    """The compressed bytes of row group `group`'s column chunks of `columns` (top-level names) in a file's footer."""
    rg, wanted = meta.row_group(group), set(columns)
    return sum(rg.column(i).total_compressed_size for i in range(rg.num_columns)
               if rg.column(i).path_in_schema.split(".")[0] in wanted)


def columns_bytes(snap: DeltaSnapshot, columns) -> int:
    """The compressed bytes of `columns`' chunks in every live file of `snap`: what reading those columns takes."""
    return sum(chunk_bytes(meta, g, columns) for _, _, meta, g, _ in _row_groups(snap, None))


def file_bytes(files) -> int:
    """The bytes of whole files read (a small table's or a change batch's, every column)."""
    return sum(Path(f).stat().st_size for f in files)


def _row_groups(snap: DeltaSnapshot, partitions: set | None) -> list[tuple]:
    """The row groups a pass over `snap` reads, each (file, its partition values, its footer, row group, the
    group's first row in the file): every live file's, or (`partitions`) only the files whose first partition
    column's value is among these."""
    units = []
    for f, values in snap.files:
        if partitions is not None and snap.partition_columns and \
                values.get(snap.partition_columns[0]) not in partitions:
            continue
        meta = pq.read_metadata(f)
        first = 0
        for g in range(meta.num_row_groups):
            units.append((f, values, meta, g, first))
            first += meta.row_group(g).num_rows
    return units


def _in_threads(one, units: list) -> list:
    """one(unit) for every unit, in parallel threads (as many as the cores, at most one a unit)."""
    if not units:
        return []
    with ThreadPoolExecutor(max_workers=min(len(units), os.cpu_count() or 1)) as pool:
        return list(pool.map(one, units))


def _keep_slice(keep: pa.Array, start: int, n: int) -> pa.Array:
    """Rows start .. start + n of a file's keep mask; rows past the vector's end are kept."""
    mask = keep.slice(start, n)
    if len(mask) < n:
        mask = pa.concat_arrays([mask, pa.array(np.ones(n - len(mask), dtype=bool))])
    return mask


class Tally(NamedTuple):
    """value_counts asked of a pass that reads the columns anyway (matching_rows' `tallies`): how many live rows hold
    each (keys, value) among the rows whose `keys` (the lake's names) equal a row of `probe` and whose `value` is
    within `below` and `since` (delta.within), in the months `partitions` of a table laid out by month."""

    keys: list[str]
    value: str
    probe: pa.Table
    partitions: set
    below: object = None
    since: object = None


def matching_rows(snap: DeltaSnapshot, columns: list[str], probe: pa.Table, keys: list[str],
                  place: tuple[str, str], partitions: set | None = None,
                  tallies: Sequence[Tally] = ()) -> tuple[pa.Table, Read, list[pa.Table]]:
    """The live rows of `snap` equal on `keys` to some row of `probe` (SQL equality: a NULL matches nothing),
    one pass over the live files, each file's `columns` only (the lake's names; a column a file lacks reads
    NULL), then the table's partition columns, then each row's place: `place` names the columns of its file's
    name and its row number in the file (the positions delete_positions takes). `partitions`: only the files
    whose first partition column's value is among these (None: every file). Returns the rows and what the pass
    read (Read: every row of every file it read, its deleted ones too, and the bytes of the columns it read). The
    files' row groups are read in parallel threads, MATCH_BATCH rows at a time; a batch's rows are first sifted by
    one word per row over the fixed-width keys (row_words) against the probe's words (a bitmap of their high bits,
    then the words themselves), and only the few that pass are matched on every key (a column mapping table is
    refused: callers read it some other way).

    tallies: value_counts of each made in the same pass, over the row groups it reads anyway (its keys and value
    among `columns`), returned third in their order, each as value_counts returns it: one read of the base for all.
    A tally counts the months of its `partitions` that the pass reads (`partitions`); a caller wanting others counts
    them itself."""
    if snap.mapped:
        raise ValueError(f"{snap.path}: column mapping is on; matching_rows reads files by the columns' own names")
    wanted = pa.schema([snap.schema.field(c) for c in columns])
    probe = probe.select(keys)
    sift = [k for k in keys if _fixed(wanted.field(k).type)]
    if sift:
        try:
            probe_words = row_words([a.combine_chunks() for a in probe.select(sift).cast(
                pa.schema([wanted.field(k) for k in sift])).columns])
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            sift = []
    known = np.unique(probe_words) if sift else None  # sorted: a row's word is looked up by binary search
    if sift:  # a bitmap over the words' high bits, about 64 bits per probe word: most rows leave at one lookup there
        bits = min(24, max(16, int(np.ceil(np.log2(64 * max(1, len(known)))))))
        shift = np.uint64(64 - bits)
        sieve = np.zeros(1 << bits, dtype=np.bool_)
        sieve[(probe_words >> shift).astype(np.intp)] = True

    units = _row_groups(snap, partitions)
    counted = []  # each tally's columns (the keys, then the value) in the lake's types, and its probe in them
    for tally in tallies:
        names = [*tally.keys, tally.value]
        if not set(names) <= set(columns):
            raise ValueError(f"{snap.path}: a tally's columns {names} are not among the pass's {columns}")
        schema = pa.schema([snap.schema.field(c) for c in names])
        counted.append((schema, tally.probe.select(tally.keys).cast(pa.schema(list(schema)[:-1]))))

    def counts_of(k: int, batch: pa.RecordBatch, keep: pa.Array | None, start: int) -> pa.Table:
        """Tally k's rows of one batch (its live rows with the keys and a value within bounds)."""
        tally, (schema, probe) = tallies[k], counted[k]
        data = pa.Table.from_batches([batch.select(schema.names)]).cast(schema)
        if keep is not None:
            data = data.filter(_keep_slice(keep, start, data.num_rows))
        data = data.filter(within(data.column(tally.value), tally.below, tally.since))
        return data.join(probe, tally.keys, join_type="left semi", use_threads=False)

    def one(unit) -> tuple[pa.Table, Read, list[list[pa.Table]]]:
        f, values, meta, g, first = unit
        pf = pq.ParquetFile(f, metadata=meta)  # a reader of its own: one ParquetFile is not shared by threads
        held = set(pf.schema_arrow.names)
        present = [c for c in columns if c in held]
        sifted = bool(sift) and all(k in held for k in sift)
        parts, start = [], first
        keep = snap.keep.get(f)
        # a tally whose column this file lacks (added since) counts nothing here: NULL matches no probe
        counting = [k for k, t in enumerate(tallies) if set(counted[k][0].names) <= held and snap.partition_columns
                    and values.get(snap.partition_columns[0]) in t.partitions]
        tallied: list[list[pa.Table]] = [[] for _ in tallies]
        for batch in pf.iter_batches(batch_size=MATCH_BATCH, row_groups=[g], columns=present, use_threads=False):
            n = batch.num_rows
            for k in counting:
                tallied[k].append(counts_of(k, batch, keep, first))
            rows = np.arange(first, first + n, dtype=np.int64)
            if sifted:
                words = row_words([batch.column(k) for k in sift])
                hit = np.flatnonzero(sieve[(words >> shift).astype(np.intp)])
                hit = hit[_among(words[hit], known)]
                batch, rows = batch.take(pa.array(hit)), rows[hit]
            if keep is not None:  # rows past the vector's end are kept
                inside = rows < len(keep)
                alive = np.ones(len(rows), dtype=bool)
                alive[inside] = keep.take(pa.array(rows[inside])).to_numpy(zero_copy_only=False)
                batch, rows = batch.filter(pa.array(alive)), rows[alive]
            parts.append(pa.table([batch.column(c) if c in held else pa.nulls(len(rows), wanted.field(c).type)
                                   for c in columns] + [pa.array(rows)], names=[*columns, place[1]]))
            first += n
        data = pa.concat_tables(parts) if parts else pa.table(
            {**{c: pa.array([], wanted.field(c).type) for c in columns}, place[1]: pa.array([], pa.int64())})
        hit = data.cast(pa.schema([*wanted, pa.field(place[1], pa.int64())])).join(
            probe, keys, join_type="left semi", use_threads=False)
        for p in snap.partition_columns:
            text = values.get(p)
            field = snap.schema.field(p)
            hit = hit.append_column(field, pa.array([None if text is None else _typed(text, field.type)] * hit.num_rows,
                                                    field.type))
        hit = hit.append_column(place[0], pa.array([f.name] * hit.num_rows, pa.string()))
        return hit, Read(first - start, chunk_bytes(meta, g, present)), tallied

    out_schema = pa.schema([*wanted, *(snap.schema.field(p) for p in snap.partition_columns),
                            pa.field(place[0], pa.string()), pa.field(place[1], pa.int64())])
    found = _in_threads(one, units)
    parts = [h.select(out_schema.names).cast(out_schema) for h, _, _ in found]
    rows = pa.concat_tables(parts) if parts else out_schema.empty_table()
    read = _read_sum(r for _, r, _ in found)
    return rows, read, [_counted([t for _, _, ts in found for t in ts[k]], schema) for k, (schema, _) in enumerate(counted)]


def _counted(rows: list[pa.Table], schema: pa.Schema) -> pa.Table:
    """value_counts' result from the rows a pass kept (`schema`: the keys, then the value): per (keys, value) the
    number of rows, the keys by name, then `_v` and `_n` (int64)."""
    columns = schema.names
    data = pa.concat_tables(rows) if rows else schema.empty_table()
    counts = data.group_by(columns, use_threads=False).aggregate([([], "count_all")])
    counts = counts.select(columns).append_column("_n", counts.column("count_all").cast(pa.int64()))
    return counts.rename_columns([*columns[:-1], "_v", "_n"])


def _read_sum(reads) -> Read:
    reads = list(reads)
    return Read(sum(r.rows for r in reads), sum(r.bytes for r in reads))


def within(values: pa.ChunkedArray | pa.Array, below=None, since=None) -> pa.ChunkedArray | pa.Array:
    """Which of `values` are not NULL and are below `below` or from `since` on (either bound None: no such side;
    both None: every value): a mask, the bounds of value_counts and of a lost extreme's first pass
    (lattice.emit.Window's upto and since)."""
    sides = ([pc.less(values, pa.scalar(below, values.type))] if below is not None else []) + \
        ([pc.greater_equal(values, pa.scalar(since, values.type))] if since is not None else [])
    return pc.or_(*sides) if len(sides) == 2 else sides[0] if sides else pc.is_valid(values)


def value_counts(snap: DeltaSnapshot, keys: list[str], value: str, probe: pa.Table, below=None, since=None,
                 partitions: set | None = None) -> tuple[pa.Table, Read]:
    """How many live rows of `snap` hold each (keys, value), over the rows whose `keys` equal a row of `probe`
    (SQL equality: a NULL matches nothing) and whose `value` is not NULL and is below `below` or from `since` on
    (either bound None: no such side; both None: every value). One pass, each file's `keys` and `value` only, the
    files' row groups in parallel threads; `partitions`: only the files whose first partition column's value is
    among these (None: every file). Returns the counts (`keys`, then `value` as `_v` and the count as `_n`, int64)
    and what the pass read (Read: every row of every row group it read, its deleted ones too, and their bytes).
    Each row group is read MATCH_BATCH rows at a time, as matching_rows reads."""
    if snap.mapped:
        raise ValueError(f"{snap.path}: column mapping is on; value_counts reads files by the columns' own names")
    columns = [*keys, value]
    wanted = pa.schema([snap.schema.field(c) for c in columns])
    probe = probe.select(keys).cast(pa.schema([wanted.field(k) for k in keys]))
    units = _row_groups(snap, partitions)
    few = len(units) < (os.cpu_count() or 1)  # fewer row groups than cores: each decodes its columns in threads

    def one(unit) -> tuple[pa.Table, Read]:
        f, _, meta, g, first = unit
        pf = pq.ParquetFile(f, metadata=meta)  # a reader of its own: one ParquetFile is not shared by threads
        if not all(c in set(pf.schema_arrow.names) for c in columns):  # a column added since: NULL, matching nothing
            return wanted.empty_table(), Read(0, 0)
        keep, parts, read = snap.keep.get(f), [], 0
        for batch in pf.iter_batches(batch_size=MATCH_BATCH, row_groups=[g], columns=columns, use_threads=few):
            data = pa.Table.from_batches([batch]).cast(wanted)
            if keep is not None:
                data = data.filter(_keep_slice(keep, first + read, data.num_rows))
            read += batch.num_rows
            data = data.filter(within(data.column(value), below, since))
            parts.append(data.join(probe, keys, join_type="left semi", use_threads=False))
        return (pa.concat_tables(parts) if parts else wanted.empty_table()), Read(read, chunk_bytes(meta, g, columns))

    found = _in_threads(one, units)
    return _counted([t for t, _ in found], wanted), _read_sum(r for _, r in found)


def duckdb_view(con, name: str, path, version: int | None, select: str | None = None) -> pads.Dataset:
    """Make `name` a view of the DuckDB connection `con` over the Delta table at `version`; `select` is its
    select list (default: every column). The dataset is registered under a name of its own; DuckDB reads it
    lazily, pushing projections and filters down. Returns the dataset."""
    return _register(con, name, arrow_dataset(path, version), select)


def _register(con, name: str, dataset: pads.Dataset, select: str | None) -> pads.Dataset:
    source = f"__ns_delta_{name}"
    con.register(source, dataset)
    con.execute(f"CREATE OR REPLACE VIEW {ident(name)} AS SELECT {select or '*'} FROM {ident(source)}")
    return dataset


def register_base(con, lake: Lake, table, state: LakeState, cast: bool = False) -> None:
    """The one way DuckDB reads a table of the lake (a base table, an auxiliary view, a view's lake copy):
    view `table.name` of `con` over its Delta table at exactly the version `state` records, its declared
    columns only (the hidden ones left out; a column declared after the version was written reads NULL, as
    Spark's read of the base reads it; `cast`: every column as its declared type). A table the lake does not
    hold yet is an empty table of the declared columns.

    The view is plain SQL over the live files (DuckDB's own Parquet reader, projections pushed down) less
    the rows their deletion vectors delete, kept as a small table `__ns_deleted_<name>` (file, row number)
    in the same database: it holds in a DuckDB file that other connections open (validation's)."""
    columns = [(c.name, c.type) for c in table.columns]
    v = state.version(table.name)
    if v is None:
        con.execute(f"CREATE TABLE {ident(table.name)} ({', '.join(f'{ident(n)} {t}' for n, t in columns)})")
        return
    snap = snapshot(lake.table_path(table.name), v)
    select = base_select_list(columns, {n.lower() for n in snap.schema.names}, cast)
    if snap.mapped:  # physical column names differ from the declared ones: delta-rs's own scan, in memory
        _register(con, table.name, dataset_of(snap), select)
        return
    con.execute(f"CREATE OR REPLACE VIEW {ident(table.name)} AS SELECT {select} FROM ({live_rows_sql(con, snap, table.name)})")


def live_rows_sql(con, snap: DeltaSnapshot, name: str) -> str:
    """DuckDB SQL of the live rows of `snap` (every column, partition columns from the log), creating in `con`
    the tables it reads: `__ns_deleted_<name>` (the deletion vectors' rows) and, for a partitioned table,
    `__ns_files_<name>` (each file's partition values)."""
    cols = ", ".join(f"{ident(f.name)}" for f in snap.schema)
    if not snap.files:
        empty = ", ".join(f"CAST(NULL AS {_duckdb_type(f.type)}) AS {ident(f.name)}" for f in snap.schema)
        return f"SELECT {empty} WHERE FALSE"
    deleted = _table(con, f"__ns_deleted_{name}",
                     deleted_rows(snap, full_path=True).rename_columns(["filename", "file_row_number"]))
    files = ", ".join(literal(str(f), "duckdb") for f, _ in snap.files)
    data = [f.name for f in snap.schema if f.name not in snap.partition_columns]
    inner = (f"SELECT {', '.join(ident(n) for n in data)}, filename, file_row_number FROM read_parquet([{files}], "
             f"filename = true, file_row_number = true, union_by_name = true, hive_partitioning = false)")
    join = ""
    if snap.partition_columns:
        values = {p: [_typed(v.get(p), snap.schema.field(p).type) if v.get(p) is not None else None for _, v in snap.files]
                  for p in snap.partition_columns}
        parts = _table(con, f"__ns_files_{name}", pa.table(
            {"filename": [str(f) for f, _ in snap.files],
             **{p: pa.array(values[p], snap.schema.field(p).type) for p in snap.partition_columns}}))
        join = f" JOIN {ident(parts)} AS p USING (filename)"
    return (f"SELECT {cols} FROM ({inner}) AS f{join} "
            f"ANTI JOIN {ident(deleted)} AS d ON f.filename = d.filename AND f.file_row_number = d.file_row_number")


def _table(con, name: str, rows: pa.Table) -> str:
    """A table `name` of `con` holding `rows` (replaced if it exists)."""
    con.register("__ns_rows", rows)
    try:
        con.execute(f"CREATE OR REPLACE TABLE {ident(name)} AS SELECT * FROM __ns_rows")
    finally:
        con.unregister("__ns_rows")
    return name


def _duckdb_type(t: pa.DataType) -> str:
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision},{t.scale})"
    return {pa.string(): "VARCHAR", pa.int64(): "BIGINT", pa.int32(): "INTEGER", pa.int16(): "SMALLINT",
            pa.int8(): "TINYINT", pa.float32(): "FLOAT", pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN",
            pa.binary(): "BLOB", pa.date32(): "DATE", pa.timestamp("us"): "TIMESTAMP"}.get(t, "VARCHAR")


# ---------------------------------------------------------------- types
_PRIMITIVE = {
    "string": pa.string(), "long": pa.int64(), "integer": pa.int32(), "short": pa.int16(), "byte": pa.int8(),
    "float": pa.float32(), "double": pa.float64(), "boolean": pa.bool_(), "binary": pa.binary(),
    "date": pa.date32(), "timestamp": pa.timestamp("us"), "timestamp_ntz": pa.timestamp("us"),
}


def arrow_type(delta_type) -> pa.DataType:
    """A Delta schema type (its JSON form) as the lake's Arrow type."""
    if isinstance(delta_type, str):
        if delta_type.startswith("decimal("):
            p, s = delta_type[len("decimal("):-1].split(",")
            return pa.decimal128(int(p), int(s))
        if delta_type in _PRIMITIVE:
            return _PRIMITIVE[delta_type]
        raise SchemaError(f"Delta type {delta_type!r} has no column type in nightshift")
    kind = delta_type.get("type")
    if kind == "struct":
        return pa.struct([pa.field(f["name"], arrow_type(f["type"]), f.get("nullable", True)) for f in delta_type["fields"]])
    if kind == "array":
        return pa.list_(arrow_type(delta_type["elementType"]))
    if kind == "map":
        return pa.map_(arrow_type(delta_type["keyType"]), arrow_type(delta_type["valueType"]))
    raise SchemaError(f"Delta type {delta_type!r} has no column type in nightshift")


def arrow_schema(schema_json: str) -> pa.Schema:
    fields = json.loads(schema_json)["fields"]
    return pa.schema([pa.field(f["name"], arrow_type(f["type"]), f.get("nullable", True)) for f in fields])


def plain(table: pa.Table, schema: pa.Schema | None = None) -> pa.Table:
    """`table` in the lake's Arrow types: string views as strings, UTC timestamps as the UTC wall clock
    (Arrow's cast keeps the instant's UTC value), then cast to `schema` when given."""
    cols = []
    for col in table.columns:
        t = col.type
        if pa.types.is_string_view(t) or pa.types.is_large_string(t):
            col = col.cast(pa.string())
        elif pa.types.is_binary_view(t) or pa.types.is_large_binary(t):
            col = col.cast(pa.binary())
        elif pa.types.is_timestamp(t) and t.tz is not None:
            col = col.cast(pa.timestamp(t.unit)).cast(pa.timestamp("us"))
        cols.append(col)
    out = pa.table(cols, names=table.column_names)
    return out.cast(schema) if schema is not None else out


# ---------------------------------------------------------------- files
_FS = pafs.LocalFileSystem()  # one instance: a dataset's fragments and the dataset share it


def _local(root: Path, uri: str) -> Path:
    """A live file's path (as the log or delta-rs names it: relative and URL-encoded, or a file:// URI)."""
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path)).resolve()
    if parsed.scheme and len(parsed.scheme) > 1:
        raise SchemaError(f"{root}: data file {uri} is not on the local file system")
    p = Path(unquote(uri))
    return (p if p.is_absolute() else root / p).resolve()


def _partition_expr(snap: DeltaSnapshot, values: dict):
    expr = None
    for name, text in values.items():
        field = snap.schema.field(name)
        term = pc.field(name).is_null() if text is None else pc.field(name) == pa.scalar(_typed(text, field.type))
        expr = term if expr is None else expr & term
    return expr if expr is not None else pc.scalar(True)


def _typed(text: str, type_: pa.DataType):
    """A partition value (text in the log) as a value of its column's type."""
    return pa.array([text], pa.string()).cast(type_)[0].as_py()


def _kept_rows(snap: DeltaSnapshot, f: Path, values: dict, schema: pa.Schema) -> pa.Table:
    """The rows of data file `f` its deletion vector keeps, the columns of `schema` (the snapshot's, or a projection
    of it), its partition values as columns."""
    physical = [n for n in schema.names if n not in snap.partition_columns]
    data = pq.read_table(f, columns=[n for n in physical if n in set(pq.read_schema(f).names)])
    data = data.filter(_keep_slice(snap.keep[f], 0, data.num_rows))
    columns = {}
    for field in schema:
        if field.name in snap.partition_columns:
            text = values.get(field.name)
            columns[field.name] = pa.repeat(pa.scalar(None if text is None else _typed(text, field.type), field.type),
                                            data.num_rows)
        elif field.name in data.column_names:
            columns[field.name] = data.column(field.name)
        else:  # a column added after the file was written
            columns[field.name] = pa.nulls(data.num_rows, field.type)
    return plain(pa.table(columns), schema)


def _scan_all(snap: DeltaSnapshot) -> pa.Table:
    """Every live row through delta-rs's own engine (column mapping, deletion vectors): held in memory."""
    dt = open_table(snap.path, snap.version)
    return plain(pa.RecordBatchReader.from_stream(dt.scan()).read_all(), snap.schema)


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


