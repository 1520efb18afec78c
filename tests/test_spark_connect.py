"""Spark kept warm between commands: a real Spark Connect server started by `nightshift spark-connect start`,
nights run through the command line with [spark] remote (NIGHTSHIFT_SPARK_REMOTE) pointing at it, and every
summary table equal to its recomputation afterwards; and the Airflow DAG's nights (batch order, reruns, a
backfill of a range, the window and its override) with their Spark steps on it.

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

import pendulum
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
    try:
        assert r.returncode == 0, r.stderr + r.stdout
        assert not elsewhere.exists()  # the warm-up's summary tables never reach the caller's warehouse
        url = r.stdout.strip().splitlines()[-1]
        assert url.startswith("sc://127.0.0.1:") and "started" in r.stdout
        assert "spark-connect: warmed up in " in r.stdout and "warning" not in r.stderr, r.stderr + r.stdout
        assert not (folder / "warm-up").exists()
        yield {"url": url, "dir": folder, "env": env}
    finally:  # a server whose start or warm-up was refused above stops too
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
def test_dag_nights_reruns_order_and_window(server, tmp_path):
    """Real Airflow, the DAG's Spark steps on the server (NIGHTSHIFT_SPARK_REMOTE in the workers' environment:
    propagate and apply-base run in the task's own process, no spark-submit starts): one project, its nights
    through the DAG as the schedule, a data engineer's backfill and an on-call engineer would run them.
    1. night 2 before night 1: propagate refuses (batch order) without retrying, refresh never runs;
    2. night 1 with refresh crashing on its first try: the retry completes it, asset event published;
    3. rerun the whole of night 1: choose_batch finds it done and every other task is skipped at once;
    4. the window gate alone with the window 8 s away: it waits (deferred) until then;
    5. a backfill of the range night 1 .. night 3 (triggered without a logical date): night 1 is done, so
       it runs night 2, up to apply_base (validate and publish marked done without running);
    6. night 2's validate with a summary table corrupted: validate fails, publish does not run, nothing
       is published (no asset event, no published_at); night 2 again with "ignore the batch window" but no
       reason: its refresh is done, so nothing is overridden and refresh passes;
    7. the corruption undone, a run with no batch in its conf (as the schedule starts it) while the window
       is far off and the last one closed: the unvalidated night 2 comes before night 3; its refresh is in
       the ledger, so the window gate passes at once and the closed window stops nothing; its propagate and
       apply-base tasks find their work done without starting Spark, and it is validated and published;
    8. night 3 after its window closed: refresh refuses to start, the tables stay at night 2;
    9. night 3 again with "ignore the batch window" and a reason: it runs, the reason is in the ledger;
    10. a run with no conf when every batch is done: skipped at once.
    After all of it the warehouse equals recomputation and the ledger holds each night once."""
    from test_dags import run_dag, stamp, states

    project = tmp_path / "retail"
    b = init_project(project, "retail", rows=3000, nights=2)
    crash = {"NIGHTSHIFT_CRASH_AT": "refresh:after_merge:SID_sales", "NIGHTSHIFT_CRASH_ONCE": str(tmp_path / "crashed")}
    corrupt = [f'UPDATE "sR_sales__ns" SET "_ns_count" = -"_ns_count"']
    runs = [
        {"label": "out_of_order", "day": 1, "conf": {"batch_id": b[1]}},
        {"label": "crash_once", "day": 0, "conf": {"batch_id": b[0]}, "env": crash},
        {"label": "rerun_whole", "day": 0, "conf": {"batch_id": b[0]}},
        {"label": "gate", "day": 1, "conf": {"batch_id": b[1], "gate_in": 8}, "mark_success": "(?!window_gate$).*"},
        {"label": "range", "no_logical_date": True, "conf": {"batch_id": b[0], "through_batch": b[2]},
         "mark_success": "validate|publish"},
        {"label": "corrupted", "day": 1, "conf": {"batch_id": b[1]}, "mark_success": "(?!choose_batch$|validate$|publish$).*",
         "before_sql": corrupt},
        {"label": "unreasoned", "day": 1, "conf": {"batch_id": b[1], "ignore_window": True}, "mark_success": "validate|publish"},
        {"label": "undone", "no_logical_date": True, "conf": {"gate_in": 300, "closes_in": -60}, "before_sql": corrupt},
        {"label": "late", "day": 2, "conf": {"batch_id": b[2], "closes_in": -60}, "mark_success": "propagate_level_.*"},
        {"label": "override", "day": 2, "conf": {"batch_id": b[2], "closes_in": -60, "ignore_window": True,
                                                 "reason": "catching up after the outage"}},
        {"label": "all_done", "no_logical_date": True, "conf": {}},
    ]
    result, r = run_dag(tmp_path, project, runs, NIGHTSHIFT_SPARK_REMOTE=server["url"])
    log = r.stdout + r.stderr
    assert result["import_errors"] == {} and result["dags"] == ["nightshift__retail"], log[-3000:]
    run = result["runs"]
    assert f"connecting to Spark ({server['url']})" in log and f"propagate --level 0 {b[1]}: done in" in log
    assert "Spark-Submit cmd" not in log and "starting Spark" not in log

    first = states(run["out_of_order"])
    assert run["out_of_order"]["state"] == "failed" and first["propagate_level_0"] == "failed"
    assert first["refresh"] == "upstream_failed" and first["publish"] == "upstream_failed"
    assert f"batch {b[1]} is out of order: batch {b[0]} comes first" in log
    assert run["out_of_order"]["tasks"]["propagate_level_0"]["tries"] == 1  # a retry would meet the same refusal

    assert run["crash_once"]["state"] == "success", (states(run["crash_once"]), log[-4000:])
    assert set(states(run["crash_once"]).values()) == {"success"}
    assert run["crash_once"]["tasks"]["refresh"]["tries"] == 2 and (tmp_path / "crashed").exists()
    assert "injected crash at refresh:after_merge:SID_sales" in log
    assert run["crash_once"]["asset_events"] == [{"batch_id": b[0], "project": str(project)}]

    again = run["rerun_whole"]
    assert again["state"] == "success" and states(again).pop("choose_batch") == "success"
    assert {s for t, s in states(again).items() if t != "choose_batch"} == {"skipped"}
    assert f"choose_batch: batch {b[0]} is already applied and published" in log

    gate = run["gate"]["tasks"]["window_gate"]
    opens = stamp(run["gate"]["conf"]["gate_at"])
    assert run["gate"]["state"] == "success" and stamp(gate["start"]) < opens <= stamp(gate["end"])

    ranged = run["range"]
    assert ranged["state"] == "success", (states(ranged), log[-4000:])
    assert f"choose_batch: batch {b[1]} is the next landed batch not yet applied" in log
    assert ranged["rendered"]["propagate_level_0"]["application_args"][-3] == b[1]
    assert stamp(ranged["tasks"]["refresh"]["start"]) >= stamp(ranged["conf"]["gate_at"])

    bad = run["corrupted"]
    assert bad["state"] == "failed" and states(bad)["validate"] == "failed", (states(bad), log[-4000:])
    assert states(bad)["publish"] == "upstream_failed" and bad["asset_events"] == []
    assert bad["tasks"]["validate"]["tries"] == 1  # wrong data is not retried: on-call is paged
    assert f"batch {b[1]}: summary table sR_sales (sR_sales__ns): check count_star_positive failed" in log
    unreasoned = run["unreasoned"]  # "ignore the batch window" without a reason: nothing to override, refresh is done
    assert unreasoned["state"] == "success" and states(unreasoned)["refresh"] == "success", (states(unreasoned), log[-4000:])
    assert f"refresh {b[1]}: skipped" in log
    assert run["undone"]["state"] == "success", (states(run["undone"]), log[-4000:])
    assert f"choose_batch: batch {b[1]} is refreshed but not yet validated; its refresh is done, so the window gate passes at once" in log
    gate = run["undone"]["tasks"]["window_gate"]
    assert stamp(gate["end"]) - stamp(gate["start"]) < pendulum.duration(seconds=60), gate
    assert run["undone"]["asset_events"] == [{"batch_id": b[1], "project": str(project)}]
    assert f"propagate: skipped (batch {b[1]} is already done); no Spark job started" in log
    assert f"apply-base: skipped (batch {b[1]} is already applied to the base); no Spark job started" in log
    for task in ("propagate_level_0", "apply_base"):  # found done from the lake and the ledger: no Spark step
        ti = run["undone"]["tasks"][task]
        assert stamp(ti["end"]) - stamp(ti["start"]) < pendulum.duration(seconds=20), (task, ti)

    late = states(run["late"])
    assert run["late"]["state"] == "failed" and late["refresh"] == "failed" and late["apply_base"] == "upstream_failed"
    assert run["late"]["tasks"]["refresh"]["tries"] == 1  # a closed window is not retried
    assert "window closed" in log
    override = run["override"]
    assert override["state"] == "success" and set(states(override).values()) == {"success"}, (states(override), log[-4000:])
    assert f"refresh {b[2]}: done" in log and "outside the window: catching up after the outage" in log

    done = run["all_done"]
    assert done["state"] == "success" and {s for t, s in states(done).items() if t != "choose_batch"} == {"skipped"}
    assert "no landed batch is waiting: every one is applied and published" in log

    cycle = Cycle(load_project(project), progress=lambda _: None)
    assert [cycle.status(x) for x in b] == ["done", "done", "done"]
    nights = [row for row in cycle.warehouse.ledger() if row.kind == "batch"]
    assert [row.batch_id for row in nights] == b
    assert all(row.validated_at and row.published_at for row in nights)  # all published, by their publish tasks
    assert nights[2].stats["_window_override"]["reason"] == "catching up after the outage"
    assert "_window_override" not in nights[1].stats
    assert check_all(cycle.plan, cycle.lake, cycle.warehouse.read_view) == []
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


QUERY_SCRIPT = """
import json, sys
from pyspark.sql.connect.client import core
from spark_jobs.session import connect_session, query

