"""The compiler pipeline, top to bottom (modelled on sqlglot's optimizer: one pass per module).

    parse_schema      sql/schema.sql              -> Schema
    read_view         sql/summaries/<view>.sql    -> ViewStatement   (one CREATE VIEW per file)
    view_order        ViewStatements              -> order           (a view after the views it reads; no cycles)
    expand_stars      ViewStatement               -> ViewStatement   (SELECT * and t.* as the columns they mean today)
    canonical         ViewStatement               -> ViewStatement   (the warehouse's SQL as neutral SQL, same meaning)
    refusals          ViewStatements              -> (what no engine computes as the warehouse does: one error)
    with_view_tables  Schema + Views read         -> Schema          (an incremental view another reads is a table)
    parse_view        ViewStatement               -> ParsedView      delta (or nested) mode, or NotIncremental ...
    normalize         ParsedView                  -> View            (AVG -> SUM/COUNT, hidden counts, HAVING)
    fact_map          ViewStatement               -> A + outer view  ... auxiliary mode (DISTINCT, holistic), else
    recompute_view    ViewStatement + reason      -> View            ... then the view is kept by recompute
    check_names       Views                       -> Plan            (names unique, no clashes)
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

import sqlglot
from sqlglot import exp

from lattice import emit
from lattice.errors import ConfigError, NotIncremental, UnsupportedView
from lattice.ir import MAINTAIN, FunctionalDependency, Plan, Schema, UserAggregate, View
from lattice.passes.auxiliary import fact_map, without_distinct
from lattice.passes.choose_extremes import AUX_SHARE, auxiliary_rows, prefer_auxiliary
from lattice.passes.choose_maps import MAP_REASON, MAP_ROWS, MAP_SHARE, large_fact, prefer_map
from lattice.passes.choose_parents import Statistics
from lattice.passes.expand_stars import expand_stars
from lattice.passes.functions import check_functions, nondeterministic, refusals
from lattice.passes.nested import with_view_tables
from lattice.passes.normalize import normalize
from lattice.passes.parse_schema import parse_schema
from lattice.passes.parse_views import ViewStatement, fact_of, holistic, parse_view, read_view
from lattice.passes.recompute import recompute_view
from lattice.sql import ident
from lattice.warehouse_sql import canonical, integer_division_of_views, with_decimal_quantile_types


def compile_project(
    schema_sql: str,
    view_files: dict[str, str],
    dependencies: tuple[FunctionalDependency, ...] = (),
    schema_file: str = "sql/schema.sql",
    maintain: tuple[tuple[str, str], ...] = (),
    aggregates: tuple[UserAggregate, ...] = (),
    statistics: tuple[tuple[str, int], ...] = (),
    dialect: str = "duckdb",
) -> Plan:
    """Compile a project's schema and summary views (file name -> SQL text) into a Plan.
    maintain: nightshift.toml [views] as (view name, "auto" | "incremental" | "delta" | "recompute" | ...) pairs;
    aggregates: its [aggregates] (user-defined aggregates); statistics: its [statistics] as ("table",
    rows) and ("table.column", distinct values) pairs (lattice/passes/choose_extremes.py); dialect: the
    warehouse's ("duckdb" | "postgres"), where the engines disagree on what a view's SQL means (the columns
    a SELECT * over JOIN … USING lists first; the views are written in its SQL, lattice/warehouse_sql.py)."""
    check_user_aggregates(aggregates)
    schema = parse_schema(schema_sql, schema_file)
    stats = declared_statistics(statistics, schema)
    statements = [read_view(text, file, dialect) for file, text in sorted(view_files.items())]
    names = frozenset(s.name.lower() for s in statements)
    statements = _in_neutral_sql(statements, view_files, schema, dialect, aggregates)
    settings = _settings(maintain, names)
    _check_statement_names(statements)
    compiled: dict[str, View] = {}
    auxiliary: list[tuple[View, str]] = []  # (auxiliary view, the view it serves)
    for st in view_order(statements, names):
        st = expand_stars(st, schema, {n: tuple(o.name for o in v.outputs) for n, v in compiled.items()}, dialect)
        read = [compiled[n] for n in _reads(st, names) if compiled[n].incremental]
        typed = _column_types(st.query, with_view_tables(schema, read))  # the kept views' columns are typed
        st = replace(st, query=integer_division_of_views(st.query, dialect, typed))
        view, aux = compile_view(st, with_view_tables(schema, read), names, settings.get(st.name.lower(), "auto"),
                                 aggregates, dependencies, stats)
        compiled[st.name.lower()] = view
        auxiliary += [(a, st.name) for a in aux]
    views = tuple(compiled[s.name.lower()] for s in view_order(statements, names))
    _check_names(views)
    auxiliary = _shared(auxiliary)
    _check_auxiliary_names(views, auxiliary)
    read = {r.lower() for v in (*auxiliary, *views) if v.incremental for r in v.reads}
    schema = with_view_tables(schema, [v for v in (*auxiliary, *views) if v.name.lower() in read])
    digest = hashlib.sha256()
    for part in [schema_sql, *(f"{f}\0{t}" for f, t in sorted(view_files.items())), repr(dependencies), repr(maintain),
                 *([repr(aggregates)] if aggregates else []), *([repr(sorted(statistics))] if statistics else [])]:
        digest.update(part.encode())
        digest.update(b"\0")
    return Plan(schema=schema, views=views, dependencies=dependencies, fingerprint=digest.hexdigest()[:16],
                auxiliary=tuple(auxiliary))


def compile_view(statement: ViewStatement, schema: Schema, names: frozenset[str], maintain: str = "auto",
                 aggregates: tuple[UserAggregate, ...] = (), dependencies: tuple[FunctionalDependency, ...] = (),
                 stats: Statistics | None = None) -> tuple[View, tuple[View, ...]]:
    """The view in the cheapest mode that keeps it exactly: delta when paper 001's rules cover it
    (nested when its fact table is another summary view; auxiliary over a map when it joins a dimension of a
    fact table declared large and the map is estimated small, lattice/passes/choose_maps.py; auxiliary when it
    has MIN/MAX and an auxiliary view of their values is estimated much smaller than the fact table it would
    otherwise read, lattice/passes/choose_extremes.py), auxiliary when its DISTINCT and holistic aggregates are
    kept over an auxiliary view (returned beside it, lake only), else recompute (with the reason);
    [views] <name> = "incremental" makes the latter an error ("delta": anything but the delta mode), and
    so does a user-defined aggregate (no engine evaluates it: nightshift does, over the auxiliary view)."""
    where = f"{statement.file}: view {statement.name}"
    check_functions(statement.query, where, frozenset(a.name.lower() for a in aggregates))
    if maintain == "auxiliary":
        return _extremes_through_auxiliary(statement, schema, names, aggregates, where)
    if maintain == "map":
        return _through_map(statement, schema, names, where)
    try:
        view = normalize(parse_view(statement, schema, names, aggregates))
    except NotIncremental as e:
        if maintain == "delta":
            raise NotIncremental(f"{e}; nightshift.toml [views] {statement.name} = \"delta\" keeps paper 001's delta "
                                 f"mode only (use \"incremental\" to allow the auxiliary mode)") from None
        plain = _without_distinct(statement, schema, names) if maintain != "recompute" else None
        if plain is not None:
            return replace(plain, maintain=maintain), ()
        kept = _auxiliary(statement, schema, names, aggregates) if maintain != "recompute" else None
        if kept is not None:
            return replace(kept[0], maintain=maintain), kept[1]
        uda = next((n.name for n in statement.query.find_all(exp.Anonymous) if holistic(n, aggregates)), None)
        if uda is not None:
            why = ('nightshift.toml [views] keeps it by recompute' if maintain == "recompute"
                   else "the auxiliary mode does not cover this view (its DISTINCT, holistic and user-defined "
                        "aggregates must share one argument, and no expression may combine aggregates)")
            raise UnsupportedView(f"{where}: {uda}() is a user-defined aggregate ([aggregates] in nightshift.toml), "
                                  f"which only the auxiliary mode evaluates, and {why}") from None
        if maintain == "incremental":
            raise NotIncremental(f"{e}; nightshift.toml [views] {statement.name} = \"incremental\" forbids keeping it "
                                 f"by recompute (remove the setting, or rewrite the view)") from None
        typed = with_decimal_quantile_types(statement.query, _column_types(statement.query, schema))
        view = recompute_view(replace(statement, query=typed), schema, names, str(e))
    inner = schema.table(view.fact).view if view.incremental else None
    if inner is not None:
        view = replace(view, mode="nested", reads=(inner,),
                       reason=f"reads {inner}'s summary-delta as updates (paper 000, 6) and its lake copy")
    elif view.incremental:
        chosen = _chosen_map(view, statement, schema, names, maintain, dependencies, stats or Statistics())
        if chosen is not None:
            return chosen
        if view.has_min_max and maintain in ("auto", "incremental", "delta"):
            return _extremes(view, statement, schema, names, maintain, dependencies, stats or Statistics())
    return replace(view, maintain=maintain), ()


def _in_neutral_sql(statements: list[ViewStatement], view_files: dict[str, str], schema: Schema,
                    warehouse: str | None, aggregates: tuple[UserAggregate, ...]) -> list[ViewStatement]:
    """Each view read into neutral SQL with the warehouse's semantics (lattice/warehouse_sql.py); every
    construct of every view that no engine computes as the warehouse does is reported in one error, each
    as the user wrote it, with its file and line (lattice/passes/functions.py)."""
    user = frozenset(a.name.lower() for a in aggregates)
    out, refused = [], []
    for st in statements:
        query = canonical(st.query, warehouse, _column_types(st.query, schema))
        refused += refusals(query, view_files.get(st.file, ""), st.file, st.name, warehouse, user)
        out.append(replace(st, query=query))
    if len(refused) == 1:
        raise UnsupportedView(str(refused[0]))
    if refused:
        raise UnsupportedView(f"{len(refused)} constructs in the summary views have no translation that computes "
                              f"what the warehouse computes:\n" + "\n".join(f"  {r}" for r in refused))
    return out


def _column_types(query: exp.Expression, schema: Schema):
    """A column of the view's tables -> its declared type (None: not a column of a declared table)."""
    tables = {t.alias_or_name.lower(): schema.table(t.name) for t in query.find_all(exp.Table)
              if schema.table(t.name) is not None}

    def column_type(col: exp.Column) -> str | None:
        if col.table:
            table = tables.get(col.table.lower())
            found = [table.column(col.name)] if table is not None and table.column(col.name) is not None else []
        else:
            found = [t.column(col.name) for t in tables.values() if t.column(col.name) is not None]
        return found[0].type if len(found) == 1 else None

    return column_type


