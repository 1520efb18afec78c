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
COMMANDS = ["init", "plan", "materialize", "propagate", "refresh", "apply-base", "validate", "run", "verify", "status", "demo",
            "load"]


def cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "nightshift.cli", *args], capture_output=True, text=True, env=env, timeout=120)


def test_top_level_help_lists_every_command():
    r = cli("--help")
    assert r.returncode == 0
    for c in COMMANDS:
        assert c in r.stdout


def test_help_answers_without_loading_the_compiler_or_the_data_libraries():
    """`nightshift --help` and a command's --help import none of the modules that take a second to import."""
    code = ("import sys\nfrom nightshift.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('sqlglot', 'pyarrow', 'pandas', 'sqlalchemy', 'duckdb', 'pyspark') if m in sys.modules))")
    for args in (["--help"], ["run", "--help"]):
        r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)))
        assert r.returncode == 0 and r.stdout.strip().splitlines()[-1] == "[]", (args, r.stdout[-500:], r.stderr[-2000:])


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_has_help(command):
    r = cli(command, "--help")
    assert r.returncode == 0, r.stderr
    assert "usage: nightshift " + command in r.stdout
    if command not in ("init", "demo"):
        assert "--project" in r.stdout
    if command in ("propagate", "refresh", "apply-base", "validate", "run", "load"):
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
    assert "_ns_count" not in r.stdout and len(r.stdout.splitlines()) < 15  # one line per view + the levels
    r = cli("plan", "--project", str(target), "--explain")
    assert "EarliestSale = MIN" in r.stdout and "_ns_count" in r.stdout
    r = cli("init", str(target))
    assert r.returncode == 1 and "already exists" in r.stderr


