"""Pass 5: the V-lattice (paper 001, Sections 5.1-5.3): points, implied points, lattice-friendly augmentation.

- Implied points (3.4, 5.1). Two views over the same fact table and filter that neither derive from
  one another nor share a declared ancestor are connected only through the change set. Their least
  upper bound in the cube lattice of Figure 5 (group by both views' attributes, minus those determined
  by the others, with both views' aggregates) is added as an implied point; choose_parents keeps it
  only if computing it and deriving both views from it is cheaper.
- Lattice-friendly augmentation (5.2, Example 5.4). A point that already joins a dimension can also
  group by any column of it that its attributes functionally determine (through the dimension's key or
  a declared dependency): the groups do not change, and a lower point that needs that column derives
  without joining the dimension again (sCD_sales gains region, so sR_sales derives from it with no
  join). Optionally (5.2's third kind, off by default) a point also keeps the aggregates of the other
  views of its fact and filter, so that a view whose aggregates it lacks can derive from it.

Augmentations are recorded as data (Lattice.augmentations) and as hidden keys/stored columns of the
lattice node; View objects are never changed. Appendix B (optimize) then drops those no edge reads.
"""

from __future__ import annotations

from dataclasses import replace

from lattice.ir import (
    Argument,
    Augmentation,
    ColumnRef,
    Edge,
    GroupKey,
    Lattice,
    LatticeNode,
    Plan,
    StoredAggregate,
)
from lattice.passes import derives as d
from lattice.passes.normalize import COUNT_STAR

KIND_ORDER = ["count_star", "count", "sum", "min", "max", "holistic"]


# ------------------------------------------------------------------ implied points


def add_implied_points(lattice: Lattice, plan: Plan) -> Lattice:
    views = [n for n in lattice.nodes if n.kind == "view"]
    implied: list[LatticeNode] = []
    notes: list[str] = []
    for i, a in enumerate(views):
        for b in views[i + 1 :]:
            if a.fact != b.fact or a.where != b.where or _connected(lattice, a.name, b.name):
                continue
            point = least_upper_bound(a, b, plan, f"_ns_implied_{len(implied) + 1}")
            if point is None or any(_same_shape(point, p) for p in implied):
                continue
            implied.append(point)
            notes.append(f"{point.name}: implied point {point.label}, the least upper bound of {a.name} and {b.name}")
    if not implied:
        return lattice
    notes = tuple(notes)
    return d.derive_edges(replace(lattice, nodes=lattice.nodes + tuple(implied), notes=lattice.notes + notes), plan)


def _connected(lattice: Lattice, a: str, b: str) -> bool:
    if lattice.edge(a, b) or lattice.edge(b, a):
        return True
    ups_a = {e.upper for e in lattice.edges_into(a) if lattice.node(e.upper).kind == "view"}
    ups_b = {e.upper for e in lattice.edges_into(b) if lattice.node(e.upper).kind == "view"}
    return bool(ups_a & ups_b)


def _same_shape(p: LatticeNode, q: LatticeNode) -> bool:
    return (
        {k.ref for k in p.keys} == {k.ref for k in q.keys}
        and p.where == q.where
        and {(s.kind, s.arg and p.argument(s.arg).sql) for s in p.stored}
        == {(s.kind, s.arg and q.argument(s.arg).sql) for s in q.stored}
    )


def least_upper_bound(a: LatticeNode, b: LatticeNode, plan: Plan, name: str) -> LatticeNode | None:
    """Group by the attributes of a and b, dropping any determined by the remaining ones (storeID
    determines city: the bound of (city, date) and (storeID, category) is (storeID, category, date))."""
    if d.path_conflict(a, b):
        return None
    tree = d.join_tree(a, b)
    keys: dict[ColumnRef, GroupKey] = {}
    for k in a.keys + b.keys:
        keys.setdefault(d.canonical(k.ref, tree), k)
    # Try dimension attributes first: they are the ones a fact-level attribute determines.
    deps = d.dependencies(plan.schema, plan.dependencies)
    within = replace(a, joins=a.joins + b.joins)
    for ref in sorted(keys, key=lambda r: (r.table == a.fact, r.table, r.column)):
        rest = replace(within, name=name, keys=tuple(k for r, k in keys.items() if r != ref))
        if d.Resolver(within, rest, deps).obtain(keys[ref].ref) is not None:
            del keys[ref]
    if {d.canonical(k.ref, tree) for k in a.keys} == set(keys) or {d.canonical(k.ref, tree) for k in b.keys} == set(keys):
        return None  # one of the two already is the bound; only its aggregates keep the other from deriving
    group = _unique_names(tuple(keys.values()))
    arguments, stored = _union_aggregates(a, b, {d.canonical(k.ref, tree) for k in group}, tree)
    needed = {c.table for k in group for c in d.attribute_columns(k.ref)}
    needed |= {r.table for s in arguments for r in d.columns_of(s.sql)}
    needed |= {r.table for r in d.columns_of(a.where)} if a.where else set()
    needed |= d.filtering_tables(a, plan.schema) | d.filtering_tables(b, plan.schema)
    tables, joins = _tables_reaching(a.fact, needed, tree)
    point = LatticeNode(name, "implied", a.fact, a.where, tables, joins, group, arguments, stored)
    for view in (a, b):
        if not isinstance(d.derives(view, point, plan.schema, plan.dependencies), Edge):
            return None
    return point


