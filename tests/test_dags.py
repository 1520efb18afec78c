"""The Airflow DAG factory under real Airflow (`dag.test()`), in a subprocess with its own AIRFLOW_HOME:
wait for the batch -> propagate (spark-submit) -> window gate -> refresh -> apply-base -> validate -> publish."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.example import init_project
from nightshift.oracle import check_all

ROOT = Path(__file__).resolve().parent.parent


def test_dag_runs_a_night_end_to_end(tmp_path):
    project = tmp_path / "retail"
    batches = init_project(project, "retail", rows=3000, nights=1)
    env = dict(
        os.environ,
        AIRFLOW_HOME=str(tmp_path / "airflow"),
        AIRFLOW__CORE__DAGS_FOLDER=str(ROOT / "dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": "local[2]"}),
        NIGHTSHIFT_PROJECTS=str(project),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        PYTHONPATH=str(ROOT),
    )
    out = tmp_path / "result.json"
    r = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "dag_run_script.py"), str(project), batches[0], str(out), batches[1]],
        env=env, capture_output=True, text=True, timeout=900,
    )
    assert out.is_file(), r.stdout[-3000:] + r.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["import_errors"] == {}
    assert result["dags"] == ["nightshift__retail"]
    assert result["state"] == "success", (result, r.stdout[-4000:])
    assert set(result["tasks"].values()) == {"success"}
    assert result["asset_events"] == [{"batch_id": batches[0], "project": str(project)}]
    # the second night arrived after its window closed: propagated, but refresh refused to start
    assert result["late_state"] == "failed"
    assert result["late_tasks"]["propagate"] == "success" and result["late_tasks"]["refresh"] == "failed"
    assert "window closed" in r.stdout + r.stderr
    cycle = Cycle(load_project(project), progress=lambda _: None)
    assert cycle.status(batches[0]) == "done"
    assert cycle.status(batches[1]) == "pending"  # the summary tables stay at the previous night
    assert check_all(cycle.plan, cycle.lake, cycle.warehouse.read_view) == []
