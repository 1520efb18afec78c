"""apply-base_k: make batch k part of the lake's base tables (Delta tables), idempotently.

Each changed table gets one Delta commit: inserted rows appended; with deletes, the rows the batch's
deleted row images pick (bag semantics: one row each, by the hidden row identity runtime.lake
describes; picked from the rows the batch's delete check found equal to them, without reading the base
again) are deleted by deletion vectors, no file rewritten: by their places in the files (which the delete
check recorded when lake_tables.deletes_by_place said so), written and committed from the driver before
the append; else by their row identities (which the check then recorded): a few by a DELETE naming them,
more by one MERGE that also inserts. A table with less live data than the night's options say
(rewrite_below, lake_tables.written_whole) is written anew instead: one write where a DELETE or MERGE is a
dozen Spark jobs. A view's lake copy takes its
changed groups: a small copy written anew (its rows and the changed groups merged in this process, no Spark
job), a large one by MERGE; a copy no group of which changed is not committed. Small commits (a new table's
first rows, a small table or copy written anew, a night's few inserts appended) are made from the driver
(lake_tables.write's small): Spark's Delta writer costs about half a second a commit before it writes
anything. Where the night's rows of a table are few and known in this process exactly (driver_checks.BatchRows)
and the table keeps its columns and layout, the rows themselves are computed here too (_commit_in_driver): the
commit then costs no Spark job at all. Every commit carries its mark (the table, k's sequence number: Lake.commit_mark). When every table
and lake copy has committed, the lake's state record takes the new versions. A crash between two
commits leaves the old state record; the rerun reads the base at the recorded versions again and skips
every commit whose mark the table's log already holds after its recorded version, so only what is
missing is committed.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from lattice import types
from lattice.emit import rel
from lattice.ir import Plan, Table
from lattice.sql import ident
from runtime import delta
from runtime.errors import BatchOrderError
from runtime.faults import checkpoint
from runtime.lake import PART, ROW_BATCH, ROW_ID, Lake, LakeState, parquet_rows
from runtime.night import BatchInfo
from runtime.options import DEFAULT_REWRITE_BELOW
from spark_jobs.changes import column, in_months, load_batch, month_of, months, read_matched, read_table
from spark_jobs.driver_checks import BatchRows, arrow_type, month, months_of
from spark_jobs.lake_tables import (DRIVER_ROWS, POSITION, commit_rows, commit_sql, delete_positions, delta_path,
                                    latest_version, live_bytes, table_schema, write, written_whole)
from spark_jobs.nested import copy_columns, next_copy, next_copy_rows, read_copy

MERGE_SOURCE, COPY_SOURCE = "__ns_apply", "__ns_apply_copy"
# Deletes by row identity (lake_tables.deletes_by_place says no to deleting by place): a DELETE naming
# them when FEW_DELETES or fewer; more, one MERGE.
FEW_DELETES = 1000



def apply_base(
    spark: SparkSession,
    plan: Plan,
    lake: Lake,
    batch: str,
    state: LakeState,
    info: BatchInfo | None = None,
    progress: Callable[[str], None] = lambda _: None,
    partitions: dict[str, str] | None = None,
    rewrite_below: int = DEFAULT_REWRITE_BELOW,
) -> dict:
    """`partitions`: table -> the date column whose months lay its base out ([lake] partition_by).
    `rewrite_below`: a lake table with less live Parquet than this many bytes is written anew.
    Runs after the batch's refresh, so its propagate checked the batch against this very lake state."""
    t0 = time.perf_counter()
    if info is None:
        info = load_batch(spark, lake, plan, batch, state, checked=True)
    versions, laid_out = dict(state.versions), dict(state.partitions)
    txn = state.sequence
    rows = BatchRows(lake, state, lake.batch_files(batch, [t.name for t in plan.schema.base_tables]))
    counts = {}
    for table in plan.schema.base_tables:
        if table.name not in info.changed:
            continue
        by = (partitions or {}).get(table.name)
        counts[table.name] = {"inserted": info.inserted[table.name], "deleted": info.deleted[table.name]}
        counts[table.name] |= _commit(spark, lake, table, state, info, by, txn, rewrite_below, rows)
        versions[table.name] = latest_version(spark, lake.table_path(table.name))
        laid_out.pop(table.name, None)
        if by is not None:
            laid_out[table.name] = by
        progress(f"apply-base {batch}: {table.name} committed as version {versions[table.name]} "
                 f"(+{info.inserted[table.name]}/-{info.deleted[table.name]}"
                 + (f"; months touched {counts[table.name]['months']}" if by is not None else "") + ")")
        checkpoint(f"apply-base:after_table:{table.name}")
    for view in plan.copied_views:  # the lake copies of views move with the base (paper 000)
        update = lake.copy_update_dir(batch, view.name)
        if not update.is_dir():
            raise BatchOrderError(f"apply-base {batch}: the updates of view {view.name} (its lake copy) are "
                                  f"missing under {update}; rerun nightshift propagate --batch {batch}")
        had = state.version(view.name)
        if had is not None and not parquet_rows(update):  # no group changed: the copy stays at its version
            continue
        snap = None if had is None else delta.snapshot(lake.table_path(view.name), had)
        if snap is not None and live_bytes(snap) >= rewrite_below:
            _merge_copy(spark, lake, view, spark.read.parquet(str(update)), txn, had)
        elif snap is None or not _copy_in_driver(lake, view, snap, update, txn):
            new = next_copy(spark, view, read_copy(spark, lake, view, state), spark.read.parquet(str(update)))
            write(new, lake, view.name, "overwrite", txn, since=had, small=had is not None)
        versions[view.name] = latest_version(spark, lake.table_path(view.name))
        progress(f"apply-base {batch}: lake copy of {view.name} committed as version {versions[view.name]}")
        checkpoint(f"apply-base:after_table:{view.name}")
    lake.write_state(LakeState(state.applied + (batch,), versions, laid_out))
    return {"tables": counts, "versions": {k: versions[k] for k in versions if versions[k] != state.version(k)},
            "seconds": round(time.perf_counter() - t0, 3)}


