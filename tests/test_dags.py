"""The Airflow DAG factory under real Airflow (`dag.test()`), in a subprocess with its own AIRFLOW_HOME:
choose the night -> propagate, one spark-submit per D-lattice level -> window gate -> refresh -> apply-base
-> validate -> publish; the first run, the plan's cache, a project of every mode through an Airflow connection.
The nights' order, ranges, reruns, the window and its override run the same DAG with its Spark steps on a warm
Spark Connect server (tests/test_spark_connect.py)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re
import subprocess
import sys
import zoneinfo
from pathlib import Path
from urllib.parse import quote, unquote

import pendulum
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from conftest import PG_URL
from sqlalchemy.engine import make_url

from nightshift.config import Window, load_project
from nightshift.cycle import Cycle
from nightshift.example import init_project
from nightshift.oracle import check_all
from nightshift.plancache import plan_summary

ROOT = Path(__file__).resolve().parent.parent


def run_dag(tmp_path, project: Path, runs: list[dict], **env_vars: str | None) -> tuple[dict, subprocess.CompletedProcess]:
    """dag.test() runs of the project's DAG in a subprocess with a fresh AIRFLOW_HOME (tests/dag_run_script.py;
    `runs` as its SPEC describes); env_vars override the environment, and those set to None are removed. One
    retry, one second apart, unless env_vars say otherwise."""
    env = dict(
        AIRFLOW_HOME=str(tmp_path / "airflow"),
        AIRFLOW__CORE__DAGS_FOLDER=str(ROOT / "dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": "local[2]"}),
        NIGHTSHIFT_PROJECTS=str(project),
        NIGHTSHIFT_RETRIES="1",
        NIGHTSHIFT_RETRY_DELAY="1",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        PYTHONPATH=str(ROOT),
    )
    env = {k: v for k, v in {**os.environ, **env, **env_vars}.items() if v is not None}
    spec, out = tmp_path / "spec.json", tmp_path / "result.json"
    spec.write_text(json.dumps({"runs": runs}))
    r = subprocess.run([sys.executable, str(ROOT / "tests" / "dag_run_script.py"), str(spec), str(out)],
                       env=env, capture_output=True, text=True, timeout=1800)
    assert out.is_file(), r.stdout[-3000:] + r.stderr[-3000:]
    return json.loads(out.read_text()), r


def states(run: dict) -> dict[str, str]:
    return {t: ti["state"] for t, ti in run["tasks"].items()}


def stamp(value: str) -> pendulum.DateTime:
    return pendulum.parse(value)


# what Spark prints with its own logging: INFO/WARN lines (yy/MM/dd HH:mm:ss LEVEL Class: ...), the JVM's notice
SPARK_LOG = re.compile(r"\d\d/\d\d/\d\d \d\d:\d\d:\d\d (INFO|WARN) \w+:|Using incubator modules|default log4j profile")

# Figure 3 of paper 001: SID_sales from the changes, sCD_sales and SiC_sales from SID_sales, sR_sales from sCD_sales
FIGURE_3_LEVELS = [["SID_sales"], ["SiC_sales", "sCD_sales"], ["sR_sales"]]


def test_dag_parses_without_work_and_follows_the_lattice(tmp_path):
    """Parsing reads text files only (the project has no lake data yet, and no warehouse exists after the
    parse); the task graph is choose_batch -> one propagate task per D-lattice level, in order -> gate ->
    refresh -> apply_base -> validate -> publish (and compact after apply_base), the levels those of Figure 3;
    the DAG and every task say
    what they do, and the trigger form asks for the batch, a range and the window override."""
    project = tmp_path / "retail"
    init_project(project, None, rows=0)
    result, r = run_dag(tmp_path, project, [])
    print(f"DAG parse time (DagBag of dags/, one project): {result['parse_seconds']:.2f}s cold, "
          f"{result['reparse_seconds']:.2f}s warm with the plan cached")
    assert result["import_errors"] == {} and result["dags"] == ["nightshift__retail"], r.stderr[-3000:]
    graph = result["graph"]
    levels = [f"propagate_level_{k}" for k in range(len(FIGURE_3_LEVELS))]
    chain = ["choose_batch", *levels, "window_gate", "refresh", "apply_base", "validate", "publish"]
    assert set(graph) == set(chain) | {"compact"}
    for upstream, downstream in zip(chain, chain[1:]):
        assert downstream in graph[upstream], (upstream, graph[upstream])
    assert "compact" in graph["apply_base"] and graph["compact"] == []
    for k, points in enumerate(FIGURE_3_LEVELS):
        assert f"level {k} ({', '.join(points)})" in result["docs"][levels[k]]
    assert set(result["docs"]) == set(chain) | {"compact"}
    assert "one change batch per run" in result["description"] and "Trigger form" in result["dag_doc"]
    assert set(result["params"]) == {"batch_id", "through_batch", "ignore_window", "reason"}
    assert not (project / "warehouse.duckdb").exists() and not list((project / "lake").rglob("*.parquet"))


def test_first_run_of_a_fresh_dag_blocks_nothing(tmp_path):
    """An unpaused DAG whose project has no landed batch: its run (scheduled, no conf) finds nothing to do
    and is skipped at once, so nothing waits and a manual trigger is never queued behind it; a manual
    trigger naming a batch that has not landed fails at once, saying so."""
    project = tmp_path / "retail"
    init_project(project, None, rows=0)
    runs = [{"label": "first", "conf": {}}, {"label": "missing", "no_logical_date": True, "conf": {"batch_id": "20260102"}}]
    result, r = run_dag(tmp_path, project, runs)
    log = r.stdout + r.stderr
    first = result["runs"]["first"]
    assert first["state"] == "success", (states(first), log[-3000:])
    assert states(first)["choose_batch"] == "success"
    assert {s for t, s in states(first).items() if t != "choose_batch"} == {"skipped"}
    assert stamp(first["tasks"]["publish"]["end"]) - stamp(first["tasks"]["choose_batch"]["start"]) < pendulum.duration(minutes=1)
    assert "no landed batch is waiting" in log
    missing = result["runs"]["missing"]
    assert missing["state"] == "failed" and states(missing)["choose_batch"] == "failed"
    assert "batch 20260102 has not landed: no folder lake/changes/<table>/batch_id=20260102" in log


def test_plan_is_compiled_once_per_inputs(tmp_path):
    """The DAG's plan summary comes from the cache while nightshift.toml and sql/ are unchanged; an edit recompiles."""
    project = tmp_path / "retail"
    init_project(project, None, rows=0)
    first = plan_summary(project)
    assert not first["cached"] and first["levels"] == FIGURE_3_LEVELS
    cache = project / ".nightshift" / "plan-cache.json"
    written = cache.stat().st_mtime_ns
    again = plan_summary(project)
    assert again["cached"] and again["levels"] == first["levels"] and cache.stat().st_mtime_ns == written
    view = project / "sql" / "summaries" / "sR_sales.sql"
    view.unlink()  # a plan without sR_sales: level 2 goes away
    edited = plan_summary(project)
    assert not edited["cached"] and edited["hash"] != first["hash"] and edited["levels"] == FIGURE_3_LEVELS[:2]
    assert plan_summary(project)["cached"]