def _extremes(view: View, statement: ViewStatement, schema: Schema, names: frozenset[str], maintain: str,
              dependencies: tuple[FunctionalDependency, ...], stats: Statistics) -> tuple[View, tuple[View, ...]]:
    """A delta-mode view with MIN/MAX over a base fact table: exact MIN/MAX of a group that lost rows from
    the base, or from an auxiliary view of the arguments' values where that is estimated much smaller
    (lattice/passes/choose_extremes.py); the reason gives both sizes."""
    fns = ", ".join(dict.fromkeys(s.kind.upper() for s in view.stored if s.kind in ("min", "max")))
    kept = _auxiliary(statement, schema, names, (), grouped=True) if maintain != "delta" else None
    if kept is None:
        why = (f'nightshift.toml [views] {statement.name} = "delta" keeps paper 001\'s delta mode alone'
               if maintain == "delta" else "no auxiliary view covers it: that needs GROUP BY and COUNT, SUM, MIN or "
                                          "MAX of the fact's columns only")
        return replace(view, maintain=maintain, reason=f"{fns} of a group that lost its extreme read from the base "
                                                       f"{view.fact} on a night with deletes ({why})"), ()
    outer, aux = kept
    rows, fact_rows, basis = auxiliary_rows(aux[0], schema, dependencies, stats)
    sizes = f"~{rows:,} rows (its groups and {fns} argument values) against {fact_rows:,} of {view.fact} ({basis})"
    if not prefer_auxiliary(rows, fact_rows):
        return replace(view, maintain=maintain, reason=(
            f"{fns} of a group that lost its extreme read from the base {view.fact} on a night with deletes: an "
            f"auxiliary view would hold {sizes}, more than 1/{AUX_SHARE} of it (nightshift.toml [statistics] refines "
            f'the estimate; [views] {statement.name} = "auxiliary" forces the auxiliary view)')), ()
    return replace(outer, maintain=maintain, reason=(
        f"{fns} kept through the auxiliary view {aux[0].name} (paper 002): a group whose extreme is deleted is "
        f"recomputed from its lake copy, never from the base; it holds {sizes}, at most 1/{AUX_SHARE} of it "
        f'([views] {statement.name} = "delta" reads the base instead)')), aux


