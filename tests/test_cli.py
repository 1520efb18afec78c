"""The command line: --help on every command, init + plan, and the files users rely on."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ["init", "plan", "materialize", "propagate", "refresh", "apply-base", "validate", "run", "verify", "status", "demo"]


def cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "nightshift.cli", *args], capture_output=True, text=True, env=env, timeout=120)


def test_top_level_help_lists_every_command():
    r = cli("--help")
    assert r.returncode == 0
    for c in COMMANDS:
        assert c in r.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_has_help(command):
    r = cli(command, "--help")
    assert r.returncode == 0, r.stderr
    assert "usage: nightshift " + command in r.stdout
    if command not in ("init", "demo"):
        assert "--project" in r.stdout
    if command in ("propagate", "refresh", "apply-base", "validate", "run"):
        assert "--batch" in r.stdout


def test_init_example_then_plan(tmp_path):
    target = tmp_path / "retail"
    r = cli("init", str(target), "--example", "retail", "--rows", "2000", "--nights", "2")
    assert r.returncode == 0, r.stderr
    batches = sorted(p.name for p in (target / "lake" / "changes" / "pos").iterdir())
    assert len(batches) == 3 and all(b.startswith("batch_id=") for b in batches)
    r = cli("plan", "--project", str(target))
    assert r.returncode == 0, r.stderr
    for view in ("SID_sales", "sCD_sales", "SiC_sales", "sR_sales"):
        assert view in r.stdout
    assert "EarliestSale = MIN" in r.stdout and "_ns_count" in r.stdout
    r = cli("init", str(target))
    assert r.returncode == 1 and "already exists" in r.stderr


def test_plan_json_is_machine_readable(tmp_path):
    import json

    target = tmp_path / "p"
    assert cli("init", str(target)).returncode == 0
    r = cli("plan", "--project", str(target), "--json")
    plan = json.loads(r.stdout)
    assert {v["name"] for v in plan["views"]} == {"SID_sales", "sCD_sales", "SiC_sales", "sR_sales"}
    # Figure 3: SID_sales from the changes; SiC_sales and sCD_sales from it; sR_sales from sCD_sales
    assert plan["levels"] == [["SID_sales"], ["SiC_sales", "sCD_sales"], ["sR_sales"]]


def test_not_a_project(tmp_path):
    r = cli("status", "--project", str(tmp_path))
    assert r.returncode == 1 and "nightshift.toml" in r.stderr and "not found" in r.stderr


def test_airflow_connection_project_needs_a_url_outside_airflow(tmp_path):
    """[warehouse] airflow_conn_id and no url: outside Airflow the CLI says where the URL must come from
    instead of silently using a DuckDB file."""
    target = tmp_path / "shop"
    assert cli("init", str(target)).returncode == 0
    toml = target / "nightshift.toml"
    toml.write_text(re.sub(r"(?m)^url = .*$", 'airflow_conn_id = "ns_warehouse"', toml.read_text()))
    r = cli("status", "--project", str(target))
    assert r.returncode == 1 and "'ns_warehouse'" in r.stderr and "NIGHTSHIFT_WAREHOUSE_URL" in r.stderr, r.stderr
    assert not (target / "warehouse.duckdb").exists()


def test_compose_file_is_valid_yaml_with_its_services():
    """No Docker engine here: the compose file must parse, and its paths, names and URLs agree with each
    other and with the repository (what `docker compose config` plus a first `up` would catch)."""
    compose = yaml.safe_load((ROOT / "docker" / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "spark-master", "spark-worker", "airflow"} <= set(services)
    shared = compose["x-nightshift"]
    build = shared["build"]
    assert (ROOT / "docker" / build["context"] / build["dockerfile"]).is_file()
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    for copied in ("requirements.txt", "requirements.lock", "pyproject.toml"):
        assert copied in dockerfile and (ROOT / copied).is_file()
    ignored = (ROOT / ".dockerignore").read_text().split()  # the build context is the repo: never the venv
    assert {".venv/", "demo-project/", ".git/"} <= set(ignored)
    for name in ("spark-master", "spark-worker", "airflow"):  # the anchor reached every nightshift service
        assert services[name]["volumes"] == shared["volumes"] and services[name]["environment"] == shared["environment"]
    env = shared["environment"]
    project = next(v.split(":")[1] for v in shared["volumes"] if v.split(":")[0] == "../demo-project")
    assert env["NIGHTSHIFT_PROJECTS"] == project  # the DAG factory looks where the project is mounted
    assert env["AIRFLOW__CORE__DAGS_FOLDER"] == "/opt/nightshift/dags" and "WORKDIR /opt/nightshift" in dockerfile
    assert env["AIRFLOW__API_AUTH__JWT_SECRET"] and env["AIRFLOW__API__SECRET_KEY"]
    spark = json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])  # the DAG's spark-submit reaches the master
    master = services["spark-master"]["entrypoint"]
    assert spark["host"] == f"spark://{master[master.index('--host') + 1]}"
    assert str(spark["port"]) == master[master.index("--port") + 1]
    assert f"{spark['host']}:{spark['port']}" in services["spark-worker"]["entrypoint"]
    init = (ROOT / "docker" / "init-warehouse.sql").read_text()  # the warehouse URL's role and database exist
    wh = make_url(env["NIGHTSHIFT_WAREHOUSE_URL"])
    assert (wh.host, wh.drivername) == ("postgres", "postgresql+psycopg")
    assert f"CREATE USER {wh.username} WITH PASSWORD '{wh.password}'" in init
    assert f"CREATE DATABASE {wh.database} OWNER {wh.username}" in init
    meta = make_url(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    pg = services["postgres"]["environment"]
    assert (meta.username, meta.password, meta.database) == (pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"], pg["POSTGRES_DB"])
    assert "./init-warehouse.sql:/docker-entrypoint-initdb.d/init-warehouse.sql:ro" in services["postgres"]["volumes"]


def test_requirements_pin_the_card_packages():
    reqs = (ROOT / "requirements.txt").read_text()
    for pin in ("pyspark==4.2.0", "pyspark-client==4.2.0", "apache-airflow==3.3.2",
                "apache-airflow-providers-apache-spark==6.3.4", "great-expectations==1.24.1", "duckdb==2.0.0"):
        assert pin in reqs
    lock = (ROOT / "requirements.lock").read_text()
    assert "sqlglot==" in lock and "SQLAlchemy==2." in lock and "psycopg==" in lock


def test_plan_shows_the_d_lattice_and_writes_its_pictures(tmp_path):
    import json

    target = tmp_path / "p"
    assert cli("init", str(target)).returncode == 0
    r = cli("plan", "--project", str(target))
    assert r.returncode == 0, r.stderr
    assert "D-lattice" in r.stdout and "sCD_sales(city, date, +region)" in r.stdout  # Example 5.4's augmentation
    assert "sCD_sales -> sR_sales" in r.stdout and "default statistics" in r.stdout
    for name in ("plan.dot", "plan.png", "plan.json"):
        assert (target / name).stat().st_size > 100, name
    assert (target / "plan.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lattice = json.loads(cli("plan", "--project", str(target), "--json").stdout)["lattice"]
    parents = {p["node"]: p["parent"] for p in lattice["parents"]}
    assert set(parents) >= {"SID_sales", "sCD_sales", "SiC_sales", "sR_sales"}
