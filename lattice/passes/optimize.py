"""Pass 6: optimize the lattice (paper 001, Section 5.3 and Appendix B).

1. Mark what each point's own definition needs (Appendix B's annotation): its aggregates; the
   dimension tables its aggregates, filter or group-by columns "not available in the fact table" use
   (and a dimension joined through a nullable foreign key, whose join drops fact rows); those
   dimension attributes.
2. Push joins down, one top-down traversal: a dimension that is not essential at a point is dropped
   from it (the key the fact holds is kept), and the edges out of it that need the dimension's columns
   join it instead (their labels, Example 5.3). Augmentations that came from a dropped dimension go too.
3. Push aggregates and projections down, one traversal in reverse topological order: a hidden
   attribute or aggregate (5.2's augmentations) that no outgoing edge reads is not essential at the
   point and is removed; an aggregate over a group-by column is never added (derives computes it as
   SUM(A*Y) or MIN(A) along the edge).
4. Label the edges: derives recomputes every edge from the optimized points.
"""

from __future__ import annotations

from dataclasses import replace

from lattice.graph import topological_order
from lattice.ir import Essentials, Lattice, LatticeNode, Plan
from lattice.passes import derives as d
from lattice.passes.vlattice import with_enables


def optimize(lattice: Lattice, plan: Plan) -> Lattice:
    lattice = mark_essentials(lattice, plan)
    lattice = push_joins(lattice, plan)
    lattice = push_aggregates_and_projections(lattice, plan)
    return with_enables(lattice)


# ------------------------------------------------------------------ 1. essential marks


def mark_essentials(lattice: Lattice, plan: Plan) -> Lattice:
    return replace(lattice, essentials=tuple(essentials_of(n, lattice, plan) for n in lattice.nodes))


def _hidden(lattice: Lattice, node: str) -> set[str]:
    return {a.name for a in lattice.augmentations if a.node == node}


def essentials_of(node: LatticeNode, lattice: Lattice, plan: Plan) -> Essentials:
    hidden = _hidden(lattice, node.name)
    if node.kind == "changes":
        return Essentials(node.name, node.tables, tuple(k.ref for k in node.keys), tuple(s.column for s in node.stored))
    tree = d.join_tree(node)
    columns = [c for k in node.keys if k.name not in hidden for c in d.attribute_columns(k.ref)]
    attributes = tuple(dict.fromkeys(c for c in columns if d.canonical(c, tree).table != node.fact))
    used = {r.table for r in attributes}
    used |= {r.table for a in node.arguments for r in d.columns_of(a.sql) if _argument_kept(node, a.index, hidden)}
    used |= {r.table for r in d.columns_of(node.where)} if node.where else set()
    used |= d.filtering_tables(node, plan.schema)
    tables = _with_paths(node, used)
    aggregates = tuple(s.column for s in node.stored if s.column not in hidden)
    return Essentials(node.name, tables, attributes, aggregates)


def _argument_kept(node: LatticeNode, index: int, hidden: set[str]) -> bool:
    return any(s.arg == index and s.column not in hidden for s in node.stored)


def _with_paths(node: LatticeNode, used: set[str]) -> tuple[str, ...]:
    """The essential tables plus the tables on their foreign-key path from the fact (snowflakes)."""
    tree = d.join_tree(node)
    want = {node.fact}
    for t in used:
        while t not in want and t in tree:
            want.add(t)
            t = tree[t].child
    return tuple(t for t in node.tables if t in want)


# ------------------------------------------------------------------ 2. push joins down


def push_joins(lattice: Lattice, plan: Plan) -> Lattice:
    marks = {e.node: e for e in lattice.essentials}
    nodes, dropped_augs, notes = [], set(), []
    for name in topological_order(lattice):  # one top-down traversal
        node = lattice.node(name)
        keep = marks[name].tables
        dropped = [t for t in node.tables if t not in keep]
        if dropped:
            hidden = {a.name for a in lattice.augmentations if a.node == name and a.ref and a.ref.table in dropped}
            dropped_augs |= {(name, h) for h in hidden}
            tree = d.join_tree(node)  # a dropped dimension's key is kept as the fact's foreign key
            keys = tuple(replace(k, ref=d.canonical(k.ref, tree)) if k.ref.table in dropped else k for k in node.keys)
            node = replace(
                node,
                tables=keep,
                joins=tuple(j for j in node.joins if j.parent in keep),
                keys=tuple(k for k in keys if k.name not in hidden),
            )
            notes.append(f"{name}: join with {', '.join(dropped)} pushed down to the edges below it (Appendix B)")
        nodes.append(node)
    if not notes:
        return lattice
    order = {n.name: i for i, n in enumerate(lattice.nodes)}
    nodes.sort(key=lambda n: order[n.name])
    augs = tuple(a for a in lattice.augmentations if (a.node, a.name) not in dropped_augs)
    return d.derive_edges(replace(lattice, nodes=tuple(nodes), augmentations=augs, notes=lattice.notes + tuple(notes)), plan)


# ------------------------------------------------------------------ 3. push aggregates and projections down


def push_aggregates_and_projections(lattice: Lattice, plan: Plan, edges_of=None) -> Lattice:
    """Drop every augmentation no outgoing edge reads, children first so that a parent sees what its
    children still need. `edges_of(lattice, node)` chooses the outgoing edges that count (default:
    every edge of the derives relation; choose_parents passes the chosen ones)."""
    edges_of = edges_of or (lambda lat, name: lat.edges_from(name))
    for name in reversed(topological_order(lattice)):
        used = {u for e in edges_of(lattice, name) for u in e.uses}
        unused = {a.name for a in lattice.augmentations if a.node == name and a.name not in used}
        if unused:
            lattice = d.derive_edges(_without(lattice, name, unused), plan)
    return lattice


def _without(lattice: Lattice, name: str, hidden: set[str]) -> Lattice:
    node = lattice.node(name)
    stored = tuple(s for s in node.stored if s.column not in hidden)
    args = {s.arg for s in stored}
    node = replace(
        node,
        keys=tuple(k for k in node.keys if k.name not in hidden),
        stored=stored,
        arguments=tuple(a for a in node.arguments if a.index in args),
    )
    return replace(
        lattice,
        nodes=tuple(node if n.name == name else n for n in lattice.nodes),
        augmentations=tuple(a for a in lattice.augmentations if not (a.node == name and a.name in hidden)),
    )
