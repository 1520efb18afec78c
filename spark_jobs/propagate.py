"""propagate_k (paper 001, 2.1 and 4.1): change batch -> one summary-delta per summary table, as Parquet.

Reads the change batch and the dimension tables; for MIN/MAX groups that lost rows also the
affected groups of the base fact table (so refresh, inside the window, never scans base data).
Never reads the summary tables. Idempotent: reruns overwrite the same files, and the manifest is
written last.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lattice import emit
from lattice.dlattice import build_lattice, levels
from lattice.errors import BatchOrderError, ConfigError
from lattice.ir import Lattice, Plan, View
from lattice.passes.derives import topological_order
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
    level: int | None = None,
) -> dict:
    """Every summary-delta of the batch (level None), or only the lattice points of one level
    (dlattice.levels; the Airflow DAG runs one task per level, in order, and the last level writes
    the manifest)."""
    t0 = time.perf_counter()
    progress(f"propagate {batch}: reading and checking the change batch")
    info = load_batch(spark, lake, plan, batch, state)
    progress(f"propagate {batch}: {info.rows} change rows ({_describe(info)}) checked in {time.perf_counter() - t0:.1f}s")
    lattice = _lattice(spark, plan, lake, info, state)
    parent = parents(lattice, info) if lattice else {}
    if level is not None:
        return _propagate_level(spark, plan, lake, state, info, lattice, parent, level, progress, t0)
    raw = _along_lattice(spark, plan, lattice, parent, info)
    frames = [(i, view, _summary_delta(spark, view, info, raw[view.name])) for i, view in enumerate(plan.views)]
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
    manifest = _manifest(plan, state, info, views, _describe_lattice(lattice, parent, info, views), t0)
    lake.write_manifest(batch, manifest)
    return manifest


def _manifest(plan: Plan, state: LakeState, info: BatchInfo, views: dict, lattice: dict, t0: float) -> dict:
    return {
        "batch": info.batch,
        "plan": plan.fingerprint,
        "base_state": state.last,
        "changed": sorted(info.changed),
        "inserted": info.inserted,
        "deleted": info.deleted,
        "insert_only": not info.has_deletes,
        "preaggregated": _preaggregated(plan, lattice),
        "weakly_minimal": sorted(v.name for v in plan.views if v.has_min_max and info.has_deletes and weakly_minimal(v, info)),
        "views": views,
        "lattice": lattice,
        "seconds": round(time.perf_counter() - t0, 3),
    }


def _propagate_level(
    spark: SparkSession, plan: Plan, lake: Lake, state: LakeState, info: BatchInfo, lattice: Lattice | None,
    parent: dict[str, str], level: int, progress: Callable[[str], None], t0: float,
) -> dict:
    """One level of the lattice: its points, each from its chosen parent (the change set, or a point of
    a lower level that an earlier level task stored under _nodes/); the summary-deltas of its views go to
    their part=<i>/ folders, and the points a later level derives from to _nodes/. Each level records
    itself in _levels/; a level invalidates the manifest and every later level's record (they may have
    read what it rewrites), and the last level writes the manifest once every level is recorded for
    this plan and base state. The levels do not depend on the night's statistics, so whichever parents
    the cost model picks, they lie on a lower level."""
    batch, out = info.batch, lake.delta_root(info.batch)
    tiers = levels(lattice or build_lattice(plan))
    if not 0 <= level < len(tiers):
        raise ConfigError(f"propagate --level {level}: the plan's D-lattice has {len(tiers)} level(s), 0..{len(tiers) - 1} "
                          f"(nightshift plan lists them)")
    earlier = [lake.read_level(batch, k) for k in range(level)]
    for k, r in enumerate(earlier):
        if r is None or r["plan"] != plan.fingerprint or r["base_state"] != state.last:
            raise BatchOrderError(
                f"propagate {batch} --level {level}: level {k} has not run for this plan and base state; "
                f"run propagate --level 0 .. {level} in order (or propagate without --level)")
    lake.invalidate_levels(batch, level)
    mine = set(tiers[level])
    needed = _needed(plan, lattice, parent) if lattice else {v.name for v in plan.views}
    compute = mine & needed
    raw = _along_lattice(spark, plan, lattice, parent, info, compute, lambda n: lake.node_dir(batch, n))
    for n in sorted({parent[c] for c in needed if parent.get(c) in compute}):  # what later levels derive from
        raw[n].write.mode("overwrite").parquet(str(lake.node_dir(batch, n)))
        raw[n] = spark.read.parquet(str(lake.node_dir(batch, n)))  # this level's view reads it back, not recomputes it
    frames = [(i, v, _summary_delta(spark, v, info, raw[v.name])) for i, v in enumerate(plan.views) if v.name in mine]
    t1 = time.perf_counter()
    for i, _, _ in frames:
        shutil.rmtree(out / f"{PART}={i}", ignore_errors=True)  # an emptied delta must not leave an old file
    if frames:
        _write_together(frames, out, replace_all=False)
    views = {}
    for i, view, _ in frames:
        views[view.name] = {"rows": parquet_rows(out / f"{PART}={i}"), "part": i, "prefix": prefix(i)}
        progress(f"propagate {batch} level {level}: sd_{view.name}: {views[view.name]['rows']} rows")
        checkpoint(f"propagate:after_view:{view.name}")
    progress(f"propagate {batch} level {level}/{len(tiers) - 1}: {len(compute)} point(s), {len(frames)} summary-delta(s) "
             f"written in {time.perf_counter() - t1:.1f}s")
    record = {"plan": plan.fingerprint, "base_state": state.last, "level": level, "views": views,
              "inserted": info.inserted, "deleted": info.deleted}
    lake.write_level(batch, level, record)
    if level < len(tiers) - 1:
        return record
    for r in earlier:
        views.update(r["views"])
    missing = [v.name for v in plan.views if v.name not in views]
    if missing:
        raise BatchOrderError(f"propagate {batch}: no level computed the summary-delta of {', '.join(missing)}; "
                              f"rerun propagate --batch {batch} without --level")
    manifest = _manifest(plan, state, info, views, _describe_lattice(lattice, parent, info, views), t0)
    manifest["levels"] = len(tiers)
    lake.write_manifest(batch, manifest)
    return manifest


def _needed(plan: Plan, lattice: Lattice, parent: dict[str, str]) -> set[str]:
    """The lattice points on some view's chain of chosen parents (the change sets excluded)."""
    needed: set[str] = set()
    for v in plan.views:
        node = v.name
        while lattice.node(node).kind != "changes" and node not in needed:
            needed.add(node)
            node = parent[node]
    return needed