def _unique_names(keys: tuple[GroupKey, ...]) -> tuple[GroupKey, ...]:
    names = [k.name.lower() for k in keys]
    return tuple(
        replace(k, name=f"{k.ref.table}_{k.ref.column}" if not k.ref.is_expression else f"_ns_key_{i}", declared=True)
        if names.count(k.name.lower()) > 1 else replace(k, declared=True)
        for i, k in enumerate(keys, 1)
    )


def _union_aggregates(
    a: LatticeNode, b: LatticeNode, held: set[ColumnRef], tree
) -> tuple[tuple[Argument, ...], tuple[StoredAggregate, ...]]:
    """Both views' aggregates, except those over the bound's own attributes (Appendix B: an aggregate
    over a group-by column is not essential; the edge computes it as SUM(A*Y) or MIN(A))."""
    arguments: list[Argument] = []
    stored = {("count_star", None): StoredAggregate("count_star", COUNT_STAR, None, "BIGINT")}
    for view in (a, b):
        for s in view.stored:
            if s.kind == "count_star":
                continue
            arg = view.argument(s.arg)
            if all(d.canonical(r, tree) in held for r in d.columns_of(arg.sql)):
                continue
            mine = next((x for x in arguments if x.sql == arg.sql), None)
            if mine is None:
                mine = Argument(len(arguments) + 1, arg.sql, arg.type)
                arguments.append(mine)
            column = f"_ns_{'cnt' if s.kind == 'count' else s.kind}_{mine.index}"
            stored.setdefault((s.kind, mine.index), StoredAggregate(s.kind, column, mine.index, s.type))
    ordered = sorted(stored.values(), key=lambda s: (s.arg or 0, KIND_ORDER.index(s.kind)))
    return tuple(arguments), tuple(ordered)


def _tables_reaching(fact: str, needed: set[str], tree) -> tuple[tuple[str, ...], tuple]:
    want = set()
    for t in needed:
        while t != fact and t in tree and t not in want:
            want.add(t)
            t = tree[t].child
    joins, tables, frontier = [], [fact], [fact]
    while frontier:
        t = frontier.pop(0)
        for j in tree.values():
            if j.child == t and j.parent in want and j.parent not in tables:
                tables.append(j.parent)
                joins.append(j)
                frontier.append(j.parent)
    return tuple(tables), tuple(joins)


# ------------------------------------------------------------------ lattice-friendly augmentation


def augment(lattice: Lattice, plan: Plan, augment_aggregates: bool = False) -> Lattice:
    found = attribute_augmentations(lattice, plan)
    if augment_aggregates:
        found += aggregate_augmentations(lattice)
    if not found:
        return lattice
    nodes = tuple(apply_augmentations(n, [a for a in found if a.node == n.name], plan) for n in lattice.nodes)
    lattice = d.derive_edges(replace(lattice, nodes=nodes, augmentations=lattice.augmentations + tuple(found)), plan)
    return with_enables(lattice)


