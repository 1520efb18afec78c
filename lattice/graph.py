"""Graph helpers over a Lattice value: parents-first order, the Hasse diagram, the levels."""

from __future__ import annotations

from dataclasses import replace

from lattice.ir import Edge, Lattice


def topological_order(lattice: Lattice) -> list[str]:
    """Parents before children (the edges are acyclic); ties in node order."""
    indegree = {n.name: 0 for n in lattice.nodes}
    for e in lattice.edges:
        indegree[e.lower] += 1
    order, ready = [], [n.name for n in lattice.nodes if indegree[n.name] == 0]
    while ready:
        name = ready.pop(0)
        order.append(name)
        for e in lattice.edges_from(name):
            indegree[e.lower] -= 1
            if indegree[e.lower] == 0:
                ready.append(e.lower)
    if len(order) != len(lattice.nodes):
        raise AssertionError(f"lattice has a cycle among {sorted(set(indegree) - set(order))}")
    return order


def mark_cover(edges: list[Edge] | tuple[Edge, ...]) -> tuple[Edge, ...]:
    """The transitive reduction (Hasse diagram): u -> w is drawn unless some u -> v -> w exists (3.4)."""
    out: dict[str, set[str]] = {e.upper: set() for e in edges}
    for e in edges:
        out[e.upper].add(e.lower)
    return tuple(
        replace(e, cover=not any(e.lower in out.get(v, ()) for v in out[e.upper] if v != e.lower)) for e in edges
    )


def levels(lattice: Lattice) -> tuple[tuple[str, ...], ...]:
    """The lattice's points in levels (the change sets excluded): level 0 holds the points that only the
    change set derives; a point of level k > 0 is derived by some point of level k-1 and by none of a
    higher level. Computed on the lattice's shape (dlattice.lattice_shape: every edge, before any
    statistics), so whatever parent the cost model picks for a point on any night, it lies on a lower
    level or is the change set: one propagate task per level, in order, always finds its parents'
    summary-deltas computed. Points of a level in lattice order. There is always a level 0, even with no
    point at all: the views kept by recompute are computed there (a project whose views are all kept by
    recompute still runs one propagate task a night)."""
    level: dict[str, int] = {}
    after = {n.name: n.after for n in lattice.nodes if n.kind == "changes" and n.after}
    for name in _order_with_after(lattice, after):
        if lattice.node(name).kind == "changes":
            if name in after:  # a summary view's change set: ready in the level after that view's
                level[name] = level[after[name]]
            continue
        uppers = [level[e.upper] for e in lattice.edges_into(name) if e.upper in level]
        level[name] = 1 + max(uppers) if uppers else 0
    points = {n: k for n, k in level.items() if lattice.node(n).kind != "changes"}
    out: list[list[str]] = [[] for _ in range(1 + max(points.values(), default=0))]
    for n in lattice.nodes:
        if n.name in points:
            out[points[n.name]].append(n.name)
    return tuple(tuple(names) for names in out)


def _order_with_after(lattice: Lattice, after: dict[str, str]) -> list[str]:
    """Parents first, and a summary view's change set after that view's point (so after everything that
    point waits for): Kahn's order over the edges plus one edge view -> change set per summary view."""
    names = [n.name for n in lattice.nodes]
    succ: dict[str, list[str]] = {n: [] for n in names}
    indegree = dict.fromkeys(names, 0)
    for e in lattice.edges:
        succ[e.upper].append(e.lower)
        indegree[e.lower] += 1
    for change_set, view in after.items():
        if view in succ:  # a change set whose view is not a point of this lattice waits for nothing
            succ[view].append(change_set)
            indegree[change_set] += 1
    order, ready = [], [n for n in names if indegree[n] == 0]
    while ready:
        name = ready.pop(0)
        order.append(name)
        for lower in succ[name]:
            indegree[lower] -= 1
            if indegree[lower] == 0:
                ready.append(lower)
    if len(order) != len(names):
        raise AssertionError(f"lattice has a cycle among {sorted(set(names) - set(order))}")
    return order
