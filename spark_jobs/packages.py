"""The Spark packages nightshift's sessions load (no pyspark import here: the Airflow DAG file reads them
when it builds its spark-submit tasks, at parse time)."""

from __future__ import annotations

import os
from pathlib import Path

# Delta Lake (the lake's table format): pinned, from Maven Central through Spark's own resolver (Ivy), into a
# cache that is the project's user's, not a project's, so every project, the test suite and spark-submit
# resolve it once. ivysettings.xml resolves from Maven Central only (see its comment).
DELTA_PACKAGE = "io.delta:delta-spark_2.13:4.4.0"
IVY_SETTINGS = Path(__file__).resolve().parent / "ivysettings.xml"


def ivy_cache() -> str:
    """The Ivy folder Spark keeps resolved packages in: NIGHTSHIFT_IVY_CACHE, else ~/.cache/nightshift/ivy."""
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nightshift" / "ivy"
    return os.environ.get("NIGHTSHIFT_IVY_CACHE") or str(default)


def delta_conf() -> dict[str, str]:
    """What a Spark session (local, spark-submit's, a Spark Connect server's) needs to read and write the lake's
    Delta tables: the package, its SQL extension and catalog, and deletion vectors on every new table."""
    return {
        "spark.jars.packages": DELTA_PACKAGE,
        "spark.jars.ivy": ivy_cache(),
        "spark.jars.ivySettings": str(IVY_SETTINGS),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.databricks.delta.properties.defaults.enableDeletionVectors": "true",
        # the lake's tables have few files: replaying a log in the default 50 tasks is most of a small read
        "spark.databricks.delta.snapshotPartitions": os.environ.get("NIGHTSHIFT_SHUFFLE_PARTITIONS", "4"),
    }
