"""propagate_k (paper 001, 2.1 and 4.1): change batch -> one summary-delta per summary table, as Parquet.

Reads the change batch and the dimension tables; for MIN/MAX groups that lost rows also the
affected groups of the base fact table (so refresh, inside the window, never scans base data).
Never reads the summary tables. It plans the night once (runtime.night.plan_night: which
summary-delta comes from which parent, ...), writes that plan to the lake, and executes it; nothing
here decides anything of its own. Idempotent: reruns overwrite the same files, and the manifest is
written last.
"""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path
from typing import Callable, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lattice import emit, types
from lattice.dlattice import lattice_shape
from lattice.ir import Argument, ColumnRef, Plan, Table, View
from lattice.refresh import delta_columns
from lattice.sql import ident, to_dialect
from runtime import delta
from runtime.errors import BatchOrderError, ConfigError
from runtime.faults import checkpoint
from runtime.lake import Lake, LakeState, parquet_rows
from runtime.manifest import MANIFEST_VERSION, DeltaResult, LevelRecord, Manifest, add_rows_read
from runtime.night import BatchInfo, NightPlan, ViewStep, measures, month_arguments, plan_night, statistics_wanted
from runtime.options import Options
from spark_jobs import driver_checks
from spark_jobs.changes import load_batch
from spark_jobs.lake_tables import DRIVER_ROWS
from spark_jobs.metrics import ReadMeter, count_local
from spark_jobs.nested import read_copy, small_copy, view_changes, write_update
from spark_jobs.recompute import column_types, recompute_frame, with_holistic_values
from spark_jobs.session import arrow_batches, plain, query

PART = "part"
# a night of at most this many change rows has its summary-deltas streamed to the command and written there
# (_small_night, _write_here): at 100M rows of pos, nights of 100,000 changes took about 0.3 s (inserts only) and
# 1.3 s (with deletes) less than through Spark's writer, which writes every part's file with every part's columns
WRITE_HERE_CHANGES = 200_000
Progress = Callable[[str], None]


def propagate(spark: SparkSession, plan: Plan, lake: Lake, batch: str, state: LakeState, options: Options,
              progress: Progress = lambda _: None, level: int | None = None) -> Manifest | LevelRecord:
    """Every summary-delta of the batch (level None), or only the lattice points of one level of the
    night's plan (the Airflow DAG runs one task per level, in order; the last level writes the manifest).
    The manifest (and each level's record) says how many rows Spark read from each source (spark_jobs.metrics)."""
    with ReadMeter(spark, f"nightshift propagate {batch}" + ("" if level is None else f" --level {level}")) as meter:
        return _propagate(spark, plan, lake, batch, state, options, progress, level, meter)


def _propagate(spark: SparkSession, plan: Plan, lake: Lake, batch: str, state: LakeState, options: Options,
               progress: Progress, level: int | None, meter: ReadMeter) -> Manifest | LevelRecord:
    t0 = time.perf_counter()
    planned = lake.read_night(batch) if level else None  # level 0 checked the batch when it planned the night
    checked = planned is not None and planned.plan == plan.fingerprint and state.planned(planned)
    progress(f"propagate {batch}: reading " + ("the change batch (checked by level 0)" if checked else "and checking the change batch"))
    # the batch's rows where they are small (read when first asked for): the checks, the plan's statistics and a lost
    # extreme's first pass are made from them in this process
    rows = driver_checks.BatchRows(lake, state, lake.batch_files(batch, [t.name for t in plan.schema.base_tables]),
                                   plan.fact_tables)
    if level is None:  # a lost extreme's first pass is made in this process too: the delete check's pass counts for it
        rows.tallies_for = lambda table, dels: _tallies(plan, lake, state, table, dels)
    info = load_batch(spark, lake, plan, batch, state, checked, options.rewrite_below, rows)
    progress(f"propagate {batch}: {info.rows} change rows ({info.describe()}) "
             f"{'read' if checked else 'checked'} in {time.perf_counter() - t0:.1f}s")
    t_plan = time.perf_counter()
    night = _night(spark, plan, lake, info, state, options, level, rows)
    progress(f"propagate {batch}: night planned in {time.perf_counter() - t_plan:.1f}s ({len(night.levels)} level(s), "
             f"{len(night.views)} view(s), {len(night.copies)} lake cop{'y' if len(night.copies) == 1 else 'ies'})")
    if level is not None:
        return _propagate_level(spark, plan, lake, night, level, progress, t0, state, rows, meter)
    shared = _share_scans(spark, night, progress)
    raw: dict[str, DataFrame] = {}
    final: dict[str, DataFrame] = {}
    early = {c.view for c in night.copies if c.level < len(night.levels)}  # a later level reads its change set
    small = _small_night(plan, lake, state, info)
    held: dict[str, pa.Table] = {}  # summary-deltas held in this process (_held), by view
    points: dict[str, pa.Table] = {}  # the lattice points later levels derive from, held in this process on a small night
    frames = []
    for k in range(len(night.levels)):  # in level order: a nested view's change set needs its inner view's delta
        t_copies = time.perf_counter()
        updated = _copies(spark, plan, lake, night, state, k, lambda v: final[v], held)
        if updated:  # from the summary-deltas of the lower levels these copies follow, computed there
            progress(f"propagate {batch}: level {k}: lake copies of {', '.join(updated)} updated in "
                     f"{time.perf_counter() - t_copies:.1f}s")
        t_level = time.perf_counter()
        _old_extremes(spark, plan, lake, night, state, k)
        raw.update(along_lattice(spark, plan, night, {n.node for n in night.nodes_of_level(k)}, known=raw))
        feeding = [n.node for n in night.nodes_of_level(k) if n.feeds_later_level]
        for node in feeding:  # a later level's points derive from it: computed once, not once per reader
            raw[node], rows_here = _kept(raw[node], small)
            if rows_here is not None:
                points[node] = rows_here
            raw[node].createOrReplaceTempView(emit.rel("sd", node))
        if feeding:  # on a large batch (a first load) the level's longest step
            progress(f"propagate {batch}: level {k}: {len(feeding)} summary-delta(s) the later levels derive from "
                     f"computed in {time.perf_counter() - t_level:.1f}s")
            t_level = time.perf_counter()
        kept = []
        for step, view in zip(night.views, plan.lake_views):
            if step.level == k:
                frame = _view_frame(spark, plan, view, step, night.changed, raw, lake, state, rows,
                                    hold=small and view.name not in points)
                rows_here = _point_rows(view, step, points.get(view.name))
                if rows_here is not None:  # its summary-delta is its held point's columns: written from here
                    held[view.name] = rows_here
                    if view.name in early:
                        frame = spark.createDataFrame(rows_here)
                        kept.append(view.name)
                elif view.name in early:
                    # a later level's copy update needs it before _write_together writes it: computed once,
                    # not twice (its exact MIN/MAX may scan the base), and kept without its lineage, so the
                    # queries over it (the copy's change set, the views of the next level) plan over a
                    # small plan instead of the whole lattice again. On a small night its rows are held here:
                    # the copy's update and the night's write take them from here, Spark's queries from a
                    # relation of them
                    frame, rows_here = _kept(frame, small)
                    if rows_here is not None:
                        held[view.name] = rows_here
                    kept.append(view.name)
                frames.append((step, view, frame))
                final[view.name] = frame
        if kept:  # computed now, where the rest of the night's summary-deltas are computed as they are written
            progress(f"propagate {batch}: level {k}: summary-deltas of {', '.join(kept)} computed (their lake copies "
                     f"follow them at the next level) in {time.perf_counter() - t_level:.1f}s")
    frames.sort(key=lambda f: f[0].part)
    out = lake.delta_root(batch)
    t1 = time.perf_counter()
    # the frames kept by localCheckpoint go with the night's last reference to them
    _write_together(frames, out, here=small, held=held)
    for frame in shared:
        frame.unpersist()
    # the copies of last-level views (and of views no view reads) follow their summary-deltas as written (not
    # computed a second time)
    _copies(spark, plan, lake, night, state, len(night.levels), lambda v: _stored_delta(spark, plan, lake, night, v))
    progress(f"propagate {batch}: {len(frames)} summary-deltas computed and written in {time.perf_counter() - t1:.1f}s")
    deltas = _results(frames, out, lambda d: progress(f"propagate {batch}: summary-delta of {d.view}: {d.rows} rows"))
    manifest = Manifest(MANIFEST_VERSION, night, deltas, round(time.perf_counter() - t0, 3), meter.rows_read(lake, night))
    lake.write_manifest(manifest)
    return manifest


