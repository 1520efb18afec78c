"""The night's plan: a frozen value, computed once per batch before anything runs (SQLMesh's habit).

    plan_night(compiled plan, the batch's facts, statistics, options, lattice shape) -> NightPlan

It says everything a step would otherwise decide for itself: which summary-delta comes from which
parent (paper 001, 5.5), which are pre-aggregated (4.1.3), which views get exact MIN/MAX for the
groups that lost rows and by which test (Figure 8, 4.3 weak minimality), and which D-lattice level
computes each point (one Airflow task per level). Propagate, materialize and validate execute it;
the manifest (runtime.manifest) is it serialized, next to what each step measured; `nightshift plan
--batch ID` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from lattice import emit
from lattice.dlattice import Statistics, choose, lattice_shape
from lattice.graph import levels, topological_order
from lattice.ir import Lattice, ModeChoice, Plan, View
from lattice.passes.choose_modes import choose_modes
from lattice.sql import ident, qualified
from runtime.options import Options

NIGHT_VERSION = 4


@dataclass(frozen=True)
class BatchInfo:
    """What the batch's checks found: inserted and deleted row images of every table."""

    batch: str
    inserted: dict[str, int] = field(default_factory=dict)
    deleted: dict[str, int] = field(default_factory=dict)

    @property
    def changed(self) -> frozenset[str]:
        return frozenset(t for t in self.inserted if self.inserted[t] or self.deleted.get(t, 0))

    @property
    def has_deletes(self) -> bool:
        return any(self.deleted.values())

    @property
    def rows(self) -> int:
        return sum(self.inserted.values()) + sum(self.deleted.values())

    def change_rows(self) -> dict[str, int]:
        return {t: self.inserted[t] + self.deleted.get(t, 0) for t in self.inserted}

    def describe(self) -> str:
        parts = [f"{t} +{self.inserted[t]}/-{self.deleted.get(t, 0)}" for t in sorted(self.changed)]
        return ", ".join(parts) or "no changes"


@dataclass(frozen=True)
class NodeStep:
    """One summary-delta computed tonight: a view's, or a lattice point other views derive from."""

    node: str
    parent: str  # the change set of the fact table (Δ<fact>) or another node of this night
    from_changes: bool  # parent is the change set (prepare-changes, 4.1) rather than a summary-delta (5.1)
    level: int  # the D-lattice level (propagate --level K) that computes it
    preaggregated_by: tuple[str, ...] = ()  # 4.1.3: fact columns the changes are grouped by before the joins
    estimated_rows: int | None = None
    feeds_later_level: bool = False  # a node of a later level derives from it: that level reads it back


@dataclass(frozen=True)
class ViewStep:
    """How tonight keeps one summary view."""

    view: str
    part: int  # its summary-delta lands in lake/deltas/batch_id=<ID>/part=<part>/, columns prefixed v<part>__
    mode: str = "delta"  # 'delta': its summary-delta (paper 001); 'recompute': its whole contents, replaced
    reason: str = "COUNT/SUM/AVG/MIN/MAX over the fact table and its foreign-key dimensions (paper 001)"
    # '' none | 'lost' every group that lost rows | 'weakly_minimal' 4.3's tighter test | 'extreme_deleted'
    # 000 5's C_i: the groups whose old extreme (from the view's lake copy) went and was not re-established |
    # 'monotone' a nested view whose inner extremes only moved outward tonight (_monotone): no group to recompute
    exact_minmax: str = ""
    level: int = 0  # the propagate --level that computes it
    nested: bool = False  # it reads another summary view (its change set: that view's updates)
    # the MIN/MAX arguments (Argument.index) whose exact extremes read the months of the lost extremes first:
    # each is the date column whose months lay the view's fact table out ([lake] partition_by)
    by_month: tuple[int, ...] = ()

    @property
    def prefix(self) -> str:
        return f"v{self.part}__"


@dataclass(frozen=True)
class CopyStep:
    """A view the lake keeps a copy of (Plan.copied_views): tonight its changed groups become the change
    set of the table nested views read, and its lake copy's next version (spark_jobs/nested.py)."""

    view: str
    level: int  # the level whose points read that change set (the one after the view's own; a view of
    # the last level, or one no view reads: after the last level, from its summary-delta as written)


@dataclass(frozen=True)
class SharedScan:
    """A base table at state k (__ns_new_<t>) that tonight's recomputed views name more than once: read
    once and kept for all of them (spark_jobs/propagate.py persists it), so a night of many small views
    kept by recompute scans each table once, and a table with deletes takes its deleted rows away once."""

    table: str
    views: tuple[str, ...]  # the views recomputed tonight that read it, in plan order
    reads: int  # how many times their SQL names it


