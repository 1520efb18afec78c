"""The compiler's intermediate representation: frozen dataclasses, no dicts passed between passes.

Expressions (aggregate arguments, filters) are kept as SQL text in sqlglot's neutral dialect with
every column qualified by its *base table name* and every identifier quoted, so that the emitter
can embed them in any query that aliases the change relations with the base table names and
transpile the result to Spark, DuckDB or PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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


@dataclass(frozen=True)
class FunctionalDependency:
    """`lhs -> rhs` declared in nightshift.toml [dependencies] (beyond keys), e.g. city -> region."""

    table: str
    lhs: tuple[str, ...]
    rhs: tuple[str, ...]


# ---------------------------------------------------------------- views


@dataclass(frozen=True)
class ColumnRef:
    table: str
    column: str


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
    ref: ColumnRef
    type: str
    declared: bool  # False when the column is grouped by but not in the view's select list


@dataclass(frozen=True)
class Argument:
    """A distinct aggregate argument expression e; index i names its stored columns."""

    index: int
    sql: str  # qualified, quoted, neutral dialect
    type: str


@dataclass(frozen=True)
class StoredAggregate:
    """A column the summary table keeps (Table 2 / Figure 8): COUNT(*), COUNT(e), SUM(e), MIN(e), MAX(e)."""

    kind: str  # 'count_star' | 'count' | 'sum' | 'min' | 'max'
    column: str  # e.g. _ns_count, _ns_cnt_1, _ns_sum_1
    arg: int | None  # Argument.index, None for count_star
    type: str


@dataclass(frozen=True)
class Output:
    """A declared column of the view, as an expression over the summary table's stored columns."""

    name: str
    kind: str  # 'key' | 'count_star' | 'count' | 'sum' | 'avg' | 'min' | 'max'
    source: str  # stored column (key name or aggregate column); for avg the SUM column
    count_column: str | None = None  # for avg: the COUNT(e) column


@dataclass(frozen=True)
class View:
    name: str
    file: str
    sql: str  # the user's SELECT, as written (the oracle runs it)
    fact: str
    tables: tuple[str, ...]  # fact first, then dimensions in join order
    joins: tuple[Join, ...]
    where: str | None  # qualified neutral SQL of the WHERE filter without the join predicates
    keys: tuple[GroupKey, ...]
    arguments: tuple[Argument, ...] = ()
    stored: tuple[StoredAggregate, ...] = ()
    outputs: tuple[Output, ...] = ()

    @property
    def dimensions(self) -> tuple[str, ...]:
        return self.tables[1:]

    @property
    def has_min_max(self) -> bool:
        return any(s.kind in ("min", "max") for s in self.stored)

    @property
    def storage_table(self) -> str:
        return f"{self.name}__ns"

    def stored_of(self, kind: str, arg: int | None) -> StoredAggregate | None:
        return next((s for s in self.stored if s.kind == kind and s.arg == arg), None)


@dataclass(frozen=True)
class Plan:
    """The compiled project: what `nightshift plan` prints and every step executes."""

    schema: Schema
    views: tuple[View, ...]
    dependencies: tuple[FunctionalDependency, ...] = ()
    fingerprint: str = ""
    notes: tuple[str, ...] = field(default=())

    def view(self, name: str) -> View:
        low = name.lower()
        for v in self.views:
            if v.name.lower() == low:
                return v
        raise KeyError(name)

    @property
    def fact_tables(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v.fact for v in self.views))