def prefix(i: int) -> str:
    return f"v{i}__"


def _lattice(spark: SparkSession, plan: Plan, lake: Lake, info: BatchInfo, state: LakeState) -> Lattice | None:
    """The optimized D-lattice for this batch (Section 5), costed with the batch's change counts and
    the base tables' sizes. NIGHTSHIFT_LATTICE=0 turns it off: every summary-delta then comes
    straight from the change set (the bench compares both)."""
    if os.environ.get("NIGHTSHIFT_LATTICE", "1") == "0":
        return None
    change_rows = {t: info.inserted[t] + info.deleted[t] for t in info.inserted}
    lattice = build_lattice(plan, lake.statistics(plan.schema, state, change_rows))
    if not _measures(info):
        return lattice  # small batch: every parent is cheap, a statistics pass would cost more than it saves
    distinct = _change_distincts(spark, plan, lattice, lake, info)
    return build_lattice(plan, lake.statistics(plan.schema, state, change_rows, distinct))


def _measures(info: BatchInfo) -> bool:
    """Measure summary-delta sizes only for batches of NIGHTSHIFT_LATTICE_STATS_ROWS change rows or more."""
    return info.rows >= int(os.environ.get("NIGHTSHIFT_LATTICE_STATS_ROWS", "50000"))