def declared_statistics(statistics: tuple[tuple[str, int], ...], schema: Schema) -> Statistics:
    """nightshift.toml [statistics]: ("table", rows) and ("table.column", distinct values), each checked
    against the schema and spelled as it declares them."""
    rows: dict[str, int] = {}
    distinct: dict[str, int] = {}
    for name, n in statistics:
        where = f"nightshift.toml: [statistics] {name} = {n!r}"
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"{where}: a positive whole number of rows (or of distinct values) is needed")
        table_name, _, column_name = name.partition(".")
        table = schema.table(table_name)
        if table is None or table.view is not None:
            raise ConfigError(f"{where}: no table {table_name} in the schema (tables: "
                              f"{', '.join(t.name for t in schema.base_tables)})")
        if not column_name:
            rows[table.name] = n
            continue
        column = table.column(column_name)
        if column is None:
            raise ConfigError(f"{where}: table {table.name} has no column {column_name} (it has "
                              f"{', '.join(table.column_names)})")
        distinct[f"{table.name}.{column.name}"] = n
    return Statistics.of(table_rows=rows, distinct=distinct)


def _extremes_through_auxiliary(statement: ViewStatement, schema: Schema, names: frozenset[str],
                                aggregates: tuple[UserAggregate, ...], where: str) -> tuple[View, tuple[View, ...]]:
    """[views] <name> = "auxiliary": the view's MIN/MAX kept over an auxiliary view holding their argument's
    values, so that a night deleting a group's extreme recomputes it from the auxiliary
    view's lake copy instead of reading the base; refused, with the reason, where that does not apply."""
    has_extremes = any(isinstance(n, (exp.Min, exp.Max)) for n in statement.query.find_all(exp.Min, exp.Max))
    kept = _auxiliary(statement, schema, names, aggregates, grouped=True) if has_extremes else None
    if kept is None:
        raise UnsupportedView(f'{where}: nightshift.toml [views] {statement.name} = "auxiliary" keeps MIN/MAX through an '
                              f'auxiliary view, which needs MIN/MAX of fact columns (beside COUNT/SUM/MIN/MAX of fact '
                              f'columns and DISTINCT or holistic aggregates); remove the setting for this view')
    view, aux = kept
    view = replace(view, maintain="auxiliary", reason=(
        f'MIN/MAX kept through the auxiliary view {aux[0].name} (nightshift.toml [views] {statement.name} = '
        f'"auxiliary", paper 002): a group whose extreme is deleted is recomputed from its lake copy, never from '
        f'the base' + (f"; {view.reason}" if view.has_holistic else "")))
    return view, aux


