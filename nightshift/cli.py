"""The `nightshift` command line. Every command takes --project DIR; exit code 0 only on success,
errors on stderr naming the file, view, column or batch."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

from typing import TYPE_CHECKING

from runtime.errors import ERROR_PREFIX, InjectedCrash, NightshiftError
from runtime.options import CONNECT_PORT, SPARK_MASTER

if TYPE_CHECKING:
    from runtime.lake import Lake
    from runtime.night import NightPlan

# Every module beyond the error types (the compiler, the warehouse layer, pyarrow, pandas, PySpark: a second
# and more of imports) is imported by the command that uses it, so `--help` and `init` answer at once.

EPILOG = "Docs: docs/ (make docs builds the site; start with docs/getting-started.md). Batches apply in id order; every step is safe to rerun."


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if getattr(args, "verbose", False):
        os.environ["NIGHTSHIFT_VERBOSE"] = "1"  # Spark starts with its own INFO/WARN logging (spark_jobs/session.py)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args) or 0
    except NightshiftError as e:
        print(ERROR_PREFIX + _error_text(e, args), file=sys.stderr)
        return 1
    except InjectedCrash as e:
        print(f"nightshift: crashed: {e}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("nightshift: interrupted; every step is safe to rerun", file=sys.stderr)
        return 130
    except BrokenPipeError:  # what reads the output stopped reading (`nightshift status | head`): end quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's flush of stdout goes nowhere
        return 1


def _error_text(error: NightshiftError, args) -> str:
    """An error in the product's words (render.plain): a lake object of the project's own (an auxiliary view, a map)
    named by the views it serves, from the project's plan as its nights run it, when the error names one and the
    project loads; else the message as it is."""
    from lattice.passes.parse_views import AUXILIARY_SUFFIX
    from nightshift.render import plain

    text, plan = str(error), None
    if AUXILIARY_SUFFIX in text and getattr(args, "project", None):
        try:
            from nightshift.config import load_project

            plan = load_project(args.project, "applied").plan
        except Exception:  # the error is what the user needs to see, whatever the project's state
            plan = None
    return plain(text, plan)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="nightshift",
        description="Keep warehouse summary tables up to date every night with the summary-delta method: "
        "propagate changes outside the batch window (Spark), refresh inside it (one warehouse transaction).",
        epilog=EPILOG,
    )
    p.add_argument("--verbose", action="store_true", help="also show Spark's own INFO and WARN log lines")
    sub = p.add_subparsers(title="commands", metavar="COMMAND")

    def cmd(name: str, func, help: str, batch: bool = False, project: bool = True) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=help, description=help, epilog=EPILOG)
        c.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                       help="also show Spark's own INFO and WARN log lines")
        if project:
            c.add_argument("--project", default=".", metavar="DIR", help="the project folder (default: current folder)")
        if batch:
            c.add_argument("--batch", required=True, metavar="ID", help="the change batch id (lake/changes/<table>/batch_id=<ID>)")
        c.set_defaults(func=func)
        return c

    c = cmd("init", _init, "Create a project folder: an empty project to fill in (nightshift.toml, sql/schema.sql, "
            "sql/summaries/, lake/changes/), or with --example retail the retail example with its data.", project=False)
    c.add_argument("dir", metavar="DIR", help="folder to create")
    c.add_argument("--example", choices=["retail"], help="the retail example (stores, items, point-of-sale rows, four "
                   "summary views) with its change batches")
    c.add_argument("--rows", type=int, default=1_000_000, help="pos rows in the example's first batch (default 1000000)")
    c.add_argument("--nights", type=int, default=3, help="nightly batches after the first (default 3)")
    c = cmd("plan", _plan, "Print the plan: each summary view, the mode that keeps it and why, and the order in which "
            "a night computes them; writes plan.dot, plan.png and plan.json. With --batch ID: that night's plan, as it "
            "ran (after propagate) or as it would run (a landed batch, costed with its sizes). --explain adds the "
            "details: join trees, stored columns, the lattice of summary-deltas and the method behind each step.")
    c.add_argument("--batch", metavar="ID", help="show the night of this batch: as propagate ran it, or for a landed "
                   "batch not yet propagated, a preview from its sizes (default: the last propagated batch of this "
                   "plan; before any, the plan costed with default statistics)")
    c.add_argument("--explain", action="store_true", help="every detail, with internal names and the research "
                   "references behind each step")
    c.add_argument("--out", metavar="DIR", help="where to write plan.dot/plan.png/plan.json (default: the project folder)")
    c.add_argument("--json", action="store_true", help="machine-readable output")
    cmd("materialize", _materialize, "Build every summary table from the current base tables (one transaction).")
    cmd("apply", _apply, "After a change of sql/summaries, sql/schema.sql or [views], between two nights: build only "
        "the summary views added or changed since the layer was built (from the base), drop the dropped ones, leave "
        "every other summary table untouched, in one warehouse transaction. nightshift plan lists the difference. "
        "Safe to rerun.")
    c = cmd("propagate", _step("propagate"), "Compute the batch's summary-deltas with Spark (outside the window).", batch=True)
    c.add_argument("--level", type=int, metavar="K", help="only level K of the night's plan (nightshift plan lists the "
                   "levels; the Airflow DAG runs one task per level, in order, and the last level writes the manifest "
                   "refresh needs); default: every level in one Spark job")
    cmd("refresh", _step("refresh"), "Apply the batch's summary-deltas to every summary table in one transaction.", batch=True)
    cmd("apply-base", _step("apply_base"), "Apply the batch to the lake's base tables (atomic).", batch=True)
    c = cmd("compact", _compact, "Rewrite the lake tables' files the nights left small (each night's inserts are "
            "files of their own) or full of deleted rows (each night's deletes mark rows, no file rewritten), outside "
            "the window; no row changes. Only the tables that need it; the Airflow DAG runs it after apply-base. "
            "Run it between nights, not while one is being applied.")
    c.add_argument("--purge", action="store_true", help="write every file with deleted rows again without them "
                   "(default: only once a file lost more than 5%% of its rows)")
    c = cmd("validate", _validate, "Run the Great Expectations gate on the summary tables after refresh and apply-base: "
            "critical failures block publish (exit 1), warnings do not; writes data docs to gx/data_docs.", batch=True)
    c.add_argument("--sample", type=int, metavar="N", help="random groups per summary table recomputed from the base "
                   "(default: [validate] sample in nightshift.toml, else 50)")
    c.add_argument("--recompute", action="store_true", help="also compare every served view with a full DuckDB "
                   "recompute from the base tables (reads everything: slow on large tables)")
    c = cmd("capture", _capture, "Turn the night's sources into change batch ID (lake/changes/<table>/batch_id=<ID>): a "
            "table snapshot (Parquet or CSV, compared with the base as of the last applied batch), a Debezium CDC feed "
            "(JSON lines), an append-only log or a Delta table's change data feed ([capture.<table>] kind = \"delta\"); "
            "without --table, every [capture.<table>] source of nightshift.toml. "
            "Safe to rerun; never overwrites a batch propagate has read.", batch=True)
    c.add_argument("--table", metavar="T", help="capture this table only: its [capture.T] source, or the path given below")
    source = c.add_mutually_exclusive_group()
    source.add_argument("--snapshot", metavar="PATH", help="a full extract of T: Parquet or CSV files (a file, a folder or a glob)")
    source.add_argument("--cdc", metavar="PATH", help="Debezium change events of T, one JSON object a line (a file, a folder or a glob)")
    source.add_argument("--append", metavar="PATH", help="an append-only log of T (Parquet or CSV); needs --since-column")
    c.add_argument("--since-column", metavar="C", help="with --append: rows whose C is beyond the last captured watermark become inserts")
    c.add_argument("--ds", metavar="YYYY-MM-DD", help="the date {ds} stands for in source paths (default: the batch id, when it is YYYYMMDD)")
    c = cmd("run", _run, "The whole nightly cycle of one batch (propagate, refresh, apply-base), or with --pending of "
            "every landed batch not yet applied, in batch-id order, stopping at the first failure. Each step's progress goes to "
            "standard error; standard output gets one line per night: its change rows and the summary tables refreshed.")
    which = c.add_mutually_exclusive_group(required=True)
    which.add_argument("--batch", metavar="ID", help="the change batch id (lake/changes/<table>/batch_id=<ID>)")
    which.add_argument("--pending", action="store_true", help="every landed batch not yet applied, in batch-id order")
    c = cmd("load", _load, "Write a change batch from CSV, JSON lines (.json/.jsonl) or Parquet files (by extension): "
            "the files' rows become one new part of lake/changes/<table>/batch_id=<ID>/ in the exact column types of "
            "sql/schema.sql, converted only where that is exact. Every problem of every file is reported at once, and "
            "then nothing is written. Several loads build one batch; a batch that propagate has read is refused. No Spark.")
    c.add_argument("--batch", required=True, metavar="ID", help="the change batch id (ids sort in apply order, e.g. 20261101)")
    c.add_argument("--table", required=True, metavar="T", help="the table of sql/schema.sql the rows belong to")
    c.add_argument("--op", choices=["insert", "delete"], default="insert", help="what the rows are (default insert); a "
                   "delete from a table with a PRIMARY KEY may carry only the key columns: the full row is looked up")
    c.add_argument("files", nargs="+", metavar="FILE", help="input files: .csv (header line; empty field = NULL), "
                   ".json/.jsonl (one object a line), .parquet")
    cmd("publish", _step("publish"), "Mark a validated night published in the ledger (published_at; the Airflow DAG's "
        "publish task does this and emits its asset event). Refused until nightshift validate passed.", batch=True)
    cmd("migrate-lake", _migrate_lake, "Convert a lake of the earlier format (versioned Parquet folders under lake/base/) "
        "into Delta tables under lake/tables/, keeping the applied batches; once converted, it does nothing. Safe to "
        "rerun: lake/base/ goes only after every table was converted and counted.")
    c = cmd("verify", _verify, "Compare every served view with a from-scratch recompute (DuckDB and/or Spark).")
    c.add_argument("--engine", choices=["duckdb", "spark", "both"], default="duckdb",
                   help="what recomputes every view from the lake's base tables to compare with: DuckDB in this "
                        "process (default), Spark, or both")
    c = cmd("status", _status, "Show applied batches (ledger and lake), pending batches, and how the last night kept "
            "each summary view.")
    c = cmd("demo", _demo, "Create the retail example, run its nights end to end, and check the result.", project=False)
    c.add_argument("--dir", default="demo-project", help="project folder to (re)create (default: demo-project)")
    c.add_argument("--rows", type=int, default=1_000_000, help="pos rows in the initial load (default 1000000)")
    c.add_argument("--nights", type=int, default=3, help="nightly batches after the initial load (default 3)")
    c = cmd("spark-connect", _spark_connect, "Keep Spark warm between commands: start, stop or check a Spark Connect "
            "server on this machine (bound to 127.0.0.1). start returns once it answers and prints its URL; a project "
            "uses it with [spark] remote = \"sc://127.0.0.1:PORT\" in nightshift.toml (or NIGHTSHIFT_SPARK_REMOTE), and "
            "its Spark steps then start no Spark of their own. start and stop are safe to repeat.", project=False)
    c.add_argument("action", choices=["start", "stop", "status"], help="status exits 3 when no server runs")
    c.add_argument("--port", type=int, default=CONNECT_PORT,
                   help=f"the port to listen on (default {CONNECT_PORT}; 0 picks a free one)")
    c.add_argument("--master", default=SPARK_MASTER, help=f"the server's Spark master (default {SPARK_MASTER}; spark://host:port "
                   "for a standalone cluster)")
    c.add_argument("--dir", default=os.environ.get("NIGHTSHIFT_SPARK_CONNECT_DIR", ".spark-connect"), metavar="DIR",
                   help="where the server's record, log and event log live (default .spark-connect in the current "
                   "folder, or NIGHTSHIFT_SPARK_CONNECT_DIR)")
    c.add_argument("--timeout", type=float, default=180.0, help="seconds start waits for the server to answer (default 180)")
    c.add_argument("--warm-up", action="store_true", help="start: before returning, run the retail example's first two "
                   "nights (20,000 pos rows) against the new server in a scratch project that goes afterwards, so that "
                   "the first real night finds Spark's code compiled (about a minute on two cores; a new server's "
                   "first night otherwise takes two to three times as long as its second)")
    return p


def _spark_connect(args) -> int:
    from nightshift import connect

    return connect.command(args)


def _cycle(args, layer: str = "applied"):
    """The project's Cycle: a night step runs the applied summary layer (what apply or materialize last built),
    materialize and apply the working files (nightshift/applied.py)."""
    from nightshift.config import load_project
    from nightshift.cycle import Cycle

    return Cycle(load_project(args.project, layer))


def _init(args) -> int:
    from nightshift.example import init_empty, init_project

    if args.example:
        ids = init_project(Path(args.dir), args.example, args.rows, args.nights)
        print(f"created project {args.dir}" + (f" with batches {', '.join(ids)}" if ids else ""))
        if ids:
            print(f"next: nightshift run --project {args.dir} --batch {ids[0]}")
        return 0
    created = init_empty(Path(args.dir))
    print(f"created an empty project in {args.dir}:")
    for path in created:
        print(f"  {path}{'/' if path.is_dir() else ''}")
    print("next:")
    print(f"  1. declare your tables in {Path(args.dir) / 'sql' / 'schema.sql'} and add a summary view to "
          f"{Path(args.dir) / 'sql' / 'summaries'}/ (then: nightshift plan --project {args.dir})")
    print(f"  2. nightshift load --project {args.dir} --batch 20260101 --table <table> <rows.csv|.jsonl|.parquet>")
    print(f"  3. nightshift run --project {args.dir} --pending")
    return 0


def _load(args) -> int:
    from nightshift.config import load_project
    from nightshift.load import load as load_batch

    r = load_batch(load_project(args.project), args.batch, args.table, args.files, args.op)
    expanded = f" ({r.expanded} looked up by key)" if r.expanded else ""
    print(f"load {r.batch}: {r.rows} {r.op}(s) of {r.table}{expanded} written to {r.path} in {r.seconds:.2f}s")
    return 0


def _plan(args) -> int:
    from lattice.dlattice import build_lattice
    from nightshift import applied, render
    from nightshift.config import load_project
    from nightshift.nights import pending_batches
    from runtime.lake import Lake

    project = load_project(args.project)
    if not sorted((project.root / "sql" / "summaries").glob("*.sql")):
        return _empty_plan(project, args.json)
    rest, errors = applied.compiling(project)
    if errors and rest is not None:
        print("without the view files that do not compile, against the warehouse:\n"
              + "\n".join(_layer_lines(rest, explain=False)))
    _refuse(project, rest, errors, "not applied")
    plan = project.plan
    night, actual, preview = _night_of(project, args.batch)
    lattice = night.lattice if night and night.lattice else build_lattice(plan)
    recompute = tuple((v.name, v.reason) for v in plan.views if not v.incremental)
    files = render.write_files(lattice, Path(args.out) if args.out else project.root, actual, recompute)
    manifest = Lake(project.lake).read_manifest(night.batch) if night and not preview else None
    if args.json:
        out = render.plan_dict(plan, lattice, actual, night, manifest and manifest.rows_read)
        out["lake_layout"] = [{"table": lay.table, "by_month_of": lay.column, "reason": lay.reason, "chosen": lay.chosen}
                              for lay in _layouts_shown(project, night.batch if night and preview else None)]
        print(json.dumps(out, indent=1))
        return 0
    if preview:
        lake = Lake(project.lake)
        earlier = [b for b in pending_batches(lake.batch_ids(), lake.state().applied) if b < night.batch]
        if earlier:
            print(f"(batch {', '.join(earlier)} runs first; this preview is costed over the base as it is now)")
    if args.explain:
        _plan_explained(project, lattice, night, actual, preview, manifest)
    else:
        _plan_short(project, lattice, night, preview)
    print(f"wrote {', '.join(str(f) for f in files)}" + ("" if args.explain else
                                                        "; nightshift plan --explain shows every detail"))
    return 0


def _refuse(project, rest, errors: list[str], what: str) -> None:
    """Every refusal of the project's working files at once (applied.compiling), naming each file; the nights
    keep running the applied layer meanwhile."""
    from nightshift.errors import UnsupportedView

    if len(errors) == 1 and rest is None:  # not a view file (sql/schema.sql, nightshift.toml): the error as it is
        _ = project.plan  # raises it again
    if errors:
        raise UnsupportedView("\n".join(errors) + f"\n{what}: the nights keep running the applied summary layer; "
                              f"fix the view file(s) above, then nightshift plan and nightshift apply")


def _plan_short(project, lattice, night: NightPlan | None, preview: bool) -> None:
    """One line per view (its mode and why), the levels, and what nightshift apply would do."""
    from nightshift import render

    plan = project.plan
    print(render.plan_short(plan, night, preview))
    used = {n.node for n in night.nodes} if night else {p.parent for p in lattice.parents}
    print(render.levels_short(plan, night.levels if night else render.shape_levels(plan), used))
    print("\n".join(_layer_lines(project, explain=False)))
    routes = _routes_lines(project)
    if routes:
        print("\n".join(render.plain(r, plan) for r in routes))
    print("\n".join(_layout_lines(project, night.batch if night and preview else None)))


def _plan_explained(project, lattice, night: NightPlan | None, actual, preview: bool, manifest) -> None:
    """Every detail: the views' join trees and stored columns, the lattice, the research references."""
    from nightshift import render

    plan = project.plan
    print(render.plan_text(plan, project.options, night))
    print("\nagainst the warehouse:\n" + "\n".join(_layer_lines(project)))
    routes = _routes_lines(project)
    if routes:
        print("\nwith the lake's sizes (Parquet footers of its base):\n" + "\n".join(routes))
    basis = (f"previewed from the sizes of landed batch {night.batch} (not propagated yet)" if preview else
             f"costed with the statistics of batch {night.batch}; actual rows from its propagate" if night else
             "costed with default statistics (no batch propagated yet)")
    print(f"\n{render.to_text(lattice, actual)}\n({basis})")
    print(render.levels_text(night.levels if night else render.shape_levels(plan)))
    print("\n".join(_layout_lines(project, night.batch if night and preview else None)))
    if manifest is not None:
        print(render.rows_read_text(plan, manifest.rows_read))


