"""`nightshift load`: a change batch from CSV, JSON lines or Parquet files, with no Spark.

A change batch is the table's columns plus `_op` with the exact Arrow types the batch check accepts
(spark_jobs/changes.py): INTEGER int32, BIGINT int64, DOUBLE float64, DECIMAL(p,s) decimal128(p,s),
VARCHAR string, DATE date32, TIMESTAMP timestamp[us], BOOLEAN bool. Values are coerced only when
the coercion is exact (a float 12.5 into DECIMAL(10,2), "3" or 3.0 into an INTEGER, an ISO date
string into a DATE); anything else is a problem. Every problem of every file is collected first and
reported together, and then nothing is written; otherwise the rows become one new Parquet part of
lake/changes/<table>/batch_id=<ID>/, renamed into place, so a batch can be built by several loads.

Deletes of a table with a PRIMARY KEY may name only the key columns: the full row image is looked
up by key in the table as the batch will find it (the lake's base plus the landed batches before
this one that are not applied yet), minus what this batch already deletes.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
import os
import re
import time
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation, localcontext
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lattice import types
from lattice.ir import Column, Table
from lattice.passes.parse_schema import parse_schema
from lattice.sql import ident
from nightshift.config import Project
from runtime.errors import BadChangeBatch, ConfigError
from runtime.delta import register_base
from runtime.lake import Lake, LakeState, check_batch_id
from runtime.night import BatchInfo

OP = "_op"
OPS = ("insert", "delete")
FORMATS = {".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json", ".parquet": "parquet"}
SHOWN = 20  # problems listed per file and column; the rest are counted
_INT_RANGE = {"INTEGER": (-(2**31), 2**31 - 1), "BIGINT": (-(2**63), 2**63 - 1)}


@dataclass(frozen=True)
class Problem:
    file: str
    row: int | None  # 1-based data row (a CSV's header is not a row); None: the whole file
    column: str
    message: str

    def text(self) -> str:
        where = f"row {self.row}, column {self.column}" if self.row is not None else (
            f"column {self.column}" if self.column else "")
        return f"{self.file}: {where}: {self.message}" if where else f"{self.file}: {self.message}"


@dataclass(frozen=True)
class LoadResult:
    table: str
    batch: str
    op: str
    rows: int
    expanded: int  # key-only deletes expanded to full row images
    path: Path  # the part written
    seconds: float


def arrow_type(declared: str) -> pa.DataType:
    """The Arrow type a change file's column of declared (normalized) type must have."""
    if declared == "INTEGER":
        return pa.int32()
    if declared == "BIGINT":
        return pa.int64()
    if declared == "DOUBLE":
        return pa.float64()
    if declared.startswith("DECIMAL"):
        p, s = re.match(r"DECIMAL\((\d+),(\d+)\)", declared).groups()
        return pa.decimal128(int(p), int(s))
    return {"VARCHAR": pa.string(), "DATE": pa.date32(), "TIMESTAMP": pa.timestamp("us"),
            "BOOLEAN": pa.bool_()}[declared]


def batch_schema(table: Table) -> pa.Schema:
    return pa.schema([pa.field(c.name, arrow_type(c.type)) for c in table.columns] + [pa.field(OP, pa.string())])


# ---------------------------------------------------------------- the command


