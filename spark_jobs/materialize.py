"""materialize: every summary table computed from the current base tables (Parquet for the warehouse)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from pyspark.sql import SparkSession

from lattice import emit
from lattice.ir import Plan
from nightshift.lake import Lake, LakeState, parquet_rows
from spark_jobs.changes import register_base


def materialize(
    spark: SparkSession,
    plan: Plan,
    lake: Lake,
    state: LakeState,
    out_root: Path,
    progress: Callable[[str], None] = lambda _: None,
) -> dict:
    register_base(spark, lake, plan, state)
    views = {}
    for i, view in enumerate(plan.views, 1):
        t = time.perf_counter()
        df = spark.sql(emit.to_dialect(emit.materialize(view), "spark"))
        df.write.mode("overwrite").parquet(str(out_root / view.name))
        rows = parquet_rows(out_root / view.name)
        views[view.name] = {"rows": rows, "seconds": round(time.perf_counter() - t, 3)}
        progress(f"materialize: [{i}/{len(plan.views)}] {view.name}: {rows} rows in {views[view.name]['seconds']:.1f}s")
    return views
