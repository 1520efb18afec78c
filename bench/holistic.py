"""Holistic and DISTINCT aggregates: auxiliary mode against recomputing the views.

    .venv/bin/python -m bench.holistic [--pos 10000000] [--fraction 0.001]

Three projects over the same --pos rows and the same update-generating night of --fraction changes:

1. Figure 1's four views alone (the baseline the views add to);
2. + `store_items` (COUNT(DISTINCT itemID) per store), `region_items` (the same per region, through
   stores) and `item_median` (MEDIAN(qty) and the 90th percentile per item), kept in auxiliary mode over
   auxiliary views in the lake: pos grouped by (storeID, itemID), shared by the first two (paper 003:
   the foreign key, not the region), and pos grouped by (itemID, qty);
3. + the same three views kept by recompute (`[views] ... = "recompute"`): Spark over the base;
4. project 2 with the data's sizes declared in `[statistics]`: the plan then keeps
   SiC_sales's MIN(date) through an auxiliary view of (storeID, category, date) by its own choice, and the
   groups whose earliest sale is deleted are recomputed from it instead of pos.

Propagate and window per project (the views' cost is the difference to project 1), the rows propagate
read from pos and from the auxiliary views (the manifest's Spark scan metrics), and the auxiliary views'
rows and bytes against the naive auxiliary data (CReaM without minimization: every joined base row's
group key and argument, here pos's rows and the two columns each view reads).

Writes bench/HOLISTIC.md with the machine's load at the start. Run it on an idle machine.
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench.auxiliary import ROWS_READ_NOTE, sizes
from bench.measure import readers
from bench.modes import run_line
from bench.nested import compare_kinds, measured_night, read
from nightshift.cycle import Cycle
from nightshift.example import init_project

VIEWS = {
    "store_items": "CREATE VIEW store_items AS SELECT storeID, COUNT(DISTINCT itemID) AS items, COUNT(*) AS sales "
                   "FROM pos GROUP BY storeID\n",
    "region_items": "CREATE VIEW region_items AS SELECT region, COUNT(DISTINCT pos.itemID) AS items FROM pos "
                    "JOIN stores ON pos.storeID = stores.storeID GROUP BY region\n",
    "item_median": "CREATE VIEW item_median AS SELECT itemID, MEDIAN(qty) AS med, PERCENTILE_DISC(0.9) WITHIN GROUP "
                   "(ORDER BY qty) AS p90, COUNT(*) AS sales FROM pos GROUP BY itemID\n",
}
# the naive auxiliary data (CReaM unminimized: every joined row's group key and argument, as pos columns)
COLUMNS = {"store_items": ("storeID", "itemID"), "region_items": ("storeID", "itemID"), "item_median": ("itemID", "qty")}
KINDS = ("figure1", "auxiliary", "recompute", "minmax")


def main(argv: list[str] | None = None) -> int:
    return compare_kinds(argv, "holistic", __doc__, "HOLISTIC.md", KINDS, night, write_report)


def project(root: Path, kind: str, rows: int) -> None:
    """Figure 1's views, plus VIEWS (unless figure1), kept by recompute when kind is recompute, and with
    the data's sizes declared when kind is minmax (so the plan keeps SiC_sales through an auxiliary view);
    every view's mode fixed (never traded for a per-night recompute)."""
    init_project(root, None, 0)
    if kind != "figure1":
        for name, sql in VIEWS.items():
            (root / "sql" / "summaries" / f"{name}.sql").write_text(sql)
    toml = root / "nightshift.toml"
    views = [f.stem for f in (root / "sql" / "summaries").glob("*.sql")]
    setting = {v: "recompute" if (v in VIEWS and kind == "recompute") else "incremental" for v in views}
    sizes = "\n[statistics]\npos = {rows}\nstores = 100\nitems = {{ rows = 1000, category = 10 }}\n"  # the example's
    toml.write_text(toml.read_text() + "\n[views]\n" + "".join(f'{v} = "{m}"\n' for v, m in setting.items())
                    + (sizes.format(rows=rows) if kind == "minmax" else ""))


