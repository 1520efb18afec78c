"""The D-lattice pipeline, top to bottom (paper 001, Section 5; one pass per module, as compile.py).

    lattice_points   Plan                 -> Lattice   the change set of each fact table + every view
    derive_edges     Lattice              -> Lattice   the derives relation v1 ≺^{d..} v2 (5.1)
    vlattice         Lattice              -> Lattice   implied points, lattice-friendly augmentation (5.2-5.3)
    optimize         Lattice              -> Lattice   Appendix B: essentials, joins/aggregates/projections pushed down
    choose_parents   Lattice, Statistics  -> Lattice   cheapest parent of every summary-delta (5.5)

By Theorem 5.1 the D-lattice of summary-deltas is the V-lattice of the views, edges and join labels
included, so one structure serves both. Not yet wired into compile_project.
"""

from __future__ import annotations

from lattice.ir import Lattice, Plan
from lattice.passes.choose_parents import Statistics, choose_parents
from lattice.passes.derives import derive_edges, lattice_points, topological_order
from lattice.passes.optimize import optimize
from lattice.passes.vlattice import vlattice

__all__ = ["Statistics", "build_lattice", "levels"]


def build_lattice(plan: Plan, stats: Statistics | None = None, augment_aggregates: bool = False) -> Lattice:
    """The optimized D-lattice of `plan` for a batch described by `stats` (defaults when None).

    augment_aggregates: also add other views' aggregates to a point so that views whose aggregates it
    lacks can derive from it (5.2's third kind; off by default, so such views fall back to the change set).
    """
    lattice = lattice_points(plan)
    lattice = derive_edges(lattice, plan)
    lattice = vlattice(lattice, plan, augment_aggregates)
    lattice = optimize(lattice, plan)
    lattice = choose_parents(lattice, plan, stats)
    return lattice


def levels(lattice: Lattice) -> tuple[tuple[str, ...], ...]:
    """The lattice's points in levels (the change sets excluded): level 0 holds the points that only the
    change set derives; a point of level k > 0 is derived by some point of level k-1 and by none of a
    higher level. Whatever parent the cost model picks for a point (any night, any statistics), it lies
    on a lower level or is the change set, since the edges do not depend on statistics: one propagate
    task per level, in order, always finds its parents' summary-deltas computed. Points of a level in
    lattice order."""
    level: dict[str, int] = {}
    for name in topological_order(lattice):
        if lattice.node(name).kind == "changes":
            continue
        uppers = [level[e.upper] for e in lattice.edges_into(name) if e.upper in level]
        level[name] = 1 + max(uppers) if uppers else 0
    out: list[list[str]] = [[] for _ in range(1 + max(level.values(), default=-1))]
    for n in lattice.nodes:
        if n.name in level:
            out[level[n.name]].append(n.name)
    return tuple(tuple(names) for names in out)
