"""Emit the SQL of every propagate step (paper 001, Sections 4.1 and 4.2).

Queries are built in sqlglot's neutral dialect over *named relations* that the executor registers
(Spark temp views, or DuckDB views over Parquet):

    __ns_ins_<t>, __ns_del_<t>   the batch's inserted / deleted rows of table t (full row images)
    __ns_old_<t>                 table t at the state before the batch
    __ns_new_<t>                 dimension t after the batch (old - deleted + inserted)
    __ns_lost_<view>             keys of the groups of <view> that lost rows (MIN/MAX recompute)

and aliased with the base table names, so the view's qualified expressions drop in unchanged.
`lattice.sql.to_dialect()` transpiles the result for the engine that runs it; every identifier and
literal goes through `lattice.sql`.
"""

from __future__ import annotations

import datetime as dt
from typing import Callable, NamedTuple

import sqlglot

from lattice.ir import DISTINCT_COUNT, Argument, ColumnRef, Edge, JoinStep, LatticeNode, Schema, StoredAggregate, View
from lattice.passes.normalize import served
from lattice.refresh import fresh, merged
from lattice.sql import ident as q
from lattice.sql import literal, safe_name
from lattice.warehouse_sql import duckdb_decimal_interpolation

SIGN = "_ns_sign"
LOST = "_ns_lost"


def rel(kind: str, table: str) -> str:
    """A relation the executor registers, named so that it needs no quoting (sql.safe_name)."""
    return f"__ns_{kind}_" + safe_name(table)


def changes_of(fact: str) -> str:
    """The D-lattice's name for the change set of fact table `fact` (the top of its lattice)."""
    return f"Δ{fact}"


# ------------------------------------------------------------------ prepare-changes (4.1.1)


def _join_clause(view: View, source_of: dict[str, str]) -> str:
    """FROM <fact source> AS fact JOIN <dim source> AS dim ON fk = key ... (aliases = base names)."""
    parts = [f"{source_of[view.fact]} AS {q(view.fact)}"]
    for j in view.joins:
        cond = " AND ".join(
            f"{q(j.child)}.{q(c)} = {q(j.parent)}.{q(p)}" for c, p in zip(j.child_columns, j.parent_columns)
        )
        parts.append(f"JOIN {source_of[j.parent]} AS {q(j.parent)} ON {cond}")
    return "\n  ".join(parts)


def same_keys(view: View, left: str, right: str) -> str:
    """The join condition of two relations (aliases `left`, `right`) holding a view's group keys by name:
    each key null-safely equal (a NULL key is a group); 1 = 1 for a grand total."""
    return " AND ".join(f"{left}.{q(k.name)} IS NOT DISTINCT FROM {right}.{q(k.name)}" for k in view.keys) or "1 = 1"


def _signed(table: str) -> str:
    """The change set of one table as signed rows: +1 per inserted, -1 per deleted row image."""
    return (
        f"(SELECT *, 1 AS {SIGN} FROM {rel('ins', table)} "
        f"UNION ALL SELECT *, -1 AS {SIGN} FROM {rel('del', table)})"
    )


def _unsigned(relation: str) -> str:
    return f"(SELECT *, 1 AS {SIGN} FROM {relation})"


def _source_terms(view: View, changed: frozenset[str]) -> list[tuple[dict[str, str], str]]:
    """The terms of Δ(F ⋈ D1 ⋈ ... ⋈ Dn) (4.1.4): ΔF⋈D1'⋈..⋈Dn' + Σ_j F⋈D1..D(j-1)⋈ΔDj⋈D(j+1)'..Dn'.

    A primed dimension is its state after the batch, an unprimed one before. Each term's rows carry
    the sign of the one delta relation in it (returned with the term), so no change counts twice.
    The fact term is always present (an empty change set gives an empty, typed summary-delta).
    """
    src = {view.fact: _signed(view.fact)}
    src.update({d: rel("new", d) for d in view.dimensions})
    terms = [(src, view.fact)]
    for j, dim in enumerate(view.dimensions):
        if dim not in changed:
            continue
        src = {view.fact: _unsigned(rel("old", view.fact))}
        for k, other in enumerate(view.dimensions):
            src[other] = rel("old", other) if k < j else rel("new", other)
        src[dim] = _signed(dim)
        terms.append((src, dim))
    return terms


def _sources(view: View, sign: str) -> list[tuple[str, str]]:
    """(expression, name) of Table 2's aggregate sources of one signed row: COUNT(*) -> sign;
    COUNT(e) -> CASE WHEN e IS NULL THEN 0 ELSE sign END; SUM(e) -> sign * e; MIN/MAX(e) -> e of
    inserted rows only (deleted extremes are handled by the recompute); lost -> 1 for a deleted row."""
    cols = [(sign, "_src_count")]
    for a in view.arguments:
        cols.append((f"CASE WHEN ({a.sql}) IS NULL THEN 0 ELSE {sign} END", f"_src_cnt_{a.index}"))
        if view.stored_of("sum", a.index):
            cols.append((f"{sign} * ({a.sql})", f"_src_sum_{a.index}"))
        for kind in ("min", "max"):
            if view.stored_of(kind, a.index):
                cols.append((f"CASE WHEN {sign} > 0 THEN ({a.sql}) END", f"_src_{kind}_{a.index}"))
    cols.append((f"CASE WHEN {sign} < 0 THEN 1 ELSE 0 END", "_src_lost"))
    return cols


def prepare_changes(view: View, changed: frozenset[str], preaggregate: bool = False) -> str:
    """prepare-insertions UNION ALL prepare-deletions, with the aggregate sources of Table 2
    (_sources). With `preaggregate` and preaggregation(view), the fact-change term aggregates the
    signed fact rows by the fact columns the view needs before joining the dimensions (4.1.3)."""
    selects = []
    for term, signer in _source_terms(view, changed):
        sign = f"{q(signer)}.{q(SIGN)}"
        cols = [f"{k.sql} AS {q(k.name)}" for k in view.keys]
        if preaggregate and signer == view.fact and preaggregation(view):
            term = {**term, view.fact: _preaggregated_fact(view)}
            cols += [f"{q(view.fact)}.{q(name)} AS {q(name)}" for _, name in _sources(view, sign)]
        else:
            cols += [f"{expr} AS {q(name)}" for expr, name in _sources(view, sign)]
        where = f"\nWHERE {view.where}" if view.where else ""
        selects.append(f"SELECT {', '.join(cols)}\nFROM {_join_clause(view, term)}{where}")
    return "\nUNION ALL\n".join(selects)


