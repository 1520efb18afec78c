"""propagate and apply-base on local[N] vs a Spark standalone cluster with the same cores.

    .venv/bin/python -m bench.cluster [--pos 10000000] [--changes 10000] [--cores 2] [--rounds 1]

One base of --pos retail rows (nightshift/example.py: 100 stores, 1000 items, 365 days) is loaded and
materialized once with local[N]; one night of --changes mixed changes (new and late sales, deletes,
corrections, a new store, new items, an item changing category) is landed. Each measurement runs that
night on its own copy of the project, in a process of its own, with the project's master set to
local[N] or to spark://127.0.0.1:<port> of a cluster started here by bin/spark-cluster (one worker with
N cores): session start (up to the first finished job, so executors are registered), propagate, refresh
and apply-base, then the served views are checked against DuckDB's recompute. Rounds alternate the
order (local, cluster, cluster, local, ...) so a drifting load on a shared machine hits both alike.
Writes bench/CLUSTER.md and bench/out/cluster.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
STEPS = ("session", "propagate", "refresh", "apply_base")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.cluster", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pos", type=int, default=10_000_000, help="pos rows of the base (default %(default)s)")
    p.add_argument("--changes", type=int, default=10_000, help="change rows of the night (default %(default)s: 0.1%% of 10M)")
    p.add_argument("--cores", type=int, default=2, help="local[N] and the worker's cores (default %(default)s)")
    p.add_argument("--executor-memory", default="3g", help="the cluster executor's memory (default %(default)s)")
    p.add_argument("--rounds", type=int, default=1, help="measurements per master (default %(default)s)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--work", default=str(HERE / "out" / "cluster"), help="scratch folder (default %(default)s)")
    p.add_argument("--out", default=str(HERE / "CLUSTER.md"))
    p.add_argument("--build", nargs=5, metavar=("ROOT", "POS", "CHANGES", "SEED", "CORES"), help=argparse.SUPPRESS)
    p.add_argument("--measure", nargs=4, metavar=("PROJECT", "MASTER", "BATCH", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.measure:
        return measure(*args.measure)
    if args.build:
        print(_build(args.build[0], *map(int, args.build[1:])))
        return 0
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    t0 = time.perf_counter()
    raw = {"argv": sys.argv[1:] if argv is None else argv, "pos": args.pos, "changes": args.changes, "cores": args.cores,
           "executor_memory": args.executor_memory, "load_start": _load(), "runs": []}
    base, batch, raw["setup_seconds"] = build(work / "base", args.pos, args.changes, args.seed, args.cores)
    print(f"bench.cluster: base of {args.pos} pos rows and night {batch} ready in {raw['setup_seconds']:.0f}s", flush=True)
    folder = work / "spark-cluster"
    state = start_cluster(folder, args.cores, args.executor_memory)
    try:
        masters = {"local": f"local[{args.cores}]", "cluster": state["master"]}
        order = [m for r in range(args.rounds) for m in (("local", "cluster") if r % 2 == 0 else ("cluster", "local"))]
        for i, mode in enumerate(order):
            copy = work / f"{mode}-{i}"
            shutil.copytree(base, copy)
            result = run_child(copy, masters[mode], batch, work / f"{mode}-{i}.json", args.executor_memory)
            raw["runs"].append({"mode": mode, **result})
            print(f"bench.cluster: {mode:<7} " + "  ".join(f"{s} {result[s]:.1f}s" for s in STEPS) +
                  f"  check: {result['problems'] or 'ok'}", flush=True)
            shutil.rmtree(copy)
    finally:
        stop_cluster(folder)
    raw.update(seconds=time.perf_counter() - t0, load_end=_load())
    (HERE / "out").mkdir(exist_ok=True)
    (HERE / "out" / "cluster.json").write_text(json.dumps(raw, indent=1))
    Path(args.out).write_text(report(raw))
    print(f"bench.cluster: wrote {args.out} in {raw['seconds']:.0f}s")
    return 0 if all(not r["problems"] for r in raw["runs"]) else 1


# ---------------------------------------------------------------- set-up (once, local[N])


def build(root: Path, pos: int, changes: int, seed: int, cores: int) -> tuple[Path, str, float]:
    """The project at the base state (loaded and materialized) with one night landed; returns its batch id."""
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "bench.cluster", "--build", str(root), str(pos), str(changes), str(seed),
                        str(cores)], cwd=REPO, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"bench.cluster: set-up failed:\n{r.stderr[-4000:]}")
    return root, r.stdout.split()[-1], time.perf_counter() - t


def _build(root: str, pos: int, changes: int, seed: int, cores: int) -> str:
    """In a process of its own (its local SparkContext must not outlive the set-up)."""
    from nightshift.config import load_project
    from nightshift.cycle import Cycle
    from nightshift.example import RetailGenerator, batch_id, init_project, write_batch
    from bench.measure import load_base

    root = Path(root)
    init_project(root, None, 0)
    gen = RetailGenerator(seed=seed)
    first = gen.write(root / "lake", pos, 0)[0]
    project = dataclasses.replace(load_project(root), spark_master=f"local[{cores}]")
    cycle = Cycle(project, progress=lambda _: None)
    load_base(cycle, first)  # the initial load: base, then materialize
    cycle.materialize()
    night = batch_id(gen.days + 1)
    for table, frame in gen.night(1, changes).items():
        write_batch(root / "lake", table, night, frame)
    cycle.spark.stop()
    cycle.close()
    return night


# ---------------------------------------------------------------- one measurement (a process of its own)


def run_child(project: Path, master: str, batch: str, out: Path, executor_memory: str) -> dict:
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    if master.startswith("spark://"):
        extra = f"spark.executor.memory={executor_memory}"
        env["NIGHTSHIFT_SPARK_CONF"] = ";".join(filter(None, [env.get("NIGHTSHIFT_SPARK_CONF"), extra]))
    r = subprocess.run([sys.executable, "-m", "bench.cluster", "--measure", str(project), master, batch, str(out)],
                       cwd=REPO, env=env, capture_output=True, text=True)
    if r.returncode or not out.is_file():
        raise SystemExit(f"bench.cluster: the {master} run failed:\n{r.stderr[-4000:]}")
    return json.loads(out.read_text())


def measure(project_dir: str, master: str, batch: str, out: str) -> int:
    from nightshift.config import load_project
    from nightshift.cycle import Cycle
    from nightshift.oracle import check_all

    project = dataclasses.replace(load_project(project_dir), spark_master=master)
    cycle = Cycle(project, progress=lambda _: None)
    t = time.perf_counter()
    cycle.spark.range(1).count()  # session up and (on the cluster) an executor registered
    seconds = {"session": time.perf_counter() - t}
    for step in ("propagate", "refresh", "apply_base"):
        r = getattr(cycle, step)(batch)
        assert not r.skipped, r.skipped
        seconds[step] = r.seconds
    sc = cycle.spark.sparkContext
    result = {**seconds, "master": sc.master, "app_id": sc.applicationId,
              "change_rows": cycle.lake.read_manifest(batch).night.info.rows,
              "problems": [str(m) for m in check_all(cycle.plan, cycle.lake, cycle.warehouse.read_view)]}
    cycle.spark.stop()
    cycle.close()
    Path(out).write_text(json.dumps(result))
    return 0


# ---------------------------------------------------------------- the cluster


def start_cluster(folder: Path, cores: int, executor_memory: str) -> dict:
    r = subprocess.run([sys.executable, str(REPO / "bin" / "spark-cluster"), "start", "--dir", str(folder), "--port", "0",
                        "--webui-port", "0", "--workers", "1", "--cores", str(cores), "--memory", executor_memory],
                       capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"bench.cluster: bin/spark-cluster start failed:\n{r.stderr}")
    return json.loads((folder / "cluster.json").read_text())


def stop_cluster(folder: Path) -> None:
    subprocess.run([sys.executable, str(REPO / "bin" / "spark-cluster"), "stop", "--dir", str(folder)], capture_output=True)


# ---------------------------------------------------------------- report


def _load() -> str:
    return " / ".join(f"{x:.1f}" for x in os.getloadavg()) + " (1/5/15 min)"


def report(raw: dict) -> str:
    import pyspark

    by = {m: [r for r in raw["runs"] if r["mode"] == m] for m in ("local", "cluster")}
    best = {m: {s: min(r[s] for r in runs) for s in STEPS} for m, runs in by.items() if runs}
    cmd = " ".join(["python -m bench.cluster", *raw["argv"]]).strip()
    lines = [
        "# propagate and apply-base: local vs a Spark standalone cluster",
        "",
        f"`.venv/bin/{cmd}` on {os.cpu_count()} cores, Python {platform.python_version()}, Spark {pyspark.__version__}; "
        f"load average {raw['load_start']} at the start, {raw['load_end']} at the end.",
        "",
        f"Base: {raw['pos']:,} `pos` rows (100 stores, 1000 items, 365 days), loaded and materialized once with "
        f"local[{raw['cores']}] in {raw['setup_seconds']:.0f}s. One night of {raw['runs'][0]['change_rows']:,} change rows "
        f"(asked: {raw['changes']:,}; new and late sales, deletes, corrections, a new store, new items, an item changing "
        "category), each measurement on its own copy of the project in a process of its own. "
        f"local = `local[{raw['cores']}]` (driver and tasks in one JVM); cluster = `spark://127.0.0.1:<port>` from "
        f"`bin/spark-cluster` (master + one worker with {raw['cores']} cores; executor memory {raw['executor_memory']}; "
        "driver in client mode on the same machine). Session = SparkSession start up to the first finished job "
        "(on the cluster: an executor registered).",
        "",
        "Every run ended with every served view equal to DuckDB's recompute." if all(not r["problems"] for r in raw["runs"])
        else "Some runs did NOT match recomputation: see below.",
        "",
        "| run | master | session s | propagate s | refresh s | apply-base s |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for i, r in enumerate(raw["runs"], 1):
        lines.append(f"| {i} | {r['mode']} (`{r['master']}`) | " + " | ".join(f"{r[s]:.1f}" for s in STEPS) + " |")
    if len(best) == 2:
        ratio = {s: best["cluster"][s] / best["local"][s] for s in STEPS}
        lines += ["", "Cluster / local (best of the runs per master): " +
                  ", ".join(f"{s.replace('_', '-')} {ratio[s]:.2f}x" for s in STEPS) + "."]
        lines.append(f"Overhead of the cluster: propagate {best['cluster']['propagate'] - best['local']['propagate']:+.1f}s, "
                     f"apply-base {best['cluster']['apply_base'] - best['local']['apply_base']:+.1f}s, session start "
                     f"{best['cluster']['session'] - best['local']['session']:+.1f}s.")
    for r in raw["runs"]:
        for m in r["problems"]:
            lines.append(f"- MISMATCH ({r['mode']}): {m}")
    lines += ["", f"Total run time {raw['seconds']:.0f}s.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
