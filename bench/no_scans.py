"""Nights that read less of the fact table: a base laid out by month and higher-order delta maps,
against today's layout, on the same data and the same nights.

    .venv/bin/python -m bench.no_scans [--pos 10000000] [--fraction 0.001]

Two projects over the same --pos rows (the retail example, Appendix A's shape: 100 stores, 1000 items,
365 days), Figure 1's four views, every view's mode fixed (`incremental`, never traded for a recompute):

1. today: the base unpartitioned, every view in delta mode;
2. by month, maps: `[lake] partition_by = { pos = "date" }`, and sCD_sales, sR_sales and SiC_sales kept over maps
   (`[views] v = "map"`: pos grouped by the fact columns each reads).

and the same four nights on each, one after the other:

- recent corrections: --fraction of pos as equal deletes and inserts, all within the last 14 days;
- update-generating (Section 6): the same, over every date of the year;
- insertion-generating (Section 6): --fraction of pos inserted for a new day;
- dimension change: 1% of stores move city (and region), 1% of items change category, with --fraction of
  pos inserted for a new day.

Per night and project: rows of pos propagate read (the manifest's Spark scan metrics), propagate, the
window (refresh) beside a bare MERGE of the same summary-delta rows (bench/measure.bare_merge),
apply-base, and the bytes the night wrote to the lake (every file under lake/ but the change batches that
propagate, refresh or apply-base created or rewrote) against the batch's own Parquet files; DuckDB's recompute of
every view timed on the state each night starts from (before the night's batch is written); then Spark rematerialize
along the lattice and DuckDB recompute of every view, once, on the first project's final state. --kinds by_month:
only the second project (the baselines on its final state). Writes bench/NO_SCANS.md with the load at the start:
run it on an idle machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from bench.measure import bare_merge, duckdb_recompute, readers, rematerialize
from bench.modes import run_line
from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.example import CATEGORIES, RetailGenerator, batch_id, init_project, write_batch
from runtime import delta

HERE = Path(__file__).resolve().parent
KINDS = ("today", "by_month")
NIGHTS = ("recent", "uniform", "insertion", "dimension")
MAPPED = ("sCD_sales", "sR_sales", "SiC_sales")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.no_scans", description=__doc__.split("\n\n")[0])
    p.add_argument("--pos", type=int, default=10_000_000, help="pos rows before the nights")
    p.add_argument("--fraction", type=float, default=0.001, help="fact changes of a night, as a fraction of --pos")
    p.add_argument("--work", default=str(HERE / "out" / "no_scans"))
    p.add_argument("--out", default=str(HERE / "NO_SCANS.md"))
    p.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS), help="the projects to run")
    args = p.parse_args(argv)
    load = os.getloadavg()[0]
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    run(work / "warm-up", 20_000, args.fraction, "by_month")  # JVM and Spark warm before the first clock
    results = {kind: run(work / kind, args.pos, args.fraction, kind,
                         baselines=("rematerialize", "duckdb") if kind == args.kinds[0] else (), duckdb_each=True)
               for kind in args.kinds}
    write_report(Path(args.out), args, load, results)
    print(f"wrote {args.out}")
    return 0


def project(root: Path, kind: str) -> None:
    init_project(root, None, 0)
    toml = root / "nightshift.toml"
    text = toml.read_text()
    views = sorted(f.stem for f in (root / "sql" / "summaries").glob("*.sql"))
    setting = {v: "map" if kind == "by_month" and v in MAPPED else "incremental" for v in views}
    layout = '{ pos = "date" }' if kind == "by_month" else "{ pos = false }"  # today's: one table, at any size
    text = text.replace('path = "lake"\n', f'path = "lake"\npartition_by = {layout}\n', 1)
    toml.write_text(text + "\n[views]\n" + "".join(f'{v} = "{m}"\n' for v, m in setting.items()))


def recent(gen: RetailGenerator, changes: int, days: int = 14) -> pd.DataFrame:
    """Equal deletes and inserts, all dated within the last `days` days of the year (late corrections)."""
    inserts = gen._sales(changes // 2, gen.days - days, gen.days)
    last = np.datetime64(pd.Timestamp(gen.pos["date"].max()), "D")
    dates = gen.pos["date"].astype("datetime64[ns]").values.astype("datetime64[D]")
    pool = gen.pos[dates > last - np.timedelta64(days, "D")]
    victims = pool.sample(n=len(inserts), random_state=int(gen.rng.integers(0, 2**31)))
    gen.pos = pd.concat([gen.pos.drop(victims.index), inserts], ignore_index=True)
    return pd.concat([inserts.assign(_op="insert"), victims.assign(_op="delete")], ignore_index=True)


def dimension(gen: RetailGenerator, day: int, changes: int) -> dict[str, pd.DataFrame]:
    """1% of stores move to another city (and its region), 1% of items change category, and `changes`
    pos rows are inserted for a new day."""
    stores = gen.stores.sample(n=max(1, len(gen.stores) // 100), random_state=1)
    cities = gen.stores.drop_duplicates("city")[["city", "region"]].reset_index(drop=True)
    moved = stores.copy()
    for i, (_, row) in enumerate(stores.iterrows()):
        other = cities[cities["city"] != row["city"]].iloc[i % (len(cities) - 1)]
        moved.loc[row.name, ["city", "region"]] = [other["city"], other["region"]]
    gen.stores = pd.concat([gen.stores.drop(stores.index), moved], ignore_index=True)
    items = gen.items.sample(n=max(1, len(gen.items) // 100), random_state=2)
    recat = items.assign(category=[CATEGORIES[(CATEGORIES.index(c) + 3) % len(CATEGORIES)] for c in items["category"]])
    gen.items = pd.concat([gen.items.drop(items.index), recat], ignore_index=True)
    return {"stores": pd.concat([stores.assign(_op="delete"), moved.assign(_op="insert")], ignore_index=True),
            "items": pd.concat([items.assign(_op="delete"), recat.assign(_op="insert")], ignore_index=True),
            "pos": gen.insertion_generating(day, changes)}


def run(root: Path, rows: int, fraction: float, kind: str, setup=None, nights: tuple[str, ...] = NIGHTS,
        baselines: tuple[str, ...] | None = None, duckdb_each: bool = False) -> dict:
    """The first load and `nights` on a project `setup(root)` makes (default: project(root, kind)); then `baselines`
    on the final state: "rematerialize" (Spark's, along the lattice) and "duckdb" (DuckDB's recompute of every
    view); by default both for kind "today", none for the others. duckdb_each: DuckDB's recompute timed before each
