"""Specification tests for the lattice compiler (pure Python: no Spark, no database).

The reference is paper 001 (Mumick, Quass, Mumick, "Maintenance of Data Cubes and Summary Tables
in a Warehouse", SIGMOD'97): the Figure 1 retail views, the aggregate-source rules of Table 2, the
hidden counts the refresh function of Figure 8 needs, and the dimension-change terms of 4.1.4.
"""

from __future__ import annotations

import re

from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from lattice import emit, types
from lattice.compile import compile_project
from lattice.errors import NotIncremental, SchemaError, UnknownReference, UnsupportedView
from lattice.ir import ColumnRef, GroupKey, Join, View
from lattice.passes.parse_schema import parse_schema
from lattice.sql import to_dialect

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_SQL = (ROOT / "sql" / "schema.sql").read_text()
FIGURE1_FILES = {
    f"sql/summaries/{p.name}": p.read_text() for p in sorted((ROOT / "sql" / "summaries").glob("*.sql"))
}

POS_STORES = Join(child="pos", parent="stores", child_columns=("storeID",), parent_columns=("storeID",))
POS_ITEMS = Join(child="pos", parent="items", child_columns=("itemID",), parent_columns=("itemID",))


def compile_view(sql: str, file: str = "sql/summaries/v.sql", schema_sql: str = SCHEMA_SQL) -> View:
    plan = compile_project(schema_sql, {file: sql})
    assert len(plan.views) == 1
    return plan.views[0]


def stored_columns(view: View) -> dict[str, tuple[str, int | None, str]]:
    return {s.column: (s.kind, s.arg, s.type) for s in view.stored}


def is_exact_decimal(t: str, scale: int) -> bool:
    """DECIMAL(p,scale) wide enough for a DECIMAL(10,scale) column (the compiler may widen to p=38)."""
    return types.family(t) == "decimal" and types.decimal_scale(t) == scale and int(t[8:].split(",")[0]) >= 10


def arg_of(view: View, sql: str) -> int:
    hits = [a.index for a in view.arguments if a.sql == sql]
    assert len(hits) == 1, (sql, view.arguments)
    return hits[0]


@pytest.fixture(scope="module")
def figure1():
    return compile_project(SCHEMA_SQL, FIGURE1_FILES)


# =================================================================== 1. Figure 1


def test_figure1_all_four_views_compile(figure1):
    assert sorted(v.name for v in figure1.views) == ["SID_sales", "SiC_sales", "sCD_sales", "sR_sales"]
    assert figure1.fact_tables == ("pos",)
    for v in figure1.views:
        assert v.fact == "pos"
        assert v.tables[0] == "pos"
        assert v.file == f"sql/summaries/{v.name}.sql"
        assert v.where is None  # Figure 1 has only join predicates in WHERE
        assert v.storage_table == f"{v.name}__ns"


@pytest.mark.parametrize(
    "name, tables, joins",
    [
        ("SID_sales", ("pos",), ()),
        ("sCD_sales", ("pos", "stores"), (POS_STORES,)),
        ("SiC_sales", ("pos", "items"), (POS_ITEMS,)),
        ("sR_sales", ("pos", "stores"), (POS_STORES,)),
    ],
)
def test_figure1_fact_dimensions_and_joins(figure1, name, tables, joins):
    v = figure1.view(name)
    assert v.tables == tables
    assert v.dimensions == tables[1:]
    assert v.joins == joins


@pytest.mark.parametrize(
    "name, keys, outputs",
    [
        (
            "SID_sales",
            [("storeID", "pos", "storeID", "INTEGER"), ("itemID", "pos", "itemID", "INTEGER"), ("date", "pos", "date", "DATE")],
            ["storeID", "itemID", "date", "TotalCount", "TotalQuantity"],
        ),
        (
            "sCD_sales",
            [("city", "stores", "city", "VARCHAR"), ("date", "pos", "date", "DATE")],
            ["city", "date", "TotalCount", "TotalQuantity"],
        ),
        (
            "SiC_sales",
            [("storeID", "pos", "storeID", "INTEGER"), ("category", "items", "category", "VARCHAR")],
            ["storeID", "category", "TotalCount", "EarliestSale", "TotalQuantity"],
        ),
        (
            "sR_sales",
            [("region", "stores", "region", "VARCHAR")],
            ["region", "TotalCount", "TotalQuantity"],
        ),
    ],
)
def test_figure1_group_keys_and_declared_outputs(figure1, name, keys, outputs):
    v = figure1.view(name)
    assert v.keys == tuple(GroupKey(n, ColumnRef(t, c), ty, True) for n, t, c, ty in keys)
    # Declared output names, in the order of the CREATE VIEW column list.
    assert [o.name for o in v.outputs] == outputs
    for o in v.outputs[: len(keys)]:
        assert (o.kind, o.source) == ("key", o.name)


@pytest.mark.parametrize("name", ["SID_sales", "sCD_sales", "SiC_sales", "sR_sales"])
def test_figure1_hidden_counts(figure1, name):
    """Every view keeps COUNT(*) (Figure 8 deletes a group at 0) and COUNT(e) for each SUM/MIN/MAX argument."""
    v = figure1.view(name)
    cols = stored_columns(v)
    assert cols["_ns_count"] == ("count_star", None, "BIGINT")
    outputs = {o.name: o for o in v.outputs}
    assert (outputs["TotalCount"].kind, outputs["TotalCount"].source) == ("count_star", "_ns_count")
    qty = arg_of(v, '"pos"."qty"')
    assert cols[f"_ns_cnt_{qty}"] == ("count", qty, "BIGINT")
    assert cols[f"_ns_sum_{qty}"] == ("sum", qty, "BIGINT")  # SUM over INTEGER is BIGINT
    assert (outputs["TotalQuantity"].kind, outputs["TotalQuantity"].source) == ("sum", f"_ns_sum_{qty}")
    # Every argument of a SUM/AVG/MIN/MAX has its COUNT(e).
    for s in v.stored:
        if s.kind in ("sum", "min", "max"):
            assert v.stored_of("count", s.arg) is not None
    # Hidden stored columns are reserved-prefixed; none clashes with a declared output.
    assert all(s.column.startswith("_ns_") for s in v.stored)
    assert not {s.column.lower() for s in v.stored} & {o.name.lower() for o in v.outputs}


