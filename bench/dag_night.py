"""A small night through the Airflow DAG: each Spark step a spark-submit of its own (cold) against the
same steps run in the task's process on a warm Spark Connect server ([spark] remote).

    .venv/bin/python -m bench.dag_night [--changes 300,1000] [--out bench/DAG_NIGHT.md]

For each size: the retail example with an initial load of about 1,000 pos rows per change of a night
(its nights hold about --changes change rows), the initial load applied with `nightshift run` (not
timed), then the project copied twice; one copy's first night runs through the DAG (`dag.test()` in a
subprocess, tests/dag_run_script.py) with spark-submit tasks, the other's with NIGHTSHIFT_SPARK_REMOTE
pointing at a Spark Connect server started for the run and warmed by the initial load of a third copy.
Every task of the night (choose_batch .. publish) is timed from the run's own task instances; the
window gate opens at once. Writes the report with the machine's load at the start. Run it on an idle
machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pendulum

from nightshift.example import init_project

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BIN = Path(sys.executable).parent


def _nightshift(*args: str, env: dict | None = None) -> None:
    subprocess.run([str(BIN / "nightshift"), *args], check=True, capture_output=True, text=True, env=env)


def _dag_night(work: Path, project: Path, batch: str, env_vars: dict) -> dict:
    env = dict(os.environ, AIRFLOW_HOME=str(work / "airflow"), AIRFLOW__CORE__DAGS_FOLDER=str(ROOT / "dags"),
               AIRFLOW__CORE__LOAD_EXAMPLES="False",
               AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": "local[2]"}),
               NIGHTSHIFT_PROJECTS=str(project), PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", PYTHONPATH=str(ROOT),
               **env_vars)
    work.mkdir(parents=True, exist_ok=True)
    spec, out = work / "spec.json", work / "result.json"
    spec.write_text(json.dumps({"runs": [{"label": "night", "no_logical_date": True, "conf": {"batch_id": batch}}]}))
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, str(ROOT / "tests" / "dag_run_script.py"), str(spec), str(out)],
                       env=env, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - t0
    if not out.is_file():
        raise RuntimeError(r.stdout[-3000:] + r.stderr[-3000:])
    run = json.loads(out.read_text())["runs"]["night"]
    if run["state"] != "success":
        raise RuntimeError(f"{project}: {run['state']}: {r.stderr[-3000:]}")
    tasks = {t: (pendulum.parse(ti["start"]), pendulum.parse(ti["end"])) for t, ti in run["tasks"].items()}
    seconds = {t: (e - s).total_seconds() for t, (s, e) in tasks.items()}
    night = (max(e for _, e in tasks.values()) - min(s for s, _ in tasks.values())).total_seconds()
    return {"tasks": seconds, "task_total": sum(seconds.values()), "night": night, "process": wall}


def _changes(project: Path, batch: str) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in (project / "lake" / "changes").glob(f"*/batch_id={batch}/*.parquet"))


def measure(size: int, work: Path) -> dict:
    base = work / f"base{size}"
    ids = init_project(base, "retail", rows=size * 1000, nights=1)
    _nightshift("run", "--project", str(base), "--batch", ids[0])
    copies = {k: work / f"{k}{size}" for k in ("cold", "warm", "warmup")}
    for c in copies.values():
        shutil.copytree(base, c)
    result = {"changes": _changes(base, ids[1]), "rows": size * 1000}
    result["cold"] = _dag_night(work / f"af_cold{size}", copies["cold"], ids[1], {"NIGHTSHIFT_SPARK_REMOTE": ""})
    connect = work / "connect"
    env = dict(os.environ, NIGHTSHIFT_SPARK_CONNECT_DIR=str(connect))
    out = subprocess.run([str(BIN / "nightshift"), "spark-connect", "start", "--port", "0"], check=True,
                         capture_output=True, text=True, env=env).stdout.strip().splitlines()[-1]
    try:
        remote = {"NIGHTSHIFT_SPARK_REMOTE": out, "NIGHTSHIFT_SPARK_CONNECT_DIR": str(connect)}
        _nightshift("run", "--project", str(copies["warmup"]), "--batch", ids[1], env={**os.environ, **remote})
        result["warm"] = _dag_night(work / f"af_warm{size}", copies["warm"], ids[1], remote)
    finally:
        subprocess.run([str(BIN / "nightshift"), "spark-connect", "stop"], capture_output=True, text=True, env=env)
    return result


def report(results: list[dict], load: tuple[float, float, float], command: str) -> str:
    lines = ["# A small night through the Airflow DAG: spark-submit per task vs a warm Spark Connect server", "",
             f"`{command}` on 2 cores; `uptime` load average at the start {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}. "
             "`dag.test()` of one night (choose_batch .. publish, the window gate open at once); cold: every Spark "
             "step a spark-submit (local[2]); warm: the same steps in the task's own process against a Spark Connect "
             "server (local[2]) started before and warmed by one night of another copy. Seconds from the run's task "
             "instances.", ""]
    for r in results:
        names = list(r["cold"]["tasks"])
        lines += [f"## {r['changes']:,} change rows (pos {r['rows']:,})", "", "| task | cold s | warm s |", "|---|---:|---:|"]
        lines += [f"| {t} | {r['cold']['tasks'][t]:.1f} | {r['warm']['tasks'].get(t, float('nan')):.1f} |" for t in names]
        lines += [f"| **all tasks** | **{r['cold']['task_total']:.1f}** | **{r['warm']['task_total']:.1f}** |",
                  f"| the night (first task's start to last task's end) | {r['cold']['night']:.1f} | {r['warm']['night']:.1f} |",
                  "", f"warm / cold task time: {r['warm']['task_total'] / r['cold']['task_total']:.2f}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.dag_night", description=__doc__.split("\n\n")[0])
    p.add_argument("--changes", default="300,1000", help="nights' sizes in change rows, comma-separated")
    p.add_argument("--out", default=str(HERE / "DAG_NIGHT.md"))
    args = p.parse_args(argv)
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="ns_bench_dag_") as tmp:
        results = []
        for size in (int(x) for x in args.changes.split(",")):
            r = measure(size, Path(tmp))
            results.append(r)
            print(f"{r['changes']} change rows: tasks cold {r['cold']['task_total']:.1f}s, warm {r['warm']['task_total']:.1f}s; "
                  f"night cold {r['cold']['night']:.1f}s, warm {r['warm']['night']:.1f}s", flush=True)
    command = "python -m bench.dag_night " + " ".join(argv if argv is not None else sys.argv[1:])
    Path(args.out).write_text(report(results, load, command.strip()) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
