"""compact: rewrite the lake's Delta tables' files without changing their rows, outside the window.

The nights leave small files (each night's inserts are an append) and deletion vectors (each night's
deletes mark rows, no file rewritten); every later read pays for both. A table that needs it
(runtime.delta.compaction says why, from its log) gets Delta's OPTIMIZE when it has many small files
(bin-packed into files of about 128 MiB), and REORG TABLE ... APPLY (PURGE) when a file lost more than 5%
of its rows, or with `purge` any row (every file with deleted rows written again without them). Each is
a Delta commit that changes no row (dataChange false), and the lake's state record then names the new
version.

Safe to rerun and to crash: a commit the state record does not name yet is taken over by the next
compact once its log shows it changed no row; a commit that did change rows (a night's apply-base not
finished) is left alone and the table skipped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable

from pyspark.sql import SparkSession

from runtime import delta
from runtime.errors import BatchOrderError
from runtime.faults import checkpoint
from runtime.lake import Lake, LakeState
from spark_jobs.lake_tables import delta_path, latest_version

_CONF = {  # bin-packing: files under SMALL_FILE are packed into files of about TARGET_FILE
    "spark.databricks.delta.optimize.minFileSize": str(delta.SMALL_FILE),
    "spark.databricks.delta.optimize.maxFileSize": str(delta.TARGET_FILE),
}


@dataclass(frozen=True)
class Work:
    """One lake table's part of a compact: its recorded version, the version to start from (newer when an
    earlier compact's commit is not recorded yet) and what compacting it does (None: a commit that changed
    rows is not recorded, so the table is left alone)."""

    table: str
    recorded: int
    at: int
    need: delta.Compaction | None

    @property
    def todo(self) -> bool:
        """Something to do or to report: a rewrite, a version to record, or a table left alone."""
        return self.need is None or self.need.needed or self.at != self.recorded


def plan(lake: Lake, state: LakeState, purge: bool = False) -> list[Work]:
    """Every lake table's compaction, decided from the tables' logs on the driver (no Spark)."""
    out = []
    for name, recorded in sorted(state.versions.items()):
        path = lake.table_path(name)
        at = delta.version(path)
        unchanged = at == recorded or delta.data_unchanged(path, recorded, at)
        out.append(Work(name, recorded, at, delta.compaction(name, path, at, purge) if unchanged else None))
    return out


def compact(spark: SparkSession, lake: Lake, purge: bool = False, progress: Callable[[str], None] = lambda _: None) -> dict:
    """Compact every lake table that needs it; returns {table: {"reason", "from", "to"}} and the seconds."""
    t0 = time.perf_counter()
    state = lake.state()
    done: dict[str, dict] = {}
    for work in plan(lake, state, purge):
        name, recorded, at, need = work.table, work.recorded, work.at, work.need
        path = lake.table_path(name)
        if need is None:
            progress(f"compact: {name} skipped: its Delta table has commits after version {recorded} that the "
                     f"lake's state does not record (a night's apply-base not finished: run it, then compact)")
            continue
        reason = need.reason() if need.needed else f"the rewrite of an earlier compact (version {at}), recorded now"
        if need.needed:
            progress(f"compact: {name} at version {at}: {need.reason()}")
            for key, value in _CONF.items():
                spark.conf.set(key, value)
            try:
                table = delta_path(path)
                if need.pack:
                    spark.sql(f"OPTIMIZE {table}").collect()
                if need.drop:
                    spark.sql(f"REORG TABLE {table} APPLY (PURGE)").collect()
            finally:
                for key in _CONF:
                    spark.conf.unset(key)
            checkpoint(f"compact:after_table:{name}")
            at = latest_version(spark, path)
        if at != recorded:
            state = _record(lake, state, name, at)
            done[name] = {"reason": reason, "from": recorded, "to": at}
            progress(f"compact: {name} is version {at} (was {recorded})")
    return {"tables": done, "seconds": round(time.perf_counter() - t0, 3)}


def _record(lake: Lake, state, name: str, version: int):
    """The lake's state with `name` at `version`; refused when a night was applied meanwhile (its record
    holds the tables' versions: the compacted version is taken over by the next compact)."""
    now = lake.state()
    if now.applied != state.applied:
        raise BatchOrderError(f"compact: batch {now.last} was applied to the base while compacting {name}; "
                              f"run nightshift compact again after the night")
    new = replace(now, versions={**now.versions, name: version})
    lake.write_state(new)
    return new
