"""A peer's regression suite as one summary layer: the nights of pg_ivm's views (tests/pg_ivm/: the 66 views of
sql/pg_ivm.sql and sql/create_immv.sql, the 30 of sql/outer_join.sql) on DuckDB.

    .venv/bin/python -m bench.pg_ivm_night [--rows 200] [--changes 10] [--nights 3] [--out bench/PG_IVM_NIGHT.md]

For each project: its tables and views copied from tests/pg_ivm/<project>/, an empty lake and a DuckDB
warehouse; an initial load of --rows rows per table, then --nights random nights of about --changes changed
rows per table (inserts, deletes, duplicates, NULLs; primary keys stay unique and ri2's foreign key holds), each
run through the whole cycle in one process (nightshift.cycle.Cycle, Spark local[2], warm after the initial
load). Per night: wall seconds of propagate, refresh, apply-base and the whole night; the modes the night's plan
chose (delta, auxiliary, nested, recompute); the base tables its recomputed views shared (read once for all of
them); the rows propagate read from the base tables (Spark's scan metrics, the manifest's rows_read). A warm-up
project runs first (not reported), so the JVM's start is in no number. Writes the report with the machine's load
at the start. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lattice.ir import Table
from lattice.passes.parse_schema import parse_schema
from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.render import view_mode
from spark_jobs.session import get_spark

HERE = Path(__file__).resolve().parent
PROJECTS = HERE.parent / "tests" / "pg_ivm"
SUITES = {"pg_ivm": "sql/pg_ivm.sql and sql/create_immv.sql", "outer_join": "sql/outer_join.sql"}
MODES = ("delta", "auxiliary", "nested", "recompute")


class Nights:
    """Random nights over the suite's tables (all columns INTEGER): values from a small domain so joins and
    groups collide, 15% NULLs; a PRIMARY KEY column gets a fresh key; ri2's key is one of ri1's."""

    def __init__(self, tables: tuple[Table, ...], rows: int, seed: int):
        self.tables, self.rows, self.r = tables, {t.name: [] for t in tables}, random.Random(seed)
        self.domain = max(5, rows // 10)
        self.next_key = 1

    def _value(self) -> int | None:
        return None if self.r.random() < 0.15 else self.r.randint(0, self.domain)

    def night(self, inserts: int, deletes: int) -> dict[str, list[tuple[str, tuple]]]:
        out: dict[str, list[tuple[str, tuple]]] = {}
        for t in reversed(self.tables):  # deletes first, a referenced key staying while a row references it
            referenced = {row[0] for c in self.tables for fk in c.foreign_keys if fk.ref_table == t.name
                          for row in self.rows[c.name]}
            pool = [row for row in self.rows[t.name] if not (t.primary_key and row[0] in referenced)]
            gone = self.r.sample(pool, min(len(pool), deletes))
            for row in gone:
                self.rows[t.name].remove(row)
            out[t.name] = [("delete", row) for row in gone]
        for t in self.tables:
            parents = [self.rows[fk.ref_table] for fk in t.foreign_keys]
            taken = {row[0] for row in self.rows[t.name]} if t.primary_key else set()
            free = sorted({p[0] for p in parents[0]} - taken) if parents and t.primary_key else None
            for _ in range(inserts):
                row = tuple(self._value() for _ in t.columns)
                if t.primary_key:
                    if free is not None:
                        if not free:
                            break
                        key = free.pop(self.r.randrange(len(free)))
                    else:
                        key, self.next_key = self.next_key, self.next_key + 1
                    row = (key,) + row[1:]
                elif self.rows[t.name] and self.r.random() < 0.1:
                    row = self.r.choice(self.rows[t.name])  # a duplicate
                self.rows[t.name].append(row)
                out[t.name].append(("insert", row))
        return out

    def write(self, root: Path, batch: str, changes: dict[str, list[tuple[str, tuple]]]) -> int:
        for t in self.tables:
            d = root / "lake" / "changes" / t.name / f"batch_id={batch}"
            d.mkdir(parents=True, exist_ok=True)
            rows = changes[t.name]
            data = {c.name: pa.array([row[i] for _, row in rows], pa.int32()) for i, c in enumerate(t.columns)}
            data["_op"] = pa.array([op for op, _ in rows], pa.string())
            pq.write_table(pa.table(data), d / "part-0.parquet")
        return sum(len(v) for v in changes.values())


def run_project(spark, project: str, work: Path, rows: int, changes: int, nights: int, say=lambda _: None) -> dict:
    root = work / project
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(PROJECTS / project, root)
    (root / "nightshift.toml").write_text('[lake]\npath = "lake"\n[warehouse]\nurl = "duckdb:///warehouse.duckdb"\n'
                                          '[spark]\nmaster = "local[2]"\n')
    cycle = Cycle(load_project(root), spark=spark, progress=lambda _: None)
    tables = parse_schema((root / "sql" / "schema.sql").read_text()).tables
    gen = Nights(tables, rows, seed=len(project))
    out = {"views": len(cycle.plan.views), "tables": len(tables), "nights": []}
    try:
        for n in range(nights + 1):
            batch = f"b{n:04d}"
            count = gen.write(root, batch, gen.night(rows, 0) if n == 0 else gen.night(changes // 2, changes - changes // 2))
            t0 = time.perf_counter()
            steps = {r.step: r.seconds for r in cycle.run(batch)}
            night_s = time.perf_counter() - t0
            manifest = cycle.lake.read_manifest(batch)
            tonight = {s.view: s.mode for s in manifest.night.views}
            modes = Counter(view_mode(cycle.plan, v.name, tonight.get(v.name)) for v in cycle.plan.views)
            base = [r for r in (manifest.rows_read or ()) if r.kind == "base"]
            out["nights"].append({
                "batch": batch, "first": n == 0, "changes": count, "propagate": steps.get("propagate", 0.0),
                "refresh": steps.get("refresh", 0.0), "apply-base": steps.get("apply-base", 0.0), "night": night_s,
                "modes": {m: modes.get(m, 0) for m in MODES},
                "shared": [s.table for s in manifest.night.shared],
                "base_rows": None if manifest.rows_read is None else sum(r.rows for r in base),
                "base_scans": None if manifest.rows_read is None else sum(r.scans for r in base),
            })
            say(f"{project} {batch}: {count} change rows, night {night_s:.1f}s (propagate {steps.get('propagate', 0):.1f}s)")
    finally:
        cycle.close()
    return out


def _modes(m: dict) -> str:
    return ", ".join(f"{m[k]} {k}" for k in MODES)


def report(results: dict, args, load: tuple[float, float, float], command: str) -> str:
    lines = ["# pg_ivm's regression views as one summary layer: a night on DuckDB", "",
             f"`{command}` on {os.cpu_count()} cores ({platform.processor() or platform.machine()}), Python "
             f"{platform.python_version()}; `uptime` load average at the start {load[0]:.2f} / {load[1]:.2f} / "
             f"{load[2]:.2f}. Each project starts empty: the initial load ({args.rows} rows per table) is night "
             f"b0000, then {args.nights} random nights of about {args.changes} changed rows per table. One process, "
             "Spark local[2] (warm: a warm-up project ran first), DuckDB warehouse. Seconds are wall time of each "
             "step (`nightshift.cycle.Cycle.run`); base rows read: what propagate's Parquet scans read from the "
             "base tables (Spark's scan metrics, the manifest's `rows_read`), with the number of scans; shared: the "
             "base tables the night's recomputed views read once for all of them.", ""]
    for project, r in results.items():
        first = r["nights"][0]
        lines += [f"## {project}: {r['views']} views over {r['tables']} tables ({SUITES[project]})", "",
                  f"Modes the plan chose on the initial load: {_modes(first['modes'])}; on the nights after it: "
                  f"{_modes(r['nights'][-1]['modes'])}.", "",
                  "| night | change rows | propagate s | refresh s | apply-base s | night s | base rows read (scans) | shared |",
                  "|---|---:|---:|---:|---:|---:|---:|---|"]
        for n in r["nights"]:
            read = "—" if n["base_rows"] is None else f"{n['base_rows']:,} ({n['base_scans']})"
            label = f"{n['batch']} (initial load)" if n["first"] else n["batch"]
            lines.append(f"| {label} | {n['changes']:,} | {n['propagate']:.1f} | {n['refresh']:.1f} | "
                         f"{n['apply-base']:.1f} | {n['night']:.1f} | {read} | {', '.join(n['shared']) or '—'} |")
        later = r["nights"][1:]
        if later:
            mean = {k: sum(n[k] for n in later) / len(later) for k in ("propagate", "refresh", "apply-base", "night")}
            lines.append(f"| **mean of the nights after the load** | | **{mean['propagate']:.1f}** | **{mean['refresh']:.1f}** "
                         f"| **{mean['apply-base']:.1f}** | **{mean['night']:.1f}** | | |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.pg_ivm_night", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=200, help="rows per table of the initial load")
    p.add_argument("--changes", type=int, default=10, help="changed rows per table of each night (half deletes)")
    p.add_argument("--nights", type=int, default=3, help="random nights after the initial load")
    p.add_argument("--projects", default="pg_ivm,outer_join", help="which ported files, comma-separated")
    p.add_argument("--out", default=str(HERE / "PG_IVM_NIGHT.md"))
    args = p.parse_args(argv)
    load = os.getloadavg()
    say = lambda m: print(m, flush=True)  # noqa: E731
    spark = get_spark("local[2]", "nightshift-bench-pg_ivm")
    with tempfile.TemporaryDirectory(prefix="ns_bench_pg_ivm_") as tmp:
        run_project(spark, "outer_join", Path(tmp) / "warm-up", 20, 4, 1)  # JVM and Spark warm before the first clock
        results = {}
        for project in args.projects.split(","):
            results[project] = run_project(spark, project, Path(tmp), args.rows, args.changes, args.nights, say)
    command = "python -m bench.pg_ivm_night " + " ".join(argv if argv is not None else sys.argv[1:])
    Path(args.out).write_text(report(results, args, load, command.strip()) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
