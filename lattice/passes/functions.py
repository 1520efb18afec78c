"""Expressions whose value Spark, DuckDB and PostgreSQL do not agree on, refused in every view.

A view's expressions (group keys, aggregate arguments, filters) are evaluated by Spark (propagate),
by DuckDB (the oracle, validation's sampled recompute) and by the warehouse (validation's rollups
along lattice edges), each from the same neutral SQL transpiled by sqlglot. Measured on this stack
(sqlglot 30.30, Spark 4.2, DuckDB 2.0, PostgreSQL 15; tests/test_functions.py keeps checking the
ones allowed), these constructs give different values (or exist in only some engines); each is
refused with the spelling that agrees. Differences of result *type* alone are harmless: a computed
group key is cast to one type (DuckDB's) wherever it is computed.
"""

from __future__ import annotations

from sqlglot import exp

from lattice.errors import UnsupportedView

_EXTRACT_OK = {"YEAR", "QUARTER", "MONTH", "DAY", "DOY", "DAYOFYEAR", "WEEK", "HOUR", "MINUTE"}
_TRUNC_OK = {"YEAR", "QUARTER", "MONTH", "WEEK"}
_WEEKDAY = "CAST(((DATEDIFF(d, DATE '1970-01-04') % 7) + 7) % 7 AS INT) (0 = Sunday)"

# node class -> why it is refused and what to write instead
_REFUSED: dict[type, str] = {
    exp.DayOfWeek: f"weekday numbers differ (Spark 1..7 from Sunday, DuckDB and PostgreSQL 0..6); write {_WEEKDAY}",
    exp.DayOfWeekIso: f"ISO weekdays are unknown to Spark; write {_WEEKDAY}",
    exp.Quarter: "PostgreSQL has no QUARTER(); write CAST(EXTRACT(QUARTER FROM x) AS INT)",
    exp.DayOfMonth: "PostgreSQL has no DAYOFMONTH(); write CAST(EXTRACT(DAY FROM x) AS INT)",
    exp.DayOfYear: "PostgreSQL has no DAYOFYEAR(); write CAST(EXTRACT(DOY FROM x) AS INT)",
    exp.WeekOfYear: "PostgreSQL has no WEEKOFYEAR(); write CAST(EXTRACT(WEEK FROM x) AS INT)",
    exp.Week: "WEEK() exists in neither Spark nor PostgreSQL; write CAST(EXTRACT(WEEK FROM x) AS INT)",
    exp.Hour: "PostgreSQL has no HOUR(); write CAST(EXTRACT(HOUR FROM t) AS INT)",
    exp.Minute: "PostgreSQL has no MINUTE(); write CAST(EXTRACT(MINUTE FROM t) AS INT)",
    exp.DateAdd: "DATE_ADD(d, n) adds n *seconds* in PostgreSQL and the INTERVAL form fails in Spark; write d + n "
                 "or CAST(d + INTERVAL 'n' DAY AS DATE)",
    exp.DateSub: "DATE_SUB fails in Spark and means seconds in PostgreSQL; write d - n or CAST(d - INTERVAL 'n' DAY AS DATE)",
    exp.AddMonths: "PostgreSQL has no ADD_MONTHS(); write CAST(d + INTERVAL 'n' MONTH AS DATE)",
    exp.TsOrDsAdd: "date arithmetic functions differ between engines; write d + n or d + INTERVAL 'n' DAY",
    exp.Initcap: "INITCAP capitalizes different letters in Spark (only after spaces) than in DuckDB and PostgreSQL",
    exp.ToChar: "the format is dropped for Spark and DuckDB; write SUBSTRING(CAST(d AS VARCHAR), 1, 7) for 'YYYY-MM'",
    exp.TimeToStr: "date formats differ between engines; write SUBSTRING(CAST(d AS VARCHAR), 1, 7) for 'YYYY-MM'",
    exp.StrToTime: "date formats differ between engines; write CAST(s AS DATE) or CAST(s AS TIMESTAMP)",
    exp.RegexpReplace: "regular-expression syntax differs (Java in Spark, RE2 in DuckDB, POSIX in PostgreSQL)",
    exp.RegexpLike: "regular-expression syntax differs (Java in Spark, RE2 in DuckDB, POSIX in PostgreSQL)",
    exp.RegexpExtract: "regular-expression syntax differs (Java in Spark, RE2 in DuckDB, POSIX in PostgreSQL)",
    exp.RegexpILike: "regular-expression syntax differs (Java in Spark, RE2 in DuckDB, POSIX in PostgreSQL)",
}
_RANDOM = (exp.Rand, exp.Randn, exp.Uuid, exp.CurrentDate, exp.CurrentTimestamp, exp.CurrentTime,
           exp.CurrentDatetime)


