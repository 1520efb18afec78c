"""One night of bench.no_scans's by-month, maps project, timed on fresh copies of a saved project in one process:
for comparing the code on PYTHONPATH against other code on the same lake state, in turns, without the two-hour
run of bench.no_scans.

    .venv/bin/python -m bench.one_night save --pos 100000000 --project /tmp/nights100m
    .venv/bin/python -m bench.one_night time --project /tmp/nights100m --night update [--runs 3] [--duckdb]

`save` makes the project (bench.no_scans's layout: pos laid out by month, sCD_sales, sR_sales and SiC_sales kept over
maps), loads --pos rows, runs the recent-corrections night, and writes the update-generating and the
insertion-generating nights' batches (bench.no_scans's nights two and three) without running them.

`time` copies the saved project afresh for every run and times propagate, refresh and apply-base of one night
(`update`, or `insertion`: the update-generating night is run untimed before it), all runs in one process and one
Spark; the first run warms Spark and is not reported (bench.no_scans's nights run after its first load in the same
process). --duckdb: DuckDB's recompute of every view, timed in every timed run on the state its night starts from
(the night's own commits would leave deletion vectors that slow DuckDB's read of the next state), then the median
and each run's whole night against it; --progress: the timed runs' progress lines. Prints one line per run and
the machine's load at the start: run it on an idle machine, the two codes in turns, the other code from its own
checkout's folder (`cd <other checkout> && PYTHONPATH=$PWD /work/main/.venv/bin/python -m bench.one_night ...`):
`python -m` puts the folder it runs in first on Python's path, ahead of PYTHONPATH, so run from this repository's
root it would load this repository's code whatever PYTHONPATH names (it refuses to: the code it runs is printed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
from pathlib import Path

import spark_jobs
from bench.measure import duckdb_recompute
from bench.no_scans import project, recent
from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.example import RetailGenerator, batch_id, write_batch

NIGHTS = ("update", "insertion")
CODE = Path(spark_jobs.__file__).resolve().parent.parent  # the checkout whose nightshift this process runs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.one_night", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("save", help="make, load and save the project")
    s.add_argument("--pos", type=int, default=10_000_000, help="pos rows of the first load")
    s.add_argument("--project", required=True, help="the folder the saved project goes to (replaced)")
    t = sub.add_parser("time", help="time one night on fresh copies of the saved project")
    t.add_argument("--project", required=True, help="a folder `save` wrote")
    t.add_argument("--night", choices=NIGHTS, default="update")
    t.add_argument("--runs", type=int, default=3, help="timed runs (after one run that warms Spark)")
    t.add_argument("--duckdb", action="store_true", help="also time DuckDB's recompute of every view")
    t.add_argument("--progress", action="store_true", help="print the timed runs' progress lines")
    args = p.parse_args(argv)
    named = os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]
    if named and Path(named).resolve() != CODE:
        p.error(f"PYTHONPATH names {named}, but Python loads nightshift from {CODE} (python -m puts the folder it runs "
                f"in first): run it from {named}'s own folder")
    return save(Path(args.project), args.pos) if args.command == "save" else \
        time_night(Path(args.project), args.night, args.runs, args.duckdb, args.progress)


def save(root: Path, rows: int) -> int:
    shutil.rmtree(root, ignore_errors=True)
    project(root, "by_month")
    gen = RetailGenerator(seed=42)
    first = gen.write(root / "lake", rows, 0)[0]
    cycle = Cycle(load_project(root), progress=lambda m: print(m, flush=True))
    cycle.run(first)
    changes = int(rows * 0.001)
    night = batch_id(gen.days + 1)
    write_batch(root / "lake", "pos", night, recent(gen, changes))
    cycle.run(night)
    cycle.close()
    update, insertion = batch_id(gen.days + 2), batch_id(gen.days + 3)
    write_batch(root / "lake", "pos", update, gen.update_generating(changes))
    write_batch(root / "lake", "pos", insertion, gen.insertion_generating(gen.days + 3, changes))
    (root / "nights.txt").write_text(f"update {update}\ninsertion {insertion}\n")
    print(f"saved {root}: update-generating night {update}, insertion-generating night {insertion}")
    return 0


def time_night(saved: Path, night: str, runs: int, duckdb: bool, progress: bool = False) -> int:
    batches = dict(line.split() for line in (saved / "nights.txt").read_text().splitlines())
    before = [batches["update"]] if night == "insertion" else []
    print(f"load average at the start: {os.getloadavg()[0]:.2f}; code: {CODE}")
    copy = saved.with_name(saved.name + "-run")
    nights, recomputes = [], []
    for i in range(runs + 1):
        shutil.rmtree(copy, ignore_errors=True)
        subprocess.run(["cp", "-a", str(saved), str(copy)], check=True)
        cycle = Cycle(load_project(copy), progress=lambda m: None)
        for b in before:
            cycle.run(b)
        if duckdb and i:  # on the state the night starts from, before its commits
            recomputes.append(duckdb_recompute(cycle))
            print(f"run {i}: DuckDB's recompute of every view {recomputes[-1]:.2f} s", flush=True)
        if progress and i:
            cycle.progress = lambda m: print(m, flush=True)
        p = cycle.propagate(batches[night])
        r = cycle.refresh(batches[night])
        a = cycle.apply_base(batches[night])
        if i:
            nights.append(p.seconds + r.seconds + a.seconds)
            pos = p.details.read("base", "pos")
            print(f"run {i}: propagate {p.seconds:.2f} s, refresh {r.seconds:.2f} s, apply-base {a.seconds:.2f} s, "
                  f"whole night {nights[-1]:.2f} s; pos read: {pos.rows:,} rows in {pos.scans} scan(s), "
                  + ("bytes not known" if pos.bytes is None else f"{pos.bytes / 1e6:,.1f} MB"), flush=True)
        cycle.close()
    shutil.rmtree(copy, ignore_errors=True)
    if recomputes:
        median = statistics.median(recomputes)
        print(f"DuckDB's recompute of every view, median of {len(recomputes)}: {median:.2f} s; whole night / DuckDB "
              f"recompute ({night}): " + ", ".join(f"{n / median:.2f}" for n in nights) +
              f" (median {statistics.median(nights) / median:.2f})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
