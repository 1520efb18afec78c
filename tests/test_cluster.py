"""The whole cycle on a real Spark standalone cluster: bin/spark-cluster starts a master and a worker
from the venv's pyspark on free 127.0.0.1 ports; the differential nights run on spark://127.0.0.1:PORT with the
master taken from the project's [spark] master, and the Airflow DAG submits to it through `spark_default`.
The cluster is stopped at the end of the session, also after a failure, and nothing it started may outlive it.
Skipped only when Java is missing and CI is unset; under CI=true a missing Java fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bin" / "spark-cluster"
NIGHTS = 2  # the first batch (initial load) plus two random nights


def cluster(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout)


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def _group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group `pgid`."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    """cluster.json of a running standalone cluster: master spark://127.0.0.1:<free port>, one worker with
    2 cores and 1g for executors; its logs, executor work dirs and PIDs in a temporary folder."""
    if _java() is None:
        message = "Java is missing: a Spark standalone cluster needs Java 17 (apt-get install openjdk-17-jre-headless)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    folder = tmp_path_factory.mktemp("spark-cluster")
    pids: list[int] = []
    try:
        r = cluster("start", "--dir", str(folder), "--port", "0", "--webui-port", "0", "--workers", "1",
                    "--cores", "2", "--memory", "1g")
        if (folder / "cluster.json").is_file():
            pids = [p["pid"] for p in json.loads((folder / "cluster.json").read_text())["processes"]]
        assert r.returncode == 0, r.stdout + r.stderr
        yield json.loads((folder / "cluster.json").read_text())
    finally:
        stop = cluster("stop", "--dir", str(folder))
        left = {pid: _group_members(pid) for pid in pids if _group_members(pid)}
        assert stop.returncode == 0 and not left, (stop.stdout, stop.stderr, left)
        assert not (folder / "cluster.json").exists()


def applications(state: dict) -> dict[str, dict]:
    """The master's application list (active and completed) from its JSON status page, by application id."""
    with urllib.request.urlopen(f"{state['webui']}/json/", timeout=10) as r:
        info = json.loads(r.read())
    return {a["id"]: a for a in info.get("activeapps", []) + info.get("completedapps", [])}


def executor_logs(state: dict, app_id: str) -> str:
    """stderr of every executor the worker ran for the application."""
    files = sorted(Path(state["dir"], "work").glob(f"worker-*/{app_id}/*/stderr"))
    return "\n".join(f.read_text(errors="replace") for f in files)


def test_cluster_script_status_and_no_second_start(spark_cluster):
    r = cluster("status", "--dir", spark_cluster["dir"], "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    status = json.loads(r.stdout)
    assert status["alive"] == {"master": True, "worker-1": True}
    assert status["master"].startswith("spark://127.0.0.1:") and status["webui"].startswith("http://127.0.0.1:")
    workers = status["master_status"]["workers"]
    assert [(w["state"], w["cores"], w["host"]) for w in workers] == [("ALIVE", 2, "127.0.0.1")]
    again = cluster("start", "--dir", spark_cluster["dir"], "--port", "0", "--webui-port", "0")
    assert again.returncode == 1 and "is running" in again.stderr and "bin/spark-cluster stop" in again.stderr


def test_differential_nights_on_the_cluster(tmp_path, spark_cluster):
    """tests/test_differential.py's random nights (propagate along the D-lattice, refresh, apply-base), Spark
    started by the cycle from [spark] master = spark://127.0.0.1:PORT; after every night every served view equals
    recomputation over the independent model and the lake's base equals the model. The work ran in the worker's
    executors, which ran no Python: nothing of nightshift has to be shipped to them."""
    out = tmp_path / "result.json"
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")  # the driver binds to 127.0.0.1 too
    r = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "cluster_nights.py"), str(tmp_path), spark_cluster["master"], "3",
         str(NIGHTS), str(out)],
        env=env, capture_output=True, text=True, timeout=1200,
    )
    assert r.returncode == 0 and out.is_file(), r.stdout[-3000:] + r.stderr[-5000:]
    result = json.loads(out.read_text())
    assert result["checked"] == NIGHTS + 1
    assert result["master"] == spark_cluster["master"]
    app = applications(spark_cluster)[result["app_id"]]
    assert (app["name"], app["state"]) == ("nightshift:p3", "FINISHED")
    logs = executor_logs(spark_cluster, result["app_id"])
    assert "Running task" in logs, "no task of the application ran in an executor of the worker"
    assert "PythonRunner" not in logs


def test_dag_submits_to_the_cluster(tmp_path, spark_cluster):
    """The Airflow DAG end to end (dag.test(), tests/test_dags.py's run_dag) with `spark_default` pointing at the
    cluster: its spark-submit tasks (propagate per D-lattice level, apply-base) run as applications of the
    master, in client mode, and the night ends equal to recomputation."""
    from test_dags import run_dag

    from nightshift.config import load_project
    from nightshift.cycle import Cycle
    from nightshift.example import init_project
    from nightshift.oracle import check_all

    project = tmp_path / "retail"
    batches = init_project(project, "retail", rows=3000, nights=0)
    for view in (project / "sql" / "summaries").glob("*.sql"):
        if view.stem != "SID_sales":
            view.unlink()  # one D-lattice level: two spark-submits (propagate_level_0, apply_base)
    host, port = spark_cluster["master"].rsplit(":", 1)
    conn = json.dumps({"conn_type": "spark", "host": host, "port": int(port)})  # master spark://127.0.0.1:PORT
    before = set(applications(spark_cluster))
    result, r = run_dag(tmp_path, project, [{"label": "night", "conf": {"batch_id": batches[0]},
                                             "env": {"AIRFLOW_CONN_SPARK_DEFAULT": conn}}],
                        SPARK_LOCAL_IP="127.0.0.1")
    night = result["runs"]["night"]
    assert night["state"] == "success", (night, r.stdout[-4000:], r.stderr[-4000:])
    submitted = {a["name"]: a for i, a in applications(spark_cluster).items() if i not in before}
    assert {f"nightshift:propagate:{batches[0]}", f"nightshift:apply-base:{batches[0]}"} <= set(submitted), submitted
    assert {a["state"] for a in submitted.values()} == {"FINISHED"}
    cycle = Cycle(load_project(project), progress=lambda _: None)
    assert cycle.status(batches[0]) == "done"
    assert check_all(cycle.plan, cycle.lake, cycle.warehouse.read_view) == []
