"""What a step read, measured: the rows each Parquet scan of the step's Spark SQL executions
read, by the folders it read, so that "propagate never reads the base" is a number in the manifest. Their bytes
are not measured (Spark's task input bytes leave out the column chunks its Parquet reader fetches); the passes this
process makes itself count theirs (count_local).

Spark's SQL metrics are the source, as the Spark UI's SQL tab shows them: every file scan reports
"number of output rows", the rows of the row groups it read (after partition and row-group pruning,
before any filter). They are taken from Spark's own event log, written for the step alone: an
EventLoggingListener registered when the step starts and stopped when it is measured, into a
temporary folder. The log holds every version of every execution's plan (adaptive execution replaces
a plan as it runs and may drop a stage that already ran, e.g. one whose join partner came out empty:
the UI's final plan then no longer shows a scan that did read rows) and every task's metric updates.
So

- only executions that start while the step runs are seen (earlier steps' are not), and none is
  dropped (the UI's own store keeps spark.sql.ui.retainedExecutions and forgets the oldest);
- only this thread's executions count: the step tags them through the job description (a thread-local
  Spark property that Spark copies into each execution's description) and other threads' lack the tag;
- each scan counts the rows its tasks read: a cached or persisted relation's scan runs once, when the
  cache is filled, however many executions read the cache (they show the same scan, one accumulator).

A scan's paths come from its plan's "Location" (InMemoryFileIndex(2 paths)[...]), which Spark cuts at
spark.sql.maxMetadataStringLength characters: the step raises it while it runs. Which source a path is
(base table, view copy, change set, ...) is the lake layout's to say (runtime.lake.Lake.source_of).
Not measured: what the driver reads outside Spark (pyarrow's checks of the change files, Parquet
footers for row counts), and scans that are not file scans (cached data). The rows a step sends to Spark
inside a query's plan (a local relation: a small table's rows read in this process, spark_jobs.changes.local_rows)
count as one read of their source each time they are sent (count_local), as a file scan of them would; so does
the delete check's pass over a base table when this process makes it (spark_jobs.changes._matched_here): the rows
of every file it read.

Over Spark Connect ([spark] remote) there is no SparkContext in this process to register a listener on:
the same events come from the server's own event log instead (_ServerLog), which the server started by
`nightshift spark-connect start` writes for this purpose, and the step's executions are picked by an
operation tag instead of the job description. A server that keeps no readable log: not measured (None).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from urllib.parse import urlparse

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from runtime.lake import Lake
from runtime.manifest import RowsRead, add_rows_read
from runtime.night import NightPlan
from spark_jobs.session import is_connect

ROWS = "number of output rows"
DESCRIPTION = "spark.job.description"
METADATA_LENGTH = "spark.sql.maxMetadataStringLength"
DRAIN_MS = 120_000  # how long to wait for Spark's listener bus to deliver the step's last events
KEEP_LOG_SECONDS = 24 * 3600  # a Spark Connect server's rolled-over event log files are removed after a day
_LOG_CONF = {  # the step's own event log: one plain file, no internal task metrics, no task starts
    "spark.eventLog.compress": "false",
    "spark.eventLog.rolling.enabled": "false",
    "spark.eventLog.overwrite": "true",
    "spark.eventLog.includeTaskMetricsAccumulators": "false",
    "spark.eventLog.logStageExecutorMetrics": "false",
    "spark.eventLog.excludedPatterns": "SparkListenerTaskStart,SparkListenerBlockUpdated",
}
_START = '"Event":"org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart"'
_END = '"Event":"org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd"'
_UPDATE = '"Event":"org.apache.spark.sql.execution.ui.SparkListenerSQLAdaptiveExecutionUpdate"'
_TASK_END = '"Event":"SparkListenerTaskEnd"'
_LOCATION = re.compile(r"^\w+\((\d+) paths?\)\[(.*)\]$", re.DOTALL)


@dataclass(frozen=True)
class ScanRows:
    """One Parquet scan of the step: the paths it read, as Spark lists them, and the rows its tasks read."""

    paths: tuple[str, ...]
    rows: int


_ACTIVE = threading.local()  # the ReadMeter measuring this thread, if any


def count_local(kind: str, name: str, rows: int, size: int | None) -> None:
    """`rows` of a source (RowsRead's kind and name), `size` bytes of its files, read in this process for the step
    (sent to Spark as a local relation, or a pass over a base table made here): one read of them for the step
    measuring this thread (nothing when none is)."""
    meter = getattr(_ACTIVE, "meter", None)
    if meter is not None:
        meter.local.append(RowsRead(kind, name, rows, 1 if rows else 0, size))


class ReadMeter:
    """with ReadMeter(spark, "propagate b7") as meter: ... meter.rows_read(lake, night) ...

    Measures the Spark scans of the calling thread from enter until the first scans()/rows_read(),
    which ends the measurement (module docstring); exit cleans up either way. A local session is measured
    by a listener of its own (_StepLog), a Spark Connect session by its server's event log (_ServerLog)."""

    def __init__(self, spark: SparkSession, label: str):
        self.spark = spark
        self.tag = f"{label} [reads {uuid.uuid4().hex[:12]}]"
        self._log: _StepLog | _ServerLog | None = None
        self._length: str | None = None
        self._measured = False
        self._scans: tuple[ScanRows, ...] | None = None
        self.local: list[RowsRead] = []  # count_local's reads
        self._outer: ReadMeter | None = None

    def __enter__(self) -> "ReadMeter":
        self._outer, _ACTIVE.meter = getattr(_ACTIVE, "meter", None), self
        self._log = _ServerLog(self.spark) if is_connect(self.spark) else _StepLog(self.spark, self.tag)
        self._length = self.spark.conf.get(METADATA_LENGTH)
        self.spark.conf.set(METADATA_LENGTH, str(2**31 - 1))
        self._log.start()
        return self

    def __exit__(self, *exc) -> None:
        _ACTIVE.meter = self._outer
        self.spark.conf.set(METADATA_LENGTH, self._length)
        self._log.close()

    def scans(self) -> tuple[ScanRows, ...] | None:
        """Every Parquet scan of this thread's executions since enter; None when the step's events could not
        be read in time (a listener bus that did not drain, a Spark Connect server that keeps no event log
        on this machine): then what the step read is not known."""
        if not self._measured:
            self._measured = True
            segments = self._log.finish()
            self._scans = None if segments is None else _read_log(segments, self._log.ours)
        return self._scans

    def rows_read(self, lake: Lake, night: NightPlan) -> tuple[RowsRead, ...] | None:
        """The rows read per source of the lake (runtime.lake.Lake.source_of), largest first; a scan of
        paths of several sources is one 'other' source named after them all."""
        scans = self.scans()
        if scans is None:
            return None
        per_scan = []
        for scan in scans:
            sources = sorted({lake.source_of(p, night) for p in scan.paths})
            kind, name = sources[0] if len(sources) == 1 else ("other", " + ".join(" ".join(s) for s in sources))
            # bytes: not known. Spark's task input bytes miss the column chunks its Parquet reader fetches (a read of
            # five columns of 2 MB counted the files' footers, 23 KB, the same as a read of one column)
            per_scan.append((RowsRead(kind, name, scan.rows, 1 if scan.rows else 0, None),))
        return add_rows_read([*per_scan, self.local]) or ()


Segment = tuple[Path, int]  # an event log file and the byte where the step's events may begin


class _StepLog:
    """A local session: an event log of the step's own, written by an EventLoggingListener registered on
    this process's SparkContext into a temporary folder; the step's executions carry its tag as their
    description (the job description, a thread-local property)."""

    def __init__(self, spark: SparkSession, tag: str):
        self.spark, self.tag = spark, tag
        self._folder = Path(tempfile.mkdtemp(prefix="nightshift-reads-"))
        self._listener = None
        self._description: str | None = None

    def start(self) -> None:
        sc = self.spark.sparkContext
        jvm, jsc = sc._jvm, sc._jsc.sc()
        conf = jsc.getConf()  # a copy: the settings below are this listener's only
        for key, value in _LOG_CONF.items():
            conf.set(key, value)
        self._listener = jvm.org.apache.spark.scheduler.EventLoggingListener(
            f"reads-{uuid.uuid4().hex}", jvm.scala.Option.apply(None), jvm.java.net.URI(self._folder.as_uri()),
            conf, jsc.hadoopConfiguration())
        self._listener.start()
        jsc.addSparkListener(self._listener)
        self._description = sc.getLocalProperty(DESCRIPTION)
        sc.setLocalProperty(DESCRIPTION, self.tag)

    def ours(self, execution_start: dict) -> bool:
        return execution_start.get("description") == self.tag

    def finish(self) -> list[Segment] | None:
        if self._listener is None:
            return None
        try:
            self.spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(DRAIN_MS)
        except Py4JJavaError:  # java.util.concurrent.TimeoutException: a bus that does not drain
            self._stop()
            return None
        self._stop()
        return [(next(p for p in self._folder.iterdir() if p.is_file()), 0)]

    def close(self) -> None:
        self.spark.sparkContext.setLocalProperty(DESCRIPTION, self._description)
        self._stop()
        shutil.rmtree(self._folder, ignore_errors=True)

    def _stop(self) -> None:
        if self._listener is not None:
            self.spark.sparkContext._jsc.sc().removeSparkListener(self._listener)
            self._listener.stop()  # flushes and closes the log file
            self._listener = None


class _ServerLog:
    """A Spark Connect session: the server's own event log, which `nightshift spark-connect start` has it
    write uncompressed (server_log_conf), read where the server writes it (the server runs on this
    machine). The step's operations carry a tag (Spark Connect's thread-local operation tags, which the
    server copies into every execution's job tags); the log is read from where it ended when the step
    started. The server writes it asynchronously: after the step, a tagged marker command runs, and the
    events are complete once the marker's execution has ended in the log (the server logs events in the
    order they happen). A server with no such log (another machine's, compressed, or none): not measured."""

    def __init__(self, spark: SparkSession):
        self.spark = spark
        self.tag = f"nightshift-reads-{uuid.uuid4().hex[:12]}"  # Spark Connect tags: no commas
        self._files: Callable[[], list[Path]] | None = None
        self._start: Segment | None = None
        self._tagged = False

    def start(self) -> None:
        self._files = _server_log_files(self.spark)
        if self._files is not None:
            files = self._files()
            self._start = (files[-1], files[-1].stat().st_size) if files else None
            _forget_old(files[:-1])
        self.spark.addTag(self.tag)
        self._tagged = True

    def ours(self, execution_start: dict) -> bool:
        return any(t.endswith(f"_Tag_{self.tag}") for t in execution_start.get("jobTags") or ())

    def finish(self) -> list[Segment] | None:
        self.close()
        if self._files is None:
            return None
        marker = f"{self.tag}-end"
        self.spark.addTag(marker)
        try:
            self.spark.sql(f"SET {METADATA_LENGTH}")  # a command: an execution in the log, and no Spark job
        finally:
            self.spark.removeTag(marker)
        deadline = time.monotonic() + DRAIN_MS / 1000
        while True:
            segments = self._segments()
            if _has_ended(segments, marker):
                return segments
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)

    def close(self) -> None:
        if self._tagged:
            self.spark.removeTag(self.tag)
            self._tagged = False

    def _segments(self) -> list[Segment]:
        files = self._files()
        if self._start is None:
            return [(f, 0) for f in files]
        first, offset = self._start
        return [(first, offset)] + [(f, 0) for f in files if _log_number(f) > _log_number(first)]


