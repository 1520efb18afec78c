"""The `nightshift` command line. Every command takes --project DIR; exit code 0 only on success,
errors on stderr naming the file, view, column or batch."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from lattice.errors import NightshiftError
from nightshift.errors import InjectedCrash

EPILOG = "Docs: README.md. Batches apply in id order; every step is safe to rerun."


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if getattr(args, "func", None) is _bench:
        args.options = extra  # bench's own options (python -m bench.run --help)
    elif extra:
        parser.parse_args(argv)  # reports the unrecognized arguments and exits 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args) or 0
    except NightshiftError as e:
        print(f"nightshift: error: {e}", file=sys.stderr)
        return 1
    except InjectedCrash as e:
        print(f"nightshift: crashed: {e}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("nightshift: interrupted; every step is safe to rerun", file=sys.stderr)
        return 130


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="nightshift",
        description="Keep warehouse summary tables up to date every night with the summary-delta method: "
        "propagate changes outside the batch window (Spark), refresh inside it (one warehouse transaction).",
        epilog=EPILOG,
    )
    sub = p.add_subparsers(title="commands", metavar="COMMAND")

    def cmd(name: str, func, help: str, batch: bool = False, project: bool = True) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=help, description=help, epilog=EPILOG)
        if project:
            c.add_argument("--project", default=".", metavar="DIR", help="the project folder (default: current folder)")
        if batch:
            c.add_argument("--batch", required=True, metavar="ID", help="the change batch id (lake/changes/<table>/batch_id=<ID>)")
        c.set_defaults(func=func)
        return c

    c = cmd("init", _init, "Create a project folder (optionally the retail example of paper 001 with data).", project=False)
    c.add_argument("dir", metavar="DIR", help="folder to create")
    c.add_argument("--example", choices=["retail"], help="also write the example's change batches")
    c.add_argument("--rows", type=int, default=1_000_000, help="pos rows in the example's first batch (default 1000000)")
    c.add_argument("--nights", type=int, default=3, help="nightly batches after the first (default 3)")
    c = cmd("plan", _plan, "Print the compiled plan: views, join trees, group-by keys, hidden columns, and the "
            "optimized D-lattice (paper 001, Section 5: which summary-delta is derived from which, join labels, "
            "estimated and actual rows); writes plan.dot, plan.png and plan.json.")
    c.add_argument("--out", metavar="DIR", help="where to write plan.dot/plan.png/plan.json (default: the project folder)")
    c.add_argument("--json", action="store_true", help="machine-readable output")
    cmd("materialize", _materialize, "Build every summary table from the current base tables (one transaction).")
    c = cmd("propagate", _step("propagate"), "Compute the batch's summary-deltas with Spark (outside the window).", batch=True)
    c.add_argument("--level", type=int, metavar="K", help="only level K of the D-lattice (nightshift plan lists the "
                   "levels; the Airflow DAG runs one task per level, in order, and the last level writes the manifest "
                   "refresh needs); default: every level in one Spark job")
    cmd("refresh", _step("refresh"), "Apply the batch's summary-deltas to every summary table in one transaction.", batch=True)
    cmd("apply-base", _step("apply_base"), "Apply the batch to the lake's base tables (atomic).", batch=True)
    c = cmd("validate", _validate, "Run the Great Expectations gate on the summary tables after refresh and apply-base: "
            "critical failures block publish (exit 1), warnings do not; writes data docs to gx/data_docs.", batch=True)
    c.add_argument("--sample", type=int, metavar="N", help="random groups per summary table recomputed from the base "
                   "(default: [validate] sample in nightshift.toml, else 50)")
    c.add_argument("--recompute", action="store_true", help="also compare every served view with a full DuckDB "
                   "recompute from the base tables (reads everything: slow on large tables)")
    cmd("run", _run, "The whole nightly cycle of one batch: propagate, refresh, apply-base.", batch=True)
    cmd("publish", _step("publish"), "Mark a validated night published in the ledger (published_at; the Airflow DAG's "
        "publish task does this and emits its asset event). Refused until nightshift validate passed.", batch=True)
    c = cmd("verify", _verify, "Compare every served view with a from-scratch recompute (DuckDB and/or Spark).")
    c.add_argument("--engine", choices=["duckdb", "spark", "both"], default="duckdb")
    c = cmd("status", _status, "Show applied batches (ledger and lake) and pending batches.")
    sub.add_parser("bench", add_help=False, help="Paper 001's performance study (Figure 10, Table 1): summary-delta "
                   "maintenance with and without the lattice vs Spark/DuckDB recompute and the counting algorithm; "
                   "writes bench/REPORT.md and plots (options: nightshift bench --help; --quick under 3 minutes)."
                   ).set_defaults(func=_bench)
    c = cmd("demo", _demo, "Create the retail example, run its nights end to end, and check the result.", project=False)
    c.add_argument("--dir", default="demo-project", help="project folder to (re)create (default: demo-project)")
    c.add_argument("--rows", type=int, default=1_000_000, help="pos rows in the initial load (default 1000000)")
    c.add_argument("--nights", type=int, default=3, help="nightly batches after the initial load (default 3)")
    return p


def _cycle(args):
    from nightshift.config import load_project
    from nightshift.cycle import Cycle

    return Cycle(load_project(args.project))


def _init(args) -> int:
    from nightshift.example import init_project

    ids = init_project(Path(args.dir), args.example, args.rows, args.nights)
    print(f"created project {args.dir}" + (f" with batches {', '.join(ids)}" if ids else ""))
    if ids:
        print(f"next: nightshift run --project {args.dir} --batch {ids[0]}")
    return 0


def _plan(args) -> int:
    from nightshift.config import load_project

    project = load_project(args.project)
    plan = project.plan
    lattice, actual, batch = _lattice_of(project)
    from nightshift import render

    files = render.write_files(lattice, Path(args.out) if args.out else project.root, actual)
    from lattice.dlattice import levels

    tiers = levels(lattice)
    if args.json:
        import dataclasses

        print(json.dumps({**dataclasses.asdict(plan), "lattice": render.to_dict(lattice, actual),
                          "levels": [list(t) for t in tiers]}, indent=1))
        return 0
    print(f"plan {plan.fingerprint}: {len(plan.views)} summary table(s)")
    from lattice import emit
    for v in plan.views:
        joins = ", ".join(f"{j.child}.{'/'.join(j.child_columns)} -> {j.parent}" for j in v.joins) or "none"
        print(f"\n{v.name}  ({v.file})")
        print(f"  fact {v.fact}; joins: {joins}")
        if v.where:
            print(f"  filter: {v.where}")
        print(f"  group by: {', '.join(k.name + ('' if k.declared else ' (hidden)') for k in v.keys) or '(none)'}")
        for o in v.outputs:
            if o.kind != "key":
                extra = f" / {o.count_column}" if o.count_column else ""
                print(f"  {o.name} = {o.kind.upper()} -> {o.source}{extra}")
        print(f"  stored: {', '.join(f'{s.column} {s.kind}' for s in v.stored)}")
        by = emit.preaggregation(v)
        if by:
            print(f"  pre-aggregation (4.1.3): fact changes grouped by {', '.join(by)} before joining "
                  f"{', '.join(v.dimensions)} (when computed from the change set)")
        if v.name.lower() in {n.lower() for n in project.new_keys}:
            print("  refresh (4.3): every summary-delta group declared new ([refresh] new_keys), verified each night")
    basis = f"costed with the statistics of batch {batch}; actual rows from its propagate" if batch else \
        "costed with default statistics (no batch propagated yet)"
    print(f"\n{render.to_text(lattice, actual)}\n({basis})")
    print("\nlevels (propagate --level K; one Airflow task each, in order):")
    for k, tier in enumerate(tiers):
        print(f"  {k}: {', '.join(tier)}")
    print(f"wrote {', '.join(str(f) for f in files)}")
    return 0


def _lattice_of(project):
    """The D-lattice as the last propagated batch used it (its change counts and measured sizes, the
    base's current sizes) with that batch's actual summary-delta rows; default statistics before any batch."""
    from lattice.dlattice import build_lattice
    from nightshift.lake import Lake

    lake = Lake(project.lake)
    plan = project.plan
    for batch in reversed(lake.propagated_batches()):
        m = lake.read_manifest(batch)
        if m and m.get("plan") == plan.fingerprint and m.get("lattice", {}).get("enabled"):
            change_rows = {t: m["inserted"][t] + m["deleted"][t] for t in m["inserted"]}
            stats = lake.statistics(plan.schema, lake.state(), change_rows, lake.read_change_distincts(batch))
            return build_lattice(plan, stats), {v: e["rows"] for v, e in m["views"].items()}, batch
    return build_lattice(plan), None, None


def _materialize(args) -> int:
    r = _cycle(args).materialize()
    print(f"materialized {len(r.details)} summary table(s) at base state {r.batch or '(empty)'} in {r.seconds:.1f}s")
    return 0


def _step(name: str):
    def run(args) -> int:
        level = getattr(args, "level", None)
        r = getattr(_cycle(args), name)(args.batch, *([] if level is None else [level]))
        print(f"{r.step} {args.batch}: " + (f"skipped ({r.skipped})" if r.skipped else f"done in {r.seconds:.2f}s"))
        return 0

    return run


def _run(args) -> int:
    results = _cycle(args).run(args.batch)
    for r in results:
        print(f"{r.step:<11} {args.batch}: " + (f"skipped ({r.skipped})" if r.skipped else f"{r.seconds:7.2f}s"))
    return 0


def _verify_cycle(cycle, engine: str) -> list:
    from nightshift.oracle import check_all, compare

    problems = []
    if engine in ("duckdb", "both"):
        problems += check_all(cycle.plan, cycle.lake, cycle.warehouse.read_view)
    if engine in ("spark", "both"):
        from spark_jobs.recompute import recompute

        rows = recompute(cycle.spark, cycle.plan, cycle.lake)
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
    from nightshift.validate import validate_batch

    report = validate_batch(load_project(args.project), args.batch, args.sample, progress=stderr_progress)
    for w in report.warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(f"validated batch {args.batch}: {report.expectations} expectations, no critical failure, "
          f"{len(report.warnings)} warning(s), in {report.seconds:.1f}s; data docs: {report.docs}")
    if args.recompute:
        args.engine = "duckdb"
        return _verify(args)
    return 0


def _status(args) -> int:
    cycle = _cycle(args)
    state = cycle.lake.state()
    ledger = cycle.warehouse.ledger()
    print(f"lake base at: {state.last or '(empty)'}; ledger at: {ledger[-1].position if ledger else '(no summary tables)'}")
    pending = [b for b in cycle.lake.batch_ids() if b not in state.applied]
    print(f"pending batches: {', '.join(pending) or 'none'}")
    last = next((r for r in reversed(ledger) if r.kind == "batch"), None)
    if last:  # how each summary table was refreshed (paper 001, 4.3)
        print(f"last refresh ({last.batch_id}): validated {last.validated_at or 'no'}; published {last.published_at or 'no'}")
        for view, s in last.stats.items():
            if isinstance(s, dict) and "path" in s:
                exact = f", {s['minmax_exact_groups']} exact MIN/MAX group(s)" if "minmax_exact_groups" in s else ""
                print(f"  {view}: {s['path']} ({s['why']}); +{s['inserted']} ~{s['updated']} -{s['deleted']}{exact}")
    return 0


def _bench(args) -> int:
    """The study lives in bench/ of the source checkout (next to this package), not in the installed package."""
    root = Path(__file__).resolve().parent.parent
    if not (root / "bench" / "run.py").is_file():
        raise NightshiftError(f"nightshift bench needs the source checkout: no bench/run.py under {root}")
    sys.path.insert(0, str(root))
    from bench.run import main as bench_main

    return bench_main(args.options)


def _demo(args) -> int:
    from nightshift.config import load_project
    from nightshift.cycle import Cycle
    from nightshift.example import init_project

    target = Path(args.dir)
    if target.exists():
        if not (target / ".nightshift-demo").exists():
            raise NightshiftError(f"{target} exists and was not made by nightshift demo; pass --dir to choose another folder")
        shutil.rmtree(target)
    t0 = time.perf_counter()
    ids = init_project(target, "retail", args.rows, args.nights)
    (target / ".nightshift-demo").write_text("made by nightshift demo\n")
    print(f"demo: created {target} with {args.rows} pos rows in batch {ids[0]} and {len(ids) - 1} nights "
          f"in {time.perf_counter() - t0:.1f}s", flush=True)
    cycle = Cycle(load_project(target))
    table = []
    for b in ids:
        results = cycle.run(b)
        table.append((b, {r.step: r for r in results}))
    t = time.perf_counter()
    from nightshift.oracle import check_all

    problems = check_all(cycle.plan, cycle.lake, cycle.warehouse.read_view)
    duck_s = time.perf_counter() - t
    t = time.perf_counter()
    from nightshift.oracle import compare
    from spark_jobs.recompute import recompute

    rows = recompute(cycle.spark, cycle.plan, cycle.lake)
    spark_s = time.perf_counter() - t
    problems += [m for v in cycle.plan.views if (m := compare(v.name, rows[v.name], cycle.warehouse.read_view(v)))]
    print("\nbatch      change rows  propagate   refresh  apply-base   sd rows (per view)")
    for b, steps in table:
        man = steps["propagate"].details
        changes = sum(man.get("inserted", {}).values()) + sum(man.get("deleted", {}).values())
        sd = " ".join(f"{k}={v['rows']}" for k, v in man.get("views", {}).items())
        print(f"{b:<10} {changes:>11}  {steps['propagate'].seconds:8.2f}s {steps['refresh'].seconds:8.2f}s "
              f"{steps['apply-base'].seconds:9.2f}s   {sd}")
    print(f"\nchecked against recomputation from scratch (recompute + bag comparison in Python of every row): "
          f"DuckDB {duck_s:.2f}s, Spark {spark_s:.2f}s (all {len(cycle.plan.views)} views); "
          f"`python -m bench.run` times the recomputes alone")
    for p in problems:
        print(f"MISMATCH {p}", file=sys.stderr)
    if problems:
        return 1
    print(f"demo: every summary table equals its recomputation (DuckDB and Spark). Total {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