# ------------------------------------------------------------------ pre-aggregation (4.1.3)


def _columns_of(sql: str) -> set[tuple[str, str]]:
    return {(c.table.lower(), c.name) for c in sqlglot.parse_one(sql).find_all(sqlglot.exp.Column)}


def preaggregation(view: View) -> tuple[str, ...]:
    """The fact columns to pre-aggregate the fact changes by before the dimension joins (4.1.3,
    Figure 7), or () when it does not apply: the view joins no dimension, or an aggregate argument
    uses a dimension's column. They are the fact columns the rest of the view reads: group-by
    columns, foreign keys of the joins and columns of the WHERE filter."""
    fact = view.fact.lower()
    if not view.dimensions or any(t != fact for a in view.arguments for t, _ in _columns_of(a.sql)):
        return ()
    cols = [c for k in view.keys for t, c in _columns_of(k.sql) if t == fact]
    cols += [c for j in view.joins if j.child.lower() == fact for c in j.child_columns]
    cols += sorted(c for t, c in _columns_of(view.where) if t == fact) if view.where else []
    return tuple(dict.fromkeys(cols))  # never empty: a dimension joins through a fact foreign key


def _preaggregated_fact(view: View) -> str:
    """Figure 7's prepare-changes: the signed fact changes grouped by preaggregation(view), with the
    aggregate sources summed (MIN/MAX and lost composed); the summary-delta then adds them up."""
    f = q(view.fact)
    by = [f"{f}.{q(c)}" for c in preaggregation(view)]
    def combine(name: str) -> str:
        if name.startswith("_src_min_"):
            return "MIN"
        return "MAX" if name.startswith("_src_max_") or name == "_src_lost" else "SUM"

    aggs = [f"{combine(name)}({expr}) AS {q(name)}" for expr, name in _sources(view, f"{f}.{q(SIGN)}")]
    return (f"(SELECT {', '.join(by + aggs)} FROM {_signed(view.fact)} AS {f} GROUP BY {', '.join(by)})")


# ------------------------------------------------------------------ summary-delta (4.1.2)


def _agg_of(s: StoredAggregate) -> str:
    if s.kind == "count_star":
        return f"SUM({q('_src_count')})"
    if s.kind == "holistic":
        return "NULL"  # every changed group's value is recomputed (holistic_values)
    src = q(f"_src_{'cnt' if s.kind == 'count' else s.kind}_{s.arg}")
    return {"count": f"SUM({src})", "sum": f"SUM({src})", "min": f"MIN({src})", "max": f"MAX({src})"}[s.kind]


def summary_delta(view: View, changed: frozenset[str], preaggregate: bool = False) -> str:
    """sd_<view>: the prepare-changes rows aggregated by the view's group-by columns, typed like the
    summary table, plus _ns_lost = 1 for groups that lost rows (their MIN/MAX must be recomputed)."""
    keys = ", ".join(q(k.name) for k in view.keys)
    cols = [f"CAST({q(k.name)} AS {k.type}) AS {q(k.name)}" for k in view.keys]
    for s in view.stored:
        cols.append(f"CAST({_agg_of(s)} AS {s.type}) AS {q(s.column)}")
    cols.append(f"CAST(MAX({q('_src_lost')}) AS INT) AS {q(LOST)}")
    group = f"\nGROUP BY {keys}" if view.keys else "\nHAVING COUNT(*) > 0"  # a grand total: no row when nothing changed
    return f"SELECT {', '.join(cols)}\nFROM (\n{prepare_changes(view, changed, preaggregate)}\n) AS {q('pc')}{group}"


def materialize(view: View, state: str = "old") -> str:
    """The summary table from the base tables alone: the summary-delta of inserting every base row.
    state "old": the base as the lake holds it (materialize); "new": the base after the night's batch
    (__ns_new_<t>: a night that recomputes the view instead of propagating its changes)."""
    keys = ", ".join(q(k.name) for k in view.keys)
    src = {view.fact: _unsigned(rel(state, view.fact))}
    src.update({d: rel(state, d) for d in view.dimensions})
    cols = [f"CAST({k.sql} AS {k.type}) AS {q(k.name)}" for k in view.keys]
    for s in view.stored:
        cols.append(f"{base_aggregate(view, s)} AS {q(s.column)}")
    where = f"\nWHERE {view.where}" if view.where else ""
    group = f"\nGROUP BY {', '.join(k.sql for k in view.keys)}" if keys else "\nHAVING COUNT(*) > 0"
    return f"SELECT {', '.join(cols)}\nFROM {_join_clause(view, src)}{where}{group}"


def base_aggregate(view: View, s: StoredAggregate) -> str:
    """A stored aggregate computed from base rows (materialize; validation's sampled recompute)."""
    if s.kind == "count_star":
        return f"CAST(COUNT(*) AS {s.type})"
    if s.kind == "holistic":
        return f"CAST(NULL AS {s.type})"  # filled in by with_holistic(holistic_values(...))
    arg = next(a for a in view.arguments if a.index == s.arg)
    func = {"count": "COUNT", "sum": "SUM", "min": "MIN", "max": "MAX"}[s.kind]
    return f"CAST({func}({arg.sql}) AS {s.type})"


# ------------------------------------------------------------------ MIN/MAX recompute (Figure 8)


