"""Views are written in the warehouse's own SQL, and every engine computes what the warehouse computes.

A view is read in its warehouse's dialect (DuckDB or PostgreSQL) into neutral SQL whose functions mean
the warehouse's (lattice/warehouse_sql.py); Spark (propagate), DuckDB (the oracle) and the warehouse
(validation's rollups) each run it through one rule per function family. Each expression below, by
family, is evaluated by the warehouse itself as the user wrote it, and by every engine after
translation, over rows holding NULLs, negatives, zero, empty and unicode strings, leap days and
week/year boundaries; every engine must give the warehouse's value. The quantiles of a DECIMAL and a
DOUBLE are checked the same way through the SQL that recomputes each changed group's holistic values
(lattice/emit.py). What no engine can compute as the warehouse does is refused naming it as written.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import duckdb
import pytest
import sqlalchemy as sa
import sqlglot

from lattice import compile_project, emit
from lattice.errors import UnsupportedView
from lattice.passes.functions import refusals
from lattice.sql import ident, to_dialect
from lattice.warehouse_sql import canonical

D, TS, N = dt.date, dt.datetime, Decimal
COLUMNS = [("rid", "INTEGER"), ("g", "INTEGER"), ("i", "INTEGER"), ("j", "INTEGER"), ("b", "BIGINT"), ("f", "DOUBLE"),
           ("n", "DECIMAL(8,2)"), ("s", "VARCHAR"), ("d", "DATE"), ("e", "DATE"), ("t", "TIMESTAMP"), ("x", "BOOLEAN")]
ROWS = [
    (1, 1, None, None, None, None, None, None, None, None, None, None),
    (2, 1, 0, 0, 0, 0.0, N("0.00"), "", D(2024, 2, 29), D(2024, 3, 1), TS(2024, 2, 29, 23, 59, 59, 999999), True),
    (3, 1, -7, 2, -9000000000, -2.5, N("-2.50"), " a b ", D(2024, 3, 1), D(2024, 2, 29), TS(2024, 3, 1), False),
    (4, 2, 7, -2, 9000000000, 2.5, N("2.50"), "abc", D(2023, 12, 31), D(2024, 1, 1), TS(2023, 12, 31, 12, 30), True),
    (5, 2, 1, 3, 1, 0.5, N("1.25"), "ABCdef", D(2024, 1, 1), D(2023, 12, 31), TS(2024, 1, 1, 0, 0, 0, 500000), False),
    (6, 2, -1, 0, -1, 1.5, N("-1.25"), "x%_y", D(2021, 1, 3), D(2020, 12, 31), TS(2021, 1, 3, 1, 2, 3), None),
    (7, 3, 3, None, 123456789012, -0.5, N("0.05"), "  lead", D(2020, 12, 31), D(2021, 1, 3), TS(2020, 12, 31, 23), True),
    (8, 3, 100, 7, -1, 1.005, N("123456.78"), "trail  ", D(2000, 1, 1), D(1999, 12, 31), TS(2000, 1, 1), False),
    (9, 3, -5, 3, 7, 2.675, N("999999.99"), "a-b-c", D(2024, 12, 30), D(2025, 1, 1), TS(1969, 12, 31, 23, 59, 59), None),
    (10, 4, 5, -3, 0, -1e-3, N("-3.35"), "Hello wORLD", D(1969, 12, 31), D(1970, 1, 1), TS(2016, 2, 29, 12), True),
    (11, 4, 9, 4, 2, 1e10, N("1.00"), "Ünïcødé straße", D(2021, 1, 1), D(2021, 1, 4), TS(2021, 1, 4, 6, 7, 8), False),
    (12, 4, -9, -4, -2, -1e10, N("1.01"), "ǅemal-ǆ", D(2021, 1, 4), D(2021, 1, 1), TS(2021, 1, 1, 0, 0, 1), True),
    (13, 5, 6, 5, 3, 3.0, N("-1.00"), "日本-語", D(2021, 1, 2), D(2020, 12, 28), TS(2020, 12, 28, 23, 59), False),
    (14, 5, -6, -5, -3, -3.0, N("-1.05"), "MiXeD 42", D(2020, 12, 28), D(2021, 1, 2), TS(2021, 1, 2, 12, 0), True),
    (15, 5, 2, 1, 4, 0.25, N("7.77"), "line 42\n", D(2021, 12, 31), D(2022, 1, 3), TS(2021, 12, 31, 23, 59, 59), False),
]

# ---------------------------------------------------------------- scalar expressions, by family
# written alike in DuckDB and PostgreSQL; each warehouse's own value is the truth for its projects
DATE_TIME = [
    *(f"EXTRACT({u} FROM d)" for u in ("YEAR", "QUARTER", "MONTH", "DAY", "DOY", "WEEK", "DOW", "ISODOW")),
    *(f"EXTRACT({u} FROM t)" for u in ("YEAR", "QUARTER", "MONTH", "DAY", "DOY", "WEEK", "DOW", "ISODOW", "HOUR",
                                       "MINUTE")),
    *(f"date_part('{u}', d)" for u in ("dow", "isodow", "quarter", "doy", "week", "year", "month", "day")),
    "date_part('hour', t)", "date_part('dow', t)",
    "CASE WHEN EXTRACT(DOW FROM d) IN (0, 6) THEN 'weekend' ELSE 'weekday' END",
    "CASE WHEN EXTRACT(DOW FROM t) IN (0, 6) THEN 'weekend' ELSE 'weekday' END",
    "CASE WHEN EXTRACT(ISODOW FROM d) >= 6 THEN 1 ELSE 0 END", "EXTRACT(DOW FROM d) = 1", "EXTRACT(DOW FROM d) + 1",
    "EXTRACT(YEAR FROM d) * 100 + EXTRACT(MONTH FROM d)", "EXTRACT(YEAR FROM d) * 100 + EXTRACT(WEEK FROM d)",
    *(f"date_trunc('{u}', d)" for u in ("year", "quarter", "month", "week", "day")),
    *(f"date_trunc('{u}', t)" for u in ("year", "quarter", "month", "week", "day", "hour", "minute")),
    "CAST(date_trunc('month', d) AS DATE)", "CAST(date_trunc('week', t) AS DATE)",
    "d + INTERVAL '1 day'", "d + INTERVAL '1 month'", "d - INTERVAL '1 day'", "d + INTERVAL '1 year'",
    "t + INTERVAL '2 hours'", "t - INTERVAL '30 minutes'", "t + INTERVAL '1 day'", "d + 1", "d - 1", "d + i",
    "CAST(d + INTERVAL '1 month' AS DATE)", "CAST(t AS DATE)", "CAST(d AS TIMESTAMP)",
    "d < e", "GREATEST(d, e)", "LEAST(d, e)", "d BETWEEN DATE '2021-01-01' AND DATE '2021-12-31'",
    "t < TIMESTAMP '2021-01-01 00:00:00'", "CASE WHEN d >= DATE '2024-01-01' THEN 'recent' ELSE 'old' END",
    "COALESCE(d, DATE '1900-01-01')",
]
NUMERIC = [
    "i + j", "i - j", "i * j", "-i", "i % 3", "i % NULLIF(j, 0)", "ABS(i)", "i + b", "b * 2", "i - b",
    "i / NULLIF(j, 0)", "b / 7", "(i + j) / 2", "i * 2 / 3", "i / 2", "b / NULLIF(i, 0)",
    "CAST(i AS DOUBLE PRECISION) / NULLIF(j, 0)", "i / 2.0", "f / 2",
    "ROUND(n, 1)", "ROUND(n)", "FLOOR(n)", "CEIL(n)", "ABS(n)", "-n", "n * 2", "n + 1", "n * n", "n - 0.5", "n * i",
    "n + f", "FLOOR(f)", "CEIL(f)", "ABS(f)", "f * 2", "f + i", "-f",
    "GREATEST(i, j)", "LEAST(i, j)", "COALESCE(i, 0)", "NULLIF(i, 0)", "SIGN(i)", "CAST(n AS DOUBLE PRECISION)",
    "CAST(i AS BIGINT)", "CAST(i AS DECIMAL(10,2))", "CAST(b AS DOUBLE PRECISION)", "i > 2", "i BETWEEN 0 AND 5",
    "i IN (1, 3, 5)", "i NOT IN (1, 2)", "n > 1", "f < 0",
]
STRING = [
    "UPPER(s)", "LOWER(s)", "LENGTH(s)", "TRIM(s)", "LTRIM(s)", "RTRIM(s)", "s || '!'", "CONCAT(s, '?')",
    "CONCAT(s, CAST(i AS VARCHAR))", "REPLACE(s, 'a', 'A')", "LEFT(s, 2)", "RIGHT(s, 2)", "SUBSTRING(s, 2, 3)", "SUBSTRING(s, 2)",
    "SUBSTRING(s FROM 2 FOR 3)", "LPAD(s, 6, '*')", "RPAD(s, 6, '*')", "SPLIT_PART(s, '-', 2)", "STRPOS(s, 'b')",
    "REVERSE(s)", "REPEAT(s, 2)", "s LIKE 'a%'", "s NOT LIKE '%b%'", "s ILIKE 'a%'", "s = ''", "s < 'b'",
    "CAST(i AS VARCHAR)", "CAST(d AS VARCHAR)", "CAST(n AS VARCHAR)", "CAST(b AS VARCHAR)",
    "SUBSTRING(CAST(d AS VARCHAR), 1, 7)", "COALESCE(s, 'n/a')", "NULLIF(s, '')", "UPPER(LEFT(s, 1)) || LOWER(SUBSTRING(s, 2))",
    "LENGTH(TRIM(s)) = 0", "s IS NULL",
]
CONDITIONAL = [
    "CASE WHEN i > 0 THEN 'pos' WHEN i < 0 THEN 'neg' ELSE 'zero-or-null' END", "CASE i WHEN 1 THEN 'one' ELSE 'other' END",
    "CASE WHEN s = '' THEN 'empty' END", "CASE WHEN n >= 100 THEN 'big' WHEN n >= 0 THEN 'small' ELSE 'negative' END",
    "CASE WHEN x THEN i ELSE j END", "i IS NULL", "i IS NOT NULL", "i IS DISTINCT FROM j", "i IS NOT DISTINCT FROM j",
    "x AND i > 0", "x OR i > 0", "NOT x", "COALESCE(x, FALSE)", "CAST(x AS INTEGER)", "x IS TRUE",
    "COALESCE(i, j, 0)", "CASE WHEN i IS NULL THEN 'none' ELSE 'some' END", "NULLIF(i, j)",
]
FAMILIES = {"date/time": DATE_TIME, "numeric": NUMERIC, "string": STRING, "conditional": CONDITIONAL}
# regular expressions (the warehouse's flavour: RE2 in DuckDB, POSIX AREs in PostgreSQL), month and day
# names, seconds and epochs, part differences, PostgreSQL's initcap
DUCKDB_ADDED = [
    r"regexp_matches(s, 'a.c')", r"regexp_matches(s, '\d+')", r"regexp_matches(s, '^\w+$')", r"regexp_matches(s, '\s')",
    r"regexp_matches(s, '[[:alpha:]]{3}')", r"regexp_matches(s, '^h', 'i')", r"regexp_matches(s, 'ü|É', 'i')",
    r"regexp_matches(s, '2.?$')", r"regexp_matches(s, '[^a-z ]')", r"regexp_matches(s, '\W\w')",
    r"regexp_matches(s, '^(?:a|-|b|c)+$')", r"regexp_matches(s, '\.|%')", r"regexp_matches(s, '[\-\]x]')",
    r"regexp_replace(s, 'a', 'A')", r"regexp_replace(s, '[aeiou]', '*', 'g')", r"regexp_replace(s, '(\w+) (\w+)', '\2 \1')",
    r"regexp_replace(s, '.', '<\0>')", r"regexp_replace(s, '-(.)', '+\1', 'g')", r"regexp_replace(s, 'B', '$x\\', 'gi')",
    r"regexp_replace(s, '\s+$', '')", r"regexp_replace(s, 'a|ab', 'X', 'g')", r"regexp_replace(s, '[[:upper:]]+', '_', 'g')",
    r"regexp_replace(s, '(.)(.)', '\2\1', 'g')", r"regexp_replace(s, 'l.*?e', '=')", r"regexp_replace(s, 'L', '_', 'i')",
    r"regexp_extract(s, '[0-9]+')", r"regexp_extract(s, '([a-z])-([a-z])', 2)", r"regexp_extract(s, '(x)?y', 1)",
    r"regexp_extract(s, '^(.*?)(e|$)', 1)", r"regexp_extract(s, '(?i)[A-Z]{2,3}')", r"regexp_full_match(s, '[a-c]+')",
    r"regexp_full_match(s, 'a.*|x.*')", "dayname(d)", "monthname(t)",
    "strftime(d, '%A')", "strftime(d, '%a %d %b %Y')", "strftime(t, '%B %Y')", "strftime(t, '%A, %B %d %H:%M')",
    "UPPER(strftime(d, '%b'))",
    "EXTRACT(EPOCH FROM t)", "EXTRACT(EPOCH FROM d)", "epoch(t)", "EXTRACT(SECOND FROM t)", "second(t)",
    "date_part('epoch', t)", "date_part('second', t)", "EXTRACT(SECOND FROM d)",
    *(f"date_diff('{u}', d, e)" for u in ("year", "quarter", "month", "week", "hour", "minute", "second")),
    *(f"date_diff('{u}', t, e)" for u in ("year", "quarter", "month", "week", "day", "hour", "minute", "second")),
    *(f"datediff('{u}', d, t)" for u in ("month", "week", "day", "hour", "minute")),
    "date_diff('months', e, d)", "date_diff('week', e, d)", "date_diff('week', DATE '2024-01-03', d)",
    "date_diff('week', t, TIMESTAMP '2021-01-01 00:00:00')", "date_diff('month', d, DATE '2024-03-31')",
    "date_diff('year', TIMESTAMP '2020-12-31 23:59:59', t)", "date_diff('hour', TIMESTAMP '1970-01-01 00:30:00', t)",
]
POSTGRES_ADDED = [
    r"s ~ 'a.c'", r"s ~ '\d'", r"s ~* '^h'", r"s ~* 'Ü'", r"s !~ '^[^ ]+$'", r"s ~ '2.?$'", r"s ~ 'e.$'",
    r"s ~ '\.|%'", r"s ~ '(?i)WOR'",
    r"regexp_replace(s, 'a', 'A')", r"regexp_replace(s, '[aeiou]', '*', 'g')",
    r"regexp_replace(s, '([a-z]+) ([a-z]+)', '\2 \1')", r"regexp_replace(s, '.', '<\&>')",
    r"regexp_replace(s, '-(.)', '+\1', 'g')", r"regexp_replace(s, 'B', '$x\\ \0', 'gi')", r"regexp_replace(s, '[ ]+$', '')",
    r"regexp_replace(s, 'l.*e', '=')", r"regexp_replace(s, '(.)(.)', '\2\1', 'g')", r"regexp_replace(s, 'L', '_', 'i')",
    r"substring(s from '[0-9]+')", r"substring(s from '-(.)')", r"substring(s FROM '^(.*)-')", r"substring(s from 'b.*')",
    r"(regexp_match(s, '([a-z]+)-([a-z]+)'))[2]", r"(regexp_match(s, '[0-9]+'))[1]", r"(regexp_match(s, 'D(.)', 'i'))[1]",
    "to_char(d, 'Month')", "to_char(d, 'FMMonth')", "to_char(d, 'Day')", "to_char(d, 'FMDay, DD Month YYYY')",
    "to_char(t, 'DY dy Dy MON mon Mon')", "to_char(t, 'FMMONTH FMmonth YYYY-MM-DD HH24:MI')",
    "to_char(d, 'MONTH month DAY day')", "to_char(d, 'Mon YYYY')", "to_char(d, 'fmMonth fmDay')",
    "EXTRACT(EPOCH FROM t)", "EXTRACT(EPOCH FROM d)", "EXTRACT(SECOND FROM t)", "EXTRACT(SECOND FROM t) * 2",
    "initcap(s)", "initcap(s || ' x-y')", "initcap(LOWER(s))",
]
# each warehouse's own spellings
OWN = {
    "duckdb": [
        "dayofweek(d)", "isodow(d)", "dayofweek(t)", "isodow(t)", "dayofyear(d)", "week(d)", "weekofyear(d)",
        "quarter(d)", "hour(t)", "minute(t)", "dayofmonth(d)", "year(d)", "month(d)", "day(d)",
        "CASE WHEN dayofweek(d) IN (0, 6) THEN 'weekend' ELSE 'weekday' END", "date_part('isodow', t)",
        "i // NULLIF(j, 0)", "b // 7", "i // 2", "(i + j) // 2", "d::VARCHAR", "i::DOUBLE / 4",
        "strftime(d, '%Y-%m')", "strftime(d, '%Y-%m-%d')", "strftime(t, '%H:%M')", "strftime(t, '%Y/%m/%d %H:%M:%S')",
        "strftime(d, '%y%m%d')", "date_add(d, INTERVAL 3 DAY)", "d + INTERVAL 1 WEEK", "CAST(s AS VARCHAR(3))",
        "last_day(d)", "date_diff('day', d, e)", "datediff('day', d, e)", "e - d",
        "regexp_matches(s, '^a')", "regexp_matches(s, '[0-9]+$')", "regexp_matches(s, 'b|c')",
        "regexp_matches(s, '^[A-Z][a-z]+')", "regexp_matches(s, '(ab|de)+f?$')", "regexp_matches(s, 'ß')",
        *DUCKDB_ADDED,
    ],
    "postgres": [
        "date_part('isodow', t)", "d::varchar", "i::numeric / 4", "(i + j) / 2", "s::varchar(3)", "CAST(s AS VARCHAR(3))",
        "to_char(d, 'YYYY-MM')", "to_char(d, 'YYYY-MM-DD')", "to_char(t, 'HH24:MI')", "to_char(t, 'YYYY/MM/DD HH24:MI:SS')",
        "to_char(d, 'YYMMDD')", "b / NULLIF(j, 0)", "CAST(n AS VARCHAR(4))", "e - d", "(e - d) / 7",
        "s ~ '^a'", "s ~ '[0-9]+$'", "s ~ 'b|c'", "s ~ '^[A-Z][a-z]+'", "s !~ '(ab|de)+f?$'", "s ~ 'ß'",
        *POSTGRES_ADDED,
    ],
}


def expressions(warehouse: str) -> list[str]:
    return [e for family in FAMILIES.values() for e in family] + OWN[warehouse]


# ---------------------------------------------------------------- evaluation
def _norm(v):
    if v is None:
        return None
    if isinstance(v, bool):
        return bool(v)
    if isinstance(v, (int, Decimal)):
        return Decimal(v).normalize() if Decimal(v) != 0 else Decimal(0)
    if isinstance(v, float):
        return None if math.isnan(v) else float(f"{v:.12g}") + 0.0
    if isinstance(v, dt.datetime):  # a computed key is cast to one type: DATE and TIMESTAMP at midnight agree
        v = v.replace(tzinfo=None)
        return v.date().isoformat() if v.time() == dt.time() else v.isoformat(sep=" ")
    if isinstance(v, dt.date):
        return v.isoformat()
    return v


def _select(exprs: list[str]) -> str:
    return "SELECT rid, " + ", ".join(f"{e} AS v{k}" for k, e in enumerate(exprs)) + " FROM tbl ORDER BY rid"


def _neutral(exprs: list[str], warehouse: str) -> str:
    """The warehouse's SQL read as a view is (lattice/compile.py), as neutral SQL; nothing refused."""
    types = dict(COLUMNS)
    tree = canonical(sqlglot.parse_one(_select(exprs), read=warehouse), warehouse,
                     lambda c: types.get(c.name.lower()))
    refused = refusals(tree, _select(exprs), "test", "test", warehouse)
    assert not refused, "\n".join(map(str, refused))
    return tree.sql()


