"""`nightshift migrate-lake`: a lake of the earlier format becomes Delta tables, once.

The earlier format kept every base table, auxiliary view and lake copy of a view as versioned Parquet folders
(lake/base/<name>/v-<ID>/, a table laid out by month in __ns_part=YYYY-MM folders named by _partition.json)
switched by lake/base/_state.json. The current one is a Delta table per name under lake/tables/ and a state
record of their versions (runtime.lake). Each current version folder becomes its Delta table (a base table's
rows get their hidden row identity; a table laid out by month keeps its layout), every table's rows are
counted against the folder's, then the state record is written with the same applied batches, and only then
is lake/base/ removed. A crash leaves lake/base/ whole, so the rerun converts again; once lake/base/ is gone,
the command says the lake is already converted.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from nightshift.config import Project
from runtime.errors import ConfigError, SchemaError
from runtime.lake import PART, ROW_BATCH, ROW_ID, Lake, LakeState, delta_rows, parquet_rows
from spark_jobs.changes import month_of
from spark_jobs.lake_tables import latest_version, write

OLD_STATE = Path("base") / "_state.json"
PARTITION_FILE = "_partition.json"


@dataclass(frozen=True)
class Migration:
    applied: tuple[str, ...]
    tables: dict[str, int]  # name -> rows converted
    already: bool = False  # the lake was converted before: nothing done


def old_format(lake: Lake) -> bool:
    return (lake.root / OLD_STATE).is_file()


def migrate_lake(project: Project, spark: SparkSession | None, progress: Callable[[str], None] = lambda _: None) -> Migration:
    """Convert the project's lake (spark: a session, needed only when there is a lake of the earlier format)."""
    lake = Lake(project.lake)
    if not old_format(lake):
        if lake.state_path.is_file():
            return Migration(lake.state().applied, {}, already=True)
        raise ConfigError(f"{lake.root}: no lake of the earlier format to convert ({lake.root / OLD_STATE} is missing)")
    old = json.loads((lake.root / OLD_STATE).read_text())
    applied, folders = tuple(old["applied"]), dict(old["versions"])
    if lake.state_path.is_file() and lake.state().applied not in ((), applied):
        raise SchemaError(f"{lake.root}: both {lake.root / OLD_STATE} (batches up to {applied[-1] if applied else 'none'}) "
                          f"and {lake.state_path} (up to {lake.state().last}) exist; remove the one that is not current")
    base_tables = {t.name: t for t in project.plan.schema.base_tables}
    versions, partitions, rows = {}, {}, {}
    for name, version in sorted(folders.items()):
        folder = lake.root / "base" / name / version
        if not folder.is_dir():
            raise SchemaError(f"{lake.root / OLD_STATE} names {folder} for {name}, which does not exist; nothing was converted")
        by = _partition_column(folder)
        df = spark.read.parquet(str(folder))
        if PART in df.columns:
            df = df.drop(PART)
        if name in base_tables:  # the row identity apply-base deletes by: (batch sequence, number in it)
            df = df.select("*", F.lit(len(applied)).cast("bigint").alias(ROW_BATCH),
                           F.monotonically_increasing_id().alias(ROW_ID))
        if by is not None:
            df = df.withColumn(PART, month_of(by)).repartition(PART)
        write(df, lake, name, "overwrite", None, PART if by is not None else None)
        versions[name] = latest_version(spark, lake.table_path(name))
        rows[name] = delta_rows(lake.table_path(name), versions[name])
        if rows[name] != parquet_rows(folder):
            raise SchemaError(f"{name}: the Delta table {lake.table_path(name)} holds {rows[name]} rows, the earlier "
                              f"version {folder} {parquet_rows(folder)}; lake/base/ is kept, nothing switched")
        if by is not None:
            partitions[name] = by
        progress(f"migrate-lake: {name} ({rows[name]} row(s)) is now the Delta table {lake.table_path(name)}")
    lake.write_state(LakeState(applied, versions, partitions))
    shutil.rmtree(lake.root / "base")
    return Migration(applied, rows)


def _partition_column(folder: Path) -> str | None:
    f = folder / PARTITION_FILE
    return json.loads(f.read_text()).get("column") if f.is_file() else None