def minmax_recompute(view: View, arg: Argument, changed: frozenset[str], within: str = "",
                     lost: str | None = None, old_counts: str | None = None) -> str:
    """Exact MIN and MAX of `arg` after the batch, for the groups in __ns_lost_<view> only.

    F'⋈D' = F⋈D' - del⋈D' + ins⋈D' as bags: per (group, value) the net multiplicity is summed
    over old rows (+1), deleted rows (-1) and inserted rows (+1); values with a positive net count
    survive. This runs in propagate, outside the window, so refresh never scans base data.

    within: a condition on `arg` (extremes_within): only the rows whose value meets it, in every term, so
    a group's MIN (MAX) is exact wherever the condition holds for every value below (above) it. lost: the
    relation of the groups to compute, when not __ns_lost_<view>. old_counts: the relation of the base rows'
    term already counted (the keys, `_v` and `_n`: how many rows before the batch hold that value in that group,
    for the groups to compute and the values meeting `within` only; fact_columns), read instead of the base.
    """
    lost = lost or rel("lost", view.name)
    new_dims = {d: rel("new", d) for d in view.dimensions}
    old_rows = {view.fact: _unsigned(rel("old", view.fact)), **new_dims}
    terms = [old_rows]
    if view.fact in changed:
        terms.append({view.fact: _signed(view.fact), **new_dims})
    on = " AND ".join(f"CAST({k.sql} AS {k.type}) IS NOT DISTINCT FROM {q('l')}.{q(k.name)}" for k in view.keys)
    selects = []
    if old_counts is not None:
        terms = terms[1:]
        key_names = "".join(f"CAST({q(k.name)} AS {k.type}) AS {q(k.name)}, " for k in view.keys)
        selects.append(f"SELECT {key_names}CAST({q('_v')} AS {arg.type}) AS {q('_v')}, {q('_n')} FROM {old_counts}")
    for term in terms:
        where = f" AND ({view.where})" if view.where else ""
        keys = ", ".join(f"CAST({k.sql} AS {k.type}) AS {q(k.name)}" for k in view.keys)
        join_lost = f"\n  JOIN {lost} AS {q('l')} ON {on}" if view.keys else f"\n  CROSS JOIN {lost} AS {q('l')}"
        selects.append(
            f"SELECT {keys + ', ' if keys else ''}({arg.sql}) AS {q('_v')}, {q(view.fact)}.{q(SIGN)} AS {q('_n')}\n"
            f"FROM {_join_clause(view, term)}{join_lost}\nWHERE ({arg.sql}) IS NOT NULL{where}"
            + (f" AND ({within})" if within else "")
        )
    key_list = ", ".join(q(k.name) for k in view.keys)
    inner_group = f"{key_list}, {q('_v')}" if key_list else q("_v")
    outer = [f"CAST(MIN({q('_v')}) AS {arg.type}) AS {q(f'_x_min_{arg.index}')}",
             f"CAST(MAX({q('_v')}) AS {arg.type}) AS {q(f'_x_max_{arg.index}')}"]
    group = f"\nGROUP BY {key_list}" if key_list else ""
    return (
        f"SELECT {key_list + ', ' if key_list else ''}{', '.join(outer)}\nFROM (\n"
        f"SELECT {inner_group}, SUM({q('_n')}) AS {q('_n')} FROM (\n" + "\nUNION ALL\n".join(selects)
        + f"\n) AS {q('r')}\nGROUP BY {inner_group}\nHAVING SUM({q('_n')}) > 0\n) AS {q('s')}{group}"
    )


def deleted_per_group(view: View, args: tuple[Argument, ...]) -> str:
    """Per group of the view's deleted rows (the fact's deleted rows joined to the dimensions after the batch):
    the smallest and largest deleted value of each argument, as _d_min_<i> and _d_max_<i>."""
    src = {view.fact: rel("del", view.fact), **{d: rel("new", d) for d in view.dimensions}}
    dcols = [f"CAST({k.sql} AS {k.type}) AS {q(k.name)}" for k in view.keys]
    dcols += [f"MIN({a.sql}) AS {q(f'_d_min_{a.index}')}, MAX({a.sql}) AS {q(f'_d_max_{a.index}')}" for a in args]
    where = f"\nWHERE {view.where}" if view.where else ""
    group = f"\nGROUP BY {', '.join(k.sql for k in view.keys)}" if view.keys else ""
    return f"SELECT {', '.join(dcols)}\nFROM {_join_clause(view, src)}{where}{group}"


def deleted_extremes(view: View, arg: Argument) -> str:
    """One row: among the groups in __ns_lost_<view>, the largest of each group's smallest deleted value of
    `arg` (lo) and the smallest of each group's largest (hi), as text; NULL when no deleted fact row reaches
    those groups. A group that lost its MIN lost it at its smallest deleted value (its MAX at its largest):
    its new extreme most likely lies near there (extremes_within)."""
    d = q("d")
    return (f"SELECT CAST(MAX({d}.{q(f'_d_min_{arg.index}')}) AS VARCHAR) AS {q('lo')}, "
            f"CAST(MIN({d}.{q(f'_d_max_{arg.index}')}) AS VARCHAR) AS {q('hi')}\n"
            f"FROM (\n{deleted_per_group(view, (arg,))}\n) AS {d}\n"
            f"JOIN {rel('lost', view.name)} AS {q('l')} ON {same_keys(view, d, q('l'))}")


class Window(NamedTuple):
    """extremes_within's first pass: its condition on the argument (`cond`, SQL), the test that a group's extremes
    from it are exact (`exact`, SQL over its _x_min_<i> and _x_max_<i>), the same bounds as values (the pass reads
    the values below `upto` and those from `since` on; None: no such side) and the months it reads (`months`)."""

    cond: str
    exact: str
    upto: dt.date | dt.datetime | None
    since: dt.date | dt.datetime | None
    months: tuple[str, ...]


def extremes_within(view: View, arg: Argument, lo: str | None, hi: str | None,
                    months: list[str]) -> Window | None:
    """For a DATE or TIMESTAMP argument whose lost extremes lie in months (deleted_extremes' lo and hi as
    text): the condition of minmax_recompute's first pass, the values up to the end of lo's month (for a
    stored MIN) or from the start of hi's month (for a stored MAX), and the test that a group's extremes
    from that pass are exact (its MIN before the end of lo's month, its MAX from the start of hi's). With
    the base laid out by the months of `arg` (`months`: those it holds, 'YYYY-MM') the pass reads only those
    months. None: no such bound, or one that leaves none of the base's months out."""
    has_min, has_max = bool(view.stored_of("min", arg.index)), bool(view.stored_of("max", arg.index))
    kind = {"DATE": dt.date, "TIMESTAMP": dt.datetime}.get(arg.type.upper())
    if kind is None:
        return None

    def month(text: str | None, after: bool) -> dt.date | dt.datetime | None:
        try:
            year, mon = int(text[:4]), int(text[5:7])
        except (TypeError, ValueError):
            return None
        if after:
            year, mon = (year + 1, 1) if mon == 12 else (year, mon + 1)
        return None if year > 9999 else kind(year, mon, 1)
    upto = month(lo, True) if has_min else None
    since = month(hi, False) if has_max else None
    if (has_min and upto is None) or (has_max and since is None):
        return None
    left_out = [m for m in months if (not has_min or m > lo[:7]) and (not has_max or m < hi[:7])]
    if not left_out:  # the first pass would read every month: one pass over them all instead
        return None
    cond = " OR ".join(c for c in (upto and f"({arg.sql}) < {literal(upto)}",
                                   since and f"({arg.sql}) >= {literal(since)}") if c)
    exact = " AND ".join(c for c in (upto and f"{q(f'_x_min_{arg.index}')} < {literal(upto)}",
                                     since and f"{q(f'_x_max_{arg.index}')} >= {literal(since)}") if c)
    return Window(cond, exact, upto, since, tuple(m for m in months if m not in left_out))