def _rows(rows) -> list[tuple]:
    return [tuple(_norm(v) for v in r) for r in rows]


def _compare(exprs: list[str], got: list[tuple], want: list[tuple], engine: str, warehouse: str) -> None:
    wrong = []
    for k, expr in enumerate(exprs, 1):
        g, w = [r[k] for r in got], [r[k] for r in want]
        if g != w:
            wrong.append(f"{expr}: {engine} {g} != {warehouse} {w}")
    assert not wrong, f"{len(wrong)} of {len(exprs)} differ:\n" + "\n".join(wrong)


def _duckdb(sql: str) -> list[tuple]:
    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        con.execute(f"CREATE TABLE tbl ({', '.join(f'{c} {t}' for c, t in COLUMNS)})")
        con.executemany(f"INSERT INTO tbl VALUES ({', '.join('?' for _ in COLUMNS)})", ROWS)
        return _rows(con.execute(sql).fetchall())
    finally:
        con.close()


@pytest.fixture(scope="module")
def postgres(pg_schemas):
    engine = sa.create_engine(pg_schemas("functions"), poolclass=sa.pool.NullPool)
    pg_types = {"DOUBLE": "DOUBLE PRECISION"}
    with engine.begin() as c:
        c.exec_driver_sql(f"CREATE TABLE tbl ({', '.join(f'{n} {pg_types.get(t, t)}' for n, t in COLUMNS)})")
        c.execute(sa.text(f"INSERT INTO tbl VALUES ({', '.join(':' + n for n, _ in COLUMNS)})"),
                  [dict(zip([n for n, _ in COLUMNS], r)) for r in ROWS])

    def run(sql: str) -> list[tuple]:
        with engine.connect() as c:
            c.exec_driver_sql("SET TIME ZONE 'UTC'")
            return _rows(c.exec_driver_sql(sql.replace("%", "%%")).fetchall())

    yield run
    engine.dispose()


