"""Expectation suites generated from the plan: what every summary table must satisfy.

Nothing is written per view: every check follows from the View IR and the D-lattice, i.e. from paper
001's way of keeping a summary table (Table 2's hidden counts, Figure 8's NULL rule, AVG as SUM/COUNT,
the lattice's derives edges). Each check is SQL that runs where the data lives and returns the
offending rows (GX `UnexpectedRowsExpectation`: GX counts them in SQL and fetches at most 200), so no
summary table is ever pulled into Python.

    check                     severity  runs in                 fails when
    unique_groups             critical  warehouse               two rows share their group-by values (GROUP BY: NULL-safe)
    count_star_positive       critical  warehouse               hidden COUNT(*) is NULL or < 1 (a group at 0 must be gone)
    count_within_count_star   critical  warehouse               a hidden COUNT(e) is NULL, < 0 or > COUNT(*)
    null_iff_count_zero       critical  warehouse               SUM/MIN/MAX(e) is NULL while COUNT(e) > 0, or not NULL at 0
    avg_is_sum_over_count     critical  warehouse               a served AVG(e) differs from stored SUM(e) / COUNT(e)
    rollup_of_<parent>        critical  warehouse (+ dims)      a group differs from its lattice parent aggregated to it
    row_count_vs_previous     warning   warehouse               the row count moved more than a tolerance since last night
    sampled_recompute         critical  lake: DuckDB, Parquet   a sampled group recomputed from the base tables differs

The suites are plain GX objects; `nightshift/validate/` runs them and writes them as JSON into the
project (gx/expectations/). The warehouse suite of a view runs on its storage table "<view>__ns"; its
rollup checks also read the dimension tables their lattice edges join, which validate stages as
temporary tables (dimension_relation) in GX's warehouse connection. The lake suite runs on the stored
rows of the sampled groups, copied next to the lake's base tables (DuckDB over the Parquet) by validate.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Iterable

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")  # before GX is imported: no usage statistics

import great_expectations as gx  # noqa: E402
import great_expectations.expectations as gxe  # noqa: E402
import sqlglot  # noqa: E402

from lattice import emit, types  # noqa: E402
from lattice.graph import mark_cover  # noqa: E402
from lattice.ir import DISTINCT_COUNT, Edge, Lattice, Plan, Schema, View  # noqa: E402
from lattice.passes.derives import derives, node_of_view  # noqa: E402
from lattice.sql import ident as q  # noqa: E402
from lattice.sql import safe_name  # noqa: E402
from lattice.sql import to_dialect  # noqa: E402

Ident = Callable[[View, str], str]  # (view, name) -> the quoted identifier as named in the warehouse
BATCH = "\x00batch\x00"  # stands for GX's {batch} (the asset's table) until the query is final
FLOAT_TOLERANCE = 1e-9  # relative, for DOUBLE sums and averages computed in another order


def default_ident(view: View, name: str) -> str:
    return q(name)


@dataclass(frozen=True)
class SuiteSpec:
    """One generated suite: where it runs (warehouse or lake), on which table, for which view."""

    view: str
    source: str  # 'warehouse' | 'lake'
    table: str  # the table's name as the source stores it, unquoted (GX quotes it: sqlalchemy quoted_name)
    label: str  # the table for messages, e.g. SID_sales__ns
    suite: gx.ExpectationSuite


# ---------------------------------------------------------------- the lattice's rollup edges


@dataclass(frozen=True)
class Rollup:
    """child = parent aggregated to child's groups: an edge child ≺^{d1..dm} parent of the D-lattice
    between two summary tables (paper 001, 5.1), derived over their stored columns alone (never a
    lattice-friendly hidden attribute the warehouse does not hold). The edge says where each group-by
    attribute comes from (a key of the parent, or a column of a dimension joined on the edge: sCD_sales
    ≺^stores SID_sales reads city from stores by storeID; sR_sales ≺^stores sCD_sales reads region
    through the declared dependency city -> region) and how each stored aggregate composes (COUNT(*),
    COUNT(e), SUM(e) add up, MIN/MAX compose, an aggregate over a parent's attribute weighs by its
    COUNT(*): Appendix B's SUM(A*Y))."""

    child: View
    parent: View
    edge: Edge

    @property
    def check(self) -> str:
        return f"rollup_of_{self.parent.name}"

    @property
    def dimensions(self) -> dict[str, tuple[str, ...]]:
        """The dimension tables the edge joins, with the columns it reads from each."""
        out: dict[str, tuple[str, ...]] = {}
        for j in self.edge.joins:
            out[j.table] = tuple(dict.fromkeys(out.get(j.table, ()) + j.key + j.columns))
        return out


def rollups(plan: Plan, lattice: Lattice, chosen: Iterable[tuple[str, str]] = ()) -> tuple[Rollup, ...]:
    """The rollup checks: every cover edge of the D-lattice between two summary tables (the
    transitive reduction of ≺ over the views: Figure 3's SID_sales -> sCD_sales -> sR_sales, SID_sales
    -> SiC_sales), plus each `chosen` (child, parent) pair of views, e.g. the parents propagate chose
    tonight (lake manifest). Implied points and the change set are not tables: edges through them
    are not checked. `lattice`: the night's D-lattice, or its shape (dlattice.lattice_shape)."""
    names = {v.name for v in plan.views}
    between = [e for e in lattice.edges if e.upper in names and e.lower in names]
    pairs = {(e.lower, e.upper) for e in mark_cover(between) if e.cover}
    pairs |= {(c, p) for c, p in chosen if c in names and p in names and lattice.edge(p, c)}
    out = []
    for child in plan.views:
        for parent in plan.views:
            if (child.name, parent.name) not in pairs:
                continue
            edge = derives(node_of_view(child), node_of_view(parent), plan.schema, plan.dependencies)
            if isinstance(edge, Edge):  # a lattice edge only through a hidden attribute is not checkable here
                out.append(Rollup(child, parent, edge))
    return tuple(out)


def dimension_relation(table: str) -> str:
    """The dimension table `table` (its current base, the columns the rollup checks read) as
    validate stages it in GX's warehouse session: a temporary table (unquoted name)."""
    return emit.rel("dim", table)


def dimensions_needed(rollups_: Iterable[Rollup], schema: Schema) -> dict[str, tuple[tuple[str, str], ...]]:
    """table -> (column, type) of every dimension column the rollup checks read, in schema order."""
    cols: dict[str, set[str]] = {}
    for r in rollups_:
        for t, cs in r.dimensions.items():
            cols.setdefault(t, set()).update(cs)
    return {t: tuple((c.name, c.type) for c in schema.table(t).columns if c.name in cs) for t, cs in cols.items()}


# ---------------------------------------------------------------- suites


def plan_suites(plan: Plan, ident: Ident, dialect: str, edges: tuple[Rollup, ...],
                storage: Callable[[View], str] = lambda v: v.storage_table) -> tuple[SuiteSpec, ...]:
    """Every suite of the plan: per view one on the warehouse (SQL in sqlglot `dialect`: duckdb or
    postgres) with the rollup checks `edges` (rollups()), one on the lake. storage(view): the storage
    table's name as the warehouse spells it (Warehouse.storage_name)."""
    out = []
    for v in plan.views:
        mine = tuple(r for r in edges if r.child.name == v.name)
        out.append(SuiteSpec(v.name, "warehouse", storage(v), v.storage_table,
                             warehouse_suite(v, mine, ident, dialect, plan.schema)))
        if v.incremental:  # a recompute view is its own recomputation every night: no sample to check
            out.append(SuiteSpec(v.name, "lake", sample_table(v), v.storage_table, lake_suite(v)))
    return tuple(out)


def suite_name(view: View, source: str) -> str:
    return f"nightshift.{view.name}" + (".recompute" if source == "lake" else "")


def sample_table(view: View) -> str:
    """In the lake's validation DuckDB: the warehouse's stored rows of the sampled groups."""
    return f"ns_sample__{view.name}"


def keys_table(view: View) -> str:
    """In the lake's validation DuckDB: the sampled groups' keys."""
    return f"ns_keys__{view.name}"


def row_count_parameters(view: View) -> tuple[str, str]:
    """Suite parameters of the row-count warning, filled in at run time from the ledger."""
    return f"min_rows__{safe_name(view.name)}", f"max_rows__{safe_name(view.name)}"


def warehouse_suite(view: View, rollups_: tuple[Rollup, ...] = (), ident: Ident = default_ident, dialect: str = "duckdb",
                    schema: Schema | None = None) -> gx.ExpectationSuite:
    if not view.incremental:
        return gx.ExpectationSuite(name=suite_name(view, "warehouse"), expectations=[_row_count(view)],
                                   meta={"nightshift": {"view": view.name, "file": view.file, "source": "warehouse"}})
    n = lambda name: ident(view, name)  # noqa: E731
    keys = ", ".join(n(k.name) for k in view.keys)
    star = n("_ns_count")
    unique = (f"SELECT {keys}, COUNT(*) AS copies FROM {BATCH} GROUP BY {keys} HAVING COUNT(*) > 1" if keys
              else f"SELECT COUNT(*) AS copies FROM {BATCH} HAVING COUNT(*) > 1")  # a grand total: one row at most
    exps = [
        _rows(view, "unique_groups", unique, "the group-by columns are unique together (NULLs group together)"),
        _rows(view, "count_star_positive", f"SELECT * FROM {BATCH} WHERE {star} IS NULL OR {star} < 1",
              "hidden COUNT(*) is at least 1 in every row (a group whose count reaches 0 is deleted)"),
    ]
    counts = [view.stored_of("count", a.index).column for a in view.arguments]
    if counts:
        bad = " OR ".join(f"{n(c)} IS NULL OR {n(c)} < 0 OR {n(c)} > {star}" for c in counts)
        exps.append(_rows(view, "count_within_count_star", f"SELECT * FROM {BATCH} WHERE {bad}",
                          f"every hidden COUNT(e) ({', '.join(counts)}) is between 0 and COUNT(*)"))
    # a user-defined aggregate may be NULL over values too (a trimmed mean of one value), so it is left out
    nullable = [s for s in view.stored if s.kind in ("sum", "min", "max", "holistic") and not s.func.startswith("uda ")
                and s.func != DISTINCT_COUNT]
    if nullable:
        bad = " OR ".join(f"CASE WHEN {n(s.column)} IS NULL THEN 1 ELSE 0 END <> "
                          f"CASE WHEN {n(view.stored_of('count', s.arg).column)} = 0 THEN 1 ELSE 0 END" for s in nullable)
        exps.append(_rows(view, "null_iff_count_zero", f"SELECT * FROM {BATCH} WHERE {bad}",
                          f"every SUM/MIN/MAX/holistic ({', '.join(s.column for s in nullable)}) is NULL exactly when "
                          f"its COUNT(e) is 0"))
    for o in view.outputs:
        if o.kind == "avg":
            exps.append(_rows(view, "avg_is_sum_over_count", _avg_sql(view, o, n, dialect),
                              f"served {o.name} = stored SUM / COUNT, per group"))
    for r in rollups_:
        joined = f" joined with {', '.join(r.edge.join_labels)}" if r.edge.joins else ""
        exps.append(_rows(view, r.check, _rollup_sql(r, ident, dialect, schema),
                          f"{view.name} = {r.parent.name}{joined} aggregated to ({', '.join(k.name for k in view.keys)}): "
                          f"COUNT and SUM add up, MIN/MAX compose, per group (D-lattice edge)"))
    exps.append(_row_count(view))
    return gx.ExpectationSuite(name=suite_name(view, "warehouse"), expectations=exps,
                               meta={"nightshift": {"view": view.name, "file": view.file, "source": "warehouse"}})


def _row_count(view: View):
    lo, hi = row_count_parameters(view)
    return gxe.ExpectTableRowCountToBeBetween(
        min_value={"$PARAMETER": lo}, max_value={"$PARAMETER": hi}, severity="warning",
        meta=_meta(view, "row_count_vs_previous"),
        description=f"{view.storage_table}: row count within the configured tolerance of the previous night's")


def lake_suite(view: View) -> gx.ExpectationSuite:
    exp = _rows(view, "sampled_recompute", _recompute_sql(view),
                "sampled groups (random ones plus every group that lost rows under MIN/MAX this batch) "
                "recomputed from the lake's base tables equal the stored rows")
    return gx.ExpectationSuite(name=suite_name(view, "lake"), expectations=[exp],
                               meta={"nightshift": {"view": view.name, "file": view.file, "source": "lake"}})


def _rows(view: View, check: str, sql: str, what: str) -> gxe.UnexpectedRowsExpectation:
    query = sql.replace("{", "{{").replace("}", "}}").replace(BATCH, "{batch}")
    return gxe.UnexpectedRowsExpectation(
        unexpected_rows_query=query, meta=_meta(view, check), description=f"{view.storage_table}: {check}: {what}"
    )


def _meta(view: View, check: str) -> dict:
    return {"nightshift": {"view": view.name, "table": view.storage_table, "check": check}}


def _arg(view: View, index: int | None) -> str:
    return next(a.sql for a in view.arguments if a.index == index)


# ---------------------------------------------------------------- the comparing queries
#
# Two sides are compared without a join (a NULL-safe join is not hashable in PostgreSQL): both
# sides are stacked with UNION ALL, tagged, and grouped by the group-by columns; GROUP BY puts
# NULLs together, and HAVING-like filters compare the two sides' aggregates per group.


_DEFAULTS = {"integer": "0", "decimal": "0", "float": "0", "varchar": "''", "date": "DATE '1970-01-01'",
             "timestamp": "TIMESTAMP '1970-01-01 00:00:00'", "boolean": "FALSE"}


def same(a: str, b: str, type_: str) -> str:
    """a IS NOT DISTINCT FROM b, spelled so that PostgreSQL can hash-join on it (COALESCE plus an
    IS NULL flag); types without a default keep IS NOT DISTINCT FROM."""
    d = _DEFAULTS.get(types.family(type_))
    if d is None:
        return f"{a} IS NOT DISTINCT FROM {b}"
    return f"({a} IS NULL) = ({b} IS NULL) AND COALESCE({a}, {d}) = COALESCE({b}, {d})"


def _differs(a: str, b: str, type_: str) -> str:
    if types.family(type_) != "float":
        return f"{a} IS DISTINCT FROM {b}"
    return (f"CASE WHEN {a} IS NULL OR {b} IS NULL THEN ({a} IS NULL) <> ({b} IS NULL) "
            f"ELSE ABS({a} - {b}) > {FLOAT_TOLERANCE} * (1 + ABS({b})) END")


def _combine(kind: str) -> str:
    return {"min": "MIN", "max": "MAX"}.get(kind, "SUM")


def _over_storage(sql: str, n: Callable[[str], str], dialect: str) -> str:
    """Neutral SQL over a summary table's column names (view.having) as this warehouse names them."""
    def swap(node):
        return sqlglot.parse_one(n(node.name)) if isinstance(node, sqlglot.exp.Column) else node

    return to_dialect(sqlglot.parse_one(sql).transform(swap).sql(), dialect)


def _avg_sql(view: View, o, n, dialect: str) -> str:
    """Served AVG vs stored SUM/COUNT. The serving view may hide group-by columns, so the two are
    compared per declared group as signed sums (row count, NULL count and sum of the averages)."""
    declared = [n(k.name) for k in view.keys if k.declared]
    kd = ", ".join(declared)
    lead = kd + ", " if kd else ""
    s, c = n(o.source), n(o.count_column)
    avg = f"CASE WHEN {c} = 0 THEN NULL ELSE CAST({s} AS DOUBLE PRECISION) / {c} END"
    served = (f"SELECT {lead}1 AS _ns_n, CASE WHEN {n(o.name)} IS NULL THEN 1 ELSE 0 END AS _ns_null, "
              f"CAST({n(o.name)} AS DOUBLE PRECISION) AS _ns_avg FROM {n(view.name)}")
    kept = f" WHERE {_over_storage(view.having, n, dialect)}" if view.having else ""  # the groups HAVING serves
    stored = (f"SELECT {lead}-1, -(CASE WHEN {c} = 0 THEN 1 ELSE 0 END), -({avg}) FROM {BATCH}{kept}")
    group = f" GROUP BY {kd}" if kd else ""
    return (
        f"SELECT * FROM (SELECT {lead}SUM(_ns_n) AS served_minus_stored_rows, SUM(_ns_null) AS served_minus_stored_nulls, "
        f"SUM(_ns_avg) AS served_minus_stored_avg, SUM(ABS(_ns_avg)) AS _ns_scale "
        f"FROM ({served} UNION ALL {stored}) AS u{group}) AS g "
        f"WHERE served_minus_stored_rows <> 0 OR served_minus_stored_nulls <> 0 "
        f"OR ABS(COALESCE(served_minus_stored_avg, 0)) > {FLOAT_TOLERANCE} * (1 + COALESCE(_ns_scale, 0))"
    )


def _rollup_sql(r: Rollup, ident: Ident, dialect: str, schema: Schema) -> str:
    """The child's rows vs the parent aggregated to the child's groups along the edge, per group."""
    c = r.child
    keys = ", ".join(q(k.name) for k in c.keys)
    child = ", ".join([f"{ident(c, k.name)} AS {q(k.name)}" for k in c.keys] + [f"{ident(c, s.column)} AS {q(s.column)}" for s in c.stored])
    aggs, tests = [], []
    for s in c.stored:
        f, col = _combine(s.kind), q(s.column)
        mine, theirs = q(f"child.{s.column}"), q(f"parent.{s.column}")
        aggs.append(f"{f}(CASE WHEN _ns_child = 1 THEN {col} END) AS {mine}, {f}(CASE WHEN _ns_child = 0 THEN {col} END) AS {theirs}")
        tests.append(_differs(mine, theirs, s.type))
    group = f" GROUP BY {keys}" if keys else ""
    lead = keys + ", " if keys else ""
    return (
        f"SELECT * FROM (SELECT {lead}SUM(_ns_child) AS child_rows, SUM(1 - _ns_child) AS parent_rows, {', '.join(aggs)} FROM ("
        f"SELECT 1 AS _ns_child, {child} FROM {BATCH} UNION ALL "
        f"SELECT 0 AS _ns_child, d.* FROM ({_along_edge(r, ident, dialect, schema)}) AS d"
        f") AS u{group}) AS g WHERE child_rows <> 1 OR parent_rows <> 1 OR " + " OR ".join(tests)
    )


def _along_edge(r: Rollup, ident: Ident, dialect: str, schema: Schema) -> str:
    """The parent summary table aggregated to the child's groups along the lattice edge (emit.edge_query,
    the builder propagate uses too), over the staged dimensions (dimension_relation). Comma joins: GX
    handles a query with JOIN differently (no alias for {batch}); a dependency join (city -> region)
    matches NULLs with a hashable NULL-safe equality."""
    p, up = r.parent, q("_ns_parent")
    sql = emit.edge_query(r.edge, r.child.keys, r.child.stored, f"{ident(p, p.storage_table)} AS {up}",
                          lambda col: f"{up}.{ident(p, col)}", lambda j: dimension_relation(j.table), schema,
                          null_safe_equal=same, comma_joins=True)
    return to_dialect(f"{sql} HAVING COUNT(*) > 0", dialect)


def _base_from(view: View, fact: str | None = None) -> tuple[list[str], str, list[str]]:
    """The view's join tree and filter over the lake's base tables (DuckDB): group-by column
    expressions, the FROM list (comma joins: GX treats a query with JOIN differently), conditions.
    `fact` replaces the fact table (e.g. by the batch's deleted rows)."""
    refs = [_duckdb(k.sql) for k in view.keys]
    tables = ", ".join(f"{fact if fact and t == view.fact else q(t)} AS {q(t)}" for t in view.tables)
    where = [f"{q(j.child)}.{q(a)} = {q(j.parent)}.{q(b)}" for j in view.joins for a, b in zip(j.child_columns, j.parent_columns)]
    if view.where:
        where.append(f"({_duckdb(view.where)})")
    return refs, tables, where


def base_rows_sql(view: View, fact: str | None = None) -> str:
    """The group-by values of every base row of the view (the lake side samples groups from it);
    `fact`: of these fact rows instead (a relation or subquery with the fact table's columns)."""
    refs, tables, where = _base_from(view, fact)
    cols = ", ".join(f"{r} AS {q(k.name)}" for r, k in zip(refs, view.keys))
    return f"SELECT {cols} FROM {tables}" + (f" WHERE {' AND '.join(where)}" if where else "")


def _recompute_sql(view: View) -> str:
    """The stored rows of the sampled groups vs the same groups recomputed by DuckDB from the
    lake's base tables (COUNT(*), COUNT(e), SUM(e), MIN(e), MAX(e) per group, straight from the
    view's join tree and filter). Runs in the lake's validation DuckDB, never in the warehouse. A
    grand total (no group keys) compares its one row, or none over no base rows."""
    keys = ", ".join(q(k.name) for k in view.keys)
    lead = keys + ", " if keys else ""
    stored = ", ".join(q(s.column) for s in view.stored)
    refs, tables, where = _base_from(view)
    recomputed = ", ".join([f"{r} AS {q(k.name)}" for r, k in zip(refs, view.keys)]
                           + [f"{_duckdb(emit.base_aggregate(view, s))} AS {q(s.column)}" for s in view.stored])
    if view.keys:
        sampled = " AND ".join(f"{r} IS NOT DISTINCT FROM s.{q(k.name)}" for r, k in zip(refs, view.keys))
        where = where + [f"EXISTS (SELECT 1 FROM {q(keys_table(view))} AS s WHERE {sampled})"]
    if view.has_holistic:
        holistic = _holistic_recompute(view, refs, where)
    aggs, tests = [], []
    for s in view.stored:
        col = q(s.column)
        mine, theirs = q(f"warehouse.{s.column}"), q(f"recomputed.{s.column}")
        aggs.append(f"MAX(CASE WHEN _ns_stored = 1 THEN {col} END) AS {mine}, MAX(CASE WHEN _ns_stored = 0 THEN {col} END) AS {theirs}")
        tests.append(_differs(mine, theirs, s.type))
    cond = f" WHERE {' AND '.join(where)}" if where else ""
    grouped = f" GROUP BY {', '.join(refs)}" if refs else " HAVING COUNT(*) > 0"
    outer = f" GROUP BY {keys}" if keys else ""
    branch = f"SELECT 0, {recomputed} FROM {tables}{cond}{grouped}"
    if view.has_holistic:  # the holistic columns from DuckDB's own aggregates over the expanded values
        where_part = {c: f"h{i}" for i, (_, columns) in enumerate(holistic) for c in columns}
        cols = [f"r.{q(k.name)}" for k in view.keys]
        for s in view.stored:
            col = f"{where_part.get(s.column, 'r')}.{q(s.column)}"
            cols.append(f"COALESCE({col}, 0)" if s.func == DISTINCT_COUNT else col)
        joins = " ".join(f"LEFT JOIN ({sql}) AS h{i} ON {emit.same_keys(view, 'r', f'h{i}')}"
                         for i, (sql, _) in enumerate(holistic))
        branch = f"SELECT 0, {', '.join(cols)} FROM (SELECT {recomputed} FROM {tables}{cond}{grouped}) AS r {joins}"
    rows = "warehouse_rows <> 1 OR recomputed_rows <> 1" if keys else "warehouse_rows <> recomputed_rows"
    return (
        f"SELECT * FROM (SELECT {lead}SUM(_ns_stored) AS warehouse_rows, SUM(1 - _ns_stored) AS recomputed_rows, "
        f"{', '.join(aggs)} FROM ("
        f"SELECT 1 AS _ns_stored, {lead}{stored} FROM {BATCH} UNION ALL {branch}"
        f") AS u{outer}) AS g WHERE {rows} OR " + " OR ".join(tests)
    )


def _holistic_recompute(view: View, refs: list[str], where: list[str]) -> list[tuple[str, list[str]]]:
    """The sampled groups' holistic aggregates by DuckDB's own QUANTILE_CONT/QUANTILE_DISC/MODE and DISTINCT
    aggregates over the auxiliary view's rows joined to the dimensions, each value repeated m times
    (independent of propagate's weighted positions): one query per argument (its SQL and the columns it
    gives), over the rows where it is not NULL."""
    _, tables, _ = _base_from(view)
    keys = [q(k.name) for k in view.keys]
    part = f"PARTITION BY {', '.join(refs)}" if refs else ""
    out = []
    for index in dict.fromkeys(s.arg for s in view.stored if s.kind == "holistic"):
        arg = _duckdb(next(a for a in view.arguments if a.index == index).sql)
        cond = " AND ".join(where + [f"({arg}) IS NOT NULL"])
        # a user-defined aggregate's i and n: DuckDB's row numbers over the expanded values of each group
        values = (f"SELECT {', '.join([f'{r} AS {k}' for r, k in zip(refs, keys)] + [f'{arg} AS _ns_x'])}, "
                  f"ROW_NUMBER() OVER ({part} ORDER BY {arg}) AS _ns_i, COUNT(*) OVER ({part}) AS _ns_n "
                  f"FROM {tables}, range({q(view.fact)}.{q(emit.WEIGHT)}) AS _ns_r WHERE {cond}")
        aggs = []
        for s in (s for s in view.stored if s.kind == "holistic" and s.arg == index):
            name, _, p = s.func.partition(" ")
            if name == "uda":
                value = emit.user_aggregate_sql(s.definition, "_ns_x", "_ns_i", "_ns_n")
            elif name == "distinct":
                value = f"{p.upper()}(DISTINCT _ns_x)"
            else:
                value = f"{name.upper()}({p}) WITHIN GROUP (ORDER BY _ns_x)" if p else "MODE() WITHIN GROUP (ORDER BY _ns_x)"
            aggs.append((s.column, f"CAST({_duckdb(value)} AS {s.type}) AS {q(s.column)}"))
        group = f" GROUP BY {', '.join(keys)}" if keys else ""
        out.append((f"SELECT {', '.join(keys + [a for _, a in aggs])} FROM ({values}) AS v{group}", [c for c, _ in aggs]))
    return out


def _duckdb(sql: str) -> str:
    return to_dialect(sql, "duckdb")