def test_window_of_a_night_and_of_a_backfill():
    """The window a run refreshes in ([window] 23:00-03:00 Europe/Berlin, crossing midnight): a night's run
    takes the window opening on its day; a backfill takes the window open now, else the next one."""
    berlin = zoneinfo.ZoneInfo("Europe/Berlin")
    w = Window("23:00", "03:00", "Europe/Berlin")
    at = lambda d, h, m=0: dt.datetime(2026, 11, d, h, m, tzinfo=berlin)  # noqa: E731
    assert w.on(dt.date(2026, 11, 2)) == (at(2, 23), at(3, 3))
    assert w.current_or_next(at(3, 0, 30)) == (at(2, 23), at(3, 3))  # inside the window that opened yesterday
    assert w.current_or_next(at(3, 3, 30)) == (at(3, 23), at(4, 3))  # just closed: tonight's
    assert w.current_or_next(at(3, 23, 5).astimezone(dt.timezone.utc)) == (at(3, 23), at(4, 3))
    day = Window("01:00", "05:00", "UTC")
    assert day.on(dt.date(2026, 11, 2))[1] == dt.datetime(2026, 11, 2, 5, tzinfo=zoneinfo.ZoneInfo("UTC"))


def test_batch_and_window_of_runs_with_and_without_a_logical_date(monkeypatch):
    """The DAG's macros: a run refreshes in the window open when it started, else the next one, the same
    window on every retry; conf overrides win and "ignore the batch window" opens it at the start and
    never closes it. A capture task's batch is the logical date, or conf batch_id. A range handed on by
    a published night's asset event reaches the next run."""
    from types import SimpleNamespace

    monkeypatch.setenv("NIGHTSHIFT_PROJECTS", "/nonexistent")  # import the module without building DAGs
    sys.path.insert(0, str(ROOT / "dags"))
    import nightshift_dags as d

    utc = zoneinfo.ZoneInfo("UTC")
    w = Window("01:00", "05:00", "UTC")
    night = SimpleNamespace(run_id="scheduled__1", conf={}, run_type="scheduled", start_date=dt.datetime(2026, 11, 2, 14, tzinfo=utc),
                            logical_date=dt.datetime(2026, 11, 2, 14, tzinfo=utc))
    assert d.batch_of(night) == "20261102"
    assert d.window_of(w, night) == ("2026-11-03T01:00:00+00:00", "2026-11-03T05:00:00+00:00")
    inside = SimpleNamespace(run_id="scheduled__2", conf={}, start_date=dt.datetime(2026, 11, 3, 2, tzinfo=utc))
    assert d.window_of(w, inside) == ("2026-11-03T01:00:00+00:00", "2026-11-03T05:00:00+00:00")
    manual = SimpleNamespace(run_id="manual__1", conf={"batch_id": "b7"}, run_type="manual", logical_date=None, start_date=None)
    assert d.batch_of(manual) == "b7"
    opens, closes = (pendulum.parse(x) for x in d.window_of(w, manual))
    assert closes > pendulum.now("UTC") and closes - opens == pendulum.duration(hours=4)
    manual.conf.update(gate_at="2026-11-24T01:30:00+00:00")
    assert d.window_of(w, manual)[0] == "2026-11-24T01:30:00+00:00"
    now = SimpleNamespace(run_id="manual__4", conf={"ignore_window": True, "window_closes_at": "2020-01-01T00:00:00+00:00"},
                          start_date=dt.datetime(2026, 11, 2, 14, tzinfo=utc))
    opens, closes = d.window_of(w, now)
    assert opens == "2026-11-02T14:00:00+00:00" and pendulum.parse(closes) > pendulum.now("UTC")
    # a night already refreshed (nightshift run, or a run that stopped at validate) waits for no window and
    # is not stopped by one that closed: the ledger has its refresh
    done = SimpleNamespace(run_id="scheduled__5", conf={"gate_at": "2026-11-24T01:30:00+00:00",
                                                        "window_closes_at": "2020-01-01T00:00:00+00:00"},
                           start_date=dt.datetime(2026, 11, 2, 14, tzinfo=utc))
    opens, closes = d.window_of(w, done, True)
    assert opens == "2026-11-02T14:00:00+00:00" and pendulum.parse(closes) > pendulum.now("UTC")
    assert d.window_of(w, done, False)[0] == "2026-11-24T01:30:00+00:00"
    with pytest.raises(ValueError, match="manual__2 has no logical date and no batch_id"):
        d.batch_of(SimpleNamespace(run_id="manual__2", conf=None, logical_date=None))
    # a batch id is checked before it reaches a path
    for bad in ("../../etc", "*", "b1/../b2", "b 1"):
        with pytest.raises(ValueError, match=r"manual__3: conf batch_id: batch id .* is not valid"):
            d.batch_of(SimpleNamespace(run_id="manual__3", conf={"batch_id": bad}, logical_date=None))
        with pytest.raises(ValueError, match=r"manual__3: conf through_batch: batch id .* is not valid"):
            d._range_of({"dag_run": SimpleNamespace(run_id="manual__3", conf={"batch_id": "b1", "through_batch": bad})})
    ranged = {"dag_run": SimpleNamespace(run_id="manual__5", conf={"batch_id": "b1", "through_batch": "b4"})}
    assert d._range_of(ranged) == ("b1", "b4")
    event = SimpleNamespace(extra={"batch_id": "b2", "through_batch": "b4"})
    chained = {"dag_run": SimpleNamespace(run_id="asset__1", conf={}), "triggering_asset_events": {"published": [event]}}
    assert d._range_of(chained) == ("", "b4")
    assert d._range_of({"dag_run": SimpleNamespace(run_id="scheduled__3", conf={})}) == ("", "")