@pytest.fixture(scope="module")
def spark_table(spark_session):
    from pyspark.sql.types import (BooleanType, DateType, DecimalType, DoubleType, IntegerType, LongType, StringType,
                                   StructField, StructType, TimestampType)

    kinds = {"INTEGER": IntegerType(), "BIGINT": LongType(), "DOUBLE": DoubleType(), "DECIMAL(8,2)": DecimalType(8, 2),
             "VARCHAR": StringType(), "DATE": DateType(), "TIMESTAMP": TimestampType(), "BOOLEAN": BooleanType()}
    schema = StructType([StructField(c, kinds[t]) for c, t in COLUMNS])
    spark_session.createDataFrame(ROWS, schema).createOrReplaceTempView("tbl")

    def run(sql: str) -> list[tuple]:
        return _rows(spark_session.sql(sql).collect())

    yield run
    spark_session.catalog.dropTempView("tbl")


def _warehouse_rows(warehouse: str, postgres, exprs: list[str]) -> list[tuple]:
    return _duckdb(_select(exprs)) if warehouse == "duckdb" else postgres(_select(exprs))


@pytest.mark.parametrize("warehouse", ["duckdb", "postgres"])
def test_spark_computes_what_the_warehouse_computes(warehouse, postgres, spark_table):
    exprs = expressions(warehouse)
    want = _warehouse_rows(warehouse, postgres, exprs)
    _compare(exprs, spark_table(to_dialect(_neutral(exprs, warehouse), "spark")), want, "Spark", warehouse)