def test_plan_json_is_machine_readable(tmp_path):
    import json

    target = tmp_path / "p"
    assert cli("init", str(target), "--example", "retail", "--rows", "100", "--nights", "0").returncode == 0
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
    assert cli("init", str(target), "--example", "retail", "--rows", "100", "--nights", "0").returncode == 0
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
    assert cli("init", str(target), "--example", "retail", "--rows", "100", "--nights", "0").returncode == 0
    r = cli("plan", "--project", str(target), "--explain")
    assert r.returncode == 0, r.stderr
    assert "D-lattice" in r.stdout and "sCD_sales(city, date, +region)" in r.stdout  # Example 5.4's augmentation
    assert "sCD_sales -> sR_sales" in r.stdout and "default statistics" in r.stdout
    for name in ("plan.dot", "plan.png", "plan.json"):
        assert (target / name).stat().st_size > 100, name
    assert (target / "plan.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lattice = json.loads(cli("plan", "--project", str(target), "--json").stdout)["lattice"]
    parents = {p["node"]: p["parent"] for p in lattice["parents"]}
    assert set(parents) >= {"SID_sales", "sCD_sales", "SiC_sales", "sR_sales"}


# ------------------------------------------------------------------ the first afternoon: init, load, run --pending

PAPER_WORDS = re.compile(r"paper \d|papers? 00|Section \d|Figure \d|Appendix [A-Z]|\(\d+\.\d+(\.\d+)?\)|§")
SPARK_NOISE = ("WARN ", "log4j", "incubator", "Setting default log level", "ivy", ":: resolving")
RIDES_SCHEMA = """CREATE TABLE zones (zone_id INTEGER PRIMARY KEY, borough VARCHAR NOT NULL, city VARCHAR NOT NULL);
CREATE TABLE trips (trip_id BIGINT PRIMARY KEY, zone_id INTEGER NOT NULL REFERENCES zones(zone_id), d DATE NOT NULL,
                    fare DECIMAL(10,2), rider_id INTEGER);
"""
RIDES_VIEWS = {
    "fares_by_city": "CREATE VIEW fares_by_city AS SELECT z.city, t.d, COUNT(*) AS trips, SUM(t.fare) AS fares, "
                     "MAX(t.fare) AS top FROM trips t JOIN zones z ON t.zone_id = z.zone_id GROUP BY z.city, t.d;",
    "riders_by_city": "CREATE VIEW riders_by_city AS SELECT z.city, COUNT(DISTINCT t.rider_id) AS riders "
                      "FROM trips t JOIN zones z ON t.zone_id = z.zone_id GROUP BY z.city;",
}


def rides(tmp_path) -> Path:
    """An empty project from `nightshift init`, filled in as its comments say."""
    target = tmp_path / "rides"
    assert cli("init", str(target)).returncode == 0
    (target / "sql" / "schema.sql").write_text(RIDES_SCHEMA)
    for name, sql in RIDES_VIEWS.items():
        (target / "sql" / "summaries" / f"{name}.sql").write_text(sql)
    return target


def test_init_writes_an_empty_project_that_plans(tmp_path):
    target = tmp_path / "shop"
    r = cli("init", str(target))
    assert r.returncode == 0, r.stderr
    assert "nightshift.toml" in r.stdout and "schema.sql" in r.stdout and "lake/changes" in r.stdout
    assert f"nightshift load --project {target}" in r.stdout and f"nightshift run --project {target} --pending" in r.stdout
    toml = (target / "nightshift.toml").read_text()
    for mode in ("auto", "incremental", "recompute", "auxiliary", "delta", "map"):
        assert f'"{mode}"' in toml, mode
    assert "stores" not in toml and "[dependencies]\n" not in toml.replace("# [dependencies]\n", "")
    assert not list((target / "sql" / "summaries").glob("*.sql")) and (target / "lake" / "changes").is_dir()
    r = cli("plan", "--project", str(target))
    assert r.returncode == 0, r.stderr
    assert "no summary views yet: add one to" in r.stdout and "sql/summaries" in r.stdout
    r = cli("plan", "--project", str(target), "--json")  # still JSON, for the tools that read it
    assert r.returncode == 0 and json.loads(r.stdout)["views"] == [] and json.loads(r.stdout)["levels"] == [], r.stdout
    assert not (target / "warehouse.duckdb").exists()  # plan only reads


def test_help_plan_and_preview_speak_the_products_words(tmp_path):
    for command in [None, *COMMANDS]:
        r = cli(*([command] if command else []), "--help")
        assert not PAPER_WORDS.search(r.stdout), (command, PAPER_WORDS.search(r.stdout))
    target = rides(tmp_path)
    (tmp_path / "z.csv").write_text("zone_id,borough,city\n1,Soho,London\n2,Mitte,Berlin\n")
    (tmp_path / "t.jsonl").write_text('{"trip_id": 1, "zone_id": 1, "d": "2026-01-02", "fare": 12.5, "rider_id": 7}\n'
                                      '{"trip_id": 2, "zone_id": 2, "d": "2026-01-02", "fare": 3, "rider_id": 8}\n')
    for table, f in (("zones", "z.csv"), ("trips", "t.jsonl")):
        r = cli("load", "--project", str(target), "--batch", "20260101", "--table", table, str(tmp_path / f))
        assert r.returncode == 0, r.stderr
    r = cli("plan", "--project", str(target), "--batch", "20260101")  # landed, not propagated: a preview
    assert r.returncode == 0, r.stderr
    assert "preview of night 20260101" in r.stdout and "trips +2/-0, zones +2/-0" in r.stdout
    assert not PAPER_WORDS.search(r.stdout), PAPER_WORDS.search(r.stdout)
    assert "__ns_aux" not in r.stdout and "_ns_implied" not in r.stdout and "ns_k_" not in r.stdout
    assert "riders_by_city: auxiliary mode (" in r.stdout and "median" not in r.stdout  # as status says it
    assert not any(noise in r.stderr for noise in SPARK_NOISE), r.stderr
    r = cli("plan", "--project", str(target), "--verbose")  # --verbose after the command, too
    assert r.returncode == 0 and "no summary tables built yet" in r.stdout, r.stderr
    explained = cli("--verbose", "plan", "--project", str(target), "--batch", "20260101", "--explain").stdout
    assert "__ns_aux" in explained and "paper" in explained  # the internal names and references, on request


def test_run_pending_with_nothing_pending_and_its_flags(tmp_path):
    target = rides(tmp_path)
    r = cli("run", "--project", str(target), "--pending")
    assert r.returncode == 0 and "nothing pending" in r.stdout, r.stderr
    r = cli("run", "--project", str(target), "--pending", "--batch", "x")
    assert r.returncode == 2 and "not allowed with" in r.stderr
    r = cli("run", "--project", str(target))
    assert r.returncode == 2 and "one of the arguments --batch --pending is required" in r.stderr


def test_a_recompute_reason_says_what_was_measured():
    from lattice.compile import compile_project
    from lattice.dlattice import Statistics, build_lattice
    from lattice.passes.choose_modes import choose_modes

    plan = compile_project(RIDES_SCHEMA, {"sql/summaries/t.sql": "CREATE VIEW per_trip AS SELECT t.trip_id, z.city, "
                                          "COUNT(*) AS n FROM trips t JOIN zones z ON t.zone_id = z.zone_id "
                                          "GROUP BY t.trip_id, z.city;"})
    stats = Statistics.of(table_rows={"trips": 1000, "zones": 10}, change_rows={"trips": 1800, "zones": 3})
    (choice,) = choose_modes(build_lattice(plan, stats), plan, stats, True)
    assert choice.mode == "recompute", choice
    assert "a dimension changed: 3 zones row(s)" in choice.reason and "1,800 change row(s) of trips against 1,000 in its base" in choice.reason
    assert "most of the base" not in choice.reason


@pytest.mark.slow
def test_run_pending_runs_every_landed_batch_quietly(tmp_path):
    """Two nights loaded from files run in order with nightshift's own lines only; status names each view's
    mode as plan does; a bad batch stops the run naming the batch and the step."""
    target = rides(tmp_path)
    (tmp_path / "z.csv").write_text("zone_id,borough,city\n1,Soho,London\n2,Mitte,Berlin\n")
    (tmp_path / "t.csv").write_text("trip_id,zone_id,d,fare,rider_id\n1,1,2026-01-02,12.5,7\n2,2,2026-01-02,3,8\n")
    (tmp_path / "gone.csv").write_text("trip_id\n2\n")
    for args in (("20260101", "zones", "z.csv"), ("20260101", "trips", "t.csv"), ("20260102", "trips", "gone.csv")):
        extra = ["--op", "delete"] if args[2] == "gone.csv" else []
        r = cli("load", "--project", str(target), "--batch", args[0], "--table", args[1], *extra, str(tmp_path / args[2]))
        assert r.returncode == 0, r.stderr
    r = cli("run", "--project", str(target), "--pending")
    assert r.returncode == 0, r.stderr
    nights = [line for line in r.stdout.splitlines() if line.startswith("night ")]
    assert [n.split(":")[0] for n in nights] == ["night 20260101", "night 20260102"], r.stdout
    assert not any(noise in r.stderr for noise in SPARK_NOISE), r.stderr
    shown = cli("plan", "--project", str(target), "--batch", "20260101").stdout  # after propagate: what ran
    assert "night 20260101: base at (empty); trips +2/-0, zones +2/-0" in shown and "preview" not in shown, shown
    status = cli("status", "--project", str(target))
    assert "riders_by_city: auxiliary mode" in status.stdout, status.stdout
    assert not PAPER_WORDS.search(status.stdout), PAPER_WORDS.search(status.stdout)
    (tmp_path / "more.csv").write_text("trip_id,zone_id,d,fare,rider_id\n3,1,2026-01-03,4,9\n")
    assert cli("load", "--project", str(target), "--batch", "20260103", "--table", "trips",
               str(tmp_path / "more.csv")).returncode == 0
    r = cli("run", "--project", str(target), "--batch", "20260103")  # one night: its steps on stderr, one line on stdout
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("night 20260103: trips +1/-0; ") and len(r.stdout.splitlines()) == 1, r.stdout
    assert all(f"{step} 20260103: done in" in r.stderr for step in ("propagate", "refresh", "apply-base")), r.stderr
    # the views' auxiliary views by the views they serve, never by their lake names
    assert "summary-delta of riders_by_city's auxiliary view" in r.stderr and "__ns_" not in r.stderr, r.stderr
    (tmp_path / "orphan.csv").write_text("trip_id,zone_id,d,fare,rider_id\n4,99,2026-01-04,1,9\n")
    assert cli("load", "--project", str(target), "--batch", "20260104", "--table", "trips",
               str(tmp_path / "orphan.csv")).returncode == 0
    r = cli("run", "--project", str(target), "--pending")
    assert r.returncode == 1 and "stopped at batch 20260104, step propagate" in r.stderr and "zone_id=99" in r.stderr


def test_a_dag_tasks_spark_submit_has_the_settings_nightshift_run_has():
    """A DAG task's Spark step is a spark-submit of nightshift/submit.py: its session has nightshift's settings
    (the session time zone UTC on a machine in another zone, a small night's shuffle partitions), and a setting
    spark-submit was given wins over nightshift's."""
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, TZ="America/New_York", PYTHONPATH=str(ROOT), NIGHTSHIFT_SHUFFLE_PARTITIONS="3",
               PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    env.pop("PYSPARK_GATEWAY_PORT", None)
    submit = [str(bin_dir / "spark-submit"), "--master", "local[1]"]
    out = {}
    for given in ((), ("--conf", "spark.sql.shuffle.partitions=7")):
        r = subprocess.run([*submit, *given, str(ROOT / "tests" / "submit_session_script.py")], env=env,
                           capture_output=True, text=True, timeout=300)
        line = [x for x in r.stdout.splitlines() if x.startswith("SESSION ")]
        assert r.returncode == 0 and line, r.stdout[-2000:] + r.stderr[-2000:]
        out[given] = json.loads(line[0][len("SESSION "):])
    assert out[()] == {"spark.sql.session.timeZone": "UTC", "spark.sql.shuffle.partitions": "3",
                       "spark.sql.sources.partitionOverwriteMode": "static"}
    assert out[("--conf", "spark.sql.shuffle.partitions=7")]["spark.sql.shuffle.partitions"] == "7"


def test_the_command_ends_at_once_with_its_work_done(tmp_path):
    """`nightshift` skips Python's teardown of its modules, not what an ending must do: its exit code, its
    output through a pipe, the threads it started (a thread pool left open among them), the exit handlers, and a
    DuckDB write it did not close."""
    code = f"""
import atexit, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
import duckdb
from nightshift import cli
POOLS = []

def main(argv=None):
    con = duckdb.connect({str(tmp_path / 'w.duckdb')!r})
    con.execute("CREATE TABLE t AS SELECT 42 AS x")  # left open: committed, not checkpointed
    threading.Thread(target=lambda: (time.sleep(0.5), open({str(tmp_path / 'thread')!r}, 'w').write('done'))).start()
    POOLS.append(ThreadPoolExecutor(2))  # kept, never shut down (as a library's pool can be): its idle workers end too
    POOLS[0].submit(print, 'from a pool never shut down', file=sys.stderr)
    atexit.register(lambda: open({str(tmp_path / 'atexit')!r}, 'w').write('ran'))
    print('x' * 100_000)
    return 7

cli.main = main
cli.command()
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # the output buffered, as by default
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env=dict(env, PYTHONPATH=str(ROOT)))
    assert r.returncode == 7, r.stderr[-2000:]
    assert "from a pool never shut down" in r.stderr
    assert r.stdout == "x" * 100_000 + "\n"
    assert (tmp_path / "thread").read_text() == "done" and (tmp_path / "atexit").read_text() == "ran"
    import duckdb

    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as con:
        assert con.execute("SELECT x FROM t").fetchall() == [(42,)]