def _layout_lines(project, batch: str | None) -> list[str]:
    """How the lake lays out each fact table (and each table [lake] partition_by names), and why: after `batch` (a
    landed batch's preview), else as the next night would."""
    shown = _layouts_shown(project, batch)
    return ["lake layout ([lake] partition_by):"] + [f"  {lay.describe()}" for lay in shown] if shown else []


def _layouts_shown(project, batch: str | None) -> list:
    """The layouts nightshift plan shows: each fact table's, and each table [lake] partition_by names."""
    from nightshift.cycle import project_layouts
    from runtime.lake import Lake

    lake = Lake(project.lake)
    facts = {f.lower() for f in project.plan.fact_tables}
    return [lay for lay in project_layouts(project, lake, lake.state(), batch) if not lay.chosen or lay.table.lower() in facts]


def _empty_plan(project, as_json: bool = False) -> int:
    """A project without summary views yet (as nightshift init leaves it): the schema still compiles. as_json: the
    keys of a plan's JSON, with no views, levels or lattice."""
    from lattice.passes.parse_schema import parse_schema

    schema_file = project.root / "sql" / "schema.sql"
    schema = parse_schema(schema_file.read_text(), "sql/schema.sql") if schema_file.is_file() else None
    if as_json:  # the keys of a plan's JSON (render.plan_dict), the schema as declared
        import dataclasses

        print(json.dumps({"schema": dataclasses.asdict(schema) if schema else None, "views": [], "dependencies": [],
                          "fingerprint": None, "auxiliary": [], "lattice": None, "levels": [], "night": None,
                          "rows_read": None, "lake_layout": []}, indent=1))
        return 0
    tables = ", ".join(t.name for t in schema.base_tables) if schema else ""
    print(f"tables: {tables or 'none yet (declare them in sql/schema.sql)'}")
    print(f"no summary views yet: add one to {project.root / 'sql' / 'summaries'}/ (one CREATE VIEW per file, "
          f"e.g. sql/summaries/daily_totals.sql)")
    return 0