def _night(spark: SparkSession, plan: Plan, lake: Lake, info: BatchInfo, state: LakeState, options: Options,
           level: int | None, rows: driver_checks.BatchRows) -> NightPlan:
    """The night's plan: computed (and written to the lake) by a whole propagate or by level 0; a later
    level executes the plan level 0 wrote, so every level of a night follows one plan."""
    if level:
        night = lake.read_night(info.batch)
        if night is None or night.plan != plan.fingerprint or not state.planned(night):
            raise BatchOrderError(
                f"propagate {info.batch} --level {level}: level 0 has not run for this plan and base state (it plans "
                f"the night); run propagate --level 0 .. {level} in order (or propagate without --level)")
        return night
    shape = lattice_shape(plan)
    stats = lake.statistics(plan.schema, state, info.change_rows())
    measured = measures(info, options)
    if measured:
        stats = lake.statistics(plan.schema, state, info.change_rows(),
                                _change_distincts(spark, plan, shape, lake, info, rows))
    night = plan_night(plan, info, state.last, options, stats, shape, measured, base_versions=state.recorded,
                       partitions=state.partitions)
    lake.write_night(night)
    return night


def _share_scans(spark: SparkSession, night: NightPlan, progress: Progress, level: int | None = None) -> list[DataFrame]:
    """The base tables the night's plan shares among its recomputed views (NightPlan.shared), at state k, each
    kept (persisted) so that the one write job reads it once however many views name it: Spark fills the
    cache with the first task that reads a partition and every other read scans the cache. A table the
    batch's checks already keep (a dimension table) stays as it is. level: only the tables the views of
    that level read. Returns what it persisted, for the caller to release once the night is written."""
    kept, names = [], []
    for scan in night.shared:
        if level is not None and all(night.view(v).level != level for v in scan.views):
            continue
        names.append(scan.table)
        relation = emit.rel("new", scan.table)
        if not spark.catalog.isCached(relation):
            kept.append(spark.table(relation).persist())
    if names:
        progress(f"propagate {night.batch}: {len(night.recomputed)} view(s) recomputed; base table(s) read once for "
                 f"all of them: {', '.join(names)}")
    return kept


def _copies(spark: SparkSession, plan: Plan, lake: Lake, night: NightPlan, state: LakeState, level: int,
            final_delta: Callable[[str], DataFrame], held: dict[str, pa.Table] | None = None) -> list[str]:
    """The change sets of the copied views (Plan.copied_views) whose points run at `level` (spark_jobs/nested):
    each from its lake copy and its final summary-delta (final_delta(view)); their copies' next rows
    are written under _copies/ for apply-base. A small copy's (nested.small_copy) are made in this process from its
    rows read here and its summary-delta: at an earlier level the one `held` holds here (_held), else the one
    final_delta gives, streamed here; the one the night wrote at the last (_written_delta). The copy is read here
    only once its summary-delta is known to serve (each read counts as one read of the copy). Returns the views whose
    copies it updated."""
    updated = []
    last = level == len(night.levels)  # no view reads these copies' change sets: their new rows are only written
    small = last and any(step.level == level for step in night.copies) and _small_night(plan, lake, state, night.info)
    for step in night.copies:
        if step.level == level:
            view = plan.view(step.view)
            rows = lake.rows(view.name, state)
            out = lake.copy_update_dir(night.batch, view.name)
            kept = state.version(view.name) is not None and small_copy(rows)  # a small copy, made before tonight
            # a last-level copy: its summary-delta as written, read here; its changed groups' rows made here too
            sd = _written_delta(lake, plan, night, view) if last and kept else None
            if sd is None or not write_update(view, _copy_rows(lake, view, state), sd, out):
                view_changes(spark, view, read_copy(spark, lake, view, state), final_delta(view.name), out,
                             change_set=not last, here=small and small_copy(rows),
                             rows=(lambda v=view: _copy_rows(lake, v, state)) if kept and not last else None,
                             sd_rows=(held or {}).get(view.name))
            updated.append(view.name)
    return updated