def test_figure1_sic_sales_stores_min_date(figure1):
    v = figure1.view("SiC_sales")
    date = arg_of(v, '"pos"."date"')
    cols = stored_columns(v)
    assert cols[f"_ns_min_{date}"] == ("min", date, "DATE")
    assert cols[f"_ns_cnt_{date}"] == ("count", date, "BIGINT")
    assert v.stored_of("max", date) is None
    assert v.has_min_max
    earliest = next(o for o in v.outputs if o.name == "EarliestSale")
    assert (earliest.kind, earliest.source) == ("min", f"_ns_min_{date}")
    assert [a.index for a in emit.minmax_arguments(v)] == [date]
    # Exactly: COUNT(*), COUNT(date), MIN(date), COUNT(qty), SUM(qty).
    assert len(v.stored) == 5


def test_figure1_views_without_min_max(figure1):
    for name in ("SID_sales", "sCD_sales", "sR_sales"):
        v = figure1.view(name)
        assert not v.has_min_max
        assert len(v.stored) == 3  # COUNT(*), COUNT(qty), SUM(qty)


# =================================================================== 2. normalization


def test_avg_becomes_sum_and_count():
    v = compile_view(
        "CREATE VIEW a_sales(storeID, AvgQty) AS SELECT storeID, AVG(qty) AS AvgQty FROM pos GROUP BY storeID"
    )
    qty = arg_of(v, '"pos"."qty"')
    avg = v.outputs[1]
    assert avg.name == "AvgQty"
    assert avg.kind == "avg"
    assert avg.source == f"_ns_sum_{qty}"
    assert avg.count_column == f"_ns_cnt_{qty}"
    cols = stored_columns(v)
    assert cols[avg.source] == ("sum", qty, "BIGINT")
    assert cols[avg.count_column] == ("count", qty, "BIGINT")
    assert "avg" not in {s.kind for s in v.stored}  # AVG is never stored (not self-maintainable)


def test_equal_arguments_share_stored_columns():
    v = compile_view(
        "CREATE VIEW s(storeID, s1, a1, c1, c2) AS "
        "SELECT storeID, SUM(qty) AS s1, AVG(pos.qty) AS a1, COUNT(qty) AS c1, COUNT(*) AS c2 "
        "FROM pos GROUP BY storeID"
    )
    assert len(v.arguments) == 1
    qty = v.arguments[0].index
    assert v.arguments[0].sql == '"pos"."qty"'
    kinds = sorted(s.kind for s in v.stored)
    assert kinds == ["count", "count_star", "sum"]  # one _ns_cnt, one _ns_sum
    out = {o.name: o for o in v.outputs}
    assert out["s1"].source == out["a1"].source == f"_ns_sum_{qty}"
    assert out["c1"].source == out["a1"].count_column == f"_ns_cnt_{qty}"
    assert out["c1"].kind == "count"
    assert (out["c2"].kind, out["c2"].source) == ("count_star", "_ns_count")


def test_distinct_arguments_get_distinct_columns():
    v = compile_view(
        "CREATE VIEW s(storeID, q, p, lo, hi) AS "
        "SELECT storeID, SUM(qty) AS q, SUM(price) AS p, MIN(price) AS lo, MAX(qty) AS hi "
        "FROM pos GROUP BY storeID"
    )
    qty, price = arg_of(v, '"pos"."qty"'), arg_of(v, '"pos"."price"')
    assert qty != price
    cols = stored_columns(v)
    assert cols[f"_ns_sum_{price}"] == ("sum", price, "DECIMAL(38,2)")
    assert cols[f"_ns_min_{price}"][:2] == ("min", price)
    assert is_exact_decimal(cols[f"_ns_min_{price}"][2], scale=2)  # MIN/MAX keep the argument exact
    assert cols[f"_ns_max_{qty}"] == ("max", qty, "INTEGER")
    assert cols[f"_ns_cnt_{qty}"][0] == cols[f"_ns_cnt_{price}"][0] == "count"
    assert len(set(cols)) == len(v.stored)  # column names are unique


def test_expression_aggregate_sum_qty_times_price():
    v = compile_view(
        "CREATE VIEW rev(storeID, Revenue) AS SELECT storeID, SUM(qty * price) AS Revenue FROM pos GROUP BY storeID"
    )
    assert len(v.arguments) == 1
    a = v.arguments[0]
    assert '"pos"."qty"' in a.sql and '"pos"."price"' in a.sql
    s = v.stored_of("sum", a.index)
    assert s is not None
    assert s.type == "DECIMAL(38,2)"  # INTEGER * DECIMAL(10,2) has scale 2
    assert v.stored_of("count", a.index).type == "BIGINT"
    assert v.outputs[1].source == s.column


def test_sum_of_decimal_times_decimal_literal_is_exact():
    v = compile_view("CREATE VIEW q(storeID, Q) AS SELECT storeID, SUM(price * 1.5) AS Q FROM pos GROUP BY storeID")
    assert v.stored_of("sum", v.arguments[0].index).type == "DECIMAL(38,3)"  # scale 2 + 1, as Spark and DuckDB


def test_sum_of_integer_times_decimal_literal_is_exact():
    v = compile_view("CREATE VIEW q(storeID, Q) AS SELECT storeID, SUM(qty * 1.5) AS Q FROM pos GROUP BY storeID")
    assert v.stored_of("sum", v.arguments[0].index).type == "DECIMAL(38,1)"


def test_sum_over_integer_is_bigint():
    v = compile_view("CREATE VIEW q(storeID, Q) AS SELECT storeID, SUM(qty) AS Q FROM pos GROUP BY storeID")
    assert v.stored_of("sum", arg_of(v, '"pos"."qty"')).type == "BIGINT"


def test_view_without_column_list_uses_aliases():
    v = compile_view("CREATE VIEW q AS SELECT storeID, SUM(qty) AS Q, COUNT(*) AS N FROM pos GROUP BY storeID")
    assert [o.name for o in v.outputs] == ["storeID", "Q", "N"]


# =================================================================== 3. join forms


def _same_shape(a: View, b: View) -> None:
    assert a.fact == b.fact
    assert a.tables == b.tables
    assert a.joins == b.joins
    assert a.where == b.where
    assert a.keys == b.keys
    assert a.arguments == b.arguments
    assert a.stored == b.stored
    assert a.outputs == b.outputs


