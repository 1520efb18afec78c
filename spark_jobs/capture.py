"""capture: a source that is not a change batch becomes one, compared with the lake's base as
of the last applied batch.

    snapshot   a full extract of the table (Parquet or CSV files): its bag difference with the base. With a
               primary key this is the by-key difference too (a changed row: a delete of the old image and an
               insert of the new one; a vanished key: a delete; a new key: an insert), since both sides hold
               each key once; unchanged rows give nothing. One shuffle of snapshot and base together.
    cdc        Debezium change events, one JSON object a line, with or without the schema/payload envelope:
               the events of one key collapse, in order, into one delete/insert pair (an update or delete
               without a full `before` image takes the old row from the base); a table without a primary key
               takes the net count of each row image (its updates and deletes need full `before` images).
    append     an append-only log (Parquet or CSV): rows whose since-column is beyond the last captured
               watermark become inserts; the new watermark is recorded with the batch.

Every check runs before anything is written and raises BadChangeBatch naming the file, line or key.
Output: one Parquet file per table and batch, rows sorted, so a rerun writes the same file. Like every
step, no Python runs on the executors: Spark SQL and DataFrame functions only (no UDFs); a CDC file is read
whole by one task (posexplode gives each line its number), so keep each under about 1 GB.
"""

from __future__ import annotations

import csv
import glob
import gzip
import json
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import Callable
from urllib.parse import unquote, urlparse

import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from lattice import types
from lattice.ir import Table
from lattice.sql import ident
from runtime.capture import KINDS, CaptureRecord, Watermark
from runtime.errors import BadChangeBatch, ConfigError
from runtime.lake import Lake, LakeState
from spark_jobs.changes import OP, arrow_fits, column, read_base

SIGN, FILE, INDEX, LINE, TEXT, PROBLEM = "_ns_sign", "_ns_file", "_ns_index", "_ns_line", "_ns_text", "_ns_problem"
CORRUPT = "_ns_corrupt"
_SUFFIXES = {"parquet": (".parquet",), "csv": (".csv", ".csv.gz"), "json": (".json", ".jsonl", ".ndjson", ".json.gz")}


@dataclass(frozen=True)
class SourceFiles:
    path: str  # as configured, after {batch_id}/{ds} were filled in
    files: tuple[Path, ...]
    format: str  # parquet | csv | json


def source_files(path: str, kind: str, where: str) -> SourceFiles:
    """The files a source path names: a file, a folder (its files of the kind's formats, hidden and _-prefixed
    ones skipped, as Spark does) or a glob. A snapshot or log is Parquet or CSV; a CDC feed JSON lines."""
    if kind not in KINDS:
        raise ConfigError(f"{where}: unknown capture kind {kind!r} (one of {', '.join(KINDS)})")
    p = Path(path)
    wanted = _SUFFIXES["json"] if kind == "cdc" else _SUFFIXES["parquet"] + _SUFFIXES["csv"]
    if any(ch in path for ch in "*?["):
        files = [Path(f) for f in glob.glob(path, recursive=True) if Path(f).is_file() and not _hidden(Path(f).name)]
    elif p.is_dir():
        files = [f for f in p.rglob("*") if f.is_file() and f.name.lower().endswith(wanted)
                 and not any(_hidden(part) for part in f.relative_to(p).parts)]
    else:
        files = [p] if p.is_file() else []
    if not files:
        raise BadChangeBatch(f"{where}: no {kind} files at {path} (a file, a folder or a glob of "
                             f"{' or '.join(wanted)} files); nothing was written")
    files = sorted(files)
    if kind == "cdc":
        return SourceFiles(path, tuple(files), "json")
    formats = {f: next((fmt for fmt in ("parquet", "csv") if f.name.lower().endswith(_SUFFIXES[fmt])), None) for f in files}
    unknown = [f for f, fmt in formats.items() if fmt is None]
    if unknown:
        raise BadChangeBatch(f"{where}: {unknown[0]} is neither Parquet (.parquet) nor CSV (.csv, .csv.gz); nothing was written")
    if len(set(formats.values())) > 1:
        raise BadChangeBatch(f"{where}: {path} mixes Parquet and CSV files; give each source one format; nothing was written")
    return SourceFiles(path, tuple(files), formats[files[0]])


def _hidden(name: str) -> bool:
    return name.startswith((".", "_"))


# ---------------------------------------------------------------- the step


