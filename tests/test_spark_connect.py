"""Spark kept warm between commands: a real Spark Connect server started by `nightshift spark-connect start`,
nights run through the command line with [spark] remote (NIGHTSHIFT_SPARK_REMOTE) pointing at it, and every
summary table equal to its recomputation afterwards.

Every command runs in a subprocess, as a user or an Airflow task runs it: a process that opened a Spark
Connect session stays in Spark Connect mode, and this test process keeps its local session for other tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.example import init_project
from nightshift.oracle import check_all

from spark_jobs.metrics import ScanRows, _has_ended, _read_log

slow = pytest.mark.slow  # the tests with a server; the event log reader's test needs none
ROOT = Path(__file__).resolve().parent.parent


def nightshift(*args: str, remote: str | None = None, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    environment.pop("NIGHTSHIFT_SPARK_REMOTE", None)
    if remote is not None:
        environment["NIGHTSHIFT_SPARK_REMOTE"] = remote
    return subprocess.run([sys.executable, "-m", "nightshift.cli", *args], capture_output=True, text=True,
                          env=environment, timeout=timeout)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A Spark Connect server on a free port for the module (a long-lived JVM: full JIT, a small heap), warmed up
    as make spark-connect does: the retail example's first two nights ran on it in a scratch project that is gone,
    with its own warehouse file whatever the caller's NIGHTSHIFT_WAREHOUSE_URL says."""
    folder = tmp_path_factory.mktemp("connect") / ".spark-connect"
    env = {"NIGHTSHIFT_DRIVER_MEMORY": "1g", "SPARK_SUBMIT_OPTS": ""}
    elsewhere = folder.parent / "callers-warehouse.duckdb"
    r = nightshift("spark-connect", "start", "--warm-up", "--port", "0", "--dir", str(folder), **env,
                   NIGHTSHIFT_WAREHOUSE_URL=f"duckdb:///{elsewhere}")
    assert r.returncode == 0, r.stderr + r.stdout
    assert not elsewhere.exists()  # the warm-up's summary tables never reach the caller's warehouse
    url = r.stdout.strip().splitlines()[-1]
    assert url.startswith("sc://127.0.0.1:") and "started" in r.stdout
    assert "spark-connect: warmed up in " in r.stdout and "warning" not in r.stderr, r.stderr + r.stdout
    assert not (folder / "warm-up").exists()
    yield {"url": url, "dir": folder, "env": env}
    nightshift("spark-connect", "stop", "--dir", str(folder))


@slow
def test_start_and_status_answer_for_the_running_server(server):
    again = nightshift("spark-connect", "start", "--port", "0", "--dir", str(server["dir"]), **server["env"])
    assert again.returncode == 0, again.stderr
    assert "already running at " + server["url"] in again.stdout and again.stdout.strip().endswith(server["url"])
    status = nightshift("spark-connect", "status", "--dir", str(server["dir"]))
    assert status.returncode == 0 and f"running at {server['url']}" in status.stdout
    state = json.loads((server["dir"] / "server.json").read_text())
    cmdline = Path(f"/proc/{state['pid']}/cmdline").read_bytes().decode()
    assert "spark_jobs/log4j2.properties" in cmdline and "spark.sql.session.timeZone=UTC" in cmdline  # get_spark's


@slow
def test_nights_over_spark_connect_equal_recomputation(server, tmp_path):
    """The retail example's first load and two nights, a new view built by apply, and verify --engine spark,
    all through the server: no command starts Spark of its own, every summary table equals recomputation, and
    the manifests still say what propagate read (from the server's event log)."""
    project = tmp_path / "retail"
    batches = init_project(project, "retail", rows=2000, nights=2)
    for batch in batches:
        r = nightshift("run", "--project", str(project), "--batch", batch, remote=server["url"])
        assert r.returncode == 0, r.stderr[-3000:]
        assert f"connecting to Spark ({server['url']})" in r.stderr and "starting Spark" not in r.stderr
    (project / "sql" / "summaries" / "item_median.sql").write_text(
        "CREATE VIEW item_median AS SELECT itemID, MEDIAN(qty) AS med_qty, COUNT(DISTINCT storeID) AS stores "
        "FROM pos GROUP BY itemID")
    r = nightshift("apply", "--project", str(project), remote=server["url"])
    assert r.returncode == 0 and "added item_median" in r.stdout, r.stderr[-3000:]
    r = nightshift("verify", "--project", str(project), "--engine", "spark", remote=server["url"])
    assert r.returncode == 0 and "equal their recomputation" in r.stdout, r.stderr[-3000:] + r.stdout
    assert "starting Spark" not in r.stderr

    cycle = Cycle(load_project(project), progress=lambda _: None)
    try:
        assert [cycle.status(b) for b in batches] == ["done"] * len(batches)
        assert check_all(cycle.plan, cycle.lake, cycle.warehouse.read_view) == []
        for batch in batches:
            manifest = cycle.lake.read_manifest(batch)
            changes = sum(pq.ParquetFile(f).metadata.num_rows
                          for f in (project / "lake" / "changes" / "pos" / f"batch_id={batch}").glob("*.parquet"))
            read = manifest.read("changes", "pos")
            assert manifest.rows_read is not None and read.scans >= 1 and read.rows == changes * read.scans, \
                (batch, manifest.rows_read)
        assert cycle.lake.read_manifest(batches[0]).read("base", "pos").rows == 0  # the first load: no base yet
    finally:
        cycle.close()