def test_join_on_and_comma_where_are_equivalent():
    on = compile_view(
        "CREATE VIEW r(region, N) AS SELECT region, COUNT(*) AS N "
        "FROM pos JOIN stores ON pos.storeID = stores.storeID GROUP BY region"
    )
    comma = compile_view(
        "CREATE VIEW r(region, N) AS SELECT region, COUNT(*) AS N "
        "FROM pos, stores WHERE pos.storeID = stores.storeID GROUP BY region"
    )
    inner = compile_view(
        "CREATE VIEW r(region, N) AS SELECT region, COUNT(*) AS N "
        "FROM pos INNER JOIN stores ON stores.storeID = pos.storeID GROUP BY region"
    )
    assert on.joins == (POS_STORES,)
    _same_shape(on, comma)
    _same_shape(on, inner)
    assert on.where is None


def test_fact_is_found_whatever_the_from_order():
    v = compile_view(
        "CREATE VIEW r(region, N) AS SELECT region, COUNT(*) AS N "
        "FROM stores, pos WHERE stores.storeID = pos.storeID GROUP BY region"
    )
    assert v.fact == "pos"
    assert v.tables == ("pos", "stores")
    assert v.joins == (POS_STORES,)


def test_aliases_resolve_to_base_table_names_and_filter_is_kept():
    v = compile_view(
        "CREATE VIEW n(city, Q) AS SELECT s.city, SUM(p.qty) AS Q "
        "FROM pos p JOIN stores s ON p.storeID = s.storeID "
        "WHERE s.region = 'north' GROUP BY s.city"
    )
    assert v.fact == "pos"
    assert v.tables == ("pos", "stores")
    assert v.joins == (POS_STORES,)
    assert v.keys == (GroupKey("city", ColumnRef("stores", "city"), "VARCHAR", True),)
    assert v.arguments[0].sql == '"pos"."qty"'
    # The filter is kept, qualified with the base table name; the join predicate is not in it.
    assert v.where is not None
    assert '"stores"."region"' in v.where and "'north'" in v.where
    assert "storeID" not in v.where
    assert '"s".' not in v.where and '"p".' not in v.where
    where = sqlglot.parse_one(v.where)
    assert {(c.table, c.name) for c in where.find_all(exp.Column)} == {("stores", "region")}


def test_filter_in_where_with_comma_join_drops_only_the_join_predicate():
    v = compile_view(
        "CREATE VIEW n(city, Q) AS SELECT city, SUM(qty) AS Q FROM pos, stores "
        "WHERE pos.storeID = stores.storeID AND region = 'north' AND qty > 0 GROUP BY city"
    )
    assert v.joins == (POS_STORES,)
    cols = {(c.table, c.name) for c in sqlglot.parse_one(v.where).find_all(exp.Column)}
    assert cols == {("stores", "region"), ("pos", "qty")}


def test_filter_in_on_clause_is_a_filter():
    v = compile_view(
        "CREATE VIEW n(city, Q) AS SELECT city, SUM(qty) AS Q "
        "FROM pos JOIN stores ON pos.storeID = stores.storeID AND stores.region = 'north' GROUP BY city"
    )
    assert v.joins == (POS_STORES,)
    cols = {(c.table, c.name) for c in sqlglot.parse_one(v.where).find_all(exp.Column)}
    assert cols == {("stores", "region")}


def test_unqualified_columns_resolve_when_unambiguous():
    v = compile_view(
        "CREATE VIEW u(category, city, Q) AS SELECT category, city, SUM(qty) AS Q "
        "FROM pos JOIN items ON pos.itemID = items.itemID JOIN stores ON pos.storeID = stores.storeID "
        "GROUP BY category, city"
    )
    assert v.tables[0] == "pos" and set(v.tables) == {"pos", "items", "stores"}
    assert set(v.joins) == {POS_ITEMS, POS_STORES}
    assert [k.ref for k in v.keys] == [ColumnRef("items", "category"), ColumnRef("stores", "city")]
    assert v.arguments[0].sql == '"pos"."qty"'


def test_group_by_column_not_selected_is_a_hidden_key():
    v = compile_view(
        "CREATE VIEW h(category, Q) AS SELECT category, SUM(qty) AS Q "
        "FROM pos, items WHERE pos.itemID = items.itemID GROUP BY storeID, category"
    )
    by_name = {k.name: k for k in v.keys}
    assert by_name["storeID"] == GroupKey("storeID", ColumnRef("pos", "storeID"), "INTEGER", False)
    assert by_name["category"].declared is True
    assert [o.name for o in v.outputs] == ["category", "Q"]  # the hidden key is no output


def test_snowflake_is_not_required_but_dimension_order_follows_the_join_tree():
    v = compile_view(
        "CREATE VIEW u(category, region, N) AS SELECT category, region, COUNT(*) AS N "
        "FROM items, stores, pos WHERE pos.itemID = items.itemID AND stores.storeID = pos.storeID "
        "GROUP BY category, region"
    )
    assert v.fact == "pos"
    assert v.tables[0] == "pos"
    assert len(v.joins) == 2
    assert tuple(j.parent for j in v.joins) == v.dimensions


# =================================================================== 4. what is not incremental, what is refused

REFUSED_FILE = "sql/summaries/refused_file.sql"
REFUSED_VIEW = "BadView"

