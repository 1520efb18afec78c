"""One SparkSession per process, configured for small local jobs and for clusters (spark://, YARN, Kubernetes) alike."""

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


def get_spark(master: str | None = "local[2]", app: str = "nightshift") -> SparkSession:
    """Return the process's SparkSession (created on first use).

    master: the project's [spark] master (local[N], spark://host:port, yarn, k8s://...), or None to keep
    the launcher's: spark-submit's --master, which the Airflow DAG takes from the `spark_default`
    connection. Client mode either way: this process is the driver. Under spark-submit the settings it
    was given (--conf, the connection's extras, spark-defaults.conf) win over nightshift's defaults;
    NIGHTSHIFT_SPARK_CONF ("key=value;key=value") wins over both.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName(app)
    if master:
        builder = builder.master(master)
    preset = _launcher_conf()
    for k, v in _DEFAULTS.items():
        if k not in preset:
            builder = builder.config(k, v)
    for pair in filter(None, os.environ.get("NIGHTSHIFT_SPARK_CONF", "").split(";")):
        key, _, value = pair.partition("=")
        builder = builder.config(key.strip(), value.strip())  # e.g. the test suite's small-data settings
    if os.environ.get("NIGHTSHIFT_SPARK_UI", "0") != "1" and "spark.ui.enabled" not in preset:
        builder = builder.config("spark.ui.enabled", "false")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("NIGHTSHIFT_SPARK_LOG_LEVEL", "ERROR"))
    return spark


def _launcher_conf() -> set[str]:
    """The keys spark-submit already set, when this process runs under it (its JVM is up and holds them
    as system properties; PYSPARK_GATEWAY_PORT says so). Outside spark-submit nothing is preset, and the
    JVM is not started here: spark.driver.memory must still reach its command line."""
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return set()
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    return {k for k, _ in SparkConf().getAll()}