@dataclass(frozen=True)
class NightPlan:
    version: int
    batch: str
    plan: str  # the compiled plan's fingerprint
    base_state: str | None  # the lake's last applied batch when the night was planned
    info: BatchInfo
    options: Options
    statistics: str  # 'measured' (summary-delta sizes counted over the changes) | 'sizes' | 'off' (no lattice)
    nodes: tuple[NodeStep, ...]  # in computing order (parents first)
    views: tuple[ViewStep, ...]  # in plan order
    levels: tuple[tuple[str, ...], ...]  # the D-lattice's levels (from its shape: the same every night)
    lattice: Lattice | None = None  # the optimized D-lattice costed for this batch (None: lattice off)
    copies: tuple[CopyStep, ...] = ()  # the views the lake copies (Plan.copied_views), in plan order
    shared: tuple[SharedScan, ...] = ()  # the base tables read once for every view recomputed tonight
    # the Delta version of every lake table (base tables, copies) the night reads: the lake's state when planned
    base_versions: tuple[tuple[str, int], ...] = ()
    unreached: tuple[str, ...] = ()  # the dimensions the batch changed that no view's summary-delta joins as changed

    @property
    def recomputed(self) -> tuple[str, ...]:
        """The views whose whole contents tonight computes (mode recompute), in plan order."""
        return tuple(v.view for v in self.views if v.mode == "recompute")

    def node(self, name: str) -> NodeStep:
        return next(n for n in self.nodes if n.node == name)

    def view(self, name: str) -> ViewStep:
        return next(v for v in self.views if v.view == name)

    def nodes_of_level(self, level: int) -> tuple[NodeStep, ...]:
        return tuple(n for n in self.nodes if n.level == level)

    @property
    def changed(self) -> frozenset[str]:
        """The tables whose changes tonight's summary-deltas join: the batch's base tables but the dimensions it
        only added new keys to (unreached), and every view the lake copies (its change set, the updates of its
        groups, is registered whether or not any group changed)."""
        return (self.info.changed - set(self.unreached)) | {c.view for c in self.copies}

    @property
    def insert_only(self) -> frozenset[str]:
        """The views whose summary-delta deletes nothing tonight (4.3): every view of a night that deletes
        no row, but a nested one (an update of its inner view is a delete and an insert)."""
        if self.info.has_deletes:
            return frozenset()
        return frozenset(v.view for v in self.views if not v.nested)

    @property
    def chosen_parents(self) -> tuple[tuple[str, str], ...]:
        """(node, parent) of every summary-delta derived from another one tonight (5.5)."""
        return tuple((n.node, n.parent) for n in self.nodes if not n.from_changes)


def statistics_wanted(plan: Plan, shape: Lattice) -> dict[str, list[tuple[tuple[str, str], ...]]]:
    """fact -> the attribute combinations whose distinct count among the batch's changes sizes a
    summary-delta (the cost model's measured statistics, 5.5 and Appendix A)."""
    combos: dict[str, set] = {}
    for n in shape.nodes:
        if n.kind != "changes":
            combos.setdefault(n.fact, set()).add(tuple(sorted((k.ref.table, k.ref.column) for k in n.keys)))
    return {f: sorted(c) for f, c in sorted(combos.items())}


def unreached(plan: Plan, info: BatchInfo) -> frozenset[str]:
    """The dimensions the batch changed whose change reaches no row of the fact tables before it: it only adds
    rows to the dimension (no row deleted), each under a key the table does not hold (the batch's primary key
    check refuses any other), and every foreign key to it names its primary key. The base before the batch keeps
    every foreign key whole (the checks refuse a reference to a missing row), so no row of it references an added
    row: the term F ⋈ ΔD of a view joining the dimension (4.1.4) is empty, and the added rows meet the night's
    inserted fact rows in the term ΔF ⋈ D', which joins the dimension after the batch. A table some view keeps
    as its fact is never one (its inserted rows are that view's changes)."""
    facts = {t.lower() for t in plan.fact_tables}
    out = set()
    for table in plan.schema.base_tables:
        name = table.name
        if name not in info.changed or info.deleted.get(name, 0) or name.lower() in facts or not table.primary_key:
            continue
        key = {c.lower() for c in table.primary_key}
        refs = [fk for t in plan.schema.base_tables for fk in t.foreign_keys if fk.ref_table.lower() == name.lower()]
        if all(key <= {c.lower() for c in fk.ref_columns} for fk in refs):
            out.add(name)
    return frozenset(out)


def measures(info: BatchInfo, options: Options) -> bool:
    """Summary-delta sizes are measured only for large batches: for a small one every parent is cheap
    and the counting pass would cost more than it saves."""
    return options.lattice and info.rows >= options.stats_rows