@slow
def test_each_session_keeps_its_own_views_and_settings(server, tmp_path):
    """Two sessions of one server (two commands at once): one's temporary views and settings are not the
    other's; the settings that decide results are nightshift's in both."""
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from pyspark.sql import SparkSession
        from spark_jobs.session import get_spark
        first = get_spark(remote={server['url']!r})
        first.range(3).createOrReplaceTempView("mine")
        first.conf.set("spark.sql.shuffle.partitions", "7")
        second = SparkSession.builder.remote({server['url']!r}).create()
        assert first.table("mine").count() == 3
        assert not second.catalog.tableExists("mine"), "a temporary view leaked into another session"
        assert second.conf.get("spark.sql.shuffle.partitions") != "7"
        assert first.conf.get("spark.sql.session.timeZone") == "UTC"
        second.stop()
        print("isolated")
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0 and "isolated" in r.stdout, r.stderr[-3000:]


@slow
def test_the_next_command_takes_over_the_last_ones_session_clean(server, tmp_path):
    """A command's session stays on the server for the next command on this machine (the code the server
    compiled for it is reused), with its settings reset to the server's; a command running at the same time
    gets a session of its own; a session the server has closed gives way to a new one."""
    script = textwrap.dedent(f"""
        import subprocess, sys
        sys.path.insert(0, {str(ROOT)!r})
        from spark_jobs.session import get_spark
        spark = get_spark(remote={server['url']!r})
        print("session", spark.session_id, spark.conf.get("spark.sql.shuffle.partitions"),
              spark.conf.get("spark.sql.session.timeZone"), flush=True)
        spark.conf.set("spark.sql.shuffle.partitions", "7")
        if sys.argv[1:2] == ["both"]:  # a second command while this one holds its session
            subprocess.run([sys.executable, sys.argv[2]], check=True)
        if sys.argv[1:] == ["close"]:
            spark.stop()  # the server closes the session: its id cannot be used again
    """)
    path = tmp_path / "command.py"
    path.write_text(script)

    def command(*args: str) -> list[list[str]]:
        r = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert r.returncode == 0, r.stderr[-3000:]
        return [line.split()[1:] for line in r.stdout.splitlines() if line.startswith("session ")]

    (first,) = command()
    (second,) = command()
    assert second[0] == first[0]  # taken over: the same session on the server
    assert second[1] != "7" and second[2] == "UTC"  # what the last command set is gone; nightshift's settings hold
    outer, inner = command("both", str(path))
    assert outer[0] == first[0] and inner[0] != first[0]  # at the same time: two sessions
    (closed,) = command("close")
    (after,) = command()
    assert closed[0] == first[0] and after[0] != first[0] and after[2] == "UTC"


