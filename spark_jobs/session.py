"""One SparkSession per process, configured for small local jobs and for clusters (spark://, YARN, Kubernetes) alike;
or, with a Spark Connect URL ([spark] remote), a session of a long-lived Spark Connect server: no JVM starts here."""

from __future__ import annotations

import fcntl
import os
import re
import socket
import sys
import tempfile
import threading
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

import pyarrow as pa
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (BooleanType, ByteType, DateType, DecimalType, DoubleType, FloatType, IntegerType,
                               LongType, ShortType, StringType, StructField)

from runtime.errors import ConfigError
from runtime.lake import Lake
from runtime.options import CONNECT_PORT, SPARK_MASTER
from spark_jobs.class_archive import archive_options
from spark_jobs.packages import DELTA_PACKAGE, delta_conf, delta_jars

QUIET_LOG4J = Path(__file__).resolve().parent / "log4j2.properties"
# what the JVM prints on its own stderr, outside any logging configuration: the launcher always adds the
# vector module, and PySpark's gateway announces the shell's default log level (setLogLevel follows)
JVM_NOISE = re.compile(r"^(WARNING: Using incubator modules|Setting default log level to |To adjust logging level use sc\.setLogLevel"
                        # Spark's package resolver (Ivy) reports every package it found; a failure still shows
                        r"|:: (loading settings|resolving dependencies|resolution report|retrieving) ::|Ivy Default Cache set to"
                        r"|The jars for the packages stored in|\S+#\S+ added as a dependency|downloading https?://"
                        r"|\t(confs: |found |:: evicted modules:|\S+#\S+;\S+ by \[|-{10}|\||\d+ artifacts copied|\[SUCCESSFUL \]))")

_DEFAULTS = {
    "spark.sql.shuffle.partitions": os.environ.get("NIGHTSHIFT_SHUFFLE_PARTITIONS", "4"),
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.sources.partitionOverwriteMode": "static",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "true",
    "spark.driver.memory": os.environ.get("NIGHTSHIFT_DRIVER_MEMORY", "4g"),
    "spark.sql.parquet.compression.codec": "snappy",
    "spark.sql.legacy.parquet.nanosAsLong": "false",
    # rows this process sends Spark (spark.createDataFrame: a batch's changes, a small copy's changed groups, a
    # table's deleted rows) of more than 256 KB become an RDD of Arrow batches, not a LocalRelation: the optimizer's
    # rules walk a LocalRelation's rows every time they touch its plan (about a second of planning a night with
    # 50,000 changes at the default 48 MB; bench/100M/NO_SCANS_DELTA.md)
    "spark.sql.execution.arrow.localRelationThreshold": str(256 << 10),
    **delta_conf(),
}
# The settings that decide what a query returns, not how fast it runs: a Spark Connect session sets them itself,
# whatever server it reaches (the server's own settings decide the rest)
_SEMANTICS = ("spark.sql.session.timeZone", "spark.sql.sources.partitionOverwriteMode", "spark.sql.legacy.parquet.nanosAsLong")
# A Spark Connect session keeps the plans it resolved, a folder's file listing among them, for as long as it lives:
# the next command taking it over would read the files a folder held when the last command read it (a rewritten
# folder: files that no longer exist, or stale rows). A session of nightshift's resolves what it reads anew.
_PLAN_CACHE = "spark.connect.session.planCache.enabled"
_CONNECTED: dict[str, SparkSession] = {}  # this process's Spark Connect session, by URL
_HELD: list = []  # the session slots this process holds (their locks end with it)
_SLOTS = 32
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
# A command's local Spark over a small lake lives for seconds and spends most of its CPU compiling Spark's own code
# with the JIT's optimizing compiler (C2); the quick compiler (C1) alone compiles far less and soon enough
# (bench/JVM_START.md: a 3,000-row night and the demo's 1M-row night each in about 0.76x the time). C1's default code
# cache (48 MB) fills within one night with Delta Lake loaded, and the JVM would stop compiling: 240 MB, as the
# full JIT has. Over a bigger lake a command may scan long enough for C2's faster code to pay for itself.
QUICK_JIT = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
# the lake's files (runtime.lake.Lake.footprint): the demo's 1M-row lake holds about 20 MB; the retail example's
# 10M-row first batch alone 56 MB, whose initial load took 1.6x the time under C1
QUICK_JIT_BYTES = 32 << 20


