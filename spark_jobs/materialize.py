"""materialize: every summary table computed from the current base tables (Parquet for the warehouse)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from pyspark.sql import SparkSession

from lattice import emit
from lattice.dlattice import lattice_shape
from lattice.ir import Plan
from lattice.sql import ident, to_dialect
from runtime.lake import Lake, LakeState, parquet_rows
from runtime.night import BatchInfo, NightPlan, plan_night
from runtime.options import Options
from spark_jobs.changes import empty_frame, register_base
from spark_jobs.propagate import along_lattice


def materialize(
    spark: SparkSession,
    plan: Plan,
    lake: Lake,
    state: LakeState,
    out_root: Path,
    progress: Callable[[str], None] = lambda _: None,
    along_lattice_of: Options | None = None,
) -> dict:
    """Every summary table from the base, each by its own query; along_lattice_of: as Section 6's
    rematerialization does, each from the smallest one already computed (with these options)."""
    if along_lattice_of is not None:
        return _along_lattice_views(spark, plan, lake, state, out_root, along_lattice_of, progress)
    register_base(spark, lake, plan, state)
    views = {}
    for i, view in enumerate(plan.views, 1):
        t = time.perf_counter()
        df = spark.sql(to_dialect(emit.materialize(view), "spark"))
        df.write.mode("overwrite").parquet(str(out_root / view.name))
        rows = parquet_rows(out_root / view.name)
        views[view.name] = {"rows": rows, "seconds": round(time.perf_counter() - t, 3)}
        progress(f"materialize: [{i}/{len(plan.views)}] {view.name}: {rows} rows in {views[view.name]['seconds']:.1f}s")
    return views


def materialize_night(plan: Plan, lake: Lake, state: LakeState, options: Options) -> NightPlan:
    """The base as one batch inserting every base fact row: the night's plan that computes every
    summary table along the D-lattice (its parents costed with the base's sizes)."""
    facts = set(plan.fact_tables)
    rows = {t.name: parquet_rows(lake.current_base_dir(t.name, state)) for t in plan.schema.tables}
    info = BatchInfo("materialize", {t: n if t in facts else 0 for t, n in rows.items()}, {t: 0 for t in rows})
    stats = lake.statistics(plan.schema, state, info.change_rows())
    return plan_night(plan, info, state.last, options, stats, lattice_shape(plan))


def _along_lattice_views(spark: SparkSession, plan: Plan, lake: Lake, state: LakeState, out_root: Path,
                         options: Options, progress) -> dict:
    """Rematerialize as Section 6 does: every summary table computed from the smallest one already
    computed along the lattice (SID_sales from pos, sCD_sales and SiC_sales from SID_sales, ...), by
    executing the night's plan of materialize_night. Each point that others derive from is cached, so
    it is computed once."""
    register_base(spark, lake, plan, state)
    facts = set(plan.fact_tables)
    for t in plan.schema.tables:
        old = spark.table(emit.rel("old", t.name))
        (old if t.name in facts else empty_frame(spark, t)).createOrReplaceTempView(emit.rel("ins", t.name))
        empty_frame(spark, t).createOrReplaceTempView(emit.rel("del", t.name))
        old.createOrReplaceTempView(emit.rel("new", t.name))
    night = materialize_night(plan, lake, state, options)
    raw = along_lattice(spark, plan, night)
    parents = {n.parent for n in night.nodes} & set(raw)
    for name in parents:
        raw[name].persist()
    views = {}
    order = {n.node: i for i, n in enumerate(night.nodes)}
    try:
        for i, view in enumerate(sorted(plan.views, key=lambda v: order[v.name]), 1):
            t = time.perf_counter()
            columns = [k.name for k in view.keys] + [s.column for s in view.stored]
            raw[view.name].select(*[ident(c, "spark") for c in columns]).write.mode("overwrite").parquet(str(out_root / view.name))
            n = parquet_rows(out_root / view.name)
            parent = night.node(view.name).parent
            views[view.name] = {"rows": n, "parent": parent, "seconds": round(time.perf_counter() - t, 3)}
            progress(f"materialize: [{i}/{len(plan.views)}] {view.name} from {parent}: {n} rows "
                     f"in {views[view.name]['seconds']:.1f}s")
    finally:
        for name in parents:
            raw[name].unpersist()
    return views
