"""The Airflow DAG factory under real Airflow (`dag.test()`), in a subprocess with its own AIRFLOW_HOME:
wait for the batch -> propagate (spark-submit) -> window gate -> refresh -> apply-base -> validate -> publish."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, unquote

from conftest import PG_URL
from sqlalchemy.engine import make_url

from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.example import init_project
from nightshift.oracle import check_all

ROOT = Path(__file__).resolve().parent.parent


def run_dag(tmp_path, project: Path, batches: list[str], **env_vars: str | None) -> tuple[dict, subprocess.CompletedProcess]:
    """dag.test() of the project's DAG in a subprocess with a fresh AIRFLOW_HOME (tests/dag_run_script.py);
    env_vars set to None are removed."""
    env = dict(
        os.environ,
        AIRFLOW_HOME=str(tmp_path / "airflow"),
        AIRFLOW__CORE__DAGS_FOLDER=str(ROOT / "dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": "local[2]"}),
        NIGHTSHIFT_PROJECTS=str(project),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        PYTHONPATH=str(ROOT),
        **env_vars,
    )
    env = {k: v for k, v in env.items() if v is not None}
    out = tmp_path / "result.json"
    r = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "dag_run_script.py"), str(project), *batches[:1], str(out), *batches[1:]],
        env=env, capture_output=True, text=True, timeout=900,
    )
    assert out.is_file(), r.stdout[-3000:] + r.stderr[-3000:]
    return json.loads(out.read_text()), r


def test_dag_runs_a_night_end_to_end(tmp_path):
    project = tmp_path / "retail"
    batches = init_project(project, "retail", rows=3000, nights=1)
    result, r = run_dag(tmp_path, project, batches)
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


def test_dag_takes_the_warehouse_from_an_airflow_connection(tmp_path, pg_schemas):
    """[warehouse] airflow_conn_id: refresh and validate (in the task) and propagate and apply-base (spark-submit
    children, through NIGHTSHIFT_WAREHOUSE_URL) all use the connection's PostgreSQL schema; its password
    shows up in no log, no output and no rendered template field."""
    url = pg_schemas("airflow_conn")  # what the connection below must come to
    schema = unquote(url.split("search_path%3D")[1])
    project = tmp_path / "shop"
    batches = init_project(project, "retail", rows=2000, nights=0)
    toml = project / "nightshift.toml"
    toml.write_text(re.sub(r'(?m)^url = .*$', 'airflow_conn_id = "ns_warehouse"', toml.read_text()))
    pg = make_url(PG_URL)
    password = "Night/Shift@pw-7f3e"  # trust auth ignores it; it needs URL-quoting
    conn = {"conn_type": "postgres", "host": pg.host, "port": pg.port, "login": pg.username, "password": password,
            "schema": pg.database, "extra": {"options": f"-csearch_path={schema}", "cursor": "dictcursor"}}
    result, r = run_dag(tmp_path, project, batches[:1], AIRFLOW_CONN_NS_WAREHOUSE=json.dumps(conn),
                        NIGHTSHIFT_WAREHOUSE_URL=None)
    assert result["import_errors"] == {} and result["dags"] == ["nightshift__shop"]
    assert result["state"] == "success", (result, r.stdout[-4000:])
    assert not (project / "warehouse.duckdb").exists()  # nobody fell back to the default DuckDB file
    cycle = Cycle(dataclasses.replace(load_project(project), warehouse_url=url), progress=lambda _: None)
    assert cycle.status(batches[0]) == "done"
    assert check_all(cycle.plan, cycle.lake, cycle.warehouse.read_view) == []
    assert result["rendered"]["propagate"]["env_vars"] is None  # resolved after rendering, restored afterwards
    logs = [p.read_text(errors="replace") for p in (tmp_path / "airflow").rglob("*.log")]
    seen = "\n".join([r.stdout, r.stderr, json.dumps(result), *logs])
    for secret in (password, quote(password, safe="")):
        assert secret not in seen
