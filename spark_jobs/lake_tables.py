"""The lake's Delta tables as Spark writes them (runtime.lake lays them out): every commit of a night is
idempotent (Delta's app id and version: a rerun after a crash commits only what is missing), and the
version each commit made is read back for the lake's state record."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from runtime.lake import Lake

_TXN_APP, _TXN_VERSION = "spark.databricks.delta.write.txnAppId", "spark.databricks.delta.write.txnVersion"


def delta_path(path: Path) -> str:
    """A Delta table by path in Spark SQL: delta.`/lake/tables/pos`."""
    return "delta.`" + str(path).replace("`", "``") + "`"


def latest_version(spark: SparkSession, path: Path) -> int:
    """The table's newest version: what this night's commit made (or, skipped as already done, made before).
    Read from the names of its log's commit files on the driver (the lake is a shared file system), no job."""
    versions = [int(p.stem) for p in (Path(path) / "_delta_log").glob("*.json") if p.stem.isdigit()]
    if not versions:
        return int(spark.sql(f"DESCRIBE HISTORY {delta_path(path)} LIMIT 1").collect()[0]["version"])
    return max(versions)


def write(df: DataFrame, lake: Lake, name: str, mode: str, txn: int | None, partition_by: str | None = None) -> None:
    """Append to or overwrite (with its schema and layout) a lake table; txn: the batch's sequence number
    (None: not a batch's commit, e.g. materialize's copies, which the state record switches to)."""
    w = df.write.format("delta").mode(mode)
    if mode == "overwrite":
        w = w.option("overwriteSchema", "true")
    if partition_by is not None:
        w = w.partitionBy(partition_by)
    if txn is not None:
        w = w.option("txnAppId", lake.app_id(name)).option("txnVersion", txn)
    w.save(str(lake.table_path(name)))


@contextmanager
def idempotent(spark: SparkSession, lake: Lake, name: str, txn: int):
    """SQL commands (MERGE, DELETE) in this block commit as the batch's idempotent write to table `name`."""
    spark.conf.set(_TXN_APP, lake.app_id(name))
    spark.conf.set(_TXN_VERSION, str(txn))
    try:
        yield
    finally:
        spark.conf.unset(_TXN_APP)
        spark.conf.unset(_TXN_VERSION)
