"""Airflow DAG factory: one DAG `nightshift__<project>` per nightshift project.

Projects: the folders in NIGHTSHIFT_PROJECTS (separated by ':'), default <repo>/demo-project.
Parsing this file reads only each project's nightshift.toml: no Spark, no database, no lake.

    wait_for_batch ─► propagate (spark-submit) ─► window_gate ─► refresh ─► apply_base (spark-submit)
                                                   (deferred)    (one txn)                     │
                                                                      publish ◄── validate ◄───┘

Warehouse credentials: NIGHTSHIFT_WAREHOUSE_URL, else the Airflow connection named by [warehouse]
airflow_conn_id (resolved when a task runs; spark-submit children get it in NIGHTSHIFT_WAREHOUSE_URL),
else [warehouse] url.

Batch id = trigger conf `batch_id`, else the logical date as YYYYMMDD. Every task is idempotent
(the steps skip what the ledger and the lake say is done), so clearing and rerunning any task of
any night is safe; max_active_runs=1 keeps nights in order.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pendulum
from airflow.providers.standard.sensors.date_time import DateTimeSensorAsync
from airflow.sdk import DAG, Asset, task

REPO = Path(__file__).resolve().parent.parent
SUBMIT = str(REPO / "spark_jobs" / "submit.py")
BATCH = "{{ dag_run.conf.get('batch_id') or ds_nodash }}"
WINDOW_OPENS = (
    "{{ dag_run.conf.get('gate_at') or data_interval_end.in_timezone(params.timezone)"
    ".replace(hour=params.opens_h, minute=params.opens_m, second=0).isoformat() }}"
)


def _projects() -> list[Path]:
    listed = os.environ.get("NIGHTSHIFT_PROJECTS")
    paths = [Path(p) for p in listed.split(os.pathsep) if p] if listed else [REPO / "demo-project"]
    return [p for p in paths if (p / "nightshift.toml").is_file()]


def _window_closes(context, project) -> pendulum.DateTime:
    """When this night's window closes: conf `window_closes_at` (ISO), else [window] closes on the
    day the window opens (the day after the logical date; the next day if it crosses midnight)."""
    override = context["dag_run"].conf.get("window_closes_at")
    if override:
        return pendulum.parse(override)
    tz = project.window.timezone
    day = context["data_interval_end"].in_timezone(tz)
    oh, om = (int(x) for x in project.window.opens.split(":"))
    ch, cm = (int(x) for x in project.window.closes.split(":"))
    closes = day.replace(hour=ch, minute=cm, second=0, microsecond=0)
    return closes.add(days=1) if (ch, cm) <= (oh, om) else closes


def build_dag(root: Path) -> DAG:
    import sys

    sys.path.insert(0, str(REPO))
    from nightshift import config
    # inside tasks, load_project also resolves [warehouse] airflow_conn_id (Airflow connection -> warehouse URL)
    from nightshift.airflow_ext import ChangeBatchSensor, NightshiftSparkSubmit, load_project

    project = config.load_project(root)  # parse time: reads nightshift.toml only, never a connection
    name = re.sub(r"[^A-Za-z0-9_]", "_", project.name)
    opens_h, opens_m = (int(x) for x in project.window.opens.split(":"))
    published = Asset(name=f"nightshift__{name}__published", uri=f"file://{project.lake}/published")
    with DAG(
        dag_id=f"nightshift__{name}",
        description=f"nightshift summary-table maintenance for {root}",
        schedule="@daily",
        start_date=pendulum.datetime(2026, 1, 1, tz=project.window.timezone),
        catchup=False,
        max_active_runs=1,
        default_args={"retries": 2, "retry_delay": pendulum.duration(minutes=2)},
        params={"timezone": project.window.timezone, "opens_h": opens_h, "opens_m": opens_m},
        tags=["nightshift"],
    ) as dag:
        wait = ChangeBatchSensor(
            task_id="wait_for_batch", pattern=f"{project.lake}/changes/*/batch_id={BATCH}",
            poke_interval=60, timeout=18 * 3600,
        )
        spark_args = {"conn_id": "spark_default", "application": SUBMIT, "conf": {"spark.ui.enabled": "false"},
                      "warehouse_conn_id": project.warehouse_conn_id}
        propagate = NightshiftSparkSubmit(
            task_id="propagate", application_args=["propagate", "--project", str(root), "--batch", BATCH], **spark_args
        )
        gate = DateTimeSensorAsync(task_id="window_gate", target_time=WINDOW_OPENS)

        @task
        def refresh(batch: str, **context) -> str:
            from airflow.exceptions import AirflowFailException

            from nightshift.cycle import Cycle

            closes = _window_closes(context, project)
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
            outlet_events[published].extra = {"batch_id": batch, "project": str(root)}
            return batch

        refreshed = refresh(BATCH)
        wait >> propagate >> gate >> refreshed >> apply_base
        checked = validate(BATCH)
        apply_base >> checked
        publish(checked)
    return dag


for _root in _projects():  # airflow dag discovery: module-level DAG objects
    _dag = build_dag(_root)
    globals()[_dag.dag_id] = _dag
