"""Read a change batch, check it against the schema and the base tables, and register the relations
that lattice/emit.py's SQL reads (__ns_ins_<t>, __ns_del_<t>, __ns_old_<t>, __ns_new_<dim>).

Every check runs before anything is written, so a bad batch changes nothing. Messages name the
batch, the table, the file or the row, and say what to do.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lattice import types
from lattice.errors import BadChangeBatch
from lattice.ir import Plan, Table
from nightshift.lake import Lake, LakeState

OP = "_op"
_SAMPLE = 3


@dataclass(frozen=True)
class BatchInfo:
    batch: str
    inserted: dict[str, int]
    deleted: dict[str, int]

    @property
    def changed(self) -> frozenset[str]:
        return frozenset(t for t in self.inserted if self.inserted[t] or self.deleted[t])

    @property
    def has_deletes(self) -> bool:
        return any(self.deleted.values())

    @property
    def rows(self) -> int:
        return sum(self.inserted.values()) + sum(self.deleted.values())


# ---------------------------------------------------------------- base tables


def empty_frame(spark: SparkSession, table: Table) -> DataFrame:
    ddl = ", ".join(f"`{c.name}` {types.spark_type(c.type)}" for c in table.columns)
    return spark.createDataFrame([], ddl)


def typed(df: DataFrame, table: Table) -> DataFrame:
    return df.select(*[F.col(f"`{c.name}`").cast(types.spark_type(c.type)).alias(c.name) for c in table.columns])


def read_base(spark: SparkSession, lake: Lake, table: Table, state: LakeState) -> DataFrame:
    d = lake.current_base_dir(table.name, state)
    if d is None:
        return empty_frame(spark, table)
    return typed(spark.read.parquet(str(d)), table)


def register_base(spark: SparkSession, lake: Lake, plan: Plan, state: LakeState) -> None:
    """__ns_old_<t> for every table of the schema, at the lake's current state."""
    for t in plan.schema.tables:
        read_base(spark, lake, t, state).createOrReplaceTempView(f"__ns_old_{t.name}")


# ---------------------------------------------------------------- the change batch


def load_batch(spark: SparkSession, lake: Lake, plan: Plan, batch: str, state: LakeState) -> BatchInfo:
    """Validate batch `batch` and register its relations; raises BadChangeBatch on any problem."""
    tables = [t.name for t in plan.schema.tables]
    files = lake.batch_files(batch, tables)
    register_base(spark, lake, plan, state)
    inserted, deleted = {}, {}
    for t in plan.schema.tables:
        ins, dels = _read_changes(spark, lake, t, batch, files.get(t.name, []))
        ins.createOrReplaceTempView(f"__ns_ins_{t.name}")
        dels.createOrReplaceTempView(f"__ns_del_{t.name}")
        inserted[t.name], deleted[t.name] = (_count(ins), _count(dels)) if files.get(t.name) else (0, 0)
    info = BatchInfo(batch, inserted, deleted)
    for t in plan.schema.tables:
        if info.deleted[t.name]:
            _check_deletes_exist(spark, t, batch)
    for t in plan.schema.tables:
        _register_new(spark, t, info)  # lazy: only computed where a query reads it
    for t in plan.schema.tables:
        if t.primary_key and t.name in info.changed:
            _check_primary_key(spark, t, batch)
        _check_foreign_keys(spark, plan, t, info)
    return info


def _count(df: DataFrame) -> int:
    return df.count()


def _read_changes(spark: SparkSession, lake: Lake, table: Table, batch: str, files: list[Path]):
    if not files:
        empty = empty_frame(spark, table)
        return empty, empty
    _check_file_schemas(table, batch, files)
    raw = spark.read.parquet(*[str(f) for f in files])
    bad = raw.where(F.col(OP).isNull() | ~F.col(OP).isin("insert", "delete"))
    sample = bad.select(OP).distinct().limit(_SAMPLE).collect()
    if sample:
        values = ", ".join(repr(r[0]) for r in sample)
        raise BadChangeBatch(
            f"batch {batch}, table {table.name}: column _op must be 'insert' or 'delete', found {values} "
            f"in {lake.change_dir(table.name, batch)}"
        )
    ins = typed(raw.where(F.col(OP) == "insert"), table)
    dels = typed(raw.where(F.col(OP) == "delete"), table)
    for c in table.columns:
        if not c.nullable:
            nulls = ins.where(F.col(f"`{c.name}`").isNull()).limit(1).collect()
            if nulls:
                raise BadChangeBatch(
                    f"batch {batch}, table {table.name}: inserted row with NULL in NOT NULL column {c.name}: {_row(nulls[0])}"
                )
    return ins, dels


_COMPATIBLE = {
    "integer": ("int", "uint"),
    "float": ("int", "uint", "float", "double", "halffloat", "decimal"),
    "decimal": ("int", "uint", "decimal"),
    "varchar": ("string", "large_string", "string_view"),
    "date": ("date32", "date64"),
    "timestamp": ("timestamp",),
    "boolean": ("bool",),
}


