"""docs/getting-started.md, run as a reader runs it: every file it shows is written and every `$ ` command of
its ```console blocks is run verbatim, in page order, in an empty folder, with the checkout's .venv/bin first
on PATH. Then every served view must equal the view's SQL evaluated by DuckDB over the page's own data, applied
batch by batch by this test (an independent model: nothing nightshift wrote is read except the served views and
the Parquet batch the page's own script wrote), and the page's last query must print the model's rows."""

from __future__ import annotations

import datetime as dt
import decimal
import os
import re
import subprocess
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "getting-started.md"
FILE = re.compile(r"^<!-- file: (\S+) -->\s*$")

pytestmark = pytest.mark.slow


def steps(page: str) -> list[tuple[str, str, str]]:
    """("file", path, content) and ("run", command, "") in page order."""
    out, lines, i = [], page.splitlines(), 0
    while i < len(lines):
        m = FILE.match(lines[i])
        if m:
            j = next(k for k in range(i + 1, len(lines)) if lines[k].startswith("```"))
            end = next(k for k in range(j + 1, len(lines)) if lines[k].startswith("```"))
            out.append(("file", m.group(1), "\n".join(lines[j + 1:end]) + "\n"))
            i = end + 1
        elif lines[i].strip() == "```console":
            end = next(k for k in range(i + 1, len(lines)) if lines[k].startswith("```"))
            out += [("run", line[2:], "") for line in lines[i + 1:end] if line.startswith("$ ")]
            i = end + 1
        else:
            i += 1
    return out


def _text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return str(value)


def model_tables(work: Path, commands: list[str]) -> dict[str, list[dict]]:
    """Apply the page's batches in batch-id order: the CSV files of its `nightshift load` commands, and the
    Parquet files of batches the page wrote itself (under lake/changes, with no load command)."""
    changes: dict[str, list[tuple[str, str, dict]]] = {}  # batch -> [(table, op, row)]
    for cmd in commands:
        if not cmd.startswith("nightshift load "):
            continue
        args = cmd.split()
        opt = {args[k]: args[k + 1] for k in range(len(args) - 1) if args[k].startswith("--")}
        lines = (work / args[-1]).read_text().splitlines()
        header = lines[0].split(",")
        for line in lines[1:]:
            row = dict(zip(header, (v if v != "" else None for v in line.split(","))))
            changes.setdefault(opt["--batch"], []).append((opt["--table"], opt.get("--op", "insert"), row))
    loaded = set(changes)
    for folder in sorted((work / "rides" / "lake" / "changes").glob("*/batch_id=*")):
        batch = folder.name.split("=", 1)[1]
        if batch in loaded:
            continue
        for file in sorted(folder.glob("*.parquet")):
            for rec in pq.read_table(file).to_pylist():
                op = rec.pop("_op")
                changes.setdefault(batch, []).append((folder.parent.name, op, {k: _text(v) for k, v in rec.items()}))
    tables: dict[str, list[dict]] = {}
    for batch in sorted(changes):
        for table, op, row in changes[batch]:  # deletes name rows of the base before the batch
            if op == "delete":
                rows = tables.setdefault(table, [])
                hit = next(i for i, r in enumerate(rows) if all(r.get(k) == v for k, v in row.items()))
                rows.pop(hit)
        for table, op, row in changes[batch]:
            if op == "insert":
                tables.setdefault(table, []).append(row)
    return tables


def model_views(work: Path, tables: dict[str, list[dict]]) -> dict[str, list[tuple]]:
    schema = (work / "rides" / "sql" / "schema.sql").read_text()
    ddl = re.sub(r"--[^\n]*", "", schema)
    ddl = re.sub(r"\s+(PRIMARY KEY|NOT NULL|REFERENCES\s+\w+(\s*\([^)]*\))?)", "", ddl, flags=re.I)
    con = duckdb.connect()
    con.execute(ddl)
    for table, rows in tables.items():
        for row in rows:
            cols = list(row)
            con.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                        [row[c] for c in cols])
    out = {}
    for file in sorted((work / "rides" / "sql" / "summaries").glob("*.sql")):
        m = re.match(r"\s*CREATE\s+VIEW\s+(\w+)(?:\s*\([^)]*\))?\s+AS\s+(.*)", file.read_text(), re.I | re.S)
        out[m.group(1)] = con.sql(m.group(2)).fetchall()
    return out


def _norm(rows) -> list[tuple]:
    def one(v):
        if isinstance(v, (float, decimal.Decimal)):
            return round(float(v), 6)
        if isinstance(v, dt.datetime) and v.time() == dt.time():
            return v.date().isoformat()
        if isinstance(v, (dt.date, dt.datetime)):
            return v.isoformat()
        return v
    return sorted((tuple(one(v) for v in r) for r in rows), key=repr)


def test_the_getting_started_page_runs_as_written(tmp_path):
    env = {**os.environ, "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("NIGHTSHIFT_WAREHOUSE_URL", None)
    commands, last = [], None
    for kind, what, content in steps(PAGE.read_text()):
        if kind == "file":
            path = tmp_path / what
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
            continue
        commands.append(what)
        r = subprocess.run(["bash", "-c", what], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, f"$ {what}\nexit {r.returncode}\nstdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
        if "trips_by_weekday" in what:
            last = (what, r.stdout)
    assert commands and commands[0] == "nightshift init rides"

    expected = model_views(tmp_path, model_tables(tmp_path, commands))
    assert set(expected) == {"trips_by_weekday", "trips_by_month", "riders_by_fleet", "median_fare_by_zone"}
    served = duckdb.connect(str(tmp_path / "rides" / "warehouse.duckdb"), read_only=True)
    for view, rows in expected.items():
        assert _norm(served.sql(f"SELECT * FROM {view}").fetchall()) == _norm(rows), view

    assert last, "the page ends by querying trips_by_weekday"
    what, stdout = last
    printed = [[c.strip() for c in line.strip("│").split("│")] for line in stdout.splitlines()
               if line.startswith("│") and re.match(r"│\s*\d", line)]
    want = sorted(expected["trips_by_weekday"])
    assert [[float(c) for c in row] for row in printed] == [[float(v) for v in row] for row in want], stdout