def server_log_conf(folder: Path) -> dict[str, str]:
    """The event log a Spark Connect server started for nightshift writes, for ReadMeter: plain files in
    `folder` (rolled over every 16 MB; ReadMeter removes rolled files after KEEP_LOG_SECONDS), in the format of
    the step's own log (_LOG_CONF)."""
    return {**_LOG_CONF, "spark.eventLog.enabled": "true", "spark.eventLog.dir": folder.resolve().as_uri(),
            "spark.eventLog.rolling.enabled": "true", "spark.eventLog.rolling.maxFileSize": "16m",
            "spark.eventLog.overwrite": "false"}


def _server_log_files(spark: SparkSession) -> Callable[[], list[Path]] | None:
    """A function listing the server's event log files in order; None when the server writes no plain event
    log that this machine can read."""
    conf = {k: spark.conf.get(k, None) for k in ("spark.eventLog.enabled", "spark.eventLog.compress",
                                                 "spark.eventLog.dir", "spark.app.id")}
    # Spark 4 compresses event logs unless told not to
    if conf["spark.eventLog.enabled"] != "true" or conf["spark.eventLog.compress"] != "false" or not conf["spark.app.id"]:
        return None
    where = urlparse(conf["spark.eventLog.dir"] or "/tmp/spark-events")
    if where.scheme not in ("", "file"):
        return None
    folder, app = Path(where.path), conf["spark.app.id"]
    rolling, single = folder / f"eventlog_v2_{app}", folder / f"{app}.inprogress"
    if not (rolling.is_dir() or single.is_file()):
        return None  # the server's folder is not on this machine

    def files() -> list[Path]:
        if rolling.is_dir():
            return sorted(rolling.glob(f"events_*_{app}"), key=_log_number)
        return [single] if single.is_file() else []

    return files


