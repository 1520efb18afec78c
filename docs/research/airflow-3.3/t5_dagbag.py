"""Item 5: load a DagBag from a folder and assert no import errors (pytest-style)."""
import time, sys
t = time.time()
from airflow.dag_processing.dagbag import DagBag   # (airflow.models.dagbag.DagBag is a deprecated shim)
bag = DagBag(dag_folder="/tmp/aflab/dags_bad")  # 3.3.2: no include_examples kwarg
print("DAG_IDS", sorted(bag.dag_ids))
print("IMPORT_ERRORS", {k: v.splitlines()[-1] for k, v in bag.import_errors.items()})
d = bag.get_dag("nightshift__demo")
print("TASKS", sorted(d.task_ids))
print("MAX_ACTIVE_RUNS", d.max_active_runs, "CATCHUP", d.catchup, "TZ", d.timezone)
print("WARNINGS", bag.captured_warnings)
print(bag.dagbag_report())
print(f"took {time.time()-t:.2f}s")