def _routes_lines(project) -> list[str]:
    """Views whose MIN/MAX route the lake's measured table sizes would change (none before a base)."""
    from runtime.lake import Lake

    lake = Lake(project.lake)
    state = lake.state()
    if not state.last:
        return []
    return project.routes_with_sizes(lake.table_rows(project.plan.schema.base_tables, state))


def _night_of(project, batch: str | None) -> tuple[NightPlan | None, dict[str, int] | None, bool]:
    """The night's plan of `batch` as propagate wrote it (with its actual summary-delta rows once the
    manifest is there), or for a landed batch not propagated yet a preview costed with its sizes (third
    value True); without a batch, the last propagated batch of this plan; (None, None, False) before any."""
    from runtime.lake import Lake

    lake = Lake(project.lake)
    fingerprint = project.plan.fingerprint
    if batch is not None:
        manifest, night = lake.read_manifest(batch), lake.read_night(batch)
        if manifest is not None:
            return manifest.night, manifest.actual_rows(), False
        if night is not None:
            return night, None, False
        return _preview(project, lake, batch), None, True
    for b in reversed(lake.propagated_batches()):
        manifest = lake.read_manifest(b)
        if manifest and manifest.plan == fingerprint:
            return manifest.night, manifest.actual_rows(), False
    return None, None, False