def _written_delta(lake: Lake, plan: Plan, night: NightPlan, view: View) -> pa.Table | None:
    """A view's final summary-delta as _write_together wrote it (_stored_delta's rows) read in this process: its
    columns without their prefix; None when it is more than DRIVER_ROWS rows or holds a timestamp (Spark reads it)."""
    step = night.view(view.name)
    if parquet_rows(lake.delta_root(night.batch) / f"{PART}={step.part}") > DRIVER_ROWS:
        return None
    files = lake.delta_files(night.batch, step.part)
    if not files:  # no changed group
        return pa.table({c: pa.array([], driver_checks.arrow_type(t)) for c, t in delta_columns(view)})
    cols = [c for c, _ in delta_columns(view)]
    rows = pq.read_table(files, columns=[step.prefix + c for c in cols]).rename_columns(cols)
    # a timestamp's time zone as Spark's writer marks it is left to Spark's own reading
    return None if any(pa.types.is_timestamp(f.type) for f in rows.schema) else rows


def _copy_rows(lake: Lake, view: View, state: LakeState) -> pa.Table:
    """A small lake copy's rows at the state `state` read in this process (deletion vectors honoured), for its changed
    groups' rows made here (nested.update_rows): one read of the copy (count_local)."""
    snap = delta.snapshot(lake.table_path(view.name), state.version(view.name))
    held = delta.read_snapshot(snap)
    count_local("copy", view.name, held.num_rows, delta.file_bytes(f for f, _ in snap.files))
    return held


def _old_extremes(spark: SparkSession, plan: Plan, lake: Lake, night: NightPlan, state: LakeState, level: int) -> None:
    """The lake copies of the views of `level` whose exact MIN/MAX test needs their old extremes
    (exact_minmax 'extreme_deleted', 000 5's C_i), registered as __ns_copy_<view>."""
    for step in night.views:
        if step.level == level and step.exact_minmax == "extreme_deleted":
            view = plan.view(step.view)
            read_copy(spark, lake, view, state).createOrReplaceTempView(emit.rel("copy", view.name))


def _stored_delta(spark: SparkSession, plan: Plan, lake: Lake, night: NightPlan, view: str) -> DataFrame:
    """A view's final summary-delta as an earlier level wrote it (its part folder, prefixed columns)."""
    step, v = night.view(view), plan.view(view)
    files = lake.delta_files(night.batch, step.part)
    cols = [c for c, _ in delta_columns(v)]
    if not files:
        return recompute_frame(spark, plan, v, "old").limit(0)  # no changed group: an empty summary-delta
    df = spark.read.parquet(*[str(f) for f in files])
    return df.select(*[F.col(ident(step.prefix + c, "spark")).alias(c) for c in cols])


def _propagate_level(spark: SparkSession, plan: Plan, lake: Lake, night: NightPlan, level: int, progress: Progress,
                     t0: float, state: LakeState, rows: driver_checks.BatchRows, meter: ReadMeter
                     ) -> Manifest | LevelRecord:
    """One level of the night's plan: its points, each from its chosen parent (the change set, or a point
    of a lower level that an earlier level task stored under _nodes/); the summary-deltas of its views go
    to their part=<i>/ folders, and the points a later level derives from to _nodes/. Each level records
    itself in _levels/; a level invalidates the manifest and every later level's record (they may have
    read what it rewrites), and the last level writes the manifest once every level is recorded for this
    plan and base state."""
    batch, out = night.batch, lake.delta_root(night.batch)
    if not 0 <= level < len(night.levels):
        raise ConfigError(f"propagate --level {level}: the plan's D-lattice has {len(night.levels)} level(s), "
                          f"0..{len(night.levels) - 1} (nightshift plan lists them)")
    earlier = [lake.read_level(batch, k) for k in range(level)]
    for k, r in enumerate(earlier):
        if r is None or r.plan != night.plan or r.base_state != night.base_state:
            raise BatchOrderError(
                f"propagate {batch} --level {level}: level {k} has not run for this plan and base state; "
                f"run propagate --level 0 .. {level} in order (or propagate without --level)")
    lake.invalidate_levels(batch, level)
    mine = night.nodes_of_level(level)
    shared = _share_scans(spark, night, progress, level)
    _copies(spark, plan, lake, night, state, level, lambda v: _stored_delta(spark, plan, lake, night, v))
    _old_extremes(spark, plan, lake, night, state, level)
    raw = along_lattice(spark, plan, night, {n.node for n in mine}, lambda n: lake.node_dir(batch, n))
    for step in mine:  # what later levels derive from: stored, and read back by this level's views too
        if step.feeds_later_level:
            raw[step.node].write.mode("overwrite").parquet(str(lake.node_dir(batch, step.node)))
            raw[step.node] = spark.read.parquet(str(lake.node_dir(batch, step.node)))
    frames = [(step, view, _view_frame(spark, plan, view, step, night.changed, raw, lake, state, rows))
              for step, view in zip(night.views, plan.lake_views) if step.level == level]
    t1 = time.perf_counter()
    for step, _, _ in frames:
        shutil.rmtree(out / f"{PART}={step.part}", ignore_errors=True)  # an emptied delta must not leave an old file
    if frames:
        _write_together(frames, out, replace_all=False, here=_small_night(plan, lake, state, night.info))
    for frame in shared:
        frame.unpersist()
    deltas = _results(frames, out, lambda d: progress(f"propagate {batch} level {level}: summary-delta of {d.view}: {d.rows} rows"))
    if level == len(night.levels) - 1:  # the copies of last-level views follow their summary-deltas just written
        _copies(spark, plan, lake, night, state, level + 1, lambda v: _stored_delta(spark, plan, lake, night, v))
    progress(f"propagate {batch} level {level}/{len(night.levels) - 1}: {len(mine)} lattice point(s), {len(frames)} "
             f"view(s) written in {time.perf_counter() - t1:.1f}s")
    record = LevelRecord(night.plan, night.base_state, level, deltas, round(time.perf_counter() - t0, 3),
                         meter.rows_read(lake, night))
    lake.write_level(batch, record)
    if level < len(night.levels) - 1:
        return record
    every = {d.view: d for r in [*earlier, record] for d in r.deltas}
    missing = [v.name for v in plan.lake_views if v.name not in every]
    if missing:
        raise BatchOrderError(f"propagate {batch}: no level computed the summary-delta of {', '.join(missing)}; "
                              f"rerun propagate --batch {batch} without --level")
    deltas = tuple(every[v.name] for v in plan.lake_views)
    manifest = Manifest(MANIFEST_VERSION, night, deltas, round(sum(r.seconds for r in [*earlier, record]), 3),
                        add_rows_read(r.rows_read for r in [*earlier, record]))
    lake.write_manifest(manifest)
    return manifest