def load(project: Project, batch: str, table_name: str, files: list[str | Path], op: str = "insert") -> LoadResult:
    """Write `files` as a new part of change batch `batch` of `table_name`; raises BadChangeBatch listing
    every problem, and then writes nothing."""
    t0 = time.perf_counter()
    check_batch_id(batch)
    if op not in OPS:
        raise BadChangeBatch(f"load {batch}: --op must be insert or delete, not {op!r}")
    schema_file = project.root / "sql" / "schema.sql"
    if not schema_file.is_file():
        raise ConfigError(f"{schema_file}: missing (a project needs sql/schema.sql)")
    table = parse_schema(schema_file.read_text(), "sql/schema.sql").table(table_name)
    if table is None or table.view is not None:
        known = ", ".join(t.name for t in parse_schema(schema_file.read_text()).base_tables) or "none yet"
        raise BadChangeBatch(f"load {batch}: no table {table_name!r} in {schema_file} (tables: {known}); "
                             f"declare it there with CREATE TABLE first")
    lake = Lake(project.lake)
    state = lake.state()
    _check_open(lake, state, batch)
    if not files:
        raise BadChangeBatch(f"load {batch}: no input files given")
    problems: list[Problem] = []
    parts: list[pa.Table] = []
    keys_only: list[tuple[str, pa.Table]] = []
    for f in map(Path, files):
        got = _read_file(f, table, op, problems)
        if got is None:
            continue
        rows, key_only = got
        if key_only:
            keys_only.append((str(f), rows))
        else:
            parts.append(rows)
    if keys_only:
        parts += _expand_deletes(lake, state, batch, table, keys_only, problems)
    if problems:
        raise BadChangeBatch(_report(batch, table.name, problems))
    columns = pa.schema([pa.field(c.name, arrow_type(c.type)) for c in table.columns])
    out = pa.concat_tables(parts) if parts else columns.empty_table()
    out = out.append_column(OP, pa.array([op] * out.num_rows, pa.string()))
    path = _write_part(lake, batch, table, out)
    expanded = sum(t.num_rows for _, t in keys_only)
    return LoadResult(table.name, batch, op, out.num_rows, expanded, path, time.perf_counter() - t0)


def _check_open(lake: Lake, state: LakeState, batch: str) -> None:
    """Refuse a batch that propagate has read or that is applied, and one that would come before the
    lake's base (run would refuse it as out of order)."""
    used = lake.batch_used(batch, state)
    if used:
        raise BadChangeBatch(f"load {batch}: {used}, so it can no longer change; land these changes in a new batch "
                             f"with an id after {max(state.last or batch, batch)}")
    if state.last is not None and batch < state.last:
        raise BadChangeBatch(f"load {batch}: batch {state.last} is already applied and batches apply in id order; "
                             f"use a batch id after {state.last}")


def _report(batch: str, table: str, problems: list[Problem]) -> str:
    files = list(dict.fromkeys(p.file for p in problems))
    problems = sorted(problems, key=lambda p: (files.index(p.file), p.row or 0))  # stable: columns in table order
    lines, shown = [], Counter()
    for p in problems:
        shown[(p.file, p.column)] += 1
        if shown[(p.file, p.column)] <= SHOWN:
            lines.append(f"  {p.text()}")
    more = [f"  {f}: column {c}: {n - SHOWN} more problem(s) like these" for (f, c), n in shown.items() if n > SHOWN]
    return (f"load {batch} into {table}: {len(problems)} problem(s); nothing was written. Fix the files and rerun:\n"
            + "\n".join(lines + more))


# ---------------------------------------------------------------- reading the inputs


def _read_file(f: Path, table: Table, op: str, problems: list[Problem]) -> tuple[pa.Table, bool] | None:
    """The file's rows as a table with the declared columns and types (or only the key columns, for a
    key-only delete: second value True); None when the file has problems (added to `problems`)."""
    kind = FORMATS.get(f.suffix.lower())
    if kind is None:
        problems.append(Problem(str(f), None, "", f"unknown file type {f.suffix or '(none)'!r}: load reads .csv, "
                                                  f".json/.jsonl (one object a line) and .parquet"))
        return None
    if not f.is_file():
        problems.append(Problem(str(f), None, "", "no such file"))
        return None
    before = len(problems)
    try:
        names, columns = {"csv": _read_csv, "json": _read_json, "parquet": _read_parquet}[kind](f)
    except (OSError, ValueError, pa.ArrowException, csv.Error) as e:
        problems.append(Problem(str(f), None, "", f"not a readable {kind} file ({e})"))
        return None
    wanted = _columns_of(f, names, table, op, problems)
    if wanted is None:
        return None
    by_lower = {n.lower(): n for n in names}
    arrays = {}
    for c in wanted:
        arrays[c.name] = _convert(str(f), c, columns[by_lower[c.name.lower()]], problems)
    if len(problems) > before:
        return None
    return pa.table(arrays, schema=pa.schema([pa.field(c.name, arrow_type(c.type)) for c in wanted])), \
        len(wanted) < len(table.columns)


