"""Expectation suites generated from the plan (issue 7): what every summary table must satisfy.

Nothing is written per view: every check follows from the View IR, i.e. from paper 001's way of
keeping a summary table (Table 2's hidden counts, Figure 8's NULL rule, AVG as SUM/COUNT, the
D-lattice's rollups). Each check is SQL that runs where the data lives and returns the offending
rows (GX `UnexpectedRowsExpectation`: GX counts them in SQL and fetches at most 200), so no summary
table is ever pulled into Python.

    check                     severity  runs in    fails when
    unique_groups             critical  warehouse  two rows share their group-by values (GROUP BY: NULL-safe)
    count_star_positive       critical  warehouse  hidden COUNT(*) is NULL or < 1 (a group at 0 must be gone)
    count_within_count_star   critical  warehouse  a hidden COUNT(e) is NULL, < 0 or > COUNT(*)
    null_iff_count_zero       critical  warehouse  SUM/MIN/MAX(e) is NULL while COUNT(e) > 0, or not NULL at 0
    avg_is_sum_over_count     critical  warehouse  a served AVG(e) differs from stored SUM(e) / COUNT(e)
    rollup_of_<parent>        critical  warehouse  a group differs from its lattice parent aggregated to it
    row_count_vs_previous     warning   warehouse  the row count moved more than a tolerance since last night
    sampled_recompute         critical  lake       a sampled group recomputed from the base tables differs

The suites are plain GX objects; `nightshift/validate.py` runs them and writes them as JSON into the
project (gx/expectations/). The warehouse suite of a view runs on its storage table "<view>__ns";
the lake suite on the stored rows of the sampled groups, copied next to the lake's base tables
(DuckDB over the Parquet) by validate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

import great_expectations as gx
import great_expectations.expectations as gxe
import sqlglot

from lattice import types
from lattice.ir import Join, Plan, Schema, StoredAggregate, View
from warehouse.dialects import q

Ident = Callable[[View, str], str]  # (view, name) -> the quoted identifier as named in the warehouse
BATCH = "\x00batch\x00"  # stands for GX's {batch} (the asset's table) until the query is final
FLOAT_TOLERANCE = 1e-9  # relative, for DOUBLE sums and averages computed in another order


def default_ident(view: View, name: str) -> str:
    return q(name)


@dataclass(frozen=True)
class Rollup:
    """child = parent aggregated to child's group-by columns: an edge child ≺ parent of the lattice
    (paper 001, 5.1) that needs no dimension table (the warehouse holds none; Example 5.1's edges
    are all ≺^stores or ≺^items, so Figure 1's four views have none of these).

    columns pairs each stored aggregate of the child with the parent's column it is derived from:
    COUNT(*), COUNT(e) and SUM(e) add up, MIN and MAX compose."""

    child: View
    parent: View
    columns: tuple[tuple[StoredAggregate, StoredAggregate], ...]

    @property
    def check(self) -> str:
        return f"rollup_of_{self.parent.name}"


@dataclass(frozen=True)
class SuiteSpec:
    """One generated suite: where it runs (warehouse or lake), on which table, for which view."""

    view: str
    source: str  # 'warehouse' | 'lake'
    table: str  # the table as the source names it (quoted for the warehouse)
    label: str  # the table for messages, e.g. SID_sales__ns
    suite: gx.ExpectationSuite


# ---------------------------------------------------------------- the lattice's rollup edges


def derive(child: View, parent: View, schema: Schema) -> Rollup | None:
    """How `child` follows from `parent`'s stored columns, or None when it does not.

    Derivable here means: same fact table and filter; the child's group-by columns a strict subset
    of the parent's; the child's joins among the parent's and the parent's extra joins lossless (a
    NOT NULL foreign key: propagate refuses orphans, so every fact row keeps exactly one match);
    and every stored aggregate of the child kept by the parent for the same argument expression.
    Rollups through a dimension (sCD_sales ≺^stores SID_sales: city comes from stores) need the
    dimension table, which the warehouse does not hold: they are not derivable here.
    """
    if child.name == parent.name or child.fact != parent.fact or child.where != parent.where:
        return None
    parent_refs = {k.ref for k in parent.keys}
    if len(child.keys) >= len(parent.keys) or not all(k.ref in parent_refs for k in child.keys):
        return None
    if not set(child.joins) <= set(parent.joins):
        return None
    if not all(_lossless(j, schema) for j in set(parent.joins) - set(child.joins)):
        return None
    parent_arg = {a.sql: a.index for a in parent.arguments}
    child_sql = {a.index: a.sql for a in child.arguments}
    columns = []
    for s in child.stored:
        arg = None if s.arg is None else parent_arg.get(child_sql[s.arg], -1)
        p = parent.stored_of(s.kind, arg)
        if p is None:
            return None
        columns.append((s, p))
    return Rollup(child, parent, tuple(columns))


def rollups(plan: Plan, chosen: Iterable[tuple[str, str]] | None = None) -> tuple[Rollup, ...]:
    """One rollup check per view that has a derivable parent.

    `chosen` = (child, parent) view names, e.g. the D-lattice's chosen parents; without it each
    child takes the derivable parent with the fewest group-by columns (the likely smallest)."""
    if chosen is not None:
        out = []
        for c, p in chosen:
            r = derive(plan.view(c), plan.view(p), plan.schema)
            if r is None:
                raise ValueError(f"summary table {c} is not derivable from {p}")
            out.append(r)
        return tuple(out)
    out = []
    for child in plan.views:
        found = [r for p in plan.views if (r := derive(child, p, plan.schema))]
        if found:
            out.append(min(found, key=lambda r: (len(r.parent.keys), r.parent.name)))
    return tuple(out)


def _lossless(join: Join, schema: Schema) -> bool:
    table = schema.table(join.child)
    return all(not table.column(c).nullable for c in join.child_columns)


# ---------------------------------------------------------------- suites


def plan_suites(plan: Plan, ident: Ident = default_ident, chosen: Iterable[tuple[str, str]] | None = None) -> tuple[SuiteSpec, ...]:
    """Every suite of the plan: per view one on the warehouse, one on the lake."""
    edges = {r.child.name: r for r in rollups(plan, chosen)}
    out = []
    for v in plan.views:
        out.append(SuiteSpec(v.name, "warehouse", ident(v, v.storage_table), v.storage_table,
                             warehouse_suite(v, edges.get(v.name), ident)))
        out.append(SuiteSpec(v.name, "lake", q(sample_table(v)), v.storage_table, lake_suite(v)))
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
    return f"min_rows__{view.name}", f"max_rows__{view.name}"


def warehouse_suite(view: View, rollup: Rollup | None, ident: Ident = default_ident) -> gx.ExpectationSuite:
    n = lambda name: ident(view, name)  # noqa: E731
    keys = ", ".join(n(k.name) for k in view.keys)
    star = n("_ns_count")
    exps = [
        _rows(view, "unique_groups", f"SELECT {keys}, COUNT(*) AS copies FROM {BATCH} GROUP BY {keys} HAVING COUNT(*) > 1",
              "the group-by columns are unique together (NULLs group together)"),
        _rows(view, "count_star_positive", f"SELECT * FROM {BATCH} WHERE {star} IS NULL OR {star} < 1",
              "hidden COUNT(*) is at least 1 in every row (a group whose count reaches 0 is deleted)"),
    ]
    counts = [view.stored_of("count", a.index).column for a in view.arguments]
    if counts:
        bad = " OR ".join(f"{n(c)} IS NULL OR {n(c)} < 0 OR {n(c)} > {star}" for c in counts)
        exps.append(_rows(view, "count_within_count_star", f"SELECT * FROM {BATCH} WHERE {bad}",
                          f"every hidden COUNT(e) ({', '.join(counts)}) is between 0 and COUNT(*)"))
    nullable = [s for s in view.stored if s.kind in ("sum", "min", "max")]
    if nullable:
        bad = " OR ".join(f"CASE WHEN {n(s.column)} IS NULL THEN 1 ELSE 0 END <> "
                          f"CASE WHEN {n(view.stored_of('count', s.arg).column)} = 0 THEN 1 ELSE 0 END" for s in nullable)
        exps.append(_rows(view, "null_iff_count_zero", f"SELECT * FROM {BATCH} WHERE {bad}",
                          f"every SUM/MIN/MAX ({', '.join(s.column for s in nullable)}) is NULL exactly when "
                          f"its COUNT(e) is 0 (Figure 8)"))
    for o in view.outputs:
        if o.kind == "avg":
            exps.append(_rows(view, "avg_is_sum_over_count", _avg_sql(view, o, n),
                              f"served {o.name} = stored SUM / COUNT, per group"))
    if rollup is not None:
        exps.append(_rows(view, rollup.check, _rollup_sql(rollup, ident),
                          f"{view.name} = {rollup.parent.name} aggregated to ({', '.join(k.name for k in view.keys)}): "
                          f"COUNT and SUM add up, MIN/MAX compose, per group"))
    lo, hi = row_count_parameters(view)
    exps.append(gxe.ExpectTableRowCountToBeBetween(
        min_value={"$PARAMETER": lo}, max_value={"$PARAMETER": hi}, severity="warning",
        meta=_meta(view, "row_count_vs_previous"),
        description=f"{view.storage_table}: row count within the configured tolerance of the previous night's"))
    return gx.ExpectationSuite(name=suite_name(view, "warehouse"), expectations=exps,
                               meta={"nightshift": {"view": view.name, "file": view.file, "source": "warehouse"}})


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


def _differs(a: str, b: str, type_: str) -> str:
    if types.family(type_) != "float":
        return f"{a} IS DISTINCT FROM {b}"
    return (f"CASE WHEN {a} IS NULL OR {b} IS NULL THEN ({a} IS NULL) <> ({b} IS NULL) "
            f"ELSE ABS({a} - {b}) > {FLOAT_TOLERANCE} * (1 + ABS({b})) END")


def _combine(kind: str) -> str:
    return {"min": "MIN", "max": "MAX"}.get(kind, "SUM")


def _avg_sql(view: View, o, n) -> str:
    """Served AVG vs stored SUM/COUNT. The serving view may hide group-by columns, so the two are
    compared per declared group as signed sums (row count, NULL count and sum of the averages)."""
    declared = [n(k.name) for k in view.keys if k.declared]
    kd = ", ".join(declared)
    lead = kd + ", " if kd else ""
    s, c = n(o.source), n(o.count_column)
    avg = f"CASE WHEN {c} = 0 THEN NULL ELSE CAST({s} AS DOUBLE PRECISION) / {c} END"
    served = (f"SELECT {lead}1 AS _ns_n, CASE WHEN {n(o.name)} IS NULL THEN 1 ELSE 0 END AS _ns_null, "
              f"CAST({n(o.name)} AS DOUBLE PRECISION) AS _ns_avg FROM {n(view.name)}")
    stored = (f"SELECT {lead}-1, -(CASE WHEN {c} = 0 THEN 1 ELSE 0 END), -({avg}) FROM {BATCH}")
    group = f" GROUP BY {kd}" if kd else ""
    return (
        f"SELECT * FROM (SELECT {lead}SUM(_ns_n) AS served_minus_stored_rows, SUM(_ns_null) AS served_minus_stored_nulls, "
        f"SUM(_ns_avg) AS served_minus_stored_avg, SUM(ABS(_ns_avg)) AS _ns_scale "
        f"FROM ({served} UNION ALL {stored}) AS u{group}) AS g "
        f"WHERE served_minus_stored_rows <> 0 OR served_minus_stored_nulls <> 0 "
        f"OR ABS(COALESCE(served_minus_stored_avg, 0)) > {FLOAT_TOLERANCE} * (1 + COALESCE(_ns_scale, 0))"
    )


def _rollup_sql(r: Rollup, ident: Ident) -> str:
    c, p = r.child, r.parent
    cn = lambda name: ident(c, name)  # noqa: E731
    pn = lambda name: ident(p, name)  # noqa: E731
    parent_key = {k.ref: k for k in p.keys}
    keys = ", ".join(cn(k.name) for k in c.keys)
    child_cols = ", ".join(cn(s.column) for s, _ in r.columns)
    parent_cols = ", ".join(f"{pn(ps.column)} AS {cn(cs.column)}" for cs, ps in r.columns)
    parent_keys = ", ".join(f"{pn(parent_key[k.ref].name)} AS {cn(k.name)}" for k in c.keys)
    aggs, tests = [], []
    for cs, _ in r.columns:
        f, col = _combine(cs.kind), cn(cs.column)
        mine, theirs = q(f"child.{cs.column}"), q(f"parent.{cs.column}")
        aggs.append(f"{f}(CASE WHEN _ns_child = 1 THEN {col} END) AS {mine}, {f}(CASE WHEN _ns_child = 0 THEN {col} END) AS {theirs}")
        tests.append(_differs(mine, theirs, cs.type))
    return (
        f"SELECT * FROM (SELECT {keys}, SUM(_ns_child) AS child_rows, {', '.join(aggs)} FROM ("
        f"SELECT 1 AS _ns_child, {keys}, {child_cols} FROM {BATCH} UNION ALL "
        f"SELECT 0, {parent_keys}, {parent_cols} FROM {ident(p, p.storage_table)}"
        f") AS u GROUP BY {keys}) AS g WHERE child_rows <> 1 OR " + " OR ".join(tests)
    )


def _base_from(view: View) -> tuple[list[str], str, list[str]]:
    """The view's join tree and filter over the lake's base tables (DuckDB): group-by column
    expressions, the FROM list (comma joins: GX treats a query with JOIN differently), conditions."""
    refs = [f"{q(k.ref.table)}.{q(k.ref.column)}" for k in view.keys]
    tables = ", ".join(f"{q(t)} AS {q(t)}" for t in view.tables)
    where = [f"{q(j.child)}.{q(a)} = {q(j.parent)}.{q(b)}" for j in view.joins for a, b in zip(j.child_columns, j.parent_columns)]
    if view.where:
        where.append(f"({_duckdb(view.where)})")
    return refs, tables, where


def base_rows_sql(view: View) -> str:
    """The group-by values of every base row of the view (the lake side samples groups from it)."""
    refs, tables, where = _base_from(view)
    cols = ", ".join(f"{r} AS {q(k.name)}" for r, k in zip(refs, view.keys))
    return f"SELECT {cols} FROM {tables}" + (f" WHERE {' AND '.join(where)}" if where else "")


def _recompute_sql(view: View) -> str:
    """The stored rows of the sampled groups vs the same groups recomputed by DuckDB from the
    lake's base tables (COUNT(*), COUNT(e), SUM(e), MIN(e), MAX(e) per group, straight from the
    view's join tree and filter). Runs in the lake's validation DuckDB, never in the warehouse."""
    keys = ", ".join(q(k.name) for k in view.keys)
    stored = ", ".join(q(s.column) for s in view.stored)
    refs, tables, where = _base_from(view)
    recomputed = ", ".join([f"{r} AS {q(k.name)}" for r, k in zip(refs, view.keys)]
                           + [f"{_base_agg(view, s)} AS {q(s.column)}" for s in view.stored])
    sampled = " AND ".join(f"{r} IS NOT DISTINCT FROM s.{q(k.name)}" for r, k in zip(refs, view.keys))
    where = where + [f"EXISTS (SELECT 1 FROM {q(keys_table(view))} AS s WHERE {sampled})"]
    aggs, tests = [], []
    for s in view.stored:
        col = q(s.column)
        mine, theirs = q(f"warehouse.{s.column}"), q(f"recomputed.{s.column}")
        aggs.append(f"MAX(CASE WHEN _ns_stored = 1 THEN {col} END) AS {mine}, MAX(CASE WHEN _ns_stored = 0 THEN {col} END) AS {theirs}")
        tests.append(_differs(mine, theirs, s.type))
    return (
        f"SELECT * FROM (SELECT {keys}, SUM(_ns_stored) AS warehouse_rows, SUM(1 - _ns_stored) AS recomputed_rows, "
        f"{', '.join(aggs)} FROM ("
        f"SELECT 1 AS _ns_stored, {keys}, {stored} FROM {BATCH} UNION ALL "
        f"SELECT 0, {recomputed} FROM {tables} WHERE {' AND '.join(where)} GROUP BY {', '.join(refs)}"
        f") AS u GROUP BY {keys}) AS g WHERE warehouse_rows <> 1 OR recomputed_rows <> 1 OR " + " OR ".join(tests)
    )


def _base_agg(view: View, s: StoredAggregate) -> str:
    if s.kind == "count_star":
        return "COUNT(*)"
    func = {"count": "COUNT", "sum": "SUM", "min": "MIN", "max": "MAX"}[s.kind]
    return f"CAST({func}({_duckdb(_arg(view, s.arg))}) AS {s.type})"


def _duckdb(sql: str) -> str:
    return sqlglot.transpile(sql, write="duckdb")[0]
