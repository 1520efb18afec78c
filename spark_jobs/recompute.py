"""The oracle's second engine: every view's own SQL run by Spark over the lake's base tables."""

from __future__ import annotations

from pyspark.sql import SparkSession

from lattice import emit
from lattice.ir import Plan
from lattice.sql import to_dialect
from runtime.lake import Lake, LakeState
from spark_jobs.changes import read_base


def recompute(spark: SparkSession, plan: Plan, lake: Lake, state: LakeState | None = None) -> dict[str, list[tuple]]:
    """view name -> its rows recomputed from scratch (the user's SELECT, transpiled to Spark SQL)."""
    state = state or lake.state()
    for t in plan.schema.tables:
        read_base(spark, lake, t, state).createOrReplaceTempView(t.name)
    return {v.name: [tuple(r) for r in spark.sql(to_dialect(emit.recompute(v), "spark")).collect()] for v in plan.views}