def capture_table(spark: SparkSession, lake: Lake, state: LakeState, table: Table, kind: str, src: SourceFiles,
                  batch: str, folder: Path, since_column: str | None = None) -> CaptureRecord:
    """Check the source, compute table's changes for batch `batch` and write them into `folder` (one Parquet
    file); returns what to record with the batch. Raises BadChangeBatch before writing anything."""
    where = f"capture of batch {batch}, table {table.name}"
    watermark = None
    if kind == "snapshot":
        changes = snapshot_changes(read_rows(spark, table, src, where), read_base(spark, lake, table, state), table, where)
    elif kind == "cdc":
        changes = cdc_changes(spark, table, src, read_base(spark, lake, table, state), where)
    else:
        if not since_column:
            raise ConfigError(f"{where}: an append source needs a since-column (--since-column C, or since_column "
                              f"in [capture.{table.name}])")
        last = lake.last_capture(table.name, batch)
        changes, watermark = append_changes(read_rows(spark, table, src, where), table, since_column,
                                            last.watermark if last else None, where)
    inserted, deleted = write_changes(spark, changes, table, folder)
    spark.catalog.clearCache()  # the frames a CDC capture cached; a step that follows registers its own anew
    return CaptureRecord(table.name, batch, kind, tuple(str(f) for f in src.files), inserted, deleted, state.last, watermark)


def write_changes(spark: SparkSession, changes: DataFrame, table: Table, folder: Path) -> tuple[int, int]:
    """One file, folder/part-00000.parquet, rows sorted by every column: the same changes give the same file.
    A capture without changes writes a file of zero rows (an empty night, not a missing batch)."""
    cols = [column(c) for c in table.column_names]
    out = changes.select(*cols, column(OP)).repartition(1).sortWithinPartitions(*cols, column(OP))
    out.write.mode("overwrite").parquet(str(folder))
    parts = sorted(folder.glob("part-*.parquet"))
    if len(parts) != 1:
        raise RuntimeError(f"capture: expected one Parquet file in {folder}, found {len(parts)}")
    parts[0].rename(folder / "part-00000.parquet")
    for f in folder.iterdir():  # Spark's _SUCCESS and checksum files
        if f.name != "part-00000.parquet":
            f.unlink()
    counts = {r[OP]: r["n"] for r in spark.read.parquet(str(folder)).groupBy(OP).agg(F.count(F.lit(1)).alias("n")).collect()}
    return counts.get("insert", 0), counts.get("delete", 0)


def _net(signed: DataFrame, names: tuple[str, ...]) -> DataFrame:
    """Bag arithmetic: rows with SIGN +1 / -1, summed per row image; a positive sum n gives n inserts, a
    negative one -n deletes, zero nothing."""
    cols = [column(n) for n in names]
    net = signed.groupBy(*cols).agg(F.sum(SIGN).alias("_ns_n")).where(F.col("_ns_n") != 0)
    op = F.when(F.col("_ns_n") > 0, F.lit("insert")).otherwise(F.lit("delete"))
    return net.select(*cols, F.explode(F.array_repeat(op, F.abs("_ns_n").cast("int"))).alias(OP))


# ---------------------------------------------------------------- problems: the first offending row names itself


def _problem(code: str, col: str | None = None, value: Column | None = None) -> Column:
    return F.struct(F.lit(code).alias("code"), F.lit(col).cast("string").alias("column"),
                    (value if value is not None else F.lit(None)).cast("string").alias("value"))


def _first_of(cases: list[tuple[Column, Column]]) -> Column:
    """The first (condition, problem) that holds, else NULL."""
    if not cases:
        return F.lit(None).cast("struct<code:string,column:string,value:string>")
    expr = F.when(cases[0][0], cases[0][1])
    for cond, problem in cases[1:]:
        expr = expr.when(cond, problem)
    return expr


def _raise_first(df: DataFrame, order: list, message: Callable[[Row], str]) -> None:
    found = df.where(F.col(PROBLEM).isNotNull()).orderBy(*order).limit(1).collect()
    if found:
        raise BadChangeBatch(message(found[0]) + "; nothing was written")


def _path(uri: str) -> str:
    return unquote(urlparse(uri).path) if uri.startswith("file:") else uri


def _values(table: Table, row: Row, prefix: str, names: tuple[str, ...] | None = None) -> str:
    names = names or table.column_names
    index = {c: i for i, c in enumerate(table.column_names)}
    return ", ".join(f"{c}={row[f'{prefix}{index[c]}']!r}" for c in names)


# ---------------------------------------------------------------- snapshot and append sources: Parquet or CSV