def fact_columns(view: View, arg: Argument) -> tuple[list[str], str] | None:
    """The fact table's columns that are the view's group keys and `arg`, when the view reads its fact table alone
    (no dimension, no WHERE) and each key and the argument is one of its columns as it stands: then the base's
    term of minmax_recompute is a count per (keys, value) of the fact's rows, which a caller may make without a
    query (old_counts). None otherwise."""
    if view.dimensions or view.where:
        return None

    def column(sql: str) -> str | None:
        tree = sqlglot.parse_one(sql)
        return tree.name if isinstance(tree, sqlglot.exp.Column) and tree.table == view.fact else None
    keys = [column(k.sql) for k in view.keys]
    value = column(arg.sql)
    if value is None or any(k is None for k in keys):
        return None
    return keys, value


def resolved_groups(first: str, exact: str) -> str:
    """The rows of the first pass (relation `first`) whose extremes it made exact."""
    return f"SELECT * FROM {first} WHERE {exact}"


def unresolved_groups(view: View, first: str, exact: str) -> str:
    """The groups of __ns_lost_<view> whose extremes the first pass (relation `first`) did not make exact."""
    cond = same_keys(view, q("l"), q("f"))
    return (f"SELECT {q('l')}.* FROM {rel('lost', view.name)} AS {q('l')}\nWHERE NOT EXISTS (SELECT 1 FROM {first} "
            f"AS {q('f')} WHERE {cond} AND {exact})")


def lost_groups(view: View, weakly_minimal: bool = False, old: str | None = None) -> str:
    """The groups of sd_<view> whose MIN/MAX must be recomputed exactly (__ns_lost_<view>).

    Every group that lost rows, or, when the changes to the view's join are weakly minimal (4.3:
    the deleted rows are a sub-bag of the rows before the batch, and no row is inserted and deleted
    in the same batch), only those where a deleted value undercuts the delta's MIN (or exceeds its
    MAX) of the inserted values. Otherwise the refresh's LEAST(t.m, δt.m) is exact: either every
    deleted value exceeds t.m, so t.m survives, or the smallest deleted one is t.m and the inserted
    minimum is at most that, so it is the new minimum. The paper's test δt.m = t.m needs t.m, which
    propagate never reads; this one needs only the changes.

    old: the relation of the view's stored rows before the batch (its lake copy), for 000 5's C_i: a
    group is recomputed only when a deleted value reaches its old extreme t.m and no inserted value
    re-establishes it (δt.m beyond t.m, or none); a group without an old extreme is recomputed."""
    keys = ", ".join(q(k.name) for k in view.keys) or "1 AS _one"
    sd = rel("sd", view.name)
    if not weakly_minimal:
        return f"SELECT DISTINCT {keys}, 1 AS {q('_ns_l')} FROM {sd} WHERE {q(LOST)} = 1"
    deleted = deleted_per_group(view, minmax_arguments(view))
    tests = []
    for s in view.stored:
        if s.kind in ("min", "max"):
            d, c, cmp = q(f"_d_{s.kind}_{s.arg}"), f"{q('sd')}.{q(s.column)}", "<" if s.kind == "min" else ">"
            if old is None:
                tests.append(f"({q('dl')}.{d} IS NOT NULL AND ({c} IS NULL OR {q('dl')}.{d} {cmp} {c}))")
            else:
                t = f"{q('t')}.{q(s.column)}"
                reaches, beyond = ("<=", ">") if s.kind == "min" else (">=", "<")
                tests.append(f"({q('dl')}.{d} IS NOT NULL AND ({t} IS NULL OR ({q('dl')}.{d} {reaches} {t} "
                             f"AND ({c} IS NULL OR {c} {beyond} {t}))))")
    on = same_keys(view, q("sd"), q("dl"))
    picked = ", ".join(f"{q('sd')}.{q(k.name)}" for k in view.keys) or "1 AS _one"
    extreme = ""
    if old is not None:
        extreme = f"\nLEFT JOIN {old} AS {q('t')} ON {same_keys(view, q('sd'), q('t'))}"
    return (
        f"SELECT DISTINCT {picked}, 1 AS {q('_ns_l')}\nFROM {sd} AS {q('sd')}\nJOIN (\n{deleted}\n) AS {q('dl')} ON {on}"
        f"{extreme}\nWHERE {q('sd')}.{q(LOST)} = 1 AND ({' OR '.join(tests) or 'FALSE'})"
    )


def minmax_arguments(view: View) -> tuple[Argument, ...]:
    return tuple(a for a in view.arguments if view.stored_of("min", a.index) or view.stored_of("max", a.index))


def with_exact_minmax(view: View) -> str:
    """Replace the MIN/MAX of the groups in __ns_lost_<view> by their recomputed exact values (one
    __ns_exact_<view>_<i> relation per MIN/MAX argument i); _ns_lost = 1 marks exactly those groups."""
    sd, recompute = q("sd"), f"{q('l')}.{q('_ns_l')} = 1"
    cols = [f"{sd}.{q(k.name)}" for k in view.keys]
    for s in view.stored:
        if s.kind in ("min", "max"):
            x = q(f"x{s.arg}")
            cols.append(
                f"CASE WHEN {recompute} THEN {x}.{q(f'_x_{s.kind}_{s.arg}')} ELSE {sd}.{q(s.column)} END AS {q(s.column)}"
            )
        else:
            cols.append(f"{sd}.{q(s.column)}")
    cols.append(f"CASE WHEN {recompute} THEN 1 ELSE 0 END AS {q(LOST)}")
    joins = [f"LEFT JOIN {rel('lost', view.name)} AS {q('l')} ON {same_keys(view, sd, q('l'))}"]
    for a in minmax_arguments(view):
        x = q(f"x{a.index}")
        joins.append(f"LEFT JOIN {rel('exact', f'{view.name}_{a.index}')} AS {x} ON {same_keys(view, sd, x)}")
    return f"SELECT {', '.join(cols)}\nFROM {rel('sd', view.name)} AS {sd}\n" + "\n".join(joins)


