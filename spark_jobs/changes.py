"""Read a change batch, check it against the schema and the base tables, and register the relations
that lattice/emit.py's SQL reads (__ns_ins_<t>, __ns_del_<t>, __ns_old_<t>, __ns_new_<dim>).

Every check runs before anything is written, so a bad batch changes nothing. Messages name the
batch, the table, the file or the row, and say what to do.
"""

from __future__ import annotations

import json
import shutil
import uuid
from dataclasses import dataclass
from typing import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lattice import types
from lattice.emit import rel
from lattice.ir import FunctionalDependency, Plan, Table
from lattice.sql import ident
from runtime import delta
from runtime.errors import BadChangeBatch
from runtime.lake import PART, ROW_BATCH, ROW_ID, Lake, LakeState, missing_columns
from runtime.night import BatchInfo
from runtime.options import DEFAULT_REWRITE_BELOW
from spark_jobs import driver_checks, lake_tables
from spark_jobs.metrics import count_local
from spark_jobs.session import query

OP = "_op"
_SAMPLE = 3
HASH = "__ns_hash"  # a row's hash in the delete check (row_hash)
# the delete check sends the deleted rows' hashes to every task when there are at most this many (8 bytes each)
BROADCAST_HASHES = 2_000_000
# a small table's rows known in this process go to Spark inside the query's plan up to this many (local_rows)
LOCAL_ROWS = 50_000


# ---------------------------------------------------------------- base tables


def empty_frame(spark: SparkSession, table: Table) -> DataFrame:
    """No rows, the table's columns and types. Built in the JVM (spark.range), unlike createDataFrame([]),
    which runs a Python worker on an executor: no nightshift step needs Python on a cluster's executors."""
    return spark.range(0).select(*[F.lit(None).cast(types.spark_type(c.type)).alias(c.name) for c in table.columns])


def column(name: str):
    """A DataFrame column by its exact name (any character, quoted by lattice.sql)."""
    return F.col(ident(name, "spark"))


def typed(df: DataFrame, table: Table, keep: tuple[str, ...] = ()) -> DataFrame:
    """The declared columns in their declared types (and the lake's own columns `keep` that `df` has, as they are)."""
    return df.select(*[column(c.name).cast(types.spark_type(c.type)).alias(c.name) for c in table.columns],
                     *[F.col(c) for c in keep if c in df.columns])


def read_table(spark: SparkSession, lake: Lake, name: str, state: LakeState, positions: bool = False) -> DataFrame | None:
    """A lake table (base table, auxiliary view, a view's copy) at exactly its version in `state` (Delta time
    travel), hidden columns included (`positions`: and each row's place, lake_tables.read); None when the
    state holds no version of it."""
    v = state.version(name)
    if v is None:
        return None
    return lake_tables.read(spark, lake.table_path(name), v, positions)


def read_base(spark: SparkSession, lake: Lake, table: Table, state: LakeState) -> DataFrame:
    """The table at the lake's state, with its declared columns and types. A column declared after the
    lake's version was written (sql/schema.sql evolves) reads as NULL in the rows already
    there; a NOT NULL one cannot, and is refused naming it."""
    df = read_table(spark, lake, table.name, state)
    if df is None:
        return empty_frame(spark, table)
    return _typed_base(df, table, lake.table_path(table.name))


def month_of(name: str):
    """A row's partition: the month of its partition column ('2024-01', NULL for NULL), as runtime.lake
    lays a partitioned base out."""
    return F.date_format(column(name), "yyyy-MM")


def months(df: DataFrame, name: str) -> list[str | None]:
    """The months of `name` among the rows of `df` (a batch's changes: small)."""
    return sorted((r[0] for r in df.select(month_of(name)).distinct().collect()), key=lambda m: m or "")


def in_months(wanted) -> "F.Column":
    """The rows of a month-partitioned table in these months (NULL: the rows whose column is NULL): a
    filter on the Delta table's partition column, so Delta reads only those months' files."""
    wanted = list(wanted)
    named = [m for m in wanted if m is not None]
    cond = F.col(PART).isin(named) if named else F.lit(False)
    return cond | F.col(PART).isNull() if None in wanted else cond


def _typed_base(df: DataFrame, table: Table, d, keep: tuple[str, ...] = ()) -> DataFrame:
    missing = missing_columns(table, {c.lower() for c in df.columns}, d)
    if missing:
        df = df.select("*", *[F.lit(None).alias(c.name) for c in missing])
    return typed(df, table, keep)