def read_rows(spark: SparkSession, table: Table, src: SourceFiles, where: str) -> DataFrame:
    """The source's rows as the table's columns, typed (columns the table does not have are ignored), plus
    FILE and PROBLEM (a value that does not convert, a NULL in a NOT NULL column, a malformed CSV line).
    Missing columns and Parquet types that cannot hold a column are refused here, from the files' headers."""
    raw = _read_parquet(spark, table, src, where) if src.format == "parquet" else _read_csv(spark, table, src, where)
    typed = raw.select("*", *[F.col(f"_r{i}").try_cast(types.spark_type(c.type)).alias(c.name) for i, c in enumerate(table.columns)])
    cases = [(F.col(CORRUPT).isNotNull(), _problem("malformed", None, F.col(CORRUPT)))]
    for i, c in enumerate(table.columns):
        cases.append((F.col(f"_r{i}").isNotNull() & column(c.name).isNull(), _problem("type", c.name, F.col(f"_r{i}"))))
        if not c.nullable:
            cases.append((column(c.name).isNull(), _problem("null", c.name)))
    return typed.select("*", _first_of(cases).alias(PROBLEM))


def _check_rows(rows: DataFrame, table: Table, where: str) -> None:
    def message(r: Row) -> str:
        p = r[PROBLEM]
        return f"{where}: {_path(r[FILE])}: {_row_problem(table, p)} (row {_values(table, r, '_r')})"

    _raise_first(rows, [FILE], message)


def _row_problem(table: Table, p: Row) -> str:
    col = table.column(p["column"]) if p["column"] else None
    if p["code"] == "malformed":
        return f"malformed CSV line {p['value']!r} (another number of fields than the header)"
    if p["code"] == "type":
        return f"column {p['column']} holds {p['value']!r}, which does not convert to {col.type} ({table.name}.{p['column']})"
    return f"column {p['column']} is NULL, but {table.name}.{p['column']} is NOT NULL"


def _read_parquet(spark: SparkSession, table: Table, src: SourceFiles, where: str) -> DataFrame:
    names: dict[str, str] = {}  # table column -> its name in the files
    first: dict[str, tuple[Path, str]] = {}
    for f in src.files:
        try:
            schema = pq.read_schema(f)
        except Exception as e:  # pyarrow raises several types for a broken file
            raise BadChangeBatch(f"{where}: {f}: not a readable Parquet file ({e}); nothing was written") from None
        fields = {field.name.lower(): field for field in schema}
        missing = [c.name for c in table.columns if c.name.lower() not in fields]
        if missing:
            raise BadChangeBatch(f"{where}: {f}: missing column(s) {', '.join(missing)} (table {table.name} has "
                                 f"{', '.join(table.column_names)}); nothing was written")
        for c in table.columns:
            field = fields[c.name.lower()]
            arrow = str(field.type)
            if not arrow_fits(arrow, c.type):
                raise BadChangeBatch(f"{where}: {f}: column {field.name} has type {arrow}, but {table.name}.{c.name} "
                                     f"is {c.type}; nothing was written")
            seen = first.setdefault(c.name, (f, arrow))
            if seen[1] != arrow:
                raise BadChangeBatch(f"{where}: {f} and {seen[0]} give column {c.name} different types ({arrow}, {seen[1]}); "
                                     f"write every file of a source alike; nothing was written")
            names.setdefault(c.name, field.name)
    df = spark.read.parquet(*[str(f) for f in src.files])
    return df.select(*[F.col(ident(names[c.name], "spark")).alias(f"_r{i}") for i, c in enumerate(table.columns)],
                     F.col("_metadata.file_path").alias(FILE), F.lit(None).cast("string").alias(CORRUPT))


def _read_csv(spark: SparkSession, table: Table, src: SourceFiles, where: str) -> DataFrame:
    """Every value read as text (then converted like any other value); files grouped by header, each read
    with its own header's column order; RFC 4180 quoting (a quote inside a quoted value is doubled)."""
    groups: dict[tuple[str, ...], list[Path]] = {}
    for f in src.files:
        groups.setdefault(_csv_header(f, table, where), []).append(f)
    frames = []
    for header, files in groups.items():
        lower = {h.lower(): h for h in header}
        schema = StructType([StructField(h, StringType()) for h in header] + [StructField(CORRUPT, StringType())])
        df = spark.read.csv([str(f) for f in files], header=True, schema=schema, escape='"', mode="PERMISSIVE",
                            columnNameOfCorruptRecord=CORRUPT)
        frames.append(df.select(*[F.col(ident(lower[c.name.lower()], "spark")).alias(f"_r{i}") for i, c in enumerate(table.columns)],
                                F.col("_metadata.file_path").alias(FILE), F.col(CORRUPT)))
    return reduce(DataFrame.unionByName, frames)