def _through_map(statement: ViewStatement, schema: Schema, names: frozenset[str], where: str
                 ) -> tuple[View, tuple[View, ...]]:
    """[views] <name> = "map": the view kept over a higher-order delta map of its fact table
    (Cumulus; lattice/passes/auxiliary.py: fact_map), so that a night changing a dimension joins the
    changed rows with the map's lake copy, never with the fact table; refused, with the reason, where
    that does not apply."""
    def refuse(why: str) -> UnsupportedView:
        return UnsupportedView(f'{where}: nightshift.toml [views] {statement.name} = "map" keeps the view over a map '
                               f'of its fact table grouped by the fact columns it reads, which {why}; remove the setting '
                               f'for this view')

    try:
        view = normalize(parse_view(statement, schema, names))
    except UnsupportedView as e:  # NotIncremental too
        raise refuse(f"needs a view the delta mode keeps ({e})") from None
    if schema.table(view.fact).view is not None:
        raise refuse(f"needs a base fact table ({view.fact} is a summary view)")
    if not view.dimensions:
        raise refuse("saves nothing for a view that joins no dimension table")
    kept = _auxiliary(statement, schema, names, ())
    if kept is None:
        raise refuse("needs GROUP BY and COUNT, SUM, MIN or MAX of fact columns only (no AVG, no aggregate of a "
                     "dimension column, no unqualified column name two tables share)")
    outer, aux = kept
    view = replace(outer, mode="auxiliary", maintain="map", reason=(
        f"{MAP_REASON}{aux[0].name} (nightshift.toml [views] {statement.name} = \"map\"): the fact's "
        f"changes reach it through the map, and a change of {', '.join(view.dimensions)} joins the map's lake copy, "
        f"never {view.fact}"))
    return view, aux