def get_spark(master: str | None = SPARK_MASTER, app: str = "nightshift", remote: str | None = None,
              lake: Lake | None = None) -> SparkSession:
    """Return the process's SparkSession (created on first use).

    master: the project's [spark] master (local[N], spark://host:port, yarn, k8s://...), or None to keep
    the launcher's: spark-submit's --master, which the Airflow DAG takes from the `spark_default`
    connection. Client mode either way: this process is the driver. Under spark-submit the settings it
    was given (--conf, the connection's extras, spark-defaults.conf) win over nightshift's defaults;
    NIGHTSHIFT_SPARK_CONF ("key=value;key=value") wins over both.
    remote: a Spark Connect URL (sc://host:port, the project's [spark] remote): the session is one of that
    long-lived server's (connect_session), no JVM starts in this process, and master is not used.
    lake: the lake the session works on, when known (quick_jit: over a small one a local JVM compiles with C1
    alone).
    """
    if remote:
        return connect_session(remote)
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
    for key, value in _user_pairs():
        builder = builder.config(key, value)  # e.g. the test suite's small-data settings
    if os.environ.get("NIGHTSHIFT_SPARK_UI", "0") != "1" and "spark.ui.enabled" not in preset:
        builder = builder.config("spark.ui.enabled", "false")
    verbose = os.environ.get("NIGHTSHIFT_VERBOSE") == "1"
    if _starts_jvm() and DRIVER_JAVA_OPTIONS not in _user_conf():
        options = driver_java_options(quick=quick_jit(master, lake))
        if options:
            builder = builder.config(DRIVER_JAVA_OPTIONS, options)
    if not verbose:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no "hostname resolves to a loopback address" WARN
    with _filtered_stderr(not verbose and not os.environ.get("PYSPARK_GATEWAY_PORT")):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("NIGHTSHIFT_SPARK_LOG_LEVEL", "INFO" if verbose else "ERROR"))
    return spark


def connect_session(url: str) -> SparkSession:
    """A session of the Spark Connect server at `url` (the same one for the rest of the process).

    The server is shared by every command and task that connects, and each process has a session of its own:
    its temporary views and the settings it changes are its own. The session outlives the process, for the next
    command on this machine: a server compiles the code of a query once per session, so a command that took
    over the last one's session finds a night's queries already compiled (seconds of a small night). Each
    process claims one of the machine's slots for the server (_claim_slot: a lock held while it runs; a
    second command at the same time takes the next slot, so no two processes share a session), and the
    session starts clean: its settings reset to the server's, and every relation a step reads is registered
    by that step. What get_spark gives a local session comes from two places: the server was started with
    nightshift's defaults (server_conf: `nightshift spark-connect start`), and the session sets the settings
    that decide results (_SEMANTICS) and NIGHTSHIFT_SPARK_CONF's pairs itself. A pair that cannot change per
    session (a static or core setting: memory, the UI, packages) must already hold on the server, else the
    step is refused by name. A URL that names its own session_id keeps it; the server keeps running.
    """
    spark = _CONNECTED.get(url)
    if spark is not None and not spark.is_stopped:
        return spark
    host, port = connect_address(url)
    refused = f"the Spark Connect server at {url} does not answer"
    advice = ("start it with `nightshift spark-connect start`, or unset [spark] remote in nightshift.toml and "
              "NIGHTSHIFT_SPARK_REMOTE to run Spark in this process")
    if not answers(host, port):  # before the client's own retries, which wait minutes for a server that is down
        raise ConfigError(f"{refused}; {advice}")
    slot = None if "session_id=" in url else _claim_slot(host, port)
    try:
        spark = _open(url, slot)
        for key in _SEMANTICS:
            spark.conf.set(key, _DEFAULTS[key])
        spark.conf.set(_PLAN_CACHE, "false")
    except PySparkException as e:
        raise ConfigError(f"{refused} ({_first_line(e)}); {advice}") from None
    if "NIGHTSHIFT_SHUFFLE_PARTITIONS" in os.environ:
        spark.conf.set("spark.sql.shuffle.partitions", os.environ["NIGHTSHIFT_SHUFFLE_PARTITIONS"])
    for pair in filter(None, os.environ.get("NIGHTSHIFT_SPARK_CONF", "").split(";")):
        key, _, value = (x.strip() for x in pair.partition("="))
        _set_per_session(spark, url, key, value)
    _CONNECTED[url] = spark
    return spark