@slow
def test_a_folder_rewritten_between_two_commands_is_read_anew(server, tmp_path):
    """The next command takes over the last one's session, which had read a folder: when the folder was
    rewritten in between (a night rerun on a fresh copy of its project, a check's output written again), the
    command reads the files it holds now, not the ones the session saw."""
    folder = tmp_path / "matched"
    script = textwrap.dedent(f"""
        import shutil, sys
        sys.path.insert(0, {str(ROOT)!r})
        from spark_jobs.session import get_spark
        spark = get_spark(remote={server['url']!r})
        shutil.rmtree({str(folder)!r}, ignore_errors=True)
        n = int(sys.argv[1])
        spark.range(n).write.parquet({str(folder)!r})
        print("rows", spark.read.parquet({str(folder)!r}).count(), flush=True)
    """)
    path = tmp_path / "command.py"
    path.write_text(script)
    seen = []
    for n in (3, 5):
        r = subprocess.run([sys.executable, str(path), str(n)], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert r.returncode == 0, r.stderr[-3000:]
        seen.append(r.stdout.split()[-1])
    assert seen == ["3", "5"]


@slow
def test_a_remote_that_does_not_answer_or_is_no_url_is_refused(tmp_path):
    project = tmp_path / "p"
    batches = init_project(project, "retail", rows=200, nights=0)
    r = nightshift("run", "--project", str(project), "--batch", batches[0], remote="sc://127.0.0.1:1", timeout=60)
    assert r.returncode == 1 and "the Spark Connect server at sc://127.0.0.1:1 does not answer" in r.stderr, r.stderr
    assert "nightshift spark-connect start" in r.stderr
    r = nightshift("run", "--project", str(project), "--batch", batches[0], remote="http://127.0.0.1:15002", timeout=60)
    assert r.returncode == 1 and "is not a Spark Connect URL" in r.stderr, r.stderr


@slow
def test_dag_nights_run_their_spark_steps_in_the_task_on_the_server(server, tmp_path):
    """With NIGHTSHIFT_SPARK_REMOTE in the workers' environment, the DAG's propagate and apply-base tasks run
    their steps in the task's own process against the server: no spark-submit starts, and after two nights
    every summary table equals recomputation."""
    from test_dags import run_dag, states

    project = tmp_path / "retail"
    batches = init_project(project, "retail", rows=2000, nights=1)
    (tmp_path / "af").mkdir()
    runs = [{"label": f"n{i}", "conf": {"batch_id": b}} for i, b in enumerate(batches)]
    result, r = run_dag(tmp_path / "af", project, runs, NIGHTSHIFT_SPARK_REMOTE=server["url"])
    log = r.stdout + r.stderr
    for i in range(len(batches)):
        run = result["runs"][f"n{i}"]
        assert run["state"] == "success" and set(states(run).values()) == {"success"}, (states(run), log[-4000:])
    assert f"connecting to Spark ({server['url']})" in log and f"propagate --level 0 {batches[1]}: done in" in log
    assert "Spark-Submit cmd" not in log and "starting Spark" not in log
    cycle = Cycle(load_project(project), progress=lambda _: None)
    try:
        assert check_all(cycle.plan, cycle.lake, cycle.warehouse.read_view) == []
    finally:
        cycle.close()


@slow
def test_a_warm_up_that_cannot_reach_its_server_says_why_and_leaves_nothing(tmp_path):
    """The warm-up's nights fail (nothing listens at the URL): it reports the night's own error, and its scratch
    project goes all the same."""
    from nightshift.connect import _free_port, warm_up

    url = f"sc://127.0.0.1:{_free_port()}"
    seconds, problem = warm_up(tmp_path, url, rows=200)
    assert problem is not None and url in problem, problem
    assert not (tmp_path / "warm-up").exists() and seconds > 0


@slow
def test_stop_ends_the_server_and_stopping_again_says_so(server):
    state = json.loads((server["dir"] / "server.json").read_text())
    r = nightshift("spark-connect", "stop", "--dir", str(server["dir"]))
    assert r.returncode == 0 and f"stopped {server['url']}" in r.stdout, r.stderr
    assert not Path(f"/proc/{state['pid']}").exists() or "SparkConnectServer" not in \
        Path(f"/proc/{state['pid']}/cmdline").read_bytes().decode(errors="replace")
    again = nightshift("spark-connect", "stop", "--dir", str(server["dir"]))
    assert again.returncode == 0 and "not running" in again.stdout
    status = nightshift("spark-connect", "status", "--dir", str(server["dir"]))
    assert status.returncode == 3 and "not running" in status.stdout


def _event(kind: str, **fields) -> str:
    names = {"start": "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart",
             "end": "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd", "task": "SparkListenerTaskEnd"}
    return json.dumps({"Event": names[kind], **fields}, separators=(",", ":")) + "\n"


def _scan(execution: int, tag: str, accumulator: int, path: str) -> str:
    plan = {"nodeName": "Scan parquet", "metadata": {"Location": f"InMemoryFileIndex(1 paths)[{path}]"},
            "metrics": [{"name": "number of output rows", "accumulatorId": accumulator}], "children": []}
    return _event("start", executionId=execution, jobTags=[f"SparkConnect_SessionTag_User__Session_s_Tag_{tag}"],
                  sparkPlanInfo=plan)


def _task(accumulator: int, rows: int) -> str:
    return _event("task", **{"Task Info": {"Accumulables": [{"ID": accumulator, "Update": rows}]}})


def test_the_server_log_is_read_from_where_the_step_began_across_rolled_files(tmp_path):
    """A Spark Connect step's scans, from the server's event log: only the executions tagged for the step, only
    from the byte where the log stood when it began (a line cut there belongs to an earlier event), across the
    files the log rolled over to, without a last line still being written; and the marker's end is seen."""
    ours = lambda start: any(t.endswith("_Tag_step") for t in start.get("jobTags", ()))  # noqa: E731
    first, second = tmp_path / "events_1_app", tmp_path / "events_2_app"
    before = _scan(1, "step", 11, "file:/lake/tables/pos") + _task(11, 1000)  # tagged alike, but before the step
    first.write_text(before + _scan(2, "other", 12, "file:/lake/changes/pos") + _scan(3, "step", 13, "file:/lake/changes/pos")
                     + _task(12, 50) + _task(13, 7))
    second.write_text(_task(13, 3) + _event("end", executionId=3) + _scan(4, "step-end", 14, "x")
                      + _event("end", executionId=4) + _task(13, 100)[:-5])
    begins = len(before) - 10  # inside the last line written before the step: that line is not the step's
    segments = [(first, begins), (second, 0)]
    assert _read_log(segments, ours) == (ScanRows(("file:/lake/changes/pos",), 10),)
    assert _has_ended(segments, "step-end") and not _has_ended([(first, begins)], "step-end")
    assert _read_log([(first, len(before))], ours) == (ScanRows(("file:/lake/changes/pos",), 7),)