def _chosen_map(view: View, statement: ViewStatement, schema: Schema, names: frozenset[str], maintain: str,
                dependencies: tuple[FunctionalDependency, ...], stats: Statistics) -> tuple[View, tuple[View]] | None:
    """A delta-mode view joining dimensions, kept over a map of its fact table where the plan chooses one
    (lattice/passes/choose_maps.py: a fact table declared large, a map estimated small); None: kept as it is.
    Only when the mode is the plan's to choose ([views] "auto" or "incremental")."""
    if maintain not in ("auto", "incremental") or not view.dimensions or not large_fact(view.fact, stats):
        return None
    kept = _auxiliary(statement, schema, names, ())
    if kept is None:
        return None
    outer, aux = kept
    rows, fact_rows, basis = auxiliary_rows(aux[0], schema, dependencies, stats)
    if not prefer_map(rows, fact_rows):
        return None
    return replace(outer, mode="auxiliary", maintain=maintain, reason=(
        f"{MAP_REASON}{aux[0].name}, by the plan's choice: ~{rows:,} rows against {fact_rows:,} of {view.fact} "
        f"({basis}); a fact table of {MAP_ROWS:,} rows or more, and a map of at most 1/{MAP_SHARE} of it; the fact's changes "
        f"reach it through the map, and a change of {', '.join(view.dimensions)} joins the map's lake copy, never "
        f'{view.fact} ([views] {statement.name} = "delta" keeps it over {view.fact})')), aux


def _without_distinct(statement: ViewStatement, schema: Schema, names: frozenset[str]) -> View | None:
    """The delta mode, where keys make the view's DISTINCT redundant (lattice/passes/auxiliary.py:
    without_distinct); None otherwise."""

    def fact_key(rewritten: ViewStatement, column: exp.Column) -> bool:
        parsed = parse_view(rewritten, schema, names)
        table = schema.table(parsed.fact)
        aliases = {t.alias_or_name.lower() for t in rewritten.query.find_all(exp.Table) if t.name.lower() == table.name.lower()}
        return [c.lower() for c in table.primary_key] == [column.name.lower()] \
            and (not column.table or column.table.lower() in aliases)

    try:
        found = without_distinct(statement, fact_key)
        if found is None:
            return None
        view = normalize(parse_view(found[0], schema, names))
    except UnsupportedView:  # NotIncremental too: the view needs more than dropping DISTINCT
        return None
    if schema.table(view.fact).view is not None:
        return None
    return replace(view, sql=statement.query.sql(),
                   reason=f"DISTINCT needs no auxiliary view (paper 003): {found[1]}")


