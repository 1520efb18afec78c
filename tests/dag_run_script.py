"""Run in a subprocess by tests/test_dags.py: Airflow gets a fresh AIRFLOW_HOME and its own process."""

import json
import os
import sys

import pendulum


def main(project: str, batch: str, out: str, late_batch: str = "") -> None:
    from airflow.utils.db import resetdb

    resetdb(skip_init=False)
    from airflow.dag_processing.dagbag import DagBag  # noqa: E402

    bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    result = {"import_errors": {k: str(v)[-500:] for k, v in bag.import_errors.items()}, "dags": sorted(bag.dag_ids)}
    dag = bag.get_dag(result["dags"][0]) if result["dags"] else None
    if dag is not None:
        today = pendulum.now("UTC").start_of("day")
        dr = dag.test(logical_date=today, run_conf={"batch_id": batch, "gate_at": pendulum.now("UTC").isoformat(),
                                                            "window_closes_at": pendulum.now("UTC").add(hours=2).isoformat()})
        result["state"] = str(dr.state)
        result["tasks"] = {ti.task_id: str(ti.state) for ti in dr.get_task_instances()}
        from airflow.models.asset import AssetEvent  # noqa: E402
        from airflow.utils.session import create_session  # noqa: E402
        from sqlalchemy import select  # noqa: E402

        from airflow.models.renderedtifields import RenderedTaskInstanceFields as RTIF  # noqa: E402

        with create_session() as s:
            result["asset_events"] = [e for (e,) in s.execute(select(AssetEvent.extra).where(AssetEvent.source_run_id == dr.run_id)).all()]
            result["rendered"] = dict(s.execute(select(RTIF.task_id, RTIF.rendered_fields).where(RTIF.run_id == dr.run_id)).all())
        if late_batch:  # the window already closed: refresh must not start
            dr = dag.test(logical_date=today.add(days=1), run_conf={
                "batch_id": late_batch, "gate_at": pendulum.now("UTC").isoformat(),
                "window_closes_at": pendulum.now("UTC").subtract(minutes=1).isoformat()})
            result["late_state"] = str(dr.state)
            result["late_tasks"] = {ti.task_id: str(ti.state) for ti in dr.get_task_instances()}
    json.dump(result, open(out, "w"), default=str)


if __name__ == "__main__":
    main(*sys.argv[1:5])
