"""`make airflow` under real Airflow 3.3, short of starting the servers: `bin/airflow-standalone --check`
sets up a fresh AIRFLOW_HOME, migrates the metadata DB (SQLite by default, PostgreSQL through
AIRFLOW__DATABASE__SQL_ALCHEMY_CONN), reserializes the DAGs and fails on any DAG import error. And the
warehouse URL that DAG tasks take from an Airflow connection (the whole DAG on it: tests/test_dags.py)."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from conftest import PG_URL

from nightshift.connect import _free_port
from nightshift.example import init_project

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bin" / "airflow-standalone"


def check(home: Path, projects: list[Path], **extra: str) -> subprocess.CompletedProcess:
    """Run the script's --check in a clean environment: no AIRFLOW_* settings from the caller."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "NIGHTSHIFT_WAREHOUSE"))}
    env.update(AIRFLOW_HOME=str(home), NIGHTSHIFT_PROJECTS=os.pathsep.join(map(str, projects)), **extra)
    return subprocess.run([sys.executable, str(SCRIPT), "--check"], env=env, capture_output=True, text=True, timeout=300)


def _script():
    """bin/airflow-standalone as a module (its functions, without running it)."""
    from importlib.machinery import SourceFileLoader
    from importlib.util import module_from_spec, spec_from_loader

    spec = spec_from_loader("airflow_standalone", SourceFileLoader("airflow_standalone", str(SCRIPT)))
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_airflow_keeps_spark_warm_unless_told_otherwise(tmp_path, shop):
    """What the DAGs' tasks run Spark on under make airflow: a warm Spark Connect server it starts, unless the
    environment names one (or none: spark-submit per task), a Spark master, or a project its own server."""
    script = _script()
    warm = script.spark_choice({})
    assert isinstance(warm, script.WarmSpark) and (warm.port, warm.master) == (15002, "local[2]")
    assert warm.folder == ROOT / ".spark-connect"  # the one make spark-connect starts, taken over if it runs
    warm = script.spark_choice({"NIGHTSHIFT_SPARK_CONNECT_PORT": "16002", "NIGHTSHIFT_SPARK_CONNECT_MASTER": "local[1]"})
    assert (warm.port, warm.master) == (16002, "local[1]")
    assert "spark-submit per task (NIGHTSHIFT_SPARK_REMOTE is empty)" in script.spark_choice({"NIGHTSHIFT_SPARK_REMOTE": ""})
    assert "server at sc://10.0.0.5:15002" in script.spark_choice({"NIGHTSHIFT_SPARK_REMOTE": "sc://10.0.0.5:15002"})
    master = json.dumps({"conn_type": "spark", "host": "spark://127.0.0.1", "port": 7077})
    assert "AIRFLOW_CONN_SPARK_DEFAULT" in script.spark_choice({"AIRFLOW_CONN_SPARK_DEFAULT": master})
    with pytest.raises(SystemExit, match="NIGHTSHIFT_SPARK_CONNECT_PORT='x' is not a port number"):
        script.spark_choice({"NIGHTSHIFT_SPARK_CONNECT_PORT": "x"})
    own = tmp_path / "own"
    init_project(own, None, rows=0)
    toml = own / "nightshift.toml"
    toml.write_text(toml.read_text().replace('# remote = "sc://127.0.0.1:15002"', 'remote = "sc://10.0.0.5:15002"'))
    assert script._own_remotes([str(shop)], warm) is warm
    said = script._own_remotes([str(shop), str(own)], warm)
    assert isinstance(said, str) and f"{own} name their Spark Connect server" in said


@pytest.fixture(scope="module")
def shop(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("projects") / "shop"
    init_project(root, None, rows=0)  # nightshift.toml + sql/: all a DAG needs at parse time
    return root


@pytest.fixture
def airflow_pg_url():
    """A fresh PostgreSQL database for Airflow's metadata (psycopg2-style URL, as users write it), dropped
    afterwards. Unreachable PostgreSQL: skip, except under CI=true where it fails."""
    server = sa.create_engine(sa.engine.make_url(PG_URL).set(database="postgres"),
                              poolclass=sa.pool.NullPool, isolation_level="AUTOCOMMIT")
    name = f"ns_airflow_test_{os.getpid()}"
    try:
        with server.connect() as c:
            c.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}"')
            c.exec_driver_sql(f'CREATE DATABASE "{name}"')
    except Exception as e:  # noqa: BLE001 - any connection failure means "no PostgreSQL here"
        msg = f"PostgreSQL at {PG_URL} is unreachable ({type(e).__name__}); start it or set NIGHTSHIFT_TEST_PG_URL"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    url = sa.engine.make_url(PG_URL).set(drivername="postgresql+psycopg2", database=name)
    yield url.render_as_string(hide_password=False)
    with server.connect() as c:
        c.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    server.dispose()