night too."""
    (setup or (lambda r: project(r, kind)))(root)
    gen = RetailGenerator(seed=42)
    first = gen.write(root / "lake", rows, 0)[0]
    cycle = Cycle(load_project(root), progress=lambda m: print(m, flush=True))
    t = time.perf_counter()
    cycle.run(first)
    out: dict = {"load": time.perf_counter() - t}
    changes = int(rows * fraction)
    for n, name in enumerate(nights, 1):
        b = batch_id(gen.days + n)
        if name == "recent":
            batch = {"pos": recent(gen, changes)}
        elif name == "uniform":
            batch = {"pos": gen.update_generating(changes)}
        elif name == "insertion":
            batch = {"pos": gen.insertion_generating(gen.days + n, changes)}
        else:
            batch = dimension(gen, gen.days + n, changes)
        before = duckdb_recompute(cycle) if duckdb_each else None  # on the state the night starts from
        one_pass = delete_pass_bytes(cycle, batch.get("pos"))
        batch_bytes = sum(write_batch(root / "lake", table, b, frame).stat().st_size for table, frame in batch.items())
        started = time.time()
        propagate = cycle.propagate(b)
        merge = bare_merge(cycle, b)
        refresh = cycle.refresh(b)
        apply = cycle.apply_base(b)
        written = _written_since(root / "lake", started)
        manifest = propagate.details
        out[name] = {"propagate": propagate.seconds, "refresh": refresh.seconds, "merge": merge,
                     "apply": apply.seconds, "changes": manifest.night.info.rows,
                     "pos_read": manifest.read("base", "pos").rows, "pos_scans": manifest.read("base", "pos").scans,
                     "pos_bytes": manifest.read("base", "pos").bytes, "one_pass": one_pass,
                     "copies_read": sum(r.rows for r in manifest.rows_read or () if r.kind == "copy"),
                     "written": written, "batch_bytes": batch_bytes, "duckdb_before": before}
        print(f"{name}: {out[name]}", flush=True)  # a night's numbers as soon as it ends
    baselines = baselines if baselines is not None else ("rematerialize", "duckdb") if kind == "today" else ()
    if "rematerialize" in baselines:
        out["rematerialize"] = rematerialize(cycle)[0]
    if "duckdb" in baselines:
        out["duckdb"] = duckdb_recompute(cycle)
    out["maps"] = {f"{a.name} (for {', '.join(readers(cycle, a.name))})": _rows(cycle, a.name) for a in cycle.plan.auxiliary}
    cycle.close()
    shutil.rmtree(root / "lake" / "base", ignore_errors=True)
    return out


def delete_pass_bytes(cycle: Cycle, changes: pd.DataFrame | None) -> int:
    """One pass over the columns a delete of `changes` needs (every declared column of pos: bag semantics match a
    deleted row on all of them), in the months of its deleted rows when pos is laid out by month (else all of pos):
    the compressed bytes of those column chunks of pos's live files at the state the night starts from."""
    deleted = None if changes is None else changes[changes["_op"] == "delete"]
    if deleted is None or deleted.empty:
        return 0
    state = cycle.lake.state()
    snap = delta.snapshot(cycle.lake.table_path("pos"), state.version("pos"))
    months = set(pd.to_datetime(deleted["date"]).dt.strftime("%Y-%m")) if state.partitions.get("pos") else None
    columns = [c.name for c in cycle.plan.schema.table("pos").columns]
    return sum(delta.chunk_bytes(meta, g, columns) for f, values in snap.files
               if months is None or values.get(snap.partition_columns[0]) in months
               for meta in [pq.read_metadata(f)] for g in range(meta.num_row_groups))


