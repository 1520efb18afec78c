"""Refresh optimizations (paper 001, 4.3) and pre-aggregation (4.1.3), each with vs without, side by side.

    .venv/bin/python -m bench.refresh_opts [--rows 1000000,10000000] [--changes 10000,100000] [--repeat 3] [--pg URL]

Builds the retail example (Figure 1's four views) at each --rows size of pos and, from that same base, one
alternative night per (kind, size): Section 6's insertion-generating changes (inserts for a new date,
existing stores and items) and update-generating changes (as many deletes of existing rows as
inserts over existing dates, stores and items). Each night is propagated with pre-aggregation on and
off (D-lattice off, so every summary-delta comes from the change set, where it applies), with the
weak-minimality MIN/MAX test on and off (update nights), and with the defaults (lattice on), whose
summary-deltas are then refreshed into DuckDB and PostgreSQL with the 4.3 optimizations on and off
(NIGHTSHIFT_REFRESH_OPT=0), --repeat times each. A refresh is timed as its whole transaction up to
the commit, then rolled back, so every run starts from the same summary tables. Writes bench/REFRESH.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

from bench.warehouse import _pg_exec
from warehouse.store import StagedDelta

HERE = Path(__file__).resolve().parent
PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
SCHEMA = "ns_bench_refresh_opts"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.refresh_opts", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", default="1000000,10000000", help="pos rows of each base (one section of the report each)")
    p.add_argument("--changes", default="10000,100000", help="change rows of each night")
    p.add_argument("--repeat", type=int, default=3, help="refreshes per variant (the median is reported)")
    p.add_argument("--pg", default=os.environ.get("NIGHTSHIFT_BENCH_PG_URL", PG_URL), help="PostgreSQL SQLAlchemy URL")
    p.add_argument("--out", default=str(HERE / "REFRESH.md"))
    args = p.parse_args(argv)
    sizes = [int(x) for x in args.changes.split(",")]
    t0, load_start = time.perf_counter(), os.getloadavg()
    sections = [one_base(args, int(pos), sizes) for pos in args.rows.split(",") if pos]
    write_report(Path(args.out), args, sections, (load_start, os.getloadavg(), time.perf_counter() - t0))
    print(f"wrote {args.out}")
    return 0


def one_base(args, pos: int, sizes: list[int]) -> tuple[int, list[dict], dict]:
    """(pos rows, one result per alternative night, summary table sizes) of one base size."""
    from nightshift.config import load_project
    from nightshift.cycle import Cycle
    from nightshift.example import RetailGenerator, init_project

    root = HERE / "out" / f"refresh-opts-{pos}"
    shutil.rmtree(root, ignore_errors=True)
    init_project(root, None, 0)
    gen = RetailGenerator(seed=42)
    first = gen.write(root / "lake", pos, 0)[0]
    log = lambda m: print(m, flush=True)  # noqa: E731
    duck = Cycle(load_project(root), progress=log)
    duck.run(first)
    _pg_exec(args.pg, f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE', f'CREATE SCHEMA "{SCHEMA}"')
    import dataclasses

    pg_project = dataclasses.replace(duck.project, warehouse_url=f"{args.pg}?options=-csearch_path%3D{SCHEMA}")
    pg = Cycle(pg_project, spark=duck.spark, progress=log)
    pg.materialize()
    warehouses = {"duckdb": duck, "postgresql": pg}

    rows = []
    for kind in ("insertion", "update"):
        for n in sizes:
            rows.append(run_night(root, duck, warehouses, gen, kind, n, args.repeat))
    sizes_now = {v.name: _rows(duck, v) for v in duck.plan.views}
    duck.close()
    pg.close()
    return pos, rows, sizes_now


def _rows(cycle, view) -> int:
    with cycle.warehouse.engine.connect() as c:
        return int(c.exec_driver_sql(f"SELECT COUNT(*) FROM {cycle.warehouse.dialect.table(view)}").scalar())


def run_night(root: Path, duck, warehouses: dict, gen, kind: str, n: int, repeat: int) -> dict:
    """One alternative night from the base after the first batch: land it, propagate it in every
    variant, refresh it in every variant, then remove it again (it is never applied)."""
    from nightshift.example import batch_id, write_batch

    batch = batch_id(gen.days + 1)
    saved = gen.pos
    frame = gen.insertion_generating(gen.days + 1, n) if kind == "insertion" else gen.update_generating(n)
    gen.pos = saved  # the alternative nights all start from the same base
    pos_dir = root / "lake" / "changes" / "pos" / f"batch_id={batch}"
    shutil.rmtree(pos_dir, ignore_errors=True)
    write_batch(root / "lake", "pos", batch, frame)
    out = {"kind": kind, "changes": len(frame), "propagate": {}, "refresh": {}}

    defaults = duck.options
    variants = {"lattice off, pre-aggregation off": {"lattice": False, "preaggregate": False},
                "lattice off, pre-aggregation on": {"lattice": False, "preaggregate": True}}
    if kind == "update":
        variants["lattice on, weak minimality off"] = {"weak_minimality": False}
    variants["lattice on (defaults)"] = {}  # last: refresh reads these summary-deltas
    for name, options in variants.items():
        duck.project = dataclasses.replace(duck.project, options=dataclasses.replace(defaults, **options))
        t = time.perf_counter()
        manifest = duck.propagate(batch).details
        seconds = time.perf_counter() - t
        out["propagate"][name] = {"seconds": seconds, "exact": _exact_groups(duck, batch, manifest),
                                  "preaggregated": {n.node: list(n.preaggregated_by) for n in manifest.night.nodes
                                                    if n.preaggregated_by}}
        print(f"[{kind} {n}] propagate ({name}): {seconds:.1f}s", flush=True)

    manifest = duck.lake.read_manifest(batch)
    deltas = {v.name: StagedDelta(duck.lake.delta_files(batch, manifest.delta(v.name).part), manifest.delta(v.name).prefix,
                                  manifest.night.view(v.name).mode, manifest.night.view(v.name).reason,
                                  manifest.delta(v.name).columns)
              for v in duck.plan.views}
    for backend, cycle in warehouses.items():
        for opt in ("off", "on"):
            cycle.set_options(refresh_optimize=opt == "on")
            hints = cycle.refresh_hints(manifest)
            runs = [_timed_refresh(cycle, batch, deltas, hints) for _ in range(repeat)]
            median = sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]
            median["all"] = [r["seconds"] for r in runs]
            out["refresh"][(backend, opt)] = median
            paths = ", ".join(f"{v}: {s['path']}" for v, s in median["views"].items())
            print(f"[{kind} {n}] refresh {backend} optimizations {opt}: {median['seconds']:.3f}s ({paths})", flush=True)
    shutil.rmtree(pos_dir)
    shutil.rmtree(duck.lake.delta_root(batch), ignore_errors=True)
    return out


class _Rollback(Exception):
    pass


def _timed_refresh(cycle, batch: str, deltas: dict, hints) -> dict:
    """The refresh transaction up to its commit (every summary table merged, the ledger row about to be
    written), then rolled back."""
    wh = cycle.warehouse
    captured = {}

    def probe(conn, b, kind, plan, position, stats):
        captured.update(stats)
        raise _Rollback

    wh._append_ledger = probe
    position = cycle.lake.state().last or ""
    t = time.perf_counter()
    try:
        wh.refresh(cycle.plan, batch, deltas, position, hints=hints)
    except _Rollback:
        pass
    finally:
        del wh._append_ledger
    seconds = time.perf_counter() - t
    views = {k: v for k, v in captured.items() if not k.startswith("_")}
    return {"seconds": seconds, "views": views}


def _exact_groups(cycle, batch: str, manifest) -> dict[str, int]:
    """Groups whose MIN/MAX propagate recomputed exactly (_ns_lost = 1), per view with MIN/MAX."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out = {}
    for v in cycle.plan.views:
        entry = manifest.delta(v.name)
        files = cycle.lake.delta_files(batch, entry.part)
        if v.has_min_max and files:
            t = pq.read_table(files, columns=[entry.prefix + "_ns_lost"])
            out[v.name] = int(pc.sum(t.column(0)).as_py() or 0)
    return out


