"""The compiler's intermediate representation: frozen dataclasses, no dicts passed between passes.

Expressions (aggregate arguments, filters) are kept as SQL text in sqlglot's neutral dialect with
every column qualified by its *base table name* and every identifier quoted, so that the emitter
can embed them in any query that aliases the change relations with the base table names and
transpile the result to Spark, DuckDB or PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass

from lattice.sql import ident


# ---------------------------------------------------------------- schema


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # normalized SQL type text, e.g. INTEGER, BIGINT, VARCHAR, DATE, DECIMAL(10,2), DOUBLE
    nullable: bool = True


@dataclass(frozen=True)
class ForeignKey:
    columns: tuple[str, ...]
    ref_table: str
    ref_columns: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    foreign_keys: tuple[ForeignKey, ...] = ()
    view: str | None = None  # a summary view's rows as a table other views read (the nested mode, paper 000)

    def column(self, name: str) -> Column | None:
        low = name.lower()
        return next((c for c in self.columns if c.name.lower() == low), None)

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


@dataclass(frozen=True)
class Schema:
    tables: tuple[Table, ...]
    file: str = "sql/schema.sql"

    def table(self, name: str) -> Table | None:
        low = name.lower()
        return next((t for t in self.tables if t.name.lower() == low), None)

    @property
    def base_tables(self) -> tuple[Table, ...]:
        """The declared tables (sql/schema.sql); the others are summary views read as tables."""
        return tuple(t for t in self.tables if t.view is None)


@dataclass(frozen=True)
class FunctionalDependency:
    """`lhs -> rhs` declared in nightshift.toml [dependencies] (beyond keys), e.g. city -> region."""

    table: str
    lhs: tuple[str, ...]
    rhs: tuple[str, ...]


# ---------------------------------------------------------------- views


EXPRESSION = ""  # ColumnRef.table of a computed attribute


@dataclass(frozen=True)
class ColumnRef:
    """An attribute of a view: a base-table column, or a computed scalar expression over base-table
    columns (table "" and `column` its qualified neutral SQL, e.g. CAST(EXTRACT(YEAR FROM
    "pos"."date") AS INT)): a group key such as the year of a date is one attribute of the lattice,
    determined by the columns it reads."""

    table: str
    column: str

    @property
    def is_expression(self) -> bool:
        return self.table == EXPRESSION

    @property
    def sql(self) -> str:
        """The attribute as qualified neutral SQL."""
        return self.column if self.is_expression else f"{ident(self.table)}.{ident(self.column)}"

    @property
    def label(self) -> str:
        return self.column if self.is_expression else f"{self.table}.{self.column}"


@dataclass(frozen=True)
class Join:
    """An FK equi-join edge of the view's join tree: child.fk_columns = parent.key_columns."""

    child: str  # table holding the foreign key (the fact, or a dimension in a snowflake)
    parent: str  # the referenced dimension
    child_columns: tuple[str, ...]
    parent_columns: tuple[str, ...]


@dataclass(frozen=True)
class GroupKey:
    name: str  # the column name in the summary table (the view's output name, or the source name if hidden)
    ref: ColumnRef  # a column, or a computed expression (ColumnRef.is_expression)
    type: str
    declared: bool  # False when the column is grouped by but not in the view's select list

    @property
    def sql(self) -> str:
        return self.ref.sql


@dataclass(frozen=True)
class Argument:
    """A distinct aggregate argument expression e; index i names its stored columns."""

    index: int
    sql: str  # qualified, quoted, neutral dialect
    type: str


DISTINCT_COUNT = "distinct count"  # StoredAggregate.func of COUNT(DISTINCT e) kept holistic: 0 over no values, not NULL


