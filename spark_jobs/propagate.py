"""propagate_k (paper 001, 2.1 and 4.1): change batch -> one summary-delta per summary table, as Parquet.

Reads the change batch and the dimension tables; for MIN/MAX groups that lost rows also the
affected groups of the base fact table (so refresh, inside the window, never scans base data).
Never reads the summary tables. Idempotent: reruns overwrite the same files, and the manifest is
written last.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lattice import emit
from lattice.dlattice import Statistics, build_lattice
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
) -> dict:
    t0 = time.perf_counter()
    progress(f"propagate {batch}: reading and checking the change batch")
    info = load_batch(spark, lake, plan, batch, state)
    progress(f"propagate {batch}: {info.rows} change rows ({_describe(info)}) checked in {time.perf_counter() - t0:.1f}s")
    lattice = _lattice(spark, plan, lake, info, state)
    raw = _along_lattice(spark, plan, lattice, info)
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
    manifest = {
        "batch": batch,
        "plan": plan.fingerprint,
        "base_state": state.last,
        "changed": sorted(info.changed),
        "inserted": info.inserted,
        "deleted": info.deleted,
        "insert_only": not info.has_deletes,
        "views": views,
        "lattice": _describe_lattice(lattice, info, views),
        "seconds": round(time.perf_counter() - t0, 3),
    }
    lake.write_manifest(batch, manifest)
    return manifest


def prefix(i: int) -> str:
    return f"v{i}__"


def _lattice(spark: SparkSession, plan: Plan, lake: Lake, info: BatchInfo, state: LakeState) -> Lattice | None:
    """The optimized D-lattice for this batch (Section 5), costed with the batch's change counts and
    the base tables' sizes (Parquet footers, no Spark job). NIGHTSHIFT_LATTICE=0 turns it off: every
    summary-delta then comes straight from the change set (the bench compares both)."""
    if os.environ.get("NIGHTSHIFT_LATTICE", "1") == "0":
        return None
    sizes = {
        "table_rows": {t.name: parquet_rows(lake.current_base_dir(t.name, state)) for t in plan.schema.tables},
        "change_rows": {t: info.inserted[t] + info.deleted[t] for t in info.inserted},
    }
    lattice = build_lattice(plan, Statistics.of(**sizes))
    if not _measures(info):
        return lattice  # small batch: every parent is cheap, a statistics pass would cost more than it saves
    distinct = _change_distincts(spark, plan, lattice, lake, info)
    return build_lattice(plan, Statistics.of(**sizes, change_distinct=distinct))


def _measures(info: BatchInfo) -> bool:
    """Measure summary-delta sizes only for batches of NIGHTSHIFT_LATTICE_STATS_ROWS change rows or more."""
    return info.rows >= int(os.environ.get("NIGHTSHIFT_LATTICE_STATS_ROWS", "50000"))


def _change_distincts(spark: SparkSession, plan: Plan, lattice: Lattice, lake: Lake, info: BatchInfo) -> dict:
    """Approximate summary-delta sizes of every lattice point, measured over the changes in one Spark
    job per fact table and cached per batch in lake/stats/ (a rerun of propagate reads them back)."""
    cache = lake.root / "stats" / f"batch_id={info.batch}.json"
    combos = {}
    for n in lattice.nodes:
        if n.kind != "changes":
            combos.setdefault(n.fact, set()).add(tuple(sorted((k.ref.table, k.ref.column) for k in n.keys)))
    key = {f: sorted(c) for f, c in sorted(combos.items())}
    if cache.is_file():
        saved = json.loads(cache.read_text())
        if saved.get("combos") == json.loads(json.dumps(key)):
            return {tuple(k.split(",")): v for k, v in saved["distinct"].items()}
    out = {}
    for fact, wanted in key.items():
        joins = [j for v in plan.views if v.fact == fact for j in v.joins]
        joins = list({(j.child, j.parent): j for j in joins}.values())
        row = spark.sql(emit.to_dialect(emit.change_distincts(fact, joins, wanted), "spark")).collect()[0]
        for i, combo in enumerate(wanted):
            out[tuple(f"{t}.{c}" for t, c in combo)] = int(row[f"c{i}"])
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"combos": key, "distinct": {",".join(k): v for k, v in out.items()}}))
    return out


def _along_lattice(spark: SparkSession, plan: Plan, lattice: Lattice | None, info: BatchInfo) -> dict[str, DataFrame]:
    """Every summary-delta before the exact MIN/MAX step, each from its chosen parent (5.5): the
    change set, or another summary-delta of this batch (registered as __ns_sd_<node>; Spark reuses
    the parent's shuffle for all its children in the one write job)."""
    if lattice is None:
        order = [v.name for v in plan.views]
        sql = {v.name: emit.summary_delta(v, info.changed) for v in plan.views}
    else:
        parent = parents(lattice, info)
        needed: set[str] = set()
        for v in plan.views:
            node = v.name
            while lattice.node(node).kind != "changes" and node not in needed:
                needed.add(node)
                node = parent[node]
        order = [n for n in topological_order(lattice) if n in needed]
        sql = {}
        for n in order:
            node, p = lattice.node(n), parent[n]
            if lattice.node(p).kind == "changes":
                sql[n] = emit.summary_delta(emit.node_view(node), info.changed)
            else:
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
        lost = F.broadcast(spark.sql(emit.to_dialect(emit.lost_groups(view), "spark")))
        lost.createOrReplaceTempView(emit.rel("lost", view.name))
        for arg in emit.minmax_arguments(view):
            exact = spark.sql(emit.to_dialect(emit.minmax_recompute(view, arg, info.changed), "spark"))
            F.broadcast(exact).createOrReplaceTempView(emit.rel("exact", f"{view.name}_{arg.index}"))
        sd = spark.sql(emit.to_dialect(emit.with_exact_minmax(view), "spark"))
    columns = [k.name for k in view.keys] + [s.column for s in view.stored] + [emit.LOST]
    return sd.select(*[F.col(f"`{c}`") for c in columns])


def _describe_lattice(lattice: Lattice | None, info: BatchInfo, views: dict) -> dict:
    """What the manifest (and `nightshift plan`) shows: each summary-delta's parent, its estimated
    and actual rows."""
    if lattice is None:
        return {"enabled": False}
    estimates = {e.node: e.rows for e in lattice.estimates}
    nodes = {n: {"parent": p, "estimated_rows": estimates.get(n)} for n, p in parents(lattice, info).items()}
    for name, entry in views.items():
        if name in nodes:
            nodes[name]["actual_rows"] = entry["rows"]
    return {"enabled": True, "statistics": "measured" if _measures(info) else "sizes", "nodes": nodes}


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
