"""Where laying the fact table out by month starts to pay: the same nights on pos as one Delta table and laid out
by month of its date, at several sizes, no maps.

    .venv/bin/python -m bench.layout [--sizes 1000000,3000000,10000000,30000000] [--fraction 0.001]

Per size, two projects over the same rows (the retail example, Figure 1's four views kept `incremental`, never
traded for a recompute): `[lake] partition_by = { pos = false }` (one table) and `{ pos = "date" }` (by month),
and bench.no_scans's first three nights on each, one after the other: recent corrections (deletes and inserts
within the last 14 days), update-generating (over every date of the year) and insertion-generating (a new day),
each of --fraction of the rows. Both layouts run untimed on WARM_UP rows first. Reports each night's whole time (propagate + refresh + apply-base) for both
layouts, by month / one table, and DuckDB's recompute of every view on the one-table project's final state.
nightshift lays a fact table out by month by itself from runtime.layout.AUTO_ROWS rows on: this is the
measurement behind that threshold. Writes bench/LAYOUT.md with the load at the start: run it on an idle machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from bench.modes import run_line
from bench.no_scans import run
from nightshift.example import init_project
from runtime.layout import AUTO_ROWS

HERE = Path(__file__).resolve().parent
NIGHTS = ("recent", "uniform", "insertion")
LABEL = {"recent": "recent corrections", "uniform": "update-generating", "insertion": "insertion-generating"}
LAYOUTS = (("one table", "false"), ("by month", '"date"'))
WARM_UP = 300_000  # rows of the untimed runs of both layouts first (a first run after one small warm-up still pays
# for the JIT: 300,000 rows as one table took longer than 1,000,000 did after it)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.layout", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000000,3000000,10000000,30000000", help="pos rows before the nights, comma-separated")
    p.add_argument("--fraction", type=float, default=0.001, help="fact changes of a night, as a fraction of the rows")
    p.add_argument("--work", default=str(HERE / "out" / "layout"))
    p.add_argument("--out", default=str(HERE / "LAYOUT.md"))
    args = p.parse_args(argv)
    load = os.getloadavg()[0]
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    sizes = [int(s) for s in args.sizes.split(",")]
    for name, setting in LAYOUTS:  # JVM and Spark warm first, on both layouts' queries: the first run of a process
        run(work / f"warm-up-{setting.strip(chr(34))}", WARM_UP, args.fraction, "", _setup(setting), NIGHTS, ())
    results = {}
    for rows in sizes:
        for name, setting in LAYOUTS:
            results[rows, name] = run(work / f"{rows}-{name.replace(' ', '-')}", rows, args.fraction, "",
                                      _setup(setting), NIGHTS, ("duckdb",) if setting == "false" else ())
            shutil.rmtree(work / f"{rows}-{name.replace(' ', '-')}", ignore_errors=True)
    write_report(Path(args.out), load, sizes, args.fraction, results)
    print(f"wrote {args.out}")
    return 0


def _setup(setting: str):
    def setup(root: Path) -> None:
        init_project(root, None, 0)
        toml = root / "nightshift.toml"
        text = toml.read_text().replace('path = "lake"\n', f'path = "lake"\npartition_by = {{ pos = {setting} }}\n', 1)
        views = sorted(f.stem for f in (root / "sql" / "summaries").glob("*.sql"))
        toml.write_text(text + "\n[views]\n" + "".join(f'{v} = "incremental"\n' for v in views))
    return setup


def write_report(out: Path, load: float, sizes: list[int], fraction: float, r: dict) -> None:
    lines = ["# Laying the fact table out by month, by size (bench/layout.py)", "", run_line("layout", load), "",
             f"pos at each size, nights of {fraction:g} of it in fact changes; Figure 1's four views kept `incremental`, "
             f"no maps. Seconds of the whole night (propagate + refresh + apply-base), pos one Delta table against "
             f"laid out by month of its date. nightshift lays a fact table out by month by itself from "
             f"{AUTO_ROWS:,} rows on (runtime/layout.py).", "",
             "| pos rows | night | one table (s) | by month (s) | by month / one table | DuckDB recompute (s) |",
             "|---|---|---|---|---|---|"]
    for rows in sizes:
        one, month = r[rows, "one table"], r[rows, "by month"]
        for night in NIGHTS:
            a, b = (x[night]["propagate"] + x[night]["refresh"] + x[night]["apply"] for x in (one, month))
            lines.append(f"| {rows:,} | {LABEL[night]} | {a:.1f} | {b:.1f} | {b / a:.2f} | {one['duckdb']:.1f} |")
    lines += ["", "First load (s): " + "; ".join(
        f"{rows:,}: one table {r[rows, 'one table']['load']:.1f}, by month {r[rows, 'by month']['load']:.1f}"
        for rows in sizes) + ".", ""]
    out.write_text("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