def _copy_in_driver(lake: Lake, view, snap: delta.DeltaSnapshot, update, txn: int) -> bool:
    """A small lake copy written anew from this process: its rows at the recorded version (`snap`) and the
    night's changed groups, merged in Arrow (nested.next_copy_rows) and committed once
    (lake_tables.commit_rows), no Spark job. False, nothing committed: the Spark path writes it."""
    rows = next_copy_rows(view, delta.dataset_of(snap).to_table(), pq.read_table(update))
    return rows is not None and commit_rows(lake, view.name, rows, txn, snap.version)


def _merge_copy(spark: SparkSession, lake: Lake, view, updated: DataFrame, txn: int, since: int) -> None:
    """A view's lake copy after the batch by one MERGE of the groups it changed (paper 000): a changed group's
    new row replaces its old one, a group whose count reached 0 goes, a new group is added; every other group's
    row (and file) stays."""
    cols = [ident(c, "spark") for c, _ in copy_columns(view)]
    updated.select(*cols).createOrReplaceTempView(COPY_SOURCE)
    on = " AND ".join(f"t.{ident(k.name, 'spark')} <=> s.{ident(k.name, 'spark')}" for k in view.keys) or "TRUE"
    count = ident("_ns_count", "spark")
    sql = (f"MERGE INTO {delta_path(lake.table_path(view.name))} AS t USING {COPY_SOURCE} AS s ON {on} "
           f"WHEN MATCHED AND s.{count} <= 0 THEN DELETE "
           f"WHEN MATCHED THEN UPDATE SET {', '.join(f't.{c} = s.{c}' for c in cols)} "
           f"WHEN NOT MATCHED AND s.{count} > 0 THEN INSERT ({', '.join(cols)}) VALUES ({', '.join('s.' + c for c in cols)})")
    commit_sql(spark, lake, view.name, txn, since, sql)


