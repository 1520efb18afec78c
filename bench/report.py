"""bench/REPORT.md and the Figure 10 plots from the study's results (bench/run.py)."""

from __future__ import annotations

import os
import platform
from pathlib import Path

from bench.lattice import TABLE_1, accesses

VIEWS = ("SID_sales", "sCD_sales", "SiC_sales", "sR_sales")
KIND = {"update": "update-generating", "insert": "insertion-generating"}
# (label, value of a night, matplotlib style) for every line of the Figure 10 plots
LINES = (
    ("Rematerialize (Spark, along the lattice, + load)", lambda r: r["rematerialize"], dict(color="black", marker="s")),
    ("DuckDB recompute", lambda r: r["duckdb"], dict(color="grey", marker="D")),
    ("Counting [GMS93]", lambda r: r["counting"], dict(color="red", marker="x")),
    ("Summary-delta total, lattice", lambda r: r["propagate"] + r["refresh"], dict(color="tab:blue", marker="o")),
    ("Summary-delta total, no lattice", lambda r: r["propagate_direct"] + r["refresh"], dict(color="tab:blue", ls="--", marker="o", mfc="none")),
    ("Propagate, lattice", lambda r: r["propagate"], dict(color="tab:green", marker="^")),
    ("Propagate, no lattice", lambda r: r["propagate_direct"], dict(color="tab:green", ls="--", marker="^", mfc="none")),
    ("Refresh (the window)", lambda r: r["refresh"], dict(color="tab:orange", marker="v")),
    ("Bare MERGE of the same rows (physical limit)", lambda r: r["bare_merge"], dict(color="tab:orange", ls=":", marker=".")),
)


def write_report(out: Path, raw: dict) -> None:
    nights = raw["nights"]
    plots = out.parent / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    figures = _plot(nights, raw["args"], plots)
    lines = _header(raw) + _headline(nights) + [""]
    lines += [f"![{title}](plots/{f.name})" for title, f in figures] + [""]
    lines += _night_table(nights) + [""] + _table_1(nights) + [""] + _notes()
    out.write_text("\n".join(lines) + "\n")


# ---------------------------------------------------------------- text


def _header(raw: dict) -> list[str]:
    import duckdb
    import pyspark

    a = raw["args"]
    argv = " ".join(raw["argv"])
    builds = ", ".join(f"{int(p):,} in {s:.0f}s" for p, s in sorted(raw["builds"].items(), key=lambda x: int(x[0])))
    return [
        "# Performance study: paper 001 Section 6 (Figure 10, Table 1) reproduced (bench/run.py)",
        "",
        f"Command: `{f'.venv/bin/python -m bench.run {argv}'.strip()}` from the repository root (the same as "
        "`.venv/bin/python -m bench.run` with these options; `make bench` runs it without options).",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {_memory()}, Python {platform.python_version()}, "
        f"Spark {pyspark.__version__} local[2], DuckDB {duckdb.__version__} (the warehouse, a DuckDB file); "
        f"code at `{raw.get('code', 'unknown')}`" + (" (`-dirty`: with uncommitted changes in the working tree)" if "dirty" in raw.get("code", "") else "") + ". "
        f"Load average {raw.get('load_start', '?')} at the start, {raw.get('load_end', '?')} at the end"
        + (f": **a shared, loaded machine** (other processes, e.g. other users' Spark jobs, competed for the "
           f"{os.cpu_count()} cores), so absolute times are noisy; the alternatives of one night ran back to back "
           f"on the same data, and the ratios are what to read. " if _loaded(raw) else ". ")
        + (f"{raw['note']} " if raw.get("note") else "")
        + f"Whole run {raw['seconds'] / 60:.1f} min"
        + (f" (**partial: {len(raw['nights'])} of {raw['planned']} planned nights done**)."
           if len(raw["nights"]) < raw.get("planned", 0) else "."),
        "",
        f"Data (nightshift/example.py, seed {a['seed']}, skew {a['skew']}): Appendix A's shape, 100 stores, "
        f"1000 items, dates over 365 days; one project per base size (its first batch applied to the lake's base and "
        f"materialized along the lattice; pos rows and seconds: {builds}), "
        f"then one night per point. Sweeps: " + "; ".join(
            ([f"Figure 10(a)/(c) pos {a['fixed_pos']:,}, changes {a['change_sweep']}"] if a["change_sweep"] else [])
            + ([f"Figure 10(b)/(d) changes {a['fixed_changes']:,}, pos {a['pos_sweep']}"] if a["pos_sweep"] else [])
            + ([f"larger pos {a['large_pos']:,} with changes {a['large_fractions']} of it"] if a["large_pos"] else [])) + ".",
        "",
    ] + _scaled_down(a)


