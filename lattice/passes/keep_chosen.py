"""Pass 8: keep only what the chosen parents need (paper 001, 5.5 and Appendix B over the chosen edges).

After choose_parents, an implied point no summary-delta was given a parent from is dropped (the
total is not cheaper with it), and Appendix B's pruning runs again over the chosen edges only: a
lattice-friendly augmentation that no chosen edge reads is not computed. Each summary-delta taken
straight from the change set gets a note saying why no other point served.
"""

from __future__ import annotations

from dataclasses import replace

from lattice.ir import Lattice, ParentChoice, Plan
from lattice.passes import derives as d
from lattice.passes.optimize import push_aggregates_and_projections
from lattice.passes.vlattice import with_enables


def keep_chosen(lattice: Lattice, plan: Plan) -> Lattice:
    lattice = drop_unchosen_implied(lattice, plan)
    chosen = {(c.parent, c.node) for c in lattice.parents}
    lattice = push_aggregates_and_projections(
        lattice, plan, lambda lat, name: tuple(e for e in lat.edges_from(name) if (e.upper, e.lower) in chosen)
    )
    notes = tuple(_why_direct(lattice, c) for c in lattice.parents if lattice.node(c.parent).kind == "changes")
    return with_enables(replace(lattice, notes=lattice.notes + notes))


def drop_unchosen_implied(lattice: Lattice, plan: Plan) -> Lattice:
    kept = {p.node for p in lattice.parents}
    gone = {n.name for n in lattice.nodes if n.kind == "implied" and n.name not in kept}
    if not gone:
        return lattice
    kept_notes = tuple(n for n in lattice.notes if n.split(":", 1)[0] not in gone)
    dropped = tuple(f"{n}; dropped: the total is not cheaper with it" for n in lattice.notes if n.split(":", 1)[0] in gone)
    notes = kept_notes + dropped
    return d.derive_edges(
        replace(
            lattice,
            notes=notes,
            nodes=tuple(n for n in lattice.nodes if n.name not in gone),
            augmentations=tuple(a for a in lattice.augmentations if a.node not in gone),
            essentials=tuple(e for e in lattice.essentials if e.node not in gone),
            estimates=tuple(e for e in lattice.estimates if e.node not in gone),
        ),
        plan,
    )


def _why_direct(lattice: Lattice, choice: ParentChoice) -> str:
    """Why a summary-delta is propagated directly from the change set (4.1) rather than along the lattice."""
    reasons = []
    for other in lattice.nodes:
        if other.name in (choice.node, choice.parent) or other.kind == "changes" or other.fact != lattice.node(choice.node).fact:
            continue
        cand = next((c for c in choice.candidates if c.parent == other.name), None)
        if cand is None:
            why = lattice.why_not(other.name, choice.node)
            if why is None and lattice.edge(choice.node, other.name):
                why = f"{other.name} derives from {choice.node}"
            reasons.append(f"not from {other.name}: {why or 'no edge'}")
        elif not cand.valid:
            reasons.append(f"not from {other.name}: {cand.reason}")
        else:
            reasons.append(f"not from {other.name}: cost {cand.cost} ≥ {choice.chosen.cost} from the change set")
    tail = "; ".join(reasons) if reasons else "no other summary-delta over the same fact table"
    return f"{choice.node}: computed directly from the change set {choice.parent} ({tail})"