def register_base(spark: SparkSession, lake: Lake, plan: Plan, state: LakeState,
                  rows: driver_checks.BatchRows | None = None) -> None:
    """__ns_old_<t> for every table of the schema, at the lake's current state.

    Dimension tables (every table that is not a view's fact table) are small next to the fact
    table and are read by many queries of a night: a small one whose rows this process holds (`rows`) goes
    with the queries as a local relation (local_rows); any other is cached once, so joins broadcast them.
    """
    spark.catalog.clearCache()
    facts = set(plan.fact_tables)
    for t in plan.schema.base_tables:
        held = rows.base(t) if rows is not None and t.name not in facts else None
        df = local_rows(spark, t, held)
        if df is not None:
            v = state.version(t.name)  # its files, read whole (driver_checks.BatchRows.base)
            files = () if v is None else (f for f, _ in delta.snapshot(lake.table_path(t.name), v).files)
            count_local("base", t.name, held.num_rows, delta.file_bytes(files))
        else:
            df = read_base(spark, lake, t, state)
            if t.name not in facts:
                df = df.cache()
        df.createOrReplaceTempView(rel('old', t.name))


def local_rows(spark: SparkSession, table: Table, rows: pa.Table | None) -> DataFrame | None:
    """`rows` (the table's declared columns in their declared types, as driver_checks.BatchRows holds them) as a
    DataFrame that carries them in its plan: Spark lists, scans and caches no file for them, and a query
    broadcasting them starts no job to do so (a small night's queries are mostly such waits); more than 256 KB of
    them are an RDD of Arrow batches instead (session._DEFAULTS: no rows in the plan for its rules to walk, and one
    job to broadcast them). None when they are unknown here, more than LOCAL_ROWS, or hold a timestamp (whose wall
    clock a local relation would take from this process's time zone): then Spark reads the table's files. The caller counts rows it read as a read of
    their source (metrics.count_local); rows derived from rows read are not counted again."""
    if rows is None or rows.num_rows > LOCAL_ROWS or any(types.family(c.type) == "timestamp" for c in table.columns):
        return None
    if rows.num_rows == 0:
        return empty_frame(spark, table)
    return typed(spark.createDataFrame(rows), table)


# ---------------------------------------------------------------- the change batch


def load_batch(spark: SparkSession, lake: Lake, plan: Plan, batch: str, state: LakeState,
               checked: bool = False, rewrite_below: int = DEFAULT_REWRITE_BELOW,
               rows: driver_checks.BatchRows | None = None) -> BatchInfo:
    """Validate batch `batch` and register its relations; raises BadChangeBatch on any problem.

    File-level checks (columns, types, _op values, NOT NULL) run on the driver with pyarrow over
    the change files only; checks against the base (deletes exist, keys, foreign keys) run in Spark.
    checked: the night's first propagate step already ran the checks against the base for this base
    state (a later level of the same night): only the relations are registered. rewrite_below: as
    apply-base's (lake_tables.written_whole: no record of the matched rows for a table written anew). rows: the
    batch's rows (driver_checks.BatchRows of this batch and state) when the caller reads them too, each read once.
    """
    rows = rows or driver_checks.BatchRows(lake, state, lake.batch_files(batch, [t.name for t in plan.schema.base_tables]),
                                           plan.fact_tables)
    files = rows.files
    inserted, deleted = {}, {}
    for t in plan.schema.base_tables:  # every file checked before any is read whole
        inserted[t.name], deleted[t.name] = _check_files(t, batch, files.get(t.name, []))
    register_base(spark, lake, plan, state, rows)
    for t in plan.schema.base_tables:
        ins, dels = _read_changes(spark, t, files.get(t.name, []), inserted[t.name], deleted[t.name], rows)
        ins.createOrReplaceTempView(rel('ins', t.name))
        dels.createOrReplaceTempView(rel('del', t.name))
    info = BatchInfo(batch, inserted, deleted)
    if checked:
        _register_all_new(spark, lake, plan, info, state, rows)
        return info
    checks: list[Check] = []
    for t in plan.schema.base_tables:
        if info.deleted[t.name]:
            record = not lake_tables.written_whole(lake, t.name, state.version(t.name), rewrite_below)
            checks.append(_deletes_check(spark, lake, t, state, batch, info.deleted[t.name], record, rows))
        if t.primary_key and t.name in info.changed:
            checks.append(_primary_key(t, batch, rows))
        checks.extend(_foreign_keys(t, info, files, rows, plan))
    changed = {t.lower() for t in info.changed}
    checks.extend(_dependency_holds(fd, batch, plan.schema.table(fd.table), rows) for fd in plan.dependencies
                  if fd.table.lower() in changed)
    _register_all_new(spark, lake, plan, info, state, rows)  # after the delete checks' passes, whose records it reads
    _run_checks(spark, checks)
    return info


