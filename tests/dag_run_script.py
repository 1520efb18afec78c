"""Run in a subprocess by tests/test_dags.py: Airflow gets a fresh AIRFLOW_HOME and its own process.

    dag_run_script.py SPEC.json OUT.json

SPEC: {"runs": [{"label", "day" (logical date = today + day), "conf" (trigger conf; "gate_in" /
"closes_in" seconds become gate_at / window_closes_at from now), "env" (set during the run),
"mark_success" (regex of task ids marked success instead of run), "no_logical_date" (true: triggered
without a logical date, as Airflow 3's API and UI allow), "before_sql" (statements run on the
project's warehouse before the run, e.g. to corrupt a summary table)}]}. OUT: import errors, DAG ids,
parse time, task graph, the DAG's and its tasks' docs and params, and per run its state, its tasks (state, tries, start, end), asset events,
rendered fields.
"""

import json
import os
import sys
import time

import pendulum


def main(spec_file: str, out: str) -> None:
    from airflow.utils.db import resetdb

    spec = json.load(open(spec_file))
    resetdb(skip_init=False)
    from airflow.dag_processing.dagbag import DagBag

    t0 = time.perf_counter()
    bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    parse = time.perf_counter() - t0
    t0 = time.perf_counter()
    DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])  # as the DAG processor's next parse: imports warm, plan cached
    reparse = time.perf_counter() - t0
    result = {"import_errors": {k: str(v)[-500:] for k, v in bag.import_errors.items()}, "dags": sorted(bag.dag_ids),
              "parse_seconds": round(parse, 3), "reparse_seconds": round(reparse, 3), "runs": {}}
    print(f"DAG folder parsed in {parse:.2f}s (first, cold imports), {reparse:.2f}s (again): {result['dags']}", flush=True)
    dag = bag.get_dag(result["dags"][0]) if result["dags"] else None
    if dag is not None:
        result["graph"] = {t.task_id: sorted(t.downstream_task_ids) for t in dag.tasks}
        result["docs"] = {t.task_id: t.doc_md for t in dag.tasks if t.doc_md}
        result["description"], result["dag_doc"] = dag.description, dag.doc_md
        result["params"] = sorted(dag.params.keys())
        for run in spec.get("runs", []):
            result["runs"][run["label"]] = one_run(dag, run)
    json.dump(result, open(out, "w"), default=str)


def one_run(dag, run: dict) -> dict:
    from sqlalchemy import select

    from airflow.models.asset import AssetEvent
    from airflow.models.renderedtifields import RenderedTaskInstanceFields as RTIF
    from airflow.utils.session import create_session

    now = pendulum.now("UTC")
    conf = dict(run.get("conf", {}))
    conf.setdefault("gate_at", now.add(seconds=conf.pop("gate_in", 0)).isoformat())
    conf.setdefault("window_closes_at", now.add(seconds=conf.pop("closes_in", 7200)).isoformat())
    if run.get("before_sql"):
        from nightshift.config import load_project
        from nightshift.cycle import Cycle

        cycle = Cycle(load_project(os.environ["NIGHTSHIFT_PROJECTS"]), progress=lambda _: None)
        with cycle.warehouse.engine.begin() as c:
            for statement in run["before_sql"]:
                c.exec_driver_sql(statement)
        cycle.close()
    saved = {k: os.environ.get(k) for k in run.get("env", {})}
    os.environ.update(run.get("env", {}))
    try:
        print(f"--- run {run['label']}: conf {conf}", flush=True)
        logical = None if run.get("no_logical_date") else pendulum.now("UTC").start_of("day").add(days=run.get("day", 0))
        dr = dag.test(logical_date=logical, run_conf=conf, mark_success_pattern=run.get("mark_success"))
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    out = {
        "state": str(dr.state), "conf": conf, "started": now.isoformat(),
        "tasks": {ti.task_id: {"state": str(ti.state), "tries": ti.try_number, "start": ti.start_date, "end": ti.end_date}
                  for ti in dr.get_task_instances()},
    }
    with create_session() as s:
        out["asset_events"] = [e for (e,) in s.execute(select(AssetEvent.extra).where(AssetEvent.source_run_id == dr.run_id)).all()]
        out["rendered"] = dict(s.execute(select(RTIF.task_id, RTIF.rendered_fields).where(RTIF.run_id == dr.run_id)).all())
    return out


if __name__ == "__main__":
    main(*sys.argv[1:3])
