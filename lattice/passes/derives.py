"""Pass 4: the derives relation v1 ≺^{d1..dm} v2 between lattice points (paper 001, Section 5.1).

v1 ≺ v2 when v1's summary-delta is one GROUP BY over v2's rows, joined with dimension tables d1..dm:

1. every group-by attribute of v1 is functionally determined by v2's group-by attributes: it is one of
   them (a fact foreign key and the dimension key it references are the same value), or a column of a
   dimension reached from them by key joins (a foreign key, or a snowflake chain of them), or the right
   side of a declared dependency (nightshift.toml [dependencies], e.g. stores city -> region) whose
   left side v2 groups by;
2. every aggregate of v1 is computed from v2's stored aggregates (COUNT(*) and COUNT(e) as SUM of
   counts, SUM from SUM, MIN from MIN, MAX from MAX; AVG is stored as SUM/COUNT), or its argument is an
   expression over the attributes of condition 1 (5.1: SUM(A) becomes SUM(A*Y), Y v2's COUNT(*));
3. both aggregate the same fact table under the same WHERE filter (the paper does not consider
   differing filters); an unfiltered v2 whose attributes cover v1's filter is fine (the change set);
4. a dimension joined through a nullable foreign key drops fact rows, so v1 and v2 must agree on it.

Arguments are compared by their qualified SQL text (normalize shares equal arguments). The change set
of a fact table is a point too: its keys are every fact column and its COUNT(*) is a row's sign, so the
rules of condition 2 become Table 2's aggregate sources.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

import sqlglot
from sqlglot import exp

from lattice.errors import ConfigError
from lattice.graph import mark_cover
from lattice.ir import (
    EXPRESSION,
    AggregateSource,
    AttributeSource,
    ColumnRef,
    Edge,
    FunctionalDependency,
    GroupKey,
    Join,
    JoinStep,
    Lattice,
    LatticeNode,
    NotDerivable,
    Plan,
    Schema,
    StoredAggregate,
    View,
)

SIGN = "_ns_sign"  # the change set's COUNT(*): +1 for an inserted row image, -1 for a deleted one
KIND_RANK = {"changes": 0, "view": 1, "implied": 2}


# ------------------------------------------------------------------ points


def node_of_view(view: View) -> LatticeNode:
    return LatticeNode(
        name=view.name,
        kind="view",
        fact=view.fact,
        where=view.where,
        tables=view.tables,
        joins=view.joins,
        keys=view.keys,
        arguments=view.arguments,
        stored=view.stored,
    )


def changes_name(fact: str) -> str:
    return f"Δ{fact}"


def changes_node(schema: Schema, fact: str) -> LatticeNode:
    """The change set of `fact` (prepare-changes, 4.1): one row per changed row image, signed."""
    table = schema.table(fact)
    keys = tuple(GroupKey(c.name, ColumnRef(table.name, c.name), c.type, True) for c in table.columns)
    return LatticeNode(
        name=changes_name(table.name),
        kind="changes",
        fact=table.name,
        where=None,
        tables=(table.name,),
        joins=(),
        keys=keys,
        stored=(StoredAggregate("count_star", SIGN, None, "INTEGER"),),
        after=table.view,
    )


def lattice_points(lattice: Lattice, plan: Plan) -> Lattice:
    """The declared views and the change set of each fact table, before any edge is known (the
    first pass: `lattice` is the empty Lattice)."""
    nodes = [changes_node(plan.schema, f) for f in plan.fact_tables]
    nodes += [node_of_view(v) for v in plan.incremental_views]
    return Lattice(nodes=tuple(nodes))


# ------------------------------------------------------------------ functional dependencies


@dataclass(frozen=True)
class Dependencies:
    """Keys and declared dependencies per table, with the names spelled as in the schema."""

    schema: Schema
    fds: tuple[FunctionalDependency, ...]

    def of(self, table: str) -> tuple[FunctionalDependency, ...]:
        return tuple(fd for fd in self.fds if fd.table == table)

    def closure(self, table: str, columns: frozenset[str]) -> frozenset[str]:
        """Columns of `table` determined by `columns` (its primary key determines all of them)."""
        t = self.schema.table(table)
        out = set(columns)
        while True:
            if t.primary_key and set(t.primary_key) <= out:
                return frozenset(t.column_names)
            grown = set(out)
            for fd in self.of(t.name):
                if set(fd.lhs) <= grown:
                    grown |= set(fd.rhs)
            if grown == out:
                return frozenset(out)
            out = grown


@functools.lru_cache(maxsize=64)
def dependencies(schema: Schema, declared: tuple[FunctionalDependency, ...]) -> Dependencies:
    """Check nightshift.toml [dependencies] against the schema and spell names as the schema does."""
    fds = []
    for fd in declared:
        table = schema.table(fd.table)
        if table is None:
            raise ConfigError(f"nightshift.toml: [dependencies] {fd.table}: no such table in {schema.file}")
        cols = []
        for side in (fd.lhs, fd.rhs):
            names = []
            for c in side:
                col = table.column(c)
                if col is None:
                    raise ConfigError(
                        f"nightshift.toml: [dependencies] {fd.table}: {c} is not a column of {table.name} "
                        f"(it has {', '.join(table.column_names)})"
                    )
                names.append(col.name)
            cols.append(tuple(names))
        if not cols[0] or not cols[1]:
            raise ConfigError(f"nightshift.toml: [dependencies] {fd.table}: a dependency needs columns on both sides")
        fds.append(FunctionalDependency(table.name, cols[0], cols[1]))
    return Dependencies(schema, tuple(fds))


# ------------------------------------------------------------------ helpers over SQL text and join trees


@functools.lru_cache(maxsize=4096)
def columns_of(sql: str) -> tuple[ColumnRef, ...]:
    """The qualified columns of an argument or filter expression (IR text: "table"."column")."""
    tree = sqlglot.parse_one(sql)
    return tuple(dict.fromkeys(ColumnRef(c.table, c.name) for c in tree.find_all(exp.Column)))


def attribute_columns(ref: ColumnRef) -> tuple[ColumnRef, ...]:
    """The base-table columns an attribute reads: itself, or those of a computed expression."""
    return columns_of(ref.sql) if ref.is_expression else (ref,)


def join_tree(*nodes: LatticeNode) -> dict[str, Join]:
    """The join reaching each dimension (every table is joined once per view, parse_views)."""
    out: dict[str, Join] = {}
    for n in nodes:
        for j in n.joins:
            out.setdefault(j.parent, j)
    return out


def canonical(ref: ColumnRef, tree: dict[str, Join]) -> ColumnRef:
    """A dimension key column joined from a foreign key is the same value as the foreign key column."""
    while ref.table in tree:
        j = tree[ref.table]
        if ref.column not in j.parent_columns:
            break
        ref = ColumnRef(j.child, j.child_columns[j.parent_columns.index(ref.column)])
    return ref


def filtering_tables(node: LatticeNode, schema: Schema) -> frozenset[str]:
    """Dimensions joined through a nullable foreign key: the inner join drops fact rows whose key is NULL."""
    out: set[str] = set()
    for j in node.joins:  # in join-tree order: a parent's link is seen before its children's
        child = schema.table(j.child)
        if j.child in out or any(child.column(c).nullable for c in j.child_columns):
            out.add(j.parent)
    return frozenset(out)


def path_conflict(lower: LatticeNode, upper: LatticeNode) -> str | None:
    up = {j.parent: j for j in upper.joins}
    for j in lower.joins:
        other = up.get(j.parent)
        if other is not None and (other.child, other.child_columns) != (j.child, j.child_columns):
            return (
                f"{j.parent} is joined through {j.child}({', '.join(j.child_columns)}) in {lower.name} but through "
                f"{other.child}({', '.join(other.child_columns)}) in {upper.name}"
            )
    return None


# ------------------------------------------------------------------ resolving attributes along an edge


@dataclass
class _Step:
    table: str
    on: tuple[AttributeSource, ...]
    key: tuple[str, ...]
    via: str
    columns: list[str] = field(default_factory=list)

    def read(self, column: str) -> None:
        if column not in self.columns:
            self.columns.append(column)


class Resolver:
    """Finds, for each attribute the lower node needs, where the upper node's rows provide it, and the
    fewest dimension joins that do (joins are labelled on the edge, Example 5.3)."""

    def __init__(self, lower: LatticeNode, upper: LatticeNode, deps: Dependencies):
        self.lower, self.upper, self.deps = lower, upper, deps
        self.tree = join_tree(lower, upper)
        self.available = {canonical(k.ref, self.tree): k.name for k in upper.keys}
        self.steps: dict[str, _Step] = {}

    def from_upper(self, ref: ColumnRef) -> AttributeSource | None:
        name = self.available.get(canonical(ref, self.tree))
        return None if name is None else AttributeSource(ref, self.upper.name, name)

    def obtain(self, ref: ColumnRef) -> AttributeSource | None:
        src = self.from_upper(ref)
        if src is not None:
            return src
        if ref.is_expression:  # computed on the edge from the columns it reads (year(date) from date)
            parts = [self.obtain(c) for c in columns_of(ref.sql)]
            return AttributeSource(ref, EXPRESSION, ref.column) if all(parts) else None
        if canonical(ref, self.tree).table == self.lower.fact:
            return None  # a fact column the upper does not group by
        if self.key_join(ref.table) or self.dependency_join(ref.table, ref.column):
            self.steps[ref.table].read(ref.column)
            return AttributeSource(ref, ref.table, ref.column)
        return None

    def key_join(self, table: str) -> bool:
        step = self.steps.get(table)
        if step is not None and step.via == "key":
            return True
        t = self.deps.schema.table(table)
        pk = [self.from_upper(ColumnRef(t.name, c)) for c in t.primary_key]
        if pk and all(pk):
            on, key = tuple(pk), t.primary_key
        else:
            j = self.tree.get(table)
            if j is None:
                return False
            srcs = [self.from_upper(ColumnRef(j.child, c)) for c in j.child_columns]
            if all(srcs):
                on = tuple(srcs)
            elif j.child != self.lower.fact and self.key_join(j.child):  # snowflake: join the child first
                for c in j.child_columns:
                    self.steps[j.child].read(c)
                on = tuple(AttributeSource(ColumnRef(j.child, c), j.child, c) for c in j.child_columns)
            else:
                return False
            key = j.parent_columns
        columns = step.columns if step is not None else []
        self.steps[table] = _Step(table, on, tuple(key), "key", list(columns))
        return True

    def dependency_join(self, table: str, column: str) -> bool:
        held = frozenset(c for c in self.deps.schema.table(table).column_names if self.from_upper(ColumnRef(table, c)))
        step = self.steps.get(table)
        for fd in self.deps.of(table):
            lhs = frozenset(fd.lhs)
            if not lhs <= held or column not in self.deps.closure(table, lhs):
                continue
            if step is not None:  # widen the one dependency join of this table
                lhs |= frozenset(step.key)
            key = tuple(c for c in self.deps.schema.table(table).column_names if c in lhs)
            on = tuple(self.from_upper(ColumnRef(table, c)) for c in key)
            self.steps[table] = _Step(table, on, key, "dependency", list(step.columns) if step else [])
            return True
        return False

    def join_steps(self) -> tuple[JoinStep, ...]:
        """In dependency order: a snowflake join comes after the join whose columns it reads."""
        done: list[str] = []
        pending = dict(self.steps)
        while pending:
            ready = [n for n, s in pending.items() if all(src.relation in (self.upper.name, *done) for src in s.on)]
            if not ready:
                raise AssertionError(f"join steps of {self.lower.name} from {self.upper.name} depend on each other")
            for name in ready:
                done.append(name)
                del pending[name]
        return tuple(
            JoinStep(s.table, s.on, s.key, s.via, tuple(s.columns)) for s in (self.steps[n] for n in done)
        )


# ------------------------------------------------------------------ the relation


WEIGHTED = {"count": "count_weighted", "sum": "sum_weighted", "min": "min_over_keys", "max": "max_over_keys"}
FROM_STORED = {"count": "sum", "sum": "sum", "min": "min", "max": "max"}


def derives(
    lower: LatticeNode, upper: LatticeNode, schema: Schema, declared: tuple[FunctionalDependency, ...] = ()
) -> Edge | NotDerivable:
    """lower ≺^{joins} upper (5.1), as an Edge saying where every attribute and aggregate comes from;
    or NotDerivable with the first reason it is not."""

    def no(reason: str) -> NotDerivable:
        return NotDerivable(upper.name, lower.name, reason)

    if lower.fact != upper.fact:
        return no(f"different fact tables ({lower.fact} and {upper.fact})")
    bad_path = path_conflict(lower, upper)
    if bad_path:
        return no(bad_path)
    edge_where = None
    if lower.where != upper.where:
        if upper.where is not None:
            return no(f"different WHERE filters ({lower.where or 'none'} in {lower.name}, {upper.where} in {upper.name})")
        edge_where = lower.where
    dropped = filtering_tables(upper, schema) - set(lower.tables)
    if dropped:
        t = sorted(dropped)[0]
        return no(
            f"{upper.name} joins {t} through a nullable foreign key (dropping {upper.fact} rows whose key is NULL) "
            f"and {lower.name} does not"
        )

    r = Resolver(lower, upper, dependencies(schema, declared))
    attributes: dict[ColumnRef, AttributeSource] = {}
    upper_keys = ", ".join(k.name if k.declared else f"+{k.name}" for k in upper.keys)

    def need(ref: ColumnRef, what: str) -> str | None:
        src = attributes.get(ref) or r.obtain(ref)
        if src is None:
            return (
                f"{what} {ref.label} of {lower.name} is not determined by the group-by attributes "
                f"of {upper.name} ({upper_keys})"
            )
        attributes[ref] = src
        if src.relation == EXPRESSION:  # the columns it is computed from, read along the edge
            for c in columns_of(ref.sql):
                attributes.setdefault(c, r.obtain(c))
        return None

    for k in lower.keys:
        missing = need(k.ref, "group-by attribute")
        if missing:
            return no(missing)
    for ref in columns_of(edge_where) if edge_where else ():
        missing = need(ref, "column of the WHERE filter")
        if missing:
            return no(missing)
    for t in sorted(filtering_tables(lower, schema) - set(upper.tables)):
        if not r.key_join(t):
            return no(f"{lower.name} joins {t} through a nullable foreign key and {upper.name} holds no key of {t}")

    aggregates = []
    for s in lower.stored:
        src = _aggregate(s, lower, upper, r, attributes)
        if isinstance(src, str):
            return no(src)
        aggregates.append(src)

    joins = r.join_steps()
    uses = [a.column for a in attributes.values() if a.relation == upper.name]
    uses += [src.column for j in joins for src in j.on if src.relation == upper.name]
    uses += [a.source for a in aggregates if a.rule in FROM_STORED.values()] + [a.weight for a in aggregates if a.weight]
    return Edge(
        upper=upper.name,
        lower=lower.name,
        joins=joins,
        attributes=tuple(attributes.values()),
        aggregates=tuple(aggregates),
        where=edge_where,
        uses=tuple(dict.fromkeys(uses)),
    )


def _aggregate(
    s: StoredAggregate, lower: LatticeNode, upper: LatticeNode, r: Resolver, attributes: dict[ColumnRef, AttributeSource]
) -> AggregateSource | str:
    if s.kind == "count_star":
        return AggregateSource(s.column, "sum", upper.count_column)
    arg = lower.argument(s.arg)
    if s.kind == "holistic" and upper.kind != "changes":
        return (f"{s.func.split()[0].upper()}({arg.sql}) of {lower.name} is holistic: each changed group's value "
                f"is recomputed from {lower.fact}'s rows, never rolled up from another summary")
    for u in upper.stored:
        if u.kind == s.kind and u.arg is not None and upper.argument(u.arg).sql == arg.sql:
            return AggregateSource(s.column, FROM_STORED[s.kind], u.column)
    for ref in columns_of(arg.sql):
        src = attributes.get(ref) or r.obtain(ref)
        if src is None:
            return (
                f"{s.kind.upper()}({arg.sql}) of {lower.name}: {upper.name} keeps no {s.kind.upper()} over it and "
                f"{ref.table}.{ref.column} is not determined by its group-by attributes"
            )
        attributes[ref] = src
    if s.kind == "holistic":  # a placeholder the exact values replace (emit.with_holistic)
        return AggregateSource(s.column, "holistic", arg.sql)
    return AggregateSource(s.column, WEIGHTED[s.kind], arg.sql, upper.count_column)


# ------------------------------------------------------------------ the pass


def derive_edges(lattice: Lattice, plan: Plan) -> Lattice:
    """Every pair of points: an Edge where lower ≺ upper, a NotDerivable reason where not. Mutually
    derivable points (the same groups) keep one direction, so the lattice is a partial order."""
    edges, nots = [], []
    for lower in lattice.nodes:
        if lower.kind == "changes":
            continue
        for upper in lattice.nodes:
            if upper.name == lower.name:
                continue
            result = derives(lower, upper, plan.schema, plan.dependencies)
            (edges if isinstance(result, Edge) else nots).append(result)
    edges, notes = _acyclic(lattice, edges)
    notes = tuple(n for n in notes if n not in lattice.notes)
    return replace(lattice, edges=mark_cover(edges), not_derivable=tuple(nots), notes=lattice.notes + notes)


def rank(node: LatticeNode) -> tuple[int, str]:
    return (KIND_RANK[node.kind], node.name)


def _acyclic(lattice: Lattice, edges: list[Edge]) -> tuple[list[Edge], tuple[str, ...]]:
    pairs = {(e.upper, e.lower) for e in edges}
    kept, notes = [], []
    for e in edges:
        if (e.lower, e.upper) in pairs and rank(lattice.node(e.upper)) > rank(lattice.node(e.lower)):
            notes.append(f"{e.lower} and {e.upper} have the same groups; {e.upper} derives from {e.lower}, not the reverse")
            continue
        kept.append(e)
    return kept, tuple(notes)