def _results(frames, out: Path, report: Callable[[DeltaResult], None]) -> tuple[DeltaResult, ...]:
    deltas = []
    for step, view, df in frames:
        columns = column_types(view, df) if not view.incremental else ()
        d = DeltaResult(view.name, step.part, step.prefix, parquet_rows(out / f"{PART}={step.part}"), columns)
        report(d)
        checkpoint(f"propagate:after_view:{view.name}")
        deltas.append(d)
    return tuple(deltas)


def _change_distincts(spark: SparkSession, plan: Plan, shape, lake: Lake, info: BatchInfo,
                      rows: driver_checks.BatchRows) -> dict:
    """Summary-delta sizes of every lattice point, measured over the changes and cached per batch in lake/stats/ (a
    rerun of propagate reads them back): counted exactly in this process where the fact's changes and the
    dimensions it joins are known here (driver_checks.change_distincts), else approximately by one Spark job per
    fact table. An attribute that is an expression (a key such as a date's year) is Spark's to compute."""
    key = statistics_wanted(plan, shape)
    cached = lake.read_change_distincts(info.batch, key)
    if cached is not None:
        return cached
    out = {}
    tables = {t.name.lower(): t for t in plan.schema.base_tables}
    for fact, wanted in key.items():
        if plan.schema.table(fact).view is not None:  # a summary view's change set: not computed before the night
            continue
        joins = [j for v in plan.lake_views if v.fact == fact for j in v.joins]
        joins = list({(j.child, j.parent): j for j in joins}.values())
        plain = all(t.lower() in tables for combo in wanted for t, _ in combo)
        counts = driver_checks.change_distincts(rows, plan.schema.table(fact), joins, tables, wanted) if plain else None
        if counts is None:
            row = query(spark, to_dialect(emit.change_distincts(fact, joins, wanted), "spark")).collect()[0]
            counts = [int(row[f"c{i}"]) for i in range(len(wanted))]
        for combo, count in zip(wanted, counts):
            out[tuple(ColumnRef(t, c) for t, c in combo)] = count
    lake.write_change_distincts(info.batch, key, out)
    return out


def along_lattice(spark: SparkSession, plan: Plan, night: NightPlan, compute: set[str] | None = None,
                  stored: Callable[[str], Path] | None = None, known: dict[str, DataFrame] | None = None
                  ) -> dict[str, DataFrame]:
    """The night's summary-deltas before the exact MIN/MAX step, each from its parent in the night's
    plan: the change set (prepare-changes, 4.1), or another summary-delta of this batch (registered as
    __ns_sd_<node>; Spark reuses the parent's shuffle for all its children in the one write job).
    compute: only these points (one level); a parent outside them is read from stored(parent), where
    its level put it."""
    lattice = night.lattice
    raw: dict[str, DataFrame] = {}
    known = known or {}
    for step in night.nodes:
        if compute is not None and step.node not in compute:
            continue
        if step.from_changes:
            node = emit.node_view(lattice.node(step.node)) if lattice else plan.view(step.node)
            sql = emit.summary_delta(node, night.changed, bool(step.preaggregated_by))
        else:
            if step.parent not in raw and step.parent not in known:
                spark.read.parquet(str(stored(step.parent))).createOrReplaceTempView(emit.rel("sd", step.parent))
            edge = lattice.edge(step.parent, step.node)
            sql = emit.derived_summary_delta(edge, lattice.node(step.node), emit.rel("sd", step.parent), plan.schema)
        raw[step.node] = query(spark, to_dialect(sql, "spark"))
        raw[step.node].createOrReplaceTempView(emit.rel("sd", step.node))
    return raw


def _view_frame(spark: SparkSession, plan: Plan, view: View, step: ViewStep, changed: frozenset[str],
                raw: dict[str, DataFrame], lake: Lake, state: LakeState, rows: driver_checks.BatchRows,
                hold: bool = False) -> DataFrame:
    """What tonight writes for a view: its summary-delta, or (recompute) its whole contents. lake, state: where
    the base's rows before the batch are (its exact MIN/MAX may read them); rows: the batch's, where small. hold:
    hold the view's lattice point in this process before its exact MIN/MAX (_summary_delta), on a small night."""
    if step.mode == "recompute":
        return recompute_frame(spark, plan, view)
    return _summary_delta(spark, plan, view, step, changed, raw[view.name], lake, state, rows, hold)