# valid SQL that no incremental rule covers: kept by recompute, the reason names file, view and construct
RECOMPUTED = [
    ("select_distinct", "SELECT DISTINCT storeID, COUNT(*) AS N FROM pos GROUP BY storeID", ["distinct"]),
    ("window", "SELECT storeID, SUM(qty) OVER (PARTITION BY storeID) AS N FROM pos", ["window", "over"]),
    ("left_join", "SELECT region, COUNT(*) AS N FROM pos LEFT JOIN stores ON pos.storeID = stores.storeID GROUP BY region",
     ["left", "join"]),
    ("left_outer_join",
     "SELECT region, COUNT(*) AS N FROM pos LEFT OUTER JOIN stores ON pos.storeID = stores.storeID GROUP BY region",
     ["left", "join"]),
    ("full_outer_join",
     "SELECT region, COUNT(*) AS N FROM pos FULL OUTER JOIN stores ON pos.storeID = stores.storeID GROUP BY region",
     ["full", "join"]),
    ("subquery_in_where", "SELECT storeID, COUNT(*) AS N FROM pos WHERE itemID IN (SELECT itemID FROM items) GROUP BY storeID",
     ["subquery"]),
    ("exists_subquery", "SELECT storeID, COUNT(*) AS N FROM pos WHERE EXISTS (SELECT 1 FROM items) GROUP BY storeID",
     ["subquery"]),
    ("subquery_in_from", "SELECT storeID, COUNT(*) AS N FROM (SELECT * FROM pos) AS p GROUP BY storeID", ["subquery"]),
    ("count_distinct_beside_avg", "SELECT storeID, COUNT(DISTINCT itemID) AS N, AVG(qty) AS A FROM pos GROUP BY storeID",
     ["count", "distinct"]),
    ("non_fk_join_fact_to_dimension",
     "SELECT category, COUNT(*) AS N FROM pos JOIN items ON pos.qty = items.itemID GROUP BY category",
     ["foreign key", "pos.qty"]),
    ("non_fk_join_between_dimensions",
     "SELECT category, region, COUNT(*) AS N FROM pos JOIN stores ON pos.storeID = stores.storeID "
     "JOIN items ON pos.itemID = items.itemID AND stores.city = items.name GROUP BY category, region",
     ["foreign key", "city", "name"]),
    ("cross_product", "SELECT region, COUNT(*) AS N FROM pos, stores GROUP BY region", ["cross product"]),
    ("cross_product_with_one_join",
     "SELECT region, category, COUNT(*) AS N FROM pos, stores, items WHERE pos.storeID = stores.storeID "
     "GROUP BY region, category", ["cross product"]),
    ("union", "SELECT storeID, COUNT(*) AS N FROM pos GROUP BY storeID UNION ALL SELECT storeID, COUNT(*) AS N FROM pos "
     "GROUP BY storeID", ["union"]),
    ("projection", "SELECT storeID, qty FROM pos", ["projection"]),
    ("expression_over_aggregates", "SELECT storeID, SUM(qty) * 2 AS d FROM pos GROUP BY storeID", ["expression over aggregates"]),
]


@pytest.mark.parametrize("sql, construct", [r[1:] for r in RECOMPUTED], ids=[r[0] for r in RECOMPUTED])
def test_valid_sql_no_incremental_rule_covers_is_kept_by_recompute(sql, construct):
    text = f"CREATE VIEW {REFUSED_VIEW} AS {sql}"
    v = compile_project(SCHEMA_SQL, {REFUSED_FILE: text}).views[0]
    assert v.mode == "recompute" and not v.keys and not v.stored
    assert REFUSED_FILE in v.reason and REFUSED_VIEW in v.reason
    for fragment in construct:
        assert fragment in v.reason.lower(), (fragment, v.reason)
    # [views] BadView = "incremental": the same construct becomes an error naming it
    with pytest.raises(NotIncremental) as info:
        compile_project(SCHEMA_SQL, {REFUSED_FILE: text}, maintain=((REFUSED_VIEW, "incremental"),))
    assert all(f in str(info.value).lower() for f in construct) and '"incremental"' in str(info.value)


# what has no meaning at all is refused
REFUSALS = [
    ("selected_not_grouped", "SELECT storeID, itemID, COUNT(*) AS N FROM pos GROUP BY storeID", ["group by", "itemid"],
     UnsupportedView),
    ("unknown_table", "SELECT storeID, COUNT(*) AS N FROM sales GROUP BY storeID", ["unknown table", "sales"],
     UnknownReference),
    ("unknown_table_recompute", "SELECT s.storeID FROM pos LEFT JOIN sales s ON pos.storeID = s.storeID",
     ["unknown table", "sales"], UnknownReference),
    ("unknown_column", "SELECT storeID, SUM(quantity) AS N FROM pos GROUP BY storeID", ["unknown column", "quantity"],
     UnknownReference),
    ("unknown_qualified_column", "SELECT storeID, SUM(pos.quantity) AS N FROM pos GROUP BY storeID",
     ["unknown column", "quantity"], UnknownReference),
    ("unknown_column_in_group_by", "SELECT storeID, COUNT(*) AS N FROM pos GROUP BY storeID, shelf",
     ["unknown column", "shelf"], UnknownReference),
    ("ambiguous_column", "SELECT storeID, COUNT(*) AS N FROM pos JOIN stores ON pos.storeID = stores.storeID GROUP BY storeID",
     ["ambiguous", "storeid"], UnsupportedView),
    ("no_translation", "SELECT INITCAP(city) AS c, COUNT(*) AS n FROM pos JOIN stores ON pos.storeID = stores.storeID "
     "GROUP BY INITCAP(city)", ["initcap(city)", "line 1", "duckdb has no initcap"], UnsupportedView),
    ("no_translation_in_recompute", "SELECT DATE_ADD(date, 1) AS d FROM pos", ["date_add(date, 1)", "interval"],
     UnsupportedView),
    ("random", "SELECT storeID, COUNT(*) AS N FROM pos WHERE RANDOM() < 0.5 GROUP BY storeID",
     ["random()", "different value on every run"], UnsupportedView),
    ("now", "SELECT storeID, COUNT(*) AS N FROM pos WHERE date < now() GROUP BY storeID", ["now()", "every run"],
     UnsupportedView),
]