def _auxiliary(statement: ViewStatement, schema: Schema, names: frozenset[str], aggregates: tuple[UserAggregate, ...],
               grouped: bool = False) -> tuple[View, tuple[View]] | None:
    """The view over its fact table grouped by what it reads of it (lattice/passes/auxiliary.py: fact_map),
    and that auxiliary view (a delta-mode view of the fact alone, lake only); None when the rewrite does
    not cover the view."""
    fact = fact_of(statement, schema, names)
    if fact is None or schema.table(fact).view is not None:
        return None  # DISTINCT over another summary view's rows: recompute
    tables = {t.alias_or_name.lower(): frozenset(c.name.lower() for c in schema.table(t.name).columns)
              for t in statement.query.find_all(exp.Table) if schema.table(t.name) is not None}
    parts = fact_map(statement, fact, tables, aggregates, grouped)
    if parts is None:
        return None
    try:
        aux = normalize(parse_view(parts.auxiliary, schema, names))
        outer = normalize(parse_view(parts.outer, with_view_tables(schema, [aux]), names | {aux.name.lower()},
                                     aggregates))
    except UnsupportedView:  # NotIncremental too: the rewrite does not cover the view
        return None
    why = "; ".join(f"{c}: {w}" for c, w in parts.columns)
    aux = replace(aux, reason=f"({parts.form}): {parts.auxiliary.query.sql()}; columns {why}")
    kinds = " and ".join(k for k, present in (("DISTINCT", parts.distinct), ("holistic", outer.has_holistic)) if present)
    sql = statement.query.sql()
    if any(s.func.startswith("uda ") for s in outer.stored):  # no engine runs the user's SQL: the oracle's
        sql = _evaluable(parts.outer.query, outer, aggregates)
    dims = f", joined to {', '.join(outer.dimensions)} after the batch" if outer.dimensions else ""
    view = replace(outer, sql=sql, mode="auxiliary", reads=(aux.name,),
                   reason=f"{kinds or 'its'} aggregates{' over ' + parts.arguments if parts.arguments else ''} kept "
                          f"from the auxiliary view {aux.name} (paper 002, lake only: {fact} grouped by what the view "
                          f"reads of it, paper 003): its changed groups re-aggregated as updates (paper 000, 6)"
                          + (f"; each changed group's holistic values recomputed from its rows there{dims}, never "
                             f"from the base" if outer.has_holistic else ""))
    return view, (aux,)


def _shared(auxiliary: list[tuple[View, str]]) -> tuple[View, ...]:
    """The auxiliary views, each once: views whose auxiliary view has the same definition (hence the same
    name) share it, and its reason names every view it serves."""
    users: dict[str, list[str]] = {}
    first: dict[str, View] = {}
    for aux, user in auxiliary:
        users.setdefault(aux.name.lower(), []).append(user)
        first.setdefault(aux.name.lower(), aux)
    return tuple(replace(aux, reason=f"auxiliary view of {', '.join(users[low])}"
                                     f"{' (shared)' if len(users[low]) > 1 else ''} {aux.reason}")
                 for low, aux in first.items())