@dataclass(frozen=True)
class StoredAggregate:
    """A column the summary table keeps (Table 2 / Figure 8): COUNT(*), COUNT(e), SUM(e), MIN(e), MAX(e),
    or a holistic aggregate of e (paper 002: only over an auxiliary view, whose rows are the group's
    values e with their multiplicities m; every changed group's value is recomputed from them)."""

    kind: str  # 'count_star' | 'count' | 'sum' | 'min' | 'max' | 'holistic'
    column: str  # e.g. _ns_count, _ns_cnt_1, _ns_sum_1, _ns_hol_1_1
    arg: int | None  # Argument.index, None for count_star
    type: str
    # holistic: 'percentile_cont <p>' | 'percentile_disc <p>' | 'mode' | 'uda <name>' (parse_views.holistic) |
    # 'distinct count' | 'distinct sum' | 'distinct avg' (DISTINCT over an auxiliary view that joins dimensions)
    func: str = ""
    definition: str = ""  # a user-defined aggregate's SQL over x, i, n (UserAggregate.sql)


@dataclass(frozen=True)
class UserAggregate:
    """nightshift.toml [aggregates] <name> = { sql = "...", type = "DOUBLE" }: an aggregate a data engineer
    declares in SQL, over the group's non-NULL argument values as rows (x, i, n): x the value, i its
    position in ascending order (1..n), n their number. E.g. a trimmed mean,
    AVG(CASE WHEN i > 0.1 * n AND i <= 0.9 * n THEN x END). Views call it as name(argument); it is kept
    through an auxiliary view (paper 002), each changed group's value recomputed from its values."""

    name: str
    sql: str  # neutral SQL: an aggregate expression over the columns x, i, n
    type: str = "DOUBLE"


@dataclass(frozen=True)
class Output:
    """A declared column of the view, as an expression over the summary table's stored columns."""

    name: str
    kind: str  # 'key' | 'count_star' | 'count' | 'sum' | 'avg' | 'min' | 'max' | 'holistic' | 'column' (a recompute view's)
    source: str  # stored column (key name or aggregate column); for avg the SUM column
    count_column: str | None = None  # for avg: the COUNT(e) column


MODES = ("delta", "auxiliary", "nested", "recompute")  # how a view is kept (DESIGN.md: "four modes")
MAINTAIN = ("auto", "incremental", "delta", "recompute", "auxiliary", "map")  # nightshift.toml [views] <name> = ...


@dataclass(frozen=True)
class View:
    name: str
    file: str
    sql: str  # the user's SELECT, its stars written out (lattice/passes/expand_stars.py); the oracle runs it
    fact: str
    tables: tuple[str, ...]  # fact first, then dimensions in join order
    joins: tuple[Join, ...]
    where: str | None  # qualified neutral SQL of the WHERE filter without the join predicates
    keys: tuple[GroupKey, ...]
    arguments: tuple[Argument, ...] = ()
    stored: tuple[StoredAggregate, ...] = ()
    outputs: tuple[Output, ...] = ()
    quoted: tuple[str, ...] = ()  # names written "quoted" in the view's SQL (case-sensitive on PostgreSQL)
    having: str | None = None  # HAVING as neutral SQL over the storage table's columns: the serving view's filter
    mode: str = "delta"  # MODES: how the plan keeps the view
    reason: str = ""  # why that mode (the construct that no incremental rule covers, and where)
    # MAINTAIN: [views] in nightshift.toml (incremental: never recompute; delta: never recompute, and MIN/MAX of a
    # group that lost rows from the base (paper 001 alone); recompute: always; auxiliary: MIN/MAX
    # through an auxiliary view, so a deleted extreme is recomputed from it, never from the base; map: over a
    # higher-order delta map of its fact table, so a dimension change never reads the fact table)
    maintain: str = "auto"
    reads: tuple[str, ...] = ()  # the summary views its SQL reads (a view over views; recompute mode inlines them)

    @property
    def dimensions(self) -> tuple[str, ...]:
        return self.tables[1:]

    @property
    def incremental(self) -> bool:
        """Kept by an incremental mode (its summary-delta), which a night may still trade for a recompute."""
        return self.mode != "recompute"

    @property
    def over_views(self) -> bool:
        """Kept from another view's summary-delta as updates (paper 000): nested mode, and auxiliary mode
        (the view over its auxiliary view, paper 002)."""
        return self.mode in ("nested", "auxiliary")

    @property
    def has_min_max(self) -> bool:
        return any(s.kind in ("min", "max") for s in self.stored)

    @property
    def has_holistic(self) -> bool:
        return any(s.kind == "holistic" for s in self.stored)

    @property
    def storage_table(self) -> str:
        return f"{self.name}__ns"

    def stored_of(self, kind: str, arg: int | None) -> StoredAggregate | None:
        return next((s for s in self.stored if s.kind == kind and s.arg == arg), None)