@pytest.mark.parametrize("warehouse", ["duckdb", "postgres"])
def test_the_duckdb_oracle_computes_what_the_warehouse_computes(warehouse, postgres):
    exprs = expressions(warehouse)
    want = _warehouse_rows(warehouse, postgres, exprs)
    _compare(exprs, _duckdb(to_dialect(_neutral(exprs, warehouse), "duckdb")), want, "DuckDB", warehouse)


def test_postgresql_runs_its_own_views_translated(postgres):
    exprs = expressions("postgres")
    want = postgres(_select(exprs))
    _compare(exprs, postgres(to_dialect(_neutral(exprs, "postgres"), "postgres")), want, "PostgreSQL (translated)",
             "postgres")


def test_the_agreement_covers_every_family():
    sizes = {family: len(exprs) for family, exprs in FAMILIES.items()}
    assert all(n >= 15 for n in sizes.values()), sizes
    assert sum(len(expressions(w)) for w in ("duckdb", "postgres")) + 2 * len(QUANTILES) >= 300


def test_postgresql_replacements_are_the_first_match_where_allowed(postgres):
    """PostgreSQL picks the longest match at the leftmost start, RE2 and Java the first by their
    quantifiers; the patterns PostgreSQL's regexp_replace and substring are translated for (no '|', no
    repeated group, no lazy quantifier) pick the same match: random ones of them, translated, against
    PostgreSQL's own value."""
    import random

    r = random.Random(7)
    atoms, quants = ["a", "b", "[ab]", ".", "c", "[^a]"], ["", "", "*", "+", "?", "{1,2}", "{0,2}"]

    def seq(n: int) -> str:
        return "".join(r.choice(atoms) + r.choice(quants) for _ in range(n))

    patterns = {f"({seq(r.randint(1, 2))}){seq(r.randint(0, 2))}({seq(r.randint(1, 2))})" for _ in range(60)}
    patterns |= {seq(r.randint(1, 4)) for _ in range(60)}
    exprs = []
    for p in sorted(patterns):
        exprs.append(f"substring(s from '{p}')")
        if "(" in p:
            exprs.append(f"regexp_replace(s, '{p}', '<\\2|\\1>', 'g')")
    exprs = [e for e in exprs if not refusals(canonical(sqlglot.parse_one(_select([e]), read="postgres"), "postgres"),
                                              _select([e]), "test", "test", "postgres")]
    assert len(exprs) > 150, len(exprs)
    strings = ["".join(r.choice("abc\n") for _ in range(r.randint(0, 7))) for _ in range(30)]
    values = ", ".join(f"({k}, '{s}')" for k, s in enumerate(strings))
    table = f"(VALUES {values}) AS tbl(rid, s)"
    sql = _select(exprs).replace("FROM tbl", f"FROM {table}")
    want = postgres(sql)
    got = _duckdb(to_dialect(_neutral(exprs, "postgres"), "duckdb").replace("FROM tbl", f"FROM {table}"))
    _compare(exprs, got, want, "DuckDB", "postgres")


