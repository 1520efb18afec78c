"""Views in the warehouse's own SQL: one rule per function family (DESIGN.md, "The stable contract").

A view is written in the warehouse's dialect (DuckDB or PostgreSQL, from `[warehouse] url`) and the
warehouse's semantics are the truth. Reading a view turns its tree into nightshift's neutral SQL, whose
functions mean what the warehouse computes (`canonical`); every engine's text is then produced from the
neutral tree by the rules of `for_engine` (lattice/sql.py: to_dialect), so Spark computes the
warehouse's weekday, truncation, division and formatting, and DuckDB (the oracle) a PostgreSQL
warehouse's. What no rule covers is refused (lattice/passes/functions.py).

    neutral spelling              means (DuckDB and PostgreSQL agree unless said)     Spark runs
    DAY_OF_WEEK(x)                weekday, 0 = Sunday .. 6                              DAYOFWEEK(x) - 1
    DAYOFWEEK_ISO(x)              ISO weekday, 1 = Monday .. 7                          (DAYOFWEEK(x) + 5) % 7 + 1
    EXTRACT(QUARTER|DOY|WEEK|HOUR|MINUTE|... FROM x)   (WEEK: the ISO week)             EXTRACT(...)
    TIMESTAMP_TRUNC(x, unit)      the TIMESTAMP starting x's unit (weeks from Monday)   DATE_TRUNC('unit', x)
    INT_DIV(a, b)                 integer division toward zero (DuckDB a // b,          a DIV b
                                  PostgreSQL a / b of integers)
    TIME_TO_STR(x, '%Y-%m')       strftime / to_char with the formats of _FORMATS       DATE_FORMAT(x, 'yyyy-MM')
    a / b                         DOUBLE division (DuckDB's; PostgreSQL's integer       a / b
                                  division is INT_DIV)
    DATEDIFF(a, b, DAY)           days from DATE b to DATE a (a - b, date_diff('day'))  DATEDIFF(DAY, b, a)
    UPPER(x)                      DuckDB's (ß -> ẞ); PostgreSQL's is                   UPPER(REPLACE(x, 'ß', 'ẞ'))
                                  REPLACE(UPPER(x), 'ẞ', 'ß')
    PERCENTILE_CONT(p) WITHIN     DuckDB's quantile_cont(x, p) and median(x) too; of a DECIMAL, DuckDB's
    GROUP (ORDER BY x)            DECIMAL (duckdb_decimal_interpolation), of PostgreSQL's, over CAST(x AS DOUBLE)
    REGEXP_LIKE(s, 'p')           p as RE2 with the warehouse's meaning (Regex:      s RLIKE 'p as Java'
                                  PostgreSQL's '.' is (?s:.), \\w is [0-9A-Z_a-z])
    REGEX_REPLACE_FIRST|ALL(s, p, r)   DuckDB's regexp_replace (r: \\0-\\9)      REGEXP_REPLACE, the first match
                                  and PostgreSQL's (patterns where the first        behind a lazy group of its own
                                  match is the longest)
    REGEX_EXTRACT(s, p, n)        DuckDB's regexp_extract ('' when none)            REGEXP_EXTRACT(s, 'p as Java', n)
    EXTRACT(EPOCH|SECOND FROM x)  PostgreSQL's NUMERIC with the microseconds       UNIX_MICROS * 0.000001, EXTRACT
    SECOND(x)                     DuckDB's whole seconds                            SECOND(x)
    INITCAP(s)                    PostgreSQL's (after any non-alphanumeric)         per character over an array
    TIME_TO_STR(x, '%B %A')       English names, unpadded; PostgreSQL's Month is     DATE_FORMAT(x, 'MMMM EEEE')
                                  RPAD(TIME_TO_STR(x, '%B'), 9, ' ')
    date_diff('month', a, b)      (DuckDB) written with EXTRACT and day differences

Each rule was measured on this stack (DuckDB 2.0, PostgreSQL 15, Spark 4.2); tests/test_functions.py
evaluates every translated expression in every engine against the warehouse's own value.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.time import format_time

from lattice import types

INT_DIV = "INT_DIV"

# strftime directives whose text agrees in every engine (numbers, and the English names of months and days:
# Spark's and PostgreSQL's are written for them); a format made of these and punctuation is translated
_FORMATS = {"%Y", "%m", "%d", "%H", "%M", "%S", "%y", "%A", "%a", "%B", "%b"}
_FORMAT_TEXT = re.compile(r"^(?:%[A-Za-z]|[-/ :.,T_])*$")
EXTRACT_UNITS = {"YEAR", "QUARTER", "MONTH", "DAY", "DOY", "WEEK", "HOUR", "MINUTE", "SECOND", "EPOCH"}
_EXTRACT_UNITS = {"YEAR": "YEAR", "QUARTER": "QUARTER", "MONTH": "MONTH", "DAY": "DAY", "DOY": "DOY",
                  "DAYOFYEAR": "DOY", "WEEK": "WEEK", "HOUR": "HOUR", "MINUTE": "MINUTE"}
_WEEKDAY_UNITS = {"DOW": exp.DayOfWeek, "DAYOFWEEK": exp.DayOfWeek, "WEEKDAY": exp.DayOfWeek,
                  "ISODOW": exp.DayOfWeekIso}
_TRUNC_UNITS = {"YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND"}
# sqlglot's node for a one-argument date part -> the EXTRACT unit that means the same in every engine
_PART_FUNCTIONS: dict[type, str] = {exp.Quarter: "QUARTER", exp.DayOfYear: "DOY", exp.Week: "WEEK",
                                    exp.WeekOfYear: "WEEK", exp.Hour: "HOUR", exp.Minute: "MINUTE",
                                    exp.DayOfMonth: "DAY"}


# ------------------------------------------------------------------ reading: warehouse SQL -> neutral


def canonical(tree: exp.Expression, warehouse: str | None,
              column_type: Callable[[exp.Column], str | None] = lambda c: None) -> exp.Expression:
    """`tree` (parsed in the warehouse's dialect) with each construct in its neutral spelling (the table
    above); `column_type` gives a column's declared type, for the rules that depend on it (PostgreSQL's
    integer division, its PERCENTILE_CONT over a number). None: the tree is neutral SQL already."""
    if warehouse is None:
        return tree
    rules = [_weekday, _date_part, _truncate, _date_add, _integer_division, _quantile, _date_difference(column_type),
             _seconds(warehouse)]
    if warehouse == "postgres":
        rules += [_pg_varchar, _pg_division(column_type), _pg_median, _pg_percentile(column_type), _pg_upper,
                  _regex("are"), _pg_to_char, _pg_initcap_args]
    else:
        rules += [_duckdb_quantile_width(column_type), _regex("re2"), _date_diff_parts(column_type), _duckdb_initcap,
                  _duckdb_names]

    def rewrite(node: exp.Expression) -> exp.Expression:
        for rule in rules:
            node = rule(node)
        return node

    return bottom_up(tree.copy(), rewrite)


def bottom_up(node: exp.Expression, rewrite: Callable[[exp.Expression], exp.Expression]) -> exp.Expression:
    """`node` with `rewrite` applied to every node, children first, so that a rule sees its arguments
    already rewritten (sqlglot's transform does not visit the children of a node it replaced)."""
    for key, value in list(node.args.items()):
        if isinstance(value, exp.Expression):
            node.set(key, bottom_up(value, rewrite))
        elif isinstance(value, list):
            node.set(key, [bottom_up(v, rewrite) if isinstance(v, exp.Expression) else v for v in value])
    return rewrite(node)


def _unit(node: exp.Expression) -> str:
    unit = node.args.get("unit") if not isinstance(node, exp.Extract) else node.this
    return (unit.name if isinstance(unit, exp.Expression) else str(unit or "")).upper().strip("'")


def _weekday(node: exp.Expression) -> exp.Expression:
    """EXTRACT(DOW|ISODOW FROM x), DATE_PART('dow', x), dayofweek(x), isodow(x): one spelling each."""
    if isinstance(node, exp.Anonymous) and node.name.lower() in ("date_part", "datepart") \
            and len(node.expressions) == 2 and isinstance(node.expressions[0], exp.Literal):
        node = exp.Extract(this=exp.var(node.expressions[0].name.upper()), expression=node.expressions[1].copy())
    if isinstance(node, exp.Extract) and _unit(node) in _WEEKDAY_UNITS:
        return _WEEKDAY_UNITS[_unit(node)](this=node.expression.copy())
    if isinstance(node, exp.Anonymous) and node.name.lower() == "isodow" and len(node.expressions) == 1:
        return exp.DayOfWeekIso(this=node.expressions[0].copy())
    return node


def _date_part(node: exp.Expression) -> exp.Expression:
    """quarter(x), dayofyear(x), week(x), weekofyear(x), hour(t), minute(t), dayofmonth(x): EXTRACT."""
    unit = _PART_FUNCTIONS.get(type(node))
    if unit is not None and not node.args.get("expression") and not node.args.get("mode"):
        return exp.Extract(this=exp.var(unit), expression=node.this.copy())
    if isinstance(node, exp.Extract) and _unit(node) in _EXTRACT_UNITS and _unit(node) != _EXTRACT_UNITS[_unit(node)]:
        return exp.Extract(this=exp.var(_EXTRACT_UNITS[_unit(node)]), expression=node.expression.copy())
    return node


def _truncate(node: exp.Expression) -> exp.Expression:
    """date_trunc('unit', x): a TIMESTAMP in DuckDB 2.0 and PostgreSQL, for a DATE too."""
    if isinstance(node, exp.DateTrunc) and _unit(node) in _TRUNC_UNITS:
        return exp.TimestampTrunc(this=node.this.copy(), unit=exp.var(_unit(node)))
    return node


def _date_add(node: exp.Expression) -> exp.Expression:
    """date_add(x, INTERVAL ...) is x + INTERVAL ..."""
    if isinstance(node, exp.DateAdd) and isinstance(node.expression, exp.Interval):
        return exp.Add(this=node.this.copy(), expression=node.expression.copy())
    return node


def _date_difference(column_type: Callable[[exp.Column], str | None]):
    """a - b of two DATEs: the days between them, an integer (Spark's would be an INTERVAL)."""
    def rule(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Sub) and family(node.this, column_type) == "date" \
                and family(node.expression, column_type) == "date":
            return exp.DateDiff(this=node.this.copy(), expression=node.expression.copy(), unit=exp.var("DAY"))
        return node
    return rule


def _integer_division(node: exp.Expression) -> exp.Expression:
    """DuckDB's a // b."""
    if isinstance(node, exp.IntDiv):
        return int_div(node.this, node.expression)
    return node


def int_div(a: exp.Expression, b: exp.Expression) -> exp.Expression:
    """INT_DIV(a, b) as a BIGINT (its type, wherever a group key's type is inferred)."""
    return exp.cast(exp.Anonymous(this=INT_DIV, expressions=[a.copy(), b.copy()]), "BIGINT")


def _quantile(node: exp.Expression) -> exp.Expression:
    """DuckDB's quantile_cont(x, p), quantile_disc(x, p) and quantile(x, p) are the SQL standard's
    PERCENTILE_CONT/DISC(p) WITHIN GROUP (ORDER BY x)."""
    if isinstance(node, (exp.PercentileCont, exp.PercentileDisc)) and node.args.get("expression") is not None \
            and not isinstance(node.parent, exp.WithinGroup):
        kind, p = type(node), node.expression
    elif isinstance(node, exp.Quantile) and node.args.get("quantile") is not None:
        kind, p = exp.PercentileDisc, node.args["quantile"]
    else:
        return node
    if not isinstance(p, exp.Literal):
        return node
    order = exp.Order(expressions=[exp.Ordered(this=node.this.copy(), nulls_first=False)])
    return exp.WithinGroup(this=kind(this=p.copy()), expression=order)


def _pg_varchar(node: exp.Expression) -> exp.Expression:
    """CAST(x AS VARCHAR(n)) truncates to n characters in PostgreSQL: LEFT(CAST(x AS VARCHAR), n)."""
    if isinstance(node, exp.Cast) and node.to.this == exp.DataType.Type.VARCHAR and node.to.expressions:
        n = node.to.expressions[0]
        length = n.this.copy() if isinstance(n, exp.DataTypeParam) else n.copy()
        return exp.Left(this=exp.cast(node.this.copy(), "VARCHAR"), expression=length)
    return node


def _pg_median(node: exp.Expression) -> exp.Expression:
    """PostgreSQL has no median(x); nightshift reads it as PostgreSQL's percentile_cont(0.5) WITHIN GROUP."""
    if isinstance(node, exp.Median) and node.this is not None and not isinstance(node.this, exp.Distinct):
        order = exp.Order(expressions=[exp.Ordered(this=node.this.copy(), nulls_first=False)])
        return exp.WithinGroup(this=exp.PercentileCont(this=exp.Literal.number("0.5")), expression=order)
    return node


def _pg_upper(node: exp.Expression) -> exp.Expression:
    """PostgreSQL's upper() leaves ß alone (glibc's one-letter case table); DuckDB writes ẞ (and Spark,
    SS, which for_engine makes ẞ)."""
    if isinstance(node, exp.Upper):
        return exp.func("REPLACE", node.copy(), exp.Literal.string("ẞ"), exp.Literal.string("ß"))
    return node


def _pg_division(column_type: Callable[[exp.Column], str | None]):
    """PostgreSQL's a / b of two integers truncates toward zero."""
    def rule(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Div) and family(node.this, column_type) == family(node.expression, column_type) \
                == "integer":
            return int_div(node.this, node.expression)
        return node
    return rule


def integer_division_of_views(tree: exp.Expression, warehouse: str | None,
                              column_type: Callable[[exp.Column], str | None]) -> exp.Expression:
    """A view's neutral tree with PostgreSQL's a / b of two integers made INT_DIV where the integers are
    columns of the summary views it reads, whose types are known once those views are compiled
    (lattice/compile.py); canonical() already did so for the base tables' columns."""
    if warehouse != "postgres":
        return tree
    return bottom_up(tree.copy(), _pg_division(column_type))


def _pg_percentile(column_type: Callable[[exp.Column], str | None]):
    """PostgreSQL's PERCENTILE_CONT reads its argument as DOUBLE PRECISION (a NUMERIC too) and gives one."""
    def rule(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.WithinGroup) and isinstance(node.this, exp.PercentileCont) \
                and isinstance(node.expression, exp.Order) and len(node.expression.expressions) == 1:
            ordered = node.expression.expressions[0]
            if family(ordered.this, column_type) in ("integer", "decimal"):
                node = node.copy()
                target = node.expression.expressions[0]
                target.set("this", exp.cast(target.this, "DOUBLE"))
        return node
    return rule


def _duckdb_quantile_width(column_type: Callable[[exp.Column], str | None]):
    """DuckDB interpolates a DECIMAL quantile by its width (duckdb_decimal_interpolation): an expression's
    DECIMAL(p,s) is written out as a CAST, which keeps it wherever the argument is stored."""
    def rule(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.WithinGroup) and isinstance(node.this, exp.PercentileCont) \
                and isinstance(node.expression, exp.Order) and len(node.expression.expressions) == 1:
            target = node.expression.expressions[0]
        elif isinstance(node, exp.Median) and node.this is not None:
            target = node
        else:
            return node
        arg = target.this
        if isinstance(arg, (exp.Column, exp.Cast)) or family(arg, column_type) != "decimal":
            return node  # a column or a CAST has its declared type; DuckDB's quantile of an integer is a DOUBLE
        decimal = duckdb_decimal_type(arg, column_type)
        if decimal is None:
            return node
        node = node.copy()
        target = node if isinstance(node, exp.Median) else node.expression.expressions[0]
        target.set("this", exp.cast(target.this, decimal))
        return node
    return rule


def family(e: exp.Expression, column_type: Callable[[exp.Column], str | None]) -> str | None:
    """integer, decimal, float (lattice.types.family) of a numeric expression of columns, literals and
    + - * %; None when unknown."""
    if isinstance(e, exp.Paren):
        return family(e.this, column_type)
    if isinstance(e, exp.Column):
        t = column_type(e)
        return types.family(t) if t else None
    if isinstance(e, exp.Literal) and not e.is_string:
        return "decimal" if "." in e.this else ("float" if "e" in e.this.lower() else "integer")
    if isinstance(e, exp.Cast):
        t = types.from_datatype(e.to)
        return types.family(t) if t else None
    if isinstance(e, (exp.Neg, exp.Nullif, exp.Abs)):
        return family(e.this, column_type)
    if isinstance(e, (exp.Coalesce, exp.Greatest, exp.Least)):
        parts = {family(x, column_type) for x in (e.this, *e.expressions)}
        return parts.pop() if len(parts) == 1 else None
    if isinstance(e, exp.Anonymous) and e.name.upper() == INT_DIV or isinstance(e, exp.DateDiff):
        return "integer"
    if isinstance(e, (exp.Add, exp.Sub, exp.Mul, exp.Mod)):
        parts = {family(e.this, column_type), family(e.expression, column_type)}
        if parts == {"date"} and isinstance(e, exp.Sub):
            return "integer"  # days (_date_difference)
        for fam in (None, "float", "decimal", "integer"):
            if fam in parts:
                return fam
    return None


# ------------------------------------------------------------------ writing: neutral -> each engine


def for_engine(tree: exp.Expression, engine: str) -> exp.Expression:
    """The neutral tree with each construct in the engine's spelling of the warehouse's semantics."""
    rules = _RULES.get(engine)
    if not rules:
        return tree

    def rewrite(node: exp.Expression) -> exp.Expression:
        rule = rules.get(type(node)) or (rules.get(node.name.upper()) if isinstance(node, exp.Anonymous) else None)
        return rule(node) if rule else node

    return bottom_up(tree, rewrite)


def _call(name: str, *args: exp.Expression) -> exp.Anonymous:
    return exp.Anonymous(this=name, expressions=[a.copy() for a in args])


def _spark_weekday(node: exp.DayOfWeek) -> exp.Expression:
    return exp.Paren(this=exp.Sub(this=_call("DAYOFWEEK", node.this), expression=exp.Literal.number(1)))


def _spark_iso_weekday(node: exp.DayOfWeekIso) -> exp.Expression:
    plus_five = exp.Add(this=_call("DAYOFWEEK", node.this), expression=exp.Literal.number(5))
    shifted = exp.Mod(this=exp.Paren(this=plus_five), expression=exp.Literal.number(7))
    return exp.Paren(this=exp.Add(this=shifted, expression=exp.Literal.number(1)))


def _spark_truncate(node: exp.Expression) -> exp.Expression:
    return _call("DATE_TRUNC", exp.Literal.string(_unit(node)), node.this)


def _spark_upper(node: exp.Upper) -> exp.Expression:
    """Java upper-cases ß to SS (two letters); DuckDB, to one: ẞ."""
    return exp.Upper(this=exp.func("REPLACE", node.this.copy(), exp.Literal.string("ß"), exp.Literal.string("ẞ")))


def _spark_int_div(node: exp.Anonymous) -> exp.Expression:
    return exp.Paren(this=exp.IntDiv(this=node.expressions[0].copy(), expression=node.expressions[1].copy()))


def _duckdb_int_div(node: exp.Anonymous) -> exp.Expression:
    return exp.Paren(this=exp.IntDiv(this=node.expressions[0].copy(), expression=node.expressions[1].copy()))


def _pg_int_div(node: exp.Anonymous) -> exp.Expression:
    return exp.cast(_call("DIV", *node.expressions), "BIGINT")


def _pg_weekday(unit: str):
    def rule(node: exp.Expression) -> exp.Expression:
        return exp.Extract(this=exp.var(unit), expression=node.this.copy())
    return rule


_RULES: dict[str, dict] = {
    "spark": {exp.DayOfWeek: _spark_weekday, exp.DayOfWeekIso: _spark_iso_weekday, exp.TimestampTrunc: _spark_truncate,
              exp.DateTrunc: _spark_truncate, INT_DIV: _spark_int_div, exp.Upper: _spark_upper},
    "duckdb": {INT_DIV: _duckdb_int_div},
    "postgres": {exp.DayOfWeek: _pg_weekday("DOW"), exp.DayOfWeekIso: _pg_weekday("ISODOW"), INT_DIV: _pg_int_div},
}


def format_supported(fmt: exp.Expression | None) -> bool:
    """A TIME_TO_STR format every engine writes alike (numbers, names and punctuation)."""
    if not isinstance(fmt, exp.Literal) or not fmt.is_string or not _FORMAT_TEXT.match(fmt.this):
        return False
    return all(d in _FORMATS for d in re.findall(r"%[A-Za-z]", fmt.this))


# ------------------------------------------------------------------ seconds, epochs, part differences, names


def _seconds(warehouse: str):
    """EXTRACT(SECOND|EPOCH ...), second(x), epoch(x): DuckDB's second is a whole BIGINT and its epoch a
    DOUBLE; PostgreSQL's are NUMERICs with the microseconds (scale 6). Neutral EXTRACT(EPOCH|SECOND) is
    the exact NUMERIC; SECOND(x) the whole seconds."""
    def rule(node: exp.Expression) -> exp.Expression:
        unit = _unit(node) if isinstance(node, exp.Extract) else None
        if isinstance(node, exp.TimeToUnix) and warehouse == "duckdb":
            unit, node = "EPOCH", exp.Extract(this=exp.var("EPOCH"), expression=node.this.copy())
        if unit not in ("EPOCH", "SECOND") and not (isinstance(node, exp.Second) and warehouse == "duckdb"):
            return node
        arg = node.expression if isinstance(node, exp.Extract) else node.this
        if unit == "EPOCH":
            epoch = exp.Extract(this=exp.var("EPOCH"), expression=arg.copy())
            return exp.cast(epoch, "DOUBLE" if warehouse == "duckdb" else "DECIMAL(38,6)")
        if warehouse == "duckdb":
            return exp.cast(exp.Second(this=arg.copy()), "BIGINT")
        return exp.cast(exp.Extract(this=exp.var("SECOND"), expression=arg.copy()), "DECIMAL(8,6)")
    return rule


def _duckdb_names(node: exp.Expression) -> exp.Expression:
    """dayname(x), monthname(x): strftime's %A and %B."""
    if isinstance(node, (exp.Dayname, exp.Monthname)) and not node.args.get("abbreviated"):
        return exp.TimeToStr(this=node.this.copy(),
                             format=exp.Literal.string("%A" if isinstance(node, exp.Dayname) else "%B"))
    return node


def _micro_decimal(micros: exp.Expression) -> exp.Expression:
    """A whole number of microseconds as a DECIMAL of seconds with 6 decimals, exactly."""
    return exp.Mul(this=exp.cast(micros, "DECIMAL(20,0)"), expression=exp.Literal.number("0.000001"))


def _spark_extract(node: exp.Extract) -> exp.Expression:
    if _unit(node) == "EPOCH":
        return _micro_decimal(_call("UNIX_MICROS", exp.cast(node.expression, "TIMESTAMP")))
    return node  # EXTRACT(SECOND ...) is a DECIMAL(8,6) with the microseconds in Spark


def _duckdb_extract(node: exp.Extract) -> exp.Expression:
    if _unit(node) == "EPOCH":
        return _micro_decimal(_call("EPOCH_US", exp.cast(node.expression, "TIMESTAMP")))
    if _unit(node) == "SECOND":  # DuckDB's EXTRACT(SECOND) drops the fraction; its MICROSECOND counts the seconds
        return _micro_decimal(exp.Extract(this=exp.var("MICROSECOND"), expression=exp.cast(node.expression, "TIMESTAMP")))
    return node


def _pg_second(node: exp.Second) -> exp.Expression:
    second = exp.Extract(this=exp.var("SECOND"), expression=exp.cast(node.this, "TIMESTAMP"))
    return exp.cast(exp.Floor(this=second), "BIGINT")


_RULES["spark"][exp.Extract] = _spark_extract
_RULES["duckdb"][exp.Extract] = _duckdb_extract
_RULES["postgres"][exp.Second] = _pg_second

_DIFF_UNITS = {"YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND"}


def _date_diff_parts(column_type: Callable[[exp.Column], str | None]):
    """DuckDB's date_diff('part', a, b) counts the part's boundaries from a to b (measured: year, quarter
    and month by the calendar, hour, minute and second by the clock, day by dates, a DATE read as its
    midnight) except 'week', which is the days between the dates divided by 7, toward zero. Written with
    EXTRACT and day differences, which every engine computes alike."""
    def rule(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.DateDiff) or node.args.get("unit") is None:
            return node
        unit = re.sub(r"S$", "", _unit(node))  # 'months' is 'month'
        if unit not in _DIFF_UNITS:
            node.meta[_WHY] = (f"date_diff('{_unit(node).lower()}', ...) is not translated; use year, quarter, month, "
                               f"week, day, hour, minute or second")
            return node
        end, start = node.this, node.expression
        if unit == "DAY" and family(end, column_type) == family(start, column_type) == "date":
            return exp.DateDiff(this=end.copy(), expression=start.copy(), unit=exp.var("DAY"))

        def part(p: str, x: exp.Expression) -> exp.Expression:
            return exp.Extract(this=exp.var(p), expression=exp.cast(x.copy(), "TIMESTAMP"))

        def days() -> exp.Expression:
            return exp.DateDiff(this=exp.cast(end.copy(), "DATE"), expression=exp.cast(start.copy(), "DATE"),
                                unit=exp.var("DAY"))

        def diff(a: exp.Expression, b: exp.Expression) -> exp.Expression:
            return exp.Sub(this=exp.Paren(this=a), expression=exp.Paren(this=b))

        def calendar(x: exp.Expression, per_year: int, p: str) -> exp.Expression:
            return exp.Add(this=exp.Mul(this=part("YEAR", x), expression=exp.Literal.number(per_year)), expression=part(p, x))

        if unit == "YEAR":
            out = diff(part("YEAR", end), part("YEAR", start))
        elif unit in ("QUARTER", "MONTH"):
            per, p = (4, "QUARTER") if unit == "QUARTER" else (12, "MONTH")
            out = diff(calendar(end, per, p), calendar(start, per, p))
        elif unit == "WEEK":
            return int_div(days(), exp.Literal.number(7))
        else:
            out = days()
            clock = [("HOUR", 24), ("MINUTE", 60)] + ([("SECOND", 60)] if unit == "SECOND" else [])
            for p, per in clock[:{"DAY": 0, "HOUR": 1, "MINUTE": 2, "SECOND": 3}[unit]]:
                step = diff(exp.Second(this=exp.cast(end.copy(), "TIMESTAMP")),
                            exp.Second(this=exp.cast(start.copy(), "TIMESTAMP"))) if p == "SECOND" \
                    else diff(part(p, end), part(p, start))
                out = exp.Add(this=exp.Mul(this=exp.Paren(this=out), expression=exp.Literal.number(per)), expression=step)
        return exp.cast(out, "BIGINT")
    return rule


# month and day names: DuckDB's strftime %B %b %A %a; PostgreSQL's to_char Month, Mon, Day, Dy in three
# capitalizations, Month and Day blank-padded to 9 characters unless FM precedes them (measured)
_PG_NAMES = {"MONTH": ("%B", 9), "MON": ("%b", 0), "DAY": ("%A", 9), "DY": ("%a", 0)}
_PG_NUMBERS = {"YYYY": "%Y", "YY": "%y", "MM": "%m", "DD": "%d", "HH24": "%H", "MI": "%M", "SS": "%S"}
_PG_TOKEN = re.compile(r"(FM|fm)?(MONTH|Month|month|MON|Mon|mon|DAY|Day|day|DY|Dy|dy)|(YYYY|YY|MM|DD|HH24|MI|SS)|"
                       r"([-/ :.,_]+)")  # a name's case is its spelling (MoNtH is not a name in PostgreSQL)
_PG_INVERSE = {"%Y": "YYYY", "%y": "YY", "%m": "MM", "%d": "DD", "%H": "HH24", "%M": "MI", "%S": "SS", "%u": "D",
               "%j": "DDD", "%I": "HH12", "%A": "TMDay", "%a": "TMDy", "%B": "TMMonth", "%b": "TMMon",
               "%Aenlower": "day", "%aenlower": "dy", "%Ythree": "YYY", "%-d": "FMDD", "%-m": "FMMM", "%-H": "FMHH24",
               "%-M": "FMMI", "%-S": "FMSS", "%-I": "FMHH12", "%-j": "FMDDD", "%V": "IW", "%G": "IYYY", "%U": "WW",
               "%f": "US", "%z": "OF", "%Z": "TZ"}


def _pg_format_text(fmt: str) -> str:
    """The to_char format as written (sqlglot reads it into strftime directives; numbers keep their
    meaning whatever their case in PostgreSQL)."""
    return format_time(fmt, _PG_INVERSE) or fmt


def _pg_to_char(node: exp.Expression) -> exp.Expression:
    """to_char(x, 'FMDay, DD Month YYYY'): numbers as TIME_TO_STR, names as DuckDB's names, RPAD to 9,
    UPPER or LOWER as PostgreSQL writes them, joined with ||."""
    fmt = node.args.get("format")
    if not isinstance(node, exp.TimeToStr) or not (isinstance(fmt, exp.Literal) and fmt.is_string):
        return node
    text, pos, pieces, numbers = _pg_format_text(fmt.this), 0, [], ""
    while pos < len(text):
        m = _PG_TOKEN.match(text, pos)
        if m is None or (m.group(1) and not m.group(2)):
            node.meta[_WHY] = (f"the format '{text}' has '{text[pos:pos + 4]}...', which is not translated (names: "
                               f"Month, Mon, Day, Dy in any case, with FM; numbers: YYYY, YY, MM, DD, HH24, MI, SS)")
            return node
        pos = m.end()
        if m.group(2) is None:
            numbers += _PG_NUMBERS[m.group(3).upper()] if m.group(3) else m.group(4)
            continue
        if numbers:
            pieces.append(exp.TimeToStr(this=node.this.copy(), format=exp.Literal.string(numbers)))
            numbers = ""
        name = m.group(2)
        directive, width = _PG_NAMES[name.upper()]
        piece: exp.Expression = exp.TimeToStr(this=node.this.copy(), format=exp.Literal.string(directive))
        if width and not m.group(1):
            piece = exp.Pad(this=piece, expression=exp.Literal.number(width), fill_pattern=exp.Literal.string(" "),
                            is_left=False)
        if name.isupper():
            piece = exp.Upper(this=piece)
        elif name.islower():
            piece = exp.Lower(this=piece)
        pieces.append(piece)
    if numbers or not pieces:
        pieces.append(exp.TimeToStr(this=node.this.copy(), format=exp.Literal.string(numbers)))
    if len(pieces) > 1:  # punctuation between names as text (the names make a NULL date's text NULL)
        pieces = [exp.Literal.string(p.args["format"].this) if isinstance(p, exp.TimeToStr)
                  and "%" not in p.args["format"].this else p for p in pieces]
    out = pieces[0]
    for piece in pieces[1:]:
        out = exp.DPipe(this=out, expression=piece)
    return out


_PG_WRITE = {"%Y": "YYYY", "%y": "YY", "%m": "MM", "%d": "DD", "%H": "HH24", "%M": "MI", "%S": "SS",
             "%A": "FMDay", "%a": "Dy", "%B": "FMMonth", "%b": "Mon"}


def _pg_time_to_str(node: exp.TimeToStr) -> exp.Expression:
    """Neutral TIME_TO_STR as to_char, names unpadded (DuckDB's), literal letters quoted."""
    fmt = node.args.get("format")
    if not (isinstance(fmt, exp.Literal) and fmt.is_string):
        return node
    pg = re.sub(r"%[A-Za-z]|[A-Za-z]", lambda m: _PG_WRITE.get(m.group(), f'"{m.group()}"'), fmt.this)
    return _call("TO_CHAR", node.this, exp.Literal.string(pg))


_RULES["postgres"][exp.TimeToStr] = _pg_time_to_str


# ------------------------------------------------------------------ INITCAP

# PostgreSQL's initcap: each letter after a character that is not a letter or digit upper-cased, every
# other lower-cased, one character at a time (ß and letters whose capital is two letters stay as they are)
_INITCAP = {
    "spark": "ARRAY_JOIN(TRANSFORM(REGEXP_EXTRACT_ALL({s}, '(?s).', 0), (c, i) -> CASE WHEN i = 0 OR NOT "
             "REGEXP_EXTRACT_ALL({s}, '(?s).', 0)[i - 1] RLIKE '^[\\\\p{{L}}\\\\p{{N}}]$' THEN CASE WHEN c <> 'ß' AND "
             "LENGTH(UPPER(c)) = 1 THEN UPPER(c) ELSE c END WHEN LENGTH(LOWER(c)) = 1 THEN LOWER(c) ELSE c END), '')",
    "duckdb": "ARRAY_TO_STRING(LIST_TRANSFORM(REGEXP_EXTRACT_ALL({s}, '(?s).'), LAMBDA c, i : CASE WHEN i = 1 OR NOT "
              "REGEXP_MATCHES(REGEXP_EXTRACT_ALL({s}, '(?s).')[i - 1], '^[\\pL\\pN]$') THEN CASE WHEN c <> 'ß' AND "
              "LENGTH(UPPER(c)) = 1 THEN UPPER(c) ELSE c END WHEN LENGTH(LOWER(c)) = 1 THEN LOWER(c) ELSE c END), '')",
}


def _initcap(engine: str):
    def rule(node: exp.Initcap) -> exp.Expression:
        s = Dialect.get_or_raise(engine).generate(node.this.copy())  # already in the engine's spelling
        return sqlglot.parse_one(_INITCAP[engine].format(s=s), read=engine)
    return rule


def _duckdb_initcap(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.Initcap):
        node.meta[_WHY] = "DuckDB has no initcap; write UPPER(LEFT(s, 1)) || LOWER(SUBSTRING(s, 2)) for one word"
    return node


def _pg_initcap_args(node: exp.Expression) -> exp.Expression:
    """sqlglot gives INITCAP a second argument (its delimiters); PostgreSQL's has one."""
    if isinstance(node, exp.Initcap):
        return exp.Initcap(this=node.this.copy())
    return node


_RULES["spark"][exp.Initcap] = _initcap("spark")
_RULES["duckdb"][exp.Initcap] = _initcap("duckdb")


# ------------------------------------------------------------------ DuckDB's DECIMAL result types

_INT64_DIGITS = 18  # DuckDB keeps a DECIMAL of up to 18 digits in an int64, wider ones in an int128


def duckdb_decimal_type(e: exp.Expression, column_type: Callable[[exp.Column], str | None]) -> str | None:
    """DECIMAL(p,s) as DuckDB types a decimal expression of columns, casts, literals, + - * (its binder's
    rules: p1+p2 for * (a product wider than 18 digits of inputs of at most 18 kept at 18, with an overflow
    check), max(p1-s1, p2-s2) + max(s1,s2) + 1 for + and -, an integer as DECIMAL(10,0) or (19,0));
    None for anything else. The width matters: DuckDB interpolates PERCENTILE_CONT differently in an
    int64 and an int128 (lattice/emit.py)."""
    ps = _decimal(e, column_type)
    return f"DECIMAL({ps[0]},{ps[1]})" if ps else None


def _decimal(e: exp.Expression, column_type) -> tuple[int, int] | None:
    if isinstance(e, (exp.Paren, exp.Neg)):
        return _decimal(e.this, column_type)
    if isinstance(e, (exp.Column, exp.Cast)):
        t = column_type(e) if isinstance(e, exp.Column) else types.from_datatype(e.to)
        return _as_decimal(t) if t else None
    if isinstance(e, exp.Literal) and not e.is_string and "e" not in e.this.lower():
        digits = e.this.lstrip("-").replace(".", "").lstrip("0") or "0"
        scale = len(e.this.split(".")[1]) if "." in e.this else 0
        return (max(len(digits), scale), scale) if scale else (10, 0)
    if isinstance(e, (exp.Add, exp.Sub, exp.Mul)):
        a, b = _decimal(e.this, column_type), _decimal(e.expression, column_type)
        if a is None or b is None:
            return None
        if isinstance(e, exp.Mul):
            p, s = a[0] + b[0], a[1] + b[1]
        else:
            s = max(a[1], b[1])
            p = max(a[0] - a[1], b[0] - b[1]) + s + 1
        if isinstance(e, exp.Mul) and p > _INT64_DIGITS and max(a[0], b[0]) <= _INT64_DIGITS and s < _INT64_DIGITS:
            p = _INT64_DIGITS
        return (min(p, 38), s) if s <= 38 else None
    return None


def _as_decimal(t: str) -> tuple[int, int] | None:
    t = types.normalize(t) or t
    if t == "INTEGER":
        return 10, 0
    if t == "BIGINT":
        return 19, 0
    m = re.match(r"DECIMAL\((\d+),(\d+)\)", t)
    return (int(m.group(1)), int(m.group(2))) if m else None


# ------------------------------------------------------------------ DuckDB's PERCENTILE_CONT of a DECIMAL

_TWO_62 = 4611686018427387904  # positions scaled by 2**62: d * 2**62 is a whole number for any quantile >= 1/512


def duckdb_decimal_interpolation(lo: str, hi: str, pos: str, decimal_type: str) -> str:
    """Neutral SQL for DuckDB 2.0's PERCENTILE_CONT (and MEDIAN) of a DECIMAL(p,s) between the values
    `lo` and `hi` at the DOUBLE position `pos` (= p * (n - 1)); the result is a DECIMAL(p,s) too.

    DuckDB interpolates the unscaled integers u (the value times 10^s) with d = pos - FLOOR(pos):
    up to 18 digits (an int64) it truncates toward zero the DOUBLE lo_u + (hi_u - lo_u) * d, computed
    with one rounding (a fused multiply-add), so median(1.00, 1.01) = 1.00 and median(-1.00, -1.05) =
    -1.02; wider (an int128) it adds the truncated DOUBLE (hi_u - lo_u) * d to lo_u, which floors:
    median(-1.00, -1.05) = -1.03. Engines without a fused multiply-add (Spark) get the same digits
    from exact arithmetic: the value scaled by 2^62 as a DECIMAL(38,0), truncated, except where it lies
    within half a DOUBLE spacing of a whole number, to which DuckDB's rounding takes it first."""
    precision, scale = _as_decimal(decimal_type) or (38, 0)
    unit = 10 ** scale
    lo_u, hi_u = f"CAST({lo} * {unit} AS DECIMAL(38,0))", f"CAST({hi} * {unit} AS DECIMAL(38,0))"
    d = f"({pos} - FLOOR({pos}))"
    if precision > _INT64_DIGITS:
        whole = f"{lo_u} + CAST(FLOOR(CAST({hi_u} - {lo_u} AS DOUBLE) * {d}) AS DECIMAL(38,0))"
    else:
        approx = f"(CAST({lo_u} AS DOUBLE) + (CAST({hi_u} AS DOUBLE) - CAST({lo_u} AS DOUBLE)) * {d})"
        k = f"CAST(ROUND({approx}) AS BIGINT)"
        m = f"CAST({d} * CAST({_TWO_62} AS DOUBLE) AS BIGINT)"
        exact = f"({lo_u} * {_TWO_62} + CAST({hi_u} - {lo_u} AS DECIMAL(38,0)) * {m})"
        bits = f"BIN(ABS({k}))"
        half = (f"CAST(POWER(2, LENGTH({bits}) + 8 - CASE WHEN LENGTH(REPLACE({bits}, '0', '')) = 1 THEN 1 ELSE 0 END)"
                f" AS DECIMAL(38,0))")
        whole = (f"CASE WHEN {k} <> 0 AND ABS({exact} - CAST({k} AS DECIMAL(38,0)) * {_TWO_62}) <= {half} THEN "
                 f"CAST({k} AS DECIMAL(38,0)) ELSE CAST({INT_DIV}({exact}, {_TWO_62}) AS DECIMAL(38,0)) END")
    step = f"0.{'0' * (scale - 1)}1" if scale else "1"
    return f"CAST(({whole}) * {step} AS {decimal_type})"


# ------------------------------------------------------------------ regular expressions

# A pattern is read in the warehouse's flavour (RE2 in DuckDB, POSIX AREs in PostgreSQL) into a small tree
# of what each piece matches, and written for each engine (RE2, Java for Spark, AREs): the neutral SQL holds
# it as RE2 with DuckDB's meaning. What reads differently and has no spelling meaning the same everywhere
# is refused, naming the construct. Measured on this stack: DuckDB's '.' stops at a newline, PostgreSQL's
# does not; RE2's \w, \s, [[:alpha:]] are ASCII, PostgreSQL's follow the database's locale (\d is 0-9 in
# both); '$' ends the text in RE2 and PostgreSQL but may stand before a final newline in Java.
REPLACE_FIRST, REPLACE_ALL, REGEX_EXTRACT = "REGEX_REPLACE_FIRST", "REGEX_REPLACE_ALL", "REGEX_EXTRACT"
NEUTRAL_FUNCTIONS = frozenset({INT_DIV, REPLACE_FIRST, REPLACE_ALL, REGEX_EXTRACT})  # nightshift's own, no user's


class Untranslatable(ValueError):
    """A construct whose meaning differs between the engines; the message names it as written."""


_ANY = ("any",)  # every character, a newline too (PostgreSQL's '.')
_NOT_NEWLINE = ("set", True, (("\n", "\n"),))  # DuckDB's '.'
_RE2_CLASSES = {"d": (("0", "9"),), "w": (("0", "9"), ("A", "Z"), ("_", "_"), ("a", "z")),
                "s": (("\t", "\n"), ("\f", "\r"), (" ", " "))}
_PG_CLASSES = {"d": (("0", "9"),)}  # \w and \s follow the database's locale in PostgreSQL
_RE2_POSIX = {"alpha": (("A", "Z"), ("a", "z")), "digit": (("0", "9"),), "alnum": (("0", "9"), ("A", "Z"), ("a", "z")),
              "upper": (("A", "Z"),), "lower": (("a", "z"),), "xdigit": (("0", "9"), ("A", "F"), ("a", "f")),
              "space": (("\t", "\r"), (" ", " "))}
_CONTROL = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v"}
_CONTROL_TEXT = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\f": "\\f"}


@dataclass(frozen=True)
class Regex:
    """A pattern as what it matches: a tree of ("alt", seqs), ("group", capturing, alt), ("rep", atom, lo,
    hi, lazy), ("lit", c), ("set", negated, ranges), ("any",), ("bol",), ("eol",); `icase`: letters match
    either case."""

    tree: tuple
    icase: bool = False

    @property
    def groups(self) -> int:
        return sum(1 for n in _walk(self.tree) if n[0] == "group" and n[1])

    def write(self, engine: str) -> str:
        """The pattern in `engine`'s flavour: "re2" (DuckDB, and the neutral SQL), "java" (Spark), "are"
        (PostgreSQL)."""
        flags = {"re2": "(?i)", "java": "(?iu)", "are": "(?i)"}[engine] if self.icase else ""
        return flags + _write(self.tree, engine)

    def longest_match_agrees(self) -> str | None:
        """Why PostgreSQL's choice of match (the longest, at the leftmost start) may differ from RE2's and
        Java's (the first alternative, greedy quantifiers first), or None: no '|', no repeated group and no
        lazy quantifier (tests/test_functions.py checks the shapes left against PostgreSQL)."""
        for n in _walk(self.tree):
            if n[0] == "alt" and len(n[1]) > 1:
                return "'|' (PostgreSQL takes the longest alternative, Java and RE2 the first that matches)"
            if n[0] == "rep" and n[4]:
                return "a lazy quantifier (PostgreSQL makes the whole pattern lazy)"
            if n[0] == "rep" and n[1][0] not in ("lit", "set", "any"):
                return "a repeated group (PostgreSQL and Java split its matches differently)"
        return None

    def matches_empty(self) -> bool:
        return _nullable(self.tree)


def _walk(node: tuple):
    yield node
    kind = node[0]
    children = node[1] if kind == "alt" else (node[2],) if kind == "group" else (node[1],) if kind == "rep" else ()
    for child in children:
        if kind == "alt":
            for item in child:
                yield from _walk(item)
        else:
            yield from _walk(child)


def _nullable(node: tuple) -> bool:
    kind = node[0]
    if kind == "alt":
        return any(all(_nullable(i) for i in seq) for seq in node[1])
    if kind == "group":
        return _nullable(node[2])
    if kind == "rep":
        return node[2] == 0 or _nullable(node[1])
    return kind in ("bol", "eol")


def _write(node: tuple, engine: str) -> str:
    kind = node[0]
    if kind == "alt":
        return "|".join("".join(_write(i, engine) for i in seq) for seq in node[1])
    if kind == "group":
        return "(" + ("" if node[1] else "?:") + _write(node[2], engine) + ")"
    if kind == "rep":
        lo, hi = node[2], node[3]
        q = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((lo, hi)) or \
            ("{%d}" % lo if lo == hi else "{%d,}" % lo if hi is None else "{%d,%d}" % (lo, hi))
        return _write(node[1], engine) + q + ("?" if node[4] else "")
    if kind == "lit":
        return _char(node[1], engine, r"\.^$|?*+()[]{}")
    if kind == "set":
        items = "".join(_char(lo, engine, "\\]^-[&") + ("-" + _char(hi, engine, "\\]^-[&") if hi != lo else "")
                        for lo, hi in node[2])
        return "[" + ("^" if node[1] else "") + items + "]"
    if kind == "any":
        return "." if engine == "are" else "(?s:.)"
    if kind == "bol":
        return "^"
    return r"\z" if engine == "java" else "$"


def _char(c: str, engine: str, special: str) -> str:
    if c == "\v":
        return r"\x0B" if engine == "java" else r"\v"
    if c in _CONTROL_TEXT:
        return _CONTROL_TEXT[c]
    return "\\" + c if c in special else c


class _RegexReader:
    """Reads a pattern in one flavour: "re2" (DuckDB, nightshift's neutral SQL) or "are" (PostgreSQL)."""

    def __init__(self, text: str, flavor: str):
        self.text, self.flavor, self.pos = text, flavor, 0

    def read(self, icase: bool) -> Regex:
        if self.text.startswith("(?i)"):
            self.pos, icase = 4, True
        tree = self._alt()
        if self.pos < len(self.text):
            raise Untranslatable(f"an unmatched '{self.text[self.pos]}'")
        return Regex(tree, icase)

    def _peek(self, k: int = 0) -> str:
        return self.text[self.pos + k] if self.pos + k < len(self.text) else ""

    def _next(self) -> str:
        if self.pos >= len(self.text):
            raise Untranslatable("a pattern that ends too early")
        self.pos += 1
        return self.text[self.pos - 1]

    def _alt(self) -> tuple:
        seqs = [self._seq()]
        while self._peek() == "|":
            self.pos += 1
            seqs.append(self._seq())
        return ("alt", tuple(seqs))

    def _seq(self) -> tuple:
        items = []
        while self._peek() not in ("", "|", ")"):
            items.append(self._quantified(self._atom()))
        return tuple(items)

    def _atom(self) -> tuple:
        c = self._next()
        if c == "(":
            if self.text.startswith("?s:.)", self.pos) and self.flavor == "re2":
                self.pos += 5
                return _ANY
            capturing = not self.text.startswith("?:", self.pos)
            if not capturing:
                self.pos += 2
            elif self._peek() == "?":
                end = self.text.find(")", self.pos)
                raise Untranslatable(f"the group ({self.text[self.pos:end + 1 if end > 0 else None]} (look-arounds, "
                                     f"named groups and inline flags other than a leading (?i) read differently)")
            body = self._alt()
            if self._peek() != ")":
                raise Untranslatable("an unclosed '('")
            self.pos += 1
            return ("group", capturing, body)
        if c == "[":
            return self._bracket()
        if c == ".":
            return _NOT_NEWLINE if self.flavor == "re2" else _ANY
        if c == "^":
            return ("bol",)
        if c == "$":
            return ("eol",)
        if c == "\\":
            return self._escape()
        if c in "*+?{":
            raise Untranslatable(f"a '{c}' with nothing to repeat")
        return ("lit", c)

    def _escape(self) -> tuple:
        e = self._next()
        classes = _RE2_CLASSES if self.flavor == "re2" else _PG_CLASSES
        if e.lower() in classes:
            return ("set", e.isupper(), classes[e.lower()])
        if e.lower() in "ws":
            return self._refuse_class(f"\\{e}")
        if e in _CONTROL:
            return ("lit", _CONTROL[e])
        if not e.isalnum():
            return ("lit", e)
        raise Untranslatable(f"\\{e} (back-references, word boundaries and other escapes read differently)")

    def _refuse_class(self, spelled: str):
        raise Untranslatable(f"{spelled} (which characters it matches follows the database's locale in PostgreSQL; "
                             f"write the characters as a [...] class)")

    def _bracket(self) -> tuple:
        negated = self._peek() == "^"
        self.pos += negated
        ranges, first = [], True
        while True:
            c = self._next()
            if c == "]" and not first:
                return ("set", negated, tuple(ranges))
            first = False
            if c == "[" and self._peek() in ":.=":
                end = self.text.find(self._peek() + "]", self.pos + 1)
                name = self.text[self.pos + 1:end] if end > 0 else ""
                if self._peek() != ":" or self.flavor != "re2" or name not in _RE2_POSIX:
                    return self._refuse_class(f"[{self._peek()}{name}{self._peek()}]")
                ranges += _RE2_POSIX[name]
                self.pos = end + 2
                continue
            lo = self._class_char(c)
            if isinstance(lo, tuple):
                ranges += lo
                continue
            if self._peek() == "-" and self._peek(1) not in ("]", ""):
                self.pos += 1
                hi = self._class_char(self._next())
                if isinstance(hi, tuple) or hi < lo:
                    raise Untranslatable(f"the range {lo}-{hi if isinstance(hi, str) else '...'}")
                ranges.append((lo, hi))
            else:
                ranges.append((lo, lo))

    def _class_char(self, c: str):
        if c != "\\":
            return c
        e = self._next()
        classes = _RE2_CLASSES if self.flavor == "re2" else _PG_CLASSES
        if e in classes:
            return classes[e]
        if e.lower() in "dws":
            return self._refuse_class(f"\\{e} inside [...]")
        if e in _CONTROL:
            return _CONTROL[e]
        if not e.isalnum():
            return e
        raise Untranslatable(f"\\{e} inside [...]")

    def _quantified(self, atom: tuple) -> tuple:
        while True:
            c = self._peek()
            m = re.match(r"\{(\d+)(,(\d*))?\}", self.text[self.pos:]) if c == "{" else None
            if c in ("*", "+", "?") and c:
                self.pos += 1
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            elif m:
                self.pos += m.end()
                lo = int(m.group(1))
                hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
            elif c == "{":
                raise Untranslatable("a '{' that is not a repetition count")
            else:
                return atom
            lazy = self._peek() == "?"
            self.pos += lazy
            if atom[0] in ("bol", "eol") or self._peek() == "+":
                raise Untranslatable("a repeated anchor or a possessive quantifier")
            atom = ("rep", atom, lo, hi, lazy)


def read_regex(text: str, flavor: str, icase: bool = False) -> Regex:
    """`text` read as a pattern of `flavor` ("re2": DuckDB's and the neutral SQL's; "are": PostgreSQL's);
    raises Untranslatable naming what reads differently."""
    return _RegexReader(text, flavor).read(icase)


@dataclass(frozen=True)
class Replacement:
    """A replacement text as pieces: a str is literal text, an int is a group's match (0: the whole)."""

    pieces: tuple

    def write(self, engine: str) -> str:
        out = []
        for p in self.pieces:
            if isinstance(p, int):
                out.append(f"${p}" if engine == "java" else ("\\&" if engine == "are" and p == 0 else f"\\{p}"))
            elif engine == "java":
                out.append(p.replace("\\", "\\\\").replace("$", "\\$"))
            else:
                out.append(p.replace("\\", "\\\\"))
        return "".join(out)

    def shifted(self, by: int) -> Replacement:
        """Group n as group n + by, the whole match as group `by` (the pattern wrapped in `by` groups)."""
        return Replacement(tuple((p + by if p else by) if isinstance(p, int) else p for p in self.pieces))


def read_replacement(text: str, flavor: str, groups: int) -> Replacement:
    """DuckDB's (RE2: \\0-\\9, \\\\) or PostgreSQL's (\\1-\\9, \\&, \\\\; any other backslash is itself)
    replacement text."""
    pieces, i = [], 0
    while i < len(text):
        c, e = text[i], text[i + 1] if i + 1 < len(text) else ""
        if c != "\\":
            pieces.append(c)
            i += 1
            continue
        if e.isdigit() and (flavor == "re2" or e != "0"):
            if int(e) > groups:
                raise Untranslatable(f"\\{e} in the replacement (the pattern has {_groups(groups)})")
            pieces.append(int(e))
        elif e == "&" and flavor == "are":
            pieces.append(0)
        elif e == "\\":
            pieces.append("\\")
        elif flavor == "are":
            pieces.append(c + e if e else c)
        else:
            raise Untranslatable(f"\\{e} in the replacement")
        i += 2
    merged: list = []
    for p in pieces:
        if isinstance(p, str) and merged and isinstance(merged[-1], str):
            merged[-1] += p
        else:
            merged.append(p)
    return Replacement(tuple(merged))


def _groups(n: int) -> str:
    return f"{n} group" + ("" if n == 1 else "s")


def _options(flags: exp.Expression | None, allowed: str) -> tuple[bool, bool]:
    """(case-insensitive, global) from a literal options text ('g', 'i', 'c'); raises Untranslatable."""
    if flags is None:
        return False, False
    if not (isinstance(flags, exp.Literal) and flags.is_string):
        raise Untranslatable("options that are not a literal text")
    icase = glob = False
    for ch in flags.this:
        if ch not in allowed:
            raise Untranslatable(f"the option '{ch}' (only {', '.join(repr(a) for a in allowed)} are translated)")
        icase = True if ch == "i" else False if ch == "c" else icase
        glob = glob or ch == "g"
    return icase, glob


def _pattern(node: exp.Expression, flavor: str, icase: bool, replacing: bool) -> Regex:
    if not (isinstance(node, exp.Literal) and node.is_string):
        raise Untranslatable("a pattern that is not a literal text")
    regex = read_regex(node.this, flavor, icase)
    if replacing and flavor == "are" and regex.longest_match_agrees() is not None:
        raise Untranslatable(regex.longest_match_agrees())
    return regex


_WHY = "untranslated"  # node.meta key: why canonical() left a construct as written (lattice/passes/functions.py)


def _refused(node: exp.Expression, why: str) -> exp.Expression:
    node.meta[_WHY] = f"the regular expression languages differ: {why}"
    return node


def _neutral_call(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.cast(exp.Anonymous(this=name, expressions=[a.copy() for a in args]), "VARCHAR")


def _regex(flavor: str):
    """regexp_matches / ~ / ~*, regexp_replace, regexp_extract (DuckDB) and substring(s FROM pattern)
    (PostgreSQL: the first group's match, or the whole match, NULL when nothing matches) in neutral SQL:
    the pattern and replacement rewritten as RE2 with the warehouse's meaning."""
    def rule(node: exp.Expression) -> exp.Expression:
        try:
            if isinstance(node, (exp.RegexpLike, exp.RegexpILike)):
                icase, _ = _options(node.args.get("flag"), "ic")
                regex = _pattern(node.expression, flavor, icase or isinstance(node, exp.RegexpILike), False)
                return exp.RegexpLike(this=node.this.copy(), expression=exp.Literal.string(regex.write("re2")))
            if isinstance(node, exp.RegexpReplace):
                extra = [k for k in ("position", "occurrence") if node.args.get(k) is not None]
                if extra:
                    raise Untranslatable(f"a {extra[0]} argument")
                icase, glob = _options(node.args.get("modifiers"), "gic")
                regex = _pattern(node.expression, flavor, icase, True)
                if regex.matches_empty():
                    raise Untranslatable("a pattern that matches an empty text (engines place empty matches differently)")
                if not (isinstance(node.args.get("replacement"), exp.Literal) and node.args["replacement"].is_string):
                    raise Untranslatable("a replacement that is not a literal text")
                if regex.groups > 7:  # Java reads $12 as group 12 once there are 12 groups
                    raise Untranslatable("more than 7 groups in a replaced pattern")
                replacement = read_replacement(node.args["replacement"].this, flavor, regex.groups)
                return _neutral_call(REPLACE_ALL if glob else REPLACE_FIRST, node.this,
                                     exp.Literal.string(regex.write("re2")), exp.Literal.string(replacement.write("re2")))
            if isinstance(node, exp.RegexpExtract) and flavor == "re2":
                group = node.args.get("group") or node.args.get("position") or exp.Literal.number(0)
                if not (isinstance(group, exp.Literal) and not group.is_string) or node.args.get("occurrence"):
                    raise Untranslatable("a group that is not a number")
                regex = _pattern(node.expression, flavor, False, False)
                if int(group.this) > regex.groups:
                    raise Untranslatable(f"group {group.this} of a pattern with {_groups(regex.groups)}")
                return _neutral_call(REGEX_EXTRACT, node.this, exp.Literal.string(regex.write("re2")), group)
            if isinstance(node, exp.RegexpFullMatch) and flavor == "re2":
                regex = _pattern(node.expression, flavor, False, False)
                whole = Regex(("alt", ((("bol",), ("group", False, regex.tree), ("eol",)),)), regex.icase)
                return exp.RegexpLike(this=node.this.copy(), expression=exp.Literal.string(whole.write("re2")))
            if isinstance(node, exp.Bracket) and flavor == "are" and _regexp_match(node) is not None:
                call, index = _regexp_match(node)
                icase, _ = _options(call.expressions[2] if len(call.expressions) == 3 else None, "ic")
                regex = _pattern(call.expressions[1], flavor, icase, True)
                k = int(index.this) + 1  # sqlglot counts PostgreSQL's array elements from 0
                if k > max(regex.groups, 1):
                    raise Untranslatable(f"element {k} of the match of a pattern with {_groups(regex.groups)}")
                return _first_match(call.expressions[0], regex, k if regex.groups else 0)
            if isinstance(node, exp.Substring) and flavor == "are" and isinstance(node.args.get("start"), exp.Literal) \
                    and node.args["start"].is_string and node.args.get("length") is None:
                regex = _pattern(node.args["start"], flavor, False, True)
                return _first_match(node.this, regex, min(regex.groups, 1))
        except Untranslatable as why:
            call = _regexp_match(node) if isinstance(node, exp.Bracket) else None
            _refused(call[0] if call else node, str(why))  # named as the user wrote the call
            return node
        return node
    return rule


def _first_match(s: exp.Expression, regex: Regex, group: int) -> exp.Expression:
    """PostgreSQL's substring(s FROM p) and (regexp_match(s, p))[k]: group `group` of the first match, NULL
    when nothing matches (every group takes part in a match of the patterns translated for PostgreSQL)."""
    pattern = exp.Literal.string(regex.write("re2"))
    found = _neutral_call(REGEX_EXTRACT, s, pattern, exp.Literal.number(group))
    return exp.Case(ifs=[exp.If(this=exp.RegexpLike(this=s.copy(), expression=pattern.copy()), true=found)])


def _regexp_match(node: exp.Bracket) -> tuple[exp.Anonymous, exp.Literal] | None:
    """(regexp_match(s, p[, flags]))[k] as (the call, k's literal), or None."""
    call = node.this.this if isinstance(node.this, exp.Paren) else node.this
    index = node.expressions[0] if len(node.expressions) == 1 else None
    if isinstance(call, exp.Anonymous) and call.name.lower() == "regexp_match" and len(call.expressions) in (2, 3) \
            and isinstance(index, exp.Literal) and not index.is_string:
        return call, index
    return None


def untranslated(node: exp.Expression) -> str | None:
    """Why a construct of a view's neutral tree has no translation (canonical() marked it, or a regular
    expression of neutral SQL does not read), or None."""
    if node.meta.get(_WHY) if node._meta else None:
        return node.meta[_WHY]
    try:
        if isinstance(node, exp.RegexpLike):
            if node.args.get("flag") is not None:
                raise Untranslatable("options")
            _pattern(node.expression, "re2", False, False)
        elif isinstance(node, exp.Anonymous) and node.name.upper() in (REPLACE_FIRST, REPLACE_ALL, REGEX_EXTRACT):
            pattern, third = node.expressions[1], node.expressions[2]
            regex = _pattern(pattern, "re2", False, False)
            if node.name.upper() != REGEX_EXTRACT:
                read_replacement(third.this, "re2", regex.groups)
        elif isinstance(node, (exp.RegexpReplace, exp.RegexpExtract, exp.RegexpILike)):
            raise Untranslatable("write it in the warehouse's SQL")
    except (Untranslatable, AttributeError, IndexError) as why:
        return f"the regular expression languages differ: {why}"
    return None


def _spark_regex_like(node: exp.RegexpLike) -> exp.Expression:
    java = read_regex(node.expression.this, "re2").write("java")
    return exp.RegexpLike(this=node.this.copy(), expression=exp.Literal.string(java))


def _pg_regex_like(node: exp.RegexpLike) -> exp.Expression:
    are = read_regex(node.expression.this, "re2").write("are")
    return exp.RegexpLike(this=node.this.copy(), expression=exp.Literal.string(are))


def _spark_replace(node: exp.Anonymous) -> exp.Expression:
    """Java's replaceAll; the first match only: the text before it is a lazy group of its own."""
    s, pattern, replacement = node.expressions
    regex = read_regex(pattern.this, "re2")
    rep = read_replacement(replacement.this, "re2", regex.groups)
    if node.name.upper() == REPLACE_ALL:
        java, rep_java = regex.write("java"), rep.write("java")
    else:
        flags = "(?iu)" if regex.icase else ""
        java = f"{flags}^((?s:.*?))({Regex(regex.tree).write('java')})"
        rep_java = "$1" + rep.shifted(2).write("java")
    return _call("REGEXP_REPLACE", s, exp.Literal.string(java), exp.Literal.string(rep_java))


def _duckdb_replace(node: exp.Anonymous) -> exp.Expression:
    args = list(node.expressions) + ([exp.Literal.string("g")] if node.name.upper() == REPLACE_ALL else [])
    return _call("REGEXP_REPLACE", *args)


def _pg_replace(node: exp.Anonymous) -> exp.Expression:
    s, pattern, replacement = node.expressions
    regex = read_regex(pattern.this, "re2")
    rep = read_replacement(replacement.this, "re2", regex.groups)
    args = [s, exp.Literal.string(regex.write("are")), exp.Literal.string(rep.write("are"))]
    return _call("REGEXP_REPLACE", *args, *([exp.Literal.string("g")] if node.name.upper() == REPLACE_ALL else []))


def _spark_extract(node: exp.Anonymous) -> exp.Expression:
    s, pattern, group = node.expressions
    return _call("REGEXP_EXTRACT", s, exp.Literal.string(read_regex(pattern.this, "re2").write("java")), group)


def _duckdb_extract(node: exp.Anonymous) -> exp.Expression:
    return _call("REGEXP_EXTRACT", *node.expressions)


def _pg_extract(node: exp.Anonymous) -> exp.Expression:
    """DuckDB's regexp_extract: '' when nothing matches."""
    s, pattern, group = node.expressions
    are = exp.Literal.string(read_regex(pattern.this, "re2").write("are"))
    found = _call("REGEXP_SUBSTR", s, are, exp.Literal.number(1), exp.Literal.number(1), exp.Literal.string(""), group)
    return exp.Coalesce(this=found, expressions=[exp.Case(ifs=[exp.If(this=exp.Not(this=exp.Is(
        this=s.copy(), expression=exp.Null())), true=exp.Literal.string(""))])])


_RULES["spark"].update({exp.RegexpLike: _spark_regex_like, REPLACE_FIRST: _spark_replace, REPLACE_ALL: _spark_replace,
                        REGEX_EXTRACT: _spark_extract})
_RULES["duckdb"].update({REPLACE_FIRST: _duckdb_replace, REPLACE_ALL: _duckdb_replace, REGEX_EXTRACT: _duckdb_extract})
_RULES["postgres"].update({exp.RegexpLike: _pg_regex_like, REPLACE_FIRST: _pg_replace, REPLACE_ALL: _pg_replace,
                           REGEX_EXTRACT: _pg_extract})


# ------------------------------------------------------------------ a DECIMAL quantile as one Spark aggregate


def with_decimal_quantile_types(tree: exp.Expression,
                                column_type: Callable[[exp.Column], str | None]) -> exp.Expression:
    """Every PERCENTILE_CONT, PERCENTILE_DISC and MEDIAN of a DECIMAL column with its DuckDB type written
    out as a CAST (a no-op in DuckDB), so that an engine evaluating the view's own SQL (Spark recomputing
    a view) computes and types it as DuckDB does (_spark_decimal_quantile)."""
    def rule(node: exp.Expression) -> exp.Expression:
        target = _quantile_target(node) or _disc_target(node)
        if target is None or not isinstance(target.this, exp.Column):
            return node
        decimal = duckdb_decimal_type(target.this, column_type)
        if decimal is None or family(target.this, column_type) != "decimal":
            return node
        node = node.copy()
        target = _quantile_target(node) or _disc_target(node)
        target.set("this", exp.cast(target.this, decimal))
        return node

    return bottom_up(tree.copy(), rule)


def _disc_target(node: exp.Expression) -> exp.Expression | None:
    if isinstance(node, exp.WithinGroup) and isinstance(node.this, exp.PercentileDisc) \
            and isinstance(node.expression, exp.Order) and len(node.expression.expressions) == 1:
        return node.expression.expressions[0]
    return None


def _quantile_target(node: exp.Expression) -> exp.Expression | None:
    """The node holding a PERCENTILE_CONT's (or MEDIAN's) argument as `this`, or None."""
    if isinstance(node, exp.WithinGroup) and isinstance(node.this, exp.PercentileCont) \
            and isinstance(node.expression, exp.Order) and len(node.expression.expressions) == 1:
        return node.expression.expressions[0]
    if isinstance(node, exp.Median) and node.this is not None and not isinstance(node.this, exp.Distinct):
        return node
    return None


def _spark_decimal_quantile(node: exp.Expression) -> exp.Expression:
    """PERCENTILE_CONT/MEDIAN of a CAST(x AS DECIMAL(p,s)) as DuckDB computes it, in one Spark aggregate:
    the group's sorted values, the two around the position, duckdb_decimal_interpolation between them."""
    if isinstance(node, exp.WithinGroup) and isinstance(node.this, exp.PercentileDisc) \
            and isinstance(node.expression, exp.Order) and len(node.expression.expressions) == 1:
        arg = node.expression.expressions[0].this  # Spark's PERCENTILE_DISC of a DECIMAL is a DOUBLE
        kept = types.from_datatype(arg.to) if isinstance(arg, exp.Cast) else None
        return exp.cast(node.copy(), kept) if kept and _as_decimal(kept) else node
    target = _quantile_target(node)
    arg = target.this if target is not None else None
    decimal = types.from_datatype(arg.to) if isinstance(arg, exp.Cast) else None
    if decimal is None or _as_decimal(decimal) is None:
        return node
    p = node.this.this if isinstance(node, exp.WithinGroup) else exp.Literal.number("0.5")
    if not isinstance(p, exp.Literal):
        return node
    x = arg.sql()
    pos = f"(CAST({p.sql()} AS DOUBLE) * (COUNT({x}) - 1))"
    values = f"ARRAY_SORT(COLLECT_LIST({x}))"
    lo, hi = (f"ELEMENT_AT({values}, CAST({f}({pos}) AS INT) + 1)" for f in ("FLOOR", "CEIL"))
    sql = (f"CASE WHEN COUNT({x}) = 0 THEN NULL WHEN FLOOR({pos}) = CEIL({pos}) THEN CAST({lo} AS {decimal}) "
           f"ELSE {duckdb_decimal_interpolation(lo, hi, pos, decimal)} END")
    return for_engine(sqlglot.parse_one(sql), "spark")


_RULES["spark"][exp.WithinGroup] = _spark_decimal_quantile
_RULES["spark"][exp.Median] = _spark_decimal_quantile