def _evaluable(query: exp.Select, outer: View, aggregates: tuple[UserAggregate, ...]) -> str:
    """SQL any engine runs for a view with a user-defined aggregate (what the oracle recomputes): the
    view over its auxiliary view, each holistic aggregate read from emit.holistic_values of its values."""
    column = {s.func: s.column for s in outer.stored if s.kind == "holistic"}

    def swap(node: exp.Expression) -> exp.Expression:
        kept = holistic(node, aggregates)
        if kept is None:
            return node
        return exp.func("MAX", exp.column(column[kept[0]], table="__ns_u", quoted=True))

    alias = {t.name.lower(): t.alias_or_name for t in query.find_all(exp.Table)}  # the IR names tables, the query aliases

    def aliased(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and node.table:
            return exp.column(node.name, table=alias.get(node.table.lower(), node.table), quoted=True)
        return node

    on = " AND ".join(f"{sqlglot.parse_one(k.sql).transform(aliased).sql()} IS NOT DISTINCT FROM \"__ns_u\"."
                      f"{ident(f'__ns_k{i}')}" for i, k in enumerate(outer.keys)) or "1 = 1"
    values = emit.holistic_values(outer, ident(outer.fact), dimension=ident)
    renamed = ", ".join([f"{ident(k.name)} AS {ident(f'__ns_k{i}')}" for i, k in enumerate(outer.keys)]
                        + [ident(c) for c in column.values()])  # no name of the view's tables twice
    return query.copy().transform(swap).join(f"(SELECT {renamed} FROM ({values}) AS \"__ns_v\") AS \"__ns_u\"", on=on,
                                             join_type="left").sql()


def check_user_aggregates(aggregates: tuple[UserAggregate, ...]) -> None:
    """Each [aggregates] entry: a name no engine already knows, SQL that parses, reads only x, i and n,
    aggregates them, and is made of functions the engines agree on."""
    for a in aggregates:
        where = f"nightshift.toml: [aggregates] {a.name}"
        if not a.name.isidentifier() or not isinstance(sqlglot.parse_one(f"{a.name}(x)"), exp.Anonymous):
            raise ConfigError(f"{where}: the name must be an identifier that is not a SQL function")
        try:
            tree = sqlglot.parse_one(a.sql)
        except sqlglot.errors.ParseError as e:
            raise ConfigError(f"{where}: sql does not parse: {str(e).splitlines()[0]}") from None
        other = sorted({c.sql() for c in tree.find_all(exp.Column) if c.table or c.name.lower() not in ("x", "i", "n")})
        if other:
            raise ConfigError(f"{where}: sql reads {', '.join(other)}; it may read only x (a value), i (its position "
                              f"1..n in ascending order) and n (the number of values)")
        if not tree.find(exp.AggFunc):
            raise ConfigError(f"{where}: sql has no aggregate (e.g. AVG(CASE WHEN i > 0.1 * n AND i <= 0.9 * n THEN x END))")
        random = nondeterministic(tree)
        if random:
            raise ConfigError(f"{where}: {random} gives a different value on every run; an aggregate kept "
                              f"incrementally must be deterministic")
        try:
            check_functions(tree, where)
        except UnsupportedView as e:
            raise ConfigError(str(e)) from None


def _check_auxiliary_names(views: tuple[View, ...], auxiliary: tuple[View, ...]) -> None:
    names = {v.name.lower(): v for v in views}
    for a in auxiliary:
        if a.name.lower() in names:
            v = names[a.name.lower()]
            raise UnsupportedView(f"{v.file}: view {v.name}: the name {a.name} is reserved for an auxiliary view "
                                  f"(rename the view)")


def view_order(statements: list[ViewStatement], names: frozenset[str]) -> list[ViewStatement]:
    """Statements in file order, except that a view comes after every summary view it reads; a cycle
    of views reading each other is refused, naming them."""
    by_name = {s.name.lower(): s for s in statements}
    out: list[ViewStatement] = []
    state: dict[str, str] = {}

    def visit(st: ViewStatement, path: list[str]) -> None:
        low = st.name.lower()
        if state.get(low) == "done":
            return
        if state.get(low) == "open":
            cycle = path[[p.lower() for p in path].index(low):] + [st.name]
            raise UnsupportedView(f"{st.file}: view {st.name}: views read each other in a cycle: {' -> '.join(cycle)}")
        state[low] = "open"
        for inner in _reads(st, names):
            visit(by_name[inner], path + [st.name])
        state[low] = "done"
        out.append(st)

    for st in statements:
        visit(st, [])
    return out


def _reads(statement: ViewStatement, names: frozenset[str]) -> list[str]:
    """The summary views (lower-case names) a view's SQL reads as tables (not its own CTEs)."""
    ctes = {c.alias_or_name.lower() for c in statement.query.find_all(exp.CTE)}
    found = [t.name.lower() for t in statement.query.find_all(exp.Table) if t.name.lower() in names - ctes]
    return list(dict.fromkeys(found))


def _settings(maintain: tuple[tuple[str, str], ...], names: frozenset[str]) -> dict[str, str]:
    out = {}
    for name, value in maintain:
        if name.lower() not in names:
            raise ConfigError(f"nightshift.toml: [views] {name}: no summary view of that name "
                              f"(views: {', '.join(sorted(names))})")
        if value not in MAINTAIN:
            raise ConfigError(f"nightshift.toml: [views] {name} = {value!r}: use one of {', '.join(MAINTAIN)}")
        out[name.lower()] = value
    return out


def _check_statement_names(statements: list[ViewStatement]) -> None:
    seen: dict[str, str] = {}
    for st in statements:
        low = st.name.lower()
        if low in seen:
            raise UnsupportedView(f"{st.file}: view {st.name} is also defined in {seen[low]}")
        seen[low] = st.file


def _check_names(views: tuple[View, ...]) -> None:
    for v in views:
        for k in v.keys:
            if k.name.lower().startswith("_ns_") and k.declared:
                raise UnsupportedView(f"{v.file}: view {v.name}: column {k.name}: names starting with _ns_ are reserved")
        for o in v.outputs:
            if o.name.lower().startswith("_ns_"):
                raise UnsupportedView(f"{v.file}: view {v.name}: column {o.name}: names starting with _ns_ are reserved")