def _forget_old(rolled: list[Path]) -> None:
    """The server's log grows with every step it runs: the files it rolled over (closed for good) go once they
    are older than KEEP_LOG_SECONDS, longer than any step that may still read one."""
    for path in rolled:
        try:
            if time.time() - path.stat().st_mtime > KEEP_LOG_SECONDS:
                path.unlink()
        except OSError:  # another step removed it first
            pass


def _log_number(path: Path) -> int:
    """The position of a rolled event log file (events_<N>_<app id>); 0 for a log that does not roll."""
    parts = path.name.split("_")
    return int(parts[1]) if parts[0] == "events" and parts[1].isdigit() else 0


def _lines(segments: list[Segment]):
    """The complete lines of the segments, in order: a segment's first line is skipped when its offset falls
    inside it (an event written before the step), and a last line still being written is left out."""
    for path, offset in segments:
        with open(path, "rb") as f:
            if offset:
                f.seek(offset - 1)
                if f.read(1) != b"\n":
                    f.readline()
            for line in f:
                if line.endswith(b"\n"):
                    yield line.decode("utf-8", "replace")


def _has_ended(segments: list[Segment], marker: str) -> bool:
    """The log holds the end of the execution tagged `marker`."""
    execution = None
    for line in _lines(segments):
        head = line[:120]
        if execution is None and _START in head and marker in line:
            event = json.loads(line)
            if any(t.endswith(f"_Tag_{marker}") for t in event.get("jobTags") or ()):
                execution = event["executionId"]
        elif execution is not None and _END in head and json.loads(line).get("executionId") == execution:
            return True
    return False


