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
    summary-deltas computed. Points of a level in lattice order."""
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