@dataclass(frozen=True)
class Plan:
    """The compiled project: what `nightshift plan` prints and every step executes."""

    schema: Schema
    views: tuple[View, ...]  # the summary views the warehouse serves
    dependencies: tuple[FunctionalDependency, ...] = ()
    fingerprint: str = ""
    auxiliary: tuple[View, ...] = ()  # auxiliary views (paper 002): delta-mode views kept in the lake only

    def view(self, name: str) -> View:
        low = name.lower()
        for v in self.lake_views:
            if v.name.lower() == low:
                return v
        raise KeyError(name)

    @property
    def lake_views(self) -> tuple[View, ...]:
        """Every view propagate keeps, in plan order (a view after the views it reads): the auxiliary
        views (never in the warehouse), then the served views."""
        return self.auxiliary + self.views

    @property
    def fact_tables(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v.fact for v in self.lake_views if v.incremental))  # an auxiliary view's too

    @property
    def incremental_views(self) -> tuple[View, ...]:
        """The views of the D-lattice (every mode but recompute; auxiliary views included)."""
        return tuple(v for v in self.lake_views if v.incremental)

    @property
    def read_by_views(self) -> frozenset[str]:
        """The names (lower case) of the views a nested or auxiliary-mode view reads: its change set is their updates."""
        return frozenset(r.lower() for v in self.lake_views if v.over_views for r in v.reads)

    @property
    def copied_views(self) -> tuple[View, ...]:
        """The views the lake keeps a copy of (paper 000): every incremental view a nested or auxiliary-mode view reads (its
        old rows), and every nested view with MIN/MAX not always recomputed ([views] x = "recompute"):
        its old extremes (5's C_i recomputes a group only when its extreme was deleted and not
        re-established, which needs the extreme). A copied view is kept by its summary-delta every night."""
        read = self.read_by_views
        return tuple(v for v in self.lake_views if v.name.lower() in read
                     or (v.over_views and v.has_min_max and v.maintain != "recompute"))


# ---------------------------------------------------------------- the D-lattice (paper 001, Section 5)
#
# The lattice is a value like Plan: nodes are summary-deltas (the change set of a fact table, every
# declared view, implied points), edges are the derives relation v_lower ≺^{d1..dm} v_upper of 5.1 with
# its join labels. `lattice.dlattice` lists the passes that fill it in.


@dataclass(frozen=True)
class LatticeNode:
    """A point of the V-/D-lattice (5.1, 5.4): the GROUP BY shape of a summary-delta.

    kind 'changes' is the change set of a fact table (the top of its D-lattice; its keys are every fact
    column and its COUNT(*) is the sign of a row, so Table 2's aggregate sources are the generic rules of
    5.1), 'view' a declared summary table, 'implied' a point added to connect views (vlattice).
    Keys with declared=False include the lattice-friendly augmentations (5.2): hidden, never served.
    """

    name: str
    kind: str  # 'changes' | 'view' | 'implied'
    fact: str
    where: str | None
    tables: tuple[str, ...]  # fact first, then the dimensions joined to compute it from the change set
    joins: tuple[Join, ...]
    keys: tuple[GroupKey, ...]
    arguments: tuple[Argument, ...] = ()
    stored: tuple[StoredAggregate, ...] = ()
    after: str | None = None  # a change set of a summary view's table (nested mode): computed after that view

    @property
    def count_column(self) -> str:
        """The COUNT(*) of a group (Y of 5.1 and Appendix B)."""
        return next(s.column for s in self.stored if s.kind == "count_star")

    def argument(self, index: int) -> Argument:
        return next(a for a in self.arguments if a.index == index)

    def key(self, name: str) -> GroupKey | None:
        return next((k for k in self.keys if k.name == name), None)

    @property
    def label(self) -> str:
        """The paper names a point by its group-by attributes, e.g. sCD_sales(city, date, +region)."""
        if self.kind == "changes":
            return f"{self.name} (changes of {self.fact})"
        keys = [k.name if k.declared else f"+{k.name}" for k in self.keys]
        return f"{self.name}({', '.join(keys)})"