def plan_night(plan: Plan, info: BatchInfo, base_state: str | None, options: Options,
               stats: Statistics | None, shape: Lattice | None = None, measured: bool = False,
               choose_mode: bool = True, base_versions: tuple[tuple[str, int], ...] = (),
               partitions: dict[str, str] | None = None) -> NightPlan:
    """The night's plan for batch `info` over the base at `base_state` (see the module docstring).
    choose_mode False: every incremental view by its summary-delta (materialize along the lattice).
    partitions: table -> the date column whose months lay its lake base out (LakeState.partitions)."""
    shape = shape if shape is not None else lattice_shape(plan)
    tiers = levels(shape)
    level_of = {n: k for k, names in enumerate(tiers) for n in names}
    quiet = unreached(plan, info)
    stats = replace(stats or Statistics(), unreached=tuple(sorted(quiet)))
    costed = choose(shape, plan, stats)
    read = {v.name for v in plan.copied_views}
    if choose_mode:
        modes = {m.view: m for m in choose_modes(costed, plan, stats, info.has_deletes)}
        for name in read:  # its lake copy follows its summary-delta: never traded for a recompute
            modes[name] = ModeChoice(name, "delta", "its lake copy follows its summary-delta (paper 000)")
    else:  # materialize along the lattice: the views over the base; nested ones after the views they read
        modes = {v.name: ModeChoice(v.name, "delta" if v.mode == "delta" else "recompute", "materialize")
                 for v in plan.incremental_views}
    reaching = {t.lower() for t in info.changed - quiet}
    views = tuple(_view_step(i, v, reaching, info, options, modes.get(v.name), level_of, v.name in read, partitions or {}, plan)
                  for i, v in enumerate(plan.lake_views))
    wanted = {s.view for s in views if s.mode != "recompute"}
    lattice = costed if options.lattice else None
    nodes = _nodes(plan, lattice, info, reaching, options, level_of, wanted) if lattice else _direct_nodes(plan, options, level_of, wanted)
    # a copy no view reads tonight (kept for its view's own old extremes) follows its summary-delta as written
    read_by = plan.read_by_views
    copies = tuple(CopyStep(v.name, level_of.get(v.name, 0) + 1 if v.name.lower() in read_by else len(tiers))
                   for v in plan.copied_views)
    return NightPlan(
        version=NIGHT_VERSION, batch=info.batch, plan=plan.fingerprint, base_state=base_state, info=info,
        options=options, statistics=("measured" if measured else "sizes") if lattice else "off",
        nodes=nodes, views=views, levels=tiers, lattice=lattice, copies=copies, shared=shared_scans(plan, views),
        base_versions=base_versions, unreached=tuple(sorted(quiet)),
    )


def shared_scans(plan: Plan, views: tuple[ViewStep, ...]) -> tuple[SharedScan, ...]:
    """The base tables that the views recomputed tonight name at least twice in all (emit.recompute_reads),
    in schema order: each is read once and shared. A table only one read names is left to that read (keeping
    it would cost a copy and save nothing)."""
    readers: dict[str, list[str]] = {}
    reads: dict[str, int] = {}
    for step, view in zip(views, plan.lake_views):
        if step.mode != "recompute":
            continue
        for table, n in emit.recompute_reads(view, plan).items():
            readers.setdefault(table, []).append(view.name)
            reads[table] = reads.get(table, 0) + n
    return tuple(SharedScan(t.name, tuple(readers[t.name]), reads[t.name])
                 for t in plan.schema.base_tables if reads.get(t.name, 0) >= 2)


def _nodes(plan: Plan, lattice: Lattice, info: BatchInfo, changed: set[str], options: Options, level_of: dict,
           wanted: set[str]) -> tuple[NodeStep, ...]:
    """The lattice points on the chain of chosen parents of every view kept by its summary-delta
    tonight, parents first."""
    parent = {p.node: p.parent for p in lattice.parents}
    for p in lattice.parents:  # choose_parents never picks an edge joining a changed dimension
        if lattice.node(p.parent).kind != "changes" and any(t.lower() in changed for t in p.requires_unchanged):
            raise AssertionError(f"{p.node}: parent {p.parent} joins a dimension changed in batch {info.batch}")
    needed: set[str] = set()
    for v in plan.incremental_views:
        name = v.name
        while v.name in wanted and lattice.node(name).kind != "changes" and name not in needed:
            needed.add(name)
            name = parent[name]
    estimates = {e.node: e.rows for e in lattice.estimates}
    children = {}
    for n in needed:
        children.setdefault(parent[n], []).append(n)
    out = []
    for name in topological_order(lattice):
        if name not in needed:
            continue
        p = parent[name]
        direct = lattice.node(p).kind == "changes"
        by = preaggregation(plan, emit.node_view(lattice.node(name)), options) if direct else ()
        later = any(level_of[c] > level_of[name] for c in children.get(name, ()))
        out.append(NodeStep(name, p, direct, level_of[name], by, estimates.get(name), later))
    return tuple(out)