def _register_all_new(spark: SparkSession, lake: Lake, plan: Plan, info: BatchInfo, state: LakeState,
                      rows: driver_checks.BatchRows) -> None:
    """__ns_new_<t> of every table: a small dimension table's computed here and sent as a local relation, another
    dimension table's cached, the fact table's lazy. The rows a table's delete check recorded (read_matched) are
    its rows a deleted row may take away: reused, not found by a scan again."""
    facts = set(plan.fact_tables)
    for t in plan.schema.base_tables:
        if t.name not in facts and t.name in info.changed and _register_new_here(spark, t, rows):
            continue
        recorded = None
        if info.deleted[t.name] and t.name not in state.partitions:  # by month the record holds the deleted months only
            recorded = read_matched(spark, lake, t, state, info.batch)
        _register_new(spark, t, info, cache=t.name not in facts, recorded=recorded)


@dataclass(frozen=True)
class Check:
    """A query returning offending rows (none when the batch is fine) and the error for the first one; or, where
    the rows it reads are small and known in this process exactly (spark_jobs.driver_checks), the same check
    run here (on_driver: the first offending row, None when the batch is fine), and then sql is not run."""

    sql: str
    error: Callable[[dict], BadChangeBatch]
    on_driver: Callable[[], dict | None] | None = None


def _run_checks(spark: SparkSession, checks: list[Check]) -> None:
    """The checks of a batch: those the driver can run first, here; then the rest in one Spark job, but only those
    before the first violation found here. The first violated check (in order) is reported."""
    first: tuple[int, dict] | None = None
    for i, c in enumerate(checks):
        if c.on_driver is not None and (row := c.on_driver()) is not None:
            first = (i, row)
            break
    in_spark = [(i, c) for i, c in enumerate(checks) if c.on_driver is None and (first is None or i < first[0])]
    if in_spark:
        parts = [f"SELECT {i} AS check, to_json(struct(*)) AS row FROM (SELECT * FROM ({c.sql}) LIMIT 1)" for i, c in in_spark]
        # every check is Spark SQL written with lattice.sql.ident(..., "spark") for names
        found = query(spark, " UNION ALL ".join(parts)).collect()
        if found:
            r = min(found, key=lambda r: r["check"])
            first = (r["check"], json.loads(r["row"]))
    if first is not None:
        raise checks[first[0]].error(first[1])


def _read_changes(spark: SparkSession, table: Table, files: list[Path], n_ins: int, n_del: int,
                  rows: driver_checks.BatchRows):
    """The batch's inserted and deleted rows of `table`: local relations when this process holds them (local_rows),
    else Spark reads the change files."""
    if not files or not (n_ins or n_del):
        empty = empty_frame(spark, table)
        return empty, empty
    known = rows.changes(table)
    if known is not None:
        ins, dels = (local_rows(spark, table, part) for part in known)
        if ins is not None and dels is not None:
            # the batch's files of the table, read once
            count_local("changes", table.name, n_ins + n_del, delta.file_bytes(files))
            return ins, dels
    raw = spark.read.parquet(*[str(f) for f in files])
    ins = typed(raw.where(column(OP) == "insert"), table) if n_ins else empty_frame(spark, table)
    dels = typed(raw.where(column(OP) == "delete"), table) if n_del else empty_frame(spark, table)
    return ins, dels


