"""The nested mode, as a night executes it (paper 000; lattice/passes/nested.py says how the plan
keeps such a view).

For every incremental view V another view reads, the lake keeps a copy of V's stored rows
(lake/tables/<V>/, a Delta table whose version the lake's state records with the base tables'). Tonight, once V's summary-delta is
final (exact MIN/MAX included), its changed groups' new stored rows are computed from the copy by
Figure 8 (the warehouse's own rule), written to lake/deltas/batch_id=<ID>/_copies/<V>/ for apply-base,
and V's served rows become the change set of the table outer views read (000 §6: an update is the
delete of the old row and the insert of the new one):

    __ns_old_<V>   V's served rows at the base state (the copy)
    __ns_del_<V>   the old served rows of the groups that changed
    __ns_ins_<V>   their new served rows (groups that still exist and pass HAVING)
    __ns_new_<V>   V's served rows after the batch
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lattice import emit, types
from lattice.ir import DISTINCT_COUNT, View
from lattice.sql import ident, to_dialect
from runtime.lake import Lake, LakeState
from spark_jobs import driver_checks
from spark_jobs.changes import column, read_table, write_folder
from spark_jobs.lake_tables import DRIVER_ROWS
from spark_jobs.session import arrow_batches, plain, query


def copy_columns(view: View) -> list[tuple[str, str]]:
    """The copy's layout: the view's storage columns (group keys and stored aggregates)."""
    return [(k.name, k.type) for k in view.keys] + [(s.column, s.type) for s in view.stored]


def read_copy(spark: SparkSession, lake: Lake, view: View, state: LakeState) -> DataFrame:
    """V's stored rows at the base state `state` (none before its first materialize or night)."""
    df = read_table(spark, lake, view.name, state)
    cols = copy_columns(view)
    if df is None:
        return spark.range(0).select(*[F.lit(None).cast(types.spark_type(t)).alias(c) for c, t in cols])
    return df.select(*[column(c).cast(types.spark_type(t)).alias(c) for c, t in cols])


def small_copy(rows: int) -> bool:
    """Whether a copy of `rows` rows (at most DRIVER_ROWS) has its changed groups' rows made by this process: read
    here and merged with its summary-delta (update_rows, propagate._copies), or, when that gives way to Spark and no
    view reads its change set on a small night, streamed here and written (view_changes here=True)."""
    return rows <= DRIVER_ROWS


def _write_here(df: DataFrame, out: Path) -> None:
    """The rows of `df` streamed to this process and written to `out` as Spark's writer leaves a folder (no job of
    Spark's writer: its output commit costs a small copy more than its rows). Spark's writer writes them when a
    column's type is not in session.PLAIN_TYPES, and writes the empty file of df's columns when there are no rows."""
    batches = list(arrow_batches(df)) if plain(df.schema.fields) else []
    if batches:
        write_folder(out, pa.Table.from_batches(batches))
    else:
        df.coalesce(1).write.mode("overwrite").parquet(str(out))


def register_old(spark: SparkSession, view: View, copy: DataFrame) -> None:
    """__ns_old_<V>: V's served rows at the base state (materialize; a night before its updates)."""
    copy.createOrReplaceTempView(emit.rel("copy", view.name))
    query(spark, to_dialect(emit.served_rows(view, emit.rel("copy", view.name)), "spark")).createOrReplaceTempView(
        emit.rel("old", view.name))


