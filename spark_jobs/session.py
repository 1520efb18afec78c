"""One SparkSession per process, configured for small local jobs and for `spark://` clusters alike."""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

_DEFAULTS = {
    "spark.sql.shuffle.partitions": os.environ.get("NIGHTSHIFT_SHUFFLE_PARTITIONS", "4"),
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.sources.partitionOverwriteMode": "static",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "true",
    "spark.driver.memory": os.environ.get("NIGHTSHIFT_DRIVER_MEMORY", "4g"),
    "spark.sql.parquet.compression.codec": "snappy",
    "spark.sql.legacy.parquet.nanosAsLong": "false",
}


def get_spark(master: str = "local[2]", app: str = "nightshift") -> SparkSession:
    """Return the process's SparkSession (created on first use with the project's master)."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.master(master).appName(app)
    for k, v in _DEFAULTS.items():
        builder = builder.config(k, v)
    for pair in filter(None, os.environ.get("NIGHTSHIFT_SPARK_CONF", "").split(";")):
        key, _, value = pair.partition("=")
        builder = builder.config(key.strip(), value.strip())  # e.g. the test suite's small-data settings
    if os.environ.get("NIGHTSHIFT_SPARK_UI", "0") != "1":
        builder = builder.config("spark.ui.enabled", "false")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("NIGHTSHIFT_SPARK_LOG_LEVEL", "ERROR"))
    return spark