def _commit(spark: SparkSession, lake: Lake, table: Table, state: LakeState, info: BatchInfo, by: str | None,
            txn: int, rewrite_below: int, rows: BatchRows) -> dict:
    """Batch k's commit to `table`: an append, deletes by row identity and inserts, or the whole table
    written anew: when the table is new, its layout changes ([lake] partition_by), sql/schema.sql declares a
    column it lacks or changes a column's type (the rows already there read NULL in the new column, and
    their values in the new type), or the night deletes from a table smaller than `rewrite_below`."""
    done = _commit_in_driver(lake, table, state, info, by, txn, rewrite_below, rows)
    if done is not None:
        return done
    ins = _with_identity(spark.table(rel('ins', table.name)), txn, by)
    since = state.version(table.name)
    held = None if since is None else table_schema(lake.table_path(table.name), since)  # the log's, no rows read
    was = state.partitions.get(table.name)
    deletes = bool(info.deleted[table.name])
    small = held is not None and deletes and written_whole(lake, table.name, since, rewrite_below)
    anew = held is None or was != by or bool(_missing(held, table)) or bool(_retyped(held, table))
    old = read_table(spark, lake, table.name, state) if held is not None and (anew or small or deletes) else None
    if anew or small:
        rows = _layout(old.drop(PART) if old is not None and PART in old.columns else old, table, by)
        if old is not None and deletes:  # the rows chosen among the table's own (it is read whole anyway)
            rows = rows.join(_chosen(spark, table, rows, None), [ROW_BATCH, ROW_ID], "left_anti")
        new = ins if rows is None else rows.unionByName(ins)
        write(new if by is None else new.repartition(PART), lake, table.name, "overwrite", txn,
              PART if by is not None else None, since,
              small=not anew or (old is None and info.inserted[table.name] <= DRIVER_ROWS))
        return {"rewritten": True} | ({"months": "all"} if by is not None else {})
    touched = months(spark.table(rel('ins', table.name)).unionByName(spark.table(rel('del', table.name))), by) \
        if by is not None else None
    out = {"months": len(touched)} if touched is not None else {}
    few = info.inserted[table.name] <= DRIVER_ROWS
    if not deletes:
        write(ins, lake, table.name, "append", txn, since=since, small=few)
        return out
    matched = read_matched(spark, lake, table, state, info.batch)  # None: that record is gone (e.g. removed by hand)
    _merge(spark, lake, table, old if matched is None else matched, old, ins, touched, txn, since, few)
    return out


def _commit_in_driver(lake: Lake, table: Table, state: LakeState, info: BatchInfo, by: str | None, txn: int,
                     rewrite_below: int, rows: BatchRows) -> dict | None:
    """_commit made from this process, no Spark job, where the night's rows of the table are few and known here
    exactly (driver_checks.BatchRows) and the table keeps its layout and columns: the inserted rows appended; a
    small table written anew without the deleted rows; or the deleted rows' deletion vectors at the places the
    delete check recorded, then the append. The commits and their marks are the Spark path's, so a rerun after
    a crash in either finds what the other made. None, nothing committed: the Spark path commits."""
    since, changes = state.version(table.name), rows.changes(table)
    if since is None or changes is None or state.partitions.get(table.name) != by:
        return None
    ins, dels = changes
    snap = delta.snapshot(lake.table_path(table.name), since)
    hidden = {ROW_BATCH: pa.int64(), ROW_ID: pa.int64()} | ({PART: pa.string()} if by is not None else {})
    if dict(zip(snap.schema.names, snap.schema.types)) != {c.name: arrow_type(c.type) for c in table.columns} | hidden:
        return None  # sql/schema.sql changed the table (or its names' case): Spark writes it anew
    added = _identified(ins, txn, by, snap.schema)
    out = {"months": len(months_of(pa.concat_tables([ins, dels]), by))} if by is not None else {}
    if not info.deleted[table.name]:
        return out if commit_rows(lake, table.name, added, txn, since, "append") else None
    if written_whole(lake, table.name, since, rewrite_below):
        old = rows.whole(table)
        kept = None if old is None else _without_chosen(old, dels, table, [ROW_BATCH, ROW_ID])
        if kept is None or not commit_rows(lake, table.name, pa.concat_tables([kept, added]), txn, since):
            return None
        return {"rewritten": True} | ({"months": "all"} if by is not None else {})
    recorded = rows.record(table, lake.matched_dir(info.batch, table.name, since), keep=POSITION)
    chosen = None if recorded is None else _chosen_rows(recorded, dels, table, list(POSITION))
    if chosen is None:
        return None
    places: dict[str, list[int]] = {}
    for name, row in zip(chosen.column(POSITION[0]).to_pylist(), chosen.column(POSITION[1]).to_pylist()):
        places.setdefault(name, []).append(row)
    if delete_positions(lake, table.name, txn, since, places, "delete") is None:
        return None  # a table the driver does not delete from (nothing committed)
    checkpoint(f"apply-base:after_delete:{table.name}")
    return out if commit_rows(lake, table.name, added, txn, since, "append") else None


