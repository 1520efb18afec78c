"""The per-night choice between delta and recompute, and the cost of a computed group key.

    .venv/bin/python -m bench.modes [--first-load 1000000] [--pos 10000000] [--fraction 0.001]

1. The demo's first load (the retail example, --first-load pos rows as one batch into an empty
   project) in `auto` mode (the plan chooses; it recomputes: the base is empty) and with every view
   `incremental` (summary-deltas merged into empty tables): which mode the plan chose, propagate and
   refresh of each.
2. A night of --fraction changes (update-generating: deletes and inserts over existing dates) on
   --pos rows, with Figure 1's four views, then with a month-keyed view
   (storeID, CAST(DATE_TRUNC('month', date) AS DATE)) added: propagate and the window (refresh) with
   and without it, and the parent the plan chose for the month view.

Writes bench/MODES.md with the machine's load at the start. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import time
from pathlib import Path

from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.example import RetailGenerator, batch_id, init_project, write_batch

HERE = Path(__file__).resolve().parent
MONTHLY = ("CREATE VIEW sM_sales AS SELECT storeID, CAST(DATE_TRUNC('month', date) AS DATE) AS month, "
           "COUNT(*) AS TotalCount, SUM(qty) AS TotalQuantity FROM pos "
           "GROUP BY storeID, CAST(DATE_TRUNC('month', date) AS DATE)\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.modes", description=__doc__.split("\n\n")[0])
    p.add_argument("--first-load", type=int, default=1_000_000, help="pos rows of the first load")
    p.add_argument("--pos", type=int, default=10_000_000, help="pos rows before the night of part 2")
    p.add_argument("--fraction", type=float, default=0.001, help="changes of that night, as a fraction of --pos")
    p.add_argument("--work", default=str(HERE / "out" / "modes"))
    p.add_argument("--out", default=str(HERE / "MODES.md"))
    args = p.parse_args(argv)
    load = os.getloadavg()[0]
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    first_load(work / "warm-up", 20_000, "auto")  # JVM and Spark warm before the first clock
    first = {mode: first_load(work / f"first-{mode}", args.first_load, mode) for mode in ("auto", "incremental")}
    night = {kind: month_night(work / f"night-{kind}", args.pos, args.fraction, kind == "with") for kind in ("without", "with")}
    write_report(Path(args.out), args, load, first, night)
    print(f"wrote {args.out}")
    return 0


def _project(root: Path, maintain: str | None = None, monthly: bool = False) -> None:
    init_project(root, None, 0)
    if monthly:
        (root / "sql" / "summaries" / "sM_sales.sql").write_text(MONTHLY)
    if maintain:
        views = [f.stem for f in (root / "sql" / "summaries").glob("*.sql")]
        toml = root / "nightshift.toml"
        toml.write_text(toml.read_text() + "\n[views]\n" + "".join(f'{v} = "{maintain}"\n' for v in views))


def first_load(root: Path, rows: int, mode: str) -> dict:
    _project(root, None if mode == "auto" else mode)
    batch = RetailGenerator(seed=42).write(root / "lake", rows, 0)[0]
    cycle = Cycle(load_project(root), progress=lambda m: print(m, flush=True))
    cycle.spark.range(1).count()  # session up before the clock starts
    propagate = cycle.propagate(batch)
    refresh = cycle.refresh(batch)
    cycle.apply_base(batch)
    modes = {s.view: s.mode for s in propagate.details.night.views}
    cycle.close()
    return {"propagate": propagate.seconds, "refresh": refresh.seconds, "modes": modes}


def update_night(root: Path, rows: int, fraction: float):
    """The project at `root` loaded with `rows` pos rows (the first night), then one update-generating
    night of `fraction` changes propagated and refreshed: (cycle, propagate result, refresh result)."""
    gen = RetailGenerator(seed=42)
    first = gen.write(root / "lake", rows, 0)[0]
    cycle = Cycle(load_project(root), progress=lambda m: print(m, flush=True))
    cycle.run(first)
    b = batch_id(gen.days + 1)
    write_batch(root / "lake", "pos", b, gen.update_generating(int(rows * fraction)))
    return cycle, cycle.propagate(b), cycle.refresh(b)


def run_line(module: str, load: float) -> str:
    """The report line naming the command that reran it, the machine and its load at the start."""
    import pyspark

    cmd = f"python -m bench.{module} " + " ".join(sys.argv[1:])
    return (f"Command: `.venv/bin/{cmd.strip()}` from the repository root. Machine: {platform.machine()}, "
            f"{os.cpu_count()} cores, Python {platform.python_version()}, Spark {pyspark.__version__} local[2], "
            f"DuckDB warehouse. Load average at the start: {load:.2f}.")


def month_night(root: Path, rows: int, fraction: float, monthly: bool) -> dict:
    _project(root, "incremental", monthly)  # the night's own cost, never traded for a recompute
    cycle, propagate, refresh = update_night(root, rows, fraction)
    night = propagate.details.night
    parent = night.node("sM_sales").parent if monthly else None
    rows_sd = {d.view: d.rows for d in propagate.details.deltas}
    cycle.close()
    shutil.rmtree(root / "lake" / "base", ignore_errors=True)  # the 10M-row base: no need to keep it
    return {"propagate": propagate.seconds, "refresh": refresh.seconds, "parent": parent, "sd_rows": rows_sd,
            "changes": night.info.rows}


def write_report(out: Path, args, load: float, first: dict, night: dict) -> None:
    a, i = first["auto"], first["incremental"]
    w, wo = night["with"], night["without"]
    chosen = sorted(set(a["modes"].values()))
    lines = [
        "# Delta or recompute per night, and a computed group key (bench/modes.py)",
        "",
        run_line("modes", load),
        "",
        f"## The first load ({args.first_load:,} pos rows into an empty project)",
        "",
        "| | propagate (s) | refresh (s) | total (s) | modes |",
        "|---|---|---|---|---|",
        f"| auto (the plan chooses) | {a['propagate']:.1f} | {a['refresh']:.2f} | {a['propagate'] + a['refresh']:.1f} | "
        f"{', '.join(chosen)} |",
        f"| every view `incremental` | {i['propagate']:.1f} | {i['refresh']:.2f} | {i['propagate'] + i['refresh']:.1f} | delta |",
        "",
        f"## A night of {w['changes']:,} changes (update-generating) on {args.pos:,} pos rows",
        "",
        "| views | propagate (s) | window: refresh (s) | sd rows |",
        "|---|---|---|---|",
        f"| Figure 1's four | {wo['propagate']:.1f} | {wo['refresh']:.2f} | {sum(wo['sd_rows'].values()):,} |",
        f"| + sM_sales (storeID, month) | {w['propagate']:.1f} | {w['refresh']:.2f} | {sum(w['sd_rows'].values()):,} "
        f"(sM_sales: {w['sd_rows'].get('sM_sales', 0):,}) |",
        "",
        f"The month view's summary-delta came from `{w['parent']}` (a month key is computed along the lattice edge "
        f"from a finer view's date).",
        "",
    ]
    out.write_text("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