def _scaled_down(a: dict) -> list[str]:
    """Say so when the run used other sweeps than `make bench`'s defaults (e.g. to fit a loaded machine)."""
    from bench.run import FULL, QUICK

    if a.get("quick"):
        return [f"**Quick mode** (`--quick`): small sizes ({', '.join(f'{k} {v}' for k, v in QUICK.items())}), "
                "to check that the study runs; not the study's sizes.", ""]
    changed = [f"{k.replace('_', '-')} {a[k]} (default {v})" for k, v in FULL.items() if str(a[k]) != str(v)]
    if not changed:
        return []
    return [f"**Other sizes** than the defaults of `make bench`: {'; '.join(changed)}.", ""]


def _loaded(raw: dict) -> bool:
    """Was the 1-minute load well above the core count (the run itself adds about 2) at its start or end?"""
    loads = [str(raw.get(k, "0")).split(" / ")[0] for k in ("load_start", "load_end")]
    return any(float(x) > (os.cpu_count() or 1) + 2 for x in loads if x.replace(".", "", 1).isdigit())  # +2: the run itself


def _memory() -> str:
    try:
        kb = int(next(line for line in open("/proc/meminfo") if line.startswith("MemTotal")).split()[1])
        return f"{kb / 2**20:.0f} GiB RAM"
    except (OSError, StopIteration, ValueError):
        return "RAM unknown"


def _rows_read(r: dict, mode: str) -> int:
    return sum(read for _, read, _ in accesses(r["manifest"][mode]).values())


def _ratios(r: dict) -> dict[str, float]:
    total = r["propagate"] + r["refresh"]
    return {
        "window / Spark rematerialize": r["refresh"] / r["rematerialize"],
        "window / DuckDB recompute": r["refresh"] / r["duckdb"],
        "total (propagate + refresh) / Spark rematerialize": total / r["rematerialize"],
        "counting / Spark rematerialize": r["counting"] / r["rematerialize"],
        "window / bare MERGE": r["refresh"] / r["bare_merge"],
        "rows read by propagate: no lattice / lattice": _rows_read(r, "0") / max(1, _rows_read(r, "1")),
    }


def _headline(nights: list[dict]) -> list[str]:
    """The ratios at the largest base with the fixed change size, per kind, and their range over all nights."""
    lines = ["## Headline ratios", ""]
    kinds = [k for k in KIND if any(r["kind"] == k for r in nights)]
    picks = {}
    for k in kinds:
        mine = [r for r in nights if r["kind"] == k]
        b = [r for r in mine if "b" in r["sweeps"]] or mine
        picks[k] = max(b, key=lambda r: (r["pos"], r["changes"]))
    head = "| ratio | " + " | ".join(f"{KIND[k]}, pos {picks[k]['pos']:,}, changes {picks[k]['changes']:,}" for k in kinds)
    lines += [head + " | range over all nights |", "|---|" + "---|" * (len(kinds) + 1)]
    for name in _ratios(nights[0]):
        every = [_ratios(r)[name] for r in nights]
        cells = " | ".join(_fmt(_ratios(picks[k])[name]) for k in kinds)
        lines.append(f"| {name} | {cells} | {_fmt(min(every))} – {_fmt(max(every))} |")
    return lines


def _fmt(x: float) -> str:
    return f"{x:.2g}" if x < 0.01 else f"{x:.3f}" if x < 1 else f"{x:.2f}" if x < 10 else f"{x:.1f}"