def _csv_header(f: Path, table: Table, where: str) -> tuple[str, ...]:
    opener = gzip.open if f.name.lower().endswith(".gz") else open
    with opener(f, "rt", newline="") as fh:
        header = next(csv.reader(fh), None)
    if not header:
        raise BadChangeBatch(f"{where}: {f}: no header line (a CSV source starts with the column names); nothing was written")
    lower = [h.lower() for h in header]
    dup = next((h for h in header if lower.count(h.lower()) > 1), None)
    if dup is not None:
        raise BadChangeBatch(f"{where}: {f}: column {dup} appears twice in the header; nothing was written")
    missing = [c.name for c in table.columns if c.name.lower() not in lower]
    if missing:
        raise BadChangeBatch(f"{where}: {f}: missing column(s) {', '.join(missing)} in the header (table {table.name} "
                             f"has {', '.join(table.column_names)}); nothing was written")
    return tuple(header)


# ---------------------------------------------------------------- snapshot


def snapshot_changes(rows: DataFrame, base: DataFrame, table: Table, where: str) -> DataFrame:
    """The snapshot minus the base: rows only in the snapshot are inserts, rows only in the base deletes."""
    _check_rows(rows, table, where)
    if table.primary_key:
        keys = [column(k) for k in table.primary_key]
        dup = rows.groupBy(*keys).agg(F.count(F.lit(1)).alias("_ns_n")).where(F.col("_ns_n") > 1).orderBy(*keys).limit(1).collect()
        if dup:
            r = dup[0]
            key = ", ".join(f"{k}={r[k]!r}" for k in table.primary_key)
            same = reduce(lambda a, b: a & b, [column(k) == F.lit(r[k]) for k in table.primary_key])
            files = ", ".join(sorted(_path(f[FILE]) for f in rows.where(same).select(FILE).distinct().limit(3).collect()))
            raise BadChangeBatch(f"{where}: the snapshot holds primary key ({key}) {r['_ns_n']} times (in {files}); a "
                                 f"snapshot holds each {table.name} row once: fix the extract; nothing was written")
    names = table.column_names
    new = rows.select(*[column(n) for n in names], F.lit(1).alias(SIGN))
    old = base.select(*[column(n) for n in names], F.lit(-1).alias(SIGN))
    return _net(new.unionByName(old), names)


# ---------------------------------------------------------------- append-only log


def append_changes(rows: DataFrame, table: Table, since_column: str, last: Watermark | None,
                   where: str) -> tuple[DataFrame, Watermark]:
    """Rows whose since-column is beyond the last watermark, as inserts; the new watermark is the newest
    value read (it never moves back: a log whose newest value is older than the watermark is refused)."""
    c = table.column(since_column)
    if c is None:
        raise ConfigError(f"{where}: since-column {since_column!r} is not a column of {table.name} "
                          f"({', '.join(table.column_names)})")
    spark_type = types.spark_type(c.type)
    if last is not None and last.column.lower() != c.name.lower():
        raise ConfigError(f"{where}: the last capture of {table.name} kept a watermark on {last.column}, not {c.name}; "
                          f"keep one since-column per source")
    _check_rows(rows, table, where)
    nulls = rows.where(column(c.name).isNull()).select(FILE, *[f"_r{i}" for i in range(len(table.columns))]).limit(1).collect()
    if nulls:
        r = nulls[0]
        raise BadChangeBatch(f"{where}: {_path(r[FILE])}: since-column {c.name} is NULL (row {_values(table, r, '_r')}); "
                             f"every row of an append-only log needs it; nothing was written")
    old = F.lit(last.value if last else None).cast(spark_type)
    newest, behind = rows.agg(F.max(column(c.name)).cast("string"), F.max(column(c.name)) < old).first()
    if last is not None and last.value is not None and behind:
        raise BadChangeBatch(f"{where}: the watermark would move backwards: the newest {c.name} in {_files_of(rows)} is "
                             f"{newest}, before {last.value}, the watermark of the last capture; the log was rewound or "
                             f"replaced: point the source at the new entries; nothing was written")
    fresh = rows if last is None or last.value is None else rows.where(column(c.name) > old)
    value = newest if newest is not None else (last.value if last else None)
    inserts = fresh.select(*[column(n) for n in table.column_names], F.lit("insert").alias(OP))
    return inserts, Watermark(c.name, spark_type, value)


def _files_of(rows: DataFrame) -> str:
    """The files behind a frame, for a message."""
    files = sorted({_path(r[0]) for r in rows.select(FILE).distinct().limit(4).collect()})
    return ", ".join(files[:3]) + (", ..." if len(files) > 3 else "")