def write_report(out: Path, args, sections: list[tuple[int, list[dict], dict]], run: tuple) -> None:
    import duckdb
    import psycopg

    cmd = "python -m bench.refresh_opts " + " ".join(sys.argv[1:])
    load = lambda a: " / ".join(f"{x:.1f}" for x in a)  # noqa: E731
    lines = [
        "# Refresh optimizations (paper 001, 4.3) and pre-aggregation (4.1.3), with vs without (bench/refresh_opts.py)",
        "",
        f"Command: `.venv/bin/{cmd.strip()}` (from the repository root; PostgreSQL at {args.pg.split('@')[-1]}). "
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, DuckDB "
        f"{duckdb.__version__}, psycopg {psycopg.__version__}; load average {load(run[0])} at the start, "
        f"{load(run[1])} at the end (1/5/15 min); whole run {run[2] / 60:.1f} min. Retail example (Figure 1's four "
        "views). Every night is an alternative to the others (same base, never applied). Refresh: median of "
        f"{args.repeat} runs of the whole transaction up to the commit (rolled back after each run).",
    ]
    for pos, rows, sizes in sections:
        lines += ["", f"# pos {pos:,} rows", "", "Summary tables: " + ", ".join(f"{v} {n:,} rows" for v, n in sizes.items()) + "."]
        lines += _section(rows)
    out.write_text("\n".join(lines) + "\n")