# ------------------------------------------------------------------ holistic aggregates (paper 002)

WEIGHT = "ns_m"  # an auxiliary view's multiplicity column (lattice/passes/auxiliary.py)


def holistic_values(view: View, rows: str, changed: str | None = None,
                    dimension: Callable[[str], str] = lambda d: rel("new", d)) -> str:
    """Every holistic stored aggregate of `view` (kept over an auxiliary view: each row of the fact relation
    `rows`, aliased with the fact's name, holds values with their multiplicity ns_m), per group of those
    rows joined to the view's dimensions (dimension(table): its relation, after the batch by default)
    under the view's filter — only the groups of the relation `changed` (a summary-delta: its keys by
    name) when given. One part per argument, each over the rows where it is not NULL; several parts are
    joined onto every group of the rows (a group without values of an argument gets NULL there).

    The values of a group sorted, each row covering the positions _c - m + 1 .. _c of the expanded
    sequence of _n values: PERCENTILE_CONT(p) interpolates between the values at the 0-based positions
    FLOOR and CEIL of p * (_n - 1) (as Spark, DuckDB and PostgreSQL do); PERCENTILE_DISC(p) is the value
    at the 1-based position GREATEST(1, CEIL(p * _n)); MODE is the smallest of the most frequent values;
    COUNT/SUM/AVG(DISTINCT e) the aggregate of the distinct values (multiplicities do not matter)."""
    hol = [s for s in view.stored if s.kind == "holistic"]
    keys = [q(k.name) for k in view.keys]
    source = {view.fact: rows, **{d: dimension(d) for d in view.dimensions}}
    join = ""
    if changed is not None and view.keys:
        on = " AND ".join(f"CAST({k.sql} AS {k.type}) IS NOT DISTINCT FROM {q('g')}.{q(k.name)}" for k in view.keys)
        join = f"\n  JOIN (SELECT DISTINCT {', '.join(keys)} FROM {changed}) AS {q('g')} ON {on}"
    where = f" AND ({view.where})" if view.where else ""
    group = f"\nGROUP BY {', '.join(keys)}" if keys else ""
    parts = []
    for index in dict.fromkeys(s.arg for s in hol):
        a = next(a for a in view.arguments if a.index == index)
        cols = [f"CAST({k.sql} AS {k.type}) AS {q(k.name)}" for k in view.keys]
        cols += [f"({a.sql}) AS {q('_v')}", f"{q(view.fact)}.{q(WEIGHT)} AS {q('_w')}"]
        vals = f"SELECT {', '.join(cols)}\nFROM {_join_clause(view, source)}{join}\nWHERE ({a.sql}) IS NOT NULL{where}"
        parts += _holistic_parts(view, [s for s in hol if s.arg == index], vals, keys, group)
    if len(parts) == 1:
        return parts[0][0]
    driver = f"SELECT DISTINCT {', '.join(f'CAST({k.sql} AS {k.type}) AS {q(k.name)}' for k in view.keys) or '1 AS _one'}" \
             f"\nFROM {_join_clause(view, source)}{join}" + (f"\nWHERE {view.where}" if view.where else "")
    picked = [f"{q('d')}.{k}" for k in keys]
    joins = []
    for i, (part, columns) in enumerate(parts):
        alias = q(f"p{i}")
        picked += [f"{alias}.{q(c)}" for c in columns]
        joins.append(f"LEFT JOIN (\n{part}\n) AS {alias} ON {same_keys(view, q('d'), alias)}")
    return f"SELECT {', '.join(picked)}\nFROM (\n{driver}\n) AS {q('d')}\n" + "\n".join(joins)


def _holistic_parts(view: View, hol: list[StoredAggregate], vals: str, keys: list[str], group: str
                    ) -> list[tuple[str, list[str]]]:
    """One argument's holistic aggregates over its values `vals` (_v, weight _w): the sorted-position and
    DISTINCT ones in one query, the user-defined ones over the values repeated m times in another."""
    part = f"PARTITION BY {', '.join(keys)}" if keys else ""
    v, w, c, n, x = (q(name) for name in ("_v", "_w", "_c", "_n", "_x"))
    ranked = (f"SELECT *, SUM({w}) OVER ({part} ORDER BY {v} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS {c}, "
              f"SUM({w}) OVER ({part}) AS {n}, MAX({w}) OVER ({part}) AS {x}\nFROM (\n{vals}\n) AS {q('r')}")

    def at(position: str) -> str:  # the value at a 0-based position of the expanded sequence
        return f"MIN(CASE WHEN {c} - {w} <= {position} AND {position} < {c} THEN {v} END)"

    picks, finals, positional = [], [], False
    for s in (s for s in hol if not s.func.startswith("uda ")):
        name, _, fraction = s.func.partition(" ")
        p, col = f"CAST({fraction} AS DOUBLE)", q(s.column)  # in DOUBLE, as the engines compute positions
        positional = positional or name != "distinct"
        if name == "percentile_cont":
            pos = f"({p} * ({n} - 1))"
            picks += [f"{at(f'FLOOR({pos})')} AS {q(s.column + '_lo')}", f"{at(f'CEIL({pos})')} AS {q(s.column + '_hi')}",
                      f"MAX({pos}) AS {q(s.column + '_pos')}"]
            lo, hi, at_pos = (q(s.column + suffix) for suffix in ("_lo", "_hi", "_pos"))
            if s.type.startswith("DECIMAL"):  # the warehouse's (DuckDB's) DECIMAL interpolation
                finals.append(f"CASE WHEN FLOOR({at_pos}) = CEIL({at_pos}) THEN CAST({lo} AS {s.type}) ELSE "
                              f"{duckdb_decimal_interpolation(lo, hi, at_pos, s.type)} END AS {col}")
                continue
            finals.append(f"CAST(CASE WHEN FLOOR({at_pos}) = CEIL({at_pos}) THEN CAST({lo} AS DOUBLE) ELSE "
                          f"(CEIL({at_pos}) - {at_pos}) * CAST({lo} AS DOUBLE) + ({at_pos} - FLOOR({at_pos})) * "
                          f"CAST({hi} AS DOUBLE) END AS {s.type}) AS {col}")
            continue
        if name == "percentile_disc":
            picks.append(f"{at(f'(GREATEST(1, CEIL({p} * {n})) - 1)')} AS {col}")
        elif name == "distinct" and fraction == "avg":  # exact sum, one division (as AVG of a DECIMAL in any engine)
            picks.append(f"CAST(SUM(DISTINCT {v}) AS DOUBLE) / COUNT(DISTINCT {v}) AS {col}")
        elif name == "distinct":  # fraction: count | sum
            picks.append(f"{fraction.upper()}(DISTINCT {v}) AS {col}")
        else:  # mode
            picks.append(f"MIN(CASE WHEN {w} = {x} THEN {v} END) AS {col}")
        finals.append(f"CAST({col} AS {s.type}) AS {col}")
    parts = []
    if picks:
        over = ranked if positional else vals
        parts.append((f"SELECT {', '.join(keys + finals)}\nFROM (\nSELECT {', '.join(keys + picks)}\nFROM (\n{over}\n) AS "
                      f"{q('s')}{group}\n) AS {q('b')}", [s.column for s in hol if not s.func.startswith("uda ")]))
    udas = [s for s in hol if s.func.startswith("uda ")]
    if udas:  # each value repeated m times, numbered 1..n in ascending order, the user's SQL over (x, i, n)
        i = q("_i")
        numbered = (f"SELECT {', '.join(keys + [v])}, ROW_NUMBER() OVER ({part} ORDER BY {v}) AS {i}, "
                    f"COUNT(*) OVER ({part}) AS {n}\nFROM (\nSELECT {q('r')}.* FROM (\n{vals}\n) AS {q('r')}\n"
                    f"CROSS JOIN UNNEST(GENERATE_SERIES(1, {q('r')}.{w})) AS {q('_ns_k')}({q('k')})\n) AS {q('x')}")
        cols = [f"CAST({user_aggregate_sql(s.definition, v, i, n)} AS {s.type}) AS {q(s.column)}" for s in udas]
        parts.append((f"SELECT {', '.join(keys + cols)}\nFROM (\n{numbered}\n) AS {q('u')}{group}",
                      [s.column for s in udas]))
    return parts