@pytest.mark.parametrize("sql, construct, error", [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_refusal_names_file_view_and_construct(sql, construct, error):
    text = f"CREATE VIEW {REFUSED_VIEW} AS {sql}"
    with pytest.raises(error) as info:
        compile_project(SCHEMA_SQL, {REFUSED_FILE: text})
    message = str(info.value)
    assert REFUSED_FILE in message
    assert REFUSED_VIEW in message
    for fragment in construct:
        assert fragment in message.lower(), (fragment, message)


def test_views_reading_each_other_in_a_cycle_are_refused():
    files = {"sql/summaries/a.sql": "CREATE VIEW a AS SELECT MAX(n) AS n FROM b",
             "sql/summaries/b.sql": "CREATE VIEW b AS SELECT MAX(n) AS n FROM a"}
    with pytest.raises(UnsupportedView, match=r"cycle: a -> b -> a"):
        compile_project(SCHEMA_SQL, files)


def test_unknown_references_are_unsupported_views():
    assert issubclass(UnknownReference, UnsupportedView)


def test_more_than_one_statement_in_a_file_is_refused():
    text = (
        "CREATE VIEW BadView(storeID, N) AS SELECT storeID, COUNT(*) AS N FROM pos GROUP BY storeID;\n"
        "CREATE VIEW OtherView(itemID, N) AS SELECT itemID, COUNT(*) AS N FROM pos GROUP BY itemID;"
    )
    with pytest.raises(UnsupportedView) as info:
        compile_project(SCHEMA_SQL, {REFUSED_FILE: text})
    message = str(info.value)
    assert REFUSED_FILE in message
    assert "one" in message.lower() and "statement" in message.lower()


def test_more_than_one_statement_message_names_the_view():
    text = (
        "CREATE VIEW BadView(storeID, N) AS SELECT storeID, COUNT(*) AS N FROM pos GROUP BY storeID;\n"
        "CREATE VIEW OtherView(itemID, N) AS SELECT itemID, COUNT(*) AS N FROM pos GROUP BY itemID;"
    )
    with pytest.raises(UnsupportedView) as info:
        compile_project(SCHEMA_SQL, {REFUSED_FILE: text})
    assert "BadView" in str(info.value)


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE VIEW BadView(a, b, N) AS SELECT storeID, storeID, COUNT(*) AS N FROM pos GROUP BY storeID",
        "CREATE VIEW BadView AS SELECT storeID AS a, pos.storeID AS b, COUNT(*) AS N FROM pos GROUP BY storeID",
    ],
    ids=["column_list", "aliases"],
)
def test_group_by_column_selected_twice_is_compiled_or_refused(sql):
    try:
        v = compile_view(sql, file=REFUSED_FILE)
    except UnsupportedView as e:  # a refusal is acceptable ...
        assert REFUSED_FILE in str(e) and REFUSED_VIEW in str(e)
    else:  # ... and so is keeping both outputs over the one key
        assert [o.name for o in v.outputs] == ["a", "b", "N"]
        assert v.outputs[0].source == v.outputs[1].source


def test_one_bad_file_fails_the_whole_project():
    files = dict(FIGURE1_FILES)
    files[REFUSED_FILE] = f"CREATE VIEW {REFUSED_VIEW} AS SELECT storeID, COUNT(*) AS N FROM sales GROUP BY storeID"
    with pytest.raises(UnsupportedView, match="refused_file.sql"):
        compile_project(SCHEMA_SQL, files)


def test_distinct_aggregates_are_kept_through_an_auxiliary_view_in_the_lake():
    """Paper 002: COUNT/SUM(DISTINCT e) beside COUNT(*), COUNT(x), SUM(x), MIN/MAX(x), with a join, a filter
    and HAVING: the view reads its auxiliary view, a delta-mode view of the fact alone kept in the lake only
    (Plan.auxiliary, not Plan.views). Paper 003: the auxiliary view keeps the fact's foreign key (storeID),
    not the dimension's attribute (region), the filter over the fact alone applied in it, only the columns
    needed; the view joins it to stores, and its DISTINCT aggregates are recomputed per changed group."""
    sql = ("CREATE VIEW reach AS SELECT stores.region, COUNT(DISTINCT pos.itemID) AS items, "
           "SUM(DISTINCT pos.itemID) AS item_sum, COUNT(*) AS n, COUNT(qty) AS counted, SUM(qty) AS q, "
           "MAX(pos.date) AS last_sale FROM pos JOIN stores ON pos.storeID = stores.storeID WHERE qty > 0 "
           "GROUP BY stores.region HAVING COUNT(DISTINCT pos.itemID) > 1")
    plan = compile_project(SCHEMA_SQL, {"sql/summaries/reach.sql": sql})
    view, = plan.views
    aux, = plan.auxiliary
    assert view.mode == "auxiliary" and view.reads == (aux.name,) and view.fact == aux.name
    assert re.fullmatch(r"pos_[0-9a-f]{8}__ns_aux", aux.name), aux.name
    assert aux.mode == "delta" and aux.fact == "pos" and aux.dimensions == ()  # no dimension attribute in it
    assert [k.name for k in aux.keys] == ["itemID", "storeID"] and "qty" in (aux.where or "")
    assert {s.kind for s in aux.stored} >= {"count_star", "sum", "max"}
    assert view.dimensions == ("stores",) and [k.name for k in view.keys] == ["region"]
    assert {s.func for s in view.stored if s.kind == "holistic"} == {"distinct count", "distinct sum"}
    assert [o.name for o in view.outputs] == ["region", "items", "item_sum", "n", "counted", "q", "last_sale"]
    assert view.having and aux.name not in {v.name for v in plan.views}
    assert plan.view(aux.name) is aux and aux in plan.incremental_views and aux in plan.copied_views
    assert "DISTINCT" in view.sql.upper()  # the oracle recomputes the user's own SQL
    # a DISTINCT argument the group keys determine: no auxiliary view (003), DISTINCT is a scalar of the key and
    # the view is kept in delta mode (test_holistic checks its served rows)
    keyed = compile_project(SCHEMA_SQL, {"sql/summaries/k.sql": "CREATE VIEW k AS SELECT itemID, COUNT(DISTINCT itemID) "
                                                                "AS n FROM pos GROUP BY itemID"})
    assert keyed.views[0].mode == "delta" and keyed.auxiliary == ()
    assert "paper 003" in keyed.views[0].reason and "DISTINCT" in keyed.views[0].sql
    # [views] reach = "recompute" keeps it by recompute, without an auxiliary view
    forced = compile_project(SCHEMA_SQL, {"sql/summaries/reach.sql": sql}, maintain=(("reach", "recompute"),))
    assert forced.views[0].mode == "recompute" and forced.auxiliary == ()