def preaggregation(plan: Plan, view: View, options: Options) -> tuple[str, ...]:
    """The fact columns the view's fact changes are grouped by before its joins (emit.preaggregation, 4.1.3), or ():
    not asked for, or the fact is a view's table (a map, a nested view) whose key is among them: its change set
    holds at most two rows of a key (the group's row before and after), so grouping them first saves the joins
    at most half their rows and costs the night a shuffle."""
    by = emit.preaggregation(view) if options.preaggregate else ()
    fact = plan.schema.table(view.fact)
    if by and fact is not None and fact.view is not None and fact.primary_key and \
            {c.lower() for c in fact.primary_key} <= {c.lower() for c in by}:
        return ()
    return by


def _direct_nodes(plan: Plan, options: Options, level_of: dict, wanted: set[str]) -> tuple[NodeStep, ...]:
    """Without the lattice (NIGHTSHIFT_LATTICE=0): every view's summary-delta from its change set."""
    out = []
    for v in plan.incremental_views:
        if v.name in wanted:
            by = preaggregation(plan, v, options)
            out.append(NodeStep(v.name, emit.changes_of(v.fact), True, level_of.get(v.name, 0), by, None))
    return tuple(out)


def _monotone(plan: Plan, view: View, changed: set[str], info: BatchInfo) -> bool:
    """A nested view whose MIN/MAX need no group recomputed tonight (000 5's C_i never holds): the night
    deletes no row, and neither the view nor the view it reads (kept over a base table, no HAVING) joins a
    changed dimension, so each inner group only gains rows and stays in its outer group: an inner MIN only
    falls and an inner MAX only rises (an update deletes the old value and inserts one at least as extreme),
    and an inner key keeps its value. An outer MIN over inner MINs (MAX over MAXes, either over inner keys)
    then loses no extreme an inserted value does not re-establish: LEAST/GREATEST of the old extreme and the
    summary-delta's is exact. Views of maps ([views] v = "map") over a night of inserts are the usual case."""
    if info.has_deletes or not view.over_views or any(d.lower() in changed for d in view.dimensions):
        return False
    inner = next((v for v in plan.lake_views if v.name == view.fact), None)
    if inner is None or inner.over_views or inner.having or any(d.lower() in changed for d in inner.dimensions):
        return False
    if view.where and f"{ident(inner.name)}.".lower() in view.where.lower():
        return False  # a filter on the inner view's values: an update may leave it, a delete with no insert
    served = {qualified(inner.name, o.name).lower(): o.kind for o in inner.outputs}
    for s in view.stored:
        arg = next((a for a in view.arguments if a.index == s.arg), None)
        if s.kind in ("min", "max") and served.get(arg.sql.lower()) not in (s.kind, "key"):
            return False
    return True


def month_arguments(view: View, partitions: dict[str, str]) -> tuple[int, ...]:
    """The MIN/MAX arguments of `view` (their indexes) that are the very column the base's months lay its fact table
    out by (`partitions`: table -> that column): a lost extreme of one is looked for in its months first."""
    column = next((c for t, c in partitions.items() if t.lower() == view.fact.lower()), None)
    if column is None:
        return ()
    return tuple(a.index for a in emit.minmax_arguments(view) if a.sql.lower() == qualified(view.fact, column).lower())


def _view_step(part: int, view: View, changed: set[str], info: BatchInfo, options: Options, choice: ModeChoice | None,
               level_of: dict, copied: bool, partitions: dict[str, str], plan: Plan) -> ViewStep:
    if not view.incremental:
        return ViewStep(view.name, part, "recompute", view.reason, level=0)
    nested = view.over_views
    exact = ""
    if choice.mode == "delta" and view.has_min_max and (info.has_deletes or nested):  # an update deletes the old row
        dims_changed = any(d.lower() in changed for d in view.dimensions)
        # a nested view's change set is weakly minimal by construction: its deleted rows are the old served
        # rows of the inner groups that changed, read from the inner view's copy, so a sub-bag of the rows
        # before the batch (000 §5's C_i: only a deleted extreme not re-established is recomputed)
        exact = "lost"
        if options.weak_minimality and not dims_changed:
            exact = "extreme_deleted" if copied else "weakly_minimal"
        if options.weak_minimality and _monotone(plan, view, changed, info):
            exact = "monotone"
    reason = view.reason if nested and choice.mode == "delta" else choice.reason
    by_month = month_arguments(view, partitions) if exact not in ("", "monotone") else ()
    return ViewStep(view.name, part, choice.mode, reason, exact, level_of.get(view.name, 0), nested, by_month)