def _change_distincts(spark: SparkSession, plan: Plan, lattice: Lattice, lake: Lake, info: BatchInfo) -> dict:
    """Approximate summary-delta sizes of every lattice point, measured over the changes in one Spark
    job per fact table and cached per batch in lake/stats/ (a rerun of propagate reads them back)."""
    combos = {}
    for n in lattice.nodes:
        if n.kind != "changes":
            combos.setdefault(n.fact, set()).add(tuple(sorted((k.ref.table, k.ref.column) for k in n.keys)))
    key = {f: sorted(c) for f, c in sorted(combos.items())}
    cached = lake.read_change_distincts(info.batch, key)
    if cached is not None:
        return cached
    out = {}
    for fact, wanted in key.items():
        joins = [j for v in plan.views if v.fact == fact for j in v.joins]
        joins = list({(j.child, j.parent): j for j in joins}.values())
        row = spark.sql(emit.to_dialect(emit.change_distincts(fact, joins, wanted), "spark")).collect()[0]
        for i, combo in enumerate(wanted):
            out[tuple(f"{t}.{c}" for t, c in combo)] = int(row[f"c{i}"])
    lake.write_change_distincts(info.batch, key, out)
    return out


def _along_lattice(
    spark: SparkSession, plan: Plan, lattice: Lattice | None, parent: dict[str, str], info: BatchInfo,
    compute: set[str] | None = None, stored: Callable[[str], Path] | None = None,
) -> dict[str, DataFrame]:
    """Every summary-delta before the exact MIN/MAX step, each from its chosen parent (5.5): the
    change set, or another summary-delta of this batch (registered as __ns_sd_<node>; Spark reuses
    the parent's shuffle for all its children in the one write job). compute: only these points
    (one level); a parent outside them is read from stored(parent), where its level put it."""
    if lattice is None:
        order = [v.name for v in plan.views if compute is None or v.name in compute]
        sql = {v.name: emit.summary_delta(v, info.changed, preaggregating()) for v in plan.views if v.name in order}
    else:
        needed = _needed(plan, lattice, parent)
        order = [n for n in topological_order(lattice) if n in needed and (compute is None or n in compute)]
        sql = {}
        for n in order:
            node, p = lattice.node(n), parent[n]
            if lattice.node(p).kind == "changes":
                sql[n] = emit.summary_delta(emit.node_view(node), info.changed, preaggregating())
            else:
                if p not in order:
                    spark.read.parquet(str(stored(p))).createOrReplaceTempView(emit.rel("sd", p))
                sql[n] = emit.derived_summary_delta(lattice.edge(p, n), node, emit.rel("sd", p))
    raw = {}
    for n in order:
        raw[n] = spark.sql(emit.to_dialect(sql[n], "spark"))
        raw[n].createOrReplaceTempView(emit.rel("sd", n))
    return raw


def parents(lattice: Lattice, info: BatchInfo) -> dict[str, str]:
    """The chosen parent of every lattice point; an edge that joins a dimension this batch changed
    would read it in the wrong state, so such a point falls back to the change set."""
    changed = {t.lower() for t in info.changed}
    changes_of = {n.fact: n.name for n in lattice.nodes if n.kind == "changes"}
    out = {}
    for p in lattice.parents:
        stale = any(t.lower() in changed for t in p.requires_unchanged)
        out[p.node] = changes_of[lattice.node(p.node).fact] if stale else p.parent
    return out


def _summary_delta(spark: SparkSession, view: View, info: BatchInfo, sd: DataFrame) -> DataFrame:
    """The summary-delta of one view (Section 4.1; MIN/MAX of groups that lost rows made exact from
    the base, since a parent summary-delta does not know the groups it did not touch), with exactly
    the summary table's columns (a lattice-friendly point drops its hidden attributes here)."""
    if view.has_min_max and info.has_deletes:
        # lost groups and their exact extremes are few next to the base: broadcast them
        lost = F.broadcast(spark.sql(emit.to_dialect(emit.lost_groups(view, weakly_minimal(view, info)), "spark")))
        lost.createOrReplaceTempView(emit.rel("lost", view.name))
        for arg in emit.minmax_arguments(view):
            exact = spark.sql(emit.to_dialect(emit.minmax_recompute(view, arg, info.changed), "spark"))
            F.broadcast(exact).createOrReplaceTempView(emit.rel("exact", f"{view.name}_{arg.index}"))
        sd = spark.sql(emit.to_dialect(emit.with_exact_minmax(view), "spark"))
    columns = [k.name for k in view.keys] + [s.column for s in view.stored] + [emit.LOST]
    return sd.select(*[F.col(f"`{c}`") for c in columns])