def _preview(project, lake: Lake, batch: str) -> NightPlan:
    """How propagate would plan landed batch `batch`: its rows per table and operation (the files' _op
    column, no Spark) over the lake's base as it is now."""
    from nightshift.load import landed_info
    from runtime.night import plan_night

    plan = project.plan
    state = lake.state()
    if batch in state.applied:
        raise NightshiftError(f"plan --batch {batch}: batch {batch} is applied but its night's plan is gone "
                              f"(no {lake.night_path(batch)}); nothing to show")
    info = landed_info(lake, [t.name for t in plan.schema.base_tables], batch)
    stats = lake.statistics(plan.schema, state, info.change_rows())
    return plan_night(plan, info, state.last, project.options, stats, partitions=state.partitions)


def _apply(args) -> int:
    from nightshift import applied
    from nightshift.config import load_project
    from nightshift.cycle import Cycle

    project = load_project(args.project)
    _refuse(project, *applied.compiling(project), "nothing applied")
    r = Cycle(project).apply()
    if r.skipped:
        print(f"apply: skipped ({r.skipped})")
        return 0
    change = r.details
    print(f"apply: {change.summary()}; {len(change.unchanged)} summary table(s) untouched; done in {r.seconds:.1f}s")
    return 0


def _layer_lines(project, explain: bool = True) -> list[str]:
    """What nightshift apply would do: the compiled views against the layer the warehouse's ledger
    describes; a line saying why not when the warehouse cannot be read."""
    from warehouse.store import Warehouse

    if not project.warehouse_url:
        return ["(no warehouse url here: set NIGHTSHIFT_WAREHOUSE_URL to compare with the built summary tables)"]
    warehouse = Warehouse(project.warehouse_url, project.root)
    if warehouse.dialect.name == "duckdb" and not _duckdb_file_exists(warehouse.url):
        return ["no summary tables built yet (the first night or nightshift materialize builds them)"]
    try:
        ledger = warehouse.ledger()
        if not ledger:
            return ["no summary tables built yet (the first night or nightshift materialize builds them)"]
        fingerprint = project.plan.fingerprint
        if ledger[-1].plan == fingerprint:
            return ["the built summary tables match this plan" + (f" ({fingerprint})" if explain else "")]
        built = (f"are plan {ledger[-1].plan}, not {fingerprint}" if explain else
                 "were built from another version of the summary views")
        return ([f"the built summary tables {built}; nightshift apply would:"] + [f"  {line}" for line in warehouse.layer_diff(project.plan, ledger).lines()])
    except NightshiftError as e:
        return [f"(could not compare with the built summary tables: {e})"]
    finally:
        warehouse.dispose()


