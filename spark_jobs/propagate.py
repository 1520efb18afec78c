"""propagate_k (paper 001, 2.1 and 4.1): change batch -> one summary-delta per summary table, as Parquet.

Reads the change batch and the dimension tables; for MIN/MAX groups that lost rows also the
affected groups of the base fact table (so refresh, inside the window, never scans base data).
Never reads the summary tables. Idempotent: reruns overwrite the same files, and the manifest is
written last.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lattice import emit
from lattice.ir import Plan, View
from nightshift.faults import checkpoint
from nightshift.lake import Lake, LakeState, parquet_rows
from spark_jobs.changes import BatchInfo, load_batch


PART = "part"


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
    frames = [(i, view, _summary_delta(spark, view, info)) for i, view in enumerate(plan.views)]
    out = lake.delta_root(batch)
    t1 = time.perf_counter()
    _write_together(frames, out)
    progress(f"propagate {batch}: {len(frames)} summary-deltas computed and written in {time.perf_counter() - t1:.1f}s")
    views = {}
    for i, view, _ in frames:
        rows = parquet_rows(out / f"{PART}={i}")
        views[view.name] = {"rows": rows, "part": i, "prefix": prefix(i)}
        progress(f"propagate {batch}: sd_{view.name}: {rows} rows")
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


def prefix(i: int) -> str:
    return f"v{i}__"


def _summary_delta(spark: SparkSession, view: View, info: BatchInfo) -> DataFrame:
    """The summary-delta of one view as a lazy DataFrame (Section 4.1; MIN/MAX of lost groups exact)."""
    sd = spark.sql(emit.to_dialect(emit.summary_delta(view, info.changed), "spark"))
    if view.has_min_max and info.has_deletes:
        sd.createOrReplaceTempView(emit.rel("sd", view.name))
        # lost groups and their exact extremes are few next to the base: broadcast them
        lost = F.broadcast(spark.sql(emit.to_dialect(emit.lost_groups(view), "spark")))
        lost.createOrReplaceTempView(emit.rel("lost", view.name))
        for arg in emit.minmax_arguments(view):
            exact = spark.sql(emit.to_dialect(emit.minmax_recompute(view, arg, info.changed), "spark"))
            F.broadcast(exact).createOrReplaceTempView(emit.rel("exact", f"{view.name}_{arg.index}"))
        sd = spark.sql(emit.to_dialect(emit.with_exact_minmax(view), "spark"))
    return sd


def _write_together(frames: list[tuple[int, View, DataFrame]], out: Path) -> None:
    """All summary-deltas of the night in ONE Spark job: their stages run side by side and the night
    pays one output commit. Each view's columns get the prefix v<i>__ and its rows land in
    part=<i>/ (the warehouse reads back only its own columns)."""
    parts = []
    for i, view, df in frames:
        cols = [F.col(f"`{c}`").alias(prefix(i) + c) for c in df.columns]
        parts.append(df.select(F.lit(i).alias(PART), *cols))
    union = parts[0]
    for p in parts[1:]:
        union = union.unionByName(p, allowMissingColumns=True)
    union.repartition(PART).write.mode("overwrite").partitionBy(PART).parquet(str(out))


def _describe(info: BatchInfo) -> str:
    parts = [f"{t} +{info.inserted[t]}/-{info.deleted[t]}" for t in sorted(info.changed)]
    return ", ".join(parts) or "no changes"