def _written_since(lake: Path, started: float) -> int:
    """Bytes of the lake's files (not the change batches) created or rewritten since `started`: what a night
    wrote (summary-deltas, the delete check's matched rows, the base's and the copies' commits, logs)."""
    total = 0
    for folder, dirs, files in os.walk(lake):
        if Path(folder) == lake:
            dirs[:] = [d for d in dirs if d != "changes"]
        for f in files:
            st = os.stat(os.path.join(folder, f))
            if st.st_mtime >= started:
                total += st.st_size
    return total


def _mb(n: int | None) -> str:
    return "n/a" if n is None else f"{n / 1e6:,.1f} MB"


def _share(read: int | None, one_pass: int | None) -> str:
    return "n/a" if read is None or one_pass is None else "no delete" if not one_pass else f"{read / one_pass:.2f}"


def _rows(cycle: Cycle, name: str) -> int:
    return cycle.lake.rows(name, cycle.lake.state())


def write_report(out: Path, args, load: float, r: dict) -> None:
    names = {"today": "today", "by_month": "by month, maps"}
    first = r[args.kinds[0]]
    remat, duck = first["rematerialize"], first["duckdb"]
    label = {"recent": "recent corrections (last 14 days)", "uniform": "update-generating (every date)",
             "insertion": "insertion-generating (a new day)",
             "dimension": "dimension change (1% stores move, 1% items recategorized) + inserts"}
    loads = ", ".join(f"{names[k]} {r[k]['load']:.1f} s" for k in args.kinds)
    lines = [
        "# Nights that read less of the fact table (bench/no_scans.py)",
        "",
        run_line("no_scans", load),
        "",
        f"pos {args.pos:,} rows; nights of {int(args.pos * args.fraction):,} fact changes. Project *today*: Figure 1's "
        f"four views, base unpartitioned. Project *by month, maps*: `[lake] partition_by = {{ pos = \"date\" }}` and "
        f"{', '.join(MAPPED)} kept over maps. Projects run: {', '.join(names[k] for k in args.kinds)}. Spark "
        f"rematerialize along the lattice on the {names[args.kinds[0]]} project's final state: {remat:.1f} s; DuckDB "
        f"recompute of every view there: {duck:.1f} s. First load: {loads}.",
        "",
        "| night | project | rows of pos read (scans) | pos bytes read | / one pass of the delete's columns | "
        "lake copies read | propagate (s) | window: refresh (s) | "
        "bare MERGE (s) | refresh / MERGE | apply-base (s) | total (s) | total / rematerialize | DuckDB recompute "
        "before the night (s) | total / DuckDB recompute | lake bytes written | written / batch's Parquet |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ratios = []  # one line per night and project: whole night / DuckDB recompute
    for night in NIGHTS:
        for kind in args.kinds:
            x = r[kind][night]
            total = x["propagate"] + x["refresh"] + x["apply"]
            ratios.append(f"- whole night / DuckDB recompute ({label[night].split(' (')[0]}, {names[kind]}): "
                          f"{total / x['duckdb_before']:.2f}")
            lines.append(
                f"| {label[night]} | {names[kind]} | {x['pos_read']:,} ({x['pos_scans']}) | {_mb(x.get('pos_bytes'))} | "
                f"{_share(x.get('pos_bytes'), x.get('one_pass'))} | {x['copies_read']:,} | "
                f"{x['propagate']:.1f} | {x['refresh']:.2f} | {x['merge']:.2f} | {x['refresh'] / max(x['merge'], 1e-9):.1f} | "
                f"{x['apply']:.1f} | {total:.1f} | {total / remat:.3f} | {x['duckdb_before']:.1f} | "
                f"{total / x['duckdb_before']:.2f} | {x['written'] / 1e6:,.1f} MB | "
                f"{x['written'] / max(x['batch_bytes'], 1):.1f} |")
    maps = r["by_month"]["maps"] if "by_month" in r else {}
    lines += [
        "",
        "Whole night (propagate + refresh + apply-base) against DuckDB's recompute of every view on the state the "
        "night starts from (same run, same machine):",
        "",
        *ratios,
        "",
        *(["Maps (lake only, rows): " + ", ".join(f"{n} {v:,}" for n, v in maps.items()) + ".", ""] if maps else []),
        "Rows read: the rows of the row groups Spark's Parquet scans read during propagate (the manifest's "
        "`rows_read`), summed over scans, and the rows the command read itself; a cached relation counts once. "
        "Pos bytes read: the manifest's bytes of those reads, the column chunks of the passes nightshift makes "
        "itself (n/a where a Spark scan read pos: Spark's input metrics leave out the column chunks its Parquet reader "
        "fetches), against one pass over the columns a delete needs (every declared column of pos, "
        "bag semantics) in the months of the night's deleted rows, at the state the night starts from. "
        "Total = propagate + refresh + apply-base. "
        "Lake bytes written: the files under lake/ (the change batches left out) created or rewritten during the "
        "night, against the batch's own Parquet files. "
        "The delete check reads only the months of the deleted rows when the base is laid out by month; the maps "
        "take a dimension change's join from pos to their lake copies. SiC_sales's map keeps MIN(date) per "
        "(store, item), so a night deleting a pair's earliest sale recomputes that pair's minimum from pos: with pos "
        "laid out by month, from the months of the deleted earliest sales first (every month only for a pair with no "
        "other sale there).",
        "",
    ]
    out.write_text("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
