"""Airflow DAG factory: one DAG `nightshift__<project>` per nightshift project.

Projects: the folders in NIGHTSHIFT_PROJECTS (separated by ':'), default <repo>/demo-project.
Parsing this file reads only each project's text files (nightshift.toml, sql/): no Spark, no
database, no lake; the plan's levels come from nightshift.plancache (compiled once per inputs' hash).

    choose_batch ─► propagate_level_0 ─► … ─► propagate_level_<n> ─► window_gate ─► refresh ─► apply_base ─► compact
    (no Spark)      (one spark-submit per D-lattice level with work)    (deferred)    (one txn)   (spark-submit)
                                                                          publish ◄── validate ◄───┘

Scheduled by the data: a run starts every hour, whenever an asset event lands on the project's
changes asset (an upstream DAG that writes change batches declares it as an outlet), and after every
published night (so landed batches run one after another, in batch-id order). choose_batch takes the
next landed batch that is not yet complete (nightshift.nights), or skips the whole run at once when
there is none: a run never waits for a batch that has not landed. The trigger form asks for a batch
(or a range of batches, run one night per run, skipping those already done) and can ignore the window
with a reason that goes into the ledger.

With [capture.<table>] sources in nightshift.toml a `capture` task (spark-submit of nightshift capture)
runs first once a day and writes the night's batch from them (its id: the logical date as YYYYMMDD):
capture ─► choose_batch ─► …

Warehouse credentials: NIGHTSHIFT_WAREHOUSE_URL, else the Airflow connection named by [warehouse]
airflow_conn_id (resolved when a task runs; spark-submit children get it in NIGHTSHIFT_WAREHOUSE_URL),
else [warehouse] url.

Every task is idempotent (the steps skip what the ledger and the lake say is done), so clearing and
rerunning any task of any night is safe; max_active_runs=1 and the batch-order check of every step keep
nights in order. Retries: NIGHTSHIFT_RETRIES (default 2), NIGHTSHIFT_RETRY_DELAY seconds apart (default
120); a closed window, a failed validation, a bad change batch, a batch out of order, a changed summary
layer and a warehouse or lake not in the state the step needs are not retried (AirflowFailException;
runtime.errors.RETRY_CANNOT_FIX): a retry would meet the same.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from pathlib import Path

import pendulum
from airflow.providers.standard.sensors.date_time import DateTimeSensorAsync
from airflow.sdk import DAG, Asset, AssetOrTimeSchedule, CronTriggerTimetable, Param, chain, task

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the DAG processor imports this file by path: the checkout's packages

from nightshift import config  # noqa: E402
from nightshift.airflow_ext import NightshiftSparkSubmit, load_project, not_retried  # noqa: E402
from nightshift.errors import BadChangeBatch  # noqa: E402
from nightshift.plancache import plan_summary  # noqa: E402
from runtime.errors import RETRY_CANNOT_FIX  # noqa: E402
from runtime.lake import check_batch_id  # noqa: E402

SUBMIT = str(REPO / "nightshift" / "submit.py")
BATCH = "{{ ti.xcom_pull(task_ids='choose_batch') }}"  # the night choose_batch took
CAPTURE_BATCH = "{{ batch_of(dag_run) }}"
# the night's refresh already in the ledger (choose_batch says so): nothing waits for a window
WINDOW_OPENS = "{{ window_of(dag_run, ti.xcom_pull(task_ids='choose_batch', key='refreshed'))[0] }}"
RUNBOOK = "docs/operations.md"
POLL = "0 * * * *"  # how often a run looks for landed batches that no asset event announced

PARAMS = {
    "batch_id": Param("", type="string", title="Batch",
                      description="The change batch to run (lake/changes/<table>/batch_id=<ID>). Empty: the next "
                                  "landed batch that is not yet applied and published."),
    "through_batch": Param("", type="string", title="Through batch",
                           description="With Batch: run every landed batch from Batch through this one, one night per "
                                       "run and in batch-id order; batches already done are skipped."),
    "ignore_window": Param(False, type="boolean", title="Run now, ignore the batch window",
                           description="Refresh as soon as the summary-deltas are ready instead of waiting for [window] "
                                       "opens, and even after it closes. Readers may see the refresh happen."),
    "reason": Param("", type="string", title="Reason (with ignore window)",
                    description="Why the night runs outside the window; recorded in the ledger row of the night."),
}

DAG_DOC = """\
### nightshift nightly cycle for `{root}`

