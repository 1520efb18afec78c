"""The oracle's second engine: every view's own SQL run by Spark over the lake's base tables."""

from __future__ import annotations

from pyspark.sql import SparkSession

from lattice.ir import Plan
from lattice.sql import ident, to_dialect
from runtime.lake import Lake, LakeState
from spark_jobs.changes import read_base


def recompute_all(spark: SparkSession, plan: Plan, lake: Lake, state: LakeState | None = None) -> dict[str, list[tuple]]:
    """view name -> its rows recomputed from scratch (the user's SELECT, transpiled to Spark SQL); a
    view that other views read is registered under its own name first (plan order puts it first)."""
    state = state or lake.state()
    for t in plan.schema.base_tables:
        read_base(spark, lake, t, state).createOrReplaceTempView(ident(t.name, "spark"))
    read = {r.lower() for v in plan.views for r in v.reads}
    out = {}
    for v in plan.views:
        df = spark.sql(to_dialect(v.sql, "spark"))
        if v.name.lower() in read:
            df.toDF(*[o.name for o in v.outputs]).createOrReplaceTempView(ident(v.name, "spark"))
        out[v.name] = [tuple(r) for r in df.collect()]
    return out