def user_aggregate_sql(definition: str, x: str, i: str, n: str) -> str:
    """A user-defined aggregate's SQL (over the columns x, i, n) over the given column expressions."""
    columns = {"x": x, "i": i, "n": n}

    def swap(node):
        if isinstance(node, sqlglot.exp.Column) and not node.table and node.name.lower() in columns:
            return sqlglot.parse_one(columns[node.name.lower()])
        return node

    return sqlglot.parse_one(definition).transform(swap).sql()


def with_holistic(view: View, sd: str, values: str) -> str:
    """`sd` (a summary-delta, or the view's rows) with its holistic columns taken from `values`
    (holistic_values): a group without values (every one deleted or NULL) gets NULL (COUNT(DISTINCT): 0)."""
    cols = [f"{q('sd')}.{q(k.name)}" for k in view.keys]
    for s in view.stored:
        col = f"{q('h' if s.kind == 'holistic' else 'sd')}.{q(s.column)}"
        cols.append(f"COALESCE({col}, 0) AS {q(s.column)}" if s.func == DISTINCT_COUNT else col)
    cols.append(f"{q('sd')}.{q(LOST)}")
    return (f"SELECT {', '.join(cols)}\nFROM {sd} AS {q('sd')}\n"
            f"LEFT JOIN {values} AS {q('h')} ON {same_keys(view, q('sd'), q('h'))}")


# ------------------------------------------------------------------ the oracle


def recompute(view: View) -> str:
    """The view's own SELECT, as the user wrote it: the recompute oracle runs it over the base tables."""
    return view.sql


# ------------------------------------------------------------------ the D-lattice (Section 5)


def node_view(node) -> View:
    """A lattice point as a View, so the change-set SQL above computes its summary-delta (an
    augmented point keeps its hidden group-by columns, e.g. sCD_sales(city, date, +region))."""
    return View(name=node.name, file="", sql="", fact=node.fact, tables=node.tables, joins=node.joins,
                where=node.where, keys=node.keys, arguments=node.arguments, stored=node.stored)


def with_columns(sql: str, source: Callable[[str, str], str]) -> str:
    """`sql` with every column reference table.column replaced by source(table, column) (both lower
    case): an expression over the view's tables moved onto the rows of a lattice edge's upper point
    and the dimensions the edge joins."""
    def swap(node):
        if not isinstance(node, sqlglot.exp.Column):
            return node
        return sqlglot.parse_one(source(node.table.lower(), node.name.lower()))

    return sqlglot.parse_one(sql).transform(swap).sql()


def composed(a, column: Callable[[str], str], over: Callable[[str], str]) -> str:
    """One stored aggregate of the lower point composed from the upper point's rows along an edge
    (5.1, Appendix B): COUNT/SUM add up and MIN/MAX compose over the upper column; an attribute e of
    the upper rows weighs by their COUNT(*) Y (SUM(e*Y), COUNT(e) as SUM of Y where e is not NULL);
    MIN/MAX of such an attribute take the upper groups with Y > 0 (in a summary-delta: the groups that
    gained rows; in a summary table every group has Y >= 1). column(name): the upper relation's column;
    over(sql): an expression over the view's tables rewritten onto the upper rows and the edge's joins."""
    y = column(a.weight) if a.weight else None
    if a.rule in ("sum", "min", "max"):
        return f"{a.rule.upper()}({column(a.source)})"
    if a.rule == "holistic":
        return "NULL"  # recomputed for every changed group (holistic_values)
    if a.rule == "sum_weighted":
        return f"SUM(({over(a.source)}) * {y})"
    if a.rule == "count_weighted":
        return f"SUM(CASE WHEN ({over(a.source)}) IS NULL THEN 0 ELSE {y} END)"
    return f"{a.rule[:3].upper()}(CASE WHEN {y} > 0 THEN ({over(a.source)}) END)"  # min_over_keys / max_over_keys