def _open(url: str, slot: Path | None) -> SparkSession:
    """The session of `slot` (its id is in the slot's file), with its settings reset to the server's; a session
    the server has closed or expired (idle too long) gives way to a new one, whose id the slot keeps. No slot:
    the URL's own session."""
    if slot is None:
        return SparkSession.builder.remote(url).getOrCreate()
    known = slot.read_text().strip()
    try:
        return _reset(url, known if _is_uuid(known) else _new_id(slot))
    except PySparkException as e:
        if "INVALID_HANDLE" not in str(e):  # not a closed session: the server's answer stands
            raise
    return _reset(url, _new_id(slot))


def _reset(url: str, session_id: str) -> SparkSession:
    base, _, params = url.partition(";")
    spark = SparkSession.builder.remote(f"{base.rstrip('/')}/;{params + ';' if params else ''}"
                                        f"session_id={session_id}").create()
    try:  # a closed session says so here
        spark.conf.get("spark.sql.session.timeZone")
    except PySparkException:
        spark.client.close()  # now, and only once: closing it again while Python exits can wait for ever
        spark.client.close = lambda: None
        raise
    spark.sql("RESET")  # what the last command set in it goes
    return spark


def _new_id(slot: Path) -> str:
    session_id = str(uuid.uuid4())
    slot.write_text(session_id)
    return session_id