def test_postgresql_divides_the_integer_columns_of_a_summary_view_as_integers(postgres, pg_schemas):
    """A view over a summary view: SUM and COUNT columns are integers, so PostgreSQL's q / n truncates
    toward zero; the view's neutral SQL says so (as it does for the base tables' integer columns), and
    DuckDB running it gives PostgreSQL's values."""
    schema = "CREATE TABLE pos (store INTEGER, qty INTEGER);"
    files = {"sql/summaries/a.sql": "CREATE VIEW a AS SELECT store, SUM(qty) AS q, COUNT(*) AS n FROM pos GROUP BY store",
             "sql/summaries/b.sql": "CREATE VIEW b AS SELECT q / n AS ratio, COUNT(*) AS c, SUM(q / 2) AS half "
                                    "FROM a GROUP BY q / n"}
    view = compile_project(schema, files, dialect="postgres").view("b")
    assert view.mode == "nested" and view.keys[0].type == "BIGINT", (view.mode, view.keys)
    rows = [(1, 7), (1, 0), (2, -7), (2, 0), (3, 5), (4, -1), (4, -1), (4, 1)]
    select = "SELECT q / n AS ratio, COUNT(*) AS c, SUM(q / 2) AS half FROM a GROUP BY q / n ORDER BY 1"
    engine = sa.create_engine(pg_schemas("int_division"), poolclass=sa.pool.NullPool)
    with engine.begin() as c:
        c.exec_driver_sql(schema)
        c.execute(sa.text("INSERT INTO pos VALUES (:s, :q)"), [{"s": s, "q": q} for s, q in rows])
        c.exec_driver_sql(files["sql/summaries/a.sql"].split(": ")[-1])
        want = _rows(c.exec_driver_sql(select).fetchall())
    engine.dispose()
    con = duckdb.connect()
    con.execute(schema)
    con.executemany("INSERT INTO pos VALUES (?, ?)", rows)
    con.execute(files["sql/summaries/a.sql"])
    got = _rows(con.execute(to_dialect(view.sql, "duckdb") + " ORDER BY 1").fetchall())
    con.close()
    assert got == want == [(-3, 1, -3), (0, 1, 0), (3, 1, 3), (5, 1, 2)], (got, want)  # -7 / 2 is -3


# ---------------------------------------------------------------- quantiles of DECIMAL, DOUBLE and INTEGER
# MEDIAN and PERCENTILE_CONT of a DECIMAL: DuckDB keeps the DECIMAL(p,s) (interpolated, truncated),
# PostgreSQL reads it as DOUBLE PRECISION; each changed group's value is recomputed by emit.holistic_values
QUANTILES = [("percentile_cont", p, col) for col in ("n", "f", "i") for p in (0.5, 0.1, 0.25, 0.75, 0.9, 0.333)] + \
    [("percentile_disc", p, col) for col in ("n", "f") for p in (0.5, 0.1)] + [("mode", None, "n")]
