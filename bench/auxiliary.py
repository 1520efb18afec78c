"""DISTINCT aggregates: auxiliary mode against recomputing the view.

    .venv/bin/python -m bench.auxiliary [--pos 10000000] [--fraction 0.001]

Three projects over the same --pos rows and the same update-generating night of --fraction changes:

1. Figure 1's four views alone (the baseline the view adds to);
2. + `store_items` (the number of distinct items each store sold, and its sales) kept in auxiliary mode:
   over its auxiliary view (pos grouped by storeID and itemID, with the multiplicity), in the lake;
3. + the same view kept by recompute (`[views] store_items = "recompute"`): Spark over the base.

Propagate and window per project (the view's cost is the difference to project 1), the rows
propagate read from the base fact table and from the auxiliary view (the manifest's Spark scan
metrics), and the auxiliary view's rows and bytes against the naive auxiliary data (CReaM without
minimization: the view's joined base rows, here every pos row's storeID and itemID).

Writes bench/AUXILIARY.md with the machine's load at the start. Run it on an idle machine.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow.parquet as pq

from bench.modes import run_line
from bench.nested import compare_kinds, measured_night, project, read, report_row

ROWS_READ_NOTE = ("Rows read: the rows of the row groups Spark's Parquet scans read during propagate (the manifest's "
                  "`rows_read`, before filters), summed over scans; a night with deletes also reads pos to check that "
                  "each delete names an existing row (every project).")
from nightshift.cycle import Cycle
from runtime.lake import delta_snapshot

NAME = "store_items"
VIEW = (f"CREATE VIEW {NAME} AS SELECT storeID, COUNT(DISTINCT itemID) AS items, COUNT(*) AS sales "
        f"FROM pos GROUP BY storeID\n")
KINDS = ("figure1", "auxiliary", "recompute")


def main(argv: list[str] | None = None) -> int:
    return compare_kinds(argv, "auxiliary", __doc__, "AUXILIARY.md", KINDS, night, write_report)


def night(root: Path, rows: int, fraction: float, kind: str) -> dict:
    project(root, kind, NAME, VIEW)
    return measured_night(root, rows, fraction, _sizes if kind == "auxiliary" else None)


def _sizes(cycle: Cycle) -> dict:
    """The auxiliary view's rows and bytes in the lake after the night, and the naive auxiliary data's
    rows (every pos row) and bytes (pos's storeID and itemID columns, from the Parquet footers)."""
    return sizes(cycle, cycle.plan.view(NAME).reads[0], ("storeID", "itemID"))


def sizes(cycle: Cycle, aux_view: str, columns: tuple[str, ...]) -> dict:
    """An auxiliary view's rows and bytes in the lake, and the naive auxiliary data's rows (every pos row)
    and bytes (the pos `columns` it would hold, compressed, from pos's Parquet footers)."""
    state = cycle.lake.state()
    aux, pos = cycle.lake.table_path(aux_view), cycle.lake.table_path("pos")
    _, aux_files = delta_snapshot(aux, state.version(aux_view))
    _, pos_files = delta_snapshot(pos, state.version("pos"))
    naive_bytes = 0
    for f in sorted(pos / p for p in pos_files):
        meta = pq.ParquetFile(f).metadata
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            naive_bytes += sum(group.column(c).total_compressed_size for c in range(group.num_columns)
                               if group.column(c).path_in_schema in columns)
    return {"aux_rows": cycle.lake.rows(aux_view, state), "aux_bytes": sum(a["size"] for a in aux_files.values()),
            "naive_rows": cycle.lake.rows("pos", state), "naive_bytes": naive_bytes}


def write_report(out: Path, args, load: float, r: dict) -> None:
    base, aux, rec = r["figure1"], r["auxiliary"], r["recompute"]
    aux_view = aux["reads"][NAME][0]  # the auxiliary view's name, from the plan

    def row(label: str, x: dict) -> str:
        return report_row(label, x, base, NAME, ("base pos", "copy " + aux_view))

    lines = [
        "# DISTINCT aggregates: auxiliary mode vs recompute (bench/auxiliary.py)",
        "",
        run_line("auxiliary", load),
        "",
        f"One update-generating night of {aux['changes']:,} pos changes on {args.pos:,} pos rows. The view:",
        "",
        "```sql",
        VIEW.strip(),
        "```",
        "",
        f"| project | propagate (s) | vs Figure 1 | window: refresh (s) | vs Figure 1 | {NAME} delta rows | "
        f"rows of pos read | rows of the auxiliary view read |",
        "|---|---|---|---|---|---|---|---|",
        f"| Figure 1's four views | {base['propagate']:.1f} | | {base['refresh']:.2f} | | | {read(base, 'base pos')} | |",
        row(f"+ {NAME}, {aux['modes'].get(NAME)} mode (over {aux_view}, in the lake)", aux),
        row(f"+ {NAME}, {rec['modes'].get(NAME)} mode (Spark, over the base)", rec),
        "",
        f"The auxiliary view after the night: {aux['aux_rows']:,} rows, {aux['aux_bytes'] / 1e6:.1f} MB of Parquet; "
        f"the naive auxiliary data (CReaM unminimized: the view's base rows, pos's storeID and itemID): "
        f"{aux['naive_rows']:,} rows, {aux['naive_bytes'] / 1e6:.1f} MB compressed in pos's Parquet "
        f"({aux['aux_rows'] / max(aux['naive_rows'], 1):.2f} of the rows).",
        "",
        ROWS_READ_NOTE,
        "",
    ]
    out.write_text("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