EVERY_MODE = {  # beside Figure 1's four views of the retail example: one view of each other kind
    "monthly": "CREATE VIEW monthly AS SELECT storeID, CAST(DATE_TRUNC('month', date) AS DATE) AS month, "
               "COUNT(*) AS n, SUM(qty) AS q FROM pos GROUP BY storeID, CAST(DATE_TRUNC('month', date) AS DATE)",
    "totals": "CREATE VIEW totals AS SELECT COUNT(*) AS n, SUM(qty) AS q, MAX(price) AS top_price FROM pos",
    "busy_days": "CREATE VIEW busy_days AS SELECT storeID, date, COUNT(*) AS n FROM pos GROUP BY storeID, date "
                 "HAVING COUNT(*) >= 3",
    "best_item_day": "CREATE VIEW best_item_day AS SELECT storeID, MAX(TotalQuantity) AS best, COUNT(*) AS itemdays "
                     "FROM SID_sales GROUP BY storeID",
    "store_items": "CREATE VIEW store_items AS SELECT s.storeID, s.city, COUNT(DISTINCT p.itemID) AS items "
                   "FROM stores s LEFT JOIN pos p ON p.storeID = s.storeID GROUP BY s.storeID, s.city",
    "region_items": "CREATE VIEW region_items AS SELECT region, COUNT(DISTINCT itemID) AS items, SUM(qty) AS q, "
                    "MEDIAN(itemID) AS mid_item "
                    "FROM pos JOIN stores ON pos.storeID = stores.storeID GROUP BY region",
}


