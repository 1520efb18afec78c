"""materialize: every summary table computed from the current base tables (Parquet for the warehouse)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lattice import emit, types
from lattice.dlattice import lattice_shape
from lattice.ir import Edge, LatticeNode, Plan
from lattice.sql import ident, to_dialect
from runtime import delta
from runtime.lake import Lake, LakeState, parquet_rows, switch_copies
from runtime.night import BatchInfo, NightPlan, plan_night
from runtime.options import Options
from spark_jobs.changes import empty_frame, register_base
from spark_jobs.lake_tables import DRIVER_ROWS, latest_version, write
from spark_jobs.nested import read_copy, register_old
from spark_jobs.propagate import along_lattice
from spark_jobs.recompute import column_types, recompute_frame
from spark_jobs.session import query


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
    views, copies = materialize_views(spark, plan, lake, state, out_root, progress)
    switch_copies(lake, copies)
    return views


def materialize_views(
    spark: SparkSession,
    plan: Plan,
    lake: Lake,
    state: LakeState,
    out_root: Path,
    progress: Callable[[str], None] = lambda _: None,
    only: frozenset[str] | None = None,
    built: dict[str, tuple[Edge, LatticeNode, Path]] | None = None,
) -> tuple[dict, dict[str, str]]:
    """The summary tables of the views in `only` (default: all) from the base, each by its own query, as
    Parquet under out_root/<view>; returns their statistics and the new lake copies written (view ->
    Delta version, not yet in the lake's state). A view outside `only` that a computed nested view reads is read from
    its lake copy (written first when it has none: a view that just gained a nested reader). A view in
    `built` (view -> lattice edge, its lattice point, the folder of the upper summary table's rows) is
    computed along that edge from an existing summary table instead of the base (nightshift apply)."""
    register_base(spark, lake, plan, state)
    views, copies = {}, {}
    if only is not None:  # a view's auxiliary view is built with it, unless a view that stays reads it (shared: kept
        own = {a.name for a in plan.auxiliary}  # up to date every night; a copy no view read since is stale)
        kept = {r for v in plan.views if v.name not in only for r in v.reads}
        only = only | {r for v in plan.views if v.name in only for r in v.reads if r in own and r not in kept}
    todo = [v for v in plan.lake_views if only is None or v.name in only]
    copied = {v.name for v in plan.copied_views}
    for view in plan.lake_views:  # plan order: a view after the views it reads
        if only is not None and view.name not in only:
            if view.name not in copied:
                continue
            if view.name in state.versions:
                register_old(spark, view, read_copy(spark, lake, view, state))
                continue
            progress(f"materialize: {view.name}: its lake copy (a nested view now reads it)")
        t = time.perf_counter()
        if built and view.name in built:
            df = _from_built(spark, plan, view, *built[view.name])
        else:
            df = recompute_frame(spark, plan, view, "old")
        if view.incremental and emit.LOST in df.columns:
            df = df.drop(emit.LOST)
        df.write.mode("overwrite").parquet(str(out_root / view.name))
        copies.update(_copy(spark, plan, lake, state, view, out_root))
        if only is not None and view.name not in only:
            continue
        rows = parquet_rows(out_root / view.name)
        views[view.name] = {"rows": rows, "seconds": round(time.perf_counter() - t, 3),
                            "columns": [list(c) for c in column_types(view, df)] if not view.incremental else []}
        parent = f" from {built[view.name][0].upper}'s summary table" if built and view.name in built else ""
        if parent:
            views[view.name]["parent"] = built[view.name][0].upper
        progress(f"materialize: [{len(views)}/{len(todo)}] {view.name}{parent}: {rows} rows in "
                 f"{views[view.name]['seconds']:.1f}s")
    return views, copies


def _from_built(spark: SparkSession, plan: Plan, view, edge: Edge, node: LatticeNode, folder: Path) -> DataFrame:
    """A view's summary table as one GROUP BY over an existing summary table's rows (exported to `folder`)
    along the lattice edge (5.1), joined with the edge's dimensions at the base's state."""
    upper = emit.rel("built", edge.upper)
    spark.read.parquet(str(folder)).createOrReplaceTempView(upper)
    for j in edge.joins:
        spark.table(emit.rel("old", j.table)).createOrReplaceTempView(emit.rel("new", j.table))
    u = ident(edge.upper)
    sql = emit.edge_query(edge, node.keys, node.stored, f"{upper} AS {u}", lambda c: f"{u}.{ident(c)}",
                          lambda j: emit.rel("new", j.table), plan.schema)
    if not node.keys:
        sql += "\nHAVING COUNT(*) > 0"  # a grand total over no rows: as materialize writes it
    df = query(spark, to_dialect(sql, "spark"))
    columns = [(k.name, k.type) for k in view.keys] + [(s.column, s.type) for s in view.stored]
    return df.select(*[F.col(ident(c, "spark")).cast(types.spark_type(t)).alias(c) for c, t in columns])


def _copy(spark: SparkSession, plan: Plan, lake: Lake, state: LakeState, view, out_root: Path) -> dict[str, str]:
    """A view the lake copies (Plan.copied_views): its stored rows become its lake copy (a new version at the base's
    state), and its served rows the relation the nested views' materialization reads."""
    if view.name not in {v.name for v in plan.copied_views}:
        return {}
    rows = spark.read.parquet(str(out_root / view.name))
    new = not delta.is_delta_table(lake.table_path(view.name))
    write(rows, lake, view.name, "overwrite", None, small=new and parquet_rows(out_root / view.name) <= DRIVER_ROWS)
    version = latest_version(spark, lake.table_path(view.name))
    register_old(spark, view, read_copy(spark, lake, view, LakeState(state.applied, {view.name: version})))
    return {view.name: version}


def materialize_night(plan: Plan, lake: Lake, state: LakeState, options: Options) -> NightPlan:
    """The base as one batch inserting every base fact row: the night's plan that computes every
    summary table along the D-lattice (its parents costed with the base's sizes)."""
    facts = set(plan.fact_tables)
    rows = lake.table_rows(plan.schema.base_tables, state)
    info = BatchInfo("materialize", {t: n if t in facts else 0 for t, n in rows.items()}, {t: 0 for t in rows})
    stats = lake.statistics(plan.schema, state, info.change_rows())
    return plan_night(plan, info, state.last, options, stats, lattice_shape(plan), choose_mode=False)


def _along_lattice_views(spark: SparkSession, plan: Plan, lake: Lake, state: LakeState, out_root: Path,
                         options: Options, progress) -> dict:
    """Rematerialize as Section 6 does: every summary table computed from the smallest one already
    computed along the lattice (SID_sales from pos, sCD_sales and SiC_sales from SID_sales, ...), by
    executing the night's plan of materialize_night. Each point that others derive from is cached, so
    it is computed once."""
    register_base(spark, lake, plan, state)
    facts = set(plan.fact_tables)
    for t in plan.schema.base_tables:
        old = spark.table(emit.rel("old", t.name))
        (old if t.name in facts else empty_frame(spark, t)).createOrReplaceTempView(emit.rel("ins", t.name))
        empty_frame(spark, t).createOrReplaceTempView(emit.rel("del", t.name))
        old.createOrReplaceTempView(emit.rel("new", t.name))
    night = materialize_night(plan, lake, state, options)
    raw = along_lattice(spark, plan, night)
    parents = {n.parent for n in night.nodes} & set(raw)
    for name in parents:
        raw[name].persist()
    views, copies = {}, {}
    try:
        for i, view in enumerate(plan.lake_views, 1):  # plan order: a view after the views it reads
            t = time.perf_counter()
            columns = [k.name for k in view.keys] + [s.column for s in view.stored]
            if view.name in raw:
                df, parent = raw[view.name].select(*[ident(c, "spark") for c in columns]), night.node(view.name).parent
            else:  # a recompute view: its own query over the base
                df, parent = recompute_frame(spark, plan, view, "old"), "(recompute)"
            if view.incremental and emit.LOST in df.columns:
                df = df.drop(emit.LOST)
            df.write.mode("overwrite").parquet(str(out_root / view.name))
            copies.update(_copy(spark, plan, lake, state, view, out_root))
            n = parquet_rows(out_root / view.name)
            views[view.name] = {"rows": n, "parent": parent, "seconds": round(time.perf_counter() - t, 3),
                                "columns": [list(c) for c in column_types(view, df)] if not view.incremental else []}
            progress(f"materialize: [{i}/{len(plan.lake_views)}] {view.name} from {parent}: {n} rows "
                     f"in {views[view.name]['seconds']:.1f}s")
    finally:
        for name in parents:
            raw[name].unpersist()
    switch_copies(lake, copies)
    return views