QROWS = [  # (g, n, f, i): 1.00/1.01, negatives, one row, NULLs, even and odd counts, duplicates
    (1, N("1.00"), 1.0, 1), (1, N("1.01"), 1.01, 2),
    (2, N("-1.00"), -1.0, -1), (2, N("-1.05"), -1.05, -4),
    (3, N("42.42"), 42.42, 42),
    (4, None, None, None), (4, N("0.07"), 0.07, 7), (4, N("0.00"), 0.0, 0), (4, None, None, None),
    (5, N("-8240.69"), -8240.69, -8), (5, N("-1996.71"), -1996.71, -1), (5, N("-46.01"), -46.01, 0),
    (6, N("3714.04"), 3714.04, 3), (6, N("-661.16"), -661.16, -6), (6, N("-661.16"), -661.16, -6),
    (7, None, None, None),
    (8, N("-0.01"), -0.01, -1), (8, N("0.01"), 0.01, 1), (8, N("999999.99"), 999999.99, 9), (8, N("-999999.99"), -999999.99, -9),
    (9, N("5.55"), 5.55, 5), (9, N("5.55"), 5.55, 5), (9, N("5.56"), 5.56, 6), (9, N("-5.57"), -5.57, -5),
]
QSCHEMA = "CREATE TABLE q (g INTEGER, n DECIMAL(8,2), f DOUBLE, i INTEGER);"


def _quantile_sql(warehouse: str, func: str, p, col: str) -> str:
    if func == "mode":
        return f"mode() WITHIN GROUP (ORDER BY {col})"
    if warehouse == "duckdb" and func == "percentile_cont" and p == 0.5:
        return f"median({col})"
    if warehouse == "duckdb" and p == 0.1:
        return f"{func.replace('percentile', 'quantile')}({col}, {p})"
    return f"{func}({p}) WITHIN GROUP (ORDER BY {col})"


def _quantile_view(warehouse: str) -> str:
    aggs = ", ".join(f"{_quantile_sql(warehouse, *q)} AS q{k}" for k, q in enumerate(QUANTILES))
    return f"SELECT g, {aggs} FROM q GROUP BY g"


@pytest.mark.parametrize("warehouse", ["duckdb", "postgres"])
def test_quantiles_of_decimals_are_recomputed_as_the_warehouse_computes_them(warehouse, postgres, spark_session,
                                                                             pg_schemas):
    plan = compile_project(QSCHEMA, {"sql/summaries/qv.sql": f"CREATE VIEW qv AS {_quantile_view(warehouse)}"},
                           dialect=warehouse)
    view, aux = plan.view("qv"), plan.auxiliary[0]
    assert view.mode == "auxiliary", view.reason
    # the warehouse's own value
    if warehouse == "duckdb":
        con = duckdb.connect()
        con.execute("CREATE TABLE q (g INTEGER, n DECIMAL(8,2), f DOUBLE, i INTEGER)")
        con.executemany("INSERT INTO q VALUES (?, ?, ?, ?)", QROWS)
        want = _rows(con.execute(_quantile_view(warehouse) + " ORDER BY g").fetchall())
        con.close()
    else:
        engine = sa.create_engine(pg_schemas("quantiles"), poolclass=sa.pool.NullPool)
        with engine.begin() as c:
            c.exec_driver_sql("CREATE TABLE q (g INTEGER, n DECIMAL(8,2), f DOUBLE PRECISION, i INTEGER)")
            c.execute(sa.text("INSERT INTO q VALUES (:g, :n, :f, :i)"),
                      [dict(zip("gnfi", r)) for r in QROWS])
            want = _rows(c.exec_driver_sql(_quantile_view(warehouse) + " ORDER BY g").fetchall())
        engine.dispose()
    # Spark: the auxiliary view's rows, then each group's holistic values from them
    from pyspark.sql.types import DecimalType, DoubleType, IntegerType, StructField, StructType

    schema = StructType([StructField("g", IntegerType()), StructField("n", DecimalType(8, 2)),
                         StructField("f", DoubleType()), StructField("i", IntegerType())])
    spark_session.createDataFrame(QROWS, schema).createOrReplaceTempView("q")
    spark_session.sql(to_dialect(aux.sql, "spark")).createOrReplaceTempView("qaux")
    values = spark_session.sql(to_dialect(emit.holistic_values(view, ident("qaux")), "spark"))
    column = {o.name: o.source for o in view.outputs}
    got = _rows(values.select("g", *(column[f"q{k}"] for k in range(len(QUANTILES)))).orderBy("g").collect())
    types = {s.column: s.type for s in view.stored}
    for k, (func, p, col) in enumerate(QUANTILES):
        if func == "percentile_cont" and col == "n":  # the warehouse's type: DuckDB keeps the DECIMAL
            assert types[column[f"q{k}"]] == ("DECIMAL(8,2)" if warehouse == "duckdb" else "DOUBLE")
    _compare([_quantile_sql(warehouse, *q) for q in QUANTILES], got, want, "Spark", warehouse)


# ---------------------------------------------------------------- refusals
SCHEMA = "CREATE TABLE tbl (" + ", ".join(f"{c} {t}" for c, t in COLUMNS) + ");"
REFUSED = [  # (warehouse, expression as written, what the message says)
    ("duckdb", "random()", "different value on every run"), ("duckdb", "now()", "different value on every run"),
    ("postgres", "now()", "different value on every run"), ("duckdb", "current_date", "different value on every run"),
    ("duckdb", "my_udf(s)", "not a function nightshift knows"), ("duckdb", "initcap(s)", "DuckDB has no initcap"),
    ("duckdb", "regexp_matches(s, '(?=a)')", "look-arounds"), ("duckdb", r"regexp_matches(s, '\bx')", r"\b"),
    ("postgres", r"s ~ '\w+'", "locale"), ("postgres", "s ~ '[[:alpha:]]'", "locale"),
    ("postgres", "regexp_replace(s, 'a|b', 'c', 'g')", "longest alternative"),
    ("postgres", "substring(s from '(ab)+')", "repeated group"), ("duckdb", "regexp_replace(s, 'a*', 'b', 'g')", "empty text"),
    ("duckdb", "regexp_replace(s, 'a', 'b', 'n')", "the option 'n'"), ("duckdb", "strftime(d, '%j')", "date formats"),
    ("postgres", "to_char(d, 'Q')", "not translated"), ("postgres", "to_char(d, 'MoNtH')", "not translated"), ("postgres", "regexp_match(s, 'a')", "not a function"), ("duckdb", "mode(s)", "order the rows are read"),
    ("duckdb", "date_add(d, 1)", "INTERVAL"), ("duckdb", "EXTRACT(MILLISECOND FROM t)", "EXTRACT(MILLISECOND)"),
    ("duckdb", "date_diff('millisecond', t, t)", "date_diff"), ("duckdb", "date_trunc('millennium', d)", "date_trunc"),
]