def _fresh(folder: Path) -> Path:
    folder.mkdir()
    return folder


def _airflow_connection(project: Path, schema: str, password: str) -> str:
    """[warehouse] airflow_conn_id = "ns_warehouse" in the project, and that connection (JSON) to the
    PostgreSQL schema `schema`, with a password that needs URL-quoting (trust auth ignores it)."""
    toml = project / "nightshift.toml"
    toml.write_text(re.sub(r'(?m)^url = .*$', 'airflow_conn_id = "ns_warehouse"', toml.read_text()))
    pg = make_url(PG_URL)
    return json.dumps({"conn_type": "postgres", "host": pg.host, "port": pg.port, "login": pg.username,
                       "password": password, "schema": pg.database,
                       "extra": {"options": f"-csearch_path={schema}", "cursor": "dictcursor"}})


def test_dag_keeps_every_mode_through_an_airflow_connection_and_stops_at_an_unapplied_change(tmp_path, pg_schemas, spark):
    """The DAG over a project with a view of every mode (computed key, grand total, HAVING, nested,
    auxiliary, recompute), its warehouse a PostgreSQL schema named by an Airflow connection ([warehouse]
    airflow_conn_id): the initial load on this process's Spark, then a night end to end, validated and
    published, every view equal to recomputation, the nested view in a later propagate task than the view it
    reads; a third night whose batch holds a file of the wrong type fails in its spark-submit child at once,
    without retrying. Refresh and validate (in the task) and propagate and apply-base (spark-submit children,
    through NIGHTSHIFT_WAREHOUSE_URL) all use the connection; its password shows up in no log, no output and no
    rendered template field. Then a view file is added and a broken one too: the next night's first propagate
    step runs the applied layer, the DAG's plan leaves both out, and `nightshift status` names them."""
    url = pg_schemas("airflow_conn")  # what the connection below must come to
    schema = unquote(url.split("search_path%3D")[1])
    project = tmp_path / "retail"
    b = init_project(project, "retail", rows=3000, nights=2)
    for name, sql in EVERY_MODE.items():
        (project / "sql" / "summaries" / f"{name}.sql").write_text(sql + "\n")
    toml = project / "nightshift.toml"  # pos laid out by month, sCD_sales over a map of pos
    toml.write_text(toml.read_text().replace('path = "lake"\n', 'path = "lake"\npartition_by = { pos = "date" }\n', 1)
                    + '\n[views]\nsCD_sales = "map"\n')
    modes = {v.name: v.mode for v in load_project(project).plan.views}
    assert modes["best_item_day"] == "nested" and modes["store_items"] == "recompute" and modes["monthly"] == "delta"
    assert modes["region_items"] == "auxiliary" and modes["sCD_sales"] == "auxiliary"
    password = "Night/Shift@pw-7f3e"
    conn = _airflow_connection(project, schema, password)
    # the initial load (3,000 rows) runs here, on this process's Spark: through the DAG it was the same tasks as the
    # night after it, each a spark-submit of its own (the test took 383-425 s in the suite with it, 271 s without)
    on_pg = dataclasses.replace(load_project(project), warehouse_url=url)  # the project as the connection reaches it
    first = Cycle(on_pg, spark=spark, progress=lambda _: None)
    first.run(b[0])
    first.close()
    runs = [{"label": "n1", "day": 1, "conf": {"batch_id": b[1]}}]
    runs += [{"label": "bad", "day": 2, "conf": {"batch_id": b[2]}}]  # with a file of the wrong type, below
    changes = project / "lake" / "changes" / "pos" / f"batch_id={b[2]}"
    good = pq.read_table(next(changes.glob("*.parquet")))
    bad_file = changes / "part-bad.parquet"
    pq.write_table(good.set_column(good.schema.get_field_index("qty"), "qty", pc.cast(good["qty"], pa.string())), bad_file)
    result, r = run_dag(_fresh(tmp_path / "a"), project, runs, AIRFLOW_CONN_NS_WAREHOUSE=conn, NIGHTSHIFT_WAREHOUSE_URL=None)
    log = r.stdout + r.stderr
    assert result["import_errors"] == {} and result["dags"] == ["nightshift__retail"], log[-3000:]
    # the spark-submit tasks' logs are as quiet as nightshift run: nightshift's lines and Spark's errors only
    assert "Spark-Submit cmd" in log and "spark_jobs/log4j2.properties" in log
    noise = SPARK_LOG.search(log)
    assert noise is None, log[max(0, noise.start() - 500):noise.end() + 500]
    # a bad change batch found in the spark-submit child fails its task at once with the step's own error (a
    # retry would meet the same: NIGHTSHIFT_RETRIES=1 here), and nothing after it runs
    bad = states(result["runs"]["bad"])
    assert result["runs"]["bad"]["state"] == "failed" and bad["propagate_level_0"] == "failed", bad
    assert result["runs"]["bad"]["tasks"]["propagate_level_0"]["tries"] == 1, log[-4000:]
    assert bad["refresh"] == "upstream_failed" and bad["publish"] == "upstream_failed"
    assert re.search(rf"batch {b[2]}: .*part-bad\.parquet: column qty .*\(not retried: a retry meets the same refusal",
                     log), log[-4000:]
    bad_file.unlink()
    assert result["runs"]["n1"]["state"] == "success", (states(result["runs"]["n1"]), log[-4000:])
    docs = result["docs"]
    level_of = {p.strip(): int(k.rsplit("_", 1)[1]) for k, d in docs.items() if k.startswith("propagate_level_")
                for p in re.search(r"level \d+ \(([^)]*)\)", d).group(1).split(",")}
    assert level_of["best_item_day"] > level_of["SID_sales"], docs
    plan = load_project(project).plan
    assert level_of["region_items"] > level_of[plan.view("region_items").reads[0]], docs  # over its auxiliary view
    assert level_of["sCD_sales"] > level_of[plan.view("sCD_sales").reads[0]], docs  # over its map
    assert not (project / "warehouse.duckdb").exists()  # nobody fell back to the default DuckDB file
    assert result["runs"]["n1"]["rendered"]["propagate_level_0"]["env_vars"] is None  # resolved after rendering
    logs = [p.read_text(errors="replace") for p in (tmp_path / "a").rglob("*.log")]
    seen = "\n".join([r.stdout, r.stderr, json.dumps(result), *logs])
    for secret in (password, quote(password, safe="")):
        assert secret not in seen
    cycle = Cycle(on_pg, progress=lambda _: None)
    assert [cycle.status(x) for x in b[:2]] == ["done", "done"]
    assert check_all(cycle.plan, cycle.lake, cycle.warehouse.read_view) == []
    assert [row.published_at is not None for row in cycle.warehouse.ledger() if row.kind == "batch"] == [False, True]
    cycle.close()

    # an unapplied change never stops the next night: it runs the applied layer (the DAG's first propagate
    # task runs this same step; tests/test_applied_layer.py and tests/test_apply.py cover apply itself)
    (project / "sql" / "summaries" / "yearly.sql").write_text(
        "CREATE VIEW yearly AS SELECT CAST(EXTRACT(year FROM date) AS INT) AS y, SUM(qty) AS q FROM pos "
        "GROUP BY CAST(EXTRACT(year FROM date) AS INT)\n")
    (project / "sql" / "summaries" / "broken.sql").write_text("CREATE VIEW broken AS SELECT nope FROM pos\n")
    summary = plan_summary(project)  # the DAG's parse: the applied layer, not broken by the working files
    assert "yearly" not in summary["views"] and "broken" not in summary["views"] and "SID_sales" in summary["views"]
    nightshift = str(Path(sys.executable).parent / "nightshift")
    env = dict(os.environ, PYTHONPATH=str(ROOT), NIGHTSHIFT_WAREHOUSE_URL=url)
    r = subprocess.run([nightshift, "propagate", "--project", str(project), "--batch", b[2], "--level", "0"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0 and f"propagate --level 0 {b[2]}: done" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([nightshift, "status", "--project", str(project)], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "added yearly not yet applied (nightshift apply)" in r.stdout, r.stdout + r.stderr
    assert "sql/summaries/broken.sql" in r.stdout and "does not compile" in r.stdout, r.stdout