def _columns_of(f: Path, names: list[str], table: Table, op: str, problems: list[Problem]) -> list[Column] | None:
    """The declared columns the file carries: all of them, or for a delete from a table with a primary
    key, only the key columns; a problem naming the missing and unexpected columns otherwise."""
    present = {n.lower() for n in names}
    if OP in present:
        problems.append(Problem(str(f), None, OP, f"the operation comes from --op (insert or delete), not from a "
                                                   f"column: remove {OP} and load inserts and deletes separately"))
        return None
    extra = [n for n in names if table.column(n) is None and n.lower() != OP]
    missing = [c.name for c in table.columns if c.name.lower() not in present]
    key = {k.lower() for k in table.primary_key}
    key_only = op == "delete" and key and key <= present and not extra
    if (missing or extra) and not key_only:
        parts = ([f"missing column(s) {', '.join(missing)}"] if missing else []) + (
            [f"unexpected column(s) {', '.join(extra)}"] if extra else [])
        hint = (f"; a delete may carry only the primary key ({', '.join(table.primary_key)})"
                if op == "delete" and table.primary_key else "")
        problems.append(Problem(str(f), None, "", f"{'; '.join(parts)} (table {table.name} has "
                                                  f"{', '.join(table.column_names)}){hint}"))
        return None
    if missing:  # a key-only delete
        return [table.column(k) for k in table.primary_key]
    return list(table.columns)


def _read_csv(f: Path) -> tuple[list[str], dict[str, list]]:
    """Every field as text; an empty field is NULL."""
    with open(f, newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None:
            raise ValueError("empty file: no header line")
        header = [h.strip() for h in header]
        cols: dict[str, list] = {h: [] for h in header}
        for n, row in enumerate(reader, start=1):
            if not row:
                continue
            if len(row) != len(header):
                raise ValueError(f"row {n} has {len(row)} fields, the header {len(header)}")
            for h, v in zip(header, row):
                cols[h].append(v if v != "" else None)
    return header, cols


def _read_json(f: Path) -> tuple[list[str], dict[str, list]]:
    """One JSON object a line (or one JSON array of objects); numbers keep their written digits
    (Decimal), so 0.1 into a DECIMAL is exact. A key absent from a row is NULL."""
    text = f.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        rows = json.loads(text, parse_float=Decimal)
    else:
        rows = []
        for n, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line, parse_float=Decimal))
                except json.JSONDecodeError as e:
                    raise ValueError(f"line {n}: {e}") from None
    if not all(isinstance(r, dict) for r in rows):
        raise ValueError("every line must be a JSON object {\"column\": value, ...}")
    names = list(dict.fromkeys(k for r in rows for k in r))
    return names, {k: [r.get(k) for r in rows] for k in names}


def _read_parquet(f: Path) -> tuple[list[str], dict[str, pa.ChunkedArray]]:
    t = pq.read_table(f)
    return t.column_names, {n: t.column(n) for n in t.column_names}


# ---------------------------------------------------------------- exact coercion


def _convert(file: str, c: Column, values, problems: list[Problem]) -> pa.Array:
    """One column's values in the declared type; a problem per value that does not convert exactly."""
    target = arrow_type(c.type)
    if isinstance(values, pa.ChunkedArray):
        fast = _cast_arrow(values, target)
        if fast is not None:
            _not_null(file, c, fast, problems)
            return fast
        values = values.to_pylist()
    out, bad = [], set()
    for row, v in enumerate(values, start=1):
        try:
            out.append(coerce(v, c.type))
        except ValueError as e:
            problems.append(Problem(file, row, c.name, f"{_show(v)} is not {c.type} ({e})"))
            out.append(None)
            bad.add(row - 1)
    arr = pa.array(out, target)
    _not_null(file, c, arr, problems, bad)
    return arr


