"""What no engine can compute as the warehouse does, refused in every view (with the user's own spelling).

A view is written in the warehouse's SQL and read into neutral SQL whose functions mean what the
warehouse computes (lattice/warehouse_sql.py); Spark (propagate), DuckDB (the oracle, validation's
sampled recompute) and the warehouse each run it through one rule per function family. What is left
here has no such rule: a function whose value changes from run to run (random(), now(),
current_date), a function nightshift does not know, and the few constructs whose value no rule
reproduces in every engine (tests/test_functions.py keeps checking every one that is allowed). Each
refusal names the construct as the user wrote it, its file and line; a project's refusals are
reported together (lattice/compile.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp

from lattice.errors import UnsupportedView
from lattice.warehouse_sql import EXTRACT_UNITS, NEUTRAL_FUNCTIONS, format_supported, untranslated

_TRUNC_OK = {"YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND"}

# node class -> why no engine can give the warehouse's value
_REFUSED: dict[type, str] = {
    exp.DateAdd: "only date_add(x, INTERVAL ...) is translated; write x + INTERVAL 'n' DAY",
    exp.DateSub: "only x - INTERVAL ... is translated; write x - INTERVAL 'n' DAY",
    exp.AddMonths: "write x + INTERVAL 'n' MONTH",
    exp.TsOrDsAdd: "write x + INTERVAL 'n' DAY",
    exp.ToChar: "DuckDB has no to_char; write strftime(x, '%Y-%m')",
    exp.StrToTime: "date formats are read differently by each engine; write CAST(s AS DATE) or CAST(s AS TIMESTAMP)",
    exp.StrToDate: "date formats are read differently by each engine; write CAST(s AS DATE)",
    exp.SimilarTo: "SIMILAR TO's pattern language is not translated; write the pattern as a regular expression (~)",
}
_RANDOM = (exp.Rand, exp.Randn, exp.Uuid, exp.CurrentDate, exp.CurrentTimestamp, exp.CurrentTime,
           exp.CurrentDatetime)
_RANDOM_NAMES = {"now", "today", "random", "uuid", "gen_random_uuid", "clock_timestamp", "statement_timestamp",
                 "transaction_timestamp", "timeofday", "get_current_time", "current_localtimestamp"}
_DETERMINISM = "gives a different value on every run; a summary view must give the same rows every night"


@dataclass(frozen=True)
class Refusal:
    """One construct of a view file no engine computes as the warehouse does."""

    file: str
    view: str
    line: int | None
    spelling: str  # as the user wrote it
    reason: str

    def __str__(self) -> str:
        at = f", line {self.line}" if self.line else ""
        return f"{self.file}: view {self.view}{at}: {self.spelling}: {self.reason}"


def refusals(tree: exp.Expression, text: str, file: str, view: str, warehouse: str | None = None,
             user: frozenset[str] = frozenset()) -> list[Refusal]:
    """Every refused construct of a view's neutral tree, spelled and placed as in `text` (its file);
    `user`: the lower-case names of the user-defined aggregates (nightshift.toml [aggregates])."""
    out, seen = [], set()
    for node in tree.walk():
        if isinstance(node, exp.Anonymous) and node.name.lower() in user:
            continue
        reason = _why_refused(node, warehouse)
        if reason:
            line, spelling = _spelling(node, text, seen, warehouse)
            out.append(Refusal(file, view, line, spelling, reason))
    return out


def check_functions(tree: exp.Expression, where: str, user: frozenset[str] = frozenset()) -> None:
    """Raise UnsupportedView naming the first refused construct of `tree` (SQL nightshift writes or a
    user-defined aggregate's, so spelled as sqlglot reads it); `where` prefixes the message."""
    for node in tree.walk():
        if isinstance(node, exp.Anonymous) and node.name.lower() in user:
            continue
        reason = _why_refused(node, None)
        if reason:
            raise UnsupportedView(f"{where}: {_name(node)}: {reason}")


def nondeterministic(tree: exp.Expression) -> str | None:
    """The first function whose value changes from run to run (RANDOM(), CURRENT_DATE, ...), or None."""
    node = next((n for n in tree.walk() if _random(n)), None)
    return _name(node) if node is not None else None


def _random(node: exp.Expression) -> bool:
    return isinstance(node, _RANDOM) or (isinstance(node, exp.Anonymous) and node.name.lower() in _RANDOM_NAMES)


def _name(node: exp.Expression) -> str:
    sql = node.sql()
    return sql if len(sql) <= 60 else sql[:57] + "..."


def _why_refused(node: exp.Expression, warehouse: str | None) -> str | None:
    if _random(node):
        return _DETERMINISM
    reason = untranslated(node) or _REFUSED.get(type(node))
    if reason:
        return reason
    if isinstance(node, exp.Anonymous) and node.name.upper() not in NEUTRAL_FUNCTIONS:
        return (f"{node.name}() is not a function nightshift knows how to compute as the warehouse does in Spark "
                f"(docs/reference/functions.md lists the ones it translates)")
    if isinstance(node, exp.Extract):
        unit = node.name.upper()
        if unit not in EXTRACT_UNITS:
            return (f"EXTRACT({unit}) is not translated; use YEAR, QUARTER, MONTH, DAY, DOY, WEEK, DOW, ISODOW, HOUR, "
                    f"MINUTE, SECOND or EPOCH")
    if isinstance(node, (exp.DateTrunc, exp.TimestampTrunc)):
        unit = node.args.get("unit")
        unit = (unit.name if isinstance(unit, exp.Expression) else str(unit or "")).upper().strip("'")
        if unit not in _TRUNC_OK:
            return f"date_trunc('{unit.lower()}', x) is not translated; use year, quarter, month, week, day or hour"
    if isinstance(node, exp.TimeToStr) and not format_supported(node.args.get("format")):
        return ("only these date formats are translated: %Y, %y, %m, %d, %H, %M, %S, the names %A, %a, %B, %b and "
                "punctuation")
    if isinstance(node, exp.DateDiff) and node.args.get("unit") is not None:
        unit = node.args["unit"]
        if (unit.name if isinstance(unit, exp.Expression) else str(unit)).upper().strip("'") != "DAY":
            return "date_diff is translated for year, quarter, month, week, day, hour, minute and second"
    if isinstance(node, exp.Trunc) and node.args.get("decimals") is not None:
        return "Spark drops TRUNC's scale; write ROUND of a DECIMAL, or FLOOR"
    if isinstance(node, exp.Mode) and not isinstance(node.parent, exp.WithinGroup):
        return ("among equally frequent values, mode(x) picks by the order the rows are read (the same rows read "
                "in another order give another value); write mode() WITHIN GROUP (ORDER BY x), which picks the "
                "smallest")
    return None


def _spelling(node: exp.Expression, text: str, seen: set[int], warehouse: str | None) -> tuple[int | None, str]:
    """(line, text) of `node` as written in the file: from the position sqlglot recorded for its name, else
    the first unreported occurrence of its keyword or of its text in the warehouse's SQL (an operator such as
    s ~ 'a'); sqlglot's spelling when none is found."""
    start = node.meta.get("start") if node.meta else None
    if start is None:
        for word in _keywords(node):
            for m in re.finditer(rf"(?<![\w.]){re.escape(word)}\b", text, re.IGNORECASE):
                if m.start() not in seen and _outside_comment(text, m.start()):
                    start = m.start()
                    break
            if start is not None:
                break
    if start is None:
        written = node.sql(dialect=warehouse)
        found = [m.start() for m in re.finditer(re.escape(written), text, re.IGNORECASE) if m.start() not in seen]
        if found:
            seen.add(found[0])
            return text.count("\n", 0, found[0]) + 1, written
    if start is None or start >= len(text):
        return None, _name(node)
    seen.add(start)
    end = _call_end(text, start)
    spelling = " ".join(text[start:end].split())
    spelling = spelling if len(spelling) <= 80 else spelling[:77] + "..."
    return text.count("\n", 0, start) + 1, spelling


def _keywords(node: exp.Expression) -> list[str]:
    if isinstance(node, exp.Anonymous):
        return [node.name]
    if isinstance(node, exp.Extract):
        return ["extract", "date_part", "datepart"]
    if isinstance(node, (exp.DateTrunc, exp.TimestampTrunc)):
        return ["date_trunc", "datetrunc"]
    if isinstance(node, exp.TimeToStr):
        return ["strftime", "to_char"]
    names = [node.sql_name().lower(), node.key.lower(), *(type(node).__name__.lower(),)]
    if isinstance(node, exp.CurrentTimestamp):
        names = ["now", "current_timestamp", *names]
    if isinstance(node, exp.Rand):
        names = ["random", "rand", *names]
    return names


def _outside_comment(text: str, pos: int) -> bool:
    line_start = text.rfind("\n", 0, pos) + 1
    return "--" not in text[line_start:pos]


def _call_end(text: str, start: int) -> int:
    """The end of the call starting at `start`: past its matching parenthesis, or the end of the word."""
    m = re.match(r"[\w.]+\s*", text[start:])
    pos = start + (m.end() if m else 0)
    if pos >= len(text) or text[pos] != "(":
        return start + len(m.group().rstrip()) if m else start + 1
    depth, quote = 0, None
    for i in range(pos, len(text)):
        c = text[i]
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)