sent = []
for kind in ("_execute_and_fetch_as_iterator", "_analyze"):
    original = getattr(core.SparkConnectClient, kind)
    def counted(self, *args, _original=original, _kind=kind, **kwargs):
        sent.append(_kind)
        return _original(self, *args, **kwargs)
    setattr(core.SparkConnectClient, kind, counted)

spark = connect_session(sys.argv[1])
a = spark.createDataFrame([(1, "x"), (2, "y"), (2, "z"), (None, "n")], "k int, v string")
b = spark.createDataFrame([(2, 10.5), (3, 1.0)], "k int, w double")
text = "SELECT a.k, a.v, b.w FROM {a} a JOIN {b} b ON a.k = b.k"
start = len(sent)
q = query(spark, text.format(a="__t_a", b="__t_b"), {"__t_a": a, "__t_b": b})
built = len(sent) - start
rows = sorted(tuple(r) for r in q.collect())
left = [r["tableName"] for r in spark.sql("SHOW TABLES").collect() if r["isTemporary"]]
a.createOrReplaceTempView("__o_a")
b.createOrReplaceTempView("__o_b")
expected = sorted(tuple(r) for r in spark.sql(text.format(a="__o_a", b="__o_b")).collect())

print(json.dumps({"built": built, "rows": rows, "expected": expected, "left": left}))
"""


@slow
def test_a_query_takes_its_relations_along_and_sends_nothing_until_used(server, tmp_path):
    """session.query over Spark Connect: building the DataFrame sends no request (spark.sql sends one, a temporary
    view one each); its rows are the same query's over temporary views; no name of its relations stays in the
    session."""
    script = tmp_path / "query.py"
    script.write_text(QUERY_SCRIPT)
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, str(script), server["url"]], capture_output=True, text=True, env=environment,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["built"] == 0
    assert out["rows"] == out["expected"] == [[2, "y", 10.5], [2, "z", 10.5]]
    assert not {"__t_a", "__t_b"} & set(out["left"])


def test_a_local_query_with_relations_leaves_no_view_behind(spark):
    """session.query in a local session: the relations are temporary views only while the query is analyzed; its
    rows are computed afterwards all the same."""
    from spark_jobs.session import query

    a = spark.createDataFrame([(1, "x"), (2, "y")], "k int, v string")
    b = spark.createDataFrame([(2, 10.5), (2, 1.0)], "k int, w double")
    q = query(spark, "SELECT a.v, b.w FROM __t_a a JOIN __t_b b ON a.k = b.k", {"__t_a": a, "__t_b": b})
    left = [r["tableName"] for r in spark.sql("SHOW TABLES").collect() if r["isTemporary"]]
    assert not {"__t_a", "__t_b"} & set(left)
    assert sorted(tuple(r) for r in q.collect()) == [("y", 1.0), ("y", 10.5)]


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