def check_functions(tree: exp.Expression, where: str, user: frozenset[str] = frozenset()) -> None:
    """Raise UnsupportedView naming the first construct of `tree` that the engines disagree on.
    `where` is the prefix of the message ("sql/summaries/x.sql: view x"); `user`: the lower-case names
    of the user-defined aggregates (nightshift.toml [aggregates]), which nightshift evaluates itself."""
    for node in tree.walk():
        if isinstance(node, exp.Anonymous) and node.name.lower() in user:
            continue
        reason = _why_refused(node)
        if reason:
            raise UnsupportedView(f"{where}: {_name(node)}: {reason}")


def nondeterministic(tree: exp.Expression) -> str | None:
    """The first function whose value changes from run to run (RANDOM(), CURRENT_DATE, ...), or None."""
    node = tree.find(*_RANDOM)
    return _name(node) if node is not None else None


def _name(node: exp.Expression) -> str:
    sql = node.sql()
    return sql if len(sql) <= 60 else sql[:57] + "..."


def _why_refused(node: exp.Expression) -> str | None:
    for cls, reason in _REFUSED.items():
        if type(node) is cls:
            return reason
    if isinstance(node, exp.Anonymous):
        return (f"{node.name.upper()}() is not a function nightshift knows to give the same value in Spark, DuckDB "
                f"and PostgreSQL (docs: README, 'Functions in views')")
    if isinstance(node, exp.Extract):
        unit = node.name.upper()
        if unit not in _EXTRACT_OK:
            return (f"EXTRACT({unit}) differs between engines (weekday numbering, fractional seconds, or unknown to "
                    f"Spark); use YEAR, QUARTER, MONTH, DAY, DOY, WEEK, HOUR or MINUTE" +
                    (f", or {_WEEKDAY}" if unit in ("DOW", "DAYOFWEEK", "ISODOW") else ""))
    if isinstance(node, exp.DateTrunc):
        unit = (node.unit.name if isinstance(node.unit, exp.Expression) else str(node.unit or "")).upper().strip("'")
        if unit not in _TRUNC_OK:
            return (f"DATE_TRUNC('{unit.lower()}', x) is NULL for every row in Spark; write TIMESTAMP_TRUNC(x, {unit}) "
                    f"(CAST(... AS DATE) for a date)")
    if isinstance(node, exp.DateDiff) and node.args.get("unit") is not None:
        return "DATEDIFF with a unit is read differently by each engine; write DATEDIFF(end, start) (days)"
    if isinstance(node, exp.Trunc) and node.args.get("decimals") is not None:
        return "Spark drops TRUNC's scale; write ROUND of a DECIMAL, or FLOOR"
    if isinstance(node, exp.Cast):
        return _cast(node)
    if isinstance(node, exp.Mode) and not isinstance(node.parent, exp.WithinGroup):
        return ("MODE(x) breaks ties between equally frequent values differently in each engine (Spark picks any); "
                "write MODE() WITHIN GROUP (ORDER BY x), which picks the smallest")
    return None


def _cast(node: exp.Cast) -> str | None:
    to = node.to
    if to.this in (exp.DataType.Type.VARCHAR, exp.DataType.Type.CHAR, exp.DataType.Type.NCHAR) and to.expressions:
        return "CAST to VARCHAR(n) truncates in PostgreSQL only; cast to VARCHAR and use LEFT(x, n)"
    return None