Each run is one **night**: one change batch propagated into summary-deltas (Spark, outside the batch
window), refreshed into every summary table in one warehouse transaction (inside the window), applied
to the lake's base tables, validated and published.

**When it runs.** Every hour, whenever the `{changes}` asset is updated (declare it as an outlet of the
DAG that lands change batches), and after each published night. A run takes the next landed batch that
is not yet done; with none it skips at once, so an unpaused DAG never waits for a batch that has not
landed. Nights run one at a time, in batch-id order.

**Trigger form.** *Batch* runs that batch (empty: the next one); *Batch* and *Through batch* run a range,
one night per run, skipping nights already done; *Run now, ignore the batch window* with a *Reason*
refreshes without waiting for the window (the reason is recorded in the ledger).

**Rerunning.** Every task is idempotent: clear a failed task or the whole run; finished steps skip.
What each failure means and what to do: {runbook}.
"""

DOCS = {
    "choose_batch": "Finds the night to run: the batch from the trigger form, else the next landed batch that is not "
                    "yet applied and published (a refreshed night that failed validation comes first). No batch: the "
                    "run is skipped. Fails at once when the form names a batch that has not landed. Reads only the "
                    "lake's folders and the ledger; starts no Spark. Logs the summary view files added, changed or "
                    "broken since nightshift apply: the night runs the applied layer without them.",
    "propagate": "Computes summary-deltas of D-lattice level {k} ({points}) with Spark, outside the window; {next}. "
                 "Fails on a bad change batch (the message names table, column and row: fix or replace the batch, "
                 "then clear this task) or a batch out of order (run the earlier night first), without retrying: "
                 "a retry would meet the same. See {runbook}, 'Rerun a failed night'.",
    "window_gate": "Waits (deferred, no worker held) until the batch window of [window] opens. With 'ignore the batch "
                   "window' in the trigger form it passes at once, and so it does for a night whose refresh is already "
                   "done (nightshift run refreshed it, or an earlier run stopped after refresh).",
    "refresh": "Applies every summary-delta to its summary table in ONE warehouse transaction, with the ledger row: "
               "readers see all of the night or none of it. Skips a night already in the ledger. Refuses to start "
               "after the window closed (the tables stay at the previous night; rerun in the next window or trigger "
               "with 'ignore the batch window'). See {runbook}, 'Messages and what to do'.",
    "apply_base": "Makes the batch part of the lake's base tables (atomic; a rerun after a crash completes it). "
                  "Skips a batch already applied.",
    "compact": "Rewrites the lake tables' files the nights left small or full of deleted rows (nightshift compact), "
               "outside the window; no row changes, and the night is published without waiting for it. Finishes at "
               "once when no table needs it. A failure leaves every table as it was: clear the task to retry.",
    "validate": "Runs the Great Expectations checks on the refreshed summary tables. A critical failure blocks "
                "publish and is not retried: the message names the summary table, the check and the batch; later "
                "nights wait until this one passes. See {runbook}, 'Messages and what to do'.",
    "publish": "Stamps the night published in the ledger and updates the project's published asset, which also "
               "starts the run of the next landed batch.",
    "capture": "nightshift capture: {tables} from their [capture.*] sources become the batch (compared with the base "
               "as of the last applied batch). Safe to rerun.",
}


def _projects() -> list[Path]:
    listed = os.environ.get("NIGHTSHIFT_PROJECTS")
    paths = [Path(p) for p in listed.split(os.pathsep) if p] if listed else [REPO / "demo-project"]
    return [p for p in paths if (p / "nightshift.toml").is_file()]


def _checked(batch: str, dag_run, key: str) -> str:
    try:  # before the id reaches a glob pattern or a path
        check_batch_id(batch)
    except BadChangeBatch as e:
        raise ValueError(f"run {dag_run.run_id}: conf {key}: {e}") from None
    return batch


def batch_of(dag_run) -> str:
    """The batch a capture task writes: trigger conf `batch_id`, else the run's logical date as YYYYMMDD
    (UTC). A run without a logical date (Airflow 3's default for the API and an option in the UI) must
    name its batch."""
    conf = dag_run.conf or {}
    if conf.get("batch_id"):
        return _checked(str(conf["batch_id"]), dag_run, "batch_id")
    logical = getattr(dag_run, "logical_date", None)
    if logical is None:
        raise ValueError(f"run {dag_run.run_id} has no logical date and no batch_id in its conf: "
                         'trigger it with conf {"batch_id": "<ID>"} (the folder lake/changes/<table>/batch_id=<ID>)')
    return pendulum.instance(logical).in_timezone("UTC").strftime("%Y%m%d")


def window_of(window, dag_run, refreshed: bool = False) -> tuple[str, str]:
    """(opens, closes) of the window a run refreshes in, ISO: the window open when the run started, else
    the next one, so a run's window stays the same across retries (a retry after it closed fails rather
    than refreshing in daylight). Conf `gate_at` / `window_closes_at` override either end; conf
    `ignore_window`, or a night whose refresh is already done (`refreshed`: in the ledger, e.g. by
    `nightshift run` or an earlier run that stopped at validate), opens it when the run started and never
    closes it."""
    conf = dag_run.conf or {}
    now = pendulum.now("UTC")
    started = getattr(dag_run, "start_date", None)
    started = min(pendulum.instance(started), now) if started else now  # dag.test() starts runs at their logical date
    if conf.get("ignore_window") or refreshed:
        return started.isoformat(), started.add(years=100).isoformat()
    opens, closes = window.current_or_next(started)
    return conf.get("gate_at") or opens.isoformat(), conf.get("window_closes_at") or closes.isoformat()


def _range_of(context) -> tuple[str, str]:
    """(first, through) of the night to choose: the trigger form's batch_id / through_batch, else the range
    a published night of a backfill handed on in its asset event."""
    conf = context["dag_run"].conf or {}
    if conf.get("batch_id"):
        first = _checked(str(conf["batch_id"]), context["dag_run"], "batch_id")
        through = str(conf.get("through_batch") or "")
        return first, _checked(through, context["dag_run"], "through_batch") if through else ""
    for events in (context.get("triggering_asset_events") or {}).values():
        for event in events:
            extra = getattr(event, "extra", None) or {}
            if extra.get("through_batch"):
                return "", str(extra["through_batch"])
    return "", ""


def build_dag(root: Path) -> DAG:
    """Inside tasks, airflow_ext.load_project also resolves [warehouse] airflow_conn_id (Airflow
    connection -> warehouse URL); at parse time config.load_project reads nightshift.toml only."""
    project = config.load_project(root)  # parse time: reads nightshift.toml only, never a connection
    plan = plan_summary(root)  # the D-lattice's levels, compiled once per inputs' hash
    name = re.sub(r"[^A-Za-z0-9_]", "_", project.name)
    published = Asset(name=f"nightshift__{name}__published", uri=f"file://{project.lake}/published")
    changes = Asset(name=f"nightshift__{name}__changes", uri=f"file://{project.lake}/changes")
    captured = bool(project.settings.get("capture"))
    tz = project.window.timezone
    schedule = (CronTriggerTimetable("0 0 * * *", timezone=tz) if captured  # capture names the batch by its day
                else AssetOrTimeSchedule(timetable=CronTriggerTimetable(POLL, timezone=tz), assets=changes | published))
    with DAG(
        dag_id=f"nightshift__{name}",
        description=f"Nightly refresh of the summary tables of {project.name}: one change batch per run",
        doc_md=DAG_DOC.format(root=root, changes=changes.name, runbook=RUNBOOK),
        schedule=schedule,
        start_date=pendulum.datetime(2026, 1, 1, tz=tz),
        catchup=False,
        max_active_runs=1,
        params=PARAMS,
        default_args={"retries": int(os.environ.get("NIGHTSHIFT_RETRIES", "2")),
                      "retry_delay": pendulum.duration(seconds=float(os.environ.get("NIGHTSHIFT_RETRY_DELAY", "120")))},
        user_defined_macros={"window_of": functools.partial(window_of, project.window), "batch_of": batch_of},
        tags=["nightshift"],
    ) as dag:

        @task.short_circuit(doc_md=DOCS["choose_batch"])
        def choose_batch(**context) -> str | None:
            from nightshift.nights import choose

            first, through = _range_of(context)
            choice = choose(load_project(root), first, through, load_project)  # one read of the ledger
            for note in choice.notes:  # the night runs the applied layer
                print(f"choose_batch: {note}")
            print(f"choose_batch: {choice.why}" + ("" if choice.batch else "; nothing to run, the run is skipped")
                  + ("; its refresh is done, so the window gate passes at once" if choice.refreshed else ""))
            context["ti"].xcom_push(key="refreshed", value=choice.refreshed)
            return choice.batch

        spark_args = {"conn_id": "spark_default", "application": SUBMIT, "conf": {"spark.ui.enabled": "false"},
                      "warehouse_conn_id": project.warehouse_conn_id}
        last = len(plan["levels"]) - 1
        propagate = [
            NightshiftSparkSubmit(
                task_id=f"propagate_level_{k}",
                application_args=["propagate", "--project", str(root), "--batch", BATCH, "--level", str(k)],
                doc_md=DOCS["propagate"].format(
                    k=k, points=", ".join(points), runbook=RUNBOOK,
                    next="writes the manifest refresh needs" if k == last else "later levels derive from them"),
                **spark_args,
            )
            for k, points in enumerate(plan["levels"])
        ]
        gate = DateTimeSensorAsync(task_id="window_gate", target_time=WINDOW_OPENS, doc_md=DOCS["window_gate"])

        @task(doc_md=DOCS["refresh"].format(runbook=RUNBOOK))
        def refresh(batch: str, **context) -> str:
            from airflow.exceptions import AirflowFailException

            from nightshift.cycle import Cycle

            conf = context["dag_run"].conf or {}
            notes = None
            refreshed = context["ti"].xcom_pull(task_ids="choose_batch", key="refreshed")
            if conf.get("ignore_window") and not refreshed:  # a night already refreshed needs no override
                reason = str(conf.get("reason") or "").strip()
                if not reason:
                    raise AirflowFailException(f"batch {batch}: 'ignore the batch window' needs a reason (the ledger "
                                               f"records it); trigger the night again with one")
                notes = {"_window_override": {"reason": reason, "run_id": context["dag_run"].run_id,
                                              "at": pendulum.now("UTC").isoformat()}}
            closes = pendulum.parse(window_of(project.window, context["dag_run"], refreshed)[1])
            if pendulum.now("UTC") > closes:
                raise AirflowFailException(
                    f"batch {batch}: the batch window closed at {closes.isoformat()}; refresh did not start "
                    f"and the summary tables stay at the previous night (rerun in the next window, or trigger "
                    f"with 'ignore the batch window' and a reason)"
                )
            try:
                r = Cycle(load_project(root)).refresh(batch, notes)
            except RETRY_CANNOT_FIX as e:
                raise not_retried(e) from None
            print(f"refresh {batch}: " + (f"skipped ({r.skipped})" if r.skipped else f"done in {r.seconds:.2f}s")
                  + (f"; outside the window: {notes['_window_override']['reason']}" if notes and not r.skipped else ""))
            return batch

        apply_base = NightshiftSparkSubmit(
            task_id="apply_base", application_args=["apply-base", "--project", str(root), "--batch", BATCH],
            doc_md=DOCS["apply_base"], **spark_args
        )

        compact = NightshiftSparkSubmit(
            task_id="compact", application_args=["compact", "--project", str(root), "--batch", BATCH],
            doc_md=DOCS["compact"], **spark_args
        )

        @task(doc_md=DOCS["validate"].format(runbook=RUNBOOK))
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

        @task(outlets=[published], doc_md=DOCS["publish"])
        def publish(batch: str, *, outlet_events=None, **context) -> str:
            """published_at in the ledger (refused unless validate passed), then the asset event."""
            from nightshift.cycle import Cycle

            cycle = Cycle(load_project(root))
            try:
                r = cycle.publish(batch)
            except RETRY_CANNOT_FIX as e:  # e.g. the night is not validated: clear validate, not publish
                raise not_retried(e) from None
            finally:
                cycle.close()
            print(f"publish {batch}: " + (f"skipped ({r.skipped})" if r.skipped else f"published at {r.details['published_at']}"))
            extra = {"batch_id": batch, "project": str(root)}
            through = _range_of(context)[1]
            if through and batch < through:  # a backfill: the next run takes the next night of the range
                extra["through_batch"] = through
            outlet_events[published].extra = extra
            return batch

        chosen = choose_batch()
        if captured:  # [capture.*] sources: the night's batch is captured from them first
            NightshiftSparkSubmit(
                task_id="capture", application_args=["capture", "--project", str(root), "--batch", CAPTURE_BATCH],
                doc_md=DOCS["capture"].format(tables=", ".join(sorted(project.settings["capture"]))),
                **spark_args,
            ) >> chosen
        refreshed = refresh(chosen)
        chain(chosen, *propagate, gate, refreshed, apply_base)
        checked = validate(chosen)
        apply_base >> checked
        apply_base >> compact
        publish(checked)
    return dag


for _root in _projects():  # airflow dag discovery: module-level DAG objects
    _dag = build_dag(_root)
    globals()[_dag.dag_id] = _dag
