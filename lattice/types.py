"""SQL type normalization and the result types of the stored aggregates (one place for the rules)."""

from __future__ import annotations

import re

from sqlglot import exp

_INTEGER = {"TINYINT": "INTEGER", "SMALLINT": "INTEGER", "INT": "INTEGER", "INTEGER": "INTEGER", "BIGINT": "BIGINT",
            "INT4": "INTEGER", "INT8": "BIGINT"}
_FLOAT = {"FLOAT": "DOUBLE", "DOUBLE": "DOUBLE", "REAL": "DOUBLE", "DOUBLE PRECISION": "DOUBLE"}
_TEXT = {"VARCHAR", "TEXT", "CHAR", "STRING", "NVARCHAR", "NCHAR", "BPCHAR"}
_DECIMAL = re.compile(r"^(?:DECIMAL|NUMERIC)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?$")


def normalize(type_text: str) -> str | None:
    """Map a declared SQL type to one of INTEGER, BIGINT, DOUBLE, DECIMAL(p,s), VARCHAR, DATE, TIMESTAMP, BOOLEAN."""
    t = " ".join(type_text.upper().split())
    base = re.sub(r"\(.*\)$", "", t).strip()
    if base in _INTEGER:
        return _INTEGER[base]
    if base in _FLOAT:
        return _FLOAT[base]
    if base in _TEXT:
        return "VARCHAR"
    m = _DECIMAL.match(t)
    if m:
        p = int(m.group(1) or 18)
        s = int(m.group(2) or 0)
        return f"DECIMAL({p},{s})"
    if base in ("DATE",):
        return "DATE"
    if base in ("TIMESTAMP", "DATETIME", "TIMESTAMP WITHOUT TIME ZONE", "TIMESTAMP_NTZ"):
        return "TIMESTAMP"
    if base in ("BOOLEAN", "BOOL"):
        return "BOOLEAN"
    return None


def from_datatype(dt: exp.DataType) -> str | None:
    return normalize(dt.sql(dialect="duckdb"))


def decimal_scale(t: str) -> int | None:
    m = _DECIMAL.match(t)
    return int(m.group(2) or 0) if m else None


def family(t: str) -> str:
    if t in ("INTEGER", "BIGINT"):
        return "integer"
    if t == "DOUBLE":
        return "float"
    if t.startswith("DECIMAL"):
        return "decimal"
    return t.lower()


def sum_type(arg_type: str) -> str:
    """SUM keeps integers exact in BIGINT and decimals in DECIMAL(38,s); anything else is DOUBLE."""
    fam = family(arg_type)
    if fam == "integer":
        return "BIGINT"
    if fam == "decimal":
        return f"DECIMAL(38,{decimal_scale(arg_type)})"
    return "DOUBLE"


def spark_type(t: str) -> str:
    """The Spark SQL type name for a normalized type."""
    if t == "VARCHAR":
        return "STRING"
    if t == "INTEGER":
        return "INT"
    return t
