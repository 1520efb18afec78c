"""propagate_k (paper 001, 2.1 and 4.1): change batch -> one summary-delta per summary table, as Parquet.

Reads the change batch and the dimension tables; for MIN/MAX groups that lost rows also the
affected groups of the base fact table (so refresh, inside the window, never scans base data).
Never reads the summary tables. Idempotent: reruns overwrite the same files, and the manifest is
written last.
"""

from __future__ import annotations

import time
from typing import Callable

from pyspark.sql import SparkSession

from lattice import emit
from lattice.ir import Plan, View
from nightshift.faults import checkpoint
from nightshift.lake import Lake, LakeState
from spark_jobs.changes import BatchInfo, load_batch


def propagate(
    spark: SparkSession,
    plan: Plan,
    lake: Lake,
    batch: str,
    state: LakeState,
    progress: Callable[[str], None] = lambda _: None,
) -> dict:
    t0 = time.perf_counter()
    progress(f"propagate {batch}: reading and checking the change batch")
    info = load_batch(spark, lake, plan, batch, state)
    progress(f"propagate {batch}: {info.rows} change rows ({_describe(info)}) checked in {time.perf_counter() - t0:.1f}s")
    views = {}
    for i, view in enumerate(plan.views, 1):
        t1 = time.perf_counter()
        rows = _summary_delta(spark, view, info, lake.delta_dir(batch, view.name))
        views[view.name] = {"rows": rows, "seconds": round(time.perf_counter() - t1, 3)}
        progress(f"propagate {batch}: [{i}/{len(plan.views)}] sd_{view.name}: {rows} rows in {views[view.name]['seconds']:.1f}s")
        checkpoint(f"propagate:after_view:{view.name}")
    manifest = {
        "batch": batch,
        "plan": plan.fingerprint,
        "base_state": state.last,
        "changed": sorted(info.changed),
        "inserted": info.inserted,
        "deleted": info.deleted,
        "insert_only": not info.has_deletes,
        "views": views,
        "seconds": round(time.perf_counter() - t0, 3),
    }
    lake.write_manifest(batch, manifest)
    return manifest


def _summary_delta(spark: SparkSession, view: View, info: BatchInfo, out) -> int:
    sd = spark.sql(emit.to_dialect(emit.summary_delta(view, info.changed), "spark"))
    if view.has_min_max and info.has_deletes:
        sd = sd.cache()
        sd.createOrReplaceTempView(emit.rel("sd", view.name))
        spark.sql(emit.to_dialect(emit.lost_groups(view), "spark")).cache().createOrReplaceTempView(
            emit.rel("lost", view.name)
        )
        for arg in emit.minmax_arguments(view):
            exact = spark.sql(emit.to_dialect(emit.minmax_recompute(view, arg, info.changed), "spark"))
            exact.createOrReplaceTempView(emit.rel("exact", f"{view.name}_{arg.index}"))
        sd = spark.sql(emit.to_dialect(emit.with_exact_minmax(view), "spark"))
    sd = sd.cache()
    rows = sd.count()
    sd.coalesce(1).write.mode("overwrite").parquet(str(out))
    sd.unpersist()
    return rows


def _describe(info: BatchInfo) -> str:
    parts = [f"{t} +{info.inserted[t]}/-{info.deleted[t]}" for t in sorted(info.changed)]
    return ", ".join(parts) or "no changes"