def _identified(ins: pa.Table, txn: int, by: str | None, schema: pa.Schema) -> pa.Table:
    """Inserted rows with their row identity (batch k's sequence number, a number unique within the insert: the
    row's place in it) and, in a table laid out by month, their month, in the table's column order (_with_identity)."""
    n = ins.num_rows
    extra = {ROW_BATCH: pa.array([txn] * n, pa.int64()), ROW_ID: pa.array(range(n), pa.int64())}
    if by is not None:
        extra[PART] = month(ins.column(by))
    columns = {name: ins.column(name) for name in ins.column_names} | extra
    return pa.table([columns[name] for name in schema.names], schema=schema)


def _chosen_rows(base: pa.Table, dels: pa.Table, table: Table, order: list[str]) -> pa.Table | None:
    """_chosen in Arrow: for a row image deleted n times, the first n rows of `base` equal to it (Spark's <=>: NULL
    equals NULL, NaN equals NaN, -0.0 equals 0.0), in `order` (the rows' identities, or their places). The base's
    and the deleted rows are sorted together by image, then the base's before the deleted, then by `order`: each
    image's rows are one run, and its first n base rows are the ones taken. None when some image has fewer equal
    rows than that (the table changed since its check), or a column Arrow does not sort: Spark chooses among the
    base's rows."""
    cols = list(table.column_names)
    try:
        both = pa.concat_tables([base.select(cols), dels.select(cols).cast(base.select(cols).schema)])
        images = [pc.add(c, pa.scalar(0.0, c.type)) if pa.types.is_floating(c.type) else c  # -0.0 as 0.0
                  for c in both.columns]
        tag = np.repeat(np.array([0, 1], np.int8), [base.num_rows, dels.num_rows])
        ranks = [pa.concat_arrays([base.column(o).combine_chunks(), pa.nulls(dels.num_rows, base.column(o).type)])
                 for o in order]
        names = [f"c{i}" for i in range(len(cols))] + ["tag"] + [f"o{i}" for i in range(len(order))]
        keyed = pa.table([*images, tag, *ranks], names=names)
        at = pc.sort_indices(keyed, sort_keys=[(n, "ascending") for n in names]).to_numpy()
        n = len(at)
        same = np.ones(max(n - 1, 0), dtype=bool)  # row i + 1 holds the image row i holds
        for c in images:
            c = c.take(at)
            x, y = c.slice(1), c.slice(0, n - 1)
            equal = pc.or_kleene(pc.fill_null(pc.equal(x, y), False), pc.and_(pc.is_null(x), pc.is_null(y)))
            if pa.types.is_floating(c.type):
                equal = pc.or_(equal, pc.fill_null(pc.and_(pc.is_nan(x), pc.is_nan(y)), False))
            same &= equal.to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    first = np.concatenate([[True], ~same]) if n else np.zeros(0, dtype=bool)
    run = np.cumsum(first) - 1
    starts = np.flatnonzero(first)
    tags = tag[at]
    deleted = np.bincount(run, weights=tags, minlength=len(starts)).astype(np.int64)
    held = np.bincount(run, minlength=len(starts)) - deleted
    if (held < deleted).any():
        return None
    taken = at[(tags == 0) & (np.arange(n) - starts[run] < deleted[run])]
    return base.take(pa.array(np.sort(taken), pa.int64()))