def view_changes(spark: SparkSession, view: View, copy: DataFrame, sd: DataFrame, out: Path,
                 change_set: bool = True, here: bool = False, rows: Callable[[], pa.Table] | None = None,
                 sd_rows: pa.Table | None = None) -> DataFrame | None:
    """Register V's change set (module docstring) from its copy and final summary-delta `sd`; write
    the changed groups' new stored rows to `out` (apply-base makes them the next copy). Returns them.
    change_set False (no view reads V's change set tonight): only write them, in one Spark job; here (a small
    copy, small_copy): streamed to this process and written here. rows: reads the copy's rows in this process (a small
    copy): with change_set, the changed groups' old and new rows are made here (update_rows) from them and `sd`
    streamed here (or `sd_rows`, its rows already held here), no Spark job, unless `sd` is large or Arrow might not
    give Spark's values (then the copy is not read here)."""
    name = view.name
    copy.createOrReplaceTempView(emit.rel("copy", name))
    # the final summary-delta under its own name: __ns_sd_<V> stays V's raw lattice point (with its
    # lattice-friendly hidden attributes), which points of this level may still derive from
    sd.createOrReplaceTempView(emit.rel("final", name))
    if not change_set:  # the copy's rows of the changed groups are read once, by this write
        updated = query(spark, to_dialect(emit.view_update(view, emit.rel("copy", name), emit.rel("final", name)), "spark"))
        if here:
            _write_here(updated, out)
        else:
            updated.coalesce(1).write.mode("overwrite").parquet(str(out))
        return None
    # the copy's rows of the changed groups, read from the copy once and kept: the new rows and the
    # deleted old rows come from them (only the MIN/MAX recomputations of outer views read the whole copy)
    made = _updated_here(spark, view, rows, sd, sd_rows)
    if made is not None:  # the same rows as written, carried in the plans of the queries below
        touched, updated = made
        write_folder(out, updated)
        spark.createDataFrame(touched).createOrReplaceTempView(emit.rel("touched", name))
        updated = spark.createDataFrame(updated)
    else:
        touched = query(spark, to_dialect(emit.changed_rows(view, emit.rel("copy", name), emit.rel("final", name), True),
                                          "spark"))
        touched.localCheckpoint().createOrReplaceTempView(emit.rel("touched", name))
        updated = query(spark, to_dialect(emit.view_update(view, emit.rel("touched", name), emit.rel("final", name)),
                                          "spark"))
        updated.coalesce(1).write.mode("overwrite").parquet(str(out))
        updated = spark.read.parquet(str(out))  # read back: every query below sees these rows as written
    updated.createOrReplaceTempView(emit.rel("updated", name))
    copy_rel, sd_rel, upd = emit.rel("copy", name), emit.rel("final", name), emit.rel("updated", name)
    touched_rel = emit.rel("touched", name)
    alive = f"(SELECT * FROM {upd} WHERE _ns_count > 0)"
    keyless = f"EXISTS (SELECT 1 FROM {sd_rel})" if not view.keys else None
    sql = {
        "old": emit.served_rows(view, copy_rel),
        "del": emit.served_rows(view, touched_rel, keyless),
        "ins": emit.served_rows(view, alive, keyless),
        "new": emit.served_rows(view, f"({emit.changed_rows(view, copy_rel, sd_rel, False)} UNION ALL "
                                      f"SELECT {', '.join(c for c, _ in _quoted(view))} FROM {alive} AS a)"),
    }
    for kind, text in sql.items():
        query(spark, to_dialect(text, "spark")).createOrReplaceTempView(emit.rel(kind, name))
    return updated


def write_update(view: View, rows: pa.Table, sd: pa.Table, out: Path) -> bool:
    """The changed groups' new stored rows made here (update_rows) from the copy's rows and the final summary-delta
    `sd`, written to `out` as view_changes writes them; False, nothing written: Spark makes them."""
    made = update_rows(view, rows, sd)
    if made is not None:
        write_folder(out, made[1])
    return made is not None


def _updated_here(spark: SparkSession, view: View, rows: Callable[[], pa.Table] | None, sd: DataFrame,
                  sd_rows: pa.Table | None = None) -> tuple[pa.Table, pa.Table] | None:
    """update_rows over the copy's rows (read by rows(), once `sd` is known to serve) and `sd` streamed here, or
    `sd_rows`, its rows held here already (at most DRIVER_ROWS of them, each column a type that goes to Arrow and back
    to Spark unchanged, session.PLAIN_TYPES); None: Spark makes them."""
    if rows is None or not plain(sd.schema.fields):
        return None
    if sd_rows is not None:
        delta = sd_rows
    else:
        batches = list(arrow_batches(sd.limit(DRIVER_ROWS + 1)))
        delta = pa.Table.from_batches(batches) if batches else None
    if delta is None or not delta.num_rows or delta.num_rows > DRIVER_ROWS:
        return None  # no row (Spark's writer leaves the empty folder apply-base expects), or too many
    return update_rows(view, rows(), delta)


def _quoted(view: View) -> list[tuple[str, str]]:
    return [(ident(c), t) for c, t in copy_columns(view)]


def next_copy(spark: SparkSession, view: View, copy: DataFrame, updated: DataFrame) -> DataFrame:
    """The copy after the batch: every unchanged group as it was, each changed group's new row (a
    group whose count reached 0 is gone). apply-base writes it beside the old version."""
    copy.createOrReplaceTempView(emit.rel("copy", view.name))
    updated.createOrReplaceTempView(emit.rel("updated", view.name))
    kept = emit.changed_rows(view, emit.rel("copy", view.name), emit.rel("updated", view.name), False)
    cols = ", ".join(c for c, _ in _quoted(view))
    sql = f"{kept} UNION ALL SELECT {cols} FROM {emit.rel('updated', view.name)} WHERE _ns_count > 0"
    return query(spark, to_dialect(sql, "spark"))


def next_copy_rows(view: View, copy: pa.Table, updated: pa.Table) -> pa.Table | None:
    """next_copy over Arrow tables, in this process (a small copy: no Spark job): the copy's rows of every
    unchanged group, then each changed group's new row (a group whose count reached 0 is gone), in the copy's
    column types. Groups match on equal keys, NULL equal to NULL and NaN to NaN, as Spark's <=> matches them.
    None when the copy lacks one of the view's storage columns (the Spark query writes it)."""
    names = {n.lower(): n for n in copy.column_names}
    upd = {n.lower(): n for n in updated.column_names}
    cols = [c for c, _ in copy_columns(view)]
    if any(c.lower() not in names or c.lower() not in upd for c in cols):
        return None
    keys = [k.name for k in view.keys]
    copy = copy.select([names[c.lower()] for c in cols]).rename_columns(cols)
    updated = updated.select([upd[c.lower()] for c in cols]).rename_columns(cols).cast(copy.schema)
    if keys:
        changed = set(_groups(updated, keys))
        copy = copy.filter(pa.array([g not in changed for g in _groups(copy, keys)], pa.bool_())) if len(copy) else copy
    elif len(updated):  # a grand total: its one group changed
        copy = copy.slice(0, 0)
    alive = updated.filter(pc.greater(updated.column("_ns_count"), 0))
    return pa.concat_tables([copy, alive])


