"""The lake's Delta tables as Spark writes them (runtime.lake lays them out): every commit of a night is
idempotent (its user metadata names the table and the batch, Lake.commit_mark; a rerun after a
crash finds the commits already made after the recorded version and commits only what is missing), and
the version each commit made is read back for the lake's state record.

Delta's own idempotent-write options (txnAppId, txnVersion) would do the same, but Delta 4.4 answers
them by rebuilding the table's whole snapshot state with three Spark jobs before every commit; the mark
is checked on the driver from the table's newest log files."""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from lattice.sql import ident
from runtime import delta
from runtime.lake import Lake
from spark_jobs.packages import TABLE_PROPERTIES

_MARK = "spark.databricks.delta.commitInfo.userMetadata"


def delta_path(path: Path) -> str:
    """A Delta table by path in Spark SQL: delta.`/lake/tables/pos`."""
    return "delta.`" + str(path).replace("`", "``") + "`"


# Rows this few are written from the driver (write's small): Spark's Delta writer costs about half a second
# a commit before it writes anything
DRIVER_ROWS = 200_000

# A row's place in its table (read's positions): its data file's name, its row number in that file
POSITION = ("__ns_file", "__ns_rowno")

# A table whose files with a deletion vector hold this many bytes is read by Delta's own reader (read)
DELTA_READS = 32 << 20

# Deletes this few are deletion vectors written from the driver at the rows' places (collected there: 8
# bytes a row); more, or a table the driver does not delete from, by the rows' identities through Spark
DRIVER_DELETES = 5_000_000


def latest_version(spark: SparkSession, path: Path) -> int:
    """The table's newest version: what this night's commit made (or, skipped as already done, made before).
    Read from the names of its log's commit files on the driver (the lake is a shared file system), no job."""
    versions = [int(p.stem) for p in (Path(path) / "_delta_log").glob("*.json") if p.stem.isdigit()]
    if not versions:
        return int(spark.sql(f"DESCRIBE HISTORY {delta_path(path)} LIMIT 1").collect()[0]["version"])
    return max(versions)


def read(spark: SparkSession, path: Path, version: int, positions: bool = False,
         by_delta: bool | None = None) -> DataFrame:
    """The Delta table at `path` at exactly `version`, every column, without the rows its deletion vectors delete.

    Its live files come from the table's log read on the driver (runtime.delta, no job) and are read as plain
    Parquet, partition values from their folders; the deleted rows (file, row number) of the files that have a
    deletion vector leave by a broadcast anti join on those files' own row numbers. Delta's own time-travel
    read rebuilds the version's snapshot with Spark jobs on every read (about 0.2 s on a warm server), but
    drops deleted rows as it decodes each file, where the anti join costs every row of a file with a deletion
    vector a lookup (about 0.1 s a million rows): a table delta_reads chooses is read by Delta (`by_delta` True
    or False: read that way, as bench/delete_floor.py compares them), and so is a table with column mapping on.
    `positions`: each row also says where it is (POSITION: its file's name, its row number in the file), for
    deletes by position; not for a table with column mapping on."""
    snap = delta.snapshot(path, version)
    where = [F.col("_metadata.file_name").alias(POSITION[0]), F.col("_metadata.row_index").alias(POSITION[1])]
    if by_delta is None:
        by_delta = delta_reads(snap)
    if snap.mapped or by_delta:
        df = spark.read.format("delta").option("versionAsOf", version).load(str(path))
        return df.select("*", *where) if positions and not snap.mapped else df
    schema = StructType.fromJson(json.loads(snap.schema_json))
    if not snap.files:
        return spark.createDataFrame([], schema)
    cols = [F.col(ident(n, "spark")) for n in schema.fieldNames()]
    out = cols + (where if positions else [])

    def files(paths: list[str]) -> DataFrame:
        return spark.read.schema(schema).option("basePath", str(path)).parquet(*paths)

    whole = [str(f) for f, _ in snap.files if f not in snap.keep]
    marked = [str(f) for f, _ in snap.files if f in snap.keep]
    if not marked:
        return files(whole).select(*out)
    # only the files with a deletion vector pay for the anti join
    dead = spark.createDataFrame(delta.deleted_rows(snap).to_pandas(), f"`{POSITION[0]}` string, `{POSITION[1]}` bigint")
    live = files(marked).select(*cols, *where)
    live = live.join(F.broadcast(dead), list(POSITION), "left_anti")
    live = live.select(*cols, *([F.col(c) for c in POSITION] if positions else []))
    return live if not whole else files(whole).select(*out).unionByName(live)


def table_schema(path: Path, version: int) -> StructType:
    """The columns of the Delta table at `path` at `version`, from its log (no job, no deletion vector read)."""
    return StructType.fromJson(json.loads(delta.open_table(path, version).schema().to_json()))


def live_bytes(snap: delta.DeltaSnapshot) -> int:
    """The bytes of a table's live data files at a version (its snapshot, read from its log: no job)."""
    return sum(f.stat().st_size for f, _ in snap.files)


def delta_reads(snap: delta.DeltaSnapshot) -> bool:
    """Whether read takes the table through Delta's own reader: its files with a deletion vector hold DELTA_READS
    bytes or more and, in a table laid out in partitions, at least half its live bytes. A night reads such a
    table a few partitions at a time, and the anti join costs only the rows of the marked files it reads, where
    Delta's reader costs every read its snapshot jobs (about 0.7 s in one process at pos 100M)."""
    marked = marked_bytes(snap)
    return marked >= DELTA_READS and (not snap.partition_columns or 2 * marked >= live_bytes(snap))