def derived_summary_delta(edge: Edge, lower: LatticeNode, upper_relation: str, schema: Schema) -> str:
    """sd_<lower> from sd_<upper> along a derives edge (5.1, Appendix B): one GROUP BY over the
    upper summary-delta's rows joined with the edge's dimensions (their state after the batch; an
    edge is only chosen when they did not change). A group lost rows when one of its upper groups did
    (its MIN/MAX is then recomputed exactly, as from the change set)."""
    u = q(edge.upper)
    sql = edge_query(edge, lower.keys, lower.stored, f"{upper_relation} AS {u}", lambda c: f"{u}.{q(c)}",
                     lambda j: rel("new", j.table), schema, lost=True)
    return sql if lower.keys else f"{sql}\nHAVING COUNT(*) > 0"  # a grand total: no row when nothing changed


def edge_query(edge: Edge, keys, stored, upper_from: str, upper_column: Callable[[str], str],
               dimension: Callable[[JoinStep], str], schema: Schema, lost: bool = False,
               null_safe_equal: Callable[[str, str, str], str] | None = None, comma_joins: bool = False) -> str:
    """The lower point's rows computed from the upper point's rows along a derives edge (5.1, App. B):
    one GROUP BY over the upper rows joined with the edge's dimensions; counts and sums add up, MIN/MAX
    compose, an attribute e of the upper rows weighs by their COUNT(*) Y (SUM(e*Y)). The one builder
    of that query: propagate runs it over summary-deltas (derived_summary_delta), validation over
    summary tables (the rollup checks, with comma joins and a hashable null-safe equality).

    upper_from: the upper relation with its alias; upper_column(c): its column c; dimension(j): the
    relation a join step reads; lost: carry _ns_lost (summary-deltas); null_safe_equal(a, b, type):
    how a dependency join compares (default IS NOT DISTINCT FROM)."""
    same = null_safe_equal or (lambda a, b, _t: f"{a} IS NOT DISTINCT FROM {b}")
    at = {(a.ref.table.lower(), a.ref.column.lower()): a for a in edge.attributes}
    for j in edge.joins:  # join conditions may read dimension columns (snowflake) or the upper's keys
        for s in j.on:
            at.setdefault((s.ref.table.lower(), s.ref.column.lower()), s)

    def source(a) -> str:
        return upper_column(a.column) if a.relation == edge.upper else f"{q(a.relation)}.{q(a.column)}"

    def over_upper(sql: str) -> str:
        def pick(table: str, column: str) -> str:
            if (table, column) not in at:
                raise ValueError(f"edge {edge.upper} -> {edge.lower}: no source for {table}.{column}")
            return source(at[(table, column)])

        return with_columns(sql, pick)

    def key(k) -> str:  # a computed key the upper groups by too is read, not recomputed
        a = at.get((k.ref.table.lower(), k.ref.column.lower()))
        return upper_column(a.column) if a is not None and a.relation == edge.upper else over_upper(k.sql)

    exprs = [key(k) for k in keys]
    cols = [f"CAST({e} AS {k.type}) AS {q(k.name)}" for e, k in zip(exprs, keys)]
    rule = {a.column: a for a in edge.aggregates}
    for s in stored:
        cols.append(f"CAST({composed(rule[s.column], upper_column, over_upper)} AS {s.type}) AS {q(s.column)}")
    if lost:
        cols.append(f"CAST(MAX({upper_column(LOST)}) AS INT) AS {q(LOST)}")
    parts, conds = [upper_from], []
    for j in edge.joins:
        dim = dimension(j)
        if j.via == "key":
            on = [f"{q(j.table)}.{q(k)} = {source(s)}" for s, k in zip(j.on, j.key)]
        else:  # a declared dependency key -> columns: one row per key value, compared null-safely
            picked = ", ".join(q(c) for c in dict.fromkeys((*j.key, *j.columns)))
            dim = f"(SELECT DISTINCT {picked} FROM {dim})"
            table = schema.table(j.table)
            on = [same(f"{q(j.table)}.{q(k)}", source(s), table.column(k).type) for s, k in zip(j.on, j.key)]
        if comma_joins:
            parts.append(f"{dim} AS {q(j.table)}")
            conds += on
        else:
            parts.append(f"JOIN {dim} AS {q(j.table)} ON {' AND '.join(on)}")
    conds += [f"({over_upper(edge.where)})"] if edge.where else []
    where = f"\nWHERE {' AND '.join(conds)}" if conds else ""
    group = f"\nGROUP BY {', '.join(exprs)}" if exprs else ""
    return f"SELECT {', '.join(cols)}\nFROM {(', ' if comma_joins else ' ').join(parts)}{where}{group}"


def change_distincts(fact: str, joins, combos: list[tuple[tuple[str, str], ...]]) -> str:
    """One cheap pass for the cost model (5.5): approximate distinct counts of each attribute
    combination among the batch's changed fact rows joined with the dimensions (after the batch),
    i.e. about how many rows the summary-delta grouping by it will have (Appendix A, Table 3)."""
    dims = list(dict.fromkeys(j.parent for j in joins))
    view = View(name=f"_ns_stats_{fact}", file="", sql="", fact=fact, tables=(fact, *dims), joins=tuple(joins),
                where=None, keys=())
    source = {fact: _signed(fact), **{d: rel("new", d) for d in dims}}
    attrs = list(dict.fromkeys(a for combo in combos for a in combo))  # each as a plain alias _a<i>: sqlglot
    alias = {a: f"_a{i}" for i, a in enumerate(attrs)}  # reads STRUCT("odd"."name") as a type otherwise
    inner = ", ".join(f"{ColumnRef(t, c).sql} AS {alias[(t, c)]}" for t, c in attrs)
    cols = [f"APPROX_DISTINCT(STRUCT({', '.join(alias[a] for a in combo)})) AS {q(f'c{i}')}"
            for i, combo in enumerate(combos)]
    return f"SELECT {', '.join(cols)}\nFROM (SELECT {inner}\nFROM {_join_clause(view, source)}) AS {q('changes')}"


# ------------------------------------------------------------------ recompute mode (DESIGN.md)


def recompute_sql(view: View, plan, state: str = "new") -> str:
    """A view kept by recompute, evaluated over the base at `state` ("new": after the night's batch,
    "old": the base as the lake holds it): its own SQL with every declared table read from
    __ns_<state>_<t> and every summary view it reads inlined as a common table expression (their
    own SQL, over the same state, innermost first), its columns named as the view declares them
    (`CREATE VIEW mv (x) AS SELECT …` is read as mv(x), whatever its SELECT calls them)."""
    inner = []
    for name in _reads_closure(view, plan):
        v = plan.view(name)
        columns = ", ".join(q(o.name) for o in v.outputs)
        inner.append(f"{q(v.name)}({columns}) AS ({_over_state(v.sql, plan, state)})")
    body = _over_state(view.sql, plan, state)
    return f"WITH {', '.join(inner)}\nSELECT * FROM ({body}) AS {q('_ns_view')}" if inner else body