# ---------------------------------------------------------------- CDC: Debezium change events

ENVELOPE = (
    "`schema` STRUCT<fields: ARRAY<STRUCT<field: STRING, fields: ARRAY<STRUCT<field: STRING, name: STRING>>>>>, "
    "payload STRUCT<op: STRING, before: MAP<STRING, STRING>, after: MAP<STRING, STRING>, "
    "source: STRUCT<lsn: STRING, ts_ms: STRING>>, "
    "op STRING, before MAP<STRING, STRING>, after MAP<STRING, STRING>, source STRUCT<lsn: STRING, ts_ms: STRING>, "
    f"{CORRUPT} STRING"  # malformed JSON: the whole line lands here and every other field is NULL
)
OPS = ("c", "u", "d", "r")  # create, update, delete, read (a snapshot row)
_MILLIS = ("io.debezium.time.Timestamp", "org.apache.kafka.connect.data.Timestamp")
_MICROS = "io.debezium.time.MicroTimestamp"
_NANOS = "io.debezium.time.NanoTimestamp"


def cdc_changes(spark: SparkSession, table: Table, src: SourceFiles, base: DataFrame, where: str) -> DataFrame:
    events = _events(spark, table, src).cache()
    _raise_first(events, [INDEX, LINE], lambda r: _event_message(table, where, r))
    valid = events.where(F.col(OP).isNotNull()).drop(PROBLEM)  # tombstones go
    return _collapse_by_key(valid, base, table, where) if table.primary_key else _net_images(valid, base, table, where)


def _lines(spark: SparkSession, src: SourceFiles) -> DataFrame:
    """(INDEX, FILE, LINE, TEXT) of every non-blank line: each file is read whole, so lines keep their numbers."""
    frames = [spark.read.text(str(f), wholetext=True)
              .select(F.lit(i).alias(INDEX), F.lit(str(f)).alias(FILE), F.posexplode(F.split("value", "\n")).alias(LINE, TEXT))
              for i, f in enumerate(src.files)]
    lines = reduce(DataFrame.unionByName, frames)
    return (lines.select(INDEX, FILE, (F.col(LINE) + 1).alias(LINE), F.regexp_replace(TEXT, "\r$", "").alias(TEXT))
            .where(F.trim(TEXT) != ""))


def _events(spark: SparkSession, table: Table, src: SourceFiles) -> DataFrame:
    """One row per line: op, the lsn/ts_ms order, before (_b<i>) and after (_a<i>) images converted to the
    table's types, whether the before image is full, and the line's first PROBLEM. Tombstones have op NULL."""
    j = F.from_json(TEXT, ENVELOPE, {"columnNameOfCorruptRecord": CORRUPT})
    p = j["payload"]
    enveloped = p.isNotNull()
    lower = lambda m: F.transform_keys(m, lambda k, v: F.lower(k))  # noqa: E731 - Debezium keeps the source's case
    fields = j["schema"]["fields"]
    value_fields = F.coalesce(*[F.try_element_at(F.filter(fields, _named(side)), F.lit(1))["fields"] for side in ("after", "before")])
    units = F.map_from_entries(F.transform(F.filter(value_fields, lambda c: c["field"].isNotNull()),
                                           lambda c: F.struct(F.lower(c["field"]), c["name"])))
    parsed = _lines(spark, src).select(
        INDEX, FILE, LINE, TEXT,
        F.when(enveloped, p["op"]).otherwise(j["op"]).alias("_op_raw"),
        lower(F.when(enveloped, p["before"]).otherwise(j["before"])).alias("_before"),
        lower(F.when(enveloped, p["after"]).otherwise(j["after"])).alias("_after"),
        F.when(enveloped, p["source"]["lsn"]).otherwise(j["source"]["lsn"]).alias("_lsn"),
        F.when(enveloped, p["source"]["ts_ms"]).otherwise(j["source"]["ts_ms"]).alias("_ts"),
        units.alias("_units"),
    )
    images = []
    for i, c in enumerate(table.columns):
        key, unit = F.lit(c.name.lower()), F.try_element_at("_units", F.lit(c.name.lower()))
        for side, m in (("a", "_after"), ("b", "_before")):
            raw = F.try_element_at(m, key)
            images += [raw.alias(f"_r{side}{i}"), F.coalesce(F.map_contains_key(m, key), F.lit(False)).alias(f"_h{side}{i}"),
                       _debezium_value(raw, c.type, unit).alias(f"_{side}{i}")]
    ev = parsed.select(INDEX, FILE, LINE, TEXT, "_op_raw", "_before", "_after", "_lsn", "_ts", *images)
    tombstone = (F.col("_op_raw").isNull() & F.col("_before").isNull() & F.col("_after").isNull()
                 & ((F.trim(TEXT) == "null") | F.col(TEXT).rlike(r'"payload"\s*:\s*null')))
    return ev.select("*", F.when(~tombstone, F.col("_op_raw")).alias(OP), _full_before(table).alias("_full"),
                     _event_problem(table, tombstone).alias(PROBLEM))