def _night_table(nights: list[dict]) -> list[str]:
    lines = [
        "## Every night (seconds)",
        "",
        "| kind | pos rows | changes | sd rows | propagate lattice | propagate no lattice | refresh (window) | "
        "total lattice | total no lattice | bare MERGE | apply-base | counting | DuckDB recompute | Spark rematerialize | "
        "rows read lattice / no lattice |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(nights, key=lambda r: (r["kind"], r["pos"], r["changes"])):
        sd = sum(v["rows"] for v in r["manifest"]["1"]["views"].values())
        lines.append(
            f"| {r['kind']} | {r['pos_rows']:,} | {r['changes']:,} | {sd:,} | {r['propagate']:.2f} | "
            f"{r['propagate_direct']:.2f} | {r['refresh']:.3f} | {r['propagate'] + r['refresh']:.2f} | "
            f"{r['propagate_direct'] + r['refresh']:.2f} | {r['bare_merge']:.3f} | {r['apply_base']:.2f} | "
            f"{r['counting']:.2f} | {r['duckdb']:.2f} | {r['rematerialize']:.2f} | "
            f"{_rows_read(r, '1'):,} / {_rows_read(r, '0'):,} |"
        )
    return lines


def _table_1(nights: list[dict]) -> list[str]:
    """Table 1's tuple accesses per summary table, measured at the night nearest Appendix A's
    database (pos 1M, changes 10K), next to the paper's analytic numbers."""
    lines = ["## Table 1: tuple accesses per summary table (measured vs Appendix A's analytic numbers)", ""]
    for kind in (k for k in KIND if any(r["kind"] == k for r in nights)):
        r = min((r for r in nights if r["kind"] == kind),
                key=lambda r: (abs(r["pos"] - 1_000_000), abs(r["changes"] - 10_000)))
        direct, lattice = accesses(r["manifest"]["0"]), accesses(r["manifest"]["1"])
        remat, count = r["rematerialize_views"], r["counting_rows"]
        changes = r["changes"]
        m = r["manifest"]["1"]
        pos_after = r["pos_rows"] + m["inserted"]["pos"] - m["deleted"]["pos"]  # what rematerialize read
        lines += [
            f"**{KIND[kind]}, pos {r['pos_rows']:,} (before the night), changes {changes:,}** (Appendix A: pos 1,000,000, changes "
            f"10,000 over 1,000 (store, item) pairs, so sd_SID_sales has 1,000 rows; here the changes spread "
            f"over the whole data, so summary-deltas are larger).",
            "",
            "| summary table | rows | sd rows | recompute: parent | recompute | paper | individual | paper | "
            "reuse deltas: parent | reuse deltas | paper | counting | paper |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        totals = [0] * 8
        for v in VIEWS:
            parent = remat[v]["parent"]
            read = pos_after if parent.startswith("Δ") else remat.get(parent, {}).get("rows", 0)
            cells = [read + remat[v]["rows"], TABLE_1[v][0], sum(direct[v][1:]), TABLE_1[v][1],
                     sum(lattice[v][1:]), TABLE_1[v][2],
                     changes + count[v]["deleted"] + count[v]["base_rows"] + count[v]["inserted"], TABLE_1[v][3]]
            totals = [t + c for t, c in zip(totals, cells)]
            lines.append(
                f"| {v} | {remat[v]['rows']:,} | {direct[v][2]:,} | {parent} | {cells[0]:,} | {cells[1]:,} | {cells[2]:,} | "
                f"{cells[3]:,} | {lattice[v][0]} | {cells[4]:,} | {cells[5]:,} | {cells[6]:,} | {cells[7]:,} |"
            )
        t = [f"**{x:,}**" for x in totals]
        lines += [f"| **total** | | | | {t[0]} | {t[1]} | {t[2]} | {t[3]} | | {t[4]} | {t[5]} | {t[6]} | {t[7]} |", ""]
    lines += [
        "Counted as Appendix A does. Recompute: rows of the table it is computed from (pos, or the parent summary",
        "table) + rows written. Individual / reuse deltas: rows read by propagate (the change rows, or the parent",
        "summary-delta's rows, from the propagate manifest) + summary-delta rows written by refresh (the ledger).",
        "Counting: change rows read + summary rows deleted + pos rows of the recomputed groups + rows inserted.",
        "With sales spread over 365 days x 100 stores x 1000 items (36.5M possible groups), SID_sales has about one",
        "row per pos row where Appendix A assumes 100,000 rows, so sd_SID_sales is about as large as the changes and",
        "re-using it saves less than Table 1 shows; `python -m bench.lattice` (LATTICE.md) concentrates the changes",
        "on 1,000 (store, item) pairs as Table 3 does; `--skew` concentrates them here.",
    ]
    return lines


def _notes() -> list[str]:
    return [
        "## What is measured",
        "",
        "- **Propagate** (`nightshift propagate`, Spark): reads and checks the batch, computes every summary-delta "
        "along the optimized D-lattice (`lattice`) or each straight from the changes (`no lattice`, "
        "NIGHTSHIFT_LATTICE=0), writes them as Parquet. Runs outside the window. Both on the same batch, no lattice first.",
        "- **Refresh (the window)** (`nightshift refresh`): stages the summary-deltas and applies them to the four "
        "summary tables plus the ledger row in one transaction (Figure 8). The summary-deltas of both propagate modes "
        "are the same rows, so refresh is measured once. **Total** = propagate + refresh.",
        "- **Bare MERGE**: the same summary-delta rows staged and MERGEd by key with plain additions (no emptied "
        "groups, exact MIN/MAX or ledger), before refresh, rolled back: how close refresh is to the warehouse's limit.",
        "- **Counting [GMS93]**: after apply-base, for every summary table the groups the changes touch are deleted "
        "and recomputed from the base Parquet inside the warehouse (DuckDB, base rows filtered by the affected keys "
        "before grouping), rolled back.",
        "- **DuckDB recompute**: every view's own SQL over the base Parquet (no load into the warehouse).",
        "- **Spark rematerialize**: every summary table recomputed by Spark from the smallest one already computed "
        "along the lattice (Section 6: SID_sales from pos, the others from SID_sales or sCD_sales), written as "
        "Parquet and loaded into the warehouse in one transaction (`spark_jobs/materialize.py`).",
        "- Not in the times: apply-base (shown in the table; it makes the batch part of the lake's base and is "
        "outside the window) and data generation.",
    ]


# ---------------------------------------------------------------- plots


def _plot(nights: list[dict], args: dict, folder: Path) -> list[tuple[str, Path]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = []
    panels = [("a", "update", "changes"), ("b", "update", "pos"), ("c", "insert", "changes"), ("d", "insert", "pos")]
    if any(s in r["sweeps"] for r in nights for s in ("a", "b")):
        fig, axes = plt.subplots(2, 2, figsize=(13, 10))
        for ax, (letter, kind, x) in zip(axes.flat, panels):
            sweep = "a" if x == "changes" else "b"
            rows = sorted((r for r in nights if r["kind"] == kind and sweep in r["sweeps"]), key=lambda r: r[x])
            fixed = f"pos {args['fixed_pos']:,}" if x == "changes" else f"changes {args['fixed_changes']:,}"
            _panel(ax, rows, x, f"({letter}) {KIND[kind]}, {fixed}")
        _legend(fig, axes)
        out.append(("Figure 10 (a)-(d)", _save(fig, folder / "figure10.png")))
    large = [r for r in nights if "large" in r["sweeps"]]
    if large:
        kinds = [k for k in KIND if any(r["kind"] == k for r in large)]
        fig, axes = plt.subplots(1, len(kinds), figsize=(6.5 * len(kinds), 5.6), squeeze=False)
        for ax, kind in zip(axes.flat, kinds):
            rows = sorted((r for r in large if r["kind"] == kind), key=lambda r: r["changes"])
            _panel(ax, rows, "changes", f"{KIND[kind]}, pos {args['large_pos']:,}")
        _legend(fig, axes)
        out.append((f"Changes 0.1%-1% of pos {args['large_pos']:,}", _save(fig, folder / "figure10_large.png")))
    return out


def _panel(ax, rows: list[dict], x: str, title: str) -> None:
    xs = [r[x] for r in rows]
    for label, value, style in LINES:
        ax.plot(xs, [value(r) for r in rows], label=label, lw=1.6, ms=6, **style)
    ax.set_yscale("log")
    if xs and min(xs) > 0 and max(xs) / min(xs) > 20:  # e.g. pos 100K .. 10M: the small sizes stay apart
        ax.set_xscale("log")
    ax.set_xlabel(("changes (rows)" if x == "changes" else "pos (rows)") + (", log scale" if ax.get_xscale() == "log" else ""))
    ax.set_ylabel("elapsed seconds (log scale)")
    ax.set_title(title, fontsize=11)
    ax.grid(True, which="both", alpha=0.3)
    ax.xaxis.set_major_formatter(lambda v, _: f"{v / 1000:g}K" if v < 1e6 else f"{v / 1e6:g}M")
    ax.xaxis.set_minor_formatter(lambda v, _: "")


def _legend(fig, axes) -> None:
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=9, frameon=False)
    fig.tight_layout(rect=(0, 1.0 / fig.get_figheight(), 1, 1))  # about an inch for the legend


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