@pytest.mark.parametrize("warehouse,expr,why", REFUSED)
def test_what_no_engine_computes_as_the_warehouse_is_refused_as_written(warehouse, expr, why):
    sql = f"CREATE VIEW v AS\nSELECT {expr} AS k, COUNT(*) AS n\nFROM tbl\nGROUP BY 1"
    with pytest.raises(UnsupportedView) as info:
        compile_project(SCHEMA, {"sql/summaries/v.sql": sql}, dialect=warehouse)
    message = str(info.value)
    assert f"sql/summaries/v.sql: view v, line 2: {expr}: " in message and why in message, message


def test_every_refusal_of_a_project_is_reported_at_once():
    files = {"sql/summaries/a.sql": "CREATE VIEW a AS SELECT g, COUNT(*) AS n\nFROM tbl\nWHERE t < now()\nGROUP BY g",
             "sql/summaries/b.sql": "CREATE VIEW b AS SELECT initcap(s) AS k, SUM(i) AS si FROM tbl GROUP BY initcap(s)",
             "sql/summaries/c.sql": "CREATE VIEW c AS SELECT dayofweek(d) AS k, median(n) AS m FROM tbl GROUP BY 1"}
    with pytest.raises(UnsupportedView) as info:
        compile_project(SCHEMA, files, dialect="duckdb")
    lines = str(info.value).splitlines()
    assert lines[0].startswith("3 constructs"), lines
    assert "sql/summaries/a.sql: view a, line 3: now(): " in lines[1]
    assert "sql/summaries/b.sql: view b, line 1: initcap(s): " in lines[2]
    assert "sql/summaries/b.sql: view b, line 1: initcap(s): " in lines[3]  # written twice, reported twice
    assert not any("view c" in line for line in lines)  # a weekday and a MEDIAN of a DECIMAL are kept


@pytest.mark.parametrize("warehouse", ["duckdb", "postgres"])
def test_every_expression_is_a_group_key_the_delta_mode_keeps(warehouse):
    """Each expression of the warehouse's SQL compiles as a group key (typed), kept in delta mode."""
    files = {f"sql/summaries/v{k}.sql": f"CREATE VIEW v{k} AS SELECT {e} AS k, COUNT(*) AS n, SUM(i) AS si FROM tbl "
                                        f"GROUP BY {e}" for k, e in enumerate(expressions(warehouse))}
    plan = compile_project(SCHEMA, files, dialect=warehouse)
    assert [v.name for v in plan.views if v.mode != "delta"] == []
    assert all(v.keys[0].type for v in plan.views)


# ---------------------------------------------------------------- through the real cycle
# a weekday view and a MEDIAN of money, each in the warehouse's own SQL, night after night against a model
# recomputing them from scratch (DuckDB over the model's rows, the warehouse's semantics written out)
E2E_VIEWS = {
    "duckdb": {
        "weekday_sales": "CREATE VIEW weekday_sales AS SELECT dayofweek(date) AS dow, isodow(date) AS iso, "
                         "CASE WHEN EXTRACT(DOW FROM date) IN (0, 6) THEN 'weekend' ELSE 'weekday' END AS part, "
                         "COUNT(*) AS n, SUM(qty) AS q FROM pos GROUP BY 1, 2, 3",
        "item_price": "CREATE VIEW item_price AS SELECT itemID, median(price) AS med, quantile_cont(price, 0.9) AS p90, "
                      "PERCENTILE_CONT(0.25) WITHIN GROUP (ORDER BY price * qty) AS q1_amount, COUNT(*) AS n "
                      "FROM pos GROUP BY itemID",
    },
    "postgresql": {
        "weekday_sales": "CREATE VIEW weekday_sales AS SELECT date_part('dow', date) AS dow, "
                         "EXTRACT(ISODOW FROM date) AS iso, "
                         "CASE WHEN EXTRACT(DOW FROM date) IN (0, 6) THEN 'weekend' ELSE 'weekday' END AS part, "
                         "COUNT(*) AS n, SUM(qty) AS q FROM pos GROUP BY 1, 2, 3",
        "item_price": "CREATE VIEW item_price AS SELECT itemID, percentile_cont(0.5) WITHIN GROUP (ORDER BY price) AS med, "
                      "percentile_cont(0.9) WITHIN GROUP (ORDER BY price) AS p90, "
                      "PERCENTILE_CONT(0.25) WITHIN GROUP (ORDER BY price * qty) AS q1_amount, COUNT(*) AS n "
                      "FROM pos GROUP BY itemID",
    },
}
# the model's DuckDB, given PostgreSQL's meaning: its PERCENTILE_CONT reads a NUMERIC as DOUBLE PRECISION
E2E_MODEL = {
    "duckdb": E2E_VIEWS["duckdb"],
    "postgresql": {
        "weekday_sales": E2E_VIEWS["postgresql"]["weekday_sales"],
        "item_price": "CREATE VIEW item_price AS SELECT itemID, median(CAST(price AS DOUBLE)) AS med, "
                      "quantile_cont(CAST(price AS DOUBLE), 0.9) AS p90, "
                      "quantile_cont(CAST(price * qty AS DOUBLE), 0.25) AS q1_amount, COUNT(*) AS n "
                      "FROM pos GROUP BY itemID",
    },
}


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["duckdb", "postgresql"])
def test_views_in_the_warehouses_sql_equal_recomputation_night_after_night(tmp_path, spark, quiet, warehouse_url,
                                                                          backend):
    from harness import BatchGenerator, Model, check_served, make_project, write_changes

    from nightshift.config import load_project
    from nightshift.cycle import Cycle

    root = make_project(tmp_path / "p", E2E_VIEWS[backend], url=warehouse_url(backend, "warehouse_sql"))
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    assert cycle.plan.view("weekday_sales").mode == "delta" and cycle.plan.view("item_price").mode == "auxiliary"
    med = next(s for s in cycle.plan.view("item_price").stored if s.func == "percentile_cont 0.5")
    assert med.type == ("DECIMAL(8,2)" if backend == "duckdb" else "DOUBLE")
    model = Model()
    gen = BatchGenerator(23, model)
    for n in range(4):
        changes = gen.initial() if n == 0 else gen.night()
        if n == 1:  # two items whose medians interpolate to a third decimal: DuckDB truncates, PostgreSQL does not
            store = model.tables["stores"][0][0]
            a, b = (max(r[0] for r in model.tables["items"]) + k for k in (1000, 1001))
            changes.setdefault("items", []).extend(("insert", (i, "c0", 1.0)) for i in (a, b))
            changes.setdefault("pos", []).extend(
                ("insert", (store, i, dt.date(2026, 1, 3), 1, N(p))) for i, p in ((a, "1.00"), (a, "1.01"), (b, "-1.00"),
                                                                                  (b, "-1.05")))
        write_changes(root, f"b{n:04d}", changes)
        cycle.run(f"b{n:04d}")
        model.apply(changes)
        check_served(cycle, model, E2E_MODEL[backend], f"{backend}, batch b{n:04d}")
        if n == 1:
            served = {r[0]: r[1] for r in cycle.warehouse.read_view(cycle.plan.view("item_price"))}
            want = (N("1.00"), N("-1.02")) if backend == "duckdb" else (1.005, -1.025)
            assert (served[a], served[b]) == want, (served[a], served[b])