def _named(side: str) -> Callable[[Column], Column]:
    """The envelope schema's field named `side` (a one-argument lambda: Spark passes a second one the index)."""
    return lambda f: f["field"] == side


def _debezium_value(raw: Column, declared: str, unit: Column) -> Column:
    """A value of a Debezium JSON image (as text) in the column's type, from the encodings Debezium uses by
    default: DATE as days since the epoch, TIMESTAMP as epoch milliseconds, microseconds or nanoseconds
    (the envelope's schema names which; without it, the magnitude decides: below 1e14 milliseconds, below
    1e17 microseconds), DECIMAL as a string or a number; ISO text for dates and timestamps too. A value that
    does not convert is NULL (and a PROBLEM)."""
    whole = raw.rlike(r"^-?[0-9]+$")
    if declared == "DATE":
        return F.when(whole, F.date_add(F.lit("1970-01-01").cast("date"), raw.try_cast("int"))).otherwise(raw.try_cast("date"))
    if declared == "TIMESTAMP":
        n = raw.try_cast("bigint")
        thousand = F.lit(1000).cast("bigint")
        micros = (F.when(unit == _MICROS, n)
                  .when(unit == _NANOS, F.floor(n.cast("decimal(20,0)") / 1000).cast("bigint"))
                  .when(unit.isin(*_MILLIS) | (F.abs(n) < F.lit(10**14)), F.try_multiply(n, thousand))
                  .when(F.abs(n) < F.lit(10**17), n)
                  .otherwise(F.floor(n.cast("decimal(20,0)") / 1000).cast("bigint")))
        return F.when(whole, F.timestamp_micros(micros)).otherwise(raw.try_cast("timestamp"))
    return raw.try_cast(types.spark_type(declared))


def _full_before(table: Table) -> Column:
    """A before image is full when it holds every column and (with a primary key) some non-key value: an
    image holding only the key (PostgreSQL without REPLICA IDENTITY FULL) leaves the old row to the base."""
    every = reduce(lambda a, b: a & b, [F.col(f"_hb{i}") for i in range(len(table.columns))])
    keys = {k.lower() for k in table.primary_key}
    others = [F.col(f"_b{i}").isNotNull() for i, c in enumerate(table.columns) if c.name.lower() not in keys]
    valued = reduce(lambda a, b: a | b, others) if table.primary_key and others else F.lit(True)
    return F.col("_before").isNotNull() & every & valued


def _event_problem(table: Table, tombstone: Column) -> Column:
    op = F.col("_op_raw")
    writes, removes = op.isin("c", "r", "u"), op.isin("u", "d")
    cases = [
        (op.isNull() & ~tombstone, _problem("not_event", None, F.substring(TEXT, 1, 120))),
        (~op.isin(*OPS), _problem("op", None, op)),
        (writes & F.col("_after").isNull(), _problem("no_after", None, op)),
    ]
    for i, c in enumerate(table.columns):
        cases += [(writes & ~F.col(f"_ha{i}"), _problem("missing", c.name)),
                  (writes & F.col(f"_ra{i}").isNotNull() & F.col(f"_a{i}").isNull(), _problem("type", c.name, F.col(f"_ra{i}")))]
        if not c.nullable:
            cases.append((writes & F.col(f"_a{i}").isNull(), _problem("null", c.name)))
    index = {c.name: i for i, c in enumerate(table.columns)}
    if table.primary_key:
        cases.append(((op == "d") & F.col("_before").isNull(), _problem("no_before", None, op)))
        cases += [((op == "d") & F.col(f"_b{index[k]}").isNull(), _problem("no_key", k)) for k in table.primary_key]
    else:
        every = reduce(lambda a, b: a & b, [F.col(f"_hb{i}") for i in range(len(table.columns))])
        cases.append((removes & ~(F.col("_before").isNotNull() & every), _problem("keyless", None, op)))
    cases += [(removes & F.col(f"_rb{i}").isNotNull() & F.col(f"_b{i}").isNull(), _problem("type_before", c.name, F.col(f"_rb{i}")))
              for i, c in enumerate(table.columns)]
    return _first_of(cases)