def recompute_reads(view: View, plan) -> dict[str, int]:
    """How many times recomputing `view` tonight names each base table (at state k, __ns_new_<t>): its
    recompute_sql's table references (a self-join's table twice; a summary view it reads by that view's
    own references, inlined), or, for an incremental view recomputed instead of propagated, its fact and
    dimensions once (materialize) and once more for its holistic values. Summary views and auxiliary views
    are not counted (their relations are the lake copies the nested steps register). The night's plan
    shares a table that several reads name (runtime.night.SharedScan)."""
    if view.incremental:
        times = 2 if view.has_holistic else 1
        return {t: times for t in dict.fromkeys(view.tables) if _is_base(plan, t)}
    out: dict[str, int] = {}
    for sql in [plan.view(name).sql for name in _reads_closure(view, plan)] + [view.sql]:
        tree = sqlglot.parse_one(sql)
        ctes = {c.alias_or_name.lower() for c in tree.find_all(sqlglot.exp.CTE)}
        for t in tree.find_all(sqlglot.exp.Table):
            if t.name and t.name.lower() not in ctes and _is_base(plan, t.name):
                name = plan.schema.table(t.name).name
                out[name] = out.get(name, 0) + 1
    return out


def _is_base(plan, name: str) -> bool:
    table = plan.schema.table(name)
    return table is not None and table.view is None


def _reads_closure(view: View, plan) -> list[str]:
    """The summary views `view` reads, directly or not, each after the views it reads."""
    out: list[str] = []

    def visit(v: View) -> None:
        for name in v.reads:
            inner = plan.view(name)
            visit(inner)
            if inner.name not in out:
                out.append(inner.name)

    visit(view)
    return out


def _over_state(sql: str, plan, state: str) -> str:
    """`sql` with each declared table replaced by its registered relation at `state` (keeping the
    table's name or alias, so qualified columns still resolve); CTEs and summary views untouched.
    Only the table's name and alias change: a table node also carries what follows it inside a
    parenthesized join nest (`(r FULL JOIN s ON …)` is a Table r with joins), which stays as written."""
    tree = sqlglot.parse_one(sql)
    ctes = {c.alias_or_name.lower() for c in tree.find_all(sqlglot.exp.CTE)}
    for t in list(tree.find_all(sqlglot.exp.Table)):
        table = plan.schema.table(t.name) if t.name and t.name.lower() not in ctes else None
        if table is None or table.view is not None:  # a summary view: inlined by recompute_sql
            continue
        alias = t.args.get("alias") or sqlglot.exp.TableAlias(this=sqlglot.exp.to_identifier(table.name, quoted=True))
        rename_table(t, rel(state, table.name), alias)
    return tree.sql()


def rename_table(table: sqlglot.exp.Table, name: str, alias: sqlglot.exp.TableAlias | None) -> None:
    """Point `table` at relation `name` under `alias`, in place: its joins (a join nest's), hints and
    sample stay; replacing the node with a new Table would drop them."""
    table.set("this", sqlglot.exp.to_identifier(name))
    table.set("db", None)
    table.set("catalog", None)
    table.set("alias", alias)


# ------------------------------------------------------------------ nested mode (paper 000)


def view_update(view: View, copy: str, sd: str) -> str:
    """The new stored rows of the groups summary-delta `sd` changes, from the view's lake copy `copy`:
    Figure 8 (lattice.refresh) as the warehouse applies it, so copy and summary table agree. A row
    whose _ns_count is 0 is a group that is gone."""
    t, c = q("t"), q("c")
    on = same_keys(view, t, c)
    cols = [f"{c}.{q(k.name)} AS {q(k.name)}" for k in view.keys]
    for s in view.stored:
        cols.append(f"CAST(CASE WHEN {t}.{q('_ns_count')} IS NULL THEN {fresh(view, s, c)} "
                    f"ELSE {merged(view, s, t, c, f'{c}.{q(LOST)} = 1')} END AS {s.type}) AS {q(s.column)}")
    return f"SELECT {', '.join(cols)}\nFROM {sd} AS {c}\nLEFT JOIN {copy} AS {t} ON {on}"


def changed_rows(view: View, copy: str, sd: str, keep: bool) -> str:
    """The copy's rows of the groups `sd` changes (keep=True), or of every other group (keep=False)."""
    t, c = q("t"), q("c")
    keys = ", ".join(q(k.name) for k in view.keys)
    if not view.keys:  # a grand total: its one group changed when the summary-delta has a row
        test = f"EXISTS (SELECT 1 FROM {sd})"
        return f"SELECT * FROM {copy} WHERE {'' if keep else 'NOT '}{test}"
    on = same_keys(view, t, c)
    hit = f"{c}.{q('_ns_hit')}"
    return (f"SELECT {t}.* FROM {copy} AS {t}\nLEFT JOIN (SELECT DISTINCT {keys}, 1 AS {q('_ns_hit')} FROM {sd}) AS {c} "
            f"ON {on}\nWHERE {hit} IS {'NOT ' if keep else ''}NULL")


def served_rows(view: View, storage: str, changed_only: str | None = None) -> str:
    """The view's served rows (its declared columns, HAVING applied) from rows of its storage layout:
    what a reader of the serving view sees, as the table a nested view reads. A grand total serves one
    row even over no stored row (COUNT 0, the others NULL); changed_only: the SQL of a condition that
    must hold for that row to appear at all (its group changed tonight)."""
    source = storage
    if not view.keys:
        one = [f"COALESCE(MAX({q(s.column)}), 0) AS {q(s.column)}" if s.kind in ("count_star", "count")
               else f"MAX({q(s.column)}) AS {q(s.column)}" for s in view.stored]
        source = f"(SELECT {', '.join(one)} FROM {storage} AS {q('r')}) "
    cols = ", ".join(f"{served(o)} AS {q(o.name)}" for o in view.outputs)
    conds = [c for c in (view.having and f"({view.having})", changed_only) if c]
    where = f" WHERE {' AND '.join(conds)}" if conds else ""
    return f"SELECT {cols} FROM {source} AS {q('s')}{where}"