def _check_files(table: Table, batch: str, files: list[Path]) -> tuple[int, int]:
    """Columns, types, _op values and NOT NULL columns of one table's change files; returns (#ins, #del)."""
    if not files:
        return 0, 0
    _check_file_schemas(table, batch, files)
    required = [c.name for c in table.columns if not c.nullable]
    n_ins = n_del = 0
    for f in files:
        data = _file_columns(f, required)
        op = data.column(OP)
        is_ins = pc.equal(op, "insert")
        is_del = pc.equal(op, "delete")
        bad = pc.invert(pc.or_(pc.fill_null(is_ins, False), pc.fill_null(is_del, False)))
        if pc.any(bad).as_py():
            values = sorted({repr(v) for v in pc.filter(op, bad).to_pylist()})[:_SAMPLE]
            raise BadChangeBatch(
                f"batch {batch}: {f}: column _op must be 'insert' or 'delete', found {', '.join(values)} "
                f"(table {table.name})"
            )
        n_ins += pc.sum(pc.cast(is_ins, "int64")).as_py() or 0
        n_del += pc.sum(pc.cast(is_del, "int64")).as_py() or 0
        for c in required:
            nulls = pc.and_(is_ins, pc.is_null(data.column(c)))
            if pc.any(nulls).as_py():
                row = pc.index(nulls, True).as_py()
                raise BadChangeBatch(
                    f"batch {batch}: {f}: row {row} inserts NULL into NOT NULL column {table.name}.{c}"
                )
    return n_ins, n_del


def _file_columns(f: Path, cols) -> pa.Table:
    """Column _op and the declared columns `cols` of a change file (its names matched to theirs whatever
    their case), named _op and as declared."""
    pf = pq.ParquetFile(f)
    names = {n.lower(): n for n in pf.schema_arrow.names}
    return pf.read(columns=[names[OP]] + [names[c.lower()] for c in cols]).rename_columns([OP, *cols])


_COMPATIBLE = {
    "integer": ("int", "uint"),
    "float": ("int", "uint", "float", "double", "halffloat", "decimal"),
    "decimal": ("int", "uint", "decimal"),
    "varchar": ("string", "large_string", "string_view"),
    "date": ("date32", "date64"),
    "timestamp": ("timestamp",),
    "boolean": ("bool",),
}


def arrow_fits(arrow_type: str, declared: str) -> bool:
    """Whether a Parquet column of Arrow type `arrow_type` may hold values of a column declared `declared`
    (a normalized type): the rule change files are checked by, and captured snapshots too."""
    return arrow_type == "null" or arrow_type.startswith(_COMPATIBLE[types.family(declared)])


def _check_file_schemas(table: Table, batch: str, files: list[Path]) -> None:
    expected = {c.name.lower(): c for c in table.columns}
    first = None
    for f in files:
        try:
            schema = pq.read_schema(f)
        except Exception as e:  # pyarrow raises several types for a broken file
            raise BadChangeBatch(f"batch {batch}: {f}: not a readable Parquet file ({e})") from None
        names = {n.lower(): n for n in schema.names}
        missing = [c.name for k, c in expected.items() if k not in names]
        extra = [n for k, n in names.items() if k not in expected and k != OP]
        if OP not in names:
            missing.append(OP)
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing column(s) {', '.join(missing)}")
            if extra:
                parts.append(f"unexpected column(s) {', '.join(extra)}")
            raise BadChangeBatch(
                f"batch {batch}: {f}: {'; '.join(parts)} (table {table.name} has {', '.join(table.column_names)} plus _op)"
            )
        for field in schema:
            key = field.name.lower()
            arrow = str(field.type)
            if arrow == "null":
                continue
            want = types.family(expected[key].type) if key in expected else "varchar"
            if not arrow.startswith(_COMPATIBLE[want]):
                declared = expected[key].type if key in expected else "VARCHAR"
                raise BadChangeBatch(
                    f"batch {batch}: {f}: column {field.name} has type {arrow}, but {table.name}.{field.name} is {declared}"
                )
        if first is None:
            first = (f, schema)
        elif not schema.equals(first[1]):
            raise BadChangeBatch(
                f"batch {batch}: {f} and {first[0]} have different column types; write every file of a table alike"
            )


def _q(name: str) -> str:
    return ident(name, "spark")


def _nullsafe_on(cols: list[str], a: str, b: str) -> str:
    return " AND ".join(f"{a}.{_q(c)} <=> {b}.{_q(c)}" for c in cols)


