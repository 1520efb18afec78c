"""Prototype nightshift DAG factory: one DAG per project `nightshift__<project>`."""
from __future__ import annotations
import os
import pendulum
from airflow.sdk import DAG, Asset, task
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.sensors.date_time import DateTimeSensorAsync
from aflab_ext.sensors import DirExistsSensor

BATCH_ID = "{{ dag_run.conf.get('batch_id') or ds_nodash }}"
# Window gate: 06:00 local time on the day after the logical date; conf['gate_at'] (ISO string) overrides.
GATE_AT = ("{{ dag_run.conf.get('gate_at') or "
           "data_interval_end.in_timezone(params.tz).replace(hour=params.gate_hour, minute=0, second=0).isoformat() }}")


def build_dag(project: str, cfg: dict) -> DAG:
    lake = cfg["lake"]
    published = Asset(name=f"nightshift__{project}__published", uri=f"file://{lake}/published/{project}")
    with DAG(
        dag_id=f"nightshift__{project}",
        schedule=cfg.get("schedule", "@daily"),
        start_date=pendulum.datetime(2026, 1, 1, tz=cfg.get("tz", "UTC")),
        catchup=True,
        max_active_runs=1,
        default_args={"retries": 0, "depends_on_past": False},
        params={"tz": cfg.get("tz", "UTC"), "gate_hour": cfg.get("gate_hour", 6)},
        tags=["nightshift", project],
    ) as dag:
        sensors = [
            DirExistsSensor(task_id=f"wait__{t}", path=f"{lake}/changes/{t}/batch_id={BATCH_ID}",
                            poke_interval=30, timeout=6 * 3600, mode="reschedule")  # mode only used if not deferrable
            for t in cfg["tables"]
        ]
        sparks = [
            SparkSubmitOperator(
                task_id=f"spark__{t}", conn_id="spark_default", application=cfg["spark_app"],
                application_args=[f"{lake}/staged/{t}", BATCH_ID], name=f"nightshift-{project}-{t}",
                conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
            )
            for t in cfg["tables"]
        ]
        gate = DateTimeSensorAsync(task_id="window_gate", target_time=GATE_AT)

        @task
        def refresh(**ctx): return ctx["dag_run"].conf.get("batch_id") or ctx["ds_nodash"]

        @task
        def apply_base(batch_id: str): return batch_id

        @task
        def validate(batch_id: str): return batch_id

        @task(outlets=[published])
        def publish(batch_id: str, *, outlet_events=None):
            outlet_events[published].extra = {"batch_id": batch_id, "project": project}
            return batch_id

        for s, sp in zip(sensors, sparks):
            s >> sp >> gate
        r = refresh()
        gate >> r
        publish(validate(apply_base(r)))
    return dag


def build_all(projects: dict[str, dict]) -> dict[str, DAG]:
    return {f"nightshift__{p}": build_dag(p, c) for p, c in projects.items()}
