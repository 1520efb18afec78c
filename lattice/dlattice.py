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
from lattice.passes.derives import derive_edges, lattice_points
from lattice.passes.optimize import optimize
from lattice.passes.vlattice import vlattice

__all__ = ["Statistics", "build_lattice"]


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