def _matched(spark: SparkSession, lake: Lake, table: Table, state: LakeState, batch: str, deleted: int,
             record: bool = True, on_driver: bool = False) -> str:
    """The relation the delete check matches the batch's deleted rows against: every base row equal to a
    deleted row, read in one pass over the base (in a table laid out by month, only
    the months of the deleted rows: a deleted row can only match a row of its own month) and written under
    the batch (Lake.matched_dir) with their places in the table's files, where apply-base picks the rows it
    deletes from them. The pass keeps each base row whose hash of its values (row_hash) is a deleted row's:
    one 64-bit key against the `deleted` rows' hashes, where a join on every column, NULL-safe, costs the whole
    base that comparison. A rare unequal row with an equal hash may be kept too: the check and apply-base
    match these rows to the deleted ones column by column. The rows keep their places when apply-base will
    delete by place (lake_tables.deletes_by_place), else their row identity (most of a base table's bytes:
    read only then). record=False (a table apply-base writes anew, lake_tables.written_whole): nothing is
    written, and the check's own job makes the pass. on_driver: the record's folder is returned, for the driver's
    check to read (no relation registered)."""
    raw = read_table(spark, lake, table.name, state, positions=record)
    if raw is None:
        return rel('old', table.name)
    if table.name in state.partitions:
        raw = raw.where(in_months(months(spark.table(rel('del', table.name)), state.partitions[table.name])))
    cols = list(table.column_names)
    placed = record and all(c in raw.columns for c in lake_tables.POSITION) \
        and lake_tables.deletes_by_place(lake, table.name, deleted)
    keep = () if not record else (PART,) + lake_tables.POSITION if placed else (ROW_BATCH, ROW_ID, PART)
    base = _typed_base(raw, table, lake.table_path(table.name), keep)
    hashes = _deleted_hashes(spark.table(rel('del', table.name)), cols, deleted)
    hit = base.withColumn(HASH, row_hash(base, cols)).join(hashes, HASH, "left_semi").drop(HASH)
    if not record:
        hit.createOrReplaceTempView(rel('matched', table.name))
        return rel('matched', table.name)
    folder = lake.matched_dir(batch, table.name, state.version(table.name))
    hit.write.mode("overwrite").parquet(str(folder))
    return str(folder) if on_driver else _recorded_relation(spark, table, folder)


def _matched_here(lake: Lake, table: Table, state: LakeState, batch: str, deleted: int, dels: pa.Table,
                  rows: driver_checks.BatchRows) -> pa.Table | None:
    """_matched's pass and record made in this process, without Spark (driver_checks.matched: every base row
    equal to a deleted row on the columns that compare alike here and in Spark, each with its place), when apply-base
    deletes by place and the rows compare here exactly; returns the record's declared columns (None: not made
    here, nothing written). The rows the pass read count as one read of the base (count_local). The counts
    `rows.tallies_for` asks of the table are made in the same pass (kept in `rows.tallied`)."""
    if not lake_tables.deletes_by_place(lake, table.name, deleted):
        return None
    by = state.partitions.get(table.name)
    wanted = None if by is None else driver_checks.months_of(dels, table.column(by).name)
    tallies = rows.tallies_for(table, dels) if rows.tallies_for is not None else []
    found = driver_checks.matched(lake, state, table, dels, lake_tables.POSITION, wanted, tallies)
    if found is None:
        return None
    record, read, rows.tallied[table.name] = found
    count_local("base", table.name, read.rows, read.bytes)
    write_folder(lake.matched_dir(batch, table.name, state.version(table.name)), record)
    return record.select(list(table.column_names))


def write_folder(folder: Path, record: pa.Table) -> None:
    """Rows written from this process as Spark's writer leaves a folder (Parquet files, then _SUCCESS), into a
    folder of its own first and moved into place: a crash leaves the whole folder or none (the delete check's
    record, read_matched; a small lake copy's updates, nested.view_changes)."""
    part = folder.with_name(f".{folder.name}.{uuid.uuid4().hex}")
    part.mkdir(parents=True)
    pq.write_table(record, part / "part-00000.parquet")
    (part / "_SUCCESS").touch()
    shutil.rmtree(folder, ignore_errors=True)
    part.rename(folder)


def _recorded_relation(spark: SparkSession, table: Table, folder) -> str:
    """The delete check's record at `folder` as the relation its Spark check reads."""
    record = spark.read.schema(_record_schema(table, Path(folder))).parquet(str(folder))
    record.createOrReplaceTempView(rel('matched', table.name))
    return rel('matched', table.name)


def row_hash(df: DataFrame, cols: list[str]):
    """A 64-bit hash of a row's values in `cols`: rows equal column by column under <=> hash alike (Spark's
    xxhash64 skips a NULL, and hashes -0.0 as 0.0 and every NaN as one); unequal rows may too, so a match by
    hash is only a candidate."""
    return F.xxhash64(*[df[_q(c)] for c in cols])


def _deleted_hashes(dels: DataFrame, cols: list[str], deleted: int) -> DataFrame:
    """The distinct row_hash values (column HASH) of the `deleted` rows `dels`, sent to every task when they
    are at most BROADCAST_HASHES."""
    hashes = dels.select(row_hash(dels, cols).alias(HASH)).distinct()
    return F.broadcast(hashes) if deleted <= BROADCAST_HASHES else hashes