def _event_message(table: Table, where: str, r: Row) -> str:
    p, at = r[PROBLEM], f"{where}: {r[FILE]} line {r[LINE]}"
    code, col, value = p["code"], p["column"], p["value"]
    declared = table.column(col).type if col else ""
    text = {
        "not_event": f"not a Debezium change event (malformed JSON, or no op): {value!r}",
        "op": f"op {value!r} is not a row change (c, u, d or r); capture a truncated or reloaded table with --snapshot",
        "no_after": f"op {value!r} without an after image",
        "missing": f"column {col} is missing from the after image (table {table.name} has {', '.join(table.column_names)})",
        "type": f"column {col} holds {value!r}, which does not convert to {declared} ({table.name}.{col})"
                + ("; Debezium's decimal.handling.mode=precise writes DECIMAL as Base64 bytes: use string or double"
                   if declared.startswith("DECIMAL") else ""),
        "null": f"column {col} is NULL in the after image, but {table.name}.{col} is NOT NULL",
        "no_before": "a delete without a before image: its key is unknown",
        "no_key": f"the before image of a delete lacks key column {col}",
        "keyless": f"op {value!r} needs the full before image: {table.name} has no primary key, so the row to "
                   f"remove is known only from its image (PostgreSQL: ALTER TABLE ... REPLICA IDENTITY FULL)",
        "type_before": f"column {col} of the before image holds {value!r}, which does not convert to {declared}",
    }[code]
    return f"{at}: {text}"


def _event_order() -> list[Column]:
    """Events of one key apply by source.lsn, else source.ts_ms, else file order (file, then line)."""
    return [F.col("_lsn").try_cast("decimal(38,0)").asc_nulls_first(), F.col("_lsn").asc_nulls_first(),
            F.col("_ts").try_cast("bigint").asc_nulls_first(), F.col(INDEX), F.col(LINE)]


def _collapse_by_key(ev: DataFrame, base: DataFrame, table: Table, where: str) -> DataFrame:
    """Per key, in order: the state before the first event is the base row (if any); each event must fit
    the state before it (a create needs an absent key, an update or delete a present one, a full before
    image must equal the current row); the batch deletes the base row and inserts the last after image."""
    n = len(table.columns)
    index = {c.name: i for i, c in enumerate(table.columns)}
    pk = [index[k] for k in table.primary_key]
    keyed = ev.select("*", *[F.when(F.col(OP) == "d", F.col(f"_b{i}")).otherwise(F.col(f"_a{i}")).alias(f"_k{j}")
                             for j, i in enumerate(pk)])
    keys = keyed.select(*[f"_k{j}" for j in range(len(pk))]).distinct()
    old = base.select(*[column(c).alias(f"_o{i}") for i, c in enumerate(table.column_names)], F.lit(True).alias("_in_base"))
    old = old.join(keys, [old[f"_o{i}"] == keys[f"_k{j}"] for j, i in enumerate(pk)], "left_semi")
    joined = keyed.join(old, [keyed[f"_k{j}"] == old[f"_o{i}"] for j, i in enumerate(pk)], "left")
    by_key = [F.col(f"_k{j}") for j in range(len(pk))]
    w = Window.partitionBy(*by_key).orderBy(*_event_order())
    seq = joined.select("*", F.row_number().over(w).alias("_rn"), F.count(F.lit(1)).over(Window.partitionBy(*by_key)).alias("_n"),
                        F.lag(OP).over(w).alias("_prev_op"), *[F.lag(f"_a{i}").over(w).alias(f"_p{i}") for i in range(n)])
    first = F.col("_rn") == 1
    exists = F.when(first, F.col("_in_base").isNotNull()).otherwise(F.col("_prev_op") != "d")
    current = [F.when(first, F.col(f"_o{i}")).otherwise(F.col(f"_p{i}")) for i in range(n)]
    differs = [(~F.col(f"_b{i}").eqNullSafe(current[i]),  # the value: [in the event, in the lake]
                _problem("mismatch", c, F.to_json(F.array(F.col(f"_b{i}").cast("string"), current[i].cast("string")))))
               for i, c in enumerate(table.column_names)]
    op = F.col(OP)
    cases = [(op.isin("c", "r") & exists, _problem("exists", None, F.when(first, F.lit("base")).otherwise(F.lit("batch")))),
             (op.isin("u", "d") & ~exists, _problem("absent", None, op))]
    cases += [(op.isin("u", "d") & F.col("_full") & cond, problem) for cond, problem in differs]
    seq = seq.select("*", _first_of(cases).alias(PROBLEM)).cache()
    _raise_first(seq, [INDEX, LINE], lambda r: _sequence_message(table, where, r))
    last = seq.where(F.col("_rn") == F.col("_n"))
    in_base = F.col("_in_base").isNotNull()
    same = in_base & (op != "d") & reduce(lambda a, b: a & b, [F.col(f"_a{i}").eqNullSafe(F.col(f"_o{i}")) for i in range(n)])
    names = table.column_names
    deletes = last.where(in_base & ~same).select(*_image(names, "_o"), F.lit("delete").alias(OP))
    inserts = last.where((op != "d") & ~same).select(*_image(names, "_a"), F.lit("insert").alias(OP))
    return deletes.unionByName(inserts)


