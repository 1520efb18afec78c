"""What replacing a changed group's row (a delete by row id and an append, as refresh does on DuckDB) costs a
summary table over many nights, against updating it in place: row groups and the warehouse file's size.

    .venv/bin/python -m bench.replace_growth [--rows 3000000] [--share 0.003] [--nights 300] [--every 50]

One DuckDB file per way, a table shaped as a summary table (two group keys, a count and a sum) of --rows groups;
each night changes --share of its groups, sampled over the whole table (an update-generating night touches every
date), inside one transaction, and every --every nights the file is closed (DuckDB checkpoints) and measured.
Rows stay --rows throughout. Writes bench/REPLACE_GROWTH.md with the load at the start.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent


def _measure(path: Path) -> tuple[int, int, int]:
    con = duckdb.connect(str(path))
    try:
        groups = con.execute("SELECT COUNT(DISTINCT row_group_id) FROM pragma_storage_info('t')").fetchone()[0]
        rows = con.execute("SELECT COUNT(*) FROM t").fetchone()[0]
    finally:
        con.close()
    return groups, rows, path.stat().st_size


def _nights(path: Path, way: str, rows: int, share: float, nights: int, every: int) -> list[tuple]:
    con = duckdb.connect(str(path))
    con.execute(f"CREATE TABLE t AS SELECT (i % 1000)::INTEGER AS a, (i // 1000)::INTEGER AS b, 1::BIGINT AS n, "
                f"i::BIGINT AS s FROM range({rows}) AS r(i)")
    con.close()
    out = [(0, *_measure(path), 0.0)]
    con, seconds = duckdb.connect(str(path)), 0.0
    for night in range(1, nights + 1):
        t0 = time.perf_counter()
        con.execute("BEGIN")
        con.execute(f"CREATE OR REPLACE TEMP TABLE d AS SELECT a, b FROM t USING SAMPLE {int(rows * share)} ROWS "
                    f"(reservoir, {night})")
        if way == "replace":
            con.execute("CREATE OR REPLACE TEMP TABLE c AS SELECT t.rowid AS r, t.a, t.b, t.n + 1 AS n, t.s + 1 AS s "
                        "FROM d JOIN t USING (a, b)")
            con.execute("DELETE FROM t WHERE rowid IN (SELECT r FROM c)")
            con.execute("INSERT INTO t SELECT a, b, n, s FROM c")
        else:
            con.execute("UPDATE t SET n = t.n + 1, s = t.s + 1 FROM d WHERE t.a = d.a AND t.b = d.b")
        con.execute("COMMIT")
        seconds += time.perf_counter() - t0
        if night % every == 0:
            con.close()
            out.append((night, *_measure(path), seconds))
            con, seconds = duckdb.connect(str(path)), 0.0
    con.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.replace_growth", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=3_000_000)
    p.add_argument("--share", type=float, default=0.003, help="groups changed a night, as a share of --rows")
    p.add_argument("--nights", type=int, default=300)
    p.add_argument("--every", type=int, default=50, help="measure every this many nights")
    p.add_argument("--work", default="/tmp/ns-bench-replace-growth")
    p.add_argument("--out", default=str(HERE / "REPLACE_GROWTH.md"))
    a = p.parse_args(argv)
    load = os.getloadavg()[0]
    work = Path(a.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    runs = {way: _nights(work / f"{way}.duckdb", way, a.rows, a.share, a.nights, a.every) for way in ("update", "replace")}
    lines = [
        "# A summary table over many nights: rows replaced (refresh on DuckDB) against updated in place "
        "(bench/replace_growth.py)", "",
        f"Command: `.venv/bin/python -m bench.replace_growth --rows {a.rows} --share {a.share} --nights {a.nights} "
        f"--every {a.every}` from the repository root. DuckDB {duckdb.__version__}. Load average at the start: "
        f"{load:.2f}.", "",
        f"{a.rows:,} groups; each night changes {int(a.rows * a.share):,} of them sampled over the whole table, in "
        "one transaction; the file is closed (checkpointed) and measured every "
        f"{a.every} nights. Seconds: the nights' transactions since the last measurement, commits included.", "",
        "| nights | row groups, in place | row groups, replaced | file MB, in place | file MB, replaced "
        "| seconds, in place | seconds, replaced |",
        "|---|---|---|---|---|---|---|",
    ]
    for u, r in zip(runs["update"], runs["replace"]):
        assert u[2] == r[2] == a.rows, (u, r)
        lines.append(f"| {u[0]} | {u[1]} | {r[1]} | {u[3] / 2**20:.1f} | {r[3] / 2**20:.1f} | {u[4]:.2f} | {r[4]:.2f} |")
    last_u, last_r = runs["update"][-1], runs["replace"][-1]
    lines += ["", f"After {last_u[0]} nights: {last_r[1]} row groups replaced against {last_u[1]} in place (DuckDB "
              "merges row groups that deletes thinned, so the deleted rows it still keeps stay bounded); the file "
              f"{last_r[3] / last_u[3]:.1f}x the size; the nights' transactions "
              f"{sum(r[4] for r in runs['replace']) / max(sum(u[4] for u in runs['update']), 1e-9):.2f}x the time."]
    Path(a.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
