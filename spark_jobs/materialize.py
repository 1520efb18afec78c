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
    along_lattice: bool = False,
) -> dict:
    """Every summary table from the base; along_lattice: each from the smallest one already computed."""
    if along_lattice:
        return _along_lattice_views(spark, plan, lake, state, out_root, progress)
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


def _along_lattice_views(spark: SparkSession, plan: Plan, lake: Lake, state: LakeState, out_root: Path, progress) -> dict:
    """Rematerialize as Section 6 does: every summary table computed from the smallest one already
    computed along the lattice (SID_sales from pos, sCD_sales and SiC_sales from SID_sales, ...).

    The base is the summary-delta of inserting every base row, so the D-lattice of propagate computes
    it: the fact table registered as the batch's insertions, its parents costed with the base's size.
    Each lattice point that others derive from is cached, so it is computed once.
    """
    from lattice.dlattice import build_lattice
    from spark_jobs.changes import BatchInfo, empty_frame
    from lattice.passes.derives import topological_order
    from spark_jobs.propagate import _along_lattice, parents

    register_base(spark, lake, plan, state)
    facts = set(plan.fact_tables)
    rows = {t.name: parquet_rows(lake.current_base_dir(t.name, state)) for t in plan.schema.tables}
    for t in plan.schema.tables:
        old = spark.table(emit.rel("old", t.name))
        (old if t.name in facts else empty_frame(spark, t)).createOrReplaceTempView(emit.rel("ins", t.name))
        empty_frame(spark, t).createOrReplaceTempView(emit.rel("del", t.name))
        old.createOrReplaceTempView(emit.rel("new", t.name))
    info = BatchInfo("materialize", {t: rows[t] if t in facts else 0 for t in rows}, {t: 0 for t in rows})
    lattice = build_lattice(plan, lake.statistics(plan.schema, state, {t: info.inserted[t] for t in rows}))
    parent = parents(lattice, info)
    raw = _along_lattice(spark, plan, lattice, parent, info)
    for name in set(parent.values()) & set(raw):
        raw[name].persist()
    views = {}
    order = {name: i for i, name in enumerate(topological_order(lattice))}
    try:
        for i, view in enumerate(sorted(plan.views, key=lambda v: order[v.name]), 1):
            t = time.perf_counter()
            columns = [k.name for k in view.keys] + [s.column for s in view.stored]
            raw[view.name].select(*[f"`{c}`" for c in columns]).write.mode("overwrite").parquet(str(out_root / view.name))
            n = parquet_rows(out_root / view.name)
            views[view.name] = {"rows": n, "parent": parent[view.name], "seconds": round(time.perf_counter() - t, 3)}
            progress(f"materialize: [{i}/{len(plan.views)}] {view.name} from {parent[view.name]}: {n} rows "
                     f"in {views[view.name]['seconds']:.1f}s")
    finally:
        for name in set(parent.values()) & set(raw):
            raw[name].unpersist()
    return views