def _section(rows: list[dict]) -> list[str]:
    views = list(rows[0]["refresh"][("duckdb", "on")]["views"])
    lines = [
        "", "## Refresh (the batch window), optimizations off vs on", "",
        "| night | change rows | backend | refresh s, off | refresh s, on | on / off | path taken per view (on) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        for backend in ("duckdb", "postgresql"):
            off, on = r["refresh"][(backend, "off")], r["refresh"][(backend, "on")]
            paths = ", ".join(f"{v} {s['path']}" for v, s in on["views"].items())
            lines.append(f"| {r['kind']}-generating | {r['changes']:,} | {backend} | {off['seconds']:.3f} | "
                         f"{on['seconds']:.3f} | {on['seconds'] / off['seconds']:.2f} | {paths} |")
    lines += ["", "Per summary table (seconds inside the transaction, off / on):", "",
              "| night | change rows | backend | " + " | ".join(views) + " |", "|---|---|---|" + "---|" * len(views)]
    for r in rows:
        for backend in ("duckdb", "postgresql"):
            off, on = r["refresh"][(backend, "off")]["views"], r["refresh"][(backend, "on")]["views"]
            cells = " | ".join(f"{off[v]['seconds']:.3f} / {on[v]['seconds']:.3f} ({off[v]['delta_rows']:,} Δ rows)" for v in views)
            lines.append(f"| {r['kind']} | {r['changes']:,} | {backend} | {cells} |")
    ins = [r for r in rows if r["kind"] == "insertion"]
    upd = {r["changes"]: r for r in rows if r["kind"] == "update"}
    lines += ["", "Insertion-generating vs update-generating nights (the paper's Figure 10(c) vs 10(a): refresh about "
              "50% cheaper, i.e. a ratio near 0.5, on insertion-generating changes):", "",
              "| change rows | backend | insertion-generating refresh s (on) | update-generating refresh s (on) | ratio | same ratio, optimizations off |",
              "|---|---|---|---|---|---|"]
    for r in ins:
        u = upd.get(r["changes"])
        if u is None:
            continue
        for backend in ("duckdb", "postgresql"):
            a, b = r["refresh"][(backend, "on")]["seconds"], u["refresh"][(backend, "on")]["seconds"]
            a0, b0 = r["refresh"][(backend, "off")]["seconds"], u["refresh"][(backend, "off")]["seconds"]
            lines.append(f"| {r['changes']:,} | {backend} | {a:.3f} | {b:.3f} | {a / b:.2f} | {a0 / b0:.2f} |")
    lines += ["", "## Propagate (outside the window)", "",
              "| night | change rows | variant | propagate s | pre-aggregated (by) | exact MIN/MAX groups |", "|---|---|---|---|---|---|"]
    for r in rows:
        for name, p in r["propagate"].items():
            pre = "; ".join(f"{v} by {', '.join(c)}" for v, c in p["preaggregated"].items()) or "—"
            exact = ", ".join(f"{v} {n:,}" for v, n in p["exact"].items()) or "—"
            lines.append(f"| {r['kind']} | {r['changes']:,} | {name} | {p['seconds']:.1f} | {pre} | {exact} |")
    return lines


if __name__ == "__main__":
    sys.exit(main())
