"""Warehouse benchmark: the window (refresh of Figure 1's four summary tables) on DuckDB vs
PostgreSQL, and staging throughput of summary-deltas into PostgreSQL: COPY vs INSERT.

    .venv/bin/python -m bench.warehouse [--rows 1000000] [--deltas 10000,100000] [--pg URL]

Builds the retail example at --rows pos rows, lands one night per --deltas size (change rows), and
runs the same batches through the whole cycle twice: once on a DuckDB file, once on a fresh
PostgreSQL schema. Then stages the largest night's SID_sales summary-delta into PostgreSQL with
COPY (Arrow writes CSV, psycopg streams it) and with the rejected alternative, a batched
`executemany` INSERT (psycopg 3 pipelines it). Writes bench/WAREHOUSE.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.warehouse", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--deltas", default="10000,100000", help="change rows of each night")
    p.add_argument("--pg", default=os.environ.get("NIGHTSHIFT_BENCH_PG_URL", PG_URL), help="PostgreSQL SQLAlchemy URL")
    p.add_argument("--out", default=str(HERE / "WAREHOUSE.md"))
    args = p.parse_args(argv)
    sizes = [int(x) for x in args.deltas.split(",")]

    from nightshift.example import RetailGenerator, batch_id, init_project, write_batch

    src = HERE / "out" / f"wh-{args.rows}"
    shutil.rmtree(src, ignore_errors=True)
    init_project(src, None, 0)
    gen = RetailGenerator(seed=42)
    batches = [gen.write(src / "lake", args.rows, 0)[0]]
    for night, n in enumerate(sizes, 1):
        batches.append(batch_id(gen.days + night))
        for table, frame in gen.night(night, n).items():
            write_batch(src / "lake", table, batches[-1], frame)

    schema = "ns_bench_warehouse"
    _pg_exec(args.pg, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE', f'CREATE SCHEMA "{schema}"')
    urls = {"duckdb": None, "postgresql": f"{args.pg}?options=-csearch_path%3D{schema}"}
    results = {name: run_backend(src, name, url, batches) for name, url in urls.items()}
    staging = staging_throughput(src.parent / f"{src.name}-postgresql", urls["postgresql"], batches[-1])
    write_report(Path(args.out), args, sizes, batches, results, staging)
    print(f"wrote {args.out}")
    return 0


def run_backend(src: Path, name: str, url: str | None, batches: list[str]) -> list[dict]:
    from nightshift.config import load_project
    from nightshift.cycle import Cycle

    work = src.parent / f"{src.name}-{name}"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(src, work)
    if url:
        toml = work / "nightshift.toml"
        text = toml.read_text()
        start = text.index("url = ")
        end = text.index("\n", start)
        toml.write_text(text[:start] + f'url = "{url}"' + text[end:])
    cycle = Cycle(load_project(work), progress=lambda m: print(f"[{name}] {m}", flush=True))
    out = []
    for b in batches:
        steps = {r.step: r for r in cycle.run(b)}
        stats = steps["refresh"].details
        out.append({
            "batch": b,
            "refresh": steps["refresh"].seconds,
            "views": {v: (s["delta_rows"], s["seconds"]) for v, s in stats.items() if not v.startswith("_")},
            "sizes": {v.name: len(cycle.warehouse.read_view(v)) for v in cycle.plan.views},
        })
        print(f"[{name}] {b}: refresh {out[-1]['refresh']:.3f}s", flush=True)
    cycle.close()
    return out


def staging_throughput(work: Path, url: str, batch: str) -> dict:
    """Rows/s staging the SID_sales summary-delta of `batch`: COPY vs executemany INSERT."""
    import pyarrow.parquet as pq
    import sqlalchemy as sa

    from lattice.sql import ident as q
    from nightshift.config import load_project
    from runtime.lake import Lake
    from lattice.refresh import delta_columns
    from warehouse.dialects import PostgresDialect, copy_parquet

    project = load_project(work)
    lake = Lake(project.lake)
    view = project.plan.view("SID_sales")
    entry = lake.read_manifest(batch).delta(view.name)
    files = lake.delta_files(batch, entry.part)
    d = PostgresDialect()
    columns = d.staging(view, delta_columns(view), entry.prefix)
    ddl = "CREATE TEMP TABLE s (" + ", ".join(f"{q(dst)} {d.column_type(t)}" for _, dst, t in columns) + ")"
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    out = {}
    with engine.begin() as conn:
        conn.exec_driver_sql(ddl)
        t = time.perf_counter()
        rows = copy_parquet(conn, "s", files, columns, PostgresDialect.COPY_BATCH_ROWS)
        out["copy"] = (rows, time.perf_counter() - t)
        conn.exec_driver_sql("TRUNCATE s")
        t = time.perf_counter()
        data = [tuple(r.values()) for f in files for r in pq.read_table(f, columns=[c[0] for c in columns]).to_pylist()]
        raw = conn.connection.dbapi_connection
        with raw.cursor() as cur:
            cur.executemany(f"INSERT INTO s VALUES ({', '.join(['%s'] * len(columns))})", data)
        out["insert"] = (len(data), time.perf_counter() - t)
    engine.dispose()
    return out


def _pg_exec(url: str, *statements: str, autocommit: bool = False) -> None:
    """Run `statements` in one transaction (`autocommit`: each on its own, as VACUUM needs)."""
    import sqlalchemy as sa

    engine = sa.create_engine(url, poolclass=sa.pool.NullPool, **({"isolation_level": "AUTOCOMMIT"} if autocommit else {}))
    with engine.begin() as conn:
        for s in statements:
            conn.exec_driver_sql(s)
    engine.dispose()


def write_report(out: Path, args, sizes, batches, results, staging) -> None:
    import duckdb
    import psycopg

    cmd = "python -m bench.warehouse " + " ".join(sys.argv[1:])
    lines = [
        "# Refresh (the batch window) on DuckDB vs PostgreSQL; staging summary-deltas (bench/warehouse.py)",
        "",
        f"Command: `.venv/bin/{cmd.strip()}` (from the repository root; PostgreSQL at {args.pg.split('@')[-1]}). "
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, DuckDB "
        f"{duckdb.__version__}, psycopg {psycopg.__version__}. Retail example (paper 001, Figure 1's four views), "
        f"{args.rows:,} pos rows loaded by the first batch; then one night per change size.",
        "",
        "| night | change rows | backend | refresh s (all four tables + ledger, one transaction) | "
        + " | ".join(f"{v} Δ rows / s" for v in results["duckdb"][0]["views"]) + " |",
        "|---|---|---|---|" + "---|" * len(results["duckdb"][0]["views"]),
    ]
    for i, b in enumerate(batches[1:], 1):
        for name, rows in results.items():
            r = rows[i]
            cells = " | ".join(f"{n:,} / {s:.3f}" for n, s in r["views"].values())
            lines.append(f"| {b} | {sizes[i - 1]:,} | {name} | {r['refresh']:.3f} | {cells} |")
    sizes_line = ", ".join(f"{v} {n:,}" for v, n in results["postgresql"][-1]["sizes"].items())
    lines += ["", f"Summary table rows after the last night: {sizes_line}.", ""]
    lines += ["| staging into PostgreSQL (SID_sales summary-delta of the last night) | rows | seconds | rows/s |", "|---|---|---|---|"]
    for name, label in (("copy", "COPY FROM STDIN, CSV written by Arrow (used)"), ("insert", "executemany INSERT, pipelined (rejected)")):
        n, s = staging[name]
        lines.append(f"| {label} | {n:,} | {s:.3f} | {n / s:,.0f} |")
    lines += [
        "",
        "Refresh on PostgreSQL is one INSERT … ON CONFLICT DO UPDATE per table through a NULL-safe unique index",
        "(an index probe per summary-delta row) plus a DELETE of emptied groups through a partial index; on DuckDB",
        "it classifies the delta against the summary table with a join (DuckDB scans the target).",
    ]
    out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
