"""Per night: keep each incremental view by its summary-delta, or recompute it, whichever is cheaper.

A view the delta mode keeps may still be cheaper to recompute on some nights: a backfill that
rewrites most of the fact table, or a night whose deletes force exact MIN/MAX of the groups that lost
rows from the base anyway. The comparison is in rows, as the D-lattice's cost model (5.5) counts
them, with the rows that move inside the batch window weighted more, since that window is what
nightshift protects:

    delta      rows its summary-delta reads from its parent in the lattice (the parent's own cost is
               paid for the parent's view, or shared) (+ the base fact table when exact MIN/MAX of
               groups that lost rows must be recomputed)
               + WINDOW_WEIGHT x summary-delta rows (x MERGE_FACTOR when they are merged into a
               table that holds rows: a merge probes the table per row; into an empty table they
               are inserted as new keys)
    recompute  rows of the fact table after the batch (old + inserted + deleted, read once)
               + the dimensions it joins + WINDOW_WEIGHT x the view's rows after the batch (a bulk
               replace; groups estimated as 5.5's estimates are, Cardenas over the domain, and at
               least the summary-delta's rows: on the first load the view is its summary-delta)

Recompute must be strictly cheaper. The first load (an empty base) is a tie in rows (both read only
the batch; the estimates differ by a join's rounding), and the lattice shares work between views only
in the delta mode, so the first load always keeps summary-deltas (bench/MODES.md measures both). nightshift.toml [views] <name> =
"incremental" and "delta" never recompute, "recompute" always does.
"""

from __future__ import annotations

import math

from lattice.ir import Lattice, ModeChoice, Plan, View
from lattice.passes.choose_parents import Statistics, _Estimator

WINDOW_WEIGHT = 10  # a row written inside the batch window costs as much as ten rows read outside it
MERGE_FACTOR = 2  # a merged row costs about two bulk-inserted ones (bench/REPORT.md: window / bare MERGE)


def choose_modes(lattice: Lattice, plan: Plan, stats: Statistics | None, deletes: bool) -> tuple[ModeChoice, ...]:
    """Tonight's mode of every incremental view of `plan` (deletes: the batch deletes rows, so views
    with MIN/MAX need exact values of the groups that lost rows)."""
    est = _Estimator(lattice, plan, stats or Statistics())
    return tuple(_choose(v, lattice, plan, est, deletes) for v in plan.incremental_views)


def _choose(view: View, lattice: Lattice, plan: Plan, est: _Estimator, deletes: bool) -> ModeChoice:
    delta, recompute = _delta_cost(view, lattice, est, deletes), _recompute_cost(view, lattice, est)
    if view.maintain == "recompute":
        return ModeChoice(view.name, "recompute", f'nightshift.toml [views] {view.name} = "recompute"', delta, recompute)
    if view.maintain in ("incremental", "delta"):
        return ModeChoice(view.name, "delta", f'nightshift.toml [views] {view.name} = "{view.maintain}"', delta, recompute)
    if not est.table_rows(view.fact)[0]:  # the first load: both read only the batch; the lattice shares work
        return ModeChoice(view.name, "delta", "the base is empty (the first load): its summary-delta is the table; "
                          "along the lattice views share work", delta, recompute)
    if recompute < delta:
        why = _measured(view, est, deletes)
        return ModeChoice(view.name, "recompute", f"cheaper tonight ({why}): recompute ~{recompute:,} vs delta "
                          f"~{delta:,} (rows, window weighted x{WINDOW_WEIGHT})", delta, recompute)
    return ModeChoice(view.name, "delta", f"delta ~{delta:,} vs recompute ~{recompute:,} (rows, window weighted "
                      f"x{WINDOW_WEIGHT})", delta, recompute)


def _measured(view: View, est: _Estimator, deletes: bool) -> str:
    """What made recompute cheaper, as measured tonight: the changed dimension rows the view joins, the
    fact rows changed against the base, and exact MIN/MAX reading the base (never a guess)."""
    parts = []
    if deletes and view.has_min_max:
        parts.append("exact MIN/MAX of the groups that lost rows reads the base anyway")
    changed_dims = [f"{est.change_rows(t)[0]:,} {t} row(s)" for t in view.dimensions if est.reaches(t)]
    if changed_dims:
        parts.append(f"a dimension changed: {', '.join(changed_dims)}")
    (rows, basis), (changed, _) = est.table_rows(view.fact), est.change_rows(view.fact)
    sized = " (estimated)" if basis == "default" else ""
    fact = "its auxiliary view" if any(a.name == view.fact for a in est.plan.auxiliary) else view.fact
    parts.append(f"{changed:,} change row(s) of {fact} against {rows:,}{sized} in its base")
    return "; ".join(parts)


def _delta_cost(view: View, lattice: Lattice, est: _Estimator, deletes: bool) -> int:
    """Its own edge (the parent it reads; a parent's cost is the parent's, computed for its own view or
    shared with others), the exact MIN/MAX reads, and the window."""
    choice = next((p for p in lattice.parents if p.node == view.name), None)
    read = choice.chosen.cost if choice else 0
    if deletes and view.has_min_max:
        read += est.table_rows(view.fact)[0]  # exact MIN/MAX of the groups that lost rows reads the base
    estimate = lattice.estimate(view.name)
    merge = MERGE_FACTOR if est.table_rows(view.fact)[0] else 1  # an empty table takes its rows as new keys
    return read + WINDOW_WEIGHT * merge * (estimate.rows if estimate else 0)


def _recompute_cost(view: View, lattice: Lattice, est: _Estimator) -> int:
    after = est.table_rows(view.fact)[0] + est.change_rows(view.fact)[0]  # every fact row, read once
    dims = sum(est.table_rows(t)[0] for t in view.dimensions)
    node = lattice.node(view.name)
    attrs = est.minimal_attributes(node)
    domain = est.domain(attrs, node)[0] if attrs else 1
    groups = domain * (1 - (1 - 1 / domain) ** after) if domain > 1 else min(1, after)  # Cardenas, as 5.5's estimates
    # the view after the batch holds at least the groups its summary-delta touches (domains measured on
    # an empty base say nothing: on the first load the view is exactly its summary-delta)
    estimate = lattice.estimate(view.name)
    groups = max(groups, estimate.rows if estimate else 0)
    return after + dims + WINDOW_WEIGHT * math.ceil(groups)
