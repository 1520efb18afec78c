"""Airflow DAG factory: one DAG `nightshift__<project>` per nightshift project.

Projects: the folders in NIGHTSHIFT_PROJECTS (separated by ':'), default <repo>/demo-project.
Parsing this file reads only each project's text files (nightshift.toml, sql/): no Spark, no
database, no lake; the plan's levels come from nightshift.plancache (compiled once per inputs' hash).

    wait_for_batch ─► propagate_level_0 ─► … ─► propagate_level_<n> ─► window_gate ─► refresh ─► apply_base
                      (one spark-submit per D-lattice level)            (deferred)    (one txn)   (spark-submit)
                                                                          publish ◄── validate ◄───┘

With [capture.<table>] sources in nightshift.toml a `capture` task (spark-submit of nightshift capture) runs
first and writes the night's batch from them: capture ─► wait_for_batch ─► …

Warehouse credentials: NIGHTSHIFT_WAREHOUSE_URL, else the Airflow connection named by [warehouse]
airflow_conn_id (resolved when a task runs; spark-submit children get it in NIGHTSHIFT_WAREHOUSE_URL),
else [warehouse] url.

Batch id = trigger conf `batch_id`, else the logical date as YYYYMMDD. Every task is idempotent
(the steps skip what the ledger and the lake say is done), so clearing and rerunning any task of
any night is safe; max_active_runs=1 and the batch-order check of every step keep nights in order.
Retries: NIGHTSHIFT_RETRIES (default 2), NIGHTSHIFT_RETRY_DELAY seconds apart (default 120); a closed
window and a failed validation are not retried (AirflowFailException).
"""

from __future__ import annotations

import functools
import os
import re
import sys
from pathlib import Path

import pendulum
from airflow.providers.standard.sensors.date_time import DateTimeSensorAsync
from airflow.sdk import DAG, Asset, chain, task

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the DAG processor imports this file by path: the checkout's packages

from nightshift import config  # noqa: E402
from nightshift.airflow_ext import ChangeBatchSensor, NightshiftSparkSubmit, load_project  # noqa: E402
from nightshift.errors import BadChangeBatch  # noqa: E402
from nightshift.plancache import plan_summary  # noqa: E402
from runtime.lake import check_batch_id  # noqa: E402

SUBMIT = str(REPO / "nightshift" / "submit.py")
BATCH = "{{ batch_of(dag_run) }}"
WINDOW_OPENS = "{{ window_of(dag_run)[0] }}"


def _projects() -> list[Path]:
    listed = os.environ.get("NIGHTSHIFT_PROJECTS")
    paths = [Path(p) for p in listed.split(os.pathsep) if p] if listed else [REPO / "demo-project"]
    return [p for p in paths if (p / "nightshift.toml").is_file()]


def batch_of(dag_run) -> str:
    """The run's batch id: trigger conf `batch_id`, else its logical date as YYYYMMDD (UTC). A run
    triggered without a logical date (Airflow 3's default for the API and an option in the UI) must
    name its batch."""
    conf = dag_run.conf or {}
    if conf.get("batch_id"):
        batch = str(conf["batch_id"])
        try:  # before the id reaches a glob pattern or a path
            check_batch_id(batch)
        except BadChangeBatch as e:
            raise ValueError(f"run {dag_run.run_id}: conf batch_id: {e}") from None
        return batch
    logical = getattr(dag_run, "logical_date", None)
    if logical is None:
        raise ValueError(f"run {dag_run.run_id} has no logical date and no batch_id in its conf: "
                         'trigger it with conf {"batch_id": "<ID>"} (the folder lake/changes/<table>/batch_id=<ID>)')
    return pendulum.instance(logical).in_timezone("UTC").strftime("%Y%m%d")


def window_of(window, dag_run) -> tuple[str, str]:
    """(opens, closes) of the window a run refreshes in, ISO: conf `gate_at` / `window_closes_at` when
    given; a scheduled run, or a manual one with a logical date: the window that opens on the day its
    data interval ends (the night after the logical date); a backfill, or a manual run without a
    logical date: the window open now, else the next one, so nights triggered or backfilled from the
    UI refresh one by one in real windows (nights that do not fit fail with "window closed" and are
    rerun in the next window)."""
    conf = dag_run.conf or {}
    end = getattr(dag_run, "data_interval_end", None)
    if end is None or "backfill" in str(getattr(dag_run, "run_type", "")).lower():
        opens, closes = window.current_or_next(pendulum.now("UTC"))
    else:
        opens, closes = window.on(pendulum.instance(end).in_timezone(window.timezone).date())
    return conf.get("gate_at") or opens.isoformat(), conf.get("window_closes_at") or closes.isoformat()