def _summary_delta(spark: SparkSession, plan: Plan, view: View, step: ViewStep, changed: frozenset[str],
                   sd: DataFrame, lake: Lake, state: LakeState, rows: driver_checks.BatchRows,
                   hold: bool = False) -> DataFrame:
    """The summary-delta of one view (Section 4.1; MIN/MAX of groups that lost rows made exact from
    the base, since a parent summary-delta does not know the groups it did not touch), with exactly
    the summary table's columns (a lattice-friendly point drops its hidden attributes here). hold: on a small
    night the view's lattice point, which the lost groups and the exact MIN/MAX both read, is held in this
    process first (_held), not computed by each of them."""
    if step.exact_minmax == "monotone":  # no extreme went that an inserted one does not re-establish (runtime.night)
        sd = sd.withColumn(emit.LOST, F.lit(0).cast("int"))
    elif step.exact_minmax:
        point = _held(sd) if hold else None
        if point is not None:
            sd = spark.createDataFrame(point)
            sd.createOrReplaceTempView(emit.rel("sd", view.name))
        # lost groups and their exact extremes are few next to the base: broadcast them
        old = emit.rel("copy", view.name) if step.exact_minmax == "extreme_deleted" else None
        lost = query(spark, to_dialect(emit.lost_groups(view, step.exact_minmax != "lost", old), "spark"))
        # read by several queries (the test below, each argument's recompute, the night's write; _extremes_by_month's
        # passes): computed once, with the summary-delta under it, and new column identities (the night joins it to sd)
        lost = lost.localCheckpoint().toDF(*lost.columns)
        none_lost = lost.isEmpty()  # looked at first: a night where no group lost its extreme reads no rows for it
        F.broadcast(lost).createOrReplaceTempView(emit.rel("lost", view.name))
        for arg in emit.minmax_arguments(view):
            exact = None
            counting = None if none_lost else _counting(spark, plan, lake, state, view, arg, lost)
            if arg.index in step.by_month and not none_lost:
                exact = _extremes_by_month(spark, plan, view, arg, changed, lake, state, rows, counting)
            if exact is None:
                counted = _base_counts(spark, state, view, arg, counting, emit.rel("lost", view.name))
                exact = query(spark, to_dialect(emit.minmax_recompute(view, arg, changed, old_counts=counted), "spark"))
            if none_lost:
                exact = exact.limit(0)  # Spark's optimizer drops the whole scan under LIMIT 0
            F.broadcast(exact).createOrReplaceTempView(emit.rel("exact", f"{view.name}_{arg.index}"))
        sd = query(spark, to_dialect(emit.with_exact_minmax(view), "spark"))
    if view.has_holistic:  # every changed group's holistic values, from its auxiliary view's rows after the batch
        sd = with_holistic_values(spark, view, sd)
    columns = [k.name for k in view.keys] + [s.column for s in view.stored] + [emit.LOST]
    return sd.select(*[F.col(ident(c, "spark")) for c in columns])


def _extremes_by_month(spark: SparkSession, plan: Plan, view: View, arg: Argument, changed: frozenset[str],
                       lake: Lake, state: LakeState, rows: driver_checks.BatchRows, counting: _Counting | None
                       ) -> DataFrame | None:
    """The exact MIN/MAX of `arg` (the date column the base's months are of) for the lost groups, reading
    the months where the lost extremes were first: a group whose MIN lay in a month keeps, almost always,
    another value in that month, and the first pass reads every row up to that month's end, so the smallest
    value it finds is exact. Only the groups it leaves unresolved (none left in those months) are read again
    over every month. None: no deleted value marks where the extremes were, or the first pass would read
    every month (the caller reads them all once).

    Where the base's term is counted here (`counting`, _counting of the lost groups) and the batch's rows of the fact
    are known here (`rows`), the bounds and the first pass are made here too (driver_checks.deleted_bounds,
    first_extremes): no Spark query."""
    batch = rows.changes(plan.schema.table(view.fact)) if counting is not None else None
    if batch is not None:
        lo, hi = driver_checks.deleted_bounds(batch[1], counting.keys, counting.value, counting.probe)
    else:
        bounds = query(spark, to_dialect(emit.deleted_extremes(view, arg), "spark")).collect()[0]
        lo, hi = bounds["lo"], bounds["hi"]
    window = emit.extremes_within(view, arg, lo, hi, lake.months(view.fact, state))
    if window is None:
        return None
    counts = None if counting is None else _counts(counting, state, view, window, rows)
    if counts is not None and batch is not None:
        first = _first_here(spark, view, arg, counting, counts, batch, window)
    else:
        counted = None if counts is None else _register_counts(spark, view, arg, counts, emit.rel("lost", view.name))
        first = query(spark, to_dialect(emit.minmax_recompute(view, arg, changed, window.cond, old_counts=counted),
                                        "spark")).localCheckpoint()
    name = emit.rel("first", f"{view.name}_{arg.index}")
    first.createOrReplaceTempView(name)
    resolved = query(spark, to_dialect(emit.resolved_groups(name, window.exact), "spark"))
    rest = query(spark, to_dialect(emit.unresolved_groups(view, name, window.exact), "spark"))
    if rest.isEmpty():
        return resolved
    rest_name = emit.rel("rest", f"{view.name}_{arg.index}")
    F.broadcast(rest).createOrReplaceTempView(rest_name)
    counted = _base_counts(spark, state, view, arg, _counting(spark, plan, lake, state, view, arg, rest), rest_name)
    again = query(spark, to_dialect(emit.minmax_recompute(view, arg, changed, lost=rest_name, old_counts=counted),
                                    "spark"))
    return resolved.unionByName(again)


class _Counting(NamedTuple):
    """A view whose base term of an exact MIN/MAX the command counts (_counting), for some groups."""

    snap: delta.DeltaSnapshot
    keys: list[str]  # the fact's columns that are the view's keys (declared names), in the keys' order
    value: str  # the fact's column the MIN/MAX is of
    lake_names: dict[str, str]  # declared name -> the lake's
    probe: pa.Table  # the groups, by `keys`


def _countable(plan: Plan, lake: Lake, state: LakeState, view: View, arg: Argument) -> _Counting | None:
    """_counting but for its groups (`probe` left empty): whether the base's term of minmax_recompute can be counted
    in this process exactly as Spark would for some groups of the view."""
    columns = emit.fact_columns(view, arg)
    version = state.version(view.fact)
    if columns is None or not view.keys or version is None or arg.type.upper() != "DATE":
        return None
    table = plan.schema.table(view.fact)
    if table.view is not None:  # a map or auxiliary view's rows: not a base table's
        return None
    declared = {c.name: c for c in table.columns}
    keys, value = columns
    if value in keys or any(n not in declared or types.family(declared[n].type) in ("float", "timestamp")
                            for n in [*keys, value]):
        return None
    if declared[value].type.upper() != "DATE" or any(declared[n].type != k.type for n, k in zip(keys, view.keys)):
        return None
    snap = delta.snapshot(lake.table_path(view.fact), version)
    lake_names = driver_checks.held_as_declared(snap, table)
    if lake_names is None or snap.mapped:
        return None
    return _Counting(snap, keys, value, dict(zip(table.column_names, lake_names)), pa.table({}))