@dataclass(frozen=True)
class AttributeSource:
    """Where an attribute the lower node needs is read along an edge: a key of the upper node, or a
    column of a dimension joined on the edge."""

    ref: ColumnRef  # the attribute (a base-table column)
    relation: str  # the upper node's name, or the dimension table joined on the edge
    column: str  # the upper node's key name, or the dimension's column


@dataclass(frozen=True)
class JoinStep:
    """One dimension join along an edge: the superscript d of v1 ≺^d v2 (5.1, Example 5.3).

    via 'key': `on` equals the dimension's key columns `key` (a foreign key, or the dimension's primary
    key held by the upper node); every column of the dimension becomes available.
    via 'dependency': `on` equals the left side `key` of a declared functional dependency; the join reads
    the DISTINCT projection of the dimension on key + columns (one row per key value, since key -> columns)
    and must compare null-safely (IS NOT DISTINCT FROM).
    """

    table: str
    on: tuple[AttributeSource, ...]
    key: tuple[str, ...]
    via: str  # 'key' | 'dependency'
    columns: tuple[str, ...]  # the dimension's columns the edge reads (projection pushed down, App. B)


@dataclass(frozen=True)
class AggregateSource:
    """How one stored aggregate of the lower node is computed from the upper node's rows (5.1, App. B).

    rule 'sum'            SUM(upper.source)        COUNT(*) and COUNT(e) as SUM of counts, SUM(e) as SUM of sums
    rule 'min' / 'max'    MIN/MAX(upper.source)
    rule 'sum_weighted'   SUM(e * Y)               e over attributes of the upper rows (5.1: SUM(A*Y))
    rule 'count_weighted' SUM(CASE WHEN e IS NULL THEN 0 ELSE Y END)
    rule 'min_over_keys' / 'max_over_keys'  MIN/MAX(e) over upper rows with Y > 0
    where Y is the upper node's COUNT(*) column (`weight`). From the change set Y is the row's sign, so
    these are exactly Table 2's aggregate sources.
    """

    column: str  # the lower node's stored column
    rule: str
    source: str  # the upper's stored column, or e as qualified SQL (columns resolved by Edge.attributes)
    weight: str | None = None  # Y for the *_weighted and *_over_keys rules


@dataclass(frozen=True)
class Edge:
    """lower ≺^{joins} upper (5.1): the lower summary-delta is one GROUP BY over the upper's rows joined
    with the labelled dimensions. `uses` lists the upper's columns the edge reads (App. B: what is
    essential at the upper node for this outgoing edge)."""

    upper: str
    lower: str
    joins: tuple[JoinStep, ...]
    attributes: tuple[AttributeSource, ...]  # lower keys, filter and argument columns read on the edge
    aggregates: tuple[AggregateSource, ...]
    where: str | None = None  # filter applied along the edge (only from an unfiltered upper, e.g. the change set)
    uses: tuple[str, ...] = ()
    cover: bool = False  # in the transitive reduction: the edges a figure draws (Figure 9)

    @property
    def join_labels(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(j.table for j in self.joins))


@dataclass(frozen=True)
class NotDerivable:
    """lower cannot be derived from upper, and why (different filter, missing aggregate, ...)."""

    upper: str
    lower: str
    reason: str