def test_views_with_the_same_auxiliary_view_share_it():
    """Paper 003: the distinct items per store, per region and per city read one auxiliary view, pos grouped
    by (itemID, storeID); the per-store view, whose groups and argument are exactly that view's columns,
    counts its rows (a delta, no recompute of a group), the others recompute their changed groups' DISTINCT
    from it joined to stores. A view with another filter gets its own."""
    files = {f"sql/summaries/{n}.sql": f"CREATE VIEW {n} AS {sql}" for n, sql in {
        "store_items": "SELECT storeID, COUNT(DISTINCT itemID) AS n FROM pos GROUP BY storeID",
        "region_items": "SELECT s.region, COUNT(DISTINCT p.itemID) AS n FROM pos p JOIN stores s ON p.storeID = s.storeID "
                        "GROUP BY s.region",
        "city_items": "SELECT s.city, COUNT(DISTINCT p.itemID) AS n FROM pos p, stores s WHERE p.storeID = s.storeID "
                      "GROUP BY 1",
        "sold_items": "SELECT storeID, COUNT(DISTINCT itemID) AS n FROM pos WHERE qty > 0 GROUP BY storeID",
    }.items()}
    plan = compile_project(SCHEMA_SQL, files)
    shared = {v.name: v.reads for v in plan.views}
    assert shared["store_items"] == shared["region_items"] == shared["city_items"] != shared["sold_items"]
    aux = plan.view(shared["store_items"][0])
    assert [k.name for k in aux.keys] == ["itemID", "storeID"] and "store_items, region_items, city_items (shared)" \
        in aux.reason or "city_items, region_items, store_items (shared)" in aux.reason, aux.reason
    assert len(plan.auxiliary) == 2
    assert not plan.view("store_items").has_holistic and plan.view("store_items").stored_of("count", 1)
    assert {s.func for s in plan.view("region_items").stored if s.kind == "holistic"} == {"distinct count"}
    # holistic and DISTINCT aggregates of several arguments: one auxiliary view keeps every argument
    two = compile_project(SCHEMA_SQL, {"sql/summaries/t.sql": "CREATE VIEW t AS SELECT storeID, COUNT(DISTINCT itemID) "
                                       "AS n, COUNT(DISTINCT date) AS d, MEDIAN(qty) AS m, MODE() WITHIN GROUP (ORDER BY "
                                       "date) AS usual FROM pos GROUP BY storeID"})
    assert two.views[0].mode == "auxiliary" and [k.name for k in two.auxiliary[0].keys] == ["date", "itemID", "qty",
                                                                                            "storeID"]
    assert {s.arg for s in two.views[0].stored if s.kind == "holistic"} == {1, 2, 3}


# =================================================================== 5. schema parsing

SCHEMA_VARIANTS = """
CREATE TABLE region (
    regionID INTEGER PRIMARY KEY,
    name VARCHAR
);
CREATE TABLE city (
    country VARCHAR,
    cityName VARCHAR,
    regionID INTEGER REFERENCES region,
    PRIMARY KEY (country, cityName)
);
CREATE TABLE store (
    storeID INTEGER,
    regionID INTEGER REFERENCES region(regionID),
    country VARCHAR NOT NULL,
    cityName VARCHAR NOT NULL,
    PRIMARY KEY (storeID),
    FOREIGN KEY (country, cityName) REFERENCES city(country, cityName)
);
CREATE TABLE sale (
    storeID INTEGER NOT NULL,
    regionID INTEGER,
    amount DECIMAL(12,3),
    FOREIGN KEY (storeID) REFERENCES store,
    FOREIGN KEY (regionID) REFERENCES region (regionID)
);
"""


def test_schema_of_the_retail_example():
    schema = parse_schema(SCHEMA_SQL)
    assert [t.name for t in schema.tables] == ["stores", "items", "pos"]
    assert schema.table("stores").primary_key == ("storeID",)
    assert schema.table("items").primary_key == ("itemID",)
    pos = schema.table("pos")
    assert pos.primary_key == ()
    assert {(fk.columns, fk.ref_table, fk.ref_columns) for fk in pos.foreign_keys} == {
        (("storeID",), "stores", ("storeID",)),
        (("itemID",), "items", ("itemID",)),
    }
    assert pos.column("qty").type == "INTEGER" and pos.column("qty").nullable
    assert pos.column("price").type == "DECIMAL(10,2)"
    assert pos.column("date").type == "DATE" and not pos.column("date").nullable
    assert schema.table("STORES") is schema.table("stores")  # case-insensitive lookup


def test_primary_keys_inline_and_table_level():
    schema = parse_schema(SCHEMA_VARIANTS, "proj/schema.sql")
    assert schema.file == "proj/schema.sql"
    assert schema.table("region").primary_key == ("regionID",)
    assert schema.table("city").primary_key == ("country", "cityName")
    assert schema.table("store").primary_key == ("storeID",)
    assert schema.table("sale").primary_key == ()
    # Primary-key columns are NOT NULL even without the keyword.
    assert not schema.table("store").column("storeID").nullable
    assert not schema.table("city").column("cityName").nullable
    assert schema.table("sale").column("regionID").nullable


def test_foreign_keys_inline_table_level_and_default_columns():
    schema = parse_schema(SCHEMA_VARIANTS, "proj/schema.sql")

    def fks(table):
        return {(fk.columns, fk.ref_table, fk.ref_columns) for fk in schema.table(table).foreign_keys}

    # inline REFERENCES t without a column list -> t's primary key
    assert fks("city") == {(("regionID",), "region", ("regionID",))}
    # inline REFERENCES t(c) and a table-level composite FOREIGN KEY
    assert fks("store") == {
        (("regionID",), "region", ("regionID",)),
        (("country", "cityName"), "city", ("country", "cityName")),
    }
    # table-level FOREIGN KEY ... REFERENCES t (no columns) -> t's primary key; and with columns
    assert fks("sale") == {
        (("storeID",), "store", ("storeID",)),
        (("regionID",), "region", ("regionID",)),
    }
    assert schema.table("sale").column("amount").type == "DECIMAL(12,3)"


def test_references_without_columns_defaults_to_primary_key_in_a_view():
    schema_sql = (
        "CREATE TABLE d (k INTEGER PRIMARY KEY, g VARCHAR);\n"
        "CREATE TABLE f (dk INTEGER REFERENCES d, v INTEGER);"
    )
    v = compile_view("CREATE VIEW x(g, S) AS SELECT g, SUM(v) AS S FROM f JOIN d ON f.dk = d.k GROUP BY g", schema_sql=schema_sql)
    assert v.fact == "f"
    assert v.joins == (Join("f", "d", ("dk",), ("k",)),)


def test_foreign_key_to_unknown_table_is_a_schema_error():
    text = "CREATE TABLE f (dk INTEGER REFERENCES nowhere(k), v INTEGER);"
    with pytest.raises(SchemaError) as info:
        parse_schema(text, "proj/bad_schema.sql")
    assert "proj/bad_schema.sql" in str(info.value)
    assert "nowhere" in str(info.value)


def test_table_level_foreign_key_to_unknown_table_through_compile_project():
    text = "CREATE TABLE f (dk INTEGER, v INTEGER, FOREIGN KEY (dk) REFERENCES elsewhere(k));"
    with pytest.raises(SchemaError) as info:
        compile_project(text, {}, schema_file="proj/bad_schema.sql")
    assert "proj/bad_schema.sql" in str(info.value)
    assert "elsewhere" in str(info.value)