@pytest.mark.slow
def test_decimal_interpolation_is_duckdbs_to_the_last_digit(spark_session):
    """DuckDB's PERCENTILE_CONT of a DECIMAL (a fused multiply-add, then truncation, up to 18 digits; the
    interpolated part floored above), recomputed in Spark for random values, widths and fractions: the
    same digits every time."""
    import random

    from pyspark.sql.types import DecimalType, DoubleType, LongType, StructField, StructType

    from lattice.warehouse_sql import duckdb_decimal_interpolation

    r, con = random.Random(17), duckdb.connect()
    for decimal_type, scale, top in (("DECIMAL(10,2)", 2, 10**6), ("DECIMAL(18,4)", 4, 10**9), ("DECIMAL(4,1)", 1, 999),
                                     ("DECIMAL(38,2)", 2, 10**7)):
        rows = []
        for _ in range(400):
            values = sorted(N(r.randint(-top, top)).scaleb(-scale) for _ in range(r.randint(2, 9)))
            p = r.choice([0.1, 0.9, 0.333, 0.01, 0.99, 0.7, 0.3, 0.5, 0.25])
            position = float(len(values) - 1) * p
            if math.floor(position) == math.ceil(position):
                continue
            want = con.execute(f"SELECT quantile_cont(x, {p}) FROM (SELECT unnest(?::{decimal_type}[]) AS x)",
                               [values]).fetchone()[0]
            rows.append((values[math.floor(position)], values[math.ceil(position)], p, len(values), want))
        precision = int(decimal_type[8:].split(",")[0])
        schema = StructType([StructField("lo", DecimalType(precision, scale)), StructField("hi", DecimalType(precision, scale)),
                             StructField("p", DoubleType()), StructField("n", LongType()),
                             StructField("want", DecimalType(precision, scale))])
        spark_session.createDataFrame(rows, schema).createOrReplaceTempView("pairs")
        got = duckdb_decimal_interpolation('"lo"', '"hi"', '("p" * ("n" - 1))', decimal_type)
        wrong = spark_session.sql(to_dialect(f'SELECT * FROM (SELECT *, {got} AS "got" FROM "pairs") AS "t" '
                                             f'WHERE NOT "got" <=> "want"', "spark")).collect()
        assert not wrong, (decimal_type, wrong[:3])
    con.close()


@pytest.mark.slow
def test_a_recomputed_view_has_duckdbs_decimal_quantiles_in_spark(spark_session):
    """A view kept by recompute is evaluated by Spark from its own SQL: a MEDIAN or PERCENTILE_CONT of a
    DECIMAL there is DuckDB's too (the same digits, the same type)."""
    aggs = ", ".join(f"{_quantile_sql('duckdb', *q)} AS q{k}" for k, q in enumerate(QUANTILES) if q[2] == "n")
    sql = f"CREATE VIEW qr AS SELECT g, {aggs} FROM q GROUP BY g"
    view = compile_project(QSCHEMA, {"sql/summaries/qr.sql": sql}, maintain=(("qr", "recompute"),)).view("qr")
    assert view.mode == "recompute"
    con = duckdb.connect()
    con.execute("CREATE TABLE q (g INTEGER, n DECIMAL(8,2), f DOUBLE, i INTEGER)")
    con.executemany("INSERT INTO q VALUES (?, ?, ?, ?)", QROWS)
    want = con.execute(sql.split(" AS ", 1)[1] + " ORDER BY g").fetchall()
    con.close()
    from pyspark.sql.types import DecimalType, DoubleType, IntegerType, StructField, StructType

    schema = StructType([StructField("g", IntegerType()), StructField("n", DecimalType(8, 2)),
                         StructField("f", DoubleType()), StructField("i", IntegerType())])
    spark_session.createDataFrame(QROWS, schema).createOrReplaceTempView("q")
    got = spark_session.sql(to_dialect(view.sql, "spark")).orderBy("g").collect()
    assert [tuple(r) for r in got] == want  # DECIMAL values, exactly
