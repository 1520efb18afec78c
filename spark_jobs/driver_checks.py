"""A change batch's checks against small tables, in this process: no Spark job.

The checks of spark_jobs/changes.py (each deleted row exists, primary keys stay unique, a foreign key finds its
parent, a declared dependency holds) are Spark SQL over the batch and the base. Where the tables a check reads
are small (a dimension table of at most CHECK_ROWS live rows, the batch's own rows, the base rows the delete
check matched) the same check runs here over their rows in Arrow: a Spark query over a few hundred rows costs
about a tenth of a second of planning, code generation and task scheduling, seven of them most of a small
night's checks. A check goes to Spark whenever its rows are not known here exactly as Spark would type them:
a table above the bound, a lake table whose columns differ from sql/schema.sql (evolving), a change file whose
column Spark would round or convert (a DECIMAL cast to fewer digits, a DOUBLE from a DECIMAL, a timestamp finer
than microseconds), so both engines always judge the same values.

The same rows (BatchRows) serve apply-base, which commits a night's few rows of a table from the driver when
they are known here (spark_jobs/apply_base.py `_commit_in_driver`).

Values compare as Spark's `<=>`, GROUP BY and DISTINCT do: NULL equal to NULL, -0.0 to 0.0, NaN to NaN. The
row a violated check reports is given as Spark's `to_json(struct(*))` would give it (its NULL fields left out),
so a refusal reads the same whichever engine found it.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Callable, Iterable, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lattice import types
from lattice.ir import FunctionalDependency, Table
from runtime import delta
from runtime.lake import Lake, LakeState
from spark_jobs.lake_tables import DRIVER_ROWS

OP = "_op"
# a table is checked here when it has at most this many rows (and the batch at most this many of its changes)
CHECK_ROWS = DRIVER_ROWS
_NAN = ("NaN",)  # one key for every NaN (NaN != NaN in Python, equal in Spark's comparisons and grouping)


def arrow_type(declared: str) -> pa.DataType:
    """The Arrow type of a normalized declared type, as Spark holds it (lattice.types.spark_type)."""
    fixed = {"INTEGER": pa.int32(), "BIGINT": pa.int64(), "DOUBLE": pa.float64(), "VARCHAR": pa.string(),
             "DATE": pa.date32(), "TIMESTAMP": pa.timestamp("us"), "BOOLEAN": pa.bool_()}
    if declared in fixed:
        return fixed[declared]
    scale = types.decimal_scale(declared)
    precision = int(declared[len("DECIMAL("):].split(",")[0])
    return pa.decimal128(precision, scale)


def typed(column: pa.ChunkedArray | pa.Array, declared: str) -> pa.ChunkedArray | pa.Array | None:
    """`column` in the declared type's Arrow type when Spark's cast gives exactly these values (a widening, or a
    value-preserving narrowing); None when Spark could round or convert (then the check is Spark's)."""
    want = arrow_type(declared)
    t = column.type
    if t == want or pa.types.is_null(t):
        return column.cast(want)
    if pa.types.is_decimal(t) and types.family(declared) == "float":
        return None  # Spark's and Arrow's decimal-to-double conversions may round differently
    if pa.types.is_timestamp(t) and t.tz is not None:
        column = column.cast(pa.timestamp(t.unit))  # the UTC wall clock, as Spark's UTC session holds it
    try:
        return column.cast(want, safe=True)  # refuses overflow, truncation and lost digits: Spark would differ
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def key(values: tuple) -> tuple:
    """A row's values as one key that compares as Spark's `<=>` does (NaN as one value; -0.0 == 0.0 already)."""
    return tuple(_NAN if isinstance(v, float) and math.isnan(v) else v for v in values)


def as_json(value):
    """A value as `json.loads(to_json(struct(...)))` gives it back from Spark: dates and timestamps as ISO text
    (milliseconds, UTC), decimals as JSON numbers, NaN and infinities as text."""
    if isinstance(value, Decimal):  # JSON text with a fraction's digits reads back as a float, without as an int
        return int(value) if value.as_tuple().exponent >= 0 else float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def reported(names: Iterable[str], values: Iterable, **counts) -> dict:
    """The offending row of a check as Spark's check query reports it (NULL fields left out)."""
    return {n: as_json(v) for n, v in zip(names, values) if v is not None} | counts


class Tallied(NamedTuple):
    """The counts a delete check's pass made beside its matches (runtime.delta.matching_rows' tally): what was
    asked, the counts (as value_counts gives them) and the months counted."""

    tally: delta.Tally
    counts: pa.Table
    months: set


class BatchRows:
    """The rows the driver's checks read, each read once: a table's changes in this batch, its rows at the lake's
    state (when small), the base rows a delete check recorded. None wherever they are not known exactly.

    tallies_for: set by the caller that will count a lost extreme's base rows (propagate): given a table and its
    deleted rows, the counts its delete check's pass makes too (runtime.delta.Tally each); `tallied` holds them by
    table once made (Tallied each)."""

    def __init__(self, lake: Lake, state: LakeState, files: dict[str, list[Path]], facts: Iterable[str] = ()):
        self.lake, self.state, self.files = lake, state, files
        self.facts = frozenset(facts)  # read by Spark only, where the night's scan metrics count them
        self._changes: dict[str, tuple[pa.Table, pa.Table] | None] = {}
        self._base: dict[str, pa.Table | None] = {}
        self.tallies_for: Callable[[Table, pa.Table], list[delta.Tally]] | None = None
        self.tallied: dict[str, list[Tallied]] = {}

    def changes(self, table: Table) -> tuple[pa.Table, pa.Table] | None:
        """(inserted, deleted) rows of `table` in the batch, its declared columns in their declared types."""
        if table.name not in self._changes:
            self._changes[table.name] = self._read_changes(table)
        return self._changes[table.name]

    def _read_changes(self, table: Table) -> tuple[pa.Table, pa.Table] | None:
        files = [pq.ParquetFile(f) for f in self.files.get(table.name, [])]
        if sum(pf.metadata.num_rows for pf in files) > CHECK_ROWS:
            return None
        parts = []
        for pf in files:
            if pf.metadata.num_rows == 0:
                continue
            names = {n.lower(): n for n in pf.schema_arrow.names}
            parts.append(pf.read(columns=[names[OP]] + [names[c.name.lower()] for c in table.columns])
                         .rename_columns([OP, *table.column_names]))
        if not parts:
            empty = pa.table({c.name: pa.array([], arrow_type(c.type)) for c in table.columns})
            return empty, empty
        rows = pa.concat_tables(parts, promote_options="permissive")
        out = _declared(rows, table)
        if out is None:
            return None
        op = rows.column(OP)
        return out.filter(pc.equal(op, "insert")), out.filter(pc.equal(op, "delete"))

    def base(self, table: Table) -> pa.Table | None:
        """`table`'s rows at the lake's state when it is a dimension table (a fact table's rows are Spark's to
        read: the night's scan metrics count them) of at most CHECK_ROWS rows and the lake holds exactly its
        declared columns and types; None otherwise. An absent table has no rows."""
        if table.name not in self._base:
            self._base[table.name] = self._read_base(table)
        return self._base[table.name]

    def _read_base(self, table: Table) -> pa.Table | None:
        if table.name in self.facts:
            return None
        v = self.state.version(table.name)
        if (0 if v is None else self.lake.rows(table.name, self.state)) > CHECK_ROWS:
            return None
        if v is None:
            return pa.table({c.name: pa.array([], arrow_type(c.type)) for c in table.columns})
        snap = delta.snapshot(self.lake.table_path(table.name), v)
        names = held_as_declared(snap, table)
        if names is None:
            return None  # the table's layout evolves tonight: Spark reads it as sql/schema.sql says
        return delta.read_snapshot(snap, names).rename_columns(list(table.column_names))

    def record(self, table: Table, folder: Path, keep: tuple[str, ...] = ()) -> pa.Table | None:
        """The base rows a delete check kept for `table` (spark_jobs.changes._matched's record at `folder`), with
        the record's columns `keep` (their places); None when there is no whole record with those columns."""
        if not (folder / "_SUCCESS").exists():
            return None
        files = sorted(folder.glob("*.parquet"))
        if not files or not set(keep) <= set(pq.read_schema(files[0]).names):
            return None
        rows = pq.read_table(folder, columns=list(table.column_names) + list(keep))
        declared = _declared(rows, table)
        return None if declared is None else pa.table(declared.columns + [rows.column(c) for c in keep],
                                                      names=declared.column_names + list(keep))

    def whole(self, table: Table) -> pa.Table | None:
        """Every column of `table` at the lake's state (its hidden ones too) when it has at most CHECK_ROWS rows."""
        v = self.state.version(table.name)
        if v is None or self.lake.rows(table.name, self.state) > CHECK_ROWS:
            return None
        return delta.read_table(self.lake.table_path(table.name), v)


def held_as_declared(snap: delta.DeltaSnapshot, table: Table) -> list[str] | None:
    """The lake's names of `table`'s declared columns in the Delta table `snap` (matched whatever their case), when
    it holds every one in its declared Arrow type; None when not (a column added or retyped since: the layout
    evolves)."""
    held = {f.name.lower(): f for f in snap.schema}
    fields = [held.get(c.name.lower()) for c in table.columns]
    if any(f is None or f.type != arrow_type(c.type) for f, c in zip(fields, table.columns)):
        return None
    return [f.name for f in fields]


def _declared(rows: pa.Table, table: Table) -> pa.Table | None:
    columns = []
    for c in table.columns:
        column = typed(rows.column(c.name), c.type)
        if column is None:
            return None
        columns.append(column)
    return pa.table(columns, names=list(table.column_names))


def tuples(rows: pa.Table, names: Iterable[str]) -> list[tuple]:
    """The rows' values of columns `names`, a key each (key)."""
    cols = [rows.column(n).to_pylist() for n in names]
    return [key(values) for values in zip(*cols)] if cols else [() for _ in range(rows.num_rows)]


def after(table: Table, old: pa.Table, ins: pa.Table, dels: pa.Table) -> pa.Table:
    """The table's rows after the batch: `old` less one equal row (Spark's <=>) for each deleted row, as EXCEPT ALL
    takes them, plus the inserted rows; every column in its declared Arrow type. The delete check ran first, so
    every deleted row finds its row."""
    left = Counter(tuples(dels, table.column_names))
    kept = []
    for k in tuples(old, table.column_names):
        take = left[k] > 0
        if take:
            left[k] -= 1
        kept.append(not take)
    schema = pa.schema([(c.name, arrow_type(c.type)) for c in table.columns])
    return pa.concat_tables([old.filter(pa.array(kept, pa.bool_())).cast(schema), ins.cast(schema)])


def new_rows(old: pa.Table, ins: pa.Table, dels: pa.Table, names: list[str]) -> Counter:
    """The bag of a table's rows (projected on `names`) after the batch: old rows, each deleted row taking one
    equal row away, inserted rows added (the checks of deleted rows run first, so every delete finds its row)."""
    return Counter(tuples(old, names)) - Counter(tuples(dels, names)) + Counter(tuples(ins, names))


def month(column) -> pa.ChunkedArray:
    """The lake's month of a date or timestamp (spark_jobs.changes.month_of in Arrow): 'YYYY-MM', NULL for NULL."""
    return pc.strftime(column, format="%Y-%m")


def months_of(rows: pa.Table, by: str) -> set:
    """The months (month) of column `by` among `rows`."""
    return set(month(rows.column(by)).to_pylist())


def matched(lake: Lake, state: LakeState, table: Table, dels: pa.Table, place: tuple[str, str],
            wanted: set | None = None, tallies: list[delta.Tally] = ()
            ) -> tuple[pa.Table, delta.Read, list[Tallied]] | None:
    """The delete check's pass over `table`'s base at the lake's state made in this process
    (runtime.delta.matching_rows): the live rows equal to some deleted row (`dels`, declared columns and types) on
    every declared column that compares alike here and in Spark (integers, decimals, strings, dates, booleans: not
    floating point, where -0.0 and NaN do not, and not a column some deleted row holds NULL in, since a NULL matches
    nothing in a join and Spark's `<=>` matches it). So it keeps every row Spark's `<=>` finds equal to a deleted
    row, and maybe a few others, as Spark's pass by the rows' hashes does: the check and apply-base match them
    column by column. `wanted`: only the month partitions among these (a table laid out by month).

    Returns the record (the declared columns in their declared types, the lake's partition column, then `place`:
    each row's file name and row number), what the pass read (runtime.delta.Read) and the counts of `tallies` it
    made in the same pass (Tallied each; none when Arrow's join or cast does not take a key's type); None when it
    cannot be made
    here exactly (the pass is then Spark's): a column whose lake type is not its declared one (the layout evolves), a TIMESTAMP
    column, column mapping on, or no column to match on."""
    v = state.version(table.name)
    if v is None or any(types.family(c.type) == "timestamp" for c in table.columns):
        return None
    snap = delta.snapshot(lake.table_path(table.name), v)
    lake_names = held_as_declared(snap, table)
    if lake_names is None or snap.mapped or set(lake_names) & set(snap.partition_columns):
        return None
    keys = [n for c, n in zip(table.columns, lake_names)
            if types.family(c.type) != "float" and dels.column(c.name).null_count == 0]
    if not keys:
        return None
    probe = dels.rename_columns(lake_names)
    try:
        rows, read, counts = delta.matching_rows(snap, lake_names, probe, keys, place, wanted, tallies)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # a tally's key type Arrow's join or cast does not take
        if not tallies:
            raise
        tallies, (rows, read, counts) = [], delta.matching_rows(snap, lake_names, probe, keys, place, wanted)
    counted = [Tallied(t, c, t.partitions if wanted is None else wanted & t.partitions) for t, c in zip(tallies, counts)]
    return rows.rename_columns([*table.column_names, *rows.column_names[len(lake_names):]]), read, counted


# ---------------------------------------------------------------- the checks (each None when the batch is fine)


def deletes_exist(table: Table, dels: pa.Table, base: pa.Table) -> dict | None:
    """Bag semantics: every deleted row image matches as many distinct rows of `base` (the rows a deleted row may
    match) as it is deleted. The first deleted row image (in the batch's order) that does not is reported, with its
    own values.

    One grouping in Arrow of the deleted rows and the base rows, each group counting its deletes, its base rows and
    its first deleted row's place; rows group as Spark's `<=>` matches them: NULL with NULL, and floating point in
    one form first (_as_compared: -0.0 as 0.0, every NaN as one NaN)."""
    cols = list(table.column_names)
    keys = [f"k{i}" for i in range(len(cols))]  # the columns by place: no name of the table's meets n, m and i
    d = dels.select(cols).rename_columns(keys)
    b = _as_compared(base.select(cols).rename_columns(keys).cast(d.schema))
    d = _as_compared(d)
    ones = lambda k, rows: pa.repeat(pa.scalar(k, pa.int64()), rows)  # noqa: E731
    both = pa.concat_tables([
        d.append_column("n", ones(1, d.num_rows)).append_column("m", ones(0, d.num_rows))
            .append_column("i", pa.array(range(d.num_rows), pa.int64())),
        b.append_column("n", ones(0, base.num_rows)).append_column("m", ones(1, base.num_rows))
            .append_column("i", pa.nulls(base.num_rows, pa.int64())),
    ])
    groups = both.group_by(keys).aggregate([("n", "sum"), ("m", "sum"), ("i", "min")])
    short = groups.filter(pc.less(groups.column("m_sum"), groups.column("n_sum")))
    if short.num_rows == 0:
        return None
    first = short.filter(pc.equal(short.column("i_min"), pc.min(short.column("i_min")))).to_pylist()[0]
    i = first["i_min"]
    return reported(cols, [dels.column(c)[i].as_py() for c in cols], n=first["n_sum"], m=first["m_sum"])


def _as_compared(rows: pa.Table) -> pa.Table:
    """`rows` with each floating-point column in the one form Spark's `<=>` compares it in: -0.0 as 0.0 and every
    NaN as the same NaN (Arrow groups floating point by its bits); NULL stays NULL."""
    for i, field in enumerate(rows.schema):
        if pa.types.is_floating(field.type):
            column = rows.column(i)
            zero, nan = pa.scalar(0.0, field.type), pa.scalar(float("nan"), field.type)
            column = pc.if_else(pc.equal(column, zero), zero, column)
            rows = rows.set_column(i, field, pc.if_else(pc.is_nan(column), nan, column))
    return rows


def primary_key(table: Table, old: pa.Table, ins: pa.Table, dels: pa.Table) -> dict | None:
    for k, n in new_rows(old, ins, dels, named(table, table.primary_key)).items():
        if n > 1:
            return reported(table.primary_key, _values(k), n=n)
    return None


def dependency_holds(fd: FunctionalDependency, table: Table, old: pa.Table, ins: pa.Table, dels: pa.Table) -> dict | None:
    lhs, rhs = named(table, fd.lhs), named(table, fd.rhs)
    pairs = {(row[:len(lhs)], row[len(lhs):]) for row in new_rows(old, ins, dels, lhs + rhs)}
    values = Counter(left for left, _ in pairs)
    for left, n in values.items():
        if n > 1:
            return reported(fd.lhs, _values(left), n=n)
    return None


def orphan(table: Table, columns: tuple[str, ...], ins: pa.Table, parent_keys: set) -> dict | None:
    """The first inserted row whose foreign key `columns` (none of them NULL) is no key of the parent after the
    batch (parent_keys: its keys, as `key` gives them). A one-column key that is no floating point is looked up in
    Arrow when every parent key is a value of the column's type as it is (else row by row here)."""
    names = named(table, columns)
    keys = _as_column([k[0] for k in parent_keys if k[0] is not None], ins.column(names[0]).type) \
        if len(names) == 1 and types.family(table.column(names[0]).type) != "float" else None
    if keys is not None:
        column = ins.column(names[0])
        i = pc.index(pc.and_(pc.is_valid(column), pc.invert(pc.is_in(column, value_set=keys))), True).as_py()
    else:
        i = next((i for i, k in enumerate(tuples(ins, names)) if None not in k and k not in parent_keys), -1)
    return None if i < 0 else reported(table.column_names, [ins.column(c)[i].as_py() for c in table.column_names])


def _as_column(values: list, arrow: pa.DataType) -> pa.Array | None:
    """`values` (a parent's keys) as an array of Arrow type `arrow` (a child's column), when each is a value of that
    type as it is (read back equal: Arrow refuses an overflow or another kind of value, and truncates a fraction
    into an integer); None when one is not."""
    try:
        column = pa.array(values, arrow)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
        return None
    return column if column.to_pylist() == values else None


def parent_keys(parent: Table, old: pa.Table, ins: pa.Table, dels: pa.Table, columns: tuple[str, ...]) -> set:
    return set(new_rows(old, ins, dels, named(parent, columns)))


def named(table: Table, columns: Iterable[str]) -> list[str]:
    """Columns of `table` as it declares them (a key or a dependency may spell them in another case)."""
    return [table.column(c).name for c in columns]


def _values(k: tuple) -> tuple:
    return tuple(float("nan") if v == _NAN else v for v in k)


def change_distincts(rows: BatchRows, fact: Table, joins, tables: dict[str, Table],
                     combos: list[tuple[tuple[str, str], ...]]) -> list[int] | None:
    """The cost model's statistics (lattice.emit.change_distincts) counted here, exactly: for each combination of
    (table, column) attributes, how many distinct values it takes among the batch's changed rows of `fact` (its
    inserted and deleted rows) joined along `joins` to each dimension after the batch (`tables`: the dimensions by
    name). None when a table's rows are not known here (the count is then Spark's query)."""
    changes = rows.changes(fact)
    if changes is None:
        return None
    joined = _prefixed(pa.concat_tables(changes), fact)
    for j in joins:
        parent = tables[j.parent.lower()]
        old, parent_changes = rows.base(parent), rows.changes(parent)
        if old is None or parent_changes is None:
            return None
        right = _prefixed(after(parent, old, *parent_changes), parent)
        left_keys = [_label(tables[j.child.lower()], c) for c in j.child_columns]
        right_keys = [_label(parent, c) for c in j.parent_columns]
        left_of = dict(zip(right_keys, left_keys))
        try:  # the parent's keys in the child's types, as Spark compares them
            right = right.cast(pa.schema([joined.schema.field(left_of[f.name]).with_name(f.name) if f.name in left_of
                                          else f for f in right.schema]))
            joined = joined.join(right, left_keys, right_keys, join_type="inner", coalesce_keys=False,
                                 use_threads=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # key types Arrow does not cast or join exactly
            return None
    counts = []
    for combo in combos:
        names = [_label(tables[t.lower()], c) for t, c in combo]
        counts.append(joined.select(names).group_by(names).aggregate([]).num_rows if names else int(joined.num_rows > 0))
    return counts


def _prefixed(rows: pa.Table, table: Table) -> pa.Table:
    return rows.rename_columns([_label(table, c) for c in rows.column_names])


def _label(table: Table, column: str) -> str:
    """A column as one name across joined tables (`table.column`, spelled as the table declares it)."""
    return f"{table.name.lower()}.{table.column(column).name}"


def deleted_bounds(dels: pa.Table, keys: list[str], value: str, groups: pa.Table) -> tuple[str | None, str | None]:
    """lattice.emit.deleted_extremes made here for a view that reads its fact table alone (emit.fact_columns): among
    the groups `groups` (the fact's `keys` columns, no NULL), the largest of each group's smallest deleted `value`
    (lo) and the smallest of each group's largest (hi), as text (a DATE's ISO form, as Spark casts it); None where no
    deleted row with a value reaches those groups."""
    held = dels.select([*keys, value]).filter(pc.is_valid(dels.column(value)))
    held = held.join(groups.select(keys).cast(held.select(keys).schema), keys, join_type="left semi", use_threads=False)
    if not held.num_rows:
        return None, None
    per = held.group_by(keys, use_threads=False).aggregate([(value, "min"), (value, "max")])  # by name below
    lo, hi = pc.max(per.column(f"{value}_min")).as_py(), pc.min(per.column(f"{value}_max")).as_py()
    return (None if lo is None else lo.isoformat()), (None if hi is None else hi.isoformat())


def first_extremes(counts: pa.Table, ins: pa.Table, dels: pa.Table, keys: list[str], value: str, groups: pa.Table,
                   below=None, since=None) -> pa.Table:
    """lattice.emit.minmax_recompute's result made here, for the groups `groups` (the fact's `keys` columns, no NULL)
    of a view that reads its fact table alone: the base's term counted (`counts`: `keys`, `_v`, `_n`, as
    runtime.delta.value_counts gives them for those groups and bounds) plus the batch's rows of the fact in those
    groups (`ins` counted +1, `dels` -1; declared columns), only those whose `value` is not NULL and is below `below`
    or from `since` on (either None: no such side; both None: every value), as value_counts read the base. Per
    (group, value) the net count; the values with a positive one survive; per group the smallest and the largest,
    as `_min` and `_max` (a group none survives in has no row)."""
    probe = groups.select(keys)
    terms = [counts.select([*keys, "_v", "_n"])]
    for rows, sign in ((ins, 1), (dels, -1)):
        kept = rows.select([*keys, value]).filter(delta.within(rows.column(value), below, since))
        kept = kept.join(probe.cast(kept.select(keys).schema), keys, join_type="left semi", use_threads=False)
        terms.append(pa.table([*kept.select(keys).columns, kept.column(value),
                               pa.array(np.full(kept.num_rows, sign, dtype=np.int64))], names=[*keys, "_v", "_n"]))
    schema = terms[0].schema
    net = pa.concat_tables([t.cast(schema) for t in terms]).group_by([*keys, "_v"], use_threads=False) \
        .aggregate([("_n", "sum")])
    net = net.filter(pc.greater(net.column("_n_sum"), 0))
    out = net.group_by(keys, use_threads=False).aggregate([("_v", "min"), ("_v", "max")])
    return out.select([*keys, "_v_min", "_v_max"]).rename_columns([*keys, "_min", "_max"])
