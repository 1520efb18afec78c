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

Each rule was measured on this stack (DuckDB 2.0, PostgreSQL 15, Spark 4.2); tests/test_functions.py
evaluates every translated expression in every engine against the warehouse's own value.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import sqlglot
from sqlglot import exp

from lattice import types

INT_DIV = "INT_DIV"

# strftime directives whose text agrees in every engine (numbers only: no month or day names, whose
# spelling and locale differ); a format made of these and punctuation is translated, anything else refused
_FORMATS = {"%Y", "%m", "%d", "%H", "%M", "%S", "%y"}
_FORMAT_TEXT = re.compile(r"^(?:%[A-Za-z]|[-/ :.,T_])*$")
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
    rules = [_weekday, _date_part, _truncate, _date_add, _integer_division, _quantile, _date_difference(column_type)]
    if warehouse == "postgres":
        rules += [_pg_varchar, _pg_division(column_type), _pg_median, _pg_percentile(column_type), _pg_upper]
    else:
        rules += [_duckdb_quantile_width(column_type)]

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
    """A TIME_TO_STR format every engine writes alike (numbers and punctuation only)."""
    if not isinstance(fmt, exp.Literal) or not fmt.is_string or not _FORMAT_TEXT.match(fmt.this):
        return False
    return all(d in _FORMATS for d in re.findall(r"%[A-Za-z]", fmt.this))


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

# a pattern of these tokens means the same in RE2 (DuckDB), POSIX AREs (PostgreSQL) and Java (Spark), for
# "does it match anywhere": no '.', whose newline rules differ, no class escapes (\w, \d: Unicode tables
# differ), no flags, look-arounds or back-references
_REGEX_TOKEN = re.compile(r"\\[.*+?()\[\]{}|^$\\/-]|\[\^?\]?(?:[^\]\\\[]|\\[\\\]\[^-])*\]|\{\d+(?:,\d*)?\}|[*+?|()^$]|"
                          r"[^.\\\[\]{}*+?|()^$]")


def spark_regex(pattern: str) -> str | None:
    """The pattern as Java reads it to mean what the warehouse's does, or None when it is not one of the
    shapes every engine reads alike. `$` ends the text in RE2 and PostgreSQL, but may stand before a final
    newline in Java: it becomes \\z there."""
    out, pos = [], 0
    while pos < len(pattern):
        m = _REGEX_TOKEN.match(pattern, pos)
        if m is None or (m.group() == "(" and pattern.startswith("(?", pos)):
            return None
        out.append(r"\z" if m.group() == "$" else m.group())
        pos = m.end()
    return "".join(out)


def _spark_regex_like(node: exp.RegexpLike) -> exp.Expression:
    pattern = node.expression
    java = spark_regex(pattern.this) if isinstance(pattern, exp.Literal) and pattern.is_string else None
    if java is None:
        return node
    return exp.RegexpLike(this=node.this.copy(), expression=exp.Literal.string(java))


_RULES["spark"][exp.RegexpLike] = _spark_regex_like


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