def _without_chosen(old: pa.Table, dels: pa.Table, table: Table, order: list[str]) -> pa.Table | None:
    """`old` less the rows the batch's deleted row images pick (_chosen_rows), by their row identity."""
    chosen = _chosen_rows(old, dels, table, order)
    if chosen is None:
        return None
    gone = set(zip(*[chosen.column(c).to_pylist() for c in order]))
    keep = [k not in gone for k in zip(*[old.column(c).to_pylist() for c in order])]
    return old.filter(pa.array(keep, pa.bool_()))


def _layout(old: DataFrame | None, table: Table, by: str | None) -> DataFrame | None:
    """The rows of a table being written anew, with the month column of the layout `by` (None: none)."""
    if old is None:
        return None
    cols = [F.lit(None).cast(types.spark_type(c.type)).alias(c.name) if c in _missing(old.schema, table)
            else column(c.name).cast(types.spark_type(c.type)).alias(c.name) for c in table.columns] + [F.col(ROW_BATCH), F.col(ROW_ID)]
    return old.select(*cols, *([month_of(by).alias(PART)] if by is not None else []))


def _missing(held: StructType, table: Table) -> list:
    """The declared columns the table's Delta table was written without (held: its schema)."""
    present = {c.lower() for c in held.fieldNames()}
    return [c for c in table.columns if c.name.lower() not in present]


def _retyped(held: StructType, table: Table) -> list:
    """The declared columns whose type sql/schema.sql changed since the table's Delta table was written."""
    lake_types = {f.name.lower(): f.dataType for f in held.fields}
    return [c for c in table.columns
            if c.name.lower() in lake_types and lake_types[c.name.lower()].simpleString() != types.spark_type(c.type).lower().replace(" ", "")]


def _with_identity(ins: DataFrame, txn: int, by: str | None) -> DataFrame:
    """Inserted rows with their row identity (batch k's sequence number, a number unique within the insert)
    and, in a table laid out by month, their month."""
    out = ins.select("*", F.lit(txn).cast("bigint").alias(ROW_BATCH), F.monotonically_increasing_id().alias(ROW_ID))
    return out.withColumn(PART, month_of(by)) if by is not None else out


def _chosen(spark: SparkSession, table: Table, base: DataFrame, touched) -> DataFrame:
    """The base rows the batch deletes, by identity and place (what `base` has of them): for a row image deleted
    n times, n of the rows equal to it (the first n by identity, or by place). `base`: the rows the delete
    check kept (changes._matched: places, no identity), or the base itself (its declared columns and the
    identity read, and in a table laid out by month only the months `touched`)."""
    cols = list(table.column_names)
    dels = spark.table(rel('del', table.name))
    if touched is not None:
        base = base.where(in_months(touched))
    ids = [F.col(c) for c in (ROW_BATCH, ROW_ID) if c in base.columns]
    where = [F.col(c) for c in POSITION if c in base.columns]
    b = base.select(*[column(c) for c in cols], *ids, *where)
    keys = dels.dropDuplicates(cols)
    b = b.join(keys, [b[ident(c, "spark")].eqNullSafe(keys[ident(c, "spark")]) for c in cols], "left_semi")
    image = [column(c) for c in cols]
    b = b.withColumn("__ns_k", F.row_number().over(Window.partitionBy(*image).orderBy(*(ids or where))))
    d = dels.withColumn("__ns_k", F.row_number().over(Window.partitionBy(*image).orderBy(F.lit(1))))
    on = [b[ident(c, "spark")].eqNullSafe(d[ident(c, "spark")]) for c in cols] + [b["__ns_k"] == d["__ns_k"]]
    return b.join(d, on, "left_semi").select(*ids, *where)


