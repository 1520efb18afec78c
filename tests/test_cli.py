"""The command line: --help on every command, init + plan, and the files users rely on."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

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
    compose = yaml.safe_load((ROOT / "docker" / "docker-compose.yml").read_text())
    assert {"postgres", "spark-master", "spark-worker", "airflow"} <= set(compose["services"])
    build = compose["x-nightshift"]["build"]
    assert (ROOT / "docker" / build["context"] / build["dockerfile"]).is_file()
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    for copied in ("requirements.txt", "requirements.lock", "pyproject.toml"):
        assert copied in dockerfile and (ROOT / copied).is_file()


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
