"""The D-lattice pipeline, top to bottom (paper 001, Section 5; one pass per module, as compile.py).

Its shape depends only on the compiled plan; the choice of parents depends on the night's statistics:

    SHAPE   lattice_points      Plan -> Lattice   the change set of each fact table + every view
            derive_edges                          the derives relation v1 ≺^{d..} v2 (5.1)
            add_implied_points                    least upper bounds of unconnected views (3.4, 5.1)
            augment                               lattice-friendly attributes (and aggregates) (5.2)
            optimize                              Appendix B: essentials, joins/aggregates/projections pushed down
    CHOICE  choose_parents      + Statistics      the cheapest parent of every summary-delta (5.5)
            keep_chosen                           implied points nobody chose dropped; Appendix B over chosen edges

By Theorem 5.1 the D-lattice of summary-deltas is the V-lattice of the views, edges and join labels
included, so one structure serves both. Each pass is `pass(lattice, plan, **context) -> lattice`
and takes from the context only the keywords it names (sqlglot's optimizer does the same).
"""

from __future__ import annotations

import inspect
from typing import Callable

from lattice.ir import Lattice, Plan
from lattice.passes.choose_parents import Statistics, choose_parents
from lattice.passes.derives import derive_edges, lattice_points
from lattice.passes.keep_chosen import keep_chosen
from lattice.passes.optimize import optimize
from lattice.passes.vlattice import add_implied_points, augment

__all__ = ["CHOICE", "SHAPE", "Statistics", "build_lattice", "choose", "lattice_shape"]

Pass = Callable[..., Lattice]
SHAPE: tuple[Pass, ...] = (lattice_points, derive_edges, add_implied_points, augment, optimize)
CHOICE: tuple[Pass, ...] = (choose_parents, keep_chosen)


def run(passes: tuple[Pass, ...], lattice: Lattice, plan: Plan, **context) -> Lattice:
    for rule in passes:
        wanted = inspect.signature(rule).parameters
        lattice = rule(lattice, plan, **{k: v for k, v in context.items() if k in wanted})
    return lattice


def lattice_shape(plan: Plan, augment_aggregates: bool = False) -> Lattice:
    """Points, edges, implied points and augmentations, optimized: the same for every batch.

    augment_aggregates: also add other views' aggregates to a point so that views whose aggregates it
    lacks can derive from it (5.2's third kind; off by default, so such views fall back to the change set)."""
    return run(SHAPE, Lattice(nodes=()), plan, augment_aggregates=augment_aggregates)


def choose(shape: Lattice, plan: Plan, stats: Statistics | None = None) -> Lattice:
    """The shape costed for a batch described by `stats` (defaults when None): the optimized D-lattice."""
    return run(CHOICE, shape, plan, stats=stats)


def build_lattice(plan: Plan, stats: Statistics | None = None, augment_aggregates: bool = False) -> Lattice:
    return choose(lattice_shape(plan, augment_aggregates), plan, stats)