def read_matched(spark: SparkSession, lake: Lake, table: Table, state: LakeState, batch: str) -> DataFrame | None:
    """The base rows the delete check of batch `batch` kept for its deleted rows (see _matched: every row equal
    to one, and maybe a few others, so a reader matches them column by column), None when
    that check did not run over this state of the table (apply-base then matches the base itself)."""
    folder = lake.matched_dir(batch, table.name, state.version(table.name))
    if not (folder / "_SUCCESS").exists():
        return None
    return spark.read.schema(_record_schema(table, folder)).parquet(str(folder))


# the lake's own columns a delete check's record may keep beside the declared ones (_matched), with their types
_RECORD_COLUMNS = {PART: "string", ROW_BATCH: "bigint", ROW_ID: "bigint", lake_tables.POSITION[0]: "string",
                   lake_tables.POSITION[1]: "bigint"}


def _record_schema(table: Table, folder: Path) -> str:
    """The columns of the delete check's record at `folder` as _matched wrote them: the declared ones in their
    types, then the lake's own ones its files hold (their names from one file's footer). Given to Spark's reader,
    it infers nothing: no job to read the files' footers."""
    files = sorted(folder.glob("*.parquet"))
    names = pq.read_schema(files[0]).names if files else []
    return ", ".join([f"{_q(c.name)} {types.spark_type(c.type)}" for c in table.columns]
                     + [f"{_q(n)} {_RECORD_COLUMNS[n]}" for n in names if n in _RECORD_COLUMNS])


def _deletes_check(spark: SparkSession, lake: Lake, table: Table, state: LakeState, batch: str, deleted: int,
                   record: bool, rows: driver_checks.BatchRows) -> Check:
    """Each deleted row exists: on the driver over the table's own rows when it is small and written whole by
    apply-base (record False) or absent, or over the rows the Spark pass recorded (record True); else in Spark."""
    changes = rows.changes(table)
    if record and state.version(table.name) is not None and changes is not None:
        here = _matched_here(lake, table, state, batch, deleted, changes[1], rows)
        if here is not None:
            return _deletes_exist(table, batch, "", lambda: driver_checks.deletes_exist(table, changes[1], here))
        folder = _matched(spark, lake, table, state, batch, deleted, record, on_driver=True)
        seen = rows.record(table, Path(folder))
        if seen is None:  # a value the driver does not hold as Spark does: Spark's check reads the record
            return _deletes_exist(table, batch, _recorded_relation(spark, table, folder))
        return _deletes_exist(table, batch, "", lambda: driver_checks.deletes_exist(table, changes[1], seen))
    base = rows.base(table) if not record or state.version(table.name) is None else None
    if changes is None or base is None:
        return _deletes_exist(table, batch, _matched(spark, lake, table, state, batch, deleted, record))
    return _deletes_exist(table, batch, "", lambda: driver_checks.deletes_exist(table, changes[1], base))


def _deletes_exist(table: Table, batch: str, base: str, on_driver: Callable[[], dict | None] | None = None) -> Check:
    """Bag semantics: each deleted row image must match a distinct existing row of the base (`base`: the
    relation holding every row a deleted row may match; on_driver: the same check in this process)."""
    cols = list(table.column_names)
    col_list = ", ".join(_q(c) for c in cols)
    sql = f"""
        WITH d AS (SELECT {col_list}, COUNT(*) AS n FROM {rel('del', table.name)} GROUP BY {col_list}),
             o AS (SELECT {', '.join(f'b.{_q(c)}' for c in cols)}, COUNT(*) AS m
                   FROM {base} b LEFT SEMI JOIN d ON {_nullsafe_on(cols, 'b', 'd')}
                   GROUP BY {', '.join(f'b.{_q(c)}' for c in cols)})
        SELECT d.*, COALESCE(o.m, 0) AS m FROM d LEFT JOIN o ON {_nullsafe_on(cols, 'd', 'o')}
        WHERE COALESCE(o.m, 0) < d.n"""

    def error(r: dict) -> BadChangeBatch:
        row = ", ".join(f"{c}={r.get(c)!r}" for c in cols)
        return BadChangeBatch(
            f"batch {batch}, table {table.name}: delete of a row that does not exist: ({row}) is deleted "
            f"{r['n']} time(s) but the base holds {r['m']}; the batch was refused and nothing was applied"
        )

    return Check(sql, error, on_driver)


