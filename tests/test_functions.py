"""Scalar functions in views give the same value in Spark, DuckDB and PostgreSQL (issue 17).

A view's expressions are written once in sqlglot's neutral dialect and run by three engines: Spark
(propagate), DuckDB (the oracle, validation) and the warehouse (validation's rollups). Each allowed
expression below, transpiled by lattice/sql.py, must give the same values in all three over rows
holding NULLs, negatives, zero, leap days and year boundaries; each construct the compiler refuses
(lattice/passes/functions.py) is refused naming it. The expressions and rows come from a survey of
296 candidates (the ones that agree, in the spelling that agrees).
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import duckdb
import pytest
import sqlalchemy as sa

from conftest import PG_URL
from lattice import compile_project
from lattice.errors import UnsupportedView
from lattice.sql import to_dialect
from warehouse.dialects import PostgresDialect

D, TS, N = dt.date, dt.datetime, Decimal
COLUMNS = [("rid", "INTEGER"), ("i", "INTEGER"), ("j", "INTEGER"), ("b", "BIGINT"), ("f", "DOUBLE"),
           ("n", "DECIMAL(8,2)"), ("s", "VARCHAR"), ("d", "DATE"), ("e", "DATE"), ("t", "TIMESTAMP"), ("x", "BOOLEAN")]
ROWS = [
    (1, None, None, None, None, None, None, None, None, None, None),
    (2, 0, 0, 0, 0.0, N("0.00"), "", D(2024, 2, 29), D(2024, 3, 1), TS(2024, 2, 29, 23, 59, 59, 999999), True),
    (3, -7, 2, -9000000000, -2.5, N("-2.50"), " a b ", D(2024, 3, 1), D(2024, 2, 29), TS(2024, 3, 1), False),
    (4, 7, -2, 9000000000, 2.5, N("2.50"), "abc", D(2023, 12, 31), D(2024, 1, 1), TS(2023, 12, 31, 12, 30), True),
    (5, 1, 3, 1, 0.5, N("1.25"), "ABCdef", D(2024, 1, 1), D(2023, 12, 31), TS(2024, 1, 1, 0, 0, 0, 500000), False),
    (6, -1, 0, -1, 1.5, N("-1.25"), "x%_y", D(2021, 1, 3), D(2020, 12, 31), TS(2021, 1, 3, 1, 2, 3), None),
    (7, 3, None, 123456789012, -0.5, N("0.05"), "  lead", D(2020, 12, 31), D(2021, 1, 3), TS(2020, 12, 31, 23), True),
    (8, 100, 7, -1, 1.005, N("123456.78"), "trail  ", D(2000, 1, 1), D(1999, 12, 31), TS(2000, 1, 1), False),
    (9, -5, 3, 7, 2.675, N("999999.99"), "a-b-c", D(2024, 12, 30), D(2025, 1, 1), TS(1969, 12, 31, 23, 59, 59), None),
    (10, 5, -3, 0, -1e-3, N("-3.35"), "Hello wORLD", D(1969, 12, 31), D(1970, 1, 1), TS(2016, 2, 29, 12), True),
]
# Allowed and agreeing: what a group key, an aggregate argument or a filter may use.
AGREE = [
    'CAST(EXTRACT(YEAR FROM "d") AS INT)', 'CAST(EXTRACT(QUARTER FROM "d") AS INT)', 'CAST(EXTRACT(MONTH FROM "d") AS INT)',
    'CAST(EXTRACT(DAY FROM "d") AS INT)', 'CAST(EXTRACT(DOY FROM "d") AS INT)', 'CAST(EXTRACT(WEEK FROM "d") AS INT)',
    'CAST(EXTRACT(HOUR FROM "t") AS INT)', 'CAST(EXTRACT(MINUTE FROM "t") AS INT)', 'CAST(YEAR("d") AS INT)',
    'CAST(MONTH("d") AS INT)', 'CAST(DAY("d") AS INT)', 'EXTRACT(YEAR FROM "d")', 'YEAR("t")',
    "CAST(DATE_TRUNC('month', \"d\") AS DATE)", "CAST(DATE_TRUNC('year', \"d\") AS DATE)",
    "CAST(DATE_TRUNC('quarter', \"t\") AS DATE)", "CAST(DATE_TRUNC('week', \"d\") AS DATE)",
    'TIMESTAMP_TRUNC("t", DAY)', 'TIMESTAMP_TRUNC("t", HOUR)', 'CAST(TIMESTAMP_TRUNC(CAST("d" AS TIMESTAMP), DAY) AS DATE)',
    'LAST_DAY("d")', "CAST(((DATEDIFF(\"d\", DATE '1970-01-04') % 7) + 7) % 7 AS INT)", 'CAST(DATEDIFF("e", "d") AS INT)',
    '"d" + 1', "CAST(\"d\" + INTERVAL '1' MONTH AS DATE)", "\"t\" + INTERVAL '2' HOUR",
    """CASE WHEN "i" > 0 THEN 'pos' WHEN "i" < 0 THEN 'neg' ELSE 'zero-or-null' END""", """IF("x", 'a', 'b')""",
    'COALESCE("i", 0)', "COALESCE(\"s\", 'n/a')", 'COALESCE("d", DATE \'1900-01-01\')', 'NULLIF("i", 0)',
    'GREATEST("i", "j")', 'LEAST("d", "e")', '"i" + "j"', '"b" * 2', '"i" - "b"', '-"i"', '"i" % 3', 'ABS("i")',
    'CAST("i" AS DOUBLE) / NULLIF("j", 0)', 'CAST("i" DIV NULLIF("j", 0) AS INT)', 'ROUND("n", 1)', 'FLOOR("n")',
    'CAST(FLOOR("f") AS BIGINT)', 'CAST("n" AS DOUBLE)', 'CAST("i" AS VARCHAR)', 'CAST("d" AS VARCHAR)', 'CAST("x" AS INT)',
    'SUBSTRING(CAST("d" AS VARCHAR), 1, 7)', 'UPPER("s")', 'LOWER("s")', 'CAST(LENGTH("s") AS INT)', 'TRIM("s")',
    'CONCAT("s", \'!\')', '"s" || \'?\'', "REPLACE(\"s\", 'a', 'A')", 'LEFT("s", 2)', 'RIGHT("s", 2)', 'SUBSTRING("s", 2, 3)',
    "LPAD(\"s\", 6, '*')", "SPLIT_PART(\"s\", '-', 2)", '"i" > 2', '"i" BETWEEN 0 AND 5', '"i" IN (1, 3, 5)',
    "\"s\" LIKE 'a%'", '"i" IS NULL', '"i" IS DISTINCT FROM "j"',
]
# Refused wherever they appear, with the spelling that agrees.
REFUSED = [
    ('EXTRACT(DOW FROM "d")', "weekday"), ('DAYOFWEEK("d")', "weekday"), ('QUARTER("d")', "QUARTER"),
    ('WEEK("d")', "WEEK"), ("DATE_TRUNC('day', \"d\")", "NULL for every row in Spark"),
    ('DATE_ADD("d", 1)', "seconds"), ('INITCAP("s")', "INITCAP"), ("TO_CHAR(\"d\", 'YYYY-MM')", "format"),
    ("REGEXP_REPLACE(\"s\", 'a', 'b')", "regular-expression"), ('CAST("s" AS VARCHAR(3))', "VARCHAR(n)"),
    ('STRFTIME("d", \'%Y\')', "not a function nightshift knows"),
]


def _norm(v):
    if v is None:
        return None
    if isinstance(v, bool):
        return bool(v)
    if isinstance(v, (int, Decimal)):
        return Decimal(v).normalize() if Decimal(v) != 0 else Decimal(0)
    if isinstance(v, float):
        return None if math.isnan(v) else float(f"{v:.12g}") + 0.0
    if isinstance(v, dt.datetime):
        return v.replace(tzinfo=None).isoformat(sep=" ")
    if isinstance(v, dt.date):
        return v.isoformat()
    return v


def _query(engine: str) -> str:
    cols = ", ".join(f"{e} AS \"v{k}\"" for k, e in enumerate(AGREE))
    return to_dialect(f'SELECT "rid", {cols} FROM "tbl" ORDER BY "rid"', engine)


def _rows(rows) -> list[tuple]:
    return [tuple(_norm(v) for v in r) for r in rows]


@pytest.fixture(scope="module")
def duck_rows():
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"CREATE TABLE tbl ({', '.join(f'{c} {t}' for c, t in COLUMNS)})")
    con.executemany(f"INSERT INTO tbl VALUES ({', '.join('?' for _ in COLUMNS)})", ROWS)
    rows = _rows(con.execute(_query("duckdb")).fetchall())
    con.close()
    return rows


def _check(rows, reference, engine: str):
    for k, expr in enumerate(AGREE, 1):
        got = [r[k] for r in rows]
        want = [r[k] for r in reference]
        assert got == want, f"{expr}: {engine} {got} != DuckDB {want}"


def test_every_allowed_expression_agrees_in_postgresql(duck_rows, pg_schemas):
    engine = sa.create_engine(pg_schemas("functions"), poolclass=sa.pool.NullPool)
    pg_types = {"DOUBLE": "DOUBLE PRECISION"}
    with engine.begin() as c:
        c.exec_driver_sql("SET TIME ZONE 'UTC'")
        c.exec_driver_sql(f"CREATE TABLE tbl ({', '.join(f'{n} {pg_types.get(t, t)}' for n, t in COLUMNS)})")
        c.execute(sa.text(f"INSERT INTO tbl VALUES ({', '.join(':' + n for n, _ in COLUMNS)})"),
                  [dict(zip([n for n, _ in COLUMNS], r)) for r in ROWS])
        rows = _rows(PostgresDialect().run(c, _query("postgres")).fetchall())
    engine.dispose()
    _check(rows, duck_rows, "PostgreSQL")


def test_every_allowed_expression_agrees_in_spark(duck_rows, spark):
    from pyspark.sql.types import (BooleanType, DateType, DecimalType, DoubleType, IntegerType, LongType, StringType,
                                   StructField, StructType, TimestampType)

    kinds = {"INTEGER": IntegerType(), "BIGINT": LongType(), "DOUBLE": DoubleType(), "DECIMAL(8,2)": DecimalType(8, 2),
             "VARCHAR": StringType(), "DATE": DateType(), "TIMESTAMP": TimestampType(), "BOOLEAN": BooleanType()}
    schema = StructType([StructField(c, kinds[t]) for c, t in COLUMNS])
    spark.createDataFrame(ROWS, schema).createOrReplaceTempView("tbl")
    _check(_rows(spark.sql(_query("spark")).collect()), duck_rows, "Spark")


SCHEMA = "CREATE TABLE tbl (" + ", ".join(f"{c} {t}" for c, t in COLUMNS) + ");"


@pytest.mark.parametrize("expr", AGREE)
def test_every_allowed_expression_is_a_group_key_the_delta_mode_keeps(expr):
    sql = f"CREATE VIEW v AS SELECT {expr} AS k, COUNT(*) AS n, SUM(i) AS s FROM tbl GROUP BY {expr}"
    view = compile_project(SCHEMA, {"sql/summaries/v.sql": sql}).views[0]
    assert view.mode == "delta", view.reason
    assert [k.name for k in view.keys] == ["k"] and view.keys[0].type


@pytest.mark.parametrize("expr,why", REFUSED)
def test_a_construct_the_engines_disagree_on_is_refused_naming_it(expr, why):
    sql = f"CREATE VIEW v AS SELECT {expr} AS k, COUNT(*) AS n FROM tbl GROUP BY {expr}"
    with pytest.raises(UnsupportedView) as info:
        compile_project(SCHEMA, {"sql/summaries/v.sql": sql})
    assert "sql/summaries/v.sql: view v" in str(info.value) and why in str(info.value), str(info.value)