def _check_file_schemas(table: Table, batch: str, files: list[Path]) -> None:
    expected = {c.name.lower(): c for c in table.columns}
    first = None
    for f in files:
        try:
            schema = pq.read_schema(f)
        except Exception as e:  # pyarrow raises several types for a broken file
            raise BadChangeBatch(f"batch {batch}: {f}: not a readable Parquet file ({e})") from None
        names = {n.lower(): n for n in schema.names}
        missing = [c.name for k, c in expected.items() if k not in names]
        extra = [n for k, n in names.items() if k not in expected and k != OP]
        if OP not in names:
            missing.append(OP)
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing column(s) {', '.join(missing)}")
            if extra:
                parts.append(f"unexpected column(s) {', '.join(extra)}")
            raise BadChangeBatch(
                f"batch {batch}: {f}: {'; '.join(parts)} (table {table.name} has {', '.join(table.column_names)} plus _op)"
            )
        for field in schema:
            key = field.name.lower()
            arrow = str(field.type)
            if arrow == "null":
                continue
            want = types.family(expected[key].type) if key in expected else "varchar"
            if not arrow.startswith(_COMPATIBLE[want]):
                declared = expected[key].type if key in expected else "VARCHAR"
                raise BadChangeBatch(
                    f"batch {batch}: {f}: column {field.name} has type {arrow}, but {table.name}.{field.name} is {declared}"
                )
        if first is None:
            first = (f, schema)
        elif not schema.equals(first[1]):
            raise BadChangeBatch(
                f"batch {batch}: {f} and {first[0]} have different column types; write every file of a table alike"
            )


def _nullsafe_on(cols: list[str], a: str, b: str) -> str:
    return " AND ".join(f"{a}.`{c}` <=> {b}.`{c}`" for c in cols)


def _check_deletes_exist(spark: SparkSession, table: Table, batch: str) -> None:
    """Bag semantics: each deleted row image must match a distinct existing row of the base."""
    cols = list(table.column_names)
    col_list = ", ".join(f"`{c}`" for c in cols)
    sql = f"""
        WITH d AS (SELECT {col_list}, COUNT(*) AS n FROM __ns_del_{table.name} GROUP BY {col_list}),
             o AS (SELECT {', '.join(f'b.`{c}`' for c in cols)}, COUNT(*) AS m
                   FROM __ns_old_{table.name} b LEFT SEMI JOIN d ON {_nullsafe_on(cols, 'b', 'd')}
                   GROUP BY {', '.join(f'b.`{c}`' for c in cols)})
        SELECT d.*, COALESCE(o.m, 0) AS m FROM d LEFT JOIN o ON {_nullsafe_on(cols, 'd', 'o')}
        WHERE COALESCE(o.m, 0) < d.n LIMIT {_SAMPLE}"""
    bad = spark.sql(sql).collect()
    if bad:
        r = bad[0]
        row = ", ".join(f"{c}={r[c]!r}" for c in cols)
        raise BadChangeBatch(
            f"batch {batch}, table {table.name}: delete of a row that does not exist: ({row}) is deleted "
            f"{r['n']} time(s) but the base holds {r['m']}; the batch was refused and nothing was applied"
        )


def _register_new(spark: SparkSession, table: Table, info: BatchInfo) -> None:
    """__ns_new_<t>: the table after the batch (old minus deleted rows plus inserted rows)."""
    name = table.name
    if name not in info.changed:
        spark.table(f"__ns_old_{name}").createOrReplaceTempView(f"__ns_new_{name}")
        return
    old, ins, dels = spark.table(f"__ns_old_{name}"), spark.table(f"__ns_ins_{name}"), spark.table(f"__ns_del_{name}")
    new = old.exceptAll(dels).unionByName(ins) if info.deleted[name] else old.unionByName(ins)
    new.createOrReplaceTempView(f"__ns_new_{name}")


def _check_primary_key(spark: SparkSession, table: Table, batch: str) -> None:
    keys = ", ".join(f"`{c}`" for c in table.primary_key)
    dup = spark.sql(f"SELECT {keys}, COUNT(*) AS n FROM __ns_new_{table.name} GROUP BY {keys} HAVING COUNT(*) > 1 LIMIT 1").collect()
    if dup:
        key = ", ".join(f"{c}={dup[0][c]!r}" for c in table.primary_key)
        raise BadChangeBatch(
            f"batch {batch}, table {table.name}: primary key ({key}) would appear {dup[0]['n']} times; "
            f"an update of a {table.name} row is a delete of the old row image plus an insert of the new one"
        )


def _check_foreign_keys(spark: SparkSession, plan: Plan, table: Table, info: BatchInfo) -> None:
    """Rows inserted into `table` must find their parent after the batch; parent rows deleted for good
    must not be referenced by what remains."""
    for fk in table.foreign_keys:
        parent = fk.ref_table
        on = " AND ".join(f"c.`{a}` = p.`{b}`" for a, b in zip(fk.columns, fk.ref_columns))
        notnull = " AND ".join(f"c.`{a}` IS NOT NULL" for a in fk.columns)
        if info.inserted[table.name]:
            orphan = spark.sql(
                f"SELECT c.* FROM __ns_ins_{table.name} c LEFT ANTI JOIN __ns_new_{parent} p ON {on} WHERE {notnull} LIMIT 1"
            ).collect()
            if orphan:
                vals = ", ".join(f"{a}={orphan[0][a]!r}" for a in fk.columns)
                raise BadChangeBatch(
                    f"batch {info.batch}, table {table.name}: foreign key ({vals}) has no row in {parent} "
                    f"(row {_row(orphan[0])}); add the {parent} row to the batch or fix the {table.name} row"
                )
        if info.deleted[parent]:
            child = f"__ns_new_{table.name}"
            gone = spark.sql(
                f"SELECT c.* FROM {child} c LEFT ANTI JOIN __ns_new_{parent} p ON {on} WHERE {notnull} LIMIT 1"
            ).collect()
            if gone:
                vals = ", ".join(f"{a}={gone[0][a]!r}" for a in fk.columns)
                raise BadChangeBatch(
                    f"batch {info.batch}, table {parent}: a deleted {parent} row is still referenced by "
                    f"{table.name} ({vals}); delete or move those {table.name} rows in the same batch"
                )


def _row(r) -> str:
    return "(" + ", ".join(f"{k}={v!r}" for k, v in r.asDict().items()) + ")"