def build_dag(root: Path) -> DAG:
    """Inside tasks, airflow_ext.load_project also resolves [warehouse] airflow_conn_id (Airflow
    connection -> warehouse URL); at parse time config.load_project reads nightshift.toml only."""
    project = config.load_project(root)  # parse time: reads nightshift.toml only, never a connection
    plan = plan_summary(root)  # the D-lattice's levels, compiled once per inputs' hash
    name = re.sub(r"[^A-Za-z0-9_]", "_", project.name)
    published = Asset(name=f"nightshift__{name}__published", uri=f"file://{project.lake}/published")
    with DAG(
        dag_id=f"nightshift__{name}",
        description=f"nightshift summary-table maintenance for {root}",
        schedule="@daily",
        start_date=pendulum.datetime(2026, 1, 1, tz=project.window.timezone),
        catchup=False,
        max_active_runs=1,
        default_args={"retries": int(os.environ.get("NIGHTSHIFT_RETRIES", "2")),
                      "retry_delay": pendulum.duration(seconds=float(os.environ.get("NIGHTSHIFT_RETRY_DELAY", "120")))},
        user_defined_macros={"window_of": functools.partial(window_of, project.window), "batch_of": batch_of},
        tags=["nightshift"],
    ) as dag:
        wait = ChangeBatchSensor(
            task_id="wait_for_batch", pattern=f"{project.lake}/changes/*/batch_id={BATCH}",
            poke_interval=60, timeout=18 * 3600,
        )
        spark_args = {"conn_id": "spark_default", "application": SUBMIT, "conf": {"spark.ui.enabled": "false"},
                      "warehouse_conn_id": project.warehouse_conn_id}
        propagate = [
            NightshiftSparkSubmit(
                task_id=f"propagate_level_{k}",
                application_args=["propagate", "--project", str(root), "--batch", BATCH, "--level", str(k)],
                doc_md=f"Summary-deltas of D-lattice level {k}: {', '.join(points)} (plan {plan['fingerprint']}); "
                       + ("writes the manifest refresh needs" if k == len(plan["levels"]) - 1 else "later levels derive from them"),
                **spark_args,
            )
            for k, points in enumerate(plan["levels"])
        ]
        gate = DateTimeSensorAsync(task_id="window_gate", target_time=WINDOW_OPENS)

        @task
        def refresh(batch: str, **context) -> str:
            from airflow.exceptions import AirflowFailException

            from nightshift.cycle import Cycle

            closes = pendulum.parse(window_of(project.window, context["dag_run"])[1])
            if pendulum.now("UTC") > closes:
                raise AirflowFailException(
                    f"batch {batch}: the batch window closed at {closes.isoformat()}; refresh did not start "
                    f"and the summary tables stay at the previous night (rerun in the next window)"
                )
            r = Cycle(load_project(root)).refresh(batch)
            print(f"refresh {batch}: " + (f"skipped ({r.skipped})" if r.skipped else f"done in {r.seconds:.2f}s"))
            return batch

        apply_base = NightshiftSparkSubmit(
            task_id="apply_base", application_args=["apply-base", "--project", str(root), "--batch", BATCH], **spark_args
        )

        @task
        def validate(batch: str) -> str:
            """The Great Expectations gate (nightshift validate): publish only follows success."""
            from airflow.exceptions import AirflowFailException

            from nightshift.validate import ValidationFailed, validate_batch

            try:
                report = validate_batch(load_project(root), batch)
            except ValidationFailed as e:  # the data is wrong: a retry cannot fix it, page on-call
                raise AirflowFailException(str(e)) from None
            print(report.message())
            return batch

        @task(outlets=[published])
        def publish(batch: str, *, outlet_events=None) -> str:
            """published_at in the ledger (refused unless validate passed), then the asset event."""
            from nightshift.cycle import Cycle

            cycle = Cycle(load_project(root))
            r = cycle.publish(batch)
            cycle.close()
            print(f"publish {batch}: " + (f"skipped ({r.skipped})" if r.skipped else f"published at {r.details['published_at']}"))
            outlet_events[published].extra = {"batch_id": batch, "project": str(root)}
            return batch

        if project.settings.get("capture"):  # [capture.*] sources: the night's batch is captured from them first
            NightshiftSparkSubmit(
                task_id="capture", application_args=["capture", "--project", str(root), "--batch", BATCH],
                doc_md=f"nightshift capture: {', '.join(sorted(project.settings['capture']))} from their [capture.*] "
                       "sources become the batch (compared with the base as of the last applied batch)",
                **spark_args,
            ) >> wait
        refreshed = refresh(BATCH)
        chain(wait, *propagate, gate, refreshed, apply_base)
        checked = validate(BATCH)
        apply_base >> checked
        publish(checked)
    return dag


for _root in _projects():  # airflow dag discovery: module-level DAG objects
    _dag = build_dag(_root)
    globals()[_dag.dag_id] = _dag