def _groups(table: pa.Table, keys: list[str]):
    """Each row's group (its keys' values) as a hashable tuple that matches as Spark's <=> does: NULL equal to
    NULL, NaN to NaN."""
    return zip(*(["NaN" if v != v else v for v in table.column(k).to_pylist()] for k in keys))


def update_rows(view: View, copy: pa.Table, sd: pa.Table) -> tuple[pa.Table, pa.Table] | None:
    """emit.changed_rows (keep=True) and emit.view_update over Arrow tables, in this process (a small copy: no Spark
    job): the copy's rows of the groups the final summary-delta `sd` changes, and those groups' new stored rows by
    Figure 8 (lattice.refresh: a new group's row from its delta, an existing one's merged with it; a row whose
    _ns_count is 0 is a group that is gone), their keys as `sd` holds them and each stored aggregate in its type.
    None where Arrow might not give Spark's values (a column missing or not cast exactly, a NaN under MIN/MAX, an
    overflow): then Spark computes them."""
    cols = copy_columns(view)
    keys = [k.name for k in view.keys]
    have = {n.lower(): n for n in copy.column_names}
    got = {n.lower(): n for n in sd.column_names}
    if any(c.lower() not in have or c.lower() not in got for c, _ in cols) or emit.LOST.lower() not in got:
        return None
    old = {}
    for c, t in cols:
        old[c] = driver_checks.typed(copy.column(have[c.lower()]), t)
        if old[c] is None:
            return None
    copy = pa.table(old)
    sd = sd.select([got[c.lower()] for c, _ in cols] + [got[emit.LOST.lower()]]).rename_columns(
        [c for c, _ in cols] + [emit.LOST])
    # each summary-delta row's group in the copy (its row number), or null: a new group
    if keys:
        at = {g: i for i, g in enumerate(_groups(copy, keys))}
        index = pa.array([at.get(g) for g in _groups(sd, keys)], pa.int64())
    else:  # a grand total: its one group changed when the summary-delta has a row
        index = pa.array([0 if len(copy) else None] * len(sd), pa.int64())
    matched = pc.is_valid(index)
    touched = copy.take(pa.array(sorted(set(index.drop_null().to_pylist())), pa.int64()))
    t = copy.take(index)
    # a CASE WHEN condition that is NULL takes the ELSE branch, in Spark as here
    lost = pc.fill_null(pc.equal(sd.column(emit.LOST), 1), False)
    out = {k: sd.column(k) for k in keys}
    try:
        for s in view.stored:
            want = driver_checks.arrow_type(s.type)
            c = driver_checks.typed(sd.column(s.column), s.type)
            if c is None:
                return None
            old_value = t.column(s.column)
            if s.kind in ("count_star", "count"):
                value = pc.if_else(matched, pc.add_checked(old_value, c), c)
            elif s.func == DISTINCT_COUNT:
                value = pc.coalesce(c, pa.scalar(0, want))
            else:
                cnt = view.stored_of("count", s.arg).column
                gone = pc.fill_null(pc.equal(pc.add_checked(t.column(cnt), sd.column(cnt)), 0), False)
                nothing = pa.nulls(len(sd), want)
                if s.kind == "sum":  # a DECIMAL(38,s) sum added in a wider decimal, then cast back exactly
                    wide = pa.decimal256(want.precision + 1, want.scale) if pa.types.is_decimal(want) else want
                    zero = pa.scalar(0, wide)
                    both = pc.add_checked(pc.coalesce(old_value.cast(wide), zero), pc.coalesce(c.cast(wide), zero))
                    both = both.cast(want, safe=True)
                elif s.kind == "holistic":
                    both = c
                else:
                    if pa.types.is_floating(want) and (pc.any(pc.is_nan(old_value)).as_py()
                                                       or pc.any(pc.is_nan(c)).as_py()):
                        return None  # Spark orders NaN above every value; Arrow's element-wise MIN/MAX skips it
                    pick = pc.min_element_wise if s.kind == "min" else pc.max_element_wise
                    both = pc.if_else(lost, c, pick(old_value, c, skip_nulls=True))
                merged = pc.if_else(gone, nothing, both)
                first = pc.if_else(pc.fill_null(pc.equal(sd.column(cnt), 0), False), nothing, c)
                value = pc.if_else(matched, merged, first)
            out[s.column] = value.cast(want, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # an overflow: Spark's cast says what it does
        return None
    return touched, pa.table(out)