def attribute_augmentations(lattice: Lattice, plan: Plan) -> tuple[Augmentation, ...]:
    """For each edge U -> L that joins a dimension U already joins, the columns L reads from it that U's
    attributes determine (Example 5.4: sCD_sales joins stores, city -> region, sR_sales reads region)."""
    deps = d.dependencies(plan.schema, plan.dependencies)
    found: dict[tuple[str, ColumnRef], Augmentation] = {}
    for e in lattice.edges:
        upper = lattice.node(e.upper)
        if upper.kind == "changes":
            continue
        tree = d.join_tree(upper, lattice.node(e.lower))
        held_refs = {d.canonical(k.ref, tree) for k in upper.keys}
        for step in e.joins:
            if step.table not in upper.tables:
                continue  # adding a join to U is what Appendix B undoes: join on the edge instead
            table = plan.schema.table(step.table)
            held = frozenset(c for c in table.column_names if d.canonical(ColumnRef(table.name, c), tree) in held_refs)
            if not held or not set(step.columns) <= deps.closure(table.name, held):
                continue
            by = tuple(ColumnRef(table.name, c) for c in table.column_names if c in held)
            for col in step.columns:
                ref = ColumnRef(table.name, col)
                if d.canonical(ref, tree) in held_refs or (upper.name, ref) in found:
                    continue
                found[(upper.name, ref)] = Augmentation(
                    node=upper.name, kind="attribute", name=_hidden_name(upper, ref, plan), ref=ref, determined_by=by
                )
    return tuple(found.values())


def _hidden_name(node: LatticeNode, ref: ColumnRef, plan: Plan) -> str:
    taken = {k.name.lower() for k in node.keys} | {s.column.lower() for s in node.stored}
    if node.kind == "view":
        taken |= {o.name.lower() for o in plan.view(node.name).outputs}
    return ref.column if ref.column.lower() not in taken else f"_ns_{ref.table}_{ref.column}"


def aggregate_augmentations(lattice: Lattice) -> tuple[Augmentation, ...]:
    """5.2's third kind (Example 5.2: every view computes COUNT(*), SUM(qty) and MIN(date)): each point
    keeps the aggregates of the other views of its fact and filter that it lacks, unless their argument
    is over its own attributes (Appendix B then drops the ones no edge reads)."""
    found = []
    for u in lattice.nodes:
        if u.kind == "changes":
            continue
        tree = d.join_tree(u)
        held = {d.canonical(k.ref, tree) for k in u.keys}
        have = {(s.kind, u.argument(s.arg).sql) for s in u.stored if s.arg is not None}
        index = {a.sql: a.index for a in u.arguments}
        for other in lattice.nodes:
            if other.kind != "view" or other.name == u.name or (other.fact, other.where) != (u.fact, u.where):
                continue
            for s in other.stored:
                if s.arg is None:
                    continue
                sql = other.argument(s.arg).sql
                if (s.kind, sql) in have or all(d.canonical(r, tree) in held for r in d.columns_of(sql)):
                    continue
                if sql not in index:
                    index[sql] = max(index.values(), default=0) + 1
                have.add((s.kind, sql))
                column = f"_ns_{'cnt' if s.kind == 'count' else s.kind}_{index[sql]}"
                found.append(
                    Augmentation(
                        node=u.name,
                        kind="aggregate",
                        name=column,
                        aggregate=s.kind,
                        argument=sql,
                        argument_type=other.argument(s.arg).type,
                        type=s.type,
                    )
                )
    return tuple(found)


def apply_augmentations(node: LatticeNode, augs: list[Augmentation], plan: Plan) -> LatticeNode:
    """The node with its augmentations as hidden keys (declared=False) and hidden stored aggregates."""
    keys, arguments, stored = list(node.keys), list(node.arguments), list(node.stored)
    for a in augs:
        if a.kind == "attribute":
            col = plan.schema.table(a.ref.table).column(a.ref.column)
            keys.append(GroupKey(a.name, a.ref, col.type, False))
            continue
        arg = next((x for x in arguments if x.sql == a.argument), None)
        if arg is None:
            arg = Argument(int(a.name.rsplit("_", 1)[1]), a.argument, a.argument_type)
            arguments.append(arg)
        stored.append(StoredAggregate(a.aggregate, a.name, arg.index, a.type))
    stored.sort(key=lambda s: (s.arg or 0, KIND_ORDER.index(s.kind)))
    return replace(node, keys=tuple(keys), arguments=tuple(arguments), stored=tuple(stored))


def with_enables(lattice: Lattice) -> Lattice:
    """Each augmentation names the lower points whose edge from its node reads it."""
    augs = tuple(
        replace(a, enables=tuple(e.lower for e in lattice.edges_from(a.node) if a.name in e.uses))
        for a in lattice.augmentations
    )
    return replace(lattice, augmentations=augs)