def test_check_sets_up_sqlite_metadata_and_finds_the_dags(tmp_path, shop):
    home = tmp_path / "airflow"
    port = _free_port()
    r = check(home, [shop], NIGHTSHIFT_SPARK_CONNECT_PORT=str(port))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "nightshift: DAGs nightshift__shop" in r.stdout
    assert f"metadata DB sqlite:///{home / 'airflow.db'}" in r.stdout
    # make airflow would start a Spark Connect server for the tasks; --check says so and starts nothing
    assert f"Spark for the DAGs' tasks: a Spark Connect server on 127.0.0.1:{port} (master local[2]), started" in r.stdout
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0
    assert (home / "airflow.db").is_file()
    for secret in ("jwt_secret", "api_secret_key"):  # shared by every component, private to the user
        assert stat.S_IMODE((home / secret).stat().st_mode) == 0o600
    # a project whose nightshift.toml is broken is an import error: the check fails and says so
    broken = tmp_path / "broken"
    init_project(broken, None, rows=0)
    (broken / "nightshift.toml").write_text("[window\n")
    r = check(home, [shop, broken])
    assert r.returncode == 1
    assert "import errors" in r.stderr and "malformed TOML" in r.stdout + r.stderr


def test_check_migrates_postgresql_metadata_and_serializes_the_dags(tmp_path, shop, airflow_pg_url):
    r = check(tmp_path / "airflow", [shop], AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=airflow_pg_url)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "using postgresql+psycopg://" in r.stdout  # psycopg2 is not installed: the script says what it uses
    assert "nightshift: DAGs nightshift__shop" in r.stdout
    assert not (tmp_path / "airflow" / "airflow.db").exists()
    db = sa.create_engine(sa.engine.make_url(airflow_pg_url).set(drivername="postgresql+psycopg"),
                          poolclass=sa.pool.NullPool)
    with db.connect() as c:  # what Airflow wrote into PostgreSQL, read back directly
        assert c.exec_driver_sql("SELECT count(*) FROM alembic_version").scalar() == 1
        assert [d for (d,) in c.exec_driver_sql("SELECT dag_id FROM serialized_dag")] == ["nightshift__shop"]
        assert c.exec_driver_sql("SELECT count(*) FROM import_error").scalar() == 0
    db.dispose()


CONNECTION_PROBE = """
import json, os, sys
from airflow.sdk._shared.secrets_masker import redact
from nightshift.airflow_ext import warehouse_url_override
from nightshift.errors import ConfigError
out = {"url": warehouse_url_override("ns_wh")}
out["redacted"] = [redact(s) for s in (out["url"], "pw=" + sys.argv[1], "quoted=" + sys.argv[2])]
try:
    warehouse_url_override("nobody")
except ConfigError as e:
    out["missing"] = str(e)
os.environ["NIGHTSHIFT_WAREHOUSE_URL"] = "duckdb:////tmp/elsewhere.duckdb"
out["env_wins"] = warehouse_url_override("ns_wh")
print(json.dumps(out))
"""


def test_warehouse_url_from_an_airflow_connection(tmp_path):
    """[warehouse] airflow_conn_id through the Task SDK: a postgres connection becomes a psycopg URL with its
    libpq extras (Airflow-only extras dropped), and the password, plain and URL-quoted, and the whole URL are
    registered with Airflow's secrets masker (what task logs and rendered fields pass through)."""
    password = "Night/Shift@pw-7f3e"
    conn = {"conn_type": "postgres", "host": "db.example", "port": 5433, "login": "etl", "password": password,
            "schema": "dw", "extra": {"options": "-csearch_path=sales", "sslmode": "require", "cursor": "dictcursor"}}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "NIGHTSHIFT_WAREHOUSE"))}
    env.update(AIRFLOW_HOME=str(tmp_path), AIRFLOW_CONN_NS_WH=json.dumps(conn), PYTHONPATH=str(ROOT))
    quoted = "Night%2FShift%40pw-7f3e"
    r = subprocess.run([sys.executable, "-c", CONNECTION_PROBE, password, quoted], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["url"] == f"postgresql+psycopg://etl:{quoted}@db.example:5433/dw?options=-csearch_path%3Dsales&sslmode=require"
    assert out["redacted"] == ["***", "pw=***", "quoted=***"]
    assert "airflow_conn_id = 'nobody'" in out["missing"] and "AIRFLOW_CONN_NOBODY" in out["missing"]
    assert out["env_wins"] is None  # NIGHTSHIFT_WAREHOUSE_URL wins over the connection, as over [warehouse] url
