"""apply-base_k: make batch k part of the lake's base tables, atomically and idempotently.

Each changed table gets a new version folder v-<k> (old rows minus deleted row images, bag
semantics, plus inserted rows); then one atomic rename of _state.json switches every table at
once. A crash before the rename leaves the old state (the half-written folder is overwritten by
the rerun); after it, the batch is applied and a rerun does nothing.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Callable

from pyspark.sql import DataFrame, SparkSession

from lattice.emit import rel
from lattice.ir import Plan, Table
from lattice.sql import ident
from runtime.errors import BatchOrderError
from runtime.faults import checkpoint
from runtime.lake import (PART, Lake, LakeState, link_folder, parquet_rows, partition_column, partition_folder,
                          partition_months, write_partition_column)
from runtime.night import BatchInfo
from spark_jobs.changes import load_batch, month_of, months, read_base, read_months
from spark_jobs.nested import next_copy, read_copy


def apply_base(
    spark: SparkSession,
    plan: Plan,
    lake: Lake,
    batch: str,
    state: LakeState,
    info: BatchInfo | None = None,
    progress: Callable[[str], None] = lambda _: None,
    partitions: dict[str, str] | None = None,
) -> dict:
    """`partitions`: table -> the date column whose months lay its base out ([lake] partition_by)."""
    t0 = time.perf_counter()
    if info is None:
        info = load_batch(spark, lake, plan, batch, state)
    versions = dict(state.versions)
    counts = {}
    for table in plan.schema.base_tables:
        if table.name not in info.changed:
            continue
        version = f"v-{batch}"
        out = lake.base_version_dir(table.name, version)
        counts[table.name] = {"inserted": info.inserted[table.name], "deleted": info.deleted[table.name]}
        by = (partitions or {}).get(table.name)
        if by is not None:
            counts[table.name] |= _write_months(spark, lake, table, state, info, by, out)
        else:
            new = _apply(spark, table, read_base(spark, lake, table, state), info)
            rows = parquet_rows(lake.current_base_dir(table.name, state)) + info.inserted[table.name] - info.deleted[table.name]
            new.coalesce(max(1, math.ceil(rows / ROWS_PER_FILE))).write.mode("overwrite").parquet(str(out))
        versions[table.name] = version
        progress(f"apply-base {batch}: {table.name} written (+{info.inserted[table.name]}/-{info.deleted[table.name]}"
                 + (f"; months rewritten {counts[table.name]['months_rewritten']}, linked "
                    f"{counts[table.name]['months_linked']}" if by is not None else "") + ")")
        checkpoint(f"apply-base:after_table:{table.name}")
    for view in plan.copied_views:  # the lake copies of views switch with the base (paper 000)
        version = f"v-{batch}"
        update = lake.copy_update_dir(batch, view.name)
        if not update.is_dir():
            raise BatchOrderError(f"apply-base {batch}: the updates of view {view.name} (its lake copy) are "
                                  f"missing under {update}; rerun nightshift propagate --batch {batch}")
        new = next_copy(spark, view, read_copy(spark, lake, view, state), spark.read.parquet(str(update)))
        new.coalesce(max(1, math.ceil(parquet_rows(lake.current_base_dir(view.name, state)) / ROWS_PER_FILE))).write \
            .mode("overwrite").parquet(str(lake.base_version_dir(view.name, version)))
        versions[view.name] = version
        checkpoint(f"apply-base:after_table:{view.name}")
    new_state = LakeState(state.applied + (batch,), versions)
    lake.write_state(new_state)
    lake.collect_garbage(new_state)
    return {"tables": counts, "seconds": round(time.perf_counter() - t0, 3)}


ROWS_PER_FILE = 4_000_000


def _write_months(spark: SparkSession, lake: Lake, table: Table, state: LakeState, info: BatchInfo, by: str,
                  out: Path) -> dict:
    """The new version of a partitioned table (issue 21): the months the batch touches are read, changed
    and written (one folder each); every other month's files are hard-linked from the current version,
    so a night rewrites only what it touched. The touched months are written without a shuffle: a
    task reading a month's file writes that month's rows (a row never changes month). The first
    partitioned version (the current one is not partitioned by `by`) shuffles every row to its month,
    so that each month starts as one file."""
    current = lake.current_base_dir(table.name, state)
    changes = spark.table(rel('ins', table.name)).unionByName(spark.table(rel('del', table.name)))
    touched = months(changes, by)
    laid_out = current is not None and partition_column(current) == by
    old = read_months(spark, lake, table, state, touched) if laid_out else read_base(spark, lake, table, state)
    new = _apply(spark, table, old, info).withColumn(PART, month_of(by))
    (new if laid_out else new.repartition(PART)).write.partitionBy(PART).mode("overwrite").parquet(str(out))
    linked = 0
    if laid_out:
        for month, folder in partition_months(current).items():
            if month not in touched:
                link_folder(folder, partition_folder(out, month))
                linked += 1
    write_partition_column(out, by)
    return {"months_rewritten": len(touched) if laid_out else len(partition_months(out)), "months_linked": linked}


def _apply(spark: SparkSession, table: Table, old: DataFrame, info: BatchInfo) -> DataFrame:
    ins = spark.table(rel('ins', table.name))
    if not info.deleted[table.name]:
        return old.unionByName(ins)
    dels = spark.table(rel('del', table.name))
    cols = list(table.column_names)
    keys = dels.dropDuplicates(cols)
    cond = [old[ident(c, "spark")].eqNullSafe(keys[ident(c, "spark")]) for c in cols]
    untouched = old.join(keys, cond, "left_anti")
    touched = old.join(keys, cond, "left_semi").exceptAll(dels)
    return untouched.unionByName(touched).unionByName(ins)