def _counting(spark: SparkSession, plan: Plan, lake: Lake, state: LakeState, view: View, arg: Argument,
              groups: DataFrame) -> _Counting | None:
    """Whether the base's term of minmax_recompute for `groups` is counted in this process exactly as Spark would
    (runtime.delta.value_counts), and what it reads. None (the caller's query reads the base): a grand total; the
    view reads a map, joins a dimension or filters; a key or the argument is not a column of the fact as it stands
    (as declared, in its declared type), or the argument is a key; a key of floating point or a timestamp, an
    argument not a DATE; the lake's columns not as declared; a NULL key; or more than DRIVER_ROWS groups."""
    countable = _countable(plan, lake, state, view, arg)
    if countable is None:
        return None
    batches = list(arrow_batches(groups.select(*[ident(k.name, "spark") for k in view.keys]).limit(DRIVER_ROWS + 1)))
    probe = pa.Table.from_batches(batches) if batches else None
    if probe is None or probe.num_rows > DRIVER_ROWS or any(c.null_count for c in probe.columns):
        return None
    return countable._replace(probe=probe.rename_columns(countable.keys))


def _tallies(plan: Plan, lake: Lake, state: LakeState, table: Table, dels: pa.Table) -> list[delta.Tally]:
    """What the delete check's pass over `table` (driver_checks.matched) counts beside its matches, so that the
    first pass of a lost extreme (_extremes_by_month) reads nothing more: for each view and argument whose exact
    MIN/MAX _countable counts over `table` and whose argument the base's months are of (runtime.night.month_arguments),
    the base's term of minmax_recompute for every group that may lose its extreme tonight (_may_lose: the lost
    groups are among them whatever the inserts), within the bounds extremes_within gives those groups (the lost
    groups' bounds lie inside them). Nothing asked for a view and argument with no group that may lose its extreme
    (or more than DRIVER_ROWS), or bounds that leave no month out."""
    tallies = []
    for view in plan.lake_views:
        if view.fact != table.name:
            continue
        by_month = month_arguments(view, state.partitions)
        for arg in emit.minmax_arguments(view):
            if arg.index not in by_month:  # no first pass by month (_extremes_by_month)
                continue
            counting = _countable(plan, lake, state, view, arg)
            if counting is None:
                continue
            groups = _may_lose(lake, state, view, arg, counting.keys, counting.value, dels)
            if not groups.num_rows or groups.num_rows > DRIVER_ROWS:
                continue
            lo, hi = driver_checks.deleted_bounds(dels, counting.keys, counting.value, groups)
            window = emit.extremes_within(view, arg, lo, hi, lake.months(view.fact, state))
            if window is None:
                continue
            lake_keys = [counting.lake_names[k] for k in counting.keys]
            tallies.append(delta.Tally(lake_keys, counting.lake_names[counting.value], groups.rename_columns(lake_keys),
                                       set(window.months), window.upto, window.since))
    return tallies