def _cast_arrow(values: pa.ChunkedArray, target: pa.DataType) -> pa.Array | None:
    """Vectorized when the type already is the target, or a lossless widening Arrow checks (an integer
    into a wider or range-checked integer, date32/date64 to date32); None: convert value by value."""
    t = values.type
    arr = values.combine_chunks()
    if t == target:
        return arr
    ok = (pa.types.is_integer(t) and pa.types.is_integer(target)) or (pa.types.is_date(t) and pa.types.is_date(target)) \
        or (pa.types.is_string(t) or pa.types.is_large_string(t)) and pa.types.is_string(target) \
        or pa.types.is_null(t)
    if not ok:
        return None
    try:
        return pc.cast(arr, target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None  # out of range somewhere: value by value names the rows


def _not_null(file: str, c: Column, arr: pa.Array, problems: list[Problem], bad: set[int] = frozenset()) -> None:
    """A NULL in a NOT NULL column (not one already reported as a value that did not convert)."""
    if c.nullable or not arr.null_count:
        return
    for row in pc.indices_nonzero(pc.is_null(arr)).to_pylist():
        if row not in bad:
            problems.append(Problem(file, row + 1, c.name, "NULL (empty) in NOT NULL column"))


def _show(v) -> str:
    return repr(v) if not isinstance(v, Decimal) else str(v)


def coerce(v, declared: str):
    """`v` (text from a CSV, a JSON value, a Parquet value) as a Python value of the declared type, when
    that is exact; ValueError saying why not. None stays None."""
    if v is None:
        return None
    if isinstance(v, str) and declared != "VARCHAR":
        v = v.strip()
        if v == "":
            return None
    fam = types.family(declared)
    if fam == "integer":
        return _integer(v, declared)
    if fam == "float":
        if isinstance(v, bool) or not isinstance(v, (int, float, Decimal, str)):
            raise ValueError("not a number")
        try:
            return float(v)
        except ValueError:
            raise ValueError("not a number") from None
    if fam == "decimal":
        return _decimal(v, declared)
    if fam == "varchar":
        if not isinstance(v, str):
            raise ValueError("a string is expected; quote it")
        return v
    if fam == "date":
        return _date(v)
    if fam == "timestamp":
        return _timestamp(v)
    if fam == "boolean":
        return _boolean(v)
    raise ValueError(f"type {declared} cannot be loaded")


def _integer(v, declared: str) -> int:
    if isinstance(v, bool):
        raise ValueError("a boolean, not a number")
    if isinstance(v, int):
        n = v
    elif isinstance(v, float):
        if not math.isfinite(v) or not v.is_integer():
            raise ValueError("not a whole number")
        n = int(v)
    else:
        try:
            d = Decimal(v) if isinstance(v, (str, Decimal)) else None
        except InvalidOperation:
            d = None
        if d is None or not d.is_finite():
            raise ValueError("not a number")
        if d != d.to_integral_value():
            raise ValueError("not a whole number")
        n = int(d)
    lo, hi = _INT_RANGE[declared]
    if not lo <= n <= hi:
        raise ValueError(f"out of range for {declared}")
    return n


def _decimal(v, declared: str) -> Decimal:
    """Exact at the declared scale: 12.5 and '12.50' into DECIMAL(10,2) are, 1.005 is not. A float is
    read by its shortest representation (0.1 is 0.1, not 0.1000000000000000055...)."""
    p, s = map(int, re.match(r"DECIMAL\((\d+),(\d+)\)", declared).groups())
    if isinstance(v, bool):
        raise ValueError("a boolean, not a number")
    try:
        if isinstance(v, float):
            if not math.isfinite(v):
                raise ValueError("not a finite number")
            d = Decimal(repr(v))
        elif isinstance(v, (int, Decimal, str)):
            d = Decimal(v)
        else:
            raise ValueError("not a number")
    except InvalidOperation:
        raise ValueError("not a number") from None
    if not d.is_finite():
        raise ValueError("not a finite number")
    if d != 0 and d.adjusted() >= p - s:
        raise ValueError(f"too large: at most {p - s} digit(s) before the point")
    with localcontext() as ctx:
        ctx.prec = 2 * p + 10
        q = d.quantize(Decimal(1).scaleb(-s))
    if q != d:
        raise ValueError(f"has more than {s} decimal place(s); round it in the source")
    return q


def _date(v) -> dt.date:
    if isinstance(v, dt.datetime):
        if v.time() != dt.time(0):
            raise ValueError("has a time of day")
        return v.date()
    if isinstance(v, dt.date):
        return v
    if isinstance(v, str):
        try:
            return dt.date.fromisoformat(v)
        except ValueError:
            pass
        try:
            return _date(dt.datetime.fromisoformat(v))
        except ValueError as e:
            if "time of day" in str(e):
                raise
    raise ValueError("not an ISO date (YYYY-MM-DD)")


def _timestamp(v) -> dt.datetime:
    if isinstance(v, str):
        try:
            v = dt.datetime.fromisoformat(v)
        except ValueError:
            raise ValueError("not an ISO timestamp (YYYY-MM-DD HH:MM:SS)") from None
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:  # Spark's session time zone is UTC
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return v
    if isinstance(v, dt.date):
        return dt.datetime(v.year, v.month, v.day)
    raise ValueError("not an ISO timestamp (YYYY-MM-DD HH:MM:SS)")


def _boolean(v) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.lower() in ("true", "t", "yes", "y", "1", "false", "f", "no", "n", "0"):
        return v.lower() in ("true", "t", "yes", "y", "1")
    raise ValueError("not a boolean (true/false)")


# ---------------------------------------------------------------- key-only deletes


def _expand_deletes(lake: Lake, state: LakeState, batch: str, table: Table, keys_only: list[tuple[str, pa.Table]],
                    problems: list[Problem]) -> list[pa.Table]:
    """Full row images of key-only deletes: each key's row in the table as batch `batch` will find it
    (the lake's base, then the inserts and deletes of the landed batches before it that are not applied),
    minus the rows this batch's earlier parts delete. A key with no such row is a problem."""
    key = list(table.primary_key)
    wanted = {tuple(r[k] for k in key) for _, t in keys_only for r in t.select(key).to_pylist()}
    rows = _base_rows(lake, state, table, key, wanted)  # key -> Counter of full row tuples
    inserted_here: set[tuple] = set()
    for b, t, sign in _changes_before(lake, state, batch, table):
        for r in t.to_pylist():
            k = tuple(r[c] for c in key)
            if k not in wanted:
                continue
            full = tuple(r[c.name] for c in table.columns)
            if b == batch and sign > 0:
                inserted_here.add(k)
                continue  # a delete matches a row of the base, never an insert of its own batch
            rows.setdefault(k, Counter())[full] += sign
    out, schema = [], pa.schema([pa.field(c.name, arrow_type(c.type)) for c in table.columns])
    for file, t in keys_only:
        found = []
        for row, r in enumerate(t.to_pylist(), start=1):
            k = tuple(r[c] for c in key)
            bag = rows.get(k, Counter())
            full = next((image for image, n in sorted(bag.items(), key=repr) if n > 0), None)
            if full is None:
                shown = ", ".join(f"{c}={v!r}" for c, v in zip(key, k))
                why = (f"no {table.name} row with key ({shown}) in the base"
                       + (f" at batch {state.last}" if state.last else " (empty)")
                       + " or in the landed batches before this one"
                       + (" (this batch inserts it: a delete removes a row the batch finds, so drop the insert instead)"
                          if k in inserted_here else "")
                       + (" (an earlier part of this batch or line of this load already deletes it)"
                          if any(n < 0 for n in bag.values()) or (bag and not any(n > 0 for n in bag.values())) else ""))
                problems.append(Problem(file, row, ", ".join(key), why))
                continue
            bag[full] -= 1
            found.append(dict(zip(table.column_names, full)))
        out.append(pa.Table.from_pylist(found, schema=schema))
    return out


def _base_rows(lake: Lake, state: LakeState, table: Table, key: list[str], wanted: set[tuple]) -> dict:
    """The base rows of `table` whose primary key is in `wanted` (DuckDB over the table's Delta version in
    the lake's state, read as the oracle reads it: a semi-join, no JVM)."""
    if state.version(table.name) is None or not wanted:
        return {}
    import duckdb  # deferred: only key-only deletes read the base

    keys = pa.table({k: pa.array([w[i] for w in wanted], arrow_type(table.column(k).type)) for i, k in enumerate(key)})
    con = duckdb.connect()
    try:
        register_base(con, lake, table, state)
        con.register("__ns_keys", keys)
        on = " AND ".join(f"b.{ident(k)} = k.{ident(k)}" for k in key)
        found = con.sql(f"SELECT * FROM {ident(table.name)} b "
                        f"WHERE EXISTS (SELECT 1 FROM __ns_keys k WHERE {on})").to_arrow_table()
    finally:
        con.close()
    found = found.cast(pa.schema([pa.field(c.name, arrow_type(c.type)) for c in table.columns]))
    rows: dict[tuple, Counter] = {}
    for r in found.to_pylist():
        rows.setdefault(tuple(r[k] for k in key), Counter())[tuple(r[c.name] for c in table.columns)] += 1
    return rows


def _changes_before(lake: Lake, state: LakeState, batch: str, table: Table):
    """(batch id, rows, +1 insert | -1 delete) of `table`'s change files in the landed batches after the
    lake's base and up to `batch` itself, in apply order (key-only parts are not written: every part
    holds full row images)."""
    folder = lake.changes / table.name
    if not folder.is_dir():
        return
    for d in sorted(folder.glob("batch_id=*")):
        b = d.name.split("=", 1)[1]
        if b in state.applied or b > batch or (state.last is not None and b < state.last):
            continue
        for f in sorted(d.glob("*.parquet")):
            t = pq.read_table(f)
            names = {n.lower(): n for n in t.column_names}
            if OP not in names or any(c.name.lower() not in names for c in table.columns):
                continue
            t = t.rename_columns([n.lower() for n in t.column_names])
            for op, sign in (("insert", 1), ("delete", -1)):
                part = t.filter(pc.equal(t.column(OP), op))
                part = pa.table({c.name: part.column(c.name.lower()) for c in table.columns})
                yield b, part, sign


# ---------------------------------------------------------------- writing


def _write_part(lake: Lake, batch: str, table: Table, rows: pa.Table) -> Path:
    """A new part beside the batch's existing files, in their exact types (every file of a table in a
    batch must be alike), renamed into place: a reader sees the part whole or not at all."""
    folder = lake.change_dir(table.name, batch)
    folder.mkdir(parents=True, exist_ok=True)
    existing = sorted(p for p in folder.glob("*.parquet") if p.is_file())
    if existing:
        have = pq.read_schema(existing[0])
        by_lower = {n.lower(): n for n in rows.column_names}
        try:
            rows = pa.table({n: rows.column(by_lower[n.lower()]) for n in have.names}).cast(have)
        except (KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise BadChangeBatch(f"load {batch}: {existing[0]} already holds {table.name}'s changes with other columns "
                                 f"or types ({have.to_string(show_schema_metadata=False)!s}) than sql/schema.sql "
                                 f"declares ({e}); rewrite that file or load into a new batch") from None
    numbers = [int(m.group(1)) for p in existing if (m := re.match(r"part-(\d+)", p.name))]
    n = max(numbers, default=-1) + 1
    path = folder / f"part-{n:05d}.parquet"
    while path.exists():
        n += 1
        path = folder / f"part-{n:05d}.parquet"
    tmp = folder / f".part-{n:05d}.parquet.tmp"
    pq.write_table(rows, tmp)
    os.replace(tmp, path)
    return path


# ---------------------------------------------------------------- a landed batch's sizes (plan --batch, before propagate)


def landed_info(lake: Lake, tables: list[str], batch: str) -> BatchInfo:
    """Inserted and deleted rows of every table of landed batch `batch`, from its files' _op column
    (pyarrow, no Spark): what a preview of the night is costed with. Raises BadChangeBatch when the
    batch has no files."""
    files = lake.batch_files(batch, tables)
    inserted, deleted = {t: 0 for t in tables}, {t: 0 for t in tables}
    for t, paths in files.items():
        for f in paths:
            names = {n.lower(): n for n in pq.read_schema(f).names}
            if OP not in names:
                continue
            ops = pq.read_table(f, columns=[names[OP]]).column(0)
            inserted[t] += pc.sum(pc.cast(pc.equal(ops, "insert"), pa.int64())).as_py() or 0
            deleted[t] += pc.sum(pc.cast(pc.equal(ops, "delete"), pa.int64())).as_py() or 0
    return BatchInfo(batch, inserted, deleted)
