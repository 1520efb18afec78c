"""The nightly cycle of one batch: propagate -> refresh (one transaction) -> apply-base.

Each step checks where the project is before doing anything, so every step is idempotent and a
rerun after a crash at any point converges on the state of a clean run:

    pending     batch not in the ledger, not in the base     propagate, refresh, apply-base
    refreshed   batch in the ledger, not yet in the base      apply-base only
    done        batch in the ledger and in the base           nothing

Batches apply strictly in id order; anything else is refused with a BatchOrderError.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable

from nightshift import applied, render
from nightshift.config import Project
from lattice.layer import built_parents, changed_message
from runtime.errors import BatchOrderError, ConfigError, PlanChanged, WarehouseStateError
from runtime.faults import checkpoint
from runtime.lake import Lake, LakeState, check_batch_id, parquet_rows, switch_layer_copies
from runtime.layout import Layout, choose_layouts, partitions
from runtime.manifest import Manifest
from runtime.night import BatchInfo
from runtime.options import Options
from warehouse.store import RefreshHints, StagedDelta, Warehouse, mask

# The Spark side (spark_jobs: PySpark, pandas) is imported by the steps that run it, so a step that needs no
# Spark (status, refresh, validate, publish, a step found done) does not pay for its imports.


def stderr_progress(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _in_plain_words(progress: Callable[[str], None], plan) -> Callable[[str], None]:
    """progress with the hidden lake objects named after the views they serve (render.plain)."""
    return lambda msg: progress(render.plain(msg, plan))


def project_layouts(project: Project, lake: Lake, state: LakeState, batch: str | None = None) -> tuple[Layout, ...]:
    """Cycle.layouts, for a project whose steps do not run (nightshift plan). Only a fact table's size decides its
    layout: only theirs are read (each from its Delta log, and the batch's Parquet footers)."""
    facts = {f.lower() for f in project.plan.fact_tables}
    rows = {t.name: lake.rows(t.name, state) + (parquet_rows(lake.change_dir(t.name, batch)) if batch else 0)
            for t in project.plan.schema.base_tables if t.name.lower() in facts}
    declared = {k: v for k, v in project.statistics if "." not in k}
    return choose_layouts(project.plan, project.partition_settings, rows, state.partitions, declared)


@dataclass
class StepResult:
    step: str
    batch: str | None
    skipped: str | None = None  # why nothing was done
    seconds: float = 0.0
    details: Any = field(default_factory=dict)  # propagate: its Manifest (or LevelRecord); others: a dict


class Cycle:
    def __init__(self, project: Project, spark=None, progress: Callable[[str], None] = stderr_progress, spark_factory=None):
        """spark: a SparkSession to use; spark_factory: makes one on first use (spark-submit's own
        session, so a step that finds nothing to do never starts Spark); neither: get_spark with
        the project's [spark] master on first use, or a session of the Spark Connect server at its
        [spark] remote (then nothing starts: the server is already warm)."""
        self.project = project
        self.plan = project.plan
        self.lake = Lake(project.lake)
        if not project.warehouse_url:
            raise ConfigError(
                f"{project.root / 'nightshift.toml'}: the warehouse URL comes from the Airflow connection "
                f"{project.warehouse_conn_id!r} ([warehouse] airflow_conn_id), which only Airflow tasks read; "
                f"outside Airflow set NIGHTSHIFT_WAREHOUSE_URL (or [warehouse] url)"
            )
        self.warehouse = Warehouse(project.warehouse_url, project.root)
        self._spark = spark
        self._spark_factory = spark_factory
        if progress is stderr_progress and self.plan.auxiliary:  # what a person reads: views' names, not digests
            progress = _in_plain_words(progress, self.plan)
        self.progress = progress
        self._batch_info = None

    @cached_property
    def spark(self):
        if self._spark is not None:
            return self._spark
        if self._spark_factory is not None:
            return self._spark_factory()
        if self.project.spark_remote:
            self.progress(f"connecting to Spark ({self.project.spark_remote})")
        else:
            self.progress(f"starting Spark ({self.project.spark_master})")
        from spark_jobs.session import get_spark

        return get_spark(self.project.spark_master, f"nightshift:{self.project.name}", self.project.spark_remote,
                         lake=self.lake)

    @property
    def options(self) -> Options:
        return self.project.options

    def set_options(self, **changes) -> None:
        """Switch the method's options for the next steps (the bench and tests compare with and without)."""
        self.project = dataclasses.replace(self.project, options=dataclasses.replace(self.project.options, **changes))

    # ---------------------------------------------------------------- where are we
    def status(self, batch: str) -> str:
        """pending | refreshed | done, after checking the batch's order against lake and ledger."""
        check_batch_id(batch)
        state = self.lake.state()
        ledger = self.warehouse.ledger()
        in_ledger = any(r.batch_id == batch and r.kind == "batch" for r in ledger)
        if batch in state.applied:
            return "done"
        if in_ledger:
            return "refreshed"
        position = ledger[-1].position if ledger else None
        if ledger and position != (state.last or ""):
            if position and position not in state.applied:
                raise BatchOrderError(
                    f"batch {position} is refreshed in the warehouse but not yet applied to the base; "
                    f"run nightshift apply-base --batch {position} (or run --batch {position}) first"
                )
            raise BatchOrderError(
                f"the warehouse reflects batch {position or '(none)'} but the lake is at {state.last or '(empty)'}; "
                f"run nightshift materialize to rebuild the summary tables from the base"
            )
        if state.last is not None and batch < state.last:
            raise BatchOrderError(
                f"batch {batch} is out of order: batch {state.last} is already applied and batches apply in id order; "
                f"fold {batch}'s changes into a new batch with an id after {state.last}"
            )
        self.lake.batch_files(batch, [t.name for t in self.plan.schema.base_tables])  # exists at all?
        earlier = [b for b in self.lake.batch_ids() if b < batch and b not in state.applied and (state.last is None or b > state.last)]
        if earlier:
            raise BatchOrderError(f"batch {batch} is out of order: batch {earlier[0]} comes first and is not applied yet")
        return "pending"

    def _ensure_summary_tables(self) -> None:
        """A project that starts empty gets empty summary tables; one with base data needs materialize."""
        ledger = self.warehouse.ledger()
        if ledger:
            if ledger[-1].plan != self.plan.fingerprint:
                raise PlanChanged(changed_message(self.warehouse.layer_diff(self.plan, ledger), ledger[-1].plan,
                                                  self.plan.fingerprint))
            self._finish_apply(ledger)
            self._applied()  # a layer built before nightshift kept its snapshot gets it now
            return
        state = self.lake.state()
        if state.applied:
            raise WarehouseStateError(
                f"the warehouse at {mask(self.project.warehouse_url)} has no summary tables but the lake holds base data "
                f"(through batch {state.last}); run nightshift materialize first"
            )
        self.warehouse.materialize(self.plan, {v.name: self.lake.root / "_none" for v in self.plan.views}, "", {"empty": True})
        self._applied()

    def _applied(self) -> None:
        """Snapshot the layer the ledger now holds (this cycle's plan): the nights run it (nightshift/applied.py)."""
        if self.project.plan.fingerprint == self.plan.fingerprint and applied.write(self.project):
            self.progress(f"the applied summary layer is now plan {self.plan.fingerprint} "
                          f"({applied.SNAPSHOT.as_posix()})")

    # ---------------------------------------------------------------- steps
    def propagate(self, batch: str, level: int | None = None) -> StepResult:
        """The batch's summary-deltas; level: only that level of the D-lattice (dlattice.levels: one
        Airflow task per level, in order; the last level writes the manifest refresh needs)."""
        t0 = time.perf_counter()
        status = self.status(batch)
        if status != "pending":
            return StepResult("propagate", batch, skipped=f"batch {batch} is already {status}")
        self._ensure_summary_tables()
        state = self.lake.state()
        done = self._propagated(batch, level, state)
        if done:
            return StepResult("propagate" if level is None else f"propagate --level {level}", batch, skipped=done)
        from spark_jobs.propagate import propagate

        result = propagate(self.spark, self.plan, self.lake, batch, state, self.options, self.progress, level)
        if isinstance(result, Manifest):
            self._batch_info = (batch, state, result.night.info)
        step = "propagate" if level is None else f"propagate --level {level}"
        return StepResult(step, batch, seconds=time.perf_counter() - t0, details=result)

    def finished(self, step: str, batch: str = "", level: int | None = None, purge: bool = False) -> str | None:
        """Why `step` ("propagate", "apply-base", "compact") of `batch` has nothing left to do, read from the lake
        and the ledger without Spark (the DAG's tasks check it before they start a Spark job); None when
        it must run. Raises BatchOrderError like the step itself would."""
        if step == "compact":
            from spark_jobs.compact import plan as compact_plan

            if any(w.todo for w in compact_plan(self.lake, self.lake.state(), purge)):
                return None
            return "no lake table has small files or deleted rows to compact"
        status = self.status(batch)
        if step == "propagate":
            return f"batch {batch} is already {status}" if status != "pending" else \
                self._propagated(batch, level, self.lake.state())
        if step == "apply-base" and status == "done":
            return f"batch {batch} is already applied to the base"
        return None

    def _propagated(self, batch: str, level: int | None, state: LakeState) -> str | None:
        """Why propagate (of one level) has nothing left to do for `batch`: its output is complete for
        this plan, these options and this lake state (its last batch and every table's version: a rerun
        finds the work done without starting Spark); None when it must run."""
        night = self.lake.read_night(batch)
        if night is None or (night.plan, night.options) != (self.plan.fingerprint, self.options) or not state.planned(night):
            return None
        if level is not None and level < len(night.levels) - 1:
            record = self.lake.read_level(batch, level)
            if record is None or (record.plan, record.base_state) != (night.plan, night.base_state):
                return None
            return f"level {level} of batch {batch} is already computed"
        manifest = self.lake.read_manifest(batch)
        if manifest is None or manifest.night != night:
            return None
        return f"the summary-deltas of batch {batch} are already computed"

    def refresh_hints(self, manifest: Manifest) -> RefreshHints:
        """What 4.3 may rely on tonight: the night's insert_only and the declared new-key views."""
        names = {v.name.lower(): v.name for v in self.plan.views}
        unknown = [n for n in self.options.new_keys if n.lower() not in names]
        if unknown:
            raise ConfigError(
                f"{self.project.root / 'nightshift.toml'}: [refresh] new_keys: no summary view named {unknown[0]!r} "
                f"(views: {', '.join(sorted(names.values()))})"
            )
        keyless = [n for n in self.options.new_keys if not self.plan.view(names[n.lower()]).keys]
        if keyless:
            raise ConfigError(
                f"{self.project.root / 'nightshift.toml'}: [refresh] new_keys: {keyless[0]} has no GROUP BY (one group "
                f"that is never new after the first night); remove it from new_keys"
            )
        return RefreshHints(
            insert_only=manifest.night.insert_only,
            deletes=manifest.night.info.has_deletes,
            new_keys=frozenset(names[n.lower()] for n in self.options.new_keys),
            optimize=self.options.refresh_optimize,
        )

    def refresh(self, batch: str, notes: dict | None = None, status: str | None = None) -> StepResult:
        """notes: recorded in the night's ledger row (the DAG's window override and its reason). status: the batch's
        status (Cycle.status) when the caller knows it (run: propagate just ran for it), else read here."""
        t0 = time.perf_counter()
        status = status or self.status(batch)
        if status != "pending":
            return StepResult("refresh", batch, skipped=f"batch {batch} is already {status} (in the ledger)")
        manifest = self.lake.read_manifest(batch)
        state = self.lake.state()
        if manifest is None:
            raise WarehouseStateError(f"refresh {batch}: no summary-deltas for batch {batch}; run nightshift propagate --batch {batch} first")
        if manifest.plan != self.plan.fingerprint or not state.planned(manifest.night):
            raise WarehouseStateError(
                f"refresh {batch}: the summary-deltas of batch {batch} are stale (computed for another plan or base state); "
                f"rerun nightshift propagate --batch {batch}"
            )
        deltas = {}
        for v in self.plan.views:
            entry, step = manifest.delta(v.name), manifest.night.view(v.name)
            files = self.lake.delta_files(batch, entry.part) if entry else []
            if entry is None or (entry.rows and not files):
                raise WarehouseStateError(f"refresh {batch}: summary-delta of {v.name} is missing; rerun nightshift propagate --batch {batch}")
            deltas[v.name] = StagedDelta(files, entry.prefix, step.mode, step.reason, entry.columns)
        stats = self.warehouse.refresh(self.plan, batch, deltas, state.last or "", self.progress, self.refresh_hints(manifest),
                                      notes)
        if stats is None:
            return StepResult("refresh", batch, skipped=f"batch {batch} is already in the ledger")
        return StepResult("refresh", batch, seconds=time.perf_counter() - t0, details=stats)

    def apply_base(self, batch: str, status: str | None = None) -> StepResult:
        """status: as refresh's (run: refresh just committed the batch)."""
        t0 = time.perf_counter()
        status = status or self.status(batch)
        if status == "done":
            return StepResult("apply-base", batch, skipped=f"batch {batch} is already applied to the base")
        if status == "pending":
            raise BatchOrderError(
                f"apply-base {batch}: batch {batch} is not refreshed yet; the base must stay at the previous night "
                f"until refresh commits (run nightshift refresh --batch {batch}, or run --batch {batch})"
            )
        state = self.lake.state()
        info: BatchInfo | None = None
        if self._batch_info and self._batch_info[0] == batch and self._batch_info[1] == state:
            info = self._batch_info[2]
        from spark_jobs.apply_base import apply_base

        layouts = self.layouts(state, batch)
        for lay in layouts:  # nightshift's choice changed a table's layout: the batch's commit writes it whole
            if lay.chosen and state.partitions.get(lay.table) != lay.column and self.lake.change_dir(lay.table, batch).is_dir():
                self.progress(f"apply-base {batch}: {lay.table} is laid out anew: {lay.describe()}")
        details = apply_base(self.spark, self.plan, self.lake, batch, state, info, self.progress,
                             partitions(layouts), self.options.rewrite_below)
        return StepResult("apply-base", batch, seconds=time.perf_counter() - t0, details=details)

    def layouts(self, state: LakeState, batch: str | None = None) -> tuple[Layout, ...]:
        """How the lake lays out each base table after `batch` (runtime/layout.py): [lake] partition_by's, else
        nightshift's choice from the table's rows at `state` plus the batch's change rows."""
        return project_layouts(self.project, self.lake, state, batch)

    def compact(self, purge: bool = False) -> StepResult:
        """Rewrite the lake tables' files that the nights left small or full of deleted rows (spark_jobs.compact),
        outside the window; no row changes. Skipped, without starting Spark, when no table needs it."""
        t0 = time.perf_counter()
        reason = self.finished("compact", purge=purge)
        if reason:
            return StepResult("compact", None, skipped=reason)
        from spark_jobs.compact import compact

        details = compact(self.spark, self.lake, purge, self.progress)
        return StepResult("compact", None, seconds=time.perf_counter() - t0, details=details)

    def publish(self, batch: str) -> StepResult:
        """Mark a refreshed, validated night published in the ledger (after nightshift validate; the
        DAG's publish task also emits its Airflow asset event). Safe to rerun: the first stamp stays."""
        t0 = time.perf_counter()
        at, newly = self.warehouse.publish(batch)
        if not newly:
            return StepResult("publish", batch, skipped=f"batch {batch} was published at {at}")
        return StepResult("publish", batch, seconds=time.perf_counter() - t0, details={"published_at": at})

    def run(self, batch: str, results: list[StepResult] | None = None) -> list[StepResult]:
        """propagate, refresh and apply-base of `batch`, each step's line to progress as it ends. results: the list
        each step's result is appended to as it ends (a caller reporting where a failed run stopped passes its own)."""
        results = [] if results is None else results
        known = None  # the batch's status after the step before, when that step ran: not read again
        for step in (self.propagate, self.refresh, self.apply_base):
            r = step(batch) if known is None else step(batch, status=known)
            results.append(r)
            known = None if r.skipped else {"propagate": "pending", "refresh": "refreshed"}.get(r.step)
            if r.skipped:
                self.progress(f"{r.step} {batch}: skipped: {r.skipped}")
            else:
                self.progress(f"{r.step} {batch}: done in {r.seconds:.2f}s")
        return results

    def materialize(self) -> StepResult:
        t0 = time.perf_counter()
        state = self.lake.state()
        out = self.lake.root / "materialized"
        from spark_jobs.materialize import materialize

        views = materialize(self.spark, self.plan, self.lake, state, out, self.progress)
        self.warehouse.materialize(self.plan, {v.name: out / v.name for v in self.plan.views}, state.last or "", views)
        self._applied()
        return StepResult("materialize", state.last, seconds=time.perf_counter() - t0, details=views)

    def apply(self) -> StepResult:
        """nightshift apply, between two nights: build the views added or changed since the summary layer
        was built (from the base at the lake's state) and drop the dropped ones, in one warehouse
        transaction that leaves every other summary table as it is; then the lake copies nested views
        read switch (a crash in between is finished by the next apply or night). Safe to rerun."""
        t0 = time.perf_counter()
        ledger = self.warehouse.ledger()
        if not ledger:
            raise WarehouseStateError("apply: the warehouse has no summary tables yet; run nightshift materialize "
                                      "(or the first night, for a project that starts empty)")
        state = self.lake.state()
        if ledger[-1].position != (state.last or ""):
            raise BatchOrderError(
                f"apply: the summary tables are at {ledger[-1].position or 'empty'} but the lake's base at "
                f"{state.last or 'empty'}; apply runs between two nights: finish the night first "
                f"(nightshift apply-base --batch {ledger[-1].position})")
        self.lake.check_columns(self.plan.schema, state)
        change = self.warehouse.layer_diff(self.plan, ledger)
        if ledger[-1].plan == self.plan.fingerprint:
            self._finish_apply(ledger)
            self._applied()
            return StepResult("apply", state.last, skipped="the summary tables already match the plan", details=change)
        for line in change.lines():
            self.progress(f"apply: {line}")
        out = self.lake.root / "applied"
        shutil.rmtree(out, ignore_errors=True)
        facts = {self.plan.view(n).fact for n in change.rebuild if self.plan.view(n).mode == "delta"}
        rows = {v.name: self.warehouse.row_count(v) for v in self.plan.views  # the tables a new view may come from
                if v.mode == "delta" and v.fact in facts and v.name not in change.rebuild}
        base_rows = {t: self.lake.rows(t, state) for t in self.plan.fact_tables
                     if self.plan.schema.table(t).view is None}
        parents = built_parents(self.plan, change.rebuild, rows, base_rows) if self.options.apply_from_tables else {}
        built = {}  # a new view from a summary table that stays, not from the base
        for name, (edge, node) in parents.items():
            folder = out / "_built" / edge.upper
            if not folder.exists():
                n = self.warehouse.export_storage(self.plan.view(edge.upper), folder)
                self.progress(f"apply: {edge.upper}'s summary table exported ({n} rows) to build "
                              f"{', '.join(v for v, p in parents.items() if p[0].upper == edge.upper)} from it")
            built[name] = (edge, node, folder)
        from spark_jobs.materialize import materialize_views

        views, copies = materialize_views(self.spark, self.plan, self.lake, state, out, self.progress,
                                          only=frozenset(change.rebuild), built=built)
        stats = {**views, "_ns_copies": copies,
                 "_ns_apply": {"added": list(change.added), "changed": [c.view for c in change.changed],
                               "dropped": list(change.dropped)}}
        self.warehouse.apply_layer(self.plan, change, {v: out / v for v in views}, state.last or "", stats, self.progress)
        checkpoint("apply:before_copies")
        switch_layer_copies(self.plan, self.lake, copies)
        self._applied()
        shutil.rmtree(out, ignore_errors=True)
        return StepResult("apply", state.last, seconds=time.perf_counter() - t0, details=change)

    def _finish_apply(self, ledger) -> None:
        """The lake copies of the last nightshift apply, if a crash stopped it after its commit."""
        last = ledger[-1]
        if last.kind == "apply" and switch_layer_copies(self.plan, self.lake, last.stats.get("_ns_copies") or {}):
            self.progress("apply: switched the lake copies of the last nightshift apply (it stopped after its commit)")

    def close(self) -> None:
        self.warehouse.dispose()
