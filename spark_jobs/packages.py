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
# The jars of DELTA_PACKAGE's resolution that Spark does not ship, as Ivy names them in the cache's jars/
# folder (organisation_artifact-version). Its other jars are older copies of Spark's own (Hadoop, Parquet,
# Jackson, Log4j: Spark's load first either way). Once they are cached a session names these with
# spark.jars instead of resolving the package again: about 1.3 s less at every JVM start.
DELTA_JARS = (
    "io.delta_delta-spark_2.13-4.4.0", "io.delta_delta-storage-4.4.0", "io.delta_delta-kernel-api-4.4.0",
    "io.delta_delta-kernel-defaults-4.4.0", "io.delta_delta-kernel-unitycatalog-4.4.0",
    "io.unitycatalog_unitycatalog-client-0.6.0", "io.unitycatalog_unitycatalog-hadoop-0.6.0",
    "com.fasterxml.jackson.datatype_jackson-datatype-jdk8-2.13.5", "javax.annotation_javax.annotation-api-1.3.2",
    "commons-logging_commons-logging-1.3.0", "org.roaringbitmap_shims-0.9.25",
)


def user_cache() -> Path:
    """nightshift's folder in the user's cache (~/.cache/nightshift, or under XDG_CACHE_HOME): what every project
    and command of the machine's user shares (the Spark packages, the class-data archive)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nightshift"


def ivy_cache() -> str:
    """The Ivy folder Spark keeps resolved packages in: NIGHTSHIFT_IVY_CACHE, else ~/.cache/nightshift/ivy."""
    return os.environ.get("NIGHTSHIFT_IVY_CACHE") or str(user_cache() / "ivy")


def delta_jars() -> list[str] | None:
    """The cached Delta Lake jars a session loads (DELTA_JARS in ivy_cache()/jars), or None when one is missing
    (the session resolves the package then, which fetches what is missing)."""
    folder = Path(ivy_cache()) / "jars"
    jars = [folder / f"{name}.jar" for name in DELTA_JARS]
    return [str(j) for j in jars] if all(j.is_file() for j in jars) else None


# The table properties every new lake table gets (deletion vectors on): Spark's writer takes them from the
# session's defaults, the driver's writer (lake_tables.write) from here
TABLE_PROPERTIES = {"delta.enableDeletionVectors": "true"}


def delta_conf() -> dict[str, str]:
    """What a Spark session (local, spark-submit's, a Spark Connect server's) needs to read and write the lake's
    Delta tables: its jars (cached: named; else the package, resolved), its SQL extension and catalog, and
    deletion vectors on every new table."""
    jars = delta_jars()
    load = {"spark.jars": ",".join(jars)} if jars else {
        "spark.jars.packages": DELTA_PACKAGE,
        "spark.jars.ivy": ivy_cache(),
        "spark.jars.ivySettings": str(IVY_SETTINGS),
    }
    return {
        **load,
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        **{f"spark.databricks.delta.properties.defaults.{k[len('delta.'):]}": v for k, v in TABLE_PROPERTIES.items()},
        # the lake's tables have few files: replaying a log in the default 50 tasks is most of a small read
        "spark.databricks.delta.snapshotPartitions": os.environ.get("NIGHTSHIFT_SHUFFLE_PARTITIONS", "4"),
    }