def _may_lose(lake: Lake, state: LakeState, view: View, arg: Argument, keys: list[str], value: str,
              dels: pa.Table) -> pa.Table:
    """The groups (`keys`, the fact's names) of the deleted rows `dels` that may lose their MIN or MAX of `arg`
    tonight: each group with a deleted value, or, where the view's lake copy at the lake's state is read here (at
    most DRIVER_ROWS rows, the view's own columns), only those whose smallest deleted value is at most the MIN
    there (whose largest at least its MAX), or that hold no such extreme there."""
    held = dels.select([*keys, value]).filter(pc.is_valid(dels.column(value)))
    per = held.group_by(keys, use_threads=False).aggregate([(value, "min"), (value, "max")])
    version = state.version(view.name)
    if not per.num_rows or version is None or lake.rows(view.name, state) > DRIVER_ROWS:
        return per.select(keys)
    snap = delta.snapshot(lake.table_path(view.name), version)
    sides = [(kind, s.column) for kind in ("min", "max") if (s := view.stored_of(kind, arg.index)) is not None]
    names = [k.name for k in view.keys] + [c for _, c in sides]
    if snap.mapped or not set(names) <= set(snap.schema.names):
        return per.select(keys)
    copy = delta.read_snapshot(snap, names).rename_columns([*keys, *(f"_c_{kind}" for kind, _ in sides)])
    count_local("copy", view.name, copy.num_rows, delta.columns_bytes(snap, names))
    try:
        both = per.join(copy.cast(pa.schema([per.schema.field(k) for k in keys]
                                            + [copy.schema.field(f"_c_{kind}") for kind, _ in sides])),
                        keys, join_type="left outer", use_threads=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # a key type Arrow's join or cast does not take
        return per.select(keys)
    reach = []
    for kind, _ in sides:
        old, deleted = both.column(f"_c_{kind}"), both.column(f"{value}_{kind}")
        test = pc.less_equal if kind == "min" else pc.greater_equal
        reach.append(pc.or_kleene(pc.is_null(old), test(deleted, old.cast(deleted.type))))
    return both.filter(reach[0] if len(reach) == 1 else pc.or_kleene(*reach)).select(keys)


def _counts(counting: _Counting, state: LakeState, view: View, window: emit.Window | None = None,
            rows: driver_checks.BatchRows | None = None) -> pa.Table | None:
    """The base's term counted (runtime.delta.value_counts, in `window`'s months and values when given): the keys
    (the fact's declared names), `_v` and `_n`; None when Arrow's join or cast does not take a key's type. Where the
    delete check's pass counted them already (one of `rows`' tallies of the fact, _tallies: its groups and bounds hold these),
    they are taken from there, and only the months that pass did not read are read."""
    c = counting
    by_month = window is not None and state.partitions.get(view.fact) is not None
    lake_keys, value = [c.lake_names[k] for k in c.keys], c.lake_names[c.value]
    probe = c.probe.rename_columns(lake_keys)
    below, since = (window.upto, window.since) if window else (None, None)
    months = set(window.months) if by_month else None

    def read(partitions: set | None) -> pa.Table:
        counts, read = delta.value_counts(c.snap, lake_keys, value, probe, below, since, partitions)
        count_local("base", view.fact, read.rows, read.bytes)
        return counts

    try:
        tallied = rows.tallied.get(view.fact, []) if rows is not None and window is not None else []
        held = next(filter(None, (_tallied_counts(t, lake_keys, value, probe, below, since, months)
                                  for t in tallied)), None)
        if held is None:
            counts = read(months)
        else:
            counts, rest = held
            if rest:
                counts = pa.concat_tables([counts, read(rest).cast(counts.schema)])
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # a key type Arrow's join or cast does not take
        return None
    return counts.rename_columns([*c.keys, "_v", "_n"])


def _tallied_counts(tallied: driver_checks.Tallied, keys: list[str], value: str, probe: pa.Table, below, since,
                    months: set | None) -> tuple[pa.Table, set] | None:
    """value_counts of `probe`'s groups (`keys`, the lake's names) within `below` and `since`, in `months` (the
    months of a table laid out by month), taken from the counts the delete check's pass made (`tallied`), and the
    months of `months` that pass did not count (an empty set: none). None: the tally does not hold them (other
    columns, groups it did not count, narrower bounds, or a table not read by month)."""
    tally, counts, covered = tallied
    if tally.keys != keys or tally.value != value or months is None:
        return None
    if (below is not None and (tally.below is None or below > tally.below)) or \
            (since is not None and (tally.since is None or since < tally.since)):
        return None
    probe = probe.cast(pa.schema([counts.schema.field(k) for k in keys]))
    if probe.join(tally.probe.cast(probe.schema), keys, join_type="left anti", use_threads=False).num_rows:
        return None
    held = counts.join(probe, keys, join_type="left semi", use_threads=False)
    held = held.filter(delta.within(held.column("_v"), below, since))
    return held, months - covered


def _register_counts(spark: SparkSession, view: View, arg: Argument, counts: pa.Table, groups_name: str) -> str:
    """`counts` (_counts) registered as a relation for minmax_recompute's old_counts: returns its name."""
    name = emit.rel("counted", f"{groups_name}_{arg.index}")
    counts = counts.rename_columns([k.name for k in view.keys] + ["_v", "_n"])
    F.broadcast(spark.createDataFrame(counts)).createOrReplaceTempView(name)
    return name


def _first_here(spark: SparkSession, view: View, arg: Argument, counting: _Counting, counts: pa.Table,
                batch: tuple[pa.Table, pa.Table], window: emit.Window) -> DataFrame:
    """minmax_recompute's first pass made here (driver_checks.first_extremes) from the base's term counted and the
    batch's rows, as a relation of its columns and types (the view's keys, _x_min_<i>, _x_max_<i>)."""
    ins, dels = batch
    found = driver_checks.first_extremes(counts, ins, dels, counting.keys, counting.value, counting.probe,
                                         window.upto, window.since)
    names = [k.name for k in view.keys] + [f"_x_min_{arg.index}", f"_x_max_{arg.index}"]
    return F.broadcast(spark.createDataFrame(found.rename_columns(names)))


def _base_counts(spark: SparkSession, state: LakeState, view: View, arg: Argument, counting: _Counting | None,
                 groups_name: str) -> str | None:
    """The base's term of minmax_recompute for the groups `counting` was made for (the relation `groups_name`)
    counted in this process (runtime.delta.value_counts: one pass over the fact's files, the keys' and the
    argument's columns only), registered as a relation: returns its name, for minmax_recompute's old_counts.
    Spark's plan of that term reads the same columns of every row but probes each against the groups in one task
    per file, several times slower. None when the counts are not made here exactly as Spark would (`counting`
    None, _counting; the caller's query reads the base)."""
    counts = None if counting is None else _counts(counting, state, view)
    return None if counts is None else _register_counts(spark, view, arg, counts, groups_name)


def _held(frame: DataFrame) -> pa.Table | None:
    """The rows of a lattice point later levels derive from, or of an early view's summary-delta, on a small night
    (_small_night), collected into this process in one Spark job (where a checkpoint, then the copy's update
    streaming them here, then the night's write took three), when every column's type goes to Arrow and back to
    Spark unchanged (session.PLAIN_TYPES); None: Spark keeps them (localCheckpoint)."""
    if not plain(frame.schema.fields):
        return None
    return frame.toArrow()


def _kept(frame: DataFrame, small: bool) -> tuple[DataFrame, pa.Table | None]:
    """`frame` computed once for the queries that read it next: on a small night its rows held in this process
    (_held) and the frame a relation of them, else (or for a type _held leaves to Spark) checkpointed by Spark. Returns
    the frame to read and the rows held (None: Spark keeps them)."""
    rows = _held(frame) if small else None
    if rows is None:
        return frame.localCheckpoint(), None
    return frame.sparkSession.createDataFrame(rows), rows


def _point_rows(view: View, step: ViewStep, point: pa.Table | None) -> pa.Table | None:
    """A view's summary-delta taken from the rows of its own lattice point held in this process (`point`, _held),
    where _summary_delta would only select its columns from it: kept incrementally, no exact MIN/MAX to make (or
    one no deletion can lose: `monotone`, whose lost flag is 0), no holistic values. None: Spark computes it."""
    if point is None or step.mode == "recompute" or view.has_holistic or step.exact_minmax not in ("", "monotone"):
        return None
    names = [k.name for k in view.keys] + [s.column for s in view.stored]
    if len(set(point.column_names)) < point.num_columns or not set(names) <= set(point.column_names):
        return None
    if step.exact_minmax == "monotone":
        lost = pa.array([0] * point.num_rows, pa.int32())
    elif emit.LOST in point.column_names:
        lost = point.column(emit.LOST)
    else:
        return None
    return pa.table([*point.select(names).columns, lost], names=[*names, emit.LOST])


def _small_night(plan: Plan, lake: Lake, state: LakeState, info: BatchInfo) -> bool:
    """Whether the night's summary-deltas are few enough rows to be streamed to this process and written here
    (_write_here) rather than by Spark's writer: a batch of at most WRITE_HERE_CHANGES change rows, and no view kept by
    recompute over a table of more than DRIVER_ROWS rows (its summary-delta is the whole view). Spark's writer
    costs a small night a shuffle, a sort and an output commit protocol (about a third of a second on a warm
    server); a large one it writes in parallel, where this process would take every row through one stream."""
    if info.rows > WRITE_HERE_CHANGES:
        return False
    return not any(v.mode == "recompute" and (v.reads or any(lake.rows(t, state) > DRIVER_ROWS for t in v.tables))
                   for v in plan.lake_views)


def _write_part(out: Path, part: int, rows: pa.Table) -> None:
    """One part's rows (its own prefixed columns) written to its part=<i>/ folder as _write_here writes a part: one
    Parquet file, none (and no folder) when there are no rows."""
    if rows.num_rows:
        (out / f"{PART}={part}").mkdir(parents=True, exist_ok=True)
        pq.write_table(rows, out / f"{PART}={part}" / f"part-00000-{uuid.uuid4()}.snappy.parquet")


def _write_here(union: DataFrame, out: Path, own: dict[int, list[str]]) -> None:
    """The union of _write_together streamed to this process (session.arrow_batches) and written as Spark's writer
    lays it out, but for the columns: one Parquet file in each part=<i>/ folder that has rows, of that part's own
    columns (`own`: by part; the others, NULL in its rows, are left out: readers take a part's columns by its
    prefix), then _SUCCESS (the callers removed the folders it writes: a rerun after a crash writes them whole
    again). One batch at a time is held."""
    out.mkdir(parents=True, exist_ok=True)
    writers: dict[int, pq.ParquetWriter] = {}
    name = f"part-00000-{uuid.uuid4()}.snappy.parquet"
    try:
        for batch in arrow_batches(union):
            column = batch.column(PART)
            for p in pc.unique(column).to_pylist():
                rows = batch.filter(pc.equal(column, p)).select(own[p])
                if p not in writers:
                    (out / f"{PART}={p}").mkdir(parents=True, exist_ok=True)
                    writers[p] = pq.ParquetWriter(out / f"{PART}={p}" / name, rows.schema)
                writers[p].write_batch(rows)
    finally:
        for w in writers.values():
            w.close()
    (out / "_SUCCESS").touch()


def _write_together(frames: list[tuple[ViewStep, View, DataFrame]], out: Path, replace_all: bool = True,
                    here: bool = False, held: dict[str, pa.Table] | None = None) -> None:
    """All summary-deltas of the night (or of one level) in ONE Spark job: their stages run side by
    side, the base tables the night shares are scanned once for all of them (_share_scans), and the night
    pays one output commit. Each view's columns get the prefix v<i>__ and its rows land in part=<i>/ (the
    warehouse reads back only its own columns). replace_all=False replaces only the part=<i>/ folders
    written (other levels' stay); the files beside them (_night.json, _copies/) stay. No frames (a
    project with no summary view): nothing is written.

    The union is one SQL statement over the frames (session.query's relations), every part selecting its own
    columns and a typed NULL for every other part's: Spark analyzes it once, where a chain of
    unionByName calls re-analyzed the growing union once per view (quadratic in a project's views).

    here: a small night's (_small_night) rows are streamed to this process and written here (_write_here) when
    every column is of a type in session.PLAIN_TYPES; else, and for every other night, Spark's writer writes them.
    held: the summary-deltas already held in this process (_held), by view: written from here as _write_here writes
    a part, not through Spark again."""
    if replace_all:  # every part=<i>/ goes (an earlier run may have had more views); _night.json and _copies/ stay
        for old in out.glob(f"{PART}=*"):
            shutil.rmtree(old)
    held = held or {}
    here_parts = [(step, held[view.name]) for step, view, _ in frames if view.name in held]
    frames = [f for f in frames if f[1].name not in held]
    if frames:
        _write_union(frames, out, here)
    for step, rows in here_parts:  # after Spark's writer, whose commit replaces only the parts it writes
        _write_part(out, step.part, rows.rename_columns([step.prefix + c for c in rows.column_names]))
    if here_parts:
        out.mkdir(parents=True, exist_ok=True)
        (out / "_SUCCESS").touch()


def _write_union(frames: list[tuple[ViewStep, View, DataFrame]], out: Path, here: bool) -> None:
    """_write_together's frames as one union (its docstring)."""
    spark = frames[0][2].sparkSession
    fields = [(step, df.schema.fields) for step, _, df in frames]
    every = [(step.prefix + f.name, f.dataType.simpleString()) for step, fs in fields for f in fs]
    parts, relations = [], {}
    for (step, _, df), (_, fs) in zip(frames, fields):
        relation = emit.rel("part", str(step.part))
        relations[relation] = df
        own = {step.prefix + f.name: f.name for f in fs}
        cols = [f"{step.part} AS {PART}"] + [
            f"{ident(own[c], 'spark')} AS {ident(c, 'spark')}" if c in own else f"{_null_of(t)} AS {ident(c, 'spark')}"
            for c, t in every]
        parts.append(f"SELECT {', '.join(cols)} FROM {relation}")
    union = query(spark, "\nUNION ALL\n".join(parts), relations)
    if here and plain(f for _, fs in fields for f in fs):
        _write_here(union, out, {step.part: [step.prefix + f.name for f in fs] for step, fs in fields})
    else:
        # each part's last stage writes its own rows (no shuffle of the union into one task per part first)
        union.write.mode("overwrite").option("partitionOverwriteMode", "dynamic").partitionBy(PART) \
            .parquet(str(out))


def _null_of(spark_type: str) -> str:
    """A NULL of a Spark type (as DataType.simpleString spells it), for a column of another part."""
    return "NULL" if spark_type in ("void", "null") else f"CAST(NULL AS {spark_type})"