def night(root: Path, rows: int, fraction: float, kind: str) -> dict:
    project(root, kind, rows)
    return measured_night(root, rows, fraction, _sizes if kind == "auxiliary" else None)


def _sizes(cycle: Cycle) -> dict:
    """Each auxiliary view's rows and bytes in the lake after the night, and the naive auxiliary data's
    rows (every pos row) and bytes (the two pos columns the view reads, from the Parquet footers)."""
    kept = {cycle.plan.view(name).reads[0]: columns for name, columns in COLUMNS.items()}  # each shared one once
    return {"sizes": {aux: sizes(cycle, aux, columns) | {"views": readers(cycle, aux)} for aux, columns in kept.items()}}


def write_report(out: Path, args, load: float, r: dict) -> None:
    """The report over the kinds that ran (bench --kinds): a row per project, the auxiliary views' sizes."""
    base = r.get("figure1")
    aux_names = sorted({a for x in r.values() for v in (*VIEWS, "SiC_sales") for a in x["reads"].get(v, ())})
    sources = ["base pos"] + [f"copy {a}" for a in aux_names]

    def vs(x: dict, key: str, fmt: str) -> str:  # the difference to Figure 1's project, when it ran
        return f"{x[key] - base[key]:+{fmt}}" if base else ""

    def row(label: str, x: dict) -> str:
        deltas = ", ".join(f"{x['sd_rows'].get(n, 0):,}" for n in VIEWS)
        return (f"| {label} | {x['propagate']:.1f} | {vs(x, 'propagate', '.1f')} | {x['refresh']:.2f} | "
                f"{vs(x, 'refresh', '.2f')} | {deltas} | " + " | ".join(read(x, s) for s in sources) + " |")

    def modes(x: dict) -> str:
        return "/".join(sorted({x["modes"].get(n, "?") for n in VIEWS}))

    labels = {"figure1": lambda x: "Figure 1's four views",
              "auxiliary": lambda x: f"+ the three views, {modes(x)} mode (over their auxiliary views, in the lake)",
              "recompute": lambda x: f"+ the three views, {modes(x)} mode (Spark, over the base)",
              "minmax": lambda x: f"+ the three views, {modes(x)} mode, and the data's sizes in `[statistics]` (by "
                                  f"the plan's choice SiC_sales's MIN(date) then comes from "
                                  f"{'an auxiliary view' if x['modes'].get('SiC_sales') == 'auxiliary' else 'pos'})"}
    any_night = next(iter(r.values()))
    lines = [
        "# Holistic and DISTINCT aggregates: auxiliary mode vs recompute (bench/holistic.py)",
        "",
        run_line("holistic", load),
        "",
        f"One update-generating night of {any_night['changes']:,} pos changes on {args.pos:,} pos rows. The views:",
        "",
        "```sql",
        *[sql.strip() for sql in VIEWS.values()],
        "```",
        "",
        f"| project | propagate (s) | vs Figure 1 | window: refresh (s) | vs Figure 1 | delta rows ({', '.join(VIEWS)}) | "
        + " | ".join(f"rows of {s.split()[-1]} read" for s in sources) + " |",
        "|---|---|---|---|---|---|" + "---|" * len(sources),
        *[row(labels[k](x), x) for k, x in r.items()],
    ]
    if "auxiliary" in r:
        lines += [
            "",
            "| auxiliary view | kept for | rows | MB (Parquet) | naive rows | naive MB (the two pos columns, compressed) "
            "| rows vs naive |",
            "|---|---|---|---|---|---|---|",
            *[f"| {a} | {', '.join(s['views'])} | {s['aux_rows']:,} | {s['aux_bytes'] / 1e6:.1f} | {s['naive_rows']:,} | "
              f"{s['naive_bytes'] / 1e6:.1f} | {s['aux_rows'] / max(s['naive_rows'], 1):.2g} |"
              for a, s in r["auxiliary"]["sizes"].items()],
            "",
            "Naive: CReaM's auxiliary view without minimization holds, per view, every joined row's group key and "
            "argument; one such view per view (a shared minimized view is compared with one view's naive data).",
        ]
    lines += ["", ROWS_READ_NOTE, ""]
    out.write_text("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