def _read_log(segments: list[Segment], ours: Callable[[dict], bool]) -> tuple[ScanRows, ...]:
    """The Parquet scans of the executions `ours` picks (by their start event) in an event log, with the
    rows their tasks read. Events come in order: an execution's plans before its tasks."""
    mine: set[int] = set()  # execution ids
    paths: dict[int, tuple[str, ...]] = {}  # a scan's "number of output rows" accumulator -> its paths
    rows: dict[int, int] = {}
    for line in _lines(segments):
        head = line[:120]
        if _TASK_END in head:
            event = json.loads(line)
            for acc in event.get("Task Info", {}).get("Accumulables", ()):
                if acc.get("ID") in paths and acc.get("Update") is not None:
                    rows[acc["ID"]] += int(str(acc["Update"]))
        elif _START in head or _UPDATE in head:
            event = json.loads(line)
            if _START in head and ours(event):
                mine.add(event["executionId"])
            if event["executionId"] in mine:
                for accumulator, where in _file_scans(event["sparkPlanInfo"]):
                    paths.setdefault(accumulator, where)
                    rows.setdefault(accumulator, 0)
    return tuple(ScanRows(paths[a], rows[a]) for a in paths)


def _file_scans(plan: dict):
    """(accumulator of "number of output rows", paths) of every file scan in a SparkPlanInfo (as JSON),
    including the plans of cached relations (children of their in-memory scans)."""
    location = (plan.get("metadata") or {}).get("Location")
    if location is not None:
        for metric in plan.get("metrics", ()):
            if metric.get("name") == ROWS:
                yield metric["accumulatorId"], _paths(location)
    for child in plan.get("children", ()):
        yield from _file_scans(child)


def _paths(location: str) -> tuple[str, ...]:
    """The root paths a scan's Location lists ("InMemoryFileIndex(2 paths)[p1, p2]"); the whole text when
    it does not parse (a path holding ", ", or a list Spark cut short)."""
    m = _LOCATION.match(location)
    if m is None:
        return (location,)
    paths = m.group(2).split(", ")
    return tuple(paths) if len(paths) == int(m.group(1)) else (m.group(2),)