def _duckdb_file_exists(url: str) -> bool:
    """Whether a DuckDB warehouse file is there (plan reads; opening a missing file would create it)."""
    path = url.split("///", 1)[1].split("?", 1)[0] if "///" in url else ""
    return not path or ":memory:" in path or Path(path).exists()


def _materialize(args) -> int:
    r = _cycle(args, "working").materialize()
    print(f"materialized {len(r.details)} summary table(s) at base state {r.batch or '(empty)'} in {r.seconds:.1f}s")
    return 0


def _step(name: str):
    def run(args) -> int:
        level = getattr(args, "level", None)
        r = getattr(_cycle(args), name)(args.batch, *([] if level is None else [level]))
        print(f"{r.step} {args.batch}: " + (f"skipped ({r.skipped})" if r.skipped else f"done in {r.seconds:.2f}s"))
        return 0

    return run


def _compact(args) -> int:
    from nightshift.render import display_name

    cycle = _cycle(args)
    r = cycle.compact(args.purge)
    if r.skipped:
        print(f"compact: skipped ({r.skipped})")
        return 0
    for name, t in r.details["tables"].items():
        print(f"compact: {display_name(cycle.plan, name) or name}: version {t['from']} -> {t['to']} ({t['reason']})")
    print(f"compact: done in {r.seconds:.2f}s")
    return 0


