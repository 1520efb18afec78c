"""Pass 7: choose the parent of every summary-delta (paper 001, Section 5.5).

Every summary-delta is computed either from the change set of its fact table (prepare-changes, 4.1)
or from another summary-delta above it in the D-lattice. 5.5 maps the choice to computing several
aggregate views from scratch [AAD+96, SAG96] "by including the join cost estimate in the cost of the
derivation ... along the edge annotated with the join". We count rows read, as Appendix A does:

    cost(parent -> v) = rows(parent) + rows(every dimension joined on the edge)

(a hash join reads the dimension once to build and probes it with the parent's rows, which are
already counted). From the change set, a dimension changed in the batch adds 4.1.4's term
F ⋈ ΔD, which reads the old fact table: rows(fact) + rows(ΔD) per changed dimension the view joins.

An edge that joins a dimension changed in the batch is not valid: the upper summary-delta holds no
trace of the dimension change (Theorem 5.1 assumes changes to the fact table only), so the lower one
must come from the change set or from a point that joins that dimension itself.

All declared views are computed anyway, so each picks its cheapest valid parent independently;
an implied point is kept only if it lowers the total. Estimated rows of every node are recorded
(Estimate.basis says from what) so `nightshift plan` can show them next to actual row counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from lattice.graph import topological_order
from lattice.ir import Candidate, ColumnRef, Edge, Estimate, GroupKey, Lattice, LatticeNode, ParentChoice, Plan
from lattice.passes import derives as d

# Defaults when no statistics are given: Appendix A's database (pos 1,000,000 rows, 10,000 changes,
# 100 stores, 1000 items) as orders of magnitude; refine them with Statistics.
DEFAULT_FACT_ROWS = 1_000_000
DEFAULT_CHANGE_FRACTION = 0.01
DEFAULT_DIMENSION_ROWS = 1_000
DEFAULT_LEVEL_FANOUT = 10  # a hierarchy level above a key groups ~10 members (stores -> city, city -> region)
DEFAULT_DISTINCT_BY_TYPE = {"DATE": 365, "BOOLEAN": 2, "TIMESTAMP": 100_000}
DEFAULT_DISTINCT = 1_000


@dataclass(frozen=True)
class Statistics:
    """What the cost model knows about one batch. All fields optional; missing numbers are defaults.

    table_rows      rows of each base table (dimension sizes, fact size)
    change_rows     changed row images of each table in the batch (inserted + deleted)
    distinct        distinct values of an attribute combination in the base data (a summary table's size)
    change_distinct distinct values of an attribute combination among the batch's changed fact rows,
                    i.e. the rows of a summary-delta grouping by it (Appendix A, Table 3's last column)
    """

    table_rows: tuple[tuple[str, int], ...] = ()
    change_rows: tuple[tuple[str, int], ...] = ()
    distinct: tuple[tuple[frozenset[ColumnRef], int], ...] = ()
    change_distinct: tuple[tuple[frozenset[ColumnRef], int], ...] = ()
    # dimensions the batch changed whose changes reach no view (runtime.night.unreached: rows added under new
    # keys, which no fact row before the batch references): their F ⋈ ΔD term is empty
    unreached: tuple[str, ...] = ()

    @staticmethod
    def of(
        table_rows: dict[str, int] | None = None,
        change_rows: dict[str, int] | None = None,
        distinct: dict[str | tuple[str, ...], int] | None = None,
        change_distinct: dict[str | tuple[str, ...], int] | None = None,
    ) -> "Statistics":
        """Build from dicts; attributes are ColumnRefs or "table.column", combinations tuples of them."""
        return Statistics(
            table_rows=tuple(sorted((table_rows or {}).items())),
            change_rows=tuple(sorted((change_rows or {}).items())),
            distinct=_combos(distinct),
            change_distinct=_combos(change_distinct),
        )

    def rows_of(self, table: str) -> int | None:
        return _lookup(self.table_rows, table)

    def changes_of(self, table: str) -> int | None:
        return _lookup(self.change_rows, table)


def _lookup(pairs: tuple[tuple[str, int], ...], table: str) -> int | None:
    return next((n for t, n in pairs if t.lower() == table.lower()), None)


def _combos(spec: dict | None) -> tuple[tuple[frozenset[ColumnRef], int], ...]:
    """Attribute combinations -> counts; an attribute is a ColumnRef or "table.column", a combination
    one of them or a tuple of them."""
    out = []
    for attrs, n in (spec or {}).items():
        names = (attrs,) if isinstance(attrs, (str, ColumnRef)) else attrs
        refs = frozenset(a if isinstance(a, ColumnRef) else ColumnRef(*a.split(".", 1)) for a in names)
        out.append((refs, int(n)))
    return tuple(sorted(out, key=lambda p: sorted((r.table, r.column) for r in p[0])))


# ------------------------------------------------------------------ estimates


class _Estimator:
    def __init__(self, lattice: Lattice, plan: Plan, stats: Statistics):
        self.lattice, self.plan, self.stats = lattice, plan, stats
        self.deps = d.dependencies(plan.schema, plan.dependencies)

    def table_rows(self, table: str) -> tuple[int, str]:
        n = self.stats.rows_of(table)
        if n is not None:
            return n, "statistics"
        is_fact = table in self.plan.fact_tables
        return (DEFAULT_FACT_ROWS if is_fact else DEFAULT_DIMENSION_ROWS), "default"

    def change_rows(self, table: str) -> tuple[int, str]:
        n = self.stats.changes_of(table)
        if n is not None:
            return n, "statistics"
        if self.stats.change_rows or table not in self.plan.fact_tables:
            return 0, "default"  # a batch whose counts are given and omit a table leaves it unchanged
        return max(1, round(self.table_rows(table)[0] * DEFAULT_CHANGE_FRACTION)), "default"

    def changed_dimensions(self, node: LatticeNode) -> list[str]:
        return [t for t in node.tables[1:] if self.reaches(t)]

    def reaches(self, dimension: str) -> bool:
        """The batch changed `dimension` in a way that reaches the rows of the fact before the batch."""
        return self.change_rows(dimension)[0] > 0 and dimension.lower() not in {t.lower() for t in self.stats.unreached}

    def input_rows(self, node: LatticeNode) -> int:
        """Rows of the node's prepare-changes: fact changes, plus fact rows meeting changed dimension rows."""
        rows = self.change_rows(node.fact)[0]
        fact_rows = self.table_rows(node.fact)[0]
        for t in self.changed_dimensions(node):
            rows += math.ceil(self.change_rows(t)[0] * fact_rows / max(1, self.table_rows(t)[0]))
        return rows

    def rows(self, node: LatticeNode) -> Estimate:
        if node.kind == "changes":
            n, basis = self.change_rows(node.fact)
            return Estimate(node.name, n, f"changed rows of {node.fact} ({basis})")
        n_in = self.input_rows(node)
        attrs = self.minimal_attributes(node)
        if not attrs:
            return Estimate(node.name, min(1, n_in), "no group-by attributes: one group")
        given = self._given(self.stats.change_distinct, attrs, node)
        if given is not None:
            return Estimate(node.name, min(given, n_in), f"distinct {_names(attrs)} among the changes (statistics)")
        domain, basis = self.domain(attrs, node)
        groups = domain * (1 - (1 - 1 / domain) ** n_in) if domain > 1 else min(1, n_in)
        return Estimate(
            node.name,
            max(min(n_in, 1), min(n_in, math.ceil(groups))),
            f"{n_in} changed rows into {domain} groups of {_names(attrs)} ({basis}; Cardenas)",
        )

    def minimal_attributes(self, node: LatticeNode) -> frozenset[ColumnRef]:
        """The node's attributes less those the others determine (they add no groups)."""
        tree = d.join_tree(node)
        keys = {d.canonical(k.ref, tree): k for k in node.keys}
        for ref in sorted(keys, key=lambda r: (r.table == node.fact, r.table, r.column)):
            rest = replace(node, keys=tuple(k for r, k in keys.items() if r != ref))
            if d.Resolver(node, rest, self.deps).obtain(keys[ref].ref) is not None:
                del keys[ref]
        return frozenset(keys)

    def _given(self, pairs, attrs: frozenset[ColumnRef], node: LatticeNode) -> int | None:
        tree = d.join_tree(node)
        for refs, n in pairs:
            if self._minimal(frozenset(d.canonical(r, tree) for r in refs), node) == attrs:
                return n
        return None

    def _minimal(self, refs: frozenset[ColumnRef], node: LatticeNode) -> frozenset[ColumnRef]:
        probe = replace(node, keys=tuple(GroupKey(f"{r.table}.{r.column}", r, "", True) for r in refs))
        return self.minimal_attributes(probe)

    def domain(self, attrs: frozenset[ColumnRef], node: LatticeNode) -> tuple[int, str]:
        given = self._given(self.stats.distinct, attrs, node)
        if given is not None:
            return max(1, given), "distinct groups in the base data (statistics)"
        product, parts = 1, []
        for r in sorted(attrs, key=lambda r: (r.table, r.column)):
            n, basis = self.attribute_distinct(r, node)
            product *= n
            parts.append(f"{r.label}≈{n} {basis}")
        cap = self.table_rows(node.fact)[0] + self.change_rows(node.fact)[0]  # the fact rows after the batch, at most
        return max(1, min(product, cap)), f"product of {', '.join(parts)}, at most {cap:,}"

    def attribute_distinct(self, ref: ColumnRef, node: LatticeNode) -> tuple[int, str]:
        given = self._given(self.stats.distinct, frozenset({ref}), node)
        if given is not None:
            return given, "(statistics)"
        if ref.is_expression:  # a computed key groups the values of its columns: a level above them
            product = 1
            for c in d.attribute_columns(ref):
                product *= self.attribute_distinct(c, node)[0]
            return max(1, product // DEFAULT_LEVEL_FANOUT), "(default: a level above the columns it reads)"
        schema = self.plan.schema
        table = schema.table(ref.table)
        if table.name == node.fact:
            for fk in table.foreign_keys:  # a foreign key takes as many values as the dimension has rows
                if ref.column in fk.columns:
                    return self.table_rows(fk.ref_table)[0], "(dimension size)"
            return DEFAULT_DISTINCT_BY_TYPE.get(table.column(ref.column).type, DEFAULT_DISTINCT), "(default by type)"
        size = self.table_rows(table.name)[0]
        if ref.column in table.primary_key:
            return size, "(dimension size)"
        for fd in self.deps.of(table.name):  # one hierarchy level above the left side of a dependency
            if ref.column in fd.rhs and ref.column not in fd.lhs:
                lhs = max(self.attribute_distinct(ColumnRef(table.name, c), node)[0] for c in fd.lhs)
                return max(1, lhs // DEFAULT_LEVEL_FANOUT), "(default: a level above its dependency)"
        return max(1, size // DEFAULT_LEVEL_FANOUT), "(default: a level above the key)"


def _names(attrs) -> str:
    return "(" + ", ".join(r.label for r in sorted(attrs, key=lambda r: (r.table, r.column))) + ")"


# ------------------------------------------------------------------ the pass


def choose_parents(lattice: Lattice, plan: Plan, stats: Statistics | None = None) -> Lattice:
    est = _Estimator(lattice, plan, stats or Statistics())
    estimates = {n.name: est.rows(n) for n in lattice.nodes}
    implied = [n.name for n in lattice.nodes if n.kind == "implied"]
    kept: set[str] = set()
    best = _choose(lattice, est, estimates, kept)
    improved = True
    while improved:  # greedily keep the implied point that lowers the total the most
        improved = False
        trials = [(_choose(lattice, est, estimates, kept | {p}), p) for p in implied if p not in kept]
        trials = [(c, p) for c, p in trials if _total(c) < _total(best)]
        if trials:
            best, point = min(trials, key=lambda t: (_total(t[0]), t[1]))
            kept.add(point)
            improved = True
    parents = tuple(best[n.name] for n in lattice.nodes if n.name in best)
    return replace(lattice, parents=parents, estimates=tuple(estimates[n.name] for n in lattice.nodes))


def _choose(lattice: Lattice, est: _Estimator, estimates, kept: set[str]) -> dict[str, ParentChoice]:
    choices: dict[str, ParentChoice] = {}
    for name in topological_order(lattice):
        node = lattice.node(name)
        if node.kind == "changes" or (node.kind == "implied" and name not in kept):
            continue
        candidates = []
        for e in lattice.edges_into(name):
            upper = lattice.node(e.upper)
            if upper.kind == "implied" and e.upper not in kept:
                continue
            candidates.append(_candidate(e, upper, node, est, estimates))
        valid = [c for c in candidates if c.valid]
        if not valid:
            raise AssertionError(f"{name}: no valid parent, not even the change set ({candidates})")
        best = min(valid, key=lambda c: (c.cost, lattice.node(c.parent).kind != "changes", c.parent))
        edge = lattice.edge(best.parent, name)
        requires = () if lattice.node(best.parent).kind == "changes" else edge.join_labels
        choices[name] = ParentChoice(name, best.parent, tuple(candidates), requires)
    return choices


def _candidate(e: Edge, upper: LatticeNode, node: LatticeNode, est: _Estimator, estimates) -> Candidate:
    join_rows = sum(est.table_rows(j.table)[0] for j in e.joins)
    if upper.kind == "changes":
        for t in est.changed_dimensions(node):  # 4.1.4: F ⋈ ΔD reads the old fact table
            join_rows += est.table_rows(node.fact)[0] + est.change_rows(t)[0]
        return Candidate(e.upper, estimates[e.upper].rows, join_rows)
    changed = [t for t in e.join_labels if est.reaches(t)]
    if changed:
        reason = f"{', '.join(changed)} changed in this batch and {e.upper} does not join it: its summary-delta misses the change"
        return Candidate(e.upper, estimates[e.upper].rows, join_rows, valid=False, reason=reason)
    return Candidate(e.upper, estimates[e.upper].rows, join_rows)


def _total(choices: dict[str, ParentChoice]) -> int:
    return sum(c.chosen.cost for c in choices.values())