def marked_bytes(snap: delta.DeltaSnapshot) -> int:
    """The bytes of a table's live files with a deletion vector at a version (read weighs them against DELTA_READS)."""
    return sum(f.stat().st_size for f in snap.keep)


def written_whole(lake: Lake, name: str, version: int | None, rewrite_below: int) -> bool:
    """Whether apply-base writes table `name` anew, rather than deleting from it, on a night that deletes
    from it: its live data at `version` is less than `rewrite_below` bytes. The delete check then keeps no
    record of the rows it matched (apply-base chooses among the rows it reads whole anyway)."""
    return version is not None and live_bytes(delta.snapshot(lake.table_path(name), version)) < rewrite_below


def write(df: DataFrame, lake: Lake, name: str, mode: str, txn: int | None, partition_by: str | None = None,
          since: int | None = None, small: bool = False) -> None:
    """Append to or overwrite (with its schema and layout) a lake table; txn: the batch's sequence number
    (None: not a batch's commit, e.g. materialize's copies, which the state record switches to), committed
    once: skipped when a commit after version `since` (the recorded one) already carries its mark.
    small: the rows are few, and the table does not exist yet or exists with this layout and these columns:
    they are collected and committed from the driver (runtime.delta.write_arrow; a new table first made
    empty as Spark would make it, runtime.delta.create_table), not by Spark's Delta writer."""
    path = str(lake.table_path(name))
    mark = lake.commit_mark(name, txn) if txn is not None else None
    if small:
        new = not delta.is_delta_table(path)
        if new:
            delta.create_table(path, _nullable(df.schema), [partition_by] if partition_by else [], dict(TABLE_PROPERTIES))
        if mark is not None and delta.committed(path, mark, since):
            return
        if delta.is_delta_table(path) and delta.write_arrow(path, df.toArrow(), "append" if new else mode, mark):
            return
    w = df.write.format("delta").mode(mode)
    if mode == "overwrite":
        w = w.option("overwriteSchema", "true")
    if partition_by is not None:
        w = w.partitionBy(partition_by)
    if mark is not None:
        if delta.committed(path, mark, since):
            return
        w = w.option("userMetadata", mark)
    w.save(path)


def commit_rows(lake: Lake, name: str, rows, txn: int, since: int | None, mode: str = "overwrite") -> bool:
    """Overwrite (or with mode "append", append to) the existing lake table `name` with the Arrow table `rows` (its
    columns and types), committed from this process once (runtime.delta.write_arrow), as batch `txn`'s commit:
    skipped when a commit after version `since` already carries its mark. False, nothing committed: the columns
    are not the table's."""
    path = str(lake.table_path(name))
    mark = lake.commit_mark(name, txn)
    if delta.committed(path, mark, since):
        return True
    return delta.write_arrow(path, rows, mode, mark)


def _nullable(schema: StructType) -> str:
    """A DataFrame's schema as a new Delta table's (Spark's JSON form): every column nullable, as Spark's
    writer creates a table from a DataFrame."""
    def loose(t):
        if isinstance(t, dict):
            t = {k: loose(v) for k, v in t.items()}
            for flag in ("nullable", "containsNull", "valueContainsNull"):
                if flag in t:
                    t[flag] = True
        elif isinstance(t, list):
            t = [loose(v) for v in t]
        return t
    return json.dumps(loose(schema.jsonValue()), separators=(",", ":"))


def deletes_by_place(lake: Lake, name: str, deleted: int) -> bool:
    """Whether `deleted` rows of table `name` are deleted by their places (delete_positions) rather than by
    their row identities: the one decision the delete check (what it keeps of the rows it matches) and
    apply-base (how it deletes them) both follow."""
    return deleted <= DRIVER_DELETES and delta.deletes_by_position(lake.table_path(name))


def delete_positions(lake: Lake, name: str, txn: int, since: int | None, rows: dict[str, list[int]],
                     step: str = "") -> bool | None:
    """Delete rows of table `name` by position (data file name -> row numbers) as batch `txn`'s commit to it,
    once, from the driver (runtime.delta.delete_positions): False when a commit after version `since` already
    carries its mark; None when the table is not one the driver deletes from (the caller deletes through
    Spark)."""
    path = lake.table_path(name)
    mark = lake.commit_mark(name, txn, step)
    if delta.committed(path, mark, since):
        return False
    return True if delta.delete_positions(path, rows, mark) else None


def commit_sql(spark: SparkSession, lake: Lake, name: str, txn: int, since: int | None, sql: str,
               step: str = "") -> bool:
    """Run a SQL command (MERGE, DELETE) on table `name` as batch `txn`'s commit to it, once: skipped (False)
    when a commit after version `since` already carries its mark. `step` names a commit of the batch's
    that comes before its main one."""
    mark = lake.commit_mark(name, txn, step)
    if delta.committed(lake.table_path(name), mark, since):
        return False
    spark.conf.set(_MARK, mark)
    try:
        spark.sql(sql)  # a command runs when it is sent
    finally:
        spark.conf.unset(_MARK)
    return True