def _run(args) -> int:
    from nightshift.nights import pending_batches

    cycle = _cycle(args)
    if not args.pending:  # each step's line went to stderr as it ended (Cycle.run); stdout gets the night's line
        t0 = time.perf_counter()
        results = cycle.run(args.batch)
        print(_night_line(args.batch, results, time.perf_counter() - t0), flush=True)
        return 0
    state = cycle.lake.state()
    pending = pending_batches(cycle.lake.batch_ids(), state.applied)  # one before the base: refused by name
    if not pending:
        print(f"run: nothing pending (the base is at {state.last or '(empty)'}; land a batch with nightshift load "
              f"or nightshift capture)")
        return 0
    print(f"run: {len(pending)} pending batch(es): {', '.join(pending)}", flush=True)
    for b in pending:
        t0 = time.perf_counter()
        results: list = []
        try:
            cycle.run(b, results)
        except NightshiftError as e:
            failed = ("propagate", "refresh", "apply-base")[len(results)]
            done = [x for x in pending if x < b]
            raise type(e)(f"run --pending stopped at batch {b}, step {failed}"
                          + (f" (batches {', '.join(done)} are done)" if done else "") + f": {e}") from None
        print(_night_line(b, results, time.perf_counter() - t0), flush=True)
    return 0


def _night_line(batch: str, results, seconds: float) -> str:
    """run's line for a night on standard output."""
    return f"night {batch}: {_night_summary(results)} in {seconds:.1f}s"


def _night_summary(results) -> str:
    """One line for a night: its change rows and the summary tables refreshed."""
    prop = next((r for r in results if r.step == "propagate"), None)
    parts = []
    if prop is not None and not prop.skipped and hasattr(prop.details, "night"):
        parts.append(f"{prop.details.night.info.describe()}")
    ref = next((r for r in results if r.step == "refresh"), None)
    if ref is not None and not ref.skipped and isinstance(ref.details, dict):
        tables = [s for s in ref.details.values() if isinstance(s, dict) and "path" in s]
        rows = [sum(s.get(k, 0) for s in tables) for k in ("inserted", "updated", "deleted")]
        parts.append(f"{len(tables)} summary table(s) refreshed (+{rows[0]} ~{rows[1]} -{rows[2]} rows)")
    skipped = [r.step for r in results if r.skipped]
    if skipped:
        parts.append(f"{', '.join(skipped)} already done")
        parts += [f"{r.step} done" for r in results if r.step == "apply-base" and not r.skipped]  # a rerun's last step
    return "; ".join(parts) or "done"