def _register_new_here(spark: SparkSession, table: Table, rows: driver_checks.BatchRows) -> bool:
    """__ns_new_<t> computed in this process (driver_checks.after) and registered as a local relation, when the
    table's rows and changes are known here; False when not (nothing registered)."""
    old, changes = rows.base(table), rows.changes(table)
    if old is None or changes is None:
        return False
    new = local_rows(spark, table, driver_checks.after(table, old, *changes))
    if new is None:
        return False
    new.createOrReplaceTempView(rel('new', table.name))
    return True


def _register_new(spark: SparkSession, table: Table, info: BatchInfo, cache: bool, recorded: DataFrame | None = None) -> None:
    """__ns_new_<t>: the table after the batch (old minus deleted rows plus inserted rows). recorded: every row of
    the table whose hash is a deleted row's (the delete check's record), when there is one."""
    name = table.name
    if name not in info.changed:
        spark.table(rel('old', name)).createOrReplaceTempView(rel('new', name))
        return
    old, ins, dels = spark.table(rel('old', name)), spark.table(rel('ins', name)), spark.table(rel('del', name))
    kept = _without(old, dels, list(table.column_names), info.deleted[name], recorded) if info.deleted[name] else old
    new = kept.unionByName(ins)
    if cache:
        new = new.cache()
    new.createOrReplaceTempView(rel('new', name))


def _without(old: DataFrame, dels: DataFrame, cols: list[str], deleted: int, recorded: DataFrame | None = None) -> DataFrame:
    """old EXCEPT ALL dels (each deleted row takes one equal row of old away), without grouping old by every
    column: a row whose hash (row_hash) is no deleted row's is equal to none and stays as it is; only the few
    rows whose hash is a deleted row's go through EXCEPT ALL. Rows equal under EXCEPT ALL (NULLs alike, -0.0
    as 0.0, every NaN as one) hash alike, so the result is EXCEPT ALL's, row for row. recorded: old's rows whose
    hash is a deleted row's, as the delete check wrote them (then old is scanned once, not twice)."""
    hashes = _deleted_hashes(dels, cols, deleted)
    hashed = old.withColumn(HASH, row_hash(old, cols))
    kept = hashed.join(hashes, HASH, "left_anti").drop(HASH)
    hit = hashed.join(hashes, HASH, "left_semi").drop(HASH) if recorded is None else recorded.select(*[column(c) for c in cols])
    return kept.unionByName(hit.exceptAll(dels))


def _primary_key(table: Table, batch: str, rows: driver_checks.BatchRows) -> Check:
    keys = ", ".join(_q(c) for c in table.primary_key)
    changes, old = rows.changes(table), rows.base(table)
    on_driver = None if changes is None or old is None else lambda: driver_checks.primary_key(table, old, *changes)

    def error(r: dict) -> BadChangeBatch:
        key = ", ".join(f"{c}={r.get(c)!r}" for c in table.primary_key)
        return BadChangeBatch(
            f"batch {batch}, table {table.name}: primary key ({key}) would appear {r['n']} times; "
            f"an update of a {table.name} row is a delete of the old row image plus an insert of the new one"
        )

    return Check(f"SELECT {keys}, COUNT(*) AS n FROM {rel('new', table.name)} GROUP BY {keys} HAVING COUNT(*) > 1", error,
                 on_driver)


def _dependency_holds(fd: FunctionalDependency, batch: str, table: Table, rows: driver_checks.BatchRows) -> Check:
    """A declared dependency (nightshift.toml [dependencies], e.g. city -> region) lets the D-lattice
    derive one summary-delta from another through it (5.1): it must hold after the batch, NULLs too."""
    changes, old = rows.changes(table), rows.base(table)
    on_driver = None if changes is None or old is None else \
        lambda: driver_checks.dependency_holds(fd, table, old, *changes)
    lhs = ", ".join(_q(c) for c in fd.lhs)
    both = ", ".join(_q(c) for c in (*fd.lhs, *fd.rhs))
    rule = f"{', '.join(fd.lhs)} -> {', '.join(fd.rhs)}"

    def error(r: dict) -> BadChangeBatch:
        key = ", ".join(f"{c}={r.get(c)!r}" for c in fd.lhs)
        return BadChangeBatch(
            f"batch {batch}, table {fd.table}: the declared dependency {rule} ([dependencies] in nightshift.toml) "
            f"would not hold: {key} has {r['n']} different ({', '.join(fd.rhs)}) values; fix the batch or the declaration"
        )

    return Check(f"SELECT {lhs}, COUNT(*) AS n FROM (SELECT DISTINCT {both} FROM {rel('new', fd.table)}) "
                 f"GROUP BY {lhs} HAVING COUNT(*) > 1", error, on_driver)


