"""The recompute mode, as a night executes it (DESIGN.md: the fourth mode).

A view kept by recompute, or an incremental view the night's plan chose to recompute (the first
load, a backfill that rewrites most of the base), is evaluated by Spark over the base at state k
(__ns_new_<t>: the base before the batch plus the batch, not applied) and written whole; refresh
replaces the table's contents in the same one transaction as every other view.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lattice import emit, types
from lattice.ir import Plan, View
from lattice.sql import to_dialect
from runtime.errors import UnsupportedView
from spark_jobs.session import query


def recompute_frame(spark: SparkSession, plan: Plan, view: View, state: str = "new") -> DataFrame:
    """The view's contents at `state`: an incremental view's storage columns (group keys and hidden
    aggregates, as materialize computes them); a recompute view's declared columns."""
    if view.incremental:  # shaped like its summary-delta (no group lost rows), so every reader finds its columns
        df = query(spark, to_dialect(emit.materialize(view, state), "spark")).withColumn(emit.LOST, F.lit(0).cast("int"))
        return with_holistic_values(spark, view, df, state, every_group=True) if view.has_holistic else df
    df = query(spark, to_dialect(emit.recompute_sql(view, plan, state), "spark"))
    return df.toDF(*[o.name for o in view.outputs])


def with_holistic_values(spark: SparkSession, view: View, sd: DataFrame, state: str = "new", every_group: bool = False
                         ) -> DataFrame:
    """`sd` (a summary-delta, or the view's rows) with its holistic aggregates computed from its auxiliary
    view's rows (paper 002) joined to its dimensions, both at `state` (__ns_<state>_<table>): for sd's
    groups only, unless every_group."""
    sd.createOrReplaceTempView(emit.rel("hsd", view.name))
    changed = None if every_group else emit.rel("hsd", view.name)
    values = emit.holistic_values(view, emit.rel(state, view.fact), changed, lambda d: emit.rel(state, d))
    query(spark, to_dialect(values, "spark")).createOrReplaceTempView(
        emit.rel("hol", view.name))
    return query(spark, to_dialect(emit.with_holistic(view, emit.rel("hsd", view.name), emit.rel("hol", view.name)), "spark"))


def column_types(view: View, df: DataFrame) -> tuple[tuple[str, str], ...]:
    """(column, type) of a recompute view's result, in nightshift's type names (the warehouse's DDL)."""
    out = []
    for field in df.schema.fields:
        spark_type = field.dataType.simpleString()
        t = types.normalize(spark_type)
        if t is None:
            raise UnsupportedView(f"{view.file}: view {view.name}: column {field.name} has Spark type {spark_type}, "
                                  f"which a summary table cannot hold (cast it to a number, text, date or timestamp)")
        out.append((field.name, t))
    return tuple(out)