def _image(names: tuple[str, ...], prefix: str) -> list[Column]:
    """The row image held in columns <prefix>0, <prefix>1, ... under the table's column names."""
    return [F.col(f"{prefix}{i}").alias(c) for i, c in enumerate(names)]


def _sequence_message(table: Table, where: str, r: Row) -> str:
    p, at = r[PROBLEM], f"{where}: {r[FILE]} line {r[LINE]}"
    key = ", ".join(f"{k}={r[f'_k{j}']!r}" for j, k in enumerate(table.primary_key))
    ops = {"c": "a create", "r": "a snapshot read (op r)", "u": "an update", "d": "a delete"}
    if p["code"] == "exists":
        where_ = "the base" if p["value"] == "base" else "the batch (an earlier event created it)"
        return (f"{at}: {ops[r[OP]]} of key ({key}), which already exists in {where_}; the feed and the lake disagree "
                f"(events replayed, or captured twice): recapture {table.name} with --snapshot")
    if p["code"] == "absent":
        return (f"{at}: {ops[r[OP]]} of key ({key}), which does not exist (not in the base, or deleted earlier in the "
                f"batch); an event is missing from the feed: recapture {table.name} with --snapshot")
    before, now = (v if v is not None else "NULL" for v in json.loads(p["value"]))
    return (f"{at}: the before image of {ops[r[OP]]} of key ({key}) does not match the current row: {p['column']} is "
            f"{before} in the event but {now} in the lake; an event is missing from the feed: recapture {table.name} "
            f"with --snapshot")


def _net_images(ev: DataFrame, base: DataFrame, table: Table, where: str) -> DataFrame:
    """Without a primary key a row is known only by its image: creates and reads add their after image,
    updates and deletes remove their before image (and updates add the after image); the net count of each
    image is the change, and a net removal needs as many equal rows in the base."""
    n, names = len(table.columns), table.column_names
    op = F.col(OP)
    at = F.struct(F.col(INDEX), F.col(LINE), F.col(FILE))
    plus = ev.where(op.isin("c", "r", "u")).select(*_image(names, "_a"), F.lit(1).alias(SIGN), at.alias("_at"))
    minus = ev.where(op.isin("u", "d")).select(*_image(names, "_b"), F.lit(-1).alias(SIGN), at.alias("_at"))
    signed = plus.unionByName(minus).cache()
    cols = [column(c) for c in names]
    net = signed.groupBy(*cols).agg(F.sum(SIGN).alias("_ns_n"), F.min(F.when(F.col(SIGN) < 0, F.col("_at"))).alias("_at"))
    removed = net.where(F.col("_ns_n") < 0).select(*[column(c).alias(f"_d{i}") for i, c in enumerate(names)], "_ns_n", "_at")
    old = base.select(*[column(c).alias(f"_o{i}") for i, c in enumerate(names)])
    same = [old[f"_o{i}"].eqNullSafe(removed[f"_d{i}"]) for i in range(n)]
    have = old.join(removed, same, "left_semi").groupBy(*[f"_o{i}" for i in range(n)]).agg(F.count(F.lit(1)).alias("_m"))
    short = removed.join(have, [removed[f"_d{i}"].eqNullSafe(have[f"_o{i}"]) for i in range(n)], "left") \
        .where(F.coalesce(F.col("_m"), F.lit(0)) < -F.col("_ns_n")).orderBy(F.col("_at")).limit(1).collect()
    if short:
        r = short[0]
        row = ", ".join(f"{c}={r[f'_d{i}']!r}" for i, c in enumerate(names))
        raise BadChangeBatch(f"{where}: {r['_at'][FILE]} line {r['_at'][LINE]}: a delete of a row that does not exist: "
                             f"({row}) is removed {-r['_ns_n']} time(s) but the base holds {r['_m'] or 0}; an event is "
                             f"missing from the feed: recapture {table.name} with --snapshot; nothing was written")
    return _net(signed.select(*cols, SIGN), names)
