"""How the lake lays each fact table out: as one Delta table, or partitioned by month of a DATE or TIMESTAMP column
([lake] partition_by; docs/guides/performance-tuning.md). Decided here, once per night, from the table's size and
the project's settings: apply-base writes the layout it gives (a change of layout writes the table whole once), and
`nightshift plan` shows it with its reason. A night's other steps read the layout the lake recorded
(LakeState.partitions), never this choice.

By month, a night's delete check and apply-base's commit read only the months its batch touches, and a view's MIN or
MAX of that column looks for a deleted extreme's successor in its month first; a small table gains nothing from it and
would be split into many small files, so a fact table is laid out by month only from AUTO_ROWS rows on.
"""

from __future__ import annotations

from dataclasses import dataclass

from lattice.ir import Plan, Table

# a fact table of at least this many rows (after the night's batch) is laid out by month of its date column, unless
# [lake] partition_by says otherwise: bench/LAYOUT.md measures where by month pays (an update-generating night 0.63 of
# the time at 10M rows, 0.35 at 30M; at 1M-3M within the bench's spread, with a slower first load)
AUTO_ROWS = 10_000_000


@dataclass(frozen=True)
class Layout:
    table: str
    column: str | None  # partitioned by month of this column; None: one table
    reason: str
    chosen: bool  # by nightshift (False: [lake] partition_by names it)

    def describe(self) -> str:
        return f"{self.table}: {'by month of ' + self.column if self.column else 'one table'} ({self.reason})"


def choose_layouts(plan: Plan, settings: dict[str, str | None], rows: dict[str, int],
                   recorded: dict[str, str], declared_rows: dict[str, int] | None = None) -> tuple[Layout, ...]:
    """The layout of every base table: [lake] partition_by's (`settings`: table -> its date column, or None for
    `false`, one table); else, for a table some view aggregates (a fact table), by month of its date column once it
    holds AUTO_ROWS rows (`rows`: the lake's rows plus the night's change rows; [statistics]' figure, in
    `declared_rows`, when larger). A table the lake already lays out by month (`recorded`) stays so down to half
    that: nights that delete a few rows do not join it back and split it again. Every other table: one table."""
    declared_rows = {k.lower(): v for k, v in (declared_rows or {}).items()}
    settings = {k.lower(): v for k, v in settings.items()}
    facts = {f.lower() for f in plan.fact_tables}
    out = []
    for table in plan.schema.base_tables:
        name = table.name
        if name.lower() in settings:
            col = settings[name.lower()]
            why = f'[lake] partition_by {name} = "{col}"' if col else f"[lake] partition_by {name} = false"
            out.append(Layout(name, col, why, False))
            continue
        if name.lower() not in facts:
            out.append(Layout(name, None, "no view aggregates it", True))
            continue
        n = max(rows.get(name, 0), declared_rows.get(name.lower(), 0))
        if name in recorded and table.column(recorded[name]) is not None and n >= AUTO_ROWS // 2:
            out.append(Layout(name, table.column(recorded[name]).name, f"{n:,} rows; laid out so since an earlier "
                              f"night, and kept down to {AUTO_ROWS // 2:,}; [lake] partition_by {name} = false makes "
                              f"it one table", True))
            continue
        column, why = _date_column(plan, table)
        if n < AUTO_ROWS:
            out.append(Layout(name, None, f"{n:,} rows, under {AUTO_ROWS:,}", True))
        elif column is None:
            out.append(Layout(name, None, f"{n:,} rows, but {why}; name one in [lake] partition_by", True))
        else:
            out.append(Layout(name, column, f"{n:,} rows, at least {AUTO_ROWS:,}; {why}; [lake] partition_by "
                              f"{name} = false keeps it one table", True))
    return tuple(out)


def partitions(layouts: tuple[Layout, ...]) -> dict[str, str]:
    """table -> the date column whose months lay it out (apply-base's `partitions`)."""
    return {lay.table: lay.column for lay in layouts if lay.column}


def _date_column(plan: Plan, table: Table) -> tuple[str | None, str]:
    """The DATE or TIMESTAMP column of `table` to lay it out by, and why; None when it has none, or several that
    the views use equally."""
    dates = [c for c in table.columns if c.type.upper().startswith(("DATE", "TIMESTAMP"))]
    if not dates:
        return None, "it has no DATE or TIMESTAMP column"
    if len(dates) == 1:
        return dates[0].name, f"its one date column {dates[0].name}"
    used = {c.name: 0 for c in dates}
    for view in plan.lake_views:
        if view.fact.lower() != table.name.lower():
            continue
        refs = {k.ref.column.lower() for k in view.keys if k.ref.table.lower() == table.name.lower()}
        text = " ".join(a.sql.lower() for a in view.arguments)
        for c in dates:
            if c.name.lower() in refs or f'"{c.name.lower()}"' in text:
                used[c.name] += 1
    best = max(used.values())
    top = [c for c, k in used.items() if k == best]
    if len(top) > 1:
        return None, f"its date columns {', '.join(top)} are used alike"
    return top[0], f"the date column its views use most ({top[0]}, {best} view(s))"