def _capture(args) -> int:
    from nightshift.capture import capture, chosen_sources
    from nightshift.config import load_project
    from nightshift.cycle import stderr_progress

    project = load_project(args.project, "applied")  # the batch feeds the applied layer's nights
    sources = chosen_sources(project, args.table, args.snapshot, args.cdc, args.append, args.since_column)
    r = capture(project, args.batch, sources, progress=stderr_progress, ds=args.ds)
    if r.skipped:
        print(f"capture {args.batch}: skipped ({r.skipped})")
    for rec in r.records:
        read = (("no new Delta version" if rec.delta_version <= rec.delta_since else
                 f"Delta versions {rec.delta_since + 1}..{rec.delta_version}") if rec.delta_since is not None else
                f"against base {rec.base or '(empty)'}; Delta version {rec.delta_version}") if rec.kind == "delta" else \
            f"against base {rec.base or '(empty)'}; {len(rec.sources)} file(s)"
        print(f"capture {args.batch}: {rec.table} from {rec.kind}: {rec.inserted} insert(s), {rec.deleted} delete(s) ({read})")
    if r.records:
        print(f"capture {args.batch}: done in {r.seconds:.2f}s; next: nightshift run --project {args.project} --pending "
              f"(every landed night in order, this one included)")
    return 0


def _migrate_lake(args) -> int:
    from nightshift.config import load_project
    from nightshift.cycle import stderr_progress
    from nightshift.migrate import migrate_lake, old_format
    from runtime.lake import Lake
    from spark_jobs.session import get_spark

    project = load_project(args.project, "applied")
    lake = Lake(project.lake)
    spark = get_spark(project.spark_master, f"nightshift:{project.name}", project.spark_remote) if old_format(lake) else None
    m = migrate_lake(project, spark, stderr_progress)
    if m.already:
        print(f"migrate-lake: {lake.root} is already a lake of Delta tables; nothing to do")
        return 0
    print(f"migrate-lake: {len(m.tables)} table(s) converted to Delta tables under {lake.tables}; applied batches kept: "
          f"{', '.join(m.applied) or 'none'}")
    return 0


def _verify_cycle(cycle, engine: str) -> list:
    from nightshift.oracle import check_all, compare
    from spark_jobs.oracle import recompute_all

    problems = []
    if engine in ("duckdb", "both"):
        problems += check_all(cycle.plan, cycle.lake, cycle.warehouse.read_view)
    if engine in ("spark", "both"):
        rows = recompute_all(cycle.spark, cycle.plan, cycle.lake)
        for v in cycle.plan.views:
            m = compare(v.name, rows[v.name], cycle.warehouse.read_view(v))
            if m:
                problems.append(m)
    return problems


def _verify(args) -> int:
    cycle = _cycle(args)
    problems = _verify_cycle(cycle, args.engine)
    for p in problems:
        print(f"MISMATCH {p}", file=sys.stderr)
    if problems:
        return 1
    print(f"ok: {len(cycle.plan.views)} summary table(s) equal their recomputation ({args.engine})")
    return 0


def _validate(args) -> int:
    from nightshift.config import load_project
    from nightshift.cycle import stderr_progress
    from nightshift.validate import validate_batch  # deferred: Great Expectations takes seconds to import

    report = validate_batch(load_project(args.project, "applied"), args.batch, args.sample, progress=stderr_progress)
    for w in report.warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(f"validated batch {args.batch}: {report.expectations} expectations, no critical failure, "
          f"{len(report.warnings)} warning(s), in {report.seconds:.1f}s; data docs: {report.docs}")
    if args.recompute:
        args.engine = "duckdb"
        return _verify(args)
    return 0


def _status(args) -> int:
    from nightshift import applied, render
    from nightshift.config import load_project
    from nightshift.nights import pending_batches

    cycle = _cycle(args)
    state = cycle.lake.state()
    ledger = cycle.warehouse.ledger()
    print(f"lake base at: {state.last or '(empty)'}; ledger at: {ledger[-1].position if ledger else '(no summary tables)'}")
    pending = pending_batches(cycle.lake.batch_ids(), state.applied)
    print(f"pending batches: {', '.join(pending) or 'none'}")
    layer = next((r for r in reversed(ledger) if r.kind in ("materialize", "apply")), None)
    if layer is not None and layer.kind == "apply":
        done = layer.stats.get("_ns_apply") or {}
        print(f"summary layer changed by nightshift apply at {layer.position or '(empty)'}: "
              + "; ".join(f"{k} {', '.join(v)}" for k, v in done.items() if v))
    if ledger and ledger[-1].plan != cycle.plan.fingerprint and cycle.project.snapshot is not None:
        # the applied layer's snapshot is not what the ledger holds (the nights refuse to run until apply)
        print(f"summary layer: {cycle.warehouse.layer_diff(cycle.plan, ledger).summary()} since it was built; "
              f"run nightshift apply (nightshift plan shows how)")
    for line in applied.unapplied(lambda: load_project(args.project), cycle.warehouse, ledger):  # never fails on a view file
        print(line)
    last = next((r for r in reversed(ledger) if r.kind == "batch"), None)
    if last:  # how each summary table was refreshed (paper 001, 4.3)
        print(f"last refresh ({last.batch_id}): validated {last.validated_at or 'no'}; published {last.published_at or 'no'}")
        plan = cycle.plan
        for view, s in last.stats.items():
            if isinstance(s, dict) and "path" in s:
                exact = f", {s['minmax_exact_groups']} exact MIN/MAX group(s)" if "minmax_exact_groups" in s else ""
                mode = (f"{render.view_mode(plan, view, s['mode'])} mode ({render.plain(s['mode_why'], plan)}); "
                        if s.get("mode") else "")
                print(f"  {view}: {mode}{s['path']} ({render.plain(s['why'], plan)}); "
                      f"+{s['inserted']} ~{s['updated']} -{s['deleted']}{exact}")
    return 0


