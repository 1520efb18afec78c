"""Snapshot capture at scale: the diff of a full `pos` extract with the lake's base, next to
propagate of the batch it writes.

    .venv/bin/python -m bench.capture [--pos 10000000] [--changes N] [--cores 2] [--rounds 1]

One base of --pos retail rows (nightshift/example.py: 100 stores, 1000 items, 365 days) is loaded
(apply-base) and materialized once. The night's extract is that base after --changes update-generating
changes (Section 6: half of them deletes of existing rows, half new rows over existing dates, stores and
items; default 0.1% of --pos), written whole as Parquet files of 500,000 rows, as a nightly table extract
would arrive. Each round, on a fresh copy of the project: `nightshift capture` of pos from the extract (the
snapshot diff in Spark: one shuffle of extract and base), then propagate, refresh and apply-base of the batch
it wrote; the served views are checked against DuckDB's recompute. Writes bench/CAPTURE.md (the command to
rerun it, the machine and its load) and capture.json in --work (default bench/out/capture/).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STEPS = ("capture", "propagate", "refresh", "apply_base")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.capture", description=__doc__.split("\n\n")[0])
    p.add_argument("--pos", type=int, default=10_000_000, help="pos rows of the base (default %(default)s)")
    p.add_argument("--changes", type=int, help="change rows of the night (default: 0.1%% of --pos)")
    p.add_argument("--cores", type=int, default=2, help="local[N] (default %(default)s)")
    p.add_argument("--rounds", type=int, default=1, help="measurements, each on a fresh copy (default %(default)s)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--work", default=str(HERE / "out" / "capture"), help="scratch folder (default %(default)s)")
    p.add_argument("--out", default=str(HERE / "CAPTURE.md"))
    args = p.parse_args(argv)
    changes = args.changes if args.changes is not None else max(2, args.pos // 1000)
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    t0 = time.perf_counter()
    raw = {"argv": sys.argv[1:] if argv is None else argv, "pos": args.pos, "changes": changes, "cores": args.cores,
           "load_start": _load(), "runs": []}
    extract = work / "extract"
    spark, batch, raw["setup"] = build(work / "base", extract, args.pos, changes, args.seed, args.cores)
    print(f"bench.capture: base of {args.pos} pos rows and its extract {extract} ready in {raw['setup']['seconds']:.0f}s", flush=True)
    for i in range(args.rounds):
        copy = work / f"run-{i}"
        shutil.copytree(work / "base", copy)
        result = measure(spark, copy, batch, extract)
        raw["runs"].append(result)
        print("bench.capture: " + "  ".join(f"{s} {result[s]:.1f}s" for s in STEPS) + f"  check: {result['problems'] or 'ok'}", flush=True)
        shutil.rmtree(copy)
    raw.update(seconds=time.perf_counter() - t0, load_end=_load())
    (work / "capture.json").write_text(json.dumps(raw, indent=1, default=str))
    Path(args.out).write_text(report(raw))
    print(f"bench.capture: wrote {args.out} in {raw['seconds']:.0f}s")
    return 0 if all(not r["problems"] for r in raw["runs"]) else 1


def build(root: Path, extract: Path, pos: int, changes: int, seed: int, cores: int):
    """The project at the base state (loaded with apply-base, materialized) and the night's extract; returns
    the Spark session (local[cores]), the night's batch id and what was built."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from nightshift.config import load_project
    from nightshift.cycle import Cycle
    from nightshift.example import SCHEMAS, RetailGenerator, batch_id, init_project
    from bench.measure import load_base

    t = time.perf_counter()
    init_project(root, None, 0)
    gen = RetailGenerator(seed=seed)
    first = gen.write(root / "lake", pos, 0)[0]
    cycle = Cycle(dataclasses.replace(load_project(root), spark_master=f"local[{cores}]"), progress=lambda _: None)
    load_base(cycle, first)
    cycle.materialize()
    night = gen.update_generating(changes)
    schema = pa.schema([f for f in SCHEMAS["pos"] if f.name != "_op"])
    extract.mkdir(parents=True)
    for i, chunk in enumerate(np.array_split(np.arange(len(gen.pos)), max(1, len(gen.pos) // 500_000))):
        table = pa.Table.from_pandas(gen.pos.iloc[chunk][schema.names], schema=schema, preserve_index=False)
        pq.write_table(table, extract / f"part-{i:05d}.parquet")
    cycle.close()  # the warehouse file is complete before the rounds copy it
    setup = {"seconds": time.perf_counter() - t, "extract_rows": len(gen.pos), "extract_files": len(list(extract.glob("*.parquet"))),
             "night_inserts": int((night["_op"] == "insert").sum()), "night_deletes": int((night["_op"] == "delete").sum())}
    return cycle.spark, batch_id(gen.days + 1), setup


def measure(spark, project_dir: Path, batch: str, extract: Path) -> dict:
    """One round on its own copy of the project, in the bench's Spark session."""
    from nightshift.capture import Source, capture
    from nightshift.config import load_project
    from nightshift.cycle import Cycle
    from nightshift.oracle import check_all

    project = load_project(project_dir)
    cycle = Cycle(project, spark=spark, progress=lambda _: None)
    t = time.perf_counter()
    captured = capture(project, batch, (Source("pos", "snapshot", str(extract)),), spark=spark)
    seconds = {"capture": time.perf_counter() - t}
    for step in ("propagate", "refresh", "apply_base"):
        r = getattr(cycle, step)(batch)
        assert not r.skipped, r.skipped
        seconds[step] = r.seconds
    (record,) = captured.records
    result = {**seconds, "inserted": record.inserted, "deleted": record.deleted,
              "problems": [str(m) for m in check_all(cycle.plan, cycle.lake, cycle.warehouse.read_view)]}
    cycle.close()
    return result


def _load() -> str:
    return " / ".join(f"{x:.1f}" for x in os.getloadavg()) + " (1/5/15 min)"


def report(raw: dict) -> str:
    import pyspark

    best = {s: min(r[s] for r in raw["runs"]) for s in STEPS}
    cmd = " ".join(["python -m bench.capture", *raw["argv"]]).strip()
    setup, first = raw["setup"], raw["runs"][0]
    lines = [
        "# Snapshot capture: the diff of a full extract vs propagate of the batch it writes",
        "",
        f"`.venv/bin/{cmd}` on {os.cpu_count()} cores (`local[{raw['cores']}]`), Python {platform.python_version()}, "
        f"Spark {pyspark.__version__}; load average {raw['load_start']} at the start, {raw['load_end']} at the end.",
        "",
        f"Base: {raw['pos']:,} `pos` rows (100 stores, 1000 items, 365 days), loaded and materialized once "
        f"({setup['seconds']:.0f}s with the extract). The night's extract: {setup['extract_rows']:,} rows in "
        f"{setup['extract_files']} Parquet files, the base after {raw['changes']:,} update-generating changes "
        f"({setup['night_deletes']:,} deleted rows, {setup['night_inserts']:,} new ones). capture wrote "
        f"{first['inserted']:,} inserts and {first['deleted']:,} deletes.",
        "",
        "Every run ended with every served view equal to DuckDB's recompute." if all(not r["problems"] for r in raw["runs"])
        else "Some runs did NOT match recomputation: see below.",
        "",
        "| run | capture s | propagate s | refresh s | apply-base s | capture / propagate |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for i, r in enumerate(raw["runs"], 1):
        lines.append(f"| {i} | " + " | ".join(f"{r[s]:.2f}" for s in STEPS) + f" | {r['capture'] / r['propagate']:.2f} |")
    lines += ["", f"Best of the runs: capture {best['capture']:.2f}s, propagate {best['propagate']:.2f}s "
              f"(capture / propagate {best['capture'] / best['propagate']:.2f})."]
    for r in raw["runs"]:
        for m in r["problems"]:
            lines.append(f"- MISMATCH: {m}")
    lines += ["", f"Total run time {raw['seconds']:.0f}s.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