def test_foreign_key_to_unknown_column_is_a_schema_error():
    text = "CREATE TABLE d (k INTEGER PRIMARY KEY);\nCREATE TABLE f (dk INTEGER REFERENCES d(missing));"
    with pytest.raises(SchemaError, match="missing"):
        parse_schema(text, "proj/schema.sql")


def test_schema_accepts_only_create_table():
    with pytest.raises(SchemaError, match="proj/schema.sql"):
        parse_schema("CREATE TABLE d (k INTEGER);\nCREATE VIEW v AS SELECT k FROM d;", "proj/schema.sql")


# =================================================================== 6. plan fingerprint and names


def test_fingerprint_is_stable():
    a = compile_project(SCHEMA_SQL, FIGURE1_FILES)
    b = compile_project(SCHEMA_SQL, dict(reversed(list(FIGURE1_FILES.items()))))
    assert a.fingerprint and a.fingerprint == b.fingerprint
    assert a.views == b.views  # views come out in file-name order whatever the dict order


def test_fingerprint_changes_when_a_view_file_changes():
    base = compile_project(SCHEMA_SQL, FIGURE1_FILES).fingerprint
    changed = dict(FIGURE1_FILES)
    changed["sql/summaries/sR_sales.sql"] = changed["sql/summaries/sR_sales.sql"].replace("SUM(qty)", "MAX(qty)")
    assert compile_project(SCHEMA_SQL, changed).fingerprint != base
    # a file renamed (same text) also changes the plan
    renamed = dict(FIGURE1_FILES)
    renamed["sql/summaries/sR_sales_v2.sql"] = renamed.pop("sql/summaries/sR_sales.sql")
    assert compile_project(SCHEMA_SQL, renamed).fingerprint != base
    # a view added or removed changes it
    fewer = {k: v for k, v in FIGURE1_FILES.items() if "sR_sales" not in k}
    assert compile_project(SCHEMA_SQL, fewer).fingerprint != base


def test_fingerprint_changes_when_the_schema_changes():
    base = compile_project(SCHEMA_SQL, FIGURE1_FILES).fingerprint
    other = SCHEMA_SQL.replace("cost     DECIMAL(10,2)", "cost     DECIMAL(12,2)")
    assert other != SCHEMA_SQL
    assert compile_project(other, FIGURE1_FILES).fingerprint != base


def test_two_files_defining_the_same_view_are_refused():
    files = {
        "sql/summaries/a.sql": "CREATE VIEW dup_sales AS SELECT storeID, COUNT(*) AS N FROM pos GROUP BY storeID",
        "sql/summaries/b.sql": "CREATE VIEW DUP_SALES AS SELECT itemID, COUNT(*) AS N FROM pos GROUP BY itemID",
    }
    with pytest.raises(UnsupportedView) as info:
        compile_project(SCHEMA_SQL, files)
    message = str(info.value)
    assert "sql/summaries/a.sql" in message and "sql/summaries/b.sql" in message
    assert "dup_sales" in message.lower()


def test_reserved_column_prefix_is_refused():
    with pytest.raises(UnsupportedView, match="_ns_"):
        compile_project(
            SCHEMA_SQL,
            {REFUSED_FILE: "CREATE VIEW BadView(_ns_count, N) AS SELECT storeID, COUNT(*) AS N FROM pos GROUP BY storeID"},
        )


# =================================================================== 7. emit

MINMAX_VIEW = (
    "CREATE VIEW mm_sales(storeID, category, AvgPrice, MinQty, MaxPrice, LastSale, Revenue, N) AS "
    "SELECT p.storeID, i.category, AVG(p.price) AS AvgPrice, MIN(p.qty) AS MinQty, MAX(p.price) AS MaxPrice, "
    "MAX(p.date) AS LastSale, SUM(p.qty * p.price) AS Revenue, COUNT(*) AS N "
    "FROM pos p JOIN items i ON p.itemID = i.itemID WHERE i.category <> 'misc' "
    "GROUP BY p.storeID, i.category"
)


def _views_for_emit():
    plan = compile_project(SCHEMA_SQL, {**FIGURE1_FILES, "sql/summaries/mm_sales.sql": MINMAX_VIEW})
    return plan.views


EMIT_VIEWS = {v.name: v for v in _views_for_emit()}


def _roundtrip(sql: str) -> None:
    for dialect in ("spark", "duckdb"):
        out = to_dialect(sql, dialect)
        parsed = sqlglot.parse_one(out, read=dialect)
        assert isinstance(parsed, exp.Query), (dialect, out)


@pytest.mark.parametrize("name", sorted(EMIT_VIEWS))
@pytest.mark.parametrize("changed", [frozenset({"pos"}), frozenset({"pos", "items", "stores"})], ids=["pos", "all"])
def test_summary_delta_is_valid_spark_and_duckdb(name, changed):
    view = EMIT_VIEWS[name]
    sql = emit.summary_delta(view, changed)
    _roundtrip(sql)
    # Typed like the summary table: one output column per key and stored aggregate, plus _ns_lost.
    select = sqlglot.parse_one(to_dialect(sql, "spark"), read="spark")
    names = [e.alias_or_name for e in select.expressions]
    assert names == [k.name for k in view.keys] + [s.column for s in view.stored] + [emit.LOST]


@pytest.mark.parametrize("name", sorted(EMIT_VIEWS))
def test_materialize_and_minmax_sql_are_valid_spark_and_duckdb(name):
    view = EMIT_VIEWS[name]
    _roundtrip(emit.materialize(view))
    for a in emit.minmax_arguments(view):
        _roundtrip(emit.minmax_recompute(view, a, frozenset({"pos", "items"})))
    if view.has_min_max:
        _roundtrip(emit.with_exact_minmax(view))


def test_minmax_view_shape():
    v = EMIT_VIEWS["mm_sales"]
    price, qty = arg_of(v, '"pos"."price"'), arg_of(v, '"pos"."qty"')
    cols = stored_columns(v)
    assert cols[f"_ns_sum_{price}"] == ("sum", price, "DECIMAL(38,2)")
    assert cols[f"_ns_max_{price}"][:2] == ("max", price)
    assert is_exact_decimal(cols[f"_ns_max_{price}"][2], scale=2)
    assert cols[f"_ns_min_{qty}"] == ("min", qty, "INTEGER")
    assert v.stored_of("sum", qty) is None
    assert '"items"."category"' in v.where