def _demo(args) -> int:
    from nightshift.capture import capture
    from nightshift.config import load_project
    from nightshift.cycle import Cycle
    from nightshift.example_sources import init_demo
    from nightshift.oracle import check_all, compare
    from spark_jobs.oracle import recompute_all

    target = Path(args.dir)
    if target.exists():
        if not (target / ".nightshift-demo").exists():
            raise NightshiftError(f"{target} exists and was not made by nightshift demo; pass --dir to choose another folder")
        shutil.rmtree(target)
    t0 = time.perf_counter()
    ids, landed = init_demo(target, args.rows, args.nights)  # the example's batches, then two nights as sources
    (target / ".nightshift-demo").write_text("made by nightshift demo\n")
    print(f"demo: created {target} with {args.rows} pos rows in batch {ids[0]}, {len(ids) - 1} nights of change batches "
          f"and {len(landed)} landed as sources ({', '.join(f'{n.batch}: {n.kind}' for n in landed)}) "
          f"in {time.perf_counter() - t0:.1f}s", flush=True)
    cycle = Cycle(load_project(target))
    table = []
    for b in ids:
        results = cycle.run(b)
        table.append((b, {r.step: r for r in results}))
    captured = []
    for night in landed:  # nightshift capture turns the night's sources into its batch; then the night runs as any
        captured.append((night, capture(cycle.project, night.batch, night.sources, spark=cycle.spark, progress=cycle.progress)))
        table.append((night.batch, {r.step: r for r in cycle.run(night.batch)}))
    t = time.perf_counter()
    problems = check_all(cycle.plan, cycle.lake, cycle.warehouse.read_view)
    duck_s = time.perf_counter() - t
    t = time.perf_counter()
    rows = recompute_all(cycle.spark, cycle.plan, cycle.lake)
    spark_s = time.perf_counter() - t
    problems += [m for v in cycle.plan.views if (m := compare(v.name, rows[v.name], cycle.warehouse.read_view(v)))]
    print("\nbatch      change rows  propagate   refresh  apply-base   sd rows (per view)")
    for b, steps in table:
        man = steps["propagate"].details  # the batch's Manifest
        changes = man.night.info.rows
        sd = " ".join(f"{d.view}={d.rows}" for d in man.deltas)
        print(f"{b:<10} {changes:>11}  {steps['propagate'].seconds:8.2f}s {steps['refresh'].seconds:8.2f}s "
              f"{steps['apply-base'].seconds:9.2f}s   {sd}")
    for night, c in captured:
        print(f"{night.batch} captured from {night.kind} sources in {c.seconds:.2f}s: "
              + ", ".join(f"{r.table} +{r.inserted} -{r.deleted}" for r in c.records))
    print(f"\nchecked against recomputation from scratch (recompute + bag comparison in Python of every row): "
          f"DuckDB {duck_s:.2f}s, Spark {spark_s:.2f}s (all {len(cycle.plan.views)} views); "
          f"`python -m bench.run` times the recomputes alone")
    for p in problems:
        print(f"MISMATCH {p}", file=sys.stderr)
    if problems:
        return 1
    print(f"demo: every summary table equals its recomputation (DuckDB and Spark). Total {time.perf_counter() - t0:.1f}s")
    return 0


def command() -> None:
    """The `nightshift` program: main(), then the process ends as soon as its work is done. Python's own
    teardown of the modules a night imports (pandas, pyarrow, SQLAlchemy, PySpark's client: each object freed
    one by one) takes longer than some nights' window; it is skipped. What an ending must still do is done
    first: threads the command started are waited for, exit handlers run (logging, temporary folders, a local
    Spark's own shutdown) and the output is flushed. A command that raises (--help, a bug) ends as Python ends.
    Python's cycle collector is tuned for programs that live long: a command builds the objects of a thousand
    modules in its first second, and the collector would walk them hundreds of times (a third of a second of a
    small night); it runs once every 50,000 new objects instead of 700."""
    import gc

    gc.set_threshold(50_000, 20, 20)
    code = main()
    import atexit
    import threading

    threading._shutdown()  # as Python's own ending begins: thread pools told to stop, then every other thread joined
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    command()
