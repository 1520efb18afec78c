"""What a step read, measured (issue 19): the rows each Parquet scan of the step's Spark SQL executions
read, by the folders it read, so that "propagate never reads the base" is a number in the manifest.

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
footers for row counts), and scans that are not file scans (cached data, local relations).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from runtime.lake import Lake
from runtime.manifest import RowsRead, add_rows_read
from runtime.night import NightPlan

ROWS = "number of output rows"
DESCRIPTION = "spark.job.description"
METADATA_LENGTH = "spark.sql.maxMetadataStringLength"
DRAIN_MS = 120_000  # how long to wait for Spark's listener bus to deliver the step's last events
_LOG_CONF = {  # the step's own event log: one plain file, no internal task metrics, no task starts
    "spark.eventLog.compress": "false",
    "spark.eventLog.rolling.enabled": "false",
    "spark.eventLog.overwrite": "true",
    "spark.eventLog.includeTaskMetricsAccumulators": "false",
    "spark.eventLog.logStageExecutorMetrics": "false",
    "spark.eventLog.excludedPatterns": "SparkListenerTaskStart,SparkListenerBlockUpdated",
}
_START = '"Event":"org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart"'
_UPDATE = '"Event":"org.apache.spark.sql.execution.ui.SparkListenerSQLAdaptiveExecutionUpdate"'
_TASK_END = '"Event":"SparkListenerTaskEnd"'
_LOCATION = re.compile(r"^\w+\((\d+) paths?\)\[(.*)\]$", re.DOTALL)


@dataclass(frozen=True)
class ScanRows:
    """One Parquet scan of the step: the paths it read, as Spark lists them, and the rows its tasks read."""

    paths: tuple[str, ...]
    rows: int


class ReadMeter:
    """with ReadMeter(spark, "propagate b7") as meter: ... meter.rows_read(lake, night) ...

    Measures the Spark scans of the calling thread from enter until the first scans()/rows_read(),
    which ends the measurement (module docstring); exit cleans up either way."""

    def __init__(self, spark: SparkSession, label: str):
        self.spark = spark
        self.tag = f"{label} [reads {uuid.uuid4().hex[:12]}]"
        self._folder: Path | None = None
        self._listener = None
        self._saved: tuple[str | None, str | None] = (None, None)
        self._scans: tuple[ScanRows, ...] | None = None

    def __enter__(self) -> "ReadMeter":
        sc = self.spark.sparkContext
        jvm, jsc = sc._jvm, sc._jsc.sc()
        conf = jsc.getConf()  # a copy: the settings below are this listener's only
        for key, value in _LOG_CONF.items():
            conf.set(key, value)
        self._folder = Path(tempfile.mkdtemp(prefix="nightshift-reads-"))
        self._listener = jvm.org.apache.spark.scheduler.EventLoggingListener(
            f"reads-{uuid.uuid4().hex}", jvm.scala.Option.apply(None), jvm.java.net.URI(self._folder.as_uri()),
            conf, jsc.hadoopConfiguration())
        self._listener.start()
        jsc.addSparkListener(self._listener)
        self._saved = (sc.getLocalProperty(DESCRIPTION), self.spark.conf.get(METADATA_LENGTH))
        sc.setLocalProperty(DESCRIPTION, self.tag)
        self.spark.conf.set(METADATA_LENGTH, str(2**31 - 1))
        return self

    def __exit__(self, *exc) -> None:
        description, length = self._saved
        self.spark.sparkContext.setLocalProperty(DESCRIPTION, description)
        self.spark.conf.set(METADATA_LENGTH, length)
        self._stop()
        shutil.rmtree(self._folder, ignore_errors=True)

    def _stop(self) -> None:
        if self._listener is not None:
            self.spark.sparkContext._jsc.sc().removeSparkListener(self._listener)
            self._listener.stop()  # flushes and closes the log file
            self._listener = None

    def scans(self) -> tuple[ScanRows, ...] | None:
        """Every Parquet scan of this thread's executions since enter; None when Spark's listener bus did
        not deliver the step's events in time (then what the step read is not known)."""
        if self._listener is not None:
            try:
                self.spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(DRAIN_MS)
            except Py4JJavaError:  # java.util.concurrent.TimeoutException: a bus that does not drain
                self._stop()
                return None
            self._stop()
            self._scans = _read_log(next(p for p in self._folder.iterdir() if p.is_file()), self.tag)
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
            per_scan.append((RowsRead(kind, name, scan.rows, 1 if scan.rows else 0),))
        return add_rows_read(per_scan) or ()


def _read_log(log: Path, tag: str) -> tuple[ScanRows, ...]:
    """The Parquet scans of the executions described `tag` in an event log, with the rows their tasks
    read. Events come in order: an execution's plans before its tasks."""
    ours: set[int] = set()  # execution ids
    paths: dict[int, tuple[str, ...]] = {}  # a scan's "number of output rows" accumulator -> its paths
    rows: dict[int, int] = {}
    with open(log, encoding="utf-8") as f:
        for line in f:
            head = line[:120]
            if _TASK_END in head:
                event = json.loads(line)
                for acc in event.get("Task Info", {}).get("Accumulables", ()):
                    if acc.get("ID") in paths and acc.get("Update") is not None:
                        rows[acc["ID"]] += int(str(acc["Update"]))
            elif _START in head or _UPDATE in head:
                event = json.loads(line)
                if _START in head and event.get("description") == tag:
                    ours.add(event["executionId"])
                if event["executionId"] in ours:
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