def _merge(spark: SparkSession, lake: Lake, table: Table, base: DataFrame, old: DataFrame, ins: DataFrame, touched,
           txn: int, since: int, few_inserts: bool) -> None:
    """The chosen rows deleted (deletion vectors), the inserted rows added, each an idempotent commit
    of its own (a rerun skips the one done): the deletion vectors written from the driver at the rows' places
    when the delete check recorded places (lake_tables.deletes_by_place), else a DELETE naming their
    identities when they are few, then an append; else one MERGE that also inserts."""
    cols = list(table.column_names)
    typed_null = {c.name: F.lit(None).cast(types.spark_type(c.type)) for c in table.columns}
    chosen = _chosen(spark, table, base, touched)
    if _delete_positions(lake, table, txn, since, chosen):
        checkpoint(f"apply-base:after_delete:{table.name}")
        write(ins, lake, table.name, "append", txn, since=since, small=few_inserts)
        return
    if ROW_ID not in chosen.columns:  # places recorded, but the table changed since: choose among the base's rows
        chosen = _chosen(spark, table, old, touched)
    few = chosen.limit(FEW_DELETES + 1).collect()
    if len(few) <= FEW_DELETES:
        ids = ", ".join(f"({int(r[0])}L, {int(r[1])}L)" for r in few)
        where = f"({ROW_BATCH}, {ROW_ID}) IN ({ids})"
        if touched is not None:
            where += " AND " + _in_months_sql(touched)
        commit_sql(spark, lake, table.name, txn, since,
                   f"DELETE FROM {delta_path(lake.table_path(table.name))} WHERE {where}", "delete")
        checkpoint(f"apply-base:after_delete:{table.name}")
        write(ins, lake, table.name, "append", txn, since=since, small=few_inserts)
        return
    extra = [PART] if touched is not None else []
    deletes = chosen.select(*[typed_null[c].alias(c) for c in cols], ROW_BATCH, ROW_ID,
                            *[F.lit(None).cast("string").alias(PART) for _ in extra], F.lit("delete").alias("_op"))
    inserts = ins.select(*[column(c) for c in cols], ROW_BATCH, ROW_ID, *extra, F.lit("insert").alias("_op"))
    deletes.unionByName(inserts).createOrReplaceTempView(MERGE_SOURCE)
    prune = ""
    if touched is not None:  # only the months the batch touches: Delta skips every other month's files
        prune = " AND " + _in_months_sql(touched, "t.")
    names = [ident(c, "spark") for c in cols + [ROW_BATCH, ROW_ID] + extra]
    sql = (f"MERGE INTO {delta_path(lake.table_path(table.name))} AS t USING {MERGE_SOURCE} AS s "
           f"ON s._op = 'delete' AND t.{ROW_BATCH} = s.{ROW_BATCH} AND t.{ROW_ID} = s.{ROW_ID}{prune} "
           f"WHEN MATCHED THEN DELETE "
           f"WHEN NOT MATCHED AND s._op = 'insert' THEN INSERT ({', '.join(names)}) "
           f"VALUES ({', '.join('s.' + n for n in names)})")
    commit_sql(spark, lake, table.name, txn, since, sql)


def _delete_positions(lake: Lake, table: Table, txn: int, since: int, chosen: DataFrame) -> bool:
    """The chosen rows deleted by their places (file, row number: the delete check recorded them when
    lake_tables.deletes_by_place said so) from the driver, as the batch's delete commit (done already:
    nothing to do); False when their places are not known or the table is no longer one the driver deletes
    from. The places come to the driver a list per file."""
    if not all(c in chosen.columns for c in POSITION):
        return False
    per_file = chosen.groupBy(POSITION[0]).agg(F.collect_list(POSITION[1]).alias("rows")).toArrow()
    places = {name: rows.values.to_numpy() for name, rows in
              zip(per_file.column(0).to_pylist(), per_file.column(1).combine_chunks())}
    return delete_positions(lake, table.name, txn, since, places, "delete") is not None


def _in_months_sql(touched, alias: str = "") -> str:
    """Spark SQL: the rows of these months (NULL: the rows without one) of a table laid out by month."""
    named = ", ".join(f"'{m}'" for m in touched if m is not None) or "NULL"
    return f"({alias}{PART} IN ({named})" + (f" OR {alias}{PART} IS NULL)" if None in touched else ")")