def _preaggregated(plan: Plan, lattice: dict) -> dict[str, list[str]]:
    """Summary-deltas (lattice points) computed from the change set with pre-aggregation, and by what."""
    if not preaggregating():
        return {}
    if lattice.get("enabled"):
        return {n: e["preaggregated_by"] for n, e in lattice["nodes"].items() if "preaggregated_by" in e}
    return {v.name: list(by) for v in plan.views if (by := emit.preaggregation(v))}


def preaggregating() -> bool:
    """Pre-aggregation (4.1.3) of the fact changes before the dimension joins wherever
    emit.preaggregation applies; NIGHTSHIFT_PREAGGREGATE=0 turns it off (the bench compares both)."""
    return os.environ.get("NIGHTSHIFT_PREAGGREGATE", "1") != "0"


def weakly_minimal(view: View, info: BatchInfo) -> bool:
    """4.3's weak minimality, detected: load_batch accepts only deletes of rows of the base before the
    batch, so the changes to the view's join are weakly minimal unless one of its dimensions changed
    (then ΔF⋈D' and F⋈ΔD delete join rows the old join never held). NIGHTSHIFT_WEAK_MINIMALITY=0
    turns the tighter MIN/MAX test off."""
    changed = {t.lower() for t in info.changed}
    return os.environ.get("NIGHTSHIFT_WEAK_MINIMALITY", "1") != "0" and not any(d.lower() in changed for d in view.dimensions)


def _describe_lattice(lattice: Lattice | None, parent: dict[str, str], info: BatchInfo, views: dict) -> dict:
    """What the manifest (and `nightshift plan`) shows: each summary-delta's parent, its estimated
    and actual rows."""
    if lattice is None:
        return {"enabled": False}
    estimates = {e.node: e.rows for e in lattice.estimates}
    nodes = {n: {"parent": p, "estimated_rows": estimates.get(n)} for n, p in parent.items()}
    for n, p in parent.items() if preaggregating() else ():  # 4.1.3: from the change set, pre-aggregated
        if lattice.node(p).kind == "changes" and (by := emit.preaggregation(emit.node_view(lattice.node(n)))):
            nodes[n]["preaggregated_by"] = list(by)
    for name, entry in views.items():
        if name in nodes:
            nodes[name]["actual_rows"] = entry["rows"]
    return {"enabled": True, "statistics": "measured" if _measures(info) else "sizes", "nodes": nodes}


def _write_together(frames: list[tuple[int, View, DataFrame]], out: Path, replace_all: bool = True) -> None:
    """All summary-deltas of the night (or of one level) in ONE Spark job: their stages run side by
    side and the night pays one output commit. Each view's columns get the prefix v<i>__ and its rows
    land in part=<i>/ (the warehouse reads back only its own columns). replace_all=False replaces only
    the part=<i>/ folders written (other levels' stay)."""
    parts = []
    for i, view, df in frames:
        cols = [F.col(f"`{c}`").alias(prefix(i) + c) for c in df.columns]
        parts.append(df.select(F.lit(i).alias(PART), *cols))
    union = parts[0]
    for p in parts[1:]:
        union = union.unionByName(p, allowMissingColumns=True)
    mode = "static" if replace_all else "dynamic"
    union.repartition(PART).write.mode("overwrite").option("partitionOverwriteMode", mode).partitionBy(PART).parquet(str(out))


def _describe(info: BatchInfo) -> str:
    parts = [f"{t} +{info.inserted[t]}/-{info.deleted[t]}" for t in sorted(info.changed)]
    return ", ".join(parts) or "no changes"
