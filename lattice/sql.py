"""SQL text, one place per engine: identifiers, literals, and the transpiler from the neutral dialect.

Every query nightshift writes is built in sqlglot's neutral dialect (identifiers in double quotes,
strings in single quotes, both escaped by doubling) with `ident` and `literal`, then transpiled with
`to_dialect` for the engine that runs it. Code that must write an engine's syntax directly (Spark's
DataFrame column names, PostgreSQL COPY) passes `engine` to the same two functions. Nothing else in
nightshift quotes a name or a value.

    engine     identifier          string literal
    neutral    "a""b"              'it''s'
    duckdb     "a""b"              'it''s'
    postgres   "a""b"              'it''s'          (standard_conforming_strings, the default)
    spark      `a``b`              'it\\'s'          (Spark unescapes backslashes in literals)
"""

from __future__ import annotations

import datetime as dt
import decimal
import re

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.dialects.spark import Spark

from lattice.warehouse_sql import for_engine


class _Spark(Spark):
    """Spark as sqlglot writes it, except that PERCENTILE_CONT/DISC(p) WITHIN GROUP (ORDER BY x) stays
    as written (Spark 3.3+ evaluates it exactly); sqlglot rewrites it to PERCENTILE_APPROX."""

    class Generator(Spark.Generator):
        TRANSFORMS = {k: v for k, v in Spark.Generator.TRANSFORMS.items() if k is not exp.WithinGroup}


ENGINES = ("neutral", "spark", "duckdb", "postgres")
_SQLGLOT = {"neutral": None, "spark": _Spark, "duckdb": "duckdb", "postgres": "postgres"}


def _check(engine: str) -> None:
    if engine not in _SQLGLOT:
        raise ValueError(f"unknown SQL engine {engine!r} (one of {', '.join(ENGINES)})")


def ident(name: str, engine: str = "neutral") -> str:
    """A quoted identifier: any character is allowed in `name`, the quote character is doubled."""
    _check(engine)
    if engine == "spark":
        return "`" + name.replace("`", "``") + "`"
    return '"' + name.replace('"', '""') + '"'


def safe_name(text: str) -> str:
    """`text` as a bare identifier: any character a bare identifier cannot hold is spelled out as
    _<hex>_ (a view may be named "Sales by Store"), so different texts stay different names."""
    return re.sub(r"[^A-Za-z0-9_]", lambda m: f"_{ord(m.group()):x}_", text)


def qualified(table: str, column: str, engine: str = "neutral") -> str:
    return f"{ident(table, engine)}.{ident(column, engine)}"


def literal(value, engine: str = "neutral") -> str:
    """A SQL literal for a Python value (None, bool, int, float, Decimal, str, date, datetime)."""
    _check(engine)
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, decimal.Decimal)):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP {_string(value.isoformat(sep=' '), engine)}"
    if isinstance(value, dt.date):
        return f"DATE {_string(value.isoformat(), engine)}"
    return _string(str(value), engine)


def _string(text: str, engine: str) -> str:
    if engine == "spark":
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return "'" + text.replace("'", "''") + "'"


def to_dialect(sql: str, engine: str) -> str:
    """Neutral SQL (one statement) as the engine's SQL, computing what the warehouse computes: each
    function family in the engine's spelling of the warehouse's semantics (lattice/warehouse_sql.py)."""
    _check(engine)
    if engine == "neutral":
        return sql
    tree = for_engine(sqlglot.parse_one(sql), engine)
    return Dialect.get_or_raise(_SQLGLOT[engine]).generate(tree, copy=False)


def duckdb_read_parquet(files) -> str:
    """DuckDB's read_parquet over exactly these files (paths), without hive partition columns from
    folder names such as batch_id=<ID>."""
    return "read_parquet([" + ", ".join(literal(str(f), "duckdb") for f in files) + "], hive_partitioning = false)"


def base_select_list(columns, present: set[str], cast: bool = False) -> str:
    """The DuckDB select list of a lake base version's declared (name, type) columns: a column declared
    after the version was written (absent from `present`, its Parquet columns in lower case) reads
    NULL, as spark_jobs.changes.read_base reads it. `cast`: every present column as its declared type."""
    def one(name: str, type_: str) -> str:
        if name.lower() not in present:
            return f"CAST(NULL AS {type_}) AS {ident(name)}"
        return f"CAST({ident(name)} AS {type_}) AS {ident(name)}" if cast else ident(name)

    return ", ".join(one(n, t) for n, t in columns)