def _foreign_keys(table: Table, info: BatchInfo, files: dict[str, list[Path]], rows: driver_checks.BatchRows,
                  plan: Plan) -> list[Check]:
    """Rows inserted into `table` must find their parent after the batch; parent rows deleted for good
    must not be referenced by what remains. A parent deleted and inserted again with its key (a store
    moving city) is not gone: only when the batch's own files delete some key they do not insert again
    (_keys_dropped, on the driver) are the referencing rows read, and then only those with a key gone
    from the parent after the batch are reported."""
    checks = []
    for fk in table.foreign_keys:
        parent = fk.ref_table
        on = " AND ".join(f"c.{_q(a)} = p.{_q(b)}" for a, b in zip(fk.columns, fk.ref_columns))
        notnull = " AND ".join(f"c.{_q(a)} IS NOT NULL" for a in fk.columns)

        def orphan(r: dict, fk=fk, parent=parent) -> BadChangeBatch:
            vals = ", ".join(f"{a}={r.get(a)!r}" for a in fk.columns)
            return BadChangeBatch(
                f"batch {info.batch}, table {table.name}: foreign key ({vals}) has no row in {parent} "
                f"(row {_row(r)}); add the {parent} row to the batch or fix the {table.name} row"
            )

        def gone(r: dict, fk=fk, parent=parent) -> BadChangeBatch:
            vals = ", ".join(f"{a}={r.get(a)!r}" for a in fk.columns)
            return BadChangeBatch(
                f"batch {info.batch}, table {parent}: a deleted {parent} row is still referenced by "
                f"{table.name} ({vals}); delete or move those {table.name} rows in the same batch"
            )

        if info.inserted[table.name]:
            sql = f"SELECT c.* FROM {rel('ins', table.name)} c LEFT ANTI JOIN {rel('new', parent)} p ON {on} WHERE {notnull}"
            checks.append(Check(sql, orphan, _orphan_on_driver(table, fk, plan.schema.table(parent), rows)))
        if info.deleted[parent] and _keys_dropped(files.get(parent, []), fk.ref_columns):
            keys = ", ".join(f"d.{_q(b)}" for b in fk.ref_columns)
            same = " AND ".join(f"d.{_q(b)} <=> p.{_q(b)}" for b in fk.ref_columns)
            lost = f"SELECT DISTINCT {keys} FROM {rel('del', parent)} d LEFT ANTI JOIN {rel('new', parent)} p ON {same}"
            sql = f"SELECT c.* FROM {rel('new', table.name)} c LEFT SEMI JOIN ({lost}) p ON {on}"
            checks.append(Check(sql, gone))
    return checks


def _orphan_on_driver(table: Table, fk, parent: Table, rows: driver_checks.BatchRows) -> Callable[[], dict | None] | None:
    """The inserted rows' foreign key `fk` checked against the parent's keys after the batch, in this process, when
    the parent is small and both tables' changes are known here (else None: the check is Spark's)."""
    child, changes, old = rows.changes(table), rows.changes(parent), rows.base(parent)
    if child is None or changes is None or old is None:
        return None
    return lambda: driver_checks.orphan(table, fk.columns, child[0],
                                        driver_checks.parent_keys(parent, old, *changes, fk.ref_columns))


def _keys_dropped(files: list[Path], cols: tuple[str, ...]) -> bool:
    """Whether a table's change files delete some value of `cols` that they do not insert again (read on the
    driver: a night's changes of a table others reference, a dimension's, are few). Every key gone from the
    table after the batch is one of these (a key inserted again is not gone), so no means none is gone; yes
    may still find the key in a row the batch keeps, which the check's query sees."""
    deleted, inserted = set(), set()
    for f in files:
        data = _file_columns(f, cols)
        keys = zip(*[data.column(c).to_pylist() for c in cols])
        for op, key in zip(data.column(OP).to_pylist(), keys):
            (deleted if op == "delete" else inserted).add(key)
    return bool(deleted - inserted)


def _row(r: dict) -> str:
    return "(" + ", ".join(f"{k}={v!r}" for k, v in r.items()) + ")"