@dataclass(frozen=True)
class Augmentation:
    """Lattice-friendly extension of a node (5.2, Example 5.4), kept as data, never applied to a View.

    kind 'attribute': the node also groups by `ref` (hidden key `name`), functionally determined by its
    attributes `determined_by`, so the groups do not change. kind 'aggregate': the node also keeps the
    stored aggregate `name` (`aggregate` kind over `argument`). `enables` names the lower nodes whose
    edge from this node reads it. Only the summary-delta needs it (Figure 3's sd_sCD_sales has region);
    whether the summary table stores it too is a storage decision.
    """

    node: str
    kind: str  # 'attribute' | 'aggregate'
    name: str  # hidden key name, or hidden stored column
    ref: ColumnRef | None = None
    determined_by: tuple[ColumnRef, ...] = ()
    aggregate: str | None = None  # for kind 'aggregate': count | sum | min | max
    argument: str | None = None  # qualified SQL of its argument
    argument_type: str | None = None
    type: str | None = None  # the hidden column's type
    enables: tuple[str, ...] = ()


@dataclass(frozen=True)
class Essentials:
    """Appendix B's marks at a node: what its own definition needs (not what its edges need)."""

    node: str
    tables: tuple[str, ...]
    attributes: tuple[ColumnRef, ...]
    aggregates: tuple[str, ...]  # stored columns


@dataclass(frozen=True)
class Candidate:
    """One way to compute a summary-delta (5.5): from `parent` at cost parent_rows + join_rows."""

    parent: str
    parent_rows: int  # rows read from the parent (the change set, or a summary-delta)
    join_rows: int  # dimension rows read by the edge's joins (and old fact rows for dimension-change terms)
    valid: bool = True
    reason: str = ""

    @property
    def cost(self) -> int:
        return self.parent_rows + self.join_rows


@dataclass(frozen=True)
class ParentChoice:
    """The parent chosen for a summary-delta (5.5) and every candidate considered (costed on the lattice
    before Appendix B dropped the augmentations that only unchosen edges read)."""

    node: str
    parent: str
    candidates: tuple[Candidate, ...]
    requires_unchanged: tuple[str, ...] = ()  # dimensions joined on the edge: the choice is wrong if they change

    @property
    def chosen(self) -> Candidate:
        return next(c for c in self.candidates if c.parent == self.parent)


@dataclass(frozen=True)
class Estimate:
    """Estimated rows of a node's summary-delta for one batch, and what the estimate rests on."""

    node: str
    rows: int
    basis: str


@dataclass(frozen=True)
class ModeChoice:
    """How one night keeps an incremental view: by its summary-delta or by a recompute, and why
    (costs in rows, the window weighted: lattice/passes/choose_modes.py)."""

    view: str
    mode: str  # 'delta' | 'recompute'
    reason: str
    delta_cost: int = 0
    recompute_cost: int = 0


@dataclass(frozen=True)
class Lattice:
    """The optimized D-lattice (5.4, Theorem 5.1: identical to the V-lattice modulo table names)."""

    nodes: tuple[LatticeNode, ...]
    edges: tuple[Edge, ...] = ()  # the derives relation, made acyclic
    not_derivable: tuple[NotDerivable, ...] = ()
    augmentations: tuple[Augmentation, ...] = ()
    essentials: tuple[Essentials, ...] = ()
    parents: tuple[ParentChoice, ...] = ()
    estimates: tuple[Estimate, ...] = ()
    notes: tuple[str, ...] = ()

    def node(self, name: str) -> LatticeNode:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def edge(self, upper: str, lower: str) -> Edge | None:
        return next((e for e in self.edges if e.upper == upper and e.lower == lower), None)

    def edges_into(self, lower: str) -> tuple[Edge, ...]:
        return tuple(e for e in self.edges if e.lower == lower)

    def edges_from(self, upper: str) -> tuple[Edge, ...]:
        return tuple(e for e in self.edges if e.upper == upper)

    @property
    def cover_edges(self) -> tuple[Edge, ...]:
        return tuple(e for e in self.edges if e.cover)

    def parent_of(self, name: str) -> str | None:
        return next((p.parent for p in self.parents if p.node == name), None)

    def estimate(self, name: str) -> Estimate | None:
        return next((e for e in self.estimates if e.node == name), None)

    def why_not(self, upper: str, lower: str) -> str | None:
        return next((n.reason for n in self.not_derivable if n.upper == upper and n.lower == lower), None)