def _claim_slot(host: str, port: int) -> Path | None:
    """One of this machine's session slots for the server at host:port, locked for the rest of the process
    (the lock goes when the process ends, however it ends); None when every slot is taken (then the process
    gets a session of its own, which nothing reuses)."""
    folder = Path(tempfile.gettempdir()) / f"nightshift-spark-connect-{os.getuid()}" / f"{host}-{port}"
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(_SLOTS):
        path = folder / f"session-{n}"
        handle = open(path, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        _HELD.append(handle)
        return path
    return None


def _is_uuid(text: str) -> bool:
    try:
        return str(uuid.UUID(text)) == text
    except ValueError:
        return False


def connect_address(url: str) -> tuple[str, int]:
    """(host, port) of a Spark Connect URL, sc://host[:port][/;param=value...] (port 15002 by default)."""
    m = re.match(r"^sc://(\[[^\]]+\]|[^:/;]+)(?::(\d+))?/?(;.*)?$", url)
    if m is None:
        raise ConfigError(f"[spark] remote {url!r} is not a Spark Connect URL (sc://host:port, e.g. sc://127.0.0.1:15002)")
    return m.group(1).strip("[]"), int(m.group(2) or CONNECT_PORT)


def answers(host: str, port: int, timeout: float = 2.0) -> bool:
    """Something accepts connections at host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _set_per_session(spark: SparkSession, url: str, key: str, value: str) -> None:
    try:
        spark.conf.set(key, value)
    except PySparkException:
        held = spark.conf.get(key, None)
        if held != value:
            raise ConfigError(
                f"NIGHTSHIFT_SPARK_CONF sets {key}={value}, which a Spark Connect session cannot change (the server at "
                f"{url} has {key}={held}); start the server with it: `nightshift spark-connect start` passes "
                f"NIGHTSHIFT_SPARK_CONF on to the server") from None


def _first_line(e: Exception) -> str:
    return next((line.strip() for line in str(e).splitlines() if line.strip()), type(e).__name__)


def is_connect(spark: SparkSession) -> bool:
    """A Spark Connect session (no SparkContext, no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def query(spark: SparkSession, text: str, relations: dict[str, DataFrame] | None = None) -> DataFrame:
    """A query nightshift wrote (a SELECT, never a command) as a DataFrame, naming the session's temporary views and
    `relations` by their keys. Over Spark Connect this sends nothing: the query, and `relations` with it, go with the
    request that uses the DataFrame (a write, a stream, a collect, a temporary view of it), where spark.sql is a
    request of its own (the server checks whether the text is a command) and so is each temporary view. The server
    names `relations` while it analyzes the query and drops those names after: they must name no temporary view
    of the session. In a local session (no requests to save): `relations` are temporary views until spark.sql
    has analyzed the query."""
    relations = relations or {}
    if is_connect(spark):
        from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame
        from pyspark.sql.connect.plan import SQL, SubqueryAlias

        return ConnectDataFrame(SQL(text, views=[SubqueryAlias(df._plan, name) for name, df in relations.items()]),
                                spark)
    for name, df in relations.items():
        df.createOrReplaceTempView(name)
    try:
        return spark.sql(text)
    finally:
        for name in relations:
            spark.catalog.dropTempView(name)


# the column types whose values this process writes from Arrow exactly as Spark's writer would write them, for the
# warehouse and Spark to read back alike (a timestamp's time zone, nested types: Spark's writer)
PLAIN_TYPES = (BooleanType, ByteType, ShortType, IntegerType, LongType, FloatType, DoubleType, DecimalType, StringType,
               DateType)


def plain(fields: Iterable[StructField]) -> bool:
    """Whether every column of `fields` (a schema's fields) is of a type in PLAIN_TYPES."""
    return all(isinstance(f.dataType, PLAIN_TYPES) for f in fields)


def arrow_batches(df: DataFrame) -> Iterator[pa.RecordBatch]:
    """The rows of `df` as Arrow record batches in this process: over Spark Connect streamed as the server sends
    them (its execute stream, which PySpark's public API only offers whole, toArrow, or as Python rows), so a
    reader holds one batch at a time; in a local session collected whole (toArrow)."""
    spark = df.sparkSession
    if not is_connect(spark):
        yield from df.toArrow().to_batches()
        return
    client = spark.client
    for item in client.to_table_as_iterator(df._plan.to_proto(client), df._plan.observations):
        if isinstance(item, pa.Table):
            yield from item.to_batches()


def server_conf() -> dict[str, str]:
    """The settings a Spark Connect server started for nightshift runs with: what get_spark gives a local
    session (nightshift's defaults, the quiet logging, no web UI unless NIGHTSHIFT_SPARK_UI=1), then
    NIGHTSHIFT_SPARK_CONF's pairs, which win."""
    conf = dict(_DEFAULTS)
    # the compiled code of a night's queries (a few hundred classes) stays for the next night's commands, which
    # take over the session it was compiled in (connect_session); Spark's default keeps 100
    conf["spark.sql.codegen.cache.maxEntries"] = "1000"
    conf[_PLAN_CACHE] = "false"
    conf["spark.ui.enabled"] = "true" if os.environ.get("NIGHTSHIFT_SPARK_UI", "0") == "1" else "false"
    options = driver_java_options(write_archive=False)  # a server lives for days: it maps an archive, never writes one
    if options:
        conf[DRIVER_JAVA_OPTIONS] = options
    conf.update(_user_pairs())
    return conf


def driver_java_options(write_archive: bool = True, quick: bool = False) -> str:
    """The Java options of a driver JVM that nightshift starts on this machine (a command's local Spark, a DAG
    task's spark-submit in client mode, a Spark Connect server): the quiet log4j2 configuration unless
    NIGHTSHIFT_VERBOSE=1, the class-data archive (class_archive: mapped, or written at the JVM's exit when
    `write_archive` and there is none yet), and when `quick` (quick_jit) the quick compiler alone (QUICK_JIT).
    "" when there is nothing to add."""
    options = [] if os.environ.get("NIGHTSHIFT_VERBOSE") == "1" else [f"-Dlog4j2.configurationFile={QUIET_LOG4J.as_uri()}"]
    return " ".join(filter(None, [*options, archive_options(write_archive), QUICK_JIT if quick else ""]))


def quick_jit(master: str | None, lake: Lake | None) -> bool:
    """Whether a driver JVM started for `master` over `lake` compiles with C1 alone (QUICK_JIT): a local master
    (the JVM runs the night's work too) and a lake whose files (Lake.footprint) are at most QUICK_JIT_BYTES.
    An unknown lake, a bigger one and a cluster's driver keep the JVM's defaults (the lake is not looked at then)."""
    return (master or "").startswith("local") and lake is not None and lake.footprint(QUICK_JIT_BYTES) <= QUICK_JIT_BYTES


def _user_pairs() -> list[tuple[str, str]]:
    """NIGHTSHIFT_SPARK_CONF's pairs; packages it names are loaded besides Delta Lake, which the lake needs."""
    out = []
    for pair in filter(None, os.environ.get("NIGHTSHIFT_SPARK_CONF", "").split(";")):
        key, _, value = (x.strip() for x in pair.partition("="))
        if key == "spark.jars.packages" and value and DELTA_PACKAGE.rsplit(":", 1)[0] not in value:
            value = f"{value},{DELTA_PACKAGE}"  # (empty: no packages resolved, the jars come from spark.jars)
        if key == "spark.jars" and value and "delta-spark" not in value and delta_jars():
            value = ",".join([value, *delta_jars()])  # the user's jars besides the cached Delta Lake ones
        out.append((key, value))
    return out


@contextmanager
def _filtered_stderr(active: bool):
    """While the JVM starts, its stderr (inherited file descriptor 2) goes through a pipe that drops the
    JVM's own start-up notice (JVM_NOISE) and passes every other line on, for the JVM's whole life;
    this process's stderr is restored as soon as the JVM is up."""
    if not active:
        yield
        return
    try:
        sys.stderr.flush()
        real = os.dup(2)
        read, write = os.pipe()
    except OSError:  # no usable stderr descriptor (embedded interpreters): leave it alone
        yield
        return

    def forward() -> None:
        with os.fdopen(read, "rb", buffering=0) as pipe, os.fdopen(os.dup(real), "wb", buffering=0) as out:
            for line in iter(pipe.readline, b""):
                if not JVM_NOISE.match(line.decode("utf-8", "replace")):
                    out.write(line)

    threading.Thread(target=forward, name="nightshift-jvm-stderr", daemon=True).start()
    os.dup2(write, 2)
    os.close(write)
    try:
        yield
    finally:
        os.dup2(real, 2)
        os.close(real)


def _user_conf() -> set[str]:
    """The keys NIGHTSHIFT_SPARK_CONF sets (they win over nightshift's own settings)."""
    return {p.partition("=")[0].strip() for p in os.environ.get("NIGHTSHIFT_SPARK_CONF", "").split(";") if p}


def _starts_jvm() -> bool:
    """This session's start starts the JVM (not under spark-submit, whose JVM is up; no earlier session in this
    process, whose JVM stays)."""
    from pyspark import SparkContext

    return not os.environ.get("PYSPARK_GATEWAY_PORT") and SparkContext._gateway is None


def _launcher_conf() -> set[str]:
    """The keys spark-submit already set, when this process runs under it (its JVM is up and holds them
    as system properties; PYSPARK_GATEWAY_PORT says so). Outside spark-submit nothing is preset, and the
    JVM is not started here: spark.driver.memory must still reach its command line."""
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return set()
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    return {k for k, _ in SparkConf().getAll()}