def _pc_terms(sql: str) -> list[exp.Select]:
    """The UNION ALL terms of the prepare-changes subquery inside a summary-delta."""
    tree = sqlglot.parse_one(sql)
    pc = tree.args["from_"].this
    assert isinstance(pc, exp.Subquery) and pc.alias == "pc"
    body = pc.this
    terms: list[exp.Select] = []

    def walk(node):
        if isinstance(node, exp.Union):
            walk(node.this)
            walk(node.expression)
        else:
            terms.append(node)

    walk(body)
    return terms


def _sources(term: exp.Select) -> dict[str, set[str]]:
    """alias -> the set of named relations read by the FROM/JOIN source with that alias."""
    out = {}
    for src in [term.args["from_"].this, *(j.this for j in term.args.get("joins") or [])]:
        out[src.alias_or_name] = {t.name for t in src.find_all(exp.Table)}
    return out


def test_sic_sales_fact_only_change_has_one_term():
    v = EMIT_VIEWS["SiC_sales"]
    sql = emit.summary_delta(v, frozenset({"pos"}))
    assert "__ns_old_pos" not in sql
    assert "__ns_ins_items" not in sql and "__ns_del_items" not in sql
    terms = _pc_terms(sql)
    assert len(terms) == 1
    assert _sources(terms[0]) == {"pos": {"__ns_ins_pos", "__ns_del_pos"}, "items": {"__ns_new_items"}}


def test_sic_sales_dimension_change_adds_old_fact_join_signed_delta_term():
    """Paper 4.1.4: Δ(F ⋈ D) = ΔF ⋈ D' + F ⋈ ΔD (F before the batch, D' after)."""
    v = EMIT_VIEWS["SiC_sales"]
    sql = emit.summary_delta(v, frozenset({"pos", "items"}))
    assert "__ns_old_pos" in sql
    terms = _pc_terms(sql)
    assert len(terms) == 2
    fact_term, dim_term = terms
    assert _sources(fact_term) == {"pos": {"__ns_ins_pos", "__ns_del_pos"}, "items": {"__ns_new_items"}}
    assert _sources(dim_term) == {"pos": {"__ns_old_pos"}, "items": {"__ns_ins_items", "__ns_del_items"}}
    # The second term joins on the FK and takes its sign from the items delta.
    join = dim_term.args["joins"][0]
    on = join.args["on"]
    assert {(c.table, c.name) for c in on.find_all(exp.Column)} == {("pos", "itemID"), ("items", "itemID")}
    count_src = next(e for e in dim_term.expressions if e.alias == "_src_count")
    assert {(c.table, c.name) for c in count_src.find_all(exp.Column)} == {("items", emit.SIGN)}
    count_src = next(e for e in fact_term.expressions if e.alias == "_src_count")
    assert {(c.table, c.name) for c in count_src.find_all(exp.Column)} == {("pos", emit.SIGN)}
    # MIN(date) only takes inserted values; deletions flag the group as lost.
    assert any(e.alias == "_src_lost" for e in dim_term.expressions)
    _roundtrip(sql)


def test_dimension_change_of_an_unreferenced_dimension_adds_no_term():
    v = EMIT_VIEWS["SiC_sales"]
    assert emit.summary_delta(v, frozenset({"pos", "stores"})) == emit.summary_delta(v, frozenset({"pos"}))


def test_two_dimension_changes_follow_the_telescoping_sum():
    """Δ(F⋈S⋈I) = ΔF⋈S'⋈I' + F⋈ΔS⋈I' + F⋈S⋈ΔI: each term has one delta, earlier dims old, later new."""
    v = compile_view(
        "CREATE VIEW u(category, region, N) AS SELECT category, region, COUNT(*) AS N "
        "FROM pos JOIN stores ON pos.storeID = stores.storeID JOIN items ON pos.itemID = items.itemID "
        "GROUP BY category, region"
    )
    d1, d2 = v.dimensions
    terms = _pc_terms(emit.summary_delta(v, frozenset({"pos", "stores", "items"})))
    assert len(terms) == 3
    delta = lambda t: {f"__ns_ins_{t}", f"__ns_del_{t}"}  # noqa: E731
    assert _sources(terms[0]) == {"pos": delta("pos"), d1: {f"__ns_new_{d1}"}, d2: {f"__ns_new_{d2}"}}
    assert _sources(terms[1]) == {"pos": {"__ns_old_pos"}, d1: delta(d1), d2: {f"__ns_new_{d2}"}}
    assert _sources(terms[2]) == {"pos": {"__ns_old_pos"}, d1: {f"__ns_old_{d1}"}, d2: delta(d2)}


def test_filter_is_applied_in_every_term():
    v = EMIT_VIEWS["mm_sales"]
    terms = _pc_terms(emit.summary_delta(v, frozenset({"pos", "items"})))
    assert len(terms) == 2
    for t in terms:
        where = t.args.get("where")
        assert where is not None
        assert ("items", "category") in {(c.table, c.name) for c in where.find_all(exp.Column)}


def test_the_base_term_of_an_extremes_recompute_is_counted_only_for_a_view_of_plain_fact_columns():
    """emit.fact_columns: the fact's columns behind a view's keys and argument when the view reads its fact
    table alone and each is one of its columns; minmax_recompute then reads the counts (old_counts) instead of
    the base, and stays valid SQL."""
    plain = compile_view("CREATE VIEW f(storeID, itemID, First) AS SELECT storeID, itemID, MIN(date) AS First "
                         "FROM pos GROUP BY storeID, itemID")
    (arg,) = emit.minmax_arguments(plain)
    assert emit.fact_columns(plain, arg) == (["storeID", "itemID"], "date")
    sql = emit.minmax_recompute(plain, arg, frozenset({"pos"}), old_counts="__ns_counted_f")
    _roundtrip(sql)
    assert "__ns_counted_f" in sql and emit.rel("old", "pos") not in sql
    filtered = compile_view("CREATE VIEW f(storeID, First) AS SELECT storeID, MIN(date) AS First FROM pos "
                            "WHERE qty > 0 GROUP BY storeID")
    assert emit.fact_columns(filtered, emit.minmax_arguments(filtered)[0]) is None
    joined = EMIT_VIEWS["mm_sales"]
    assert all(emit.fact_columns(joined, a) is None for a in emit.minmax_arguments(joined))
